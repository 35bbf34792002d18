"""A running tool's progress reports reach the caller of the run (``ToolContext.report_progress``):
as events while the call runs, before its result, in no model's history, through an AgentTool
that shows its inner events, on the call's span when traced, and from an MCP server's progress
notifications without a handler."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import threading
from pathlib import Path

import pytest
from conftest import ChatActor, crunch
from mcp_servers.process import STDIO_SCRIPT
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from span_capture import exporter_fixture, provider_fixture  # noqa: F401  (fixtures)

from adk import (
    AgentEvent,
    AgentTool,
    Interrupt,
    Message,
    Resources,
    Runner,
    SequentialAgent,
    ToolContext,
    ToolProgress,
    ToolSpec,
    tool,
)
from adk.mcp import MCPProgress, MCPToolset, StdioServer
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tracing import CAPTURE_CONTENT_ENV
from prebuilt import ReActAgent, Supervisor


@tool(progress=True)
def sync_crunch(ctx: ToolContext) -> str:
    """Crunch numbers in a worker thread."""
    ctx.report_progress(message="halfway", data={"rows": [1, 2]})
    return "crunched"


@tool
async def silent(ctx: ToolContext) -> str:
    """A tool not declared to report progress."""
    ctx.report_progress(1, 2)
    return "never"


def reports(events: list[AgentEvent]) -> list[tuple[str | None, ToolProgress]]:
    return [
        (e.output.tool_name, e.output.custom)
        for e in events
        if e.output is not None and isinstance(e.output.custom, ToolProgress)
    ]


async def test_progress_reaches_the_caller_while_the_call_runs_and_no_model_sees_it() -> None:
    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("crunch", {"steps": 2})]),
            Reply(tool_calls=[tool_call("sync_crunch", {})]),
            "Done.",
        ]
    )
    events = [
        e async for e in Runner(ReActAgent("worker", model, tools=[crunch, sync_crunch])).run("Go.")
    ]

    kinds = [
        "progress" if isinstance(e.output.custom, ToolProgress) else str(e.output.role)
        for e in events
        if e.output is not None
    ]
    # Each report comes while its call runs: after the call, before its result.
    assert kinds == [
        *("assistant", "progress", "progress", "tool"),
        *("assistant", "progress", "tool"),
        "assistant",
    ]
    assert reports(events) == [
        ("crunch", ToolProgress(tool_call_id="call_1", progress=1, total=2, message="step 1 of 2")),
        ("crunch", ToolProgress(tool_call_id="call_1", progress=2, total=2, message="step 2 of 2")),
        (
            "sync_crunch",
            ToolProgress(tool_call_id="call_2", message="halfway", data={"rows": [1, 2]}),
        ),
    ]
    first = next(e for e in events if isinstance(e.output and e.output.custom, ToolProgress))
    assert (first.agent_name, first.run_path) == ("worker", ("worker",))
    # Its JSON form names the type, and comes back as it was.
    data = first.to_dict()
    assert data["output"]["custom_type"] == "adk.ToolProgress"
    assert AgentEvent.from_dict(data).output.custom == first.output.custom  # type: ignore[union-attr]
    # No model saw a report: the last request holds the calls and results only.
    last_request = model.requests[-1]
    assert all("step 1" not in (m.content or "") for m in last_request.messages)


async def test_a_tool_not_declared_to_report_progress_is_told_how_alone_or_beside_another() -> None:
    for calls in (
        [tool_call("silent", {})],
        [tool_call("silent", {}), tool_call("crunch", {"steps": 1})],
    ):
        model = ScriptedModel([Reply(tool_calls=calls), "Done."])
        result = await Runner(ReActAgent("worker", model, tools=[silent, crunch])).invoke("Go.")
        (answer,) = [m for m in model.requests[-1].messages if m.name == "silent"]
        assert "was not declared to report any" in answer.content
        assert "progress=True" in answer.content
        assert [c.tool_call_id for _, c in reports(result.events)] == (
            ["call_2"] if len(calls) == 2 else []
        )


@tool(progress=True)
async def wordy(ctx: ToolContext) -> str:
    """Reports its progress in words, where the number goes."""
    ctx.report_progress("half")
    return "never"


@tool(progress=True)
async def misordered(ctx: ToolContext) -> str:
    """Reports the text first and the numbers after it."""
    ctx.report_progress("step 1", 1, 2)  # type: ignore[arg-type]
    return "never"


async def test_a_report_with_text_where_a_number_goes_names_the_parameters() -> None:
    """Was pydantic's "1 validation error for ToolProgress", naming neither the call nor which of
    its parameters takes the text."""
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("wordy", {}), tool_call("misordered", {})]), "Done."]
    )
    result = await Runner(ReActAgent("worker", model, tools=[wordy, misordered])).invoke("Go.")
    answers = {m.name: m.content for m in model.requests[-1].messages if m.role == "tool"}
    assert "ValidationError" not in answers["wordy"]
    assert "ctx.report_progress(progress=None, total=None, message=None" in answers["wordy"]
    assert "progress must be a number or None, got str 'half'" in answers["wordy"]
    assert "progress must be a number or None, got str 'step 1'" in answers["misordered"]
    assert "message must be a str or None, got int 2" in answers["misordered"]
    assert reports(result.events) == []  # nothing half-made was reported


@tool(progress=True)
async def ratio(ctx: ToolContext, done: int, total: int) -> str:
    """Reports done/total as a fraction of one, as a tool whose total is 0 divides into NaN."""
    ctx.report_progress(done / total if total else float("nan"))
    return "ratio"


@tool(progress=True)
async def unbounded(ctx: ToolContext) -> str:
    """Reports an infinite total for a call with no known end."""
    ctx.report_progress(1, float("inf"))
    return "unbounded"


async def test_a_report_with_a_nan_or_infinite_number_is_refused_where_it_is_made() -> None:
    """Was accepted and shown, to fail only later, where a service wrote the event out
    (``AgentEvent.to_dict``: standard JSON has no number for it), far from the tool that made it;
    the report's numbers are a count or a fraction, never NaN or infinite."""
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("ratio", {"done": 0, "total": 0}),
                    tool_call("unbounded", {}),
                    tool_call("ratio", {"done": 1, "total": 2}),
                ]
            ),
            "Done.",
        ]
    )
    agent = ReActAgent("worker", model, tools=[ratio, unbounded])
    result = await Runner(agent).invoke("Go.")
    answers = [m.content for m in model.requests[-1].messages if m.role == "tool"]
    assert "progress must be a finite number or None, got float nan" in answers[0]
    assert "ctx.report_progress(progress=None" in answers[0]
    assert "total must be a finite number or None, got float inf" in answers[1]
    assert answers[2] == "ratio"
    shown = reports(result.events)  # only the finite report was made, and it writes out
    assert [report.progress for _, report in shown] == [0.5]
    assert all(json.dumps(event.to_dict()) for event in result.events)
    with pytest.raises(ValueError, match="finite number"):
        ToolProgress(tool_call_id="call_1", progress=float("-inf"))


