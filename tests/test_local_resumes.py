"""``LocalExecutionEnvironment``'s ``apply(agent, resumes=...)``: the resumes a Flink job takes
(``FlinkKeyedInput.apply(agent, resumes=stream)``, tests/test_flink_resumes.py), read beside the
records and run as records of their keys, so a pipeline that resumes through its stream can run
and be tested here before it goes to Flink. Before, a local pipeline resumed only through
``outputs.resume`` after the fact, and the same resumes were a ``TypeError`` here."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Hashable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis
from flink_job import book
from services import RedisServer

from adk.actions import ActionAgent
from adk.checkpoint import SQLiteCheckpointStore
from adk.execution import KeyedOutput, LocalExecutionEnvironment, RecordError

pytest_plugins = ["services"]

LEDGER = ActionAgent("ledger", actions=[book])


def _answer(paused: KeyedOutput, data: Any = "approved") -> dict[str, Any]:
    """A paused output as a Flink job gives it (the fields a resume reads), with the answer."""
    return {
        "key": paused.key,
        "checkpoint_id": paused.checkpoint_id,
        "run_id": paused.run_id,
        "resume": data,
    }


def _env(tmp_path: Path, **options: Any) -> LocalExecutionEnvironment:
    store = SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))
    return LocalExecutionEnvironment(checkpoint_store=store, **options)


async def _paused(env: LocalExecutionEnvironment, amount: int = 500) -> tuple[KeyedOutput, Any]:
    """A record of ann's that pauses for approval, and the sessions its application kept."""
    first = env.from_list([{"user": "ann", "amount": amount}], key="user").apply(LEDGER)
    [paused] = await first.to_list()
    assert paused.checkpoint_id is not None and paused.interrupt is not None
    return paused, first.sessions


@pytest.mark.parametrize("shape", ["dict", "json", "bytes"])
async def test_a_resume_runs_after_its_keys_records_read_before_it(
    tmp_path: Path, shape: str
) -> None:
    """The resume (as a dict, or the JSON text a Flink source gives) runs on ann's memory as her
    records since the pause left it, its outputs join the stream under the paused run's id, after
    the records' in ``to_list``, and its write is ann's."""
    env = _env(tmp_path)
    paused, sessions = await _paused(env)
    text = json.dumps(_answer(paused))
    resume = {"dict": _answer(paused), "json": text, "bytes": text.encode()}[shape]
    records = [{"user": "ann", "amount": 5}, {"user": "bob", "amount": 2}]

    later = env.from_list(records, key="user").apply(LEDGER, sessions=sessions, resumes=[resume])
    found = await later.to_list()

    assert [(o.key, o.index, o.output) for o in found] == [
        ("ann", 0, 5),
        ("bob", 1, 2),
        ("ann", 0, 505),  # the resume 0, after ann's record read before it
    ]
    resumed = found[-1]
    assert resumed.run_id == paused.run_id and resumed.record == resume
    # How a consumer tells the resume 0's output from record 0's (both have index 0).
    assert [o.resumed for o in found] == [False, False, True]
    assert later.sessions["ann"] == {"memory:ledger": {"balance": 505}}


async def test_a_pause_approved_in_the_loop_resumes_through_the_stream(tmp_path: Path) -> None:
    """The loop approves each pause as it comes through a source of resumes beside the records,
    as a Flink job's approvals topic: the key's next record sees what the resume wrote, and the
    outputs end once both sources have."""
    records: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
    approvals: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def drain(queue: asyncio.Queue[dict[str, Any] | None]) -> AsyncIterator[dict[str, Any]]:
        while (item := await queue.get()) is not None:
            yield item

    applied = (
        _env(tmp_path).from_list(drain(records), key="user").apply(LEDGER, resumes=drain(approvals))
    )
    await records.put({"user": "ann", "amount": 500})
    seen: list[tuple[Hashable, Any]] = []
    async with applied:
        async for output in applied:
            seen.append((output.key, output.output))
            if output.checkpoint_id is not None:
                paused = output
                await approvals.put(_answer(output))
            elif output.run_id == paused.run_id:  # the resume's: ann's next record follows it
                await approvals.put(None)
                await records.put({"user": "ann", "amount": 1})
                await records.put(None)
    assert seen == [("ann", None), ("ann", 500), ("ann", 501)]
    assert applied.sessions == {"ann": {"memory:ledger": {"balance": 501}}}


