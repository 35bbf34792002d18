"""A person approves a ``require_approval`` call with edited arguments: ``{"approved": True,
"arguments": {...}}`` (docs/interrupts.md, "Editing the arguments"). Each resume is a fresh
``Runner`` over a real SQLite store, as a service resumes in another process."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pydantic
import pytest
from conftest import Bank, checkpoint_ids, sqlite_store
from mcp_servers.process import STDIO_SCRIPT
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_interrupts import collect, pause_of

import adk
from adk import AgentTool, ParallelAgent, Resources, Runner
from adk.callbacks import Callbacks
from adk.mcp import MCPToolset, StdioServer
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tracing import CAPTURE_CONTENT_ENV
from prebuilt import ReActAgent


def _agent(bank: Bank, model: ScriptedModel) -> ReActAgent:
    return ReActAgent("payer", model, tools=[bank.pay])


async def test_an_edited_approval_runs_the_call_with_the_edit_and_the_model_is_told(
    tmp_path: Path,
) -> None:
    bank = Bank()
    script: list[Any] = [
        Reply(tool_calls=[tool_call("pay", {"payee": "ACME", "cents": 500}, id="call_1")]),
        "done",
    ]
    model = ScriptedModel(script)
    paused = pause_of(await collect(Runner(_agent(bank, model), sqlite_store(tmp_path)).run("pay")))
    assert paused.points[0].info["arguments"] == {"payee": "ACME", "cents": 500}

    model = ScriptedModel(script[1:])
    runner = Runner(_agent(bank, model), sqlite_store(tmp_path))
    decision = {"approved": True, "arguments": {"payee": "ACME Ltd", "cents": 450}}
    events = await collect(runner.resume(paused.checkpoint_id, decision))

    assert events[-1].error is None and bank.paid == [("ACME Ltd", 450)]
    # The call stays as the model made it; its result says what ran.
    sent = model.requests[0].messages
    call = next(m for m in sent if m.tool_calls).tool_calls[0]
    assert json.loads(call.arguments) == {"payee": "ACME", "cents": 500}
    result = sent[-1]
    assert result.role == "tool" and result.tool_call_id == "call_1"
    assert result.content == (
        "[A person edited this call's arguments before it ran; it ran with "
        '{"payee": "ACME Ltd", "cents": 450}]\npaid 450 to ACME Ltd'
    )
    assert result.metadata["edited_arguments"] == {"payee": "ACME Ltd", "cents": 450}
    assert await checkpoint_ids(runner.checkpoint_store) == []  # type: ignore[arg-type]


async def test_decisions_without_arguments_mean_what_they_meant(tmp_path: Path) -> None:
    """Other keys beside "approved" are still the caller's (who approved, say), and a denial that
    carries arguments is a denial: nothing runs."""
    for decision, paid in [
        ({"approved": True, "who": "ann"}, [("ACME", 500)]),
        ({"approved": False, "arguments": {"payee": "ACME", "cents": 1}}, []),
        (True, [("ACME", 500)]),
    ]:
        bank = Bank()
        call = tool_call("pay", {"payee": "ACME", "cents": 500}, id="call_1")
        model = ScriptedModel([Reply(tool_calls=[call]), "done"])
        db = tmp_path / f"{len(bank.paid)}-{id(decision)}"
        db.mkdir()
        paused = pause_of(await collect(Runner(_agent(bank, model), sqlite_store(db)).run("pay")))
        model = ScriptedModel(["done"])
        events = await collect(
            Runner(_agent(bank, model), sqlite_store(db)).resume(paused.checkpoint_id, decision)
        )
        assert events[-1].error is None and bank.paid == paid
        assert "edited" not in model.requests[0].messages[-1].content


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"payee": "ACME"}, "cents: Field required"),
        ({"payee": "ACME", "cents": "lots"}, "cents: Input should be a valid integer"),
        ({"payee": "ACME", "cents": 1, "memo": "x"}, "memo: Extra inputs are not permitted"),
        (["ACME", 1], "they are not an object of the call's arguments by name"),
        ({"payee": "ACME", "cents": float("nan")}, "they are not JSON values"),
    ],
)
async def test_an_edit_that_does_not_fit_is_refused_and_the_checkpoint_kept(
    tmp_path: Path, arguments: Any, problem: str
) -> None:
    """Refused at the resume, before anything runs, as an unclear decision is: the person's
    answer can be sent again, fixed, and nothing was lost or made twice."""
    bank = Bank()
    calls = [
        tool_call("pay", {"payee": "ACME", "cents": 500}, id="call_1"),
        tool_call("pay", {"payee": "Bob", "cents": 20}, id="call_2"),
    ]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    paused = pause_of(await collect(Runner(_agent(bank, model), sqlite_store(tmp_path)).run("pay")))
    first, second = (point.id for point in paused.points)

    model = ScriptedModel(["done"])
    runner = Runner(_agent(bank, model), sqlite_store(tmp_path))
    bad = {first: {"approved": True, "arguments": arguments}, second: True}
    with pytest.raises(ValueError, match="Nothing ran and the checkpoint is kept") as caught:
        await collect(runner.resume(paused.checkpoint_id, bad))
    assert problem in str(caught.value) and first in str(caught.value)
    assert bank.paid == [] and model.calls == 0
    assert await checkpoint_ids(sqlite_store(tmp_path)) == [paused.checkpoint_id]

    good = {first: {"approved": True, "arguments": {"payee": "ACME", "cents": 1}}, second: True}
    runner = Runner(_agent(bank, model), sqlite_store(tmp_path))
    events = await collect(runner.resume(paused.checkpoint_id, good))
    assert events[-1].error is None and sorted(bank.paid) == [("ACME", 1), ("Bob", 20)]


@pytest.mark.parametrize(
    "key",
    # LangChain's edit ({"type": "edit", "edited_action": {"name": ..., "args": {...}}}) ported
    # half-way, Google ADK's confirmation payload, "arguments" misspelled or in another case
    ["edited_action", "args", "payload", "arguements", "argument", "Arguments", "edited_arguments"],
)
async def test_a_yes_whose_edit_is_under_another_key_is_refused_not_run_unedited(
    tmp_path: Path, key: str
) -> None:
    """A yes beside an object under a key that means an edit but is not "arguments" ran the call
    with the model's arguments: the person's change (a lower amount) was dropped without a word,
    since other keys beside "approved" are the caller's. Refused as an unclear decision is,
    before anything runs; other keys holding objects (who approved) still go through."""
    bank = Bank()
    call = tool_call("pay", {"payee": "ACME", "cents": 500}, id="call_1")
    model = ScriptedModel([Reply(tool_calls=[call]), "done"])
    paused = pause_of(await collect(Runner(_agent(bank, model), sqlite_store(tmp_path)).run("pay")))
    edit = {"payee": "ACME", "cents": 50}
    decision = {
        "approved": True,
        key: {"name": "pay", "args": edit} if key == "edited_action" else edit,
    }

    model = ScriptedModel(["done"])
    runner = Runner(_agent(bank, model), sqlite_store(tmp_path))
    with pytest.raises(ValueError, match="Nothing ran and the checkpoint is kept") as caught:
        await collect(runner.resume(paused.checkpoint_id, decision))
    assert f"{key!r}" in str(caught.value) and '"arguments"' in str(caught.value)
    assert bank.paid == [] and model.calls == 0
    assert await checkpoint_ids(sqlite_store(tmp_path)) == [paused.checkpoint_id]

    who = {"approved": True, "approver": {"name": "ann", "id": 7}, "arguments": edit}
    events = await collect(runner.resume(paused.checkpoint_id, {**who, key: edit}))
    assert events[-1].error is None and bank.paid == [("ACME", 50)]


async def test_parallel_calls_edit_one_approve_another_deny_a_third(tmp_path: Path) -> None:
    bank = Bank()
    calls = [
        tool_call("pay", {"payee": "ACME", "cents": 500}, id="c1"),
        tool_call("pay", {"payee": "Bob", "cents": 20}, id="c2"),
        tool_call("pay", {"payee": "Eve", "cents": 900}, id="c3"),
    ]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    paused = pause_of(await collect(Runner(_agent(bank, model), sqlite_store(tmp_path)).run("pay")))
    edit, approve, deny = (point.id for point in paused.points)

    model = ScriptedModel(["done"])
    decisions = {
        edit: {"approved": True, "arguments": {"payee": "ACME", "cents": 50}},
        approve: True,
        deny: {"approved": False, "reason": "fraud"},
    }
    events = await collect(
        Runner(_agent(bank, model), sqlite_store(tmp_path)).resume(paused.checkpoint_id, decisions)
    )

    assert events[-1].error is None
    assert sorted(bank.paid) == [("ACME", 50), ("Bob", 20)]
    results = {m.tool_call_id: m.content for m in model.requests[0].messages if m.role == "tool"}
    assert results == {
        "c1": "[A person edited this call's arguments before it ran; it ran with "
        '{"payee": "ACME", "cents": 50}]\npaid 50 to ACME',
        "c2": "paid 20 to Bob",
        "c3": "Error: the call to 'pay' was not approved: fraud",
    }


async def test_an_edited_call_that_then_asks_its_own_question_keeps_the_edit(
    tmp_path: Path,
) -> None:
    """The edit is saved with the call's own pause: its next resume runs it again, and the
    model's arguments in the conversation are not the approved ones."""
    booked: list[tuple[str, str]] = []

    @adk.tool(require_approval=True)
    def book(flight: str, ctx: adk.ToolContext) -> str:
        """Book a seat on a flight."""
        if ctx.resume is None:
            raise adk.Interrupt("window or aisle?")
        booked.append((flight, str(ctx.resume.data)))
        return f"booked {flight}, {ctx.resume.data}"

    call = tool_call("book", {"flight": "LH1"}, id="c1")
    model = ScriptedModel([Reply(tool_calls=[call]), "done"])
    paused = pause_of(
        await collect(
            Runner(ReActAgent("a", model, tools=[book]), sqlite_store(tmp_path)).run("go")
        )
    )

    edit = {"approved": True, "arguments": {"flight": "LH2"}}
    runner = Runner(ReActAgent("a", ScriptedModel([]), tools=[book]), sqlite_store(tmp_path))
    asked = pause_of(await collect(runner.resume(paused.checkpoint_id, edit)))
    assert asked.points[0].info == "window or aisle?" and booked == []

    model = ScriptedModel(["done"])
    runner = Runner(ReActAgent("a", model, tools=[book]), sqlite_store(tmp_path))
    events = await collect(runner.resume(asked.checkpoint_id, "aisle"))
    assert events[-1].error is None and booked == [("LH2", "aisle")]
    assert model.requests[0].messages[-1].content == (
        "[A person edited this call's arguments before it ran; it ran with "
        '{"flight": "LH2"}]\nbooked LH2, aisle'
    )