@tool(progress=True)
def flagged(ctx: ToolContext) -> str:
    """Reports a bool where the number goes."""
    ctx.report_progress(True, 2)
    return "flagged"


@tool(progress=True)
def huge(ctx: ToolContext) -> str:
    """Reports an int too large for a float."""
    ctx.report_progress(10**400)
    return "huge"


async def test_a_bool_is_refused_and_an_int_too_large_for_a_float_is_named_not_finite() -> None:
    """``report_progress(True, 2)`` was shown as progress 1.0 of 2 (a flag taken for a count),
    and ``10**400`` was refused as "must be a number", though it is one: too large for a float,
    it is an infinity a report cannot hold."""
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("flagged", {}), tool_call("huge", {})]), "Done."]
    )
    result = await Runner(ReActAgent("worker", model, tools=[flagged, huge])).invoke("Go.")
    answers = [m.content for m in model.requests[-1].messages if m.role == "tool"]
    assert "progress must be a number, not a bool, or None, got bool True" in answers[0]
    assert "takes the numbers first" in answers[0]
    assert "progress must be a finite number or None, got int 1000000000" in answers[1]
    assert "too large for a float" in answers[1]
    assert "takes finite numbers" in answers[1]
    assert reports(result.events) == []
    with pytest.raises(ValueError, match="bool"):
        ToolProgress(tool_call_id="call_1", total=False)
    assert ToolProgress(tool_call_id="call_1", progress=1, total=2.0).progress == 1.0


