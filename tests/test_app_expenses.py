"""An expense-report assistant ported from a LangGraph human-in-the-loop app, end to end.

The app is a ``SequentialAgent``: an ``intake`` ``ReActAgent`` that reads the receipts through an
expenses MCP server over stdio (``mcp_servers/expenses_server.py``, a real process) with its model
an ``OpenAIChatModel`` talking to ``tests/openai_server.py`` (a real HTTP server speaking the
OpenAI protocol); then a ``ParallelAgent`` of three reviewers, of which ``policy`` and ``budget``
each pause for a person's approval in the same run and ``fraud`` does not; then a ``summariser``
whose answer is an ``output_schema`` (over the wire server too). Checkpoints live in PostgreSQL
(``services.py`` starts a real server) and every resume is made by a new ``Runner`` over a new
store object, as another process would.

What a LangGraph user does, and where it lands here:

- ``interrupt()`` in two parallel branches, ``Command(resume={id: value})`` answering one of them
  (edited), then the other (rejected), in two resumes;
- ``stream_mode="messages"``: the replies' tokens, read chunk by chunk;
- ``get_state(config).interrupts`` across threads: ``runner.pending(prefix=...)``, one user's;
- time travel (resuming an older checkpoint of the same run): pyadk keeps no history of
  checkpoints, so an older one exists only as bytes the app kept; resuming such a copy re-runs the
  calls approved since, which the documented idempotency key (the run's request id and the point's
  address) makes harmless;
- a resume with answers for call ids that are not pending, a missing answer, LangChain's decision
  shapes: refused before anything runs, the checkpoint kept;
- a user leaving mid-stream: a first run left mid-stream saved nothing; a resume left mid-stream
  keeps the checkpoint and is resumed again.
"""

from __future__ import annotations

import contextlib
import json
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import pytest
from app_wire import wire_server
from conftest import wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as Wire
from pydantic import BaseModel
from services import PostgresServer

import adk
from adk import AgentEvent, Message, Role, Runner, ToolContext
from adk.checkpoint import PostgresCheckpointStore
from adk.mcp import MCPToolset, StdioServer
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

pytestmark = pytest.mark.asyncio(loop_scope="module")
pytest_plugins = ["services"]

EXPENSES_SERVER = Path(__file__).resolve().parent / "mcp_servers" / "expenses_server.py"


# -- the app ---------------------------------------------------------------------------------------


class Decision(BaseModel):
    """The summariser's answer, which the expenses system files."""

    status: Literal["approved", "partly_approved", "rejected"]
    reimbursed_cents: int
    notes: str


# The finance system behind the approvals: what ran, keyed by an idempotency key made of the run's
# request id and the point's address, as interrupts.md advises (a repeat is dropped, as a payment
# provider drops a request whose key it has seen).
LEDGER: dict[str, str] = {}


def _book(ctx: ToolContext, entry: str) -> str:
    key = f"{ctx.session['request_id']}/{ctx.address}"
    if key in LEDGER:
        return f"already booked: {LEDGER[key]}"
    LEDGER[key] = entry
    return f"booked: {entry}"


@adk.tool(require_approval=True)
def grant_exception(report: str, amount_cents: int, ctx: ToolContext) -> str:
    """Grant a policy exception for an amount above the cap. A person approves every exception.

    Args:
        report: The expense report.
        amount_cents: The amount above the cap, in cents.
    """
    return _book(ctx, f"exception {amount_cents} on {report}")


@adk.tool(require_approval=True)
def charge_budget(cost_centre: str, amount_cents: int, ctx: ToolContext) -> str:
    """Charge the amount to a cost centre's budget. A person approves every charge.

    Args:
        cost_centre: The cost centre to charge.
        amount_cents: How much, in cents.
    """
    return _book(ctx, f"charge {amount_cents} to {cost_centre}")


