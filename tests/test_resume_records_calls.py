"""An approved call that ran is not run again by a second resume of the same checkpoint.

A resume that failed after running the approved call (the model failing right after a payment, a
worker dying once it had paid), or whose reader left right after the call's result, left the
checkpoint as it was before the call: resuming it again paid again. A ``ReActAgent``'s resumed
round now records each call's result in the checkpoint (same id, under the resume's claim) before
its event goes out and before the model is asked again; a later resume replays the recorded
results and runs only the calls not recorded. As LangGraph keeps a super-step's finished writes
and Google ADK appends each function response to the session as it comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import subprocess
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as WireReply
from recorded_calls import (  # noqa: F401  (stores_fixture)
    StoreFactory,
    runner_over,
    stores_fixture,
    stuck_ship,
)

from adk import (
    AgentEvent,
    AgentTool,
    CheckpointError,
    Message,
    ParallelAgent,
    RetryPolicy,
    Role,
    RunError,
    Runner,
    SequentialAgent,
    ToolContext,
    tool,
)
from adk.checkpoint import (
    CheckpointStore,
    CheckpointStoreError,
    InMemoryCheckpointStore,
    SQLiteCheckpointStore,
    _progress,
)
from adk.checkpoint import _claim as _claim_module
from adk.checkpoint.codec import decode_checkpoint, encode_checkpoint
from adk.interrupts import AGENT_STATE
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

pytest_plugins = ["services"]

paid: list[str] = []


@tool(require_approval=True)
async def pay(to: str, amount: int) -> str:
    """Pay an amount to someone once a person approves it."""
    paid.append(to)
    return f"paid {amount} to {to}"


@pytest.fixture(autouse=True)
def _no_payments_yet() -> None:
    paid.clear()


def _payer(*, fail_after_payment: bool = False, payees: tuple[str, ...] = ("bob",)) -> ReActAgent:
    """Asks to pay each of ``payees`` 5 in one round; once every result is in, answers with them
    (or fails, as a model down right after the payment)."""

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            if fail_after_payment:
                raise RuntimeError("model down")
            results = [m.content for m in messages if m.role == Role.TOOL]
            return Reply(text="done: " + "; ".join(results))
        return Reply(
            tool_calls=[tool_call("pay", {"to": to, "amount": 5}, id=f"call_{to}") for to in payees]
        )

    return ReActAgent("payer", ScriptedModel(reply), tools=[pay])


def _is_tool_result(event: AgentEvent) -> bool:
    output = event.output
    return output is not None and output.message is not None and output.message.role == Role.TOOL


async def _leave_at_first_result(runner: Runner, checkpoint_id: str, answers: Any) -> None:
    """Resume ``checkpoint_id`` and leave, as a reader that hung up, at the first tool result:
    what the resume would do after it (the model asked again, a pause saved) never happens."""
    async with contextlib.aclosing(runner.resume(checkpoint_id, answers)) as run:
        async for event in run:
            if _is_tool_result(event):
                break


async def test_a_resume_whose_model_fails_after_the_payment_is_resumed_without_paying_again(
    stores: StoreFactory,
) -> None:
    async with runner_over(_payer(), stores) as first:
        paused = await first.invoke("pay bob", checkpoint_id="conv-1")
    assert paused.interrupt is not None

    async with runner_over(_payer(fail_after_payment=True), stores) as failing:
        with pytest.raises(RunError, match="model down"):
            await failing.invoke_resume("conv-1", {"approved": True})
    assert paid == ["bob"]

    async with runner_over(_payer(), stores) as retry:
        done = await retry.invoke_resume("conv-1", {"approved": True})
        assert await retry.checkpoint_store.get("conv-1") is None  # finished: deleted

    assert done.text == "done: paid 5 to bob"
    assert paid == ["bob"]
    # The recorded result is the conversation's, once: the model read one payment.
    assert [m.content for m in done.messages if m.role == Role.TOOL] == ["paid 5 to bob"]


async def test_a_resume_left_right_after_the_payments_result_is_resumed_without_paying_again(
    stores: StoreFactory,
) -> None:
    async with runner_over(_payer(), stores) as first:
        paused = await first.invoke("pay bob", checkpoint_id="conv-2")
    assert paused.interrupt is not None

    async with runner_over(_payer(), stores) as leaving:
        resumed = leaving.resume("conv-2", {"approved": True})
        async with contextlib.aclosing(resumed) as events:
            async for event in events:
                if _is_tool_result(event):
                    break  # the client went away right after the payment's result
    assert paid == ["bob"]

    async with runner_over(_payer(), stores) as retry:
        done = await retry.invoke_resume("conv-2", {"approved": True})

    assert done.text == "done: paid 5 to bob"
    assert paid == ["bob"]
    # The replayed result goes out again, as the call's result in this resume.
    tool_events = [e.message.content for e in done.events if e.message and _is_tool_result(e)]
    assert tool_events == ["paid 5 to bob"]


async def test_a_round_with_one_call_approved_and_one_pending_pays_each_once(
    tmp_path: Path,
) -> None:
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    try:
        runner = Runner(_payer(payees=("bob", "eve")), checkpoint_store=store)
        paused = await runner.invoke("pay both", checkpoint_id="conv-3")
        assert paused.interrupt is not None
        bob, eve = (p.id for p in paused.interrupt.points)

        # Bob's approval alone: bob is paid, eve's call still waits; the reader leaves at bob's
        # result, before the round could pause again for eve.
        await _leave_at_first_result(runner, "conv-3", {bob: {"approved": True}})
        assert paid == ["bob"]

        again = await runner.invoke_resume("conv-3", {bob: {"approved": True}})
        assert again.interrupt is not None  # eve's call still waits
        assert [p.id for p in again.interrupt.points] == [eve]
        assert paid == ["bob"]

        done = await runner.invoke_resume("conv-3", {eve: {"approved": True}})
        assert done.text == "done: paid 5 to bob; paid 5 to eve"
        assert paid == ["bob", "eve"]
        assert await store.get("conv-3") is None
    finally:
        await store.aclose()


async def test_a_round_paused_in_a_sequence_records_its_payment_too(tmp_path: Path) -> None:
    """Nested in a workflow: the agent's state is recorded where the workflow resumes it."""

    def after(messages: list[Message]) -> Any:
        return Reply(text="noted")

    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:

        def flow(*, fail: bool = False) -> SequentialAgent:
            return SequentialAgent(
                "flow",
                [_payer(fail_after_payment=fail), ReActAgent("notes", ScriptedModel(after))],
            )

        paused = await Runner(flow(), checkpoint_store=store).invoke("pay bob", checkpoint_id="s")
        assert paused.interrupt is not None
        with pytest.raises(RunError, match="model down"):
            await Runner(flow(fail=True), checkpoint_store=store).invoke_resume(
                "s", {"approved": True}
            )
        done = await Runner(flow(), checkpoint_store=store).invoke_resume("s", {"approved": True})

    assert done.text == "noted"
    assert paid == ["bob"]


async def test_a_wire_model_failing_after_the_payment_with_retries_exhausted(
    tmp_path: Path,
) -> None:
    """The model is an OpenAI-wire server answering 500 to every retry of the call after the
    payment; the retried resume gets a real answer."""
    no_wait = RetryPolicy(max_attempts=2, initial_delay=0, jitter=False)
    async with OpenAIServer() as server, SQLiteCheckpointStore(tmp_path / "c.db") as store:

        def agent() -> ReActAgent:
            return ReActAgent("payer", wire_model(server, retry=no_wait), tools=[pay])

        server.script(WireReply(tool_calls=[Call("pay", '{"to": "bob", "amount": 5}', "c1")]))
        paused = await Runner(agent(), checkpoint_store=store).invoke("pay bob", checkpoint_id="w")
        assert paused.interrupt is not None

        server.script(WireReply(status=500, error="down"), WireReply(status=500, error="down"))
        with pytest.raises(RunError):
            await Runner(agent(), checkpoint_store=store).invoke_resume("w", {"approved": True})
        assert paid == ["bob"]

        server.script(WireReply(text="bob is paid"))
        done = await Runner(agent(), checkpoint_store=store).invoke_resume("w", {"approved": True})

    assert done.text == "bob is paid"
    assert paid == ["bob"]
    # The last request carried the one payment's result.
    tool_messages = [m for m in server.bodies[-1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["paid 5 to bob"]


def _branch(name: str, to: str, *, fail: bool) -> ReActAgent:
    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            if fail:
                raise RuntimeError("model down")
            return Reply(text=f"{name}: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay", {"to": to, "amount": 5}, id=f"call_{to}")])

    return ReActAgent(name, ScriptedModel(reply), tools=[pay])


def _both(*, fail: bool = False) -> ParallelAgent:
    """Two ReActAgents in a ParallelAgent, paying bob and eve, each asking its approval."""
    return ParallelAgent(
        "both", [_branch("left", "bob", fail=fail), _branch("right", "eve", fail=fail)]
    )


async def test_parallel_branches_each_record_their_payment(tmp_path: Path) -> None:
    """Two ReActAgents in a ParallelAgent, each paused at its approval: both record their call
    in the one checkpoint (one after the other, each on the other's record), and the resume
    after both models failed pays nobody again."""

    both = _both
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        paused = await Runner(both(), checkpoint_store=store).invoke("pay", checkpoint_id="p")
        assert paused.interrupt is not None
        answers = {p.id: {"approved": True} for p in paused.interrupt.points}
        with pytest.raises(RunError, match="model down"):
            await Runner(both(fail=True), checkpoint_store=store).invoke_resume("p", answers)
        assert sorted(paid) == ["bob", "eve"]

        done = await Runner(both(), checkpoint_store=store).invoke_resume("p", answers)

    assert sorted(paid) == ["bob", "eve"]
    texts = sorted(e.message.content for e in done.events if e.message and not _is_tool_result(e))
    assert texts == ["left: paid 5 to bob", "right: paid 5 to eve"]


