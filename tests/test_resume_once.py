"""A checkpoint is resumed by one run at a time.

Two resumes of one checkpoint at once — an approval button clicked twice, a request retried by a
proxy, two workers picking up the same approval — each read the checkpoint before either could
delete it, so each ran the approved call: the payment was made twice. In one process the runner
now refuses the second resume while the first runs, across runners that share the store; the claim
ends with the resume, however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import other_tasks

from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    Callbacks,
    CheckpointError,
    Message,
    ParallelAgent,
    Role,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    tool,
)
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

paid: list[int] = []


@tool(require_approval=True)
async def pay(amount: int) -> str:
    """Pay an amount once a person approves it."""
    await asyncio.sleep(0.01)  # a real payment call takes a while: the window for a second resume
    paid.append(amount)
    return f"paid {amount}"


def _payer(after_payment: Any = None, paid_event: asyncio.Event | None = None) -> ReActAgent:
    """Pays the amount the user names; then answers (or does ``after_payment``: an error, a
    delay), setting ``paid_event`` when it sees the payment's result."""

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            if paid_event is not None:
                paid_event.set()
            return after_payment or Reply(text=f"done: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay", {"amount": int(messages[-1].content)})])

    return ReActAgent("payer", ScriptedModel(reply), tools=[pay])


@pytest.fixture(autouse=True)
def _no_payments_yet() -> None:
    paid.clear()


async def test_a_second_resume_while_the_first_runs_is_refused_and_pays_nothing() -> None:
    runner = Runner(_payer())
    paused = await runner.invoke("5")
    assert paused.checkpoint_id is not None

    results = await asyncio.gather(
        *(runner.invoke_resume(paused.checkpoint_id, {"approved": True}) for _ in range(3)),
        return_exceptions=True,
    )

    texts = [r.text for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, CheckpointError)]
    assert texts == ["done: paid 5"]
    assert len(refused) == 2 and all("already being resumed" in str(e) for e in refused)
    assert paid == [5]


async def test_runners_sharing_a_store_share_the_claim(tmp_path: Any) -> None:
    # A service often builds a runner per request over one store.
    store = SQLiteCheckpointStore(tmp_path / "checkpoints.db")
    try:
        paused = await Runner(_payer(), checkpoint_store=store).invoke("7")
        assert paused.checkpoint_id is not None
        runners = [Runner(_payer(), checkpoint_store=store) for _ in range(2)]

        results = await asyncio.gather(
            *(r.invoke_resume(paused.checkpoint_id, {"approved": True}) for r in runners),
            return_exceptions=True,
        )

        assert sorted(type(r).__name__ for r in results) == ["CheckpointBusyError", "RunResult"]
        assert paid == [7]
        assert await store.get(paused.checkpoint_id) is None  # finished: deleted once
    finally:
        await store.aclose()


async def test_the_same_id_in_another_store_is_another_checkpoint() -> None:
    stores = [InMemoryCheckpointStore(), InMemoryCheckpointStore()]
    for store, amount in zip(stores, ("1", "2"), strict=True):
        await Runner(_payer(), checkpoint_store=store).invoke(amount, checkpoint_id="approval-1")

    results = await asyncio.gather(
        *(
            Runner(_payer(), checkpoint_store=s).invoke_resume("approval-1", {"approved": True})
            for s in stores
        )
    )

    assert sorted(r.text for r in results) == ["done: paid 1", "done: paid 2"]


@pytest.mark.parametrize("ending", ["error", "cancelled"])
async def test_a_resume_that_fails_or_is_cancelled_lets_the_next_one_in(ending: str) -> None:
    store = InMemoryCheckpointStore()
    paused = await Runner(_payer(), checkpoint_store=store).invoke("3")
    checkpoint_id = paused.checkpoint_id
    assert checkpoint_id is not None

    if ending == "error":
        failing = Runner(_payer(after_payment=RuntimeError("model down")), checkpoint_store=store)
        with pytest.raises(RunError, match="model down"):
            await failing.invoke_resume(checkpoint_id, {"approved": True})
    else:
        answering = asyncio.Event()
        slow = Runner(_payer(Reply(text="late", delay=30), answering), checkpoint_store=store)
        task = asyncio.ensure_future(slow.invoke_resume(checkpoint_id, {"approved": True}))
        await answering.wait()  # paid; the model now takes its time
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    result = await Runner(_payer(), checkpoint_store=store).invoke_resume(
        checkpoint_id, {"approved": True}
    )

    assert result.text == "done: paid 3"
    # The failed attempt had paid already and recorded the payment's result in the checkpoint:
    # the retried resume replays it rather than paying again (docs/interrupts.md).
    assert paid == [3]


