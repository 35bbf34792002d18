"""One client per event loop for an object that makes its own, each closed as its loop ends.

Why: a client's connections (the ``openai`` SDK's HTTP pool, a redis-py client, an asyncpg pool)
belong to the event loop they were opened on. An object shared by requests that each run their
own loop (``asyncio.run`` per request: scripts, notebooks, sync web frameworks, Celery tasks,
which also serve requests from several threads at once) needs a client per loop. Made again
whenever the loop changed and the old one dropped, the old client's connections were never
closed: the collector closed them from whatever loop was running when it freed the client
(OpenAI's finalizer logged "Task exception was never retrieved ... Event loop is closed" for
nearly every request; Redis and PostgreSQL left a server connection open per request until then,
with a ResourceWarning); and one client shared by two threads' loops swapped between a thread's
binding and its use, sending one loop's request through the other loop's pool (or, for an asyncpg
pool, terminating the pool another thread's operations were using).

Each loop's client is closed when that loop ends: a small async generator, started on the loop,
is closed by ``asyncio.run`` (``loop.shutdown_asyncgens``) before the loop closes, and closes the
client while the loop still runs. A loop closed without that step (a hand-run loop) leaves its
client to the garbage collector, as before.

Used by ``OpenAIChatModel``, the Redis and PostgreSQL checkpoint stores and ``MCPToolset`` (a
session, and for a stdio server its process, per loop); it lives at the top of the package so
that neither ``adk.models`` nor ``adk.checkpoint`` imports the other for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["LoopClients"]

_C = TypeVar("_C")
_Loop = asyncio.AbstractEventLoop


@dataclass(slots=True)
class _Entry(Generic[_C]):
    loop: weakref.ref[_Loop]
    client: _C
    closer: AsyncGenerator[None, None]


class LoopClients(Generic[_C]):
    """The client of the running loop (``get``, else ``bind``); ``first`` (when given) is used by
    the first loop, ``make`` makes one for each other loop (it is called on that loop), ``close``
    closes one (on its loop; exceptions it raises are dropped: a loop's end has nobody to tell).
    ``close`` must not hold the owner of this object strongly, or the owner lives as long as the
    loops it was used on."""

    __slots__ = (
        "__weakref__",
        "_bound",
        "_close",
        "_closing",
        "_entries",
        "_lock",
        "_make",
        "_spare",
    )

    def __init__(
        self, first: _C | None, make: Callable[[], _C], close: Callable[[_C], Awaitable[None]]
    ) -> None:
        self._spare: _C | None = first  # made with the owner, for the first loop it is used on
        self._make = make
        self._close = close
        # The loop last bound and its client, one attribute so that a thread reads both at once:
        # the fast path of every call.
        self._bound: tuple[weakref.ref[_Loop], _C] | None = None
        self._entries: dict[int, _Entry[_C]] = {}  # id(loop) -> its client
        self._lock = threading.Lock()  # loops of several threads bind at once
        # id(loop) -> the close under way on that loop, which a close called meanwhile awaits.
        self._closing: dict[int, asyncio.Future[None]] = {}

    def get(self) -> _C | None:
        """The running loop's client if it was the last bound (one comparison), else None."""
        bound = self._bound
        if bound is not None and bound[0]() is asyncio.get_running_loop():
            return bound[1]
        return None

    def peek(self) -> _C | None:
        """The running loop's client if one was made for it (``get`` answers only for the loop
        last bound), without making one."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._entries.get(id(loop))
        return entry.client if entry is not None and entry.loop() is loop else None

    async def bind(self) -> _C:
        """The running loop's client, made (and set to close as the loop ends) on first use."""
        loop = asyncio.get_running_loop()
        key = id(loop)
        with self._lock:
            entry = self._entries.get(key)
            fresh = entry is None or entry.loop() is not loop
            if fresh:
                self._sweep()
                client = self._spare if self._spare is not None else self._make()
                self._spare = None
                closer = _closer(weakref.ref(self), key, client, self._close)
                entry = _Entry(weakref.ref(loop), client, closer)
                self._entries[key] = entry
        assert entry is not None
        if fresh:
            # Started on this loop, the generator is one that loop's asyncio.run closes at its end.
            await anext(entry.closer)
        self._bound = (entry.loop, entry.client)
        return entry.client

    def _sweep(self) -> None:
        """Forget the clients of loops that closed without closing them (their connections died
        with them); under the lock."""
        for key, entry in list(self._entries.items()):
            loop = entry.loop()
            if loop is None or loop.is_closed():
                del self._entries[key]

    def _forget(self, key: int, client: _C) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry.client is client:
                del self._entries[key]
            bound = self._bound
            if bound is not None and bound[1] is client:
                self._bound = None

    async def aclose(self) -> None:
        """Close the running loop's client, and the first if no loop used it. Clients of loops
        still running elsewhere (other threads) close as those loops end. A close called while
        another is under way on the loop returns when that one has ended: the first took the
        client, and the second found nothing to close, returning with the client still open (a
        toolset closed by its ``Resources`` and its runner at once, say)."""
        loop = asyncio.get_running_loop()
        key = id(loop)
        with self._lock:
            under_way = self._closing.get(key)
            if under_way is None or under_way.get_loop() is not loop:
                under_way = None
                entry = self._entries.get(key)
                spare, self._spare = self._spare, None
                if entry is not None and entry.loop() is not loop:
                    entry = None
                if entry is None and spare is None:
                    return
                done = self._closing[key] = loop.create_future()
        if under_way is not None:
            await asyncio.shield(under_way)
            return
        try:
            if entry is not None:
                await entry.closer.aclose()
            if spare is not None:
                await self._close(spare)
        finally:
            with self._lock:
                if self._closing.get(key) is done:
                    del self._closing[key]
            done.set_result(None)


async def _closer(
    owner: weakref.ref[LoopClients[_C]],
    key: int,
    client: _C,
    close: Callable[[_C], Awaitable[None]],
) -> AsyncGenerator[None, None]:
    """Closes ``client`` when it is closed: by its loop's end, or the owner's ``aclose``. Holds its
    owner weakly, so that an owner dropped without closing is freed (its loop closes the client)."""
    try:
        yield
    finally:
        clients = owner()
        if clients is not None:
            clients._forget(key, client)
        with contextlib.suppress(Exception):  # closing at a loop's end: nobody to report it to
            await close(client)
