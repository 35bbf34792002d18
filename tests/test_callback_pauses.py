"""A ``before_tool`` callback that pauses a tool call (``raise adk.Interrupt``: LangChain's
HumanInTheLoopMiddleware, a Google ADK ``before_tool_callback`` asking a person), next to the
framework's approval pause (``require_approval=True``) and the function's own questions at the
same call: each party sees only its own pause's resume, over a real SQLite store with a fresh
``Runner`` (and store) at every resume, as after a restart. A model callback cannot pause."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from app_processes import run_as_process

import adk
from adk import AgentTool, Interrupt, Message, RunError, Runner, ToolCall, ToolContext, ToolResult
from adk.callbacks import Callbacks
from adk.checkpoint import SQLiteCheckpointStore
from adk.runner import RunResult
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

FIXTURES = Path(__file__).parent / "fixtures"


def seen_data(ctx: ToolContext) -> Any:
    """What a party was told: None on a first call, else its resume's data."""
    return None if ctx.resume is None else ("resumed", ctx.resume.data)


class Desk:
    """A person's desk: a ``before_tool`` gate asking before the calls of ``gated`` tools, a
    ``require_approval`` tool that then asks its own question, and what each party saw."""

    def __init__(self, gated: frozenset[str] = frozenset({"book"})) -> None:
        self.gated = gated
        self.seen: list[tuple[str, str, Any]] = []
        self.ran: list[str] = []
        desk = self

        @adk.tool(require_approval=True)
        def book(destination: str, ctx: ToolContext) -> str | ToolResult:
            """Book a flight; asks for a seat."""
            desk.seen.append(("book", ctx.tool_call_id, seen_data(ctx)))
            if ctx.resume is None:
                raise Interrupt("window or aisle?", state={"destination": destination})
            if ctx.resume.data not in ("window", "aisle"):
                return ToolResult.error(f"no {ctx.resume.data} seat")
            desk.ran.append(f"book {ctx.resume.state['destination']}")
            return f"booked {ctx.resume.state['destination']}, {ctx.resume.data} seat"

        @adk.tool
        def colour(ctx: ToolContext) -> str:
            """Ask for a colour."""
            desk.seen.append(("colour", ctx.tool_call_id, seen_data(ctx)))
            if ctx.resume is None:
                raise Interrupt("which colour?")
            return f"colour {ctx.resume.data}"

        @adk.tool(require_approval=True)
        def pay(cents: int, ctx: ToolContext) -> str:
            """Pay."""
            desk.seen.append(("pay", ctx.tool_call_id, seen_data(ctx)))
            desk.ran.append(f"pay {cents}")
            return f"paid {cents}"

        self.tools = [book, colour, pay]

    def gate(self, ctx: ToolContext, call: ToolCall) -> ToolResult | None:
        self.seen.append(("gate", call.id, seen_data(ctx)))
        if call.name not in self.gated:
            return None
        if ctx.resume is None:
            raise Interrupt({"confirm": call.name}, state={"asked": call.id})
        assert ctx.resume.state == {"asked": call.id}  # its own state, not the tool's
        if ctx.resume.data != "go":
            return ToolResult.error(f"stopped by a person: {ctx.resume.data}")
        return None


def model_calling(*calls: ToolCall) -> ScriptedModel:
    """A model that makes ``calls`` in one turn, then answers with the results' text. It reads
    the conversation, so one made again for a resume goes on where the paused one was."""

    def reply(messages: list[Message]) -> Reply | str:
        if messages[-1].role == "tool":
            return " | ".join(m.content for m in messages if m.role == "tool")
        return Reply(tool_calls=list(calls))

    return ScriptedModel(reply)


async def step(
    path: Path,
    make: Callable[[SQLiteCheckpointStore], Runner],
    checkpoint_id: str | None,
    data: Any,
) -> RunResult:
    """One run or resume by a fresh runner over a freshly opened store, as after a restart."""
    async with SQLiteCheckpointStore(path) as store:
        runner = make(store)
        if checkpoint_id is None:
            return await runner.invoke("go", checkpoint_id="trip")
        return await runner.invoke_resume(checkpoint_id, data)


def one_booking(desk: Desk) -> Callable[[SQLiteCheckpointStore], Runner]:
    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(tool_call("book", {"destination": "Lisbon"}, id="c1"))
        agent = ReActAgent("travel", model, tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=desk.gate)])

    return make


def infos(result: RunResult) -> list[Any]:
    assert result.interrupt is not None, result.text
    return [point.info for point in result.interrupt.points]


async def test_callback_then_approval_then_the_functions_question(tmp_path: Path) -> None:
    desk = Desk()
    make, db = one_booking(desk), tmp_path / "cp.db"
    paused = await step(db, make, None, None)
    assert infos(paused) == [{"confirm": "book"}]
    assert desk.seen == [("gate", "c1", None)]  # the tool is not reached
    desk.seen.clear()

    paused = await step(db, make, "trip", "go")  # the gate's answer: the call asks for approval
    [approval] = infos(paused)
    assert approval["type"] == "approval" and approval["arguments"] == {"destination": "Lisbon"}
    assert desk.seen == [("gate", "c1", ("resumed", "go"))]
    desk.seen.clear()

    paused = await step(db, make, "trip", True)  # approved: the function asks its own question
    assert infos(paused) == ["window or aisle?"]
    # The gate sees its own answer again (it let the call through), not the approval's decision;
    # the function starts as on a first call.
    assert desk.seen == [("gate", "c1", ("resumed", "go")), ("book", "c1", None)]
    desk.seen.clear()

    done = await step(db, make, "trip", "window")
    assert done.interrupt is None and done.text == "booked Lisbon, window seat"
    assert desk.seen == [("gate", "c1", ("resumed", "go")), ("book", "c1", ("resumed", "window"))]
    assert desk.ran == ["book Lisbon"]


