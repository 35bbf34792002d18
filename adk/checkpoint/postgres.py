"""``PostgresCheckpointStore``: checkpoints as rows of a PostgreSQL table (``pip install
pyadk[postgres]``), through asyncpg.

The pool is created on first use, and with it the table (``CREATE TABLE IF NOT EXISTS`` under an
advisory lock, because concurrent ``CREATE TABLE IF NOT EXISTS`` from several processes can still
collide in the catalog). A write is one upsert statement, which PostgreSQL runs as its own
transaction, committed whole or not at all, so a failure mid-write — an error, a lost connection, a
killed backend — leaves the previous row. All operations are idempotent, so a connection lost on
the way (typically a pool connection that went stale when the server restarted) is retried once on
a fresh connection.

Every operation, retry included, ends within ``timeout`` seconds: a server that stops answering (a
stopped process, a network partition that drops packets) is a ``CheckpointStoreError``, not a hang.
The same bound is asyncpg's ``command_timeout``, which also caps its cancel request and the reset
of a connection going back to the pool. A connection whose operation was cancelled or timed out
is dropped rather than cancelled gracefully: that needs the server's answer, which may never come.

Claims (one resume of a checkpoint at a time, across processes) are rows of a second table,
``<table>_claims``, taken with one conditional upsert and timed by the server's clock, so the
clients' clocks need not agree.

``ids`` reads the ids a page (``_PAGE``) at a time, each page one statement in the primary key's
order after the last id of the page before (keyset pagination): no cursor or transaction stays open
while the caller works through a page, each page is an operation of its own (timeout and retry
included), and a put or delete meanwhile cannot make it skip or repeat an id that stays. A prefix
is tested with ``starts_with``, not as a range of the order: in the database's collation (often not
``C``) the ids that start with a prefix need not be one run of it.

Only this module imports ``asyncpg``; ``adk.checkpoint`` loads it on first use of the class.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import asyncpg  # type: ignore[import-untyped]
from asyncpg.exceptions import (  # type: ignore[import-untyped]
    AdminShutdownError,
    CannotConnectNowError,
    InternalClientError,
    PostgresConnectionError,
    SerializationError,
    UndefinedTableError,
)

from .._loop_clients import LoopClients
from .store import (
    _check_data,
    _check_heads,
    _check_id,
    _check_owner,
    _check_prefix,
    _check_table,
    _ClosableStore,
    _ForeignTable,
    _InUse,
    _kept,
    _listable,
    _positive_seconds,
    _redact,
    _store_error,
)

__all__ = ["PostgresCheckpointStore"]

_PAGE = 1000
"""Ids read per statement while listing: few round trips, little held at once."""

T = TypeVar("T")

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")


class _Unusable(ConnectionError):
    """A pooled connection asyncpg refuses to use (``InternalClientError``), dropped: lost."""


# Errors that mean "this connection is gone", worth one retry on a fresh one.
_CONNECTION_LOST = (
    PostgresConnectionError,
    AdminShutdownError,
    CannotConnectNowError,
    ConnectionError,
)
# ValueError: asyncpg's verdict on a malformed DSN, raised when the pool is first created.
_FAILURES = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    InternalClientError,
    OSError,
    TimeoutError,
    ValueError,
)


# The columns of a table (named as ``to_regclass`` reads it: quoted, maybe with its schema), each
# with whether it is in the primary key; none when there is no such table.
_COLUMNS_SQL = (
    "SELECT a.attname, coalesce(a.attnum = ANY(i.indkey), false) FROM pg_attribute a "
    "LEFT JOIN pg_index i ON i.indrelid = a.attrelid AND i.indisprimary "
    "WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
)


def _table_parts(table: str) -> list[str]:
    """``table`` or ``schema.table`` split in parts; anything else is refused, since the name is
    spliced into SQL (it cannot be a query parameter)."""
    if not isinstance(table, str):
        raise TypeError("table must be a str")
    parts = table.split(".")
    if len(parts) > 2 or not all(_IDENTIFIER.fullmatch(part) for part in parts):
        raise ValueError(
            f"invalid table name {table!r}: use letters, digits and underscores (not first), at "
            "most 63 characters, optionally prefixed by a schema name and a dot"
        )
    return parts


def _quote(parts: list[str]) -> str:
    return ".".join(f'"{part}"' for part in parts)


def _claims_table(parts: list[str]) -> list[str]:
    """The claims table beside ``parts``' table: ``<name>_claims``, shortened with a hash of the
    full name when that would pass PostgreSQL's 63-character limit."""
    *schema, name = parts
    claims = f"{name}_claims"
    if len(claims) > 63:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        claims = f"{name[:46]}_{digest}_claims"
    return [*schema, claims]