class _CountedWrites(InMemoryCheckpointStore):
    """Counts its writes (a store of the three methods: each record is a read, then a write)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    async def put(self, id: str, data: bytes) -> None:
        self.writes += 1
        await super().put(id, data)


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_calls_of_many_branches_ending_together_are_recorded_in_one_write(
    store_kind: str, tmp_path: Path
) -> None:
    """Each resumed call's record wrote the whole checkpoint again, one after the other: 12 of
    a fan-out's branches approved at once wrote it 12 times, the checkpoint itself growing with
    the fan-out (quadratic: 100 of 400 branches took 0.8 s of CPU to record, most of it
    encoding). The records asked for while one is written, or in the same step of the loop, are
    written together; each is still written before its result goes out."""
    payees = [f"p{i}" for i in range(12)]

    def fan_out(*, fail: bool = False) -> ParallelAgent:
        return ParallelAgent(
            "fan", [_branch(f"b{i}", to, fail=fail) for i, to in enumerate(payees)]
        )

    writes: Callable[[], int]
    async with contextlib.AsyncExitStack() as stack:
        store: CheckpointStore
        if store_kind == "memory":
            counted = _CountedWrites()
            store, writes = counted, lambda: counted.writes
        else:
            sqlite = await stack.enter_async_context(SQLiteCheckpointStore(tmp_path / "c.db"))
            replace = sqlite._replace
            count = [0]

            async def counted_replace(id: str, old: bytes, data: bytes) -> bool:
                count[0] += 1
                return await replace(id, old, data)

            sqlite._replace = counted_replace  # type: ignore[method-assign]
            store, writes = sqlite, lambda: count[0]
        paused = await Runner(fan_out(), checkpoint_store=store).invoke("pay", checkpoint_id="f")
        assert paused.interrupt is not None and len(paused.interrupt.points) == 12
        answers = {p.id: {"approved": True} for p in paused.interrupt.points}
        before = writes()
        with pytest.raises(RunError, match="model down"):
            await Runner(fan_out(fail=True), checkpoint_store=store).invoke_resume("f", answers)
        assert sorted(paid) == sorted(payees)
        assert writes() - before <= 2  # 12 before: one per call
        stored = await store.get("f")
        assert stored is not None
        assert sorted(decode_checkpoint(stored)["settled"]) == sorted(answers)

        done = await Runner(fan_out(), checkpoint_store=store).invoke_resume("f", answers)

    assert sorted(paid) == sorted(payees)  # replayed, none paid again
    assert len([e for e in done.events if e.message and e.message.content.startswith("b")]) == 12


async def test_a_kept_checkpoint_is_marked_finished_after_the_replayed_resume() -> None:
    """With keep_checkpoints the finished resume marks the recorded checkpoint finished, so a
    third resume is refused and pays nothing."""
    store = InMemoryCheckpointStore()
    paused = await Runner(_payer(), checkpoint_store=store).invoke("pay", checkpoint_id="k")
    assert paused.interrupt is not None
    with pytest.raises(RunError, match="model down"):
        await Runner(
            _payer(fail_after_payment=True), checkpoint_store=store, keep_checkpoints=True
        ).invoke_resume("k", {"approved": True})
    kept = Runner(_payer(), checkpoint_store=store, keep_checkpoints=True)

    done = await kept.invoke_resume("k", {"approved": True})
    with pytest.raises(CheckpointError, match="has finished"):
        await kept.invoke_resume("k", {"approved": True})

    assert done.text == "done: paid 5 to bob"
    assert paid == ["bob"]


async def test_a_kept_checkpoints_finish_does_not_overwrite_a_pause_saved_after_its_read() -> None:
    """keep_checkpoints: the finish reads the checkpoint, then marks it finished. A new run's
    pause saved under the id between the two (another process; the claim keeps out resumes, not
    new runs) must stay as it was, as the records' conditional replace keeps it: the marker was a
    plain put over it, and the new run's pending approval was lost."""
    store = InMemoryCheckpointStore()
    paused = await Runner(_payer(), checkpoint_store=store).invoke("pay", checkpoint_id="k2")
    assert paused.interrupt is not None
    other = await Runner(_payer(payees=("eve",)), checkpoint_store=store).invoke(
        "pay eve", checkpoint_id="elsewhere"
    )
    assert other.interrupt is not None
    new_pause = await store.get("elsewhere")
    assert new_pause is not None

    read = store.get
    reads = _pause_saved_after_the_finishs_read(store, new_pause)
    kept = Runner(_payer(), checkpoint_store=store, keep_checkpoints=True)
    done = await kept.invoke_resume("k2", {"approved": True})

    assert done.text == "done: paid 5 to bob" and reads == [2]
    assert await read("k2") == new_pause


async def test_a_finishs_delete_does_not_delete_a_pause_saved_after_its_read(
    stores: StoreFactory,
) -> None:
    """The finish reads the checkpoint, then deletes it. A pause saved under the id between the
    two (another worker's resume of it pausing again once this one's claim lapsed, a new run's
    pause) must stay, as with keep_checkpoints: the delete was unconditional and the new pause,
    its approval still to be given, was lost. Each built-in store deletes only the bytes read."""
    async with runner_over(_payer(), stores) as first:
        paused = await first.invoke("pay", checkpoint_id="d1")
        other = await first.invoke("pay eve", checkpoint_id="elsewhere")
        new_pause = await first.checkpoint_store.get("elsewhere")
    assert paused.interrupt is not None and other.interrupt is not None
    assert new_pause is not None

    async with runner_over(_payer(), stores) as resuming:
        store = resuming.checkpoint_store
        reads = _pause_saved_after_the_finishs_read(store, new_pause)
        done = await resuming.invoke_resume("d1", {"approved": True})
        del store.get  # the store's own method again
        assert done.text == "done: paid 5 to bob" and reads == [2]
        assert await store.get("d1") == new_pause
    assert paid == ["bob"]


