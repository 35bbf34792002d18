"""The event-driven tool action (``ToolRequestEvent``, a chat's tool rounds) shows the caller of
the run what its calls emit while they run, as a ``ReActAgent`` does: a tool's progress reports
and an ``AgentTool``'s inner events (``emit_inner_events=True``). Only shown: not recorded, not
checkpointed, never an output (``RunResult.output``, an execution environment's outputs). The
action dropped them, in a streaming run too.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from conftest import ChatActor, crunch, pay
from pydantic import BaseModel, ConfigDict, Field, ValidationError, computed_field
from upgrade_scenarios import Asker as _Asker
from upgrade_scenarios import fix, lookup

from adk import (
    AgentEvent,
    AgentTool,
    FunctionTool,
    Interrupt,
    Resources,
    Runner,
    SequentialAgent,
    ToolProgress,
    tool,
)
from adk.actions import (
    ActionAgent,
    ActionContext,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import decode_checkpoint, from_json_value
from adk.execution import LocalExecutionEnvironment
from adk.messages import Message
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tools.base import ToolContext, ToolResult, ToolSpec
from prebuilt import ReActAgent


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def reports(events: list[AgentEvent]) -> list[tuple[tuple[str, ...], str | None, float | None]]:
    return [
        (e.run_path, e.output.tool_name, e.output.custom.progress)
        for e in events
        if e.output is not None and isinstance(e.output.custom, ToolProgress)
    ]


def actor(script: list[Any], tools: list[Any], **options: Any) -> ChatActor:
    resources = Resources()
    resources.add_model("m", ScriptedModel(script))
    for found in tools:
        resources.add_tool(found)
    return ChatActor("actor", [t.spec.name for t in tools], resources=resources, **options)


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_chats_tool_call_shows_its_progress_as_it_runs(streaming: bool) -> None:
    script = [Reply(tool_calls=[tool_call("crunch", {"steps": 2})]), "Done."]
    runner = Runner(actor(script, [crunch]), enable_streaming=streaming)

    events = [e async for e in runner.run("Go.")]

    assert reports(events) == [(("actor",), "crunch", 1.0), (("actor",), "crunch", 2.0)]
    # Before the answer, which stays the run's output.
    last_report = max(i for i, e in enumerate(events) if isinstance(e.output.custom, ToolProgress))  # type: ignore[union-attr]
    answer = next(i for i, e in enumerate(events) if e.message is not None)
    assert last_report < answer
    result = await Runner(actor(script, [crunch])).invoke("Go.")
    assert result.text == "Done." and len(reports(result.events)) == 2


async def test_progress_of_several_calls_of_one_round_and_their_answers_in_order() -> None:
    calls = [tool_call("add", {"a": 1, "b": 2}), tool_call("crunch", {"steps": 1})]
    model = ScriptedModel([Reply(tool_calls=calls), "Done."])
    resources = Resources()
    resources.add_model("m", model)
    resources.add_tool(add)
    resources.add_tool(crunch)

    result = await Runner(ChatActor("actor", ["add", "crunch"], resources=resources)).invoke("Go.")

    assert reports(result.events) == [(("actor",), "crunch", 1.0)]
    answers = [m.content for m in model.requests[-1].messages if m.role == "tool"]
    assert answers == ["3", "crunched 1"]


def _helper(script: list[Any], tools: list[Any] | None = None) -> ReActAgent:
    return ReActAgent("helper", ScriptedModel(script), tools=tools or [], description="Helps out.")


@pytest.mark.parametrize("shown", [True, False])
async def test_an_agent_tools_inner_events_reach_the_caller_and_no_history(shown: bool) -> None:
    helper = _helper([Reply(tool_calls=[tool_call("crunch", {"steps": 1})]), "Helped."], [crunch])
    script = [Reply(tool_calls=[tool_call("helper", {"request": "help"})]), "Done."]
    # A ReActAgent after it sees the history the actor left: none of the helper's events.
    after = ScriptedModel(["Seen."])
    flow = SequentialAgent(
        "flow",
        [
            actor(script, [AgentTool(helper, emit_inner_events=shown)]),
            ReActAgent("after", after),
        ],
    )

    result = await Runner(flow).invoke("Go.")

    inner = [
        (e.run_path, e.message.content if e.message is not None else "report")
        for e in result.events
        if e.run_path[:3] == ("flow", "actor", "helper")
    ]
    path = ("flow", "actor", "helper")
    assert inner == (
        [(path, ""), (path, "report"), (path, "crunched 1"), (path, "Helped.")] if shown else []
    )
    assert reports(result.events) == ([(path, "crunch", 1.0)] if shown else [])
    seen = [m.content for m in after.requests[0].messages]
    assert seen == ["Go.", "For context: [actor] said: Done.."]
    assert result.text == "Seen."


async def test_an_interrupt_inside_an_agent_tool_showing_its_events_pauses_and_resumes() -> None:
    helper = _helper(
        [Reply(tool_calls=[tool_call("pay", {"amount": 5}, id="p1")]), "Paid 5."], [pay]
    )
    script = [Reply(tool_calls=[tool_call("helper", {"request": "pay 5"}, id="h1")]), "Done."]
    store = InMemoryCheckpointStore()
    agent = actor(script, [AgentTool(helper, emit_inner_events=True)])

    paused = await Runner(agent, store).invoke("Go.")

    assert paused.interrupt is not None
    (point,) = paused.interrupt.point_ids
    assert point.endswith("tool:helper#h1/agent:helper/tool:pay#p1")
    # The helper's call was shown before the pause.
    shown = [e for e in paused.events if e.run_path == ("actor", "helper")]
    assert [e.message.tool_calls[0].name for e in shown if e.message is not None] == ["pay"]

    resumed = await Runner(agent, store).invoke_resume(paused.checkpoint_id, True)

    assert resumed.text == "Done."
    inner = [e.message.content for e in resumed.events if e.run_path == ("actor", "helper")]
    assert inner == ["paid 5", "Paid 5."]


async def test_an_execution_environments_outputs_are_the_answers_never_a_report() -> None:
    script = [Reply(tool_calls=[tool_call("crunch", {"steps": 2})]), "Done."]
    resources = Resources()
    resources.add_model("m", ScriptedModel(script, cycle=True))
    resources.add_tool(crunch)
    agent = ChatActor("actor", ["crunch"])
    env = LocalExecutionEnvironment(resources=resources)

    outputs = [out async for out in env.from_list(["a", "b"], key=lambda r: r).apply(agent)]

    got = sorted((out.key, out.output) for out in outputs if out.key == "a")
    got += [(out.key, out.output) for out in outputs if out.key == "b"]
    assert got == [("a", "Done."), ("b", "Done.")]


class Answer(BaseModel):
    value: int


class AnswersThenCrunches(ActionAgent):
    """Outputs its structured answer, then makes a tool call of its own whose progress report
    is the last thing its run shows."""

    @action(InputEvent)
    def start(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=Answer(value=7)))
        ctx.send_event(ToolRequestEvent(tool_calls=[tool_call("crunch", {"steps": 1}, id="c1")]))

    @action(ToolResponseEvent)
    def done(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
        ctx.short_term_memory.set("crunched", event.responses[0].content)


def _answers_then_crunches(name: str = "answerer") -> AnswersThenCrunches:
    resources = Resources()
    resources.add_tool(crunch)
    return AnswersThenCrunches(name, description="Answers.", resources=resources)


async def test_an_answer_is_never_the_progress_report_that_came_after_it() -> None:
    """``RunResult.output`` and an ``AgentTool``'s result are the agent's answer, the custom
    output before its tool's report: a report is a custom output too, and was taken for one."""
    result = await Runner(_answers_then_crunches()).invoke("Go.")
    assert [e.output.custom for e in result.events][-1] == ToolProgress(  # type: ignore[union-attr]
        tool_call_id="c1", progress=1, total=1, message="step 1 of 1"
    )
    assert result.output == Answer(value=7)

    # Through an agent tool: its result is the answer's JSON, shown events or not.
    for shown in (True, False):
        model = ScriptedModel(
            [Reply(tool_calls=[tool_call("answerer", {"request": "go"})]), "Done."]
        )
        tools = [AgentTool(_answers_then_crunches(), emit_inner_events=shown)]
        await Runner(ReActAgent("boss", model, tools=tools)).invoke("Go.")
        (answer,) = [m.content for m in model.requests[-1].messages if m.role == "tool"]
        assert answer == '{"value":7}'


