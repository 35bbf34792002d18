"""Shared test helpers: a scriptable custom agent, runner shortcuts and a task-leak check.

Test modules import these directly (``from conftest import ScriptAgent``); keep this file generic.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from adk import AgentEvent, AgentInput, AgentOutput, BaseAgent, Message, RunContext, Runner
from adk.agent import Agent

Step = str | Message | BaseException | asyncio.Event | Callable[[RunContext], Any]
"""One step of a ``ScriptAgent``:

- ``str`` / ``Message``: yield it as an output message (a string is assistant text);
- an exception instance: raise it;
- an ``asyncio.Event``: wait until it is set;
- a callable ``(ctx) -> AgentEvent | None`` (may be async): yield what it returns, if anything.
"""


def act_exit() -> Callable[[RunContext], AgentEvent]:
    return lambda ctx: AgentEvent.exit()


def act_break() -> Callable[[RunContext], AgentEvent]:
    return lambda ctx: AgentEvent.break_loop()


def act_transfer(name: str) -> Callable[[RunContext], AgentEvent]:
    return lambda ctx: AgentEvent.transfer(name)


def do(fn: Callable[[], Any]) -> Callable[[RunContext], None]:
    """A step that calls ``fn()`` for its side effect (e.g. ``do(event.set)``) and yields nothing."""

    def step(ctx: RunContext) -> None:
        fn()

    return step


class ScriptAgent(BaseAgent):
    """A custom agent that plays ``steps`` and records what it saw and how it ended.

    ``reached`` is the highest step index begun (so a test can prove nothing after an ending event
    was pulled); ``closed`` counts runs whose generator finished or was closed (its ``finally``
    ran); ``cancelled`` counts runs that saw ``CancelledError``.
    """

    def __init__(self, name: str, *steps: Step, description: str = "") -> None:
        super().__init__(name, description)
        self.steps = steps
        self.inputs: list[list[Message]] = []
        self.paths: list[tuple[str, ...]] = []
        self.contexts: list[RunContext] = []
        self.reached = -1
        self.runs = 0
        self.completed = 0
        self.closed = 0
        self.cancelled = 0

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.runs += 1
        self.inputs.append(list(input.messages))
        self.paths.append(ctx.run_path)
        self.contexts.append(ctx)
        try:
            for index, step in enumerate(self.steps):
                self.reached = max(self.reached, index)
                event = await _perform(step, ctx)
                if event is not None:
                    yield event
            self.completed += 1
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.closed += 1


async def _perform(step: Step, ctx: RunContext) -> AgentEvent | None:
    if isinstance(step, str):
        return AgentEvent.of(step)
    if isinstance(step, Message):
        return AgentEvent(output=AgentOutput(step))
    if isinstance(step, BaseException):
        raise step
    if isinstance(step, asyncio.Event):
        await step.wait()
        return None
    result = step(ctx)
    if inspect.isawaitable(result):
        result = await result
    return result if isinstance(result, AgentEvent) else None


async def run_events(agent: Agent | Runner, input: Any = "hi", **kwargs: Any) -> list[AgentEvent]:
    """All events of one run of ``agent`` (or of a prepared runner), streams read to the end."""
    runner = agent if isinstance(agent, Runner) else Runner(agent)
    events = []
    async for event in runner.run(input, **kwargs):
        if event.output is not None and event.output.stream is not None:
            await event.output.stream.collect()
        events.append(event)
    return events


def other_tasks() -> set[asyncio.Task[Any]]:
    """Every task of the running loop except the caller's (for leak checks around a run)."""
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t is not current}


def contents(messages: list[Message]) -> list[str]:
    return [m.content for m in messages]