@pytest.mark.parametrize(
    ("answers", "text"),
    [
        (["stop"], "Error: stopped by a person: stop"),
        (["go", False], "Error: the call to 'book' was not approved"),
        (
            ["go", {"approved": False, "reason": "too far"}],
            "Error: the call to 'book' was not approved: too far",
        ),
        (["go", True, "middle"], "Error: no middle seat"),
    ],
)
async def test_a_denial_at_each_stage_answers_the_call(
    tmp_path: Path, answers: list[Any], text: str
) -> None:
    desk = Desk()
    make, db = one_booking(desk), tmp_path / "cp.db"
    result = await step(db, make, None, None)
    for answer in answers:
        assert result.interrupt is not None
        result = await step(db, make, "trip", answer)
    assert result.interrupt is None and result.text == text
    assert desk.ran == []  # nothing booked
    async with SQLiteCheckpointStore(db) as store:
        assert await store.get("trip") is None  # finished: the checkpoint is gone


async def test_parallel_calls_each_see_their_own_answers(tmp_path: Path) -> None:
    # One turn, three calls, three kinds of pause: the gate's (book), the function's own
    # (colour), the approval's (pay). One resume answers all three; the round's check before
    # anything runs does not take the gate's pause for an approval the call never had.
    desk = Desk()

    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(
            tool_call("book", {"destination": "Oslo"}, id="c1"),
            tool_call("colour", {}, id="c2"),
            tool_call("pay", {"cents": 500}, id="c3"),
        )
        agent = ReActAgent("travel", model, tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=desk.gate)])

    db = tmp_path / "cp.db"
    paused = await step(db, make, None, None)
    assert paused.interrupt is not None
    ids = {point.id.rsplit("#", 1)[1]: point.id for point in paused.interrupt.points}
    assert sorted(ids) == ["c1", "c2", "c3"]
    desk.seen.clear()

    paused = await step(db, make, "trip", {ids["c1"]: "go", ids["c2"]: "blue", ids["c3"]: True})
    assert [info["type"] for info in infos(paused)] == ["approval"]  # only book waits now
    assert sorted(desk.seen) == [
        ("colour", "c2", ("resumed", "blue")),
        ("gate", "c1", ("resumed", "go")),
        ("gate", "c2", None),
        ("gate", "c3", None),
        ("pay", "c3", None),  # approved: runs as on a first call
    ]
    desk.seen.clear()

    paused = await step(db, make, "trip", True)
    assert infos(paused) == ["window or aisle?"]
    done = await step(db, make, "trip", "aisle")
    # Results in the order the calls finished: book's last, answered at the third resume.
    assert done.text == "colour blue | paid 500 | booked Oslo, aisle seat"
    assert desk.ran == ["pay 500", "book Oslo"]


async def test_in_an_agent_tool_the_gate_sees_its_own_pause_only(tmp_path: Path) -> None:
    # The runner's gate asks before the AgentTool call and before the booking inside its nested
    # run. When the nested run pauses, the gate at the outer call is not being resumed (a point
    # lies below that call, not at it): it sees its own answer, never the inner parties'.
    desk = Desk(gated=frozenset({"book", "planner"}))

    def make(store: SQLiteCheckpointStore) -> Runner:
        inner_model = model_calling(tool_call("book", {"destination": "Rome"}, id="c1"))
        planner = AgentTool(
            ReActAgent("planner", inner_model, tools=desk.tools, description="Plans trips.")
        )
        outer = ReActAgent(
            "front",
            model_calling(tool_call("planner", {"request": "Rome"}, id="o1")),
            tools=[planner],
        )
        return Runner(outer, store, callbacks=[Callbacks(before_tool=desk.gate)])

    db = tmp_path / "cp.db"
    paused = await step(db, make, None, None)
    assert infos(paused) == [{"confirm": "planner"}]
    [point] = paused.interrupt.points if paused.interrupt else []
    assert point.id == "agent:front/tool:planner#o1"
    desk.seen.clear()

    paused = await step(db, make, "trip", "go")  # the nested run starts; its booking is gated
    assert infos(paused) == [{"confirm": "book"}]
    assert desk.seen == [("gate", "o1", ("resumed", "go")), ("gate", "c1", None)]
    desk.seen.clear()

    for answer in ("go", True):
        paused = await step(db, make, "trip", answer)
        assert paused.interrupt is not None
    assert infos(paused) == ["window or aisle?"]
    assert desk.seen[-2:] == [("gate", "c1", ("resumed", "go")), ("book", "c1", None)]
    assert ("gate", "o1", ("resumed", "go")) in desk.seen
    desk.seen.clear()

    done = await step(db, make, "trip", "window")
    assert done.text == "booked Rome, window seat"
    assert desk.seen == [
        ("gate", "o1", ("resumed", "go")),
        ("gate", "c1", ("resumed", "go")),
        ("book", "c1", ("resumed", "window")),
    ]


