"""The ``CheckpointStore`` protocol every checkpoint backend implements, and its error type.

A store is deliberately dumb: it maps a checkpoint id to opaque bytes. Encoding, versioning and
integrity checks live in the codec, so a backend only has to be good at one thing — keeping bytes
safe — and a new backend is three small methods. Every backend gives the same guarantees:

* ``put`` is atomic: a reader sees the previous bytes or the new bytes, never a mix, and a write
  that fails (crash, lost connection, server error) leaves the previous bytes intact.
* every backend failure surfaces as :class:`CheckpointStoreError` naming the backend, the operation
  and the checkpoint id — never as a silent loss and never as a backend-specific exception type, so
  the runner can turn any of them into an error event. A store of your own may raise what its
  backend raises: the runner reports any ``Exception`` of a store operation it awaits (claim,
  load, finish) as a ``CheckpointStoreError`` with that exception as its cause, but for pyadk's
  own ``CheckpointError`` classes, which a store raises on purpose (``_is_refusal``): they
  keep their class (at a resume's finish the runner says the run ran, as for any failure).
* bad input (an id that is not a non-empty string, data that is not bytes) is a ``TypeError`` or
  ``ValueError`` raised before anything is touched.

Stores that hold connections, files or threads (SQLite, Redis, PostgreSQL) also have
``async aclose()``: it releases them and is idempotent; a later operation opens them again, so a
long-lived store can be closed at the end of every ``asyncio.run`` (network connections belong to
the event loop that opened them). Those stores are async context managers too. The in-memory store holds
nothing and has no ``aclose``; code that closes any store should use ``getattr(store, "aclose",
None)``. ``aclose`` is not part of the protocol so that a user's three-method store still qualifies.

The SQLite, Redis and PostgreSQL stores also implement :class:`ClaimingCheckpointStore`: they can
claim a checkpoint id for one resume at a time across processes (the in-memory store cannot be
shared by processes, and the runner's in-process guard covers it).

Every built-in store also implements :class:`ListingCheckpointStore`: ``ids(prefix)`` streams the
ids it holds, so a service can list the runs waiting on a person (``adk.checkpoint.list_pending``)
instead of keeping a list of its own that drifts from the store. It is optional for the same
reason: a user's three-method store still works for running and resuming.

The SQLite, Redis and PostgreSQL stores also implement :class:`HeadReadingCheckpointStore`:
``heads(ids, limit)`` sends each checkpoint's first bytes and its length, so ``list_pending``
reads the summary in each header without the histories being sent. Optional too: without it, a
listing gets each checkpoint whole (and still parses only its header).

Every built-in store also has the private ``_put_new`` (:class:`_PutNewStore`): a new run's pause
saved only if no checkpoint that still waits is under its id, looked at and written in one atomic
step. Without it the runner reads, then writes (docs/interrupts.md). Likewise ``_replace``
(:class:`_ReplacingStore`, a resume's record) and ``_delete_if`` (:class:`_DeletingIfStore`, a
finished resume's delete): compared with the bytes the caller knew and written or deleted in one
step.
"""

from __future__ import annotations

import asyncio
import math
import re
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Protocol, TypeVar, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from .._aio import AsyncCloseable, being_cancelled
from .._error_pickle import reduce_error

T = TypeVar("T")

__all__ = [
    "CheckpointStore",
    "CheckpointStoreError",
    "ClaimingCheckpointStore",
    "HeadReadingCheckpointStore",
    "ListingCheckpointStore",
]

_MAX_ID_BYTES = 1024
"""Longest id (UTF-8 bytes) any backend accepts; PostgreSQL's index rows cap keys near 2.7 KB."""


@runtime_checkable
class CheckpointStore(Protocol):
    """Maps a checkpoint id to the encoded checkpoint bytes.

    Ids are non-empty strings of at most 1024 UTF-8 bytes without NUL characters; any other
    character (unicode, slashes, quotes, spaces) is fine. Data is ``bytes`` (``bytearray`` and
    ``memoryview`` are accepted and copied) of any length, including empty.
    """

    async def get(self, id: str) -> bytes | None:
        """The bytes last put under ``id``, or ``None`` when there are none."""
        ...

    async def put(self, id: str, data: bytes) -> None:
        """Store ``data`` under ``id``, atomically replacing what was there."""
        ...

    async def delete(self, id: str) -> None:
        """Remove ``id``; deleting an id that does not exist is not an error."""
        ...


