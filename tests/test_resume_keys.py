"""A resume names its paused run and a key, and runs as a record of that key (on its memory,
committing to it). The key was not checked against the paused record's, which the checkpoint did
not record: a resume given the wrong key ran the pause on, and committed to, the wrong key's
memory, and a Kafka record's ``bytes`` key given back as JSON text silently split the key's memory
in two. The pause now saves its key, and a resume naming another is a failed output under the
paused run's id (``on_error``) that touches neither key's memory; the pause waits for its own.
Flink's operator is checked in tests/test_flink_resumes.py."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from flink_job import book

from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    CheckpointError,
    Interrupt,
    RunContext,
    Runner,
    cli,
)
from adk.actions import ActionAgent, ActionContext, InputEvent, OutputEvent, action
from adk.checkpoint import PendingCheckpoint, SQLiteCheckpointStore, list_pending
from adk.checkpoint import codec as checkpoint_codec
from adk.checkpoint.codec import decode_checkpoint
from adk.execution import KeyedOutput, LocalExecutionEnvironment, RecordError

LEDGER = ActionAgent("ledger", actions=[book])


def _env(tmp_path: Path, **options: Any) -> LocalExecutionEnvironment:
    """An environment of its own over the one SQLite file, as a process started afresh makes."""
    store = SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))
    return LocalExecutionEnvironment(checkpoint_store=store, **options)


def _answer(paused: KeyedOutput, data: Any = "approved", **fields: Any) -> dict[str, Any]:
    """The paused output as a Flink job gives it, with the answer (and ``fields`` changed)."""
    answer = {"key": paused.key, "checkpoint_id": paused.checkpoint_id, "run_id": paused.run_id}
    return {**answer, "resume": data, **fields}


def _as_bytes(record: dict[str, Any]) -> bytes:
    """The key as a Kafka consumer's message gives it (``message.key()``): bytes."""
    return str(record["user"]).encode()


async def _paused(tmp_path: Path, key: Any = "user") -> tuple[KeyedOutput, dict[Any, Any]]:
    """Ann books 5, bob 7, then ann's 500 pauses for approval (keyed by ``key``)."""
    records = [
        {"user": "ann", "amount": 5},
        {"user": "bob", "amount": 7},
        {"user": "ann", "amount": 500},
    ]
    applied = _env(tmp_path).from_list(records, key=key).apply(LEDGER)
    *_, paused = await applied.to_list()
    assert paused.checkpoint_id is not None
    assert isinstance(applied.sessions, dict)
    return paused, applied.sessions


@pytest.mark.parametrize("shape", ["dict", "json"])
async def test_a_resume_naming_another_key_is_a_failed_output_touching_no_memory(
    tmp_path: Path, shape: str
) -> None:
    """Ann's pause resumed as bob's ran on bob's balance and booked ann's 500 to him (507). It is
    a failed output now, under the paused run's id; neither memory changes, and the pause, kept,
    is resumed with ann's key afterwards."""
    paused, sessions = await _paused(tmp_path)
    before = copy.deepcopy(sessions)
    wrong = _answer(paused, key="bob")
    given = json.dumps(wrong) if shape == "json" else wrong

    refused = _env(tmp_path, on_error="emit").from_list([], key="user")
    applied = refused.apply(LEDGER, sessions=sessions, resumes=[given])
    [failed] = await applied.to_list()
    assert failed.error is not None and failed.error.type == "CheckpointError"
    assert "paused a record of key 'ann', not of key 'bob'" in failed.error.message
    assert (failed.key, failed.run_id, failed.resumed, failed.output) == (
        "bob",
        paused.run_id,
        True,
        None,
    )
    assert sessions == before

    right = _env(tmp_path).from_list([{"user": "bob", "amount": 1}], key="user")
    found = await right.apply(LEDGER, sessions=sessions, resumes=[_answer(paused)]).to_list()
    assert [(o.key, o.output) for o in found] == [("bob", 8), ("ann", 505)]


