"""The check before a resume runs anything (``adk._preflight``) reaches the tool calls an
``ActionAgent``'s paused tool action runs again (docs/interrupts.md, "Resuming after a
redeploy"; docs/event_driven.md). Checked only when the action ran them again, a resume that
does not fit them failed after a ``ParallelAgent``'s other branch had made its approved payment,
and the checkpoint the failure keeps made it again on the next resume.

Each resume is a fresh ``Runner`` over a real SQLite store, as a service resumes in another
process; the payer beside the agent is a ``ReActAgent`` that counts its payments."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from conftest import Bank, ChatActor, checkpoint_ids, sqlite_store
from mcp_servers.process import STDIO_SCRIPT
from test_interrupt_tools import _one_id
from test_interrupts import collect, pause_of

import adk
from adk import AgentEvent, AgentTool, ParallelAgent, Resources, RunError, Runner
from adk.actions import ActionAgent
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import CheckpointError
from adk.mcp import MCPToolset, StdioServer
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


def _payer(bank: Bank, script: list[Any]) -> ReActAgent:
    return ReActAgent("payer", ScriptedModel(script), tools=[bank.pay])


_PAY = [Reply(tool_calls=[tool_call("pay", {"payee": "B", "cents": 2}, id="p1")]), "paid"]
_TRANSFER = [Reply(tool_calls=[tool_call("transfer", {"account": "X", "cents": 5}, id="t1")]), "ok"]


def _teller_of(tools: list[str], resources: Resources) -> ChatActor:
    """The action agent beside the payer: asks model ``m`` with ``tools``; outputs the answer."""
    return ChatActor("teller", tools, prompt="go", resources=resources)


def _teller(model: ScriptedModel, *tools: Any) -> ChatActor:
    resources = Resources()
    resources.add_model("m", model)
    for found in tools:
        resources.add_tool(found)
    return _teller_of([found.spec.name for found in tools], resources)


def _points(paused: Any) -> dict[str, str]:
    """The paused points by the branch they lie in."""
    return {point.id.split("/")[1].removeprefix("agent:"): point.id for point in paused.points}


async def _paused(tmp_path: Path, bank: Bank, teller: ActionAgent) -> Any:
    both = ParallelAgent("both", [_payer(bank, list(_PAY)), teller])
    paused = pause_of(await collect(Runner(both, sqlite_store(tmp_path)).run("go")))
    assert sorted(_points(paused)) == ["payer", "teller"]
    return paused


@pytest.mark.parametrize(
    ("answer", "complaint"),
    [
        (
            {"approved": True, "arguments": {"account": "X", "cents": "lots"}},
            "the edited arguments for approval point .* do not fit tool 'transfer'",
        ),
        ({"approved": True, "arguments": {"account": "X"}}, "cents: Field required"),
        ({"approved": "maybe"}, "is not a decision"),
    ],
)
async def test_an_answer_the_action_agents_paused_call_cannot_take_runs_no_branch(
    tmp_path: Path, answer: object, complaint: str
) -> None:
    """The ReAct branch's payment and the action agent's transfer paused for approval; the
    transfer's answer does not fit. Refused when the tool action ran it again, the payment had
    been made and the kept checkpoint's next resume made it again: paid twice."""
    bank = Bank()
    paused = await _paused(tmp_path, bank, _teller(ScriptedModel(list(_TRANSFER)), bank.transfer))
    points = _points(paused)

    bad = {points["payer"]: True, points["teller"]: answer}
    both = ParallelAgent("both", [_payer(bank, ["paid"]), _teller(ScriptedModel(), bank.transfer)])
    refusal = await _refusal(Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, bad))
    paid_when_refused = list(bank.paid)
    assert await checkpoint_ids(sqlite_store(tmp_path)) == [paused.checkpoint_id]

    edit = {"approved": True, "arguments": {"account": "X", "cents": 7}}
    good = {**bad, points["teller"]: edit}
    teller = _teller(ScriptedModel(["ok"]), bank.transfer)
    both = ParallelAgent("both", [_payer(bank, ["paid"]), teller])
    events = await collect(Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, good))
    assert events[-1].error is None
    # Once across the two resumes (twice when the refusal came after the payer's branch ran).
    assert bank.paid == [("B", 2)] and bank.sent == [("X", 7)]
    assert await checkpoint_ids(sqlite_store(tmp_path)) == []
    assert paid_when_refused == []
    assert isinstance(refusal, ValueError) and re.search(complaint, str(refusal)), refusal