async def test_a_tool_that_awaits_its_report_as_an_mcp_server_tool_does_runs_to_its_result() -> (
    None
):
    """FastMCP's ``ctx.report_progress`` is a coroutine, so a tool ported from an MCP server awaits
    it: the call must go on to its result, not fail on awaiting the report after it was sent."""

    @tool(progress=True)
    async def ported(ctx: ToolContext) -> str:
        """Index, written as an MCP server's tool."""
        await ctx.report_progress(1, 2, "half")
        await ctx.report_progress(2, 2)
        return "indexed"

    model = ScriptedModel([Reply(tool_calls=[tool_call("ported", {})]), "Done."])
    result = await Runner(ReActAgent("worker", model, tools=[ported])).invoke("Go.")

    (answer,) = [m for m in model.requests[-1].messages if m.name == "ported"]
    assert answer.content == "indexed"
    assert [(p.progress, p.message) for _, p in reports(result.events)] == [(1, "half"), (2, None)]


async def test_progress_of_a_nested_agents_tool_passes_an_agent_tool_that_shows_inner_events() -> (
    None
):
    for shown in (True, False):
        inner = ReActAgent(
            "cruncher",
            ScriptedModel([Reply(tool_calls=[tool_call("crunch", {"steps": 1})]), "Crunched."]),
            tools=[crunch],
            description="Crunches numbers.",
        )
        model = ScriptedModel(
            [Reply(tool_calls=[tool_call("cruncher", {"request": "go"})]), "Done."]
        )
        outer = ReActAgent("boss", model, tools=[AgentTool(inner, emit_inner_events=shown)])
        result = await Runner(outer).invoke("Go.")
        got = [
            (e.run_path, e.output.custom.progress)
            for e in result.events
            if isinstance(e.output and e.output.custom, ToolProgress)
        ]  # type: ignore[union-attr]
        assert got == ([(("boss", "cruncher"), 1.0)] if shown else [])
        # The agent tool's result is the inner agent's answer, never a report.
        assert [m.content for m in model.requests[-1].messages if m.name == "cruncher"] == [
            "Crunched."
        ]
        assert result.output is not None and result.output.content == "Done."