async def test_a_run_that_pauses_again_can_be_resumed_again() -> None:
    @tool(require_approval=True)
    async def confirm(step: int) -> str:
        """Confirm a step."""
        return f"confirmed {step}"

    def reply(messages: list[Message]) -> Any:
        done = sum(1 for m in messages if m.role == Role.TOOL)
        if done == 2:
            return "both confirmed"
        return Reply(tool_calls=[tool_call("confirm", {"step": done + 1})])

    runner = Runner(ReActAgent("steps", ScriptedModel(reply), tools=[confirm]))
    first = await runner.invoke("go")
    assert first.checkpoint_id is not None

    second = await runner.invoke_resume(first.checkpoint_id, {"approved": True})
    assert second.checkpoint_id == first.checkpoint_id  # paused again, same checkpoint
    assert second.interrupt is not None
    # Keyed by its point: plain data after a plain resume that paused for another call's
    # approval may be that decision sent again, and is refused (docs/interrupts.md, "Resuming").
    (step_2,) = second.interrupt.point_ids
    third = await runner.invoke_resume(first.checkpoint_id, {step_2: {"approved": True}})

    assert third.text == "both confirmed"


async def test_a_resume_left_early_and_closed_releases_the_checkpoint_at_once() -> None:
    runner = Runner(_payer())
    paused = await runner.invoke("9")
    assert paused.checkpoint_id is not None

    async with contextlib.aclosing(runner.resume(paused.checkpoint_id, {"approved": True})) as run:
        async for _ in run:
            break  # e.g. the client that asked went away

    result = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})

    assert result.text == "done: paid 9"
    # The first event was the approved call's result, so it had run, and was recorded in the
    # checkpoint before it went out: the retry, resuming the same checkpoint, replays it.
    assert paid == [9]


class _SilentGate(BaseAgent):
    """Pauses for a decision; on resume records it in the session and says nothing."""

    def __init__(self, effects: list[Any]) -> None:
        super().__init__("gate")
        self.effects = effects

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt("approve?")
            return
        self.effects.append(ctx.resume.data)
        ctx.session["decision"] = ctx.resume.data


@pytest.mark.parametrize("keep", [False, True])
async def test_a_resume_that_ends_without_an_event_still_finishes_its_checkpoint(
    keep: bool,
) -> None:
    """No event is no failure: the checkpoint is finished, so a second resume cannot repeat the
    effects."""
    effects: list[Any] = []
    store = InMemoryCheckpointStore()
    runner = Runner(_SilentGate(effects), checkpoint_store=store, keep_checkpoints=keep)
    paused = await runner.invoke("go", checkpoint_id="c1")
    assert paused.interrupt is not None

    done = await runner.invoke_resume("c1", "yes")

    assert done.events == [] and done.session["decision"] == "yes"
    assert (await store.get("c1") is not None) is keep
    with pytest.raises(CheckpointError):
        await runner.invoke_resume("c1", "yes")
    assert effects == ["yes"]


class _SlowGate(BaseAgent):
    """Pauses for a decision; on resume waits for ``go`` before it finishes."""

    def __init__(self, go: asyncio.Event, resumed: asyncio.Event) -> None:
        super().__init__("gate")
        self.go, self.resumed = go, resumed

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt("approve?")
            return
        self.resumed.set()
        await self.go.wait()
        yield AgentEvent.of(f"done: {ctx.resume.data}")