async def test_outputs_resume_with_another_key_raises_and_touches_no_memory(
    tmp_path: Path,
) -> None:
    """``outputs.resume`` given a paused output whose key was changed fails as a record does
    (``on_error="raise"``: a ``RecordError``), not on bob's memory."""
    paused, sessions = await _paused(tmp_path)
    before = copy.deepcopy(sessions)
    applied = _env(tmp_path).from_list([], key="user").apply(LEDGER, sessions=sessions)
    assert await applied.to_list() == []
    moved = KeyedOutput("bob", paused.index, paused.record, checkpoint_id=paused.checkpoint_id)
    with pytest.raises(RecordError, match="paused a record of key 'ann', not of key 'bob'"):
        await applied.resume(moved, "approved")
    assert sessions == before
    [resumed] = await applied.resume(paused, "approved")
    assert (resumed.key, resumed.output) == ("ann", 505)


async def test_a_bytes_key_given_back_as_json_text_is_refused_not_split(tmp_path: Path) -> None:
    """A Kafka record's key is bytes; the paused output made JSON for an approvals topic carries
    it as text, another key: the resume ran on the session saved at the pause and kept its 505
    under ``"ann"`` beside ``b"ann"``'s 5, which the key's next records read. It is refused now,
    saying why; the paused output's own key (a dict resume) resumes it on ``b"ann"``'s memory."""
    paused, sessions = await _paused(tmp_path, key=_as_bytes)
    assert paused.key == b"ann"
    before = copy.deepcopy(sessions)
    as_text = json.dumps(_answer(paused, key=paused.key.decode()))  # type: ignore[union-attr]

    refused = _env(tmp_path, on_error="emit").from_list([], key=_as_bytes)
    [failed] = await refused.apply(LEDGER, sessions=sessions, resumes=[as_text]).to_list()
    assert failed.error is not None and failed.error.type == "CheckpointError"
    message = failed.error.message
    assert "key b'ann' (a bytes, which is not a JSON value), not of key 'ann'" in message
    assert "message.key().decode()" in message
    assert sessions == before and "ann" not in sessions

    right = _env(tmp_path).from_list([{"user": "ann", "amount": 1}], key=_as_bytes)
    found = await right.apply(LEDGER, sessions=sessions, resumes=[_answer(paused)]).to_list()
    assert [(o.key, o.output) for o in found] == [(b"ann", 6), (b"ann", 506)]
    assert "ann" not in sessions


async def test_a_checkpoint_saved_without_its_key_resumes_unchecked(tmp_path: Path) -> None:
    """A pause saved before pauses saved their key resumes through the stream as it did."""
    paused, sessions = await _paused(tmp_path)
    store = SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))
    assert paused.checkpoint_id is not None
    async with rewrite_checkpoint(store, paused.checkpoint_id) as body:
        assert body.pop("record_key") == {"value": "ann", "index": 2}
    await store.aclose()

    later = _env(tmp_path).from_list([], key="user")
    found = await later.apply(LEDGER, sessions=sessions, resumes=[_answer(paused)]).to_list()
    assert [(o.key, o.output) for o in found] == [("ann", 505)]


