"""The one place that runs an agent and enforces the event rules.

Every composite and the runner start children through ``drive`` (or, in the step runner of the
sequential and loop workflows, through ``_AgentRun`` directly, which saves a generator per step). It
- resumes the agent when the run resumes and the agent was interrupted (or re-raises its saved
  points unchanged when the resume does not address it),
- stamps ``agent_name`` and ``run_path`` on events the agent left blank,
- records the agent's own messages in the history lane (streams once they are complete),
- stops pulling and closes the agent's generator after exit, unhandled transfer, interrupt or error,
- turns an exception into exactly one error event and an ``Interrupt`` into an interrupt event,
- fails an agent whose events end, or end with an exit or transfer, after it made a pause's event
  (``ctx.interrupt``) it never yielded (``unyielded_pause``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Generator
from typing import Any

import adk

from . import _hooks
from ._aio import being_cancelled
from ._hooks import Hooks, _Answered
from .agent import Agent, AgentInput
from .context import RunContext, _Entry, _interrupt_event, count_recorded, note_restored
from .events import _BREAK_HANDLED, AgentAction, AgentEvent, ErrorInfo
from .interrupts import Interrupt, _InterruptSignal
from .streams import MessageStream

__all__ = ["agent_run", "drive", "refuse_fresh_start", "signal_of"]

_RECORDED = 4  # event flag: already recorded by the innermost driver that owns it


def agent_run(agent: Agent, ctx: RunContext) -> _AgentRun:
    """A new ``_AgentRun`` of ``agent`` at ``ctx``: one per agent start."""
    run = _AgentRun()
    run.agent = agent
    run.ctx = ctx
    run.name = agent.name
    run.path = ctx.run_path
    run.hooks = ctx._run.hooks
    # The flag first: until an agent has callbacks of its own, this is all an agent start pays.
    if _hooks.agent_callbacks and run.hooks is None and getattr(agent, "_adk_callbacks", None):
        run.hooks = agent_hooks(ctx)
    run.handle = None
    run.error = None
    run.cancelled = False
    run.resumed = False
    run.stream = None
    run.stream_author = ""
    return run


def agent_hooks(ctx: RunContext) -> Hooks:
    """The hooks of a run that had none when an agent with callbacks of its own starts in it
    (``ReActAgent(callbacks=...)``): hooks that run only agents' own callbacks, from now on in
    this run. Found at the agent's start, not when the runner is made, so an agent added to the
    tree later or made during the run is not missed; a run whose agents have none never gets
    here (one attribute test per agent start, and none in a process whose agents have none:
    ``_hooks.agent_callbacks``)."""
    hooks: Hooks = adk._instrument.agent_hooks()
    ctx._run.hooks = hooks
    return hooks


def refuse_fresh_start(agent: Agent, ctx: RunContext) -> None:
    """Refuse ``run`` of a resumable built-in (``ReActAgent``, a workflow, a flow, an
    ``ActionAgent``) called where a pause below its address is being resumed. The framework calls
    ``resume`` there (``_AgentRun.events``) and ``run`` only where nothing below is paused, so
    this is an agent of your own running the built-in with its own context and calling ``run``
    again on resume: started over, it would run again what finished before the pause (a
    sequence's earlier steps) and hand the resume's answers to the calls it makes anew at the
    same addresses (a model asking ``pay(500)`` under the id ``call_1`` whose ``pay(5)`` was
    approved got it approved). Points at the address itself are the calling agent's own pause
    (``ctx.interrupt`` in it), which a child may well follow. Callers call it only when
    ``ctx._run.plan`` is set: on a run that is not resuming each start pays that one attribute
    test, not a call (~0.8k instructions of a ``ReActAgent`` turn)."""
    plan = ctx._run.plan
    if plan is None:
        return
    address = ctx.address
    below = [p.id for p in plan.within(address) if p.id != address]
    if not below:
        return
    raise adk.CheckpointError(
        f"{type(agent).__name__} {agent.name!r} was started with run() where a pause at its "
        f"place is being resumed (paused at {', '.join(repr(b) for b in below)}): an agent that "
        f"runs other agents with its own ctx continues the one that paused with resume(ctx) "
        "when ctx.resume is not None "
        '(docs/composing.md, "Agents of your own that run other agents"); '
        "run() would start it over, and the resume's answers would go to the calls it makes "
        "anew. Nothing of it ran; the checkpoint is kept"
    )


def signal_of(exc: Interrupt, address: str) -> _InterruptSignal:
    """The signal an ``Interrupt`` raised at ``address`` stands for."""
    if exc._signal is None:
        return _InterruptSignal.single(address, exc.info, exc.state)
    if exc.state is not None:
        exc._signal.save(address, exc.state)
    return exc._signal


class _AgentRun:
    """One agent's run under the rules, as steps a caller takes around its own ``async for``:

    ``skipped()`` / ``start()`` (may each answer with the one event the agent produces instead of
    running), ``events(input)``, ``observe(event)`` for every event before passing it on,
    ``record_stream()`` after passing on an event that carried a stream, ``failed(exc)`` for an
    exception out of the agent, ``close(events)`` and ``finish()`` at the end.

    It is an object rather than a generator so the step runner can drive children inline: a
    generator per agent start costs more than all of this bookkeeping together. ``agent_run``
    makes one (see ``context._Entry`` for why the class has no ``__init__``).
    """

    __slots__ = (
        "agent",
        "cancelled",
        "ctx",
        "error",
        "handle",
        "hooks",
        "name",
        "path",
        "resumed",
        "stream",
        "stream_author",
    )

    agent: Agent
    cancelled: bool  # its task was cancelled while it ran (``cancelled_by``)
    ctx: RunContext
    name: str
    path: tuple[str, ...]
    hooks: Hooks | None
    handle: Any
    error: ErrorInfo | None
    resumed: bool
    stream: MessageStream | None  # a stream to record (or only shown) until the consumer took it
    stream_author: str | None  # None: ``stream`` is only shown (``AgentOutput.shown_only``)

    def skipped(self) -> AgentEvent | None:
        """On resume: the event re-raising this agent's saved points when the resume does not
        address it (the agent does not run); ``None`` when it runs."""
        plan = self.ctx._run.plan
        if plan is None:
            return None
        resume = plan.resume_for(self.ctx.address)
        if resume is None:
            return None
        if resume.is_target:
            self.resumed = True
            state = resume.state
            if state is not None and self.ctx.usage is not None:
                note_restored(self.ctx, state)  # replies it kept to emit count once
            return None
        return _stamped(_interrupt_event(plan.subtree(self.ctx.address)), self.name, self.path)

    async def start(self) -> AgentEvent | None:
        """Tell the hooks (only call when there are hooks); a failing ``before_agent`` callback
        answers with the error event, and the agent does not run. A ``before_agent`` callback
        that answered for the agent puts the answer in its place (``run.agent``): whoever runs
        the agent after ``start`` runs ``run.agent``."""
        assert self.hooks is not None
        try:
            self.handle = await self.hooks.agent_start(self.agent, self.ctx, self.resumed)
        except _Answered as answered:
            self.handle = answered.handle
            self.agent = answered.agent
            return None
        except Exception as exc:
            return _stamped(
                AgentEvent(error=ErrorInfo.of(exc), exception=exc), self.name, self.path
            )
        return None

    def events(self, input: AgentInput) -> AsyncIterator[AgentEvent]:
        """The agent's event iterator: ``resume(ctx)`` when it resumes and has one, else ``run``;
        as the hooks pull it (with tracing, inside the agent's span: ``Hooks.agent_events``)."""
        resume = getattr(self.agent, "resume", None) if self.resumed else None
        # An agent with a ``resume`` gets what it returns, even None (a mistake the driver
        # refuses): taken for "no resume", its ``run`` started again as if it had never paused.
        events: AsyncIterator[AgentEvent]
        events = resume(self.ctx) if resume is not None else self.agent.run(input, self.ctx)
        return events if self.hooks is None else self.hooks.agent_events(self.handle, events)

    def observe(self, event: AgentEvent) -> bool:
        """Stamp, report and record one event of the agent; True if the agent must stop after it."""
        try:
            if not event.agent_name:
                event.agent_name = self.name
        except AttributeError:  # not an AgentEvent (a try costs nothing until it catches)
            raise _bad_event(self.name, event) from None
        if not event.run_path:
            event.run_path = self.path
        if self.hooks is not None:
            self.hooks.agent_event(self.handle, event)
        output = event.output
        # Most events arrive with no flags: testing the int's truth first spares two generic
        # ``&``/``|`` operations per event (CPython 3.11 specialises neither, ~0.1k together).
        flags = event._flags
        if output is not None and (not flags or not flags & _RECORDED):
            path = self.path
            if event.run_path is path or event.run_path == path:  # its own, not a child's
                event._flags = flags | _RECORDED if flags else _RECORDED
                message = output.message
                if message is not None:
                    # ``ctx._record(event.agent_name, message)``, inlined: once per event.
                    ctx = self.ctx
                    entry = _Entry()
                    entry.agent_name = event.agent_name
                    entry.run_path = ctx.run_path
                    entry.message = message
                    run = ctx._run
                    entry.seq = seq = run.seq
                    run.seq = seq + 1
                    entry._as_context = None
                    ctx._lane.entries.append(entry)
                    usage = message.usage
                    if usage is not None:  # a model's reply: its usage counts in the run's
                        count_recorded(run, message, usage)
                elif output.stream is not None:
                    # Held until the reader took the event, so a run closed at it closes the
                    # stream (``finish``). A stream only shown is no answer: held as ``None``'s,
                    # not recorded nor read for the agent, which reads it itself.
                    self.stream = output.stream
                    self.stream_author = None if output.shown_only else event.agent_name
        if event.error is not None:
            self.error = event.error
            return True
        # Most events carry no action: the same test as ever for them.
        return event.action is not None and event.ends_agent and self._ends(event)

    def _ends(self, event: AgentEvent) -> bool:
        """True, for an event that ends the agent, once it is not an exit or transfer in place
        of a pause the agent made (``unyielded_pause``): such an event ends the agent as the
        pause would have, so the agent never reaches its end, where the check is made otherwise.
        Raised before the event is passed on, so the exit or transfer never acts."""
        action = event.action
        assert action is not None
        if action.interrupted is None and self.ctx._run.unyielded is not None:
            unyielded_pause(self, action)
        return True

    async def record_stream(self) -> None:
        """Record the streamed message the last event carried, once it is complete; a stream
        only shown is let go (the agent reads it, if anyone does: not waited for here)."""
        stream = self.stream
        assert stream is not None
        author = self.stream_author
        if author is not None:
            self.ctx._record(author, await stream.collect())
        self.stream = None

    def failed(self, exc: BaseException) -> AgentEvent:
        """The one event an exception out of the agent becomes (see ``is_cancellation`` for the
        ``CancelledError`` that is one)."""
        if isinstance(exc, Interrupt):
            event = _interrupt_event(signal_of(exc, self.ctx.address))
        else:
            if type(exc) is TypeError and self.ctx._run.unyielded is not None:
                exc = _awaited_pause(self, exc)
            self.error = ErrorInfo.of(exc)
            event = AgentEvent(error=self.error, exception=exc)
        _stamped(event, self.name, self.path)
        if self.hooks is not None:
            self.hooks.agent_event(self.handle, event)
        return event

    def cancelled_by(self, exc: BaseException) -> bool:
        """Whether ``exc`` out of the agent is the cancellation of its task (``is_cancellation``),
        noted for ``finish``: the hooks tell a cancelled agent from one that ended, which looks
        the same to them otherwise (no error), so its span can say it was cut off."""
        if is_cancellation(exc):
            self.cancelled = True
            return True
        return False

    async def finish(self) -> None:
        """After the agent ended however it ended (its generator is closed by then).

        The hooks are told in a ``finally``: closing a stream the run left unread waits for its
        source and then raises the cancellation that came meanwhile, which an anyio cancel scope
        (Starlette's, when a streaming client hangs up) delivers at every await; the agent's span
        would otherwise never end and its ``after_agent`` callbacks never run."""
        stream = self.stream
        try:
            if stream is not None:
                self.stream = None
                author = self.stream_author
                if not stream.done:
                    # The run ended before the stream (closed or cancelled at its event): stop
                    # its source, a model's connection. A stream only shown too: the agent that
                    # yielded it is closed at that event, before it could read or close it.
                    await stream.aclose()
                elif author is not None and stream._error is not None:
                    # Failed, read by the reader or by a composite's ``settle`` (which passed on
                    # the error as this agent's) and not by this driver: its hooks see the error.
                    if self.error is None and not self.cancelled:
                        self.error = ErrorInfo.of(stream._error)
                elif author is not None and not stream._cut:
                    # Read to its end before the run ended (a reader that stopped at the answer
                    # and closed the run): recorded as a whole reply is when its event passes, so
                    # its usage counts and ``run_messages`` has it; it waited for the next event.
                    self.ctx._record(author, stream._final_message())
        finally:
            if self.resumed:
                plan = self.ctx._run.plan
                if plan is not None:
                    plan.consume(self.ctx.address)
            if self.hooks is not None:
                await self.hooks.agent_end(self.handle, self.error, self.cancelled)

    def observe_passing(self, event: AgentEvent) -> None:
        """A composite's own rules for an event of one of its children, which the child's run has
        already stamped and recorded: report it, note an error. A failing hook fails the composite
        (``_OwnFailure``), not the child."""
        if self.hooks is not None:
            try:
                self.hooks.agent_event(self.handle, event)
            except Exception as exc:
                raise _OwnFailure(exc) from exc
        if event.error is not None:
            self.error = event.error

    @property
    def needs_finish(self) -> bool:
        """Whether ``finish`` has anything to do: most agent runs skip its await."""
        return self.stream is not None or self.resumed or self.hooks is not None


NO_EVENT = AgentEvent()
"""What a frame that passes a run's events on sets its event variable to as it finishes.

On Python 3.12+ a traceback keeps the frames of the generators the exception left, and each of
those keeps the frame that was driving it (``f_back``), and so on up the task as they finish. A
failed run's error event holds its exception, so a finished frame whose variable still held that
event would form a reference cycle with it, freed only by the cyclic GC. (Unneeded on 3.11.)"""


class _OwnFailure(Exception):
    """Carries an exception of a composite's own rules out through its child's ``try`` blocks."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


async def close_events(events: AsyncIterator[AgentEvent]) -> None:
    """Close an agent's event iterator (an exhausted generator has no frame: nothing to close)."""
    if getattr(events, "ag_frame", True) is not None:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
        elif isinstance(events, Coroutine):
            # ``async def run`` that returns instead of yielding: ``async for`` failed on it with
            # Python's "requires an object with __aiter__", and it was never awaited. Close it
            # (no "never awaited" warning) and say what to change instead.
            events.close()
            raise TypeError(
                "run() returned a coroutine, not an async iterator of events: an agent's run() "
                "yields its events (an async generator) or returns an async iterator"
            )
        elif not hasattr(events, "__aiter__"):
            # ``def run`` that yields, or returns a list of events: Python's "'async for'
            # requires an object with __aiter__ method, got generator" did not say what to change.
            # A generator is closed so its ``finally`` blocks run.
            if isinstance(events, Generator):
                events.close()
                returned = "a generator (a def run that yields)"
            else:
                returned = f"a {type(events).__name__}"
            raise TypeError(
                f"run() returned {returned}, not an async iterator of events: write it as "
                "async def run(...) and yield each event"
            )


def unyielded_pause(run: _AgentRun, ending: AgentAction | None = None) -> None:
    """At the end of an agent's events (the agent ran to its end, nothing stopped it), or at the
    exit or transfer (``ending``) that ends it, when its run has made a pause's event
    (``ctx.interrupt``): fail the agent if it made one itself, as it did not yield it (a yielded
    pause stops the agent, which then never gets here). Called without ``yield``,
    ``ctx.interrupt(...)`` only makes the event, and the agent would go on and end as if it had
    never asked: the run would carry on past a pause meant to wait for a person (an approval),
    with no error and no word of why. An exit or transfer after it is the same slip (or a pause
    made and then dropped on purpose, which is the same loss to whoever reads the run): a pause
    made is to be yielded. Only a run that made a pause gets here."""
    unyielded = run.ctx._run.unyielded
    if unyielded is not None and run.ctx.address in unyielded:
        instead = ""
        if ending is not None:
            instead = " and ended with an exit" if ending.exit else " and ended with a transfer"
        raise RuntimeError(
            f"agent {run.name!r} called ctx.interrupt(...) but did not yield the event it "
            f"returns{instead}, so nothing paused: write yield ctx.interrupt(...) (the call only "
            "makes the pause's event; the run pauses when the agent yields it)"
        )


def _awaited_pause(run: _AgentRun, exc: TypeError) -> TypeError:
    """``exc`` out of an agent, or the error it stands for: ``await ctx.interrupt(...)`` fails
    with Python's "object AgentEvent can't be used in 'await' expression", which names neither
    the call nor the fix. Told here, from the agent's failure, rather than by an ``__await__`` on
    ``AgentEvent``, which would make every event pass ``inspect.isawaitable``: callers that await
    whatever is awaitable (an ``on_event`` callback's result, a callback's answer) would then
    await an event. Only an agent that made a pause's event gets here."""
    unyielded = run.ctx._run.unyielded
    text = str(exc)
    if unyielded is None or run.ctx.address not in unyielded:
        return exc
    if "AgentEvent" not in text or "await" not in text:
        return exc
    error = TypeError(
        f"agent {run.name!r} awaited ctx.interrupt(...), which returns the pause's event to "
        "yield, not to await: write yield ctx.interrupt(...)"
    )
    error.__cause__ = exc
    error.__traceback__ = exc.__traceback__
    return error


def _bad_event(agent: str, event: object) -> TypeError:
    """The error for an agent that yielded what is not an ``AgentEvent``."""
    return TypeError(
        f"agent {agent!r} yielded {type(event).__name__} {event!r:.80}; an agent's run() must be "
        "an async generator of AgentEvent (AgentEvent.of(message) for a message)"
    )


async def settle(event: AgentEvent, run: _AgentRun) -> AgentEvent | None:
    """Before closing an agent after the event that ended it, read a stream the event carries to
    its end: a child's stream that a composite passed on. The child's own driver would have read
    it (``record_stream``), but closing the composite cancels the child, and the child's cleanup
    would cut the stream off before the reader, who has the event, got to it. (A reader who closes
    the run at the event instead never gets here: the stream is cut, nobody is reading.)

    A stream that fails (read here, or already by the reader: a streaming UI, ``invoke``) is the
    error of the agent that streamed it, which is closed next without reading it again: the
    returned error event, stamped as that agent's and observed by ``run`` (the run of the agent
    that passed the event on, which fails with it), for the caller to pass on as that agent's
    failure, each driver its own way. Raised, it failed the composite's child (a workflow
    between them) instead; skipped once read, the run ended with the event as if its answer had
    come. A stream only shown is no answer (``AgentOutput.shown_only``): read for its readers,
    who see its failure; the agent that would have read it is closed, so it is nobody's
    error. (Raised, it failed the run, as
    the workflow above the agent's, but only for a reader who had not read it: one who had, and
    ``invoke``, which closes it, saw the run end cleanly.)"""
    output = event.output
    if output is None:
        return None
    stream = output.stream
    if stream is None:
        return None
    if output.shown_only:
        if not stream.done:
            try:
                await stream.collect()
            except Exception as exc:  # kept in the stream for its readers
                if is_cancellation(exc):
                    raise
        return None
    try:
        await stream.collect()  # at once if read to its end: a failure read again, a copy
    except Exception as exc:
        if is_cancellation(exc):
            raise  # the run is being cancelled: not an error to go on with (``is_cancellation``)
        if exc.__traceback__ is not None:  # this frame, which holds ``event``: no cycle through it
            exc.__traceback__ = exc.__traceback__.tb_next
        error = exc
    else:
        return None
    # Observed past the ``except``: a hook failing on it is not chained to the stream's error
    # (as when each driver observed it). No local holds the error event: a frame the traceback
    # keeps would hold it (``NO_EVENT``).
    return _observed(
        run,
        _stamped(
            AgentEvent(error=ErrorInfo.of(error), exception=error), event.agent_name, event.run_path
        ),
    )


def _observed(run: _AgentRun, event: AgentEvent) -> AgentEvent:
    """``event``, once ``run`` observed it (``settle``'s failure, the agent's)."""
    run.observe(event)
    return event


def drive(agent: Agent, input: AgentInput, ctx: RunContext) -> AsyncGenerator[AgentEvent, None]:
    """Run (or resume) ``agent`` at ``ctx`` and yield its events under the framework's rules.

    The framework's own sequences and loops apply these rules in their step runner
    (``_adk_drive``), which saves a generator level on every event of every step.
    """
    fused = getattr(agent, "_adk_drive", None)
    if fused is not None:
        return fused(input, ctx)  # type: ignore[no-any-return]
    return _drive(agent, input, ctx)


async def _drive(
    agent: Agent, input: AgentInput, ctx: RunContext
) -> AsyncGenerator[AgentEvent, None]:
    run = agent_run(agent, ctx)
    early = run.skipped()
    if early is None and run.hooks is not None:
        early = await run.start()
    if early is not None:
        yield early
        return
    closed = False  # the reader closed this generator: what fails from then on is raised
    try:
        events = run.events(input)
        try:  # not `async with closing(...)`: this runs once per agent and try/finally is cheaper
            async for event in events:
                stop = run.observe(event)
                yield event
                if run.stream is not None:
                    await run.record_stream()
                if stop:
                    failed = await settle(event, run)
                    if failed is not None:  # a child's stream: the child failed (observed)
                        yield failed
                    break
            else:
                if ctx._run.unyielded is not None:  # a pause was made in this run: its own?
                    unyielded_pause(run)
        except GeneratorExit:
            closed = True
            raise
        finally:
            if getattr(events, "ag_frame", True) is not None:
                await close_events(events)
    except (Exception, asyncio.CancelledError) as exc:
        if closed or run.cancelled_by(exc):
            raise
        yield run.failed(exc)
    finally:
        event = NO_EVENT  # see NO_EVENT
        failed = None  # an error event holds its exception, which holds this frame
        if run.needs_finish:
            await run.finish()


def is_cancellation(exc: BaseException) -> bool:
    """True for an exception that belongs to the cancellation of the task running the agent: the
    ``CancelledError`` itself, or an error an agent's cleanup raised while that cancellation (or
    the close of a generator it caused) was propagating. It passes through: made an error event,
    it would go on with a run that is being cancelled (a parallel branch would then wait, forever,
    for its reader to take the event while the reader waits for the branch to end).

    Any other ``CancelledError`` is one the agent raised on its own (it awaited something that
    someone else cancelled) and is a failure like any exception: let through, it would pass for a
    cancellation of whoever reads the run, and a parallel branch dying of it would count as
    finished, its failure lost."""
    if not being_cancelled():
        return False
    cause: BaseException | None = exc
    for _ in range(_CONTEXT_DEPTH):
        if cause is None:
            return False
        if isinstance(cause, asyncio.CancelledError | GeneratorExit):
            return True
        cause = cause.__context__
    return False


_CONTEXT_DEPTH = 8  # how far ``is_cancellation`` follows ``__context__`` (a chain may be a cycle)


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
