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

``python -m benchmarks.soak --mixed [--runs N] [--rounds R]`` (not among the extras: it starts
Redis and two MCP servers) is a service's traffic in one process instead: about twenty runs an
iteration through long-lived runners (a ``ReActAgent`` with function and MCP tools over stdio
and streamable HTTP, a ``Supervisor`` with an ``AgentTool``, a ``ParallelAgent``, a
``LoopAgent``), pauses on SQLite and Redis resumed or (one in four) never resumed, runs that
fail (a model error, a tool error, a tool the agent does not have, under a new name each time),
runs cut off (the stream closed after its first event, the task cancelled in a tool), records
of new keys through ``LocalExecutionEnvironment``, tracing and metrics on (in memory, the spans
cleared), both MCP servers killed and restarted once midway. Each round of ``runs`` iterations
reports what grew: resident memory, fds, tasks, threads, child processes, pyadk's own objects
(``gc.get_objects()`` by type) and the containers held by pyadk's modules and classes.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import gc
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adk
from adk import AgentTool, LoopAgent, ParallelAgent, Runner, SequentialAgent
from adk.actions import ActionAgent, ActionContext, InputEvent, OutputEvent, action
from adk.checkpoint import (
    CheckpointStore,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
)
from adk.execution import LocalExecutionEnvironment
from adk.mcp import HTTPServer, MCPToolset, StdioServer
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


# -- the mixed soak (--mixed) ---------------------------------------------------------------------
_MCP_DIR = Path(__file__).resolve().parent.parent / "tests" / "mcp_servers"


@adk.tool
def broken(x: int) -> int:
    """Always fails."""
    raise RuntimeError(f"broken {x}")


@adk.tool
async def stuck(x: int) -> int:
    """Never returns: its runs are cut off."""
    await asyncio.Event().wait()
    return x


@action(InputEvent)
def _running_total(event: InputEvent, ctx: ActionContext) -> None:
    total = ctx.short_term_memory.get("total", 0) + event.input["amount"]
    ctx.short_term_memory.set("total", total)
    ctx.send_event(OutputEvent(output=total))


def _after_tools(answer: str, calls: Any) -> ScriptedModel:
    """A model calling ``calls(messages)`` until a tool has answered, then saying ``answer``."""

    def respond(messages: list[adk.Message]) -> Any:
        return answer if messages[-1].role == adk.Role.TOOL else calls(messages)

    return ScriptedModel(respond, record=False)


_MCP_CALLS = (("stdio_add", {"a": 1, "b": 2}), ("http_forecast", {"city": "Oslo"}))


def _clerk_says(messages: list[adk.Message]) -> Any:
    """The clerk's model: what it does is in the request's words."""
    asked = str(messages[0].content)
    answered = sum(1 for m in messages if m.role == adk.Role.TOOL)
    if "mcp" in asked and answered < len(_MCP_CALLS):
        return _call(*_MCP_CALLS[answered])  # each server's tool, one after the other
    if answered:
        return "done"
    if "model error" in asked:
        return adk.ModelError("the model failed")
    if "tool error" in asked:
        return _call("broken", {"x": 1})
    if "unknown" in asked:
        return _call(f"made_up_{time.perf_counter_ns()}", {})
    if "stuck" in asked:
        return _call("stuck", {"x": 1})
    return _call("add", {"a": 1, "b": 2})


async def _cancelled_inside_a_tool(runner: Runner) -> None:
    """A request's task cancelled while the clerk's ``stuck`` tool runs. Waited for with
    ``asyncio.wait``, not ``suppress(CancelledError)`` around an ``await``: that swallowed the
    soak's own cancellation (Ctrl-C, which ``asyncio.run`` turns into one) as well, whenever it
    came while the request unwound, and the soak ran on to its end."""
    task = asyncio.ensure_future(runner.invoke("stuck"))
    for _ in range(20):  # into the tool
        await asyncio.sleep(0)
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.result()  # a run that ended otherwise: its answer, or what it raised


