"""Workflow agents: ``SequentialAgent``, ``ParallelAgent`` and ``LoopAgent``.

Each child starts with input rebuilt from history, so later steps see earlier steps' output. Run
paths grow with each step as in Eino (``[seq, a1]``, ``[seq, a1, a2]``); addresses do not (a child
is always at the workflow's address plus ``agent:<child>``). On interrupt each workflow saves where
it was (step index, loop iteration, finished branches, the run path) in the travelling signal.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable
from typing import Any

from ._aio import closing
from ._driver import drive, take_break
from .agent import Agent, AgentInput
from .context import RunContext, _interrupt_event, _Lane
from .events import _BREAK_HANDLED, _TRANSFER_HANDLED, AgentEvent, ErrorInfo
from .history import build_input
from .interrupts import _InterruptSignal

__all__ = ["LoopAgent", "ParallelAgent", "SequentialAgent"]


def _unique_children(owner: str, sub_agents: Iterable[Agent]) -> list[Agent]:
    children = list(sub_agents)
    names = [child.name for child in children]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"{owner}: sub-agent names must be unique, repeated: {duplicates}")
    return children


class _Workflow:
    def __init__(self, name: str, sub_agents: Iterable[Agent], description: str = "") -> None:
        if not name:
            raise ValueError("a workflow agent needs a non-empty name")
        self.name = name
        self.description = description
        self.sub_agents = _unique_children(name, sub_agents)

    def __repr__(self) -> str:
        subs = ", ".join(s.name for s in self.sub_agents)
        return f"{type(self).__name__}({self.name!r}, [{subs}])"


class _Cursor:
    """Where a run of steps stands: the run path of the last step started."""

    __slots__ = ("path",)

    def __init__(self, path: tuple[str, ...]) -> None:
        self.path = path


async def _run_steps(
    children: list[Agent],
    ctx: RunContext,
    start: int,
    cursor: _Cursor,
    state_extra: dict[str, Any],
    resuming: bool,
) -> AsyncIterator[AgentEvent]:
    """Run ``children[start:]`` in order, growing ``cursor.path``; shared by sequences and loops.

    Ends early on interrupt (saving ``{index, run_path, **state_extra}`` at the workflow's address)
    and, inside a loop, after the step that asked to break the loop. ``cursor.path`` is the run
    path of the step before ``start`` (or of step ``start`` itself when ``resuming``).
    """
    for index in range(start, len(children)):
        child = children[index]
        if not (resuming and index == start):
            cursor.path = (*cursor.path, child.name)
        path = cursor.path
        child_ctx = ctx._child(child.name, run_path=path)
        stop_after = False
        events = drive(child, build_input(child_ctx, child.name), child_ctx)
        try:
            async for event in events:
                if event._signal is not None:
                    state = {"index": index, "run_path": list(path), **state_extra}
                    event._signal.save(ctx.address, state)
                elif event.action is not None and take_break(event, ctx._loop_depth):
                    stop_after = True
                yield event
        finally:
            if getattr(events, "ag_frame", True) is not None:  # suspended: close it and below
                await events.aclose()
        if stop_after:
            return


class SequentialAgent(_Workflow):
    """Runs its sub-agents one after another."""

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        return _run_steps(self.sub_agents, ctx, 0, _Cursor(ctx.run_path), {}, False)

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        state = _saved_state(ctx)
        cursor = _Cursor(tuple(state["run_path"]))
        return _run_steps(self.sub_agents, ctx, state["index"], cursor, {}, True)


class LoopAgent(_Workflow):
    """Repeats its sub-agents in order until ``max_iterations`` (None: until break, exit, interrupt
    or error)."""

    def __init__(
        self,
        name: str,
        sub_agents: Iterable[Agent],
        max_iterations: int | None = None,
        description: str = "",
    ) -> None:
        super().__init__(name, sub_agents, description)
        if max_iterations is not None and max_iterations < 1:
            raise ValueError("max_iterations must be at least 1 (or None)")
        self.max_iterations = max_iterations

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        return self._iterate(ctx, 0, 0, ctx.run_path, False)

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        state = _saved_state(ctx)
        path = tuple(state["run_path"])
        return self._iterate(ctx, state["iteration"], state["index"], path, True)

    async def _iterate(
        self, ctx: RunContext, iteration: int, start: int, path: tuple[str, ...], resuming: bool
    ) -> AsyncIterator[AgentEvent]:
        inner = ctx._fork(loop_depth=ctx._loop_depth + 1)
        cursor = _Cursor(path)
        while self.max_iterations is None or iteration < self.max_iterations:
            broke = False
            state = {"iteration": iteration}
            steps = _run_steps(self.sub_agents, inner, start, cursor, state, resuming)
            async with closing(steps) as events:
                async for event in events:
                    if take_break(event, inner._loop_depth):
                        event._flags |= _BREAK_HANDLED
                        broke = True
                    yield event
            if broke:
                return
            iteration, start, resuming = iteration + 1, 0, False


def _saved_state(ctx: RunContext) -> dict[str, Any]:
    resume = ctx.resume
    if resume is None or not isinstance(resume.state, dict):
        raise RuntimeError(f"{ctx.agent_name}: checkpoint has no saved workflow state")
    return resume.state


class ParallelAgent(_Workflow):
    """Runs its sub-agents concurrently; events interleave as they happen, each branch waiting until
    its previous event was taken. The first error (or exit) cancels the other branches."""

    def __init__(
        self,
        name: str,
        sub_agents: Iterable[Agent],
        description: str = "",
        max_concurrency: int | None = None,
    ) -> None:
        super().__init__(name, sub_agents, description)
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1 (or None)")
        self.max_concurrency = max_concurrency

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        return self._run_branches(ctx, finished=())

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        return self._run_branches(ctx, finished=_saved_state(ctx).get("finished", ()))

    async def _run_branches(
        self, ctx: RunContext, finished: Iterable[int]
    ) -> AsyncIterator[AgentEvent]:
        done = set(finished)
        indices = [i for i in range(len(self.sub_agents)) if i not in done]
        queue: asyncio.Queue[tuple[int, AgentEvent | None, asyncio.Future[None] | None]]
        queue = asyncio.Queue()
        limit = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        lanes: dict[int, _Lane] = {}
        loop = asyncio.get_running_loop()

        async def branch(index: int) -> None:
            child = self.sub_agents[index]
            lane = lanes[index] = _Lane(ctx._lane)
            child_ctx = ctx._child(child.name)._fork(lane=lane)
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
            finally:
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
                    await _cancel(tasks)
                    yield event
                    return
                yield event
                if not taken.done():
                    taken.set_result(None)
        finally:
            await _cancel(tasks)
            ctx._lane.merge([lanes[i] for i in sorted(lanes)])
        if signal is not None:
            signal.save(ctx.address, {"finished": sorted(done)})
            yield _interrupt_event(signal)


def _branch_transfer_error(event: AgentEvent) -> AgentEvent:
    target = event.action.transfer_to if event.action is not None else None
    message = (
        f"transfer failed: agent {event.agent_name!r} asked to transfer to {target!r} from a "
        "parallel branch; wrap the branch with with_sub_agents to handle transfers inside it"
    )
    event._flags |= _TRANSFER_HANDLED
    return AgentEvent(event.agent_name, event.run_path, error=ErrorInfo("TransferError", message))


async def _cancel(tasks: list[asyncio.Task[None]]) -> None:
    pending = [t for t in tasks if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
