"""Interrupt and resume through the runner: pausing from agents and tools, point ids, what
``ctx.resume`` says, how resume data is addressed, the checkpoint's life cycle, what survives a
resume (session values, history), custom types in checkpoints, and failing checkpoint writes.

Composites (workflows, transfer flows, ``AgentTool``, ``ReActAgent``) have their own files:
``test_interrupt_workflows.py`` and ``test_interrupt_tools.py``. The helpers here are shared with
them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import ScriptAgent
from pydantic import BaseModel

import adk
from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    CheckpointError,
    Interrupt,
    InterruptInfo,
    InterruptPoint,
    Message,
    ParallelAgent,
    ResumeContext,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    ToolContext,
)
from adk.checkpoint import CheckpointStoreError, InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.checkpoint.codec import decode_checkpoint
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent

# -- shared helpers -----------------------------------------------------------------------------


class Asker(BaseAgent):
    """Says ``"<name> asks"`` and pauses (on the runs listed in ``pause_on``); when resumed it says
    ``"<name> got <data>"``. Records every run's ``ctx.resume`` and input.

    ``how`` picks the way to pause: ``"yield"`` (``yield ctx.interrupt(...)``) or ``"raise"``
    (``raise Interrupt(...)``).
    """

    def __init__(
        self,
        name: str,
        info: Any = None,
        state: Any = None,
        *,
        how: str = "yield",
        pause_on: tuple[int, ...] = (1,),
    ) -> None:
        super().__init__(name)
        self.info = info if info is not None else f"{name} waits"
        self.state = state
        self.how = how
        self.pause_on = pause_on
        self.runs = 0
        self.resumes: list[ResumeContext | None] = []
        self.inputs: list[list[Message]] = []
        self.session_seen: list[dict[str, Any]] = []

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.runs += 1
        resume = ctx.resume
        self.resumes.append(resume)
        self.inputs.append(list(input.messages))
        self.session_seen.append(dict(ctx.session.values))
        if resume is not None:
            yield AgentEvent.of(f"{self.name} got {resume.data!r}")
            return
        if self.runs not in self.pause_on:
            yield AgentEvent.of(f"{self.name} ran")
            return
        yield AgentEvent.of(f"{self.name} asks")
        if self.how == "raise":
            raise Interrupt(self.info, self.state)
        yield ctx.interrupt(self.info, self.state)
        raise AssertionError("the framework pulled an event after an interrupt")


class Recorder(BaseAgent):
    """Records ``ctx.resume`` and the session it saw, and says one line."""

    def __init__(self, name: str, text: str = "") -> None:
        super().__init__(name)
        self.text = text or f"{name} ran"
        self.runs = 0
        self.resumes: list[ResumeContext | None] = []
        self.inputs: list[list[Message]] = []

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.runs += 1
        self.resumes.append(ctx.resume)
        self.inputs.append(list(input.messages))
        yield AgentEvent.of(self.text)


async def collect(events: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    """Every event of a run or resume, streams read to the end."""
    out = []
    async for event in events:
        if event.output is not None and event.output.stream is not None:
            await event.output.stream.collect()
        out.append(event)
    return out


def pause_of(events: list[AgentEvent]) -> InterruptInfo:
    """The interrupt that ended a run (it must be the last event)."""
    assert events, "the run produced no events"
    info = events[-1].interrupted
    assert info is not None, f"the run did not pause: {simplify_events(events)}"
    assert all(e.interrupted is None for e in events[:-1]), "only the last event may interrupt"
    return info


def texts(messages: list[Message]) -> list[str]:
    return [m.content for m in messages]


class DictStore:
    """A minimal ``CheckpointStore`` over a dict that tests can inspect, and whose writes can be
    made to fail like a backend whose connection dropped (``put`` raises ``CheckpointStoreError``
    and changes nothing)."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.fail_puts = False
        self.puts = 0

    async def get(self, id: str) -> bytes | None:
        return self.data.get(id)

    async def put(self, id: str, data: bytes) -> None:
        self.puts += 1
        if self.fail_puts:
            raise CheckpointStoreError(
                f"flaky checkpoint store: put of checkpoint {id!r} failed: connection reset",
                backend="flaky",
                operation="put",
                checkpoint_id=id,
            )
        self.data[id] = bytes(data)

    async def delete(self, id: str) -> None:
        self.data.pop(id, None)


# -- pausing and resuming -----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["yield", "raise"])
async def test_single_interrupt_and_resume_with_data(how: str) -> None:
    agent = Asker("root", info={"question": "amount?"}, state={"step": 2}, how=how)
    runner = Runner(agent)

    events = await collect(runner.run("pay the bill"))

    assert simplify_events(events) == ["root: root asks", "root: [interrupt agent:root]"]
    info = pause_of(events)
    assert info.checkpoint_id
    assert info.points == [
        InterruptPoint(id="agent:root", address=["agent:root"], info={"question": "amount?"})
    ]
    assert events[-1].agent_name == "root" and events[-1].run_path == ("root",)
    assert await runner.checkpoint_store.get(info.checkpoint_id) is not None
    assert agent.resumes == [None]

    resumed = await collect(runner.resume(info.checkpoint_id, 120))

    assert simplify_events(resumed) == ["root: root got 120"]
    assert agent.resumes[-1] == ResumeContext(
        was_interrupted=True, state={"step": 2}, is_target=True, data=120
    )
    assert agent.runs == 2  # an agent without resume() is run again with ctx.resume set