async def test_a_record_the_store_cannot_take_is_a_warning_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The store failing the record: an adk.checkpoint warning naming the call and saying a
    resume now would run it again; the run goes on as without the record, and its finish still
    deletes the checkpoint (the failed write had not landed)."""

    class _Refusing(InMemoryCheckpointStore):
        refuse = False

        async def put(self, id: str, data: bytes) -> None:
            if self.refuse:
                raise CheckpointStoreError("disk full", backend="test", operation="put")
            await super().put(id, data)

    store = _Refusing()
    paused = await Runner(_payer(), checkpoint_store=store).invoke("pay", checkpoint_id="r")
    assert paused.interrupt is not None

    store.refuse = True
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        done = await Runner(_payer(), checkpoint_store=store).invoke_resume("r", {"approved": True})

    assert done.text == "done: paid 5 to bob" and paid == ["bob"]
    [warning] = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
    assert "could not record the result of agent 'payer''s resumed call 'pay' (call_bob)" in (
        warning
    )
    assert "in checkpoint 'r'" in warning and "disk full" in warning
    assert "resuming the checkpoint again runs that again" in warning
    assert await store.get("r") is None


async def test_a_replayed_call_keeps_its_session_writes_its_edit_and_its_return_directly() -> None:
    """What the call did besides its result survives the replay: its session writes, the
    person's edit (the note on its result), and a return_directly result that ends the agent
    without the model (the model is never asked: the failure here is the reader leaving)."""

    @tool(require_approval=True)
    async def refund(order: str, cents: int, ctx: ToolContext) -> str:
        """Refund an order once a person approves it."""
        paid.append(order)
        ctx.session["refunded"] = cents
        return f"refunded {cents} on {order}"

    def agent() -> ReActAgent:
        script = [Reply(tool_calls=[tool_call("refund", {"order": "A-1", "cents": 900}, id="r")])]
        return ReActAgent("desk", ScriptedModel(script), tools=[refund], return_directly=["refund"])

    store = InMemoryCheckpointStore()
    paused = await Runner(agent(), checkpoint_store=store).invoke("refund", checkpoint_id="e")
    assert paused.interrupt is not None
    edit = {"approved": True, "arguments": {"order": "A-1", "cents": 500}}
    left = Runner(agent(), checkpoint_store=store).resume("e", edit)
    async with contextlib.aclosing(left) as events:
        async for _event in events:
            break  # held back, the result comes last: gone before it is shown

    done = await Runner(agent(), checkpoint_store=store).invoke_resume("e", edit)

    assert paid == ["A-1"]
    assert done.text == "refunded 500 on A-1"
    assert done.session["refunded"] == 500
    assert await store.get("e") is None


async def test_the_next_resume_may_answer_only_the_call_still_pending() -> None:
    """Bob's approval recorded, eve's still waiting: a resume answering eve alone replays bob's
    payment, pays eve and finishes (bob's answer is not needed again)."""
    store = InMemoryCheckpointStore()
    runner = Runner(_payer(payees=("bob", "eve")), checkpoint_store=store)
    paused = await runner.invoke("pay both", checkpoint_id="conv-4")
    assert paused.interrupt is not None
    bob, eve = (p.id for p in paused.interrupt.points)
    await _leave_at_first_result(runner, "conv-4", {bob: {"approved": True}})

    done = await runner.invoke_resume("conv-4", {eve: {"approved": True}})

    assert done.interrupt is None
    assert done.text == "done: paid 5 to bob; paid 5 to eve"
    assert paid == ["bob", "eve"]
    assert await store.get("conv-4") is None


async def test_a_resume_of_the_call_still_pending_is_refused_when_max_turns_leaves_none() -> None:
    """Bob's approval recorded, eve's still waiting, and the run's max_turns spent before the
    pause: the resume answering eve alone (the point still listed) is refused before eve is
    paid, as one answering both of the unrecorded pause is. Bob's settled point counted as one
    it left waiting (the round pausing again, asking no model): eve was paid, then the model
    call for the results failed on the limit."""
    store = InMemoryCheckpointStore()
    runner = Runner(_payer(payees=("bob", "eve")), checkpoint_store=store)
    paused = await runner.invoke("pay both", checkpoint_id="conv-t", max_turns=2)
    assert paused.interrupt is not None
    bob, eve = (p.id for p in paused.interrupt.points)
    await _leave_at_first_result(runner, "conv-t", {bob: {"approved": True}})
    assert paid == ["bob"]

    with pytest.raises(RunError, match="max_turns"):
        await runner.invoke_resume("conv-t", {eve: {"approved": True}}, max_turns=1)
    assert paid == ["bob"]  # refused before eve was paid

    done = await runner.invoke_resume("conv-t", {eve: {"approved": True}})
    assert done.text == "done: paid 5 to bob; paid 5 to eve"
    assert paid == ["bob", "eve"]


async def test_a_record_that_landed_though_its_put_failed_is_still_finished() -> None:
    """A put that raised after it wrote (a connection lost before the answer): the finish still
    knows the checkpoint as this resume's and deletes it, rather than leaving it to be resumed."""

    class _LandsThenFails(InMemoryCheckpointStore):
        failing = False

        async def put(self, id: str, data: bytes) -> None:
            await super().put(id, data)
            if self.failing:
                raise CheckpointStoreError("connection lost", backend="test", operation="put")

    store = _LandsThenFails()
    paused = await Runner(_payer(), checkpoint_store=store).invoke("pay", checkpoint_id="l")
    assert paused.interrupt is not None
    before = await store.get("l")

    store.failing = True
    done = await Runner(_payer(), checkpoint_store=store).invoke_resume("l", {"approved": True})

    assert done.text == "done: paid 5 to bob" and paid == ["bob"]
    assert before is not None and await store.get("l") is None


@pytest.mark.parametrize("ending", ["apart", "together"])
async def test_a_record_that_landed_though_it_failed_is_finished_after_another_branchs_refused(
    caplog: pytest.LogCaptureFixture, ending: str
) -> None:
    """Parallel branches: the first record's replace wrote and then failed (a connection lost
    before the answer: the store holds it), so the other branch's record, compared with the
    bytes the resume last knew it wrote, is refused. The run finishes and must delete the
    checkpoint the landed write left, as it does when no other record came after: it kept the
    landed write's bytes only as the last write tried, which the refused one replaced, and the
    finished run left its checkpoint waiting, to be resumed again and pay eve again. The refused
    record looks at what the store holds, finds the landed write, and is made on it: one warning
    (the failed write's), and the last write holds both payments.

    "apart": eve's call ends once the first write has failed (the records are written one after
    the other, as above). "together": both calls end at once, so both records are in the one
    write that landed and failed: a warning for each (neither is known to be written), and the
    finish still deletes the checkpoint that write left."""
    written_once = asyncio.Event()

    class _LandsThenFails(InMemoryCheckpointStore):
        failing = False

        def __init__(self) -> None:
            super().__init__()
            self.written: list[bytes] = []

        async def _replace(self, id: str, old: bytes, data: bytes) -> bool:
            replaced = await super()._replace(id, old, data)
            if replaced:
                self.written.append(data)
            written_once.set()
            if self.failing:
                self.failing = False
                raise CheckpointStoreError("connection lost", backend="test", operation="put")
            return replaced

    @tool(require_approval=True, name="pay")
    async def pay_once_written(to: str, amount: int) -> str:
        """Pay an amount to someone once a person approves it (eve's after bob's record)."""
        if to == "eve":
            await written_once.wait()
        paid.append(to)
        return f"paid {amount} to {to}"

    def both() -> ParallelAgent:
        if ending == "together":
            return _both()

        def reply(messages: list[Message]) -> Any:
            if messages[-1].role == Role.TOOL:
                return Reply(text=f"right: {messages[-1].content}")
            return Reply(tool_calls=[tool_call("pay", {"to": "eve", "amount": 5}, id="call_eve")])

        right = ReActAgent("right", ScriptedModel(reply), tools=[pay_once_written])
        return ParallelAgent("both", [_branch("left", "bob", fail=False), right])

    store = _LandsThenFails()
    paused = await Runner(both(), checkpoint_store=store).invoke("pay", checkpoint_id="t")
    assert paused.interrupt is not None
    answers = {p.id: {"approved": True} for p in paused.interrupt.points}

    store.failing = True
    written_once.clear()
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        done = await Runner(both(), checkpoint_store=store).invoke_resume("t", answers)

    assert sorted(paid) == ["bob", "eve"]
    assert done.interrupt is None
    warnings = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
    assert len(warnings) == (1 if ending == "apart" else 2), warnings
    assert all("connection lost" in warning for warning in warnings)
    assert await store.get("t") is None  # finished: deleted, not left to be resumed again
    assert len(store.written) == (2 if ending == "apart" else 1)
    states = decode_checkpoint(store.written[-1], "t")["states"].values()
    done = [s[AGENT_STATE]["done"] for s in states if "done" in s.get(AGENT_STATE, {})]
    assert sorted(entry["id"] for entries in done for entry in entries) == ["call_bob", "call_eve"]


async def test_a_round_whose_record_failed_records_nothing_more_with_calls_ending_together(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Three approved calls ending together, the first record failing (a session value that
    cannot be stored): one warning, and the calls waiting for the write do not each try again (a
    store down would make each wait for its own timeout, one after the other)."""

    @tool(require_approval=True)
    async def stamp(to: str, ctx: ToolContext) -> str:
        """Pay someone and note when, once a person approves it."""
        paid.append(to)
        ctx.session["paid_at"] = {1, 2}  # not JSON: the record cannot store the session
        return f"paid {to}"

    def agent() -> ReActAgent:
        def reply(messages: list[Message]) -> Any:
            if messages[-1].role == Role.TOOL:
                return Reply(text="done: " + "; ".join(m.content for m in messages[-3:]))
            names = ("bob", "eve", "ann")
            return Reply(tool_calls=[tool_call("stamp", {"to": n}, id=f"c_{n}") for n in names])

        return ReActAgent("payer", ScriptedModel(reply), tools=[stamp])

    store = InMemoryCheckpointStore()
    paused = await Runner(agent(), checkpoint_store=store).invoke("pay", checkpoint_id="m")
    assert paused.interrupt is not None
    answers = {p.id: {"approved": True} for p in paused.interrupt.points}

    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        done = await Runner(agent(), checkpoint_store=store).invoke_resume("m", answers)

    assert done.text == "done: paid bob; paid eve; paid ann"
    assert sorted(paid) == ["ann", "bob", "eve"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
    assert len(warnings) == 1, warnings
    assert "session.paid_at" in warnings[0]
    assert await store.get("m") is None


class _FailsRecords(InMemoryCheckpointStore):
    """Fails each operation after the pause that ``fail`` names ("get", "put") with ``error``,
    as a store of the three public methods may (its own exception types, not pyadk's)."""

    fail: str | None = None
    error: BaseException = OSError("the disk went away")

    async def get(self, id: str) -> bytes | None:
        if self.fail == "get":
            self.fail = None
            raise self.error
        return await super().get(id)

    async def put(self, id: str, data: bytes) -> None:
        if self.fail == "put":
            self.fail = None
            raise self.error
        await super().put(id, data)


@pytest.mark.parametrize("operation", ["get", "put"])
@pytest.mark.parametrize("payees", [("bob",), ("bob", "eve")], ids=["one call", "two calls"])
async def test_a_record_the_store_fails_with_its_own_error_is_a_warning_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture, operation: str, payees: tuple[str, ...]
) -> None:
    """A store failing the record's read or write with an exception of its own (an OSError, as
    test_fault_injection's store raises): a warning, as for a CheckpointStoreError, and the run
    goes on and finishes. It used to escape the record: a round of several calls then waited
    forever for the call whose task it ended (the run hung, idle, the clean-clone CI's hang in
    test_fault_injection), a lone call's round failed the run. The guard's 30 s is only there to
    end the test if it hangs again."""
    store = _FailsRecords()
    paused = await Runner(_payer(payees=payees), checkpoint_store=store).invoke(
        "pay", checkpoint_id="o"
    )
    assert paused.interrupt is not None
    answers = {p.id: {"approved": True} for p in paused.interrupt.points}

    # The resume reads the checkpoint first (its load): the record's own read is the next one.
    resume = Runner(_payer(payees=payees), checkpoint_store=store)
    loaded = store.get

    async def then_fail(id: str) -> bytes | None:
        data = await loaded(id)
        store.fail = operation
        store.get = loaded  # type: ignore[method-assign]
        return data

    store.get = then_fail  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        done = await asyncio.wait_for(resume.invoke_resume("o", answers), 30)

    assert done.text == "done: " + "; ".join(f"paid 5 to {to}" for to in payees)
    assert sorted(paid) == sorted(payees)
    warnings = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
    assert len(warnings) == 1 and "the disk went away" in warnings[0], warnings
    assert await store.get("o") is None


async def test_a_round_whose_record_hook_raises_fails_rather_than_waiting_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The hook that records a call as it ends (``execute_tool_calls``' ``taken``) raising
    anything at all: the round of several calls fails with it. It used to end the call's task
    without its outcome, and the round waited for that outcome forever (only a CheckpointError
    was passed on). The record itself now raises nothing (previous test): this pins the round."""
    from prebuilt.react import _ReActCore

    async def broken(*_args: Any) -> None:
        raise LookupError("the record's own bug")

    store = InMemoryCheckpointStore()
    runner = Runner(_payer(payees=("bob", "eve")), checkpoint_store=store)
    paused = await runner.invoke("pay", checkpoint_id="h")
    assert paused.interrupt is not None
    answers = {p.id: {"approved": True} for p in paused.interrupt.points}

    monkeypatch.setattr(_ReActCore, "_record", broken)
    with pytest.raises(RunError, match="the record's own bug"):
        await asyncio.wait_for(runner.invoke_resume("h", answers), 30)
    assert await store.get("h") is not None  # failed: the checkpoint stays, to resume again


class _Abort(BaseException):
    """An exception that is no ``Exception``, as a test's ``pytest.fail`` (``Failed``), gevent's
    ``Timeout`` or a program's own abort is: not caught by ``except Exception``."""


@pytest.mark.parametrize("source", ["the store's record", "the tool"])
async def test_a_base_exception_in_a_round_of_several_calls_ends_the_run_rather_than_hanging(
    source: str,
) -> None:
    """A call's task ending with a BaseException that is no Exception (raised by the store's
    write of the record, or by the tool itself): the round of several calls raises it, as a
    lone call's round does. The task used to end without putting anything on the round's queue,
    and the round waited for its outcome forever, the loop idle (a test store calling
    pytest.fail hung the suite). The guard's 30 s only ends the test if it hangs."""

    @tool(require_approval=True)
    async def pay(to: str) -> str:
        """Pay someone once a person approves it."""
        if source == "the tool" and to == "eve":
            raise _Abort("abort")
        paid.append(to)
        return f"paid {to}"

    def agent() -> ReActAgent:
        def reply(messages: list[Message]) -> Any:
            if messages[-1].role == Role.TOOL:
                return Reply(text="done")
            return Reply(
                tool_calls=[tool_call("pay", {"to": n}, id=f"c_{n}") for n in ("bob", "eve")]
            )

        return ReActAgent("payer", ScriptedModel(reply), tools=[pay])

    store = _FailsRecords()
    paused = await Runner(agent(), checkpoint_store=store).invoke("pay", checkpoint_id="b")
    assert paused.interrupt is not None
    answers = {p.id: {"approved": True} for p in paused.interrupt.points}
    resume = Runner(agent(), checkpoint_store=store)
    if source == "the store's record":
        loaded = store.get

        async def then_fail(id: str) -> bytes | None:
            data = await loaded(id)
            store.fail, store.error = "put", _Abort("abort")
            store.get = loaded  # type: ignore[method-assign]
            return data

        store.get = then_fail  # type: ignore[method-assign]

    with pytest.raises(_Abort):
        await asyncio.wait_for(resume.invoke_resume("b", answers), 30)
    assert await store.get("b") is not None  # not finished: the checkpoint stays


async def test_a_base_exception_in_a_round_leaves_no_task_exception_unretrieved() -> None:
    """The round raises a call's BaseException that is no Exception, and the call's task, which
    ended with it, has its outcome retrieved: the round's cleanup read only the tasks still
    running, so the loop logged "Task exception was never retrieved" for this one when it was
    collected, a second report of a failure the caller already has."""

    @tool
    async def work(n: int) -> str:
        """Work on n."""
        if n == 2:
            raise _Abort("abort")
        return "worked"

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            return Reply(text="done")
        return Reply(tool_calls=[tool_call("work", {"n": n}, id=f"c_{n}") for n in (1, 2)])

    logged: list[str] = []
    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: logged.append(str(context.get("message"))))
    try:
        runner = Runner(ReActAgent("worker", ScriptedModel(reply), tools=[work]))
        with pytest.raises(_Abort):
            await asyncio.wait_for(runner.invoke("work"), 30)
        gc.collect()  # the task, let go, is collected: an unretrieved exception is logged then
    finally:
        loop.set_exception_handler(handler)
    assert logged == []


async def test_a_store_raising_cancelled_error_of_its_own_in_a_record_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A store's write of the record raising CancelledError though nobody cancelled the run (it
    awaited something another task cancelled): the store's failure, a warning, and the round of
    two calls goes on and finishes, rather than passing for the run's cancellation or leaving the
    round waiting. The guard's 30 s only ends the test if it hangs."""
    store = _FailsRecords()
    paused = await Runner(_payer(payees=("bob", "eve")), checkpoint_store=store).invoke(
        "pay", checkpoint_id="x"
    )
    assert paused.interrupt is not None
    answers = {p.id: {"approved": True} for p in paused.interrupt.points}
    loaded = store.get

    async def then_fail(id: str) -> bytes | None:
        data = await loaded(id)
        store.fail, store.error = "put", asyncio.CancelledError()
        store.get = loaded  # type: ignore[method-assign]
        return data

    store.get = then_fail  # type: ignore[method-assign]
    resume = Runner(_payer(payees=("bob", "eve")), checkpoint_store=store)
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        done = await asyncio.wait_for(resume.invoke_resume("x", answers), 30)

    assert done.text == "done: paid 5 to bob; paid 5 to eve" and sorted(paid) == ["bob", "eve"]
    warnings = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
    assert len(warnings) == 1 and "CancelledError" in warnings[0], warnings
    assert await store.get("x") is None


async def test_a_replayed_call_runs_no_tool_callbacks_and_makes_no_tool_span() -> None:
    """What interrupts.md says of a replay: the recorded result is the one the callbacks of the
    resume that ran the call produced (after_tool's replacement included); a replay runs neither
    before_tool nor after_tool again and makes no execute_tool span (the tool is not called),
    while the model's call after it is traced as any other."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from adk.callbacks import Callbacks

    seen: list[tuple[str, str]] = []

    def after(_ctx: ToolContext, call: Any, result: Any) -> str:
        seen.append(("after_tool", call.id))
        return f"{result} (checked)"

    def before(_ctx: ToolContext, call: Any) -> None:
        seen.append(("before_tool", call.id))

    callbacks = [Callbacks(before_tool=before, after_tool=after)]
    store = InMemoryCheckpointStore()
    paused = await Runner(_payer(), checkpoint_store=store).invoke("pay", checkpoint_id="c")
    assert paused.interrupt is not None
    failing = Runner(_payer(fail_after_payment=True), checkpoint_store=store, callbacks=callbacks)
    with pytest.raises(RunError, match="model down"):
        await failing.invoke_resume("c", {"approved": True})
    assert seen == [("before_tool", "call_bob"), ("after_tool", "call_bob")]

    seen.clear()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    retry = Runner(_payer(), checkpoint_store=store, callbacks=callbacks, tracer_provider=provider)
    done = await retry.invoke_resume("c", {"approved": True})

    assert done.text == "done: paid 5 to bob (checked)" and paid == ["bob"]
    assert seen == []
    names = [span.name for span in exporter.get_finished_spans()]
    assert not any(name.startswith("execute_tool") for name in names), names
    assert any(name.startswith("chat") for name in names), names


def _show(path: Path, checkpoint_id: str) -> subprocess.CompletedProcess[str]:
    """``pyadk checkpoint show`` of a SQLite file, as an operator runs it."""
    command = ["checkpoint", "show", checkpoint_id, "--sqlite", str(path)]
    return subprocess.run(
        [sys.executable, "-m", "adk.cli", *command], capture_output=True, text=True, timeout=60
    )


async def test_a_recorded_call_is_no_longer_listed_as_waiting(tmp_path: Path) -> None:
    """Bob's payment ran and was recorded by a resume whose reader left; eve's approval still
    waits. ``runner.pending()`` and ``pyadk checkpoint show`` list eve's point only (bob's was
    listed too, asking a person for an answer no resume reads any more), while the checkpoint
    keeps both points: the same answers, bob's included, still resume it."""
    path = tmp_path / "checkpoints.db"
    store = SQLiteCheckpointStore(path)
    try:
        runner = Runner(_payer(payees=("bob", "eve")), checkpoint_store=store)
        paused = await runner.invoke("pay both", checkpoint_id="conv-5")
        assert paused.interrupt is not None
        bob, eve = (p.id for p in paused.interrupt.points)
        await _leave_at_first_result(runner, "conv-5", {bob: {"approved": True}})

        [listed] = [entry async for entry in runner.pending()]
        assert listed.point_ids == [eve]
        shown = _show(path, "conv-5")
        assert shown.returncode == 0, shown.stderr
        assert [p["id"] for p in json.loads(shown.stdout)["points"]] == [eve]

        answers = {bob: {"approved": True}, eve: {"approved": True}}
        done = await runner.invoke_resume("conv-5", answers)
    finally:
        await store.aclose()
    assert done.text == "done: paid 5 to bob; paid 5 to eve"
    assert paid == ["bob", "eve"]


