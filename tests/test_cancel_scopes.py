"""Runs cancelled by an anyio cancel scope finish their cleanup, as runs cancelled by asyncio do.

Starlette and FastAPI cancel the task of a streaming response whose client hung up with an anyio
cancel scope, and a cancelled scope cancels its task again at every await until the scope is left.
The work a run does concurrently (parallel branches, the tool calls of one model turn, the records
of a keyed execution) runs in tasks of its own, outside the scope: cancelled once, each must be
allowed to finish its cleanup (closing a model stream, telling an MCP server to stop) before the
run's close returns. Waiting for them with ``gather`` ended at the scope's next cancellation and,
being cancelled itself, cancelled them a second time, cutting their cleanup short.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import anyio

from adk import AgentEvent, AgentInput, BaseAgent, ParallelAgent, RunContext, Runner
from adk import tool as make_tool
from adk.execution import LocalExecutionEnvironment
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


class _Cleanup:
    """Work that needs a few loop steps of cleanup after it is cancelled."""

    def __init__(self) -> None:
        self.started = 0
        self.cleaned: list[str] = []
        self.all_started = asyncio.Event()
        self.expected = 0

    async def work(self, name: str) -> None:
        self.started += 1
        if self.started == self.expected:
            self.all_started.set()
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            for _ in range(3):
                await asyncio.sleep(0)  # closing a connection, say
            self.cleaned.append(name)


def _others() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def _read_until_started(events: AsyncIterator[Any], cleanup: _Cleanup) -> None:
    """Read ``events`` under a cancel scope that is cancelled once every piece of work started."""
    with anyio.CancelScope() as scope:

        async def cancel_when_started() -> None:
            await cleanup.all_started.wait()
            scope.cancel()

        watcher = asyncio.ensure_future(cancel_when_started())
        try:
            async for _ in events:
                pass
        finally:
            await events.aclose()  # type: ignore[attr-defined]
            watcher.cancel()
    assert scope.cancelled_caught


async def test_parallel_branches_finish_their_cleanup() -> None:
    cleanup = _Cleanup()
    cleanup.expected = 3

    class Branch(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            yield AgentEvent.of(f"{self.name} started")
            await cleanup.work(self.name)

    runner = Runner(ParallelAgent("fan", [Branch(f"b{i}") for i in range(3)]))

    await _read_until_started(runner.run("go"), cleanup)

    assert sorted(cleanup.cleaned) == ["b0", "b1", "b2"]
    assert _others() == []


async def test_the_tool_calls_of_a_turn_finish_their_cleanup() -> None:
    cleanup = _Cleanup()
    cleanup.expected = 2

    @make_tool
    async def fetch(url: str) -> str:
        """Fetch a page."""
        await cleanup.work(url)
        return "page"

    calls = [tool_call("fetch", {"url": "a"}), tool_call("fetch", {"url": "b"})]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    runner = Runner(ReActAgent("browser", model, tools=[fetch]))

    await _read_until_started(runner.run("go"), cleanup)

    assert sorted(cleanup.cleaned) == ["a", "b"]
    assert _others() == []


async def test_the_records_of_a_keyed_execution_finish_their_cleanup() -> None:
    cleanup = _Cleanup()
    cleanup.expected = 2

    class Slow(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            await cleanup.work(input.messages[-1].content)
            yield AgentEvent.of("never")

    outputs = LocalExecutionEnvironment().from_list(["r1", "r2"]).apply(Slow("slow"))
    await _read_until_started(outputs, cleanup)  # closing the outputs as ``async with`` does

    assert sorted(cleanup.cleaned) == ["r1", "r2"]
    assert _others() == []
