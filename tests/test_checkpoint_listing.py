"""Listing checkpoints: ``ids(prefix)`` on every store (memory, SQLite, and real Redis and
PostgreSQL servers started by ``services.py``), and ``list_pending`` / ``Runner.pending`` reading
what each paused run waits on without resuming it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest
import redis.asyncio as aioredis
from checkpoint_rewrite import rewrite_checkpoint
from services import PostgresServer, RedisServer, closed_port

from adk import CheckpointError, Message, Runner, RunResult, tool
from adk.checkpoint import (
    CheckpointStore,
    CheckpointStoreError,
    ClaimingCheckpointStore,
    HeadReadingCheckpointStore,
    InMemoryCheckpointStore,
    ListingCheckpointStore,
    PendingCheckpoint,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
    list_pending,
)
from adk.checkpoint.codec import decode_checkpoint
from adk.checkpoint.sqlite import _ReadOnlySQLiteStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

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


async def put_all(store: ListingCheckpointStore, ids: list[str], data: bytes) -> None:
    """``put`` each id, 20 at a time: thousands of durable writes one after another took ~20 s
    against PostgreSQL on a loaded machine; every write has ended before this returns, so what
    a listing test reads is the same."""
    for start in range(0, len(ids), 20):
        await asyncio.gather(*(store.put(id, data) for id in ids[start : start + 20]))


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
    await put_all(store, ids, b"x")
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
    await put_all(store, stay + go, b"x")
    found: list[str] = []
    async for id in store.ids("stay-"):
        if len(found) == 10:  # mid-listing: delete some, add more, overwrite others
            for other in go:
                await store.delete(other)
            await put_all(store, [f"stay-{n:04d}y" for n in range(300)], b"new")
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


# --------------------------------------------------------------------------------------------------
# list_pending / Runner.pending: what paused runs wait on, read without resuming them

paid: list[str] = []


@tool(require_approval=True)
def send_payment(payee: str, amount_cents: int) -> str:
    """Send money; a person approves every call."""
    paid.append(payee)
    return f"sent {amount_cents} cents to {payee}"


def paying(tool_name: str, amount_cents: int) -> Callable[[list[Message]], Any]:
    """A model that pays whoever the last user message names with ``tool_name``, then reports
    the tool's result."""

    def answer(messages: list[Message]) -> Any:
        last = messages[-1]
        if last.role == "tool":
            return f"done: {last.content}"
        payee = last.content.split()[-1]
        arguments = {"payee": payee, "amount_cents": amount_cents}
        return Reply(tool_calls=[tool_call(tool_name, arguments)])

    return answer


def clerk(name: str = "clerk") -> tuple[ReActAgent, ScriptedModel]:
    model = ScriptedModel(paying("send_payment", 100))
    return ReActAgent(name, model, tools=[send_payment]), model


async def pause(runner: Runner, checkpoint_id: str, payee: str) -> RunResult:
    result = await runner.invoke(f"pay {payee}", checkpoint_id=checkpoint_id)
    assert result.interrupt is not None and result.checkpoint_id == checkpoint_id
    return result


async def pending(runner: Runner, prefix: str | None = None) -> dict[str, PendingCheckpoint]:
    found = [entry async for entry in runner.pending(prefix)]
    by_id = {entry.checkpoint_id: entry for entry in found}
    assert len(by_id) == len(found), "an id listed twice"
    return by_id


async def test_pending_shows_what_each_paused_run_waits_on(store: CheckpointStore) -> None:
    agent, model = clerk()
    runner = Runner(agent, checkpoint_store=store)
    before = time.time()
    paused = {
        "tenant-a/1": await pause(runner, "tenant-a/1", "ACME"),
        "tenant-a/2": await pause(runner, "tenant-a/2", "Globex"),
        "tenant-b/1": await pause(runner, "tenant-b/1", "Initech"),
    }
    after = time.time()
    calls, paid_before = len(model.requests), list(paid)

    found = await pending(runner)
    assert sorted(found) == sorted(paused)
    for checkpoint_id, result in paused.items():
        entry = found[checkpoint_id]
        assert entry.error is None
        assert entry.agent == "clerk"
        assert result.interrupt is not None
        assert [p.model_dump() for p in entry.points] == [
            p.model_dump() for p in result.interrupt.points
        ]
        assert entry.point_ids == result.interrupt.point_ids
        assert entry.saved_at is not None and before <= entry.saved_at <= after
        assert entry.run_id  # the paused run's id
    assert found["tenant-a/2"].points[0].info == {
        "type": "approval",
        "tool": "send_payment",
        "arguments": {"payee": "Globex", "amount_cents": 100},
        "tool_call_id": found["tenant-a/2"].points[0].info["tool_call_id"],
    }
    # Reading them ran nothing: no model call, no tool call.
    assert (len(model.requests), paid) == (calls, paid_before)

    assert sorted(await pending(runner, "tenant-a/")) == ["tenant-a/1", "tenant-a/2"]
    assert sorted(await pending(runner, "tenant-b/")) == ["tenant-b/1"]
    assert await pending(runner, "tenant-c/") == {}


