"""One suite for every checkpoint store — memory, SQLite, and real Redis and PostgreSQL servers
(started by ``services.py``) — plus each backend's failure modes: down, cut off mid-write, failing
inside a transaction, crashing, shared by several processes.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import logging
import os
import pickle
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
import redis.asyncio as aioredis
from services import PostgresServer, RedisServer, closed_port

import adk
from adk import Runner
from adk.checkpoint import (
    CheckpointStore,
    CheckpointStoreError,
    ClaimingCheckpointStore,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
)
from adk.checkpoint.postgres import _ReadOnlyPostgresStore, _release
from adk.checkpoint.sqlite import _open_connection, _use_wal
from adk.checkpoint.store import (
    _deletes_if,
    _DeletingIfStore,
    _PutNewStore,
    _redact,
    _replaces,
    _ReplacingStore,
)
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

pytest_plugins = ["services"]

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20

ODD_IDS = [
    "plain",
    "with space",
    "slash/inside/it",
    "/leading",
    "trailing/",
    "a/b",
    "a%2Fb",
    "back\\slash",
    "quote'single",
    'quote"double',
    "`backtick`",
    "'; DROP TABLE pyadk_checkpoints; --",
    "glob*?[x]{y}",
    "ünïcødé-日本語-🙂",
    "tab\tnew\nline\r",
    "prefix:colon:separated",
    "x" * 1024,
    "🙂" * 256,  # exactly 1024 UTF-8 bytes
]


# --------------------------------------------------------------------------------------------------
# Backends


@dataclass
class Backend:
    name: str
    factory: Callable[[], CheckpointStore]
    resources: Callable[[], Awaitable[int]] | None = None
    """How many connections (or threads) the backend has open now; None: it has none."""
    created: list[CheckpointStore] = field(default_factory=list)

    def make(self) -> CheckpointStore:
        """A new store over the same data (for memory: the same store)."""
        store = self.factory()
        self.created.append(store)
        return store

    @property
    def persistent(self) -> bool:
        return self.name != "memory"


async def close(store: object) -> None:
    aclose = getattr(store, "aclose", None)
    if aclose is not None:
        await aclose()


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    name: str = request.param
    unique = uuid.uuid4().hex[:12]
    factory: Callable[[], CheckpointStore]
    resources: Callable[[], Awaitable[int]] | None = None
    if name == "memory":
        shared = InMemoryCheckpointStore()
        factory = lambda: shared  # noqa: E731  # "a new store over the same data" is itself
    elif name == "sqlite":
        factory = functools.partial(SQLiteCheckpointStore, tmp_path / "checkpoints.db")
        resources = sqlite_threads
    elif name == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        factory = functools.partial(RedisCheckpointStore, redis_server.url, prefix=f"t{unique}:")
        resources = functools.partial(redis_clients, redis_server.url)
    else:
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        factory = functools.partial(PostgresCheckpointStore, pg.dsn, table=f"cp_{unique}")
        resources = functools.partial(postgres_clients, pg.dsn)
    backend = Backend(name, factory, resources)
    yield backend
    for store in backend.created:
        await close(store)


@pytest.fixture
def store(backend: Backend) -> CheckpointStore:
    return backend.make()


async def sqlite_threads() -> int:
    return sum(thread.name == "pyadk-sqlite" for thread in threading.enumerate())


def _sqlite_workers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "pyadk-sqlite"]


def _stopped(thread: threading.Thread) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return not thread.is_alive()

    return check


async def redis_clients(url: str) -> int:
    raw = aioredis.Redis.from_url(url)
    try:
        return len(await raw.client_list()) - 1  # not counting this one
    finally:
        await raw.aclose()


async def postgres_clients(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        count: int = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
        )
        return count
    finally:
        await conn.close()


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait (up to 10 s) for something the server does on its own time, like noticing a close."""
    for _ in range(1000):
        if await check():
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"still not true after 10 s: {what}")


# --------------------------------------------------------------------------------------------------
# The common contract


async def test_satisfies_the_protocol(store: CheckpointStore) -> None:
    assert isinstance(store, CheckpointStore)


async def test_round_trip(store: CheckpointStore) -> None:
    await store.put("run-1", b'{"hello": "world"}')
    assert await store.get("run-1") == b'{"hello": "world"}'


async def test_overwrite_replaces_the_value(store: CheckpointStore) -> None:
    await store.put("run-1", b"first")
    await store.put("run-1", b"second, longer than the first")
    assert await store.get("run-1") == b"second, longer than the first"
    await store.put("run-1", b"3")
    assert await store.get("run-1") == b"3"


async def test_missing_id_gives_none(store: CheckpointStore) -> None:
    assert await store.get("never-written") is None


async def test_delete(store: CheckpointStore) -> None:
    await store.put("keep", b"k")
    await store.put("drop", b"d")
    await store.delete("drop")
    assert await store.get("drop") is None
    assert await store.get("keep") == b"k"
    await store.delete("drop")  # already gone: fine
    await store.delete("never-written")  # never there: fine
    await store.put("drop", b"again")  # the id is usable again
    assert await store.get("drop") == b"again"


async def test_empty_payload_is_not_missing(store: CheckpointStore) -> None:
    await store.put("empty", b"")
    assert await store.get("empty") == b""


async def test_binary_safe(store: CheckpointStore) -> None:
    every_byte = bytes(range(256)) * 4
    nuls = b"\x00" * 100 + b"middle\x00\x00end" + b"\x00"
    not_utf8 = b"\xff\xfe\xc3\x28\xa0\xa1\xe2\x82"
    for key, payload in (("all", every_byte), ("nul", nuls), ("bad-utf8", not_utf8)):
        await store.put(key, payload)
    assert await store.get("all") == every_byte
    assert await store.get("nul") == nuls
    assert await store.get("bad-utf8") == not_utf8


async def test_one_mib_payloads(store: CheckpointStore) -> None:
    big = os.urandom(MIB)
    await store.put("big", big)
    assert await store.get("big") == big
    bigger = b"\x00" * MIB + os.urandom(MIB)  # overwrite with a larger, NUL-heavy value
    await store.put("big", bigger)
    assert await store.get("big") == bigger


async def test_bytes_like_data_is_copied(store: CheckpointStore) -> None:
    buffer = bytearray(b"original")
    await store.put("buf", buffer)  # type: ignore[arg-type]  # accepted, though not in the protocol
    buffer[:] = b"mutated!"
    await store.put("view", memoryview(b"from a view"))  # type: ignore[arg-type]
    value = await store.get("buf")
    assert value == b"original"
    assert type(value) is bytes
    assert await store.get("view") == b"from a view"


async def test_fifty_concurrent_tasks(store: CheckpointStore) -> None:
    async def worker(n: int) -> None:
        key = f"task-{n}"
        first = f"{n}:first:".encode() * (n + 1)
        await store.put(key, first)
        assert await store.get(key) == first
        await store.put("shared", f"shared by {n}".encode() * 50)
        second = hashlib.sha256(first).digest() * 10
        await store.put(key, second)
        assert await store.get(key) == second
        assert await store.get("shared") is not None

    await asyncio.gather(*(worker(n) for n in range(50)))
    for n in range(50):
        first = f"{n}:first:".encode() * (n + 1)
        assert await store.get(f"task-{n}") == hashlib.sha256(first).digest() * 10
    # Whoever wrote last, the value is one whole write, never a mix of two.
    assert await store.get("shared") in {f"shared by {n}".encode() * 50 for n in range(50)}


async def test_concurrent_gets_while_writing(store: CheckpointStore) -> None:
    versions = [bytes([n]) * 4096 for n in range(20)]
    await store.put("hot", versions[0])

    async def writer() -> None:
        for version in versions[1:]:
            await store.put("hot", version)

    async def reader() -> list[bytes | None]:
        return [await store.get("hot") for _ in range(10)]

    readers = [asyncio.create_task(reader()) for _ in range(10)]
    await writer()
    seen = {value for values in await asyncio.gather(*readers) for value in values}
    assert seen <= set(versions)
    assert await store.get("hot") == versions[-1]