class PostgresCheckpointStore(_ClosableStore):
    """Checkpoints in ``table`` of the PostgreSQL database at ``dsn``
    (``postgresql://user:password@host:port/database``, or anything asyncpg accepts).

    The table name is used as written (quoted, so case-sensitive) and may be ``schema.table``.
    Columns: ``id text primary key, data bytea, updated_at timestamptz``. Resumes' claims live in
    ``<table>_claims`` and last ``claim_ttl`` seconds unless renewed (see
    ``ClaimingCheckpointStore``).

    ``timeout``: seconds an operation may take, a retry on a fresh connection included, before it
    fails with ``CheckpointStoreError``.

    Nothing connects until the first operation. ``aclose()`` waits for the operations in flight,
    then closes the pool; the next operation creates a new one. A pool belongs to the event loop
    that created it, so the store keeps a pool (of up to ``max_size`` connections) per loop it is
    used on (one store shared by ``asyncio.run`` per request, from several threads at once too),
    each closed as its loop ends (by ``asyncio.run``; a hand-run loop closed without
    ``shutdown_asyncgens`` leaves its pool to the garbage collector). ``aclose()`` closes the
    running loop's pool.
    """

    _read_only = False  # see ``_ReadOnlyPostgresStore``
    _creates = True  # the checkpoint table when missing (see ``_ExistingPostgresStore``)

    def __init__(
        self,
        dsn: str,
        table: str = "pyadk_checkpoints",
        *,
        max_size: int = 10,
        claim_ttl: float = 30.0,
        timeout: float = 10.0,
    ) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self._dsn = dsn
        self._where = _redact(dsn)
        _check_scheme(dsn, self._where)
        self.claim_ttl = _positive_seconds(claim_ttl, "claim_ttl")
        self._timeout = _positive_seconds(timeout, "timeout")
        self._table = table
        parts = _table_parts(table)
        qualified = _quote(parts)
        claims = _quote(_claims_table(parts))
        self._get_sql = f"SELECT data FROM {qualified} WHERE id = $1"
        self._heads_sql = (
            f"SELECT id, substring(data from 1 for $2), octet_length(data) FROM {qualified} "
            "WHERE id = ANY($1::text[])"
        )
        self._put_sql = (
            f"INSERT INTO {qualified} (id, data, updated_at) VALUES ($1, $2, now()) "
            "ON CONFLICT (id) DO UPDATE SET data = EXCLUDED.data, updated_at = EXCLUDED.updated_at"
        )
        self._delete_sql = f"DELETE FROM {qualified} WHERE id = $1"
        # ``_delete_if``: a row back when it held the bytes and is deleted.
        self._delete_if_sql = f"DELETE FROM {qualified} WHERE id = $1 AND data = $2 RETURNING true"
        # ``_put_new``: a row back when inserted; none when the id has a row (then locked and
        # read, and updated only if it may be replaced).
        self._insert_new_sql = (
            f"INSERT INTO {qualified} (id, data, updated_at) VALUES ($1, $2, now()) "
            "ON CONFLICT (id) DO NOTHING RETURNING true"
        )
        self._lock_sql = f"SELECT data FROM {qualified} WHERE id = $1 FOR UPDATE"
        self._update_sql = f"UPDATE {qualified} SET data = $2, updated_at = now() WHERE id = $1"
        # ``_replace``: a row back when it holds the new bytes, written now (it held the old)
        # or already (a first attempt that committed before its connection was lost).
        self._replace_sql = (
            f"UPDATE {qualified} SET data = $3, updated_at = now() "
            "WHERE id = $1 AND (data = $2 OR data = $3) RETURNING true"
        )
        # Two statements rather than one with "$1 IS NULL OR id > $1": a generic plan for that
        # (asyncpg prepares statements, and PostgreSQL switches to a generic plan after five
        # runs) cannot start its index scan at $1: it reads and sorts the whole table per page.
        self._first_ids_sql = (
            f"SELECT id FROM {qualified} WHERE starts_with(id, $1) ORDER BY id LIMIT {_PAGE}"
        )
        self._next_ids_sql = (
            f"SELECT id FROM {qualified} WHERE id > $2 AND starts_with(id, $1) "
            f"ORDER BY id LIMIT {_PAGE}"
        )
        # A row back when taken (free, lapsed or renewed); none when another owner holds it.
        self._claim_sql = (
            f"INSERT INTO {claims} AS c (id, owner, expires_at) "
            "VALUES ($1, $2, clock_timestamp() + make_interval(secs => $3)) "
            "ON CONFLICT (id) DO UPDATE SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at "
            "WHERE c.owner = EXCLUDED.owner OR c.expires_at <= clock_timestamp() RETURNING true"
        )
        # A renewal (``_renew``): a row back only while the claim is the owner's, unlapsed.
        self._renew_sql = (
            f"UPDATE {claims} SET expires_at = clock_timestamp() + make_interval(secs => $3) "
            "WHERE id = $1 AND owner = $2 AND expires_at > clock_timestamp() RETURNING true"
        )
        self._release_sql = f"DELETE FROM {claims} WHERE id = $1 AND owner = $2"
        self._claimed_sql = (
            f"SELECT id FROM {claims} WHERE id = ANY($1::text[]) AND expires_at > clock_timestamp()"
        )
        setup = _Setup(
            read_only=self._read_only,
            creates=self._creates,
            dsn=dsn,
            table=table,
            qualified=qualified,
            max_size=max_size,
            timeout=self._timeout,
            lock_key=int.from_bytes(
                hashlib.sha256(f"pyadk.checkpoint:{table}".encode()).digest()[:8],
                "big",
                signed=True,
            ),
            create_sql=(
                f"CREATE TABLE IF NOT EXISTS {qualified} (id text PRIMARY KEY, "
                "data bytea NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
            ),
            create_claims_sql=(
                f"CREATE TABLE IF NOT EXISTS {claims} (id text PRIMARY KEY, "
                "owner text NOT NULL, expires_at timestamptz NOT NULL)"
            ),
            claims_qualified=claims,
        )
        # A pool per event loop, created on its first operation (nothing is made until then).
        self._pools = LoopClients(None, functools.partial(_Pool, setup), _close_pool)

    @property
    def table(self) -> str:
        """The checkpoint table's name as given (maybe ``schema.table``)."""
        return self._table

    async def get(self, id: str) -> bytes | None:
        key = _check_id(id)

        async def run(conn: Any) -> bytes | None:
            value = await conn.fetchval(self._get_sql, key)
            return None if value is None else bytes(value)

        return await self._call("get", key, run)

    async def put(self, id: str, data: bytes) -> None:
        """One upsert statement, atomic on its own (an explicit transaction would only add the
        round trips of ``BEGIN`` and ``COMMIT``, and a rollback to wait for when the server stops
        answering). Like every operation, retried once on a fresh connection when the connection
        was lost (a stale pool connection after a server restart)."""
        key = _check_id(id)
        value = _check_data(data)

        async def run(conn: Any) -> None:
            await conn.execute(self._put_sql, key, value)

        await self._call("put", key, run)

    async def _put_new(self, id: str, data: bytes, keep: Callable[[bytes], bool]) -> bytes | None:
        """As ``store._PutNewStore._put_new``: in one transaction, an insert that does nothing
        when the id has a row (waiting for another writer's insert of it to commit or roll
        back), then that row read ``FOR UPDATE`` (locked until the commit) and updated only if
        ``keep`` does not keep it. Retried once on a fresh connection as ``put`` is: a first
        attempt that committed before the connection was lost left ``data`` itself, which the
        retry takes as written."""
        key = _check_id(id)
        value = _check_data(data)

        async def run(conn: Any) -> bytes | None:
            # Not ``async with conn.transaction()``: cancelled (the timeout), it sends ROLLBACK
            # to a server that may have stopped answering, and fails only when that times out
            # too. Left so, the connection is terminated (``_once``) and the server rolls back.
            # READ COMMITTED whatever the database's default: a row another writer locked is
            # read once that one commits, where SERIALIZABLE failed the second of two new runs
            # with a serialization error instead of refusing it.
            transaction = conn.transaction(isolation="read_committed")
            await transaction.start()
            try:
                kept = await self._look_and_write(conn, key, value, keep)
            except (asyncio.CancelledError, TimeoutError):
                raise
            except BaseException:
                if not _lost(conn):  # else the server rolled back, and the error stands
                    await transaction.rollback()
                raise
            await transaction.commit()
            return kept

        return await self._call("put", key, run)

    async def _look_and_write(
        self, conn: Any, key: str, value: bytes, keep: Callable[[bytes], bool]
    ) -> bytes | None:
        """``_put_new``'s statements, in its transaction: the bytes kept, or None (written)."""
        while not await conn.fetchval(self._insert_new_sql, key, value):
            found = await conn.fetchval(self._lock_sql, key)
            if found is None:
                continue  # deleted since the insert looked: insert again
            old = bytes(found)
            if _kept(old, value, keep):
                return old
            await conn.execute(self._update_sql, key, value)
            break
        return None

    async def _replace(self, id: str, old: bytes, data: bytes) -> bool:
        """As ``store._ReplacingStore._replace``: one ``UPDATE ... WHERE`` statement, atomic on
        its own (the row locked while it is compared and written); retried once on a fresh
        connection as ``put`` is."""
        key = _check_id(id)
        looked = _check_data(old)
        value = _check_data(data)

        async def run(conn: Any) -> bool:
            return bool(await conn.fetchval(self._replace_sql, key, looked, value))

        return await self._call("put", key, run)

    async def _delete_if(self, id: str, old: bytes) -> bool:
        """As ``store._DeletingIfStore._delete_if``: one ``DELETE ... WHERE`` statement, atomic
        on its own; retried once on a fresh connection as ``delete`` is."""
        key = _check_id(id)
        looked = _check_data(old)

        async def run(conn: Any) -> bool:
            return bool(await conn.fetchval(self._delete_if_sql, key, looked))

        return await self._call("delete", key, run)

    async def delete(self, id: str) -> None:
        key = _check_id(id)

        async def run(conn: Any) -> None:
            await conn.execute(self._delete_sql, key)

        await self._call("delete", key, run)

    def ids(self, prefix: str | None = None) -> AsyncIterator[str]:
        """As ``ListingCheckpointStore.ids``, in the primary key's order, 1000 ids per statement;
        claims are rows of another table and never listed."""
        return self._ids(_check_prefix(prefix))

    async def _ids(self, prefix: str) -> AsyncIterator[str]:
        after: str | None = None
        while True:

            async def page(conn: Any, after: str | None = after) -> list[str]:
                if after is None:
                    rows = await conn.fetch(self._first_ids_sql, prefix)
                else:
                    rows = await conn.fetch(self._next_ids_sql, prefix, after)
                return [row[0] for row in rows]

            ids = await self._call("ids", None, page)
            for key in ids:
                if _listable(key):
                    yield key
            if len(ids) < _PAGE:
                return
            after = ids[-1]

    async def claim(self, id: str, owner: str) -> bool:
        """As ``ClaimingCheckpointStore.claim``; one conditional upsert, timed by the server's
        clock, so the clients' clocks need not agree."""
        key = _check_id(id)
        holder = _check_owner(owner)

        async def run(conn: Any) -> bool:
            return bool(await conn.fetchval(self._claim_sql, key, holder, self.claim_ttl))

        return await self._call("claim", key, run)

    async def _renew(self, id: str, owner: str) -> bool:
        """Renew ``owner``'s claim on ``id`` only while it holds it, unlapsed (``claim`` takes a
        lapsed one too): False once another took it over, or it lapsed. The runner's renewals
        (``adk.checkpoint._claim``)."""
        key = _check_id(id)
        holder = _check_owner(owner)

        async def run(conn: Any) -> bool:
            return bool(await conn.fetchval(self._renew_sql, key, holder, self.claim_ttl))

        return await self._call("claim", key, run)

    async def release(self, id: str, owner: str) -> None:
        key = _check_id(id)
        holder = _check_owner(owner)

        async def run(conn: Any) -> None:
            await conn.execute(self._release_sql, key, holder)

        await self._call("release", key, run)

    async def _claimed_ids(self, ids: list[str]) -> set[str]:
        """Which of ``ids`` a resume holds a claim on now (``list_pending``'s ``resuming``): one
        statement for them all, timed by the server's clock as the claims are."""
        if not ids:
            return set()

        async def run(conn: Any) -> set[str]:
            return {row[0] for row in await conn.fetch(self._claimed_sql, ids)}

        return await self._call("ids", None, run)

    async def heads(self, ids: list[str], limit: int) -> list[tuple[bytes, int] | None]:
        """The first ``limit`` bytes and the length of each of ``ids``' checkpoints (None when
        there is none): ``list_pending`` reads their headers, not their histories. One
        statement for them all."""
        ids = _check_heads(ids, limit)
        if not ids:
            return []

        async def run(conn: Any) -> list[tuple[bytes, int] | None]:
            rows = await conn.fetch(self._heads_sql, ids, limit)
            found = {row[0]: (bytes(row[1]), int(row[2])) for row in rows}
            return [found.get(id) for id in ids]

        return await self._call("get", None, run)

    async def aclose(self) -> None:
        """Wait for the operations in flight (each ends within ``timeout``), then close the
        running loop's pool, giving the server up to ``timeout`` more to end the sessions before
        terminating them. Idempotent. The pools of loops still running in other threads close as
        those loops end (an asyncpg pool is used only from its own loop)."""
        await self._pools.aclose()

    def __repr__(self) -> str:
        return f"PostgresCheckpointStore({self._where!r}, table={self._table!r})"

    async def _call(self, operation: str, key: str | None, run: Callable[[Any], Awaitable[T]]) -> T:
        """``run`` on a pooled connection within ``timeout``, retried once on a fresh connection
        when the connection was lost; failures become ``CheckpointStoreError``."""
        pools = self._pools
        pool = pools.get() or await pools.bind()
        pool.start()
        pool.users += 1  # before any await: an aclose() now waits for this operation
        deadline = asyncio.timeout(self._timeout)
        try:
            async with deadline:
                try:
                    return await self._once(pool, run, deadline)
                except _CONNECTION_LOST:
                    await pool.expire()
                return await self._once(pool, run, deadline)
        except TimeoutError as exc:  # before OSError, its base class
            reason: BaseException | str = exc
            if deadline.expired():
                reason = f"no answer within {self._timeout:g} s (timeout)"
            raise _store_error("postgres", operation, key, self._where, reason) from exc
        except _FAILURES as exc:
            raise _store_error("postgres", operation, key, self._where, exc) from exc
        except _ForeignTable as exc:
            raise _store_error("postgres", operation, key, self._where, str(exc)) from None
        finally:
            pool.leave()

    async def _once(
        self, pool: _Pool, run: Callable[[Any], Awaitable[T]], deadline: asyncio.Timeout
    ) -> T:
        connections = await pool.ready()
        conn = await connections.acquire()
        try:
            while True:
                try:
                    return await run(conn)
                except SerializationError:
                    # A database whose sessions default to REPEATABLE READ or SERIALIZABLE
                    # refuses a statement whose row another's changed since its snapshot
                    # (a claim or put meeting another's): each operation is one statement,
                    # its own transaction (``_put_new``'s is READ COMMITTED, rolled back),
                    # so it runs again on a snapshot that sees the other's commit, within
                    # ``timeout``, and decides as READ COMMITTED would.
                    continue
        except (asyncio.CancelledError, TimeoutError):
            # asyncpg would cancel the query gracefully, waiting for a server that may not
            # answer; closing the socket ends it at once (the server rolls the work back).
            conn.terminate()
            raise
        except InternalClientError as exc:
            # The server ended this pooled connection's session (a restart, a failover,
            # pg_terminate_backend) and its notice arrived before the socket's close: asyncpg
            # is still handling that error and refuses the statement ("cannot switch to
            # state 11; another operation (2) is in progress"). The connection is of no
            # further use; like a lost one, the operation is retried once on a fresh one.
            conn.terminate()
            raise _Unusable(f"the pooled connection cannot be used: {exc}") from exc
        finally:
            # Not ``async with connections.acquire()``: the session may end so after the
            # statement ran, and asyncpg's reset of the connection as it goes back to the pool
            # then fails the same way ("cannot switch to state 15"), which came out of the
            # ``async with`` in place of the operation's outcome: a put that had committed was
            # reported failed. asyncpg drops a connection whose reset failed (the next acquire
            # makes a new one); the statement's outcome, its result or its error, stands.
            await _release(connections, conn, deadline)