class _Desk(BaseAgent):
    """A manager's desk: asks the manager about the case, then says what was decided."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt("refund?")
        else:
            yield AgentEvent.of(f"refund {ctx.resume.data}")


@pytest.mark.parametrize("shared_run_id", [False, True])
async def test_a_runner_of_its_own_inside_a_record_is_not_a_record_of_its_key(
    tmp_path: Path, shared_run_id: bool
) -> None:
    """An action that runs a delegate through a ``Runner`` of its own (an escalation desk every
    key shares, which a manager's record resumes) runs it outside any record's memory. The key
    of the record it ran in leaked into that run: its pause saved ann's key, and the manager's
    record resuming it was refused as ann's pause resumed under another key. Also when the
    delegate's run carries the record's run id (one conversation id for tracing)."""
    desk = Runner(_Desk("desk"), SQLiteCheckpointStore(str(tmp_path / "desk.db")))
    saved: list[dict[str, Any]] = []
    # The manager decides once the case is escalated: the two keys' records run concurrently,
    # and the decision's resume must not claim the case before ann's run has paused there.
    escalated = asyncio.Event()

    @action(InputEvent)
    async def handle(event: InputEvent, ctx: ActionContext) -> None:
        case = event.input["case"]
        if event.input["do"] == "escalate":
            run_id = ctx.run_context.run_id if shared_run_id else None
            paused = await desk.invoke(f"case {case}", checkpoint_id=f"case-{case}", run_id=run_id)
            assert paused.interrupt is not None
            data = await desk.checkpoint_store.get(f"case-{case}")
            assert data is not None
            saved.append(decode_checkpoint(data, f"case-{case}"))
            escalated.set()
            ctx.send_event(OutputEvent(output="escalated"))
        else:
            await escalated.wait()
            ctx.send_event(
                OutputEvent(output=(await desk.invoke_resume(f"case-{case}", "ok")).text)
            )

    records = [
        {"user": "ann", "case": 7, "do": "escalate"},
        {"user": "manager", "case": 7, "do": "decide"},
    ]
    cases = ActionAgent("cases", actions=[handle])
    found = await _env(tmp_path).from_list(records, key="user").apply(cases).to_list()
    assert [(o.key, o.output) for o in found] == [("ann", "escalated"), ("manager", "refund ok")]
    [body] = saved
    assert "record_key" not in body  # the desk's pause is no key's


@action(InputEvent)
def _twice(event: InputEvent, ctx: ActionContext) -> None:
    """Asks a person twice (the amount, then the payee), then books the amount."""
    resume = ctx.resume
    if resume is None:
        raise Interrupt("amount?")
    if resume.data == "amount ok":
        raise Interrupt("payee?")
    balance = ctx.short_term_memory.get("balance", 0) + event.input["amount"]
    ctx.short_term_memory.set("balance", balance)
    ctx.send_event(OutputEvent(output=balance))


@pytest.mark.parametrize("run_id", [None, "not-the-checkpoints"])
async def test_a_resumed_record_pausing_again_saves_its_key_again(
    tmp_path: Path, run_id: str | None
) -> None:
    """The second pause of a record keeps the key, whatever run id its resume gave (none, as a
    resume may be written by hand, or another): the resumed run is the record's own by the
    checkpoint it resumes. A resume of it naming another key is refused too."""
    agent = ActionAgent("twice", actions=[_twice])
    records = [{"user": "ann", "amount": 5}]
    [paused] = await _env(tmp_path).from_list(records, key="user").apply(agent).to_list()
    sessions: dict[Any, Any] = {}
    first = {**_answer(paused, "amount ok"), "run_id": run_id}
    again = _env(tmp_path).from_list([], key="user")
    [second] = await again.apply(agent, sessions=sessions, resumes=[first]).to_list()
    assert second.checkpoint_id == paused.checkpoint_id and second.output is None
    wrong = _answer(paused, "payee ok", key="bob")
    refused = _env(tmp_path, on_error="emit").from_list([], key="user")
    [failed] = await refused.apply(agent, sessions=sessions, resumes=[wrong]).to_list()
    assert failed.error is not None and "not of key 'bob'" in failed.error.message


async def _listed(tmp_path: Path) -> list[Any]:
    store = SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))
    try:
        return await list_pending(store)
    finally:
        await store.aclose()


async def test_a_keyed_pause_is_listed_with_its_key_and_index(tmp_path: Path) -> None:
    """An approvals page listing the pauses could not say which record waits: the pending entry
    had the agent, run id and points, not the key (saved in the body alone) nor the record. It
    has both now, read from the header's summary, and a plain run's pause says it is no record's."""
    paused, _ = await _paused(tmp_path)
    store = SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))
    await Runner(_Desk("desk"), store).invoke("case 9", checkpoint_id="plain")
    await store.aclose()
    entries = {entry.checkpoint_id: entry for entry in await _listed(tmp_path)}
    entry = entries[paused.checkpoint_id]  # type: ignore[index]
    assert (entry.keyed, entry.key, entry.index, entry.run_id) == (True, "ann", 2, paused.run_id)
    assert "key='ann', index=2" in repr(entry)
    plain = entries["plain"]
    assert (plain.keyed, plain.key, plain.index) == (False, None, None)
    assert "key=" not in repr(plain)


