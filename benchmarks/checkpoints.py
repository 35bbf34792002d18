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

The ``nested`` rows are real pauses: a ``Supervisor`` hands over to a ``SequentialAgent`` whose
``ParallelAgent`` runs two ``ReActAgent``s, one of which pauses on an approval-gated tool after
``rounds`` lookups (both branches make as many): 1 round (a small run, 14 recorded messages) and 50
(204 messages). The checkpoint the runner wrote is loaded once to get the paused run's state back,
then saved and loaded as the runner does, by the codec alone (``codec``: build the body and encode
it; decode it, parse it and rebuild the history) and through a store (``memory``, ``sqlite``: the
same plus ``put`` / ``get``). The module is also a workload for the harness (``build``), so
``python -m benchmarks --only checkpoints --instructions`` counts each of these rows with callgrind.

Run from the repository root: ``python -m benchmarks.checkpoints [--repeat N]`` (the table below), or
as part of the suite: ``python -m benchmarks --only checkpoints``.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import itertools
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import adk
from adk import Agent, ParallelAgent, Role, Runner, SequentialAgent
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.checkpoint._snapshot import load_history, parse_body, snapshot_body
from adk.checkpoint.codec import decode_checkpoint, encode_checkpoint
from adk.checkpoint.store import CheckpointStore
from adk.context import Session, _Entry, _RunState, new_entry, new_run
from adk.interrupts import _InterruptSignal
from adk.messages import Message, ToolCall
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent, Supervisor

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


# -- nested: a real pause of Supervisor > SequentialAgent > ParallelAgent > ReActAgent -------------
NESTED = {"small": 1, "long": 50}  # lookup rounds each branch makes before the pause
NESTED_VARIANTS = ("codec", "memory", "sqlite")


def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"{topic}: {TEXT}"


@adk.tool(require_approval=True)
def publish(title: str) -> str:
    """Publish the summary (needs a person's approval).

    Args:
        title: The summary's title.
    """
    return f"published {title}"


def _researcher(rounds: int, publishes: bool) -> Callable[[list[Message]], Reply]:
    """A branch's model: ``rounds`` lookups, then (``publishes``) the gated publish, or an answer."""

    def respond(messages: list[Message]) -> Reply:
        done = sum(1 for m in messages if m.role == Role.TOOL)
        if done < rounds:
            call = tool_call("lookup", {"topic": f"part {done}"}, id=f"call_{done}")
            return Reply(text=f"Looking up part {done}.", tool_calls=[call])
        if publishes and done == rounds:
            return Reply(text="Publishing.", tool_calls=[tool_call("publish", {"title": "Q3"})])
        return Reply(text=TEXT)

    return respond


def _boss(messages: list[Message]) -> Reply:
    transfer = tool_call("transfer_to_agent", {"agent_name": "team"}, id="call_t")
    return Reply(text="Handing over to the team.", tool_calls=[transfer])


def nested_agent(rounds: int) -> Agent:
    """The supervisor tree whose run pauses in its first branch after ``rounds`` lookups."""

    def react(name: str, publishes: bool) -> ReActAgent:
        model = ScriptedModel(_researcher(rounds, publishes), record=False)
        tools = [lookup, publish] if publishes else [lookup]
        return ReActAgent(name, model, tools=tools, max_iterations=rounds + 2)

    branches = ParallelAgent("branches", [react("analyst", True), react("checker", False)])
    team = SequentialAgent("team", [branches], description="Researches the figures.")
    return Supervisor(ReActAgent("boss", ScriptedModel(_boss, record=False)), [team])


async def nested_checkpoint(rounds: int) -> bytes:
    """The checkpoint the runner writes when the nested tree pauses after ``rounds`` lookups."""
    store = InMemoryCheckpointStore()
    result = await Runner(nested_agent(rounds), checkpoint_store=store).invoke("Sum up Q3.")
    assert result.checkpoint_id is not None, "the nested run did not pause"
    data = await store.get(result.checkpoint_id)
    assert data is not None
    return data


def _paused_again(data: bytes) -> tuple[_RunState, _InterruptSignal]:
    """The paused run's state (history, session, saved states) as the runner held it at the
    pause, read back from its checkpoint."""
    snapshot = parse_body(decode_checkpoint(data, "bench"), "bench")
    run = new_run(snapshot.root_input, Session(snapshot.session), snapshot.run_id)
    load_history(run, snapshot.history)
    return run, snapshot.signal


async def _nested_variants(rounds: int, how: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    """``save`` and ``load`` of the nested run's checkpoint, by the codec alone or through a store."""
    data = await nested_checkpoint(rounds)
    run, signal = _paused_again(data)
    if how == "codec":

        async def save() -> int:
            return len(encode_checkpoint(snapshot_body(run, signal, "boss", False)))

        async def load() -> None:
            snapshot = parse_body(decode_checkpoint(data, "bench"), "bench")
            load_history(new_run(snapshot.root_input, Session(snapshot.session)), snapshot.history)

        return {"save": save, "load": load}
    store: CheckpointStore
    if how == "memory":
        store = InMemoryCheckpointStore()
    else:
        folder = tempfile.mkdtemp(prefix="pyadk-bench-")
        atexit.register(shutil.rmtree, folder, True)
        store = SQLiteCheckpointStore(Path(folder) / "bench.db")
    await _save(store, run, signal)
    return {"save": partial(_save, store, run, signal), "load": partial(_load, store)}


async def build(scenario: str) -> dict[str, Callable[[], Awaitable[Any]]]:
    """The harness's workload protocol (``benchmarks._harness``): ``nested.<size>.<how>``, with
    variants ``save`` and ``load``, for the instruction counts of the nested rows."""
    _, size, how = scenario.split(".")
    return await _nested_variants(NESTED[size], how)


async def _measure_nested(repeat: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for size, rounds in NESTED.items():
        data = await nested_checkpoint(rounds)
        history = len(parse_body(decode_checkpoint(data, "bench"), "bench").history)
        for how in NESTED_VARIANTS:
            variants = await _nested_variants(rounds, how)
            for action, fn in variants.items():
                ms = await _median_ms(fn, repeat)
                rows.append(
                    {
                        "benchmark": f"checkpoints.nested.{size}.{how}.{action}",
                        "messages": history,
                        "bytes": len(data),
                        "us": ms * 1000,
                        # What ``python -m benchmarks --instructions`` counts this row by.
                        "count": [f"nested.{size}.{how}", action],
                    }
                )
    return rows


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
    return rows + await _measure_nested(repeat)


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
        if "count" in r:
            continue
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
    rows = run(parser.parse_args().repeat)
    print(_table(rows))
    for r in rows:
        if "count" in r:
            print(
                f"{r['benchmark']:<40} {r['messages']:>4} messages {r['bytes']:>7} B {r['us']:>9.1f} µs"
            )
