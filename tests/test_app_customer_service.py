"""A customer-service app ported from the OpenAI Agents SDK, end to end over real wires.

The SDK app: a ``triage`` agent with ``handoffs=[billing, faq]`` (each may hand back), an input
guardrail that trips on off-topic or abusive requests, an output guardrail that refuses answers
holding a card number, ``@function_tool``s with pydantic arguments (one ``needs_approval=True``,
one that raises), the FAQ's tools from an MCP server over streamable HTTP
(``MCPServerStreamableHttp``), ``Runner.run_streamed`` with its ``stream_events()`` shown to a
client, a session carrying the conversation, usage totals and ``max_turns``.

Here, following docs/openai_agents.md: ``adk.with_sub_agents`` (a ``transfer_to_agent`` tool;
the way back is on by default), the guardrails as callbacks (``before_model`` on the triage agent
for the input, ``after_model`` on the answering agents for the output, since their answers are
streamed text), ``@adk.tool`` with a pydantic argument and ``require_approval=True``, the demo MCP
server (``mcp_servers/http_server.py``, a real process) through ``MCPToolset(HTTPServer(url))``,
every model an ``OpenAIChatModel`` talking to ``tests/openai_server.py`` (one scripted reply per
request, in the order the run makes them), checkpoints in SQLite resumed by a new ``Runner``, and
the conversation carried as ``adk.run_messages(events)`` plus the next user message.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from app_wire import wire_server
from conftest import sqlite_store, wire_model
from mcp_servers.process import HTTPServerProcess
from openai_server import Call, OpenAIServer
from openai_server import Reply as Wire
from pydantic import BaseModel, Field

import adk
from adk import AgentEvent, Message, Runner, Usage
from adk.callbacks import Callbacks, ModelRequest
from adk.mcp import HTTPServer, MCPToolset
from prebuilt import ReActAgent

pytestmark = pytest.mark.asyncio(loop_scope="module")


# -- the app ---------------------------------------------------------------------------------------


class InvoiceQuery(BaseModel):
    order_id: str = Field(pattern=r"^A-\d+$", description="The order, A-<number>.")


class RefundRequest(BaseModel):
    order_id: str = Field(pattern=r"^A-\d+$")
    amount_cents: int = Field(gt=0, le=100_000)
    reason: str


REFUNDS: list[RefundRequest] = []


@adk.tool
def lookup_invoice(query: InvoiceQuery) -> str:
    """The invoice of an order.

    Args:
        query: Which order.
    """
    return f"{query.order_id}: charged 42.00 twice on 2026-11-02"


@adk.tool
def card_on_file(query: InvoiceQuery) -> str:
    """The card the order was paid with (the payment provider is down in these tests).

    Args:
        query: Which order.
    """
    raise ConnectionError("payment provider unreachable")


def refund_needs_approval(ctx: adk.ToolContext, arguments: dict[str, Any]) -> bool:
    """needs_approval=fn: every refund, unless a person said "always" for this conversation
    (state.approve(item, always_approve=True)); the arguments are validated values, the
    refund a RefundRequest, not the SDK's parsed JSON."""
    assert isinstance(arguments["refund"], RefundRequest)
    return "issue_refund" not in ctx.session.get("always_approved", [])


@adk.tool(require_approval=refund_needs_approval)
def issue_refund(refund: RefundRequest) -> str:
    """Refund an order. A person approves every refund.

    Args:
        refund: What to refund, and why.
    """
    REFUNDS.append(refund)
    return f"refunded {refund.amount_cents} on {refund.order_id}"


class Tripwire(Exception):
    """A guardrail's verdict: what InputGuardrailTripwireTriggered and
    OutputGuardrailTripwireTriggered were."""


OFF_TOPIC = re.compile(r"\b(homework|poem|idiot)\b", re.IGNORECASE)
CARD_NUMBER = re.compile(r"\b(?:\d[ -]?){13,16}\b")


class InputGuardrail(Callbacks):
    """The triage agent's input check: its first model call of a run, before the model is asked."""

    def __init__(self) -> None:
        super().__init__()
        self.checked: list[str] = []

    def before_model(self, ctx: adk.RunContext, request: ModelRequest) -> None:
        if ctx.history:  # not the run's first call: the input was checked already
            return
        latest = [m.content for m in request.messages if m.role == "user"][-1]
        self.checked.append(latest)
        if OFF_TOPIC.search(latest):
            raise Tripwire(f"input: off topic or abusive: {latest!r}")


class OutputGuardrail(Callbacks):
    """An answering agent's output check: every reply, held until complete, before anyone sees
    it."""

    def after_model(self, ctx: adk.RunContext, request: ModelRequest, reply: Message) -> None:
        if CARD_NUMBER.search(reply.content):
            raise Tripwire(f"output: {ctx.agent_name} gave a card number")


