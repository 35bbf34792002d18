"""Callbacks given to an agent (``ReActAgent(callbacks=...)`` and the others) and a
``before_agent`` that skips its agent: scope (this agent's own calls only), order against the
runner's callbacks, the skipped agent's answer in every composite, ``output_key`` and
``output_schema``, pause and resume from a real SQLite checkpoint, tracing, and clear errors."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import add, calculator
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import adk
from adk import (
    AgentTool,
    Interrupt,
    LoopAgent,
    Message,
    ParallelAgent,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    ToolCall,
    ToolContext,
    with_sub_agents,
)
from adk.callbacks import Callbacks, ModelRequest
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import (
    OutputSchemaError,
    PlanExecute,
    ReActAgent,
    Supervisor,
    new_executor,
    new_planner,
    new_replanner,
)

ONE_TOOL_CALL = [
    "before_agent",
    "before_model",
    "after_model",
    "before_tool",
    "after_tool",
    "before_model",
    "after_model",
    "after_agent",
]
"""The hooks an agent's callbacks see, in order, for a run that calls one tool and answers."""


def add_model(cycle: bool = False) -> ScriptedModel:
    script = [Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "sum=3"]
    return ScriptedModel(script, cycle=cycle)


class AgentLog(Callbacks):
    """Records ``(tag, hook, agent)`` for every agent hook it sees, into a shared list."""

    def __init__(self, tag: str, seen: list[tuple[str, str, str]]) -> None:
        super().__init__()
        self.tag = tag
        self.seen = seen

    def before_agent(self, agent: Any, ctx: RunContext) -> None:
        self.seen.append((self.tag, "before_agent", agent.name))

    def after_agent(self, agent: Any, ctx: RunContext, error: Any) -> None:
        self.seen.append((self.tag, "after_agent", agent.name))


class Log(AgentLog):
    """``AgentLog`` and every model and tool hook too."""

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> None:
        self.seen.append((self.tag, "before_model", ctx.agent_name))

    def after_model(self, ctx: RunContext, request: ModelRequest, reply: Message) -> None:
        self.seen.append((self.tag, "after_model", ctx.agent_name))

    async def before_tool(self, ctx: ToolContext, call: ToolCall) -> None:
        self.seen.append((self.tag, "before_tool", ctx.agent_name))

    def after_tool(self, ctx: ToolContext, call: ToolCall, result: Any) -> None:
        self.seen.append((self.tag, "after_tool", ctx.agent_name))


def skipping(name: str, answer: Any) -> Callbacks:
    """A before_agent that answers for the agent named ``name`` with ``answer``."""
    return Callbacks(before_agent=lambda agent, ctx: answer if agent.name == name else None)


def texts(result: adk.RunResult) -> list[tuple[str, str]]:
    return [(e.agent_name, e.message.content) for e in result.events if e.message is not None]


# -- scope and order -------------------------------------------------------------------------------
async def test_an_agents_callbacks_see_its_own_calls_only() -> None:
    # ``a`` calls a tool and an AgentTool whose nested agent calls the model, then transfers to its
    # sub-agent ``c``; ``b`` runs after them. Only ``a``'s own calls reach its callbacks.
    seen: list[tuple[str, str, str]] = []
    inner = ReActAgent("inner", ScriptedModel(["inner says hi"]), description="Says hi.")
    a_model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]),
            Reply(tool_calls=[tool_call("inner", {"request": "hi"})]),
            Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "c"})]),
        ]
    )
    c = ReActAgent("c", add_model(), tools=[add])
    a = ReActAgent(
        "a", a_model, tools=[add, AgentTool(inner)], sub_agents=[c], callbacks=[Log("a", seen)]
    )
    b = ReActAgent("b", ScriptedModel(["b done"]))
    result = await Runner(SequentialAgent("seq", [a, b])).invoke("go")
    assert result.text == "b done"
    assert seen == [
        ("a", "before_agent", "a"),
        ("a", "before_model", "a"),
        ("a", "after_model", "a"),
        ("a", "before_tool", "a"),
        ("a", "after_tool", "a"),
        ("a", "before_model", "a"),
        ("a", "after_model", "a"),
        ("a", "before_tool", "a"),  # the AgentTool's call is a's; its nested run is not
        ("a", "after_tool", "a"),
        ("a", "before_model", "a"),
        ("a", "after_model", "a"),
        ("a", "before_tool", "a"),  # the transfer; c's calls are c's own
        ("a", "after_tool", "a"),
        ("a", "after_agent", "a"),
    ]
    assert ("c", "sum=3") in texts(result)


