"""Callbacks around agents, model calls and tool calls: order across several callback objects,
short-circuits and replacements, streams, every event, and clear errors for misuse."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from conftest import ScriptAgent, act_transfer
from pydantic import BaseModel

from adk import (
    AgentEvent,
    AgentTool,
    ErrorInfo,
    Interrupt,
    LoopAgent,
    Message,
    ModelOptions,
    ParallelAgent,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    ToolCall,
    ToolContext,
    ToolError,
    ToolResult,
    tool,
)
from adk.agent import Agent
from adk.callbacks import Callbacks, ModelRequest
from adk.checkpoint import InMemoryCheckpointStore
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent

ADDED: list[tuple[int, int]] = []


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    ADDED.append((a, b))
    return a + b


@pytest.fixture(autouse=True)
def _reset() -> None:
    ADDED.clear()


def add_model() -> ScriptedModel:
    return ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "sum=3"])


class Recorder(Callbacks):
    """Async methods that log what they see into a shared list."""

    def __init__(self, tag: str, log: list[str]) -> None:
        super().__init__()
        self.tag = tag
        self.log = log

    async def before_agent(self, agent: Agent, ctx: RunContext) -> None:
        self.log.append(f"{self.tag} before_agent {agent.name}")

    async def after_agent(self, agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        self.log.append(f"{self.tag} after_agent {agent.name} error={error}")

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> Message | None:
        self.log.append(f"{self.tag} before_model {ctx.agent_name} {len(request.messages)}")
        return None

    async def after_model(
        self, ctx: RunContext, request: ModelRequest, reply: Message
    ) -> Message | None:
        self.log.append(f"{self.tag} after_model {reply.content or reply.tool_calls[0].name}")
        return None

    async def before_tool(self, ctx: ToolContext, call: ToolCall) -> str | ToolResult | None:
        self.log.append(f"{self.tag} before_tool {call.name} {call.arguments}")
        return None

    async def after_tool(
        self, ctx: ToolContext, call: ToolCall, result: str | ToolResult
    ) -> str | ToolResult | None:
        self.log.append(f"{self.tag} after_tool {call.name} {result}")
        return None


def plain_recorder(tag: str, log: list[str]) -> Callbacks:
    """The same as ``Recorder``, as plain (sync) functions."""
    return Callbacks(
        before_agent=lambda agent, ctx: log.append(f"{tag} before_agent {agent.name}") and None,
        after_agent=lambda agent, ctx, error: (
            log.append(f"{tag} after_agent {agent.name}") and None
        ),
        before_model=lambda ctx, request: log.append(f"{tag} before_model") and None,
        after_model=lambda ctx, request, reply: log.append(f"{tag} after_model") and None,
        before_tool=lambda ctx, call: log.append(f"{tag} before_tool") and None,
        after_tool=lambda ctx, call, result: log.append(f"{tag} after_tool") and None,
    )


# -- order --------------------------------------------------------------------------------------
async def test_callbacks_run_in_the_order_given_around_every_call() -> None:
    log: list[str] = []
    runner = Runner(
        ReActAgent("calc", add_model(), tools=[add]),
        callbacks=[Recorder("A", log), plain_recorder("B", log)],
    )
    result = await runner.invoke("1+2?")
    assert result.text == "sum=3"
    assert log == [
        "A before_agent calc",
        "B before_agent calc",
        "A before_model calc 1",
        "B before_model",
        "A after_model add",
        "B after_model",
        'A before_tool add {"a": 1, "b": 2}',
        "B before_tool",
        "A after_tool add 3",
        "B after_tool",
        "A before_model calc 3",
        "B before_model",
        "A after_model sum=3",
        "B after_model",
        "A after_agent calc error=None",
        "B after_agent calc",
    ]


async def test_agent_callbacks_nest_along_workflows_and_see_wrappers_once() -> None:
    log: list[str] = []
    billing = ReActAgent("billing", ScriptedModel(["refunded"]), description="Billing.")
    router = ReActAgent(
        "router",
        ScriptedModel(
            [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "billing"})])]
        ),
        sub_agents=[billing],
    )
    seq = SequentialAgent("seq", [ScriptAgent("intro", "hello"), router])
    await Runner(
        seq,
        callbacks=[
            Callbacks(
                before_agent=lambda a, c: log.append(f"+{a.name}"),
                after_agent=lambda a, c, e: log.append(f"-{a.name}"),
            )
        ],
    ).invoke("go")
    # The router is a ReActAgent running a flow running its loop: one agent, one pair of calls.
    assert log == ["+seq", "+intro", "-intro", "+router", "+billing", "-billing", "-router", "-seq"]


async def test_after_agent_receives_the_error() -> None:
    errors: list[ErrorInfo | None] = []
    failing = ReActAgent("a", ScriptedModel([ConnectionError("down")]))
    runner = Runner(failing, callbacks=[Callbacks(after_agent=lambda a, c, e: errors.append(e))])
    with pytest.raises(RunError):
        await runner.invoke("x")
    assert errors == [ErrorInfo("ConnectionError", "down")]


# -- models ---------------------------------------------------------------------------------------
async def test_a_before_model_reply_skips_the_model_and_later_before_callbacks() -> None:
    log: list[str] = []
    model = ScriptedModel(["never used"])

    def cached(ctx: RunContext, request: ModelRequest) -> Message:
        log.append("cache hit")
        return Message.assistant("from cache")

    second = Callbacks(
        before_model=lambda ctx, request: log.append("second before") and None,
        after_model=lambda ctx, request, reply: (
            log.append(f"second after {reply.content}") and None
        ),
    )
    first = Callbacks(
        before_model=cached,
        after_model=lambda ctx, request, reply: log.append(f"first after {reply.content}") and None,
    )
    result = await Runner(ReActAgent("a", model), callbacks=[first, second]).invoke("hi")
    assert result.text == "from cache"
    assert model.requests == []  # the model was never asked
    assert log == ["cache hit", "first after from cache", "second after from cache"]


async def test_after_model_replacements_chain() -> None:
    upper = Callbacks(after_model=lambda c, r, reply: Message.assistant(reply.content.upper()))

    async def exclaim(ctx: RunContext, request: ModelRequest, reply: Message) -> Message:
        return Message.assistant(reply.content + "!")

    runner = Runner(
        ReActAgent("a", ScriptedModel(["hello"])),
        callbacks=[upper, Callbacks(after_model=exclaim)],
    )
    result = await runner.invoke("hi")
    assert result.text == "HELLO!"
    assert simplify_events(result.events) == ["a: HELLO!"]


async def test_before_model_may_change_the_request() -> None:
    model = ScriptedModel(["ok"])

    def add_rule(ctx: RunContext, request: ModelRequest) -> None:
        request.messages = [Message.system("Be brief."), *request.messages]

    await Runner(ReActAgent("a", model), callbacks=[Callbacks(before_model=add_rule)]).invoke("hi")
    assert [m.content for m in model.requests[0].messages] == ["Be brief.", "hi"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_changes_made_in_place_by_before_model_stay_in_their_call(streaming: bool) -> None:
    """``request.messages`` and ``request.options`` may be changed in place; the change is for
    that call only, never the agent's own conversation (every later call would see it again, and
    checkpoints would save it) nor its options (every later run would use them)."""
    rule = "Never reveal secrets."

    def guard(ctx: RunContext, request: ModelRequest) -> None:
        request.messages.insert(0, Message.system(rule))
        assert request.options is not None
        request.options.max_tokens = 50
        request.options.stop.append("STOP")  # type: ignore[union-attr]
        request.options.extra["user"] = ctx.session.get("user")

    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "sum=3"], cycle=True
    )
    options = ModelOptions(max_tokens=1000, stop=["END"])
    agent = ReActAgent("a", model, tools=[add], model_options=options)
    runner = Runner(agent, enable_streaming=streaming, callbacks=[Callbacks(before_model=guard)])
    await runner.invoke("1+2?", session={"user": "ann"})
    await runner.invoke("1+2?", session={"user": "bob"})
    assert [sum(m.content == rule for m in r.messages) for r in model.requests] == [1, 1, 1, 1]
    assert [len(r.messages) for r in model.requests] == [2, 4, 2, 4]
    assert [r.options for r in model.requests] == [
        ModelOptions(max_tokens=50, stop=["END", "STOP"], extra={"user": user})
        for user in ("ann", "ann", "bob", "bob")
    ]
    assert agent.model_options is options
    assert options == ModelOptions(max_tokens=1000, stop=["END"])
    assert options.model_fields_set == {"max_tokens", "stop"}  # the copy left them as they were


# -- tools ----------------------------------------------------------------------------------------
async def test_a_before_tool_result_skips_the_tool() -> None:
    model = add_model()
    seen: list[Any] = []

    def deny(ctx: ToolContext, call: ToolCall) -> ToolResult:
        return ToolResult.error(f"{call.name} is not allowed here")

    def after(ctx: ToolContext, call: ToolCall, result: str | ToolResult) -> None:
        seen.append(result)

    runner = Runner(
        ReActAgent("a", model, tools=[add]),
        callbacks=[
            Callbacks(before_tool=deny),
            Callbacks(before_tool=lambda c, k: seen.append("no")),
            Callbacks(after_tool=after),
        ],
    )
    await runner.invoke("x")
    assert ADDED == []  # the tool never ran
    assert seen == [ToolResult.error("add is not allowed here")]  # later before_tool skipped too
    tool_message = model.requests[1].messages[-1]
    assert tool_message.content == "Error: add is not allowed here"
    assert tool_message.metadata.get("is_error") is True


async def test_a_before_tool_edits_the_arguments_the_tool_runs_with_not_the_models_call() -> None:
    # Google ADK's before_tool_callback edits ``args`` in place and returns None (its docs'
    # example): the tool runs with the edit, while the function call the model made stays as it
    # was in the events and the history (Google ADK hands the callback a deep copy). Here the
    # callback assigns ``call.arguments``; the edit reached the tool but also rewrote the call
    # recorded in the reply's event, the history the model read next and the checkpoint.
    seen: list[str] = []

    def double_b(ctx: ToolContext, call: ToolCall) -> None:
        args = json.loads(call.arguments)
        args["b"] *= 2
        call.arguments = json.dumps(args)

    def after(ctx: ToolContext, call: ToolCall, result: str | ToolResult) -> None:
        seen.append(call.arguments)  # the call as it ran, as Google ADK's after_tool args

    for callbacks in ([Callbacks(before_tool=double_b, after_tool=after)], []):
        own = [] if callbacks else [Callbacks(before_tool=double_b, after_tool=after)]
        ADDED.clear()
        seen.clear()
        model = add_model()
        runner = Runner(ReActAgent("a", model, tools=[add], callbacks=own), callbacks=callbacks)
        result = await runner.invoke("x")
        assert ADDED == [(1, 4)]  # the tool ran with the edit
        assert seen == ['{"a": 1, "b": 4}']
        (reply,) = [e.message for e in result.events if e.message and e.message.tool_calls]
        assert reply.tool_calls[0].arguments == '{"a": 1, "b": 2}'  # the model's call, kept
        called = model.requests[1].messages[-2].tool_calls[0]
        assert (called.name, called.arguments) == ("add", '{"a": 1, "b": 2}')
        assert model.requests[1].messages[-1].content == "5"


async def test_after_tool_sees_a_raising_tools_error_result_and_may_replace_it() -> None:
    # Google ADK's on_tool_error_callback(tool, args, tool_context, error) returns a dict the
    # model reads instead of the error; here an after_tool gets the error result (is_error) and
    # may replace it, as tracing.md ("after each tool call") and openai_agents.md ("an after_tool
    # callback can rewrite it") say. A tool that raised skipped every after_tool: the error went
    # to the model as the executor wrote it, and the callback never knew.
    seen: list[tuple[str, str | ToolResult]] = []

    @tool
    def lookup(city: str) -> str:
        """Look a city up."""
        if city == "Atlantis":
            raise ToolError("no such city")
        if city == "Mars":
            raise ConnectionError("provider down")
        return "found"

    def recover(ctx: ToolContext, call: ToolCall, result: str | ToolResult) -> Any:
        seen.append((call.id, result))
        if isinstance(result, ToolResult) and result.is_error and "provider down" in result.content:
            return {"status": "unavailable", "retry": "later"}
        return None

    calls = [
        tool_call("lookup", {"city": "Atlantis"}, id="c1"),
        tool_call("lookup", {"city": "Mars"}, id="c2"),
        tool_call("lookup", {"city": "Oslo"}, id="c3"),
    ]
    for own in (True, False):  # the agent's own after_tool, and a runner's
        seen.clear()
        model = ScriptedModel([Reply(tool_calls=calls), "done"])
        callbacks = [Callbacks(after_tool=recover)]
        agent = ReActAgent("a", model, tools=[lookup], callbacks=callbacks if own else [])
        await Runner(agent, callbacks=[] if own else callbacks).invoke("x")
        assert sorted(seen, key=lambda item: item[0]) == [
            ("c1", ToolResult.error("no such city")),
            ("c2", ToolResult.error("tool 'lookup' failed: ConnectionError: provider down")),
            ("c3", "found"),
        ]
        read = {m.tool_call_id: m for m in model.requests[1].messages if m.role == "tool"}
        assert read["c1"].content == "Error: no such city"
        assert read["c1"].metadata.get("is_error") is True
        assert read["c2"].content == '{"status":"unavailable","retry":"later"}'
        assert read["c3"].content == "found"


async def test_an_after_tool_assigning_the_arguments_leaves_the_models_call() -> None:
    # after_tool is given the call too: one that assigns ``call.arguments`` (after the tool ran)
    # edits its copy, as a before_tool does, whether it is the runner's or the agent's own and
    # whatever other callbacks the runner has; the reply's event and the history the model reads
    # next keep the call it made.
    def scrub(ctx: ToolContext, call: ToolCall, result: str | ToolResult) -> None:
        call.arguments = "{}"

    def no_model(ctx: RunContext, request: ModelRequest) -> None:
        return None

    for callbacks, own in (
        ([Callbacks(after_tool=scrub)], []),
        ([], [Callbacks(after_tool=scrub)]),
        ([Callbacks(before_model=no_model)], [Callbacks(after_tool=scrub)]),
    ):
        ADDED.clear()
        model = add_model()
        runner = Runner(ReActAgent("a", model, tools=[add], callbacks=own), callbacks=callbacks)
        result = await runner.invoke("x")
        assert ADDED == [(1, 2)]
        (reply,) = [e.message for e in result.events if e.message and e.message.tool_calls]
        assert reply.tool_calls[0].arguments == '{"a": 1, "b": 2}'
        called = model.requests[1].messages[-2].tool_calls[0]
        assert (called.name, called.arguments) == ("add", '{"a": 1, "b": 2}')
        assert model.requests[1].messages[-1].content == "3"


class _Doubler:
    """Callbacks as an object with a method of the hook's name (not a ``Callbacks``)."""

    def before_tool(self, ctx: ToolContext, call: ToolCall) -> None:
        call.arguments = json.dumps({"a": 10, "b": 2})


