"""AgentTool: an agent called as a tool by a ReActAgent. Result, errors, inner exit / transfer /
break ignored outside, inner events forwarded only when asked, input_schema, full_history and the
shared session."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest
from conftest import ScriptAgent, act_break, act_exit, act_transfer, run_events, wire_model
from openai_server import OpenAIServer
from openai_server import Reply as Served
from opentelemetry.sdk.trace import TracerProvider
from pydantic import BaseModel

import adk
from adk import (
    AgentEvent,
    AgentTool,
    Callbacks,
    LoopAgent,
    Message,
    MessageChunk,
    MessageStream,
    RunContext,
    Runner,
    SequentialAgent,
    ToolCall,
    ToolContext,
    with_sub_agents,
)
from adk.history import rewrite_message
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent


def _caller(tool: AgentTool, args: dict[str, object] | str | None = None) -> ReActAgent:
    """An outer agent whose model calls ``tool`` once, then answers "final"."""
    arguments = {"request": "do it"} if args is None else args
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call(tool.spec.name, arguments, id="c1")]), "final"]
    )
    return ReActAgent("outer", model, tools=[tool])


def _model(agent: ReActAgent) -> ScriptedModel:
    assert isinstance(agent.model, ScriptedModel)
    return agent.model


def _tool_reply(agent: ReActAgent) -> Message:
    """The tool message the outer model received after the call."""
    requests = _model(agent).requests
    assert len(requests) == 2, "the outer agent should call its model again after the tool"
    message = requests[1].messages[-1]
    assert message.role == "tool" and message.tool_call_id == "c1"
    return message


def _helper(*steps: object) -> ScriptAgent:
    return ScriptAgent("inner", *steps, description="Does the inner work")  # type: ignore[arg-type]


def test_agent_tool_is_named_and_described_after_the_agent() -> None:
    spec = AgentTool(_helper()).spec
    assert (spec.name, spec.description) == ("inner", "Does the inner work")
    assert spec.parameters["properties"]["request"]["type"] == "string"
    assert spec.parameters["required"] == ["request"]
    with pytest.raises(ValueError):
        AgentTool(ScriptAgent("nodesc"))
    with pytest.raises(ValueError):
        AgentTool(ScriptAgent("x", description=""))


@pytest.mark.parametrize("description", [" ", "\n\t "])
def test_agent_tool_refuses_a_blank_description(description: str) -> None:
    """The model decides when to call the tool from its description: a blank one is as empty as
    "" (DESIGN: both name and description must be non-empty)."""
    with pytest.raises(ValueError, match="AgentTool needs an agent with a non-empty description"):
        AgentTool(ScriptAgent("helper", description=description))


def test_agent_tool_refuses_a_description_that_is_no_str() -> None:
    # BaseAgent refuses one where it is made; one assigned afterwards (or an agent of one's own
    # not made from BaseAgent) still reaches AgentTool, which refuses it too.
    with pytest.raises(TypeError, match="agent 'helper': description must be a str, got int 3"):
        ScriptAgent("helper", description=3)  # type: ignore[arg-type]
    agent = ScriptAgent("helper")
    agent.description = 3  # type: ignore[assignment]
    with pytest.raises(TypeError, match="AgentTool needs a str description, got int 3"):
        AgentTool(agent)


@pytest.mark.parametrize("name", [" ", "\t"])
def test_agent_tool_refuses_a_blank_name_as_no_tool_name(name: str) -> None:
    """Already refused by the tool-name rule; kept here with the description's tests."""
    with pytest.raises(ValueError, match="cannot be a tool name"):
        AgentTool(ScriptAgent(name, description="Helps"))


def test_agent_tool_refuses_what_is_not_an_agent() -> None:
    with pytest.raises(TypeError, match=r"AgentTool\(agent\): expected an agent .* got None"):
        AgentTool(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got str 'helper'"):
        AgentTool("helper")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "suggested"),
    [("My Agent", "My_Agent"), ("billing.v2", "billing_v2"), ("a" * 65, "a" * 64)],
)
def test_agent_tool_refuses_an_agent_name_model_apis_reject_as_a_tool_name(
    name: str, suggested: str
) -> None:
    """The tool is called by the agent's name, so the name must be one a model API accepts; the
    error suggests one (AgentTool takes the agent's name as it is)."""
    agent = ScriptAgent(name, description="Helps")
    with pytest.raises(ValueError, match="cannot be a tool name") as caught:
        AgentTool(agent)
    assert f"name the agent e.g. {suggested!r}" in str(caught.value)
    assert AgentTool(ScriptAgent("a" * 64, description="Helps")).spec.name == "a" * 64