async def test_a_resume_that_pauses_again_in_the_round_lists_only_what_still_waits(
    tmp_path: Path,
) -> None:
    """Bob's payment recorded by a resume whose reader left; a second resume answering bob
    again (not eve) replays bob's payment and pauses again in the same round: its interrupt,
    ``runner.pending()`` and ``pyadk checkpoint show`` name eve's approval only, and a third
    resume answering eve pays eve alone (bob's is neither pending nor paid again)."""
    path = tmp_path / "checkpoints.db"
    store = SQLiteCheckpointStore(path)
    try:
        runner = Runner(_payer(payees=("bob", "eve")), checkpoint_store=store)
        paused = await runner.invoke("pay both", checkpoint_id="conv-6")
        assert paused.interrupt is not None
        bob, eve = (p.id for p in paused.interrupt.points)
        await _leave_at_first_result(runner, "conv-6", {bob: {"approved": True}})

        again = await runner.invoke_resume("conv-6", {bob: {"approved": True}})
        assert again.interrupt is not None
        assert again.interrupt.point_ids == [eve]
        [listed] = [entry async for entry in runner.pending()]
        assert listed.point_ids == [eve]
        shown = _show(path, "conv-6")
        assert shown.returncode == 0, shown.stderr
        assert [p["id"] for p in json.loads(shown.stdout)["points"]] == [eve]

        done = await runner.invoke_resume("conv-6", {eve: {"approved": True}})
    finally:
        await store.aclose()
    assert done.text == "done: paid 5 to bob; paid 5 to eve"
    assert paid == ["bob", "eve"]