async def test_a_transfer_targets_own_callbacks_run_for_it() -> None:
    # A ReActAgent reached by a transfer runs as its loop (inside the router's flow), which
    # hands on the agent's callbacks; the router's calls do not reach them.
    seen: list[tuple[str, str, str]] = []
    target = ReActAgent("target", add_model(), tools=[add], callbacks=[Log("own", seen)])
    to_target = Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "target"})])
    router = ReActAgent("router", ScriptedModel([to_target]), sub_agents=[target])
    assert (await Runner(router).invoke("go")).text == "sum=3"
    assert {agent for _, _, agent in seen} == {"target"}
    assert len(seen) == 8  # its start and end, two model calls and a tool call
    assert (seen[0][1], seen[-1][1]) == ("before_agent", "after_agent")


async def test_runner_callbacks_run_before_the_agents_own() -> None:
    seen: list[tuple[str, str, str]] = []
    agent = ReActAgent("a", add_model(), tools=[add], callbacks=[Log("own", seen)])
    result = await Runner(agent, callbacks=[Log("runner", seen)]).invoke("go")
    assert result.text == "sum=3"
    hooks = [hook for _, hook, _ in seen]
    tags = [tag for tag, _, _ in seen]
    # Each hook: the runner's (Google ADK's plugins), then the agent's own.
    assert tags == ["runner", "own"] * (len(seen) // 2)
    assert hooks[::2] == hooks[1::2]
    assert hooks[::2] == ONE_TOOL_CALL


async def test_a_runner_short_circuit_skips_the_agents_own_before_callbacks() -> None:
    seen: list[str] = []

    def runner_before_model(ctx: RunContext, request: ModelRequest) -> Message:
        seen.append("runner before_model")
        return Message.assistant("from the runner")

    def own_before_model(ctx: RunContext, request: ModelRequest) -> Message:
        seen.append("own before_model")
        return Message.assistant("from the agent")

    def own_after_model(ctx: RunContext, request: ModelRequest, reply: Message) -> Message:
        seen.append(f"own after_model sees {reply.content!r}")
        return Message.assistant(reply.content + "!")

    model = ScriptedModel(["never"])
    own = Callbacks(before_model=own_before_model, after_model=own_after_model)
    agent = ReActAgent("a", model, callbacks=[own])
    runner = Runner(agent, callbacks=[Callbacks(before_model=runner_before_model)])
    result = await runner.invoke("go")
    # The runner's answer stops the agent's before_model and the model; every after_model then
    # runs on it, the agent's too (after_* chain: adk.callbacks).
    assert result.text == "from the runner!"
    assert seen == ["runner before_model", "own after_model sees 'from the runner'"]
    assert model.calls == 0
    # Without the runner's, the agent's own answers.
    assert (await Runner(agent).invoke("go")).text == "from the agent!"


async def test_agent_callbacks_run_without_runner_hooks_and_for_each_object() -> None:
    # A runner with no callbacks and no tracing has no hooks; the agent's own still run, plain
    # and async, and a Callbacks(...) of functions as well as a duck-typed object.
    seen: list[str] = []

    class Duck:
        async def before_tool(self, ctx: ToolContext, call: ToolCall) -> str:
            seen.append("duck before_tool")
            return "4"  # answers instead of the tool

    agent = ReActAgent(
        "a",
        add_model(),
        tools=[add],
        callbacks=[Callbacks(after_tool=lambda ctx, call, result: seen.append(result)), Duck()],
    )
    runner = Runner(agent)
    assert runner._hooks is None
    result = await runner.invoke("go")
    assert seen == ["duck before_tool", "4"]
    assert [e.message.content for e in result.events if e.message is not None] == [
        "",
        "4",
        "sum=3",
    ]


@pytest.mark.parametrize("runner_hooks", ["on_event", "tracing"])
async def test_agent_callbacks_under_a_runner_with_hooks_of_its_own(runner_hooks: str) -> None:
    # The runner has hooks that need no frame per agent (on_event only) or that have them
    # (tracing): either way a's own callbacks are found for a's calls, and b's calls skip them.
    seen: list[tuple[str, str, str]] = []
    events: list[str] = []
    a = ReActAgent("a", add_model(cycle=True), tools=[add], callbacks=[Log("a", seen)])
    b = ReActAgent("b", add_model(cycle=True), tools=[add])
    if runner_hooks == "on_event":
        runner = Runner(
            SequentialAgent("seq", [a, b]),
            callbacks=[Callbacks(on_event=lambda e: events.append(e.agent_name))],
        )
    else:
        runner = Runner(SequentialAgent("seq", [a, b]), tracer_provider=TracerProvider())
    assert runner._hooks is not None
    for _ in range(2):  # the second run finds the runner's hooks switched to frames already
        seen.clear()
        assert (await runner.invoke("go")).text == "sum=3"
        assert {agent for _, _, agent in seen} == {"a"}
        assert len(seen) == 8


async def test_an_action_agents_own_callbacks_see_its_calls() -> None:
    seen: list[tuple[str, str, str]] = []
    agent = calculator(callbacks=[Log("own", seen)])
    assert (await Runner(agent).invoke("1+2?")).text == "sum=3"
    assert [hook for _, hook, _ in seen] == ONE_TOOL_CALL


async def test_a_failing_agent_callback_fails_that_agent() -> None:
    def broken(ctx: RunContext, request: ModelRequest) -> None:
        raise RuntimeError("callback broke")

    a = ReActAgent("a", ScriptedModel(["a"]), callbacks=[Callbacks(before_model=broken)])
    b = ReActAgent("b", ScriptedModel(["b"]))
    with pytest.raises(RunError, match="callback broke") as caught:
        await Runner(SequentialAgent("seq", [a, b])).invoke("go")
    assert caught.value.event.agent_name == "a"

    async def broken_start(agent: Any, ctx: RunContext) -> None:
        raise ValueError("start broke")

    a = ReActAgent("a", ScriptedModel(["a"]), callbacks=[Callbacks(before_agent=broken_start)])
    with pytest.raises(RunError, match="start broke"):
        await Runner(SequentialAgent("seq", [a, b])).invoke("go")


def test_agent_callbacks_are_checked_where_they_are_given() -> None:
    with pytest.raises(TypeError, match="on_event is runner-wide"):
        ReActAgent("a", ScriptedModel(), callbacks=[Callbacks(on_event=print)])
    with pytest.raises(TypeError, match="callbacks must be a list"):
        ReActAgent("a", ScriptedModel(), callbacks="log")
    with pytest.raises(TypeError, match="not a callbacks object"):
        ReActAgent("a", ScriptedModel(), callbacks=[object()])
    with pytest.raises(TypeError, match=r"makes no model or tool calls .* not before_model"):
        SequentialAgent("seq", [], callbacks=[Callbacks(before_model=lambda c, r: None)])
    # Nothing to run: nothing kept.
    assert ReActAgent("a", ScriptedModel(), callbacks=[Callbacks()])._adk_callbacks is None


async def test_workflow_callbacks_see_the_workflow_only() -> None:
    seen: list[tuple[str, str, str]] = []
    inner = SequentialAgent("inner", [ReActAgent("a", ScriptedModel(["a"], cycle=True))])
    loop = LoopAgent("loop", [inner], max_iterations=2, callbacks=[AgentLog("loop", seen)])
    branch = ReActAgent("p", ScriptedModel(["p"]))
    par = ParallelAgent("par", [branch], callbacks=[AgentLog("par", seen)])
    seq = SequentialAgent("seq", [loop, par], callbacks=[AgentLog("seq", seen)])
    await Runner(seq).invoke("go")
    assert seen == [
        ("seq", "before_agent", "seq"),
        ("loop", "before_agent", "loop"),
        ("loop", "after_agent", "loop"),
        ("par", "before_agent", "par"),
        ("par", "after_agent", "par"),
        ("seq", "after_agent", "seq"),
    ]


# -- skipping an agent -----------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["runner", "agent"])
async def test_a_skipped_step_answers_for_itself_in_a_sequence(where: str) -> None:
    seen: list[tuple[str, str, str]] = []
    model = ScriptedModel(["never"])
    skip = skipping("a", "cached answer")
    own = [skip, Log("own", seen)] if where == "agent" else [Log("own", seen)]
    a = ReActAgent("a", model, output_key="a_out", callbacks=own)
    b = ReActAgent("b", ScriptedModel(lambda messages: f"b read {messages[-1].content!r}"))
    runner = Runner(SequentialAgent("seq", [a, b]), callbacks=[skip] if where == "runner" else [])
    result = await runner.invoke("go")
    assert model.calls == 0
    # b reads a's answer as another agent's, as it would the model's.
    assert texts(result) == [
        ("a", "cached answer"),
        ("b", "b read 'For context: [a] said: cached answer.'"),
    ]
    assert result.session["a_out"] == "cached answer"  # output_key written, as Google ADK does
    # The answer stops the before_agent callbacks after it (a runner's, the agent's own too);
    # after_agent runs, the agent having finished.
    assert seen == [("own", "after_agent", "a")]


async def test_a_skipped_agent_in_each_composite() -> None:
    skip = skipping("a", Message.assistant("skipped"))

    def a() -> ReActAgent:
        return ReActAgent("a", ScriptedModel([RuntimeError("a ran")]), description="Answers.")

    # A loop: each iteration's start asks again.
    loop = LoopAgent("loop", [a()], max_iterations=2)
    result = await Runner(loop, callbacks=[skip]).invoke("go")
    assert texts(result) == [("a", "skipped"), ("a", "skipped")]
    # Parallel branches.
    par = ParallelAgent("par", [a(), ReActAgent("b", ScriptedModel(["b"]))])
    result = await Runner(par, callbacks=[skip]).invoke("go")
    assert sorted(texts(result)) == [("a", "skipped"), ("b", "b")]
    # As the root.
    result = await Runner(a(), callbacks=[skip]).invoke("go")
    assert texts(result) == [("a", "skipped")]
    # An AgentTool: the answer is the tool's result.
    caller = ReActAgent(
        "caller",
        ScriptedModel(
            [Reply(tool_calls=[tool_call("a", {"request": "hi"})]), lambda m: m[-1].content]
        ),
        tools=[AgentTool(a())],
    )
    result = await Runner(caller, callbacks=[skip]).invoke("go")
    assert result.text == "skipped"
    # A transfer target in a flow.
    router = ReActAgent(
        "router",
        ScriptedModel([Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "a"})])]),
    )
    result = await Runner(with_sub_agents(router, [a()]), callbacks=[skip]).invoke("go")
    assert result.text == "skipped" and result.events[-1].agent_name == "a"