async def test_two_gates_are_each_asked_once(tmp_path: Path) -> None:
    # A runner's gate and the agent's own both ask, one after the other; the first is not asked
    # again when the second's answer resumes the call, and neither reads the other's answer.
    asked: list[tuple[str, Any]] = []

    def gate(name: str) -> Callbacks:
        def before_tool(ctx: ToolContext, call: ToolCall) -> None:
            asked.append((name, seen_data(ctx)))
            if ctx.resume is None:
                raise Interrupt(f"{name}: ok?")

        before_tool.__qualname__ = f"gate_{name}"  # two gates of one function: named apart
        return Callbacks(before_tool=before_tool)

    desk = Desk(gated=frozenset())

    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(tool_call("colour", {}, id="c1"))
        agent = ReActAgent("travel", model, tools=desk.tools, callbacks=[gate("team")])
        return Runner(agent, store, callbacks=[gate("security")])

    db = tmp_path / "cp.db"
    result = await step(db, make, None, None)
    for answer in ("yes from security", "yes from team", "red"):
        assert result.interrupt is not None
        result = await step(db, make, "trip", answer)
    assert result.text == "colour red"
    assert asked == [
        ("security", None),
        ("security", ("resumed", "yes from security")),
        ("team", None),
        ("security", ("resumed", "yes from security")),
        ("team", ("resumed", "yes from team")),
        ("security", ("resumed", "yes from security")),
        ("team", ("resumed", "yes from team")),
    ]
    assert [s for s in desk.seen if s[0] == "colour"] == [
        ("colour", "c1", None),
        ("colour", "c1", ("resumed", "red")),
    ]


async def test_same_named_gates_are_told_apart_by_their_place() -> None:
    # Two objects of one Callbacks subclass: the same method, keyed by its order among them.
    class Gate(Callbacks):
        def __init__(self, name: str) -> None:
            self.name = name

        def before_tool(self, ctx: ToolContext, call: ToolCall) -> None:
            asked.append((self.name, seen_data(ctx)))
            if ctx.resume is None:
                raise Interrupt(f"{self.name}?")

    asked: list[tuple[str, Any]] = []
    desk = Desk(gated=frozenset())
    model = model_calling(tool_call("pay", {"cents": 1}, id="c1"))
    runner = Runner(ReActAgent("a", model, tools=desk.tools), callbacks=[Gate("one"), Gate("two")])
    result = await runner.invoke("go")
    for answer in ("1", "2", True):
        assert result.interrupt is not None and result.checkpoint_id is not None
        result = await runner.invoke_resume(result.checkpoint_id, answer)
    assert result.text == "paid 1"
    assert asked[-2:] == [("one", ("resumed", "1")), ("two", ("resumed", "2"))]


@pytest.mark.parametrize("hook", ["before_model", "after_model"])
async def test_a_model_callback_cannot_pause(hook: str) -> None:
    def pause(*args: Any) -> None:
        raise Interrupt("may I?")

    runner = Runner(ReActAgent("a", ScriptedModel(["hi"])), callbacks=[Callbacks(**{hook: pause})])
    with pytest.raises(RunError) as caught:
        await runner.invoke("go")
    message = str(caught.value)
    assert f"{hook} callback" in message and "raised adk.Interrupt" in message
    assert "before_tool callback or in a tool" in message


def ask(*args: Any) -> None:
    raise Interrupt("start?")


def refused(text: str, hook: str) -> bool:
    """Whether ``text`` is the refusal of a pause in ``hook``, saying where to pause instead."""
    return (
        f"TypeError: {hook} callback" in text
        and "raised adk.Interrupt" in text
        and "before_tool callback or in a tool" in text
    )


@pytest.mark.parametrize("hook", ["before_agent", "after_agent"])
@pytest.mark.parametrize("whose", ["runner", "agent"])
async def test_an_agent_callback_cannot_pause(hook: str, whose: str) -> None:
    # It failed the agent with a bare "Interrupt: start?", as if the agent had raised it.
    callbacks = [Callbacks(**{hook: ask})]
    own = callbacks if whose == "agent" else ()
    agent = ReActAgent("m", ScriptedModel(["hi"]), callbacks=own)
    runner = Runner(agent, callbacks=callbacks if whose == "runner" else ())
    with pytest.raises(RunError) as caught:
        await runner.invoke("go")
    assert refused(str(caught.value), hook)


async def test_an_after_agent_pause_of_a_step_is_refused_not_saved(tmp_path: Path) -> None:
    # A step's after_agent pause paused its sequence, which had saved nothing: the checkpoint
    # could not resume ("holds no saved state for it").
    def ask_after(agent: Any, ctx: Any, error: Any) -> None:
        if agent.name == "b":
            raise Interrupt("done?")

    steps = [ReActAgent(name, ScriptedModel([name])) for name in ("a", "b")]
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        runner = Runner(
            adk.SequentialAgent("s", steps), store, callbacks=[Callbacks(after_agent=ask_after)]
        )
        with pytest.raises(RunError) as caught:
            await runner.invoke("go", checkpoint_id="run")
        assert refused(str(caught.value), "after_agent")
        assert await store.get("run") is None