async def _refusal(events: AsyncIterator[AgentEvent]) -> BaseException | None:
    """What a resume failed with: the exception it raised, or its error event's."""
    try:
        found = await collect(events)
    except Exception as exc:
        return exc
    return found[-1].exception


async def test_a_paused_call_whose_tool_changed_is_refused_before_any_branch_runs(
    tmp_path: Path,
) -> None:
    """The transfer tool's parameter renamed since the pause: the saved arguments no longer fit
    it (its own check, ``_adk_check_resume``), refused before the payer branch pays."""
    bank = Bank()
    paused = await _paused(tmp_path, bank, _teller(ScriptedModel(list(_TRANSFER)), bank.transfer))
    points = _points(paused)

    @adk.tool(require_approval=True, name="transfer")
    def renamed(account: str, amount: int) -> str:
        """Move money to an account.

        Args:
            account: where it goes.
            amount: how much, in cents.
        """
        bank.sent.append((account, amount))
        return f"sent {amount} to {account}"

    approvals = {point: True for point in points.values()}
    both = ParallelAgent("both", [_payer(bank, ["paid"]), _teller(ScriptedModel(["ok"]), renamed)])
    events = await collect(
        Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, approvals)
    )
    error = events[-1].exception
    assert isinstance(error, CheckpointError), events[-1]
    assert "its arguments no longer fit tool 'transfer'" in str(error)
    assert [event.error for event in events[:-1]] == []  # the refusal is the only event
    assert bank.paid == [] and bank.sent == []
    assert await checkpoint_ids(sqlite_store(tmp_path)) == [paused.checkpoint_id]


async def test_a_bad_edit_of_a_call_inside_an_agent_tool_of_the_action_agent_runs_no_branch(
    tmp_path: Path,
) -> None:
    """The action agent's tool is an ``AgentTool`` whose ReAct agent paused at a transfer: the
    check walks into the nested agent through the action's paused call."""
    bank = Bank()

    def teller(script: list[Any]) -> ChatActor:
        model = ScriptedModel(script)
        clerk = ReActAgent("clerk", model, description="Sends money.", tools=[bank.transfer])
        resources = Resources()
        resources.add_model("m", ScriptedModel([*_calls_clerk, "ok"]))
        resources.add_tool(AgentTool(clerk))
        return _teller_of(["clerk"], resources)

    _calls_clerk: list[Any] = [Reply(tool_calls=[tool_call("clerk", {"request": "send"}, id="c")])]
    paused = await _paused(tmp_path, bank, teller(list(_TRANSFER)))
    points = _points(paused)
    assert "/agent:clerk/tool:transfer#t1" in points["teller"]

    _calls_clerk.clear()  # resumed: the teller's model answers once the clerk has
    edit = {"approved": True, "arguments": {"account": "X", "cents": "lots"}}
    bad = {points["payer"]: True, points["teller"]: edit}
    both = ParallelAgent("both", [_payer(bank, ["paid"]), teller(["ok"])])
    with pytest.raises(ValueError, match="do not fit tool 'transfer'"):
        await collect(Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, bad))
    assert bank.paid == [] and bank.sent == []

    good = {**bad, points["teller"]: True}
    both = ParallelAgent("both", [_payer(bank, ["paid"]), teller(["ok"])])
    events = await collect(Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, good))
    assert events[-1].error is None
    assert bank.paid == [("B", 2)] and bank.sent == [("X", 5)]


def _mcp_teller(model: ScriptedModel) -> tuple[Resources, ChatActor]:
    """A teller whose ``add`` is an MCP server's, registered in its resources (``add_mcp``):
    the check before the resume finds it only by asking the server."""
    resources = Resources()
    resources.add_model("m", model)
    server = StdioServer(sys.executable, [str(STDIO_SCRIPT)])
    resources.add_mcp("ops", MCPToolset(server, tool_filter=["add"], require_approval=["add"]))
    return resources, _teller_of(["add"], resources)


async def test_a_bad_edit_of_an_mcp_call_of_the_action_agent_runs_no_branch(
    tmp_path: Path,
) -> None:
    bank = Bank()
    call = Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="a1")])
    resources, teller = _mcp_teller(ScriptedModel([call, "never"]))
    async with resources:
        paused = await _paused(tmp_path, bank, teller)
    points = _points(paused)

    bad = {points["payer"]: True, points["teller"]: {"approved": True, "arguments": {"a": "two"}}}
    resources, teller = _mcp_teller(ScriptedModel(["never"]))
    async with resources:
        both = ParallelAgent("both", [_payer(bank, ["paid"]), teller])
        with pytest.raises(ValueError, match="do not fit tool 'add'"):
            await collect(Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, bad))
    assert bank.paid == []
    assert await checkpoint_ids(sqlite_store(tmp_path)) == [paused.checkpoint_id]

    good = {**bad, points["teller"]: {"approved": True, "arguments": {"a": 20, "b": 3}}}
    model = ScriptedModel(["added"])
    resources, teller = _mcp_teller(model)
    async with resources:
        both = ParallelAgent("both", [_payer(bank, ["paid"]), teller])
        events = await collect(
            Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, good)
        )
    assert events[-1].error is None and bank.paid == [("B", 2)]
    assert model.requests[0].messages[-1].content.endswith("23")