class _HTTPServer:
    """tests/mcp_servers/http_server.py as a process, started again on its port after a kill."""

    def __init__(self) -> None:
        self.port = 0
        self.process: subprocess.Popen[str] | None = None

    def start(self) -> str:
        self.process = subprocess.Popen(
            [sys.executable, str(_MCP_DIR / "http_server.py"), "--port", str(self.port)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        said = self.process.stdout.readline().split()
        if said[:1] != ["PORT"]:
            raise RuntimeError(f"the MCP server did not start: {said}")
        self.port = int(said[1])
        return f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            assert self.process.stdout is not None
            self.process.stdout.close()


def _children() -> dict[int, bytes]:
    """This process's child processes, by pid: their command lines."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{entry}/stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid():
                    found[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
    return found


def _held_by_pyadk() -> dict[str, int]:
    """The size of each container a module of ``adk`` or ``prebuilt`` holds, or a class of theirs
    (caches, registries, warn-once sets)."""
    kinds = (
        dict,
        set,
        list,
        weakref.WeakKeyDictionary,
        weakref.WeakValueDictionary,
        weakref.WeakSet,
    )
    sizes: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in ("adk", "prebuilt"):
            continue
        for attr, value in list(vars(module).items()):
            if attr.startswith("__") or value is sys.modules:
                continue
            if getattr(value, "__module__", name) != name and hasattr(value, "cache_info"):
                continue  # a cached function imported from elsewhere (urllib's urlsplit)
            if isinstance(value, type) and value.__module__ == name:
                for cattr, cvalue in list(vars(value).items()):
                    if isinstance(cvalue, kinds) and not cattr.startswith("__"):
                        sizes[f"{name}.{attr}.{cattr}"] = len(cvalue)
            elif isinstance(value, kinds):
                sizes[f"{name}.{attr}"] = len(value)
            elif hasattr(value, "cache_info"):
                sizes[f"{name}.{attr}()"] = value.cache_info().currsize
            elif hasattr(value, "__len__") and type(value).__module__.startswith("adk"):
                sizes[f"{name}.{attr}"] = len(value)
    return sizes


def _pyadk_objects() -> collections.Counter[str]:
    """The live objects of pyadk's own classes, by class."""
    counts: collections.Counter[str] = collections.Counter()
    for kind in map(type, gc.get_objects()):
        module = kind.__dict__.get("__module__")
        if isinstance(module, str) and module.split(".")[0] in ("adk", "prebuilt"):
            counts[f"{module}.{kind.__qualname__}"] += 1
    return counts


def _grown(before: Any, after: Any, top: int = 8) -> list[str]:
    changed = [(after.get(k, 0) - before.get(k, 0), k) for k in set(before) | set(after)]
    return [f"{k} {d:+d}" for d, k in sorted(changed, reverse=True)[:top] if d > 0]


async def _mixed(
    runs: int,
    rounds: int,
    redis_url: str,
    directory: str,
    on_row: Callable[[dict[str, Any]], None] | None,
) -> list[dict[str, Any]]:
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    metrics = MeterProvider(metric_readers=[InMemoryMetricReader()])
    traced = {"tracer_provider": tracing, "meter_provider": metrics}
    http = _HTTPServer()
    stdio = MCPToolset(
        StdioServer(sys.executable, [str(_MCP_DIR / "stdio_server.py")]), prefix="stdio"
    )
    remote = MCPToolset(HTTPServer(http.start()), prefix="http")
    sqlite = SQLiteCheckpointStore(Path(directory) / "mixed.db")
    redis = RedisCheckpointStore(redis_url)
    clerk = ReActAgent(
        "clerk", ScriptedModel(_clerk_says, record=False), tools=[add, broken, stuck, stdio, remote]
    )
    helper = ReActAgent(
        "helper",
        _after_tools("four", lambda m: _call("add", {"a": 2, "b": 2})),
        description="Adds.",
        tools=[add],
    )
    worker = ReActAgent(
        "worker",
        _after_tools("two", lambda m: _call("add", {"a": 1, "b": 1})),
        description="Works.",
        tools=[add],
    )
    boss = ReActAgent(
        "boss",
        _scripted(
            _call("helper", {"request": "add"}),
            _call("transfer_to_agent", {"agent_name": "worker"}),
            "boss done",
        ),
        tools=[AgentTool(helper)],
    )
    branches = [
        ReActAgent(
            f"b{i}", _after_tools("b", lambda m: _call("add", {"a": 1, "b": 1})), tools=[add]
        )
        for i in range(3)
    ]
    looped = [ReActAgent("l1", _scripted("a")), ReActAgent("l2", _scripted("b"))]

    def payment(name: str) -> SequentialAgent:
        payer = ReActAgent(
            "payer", _after_tools("ok", lambda m: _call("pay", {"amount": 5})), tools=[pay]
        )
        return SequentialAgent(
            name,
            [ReActAgent("pre", _scripted("pre")), payer, ReActAgent("post", _scripted("post"))],
        )

    runners = {
        "clerk": Runner(clerk, **traced),
        "supervisor": Runner(Supervisor(boss, [worker]), **traced),
        "parallel": Runner(ParallelAgent("parallel", branches), **traced),
        "loop": Runner(LoopAgent("loop", looped, max_iterations=3), **traced),
        "sqlite": Runner(payment("on_sqlite"), checkpoint_store=sqlite, **traced),
        "redis": Runner(payment("on_redis"), checkpoint_store=redis, **traced),
    }
    keyed = LocalExecutionEnvironment(on_error="emit", **traced)
    totals = ActionAgent("totals", actions=[_running_total])
    done = ran = 0

    async def iteration() -> None:
        nonlocal done, ran
        done += 1
        # Its runs: 16, an MCP one every fifth time, two resumes unless the pauses are abandoned.
        ran += 16 + (done % 5 == 0) + (2 if done % 4 else 0)
        clerk_runner = runners["clerk"]
        assert (await clerk_runner.invoke("add")).text == "done"
        if done % 5 == 0:
            assert (await clerk_runner.invoke("mcp tools")).text == "done"
        assert (await runners["supervisor"].invoke("work")).text == "boss done"
        await runners["parallel"].invoke("go")
        await runners["loop"].invoke("go")
        for name in ("sqlite", "redis"):
            paused = await runners[name].invoke("Pay 5.")
            assert paused.checkpoint_id is not None
            if done % 4:  # else never resumed
                assert (
                    await runners[name].invoke_resume(paused.checkpoint_id, True)
                ).text == "post"
        with contextlib.suppress(adk.RunError):
            await clerk_runner.invoke("model error")
        await clerk_runner.invoke("tool error")
        await clerk_runner.invoke("unknown tool")
        events = clerk_runner.run("stuck")  # a client that hangs up after the first event
        async for _ in events:
            break
        await events.aclose()
        await _cancelled_inside_a_tool(clerk_runner)
        records = [{"user": f"u{done}-{k % 3}", "amount": k} for k in range(6)]
        assert len(await keyed.from_list(records, key="user").apply(totals).to_list()) == 6
        exporter.clear()

    async def restart_servers() -> None:
        await asyncio.to_thread(http.stop)
        await asyncio.to_thread(http.start)
        for pid, command in _children().items():
            if b"stdio_server" in command:
                os.kill(pid, signal.SIGKILL)

    def measure() -> dict[str, Any]:
        gc.collect()
        return {
            "rss": _rss_kib(),
            "fds": _fds(),
            "tasks": len(asyncio.all_tasks()),
            "threads": threading.active_count(),
            "children": len(_children()),
            "objects": _pyadk_objects(),
            "held": _held_by_pyadk(),
        }

    rows: list[dict[str, Any]] = []
    try:
        for _ in range(max(runs // 5, 1)):
            await iteration()
        before = measure()
        for number in range(rounds):
            started = time.perf_counter()
            for index in range(runs):
                await iteration()
                if number == rounds // 2 and index == runs // 2:
                    await restart_servers()
            after = measure()
            rows.append(
                {
                    "benchmark": f"soak.mixed.round{number}",
                    "iterations": done,
                    "runs": ran,
                    "seconds": round(time.perf_counter() - started, 1),
                    "rss_growth_kib": after["rss"] - before["rss"],
                    "fd_growth": after["fds"] - before["fds"],
                    "task_growth": after["tasks"] - before["tasks"],
                    "thread_growth": after["threads"] - before["threads"],
                    "child_growth": after["children"] - before["children"],
                    "pyadk_objects_grown": _grown(before["objects"], after["objects"]),
                    "held_grown": _grown(before["held"], after["held"]),
                }
            )
            before = after
            if on_row is not None:
                on_row(rows[-1])
    finally:
        for runner in runners.values():
            await runner.aclose()
        await sqlite.aclose()
        await redis.aclose()
        await asyncio.to_thread(http.stop)
    return rows


def run_mixed(
    runs: int = 300, rounds: int = 4, on_row: Callable[[dict[str, Any]], None] | None = None
) -> list[dict[str, Any]]:
    """One row per round of ``runs`` iterations of the mixed soak, each also given to ``on_row``
    as its round ends (Redis needed: skipped without)."""
    with tempfile.TemporaryDirectory(prefix="pyadk-soak-") as directory:
        try:
            with run_redis() as redis:
                return asyncio.run(_mixed(runs, rounds, redis.url, directory, on_row))
        except ServiceUnavailable as exc:
            return [{"benchmark": "soak.mixed", "skipped": str(exc)}]


def main() -> None:
    parser = argparse.ArgumentParser(description="growth after thousands of runs per runner")
    parser.add_argument("--runs", type=int, help="iterations (default 5000; --mixed: 300)")
    parser.add_argument("--store", choices=STORES, action="append")
    parser.add_argument("--tracing", action="store_true", help="only with tracing on")
    parser.add_argument("--mixed", action="store_true", help="a service's mixed traffic instead")
    parser.add_argument("--rounds", type=int, default=4, help="--mixed: rounds of --runs")
    args = parser.parse_args()

    def show(row: dict[str, Any]) -> None:
        print(", ".join(f"{key}={value}" for key, value in row.items()), flush=True)

    if args.mixed:
        for row in run_mixed(args.runs or 300, args.rounds, show):
            if "skipped" in row:
                show(row)
        return
    stores = tuple(args.store) if args.store else STORES
    for row in run(args.runs or 5000, stores, (True,) if args.tracing else (False, True)):
        show(row)


if __name__ == "__main__":
    main()