@runtime_checkable
class ClaimingCheckpointStore(CheckpointStore, Protocol):
    """A store that can also claim a checkpoint id for one owner at a time, across processes.

    The runner claims a checkpoint before resuming it and releases the claim when the resume ends:
    two workers that receive the same approval (a double click, a retried webhook) cannot both run
    the approved call. A claim lapses ``claim_ttl`` seconds after it was last taken, so a process
    that dies mid-resume blocks the checkpoint only that long; the runner renews its claim every
    ``claim_ttl / 3`` seconds while the resume runs.

    Claims live beside the checkpoints, not in them: claiming writes no checkpoint bytes, and a
    claim may exist for an id that has no checkpoint (the runner then releases it and reports the
    missing checkpoint).
    """

    claim_ttl: float
    """Seconds a claim lasts after it was last taken."""

    async def claim(self, id: str, owner: str) -> bool:
        """Claim ``id`` for ``owner`` for ``claim_ttl`` seconds: True when it was unclaimed, its
        claim had lapsed, or ``owner`` held it already (the claim is then renewed); False when
        another owner holds it. Atomic across every process using the store."""
        ...

    async def release(self, id: str, owner: str) -> None:
        """End ``owner``'s claim on ``id``; nothing happens when ``owner`` does not hold it (it
        lapsed, or another owner took it over)."""
        ...


@runtime_checkable
class ListingCheckpointStore(CheckpointStore, Protocol):
    """A store that can also list the checkpoint ids it holds.

    ``ids(prefix)`` checks ``prefix`` when called (``TypeError``/``ValueError``) and returns an
    async iterator of the ids that start with it (every id for ``None`` or ``""``), in no
    particular order. It streams: the built-in stores read a page of ids at a time (Redis with
    ``SCAN``, never ``KEYS``), so listing 100k checkpoints never loads them at once, and no
    checkpoint bytes are read. Only checkpoint ids are listed, never the stores' own keys or rows
    (claims). An id present for the whole listing is listed exactly once; one put or deleted
    meanwhile may or may not be.
    """

    def ids(self, prefix: str | None = None) -> AsyncIterator[str]:
        """The ids of the checkpoints held, those starting with ``prefix`` if given."""
        ...


@runtime_checkable
class HeadReadingCheckpointStore(CheckpointStore, Protocol):
    """A store that can also send the first bytes of checkpoints, for ``list_pending``.

    A checkpoint's header line carries a summary of what its run waits on, checked by a checksum
    of its own and the checkpoint's length; a listing reads that instead of the history, most of
    a long run's bytes. ``heads(ids, limit)`` gives, for each of ``ids`` in their order, the
    checkpoint's first ``limit`` bytes (all of them if it is shorter) and its whole length in
    bytes, or ``None`` when there is no checkpoint under that id. A store over a network does it
    in one round trip for the batch (the built-in stores: SQLite ``substr``/``length``, Redis
    ``GETRANGE``/``STRLEN`` in one pipeline, PostgreSQL ``substring``/``octet_length``). A head
    that holds no summary to trust (cut short, damaged, or an entry that is no checkpoint) is
    harmless: the listing then gets that checkpoint whole and reports what is wrong with it.
    """

    async def heads(self, ids: list[str], limit: int) -> list[tuple[bytes, int] | None]:
        """Each of ``ids``' first ``limit`` bytes and length, or None, in the ids' order."""
        ...


@runtime_checkable
class _PutNewStore(CheckpointStore, Protocol):
    """Private: a store that can save a new run's checkpoint only if the one already under its
    id may be replaced, deciding and writing in one atomic step (every store pyadk ships).

    The runner refuses a new run's pause under the id of a checkpoint that still waits; with a
    store of only the public three methods it reads, then writes, so two new runs pausing at the
    same moment under one id could both pass the read and replace each other. Each built-in
    store makes the check and the write one step across every writer sharing it: a lock (memory),
    the write lock of ``BEGIN IMMEDIATE`` (SQLite), a compare-and-set Lua script (Redis), a row
    lock in a transaction (PostgreSQL).
    """

    async def _put_new(self, id: str, data: bytes, keep: Callable[[bytes], bool]) -> bytes | None:
        """Store ``data`` under ``id`` unless bytes there that are not ``data`` itself (a retried
        write that landed) are ones ``keep`` says must stay; None when written, else the bytes
        kept (nothing written). ``keep`` is pure and quick; it may run in the store's thread."""
        ...


