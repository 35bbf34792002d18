"""Workflow agents: ``SequentialAgent``, ``ParallelAgent`` and ``LoopAgent``.

Each child starts with input rebuilt from history, so later steps see earlier steps' output. Run
paths grow with each step as in Eino (``[seq, a1]``, ``[seq, a1, a2]``); addresses do not (a child
is always at the workflow's address plus ``agent:<child>``). On interrupt each workflow saves where
it was (step index, loop iteration, finished branches, the run path) in the travelling signal.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from types import AsyncGeneratorType
from typing import TYPE_CHECKING, Any, Self

import adk

from ._aio import cancel_and_wait, closing
from ._authors import check_authors
from ._checks import agent_description, check_agents, check_count, check_name, checked_settings
from ._driver import (
    NO_EVENT,
    _AgentRun,
    _OwnFailure,
    agent_run,
    close_events,
    drive,
    is_cancellation,
    refuse_fresh_start,
    settle,
    take_break,
    unyielded_pause,
)
from ._turns_left import count_ahead, first_askers, first_calls, turns_limit
from .agent import Agent, AgentInput
from .checkpoint._state import SavedState
from .context import RunContext, _Entry, _interrupt_event, _Lane, new_lane
from .events import _BREAK_HANDLED, _TRANSFER_HANDLED, AgentEvent, ErrorInfo
from .history import build_input
from .interrupts import _InterruptSignal

if TYPE_CHECKING:
    from ._preflight import Preflight

__all__ = ["LoopAgent", "ParallelAgent", "SequentialAgent"]


def _unique_children(owner: str, kind: str, sub_agents: Iterable[Agent]) -> list[Agent]:
    children: list[Agent] = check_agents(sub_agents, f"{kind} {owner!r}")
    names = [child.name for child in children]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{owner}: sub-agent names must be unique, repeated: {duplicates}")
    return children


class _Steps:
    """One run of a sequence's or loop's steps: where it stands, and what an event passing up
    from a step gets (the workflow's place saved in an interrupt, a loop break taken).

    ``own`` is set when ``drive`` handed the workflow's own run to the step runner (see
    ``_Workflow._adk_drive``): the workflow's rules are then applied here, and each event crosses
    one generator fewer.
    """

    __slots__ = ("broke", "ctx", "is_loop", "iteration", "own", "path", "steps_ctx")

    def __init__(self, ctx: RunContext, own: _AgentRun | None, is_loop: bool) -> None:
        self.ctx = ctx
        self.own = own
        self.is_loop = is_loop
        # Steps of a loop see one more enclosing loop, so a break inside them stops at this loop.
        self.steps_ctx = ctx._fork(loop_depth=ctx._loop_depth + 1) if is_loop else ctx
        self.path = ctx.run_path  # run path of the step last started
        self.iteration = 0
        # The running step broke the loop: the steps stop once it finishes. Saved at a pause,
        # so a step that broke the loop and then paused still ends it after the resume.
        self.broke = False

    def pass_up(self, event: AgentEvent, index: int, path: tuple[str, ...]) -> bool:
        """The workflow's part in an event of step ``index``; True if the steps stop after it
        because it breaks the (innermost) loop."""
        if event._signal is not None:
            state: dict[str, Any] = {"index": index, "run_path": list(path)}
            if self.is_loop:
                state["iteration"] = self.iteration
            if self.broke:
                state["broke"] = True
            event._signal.save(self.ctx.address, state)
            return False
        if event.action is None or not take_break(event, self.steps_ctx._loop_depth):
            return False
        if self.is_loop:
            event._flags |= _BREAK_HANDLED  # this loop takes it; enclosing loops let it pass
        self.broke = True
        return True


async def _run_steps(
    workflow: SequentialAgent | LoopAgent,
    ctx: RunContext,
    own: _AgentRun | None,
    resuming: bool,
) -> AsyncGenerator[AgentEvent, None]:
    """Run a sequence's steps once, or a loop's steps until ``max_iterations``, in order.

    Ends after a step's error, exit, interrupt or unhandled transfer, and after the step that
    breaks the loop. On interrupt the workflow saves ``{index, run_path[, iteration]}`` at its
    address; ``resuming`` starts from there. Run paths grow with every step started.

    Steps are driven inline with ``_AgentRun`` (the rules ``drive`` applies) rather than through a
    ``drive`` generator each, so a step costs one generator: its own.
    """
    resumable = ctx._run.plan is not None  # else no step can be skipped or resumed: skip asking
    if own is not None:
        early = own.skipped() if resumable else None
        if early is None and own.hooks is not None:
            early = await own.start()
        if early is not None:
            yield early
            return
        resuming = own.resumed
    steps = _Steps(ctx, own, isinstance(workflow, LoopAgent))
    limit = workflow.max_iterations if isinstance(workflow, LoopAgent) else 1
    children = workflow.sub_agents
    closed = False  # the reader closed this generator: what fails from then on is raised
    try:
        if own is not None and own.agent is not workflow:
            # A before_agent callback answered for the workflow (``_AgentRun.start``): its
            # answer's events are the workflow's own, and no step runs.
            async with closing(own.agent.run(AgentInput(), ctx)) as answer:
                async for event in answer:
                    own.observe(event)
                    yield event
            return
        start = 0
        if resuming:
            state = _saved_state(ctx)
            steps.path = tuple(state.names("run_path"))
            start = _resumed_step(state, steps.path, ctx.run_path, children)
            steps.iteration = _resumed_iteration(state, limit)
            steps.broke = state.values.get("broke") is True
        while limit is None or steps.iteration < limit:
            for index in range(start, len(children)):
                child = children[index]
                if not (resuming and index == start):
                    steps.path = (*steps.path, child.name)
                path = steps.path
                child_ctx = steps.steps_ctx._child(child.name, path)
                run = agent_run(child, child_ctx)
                stop = False
                broke = steps.broke  # only ever set here for the step a resume continues
                early = run.skipped() if resumable else None
                if early is None and run.hooks is not None:
                    early = await run.start()
                if early is not None:  # the child answers without running
                    broke = steps.pass_up(early, index, path) or broke
                    if own is not None:
                        own.observe_passing(early)
                    yield early
                    if early.error is not None or early.ends_agent or broke:
                        return
                    continue
                try:
                    input = build_input(child_ctx, child.name)
                    # ``run.agent``: the child, or the answer a callback gave in its place.
                    if run.resumed:
                        events = run.events(input)
                    else:
                        events = run.agent.run(input, child_ctx)
                        if run.hooks is not None:  # (``_AgentRun.events``)
                            events = run.hooks.agent_events(run.handle, events)
                    finished = False  # a generator that ran to its end: no frame left to close
                    try:
                        async for event in events:
                            stop = run.observe(event)
                            # Most events carry a message and nothing else: skip the calls.
                            if (
                                event._signal is not None or event.action is not None
                            ) and steps.pass_up(event, index, path):
                                broke = True
                            if own is not None and (
                                own.hooks is not None or event.error is not None
                            ):
                                own.observe_passing(event)
                            yield event
                            if run.stream is not None:
                                await run.record_stream()
                            if stop:
                                failed = await settle(event, run)  # the child observed it
                                if failed is not None:  # a grandchild's stream: see ``settle``
                                    steps.pass_up(failed, index, path)
                                    if own is not None:
                                        own.observe_passing(failed)
                                    yield failed
                                    failed = None
                                break
                        else:
                            # Known without ``close_events``'s ``getattr(events, "ag_frame")``,
                            # ~0.2k instructions a step; another iterator's ``aclose`` still runs.
                            finished = type(events) is AsyncGeneratorType
                            if child_ctx._run.unyielded is not None:  # a pause made: its own?
                                unyielded_pause(run)
                    except GeneratorExit:
                        closed = True
                        raise
                    finally:
                        if not finished and getattr(events, "ag_frame", True) is not None:
                            await close_events(events)  # suspended: close it
                except _OwnFailure:
                    raise
                except (Exception, asyncio.CancelledError) as exc:
                    if closed or run.cancelled_by(exc):
                        raise
                    # The traceback's first frame is this one, whose ``event`` local will hold
                    # the error event and so the exception: a reference cycle that would keep the
                    # failed run alive until the collector ran. The agent's frames stay.
                    if exc.__traceback__ is not None:
                        exc.__traceback__ = exc.__traceback__.tb_next
                    event = run.failed(exc)
                    steps.pass_up(event, index, path)
                    if own is not None:
                        own.observe_passing(event)
                    yield event
                    stop = True
                finally:
                    if run.stream is not None or run.resumed or run.hooks is not None:
                        await run.finish()
                if stop or broke:
                    return
            steps.iteration += 1
            start, resuming = 0, False
            if not steps.iteration & 31:
                # Sub-agents that never await would keep this loop from ever giving the event
                # loop back: no cancellation, no timeout and no other run could get through.
                await asyncio.sleep(0)
    except _OwnFailure as failure:
        assert own is not None
        yield own.failed(failure.cause)
    except (Exception, asyncio.CancelledError) as exc:
        if own is None or closed or own.cancelled_by(exc):
            raise
        if isinstance(exc, asyncio.CancelledError):  # not this run's cancellation: it passes
            raise  # through, as it did before this handler took CancelledError for the above
        yield own.failed(exc)
    finally:
        event = NO_EVENT  # see _driver.NO_EVENT
        failed = None
        if own is not None and own.needs_finish:
            await own.finish()


def _check_name_and_agents(kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Refuse a workflow made without its name (``SequentialAgent([a, b])``, or
    ``sub_agents=`` alone) or without its sub-agents (``SequentialAgent("s")``), saying what
    to write, before Python's binding of ``__init__``'s arguments refuses them in its words."""
    named = "name" in kwargs
    if (not named and not args) or (args and isinstance(args[0], list | tuple)):
        raise TypeError(
            f"{kind} takes its name first, then its sub-agents in a list: {kind}('name', [a, b])"
        )
    if "sub_agents" not in kwargs and len(args) < (1 if named else 2):
        name = kwargs["name"] if named else args[0]
        raise TypeError(f"{kind} {name!r} needs its sub-agents in a list: {kind}({name!r}, [a, b])")


