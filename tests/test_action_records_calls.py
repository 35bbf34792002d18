"""An ``ActionAgent``'s approved tool call that ran is not run again by a second resume.

The built-in tool action of an ``ActionAgent`` whose chat's tool round paused for approval ran
the approved calls on resume and recorded nothing: a resume that failed afterwards (the chat's
model down right after the payment), or that was cut off once the payment had returned, left
the checkpoint as the pause saved it, and resuming it again paid again. The resumed round now
records each call's answer among the answers its pause saved (the same ``_Progress`` records a
``ReActAgent``'s round goes through, tests/test_resume_records_calls.py), and a later resume
takes it as a saved answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from recorded_calls import (  # noqa: F401  (stores_fixture)
    StoreFactory,
    runner_over,
    stores_fixture,
    stuck_ship,
)

from adk import Message, ParallelAgent, Resources, Role, RunError, Runner, ToolResult, tool
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.actions._builtin import _IN_STATE
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint._snapshot import _STATE_DEPTH
from adk.checkpoint.codec import MAX_DEPTH, decode_checkpoint, encode_checkpoint, from_json_value
from adk.testing import Reply, ScriptedModel, tool_call

pytest_plugins = ["services"]

RAN: list[str] = []
"""What the tools did, in order: each entry one run of a tool."""

STATE = "agent:desk/action:builtin.tools"
"""Where the paused tool action's state is in the checkpoint."""


@pytest.fixture(autouse=True)
def _nothing_ran_yet() -> None:
    RAN.clear()


@tool(require_approval=True)
async def pay(to: str, amount: int) -> str:
    """Pay an amount to someone once a person approves it."""
    RAN.append(f"paid {to}")
    return f"paid {amount} to {to}"


@tool(require_approval=True)
async def ship(item: str) -> str:
    """Ship an item once a person approves it."""
    RAN.append(f"shipped {item}")
    return f"shipped {item}"


class Desk(ActionAgent):
    """Asks model ``m`` with the tools named in ``tools``; outputs its answer."""

    def __init__(self, tools: tuple[str, ...], resources: Resources) -> None:
        self.tools = list(tools)
        super().__init__("desk", resources=resources)

    @action(InputEvent)
    async def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        messages = [Message.user(event.input)]
        ctx.send_event(ChatRequestEvent(model="m", messages=messages, tools=self.tools))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def _model(calls: list[Any], *, model_down: bool = False) -> ScriptedModel:
    """Asks for ``calls`` in one round; once every result is in, answers with them (or fails,
    as a model down right after the calls)."""

    def reply(messages: list[Message]) -> Any:
        results = [m.content for m in messages if m.role == Role.TOOL]
        if len(results) == len(calls):
            if model_down:
                raise RuntimeError("model down")
            return Reply(text="done: " + "; ".join(results))
        return Reply(tool_calls=calls)

    return ScriptedModel(reply)


def _payments(*payees: str) -> list[Any]:
    return [tool_call("pay", {"to": to, "amount": 5}, id=f"call_{to}") for to in payees]


_PAY_AND_SHIP = [
    tool_call("pay", {"to": "bob", "amount": 5}, id="call_pay"),
    tool_call("ship", {"item": "lamp"}, id="call_ship"),
]


def _desk(calls: list[Any], *tools: Any, model_down: bool = False) -> Desk:
    resources = Resources()
    resources.add_model("m", _model(calls, model_down=model_down))
    for found in tools:
        resources.add_tool(found)
    return Desk(tuple(dict.fromkeys(call.name for call in calls)), resources)