async def test_returns_the_inner_agents_last_message() -> None:
    inner = _helper("first", "last")
    outer = _caller(AgentTool(inner))
    result = await Runner(outer).invoke("hello")
    reply = _tool_reply(outer)
    assert (reply.content, reply.name) == ("last", "inner")
    assert result.text == "final"
    # The inner agent got the request alone: its own run, not the caller's history.
    assert inner.inputs == [[Message.user("do it")]]
    assert inner.paths == [("inner",)]


async def test_an_inner_error_becomes_a_tool_error_and_the_caller_goes_on() -> None:
    inner = _helper("partial", ValueError("kaput"))
    outer = _caller(AgentTool(inner))
    events = await run_events(outer)
    reply = _tool_reply(outer)
    assert reply.content.startswith("Error:") and "kaput" in reply.content
    assert all(e.error is None for e in events)
    assert simplify_events(events)[-1] == "outer: final"


async def test_inner_exit_ends_only_the_inner_agent() -> None:
    inner = _helper("partial", act_exit(), "never")
    outer = _caller(AgentTool(inner, emit_inner_events=True))
    after = ScriptAgent("after", "after ran")
    events = await run_events(SequentialAgent("seq", [outer, after]))
    assert _tool_reply(outer).content == "partial"
    assert inner.reached == 1 and inner.closed == 1
    assert all(e.action is None or not e.action.exit for e in events)
    assert simplify_events(events)[-2:] == ["outer: final", "after: after ran"]


async def test_inner_transfer_is_ignored_by_the_outer_agent() -> None:
    inner = _helper("said this", act_transfer("nowhere"), "never")
    outer = _caller(AgentTool(inner, emit_inner_events=True))
    events = await run_events(outer)
    assert _tool_reply(outer).content == "said this"
    assert all(e.error is None for e in events)
    assert all(e.action is None or e.action.transfer_to is None for e in events)
    assert simplify_events(events)[-1] == "outer: final"


async def test_a_transfer_handled_inside_the_tool_gives_the_targets_answer() -> None:
    router = ScriptAgent("router", act_transfer("expert"), description="Routes questions")
    expert = ScriptAgent("expert", "expert answer")
    outer = _caller(AgentTool(with_sub_agents(router, [expert])))
    await run_events(outer)
    assert _tool_reply(outer).content == "expert answer"
    assert expert.paths == [("router", "expert")]


async def test_inner_break_loop_does_not_break_the_callers_loop() -> None:
    inner = _helper("x", act_break())
    tool = AgentTool(inner)
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("inner", {"request": "r"})]), "final"], cycle=True
    )
    outer = ReActAgent("outer", model, tools=[tool])
    await run_events(LoopAgent("loop", [outer], max_iterations=2))
    assert inner.runs == 2 and len(model.requests) == 4


async def test_inner_events_are_forwarded_with_nested_run_paths_only_when_asked() -> None:
    s1, s2 = ScriptAgent("s1", "step one"), ScriptAgent("s2", "step two")
    pipeline = SequentialAgent("pipeline", [s1, s2], description="A two-step pipeline")
    outer = _caller(AgentTool(pipeline, emit_inner_events=True))
    after = ScriptAgent("after")
    events = await run_events(SequentialAgent("seq", [outer, after]))
    inner_events = [e for e in events if e.agent_name in ("s1", "s2")]
    assert [(e.agent_name, e.run_path) for e in inner_events] == [
        ("s1", ("seq", "outer", "pipeline", "s1")),
        ("s2", ("seq", "outer", "pipeline", "s1", "s2")),
    ]
    assert [e.message.content for e in inner_events if e.message] == ["step one", "step two"]
    # Forwarded, but not recorded in the outer history: the next step sees only the outer agent.
    assert after.inputs[0] == [
        Message.user("hi"),
        Message.user(
            'For context: [outer] called tool: `pipeline` with arguments: {"request": "do it"}.'
        ),
        Message.user("For context: [outer] `pipeline` tool returned result: step two."),
        Message.user("For context: [outer] said: final."),
    ]
    # The forwarded events come before the tool's result.
    lines = simplify_events(events)
    assert lines.index("s2: step two") < lines.index("outer: [tool pipeline] step two")