class _Workflow:
    _adk_drive: Any = None  # set by the workflows whose step runner applies drive's rules

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if ("run" in own or "resume" in own) and "_adk_drive" not in own:
            cls._adk_drive = None  # a subclass that runs differently is driven the general way
            if cls.__module__ != __name__ and "_adk_first_askers" not in own:
                # A subclass of one's own: nor can it be told to start with its steps
                # (``adk._turns_left``) unless it says so, as ``PlanExecute`` does.
                cls._adk_first_askers = False  # type: ignore[assignment]

    _adk_callbacks: Any = None  # its own callbacks (``callbacks=``), if any

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        # Typed callers see ``__init__``'s signature (mypy takes it over a ``__new__`` of the same
        # class), which still refuses ``SequentialAgent([a, b])`` and ``SequentialAgent("s")``;
        # at run time Python refused them naming ``_Workflow.__init__``, a private class, and
        # blaming the argument that was given. A copy or an unpickling passes no arguments.
        if (args or kwargs) and getattr(cls.__init__, "__module__", None) == __name__:
            _check_name_and_agents(cls.__name__, args, kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        name: str,
        sub_agents: Iterable[Agent],
        description: str = "",
        *,
        callbacks: Iterable[Any] = (),
    ) -> None:
        kind = type(self).__name__
        self.name = check_name(name, f"a {kind}")
        # The sub-agents before the description: SequentialAgent("s", a, b) is agents given one
        # by one, and told so, not "description must be a str, got ReActAgent".
        self.sub_agents = _unique_children(name, kind, sub_agents)
        self.description = agent_description(description, f"{kind} {name!r}")
        check_authors(f"{kind} {name!r}", self.sub_agents)
        if callbacks != ():  # ``adk.callbacks`` loads only for a workflow given some
            self._adk_callbacks = adk.callbacks._agent_callbacks(
                callbacks, f"{kind} {name!r}", calls=False
            )

    def __repr__(self) -> str:
        subs = ", ".join(s.name for s in self.sub_agents)
        return f"{type(self).__name__}({self.name!r}, [{subs}])"

    @property
    def _adk_first_askers(self) -> list[str]:
        """The agents certain to ask their model as it starts (``adk._turns_left``): a sequence's
        steps' or a loop's (it runs at least one iteration), a parallel workflow's branches'.
        A step or branch that may end the workflow first cannot be told: the ones after or
        beside it are counted, as the steps after a paused one are (``_check_turns_left``)."""
        return [name for child in self.sub_agents for name in first_askers(child)]

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """The resume's check before anything runs (``adk._preflight``): a sequence or loop
        resumes the step that paused, found by name, with the checks ``_run_steps`` makes."""
        state = _saved_state(ctx)
        path = tuple(state.names("run_path"))
        start = _resumed_step(state, path, ctx.run_path, self.sub_agents)
        later = self.sub_agents[start + 1 :]
        following: list[Agent] = []  # a loop's next iteration's steps
        loop = isinstance(self, LoopAgent)
        if isinstance(self, LoopAgent):
            iteration = _resumed_iteration(state, self.max_iterations)
            if self.max_iterations is None or iteration + 1 < self.max_iterations:
                following = self.sub_agents
        child = self.sub_agents[start]
        # As ``_Steps.steps_ctx``: a loop's steps see one more loop (``Preflight.stops``).
        steps_ctx = ctx._fork(loop_depth=ctx._loop_depth + 1) if loop else ctx
        child_ctx = steps_ctx._child(child.name, path)
        why = f"workflow {self.name!r} resumes its step {child.name!r}"
        walk.only_under(ctx.address, [child_ctx.address], why)
        walk.agent(child, child_ctx)
        if state.values.get("broke") is True:  # the step broke the loop: the steps end with it
            return
        if walk.plan.leaves_waiting(child_ctx.address):  # it pauses again: no step after it
            return
        if walk.stops(child_ctx.address, loop, ctx._loop_depth > 0):  # an exit or break
            return
        if ctx._run.turns is not None:
            _check_turns_left(state, ctx, walk, child, later, following)