async def test_an_after_agent_pause_in_an_agent_tool_does_not_run_the_agent_again() -> None:
    # The nested agent's after_agent pause was the tool call's, and each resume ran the nested
    # agent again (and paused again): its tools ran once per resume.
    ran: list[str] = []

    @adk.tool
    def pay() -> str:
        """Pay."""
        ran.append("pay")
        return "paid"

    def ask_after(agent: Any, ctx: Any, error: Any) -> None:
        if agent.name == "payer":
            raise Interrupt("payment ok?")

    payer = ReActAgent(
        "payer",
        model_calling(tool_call("pay", {}, id="p1")),
        tools=[pay],
        description="Pays.",
        callbacks=[Callbacks(after_agent=ask_after)],
    )
    outer = ReActAgent(
        "front",
        model_calling(tool_call("payer", {"request": "pay"}, id="o1")),
        tools=[AgentTool(payer)],
    )
    done = await Runner(outer).invoke("go")
    assert done.interrupt is None
    assert refused(done.text, "after_agent")  # the call's error result, the model's answer
    assert ran == ["pay"]


@pytest.mark.parametrize("streamed", [False, True], ids=["invoke", "run"])
async def test_an_on_event_callback_cannot_pause(streamed: bool) -> None:
    # Through invoke it paused the root agent with no state (its resume failed: "holds no saved
    # state for it"); through run it failed with a bare "Interrupt: start?".
    runner = Runner(ReActAgent("m", ScriptedModel(["hi"])), callbacks=[Callbacks(on_event=ask)])
    if streamed:
        events = [event async for event in runner.run("go")]
        assert events[-1].error is not None and events[-1].interrupted is None
        assert refused(str(events[-1].error), "on_event")
    else:
        with pytest.raises(RunError) as caught:
            await runner.invoke("go")
        assert refused(str(caught.value), "on_event")


# -- checkpoints saved before the callback's pause was told apart --------------------------------
# Written by pyadk at ed7bf34 (before this change) with these agents over an in-memory store: a
# booking approved whose function then asked for a seat, the gate only observing; and a call of
# ``colour`` paused by the gate, whose answer that version gave the gate and the function alike.
# (A gate's pause of a ``require_approval`` call could not resume then, "require_approval was
# added since the pause?", and such a checkpoint is still refused so, before anything runs: it
# cannot be told from a function's pause of a tool that was given the flag since.)
async def test_a_checkpoint_of_the_functions_pause_saved_before_resumes(tmp_path: Path) -> None:
    desk = Desk(gated=frozenset())
    db = tmp_path / "cp.db"
    async with SQLiteCheckpointStore(db) as store:
        await store.put("trip", (FIXTURES / "main_ed7bf34_function_pause.ckpt").read_bytes())
    done = await step(db, one_booking(desk), "trip", "aisle")
    assert done.text == "booked Lisbon, aisle seat"
    # Not asked for approval again; the gate is not told the function's answer.
    assert desk.seen == [("gate", "c1", None), ("book", "c1", ("resumed", "aisle"))]


async def test_a_checkpoint_of_a_callbacks_pause_saved_before_asks_again(tmp_path: Path) -> None:
    # Such a checkpoint does not say who paused, so no party takes the answer for its own (the
    # function would read "go" as its colour): the gate asks once more, nothing runs unasked.
    desk = Desk(gated=frozenset({"colour"}))

    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(tool_call("colour", {}, id="c1"))
        agent = ReActAgent("travel", model, tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=desk.gate)])

    db = tmp_path / "cp.db"
    async with SQLiteCheckpointStore(db) as store:
        await store.put("trip", (FIXTURES / "main_ed7bf34_callback_pause.ckpt").read_bytes())
    paused = await step(db, make, "trip", "go")
    assert infos(paused) == [{"confirm": "colour"}]
    assert desk.seen == [("gate", "c1", None)]
    paused = await step(db, make, "trip", "go")
    assert infos(paused) == ["which colour?"]
    done = await step(db, make, "trip", "green")
    assert done.text == "colour green"
    assert desk.seen[-2:] == [
        ("gate", "c1", ("resumed", "go")),
        ("colour", "c1", ("resumed", "green")),
    ]


async def test_an_after_tool_pause_is_refused_rather_than_running_the_call_again() -> None:
    # A pause after the call was the call's: its resume ran the tool a second time (paid twice).
    desk = Desk(gated=frozenset())

    def review(ctx: ToolContext, call: ToolCall, result: Any) -> None:
        raise Interrupt(f"send {result!r} to the model?")

    model = model_calling(tool_call("colour", {}, id="c1"))
    runner = Runner(
        ReActAgent("a", model, tools=desk.tools), callbacks=[Callbacks(after_tool=review)]
    )
    paused = await runner.invoke("go")  # the function's own question: after_tool is not reached
    assert paused.checkpoint_id is not None
    done = await runner.invoke_resume(paused.checkpoint_id, "red")
    assert done.interrupt is None
    assert "after_tool callback" in done.text and "raised adk.Interrupt" in done.text
    assert [s for s in desk.seen if s[0] == "colour"] == [
        ("colour", "c1", None),
        ("colour", "c1", ("resumed", "red")),  # run once with its answer, never again
    ]


