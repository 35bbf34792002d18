"""Why a checkpoint was refused, told by ``CheckpointError.reason``, not by its message.

A service answers each kind of refusal its own way (docs/service.md): a checkpoint gone (404), one
being resumed (409), a ``max_turns`` too low (422, the client's to raise), one of another pyadk
format version or one this deployment cannot resume (503, the session keeps waiting), bytes no
resume will ever read (410, the session goes on). The example services told them apart by
reading the checkpoint's header line themselves (~45 lines of format knowledge); each raise site
now says which, one word of a fixed set. Every case runs on a real SQLite store.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import pickle
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from test_resume_once import PayOnYes

import adk
from adk import AgentEvent, CheckpointError, RunError, Runner
from adk.checkpoint import SQLiteCheckpointStore, list_pending
from adk.checkpoint._state import _TurnsShort
from adk.runner import _OptionsNotGiven
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent
from prebuilt._instruction import InstructionError, _MissingAtResume

REASONS = {
    "not_found",
    "busy",
    "max_turns",
    "missing_input",
    "other_version",
    "corrupt",
    "incompatible",
    "id_taken",
    "unstorable",
}


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteCheckpointStore]:
    async with SQLiteCheckpointStore(tmp_path / "checkpoints.db") as opened:
        yield opened


@adk.tool(require_approval=True)
async def pay(payee: str) -> str:
    """Pay someone; a person approves each call."""
    return f"paid {payee}"


def _clerk(model: ScriptedModel, *tools: adk.Tool) -> ReActAgent:
    return ReActAgent("clerk", model, tools=list(tools) or [pay])


def _slow_pay(started: asyncio.Event, release: asyncio.Event) -> adk.Tool:
    """``pay``, which sets ``started`` once it runs and pays only when ``release`` is set, so a
    resume that runs it keeps running until the test sets ``release``."""

    @adk.tool(require_approval=True, name="pay")
    async def slow_pay(payee: str) -> str:
        """Pay someone; a person approves each call."""
        started.set()
        await release.wait()
        return f"paid {payee}"

    return slow_pay


def _paying_model() -> ScriptedModel:
    return ScriptedModel([Reply(tool_calls=[tool_call("pay", {"payee": "bob"})]), "Paid."])


async def _paused(runner: Runner, **options: Any) -> str:
    result = await runner.invoke("pay bob", **options)
    assert result.checkpoint_id is not None, result
    return result.checkpoint_id


async def _refusal(runner: Runner, checkpoint_id: str, **options: Any) -> CheckpointError:
    """The ``CheckpointError`` a resume of ``checkpoint_id`` is refused with: raised by its first
    ``__anext__``, or its first event's (a refusal the resume makes before anything runs)."""
    events = runner.resume(checkpoint_id, True, **options)
    try:
        first = await anext(events)
    except CheckpointError as exc:
        return exc
    finally:
        await events.aclose()
    assert isinstance(first.exception, CheckpointError), first
    return first.exception


def test_a_checkpoint_error_says_why_in_a_fixed_set_of_words_kept_across_pickling() -> None:
    """A bare ``CheckpointError`` (your own agent's, raised at resume) is ``"incompatible"``;
    the subclasses say their own; a reason given is kept through ``pickle`` (a process pool, a
    Flink worker); a word outside the set is refused, naming the set."""
    assert CheckpointError("the pause does not fit this agent").reason == "incompatible"
    assert adk.CheckpointNotFoundError("gone").reason == "not_found"
    assert adk.CheckpointBusyError("held").reason == "busy"
    assert _TurnsShort("resume with a higher max_turns", 2).reason == "max_turns"
    assert _OptionsNotGiven("lacks options").reason == "missing_input"
    assert _MissingAtResume(InstructionError("no session value 'name'")).reason == "missing_input"
    for reason in REASONS:
        given = CheckpointError("refused", reason=reason)  # type: ignore[arg-type]
        copy = pickle.loads(pickle.dumps(given))
        assert (type(copy), copy.reason, copy.args) == (CheckpointError, reason, ("refused",))
    with pytest.raises(ValueError, match=r"reason must be one of .*not 'broken'"):
        CheckpointError("refused", reason="broken")  # type: ignore[arg-type]