def build_app(model_url: str, mcp_url: str, api: str = "chat") -> ReActAgent:
    """The same agents in every process: a checkpoint holds state, not code. ``api="responses"``
    is what the SDK sends by default (``OpenAIResponsesModel``)."""

    def model() -> adk.OpenAIChatModel:
        return wire_model(model_url, api, name="gpt-test")

    billing = ReActAgent(
        "billing",
        model(),
        instruction="You handle invoices and refunds. Never repeat a card number.",
        description="Invoices, charges and refunds.",
        tools=[lookup_invoice, card_on_file, issue_refund],
        callbacks=[OutputGuardrail()],
    )
    faq = ReActAgent(
        "faq",
        model(),
        instruction="Answer product questions; open a ticket for a bug.",
        description="Product questions and bug reports.",
        tools=[MCPToolset(HTTPServer(mcp_url), tool_filter=["ticket", "fail"])],
        callbacks=[OutputGuardrail()],
    )
    triage = ReActAgent(
        "triage",
        model(),
        instruction="Route the customer to billing or faq.",
        callbacks=[InputGuardrail(), OutputGuardrail()],
    )
    return adk.with_sub_agents(triage, [billing, faq])


def to(agent: str, call_id: str, usage: tuple[int, int] = (11, 7)) -> Wire:
    arguments = json.dumps({"agent_name": agent})
    return Wire(tool_calls=[Call("transfer_to_agent", arguments, id=call_id)], usage=usage)


def calls(*made: tuple[str, dict[str, Any], str], usage: tuple[int, int] = (11, 7)) -> Wire:
    return Wire(tool_calls=[Call(n, json.dumps(a), id=i) for n, a, i in made], usage=usage)


async def stream_events(events: AsyncIterator[AgentEvent], shown: list[str]) -> list[AgentEvent]:
    """What the SDK app's ``async for event in result.stream_events()`` sent its client: text
    deltas (``raw_response_event``), tool calls started (``tool_called``) and ended
    (``tool_output``), and the agent switching (``agent_updated_stream_event``)."""
    seen = []
    speaking: str | None = None
    async for event in events:
        seen.append(event)
        if event.agent_name != speaking:
            speaking = event.agent_name
            shown.append(f"agent: {speaking}")
        output = event.output
        if output is not None and output.stream is not None:
            text = ""
            try:
                async for chunk in output.stream:
                    text += chunk.content
                    for call in chunk.tool_calls:
                        if call.name:  # a call's first fragment names it
                            shown.append(f"tool started: {call.name}")
            except Exception as exc:  # the reply failed (a guardrail): its error event comes next
                shown.append(f"reply failed: {exc}")
            if text:
                shown.append(f"text: {text}")
        elif event.error is not None:
            shown.append(f"error: {event.error.type}: {event.error.message}")
        elif event.message is not None and event.message.role == "tool":
            shown.append(f"tool ended: {event.message.name} -> {event.message.content}")
        elif event.action is not None and event.action.interrupted is not None:
            shown.append(
                f"approval needed: {[p.info['tool'] for p in event.action.interrupted.points]}"
            )
    return seen


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_process() -> Iterator[HTTPServerProcess]:
    process = HTTPServerProcess()
    process.start()
    yield process
    process.stop()


llm = wire_server()


@pytest.fixture(autouse=True)
def _no_refunds_yet() -> None:
    REFUNDS.clear()


def runner(llm: OpenAIServer, mcp: HTTPServerProcess, tmp_path: Path, api: str = "chat") -> Runner:
    """A process's runner, over the app's checkpoint file."""
    app = build_app(llm.base_url, mcp.url, api)
    return Runner(app, checkpoint_store=sqlite_store(tmp_path), enable_streaming=True)


def said(body: dict[str, Any]) -> list[tuple[str, str]]:
    """The (role, text) of a request's messages, in either protocol, tool calls and results
    left out."""
    if "messages" in body:
        return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "tool"]
    return [
        (
            item["role"],
            item["content"] if isinstance(item["content"], str) else item["content"][0]["text"],
        )
        for item in body["input"]
        if item.get("type", "message") == "message"
    ]