async def _release(connections: Any, conn: Any, deadline: asyncio.Timeout) -> None:
    """Give ``conn`` back to ``connections`` once the operation's outcome is known, within what is
    left of its ``deadline`` but not under it: a server that stopped answering after the
    statement's answer arrived left asyncpg's reset waiting, and the deadline's cancellation of
    that wait came out in place of the outcome, a timeout (a committed put, a claim taken, each
    reported failed). A reset that does not end in time fails, and asyncpg drops the connection.
    A cancellation from elsewhere still ends the wait (asyncpg finishes the release)."""
    when = deadline.when()
    if deadline.expired() or when is None:  # cancelled by it already: the operation timed out
        with contextlib.suppress(*_FAILURES):
            await connections.release(conn)
        return
    left = when - asyncio.get_running_loop().time()
    if left <= 0:  # no time left to reset it: dropped, as after a failed reset
        with contextlib.suppress(*_FAILURES):  # terminated already: released ("released back")
            conn.terminate()
        return
    deadline.reschedule(None)
    try:
        with contextlib.suppress(*_FAILURES):
            await connections.release(conn, timeout=left)
    finally:
        deadline.reschedule(when)  # for the retry on a fresh connection, if one follows


@dataclass(frozen=True, slots=True)
class _Setup:
    """What creating a pool takes: kept apart from the store, since each loop's pool is closed at
    its loop's end by code that must not keep the store alive (see ``LoopClients``)."""

    read_only: bool
    creates: bool  # the checkpoint table, when missing (not ``_ExistingPostgresStore``)
    dsn: str
    table: str  # as given, for messages
    qualified: str  # quoted, for SQL and ``to_regclass``
    max_size: int
    timeout: float
    lock_key: int
    create_sql: str
    create_claims_sql: str
    claims_qualified: str

    async def create(self) -> Any:
        """A pool, the tables created (under an advisory lock) if they are not there; for a
        read-only store, a pool whose sessions refuse writes, and nothing created."""
        pool = await asyncpg.create_pool(
            self.dsn,
            # The read-only store (``pyadk checkpoint``) keeps no connection open for later: kept
            # at one, asyncpg made it again in the background once the server ended it (a
            # restart), logging each failed try with its traceback on the command's stderr.
            min_size=0 if self.read_only or not self.creates else 1,
            max_size=self.max_size,
            timeout=self.timeout,
            command_timeout=self.timeout,
            server_settings={"default_transaction_read_only": "on"} if self.read_only else None,
        )
        try:
            async with pool.acquire() as conn:
                if self.read_only:
                    await self._check_table(conn)
                    return pool
                if not self.creates:
                    await self._existing(conn)
                    return pool
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", self.lock_key)
                    await conn.execute(self.create_sql)
                    await conn.execute(self.create_claims_sql)
                    await self._check_table(conn)
        except BaseException:
            pool.terminate()
            raise
        return pool

    async def _existing(self, conn: Any) -> None:
        """The checkpoint table checked, never created (a missing one is asyncpg's
        ``relation ... does not exist``); the claims table made only if missing, so a role that
        may not create tables works where it exists."""
        await conn.execute(f"SELECT 1 FROM {self.qualified} LIMIT 0")
        await self._check_table(conn)
        if await conn.fetchval("SELECT to_regclass($1) IS NULL", self.claims_qualified):
            try:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", self.lock_key)
                    await conn.execute(self.create_claims_sql)
            except asyncpg.InsufficientPrivilegeError as exc:
                # Said as a failed get otherwise (the first operation makes the pool), which
                # the role may well make: the table it may not create is named.
                raise asyncpg.InsufficientPrivilegeError(
                    f"there is no claims table {self.claims_qualified} and this role may not "
                    f"create it (CREATE on its schema, or a store of the table run once, makes "
                    f"it): {exc}"
                ) from exc

    async def _check_table(self, conn: Any) -> None:
        """Refuse a table of the store's name that is not a checkpoint table
        (``_check_table``): once per pool, one read of the catalog."""
        rows = await conn.fetch(_COLUMNS_SQL, self.qualified)
        _check_table(
            self.table,
            {row[0]: row[1] for row in rows},
            "PostgresCheckpointStore",
            "name another table (PostgresCheckpointStore(dsn, table=...), pyadk checkpoint "
            "--table) or use another database",
        )