async def test_interrupt_event_pulls_nothing_more_from_the_agent() -> None:
    # Asker raises AssertionError if pulled after its interrupt; that would be an error event.
    events = await collect(Runner(Asker("root")).run("hi"))
    assert [e.error for e in events] == [None, None]


async def test_interrupt_raised_from_a_tool_has_a_readable_stable_point_id() -> None:
    seen: list[ResumeContext | None] = []

    @adk.tool
    def transfer(amount: int, ctx: ToolContext) -> str:
        """Send money."""
        seen.append(ctx.resume)
        if ctx.resume is None:
            raise Interrupt({"confirm": amount}, state={"amount": amount})
        return f"sent {amount} ({ctx.resume.data})"

    def make_runner() -> Runner:
        model = ScriptedModel(
            [Reply(tool_calls=[tool_call("transfer", {"amount": 5}, id="call_1")]), "done"]
        )
        pay = ReActAgent("pay", model, tools=[transfer])
        return Runner(SequentialAgent("root", [pay]))

    runner = make_runner()
    info = pause_of(await collect(runner.run("send 5")))

    assert info.point_ids == ["agent:root/agent:pay/tool:transfer#call_1"]
    assert info.points[0].address == ["agent:root", "agent:pay", "tool:transfer#call_1"]
    assert info.points[0].info == {"confirm": 5}
    # Stable: the same agents pausing at the same place give the same id in another run.
    again = pause_of(await collect(make_runner().run("send 5")))
    assert again.point_ids == info.point_ids
    assert again.checkpoint_id != info.checkpoint_id

    resumed = await collect(runner.resume(info.checkpoint_id, "ok"))

    assert simplify_events(resumed) == ["pay: [tool transfer] sent 5 (ok)", "pay: done"]
    assert seen[-1] == ResumeContext(
        was_interrupted=True, state={"amount": 5}, is_target=True, data="ok"
    )


async def test_addresses_do_not_grow_with_steps_or_iterations() -> None:
    asker = Asker("ask", pause_on=(2,))
    loop = adk.LoopAgent("loop", [SequentialAgent("seq", [ScriptAgent("x", "x"), asker])], 3)
    events = await collect(Runner(loop).run("hi"))

    info = pause_of(events)
    assert info.point_ids == ["agent:loop/agent:seq/agent:ask"]
    assert info.points[0].address == info.point_ids[0].split("/")
    # The run path, unlike the address, grew with every step and iteration.
    assert events[-1].run_path == ("loop", "seq", "seq", "x", "ask")


async def test_agents_that_were_not_interrupted_see_no_resume_context() -> None:
    before, asker, after = Recorder("before"), Asker("ask"), Recorder("after")
    runner = Runner(SequentialAgent("root", [before, asker, after]))
    info = pause_of(await collect(runner.run("hi")))

    await collect(runner.resume(info.checkpoint_id, "yes"))

    assert before.resumes == [None]  # ran once, before the pause
    assert asker.resumes[0] is None and asker.resumes[1] is not None
    assert after.resumes == [None]


# -- addressing resume data ---------------------------------------------------------------------


async def test_resume_without_data_resumes_every_pending_point() -> None:
    a, b = Asker("a"), Asker("b")
    runner = Runner(ParallelAgent("par", [a, b]))
    info = pause_of(await collect(runner.run("hi")))
    assert sorted(info.point_ids) == ["agent:par/agent:a", "agent:par/agent:b"]

    events = await collect(runner.resume(info.checkpoint_id))

    assert sorted(simplify_events(events)) == ["a: a got None", "b: b got None"]
    for agent in (a, b):
        assert agent.resumes[-1] == ResumeContext(True, None, True, None)
    assert await runner.checkpoint_store.get(info.checkpoint_id) is None


@pytest.mark.parametrize(
    "data",
    [
        "approved",
        0,
        None,
        ["a", "b"],
        {"approved": True, "note": "ok"},
        {"agent": "not a point id"},  # keys that are not point ids make it plain data
    ],
)
async def test_plain_data_goes_to_the_single_pending_point(data: Any) -> None:
    asker = Asker("ask")
    runner = Runner(SequentialAgent("root", [Recorder("first"), asker]))
    info = pause_of(await collect(runner.run("hi")))

    await collect(runner.resume(info.checkpoint_id, data))

    assert asker.resumes[-1] == ResumeContext(True, None, True, data)