async def test_not_found_a_checkpoint_never_saved_or_resumed_to_its_end(
    store: SQLiteCheckpointStore,
) -> None:
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store, keep_checkpoints=True)
    assert (await _refusal(runner, "never-saved")).reason == "not_found"
    paused = await _paused(runner)
    await runner.invoke_resume(paused, True)  # kept, marked finished
    refused = await _refusal(runner, paused)
    assert isinstance(refused, adk.CheckpointNotFoundError) and refused.reason == "not_found"


async def test_busy_a_checkpoint_another_resume_runs_now(store: SQLiteCheckpointStore) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    runner = Runner(_clerk(_paying_model(), _slow_pay(started, release)), checkpoint_store=store)
    paused = await _paused(runner)
    first = asyncio.create_task(runner.invoke_resume(paused, True))
    try:
        await started.wait()
        refused = await _refusal(runner, paused)
    finally:
        release.set()  # the first resume ends, whatever this one met
    assert isinstance(refused, adk.CheckpointBusyError) and refused.reason == "busy"
    assert (await first).text == "Paid."


async def test_max_turns_a_resume_left_too_few_model_calls(store: SQLiteCheckpointStore) -> None:
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    paused = await _paused(runner, max_turns=1)  # its one call made: none left for the answer
    refused = await _refusal(runner, paused)
    assert refused.reason == "max_turns" and isinstance(refused, ValueError)
    assert getattr(refused, "max_turns", None) == 1
    assert (await runner.invoke_resume(paused, True, max_turns=2)).text == "Paid."


async def test_missing_input_a_resume_lacking_the_paused_runs_options(
    store: SQLiteCheckpointStore,
) -> None:
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    paused = await _paused(runner, options={"deps": "db"})
    refused = await _refusal(runner, paused)
    assert refused.reason == "missing_input" and isinstance(refused, ValueError)
    assert (await runner.invoke_resume(paused, True, options={"deps": "db"})).text == "Paid."


async def _with_header(store: SQLiteCheckpointStore, checkpoint_id: str, **changes: Any) -> None:
    data = await store.get(checkpoint_id)
    assert data is not None
    line, _, body = data.partition(b"\n")
    header = json.loads(line) | changes
    await store.put(checkpoint_id, json.dumps(header).encode() + b"\n" + body)


@pytest.mark.parametrize("version", [3, 7])
async def test_other_version_a_checkpoint_another_pyadk_release_wrote(
    store: SQLiteCheckpointStore, version: int
) -> None:
    """A newer worker's pause met by an older one in a rolling deploy (or an older format): a
    pyadk of that version resumes it, so a service keeps its session waiting (503)."""
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    paused = await _paused(runner)
    await _with_header(store, paused, version=version)
    assert (await _refusal(runner, paused)).reason == "other_version"
    [listed] = [entry async for entry in list_pending(store)]
    assert listed.error is not None and listed.error.reason == "other_version"


async def _garbage(store: SQLiteCheckpointStore, checkpoint_id: str) -> None:
    await store.put(checkpoint_id, b"\x00 not a checkpoint")


async def _cut(store: SQLiteCheckpointStore, checkpoint_id: str) -> None:
    data = await store.get(checkpoint_id)
    assert data is not None
    await store.put(checkpoint_id, data[:-10])  # the summary header whole, the body cut


async def _edited(store: SQLiteCheckpointStore, checkpoint_id: str) -> None:
    data = await store.get(checkpoint_id)
    assert data is not None and data.endswith(b"}")
    await store.put(checkpoint_id, data[:-1] + b" ")  # the same length: the header's size fits


async def _no_version(store: SQLiteCheckpointStore, checkpoint_id: str) -> None:
    await _with_header(store, checkpoint_id, version="1")  # no version pyadk writes


async def _version_zero(store: SQLiteCheckpointStore, checkpoint_id: str) -> None:
    await _with_header(store, checkpoint_id, version=0)  # 1 since the first release: none older


async def _version_negative(store: SQLiteCheckpointStore, checkpoint_id: str) -> None:
    await _with_header(store, checkpoint_id, version=-3)


async def _malformed(store: SQLiteCheckpointStore, checkpoint_id: str) -> None:
    async with rewrite_checkpoint(store, checkpoint_id) as body:  # sealed again, checksum fine
        body["history"] = "not a history"