class _Pool(_InUse):
    """One event loop's asyncpg pool (being) created, and the operations using it now: it is
    closed once they have ended, so an operation already running never fails with "pool is
    closing"."""

    __slots__ = ("setup", "task")

    def __init__(self, setup: _Setup) -> None:
        self.setup = setup
        self.task: asyncio.Task[Any] | None = None
        super().__init__()

    def start(self) -> None:
        """Begin creating the pool, unless it is created or being created; after a failed
        attempt, each operation tries anew."""
        task = self.task
        if task is None or (task.done() and _failed(task)):
            self.task = asyncio.get_running_loop().create_task(self.setup.create())

    async def ready(self) -> Any:
        """The pool, once created. Shielded: one caller being cancelled must not abort the pool
        the others wait for."""
        assert self.task is not None  # start() came first
        return await asyncio.shield(self.task)

    async def expire(self) -> None:
        """Replace every pooled connection on next use: if one went stale, its siblings did too."""
        task = self.task
        if task is not None and task.done() and not _failed(task):
            await task.result().expire_connections()

    def terminate(self) -> None:
        """Drop the pool without awaiting anything on it."""
        task = self.task
        if task is not None and task.done() and not _failed(task):
            with contextlib.suppress(Exception):  # the sockets go with it either way
                task.result().terminate()


