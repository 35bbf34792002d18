"""A supervisor-style app as a user would build it for production, end to end over real wires.

A ``Supervisor`` over three workers: ``research`` (a ``ReActAgent`` whose tools come from the demo
MCP server over streamable HTTP, a real process), ``writer`` (an ``output_schema`` answer) and
``payments`` (a ``refund`` tool that needs a person's approval). Every model is an
``OpenAIChatModel`` talking to ``tests/openai_server.py``, a real HTTP server speaking the OpenAI
protocol, one scripted reply per request in the order the run makes them. The run streams to the
user, pauses for approval with its checkpoint in SQLite, and is resumed by a new ``Runner`` over
the same file (as another process would), traced with OpenTelemetry.

The tests push on the seams between those parts: approvals (edited, rejected, two in one run),
the MCP server dropping its connection, the model API failing then recovering, malformed tool
arguments, a reader leaving mid-stream, usage totals, the trace tree, and the run's turn limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from app_wire import wire_server
from conftest import wire_model
from mcp_servers.process import HTTPServerProcess
from openai_server import Call, OpenAIServer
from openai_server import Reply as Wire
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import adk
from adk import AgentEvent, RetryPolicy, Runner, ToolContext, Usage
from adk.checkpoint import SQLiteCheckpointStore
from adk.mcp import HTTPServer, MCPToolset
from prebuilt import ReActAgent, Supervisor

pytestmark = pytest.mark.asyncio(loop_scope="module")


# -- the app ---------------------------------------------------------------------------------------


class Brief(BaseModel):
    """The writer's answer."""

    title: str
    body: str


REFUNDS: list[tuple[str, int]] = []


@adk.tool(require_approval=True)
def refund(order_id: str, amount_cents: int) -> str:
    """Refund an order. A person approves every refund.

    Args:
        order_id: The order to refund.
        amount_cents: How much, in cents.
    """
    REFUNDS.append((order_id, amount_cents))
    return f"refunded {amount_cents} on {order_id}"


@adk.tool
def order_status(order_id: str, ctx: ToolContext) -> str:
    """The status of an order."""
    return f"{order_id}: delivered"


def build_app(
    model_url: str,
    mcp_url: str,
    *,
    retry: RetryPolicy | None = None,
    api: str = "chat",
    max_transfers: int | None = None,
) -> Supervisor:
    """The same agents in every process: a checkpoint holds state, not code."""

    def model() -> adk.OpenAIChatModel:
        options = {"retry": retry} if retry is not None else {}
        return wire_model(model_url, api, name="gpt-test", **options)

    research = ReActAgent(
        "research",
        model(),
        instruction="Research with your tools.",
        description="Looks facts up (weather, sums).",
        tools=[
            MCPToolset(
                HTTPServer(mcp_url),
                tool_filter=["forecast", "add", "die", "work", "hang", "hang_stats"],
                call_timeout=20,
            )
        ],
    )
    writer = ReActAgent(
        "writer",
        model(),
        instruction="Write a short brief.",
        description="Writes briefs.",
        output_schema=Brief,
    )
    payments = ReActAgent(
        "payments",
        model(),
        instruction="Handle refunds.",
        description="Refunds orders.",
        tools=[refund, order_status],
    )
    boss = ReActAgent("boss", model(), instruction="Delegate, then answer.", description="Boss.")
    return Supervisor(boss, [research, writer, payments], max_transfers=max_transfers)


def to(agent: str, call_id: str = "t1") -> Wire:
    return Wire(
        tool_calls=[Call("transfer_to_agent", json.dumps({"agent_name": agent}), id=call_id)]
    )


def calls(name: str, arguments: dict[str, Any], call_id: str) -> Wire:
    return Wire(tool_calls=[Call(name, json.dumps(arguments), id=call_id)])


