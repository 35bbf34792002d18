"""OpenTelemetry tracing: span trees (ReAct, workflows, parallel branches, AgentTool, wrappers),
GenAI attributes, usage metrics, content capture, errors, streams, and the cost-free path when no
SDK is configured. Spans go to the SDK's in-memory exporter; nothing is mocked."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import re
import subprocess
import sys
import textwrap
from collections import defaultdict
from collections.abc import AsyncIterator, Coroutine, Sequence
from pathlib import Path
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from conftest import ScriptAgent, act_transfer, add, calculator, run_events, wire_model
from mcp_servers.process import closed_port
from openai_server import Call, OpenAIServer
from openai_server import Reply as ServedReply
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import Histogram, MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider, SpanKind, StatusCode
from span_capture import exporter_fixture, provider_fixture  # noqa: F401  (fixtures)

import adk.tracing
from adk import (
    Agent,
    AgentEvent,
    AgentInput,
    AgentTool,
    BaseAgent,
    Interrupt,
    LoopAgent,
    Message,
    ModelOptions,
    ParallelAgent,
    Resources,
    RetryPolicy,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    ToolCall,
    ToolContext,
    ToolResult,
    ToolSpec,
    Usage,
    tool,
    with_sub_agents,
)
from adk.actions import (
    ActionAgent,
    ActionContext,
    InputEvent,
    OutputEvent,
    action,
)
from adk.callbacks import Callbacks
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import decode_checkpoint
from adk.execution import LocalExecutionEnvironment, RecordError
from adk.messages import MessageChunk
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tracing import CAPTURE_CONTENT_ENV
from prebuilt import (
    PlanExecute,
    ReActAgent,
    Supervisor,
    new_executor,
    new_planner,
    new_replanner,
)

REPO = Path(__file__).resolve().parents[1]


# -- fixtures and helpers -------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _no_content_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)


def tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """The spans as an indented outline, children in start order."""
    children: dict[int | None, list[ReadableSpan]] = defaultdict(list)
    ids = {s.context.span_id for s in spans}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children[parent if parent in ids else None].append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in children[parent]:
            lines.append("  " * depth + span.name)
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


def parent_of(span: ReadableSpan, spans: Sequence[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next((s for s in spans if s.context.span_id == span.parent.span_id), None)


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def events_of(span: ReadableSpan) -> list[str]:
    return [e.name for e in span.events]


def add_model(usage: bool = True) -> ScriptedModel:
    """Calls add(1, 2) once, then answers with the sum; with token usage on both turns."""
    first = Usage(input_tokens=10, output_tokens=4, total_tokens=14) if usage else None
    second = Usage(input_tokens=20, output_tokens=6, total_tokens=26) if usage else None
    return ScriptedModel(
        [
            Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2}, id="call_add")], usage=first),
            Reply(text="sum=3", usage=second),
        ]
    )


def _model_of(name: str, script: list[Any]) -> ScriptedModel:
    """A scripted model with its own model and provider name, to tell agents' spans apart."""
    model = ScriptedModel(script, model_name=name)
    model.provider_name = "acme"  # type: ignore[attr-defined]
    return model


def _agent_models(spans: Sequence[ReadableSpan]) -> list[tuple[str, str | None]]:
    """``(agent, gen_ai.request.model)`` of each ``invoke_agent`` span in start order, checking
    that every span naming a model also names its provider, and every other one ``_OTHER`` (the
    attribute is required on them: a workflow's, an agent's without a model)."""
    found: list[tuple[str, str | None]] = []
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        if span.name.startswith("invoke_agent "):
            a = attrs(span)
            model = a.get("gen_ai.request.model")
            assert a.get("gen_ai.provider.name") == ("acme" if model is not None else "_OTHER")
            found.append((a["gen_ai.agent.name"], model))
    return found


# -- the span tree ------------------------------------------------------------------------------
async def test_react_run_with_one_tool_call_gives_the_exact_span_tree(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = ReActAgent("calc", add_model(), tools=[add], description="Adds numbers.")
    result = await Runner(agent, tracer_provider=provider).invoke("1+2?", run_id="conv-42")
    assert result.text == "sum=3"
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent calc",
        "  chat scripted",
        "  execute_tool add",
        "  chat scripted",
    ]
    assert len({s.context.trace_id for s in spans}) == 1
    root = named(spans, "invoke_agent calc")[0]
    assert root.kind == SpanKind.INTERNAL and root.status.status_code == StatusCode.UNSET
    assert attrs(root) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.agent.description": "Adds numbers.",
        "gen_ai.conversation.id": "conv-42",
        "gen_ai.request.model": "scripted",
        "gen_ai.provider.name": "_OTHER",  # the model names no provider
        "adk.run_path": ("calc",),
        # the sum of its two model calls' usage
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 10,
        "adk.agent.outcome": "completed",
    }
    first_chat, second_chat = named(spans, "chat scripted")
    assert first_chat.kind == SpanKind.CLIENT
    assert attrs(first_chat) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.conversation.id": "conv-42",
        "gen_ai.provider.name": "_OTHER",  # required by the conventions: never left out
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 4,
        # ScriptedModel reports a finish reason, as adapters do
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert attrs(second_chat)["gen_ai.usage.input_tokens"] == 20
    (tool_span,) = named(spans, "execute_tool add")
    assert tool_span.kind == SpanKind.INTERNAL
    assert attrs(tool_span) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_add",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two integers.",
        "gen_ai.conversation.id": "conv-42",
    }
    # Children end inside their parent.
    for span in (first_chat, tool_span, second_chat):
        assert root.start_time <= span.start_time <= span.end_time <= root.end_time  # type: ignore[operator]


async def test_request_options_and_provider_name_are_recorded(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel([Message.assistant("ok")])
    model.provider_name = "acme"  # type: ignore[attr-defined]
    options = ModelOptions(temperature=0.25, max_tokens=64, stop=["END"])
    agent = ReActAgent("a", model, model_options=options)
    await Runner(agent, tracer_provider=provider).invoke("hi")
    spans = exporter.get_finished_spans()
    (chat,) = named(spans, "chat scripted")
    assert attrs(chat)["gen_ai.provider.name"] == "acme"
    assert attrs(chat)["gen_ai.request.temperature"] == 0.25
    assert attrs(chat)["gen_ai.request.max_tokens"] == 64
    assert attrs(chat)["gen_ai.request.stop_sequences"] == ("END",)
    assert attrs(named(spans, "invoke_agent a")[0])["gen_ai.provider.name"] == "acme"


async def test_generation_options_passed_through_extra_and_the_output_type_are_recorded(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The conventions' request parameters that ModelOptions has no field for reach the request
    # through ``extra`` (the body as is): they are the call's parameters all the same.
    options = ModelOptions(
        response_format={"name": "answer", "schema": {"type": "object"}},
        extra={
            "top_p": 0.5,
            "top_k": 40,
            "seed": 7,
            "frequency_penalty": 0.1,
            "presence_penalty": 0.2,
            "n": 2,
            "user": "not a parameter the conventions name",
        },
    )
    agent = ReActAgent("a", ScriptedModel(["{}"]), model_options=options)
    await Runner(agent, tracer_provider=provider).invoke("hi")
    (chat,) = named(exporter.get_finished_spans(), "chat scripted")
    recorded = {k: v for k, v in attrs(chat).items() if k.startswith("gen_ai.request.")}
    assert recorded == {
        "gen_ai.request.model": "scripted",
        "gen_ai.request.top_p": 0.5,
        "gen_ai.request.top_k": 40.0,
        "gen_ai.request.seed": 7,
        "gen_ai.request.frequency_penalty": 0.1,
        "gen_ai.request.presence_penalty": 0.2,
        "gen_ai.request.choice.count": 2,
    }
    assert attrs(chat)["gen_ai.output.type"] == "json"


async def test_odd_extra_values_are_not_recorded_as_generation_options(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # One choice is the default (the conventions record the count only when it is not 1); a
    # value of the wrong type is the server's to refuse, not a number to put on the span.
    options = ModelOptions(extra={"n": 1, "seed": "7", "top_p": True, "frequency_penalty": None})
    await Runner(
        ReActAgent("a", ScriptedModel(["ok"]), model_options=options), tracer_provider=provider
    ).invoke("hi")
    (chat,) = named(exporter.get_finished_spans(), "chat scripted")
    assert [k for k in attrs(chat) if k.startswith("gen_ai.request.")] == ["gen_ai.request.model"]
    assert "gen_ai.output.type" not in attrs(chat)


async def test_an_agent_naming_a_model_resource_reports_that_model(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    resources = Resources()
    model = ScriptedModel(["ok"], model_name="gpt-4o-mini")
    model.provider_name = "openai"  # type: ignore[attr-defined]
    resources.add_model("main", model)
    await Runner(ReActAgent("a", "main"), resources=resources, tracer_provider=provider).invoke("x")
    (span,) = named(exporter.get_finished_spans(), "invoke_agent a")
    assert attrs(span)["gen_ai.request.model"] == "gpt-4o-mini"
    assert attrs(span)["gen_ai.provider.name"] == "openai"
    # A name the resources lack fails the agent; its span names no model rather than guessing.
    runner = Runner(ReActAgent("b", "missing"), resources=resources, tracer_provider=provider)
    with pytest.raises(RunError, match="no model named 'missing'"):
        await runner.invoke("x")
    (span,) = named(exporter.get_finished_spans(), "invoke_agent b")
    assert "gen_ai.request.model" not in attrs(span)


async def test_workflow_agents_get_spans_and_steps_nest_under_them(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    inner = SequentialAgent("inner", [ScriptAgent("x", "x"), ScriptAgent("y", "y")])
    outer = SequentialAgent("outer", [ScriptAgent("a", "a"), inner], description="Two steps.")
    await Runner(outer, tracer_provider=provider).invoke("go")
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent outer",
        "  invoke_agent a",
        "  invoke_agent inner",
        "    invoke_agent x",
        "    invoke_agent y",
    ]
    y = named(spans, "invoke_agent y")[0]
    assert attrs(y)["adk.run_path"] == ("outer", "a", "inner", "x", "y")
    assert attrs(named(spans, "invoke_agent outer")[0])["gen_ai.agent.description"] == "Two steps."


@pytest.mark.parametrize("kind", ["sequential", "parallel", "loop"])
async def test_workflow_agents_are_invoke_agent_spans_not_invoke_workflow(
    kind: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The conventions define invoke_workflow, but say instrumentations SHOULD NOT report it when
    # a workflow is itself an agent, naming ADK's workflow agents: these are agents (they nest,
    # transfer, run as an AgentTool), so they report invoke_agent, with no gen_ai.workflow.name.
    steps = [ScriptAgent("a", "a"), ScriptAgent("b", "b")]
    workflow: Agent = {
        "sequential": lambda: SequentialAgent("flow", steps, description="Two steps."),
        "parallel": lambda: ParallelAgent("flow", steps, description="Two steps."),
        "loop": lambda: LoopAgent("flow", steps, max_iterations=1, description="Two steps."),
    }[kind]()
    await Runner(workflow, tracer_provider=provider).invoke("go", run_id="conv-wf")
    spans = exporter.get_finished_spans()
    (span,) = named(spans, "invoke_agent flow")
    assert span.kind == SpanKind.INTERNAL
    assert attrs(span) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "flow",
        "gen_ai.agent.description": "Two steps.",
        "gen_ai.conversation.id": "conv-wf",
        "gen_ai.provider.name": "_OTHER",  # required; a workflow has no model of its own
        "adk.run_path": ("flow",),
        "adk.agent.outcome": "completed",
    }
    assert {attrs(s)["gen_ai.operation.name"] for s in spans} == {"invoke_agent"}


class _GenerateOnly:
    """A test model that is only ever called without streaming."""

    model_name = "test"

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        raise NotImplementedError


class BarrierModel(_GenerateOnly):
    """A model whose first call in each branch waits until every branch has called it, so the
    branches' chat spans are open at the same time (concurrency is forced, not hoped for)."""

    model_name = "barrier"

    def __init__(self, script: ScriptedModel, arrived: list[str], everyone: asyncio.Event, n: int):
        self.script = script
        self.arrived = arrived
        self.everyone = everyone
        self.n = n

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        if self.script.calls == 0:
            self.arrived.append("x")
            if len(self.arrived) == self.n:
                self.everyone.set()
            await self.everyone.wait()
        return await self.script.generate(messages, tools=tools, options=options)


async def test_parallel_branches_put_their_spans_under_their_own_agent_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    arrived: list[str] = []
    everyone = asyncio.Event()
    branches = [
        ReActAgent(name, BarrierModel(add_model(), arrived, everyone, 2), tools=[add])
        for name in ("left", "right")
    ]
    await Runner(ParallelAgent("both", branches), tracer_provider=provider).invoke("go")
    spans = exporter.get_finished_spans()
    assert len(spans) == 1 + 2 * 4
    (both,) = named(spans, "invoke_agent both")
    for name in ("left", "right"):
        (agent_span,) = named(spans, f"invoke_agent {name}")
        assert parent_of(agent_span, spans) is both
        own = [s for s in spans if parent_of(s, spans) is agent_span]
        assert sorted(s.name for s in own) == [
            "chat barrier",
            "chat barrier",
            "execute_tool add",
        ]
    left_chat = min(named(spans, "chat barrier"), key=lambda s: s.start_time or 0)
    others = [s for s in named(spans, "chat barrier") if s is not left_chat]
    # The barrier guarantees two chat spans of different branches were open at the same time.
    assert any(
        o.start_time <= left_chat.end_time
        and parent_of(o, spans) is not parent_of(left_chat, spans)  # type: ignore[operator]
        for o in others
    )


async def test_concurrent_runs_of_one_runner_keep_separate_traces(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    runner = Runner(
        ReActAgent("calc", ScriptedModel(lambda m: _add_turn(m)), tools=[add]),
        tracer_provider=provider,
    )
    await asyncio.gather(*(runner.invoke("go", run_id=f"run-{i}") for i in range(5)))
    spans = exporter.get_finished_spans()
    by_trace: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        by_trace[span.context.trace_id].append(span)
    assert len(by_trace) == 5
    for group in by_trace.values():
        assert tree(group) == [
            "invoke_agent calc",
            "  chat scripted",
            "  execute_tool add",
            "  chat scripted",
        ]
        assert len({attrs(s)["gen_ai.conversation.id"] for s in group}) == 1


def _add_turn(messages: list[Message]) -> Any:
    if messages[-1].role == "tool":
        return f"sum={messages[-1].content}"
    return Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})])


async def test_agent_tool_inner_run_nests_under_the_tool_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    inner = ReActAgent("helper", ScriptedModel(["inner answer"]), description="Helps.")
    outer_model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("helper", {"request": "help"}, id="call_h")]),
            "outer answer",
        ]
    )
    outer = ReActAgent("boss", outer_model, tools=[AgentTool(inner)])
    result = await Runner(outer, tracer_provider=provider).invoke("go", run_id="conv-7")
    assert result.text == "outer answer"
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent boss",
        "  chat scripted",
        "  execute_tool helper",
        "    invoke_agent helper",
        "      chat scripted",
        "  chat scripted",
    ]
    inner_span = named(spans, "invoke_agent helper")[0]
    assert attrs(inner_span)["gen_ai.conversation.id"] == "conv-7"


async def test_agents_inside_an_agent_tool_report_the_run_path_their_forwarded_events_carry(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The span's adk.run_path was the nested run's own ("helper",), while the events forwarded
    # with emit_inner_events carry the outer path before it: a trace and an event log of the
    # same agent did not match. Two levels deep, under a workflow, to check the prefix adds up.
    def calls(name: str) -> ScriptedModel:
        request = tool_call(name, {"request": "go"}, id=f"call_{name}")
        return ScriptedModel([Reply(tool_calls=[request]), f"{name} called"])

    leaf = SequentialAgent("leaf", [ScriptAgent("step", "done")], description="Leaf.")
    helper = ReActAgent(
        "helper", calls("leaf"), tools=[AgentTool(leaf, emit_inner_events=True)], description="H."
    )
    boss = ReActAgent("boss", calls("helper"), tools=[AgentTool(helper, emit_inner_events=True)])
    events = await run_events(Runner(SequentialAgent("root", [boss]), tracer_provider=provider))

    spans = exporter.get_finished_spans()
    span_paths = {s.name: attrs(s)["adk.run_path"] for s in spans if "invoke_agent" in s.name}
    event_paths = {e.agent_name: e.run_path for e in events if e.output is not None}
    assert span_paths == {
        "invoke_agent root": ("root",),
        "invoke_agent boss": ("root", "boss"),
        "invoke_agent helper": ("root", "boss", "helper"),
        "invoke_agent leaf": ("root", "boss", "helper", "leaf"),
        "invoke_agent step": ("root", "boss", "helper", "leaf", "step"),
    }
    for agent in ("boss", "helper", "step"):
        assert event_paths[agent] == span_paths[f"invoke_agent {agent}"]


async def test_concurrent_agent_tool_calls_each_nest_under_their_own_tool_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    arrived: list[str] = []
    everyone = asyncio.Event()
    one = ReActAgent(
        "one", BarrierModel(ScriptedModel(["1"]), arrived, everyone, 2), description="One."
    )
    two = ReActAgent(
        "two", BarrierModel(ScriptedModel(["2"]), arrived, everyone, 2), description="Two."
    )
    calls = [tool_call("one", {"request": "a"}), tool_call("two", {"request": "b"})]
    boss = ReActAgent(
        "boss",
        ScriptedModel([Reply(tool_calls=calls), "done"]),
        tools=[AgentTool(one), AgentTool(two)],
    )
    await Runner(boss, tracer_provider=provider).invoke("go")
    spans = exporter.get_finished_spans()
    for name in ("one", "two"):
        (tool_span,) = named(spans, f"execute_tool {name}")
        (agent_span,) = named(spans, f"invoke_agent {name}")
        assert parent_of(agent_span, spans) is tool_span
        assert [s.name for s in spans if parent_of(s, spans) is agent_span] == ["chat barrier"]


async def test_a_react_agent_with_sub_agents_is_one_span_and_transfers_are_span_events(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    billing = ReActAgent(
        "billing", _model_of("m-billing", ["refund issued"]), description="Billing."
    )
    router_model = _model_of(
        "m-router", [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "billing"})])]
    )
    router = ReActAgent("router", router_model, sub_agents=[billing])
    await Runner(router, tracer_provider=provider).invoke("refund please")
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent router",
        "  chat m-router",
        "  execute_tool transfer_to_agent",
        "  invoke_agent billing",
        "    chat m-billing",
    ]
    router_span = named(spans, "invoke_agent router")[0]
    (transfer,) = [e for e in router_span.events if e.name == "adk.transfer"]
    assert dict(transfer.attributes or {}) == {"adk.transfer.to": "billing"}
    billing_span = named(spans, "invoke_agent billing")[0]
    assert attrs(billing_span)["adk.run_path"] == ("router", "billing")
    # A sub-agent's span belongs to its place in the flow, which wraps the agent: the model is
    # still the agent's own.
    assert _agent_models(spans) == [("router", "m-router"), ("billing", "m-billing")]


