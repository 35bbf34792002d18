"""A back office as a user would build it: two approvals pending at once, at different depths,
decided across two replicas that share a Redis checkpoint store.

A ``Supervisor`` (``boss``) delegates to ``ops``, a ``ParallelAgent`` of ``billing`` and
``shipping``. ``billing`` refunds through an ``AgentTool`` wrapping the ``refunds``
``ReActAgent``, whose ``refund`` tool needs a person's approval (supervisor -> parallel branch ->
AgentTool -> ReAct tool); ``shipping``'s own ``cancel_shipment`` needs one too (supervisor ->
parallel branch -> tool). One run pauses on both. Two ``Runner``s over one Redis (a real
``redis-server``, the session's) stand for two processes of a service: replica A pauses, replica B
answers one approval, A the other. Every model is an ``OpenAIChatModel`` talking to
``tests/openai_server.py``, answering each agent from the tools its request offers (the branches'
requests arrive in no fixed order).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import pytest_asyncio
from conftest import wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as Wire
from services import RedisServer

import adk
from adk import AgentTool, ParallelAgent, RetryPolicy, Runner
from adk.checkpoint import RedisCheckpointStore
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent, Supervisor

pytest_plugins = ["services"]
pytestmark = pytest.mark.asyncio(loop_scope="module")

LEDGER: list[str] = []


@adk.tool(require_approval=True)
def refund(order_id: str, amount_cents: int) -> str:
    """Refund an order. A person approves every refund."""
    LEDGER.append(f"refund {order_id} {amount_cents}")
    return f"refunded {amount_cents} on {order_id}"


@adk.tool(require_approval=True)
def cancel_shipment(order_id: str, reason: str = "customer") -> str:
    """Cancel an order's shipment. A person approves every cancellation."""
    LEDGER.append(f"cancel {order_id} {reason}")
    return f"cancelled the shipment of {order_id} ({reason})"


@adk.tool(require_approval=True)
def pay(payee: str, cents: int) -> str:
    """Pay a supplier. A person approves every payment."""
    LEDGER.append(f"pay {payee} {cents}")
    return f"paid {cents} to {payee}"


@adk.tool(require_approval=True)
def settle(payee: str, cents: int) -> str:
    """Settle a supplier's invoice. A person approves every settlement."""
    LEDGER.append(f"settle {payee} {cents}")
    return f"settled {cents} with {payee}"


@adk.tool(require_approval=True)
def remit(payee: str, cents: int) -> str:
    """Remit a supplier's due. A person approves every remittance."""
    LEDGER.append(f"remit {payee} {cents}")
    return f"remitted {cents} to {payee}"


def answer(body: dict[str, Any]) -> Wire:
    """Each agent's model, told apart by the tools its request offers."""
    tools = {spec["function"]["name"] for spec in body.get("tools", [])}
    last = body["messages"][-1]
    replied = last["role"] == "tool"
    if tools & {"pay", "settle", "remit"}:  # payables: pays bob, asks to pay eve, answers
        paid = sum(message["role"] == "tool" for message in body["messages"])
        if paid < 2:
            payee, cents = ("bob", 500) if paid == 0 else ("eve", 90000)
            arguments = json.dumps({"payee": payee, "cents": cents})
            if "settle" in tools:  # no id: the server numbers each response's calls, call_0
                return Wire(tool_calls=[Call("settle", arguments)], usage=(50, 5))
            if "remit" in tools:  # no id sent at all: pyadk names each response's calls call_0
                return Wire(tool_calls=[Call("remit", arguments)], call_ids=False, usage=(50, 5))
            return Wire(tool_calls=[Call("pay", arguments, id=f"p{paid + 1}")], usage=(50, 5))
        return Wire(text="Both suppliers are paid.", usage=(50, 5))
    if "refund" in tools:  # refunds, inside billing's AgentTool
        if replied:
            return Wire(text=f"refunds: {last['content']}", usage=(100, 10))
        arguments = json.dumps({"order_id": "A-1", "amount_cents": 12000})
        return Wire(tool_calls=[Call("refund", arguments, id="r1")], usage=(100, 10))
    if "refunds" in tools:  # billing
        if replied:
            return Wire(text=f"billing: {last['content']}", usage=(200, 20))
        request = json.dumps({"request": "refund order A-1, 120.00"})
        return Wire(tool_calls=[Call("refunds", request, id="b1")], usage=(200, 20))
    if "cancel_shipment" in tools:  # shipping
        if replied:
            return Wire(text=f"shipping: {last['content']}", usage=(300, 30))
        arguments = json.dumps({"order_id": "A-1"})
        return Wire(tool_calls=[Call("cancel_shipment", arguments, id="s1")], usage=(300, 30))
    # boss: delegate to ops, then answer once ops reported back
    if any("[shipping] said" in str(m.get("content")) for m in body["messages"]):
        return Wire(text="Case A-1 is handled.", usage=(1000, 100))
    delegate = json.dumps({"agent_name": "ops"})
    return Wire(tool_calls=[Call("transfer_to_agent", delegate, id="t1")], usage=(1000, 100))