async def test_a_paused_call_whose_tool_is_gone_is_refused_before_any_branch_runs(
    tmp_path: Path,
) -> None:
    """The transfer tool removed since the pause. The action answered the call as an unknown
    tool, spending the approval on nothing, and the chat's next round failed on the missing
    tool with the checkpoint kept, after the payer had paid: refused first, as a ReActAgent's."""
    bank = Bank()
    paused = await _paused(tmp_path, bank, _teller(ScriptedModel(list(_TRANSFER)), bank.transfer))
    approvals = {point: True for point in _points(paused).values()}

    both = ParallelAgent("both", [_payer(bank, ["paid"]), _teller(ScriptedModel(["ok"]))])
    events = await collect(
        Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, approvals)
    )
    assert bank.paid == [] and bank.sent == []
    error = events[-1].exception
    assert isinstance(error, CheckpointError), events[-1]
    assert "the paused calls need tools it no longer has: transfer" in str(error)
    assert len(events) == 1

    teller = _teller(ScriptedModel(["ok"]), bank.transfer)
    both = ParallelAgent("both", [_payer(bank, ["paid"]), teller])
    events = await collect(
        Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, approvals)
    )
    assert events[-1].error is None
    assert bank.paid == [("B", 2)] and bank.sent == [("X", 5)]


async def test_a_paused_call_whose_servers_tool_is_gone_fails_the_resume_and_keeps_it(
    tmp_path: Path,
) -> None:
    """The MCP server no longer offers the paused call's tool (the walk asks no server, so the
    action finds out): the resume fails with the checkpoint kept, not an unknown-tool answer
    that spends the approval."""
    call = Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="a1")])
    resources, teller = _mcp_teller(ScriptedModel([call, "never"]))
    async with resources:
        paused = pause_of(await collect(Runner(teller, sqlite_store(tmp_path)).run("go")))

    model = ScriptedModel(["never"])
    resources = Resources()
    resources.add_model("m", model)
    server = StdioServer(sys.executable, [str(STDIO_SCRIPT)])
    resources.add_mcp("ops", MCPToolset(server, tool_filter=["echo"]))
    async with resources:
        runner = Runner(_teller_of(["add"], resources), sqlite_store(tmp_path))
        events = await collect(runner.resume(paused.checkpoint_id, True))
    error = events[-1].exception
    assert isinstance(error, CheckpointError), events[-1]
    assert "the paused calls need tools it no longer has: add" in str(error)
    assert model.calls == 0
    assert await checkpoint_ids(sqlite_store(tmp_path)) == [paused.checkpoint_id]


async def test_a_call_a_before_tool_filled_in_resumes_in_a_tool_action(tmp_path: Path) -> None:
    """A ``before_tool`` callback fills in the account the model does not give, and the tool
    action's calls pause for approval, one alone or two in a round. The checkpoint keeps the
    model's calls: the check before the resume gave the tool those, found them unfit ("account:
    Field required") and refused the resume as if the tool had changed since the pause."""

    def fill_account(ctx: adk.ToolContext, call: adk.ToolCall) -> None:
        call.arguments = json.dumps({**json.loads(call.arguments), "account": "X"})

    for count in (1, 2):
        bank = Bank()
        db = tmp_path / str(count)
        db.mkdir()
        calls = [tool_call("transfer", {"cents": 5}, id=f"t{i}") for i in range(count)]
        model = ScriptedModel([Reply(tool_calls=calls), "ok"])
        callbacks = [adk.Callbacks(before_tool=fill_account)]
        teller = _teller(model, bank.transfer)
        paused = pause_of(
            await collect(Runner(teller, sqlite_store(db), callbacks=callbacks).run("go"))
        )
        approvals = {point.id: True for point in paused.points}
        assert len(approvals) == count

        teller = _teller(ScriptedModel(["ok"]), bank.transfer)
        runner = Runner(teller, sqlite_store(db), callbacks=callbacks)
        events = await collect(runner.resume(paused.checkpoint_id, approvals))
        assert events[-1].error is None, events[-1].error
        assert bank.sent == [("X", 5)] * count
        assert await checkpoint_ids(sqlite_store(db)) == []