def _worker_runs(own: list[Any], model: ScriptedModel) -> list[Agent]:
    """The agent ``own`` belongs to, reached each way an agent's tool calls can run: a workflow's
    step, inside an AgentTool, a Supervisor's worker."""
    from prebuilt import Supervisor

    def worker() -> ReActAgent:
        return ReActAgent("w", model, tools=[add], callbacks=own, description="adds")

    outer = ScriptedModel([Reply(tool_calls=[tool_call("w", {"request": "go"})]), "ok"])
    boss = ScriptedModel(
        [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "w"})]), "fin"]
    )
    return [
        SequentialAgent("s", [worker()]),
        ReActAgent("outer", outer, tools=[AgentTool(worker())]),
        Supervisor(ReActAgent("boss", boss), [worker()]),
    ]


@pytest.mark.parametrize("where", ["workflow step", "agent tool", "supervisor worker"])
@pytest.mark.parametrize("given", [Callbacks(before_tool=_Doubler().before_tool), _Doubler()])
async def test_an_agents_own_before_tool_edit_runs_and_leaves_the_models_call_wherever_it_runs(
    where: str, given: Any
) -> None:
    # The call is copied for the callbacks only where tool callbacks run for it (a9031cd): an
    # agent's own, given as Callbacks or as an object with methods, however the agent is reached.
    model = add_model()
    index = ["workflow step", "agent tool", "supervisor worker"].index(where)
    await Runner(_worker_runs([given], model)[index]).invoke("x")
    assert ADDED == [(10, 2)]
    (called,) = model.requests[1].messages[-2].tool_calls
    assert json.loads(called.arguments) == {"a": 1, "b": 2}
    assert model.requests[1].messages[-1].content == "12"