async def read(events: AsyncIterator[AgentEvent], shown: list[str]) -> list[AgentEvent]:
    """Read a run as a chat client does: every stream chunk by chunk, as it arrives."""
    seen = []
    async for event in events:
        seen.append(event)
        if event.output is not None and event.output.stream is not None:
            text = ""
            try:
                async for chunk in event.output.stream:
                    text += chunk.content
            except Exception as exc:  # the model failed: its error event comes next
                text += f"[stream failed: {type(exc).__name__}]"
            shown.append(f"{event.agent_name}> {text}")
        elif event.action is not None and event.action.transfer_to is not None:
            shown.append(f"{event.agent_name} -> {event.action.transfer_to}")
        elif event.action is not None and event.action.interrupted is not None:
            shown.append(f"paused: {event.action.interrupted.point_ids}")
        elif event.error is not None:
            shown.append(f"error {event.error.type}: {event.error.message}")
    return seen


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_process() -> Iterator[HTTPServerProcess]:
    process = HTTPServerProcess()
    process.start()
    yield process
    process.stop()


@pytest.fixture
def own_mcp() -> Iterator[HTTPServerProcess]:
    """A server of the test's own, which it kills or crashes and starts again."""
    process = HTTPServerProcess()
    process.start()
    yield process
    process.stop()


llm = wire_server()


@pytest.fixture(autouse=True)
def _no_refunds_yet() -> None:
    REFUNDS.clear()


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def tool_results(body: dict[str, Any]) -> list[str]:
    """The tool results a request sent, in either protocol."""
    if "messages" in body:
        return [m["content"] for m in body["messages"] if m["role"] == "tool"]
    return [i["output"] for i in body["input"] if i.get("type") == "function_call_output"]


def tree(spans: list[ReadableSpan]) -> list[str]:
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans if s.context is not None}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in by_parent.get(parent, []):
            lines.append("  " * depth + span.name)
            assert span.context is not None
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


