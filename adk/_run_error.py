"""The errors a run fails with: ``RunError`` (``Runner.invoke``'s, for a run that ended with an
error event) and ``MaxTurnsExceeded``, the one a run's ``max_turns`` raises.

Apart from the runner because ``MaxTurnsExceeded`` is raised where a model is called
(``adk.models._call``), below the runner, and is a ``RunError`` so that code catching every failed
run catches it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._error_pickle import reduce_error
from .events import AgentEvent, ErrorInfo

if TYPE_CHECKING:
    from .context import RunContext
    from .messages import Usage

__all__ = ["MaxTurnsExceeded", "RunError"]


class RunError(Exception):
    """A run ended with an error event (``event.error``; the live exception is the cause).

    ``usage`` (an extension to DESIGN.md) is what the failed run's model calls reported, summed
    as ``RunResult.usage`` is (a resumed run's including the calls before its pause), set by
    ``Runner.invoke``/``invoke_resume``: a failed run was paid for too. None when no call
    reported any, and on an error raised elsewhere (an agent's own ``MaxTurnsExceeded``)."""

    usage: Usage | None = None

    def __init__(self, event: AgentEvent, events: list[AgentEvent]) -> None:
        assert event.error is not None
        super().__init__(f"agent {event.agent_name!r} failed: {event.error}")
        self.event = event
        self.events = events
        self.error = event.error

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickled with its fields (``cls(*args)`` would lack them): see ``adk._error_pickle``.
        return reduce_error(self)


class MaxTurnsExceeded(RunError):
    """The run asked for more model calls than ``max_turns`` (``Runner.run``/``invoke``/
    ``resume``) allows, counting every agent's, ``AgentTool`` nested runs' and those made before a
    pause. Raised in the agent that asked (its run fails with this error event), and by
    ``Runner.invoke``/``invoke_resume`` for the run (``event`` the run's error event, ``events``
    all of them), so ``except adk.MaxTurnsExceeded`` and ``except adk.RunError`` both catch it.
    The OpenAI Agents SDK's ``MaxTurnsExceeded``, LangGraph's ``GraphRecursionError``."""

    def __init__(
        self,
        max_turns: int,
        agent_name: str,
        event: AgentEvent,
        events: list[AgentEvent] | None = None,
    ) -> None:
        Exception.__init__(
            self,
            f"the run reached its limit of {max_turns} model call(s) (max_turns) and agent "
            f"{agent_name!r} asked for another",
        )
        self.max_turns = max_turns
        self.agent_name = agent_name
        self.event = event
        self.events = [] if events is None else events
        self.error = event.error if event.error is not None else ErrorInfo.of(self)

    @classmethod
    def at(cls, max_turns: int, ctx: RunContext) -> MaxTurnsExceeded:
        """The error for the agent of ``ctx`` asking past the limit, before the run has an error
        event for it: ``event`` says where (the agent, its run path) and what."""
        where = AgentEvent(ctx.agent_name, ctx.run_path)
        exc = cls(max_turns, ctx.agent_name, where)
        where.error = exc.error
        return exc

    @classmethod
    def of_run(
        cls, raised: MaxTurnsExceeded, event: AgentEvent, events: list[AgentEvent]
    ) -> MaxTurnsExceeded:
        """What ``Runner.invoke`` raises for a run that failed with ``raised``: the run's error
        event and all its events, as a ``RunError`` carries them."""
        return cls(raised.max_turns, raised.agent_name, event, events)