def _check_turns_left(
    state: SavedState,
    ctx: RunContext,
    walk: Preflight,
    child: Agent,
    later: Iterable[Agent],
    following: Iterable[Agent],
) -> None:
    """Count, for the resume's check (``adk._turns_left``), a model call for each step after the
    paused one that is certain to ask its model as it starts, and refuse the resume when the run
    has no call left for one: run, the paused step would make its calls (an approved refund),
    the step then fail on the limit with the checkpoint kept, and a retry with a higher limit
    make them again. Not asked when the paused step ends the workflow first: it broke the loop
    before it paused (saved as ``broke``), or its paused round asks for an exit or a break this
    workflow takes (``Preflight.stops``); an ending it cannot tell (an agent of one's own, a call
    that asks for one once resumed) is refused too, as a higher ``max_turns`` resumes it.
    Counted after the paused step's own (the calls it needs for its round's results come
    first), whose refusal names the step.

    A loop's next iteration (``following``) is counted only when no later step of this one asks
    its model: such a step is what usually decides to go on (a ``PlanExecute``'s replanner
    answering ends its loop), while a loop whose iteration asks nothing after the paused step
    runs its next one unless the paused step breaks it."""
    asking = [(step, name) for step in later for name in first_calls(step, ctx)]
    if not asking:
        asking = [(step, name) for step in following for name in first_calls(step, ctx)]
    for step, name in asking:
        inside = "" if name == step.name else f" (agent {name!r})"
        refused = count_ahead(walk, ctx, f"step {step.name!r}{inside}")
        if refused is not None:
            raise state.turns_short(
                f"{refused}: its step {step.name!r}, after the paused step {child.name!r}, asks "
                f"a model call{inside} the limit does not allow; resume with a higher max_turns "
                "(it counts the calls before the pause)",
                turns_limit(ctx),
            )