# -- the whole app ---------------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_delegates_streams_pauses_for_a_refund_and_resumes_in_a_new_runner(
    api: str,
    llm: OpenAIServer,
    mcp_process: HTTPServerProcess,
    tmp_path: Path,
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    db = tmp_path / "checkpoints.db"
    llm.script(
        Wire(
            tool_calls=[Call("transfer_to_agent", '{"agent_name": "research"}', id="t1")],
            usage=(10, 1),
        ),
        Wire(tool_calls=[Call("forecast", '{"city": "Oslo"}', id="f1")], usage=(20, 2)),
        Wire(text="Oslo: 21.5 C, sunny.", usage=(30, 3)),
        Wire(
            tool_calls=[Call("transfer_to_agent", '{"agent_name": "writer"}', id="t2")],
            usage=(40, 4),
        ),
        Wire(text='{"title": "Oslo", "body": "Sunny tomorrow."}', usage=(50, 5)),
        Wire(
            tool_calls=[Call("transfer_to_agent", '{"agent_name": "payments"}', id="t3")],
            usage=(60, 6),
        ),
        Wire(
            tool_calls=[Call("refund", '{"order_id": "A-1", "amount_cents": 5000}', id="r1")],
            usage=(70, 7),
        ),
    )
    shown: list[str] = []

    async with SQLiteCheckpointStore(db) as store:
        runner = app_runner(llm, mcp_process, store, provider=provider, api=api)
        async with runner:
            run = runner.run("Forecast for Oslo, a brief, refund A-1.", run_id="conv-1")
            events = await read(run, shown)
    pause = events[-1].action.interrupted if events[-1].action else None
    assert pause is not None
    (point,) = pause.points
    assert point.id == "agent:boss/agent:payments/tool:refund#r1"
    assert point.info["arguments"] == {"order_id": "A-1", "amount_cents": 5000}
    assert REFUNDS == []
    paused_usage = adk.run_usage(run)
    assert paused_usage == Usage(input_tokens=280, output_tokens=28, total_tokens=308)

    # A person halves the refund; another process resumes (a new runner over the same file).
    llm.script(
        Wire(text="Refunded 25.00 on A-1.", usage=(80, 8)),
        Wire(text="Sunny in Oslo; brief written; A-1 refunded 25.00.", usage=(90, 9)),
    )
    edit = {"approved": True, "arguments": {"order_id": "A-1", "amount_cents": 2500}}
    async with SQLiteCheckpointStore(db) as store:
        runner = app_runner(llm, mcp_process, store, provider=provider, api=api)
        async with runner:
            resume = runner.resume(pause.checkpoint_id, edit)
            await read(resume, shown)
            assert await store.get(pause.checkpoint_id) is None  # finished: deleted
    assert REFUNDS == [("A-1", 2500)]
    assert shown == [
        "boss> ",
        "boss -> research",
        "research> ",
        "research> Oslo: 21.5 C, sunny.",
        "research -> boss",
        "boss> ",
        "boss -> writer",
        'writer> {"title": "Oslo", "body": "Sunny tomorrow."}',
        "writer -> boss",
        "boss> ",
        "boss -> payments",
        "payments> ",
        "paused: ['agent:boss/agent:payments/tool:refund#r1']",
        "payments> Refunded 25.00 on A-1.",
        "payments -> boss",
        "boss> Sunny in Oslo; brief written; A-1 refunded 25.00.",
    ]
    # The writer's structured answer is its output's custom value.
    briefs = [
        e.output.custom
        for e in events
        if e.output is not None and isinstance(e.output.custom, Brief)
    ]
    assert briefs == [Brief(title="Oslo", body="Sunny tomorrow.")]
    # The whole turn's usage: the resumed run counts what came before its pause.
    assert adk.run_usage(resume) == Usage(input_tokens=450, output_tokens=45, total_tokens=495)
    # The model read the edit note with the refund's result.
    (result,) = tool_results(llm.bodies[-2])[-1:]
    assert result.startswith("[A person edited this call's arguments before it ran")
    assert result.endswith("refunded 2500 on A-1")

    # Two traces: the paused run's, and the resume's, each under one root.
    finished = exporter.get_finished_spans()
    roots = [s for s in finished if s.parent is None]
    assert [s.name for s in roots] == ["invoke_agent boss", "invoke_agent boss"]
    assert len({s.context.trace_id for s in finished if s.context is not None}) == 2
    paused_root, resumed_root = roots
    assert paused_root.attributes is not None and resumed_root.attributes is not None
    assert paused_root.attributes["adk.checkpoint.id"] == pause.checkpoint_id
    assert resumed_root.attributes["adk.checkpoint.id"] == pause.checkpoint_id
    assert resumed_root.attributes["gen_ai.conversation.id"] == "conv-1"
    (link,) = resumed_root.links
    assert paused_root.context is not None and link.context.span_id == paused_root.context.span_id
    assert tree([s for s in finished if s.context.trace_id == paused_root.context.trace_id]) == [
        "invoke_agent boss",
        "  chat gpt-test",
        "  execute_tool transfer_to_agent",
        "  invoke_agent research",
        "    chat gpt-test",
        "    execute_tool forecast",
        "    chat gpt-test",
        "  invoke_agent boss",
        "    chat gpt-test",
        "    execute_tool transfer_to_agent",
        "  invoke_agent writer",
        "    chat gpt-test",
        "  invoke_agent boss",
        "    chat gpt-test",
        "    execute_tool transfer_to_agent",
        "  invoke_agent payments",
        "    chat gpt-test",
        "    execute_tool refund",
    ]
    assert tree([s for s in finished if s.context.trace_id == resumed_root.context.trace_id]) == [
        "invoke_agent boss",
        "  invoke_agent payments",
        "    execute_tool refund",
        "    chat gpt-test",
        "  invoke_agent boss",
        "    chat gpt-test",
    ]
    # Token counts: each chat span its reply's, each agent span the sum of its own calls
    # (a worker's, not the supervisor's), so summing the agent spans counts each call once.
    tokens = [
        (s.name, s.attributes.get("gen_ai.usage.input_tokens"))
        for s in sorted(finished, key=lambda s: s.start_time or 0)
        if s.attributes is not None and not s.name.startswith("execute_tool")
    ]
    assert tokens == [
        ("invoke_agent boss", 10),
        ("chat gpt-test", 10),
        ("invoke_agent research", 50),
        ("chat gpt-test", 20),
        ("chat gpt-test", 30),
        ("invoke_agent boss", 40),
        ("chat gpt-test", 40),
        ("invoke_agent writer", 50),
        ("chat gpt-test", 50),
        ("invoke_agent boss", 60),
        ("chat gpt-test", 60),
        ("invoke_agent payments", 70),
        ("chat gpt-test", 70),
        ("invoke_agent boss", None),  # the resume's root: no call of its own
        ("invoke_agent payments", 80),
        ("chat gpt-test", 80),
        ("invoke_agent boss", 90),
        ("chat gpt-test", 90),
    ]
    agent_total = sum(v for name, v in tokens if name.startswith("invoke_agent") and v)
    assert agent_total == 450
    (forecast,) = [s for s in finished if s.name == "execute_tool forecast"]
    assert forecast.attributes is not None
    assert forecast.attributes["mcp.method.name"] == "tools/call"
    assert forecast.attributes["network.transport"] == "tcp"
    assert forecast.attributes["server.port"] == mcp_process.port
    assert forecast.attributes["gen_ai.tool.call.id"] == "f1"
    (edited,) = [
        s
        for s in finished
        if s.name == "execute_tool refund"
        and s.parent is not None
        and s.context.trace_id == resumed_root.context.trace_id
    ]
    assert edited.attributes is not None and edited.attributes["adk.approval.edited"] is True


