"""Shared test helpers: a scriptable custom agent, runner shortcuts, a task-leak check, an
``add`` tool and an event-driven agent that uses it.

Test modules import these directly (``from conftest import ScriptAgent``); keep this file generic.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from adk import (
    AgentEvent,
    AgentInput,
    AgentOutput,
    BaseAgent,
    Message,
    Resources,
    Role,
    RunContext,
    Runner,
    tool,
)
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    action,
)
from adk.agent import Agent
from adk.callbacks import Callbacks
from adk.testing import Reply, ScriptedModel, tool_call

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


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


class _Calculator(ActionAgent):
    """Asks model ``m`` about its input with the ``add`` tool, and outputs the model's answer."""

    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        messages = [Message.user(str(event.input))]
        ctx.send_event(ChatRequestEvent(model="m", messages=messages, tools=["add"]))

    @action(ChatResponseEvent)
    def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def _adds(messages: list[Message]) -> Reply:
    """Calls add(1, 2), then answers ``sum=`` with what it returned."""
    if messages[-1].role == Role.TOOL:
        return Reply(text=f"sum={messages[-1].content}")
    return Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})])


def calculator(model_name: str = "scripted", callbacks: Sequence[Callbacks] = ()) -> ActionAgent:
    """An ``ActionAgent`` named ``calculator`` whose every input makes one model call, one ``add``
    call and a second model call, answering ``sum=3``."""
    resources = Resources()
    resources.add_model("m", ScriptedModel(_adds, model_name=model_name))
    resources.add_tool(add)
    return _Calculator("calculator", resources=resources, callbacks=callbacks)