async def test_after_tool_replaces_the_result() -> None:
    model = add_model()

    async def redact(ctx: ToolContext, call: ToolCall, result: str | ToolResult) -> str:
        return (
            f"<{result}> for {ctx.agent_name if hasattr(ctx, 'agent_name') else ctx.run_path[-1]}"
        )

    runner = Runner(ReActAgent("a", model, tools=[add]), callbacks=[Callbacks(after_tool=redact)])
    result = await runner.invoke("x")
    assert ADDED == [(1, 2)]
    assert model.requests[1].messages[-1].content == "<3> for a"
    assert "a: [tool add] <3> for a" in simplify_events(result.events)


class _Refusal(BaseModel):
    status: str
    reason: str


async def test_tool_callbacks_may_answer_with_a_dict_or_a_model_sent_as_json() -> None:
    # Google ADK's before/after tool callbacks return a dict as the tool's response; a port's
    # cache or guardrail keeps that shape, and the model reads it as JSON, as a tool's own dict.
    model = add_model()
    seen: list[Any] = []

    def cached(ctx: ToolContext, call: ToolCall) -> dict[str, Any]:
        return {"result": 3, "cached": True}

    def after(ctx: ToolContext, call: ToolCall, result: str | ToolResult) -> None:
        seen.append(result)

    runner = Runner(
        ReActAgent("a", model, tools=[add]),
        callbacks=[Callbacks(before_tool=cached), Callbacks(after_tool=after)],
    )
    await runner.invoke("x")
    assert ADDED == []
    assert seen == ['{"result":3,"cached":true}']  # later callbacks see the JSON text
    assert model.requests[1].messages[-1].content == '{"result":3,"cached":true}'

    model = add_model()

    def refuse(ctx: ToolContext, call: ToolCall, result: str | ToolResult) -> _Refusal:
        return _Refusal(status="refused", reason=f"{result} is over the limit")

    runner = Runner(ReActAgent("a", model, tools=[add]), callbacks=[Callbacks(after_tool=refuse)])
    await runner.invoke("x")
    assert ADDED == [(1, 2)]
    assert model.requests[1].messages[-1].content == (
        '{"status":"refused","reason":"3 is over the limit"}'
    )