async def test_plain_data_with_two_pending_points_is_a_clear_error() -> None:
    a, b = Asker("a"), Asker("b")
    runner = Runner(ParallelAgent("par", [a, b]))
    info = pause_of(await collect(runner.run("hi")))
    saved = await runner.checkpoint_store.get(info.checkpoint_id)

    with pytest.raises(ValueError) as caught:
        await collect(runner.resume(info.checkpoint_id, "yes"))

    message = str(caught.value)
    assert "2 points are pending" in message
    assert "agent:par/agent:a" in message and "agent:par/agent:b" in message
    assert "{point_id: data}" in message
    # Nothing ran and nothing was lost: the checkpoint is as it was and still resumable.
    assert (a.runs, b.runs) == (1, 1)
    assert await runner.checkpoint_store.get(info.checkpoint_id) == saved
    events = await collect(
        runner.resume(info.checkpoint_id, {"agent:par/agent:a": 1, "agent:par/agent:b": 2})
    )
    assert sorted(simplify_events(events)) == ["a: a got 1", "b: b got 2"]


@pytest.mark.parametrize(
    "resume",
    [
        {"agent:root/agent:nope": "x"},
        {"agent:root/agent:ask": "x", "agent:root/agent:other": "y"},
        {"agent:root": "x"},  # an ancestor of the point is not a point
        {"agent:root/agent:ask": "x", "agent_root/agent:ask": "y"},  # one mistyped id
    ],
)
async def test_resume_data_for_an_unknown_point_id_is_a_clear_error(resume: Any) -> None:
    asker = Asker("ask")
    runner = Runner(SequentialAgent("root", [asker]))
    info = pause_of(await collect(runner.run("hi")))
    saved = await runner.checkpoint_store.get(info.checkpoint_id)

    with pytest.raises(ValueError) as caught:
        await collect(runner.resume(info.checkpoint_id, resume))

    message = str(caught.value)
    unknown = [k for k in resume if k != "agent:root/agent:ask"]
    assert "unknown interrupt point" in message
    assert all(k in message for k in unknown)
    assert "agent:root/agent:ask" in message  # says what is pending
    assert "Nothing ran and the checkpoint is kept" in message
    assert asker.runs == 1
    assert await runner.checkpoint_store.get(info.checkpoint_id) == saved


def _two_transfers() -> tuple[Runner, list[int]]:
    """A runner whose agent ``pay`` asks, in one round, for two transfers a person approves
    (tool calls ``call_1`` and ``call_2``), and the amounts sent."""
    sent: list[int] = []

    @adk.tool(require_approval=True)
    def transfer(amount: int) -> str:
        """Send money."""
        sent.append(amount)
        return f"sent {amount}"

    calls = [
        tool_call("transfer", {"amount": 5}, "call_1"),
        tool_call("transfer", {"amount": 7}, "call_2"),
    ]
    pay = ReActAgent("pay", ScriptedModel([Reply(tool_calls=calls), "done"]), tools=[transfer])
    return Runner(SequentialAgent("root", [pay])), sent


POINT_1 = "agent:root/agent:pay/tool:transfer#call_1"
POINT_2 = "agent:root/agent:pay/tool:transfer#call_2"


@pytest.mark.parametrize(
    "resume",
    [
        {POINT_1: True, "call_2": False},  # one point id beside a tool call id
        {"call_1": True, "call_2": False},  # LangGraph's way: answers keyed by tool call id
    ],
)
async def test_resume_data_keyed_by_tool_call_ids_names_the_points_of_those_calls(
    resume: dict[str, Any],
) -> None:
    runner, sent = _two_transfers()
    info = pause_of(await collect(runner.run("pay both")))
    assert info.point_ids == [POINT_1, POINT_2]
    saved = await runner.checkpoint_store.get(info.checkpoint_id)

    with pytest.raises(ValueError) as caught:
        await collect(runner.resume(info.checkpoint_id, resume))

    message = str(caught.value)
    # Says that a key is a call's id, not a point's, and which point is that call's.
    assert "'call_2' is the tool call id of pending point" in message
    assert f"'call_2' is the tool call id of pending point {POINT_2!r}" in message
    assert "keyed by point id" in message
    if "call_1" in resume:
        assert f"'call_1' is the tool call id of pending point {POINT_1!r}" in message
    assert "Nothing ran and the checkpoint is kept" in message
    assert sent == []
    assert await runner.checkpoint_store.get(info.checkpoint_id) == saved
    # Keyed by the points' ids, the same answers resume it.
    events = await collect(runner.resume(info.checkpoint_id, {POINT_1: True, POINT_2: False}))
    assert sent == [5]
    assert simplify_events(events)[-1] == "pay: done"