async def test_keys_that_are_tuples_or_not_json_are_listed_as_a_resume_names_them(
    tmp_path: Path,
) -> None:
    """A tuple key is listed as a tuple (as a resume from JSON gives it back), a bytes key as its
    repr, which is how its refusal names it."""
    await _paused(tmp_path, key=lambda record: (record["user"], 1))
    [entry] = await _listed(tmp_path)
    assert (entry.keyed, entry.key, entry.index) == (True, ("ann", 1), 2)
    other = tmp_path / "bytes"
    other.mkdir()
    await _paused(other, key=_as_bytes)
    [entry] = await _listed(other)
    assert (entry.keyed, entry.key, entry.index) == (True, "b'ann'", 2)


async def test_a_resumed_records_new_pause_keeps_the_records_index(tmp_path: Path) -> None:
    """A resume through ``apply``'s resumes runs at its own position among them (0 here): the
    pause it makes again is still the record's, listed with the record's index (1), not 0."""
    agent = ActionAgent("twice", actions=[_twice])
    records = [{"user": "bob", "amount": 1}, {"user": "ann", "amount": 5}]
    *_, paused = await _env(tmp_path).from_list(records, key="user").apply(agent).to_list()
    listed = {entry.key: entry.index for entry in await _listed(tmp_path)}
    assert listed == {"bob": 0, "ann": 1}  # (each record asks for its amount)
    again = _env(tmp_path).from_list([], key="user")
    resumes = [_answer(paused, "amount ok")]
    [second] = await again.apply(agent, sessions={}, resumes=resumes).to_list()
    assert second.index == 0 and second.checkpoint_id == paused.checkpoint_id
    [entry] = [e for e in await _listed(tmp_path) if e.checkpoint_id == paused.checkpoint_id]
    assert (entry.key, entry.index, entry.point_ids) == ("ann", 1, ["agent:twice/action:_twice"])


async def test_a_keyed_pause_saved_before_keys_were_listed_lists_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint of a pyadk before this: its key saved without an index, and not in the
    header's summary. It lists as no keyed record's (the summary is all a listing reads), and
    resumes on its key, checked as before; its new pause is listed with its key, no index."""
    agent = ActionAgent("twice", actions=[_twice])
    [paused] = (
        await _env(tmp_path)
        .from_list([{"user": "ann", "amount": 5}], key="user")
        .apply(agent)
        .to_list()
    )
    assert paused.checkpoint_id is not None
    store = SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))
    old = tuple(name for name in checkpoint_codec._SUMMARY if name != "record_key")
    with monkeypatch.context() as patched:
        patched.setattr(checkpoint_codec, "_SUMMARY", old)
        async with rewrite_checkpoint(store, paused.checkpoint_id) as body:
            body["record_key"] = {"value": "ann"}
    await store.aclose()
    [entry] = await _listed(tmp_path)
    assert (entry.keyed, entry.key, entry.index, entry.run_id) == (False, None, None, paused.run_id)
    assert entry.point_ids == ["agent:twice/action:_twice"]

    wrong = _env(tmp_path, on_error="emit").from_list([], key="user")
    [failed] = await wrong.apply(agent, resumes=[_answer(paused, key="bob")]).to_list()
    assert failed.error is not None and "not of key 'bob'" in failed.error.message
    again = _env(tmp_path).from_list([], key="user")
    [second] = await again.apply(agent, resumes=[_answer(paused, "amount ok")]).to_list()
    assert second.checkpoint_id == paused.checkpoint_id
    [entry] = await _listed(tmp_path)
    assert (entry.keyed, entry.key, entry.index) == (True, "ann", None)
    done = _env(tmp_path).from_list([], key="user")
    [last] = await done.apply(agent, resumes=[_answer(paused, "payee ok")]).to_list()
    assert last.output == 5 and await _listed(tmp_path) == []


def test_pyadk_checkpoint_list_and_show_print_a_keyed_pauses_key_and_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line shows what the listing does (in this process: ``main``, not a new one)."""
    paused, _ = asyncio.run(_paused(tmp_path))
    path = str(tmp_path / "checkpoints.db")
    assert paused.checkpoint_id is not None
    assert cli.main(["checkpoint", "list", "--sqlite", path]) == 0
    [line] = capsys.readouterr().out.splitlines()
    assert (json.loads(line)["key"], json.loads(line)["index"]) == ("ann", 2)
    assert cli.main(["checkpoint", "show", paused.checkpoint_id, "--sqlite", path]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["key"], shown["index"]) == ("ann", 2)


