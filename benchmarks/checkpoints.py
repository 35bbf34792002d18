"""Checkpoint save + load time and size as a paused run's history grows (10, 100, 1,000 events).

Save is what the runner does when a run pauses: build the checkpoint body from the run (root input,
session, history, points, saved states), encode it (JSON + SHA-256 header) and ``put`` it in the
store. Load is what ``runner.resume`` does before the agent runs again: ``get``, verify and decode,
rebuild the values (registered models by validation) and the history. Both call the same internal
functions the runner calls, so the figures are the runner's own cost without agent work.

The history is realistic: rounds of an assistant message with a tool call, the tool's result and an
assistant answer, about 200 characters each. The paused agent's saved state holds the last few
messages, like a ``ReActAgent``'s. Stores: in memory (the codec alone) and a SQLite file (WAL,
``synchronous=FULL``, so a save includes an fsync).

Cost must grow linearly with the history: the per-event figures should stay flat, and the marginal
cost (extra time per extra event between two sizes) should match between 10→100 and 100→1,000.

Run from the repository root: ``python -m benchmarks.checkpoints [--repeat N]`` (the table below), or
as part of the suite: ``python -m benchmarks --only checkpoints``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.checkpoint._snapshot import load_history, parse_body, snapshot_body
from adk.checkpoint.codec import decode_checkpoint, encode_checkpoint
from adk.checkpoint.store import CheckpointStore
from adk.context import Session, _Entry, _RunState, new_entry, new_run
from adk.interrupts import _InterruptSignal
from adk.messages import Message, ToolCall

SIZES = (10, 100, 1_000)
TEXT = (
    "The quarterly figures show revenue up 4% on last year, driven by the new subscription tier; "
    "costs rose faster than planned because of the data-centre move, which finished in March. "
)


def _history(events: int) -> list[tuple[str, Message]]:
    """``events`` recorded messages in rounds of call, result and answer."""
    out: list[tuple[str, Message]] = []
    i = 0
    while len(out) < events:
        call = ToolCall(id=f"call_{i}", name="lookup", arguments=f'{{"query": "figures {i}"}}')
        round_ = [
            ("analyst", Message.assistant("Let me look that up.", [call])),
            ("analyst", Message.tool(TEXT, tool_call_id=call.id, name="lookup")),
            ("writer", Message.assistant(TEXT)),
        ]
        out.extend(round_[: events - len(out)])
        i += 1
    return out


def _paused_run(events: int) -> tuple[_RunState, _InterruptSignal]:
    """A run paused after ``events`` recorded events, as the runner sees it when saving."""
    run = new_run(
        [Message.user("Summarise the quarter.")], Session({"user": "Ann", "n": 3}), "bench"
    )
    for agent, message in _history(events):
        run.history.entries.append(_entry(run, agent, message))
    address = "agent:root/agent:writer/tool:approve#call_x"
    signal = _InterruptSignal.single(address, {"question": "publish?"}, {"draft": TEXT})
    recent = [entry.message for entry in run.history.entries[-6:]]
    signal.save("agent:root/agent:writer", {"messages": recent, "iterations": 2, "open": ["x"]})
    signal.save("agent:root", {"index": 1, "run_path": ["root", "analyst", "writer"]})
    return run, signal


def _entry(run: _RunState, agent: str, message: Message) -> _Entry:
    return new_entry(agent, ("root", agent), message, run.next_seq())


async def _save(store: CheckpointStore, run: _RunState, signal: _InterruptSignal) -> int:
    data = encode_checkpoint(snapshot_body(run, signal, "root", False))
    await store.put("bench", data)
    return len(data)


async def _load(store: CheckpointStore) -> None:
    data = await store.get("bench")
    assert data is not None
    snapshot = parse_body(decode_checkpoint(data, "bench"), "bench")
    run = new_run(snapshot.root_input, Session(snapshot.session))
    load_history(run, snapshot.history)


async def _median_ms(action: Callable[[], Awaitable[Any]], repeat: int) -> float:
    await action()  # warm up (and open the SQLite file)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def _measure(store_name: str, store: CheckpointStore, repeat: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for events in SIZES:
        run, signal = _paused_run(events)
        size = await _save(store, run, signal)
        save_ms = await _median_ms(partial(_save, store, run, signal), repeat)
        load_ms = await _median_ms(partial(_load, store), repeat)
        rows.append(
            {
                "benchmark": f"checkpoints.{store_name}.{events}ev",
                "store": store_name,
                "events": events,
                "bytes": size,
                "bytes_per_event": size / events,
                "save_ms": save_ms,
                "load_ms": load_ms,
                "save_us_per_event": save_ms * 1000 / events,
                "load_us_per_event": load_ms * 1000 / events,
            }
        )
    for previous, row in itertools.pairwise(rows):
        extra = row["events"] - previous["events"]
        row["marginal_save_us"] = (row["save_ms"] - previous["save_ms"]) * 1000 / extra
        row["marginal_load_us"] = (row["load_ms"] - previous["load_ms"]) * 1000 / extra
        row["marginal_bytes"] = (row["bytes"] - previous["bytes"]) / extra
    return rows


async def _run_all(repeat: int) -> list[dict[str, Any]]:
    rows = await _measure("memory", InMemoryCheckpointStore(), repeat)
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteCheckpointStore(Path(tmp) / "bench.db") as store:
            rows += await _measure("sqlite", store, repeat)
    return rows


def run(repeat: int = 20, quick: bool = False) -> list[dict[str, Any]]:
    """Measure every store and size; one dict per (store, size). ``quick``: few repetitions (the
    ``python -m benchmarks --quick`` smoke run)."""
    rows = asyncio.run(_run_all(3 if quick else repeat))
    for row in rows:
        for key, value in row.items():
            if isinstance(value, float):
                row[key] = round(value, 3)
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'store':<7} {'events':>6} {'bytes':>9} {'B/event':>8} {'save ms':>8} {'load ms':>8} "
        f"{'save µs/ev':>10} {'load µs/ev':>10} {'marg save':>9} {'marg load':>9}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        marginal_save = f"{r['marginal_save_us']:9.1f}" if "marginal_save_us" in r else f"{'':9}"
        marginal_load = f"{r['marginal_load_us']:9.1f}" if "marginal_load_us" in r else f"{'':9}"
        lines.append(
            f"{r['store']:<7} {r['events']:>6} {r['bytes']:>9} {r['bytes_per_event']:>8.0f} "
            f"{r['save_ms']:>8.2f} {r['load_ms']:>8.2f} {r['save_us_per_event']:>10.1f} "
            f"{r['load_us_per_event']:>10.1f} {marginal_save} {marginal_load}"
        )
    lines.append(
        "µs/ev: total time / events. marg: extra µs per extra event since the previous size; "
        "flat marginal cost = linear growth."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=20, help="timed repetitions per figure")
    print(_table(run(parser.parse_args().repeat)))