async def test_a_decision_keyed_by_the_single_pending_calls_id_names_its_point() -> None:
    # One point pending: a mapping of no point id is plain data, so {"call_1": True} is the
    # approval's decision, which is none; the refusal says that the key is the call's id.
    sent: list[int] = []

    @adk.tool(require_approval=True)
    def transfer(amount: int) -> str:
        """Send money."""
        sent.append(amount)
        return f"sent {amount}"

    call = tool_call("transfer", {"amount": 5}, "call_1")
    pay = ReActAgent("pay", ScriptedModel([Reply(tool_calls=[call]), "done"]), tools=[transfer])
    runner = Runner(SequentialAgent("root", [pay]))
    info = pause_of(await collect(runner.run("pay")))
    saved = await runner.checkpoint_store.get(info.checkpoint_id)

    with pytest.raises(ValueError) as caught:
        await collect(runner.resume(info.checkpoint_id, {"call_1": True}))

    message = str(caught.value)
    assert "is not a decision" in message
    assert f"'call_1' is the tool call id of pending point {POINT_1!r}" in message
    assert "keyed by point id" in message
    assert "Nothing ran and the checkpoint is kept" in message
    assert sent == []
    assert await runner.checkpoint_store.get(info.checkpoint_id) == saved
    await collect(runner.resume(info.checkpoint_id, {POINT_1: True}))
    assert sent == [5]


@pytest.mark.parametrize("call_id", ["call_1", "a#b", "x/y", "%2F#%23/", "%25"])
def test_a_points_tool_call_id_is_read_back_from_its_escaped_address(call_id: str) -> None:
    # The refusal above names a key's point by comparing the key with this: an id holding the
    # characters the address escapes must still be recognised.
    point_id = f"agent:root/agent:p%2Fq/{adk.interrupts.tool_segment('pay#x', call_id)}"
    assert adk.interrupts._call_id_of(point_id) == call_id
    assert adk.interrupts._call_id_of(f"{point_id}/agent:inner") is None  # not a call's point


async def test_unknown_checkpoint_id_is_a_clear_error() -> None:
    runner = Runner(Asker("root"))

    with pytest.raises(CheckpointError, match="no checkpoint 'missing-42'"):
        await collect(runner.resume("missing-42", "x"))
    with pytest.raises(CheckpointError, match="no checkpoint 'missing-42'"):
        await runner.invoke_resume("missing-42")


@pytest.mark.parametrize(
    ("store", "message"),
    [
        (
            "checkpoints.db",
            "Runner checkpoint_store must be a checkpoint store (async get, put and delete), got "
            "str 'checkpoints.db'; for a file, SQLiteCheckpointStore(path) (adk.checkpoint)",
        ),
        (
            SQLiteCheckpointStore,
            "Runner checkpoint_store is the class SQLiteCheckpointStore, not a store: pass an "
            "instance, SQLiteCheckpointStore(...)",
        ),
    ],
)
async def test_a_checkpoint_store_that_is_not_one_is_refused_when_the_runner_is_made(
    store: Any, message: str
) -> None:
    """A path (LangGraph's connection string habit) or a store's class with its ``()`` forgotten
    was taken, and the run failed only at its first pause, after all its work."""
    with pytest.raises(TypeError) as refused:
        Runner(Asker("root"), checkpoint_store=store)
    assert str(refused.value) == message


class _NamespaceStore:
    """A store kept as a class of static and class methods (one per process, never made): a
    duck-typed store as it is, not a store's class with its () forgotten."""

    saved: ClassVar[dict[str, bytes]] = {}

    @staticmethod
    async def get(id: str) -> bytes | None:
        return _NamespaceStore.saved.get(id)

    @classmethod
    async def put(cls, id: str, data: bytes) -> None:
        cls.saved[id] = data

    @staticmethod
    async def delete(id: str) -> None:
        _NamespaceStore.saved.pop(id, None)


async def test_a_class_whose_store_methods_need_no_instance_is_taken_as_a_store() -> None:
    """The refusal of a store's class (its () forgotten) refused every class, this one too."""
    runner = Runner(Asker("root"), checkpoint_store=_NamespaceStore)  # type: ignore[arg-type]
    paused = await runner.invoke("hi")
    assert paused.checkpoint_id in _NamespaceStore.saved
    resumed = await runner.invoke_resume(paused.checkpoint_id, "yes")
    assert resumed.interrupt is None and _NamespaceStore.saved == {}