async def _close_pool(pool: _Pool) -> None:
    """Close a loop's pool once the operations using it have ended (on that loop: at its end, or
    by ``aclose``), giving the server up to ``timeout`` to end the sessions."""
    try:
        await pool.drained()
        task = pool.task
        if task is None:
            return  # no operation started one
        await asyncio.wait([task])  # created or failed; a failure is not this close's to report
    except asyncio.CancelledError:
        if pool.task is not None:
            pool.task.add_done_callback(lambda _: pool.terminate())  # now, or once it is made
        raise
    if _failed(task):
        return
    connections = task.result()
    try:
        # Graceful: lets the server end each session cleanly.
        await asyncio.wait_for(connections.close(), timeout=pool.setup.timeout)
    except _FAILURES:
        connections.terminate()  # timed out or the server is gone: drop the sockets
    except asyncio.CancelledError:
        connections.terminate()
        raise


def _lost(conn: Any) -> bool:
    """Whether the pooled connection ``conn`` is closed: its connection lost, the pool took it
    back, and asyncpg refuses every call on it, ``is_closed()`` too ("connection has been
    released back to the pool"), which asked so failed a save in asyncpg's words, not retried."""
    try:
        return bool(conn.is_closed())
    except asyncpg.InterfaceError:
        return True


def _failed(task: asyncio.Task[Any]) -> bool:
    return task.cancelled() or task.exception() is not None


