"""A ``SessionStore`` whose ``put`` hangs or fails: a record's session is never lost silently, and
closing the outputs does not wait for such a put for ever."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Hashable
from typing import Any

import pytest
import redis.asyncio as aioredis
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from services import RedisServer

from adk import Interrupt
from adk.actions import ActionAgent, ActionContext, Event, InputEvent, OutputEvent, action
from adk.checkpoint import InMemoryCheckpointStore
from adk.execution import LocalExecutionEnvironment, _session_store

pytest_plugins = ["services"]


class Count(ActionAgent):
    """Counts each key's records in short-term memory."""

    @action(InputEvent)
    async def count(self, event: InputEvent, ctx: ActionContext) -> None:
        seen = ctx.short_term_memory.get("seen", 0) + 1
        ctx.short_term_memory.set("seen", seen)
        ctx.send_event(OutputEvent(output=seen))


class StalledRedis:
    """Sessions as JSON in Redis, whose writes stall until ``released`` is set (a primary that
    stopped answering writes), then write or, with ``fail``, fail."""

    def __init__(self, url: str) -> None:
        self.redis = aioredis.Redis.from_url(url)
        self.prefix = f"s{uuid.uuid4().hex[:8]}:"
        self.putting = asyncio.Event()  # set once ``puts_before_set`` puts have started
        self.puts_before_set = 1
        self.started = 0
        self.released = asyncio.Event()
        self.fail: Exception | None = None

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        stored = await self.redis.get(f"{self.prefix}{key}")
        return None if stored is None else json.loads(stored)

    async def put(self, key: Hashable, values: dict[str, Any]) -> None:
        self.started += 1
        if self.started >= self.puts_before_set:
            self.putting.set()
        await self.released.wait()
        if self.fail is not None:
            raise self.fail
        await self.redis.set(f"{self.prefix}{key}", json.dumps(values))

    async def kept(self, key: str) -> Any:
        stored = await self.redis.get(f"{self.prefix}{key}")
        return None if stored is None else json.loads(stored)


async def _closed_while_putting(
    store: StalledRedis, keys: tuple[str, ...] = ("ann",)
) -> tuple[asyncio.Task[None], Any]:
    """Apply ``Count`` to one record of each key (``'ann'``) and start closing the outputs from
    another task once the records' puts have started and the close has cancelled them."""
    store.puts_before_set = len(keys)
    outputs = LocalExecutionEnvironment().from_list([{"k": key} for key in keys], key="k")
    applied = outputs.apply(Count("count"), sessions=store)

    async def consume() -> None:
        async for _ in applied:
            pass

    consumer = asyncio.create_task(consume())
    await store.putting.wait()
    closing = asyncio.create_task(applied.aclose())
    scheduler = applied._scheduler
    assert scheduler is not None
    await asyncio.sleep(0)  # the close's first step, which cancels the record's worker
    assert scheduler.closed
    return consumer, closing