async def test_a_built_in_stores_record_is_one_conditional_replace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record goes through the store's atomic ``_replace`` (SQLite's conditional UPDATE):
    one per finished call, with the bytes the resume loaded, and no read of its own between."""
    replaces: list[tuple[str, bytes]] = []
    gets: list[str] = []
    original_replace = SQLiteCheckpointStore._replace
    original_get = SQLiteCheckpointStore.get

    async def replace(self: SQLiteCheckpointStore, id: str, old: bytes, data: bytes) -> bool:
        replaces.append((id, old))
        return await original_replace(self, id, old, data)

    async def get(self: SQLiteCheckpointStore, id: str) -> bytes | None:
        gets.append(id)
        return await original_get(self, id)

    store = SQLiteCheckpointStore(tmp_path / "checkpoints.db")
    try:
        paused = await Runner(_payer(), checkpoint_store=store).invoke("pay", checkpoint_id="a")
        assert paused.interrupt is not None
        loaded = await store.get("a")
        monkeypatch.setattr(SQLiteCheckpointStore, "_replace", replace)
        monkeypatch.setattr(SQLiteCheckpointStore, "get", get)
        failing = Runner(_payer(fail_after_payment=True), checkpoint_store=store)
        with pytest.raises(RunError, match="model down"):
            await failing.invoke_resume("a", {"approved": True})
    finally:
        await store.aclose()
    assert replaces == [("a", loaded)]
    assert gets == ["a"]  # the resume's load only


# -- a store failing at the finish's delete: what the error says a second resume would do -------


async def _store_down(id: str) -> None:
    raise CheckpointStoreError(
        f"delete of checkpoint {id!r} failed: the store is down",
        backend="test",
        operation="delete",
        checkpoint_id=id,
    )


async def _store_down_if(id: str, old: bytes) -> bool:
    await _store_down(id)
    return False


async def test_a_finished_resume_whose_delete_fails_says_a_second_resume_replays_its_call(
    stores: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The approved call ran and was recorded, then the store failed the finish's delete. The
    error said resuming the checkpoint again "would run again what this resume ran (an approved
    call)", which the record made untrue: a second resume replays the payment and asks the
    model again. It must say so (and the second resume does: bob is paid once)."""
    async with runner_over(_payer(), stores) as first:
        paused = await first.invoke("pay bob", checkpoint_id="conv-7")
    assert paused.interrupt is not None

    async with runner_over(_payer(), stores) as resuming:
        # Down for the finish's delete, which a built-in store makes conditional (_delete_if).
        monkeypatch.setattr(resuming.checkpoint_store, "delete", _store_down)
        monkeypatch.setattr(resuming.checkpoint_store, "_delete_if", _store_down_if)
        with pytest.raises(CheckpointStoreError) as caught:
            await resuming.invoke_resume("conv-7", {"approved": True})
        monkeypatch.undo()
    message = str(caught.value)
    assert message.startswith("the resumed run of checkpoint 'conv-7' finished, but the ")
    assert (
        "resuming it again would replay the recorded results of the calls this resume ran, not "
        "run them, and run again what came after them (the model calls)"
    ) in message
    assert "would run again what this resume ran" not in message
    assert message.endswith("delete of checkpoint 'conv-7' failed: the store is down")
    assert caught.value.operation == "delete" and caught.value.backend == "test"
    assert paid == ["bob"]

    async with runner_over(_payer(), stores) as again:
        done = await again.invoke_resume("conv-7", {"approved": True})
    assert done.text == "done: paid 5 to bob"
    assert paid == ["bob"]  # replayed, as the error said


class _DownAtTheEnd(InMemoryCheckpointStore):
    """Once ``down``: fails every delete, and every put after the first ``takes`` (a record the
    store takes, then none); a put that raised may have ``landed`` first (its answer lost)."""

    down = False
    takes = 0
    landed = False
    took: asyncio.Event | None = None  # set once it took the puts it takes while down

    async def put(self, id: str, data: bytes) -> None:
        if self.down and self.takes == 0:
            if self.landed:
                await super().put(id, data)
            raise CheckpointStoreError("put failed: the store is down", operation="put")
        await super().put(id, data)
        if self.down:
            self.takes -= 1
            if self.takes == 0 and self.took is not None:
                self.took.set()

    async def delete(self, id: str) -> None:
        if self.down:
            await _store_down(id)
        await super().delete(id)


async def test_a_finished_resume_whose_record_and_delete_fail_names_the_call_that_runs_again() -> (
    None
):
    """Of two approved calls, bob's ended and was recorded, then the store went down: eve's
    record and the finish's delete failed. The error must name eve's call as the one a second
    resume runs again (bob's is replayed), and the second resume does just that. (Eve's call
    ends once bob's record is written: calls ending together are written together, below.)"""
    store = _DownAtTheEnd()
    store.took = asyncio.Event()

    @tool(require_approval=True)
    async def transfer(to: str) -> str:
        """Transfer to someone once a person approves it."""
        if to == "eve" and store.down:
            await store.took.wait()  # bob's record is written
        paid.append(to)
        return f"sent to {to}"

    def agent() -> ReActAgent:
        def reply(messages: list[Message]) -> Any:
            if messages[-1].role == Role.TOOL:
                return Reply(text="done")
            calls = [tool_call("transfer", {"to": to}, id=f"call_{to}") for to in ("bob", "eve")]
            return Reply(tool_calls=calls)

        return ReActAgent("payer", ScriptedModel(reply), tools=[transfer])

    runner = Runner(agent(), checkpoint_store=store)
    paused = await runner.invoke("pay both", checkpoint_id="conv-8")
    assert paused.interrupt is not None
    bob, eve = paused.interrupt.point_ids
    answers = {bob: {"approved": True}, eve: {"approved": True}}

    store.down, store.takes = True, 1
    with pytest.raises(CheckpointStoreError) as caught:
        await runner.invoke_resume("conv-8", answers)
    message = str(caught.value)
    assert (
        "resuming it again would run again what this resume ran with no record of it kept, for "
        f"{eve!r} (an approved call), and what came after; the calls it recorded are replayed"
    ) in message
    assert repr(bob) not in message
    assert sorted(paid) == ["bob", "eve"]

    store.down = False
    done = await runner.invoke_resume("conv-8", answers)
    assert done.text == "done" and await store.get("conv-8") is None
    assert sorted(paid) == ["bob", "eve", "eve"]  # eve's call ran again, as the error said


async def test_a_finished_resume_whose_record_landed_though_its_put_failed_says_it_is_replayed() -> (
    None
):
    """The record's put raised after it wrote (its answer lost), then the finish read the
    checkpoint back, found the record there, and failed to delete it: a second resume replays
    the call, and the error must say that rather than that the call runs again."""
    store = _DownAtTheEnd()
    runner = Runner(_payer(), checkpoint_store=store)
    paused = await runner.invoke("pay bob", checkpoint_id="conv-9")
    assert paused.interrupt is not None

    store.down, store.landed = True, True
    with pytest.raises(CheckpointStoreError) as caught:
        await runner.invoke_resume("conv-9", {"approved": True})
    assert "would replay the recorded results of the calls this resume ran" in str(caught.value)

    store.down = False
    done = await runner.invoke_resume("conv-9", {"approved": True})
    assert done.text == "done: paid 5 to bob" and paid == ["bob"]


async def test_a_finished_resume_that_only_replayed_says_it_ran_no_paused_call() -> None:
    """The first resume recorded the payment and failed (the model down); the second replayed
    it, finished, and its delete failed. It ran no paused call: the error must not say that a
    third resume would run again what it ran."""
    store = _DownAtTheEnd()
    paused = await Runner(_payer(), checkpoint_store=store).invoke("pay", checkpoint_id="conv-10")
    assert paused.interrupt is not None
    with pytest.raises(RunError, match="model down"):
        await Runner(_payer(fail_after_payment=True), checkpoint_store=store).invoke_resume(
            "conv-10", {"approved": True}
        )

    store.down = True
    with pytest.raises(CheckpointStoreError) as caught:
        await Runner(_payer(), checkpoint_store=store).invoke_resume("conv-10", {"approved": True})
    assert (
        "this resume ran no paused call (an earlier resume recorded them): resuming it again "
        "would replay them too and run again what came after them (the model calls)"
    ) in str(caught.value)

    store.down = False
    done = await Runner(_payer(), checkpoint_store=store).invoke_resume(
        "conv-10", {"approved": True}
    )
    assert done.text == "done: paid 5 to bob" and paid == ["bob"]


def _together(gate: asyncio.Event, arrived: list[str], count: int) -> Any:
    """A ``send`` tool whose first ``count`` calls end in one step of the loop: each waits on
    ``gate``, set by the last to arrive once it waits too; any later call waits for good."""

    @tool(require_approval=True)
    async def send(to: str) -> str:
        """Send to someone once a person approves it."""
        arrived.append(to)
        if len(arrived) == count:
            asyncio.get_running_loop().call_soon(gate.set)  # once this call waits too
        elif len(arrived) > count:
            await asyncio.Event().wait()  # still running when the test looks
        await gate.wait()
        paid.append(to)
        return f"sent to {to}"

    return send


def _sender(send: Any, payees: tuple[str, ...]) -> ReActAgent:
    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            return Reply(text="done")
        return Reply(tool_calls=[tool_call("send", {"to": to}, id=f"call_{to}") for to in payees])

    return ReActAgent("payer", ScriptedModel(reply), tools=[send])


