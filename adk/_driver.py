"""The one place that runs an agent and enforces the event rules.

Every composite and the runner start children through ``drive``. It
- resumes the agent when the run resumes and the agent was interrupted (or re-raises its saved
  points unchanged when the resume does not address it),
- stamps ``agent_name`` and ``run_path`` on events the agent left blank,
- records the agent's own messages in the history lane (streams once they are complete),
- stops pulling and closes the agent's generator after exit, unhandled transfer, interrupt or error,
- turns an exception into exactly one error event and an ``Interrupt`` into an interrupt event.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from .agent import Agent, AgentInput
from .context import RunContext, _interrupt_event
from .events import _BREAK_HANDLED, AgentEvent, ErrorInfo
from .interrupts import Interrupt, _InterruptSignal

__all__ = ["drive", "signal_of"]

_RECORDED = 4  # event flag: already recorded by the innermost driver that owns it


def signal_of(exc: Interrupt, address: str) -> _InterruptSignal:
    """The signal an ``Interrupt`` raised at ``address`` stands for."""
    if exc._signal is None:
        return _InterruptSignal.single(address, exc.info, exc.state)
    if exc.state is not None:
        exc._signal.save(address, exc.state)
    return exc._signal


async def drive(
    agent: Agent, input: AgentInput, ctx: RunContext
) -> AsyncGenerator[AgentEvent, None]:
    """Run (or resume) ``agent`` at ``ctx`` and yield its events under the framework's rules."""
    run = ctx._run
    plan = run.plan
    resumed = False
    if plan is not None:
        resume = plan.resume_for(ctx.address)
        if resume is not None:
            if not resume.is_target:
                event = _interrupt_event(plan.subtree(ctx.address))
                event.agent_name, event.run_path = agent.name, ctx.run_path
                yield event
                return
            resumed = True
    name = agent.name
    path = ctx.run_path
    hooks = run.hooks
    try:
        handle: Any = await hooks.agent_start(agent, ctx) if hooks is not None else None
    except Exception as exc:  # a failing before_agent callback: the agent fails before it starts
        yield _stamped(AgentEvent(error=ErrorInfo.of(exc), exception=exc), name, path)
        return
    error: ErrorInfo | None = None
    resume_fn = getattr(agent, "resume", None) if resumed else None
    record_stream = None
    try:
        events = resume_fn(ctx) if resume_fn is not None else agent.run(input, ctx)
        try:  # not `async with closing(...)`: this runs once per agent and try/finally is cheaper
            async for event in events:
                if not event.agent_name:
                    event.agent_name = name
                if not event.run_path:
                    event.run_path = path
                if hooks is not None:
                    hooks.agent_event(handle, event)
                output = event.output
                record_stream = None
                if (
                    output is not None
                    and not event._flags & _RECORDED
                    and (event.run_path is path or event.run_path == path)
                ):
                    event._flags |= _RECORDED
                    if output.message is not None:
                        ctx._record(event.agent_name, output.message)
                    elif output.stream is not None:
                        record_stream = output.stream
                if event.error is not None:
                    error = event.error
                yield event
                if record_stream is not None:
                    ctx._record(event.agent_name, await record_stream.collect())
                    record_stream = None
                if event.error is not None or event.ends_agent:
                    break
        finally:
            # An exhausted async generator has no frame left: closing it would only cost an await.
            if getattr(events, "ag_frame", True) is not None:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    await aclose()
    except Interrupt as exc:
        event = _stamped(_interrupt_event(signal_of(exc, ctx.address)), name, path)
        if hooks is not None:
            hooks.agent_event(handle, event)
        yield event
    except Exception as exc:
        error = ErrorInfo.of(exc)
        event = _stamped(AgentEvent(error=error, exception=exc), name, path)
        if hooks is not None:
            hooks.agent_event(handle, event)
        yield event
    finally:
        if record_stream is not None and not record_stream.done:
            await record_stream.aclose()  # the run ended before the stream: stop its source
        if resumed and plan is not None:
            plan.consume(ctx.address)
        if hooks is not None:
            await hooks.agent_end(handle, error)


def _stamped(event: AgentEvent, name: str, path: tuple[str, ...]) -> AgentEvent:
    event.agent_name = name
    event.run_path = path
    return event


def take_break(event: AgentEvent, loop_depth: int) -> bool:
    """True if this event asks the innermost enclosing loop (one exists) to stop."""
    action = event.action
    return (
        action is not None
        and action.break_loop
        and loop_depth > 0
        and not event._flags & _BREAK_HANDLED
    )