@adk.tool
def fraud_score(merchant: str) -> float:
    """How likely the merchant's receipts are fraudulent, 0 to 1."""
    return 0.02


def _reviewer(tool: str, arguments: dict[str, Any], call_id: str) -> ScriptedModel:
    """A reviewer that calls ``tool`` once, then reports what it returned."""

    def reply(messages: list[Message]) -> object:
        if messages[-1].role == Role.TOOL:
            return f"{tool}: {messages[-1].content}"
        return Reply(tool_calls=[tool_call(tool, arguments, id=call_id)])

    return ScriptedModel(reply)


def build_app(model_url: str) -> adk.SequentialAgent:
    """The same agents in every process: a checkpoint holds state, not code."""
    intake = ReActAgent(
        "intake",
        wire_model(model_url, name="gpt-test"),
        instruction="Read the receipts of the report and state the facts.",
        tools=[MCPToolset(StdioServer(sys.executable, [str(EXPENSES_SERVER)]))],
    )
    policy = ReActAgent(
        "policy",
        _reviewer("grant_exception", {"report": "E-17", "amount_cents": 8000}, "p1"),
        instruction="Lodging is capped at 400.00.",
        tools=[grant_exception],
    )
    budget = ReActAgent(
        "budget",
        _reviewer("charge_budget", {"cost_centre": "CC-7", "amount_cents": 51500}, "b1"),
        instruction="Charge the report to its cost centre.",
        tools=[charge_budget],
    )
    fraud = ReActAgent(
        "fraud",
        _reviewer("fraud_score", {"merchant": "Hotel Lux"}, "f1"),
        instruction="Look for fraud signals.",
        tools=[fraud_score],
    )
    summariser = ReActAgent(
        "summariser",
        wire_model(model_url, name="gpt-test"),
        instruction="Decide the report from the reviews.",
        output_schema=Decision,
    )
    review = adk.ParallelAgent("review", [policy, budget, fraud])
    return adk.SequentialAgent("expenses", [intake, review, summariser])


POLICY = "agent:expenses/agent:review/agent:policy/tool:grant_exception#p1"
BUDGET = "agent:expenses/agent:review/agent:budget/tool:charge_budget#b1"
INTAKE_SCRIPT = (
    Wire(
        tool_calls=[
            Call("receipt", json.dumps({"receipt_id": "R-1"}), id="r1"),
            Call("receipt", json.dumps({"receipt_id": "R-2"}), id="r2"),
            Call("employee", json.dumps({"employee_id": "u-7"}), id="e1"),
        ]
    ),
    Wire(text="Report E-17 by Ann Lee (CC-7): Hotel Lux 480.00, Taxi Co 35.00."),
)
DECISION = Decision(status="partly_approved", reimbursed_cents=43500, notes="exception refused")


async def read(events: AsyncIterator[AgentEvent], shown: list[str]) -> list[AgentEvent]:
    """Read a run as a chat client does: every streamed reply token by token, as it arrives."""
    seen = []
    async for event in events:
        seen.append(event)
        if event.output is not None and event.output.stream is not None:
            text = "".join([chunk.content async for chunk in event.output.stream])
            if text:
                shown.append(f"{event.agent_name}> {text}")
        elif event.output is not None and event.output.role == Role.TOOL:
            shown.append(f"{event.agent_name} [{event.output.tool_name}]")
        elif event.action is not None and event.action.interrupted is not None:
            shown.append(f"paused: {sorted(event.action.interrupted.point_ids)}")
    return seen


# -- fixtures --------------------------------------------------------------------------------------


llm = wire_server(structured="openai")  # refuses what OpenAI refuses


@pytest.fixture
def table() -> str:
    return f"expenses_{uuid.uuid4().hex[:12]}"


@pytest.fixture(autouse=True)
def _empty_ledger() -> None:
    LEDGER.clear()


