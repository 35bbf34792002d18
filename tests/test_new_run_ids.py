"""A new run pausing under the id of a checkpoint that still waits is refused, atomically.

The runner read the id, then wrote it: two new runs pausing at the same moment under one id (two
requests of one conversation, a retried webhook) could both read nothing and both write, the
second replacing the first's pending decision. Every store pyadk ships now looks and writes in
one step (``_PutNewStore._put_new``); a store of only the public protocol keeps the read, then
the write. Each backend runs against its real server (``services.py``); writers are separate
store objects (a SQLite connection, a Redis client, a PostgreSQL pool each), in threads of their
own for the store-level race.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from claiming_stores import backend_factory
from services import PostgresServer, RedisServer
from test_resume_once import PayOnYes

from adk import RunError, Runner
from adk.checkpoint import (
    CheckpointStore,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
)
from adk.checkpoint.store import _PutNewStore

pytest_plugins = ["services"]

StoreFactory = Callable[[], CheckpointStore]


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """New store objects over one backend's data, as separate processes would have (for memory,
    the one store, which only threads of one process can share)."""
    factory: StoreFactory
    if request.param == "memory":
        shared = InMemoryCheckpointStore()
        factory = lambda: shared  # noqa: E731
    else:
        factory = backend_factory(request, tmp_path, "nr")
    made: list[CheckpointStore] = []

    def make() -> CheckpointStore:
        store = factory()
        made.append(store)
        return store

    yield make
    for store in made:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


def _reads_in_step(stores: list[CheckpointStore]) -> None:
    """Make the stores' ``get`` wait until each of ``stores`` (one per run; the same object
    may come more than once) has begun one: the reads of a read-then-write check all come
    before any write, the race's worst order, every time."""
    together = asyncio.Barrier(len(stores))
    for store in {id(store): store for store in stores}.values():
        read = store.get

        async def get(id: str, read: Any = read) -> bytes | None:
            found: bytes | None = await read(id)
            # A guard against a hang, not a timing: the reads meet at once or never.
            await asyncio.wait_for(together.wait(), 30)
            return found

        store.get = get  # type: ignore[method-assign]


async def test_new_runs_pausing_at_once_under_one_id_save_one_pause(
    make_store: StoreFactory,
) -> None:
    """Two new runs under one id pause together, each through its own store object. With the
    read then the write, both read nothing and both saved: the last write won, and the person's
    yes to the first pause paid the second's payee (or the first's was lost without a word).
    Now one saves and the other is refused; the checkpoint is the one whose run was told it
    paused."""
    paid: list[str] = []
    stores = [make_store(), make_store()]
    _reads_in_step(stores)
    runners = [Runner(PayOnYes(paid), checkpoint_store=store) for store in stores]
    outcomes = await asyncio.gather(
        runners[0].invoke("bob", checkpoint_id="conv-1"),
        runners[1].invoke("eve", checkpoint_id="conv-1"),
        return_exceptions=True,
    )
    refused = [o for o in outcomes if isinstance(o, RunError)]
    paused = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(paused) == 1 and len(refused) == 1, outcomes
    assert "'conv-1': a paused run waits there" in str(refused[0])
    winner = "bob" if outcomes[0] is paused[0] else "eve"
    for store in stores:
        vars(store).pop("get", None)  # the resume reads alone
    await runners[0].invoke_resume("conv-1", True)
    assert paid == [winner]