async def test_calls_ending_together_are_settled_by_the_write_that_holds_their_results(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Bob's and eve's calls end in one step; ann's still runs. Bob's record is written after
    both results are in the round's list, so it holds eve's too, and a resume replays her; it
    settled bob's point only, and eve's own write then failed: listings showed eve as waiting
    and the warning said a resume runs her call again. The write that holds a result settles
    its point, and eve's write has nothing more to write (no warning)."""
    gate, arrived = asyncio.Event(), []
    send = _together(gate, arrived, 2)
    store = _DownAtTheEnd()
    runner = Runner(_sender(send, ("bob", "eve", "ann")), checkpoint_store=store)
    paused = await runner.invoke("pay all", checkpoint_id="conv-11")
    assert paused.interrupt is not None
    bob, eve, ann = paused.interrupt.point_ids
    answers = {bob: {"approved": True}, eve: {"approved": True}, ann: {"approved": True}}

    store.down, store.takes = True, 1  # bob's record is written, no later one
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        # Read while the resume is still held open (ann's call still running), not after.
        async with contextlib.aclosing(runner.resume("conv-11", answers)) as run:
            async for event in run:
                if _is_tool_result(event):
                    break
            stored = await store.get("conv-11")
            assert stored is not None
            body = decode_checkpoint(stored, "conv-11")
            [entry] = [entry async for entry in runner.pending()]
    assert sorted(paid) == ["bob", "eve"]
    assert sorted(body["settled"]) == sorted([bob, eve])
    [done] = [s[AGENT_STATE]["done"] for s in body["states"].values() if AGENT_STATE in s]
    assert sorted(d["id"] for d in done) == ["call_bob", "call_eve"]
    assert entry.point_ids == [ann]
    assert [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"] == []

    store.down = False
    arrived.clear()
    gate.clear()
    finished = await Runner(
        _sender(_together(gate, arrived, 1), ("bob", "eve", "ann")), checkpoint_store=store
    ).invoke_resume("conv-11", answers)
    assert finished.text == "done" and await store.get("conv-11") is None
    assert sorted(paid) == ["ann", "bob", "eve"]  # bob's and eve's replayed, as listed


class _LosesClaimAtFirstRecord:
    """A store of your own that claims: once ``held`` (the resume's claim, handed over by a tool)
    is set, the first record written to it loses that claim at once (it lapsed as the write
    ended), as a claim may any time: the race of a lost claim with a record that has nothing
    new to write, made to happen every time."""

    claim_ttl = 30.0

    def __init__(self) -> None:
        self.inner = InMemoryCheckpointStore()
        self.claims: dict[str, str] = {}
        self.held: Any = None
        self.records = 0

    async def get(self, id: str) -> bytes | None:
        return await self.inner.get(id)

    async def put(self, id: str, data: bytes) -> None:
        await self.inner.put(id, data)
        if self.held is not None:
            self.records += 1
            self.held._lost = True

    async def delete(self, id: str) -> None:
        await self.inner.delete(id)

    async def claim(self, id: str, owner: str) -> bool:
        return self.claims.setdefault(id, owner) == owner

    async def release(self, id: str, owner: str) -> None:
        if self.claims.get(id) == owner:
            del self.claims[id]


async def test_a_claim_lost_after_the_write_that_holds_a_result_does_not_warn_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Bob's and eve's calls end in one step: the first record holds both results, and the
    claim is lost as that write ends. The second record has nothing new to write, which it
    says without a look at the claim: it looked at the claim first and warned that a resume runs
    the call again, when the checkpoint holds its result and a resume replays it. The lost
    claim still stops the resume at its next event, as always."""
    store = _LosesClaimAtFirstRecord()
    gate, arrived = asyncio.Event(), []

    @tool(require_approval=True)
    async def send(ctx: ToolContext, to: str) -> str:
        """Send to someone once a person approves it."""
        progress = ctx.run_context._run.plan.progress  # type: ignore[union-attr]
        store.held = progress.claim
        arrived.append(to)
        if len(arrived) == 2:
            asyncio.get_running_loop().call_soon(gate.set)  # once this call waits too
        await gate.wait()
        paid.append(to)
        return f"sent to {to}"

    runner = Runner(_sender(send, ("bob", "eve")), checkpoint_store=store)  # type: ignore[arg-type]
    paused = await runner.invoke("pay both", checkpoint_id="conv-13")
    assert paused.interrupt is not None
    answers = {p: {"approved": True} for p in paused.interrupt.point_ids}
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        events = [event async for event in runner.resume("conv-13", answers)]
    assert store.records == 1 and sorted(paid) == ["bob", "eve"]
    assert [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"] == []
    assert events[-1].error is not None and "claim" in events[-1].error.message
    stored = await store.get("conv-13")
    assert stored is not None
    [done] = [
        s[AGENT_STATE]["done"]
        for s in decode_checkpoint(stored, "conv-13")["states"].values()
        if AGENT_STATE in s
    ]
    assert sorted(d["id"] for d in done) == ["call_bob", "call_eve"]


async def test_a_finished_resume_whose_calls_ended_together_in_one_record_says_both_replay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Bob's and eve's calls end in one step; bob's record holds both results, then the store
    fails every write (eve's record, the finish's delete). A second resume replays both: the
    error must not name eve's call as running again, nor a warning say so."""
    gate, arrived = asyncio.Event(), []
    store = _DownAtTheEnd()
    runner = Runner(_sender(_together(gate, arrived, 2), ("bob", "eve")), checkpoint_store=store)
    paused = await runner.invoke("pay both", checkpoint_id="conv-12")
    assert paused.interrupt is not None
    bob, eve = paused.interrupt.point_ids
    answers = {bob: {"approved": True}, eve: {"approved": True}}

    store.down, store.takes = True, 1
    with (
        caplog.at_level(logging.WARNING, logger="adk.checkpoint"),
        pytest.raises(CheckpointStoreError) as caught,
    ):
        await runner.invoke_resume("conv-12", answers)
    message = str(caught.value)
    assert "would replay the recorded results of the calls this resume ran" in message
    assert repr(eve) not in message and repr(bob) not in message
    assert [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"] == []
    assert sorted(paid) == ["bob", "eve"]

    store.down = False
    done = await runner.invoke_resume("conv-12", answers)
    assert done.text == "done" and await store.get("conv-12") is None
    assert sorted(paid) == ["bob", "eve"]  # both replayed, as the error said


# -- a record landing as its resume's claim lapsed -----------------------------------------------


@tool(require_approval=True)
async def pay_with_receipt(to: str, amount: int) -> str:
    """Pay an amount to someone once a person approves it; the result names the payment."""
    paid.append(to)
    return f"paid {amount} to {to}, receipt {len(paid)}"


def _receipts() -> ReActAgent:
    """Asks to pay bob 5; once the result is in, answers with it (so each payment's record
    differs from another's of the same call, as a real payment's would)."""

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"done: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay_with_receipt", {"to": "bob", "amount": 5})])

    return ReActAgent("payer", ScriptedModel(reply), tools=[pay_with_receipt])


class _Held(SQLiteCheckpointStore):
    """Holds each record's replace at ``gate`` once ``hold`` is set (``arrived`` set as it
    comes), then fails it unwritten once if ``fail``; runs ``landed`` once one has written; notes
    the owner of its last claim."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.owner = ""
        self.hold = False
        self.arrived = asyncio.Event()
        self.gate = asyncio.Event()
        self.landed: Callable[[], None] | None = None
        self.fail = False

    async def claim(self, id: str, owner: str) -> bool:
        self.owner = owner
        return await super().claim(id, owner)

    async def _replace(self, id: str, old: bytes, data: bytes) -> bool:
        if self.hold:
            self.arrived.set()
            await self.gate.wait()
        if self.fail:
            self.fail = False
            raise CheckpointStoreError("connection lost", backend="test", operation="put")
        replaced = await super()._replace(id, old, data)
        if replaced and self.landed is not None:
            self.landed()
        return replaced


@pytest.mark.parametrize(
    ("own_record", "keep"), [("written", False), ("failed", False), ("failed", True)]
)
async def test_a_record_landing_as_its_claim_lapsed_is_finished_by_the_resume_that_took_over(
    own_record: str, keep: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Worker A paid bob and sent its record; the store was slower than A's lease, which lapsed
    meanwhile, and worker B took the checkpoint over and loaded it as paused. A's record then
    landed (its compare held: the store still held the pause), and B, having paid bob too (the
    lapse's cost), had its own record refused and its finish leave the checkpoint behind, A's
    record in it: a third resume would have replayed A's payment and run the rest again, though
    B had finished the run. The checkpoint under B is the same pause with another resume's
    record added, consistent: B writes its record over it, and its finish deletes it, also when
    B's own record failed (the store lost the connection before writing it); with
    keep_checkpoints it is marked finished."""
    path = tmp_path / "checkpoints.db"
    worker_a, worker_b = _Held(path), _Held(path)
    try:
        paused = await Runner(_receipts(), checkpoint_store=worker_a).invoke(
            "pay", checkpoint_id="lapse"
        )
        assert paused.interrupt is not None
        worker_a.hold = worker_b.hold = True
        worker_b.fail = own_record == "failed"
        approve = {"approved": True}
        left = asyncio.create_task(
            _leave_at_first_result(Runner(_receipts(), checkpoint_store=worker_a), "lapse", approve)
        )
        await worker_a.arrived.wait()  # A paid bob and its record is on its way...
        await worker_a.release("lapse", worker_a.owner)  # ...as its claim lapses in the store
        with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
            taking_over = Runner(_receipts(), checkpoint_store=worker_b, keep_checkpoints=keep)
            took_over = asyncio.create_task(taking_over.invoke_resume("lapse", approve))
            await worker_b.arrived.wait()  # B loaded the pause and paid bob; its record waits
            worker_a.gate.set()
            await left  # A's record landed over the pause B loaded
            worker_b.gate.set()
            done = await took_over
        assert done.text == "done: paid 5 to bob, receipt 2"
        assert paid == ["bob", "bob"]
        warnings = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
        if own_record == "written":
            assert warnings == []
        else:
            assert len(warnings) == 1 and "connection lost" in warnings[0], warnings
        if keep:
            with pytest.raises(CheckpointError, match="has finished"):
                await taking_over.invoke_resume("lapse", approve)
            assert paid == ["bob", "bob"]
        else:
            assert await worker_b.get("lapse") is None  # finished: nothing left to resume again
    finally:
        await worker_a.aclose()
        await worker_b.aclose()