async def test_inner_events_are_not_forwarded_by_default() -> None:
    pipeline = SequentialAgent("pipeline", [ScriptAgent("s1", "one")], description="Pipeline")
    events = await run_events(_caller(AgentTool(pipeline)))
    assert {e.agent_name for e in events} == {"outer"}


async def test_emit_inner_events_set_after_construction_forwards_them() -> None:
    """The attribute is public (DESIGN.md names it): set on a tool already made, it is what the
    tool does, in either direction, rather than a copy taken at construction deciding."""
    pipeline = SequentialAgent("pipeline", [ScriptAgent("s1", "one")], description="Pipeline")
    tool = AgentTool(pipeline)
    tool.emit_inner_events = True
    assert tool.emit_inner_events is True
    events = await run_events(_caller(tool))
    inner = [
        (e.agent_name, e.message.content) for e in events if e.message and e.agent_name != "outer"
    ]
    assert inner == [("s1", "one")]
    tool.emit_inner_events = False
    events = await run_events(_caller(tool))
    assert {e.agent_name for e in events} == {"outer"}


def test_agent_tool_settings_that_make_its_spec_are_refused_after_construction() -> None:
    """``agent`` and ``input_schema`` make the spec the model is offered, which an agent given
    the tool takes when it is made: set later, they were taken silently, the tool then running
    one agent or schema while the model was offered another; they are refused, saying to make a
    new tool. ``emit_inner_events``, read per call, may be set, as a bool."""
    inner = _helper("planned")
    tool = AgentTool(inner)
    spec = tool.spec
    with pytest.raises(AttributeError, match=r"AgentTool.input_schema cannot be set .* new Agent"):
        tool.input_schema = Trip
    with pytest.raises(AttributeError, match=r"AgentTool.agent cannot be set once the tool is ma"):
        tool.agent = ScriptAgent("planner", "x", description="Plans trips")
    with pytest.raises(TypeError, match="emit_inner_events must be True or False, got str"):
        tool.emit_inner_events = "yes"  # type: ignore[assignment]
    assert (tool.agent, tool.input_schema, tool.emit_inner_events) == (inner, None, False)
    assert tool.spec is spec
    with pytest.raises(TypeError, match="input_schema must be a pydantic model class, a JSON s"):
        AgentTool(inner, input_schema="Trip")  # type: ignore[arg-type]


def test_emit_inner_events_given_other_than_a_bool_is_refused_at_construction_too() -> None:
    """The setter refuses "yes"; the constructor took bool() of anything, so
    ``emit_inner_events="false"`` forwarded every inner event without a word."""
    inner = _helper("planned")
    for value in ("false", 0, None):
        with pytest.raises(TypeError, match="emit_inner_events must be True or False, got"):
            AgentTool(inner, emit_inner_events=value)  # type: ignore[arg-type]
    assert AgentTool(inner, emit_inner_events=True).emit_inner_events is True


class Trip(BaseModel):
    city: str
    days: int = 1


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"query": "weather in Paris"}, "unknown argument 'query'"),
        ({"question": "a", "topic": "b"}, "unknown arguments 'question', 'topic'"),
        ({"request": "do it", "urgent": True}, "unknown argument 'urgent'"),
        ({"request": 3}, "'request' must be a string, got int"),
        ({}, "needs a string argument 'request'"),
    ],
)
async def test_arguments_other_than_request_are_named_in_the_error(
    arguments: dict[str, object], said: str
) -> None:
    """The default parameters are ``{"request": string}`` and nothing else (the schema says
    ``additionalProperties: false``, as a function tool's does): a model that called the tool
    with an argument of its own choosing is told which, not only that 'request' is needed, and
    the inner agent does not run."""
    inner = _helper("never")
    tool = AgentTool(inner)
    assert tool.spec.parameters["additionalProperties"] is False
    outer = _caller(tool, arguments)
    await run_events(outer)
    reply = _tool_reply(outer).content
    assert reply.startswith("Error:") and said in reply, reply
    assert inner.runs == 0