async def test_progress_is_a_span_event_on_the_calls_execute_tool_span(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = ScriptedModel([Reply(tool_calls=[tool_call("crunch", {"steps": 2})]), "Done."])
    await Runner(ReActAgent("worker", model, tools=[crunch]), tracer_provider=provider).invoke(
        "Go."
    )
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool crunch"]
    progress = [dict(e.attributes or {}) for e in span.events if e.name == "adk.tool.progress"]
    # The message is the tool's text: left out unless content is captured.
    assert progress == [
        {"adk.tool.progress.progress": 1.0, "adk.tool.progress.total": 2.0},
        {"adk.tool.progress.progress": 2.0, "adk.tool.progress.total": 2.0},
    ]


@pytest.mark.parametrize("handler", [False, True])
async def test_an_mcp_servers_progress_reaches_the_caller_without_a_handler(handler: bool) -> None:
    handled: list[MCPProgress] = []
    server = StdioServer(sys.executable, [str(STDIO_SCRIPT)])
    toolset = MCPToolset(
        server,
        prefix="demo",
        call_timeout=15,
        on_progress=(lambda ctx, p: handled.append(p)) if handler else None,
    )
    model = ScriptedModel([Reply(tool_calls=[tool_call("demo_work", {"steps": 2})]), "Done."])
    async with Runner(ReActAgent("worker", model, tools=[toolset])) as runner:
        result = await runner.invoke("Work.")
    assert [m.content for m in model.requests[-1].messages if m.name == "demo_work"] == [
        "did 2 steps (progress asked)"
    ]
    assert reports(result.events) == [
        (
            "demo_work",
            ToolProgress(tool_call_id="call_1", progress=1, total=2, message="step 1 of 2"),
        ),
        (
            "demo_work",
            ToolProgress(tool_call_id="call_1", progress=2, total=2, message="step 2 of 2"),
        ),
    ]
    assert len(handled) == (2 if handler else 0)


async def test_progress_passes_a_supervisor_and_a_sequential_workflow_with_the_workers_path() -> (
    None
):
    def worker() -> ReActAgent:
        model = ScriptedModel([Reply(tool_calls=[tool_call("crunch", {"steps": 1})]), "Crunched."])
        return ReActAgent("worker", model, tools=[crunch], description="Crunches numbers.")

    boss = ReActAgent(
        "boss",
        ScriptedModel(
            [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "worker"})]), "Done."]
        ),
    )
    supervised = await Runner(Supervisor(boss, [worker()])).invoke("Go.")
    pipeline = await Runner(SequentialAgent("pipeline", [worker()])).invoke("Go.")
    for result, path in ((supervised, ("boss", "worker")), (pipeline, ("pipeline", "worker"))):
        got = [
            e.run_path
            for e in result.events
            if isinstance(e.output and e.output.custom, ToolProgress)
        ]
        assert got == [path]


@tool(progress=True)
async def ask_first(ctx: ToolContext) -> str:
    """Report, then wait for a person."""
    ctx.report_progress(message="asking")
    raise Interrupt("May I?")


async def test_an_agent_span_s_answer_is_never_a_progress_report(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With content captured an agent span records its last answer of its own; a report is no
    # answer: an agent paused (or cut off) after one recorded none, where it had its tool call.
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    model = ScriptedModel([Reply(tool_calls=[tool_call("ask_first", {})])])
    runner = Runner(ReActAgent("worker", model, tools=[ask_first]), tracer_provider=provider)
    result = await runner.invoke("Go.")
    assert result.interrupt is not None
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent worker"]
    (answer,) = json.loads(dict(span.attributes or {})["gen_ai.output.messages"])
    assert answer["parts"][0]["name"] == "ask_first"


async def test_a_report_made_after_its_call_ended_reaches_no_one() -> None:
    """A timed-out sync tool's thread runs on and may report again: that report came after the
    call's timeout error, as progress of a call already over (and so would an async tool's
    report from a task it left running). Once a call has its result, its reports are dropped."""
    late_go = threading.Event()
    late_made = threading.Event()
    timed_out = asyncio.Event()

    @tool(timeout=0.05, progress=True)
    def export(ctx: ToolContext) -> str:
        """Export rows, slowly."""
        late_go.wait()
        ctx.report_progress(2, 3, "late")  # the call timed out meanwhile
        late_made.set()
        return "exported"

    @tool(progress=True)
    async def audit(ctx: ToolContext) -> str:
        """Outlasts the export's call, until its late report is made."""
        await timed_out.wait()
        late_go.set()
        await asyncio.to_thread(late_made.wait)  # its report is on the loop before this returns
        return "audited"

    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("export", {}, id="e"), tool_call("audit", {}, id="a")]), "ok"]
    )
    events: list[AgentEvent] = []
    async for event in Runner(ReActAgent("agent", model, tools=[export, audit])).run("go"):
        events.append(event)
        message = event.output.message if event.output is not None else None
        if message is not None and message.tool_call_id == "e":
            timed_out.set()

    assert late_made.is_set()  # the report was made, and handed to the loop before audit ended
    assert reports(events) == []
    assert [e.output.message.content for e in events if e.output and e.output.message][-1] == "ok"


@tool(progress=True)
async def check_then_ask(ctx: ToolContext) -> str:
    """Check, report it, then wait for a person's go."""
    ctx.report_progress(message="checked")
    if ctx.resume is None or ctx.resume.data != "go":
        raise Interrupt("Go on?")
    return "went on"