async def test_a_record_that_landed_as_its_claim_lapsed_is_replayed_by_the_next_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A's record landed (its compare held) just as its lease ran out by its own clock: A stops
    at its next event with the lost claim, writing nothing more, and the checkpoint holds the
    pause with A's record, consistent. The next resume replays the payment, pays nobody again,
    and finishes the checkpoint."""
    now = [1000.0]
    monkeypatch.setattr(_claim_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    store = _Held(tmp_path / "checkpoints.db")
    try:
        paused = await Runner(_receipts(), checkpoint_store=store).invoke(
            "pay", checkpoint_id="lost"
        )
        assert paused.interrupt is not None

        def lapse() -> None:
            now[0] += 2 * store.claim_ttl

        store.landed = lapse
        with pytest.raises(RunError, match="lost the claim on checkpoint 'lost'"):
            await Runner(_receipts(), checkpoint_store=store).invoke_resume(
                "lost", {"approved": True}
            )
        store.landed = None
        assert paid == ["bob"]
        done = await Runner(_receipts(), checkpoint_store=store).invoke_resume(
            "lost", {"approved": True}
        )
        assert done.text == "done: paid 5 to bob, receipt 1" and paid == ["bob"]  # replayed
        assert await store.get("lost") is None
    finally:
        await store.aclose()


async def test_a_lapsed_resumes_record_does_not_write_over_the_one_that_took_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The other way round: B took the checkpoint over and recorded its payment first, and A's
    record, sent before A's claim lapsed, comes after. A's is refused and, seeing the same
    pause with B's record in it, A must not write over it: its claim is lost (by its own clock,
    which ends its lease before the store's). B's record stands, and the next resume replays
    B's payment."""
    lapsed: set[str] = set()
    held = _claim_module._Claim.lost
    monkeypatch.setattr(
        _claim_module._Claim,
        "lost",
        property(lambda claim: claim.owner in lapsed or held.fget(claim)),  # type: ignore[attr-defined]
    )
    path = tmp_path / "checkpoints.db"
    worker_a, worker_b = _Held(path), _Held(path)
    try:
        paused = await Runner(_receipts(), checkpoint_store=worker_a).invoke(
            "pay", checkpoint_id="late"
        )
        assert paused.interrupt is not None
        worker_a.hold = True
        approve = {"approved": True}
        with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
            left = asyncio.create_task(
                _leave_at_first_result(
                    Runner(_receipts(), checkpoint_store=worker_a), "late", approve
                )
            )
            await worker_a.arrived.wait()  # A paid bob and its record is on its way...
            await worker_a.release("late", worker_a.owner)  # ...as its claim lapses
            lapsed.add(worker_a.owner)
            await _leave_at_first_result(
                Runner(_receipts(), checkpoint_store=worker_b), "late", approve
            )
            worker_a.gate.set()
            await left
        warnings = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
        assert len(warnings) == 1 and "lost the claim on it" in warnings[0], warnings
        assert paid == ["bob", "bob"]
        done = await Runner(_receipts(), checkpoint_store=worker_b).invoke_resume("late", approve)
        assert done.text == "done: paid 5 to bob, receipt 2"  # B's, replayed
        assert paid == ["bob", "bob"]
    finally:
        await worker_a.aclose()
        await worker_b.aclose()


# -- a redeploy that removed a recorded call's tool -------------------------------------------


@tool(require_approval=True)
async def ship(item: str) -> str:
    """Ship an item once a person approves it."""
    paid.append(f"shipped {item}")
    return f"shipped {item}"


def _pay_and_ship_model(*, model_down: bool = False) -> ScriptedModel:
    """Asks, in one round, to pay bob 5 and to ship the lamp; once both results are in, answers
    with them (or fails, as a model down)."""

    def reply(messages: list[Message]) -> Any:
        results = [m.content for m in messages if m.role == Role.TOOL]
        if len(results) == 2:
            if model_down:
                raise RuntimeError("model down")
            return Reply(text="done: " + "; ".join(results))
        return Reply(
            tool_calls=[
                tool_call("pay", {"to": "bob", "amount": 5}, id="call_pay"),
                tool_call("ship", {"item": "lamp"}, id="call_ship"),
            ]
        )

    return ScriptedModel(reply)


def _pause_saved_after_the_finishs_read(store: Any, new_pause: bytes) -> list[int]:
    """Make ``store.get`` save ``new_pause`` under the id it read right after its second read
    (a resume's first read is its load, the second its finish's): a pause saved between the
    finish's read and its write or delete. Returns the count of reads, kept up to date."""
    read = store.get
    reads = [0]

    async def get(id: str) -> bytes | None:
        data = await read(id)
        reads[0] += 1
        if reads[0] == 2:
            await store.put(id, new_pause)
        return data

    store.get = get
    return reads


async def _paid_then_left_while_shipping(
    build: Callable[..., ReActAgent], store: CheckpointStore, text: str, checkpoint_id: str
) -> dict[str, Any]:
    """Run ``text`` with ``build(pay, ship)`` to its pause at ``checkpoint_id``, approve every
    call, and resume it with a shipping that never ships (``stuck_ship``), its reader leaving
    at the payment's result: the payment made and recorded, the shipping cut off. Returns the
    answers, for the resumes after it."""
    paused = await Runner(build(pay, ship), checkpoint_store=store).invoke(
        text, checkpoint_id=checkpoint_id
    )
    assert paused.interrupt is not None
    answers = {point: {"approved": True} for point in paused.interrupt.point_ids}
    await _leave_at_first_result(
        Runner(build(pay, stuck_ship()), checkpoint_store=store), checkpoint_id, answers
    )
    return answers


def _pays_and_ships(*tools: Any, model_down: bool = False) -> ReActAgent:
    return ReActAgent("payer", _pay_and_ship_model(model_down=model_down), tools=list(tools))


async def test_a_checkpoint_whose_every_call_was_recorded_resumes_after_its_tools_were_removed() -> (
    None
):
    """Both approved calls ran and were recorded, then the model failed. A redeploy removed
    both tools: the resume was refused ('need tools it no longer has'), though it runs neither
    call, only replays their recorded results. It replays them and finishes."""
    store = InMemoryCheckpointStore()
    paused = await Runner(_pays_and_ships(pay, ship), checkpoint_store=store).invoke(
        "pay and ship", checkpoint_id="gone"
    )
    assert paused.interrupt is not None
    answers = {point: {"approved": True} for point in paused.interrupt.point_ids}
    with pytest.raises(RunError, match="model down"):
        await Runner(
            _pays_and_ships(pay, ship, model_down=True), checkpoint_store=store
        ).invoke_resume("gone", answers)
    assert paid == ["bob", "shipped lamp"]

    done = await Runner(_pays_and_ships(), checkpoint_store=store).invoke_resume("gone", answers)

    assert done.text == "done: paid 5 to bob; shipped lamp"
    assert paid == ["bob", "shipped lamp"]
    assert await store.get("gone") is None


class _Offering:
    """A ``Toolset`` offering ``tools`` (asked when the agent's run starts, as an MCP server's
    are: the check before a resume does not see them)."""

    def __init__(self, *tools: Any) -> None:
        self._tools = list(tools)

    async def tools(self, ctx: Any) -> list[Any]:
        return self._tools


async def test_a_recorded_call_of_a_toolset_that_no_longer_offers_its_tool_is_replayed() -> None:
    """As above with the tools from a toolset (an MCP server's, one optional and down at the
    resume offers none): the resume's own check, once the toolset was asked, refused the
    recorded calls' missing tools; they are replayed."""
    store = InMemoryCheckpointStore()

    def agent(*offered: Any, model_down: bool = False) -> ReActAgent:
        model = _pay_and_ship_model(model_down=model_down)
        return ReActAgent("payer", model, tools=[_Offering(*offered)])

    paused = await Runner(agent(pay, ship), checkpoint_store=store).invoke(
        "pay and ship", checkpoint_id="offered"
    )
    assert paused.interrupt is not None
    answers = {point: {"approved": True} for point in paused.interrupt.point_ids}
    with pytest.raises(RunError, match="model down"):
        await Runner(agent(pay, ship, model_down=True), checkpoint_store=store).invoke_resume(
            "offered", answers
        )

    done = await Runner(agent(), checkpoint_store=store).invoke_resume("offered", answers)

    assert done.text == "done: paid 5 to bob; shipped lamp"
    assert paid == ["bob", "shipped lamp"]


async def test_a_removed_tool_is_refused_only_for_the_calls_that_must_still_run() -> None:
    """The first resume approved both calls; the payment ended and was recorded, and its reader
    left at the payment's result while the shipping still ran (cut off: not recorded). A
    redeploy without the payment tool resumes it (the payment replayed, the shipping run); one
    without the shipping tool is refused naming that tool alone, before anything runs."""
    store = InMemoryCheckpointStore()
    answers = await _paid_then_left_while_shipping(_pays_and_ships, store, "pay and ship", "half")
    assert paid == ["bob"]

    with pytest.raises(RunError, match=r"need tools it no longer has: ship \(") as refused:
        await Runner(_pays_and_ships(pay), checkpoint_store=store).invoke_resume("half", answers)
    assert "pay" not in str(refused.value).split("no longer has:")[1].split("(")[0]
    assert paid == ["bob"]

    done = await Runner(_pays_and_ships(ship), checkpoint_store=store).invoke_resume(
        "half", answers
    )
    assert done.text == "done: paid 5 to bob; shipped lamp"
    assert paid == ["bob", "shipped lamp"]
    assert await store.get("half") is None


# -- calls of a nested run (an AgentTool's) ---------------------------------------------------


