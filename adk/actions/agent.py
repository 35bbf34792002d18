"""``ActionAgent``: an agent made of actions that react to events (Flink Agents style).

It is an ordinary ``Agent``: a ``Runner`` drives it, workflows contain it, ``AgentTool`` wraps it,
and an execution environment runs it over keyed records. Each input becomes one ``InputEvent``;
each ``OutputEvent`` its actions send becomes one ``AgentEvent`` output.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

import adk

from .._checks import check_count, check_resources, checked_settings
from .._driver import NO_EVENT, refuse_fresh_start
from ..agent import AgentInput, BaseAgent
from ..checkpoint._state import SavedState
from ..context import RunContext, note_restored
from ..events import AgentEvent
from ..messages import Message
from ._builtin import count_chat_after, preflight_tool_action, tool_action
from ._run import _ActionRun
from .context import _memory_key
from .events import ToolRequestEvent, _input_event
from .plan import AgentPlan

if TYPE_CHECKING:
    from .._preflight import Preflight

__all__ = ["RECORD_KEY", "ActionAgent"]

RECORD_KEY = "adk.record"
"""Metadata key of an input message that carries a record (set by the execution environments):
the agent's ``InputEvent.input`` is then the record itself, not the message's text."""


def _set_max_events(agent: ActionAgent, value: Any) -> Any:
    """``max_events`` assigned after the agent is made, checked as when made."""
    check_count(value, f"ActionAgent {agent.name!r}: max_events")
    return value


class ActionAgent(BaseAgent):
    """An agent whose behaviour is its ``@action`` methods (or the functions in ``actions``).

    ``resources`` are the agent's own named models, tools and prompts; the runner's add the names
    they do not define (one both define as different objects is an error when looked up).
    ``max_events`` bounds the events one input may cause, so actions that send events
    in a cycle fail with a clear error instead of running forever. ``builtin_actions=False``
    leaves out the built-in chat and tool actions, for an agent that handles
    ``ChatRequestEvent``/``ToolRequestEvent`` with its own (actions that merely watch those events
    run beside the built-ins).
    """

    # ``max_events`` assigned later is checked as when made: ``adk._checks.checked_settings``.
    __setattr__ = checked_settings({"max_events": _set_max_events}, made="name")

    def __init__(
        self,
        name: str,
        description: str = "",
        *,
        actions: Iterable[Callable[..., Any]] = (),
        resources: Any = None,
        max_events: int = 1000,
        builtin_actions: bool = True,
        callbacks: Iterable[Any] = (),
    ) -> None:
        super().__init__(name, description)
        if callbacks != ():  # its own (adk.callbacks): its model and tool calls go through them
            self._adk_callbacks = adk.callbacks._agent_callbacks(callbacks, f"ActionAgent {name!r}")
        check_count(max_events, f"ActionAgent {name!r}: max_events")
        check_resources(resources, f"ActionAgent {name!r}")
        self.resources = resources
        self.max_events = max_events
        self.builtin_actions = builtin_actions
        self._extra_actions = tuple(actions)
        self.plan = AgentPlan.compile(self)

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Send one ``InputEvent`` (the record the last message carries, else its text) and run
        actions until no event is left; yields one ``AgentEvent`` per ``OutputEvent``, and
        what the built-in actions show while they run (a streamed chat reply, a tool call's
        progress reports and an ``AgentTool``'s inner events), which are no outputs."""
        if ctx._run.plan is not None:  # resuming: no call on a fresh run's starts
            refuse_fresh_start(self, ctx)
        messages = input.messages
        run = _ActionRun(self, ctx)
        first = _input_event(_input_of(messages), list(messages))
        run.count = 1
        # Closed here, not left to asyncio's finalizer: a run closed at one of its outputs must
        # stop its actions at once (the same for ``resume``).
        try:
            async with aclosing(run.process(first)) as events:
                async for event in events:
                    yield event
        finally:
            event = NO_EVENT  # see adk._driver.NO_EVENT
            run.forget_empty_memory()

    async def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Restore the saved event queue and chats, run the interrupted action again on its
        event, then go on as ``run`` does."""
        resume = ctx.resume
        run = _ActionRun(self, ctx)
        current, listener = run.restore(resume.state if resume is not None else None)
        # The replies in the restored events and memories were counted before the pause (the
        # checkpoint's usage holds them), in a ``ChatResponseEvent``, passed on in an event of
        # the application's own (a draft sent to review), kept in the input's memory or the
        # agent's, or waiting in a fan-in (``collect_events``): an action outputting one now
        # must not count it again.
        sensory = run._sensory
        kept = sensory._values if sensory is not None else None
        memory = ctx.session.values.get(_memory_key(self.name))
        collected = run._fanin.buffers if run._fanin is not None else None
        note_restored(ctx, (current, *run.queue, kept, memory, collected))
        try:
            async with aclosing(run.process(current, listener, resumed=True)) as events:
                async for event in events:
                    yield event
        finally:
            event = NO_EVENT  # see adk._driver.NO_EVENT
            run.forget_empty_memory()

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """The resume's check before anything runs (``adk._preflight``): the saved event and
        queue, and the paused action found by name, as ``resume`` restores them, and when the
        built-in tool action paused, the calls it runs again (``preflight_tool_action``). What
        an action of your own made below itself is checked when it runs again."""
        resume = ctx.resume
        run = _ActionRun(self, ctx)
        current, listener = run.restore(resume.state if resume is not None else None)
        paused = self.plan.listeners(type(current))[listener]
        why = f"agent {self.name!r} resumes its action {paused.name!r}"
        walk.only_under(ctx.address, [run.address_of(paused.name)], why)
        if paused.call is tool_action and isinstance(current, ToolRequestEvent):
            preflight_tool_action(run, current, paused.name, walk)
        if ctx._run.turns is not None:  # after the calls' nested runs, which run first
            saved = SavedState(f"agent {self.name!r}", resume.state if resume is not None else None)
            count_chat_after(run, saved, current, listener, run.queue, walk)


def _input_of(messages: list[Message]) -> Any:
    """What ``InputEvent.input`` holds: the record the last message carries, else its text."""
    if not messages:
        return None
    last = messages[-1]
    if RECORD_KEY in last.metadata:
        return last.metadata[RECORD_KEY]
    return last.content
