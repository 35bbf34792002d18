"""Put and get latency of every checkpoint store, for 1 KiB and 100 KiB checkpoints.

Memory and SQLite always run; Redis and PostgreSQL run when their server binaries are installed,
started on loopback by the same helpers the tests use (tests/services.py), PostgreSQL with its
durable defaults (fsync on) so the numbers mean what they would in production. SQLite writes with
``synchronous=FULL`` (an fsync per commit), so its put figure depends on the disk.

Per store and size: ``put_us`` and ``get_us`` are the medians (over rounds) of the mean latency of
one task doing ``ops`` sequential puts, then gets; ``concurrent_us`` is the wall time per put+get
pair when 50 tasks share the store — what a server running many paused runs sees.
``claim_release_us`` (stores that can claim) is the mean latency of one claim plus its release: what
every ``runner.resume`` adds so that only one process resumes a checkpoint at a time (SQLite writes
claims without the fsync).
``pending_ms`` (one row per store) is the wall time of ``list_pending`` over ``PAUSED`` paused runs
whose histories hold ``PAUSED_EVENTS`` events each: what a service polling its approvals page pays.

Run from the repository root: ``python -m benchmarks.checkpoint_stores [--rounds N] [--ops N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from adk.checkpoint import (
    CheckpointStore,
    ClaimingCheckpointStore,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
    list_pending,
)
from adk.checkpoint._snapshot import snapshot_body
from adk.checkpoint.codec import encode_checkpoint
from benchmarks.checkpoints import _paused_run
from tests.services import ServiceUnavailable, run_postgres, run_redis

SIZES = (1024, 100 * 1024)
TASKS = 50
KEYS = 10  # ids cycled through, so puts are mostly overwrites, as checkpoints of live runs are
PAUSED = 100  # paused runs listed by ``pending_ms``
PAUSED_EVENTS = 1_000  # events in each one's history


async def _timed(fn: Callable[[int], Any], ops: int) -> float:
    start = time.perf_counter()
    for i in range(ops):
        await fn(i)
    return (time.perf_counter() - start) / ops * 1e6


async def _measure(store: CheckpointStore, size: int, rounds: int, ops: int) -> dict[str, float]:
    payload = os.urandom(size)

    async def put(i: int, task: int = 0) -> None:
        await store.put(f"bench-{task}-{i % KEYS}", payload)

    async def get(i: int, task: int = 0) -> None:
        if await store.get(f"bench-{task}-{i % KEYS}") is None:
            raise RuntimeError("benchmark value vanished")

    async def pair(i: int, task: int = 0) -> None:
        await put(i, task)
        await get(i, task)

    async def concurrent() -> float:
        per_task = max(1, ops // TASKS)
        start = time.perf_counter()
        await asyncio.gather(
            *(_timed(functools.partial(pair, task=task), per_task) for task in range(TASKS))
        )
        return (time.perf_counter() - start) / (per_task * TASKS) * 1e6

    await _timed(pair, ops)  # warm up: connections, table creation, caches
    puts, gets, together = [], [], []
    for _ in range(rounds):
        puts.append(await _timed(put, ops))
        gets.append(await _timed(get, ops))
        together.append(await concurrent())
    return {
        "put_us": statistics.median(puts),
        "get_us": statistics.median(gets),
        "concurrent_us": statistics.median(together),
    }


async def _measure_claims(store: ClaimingCheckpointStore, rounds: int, ops: int) -> float:
    async def claim_release(i: int) -> None:
        if not await store.claim(f"bench-{i % KEYS}", "bench"):
            raise RuntimeError("benchmark claim refused")
        await store.release(f"bench-{i % KEYS}", "bench")

    await _timed(claim_release, ops)
    return statistics.median([await _timed(claim_release, ops) for _ in range(rounds)])


async def _measure_pending(store: CheckpointStore, rounds: int) -> tuple[float, int]:
    """Median ms of listing ``PAUSED`` paused runs of ``PAUSED_EVENTS`` events each, and the
    bytes of one checkpoint."""
    run, signal = _paused_run(PAUSED_EVENTS)
    data = encode_checkpoint(snapshot_body(run, signal, "root", False))
    for n in range(PAUSED):
        await store.put(f"paused-{n:03}", data)

    async def listing() -> float:
        start = time.perf_counter()
        found = [entry async for entry in list_pending(store, "paused-")]
        if len(found) != PAUSED or any(entry.error is not None for entry in found):
            raise RuntimeError("the benchmark's paused runs did not list")
        return (time.perf_counter() - start) * 1000

    await listing()  # warm up
    times = [await listing() for _ in range(rounds)]
    for n in range(PAUSED):
        await store.delete(f"paused-{n:03}")
    return statistics.median(times), len(data)


async def _bench_store(
    make: Callable[[], CheckpointStore], rounds: int, ops: int
) -> tuple[list[Any], tuple[float, int]]:
    store = make()
    try:
        results = [(size, await _measure(store, size, rounds, ops)) for size in SIZES]
        if isinstance(store, ClaimingCheckpointStore):
            claims = await _measure_claims(store, rounds, ops)
            for _, result in results:
                result["claim_release_us"] = claims
        return results, await _measure_pending(store, rounds)
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


@contextlib.contextmanager
def _stores(
    *, memory: bool = True, durable: bool = True
) -> Iterator[list[tuple[str, Callable[[], CheckpointStore] | str]]]:
    """(name, factory) per store, or (name, reason) when its server is not installed; the
    in-memory store when ``memory``, PostgreSQL fsyncing when ``durable`` (its production mode,
    for a write's cost; a read-only benchmark needs no fsync)."""
    with contextlib.ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pyadk-bench-")))
        stores: list[tuple[str, Callable[[], CheckpointStore] | str]] = [
            ("sqlite", lambda: SQLiteCheckpointStore(directory / "bench.db")),
        ]
        if memory:
            stores.insert(0, ("memory", InMemoryCheckpointStore))
        try:
            url = stack.enter_context(run_redis()).url
            stores.append(("redis", lambda: RedisCheckpointStore(url)))
        except ServiceUnavailable as exc:
            stores.append(("redis", str(exc)))
        try:
            dsn = stack.enter_context(run_postgres(durable=durable)).dsn
            stores.append(("postgres", lambda: PostgresCheckpointStore(dsn)))
        except ServiceUnavailable as exc:
            stores.append(("postgres", str(exc)))
        yield stores


def run(rounds: int = 5, ops: int = 200) -> list[dict[str, Any]]:
    """One row per store and payload size; a store whose server is missing gets a ``skipped`` row."""
    rows: list[dict[str, Any]] = []
    with _stores() as stores:
        for name, factory in stores:
            if isinstance(factory, str):
                rows.append({"benchmark": f"checkpoint_stores.{name}", "skipped": factory})
                continue
            results, (pending_ms, paused_bytes) = asyncio.run(_bench_store(factory, rounds, ops))
            for size, result in results:
                rows.append(
                    {
                        "benchmark": f"checkpoint_stores.{name}.{size // 1024}KiB",
                        "store": name,
                        "payload_bytes": size,
                        "put_us": round(result["put_us"], 1),
                        "get_us": round(result["get_us"], 1),
                        "put_get_us": round(result["put_us"] + result["get_us"], 1),
                        "concurrent_put_get_us": round(result["concurrent_us"], 1),
                        "claim_release_us": round(result.get("claim_release_us", 0.0), 1) or None,
                    }
                )
            rows.append(
                {
                    "benchmark": f"checkpoint_stores.{name}.pending_{PAUSED}x{PAUSED_EVENTS}ev",
                    "store": name,
                    "paused": PAUSED,
                    "checkpoint_bytes": paused_bytes,
                    "pending_ms": round(pending_ms, 2),
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="checkpoint store put/get latency")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--ops", type=int, default=200, help="operations per timed batch")
    args = parser.parse_args()
    rows = run(args.rounds, args.ops)
    print(f"{'store':<10} {'payload':>8} {'put µs':>9} {'get µs':>9} {'put+get µs':>11} "
          f"{'50 tasks: µs per put+get':>25} {'claim+release µs':>17}")  # fmt: skip
    for row in rows:
        if "skipped" in row:
            print(f"{row['benchmark'].rsplit('.', 1)[1]:<10} skipped: {row['skipped']}")
            continue
        if "pending_ms" in row:
            continue
        print(
            f"{row['store']:<10} {row['payload_bytes'] // 1024:>5} KiB {row['put_us']:>9.1f} "
            f"{row['get_us']:>9.1f} {row['put_get_us']:>11.1f} {row['concurrent_put_get_us']:>25.1f}"
            f" {row['claim_release_us'] or '–':>17}"
        )
    print(f"\nlist_pending of {PAUSED} paused runs, {PAUSED_EVENTS} events of history each:")
    for row in rows:
        if "pending_ms" in row:
            size = row["checkpoint_bytes"] // 1024
            print(f"{row['store']:<10} {row['pending_ms']:>9.1f} ms  ({size} KiB per checkpoint)")


if __name__ == "__main__":
    main()