@runtime_checkable
class _ReplacingStore(CheckpointStore, Protocol):
    """Private: a store that replaces a checkpoint only if it still holds the bytes the caller
    last knew, comparing and writing in one atomic step (every store pyadk ships).

    A resume records what it finished in the checkpoint it resumes (``_progress``); the write
    must not land over another run's pause saved under the id meanwhile, nor bring back a
    checkpoint deleted meanwhile (another resume, once this one's claim lapsed, finished it:
    brought back, it would run its approved calls again). With a store of only the public three
    methods that is a read, then a write, with a moment between them; each built-in store makes
    it one step: a lock (memory), one ``UPDATE ... WHERE id = ? AND data = ?`` in a write
    transaction (SQLite, PostgreSQL), a compare-and-set Lua script (Redis).
    """

    async def _replace(self, id: str, old: bytes, data: bytes) -> bool:
        """Store ``data`` under ``id`` if it holds ``old``; True when it then holds ``data``
        (also when it already did: a retried write that had landed), False when it held
        anything else or nothing (nothing written)."""
        ...


@runtime_checkable
class _DeletingIfStore(CheckpointStore, Protocol):
    """Private: a store that deletes a checkpoint only if it still holds the bytes the caller
    last knew, comparing and deleting in one atomic step (every store pyadk ships).

    A finished resume deletes its checkpoint (``Runner._finish``) only if the store still holds
    what the resume loaded or last wrote: a read, then a delete, let a pause saved under the id
    in the moment between them (another resume of the id pausing again, a new run's pause) be
    deleted with it. Each built-in store makes it one step: a lock (memory), one ``DELETE ...
    WHERE id = ? AND data = ?`` (SQLite, PostgreSQL), a compare-and-delete Lua script (Redis).
    """

    async def _delete_if(self, id: str, old: bytes) -> bool:
        """Delete ``id``'s checkpoint if it holds ``old``; True when deleted, False when it held
        anything else or nothing (nothing deleted; also a delete sent again after its first
        attempt had deleted, its answer lost: nothing is there then)."""
        ...


def _puts_new(store: object) -> bool:
    """Whether ``store``'s ``_put_new`` may stand for its ``get`` and ``put``: it has one, and
    its class reads and writes with the ``get`` and ``put`` of the class that gave it. A
    subclass of a built-in store that changes either (to compress or encrypt the bytes, to count
    or fail writes) has its look and write go through them, read then written: ``_put_new`` would
    write and judge the bytes as the built-in store keeps them. Decided once per class."""
    return _owns(store, "_put_new", _PUTS_NEW)


def _replaces(store: object) -> bool:
    """Whether ``store``'s ``_replace`` may stand for its ``get`` and ``put``, as ``_puts_new``
    decides for ``_put_new`` (a subclass that reads or writes its own way: read, then written)."""
    return _owns(store, "_replace", _REPLACES)


def _deletes_if(store: object) -> bool:
    """Whether ``store``'s ``_delete_if`` may stand for its ``get`` and ``delete``, as
    ``_puts_new`` decides for ``_put_new``, its ``delete`` looked at too: a subclass that reads,
    writes or deletes its own way (to compress the bytes, to archive or count what it deletes)
    has the finish go through its ``get`` and ``delete``, read then deleted."""
    return _owns(store, "_delete_if", _DELETES_IF, _READ_WRITE_DELETE)


def _renews(store: object) -> bool:
    """Whether ``store``'s ``_renew`` (a renewal that holds only while the claim stored is still
    the owner's, unlapsed: every built-in store) may stand for its ``claim``, as ``_puts_new``
    decides for ``_put_new``: a subclass that claims its own way (to count or fail claims) has
    its renewals go through its ``claim``, as a store of your own does."""
    return _owns(store, "_renew", _RENEWS, _CLAIMING)


def _reads_heads_claimed(store: object) -> bool:
    """Whether ``store``'s ``_heads_claimed`` (``heads`` and ``_claimed_ids`` of a listing's
    batch in one round trip: Redis) may stand for its ``heads`` and ``_claimed_ids``, as
    ``_puts_new`` decides for ``_put_new``: a subclass that reads heads or claims its own way has
    the listing go through them, as before."""
    return _owns(store, "_heads_claimed", _HEADS_CLAIMED, _HEADS_AND_CLAIMS)