async def _resuming_slowly() -> tuple[asyncio.Event, InMemoryCheckpointStore, Runner, Any]:
    """A run paused as "conv-1" and a resume of it that waits for ``go`` before it finishes:
    (go, store, runner, the resume's task), once the resume is under way."""
    go, resumed = asyncio.Event(), asyncio.Event()
    store = InMemoryCheckpointStore()
    runner = Runner(_SlowGate(go, resumed), checkpoint_store=store)
    await runner.invoke("first", checkpoint_id="conv-1")
    resume = asyncio.create_task(runner.invoke_resume("conv-1", "yes"))
    await resumed.wait()
    return go, store, runner, resume


async def test_a_finishing_resume_leaves_a_newer_checkpoint_under_its_id_alone() -> None:
    """Another process paused a new run under the same id meanwhile: its checkpoint stays."""
    go, store, _, resume = await _resuming_slowly()
    newer = b"a newer checkpoint another process saved"
    await store.put("conv-1", newer)
    go.set()
    assert (await resume).text == "done: yes"
    assert await store.get("conv-1") == newer


async def test_a_new_run_cannot_pause_under_the_id_of_a_checkpoint_being_resumed() -> None:
    go, store, runner, resume = await _resuming_slowly()

    with pytest.raises(RunError, match="'conv-1': it is being resumed"):
        await runner.invoke("second", checkpoint_id="conv-1")

    go.set()
    assert (await resume).text == "done: yes"
    assert await store.get("conv-1") is None  # the resume finished it; nothing else was saved


async def test_a_run_cancelled_while_saving_its_pause_leaves_no_checkpoint_nobody_can_find() -> (
    None
):
    """The id was made up by the runner and never reported: the written checkpoint is removed."""
    writing = asyncio.Event()

    class SlowAck(InMemoryCheckpointStore):
        async def put(self, id: str, data: bytes) -> None:
            await super().put(id, data)  # written; the answer is slow to come back
            writing.set()
            await asyncio.sleep(5)

    store = SlowAck()
    go, resumed = asyncio.Event(), asyncio.Event()
    task = asyncio.ensure_future(Runner(_SlowGate(go, resumed), checkpoint_store=store).invoke("x"))
    await writing.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert store._data == {}


async def test_an_anyio_cancel_scope_cancelling_a_pause_while_it_saves_waits_for_the_cleanup(
    tmp_path: Path,
) -> None:
    """Under anyio's cancel scopes the cancellation comes again at every await, so it reached
    the deletion of the orphaned checkpoint too: the deletion went on after the cancelled run had
    returned, a task the run left running (found by fault injection). It now ends first."""
    writing = asyncio.Event()

    class SlowAck(SQLiteCheckpointStore):
        async def put(self, id: str, data: bytes) -> None:
            await super().put(id, data)  # written; the answer is slow to come back
            writing.set()
            await asyncio.sleep(5)

    async with SlowAck(tmp_path / "cp.db") as store:
        go, resumed = asyncio.Event(), asyncio.Event()
        with anyio.CancelScope() as scope:
            run = asyncio.ensure_future(
                Runner(_SlowGate(go, resumed), checkpoint_store=store).invoke("x")
            )
            await writing.wait()
            scope.cancel()
            await run
        assert scope.cancelled_caught and run.cancelled()
        assert other_tasks() == set()
        with sqlite3.connect(tmp_path / "cp.db") as db:
            assert db.execute("SELECT count(*) FROM pyadk_checkpoints").fetchone() == (0,)


