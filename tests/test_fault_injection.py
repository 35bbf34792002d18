"""Fault injection across composite agents (the trees of ``faults.TREES``).

Each test drives a tree and breaks it at a point hypothesis picks: the reader closes the run after
N events, or is cancelled after N loop steps, once or at every step from then on (as anyio's
cancel scopes do), or from inside the N-th model call, tool call or callback; the N-th of those
raises, or raises ``CancelledError`` (something it awaited was cancelled by someone else); the
checkpoint store fails its N-th operation. Whatever broke, the run leaves nothing behind (no
task, no async generator left to the garbage collector, no error logged by the loop, no warning,
no claim or in-process guard), a failure surfaces as one clear error and never as the reader's
cancellation, the store holds exactly the checkpoints of the pauses the reader was told about
(and a failed or abandoned resume keeps its checkpoint, changed only by the records of the
calls it ran, which then resumes), and the same runner
then runs the tree again to the outcome of an undisturbed run.

The examples are derandomized, so a failure is reproducible: hypothesis prints the example
(tree, ending, point) that broke it, and the shrinker makes it the smallest one it can find.
Found so far: callbacks' and stores' own ``CancelledError`` passing for the reader's
cancellation, claims left behind by a resume cancelled through an anyio cancel scope, a store's
own release error raised over a resume that had finished, and an ``invoke`` cancelled after its
pause was saved leaving the checkpoint under an id nobody could learn.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from faults import (
    APPROVE,
    TREES,
    FaultCallbacks,
    Faults,
    Outcome,
    Watch,
    cancel_from,
    expect_clean,
    read_all,
    run_to_end,
)
from hypothesis import HealthCheck, given, settings
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

import adk
from adk import AgentEvent, Message, RunError, Runner
from adk.checkpoint import (
    CheckpointStore,
    CheckpointStoreError,
    InMemoryCheckpointStore,
    SQLiteCheckpointStore,
)
from adk.checkpoint._snapshot import parse_body
from adk.checkpoint.codec import decode_checkpoint
from adk.interrupts import AGENT_STATE
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

EXAMPLES = settings(
    derandomize=True,  # the same examples every run: a failure is reproducible
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

tree_names = st.sampled_from(sorted(TREES))

_references: dict[tuple[str, bool, bool], Outcome] = {}


async def reference(tree: str, pause: bool, streaming: bool) -> Outcome:
    """The outcome of an undisturbed run (approving every pause), once per kind of run."""
    key = (tree, pause, streaming)
    if key not in _references:
        faults = Faults()
        runner = Runner(TREES[tree](faults, pause), enable_streaming=streaming)
        _references[key] = await run_to_end(runner, faults)
    return _references[key]


def pending_points(data: bytes) -> list[str]:
    return [p.id for p in parse_body(decode_checkpoint(data, "x"), "x").signal.points]


def stored_ids(store: InMemoryCheckpointStore) -> set[str]:
    return set(store._data)


def assert_only_records_added(now: bytes | None, before: bytes | None, what: str) -> None:
    """``now`` is ``before`` but for what a resume's records add (``adk.checkpoint._progress``):
    a ``done`` list in a ``ReActAgent``'s state where the pause had none, more answers in an
    ``ActionAgent`` tool action's ``done`` (by ``places``, with their ``structured`` values: the
    answers the pause saved kept, each at its place), the ids of the points those calls settled
    (``settled``), and the session as the recorded calls left it. Nothing else may differ
    (points, history, every other state, the run's ids and usage), and with no record the bytes
    are the same."""
    if now is None or before is None or now == before:
        assert now == before, what
        return
    body = decode_checkpoint(now, "now")
    was = decode_checkpoint(before, "before")
    recorded = False
    for address, slots in body["states"].items():
        own = slots.get(AGENT_STATE) if isinstance(slots, dict) else None
        paused = was["states"].get(address, {}).get(AGENT_STATE)
        if isinstance(own, dict) and "done" in own and "done" not in (paused or {}):
            del own["done"]
            recorded = True
        elif isinstance(own, dict) and isinstance(paused, dict) and "places" in paused:
            answers = dict(zip(own["places"], own["done"], strict=True))
            saved = dict(zip(paused["places"], paused["done"], strict=True))
            if len(answers) > len(saved):  # a tool action's round recorded answers
                assert all(answers.get(place) == m for place, m in saved.items()), what
                for key in _ANSWERS:
                    own.pop(key, None)
                own.update({key: paused[key] for key in _ANSWERS if key in paused})
                recorded = True
    assert recorded, f"{what} (and added no record): {_differences(body, was)}"
    body.pop("settled", None)
    body["session"] = was["session"]  # the record saves the session the recorded calls wrote
    assert body == was, f"{what} beyond adding records: {_differences(body, was)}"


_ANSWERS = ("done", "places", "structured")
"""What an ``ActionAgent``'s tool action saves of its answers, which its round's records extend."""


def _differences(now: dict[str, Any], was: dict[str, Any]) -> str:
    """Which parts of two bodies differ (the states by address), for a failure's message."""
    parts = sorted(k for k in now.keys() | was.keys() if k != "states" and now.get(k) != was.get(k))
    states, before = now.get("states", {}), was.get("states", {})
    parts += [
        f"states[{a!r}]: {states.get(a)!r:.300} was {before.get(a)!r:.300}"
        for a in sorted(states.keys() | before.keys())
        if states.get(a) != before.get(a)
    ]
    return "; ".join(parts)


# -- a run ended anywhere -----------------------------------------------------------------------

ENDINGS = ["closed", "cancelled", "cancelled again", "cancelled at a point"]


@settings(EXAMPLES, max_examples=200)
@given(
    tree=tree_names,
    pause=st.booleans(),
    streaming=st.booleans(),
    ending=st.sampled_from(ENDINGS),
    at=st.integers(0, 60),
    invoked=st.booleans(),
    callbacks=st.booleans(),
)
def test_a_run_ended_anywhere_leaves_nothing_behind_and_runs_again(
    tree: str, pause: bool, streaming: bool, ending: str, at: int, invoked: bool, callbacks: bool
) -> None:
    """Read with ``run`` or collected by ``invoke`` (which reports a pause only as it returns);
    with callbacks, which are cancellation points too."""
    asyncio.run(_run_ended(tree, pause, streaming, ending, at, invoked, callbacks))


async def _run_ended(
    tree: str, pause: bool, streaming: bool, ending: str, at: int, invoked: bool, callbacks: bool
) -> None:
    expected = await reference(tree, pause, streaming)
    faults = Faults()
    store = InMemoryCheckpointStore()
    hooks = [FaultCallbacks(faults)] if callbacks else []
    runner = Runner(TREES[tree](faults, pause), store, enable_streaming=streaming, callbacks=hooks)
    seen: list[AgentEvent] = []

    async def collect() -> None:
        with contextlib.suppress(RunError):
            result = await runner.invoke("go")
            seen.extend(result.events)

    with Watch() as watch:
        if ending == "closed":
            async with contextlib.aclosing(runner.run("go")) as events:
                async for event in events:
                    seen.append(event)
                    if len(seen) > at:
                        break
        else:
            reader = asyncio.ensure_future(
                collect() if invoked else read_all(runner.run("go"), seen)
            )
            if ending == "cancelled at a point":
                faults.arm(at, "cancel_reader")
                faults.reader = reader
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
            else:
                await cancel_from(reader, at, again=ending == "cancelled again")
    expect_clean(watch, "after the run ended")
    told = {e.interrupted.checkpoint_id for e in seen if e.interrupted is not None}
    assert stored_ids(store) == told, "the store holds other checkpoints than those reported"

    faults.arm(-1, "raise")
    faults.log.clear()
    assert await run_to_end(runner, faults) == expected


# -- a failure anywhere -------------------------------------------------------------------------


class _OpenSpans(SpanProcessor):
    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.open[span.context.span_id] = span.name

    def on_end(self, span: Any) -> None:
        self.open.pop(span.context.span_id, None)


@settings(EXAMPLES, max_examples=200)
@given(
    tree=tree_names,
    pause=st.booleans(),
    streaming=st.booleans(),
    failure=st.sampled_from(["raise", "cancelled_error"]),
    at=st.integers(1, 80),
)
def test_a_failure_anywhere_is_one_clear_error_never_a_cancellation(
    tree: str, pause: bool, streaming: bool, failure: str, at: int
) -> None:
    """Model calls, tool calls, custom agents and every callback (traced: spans end, and every
    agent started ends) raise, or raise ``CancelledError`` of their own."""
    asyncio.run(_failure(tree, pause, streaming, failure, at))


async def _failure(tree: str, pause: bool, streaming: bool, failure: str, at: int) -> None:
    expected = await reference(tree, pause, streaming)
    faults = Faults()
    spans = _OpenSpans()
    tracing = TracerProvider()
    tracing.add_span_processor(spans)
    callbacks = FaultCallbacks(faults)
    runner = Runner(
        TREES[tree](faults, pause),
        enable_streaming=streaming,
        callbacks=[callbacks],
        tracer_provider=tracing,
    )
    seen: list[AgentEvent] = []
    with Watch() as watch:
        faults.arm(at, failure)
        reader = asyncio.ensure_future(read_all(runner.run("go"), seen))
        await reader  # neither cancelled nor failing: a failure is an event
    expect_clean(watch, "after the failure")
    errors = [e for e in seen if e.error is not None]
    assert errors in ([], seen[-1:]), "one error, ending the run"
    if errors:
        text = str(errors[0].error)  # a model stream's own CancelledError: "was cancelled"
        assert any(w in text for w in ("injected fault", "CancelledError", "cancelled")), text
    assert not spans.open, f"spans never ended: {spans.open}"
    assert not +callbacks.open_agents, f"agents never ended: {+callbacks.open_agents}"

    faults.arm(-1, "raise")
    faults.log.clear()
    assert await run_to_end(runner, faults) == expected


# -- a resume ended anywhere --------------------------------------------------------------------


@settings(EXAMPLES, max_examples=100)
@given(
    tree=tree_names,
    streaming=st.booleans(),
    sqlite=st.booleans(),
    ending=st.sampled_from([*ENDINGS, "raise", "cancelled_error"]),
    at=st.integers(0, 40),
)
def test_a_resume_ended_anywhere_keeps_a_checkpoint_that_resumes(
    tmp_path_factory: Any, tree: str, streaming: bool, sqlite: bool, ending: str, at: int
) -> None:
    """Closed, cancelled (through its claim, its store operations and their release too, on
    SQLite), or failing: the checkpoint is the one paused, but for the records of the calls the
    resume ran (or, when the resume paused again, the new one), the claim is free, and resuming
    it to the end gives the undisturbed outcome."""
    path = tmp_path_factory.mktemp("resume") / "checkpoints.db"
    asyncio.run(_resume_ended(path if sqlite else None, tree, streaming, ending, at))


async def _resume_ended(
    path: Path | None, tree: str, streaming: bool, ending: str, at: int
) -> None:
    expected = await reference(tree, True, streaming)
    faults = Faults()
    store: Any = SQLiteCheckpointStore(path) if path is not None else InMemoryCheckpointStore()
    try:
        runner = Runner(TREES[tree](faults, True), store, enable_streaming=streaming)
        first = await runner.invoke("go", checkpoint_id="cp")
        assert first.interrupt is not None
        before = await store.get("cp")
        approvals = dict.fromkeys(first.interrupt.point_ids, APPROVE)
        seen: list[AgentEvent] = []
        ended_well = False
        with Watch() as watch:
            if ending == "closed":
                async with contextlib.aclosing(runner.resume("cp", approvals)) as events:
                    async for event in events:
                        seen.append(event)
                        if len(seen) > at:
                            break
                    else:
                        ended_well = True
            else:
                reader = asyncio.ensure_future(read_all(runner.resume("cp", approvals), seen))
                faults.reader = reader
                if ending in ("raise", "cancelled_error", "cancelled at a point"):
                    faults.arm(at, "cancel_reader" if ending == "cancelled at a point" else ending)
                    with contextlib.suppress(asyncio.CancelledError):
                        await reader
                    ended_well = not reader.cancelled()
                else:
                    await cancel_from(reader, at, again=ending == "cancelled again")
                    ended_well = not reader.cancelled()
        expect_clean(watch, "after the resume ended")
        if path is not None:
            assert await store.claim("cp", "probe"), "the claim was left behind"
            await store.release("cp", "probe")
        now = await store.get("cp")
        paused_again = any(e.interrupted is not None for e in seen)
        failed = any(e.error is not None for e in seen)
        if failed and not paused_again:
            # Not byte-identical any more: the resume records each approved call that ran
            # (``done``), so that resuming the checkpoint again does not run it again.
            assert_only_records_added(now, before, "a resume that failed changed its checkpoint")
        elif not ended_well and now is not None and now != before:
            # Cancelled while a store in a thread wrote the checkpoint of its next pause, which
            # may land all the same: a whole checkpoint, that resumes (below).
            assert pending_points(now)
        if now is None:  # finished (a cancellation may come as the finished run deletes it)
            assert not failed
            if ending not in ("raise", "cancelled_error"):  # (a failing tool is a tool error)
                assert set(faults.log) >= set(expected.work), "it went before its work was done"
            return
        faults.arm(-1, "raise")
        result = await runner.invoke_resume("cp", dict.fromkeys(pending_points(now), APPROVE))
        outcome = await run_to_end(runner, faults, result)
        # Work the abandoned resume did runs again (documented): compare what it ended with.
        assert (outcome.text, outcome.session) == (expected.text, expected.session)
        assert await store.get("cp") is None
    finally:
        if path is not None:
            await store.aclose()


# -- the store failing --------------------------------------------------------------------------


class _FailingStore:
    """A store that fails its ``at``-th operation (get, put, delete, claim; counted together)
    with ``failure``, over a real store (claims: a SQLite one)."""

    def __init__(self, inner: Any, at: int, failure: str) -> None:
        self.inner = inner
        self.at = at
        self.failure = failure
        self.count = 0
        if hasattr(inner, "claim_ttl"):
            self.claim_ttl = inner.claim_ttl

    async def _operation(self, name: str) -> None:
        self.count += 1
        if self.count != self.at:
            return
        if self.failure == "CancelledError":  # it awaited something someone else cancelled
            cancelled = asyncio.get_running_loop().create_future()
            cancelled.cancel()
            await cancelled
        error = CheckpointStoreError if self.failure == "CheckpointStoreError" else OSError
        raise error(f"injected {name} failure")

    async def get(self, id: str) -> bytes | None:
        await self._operation("get")
        return await self.inner.get(id)  # type: ignore[no-any-return]

    async def put(self, id: str, data: bytes) -> None:
        await self._operation("put")
        await self.inner.put(id, data)

    async def delete(self, id: str) -> None:
        await self._operation("delete")
        await self.inner.delete(id)


class _FailingClaimingStore(_FailingStore):
    async def claim(self, id: str, owner: str) -> bool:
        await self._operation("claim")
        return await self.inner.claim(id, owner)  # type: ignore[no-any-return]

    async def release(self, id: str, owner: str) -> None:
        await self.inner.release(id, owner)  # its failures: test_resume_claims


@settings(EXAMPLES, max_examples=80)
@given(
    tree=tree_names,
    sqlite=st.booleans(),
    at=st.integers(1, 14),
    failure=st.sampled_from(["CheckpointStoreError", "OSError", "CancelledError"]),
)
def test_a_store_failing_at_any_operation_loses_nothing(
    tmp_path_factory: Any, tree: str, sqlite: bool, at: int, failure: str
) -> None:
    """Pausing and resuming to the end, retrying what failed: every failure is an error that
    names it (never a cancellation), the checkpoint of the last pause survives it, and the run
    ends as an undisturbed one does."""
    path = tmp_path_factory.mktemp("store") / "checkpoints.db"
    asyncio.run(_store_failing(path if sqlite else None, tree, at, failure))


async def _store_failing(path: Path | None, tree: str, at: int, failure: str) -> None:
    expected = await reference(tree, True, False)
    inner: Any = SQLiteCheckpointStore(path) if path is not None else InMemoryCheckpointStore()
    store = (_FailingClaimingStore if path is not None else _FailingStore)(inner, at, failure)
    faults = Faults()
    runner = Runner(TREES[tree](faults, True), store)
    try:
        with Watch() as watch:
            approvals: dict[str, Any] | None = None
            saved: bytes | None = None
            result = None
            for _ in range(20):
                try:
                    if approvals is None:
                        result = await runner.invoke("go", checkpoint_id="cp")
                    else:
                        result = await runner.invoke_resume("cp", approvals)
                except (RunError, CheckpointStoreError) as exc:  # a store's OSError too
                    assert "injected" in str(exc) or "CancelledError" in str(exc), exc
                    assert_only_records_added(
                        await inner.get("cp"), saved, "a failure lost or changed a checkpoint"
                    )
                    if approvals is None:
                        faults.log.clear()  # the first run starts over
                    continue
                if result.interrupt is None:
                    break
                saved = await inner.get("cp")
                assert saved is not None
                approvals = dict.fromkeys(result.interrupt.point_ids, APPROVE)
            assert result is not None and result.interrupt is None
        expect_clean(watch, "after the store failed")
        assert result.text == expected.text
        assert await inner.get("cp") is None
    finally:
        if path is not None:
            await inner.aclose()


class _OwnStore:
    """A store of your own: the protocol's three methods and a claim (a dict's), over the
    in-memory store, raising an ``OSError`` of its own at the ``nth`` next ``failing`` operation."""

    claim_ttl = 30.0

    def __init__(self) -> None:
        self.inner = InMemoryCheckpointStore()
        self.claims: dict[str, str] = {}
        self.failing = ""
        self.nth = 0

    def _maybe_fail(self, operation: str) -> None:
        if operation == self.failing:
            self.nth -= 1
            if self.nth == 0:
                self.failing = ""
                raise OSError(f"injected {operation} failure")

    async def get(self, id: str) -> bytes | None:
        self._maybe_fail("get")
        return await self.inner.get(id)

    async def put(self, id: str, data: bytes) -> None:
        self._maybe_fail("put")
        await self.inner.put(id, data)

    async def delete(self, id: str) -> None:
        self._maybe_fail("delete")
        await self.inner.delete(id)

    async def claim(self, id: str, owner: str) -> bool:
        self._maybe_fail("claim")
        return self.claims.setdefault(id, owner) == owner

    async def release(self, id: str, owner: str) -> None:
        if self.claims.get(id) == owner:
            del self.claims[id]


async def _paused_payment(store: CheckpointStore, **options: Any) -> tuple[Runner, list[str]]:
    """A runner over ``store`` (``options``: the runner's) whose run paused at checkpoint
    ``"cp"`` for the approval of a payment to bob (call id ``c1``), and the payees paid, a list
    the approved call appends to; the resumed run answers "done"."""
    paid: list[str] = []

    @adk.tool(require_approval=True)
    def pay(payee: str) -> str:
        """Pay someone."""
        paid.append(payee)
        return f"paid {payee}"

    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == "tool":
            return Reply(text="done")
        return Reply(tool_calls=[tool_call("pay", {"payee": "bob"}, id="c1")])

    agent = ReActAgent("payer", ScriptedModel(reply), tools=[pay])
    runner = Runner(agent, checkpoint_store=store, **options)
    paused = await runner.invoke("pay bob", checkpoint_id="cp")
    assert paused.interrupt is not None
    return runner, paid


@pytest.mark.parametrize(
    ("failing", "nth", "keep", "ran"),
    [
        ("claim", 1, False, False),
        ("get", 1, False, False),  # loading the checkpoint
        ("get", 3, False, True),  # the finish's look (the second: the record's)
        ("delete", 1, False, True),
        ("put", 2, True, True),  # marking a kept checkpoint finished (the first put: a record)
    ],
    ids=["claim", "load", "finish-get", "finish-delete", "finish-mark"],
)
async def test_a_store_of_your_own_failing_is_a_checkpoint_store_error_at_every_operation(
    failing: str, nth: int, keep: bool, ran: bool
) -> None:
    """A store of your own raising its own ``OSError`` fails a resume with the
    ``CheckpointStoreError`` a built-in store's failure is, its ``OSError`` the cause, at the
    resume's start (nothing ran: send the decision again) and at its end, where it is the
    ``finished, but the checkpoint could not be ...`` error that says the resume ran: a bare
    ``OSError`` there read, to a service, like a store down before anything ran, and sending the
    decision again ran the approved call twice. Saving a pause and recording a call already
    took any exception (an error event, a warning)."""
    store = _OwnStore()
    runner, paid = await _paused_payment(store, keep_checkpoints=keep)
    store.failing, store.nth = failing, nth
    with pytest.raises(CheckpointStoreError) as raised:
        await runner.invoke_resume("cp", True)
    error = raised.value
    cause = error.__cause__  # at the end, through the store's error the finish's words wrap
    while isinstance(cause, CheckpointStoreError):
        cause = cause.__cause__
    assert isinstance(cause, OSError)
    assert error.operation == failing and error.checkpoint_id == "cp"
    assert f"injected {failing} failure" in str(error)
    assert paid == (["bob"] if ran else [])
    finished = "the resumed run of checkpoint 'cp' finished, but the checkpoint could not be"
    assert (finished in str(error)) is ran, str(error)
    if not ran:  # nothing ran: the same decision resumes it once the store answers
        assert (await runner.invoke_resume("cp", True)).text == "done"
        assert paid == ["bob"]


class _RefusingStore(_OwnStore):
    """A store of your own that refuses with pyadk's own classes on purpose: a missing
    checkpoint as ``CheckpointNotFoundError`` (rather than None), a claim held elsewhere as
    ``CheckpointBusyError`` (rather than False), bytes it cannot decrypt as ``CheckpointError``."""

    refusal: Exception | None = None

    async def get(self, id: str) -> bytes | None:
        if self.refusal is not None and not isinstance(self.refusal, adk.CheckpointBusyError):
            raise self.refusal
        return await super().get(id)

    async def claim(self, id: str, owner: str) -> bool:
        if isinstance(self.refusal, adk.CheckpointBusyError):
            raise self.refusal
        return await super().claim(id, owner)


@pytest.mark.parametrize(
    "refusal",
    [
        adk.CheckpointNotFoundError("no checkpoint 'cp' here"),
        adk.CheckpointBusyError("checkpoint 'cp' is held by another worker"),
        adk.CheckpointError("checkpoint 'cp' cannot be decrypted with this key"),
    ],
    ids=["not-found", "busy", "unreadable"],
)
async def test_a_store_of_your_own_refusing_with_a_checkpoint_error_keeps_its_class(
    refusal: Exception,
) -> None:
    """What a store of your own raises as pyadk's ``CheckpointError`` (a class a service answers
    404, 409 or 500) is its refusal, said on purpose: it reaches the caller as it is, not as the
    ``CheckpointStoreError`` (503: the store is down, send it again) its other exceptions
    become, and the checkpoint is kept for a resume once the store lets it."""
    store = _RefusingStore()
    runner = Runner(ReActAgent("a", ScriptedModel(["done"])), checkpoint_store=store)
    await store.inner.put("cp", b"unused")
    store.refusal = refusal
    with pytest.raises(adk.CheckpointError) as raised:
        await runner.invoke_resume("cp", True)
    assert raised.value is refusal
    assert not isinstance(raised.value, CheckpointStoreError)
    assert await store.inner.get("cp") == b"unused"


class _RefusingAtTheEnd(_OwnStore):
    """A store of your own refusing the finish's delete with pyadk's ``CheckpointError``."""

    async def delete(self, id: str) -> None:
        raise adk.CheckpointNotFoundError(f"no checkpoint {id!r} to delete here")


async def test_a_store_of_your_own_refusing_at_the_finish_says_the_resume_ran() -> None:
    """At the resume's end, after the approved call ran, a store's refusal keeps no class of its
    own: a bare ``CheckpointNotFoundError`` there reads, to a service, like a resume that found
    nothing and ran nothing, and sending the decision again would pay twice. It is the
    ``finished, but the checkpoint could not be deleted`` error any store failure there is."""
    runner, paid = await _paused_payment(_RefusingAtTheEnd())
    with pytest.raises(CheckpointStoreError) as raised:
        await runner.invoke_resume("cp", True)
    assert paid == ["bob"]
    assert "the resumed run of checkpoint 'cp' finished, but the checkpoint could not be" in str(
        raised.value
    )
    assert isinstance(raised.value.__cause__, adk.CheckpointNotFoundError)