async def test_a_gate_removed_since_its_pause_refuses_the_resume_before_anything_runs(
    tmp_path: Path,
) -> None:
    # A redeploy dropped the gate: nobody would read its answer, and the call went on as on a
    # first call: a tool with no approval or question of its own ran, the person's "stop"
    # dropped (here: paid). The resume is refused now, before anything runs, the checkpoint
    # kept; with the gate back (here the agent's own: it is found by its name) it resumes.
    desk = Desk(gated=frozenset({"pay"}))

    def make(gate: str) -> Callable[[SQLiteCheckpointStore], Runner]:
        def made(store: SQLiteCheckpointStore) -> Runner:
            model = model_calling(tool_call("pay", {"cents": 500}, id="c1"))
            own = [Callbacks(before_tool=desk.gate)] if gate == "agent" else []
            agent = ReActAgent("shop", model, tools=desk.tools, callbacks=own)
            runner_callbacks = [Callbacks(before_tool=desk.gate)] if gate == "runner" else []
            return Runner(agent, store, callbacks=runner_callbacks)

        return made

    db = tmp_path / "cp.db"
    paused = await step(db, make("runner"), None, None)
    assert infos(paused) == [{"confirm": "pay"}]
    seen = list(desk.seen)
    with pytest.raises(RunError) as refused:
        await step(db, make("none"), "trip", "stop")
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert str(refused.value.__cause__) == (
        "the resume of checkpoint 'trip' cannot give the answer to the call(s) a before_tool "
        "callback paused, which this runner no longer has (removed since the pause?): "
        "'agent:shop/tool:pay#c1' by 'test_callback_pauses.Desk.gate'. Without it the call "
        "would go on as on a first call, its tool run unasked by it; give the runner (or the "
        "agent) that callback again, one of that module and name that lets the call through if "
        "it should no longer ask; the checkpoint is kept as it was"
    )
    assert desk.seen == seen and desk.ran == []  # nothing ran
    done = await step(db, make("agent"), "trip", "stop")
    assert done.text == "Error: stopped by a person: stop" and desk.ran == []


async def test_a_gate_of_an_agent_tools_agent_removed_since_its_pause_refuses_the_resume(
    tmp_path: Path,
) -> None:
    # The gate is the inner agent's own, pausing a call in the AgentTool's nested run: found
    # there too (its agent is in the runner's tree), and refused before anything runs.
    desk = Desk(gated=frozenset({"pay"}))

    def make(gated: bool) -> Callable[[SQLiteCheckpointStore], Runner]:
        def made(store: SQLiteCheckpointStore) -> Runner:
            own = [Callbacks(before_tool=desk.gate)] if gated else []
            inner = ReActAgent(
                "till",
                model_calling(tool_call("pay", {"cents": 500}, id="c1")),
                tools=desk.tools,
                callbacks=own,
                description="Takes payments.",
            )
            model = model_calling(tool_call("till", {"request": "pay 500"}, id="o1"))
            return Runner(ReActAgent("shop", model, tools=[AgentTool(inner)]), store)

        return made

    db = tmp_path / "cp.db"
    paused = await step(db, make(True), None, None)
    assert paused.interrupt is not None
    assert paused.interrupt.point_ids == ["agent:shop/tool:till#o1/agent:till/tool:pay#c1"]
    with pytest.raises(RunError) as refused:
        await step(db, make(False), "trip", "stop")
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert "'agent:shop/tool:till#o1/agent:till/tool:pay#c1' by 'test_callback_pauses." in str(
        refused.value.__cause__
    )
    assert desk.ran == []
    done = await step(db, make(True), "trip", "stop")
    assert done.text == "Error: stopped by a person: stop" and desk.ran == []


RESUME_ELSEWHERE = """
import asyncio, json, sys
import adk
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import ScriptedModel
from prebuilt import ReActAgent

@adk.tool
def pay(cents: int) -> str:
    \"\"\"Pay.\"\"\"
    return "paid"

async def main() -> None:
    async with SQLiteCheckpointStore(sys.argv[1]) as store:
        runner = adk.Runner(ReActAgent("shop", ScriptedModel([]), tools=[pay]), store)
        try:
            await runner.invoke_resume("trip", "stop")
        except adk.RunError as failed:
            print(json.dumps({"refused": type(failed.__cause__).__name__}))

asyncio.run(main())
"""


async def test_a_gate_removed_is_refused_in_another_process_with_no_callbacks(
    tmp_path: Path,
) -> None:
    # As after a redeploy: a new interpreter whose runner has no callbacks at all (so imports
    # none of its own) reads the checkpoint and refuses it.
    desk = Desk(gated=frozenset({"pay"}))

    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(tool_call("pay", {"cents": 500}, id="c1"))
        agent = ReActAgent("shop", model, tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=desk.gate)])

    db = tmp_path / "cp.db"
    assert infos(await step(db, make, None, None)) == [{"confirm": "pay"}]
    script = tmp_path / "resume_elsewhere.py"
    script.write_text(RESUME_ELSEWHERE)
    refused = await run_as_process(str(script), str(db))
    assert refused == {"refused": "CheckpointError"}