async def test_the_check_before_the_resume_refuses_a_bad_edit_before_any_branch_runs(
    tmp_path: Path,
) -> None:
    """Two branches paused for approval: the edit in one does not fit. Refused once the other
    branch had made its approved call, the kept checkpoint would make it again on the next
    resume; the check before the run starts (adk._preflight) refuses it first."""
    bank = Bank()

    def agents() -> ParallelAgent:
        return ParallelAgent(
            "both",
            [
                ReActAgent("a", ScriptedModel(script_a), tools=[bank.pay]),
                ReActAgent("b", ScriptedModel(script_b), tools=[bank.pay]),
            ],
        )

    script_a: list[Any] = [Reply(tool_calls=[tool_call("pay", {"payee": "A", "cents": 1})]), "a"]
    script_b: list[Any] = [Reply(tool_calls=[tool_call("pay", {"payee": "B", "cents": 2})]), "b"]
    paused = pause_of(await collect(Runner(agents(), sqlite_store(tmp_path)).run("pay")))
    first, second = sorted(point.id for point in paused.points)

    script_a, script_b = ["a"], ["b"]
    bad = {first: True, second: {"approved": True, "arguments": {"payee": "B", "cents": "x"}}}
    with pytest.raises(ValueError, match="do not fit tool 'pay'"):
        await collect(Runner(agents(), sqlite_store(tmp_path)).resume(paused.checkpoint_id, bad))
    assert bank.paid == []

    good = {first: True, second: {"approved": True, "arguments": {"payee": "B", "cents": 3}}}
    events = await collect(
        Runner(agents(), sqlite_store(tmp_path)).resume(paused.checkpoint_id, good)
    )
    assert events[-1].error is None and sorted(bank.paid) == [("A", 1), ("B", 3)]