@pytest.mark.parametrize(
    "damage",
    [_garbage, _cut, _edited, _no_version, _version_zero, _version_negative, _malformed],
)
async def test_corrupt_bytes_no_resume_will_ever_read(
    store: SQLiteCheckpointStore, damage: Any
) -> None:
    """Not a pyadk checkpoint, truncated, a version no pyadk writes, malformed under a matching
    checksum, a format version below 1 (the format has been version 1 since pyadk's first
    release: no pyadk wrote an older one, so none resumes it; it was read as another release's,
    a 503 for good): nothing makes it resumable, so a service lets its session go on (410). A body
    edited under a whole summary header, its length kept, was read as readable by the example
    services' own parsing (a listing reads the header alone), and answered 503 until someone
    deleted it."""
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    paused = await _paused(runner)
    await damage(store, paused)
    refused = await _refusal(runner, paused)
    assert refused.reason == "corrupt", refused


async def test_incompatible_a_whole_checkpoint_this_runner_cannot_resume(
    store: SQLiteCheckpointStore,
) -> None:
    """Whole, but the runner as it is now does not fit it: another agent's, a tool removed since
    the pause (refused as the resume's first event), a registered type this process lacks. A
    fixed deployment resumes it, so a service keeps its session waiting (503)."""
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    paused = await _paused(runner)
    other = Runner(ReActAgent("another", _paying_model(), tools=[pay]), checkpoint_store=store)
    assert (await _refusal(other, paused)).reason == "incompatible"

    @adk.tool
    def refund(payee: str) -> str:
        """Refund someone."""
        return f"refunded {payee}"

    redeployed = Runner(_clerk(_paying_model(), refund), checkpoint_store=store)
    refused = await _refusal(redeployed, paused)
    assert refused.reason == "incompatible" and "pay" in str(refused)
    async with rewrite_checkpoint(store, paused) as body:
        body["session"] = {"note": {"__adk_type__": "elsewhere.Note", "data": {}}}
    refused = await _refusal(runner, paused)
    assert refused.reason == "incompatible" and "unregistered type" in str(refused)


async def test_id_taken_a_new_run_is_refused_at_its_start_not_once_it_paid_for_its_calls(
    store: SQLiteCheckpointStore,
) -> None:
    """A new run given the id of a checkpoint that still waits was refused only as it paused:
    after its model calls (paid for) and the calls its tools made before the pause, all for
    nothing. It is refused before its agent runs: no model call made."""
    paid: list[str] = []
    runner = Runner(PayOnYes(paid), checkpoint_store=store)
    waiting = await runner.invoke("bob", checkpoint_id="conv-1")
    assert waiting.interrupt is not None
    model = _paying_model()
    second = Runner(_clerk(model), checkpoint_store=store)
    with pytest.raises(RunError, match="'conv-1': a paused run waits there") as refused:
        await second.invoke("pay eve", checkpoint_id="conv-1")
    assert isinstance(refused.value.__cause__, CheckpointError)
    assert refused.value.__cause__.reason == "id_taken"
    events = [event async for event in second.run("pay eve", checkpoint_id="conv-1")]
    [event] = events
    assert isinstance(event.exception, CheckpointError) and event.exception.reason == "id_taken"
    assert model.calls == 0  # refused before the agent asked its model anything
    await runner.invoke_resume("conv-1", True)
    assert paid == ["bob"]
    assert (await second.invoke("hi", checkpoint_id="conv-1")).interrupt is not None  # free


async def test_id_taken_the_refusal_ends_the_run_alike_through_run_and_invoke(
    store: SQLiteCheckpointStore,
) -> None:
    """The refusal is made in one place (``Runner._named_refusal``) for ``run`` and ``invoke``,
    which wrote it apart: each gives ``on_event`` the error event that ends the run (the event
    ``run`` yields), its agent never run."""
    paid: list[str] = []
    await Runner(PayOnYes(paid), checkpoint_store=store).invoke("bob", checkpoint_id="conv-1")
    seen: list[AgentEvent] = []
    model = _paying_model()
    runner = Runner(
        _clerk(model), checkpoint_store=store, callbacks=[adk.Callbacks(on_event=seen.append)]
    )
    with pytest.raises(RunError, match="a paused run waits there") as refused:
        await runner.invoke("pay eve", checkpoint_id="conv-1")
    [event] = [event async for event in runner.run("pay eve", checkpoint_id="conv-1")]
    assert [told.exception for told in seen] == [refused.value.__cause__, event.exception]
    for told in seen:
        assert isinstance(told.exception, CheckpointError), told
        assert told.exception.reason == "id_taken" and told.agent_name == "clerk"
    assert model.calls == 0 and paid == []


