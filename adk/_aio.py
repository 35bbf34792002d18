"""Small asyncio helpers shared by the runtime."""

from __future__ import annotations

import asyncio
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Iterable
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

T = TypeVar("T")

__all__ = [
    "AsyncCloseable",
    "being_cancelled",
    "cancel_and_wait",
    "cancelled_beyond",
    "closing",
    "finish",
    "run_ended",
    "run_resumed",
    "run_started",
]


# -- "is this run being cancelled" ----------------------------------------------------------------
#
# A task's ``cancelling()`` counts the cancellations requested of it and not taken back. One that
# was requested before a run started is not the run's: a run made in a cancelled task's cleanup
# (``except CancelledError: await runner.invoke(...); raise``, a service's goodbye on shutdown, or
# an anyio shielded scope inside a cancelled one, as Starlette's code does) runs with the count
# above 0 from its first step to its last, and nobody cancels it. So every "is this run being
# cancelled" asks whether the count rose above what it was when the run started in that task (its
# baseline); a task the run makes (a parallel branch, a tool call) starts at 0, its own baseline.
#
# The baseline is kept in a context variable, set by a run's start only when it is not 0 (or one
# is set already): a run in a task nobody cancelled, nearly every run, sets nothing. It names the
# task it was taken in (weakly: the task's context holds it), so a task the run makes, whose
# context is a copy, does not take it for its own.


# Every run asks for its task as it starts (``run_started``), and every traced agent that ends
# without an error whether it is being cancelled (``being_cancelled``). Python 3.11's
# ``asyncio.current_task`` is a Python function over a dict of C's, about 2,500 instructions of the
# 75,000 a one-turn run takes: read here as it reads it (None, not a RuntimeError, outside a
# running loop). 3.12 and later have it in C, and are asked as they are. The read is written out
# at both places, not put in a helper: on 3.11 a helper is a Python call again, as dear as
# ``asyncio.current_task`` itself (its one frame and two C calls).
_FAST = sys.version_info < (3, 12)
if _FAST:
    _tasks_get = asyncio.tasks._current_tasks.get  # type: ignore[attr-defined]
    _running_loop = asyncio.events._get_running_loop


class _Baseline:
    """A run's baseline: ``task``'s ``cancelling()`` when the run started there. ``live`` until
    the run ends; ``outer`` is the baseline it hides (an enclosing run's, or None)."""

    __slots__ = ("count", "live", "outer", "task")

    def __init__(
        self, task: weakref.ref[asyncio.Task[Any]], count: int, outer: _Baseline | None
    ) -> None:
        self.task = task
        self.count = count
        self.outer = outer
        self.live = True


_baseline: ContextVar[_Baseline | None] = ContextVar("adk_cancel_baseline", default=None)


def run_started() -> _Baseline | None:
    """At a run's start, in the task the run starts in: its baseline when it is one to keep
    (pass it to ``run_ended`` when the run ends), else None, nothing kept."""
    task = _tasks_get(_running_loop()) if _FAST else asyncio.current_task()  # see _FAST
    if task is None:
        return None
    count = task.cancelling()
    if count and getattr(task, "_must_cancel", False):
        # Requested in this very step and not delivered yet (asyncio.run's SIGINT handler
        # cancels the main task from a signal handler, mid-step): it reaches the run at its
        # first await, so it is the run's, not one from before it that a cleanup caught.
        count -= 1
    outer = _baseline.get()
    while outer is not None and not outer.live:  # one left by a generator closed elsewhere
        outer = outer.outer
    if not count and outer is None:
        return None
    baseline = _Baseline(weakref.ref(task), count, outer)
    _baseline.set(baseline)
    return baseline


def run_ended(baseline: _Baseline | None) -> None:
    """At the end of the run ``run_started`` gave ``baseline`` to (None: nothing to do). Its
    enclosing run's baseline holds again. A generator's run may end in another context (closed
    by the loop's finaliser): the baseline is only marked ended there, and passed over."""
    if baseline is None:
        return
    baseline.live = False
    current = _baseline.get()
    if current is not None and not current.live:
        while current is not None and not current.live:
            current = current.outer
        _baseline.set(current)


def run_resumed(baseline: _Baseline) -> None:
    """A generator's run going on after a ``yield``, with a ``baseline``: its reader ran in the
    meantime, and may have taken back (``uncancel``) cancellations that the task had pending when
    the run started there: ``asyncio.timeout`` does on leaving, and anyio when a cancelled scope
    is left, so a run started in a cleanup may go on after it. Those are no longer pending, so a
    cancellation that comes later is the run's: the baseline, and those of the runs it is inside
    of in that task, come down to the count now (they never go up)."""
    task = baseline.task()
    if task is None or task is not asyncio.current_task():
        return
    count = task.cancelling()
    if count >= baseline.count:
        return
    outer: _Baseline | None = baseline
    while outer is not None:
        if outer.count > count and outer.task() is task:
            outer.count = count
        outer = outer.outer


def _count_before(task: asyncio.Task[Any]) -> int:
    """The baseline of ``task`` in the current context: 0 unless a run started in it with
    cancellations pending (and has not ended)."""
    baseline = _baseline.get()
    while baseline is not None and not baseline.live:
        baseline = baseline.outer
    if baseline is None or baseline.task() is not task:
        return 0
    return baseline.count


def cancelled_beyond(task: asyncio.Task[Any]) -> bool:
    """Whether the run that ``task`` runs is being cancelled: a cancellation of ``task`` came
    after the run started there (see above). Asked from a task the run made too (its context,
    a copy, has the run's baseline)."""
    count = task.cancelling()
    return count > 0 and count > _count_before(task)


