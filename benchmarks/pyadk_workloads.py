"""pyadk's workloads, the same ones every peer script implements (see ``benchmarks/peers/``).

- ``a``: one ``ReActAgent`` turn; the model answers "done", no tools.
- ``b``: the model calls ``add(a=1, b=2)`` (an async ``@tool`` whose arguments pydantic validates),
  then answers ``sum=<result>``; the run asserts the answer is ``sum=3`` so the tool result really
  flows back to the model.
- ``c_a`` / ``c_b``: ``a`` / ``b`` as 1,000 concurrent runs (the harness gathers ``build("a")``).
  Their fake models answer without suspending, so each gathered run completes in its Task's first
  step: the runs never overlap, and what (c) compares is asyncio's per-Task cost against the run.
- ``a.inflight`` / ``b.inflight`` (gathered as ``c_a.inflight`` / ``c_b.inflight``): the same with
  a model that yields to the event loop once per call, as a real model awaiting its server does, so
  1,000 runs are in flight together and the cyclic GC walks all of them (it is what makes the
  concurrent cost grow with the number of runs). ``floor`` is a coroutine doing the same awaits and
  nothing else: the harness takes asyncio's share from it.
- any scenario + ``.frozen`` / ``.tuned`` / ``.nogc``: the same in a process whose cyclic GC was set
  up after building it (see ``GC_SETTINGS``): ``gc.freeze()``, as docs/performance.md advises
  services (what start-up built leaves the collector's view); that plus a young-generation threshold
  of 20,000; or the collector off, the reference point (``benchmarks/gc_settings.py`` compares them).
- ``d``: a ``SequentialAgent`` of 10 trivial custom agents, each yielding one message.
- ``events``: an agent yielding ``EVENTS_PER_RUN`` events through a ``Runner`` (variant ``run``) and
  the same agent's bare generator iterated directly (variant ``bare``); their difference divided by
  the event count is the framework's cost per event.
- ``a.scripted`` / ``b.scripted``: ``a`` and ``b`` with ``ScriptedModel(record=False)`` and a
  responder, to show what the test model costs over a minimal ``ChatModel``.

Agents and runners are built once; runs use no network, no checkpointer and no tracing. The headline
figures use the minimal ``ChatModel`` classes below: a fake model should cost next to nothing, so
what remains is the framework.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from importlib.metadata import version
from typing import cast

import adk
from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    Message,
    ModelOptions,
    Role,
    RunContext,
    Runner,
    SequentialAgent,
    ToolCall,
    ToolSpec,
    tool,
)
from adk.messages import MessageChunk
from adk.testing import ScriptedModel
from prebuilt import ReActAgent

from ._harness import awaits_floor

__all__ = ["EVENTS_PER_RUN", "GC_SETTINGS", "VERSIONS", "build"]

EVENTS_PER_RUN = 1000
VERSIONS = {"pyadk": adk.__version__, "pydantic": version("pydantic")}

Variant = Callable[[], Awaitable[object]]


class _DoneModel:
    """The minimal ``ChatModel``: every call answers "done"."""

    model_name = "bench-done"

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        return Message.assistant("done")

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="done")


class _AddModel:
    """Asks for ``add(a=1, b=2)``; once the tool answered, replies ``sum=<tool result>``."""

    model_name = "bench-add"

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        return _add_reply(messages)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content=_add_reply(messages).content)


class _YieldingDoneModel(_DoneModel):
    """``_DoneModel`` that first yields to the event loop, as a model awaiting its server does."""

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        await asyncio.sleep(0)
        return Message.assistant("done")


class _YieldingAddModel(_AddModel):
    """``_AddModel`` that first yields to the event loop on every call."""

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        await asyncio.sleep(0)
        return _add_reply(messages)


def _add_reply(messages: Sequence[Message]) -> Message:
    last = messages[-1]
    if last.role == Role.TOOL:
        return Message.assistant(f"sum={last.content}")
    call = ToolCall(id="call_1", name="add", arguments='{"a": 1, "b": 2}')
    return Message.assistant("", [call])


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


class _Step(BaseAgent):
    """A trivial workflow step: one assistant message."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.of(Message.assistant("ok"))


class _Emitter(BaseAgent):
    """Yields ``EVENTS_PER_RUN`` message events."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        for _ in range(EVENTS_PER_RUN):
            yield AgentEvent.of(Message.assistant("x"))


def _frozen() -> None:
    gc.collect()
    gc.freeze()


def _tuned() -> None:
    _frozen()
    gc.set_threshold(20_000, 10, 10)


# How a scenario's process sets up the cyclic GC after building it (scenario name suffixes).
GC_SETTINGS: dict[str, Callable[[], None]] = {
    "frozen": _frozen,
    "tuned": _tuned,
    "nogc": gc.disable,
}


def _invoke(runner: Runner, expected: str | None, events: int | None = None) -> Variant:
    async def one_run() -> None:
        result = await runner.invoke("hi")
        if expected is not None and result.text != expected:
            raise AssertionError(f"expected {expected!r}, got {result.text!r}")
        if events is not None and len(result.events) != events:
            raise AssertionError(f"expected {events} events, got {len(result.events)}")

    return one_run


def _scripted_done(messages: list[Message]) -> str:
    return "done"


def _scripted_add(messages: list[Message]) -> Message:
    return _add_reply(messages)


async def build(scenario: str) -> dict[str, Variant]:
    """The variants of ``scenario`` (see the module docstring), built once."""
    base, dot, setting = scenario.rpartition(".")
    if dot and setting in GC_SETTINGS:
        variants = await build(base)
        GC_SETTINGS[setting]()
        return variants
    if scenario == "a":
        return {"run": _invoke(Runner(ReActAgent("bench", _DoneModel())), "done")}
    if scenario == "b":
        agent = ReActAgent("bench", _AddModel(), tools=[add])
        return {"run": _invoke(Runner(agent), "sum=3")}
    if scenario == "a.inflight":
        runner = Runner(ReActAgent("bench", _YieldingDoneModel()))
        return {"run": _invoke(runner, "done"), "floor": awaits_floor(1)}
    if scenario == "b.inflight":
        runner = Runner(ReActAgent("bench", _YieldingAddModel(), tools=[add]))
        return {"run": _invoke(runner, "sum=3"), "floor": awaits_floor(2)}
    if scenario == "a.scripted":
        model = ScriptedModel(_scripted_done, record=False)
        return {"run": _invoke(Runner(ReActAgent("bench", model)), "done")}
    if scenario == "b.scripted":
        model = ScriptedModel(_scripted_add, record=False)
        return {"run": _invoke(Runner(ReActAgent("bench", model, tools=[add])), "sum=3")}
    if scenario == "d":
        sequence = SequentialAgent("seq", [_Step(f"step{i}") for i in range(10)])
        return {"run": _invoke(Runner(sequence), "ok", events=10)}
    if scenario == "events":
        emitter = _Emitter("emitter")
        runner = Runner(emitter)
        bare_input = AgentInput([Message.user("hi")])

        async def through_runner() -> None:
            count = 0
            async for _ in runner.run("hi"):
                count += 1
            assert count == EVENTS_PER_RUN

        async def bare() -> None:
            count = 0
            # The emitter never reads its context: iterate its generator exactly as written.
            async for _ in emitter.run(bare_input, cast(RunContext, None)):
                count += 1
            assert count == EVENTS_PER_RUN

        return {"run": through_runner, "bare": bare}
    raise NotImplementedError(f"unknown scenario {scenario!r}")