async def test_id_taken_a_new_run_under_the_id_a_resume_runs_now(
    store: SQLiteCheckpointStore,
) -> None:
    started, release = asyncio.Event(), asyncio.Event()
    runner = Runner(_clerk(_paying_model(), _slow_pay(started, release)), checkpoint_store=store)
    await runner.invoke("pay bob", checkpoint_id="conv-1")
    resuming = asyncio.create_task(runner.invoke_resume("conv-1", True))
    model = _paying_model()
    try:
        await started.wait()
        new_run = Runner(_clerk(model), checkpoint_store=store).run("x", checkpoint_id="conv-1")
        events = [event async for event in new_run]
    finally:
        release.set()  # the resume ends, whatever the new run met
    [event] = events
    assert isinstance(event.exception, CheckpointError) and event.exception.reason == "id_taken"
    assert "it is being resumed" in str(event.error) and model.calls == 0
    assert (await resuming).text == "Paid."


class _Down(SQLiteCheckpointStore):
    """A store whose reads fail (down), its writes working."""

    async def get(self, id: str) -> bytes | None:
        raise OSError("the store is down")

    async def heads(self, ids: list[str], limit: int) -> list[tuple[bytes, int] | None]:
        raise OSError("the store is down")  # the look reads a checkpoint's header this way


async def test_a_store_down_at_the_start_refuses_nothing_a_run_that_never_pauses_needs(
    tmp_path: Path,
) -> None:
    """The look before the run is an early refusal, not the guard (the pause's save still is):
    a store that fails to answer it refuses no run; one that never pauses needs no store."""
    async with _Down(tmp_path / "down.db") as store:
        model = ScriptedModel(["Hello."])
        result = await Runner(_clerk(model), checkpoint_store=store).invoke(
            "hi", checkpoint_id="conv-1"
        )
    assert result.text == "Hello." and model.calls == 1


class _Unsaved:
    """An object no checkpoint holds."""


class _AsksWithAnObject(adk.BaseAgent):
    async def run(self, input: adk.AgentInput, ctx: adk.RunContext) -> AsyncIterator[AgentEvent]:
        yield ctx.interrupt({"question": "go on?"}, state={"held": _Unsaved()})


async def test_unstorable_a_pause_whose_state_no_checkpoint_holds(
    store: SQLiteCheckpointStore,
) -> None:
    runner = Runner(_AsksWithAnObject("asks"), checkpoint_store=store)
    with pytest.raises(RunError, match="could not save checkpoint") as failed:
        await runner.invoke("go", checkpoint_id="conv-1")
    error = failed.value.__cause__
    assert isinstance(error, CheckpointError) and error.reason == "unstorable", error
    assert await store.get("conv-1") is None


async def _refused_run(runner: Runner, checkpoint_id: str) -> CheckpointError:
    """The refusal a new run under ``checkpoint_id`` gets as its only event."""
    events = [event async for event in runner.run("pay eve", checkpoint_id=checkpoint_id)]
    [event] = events
    assert isinstance(event.exception, CheckpointError), event
    return event.exception


class _CountingGets(SQLiteCheckpointStore):
    """A SQLite store counting its whole reads (``get``); its ``heads`` reads first bytes."""

    gets = 0

    async def get(self, id: str) -> bytes | None:
        self.gets += 1
        return await super().get(id)


async def test_the_look_before_a_named_run_reads_the_checkpoints_header_not_its_bytes(
    tmp_path: Path,
) -> None:
    """A run given the id of a checkpoint kept for audit (``keep_checkpoints=True``: one id per
    conversation, say) read the whole checkpoint and checked and parsed it on the event loop, to
    learn from it the one word its header's summary holds (finished or not): ~90 ms of a blocked
    loop per run for a 20 MB history. It reads the header alone (``heads``, as a listing does);
    a checkpoint whose header holds no summary (an older pyadk's) is read whole, as before."""
    async with _CountingGets(tmp_path / "counted.db") as store:
        runner = Runner(_clerk(_paying_model()), checkpoint_store=store, keep_checkpoints=True)
        await runner.invoke("pay bob", checkpoint_id="conv-1")
        assert (await _refused_run(runner, "conv-1")).reason == "id_taken"  # still waits
        await runner.invoke_resume("conv-1", True)  # kept, marked finished
        store.gets = 0
        model = ScriptedModel(["Hello."])
        result = await Runner(_clerk(model), store, keep_checkpoints=True).invoke(
            "hi", checkpoint_id="conv-1"
        )
        assert result.text == "Hello." and model.calls == 1
        assert store.gets == 0  # its header, not its bytes
        runner = Runner(_clerk(_paying_model()), checkpoint_store=store, keep_checkpoints=True)
        await runner.invoke("pay bob", checkpoint_id="conv-2")
        store.gets = 0
        assert (await _refused_run(runner, "conv-2")).reason == "id_taken"
        assert store.gets == 0
        # No summary in its header (an older pyadk's): read whole, still refused.
        data = await store.get("conv-2")
        assert data is not None
        line, _, body = data.partition(b"\n")
        header = {
            k: v for k, v in json.loads(line).items() if not k.startswith(("summary", "size"))
        }
        await store.put("conv-2", json.dumps(header).encode() + b"\n" + body)
        store.gets = 0
        assert (await _refused_run(runner, "conv-2")).reason == "id_taken"
        assert store.gets == 1