@pytest.mark.parametrize("root", ["agent", "sequence"])
async def test_an_invoke_cancelled_after_saving_its_pause_leaves_no_checkpoint_nobody_can_find(
    root: str,
) -> None:
    """``invoke`` reports the generated checkpoint id only when it returns. Cancelled after the
    pause was saved, while the run winds down (here an ``after_agent`` callback that takes its
    time), it left the checkpoint under an id nobody could ever learn, kept for good by a
    persistent store (found by fault injection). It is removed, as when the cancellation comes
    while it is being saved; a checkpoint id the caller gave is the caller's, and stays."""
    winding_down = asyncio.Event()
    gate = _SlowGate(asyncio.Event(), asyncio.Event())
    agent = SequentialAgent("steps", [gate]) if root == "sequence" else gate

    async def after_agent(agent: Any, ctx: RunContext, error: Any) -> None:
        if not winding_down.is_set():  # the first agent to end takes its time
            winding_down.set()
            await asyncio.Event().wait()

    for given in (None, "mine"):
        store = InMemoryCheckpointStore()
        runner = Runner(agent, store, callbacks=[Callbacks(after_agent=after_agent)])
        winding_down.clear()
        task = asyncio.ensure_future(runner.invoke("x", checkpoint_id=given))
        await winding_down.wait()
        assert len(store._data) == 1  # the pause is saved
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert list(store._data) == ([] if given is None else ["mine"])


class PayOnYes(BaseAgent):
    """Asks a person to approve paying the payee its input names; pays on a yes (the new-run id
    tests use it too)."""

    def __init__(self, paid: list[str]) -> None:
        super().__init__("pay")
        self.paid = paid

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        payee = input.messages[-1].content if input.messages else "?"
        if ctx.resume is None:
            yield ctx.interrupt(f"pay {payee}?", state=payee)
            return
        if ctx.resume.data is True:
            self.paid.append(str(ctx.resume.state))
        yield AgentEvent.of("done")


@pytest.mark.parametrize("kept", [False, True])
async def test_a_new_run_cannot_pause_over_a_waiting_checkpoint_of_the_same_id(
    tmp_path: Path, kept: bool
) -> None:
    """A conversation's id reused for its next turn while the first turn waits for a person: the
    second turn's pause replaced the first's silently, and the person's yes to "pay bob?" then
    resumed "pay eve?" (plain data goes to the one pending point): eve was paid. Refused at the
    second pause, the waiting one kept as it was; a finished one (kept for audit) is replaced."""
    paid: list[str] = []
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        runner = Runner(PayOnYes(paid), checkpoint_store=store, keep_checkpoints=kept)
        first = await runner.invoke("bob", checkpoint_id="conv-1")
        assert first.interrupt is not None
        waiting = await store.get("conv-1")
        with pytest.raises(RunError, match="'conv-1': a paused run waits there") as refused:
            await runner.invoke("eve", checkpoint_id="conv-1")
        assert refused.value.event.error is not None
        assert refused.value.event.error.type == "CheckpointError"
        assert "pause a new run under another id" in str(refused.value)
        assert await store.get("conv-1") == waiting
        await runner.invoke_resume("conv-1", True)
        assert paid == ["bob"]
        # Once finished (deleted, or kept marked finished for audit), the id is free again.
        second = await runner.invoke("eve", checkpoint_id="conv-1")
        assert second.interrupt is not None
        await runner.invoke_resume("conv-1", False)
        assert paid == ["bob"]


async def test_a_resume_answering_some_points_pauses_again_under_its_own_id(tmp_path: Path) -> None:
    """The refusal above is a new run's: a resume that answers one of two waiting points pauses
    again under the id it resumed, replacing its own checkpoint, and a new run under the id is
    still refused until the last point is answered."""
    paid: list[str] = []

    class _Named(PayOnYes):
        def __init__(self, name: str) -> None:
            super().__init__(paid)
            self.name = name

    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        runner = Runner(ParallelAgent("both", [_Named("bob"), _Named("eve")]), store)
        first = await runner.invoke("x", checkpoint_id="conv-1")
        assert first.interrupt is not None
        bob, eve = (point.id for point in first.interrupt.points)
        again = await runner.invoke_resume("conv-1", {bob: True})
        assert again.checkpoint_id == "conv-1" and again.interrupt is not None
        assert [point.id for point in again.interrupt.points] == [eve]
        with pytest.raises(RunError, match="'conv-1': a paused run waits there"):
            await runner.invoke("y", checkpoint_id="conv-1")
        done = await runner.invoke_resume("conv-1", {eve: True})
        assert done.interrupt is None and paid == ["x", "x"]
        assert await store.get("conv-1") is None