class SequentialAgent(_Workflow):
    """Runs its sub-agents one after another."""

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run the steps in order. ``input`` is not used: each step's input is rebuilt from the
        history, so it sees the earlier steps' output."""
        if ctx._run.plan is not None:  # resuming: no call on a fresh run's starts
            refuse_fresh_start(self, ctx)
        return _run_steps(self, ctx, None, False)

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Continue at the step that paused (its index and run path were saved)."""
        return _run_steps(self, ctx, None, True)

    def _adk_drive(self, input: AgentInput, ctx: RunContext) -> AsyncGenerator[AgentEvent, None]:
        """``drive(self, ...)``: the workflow's own rules applied by its step runner."""
        return _run_steps(self, ctx, agent_run(self, ctx), False)


def _set_max_iterations(loop: LoopAgent, value: Any) -> Any:
    """``LoopAgent.max_iterations`` assigned after the loop is made, checked as when made."""
    name = loop.name
    check_count(value, f"LoopAgent {name!r}: max_iterations", optional=True)
    if value is None and not loop.sub_agents:
        raise ValueError(
            f"LoopAgent {name!r} has no sub-agents and no max_iterations: it would never end"
        )
    return value


def _set_max_concurrency(parallel: ParallelAgent, value: Any) -> Any:
    """``ParallelAgent.max_concurrency`` assigned after it is made, checked as when made."""
    check_count(value, f"ParallelAgent {parallel.name!r}: max_concurrency", optional=True)
    return value