def back_office(server: OpenAIServer) -> adk.Agent:
    def model() -> adk.OpenAIChatModel:
        return wire_model(server, retry=RetryPolicy(max_attempts=1))

    refunds = ReActAgent(
        "refunds", model(), description="Refunds orders.", tools=[refund], output_key="refund"
    )
    billing = ReActAgent(
        "billing", model(), description="Billing.", tools=[AgentTool(refunds)], output_key="billing"
    )
    shipping = ReActAgent(
        "shipping", model(), description="Shipping.", tools=[cancel_shipment], output_key="shipping"
    )
    ops = ParallelAgent("ops", [billing, shipping], description="Billing and shipping at once.")
    return Supervisor(ReActAgent("boss", model(), description="The back office."), [ops])


REFUND = "agent:boss/agent:ops/agent:billing/tool:refunds#b1/agent:refunds/tool:refund#r1"
CANCEL = "agent:boss/agent:ops/agent:shipping/tool:cancel_shipment#s1"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer(respond=answer) as running:
        yield running


@pytest_asyncio.fixture(loop_scope="module")
async def opened() -> AsyncIterator[list[Runner]]:
    """The runners a test makes: their models and stores closed when it ends."""
    runners: list[Runner] = []
    yield runners
    for runner in runners:
        await runner.aclose()
        await runner.checkpoint_store.aclose()  # type: ignore[attr-defined]


@pytest.fixture
def replicas(
    redis_server: RedisServer, server: OpenAIServer, opened: list[Runner]
) -> Callable[[], tuple[Runner, Runner]]:
    """Two replicas of the service over one Redis key prefix of this test's own."""
    prefix = f"office{os.urandom(4).hex()}:"
    LEDGER.clear()

    def make() -> tuple[Runner, Runner]:
        pair = [
            Runner(back_office(server), RedisCheckpointStore(redis_server.url, prefix=prefix))
            for _ in range(2)
        ]
        opened.extend(pair)
        return pair[0], pair[1]

    return make


async def test_two_approvals_at_two_depths_are_decided_on_two_replicas(
    replicas: Callable[[], tuple[Runner, Runner]],
) -> None:
    a, b = replicas()
    paused = await a.invoke("A-1: refund it and cancel its shipment", checkpoint_id="case-1")
    assert paused.interrupt is not None
    assert sorted(paused.interrupt.point_ids) == sorted([REFUND, CANCEL])
    assert [entry.point_ids for entry in await b.pending()] == [paused.interrupt.point_ids]

    # B: the shipment stays (a reason the model reads); the refund still waits, listed.
    reason = {"approved": False, "reason": "already delivered"}
    partly = await b.invoke_resume("case-1", {CANCEL: reason})
    assert partly.interrupt is not None and partly.interrupt.point_ids == [REFUND]
    assert [entry.point_ids for entry in await a.pending()] == [[REFUND]]

    # A: the refund, edited down.
    edit = {"approved": True, "arguments": {"order_id": "A-1", "amount_cents": 9000}}
    done = await a.invoke_resume("case-1", {REFUND: edit})
    assert done.interrupt is None and done.text == "Case A-1 is handled."
    assert LEDGER == ["refund A-1 9000"]
    assert "not approved: already delivered" in done.session["shipping"]
    assert done.session["refund"].endswith("refunded 9000 on A-1")  # output_key inside AgentTool
    assert done.usage is not None and done.usage.input_tokens == 3200  # every call, both resumes
    assert simplify_events(done.events)[-2:] == [
        "ops: [transfer -> boss]",
        "boss: Case A-1 is handled.",
    ]
    assert await a.pending() == []