@pytest.mark.parametrize("before", [None, b"finished"], ids=["new id", "finished there"])
def test_writers_in_threads_of_their_own_save_one_new_checkpoint(
    make_store: StoreFactory, before: bytes | None
) -> None:
    """Six writers, each in a thread with its own event loop and store object (for memory, the
    one store), start ``_put_new`` of their own bytes under one id together, any old value but a
    finished one to be kept: one writes, and each of the others is told what is there, that
    one's bytes. With nothing there the insert's key decides; over a finished checkpoint (kept
    for audit) only the lock held from the look to the write does."""
    writers = 6
    stores = [make_store() for _ in range(writers)]
    if before is not None:
        asyncio.run(_write(stores[0], "one", before))
    start = threading.Barrier(writers)
    outcomes: list[Any] = [None] * writers

    async def write(n: int) -> None:
        store = stores[n]
        assert isinstance(store, _PutNewStore)
        try:
            await store.get("warm-up")  # connected first, so the writes start close together
            await asyncio.to_thread(start.wait, 30)
            outcomes[n] = ("kept", await store._put_new("one", b"writer %d" % n, _unfinished))
        finally:
            aclose = getattr(store, "aclose", None)
            if aclose is not None:
                await aclose()

    def run(n: int) -> None:
        try:
            asyncio.run(write(n))
        except BaseException as exc:
            outcomes[n] = ("error", exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(kind == "kept" for kind, _ in outcomes), outcomes
    written = [n for n, (_, kept) in enumerate(outcomes) if kept is None]
    assert len(written) == 1, outcomes
    winner = b"writer %d" % written[0]
    assert [kept for _, kept in outcomes if kept is not None] == [winner] * (writers - 1)
    assert asyncio.run(_read(make_store(), "one")) == winner


def _unfinished(old: bytes) -> bool:
    return old != b"finished"


async def _write(store: CheckpointStore, id: str, data: bytes) -> None:
    try:
        await store.put(id, data)
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


async def _read(store: CheckpointStore, id: str) -> bytes | None:
    try:
        return await store.get(id)
    finally:
        aclose = getattr(store, "aclose", None)
        if aclose is not None:
            await aclose()


async def test_what_keep_lets_go_is_replaced_and_a_writers_own_bytes_count_as_written(
    make_store: StoreFactory,
) -> None:
    """``keep`` sees the bytes there and decides; bytes equal to the new ones are taken as a
    retried write that landed (PostgreSQL retries on a fresh connection), not as another run's."""
    store = make_store()
    assert isinstance(store, _PutNewStore)
    seen: list[bytes] = []

    def finished(old: bytes) -> bool:
        seen.append(old)
        return old != b"finished"

    assert await store._put_new("id", b"first", finished) is None  # nothing there: written
    assert seen == []
    assert await store._put_new("id", b"second", finished) == b"first"  # kept
    assert await store.get("id") == b"first"
    assert await store._put_new("id", b"first", finished) is None  # its own: written
    await store.put("id", b"finished")
    assert await store._put_new("id", b"third", finished) is None  # let go: replaced
    assert await store.get("id") == b"third"
    assert seen == [b"first", b"finished"]
    with pytest.raises(TypeError, match="must be bytes"):
        await store._put_new("id", "text", finished)  # type: ignore[arg-type]
    assert await store.get("id") == b"third"


class _Plain:
    """A store of the public protocol alone, as a user might write one."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.reads = 0

    async def get(self, id: str) -> bytes | None:
        self.reads += 1
        return self.data.get(id)

    async def put(self, id: str, data: bytes) -> None:
        self.data[id] = data

    async def delete(self, id: str) -> None:
        self.data.pop(id, None)


@pytest.mark.parametrize("kept", [False, True])
async def test_a_store_of_the_public_protocol_is_read_then_written(kept: bool) -> None:
    """Without ``_put_new`` the runner reads the id before it writes: a waiting checkpoint is
    refused as before, and one finished and kept for audit is replaced."""
    paid: list[str] = []
    store = _Plain()
    assert not isinstance(store, _PutNewStore)
    runner = Runner(PayOnYes(paid), checkpoint_store=store, keep_checkpoints=kept)
    await runner.invoke("bob", checkpoint_id="conv-1")
    assert store.reads == 2  # before the run starts (``_id_taken``), then at its pause
    waiting = store.data["conv-1"]
    with pytest.raises(RunError, match="'conv-1': a paused run waits there"):
        await runner.invoke("eve", checkpoint_id="conv-1")
    assert store.data["conv-1"] == waiting
    await runner.invoke_resume("conv-1", True)
    second = await runner.invoke("eve", checkpoint_id="conv-1")
    assert second.interrupt is not None
    await runner.invoke_resume("conv-1", True)
    assert paid == ["bob", "eve"]


class _Zipped(SQLiteCheckpointStore):
    """A user's subclass of a built-in store that keeps its bytes compressed."""

    async def get(self, id: str) -> bytes | None:
        found = await super().get(id)
        return None if found is None else zlib.decompress(found)

    async def put(self, id: str, data: bytes) -> None:
        await super().put(id, zlib.compress(data))


async def test_a_subclass_with_its_own_get_and_put_is_read_then_written(tmp_path: Path) -> None:
    """``_put_new`` writes and judges the bytes as the built-in store keeps them: a subclass that
    compresses them in ``put`` had a new run's pause saved uncompressed, and its ``get`` then
    failed to read it. Such a store is read, then written, through its own methods."""
    paid: list[str] = []
    async with _Zipped(tmp_path / "zipped.db") as store:
        runner = Runner(PayOnYes(paid), checkpoint_store=store)
        await runner.invoke("bob", checkpoint_id="conv-1")
        with pytest.raises(RunError, match="'conv-1': a paused run waits there"):
            await runner.invoke("eve", checkpoint_id="conv-1")
        await runner.invoke_resume("conv-1", True)
    assert paid == ["bob"]


async def test_a_sqlite_pause_waiting_for_the_write_lock_is_not_dropped_by_a_delete(
    tmp_path: Path,
) -> None:
    """A delete drops a ``put`` of its id that has not begun writing (the delete would undo it),
    but ``_put_new`` is a look, then a write: dropped, it reported the new run's pause saved
    without looking, over a checkpoint that waited, and nothing was there. Here another process
    holds the write lock while a new run's pause under ``conv-1`` waits for it and a resume of
    the paused run there deletes ``conv-1``: in whichever order the two then run, the pause is
    either refused (the waiting checkpoint was there) or saved and there."""
    path = tmp_path / "checkpoints.db"
    async with SQLiteCheckpointStore(path) as store:
        await store.put("conv-1", b"waiting")
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process's write, in progress
            try:
                saving = asyncio.create_task(store._put_new("conv-1", b"new", _unfinished))
                await asyncio.sleep(0)  # queued behind the other process's write lock
                deleting = asyncio.create_task(store.delete("conv-1"))
                await asyncio.sleep(0)  # the delete asked for (it marks the puts it undoes)
            finally:
                other.execute("ROLLBACK")
        finally:
            other.close()
        kept = await saving
        await deleting
        there = await store.get("conv-1")
    assert (kept, there) in [(b"waiting", None), (None, b"new")], (kept, there)


async def test_a_redis_store_with_a_ttl_gives_a_new_runs_pause_its_expiry(
    redis_server: RedisServer,
) -> None:
    """``_put_new`` writes as ``put`` does, the store's ``ttl`` included (its Lua script sets the
    expiry that ``put``'s ``SET ... PX`` does); kept bytes keep theirs."""
    from redis.asyncio import Redis

    prefix = f"ttl{uuid.uuid4().hex[:12]}:"
    client = Redis.from_url(redis_server.url)
    async with RedisCheckpointStore(redis_server.url, prefix=prefix, ttl=60) as store:
        assert await store._put_new("id", b"first", _unfinished) is None
        assert 0 < await client.pttl(prefix + "id") <= 60_000
        await client.persist(prefix + "id")
        assert await store._put_new("id", b"second", _unfinished) == b"first"
        assert await client.pttl(prefix + "id") == -1  # kept: untouched
    async with RedisCheckpointStore(redis_server.url, prefix=prefix) as store:
        await store.put("id", b"finished")
        assert await store._put_new("id", b"third", _unfinished) is None
        assert await client.get(prefix + "id") == b"third"
        assert await client.pttl(prefix + "id") == -1  # no ttl: none set
    await client.delete(prefix + "id")
    await client.aclose()


async def test_a_redis_checkpoint_expiring_between_the_look_and_the_write_is_looked_at_again(
    redis_server: RedisServer,
) -> None:
    """A store with a ``ttl``: the checkpoint looked at (finished, to be replaced) expires
    before the Lua script runs, which then finds nothing where it looked for those bytes and
    writes nothing; the look again finds nothing there and the pause is saved, with its
    expiry. And another run's pause written between the look and the script is looked at
    again and kept, not replaced. Reviewed (1899c51, f083a76), no change needed."""
    import time

    import redis

    prefix = f"exp{uuid.uuid4().hex[:12]}:"
    sync = redis.Redis.from_url(redis_server.url)
    looks: list[bytes] = []

    def expire_first(old: bytes) -> bool:
        if not looks:
            sync.pexpire(prefix + "id", 1)
            for _ in range(10_000):  # until it has expired (a guard: 10 s)
                if not sync.exists(prefix + "id"):
                    break
                time.sleep(0.001)
        looks.append(old)
        return _unfinished(old)

    try:
        async with RedisCheckpointStore(redis_server.url, prefix=prefix, ttl=60) as store:
            await store.put("id", b"finished")
            assert await store._put_new("id", b"new", expire_first) is None
            assert looks == [b"finished"]  # looked at once; then nothing was there
            assert sync.get(prefix + "id") == b"new"
            assert 0 < sync.pttl(prefix + "id") <= 60_000

            # Another run's pause written there meanwhile is not replaced: it is looked at.
            await store.put("id", b"finished")
            seen: list[bytes] = []

            def another_pauses(old: bytes) -> bool:
                if not seen:
                    sync.set(prefix + "id", b"waiting")
                seen.append(old)
                return _unfinished(old)

            assert await store._put_new("id", b"mine", another_pauses) == b"waiting"
            assert seen == [b"finished", b"waiting"]
            assert sync.get(prefix + "id") == b"waiting"
    finally:
        sync.delete(prefix + "id")
        sync.close()


def test_the_verdict_on_a_store_class_does_not_keep_the_class_alive() -> None:
    """``_puts_new`` decides once per class; the classes it decided on are still freed: a
    subclass made per tenant or per test (here, one made and dropped) was held for good."""
    import gc
    import weakref

    from adk.checkpoint.store import _puts_new

    made = type("PerTenant", (InMemoryCheckpointStore,), {})
    assert _puts_new(made())
    gone = weakref.ref(made)
    del made
    gc.collect()
    assert gone() is None


def test_a_postgres_database_serializable_by_default_still_refuses_rather_than_fails(
    postgres_server: PostgresServer,
) -> None:
    """``_put_new``'s statements are read as READ COMMITTED has them (the row locked by another
    writer is read once that one commits). A database whose sessions default to SERIALIZABLE
    failed the second of two new runs pausing under one id with a serialization error (a
    ``CheckpointStoreError``, which reads as the store being down, to be tried again) instead of
    refusing it: the writer holding the row here waits in its ``keep`` until the other waits
    for the row's lock."""
    import asyncpg

    table = f"nr_{uuid.uuid4().hex[:12]}"
    dsn = postgres_server.dsn + "?default_transaction_isolation=serializable"
    holding, release = threading.Event(), threading.Event()
    outcomes: dict[str, Any] = {}

    def hold(old: bytes) -> bool:  # the first writer, the row locked
        holding.set()
        assert release.wait(30)  # a guard against a hang, not a timing
        return _unfinished(old)

    async def write(name: str, keep: Callable[[bytes], bool]) -> None:
        async with PostgresCheckpointStore(dsn, table=table) as store:
            try:
                outcomes[name] = ("kept", await store._put_new("one", name.encode(), keep))
            except Exception as exc:
                outcomes[name] = ("error", exc)

    async def waiting_for_lock() -> None:
        conn = await asyncpg.connect(postgres_server.dsn)
        try:
            query = (
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE $1"
            )
            for _ in range(3000):  # until the second writer waits for the row (a guard: 30 s)
                if await conn.fetchval(query, f"%{table}%"):
                    return
                await asyncio.sleep(0.01)
            raise AssertionError("the second writer never waited for the row's lock")
        finally:
            await conn.close()

    asyncio.run(_write(PostgresCheckpointStore(dsn, table=table), "one", b"finished"))
    first = threading.Thread(target=lambda: asyncio.run(write("first", hold)))
    first.start()
    try:
        assert holding.wait(30)
        second = threading.Thread(target=lambda: asyncio.run(write("second", _unfinished)))
        second.start()
        try:
            asyncio.run(waiting_for_lock())
        finally:
            release.set()
            second.join()
    finally:
        release.set()
        first.join()
    assert outcomes == {"first": ("kept", None), "second": ("kept", b"first")}, outcomes