@contextlib.asynccontextmanager
async def process(
    llm: OpenAIServer, pg: PostgresServer, table: str
) -> AsyncIterator[tuple[Runner, PostgresCheckpointStore]]:
    """What one process of the service holds: its own store connection, agents and runner."""
    async with PostgresCheckpointStore(pg.dsn, table=table) as store:
        runner = Runner(build_app(llm.base_url), checkpoint_store=store, enable_streaming=True)
        async with runner:
            yield runner, store


async def file_report(
    llm: OpenAIServer, pg: PostgresServer, table: str, checkpoint_id: str, shown: list[str]
) -> adk.InterruptInfo:
    """Ann files report E-17: the intake reads it, two reviewers pause for a person."""
    llm.script(*INTAKE_SCRIPT)
    async with process(llm, pg, table) as (runner, _):
        run = runner.run(
            "Please file my report E-17 (receipts R-1, R-2).",
            checkpoint_id=checkpoint_id,
            run_id="ann",
            session={"request_id": checkpoint_id},
        )
        events = await read(run, shown)
    pause = events[-1].action.interrupted if events[-1].action is not None else None
    assert pause is not None
    return pause


# -- the app, end to end ---------------------------------------------------------------------------


async def test_two_reviewers_pause_and_are_answered_one_at_a_time_from_other_processes(
    llm: OpenAIServer, postgres_server: PostgresServer, table: str
) -> None:
    shown: list[str] = []
    pause = await file_report(llm, postgres_server, table, "ann/E-17.1", shown)
    assert sorted(pause.point_ids) == [BUDGET, POLICY]
    # The intake's calls ran concurrently: their results come in the order they finished.
    assert sorted(shown[:3]) == ["intake [employee]", "intake [receipt]", "intake [receipt]"]
    assert shown[3] == "intake> Report E-17 by Ann Lee (CC-7): Hotel Lux 480.00, Taxi Co 35.00."
    assert "fraud> fraud_score: 0.02" in shown  # the branch that needs nobody finished
    assert LEDGER == {}

    # An approvals page (another process): Ann's waiting reports, and what each asks.
    async with process(llm, postgres_server, table) as (runner, _):
        inbox = [entry async for entry in runner.pending(prefix="ann/")]
    (entry,) = inbox
    assert entry.checkpoint_id == "ann/E-17.1" and entry.run_id == "ann" and not entry.resuming
    asks = {point.id: point.info for point in entry.points}
    assert asks[BUDGET]["arguments"] == {"cost_centre": "CC-7", "amount_cents": 51500}
    assert asks[POLICY]["arguments"] == {"report": "E-17", "amount_cents": 8000}

    # The budget owner answers first, with the amount edited; the policy point keeps waiting.
    edited = {"approved": True, "arguments": {"cost_centre": "CC-7", "amount_cents": 43500}}
    async with process(llm, postgres_server, table) as (runner, _):
        run = runner.resume("ann/E-17.1", {BUDGET: edited})
        events = await read(run, shown)
    again = events[-1].action.interrupted if events[-1].action is not None else None
    assert again is not None and again.point_ids == [POLICY]
    assert again.checkpoint_id == "ann/E-17.1"
    assert list(LEDGER.values()) == ["charge 43500 to CC-7"]

    # The policy owner rejects the exception; the summariser decides.
    llm.script(Wire(text=DECISION.model_dump_json()))
    rejected = {"approved": False, "reason": "no exceptions for lodging"}
    async with process(llm, postgres_server, table) as (runner, store):
        run = runner.resume("ann/E-17.1", {POLICY: rejected})
        events = await read(run, shown)
        assert await store.get("ann/E-17.1") is None  # finished: deleted
        assert [entry async for entry in runner.pending(prefix="ann/")] == []
    assert list(LEDGER.values()) == ["charge 43500 to CC-7"]  # the exception never ran
    decisions = [e.output.custom for e in events if e.output is not None and e.output.custom]
    assert decisions == [DECISION]

    # The summariser read every reviewer: the edit, the rejection, the branch that finished first.
    sent = json.dumps(llm.bodies[-1]["messages"])
    assert "charge 43500 to CC-7" in sent and "no exceptions for lodging" in sent
    assert "fraud_score: 0.02" in sent and "Hotel Lux 480.00" in sent
    # The whole turn's usage, across both resumes: the intake's two calls and the summariser's.
    assert adk.run_usage(run) == adk.Usage(input_tokens=33, output_tokens=21, total_tokens=54)
    # The whole turn's conversation, for the thread's row: from Ann's request on.
    messages = adk.run_messages(run)
    assert messages[0].content == "Please file my report E-17 (receipts R-1, R-2)."
    texts = json.dumps([m.content for m in messages])
    assert "Hotel Lux 480.00" in texts and "fraud_score: 0.02" in texts
    assert "booked: charge 43500 to CC-7" in texts and "no exceptions for lodging" in texts