async def test_a_resume_given_what_is_not_a_checkpoint_id_says_what_to_pass() -> None:
    """A newcomer's slips with ``invoke_resume``: the ``RunResult`` itself (which failed with
    "unhashable type: 'RunResult'"), the ``checkpoint_id`` of a run that did not pause (``None``),
    and an interrupt point's id (the ``CheckpointError`` said only that there is no such
    checkpoint). Refused before anything runs, the checkpoint kept."""
    runner = Runner(Asker("root"))
    paused = await runner.invoke("hi")
    finished = await Runner(ScriptAgent("done", "ok")).invoke("hi")
    assert paused.interrupt is not None and finished.checkpoint_id is None

    with pytest.raises(TypeError) as refused:
        await runner.invoke_resume(paused, "x")  # type: ignore[arg-type]
    assert str(refused.value) == (
        "checkpoint id must be a str, got RunResult: pass its checkpoint_id "
        "(RunResult.checkpoint_id)"
    )
    resumed = runner.resume(finished.checkpoint_id, "x")  # type: ignore[arg-type]
    with pytest.raises(TypeError) as refused:
        await anext(resumed)  # by the first event, as every error of the resume request
    assert str(refused.value) == (
        "checkpoint id must be a str, got NoneType: a RunResult's checkpoint_id is None when "
        "its run did not pause (check result.interrupt)"
    )
    point = paused.interrupt.points[0].id
    with pytest.raises(CheckpointError) as missing:
        await runner.invoke_resume(point, "x")
    assert str(missing.value).endswith(
        f"; {point!r} looks like an interrupt point's id: resume takes the run's checkpoint id "
        "(RunResult.checkpoint_id), and a point id as a key of its data, "
        "resume(checkpoint_id, {point_id: data})"
    )

    done = await runner.invoke_resume(paused.checkpoint_id, "x")  # nothing was lost
    assert done.interrupt is None


async def test_a_checkpoint_missing_from_the_default_store_says_it_holds_this_process_only(
    tmp_path: Path,
) -> None:
    # A service that pauses in one worker and resumes in another (or after a restart) with the
    # default store finds nothing, and the error says why and what to use instead.
    with pytest.raises(CheckpointError) as missing:
        await Runner(Asker("root")).invoke_resume("paused-elsewhere")
    assert "the in-memory store (the default) holds the pauses of this process only" in str(
        missing.value
    )
    assert "SQLiteCheckpointStore" in str(missing.value)

    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        with pytest.raises(CheckpointError) as missing:
            await Runner(Asker("root"), checkpoint_store=store).invoke_resume("paused-elsewhere")
    assert "no checkpoint 'paused-elsewhere' in SQLiteCheckpointStore" in str(missing.value)
    assert "in-memory" not in str(missing.value)


async def test_checkpoint_of_another_agent_is_a_clear_error() -> None:
    store = DictStore()
    info = pause_of(await collect(Runner(Asker("one"), checkpoint_store=store).run("hi")))

    with pytest.raises(CheckpointError, match="belongs to agent 'one'"):
        await collect(Runner(Asker("two"), checkpoint_store=store).resume(info.checkpoint_id))


# -- the checkpoint's life cycle ----------------------------------------------------------------


class SizedStore(DictStore):
    """A user's store that reports its size: empty, it is falsy."""

    def __len__(self) -> int:
        return len(self.data)


@pytest.mark.parametrize("make_store", [InMemoryCheckpointStore, SizedStore])
async def test_runner_keeps_checkpoints_in_the_store_it_was_given(make_store: Any) -> None:
    store = make_store()  # empty: it must still be the store the runner uses
    runner = Runner(Asker("root"), checkpoint_store=store)

    info = pause_of(await collect(runner.run("hi")))

    assert runner.checkpoint_store is store
    assert await store.get(info.checkpoint_id) is not None


async def test_caller_given_checkpoint_id_and_run_result() -> None:
    runner = Runner(SequentialAgent("root", [Recorder("first"), Asker("ask")]))

    result = await runner.invoke("hi", checkpoint_id="order-42")

    assert result.checkpoint_id == "order-42"
    assert result.interrupt is not None and result.interrupt.checkpoint_id == "order-42"
    assert result.interrupt.point_ids == ["agent:root/agent:ask"]
    assert result.text == "ask asks"
    assert await runner.checkpoint_store.get("order-42") is not None

    resumed = await runner.invoke_resume("order-42", "fine")

    assert resumed.interrupt is None and resumed.checkpoint_id is None
    assert resumed.text == "ask got 'fine'"


async def test_a_run_that_never_pauses_writes_no_checkpoint() -> None:
    store = DictStore()
    await Runner(SequentialAgent("root", [Recorder("a")]), checkpoint_store=store).invoke("hi")
    assert store.puts == 0


async def test_checkpoint_is_deleted_after_the_resumed_run_finishes() -> None:
    store = DictStore()
    runner = Runner(Asker("root"), checkpoint_store=store)
    info = pause_of(await collect(runner.run("hi")))
    assert info.checkpoint_id in store.data

    await collect(runner.resume(info.checkpoint_id, "x"))

    assert store.data == {}


async def test_keep_checkpoints_keeps_them_after_a_resumed_run_finishes() -> None:
    store = DictStore()
    runner = Runner(Asker("root"), checkpoint_store=store, keep_checkpoints=True)
    info = pause_of(await collect(runner.run("hi")))
    saved = store.data[info.checkpoint_id]

    await collect(runner.resume(info.checkpoint_id, "x"))

    # Kept for audit: the same body, marked finished so it can never be resumed (and acted on) twice.
    assert list(store.data) == [info.checkpoint_id]
    kept = decode_checkpoint(store.data[info.checkpoint_id])
    assert kept.pop("finished") is True
    assert kept == decode_checkpoint(saved)
    with pytest.raises(CheckpointError, match="belongs to a run that has finished"):
        await collect(runner.resume(info.checkpoint_id, "x"))