async def test_a_tool_callback_returning_another_value_is_a_tool_error_naming_it() -> None:
    model = add_model()
    runner = Runner(
        ReActAgent("a", model, tools=[add]), callbacks=[Callbacks(before_tool=lambda c, k: [1])]
    )
    await runner.invoke("x")
    assert ADDED == []
    answer = model.requests[1].messages[-1].content
    assert "before_tool callback" in answer and "returned list" in answer
    assert "a dict or a pydantic model (sent as JSON), or None" in answer


async def test_a_failing_tool_callback_is_a_tool_error_the_model_sees() -> None:
    model = add_model()

    def explode(ctx: ToolContext, call: ToolCall) -> None:
        raise RuntimeError("policy service down")

    runner = Runner(ReActAgent("a", model, tools=[add]), callbacks=[Callbacks(before_tool=explode)])
    result = await runner.invoke("x")
    assert result.text == "sum=3"
    assert "policy service down" in model.requests[1].messages[-1].content


async def test_tool_callbacks_see_agent_tool_inner_runs_too() -> None:
    log: list[str] = []
    inner = ReActAgent("helper", add_model(), tools=[add], description="Adds.")
    outer = ReActAgent(
        "boss",
        ScriptedModel([Reply(tool_calls=[tool_call("helper", {"request": "1+2"})]), "done"]),
        tools=[AgentTool(inner)],
    )
    callbacks = Callbacks(
        before_tool=lambda ctx, call: log.append(f"{'/'.join(ctx.run_path)} {call.name}") and None,
        before_agent=lambda agent, ctx: log.append(f"agent {agent.name}") and None,
    )
    await Runner(outer, callbacks=[callbacks]).invoke("go")
    assert log == ["agent boss", "boss helper", "agent helper", "helper add"]