async def test_input_schema_model_gives_the_parameters_and_passes_the_raw_arguments() -> None:
    inner = _helper("planned")
    tool = AgentTool(inner, input_schema=Trip)
    assert tool.spec.parameters == Trip.model_json_schema()
    outer = _caller(tool, '{"city": "Oslo", "days": 3}')
    await run_events(outer)
    assert inner.inputs == [[Message.user('{"city": "Oslo", "days": 3}')]]
    assert _tool_reply(outer).content == "planned"


async def test_input_schema_validation_failure_is_a_tool_error() -> None:
    inner = _helper("planned")
    outer = _caller(AgentTool(inner, input_schema=Trip), {"days": "many"})
    await run_events(outer)
    reply = _tool_reply(outer)
    assert reply.content.startswith("Error:") and "city" in reply.content
    assert inner.runs == 0


async def test_input_schema_as_a_json_schema_dict() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    inner = _helper("ok")
    tool = AgentTool(inner, input_schema=schema)
    assert tool.spec.parameters == schema
    await run_events(_caller(tool, {"q": "x"}))
    assert inner.inputs == [[Message.user('{"q": "x"}')]]


async def test_a_request_that_is_not_a_string_is_a_tool_error() -> None:
    inner = _helper("ok")
    outer = _caller(AgentTool(inner), {"wrong": 1})
    await run_events(outer)
    assert _tool_reply(outer).content.startswith("Error:")
    assert inner.runs == 0


async def test_full_history_gives_the_inner_agent_the_callers_history() -> None:
    inner = _helper("done")
    outer = _caller(AgentTool(inner, full_history=True))
    await run_events(outer, "plan a trip")
    assert inner.inputs == [
        [
            Message.user("plan a trip"),
            Message.user(
                'For context: [outer] called tool: `inner` with arguments: {"request": "do it"}.'
            ),
            Message.user("do it"),
        ]
    ]


async def test_the_inner_run_shares_the_callers_session_values() -> None:
    def use_session(ctx: RunContext) -> AgentEvent:
        ctx.session["inner_saw"] = ctx.session["city"]
        return AgentEvent.of(f"city is {ctx.session['city']}")

    inner = _helper(use_session)
    outer = _caller(AgentTool(inner))
    result = await Runner(outer).invoke("go", session={"city": "Oslo"})
    assert result.session["inner_saw"] == "Oslo"
    assert _tool_reply(outer).content == "city is Oslo"


async def test_streamed_inner_answers_are_collected_for_the_result() -> None:
    inner = ReActAgent(
        "inner", ScriptedModel(["a streamed inner answer"]), description="Streams its answer"
    )
    outer = _caller(AgentTool(inner, emit_inner_events=True))
    events = await run_events(Runner(outer, enable_streaming=True))
    assert _tool_reply(outer).content == "a streamed inner answer"
    forwarded = [e for e in events if e.agent_name == "inner"]
    assert len(forwarded) == 1 and forwarded[0].output is not None
    assert forwarded[0].output.stream is not None
    assert forwarded[0].run_path == ("outer", "inner")


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_inner_stream_that_fails_is_the_inner_agents_error_streamed_or_not(
    streaming: bool,
) -> None:
    """The same tool error, and the inner agent's ``after_agent`` sees its failure, whether or not
    the run streams (streamed, the tool once raised the stream's error past the inner agent)."""

    async def breaking() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="partial ")
        raise ConnectionResetError("reset mid-stream")

    def failing_stream(ctx: RunContext) -> AgentEvent:
        return AgentEvent.streaming(MessageStream(breaking()))

    seen: list[tuple[str, str | None]] = []

    def after_agent(agent: Any, ctx: RunContext, error: Any) -> None:
        seen.append((agent.name, error.message if error is not None else None))

    outer = _caller(AgentTool(_helper(failing_stream)))
    runner = Runner(
        outer, enable_streaming=streaming, callbacks=[Callbacks(after_agent=after_agent)]
    )
    await runner.invoke("go")
    assert _tool_reply(outer).content == (
        "Error: agent 'inner' failed: ConnectionResetError: reset mid-stream"
    )
    assert ("inner", "reset mid-stream") in seen