async def test_supervisor_workers_are_one_span_each_turn(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    worker = ReActAgent("worker", _model_of("m-worker", ["worked"]), description="Works.")
    boss_model = _model_of(
        "m-boss",
        [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "worker"})]), "all done"],
    )
    boss = ReActAgent("boss", boss_model, description="Delegates.")
    result = await Runner(Supervisor(boss, [worker]), tracer_provider=provider).invoke("go")
    assert result.text == "all done"
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent boss",
        "  chat m-boss",
        "  execute_tool transfer_to_agent",
        "  invoke_agent worker",
        "    chat m-worker",
        "  invoke_agent boss",
        "    chat m-boss",
    ]
    worker_span = named(spans, "invoke_agent worker")[0]
    assert "adk.transfer" in events_of(worker_span)  # the report-back transfer
    # Each span is started for a wrapper (the flow's node, the report-back wrapper) that has no
    # model of its own; the attributes name the model of the agent it runs.
    assert _agent_models(spans) == [("boss", "m-boss"), ("worker", "m-worker"), ("boss", "m-boss")]


@pytest.mark.parametrize("kind", ["supervisor", "with_sub_agents", "react_sub_agents"])
async def test_a_flow_is_told_from_its_root_agents_later_turns(
    provider: TracerProvider, exporter: InMemorySpanExporter, kind: str
) -> None:
    """A flow's span (its root agent's first turn, and every agent its transfers led to) and a
    later turn of that agent (control back after a transfer, a Supervisor's report back) are
    both invoke_agent spans of the root agent's name: one series in gen_ai.invoke_agent.duration
    mixed whole flows with single turns, and nothing told them apart. adk.agent.flow=true marks
    the flow's, on the span and the metric."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    back = Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "boss"})])
    to_worker = Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "worker"})])
    boss_model = ScriptedModel([to_worker, "all done"])
    agent: Agent
    if kind == "supervisor":
        worker = ReActAgent("worker", ScriptedModel(["worked"]), description="Works.")
        agent = Supervisor(ReActAgent("boss", boss_model, description="Boss."), [worker])
    elif kind == "with_sub_agents":
        worker = ReActAgent("worker", ScriptedModel([back]), description="Works.")
        agent = with_sub_agents(ReActAgent("boss", boss_model), [worker])
    else:
        worker = ReActAgent("worker", ScriptedModel([back]), description="Works.")
        agent = ReActAgent("boss", boss_model, sub_agents=[worker])
    runner = Runner(agent, tracer_provider=provider, meter_provider=meters)
    assert (await runner.invoke("go")).text == "all done"
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert sorted(
        (s.name, len(attrs(s)["adk.run_path"]), attrs(s).get("adk.agent.flow")) for s in spans
    ) == [
        ("invoke_agent boss", 1, True),  # the flow: its duration holds the whole chain
        ("invoke_agent boss", 3, None),  # the turn after the worker handed back
        ("invoke_agent worker", 2, None),
    ]
    series = sorted(
        (
            dict(p.attributes or {})["gen_ai.agent.name"],
            str(dict(p.attributes or {}).get("adk.agent.flow", "-")),
            p.count,
        )
        for p in _points(reader, "gen_ai.invoke_agent.duration")
    )
    assert series == [("boss", "-", 1), ("boss", "True", 1), ("worker", "-", 1)]
    meters.shutdown()


async def test_plan_execute_roles_report_their_models(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = PlanExecute(
        new_planner(_model_of("m-plan", [json.dumps({"steps": ["a"]})])),
        new_executor(_model_of("m-exec", ["a done"])),
        new_replanner(_model_of("m-replan", ["Answered."])),
    )
    await Runner(agent, tracer_provider=provider).invoke("go")
    models = dict(_agent_models(exporter.get_finished_spans()))
    assert {name: models[name] for name in ("planner", "executor", "replanner")} == {
        "planner": "m-plan",
        "executor": "m-exec",
        "replanner": "m-replan",
    }


@pytest.mark.parametrize("capture", [False, True])
async def test_plan_execute_role_spans_say_where_their_step_stands_in_the_plan(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    capture: bool,
) -> None:
    """Every executor span was ``invoke_agent executor`` with nothing telling which step of the
    plan it carried out (nor a replanner's which review): a trace of a long plan, or of a step
    that paused and resumed, could not be read against the plan. The roles' spans say how many
    steps were done and left as the step starts, and the executor's its step's text when content
    is captured (a model wrote it)."""
    if capture:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")

    @adk.tool(require_approval=True)
    def book(flight: str) -> str:
        """Book a flight."""
        return f"booked {flight}"

    agent = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["pick AF1", "book AF1"]})])),
        new_executor(
            ScriptedModel(
                ["AF1 it is.", Reply(tool_calls=[tool_call("book", {"flight": "AF1"})]), "Booked."]
            ),
            [book],
        ),
        new_replanner(ScriptedModel(["", "You are booked on AF1."])),
    )
    runner = Runner(agent, tracer_provider=provider)
    paused = await runner.invoke("book me AF1")
    assert paused.checkpoint_id is not None
    await runner.invoke_resume(paused.checkpoint_id, True)

    def where(span: ReadableSpan) -> tuple[Any, ...]:
        attributes = dict(span.attributes or {})
        return (
            span.name.removeprefix("invoke_agent "),
            attributes.get("adk.plan.steps_done"),
            attributes.get("adk.plan.steps_left"),
            attributes.get("adk.plan.step"),
        )

    roles = ("invoke_agent planner", "invoke_agent executor", "invoke_agent replanner")
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    pick, book_step = ("pick AF1", "book AF1") if capture else (None, None)
    assert [where(s) for s in spans if s.name in roles] == [
        ("planner", 0, 2, None),
        ("executor", 0, 2, pick),
        ("replanner", 1, 1, None),
        ("executor", 1, 1, book_step),  # paused
        ("executor", 1, 1, book_step),  # resumed
        ("replanner", 2, 0, None),
    ]


class _Holder(BaseAgent):
    """A custom agent keeping another agent, under another name, that it never runs."""

    def __init__(self, name: str, agent: ReActAgent) -> None:
        super().__init__(name)
        self.agent = agent

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.of("held")


async def test_an_unrelated_agent_attribute_is_not_taken_for_the_agents_model(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    held = ReActAgent("held", _model_of("m-held", ["unused"]))
    await Runner(_Holder("holder", held), tracer_provider=provider).invoke("go")
    (span,) = named(exporter.get_finished_spans(), "invoke_agent holder")
    assert "gen_ai.request.model" not in attrs(span)
    assert attrs(span)["gen_ai.provider.name"] == "_OTHER"  # not the held agent's "acme"


async def test_flow_transfers_between_custom_agents(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    from adk import with_sub_agents

    a = ScriptAgent("A", "routing", act_transfer("B"))
    b = ScriptAgent("B", "B here")
    await Runner(with_sub_agents(a, [b]), tracer_provider=provider).invoke("go")
    spans = exporter.get_finished_spans()
    assert tree(spans) == ["invoke_agent A", "  invoke_agent B"]


# -- exits and interrupts ---------------------------------------------------------------------


@tool
def ask(question: str) -> str:
    """Ask a person (pauses the run).

    Args:
        question: What to ask.
    """
    raise Interrupt({"question": question})


async def test_exit_and_interrupt_are_span_events(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel([Reply(tool_calls=[tool_call("exit", {"final_result": "bye"})])])
    await Runner(ReActAgent("quitter", model, exit_tool=True), tracer_provider=provider).invoke("x")
    spans = exporter.get_finished_spans()
    assert "adk.exit" in events_of(named(spans, "invoke_agent quitter")[0])
    exporter.clear()

    model = ScriptedModel([Reply(tool_calls=[tool_call("ask", {"question": "ok?"}, id="c1")])])
    runner = Runner(ReActAgent("asker", model, tools=[ask]), tracer_provider=provider)
    result = await runner.invoke("x")
    assert result.interrupt is not None
    spans = exporter.get_finished_spans()
    (tool_span,) = named(spans, "execute_tool ask")
    (agent_span,) = named(spans, "invoke_agent asker")
    point = "agent:asker/tool:ask#c1"
    for span in (tool_span, agent_span):
        (event,) = [e for e in span.events if e.name == "adk.interrupt"]
        assert list(dict(event.attributes or {})["adk.interrupt.ids"]) == [point]
        assert span.status.status_code == StatusCode.UNSET


async def test_an_agent_raising_interrupt_records_it_on_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    asker = ScriptAgent("asker", "one moment", Interrupt({"question": "ok?"}))
    result = await Runner(SequentialAgent("seq", [asker]), tracer_provider=provider).invoke("x")
    assert result.interrupt is not None
    spans = exporter.get_finished_spans()
    assert "adk.interrupt" in events_of(named(spans, "invoke_agent asker")[0])


class _FullDisk(InMemoryCheckpointStore):
    async def put(self, id: str, data: bytes) -> None:
        raise OSError("disk full")


@pytest.mark.parametrize("how", ["run", "invoke"])
@pytest.mark.parametrize(
    ("last", "store", "error_type"),
    [
        (act_transfer("nobody"), None, "TransferError"),
        (Interrupt("approve?"), _FullDisk(), "CheckpointError"),
    ],
    ids=["unhandled transfer", "unsaved pause"],
)
async def test_an_error_the_runner_ends_the_run_with_fails_the_root_agent_span(
    last: Any,
    store: Any,
    error_type: str,
    how: str,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    runner = Runner(ScriptAgent("a", "hello", last), store, tracer_provider=provider)
    if how == "run":
        events = [event async for event in runner.run("x")]
    else:
        with pytest.raises(RunError) as failure:
            await runner.invoke("x")
        events = failure.value.events
    assert events[-1].error is not None and events[-1].error.type == error_type
    (span,) = named(exporter.get_finished_spans(), "invoke_agent a")
    assert span.status.status_code == StatusCode.ERROR
    assert attrs(span)["error.type"] == error_type


async def test_a_failing_after_agent_fails_the_agent_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    def flaky(agent: Any, ctx: Any, error: Any) -> None:
        raise ConnectionError("metrics backend down")

    agent = ReActAgent("a", ScriptedModel(["hello"]))
    runner = Runner(agent, callbacks=[Callbacks(after_agent=flaky)], tracer_provider=provider)
    with pytest.raises(RunError, match="metrics backend down"):
        await runner.invoke("x")
    (span,) = named(exporter.get_finished_spans(), "invoke_agent a")
    assert span.status.status_code == StatusCode.ERROR
    assert attrs(span)["error.type"] == "ConnectionError"
    assert events_of(span) == ["exception"]


@pytest.mark.parametrize("nested", [False, True])
async def test_a_failing_after_agent_of_a_paused_agent_leaves_its_span_interrupted(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
    nested: bool,
) -> None:
    """The run paused and its checkpoint was saved: the run is waiting for a person, not
    failed, so the span of the agent whose ``after_agent`` then failed says
    ``adk.agent.outcome=interrupted`` with an unset status and no ``error.type`` (an error-rate
    alert would fire for a run that is waiting), and carries the callback's exception as its
    ``exception`` event; it said ``failed`` with an ERROR status while the caller got the
    pause. The failure is logged; the pause stands and resumes."""

    failures = [ConnectionError("metrics backend down")]  # the paused run's only

    def flaky(agent: Any, ctx: Any, error: Any) -> None:
        if agent.name == "payer" and failures:
            raise failures.pop()

    store = InMemoryCheckpointStore()
    model = ScriptedModel([Reply(tool_calls=[tool_call("approve", {"amount": 5})]), "paid"])
    payer = ReActAgent("payer", model, tools=[approve])
    root: Agent = SequentialAgent("flow", [payer]) if nested else payer
    runner = Runner(root, store, callbacks=[Callbacks(after_agent=flaky)], tracer_provider=provider)
    with caplog.at_level("WARNING"):
        paused = await runner.invoke("pay 5")

    assert paused.interrupt is not None and paused.checkpoint_id is not None
    (span,) = named(exporter.get_finished_spans(), "invoke_agent payer")
    assert attrs(span)["adk.agent.outcome"] == "interrupted"
    assert span.status.status_code == StatusCode.UNSET and "error.type" not in attrs(span)
    assert events_of(span) == ["adk.interrupt", "exception"]
    (recorded,) = [e for e in span.events if e.name == "exception"]
    assert dict(recorded.attributes or {})["exception.type"] == "ConnectionError"
    if nested:
        (flow,) = named(exporter.get_finished_spans(), "invoke_agent flow")
        assert attrs(flow)["adk.agent.outcome"] == "interrupted"
        assert flow.status.status_code == StatusCode.UNSET
    assert "metrics backend down" in caplog.text
    assert (await runner.invoke_resume(paused.checkpoint_id, "yes")).text == "paid"


@tool
def approve(amount: int, ctx: ToolContext) -> str:
    """Ask a person to approve a payment.

    Args:
        amount: How much.
    """
    resume = ctx.resume
    if resume is None:
        raise Interrupt({"approve": amount})
    return f"approved: {resume.data}"


async def test_a_resumed_run_keeps_its_conversation_id(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel([Reply(tool_calls=[tool_call("approve", {"amount": 5})]), "paid"])
    runner = Runner(ReActAgent("payer", model, tools=[approve]), tracer_provider=provider)
    paused = await runner.invoke("pay 5", run_id="conv-9")
    assert paused.checkpoint_id is not None
    exporter.clear()
    result = await runner.invoke_resume(paused.checkpoint_id, "yes")
    assert result.text == "paid"
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent payer",
        "  execute_tool approve",
        "  chat scripted",
    ]
    assert {attrs(s)["gen_ai.conversation.id"] for s in spans} == {"conv-9"}


async def test_a_resumed_run_links_to_the_trace_of_the_run_that_paused(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The resume is a trace of its own (it runs later, often in another process, under another
    # request): a span link on its root span leads back to the paused run's root span.
    store = InMemoryCheckpointStore()
    model = ScriptedModel([Reply(tool_calls=[tool_call("approve", {"amount": 5})]), "paid"])
    agent = ReActAgent("payer", model, tools=[approve])
    paused = await Runner(agent, store, tracer_provider=provider).invoke("pay 5")
    assert paused.checkpoint_id is not None
    (paused_root,) = named(exporter.get_finished_spans(), "invoke_agent payer")
    exporter.clear()
    # Another runner over the same store, as another process would have.
    resumer = Runner(agent, store, tracer_provider=provider)
    assert (await resumer.invoke_resume(paused.checkpoint_id, "yes")).text == "paid"
    (resumed_root,) = named(exporter.get_finished_spans(), "invoke_agent payer")
    assert resumed_root.context.trace_id != paused_root.context.trace_id
    (link,) = resumed_root.links
    assert (link.context.trace_id, link.context.span_id) == (
        paused_root.context.trace_id,
        paused_root.context.span_id,
    )
    assert dict(link.attributes or {}) == {"adk.checkpoint.id": paused.checkpoint_id}
    # The spans under the resumed root carry no link of their own; a run that is not a resume
    # has none either.
    assert all(not s.links for s in exporter.get_finished_spans() if s is not resumed_root)
    assert not paused_root.links


@pytest.mark.parametrize("root", ["react", "sequence"])
async def test_a_paused_run_and_its_resume_name_the_checkpoint_on_their_root_spans(
    root: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The link from a resume to the paused run is its only tie, and Langfuse or Phoenix neither
    # show nor search links: the paused trace and the trace of its resume could not be found from
    # the checkpoint id the application keeps. Both root spans now carry it as adk.checkpoint.id,
    # and no other span does.
    store = InMemoryCheckpointStore()
    model = ScriptedModel([Reply(tool_calls=[tool_call("approve", {"amount": 5})]), "paid"])
    agent: Agent = ReActAgent("payer", model, tools=[approve])
    if root == "sequence":
        agent = SequentialAgent("desk", [agent])
    paused = await Runner(agent, store, tracer_provider=provider).invoke("pay 5")
    assert paused.checkpoint_id is not None
    first = exporter.get_finished_spans()
    exporter.clear()
    resumed = await Runner(agent, store, tracer_provider=provider).invoke_resume(
        paused.checkpoint_id, "yes"
    )
    assert resumed.text == "paid"
    second = exporter.get_finished_spans()
    for spans in (first, second):
        named_it = [s.name for s in spans if "adk.checkpoint.id" in attrs(s)]
        assert named_it == [f"invoke_agent {agent.name}"]
        (span,) = named(spans, named_it[0])
        assert attrs(span)["adk.checkpoint.id"] == paused.checkpoint_id
        assert span.parent is None


@pytest.mark.parametrize(
    "saved",
    [
        None,  # paused untraced, or by a version that kept no trace
        "0af7651916cd43dd8448eb211c80319c",
        {"trace_id": "+af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331"},
        {"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b71692033"},
        {"trace_id": "0" * 32, "span_id": "0" * 16},
        {"trace_id": 1, "span_id": 2},
    ],
)
async def test_a_checkpoint_without_a_readable_trace_resumes_without_a_link(
    saved: Any, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The trace is decoration: what a checkpoint holds there never fails a resume.
    @tool
    def approve(ctx: ToolContext) -> str:
        """Ask a person."""
        if ctx.resume is None:
            raise Interrupt("approve?")
        return "approved"

    store = InMemoryCheckpointStore()
    model = ScriptedModel([Reply(tool_calls=[tool_call("approve", {})]), "done"])
    runner = Runner(ReActAgent("a", model, tools=[approve]), store, tracer_provider=provider)
    await runner.invoke("go", checkpoint_id="cp")
    async with rewrite_checkpoint(store, "cp") as body:
        assert set(body["trace"]) == {"trace_id", "span_id", "sampled"}
        if saved is None:
            del body["trace"]
        else:
            body["trace"] = saved
    exporter.clear()
    assert (await runner.invoke_resume("cp", "yes")).text == "done"
    (root,) = named(exporter.get_finished_spans(), "invoke_agent a")
    assert not root.links


async def test_an_untraced_run_keeps_no_trace_in_its_checkpoint() -> None:
    @tool
    def approve(ctx: ToolContext) -> str:
        """Ask a person."""
        if ctx.resume is None:
            raise Interrupt("approve?")
        return "approved"

    store = InMemoryCheckpointStore()
    model = ScriptedModel([Reply(tool_calls=[tool_call("approve", {})]), "done"])
    runner = Runner(
        ReActAgent("a", model, tools=[approve]), store, tracer_provider=NoOpTracerProvider()
    )
    await runner.invoke("go", checkpoint_id="cp")
    data = await store.get("cp")
    assert data is not None
    assert "trace" not in decode_checkpoint(data, "cp")


# -- errors ---------------------------------------------------------------------------------------
async def test_a_failing_tool_marks_its_span_and_the_run_goes_on(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise ValueError("disk on fire")

    model = ScriptedModel([Reply(tool_calls=[tool_call("broken")]), "sorry"])
    result = await Runner(ReActAgent("a", model, tools=[broken]), tracer_provider=provider).invoke(
        "x"
    )
    assert result.text == "sorry"
    spans = exporter.get_finished_spans()
    (tool_span,) = named(spans, "execute_tool broken")
    assert tool_span.status.status_code == StatusCode.ERROR
    assert "disk on fire" in (tool_span.status.description or "")
    assert attrs(tool_span)["error.type"] == "ValueError"
    assert events_of(tool_span) == ["exception"]
    assert named(spans, "invoke_agent a")[0].status.status_code == StatusCode.UNSET


@pytest.mark.parametrize("capture", [False, True])
async def test_a_denied_approval_is_not_a_tool_failure(
    capture: bool,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A person who says no answered the call as asked: the tool did not fail, so its span has no
    # error status or error.type (which would count each refusal in the tool's error rate and
    # fire its alerts), and says what happened with an event instead.
    @tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount.

        Args:
            amount: The amount.
        """
        return f"paid {amount}"

    if capture:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    model = ScriptedModel([Reply(tool_calls=[tool_call("pay", {"amount": 5}, id="c1")]), "ok"])
    seen: list[str] = []
    runner = Runner(
        ReActAgent("payer", model, tools=[pay]),
        tracer_provider=provider,
        callbacks=[Callbacks(after_tool=lambda ctx, call, result: seen.append(repr(result)))],
    )
    paused = await runner.invoke("pay 5", run_id="conv-3")
    assert paused.checkpoint_id is not None
    exporter.clear()
    decision = {"approved": False, "reason": "over the limit"}
    assert (await runner.invoke_resume(paused.checkpoint_id, decision)).text == "ok"
    spans = exporter.get_finished_spans()
    (tool_span,) = named(spans, "execute_tool pay")
    assert tool_span.status.status_code == StatusCode.UNSET
    assert events_of(tool_span) == ["adk.approval.denied"]
    expected = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "pay",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Pay an amount.",
        "gen_ai.conversation.id": "conv-3",
    }
    if capture:  # what the model read is the call's result
        expected["gen_ai.tool.call.arguments"] = '{"amount": 5}'
        expected["gen_ai.tool.call.result"] = (
            "Error: the call to 'pay' was not approved: over the limit"
        )
    assert attrs(tool_span) == expected
    for span in spans:
        assert span.status.status_code == StatusCode.UNSET, span.name
    # To callbacks the denial is the ToolResult it always was.
    assert seen == [
        "ToolResult(content=\"Error: the call to 'pay' was not approved: over the limit\", "
        "is_error=True, structured=None)"
    ]