def _check_scheme(dsn: str, where: str) -> None:
    """Refuse (``ValueError``) a DSN that is no ``postgresql://`` URL when the store is made:
    asyncpg reads the DSN only as it connects, so a SQLAlchemy URL (``postgresql+psycopg://``,
    the ``DATABASE_URL`` a LangChain app shares) or libpq's ``key=value`` form failed at the
    first operation, a run's first pause, after its work. The rest of the DSN (a port, the
    query's options) is asyncpg's to read, at the first connection. An empty DSN leaves
    everything to the ``PG*`` environment variables, as in asyncpg."""
    if not dsn:
        return
    scheme = urlsplit(dsn).scheme  # as asyncpg reads it
    if scheme in ("postgresql", "postgres"):
        return
    if "+" in scheme:
        hint = f"; a SQLAlchemy URL's driver ('+{scheme.partition('+')[2]}') is no part of it"
    elif not scheme and "=" in dsn:
        hint = "; libpq's key=value form (host=... dbname=...) is not taken"
    elif "@" in dsn and "://" not in dsn:
        hint = "; it has no scheme:// before its user and host"
    else:
        hint = ""
    raise ValueError(
        f'PostgreSQL DSN {where!r}: scheme is expected to be either "postgresql" or '
        f'"postgres", got {scheme!r}{hint}: write postgresql://user:password@host:port/database '
        "(asyncpg's DSN)"
    )