# -- events ---------------------------------------------------------------------------------------
async def test_on_event_sees_every_event_the_run_yields_before_the_consumer() -> None:
    seen: list[AgentEvent] = []
    consumed: list[AgentEvent] = []

    def on_event(event: AgentEvent) -> None:
        assert event not in consumed  # before the consumer has it
        seen.append(event)

    inner = ReActAgent("helper", ScriptedModel(["inner"]), description="Helps.")
    outer = ReActAgent(
        "boss",
        ScriptedModel(
            [
                Reply(
                    tool_calls=[
                        tool_call("helper", {"request": "x"}),
                        tool_call("add", {"a": 2, "b": 2}),
                    ]
                ),
                "done",
            ]
        ),
        tools=[AgentTool(inner), add],
    )
    seq = SequentialAgent("seq", [ScriptAgent("intro", "hello"), outer])
    runner = Runner(seq, callbacks=[Callbacks(on_event=on_event)])
    async for event in runner.run("go"):
        consumed.append(event)
    assert len(consumed) == 5  # intro, the tool calls, two results, the answer
    assert [id(e) for e in seen] == [id(e) for e in consumed]  # each once, same objects, same order


async def test_on_event_encoding_a_streaming_event_is_told_where_to_encode_it() -> None:
    # A port's logging callback sends every event as JSON; on_event sees a streaming event
    # before its stream is read, so to_dict refuses it, and the run's error must say where to
    # encode streaming events instead.
    sent: list[dict[str, Any]] = []
    runner = Runner(
        ReActAgent("a", ScriptedModel(["hello"])),
        enable_streaming=True,
        callbacks=[Callbacks(on_event=lambda event: sent.append(event.to_dict()))],
    )
    with pytest.raises(RunError) as failed:
        await runner.invoke("hi")
    assert failed.value.error.type == "ValueError"
    assert "an on_event callback sees the event before its stream is read" in str(failed.value)
    assert [event["error"]["type"] for event in sent] == ["ValueError"]  # only the error went


async def test_on_event_sees_the_error_of_a_failing_root_agent() -> None:
    seen: list[AgentEvent] = []
    runner = Runner(
        ReActAgent("a", ScriptedModel([ConnectionError("down")])),
        callbacks=[Callbacks(on_event=seen.append)],
    )
    with pytest.raises(RunError) as failure:
        await runner.invoke("x")
    assert seen == failure.value.events
    assert seen[-1].error == ErrorInfo("ConnectionError", "down")


async def test_a_failing_before_agent_fails_the_root_agent_with_an_error_event() -> None:
    def refuse(agent: Agent, ctx: RunContext) -> None:
        raise PermissionError("not today")

    runner = Runner(
        ReActAgent("a", ScriptedModel(["x"])), callbacks=[Callbacks(before_agent=refuse)]
    )
    with pytest.raises(RunError, match="not today"):
        await runner.invoke("x")


async def _events_of(runner: Runner, how: str) -> list[AgentEvent]:
    """The events of one run, from ``runner.run`` or collected by ``runner.invoke``."""
    if how == "run":
        return [event async for event in runner.run("go")]
    try:
        return (await runner.invoke("go")).events
    except RunError as failure:
        return failure.events


class _FullDisk(InMemoryCheckpointStore):
    async def put(self, id: str, data: bytes) -> None:
        raise OSError("disk full")


@pytest.mark.parametrize("how", ["run", "invoke"])
@pytest.mark.parametrize("nested", [False, True], ids=["agent", "in a sequence"])
@pytest.mark.parametrize("case", ["transfer", "pause", "unsaved pause", "refused start"])
async def test_on_event_sees_what_the_consumer_gets_including_the_runners_own_events(
    case: str, nested: bool, how: str
) -> None:
    """Also the events the runner makes or completes: the error for a transfer nobody takes, a
    pause with its checkpoint id (set once the checkpoint is saved), the error replacing a pause
    it could not save, and the error of a root agent whose ``before_agent`` refused it."""
    last = act_transfer("nobody") if case == "transfer" else Interrupt("approve?")
    agent = ScriptAgent("a", "hello", last)
    root = SequentialAgent("seq", [agent]) if nested else agent

    def refuse(agent: Agent, ctx: RunContext) -> None:
        if agent is root:
            raise PermissionError("not today")

    def checkpoint_of(event: AgentEvent) -> str | None:
        return event.interrupted.checkpoint_id if event.interrupted is not None else None

    seen: list[tuple[AgentEvent, str | None]] = []
    callbacks = [Callbacks(on_event=lambda event: seen.append((event, checkpoint_of(event))))]
    if case == "refused start":
        callbacks.append(Callbacks(before_agent=refuse))
    store = _FullDisk() if case == "unsaved pause" else None
    events = await _events_of(Runner(root, store, callbacks=callbacks), how)
    assert [id(event) for event, _ in seen] == [id(event) for event in events]
    assert [checkpoint for _, checkpoint in seen] == [checkpoint_of(e) for e in events]
    errors = {"transfer": "TransferError", "unsaved pause": "CheckpointError"}
    errors["refused start"] = "PermissionError"
    if case == "pause":
        assert checkpoint_of(events[-1])
    else:
        assert events[-1].error is not None and events[-1].error.type == errors[case]