def being_cancelled() -> bool:
    """Whether the run in the current task is being cancelled (``cancelled_beyond``). A function
    rather than a local in the caller: a local holding the task, in a frame that the task's
    CancelledError traceback holds, would make a reference cycle of every cancelled reader."""
    task = _tasks_get(_running_loop()) if _FAST else asyncio.current_task()  # see _FAST
    return task is not None and cancelled_beyond(task)


class closing(Generic[T]):
    """``async with closing(it)``: close ``it`` on exit if it can be closed.

    ``contextlib.aclosing`` requires ``aclose``; agents may return any async iterator, and those
    without ``aclose`` have nothing to close.
    """

    __slots__ = ("_it",)

    def __init__(self, it: AsyncIterator[T]) -> None:
        self._it = it

    async def __aenter__(self) -> AsyncIterator[T]:
        return self._it

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        del exc, tb  # not kept in this frame while it awaits: see _driver.NO_EVENT
        aclose = getattr(self._it, "aclose", None)
        if aclose is not None:
            await aclose()


class AsyncCloseable:
    """Mixin: ``async with obj:`` ends with ``await obj.aclose()``. Subclasses define ``aclose``."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


# Who holds a shared closeable open (``Resources``, an ``MCPToolset``, an ``OpenAIChatModel``; any
# part of an agent tree a runner closes): ``async with obj:`` blocks on it and runners inside
# ``async with runner:`` that use it. A runner per request over shared ones closes at its end only
# what nobody else holds (``Runner.aclose``), so the last holder to let go closes it. Kept here by
# ``id`` with the object itself (not on the object: a tool with slots has no room for it, and a
# part of one's own is no class of ours), each entry dropped when its count is back to 0. A lock,
# as loops in several threads may share one (``asyncio.run`` per request in worker threads).
_HOLDS: dict[int, list[Any]] = {}
_HOLDING = threading.Lock()
# The held ones that close others with them (a class with ``_adk_held_with()``: a ``Resources``
# and its toolsets and models): what they hold is held with them, as their last holder's close
# closes it. Read at each ``held``, so what is registered after the hold is held too.
_CONTAINERS: dict[int, Any] = {}


def hold(part: object) -> None:
    """Count one more holder of ``part``."""
    with _HOLDING:
        entry = _HOLDS.get(id(part))
        if entry is None:
            _HOLDS[id(part)] = [part, 1]
            if callable(getattr(type(part), "_adk_held_with", None)):
                _CONTAINERS[id(part)] = part
        else:
            entry[1] += 1


def release(part: object) -> bool:
    """Count one holder of ``part`` fewer; True when none is left (nor was: never held)."""
    with _HOLDING:
        entry = _HOLDS.get(id(part))
        if entry is None:
            return True
        entry[1] -= 1
        if entry[1] > 0:
            return False
        del _HOLDS[id(part)]
        _CONTAINERS.pop(id(part), None)
        return True


def held(part: object, besides: object = None) -> bool:
    """Whether anyone holds ``part`` open (``hold``): itself, or a held container of it (a
    ``Resources`` it is registered in) other than ``besides``, whose close closes it."""
    if id(part) in _HOLDS:
        return True
    if not _CONTAINERS:
        return False
    with _HOLDING:
        containers = [c for c in _CONTAINERS.values() if c is not besides]
    return any(any(m is part for m in c._adk_held_with()) for c in containers)


class SharedCloseable(AsyncCloseable):
    """An ``AsyncCloseable`` several users may share: ``async with obj:`` holds it open, and the
    block's end closes it only if no other holder is left (another ``async with`` on it, a runner
    using it inside its own ``async with``, a held ``Resources`` it is registered in), else the
    last of them closes it. ``aclose()`` itself closes at once, whoever holds it: it is the
    explicit close."""

    async def __aenter__(self) -> Self:
        hold(self)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        del exc, tb  # not kept in this frame while it awaits: see _driver.NO_EVENT
        if release(self) and not held(self):  # else the held container's close closes it
            await self.aclose()


# Cleanup that must finish even when the task running it is cancelled again meanwhile. asyncio
# delivers a cancellation once, so an ``await`` in a ``finally`` normally completes; anyio's cancel
# scopes (Starlette and FastAPI cancel a streaming response's task that way when its client hangs
# up; MCP's SDK uses them too) cancel the task again at every await until the scope is left. An
# awaited release or ``gather`` in cleanup then ends at once: the release never happens, and a
# cancelled ``gather`` cancels its tasks a second time, cutting short the cleanup they were running.
# So these helpers wait through any number of cancellations, as asyncio.TaskGroup and anyio's own
# task groups wait for their children, and raise the cancellation once the work has ended.


async def finish(work: Awaitable[T]) -> T:
    """Await ``work`` to its end even if the caller is cancelled meanwhile (once, or again and
    again), then raise the cancellation; otherwise return what ``work`` returned."""
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the caller's cancellation is what goes on
        try:
            raise cancelled
        finally:
            del cancelled  # a local in a frame of its traceback: a reference cycle
    return task.result()


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]]) -> BaseException | None:
    """Cancel the unfinished ``tasks`` and wait until every one has ended, through cancellations
    of the caller (raised afterwards). Returns the first exception other than a cancellation that
    one of them ended with; every task's outcome is retrieved."""
    pending = [task for task in tasks if not task.done()]
    for task in pending:
        task.cancel()
    if pending:
        await finish(asyncio.wait(pending))
    first: BaseException | None = None
    for task in pending:
        if not task.cancelled():
            error = task.exception()
            if first is None and not isinstance(error, asyncio.CancelledError):
                first = error
    return first