class _ReadOnlyPostgresStore(PostgresCheckpointStore):
    """Reads an existing checkpoint table and never writes to the database: for ``pyadk
    checkpoint``, which an operator may run with a role that can only read, and which must not
    create tables in a database it was pointed at by mistake (a missing table is reported:
    ``relation ... does not exist``). Its sessions are read-only, so any write fails with
    ``CheckpointStoreError``. A database without the claims table (made by hand, say: nothing
    was ever claimed there) lists nothing as being resumed, as the read-only SQLite store does."""

    _read_only = True

    async def _claimed_ids(self, ids: list[str]) -> set[str]:
        if not ids:
            return set()
        statement = self._claimed_sql

        async def run(conn: Any) -> set[str]:
            try:
                return {row[0] for row in await conn.fetch(statement, ids)}
            except UndefinedTableError:
                return set()

        return await self._call("ids", None, run)


class _ExistingPostgresStore(PostgresCheckpointStore):
    """Writes an existing checkpoint table and creates none: for ``pyadk checkpoint delete``,
    which must not make tables in a database it was pointed at by mistake (a missing table is
    reported: ``relation ... does not exist``). The claims table, which deleting under a claim
    needs, is made if missing (with the role's ``CREATE`` on the schema), as a store makes it."""

    _creates = False