def _mcp_agent(model: ScriptedModel) -> tuple[MCPToolset, ReActAgent]:
    server = StdioServer(sys.executable, [str(STDIO_SCRIPT)])
    toolset = MCPToolset(server, tool_filter=["add"], require_approval=["add"])
    return toolset, ReActAgent("ops", model, tools=[toolset])


async def test_an_mcp_call_runs_with_the_edit_checked_against_the_servers_schema(
    tmp_path: Path,
) -> None:
    """A toolset's tool whose approval edits the call is found by the check before the resume
    (asking the server), which refuses an edit that does not fit the server's schema."""
    call = tool_call("add", {"a": 2, "b": 3}, id="c1")
    toolset, agent = _mcp_agent(ScriptedModel([Reply(tool_calls=[call]), "never"]))
    async with toolset:
        paused = pause_of(await collect(Runner(agent, sqlite_store(tmp_path)).run("add")))

    bad = {"approved": True, "arguments": {"a": "two", "b": 3}}
    toolset, agent = _mcp_agent(ScriptedModel(["never"]))
    async with toolset:
        resumed = Runner(agent, sqlite_store(tmp_path)).resume(paused.checkpoint_id, bad)
        with pytest.raises(ValueError, match="do not fit tool 'add': a: 'two' is not of type"):
            await collect(resumed)
        # Text no MCP transport can carry (a lone surrogate, which a form's JSON may hold
        # escaped) fits the schema but cannot be sent: refused here too, not run as an error
        # result the model reads under a note saying the call "ran with" the edit.
        unsendable = {"approved": True, "arguments": {"a": 2, "b": 3, "note": "\ud800"}}
        resumed = Runner(agent, sqlite_store(tmp_path)).resume(paused.checkpoint_id, unsendable)
        with pytest.raises(ValueError, match="do not fit tool 'add': arguments hold '\\\\ud800'"):
            await collect(resumed)
    assert await checkpoint_ids(sqlite_store(tmp_path)) == [paused.checkpoint_id]

    model = ScriptedModel(["done"])
    toolset, agent = _mcp_agent(model)
    edit = {"approved": True, "arguments": {"a": 20, "b": 3}}
    async with toolset:
        events = await collect(
            Runner(agent, sqlite_store(tmp_path)).resume(paused.checkpoint_id, edit)
        )
    assert events[-1].error is None
    assert model.requests[0].messages[-1].content == (
        '[A person edited this call\'s arguments before it ran; it ran with {"a": 20, "b": 3}]\n23'
    )