async def test_an_answer_sent_again_after_its_resume_paused_on_the_other_point_says_so(
    replicas: Callable[[], tuple[Runner, Runner]],
) -> None:
    """A person's decision sent twice (a double click, a client retrying a request that went
    through) after the first resume ran it and paused again on the other approval: the refusal
    says the point was answered, rather than calling the id it gave a moment ago unknown."""
    a, b = replicas()
    await a.invoke("A-1: refund it and cancel its shipment", checkpoint_id="case-2")
    await b.invoke_resume("case-2", {CANCEL: True})
    with pytest.raises(ValueError) as refused:
        await a.invoke_resume("case-2", {CANCEL: True})
    message = str(refused.value)
    assert not isinstance(refused.value, adk.CheckpointError)  # the checkpoint is fine: a 400
    assert "unknown" not in message
    assert f"[{CANCEL!r}] already answered by an earlier resume of checkpoint 'case-2'" in message
    assert f"pending points: [{REFUND!r}]" in message
    assert "Nothing ran and the checkpoint is kept" in message
    assert LEDGER == ["cancel A-1 customer"]

    # The other point is still to be decided, by either replica, and an id nobody asked about
    # is still called unknown.
    with pytest.raises(ValueError, match=r"unknown interrupt point id\(s\) \['agent:boss/x'\]"):
        await b.invoke_resume("case-2", {"agent:boss/x": True, CANCEL: True})
    done = await b.invoke_resume("case-2", {REFUND: True})
    assert done.text == "Case A-1 is handled."
    assert LEDGER == ["cancel A-1 customer", "refund A-1 12000"]


class Approver(adk.BaseAgent):
    """A sign-off that waits for its person's word."""

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt(f"{self.name}: sign off?")
            return
        yield adk.AgentEvent.of(f"{self.name}: {ctx.resume.data}")


async def test_points_answered_by_every_earlier_resume_are_named_as_answered(
    redis_server: RedisServer, opened: list[Runner]
) -> None:
    """Three sign-offs answered one by one, on either replica: an answer sent again to the
    first is named as answered after the second resume too (the noted points carry over)."""
    prefix = f"office{os.urandom(4).hex()}:"

    def replica() -> Runner:
        names = ("legal", "finance", "security")
        team = ParallelAgent("review", [Approver(name) for name in names])
        opened.append(Runner(team, RedisCheckpointStore(redis_server.url, prefix=prefix)))
        return opened[-1]

    legal, finance, security = (f"agent:review/agent:{n}" for n in ("legal", "finance", "security"))
    await replica().invoke("contract 17", checkpoint_id="contract-17")
    assert (await replica().invoke_resume("contract-17", {legal: "ok"})).interrupt is not None
    assert (await replica().invoke_resume("contract-17", {finance: "ok"})).interrupt is not None
    for again in ({legal: "ok"}, {finance: "ok", legal: "ok"}):
        with pytest.raises(ValueError, match=r"already answered by an earlier resume") as refused:
            await replica().invoke_resume("contract-17", again)
        assert f"pending points: [{security!r}]" in str(refused.value)
    done = await replica().invoke_resume("contract-17", {security: "ok"})
    assert done.interrupt is None and done.text == "security: ok"


