"""``SQLiteCheckpointStore``: the embedded persistent default, one file, stdlib ``sqlite3`` only.

Why one dedicated worker thread per store instead of ``asyncio.to_thread``: sqlite3 calls block, so
they must leave the event loop, and the cost that dominates small checkpoints is the hop between
threads, not SQLite. A thread that owns the connection drains every queued job in one wake-up and
hands all results back to the loop in one callback, so concurrent tasks share the hops. Measured on
the 2-core development VM, µs per put + get of 1 KiB, median of 7 runs, this worker vs
``asyncio.to_thread`` around one locked connection:

    ==========================  ======  =========
    setting                     worker  to_thread
    ==========================  ======  =========
    synchronous=NORMAL, 1 task      66        136
    synchronous=NORMAL, 50 tasks    62        161
    synchronous=FULL, 1 task       735        824
    synchronous=FULL, 50 tasks     404        708
    ==========================  ======  =========

With ``synchronous=FULL`` the fsync per commit dominates; SQLite's own work is about 12 µs.
``benchmarks/checkpoint_stores.py`` re-measures the stores.

Owning the connection in one thread also makes the store safe for any number of tasks, and even
for several event loops (each result goes back to the loop that asked); jobs run in submission
order, so a ``get`` issued after a ``put`` returned sees it.

Durability and atomicity: the database runs in WAL mode with ``synchronous=FULL``, so a ``put``
that returned survives a crash or power loss (``NORMAL`` would be ~0.3–0.6 ms faster per put here
but may lose the last checkpoints on power loss — a paused run that can never resume; checkpoints
are written once per pause, so durability wins), every write is one ``BEGIN IMMEDIATE`` … ``COMMIT``
(taking the write lock up front, so waiting for another process goes through the busy timeout
instead of failing on a lock upgrade), and a write that fails mid-way is rolled back: the previous
value stays. Several processes may share the file; writers wait up to ``busy_timeout`` seconds for
each other. A task cancelled while its write runs does not stop the write — it either commits whole
or not at all, like a network store that already sent the request. A ``delete`` drops the puts of
its id that have not begun writing (it would undo them), within a twentieth of a second
(``_SLICE``) for one waiting for another process's lock: a run cancelled while saving under an id
it made up deletes that save, and waited out ``busy_timeout`` twice for it (the save's wait, then
the delete's behind it). Not a ``_put_new`` (a new run's pause under a given id): its answer is
what it found there, so a delete asked for meanwhile waits and comes after it.

``ids`` reads the ids a page (``_PAGE``) at a time, each page one job in the id order of the
primary key after the last id of the page before (keyset pagination: no transaction stays open
between pages, and a put or delete meanwhile cannot make it skip or repeat an id that stays).

Claims (one resume of a checkpoint at a time, across the processes sharing the file) are rows of a
second table, made on the first claim, taken with one conditional upsert: atomic under SQLite's
write lock. Expiry uses the
wall clock, which every process on the machine shares; a claim's holder judges its claim by that
clock too, so a step of it (NTP, a VM resumed) that lapses the claim for another process lapses
it for its holder at once (``_claim``). A claim need not survive a power loss —
every process that could hold one dies with the machine — so claim writes commit with
``synchronous=NORMAL``, skipping the fsync that a checkpoint write pays.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from .store import (
    _check_data,
    _check_heads,
    _check_id,
    _check_owner,
    _check_prefix,
    _check_table,
    _ClosableStore,
    _ForeignTable,
    _kept,
    _listable,
    _positive_seconds,
    _store_error,
)

__all__ = ["SQLiteCheckpointStore"]

logger = logging.getLogger("adk.checkpoint")

T = TypeVar("T")

_TABLE = "pyadk_checkpoints"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_TABLE} ("
    "id TEXT PRIMARY KEY NOT NULL, data BLOB NOT NULL, updated_at REAL NOT NULL)"
)
_GET = f"SELECT data FROM {_TABLE} WHERE id = ?"
_UPSERT = (
    f"INSERT INTO {_TABLE} (id, data, updated_at) VALUES (?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at"
)
_DELETE = f"DELETE FROM {_TABLE} WHERE id = ?"
# ``_replace``: the row written only if it still holds the bytes the writer last knew (or the
# new ones already: the answer ``_replace`` gives in every store).
_REPLACE = (
    f"UPDATE {_TABLE} SET data = ?1, updated_at = ?2 WHERE id = ?3 AND (data = ?4 OR data = ?1)"
)
_EXISTS = f"SELECT 1 FROM {_TABLE} WHERE id = ?"
# ``_delete_if``: the row deleted only if it still holds the bytes the deleter last knew.
_HOLDS = f"SELECT 1 FROM {_TABLE} WHERE id = ? AND data = ?"
_DELETE_IF = f"DELETE FROM {_TABLE} WHERE id = ? AND data = ?"
_SLICE = 0.05
"""Seconds of each of a put's waits for the write lock (``_begin_write``): how soon a put that a
delete of its id superseded gives up."""
# BINARY collation (memcmp of the UTF-8 text): the ids that start with a prefix are one run of
# the primary key's order, beginning at the prefix itself.
_IDS_FROM = f"SELECT id FROM {_TABLE} WHERE id >= ? ORDER BY id LIMIT ?"
_IDS_AFTER = f"SELECT id FROM {_TABLE} WHERE id > ? ORDER BY id LIMIT ?"
_PAGE = 1000
"""Ids read per job while listing: few hops between threads, little held at once."""
_CLAIMS = "pyadk_checkpoint_claims"
_CLAIMS_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {_CLAIMS} ("
    "id TEXT PRIMARY KEY NOT NULL, owner TEXT NOT NULL, expires_at REAL NOT NULL)"
)
# Taken when free, lapsed or already the owner's; otherwise the WHERE leaves the row (0 changes).
_CLAIM = (
    f"INSERT INTO {_CLAIMS} AS c (id, owner, expires_at) VALUES (?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at "
    "WHERE c.owner = excluded.owner OR c.expires_at <= ?"
)
# A renewal (``_renew``): only while the claim is still the owner's and has not lapsed.
_RENEW = f"UPDATE {_CLAIMS} SET expires_at = ? WHERE id = ? AND owner = ? AND expires_at > ?"
_RELEASE = f"DELETE FROM {_CLAIMS} WHERE id = ? AND owner = ?"
_HAS_CLAIMS = f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{_CLAIMS}'"
_HAS_TABLE = f"SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '{_TABLE}'"
_MEMORY = ":memory:"


def _open_connection(path: str, busy_timeout: float) -> sqlite3.Connection:
    if path != _MEMORY:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: no implicit transactions; every write opens its own explicitly.
    # An in-memory database passes from one worker thread to the next (see ``_KeptConnection``).
    conn = sqlite3.connect(
        path, timeout=busy_timeout, isolation_level=None, check_same_thread=path != _MEMORY
    )
    try:
        if path != _MEMORY:
            _use_wal(conn, busy_timeout, path)
        conn.execute("PRAGMA synchronous=FULL")
        if conn.execute(_HAS_TABLE).fetchone() is None:
            # Made under the write lock, taken first: a plain CREATE reads the schema, then
            # upgrades to write, and in WAL a connection whose read another's commit overtook
            # gets SQLITE_BUSY_SNAPSHOT at once, its busy timeout never waited. Only when the
            # table is missing: a store opening a file that has it only reads, as WAL lets it
            # while another connection writes (a long write held every opening's first get).
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_SCHEMA)
            conn.execute("COMMIT")
        _check_own_table(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _use_wal(conn: sqlite3.Connection, busy_timeout: float, path: str) -> None:
    """Switch the file to WAL unless another connection already has (the switch takes a lock).
    A switch that meets another connection's gets SQLITE_BUSY at once, SQLite's busy timeout
    never waited, so it is tried again, the mode read anew, for up to ``busy_timeout``: two
    processes (or stores) opening a new file together failed one's first call otherwise.

    Where WAL cannot work (a VFS or filesystem without the shared memory it needs), SQLite keeps
    the mode it had and says so only in the answer: that is logged, once per opening, and the
    store goes on in that mode, as durable and atomic (``synchronous=FULL``, every write one
    transaction), its readers waiting for a writer within ``busy_timeout``."""
    deadline = time.monotonic() + busy_timeout
    while True:
        try:
            (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() != "wal":
                (mode,) = conn.execute("PRAGMA journal_mode=WAL").fetchone()
                if str(mode).lower() != "wal":
                    logger.warning(
                        "SQLite kept %s in journal_mode=%s, not WAL (its filesystem or VFS "
                        "cannot give WAL the shared memory it needs): checkpoints stay durable "
                        "and atomic, but readers wait for writers (busy_timeout) and a write "
                        "waits for the reads in progress",
                        path,
                        mode,
                    )
            return
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                raise
        time.sleep(_WAL_RETRY)


_WAL_RETRY = 0.01
"""Seconds between tries of the switch to WAL: it lasts a few ms in the connection holding it."""


def _check_own_table(conn: sqlite3.Connection, path: str) -> None:
    """Refuse a ``pyadk_checkpoints`` table that is not a checkpoint table (``_check_table``):
    once per connection, one read of the schema."""
    columns = {row[1]: row[5] > 0 for row in conn.execute(f"PRAGMA table_info({_TABLE})")}
    _check_table(
        _TABLE,
        columns,
        "SQLiteCheckpointStore",
        f"{path} holds another program's table of that name: keep the checkpoints in another file",
    )


def _open_read_only(path: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection that can only read ``path``: no file, directory or table is created, no
    pragma changed (SQLite itself may add the ``-wal``/``-shm`` files that reading needs)."""
    if path == _MEMORY:
        return _open_connection(path, busy_timeout)
    uri = Path(path).as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, timeout=busy_timeout, isolation_level=None, uri=True)
    try:
        _check_own_table(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _open_existing(path: str, busy_timeout: float) -> sqlite3.Connection:
    """A connection that reads and writes ``path`` as a store's does, but creates nothing: no
    file, directory or checkpoint table (``pyadk checkpoint delete``, where a mistyped path must
    be reported, not made into an empty store). A file without the checkpoint table is refused
    as the read-only connection's first get is (``no such table: pyadk_checkpoints``)."""
    if path == _MEMORY:
        return _open_connection(path, busy_timeout)
    uri = Path(path).as_uri() + "?mode=rw"
    conn = sqlite3.connect(uri, timeout=busy_timeout, isolation_level=None, uri=True)
    try:
        if conn.execute(_HAS_TABLE).fetchone() is None:
            raise sqlite3.OperationalError(f"no such table: {_TABLE}")
        _use_wal(conn, busy_timeout, path)
        conn.execute("PRAGMA synchronous=FULL")
        _check_own_table(conn, path)
    except BaseException:
        conn.close()
        raise
    return conn


def _get(conn: sqlite3.Connection, *, key: str) -> bytes | None:
    row = conn.execute(_GET, (key,)).fetchone()
    return None if row is None else bytes(row[0])


def _heads(
    conn: sqlite3.Connection, *, keys: tuple[str, ...], limit: int
) -> list[tuple[bytes, int] | None]:
    """The first ``limit`` bytes and the length of each of ``keys``' data (None: no such row).
    A value that is not a BLOB (a row no put wrote) is given as empty, of its length: too short
    for its header, so the listing reads it whole, as ``get`` does."""
    if not keys:
        return []
    marks = ", ".join("?" * len(keys))
    sql = f"SELECT id, substr(data, 1, ?), length(data) FROM {_TABLE} WHERE id IN ({marks})"
    found: dict[str, tuple[bytes, int]] = {}
    for key, head, size in conn.execute(sql, (limit, *keys)):
        found[key] = (head if isinstance(head, bytes) else b"", size if type(size) is int else 0)
    return [found.get(key) for key in keys]


@dataclass(slots=True)
class _Writes:
    """The puts in flight, by id, each as the event a delete of its id sets to drop it (see
    ``_begin_write``). Shared by the store and its thread's jobs (not the store itself: the thread
    must not keep it alive)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    by_id: dict[str, set[threading.Event]] = field(default_factory=dict)

    def add(self, key: str, superseded: threading.Event) -> None:
        with self.lock:
            self.by_id.setdefault(key, set()).add(superseded)

    def discard(self, key: str, superseded: threading.Event) -> None:
        with self.lock:
            events = self.by_id.get(key)
            if events is not None:
                events.discard(superseded)
                if not events:
                    del self.by_id[key]

    def supersede(self, key: str) -> None:
        with self.lock:
            for superseded in self.by_id.get(key, ()):
                superseded.set()


def _put(
    conn: sqlite3.Connection,
    *,
    key: str,
    data: bytes,
    busy_timeout: float,
    superseded: threading.Event,
    writes: _Writes,
) -> None:
    try:
        if _begin_write(conn, busy_timeout, superseded):
            conn.execute(_UPSERT, (key, data, time.time()))
            conn.execute("COMMIT")
    finally:
        # Here, not (only) where the put is awaited: the put of a cancelled caller goes on, and
        # a delete after the cancellation must still find it.
        writes.discard(key, superseded)


def _put_new(
    conn: sqlite3.Connection,
    *,
    key: str,
    data: bytes,
    keep: Callable[[bytes], bool],
    busy_timeout: float,
) -> bytes | None:
    """``_put`` unless the row there is one ``keep`` keeps (returned, nothing written): read and
    written under one ``BEGIN IMMEDIATE``, whose write lock every connection to the file waits
    for, so no other writer (another store, another process) comes between. Never dropped by a
    delete of its id as a ``put`` is (``_Writes``): its answer is what it found, and one dropped
    would report written, without looking, a pause refused over a checkpoint that waits."""
    _begin_write(conn, busy_timeout, _NEVER)  # True: nothing sets _NEVER
    old = _get(conn, key=key)
    if _kept(old, data, keep):
        conn.execute("ROLLBACK")
        return old
    conn.execute(_UPSERT, (key, data, time.time()))
    conn.execute("COMMIT")
    return None


def _replace(
    conn: sqlite3.Connection, *, key: str, old: bytes, data: bytes, busy_timeout: float
) -> bool:
    """``old`` replaced by ``data`` under ``key`` in one ``UPDATE ... WHERE data = ?``, in a
    ``BEGIN IMMEDIATE`` write transaction as every write (its commit fsynced): True when a row
    changed. Not dropped by a delete of its id (``_Writes``): its answer is what it found."""
    _begin_write(conn, busy_timeout, _NEVER)  # True: nothing sets _NEVER
    changed = conn.execute(_REPLACE, (data, time.time(), key, old)).rowcount
    conn.execute("COMMIT")
    return changed == 1


_NEVER = threading.Event()
"""What ``_put_new`` waits for the write lock with: no delete supersedes it (never set)."""


def _begin_write(
    conn: sqlite3.Connection, busy_timeout: float, superseded: threading.Event
) -> bool:
    """``BEGIN IMMEDIATE``, waiting up to ``busy_timeout`` for another connection's write lock;
    False (nothing begun) if ``superseded`` is set before the write has begun: a delete of the
    same id came after it, so the write would be undone anyway.

    SQLite's own busy wait cannot be cut short (``Connection.interrupt`` does not end it), so a
    run cancelled while saving a checkpoint under an id it made up waited the whole
    ``busy_timeout`` for that save, then as long again for the delete of it (no one would ever
    learn the id) queued behind. So the wait goes in slices of at most ``_SLICE`` seconds
    (SQLite's busy handler within each), checking between them: two ``PRAGMA busy_timeout``
    statements per write, a few µs next to its commit's fsync."""
    wait = min(_SLICE, busy_timeout)
    deadline = time.monotonic() + busy_timeout
    conn.execute(f"PRAGMA busy_timeout = {int(wait * 1000)}")
    try:
        while not superseded.is_set():
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
                continue
            if not superseded.is_set():  # set while the lock was taken: undone as well
                return True
            conn.execute("ROLLBACK")
        return False
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")


def _delete(conn: sqlite3.Connection, *, key: str) -> None:
    # Looked up first: a delete takes the write lock even when it matches no row, and deleting
    # a checkpoint that was never written (the save a cancelled run gave up) must not wait for
    # another process's write to end. A row written after the lookup is one the delete preceded.
    if conn.execute(_EXISTS, (key,)).fetchone() is not None:
        conn.execute(_DELETE, (key,))


def _delete_if(conn: sqlite3.Connection, *, key: str, old: bytes) -> bool:
    """``key``'s row deleted in one ``DELETE ... WHERE data = ?`` (a statement is atomic on its
    own, under the write lock): True when a row went. Looked up first, as ``_delete``: a row
    that does not hold ``old`` takes no lock."""
    if conn.execute(_HOLDS, (key, old)).fetchone() is None:
        return False
    return conn.execute(_DELETE_IF, (key, old)).rowcount == 1


def _ids_page(
    conn: sqlite3.Connection, *, prefix: str, after: str | None
) -> tuple[list[str], str | None]:
    """The next page of ids starting with ``prefix`` after ``after`` (from the prefix on when
    None), and where the next page starts (None: the listing is over)."""
    if after is None:
        rows = conn.execute(_IDS_FROM, (prefix, _PAGE)).fetchall()
    else:
        rows = conn.execute(_IDS_AFTER, (after, _PAGE)).fetchall()
    ids: list[str] = []
    for (key,) in rows:
        if not isinstance(key, str) or not key.startswith(prefix):
            # Past the prefix's run of ids, or into rows that are not text (a BLOB sorts after
            # every text): nothing further can match.
            return ids, None
        if _listable(key):
            ids.append(key)
    return ids, (rows[-1][0] if len(rows) == _PAGE else None)


def _without_fsync(conn: sqlite3.Connection, sql: str, parameters: tuple[Any, ...]) -> int:
    """Run one autocommit write of a claim with ``synchronous=NORMAL``; the number of rows it
    changed. The claims table is made on first use, so a file only ever read (``pyadk checkpoint
    show`` on a copy) is never written to."""
    conn.execute(_CLAIMS_SCHEMA)  # a schema lookup once the table exists
    conn.execute("PRAGMA synchronous=NORMAL")
    try:
        return conn.execute(sql, parameters).rowcount
    finally:
        conn.execute("PRAGMA synchronous=FULL")


def _now() -> float:
    """The clock claims expire by: the wall clock, which every process on the machine shares
    (``time.monotonic`` counts from each boot, so an expiry stored before a reboot would be read
    against another count). A holder reads it too (``SQLiteCheckpointStore._lease_clock``): a
    step of it (NTP, a VM resumed) lapses a claim for a taker and for its holder alike."""
    return time.time()


def _claim(conn: sqlite3.Connection, *, key: str, owner: str, ttl: float) -> bool:
    now = _now()
    return _without_fsync(conn, _CLAIM, (key, owner, now + ttl, now)) == 1


def _renew(conn: sqlite3.Connection, *, key: str, owner: str, ttl: float) -> bool:
    now = _now()
    return _without_fsync(conn, _RENEW, (now + ttl, key, owner, now)) == 1


def _release(conn: sqlite3.Connection, *, key: str, owner: str) -> None:
    _without_fsync(conn, _RELEASE, (key, owner))


def _claimed(conn: sqlite3.Connection, *, keys: tuple[str, ...]) -> set[str]:
    """Which of ``keys`` hold a claim that has not lapsed. Reads only: without a claims table
    (none was ever taken; a file opened read-only) nothing is claimed."""
    if not keys or conn.execute(_HAS_CLAIMS).fetchone() is None:
        return set()
    marks = ", ".join("?" * len(keys))
    sql = f"SELECT id FROM {_CLAIMS} WHERE expires_at > ? AND id IN ({marks})"
    return {row[0] for row in conn.execute(sql, (_now(), *keys))}


class _KeptConnection:
    """The connection of a ``":memory:"`` store, which *is* its database: kept open across
    ``aclose`` so the checkpoints last as long as the store, and passed from each worker thread to
    the next — one at a time: a new worker waits until the one ``aclose`` stopped has finished its
    last jobs. Closed when the store is dropped, or by a worker after a failure it could not roll
    back (the data is then lost either way)."""

    __slots__ = ("_conn", "_connect", "_held")

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._conn: sqlite3.Connection | None = None
        self._held = threading.Lock()

    def take(self) -> sqlite3.Connection:
        """For a worker thread: the connection, opened on first use; waits while another has it."""
        self._held.acquire()
        try:
            if self._conn is None:
                self._conn = self._connect()
        except BaseException:
            self._held.release()
            raise
        return self._conn

    def give_back(self, close: bool) -> None:
        """For the worker that took it: done with it; ``close`` ends the database too."""
        try:
            if close and self._conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.close()
                self._conn = None
        finally:
            self._held.release()

    def close(self) -> None:
        """The store was dropped: close the connection unless a worker holds it (it will)."""
        if self._held.acquire(blocking=False):
            self.give_back(close=True)


class SQLiteCheckpointStore(_ClosableStore):
    """Checkpoints in the SQLite file at ``path`` (parent directories are created on first use;
    ``":memory:"`` keeps them in memory for the store's lifetime, across ``aclose``).

    ``claim_ttl``: seconds a resume's claim on a checkpoint lasts unless renewed (see
    ``ClaimingCheckpointStore``): how long a checkpoint stays blocked after a process died
    resuming it.

    Nothing is opened until the first operation. ``aclose()`` finishes queued operations, closes the
    connection and stops the worker thread; the next operation starts them again.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0, claim_ttl: float = 30.0
    ) -> None:
        self.claim_ttl = _positive_seconds(claim_ttl, "claim_ttl")
        if busy_timeout < 0:
            raise ValueError("busy_timeout must be >= 0 seconds")
        raw = os.fspath(path)
        if not isinstance(raw, str) or not raw:
            raise ValueError("SQLiteCheckpointStore needs a file path (or ':memory:')")
        self._path = raw if raw == _MEMORY else str(Path(raw).expanduser().absolute())
        self._busy_timeout = busy_timeout
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._finalizer: weakref.finalize[[], SQLiteCheckpointStore] | None = None
        self._kept: _KeptConnection | None = None
        self._writes = _Writes()  # the puts in flight, for a delete of their id to drop
        if raw == _MEMORY:
            self._kept = _KeptConnection(partial(type(self)._connect, _MEMORY, busy_timeout))
            weakref.finalize(self, self._kept.close)

    @property
    def path(self) -> str:
        """The database file (absolute), or ``":memory:"``."""
        return self._path

    async def get(self, id: str) -> bytes | None:
        key = _check_id(id)
        return await self._run("get", key, partial(_get, key=key))

    async def put(self, id: str, data: bytes) -> None:
        """Store ``data`` under ``id``, fsynced before it returns (``synchronous=FULL``). Cancelling
        the caller does not stop the write: it commits whole or not at all."""
        key = _check_id(id)
        superseded = threading.Event()
        writes = self._writes
        job = partial(
            _put,
            key=key,
            data=_check_data(data),
            busy_timeout=self._busy_timeout,
            superseded=superseded,
            writes=writes,
        )
        writes.add(key, superseded)
        try:
            await self._run("put", key, job)
        except asyncio.CancelledError:
            raise  # the job goes on, and forgets the put when it ends
        except BaseException:
            writes.discard(key, superseded)  # it ended, or never ran (the store was closed)
            raise

    async def _put_new(self, id: str, data: bytes, keep: Callable[[bytes], bool]) -> bytes | None:
        """As ``store._PutNewStore._put_new``: the row read and written in one write transaction
        (``keep`` runs in the store's thread meanwhile); as ``put`` otherwise, except that a
        delete of the id asked for meanwhile comes after it rather than dropping it."""
        key = _check_id(id)
        job = partial(
            _put_new,
            key=key,
            data=_check_data(data),
            keep=keep,
            busy_timeout=self._busy_timeout,
        )
        return await self._run("put", key, job)

    async def _replace(self, id: str, old: bytes, data: bytes) -> bool:
        """As ``store._ReplacingStore._replace``: one conditional ``UPDATE`` in a write
        transaction; a delete of the id asked for meanwhile comes after it."""
        key = _check_id(id)
        job = partial(
            _replace,
            key=key,
            old=_check_data(old),
            data=_check_data(data),
            busy_timeout=self._busy_timeout,
        )
        return await self._run("put", key, job)

    async def delete(self, id: str) -> None:
        """Delete ``id``'s checkpoint. A ``put`` of the same id that has not begun writing (queued,
        or waiting for another process's write lock) is dropped: the delete would undo it, and
        the delete need not wait out ``busy_timeout`` behind it (a run cancelled while saving
        under an id it made up deletes that save). Deleting an id that holds nothing takes no
        lock."""
        key = _check_id(id)
        self._writes.supersede(key)
        await self._run("delete", key, partial(_delete, key=key))

    async def _delete_if(self, id: str, old: bytes) -> bool:
        """As ``store._DeletingIfStore._delete_if``: one conditional ``DELETE``. Unlike
        ``delete``, it drops no put of the id that has not begun writing: that put comes first
        (jobs run in order), and the delete, finding its bytes, leaves them."""
        key = _check_id(id)
        job = partial(_delete_if, key=key, old=_check_data(old))
        return await self._run("delete", key, job)

    def ids(self, prefix: str | None = None) -> AsyncIterator[str]:
        """As ``ListingCheckpointStore.ids``, in the ids' order (by their UTF-8 bytes), a page of
        1000 ids per read; claims are rows of another table and never listed."""
        return self._ids(_check_prefix(prefix))

    async def _ids(self, prefix: str) -> AsyncIterator[str]:
        after: str | None = None
        while True:
            page, after = await self._run(
                "ids", None, partial(_ids_page, prefix=prefix, after=after)
            )
            for key in page:
                yield key
            if after is None:
                return

    async def claim(self, id: str, owner: str) -> bool:
        """As ``ClaimingCheckpointStore.claim``; expiry uses the wall clock the processes on this
        machine share, and the write skips the fsync (a claim need not survive a power loss)."""
        key = _check_id(id)
        job = partial(_claim, key=key, owner=_check_owner(owner), ttl=self.claim_ttl)
        return await self._run("claim", key, job)

    async def _renew(self, id: str, owner: str) -> bool:
        """Renew ``owner``'s claim on ``id`` only while it holds it, unlapsed (``claim`` takes a
        lapsed one too): False once another took it over, or it lapsed (taken and released by
        another meanwhile, perhaps). The runner's renewals (``adk.checkpoint._claim``)."""
        key = _check_id(id)
        job = partial(_renew, key=key, owner=_check_owner(owner), ttl=self.claim_ttl)
        return await self._run("claim", key, job)

    def _lease_clock(self) -> float:
        """The clock this store's claims expire by (``_now``), for their holders to read."""
        return _now()

    async def release(self, id: str, owner: str) -> None:
        key = _check_id(id)
        await self._run("release", key, partial(_release, key=key, owner=_check_owner(owner)))

    async def _claimed_ids(self, ids: list[str]) -> set[str]:
        """Which of ``ids`` a resume holds a claim on now (``list_pending``'s ``resuming``): one
        read for them all."""
        return await self._run("ids", None, partial(_claimed, keys=tuple(ids)))

    async def heads(self, ids: list[str], limit: int) -> list[tuple[bytes, int] | None]:
        """The first ``limit`` bytes and the length of each of ``ids``' checkpoints (None when
        there is none): ``list_pending`` reads their headers, not their histories. One read."""
        keys = tuple(_check_heads(ids, limit))
        return await self._run("get", None, partial(_heads, keys=keys, limit=limit))

    async def aclose(self) -> None:
        """Finish queued operations, close the connection and stop the worker thread. Idempotent;
        the next operation starts them again. A ``":memory:"`` store's connection is its data, so
        it stays open until the store is dropped."""
        with self._lock:
            worker, self._worker = self._worker, None
            if self._finalizer is not None:
                self._finalizer.detach()
        if worker is not None:
            await worker.stop()

    def __repr__(self) -> str:
        return f"SQLiteCheckpointStore({self._path!r})"

    # Opens the worker's connection; a seam for tests that inject faults into a real connection.
    _connect: Callable[[str, float], sqlite3.Connection] = staticmethod(_open_connection)

    async def _run(
        self, operation: str, key: str | None, job: Callable[[sqlite3.Connection], T]
    ) -> T:
        with self._lock:
            if self._worker is None:
                # A factory without a reference to self: the thread must not keep the store alive.
                connect = partial(type(self)._connect, self._path, self._busy_timeout)
                self._worker = _Worker(connect, self._kept)
                # Stop the thread if the store is dropped without aclose().
                self._finalizer = weakref.finalize(self, self._worker.stop_nowait)
            future = self._worker.submit(job)
        try:
            return await future
        except (sqlite3.Error, OSError) as exc:
            raise _store_error("sqlite", operation, key, self._path, exc) from exc
        except _ForeignTable as exc:
            raise _store_error("sqlite", operation, key, self._path, str(exc)) from None


@dataclass(slots=True)
class _Job:
    run: Callable[[sqlite3.Connection], Any] | None  # None: close the connection and stop
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


_Outcome = tuple[asyncio.Future[Any], BaseException | None, Any]


class _Worker:
    """One daemon thread that owns one sqlite3 connection and runs jobs in submission order.

    Invariant: after every job the connection has no open transaction — a failed job's transaction
    is rolled back, and if even that fails the connection is closed (which rolls back) and reopened
    for the next job. With ``kept`` (an in-memory database) the connection comes from there, and
    ``stop`` hands it back open for the next worker; ``stop_nowait`` (the store was dropped) and a
    failed rollback still close it.
    """

    def __init__(
        self, open_connection: Callable[[], sqlite3.Connection], kept: _KeptConnection | None = None
    ) -> None:
        self._open = open_connection if kept is None else kept.take
        self._kept = kept
        self._conn: sqlite3.Connection | None = None
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._main, name="pyadk-sqlite", daemon=True)
        self._thread.start()

    def submit(self, run: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put(_Job(run, future, loop))
        return future

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._jobs.put(_Job(None, future, loop))
        await future

    def stop_nowait(self) -> None:
        self._jobs.put(None)

    def _main(self) -> None:
        running = True
        while running:
            batch = [self._jobs.get()]
            while True:
                try:
                    batch.append(self._jobs.get_nowait())
                except queue.Empty:
                    break
            done: defaultdict[asyncio.AbstractEventLoop, list[_Outcome]] = defaultdict(list)
            for job in batch:
                if job is None or job.run is None:
                    self._close(keep=job is not None)
                    running = False
                    if job is not None:
                        done[job.loop].append((job.future, None, None))
                    continue
                if not running:
                    error = sqlite3.ProgrammingError("the store was closed")
                    done[job.loop].append((job.future, error, None))
                    continue
                done[job.loop].append(self._execute(job))
            for loop, outcomes in done.items():
                # RuntimeError: that event loop is closed; nobody is waiting any more.
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_settle, outcomes)

    def _execute(self, job: _Job) -> _Outcome:
        assert job.run is not None
        try:
            if self._conn is None:
                self._conn = self._open()
            return (job.future, None, job.run(self._conn))
        except BaseException as exc:
            self._recover()
            return (job.future, exc, None)

    def _recover(self) -> None:
        conn = self._conn
        if conn is None:
            return
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            self._close()

    def _close(self, keep: bool = False) -> None:
        """Close the connection; ``keep``: an in-memory database's stays open for the next one."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._kept is not None:
            self._kept.give_back(close=not keep)
            return
        with contextlib.suppress(sqlite3.Error):
            conn.close()


def _settle(outcomes: list[_Outcome]) -> None:
    for future, error, value in outcomes:
        if future.done():  # the awaiting task was cancelled
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)


class _ReadOnlySQLiteStore(SQLiteCheckpointStore):
    """Reads an existing SQLite checkpoint file and never writes to it: for ``pyadk checkpoint
    show``, where a mistyped path must be reported, not created. Writes fail with
    ``CheckpointStoreError`` (SQLite refuses them)."""

    _connect = staticmethod(_open_read_only)


class _ExistingSQLiteStore(SQLiteCheckpointStore):
    """Writes an existing SQLite checkpoint file and creates none: for ``pyadk checkpoint
    delete``, where a mistyped path must be reported, not created (the claims table is made on
    the first claim, as in any store of the file)."""

    _connect = staticmethod(_open_existing)