async def test_the_gate_and_the_approval_hold_through_the_functions_questions(
    tmp_path: Path,
) -> None:
    # The function asks two questions in turn (its state carries the first answer); neither the
    # gate nor the approval is asked again, and the gate keeps seeing its own answer.
    desk = Desk(gated=frozenset({"order"}))

    @adk.tool(require_approval=True)
    def order(dish: str, ctx: ToolContext) -> str:
        """Order a dish."""
        desk.seen.append(("order", ctx.tool_call_id, seen_data(ctx)))
        if ctx.resume is None:
            raise Interrupt("size?")
        if ctx.resume.state is None:
            raise Interrupt("drink?", state={"size": ctx.resume.data})
        return f"{ctx.resume.state['size']} {dish} with {ctx.resume.data}"

    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(tool_call("order", {"dish": "soup"}, id="c1"))
        agent = ReActAgent("diner", model, tools=[order])
        return Runner(agent, store, callbacks=[Callbacks(before_tool=desk.gate)])

    db = tmp_path / "cp.db"
    result = await step(db, make, None, None)
    asked = [infos(result)]
    for answer in ("go", True, "large"):
        result = await step(db, make, "trip", answer)
        asked.append(infos(result))
    assert [a[0] if isinstance(a[0], str) else a[0].get("type", a[0]) for a in asked] == [
        {"confirm": "order"},
        "approval",
        "size?",
        "drink?",
    ]
    desk.seen.clear()
    done = await step(db, make, "trip", "tea")
    assert done.text == "large soup with tea"
    assert desk.seen == [("gate", "c1", ("resumed", "go")), ("order", "c1", ("resumed", "tea"))]


async def test_a_gates_pause_left_unanswered_keeps_its_place(tmp_path: Path) -> None:
    # Two gated calls; a resume answers one. The other waits on, still the gate's: answered at a
    # later resume, it is the gate that reads the answer, not the approval.
    desk = Desk()

    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(
            tool_call("book", {"destination": "Rome"}, id="c1"),
            tool_call("book", {"destination": "Nice"}, id="c2"),
        )
        agent = ReActAgent("travel", model, tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=desk.gate)])

    db = tmp_path / "cp.db"
    paused = await step(db, make, None, None)
    assert paused.interrupt is not None
    c1, c2 = sorted(paused.interrupt.point_ids)
    paused = await step(db, make, "trip", {c1: "go"})
    assert paused.interrupt is not None
    by_id = {point.id: point.info for point in paused.interrupt.points}
    assert by_id[c1]["type"] == "approval" and by_id[c2] == {"confirm": "book"}
    done = await step(db, make, "trip", {c1: {"approved": False}, c2: "stop"})
    assert sorted(done.text.split(" | ")) == [
        "Error: stopped by a person: stop",
        "Error: the call to 'book' was not approved",
    ]
    assert desk.ran == []


async def test_a_gate_that_pauses_a_resumed_call_has_the_function_ask_again(
    tmp_path: Path,
) -> None:
    # The gate starts asking while the function's question waits (a redeploy added it): its pause
    # replaces the function's, whose answer is dropped; past the gate, the function asks again.
    desk = Desk(gated=frozenset())

    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(tool_call("colour", {}, id="c1"))
        agent = ReActAgent("travel", model, tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=desk.gate)])

    db = tmp_path / "cp.db"
    paused = await step(db, make, None, None)
    assert infos(paused) == ["which colour?"]
    desk.gated = frozenset({"colour"})
    paused = await step(db, make, "trip", "red")
    assert infos(paused) == [{"confirm": "colour"}]
    paused = await step(db, make, "trip", "go")
    assert infos(paused) == ["which colour?"]
    done = await step(db, make, "trip", "blue")
    assert done.text == "colour blue"
    assert [s for s in desk.seen if s[0] == "colour"] == [
        ("colour", "c1", None),
        ("colour", "c1", None),
        ("colour", "c1", ("resumed", "blue")),
    ]


class ReviewedDesk(Desk):
    """A desk whose ``after_tool`` review notes the resume it sees at each call, and whose
    ``before_tool`` cache answers ``pay`` itself once it has the answer (``cached``)."""

    def __init__(self) -> None:
        super().__init__()
        self.reviewed: list[tuple[str, Any]] = []
        self.cached = False

    def review(self, ctx: ToolContext, call: ToolCall, result: Any) -> None:
        self.reviewed.append((call.name, seen_data(ctx)))

    def cache(self, ctx: ToolContext, call: ToolCall) -> str | None:
        if call.name == "pay" and self.cached:
            return "paid already (cached)"
        return None

    def callbacks(self) -> list[Callbacks]:
        return [
            Callbacks(before_tool=self.gate),
            Callbacks(before_tool=self.cache, after_tool=self.review),
        ]


def reviewed_run(desk: ReviewedDesk, *calls: ToolCall) -> Callable[[SQLiteCheckpointStore], Runner]:
    def make(store: SQLiteCheckpointStore) -> Runner:
        agent = ReActAgent("travel", model_calling(*calls), tools=desk.tools)
        return Runner(agent, store, callbacks=desk.callbacks())

    return make