async def test_a_tool_and_its_callbacks_know_the_agent_that_called_it() -> None:
    # Google ADK's tool_context.agent_name: a port's tools and tool callbacks act for one agent.
    # The same tool is called by the outer agent and by the agent inside the AgentTool.
    seen: list[tuple[str, str]] = []

    @adk.tool
    def whoami(ctx: ToolContext) -> str:
        """Say who called."""
        seen.append(("tool", ctx.agent_name))
        return ctx.agent_name

    def after(ctx: ToolContext, call: ToolCall, result: object) -> None:
        seen.append(("after_tool", ctx.agent_name))

    inner = ReActAgent(
        "inner",
        ScriptedModel([Reply(tool_calls=[tool_call("whoami", {}, id="i1")]), "inner done"]),
        description="Calls whoami",
        tools=[whoami],
    )
    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("whoami", {}, id="o1")]),
            Reply(tool_calls=[tool_call("inner", {"request": "go"}, id="o2")]),
            "final",
        ]
    )
    outer = ReActAgent("outer", model, tools=[whoami, AgentTool(inner)])
    await Runner(outer, callbacks=[Callbacks(after_tool=after)]).invoke("go")

    assert seen == [
        ("tool", "outer"),
        ("after_tool", "outer"),
        ("tool", "inner"),
        ("after_tool", "inner"),
        ("after_tool", "outer"),  # the AgentTool's own call
    ]
    assert model.requests[1].messages[-1].content == "outer"


class _Verdict(BaseModel):
    approved: bool
    reason: str


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_agent_with_an_output_schema_answers_the_caller_with_its_validated_json(
    streaming: bool,
) -> None:
    # The model wrapped its JSON in words and a code fence; the inner agent validated it (its
    # output_key stores the JSON), but the caller's model was handed the words and fences too.
    # Google ADK's AgentTool returns the validated object as well.
    wrapped = 'Here it is:\n```json\n{"approved": true, "reason": "within budget"}\n```\nDone.'
    inner = ReActAgent(
        "reviewer",
        ScriptedModel([wrapped]),
        description="Reviews a purchase",
        output_schema=_Verdict,
        output_key="verdict",
    )
    outer = _caller(AgentTool(inner))
    result = await Runner(outer, enable_streaming=streaming).invoke("go")

    sent = _tool_reply(outer).content
    assert _Verdict.model_validate_json(sent) == _Verdict(approved=True, reason="within budget")
    assert result.session["verdict"] == '{"approved": true, "reason": "within budget"}'


async def test_a_message_after_a_structured_output_is_the_result_again() -> None:
    # Only an object given after the agent's last message is its answer: a custom agent that
    # reports an object and then speaks answers with what it said.
    def report(ctx: RunContext) -> AgentEvent:
        return AgentEvent(output=adk.AgentOutput(custom=_Verdict(approved=False, reason="r")))

    outer = _caller(AgentTool(_helper(report, "said after it")))
    await Runner(outer).invoke("go")
    assert _tool_reply(outer).content == "said after it"


async def test_inner_events_are_forwarded_from_a_tool_registered_under_another_name() -> None:
    """``Resources.add_tool(AgentTool(..., emit_inner_events=True), name=...)``: the model calls
    the new name, and the inner agent's events still come out. The renamed tool hid
    ``_emits_events``, so a round of that one call ran inline, with no way to forward, and the
    events the tool was asked to forward were dropped without a word."""
    inner = _helper("inner said this")
    resources = adk.Resources()
    resources.add_tool(AgentTool(inner, emit_inner_events=True), name="research")
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("research", {"request": "do it"}, id="c1")]), "final"]
    )
    outer = ReActAgent("outer", model, tools=["research"])
    events = await run_events(Runner(outer, resources=resources))
    assert simplify_events(events) == [
        'outer: [call research {"request": "do it"}]',
        "inner: inner said this",
        "outer: [tool research] inner said this",
        "outer: final",
    ]
    assert model.requests[1].messages[-1].content == "inner said this"


# -- images, sounds and files in the inner agent's answer ------------------------------------------
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"