async def test_a_skipped_supervisor_worker_still_reports_back() -> None:
    boss = ReActAgent(
        "boss",
        ScriptedModel(
            [
                Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "worker"})]),
                lambda messages: f"boss got {messages[-1].content!r}",
            ]
        ),
    )
    worker = ReActAgent(
        "worker", ScriptedModel([RuntimeError("ran")]), callbacks=[skipping("worker", "done early")]
    )
    result = await Runner(Supervisor(boss, [worker])).invoke("go")
    assert result.text == "boss got 'For context: [worker] said: done early.'"


async def test_a_skipped_planner_hands_over_its_answer_as_the_plan() -> None:
    plan = '{"steps": ["say hi"]}'
    planner = new_planner(ScriptedModel([RuntimeError("planned")]))
    executor = new_executor(ScriptedModel(["said hi"]))
    replanner = new_replanner(ScriptedModel(["All done."]))
    plan_execute = PlanExecute(planner, executor, replanner)
    result = await Runner(plan_execute, callbacks=[skipping("planner", plan)]).invoke("go")
    assert ("planner", plan) in texts(result)
    assert ("executor", "said hi") in texts(result)
    assert result.text == "All done."


class Answer(BaseModel):
    city: str
    days: int


@pytest.mark.parametrize(
    "given",
    ['{"city": "Oslo", "days": 2}', {"city": "Oslo", "days": 2}, Answer(city="Oslo", days=2)],
    ids=["json", "dict", "instance"],
)
async def test_a_skipped_agent_with_an_output_schema(given: Any) -> None:
    agent = ReActAgent(
        "a",
        ScriptedModel([RuntimeError("ran")]),
        description="Plans a trip.",
        output_schema=Answer,
        output_key="trip",
        callbacks=[skipping("a", given)],
    )
    result = await Runner(agent).invoke("go")
    assert result.output == Answer(city="Oslo", days=2)  # the instance, as the model's answer
    assert Answer.model_validate_json(result.text) == result.output
    assert Answer.model_validate_json(result.session["trip"]) == result.output
    # As an AgentTool's result, the answer is the instance's JSON (agent_tool).
    caller = ReActAgent(
        "caller",
        ScriptedModel(
            [Reply(tool_calls=[tool_call("a", {"request": "hi"})]), lambda m: m[-1].content]
        ),
        tools=[AgentTool(agent)],
    )
    assert Answer.model_validate_json((await Runner(caller).invoke("go")).text) == result.output


