"""Keeping a record's session in a ``SessionStore``: a put that hangs or fails is never waited
for without end nor lost without a word.

A put once started is not cancelled with its record at once: cut off halfway, a store could keep
part of the values, so a put that can end is let end. But a put that never ends (a database that
stopped answering writes) must not hold its key, or the closing of the outputs, for ever. So a put
has ``timeout`` seconds (the environment's, when it has one) and, once its record is cancelled
(the outputs closed), ``timeout`` or ``CLOSE_GRACE`` seconds more; then it is cancelled, and the
error says which key's session may not be saved.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Hashable, MutableMapping
from typing import Any, Protocol, runtime_checkable

from .._error_pickle import reduce_error

__all__ = [
    "CLOSE_GRACE",
    "SessionNotSaved",
    "SessionStore",
    "Sessions",
    "check_sessions",
    "put_session",
]


@runtime_checkable
class SessionStore(Protocol):
    """Where each key's session values live when they are kept outside the process, read and
    written asynchronously (a Redis or database client): ``apply(agent, sessions=store)``.

    ``get`` gives the values a key's last record left (``None``: none kept, the key starts
    empty); ``put`` keeps a record's values once it has ended or paused (never for a failed
    one). A key's records run one at a time, so a key is never read or written by two at once.
    A mutable mapping does the same in memory, synchronously: a mapping whose reads and writes go
    over the network would hold up every key's records on the event loop while they wait.
    """

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        """The values kept for ``key``, or ``None``."""
        ...

    async def put(self, key: Hashable, values: dict[str, Any]) -> None:
        """Keep ``values`` as ``key``'s, replacing what was kept."""
        ...


# Keys are Any, not Hashable: a mapping's key type is invariant, so a user's
# ``dict[str, dict[str, Any]]`` (keys from ``key="product"``) was not a
# ``MutableMapping[Hashable, ...]`` to a type checker.
Sessions = MutableMapping[Any, dict[str, Any]] | SessionStore
"""Each key's session values: a mutable mapping, or a ``SessionStore``."""


def check_sessions(sessions: object) -> None:
    """Refuse, where ``apply`` is called, a ``sessions`` that is neither a mutable mapping nor a
    ``SessionStore`` whose ``get`` and ``put`` are coroutine functions (a store with sync methods
    would be awaited on a dict and fail at the first record)."""
    if sessions is None or isinstance(sessions, MutableMapping):
        return
    if isinstance(sessions, SessionStore) and all(
        inspect.iscoroutinefunction(getattr(sessions, name)) for name in ("get", "put")
    ):
        return
    raise TypeError(
        "sessions must be a mutable mapping (a dict) or a SessionStore (async get(key) and "
        f"async put(key, values)), got {type(sessions).__name__}"
    )


CLOSE_GRACE = 10.0
"""Seconds a started put may still take once its record is cancelled, in an environment without
a ``timeout`` (with one, the put has ``timeout`` seconds)."""


class SessionNotSaved(RuntimeError):
    """A record's put was cut off by the closing of the outputs, or failed meanwhile: the key's
    session may not be saved. It ends the record's worker (not a failed record: nothing reads
    the outputs any more) and is raised by the close."""

    def __init__(self, index: int, key: Hashable, reason: str) -> None:
        super().__init__(f"the session of key {key!r} (record {index}) may not be saved: {reason}")
        self.index = index
        self.key = key

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickled with its fields (``cls(*args)`` would lack them): see ``adk._error_pickle``.
        return reduce_error(self)


async def put_session(
    store: SessionStore,
    index: int,
    key: Hashable,
    values: dict[str, Any],
    seconds: float | None,
) -> None:
    """``store.put(key, values)``, waited for at most ``seconds`` (a ``TimeoutError`` naming the
    key, which fails the record) and, if the caller is cancelled meanwhile, as described above
    (``SessionNotSaved`` unless the put ends well in time, then the cancellation)."""
    put = asyncio.ensure_future(store.put(key, values))
    try:
        done, _ = await asyncio.wait((put,), timeout=seconds)
    except asyncio.CancelledError:
        await _after_cancel(put, store, index, key, seconds)
        raise
    if not done:
        _drop(put)
        raise TimeoutError(
            f"the session of key {key!r} (record {index}) may not be saved: "
            f"{type(store).__name__}.put did not end within timeout={seconds}s and was cancelled"
        )
    put.result()  # a store that fails fails the record


async def _after_cancel(
    put: asyncio.Future[None],
    store: SessionStore,
    index: int,
    key: Hashable,
    seconds: float | None,
) -> None:
    """Wait for ``put`` for its grace, through further cancellations (an anyio cancel scope
    cancels at every await); return if it ended well, else raise ``SessionNotSaved``."""
    grace = CLOSE_GRACE if seconds is None else seconds
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    while not put.done() and (left := deadline - loop.time()) > 0:
        try:
            await asyncio.wait((put,), timeout=left)
        except asyncio.CancelledError:
            continue
    name = f"{type(store).__name__}.put"
    if not put.done():
        _drop(put)
        raise SessionNotSaved(
            index,
            key,
            f"{name} did not end within {grace}s of the record's "
            "cancellation (the outputs closed) and was cancelled",
        )
    if put.cancelled():
        raise SessionNotSaved(index, key, f"{name} was cancelled")
    error = put.exception()
    if error is not None:
        raise SessionNotSaved(index, key, f"{name} failed: {error!r}") from error


def _drop(put: asyncio.Future[None]) -> None:
    """Cancel ``put`` without waiting for it (a put that ignores cancellation would hold the
    caller again); its outcome is retrieved when it ends, so none is reported as never read."""
    put.cancel()
    put.add_done_callback(_retrieve)


def _retrieve(put: asyncio.Future[None]) -> None:
    if not put.cancelled():
        put.exception()