# -- the app end to end ----------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_refund_handoff_approval_and_a_second_turn_over_mcp(
    api: str, llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(
        to("billing", "h1", usage=(100, 5)),
        calls(
            ("lookup_invoice", {"query": {"order_id": "A-1"}}, "c1"),
            ("card_on_file", {"query": {"order_id": "A-1"}}, "c2"),
            usage=(200, 10),
        ),
        calls(
            (
                "issue_refund",
                {"refund": {"order_id": "A-1", "amount_cents": 4200, "reason": "double charge"}},
                "r1",
            ),
            usage=(300, 15),
        ),
    )
    shown: list[str] = []
    first = runner(llm, mcp_process, tmp_path, api)
    events = first.run("I was charged twice for order A-1.")
    seen = await stream_events(events, shown)
    await first.aclose()
    pause = seen[-1].action.interrupted if seen[-1].action is not None else None
    assert pause is not None
    assert REFUNDS == []
    assert adk.run_usage(events) == Usage(input_tokens=600, output_tokens=30, total_tokens=630)

    # The approver's process: a new runner over the same file resumes by id.
    llm.script(Wire(text="Refunded 42.00 on A-1.", usage=(400, 20)))
    second = runner(llm, mcp_process, tmp_path, api)
    resumed = second.resume(pause.checkpoint_id, True)
    await stream_events(resumed, shown)
    (refund,) = REFUNDS
    assert refund == RefundRequest(order_id="A-1", amount_cents=4200, reason="double charge")
    assert shown == [
        "agent: triage",
        "tool started: transfer_to_agent",
        "tool ended: transfer_to_agent -> Transferred to agent 'billing'",
        "agent: billing",
        "tool started: lookup_invoice",
        "tool started: card_on_file",
        "tool ended: lookup_invoice -> A-1: charged 42.00 twice on 2026-11-02",
        "tool ended: card_on_file -> Error: tool 'card_on_file' failed: ConnectionError: payment provider unreachable",
        "tool started: issue_refund",
        "approval needed: ['issue_refund']",
        "agent: billing",
        "tool ended: issue_refund -> refunded 4200 on A-1",
        "text: Refunded 42.00 on A-1.",
    ]
    # The whole turn's usage, the calls before the pause included (a resumed RunState's too).
    assert adk.run_usage(resumed) == Usage(input_tokens=1000, output_tokens=50, total_tokens=1050)

    # The next turn (the SDK's session): the conversation so far, then the new message. It
    # starts at triage again; the faq agent opens a ticket on the MCP server and hands back.
    llm.script(
        to("faq", "h2"),
        calls(("ticket", {"title": "App crashes on login"}, "m1")),
        to("triage", "h3"),
        Wire(text="I opened ticket 7 for the crash; your refund is on its way."),
    )
    conversation = [*adk.run_messages(resumed), Message.user("Also, the app crashes on login.")]
    shown.clear()
    await stream_events(second.run(conversation), shown)
    await second.aclose()
    assert shown == [
        "agent: triage",
        "tool started: transfer_to_agent",
        "tool ended: transfer_to_agent -> Transferred to agent 'faq'",
        "agent: faq",
        "tool started: ticket",
        'tool ended: ticket -> {\n  "id": 7,\n  "title": "App crashes on login"\n}',
        "tool started: transfer_to_agent",
        "tool ended: transfer_to_agent -> Transferred to agent 'triage'",
        "agent: triage",
        "text: I opened ticket 7 for the crash; your refund is on its way.",
    ]
    # The triage agent's first call of the turn read the first turn as context.
    first_call_of_turn = said(llm.bodies[-4])
    assert first_call_of_turn[1] == ("user", "I was charged twice for order A-1.")
    assert first_call_of_turn[-1] == ("user", "Also, the app crashes on login.")
    # The first turn's answer, as another agent's (DESIGN.md's rewrite, which adds its ".").
    assert ("user", "For context: [billing] said: Refunded 42.00 on A-1..") in first_call_of_turn