async def test_a_plain_answer_sent_again_does_not_approve_the_call_the_model_asked_for_next(
    redis_server: RedisServer, server: OpenAIServer, opened: list[Runner]
) -> None:
    """A decision given as plain data (``True``, one point pending), sent twice: the first resume
    pays bob and the model then asks to pay eve, so the run pauses again under the same id with
    one point pending. The second ``True`` (a double click, a client retrying a request that went
    through) was taken as the answer to eve's payment, which nobody had been shown: it is refused,
    nothing run, and eve's payment waits for an answer keyed by its point."""
    prefix = f"office{os.urandom(4).hex()}:"
    LEDGER.clear()

    def replica() -> Runner:
        payables = ReActAgent(
            "payables", wire_model(server, retry=RetryPolicy(max_attempts=1)), tools=[pay]
        )
        opened.append(Runner(payables, RedisCheckpointStore(redis_server.url, prefix=prefix)))
        return opened[-1]

    paused = await replica().invoke("pay bob 5.00", checkpoint_id="bills-1")
    assert paused.interrupt is not None and paused.interrupt.point_ids == [
        "agent:payables/tool:pay#p1"
    ]
    first = await replica().invoke_resume("bills-1", True)
    eve = "agent:payables/tool:pay#p2"
    assert first.interrupt is not None and first.interrupt.point_ids == [eve]
    assert LEDGER == ["pay bob 500"]

    with pytest.raises(ValueError) as refused:
        await replica().invoke_resume("bills-1", True)  # the same click again
    assert not isinstance(refused.value, adk.CheckpointError)
    assert "may be that answer sent again" in str(refused.value)
    assert f"answer the point pending now by its id, {{{eve!r}: data}}" in str(refused.value)
    assert LEDGER == ["pay bob 500"]
    assert [entry.point_ids for entry in await replica().pending()] == [[eve]]

    done = await replica().invoke_resume(
        "bills-1", {eve: {"approved": False, "reason": "unknown payee"}}
    )
    assert done.text == "Both suppliers are paid." and LEDGER == ["pay bob 500"]


async def test_a_plain_approval_sent_again_is_refused_when_the_next_call_reuses_the_id(
    redis_server: RedisServer, server: OpenAIServer, opened: list[Runner]
) -> None:
    """As above, with a server that numbers each response's calls (``call_0``, as servers that
    send no ids do, and as pyadk names their calls): eve's payment came under the very id of
    bob's and paused at bob's point, so the second ``True`` paid eve. Her call now has an id of
    its own in the run (``call_0-1``), so it pauses at a point of its own and the plain answer
    sent again is refused as for any other call."""
    prefix = f"office{os.urandom(4).hex()}:"
    LEDGER.clear()

    def replica() -> Runner:
        payables = ReActAgent(
            "payables", wire_model(server, retry=RetryPolicy(max_attempts=1)), tools=[settle]
        )
        opened.append(Runner(payables, RedisCheckpointStore(redis_server.url, prefix=prefix)))
        return opened[-1]

    point = "agent:payables/tool:settle#call_0"
    eve = "agent:payables/tool:settle#call_0-1"
    paused = await replica().invoke("settle with bob", checkpoint_id="bills-2")
    assert paused.interrupt is not None and paused.interrupt.point_ids == [point]
    first = await replica().invoke_resume("bills-2", True)
    assert first.interrupt is not None and first.interrupt.point_ids == [eve]
    assert first.interrupt.points[0].info["arguments"] == {"payee": "eve", "cents": 90000}
    assert LEDGER == ["settle bob 500"]

    with pytest.raises(ValueError) as refused:
        await replica().invoke_resume("bills-2", True)  # the same click again
    assert not isinstance(refused.value, adk.CheckpointError)
    assert "may be that answer sent again" in str(refused.value)
    assert f"another call, point {eve!r}" in str(refused.value)
    assert f"answer the point pending now by its id, {{{eve!r}: data}}" in str(refused.value)
    assert LEDGER == ["settle bob 500"]
    assert [entry.point_ids for entry in await replica().pending()] == [[eve]]

    done = await replica().invoke_resume("bills-2", {eve: False})
    assert done.text == "Both suppliers are paid." and LEDGER == ["settle bob 500"]