async def test_answers_an_agent_cannot_take_fail_it() -> None:
    seen: list[Any] = []
    after = Callbacks(after_agent=lambda agent, ctx, error: seen.append(error))
    schema_agent = ReActAgent(
        "a", ScriptedModel(), output_schema=Answer, callbacks=[skipping("a", "not json"), after]
    )
    with pytest.raises(RunError, match="does not match Answer") as caught:
        await Runner(schema_agent).invoke("go")
    assert isinstance(caught.value.__cause__, OutputSchemaError)
    assert seen[-1] is not None and seen[-1].type == "OutputSchemaError"
    plain = ReActAgent("a", ScriptedModel(), callbacks=[skipping("a", {"x": 1})])
    with pytest.raises(RunError, match="only an agent with an output_schema takes"):
        await Runner(plain).invoke("go")
    wrong_role = ReActAgent("a", ScriptedModel(), callbacks=[skipping("a", Message.user("hi"))])
    with pytest.raises(RunError, match="an agent's answer is an assistant message"):
        await Runner(wrong_role).invoke("go")
    calling = Message.assistant("", tool_calls=[ToolCall(id="1", name="add", arguments="{}")])
    calls = ReActAgent("a", ScriptedModel(), callbacks=[skipping("a", calling)])
    with pytest.raises(RunError, match="an answer that skips the agent calls none"):
        await Runner(calls).invoke("go")