async def test_answers_for_calls_not_pending_or_in_langchains_shapes_are_refused_and_lose_nothing(
    llm: OpenAIServer, postgres_server: PostgresServer, table: str
) -> None:
    await file_report(llm, postgres_server, table, "ann/E-17.1", [])
    wrong = BUDGET.replace("#b1", "#b2")  # a call id of another turn
    refusals: list[str] = []
    attempts: list[Any] = [
        {wrong: True},  # Command(resume={stale_id: ...})
        {BUDGET: True, "note": "ok"},  # a stray key beside a right one
        True,  # plain data, with two points waiting: which one?
        {"b1": True},  # keyed by the tool call's id, not the point's: plain data too
        {BUDGET: {"type": "approve"}},  # LangChain's decision shapes
        {POLICY: {"type": "reject", "message": "no"}},
        # half-ported: pyadk's yes with LangChain's edit beside it (ran unedited before)
        {BUDGET: {"approved": True, "edited_action": {"name": "charge_budget", "args": {}}}},
        {BUDGET: {"approved": True, "arguments": {"cost_centre": "CC-7", "amount_cents": "lots"}}},
    ]
    async with process(llm, postgres_server, table) as (runner, store):
        before = await store.get("ann/E-17.1")
        for answer in attempts:
            with pytest.raises((ValueError, adk.RunError)) as refused:
                await runner.invoke_resume("ann/E-17.1", answer)
            refusals.append(str(refused.value))
        assert await store.get("ann/E-17.1") == before  # kept as it was
        (entry,) = [entry async for entry in runner.pending(prefix="ann/")]
    assert sorted(entry.point_ids) == [BUDGET, POLICY]
    assert LEDGER == {}
    for refusal in refusals[:4]:
        assert BUDGET in refusal and POLICY in refusal  # it names what waits
    assert wrong in refusals[0] and "'note'" in refusals[1]
    assert "'type'" in refusals[4] and "'type'" in refusals[5]
    assert "'edited_action'" in refusals[6] and '"arguments"' in refusals[6]
    assert "amount_cents" in refusals[7]

    # A missing answer is no error: the point left out waits on, under the same id.
    async with process(llm, postgres_server, table) as (runner, _):
        partly = await runner.invoke_resume("ann/E-17.1", {POLICY: True})
    assert partly.interrupt is not None and partly.interrupt.point_ids == [BUDGET]
    assert list(LEDGER.values()) == ["exception 8000 on E-17"]