async def test_odd_ids(store: CheckpointStore) -> None:
    for n, key in enumerate(ODD_IDS):
        await store.put(key, f"value {n}".encode())
    for n, key in enumerate(ODD_IDS):
        assert await store.get(key) == f"value {n}".encode(), key
    await store.delete("a/b")
    assert await store.get("a/b") is None
    assert await store.get("a%2Fb") == f"value {ODD_IDS.index('a%2Fb')}".encode()
    assert await store.get("a") is None and await store.get("b") is None


@pytest.mark.parametrize(
    ("key", "error", "match"),
    [
        (123, TypeError, "must be a str"),
        (b"bytes", TypeError, "must be a str"),
        (None, TypeError, "must be a str"),
        ("", ValueError, "must not be empty"),
        ("a\x00b", ValueError, "NUL"),
        ("\ud800", ValueError, "surrogate"),
        ("x" * 1025, ValueError, "limit is 1024"),
        ("🙂" * 257, ValueError, "limit is 1024"),
    ],
)
async def test_bad_ids_are_refused_before_touching_anything(
    store: CheckpointStore, key: Any, error: type[Exception], match: str
) -> None:
    await store.put("existing", b"safe")
    with pytest.raises(error, match=match):
        await store.put(key, b"data")
    with pytest.raises(error, match=match):
        await store.get(key)
    with pytest.raises(error, match=match):
        await store.delete(key)
    assert await store.get("existing") == b"safe"


@pytest.mark.parametrize("data", ["text", None, 42, ["list"]])
async def test_non_bytes_data_is_refused_and_loses_nothing(
    store: CheckpointStore, data: Any
) -> None:
    await store.put("existing", b"safe")
    with pytest.raises(TypeError, match="must be bytes"):
        await store.put("existing", data)
    assert await store.get("existing") == b"safe"


async def test_persists_across_store_instances(backend: Backend) -> None:
    if not backend.persistent:
        pytest.skip("the in-memory store keeps nothing beyond its own instance")
    first = backend.make()
    await first.put("durable", b"written by the first store")
    await close(first)
    second = backend.make()
    assert await second.get("durable") == b"written by the first store"
    await second.put("durable", b"rewritten by the second")
    third = backend.make()
    assert await third.get("durable") == b"rewritten by the second"


@pytest.mark.filterwarnings("error::ResourceWarning")  # released by aclose, not by the GC
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
async def test_aclose_releases_and_the_next_call_reopens(backend: Backend) -> None:
    if backend.resources is None:
        pytest.skip("the in-memory store holds nothing to close")
    count = backend.resources
    baseline = await count()
    store = backend.make()
    await store.put("before", b"x")
    assert await count() > baseline
    await close(store)
    await close(store)  # idempotent
    await eventually(lambda: _equals(count(), baseline), f"{backend.name} released")
    assert await store.get("before") == b"x"  # opened again
    await close(store)
    await eventually(lambda: _equals(count(), baseline), f"{backend.name} released again")


@pytest.mark.filterwarnings("error::ResourceWarning")  # released by aclose, not by the GC
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
async def test_aclose_lets_operations_in_flight_finish(backend: Backend) -> None:
    """``aclose`` while other tasks' operations run (a server shutting down mid-request): they
    all succeed, and nothing is left open afterwards — no "pool is closing", no socket that only
    the garbage collector would close."""
    if backend.resources is None:
        pytest.skip("the in-memory store holds nothing to close")
    count = backend.resources
    baseline = await count()
    store = backend.make()
    payload = os.urandom(200_000)
    await store.put("k", payload)
    for _ in range(3):
        gets = [asyncio.ensure_future(store.get("k")) for _ in range(20)]
        await asyncio.sleep(0)  # they have started
        await close(store)
        assert await asyncio.gather(*gets) == [payload] * 20
        await eventually(lambda: _equals(count(), baseline), f"{backend.name} released")
    await close(store)


async def _equals(value: Awaitable[int], expected: int) -> bool:
    return await value == expected


def test_closed_at_the_end_of_each_event_loop(backend: Backend) -> None:
    """A long-lived store used by several ``asyncio.run`` calls, closed at the end of each."""
    store = backend.make()

    async def use(value: bytes) -> bytes | None:
        try:
            await store.put("loops", value)
            return await store.get("loops")
        finally:
            await close(store)

    assert asyncio.run(use(b"first loop")) == b"first loop"
    assert asyncio.run(use(b"second loop")) == b"second loop"


@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_new_event_loop_works_even_without_close(backend: Backend) -> None:
    """Not closed before its loop ended, a store still works in the next loop (the first loop's
    connections were closed as it ended: see test_each_asyncio_run_closes_what_it_opened)."""
    store = backend.factory()

    async def use(store: CheckpointStore, value: bytes, *, close_after: bool) -> bytes | None:
        await store.put("loops", value)
        try:
            return await store.get("loops")
        finally:
            if close_after:
                await close(store)

    assert asyncio.run(use(store, b"first loop", close_after=False)) == b"first loop"
    assert asyncio.run(use(store, b"second loop", close_after=True)) == b"second loop"
    del store
    gc.collect()  # anything left to the collector warns here, in this test


NETWORK = ("redis", "postgres")
"""Backends whose connections belong to the event loop that opened them (SQLite's worker thread
serves every loop alike and is the store's until ``aclose``)."""


def _loop_connections(backend: Backend) -> tuple[Callable[[], Awaitable[int]], int]:
    """How to count ``backend``'s open connections, and their count before a test opens any;
    skips the backends that hold none of an event loop (not in ``NETWORK``)."""
    if backend.name not in NETWORK:
        pytest.skip(f"the {backend.name} store holds no connections of an event loop")
    count = backend.resources
    assert count is not None
    return count, asyncio.run(count())


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_each_asyncio_run_closes_what_it_opened(backend: Backend) -> None:
    """One store shared by ``asyncio.run`` per request (a sync web framework, a script, a Celery
    task) and never closed: each loop's connections close as that loop ends. They stayed open
    until the garbage collector freed them (one more Redis connection per request, a
    ResourceWarning for each socket)."""
    count, baseline = _loop_connections(backend)
    store = backend.factory()

    async def request(value: bytes) -> bytes | None:
        await store.put("loops", value)
        return await store.get("loops")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for n in range(3):
            assert asyncio.run(request(b"request %d" % n)) == b"request %d" % n
            asyncio.run(eventually(lambda: _equals(count(), baseline), f"request {n} closed"))
        gc.collect()  # anything left to the collector warns now
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []


@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_one_store_serves_event_loops_in_several_threads_at_once(backend: Backend) -> None:
    """A sync server's worker threads, each running its requests in ``asyncio.run``, share one
    store: every operation goes through its own loop's connections, and each loop's close as it
    ends. A store with one client (or pool) for every loop swapped it between the threads: Redis
    left a connection pool per swap open, and PostgreSQL terminated the pool another thread's
    operations were using ("pool is closed")."""
    count, baseline = _loop_connections(backend)
    store = backend.factory()
    threads = 3
    together = threading.Barrier(threads)  # every thread's loop is using the store at once
    errors: list[BaseException] = []

    async def requests(worker: int) -> None:
        for n in range(10):
            value = b"worker %d request %d" % (worker, n)
            await store.put(f"worker-{worker}", value)
            if n == 0:
                await asyncio.to_thread(together.wait, 30)
            assert await store.get(f"worker-{worker}") == value

    def serve(worker: int) -> None:
        try:
            asyncio.run(requests(worker))
        except BaseException as exc:
            errors.append(exc)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        workers = [threading.Thread(target=serve, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert errors == []
        asyncio.run(eventually(lambda: _equals(count(), baseline), "every loop's closed"))
        gc.collect()
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []


# --------------------------------------------------------------------------------------------------
# Backends that are down or unusable


def assert_names(error: CheckpointStoreError, backend: str, operation: str, key: str) -> None:
    message = str(error)
    assert error.backend == backend and backend in message
    assert error.operation == operation and operation in message
    assert error.checkpoint_id == key and repr(key) in message
    assert error.__cause__ is not None


async def check_down(store: CheckpointStore, backend: str, secret: str | None = None) -> None:
    for operation in ("get", "put", "delete"):
        key = f"id-for-{operation}"
        call = store.put(key, b"x") if operation == "put" else getattr(store, operation)(key)
        with pytest.raises(CheckpointStoreError) as caught:
            await call
        assert_names(caught.value, backend, operation, key)
        if secret is not None:
            assert secret not in str(caught.value)


async def test_redis_down() -> None:
    store = RedisCheckpointStore(f"redis://:s3cret-pw@127.0.0.1:{closed_port()}/0")
    try:
        await check_down(store, "redis", secret="s3cret-pw")
    finally:
        await store.aclose()


async def test_postgres_down() -> None:
    store = PostgresCheckpointStore(f"postgresql://u:s3cret-pw@127.0.0.1:{closed_port()}/db")
    try:
        await check_down(store, "postgres", secret="s3cret-pw")
    finally:
        await store.aclose()


@pytest.mark.parametrize("dsn", ["postgresql://127.0.0.1:notaport/db"])
async def test_postgres_malformed_dsn(dsn: str) -> None:
    store = PostgresCheckpointStore(dsn)
    with pytest.raises(CheckpointStoreError) as caught:
        await store.get("id")
    assert_names(caught.value, "postgres", "get", "id")
    await store.aclose()


async def test_sqlite_path_that_cannot_be_opened(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    for path in (tmp_path / "a-file" / "sub" / "cp.db", tmp_path):  # parent is a file; a directory
        store = SQLiteCheckpointStore(path)
        try:
            await check_down(store, "sqlite")
        finally:
            await store.aclose()


async def test_sqlite_refuses_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"my precious notes, not a database\n" * 100)
    before = path.read_bytes()
    store = SQLiteCheckpointStore(path)
    with pytest.raises(CheckpointStoreError, match="not a database") as caught:
        await store.put("id", b"data")
    assert_names(caught.value, "sqlite", "put", "id")
    await store.aclose()
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("dsn", "hint"),
    [
        # SQLAlchemy's URLs, which LangChain and LangGraph setups share as DATABASE_URL
        ("postgresql+psycopg://u:s3cret-pw@db/x", "'+psycopg'"),
        ("postgresql+asyncpg://u:s3cret-pw@db/x", "'+asyncpg'"),
        # libpq's key=value form, which psycopg (LangGraph's PostgresSaver) takes
        ("host=db user=u password=s3cret-pw dbname=x", "key=value"),
        ("mysql://u:s3cret-pw@127.0.0.1/db", "got 'mysql'"),
        # a URL whose scheme was left off (the password was shown whole)
        ("u:s3cret-pw@db:5432/x", "no scheme:// before"),
        ("//u:s3cret-pw@db:5432/x", "no scheme:// before"),
    ],
)
def test_postgres_refuses_a_dsn_of_another_form_when_made(dsn: str, hint: str) -> None:
    """asyncpg takes only a postgresql:// URL, and reads it only as it connects: such a DSN
    failed at the store's first operation, the first run's pause, after its work (the run lost,
    with 'could not save checkpoint'). Refused when the store is made, as a Redis URL that is not
    one is, saying what to write instead, the password hidden."""
    with pytest.raises(ValueError) as caught:
        PostgresCheckpointStore(dsn)
    message = str(caught.value)
    assert 'scheme is expected to be either "postgresql" or "postgres"' in message
    assert hint in message and "postgresql://" in message and "s3cret-pw" not in message


def test_redis_rejects_a_bad_url() -> None:
    with pytest.raises(ValueError):
        RedisCheckpointStore("http://127.0.0.1:6379")


@pytest.mark.parametrize("ttl", [0, -1, float("nan"), float("inf")])
def test_redis_rejects_a_bad_ttl(ttl: float) -> None:
    with pytest.raises(ValueError, match="ttl"):
        RedisCheckpointStore("redis://127.0.0.1:6379", ttl=ttl)


@pytest.mark.parametrize(
    "table", ["", "1abc", "bad-name", 'x"; DROP TABLE y; --', "a.b.c", "with space", "a" * 64]
)
def test_postgres_rejects_a_bad_table_name(table: str) -> None:
    with pytest.raises(ValueError, match="invalid table name"):
        PostgresCheckpointStore("postgresql://127.0.0.1/db", table=table)


# --------------------------------------------------------------------------------------------------
# SQLite specifics


async def test_sqlite_creates_parent_directories_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "cp.db"
    store = SQLiteCheckpointStore(path)
    await store.put("id", b"data")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("SELECT data FROM pyadk_checkpoints WHERE id = 'id'").fetchone() == (
            b"data",
        )
    await store.aclose()


def test_sqlite_kept_out_of_wal_says_so_and_the_file_still_works(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite keeps the rollback journal, without an error, where WAL cannot work: a VFS
    without shared memory (here SQLite's own ``unix-none``, which ``nolock=1`` selects; a
    filesystem whose locks it cannot use is run so). The store said nothing, while readers then
    wait for writers (``busy_timeout``) where the docs promise they do not: it is logged once,
    naming the file and the mode SQLite kept. Durability is unchanged (``synchronous=FULL``)."""
    path = tmp_path / "cp.db"
    conn = sqlite3.connect(f"{path.as_uri()}?nolock=1", uri=True, isolation_level=None)
    try:
        with caplog.at_level("WARNING", logger="adk.checkpoint"):
            _use_wal(conn, 1.0, str(path))
        (record,) = [r for r in caplog.records if r.name == "adk.checkpoint"]
        message = record.getMessage()
        assert f"SQLite kept {path} in journal_mode=delete" in message, message
        assert "readers wait for writers" in message
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES (1)")
        assert conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    finally:
        conn.close()
    caplog.clear()
    with caplog.at_level("WARNING", logger="adk.checkpoint"):
        _open_connection(str(tmp_path / "wal.db"), 1.0).close()  # WAL taken: nothing said
    assert [r for r in caplog.records if r.name == "adk.checkpoint"] == []


def test_sqlite_stores_opening_a_new_file_together_all_open_it(tmp_path: Path) -> None:
    """Connections opening a new file at once (stores of several processes, or the two of
    test_new_run_ids' race) all open it. The switch to WAL that meets another connection's gets
    SQLITE_BUSY at once, without waiting the busy timeout: about one opening in sixty failed,
    and with it the store's first call ('put of checkpoint ... failed: database is locked')."""
    failures: list[BaseException] = []
    for round_ in range(150):
        path = str(tmp_path / f"new{round_}.db")
        together = threading.Barrier(4)

        def open_it(path: str = path, together: threading.Barrier = together) -> None:
            together.wait()
            try:
                _open_connection(path, 30.0).close()
            except BaseException as exc:
                failures.append(exc)

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []


async def test_sqlite_store_opened_while_another_holds_the_write_lock_reads(
    tmp_path: Path,
) -> None:
    """A store (another process's, or one reopened after ``aclose``) opening a file whose table
    is there reads it while another connection holds a write transaction, as WAL lets readers.
    Its table was made under ``BEGIN IMMEDIATE`` on every opening, taking the write lock even
    when the table was there: the get waited out ``busy_timeout`` and failed ('database is
    locked')."""
    path = tmp_path / "checkpoints.db"
    async with SQLiteCheckpointStore(path) as store:
        await store.put("paused", b"checkpoint")
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")  # another process's long write, in progress
        try:
            async with SQLiteCheckpointStore(path, busy_timeout=0.5) as reader:
                assert await reader.get("paused") == b"checkpoint"
                assert [key async for key in reader.ids()] == ["paused"]
        finally:
            other.execute("ROLLBACK")
    finally:
        other.close()


async def test_sqlite_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = SQLiteCheckpointStore(":memory:")
    await store.put("id", b"data")
    assert await store.get("id") == b"data"
    await store.aclose()
    assert await asyncio.to_thread(os.listdir, tmp_path) == []  # no file named ":memory:"


async def test_sqlite_in_memory_keeps_its_checkpoints_across_aclose() -> None:
    """The database lasts as long as the store: ``aclose`` stops the thread, not the data."""
    before = set(_sqlite_workers())
    store = SQLiteCheckpointStore(":memory:")
    await store.put("paused", b"checkpoint")
    # The store's own worker, found by name among those started since: counting every worker
    # against a count taken before failed when an earlier test's worker ended meanwhile.
    (worker,) = set(_sqlite_workers()) - before
    await store.aclose()
    await eventually(_stopped(worker), "the worker thread stopped")
    assert await store.get("paused") == b"checkpoint"
    await store.put("second", b"two")
    await store.aclose()
    assert [await store.get("paused"), await store.get("second")] == [b"checkpoint", b"two"]
    await store.aclose()
    assert await SQLiteCheckpointStore(":memory:").get("paused") is None  # each store its own


def test_sqlite_in_memory_is_kept_across_event_loops() -> None:
    store = SQLiteCheckpointStore(":memory:")

    async def put_then_close() -> None:
        await store.put("k", b"from the first loop")
        await store.aclose()

    async def get_then_close() -> bytes | None:
        try:
            return await store.get("k")
        finally:
            await store.aclose()

    asyncio.run(put_then_close())
    assert asyncio.run(get_then_close()) == b"from the first loop"


@dataclass
class Fault:
    """Interrupt the real SQLite connection while it runs the statement starting with
    ``statement`` (SQLite aborts the statement with "interrupted"), once, when armed."""

    statement: str
    armed: bool = False
    fired: int = 0

    def install(self, conn: sqlite3.Connection) -> None:
        current = [""]
        conn.set_trace_callback(lambda sql: current.__setitem__(0, sql))

        def progress() -> int:
            if self.armed and current[0].startswith(self.statement):
                self.armed = False
                self.fired += 1
                return 1
            return 0

        conn.set_progress_handler(progress, 1)


def faulty_sqlite_store(path: Path, fault: Fault) -> SQLiteCheckpointStore:
    class FaultyStore(SQLiteCheckpointStore):
        @staticmethod
        def _connect(path: str, busy_timeout: float) -> sqlite3.Connection:
            conn = SQLiteCheckpointStore._connect(path, busy_timeout)
            fault.install(conn)
            return conn

    return FaultyStore(path)


@pytest.mark.parametrize("statement", ["INSERT", "COMMIT"])
async def test_sqlite_failed_write_keeps_the_previous_value(tmp_path: Path, statement: str) -> None:
    path = tmp_path / "cp.db"
    fault = Fault(statement)
    store = faulty_sqlite_store(path, fault)
    previous = os.urandom(MIB)
    await store.put("run", previous)

    fault.armed = True
    with pytest.raises(CheckpointStoreError, match="interrupted") as caught:
        await store.put("run", os.urandom(MIB))
    assert fault.fired == 1
    assert_names(caught.value, "sqlite", "put", "run")

    # Intact on disk (seen by another connection) and through the same store, which still works:
    # an interrupted COMMIT leaves SQLite's transaction open, and the store must roll it back.
    other = SQLiteCheckpointStore(path)
    assert await other.get("run") == previous
    assert await store.get("run") == previous
    await store.put("next", b"later write")
    assert await other.get("next") == b"later write"
    assert await other.get("run") == previous
    await store.aclose()
    await other.aclose()


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )


async def test_sqlite_shared_with_a_subprocess(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    store = SQLiteCheckpointStore(path)
    await store.put("from-parent", b"\x00parent\xff")
    child = run_python(
        "import asyncio, sys\n"
        "from adk.checkpoint import SQLiteCheckpointStore\n"
        "async def main():\n"
        "    store = SQLiteCheckpointStore(sys.argv[1])\n"
        "    got = await store.get('from-parent')\n"
        "    await store.put('from-child', b'child saw ' + got)\n"
        "    await store.aclose()\n"
        "asyncio.run(main())\n",
        str(path),
    )
    assert child.returncode == 0, child.stderr
    assert await store.get("from-child") == b"child saw \x00parent\xff"
    await store.aclose()


WRITER = """
import asyncio, sys
from adk.checkpoint import SQLiteCheckpointStore
async def main():
    store = SQLiteCheckpointStore(sys.argv[1], busy_timeout=60)
    name = sys.argv[2]
    for i in range(40):
        await store.put(f"{name}-{i}", f"{name}:{i}".encode() * 100)
        assert await store.get(f"{name}-{i}") == f"{name}:{i}".encode() * 100
    await store.aclose()
asyncio.run(main())
"""


async def test_sqlite_several_processes_write_at_once(tmp_path: Path) -> None:
    path = tmp_path / "busy.db"
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", WRITER, str(path), f"proc{n}",
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            stderr=asyncio.subprocess.PIPE,
        )
        for n in range(3)
    ]  # fmt: skip
    store = SQLiteCheckpointStore(path)
    for i in range(40):
        await store.put(f"parent-{i}", b"p" * 1000)
    results = [await child.communicate() for child in children]
    for child, (_, stderr) in zip(children, results, strict=True):
        assert child.returncode == 0, stderr.decode()
    for n in range(3):
        for i in range(40):
            assert await store.get(f"proc{n}-{i}") == f"proc{n}:{i}".encode() * 100
    await store.aclose()


CRASHER = """
import asyncio, hashlib, os, sys
from adk.checkpoint import SQLiteCheckpointStore
async def main():
    store = SQLiteCheckpointStore(sys.argv[1])
    seq = 0
    while True:
        body = os.urandom(1 << 20)
        await store.put("crash", seq.to_bytes(8, "big") + hashlib.sha256(body).digest() + body)
        seq += 1
        if seq == 3:
            print("ready", flush=True)
asyncio.run(main())
"""


async def test_sqlite_survives_a_kill_mid_write(tmp_path: Path) -> None:
    """A process killed (SIGKILL) while writing 1 MiB checkpoints in a loop leaves one whole
    checkpoint behind, never a torn one."""
    path = tmp_path / "crash.db"
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CRASHER, str(path),
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout is not None
    line = await child.stdout.readline()
    if line != b"ready\n":
        _, stderr = await child.communicate()
        pytest.fail(f"writer did not start: {stderr.decode()}")
    child.kill()  # it is writing the next checkpoint now
    await child.wait()

    store = SQLiteCheckpointStore(path)
    value = await store.get("crash")
    assert value is not None
    seq, digest, body = int.from_bytes(value[:8], "big"), value[8:40], value[40:]
    assert seq >= 2
    assert len(body) == MIB and hashlib.sha256(body).digest() == digest
    await store.aclose()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# --------------------------------------------------------------------------------------------------
# Redis and PostgreSQL: a real network in between


class Proxy:
    """A TCP proxy in front of a real server, to break the connection the way networks do.

    ``cut_after(n)``: forward ``n`` more bytes towards the server, then drop every connection and
    refuse new ones — the server is gone in the middle of a request.
    ``drop_idle()``: the connections open now die (unforwarded) the next time the client sends on
    them; new connections work — stale pooled connections after a restart or a NAT timeout.
    ``freeze()``: nothing is forwarded any more, but every socket stays open and new ones are
    accepted — a server that stopped answering (a stopped process, a partition dropping packets);
    ``thaw()`` ends that.
    ``hold_closes()``: a connection the server closes stays open towards the client, which gets
    the server's last words (PostgreSQL's "terminating connection" notice) but not the close,
    as when the close is still on its way; ``server_closed`` is set once a link was so held.
    ``pass_closes()`` ends that for the closes to come (one held already stays held).
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._budget: int | None = None
        self._refusing = False
        self._thawed = asyncio.Event()
        self._thawed.set()
        self._links: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self._doomed: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._holding = False
        self.server_closed = asyncio.Event()

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        self._abort_all()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def cut_after(self, nbytes: int) -> None:
        self._budget = nbytes

    def freeze(self) -> None:
        self._thawed.clear()

    def thaw(self) -> None:
        self._thawed.set()

    def drop_idle(self) -> None:
        self._doomed = {client for client, _ in self._links}

    def hold_closes(self) -> None:
        self._holding = True

    def pass_closes(self) -> None:
        self._holding = False

    def upstream_ports(self) -> list[int]:
        """The local ports of the connections to the server (its ``client_port``s)."""
        return [upstream.get_extra_info("sockname")[1] for _, upstream in self._links]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            writer.transport.abort()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        self._links.append((writer, up_writer))
        for coro in (self._pump(reader, up_writer, writer), self._pump(up_reader, writer, None)):
            task = asyncio.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        client: asyncio.StreamWriter | None,
    ) -> None:
        """Copy bytes; ``client`` is set on the client-to-server direction, the one we cut."""
        try:
            while chunk := await reader.read(65536):
                await self._thawed.wait()
                if client is not None and client in self._doomed:
                    self._abort_link(client)
                    return
                if client is not None and self._budget is not None:
                    if len(chunk) >= self._budget:
                        writer.write(chunk[: self._budget])
                        await writer.drain()
                        self._refusing = True
                        self._abort_all()
                        return
                    self._budget -= len(chunk)
                writer.write(chunk)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if client is None and self._holding:
                self.server_closed.set()  # the client's side stays open (``_abort_all`` ends it)
            elif not writer.transport.is_closing():
                writer.close()

    def _abort_link(self, client: asyncio.StreamWriter) -> None:
        for link in self._links:
            if link[0] is client:
                for side in link:
                    side.transport.abort()

    def _abort_all(self) -> None:
        for link in self._links:
            for side in link:
                side.transport.abort()


@pytest.fixture
def network_store(
    request: pytest.FixtureRequest,
) -> Callable[..., tuple[CheckpointStore, int]]:
    """``make(port, **options)`` builds a store of the requested kind talking to ``port`` (None:
    the real server's); returns it and the real server's port."""
    kind: str = request.param
    unique = uuid.uuid4().hex[:12]
    if kind == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")

        def make(port: int | None, **options: Any) -> tuple[CheckpointStore, int]:
            url = f"redis://127.0.0.1:{port or redis_server.port}/0"
            return RedisCheckpointStore(url, prefix=f"n{unique}:", **options), redis_server.port

        return make
    pg: PostgresServer = request.getfixturevalue("postgres_server")

    def make_pg(port: int | None, **options: Any) -> tuple[CheckpointStore, int]:
        dsn = f"postgresql://postgres@127.0.0.1:{port or pg.port}/postgres"
        return PostgresCheckpointStore(dsn, table=f"net_{unique}", **options), pg.port

    return make_pg


@pytest.mark.parametrize("network_store", ["redis", "postgres"], indirect=True)
async def test_connection_cut_mid_write_keeps_the_previous_value(
    network_store: Callable[[int | None], tuple[CheckpointStore, int]],
) -> None:
    direct, server_port = network_store(None)
    async with Proxy(server_port) as proxy:
        proxied, _ = network_store(proxy.port)
        previous = os.urandom(MIB)
        await proxied.put("run", previous)
        proxy.cut_after(64 * 1024)  # the server gets the first 64 KiB of the next 1 MiB write
        with pytest.raises(CheckpointStoreError) as caught:
            await proxied.put("run", os.urandom(MIB))
        backend = "redis" if isinstance(proxied, RedisCheckpointStore) else "postgres"
        assert_names(caught.value, backend, "put", "run")
        await close(proxied)
    assert await direct.get("run") == previous
    await close(direct)


@pytest.mark.parametrize("network_store", ["redis", "postgres"], indirect=True)
async def test_stale_connections_are_replaced(
    network_store: Callable[[int | None], tuple[CheckpointStore, int]],
) -> None:
    direct, server_port = network_store(None)
    async with Proxy(server_port) as proxy:
        proxied, _ = network_store(proxy.port)
        await proxied.put("run", b"before")
        proxy.drop_idle()  # every open connection dies when next used
        await proxied.put("run", b"after")  # retried on a fresh connection
        assert await proxied.get("run") == b"after"
        await close(proxied)
    assert await direct.get("run") == b"after"
    await close(direct)


@pytest.mark.parametrize("network_store", ["redis", "postgres"], indirect=True)
async def test_a_server_that_stops_answering_is_a_timeout_not_a_hang(
    network_store: Callable[..., tuple[CheckpointStore, int]],
) -> None:
    """Every operation fails within ``timeout`` with ``CheckpointStoreError``; cancelling one
    returns at once; ``aclose`` ends too; once the server answers again, the store works."""
    _, server_port = network_store(None)
    async with Proxy(server_port) as proxy:
        store, _ = network_store(proxy.port, timeout=0.5)
        backend = "redis" if isinstance(store, RedisCheckpointStore) else "postgres"
        assert isinstance(store, ClaimingCheckpointStore)
        await store.put("run", b"before")
        proxy.freeze()
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "get": lambda: store.get("run"),
            "put": lambda: store.put("run", b"lost"),
            "delete": lambda: store.delete("run"),
            "claim": lambda: store.claim("run", "me"),
            "release": lambda: store.release("run", "me"),
        }
        for operation, call in calls.items():
            started = time.monotonic()
            with pytest.raises(CheckpointStoreError, match=r"no answer within 0\.5 s") as caught:
                await call()
            assert time.monotonic() - started < 3, operation
            assert_names(caught.value, backend, operation, "run")

        pending = asyncio.ensure_future(store.get("run"))
        await asyncio.sleep(0.1)
        pending.cancel()
        started = time.monotonic()
        with pytest.raises(asyncio.CancelledError):
            await pending
        assert (
            time.monotonic() - started < 0.3
        )  # a cancelled operation does not wait for the server

        started = time.monotonic()
        await close(store)
        assert time.monotonic() - started < 3
        proxy.thaw()
        assert await store.get("run") in {b"before", b"lost"}  # reopened: answers again
        await close(store)


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), "10"])
def test_network_stores_reject_a_bad_timeout(timeout: Any) -> None:
    with pytest.raises(ValueError, match="timeout"):
        RedisCheckpointStore("redis://127.0.0.1:6379", timeout=timeout)
    with pytest.raises(ValueError, match="timeout"):
        PostgresCheckpointStore("postgresql://127.0.0.1/db", timeout=timeout)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pa/ss@host:6379/0", "redis://***@host:6379/0"),
        ("redis://user:pa?ss@host/0", "redis://***@host/0"),
        ("redis://user:pa#ss@host/0", "redis://***@host/0"),
        (
            "postgresql://u:a/b?c#d@db:5432/x?password=pw2",
            "postgresql://***@db:5432/x?password=***",
        ),
        ("postgresql://u:p@ss@db/x", "postgresql://u:***@db/x"),
        ("postgresql://u:pass@db/x?sslmode=require", "postgresql://u:***@db/x?sslmode=require"),
        ("redis://db:6379/0", "redis://db:6379/0"),
        ("host=db password=pass user=u", "host=db password=*** user=u"),
        ("u:pass@db:5432/x", "***@db:5432/x"),  # no scheme
        ("//u:pass@db:5432/x", "//u:***@db:5432/x"),
        ("postgresql:/u:pa/ss@db/x", "***@db/x"),
        ("u:p@ss=w=rd@db/x", "***@db/x"),
        ("host=db user=me@corp password=pass", "host=db user=me@corp password=***"),
        # The SSL key's passphrase (libpq's and asyncpg's sslpassword), in either form.
        (
            "postgresql://u@db/x?sslkey=/k.pem&sslpassword=kp&sslmode=verify-full",
            "postgresql://u@db/x?sslkey=/k.pem&sslpassword=***&sslmode=verify-full",
        ),
        ("host=db sslpassword=kp user=u", "host=db sslpassword=*** user=u"),
        ("host=db sslpassword = 'k p' user=u", "host=db sslpassword = *** user=u"),
        # No host: the URL as given, not 'unix:/tmp/redis.sock', which is not what was typed.
        ("unix:///tmp/redis.sock?db=0", "unix:///tmp/redis.sock?db=0"),
        ("unix://:pw@/tmp/redis.sock", "unix://:***@/tmp/redis.sock"),
        ("///tmp/redis.sock", "///tmp/redis.sock"),
        (
            "postgresql:///x?host=/run/postgresql&password=pw",
            "postgresql:///x?host=/run/postgresql&password=***",
        ),
    ],
)
def test_passwords_never_show_in_messages(url: str, shown: str) -> None:
    assert _redact(url) == shown


async def test_redis_prefix_and_ttl(redis_server: RedisServer) -> None:
    raw = aioredis.Redis.from_url(redis_server.url)
    plain = RedisCheckpointStore(redis_server.url, prefix="plain:")
    expiring = RedisCheckpointStore(redis_server.url, prefix="exp:", ttl=120)
    try:
        await plain.put("a/b", b"x")
        await expiring.put("a/b", b"y")
        assert await raw.get("plain:a/b") == b"x"
        assert await raw.get("exp:a/b") == b"y"
        assert await raw.pttl("plain:a/b") == -1  # no expiry
        assert 0 < await raw.pttl("exp:a/b") <= 120_000
        await raw.pexpire("exp:a/b", 50_000)
        await expiring.put("a/b", b"z")  # every put starts the TTL again
        assert 50_000 < await raw.pttl("exp:a/b") <= 120_000
    finally:
        await plain.aclose()
        await expiring.aclose()
        await raw.aclose()


async def test_redis_refuses_to_return_decoded_text(redis_server: RedisServer) -> None:
    store = RedisCheckpointStore(redis_server.url + "?decode_responses=True", prefix="dec:")
    await store.put("id", b"bytes")
    with pytest.raises(CheckpointStoreError, match="text instead of bytes"):
        await store.get("id")
    await store.aclose()


@pytest.fixture
async def pg_admin(postgres_server: PostgresServer) -> AsyncIterator[Any]:
    conn = await asyncpg.connect(postgres_server.dsn)
    yield conn
    await conn.close()


async def test_postgres_failure_inside_the_transaction_keeps_the_previous_value(
    postgres_server: PostgresServer, pg_admin: Any
) -> None:
    """The new row version is written, then the transaction fails before commit (an AFTER
    trigger raising, as a full disk or a constraint would): the old row stays."""
    table = f"trig_{uuid.uuid4().hex[:12]}"
    store = PostgresCheckpointStore(postgres_server.dsn, table=table)
    await store.put("run", b"previous")
    await pg_admin.execute(
        f"CREATE FUNCTION {table}_fail() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'simulated failure after the write'; END $$; "
        f'CREATE TRIGGER fail AFTER UPDATE ON "{table}" FOR EACH ROW '
        f"EXECUTE FUNCTION {table}_fail()"
    )
    with pytest.raises(CheckpointStoreError, match="simulated failure") as caught:
        await store.put("run", b"new value")
    assert_names(caught.value, "postgres", "put", "run")
    assert await pg_admin.fetchval(f'SELECT data FROM "{table}" WHERE id = $1', "run") == (
        b"previous"
    )
    assert await store.get("run") == b"previous"
    await store.aclose()


async def _end_the_pooled_session(proxy: Proxy, pg_admin: Any) -> None:
    """The server ends the store's one pooled session through ``proxy``, which holds the close
    back so that the server's notice reaches the client first, and waits until it has."""
    proxy.hold_closes()
    ended = await pg_admin.fetchval(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE client_port = ANY($1::int[])",
        proxy.upstream_ports(),
    )
    assert ended == 1
    await proxy.server_closed.wait()
    await asyncio.sleep(0.1)  # the notice is read (no assertion on time: a wait)


async def test_postgres_session_ended_while_pooled_is_retried_on_a_fresh_connection(
    postgres_server: PostgresServer, pg_admin: Any
) -> None:
    """The server ends a pooled connection's session (a restart, a failover,
    pg_terminate_backend) and its notice reaches the client before the socket's close does (the
    proxy holds the close back, so that moment lasts). asyncpg then refuses the next statement
    with InternalClientError ("cannot switch to state 11; another operation (2) is in
    progress"), which the store neither retried nor reported as a CheckpointStoreError: a resume
    right after a database restart failed with asyncpg's internal error."""
    table = f"ended_{uuid.uuid4().hex[:12]}"
    async with Proxy(postgres_server.port) as proxy:
        dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
        store = PostgresCheckpointStore(dsn, table=table, max_size=1)
        await store.put("run", b"before")
        await _end_the_pooled_session(proxy, pg_admin)
        assert await store.get("run") == b"before"  # on a fresh connection
        await store.put("run", b"after")
        assert await store.get("run") == b"after"
        # The fresh connection's close reaches the store again: held back, it made the store's
        # aclose wait out its whole timeout (10 s) for the server to end the session.
        proxy.pass_closes()
        await store.aclose()


async def test_postgres_session_ended_after_a_statement_ran_keeps_its_outcome(
    postgres_server: PostgresServer, pg_admin: Any
) -> None:
    """The server ends the session (a restart, a failover) after the operation's statement ran,
    before the connection went back to the pool: asyncpg's reset of it on release then fails
    (InternalClientError, "cannot switch to state 15; another operation (2) is in progress";
    seen by listing a store while PostgreSQL restarted). That failure came out of the
    ``async with pool.acquire()`` around the statement, so a put that had committed (or a get
    that had its row) was reported failed: a pause saved, told "could not save checkpoint"."""
    table = f"after_{uuid.uuid4().hex[:12]}"
    async with Proxy(postgres_server.port) as proxy:
        dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
        store = PostgresCheckpointStore(dsn, table=table, max_size=1)
        await store.put("run", b"before")

        async def put_then_session_ends(conn: Any) -> str:
            await conn.execute(store._put_sql, "run", b"after")  # committed
            await _end_the_pooled_session(proxy, pg_admin)
            return "written"

        assert await store._call("put", "run", put_then_session_ends) == "written"
        assert await store.get("run") == b"after"  # on a fresh connection
        proxy.pass_closes()
        await store.aclose()


async def test_postgres_server_silent_after_a_statement_ran_keeps_its_outcome(
    postgres_server: PostgresServer,
) -> None:
    """The server stops answering (a partition, a stopped process) after the operation's statement
    ran and its answer arrived, before the connection went back to the pool: asyncpg's reset of
    it on release then waits, and the operation's deadline ended that wait as a timeout, so a put
    that had committed (a claim that was taken) was reported failed, 'no answer within'."""
    table = f"silent_{uuid.uuid4().hex[:12]}"
    async with Proxy(postgres_server.port) as proxy:
        dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
        store = PostgresCheckpointStore(dsn, table=table, max_size=1, timeout=0.5)
        await store.put("run", b"before")

        async def put_then_server_silent(conn: Any) -> str:
            await conn.execute(store._put_sql, "run", b"after")  # committed, answered
            proxy.freeze()
            return "written"

        assert await store._call("put", "run", put_then_server_silent) == "written"
        proxy.thaw()
        assert await store.get("run") == b"after"
        await store.aclose()


async def test_postgres_release_with_no_time_left_drops_the_connection_quietly(
    postgres_server: PostgresServer,
) -> None:
    """The operation's deadline is due (not yet fired) as the connection goes back: it is dropped
    unreset, also when it was terminated already (a cancelled statement, a session the server
    ended), whose proxy asyncpg has detached and whose ``terminate()`` would raise 'released
    back to the pool' in place of the operation's own error."""
    pool = await asyncpg.create_pool(postgres_server.dsn, min_size=0, max_size=1)
    try:
        for terminated in (True, False):
            conn = await pool.acquire()
            if terminated:
                conn.terminate()
            loop = asyncio.get_running_loop()
            async with asyncio.timeout_at(loop.time() - 1) as deadline:
                await _release(pool, conn, deadline)  # no await before: the deadline has not fired
            async with pool.acquire(timeout=5) as fresh:  # the one connection is back
                assert await fresh.fetchval("SELECT 1") == 1
    finally:
        await pool.close()


async def test_the_read_only_postgres_store_logs_no_connection_floor_to_restore(
    postgres_server: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """``pyadk checkpoint``'s store (read-only) while PostgreSQL restarts: asyncpg's pool, kept
    at one open connection, made it again in the background once the server ended it, and
    logged each failed try, "Failed to restore the pool connection floor; retrying" with its
    traceback, on the command's stderr before its own error. A command that reads a few pages
    keeps no connection open for later: its next statement connects."""
    table = f"floor_{uuid.uuid4().hex[:12]}"
    made = PostgresCheckpointStore(postgres_server.dsn, table=table)
    await made.put("run", b"data")
    await made.aclose()
    async with Proxy(postgres_server.port) as proxy:
        dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
        store = _ReadOnlyPostgresStore(dsn, table)
        assert await store.get("run") == b"data"
        with caplog.at_level(logging.WARNING, logger="asyncpg"):
            proxy._refusing = True  # the server is restarting: connections end, new ones fail
            proxy._abort_all()
            with pytest.raises(CheckpointStoreError):
                await store.get("run")
            await store.aclose()
    assert "connection floor" not in caplog.text


async def test_postgres_schema_qualified_table(
    postgres_server: PostgresServer, pg_admin: Any
) -> None:
    schema = f"s_{uuid.uuid4().hex[:12]}"
    await pg_admin.execute(f"CREATE SCHEMA {schema}")
    store = PostgresCheckpointStore(postgres_server.dsn, table=f"{schema}.Checkpoints")
    await store.put("id", b"data")
    row = await pg_admin.fetchrow(f'SELECT id, data FROM {schema}."Checkpoints"')
    assert tuple(row) == ("id", b"data")
    await store.aclose()


async def test_postgres_many_stores_create_one_table_at_once(
    postgres_server: PostgresServer,
) -> None:
    table = f"race_{uuid.uuid4().hex[:12]}"
    stores = [PostgresCheckpointStore(postgres_server.dsn, table=table) for _ in range(8)]
    await asyncio.gather(*(s.put(f"id-{n}", b"x") for n, s in enumerate(stores)))
    assert [await stores[0].get(f"id-{n}") for n in range(8)] == [b"x"] * 8
    await asyncio.gather(*(s.aclose() for s in stores))


@pytest.mark.parametrize("operation", ["claim", "put"])
async def test_postgres_database_serializable_by_default_decides_a_statement_meeting_anothers(
    postgres_server: PostgresServer, pg_admin: Any, operation: str
) -> None:
    """In a database whose sessions default to SERIALIZABLE (``ALTER DATABASE ... SET
    default_transaction_isolation``, here the DSN's), a claim or a put whose row another's
    statement holds until it commits failed with a serialization error, a
    ``CheckpointStoreError`` that reads as the store being down: a second worker's claim of a
    checkpoint being resumed was not refused (False) but an error. Each is one statement, its own
    transaction, so it is run again, on a snapshot that sees the other's commit."""
    table = f"ser_{uuid.uuid4().hex[:12]}"
    dsn = postgres_server.dsn + "?default_transaction_isolation=serializable"
    async with PostgresCheckpointStore(dsn, table=table) as store:
        await store.put("run", b"before")
        other = pg_admin.transaction()
        await other.start()  # another worker's statement, not yet committed
        try:
            if operation == "claim":
                await pg_admin.execute(store._claim_sql, "run", "other", 30.0)
                pending = asyncio.ensure_future(store.claim("run", "me"))
            else:
                await pg_admin.execute(store._put_sql, "run", b"other's")
                pending = asyncio.ensure_future(store.put("run", b"mine"))
            waiting = (
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND pid <> pg_backend_pid()"
            )
            watch = await asyncpg.connect(postgres_server.dsn)  # the fixture's is in the other
            try:
                for _ in range(3000):  # until the store's statement waits for the row (guard)
                    if await watch.fetchval(waiting):
                        break
                    await asyncio.sleep(0.01)
                else:
                    raise AssertionError("the store's statement never waited for the row")
            finally:
                await watch.close()
        finally:
            await other.commit()
        if operation == "claim":
            assert await pending is False  # the other worker holds it
        else:
            await pending
            assert await store.get("run") == b"mine"  # the later write wins, as put does


def test_optional_backends_load_lazily() -> None:
    child = run_python(
        "import sys, adk, adk.checkpoint\n"
        "assert 'redis' not in sys.modules and 'asyncpg' not in sys.modules, 'eager import'\n"
        "from adk.checkpoint import RedisCheckpointStore, PostgresCheckpointStore\n"
        "assert 'redis' in sys.modules and 'asyncpg' in sys.modules\n"
    )
    assert child.returncode == 0, child.stderr


def test_error_survives_pickling() -> None:
    error = CheckpointStoreError("boom", backend="redis", operation="put", checkpoint_id="x")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.backend, copy.operation, copy.checkpoint_id) == (
        "boom",
        "redis",
        "put",
        "x",
    )


async def test_an_empty_store_is_truthy(store: CheckpointStore) -> None:
    """``checkpoint_store or InMemoryCheckpointStore()`` must keep the caller's empty store."""
    assert store


@pytest.mark.parametrize("network_store", ["redis", "postgres"], indirect=True)
async def test_a_new_runs_save_whose_server_stops_answering_between_look_and_write_times_out(
    network_store: Callable[..., tuple[CheckpointStore, int]],
) -> None:
    """``_put_new`` (a new run's pause under an id it was given: a look, then a write, in one
    step) fails within ``timeout``, in the store's words, when the server stops answering
    between the look and the write. Redis's ``WATCH`` made redis-py's pipeline send ``UNWATCH``
    after the timeout, on a fresh connection to the silent server, and fail only on that read,
    5 s later and in redis-py's words ('Timeout reading from ...')."""
    _, server_port = network_store(None)
    async with Proxy(server_port) as proxy:
        store, _ = network_store(proxy.port, timeout=0.5)
        backend = "redis" if isinstance(store, RedisCheckpointStore) else "postgres"
        assert isinstance(store, _PutNewStore)
        await store.put("run", b"finished")

        def keep(old: bytes) -> bool:
            proxy.freeze()  # the look has its answer; the write gets none
            return False

        with pytest.raises(CheckpointStoreError, match=r"no answer within 0\.5 s") as caught:
            await store._put_new("run", b"new", keep)
        assert_names(caught.value, backend, "put", "run")
        await close(store)
        proxy.thaw()
        assert await store.get("run") in {b"finished", b"new"}  # reopened: answers again
        await close(store)


async def test_a_run_whose_text_holds_lone_surrogates_pauses_and_resumes(
    backend: Backend,
) -> None:
    """A model's reply with a lone surrogate (its JSON escape ``"\\ud800"``), and a tool's result
    with one, before a call needing approval: the pause failed ('surrogates not allowed') and the
    run was lost. Now each store keeps it, it is listed, and the resumed model sees the history
    as it was."""
    odd = "x\ud800y\udfff"

    @adk.tool
    def look() -> str:
        """Look."""
        return f"seen {odd}"

    @adk.tool(require_approval=True)
    def note(text: str) -> str:
        """Write a note."""
        return f"noted {text}"

    model = ScriptedModel(
        [
            Reply(text=f"say {odd}", tool_calls=[tool_call("look", {}, id="l")]),
            Reply(tool_calls=[tool_call("note", {"text": "plain"}, id="n")]),
            Reply(text="done"),
        ]
    )
    store = backend.make()
    runner = Runner(ReActAgent("scribe", model, tools=[look, note]), checkpoint_store=store)
    events = [e async for e in runner.run(f"hi {odd}")]
    info = events[-1].interrupted
    assert info is not None, [e.error for e in events]
    [listed] = [p async for p in runner.pending()]
    assert listed.checkpoint_id == info.checkpoint_id
    assert [p.id for p in listed.points] == [p.id for p in info.points]
    resumed = [e async for e in runner.resume(info.checkpoint_id, True)]
    assert [e.error for e in resumed if e.error is not None] == []
    assert [m.content for m in model.requests[-1].messages] == [
        f"hi {odd}",
        f"say {odd}",
        f"seen {odd}",
        "",
        "noted plain",
    ]


@pytest.mark.parametrize("network_store", ["redis", "postgres"], indirect=True)
async def test_a_new_runs_save_whose_connection_dies_between_look_and_write_is_retried(
    network_store: Callable[[int | None], tuple[CheckpointStore, int]],
) -> None:
    """``_put_new``'s connection dies between the look and the write (a server restart, a NAT
    timeout): nothing was written (PostgreSQL rolls the transaction back), and the save is
    retried on a fresh connection, as ``put`` is, looking again. PostgreSQL's asked the lost
    connection whether it was closed, which asyncpg refuses once the pool has taken it back
    ('cannot call Connection.is_closed(): connection has been released back to the pool'): the
    save failed in asyncpg's words, not retried."""
    direct, server_port = network_store(None)
    async with Proxy(server_port) as proxy:
        proxied, _ = network_store(proxy.port)
        assert isinstance(proxied, _PutNewStore)
        await proxied.put("run", b"finished")
        looks: list[bytes] = []

        def keep(old: bytes) -> bool:
            if not looks:
                proxy.drop_idle()  # the look has its answer; the write dies with its connection
            looks.append(old)
            return old != b"finished"

        assert await proxied._put_new("run", b"after", keep) is None
        assert await proxied.get("run") == b"after"
        await close(proxied)
    assert await direct.get("run") == b"after"
    await close(direct)


async def test_postgres_new_runs_save_on_a_session_the_server_ended_is_retried(
    postgres_server: PostgresServer, pg_admin: Any
) -> None:
    """The server ended the pooled connection's session and its notice came before the close
    (``test_postgres_session_ended_while_pooled_is_retried_on_a_fresh_connection``): the
    transaction ``_put_new`` begins by hand fails on it, is not rolled back on a closed
    connection (the server did), and the save is retried on a fresh connection."""
    table = f"ended_{uuid.uuid4().hex[:12]}"
    async with Proxy(postgres_server.port) as proxy:
        dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
        store = PostgresCheckpointStore(dsn, table=table, max_size=1)
        await store.put("run", b"finished")
        await _end_the_pooled_session(proxy, pg_admin)
        assert await store._put_new("run", b"after", lambda old: old != b"finished") is None
        assert await store.get("run") == b"after"
        proxy.pass_closes()
        await store.aclose()


async def test_a_replace_writes_only_over_the_bytes_it_names(backend: Backend) -> None:
    """``_replace`` (a resume's record of a finished call, ``adk.checkpoint._progress``) writes
    only where the store still holds the bytes the writer last knew: not over another run's
    pause saved meanwhile, and not where the checkpoint was deleted (brought back, its approved
    calls would run again); the same replace sent again after it landed reports it written."""
    store = backend.make()
    assert isinstance(store, _ReplacingStore) and _replaces(store)
    await store.put("cp", b"paused")
    assert await store._replace("cp", b"paused", b"recorded") is True
    assert await store.get("cp") == b"recorded"
    assert await store._replace("cp", b"paused", b"recorded") is True  # sent again: landed
    assert await store._replace("cp", b"paused", b"other") is False
    assert await store.get("cp") == b"recorded"
    await store.delete("cp")
    assert await store._replace("cp", b"recorded", b"again") is False
    assert await store.get("cp") is None


async def test_replaces_racing_from_several_stores_let_exactly_one_write(backend: Backend) -> None:
    """Eight writers (each its own store over the same data: another worker's connection, or
    SQLite's thread) replace the same bytes at once, each with its own: exactly one is told it
    wrote, and the store holds that one's bytes. A look and then a put, as the record was made,
    lets several pass the look and the last put win, each told it wrote."""
    await backend.make().put("cp", b"paused")
    stores = [backend.make() for _ in range(8)]
    won = await asyncio.gather(
        *(s._replace("cp", b"paused", b"record %d" % i) for i, s in enumerate(stores))  # type: ignore[attr-defined]
    )
    assert won.count(True) == 1, won
    assert await stores[0].get("cp") == b"record %d" % won.index(True)


async def test_a_conditional_delete_deletes_only_the_bytes_it_names(backend: Backend) -> None:
    """``_delete_if`` (a finished resume's delete, ``Runner._finish``) deletes only where the
    store still holds the bytes the resume last knew: not another run's pause saved under the id
    since, and nothing where nothing is (a delete sent again after it deleted)."""
    store = backend.make()
    assert isinstance(store, _DeletingIfStore) and _deletes_if(store)
    await store.put("cp", b"paused")
    assert await store._delete_if("cp", b"recorded") is False
    assert await store._delete_if("cp", b"pause") is False  # a prefix is not the bytes
    assert await store.get("cp") == b"paused"
    assert await store._delete_if("cp", b"paused") is True
    assert await store.get("cp") is None
    assert await store._delete_if("cp", b"paused") is False  # sent again: nothing there
    assert await store._delete_if("never", b"") is False
    await store.put("empty", b"")
    assert await store._delete_if("empty", b"") is True  # empty bytes are bytes, not nothing
    assert await store.get("empty") is None
    with pytest.raises(TypeError, match="checkpoint data must be bytes"):
        await store._delete_if("cp", "paused")  # type: ignore[arg-type]


async def test_conditional_deletes_racing_a_put_from_several_stores_keep_the_new_bytes(
    backend: Backend,
) -> None:
    """A put of new bytes (another resume's new pause) and eight conditional deletes of the old
    ones (each its own store over the same data) at once: either the put came first and every
    delete left its bytes, or one delete came first and the put wrote after it; never the new
    bytes deleted. A read and then a delete, as the finish was, deleted the new pause when the
    put came between them."""
    await backend.make().put("cp", b"paused")
    stores = [backend.make() for _ in range(9)]
    *deleted, _ = await asyncio.gather(
        *(s._delete_if("cp", b"paused") for s in stores[1:]),  # type: ignore[attr-defined]
        stores[0].put("cp", b"paused again"),
    )
    assert deleted.count(True) <= 1, deleted
    assert await stores[0].get("cp") == b"paused again"


async def test_a_subclass_that_reads_or_writes_its_own_way_is_not_replaced_behind_its_back(
    tmp_path: Path,
) -> None:
    """A subclass changing ``get`` or ``put`` (to compress or encrypt the bytes) has the record
    go through them, a look then a write, as ``_put_new`` is decided (``_puts_new``)."""

    class Compressing(SQLiteCheckpointStore):
        async def put(self, id: str, data: bytes) -> None:
            await super().put(id, data[::-1])

    class Archiving(SQLiteCheckpointStore):
        async def delete(self, id: str) -> None:
            await super().delete(id)

    plain = SQLiteCheckpointStore(tmp_path / "a.db")
    compressing = Compressing(tmp_path / "b.db")
    archiving = Archiving(tmp_path / "c.db")
    try:
        assert _replaces(plain) and not _replaces(compressing)
        # The finish's conditional delete likewise, and a subclass deleting its own way (to
        # archive what it deletes) has its delete called.
        assert _deletes_if(plain) and not _deletes_if(compressing)
        assert _replaces(archiving) and not _deletes_if(archiving)
    finally:
        await plain.aclose()
        await compressing.aclose()
        await archiving.aclose()


@pytest.mark.parametrize(
    ("step", "other"),
    [("_delete_if", "put"), ("_delete_if", "delete"), ("_replace", "put"), ("_put_new", "put")],
)
async def test_the_in_memory_stores_compare_steps_are_one_step_for_another_threads_put_or_delete(
    step: str, other: str
) -> None:
    """``InMemoryCheckpointStore`` serves event loops in several threads, and its compare steps
    (``_delete_if``: the finish's delete; ``_replace``: a record; ``_put_new``: a new run's
    pause) take its lock for that. Its
    ``put`` and ``delete`` took none, so one from another thread could land between the look
    and the write: the finish deleted the pause that put saved (another run's, under the id) or
    failed with a ``KeyError`` on the key that delete had taken, and a record or a new run's
    pause wrote over the new pause. Here the other thread's call is made at the step's look, and waited for until it is
    done or waits for the store's lock."""
    store = InMemoryCheckpointStore()
    await store.put("cp", b"paused")
    arrived = threading.Event()  # the other thread's call is done, or waits for the lock

    def call() -> None:
        if other == "put":
            asyncio.run(store.put("cp", b"paused again"))
        else:
            asyncio.run(store.delete("cp"))
        arrived.set()

    thread = threading.Thread(target=call)
    lock = store._new

    class Watched(dict[str, bytes]):
        def get(self, key: str, default: Any = None) -> Any:
            found = super().get(key, default)
            if key == "cp" and not thread.is_alive() and not arrived.is_set():
                thread.start()  # at the step's look
                assert arrived.wait(30)
            return found

    class Signalling:
        def __enter__(self) -> bool:
            if threading.current_thread() is thread:
                arrived.set()  # the other thread's call waits for the lock
            return lock.__enter__()

        def __exit__(self, *exc: object) -> None:
            lock.__exit__(*exc)

    store._data = Watched(store._data)
    store._new = Signalling()  # type: ignore[assignment]
    try:
        if step == "_delete_if":
            assert await store._delete_if("cp", b"paused") is True
        elif step == "_replace":
            assert await store._replace("cp", b"paused", b"recorded") is True
        else:  # the checkpoint there is one a new run may replace (finished, say)
            assert await store._put_new("cp", b"new run", lambda old: False) is None
    finally:
        thread.join(30)
    if other == "put":  # the step came first, then the other thread's pause: it stays
        assert await store.get("cp") == b"paused again"
    else:
        assert await store.get("cp") is None