async def test_a_skipped_workflow_runs_no_step() -> None:
    def seq() -> SequentialAgent:
        step = ReActAgent("step", ScriptedModel([RuntimeError("ran")]))
        return SequentialAgent("seq", [step], callbacks=[skipping("seq", "nothing to do")])

    # As a step of another workflow, and as the root (where its step runner drives itself).
    result = await Runner(SequentialAgent("outer", [seq()])).invoke("go")
    assert texts(result) == [("seq", "nothing to do")]
    result = await Runner(seq()).invoke("go")
    assert texts(result) == [("seq", "nothing to do")]
    events = [e async for e in Runner(seq()).run("go")]
    assert [(e.agent_name, e.message.content) for e in events if e.message] == [
        ("seq", "nothing to do")
    ]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_skipped_root_through_the_event_stream(streaming: bool) -> None:
    # ``Runner.run`` drives the root itself (not ``invoke``'s path); a flow's root agent takes
    # the answer given for the flow, and does not transfer.
    router = ReActAgent(
        "router",
        ScriptedModel([RuntimeError("ran")]),
        sub_agents=[ReActAgent("x", ScriptedModel([RuntimeError("x ran")]))],
        output_key="said",
    )
    runner = Runner(router, enable_streaming=streaming, callbacks=[skipping("router", "hi")])
    events = [e async for e in runner.run("go")]
    assert [(e.agent_name, e.message.content) for e in events if e.message] == [("router", "hi")]
    flow = with_sub_agents(ReActAgent("root", ScriptedModel([RuntimeError("ran")])), [])
    result = await Runner(flow, callbacks=[skipping("root", "from root")]).invoke("go")
    assert texts(result) == [("root", "from root")]


