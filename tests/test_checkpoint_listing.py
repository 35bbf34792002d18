"""Listing checkpoints: ``ids(prefix)`` on every store (memory, SQLite, and real Redis and
PostgreSQL servers started by ``services.py``), and ``list_pending`` / ``Runner.pending`` reading
what each paused run waits on without resuming it.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
import redis.asyncio as aioredis
from services import PostgresServer, RedisServer, closed_port

from adk.checkpoint import (
    CheckpointStore,
    CheckpointStoreError,
    ClaimingCheckpointStore,
    InMemoryCheckpointStore,
    ListingCheckpointStore,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
)
from adk.checkpoint.sqlite import _ReadOnlySQLiteStore

pytest_plugins = ["services"]

ODD_IDS = [
    "plain",
    "with space",
    "slash/inside/it",
    "back\\slash",
    "glob*?[x]{y}^",
    "like%_percent",
    "quote'single",
    "ünïcødé-日本語-🙂",
    "tab\tnew\nline\r",
    "x" * 1024,
]


@pytest.fixture(params=["memory", "sqlite", "redis", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    unique = uuid.uuid4().hex[:12]
    made: Any
    if request.param == "memory":
        made = InMemoryCheckpointStore()
    elif request.param == "sqlite":
        made = SQLiteCheckpointStore(tmp_path / "checkpoints.db")
    elif request.param == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        made = RedisCheckpointStore(redis_server.url, prefix=f"l{unique}:")
    else:
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        made = PostgresCheckpointStore(pg.dsn, table=f"ls_{unique}")
    yield made
    aclose = getattr(made, "aclose", None)
    if aclose is not None:
        await aclose()


async def listed(store: ListingCheckpointStore, prefix: str | None = None) -> list[str]:
    return [id async for id in store.ids(prefix)]


# --------------------------------------------------------------------------------------------------
# ids(prefix) on every store


async def test_every_store_can_list(store: CheckpointStore) -> None:
    assert isinstance(store, ListingCheckpointStore)


async def test_lists_every_id_once_and_not_deleted_ones(store: ListingCheckpointStore) -> None:
    assert await listed(store) == []
    for n, id in enumerate(ODD_IDS):
        await store.put(id, f"value {n}".encode())
    await store.put("plain", b"again")  # an overwrite is still one checkpoint
    await store.put("gone", b"x")
    await store.delete("gone")
    found = await listed(store)
    assert sorted(found) == sorted(ODD_IDS)
    assert sorted(await listed(store, "")) == sorted(found)


async def test_prefix_is_taken_literally(store: ListingCheckpointStore) -> None:
    ids = [
        "tenant-1/a",
        "tenant-1/b",
        "tenant-10/a",
        "tenant-2/a",
        "tenant",
        "glob*?[x]/1",
        "globber/1",
        "like%_/1",
        "likeXY/1",
        "back\\/1",
        "backX/1",
        "ü/1",
        "u/1",
    ]
    for id in ids:
        await store.put(id, b"x")
    assert sorted(await listed(store, "tenant-1/")) == ["tenant-1/a", "tenant-1/b"]
    assert sorted(await listed(store, "tenant-1")) == ["tenant-1/a", "tenant-1/b", "tenant-10/a"]
    assert sorted(await listed(store, "tenant")) == sorted(i for i in ids if i.startswith("tenant"))
    # Characters that SCAN MATCH, LIKE or GLOB would read as patterns match only themselves.
    assert await listed(store, "glob*?[x]") == ["glob*?[x]/1"]
    assert await listed(store, "glob*") == ["glob*?[x]/1"]
    assert await listed(store, "like%_") == ["like%_/1"]
    assert await listed(store, "back\\") == ["back\\/1"]
    assert await listed(store, "ü") == ["ü/1"]
    assert await listed(store, "nobody") == []
    assert await listed(store, "tenant-1/a") == ["tenant-1/a"]  # an id is a prefix of itself


async def test_more_ids_than_a_page_are_each_listed_once(store: ListingCheckpointStore) -> None:
    # The SQL stores read 1000 ids per page, Redis asks SCAN for 1000 keys per step.
    ids = [f"run-{n:05d}" for n in range(2345)] + [f"other-{n}" for n in range(50)]
    for id in ids:
        await store.put(id, b"x")
    found = await listed(store)
    assert len(found) == len(ids)
    assert sorted(found) == sorted(ids)
    with_prefix = await listed(store, "run-")
    assert sorted(with_prefix) == sorted(id for id in ids if id.startswith("run-"))


async def test_changes_during_a_listing_do_not_skip_or_repeat_ids_that_stay(
    store: ListingCheckpointStore,
) -> None:
    stay = [f"stay-{n:04d}" for n in range(1500)]
    go = [f"stay-{n:04d}x" for n in range(0, 1500, 7)]  # between the ids that stay
    for id in stay + go:
        await store.put(id, b"x")
    found: list[str] = []
    async for id in store.ids("stay-"):
        if len(found) == 10:  # mid-listing: delete some, add more, overwrite others
            for other in go:
                await store.delete(other)
            for n in range(300):
                await store.put(f"stay-{n:04d}y", b"new")
            await store.put("stay-1499", b"rewritten")
        found.append(id)
    kept = [id for id in found if id in set(stay)]
    assert sorted(kept) == stay  # each id present throughout: listed exactly once


async def test_bad_prefixes_are_refused_when_called(store: ListingCheckpointStore) -> None:
    await store.put("a", b"x")
    with pytest.raises(TypeError, match="prefix must be a str or None, got bytes"):
        store.ids(b"a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="checkpoint id prefix must not contain NUL"):
        store.ids("a\x00")
    with pytest.raises(ValueError, match="checkpoint id prefix is 1025 UTF-8 bytes long"):
        store.ids("x" * 1025)
    with pytest.raises(ValueError, match="checkpoint id prefix must be valid unicode"):
        store.ids("\udc80")
    assert await listed(store, None) == ["a"]


async def test_claims_are_not_listed(store: ListingCheckpointStore) -> None:
    if not isinstance(store, ClaimingCheckpointStore):
        pytest.skip("the in-memory store keeps no claims")
    await store.put("paused", b"x")
    assert await store.claim("paused", "worker-1")
    assert await store.claim("never-saved", "worker-2")  # a claim without a checkpoint
    assert await listed(store) == ["paused"]
    assert await listed(store, "never") == []
    await store.release("paused", "worker-1")
    await store.release("never-saved", "worker-2")
    assert await listed(store) == ["paused"]


# --------------------------------------------------------------------------------------------------
# Keys and rows that no put wrote


async def test_redis_lists_only_checkpoint_keys_under_its_prefix(
    redis_server: RedisServer,
) -> None:
    unique = uuid.uuid4().hex[:12]
    prefix = f"r{unique}:"
    store = RedisCheckpointStore(redis_server.url, prefix=prefix)
    raw = aioredis.Redis.from_url(redis_server.url)
    try:
        await store.put("good", b"x")
        await raw.set(f"elsewhere-{unique}:good2", b"x")  # another prefix
        await raw.set(prefix, b"x")  # the prefix alone: an empty id
        await raw.set(prefix.encode() + b"\xff\xfe", b"x")  # not UTF-8: no put wrote it
        await raw.set(f"{prefix}nul\x00inside", b"x")
        await raw.hset(f"{prefix}a-hash", "field", "value")  # not a string: no put wrote it
        await raw.rpush(f"{prefix}a-list", "item")
        assert await listed(store) == ["good"]
    finally:
        await raw.aclose()
        await store.aclose()


async def test_redis_with_an_empty_prefix_and_decoded_responses(
    redis_server: RedisServer,
) -> None:
    # Own database, so an empty key prefix lists only this test's keys.
    url = redis_server.url.rsplit("/", 1)[0] + "/7"
    raw = aioredis.Redis.from_url(url)
    await raw.flushdb()
    plain = RedisCheckpointStore(url, prefix="")
    decoded = RedisCheckpointStore(url + "?decode_responses=true", prefix="")
    try:
        await plain.put("one", b"x")
        await plain.put("two/ü", b"x")
        assert await plain.claim("one", "me")
        assert sorted(await listed(plain)) == ["one", "two/ü"]
        assert sorted(await listed(decoded)) == ["one", "two/ü"]  # keys come back as text
    finally:
        await raw.flushdb()
        await raw.aclose()
        await plain.aclose()
        await decoded.aclose()


async def test_sqlite_skips_rows_no_put_wrote(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    store = SQLiteCheckpointStore(path)
    try:
        for id in ("a", "b", "c"):
            await store.put(id, b"x")
        conn = sqlite3.connect(path)
        with conn:
            conn.execute("INSERT INTO pyadk_checkpoints VALUES ('', x'00', 0)")
            conn.execute("INSERT INTO pyadk_checkpoints VALUES (?, x'00', 0)", ("b\x00nul",))
            conn.execute("INSERT INTO pyadk_checkpoints VALUES (x'6262', x'00', 0)")  # a BLOB id
            conn.execute("INSERT INTO pyadk_checkpoints VALUES (42, x'00', 0)")  # text: '42'
        conn.close()
        assert await listed(store) == ["42", "a", "b", "c"]
        assert await store.get("42") == b"\x00"
        assert await listed(store, "b") == ["b"]
    finally:
        await store.aclose()


async def test_postgres_lists_in_a_non_c_collation(postgres_server: PostgresServer) -> None:
    # In most collations the ids that start with "a-" are not one run of the order ("a-1", "a1",
    # "a-2" may interleave); the prefix is tested on each id, so none is lost.
    table = f"lc_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(postgres_server.dsn)
    try:
        collations = await conn.fetch(
            "SELECT collname FROM pg_collation WHERE collname IN ('en-x-icu', 'und-x-icu')"
        )
        if not collations:
            pytest.skip("PostgreSQL without ICU collations")
        collation = collations[0][0]
        await conn.execute(
            f'CREATE TABLE "{table}" (id text COLLATE "{collation}" PRIMARY KEY, '
            "data bytea NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        )
    finally:
        await conn.close()
    store = PostgresCheckpointStore(postgres_server.dsn, table=table)
    try:
        ids = ["a-1", "a1", "a-2", "A-3", "a 4", "a-", "b-1", "a_5"]
        for id in ids:
            await store.put(id, b"x")
        assert sorted(await listed(store, "a-")) == ["a-", "a-1", "a-2"]
        assert sorted(await listed(store)) == sorted(ids)
    finally:
        await store.aclose()


# --------------------------------------------------------------------------------------------------
# Failures


@pytest.mark.parametrize(
    "make",
    [
        lambda: RedisCheckpointStore(f"redis://127.0.0.1:{closed_port()}/0", timeout=2),
        lambda: PostgresCheckpointStore(f"postgresql://u@127.0.0.1:{closed_port()}/db", timeout=2),
    ],
    ids=["redis", "postgres"],
)
async def test_a_store_that_is_down_fails_the_listing_clearly(
    make: Callable[[], Any],
) -> None:
    store = make()
    try:
        with pytest.raises(CheckpointStoreError, match=r": ids failed: ") as caught:
            await listed(store)
        assert caught.value.operation == "ids"
        assert caught.value.checkpoint_id is None
    finally:
        await store.aclose()


async def test_sqlite_listing_of_a_read_only_file_without_a_table(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    sqlite3.connect(path).close()
    store = _ReadOnlySQLiteStore(path)
    try:
        with pytest.raises(CheckpointStoreError, match="no such table") as caught:
            await listed(store)
        assert (caught.value.backend, caught.value.operation) == ("sqlite", "ids")
    finally:
        await store.aclose()


class ThreeMethodStore:
    """A user's store: only what DESIGN.md's ``CheckpointStore`` asks for."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def get(self, id: str) -> bytes | None:
        return self.data.get(id)

    async def put(self, id: str, data: bytes) -> None:
        self.data[id] = data

    async def delete(self, id: str) -> None:
        self.data.pop(id, None)


def test_a_three_method_store_is_not_a_listing_one() -> None:
    store = ThreeMethodStore()
    assert isinstance(store, CheckpointStore)
    assert not isinstance(store, ListingCheckpointStore)