_READ_WRITE = ("get", "put")
_HEADS_AND_CLAIMS = ("heads", "_claimed_ids")
_CLAIMING = ("claim",)
_READ_WRITE_DELETE = ("get", "put", "delete")


def _owns(
    store: object,
    method: str,
    verdicts: weakref.WeakKeyDictionary[type, bool],
    uses: tuple[str, ...] = _READ_WRITE,
) -> bool:
    """Whether ``store``'s class has ``method`` from a class whose ``uses`` (its public methods
    that ``method`` stands for) are the ones ``store``'s class has. Decided once per class."""
    kind = type(store)
    found = verdicts.get(kind)
    if found is None:
        owner = next((c for c in kind.__mro__ if method in vars(c)), None)
        found = verdicts[kind] = owner is not None and all(
            getattr(kind, name, None) is getattr(owner, name, None) for name in uses
        )
    return found


_PUTS_NEW: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
"""``_puts_new``'s verdicts by class (a class is not changed after it is made, as pyadk takes it),
not keeping a class alive (one made per tenant, say)."""
_REPLACES: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
"""``_replaces``' verdicts by class, as ``_PUTS_NEW``."""
_DELETES_IF: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
"""``_deletes_if``' verdicts by class, as ``_PUTS_NEW``."""
_RENEWS: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
"""``_renews``' verdicts by class, as ``_PUTS_NEW``."""
_HEADS_CLAIMED: weakref.WeakKeyDictionary[type, bool] = weakref.WeakKeyDictionary()
"""``_reads_heads_claimed``' verdicts by class, as ``_PUTS_NEW``."""


def _kept(old: bytes | None, data: bytes, keep: Callable[[bytes], bool]) -> bool:
    """Whether ``_put_new`` must leave ``old`` (the bytes under the id, None: none) in place."""
    return old is not None and old != data and keep(old)