def limited_payer(desk: Desk) -> Callable[[SQLiteCheckpointStore], Runner]:
    """A model paying 500 cents, under a gate that asks before any payment over 1000 cents."""

    def over_limit(ctx: ToolContext, call: ToolCall) -> None:
        desk.seen.append(("limit", call.arguments, seen_data(ctx)))
        if json.loads(call.arguments)["cents"] > 1000 and ctx.resume is None:
            raise Interrupt({"over the limit": call.arguments})

    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(tool_call("pay", {"cents": 500}, id="c1"))
        agent = ReActAgent("payer", model, tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=over_limit)])

    return make


async def test_after_tool_sees_the_resume_the_tool_ran_with(tmp_path: Path) -> None:
    """``after_tool`` reviews the tool's result, so it sees the tool's resume: the function's
    answer when the function ran on it, None when the function ran as on a first call."""
    desk = ReviewedDesk()
    make, db = reviewed_run(desk, tool_call("book", {"destination": "Lisbon"}, id="c1")), tmp_path
    for answer in (None, "go", True):  # the gate's, the approval's, the function's pauses
        paused = await step(db / "cp.db", make, None if answer is None else "trip", answer)
        assert paused.interrupt is not None
    assert desk.reviewed == []  # every call paused: nothing to review yet
    done = await step(db / "cp.db", make, "trip", "window")
    assert done.text == "booked Lisbon, window seat"
    assert desk.reviewed == [("book", ("resumed", "window"))]


@pytest.mark.parametrize(
    ("calls", "answers", "reviewed"),
    [
        # The gate asked, then refused the call on its answer: the tool never ran, and "stop"
        # was the gate's answer, not the tool's.
        ([tool_call("book", {"destination": "Oslo"}, id="c1")], ["stop"], [("book", None)]),
        # The approval asked and was given; on the resume a before_tool answered the call from
        # its cache: the tool never ran, so it was never approved.
        ([tool_call("pay", {"cents": 500}, id="c3")], [True], [("pay", None)]),
    ],
)
async def test_after_tool_does_not_take_another_partys_answer_for_the_tools(
    tmp_path: Path, calls: list[ToolCall], answers: list[Any], reviewed: list[Any]
) -> None:
    """A before_tool that answers a resumed call itself: the resume pending at the call is the
    gate's own answer or an approval the tool never reached. ``after_tool`` saw it as
    ``ctx.resume`` and could take it for the tool's (a refusal for an approval, an approval of a
    payment that was never made); it sees None, as the tool would have on a first call."""
    desk = ReviewedDesk()
    make, db = reviewed_run(desk, *calls), tmp_path / "cp.db"
    result = await step(db, make, None, None)
    desk.cached = True  # from the resume on
    for answer in answers:
        assert result.interrupt is not None
        result = await step(db, make, "trip", answer)
    assert result.interrupt is None, result.text
    assert desk.reviewed == reviewed
    assert desk.ran == []


@pytest.mark.parametrize(
    ("answer", "ran", "text", "gate_saw"),
    [
        (True, ["pay 9000"], 'it ran with {"cents": 9000}]\npaid 9000', '{"cents": 9000}'),
        (
            {"approved": True, "arguments": {"cents": 800}},
            ["pay 800"],
            'it ran with {"cents": 800}]\npaid 800',
            '{"cents": 800}',
        ),
        (False, [], "Error: the call to 'pay' was not approved", '{"cents": 500}'),
    ],
)
async def test_an_edit_a_gate_then_pauses_is_what_the_approval_asked_again_shows(
    tmp_path: Path, answer: Any, ran: list[str], text: str, gate_saw: str
) -> None:
    # A person edits a payment up to 9000 cents, and the gate pauses the edited call. Past the
    # gate the approval is asked again, for the call as edited: a plain yes runs the edit, a new
    # edit replaces it, a no runs nothing (and tells of no edit). The edit was dropped at the
    # gate's pause: the approval showed, and a yes paid, the model's 500 cents, which the person
    # had changed.
    desk = Desk(gated=frozenset())
    make, db = limited_payer(desk), tmp_path / "cp.db"
    paused = await step(db, make, None, None)
    assert infos(paused)[0]["arguments"] == {"cents": 500}
    paused = await step(db, make, "trip", {"approved": True, "arguments": {"cents": 9000}})
    assert infos(paused) == [{"over the limit": '{"cents": 9000}'}]
    paused = await step(db, make, "trip", "go")
    [again] = infos(paused)
    assert again["type"] == "approval" and again["arguments"] == {"cents": 9000}
    desk.seen.clear()
    done = await step(db, make, "trip", answer)
    assert done.interrupt is None
    assert desk.ran == ran
    assert done.text.endswith(text)
    assert ("it ran with" in done.text) == bool(ran)
    # The gate lets through what it answered for, as the call runs (a denied call, as made).
    assert desk.seen[0] == ("limit", gate_saw, ("resumed", "go"))


class _Verdict:
    """A person's answer as an application object: fine for a function's own question, which
    reads it once, but not for a gate's, which is kept with the call's later pauses."""

    def __init__(self, go: bool) -> None:
        self.go = go