async def test_resumes_keep_the_keys_memory_in_a_session_store(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    """With ``sessions=`` a ``SessionStore`` (Redis here), the resume reads the key's session
    from the store and puts its writes back, as a record of the key does."""

    class RedisSessions:
        def __init__(self) -> None:
            self.redis = aioredis.Redis.from_url(redis_server.url)
            self.prefix = f"r{uuid.uuid4().hex[:8]}:"

        async def get(self, key: Hashable) -> dict[str, Any] | None:
            stored = await self.redis.get(f"{self.prefix}{key}")
            return None if stored is None else json.loads(stored)

        async def put(self, key: Hashable, values: dict[str, Any]) -> None:
            await self.redis.set(f"{self.prefix}{key}", json.dumps(values))

    store = RedisSessions()
    env = _env(tmp_path)
    first = env.from_list([{"user": "ann", "amount": 500}], key="user")
    [paused] = await first.apply(LEDGER, sessions=store).to_list()
    later = env.from_list([{"user": "ann", "amount": 5}], key="user")
    found = await later.apply(LEDGER, sessions=store, resumes=[_answer(paused)]).to_list()
    assert [o.output for o in found] == [5, 505]
    assert await store.get("ann") == {"memory:ledger": {"balance": 505}}
    await store.redis.aclose()


async def test_a_resume_of_a_key_with_no_session_runs_on_the_one_saved_at_the_pause(
    tmp_path: Path,
) -> None:
    """A key whose memory this application does not hold (a new process without the earlier
    ``sessions``, as a Flink job's resumes of another job's pause) resumes on the session saved
    at the pause, and keeps what it writes for the key's next records."""
    env = _env(tmp_path)
    paused, _ = await _paused(env)
    resumes = [json.dumps(_answer(paused))]
    later = env.from_list([{"user": "bob", "amount": 2}], key="user").apply(LEDGER, resumes=resumes)
    found = await later.to_list()
    assert [(o.key, o.output) for o in found] == [("bob", 2), ("ann", 500)]
    assert later.sessions["ann"] == {"memory:ledger": {"balance": 500}}


async def test_a_tuple_key_given_back_as_a_json_array_is_its_key(tmp_path: Path) -> None:
    """A resume's key read from JSON is an array: as on Flink it is the tuple it was, so the
    resume runs on that key's memory, not beside it."""
    env = _env(tmp_path)
    by_pair = lambda record: (record["user"], record["region"])  # noqa: E731
    first = env.from_list([{"user": "ann", "region": "eu", "amount": 500}], key=by_pair)
    applied = first.apply(LEDGER)
    [paused] = await applied.to_list()
    records = [{"user": "ann", "region": "eu", "amount": 5}]
    later = env.from_list(records, key=by_pair).apply(
        LEDGER, sessions=applied.sessions, resumes=[json.dumps(_answer(paused))]
    )
    assert [o.output for o in await later.to_list()] == [5, 505]
    assert later.sessions == {("ann", "eu"): {"memory:ledger": {"balance": 505}}}


@pytest.mark.parametrize(
    ("resume", "key", "problem"),
    [
        ({"key": "ann", "resume": "approved"}, "ann", "has no checkpoint_id (a non-empty str)"),
        ({"checkpoint_id": "c1", "resume": "approved"}, None, "has no key"),
        ([1, 2], None, "is a list, not a paused output"),
        ("approved", None, "is not JSON"),
        (KeyedOutput("ann", 0, None, checkpoint_id="c1"), None, "is a KeyedOutput: give its key"),
    ],
)
async def test_a_resume_that_names_no_paused_record_is_a_failed_output(
    tmp_path: Path, resume: Any, key: Hashable, problem: str
) -> None:
    """As on Flink: a failed output of its own (``on_error``), not a failed stream, and the
    key's memory is left as it was."""
    env = _env(tmp_path, on_error="emit")
    records = [{"user": "ann", "amount": 5}, {"user": "ann", "amount": 1}]
    applied = env.from_list(records, key="user").apply(LEDGER, resumes=[resume])
    before, after, failed = await applied.to_list()
    assert [before.output, after.output] == [5, 6]
    assert failed.error is not None and failed.error.type == "ValueError"
    assert (failed.key, failed.index, failed.record, failed.output) == (key, 0, resume, None)
    assert problem in failed.error.message and "resume 0" in failed.error.message

    raising = _env(tmp_path).from_list(records, key="user").apply(LEDGER, resumes=[resume])
    with pytest.raises(RecordError) as raised:
        await raising.to_list()
    assert raised.value.record == resume and problem in str(raised.value)
    assert str(raised.value).startswith(f"resume 0 (key {key!r}) failed: ValueError")


async def test_a_resume_of_a_checkpoint_already_resumed_fails_as_a_record(tmp_path: Path) -> None:
    """Resumed once with ``outputs.resume``, the pause is over (its checkpoint deleted): the
    same answer coming again through the stream fails as that resume would, not the stream,
    and does not book the amount twice."""
    env = _env(tmp_path, on_error="emit")
    first = env.from_list([{"user": "ann", "amount": 500}], key="user").apply(LEDGER)
    [paused] = await first.to_list()
    [resumed] = await first.resume(paused, "approved")
    assert resumed.output == 500 and resumed.resumed and not paused.resumed
    again = env.from_list([{"user": "ann", "amount": 5}], key="user")
    applied = again.apply(LEDGER, sessions=first.sessions, resumes=[_answer(paused)])
    record, failed = await applied.to_list()
    assert record.output == 505 and failed.error is not None
    assert failed.error.type == "CheckpointNotFoundError" and failed.record == _answer(paused)
    assert failed.run_id == paused.run_id and failed.resumed and not record.resumed
    assert applied.sessions["ann"] == {"memory:ledger": {"balance": 505}}


def test_resumes_are_refused_at_apply_without_a_key_or_as_one_resume() -> None:
    """Without a key a record keeps no memory: refused as Flink refuses it (a Runner over the
    store resumes such a pause). One resume given alone (a dict or its text, iterable as its
    fields or characters) is refused too, rather than read as resumes that name nothing."""
    env = LocalExecutionEnvironment()
    with pytest.raises(ValueError, match="resumes run as records of their key"):
        env.from_list([{"user": "ann", "amount": 5}]).apply(LEDGER, resumes=[])
    keyed = env.from_list([{"user": "ann", "amount": 5}], key="user")
    for one in ({"key": "ann", "checkpoint_id": "c1"}, '{"key": "ann"}', 3):
        with pytest.raises(TypeError, match="wrap a single resume in a list"):
            keyed.apply(LEDGER, resumes=one)  # type: ignore[arg-type]


async def test_a_failing_source_of_resumes_fails_the_stream_and_closing_stops_it(
    tmp_path: Path,
) -> None:
    """The resumes are a source like the records: one that raises (a broker lost) raises from
    the iteration, whatever ``on_error`` says; one still waiting (an approvals topic) keeps the
    outputs open until they are closed, which stops it too."""

    class BrokerLost(Exception):
        pass

    async def lost() -> AsyncIterator[dict[str, Any]]:
        raise BrokerLost("approvals topic gone")
        yield {}  # an async generator

    env = _env(tmp_path, on_error="emit")
    records = [{"user": "ann", "amount": 5}]
    with pytest.raises(BrokerLost):
        await env.from_list(records, key="user").apply(LEDGER, resumes=lost()).to_list()

    stopped = asyncio.Event()

    async def waiting() -> AsyncIterator[dict[str, Any]]:
        try:
            await asyncio.Event().wait()  # no approval comes
            yield {}
        finally:
            stopped.set()

    applied = env.from_list(records, key="user").apply(LEDGER, resumes=waiting())
    async with applied:
        async for output in applied:
            assert output.output == 5
            break
    assert stopped.is_set()


async def test_a_refused_resumes_reason_is_in_its_outputs_error_and_dict(tmp_path: Path) -> None:
    """A consumer of a pipeline's outputs (a Flink job's JSON) tells a resume already given
    (``"not_found"``) from a busy or broken checkpoint by ``error.reason``, not its message;
    under ``on_error="raise"`` the ``RecordError``'s ``error`` has it too."""
    env = _env(tmp_path, on_error="emit")
    first = env.from_list([{"user": "ann", "amount": 500}], key="user").apply(LEDGER)
    [paused] = await first.to_list()
    await first.resume(paused, "approved")
    again = env.from_list([], key="user").apply(LEDGER, resumes=[_answer(paused)])
    [failed] = await again.to_list()
    assert failed.error is not None and failed.error.reason == "not_found"
    assert failed.to_dict()["error"]["reason"] == "not_found"
    raising = _env(tmp_path).from_list([], key="user").apply(LEDGER, resumes=[_answer(paused)])
    with pytest.raises(RecordError) as raised:
        await raising.to_list()
    assert raised.value.error.reason == "not_found"