async def test_a_body_nested_past_the_parsers_reach_is_incompatible_as_past_max_depth(
    store: SQLiteCheckpointStore,
) -> None:
    """Values nested deeper than ``MAX_DEPTH`` are ``"incompatible"`` (a pyadk of the bigger
    limit they were saved under resumes them), found where the checkpoint's values are rebuilt;
    nested deeper still, past what this process's JSON parser reaches (a pyadk of that limit
    raises its recursion limit too), the same words, "nested deeper than 200 levels", came with
    ``"corrupt"``, which tells a service to free the session for good."""
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    result = await runner.invoke("pay bob", session={"deep": "nested-here"})
    assert result.checkpoint_id is not None
    data = await store.get(result.checkpoint_id)
    assert data is not None
    line, _, body = data.partition(b"\n")
    assert body.count(b'"nested-here"') == 1
    header = {k: v for k, v in json.loads(line).items() if not k.startswith(("summary", "size"))}
    refused = {}
    for depth in (300, 200_000):
        payload = body.replace(b'"nested-here"', b"[" * depth + b"]" * depth)
        header["sha256"] = hashlib.sha256(payload).hexdigest()
        await store.put(result.checkpoint_id, json.dumps(header).encode() + b"\n" + payload)
        error = await _refusal(runner, result.checkpoint_id)
        refused[depth] = (error.reason, "nested deeper than 200 levels" in str(error))
    assert refused == {300: ("incompatible", True), 200_000: ("incompatible", True)}