async def test_a_gates_answer_a_checkpoint_cannot_hold_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    # One round: the gate pauses the booking, the payment waits for approval. One resume answers
    # both, the gate with an object: past the gate the booking asks for approval, a pause that
    # keeps the gate's answer. Found only then, it failed the run after the approved payment was
    # made, and the kept checkpoint's next resume made it again.
    desk = Desk()

    def gate(ctx: ToolContext, call: ToolCall) -> ToolResult | None:
        if call.name != "book":
            return None
        if ctx.resume is None:
            raise Interrupt({"confirm": call.name})
        go = ctx.resume.data.go if isinstance(ctx.resume.data, _Verdict) else ctx.resume.data
        return None if go else ToolResult.error("stopped")

    def make(store: SQLiteCheckpointStore) -> Runner:
        model = model_calling(
            tool_call("book", {"destination": "Oslo"}, id="c1"),
            tool_call("pay", {"cents": 500}, id="c2"),
        )
        agent = ReActAgent("travel", model, tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=gate)])

    db = tmp_path / "cp.db"
    paused = await step(db, make, None, None)
    assert paused.interrupt is not None
    ids = {point.id.rsplit("#", 1)[1]: point.id for point in paused.interrupt.points}
    with pytest.raises(ValueError, match=r"paused by before_tool callback .*\.gate'.* cannot be"):
        await step(db, make, "trip", {ids["c1"]: _Verdict(True), ids["c2"]: True})
    assert desk.ran == []  # nothing ran: the payment waits with the checkpoint
    paused = await step(db, make, "trip", {ids["c1"]: True, ids["c2"]: True})
    assert [info["type"] for info in infos(paused)] == ["approval"]  # the booking's
    assert desk.ran == ["pay 500"]
    paused = await step(db, make, "trip", True)
    assert infos(paused) == ["window or aisle?"]
    done = await step(db, make, "trip", "aisle")
    assert done.text == "paid 500 | booked Oslo, aisle seat"
    assert desk.ran == ["pay 500", "book Oslo"]


async def test_a_later_call_at_the_same_address_is_asked_afresh(tmp_path: Path) -> None:
    # A model that numbers every turn's calls alike (call_0): the second payment's call had the
    # first's address. The gate's answer to the first was kept with that call's approval pause;
    # once the first call ran, the second took it for its own and went to approval unasked.
    # The second call now has an id of its own in the run (call_0-1, test_point_ids_unique.py),
    # so its address differs too; the gate still asks it afresh.
    desk = Desk(gated=frozenset({"pay"}))

    def reply(messages: list[Message]) -> Reply | str:
        paid = [m for m in messages if m.role == "tool"]
        if len(paid) < 2:
            cents = 500 if not paid else 9000
            return Reply(tool_calls=[tool_call("pay", {"cents": cents}, id="call_0")])
        return " | ".join(m.content for m in paid)

    def make(store: SQLiteCheckpointStore) -> Runner:
        agent = ReActAgent("payer", ScriptedModel(reply), tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=desk.gate)])

    db = tmp_path / "cp.db"
    asked = [infos(await step(db, make, None, None))]
    result = None
    for answer in ("go", True, "go", True):
        result = await step(db, make, "trip", answer)
        if result.interrupt is not None:
            asked.append(infos(result))
    assert [a[0].get("type", a[0]) for a in asked] == [
        {"confirm": "pay"},
        "approval",
        {"confirm": "pay"},  # the second payment: the gate asks again
        "approval",
    ]
    assert result is not None and result.text == "paid 500 | paid 9000"
    assert [s for s in desk.seen if s[0] == "gate"] == [
        ("gate", "call_0", None),
        ("gate", "call_0", ("resumed", "go")),
        ("gate", "call_0", ("resumed", "go")),  # its answer again at the approval's resume
        ("gate", "call_0-1", None),  # the second call: a first call for the gate
        ("gate", "call_0-1", ("resumed", "go")),
        ("gate", "call_0-1", ("resumed", "go")),
    ]


async def test_a_call_cut_at_the_token_limit_and_paused_by_a_gate_is_answered_as_cut_on_resume(
    tmp_path: Path,
) -> None:
    """A reply cut at its token limit in a call's arguments: the call is answered as cut, not run
    (``cut_calls``). A ``before_tool`` gate that pauses it first, approved, resumed it with the
    tool itself, which said only "invalid JSON arguments"; the resume answers it as cut too."""
    desk = Desk()
    cut = Message.assistant("", [ToolCall(id="c1", name="book", arguments='{"destination": "Lis')])
    cut.metadata["finish_reason"] = "length"

    def make(store: SQLiteCheckpointStore) -> Runner:
        def reply(messages: list[Message]) -> Message | str:
            if messages[-1].role == "tool":
                return messages[-1].content
            return cut.model_copy(deep=True)

        agent = ReActAgent("travel", ScriptedModel(reply), tools=desk.tools)
        return Runner(agent, store, callbacks=[Callbacks(before_tool=desk.gate)])

    db = tmp_path / "cp.db"
    paused = await step(db, make, None, None)
    assert infos(paused) == [{"confirm": "book"}]
    assert paused.interrupt is not None
    result = await step(db, make, paused.interrupt.checkpoint_id, "go")
    assert "cut at its token limit" in result.text and "max_tokens" in result.text, result.text
    assert desk.ran == [] and [s for s in desk.seen if s[0] == "book"] == []