async def test_resuming_a_finished_checkpoint_again_is_a_clear_error() -> None:
    runner = Runner(Asker("root"))
    info = pause_of(await collect(runner.run("hi")))
    await collect(runner.resume(info.checkpoint_id, "x"))

    with pytest.raises(CheckpointError, match=f"no checkpoint '{info.checkpoint_id}'") as gone:
        await collect(runner.resume(info.checkpoint_id, "x"))
    # Resuming one pause twice (a retried request) is the usual way here: the error says so
    # rather than only that the default store holds this process's pauses.
    assert (
        ": it was never saved there, or a resume of it ran to the end, which deletes it "
        "(Runner(keep_checkpoints=True) keeps it, marked finished); the in-memory store"
    ) in str(gone.value)


async def test_checkpoint_is_kept_when_the_resumed_run_fails() -> None:
    class FailsOnResume(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                yield ctx.interrupt("q")
                return
            raise RuntimeError("downstream is down")

    runner = Runner(FailsOnResume("root"))
    info = pause_of(await collect(runner.run("hi")))
    saved = await runner.checkpoint_store.get(info.checkpoint_id)

    with pytest.raises(RunError, match="downstream is down"):
        await runner.invoke_resume(info.checkpoint_id, "x")

    # The resume can be retried: the checkpoint is still there, unchanged.
    assert await runner.checkpoint_store.get(info.checkpoint_id) == saved


async def test_a_resumed_run_that_pauses_again_rewrites_the_same_checkpoint() -> None:
    a, b = Asker("a"), Asker("b")
    runner = Runner(SequentialAgent("root", [a, b]))
    first = pause_of(await collect(runner.run("hi")))

    second = pause_of(await collect(runner.resume(first.checkpoint_id, 1)))

    assert second.checkpoint_id == first.checkpoint_id
    assert second.point_ids == ["agent:root/agent:b"]
    events = await collect(runner.resume(second.checkpoint_id, 2))
    assert simplify_events(events) == ["b: b got 2"]
    assert (a.runs, b.runs) == (2, 2)


async def test_an_agent_can_pause_again_when_resumed() -> None:
    class TwoQuestions(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            answers = [*ctx.resume.state, ctx.resume.data] if ctx.resume else []
            if len(answers) < 2:
                yield ctx.interrupt(f"question {len(answers) + 1}", state=answers)
                return
            yield AgentEvent.of(f"answers: {answers}")

    runner = Runner(SequentialAgent("root", [TwoQuestions("quiz")]))
    first = pause_of(await collect(runner.run("hi")))
    second = pause_of(await collect(runner.resume(first.checkpoint_id, "a")))

    assert second.point_ids == first.point_ids == ["agent:root/agent:quiz"]
    assert second.points[0].info == "question 2"
    events = await collect(runner.resume(second.checkpoint_id, "b"))
    assert simplify_events(events) == ["quiz: answers: ['a', 'b']"]


async def test_concurrent_runs_of_one_runner_pause_and_resume_independently() -> None:
    asker = Asker("root", pause_on=(1, 2))
    runner = Runner(asker)
    one = pause_of(await collect(runner.run("first")))
    two = pause_of(await collect(runner.run("second")))
    assert one.checkpoint_id != two.checkpoint_id

    second = await collect(runner.resume(two.checkpoint_id, "B"))
    first = await collect(runner.resume(one.checkpoint_id, "A"))

    assert simplify_events(second) == ["root: root got 'B'"]
    assert simplify_events(first) == ["root: root got 'A'"]
    assert texts(asker.inputs[2]) == ["second"] and texts(asker.inputs[3]) == ["first"]


# -- what survives a resume ---------------------------------------------------------------------


async def test_session_values_and_history_survive_the_resume() -> None:
    def remember(ctx: RunContext) -> AgentEvent:
        ctx.session["seen_first"] = True
        return AgentEvent.of("first spoke")

    first = ScriptAgent("first", remember)
    asker = Asker("ask")
    model = ScriptedModel(["all done"])
    last = ReActAgent("last", model, instruction="Serve {user}.", output_key="answer")
    store = DictStore()
    runner = Runner(SequentialAgent("root", [first, asker, last]), checkpoint_store=store)
    info = pause_of(await collect(runner.run("hi", session={"user": "Ann"})))

    # A different runner object over the same store, as a new process would have.
    fresh = Runner(SequentialAgent("root", [first, asker, last]), checkpoint_store=store)
    result = await fresh.invoke_resume(info.checkpoint_id, "yes")

    assert first.runs == 1
    assert asker.session_seen[-1] == {"user": "Ann", "seen_first": True}
    assert texts(model.requests[0].messages) == [
        "Serve Ann.",
        "hi",
        "For context: [first] said: first spoke.",
        "For context: [ask] said: ask asks.",
        "For context: [ask] said: ask got 'yes'.",
    ]
    assert result.session.values == {"user": "Ann", "seen_first": True, "answer": "all done"}
    assert result.text == "all done"


async def test_a_session_given_to_resume_holds_the_saved_values_and_the_runs_writes() -> None:
    def finish(ctx: RunContext) -> AgentEvent:
        ctx.session["paid_by"] = ctx.session["approver"]
        return AgentEvent.of("paid")

    def build() -> SequentialAgent:
        return SequentialAgent("root", [Asker("ask"), ScriptAgent("pay", finish)])

    store = DictStore()
    info = pause_of(
        await collect(
            Runner(build(), checkpoint_store=store).run(
                "hi", session={"user": "Ann", "approver": "saved"}
            )
        )
    )
    # Another process: it adds who approved, and reads the session after a streamed resume.
    session = adk.Session({"approver": "Bob", "request": 7})
    events = await collect(
        Runner(build(), checkpoint_store=store).resume(info.checkpoint_id, "yes", session=session)
    )

    assert events[-1].output is not None and events[-1].output.message is not None
    assert events[-1].output.message.content == "paid"
    # The saved values win over the same keys (the paused run's own state); the rest stays.
    assert session.values == {"user": "Ann", "approver": "saved", "request": 7, "paid_by": "saved"}


async def test_resume_copies_a_mapping_session_and_refuses_other_types() -> None:
    store = DictStore()
    runner = Runner(SequentialAgent("root", [Asker("ask")]), checkpoint_store=store)
    info = pause_of(await collect(runner.run("hi", session={"user": "Ann"})))
    extra = {"approver": "Bob"}

    with pytest.raises(TypeError, match="session must be a Session or a mapping, got list"):
        runner.resume(info.checkpoint_id, "yes", session=["approver"])  # type: ignore[arg-type]
    result = await runner.invoke_resume(info.checkpoint_id, "yes", session=extra)

    assert result.session.values == {"user": "Ann", "approver": "Bob"}
    assert extra == {"approver": "Bob"}  # copied, not written to


async def test_a_missing_checkpoint_leaves_the_given_session_untouched() -> None:
    session = adk.Session({"approver": "Bob"})
    with pytest.raises(CheckpointError):
        await Runner(Asker("ask")).invoke_resume("nope", "yes", session=session)
    assert session.values == {"approver": "Bob"}


async def test_run_id_is_the_same_for_every_agent_and_tool_of_a_run_and_across_its_resume() -> None:
    seen: list[tuple[str, str]] = []

    @adk.tool
    def lookup(ctx: ToolContext) -> str:
        """Look something up."""
        seen.append(("tool", ctx.run_id))
        return "found"

    def note(ctx: RunContext) -> AgentEvent:
        seen.append((ctx.agent_name, ctx.run_id))
        return AgentEvent.of("noted")

    def build() -> SequentialAgent:
        helper = ReActAgent(
            "helper",
            ScriptedModel([Reply(tool_calls=[tool_call("lookup")]), "helped"]),
            description="Helps.",
            tools=[lookup],
        )
        caller = ReActAgent(
            "caller",
            ScriptedModel([Reply(tool_calls=[tool_call("helper", {"request": "go"})]), "called"]),
            tools=[adk.AgentTool(helper)],
        )
        return SequentialAgent("root", [ScriptAgent("first", note), Asker("ask"), caller])

    store = DictStore()
    info = pause_of(
        await collect(Runner(build(), checkpoint_store=store).run("hi", run_id="conv-1"))
    )
    await collect(Runner(build(), checkpoint_store=store).resume(info.checkpoint_id, "yes"))
    assert seen == [("first", "conv-1"), ("tool", "conv-1")]

    seen.clear()
    await Runner(build()).invoke("hi")
    await Runner(build()).invoke("hi")
    ids = {run_id for _, run_id in seen}
    assert len(ids) == 2 and "" not in ids  # one id per run, made for it


async def test_the_resumed_agent_sees_history_recorded_before_the_pause() -> None:
    asker = Asker("ask", pause_on=(1,))
    runner = Runner(SequentialAgent("root", [ScriptAgent("first", "hello"), asker]))
    info = pause_of(await collect(runner.run("hi")))

    await collect(runner.resume(info.checkpoint_id, 1))

    assert texts(asker.inputs[-1]) == [
        "hi",
        "For context: [first] said: hello.",
        "ask asks",  # its own message, as it was
    ]


# -- custom types in checkpoints ----------------------------------------------------------------


@adk.register_type
class PaymentRequest(BaseModel):
    payee: str
    amount_cents: int
    currency: str = "EUR"


@adk.register_type
class PaymentDraft(BaseModel):
    request: PaymentRequest
    attempts: list[int] = []


class Unregistered(BaseModel):
    value: int


async def test_registered_pydantic_models_round_trip_as_info_state_and_session() -> None:
    request = PaymentRequest(payee="ACME", amount_cents=12000)
    draft = PaymentDraft(request=request, attempts=[1, 2])
    asker = Asker("pay", info=request, state=draft)
    store = DictStore()
    runner = Runner(asker, checkpoint_store=store)

    info = pause_of(await collect(runner.run("pay", session={"last_request": request})))

    assert info.points[0].info == request
    raw = await store.get(info.checkpoint_id)
    assert raw is not None
    assert f'"__adk_type__":"{__name__}.PaymentDraft"'.encode() in raw

    fresh = Asker("pay")  # fresh objects: everything is rebuilt from the stored bytes
    result = await Runner(fresh, checkpoint_store=store).invoke_resume(info.checkpoint_id, "ok")

    resume = fresh.resumes[-1]
    assert resume is not None
    assert isinstance(resume.state, PaymentDraft) and resume.state == draft
    assert isinstance(result.session["last_request"], PaymentRequest)
    assert result.session["last_request"] == request


async def test_resumed_points_that_pause_again_keep_their_registered_info() -> None:
    a = Asker("a", info=PaymentRequest(payee="A", amount_cents=1))
    b = Asker("b", info=PaymentRequest(payee="B", amount_cents=2))
    runner = Runner(ParallelAgent("par", [a, b]))
    info = pause_of(await collect(runner.run("hi")))

    again = pause_of(await collect(runner.resume(info.checkpoint_id, {"agent:par/agent:a": 1})))

    assert again.points == [p for p in info.points if p.id == "agent:par/agent:b"]
    assert isinstance(again.points[0].info, PaymentRequest)


@pytest.mark.parametrize("where", ["info", "state", "session"])
async def test_unregistered_model_is_an_error_event_naming_the_fix(where: str) -> None:
    value = Unregistered(value=1)
    asker = Asker(
        "root",
        info=value if where == "info" else None,
        state=value if where == "state" else None,
    )
    store = DictStore()
    runner = Runner(asker, checkpoint_store=store)
    session = {"thing": value} if where == "session" else None

    events = await collect(runner.run("hi", checkpoint_id="c-1", session=session))

    last = events[-1]
    assert last.interrupted is None
    assert last.error is not None and last.error.type == "CheckpointError"
    assert last.error.message.startswith("could not save checkpoint 'c-1'")
    assert "Unregistered is not registered" in last.error.message
    assert "adk.register_type(Unregistered)" in last.error.message
    assert isinstance(last.exception, CheckpointError)
    assert store.data == {}
    with pytest.raises(RunError, match="could not save checkpoint"):
        await Runner(Asker("root", info=value, state=value), checkpoint_store=store).invoke(
            "hi", session=session
        )


async def test_values_that_are_not_json_are_an_error_event() -> None:
    events = await collect(Runner(Asker("root", info={"when": {1, 2}})).run("hi"))

    assert events[-1].error is not None
    assert "could not save checkpoint" in events[-1].error.message
    assert "set cannot be stored in a checkpoint" in events[-1].error.message


# -- failing checkpoint writes ------------------------------------------------------------------


async def test_a_failing_checkpoint_write_is_an_error_event_and_keeps_the_previous_one() -> None:
    a, b = Asker("a"), Asker("b")
    store = DictStore()
    runner = Runner(ParallelAgent("par", [a, b]), checkpoint_store=store)
    info = pause_of(await collect(runner.run("hi")))
    saved = store.data[info.checkpoint_id]

    store.fail_puts = True
    events = await collect(runner.resume(info.checkpoint_id, {"agent:par/agent:a": "A"}))

    last = events[-1]
    assert last.interrupted is None and last.error is not None
    assert last.error.type == "CheckpointError"
    assert last.error.message == (
        f"could not save checkpoint {info.checkpoint_id!r}: flaky checkpoint store: "
        f"put of checkpoint {info.checkpoint_id!r} failed: connection reset"
    )
    assert isinstance(last.exception, CheckpointStoreError)
    assert store.data == {info.checkpoint_id: saved}

    # The previous checkpoint is intact: both points are still pending there.
    store.fail_puts = False
    events = await collect(
        runner.resume(info.checkpoint_id, {"agent:par/agent:a": "A", "agent:par/agent:b": "B"})
    )
    assert sorted(simplify_events(events)) == ["a: a got 'A'", "b: b got 'B'"]
    assert store.data == {}


async def test_a_failing_first_checkpoint_write_is_an_error_event() -> None:
    store = DictStore()
    store.fail_puts = True
    runner = Runner(Asker("root"), checkpoint_store=store)

    with pytest.raises(RunError, match="could not save checkpoint") as caught:
        await runner.invoke("hi")

    assert isinstance(caught.value.__cause__, CheckpointStoreError)
    assert store.data == {}