def _image(data: bytes = PNG) -> adk.ImagePart:
    return adk.ImagePart(mime_type="image/png", data=data)


@adk.tool
def _chart(metric: str) -> list[Any]:
    """Draws a chart of ``metric``."""
    return [f"the {metric} chart:", _image()]


async def test_the_parts_of_the_inner_agents_last_message_reach_the_calling_model() -> None:
    """A custom agent answering with a message that carries an image: the calling model gets
    the image in the tool's result, because the result was the text alone. The text is the
    message's, with the image's placeholder a tool's result keeps for each part (for the agents
    reading the history as text), once. The parts of an earlier message are not its answer's."""
    drawn = Message(role="assistant", content="the sales chart", parts=[_image()])
    sketch = Message(role="assistant", content="a sketch", parts=[_image(b"GIF89a")])
    outer = _caller(AgentTool(_helper(sketch, drawn)))
    result = await Runner(outer).invoke("go")
    reply = _tool_reply(outer)
    assert (reply.content, reply.parts) == ("the sales chart\n[image: image/png]", (_image(),))
    shown = rewrite_message("outer", reply)  # what an agent after this one reads of it
    assert shown.content == (
        "For context: [outer] `inner` tool returned result: the sales chart\n[image: image/png]."
    )
    assert result.text == "final"

    named = Message(role="assistant", content="[image: image/png] of sales", parts=[_image()])
    outer = _caller(AgentTool(_helper(named)))
    await Runner(outer).invoke("go")
    assert _tool_reply(outer).content == "[image: image/png] of sales"


async def test_the_parts_of_the_inner_agents_tool_results_stay_in_its_own_history() -> None:
    """An inner agent that drew a chart with its tool and then answered in words: its answer is
    the words; the chart was its model's to read, not passed on with every result (Google ADK's
    and the OpenAI Agents SDK's agent tools answer with the final message's content too)."""
    inner_model = ScriptedModel(
        [Reply(tool_calls=[tool_call("_chart", {"metric": "sales"})]), "Sales grew 4%."]
    )
    inner = ReActAgent("analyst", inner_model, tools=[_chart], description="Analyses figures")
    outer = _caller(AgentTool(inner))
    await Runner(outer).invoke("go")
    reply = _tool_reply(outer)
    assert (reply.content, reply.parts) == ("Sales grew 4%.", ())
    # The inner model read the chart itself.
    assert inner_model.requests[1].messages[-1].parts == (_image(),)


async def test_a_chart_the_inner_agents_tool_returns_directly_is_its_answer_with_the_image() -> (
    None
):
    """A tool the inner agent returns directly ends it with that tool's result, which is then
    its last message: the chart reaches the calling model as the image it is."""
    inner = ReActAgent(
        "charts",
        ScriptedModel([Reply(tool_calls=[tool_call("_chart", {"metric": "sales"})])]),
        tools=[_chart],
        return_directly=["_chart"],
        description="Draws charts",
    )
    outer = _caller(AgentTool(inner))
    await Runner(outer).invoke("go")
    reply = _tool_reply(outer)
    assert (reply.content, reply.parts) == ("the sales chart:\n[image: image/png]", (_image(),))


async def test_a_structured_answer_after_a_message_with_parts_is_the_json_alone() -> None:
    def report(ctx: RunContext) -> AgentEvent:
        return AgentEvent(output=adk.AgentOutput(custom=_Verdict(approved=True, reason="r")))

    drawn = Message(role="assistant", content="the chart", parts=[_image()])
    outer = _caller(AgentTool(_helper(drawn, report)))
    await Runner(outer).invoke("go")
    reply = _tool_reply(outer)
    assert (_Verdict.model_validate_json(reply.content), reply.parts) == (
        _Verdict(approved=True, reason="r"),
        (),
    )