async def test_the_input_guardrail_trips_before_any_model_call(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    with pytest.raises(adk.RunError) as failed:
        await runner(llm, mcp_process, tmp_path).invoke("Write my homework essay, please.")
    assert isinstance(failed.value.__cause__, Tripwire)
    assert (
        str(failed.value.__cause__)
        == "input: off topic or abusive: 'Write my homework essay, please.'"
    )
    assert llm.requests == []  # no model call was made, none paid for

    # Streamed, the check runs as the reply's stream is read: reading it raises the check's
    # exception, and the run ends with its error event (result.stream_events() raised).
    shown: list[str] = []
    await stream_events(runner(llm, mcp_process, tmp_path).run("You idiot."), shown)
    assert shown == [
        "agent: triage",
        "reply failed: input: off topic or abusive: 'You idiot.'",
        "error: Tripwire: input: off topic or abusive: 'You idiot.'",
    ]
    assert llm.requests == []


async def test_the_output_guardrail_holds_a_card_number_back(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(
        to("billing", "h1"),
        Wire(text="Your card 4111 1111 1111 1111 was charged twice."),
    )
    shown: list[str] = []
    events = runner(llm, mcp_process, tmp_path).run("Which card did I pay A-1 with?")
    await stream_events(events, shown)
    # result.stream_events() raised OutputGuardrailTripwireTriggered after the streamed text; here
    # the reply is held until the check passes, so the client saw none of it: reading the stream
    # raises the check's exception, and the run ends with its error event.
    assert shown[-3:] == [
        "agent: billing",
        "reply failed: output: billing gave a card number",
        "error: Tripwire: output: billing gave a card number",
    ]
    assert not any("4111" in line for line in shown)
    # The refused reply was made, and paid for: the run's usage counts it.
    assert adk.run_usage(events) == Usage(input_tokens=22, output_tokens=14, total_tokens=36)

    # Runner.run (not streamed): invoke raises, the check's exception the cause.
    llm.script(to("billing", "h1"), Wire(text="Card 4111-1111-1111-1111, charged twice."))
    with pytest.raises(adk.RunError) as failed:
        await runner(llm, mcp_process, tmp_path).invoke("Which card did I pay A-1 with?")
    assert isinstance(failed.value.__cause__, Tripwire)
    assert str(failed.value.__cause__) == "output: billing gave a card number"
    # The SDK's exception's run_data.context_wrapper.usage: what the failed run cost.
    assert failed.value.usage == Usage(input_tokens=22, output_tokens=14, total_tokens=36)


async def test_max_turns_counts_every_agents_model_calls(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    again = calls(("lookup_invoice", {"query": {"order_id": "A-1"}}, "c1"))
    llm.script(to("billing", "h1"), again, again, again)
    with pytest.raises(adk.MaxTurnsExceeded) as failed:
        await runner(llm, mcp_process, tmp_path).invoke("Invoice of A-1?", max_turns=3)
    assert failed.value.max_turns == 3 and failed.value.agent_name == "billing"
    assert len(llm.requests) == 3  # the fourth call was not made


async def test_a_refused_refund_and_a_failing_mcp_tool_reach_the_model(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    refund = {"refund": {"order_id": "A-1", "amount_cents": 99000, "reason": "angry"}}
    llm.script(to("billing", "h1"), calls(("issue_refund", refund, "r1")))
    paused = await runner(llm, mcp_process, tmp_path).invoke("Refund me everything for A-1.")
    assert paused.interrupt is not None
    (point,) = paused.interrupt.points
    assert point.info["arguments"] == refund  # result.interruptions[0]: the call as JSON

    # state.reject(item), in another process: the model reads why, and the run goes on: billing
    # hands back to triage (a sub-agent transfers to its parent, not to a peer: the SDK's
    # handoffs=[faq] on billing has no equivalent), which hands to faq, whose MCP tool fails on
    # the server; the model reads that too.
    llm.script(
        to("triage", "h2"),
        to("faq", "h3"),
        calls(("fail", {"message": "ticket system is down"}, "m1")),
        Wire(text="I could not refund that or open a ticket; a person will call you."),
    )
    decision = {"approved": False, "reason": "above the refund limit"}
    done = await runner(llm, mcp_process, tmp_path).invoke_resume(paused.checkpoint_id, decision)
    assert done.text == "I could not refund that or open a ticket; a person will call you."
    assert REFUNDS == []
    read = [
        (m["tool_call_id"], m["content"]) for m in llm.bodies[-1]["messages"] if m["role"] == "tool"
    ]
    # The server's own words for a failed tool, after adk's "tool 'fail' failed: ", an error.
    assert read == [("m1", "Error: tool 'fail' failed: ticket system is down")]
    billing_read = [m for m in llm.bodies[-4]["messages"] if m["role"] == "tool"]
    assert billing_read[-1] == {
        "role": "tool",
        "tool_call_id": "r1",
        "content": "Error: the call to 'issue_refund' was not approved: above the refund limit",
    }


async def test_always_approve_lets_the_runs_later_refunds_through(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    def refund(order_id: str, call_id: str) -> Wire:
        arguments = {"refund": {"order_id": order_id, "amount_cents": 500, "reason": "late"}}
        return calls(("issue_refund", arguments, call_id))

    llm.script(to("billing", "h1"), refund("A-1", "r1"))
    paused = await runner(llm, mcp_process, tmp_path).invoke("Refund A-1 and A-2, both late.")
    assert paused.interrupt is not None

    # state.approve(item, always_approve=True): the runner keeps no sticky decision; the resume
    # gives the session a key the approval function reads, and the second refund runs unasked.
    llm.script(refund("A-2", "r2"), Wire(text="Both refunded."))
    always = {"always_approved": ["issue_refund"]}
    done = await runner(llm, mcp_process, tmp_path).invoke_resume(
        paused.checkpoint_id, True, session=always
    )
    assert done.interrupt is None and done.text == "Both refunded."
    assert [r.order_id for r in REFUNDS] == ["A-1", "A-2"]