async def test_an_error_result_marks_the_tool_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", '{"a": "x"}')]), "fixed"])
    await Runner(ReActAgent("a", model, tools=[add]), tracer_provider=provider).invoke("x")
    (tool_span,) = named(exporter.get_finished_spans(), "execute_tool add")
    assert tool_span.status.status_code == StatusCode.ERROR
    assert attrs(tool_span)["error.type"] == "tool_error"


async def test_a_before_tool_edit_is_the_arguments_its_span_records(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tracing.md: a ``before_tool`` callback edits a copy of the call; the tool, ``after_tool``
    and the tool's span (``gen_ai.tool.call.arguments``, captured) see what ran, the reply's
    event and history the model's call."""

    @tool
    def charge(amount: int) -> str:
        """Charge an amount.

        Args:
            amount: The amount.
        """
        return f"charged {amount}"

    def cap(ctx: ToolContext, call: ToolCall) -> None:
        call.arguments = json.dumps({"amount": min(json.loads(call.arguments)["amount"], 5)})

    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    model = ScriptedModel([Reply(tool_calls=[tool_call("charge", {"amount": 90})]), "ok"])
    runner = Runner(
        ReActAgent("a", model, tools=[charge]),
        callbacks=[Callbacks(before_tool=cap)],
        tracer_provider=provider,
    )
    await runner.invoke("x")
    (tool_span,) = named(exporter.get_finished_spans(), "execute_tool charge")
    assert json.loads(attrs(tool_span)["gen_ai.tool.call.arguments"]) == {"amount": 5}
    assert attrs(tool_span)["gen_ai.tool.call.result"] == "charged 5"
    (call,) = model.requests[1].messages[-2].tool_calls
    assert json.loads(call.arguments) == {"amount": 90}


def _capped(ctx: ToolContext, call: ToolCall) -> None:
    call.arguments = json.dumps({"amount": min(json.loads(call.arguments)["amount"], 5)})


def _noop_model(ctx: RunContext, request: Any) -> None:
    return None


@pytest.mark.parametrize(
    ("runner_callbacks", "own_callbacks", "copies"),
    [
        ([], [], 0),  # tracing alone never edits the call
        ([Callbacks(before_model=_noop_model)], [], 0),  # callbacks, none of them a tool's
        ([Callbacks(before_tool=_capped)], [], 1),
        ([], [Callbacks(before_tool=_capped)], 1),  # the agent's own, found on its span's frame
        ([Callbacks(before_model=_noop_model)], [Callbacks(before_tool=_capped)], 1),
    ],
)
async def test_a_traced_call_is_copied_only_for_tool_callbacks(
    runner_callbacks: list[Callbacks],
    own_callbacks: list[Callbacks],
    copies: int,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The call a ``before_tool`` callback may edit is a copy (~2 us a call); tracing, which only
    reads it, is given the model's own call when no tool callback runs for it, the runner's or
    the agent's. Wherever one does, its edit is what ran and what the span records, and the
    model's call is kept."""
    import adk.tools._executor as executor

    made: list[str] = []
    real = executor.ToolCall

    def counted(**fields: Any) -> ToolCall:
        made.append(fields["id"])
        return real(**fields)

    monkeypatch.setattr(executor, "ToolCall", counted)
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")

    @tool
    def charge(amount: int) -> str:
        """Charge an amount.

        Args:
            amount: The amount.
        """
        return f"charged {amount}"

    model = ScriptedModel([Reply(tool_calls=[tool_call("charge", {"amount": 90})]), "ok"])
    agent = ReActAgent("a", model, tools=[charge], callbacks=own_callbacks)
    runner = Runner(agent, callbacks=runner_callbacks, tracer_provider=provider)
    await runner.invoke("x")
    assert len(made) == copies
    amount = 5 if copies else 90
    (tool_span,) = named(exporter.get_finished_spans(), "execute_tool charge")
    assert json.loads(attrs(tool_span)["gen_ai.tool.call.arguments"]) == {"amount": amount}
    assert attrs(tool_span)["gen_ai.tool.call.result"] == f"charged {amount}"
    (call,) = model.requests[1].messages[-2].tool_calls
    assert json.loads(call.arguments) == {"amount": 90}


@pytest.mark.parametrize("capture", [False, True])
async def test_an_error_results_text_is_content_kept_off_the_span_unless_captured(
    capture: bool,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    @tool
    def charge(card: str) -> ToolResult:
        """Charge a card.

        Args:
            card: The card number.
        """
        return ToolResult.error(f"card {card} was declined")

    if capture:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    model = ScriptedModel([Reply(tool_calls=[tool_call("charge", {"card": "4111 1111"})]), "no"])
    await Runner(ReActAgent("a", model, tools=[charge]), tracer_provider=provider).invoke("x")
    (tool_span,) = named(exporter.get_finished_spans(), "execute_tool charge")
    assert tool_span.status.status_code == StatusCode.ERROR
    assert attrs(tool_span)["error.type"] == "tool_error"
    if capture:
        assert tool_span.status.description == "Error: card 4111 1111 was declined"
        # The conventions keep gen_ai.tool.call.result for calls that succeeded.
        assert "gen_ai.tool.call.result" not in attrs(tool_span)
        assert attrs(tool_span)["gen_ai.tool.call.arguments"] == '{"card": "4111 1111"}'
    else:
        assert tool_span.status.description == "the tool returned an error"
        for span in exporter.get_finished_spans():
            assert "4111" not in f"{span.status.description} {attrs(span)}", span.name


async def test_a_failing_model_marks_the_chat_and_agent_spans(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel([ConnectionError("model down")])
    seq = SequentialAgent("seq", [ReActAgent("a", model)])
    with pytest.raises(RunError):
        await Runner(seq, tracer_provider=provider).invoke("x")
    spans = exporter.get_finished_spans()
    assert tree(spans) == ["invoke_agent seq", "  invoke_agent a", "    chat scripted"]
    (chat,) = named(spans, "chat scripted")
    assert chat.status.status_code == StatusCode.ERROR
    assert attrs(chat)["error.type"] == "ConnectionError"
    assert events_of(chat) == ["exception"]
    agent_span = named(spans, "invoke_agent a")[0]
    assert agent_span.status.status_code == StatusCode.ERROR
    assert attrs(agent_span)["error.type"] == "ConnectionError"
    seq_span = named(spans, "invoke_agent seq")[0]
    assert seq_span.status.status_code == StatusCode.ERROR
    assert attrs(seq_span)["error.type"] == "ConnectionError"
    assert events_of(seq_span) == []  # the exception is recorded where it happened, not above


async def test_an_agents_own_exception_is_recorded_on_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    seq = SequentialAgent("seq", [ReActAgent("a", ScriptedModel([ConnectionError("down")]))])
    with pytest.raises(RunError):
        await Runner(seq, tracer_provider=provider).invoke("x")
    spans = exporter.get_finished_spans()
    assert events_of(named(spans, "invoke_agent a")[0]) == ["exception"]
    assert events_of(named(spans, "invoke_agent seq")[0]) == []


class HangingModel(_GenerateOnly):
    """Signals that a call started, then never answers (until cancelled)."""

    model_name = "hanging"

    def __init__(self, started: asyncio.Event) -> None:
        self.started = started

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def _cut_off(work: Coroutine[Any, Any, Any], started: asyncio.Event) -> None:
    """Run ``work`` as a task, cancel it once ``started`` is set (as a timeout around a run, or a
    client gone, would) and see it end cancelled."""
    task = asyncio.create_task(work)
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancelled_branch_ends_its_spans_without_an_error(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    started = asyncio.Event()
    slow = ReActAgent("slow", HangingModel(started))
    failing = ScriptAgent("failing", started, RuntimeError("boom"))
    with pytest.raises(RunError):
        await Runner(ParallelAgent("par", [slow, failing]), tracer_provider=provider).invoke("x")
    spans = exporter.get_finished_spans()
    (chat,) = named(spans, "chat hanging")
    assert chat.status.status_code == StatusCode.UNSET
    assert events_of(chat) == ["adk.cancelled"]
    (slow_span,) = named(spans, "invoke_agent slow")
    assert slow_span.status.status_code == StatusCode.UNSET
    assert events_of(slow_span) == ["adk.cancelled"]  # cut off, not finished
    (par,) = named(spans, "invoke_agent par")
    assert par.status.status_code == StatusCode.ERROR and events_of(par) == []


def _outcomes(spans: Sequence[ReadableSpan]) -> list[tuple[str, str]]:
    return sorted((s.name, attrs(s).get("adk.agent.outcome", "-")) for s in spans)


async def test_a_paused_agent_says_interrupted_without_failing(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A paused run's agents ended like finished ones: an unset status, no error.type (right: a
    pause is no error) and nothing else, so an SRE could not tell the run that stopped at an
    approval's question from one that answered, in spans or in gen_ai.invoke_agent.duration.
    adk.agent.outcome says it, on every agent span a pause passes through (the agent that paused,
    its supervisor's flow, a parallel branch's parent), and a sibling branch that finished says
    completed; the resume's spans say completed."""

    @tool(require_approval=True)
    def refund(amount: int) -> str:
        """Refund.

        Args:
            amount: How much.
        """
        return f"refunded {amount}"

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    payments = ReActAgent(
        "payments",
        ScriptedModel([Reply(tool_calls=[tool_call("refund", {"amount": 5})]), "refunded"]),
        tools=[refund],
        description="Refunds.",
    )
    boss_model = ScriptedModel(
        [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "payments"})]), "done"]
    )
    boss = ReActAgent("boss", boss_model, description="Delegates.")
    runner = Runner(Supervisor(boss, [payments]), tracer_provider=provider, meter_provider=meters)
    paused = await runner.invoke("refund 5")
    assert paused.checkpoint_id is not None
    spans = exporter.get_finished_spans()
    assert _outcomes(named(spans, "invoke_agent boss") + named(spans, "invoke_agent payments")) == [
        ("invoke_agent boss", "interrupted"),
        ("invoke_agent payments", "interrupted"),
    ]
    for span in spans:
        assert span.status.status_code == StatusCode.UNSET and "error.type" not in attrs(span)
    exporter.clear()
    assert (await runner.invoke_resume(paused.checkpoint_id, {"approved": True})).text == "done"
    assert _outcomes(named(exporter.get_finished_spans(), "invoke_agent boss")) == [
        ("invoke_agent boss", "completed"),  # the flow
        ("invoke_agent boss", "completed"),  # the report back: the supervisor's next turn
    ]
    agent_series = sorted(
        (
            dict(p.attributes or {})["gen_ai.agent.name"],
            dict(p.attributes or {})["adk.agent.outcome"],
            str(dict(p.attributes or {}).get("adk.agent.flow", "-")),
            p.count,
        )
        for p in _points(reader, "gen_ai.invoke_agent.duration")
    )
    assert agent_series == [
        ("boss", "completed", "-", 1),  # the report back
        ("boss", "completed", "True", 1),  # the resumed flow
        ("boss", "interrupted", "True", 1),  # the flow that paused
        ("payments", "completed", "-", 1),
        ("payments", "interrupted", "-", 1),
    ]
    meters.shutdown()

    # A parallel branch that paused: it and its parent are interrupted, its sibling completed.
    exporter.clear()
    asking = ReActAgent(
        "asking",
        ScriptedModel([Reply(tool_calls=[tool_call("refund", {"amount": 1})]), "ok"]),
        tools=[refund],
    )
    answering = ReActAgent("answering", ScriptedModel(["answered"]))
    parallel = ParallelAgent("both", [asking, answering])
    assert (await Runner(parallel, tracer_provider=provider).invoke("go")).interrupt is not None
    assert _outcomes(
        [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    ) == [
        ("invoke_agent answering", "completed"),
        ("invoke_agent asking", "interrupted"),
        ("invoke_agent both", "interrupted"),
    ]


async def test_a_failed_and_a_cancelled_agent_say_so_in_their_outcome(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The two other outcomes: failed (with error.type, as before) and cancelled (with its
    adk.cancelled event), so one attribute answers how each agent invocation ended."""
    started = asyncio.Event()
    slow = ReActAgent("slow", HangingModel(started))
    failing = ScriptAgent("failing", started, RuntimeError("boom"))
    with pytest.raises(RunError):
        await Runner(ParallelAgent("par", [slow, failing]), tracer_provider=provider).invoke("x")
    assert _outcomes(named(exporter.get_finished_spans(), "invoke_agent par")) == [
        ("invoke_agent par", "failed")
    ]
    assert _outcomes(named(exporter.get_finished_spans(), "invoke_agent slow")) == [
        ("invoke_agent slow", "cancelled")
    ]
    assert _outcomes(named(exporter.get_finished_spans(), "invoke_agent failing")) == [
        ("invoke_agent failing", "failed")
    ]


@pytest.mark.parametrize("hook", ["before_agent", "after_agent"])
async def test_a_run_cancelled_in_an_agent_callback_says_cancelled(
    provider: TracerProvider, exporter: InMemorySpanExporter, hook: str
) -> None:
    """The span of an agent whose callback was waiting when the run was cancelled ended as
    failed with error.type CancelledError (in before_agent) or like that of an agent that
    finished, with no error and no adk.cancelled event (in after_agent)."""
    started = asyncio.Event()

    async def wait(*args: Any) -> None:
        started.set()
        await asyncio.Event().wait()

    runner = Runner(
        ReActAgent("a", ScriptedModel(["done"])),
        callbacks=[Callbacks(**{hook: wait})],
        tracer_provider=provider,
    )
    await _cut_off(runner.invoke("x"), started)
    (span,) = named(exporter.get_finished_spans(), "invoke_agent a")
    assert span.status.status_code == StatusCode.UNSET and "error.type" not in attrs(span)
    assert events_of(span) == ["adk.cancelled"]


@pytest.mark.parametrize("how", ["invoke", "run"])
@pytest.mark.parametrize("root", ["react", "sequential"])
async def test_a_cancelled_run_says_so_on_every_agent_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, how: str, root: str
) -> None:
    """A run cut off (a timeout around it, a client gone) ended its agent spans like finished
    ones: only the chat span said it was cancelled. Every agent on the way now says so too, with
    no error, whichever way the runner drives the root (inline, or a workflow's own driver)."""
    started = asyncio.Event()
    agent: Agent = ReActAgent("slow", HangingModel(started))
    if root == "sequential":
        agent = SequentialAgent("steps", [agent])
    runner = Runner(agent, tracer_provider=provider)

    async def read() -> None:
        if how == "invoke":
            await runner.invoke("x")
        else:
            async for _ in runner.run("x"):
                pass

    await _cut_off(read(), started)
    spans = exporter.get_finished_spans()
    agent_spans = [s for s in spans if s.name.startswith("invoke_agent")]
    assert len(agent_spans) == (2 if root == "sequential" else 1)
    for span in [*agent_spans, *named(spans, "chat hanging")]:
        assert span.status.status_code == StatusCode.UNSET, span.name
        assert events_of(span) == ["adk.cancelled"], span.name


def _two_step_root(root: str) -> Agent:
    """A ReAct agent that calls a tool, then answers (three events), or two in a sequence."""
    if root == "react":
        return ReActAgent("calc", add_model(usage=False), tools=[add])
    first = ReActAgent("first", add_model(usage=False), tools=[add])
    return SequentialAgent("steps", [first, ReActAgent("second", ScriptedModel(["fine"]))])


@pytest.mark.parametrize("how", ["break", "aclose", "gc"])
@pytest.mark.parametrize("root", ["react", "sequential"])
async def test_a_run_its_reader_abandons_says_so_on_every_agent_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, how: str, root: str
) -> None:
    """A reader that stops mid-run (``break``, ``aclose``, the generator dropped) closed the
    agents still running, whose spans ended like those of agents that finished: inside a driver
    that close looks the same as the one after the run's last event. Each says so now (by
    GeneratorExit, as a chat span cut off by its reader), with no error."""
    runner = Runner(_two_step_root(root), tracer_provider=provider)
    if how == "aclose":
        events = runner.run("x")
        await anext(events)
        await events.aclose()
    else:
        if how == "break":
            async for _ in runner.run("x"):
                break
        else:
            events = runner.run("x")
            await anext(events)
            del events
        gc.collect()
        for _ in range(3):  # asyncio's finaliser closes the dropped generator in a task
            await asyncio.sleep(0)
    spans = exporter.get_finished_spans()
    agent_spans = [s for s in spans if s.name.startswith("invoke_agent")]
    expected = (
        ["invoke_agent calc"] if root == "react" else ["invoke_agent first", "invoke_agent steps"]
    )
    assert sorted(s.name for s in agent_spans) == expected  # "second" never started
    for span in agent_spans:
        assert span.status.status_code == StatusCode.UNSET and "error.type" not in attrs(span)
        (event,) = span.events
        assert event.name == "adk.cancelled", span.name
        assert dict(event.attributes or {}) == {"adk.cancelled.by": "GeneratorExit"}


async def test_a_resume_its_reader_abandons_says_so_on_its_root_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """``resume()`` closes the runner's generator the same way when its reader leaves."""

    @tool
    def approve(ctx: ToolContext) -> str:
        """Ask a person to approve."""
        if ctx.resume is None:
            raise Interrupt("ok?")
        return f"approved: {ctx.resume.data}"

    model = ScriptedModel([Reply(tool_calls=[tool_call("approve", {})]), "paid"])
    runner = Runner(ReActAgent("payer", model, tools=[approve]), tracer_provider=provider)
    paused = await runner.invoke("pay")
    assert paused.checkpoint_id is not None
    exporter.clear()
    events = runner.resume(paused.checkpoint_id, "yes")
    first = await anext(events)
    assert first.output is not None and first.output.message is not None
    assert first.output.message.content == "approved: yes"  # the model's answer is still to come
    await events.aclose()
    (root,) = named(exporter.get_finished_spans(), "invoke_agent payer")
    assert root.status.status_code == StatusCode.UNSET and events_of(root) == ["adk.cancelled"]


@pytest.mark.parametrize("root", ["react", "sequential"])
async def test_a_run_read_to_its_end_has_no_cancelled_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, root: str
) -> None:
    runner = Runner(_two_step_root(root), tracer_provider=provider)
    seen = [event async for event in runner.run("x")]
    assert seen[-1].output is not None
    spans = exporter.get_finished_spans()
    assert len([s for s in spans if s.name.startswith("invoke_agent")]) == (
        1 if root == "react" else 3
    )
    assert all(events_of(s) == [] for s in spans), [(s.name, events_of(s)) for s in spans]


@pytest.mark.parametrize("root", ["react", "sequential"])
async def test_a_reader_that_stops_at_the_runs_pause_cut_nothing_off(
    provider: TracerProvider, exporter: InMemorySpanExporter, root: str
) -> None:
    """The runner ends the run at a pause (its last event): a reader who stops there and closes
    the generator read the whole run, so the agents closed then ended, not cut off."""

    model = ScriptedModel([Reply(tool_calls=[tool_call("ask", {"question": "ok?"}, id="c1")])])
    agent: Agent = ReActAgent("asker", model, tools=[ask])
    if root == "sequential":
        agent = SequentialAgent("steps", [agent, ReActAgent("later", ScriptedModel(["x"]))])
    events = Runner(agent, tracer_provider=provider).run("x")
    async for event in events:
        if event.interrupted is not None:
            break
    await events.aclose()
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    assert len(spans) == (1 if root == "react" else 2)
    for span in spans:  # "asker" says it paused; its parent ended with it
        assert events_of(span) == (["adk.interrupt"] if span.name.endswith("asker") else [])


# -- usage and metrics ----------------------------------------------------------------------------
def _points(reader: InMemoryMetricReader, name: str) -> list[HistogramDataPoint]:
    data = reader.get_metrics_data()
    assert data is not None
    found: list[HistogramDataPoint] = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    found.extend(
                        p for p in metric.data.data_points if isinstance(p, HistogramDataPoint)
                    )
    return found


async def test_token_usage_and_duration_histograms(provider: TracerProvider) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    model = add_model()
    model.provider_name = "acme"  # type: ignore[attr-defined]
    runner = Runner(
        ReActAgent("calc", model, tools=[add]), tracer_provider=provider, meter_provider=meters
    )
    await runner.invoke("1+2?")
    tokens = _points(reader, "gen_ai.client.token.usage")
    by_type = {dict(p.attributes or {})["gen_ai.token.type"]: p for p in tokens}
    assert set(by_type) == {"input", "output"}
    assert (by_type["input"].sum, by_type["input"].count) == (30, 2)
    assert (by_type["output"].sum, by_type["output"].count) == (10, 2)
    assert dict(by_type["input"].attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.provider.name": "acme",
        "gen_ai.token.type": "input",
    }
    assert by_type["input"].explicit_bounds[:3] == (1.0, 4.0, 16.0)
    (duration,) = _points(reader, "gen_ai.client.operation.duration")
    assert duration.count == 2
    assert duration.explicit_bounds[:2] == (0.01, 0.02)
    meters.shutdown()


async def test_the_histograms_keep_their_buckets_under_the_otlp_exporters_aggregation() -> None:
    """The OTLP metric exporters ask for ``ExplicitBucketHistogramAggregation`` (their default
    histogram aggregation), not the SDK's default: opentelemetry-sdk 1.30 gave such a reader its
    default buckets (0, 5, 10, ... 10000: every duration of seconds in the first two), and 1.31
    every histogram the first one's (token counts in buckets of seconds); from 1.32 each keeps its
    advice (pyproject's bound)."""
    reader = InMemoryMetricReader(
        preferred_aggregation={Histogram: ExplicitBucketHistogramAggregation()}
    )
    meters = MeterProvider(metric_readers=[reader])
    runner = Runner(ReActAgent("calc", add_model(), tools=[add]), meter_provider=meters)
    await runner.invoke("1+2?")
    tokens = _points(reader, "gen_ai.client.token.usage")
    assert tokens and all(p.explicit_bounds[:3] == (1.0, 4.0, 16.0) for p in tokens)
    for name in ("gen_ai.client.operation.duration", "gen_ai.invoke_agent.duration"):
        durations = _points(reader, name)
        assert durations and all(p.explicit_bounds[:2] == (0.01, 0.02) for p in durations), name
    meters.shutdown()


async def test_agent_runs_and_tool_calls_have_duration_metrics() -> None:
    # Only model calls were measured, so a service's dashboards had no agent's or tool's latency
    # or error rate, which only (sampled) spans held. The conventions define
    # gen_ai.invoke_agent.duration and gen_ai.execute_tool.duration for frameworks that bound an
    # agent run or a tool call: one point per agent run and per tool call that ran, by agent or
    # tool, with error.type when it failed. A call to a tool the agent lacks is recorded under
    # _OTHER (its name is the model's invention); a call a person refused, which did not run, and
    # the call that paused for the approval are not recorded.
    @tool
    def boom() -> str:
        """Fail."""
        raise ValueError("no")

    @tool
    def bad() -> ToolResult:
        """Return an error result."""
        return ToolResult.error("bad input")

    @tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay.

        Args:
            amount: How much.
        """
        return f"paid {amount}"

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    calls = [tool_call(name, {}) for name in ("boom", "bad", "made_up")]
    calls.append(tool_call("add", {"a": 1, "b": 2}))
    worker = ReActAgent(
        "worker", ScriptedModel([Reply(tool_calls=calls), "done"]), tools=[add, boom, bad]
    )
    failing = ReActAgent("failing", ScriptedModel([ConnectionError("gone")]))
    runner = Runner(SequentialAgent("steps", [worker, failing]), meter_provider=meters)
    with pytest.raises(RunError):
        await runner.invoke("go")
    model = ScriptedModel([Reply(tool_calls=[tool_call("pay", {"amount": 5})]), "ok"])
    payer = Runner(ReActAgent("payer", model, tools=[pay]), meter_provider=meters)
    paused = await payer.invoke("pay")
    assert paused.checkpoint_id is not None
    await payer.invoke_resume(paused.checkpoint_id, {"approved": False})

    def series(name: str, *keys: str) -> list[tuple[Any, ...]]:
        points = _points(reader, name)
        for point in points:
            assert point.explicit_bounds[:2] == (0.01, 0.02)
        return sorted(
            (*(dict(p.attributes or {}).get(key, "-") for key in keys), p.count) for p in points
        )

    tool_keys = ("gen_ai.tool.name", "error.type", "gen_ai.operation.name", "gen_ai.tool.type")
    assert series("gen_ai.execute_tool.duration", *tool_keys) == [
        ("_OTHER", "tool_error", "execute_tool", "function", 1),
        ("add", "-", "execute_tool", "function", 1),
        ("bad", "tool_error", "execute_tool", "function", 1),
        ("boom", "ValueError", "execute_tool", "function", 1),  # as its span says
    ]
    agent_keys = (
        "gen_ai.agent.name",
        "error.type",
        "gen_ai.request.model",
        "gen_ai.provider.name",
        "adk.agent.outcome",
    )
    # The run that paused and its resume were one series (a pause is no error), so a p95 mixed
    # the time to an approval's question with whole runs: adk.agent.outcome tells them apart.
    assert series("gen_ai.invoke_agent.duration", *agent_keys) == [
        ("failing", "ConnectionError", "scripted", "_OTHER", "failed", 1),
        ("payer", "-", "scripted", "_OTHER", "completed", 1),  # its resume
        ("payer", "-", "scripted", "_OTHER", "interrupted", 1),  # the run that paused
        ("steps", "ConnectionError", "-", "_OTHER", "failed", 1),
        ("worker", "-", "scripted", "_OTHER", "completed", 1),
    ]
    for point in _points(reader, "gen_ai.invoke_agent.duration"):
        assert "gen_ai.conversation.id" not in dict(point.attributes or {})
    meters.shutdown()


@pytest.mark.parametrize("how", ["cancel", "aclose"])
async def test_a_cut_off_run_records_its_agents_durations_as_cancelled(
    provider: TracerProvider, exporter: InMemorySpanExporter, how: str
) -> None:
    """A run cut off (its task cancelled by a timeout, its reader gone) recorded no
    gen_ai.invoke_agent.duration, while its agent spans said adk.agent.outcome=cancelled: an SRE
    counting runs by outcome from the metric missed every cancelled one. Each agent span cut off
    now has its point, outcome cancelled, no error.type; the agent that finished before the cut
    keeps its completed one."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    started = asyncio.Event()
    first = ReActAgent("first", ScriptedModel(["done"]))
    agent = SequentialAgent("steps", [first, ReActAgent("slow", HangingModel(started))])
    runner = Runner(agent, tracer_provider=provider, meter_provider=meters)
    events = runner.run("x")
    if how == "cancel":

        async def read() -> None:
            async for _ in events:
                pass

        await _cut_off(read(), started)
        expected = [("first", "completed"), ("slow", "cancelled"), ("steps", "cancelled")]
    else:  # the reader takes the first agent's answer and leaves, cutting the rest off
        await anext(events)
        await events.aclose()
        expected = [("first", "cancelled"), ("steps", "cancelled")]
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    outcomes = sorted((attrs(s)["gen_ai.agent.name"], attrs(s)["adk.agent.outcome"]) for s in spans)
    assert outcomes == expected
    points = _points(reader, "gen_ai.invoke_agent.duration")
    measured = sorted(
        (
            dict(p.attributes or {})["gen_ai.agent.name"],
            dict(p.attributes or {})["adk.agent.outcome"],
            dict(p.attributes or {}).get("error.type", "-"),
            p.count,
        )
        for p in points
    )
    assert measured == [(name, outcome, "-", 1) for name, outcome in expected]
    meters.shutdown()


async def _cancelled_once_the_server_stalls(server: OpenAIServer, task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` (a timeout around it) once ``server`` holds a streamed answer it reads."""
    for _ in range(6000):  # until the server holds the stream: a guard, not a timing
        if server.stalls:
            break
        await asyncio.sleep(0.01)
    assert server.stalls == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("shape", ["sequence", "supervisor", "agent tool"])
async def test_a_run_cancelled_while_a_streamed_answer_is_read_for_it_says_its_agents_were_cut_off(
    provider: TracerProvider, exporter: InMemorySpanExporter, shape: str
) -> None:
    """A streaming run cancelled (a timeout around ``invoke``) while the streamed answer of an
    agent under a workflow, a ``Supervisor`` or an ``AgentTool`` was being read for it (by
    ``invoke``'s collector, or the ``AgentTool``'s) said adk.agent.outcome=completed on that
    agent's span, and under a sequence on the root's too, with no adk.cancelled event: a request
    cut off by its timeout looked finished in the trace and in gen_ai.invoke_agent.duration. The
    stream is read outside the agent's own driver there, so the cancellation reached the agent
    as the close of its generator, which looked like the close after a run's last event."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    stalled = ServedReply(text="a long answer", stall_after=2, delay=60)
    opening = {
        "sequence": ServedReply(text="ok"),
        "supervisor": ServedReply(
            tool_calls=[Call("transfer_to_agent", '{"agent_name": "worker"}')]
        ),
        "agent tool": ServedReply(tool_calls=[Call("worker", '{"request": "go"}')]),
    }[shape]
    async with OpenAIServer([opening, stalled]) as server:
        model = wire_model(server, name="m", retry=RetryPolicy(max_attempts=1))
        worker = ReActAgent("worker", model, description="Answers slowly.")
        agent: Agent
        if shape == "sequence":
            agent = SequentialAgent("steps", [ReActAgent("first", model), worker])
        elif shape == "supervisor":
            agent = Supervisor(ReActAgent("boss", model), [worker])
        else:
            agent = ReActAgent("boss", model, tools=[AgentTool(worker)])
        cut = ["steps" if shape == "sequence" else "boss", "worker"]
        runner = Runner(
            agent, enable_streaming=True, tracer_provider=provider, meter_provider=meters
        )
        if shape == "agent tool":  # the AgentTool reads the inner stream, whoever reads the run

            async def work() -> None:
                async for _ in runner.run("go"):
                    pass

            task = asyncio.create_task(work())
        else:
            task = asyncio.create_task(runner.invoke("go"))
        await _cancelled_once_the_server_stalls(server, task)
        await model.aclose()
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]
    ended = {
        attrs(s)["gen_ai.agent.name"]: (
            attrs(s)["adk.agent.outcome"],
            [dict(e.attributes or {}) for e in s.events if e.name == "adk.cancelled"],
        )
        for s in spans
    }
    for name in cut:
        assert ended[name] == ("cancelled", [{"adk.cancelled.by": "CancelledError"}]), name
    if shape == "sequence":
        assert ended["first"] == ("completed", [])
    measured = {
        dict(p.attributes or {})["gen_ai.agent.name"]: dict(p.attributes or {})["adk.agent.outcome"]
        for p in _points(reader, "gen_ai.invoke_agent.duration")
    }
    assert {name: measured[name] for name in cut} == dict.fromkeys(cut, "cancelled")
    meters.shutdown()


async def test_a_streaming_resume_cancelled_while_invoke_resume_reads_an_answer_says_cancelled(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A timeout around ``invoke_resume`` in a streaming run, cut while it read the resumed
    agent's streamed answer, said adk.cancelled.by=GeneratorExit on the agent's span, a reader
    that stopped reading, where the same cut around ``invoke`` (and around a resume that does
    not stream) says CancelledError: a dashboard telling timeouts from clients gone by it counted
    every timed-out approval among the clients gone."""

    @tool(require_approval=True)
    def pay(cents: int) -> str:
        """Pay."""
        return "paid"

    stalled = ServedReply(text="a long answer", stall_after=2, delay=60)
    async with OpenAIServer(
        [ServedReply(tool_calls=[Call("pay", '{"cents": 5}')]), stalled]
    ) as server:
        model = wire_model(server, name="m", retry=RetryPolicy(max_attempts=1))
        runner = Runner(
            ReActAgent("payer", model, tools=[pay]), enable_streaming=True, tracer_provider=provider
        )
        paused = await runner.invoke("pay")
        assert paused.checkpoint_id is not None
        exporter.clear()
        task = asyncio.create_task(runner.invoke_resume(paused.checkpoint_id, True))
        await _cancelled_once_the_server_stalls(server, task)
        await model.aclose()
    (span,) = named(exporter.get_finished_spans(), "invoke_agent payer")
    assert attrs(span)["adk.agent.outcome"] == "cancelled"
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        ("adk.cancelled", {"adk.cancelled.by": "CancelledError"})
    ]


@pytest.mark.parametrize("cut", ["model", "stream", "tool"])
async def test_a_cut_off_model_or_tool_call_records_its_duration_with_the_cut_as_error_type(
    provider: TracerProvider, exporter: InMemorySpanExporter, cut: str
) -> None:
    """A model call or tool call cut off (the run cancelled, its reader gone) recorded no
    gen_ai.client.operation.duration or gen_ai.execute_tool.duration: the calls a timeout cut,
    the slowest, were missing from the latency histograms, and a count of calls from them missed
    every cut one. Each records its duration up to the cut now, error.type the cancellation's
    class (CancelledError; GeneratorExit for a reader that stopped reading a streamed answer),
    as the span's adk.cancelled.by says; the span stays as it was (no error status)."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    started = asyncio.Event()

    @tool
    async def wait_for_ever() -> str:
        """Never answers."""
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    served = {
        "model": ServedReply(text="late", delay=60),
        "stream": ServedReply(text="a long answer", stall_after=2, delay=60),
        "tool": ServedReply(tool_calls=[Call("wait_for_ever")]),
    }[cut]
    async with OpenAIServer([served]) as server:
        model = wire_model(server, name="m", retry=RetryPolicy(max_attempts=1))
        agent = ReActAgent("a", model, tools=[wait_for_ever])
        runner = Runner(
            agent, enable_streaming=cut == "stream", tracer_provider=provider, meter_provider=meters
        )
        events = runner.run("go")
        if cut == "stream":  # the reader takes a piece of the answer and leaves
            event = await anext(events)
            assert event.output is not None and event.output.stream is not None
            assert (await anext(aiter(event.output.stream))).content
            await events.aclose()
        else:  # the run's task is cancelled (a timeout around it) while the call works

            async def read() -> None:
                async for _ in events:
                    pass

            task = asyncio.create_task(read())
            if cut == "tool":
                await started.wait()
            for _ in range(6000):  # until the server holds the call: a guard, not a timing
                if server.stalls or cut == "tool":
                    break
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await model.aclose()
    name = "execute_tool wait_for_ever" if cut == "tool" else "chat m"
    (span,) = named(exporter.get_finished_spans(), name)
    assert span.status.status_code == StatusCode.UNSET and "error.type" not in attrs(span)
    by = "GeneratorExit" if cut == "stream" else "CancelledError"
    if cut == "stream":
        assert events_of(span) == ["adk.stream.closed_early"]
    else:
        (event,) = span.events
        assert (event.name, dict(event.attributes or {})) == (
            "adk.cancelled",
            {"adk.cancelled.by": by},
        )
    metric = "gen_ai.execute_tool.duration" if cut == "tool" else "gen_ai.client.operation.duration"
    points = _points(reader, metric)
    if cut == "tool":  # the model call before it answered
        chats = _points(reader, "gen_ai.client.operation.duration")
        assert [dict(p.attributes or {}).get("error.type") for p in chats] == [None]
    assert [(dict(p.attributes or {})["error.type"], p.count) for p in points] == [(by, 1)]
    assert points[0].sum > 0
    meters.shutdown()


async def test_a_stream_whose_reader_left_after_a_chunk_records_its_time_to_first_chunk(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """bc138a0 records the duration of a streamed call whose reader left; its time to first
    chunk, measured as the chunk came, was still dropped there (a stream ended or failed records
    it): a client that hangs up after the first words, the commonest cut of a chat service, was
    missing from gen_ai.client.operation.time_to_first_chunk. Recorded once, as the span has it."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    served = ServedReply(text="a long answer", stall_after=2, delay=60)
    async with OpenAIServer([served]) as server:
        model = wire_model(server, name="m", retry=RetryPolicy(max_attempts=1))
        runner = Runner(
            ReActAgent("a", model),
            enable_streaming=True,
            tracer_provider=provider,
            meter_provider=meters,
        )
        events = runner.run("go")
        event = await anext(events)
        assert event.output is not None and event.output.stream is not None
        assert (await anext(aiter(event.output.stream))).content
        await events.aclose()
        await model.aclose()
    (span,) = named(exporter.get_finished_spans(), "chat m")
    waited = attrs(span)["gen_ai.response.time_to_first_chunk"]
    (point,) = _points(reader, "gen_ai.client.operation.time_to_first_chunk")
    assert point.count == 1 and point.sum == waited
    meters.shutdown()


async def test_metrics_work_without_a_tracer_and_failures_carry_error_type() -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    model = ScriptedModel([TimeoutError("slow"), "ok"])
    runner = Runner(ReActAgent("a", model), meter_provider=meters)
    with pytest.raises(RunError):
        await runner.invoke("x")
    await runner.invoke("x")
    durations = _points(reader, "gen_ai.client.operation.duration")
    errors = sorted(dict(p.attributes or {}).get("error.type", "-") for p in durations)
    assert errors == ["-", "TimeoutError"]
    # A model naming no provider: the required attribute says so, on failures too.
    assert {dict(p.attributes or {})["gen_ai.provider.name"] for p in durations} == {"_OTHER"}
    assert _points(reader, "gen_ai.client.token.usage") == []  # no usage reported, none recorded
    meters.shutdown()


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_model_calls_http_failure_is_typed_by_its_status(
    streaming: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # OpenAIChatModel raises one ModelError for every failure, so error.type said "ModelError" for
    # a rate limit, a refused request and a server error alike, on the chat span and in the
    # duration metric a service's error dashboards group by. An HTTP failure is now typed by its
    # status, as the HTTP conventions do; the exception event still names the class, and the
    # agent, which failed with a ModelError, says so.
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    served = [ServedReply(status=429, error="slow down"), ServedReply(status=400, error="bad")]
    async with OpenAIServer(served) as server:
        model = wire_model(server, name="m", api_key="k", retry=RetryPolicy(max_attempts=1))
        runner = Runner(
            ReActAgent("a", model),
            tracer_provider=provider,
            meter_provider=meters,
            enable_streaming=streaming,
        )
        for _ in served:
            with pytest.raises(RunError, match="ModelError"):
                await runner.invoke("hi")
        await model.aclose()
    spans = exporter.get_finished_spans()
    chats = named(spans, "chat m")
    assert [attrs(span)["error.type"] for span in chats] == ["429", "400"]
    assert [span.status.status_code for span in chats] == [StatusCode.ERROR] * 2
    for span in chats:
        (event,) = span.events
        assert (event.name, dict(event.attributes or {})["exception.type"]) == (
            "exception",
            "adk.models.base.ModelError",
        )
    assert {attrs(span)["error.type"] for span in named(spans, "invoke_agent a")} == {"ModelError"}
    durations = _points(reader, "gen_ai.client.operation.duration")
    assert sorted(dict(p.attributes or {})["error.type"] for p in durations) == ["400", "429"]
    meters.shutdown()


async def test_a_model_call_that_failed_without_a_status_is_typed_by_what_failed(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # A call that timed out or could not connect failed with a ModelError naming no status, so
    # error.type said "ModelError" for both, on the chat span and in the duration metric: a
    # dashboard could not tell a slow provider from an unreachable one. Such a failure is typed by
    # the client's exception the ModelError was raised from.
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    once = RetryPolicy(max_attempts=1)
    async with OpenAIServer([ServedReply(text="late", delay=2.0)]) as server:
        slow = wire_model(server, name="m", api_key="k", retry=once, timeout=0.05)
        unreachable = f"http://127.0.0.1:{closed_port()}/v1"
        gone = wire_model(unreachable, name="m", api_key="k", retry=once)
        for model in (slow, gone):
            runner = Runner(ReActAgent("a", model), tracer_provider=provider, meter_provider=meters)
            with pytest.raises(RunError, match="ModelError"):
                await runner.invoke("hi")
            await model.aclose()
    chats = named(exporter.get_finished_spans(), "chat m")
    assert [attrs(span)["error.type"] for span in chats] == [
        "APITimeoutError",
        "APIConnectionError",
    ]
    durations = _points(reader, "gen_ai.client.operation.duration")
    assert sorted(dict(p.attributes or {})["error.type"] for p in durations) == [
        "APIConnectionError",
        "APITimeoutError",
    ]
    meters.shutdown()


async def test_a_retry_event_is_on_its_own_calls_span_among_concurrent_calls(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # Reviewed (rv3): the retry event is put on the current span from tenacity's before_sleep,
    # which runs in the retrying call's own task, so concurrent calls of one model (a
    # ParallelAgent's branches, both in flight when the first fails) each keep their own: the
    # flaky branch's chat span has its retry and the steady one's none. No change needed.
    failed: set[str] = set()

    def answer(body: Any) -> ServedReply:
        agent = body["messages"][0]["content"]
        if agent == "flaky" and agent not in failed:
            failed.add(agent)
            return ServedReply(status=503, error="busy")
        return ServedReply(text=f"{agent} done")

    retry = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.002)
    async with OpenAIServer(respond=answer, hold=2) as server:
        model = wire_model(server, name="m", api_key="k", retry=retry)
        branches = [ReActAgent(name, model, instruction=name) for name in ("flaky", "steady")]
        await Runner(ParallelAgent("both", branches), tracer_provider=provider).invoke("go")
        await model.aclose()
    spans = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans if span.context is not None}
    retried = {}
    for chat in named(spans, "chat m"):
        assert chat.parent is not None
        agent = by_id[chat.parent.span_id].name
        retried[agent] = [dict(e.attributes or {}).get("error.type") for e in chat.events]
    assert retried == {"invoke_agent flaky": ["503"], "invoke_agent steady": []}


async def test_a_malformed_answer_or_a_closed_model_stays_model_error(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # A ModelError without a status is typed by the client's exception it came from (above); but
    # one for a 200 answer the adapter could not read was typed by the parser's exception
    # (UnicodeDecodeError, RecursionError, JSONDecodeError, the ValueError of a number past
    # Python's 4,300 digits: which Python parser failed), and a
    # model closed under its call by the connection error the close caused (APIConnectionError,
    # as an unreachable provider), where tracing.md says both stay ModelError.
    completion = {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    }
    bodies = [
        json.dumps(completion).encode().replace(b'"hi"', b'"\xff"'),  # not UTF-8
        ("[" * 100_000 + "]" * 100_000).encode(),  # nested past the parser's reach
        b"{not json",
        json.dumps(completion).encode().replace(b'"created": 0', b'"created": ' + b"5" * 5000),
    ]
    once = RetryPolicy(max_attempts=1)
    arrived = asyncio.Event()

    def late(body: Any) -> ServedReply:  # the last call, at the server: the model is closed
        arrived.set()
        return ServedReply(text="late", delay=30.0)

    served = [ServedReply(raw=body) for body in bodies]
    async with OpenAIServer(served, respond=late) as server:
        model = wire_model(server, name="m", api_key="k", retry=once)
        runner = Runner(ReActAgent("a", model), tracer_provider=provider)
        for _ in bodies:
            with pytest.raises(RunError, match="ModelError"):
                await runner.invoke("hi")
        running = asyncio.ensure_future(runner.invoke("hi"))
        await arrived.wait()
        await model.aclose()
        with pytest.raises(RunError, match=r"closed \(aclose\(\)\) while the call was running"):
            await running
    chats = named(exporter.get_finished_spans(), "chat m")
    assert [attrs(span)["error.type"] for span in chats] == ["ModelError"] * 5


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_model_calls_retries_are_events_of_its_chat_span(
    streaming: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # A call that succeeded on its third attempt was one slow chat span with nothing saying why,
    # and one that failed for good showed only its last error: the retries were invisible to
    # whoever read the trace. Each retried attempt is now an event of the call's span, saying
    # which attempt failed, with what, and how long the call waited before the next.
    served = [
        ServedReply(status=503, error="busy"),
        ServedReply(status=429, error="slow down", retry_after="0"),
        ServedReply(text="ok"),
        # A stream the server ends before anything came is retried as a dropped connection is.
        ServedReply(text="cut off", end_after=0) if streaming else ServedReply(status=503),
        ServedReply(status=502, error="gateway"),
    ]
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    async with OpenAIServer(served) as server:
        for attempts in (3, 2):
            retry = RetryPolicy(max_attempts=attempts, initial_delay=0.001, max_delay=0.002)
            model = wire_model(server, name="m", api_key="k", retry=retry)
            agent = ReActAgent("a", model)
            runner = Runner(
                agent, tracer_provider=provider, meter_provider=meters, enable_streaming=streaming
            )
            if attempts == 3:
                assert (await runner.invoke("hi")).text == "ok"
            else:
                with pytest.raises(RunError, match="gave up after 2 attempts"):
                    await runner.invoke("hi")
            await model.aclose()
    succeeded, failed = named(exporter.get_finished_spans(), "chat m")

    def retries(span: ReadableSpan) -> list[tuple[str, Any, Any]]:
        return [
            (
                e.name,
                dict(e.attributes or {}).get("adk.retry.attempt"),
                dict(e.attributes or {}).get("error.type"),
            )
            for e in span.events
        ]

    assert retries(succeeded) == [("adk.model.retry", 1, "503"), ("adk.model.retry", 2, "429")]
    assert succeeded.status.status_code == StatusCode.UNSET
    delays = [dict(e.attributes or {})["adk.retry.delay"] for e in succeeded.events]
    assert 0.0 <= delays[0] <= 0.002 and delays[1] == 0.0  # the backoff; Retry-After: 0
    # (the stream's failure is a private class of the adapter's, a name no documentation gives)
    first = "_OTHER" if streaming else "503"
    assert retries(failed) == [("adk.model.retry", 1, first), ("exception", None, None)]
    assert attrs(failed)["error.type"] == "502"
    # The same attempts counted in adk.model.retries, by the call's model, provider and server
    # and each attempt's error.type; the calls' duration is one point each, attempts included.
    assert _retry_counts(reader) == {
        ("m", "openai", "127.0.0.1", "503"): 1 if streaming else 2,
        ("m", "openai", "127.0.0.1", "429"): 1,
        **({("m", "openai", "127.0.0.1", "_OTHER"): 1} if streaming else {}),
    }
    assert sum(p.count for p in _points(reader, "gen_ai.client.operation.duration")) == 2
    meters.shutdown()


def _retry_counts(reader: InMemoryMetricReader) -> dict[tuple[Any, ...], int]:
    """``adk.model.retries``' points by model, provider, server and error type."""
    data = reader.get_metrics_data()
    assert data is not None
    counts: dict[tuple[Any, ...], int] = {}
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != "adk.model.retries":
                    continue
                assert metric.unit == "{retry}"
                for point in metric.data.data_points:
                    a = dict(point.attributes or {})
                    key = (
                        a["gen_ai.request.model"],
                        a["gen_ai.provider.name"],
                        a["server.address"],
                        a["error.type"],
                    )
                    counts[key] = int(point.value)  # type: ignore[union-attr]
    return counts


async def test_retries_are_counted_by_a_runner_that_only_records_metrics() -> None:
    # Without a tracer provider the chat span does not record, so no retry event is made: the
    # count must not depend on it (nor on a trace being sampled).
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    served = [ServedReply(status=503, error="busy"), ServedReply(text="ok")]
    async with OpenAIServer(served) as server:
        retry = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.002)
        model = wire_model(server, name="m", api_key="k", retry=retry)
        runner = Runner(ReActAgent("a", model), meter_provider=meters)
        assert (await runner.invoke("hi")).text == "ok"
        await model.aclose()
    assert _retry_counts(reader) == {("m", "openai", "127.0.0.1", "503"): 1}
    meters.shutdown()


@pytest.mark.parametrize("later", [False, True], ids=["policy_given", "policy_set_later"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_retried_error_event_inside_a_stream_is_typed_by_its_status(
    api: str, later: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # A stream whose server reports a failure as an event before any text (vLLM's Chat
    # ``{"error": {"code": 500}}``, a Responses ``response.failed``) is retried as a 500 is,
    # and fails its chat span with error.type "500" when it is the last attempt; but the retry
    # event of a Chat one said "APIError" (the SDK's class), so a dashboard counting retries by
    # error.type put vLLM's server errors apart from the same 500s sent as an HTTP status.
    served = [ServedReply(text="never shown", error_after=1), ServedReply(text="ok")]
    async with OpenAIServer(served) as server:
        retry = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.002)
        if later:  # a policy set on the model (``with_policy``) reads the status as well
            model = wire_model(server, api, name="m", api_key="k")
            model.retry = retry
        else:
            model = wire_model(server, api, name="m", api_key="k", retry=retry)
        runner = Runner(ReActAgent("a", model), tracer_provider=provider, enable_streaming=True)
        assert (await runner.invoke("hi")).text == "ok"
        await model.aclose()
    (chat,) = named(exporter.get_finished_spans(), "chat m")
    assert [(e.name, dict(e.attributes or {})["error.type"]) for e in chat.events] == [
        ("adk.model.retry", "500")
    ]


# -- message content ------------------------------------------------------------------------------
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.tool.definitions",
}


async def test_content_is_not_recorded_by_default(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = ReActAgent("calc", add_model(), tools=[add], instruction="Be exact.")
    await Runner(agent, tracer_provider=provider).invoke("secret question")
    for span in exporter.get_finished_spans():
        assert not CONTENT_KEYS & set(attrs(span)), span.name
        assert "secret" not in json.dumps(attrs(span), default=str)


async def test_content_is_recorded_with_the_variable(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    agent = ReActAgent("calc", add_model(), tools=[add], instruction="Be exact.")
    await Runner(agent, tracer_provider=provider).invoke("what is 1+2?")
    spans = exporter.get_finished_spans()
    first, second = named(spans, "chat scripted")
    assert json.loads(attrs(first)["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be exact."}
    ]
    assert json.loads(attrs(first)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "what is 1+2?"}]}
    ]
    assert json.loads(attrs(first)["gen_ai.output.messages"]) == _called_add("tool_calls")
    second_input = json.loads(attrs(second)["gen_ai.input.messages"])
    assert second_input[-1] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_add", "response": "3"}],
    }
    assert json.loads(attrs(second)["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "sum=3"}
    ]
    (tool_span,) = named(spans, "execute_tool add")
    assert json.loads(attrs(tool_span)["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
    assert attrs(tool_span)["gen_ai.tool.call.result"] == "3"


def _called_add(finish_reason: str) -> list[dict[str, Any]]:
    """The output messages (as the conventions' JSON) of a reply that called ``add(1, 2)``."""
    call = {"type": "tool_call", "id": "call_add", "name": "add", "arguments": {"a": 1, "b": 2}}
    return [{"role": "assistant", "parts": [call], "finish_reason": finish_reason}]


def _answered(text: str) -> list[dict[str, Any]]:
    """The output messages (as the conventions' JSON) of a reply that said ``text`` and stopped."""
    return [
        {"role": "assistant", "parts": [{"type": "text", "content": text}], "finish_reason": "stop"}
    ]


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_agent_span_records_the_agents_answer_with_the_content(
    streaming: bool,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The conventions list gen_ai.output.messages (opt-in) on invoke_agent spans too; with content
    # captured an agent span recorded none, so a trace showed what each model call said but not
    # what the agent answered. Its answer is its last message of its own, not its tool results,
    # nor a sub-agent's (a workflow's span has none).
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    calc = ReActAgent("calc", add_model(), tools=[add])
    echo = ReActAgent("echo", ScriptedModel(["done"]))
    runner = Runner(
        SequentialAgent("steps", [calc, echo]),
        tracer_provider=provider,
        enable_streaming=streaming,
    )
    await runner.invoke("what is 1+2?")
    spans = exporter.get_finished_spans()
    (calc_span,) = named(spans, "invoke_agent calc")
    (echo_span,) = named(spans, "invoke_agent echo")
    (steps_span,) = named(spans, "invoke_agent steps")
    assert json.loads(attrs(calc_span)["gen_ai.output.messages"]) == _answered("sum=3")
    assert json.loads(attrs(echo_span)["gen_ai.output.messages"]) == _answered("done")
    assert "gen_ai.output.messages" not in attrs(steps_span)


_INPUT_ATTRIBUTES = (
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.tool.definitions",
)


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_agent_span_records_what_the_agent_was_given_with_the_content(
    streaming: bool,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The conventions list the input messages, the system instructions and the tool definitions
    # (opt-in) on invoke_agent spans; an agent span had only its answer, so a backend's agent view
    # (Langfuse's, Phoenix's) showed an output with no input. They are its first model call's:
    # the second call's (the tool's result appended) does not replace them, and a workflow, which
    # calls no model, has none.
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    calc = ReActAgent("calc", add_model(), tools=[add], instruction="Be exact.")
    echo = ReActAgent("echo", ScriptedModel(["done"]))
    runner = Runner(
        SequentialAgent("steps", [calc, echo]), tracer_provider=provider, enable_streaming=streaming
    )
    await runner.invoke("what is 1+2?")
    spans = exporter.get_finished_spans()
    (calc_span,) = named(spans, "invoke_agent calc")
    first, _second, echo_chat = named(spans, "chat scripted")
    assert {key: attrs(calc_span)[key] for key in _INPUT_ATTRIBUTES} == {
        key: attrs(first)[key] for key in _INPUT_ATTRIBUTES
    }
    assert json.loads(attrs(calc_span)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "what is 1+2?"}]}
    ]
    assert json.loads(attrs(calc_span)["gen_ai.tool.definitions"])[0]["name"] == "add"
    (echo_span,) = named(spans, "invoke_agent echo")
    assert attrs(echo_span)["gen_ai.input.messages"] == attrs(echo_chat)["gen_ai.input.messages"]
    assert "gen_ai.tool.definitions" not in attrs(echo_span)  # it offers no tools
    (steps_span,) = named(spans, "invoke_agent steps")
    assert not [key for key in _INPUT_ATTRIBUTES if key in attrs(steps_span)]
    # Without the variable, no agent span carries any of it.
    monkeypatch.delenv(CAPTURE_CONTENT_ENV)
    exporter.clear()
    runner = Runner(ReActAgent("calc", add_model(), tools=[add]), tracer_provider=provider)
    await runner.invoke("what is 1+2?")
    assert not [
        key
        for span in exporter.get_finished_spans()
        for key in attrs(span)
        if key in _INPUT_ATTRIBUTES
    ]


class _NoFinishReason:
    """A model whose replies report no finish reason (a custom adapter's, a local server's)."""

    model_name = "plain"

    def __init__(self, script: ScriptedModel) -> None:
        self.script = script

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        reply = await self.script.generate(messages, tools=tools, options=options)
        del reply.metadata["finish_reason"]
        return reply


async def test_a_finish_reason_the_model_did_not_report_is_one_of_the_schemas_values(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The output-message schema's finish reasons are stop, length, content_filter, tool_call,
    # compaction and error: a reply with calls and no reported reason was written "tool_calls",
    # OpenAI's word, which the schema does not have.
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    agent = ReActAgent("calc", _NoFinishReason(add_model()), tools=[add])
    await Runner(agent, tracer_provider=provider).invoke("what is 1+2?")
    first, second = named(exporter.get_finished_spans(), "chat plain")
    assert json.loads(attrs(first)["gen_ai.output.messages"]) == _called_add("tool_call")
    assert json.loads(attrs(second)["gen_ai.output.messages"]) == _answered("sum=3")
    # Nothing was reported, so nothing is claimed as the model's own reasons.
    assert "gen_ai.response.finish_reasons" not in attrs(first)
    assert "gen_ai.response.finish_reasons" not in attrs(second)


async def test_a_system_message_inside_the_conversation_stays_in_the_input_messages(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The conventions keep gen_ai.system_instructions for instructions given apart from the chat
    # history: a system message between the turns is history, recorded in its place. Every
    # system message went to the instructions, losing where it had been said.
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    agent = ReActAgent("calc", ScriptedModel(["trois"]), instruction="Be exact.")
    conversation = [
        Message.user("hi"),
        Message.assistant("hello"),
        Message.system("From now on, answer in French."),
        Message.user("what is 1+2?"),
    ]
    await Runner(agent, tracer_provider=provider).invoke(conversation)
    (chat,) = named(exporter.get_finished_spans(), "chat scripted")
    assert json.loads(attrs(chat)["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be exact."}
    ]
    assert json.loads(attrs(chat)["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "hello"}]},
        {
            "role": "system",
            "parts": [{"type": "text", "content": "From now on, answer in French."}],
        },
        {"role": "user", "parts": [{"type": "text", "content": "what is 1+2?"}]},
    ]


@pytest.mark.parametrize(
    ("value", "captured"),
    [
        ("true", True),
        ("TRUE", True),
        ("SPAN_ONLY", True),
        ("SPAN_AND_EVENT", True),
        ("span_and_event", True),
        ("EVENT_ONLY", False),  # pyadk emits no content events: nothing to record
        ("NO_CONTENT", False),
        ("false", False),
        ("", False),
    ],
)
async def test_the_content_variable_takes_the_values_opentelemetrys_genai_libraries_use(
    value: str,
    captured: bool,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # OpenTelemetry's GenAI instrumentations read the variable as NO_CONTENT / SPAN_ONLY /
    # EVENT_ONLY / SPAN_AND_EVENT; a process set up for them (SPAN_AND_EVENT) found pyadk's spans
    # without content, as only "true" was read.
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, value)
    await Runner(ReActAgent("calc", add_model(), tools=[add]), tracer_provider=provider).invoke("q")
    found = set().union(*(attrs(s) for s in exporter.get_finished_spans())) & CONTENT_KEYS
    if captured:
        assert found == CONTENT_KEYS - {"gen_ai.system_instructions"}  # the agent has none
    else:
        assert found == set()


async def test_a_content_value_it_does_not_take_is_logged_once_and_captures_nothing(
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``=1`` (or ``yes``, ``on``) read as off without a word, which looked like content capture
    being broken rather than set wrong. It stays off (OpenTelemetry's own GenAI instrumentations
    would not read it as on either), and says so once per value, not per ``Runner`` built."""
    monkeypatch.setattr(adk.tracing, "_unknown_capture_values", set())  # none warned yet
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "1")
    with caplog.at_level("WARNING", logger="adk.tracing"):
        for _ in range(2):
            await Runner(
                ReActAgent("calc", add_model(), tools=[add]), tracer_provider=provider
            ).invoke("q")
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "NO_CONTENT")
        Runner(ReActAgent("calc", add_model(), tools=[add]), tracer_provider=provider)
    found = set().union(*(attrs(s) for s in exporter.get_finished_spans())) & CONTENT_KEYS
    assert found == set()
    [record] = [r for r in caplog.records if r.name == "adk.tracing"]
    assert record.getMessage().startswith(
        f"{CAPTURE_CONTENT_ENV}='1' is not a value it takes, so message content is not captured"
    )


async def test_recorded_messages_stay_json_when_the_model_wrote_nan_in_a_call(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arguments ``{"a": NaN}`` were parsed (Python's parser takes NaN) and written back as NaN,
    so a backend could not parse the chat span's messages at all; they are kept as their text."""
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    raw = '{"a": NaN, "b": 2}'
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", raw, id="c")]), "done"])
    await Runner(ReActAgent("calc", model, tools=[add]), tracer_provider=provider).invoke("x")
    first, second = named(exporter.get_finished_spans(), "chat scripted")
    for text in (attrs(first)["gen_ai.output.messages"], attrs(second)["gen_ai.input.messages"]):
        parsed = json.loads(text, parse_constant=_refuse_constant)  # standard JSON
        calls = [p for m in parsed for p in m["parts"] if p["type"] == "tool_call"]
        assert calls[0]["arguments"] == raw


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"{name} in a recorded attribute")


async def test_the_tools_offered_to_the_model_are_recorded_with_the_content(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What the model could choose from explains what it chose: each chat span lists the tools
    # of its request, as the conventions' gen_ai.tool.definitions (opt-in: descriptions are
    # prompt text, and schemas can be large).
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    agent = ReActAgent("calc", add_model(), tools=[add])
    await Runner(agent, tracer_provider=provider).invoke("what is 1+2?")
    first, second = named(exporter.get_finished_spans(), "chat scripted")
    definitions = json.loads(attrs(first)["gen_ai.tool.definitions"])
    assert definitions == [
        {
            "type": "function",
            "name": "add",
            "description": add.spec.description,
            "parameters": add.spec.parameters,
        }
    ]
    assert json.loads(attrs(second)["gen_ai.tool.definitions"]) == definitions
    # A call offered no tools has no definitions to record.
    exporter.clear()
    await Runner(ReActAgent("plain", ScriptedModel(["ok"])), tracer_provider=provider).invoke("x")
    (chat,) = named(exporter.get_finished_spans(), "chat scripted")
    assert "gen_ai.tool.definitions" not in attrs(chat)


async def test_tool_definitions_stay_json_when_a_schema_holds_an_infinite_default(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parameter defaulting to ``float("inf")`` has ``inf`` in its schema, which ``json.dumps``
    wrote as ``Infinity``, so a backend could not parse the definitions at all; the number is
    recorded as that text and the rest as it is."""
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")

    @tool
    def clamp(value: float, upper: float = float("inf"), lower: float = -float("inf")) -> str:
        """Clamp a value."""
        return str(max(lower, min(value, upper)))

    agent = ReActAgent("calc", ScriptedModel(["ok"]), tools=[clamp, add])
    await Runner(agent, tracer_provider=provider).invoke("x")
    (chat,) = named(exporter.get_finished_spans(), "chat scripted")
    text = attrs(chat)["gen_ai.tool.definitions"]
    definitions = json.loads(text, parse_constant=_refuse_constant)  # standard JSON
    properties = definitions[0]["parameters"]["properties"]
    assert properties["upper"]["default"] == "Infinity"
    assert properties["lower"]["default"] == "-Infinity"
    assert properties["value"] == {"type": "number"}
    assert definitions[1]["parameters"] == add.spec.parameters  # the other tool as it is


# -- streams --------------------------------------------------------------------------------------
async def test_a_streaming_run_traces_each_streamed_call(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    agent = ReActAgent("calc", add_model(), tools=[add])
    runner = Runner(agent, enable_streaming=True, tracer_provider=provider)
    async for event in runner.run("1+2?"):
        if event.output is not None and event.output.stream is not None:
            async for _ in event.output.stream:
                pass
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent calc",
        "  chat scripted",
        "  execute_tool add",
        "  chat scripted",
    ]
    first, second = named(spans, "chat scripted")
    assert attrs(first)["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert (
        attrs(first)["gen_ai.usage.input_tokens"],
        attrs(first)["gen_ai.usage.output_tokens"],
    ) == (10, 4)
    assert attrs(second)["gen_ai.response.finish_reasons"] == ("stop",)
    output = json.loads(attrs(second)["gen_ai.output.messages"])
    assert output[0]["parts"] == [{"type": "text", "content": "sum=3"}]


async def test_a_streamed_call_says_it_streamed_and_when_its_first_chunk_came(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The conventions require gen_ai.request.stream on a streamed call (and only there) and
    # recommend its time to first chunk, on the span and as a histogram streamed calls alone feed.
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    for streaming in (False, True):
        runner = Runner(
            ReActAgent("calc", add_model(), tools=[add]),
            enable_streaming=streaming,
            tracer_provider=provider,
            meter_provider=meters,
        )
        await runner.invoke("1+2?", run_id="conv-7")
    chats = named(exporter.get_finished_spans(), "chat scripted")
    assert len(chats) == 4
    plain, streamed = chats[:2], chats[2:]
    for span in plain:
        assert "gen_ai.request.stream" not in attrs(span)
        assert "gen_ai.response.time_to_first_chunk" not in attrs(span)
    first = attrs(streamed[0])
    waited = first.pop("gen_ai.response.time_to_first_chunk")
    assert isinstance(waited, float) and waited >= 0
    assert first == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.conversation.id": "conv-7",
        "gen_ai.provider.name": "_OTHER",
        "gen_ai.request.stream": True,
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 4,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert attrs(streamed[1])["gen_ai.request.stream"] is True
    (first_chunk,) = _points(reader, "gen_ai.client.operation.time_to_first_chunk")
    assert first_chunk.count == 2  # the two streamed calls, not the plain ones
    assert dict(first_chunk.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.provider.name": "_OTHER",
    }
    assert first_chunk.explicit_bounds[:2] == (0.01, 0.02)
    (duration,) = _points(reader, "gen_ai.client.operation.duration")
    assert duration.count == 4
    meters.shutdown()


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_streamed_call_records_the_response_model_and_id_like_a_plain_one(
    api: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # Content capture is off (the default), so the traced stream keeps no chunks: what the adapter
    # puts in a chunk's metadata (Chat sends usage in a chunk after it) must still reach the span.
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    served = ServedReply(text="hello world", response_id="reply-42")
    async with OpenAIServer([served, served], model="served-model-v2") as server:
        model = wire_model(server, api)
        for streaming in (False, True):
            runner = Runner(
                ReActAgent("a", model),
                enable_streaming=streaming,
                tracer_provider=provider,
                meter_provider=meters,
            )
            await runner.invoke("hi")
        await model.aclose()
    plain, streamed = named(exporter.get_finished_spans(), "chat test-model")
    for span in (plain, streamed):
        assert attrs(span)["gen_ai.response.model"] == "served-model-v2"
        assert attrs(span)["gen_ai.response.id"] == "reply-42"
        assert attrs(span)["gen_ai.response.finish_reasons"] == ("stop",)
    assert (
        attrs(streamed)["gen_ai.usage.output_tokens"] == attrs(plain)["gen_ai.usage.output_tokens"]
    )
    (duration,) = _points(reader, "gen_ai.client.operation.duration")  # both calls, one series
    assert duration.count == 2
    assert dict(duration.attributes or {})["gen_ai.response.model"] == "served-model-v2"
    tokens = _points(reader, "gen_ai.client.token.usage")
    assert sorted(p.count for p in tokens) == [2, 2]
    meters.shutdown()


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_openai_span_says_the_tier_and_backend_that_served_the_call(
    api: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The OpenAI refinement requires openai.response.service_tier when the response names its
    # tier (what the call is billed at: a request for auto or flex does not say) and recommends
    # openai.response.system_fingerprint (Chat Completions only); neither was recorded. Plain and
    # streamed calls alike, capture off: the stream's chunks are not kept.
    served = ServedReply(text="hello", service_tier="default", system_fingerprint="fp_44709d6fcb")
    async with OpenAIServer([served, served]) as server:
        model = wire_model(server, api)
        options = ModelOptions(extra={"service_tier": "auto"})
        for streaming in (False, True):
            agent = ReActAgent("a", model, model_options=options)
            runner = Runner(agent, enable_streaming=streaming, tracer_provider=provider)
            await runner.invoke("hi")
        await model.aclose()
    expected = {"openai.response.service_tier": "default"}
    if api == "chat":  # the Responses API has no fingerprint
        expected["openai.response.system_fingerprint"] = "fp_44709d6fcb"
    for span in named(exporter.get_finished_spans(), "chat test-model"):
        found = {k: v for k, v in attrs(span).items() if k.startswith("openai.response.")}
        assert found == expected
    assert len(named(exporter.get_finished_spans(), "chat test-model")) == 2


async def test_chat_spans_and_metrics_name_the_server_the_model_talks_to(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # server.address / server.port tell calls to OpenAI itself from calls to a proxy, Azure or a
    # local server that all answer as "openai"; they go on the duration metric too.
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    async with OpenAIServer([ServedReply(text="hello")]) as server:
        model = wire_model(server)
        runner = Runner(ReActAgent("a", model), tracer_provider=provider, meter_provider=meters)
        await runner.invoke("hi")
        await model.aclose()
    port = int(server.base_url.split(":")[2].split("/")[0])
    (chat,) = named(exporter.get_finished_spans(), "chat test-model")
    assert (attrs(chat)["server.address"], attrs(chat)["server.port"]) == ("127.0.0.1", port)
    (duration,) = _points(reader, "gen_ai.client.operation.duration")
    measured = dict(duration.attributes or {})
    assert (measured["server.address"], measured["server.port"]) == ("127.0.0.1", port)
    for point in _points(reader, "gen_ai.client.token.usage"):
        assert dict(point.attributes or {})["server.port"] == port
    meters.shutdown()
    # A model of your own that has a base_url gets the same (the port is the scheme's default if
    # the URL has none); one without a base_url names no server.
    hosted = ScriptedModel(["ok"], model_name="hosted")
    hosted.base_url = "https://llm.example.com/v1"  # type: ignore[attr-defined]
    for model, expected in ((hosted, ("llm.example.com", 443)), (ScriptedModel(["ok"]), None)):
        exporter.clear()
        await Runner(ReActAgent("b", model), tracer_provider=provider).invoke("hi")
        (chat,) = named(exporter.get_finished_spans(), f"chat {model.model_name}")
        found = attrs(chat).get("server.address"), attrs(chat).get("server.port")
        assert found == (expected or (None, None))


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_openai_chat_span_has_the_openai_attributes(
    api: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The conventions' OpenAI refinement: openai.api.type (recommended) says which API the call
    # used, and openai.request.service_tier is required when the request names a tier but auto.
    served = ServedReply(text="hello", usage=(12, 5), response_id="resp-9")
    async with OpenAIServer([served, served], model="served-model") as server:
        model = wire_model(server, api)
        for tier in ("flex", "auto"):
            options = ModelOptions(extra={"service_tier": tier})
            agent = ReActAgent("a", model, model_options=options)
            await Runner(agent, tracer_provider=provider).invoke("hi", run_id="conv-1")
        await model.aclose()
    port = int(server.base_url.split(":")[2].split("/")[0])
    flex, auto = named(exporter.get_finished_spans(), "chat test-model")
    assert flex.kind == SpanKind.CLIENT
    assert attrs(flex) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "test-model",
        "gen_ai.conversation.id": "conv-1",
        "gen_ai.provider.name": "openai",
        "openai.api.type": {"chat": "chat_completions", "responses": "responses"}[api],
        "openai.request.service_tier": "flex",
        "server.address": "127.0.0.1",
        "server.port": port,
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 5,
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.response.model": "served-model",
        "gen_ai.response.id": "resp-9",
    }
    assert "openai.request.service_tier" not in attrs(auto)  # auto: the conventions leave it out
    # A model that is not OpenAI's gets no openai.* attribute, whatever it has.
    exporter.clear()
    other = ScriptedModel(["ok"])
    other.api = "chat"  # type: ignore[attr-defined]
    agent = ReActAgent("b", other, model_options=ModelOptions(extra={"service_tier": "flex"}))
    await Runner(agent, tracer_provider=provider).invoke("hi")
    (chat,) = named(exporter.get_finished_spans(), "chat scripted")
    assert not [key for key in attrs(chat) if key.startswith("openai.")]


# Token counts a provider reports inside usage's details. Prompt-cache hits are billed at a
# fraction of the input price: cost dashboards read them from gen_ai.usage.cache_read.input_tokens
# (part of gen_ai.usage.input_tokens, as OpenAI counts them). A reasoning model bills its thinking
# as output tokens nobody sees: gen_ai.usage.reasoning.output_tokens (part of
# gen_ai.usage.output_tokens; completion_tokens_details / output_tokens_details.reasoning_tokens).
# Each is: served (what the test server reports), the Usage field, the span's total and its part.
_DETAILED_TOKENS = {
    "cached": (
        ServedReply(text="hello", usage=(40, 3), cached_tokens=32),
        "cached_input_tokens",
        ("gen_ai.usage.input_tokens", 40),
        ("gen_ai.usage.cache_read.input_tokens", 32),
    ),
    "reasoning": (
        ServedReply(text="hello", usage=(40, 30), reasoning_tokens=24),
        "reasoning_output_tokens",
        ("gen_ai.usage.output_tokens", 30),
        ("gen_ai.usage.reasoning.output_tokens", 24),
    ),
}


@pytest.mark.parametrize("kind", sorted(_DETAILED_TOKENS))
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_detailed_token_counts_reach_the_reply_and_the_chat_span(
    api: str, kind: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    served, field, (total, total_count), (part, part_count) = _DETAILED_TOKENS[kind]
    assert served.usage is not None
    prompt, completion = served.usage
    async with OpenAIServer([served, served, served]) as server:
        model = wire_model(server, api)
        reply = await model.generate([Message.user("hi")])
        assert reply.usage == Usage(
            input_tokens=prompt,
            output_tokens=completion,
            total_tokens=prompt + completion,
            **{field: part_count},
        )
        for streaming in (False, True):
            runner = Runner(
                ReActAgent("a", model), enable_streaming=streaming, tracer_provider=provider
            )
            await runner.invoke("hi")
        await model.aclose()
    spans = named(exporter.get_finished_spans(), "chat test-model")
    assert len(spans) == 2  # plain and streamed alike
    for span in spans:
        assert attrs(span)[total] == total_count
        assert attrs(span)[part] == part_count
    # Without such tokens the attribute is left out, not recorded as 0.
    exporter.clear()
    await Runner(ReActAgent("b", add_model()), tracer_provider=provider).invoke("1+2?")
    assert not any(part in attrs(s) for s in exporter.get_finished_spans())
    # Usages add up, the part with the rest.
    assert Usage(output_tokens=5, **{field: 1}) + Usage(**{field: 2}) == Usage(
        output_tokens=5, **{field: 3}
    )


async def test_an_abandoned_stream_still_ends_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(["a long answer that streams in many chunks"], chunk_size=4)
    runner = Runner(ReActAgent("talker", model), enable_streaming=True, tracer_provider=provider)
    events = runner.run("talk")
    event = await anext(events)
    assert event.output is not None and event.output.stream is not None
    reader = aiter(event.output.stream)
    assert (await anext(reader)).content == "a lo"
    await events.aclose()  # the consumer walks away mid-stream
    await reader.aclose()  # type: ignore[attr-defined]
    del event, reader, events
    gc.collect()
    for _ in range(3):  # let asyncio finalise generators the agent left suspended
        await asyncio.sleep(0)
    gc.collect()
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == ["chat scripted", "invoke_agent talker"]
    (chat,) = named(spans, "chat scripted")
    assert events_of(chat) == ["adk.stream.closed_early"]


async def test_closing_a_stream_ends_its_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel(["a long answer that streams in many chunks"], chunk_size=4)
    runner = Runner(ReActAgent("talker", model), enable_streaming=True, tracer_provider=provider)
    events = runner.run("talk")
    event = await anext(events)
    assert event.output is not None and event.output.stream is not None
    async for _ in event.output.stream:
        break
    await event.output.stream.aclose()
    assert [s.name for s in exporter.get_finished_spans()] == ["chat scripted"]
    await events.aclose()


# -- OpenTelemetry's current context ------------------------------------------------------------
async def test_the_root_span_joins_the_callers_trace_and_tools_see_their_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("user-code")
    seen: list[str] = []

    @tool
    def look() -> str:
        """Looks around."""
        with tracer.start_as_current_span("user work"):
            pass
        current = trace.get_current_span()
        seen.append(getattr(current, "name", "?"))
        return "nothing"

    model = ScriptedModel([Reply(tool_calls=[tool_call("look")]), "done"])
    runner = Runner(ReActAgent("a", model, tools=[look]), tracer_provider=provider)
    with tracer.start_as_current_span("http request"):
        await runner.invoke("go")
        outside = trace.get_current_span()
    assert getattr(outside, "name", "") == "http request"  # nothing leaked into the caller
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "http request",
        "  invoke_agent a",
        "    chat scripted",
        "    execute_tool look",
        "      user work",
        "    chat scripted",
    ]
    assert seen == ["execute_tool look"]


class _BrokenProcessor(SpanProcessor):
    """A span processor that fails, as a vendor's or a team's own may: on the start of agent spans
    and on the end of tool and chat spans."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if span.name.startswith("invoke_agent"):
            raise RuntimeError("processor broke on start")

    def on_end(self, span: ReadableSpan) -> None:
        if span.name.startswith(("chat", "execute_tool")):
            raise RuntimeError("processor broke on end")


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_failing_span_processor_never_changes_the_run(
    streaming: bool,
    exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Telemetry must not change what a run does: a processor's failure was raised through the
    # runtime, so the root agent failed with "RuntimeError: processor broke on start" and a run
    # that had answered failed at its end. Now it is logged (once at WARNING) and the run goes
    # on; the spans that could be made still form the caller's trace.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # sees every span, first
    provider.add_span_processor(_BrokenProcessor())
    tracer = provider.get_tracer("user-code")
    agent = ReActAgent("calculator", add_model(), tools=[add])
    runner = Runner(agent, tracer_provider=provider, enable_streaming=streaming)
    with caplog.at_level("DEBUG", logger="adk.tracing"), tracer.start_as_current_span("request"):
        result = await runner.invoke("1+2?")
    provider.shutdown()
    assert result.text == "sum=3"
    assert [e.error for e in result.events] == [None, None, None]
    # The agent span was never handed back: its model and tool calls hang off the caller's span.
    assert tree(exporter.get_finished_spans()) == [
        "request",
        "  chat scripted",
        "  execute_tool add",
        "  chat scripted",
    ]
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [r.getMessage() for r in warnings] == [
        "the tracer provider failed to start span 'invoke_agent calculator' "
        "(RuntimeError: processor broke on start); the run goes on"
    ]
    assert warnings[0].exc_info is not None
    assert len([r for r in caplog.records if r.name == "adk.tracing"]) == 4  # then at DEBUG


class _Summarizer(BaseAgent):
    """A custom agent doing its own work between its events: a span of its own, a task it
    creates, what it reads as the current span, and a call of its model made directly."""

    def __init__(self, name: str, tracer: trace.Tracer, seen: list[str]) -> None:
        super().__init__(name)
        self.tracer = tracer
        self.seen = seen
        self.model = ScriptedModel(["short"])

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        with self.tracer.start_as_current_span(f"{self.name} fetch"):
            pass
        yield AgentEvent.of(Message.assistant("working"))
        self.seen.append(getattr(trace.get_current_span(), "name", "?"))
        await asyncio.create_task(self._background())
        yield AgentEvent.of(await self.model.generate(input.messages))

    async def _background(self) -> None:
        with self.tracer.start_as_current_span(f"{self.name} background"):
            pass


@pytest.mark.parametrize("where", ["invoke", "run", "step", "branch"])
async def test_a_custom_agents_own_work_nests_under_its_agent_span(
    where: str, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The agent span was never current while the agent's code ran: what a custom agent started
    # itself (its spans, the HTTP client span of a model SDK it calls directly, a task) hung off
    # whatever the run's reader had current, a sibling of its agent span. It is current now, for
    # each step of the agent's generator, and never while the reader has an event.
    tracer = provider.get_tracer("user-code")
    seen: list[str] = []
    agent: Agent = _Summarizer("summary", tracer, seen)
    if where == "step":
        agent = SequentialAgent("steps", [agent])
    elif where == "branch":
        agent = ParallelAgent("branches", [agent, _Summarizer("other", tracer, seen)])
    runner = Runner(agent, tracer_provider=provider)
    readers: list[str] = []
    with tracer.start_as_current_span("request"):
        if where == "invoke":
            await runner.invoke("a long text")
        else:
            async for _ in runner.run("a long text"):
                readers.append(getattr(trace.get_current_span(), "name", "?"))
    assert set(readers) <= {"request"}  # the reader never runs inside an agent's span
    spans = exporter.get_finished_spans()
    for name in ("summary", "other") if where == "branch" else ("summary",):
        (agent_span,) = named(spans, f"invoke_agent {name}")
        for child in (f"{name} fetch", f"{name} background"):
            (span,) = named(spans, child)
            assert parent_of(span, spans) is agent_span
    assert set(seen) == {"invoke_agent summary", "invoke_agent other"} & {s.name for s in spans}


class _Steps(BaseAgent):
    """A custom agent of a few events that calls no model: only its own steps are pulled."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        for text in ("one", "two", "three"):
            yield AgentEvent.of(Message.assistant(text))


async def test_a_runner_that_only_measures_pulls_its_agents_as_they_are(
    provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The agent span is made current around each step of an agent's generator only when spans
    # are recorded: a runner with a meter provider and no tracer provider (tracing's hooks, a
    # no-op tracer) wrapped every agent's generator too, attaching and detaching a context on
    # every event for a span that does not exist.
    attached: list[object] = []
    attach = otel_context.attach

    def counting(context: Any) -> Any:
        attached.append(context)
        return attach(context)

    monkeypatch.setattr(otel_context, "attach", counting)
    meters = MeterProvider(metric_readers=[InMemoryMetricReader()])
    measured = Runner(SequentialAgent("steps", [_Steps("a")]), meter_provider=meters)
    assert measured._hooks is not None  # the metrics need the hooks
    assert (await measured.invoke("go")).text == "three"
    assert attached == []
    # Traced, each step of both agents' generators runs in its span (what the above would count).
    traced = Runner(SequentialAgent("steps", [_Steps("a")]), tracer_provider=provider)
    assert (await traced.invoke("go")).text == "three"
    assert len(attached) >= 4
    meters.shutdown()


# -- tracing and callbacks ----------------------------------------------------------------------
async def test_tracing_records_real_calls_whatever_callbacks_do(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    calls = {"model": 0}

    def cache(ctx: Any, request: Any) -> Message | None:
        calls["model"] += 1
        return Message.assistant("cached") if calls["model"] == 2 else None

    def shout(ctx: Any, request: Any, reply: Message) -> Message:
        return Message.assistant(reply.content.upper(), reply.tool_calls)

    def skip_tool(ctx: ToolContext, call: Any) -> str:
        return "4"

    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})])])
    callbacks = Callbacks(before_model=cache, after_model=shout, before_tool=skip_tool)
    runner = Runner(
        ReActAgent("a", model, tools=[add]), callbacks=[callbacks], tracer_provider=provider
    )
    result = await runner.invoke("go")
    assert result.text == "CACHED"
    spans = exporter.get_finished_spans()
    # One real model call; the cached one and the skipped tool have no span.
    assert tree(spans) == ["invoke_agent a", "  chat scripted"]
    (chat,) = named(spans, "chat scripted")
    parts = json.loads(attrs(chat)["gen_ai.output.messages"])[0]["parts"]
    assert parts[0]["type"] == "tool_call"  # what the model said, not the callback's version


# -- no SDK: no cost ----------------------------------------------------------------------------
def test_no_configured_sdk_means_no_hooks() -> None:
    agent = ReActAgent("a", ScriptedModel(["x"]))
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        pytest.skip("something in this process set a global tracer provider")
    assert Runner(agent)._hooks is None
    noop = Runner(agent, tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider())
    assert noop._hooks is None
    assert Runner(agent, tracer_provider=TracerProvider())._hooks is not None


def test_a_provider_that_is_not_one_is_refused_where_the_runner_is_made() -> None:
    """The provider's class (``()`` forgotten) failed with ``get_tracer() missing 1 required
    positional argument``, and a tracer, or a meter provider given as the tracer provider, with
    an ``AttributeError`` about ``get_tracer``."""
    agent = ReActAgent("a", ScriptedModel(["x"]))
    with pytest.raises(TypeError, match=r"tracer_provider is the class TracerProvider, not a pro"):
        Runner(agent, tracer_provider=TracerProvider)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"meter_provider is the class MeterProvider, not a provi"):
        Runner(agent, meter_provider=MeterProvider)  # type: ignore[arg-type]
    tracer = TracerProvider().get_tracer("mine")
    with pytest.raises(TypeError, match=r"must be an OpenTelemetry TracerProvider .* got Tracer"):
        Runner(agent, tracer_provider=tracer)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"TracerProvider \(it has get_tracer\), got MeterProvider"):
        Runner(agent, tracer_provider=MeterProvider())  # type: ignore[arg-type]


_GLOBAL_SCRIPT = """
import asyncio, sys
import adk
from adk.testing import ScriptedModel
from prebuilt import ReActAgent

agent = ReActAgent("a", ScriptedModel(["x"], cycle=True))
plain = adk.Runner(agent)
assert plain._hooks is None
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry") or m == "adk.tracing")
assert not loaded, loaded

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
traced = adk.Runner(agent)  # built after the global provider was set: uses it
asyncio.run(traced.invoke("hi"))
print(sorted(s.name for s in exporter.get_finished_spans()))
"""


def test_global_provider_is_used_and_plain_runs_never_load_opentelemetry() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(CAPTURE_CONTENT_ENV, None)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_GLOBAL_SCRIPT)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['chat scripted', 'invoke_agent a']"


_LATE_PROVIDER_SCRIPT = """
import asyncio
import adk
from adk.testing import ScriptedModel
from prebuilt import ReActAgent

seen = []

class Seen(adk.Callbacks):
    def on_event(self, event):
        seen.append(event.agent_name)

# At import time, before any provider: one plain, one with callbacks, one given its own.
early = adk.Runner(ReActAgent("early", ScriptedModel(["x"], cycle=True)))
watched = adk.Runner(ReActAgent("watched", ScriptedModel(["x"], cycle=True)), callbacks=[Seen()])
from adk.execution import LocalExecutionEnvironment
records = LocalExecutionEnvironment().from_list(["hi"], key=lambda r: "k1")
pipeline = records.apply(ReActAgent("keyed", ScriptedModel(["x"])))

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

own_exporter = InMemorySpanExporter()
own_provider = TracerProvider()
own_provider.add_span_processor(SimpleSpanProcessor(own_exporter))
own = adk.Runner(ReActAgent("own", ScriptedModel(["x"], cycle=True)), tracer_provider=own_provider)

asyncio.run(early.invoke("before"))  # no provider yet: untraced
asyncio.run(watched.invoke("before"))

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # later, in main()
asyncio.run(early.invoke("hi"))
asyncio.run(early.invoke("again"))
asyncio.run(watched.invoke("hi"))
asyncio.run(own.invoke("hi"))
late = adk.Runner(ReActAgent("late", ScriptedModel(["x"])))
asyncio.run(late.invoke("hi"))
print(sorted(s.name for s in exporter.get_finished_spans()))
exporter.clear()
asyncio.run(pipeline.to_list())
print([dict(s.attributes)["adk.record.key"] for s in exporter.get_finished_spans() if s.name == "invoke_agent keyed"])
print(sorted(s.name for s in own_exporter.get_finished_spans()))
print(seen)
"""


def test_a_runner_built_before_the_global_provider_is_traced_once_one_is_set() -> None:
    """A runner made at import time, telemetry set up later in ``main()``: the choice of tracing
    was made when the runner was built, so it stayed untraced (its first run only said so).
    Each run now looks whether a global provider has been set since, and traces once one has;
    its callbacks go on, a pipeline's records are traced with their keys, and a runner given
    ``tracer_provider=`` keeps its own."""
    proc = _run_python(["-c", textwrap.dedent(_LATE_PROVIDER_SCRIPT)])
    assert proc.returncode == 0, proc.stderr
    traced, keyed, own, seen = proc.stdout.strip().splitlines()
    runs = ["early", "early", "watched", "late"]  # none from before the provider was set
    assert traced == str(
        sorted(name for run in runs for name in ("chat scripted", f"invoke_agent {run}"))
    )
    assert keyed == "['k1']"  # a record's root span names it (set before the run begins)
    assert own == "['chat scripted', 'invoke_agent own']"
    assert seen == "['watched', 'watched']"
    assert "not traced" not in proc.stderr


_LATE_NOOP_SCRIPT = """
import asyncio
import adk
from adk.testing import ScriptedModel
from prebuilt import ReActAgent

early = adk.Runner(ReActAgent("early", ScriptedModel(["x"], cycle=True)))
from opentelemetry import metrics, trace
asyncio.run(early.invoke("hi"))
print(early._late_global)  # OpenTelemetry imported, nothing set: it goes on looking for both
trace.set_tracer_provider(trace.NoOpTracerProvider())
asyncio.run(early.invoke("hi"))
print(early._late_global, early._hooks)  # still looking for a meter provider
metrics.set_meter_provider(metrics.NoOpMeterProvider())
asyncio.run(early.invoke("hi"))
print(early._late_global, early._hooks)
"""


def test_a_runner_built_before_a_no_op_global_provider_stops_looking_and_stays_untraced() -> None:
    """A global provider that records nothing, set after the runner was built: the runner stays
    without hooks and stops its per-run look for it, as OpenTelemetry sets its global provider
    once; it stops looking altogether once both the tracer and the meter provider are set."""
    proc = _run_python(["-c", textwrap.dedent(_LATE_NOOP_SCRIPT)])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["3", "2", "None", "0", "None"]


_LATE_METER_SCRIPT = """
import asyncio
import adk
from adk.testing import ScriptedModel
from prebuilt import ReActAgent

# At import time, before any provider: a plain runner, a pipeline, a runner with its own tracer.
early = adk.Runner(ReActAgent("early", ScriptedModel(["x"], cycle=True)))
from adk.execution import LocalExecutionEnvironment
records = LocalExecutionEnvironment().from_list(["hi"], key=lambda r: "k1")
pipeline = records.apply(ReActAgent("keyed", ScriptedModel(["x"])))

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

own_spans = InMemorySpanExporter()
own_provider = TracerProvider()
own_provider.add_span_processor(SimpleSpanProcessor(own_spans))
own = adk.Runner(ReActAgent("own", ScriptedModel(["x"], cycle=True)), tracer_provider=own_provider)
asyncio.run(early.invoke("before"))  # no provider yet: unmeasured
asyncio.run(own.invoke("before"))  # traced by its own, no meter yet

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))  # later, in main()
asyncio.run(early.invoke("hi"))
asyncio.run(own.invoke("hi"))
asyncio.run(pipeline.to_list())

def agents(name):
    found = []
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        found.append((point.attributes.get("gen_ai.agent.name")
                                      or point.attributes.get("gen_ai.token.type"), point.count))
    return sorted(found)

print(agents("gen_ai.invoke_agent.duration"))
print(agents("gen_ai.client.operation.duration"))
print(len(own_spans.get_finished_spans()))  # its own tracer kept, before and after
print(early._late_global, own._late_global)  # the tracer still awaited by early, none by own

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # the tracer after the meter: both kept
asyncio.run(early.invoke("again"))
print(sorted(s.name for s in exporter.get_finished_spans()))
print(agents("gen_ai.invoke_agent.duration"))
print(early._late_global)
"""


def test_a_runner_built_before_the_global_meter_provider_is_measured_once_one_is_set() -> None:
    """As for a late tracer provider: a runner (or an execution environment's pipeline) built
    before ``set_meter_provider`` recorded no metrics ever after, since the choice was made when
    it was built. Each run now looks for the meter provider as for the tracer provider; a runner
    given its own tracer provider keeps it and picks up the global meter provider, and a tracer
    provider set after the meter provider is picked up with the metrics kept."""
    proc = _run_python(["-c", textwrap.dedent(_LATE_METER_SCRIPT)])
    assert proc.returncode == 0, proc.stderr
    agents, chats, own, late, traced, agents_after, late_after = proc.stdout.strip().splitlines()
    assert agents == "[('early', 1), ('keyed', 1), ('own', 1)]"  # none from before the provider
    assert chats == "[(None, 3)]"  # one series: the three runs' model calls, all 'scripted'
    assert own == "4"
    assert late == "1 0"
    assert traced == "['chat scripted', 'invoke_agent early']"
    assert agents_after == "[('early', 2), ('keyed', 1), ('own', 1)]"
    assert late_after == "0"


# -- the example and the docs ---------------------------------------------------------------------
def _run_python(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(CAPTURE_CONTENT_ENV, None)
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
        check=False,
    )


def test_the_example_service_answers_over_http_and_prints_its_spans() -> None:
    proc = _run_python(["examples/traced_service.py"])
    assert proc.returncode == 0, proc.stderr
    assert "answer: The sum is 5.0." in proc.stdout
    names = re.findall(r'^    "name": "([^"]+)"', proc.stdout, re.MULTILINE)
    assert sorted(names) == [
        "chat scripted-calculator",
        "chat scripted-calculator",
        "execute_tool add",
        "invoke_agent calculator",
    ]


def _doc_snippets() -> list[str]:
    text = (REPO / "docs" / "tracing.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    return [b for b in blocks if not b.startswith("# not run")]


@pytest.mark.parametrize("index", range(len(_doc_snippets())))
def test_the_python_snippets_in_the_tracing_docs_run(index: int) -> None:
    proc = _run_python(["-c", _doc_snippets()[index]])
    assert proc.returncode == 0, proc.stderr


# -- event-driven agents and keyed execution ------------------------------------------------------
async def test_an_action_agents_model_and_tool_calls_are_spans_of_its_run(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    agent = calculator(model_name="calc-model")
    result = await Runner(agent, tracer_provider=provider).invoke("1+2?")
    assert result.text == "sum=3"
    spans = exporter.get_finished_spans()
    assert tree(spans) == [
        "invoke_agent calculator",
        "  chat calc-model",
        "  execute_tool add",
        "  chat calc-model",
    ]
    [tool_span] = named(spans, "execute_tool add")
    assert attrs(tool_span)["gen_ai.tool.name"] == "add"

    exporter.clear()
    env = LocalExecutionEnvironment(tracer_provider=provider)
    outputs = await env.from_list(["1+2?", "2+1?"]).apply(agent).to_list()
    assert [o.output for o in outputs] == ["sum=3", "sum=3"]
    roots = named(exporter.get_finished_spans(), "invoke_agent calculator")
    assert len(roots) == 2 and roots[0].context.trace_id != roots[1].context.trace_id


async def test_a_records_output_and_error_name_its_trace(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A pipeline's failed record must lead to its trace: its output (or ``RecordError``) carries
    its run's id, which its spans report as ``gen_ai.conversation.id``; a paused record keeps it
    through its resume. (Each record's run id was made up inside its run, and nothing that came
    out of the environment said which trace was whose.)"""

    class Picky(ActionAgent):
        @action(InputEvent)
        def check(self, event: InputEvent, ctx: ActionContext) -> None:
            if event.input["n"] == 1 and ctx.resume is None:
                raise Interrupt("go on?")
            if event.input["n"] == 2:
                raise ValueError("bad record")
            ctx.send_event(OutputEvent(output=event.input["n"]))

    def conversation_of(spans: Sequence[ReadableSpan]) -> list[str]:
        return [attrs(span)["gen_ai.conversation.id"] for span in named(spans, "invoke_agent p")]

    records = [{"k": "a", "n": 0}, {"k": "a", "n": 1}, {"k": "b", "n": 2}]
    env = LocalExecutionEnvironment(
        tracer_provider=provider, on_error="emit", checkpoint_store=InMemoryCheckpointStore()
    )
    applied = env.from_list(records, key="k").apply(Picky("p"))
    done, paused, failed = await applied.to_list()
    assert failed.error is not None and failed.run_id is not None
    [failed_span] = [
        s for s in exporter.get_finished_spans() if s.status.status_code == StatusCode.ERROR
    ]
    assert attrs(failed_span)["gen_ai.conversation.id"] == failed.run_id
    assert sorted(conversation_of(exporter.get_finished_spans())) == sorted(
        [done.run_id, paused.run_id, failed.run_id]
    )
    exporter.clear()
    [resumed] = await applied.resume(paused, "yes")
    assert resumed.run_id == paused.run_id
    assert conversation_of(exporter.get_finished_spans()) == [paused.run_id]

    raising = LocalExecutionEnvironment(tracer_provider=provider)
    exporter.clear()
    with pytest.raises(RecordError) as caught:
        await raising.from_list(records[2:], key="k").apply(Picky("p")).to_list()
    assert conversation_of(exporter.get_finished_spans()) == [caught.value.run_id]


async def test_a_record_cut_off_by_its_timeout_fails_its_root_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The record fails with a TimeoutError naming its run; its trace showed a root span that
    ended without an error (cancelled, at best), so the run its output led to looked fine."""
    started = asyncio.Event()
    env = LocalExecutionEnvironment(tracer_provider=provider, on_error="emit", timeout=0.05)
    agent = ReActAgent("slow", HangingModel(started))
    [failed] = await env.from_list([{"k": "a"}], key="k").apply(agent).to_list()
    assert failed.error is not None and failed.error.type == "TimeoutError"
    spans = exporter.get_finished_spans()
    (root,) = named(spans, "invoke_agent slow")
    assert attrs(root)["gen_ai.conversation.id"] == failed.run_id
    assert root.status.status_code == StatusCode.ERROR
    assert attrs(root)["error.type"] == "TimeoutError"
    assert root.status.description == f"TimeoutError: {failed.error.message}"
    assert events_of(root) == []  # an error, not a cancellation
    (chat,) = named(spans, "chat hanging")  # the call it was waiting for was cancelled
    assert chat.status.status_code == StatusCode.UNSET and events_of(chat) == ["adk.cancelled"]


async def test_a_record_cut_off_inside_an_agent_tool_fails_only_its_root_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """An AgentTool's nested run shares the record's run id; its agent was cut off, not failed."""
    started = asyncio.Event()
    inner = ReActAgent("inner", HangingModel(started), description="Never answers.")
    call = tool_call("inner", {"request": "go"}, id="t")
    outer = ReActAgent("outer", ScriptedModel([Reply(tool_calls=[call])]), tools=[AgentTool(inner)])
    env = LocalExecutionEnvironment(tracer_provider=provider, on_error="emit", timeout=0.05)
    [failed] = await env.from_list(["x"]).apply(outer).to_list()
    assert failed.error is not None and failed.error.type == "TimeoutError"
    spans = exporter.get_finished_spans()
    (root,) = named(spans, "invoke_agent outer")
    assert root.status.status_code == StatusCode.ERROR and events_of(root) == []
    for name in ("execute_tool inner", "invoke_agent inner", "chat hanging"):
        (span,) = named(spans, name)
        assert span.status.status_code == StatusCode.UNSET, name
        assert events_of(span) == ["adk.cancelled"], name


@pytest.mark.parametrize("where", ["before_agent", "after_agent"])
async def test_a_record_cut_off_in_an_agent_callback_fails_its_root_span(
    provider: TracerProvider, exporter: InMemorySpanExporter, where: str
) -> None:
    """A record's timeout that cut off its root agent's before_agent callback ended the root
    span merely cancelled (the span is closed where the callback failed, without the check for
    the record's timeout), and one that cut off its after_agent callback ended it as if the agent
    had finished: the record's output said TimeoutError, its trace did not."""

    async def hang(agent: Any, ctx: RunContext, *error: Any) -> None:
        await asyncio.Event().wait()

    env = LocalExecutionEnvironment(
        tracer_provider=provider,
        on_error="emit",
        timeout=0.05,
        callbacks=[Callbacks(**{where: hang})],
    )
    agent = ReActAgent("slow", ScriptedModel(["done"]))
    [failed] = await env.from_list([{"k": "a"}], key="k").apply(agent).to_list()
    assert failed.error is not None and failed.error.type == "TimeoutError"
    (root,) = named(exporter.get_finished_spans(), "invoke_agent slow")
    assert attrs(root)["gen_ai.conversation.id"] == failed.run_id
    assert root.status.status_code == StatusCode.ERROR
    assert attrs(root)["error.type"] == "TimeoutError"
    assert root.status.description == f"TimeoutError: {failed.error.message}"
    assert events_of(root) == []


class _Fickle:
    """A tool whose spec can be read while its agent is built, and fails once ``broken``."""

    broken = False

    @property
    def spec(self) -> ToolSpec:
        if self.broken:
            raise RuntimeError("spec gone")
        return ToolSpec(name="fickle", description="Changes its mind.")

    async def run(self, arguments: str, ctx: ToolContext) -> str:
        return "ran"


@tool(description="")
def quiet() -> str:
    return "hush"


async def test_tool_spans_carry_the_description_of_the_tool_that_ran(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """``gen_ai.tool.description`` (recommended by the conventions on ``execute_tool``) comes from
    the spec of the tool that answered the call — with or without tool callbacks around it, left
    out when empty or when the spec cannot be read, and never failing the call."""
    inner = ReActAgent("helper", ScriptedModel(["inner answer"]), description="Helps.")
    calls = [
        tool_call("add", {"a": 1, "b": 2}, id="c1"),
        tool_call("helper", {"request": "help"}, id="c2"),
        tool_call("quiet", {}, id="c3"),
        tool_call("fickle", {}, id="c4"),
        tool_call("nope", {}, id="c5"),
    ]

    def descriptions() -> dict[str, Any]:
        spans = exporter.get_finished_spans()
        found = {}
        for span in spans:  # "nope" is no tool of the agent's: its span is "execute_tool"
            if attrs(span)["gen_ai.operation.name"] == "execute_tool":
                found[attrs(span)["gen_ai.tool.call.id"]] = attrs(span).get(
                    "gen_ai.tool.description"
                )
        return found

    expected = {"c1": "Add two integers.", "c2": "Helps.", "c3": None, "c4": None, "c5": None}
    for callbacks in ([], [Callbacks(before_tool=lambda ctx, call: None)]):
        exporter.clear()
        model = ScriptedModel([Reply(tool_calls=calls), "done"])
        fickle = _Fickle()
        runner = Runner(
            ReActAgent("boss", model, tools=[add, AgentTool(inner), quiet, fickle]),
            tracer_provider=provider,
            callbacks=callbacks,
        )
        fickle.broken = True
        assert (await runner.invoke("go")).text == "done"
        assert descriptions() == expected
        answers = {m.tool_call_id: m.content for m in model.requests[1].messages}
        assert answers["c4"] == "ran"  # the unreadable spec did not fail the call


class _Keyed(ActionAgent):
    """Echoes its record's ``n``; pauses on ``n == 1`` until resumed; with ``nested``, runs a runner
    of its own inside (a record's run that starts another run)."""

    def __init__(self, name: str, nested: Runner | None = None, share_run_id: bool = False) -> None:
        super().__init__(name)
        self._nested = nested
        self._share = share_run_id  # the nested run gets the record's run id (one conversation)

    @action(InputEvent)
    async def check(self, event: InputEvent, ctx: ActionContext) -> None:
        n = event.input["n"] if isinstance(event.input, dict) else 0  # a plain run: text
        if n == 1 and ctx.resume is None:
            raise Interrupt("go on?")
        if self._nested is not None:
            await self._nested.invoke(
                "inner", run_id=ctx.run_context.run_id if self._share else None
            )
        ctx.send_event(OutputEvent(output=n))


async def test_a_records_root_span_carries_its_key_and_index(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A trace backend must find "all runs of customer 42": the root ``invoke_agent`` span of a
    record's run carries ``adk.record.key`` and ``adk.record.index`` (a resume's too); only that
    span, and not the root span of another runner's run started inside the record's."""
    records = [{"k": "acme", "n": 0}, {"k": 42, "n": 1}, {"k": "acme", "n": 2}]
    env = LocalExecutionEnvironment(
        tracer_provider=provider, checkpoint_store=InMemoryCheckpointStore()
    )
    applied = env.from_list(records, key="k").apply(_Keyed("p"))
    first, paused, third = await applied.to_list()
    assert paused.interrupt is not None
    roots = named(exporter.get_finished_spans(), "invoke_agent p")
    found = {
        attrs(s)["gen_ai.conversation.id"]: (
            attrs(s)["adk.record.key"],
            attrs(s)["adk.record.index"],
        )
        for s in roots
    }
    assert found == {first.run_id: ("acme", 0), paused.run_id: (42, 1), third.run_id: ("acme", 2)}

    exporter.clear()
    [resumed] = await applied.resume(paused, "yes")
    assert resumed.output == 1
    [root] = named(exporter.get_finished_spans(), "invoke_agent p")
    assert (attrs(root)["adk.record.key"], attrs(root)["adk.record.index"]) == (42, 1)

    # The record's run starts a run of another runner: that run's root span is not the record's.
    exporter.clear()
    inner = Runner(ReActAgent("inner", ScriptedModel(["hi"])), tracer_provider=provider)
    outputs = await env.from_list([{"k": "z", "n": 0}], key="k").apply(_Keyed("p", inner)).to_list()
    assert [o.output for o in outputs] == [0]
    spans = exporter.get_finished_spans()
    [outer_root], [inner_root] = named(spans, "invoke_agent p"), named(spans, "invoke_agent inner")
    assert attrs(outer_root)["adk.record.key"] == "z"
    assert "adk.record.key" not in attrs(inner_root) and "adk.record.index" not in attrs(inner_root)

    # A plain run of the same agent names no record.
    exporter.clear()
    await Runner(_Keyed("p"), tracer_provider=provider).invoke("x")
    [plain] = named(exporter.get_finished_spans(), "invoke_agent p")
    assert "adk.record.key" not in attrs(plain)


async def test_a_runner_of_its_own_given_the_records_run_id_does_not_name_the_record(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A record's run that starts a run of another runner under the record's run id (one
    conversation id for both): the record was told by the run id, so that run's root span named
    the record too, and "all runs of key z" found the delegate's run as a second record run."""
    env = LocalExecutionEnvironment(tracer_provider=provider)
    inner = Runner(ReActAgent("inner", ScriptedModel(["hi"])), tracer_provider=provider)
    keyed = _Keyed("p", inner, share_run_id=True)
    outputs = await env.from_list([{"k": "z", "n": 0}], key="k").apply(keyed).to_list()
    assert [o.output for o in outputs] == [0]
    spans = exporter.get_finished_spans()
    [outer_root], [inner_root] = named(spans, "invoke_agent p"), named(spans, "invoke_agent inner")
    assert (
        attrs(inner_root)["gen_ai.conversation.id"] == attrs(outer_root)["gen_ai.conversation.id"]
    )
    assert attrs(outer_root)["adk.record.key"] == "z"
    assert "adk.record.key" not in attrs(inner_root) and "adk.record.index" not in attrs(inner_root)


class _Opaque:
    def __hash__(self) -> int:
        return 1

    def __str__(self) -> str:
        raise RuntimeError("no text")


async def test_record_keys_become_attribute_values_a_backend_can_search(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """OpenTelemetry attributes are strings, booleans, floats and 64-bit integers: other keys are
    recorded as their ``str``; a key with no ``str`` is left out (the record runs the same). No key
    selector: the key is the record's position, as on ``KeyedOutput.key``."""
    opaque = _Opaque()
    # (No bool or float keys: records refuse them, docs/event_driven.md#what-a-key-may-be.)
    keys: list[Any] = [("acme", 42), 2**64, 7, opaque]
    env = LocalExecutionEnvironment(tracer_provider=provider, max_concurrency=1)
    records = [{"k": key, "n": 0} for key in keys]
    outputs = await env.from_list(records, key="k").apply(_Keyed("p")).to_list()
    assert [o.key for o in outputs] == keys
    by_index = {
        attrs(s)["adk.record.index"]: attrs(s).get("adk.record.key")
        for s in named(exporter.get_finished_spans(), "invoke_agent p")
    }
    assert by_index == {0: "('acme', 42)", 1: str(2**64), 2: 7, 3: None}

    exporter.clear()
    await env.from_list([{"n": 0}, {"n": 2}]).apply(_Keyed("p")).to_list()
    found = [
        (attrs(s)["adk.record.key"], attrs(s)["adk.record.index"])
        for s in named(exporter.get_finished_spans(), "invoke_agent p")
    ]
    assert sorted(found) == [(0, 0), (1, 1)]


async def test_an_agent_span_carries_the_token_usage_of_its_own_model_calls(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """``gen_ai.usage.input_tokens``/``output_tokens`` on ``invoke_agent`` (recommended by the
    conventions): the sum over the agent's own model calls that reported usage — streamed ones
    too, an ``AgentTool``'s inner agent apart — and none on an agent that made no such call (a
    workflow agent, a model that reports no usage), so nothing is counted twice up the tree."""

    def team() -> SequentialAgent:
        inner = ReActAgent(
            "helper",
            ScriptedModel([Reply(text="inner", usage=Usage(input_tokens=7, output_tokens=2))]),
            description="Helps.",
        )
        boss_model = ScriptedModel(
            [
                Reply(
                    tool_calls=[tool_call("helper", {"request": "help"}, id="h")],
                    usage=Usage(input_tokens=5, output_tokens=1),
                ),
                Reply(text="done", usage=Usage(input_tokens=9, output_tokens=3)),
            ]
        )
        boss = ReActAgent("boss", boss_model, tools=[AgentTool(inner)])
        quiet = ReActAgent("quiet", add_model(usage=False), tools=[add])
        return SequentialAgent("team", [boss, quiet])

    for streaming in (False, True):
        exporter.clear()
        runner = Runner(team(), tracer_provider=provider, enable_streaming=streaming)
        async for event in runner.run("go"):
            if event.output is not None and event.output.stream is not None:
                async for _ in event.output.stream:
                    pass
        usage = {
            span.name: (
                attrs(span).get("gen_ai.usage.input_tokens"),
                attrs(span).get("gen_ai.usage.output_tokens"),
            )
            for span in exporter.get_finished_spans()
            if span.name.startswith("invoke_agent ")
        }
        assert usage == {
            "invoke_agent team": (None, None),
            "invoke_agent boss": (14, 4),
            "invoke_agent helper": (7, 2),
            "invoke_agent quiet": (None, None),
        }, streaming


@pytest.mark.parametrize("cleanup", ["except CancelledError", "anyio shielded scope"])
async def test_a_run_that_finishes_in_a_cancelled_tasks_cleanup_says_its_agents_completed(
    provider: TracerProvider, exporter: InMemorySpanExporter, cleanup: str
) -> None:
    """A run made and finished in the cleanup of a task being cancelled (``except
    CancelledError: await runner.invoke(...); raise``, or an anyio shielded scope in a cancelled
    one: a service's goodbye on shutdown) ran every agent to its end, yet the task's pending
    cancellation, which came before the run started, made each span say
    adk.agent.outcome=cancelled. Only a cancellation that came during the agent cuts it off."""
    import anyio

    runner = Runner(
        SequentialAgent(
            "steps",
            [
                ReActAgent("first", ScriptedModel(["one"])),
                ReActAgent("second", ScriptedModel(["two"])),
            ],
        ),
        enable_streaming=True,
        tracer_provider=provider,
    )
    answers: list[str] = []
    started = asyncio.Event()

    async def service() -> None:
        if cleanup == "except CancelledError":
            try:
                started.set()
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                answers.append((await runner.invoke("bye")).text)
                raise
        else:
            with anyio.CancelScope():
                try:
                    started.set()
                    await asyncio.Event().wait()
                finally:
                    with anyio.CancelScope(shield=True):
                        answers.append((await runner.invoke("bye")).text)

    task = asyncio.create_task(service())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert answers == ["two"]
    outcomes = {
        attrs(s)["gen_ai.agent.name"]: attrs(s)["adk.agent.outcome"]
        for s in exporter.get_finished_spans()
        if s.name.startswith("invoke_agent")
    }
    assert outcomes == dict.fromkeys(["steps", "first", "second"], "completed")