async def test_a_skip_is_traced_on_the_agents_span() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = ReActAgent("a", ScriptedModel(), callbacks=[skipping("a", "cached")])
    await Runner(agent, tracer_provider=provider).invoke("go")
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == ["invoke_agent a"]  # no chat span: the model was not called
    skipped = [("adk.skipped", {"adk.skipped.by": "before_agent"})]
    assert [(e.name, dict(e.attributes or {})) for e in spans[0].events] == skipped
    # A worker the report-back wrapper runs in place: the one span (the wrapper's) says so too.
    exporter.clear()
    boss = ReActAgent(
        "boss",
        ScriptedModel(
            [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "w"})]), "ok"]
        ),
    )
    worker = ReActAgent("w", ScriptedModel(), callbacks=[skipping("w", "done")])
    await Runner(Supervisor(boss, [worker]), tracer_provider=provider).invoke("go")
    [span] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent w"]
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        *skipped,
        ("adk.transfer", {"adk.transfer.to": "boss"}),  # it still reports back
    ]


# -- pause and resume ------------------------------------------------------------------------------
class Asked:
    """A tool that pauses for a person's answer, counting its runs."""

    def __init__(self) -> None:
        self.runs = 0

        @adk.tool
        def ask(question: str, ctx: ToolContext) -> str:
            """Ask a person."""
            self.runs += 1
            if ctx.resume is None:
                raise Interrupt(question)
            return f"they said {ctx.resume.data}"

        self.tool = ask


def asking(asked: Asked, callbacks: list[Any] | None = None) -> ReActAgent:
    """An agent that asks (and pauses), then answers with what it was told. Its model answers
    from the conversation, so one made again after a restart goes on where the paused one was."""

    def reply(messages: list[Message]) -> Reply | str:
        if messages[-1].role == "tool":
            return messages[-1].content
        return Reply(tool_calls=[tool_call("ask", {"question": "ok?"})])

    return ReActAgent("b", ScriptedModel(reply), tools=[asked.tool], callbacks=callbacks or [])


@pytest.mark.parametrize("workflow", [SequentialAgent, ParallelAgent])
async def test_a_skip_before_a_pause_is_not_run_again_on_resume(
    tmp_path: Path, workflow: type[SequentialAgent | ParallelAgent]
) -> None:
    asked = Asked()
    starts: list[str] = []

    def before_agent(agent: Any, ctx: RunContext) -> str | None:
        starts.append(agent.name)
        return "a skipped" if agent.name == "a" else None

    def runner(store: SQLiteCheckpointStore) -> Runner:
        a = ReActAgent("a", ScriptedModel([RuntimeError("a ran")]))
        seq = workflow("seq", [a, asking(asked)])
        return Runner(seq, store, callbacks=[Callbacks(before_agent=before_agent)])

    store = SQLiteCheckpointStore(tmp_path / "cp.db")
    try:
        paused = await runner(store).invoke("go")
        assert paused.interrupt is not None
        assert ("a", "a skipped") in texts(paused)
        assert sorted(starts) == ["a", "b", "seq"]
        starts.clear()
    finally:
        await store.aclose()
    # Another runner and store, as after a restart: the resume continues with b, whose question
    # was answered; a is neither run nor asked again.
    store = SQLiteCheckpointStore(tmp_path / "cp.db")
    try:
        assert paused.checkpoint_id is not None
        result = await runner(store).invoke_resume(paused.checkpoint_id, "yes")
        assert result.text == "they said yes"
        assert starts == ["seq", "b"]
        assert asked.runs == 2
    finally:
        await store.aclose()