async def test_an_older_checkpoint_of_the_run_is_a_copy_the_app_kept_and_repeats_nothing_booked(
    llm: OpenAIServer, postgres_server: PostgresServer, table: str
) -> None:
    """LangGraph's time travel (``invoke(None, {"checkpoint_id": older})``) forks the thread
    from an older step. pyadk keeps one checkpoint per pause, rewritten by a partial resume: the
    older state exists only if the app kept its bytes. Resumed under an id of its own, it is a
    fork: it pauses under that id, beside the live run, and re-runs what was approved since,
    which the idempotency key (the run's request id, which the copy carries, and the address)
    turns into a no-op."""
    await file_report(llm, postgres_server, table, "ann/E-17.1", [])
    async with process(llm, postgres_server, table) as (runner, store):
        older = await store.get("ann/E-17.1")
        assert older is not None
        partly = await runner.invoke_resume("ann/E-17.1", {BUDGET: True})
        assert partly.interrupt is not None and partly.interrupt.point_ids == [POLICY]
        assert await store.get("ann/E-17.1") != older  # rewritten: only the policy point waits
        assert list(LEDGER.values()) == ["charge 51500 to CC-7"]

        await store.put("ann/E-17.1@v1", older)  # the app's copy, restored under an id of its own
        forked = await runner.invoke_resume("ann/E-17.1@v1", {BUDGET: True})
        assert forked.interrupt is not None
        assert forked.interrupt.checkpoint_id == "ann/E-17.1@v1"
        assert forked.interrupt.point_ids == [POLICY]
        pending = {entry.checkpoint_id: entry async for entry in runner.pending(prefix="ann/")}
    assert sorted(pending) == ["ann/E-17.1", "ann/E-17.1@v1"]
    assert pending["ann/E-17.1@v1"].run_id == "ann"
    # The charge approved again in the fork reached the ledger once.
    assert list(LEDGER.values()) == ["charge 51500 to CC-7"]


async def test_a_user_leaving_mid_stream_then_coming_back(
    llm: OpenAIServer, postgres_server: PostgresServer, table: str
) -> None:
    # The first run, left while the intake's answer streams: no pause was reached, nothing saved.
    llm.script(*INTAKE_SCRIPT)
    async with process(llm, postgres_server, table) as (runner, store):
        run = runner.run(
            "Please file my report E-17 (receipts R-1, R-2).",
            checkpoint_id="ann/E-17.1",
            run_id="ann",
            session={"request_id": "ann/E-17.1"},
        )
        async with contextlib.aclosing(run):
            async for event in run:
                if event.output is not None and event.output.stream is not None:
                    async for chunk in event.output.stream:
                        if chunk.content:
                            break  # the user closed the tab at the first token
                    break
        assert await store.get("ann/E-17.1") is None
        assert [entry async for entry in runner.pending()] == []

    # Filed again, it pauses; the resume is left while the summariser streams its answer.
    await file_report(llm, postgres_server, table, "ann/E-17.1", [])
    llm.script(Wire(text=DECISION.model_dump_json()))
    answers = {BUDGET: True, POLICY: True}
    async with process(llm, postgres_server, table) as (runner, store):
        resume = runner.resume("ann/E-17.1", answers)
        async with contextlib.aclosing(resume):
            async for event in resume:
                if event.agent_name == "summariser" and event.output is not None:
                    # Meanwhile, the approvals page of another process: shown as in progress,
                    # and a second click on "approve" is refused rather than run twice.
                    async with process(llm, postgres_server, table) as (other, _):
                        (entry,) = [entry async for entry in other.pending(prefix="ann/")]
                        assert entry.resuming
                        with pytest.raises(adk.CheckpointBusyError):
                            await other.invoke_resume("ann/E-17.1", answers)
                    break
        (entry,) = [entry async for entry in runner.pending(prefix="ann/")]
        assert not entry.resuming and sorted(entry.point_ids) == [BUDGET, POLICY]
    booked = dict(LEDGER)
    assert sorted(booked.values()) == ["charge 51500 to CC-7", "exception 8000 on E-17"]

    # Back again: the same answers, resumed to the end; the ledger keeps one of each.
    llm.script(Wire(text=DECISION.model_dump_json()))
    async with process(llm, postgres_server, table) as (runner, store):
        done = await runner.invoke_resume("ann/E-17.1", answers)
        assert await store.get("ann/E-17.1") is None
    assert done.output == DECISION
    assert booked == LEDGER