@pytest.mark.parametrize("limit", ["MAX_PART_BYTES", "MAX_DEPTH"])
async def test_a_checkpoint_over_this_pyadks_limits_is_incompatible_not_corrupt(
    store: SQLiteCheckpointStore, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    """A part bigger than ``MAX_PART_BYTES``, values nested deeper than ``MAX_DEPTH``: saved
    under a bigger limit (another release's, a deployment that set it), the pyadk of that limit
    resumes it, so it is not bytes no resume will ever read (``"corrupt"``, which frees the
    session, a 410) but ``"incompatible"`` (503, the session waits)."""
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    image = adk.ImagePart(mime_type="image/png", data=b"\x89PNG" + bytes(12))
    nested: Any = "deep"
    for _ in range(20):
        nested = [nested]
    result = await runner.invoke(
        [adk.Message.user("pay bob", parts=[image])], session={"nested": nested}
    )
    assert result.checkpoint_id is not None
    saved = {"MAX_PART_BYTES": 15, "MAX_DEPTH": 10}[limit]
    with monkeypatch.context() as patched:
        patched.setattr(adk.checkpoint.codec, limit, saved)
        refused = await _refusal(runner, result.checkpoint_id)
    assert refused.reason == "incompatible", refused
    assert limit in str(refused) or "nested deeper" in str(refused)
    assert (await runner.invoke_resume(result.checkpoint_id, True)).text == "Paid."


async def test_a_refusals_reason_is_in_its_events_error_and_json(
    store: SQLiteCheckpointStore,
) -> None:
    """A service reading events (a relay, a queue of NDJSON) tells a busy checkpoint from a
    broken one by ``error.reason``, as one holding the exception reads ``exception.reason``:
    the reason was lost where the failure became data (``ErrorInfo``, ``to_dict``)."""
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    paused = await _paused(runner)

    @adk.tool
    def refund(payee: str) -> str:
        """Refund someone."""
        return f"refunded {payee}"

    redeployed = Runner(_clerk(_paying_model(), refund), checkpoint_store=store)  # pay removed
    [refused] = [event async for event in redeployed.resume(paused, True)]
    assert refused.error is not None and refused.error.type == "CheckpointError"
    assert refused.error.reason == "incompatible"
    data = refused.to_dict()
    assert data["error"]["reason"] == "incompatible" and "cause" not in data["error"]
    back = AgentEvent.from_dict(json.loads(json.dumps(data)))
    assert back.error == refused.error and back.to_dict() == data
    new_run = Runner(_clerk(_paying_model()), checkpoint_store=store)
    [taken] = [event async for event in new_run.run("pay eve", checkpoint_id=paused)]
    assert taken.error is not None and taken.error.reason == "id_taken"
    assert taken.to_dict()["error"]["reason"] == "id_taken"

    # The pause that could not be saved: its error names the reason of what refused it.
    unsaved = Runner(_AsksWithAnObject("asks"), checkpoint_store=store)
    [failed] = [event async for event in unsaved.run("go", checkpoint_id="conv-2")]
    assert failed.error is not None and failed.error.type == "CheckpointError"
    assert failed.error.reason == "unstorable"

    # An error that is no CheckpointError has no reason, and its JSON no key (an older reader
    # reads it as before).
    plain = AgentEvent.from_error(ValueError("bad"))
    assert plain.error is not None and plain.error.reason is None
    assert plain.to_dict()["error"] == {"type": "ValueError", "message": "bad"}


@pytest.mark.parametrize(
    ("reason", "problem"),
    [
        (7, r"reason must be a word \(a CheckpointError's reason\) or absent, got int 7"),
        ("", r"reason must be a word \(a CheckpointError's reason\) or absent, got str ''"),
    ],
)
def test_an_events_error_reason_read_from_json_is_a_word(reason: Any, problem: str) -> None:
    error = {"type": "CheckpointError", "message": "refused", "reason": reason}
    data = {"agent_name": "a", "run_path": ["a"], "error": error}
    with pytest.raises(ValueError, match=f"^event error: {problem}"):
        AgentEvent.from_dict(data)


@pytest.mark.parametrize("limit", ["MAX_PART_BYTES", "MAX_DEPTH", "parser"])
async def test_a_checkpoint_over_this_pyadks_limits_is_not_called_malformed(
    store: SQLiteCheckpointStore, monkeypatch: pytest.MonkeyPatch, limit: str
) -> None:
    """The words match the reason: a checkpoint saved under a bigger limit is whole
    (``"incompatible"``, a pyadk of that limit reads it), where "malformed" told an operator
    reading the message that its bytes were broken (what ``"corrupt"`` says)."""
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    image = adk.ImagePart(mime_type="image/png", data=b"\x89PNG" + bytes(12))
    result = await runner.invoke(
        [adk.Message.user("pay bob", parts=[image])], session={"deep": "nested-here"}
    )
    assert result.checkpoint_id is not None
    if limit == "parser":  # past what this process's JSON parser reaches
        data = await store.get(result.checkpoint_id)
        assert data is not None
        line, _, body = data.partition(b"\n")
        header = json.loads(line)
        payload = body.replace(b'"nested-here"', b"[" * 200_000 + b"]" * 200_000)
        header["sha256"] = hashlib.sha256(payload).hexdigest()
        await store.put(result.checkpoint_id, json.dumps(header).encode() + b"\n" + payload)
        refused = await _refusal(runner, result.checkpoint_id)
    else:
        with monkeypatch.context() as patched:
            patched.setattr(adk.checkpoint.codec, limit, {"MAX_PART_BYTES": 15}.get(limit, 1))
            refused = await _refusal(runner, result.checkpoint_id)
    text = str(refused)
    assert refused.reason == "incompatible" and "malformed" not in text, text
    assert "saved under a bigger limit, which a pyadk of that limit reads" in text, text


async def test_a_react_state_of_another_shape_is_not_called_malformed(
    store: SQLiteCheckpointStore,
) -> None:
    """A ReAct state this ``ReActAgent`` does not read (another release's, as pyadk of 26 Nov
    read a later one's), its checksum whole: ``"incompatible"``, said so, not "malformed"."""
    runner = Runner(_clerk(_paying_model()), checkpoint_store=store)
    paused = await _paused(runner)
    async with rewrite_checkpoint(store, paused) as body:
        del body["states"]["agent:clerk"][""]["tail"]
    refused = await _refusal(runner, paused)
    assert refused.reason == "incompatible" and "malformed" not in str(refused), refused
    assert "ReAct state this pyadk's ReActAgent does not read" in str(refused), refused