class _Opaque:
    """Not JSON, and no pydantic model: what no checkpoint can hold."""


class _Structured:
    """A tool of its own whose results carry ``structured`` values: JSON for ``json``, an object
    no checkpoint holds for ``opaque``, nothing for ``plain``."""

    def __init__(self, name: str) -> None:
        self.spec = ToolSpec(name=name)

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        name = self.spec.name
        if name == "json":
            return ToolResult(content="42", structured={"answer": 42, "ratio": 0.5})
        if name == "opaque":
            return ToolResult(content="an object", structured=_Opaque())
        return ToolResult(content="plain")


def _structured_tools(*names: str) -> Resources:
    """Resources holding a ``_Structured`` tool of each of ``names``."""
    resources = Resources()
    for name in names:
        resources.add_tool(_Structured(name))  # type: ignore[arg-type]
    return resources


def _asker() -> _Asker:
    return _Asker("asker", resources=_structured_tools("json", "opaque", "plain"))


async def _paused_warning_of_opaque(
    runner: Runner, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Run ``text`` to its pause at checkpoint ``c1``, which saves tool 'opaque''s value as
    None with a warning saying so (warned once a process: another test's warning let go)."""
    import adk.actions._builtin as builtin

    builtin._warned_unsaved.discard("opaque")
    first = await runner.invoke(text, checkpoint_id="c1")
    assert first.interrupt is not None
    assert "tool 'opaque' returned a ToolResult.structured that a checkpoint cannot hold" in (
        caplog.text
    )


async def test_a_responses_structured_values_are_one_per_call_and_none_when_no_call_gave_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each response's ``ToolResult.structured`` is on the ``ToolResponseEvent``, in the order of
    the calls, None for a call without one; the field is None when no call gave any. With no
    pause, each is the tool's value as it gave it, a value no checkpoint could hold too (an
    object of its own): nothing is saved, so nothing is looked at or warned of (a pause saves it
    as None: the next tests)."""
    result = await Runner(_asker()).invoke("plain json opaque")
    output = result.output
    assert output[:2] == [None, {"answer": 42, "ratio": 0.5}]
    assert type(output[2]) is _Opaque
    assert "ToolResult.structured" not in caplog.text
    assert (await Runner(_asker()).invoke("plain")).output is None


async def test_a_large_structured_result_is_not_walked_when_nothing_pauses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The values were put through the checkpoint codec at every call, paused or not (~10 ms for
    a 1000-row result): now only a pause that saves them looks at them. Counted: the codec's
    calls from the tool action."""
    import adk.actions._builtin as builtin

    rows = [{"id": i, "name": f"row {i}", "tags": ["a", "b"]} for i in range(1000)]
    walked: list[object] = []
    codec = builtin._json_value_at

    def counted(value: Any, where: str, depth: int) -> Any:
        walked.append(value)
        return codec(value, where, depth)

    monkeypatch.setattr(builtin, "_json_value_at", counted)

    class _Rows(_Structured):
        async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
            return ToolResult(content="1000 rows", structured=rows)

    resources = Resources()
    resources.add_tool(_Rows("rows"))  # type: ignore[arg-type]
    result = await Runner(_Asker("asker", resources=resources)).invoke("rows")
    assert result.output == [rows] and result.output[0] is rows  # the tool's own value
    assert walked == []


async def test_a_value_no_checkpoint_holds_is_saved_as_none_at_a_pause_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An action paused on the response: the response is saved, and a value a checkpoint cannot
    hold is saved as None, with a warning naming the tool, once; the pause is not refused for
    it, and the resumed action reads None there and the other values as they were."""
    resources = _structured_tools("json", "opaque")
    store = InMemoryCheckpointStore()
    runner = Runner(_Confirming("asker", resources=resources), checkpoint_store=store)
    await _paused_warning_of_opaque(runner, "json opaque", caplog)
    resumed = await runner.invoke_resume("c1", True)
    assert resumed.output == {"confirmed": [{"answer": 42, "ratio": 0.5}, None]}
    caplog.clear()
    store2 = InMemoryCheckpointStore()
    runner2 = Runner(_Confirming("asker", resources=resources), checkpoint_store=store2)
    await runner2.invoke("opaque", checkpoint_id="c2")
    assert "ToolResult.structured" not in caplog.text  # once for the tool
    body = decode_checkpoint((await store2.get("c2")) or b"", "c2")
    assert "structured" not in body["states"]["agent:asker"][""]["event"]["fields"]


def test_a_tool_response_event_made_by_hand_takes_one_structured_value_per_response() -> None:
    """Made by an action of one's own, the event is as before without ``structured``; with it,
    one value per response (None for one without), or the event is refused saying so."""
    responses = [Message.tool("1", tool_call_id="a"), Message.tool("2", tool_call_id="b")]
    assert ToolResponseEvent(request_id="r", responses=responses).structured is None
    event = ToolResponseEvent(request_id="r", responses=responses, structured=[None, {"n": 2}])
    assert event.structured == [None, {"n": 2}]
    with pytest.raises(ValidationError, match="structured holds 1 values for 2 responses"):
        ToolResponseEvent(request_id="r", responses=responses, structured=[{"n": 2}])


class _Confirming(_Asker):
    """``_Asker``, and a second action on the response that pauses before it outputs the
    response's structured values: the response is saved as the event to go on with."""

    @action(ToolResponseEvent)
    @staticmethod
    def confirm(event: ToolResponseEvent, ctx: ActionContext) -> None:
        if ctx.resume is None:
            raise Interrupt("confirm?")
        ctx.send_event(OutputEvent(output={"confirmed": event.structured}))


async def test_a_paused_response_without_structured_values_is_saved_as_an_older_pyadk_reads_it() -> (
    None
):
    """A ``ToolResponseEvent`` saved with a pause wrote ``"structured": null`` among its fields
    even when no call gave one, and a pyadk from before the field (``extra="forbid"``) refused
    the whole checkpoint for it ("Extra inputs are not permitted"): a worker not yet upgraded,
    in a rolling deploy, could resume none of the paused responses the upgraded ones saved. The
    field is saved only when it holds values, as ``_Round.answer``'s state saves it; with
    values it is saved and read back."""
    resources = _structured_tools("json", "plain")
    for calls, structured in (
        ("plain", None),
        ("plain json", [None, {"answer": 42, "ratio": 0.5}]),
    ):
        store = InMemoryCheckpointStore()
        runner = Runner(_Confirming("asker", resources=resources), checkpoint_store=store)
        first = await runner.invoke(calls, checkpoint_id="c1")
        assert first.interrupt is not None
        body = decode_checkpoint((await store.get("c1")) or b"", "c1")
        fields = body["states"]["agent:asker"][""]["event"]["fields"]
        assert ("structured" in fields) is (structured is not None)
        resumed = await runner.invoke_resume("c1", True)
        assert resumed.interrupt is None
        assert resumed.output == {"confirmed": structured}


class _Asking(_Structured):
    """Pauses its call the first time (the round pauses with the other calls' answers saved)."""

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        if ctx.resume is None:
            raise Interrupt("go on?")
        return ToolResult(content="asked")


async def test_a_round_paused_by_a_call_saves_the_others_values_a_checkpoint_can_hold(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The round's finished answers are saved beside the paused call, their structured values
    with them: a value no checkpoint holds is saved as None, with its warning, at the pause (it
    was looked at when the tool answered); the resumed round's response carries the rest."""
    resources = _structured_tools("json", "opaque")
    resources.add_tool(_Asking("ask"))  # type: ignore[arg-type]
    store = InMemoryCheckpointStore()
    runner = Runner(_Asker("asker", resources=resources), checkpoint_store=store)
    await _paused_warning_of_opaque(runner, "json opaque ask", caplog)
    resumed = await runner.invoke_resume("c1", True)
    assert resumed.output == [{"answer": 42, "ratio": 0.5}, None, None]


class _Since(_Structured):
    """When the device last reported: a value with a datetime, which pydantic writes as text."""

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        at = datetime.datetime(2026, 1, 2, 3, 4, 5)
        return ToolResult(content=at.isoformat(), structured={"at": at})


async def test_a_model_a_paused_round_saves_comes_back_as_its_fields_as_a_react_agents_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A function tool's unregistered pydantic result, saved with a round that paused, came
    back as None (with a warning that it was lost), where a ReActAgent's paused round keeps it
    as its fields: an action read None for the same call the chat read as data. It is its
    fields now (all of them: the default too), and a datetime its text, as pydantic writes them;
    only an object of its own is still None, with its warning."""
    resources = _structured_tools("opaque")
    resources.add_tool(lookup)
    resources.add_tool(_Since("since"))  # type: ignore[arg-type]
    resources.add_tool(_Asking("ask"))  # type: ignore[arg-type]
    runner = Runner(_Asker("asker", resources=resources), InMemoryCheckpointStore())
    first = await runner.invoke("lookup since opaque ask", checkpoint_id="c1")
    assert first.interrupt is not None
    resumed = await runner.invoke_resume("c1", True)
    assert resumed.output == [
        {"site": "north", "limit": 70.0},
        {"at": "2026-01-02T03:04:05"},
        None,
        None,
    ]
    assert "tool 'lookup'" not in caplog.text and "tool 'since'" not in caplog.text


async def test_a_react_agents_saved_tool_result_keeps_its_models_fields_at_their_defaults() -> None:
    """A ReActAgent's round paused beside a finished call whose structured value is an
    unregistered model: the checkpoint kept it as its fields, but not those at their defaults
    (pydantic's exclude_defaults, meant for the message's own fields, reached into it), so the
    resumed history's tool message read ``{"site": "north"}``, its ``limit`` gone."""
    assert await _saved_by_a_react_agent(lookup) == [{"site": "north", "limit": 70.0}]


async def _saved_by_a_react_agent(looked_up: FunctionTool[[], Any]) -> list[Any]:
    """The structured values a ``ReActAgent``'s checkpoint saved for ``looked_up``'s call, its
    round paused beside a call of ``fix`` (which a person approves)."""
    name = looked_up.spec.name

    def model(messages: list[Message]) -> Reply | str:
        if messages[-1].role == "tool":
            return "done"
        return Reply(tool_calls=[tool_call(name, {}), tool_call("fix", {})])

    store = InMemoryCheckpointStore()
    runner = Runner(ReActAgent("r", ScriptedModel(model), tools=[looked_up, fix]), store)
    assert (await runner.invoke("go", checkpoint_id="c1")).interrupt is not None
    body = decode_checkpoint((await store.get("c1")) or b"", "c1")
    return [
        message.metadata["structured"]
        for message in _messages_in(from_json_value(body["history"]))
        if message.name == name and message.role == "tool"
    ]


class _Reading(BaseModel):
    """A result named by aliases (its own config says so for one), with a computed field."""

    model_config = ConfigDict(serialize_by_alias=True)

    site: str = Field(alias="Site")
    limit: float = Field(70.0, alias="Limit")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def label(self) -> str:
        return self.site.upper()


class _Gauge(BaseModel):
    """An unregistered result whose alias its config does not ask to write by."""

    level: int = Field(alias="Level")
    reading: _Reading


@tool
def gauge() -> _Gauge:
    """Read the gauge."""
    return _Gauge(Level=3, reading=_Reading(Site="north"))


async def test_an_unregistered_models_saved_fields_are_named_as_a_react_agents_checkpoint_names_them() -> (
    None
):
    """The action's round saved the model as pydantic_core's to_jsonable_python wrote it, which
    names every field by its alias and writes computed fields, where a ReActAgent's checkpoint
    names them as the model dumps them (by alias only where its config says so, no computed
    field): a resume read ``{"Level": 3, ...}`` from one agent and ``{"level": 3, ...}`` from
    the other for the same tool's result. Both read the ReActAgent's form now."""
    resources = _structured_tools("opaque")
    resources.add_tool(gauge)
    resources.add_tool(_Asking("ask"))  # type: ignore[arg-type]
    runner = Runner(_Asker("asker", resources=resources), InMemoryCheckpointStore())
    assert (await runner.invoke("gauge ask", checkpoint_id="c1")).interrupt is not None
    [acted, _] = (await runner.invoke_resume("c1", True)).output
    [reacted] = await _saved_by_a_react_agent(gauge)
    assert reacted == {"level": 3, "reading": {"Site": "north", "Limit": 70.0}}
    assert acted == reacted


def _messages_in(value: Any) -> list[Message]:
    """The messages anywhere in ``value`` (a checkpoint's history, read back)."""
    if isinstance(value, Message):
        return [value]
    if isinstance(value, dict):
        return [m for v in value.values() for m in _messages_in(v)]
    if isinstance(value, list | tuple):
        return [m for v in value for m in _messages_in(v)]
    return []