class LoopAgent(_Workflow):
    """Repeats its sub-agents in order until ``max_iterations`` (None: until break, exit, interrupt
    or error)."""

    # ``max_iterations`` assigned later is checked as when made: ``checked_settings``.
    __setattr__ = checked_settings({"max_iterations": _set_max_iterations}, made="sub_agents")
    max_iterations: int | None  # set by the constructor past ``__setattr__``

    def __init__(
        self,
        name: str,
        sub_agents: Iterable[Agent],
        max_iterations: int | None = None,
        description: str = "",
        *,
        callbacks: Iterable[Any] = (),
    ) -> None:
        super().__init__(name, sub_agents, description, callbacks=callbacks)
        check_count(max_iterations, f"LoopAgent {name!r}: max_iterations", optional=True)
        if max_iterations is None and not self.sub_agents:
            # Its step runner would repeat nothing forever without awaiting once: the event loop
            # would hang, and no cancellation or timeout could reach it.
            raise ValueError(
                f"LoopAgent {name!r} has no sub-agents and no max_iterations: it would never end"
            )
        object.__setattr__(self, "max_iterations", max_iterations)  # checked above

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Repeat the steps in order. ``input`` is not used: each step's input is rebuilt from
        the history, so it sees the earlier steps' and iterations' output."""
        if ctx._run.plan is not None:  # resuming: no call on a fresh run's starts
            refuse_fresh_start(self, ctx)
        return _run_steps(self, ctx, None, False)

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Continue at the step and iteration that paused."""
        return _run_steps(self, ctx, None, True)

    def _adk_drive(self, input: AgentInput, ctx: RunContext) -> AsyncGenerator[AgentEvent, None]:
        """``drive(self, ...)``: the workflow's own rules applied by its step runner."""
        return _run_steps(self, ctx, agent_run(self, ctx), False)