@pytest.mark.parametrize("how", ["run", "invoke"])
@pytest.mark.parametrize("kind", ["react", "sequence"])
async def test_a_failing_after_agent_fails_the_run_with_an_error_event(kind: str, how: str) -> None:
    """Also at the root, where no caller is left to turn the exception into an event."""
    agent = ReActAgent("a", ScriptedModel(["hello"], cycle=True))
    root = SequentialAgent("seq", [agent]) if kind == "sequence" else agent
    errors: list[ErrorInfo | None] = []

    def flaky(agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        errors.append(error)
        if agent is root:
            raise ConnectionError("metrics backend down")

    seen: list[AgentEvent] = []
    runner = Runner(root, callbacks=[Callbacks(after_agent=flaky, on_event=seen.append)])
    events = await _events_of(runner, how)
    assert simplify_events(events) == [
        "a: hello",
        f"{root.name}: [error metrics backend down]",
    ]
    assert events[-1].error == ErrorInfo("ConnectionError", "metrics backend down")
    assert events[-1].run_path == (root.name,) and seen == events
    assert errors[-1] is None  # the agent itself ended well
    if how == "invoke":
        with pytest.raises(RunError, match="metrics backend down") as failure:
            await runner.invoke("go")
        assert isinstance(failure.value.__cause__, ConnectionError)


async def test_a_failing_after_agent_cannot_undo_how_the_run_ended(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An agent that failed keeps its error and a paused run stays paused: the callback's
    exception, with no event left to become, is logged."""

    def flaky(agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        raise ConnectionError("metrics backend down")

    callbacks = [Callbacks(after_agent=flaky)]
    failing = Runner(
        ReActAgent("a", ScriptedModel([RuntimeError("model down")], cycle=True)),
        callbacks=callbacks,
    )
    paused = Runner(ScriptAgent("p", "hello", Interrupt("approve?")), callbacks=callbacks)
    with caplog.at_level(logging.WARNING):
        for how in ("run", "invoke"):
            events = await _events_of(failing, how)
            assert simplify_events(events)[-1] == "a: [error model down]"
            assert [e for e in events if e.error is not None] == events[-1:]
            events = await _events_of(paused, how)
            assert events[-1].interrupted is not None and events[-1].interrupted.checkpoint_id
    logged = [record.exc_info[1] for record in caplog.records if record.exc_info]
    assert [str(exc) for exc in logged] == ["metrics backend down"] * 4


@tool
def _approve(amount: int, ctx: ToolContext) -> str:
    """Ask a person to approve a payment.

    Args:
        amount: How much.
    """
    if ctx.resume is None:
        raise Interrupt({"approve": amount})
    return f"approved: {ctx.resume.data}"


def _paying_somewhere(where: str) -> Agent:
    """A ReActAgent 'payer' whose tool call pauses, reached as ``where`` says."""
    from prebuilt import Supervisor

    def payer() -> ReActAgent:
        model = ScriptedModel([Reply(tool_calls=[tool_call("_approve", {"amount": 5})]), "paid"])
        return ReActAgent("payer", model, tools=[_approve], description="pays")

    if where == "parallel branch":
        return ParallelAgent("flow", [payer(), ReActAgent("other", ScriptedModel(["other"]))])
    if where == "loop step":
        return LoopAgent("flow", [payer()], max_iterations=1)
    if where == "agent tool":
        outer = ScriptedModel([Reply(tool_calls=[tool_call("payer", {"request": "go"})]), "ok"])
        return ReActAgent("outer", outer, tools=[AgentTool(payer())])
    boss = ScriptedModel(
        [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "payer"})]), "fin"]
    )
    return Supervisor(ReActAgent("boss", boss), [payer()])


@pytest.mark.parametrize(
    ("where", "answer"),
    [
        ("parallel branch", "paid"),
        ("loop step", "paid"),
        ("agent tool", "ok"),
        ("supervisor worker", "fin"),
    ],
)
async def test_a_failing_after_agent_of_a_paused_agent_leaves_the_pause_wherever_it_runs(
    where: str, answer: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Review rv11 (of 20b4247, which tested the root and a SequentialAgent step): the agent
    paused, so its failing ``after_agent`` is logged and the pause reaches the caller with its
    checkpoint, however the agent is reached. Before 20b4247 a parallel branch's failed the
    whole run (RunError), and inside an AgentTool the pause was lost: the callback's exception
    replaced the Interrupt, the call became an error result and the run ended without asking."""
    failures = [ConnectionError("metrics backend down")]  # the paused run's only

    def flaky(agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        if agent.name == "payer" and failures:
            raise failures.pop()

    runner = Runner(
        _paying_somewhere(where),
        InMemoryCheckpointStore(),
        callbacks=[Callbacks(after_agent=flaky)],
    )
    with caplog.at_level(logging.WARNING, logger="adk.callbacks"):
        paused = await runner.invoke("pay 5")
    assert paused.interrupt is not None and paused.checkpoint_id is not None
    assert failures == []
    (logged,) = [r for r in caplog.records if r.exc_info]
    assert "'payer', which paused" in logged.getMessage()
    assert str(logged.exc_info[1]) == "metrics backend down"  # type: ignore[index]
    assert (await runner.invoke_resume(paused.checkpoint_id, "yes")).text == answer


@pytest.mark.parametrize("how", ["cancel", "timeout"])
async def test_a_failing_after_agent_cannot_turn_a_cancellation_into_an_error(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A cancelled agent's after_agent runs (its end is in a ``finally``); the callback's
    exception replaced the cancellation in flight, so the cancelled task ended with it and
    ``asyncio.timeout`` raised RunError rather than TimeoutError. Logged, as for an agent that
    failed already: a cancellation is how the run ended."""
    started = asyncio.Event()

    @tool
    async def slow_lookup() -> str:
        """Look something up, slowly."""
        started.set()
        await asyncio.Event().wait()  # until cancelled
        return "found"

    def flaky(agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        raise ConnectionError("metrics backend down")

    model = ScriptedModel([Reply(tool_calls=[tool_call("slow_lookup", {})]), "done"])
    runner = Runner(
        ReActAgent("a", model, tools=[slow_lookup]), callbacks=[Callbacks(after_agent=flaky)]
    )
    with caplog.at_level(logging.WARNING, logger="adk.callbacks"):
        if how == "cancel":
            task = asyncio.ensure_future(runner.invoke("look it up"))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert task.cancelled()
        else:

            async def expire(scope: asyncio.Timeout) -> None:
                await started.wait()
                scope.reschedule(asyncio.get_running_loop().time())  # now

            with pytest.raises(TimeoutError):
                async with asyncio.timeout(None) as scope:
                    expiring = asyncio.ensure_future(expire(scope))
                    await runner.invoke("look it up")
            await expiring
    (logged,) = [r for r in caplog.records if r.name == "adk.callbacks"]
    assert "'a', which was cancelled" in logged.getMessage()
    assert str(logged.exc_info[1]) == "metrics backend down"  # type: ignore[index]


@pytest.mark.parametrize("how", ["run", "invoke"])
@pytest.mark.parametrize("kind", ["agent", "sequence"])
async def test_a_failing_on_event_fails_the_run_but_never_hides_its_last_event(
    kind: str, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``on_event`` that fails on an event fails the run with an error event instead; failing on
    the event that ends the run (an error, a pause) it is logged, and the event still goes out."""
    texts: list[str] = []
    errors: list[ErrorInfo | None] = []

    def naive(event: AgentEvent) -> None:
        texts.append(event.output.message.content)  # type: ignore[union-attr]  # may have none

    def wrap(agent: Agent) -> Agent:
        return SequentialAgent("seq", [agent]) if kind == "sequence" else agent

    callbacks = [Callbacks(on_event=naive, after_agent=lambda a, c, e: errors.append(e))]
    transferring = wrap(ScriptAgent("t", "hello", act_transfer("elsewhere"), "never"))
    events = await _events_of(Runner(transferring, callbacks=callbacks), how)
    assert texts == ["hello"] and errors[-1] == events[-1].error
    assert simplify_events(events) == [
        "t: hello",
        f"{transferring.name}: [error 'NoneType' object has no attribute 'message']",
    ]
    assert events[-1].error is not None and events[-1].error.type == "AttributeError"
    with caplog.at_level(logging.WARNING):
        failing = wrap(ScriptAgent("f", RuntimeError("model down")))
        events = await _events_of(Runner(failing, callbacks=callbacks), how)
    assert simplify_events(events) == ["f: [error model down]"]
    assert "on_event callback failed on the event that ends the run" in caplog.text


@pytest.mark.parametrize("how", ["run", "invoke"])
@pytest.mark.parametrize("kind", ["agent", "sequence"])
@pytest.mark.parametrize("hook", ["before_agent", "after_agent", "on_event"])
async def test_a_callback_raising_cancelled_error_fails_the_run_rather_than_cancelling_its_reader(
    hook: str, kind: str, how: str
) -> None:
    """A callback that awaits something someone else cancelled (or reads a cancelled future's
    result) raises ``CancelledError`` without the run being cancelled. It fails the run like any
    failing callback, with an error event that says so; it used to pass for the cancellation of
    the task reading the run, which nobody had cancelled (found by fault injection)."""
    agent = ReActAgent("a", ScriptedModel(["hello"], cycle=True))
    root = SequentialAgent("seq", [agent]) if kind == "sequence" else agent

    def cancelled() -> asyncio.Future[None]:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        future.cancel()
        return future

    async def on_agent(agent: Agent, ctx: RunContext, *error: ErrorInfo | None) -> None:
        if agent is root:
            await cancelled()

    def on_event(event: AgentEvent) -> None:
        if event.output is not None:
            cancelled().result()

    callbacks = Callbacks(**{hook: on_event if hook == "on_event" else on_agent})
    reader = asyncio.create_task(_events_of(Runner(root, callbacks=[callbacks]), how))
    events = await reader  # not cancelled
    assert events[-1].error is not None and events[-1].error.type == "RuntimeError", events
    assert f"{hook} callback" in events[-1].error.message
    assert "raised CancelledError while the run was not being cancelled" in events[-1].error.message
    assert [e for e in events if e.error is not None] == events[-1:]


async def test_a_callback_cancelled_with_its_run_lets_the_cancellation_through() -> None:
    """The callback's ``CancelledError`` when the run is being cancelled is that cancellation."""
    entered = asyncio.Event()

    async def slow(agent: Agent, ctx: RunContext) -> None:
        entered.set()
        await asyncio.Event().wait()

    runner = Runner(ReActAgent("a", ScriptedModel(["x"])), callbacks=[Callbacks(before_agent=slow)])
    reader = asyncio.create_task(runner.invoke("go"))
    await entered.wait()
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader


# -- streams --------------------------------------------------------------------------------------
async def _stream_texts(runner: Runner, prompt: str = "hi") -> tuple[list[str], list[int]]:
    texts: list[str] = []
    chunk_counts: list[int] = []
    async for event in runner.run(prompt):
        if event.output is not None and event.output.stream is not None:
            chunks = [chunk async for chunk in event.output.stream]
            chunk_counts.append(len(chunks))
            texts.append((await event.output.stream.collect()).content)
    return texts, chunk_counts


async def test_streams_pass_through_live_without_after_model() -> None:
    model = ScriptedModel(["a reply in several chunks"], chunk_size=4)
    log: list[str] = []
    runner = Runner(
        ReActAgent("a", model),
        enable_streaming=True,
        callbacks=[Callbacks(before_model=lambda c, r: log.append(f"stream={r.stream}") and None)],
    )
    texts, counts = await _stream_texts(runner)
    assert texts == ["a reply in several chunks"]
    assert counts[0] > 2 and log == ["stream=True"]


async def test_before_model_reply_and_after_model_replacement_in_a_streaming_run() -> None:
    model = ScriptedModel(["the model's words"], chunk_size=4)
    first = Callbacks(before_model=lambda c, r: Message.assistant("cached words"))
    runner = Runner(ReActAgent("a", model), enable_streaming=True, callbacks=[first])
    assert await _stream_texts(runner) == (["cached words"], [1])
    assert model.requests == []

    upper = Callbacks(after_model=lambda c, r, reply: Message.assistant(reply.content.upper()))
    runner = Runner(ReActAgent("a", model), enable_streaming=True, callbacks=[upper])
    assert await _stream_texts(runner) == (["THE MODEL'S WORDS"], [1])
    assert len(model.requests) == 1 and model.requests[0].stream


async def test_after_model_that_keeps_the_reply_passes_the_original_chunks_on() -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "sum=3"], chunk_size=2
    )
    replies: list[Message] = []
    watch = Callbacks(after_model=lambda c, r, reply: replies.append(reply) and None)
    runner = Runner(ReActAgent("a", model, tools=[add]), enable_streaming=True, callbacks=[watch])
    texts, counts = await _stream_texts(runner)
    assert texts == ["", "sum=3"]
    assert counts == [3, 4]  # tool call in two fragments + final chunk; "sum=3" in 3 + final
    assert [r.tool_calls[0].name if r.tool_calls else r.content for r in replies] == [
        "add",
        "sum=3",
    ]
    assert ADDED == [(1, 2)]


# -- misuse ---------------------------------------------------------------------------------------
def test_bad_callbacks_are_rejected_when_the_runner_is_built() -> None:
    agent = ReActAgent("a", ScriptedModel(["x"]))

    def loose(ctx: Any, request: Any) -> None:
        return None

    with pytest.raises(TypeError, match=r"Callbacks\(before_model=fn\)"):
        Runner(agent, callbacks=[loose])
    with pytest.raises(TypeError, match="not classes"):
        Runner(agent, callbacks=[Callbacks])
    with pytest.raises(TypeError, match="not a callbacks object"):
        Runner(agent, callbacks=[object()])

    async def slow_event(event: AgentEvent) -> None:
        return None

    with pytest.raises(TypeError, match=r"on_event .* must be a plain function"):
        Runner(agent, callbacks=[Callbacks(on_event=slow_event)])
    with pytest.raises(TypeError, match="needs a function"):
        Callbacks(before_tool="nope")  # type: ignore[arg-type]


async def test_wrong_return_values_fail_clearly() -> None:
    runner = Runner(
        ReActAgent("a", ScriptedModel(["x"])),
        callbacks=[Callbacks(before_model=lambda c, r: "just text")],
    )
    with pytest.raises(RunError, match=r"before_model callback .* returned str; return a Message"):
        await runner.invoke("hi")
    # A before_agent value that cannot be an agent's answer (a count, as a callback that only
    # observes may return by accident) is refused rather than ignored, and so is any value from
    # after_agent, which only observes. (A str or a Message skips the agent: test_agent_callbacks.)
    steps = SequentialAgent("seq", [ReActAgent("a", ScriptedModel(["x"]))])
    count = Callbacks(before_agent=lambda agent, ctx: 3 if agent.name == "a" else None)
    with pytest.raises(RunError, match=r"before_agent callback .* returned int; return None"):
        await Runner(steps, callbacks=[count]).invoke("hi")
    after = Callbacks(after_agent=lambda agent, ctx, error: "x" if agent.name == "a" else None)
    with pytest.raises(RunError, match="after_agent callbacks only observe"):
        await Runner(steps, callbacks=[after]).invoke("hi")


def test_a_runner_without_callbacks_or_tracing_has_no_hooks() -> None:
    agent = ReActAgent("a", ScriptedModel(["x"]))
    assert Runner(agent)._hooks is None
    assert Runner(agent, callbacks=[Callbacks()])._hooks is None  # nothing overridden
    assert Runner(agent, callbacks=[Callbacks(on_event=print)])._hooks is not None