@pytest.mark.parametrize("payees", [("bob",), ("bob", "eve")], ids=["one call", "two calls"])
async def test_an_action_round_whose_chat_fails_after_the_payment_is_resumed_without_paying_again(
    stores: StoreFactory, payees: tuple[str, ...]
) -> None:
    """A round of one call (run inline) or of two (run concurrently): each approved payment is
    recorded as it ends; the chat's model fails after them; the retry pays nobody again."""
    calls = _payments(*payees)
    async with runner_over(_desk(calls, pay), stores) as first:
        paused = await first.invoke("pay", checkpoint_id="order-1")
    assert paused.interrupt is not None
    answers = {point: {"approved": True} for point in paused.interrupt.point_ids}

    async with runner_over(_desk(calls, pay, model_down=True), stores) as failing:
        with pytest.raises(RunError, match="model down"):
            await failing.invoke_resume("order-1", answers)
        data = await failing.checkpoint_store.get("order-1")
    assert sorted(RAN) == sorted(f"paid {to}" for to in payees)
    assert data is not None
    state = decode_checkpoint(data, "order-1")["states"][STATE][""]
    assert state["places"] == list(range(len(payees)))
    assert [from_json_value(m).content for m in state["done"]] == [
        f"paid 5 to {to}" for to in payees
    ]

    async with runner_over(_desk(calls, pay), stores) as retry:
        done = await retry.invoke_resume("order-1", answers)
        assert await retry.checkpoint_store.get("order-1") is None  # finished: deleted

    assert done.text == "done: " + "; ".join(f"paid 5 to {to}" for to in payees)
    assert sorted(RAN) == sorted(f"paid {to}" for to in payees)  # nobody paid twice