async def test_a_run_paused_right_after_a_report_has_no_report_for_its_output() -> None:
    """``RunResult.output`` of a run that pauses is its last output so far, never a progress
    report: it was the report, read as the run's answer (a custom output), paused at once and
    paused again on resume alike."""
    model = ScriptedModel([Reply(tool_calls=[tool_call("check_then_ask", {})]), "Done."])
    runner = Runner(ReActAgent("worker", model, tools=[check_then_ask]))

    paused = await runner.invoke("Go.")
    again = await runner.invoke_resume(paused.checkpoint_id, "wait")

    for result in (paused, again):
        assert result.interrupt is not None and len(reports(result.events)) == 1
        assert isinstance(result.events[-2].output.custom, ToolProgress)  # type: ignore[union-attr]
    assert isinstance(paused.output, Message) and paused.output.tool_calls[0].id == "call_1"
    assert again.output is None  # the resumed run's events hold no output but the report
    done = await runner.invoke_resume(again.checkpoint_id, "go")
    assert done.text == "Done."


class Indexer:
    """A hand-written tool that says it reports progress (``reports_progress``)."""

    reports_progress = True
    spec = ToolSpec(name="indexer", description="Index the files.")

    async def run(self, arguments: str, ctx: ToolContext) -> str:
        ctx.report_progress(1, 1, "indexed")
        return "indexed"


class Unsaid(Indexer):
    """Reports progress, not having said so."""

    reports_progress = False


class Vague(Indexer):
    reports_progress = "yes"  # type: ignore[assignment]


async def test_a_tool_of_ones_own_says_it_reports_progress_with_reports_progress() -> None:
    # Alone, beside another call, and registered under another name for an action agent's chat.
    beside = tool_call("crunch", {"steps": 1})
    for calls in ([tool_call("indexer", {})], [tool_call("indexer", {}), beside]):
        model = ScriptedModel([Reply(tool_calls=calls), "Done."])
        result = await Runner(ReActAgent("w", model, tools=[Indexer(), crunch])).invoke("Go.")
        assert ("indexer", "indexed") in [(name, r.message) for name, r in reports(result.events)]
    resources = Resources()
    resources.add_model("m", ScriptedModel([Reply(tool_calls=[tool_call("idx", {})]), "Done."]))
    resources.add_tool(Indexer(), name="idx")
    result = await Runner(ChatActor("actor", ["idx"], resources=resources)).invoke("Go.")
    assert [(name, r.message) for name, r in reports(result.events)] == [("idx", "indexed")]

    model = ScriptedModel([Reply(tool_calls=[tool_call("indexer", {})]), "Done."])
    await Runner(ReActAgent("w", model, tools=[Unsaid()])).invoke("Go.")
    (answer,) = [m.content for m in model.requests[-1].messages if m.role == "tool"]
    assert "reports_progress = True" in answer

    # A value that is no bool is refused where the tool is given, naming it.
    with pytest.raises(TypeError, match=r"Vague.reports_progress must be True or False, got 'yes'"):
        ReActAgent("w", ScriptedModel(["x"]), tools=[Vague()])
    with pytest.raises(TypeError, match=r"Vague.reports_progress must be True or False"):
        Resources().add_tool(Vague())