class CheckpointStoreError(Exception):
    """A checkpoint backend failed: unreachable, refused the operation or lost the connection
    mid-way.

    ``backend`` is ``"sqlite"``, ``"redis"``, ``"postgres"`` (or a custom store's name),
    ``operation`` is ``"get"``, ``"put"``, ``"delete"``, ``"claim"``, ``"release"``, ``"ids"`` or
    ``"open"``,
    and ``checkpoint_id`` the id the operation was for (``None`` when it was for none). The
    backend's own exception is the ``__cause__``.
    """

    def __init__(
        self,
        message: str,
        *,
        backend: str | None = None,
        operation: str | None = None,
        checkpoint_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.backend = backend
        self.operation = operation
        self.checkpoint_id = checkpoint_id

    def __reduce__(self) -> tuple[object, ...]:
        # Keep the keyword attributes (and any notes) when the error crosses a process boundary:
        # see ``adk._error_pickle``.
        return reduce_error(self)


def _store_error(
    backend: str,
    operation: str,
    checkpoint_id: str | None,
    where: str,
    cause: BaseException | str,
) -> CheckpointStoreError:
    """Build the one message format all backends use, e.g.
    ``redis checkpoint store at redis://127.0.0.1:6390/0: put of checkpoint 'run-1' failed:
    ConnectionError: Error 111 connecting to 127.0.0.1:6390. Connection refused.``"""
    target = f" of checkpoint {checkpoint_id!r}" if checkpoint_id is not None else ""
    if isinstance(cause, BaseException):
        reason = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
    else:
        reason = cause
    return CheckpointStoreError(
        f"{backend} checkpoint store at {where}: {operation}{target} failed: {reason}",
        backend=backend,
        operation=operation,
        checkpoint_id=checkpoint_id,
    )


async def _from_store(operation: Awaitable[T], name: str, checkpoint_id: str) -> T:
    """Await a store's ``name`` operation on ``checkpoint_id``. A ``CancelledError`` out of it
    while the caller is not being cancelled is the store's own failure (it awaited something that
    someone else cancelled) and becomes a ``CheckpointStoreError``: raised as it is, it would pass
    for the cancellation of whoever runs the resume, which nobody cancelled. So does any other
    exception of a store of your own (an ``OSError``, its driver's errors: ``_own_failure``)."""
    try:
        return await operation
    except asyncio.CancelledError as exc:
        if being_cancelled():
            raise
        raise _stray_cancellation(name, checkpoint_id) from exc
    except CheckpointStoreError:
        raise
    except Exception as exc:
        if _is_refusal(exc):
            raise
        raise _own_failure(name, checkpoint_id, exc) from exc


def _is_refusal(exc: Exception) -> bool:
    """Whether a store's ``exc`` is pyadk's ``CheckpointError`` (a ``CheckpointNotFoundError``,
    a ``CheckpointBusyError``, data it cannot read), which a store of your own raises on purpose:
    a refusal that keeps its class (a service answers it 404, 409 or 500), not a store that is
    down (``_own_failure``). Imported here: only a failure pays for it."""
    from .codec import CheckpointError

    return isinstance(exc, CheckpointError)


def _own_failure(name: str, checkpoint_id: str, exc: Exception) -> CheckpointStoreError:
    """The ``CheckpointStoreError`` for a store's ``name`` operation that raised ``exc``, an
    exception of its own (a store of the three public methods raises what its backend raises: an
    ``OSError``, a driver's error), ``exc`` its cause. Every store operation the runner awaits
    fails with the one class, whichever the store: a service tells a store that is down (nothing
    ran, ask again) from a refused request by it, and the error at a resume's end (``finished, but
    the checkpoint could not be deleted``: it ran, do not send it again) is said for a store of
    your own too, where its ``OSError`` escaped bare."""
    return CheckpointStoreError(
        f"{name} of checkpoint {checkpoint_id!r} failed: {type(exc).__name__}: {exc}"
        if str(exc)
        else f"{name} of checkpoint {checkpoint_id!r} failed: {type(exc).__name__}",
        operation=name,
        checkpoint_id=checkpoint_id,
    )


class _ForeignTable(Exception):
    """The store's table exists but is not a checkpoint table (another program's, under the same
    name): its message says which table and what is expected."""


def _check_table(table: str, columns: Mapping[str, bool], store: str, instead: str) -> None:
    """Refuse ``table`` unless it has the columns every statement of the store names (``id``,
    its primary key, ``data`` and ``updated_at``). ``columns`` maps the table's column names to
    whether each is in its primary key; empty when the table does not exist (the store's own
    statements then say so). ``instead`` says what to use instead. Without this, a table of the
    same name some other program made failed on first use with the driver's words, ``no such
    column: data``, naming neither the table nor the store."""
    if not columns:
        return
    keys = [name for name, in_key in columns.items() if in_key]
    if {"id", "data", "updated_at"} <= columns.keys() and keys == ["id"]:
        return
    key = f" with primary key ({', '.join(keys)})" if keys else " and no primary key"
    raise _ForeignTable(
        f"table {table} is not a checkpoint table: its columns are ({', '.join(columns)}){key}, "
        f"and a {store}'s are id (its primary key), data and updated_at; {instead}"
    )


def _stray_cancellation(name: str, checkpoint_id: str) -> CheckpointStoreError:
    """The error for a store operation that raised ``CancelledError`` on its own."""
    return CheckpointStoreError(
        f"{name} of checkpoint {checkpoint_id!r} failed: the store raised CancelledError though "
        "nothing cancelled the run (it awaited something that was cancelled)",
        operation=name,
        checkpoint_id=checkpoint_id,
    )


def _check_id(id: object) -> str:
    """Reject ids no backend can store the same way, before any backend is touched."""
    if not isinstance(id, str):
        raise TypeError(f"checkpoint id must be a str, got {type(id).__name__}")
    if not id:
        raise ValueError("checkpoint id must not be empty")
    if "\x00" in id:
        raise ValueError(f"checkpoint id must not contain NUL characters: {id!r}")
    try:
        size = len(id.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError(
            f"checkpoint id must be valid unicode text (no lone surrogates): {id!r}"
        ) from None
    if size > _MAX_ID_BYTES:
        raise ValueError(f"checkpoint id is {size} UTF-8 bytes long; the limit is {_MAX_ID_BYTES}")
    return id


def _check_prefix(prefix: object) -> str:
    """A listing's id prefix: ``""`` for none (``None`` or ``""``); refused like an id when no id
    could start with it, so a typo is an error rather than an empty list."""
    if prefix is None:
        return ""
    if not isinstance(prefix, str):
        raise TypeError(f"checkpoint id prefix must be a str or None, got {type(prefix).__name__}")
    if prefix:
        try:
            _check_id(prefix)
        except ValueError as exc:
            raise ValueError(str(exc).replace("checkpoint id", "checkpoint id prefix", 1)) from None
    return prefix


def _listable(id: str) -> bool:
    """Whether ``id``, found in a store's table or keyspace, is one ``put`` could have written:
    rows or keys written by other means (an empty id, a NUL, over-long) are not listed, since no
    ``get`` could read them."""
    if not id or "\x00" in id:
        return False
    try:
        return len(id.encode("utf-8")) <= _MAX_ID_BYTES
    except UnicodeEncodeError:
        return False


def _check_heads(ids: object, limit: object) -> list[str]:
    """``heads``' arguments, refused before any backend is touched: a list of ids (each checked
    as ``get`` checks its id) and a positive number of bytes."""
    if not isinstance(ids, list):
        raise TypeError(f"heads takes a list of checkpoint ids, got {type(ids).__name__}")
    if type(limit) is not int or limit <= 0:
        raise ValueError(f"heads' limit must be a positive int of bytes, got {limit!r}")
    return [_check_id(id) for id in ids]


def _check_owner(owner: object) -> str:
    if not isinstance(owner, str) or not owner:
        raise TypeError(f"a claim's owner must be a non-empty str, got {owner!r}")
    return owner


def _positive_seconds(value: object, name: str) -> float:
    """``value`` as seconds, refused unless a finite number above zero (``name`` says which)."""
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def _check_data(data: object) -> bytes:
    """Accept bytes-like data (copied, so a later change to a buffer cannot alter the checkpoint)."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    hint = " (encode text first)" if isinstance(data, str) else ""
    raise TypeError(f"checkpoint data must be bytes, got {type(data).__name__}{hint}")


# Compiled by ``re`` on first use (and cached there), not at import: this module loads with
# ``import adk`` and only a store's errors and repr need them.
# A password's key, the SSL key's passphrase (libpq's and asyncpg's ``sslpassword``) included.
_SECRET_QUERY = r"(?i)((?:^|&)(?:\w*password|\w*passwd|pass|secret)=)[^&]*"
_SECRET_KV = r"(?i)(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)"
_KV_START = r"\s*[A-Za-z_]\w*\s*="  # libpq's key=value form: ``host=db ...``


def _redact(url: str) -> str:
    """``url`` with any password replaced by ``***``, for error messages and logs.

    Handles URLs (``redis://user:pw@host``, ``postgresql://...?password=pw``, one whose
    ``scheme://`` or ``scheme:`` was left off) and libpq key/value DSNs (``host=db password=pw``).
    A password with an unencoded ``/``, ``?`` or ``#`` ends the URL's host part early, leaving an
    ``@`` after it: then everything up to the last ``@`` is hidden (an ``@`` in the query hides
    the host too — better than showing a password).
    """
    if "://" not in url and not url.startswith("//"):  # ``//host``: a URL without its scheme
        text = re.sub(_SECRET_KV, r"\1***", url)
        tail = text.rpartition("@")[2]
        if tail != text and not re.match(_KV_START, text):  # ``user:pw@host``, no ``scheme://``
            return f"***@{tail}"
        return text
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in parts.path or "@" in parts.query or "@" in parts.fragment:
            scheme, _, rest = url.partition("://")
            parts = urlsplit(f"{scheme}://{rest.rpartition('@')[2]}")
            netloc = f"***@{parts.netloc}"
        elif "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            if ":" in userinfo:
                userinfo = userinfo.split(":", 1)[0] + ":***"
            netloc = f"{userinfo}@{hostport}"
    except ValueError:
        return "<unparsable url>"
    query = re.sub(_SECRET_QUERY, r"\1***", parts.query)
    if not netloc:  # ``unix:///path``: urlunsplit would drop the empty host's ``//``
        scheme = f"{parts.scheme}:" if parts.scheme else ""
        return f"{scheme}//" + urlunsplit(("", "", parts.path, query, parts.fragment))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class _ClosableStore(AsyncCloseable):
    """``async with store:`` for stores that have ``aclose``."""


class _InUse:
    """Counts the operations using a connection pool or client, so that closing it can wait until
    they have ended (``drained``) instead of failing them or leaving their sockets open."""

    __slots__ = ("_idle", "users")

    def __init__(self) -> None:
        self.users = 0
        self._idle: asyncio.Future[None] | None = None

    def leave(self) -> None:
        """One operation is done with it."""
        self.users -= 1
        if not self.users and self._idle is not None and not self._idle.done():
            self._idle.set_result(None)

    async def drained(self) -> None:
        """Return once no operation uses it (several closers may wait at once)."""
        if self.users:
            if self._idle is None or self._idle.done():
                self._idle = asyncio.get_running_loop().create_future()
            await self._idle
