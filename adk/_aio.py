"""Small asyncio helpers shared by the runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Generic, Self, TypeVar

T = TypeVar("T")

__all__ = ["AsyncCloseable", "closing"]


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
