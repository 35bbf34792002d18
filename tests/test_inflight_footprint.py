"""How many objects a run keeps alive while it waits on its model.

Under 1,000 concurrent runs, the cyclic garbage collector's cost grows with the number of
GC-tracked objects each waiting run holds (every collection walks the young ones; the survivors
are walked again in older generations): issue #8's concurrent per-run cost. These tests count
them, deterministically, so a change that adds per-run objects (a list made "just in case", a
wrapper coroutine, a per-run tuple that could be made once) shows up as a failure here instead of
as noise in a benchmark. The bounds are today's counts on CPython 3.11 with a little room; see
docs/performance.md for what each object is.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import adk
from adk import Message, ModelOptions, Role, Runner, RunResult, ToolCall, ToolSpec
from adk.messages import MessageChunk
from prebuilt import ReActAgent

RUNS = 200


class _GatedModel:
    """Answers "done" once its gate opens. With ``tool=True`` it first calls ``add`` at once, so
    the run waits at its second model call, after a tool round."""

    model_name = "gated"

    def __init__(self, tool: bool = False) -> None:
        self.tool = tool
        self.gate = asyncio.Event()

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        if self.tool and messages[-1].role != Role.TOOL:
            return Message.assistant("", [ToolCall(id="c1", name="add", arguments='{"a":1,"b":2}')])
        await self.gate.wait()
        return Message.assistant("done")

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        raise NotImplementedError


@adk.tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def _read(runner: Runner, input: str) -> str:
    """A run read through ``runner.run()``: the text of its last message."""
    text = ""
    async for event in runner.run(input):
        if event.output is not None and event.output.message is not None:
            text = event.output.message.content
    return text


def _invoked(runner: Runner, input: str) -> Awaitable[RunResult]:
    return runner.invoke(input)  # the coroutine itself: no coroutine of the test's around it


async def _objects_per_waiting_run(
    runner: Runner, gate: asyncio.Event, how: Callable[[Runner, str], Awaitable[object]] = _invoked
) -> float:
    """GC-tracked objects alive per run while ``RUNS`` runs all wait on the model's gate."""
    gate.set()
    await how(runner, "warm up")  # caches, lazily built schemas: not per-run objects
    gate.clear()
    gc.collect()
    gc.disable()
    try:
        before = len(gc.get_objects())
        tasks = [asyncio.ensure_future(how(runner, "hi")) for _ in range(RUNS)]
        for _ in range(5):
            await asyncio.sleep(0)
        assert not any(task.done() for task in tasks)
        during = len(gc.get_objects())
        gate.set()
        results = await asyncio.gather(*tasks)
    finally:
        gc.enable()
    assert all(getattr(result, "text", result) == "done" for result in results)
    return (during - before) / RUNS


def _run(
    factory: Callable[[], tuple[Runner, asyncio.Event]],
    how: Callable[[Runner, str], Awaitable[object]] = _invoked,
) -> float:
    async def main() -> float:
        runner, gate = factory()
        return await _objects_per_waiting_run(runner, gate, how)

    return asyncio.run(main())


def test_a_react_run_waiting_on_its_model_holds_few_objects() -> None:
    def factory() -> tuple[Runner, asyncio.Event]:
        model = _GatedModel()
        return Runner(ReActAgent("bench", model)), model.gate

    # 23 today: 9 are asyncio's and the model's (task, context, future, waiter coroutines...).
    assert _run(factory) <= 24


def test_a_react_run_read_through_run_holds_few_objects_while_it_waits() -> None:
    def factory() -> tuple[Runner, asyncio.Event]:
        model = _GatedModel()
        return Runner(ReActAgent("bench", model)), model.gate

    # 27 today: the reader's coroutine and the runner's generator (and its pending step) instead
    # of invoke's coroutine, the run's input, and its own _AgentRun (invoke's is its collector),
    # and the weak reference by which adk.run_usage/run_messages find the run of the generator.
    # It was 30 while the runner read the agent through drive's generator as well.
    assert _run(factory, _read) <= 28


def test_a_react_run_waiting_after_a_tool_round_holds_few_objects() -> None:
    def factory() -> tuple[Runner, asyncio.Event]:
        model = _GatedModel(tool=True)
        return Runner(ReActAgent("bench", model, tools=[add])), model.gate

    # 40 today: the set-up's objects, plus the conversation so far (the model's tool call and the
    # tool's result, 4 objects per message), their two events and history entries.
    assert _run(factory) <= 41
