"""``list_pending`` over many paused runs, per store: what listing a large approvals backlog costs.

Puts ``--paused`` (default 20,000) copies of one paused run's checkpoint (10 events of history,
about 6 KiB) in SQLite and, when their servers are installed, Redis and PostgreSQL (started on
loopback by tests/services.py), then times ``list_pending`` over them. Per store: ``wall_s`` and
``cpu_s`` (this process's CPU time: the client's share, steadier than the wall time on a shared
machine) are medians over ``--rounds`` listings; ``sends`` (Redis) counts the writes the
client made, one per round trip. The store's listing reads 16 checkpoints per batch, so 20,000
paused runs are 1,250 batches.

Run from the repository root: ``python -m benchmarks.checkpoint_listing [--paused N] [--rounds N]``.
docs/performance.md has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections.abc import Iterator
from typing import Any

from adk.checkpoint import (
    CheckpointStore,
    RedisCheckpointStore,
    list_pending,
)
from adk.checkpoint._snapshot import snapshot_body
from adk.checkpoint.codec import encode_checkpoint
from benchmarks.checkpoint_stores import _stores
from benchmarks.checkpoints import _paused_run

PAUSED = 20_000
EVENTS = 10


@contextlib.contextmanager
def _sends() -> Iterator[list[int]]:
    """Counts redis-py's writes (one per command or pipeline sent: a round trip) while open."""
    import redis.asyncio.connection as connection

    count = [0]
    send = connection.AbstractConnection.send_packed_command

    async def counted(self: Any, *args: Any, **kwargs: Any) -> None:
        count[0] += 1
        await send(self, *args, **kwargs)

    connection.AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]
    try:
        yield count
    finally:
        connection.AbstractConnection.send_packed_command = send  # type: ignore[method-assign]


async def _bench(store: CheckpointStore, paused: int, rounds: int) -> dict[str, Any]:
    run, signal = _paused_run(EVENTS)
    data = encode_checkpoint(snapshot_body(run, signal, "root", False))
    limit = asyncio.Semaphore(50)

    async def put(n: int) -> None:
        async with limit:
            await store.put(f"paused-{n:06}", data)

    await asyncio.gather(*(put(n) for n in range(paused)))
    walls, cpus, sends = [], [], 0
    for _ in range(rounds + 1):  # the first warms up
        with _sends() as count:
            wall, cpu = time.perf_counter(), time.process_time()
            found = [entry async for entry in list_pending(store, "paused-")]
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        if len(found) != paused or any(entry.error is not None for entry in found):
            raise RuntimeError("the benchmark's paused runs did not list")
        sends = count[0]
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()
    return {
        "wall_s": round(statistics.median(walls[1:]), 2),
        "cpu_s": round(statistics.median(cpus[1:]), 2),
        "sends": sends if isinstance(store, RedisCheckpointStore) else None,
        "checkpoint_bytes": len(data),
    }


def run(paused: int = PAUSED, rounds: int = 3) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with _stores(memory=False, durable=False) as stores:
        for name, factory in stores:
            if isinstance(factory, str):
                rows.append({"benchmark": f"checkpoint_listing.{name}", "skipped": factory})
                continue
            found = asyncio.run(_bench(factory(), paused, rounds))
            rows.append({"benchmark": f"checkpoint_listing.{name}.{paused}", **found})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="list_pending over many paused runs")
    parser.add_argument("--paused", type=int, default=PAUSED)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for row in run(args.paused, args.rounds):
        if "skipped" in row:
            print(f"{row['benchmark']}: skipped: {row['skipped']}")
            continue
        sends = "" if row["sends"] is None else f"  {row['sends']} round trips"
        print(f"{row['benchmark']:<36} {row['wall_s']:>6.2f} s  cpu {row['cpu_s']:.2f} s{sends}")


if __name__ == "__main__":
    main()