async def test_closing_cuts_off_a_put_that_hangs_and_names_the_key(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A put that never returned kept ``aclose()`` waiting for ever: a started put was awaited
    to its end through the cancellation. It now has a bounded time to end (here shortened), is
    then cancelled, and ``aclose()`` says which key's session may not be saved."""
    monkeypatch.setattr(_session_store, "CLOSE_GRACE", 0.05)
    store = StalledRedis(redis_server.url)
    consumer, closing = await _closed_while_putting(store)
    with pytest.raises(RuntimeError) as raised:
        await closing
    message = str(raised.value)
    assert "the session of key 'ann' (record 0) may not be saved" in message
    assert "StalledRedis.put did not end within 0.05s" in message
    await consumer  # its loop ended as if the records had
    assert await store.kept("ann") is None
    await store.redis.aclose()


async def test_a_put_that_fails_after_closing_is_reported_not_dropped(
    redis_server: RedisServer,
) -> None:
    """A put that failed while the outputs were being closed was swallowed with the
    cancellation: the key's session was lost and nothing said so. ``aclose()`` raises an error
    naming the key, from the store's own error."""
    store = StalledRedis(redis_server.url)
    store.fail = ConnectionError("the primary went away")
    consumer, closing = await _closed_while_putting(store)
    store.released.set()
    with pytest.raises(RuntimeError) as raised:
        await closing
    assert "the session of key 'ann' (record 0) may not be saved" in str(raised.value)
    assert "StalledRedis.put failed" in str(raised.value)
    assert isinstance(raised.value.__cause__, ConnectionError)
    await consumer
    await store.redis.aclose()


async def test_a_put_that_ends_while_closing_is_kept(redis_server: RedisServer) -> None:
    """The bound does not cut off a put that ends in time: the record's session is kept and the
    close ends without an error."""
    store = StalledRedis(redis_server.url)
    consumer, closing = await _closed_while_putting(store)
    store.released.set()
    await closing
    await consumer
    assert await store.kept("ann") == {"memory:count": {"seen": 1}}
    await store.redis.aclose()


async def test_a_put_longer_than_the_timeout_fails_the_record_naming_the_key(
    redis_server: RedisServer,
) -> None:
    """With a ``timeout``, a record whose put hung held its key for ever, since the timeout
    bounded the run only. The put is bounded by it too: cut off, it fails the record with a
    ``TimeoutError`` naming the key whose session may not be saved; the next record of the key
    runs on what was kept."""
    store = StalledRedis(redis_server.url)
    await store.redis.set(f"{store.prefix}ann", json.dumps({"memory:count": {"seen": 4}}))
    env = LocalExecutionEnvironment(on_error="emit", timeout=0.05)
    applied = env.from_list([{"k": "ann"}], key="k").apply(Count("count"), sessions=store)
    [output] = await applied.to_list()
    assert output.error is not None and output.error.type == "TimeoutError"
    assert "the session of key 'ann' (record 0) may not be saved" in output.error.message
    assert "StalledRedis.put did not end within timeout=0.05s" in output.error.message
    assert await store.kept("ann") == {"memory:count": {"seen": 4}}
    await store.redis.aclose()


async def test_puts_of_several_keys_cut_off_by_the_close_are_each_named(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every key whose session may not be saved is named, not only the first."""
    monkeypatch.setattr(_session_store, "CLOSE_GRACE", 0.05)
    store = StalledRedis(redis_server.url)
    consumer, closing = await _closed_while_putting(store, ("ann", "bob"))
    with pytest.raises(ExceptionGroup) as raised:
        await closing
    assert str(raised.value).startswith("the sessions of 2 keys may not be saved")
    named = sorted(str(error).split(" (record")[0] for error in raised.value.exceptions)
    assert named == ["the session of key 'ann'", "the session of key 'bob'"]
    await consumer
    await store.redis.aclose()


class StalledReads(StalledRedis):
    """Reads that never answer (a replica that stopped), writes that do."""

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_get_longer_than_the_timeout_fails_the_record_naming_the_key(
    redis_server: RedisServer,
) -> None:
    """With a ``timeout``, a record whose key's read hung held its key for ever (the timeout
    bounded the run only). The read is bounded by it too: the record fails with a
    ``TimeoutError`` naming the key, and nothing is put."""
    store = StalledReads(redis_server.url)
    store.released.set()
    env = LocalExecutionEnvironment(on_error="emit", timeout=0.05)
    applied = env.from_list([{"k": "ann"}], key="k").apply(Count("count"), sessions=store)
    [output] = await applied.to_list()
    assert output.error is not None and output.error.type == "TimeoutError"
    assert output.error.message == (
        "record 0 (key 'ann') was not run: StalledReads.get did not end within timeout=0.05s"
    )
    assert store.started == 0 and await store.kept("ann") is None
    await store.redis.aclose()


async def test_a_record_whose_put_fails_names_its_run(redis_server: RedisServer) -> None:
    """A record ran (and was traced), then its key's put failed: its failure had no ``run_id``,
    which is ``None`` only for a record that never ran, so the trace of the run whose writes
    were lost could not be found from it. It names the run now; a record whose read failed,
    which never ran, still names none."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    store = StalledRedis(redis_server.url)
    store.released.set()
    store.fail = ConnectionError("the primary went away")
    env = LocalExecutionEnvironment(on_error="emit", tracer_provider=provider)
    applied = env.from_list([{"k": "ann"}], key="k").apply(Count("count"), sessions=store)
    [failed] = await applied.to_list()
    assert failed.error is not None and failed.error.type == "ConnectionError"
    [root] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent count"]
    assert failed.run_id is not None
    assert failed.run_id == (root.attributes or {}).get("gen_ai.conversation.id")
    assert await store.kept("ann") is None

    class DownReads(StalledRedis):
        async def get(self, key: Hashable) -> dict[str, Any] | None:
            raise ConnectionError("the replica went away")

    unread = DownReads(redis_server.url)
    applied = env.from_list([{"k": "ann"}], key="k").apply(Count("count"), sessions=unread)
    [never] = await applied.to_list()
    assert never.error is not None and never.run_id is None and unread.started == 0
    provider.shutdown()
    await store.redis.aclose()
    await unread.redis.aclose()


class Counted(Event):
    seen: int


class Asks(ActionAgent):
    """Counts the key's records, then asks a person before it says the count."""

    @action(InputEvent)
    async def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        seen = ctx.short_term_memory.get("seen", 0) + 1
        ctx.short_term_memory.set("seen", seen)
        ctx.send_event(Counted(seen=seen))

    @action(Counted)
    async def say(self, event: Counted, ctx: ActionContext) -> None:
        if ctx.resume is None:
            raise Interrupt("say it?")
        ctx.send_event(OutputEvent(output=f"{event.seen}: {ctx.resume.data}"))


async def test_a_paused_record_whose_put_fails_names_its_saved_pause(
    redis_server: RedisServer,
) -> None:
    """A record paused (its checkpoint saved), then its key's put failed: its failure said
    nothing of the pause, which no output named any more, so it could never be resumed. The
    failure names its checkpoint, as a Flink record's failure does for a pause it cannot send,
    and the pause resumes, on the session saved at the pause (the key has none kept)."""
    store = StalledRedis(redis_server.url)
    store.released.set()
    store.fail = ConnectionError("the primary went away")
    env = LocalExecutionEnvironment(on_error="emit", checkpoint_store=InMemoryCheckpointStore())
    applied = env.from_list([{"k": "ann"}], key="k").apply(Asks("asks"), sessions=store)
    [failed] = await applied.to_list()
    assert failed.error is not None and failed.error.type == "ConnectionError"
    assert failed.checkpoint_id is not None and failed.run_id is not None
    store.fail = None
    [resumed] = await applied.resume(failed, "yes")
    assert resumed.output == "1: yes" and resumed.run_id == failed.run_id
    assert await store.kept("ann") == {"memory:asks": {"seen": 1}}
    await store.redis.aclose()