def app_runner(
    llm: OpenAIServer,
    mcp: HTTPServerProcess,
    store: adk.checkpoint.CheckpointStore,
    *,
    provider: TracerProvider | None = None,
    retry: RetryPolicy | None = None,
    streaming: bool = True,
    api: str = "chat",
) -> Runner:
    """A process's runner: the same app in every process (a paused run's and the one resuming)."""
    return Runner(
        build_app(llm.base_url, mcp.url, retry=retry, api=api),
        checkpoint_store=store,
        enable_streaming=streaming,
        tracer_provider=provider,
    )


def to_payments_and_refund(call_id: str = "r1", cents: int = 5000) -> list[Wire]:
    return [
        to("payments"),
        calls("refund", {"order_id": "A-1", "amount_cents": cents}, call_id),
    ]


# -- approvals -------------------------------------------------------------------------------------


async def test_a_rejected_refund_is_read_by_the_worker_which_reports_back(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(*to_payments_and_refund())
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await app_runner(llm, mcp_process, store).invoke("refund A-1")
    assert paused.interrupt is not None
    llm.script(Wire(text="The refund was not approved."), Wire(text="No refund: not approved."))
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        runner = app_runner(llm, mcp_process, store)
        done = await runner.invoke_resume(
            paused.checkpoint_id, {"approved": False, "reason": "over the limit"}
        )
        assert await store.get(paused.checkpoint_id) is None
    assert REFUNDS == []
    assert done.text == "No refund: not approved."
    tool_message = llm.bodies[-2]["messages"][-1]
    assert tool_message["role"] == "tool"
    assert tool_message["content"] == "Error: the call to 'refund' was not approved: over the limit"
    # The boss read the worker's report as context.
    assert "For context: [payments] said: The refund was not approved.." in [
        m["content"] for m in llm.bodies[-1]["messages"]
    ]


async def test_an_edit_that_does_not_fit_is_refused_before_anything_runs_and_kept(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(*to_payments_and_refund())
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await app_runner(llm, mcp_process, store).invoke("refund A-1")
        asked = len(llm.requests)
        bad = {"approved": True, "arguments": {"order_id": "A-1", "amount_cents": "lots"}}
        with pytest.raises(ValueError, match="amount_cents"):
            await app_runner(llm, mcp_process, store).invoke_resume(paused.checkpoint_id, bad)
        assert await store.get(paused.checkpoint_id) is not None
    assert REFUNDS == [] and len(llm.requests) == asked


async def test_a_second_pause_in_the_same_run_and_a_second_delegation(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    """The worker pauses twice in one turn (a second refund after the first is approved), then
    the boss delegates to it again and it pauses a third time, the server numbering its calls
    from ``call_0`` again: each pause is resumed under the same checkpoint id. The worker asked
    again sees its earlier calls in its input, so its new ``call_0`` pauses at a point of its
    own (``#call_0-1``): the first approval sent again is refused, nothing refunded, and the
    request carries each call id once."""
    llm.script(*to_payments_and_refund("call_0", 1000))
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        first = await app_runner(llm, mcp_process, store).invoke("refund A-1 twice")
        assert first.interrupt is not None
        llm.script(calls("refund", {"order_id": "A-1", "amount_cents": 2000}, "call_1"))
        second = await app_runner(llm, mcp_process, store).invoke_resume(first.checkpoint_id, True)
        assert second.interrupt is not None
        assert second.checkpoint_id == first.checkpoint_id
        assert second.interrupt.point_ids == ["agent:boss/agent:payments/tool:refund#call_1"]
        llm.script(
            Wire(text="Refunded twice."),
            to("payments", "t2"),
            calls("refund", {"order_id": "A-1", "amount_cents": 3000}, "call_0"),
        )
        # Keyed by its point: plain data after a plain resume that paused for another call's
        # approval may be that decision sent again, and is refused (docs/interrupts.md).
        answer = {"agent:boss/agent:payments/tool:refund#call_1": "yes"}
        third = await app_runner(llm, mcp_process, store).invoke_resume(first.checkpoint_id, answer)
        assert third.interrupt is not None
        assert third.interrupt.point_ids == ["agent:boss/agent:payments/tool:refund#call_0-1"]
        assert REFUNDS == [("A-1", 1000), ("A-1", 2000)]
        # The first approval clicked again is an answer already given, not the third refund's.
        asked = len(llm.requests)
        with pytest.raises(ValueError, match="already answered by an earlier resume"):
            await app_runner(llm, mcp_process, store).invoke_resume(
                first.checkpoint_id, {"agent:boss/agent:payments/tool:refund#call_0": True}
            )
        assert REFUNDS == [("A-1", 1000), ("A-1", 2000)] and len(llm.requests) == asked
        llm.script(Wire(text="Refunded a third time."), Wire(text="Three refunds."))
        done = await app_runner(llm, mcp_process, store).invoke_resume(first.checkpoint_id, "yes")
    assert done.text == "Three refunds."
    # Eight model calls over four runs, each reporting 11 + 7 tokens: the last resume's total is
    # the whole turn's (each checkpoint carried the count so far).
    assert done.usage == Usage(input_tokens=88, output_tokens=56, total_tokens=144)
    assert third.usage == Usage(input_tokens=66, output_tokens=42, total_tokens=108)
    assert REFUNDS == [("A-1", 1000), ("A-1", 2000), ("A-1", 3000)]
    # The worker's last request pairs each result with one call: no id sent for two calls.
    last = llm.bodies[-2]
    ids = [c["id"] for m in last["messages"] for c in m.get("tool_calls") or ()]
    assert "call_0-1" in ids and len(ids) == len(set(ids))


async def test_malformed_refund_arguments_are_the_models_to_correct_and_ask_nobody(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(
        to("payments"),
        Wire(tool_calls=[Call("refund", '{"order_id": "A-1", "amount_cents": ', id="bad")]),
        Wire(tool_calls=[Call("refund", '{"order_id": "A-1", "amount_cents": "x"}', id="bad2")]),
        calls("refund", {"order_id": "A-1", "amount_cents": 700}, "ok"),
    )
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await app_runner(llm, mcp_process, store).invoke("refund A-1")
    assert paused.interrupt is not None
    assert paused.interrupt.point_ids == ["agent:boss/agent:payments/tool:refund#ok"]
    errors = [m["content"] for m in llm.bodies[-1]["messages"] if m["role"] == "tool"]
    assert len(errors) == 2 and all(e.startswith("Error:") for e in errors)


# -- the MCP server dropping the connection ----------------------------------------------------------


async def test_the_mcp_server_dying_mid_call_is_an_error_the_worker_reads_then_it_reconnects(
    llm: OpenAIServer, own_mcp: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(
        to("research"),
        calls("die", {}, "d1"),
        calls("forecast", {"city": "Oslo"}, "f1"),
        Wire(text="Sunny, 21.5."),
        Wire(text="Sunny in Oslo."),
    )
    shown: list[str] = []
    async with (
        SQLiteCheckpointStore(tmp_path / "cp.db") as store,
        app_runner(llm, own_mcp, store) as runner,
    ):
        results: list[str] = []
        async for event in runner.run("Weather in Oslo?"):
            message = event.output.message if event.output is not None else None
            if (
                message is not None
                and message.role == "tool"
                and message.name != "transfer_to_agent"
            ):
                results.append(f"{message.name}: {message.content}")
                if message.name == "die":  # the operator restarts the crashed server
                    await asyncio.to_thread(own_mcp.wait)
                    await asyncio.to_thread(own_mcp.start)
            elif event.error is not None:
                shown.append(event.error.message)
    assert shown == []
    assert (
        results[0].startswith("die: Error:") and "lost while tool 'die' was running" in results[0]
    )
    assert len(results) == 2 and results[1].startswith("forecast: ")
    assert json.loads(results[1].removeprefix("forecast: "))["temperature"] == 21.5
    assert (
        llm.bodies[-1]["messages"][-1]["content"] == "For context: [research] said: Sunny, 21.5.."
    )


async def test_the_mcp_server_restarted_between_calls_is_reconnected_to(
    llm: OpenAIServer, own_mcp: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(
        to("research"),
        calls("add", {"a": 1, "b": 2}, "a1"),
        calls("add", {"a": 3, "b": 4}, "a2"),
        Wire(text="3 and 7."),
        Wire(text="3, then 7."),
    )
    async with (
        SQLiteCheckpointStore(tmp_path / "cp.db") as store,
        app_runner(llm, own_mcp, store) as runner,
    ):
        results: list[str] = []
        async for event in runner.run("Add things"):
            message = event.output.message if event.output is not None else None
            if message is not None and message.role == "tool" and message.name == "add":
                results.append(message.content)
                if len(results) == 1:  # the server crashes and comes back
                    await asyncio.to_thread(own_mcp.kill)
                    await asyncio.to_thread(own_mcp.start)
    assert results == ["3", "7"]


# -- the model API failing ---------------------------------------------------------------------------

FAST_RETRY = RetryPolicy(max_attempts=3, initial_delay=0, max_delay=0, jitter=False)


async def test_429_then_500_then_an_answer_is_one_model_call_of_the_run(
    llm: OpenAIServer,
    mcp_process: HTTPServerProcess,
    tmp_path: Path,
    spans: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = spans
    llm.script(
        Wire(status=429, retry_after="0", error="slow down"),
        Wire(status=500),
        to("writer"),
        Wire(status=503),
        Wire(text='{"title": "T", "body": "B"}', usage=(5, 5)),
        Wire(text="Done."),
    )
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        runner = app_runner(llm, mcp_process, store, provider=provider, retry=FAST_RETRY)
        result = await runner.invoke("Write a brief.", max_turns=4)
    assert result.text == "Done."
    assert len(llm.requests) == 6
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert len(chats) == 3
    assert all(s.status.is_ok for s in chats)


async def test_a_model_api_down_for_good_fails_the_worker_and_the_run(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(to("writer"), Wire(status=500), Wire(status=500), Wire(status=500))
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        shown: list[str] = []
        async with app_runner(llm, mcp_process, store, retry=FAST_RETRY) as runner:
            events = await read(runner.run("Write a brief."), shown)
    assert events[-1].error is not None
    assert events[-1].error.type == "ModelError"
    assert events[-1].agent_name == "writer"
    assert shown[-1].startswith("error ModelError")


# -- max_turns ----------------------------------------------------------------------------------------


async def test_max_turns_counts_every_agents_calls_across_a_pause_and_a_new_runner(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    """Four calls before the pause (the boss twice, research, payments) leave one of five: the
    refund's result takes it, and the boss's turn after the report back would be a sixth. The
    new runner's resume is refused before the refund, as run it refunded, failed on the boss's
    call and kept the checkpoint for a retry to refund again; given six it goes on."""
    llm.script(to("research"), Wire(text="Sunny."), *to_payments_and_refund())
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await app_runner(llm, mcp_process, store).invoke("go", max_turns=5)
        assert paused.interrupt is not None
        with pytest.raises(adk.RunError) as refused:
            await app_runner(llm, mcp_process, store).invoke_resume(paused.checkpoint_id, True)
        assert isinstance(refused.value.__cause__, adk.CheckpointError)
        assert (
            "the run paused after 4 model calls of the run's max_turns of 5, and the one call "
            "left goes to agent 'payments' (its paused calls' results): its worker 'payments' "
            "reports back to 'boss'" in str(refused.value)
        )
        assert REFUNDS == [] and len(llm.requests) == 4
        llm.script(Wire(text="Refunded."), Wire(text="Done."))
        runner = app_runner(llm, mcp_process, store)
        done = await runner.invoke_resume(paused.checkpoint_id, True, max_turns=6)
    assert done.text == "Done." and REFUNDS == [("A-1", 5000)]
    assert len(llm.requests) == 6


async def test_a_pause_that_spent_the_runs_max_turns_is_refused_on_resume_before_the_refund(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    """The refund's result would need one more model call the run's limit does not allow: the
    resume is refused before the refund runs and the checkpoint kept. Run, then failed on the
    limit with the checkpoint kept, a retry with a higher limit refunded a second time."""
    llm.script(*to_payments_and_refund())
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await app_runner(llm, mcp_process, store).invoke("refund A-1", max_turns=2)
        assert paused.interrupt is not None
        asked = len(llm.requests)
        with pytest.raises(adk.RunError) as refused:
            await app_runner(llm, mcp_process, store).invoke_resume(paused.checkpoint_id, True)
        assert isinstance(refused.value.__cause__, adk.CheckpointError)
        assert str(refused.value.__cause__) == (
            "the checkpoint does not fit agent 'payments': the run paused after 2 model calls, "
            "at the run's max_turns of 2: the paused calls' results would need a model call the "
            "limit does not allow; resume with a higher max_turns (it counts the calls before the "
            "pause)"
        )
        assert REFUNDS == [] and len(llm.requests) == asked
        assert await store.get(paused.checkpoint_id) is not None

        llm.script(Wire(text="Refunded."), Wire(text="Done."))
        runner = app_runner(llm, mcp_process, store)
        done = await runner.invoke_resume(paused.checkpoint_id, True, max_turns=4)
    assert done.text == "Done."
    assert REFUNDS == [("A-1", 5000)]


async def test_max_transfers_counts_the_delegations_made_before_a_pause(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    """One delegation (two transfers) is allowed; the pause came after the first transfer, and
    the resume counted from 0 again, so the boss could delegate (and refund) once more."""
    llm.script(*to_payments_and_refund())

    def runner(store: adk.checkpoint.CheckpointStore) -> Runner:
        app = build_app(llm.base_url, mcp_process.url, max_transfers=2)
        return Runner(app, checkpoint_store=store)

    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await runner(store).invoke("refund A-1")
        assert paused.interrupt is not None
        llm.script(
            Wire(text="Refunded."),
            to("payments", "t2"),
            calls("refund", {"order_id": "A-1", "amount_cents": 5000}, "r2"),
        )
        with pytest.raises(adk.RunError, match="more than 2 transfers in one run") as raised:
            await runner(store).invoke_resume(paused.checkpoint_id, True)
    transfers = [e.action.transfer_to for e in raised.value.events if e.action is not None]
    assert transfers == ["boss", "payments"]  # the report back, then the delegation refused
    assert REFUNDS == [("A-1", 5000)]
    assert len(llm.requests) == 4  # payments' second turn never asked its model


async def test_a_delegation_whose_report_back_would_pass_max_transfers_is_refused(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    """With an odd limit the last delegation's report back is past it: the worker ran (asked a
    person, refunded) and the run then failed on its report back, the checkpoint of the resume
    kept, so a retry refunded again. The delegation is refused before the worker runs."""
    llm.script(*to_payments_and_refund())
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        app = build_app(llm.base_url, mcp_process.url, max_transfers=1)
        with pytest.raises(adk.RunError) as raised:
            await Runner(app, checkpoint_store=store).invoke("refund A-1")
        assert [i async for i in store.ids()] == []
    assert str(raised.value.__cause__ or raised.value).endswith(
        "more than 1 transfers in one run: the transfer to 'payments' would be the 1st, and its "
        "report back to 'boss' the 2nd (raise max_transfers, a parameter of with_sub_agents and "
        "Supervisor, if the conversation needs more)"
    )
    assert len(llm.requests) == 1  # payments never asked its model


# -- the reader leaving mid-stream ----------------------------------------------------------------


async def test_a_reader_leaving_mid_stream_saves_nothing_and_the_conversation_goes_on(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(to("research"), Wire(text="Sunny and warm in Oslo all day long.", fragment=2))
    async with (
        SQLiteCheckpointStore(tmp_path / "cp.db") as store,
        app_runner(llm, mcp_process, store) as runner,
    ):
        run = runner.run("Weather in Oslo?")
        async with contextlib.aclosing(run):
            async for event in run:
                if event.agent_name == "research" and event.output is not None:
                    assert event.output.stream is not None
                    async for _chunk in event.output.stream:
                        break  # the user closed the tab
                    break
        messages = adk.run_messages(run)
        assert [i async for i in store.ids()] == []
        llm.script(to("research", "t2"), Wire(text="Sunny."), Wire(text="It is sunny."))
        again = await runner.invoke([*messages, adk.Message.user("Weather in Oslo?")])
    assert again.text == "It is sunny."


async def test_a_handler_cancelled_mid_stream_under_aclosing_lets_the_retry_resume_at_once(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    """A streaming service's client disconnects while the resumed worker streams: the handler's
    task is cancelled. Under ``aclosing`` the resume ends there, its claim released, so the
    client's retry resumes at once."""
    llm.script(*to_payments_and_refund())
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        runner = app_runner(llm, mcp_process, store)
        paused = await runner.invoke("refund A-1")
        assert paused.checkpoint_id is not None
        llm.script(Wire(text="Refunded 50.00 on A-1. " * 10, fragment=3, stall_after=3, delay=60))
        streaming = asyncio.Event()

        async def handler() -> None:
            async with contextlib.aclosing(runner.resume(paused.checkpoint_id, True)) as events:
                async for event in events:
                    if event.output is not None and event.output.stream is not None:
                        async for _chunk in event.output.stream:
                            streaming.set()

        task = asyncio.create_task(handler())
        await streaming.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await store.get(paused.checkpoint_id) is not None
        llm.script(Wire(text="Refunded."), Wire(text="Done."))
        done = await runner.invoke_resume(paused.checkpoint_id, True)
    assert done.text == "Done."
    # The refund's result was recorded in the checkpoint before the model streamed: the retry
    # replays it and does not refund again (docs/interrupts.md).
    assert REFUNDS == [("A-1", 5000)]


async def test_a_resume_left_mid_stream_keeps_its_checkpoint_and_can_be_resumed_later(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(*to_payments_and_refund())
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await app_runner(llm, mcp_process, store).invoke("refund A-1")
        assert paused.interrupt is not None
        llm.script(Wire(text="Refunded 50.00 on order A-1 just now.", fragment=2))
        runner = app_runner(llm, mcp_process, store)
        resume = runner.resume(paused.checkpoint_id, True)
        async with contextlib.aclosing(resume):
            async for event in resume:
                if event.output is not None and event.output.stream is not None:
                    async for _chunk in event.output.stream:
                        break
                    break
        assert await store.get(paused.checkpoint_id) is not None
        assert REFUNDS == [("A-1", 5000)]
        llm.script(Wire(text="Refunded."), Wire(text="Done."))
        done = await app_runner(llm, mcp_process, store).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "Done."
    # The resume left early ran the approved call and recorded its result: resuming again
    # replays it (docs/interrupts.md).
    assert REFUNDS == [("A-1", 5000)]