def _resumed_step(
    state: SavedState, path: tuple[str, ...], own_path: tuple[str, ...], children: list[Agent]
) -> int:
    """Where a resumed sequence or loop continues: the index of the step that paused, found by
    its name (the saved run path ends with it), not by the saved index.

    The index alone would resume whatever step now stands there once the steps changed between
    pause and resume (a redeploy): a step added before the paused one would make an earlier step
    run a second time and the paused one run fresh, its resume data dropped. By name, steps added
    or removed before or after the paused one do not matter: those before it do not run (the
    resume continues where the run paused), those after it run as usual. What cannot resume
    safely is refused before any step runs: the paused step gone or renamed, or a step that ran
    before the pause (in this iteration) moved after it, where it would run again. The saved
    index says how many of the run path's last names are this iteration's steps.
    """
    index = state.count("index", below=max(len(path) - len(own_path), 1))
    names = [child.name for child in children]
    paused = path[-1] if path else ""
    if paused not in names:
        listed = ", ".join(repr(name) for name in names) or "none"
        raise state.error(
            f"the step that paused, {paused!r}, is no longer one of its steps ({listed})"
        )
    start = names.index(paused)
    again = [name for name in path[len(path) - 1 - index : -1] if name in names[start + 1 :]]
    if again:
        raise state.error(
            f"step(s) {', '.join(map(repr, again))} ran before step {paused!r} paused and now "
            "come after it: resuming would run them again"
        )
    return start


def _resumed_iteration(state: SavedState, limit: int | None) -> int:
    """The loop iteration a resumed loop continues in; one its ``max_iterations`` no longer
    allows (lowered since the pause) is refused rather than skipping the paused step."""
    iteration = state.count("iteration", default=0)
    if limit is not None and iteration >= limit:
        raise state.error(
            f"'iteration' is {iteration}: it paused in iteration {iteration + 1}, beyond its "
            f"max_iterations of {limit}"
        )
    return iteration


def _saved_state(ctx: RunContext) -> SavedState:
    resume = ctx.resume
    return SavedState(f"workflow '{ctx.agent_name}'", resume.state if resume is not None else None)


def _saved_fork(state: SavedState, ctx: RunContext) -> int | None:
    """Where a paused ``ParallelAgent``'s branches forked in the history (see ``_run_branches``),
    not past the history's end; ``None`` for checkpoints from before it was saved."""
    if state.values.get("fork_seq") is None:
        return None
    return state.order("fork_seq", end=ctx._run.seq)


def _branch_views(parent_view: list[_Entry], fork: int) -> Callable[[RunContext], list[_Entry]]:
    """What each resumed branch sees of ``parent_view``, by its context: the entries from before
    the fork and its own, as it saw them before the pause, in the view's order. Shared by the
    resume and its check before it runs (``_adk_preflight``), which must give each branch the
    same view. The entries after the fork are grouped by branch once, for all the branches:
    picking each branch's from the whole view was quadratic in a wide fan-out (each branch's
    entries are after the fork, and there are as many as the branches say)."""
    before: list[tuple[int, _Entry]] = []
    after: dict[tuple[str, ...], list[tuple[int, _Entry]]] = {}
    depth = -1  # the branches' run paths' length, known from the first branch asking

    def view(child_ctx: RunContext) -> list[_Entry]:
        nonlocal depth
        path = child_ctx.run_path
        if depth != len(path):  # a parallel's branches share it: grouped once
            depth = len(path)
            before.clear()
            after.clear()
            for index, entry in enumerate(parent_view):
                if entry.seq < fork:
                    before.append((index, entry))
                else:
                    after.setdefault(entry.run_path[:depth], []).append((index, entry))
        own = after.get(path)
        if not own:
            return [entry for _, entry in before]
        return [entry for _, entry in heapq.merge(before, own, key=_first)]

    return view


def _first(item: tuple[int, _Entry]) -> int:
    return item[0]