async def test_a_denial_closes_a_paused_call_whose_tool_is_gone_beside_an_approval(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The transfer tool removed since the pause, its call denied and the payer's approved: a
    denied call never runs, so it needs no tool. The resume was refused ('need tools it no
    longer has') as for an approval, so a person's no could not close the run; now the action
    answers the call with the denial, as the tool would have, and the payer pays; the chat,
    whose request offers the gone tool, asks its model without it (it failed there on the
    lookup, after the payment). An approval of the gone tool's call is still refused, naming the
    denial that would close it."""
    bank = Bank()
    paused = await _paused(tmp_path, bank, _teller(ScriptedModel(list(_TRANSFER)), bank.transfer))
    points = _points(paused)

    approvals = {points["payer"]: True, points["teller"]: True}
    both = ParallelAgent("both", [_payer(bank, ["paid"]), _teller(ScriptedModel(["ok"]))])
    events = await collect(
        Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, approvals)
    )
    error = events[-1].exception
    assert isinstance(error, CheckpointError), events[-1]
    assert f"deny the approval of {points['teller']!r} to close it without it" in str(error)
    assert bank.paid == [] and bank.sent == []

    model = ScriptedModel(["ok"])
    decisions = {points["payer"]: True, points["teller"]: {"approved": False, "reason": "gone"}}
    both = ParallelAgent("both", [_payer(bank, ["paid"]), _teller(model)])
    with caplog.at_level("WARNING", logger="adk.actions"):
        events = await collect(
            Runner(both, sqlite_store(tmp_path)).resume(paused.checkpoint_id, decisions)
        )
    assert events[-1].error is None, events[-1]
    # The chat's request (made before the deploy) offers the gone tool: asked without it.
    assert model.requests[0].tools == []
    [warned] = [r.getMessage() for r in caplog.records if r.name == "adk.actions"]
    assert "offers tool 'transfer', which is gone since the pause" in warned
    assert bank.paid == [("B", 2)] and bank.sent == []
    assert model.requests[0].messages[-1].content == (
        "Error: the call to 'transfer' was not approved: gone"
    )
    assert await checkpoint_ids(sqlite_store(tmp_path)) == []


async def test_a_denial_of_one_call_does_not_let_through_another_gone_tools_call_of_its_id() -> (
    None
):
    """The tool action's side of the ``ReActAgent`` case (test_interrupt_tools): an older pause
    of two calls sharing an id, of two tools both gone since; denying ``pay`` is no answer for
    ``ship``. Known by id alone, ``ship``'s call was taken for denied too, its tool not looked
    for and its approval spent on an 'unknown tool' answer, the checkpoint deleted."""

    @adk.tool(require_approval=True)
    def pay(cents: int) -> str:
        """Pay."""
        raise AssertionError("denied")

    @adk.tool(require_approval=True)
    def ship(order: str) -> str:
        """Ship an order."""
        raise AssertionError("its tool is gone")

    calls = [tool_call("pay", {"cents": 5}, id="c1"), tool_call("ship", {"order": "A"}, id="c2")]
    model = ScriptedModel([Reply(tool_calls=calls), "closed"])
    before, after = Resources(), Resources()
    before.add_model("m", model)
    before.add_tool(pay)
    before.add_tool(ship)
    after.add_model("m", model)
    store = InMemoryCheckpointStore()
    teller = ChatActor("t", ["pay", "ship"], prompt="go", resources=before)
    paused = await Runner(teller, store).invoke("go", checkpoint_id="cp")
    assert paused.interrupt is not None
    async with rewrite_checkpoint(store, "cp") as body:
        older = _one_id(body)
        body.clear()
        body.update(older)
    kept = await store.get("cp")
    pay_point = "agent:t/action:builtin.tools/tool:pay#c1"
    ship_point = "agent:t/action:builtin.tools/tool:ship#c1"
    redeployed = Runner(ChatActor("t", [], prompt="go", resources=after), store)
    with pytest.raises(RunError) as refused:
        await redeployed.invoke_resume("cp", {pay_point: False, ship_point: True})
    assert "the paused calls need tools it no longer has: ship (" in str(refused.value)
    assert await store.get("cp") == kept and len(model.requests) == 1
    closed = await redeployed.invoke_resume("cp", {pay_point: False, ship_point: False})
    assert closed.text == "closed" and await store.get("cp") is None
    assert [m.content for m in model.requests[-1].messages[-2:]] == [
        "Error: the call to 'pay' was not approved",
        "Error: the call to 'ship' was not approved",
    ]
