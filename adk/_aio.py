"""Small asyncio helpers shared by the runtime."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Iterable
from types import TracebackType
from typing import Any, Generic, Self, TypeVar

T = TypeVar("T")

__all__ = ["AsyncCloseable", "cancel_and_wait", "closing", "finish"]


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