@pytest.mark.parametrize("traced", [False, True])
async def test_a_report_after_its_call_ended_is_dropped_with_one_warning(
    traced: bool,
    caplog: pytest.LogCaptureFixture,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """A task the tool started and did not await reports after the call's result is out: the
    report would follow the result, or go to a queue no one reads. Dropped, with one warning
    for the call naming the tool, rather than lost without a word (or raised in a task no one
    awaits); traced, not put on the call's span, which has ended."""
    later = asyncio.Event()
    started: list[asyncio.Task[None]] = []

    async def report_later(ctx: ToolContext) -> None:
        await later.wait()
        ctx.report_progress(message="late")
        ctx.report_progress(message="later")

    @tool(progress=True)
    async def detach(ctx: ToolContext) -> str:
        """Start work and return at once."""
        ctx.report_progress(message="started")
        started.append(asyncio.create_task(report_later(ctx)))
        return "started"

    model = ScriptedModel([Reply(tool_calls=[tool_call("detach", {})]), "Done."])
    agent = ReActAgent("w", model, tools=[detach])
    runner = Runner(agent, tracer_provider=provider) if traced else Runner(agent)
    result = await runner.invoke("Go.")
    assert [r.message for _, r in reports(result.events)] == ["started"]

    with caplog.at_level(logging.WARNING):
        later.set()
        await started[0]  # no error: the reports are dropped
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.name == "adk.tools"
    assert "tool 'detach' reported progress after its call 'call_1' had ended" in warning.message
    if traced:
        (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool detach"]
        assert [e.name for e in span.events] == ["adk.tool.progress"]


async def test_a_report_a_thread_hands_over_as_its_call_ends_is_dropped_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A thread's report is handed to the loop, which puts it in later: one handed over while
    the call ran but reaching the loop after the call ended (the tool returned meanwhile, as a
    timeout or the run's cancellation may end it) would come after the call's result. Dropped as
    a report made after the end is, and with its warning, where it was lost without a word.
    The tool blocks the loop until its thread has reported, so the report is handed over before
    the call ends and reaches the loop after: no timing decides it."""
    first_made = threading.Event()
    go_on = threading.Event()
    last_made = threading.Event()

    def watch(ctx: ToolContext) -> None:
        ctx.report_progress(message="first")
        first_made.set()
        go_on.wait()
        ctx.report_progress(message="last")  # the call has not ended: handed to the loop
        last_made.set()

    @tool(progress=True)
    async def index(ctx: ToolContext) -> str:
        """Index, with a thread of its own reporting."""
        threading.Thread(target=watch, args=(ctx,), daemon=True).start()
        # Handed over before this thread's wake-up: "first" reaches the loop while the call runs.
        await asyncio.to_thread(first_made.wait)
        go_on.set()
        last_made.wait()  # holds the loop: "last" reaches it only once the call has ended
        return "indexed"

    model = ScriptedModel([Reply(tool_calls=[tool_call("index", {})]), "Done."])
    with caplog.at_level(logging.WARNING):
        result = await Runner(ReActAgent("w", model, tools=[index])).invoke("Go.")

    assert [r.message for _, r in reports(result.events)] == ["first"]
    assert result.text == "Done."
    (warning,) = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.name == "adk.tools"
    assert "tool 'index' reported progress after its call 'call_1' had ended" in warning.message


async def test_late_reports_from_two_threads_at_once_warn_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The tool's thread reporting late and the loop dropping a handed-over report may reach the
    warning at the same instant; the warn-once flag was looked at, then set, so both could see
    it unset and warn twice. Here two threads report after the end, and each look at the flag
    waits (up to half a second, a bound, not a timing) for the other's: without one step for
    the look and the mark both look before either marks, every time."""
    from adk.tools._executor import _Emitter

    lined = threading.Barrier(2)

    class Lined(_Emitter):
        @property  # type: ignore[override]
        def warned(self) -> bool:
            seen = bool(self.__dict__.get("flag"))
            with contextlib.suppress(threading.BrokenBarrierError):
                lined.wait(timeout=0.5)
            return seen

        @warned.setter
        def warned(self, value: bool) -> None:
            self.__dict__["flag"] = value

    emitter = Lined(asyncio.Queue(), "index", "call_1")
    emitter.ended = True
    late = AgentEvent.of("late")
    with caplog.at_level(logging.WARNING, logger="adk.tools"):
        await asyncio.gather(asyncio.to_thread(emitter, late), asyncio.to_thread(emitter, late))
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "tool 'index' reported progress after its call 'call_1' had ended: the report is "
        "dropped (a report must come before the tool returns; a task the tool starts to "
        "report must be awaited by it)"
    ]


async def test_an_mcp_report_coming_after_its_cancelled_call_is_dropped_without_blaming_the_tool(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``mcp`` 2.x runs each progress callback in a task of its own, so a report the server sent
    just before a call was cancelled (its client left) or timed out can reach pyadk after the
    call ended: about one cancelled call in four did under concurrent load. The tool left no
    task unawaited, so the warning telling its author to await one was wrong, and a service
    whose clients often leave logged it again and again. Dropped, at debug level; the
    ``on_progress`` handler still gets it, as the server sent it."""
    from adk.mcp._hooks import progress_callback
    from adk.tools._executor import _Emitter

    queue: asyncio.Queue[object] = asyncio.Queue()
    emitter = _Emitter(queue, "work", "call_1")  # type: ignore[arg-type]
    from adk import Session
    from adk.context import RunContext, new_run

    run = new_run([Message.user("hi")], Session())
    ctx = ToolContext(
        RunContext(run, ("a",), "agent:a", run.history),
        tool_name="work",
        tool_call_id="call_1",
        address="agent:a/tool:work#call_1",
        emit=emitter,
    )
    handled: list[MCPProgress] = []
    report = progress_callback(lambda _ctx, seen: handled.append(seen), ctx, "work")
    # A report shown waits for the run's reader to take it (the next is kept meanwhile); none
    # reads here, and the call ends: it lets the report go (``_MCPTool``'s call closes it).
    shown = asyncio.ensure_future(report(1, 3, "before"))
    await asyncio.sleep(0)
    report.close()
    emitter.ended = True  # the call's task ended (cancelled) before the next report came
    await shown
    with caplog.at_level(logging.DEBUG, logger="adk"):
        await report(2, 3, "after")
    events = [item for item in queue._queue if isinstance(item, AgentEvent)]  # type: ignore[attr-defined]
    assert [event.output.custom.message for event in events] == ["before"]  # type: ignore[union-attr]
    assert [seen.message for seen in handled] == ["before", "after"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


RAW_PROGRESS_SCRIPT = Path(__file__).resolve().parent / "mcp_servers" / "raw_progress_server.py"


@pytest.mark.parametrize("traced", [False, True], ids=["untraced", "traced"])
async def test_a_flood_of_mcp_progress_is_shown_coalesced_to_what_the_run_reads(
    traced: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A server sending 2,000 progress reports for one call while the run is not read (a service
    writing to a slow client) makes two report events, the first and the last, where it made
    2,000, each waiting on the round's queue (100,000 made 130 MB): while a report shown is not
    taken, a later one is kept, replacing the one kept before, and shown once it is, or as the
    call ends, before its result. ``on_progress`` is given every report. Traced alike (the
    call's way out wrapped to put the reports on its span too: the span has the two)."""
    count = 2_000
    handled: list[MCPProgress] = []
    last = asyncio.Event()

    def on_progress(ctx: ToolContext | None, report: MCPProgress) -> None:
        handled.append(report)
        if report.progress == count - 1:
            last.set()

    server = StdioServer(sys.executable, [str(RAW_PROGRESS_SCRIPT)])
    toolset = MCPToolset(server, call_timeout=60, on_progress=on_progress)
    model = ScriptedModel([Reply(tool_calls=[tool_call("flood", {"reports": count})]), "Done."])
    events: list[AgentEvent] = []
    agent = ReActAgent("worker", model, tools=[toolset])
    async with Runner(agent, tracer_provider=provider if traced else None) as runner:
        async for event in runner.run("Flood."):
            events.append(event)
            if len(reports(events)) == 1:
                await last.wait()  # the run is not read while the server sends the rest
    shown = [progress for _, progress in reports(events)]
    assert [(p.progress, p.total, p.message) for p in shown] == [
        (0, count, "step 0"),
        (count - 1, count, f"step {count - 1}"),
    ]
    assert len(handled) == count
    assert [m.content for m in model.requests[-1].messages if m.name == "flood"] == ["flooded"]
    spans = [s for s in exporter.get_finished_spans() if s.name == "execute_tool flood"]
    assert [len([e for e in s.events if e.name == "adk.tool.progress"]) for s in spans] == (
        [2] if traced else []
    )
