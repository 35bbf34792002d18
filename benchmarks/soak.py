"""Soak: thousands of runs through one shared ``Runner`` per workload, and what stays behind.

A service keeps its runners, models and stores for the life of the process; a per-run leak (a
cache, a registry, a per-loop client map, a span, a weak reference that is never dropped) shows
only after thousands of runs. Each round makes ``runs`` iterations of three workloads, each through
its one long-lived runner: a ``ReActAgent`` calling a tool; a ``Supervisor`` handing over to a
worker that calls a tool; a ``SequentialAgent`` whose middle step pauses on an approval, saved to
the checkpoint store, and is resumed. A fifth as many iterations warm up first (caches filled, the
allocator settled); then growth is measured: resident memory (``VmRSS``) and open file descriptors
over ``runs`` iterations, the bytes ``tracemalloc`` sees still allocated after a full collection
over a fifth as many more (apart: its own records grow the resident memory), and tasks left.
Flat is the target: a few KiB of ``tracemalloc`` (interpreter and allocator noise), no fds, no
tasks; RSS moves in allocator pages and is shown, not judged.

Settings: the checkpoint store (``memory``, ``sqlite``, ``redis``, ``postgres``: the last two
started on loopback by tests/services.py, skipped when not installed) and tracing (off, or on with
an in-memory OpenTelemetry exporter cleared after each iteration).

Run from the repository root: ``python -m benchmarks.soak [--runs N] [--store NAME ...]
[--tracing]``; ``python -m benchmarks`` runs it as one of its extra modules.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adk
from adk import Runner, SequentialAgent
from adk.checkpoint import (
    CheckpointStore,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
)
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent, Supervisor
from tests.services import ServiceUnavailable, run_postgres, run_redis

STORES = ("memory", "sqlite", "redis", "postgres")


@adk.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@adk.tool
async def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@adk.tool(require_approval=True)
def pay(amount: int) -> str:
    """Pay an amount; a person approves every call."""
    return f"paid {amount}"


def _scripted(*items: Any) -> ScriptedModel:
    return ScriptedModel(list(items), cycle=True, record=False)


def _call(name: str, arguments: dict[str, Any]) -> Reply:
    return Reply(tool_calls=[tool_call(name, arguments)])


def _runners(store: CheckpointStore, tracer_provider: Any) -> tuple[Runner, Runner, Runner]:
    react = ReActAgent("calc", _scripted(_call("add", {"a": 1, "b": 2}), "3"), tools=[add])
    worker = ReActAgent(
        "weather",
        _scripted(_call("weather", {"city": "Oslo"}), "Sunny."),
        description="Knows the weather.",
        tools=[weather],
    )
    boss = ReActAgent(
        "boss", _scripted(_call("transfer_to_agent", {"agent_name": "weather"}), "done")
    )
    payer = ReActAgent("payer", _scripted(_call("pay", {"amount": 5}), "ok"), tools=[pay])
    flow = SequentialAgent(
        "flow",
        [ReActAgent("pre", _scripted("pre")), payer, ReActAgent("post", _scripted("post"))],
    )
    return (
        Runner(react, tracer_provider=tracer_provider),
        Runner(Supervisor(boss, [worker]), tracer_provider=tracer_provider),
        Runner(flow, checkpoint_store=store, tracer_provider=tracer_provider),
    )


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@contextlib.contextmanager
def _store(name: str, directory: str) -> Iterator[CheckpointStore]:
    if name == "memory":
        yield InMemoryCheckpointStore()
    elif name == "sqlite":
        yield SQLiteCheckpointStore(Path(directory) / "soak.db")
    elif name == "redis":
        with run_redis() as redis:
            yield RedisCheckpointStore(redis.url)
    elif name == "postgres":
        with run_postgres() as postgres:
            yield PostgresCheckpointStore(postgres.dsn)
    else:
        raise ValueError(f"unknown store {name!r}; choose from {', '.join(STORES)}")


async def _soak(store: CheckpointStore, runs: int, tracing: bool) -> dict[str, Any]:
    exporter = provider = None
    if tracing:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    react, supervisor, flow = _runners(store, provider)

    async def iteration() -> None:
        assert (await react.invoke("What is 1 + 2?")).text == "3"
        assert (await supervisor.invoke("Weather in Oslo?")).text == "done"
        paused = await flow.invoke("Pay 5.")
        assert paused.interrupt is not None and paused.checkpoint_id is not None
        assert (await flow.invoke_resume(paused.checkpoint_id, True)).text == "post"
        if exporter is not None:
            exporter.clear()

    traced_runs = max(runs // 5, 1)
    for _ in range(traced_runs):
        await iteration()
    gc.collect()
    rss, fds = _rss_kib(), _fds()
    started = time.perf_counter()
    for _ in range(runs):
        await iteration()
    elapsed = time.perf_counter() - started
    gc.collect()
    rss_growth, fd_growth = _rss_kib() - rss, _fds() - fds
    # Apart from the RSS window: tracemalloc's own records grow the resident memory.
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    for _ in range(traced_runs):
        await iteration()
    gc.collect()
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    growth = after.compare_to(before, "lineno")
    top = max(growth, key=lambda stat: stat.size_diff, default=None)
    row = {
        "runs": runs,
        "seconds": round(elapsed, 1),
        "rss_growth_kib": rss_growth,
        "tracemalloc_runs": traced_runs,
        "tracemalloc_growth_kib": round(sum(stat.size_diff for stat in growth) / 1024, 1),
        "top_growth": str(top) if top is not None else "",
        "fd_growth": fd_growth,
        "tasks_left": len(asyncio.all_tasks()) - 1,
    }
    for runner in (react, supervisor, flow):
        await runner.aclose()
    return row


def run(
    runs: int = 5000,
    stores: tuple[str, ...] = STORES,
    tracing: tuple[bool, ...] = (False, True),
    quick: bool = False,
) -> list[dict[str, Any]]:
    """One row per store and tracing setting (``quick``: 50 runs, memory and SQLite only)."""
    if quick:
        runs, stores = 50, ("memory", "sqlite")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pyadk-soak-") as directory:
        for name in stores:
            for traced in tracing:
                label = f"soak.{name}{'.traced' if traced else ''}"
                try:
                    with _store(name, directory) as store:
                        row = asyncio.run(_soak(store, runs, traced))
                except ServiceUnavailable as exc:
                    rows.append({"benchmark": label, "skipped": str(exc)})
                    continue
                rows.append({"benchmark": label, **row})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="growth after thousands of runs per runner")
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--store", choices=STORES, action="append")
    parser.add_argument("--tracing", action="store_true", help="only with tracing on")
    args = parser.parse_args()
    stores = tuple(args.store) if args.store else STORES
    for row in run(args.runs, stores, (True,) if args.tracing else (False, True)):
        print(", ".join(f"{key}={value}" for key, value in row.items()), flush=True)


if __name__ == "__main__":
    main()