class Clerk(ActionAgent):
    """Sends the pay-and-ship calls itself (no chat: a chat's next round needs every tool its
    request offers) and books their answers, or fails to (a ledger down right after them)."""

    def __init__(self, *tools: Any, ledger_down: bool = False) -> None:
        resources = Resources()
        for found in tools:
            resources.add_tool(found)
        self.ledger_down = ledger_down
        super().__init__("desk", resources=resources)

    @action(InputEvent)
    def start(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(ToolRequestEvent(tool_calls=[c.model_copy() for c in _PAY_AND_SHIP]))

    @action(ToolResponseEvent)
    def book(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
        if self.ledger_down:
            raise RuntimeError("ledger down")
        ctx.send_event(
            OutputEvent(output="booked: " + "; ".join(m.content for m in event.responses))
        )


class _NotingStore(InMemoryCheckpointStore):
    """Tells when a record's conditional replace has landed."""

    def __init__(self) -> None:
        super().__init__()
        self.replaced = asyncio.Event()

    async def _replace(self, id: str, old: bytes, data: bytes) -> bool:
        written = await super()._replace(id, old, data)
        self.replaced.set()
        return written


async def _approved_then_cut_after_the_payment(
    store: _NotingStore, agent: Any, stuck: Any, checkpoint_id: str, **options: Any
) -> dict[str, Any]:
    """``agent`` asked to pay and ship pauses at ``checkpoint_id``; every call is approved and
    ``stuck`` (its shipping never ends) resumes it, cut off once the payment's record landed.
    The answers given, to be sent again."""
    paused = await Runner(agent, checkpoint_store=store).invoke(
        "pay and ship", checkpoint_id=checkpoint_id, **options
    )
    assert paused.interrupt is not None
    answers = {point: {"approved": True} for point in paused.interrupt.point_ids}
    cut = asyncio.create_task(
        Runner(stuck, checkpoint_store=store).invoke_resume(checkpoint_id, answers)
    )
    await store.replaced.wait()  # the payment's record landed
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut
    return answers


async def test_a_removed_tool_is_refused_only_for_the_action_calls_that_must_still_run() -> None:
    """Both calls approved; the payment ended and was recorded, and the resume was cut off
    while the shipping still ran (not recorded). A redeploy without the shipping tool is
    refused naming it alone, before anything runs; one without the payment tool resumes (the
    payment from its record, the shipping run), here answering only the shipping's point,
    the one still waiting."""
    store = _NotingStore()
    answers = await _approved_then_cut_after_the_payment(
        store, Clerk(pay, ship), Clerk(pay, stuck_ship()), "half"
    )
    assert RAN == ["paid bob"]

    waiting = [p async for p in Runner(Clerk(), checkpoint_store=store).pending()]
    [shipping] = [point.id for point in waiting[0].points]
    assert shipping.endswith("/tool:ship#call_ship")  # the payment waits no longer

    with pytest.raises(RunError, match=r"need tools it no longer has: ship \(") as refused:
        await Runner(Clerk(pay), checkpoint_store=store).invoke_resume("half", answers)
    assert "pay" not in str(refused.value).split("no longer has:")[1].split("(")[0]
    assert RAN == ["paid bob"]

    done = await Runner(Clerk(ship), checkpoint_store=store).invoke_resume(
        "half", {shipping: {"approved": True}}
    )
    assert done.text == "booked: paid 5 to bob; shipped lamp"
    assert RAN == ["paid bob", "shipped lamp"]
    assert await store.get("half") is None


async def test_an_action_checkpoint_whose_every_call_was_recorded_resumes_without_its_tools() -> (
    None
):
    store = InMemoryCheckpointStore()
    paused = await Runner(Clerk(pay, ship), checkpoint_store=store).invoke(
        "pay and ship", checkpoint_id="gone"
    )
    assert paused.interrupt is not None
    answers = {point: {"approved": True} for point in paused.interrupt.point_ids}
    with pytest.raises(RunError, match="ledger down"):
        await Runner(Clerk(pay, ship, ledger_down=True), checkpoint_store=store).invoke_resume(
            "gone", answers
        )
    assert sorted(RAN) == ["paid bob", "shipped lamp"]

    done = await Runner(Clerk(), checkpoint_store=store).invoke_resume("gone", answers)
    assert done.text == "booked: paid 5 to bob; shipped lamp"
    assert sorted(RAN) == ["paid bob", "shipped lamp"]
    assert await store.get("gone") is None


async def test_an_action_checkpoint_saved_before_records_resumes_and_then_records() -> None:
    """A pause saved by a pyadk from before answer places (``done`` without ``places``): it
    resumes as before, its resumed call is recorded with the places the record writes, and the
    retry takes it from the record."""

    @tool
    async def quote(item: str) -> str:
        """Quote a price (no approval: it answers before the pause)."""
        RAN.append(f"quoted {item}")
        return "lamp costs 5"

    calls = [
        tool_call("quote", {"item": "lamp"}, id="c"),
        tool_call("pay", {"to": "bob", "amount": 5}, id="c"),
    ]
    store = InMemoryCheckpointStore()
    await Runner(_desk(calls, quote, pay), checkpoint_store=store).invoke(
        "buy", checkpoint_id="new"
    )
    data = await store.get("new")
    assert data is not None
    body = decode_checkpoint(data, "new")
    state = body["states"][STATE][""]
    assert state.pop("places") == [0]  # as an older pyadk saved it
    await store.put("old", encode_checkpoint(body))
    RAN.clear()

    with pytest.raises(RunError, match="model down"):
        await Runner(
            _desk(calls, quote, pay, model_down=True), checkpoint_store=store
        ).invoke_resume("old", "yes")
    assert RAN == ["paid bob"]

    done = await Runner(_desk(calls, quote, pay), checkpoint_store=store).invoke_resume(
        "old", "yes"
    )
    assert done.text == "done: lamp costs 5; paid 5 to bob"
    assert RAN == ["paid bob"]


async def test_recorded_structured_results_stay_with_their_answers() -> None:
    """The structured values saved beside the answers (one per answer, by place) keep their
    answers' places when a resumed call's is recorded among them."""
    seen: list[list[Any] | None] = []

    @tool
    async def quote(item: str) -> ToolResult:
        """Quote a price (no approval: it answers before the pause)."""
        RAN.append(f"quoted {item}")
        return ToolResult(content="5", structured={"price": 5})

    @tool(require_approval=True)
    async def charge(amount: int) -> ToolResult:
        """Charge an amount once a person approves it."""
        RAN.append(f"charged {amount}")
        return ToolResult(content="charged", structured={"receipt": "r-1"})

    class Watching(Desk):
        @action(ToolResponseEvent)
        def watch(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
            seen.append(event.structured)

    def desk(model_down: bool = False) -> Desk:
        resources = Resources()
        resources.add_model("m", _model(calls, model_down=model_down))
        resources.add_tool(quote)
        resources.add_tool(charge)
        return Watching(("charge", "quote"), resources)

    calls = [
        tool_call("charge", {"amount": 5}, id="a"),
        tool_call("quote", {"item": "lamp"}, id="b"),
    ]
    store = InMemoryCheckpointStore()
    await Runner(desk(), checkpoint_store=store).invoke("buy", checkpoint_id="s")
    with pytest.raises(RunError, match="model down"):
        await Runner(desk(model_down=True), checkpoint_store=store).invoke_resume("s", "yes")
    done = await Runner(desk(), checkpoint_store=store).invoke_resume("s", "yes")

    assert done.text == "done: charged; 5"
    assert RAN == ["quoted lamp", "charged 5"]
    assert seen == [[{"receipt": "r-1"}, {"price": 5}]] * 2


def _nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"k": value}
    return value


@pytest.mark.parametrize("levels", [MAX_DEPTH - 3, MAX_DEPTH - 1])
async def test_a_structured_result_too_deep_for_the_saved_state_leaves_the_record_readable(
    levels: int,
) -> None:
    """A resumed call's structured value nested too deep to be read back where the state keeps
    it (``states`` / address / slot / ``structured`` / its place), though not too deep on its
    own: recorded as it was, every later resume refused the checkpoint as malformed (the pause
    lost). It is carried as None (a checkpoint cannot hold it, as for any value it cannot hold),
    the answer recorded, and the retry pays nobody again."""
    seen: list[list[Any] | None] = []

    @tool(require_approval=True)
    async def charge(amount: int) -> ToolResult:
        """Charge an amount once a person approves it."""
        RAN.append(f"charged {amount}")
        return ToolResult(content="charged", structured=_nested(levels))

    class Watching(Desk):
        @action(ToolResponseEvent)
        def watch(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
            seen.append(event.structured)

    def desk(model_down: bool = False) -> Desk:
        resources = Resources()
        resources.add_model("m", _model(calls, model_down=model_down))
        resources.add_tool(charge)
        return Watching(("charge",), resources)

    assert _IN_STATE == _STATE_DEPTH + 2  # where the state's "structured" items are read
    calls = [tool_call("charge", {"amount": 5}, id="a")]
    store = InMemoryCheckpointStore()
    await Runner(desk(), checkpoint_store=store).invoke("buy", checkpoint_id="deep")
    with pytest.raises(RunError, match="model down"):
        await Runner(desk(model_down=True), checkpoint_store=store).invoke_resume("deep", "yes")
    assert RAN == ["charged 5"]

    done = await Runner(desk(), checkpoint_store=store).invoke_resume("deep", "yes")
    assert done.text == "done: charged"
    assert RAN == ["charged 5"]  # not charged again
    assert seen[-1] is None  # the recorded answer carries no value
    assert await store.get("deep") is None


async def test_a_structured_result_too_deep_for_the_saved_state_does_not_refuse_the_pause() -> None:
    """The same value given by a call that answers before its round pauses (no approval): the
    pause saves it as None, with its text, as any value a checkpoint cannot hold (the pause
    was refused: ``could not save checkpoint``, nothing to resume)."""

    @tool
    async def quote(item: str) -> ToolResult:
        """Quote a price (no approval: it answers before the pause)."""
        RAN.append(f"quoted {item}")
        return ToolResult(content="5", structured=_nested(MAX_DEPTH - 3))

    calls = [
        tool_call("quote", {"item": "lamp"}, id="q"),
        tool_call("pay", {"to": "bob", "amount": 5}, id="p"),
    ]
    store = InMemoryCheckpointStore()
    paused = await Runner(_desk(calls, quote, pay), checkpoint_store=store).invoke(
        "buy", checkpoint_id="deep-pause"
    )
    assert paused.interrupt is not None
    done = await Runner(_desk(calls, quote, pay), checkpoint_store=store).invoke_resume(
        "deep-pause", "yes"
    )
    assert done.text == "done: 5; paid 5 to bob"
    assert RAN == ["quoted lamp", "paid bob"]


async def test_a_resume_of_the_calls_still_waiting_is_refused_when_max_turns_leaves_the_chat_none() -> (
    None
):
    """The payment recorded by a resume cut off while the shipping ran; the resume of the point
    still waiting (the only one listed) with no model call left for the chat after the round is
    refused before the shipping runs, as a resume of the unrecorded pause is. The payment's
    settled point counted as one the resume leaves waiting (the round would pause again, asking
    no model), so the check was skipped: the shipping ran, then the chat failed on the limit."""

    def desk(*tools: Any) -> Desk:
        resources = Resources()
        resources.add_model("m", _model(_PAY_AND_SHIP))
        for found in tools:
            resources.add_tool(found)
        return Desk(("pay", "ship"), resources)

    store = _NotingStore()
    answers = await _approved_then_cut_after_the_payment(
        store, desk(pay, ship), desk(pay, stuck_ship()), "turns", max_turns=2
    )
    assert RAN == ["paid bob"]
    [shipping] = [point for point in answers if point.endswith("/tool:ship#call_ship")]

    with pytest.raises(RunError, match="its chat asks the model after the paused action"):
        await Runner(desk(pay, ship), checkpoint_store=store).invoke_resume(
            "turns", {shipping: {"approved": True}}, max_turns=1
        )
    assert RAN == ["paid bob"]  # refused before the shipping ran

    done = await Runner(desk(pay, ship), checkpoint_store=store).invoke_resume(
        "turns", {shipping: {"approved": True}}
    )
    assert done.text == "done: paid 5 to bob; shipped lamp"
    assert RAN == ["paid bob", "shipped lamp"]


class Teller(ActionAgent):
    """Pays ``to`` through its chat's one tool round, then outputs its answer (or its model is
    down once the payment's result is in)."""

    def __init__(self, name: str, to: str, *, model_down: bool = False) -> None:
        resources = Resources()
        resources.add_model("m", _model(_payments(to), model_down=model_down))
        resources.add_tool(pay)
        super().__init__(name, resources=resources)

    @action(InputEvent)
    async def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        messages = [Message.user(event.input)]
        ctx.send_event(ChatRequestEvent(model="m", messages=messages, tools=["pay"]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


async def test_a_branch_whose_call_was_recorded_resumes_with_the_points_still_listed() -> None:
    """Two ActionAgents in a ParallelAgent, each paused at its payment. A resume answering the
    left one paid bob (recorded), and its chat's model then failed; the listing shows eve's
    point alone, and a resume answering it finishes both: the left branch replays bob's
    payment. It used to be skipped as not addressed, re-raising its recorded point: the run
    paused again at a point no listing had shown."""

    def both(*, left_down: bool = False) -> ParallelAgent:
        return ParallelAgent(
            "both", [Teller("left", "bob", model_down=left_down), Teller("right", "eve")]
        )

    store = InMemoryCheckpointStore()
    paused = await Runner(both(), checkpoint_store=store).invoke("pay", checkpoint_id="par")
    assert paused.interrupt is not None
    left, right = paused.interrupt.point_ids
    assert "agent:left/" in left and "agent:right/" in right
    with pytest.raises(RunError, match="model down"):
        await Runner(both(left_down=True), checkpoint_store=store).invoke_resume(
            "par", {left: {"approved": True}}
        )
    assert RAN == ["paid bob"]
    listed = [p async for p in Runner(both(), checkpoint_store=store).pending()]
    assert [point.id for point in listed[0].points] == [right]

    done = await Runner(both(), checkpoint_store=store).invoke_resume(
        "par", {right: {"approved": True}}
    )
    assert done.interrupt is None
    outputs = sorted(
        e.message.content
        for e in done.events
        if e.message is not None and e.message.content.startswith("done:")
    )
    assert outputs == ["done: paid 5 to bob", "done: paid 5 to eve"]
    assert RAN == ["paid bob", "paid eve"]
    assert await store.get("par") is None