async def test_a_resumed_run_leaves_the_list(store: CheckpointStore) -> None:
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    await pause(runner, "run-1", "ACME")
    await pause(runner, "run-2", "Globex")
    assert sorted(await pending(runner)) == ["run-1", "run-2"]

    denied = await runner.invoke_resume("run-1", {"approved": False, "reason": "not today"})
    assert denied.interrupt is None
    assert sorted(await pending(runner)) == ["run-2"]

    # A refused resume (a mistyped decision) keeps it listed; a finished one removes it.
    with pytest.raises(ValueError, match="resume data for approval point"):
        await runner.invoke_resume("run-2", {"approve": True})
    assert sorted(await pending(runner)) == ["run-2"]
    again = await runner.invoke_resume("run-2", "yes")
    assert again.interrupt is None
    assert await pending(runner) == {}


async def test_finished_runs_kept_for_audit_are_not_pending(store: CheckpointStore) -> None:
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store, keep_checkpoints=True)
    await pause(runner, "audit-1", "ACME")
    await pause(runner, "audit-2", "Globex")
    await runner.invoke_resume("audit-1", True)
    assert await store.get("audit-1") is not None  # kept, marked finished
    assert sorted(await listed(store)) == ["audit-1", "audit-2"]  # type: ignore[arg-type]
    assert sorted(await pending(runner)) == ["audit-2"]