async def test_a_resumed_agent_is_not_skipped_half_way(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # b paused in its tool call. Its before_agent answers when it resumes: b was let run before
    # the pause and waits for the answer, so it is not skipped now (its call would never run and
    # the resume would fail, the checkpoint kept): the value is logged and ignored.
    asked = Asked()
    store = SQLiteCheckpointStore(tmp_path / "cp.db")
    try:
        answers: list[Any] = []

        def before_agent(agent: Any, ctx: RunContext) -> str | None:
            answers.append(ctx.resume is not None)
            return "skip b" if ctx.resume is not None else None

        runner = Runner(asking(asked, [Callbacks(before_agent=before_agent)]), store)
        paused = await runner.invoke("go")
        assert paused.interrupt is not None
        with caplog.at_level(logging.WARNING, logger="adk.callbacks"):
            result = await runner.invoke_resume(paused.checkpoint_id, "yes")
        assert result.text == "they said yes"
        assert answers == [False, True]
        assert asked.runs == 2
        assert "answer is ignored" in caplog.text
    finally:
        await store.aclose()


# Run in a fresh interpreter: whether agents look for callbacks at their start depends on whether
# any agent of the process has been given some (``adk._hooks.agent_callbacks``), which this test
# process's other tests have long done.
_FIRST_CALLBACKS = """
import asyncio

import adk
from adk import AgentEvent, BaseAgent, Message, Runner, SequentialAgent
from adk.callbacks import Callbacks

looked: list[str] = []  # the agents whose start looked for callbacks of their own
seen: list[str] = []  # what their callbacks saw


class Step(BaseAgent):
    @property
    def _adk_callbacks(self):
        looked.append(self.name)
        return self.__dict__.get("own")

    async def run(self, input, ctx):
        yield AgentEvent.of(Message.assistant(self.name))


class GivesLater(Step):
    # Gives the next step callbacks of its own while the run is under way, as an agent made
    # during a run gets them (``callbacks=`` compiles them with ``_agent_callbacks``).
    async def run(self, input, ctx):
        before = Callbacks(before_agent=lambda agent, ctx: seen.append(f"before {agent.name}"))
        later.own = adk.callbacks._agent_callbacks([before], "Step 'later'")
        yield AgentEvent.of(Message.assistant(self.name))


async def main() -> None:
    runner = Runner(SequentialAgent("seq", [Step("one"), Step("two")]))
    assert (await runner.invoke("go")).text == "two"
    print(looked, adk._hooks.agent_callbacks)
    global later
    later = Step("later")
    runner = Runner(SequentialAgent("seq", [GivesLater("gives"), later]))
    assert (await runner.invoke("go")).text == "later"
    print(sorted(set(looked)), seen)


asyncio.run(main())
"""


def test_agent_starts_look_for_callbacks_once_an_agent_of_the_process_has_some() -> None:
    # Until some agent has callbacks of its own, an agent start does not look for any on its
    # agent (issue #8: ~0.5k instructions per start, every step of a workflow). From the first
    # one on it does, in a run already under way too: the step given callbacks mid-run has them
    # (the step that gave them had started before there were any).
    child = subprocess.run(
        [sys.executable, "-c", _FIRST_CALLBACKS],
        cwd=Path(__file__).resolve().parent.parent,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    assert child.stdout.splitlines() == [
        "[] False",
        "['later'] ['before later']",
    ]