class ParallelAgent(_Workflow):
    """Runs its sub-agents concurrently; events interleave as they happen, each branch waiting until
    its previous event was taken. The first error (or exit) cancels the other branches."""

    # ``max_concurrency`` assigned later is checked as when made: ``checked_settings``.
    __setattr__ = checked_settings({"max_concurrency": _set_max_concurrency}, made="sub_agents")
    max_concurrency: int | None  # set by the constructor past ``__setattr__``

    def __init__(
        self,
        name: str,
        sub_agents: Iterable[Agent],
        description: str = "",
        max_concurrency: int | None = None,
        *,
        callbacks: Iterable[Any] = (),
    ) -> None:
        super().__init__(name, sub_agents, description, callbacks=callbacks)
        check_count(max_concurrency, f"ParallelAgent {name!r}: max_concurrency", optional=True)
        object.__setattr__(self, "max_concurrency", max_concurrency)  # checked above

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run every branch. ``input`` is not used: each branch's input is rebuilt from the
        history as it stood when the branches forked."""
        if ctx._run.plan is not None:  # resuming: no call on a fresh run's starts
            refuse_fresh_start(self, ctx)
        return self._run_branches(ctx, finished=(), fork=None)

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Run again only the branches that had not finished; each sees the history it saw
        before the pause, not the entries its siblings added."""
        state = _saved_state(ctx)
        finished = self._finished_branches(state)
        return self._run_branches(ctx, finished=finished, fork=_saved_fork(state, ctx))

    def _adk_preflight(self, ctx: RunContext, walk: Preflight) -> None:
        """The resume's check before anything runs (``adk._preflight``): the branches that had
        not finished resume, each in the history view ``_run_branches`` gives it."""
        state = _saved_state(ctx)
        finished = set(self._finished_branches(state))
        fork = _saved_fork(state, ctx)
        views = _branch_views(ctx._lane.snapshot(), fork) if fork is not None else None
        entered: list[tuple[Agent, RunContext]] = []
        for index, child in enumerate(self.sub_agents):
            if index in finished:
                continue
            child_ctx = ctx._child(child.name)
            if views is not None and walk.holds(child_ctx.address):
                inherited = views(child_ctx)
                child_ctx = child_ctx._fork(lane=new_lane(ctx._lane, inherited))
            entered.append((child, child_ctx))
        why = f"workflow {self.name!r} resumes only the branches that had not finished"
        walk.only_under(ctx.address, [c.address for _, c in entered], why)
        for child, child_ctx in entered:
            walk.agent(child, child_ctx)
            target = walk.take_transfer(child_ctx.address)  # one no flow in the branch took
            if target is not None:  # fails the run once the round's approved calls ran
                raise walk.failing_transfer(
                    target,
                    f"it leaves the parallel branch {child.name!r}, which fails it (wrap the "
                    "branch with with_sub_agents to handle transfers inside it)",
                )

    def _finished_branches(self, state: SavedState) -> list[int]:
        """The indices of the branches that finished before the pause, found by name.

        The saved ``finished`` indices are positions among the branches the paused run had,
        saved with their names (``branches``) since the branches may change between pause and
        resume (a redeploy): by position, a branch added or removed before another would have a
        finished branch run again and a waiting one skipped, its resume data dropped. A branch
        that paused must still be there (by name); a branch added since runs, as every branch
        does. Older checkpoints saved no names: their indices are read as positions, as before.
        """
        branches = state.values.get("branches")
        if branches is None:
            return state.counts("finished", below=len(self.sub_agents))
        names = state.names("branches")
        finished = {names[i] for i in state.counts("finished", below=len(names))}
        now = {child.name: index for index, child in enumerate(self.sub_agents)}
        gone = [name for name in names if name not in finished and name not in now]
        if gone:
            listed = ", ".join(repr(name) for name in now) or "none"
            raise state.error(
                f"the branch(es) that paused, {', '.join(map(repr, gone))}, are no longer among "
                f"its branches ({listed})"
            )
        return sorted(now[name] for name in finished if name in now)

    async def _run_branches(
        self, ctx: RunContext, finished: Iterable[int], fork: int | None
    ) -> AsyncIterator[AgentEvent]:
        """Run the unfinished branches. ``fork`` is where the branches forked in the history (the
        order number of the first entry after it), given when resuming: a resumed branch sees
        what came before the fork and its own entries, as it did before the pause; without it (a
        checkpoint from before it was saved) it sees everything the checkpoint's history holds."""
        done = set(finished)
        views = _branch_views(ctx._lane.snapshot(), fork) if fork is not None else None
        if fork is None:
            fork = ctx._run.seq
        indices = [i for i in range(len(self.sub_agents)) if i not in done]
        queue: asyncio.Queue[tuple[int, AgentEvent | None, asyncio.Future[None] | None]]
        queue = asyncio.Queue()
        limit = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        lanes: dict[int, _Lane] = {}
        loop = asyncio.get_running_loop()

        async def branch(index: int) -> None:
            child = self.sub_agents[index]
            child_ctx = ctx._child(child.name)
            inherited = views(child_ctx) if views is not None else None
            lane = lanes[index] = new_lane(ctx._lane, inherited)
            child_ctx = child_ctx._fork(lane=lane)
            try:
                if limit is not None:
                    await limit.acquire()
                try:
                    events = drive(child, build_input(child_ctx, child.name), child_ctx)
                    async with closing(events):
                        async for event in events:
                            taken = loop.create_future()
                            queue.put_nowait((index, event, taken))
                            await taken
                finally:
                    if limit is not None:
                        limit.release()
            except (Exception, asyncio.CancelledError) as exc:
                if is_cancellation(exc):
                    raise
                # What the driver itself raised (a failing ``after_agent`` callback): the branch
                # failed. Dying with it, the task would count as a finished branch, the failure
                # lost ("Task exception was never retrieved") and the run a success.
                failure = AgentEvent(
                    child.name, child_ctx.run_path, error=ErrorInfo.of(exc), exception=exc
                )
                queue.put_nowait((index, failure, loop.create_future()))
            finally:
                event = NO_EVENT  # see _driver.NO_EVENT
                queue.put_nowait((index, None, None))

        tasks = [asyncio.create_task(branch(i), name=f"{self.name}/{i}") for i in indices]
        signal: _InterruptSignal | None = None
        interrupted: set[int] = set()
        running = len(tasks)
        try:
            while running:
                index, event, taken = await queue.get()
                if event is None:
                    running -= 1
                    if index not in interrupted:
                        done.add(index)
                    continue
                assert taken is not None
                if event._signal is not None:
                    interrupted.add(index)
                    signal = signal or _InterruptSignal()
                    signal.merge(event._signal)
                    taken.set_result(None)
                    continue
                action = event.action
                if (
                    action is not None
                    and action.transfer_to is not None
                    and not event._flags & _TRANSFER_HANDLED
                ):
                    event = _branch_transfer_error(event)
                if event.error is not None or event.ends_agent:
                    # The other branches stop now. The one that ended the run stops when the
                    # driver closes us after the event, once it has read a stream the event
                    # carries to its end (``settle``): cancelled now, it would cut it off.
                    emitter = tasks[indices.index(index)]
                    await _cancel([t for t in tasks if t is not emitter])
                    yield event
                    return
                yield event
                if not taken.done():
                    taken.set_result(None)
        finally:
            event = NO_EVENT  # see _driver.NO_EVENT
            failed = await _cancel(tasks)
            ctx._lane.merge([lanes[i] for i in sorted(lanes)])
            if failed is not None:  # closed or cancelled, and a branch's cleanup failed
                try:
                    raise failed
                finally:
                    del failed  # a local in a frame of its traceback: a reference cycle
        if signal is not None:
            state = {
                "finished": sorted(done),
                "fork_seq": fork,
                "branches": [child.name for child in self.sub_agents],
            }
            signal.save(ctx.address, state)
            yield _interrupt_event(signal)


def _branch_transfer_error(event: AgentEvent) -> AgentEvent:
    target = event.action.transfer_to if event.action is not None else None
    message = (
        f"transfer failed: agent {event.agent_name!r} asked to transfer to {target!r} from a "
        "parallel branch; wrap the branch with with_sub_agents to handle transfers inside it"
    )
    event._flags |= _TRANSFER_HANDLED
    return AgentEvent(event.agent_name, event.run_path, error=ErrorInfo("TransferError", message))


async def _cancel(tasks: list[asyncio.Task[None]]) -> BaseException | None:
    """Cancel the unfinished branches and wait for them, through cancellations of our own (see
    ``cancel_and_wait``). Returns the first error one of them ended with instead of its
    cancellation (its agent's cleanup failed), for the caller to raise when the parallel agent
    itself is being closed or cancelled, as a sequence would."""
    return await cancel_and_wait(tasks)