async def test_a_listing_reads_each_checkpoints_summary_not_its_history(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A service polling its paused runs paid for every history: each checkpoint was read whole,
    hashed and parsed to show its few points. Only each header's summary is read now (and, in
    the built-in network and file stores, only each checkpoint's first bytes are sent)."""
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    earlier = [Message.user(f"earlier message {n}: " + "x" * 2_000) for n in range(100)]
    for n in range(20):
        result = await runner.invoke(
            [*earlier, Message.user(f"pay payee{n}")], checkpoint_id=f"p{n}"
        )
        assert result.checkpoint_id == f"p{n}"
    decoded: list[bytes] = []
    whole: list[str] = []
    decode = decode_checkpoint

    def counted_decode(data: bytes, checkpoint_id: str = "") -> dict[str, Any]:
        decoded.append(data)
        return decode(data, checkpoint_id)

    get = store.get

    async def counted_get(id: str) -> bytes | None:
        whole.append(id)
        return await get(id)

    monkeypatch.setattr("adk.checkpoint._pending.decode_checkpoint", counted_decode)
    monkeypatch.setattr(store, "get", counted_get)
    found = await pending(runner)
    assert sorted(found) == sorted(f"p{n}" for n in range(20))
    for n in range(20):
        entry = found[f"p{n}"]
        assert entry.error is None and entry.agent == "clerk" and entry.run_id
        assert entry.points[0].info["arguments"] == {"payee": f"payee{n}", "amount_cents": 100}
    assert decoded == []
    if not isinstance(store, InMemoryCheckpointStore):  # its gets hand over what it holds
        assert whole == []


async def test_a_checkpoint_without_a_summary_to_trust_is_read_whole(
    store: CheckpointStore,
) -> None:
    """Saved by an older pyadk (no summary), or with a summary that does not match its checksum,
    a checkpoint is read whole as before; one damaged in its body, its length kept, lists from
    its summary, and its resume refuses it."""
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    result = await pause(runner, "new", "ACME")
    data = await store.get("new")
    assert data is not None
    line, _, payload = data.partition(b"\n")
    header = json.loads(line)
    assert header["size"] == len(payload) and json.loads(header["summary"])["agent"] == "clerk"

    def sealed(changed: dict[str, Any], body: bytes = payload) -> bytes:
        return json.dumps(changed, separators=(",", ":")).encode() + b"\n" + body

    older = {k: v for k, v in header.items() if k not in ("size", "summary", "summary_sha256")}
    forged = json.loads(header["summary"])
    forged["points"][0]["info"]["arguments"]["payee"] = "Mallory"
    damaged = payload.replace(b"pay ACME", b"pay ACMF")
    assert len(damaged) == len(payload) and damaged != payload
    await store.put("older", sealed(older))
    await store.put("forged", sealed({**header, "summary": json.dumps(forged)}))
    await store.put("damaged", sealed(header, damaged))

    found = await pending(runner)
    assert result.interrupt is not None
    points = [p.model_dump() for p in result.interrupt.points]
    for checkpoint_id in ("new", "older", "forged", "damaged"):
        entry = found[checkpoint_id]
        assert entry.error is None and [p.model_dump() for p in entry.points] == points
    with pytest.raises(CheckpointError, match="checksum does not match"):
        await runner.invoke_resume("damaged", True)


async def test_corrupt_checkpoints_are_reported_and_the_listing_goes_on(
    store: CheckpointStore,
) -> None:
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    await pause(runner, "cp-1", "ACME")
    good = await store.get("cp-1")
    assert good is not None
    payload = good.partition(b"\n")[2]

    def resealed(body: dict[str, Any]) -> bytes:
        text = json.dumps(body).encode()
        header = {"format": "pyadk.checkpoint", "version": 1}
        header["sha256"] = hashlib.sha256(text).hexdigest()  # type: ignore[assignment]
        return json.dumps(header).encode() + b"\n" + text

    body = json.loads(payload)
    broken = {
        "cp-2-garbage": b"not a checkpoint at all",
        "cp-3-truncated": good[: len(good) // 2],
        "cp-4-newer": resealed(body).replace(b'"version": 1', b'"version": 9', 1),
        "cp-5-no-points": resealed({**body, "points": []}),
        "cp-6-bad-point": resealed({**body, "points": [{"id": 7}]}),
        "cp-7-unregistered": resealed(
            {**body, "points": [{**body["points"][0], "info": {"__adk_type__": "x.Gone"}}]}
        ),
        "cp-8-no-agent": resealed({k: v for k, v in body.items() if k != "agent"}),
    }
    for checkpoint_id, data in broken.items():
        await store.put(checkpoint_id, data)
    await pause(runner, "cp-9", "Globex")

    found = await pending(runner)
    assert sorted(found) == ["cp-1", *sorted(broken), "cp-9"]
    assert found["cp-1"].error is None and found["cp-9"].error is None
    assert found["cp-9"].points[0].info["arguments"]["payee"] == "Globex"
    errors = {cid: str(found[cid].error) for cid in broken}
    for checkpoint_id, message in errors.items():
        assert isinstance(found[checkpoint_id].error, CheckpointError)
        assert message.startswith(f"checkpoint {checkpoint_id!r} "), message
        entry = found[checkpoint_id]
        assert (entry.agent, entry.run_id, entry.points, entry.saved_at) == (None, None, [], None)
    assert "unreadable header" in errors["cp-2-garbage"]
    assert "checksum does not match" in errors["cp-3-truncated"]
    assert "format version 9" in errors["cp-4-newer"]
    assert "it has no pending points" in errors["cp-5-no-points"]
    assert "is malformed" in errors["cp-6-bad-point"]
    assert "unregistered type 'x.Gone'" in errors["cp-7-unregistered"]
    assert "agent is not a str" in errors["cp-8-no-agent"]
    assert "error=" in repr(found["cp-2-garbage"])

    # Each is refused by a resume the same way, and nothing was lost.
    with pytest.raises(CheckpointError, match="unreadable header"):
        await runner.invoke_resume("cp-2-garbage", True)
    for checkpoint_id, data in broken.items():
        assert await store.get(checkpoint_id) == data


async def test_claims_are_not_pending_checkpoints(store: CheckpointStore) -> None:
    if not isinstance(store, ClaimingCheckpointStore):
        pytest.skip("the in-memory store keeps no claims")
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    await pause(runner, "held", "ACME")
    assert await store.claim("held", "another-worker")  # being resumed elsewhere
    assert await store.claim("claimed-only", "another-worker")
    assert sorted(await pending(runner)) == ["held"]  # still pending until that resume ends
    await store.release("held", "another-worker")
    await store.release("claimed-only", "another-worker")


async def test_runner_pending_lists_only_what_its_agent_can_resume(
    store: CheckpointStore,
) -> None:
    clerk_agent, _ = clerk("clerk")
    other_agent, _ = clerk("treasurer")
    clerks = Runner(clerk_agent, checkpoint_store=store)
    treasurers = Runner(other_agent, checkpoint_store=store)
    await pause(clerks, "c-1", "ACME")
    await pause(treasurers, "t-1", "Globex")
    await store.put("x-broken", b"garbage")  # whose it is cannot be told: both list it

    assert sorted(await pending(clerks)) == ["c-1", "x-broken"]
    assert sorted(await pending(treasurers)) == ["t-1", "x-broken"]
    everyone = [entry async for entry in list_pending(store)]  # type: ignore[arg-type]
    assert sorted(e.checkpoint_id for e in everyone) == ["c-1", "t-1", "x-broken"]
    only = [e.checkpoint_id async for e in list_pending(store, "t", agent="treasurer")]
    assert only == ["t-1"]


async def test_old_checkpoints_without_a_save_time_list_as_none(store: CheckpointStore) -> None:
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    await pause(runner, "old", "ACME")
    async with rewrite_checkpoint(store, "old") as body:
        del body["saved_at"]  # as pyadk wrote them before it recorded the time
    (entry,) = (await pending(runner)).values()
    assert entry.error is None and entry.saved_at is None and entry.point_ids


async def test_a_store_that_cannot_list_is_told_what_to_add() -> None:
    store = ThreeMethodStore()
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    with pytest.raises(TypeError, match=r"ThreeMethodStore has no ids\(\) method: add `def ids"):
        runner.pending()  # at the call, before any iteration
    with pytest.raises(TypeError, match="ListingCheckpointStore"):
        list_pending(store)


async def test_bad_arguments_fail_at_the_call() -> None:
    store = InMemoryCheckpointStore()
    with pytest.raises(TypeError, match="prefix must be a str or None"):
        list_pending(store, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefix must not contain NUL"):
        list_pending(store, "a\x00")
    with pytest.raises(TypeError, match="agent must be an agent's name"):
        list_pending(store, agent=["clerk"])  # type: ignore[arg-type]


class ListingStore(ThreeMethodStore):
    """A user's store that lists its ids, with faults to inject."""

    def __init__(self) -> None:
        super().__init__()
        self.extra_ids: list[str] = []
        self.fail_get: set[str] = set()
        self.closed = False

    async def get(self, id: str) -> bytes | None:
        if id in self.fail_get:
            raise CheckpointStoreError(f"get of {id!r} failed", operation="get", checkpoint_id=id)
        return await super().get(id)

    async def ids(self, prefix: str | None = None) -> AsyncIterator[str]:
        try:
            for id in [*sorted(self.data), *self.extra_ids]:
                if id.startswith(prefix or ""):
                    yield id
        finally:
            self.closed = True


async def test_a_users_listing_store_works_and_ids_gone_meanwhile_are_skipped() -> None:
    store = ListingStore()
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    for n in range(40):  # more than a batch of gets
        await pause(runner, f"run-{n:02d}", f"payee{n}")
    store.extra_ids = ["run-gone"]  # listed, then resumed before its get
    found = [entry.checkpoint_id async for entry in runner.pending()]
    assert found == [f"run-{n:02d}" for n in range(40)]  # the store's order, once each
    assert store.closed

    # Leaving early closes the store's listing.
    store.closed = False
    listing = runner.pending()
    first = await anext(listing)
    assert first.checkpoint_id == "run-00"
    await listing.aclose()
    assert store.closed

    # Awaited, it is the list of what an ``async for`` reads (``await runner.pending()`` failed
    # with Python's "async_generator can't be used in 'await' expression"); after some entries
    # were read, the rest; the store's listing closed either way.
    store.closed = False
    everything = await runner.pending()
    assert [entry.checkpoint_id for entry in everything] == found
    assert store.closed
    store.closed = False
    listing = runner.pending("run-0")
    assert (await anext(listing)).checkpoint_id == "run-00"
    assert [entry.checkpoint_id for entry in await listing] == [f"run-0{n}" for n in range(1, 10)]
    assert store.closed
    assert [entry.checkpoint_id for entry in await list_pending(store, "run-3")] == [
        f"run-3{n}" for n in range(10)
    ]


async def test_a_listing_awaited_twice_is_refused_not_read_as_empty() -> None:
    # A listing is read once: awaited again it gave [], which read as "no run waits" (a poll
    # that keeps one ``runner.pending()`` and awaits it each time saw its inbox empty from the
    # second poll on). It is a RuntimeError naming the fix, as a coroutine awaited twice is.
    store = ListingStore()
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    await pause(runner, "run-1", "payee")
    listing = runner.pending()
    assert [entry.checkpoint_id for entry in await listing] == ["run-1"]
    with pytest.raises(
        RuntimeError, match=r"awaited already and is read once: call runner\.pending\(\)"
    ):
        await listing


class UsersRedisStore:
    """A store a user wrote over Redis with the public protocols only: get/put/delete, ids, and
    heads (each checkpoint's first bytes and length, one pipeline for a batch)."""

    def __init__(self, url: str) -> None:
        self.redis = aioredis.Redis.from_url(url)
        self.prefix = f"u{uuid.uuid4().hex[:8]}:"
        self.gets: list[str] = []
        self.heads_given: Any = None  # what heads gives instead, if set

    async def get(self, id: str) -> bytes | None:
        self.gets.append(id)
        found: bytes | None = await self.redis.get(self.prefix + id)
        return found

    async def put(self, id: str, data: bytes) -> None:
        await self.redis.set(self.prefix + id, data)

    async def delete(self, id: str) -> None:
        await self.redis.delete(self.prefix + id)

    async def ids(self, prefix: str | None = None) -> AsyncIterator[str]:
        async for key in self.redis.scan_iter(match=f"{self.prefix}{prefix or ''}*"):
            yield key.decode()[len(self.prefix) :]

    async def heads(self, ids: list[str], limit: int) -> list[tuple[bytes, int] | None]:
        if self.heads_given is not None:
            given: list[tuple[bytes, int] | None] = self.heads_given
            return given
        pipe = self.redis.pipeline(transaction=False)
        for id in ids:
            pipe.getrange(self.prefix + id, 0, limit - 1)
            pipe.strlen(self.prefix + id)
        found = await pipe.execute()
        return [
            (head, size) if size else None
            for head, size in zip(found[::2], found[1::2], strict=True)
        ]


async def test_a_users_store_with_heads_is_listed_without_reading_histories(
    redis_server: RedisServer,
) -> None:
    """A store of the user's own (only the public protocols) had every checkpoint read whole by a
    listing: the built-in stores' way of sending only each header was private. A store with the
    optional ``heads(ids, limit)`` (``HeadReadingCheckpointStore``) is listed from its headers,
    without a single get; one whose summary cannot be trusted is still read whole."""
    store = UsersRedisStore(redis_server.url)
    assert isinstance(store, HeadReadingCheckpointStore)
    assert not isinstance(ListingStore(), HeadReadingCheckpointStore)
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    for n in range(20):  # more than a batch
        await pause(runner, f"run-{n:02d}", f"payee{n}")
    await store.put("damaged", b"not a checkpoint")
    store.gets.clear()
    found = await pending(runner)
    assert sorted(found) == sorted([f"run-{n:02d}" for n in range(20)] + ["damaged"])
    assert found["run-07"].points[0].info["arguments"]["payee"] == "payee7"
    assert found["damaged"].error is not None
    assert store.gets == ["damaged"]  # read whole, for the error a resume would meet
    await store.redis.aclose()


async def test_built_in_heads_send_first_bytes_and_refuse_bad_arguments(
    store: CheckpointStore,
) -> None:
    """``heads`` is public now (``HeadReadingCheckpointStore``): each store's gives the first
    bytes and the length in the ids' order, None for a missing id (Redis's too: it gave an empty
    value, which the reader then got), and refuses bad arguments before touching its backend."""
    if not isinstance(store, HeadReadingCheckpointStore):
        assert isinstance(store, InMemoryCheckpointStore)  # its gets hand over what it holds
        return
    await store.put("one", b"0123456789")
    await store.put("two", b"ab")
    found = await store.heads(["two", "missing", "one"], 4)
    assert found[0] == (b"ab", 2) and found[2] == (b"0123", 10)
    assert found[1] is None
    with pytest.raises(TypeError, match="heads takes a list of checkpoint ids, got str"):
        await store.heads("one", 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="heads' limit must be a positive int"):
        await store.heads(["one"], 0)
    with pytest.raises(ValueError, match="checkpoint id must not be empty"):
        await store.heads([""], 4)


async def test_a_run_given_a_fresh_id_reads_the_store_once_before_it_runs(
    store: CheckpointStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The look before a named run (is a paused run waiting under its id?) is one read of the
    store: a header where the store reads them (``heads``), else the checkpoint (``get``). A
    fresh id, a new run's usual case (one per turn), is nothing there: Redis's ``heads`` gave
    a missing key as an empty value, too short for a header, so the look then ``get`` it too, a
    second round trip per run for the one answer the first had."""
    reads: list[str] = []
    for name in ("heads", "get"):
        method = getattr(store, name, None)
        if method is not None:

            async def counted(*args: Any, _method: Any = method, _name: str = name) -> Any:
                reads.append(_name)
                return await _method(*args)

            monkeypatch.setattr(store, name, counted)
    model = ScriptedModel(["Hello."])
    result = await Runner(ReActAgent("greeter", model), checkpoint_store=store).invoke(
        "hi", checkpoint_id=f"fresh-{uuid.uuid4().hex}"
    )
    assert result.text == "Hello." and model.calls == 1
    assert reads == (["heads"] if isinstance(store, HeadReadingCheckpointStore) else ["get"])


async def test_heads_that_give_the_wrong_shape_fail_the_listing_saying_so(
    redis_server: RedisServer,
) -> None:
    """A user's ``heads`` that gives something else than one (first bytes, length) or None per
    id, in order, fails the listing naming the store and what it must give, not deep in the
    listing ("zip() argument 2 is shorter")."""
    store = UsersRedisStore(redis_server.url)
    runner = Runner(clerk()[0], checkpoint_store=store)
    await pause(runner, "a", "ACME")
    await pause(runner, "b", "Globex")
    for wrong in ([None], [b"head", b"head"], [(b"head", "12"), None], "ab"):
        store.heads_given = wrong
        with pytest.raises(TypeError) as raised:
            [entry async for entry in runner.pending()]
        message = str(raised.value)
        assert message.startswith("UsersRedisStore.heads(ids, limit) gave ")
        assert "one (first bytes, length) or None per id, in the ids' order" in message
    await store.redis.aclose()


async def test_a_failing_store_ends_the_listing_with_its_error() -> None:
    store = ListingStore()
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    await pause(runner, "a", "ACME")
    await pause(runner, "b", "Globex")
    store.fail_get = {"b"}
    with pytest.raises(CheckpointStoreError, match="get of 'b' failed"):
        [entry async for entry in runner.pending()]


async def test_memory_listing_while_another_threads_loop_writes() -> None:
    # The in-memory store may be shared by event loops in several threads: a listing must not
    # fail with "dictionary changed size during iteration" while another thread puts and deletes.
    store = InMemoryCheckpointStore()
    for n in range(50_000):
        await store.put(f"run-{n}", b"x")
    stop = threading.Event()

    async def churn() -> None:
        n = 0
        while not stop.is_set():
            await store.put(f"other-{n}", b"x")
            if n % 2:
                await store.delete(f"other-{n}")
            n += 1

    writer = threading.Thread(target=asyncio.run, args=(churn(),))
    writer.start()
    try:
        for _ in range(20):
            assert len(await listed(store, "run-")) == 50_000
    finally:
        stop.set()
        writer.join()


# --------------------------------------------------------------------------------------------------
# resuming: a run whose resume is under way is listed as such until the resume ends


def slow_clerk(entered: asyncio.Event, gate: asyncio.Event) -> ReActAgent:
    """A clerk whose approved payment waits on ``gate`` once it has set ``entered``: a resume
    held mid-way."""

    @tool(require_approval=True)
    async def slow_payment(payee: str, amount_cents: int) -> str:
        """Send money once the gate opens."""
        entered.set()
        await gate.wait()
        return f"sent {amount_cents} cents to {payee}"

    model = ScriptedModel(paying("slow_payment", 5))
    return ReActAgent("clerk", model, tools=[slow_payment])


def twin(store: Any) -> Any:
    """Another store object on the same database: what another process's runner would use
    (``None`` for the in-memory store, which is this process's alone)."""
    if isinstance(store, SQLiteCheckpointStore):
        return SQLiteCheckpointStore(store.path)
    if isinstance(store, RedisCheckpointStore):
        return RedisCheckpointStore(store._url, prefix=store.prefix)
    if isinstance(store, PostgresCheckpointStore):
        return PostgresCheckpointStore(store._dsn, table=store.table)
    return None


async def test_a_run_being_resumed_is_listed_as_resuming_until_it_ends(
    store: CheckpointStore,
) -> None:
    gate_entered, gate_open = asyncio.Event(), asyncio.Event()
    runner = Runner(slow_clerk(gate_entered, gate_open), checkpoint_store=store)
    for checkpoint_id, payee in [("r-1", "ACME"), ("r-2", "Globex")]:
        await pause(runner, checkpoint_id, payee)
    found = await pending(runner)
    assert [found[id].resuming for id in ("r-1", "r-2")] == [False, False]

    resume = asyncio.create_task(runner.invoke_resume("r-1", True))
    await gate_entered.wait()  # the approved call runs, held at the gate
    try:
        found = await pending(runner)
        assert sorted(found) == ["r-1", "r-2"]  # still stored: its resume has not ended
        assert (found["r-1"].resuming, found["r-2"].resuming) == (True, False)
        assert "resuming=True" in repr(found["r-1"])
        with pytest.raises(CheckpointError, match="already being resumed"):
            await runner.invoke_resume("r-1", True)

        # Another process sees it through the store's claim (the in-memory store has none).
        other = twin(store)
        if other is not None:
            try:
                seen = {entry.checkpoint_id: entry async for entry in list_pending(other)}
                assert (seen["r-1"].resuming, seen["r-2"].resuming) == (True, False)
            finally:
                await other.aclose()
    finally:
        gate_open.set()
        result = await resume
    assert result.interrupt is None and result.output is not None
    assert result.output.content == "done: sent 5 cents to ACME"
    found = await pending(runner)
    assert sorted(found) == ["r-2"] and not found["r-2"].resuming


async def test_a_claim_another_worker_holds_lists_as_resuming(store: CheckpointStore) -> None:
    if not isinstance(store, ClaimingCheckpointStore):
        pytest.skip("the in-memory store keeps no claims")
    agent, _ = clerk()
    runner = Runner(agent, checkpoint_store=store)
    await pause(runner, "held", "ACME")
    await pause(runner, "free", "Globex")
    assert await store.claim("held", "another-worker")
    found = await pending(runner)
    assert (found["held"].resuming, found["free"].resuming) == (True, False)
    await store.release("held", "another-worker")
    found = await pending(runner)
    assert (found["held"].resuming, found["free"].resuming) == (False, False)


async def test_a_read_only_sqlite_file_never_claimed_lists_nothing_as_resuming(
    tmp_path: Path,
) -> None:
    path = tmp_path / "checkpoints.db"
    async with SQLiteCheckpointStore(path) as writer:
        await pause(Runner(clerk()[0], checkpoint_store=writer), "only", "ACME")
    reader = _ReadOnlySQLiteStore(path)  # no claims table: none was ever taken
    try:
        entries = [entry async for entry in list_pending(reader)]
    finally:
        await reader.aclose()
    assert [(entry.checkpoint_id, entry.resuming) for entry in entries] == [("only", False)]


async def test_a_redis_listing_reads_each_batch_in_one_round_trip(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of 16 checkpoints is one command sent once (a Lua script reading each one's
    head and length and its claim), where it was a pipeline of 48 commands beside an ``MGET``
    on a second connection: two round trips, and three commands per checkpoint for the client
    to pack and parse. Counted by the writes the client makes and by the server's own command
    counts, with a claim held and a checkpoint gone, so the one command still tells both."""
    import redis.asyncio.connection as connection

    store = RedisCheckpointStore(redis_server.url, prefix=f"rt{uuid.uuid4().hex}:")
    raw = aioredis.Redis.from_url(redis_server.url)
    agent, _ = clerk()
    await pause(Runner(agent, checkpoint_store=store), "run-00", "ACME")
    data = await store.get("run-00")
    assert data is not None
    await put_all(store, [f"run-{n:02}" for n in range(1, 40)], data)
    assert await store.claim("run-07", "another-worker")

    sends = 0
    send = connection.AbstractConnection.send_packed_command

    async def counted(self: Any, command: Any, *args: Any, **kwargs: Any) -> None:
        # This store's reads of its batches: not another test's leftover task (a renewal), nor
        # the SCANs, as many as the shared server's other keys make (1000 looked at per SCAN).
        nonlocal sends
        sent = command if isinstance(command, bytes) else b"".join(map(bytes, command))
        sends += store.prefix.encode() in sent and b"\r\nSCAN\r\n" not in sent[:32]
        await send(self, command, *args, **kwargs)

    listing = list_pending(store)
    first = [await listing.__anext__() for _ in range(16)]  # the SCAN and the first batch
    gone = min({f"run-{n:02}" for n in range(40)} - {e.checkpoint_id for e in first} - {"run-07"})
    await store.delete(gone)  # before its batch is read (listed already, unless SCAN is yet to)
    await raw.config_resetstat()
    monkeypatch.setattr(connection.AbstractConnection, "send_packed_command", counted)
    rest = [entry async for entry in listing]
    monkeypatch.undo()
    stats = await raw.info("commandstats")
    found = {entry.checkpoint_id: entry for entry in [*first, *rest]}
    assert sorted(found) == sorted({f"run-{n:02}" for n in range(40)} - {gone})
    assert [id for id, entry in found.items() if entry.resuming] == ["run-07"]
    assert all(entry.error is None and entry.point_ids for entry in found.values())
    # The two batches left (16 and 8 ids), one write each.
    assert sends == 2
    # The claims were read within those, not by an MGET.
    assert "cmdstat_mget" not in stats and stats["cmdstat_eval"]["calls"] >= 2
    await raw.aclose()
    await store.aclose()


async def test_a_redis_store_that_reads_claims_its_own_way_is_listed_through_it(
    redis_server: RedisServer,
) -> None:
    """A subclass whose ``_claimed_ids`` (or ``heads``) differs is listed through its own
    methods, not the built-in store's one-script batch that would stand for them."""

    class Counting(RedisCheckpointStore):
        asked: list[list[str]] = []  # noqa: RUF012

        async def _claimed_ids(self, ids: list[str]) -> set[str]:
            self.asked.append(list(ids))
            return {id for id in ids if id.endswith("1")}

    store = Counting(redis_server.url, prefix=f"own{uuid.uuid4().hex}:")
    agent, _ = clerk()
    await pause(Runner(agent, checkpoint_store=store), "run-0", "ACME")
    data = await store.get("run-0")
    assert data is not None
    await store.put("run-1", data)
    found = {entry.checkpoint_id: entry.resuming async for entry in list_pending(store)}
    assert found == {"run-0": False, "run-1": True}
    assert [sorted(ids) for ids in store.asked] == [["run-0", "run-1"]]
    await store.aclose()


async def test_a_redis_user_that_may_only_read_still_lists_paused_runs(
    redis_server: RedisServer,
) -> None:
    """An operator's listing (``pyadk checkpoint list --redis``, a dashboard) under a Redis user
    that may only read (``+@read``, no ``EVAL``, which is ``@scripting``): the one-script batch
    is refused (``NOPERM``), and the listing reads as the read-only commands it was, not fail,
    the claim still told. Before the fallback, the whole listing failed."""
    prefix = f"ro{uuid.uuid4().hex}:"
    store = RedisCheckpointStore(redis_server.url, prefix=prefix)
    raw = aioredis.Redis.from_url(redis_server.url)
    user = f"reader-{uuid.uuid4().hex}"
    await raw.acl_setuser(
        user, enabled=True, passwords=["+secret"], keys=["*"], commands=["+@read", "+ping"]
    )
    reader = RedisCheckpointStore(
        f"redis://{user}:secret@127.0.0.1:{redis_server.port}/0", prefix=prefix
    )
    try:
        agent, _ = clerk()
        await pause(Runner(agent, checkpoint_store=store), "run-0", "ACME")
        data = await store.get("run-0")
        assert data is not None
        await put_all(store, [f"run-{n}" for n in range(1, 20)], data)
        assert await store.claim("run-3", "another-worker")
        found = {entry.checkpoint_id: entry async for entry in list_pending(reader)}
        assert sorted(found) == sorted(f"run-{n}" for n in range(20))
        assert [id for id, entry in found.items() if entry.resuming] == ["run-3"]
        assert all(entry.error is None and entry.point_ids for entry in found.values())
        # ``heads`` (the look before a named run) reads so too, a missing id as None.
        heads = await reader.heads(["run-0", "gone"], 64)
        assert heads[0] is not None and heads[0][1] == len(data) and heads[1] is None
    finally:
        await raw.acl_deluser(user)
        await raw.aclose()
        await reader.aclose()
        await store.aclose()