@pytest.mark.parametrize(
    ("depth", "traced"),
    [(1, False), (2, False), (1, True)],
    ids=["nested", "nested_twice", "nested_traced"],
)
async def test_a_forwarded_stream_is_read_from_the_wire_only_as_the_outer_reader_reads_it(
    depth: int, traced: bool
) -> None:
    # A slow reader (a service's client on a slow link) took one chunk of the inner agent's
    # forwarded reply, and the nested run read the rest from the model at the model's pace:
    # up to the whole reply held in memory, where the run's own streams are read from the model
    # only as the reader reads them (and to their end once it asks for the next event). Twice
    # nested, the middle AgentTool passes the wait on: it forwards the event in turn.
    text = "".join(f"{i:07d} " for i in range(500))  # 500 chunks of 8 characters
    async with OpenAIServer([Served(text=text)]) as server, wire_model(server) as model:
        inner = ReActAgent("inner", model, description="Does the inner work")
        tool = AgentTool(inner, emit_inner_events=True)
        if depth == 2:
            calls = [tool_call("inner", {"request": "do it"}, id="c1")]
            middle_model = ScriptedModel([Reply(tool_calls=calls), "asked"])
            middle = ReActAgent("middle", middle_model, tools=[tool], description="Asks inner")
            tool = AgentTool(middle, emit_inner_events=True)
        outer = _caller(tool)
        held: list[int] = []
        # Traced, a tool call's way out is the tracer's (``_ProgressOnSpan``), which passes the
        # wait on: without it the nested run read the reply at the model's pace again.
        provider = TracerProvider() if traced else None
        runner = Runner(outer, enable_streaming=True, tracer_provider=provider)
        async with aclosing(runner.run("go")) as events:
            async for event in events:
                output = event.output
                if event.agent_name != "inner" or output is None or output.stream is None:
                    continue
                stream = output.stream
                await anext(aiter(stream))  # the reader takes one chunk, then is slow
                for _ in range(300):  # the loop goes on meanwhile: the wire, the nested run
                    if len(stream._buffer) > 50:
                        break
                    await asyncio.sleep(0)
                held.append(len(stream._buffer))
    assert held and max(held) <= 2, f"chunks held for a reader that took one: {held}"
    # Once the reader asks for the next event, the nested run reads the reply to its end: the
    # tool's result is the whole of it.
    assert _tool_reply(outer if depth == 1 else middle).content == text


@pytest.mark.parametrize("reads", ["every_stream", "some_streams"])
async def test_concurrent_forwarded_streams_each_wait_only_for_their_own_event(reads: str) -> None:
    # A forwarded stream still arriving holds its own call until the reader took its event: two
    # calls of one round, and a third nested in a ParallelAgent branch inside the second, all
    # streaming, the reader taking their events in the order they come and reading each stream
    # (or only some) to its end before asking for the next, must neither wait on one another
    # nor lose a word: every stream read is whole, and each tool answers with its whole reply.
    def helper(name: str, script: list[Any], tools: list[AgentTool] | None = None) -> ReActAgent:
        return ReActAgent(name, ScriptedModel(script), tools=tools or [], description=name)

    def calling(name: str, id: str) -> Reply:
        return Reply(tool_calls=[tool_call(name, {"request": "go"}, id=id)])

    deep = AgentTool(helper("deep", ["deep " * 30]), emit_inner_events=True)
    branch = helper("branch", [calling("deep", "d1"), "branch done"], [deep])
    team = adk.ParallelAgent("team", [branch, helper("plain", ["plain " * 30])], "Both")
    first = AgentTool(helper("first", ["first " * 30]), emit_inner_events=True)
    calls = [
        tool_call("first", {"request": "a"}, id="c1"),
        tool_call("team", {"request": "b"}, id="c2"),
    ]
    outer = ReActAgent(
        "outer",
        ScriptedModel([Reply(tool_calls=calls), "final"]),
        tools=[first, AgentTool(team, emit_inner_events=True)],
    )
    wanted = ("first", "deep", "plain") if reads == "every_stream" else ("first", "deep")
    read: dict[str, list[str]] = {}
    async with aclosing(Runner(outer, enable_streaming=True).run("go")) as events:
        async for event in events:
            output = event.output
            if output is not None and output.stream is not None and event.agent_name in wanted:
                read[event.agent_name] = "".join([c.content async for c in output.stream]).split()
    assert read == {name: [name] * 30 for name in wanted}
    assert _model(outer).requests[1].messages[-2].content.split() == ["first"] * 30
    assert _model(branch).requests[1].messages[-1].content.split() == ["deep"] * 30