@pytest.mark.parametrize("capture", [True, False])
async def test_the_tool_span_records_the_edited_arguments_and_that_they_were_edited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture: bool
) -> None:
    if capture:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    else:
        monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    bank = Bank()
    call = tool_call("pay", {"payee": "ACME", "cents": 500}, id="c1")
    model = ScriptedModel([Reply(tool_calls=[call]), "done"])
    runner = Runner(_agent(bank, model), sqlite_store(tmp_path), tracer_provider=provider)
    paused = pause_of(await collect(runner.run("pay")))
    (first,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool pay"]
    assert "adk.approval.edited" not in (first.attributes or {})
    exporter.clear()

    runner = Runner(_agent(bank, model), sqlite_store(tmp_path), tracer_provider=provider)
    edit = {"approved": True, "arguments": {"payee": "ACME", "cents": 5}}
    await collect(runner.resume(paused.checkpoint_id, edit))
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool pay"]
    attributes = dict(span.attributes or {})
    assert attributes["adk.approval.edited"] is True
    if capture:
        assert attributes["gen_ai.tool.call.arguments"] == '{"payee": "ACME", "cents": 5}'
    else:
        assert "gen_ai.tool.call.arguments" not in attributes
    provider.shutdown()


async def test_a_result_returned_directly_is_the_output_without_the_note(tmp_path: Path) -> None:
    """The note is for the next model turn; a result returned directly is the agent's output
    (stored, parsed for an output_schema) and reaches no model."""
    bank = Bank()
    call = tool_call("pay", {"payee": "ACME", "cents": 500}, id="c1")

    def agent(model: ScriptedModel) -> ReActAgent:
        return ReActAgent(
            "payer", model, tools=[bank.pay], return_directly=["pay"], output_key="receipt"
        )

    paused = pause_of(
        await collect(
            Runner(agent(ScriptedModel([Reply(tool_calls=[call])])), sqlite_store(tmp_path)).run(
                "pay"
            )
        )
    )
    runner = Runner(agent(ScriptedModel([])), sqlite_store(tmp_path))
    edit = {"approved": True, "arguments": {"payee": "ACME", "cents": 5}}
    result = await runner.invoke_resume(paused.checkpoint_id, edit)
    assert result.text == "paid 5 to ACME" and bank.paid == [("ACME", 5)]
    assert result.session.values["receipt"] == "paid 5 to ACME"
    final = result.events[-1].message
    assert final is not None and final.metadata["edited_arguments"] == {"payee": "ACME", "cents": 5}


async def test_an_approval_inside_an_agent_tool_runs_with_the_edit(tmp_path: Path) -> None:
    """The inner agent's call is edited at its own address; the check before the resume walks
    into the AgentTool and refuses a bad edit there before anything runs."""
    bank = Bank()

    def outer(inner_script: list[Any], outer_script: list[Any]) -> ReActAgent:
        inner = ReActAgent(
            "cashier", ScriptedModel(inner_script), description="pays", tools=[bank.pay]
        )
        return ReActAgent("boss", ScriptedModel(outer_script), tools=[AgentTool(inner)])

    inner_call = tool_call("pay", {"payee": "ACME", "cents": 500}, id="i1")
    outer_call = tool_call("cashier", {"request": "pay ACME"}, id="o1")
    agent = outer([Reply(tool_calls=[inner_call]), "paid"], [Reply(tool_calls=[outer_call]), "ok"])
    paused = pause_of(await collect(Runner(agent, sqlite_store(tmp_path)).run("pay")))
    (point,) = paused.points
    assert point.id.endswith("/tool:pay#i1")

    bad = {"approved": True, "arguments": {"payee": "ACME"}}
    with pytest.raises(ValueError, match="cents: Field required"):
        await collect(
            Runner(outer([], []), sqlite_store(tmp_path)).resume(paused.checkpoint_id, bad)
        )

    edit = {"approved": True, "arguments": {"payee": "ACME", "cents": 7}}
    runner = Runner(outer(["paid"], ["ok"]), sqlite_store(tmp_path))
    result = await runner.invoke_resume(paused.checkpoint_id, edit)
    assert result.text == "ok" and bank.paid == [("ACME", 7)]


async def test_arguments_sent_back_unchanged_are_no_edit(tmp_path: Path) -> None:
    """A form prefilled with the request's arguments sends them back as they were: the call runs
    as approved, and the model is not told of an edit nobody made. An edit's note shows text as
    written (not ASCII escaped)."""
    bank = Bank()
    calls = [tool_call("pay", {"payee": "Müller", "cents": 500}, id=id) for id in ("c1", "c2")]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    paused = pause_of(await collect(Runner(_agent(bank, model), sqlite_store(tmp_path)).run("pay")))
    same, changed = (point.id for point in paused.points)

    model = ScriptedModel(["done"])
    decisions = {
        same: {"approved": True, "arguments": paused.points[0].info["arguments"]},
        changed: {"approved": True, "arguments": {"payee": "Müller GmbH", "cents": 500}},
    }
    runner = Runner(_agent(bank, model), sqlite_store(tmp_path))
    await collect(runner.resume(paused.checkpoint_id, decisions))
    results = {m.tool_call_id: m for m in model.requests[0].messages if m.role == "tool"}
    assert results["c1"].content == "paid 500 to Müller"
    assert "edited_arguments" not in results["c1"].metadata
    assert results["c2"].content.startswith(
        '[A person edited this call\'s arguments before it ran; it ran with {"payee": "Müller GmbH"'
    )


async def test_arguments_sent_back_as_the_request_showed_them_are_no_edit(
    tmp_path: Path,
) -> None:
    """The request shows the arguments as the tool validated them: with the defaults the model
    left out, and its "500" as the int 500. A form prefilled with them sends back what differs
    from the model's call, and the model was told of an edit nobody made."""
    ran: list[tuple[str, int, str]] = []

    @adk.tool(require_approval=True)
    def pay(payee: str, cents: int, memo: str = "") -> str:
        """Pay someone."""
        ran.append((payee, cents, memo))
        return f"paid {cents} to {payee}"

    call = tool_call("pay", {"payee": "A", "cents": "500"}, id="c1")
    model = ScriptedModel([Reply(tool_calls=[call])])
    paused = pause_of(
        await collect(
            Runner(ReActAgent("payer", model, tools=[pay]), sqlite_store(tmp_path)).run("pay")
        )
    )
    shown = paused.points[0].info["arguments"]
    assert shown == {"payee": "A", "cents": 500, "memo": ""}

    model = ScriptedModel(["done"])
    runner = Runner(ReActAgent("payer", model, tools=[pay]), sqlite_store(tmp_path))
    approved = {"approved": True, "arguments": shown}
    done = await runner.invoke_resume(paused.checkpoint_id, approved)
    [result] = [m for m in model.requests[-1].messages if m.role == "tool"]
    assert result.content == "paid 500 to A"
    assert "edited_arguments" not in result.metadata
    assert done.text == "done" and ran == [("A", 500, "")]


async def test_a_bad_edit_of_a_toolsets_call_is_refused_before_a_parallel_branch_runs(
    tmp_path: Path,
) -> None:
    """One branch's MCP call and another's payment paused for approval; the MCP call's edit
    does not fit the server's schema. Found when that branch's round started, it failed the
    resume after the other branch had paid, and the kept checkpoint's next resume paid again;
    the check before the resume finds the toolset's tool and refuses the edit first."""
    bank = Bank()

    def agents(toolset: MCPToolset, script: list[Any]) -> ParallelAgent:
        ops = ReActAgent("ops", ScriptedModel(list(script)), tools=[toolset])
        payer = ReActAgent("payer", ScriptedModel(list(script)), tools=[bank.pay])
        return ParallelAgent("both", [ops, payer])

    def toolset() -> MCPToolset:
        server = StdioServer(sys.executable, [str(STDIO_SCRIPT)])
        return MCPToolset(server, tool_filter=["add"], require_approval=["add"])

    def script(name: str, arguments: dict[str, Any]) -> list[Any]:
        return [Reply(tool_calls=[tool_call(name, arguments, id="c1")]), "done"]

    tools = toolset()
    async with tools:
        ops = ReActAgent("ops", ScriptedModel(script("add", {"a": 2, "b": 3})), tools=[tools])
        payer = ReActAgent(
            "payer", ScriptedModel(script("pay", {"payee": "B", "cents": 2})), tools=[bank.pay]
        )
        first = Runner(ParallelAgent("both", [ops, payer]), sqlite_store(tmp_path))
        paused = pause_of(await collect(first.run("go")))
    by_agent = {point.id.split("/")[1]: point.id for point in paused.points}

    bad = {
        by_agent["agent:ops"]: {"approved": True, "arguments": {"a": "two", "b": 3}},
        by_agent["agent:payer"]: True,
    }
    tools = toolset()
    async with tools:
        resumed = Runner(agents(tools, ["never"]), sqlite_store(tmp_path))
        with pytest.raises(ValueError, match="do not fit tool 'add'"):
            await collect(resumed.resume(paused.checkpoint_id, bad))
    assert bank.paid == []  # the payment waits with the kept checkpoint
    assert await checkpoint_ids(sqlite_store(tmp_path)) == [paused.checkpoint_id]

    good = {**bad, by_agent["agent:ops"]: {"approved": True, "arguments": {"a": 20, "b": 3}}}
    tools = toolset()
    async with tools:
        resumed = Runner(agents(tools, ["done"]), sqlite_store(tmp_path))
        events = await collect(resumed.resume(paused.checkpoint_id, good))
    assert events[-1].error is None
    assert bank.paid == [("B", 2)]  # once
    results = [
        e.message.content for e in events if e.message is not None and e.message.role == "tool"
    ]
    assert any(r.endswith("23") and "it ran with" in r for r in results)


async def test_a_callback_that_answers_for_an_edited_call_is_not_told_as_what_ran(
    tmp_path: Path,
) -> None:
    """A before_tool callback refusing the edited amount answers for the call, whose tool never
    runs: its result came with the note that the edited call ran, before the callback's refusal,
    and the tool message's metadata held the edit as what had run."""
    bank = Bank()

    def limit(ctx: adk.ToolContext, call: adk.ToolCall) -> adk.ToolResult | None:
        if json.loads(call.arguments)["cents"] > 1000:
            return adk.ToolResult.error("over the limit: not paid")
        return None

    def runner(model: ScriptedModel) -> Runner:
        callbacks = [Callbacks(before_tool=limit)]
        return Runner(_agent(bank, model), sqlite_store(tmp_path), callbacks=callbacks)

    call = tool_call("pay", {"payee": "A", "cents": 500}, id="c1")
    paused = pause_of(await collect(runner(ScriptedModel([Reply(tool_calls=[call])])).run("pay")))
    model = ScriptedModel(["done"])
    edit = {"approved": True, "arguments": {"payee": "A", "cents": 5000}}
    await collect(runner(model).resume(paused.checkpoint_id, edit))
    [result] = [m for m in model.requests[0].messages if m.role == "tool"]
    assert result.content == "Error: over the limit: not paid"
    assert "edited_arguments" not in result.metadata
    assert bank.paid == []


async def test_a_tool_registered_under_another_name_takes_an_edit(tmp_path: Path) -> None:
    """``Resources.add_tool(tool, name=...)`` serves the tool under the new name; the edit of its
    call is checked as the tool checks arguments. The renamed tool did not pass that check on,
    so every edit of its calls was refused as aimed at a tool that cannot check edits."""
    bank = Bank()

    def runner(model: ScriptedModel) -> Runner:
        resources = Resources()
        resources.add_tool(bank.pay, name="send_money")
        agent = ReActAgent("payer", model, tools=["send_money"])
        return Runner(agent, sqlite_store(tmp_path), resources=resources)

    call = tool_call("send_money", {"payee": "ACME", "cents": 500}, id="call_1")
    paused = pause_of(await collect(runner(ScriptedModel([Reply(tool_calls=[call])])).run("pay")))

    bad = {"approved": True, "arguments": {"payee": "ACME", "cents": "lots"}}
    with pytest.raises(ValueError, match="do not fit tool 'send_money': cents: Input should be"):
        await collect(runner(ScriptedModel(["never"])).resume(paused.checkpoint_id, bad))
    assert bank.paid == []

    model = ScriptedModel(["done"])
    edit = {"approved": True, "arguments": {"payee": "ACME", "cents": 5}}
    events = await collect(runner(model).resume(paused.checkpoint_id, edit))
    assert events[-1].error is None and bank.paid == [("ACME", 5)]
    assert model.requests[0].messages[-1].content == (
        "[A person edited this call's arguments before it ran; it ran with "
        '{"payee": "ACME", "cents": 5}]\npaid 5 to ACME'
    )


async def test_a_call_a_before_tool_filled_in_resumes_after_its_approval(tmp_path: Path) -> None:
    """A ``before_tool`` callback fills in a parameter the model does not give (the user, from
    the session: Google ADK's ports do this); the tool pauses for approval. The checkpoint keeps
    the model's call, which lacks the parameter, so the resume's checks before anything runs
    found its arguments unfit and refused the resume as if the tool had changed since the pause
    ("user: Field required"), alone and in a round of two calls alike. The checks now give the
    tool the arguments it ran with; a tool that did change since is still refused."""
    paid: list[tuple[str, int]] = []

    def pay_tool(changed: bool = False) -> adk.FunctionTool:
        if changed:

            @adk.tool(require_approval=True, name="pay")
            def pay_v2(user: str, cents: int, currency: str) -> str:
                """Pay."""
                raise AssertionError("a call whose tool changed since the pause does not run")

            return pay_v2

        @adk.tool(require_approval=True)
        def pay(user: str, cents: int) -> str:
            """Pay."""
            paid.append((user, cents))
            return f"{user} paid {cents}"

        return pay

    def fill_user(ctx: adk.ToolContext, call: adk.ToolCall) -> None:
        call.arguments = json.dumps({**json.loads(call.arguments), "user": "ann"})

    def runner(db: Path, model: ScriptedModel, changed: bool = False) -> Runner:
        agent = ReActAgent("a", model, tools=[pay_tool(changed)])
        return Runner(agent, sqlite_store(db), callbacks=[Callbacks(before_tool=fill_user)])

    for count in (1, 2):
        paid.clear()
        db = tmp_path / str(count)
        db.mkdir()
        calls = [tool_call("pay", {"cents": 5}, id=f"c{i}") for i in range(count)]
        model = ScriptedModel([Reply(tool_calls=calls), "done"])
        paused = pause_of(await collect(runner(db, model).run("go")))
        assert [p.info["arguments"] for p in paused.points] == [{"cents": 5, "user": "ann"}] * count
        answers = {point.id: True for point in paused.points}

        changed = runner(db, ScriptedModel(["done"]), changed=True)
        refused = await collect(changed.resume(paused.checkpoint_id, answers))
        error = refused[-1].error
        assert error is not None and error.type == "CheckpointError", error
        assert "no longer fit tool 'pay'" in error.message and "currency" in error.message
        assert paid == [] and await checkpoint_ids(changed.checkpoint_store) != []  # kept

        model = ScriptedModel(["done"])
        events = await collect(runner(db, model).resume(paused.checkpoint_id, answers))
        assert events[-1].error is None, events[-1].error
        assert paid == [("ann", 5)] * count
        called = next(m for m in model.requests[0].messages if m.tool_calls).tool_calls
        assert [json.loads(c.arguments) for c in called] == [{"cents": 5}] * count  # the model's


async def test_an_edited_call_a_before_tool_edits_too_is_returned_directly_without_the_note(
    tmp_path: Path,
) -> None:
    """A person edits a call that a ``before_tool`` callback edits as well (it fills in the user):
    the note was made of the arguments the callback left, but taken off a result returned
    directly as the note of the person's edit, so the agent's output kept it ('[A person edited
    this call's arguments ...]' before the tool's text). The note says the person's edit, as the
    model, which never sees a callback's edits, is told of it."""
    ran: list[tuple[str, int]] = []

    @adk.tool(require_approval=True)
    def pay(user: str, cents: int) -> str:
        """Pay."""
        ran.append((user, cents))
        return f"{user} paid {cents}"

    def fill_user(ctx: adk.ToolContext, call: adk.ToolCall) -> None:
        call.arguments = json.dumps({**json.loads(call.arguments), "user": "ann"})

    def runner(model: ScriptedModel, directly: bool) -> Runner:
        agent = ReActAgent("a", model, tools=[pay], return_directly=["pay"] if directly else [])
        return Runner(agent, sqlite_store(tmp_path), callbacks=[Callbacks(before_tool=fill_user)])

    edit = {"approved": True, "arguments": {"user": "bob", "cents": 7}}
    for directly in (True, False):
        ran.clear()
        call = tool_call("pay", {"user": "x", "cents": 5}, id="c1")
        paused = pause_of(
            await collect(runner(ScriptedModel([Reply(tool_calls=[call])]), directly).run("go"))
        )
        model = ScriptedModel(["done"])
        events = await collect(runner(model, directly).resume(paused.checkpoint_id, edit))
        assert events[-1].error is None and ran == [("ann", 7)]
        result = next(e.message for e in events if e.message and e.message.role == "tool")
        assert result.metadata["edited_arguments"] == {"user": "bob", "cents": 7}
        if directly:
            assert result.content == "ann paid 7"
        else:
            assert model.requests[0].messages[-1].content == (
                "[A person edited this call's arguments before it ran; it ran with "
                '{"user": "bob", "cents": 7}]\nann paid 7'
            )


class _Payment(pydantic.BaseModel):
    payee: str
    cents: int

    @pydantic.field_validator("cents")
    @classmethod
    def _within_limit(cls, cents: int) -> int:
        # A Pydantic AI port's ModelRetry: the words are for whoever wrote the arguments.
        limit = _LIMIT[0]
        if cents > limit:
            raise _RAISES[0](f"{cents} cents is over the limit of {limit}; ask for less")
        return cents


_LIMIT = [1000]
_RAISES: list[type[Exception]] = [adk.ToolError]  # what _Payment's validator refuses with


def _limited_pay(paid: list[tuple[str, int]], approval: bool = True) -> adk.FunctionTool:
    @adk.tool(require_approval=approval, name="pay")
    def pay(payment: _Payment) -> str:
        """Pay someone."""
        paid.append((payment.payee, payment.cents))
        return f"paid {payment.cents} to {payment.payee}"

    return pay


async def test_an_argument_models_tool_error_is_the_error_result_the_model_reads() -> None:
    """A validator of a tool's argument model raising ``adk.ToolError`` (``ModelRetry``): the
    model reads the validator's words as the call's error result and can ask again."""
    paid: list[tuple[str, int]] = []
    over = tool_call("pay", {"payment": {"payee": "ACME", "cents": 5000}}, id="c1")
    under = tool_call("pay", {"payment": {"payee": "ACME", "cents": 50}}, id="c2")
    model = ScriptedModel([Reply(tool_calls=[over]), Reply(tool_calls=[under]), "done"])
    agent = ReActAgent("payer", model, tools=[_limited_pay(paid, approval=False)])

    events = await collect(Runner(agent).run("pay"))

    assert events[-1].error is None and paid == [("ACME", 50)]
    result = model.requests[1].messages[-1]
    assert result.role == "tool" and result.tool_call_id == "c1"
    assert result.content == "Error: 5000 cents is over the limit of 1000; ask for less"
    assert result.metadata["is_error"] is True


class _Payee(pydantic.BaseModel):
    name: str

    @pydantic.field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        if name != "ACME":
            raise adk.ToolError()  # a ModelRetry raised without words
        return name


async def test_an_argument_models_tool_error_without_words_still_tells_the_model_why() -> None:
    """A validator of a tool's argument model raising ``adk.ToolError()`` without a message: the
    model read only "Error: tool failed", as if the tool had run and failed, where an edit the
    same validator rejects says the argument model rejected it (``_problems``), and an output
    schema's validator says so too (a4acc83). The error result says the arguments were
    rejected, so the model asks again with others."""

    @adk.tool
    def pay_to(payee: _Payee) -> str:
        """Pay someone."""
        return f"paid {payee.name}"

    bad = tool_call("pay_to", {"payee": {"name": "Bob"}}, id="c1")
    good = tool_call("pay_to", {"payee": {"name": "ACME"}}, id="c2")
    model = ScriptedModel([Reply(tool_calls=[bad]), Reply(tool_calls=[good]), "done"])

    await collect(Runner(ReActAgent("payer", model, tools=[pay_to])).run("pay"))

    result = model.requests[1].messages[-1]
    assert result.role == "tool" and result.tool_call_id == "c1"
    assert result.content == (
        "Error: invalid arguments for tool 'pay_to': the argument model's validator rejected "
        "them (adk.ToolError)"
    )
    assert model.requests[2].messages[-1].content == "paid ACME"


async def test_an_edit_an_argument_models_validator_rejects_with_a_tool_error_is_refused(
    tmp_path: Path,
) -> None:
    """A person's edit that the argument model's validator rejects with ``adk.ToolError`` is
    refused as an edit that does not fit (the validator's words, the checkpoint kept), alone and
    in a round of two calls: it escaped ``run_tool_call`` as a bare ``ToolError``, the check
    catching ``ValidationError`` alone."""
    for count in (1, 2):
        paid: list[tuple[str, int]] = []
        db = tmp_path / str(count)
        db.mkdir()
        calls = [
            tool_call("pay", {"payment": {"payee": "ACME", "cents": 5}}, id=f"c{i}")
            for i in range(count)
        ]
        model = ScriptedModel([Reply(tool_calls=calls), "done"])
        paused = pause_of(
            await collect(
                Runner(ReActAgent("a", model, tools=[_limited_pay(paid)]), sqlite_store(db)).run(
                    "go"
                )
            )
        )
        first, *others = sorted(point.id for point in paused.points)
        over = {"approved": True, "arguments": {"payment": {"payee": "ACME", "cents": 5000}}}
        bad: dict[str, Any] = {first: over, **dict.fromkeys(others, True)}

        runner = Runner(
            ReActAgent("a", ScriptedModel(["never"]), tools=[_limited_pay(paid)]), sqlite_store(db)
        )
        with pytest.raises(
            ValueError,
            match="do not fit tool 'pay': 5000 cents is over the limit of 1000; ask for less",
        ):
            await collect(runner.resume(paused.checkpoint_id, bad))
        assert paid == [] and await checkpoint_ids(runner.checkpoint_store) == [
            paused.checkpoint_id
        ]

        good = {
            **bad,
            first: {"approved": True, "arguments": {"payment": {"payee": "B", "cents": 9}}},
        }
        runner = Runner(
            ReActAgent("a", ScriptedModel(["done"]), tools=[_limited_pay(paid)]), sqlite_store(db)
        )
        events = await collect(runner.resume(paused.checkpoint_id, good))
        assert events[-1].error is None and sorted(paid) == sorted(
            [("B", 9)] + [("ACME", 5)] * len(others)
        )


async def test_saved_arguments_a_stricter_validator_rejects_with_a_tool_error_refuse_the_resume(
    tmp_path: Path,
) -> None:
    """Arguments valid at the pause that the argument model's validator, stricter since (a
    redeploy), rejects with ``adk.ToolError``: the resume is refused as for arguments that no
    longer fit (a ``CheckpointError`` with the validator's words, the checkpoint kept), alone
    and in a round of two calls, as a ``ValidationError`` is; the model is not left to work
    around a call a person answered."""
    for count in (1, 2):
        paid: list[tuple[str, int]] = []
        db = tmp_path / str(count)
        db.mkdir()
        calls = [
            tool_call("pay", {"payment": {"payee": "ACME", "cents": 500}}, id=f"c{i}")
            for i in range(count)
        ]
        model = ScriptedModel([Reply(tool_calls=calls), "done"])
        agent = ReActAgent("a", model, tools=[_limited_pay(paid)])
        paused = pause_of(await collect(Runner(agent, sqlite_store(db)).run("go")))
        answers = {point.id: True for point in paused.points}

        _LIMIT[0] = 100
        try:
            model = ScriptedModel(["done"])
            runner = Runner(ReActAgent("a", model, tools=[_limited_pay(paid)]), sqlite_store(db))
            refused = await collect(runner.resume(paused.checkpoint_id, answers))
        finally:
            _LIMIT[0] = 1000
        error = refused[-1].error
        assert error is not None and error.type == "CheckpointError", error
        assert "no longer fit tool 'pay'" in error.message
        assert "500 cents is over the limit of 100; ask for less" in error.message
        assert paid == [] and model.requests == []
        assert await checkpoint_ids(runner.checkpoint_store) == [paused.checkpoint_id]


@pytest.mark.parametrize("refusal", [TypeError, KeyError])
async def test_a_validator_raising_what_pydantic_does_not_wrap_refuses_an_edit_and_a_resume(
    tmp_path: Path, refusal: type[Exception]
) -> None:
    """Review rv12 (of 7c0649d, which read a validator's ``adk.ToolError``): pydantic passes a
    validator's ``TypeError`` or ``KeyError`` through unwrapped too, so a person's edit it
    rejected escaped the resume as that bare exception, not the ``ValueError`` naming the tool,
    and saved arguments a stricter validator rejected so escaped it bare, not as the
    ``CheckpointError`` of arguments that no longer fit (as a saved event's validator raising
    them refuses an ActionAgent's resume, and a checkpoint's values make it malformed). Both
    refuse now, naming the exception, nothing paid and the checkpoint kept."""
    paid: list[tuple[str, int]] = []
    call = tool_call("pay", {"payment": {"payee": "ACME", "cents": 500}}, id="c1")
    model = ScriptedModel([Reply(tool_calls=[call]), "done"])
    agent = ReActAgent("a", model, tools=[_limited_pay(paid)])
    paused = pause_of(await collect(Runner(agent, sqlite_store(tmp_path)).run("go")))
    (point,) = paused.points
    over = {"approved": True, "arguments": {"payment": {"payee": "ACME", "cents": 5000}}}
    _RAISES[0] = refusal
    try:
        model = ScriptedModel(["never"])
        runner = Runner(ReActAgent("a", model, tools=[_limited_pay(paid)]), sqlite_store(tmp_path))
        with pytest.raises(ValueError, match="do not fit tool 'pay'") as raised:
            await collect(runner.resume(paused.checkpoint_id, {point.id: over}))
        assert f"validator raised {refusal.__name__}: " in str(raised.value)
        assert "5000 cents is over the limit of 1000" in str(raised.value)

        _LIMIT[0] = 100  # stricter since the pause: the saved 500 cents no longer fit
        refused = await collect(runner.resume(paused.checkpoint_id, {point.id: True}))
    finally:
        _RAISES[0], _LIMIT[0] = adk.ToolError, 1000
    error = refused[-1].error
    assert error is not None and error.type == "CheckpointError", error
    assert "no longer fit tool 'pay'" in error.message
    assert f"validator raised {refusal.__name__}: " in error.message
    assert paid == [] and model.requests == []
    assert await checkpoint_ids(runner.checkpoint_store) == [paused.checkpoint_id]