async def test_outputs_resume_takes_a_listed_pause(tmp_path: Path) -> None:
    """An approvals page that found the pause through the listing resumes it with the entry, as
    it would with the paused output (which another process read): on its key's memory. An entry
    that names no key, or that could not be read, or anything else, is a ValueError saying
    what resume takes; nothing runs."""
    paused, sessions = await _paused(tmp_path)
    applied = _env(tmp_path).from_list([], key="user").apply(LEDGER, sessions=sessions)
    assert await applied.to_list() == []
    store = SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))
    await Runner(_Desk("desk"), store).invoke("case 9", checkpoint_id="plain")
    entries = {entry.checkpoint_id: entry for entry in await list_pending(store)}
    await store.aclose()
    with pytest.raises(ValueError, match=r"'plain' names no record key .* KeyedOutput\(key="):
        await applied.resume(entries["plain"], "ok")
    with pytest.raises(ValueError, match=r"or its entry in list_pending, got \{'key': 'ann'\}"):
        await applied.resume({"key": "ann"}, "approved")  # type: ignore[arg-type]
    unreadable = PendingCheckpoint("gone", error=CheckpointError("checkpoint 'gone' is damaged"))
    with pytest.raises(ValueError, match="its listing could not read it"):
        await applied.resume(unreadable, "approved")
    assert sessions["ann"]["memory:ledger"]["balance"] == 5  # nothing ran
    [resumed] = await applied.resume(entries[paused.checkpoint_id], "approved")  # type: ignore[index]
    assert (resumed.key, resumed.index, resumed.output) == ("ann", 2, 505)
    assert resumed.run_id == paused.run_id and resumed.resumed


async def test_outputs_resume_of_a_listed_pause_whose_key_is_no_json_value_says_what_to_give(
    tmp_path: Path,
) -> None:
    """A bytes key (a Kafka message's) is listed as its repr, which is no key of any record:
    ``outputs.resume(entry)`` ran the resume on the key ``"b'ann'"``, whose refusal then told
    the caller to resume with the paused output itself through ``outputs.resume``, which it
    had just called. It is a ValueError now, before anything runs, saying what to give."""
    paused, sessions = await _paused(tmp_path, key=_as_bytes)
    before = copy.deepcopy(sessions)
    [entry] = await _listed(tmp_path)
    assert (entry.keyed, entry.key) == (True, "b'ann'")
    applied = _env(tmp_path).from_list([], key=_as_bytes).apply(LEDGER, sessions=sessions)
    assert await applied.to_list() == []
    with pytest.raises(ValueError, match=r"key b'ann' \(a bytes, which a listing shows as its "):
        await applied.resume(entry, "approved")
    assert sessions == before
    [resumed] = await applied.resume(paused, "approved")  # the pause waits for its own key
    assert (resumed.key, resumed.output) == (b"ann", 505)