def _boss(*cashier_tools: Any, model_down: bool = False) -> ReActAgent:
    """Asks its ``cashier`` (an AgentTool, whose inner events it shows) to pay bob and ship the
    lamp, and answers with what the cashier said (or fails, as a model down); the cashier makes
    both calls (approvals) in one round with ``cashier_tools`` and says what they did."""
    model = _pay_and_ship_model()
    cashier = ReActAgent("cashier", model, tools=list(cashier_tools), description="pays")

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            if model_down:
                raise RuntimeError("model down")
            return Reply(text=f"boss: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("cashier", {"request": "pay and ship"}, id="ask")])

    tools = [AgentTool(cashier, emit_inner_events=True)]
    return ReActAgent("boss", ScriptedModel(reply), tools=tools)


async def test_a_call_of_an_agent_tools_nested_run_is_recorded_and_replayed(
    stores: StoreFactory,
) -> None:
    """The cashier, a ReActAgent inside an AgentTool, paused for a payment and a shipping. The
    first resume paid, and its reader left at the payment's result (shown from the nested run)
    while the shipping still ran, before the AgentTool's call ended: the outer round had nothing
    to record, and the nested run recorded nothing, so the second resume paid again. The nested
    round records the payment in its own saved state (the checkpoint holds it under its
    address), and the second resume replays it and ships."""
    stuck = stuck_ship()

    async with runner_over(_boss(pay, ship), stores) as first:
        paused = await first.invoke("pay bob", checkpoint_id="nested")
    assert paused.interrupt is not None
    inside = "agent:boss/tool:cashier#ask/agent:cashier"
    assert paused.interrupt.point_ids == [
        f"{inside}/tool:pay#call_pay",
        f"{inside}/tool:ship#call_ship",
    ]
    answers = {point: {"approved": True} for point in paused.interrupt.point_ids}

    async with runner_over(_boss(pay, stuck), stores) as leaving:
        await _leave_at_first_result(leaving, "nested", answers)
        stored = await leaving.checkpoint_store.get("nested")
    assert paid == ["bob"]
    assert stored is not None
    body = decode_checkpoint(stored, "nested")
    assert body["settled"] == [f"{inside}/tool:pay#call_pay"]
    cashier = body["states"][inside][AGENT_STATE]
    assert [entry["id"] for entry in cashier["done"]] == ["call_pay"]
    assert "done" not in body["states"]["agent:boss"][AGENT_STATE]  # the outer call did not end

    async with runner_over(_boss(pay, ship), stores) as again:
        done = await again.invoke_resume("nested", answers)
        assert await again.checkpoint_store.get("nested") is None
    assert done.text == "boss: done: paid 5 to bob; shipped lamp"
    assert paid == ["bob", "shipped lamp"]  # the payment replayed inside the nested run


async def test_a_nested_record_then_the_agent_tools_record_replay_each_call_once() -> None:
    """The nested run recorded the payment (its reader left while the shipping ran); the second
    resume replayed it, shipped, and the AgentTool's call ended, which the outer round recorded
    whole, before the outer model failed. The third resume replays the AgentTool's call without
    running the cashier: each call was made once."""
    store = InMemoryCheckpointStore()
    answers = await _paid_then_left_while_shipping(_boss, store, "pay bob", "twice")
    with pytest.raises(RunError, match="model down"):
        await Runner(_boss(pay, ship, model_down=True), checkpoint_store=store).invoke_resume(
            "twice", answers
        )
    assert paid == ["bob", "shipped lamp"]
    stored = await store.get("twice")
    assert stored is not None
    outer = decode_checkpoint(stored, "twice")["states"]["agent:boss"][AGENT_STATE]
    assert [entry["id"] for entry in outer["done"]] == ["ask"]

    done = await Runner(_boss(), checkpoint_store=store).invoke_resume("twice", answers)

    assert done.text == "boss: done: paid 5 to bob; shipped lamp"
    assert paid == ["bob", "shipped lamp"]
    assert await store.get("twice") is None


def _two_cashiers() -> ReActAgent:
    """Asks its ``cashier`` (an AgentTool) twice in one round, for bob and for eve; each cashier
    pays its payee (an approval), and bob's then pays bob's landlord (another approval, so its
    nested run pauses again after its first round) before it answers."""

    def cashier_reply(messages: list[Message]) -> Any:
        results = [m.content for m in messages if m.role == Role.TOOL]
        request = next(m.content for m in messages if m.role == Role.USER)
        who = "bob" if "bob" in request else "eve"
        if not results:
            return Reply(tool_calls=[tool_call("pay", {"to": who, "amount": 5}, id=f"p_{who}")])
        if who == "bob" and len(results) == 1:
            landlord = tool_call("pay", {"to": "landlord", "amount": 9}, id="p_landlord")
            return Reply(tool_calls=[landlord])
        return Reply(text="; ".join(results))

    cashier = ReActAgent("cashier", ScriptedModel(cashier_reply), tools=[pay], description="pays")

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            return Reply(
                text=" | ".join(sorted(m.content for m in messages if m.role == Role.TOOL))
            )
        return Reply(
            tool_calls=[
                tool_call("cashier", {"request": f"pay {who}"}, id=f"ask_{who}")
                for who in ("bob", "eve")
            ]
        )

    return ReActAgent(
        "boss", ScriptedModel(reply), tools=[AgentTool(cashier, emit_inner_events=True)]
    )


async def test_two_agent_tool_calls_record_apart_and_a_nested_run_pausing_again_keeps_them() -> (
    None
):
    """Two AgentTool calls of one round, each paused in its nested run: the first resume pays
    bob and eve (each nested round records its payment under its own address), and its reader
    leaves; the second replays both, eve's call ends (the outer round records it) and bob's
    nested run pauses again for his landlord, a new pause of the checkpoint; the third pays the
    landlord alone. Each payment is made once."""
    store = InMemoryCheckpointStore()
    paused = await Runner(_two_cashiers(), checkpoint_store=store).invoke(
        "pay them", checkpoint_id="two"
    )
    assert paused.interrupt is not None
    inside = "agent:boss/tool:cashier#ask_{}/agent:cashier"
    assert paused.interrupt.point_ids == [
        f"{inside.format('bob')}/tool:pay#p_bob",
        f"{inside.format('eve')}/tool:pay#p_eve",
    ]
    answers = {point: {"approved": True} for point in paused.interrupt.point_ids}
    leaving = Runner(_two_cashiers(), checkpoint_store=store)
    async with contextlib.aclosing(leaving.resume("two", answers)) as run:
        async for event in run:  # left at the second payment's result (shown from its run)
            if _is_tool_result(event) and len(paid) == 2:
                break
    assert sorted(paid) == ["bob", "eve"]
    stored = await store.get("two")
    assert stored is not None
    body = decode_checkpoint(stored, "two")
    for who in ("bob", "eve"):
        nested = body["states"][inside.format(who)][AGENT_STATE]
        assert [entry["id"] for entry in nested["done"]] == [f"p_{who}"]

    again = await Runner(_two_cashiers(), checkpoint_store=store).invoke_resume("two", answers)
    assert again.interrupt is not None
    assert again.interrupt.point_ids == [f"{inside.format('bob')}/tool:pay#p_landlord"]
    assert sorted(paid) == ["bob", "eve"]  # both replayed inside their nested runs

    done = await Runner(_two_cashiers(), checkpoint_store=store).invoke_resume(
        "two", {again.interrupt.point_ids[0]: {"approved": True}}
    )
    assert done.text == "paid 5 to bob; paid 9 to landlord | paid 5 to eve"
    assert sorted(paid) == ["bob", "eve", "landlord"]
    assert await store.get("two") is None


async def test_a_record_refused_in_a_write_whose_holder_was_cancelled_leaves_the_queue(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Records asked for together are written by the one holding the lock (``_write_queued``),
    which sets the outcome of a record it refuses (a value that cannot be stored) before the
    write. Its holder cancelled in that write (the loop shutting down cancels the record's
    task, which ``finish`` keeps from its caller only), the refused record stayed in the
    queue once it had returned, its context with it (and through it its run, which holds
    the queue: a cycle) until some later write. It warns once and leaves the queue; the
    holder's own record, cancelled before it was written, is not in it either."""
    entered = asyncio.Event()

    class _Hangs(InMemoryCheckpointStore):
        async def _replace(self, id: str, old: bytes, data: bytes) -> bool:
            entered.set()
            await asyncio.Event().wait()  # cancelled here
            raise AssertionError("unreachable")

    empty = {AGENT_STATE: {}}
    body: dict[str, Any] = {"states": {"a": dict(empty), "b": dict(empty)}, "points": []}
    data = encode_checkpoint(body)
    store = _Hangs()
    await store.put("p", data)
    progress = _progress._Progress(store, "p", body, data, None)
    run = SimpleNamespace(session=SimpleNamespace(values={}))

    class _Ctx:  # a component's context: its address, and the run its session is read from
        def __init__(self, address: str) -> None:
            self.address, self._run = address, run

    holder_ctx, refused_ctx = _Ctx("a"), _Ctx("b")
    refused_alive = weakref.ref(refused_ctx)
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        holder = asyncio.create_task(
            progress.record(holder_ctx, {"done": 1}, "a's call")  # type: ignore[arg-type]
        )
        refused = asyncio.create_task(
            progress.record(refused_ctx, {"done": object()}, "b's call")  # type: ignore[arg-type]
        )
        await entered.wait()
        holder.cancel()
        await asyncio.wait([holder])
        assert holder.cancelled()
        assert await refused is False
    warnings = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
    assert len(warnings) == 1 and "b's call" in warnings[0], warnings
    del refused_ctx, refused, holder  # (the cancelled one's traceback holds its batch)
    gc.collect()
    assert refused_alive() is None  # let go: no queue holds it
    assert progress._queued == []
    assert await store.get("p") == data  # nothing written