@pytest.mark.parametrize(
    ("tool", "numbered"),
    [(settle, "the server numbers each response's calls"), (remit, "the server sends no ids")],
    ids=["call_0 per response", "no ids"],
)
async def test_a_keyed_approval_sent_again_does_not_approve_the_next_call_under_a_reused_id(
    redis_server: RedisServer,
    server: OpenAIServer,
    opened: list[Runner],
    tool: adk.Tool,
    numbered: str,
) -> None:
    """An approval keyed by its point id, sent twice (a double click, a retried webhook), when
    the model's next call comes under the id of the call just approved (``call_0`` in each
    response, as a server numbering them sends, and as pyadk names the calls of one sending
    none): the next call paused at the same point, so the second answer approved a payment
    nobody was shown. The next call has an id of its own in the run, the same in its event, its
    pause, its result and on the wire, and the answer sent again is refused as answered."""
    prefix = f"office{os.urandom(4).hex()}:"
    LEDGER.clear()
    name = tool.spec.name

    def replica() -> Runner:
        payables = ReActAgent(
            "payables", wire_model(server, retry=RetryPolicy(max_attempts=1)), tools=[tool]
        )
        opened.append(Runner(payables, RedisCheckpointStore(redis_server.url, prefix=prefix)))
        return opened[-1]

    bob = f"agent:payables/tool:{name}#call_0"
    eve = f"agent:payables/tool:{name}#call_0-1"
    paused = await replica().invoke("pay bob", checkpoint_id="bills-3")
    assert paused.interrupt is not None and paused.interrupt.point_ids == [bob], numbered
    first = await replica().invoke_resume("bills-3", {bob: True})
    assert first.interrupt is not None and first.interrupt.point_ids == [eve]
    assert first.interrupt.points[0].info["arguments"] == {"payee": "eve", "cents": 90000}
    asked = [
        call.id for e in first.events if e.message is not None for call in e.message.tool_calls
    ]
    assert asked == ["call_0-1"]  # the event carries the id its pause has
    assert [f"{name} bob 500"] == LEDGER

    with pytest.raises(ValueError) as refused:
        await replica().invoke_resume("bills-3", {bob: True})  # the same click again
    assert "already answered by an earlier resume" in str(refused.value)
    assert [f"{name} bob 500"] == LEDGER
    assert [entry.point_ids for entry in await replica().pending()] == [[eve]]

    done = await replica().invoke_resume("bills-3", {eve: False})
    assert done.text == "Both suppliers are paid." and [f"{name} bob 500"] == LEDGER
    last = server.bodies[-1]["messages"]
    calls = [call["id"] for m in last if m["role"] == "assistant" for call in m["tool_calls"]]
    results = [m["tool_call_id"] for m in last if m["role"] == "tool"]
    assert calls == results == ["call_0", "call_0-1"]  # each result paired with its own call


async def test_a_plain_answer_to_a_question_asked_again_at_the_same_point_is_taken(
    redis_server: RedisServer, opened: list[Runner]
) -> None:
    """Plain data stays the answer when the resume before paused again at the point it answered
    (the tool asked again: "'middle' is not a seat"): the person answers what they were shown."""
    prefix = f"office{os.urandom(4).hex()}:"

    @adk.tool
    def seat(ctx: adk.ToolContext) -> str:
        """Pick a seat."""
        if ctx.resume is None or ctx.resume.data not in ("window", "aisle"):
            raise adk.Interrupt("window or aisle?")
        return f"seat: {ctx.resume.data}"

    def replica() -> Runner:
        model = ScriptedModel(
            lambda messages: (
                Reply(text=messages[-1].content)
                if messages[-1].role == adk.Role.TOOL
                else Reply(tool_calls=[tool_call("seat", {}, id="c1")])
            )
        )
        agent = ReActAgent("travel", model, tools=[seat])
        opened.append(Runner(agent, RedisCheckpointStore(redis_server.url, prefix=prefix)))
        return opened[-1]

    await replica().invoke("a seat, please", checkpoint_id="trip-1")
    again = await replica().invoke_resume("trip-1", "middle")
    assert again.interrupt is not None and again.interrupt.point_ids == [
        "agent:travel/tool:seat#c1"
    ]
    done = await replica().invoke_resume("trip-1", "window")
    assert done.text == "seat: window"
