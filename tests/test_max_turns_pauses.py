"""A pause for a person's approval taken when the run's ``max_turns`` had no model call left, in
the event-driven layer and inside workflows: a resume that would make the approved call (a
refund) and then fail on the limit, keeping its checkpoint for a retry to make it again, is
refused before anything runs (as ``ReActAgent``'s own round is, ``test_max_turns``)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import Bank, ChatActor

import adk
from adk import Interrupt, LoopAgent, Message, ParallelAgent, RunError, Runner, SequentialAgent
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.resources import Resources
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, Supervisor


def _pay(cents: int, id: str = "p1") -> Reply:
    return Reply(tool_calls=[tool_call("pay", {"payee": "ann", "cents": cents}, id=id)])


def _actor_runner(bank: Bank, script: list[Any], store: Any) -> Runner:
    resources = Resources()
    resources.add_model("m", ScriptedModel(script))
    resources.add_tool(bank.pay)
    return Runner(ChatActor("payments", ["pay"], resources=resources), store)


async def test_an_action_chats_paused_round_with_no_call_left_is_refused_on_resume() -> None:
    """The chat waiting for the paused round's results asks its model next: run, the approved
    refund would be paid, the chat fail on the limit, the checkpoint kept and a retry with a
    higher limit pay it again."""
    bank, store = Bank(), InMemoryCheckpointStore()
    paused = await _actor_runner(bank, [_pay(5)], store).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    for lower in (None, 1):  # the saved limit, spent; then a resume's own, as low
        with pytest.raises(RunError) as refused:
            await _actor_runner(bank, ["done"], store).invoke_resume(
                paused.checkpoint_id, True, max_turns=lower
            )
        assert isinstance(refused.value.__cause__, adk.CheckpointError)
        assert isinstance(refused.value.__cause__, ValueError)  # the resume's max_turns: resend
        assert getattr(refused.value.__cause__, "max_turns", None) == 1
        assert "the run paused after 1 model calls, at the run's max_turns of 1" in str(
            refused.value
        )
        assert "resume with a higher max_turns" in str(refused.value)
        assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None

    done = await _actor_runner(bank, ["done"], store).invoke_resume(
        paused.checkpoint_id, True, max_turns=2
    )
    assert done.text == "done" and bank.paid == [("ann", 5)]


class Refund(Event):
    cents: int


class Refunder(ActionAgent):
    """Asks its model what to refund, has a person approve the refund in an action of its own
    (``refunds`` notes each one made), and asks the model for a summary queued behind it."""

    def __init__(self, refunds: list[int], **options: Any) -> None:
        self.refunds = refunds
        super().__init__("refunder", **options)

    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(ChatRequestEvent(model="m", messages=[Message.user(str(event.input))]))

    @action(ChatResponseEvent)
    def decide(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        if event.response.content == "refund 5":
            ctx.send_event(Refund(cents=5))
            ctx.send_event(ChatRequestEvent(model="m", messages=[Message.user("summarize")]))
        else:
            ctx.send_event(OutputEvent(output=event.response.content))

    @action(Refund)
    def refund(self, event: Refund, ctx: ActionContext) -> None:
        if ctx.resume is None:
            raise Interrupt(f"refund {event.cents}?")
        self.refunds.append(event.cents)


async def test_a_queued_chat_request_with_no_call_left_is_refused_on_resume() -> None:
    """An action of one's own paused for approval with a chat request queued behind it: the
    resume would make the refund, then fail on the queued chat's model call."""
    refunds: list[int] = []
    store = InMemoryCheckpointStore()

    def runner(script: list[Any]) -> Runner:
        resources = Resources()
        resources.add_model("m", ScriptedModel(script))
        return Runner(Refunder(refunds, resources=resources), store)

    paused = await runner(["refund 5"]).invoke("go", max_turns=1)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError, match="after 1 model calls, at the run's max_turns of 1"):
        await runner(["summary"]).invoke_resume(paused.checkpoint_id, True)
    assert refunds == [] and await store.get(paused.checkpoint_id) is not None
    done = await runner(["summary"]).invoke_resume(paused.checkpoint_id, True, max_turns=2)
    assert done.text == "summary" and refunds == [5]


class OwnTools(ActionAgent):
    """Asks its model, then sends a tool request of its own (no chat waits for it) and outputs
    its answer: no model call after the tool round."""

    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(ChatRequestEvent(model="m", messages=[Message.user(str(event.input))]))

    @action(ChatResponseEvent)
    def pay(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        calls = [tool_call("pay", {"payee": "ann", "cents": 5}, id="p1")]
        ctx.send_event(ToolRequestEvent(tool_calls=calls, tools=["pay"]))

    @action(ToolResponseEvent)
    def answer(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.responses[0].content))


async def test_a_paused_tool_request_no_chat_waits_for_resumes_with_no_call_left() -> None:
    """A tool round no chat waits for needs no model call: its resume goes on at the limit."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any]) -> Runner:
        resources = Resources()
        resources.add_model("m", ScriptedModel(script))
        resources.add_tool(bank.pay)
        return Runner(OwnTools("own", resources=resources), store)

    paused = await runner(["pay ann"]).invoke("go", max_turns=1)
    assert paused.checkpoint_id is not None
    done = await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "paid 5 to ann" and bank.paid == [("ann", 5)]


# -- inside workflows ------------------------------------------------------------------------------


def _payer(bank: Bank, script: list[Any], **options: Any) -> ReActAgent:
    return ReActAgent("payer", ScriptedModel(script), tools=[bank.pay], **options)


@pytest.mark.parametrize("workflow", ["sequential", "loop"])
async def test_a_react_round_paused_at_the_limit_in_a_workflow_is_refused_on_resume(
    workflow: str,
) -> None:
    """The ReActAgent's refusal holds inside a workflow: before a step before it ran again or
    the refund was paid."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any]) -> Runner:
        payer = _payer(bank, script)
        if workflow == "sequential":
            return Runner(SequentialAgent("flow", [payer]), store)
        return Runner(LoopAgent("flow", [payer], max_iterations=2), store)

    paused = await runner([_pay(5)]).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError, match="after 1 model calls, at the run's max_turns of 1"):
        await runner(["done", "done"]).invoke_resume(paused.checkpoint_id, True)
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None
    done = await runner(["done", "done"]).invoke_resume(paused.checkpoint_id, True, max_turns=3)
    assert done.text == "done" and bank.paid == [("ann", 5)]


async def test_a_react_round_paused_at_max_iterations_lowered_in_a_workflow_is_refused() -> None:
    """A payer redeployed with a lower max_iterations inside a parallel workflow: refused before
    the branch beside it makes its own approved call."""
    bank, store = Bank(), InMemoryCheckpointStore()
    move = Reply(tool_calls=[tool_call("transfer", {"account": "a", "cents": 1}, id="t1")])

    def runner(pays: list[Any], moves: list[Any], **options: Any) -> Runner:
        other = ReActAgent("other", ScriptedModel(moves), tools=[bank.transfer])
        return Runner(ParallelAgent("flow", [_payer(bank, pays, **options), other]), store)

    paused = await runner([_pay(5)], [move]).invoke("go")
    assert paused.checkpoint_id is not None and paused.interrupt is not None
    approvals = {point.id: True for point in paused.interrupt.points}
    assert len(approvals) == 2
    with pytest.raises(RunError, match="at its max_iterations of 1"):
        resumed = runner(["paid"], ["moved"], max_iterations=1)
        await resumed.invoke_resume(paused.checkpoint_id, approvals)
    assert bank.paid == [] and bank.sent == []
    done = await runner(["paid"], ["moved"]).invoke_resume(paused.checkpoint_id, approvals)
    assert done.interrupt is None and bank.paid == [("ann", 5)] and bank.sent == [("a", 1)]


def _ending_payer(bank: Bank, script: list[Any]) -> ReActAgent:
    """A payer whose approved payment is its answer (``return_directly``): no model call after."""
    return ReActAgent("payer", ScriptedModel(script), tools=[bank.pay], return_directly=["pay"])


@pytest.mark.parametrize("workflow", ["sequential", "loop", "nested"])
async def test_a_round_ending_its_agent_at_the_limit_before_a_step_asking_a_model_is_refused(
    workflow: str,
) -> None:
    """The paused round ends its ReActAgent without the model, so the agent's own check lets it
    resume; but the workflow's next step asks its model: run, the refund would be paid, that
    step fail on the limit, the checkpoint kept and a retry with a higher limit pay again."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any]) -> Runner:
        steps = [_ending_payer(bank, script), ReActAgent("summary", ScriptedModel(["sum"]))]
        if workflow == "sequential":
            return Runner(SequentialAgent("flow", steps), store)
        if workflow == "nested":
            inner = SequentialAgent("inner", steps[:1])
            return Runner(SequentialAgent("flow", [inner, steps[1]]), store)
        return Runner(LoopAgent("flow", steps, max_iterations=1), store)

    paused = await runner([_pay(5)]).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert isinstance(refused.value.__cause__, ValueError)  # the resume's max_turns: resend
    assert (
        "the run paused after 1 model calls, at the run's max_turns of 1: its step 'summary', "
        "after the paused step" in str(refused.value)
    )
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None
    done = await runner([]).invoke_resume(paused.checkpoint_id, True, max_turns=2)
    assert done.text == "sum" and bank.paid == [("ann", 5)]


@pytest.mark.parametrize("workflow", ["sequential", "loop", "looping"])
async def test_a_round_ending_its_agent_at_the_limit_as_the_last_step(workflow: str) -> None:
    """The payer is the last step: in a sequence, or a loop's last iteration, no step asks a
    model after it and the resume goes on at the limit; a loop with an iteration left runs its
    first step again, which asks: refused."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any]) -> Runner:
        steps = [ReActAgent("first", ScriptedModel(["first"])), _ending_payer(bank, script)]
        if workflow == "sequential":
            return Runner(SequentialAgent("flow", steps), store)
        return Runner(LoopAgent("flow", steps, 1 if workflow == "loop" else 2), store)

    paused = await runner([_pay(5)]).invoke("go", max_turns=2)
    assert paused.checkpoint_id is not None
    if workflow == "looping":
        with pytest.raises(RunError, match="its step 'first', after the paused step 'payer'"):
            await runner([]).invoke_resume(paused.checkpoint_id, True)
        assert bank.paid == []
        return
    done = await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "paid 5 to ann" and bank.paid == [("ann", 5)]


@pytest.mark.parametrize("own", [False, True])
async def test_a_step_a_before_agent_callback_may_answer_for_is_not_taken_to_ask(own: bool) -> None:
    """A ``before_agent`` callback (the run's, or the step's own) may answer for the next step
    without its model: the resume is not refused, and here the callback skips the summary."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def skip(agent: Any, ctx: Any) -> str | None:
        return "skipped" if agent.name == "summary" else None

    callbacks = [adk.Callbacks(before_agent=skip)]

    def runner(script: list[Any]) -> Runner:
        summary = ReActAgent("summary", ScriptedModel([]), callbacks=callbacks if own else ())
        flow = SequentialAgent("flow", [_ending_payer(bank, script), summary])
        return Runner(flow, store, callbacks=() if own else callbacks)

    paused = await runner([_pay(5)]).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    done = await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "skipped" and bank.paid == [("ann", 5)]


# -- an action retried after failure ---------------------------------------------------------------


class Summarizer(ActionAgent):
    """Asks the model twice from an action that retries on failure, noting each attempt."""

    def __init__(self, attempts: list[int], **options: Any) -> None:
        self.attempts = attempts
        super().__init__("summarizer", **options)

    @action(InputEvent, retry=adk.RetryPolicy(max_attempts=3, initial_delay=0, jitter=False))
    async def summarize(self, event: InputEvent, ctx: ActionContext) -> None:
        self.attempts.append(len(self.attempts) + 1)
        first = await ctx.run_context.generate("m", "draft")
        second = await ctx.run_context.generate("m", f"shorten {first.content}")
        ctx.send_event(OutputEvent(output=second.content))


async def test_an_action_that_retries_is_not_retried_past_the_limit() -> None:
    """The run's max_turns is the run's failure, not the action's: another attempt would make
    again what the first made before its refused call, and fail on the same limit."""
    attempts: list[int] = []
    resources = Resources()
    resources.add_model("m", ScriptedModel(["draft", "draft", "short"]))
    runner = Runner(Summarizer(attempts), resources=resources)
    with pytest.raises(adk.MaxTurnsExceeded, match="limit of 1 model call"):
        await runner.invoke("go", max_turns=1)
    assert attempts == [1]
    assert (await runner.invoke("go", max_turns=2)).text == "short"


# -- a supervisor's worker -------------------------------------------------------------------------


async def test_a_workers_round_ending_it_at_the_limit_is_refused_before_its_report_back() -> None:
    """The worker's round ends it (``return_directly``), so its own check lets it resume; but it
    reports back to the supervisor, which asks its model: run, the refund would be paid, the
    supervisor fail on the limit, the checkpoint kept and a retry pay again."""
    bank, store = Bank(), InMemoryCheckpointStore()
    delegate = Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "payer"}, id="d1")])

    def runner(boss: list[Any], worker: list[Any]) -> Runner:
        payer = ReActAgent(
            "payer", ScriptedModel(worker), "pays", tools=[bank.pay], return_directly=["pay"]
        )
        return Runner(Supervisor(ReActAgent("boss", ScriptedModel(boss)), [payer]), store)

    paused = await runner([delegate], [_pay(5)]).invoke("refund ann", max_turns=2)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await runner(["done"], []).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert isinstance(refused.value.__cause__, ValueError)  # the resume's max_turns: resend
    assert (
        "the run paused after 2 model calls, at the run's max_turns of 2: its worker 'payer' "
        "reports back to 'boss', which asks a model call" in str(refused.value)
    )
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None
    done = await runner(["done"], []).invoke_resume(paused.checkpoint_id, True, max_turns=3)
    assert done.text == "done" and bank.paid == [("ann", 5)]


def _pay_and_hand_over(target: str) -> Reply:
    """One round: a payment a person approves, and a transfer (which needs no approval, so it
    is done before the pause and its transfer saved with the paused round)."""
    return Reply(
        tool_calls=[
            tool_call("pay", {"payee": "ann", "cents": 5}, id="p1"),
            tool_call("transfer_to_agent", {"agent_name": target}, id="t1"),
        ]
    )


def _flow_runner(
    bank: Bank, clerk: list[Any], auditor: list[Any], store: Any, **flow: Any
) -> Runner:
    desk = ReActAgent("clerk", ScriptedModel(clerk), "pays", tools=[bank.pay])
    audit = ReActAgent("auditor", ScriptedModel(auditor), "checks payments")
    return Runner(adk.with_sub_agents(desk, [audit], **flow), store)


async def test_a_flows_round_paying_and_transferring_with_no_call_left_is_refused() -> None:
    """The paused round may end its agent (its transfer), so the agent's own check lets it
    resume; but the flow then runs the target, which asks its model: run, the payment was made,
    the target failed on the limit, the checkpoint was kept and a retry paid again."""
    bank, store = Bank(), InMemoryCheckpointStore()
    paused = await _flow_runner(bank, [_pay_and_hand_over("auditor")], [], store).invoke(
        "pay ann", max_turns=1
    )
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await _flow_runner(bank, [], ["checked"], store).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert isinstance(refused.value.__cause__, ValueError)  # the resume's max_turns: resend
    assert getattr(refused.value.__cause__, "max_turns", None) == 1
    assert (
        "the checkpoint does not fit agent 'clerk': the run paused after 1 model calls, at the "
        "run's max_turns of 1: the paused round transfers to 'auditor', which asks a model call"
        in str(refused.value)
    )
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None
    done = await _flow_runner(bank, [], ["checked"], store).invoke_resume(
        paused.checkpoint_id, True, max_turns=2
    )
    assert done.text == "checked" and bank.paid == [("ann", 5)]


async def test_a_flows_round_paying_and_transferring_past_max_transfers_is_refused() -> None:
    """The chain had made its last transfer allowed (to the clerk) when the clerk's round paused,
    and the round's own transfer is one more: run, the payment was made, and the transfer then
    failed the run past max_transfers, keeping the checkpoint for a retry to pay again."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(clerk: list[Any], limit: int) -> Runner:
        route = Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "clerk"})])
        router = ReActAgent("router", ScriptedModel([route]), "routes")
        desk = ReActAgent("clerk", ScriptedModel(clerk), "pays", tools=[bank.pay])
        audit = ReActAgent("auditor", ScriptedModel(["checked"]), "checks payments")
        clerk_flow = adk.with_sub_agents(desk, [audit])
        return Runner(adk.with_sub_agents(router, [clerk_flow], max_transfers=limit), store)

    paused = await runner([_pay_and_hand_over("auditor")], 1).invoke("pay ann")
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await runner([], 1).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    # Not the resume's arguments: max_transfers is the agent's, which only a redeploy raises.
    assert not isinstance(refused.value.__cause__, ValueError)
    assert (
        "its agent 'clerk' paused after 1 transfers, with max_transfers of 1: the transfer to "
        "'auditor' its paused round holds would pass the limit" in str(refused.value)
    )
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None
    done = await runner([], 2).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "checked" and bank.paid == [("ann", 5)]


@adk.tool
def escalate(ctx: adk.ToolContext) -> str:
    """Stop the loop (Google ADK's escalate)."""
    ctx.break_loop()
    return "escalated"


def _pay_and(other: str, **arguments: Any) -> Reply:
    """One round: a payment a person approves, beside a call that needs none (done before the
    pause, its action saved with the paused round)."""
    return Reply(
        tool_calls=[
            tool_call(other, arguments, id="o1"),
            tool_call("pay", {"payee": "ann", "cents": 5}, id="p1"),
        ]
    )


@pytest.mark.parametrize("workflow", ["sequential", "nested", "loop"])
async def test_a_round_that_exits_at_the_limit_resumes_though_a_later_step_asks_a_model(
    workflow: str,
) -> None:
    """The paused round holds an exit (the exit tool called beside the payment): the run ends
    with it, so no later step runs; the workflow refused the resume all the same, as it could
    not tell, and a person's approval could only be resumed with a higher max_turns."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any]) -> Runner:
        payer = ReActAgent("payer", ScriptedModel(script), tools=[bank.pay], exit_tool=True)
        steps = [payer, ReActAgent("summary", ScriptedModel(["sum"]))]
        if workflow == "sequential":
            return Runner(SequentialAgent("flow", steps), store)
        if workflow == "nested":
            inner = SequentialAgent("inner", [payer])
            return Runner(SequentialAgent("flow", [inner, steps[1]]), store)
        return Runner(LoopAgent("flow", steps, max_iterations=3), store)

    paused = await runner([_pay_and("exit", final_result="paid")]).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    done = await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert done.interrupt is None and bank.paid == [("ann", 5)]
    assert [e.agent_name for e in done.events if e.message is not None] == ["payer", "payer"]


async def test_a_round_that_escalates_at_the_limit_resumes_though_the_loop_would_go_on() -> None:
    """The paused round ends its agent (the payment returned directly) and breaks the loop
    (``ctx.break_loop``, Google ADK's escalate): the loop stops after it, so its later step and
    next iteration never run; the loop refused the resume all the same."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any], loop: bool = True) -> Runner:
        payer = ReActAgent(
            "payer", ScriptedModel(script), tools=[bank.pay, escalate], return_directly=["pay"]
        )
        steps = [payer, ReActAgent("summary", ScriptedModel(["sum"]))]
        if loop:
            return Runner(LoopAgent("flow", steps, max_iterations=3), store)
        return Runner(SequentialAgent("flow", steps), store)

    paused = await runner([_pay_and("escalate")]).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    done = await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert done.interrupt is None and bank.paid == [("ann", 5)] and done.text == "paid 5 to ann"
    # Outside any loop a break is ignored: the sequence goes on to its summary, still refused.
    paused = await runner([_pay_and("escalate")], loop=False).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError, match="its step 'summary', after the paused step 'payer'"):
        await runner([], loop=False).invoke_resume(paused.checkpoint_id, True)
    assert bank.paid == [("ann", 5)]


# -- calls certain after the pause, more than are left ----------------------------------------------


def _short_runner(bank: Bank, shape: str, store: Any, paying: list[Any]) -> Runner:
    """A payer whose paused round needs its model for the payment's result, in ``shape``, with
    one more model call certain after it: a workflow's next step, a loop's next iteration, a
    supervisor's turn after the report back, or the ReActAgent that called it as a tool. The
    supervisor or caller delegates in the run that pauses (``paying`` pays), then answers."""
    resumed = not isinstance(paying[0], Reply)
    payer = ReActAgent("payer", ScriptedModel(paying), description="pays", tools=[bank.pay])
    summary = ReActAgent("summary", ScriptedModel(["summed"]))
    if shape == "sequential":
        return Runner(SequentialAgent("flow", [payer, summary]), store)
    if shape == "loop":
        return Runner(LoopAgent("flow", [payer], max_iterations=2), store)
    if shape == "action":
        resources = Resources()
        resources.add_model("m", ScriptedModel(paying))
        resources.add_tool(bank.pay)
        actor = ChatActor("payments", ["pay"], resources=resources)
        return Runner(SequentialAgent("flow", [actor, summary]), store)
    if shape == "supervisor":
        delegate = Reply(
            tool_calls=[tool_call("transfer_to_agent", {"agent_name": "payer"}, id="d1")]
        )
        boss = ReActAgent("boss", ScriptedModel(["summed"] if resumed else [delegate]))
        return Runner(Supervisor(boss, [payer]), store)
    ask = Reply(tool_calls=[tool_call("payer", {"request": "refund ann"}, id="h1")])
    desk = ReActAgent(
        "desk", ScriptedModel(["summed"] if resumed else [ask]), tools=[adk.AgentTool(payer)]
    )
    return Runner(desk, store)


@pytest.mark.parametrize("shape", ["sequential", "loop", "action", "supervisor", "agent_tool"])
async def test_a_resume_certain_to_need_more_calls_than_are_left_is_refused(shape: str) -> None:
    """One model call left at the pause, two certain after it: the payer's for the payment's
    result, then the next agent's. Run, the refund would be paid, the payer take the last call,
    the next agent fail on the limit, the checkpoint be kept and a retry with a higher limit pay
    again. Refused before anything runs, naming both; with two calls left it goes on."""
    bank, store = Bank(), InMemoryCheckpointStore()
    first = 1 if shape in ("sequential", "loop", "action") else 2  # a boss's or desk's call first
    paused = await _short_runner(bank, shape, store, [_pay(5)]).invoke(
        "refund ann", max_turns=first + 1
    )
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await _short_runner(bank, shape, store, ["paid"]).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert isinstance(refused.value.__cause__, ValueError)  # the resume's max_turns: resend
    assert getattr(refused.value.__cause__, "max_turns", None) == first + 1  # held against
    text = str(refused.value)
    assert (
        f"the run paused after {first} model calls of the run's max_turns of {first + 1}, and "
        "the one call left goes to " in text
    )
    assert "resume with a higher max_turns" in text
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None

    done = await _short_runner(bank, shape, store, ["paid", "paid"]).invoke_resume(
        paused.checkpoint_id, True, max_turns=first + 2 + (shape == "loop")
    )
    assert done.interrupt is None and bank.paid == [("ann", 5)]


@pytest.mark.parametrize(
    "shape",
    ["plan_execute", "nested_sequence", "parallel", "supervisor_step", "plan_execute_step"],
)
async def test_an_agent_certain_to_ask_its_model_first_is_seen_through_what_wraps_it(
    shape: str,
) -> None:
    """The step after the paused one asks its model first from inside what wraps it: a
    PlanExecute's replanner after its executor, a sequence whose first step is a ReActAgent, a
    parallel workflow with one as a branch, a Supervisor whose supervisor is one, a PlanExecute
    (its planner). The paused round ends its agent (``return_directly``),
    no call is left: run, the refund would be paid and that agent fail on the limit."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any]) -> Runner:
        payer = _ending_payer(bank, script)
        summary = ReActAgent("summary", ScriptedModel(["summed"]))
        if shape == "plan_execute":
            planner = ReActAgent("planner", ScriptedModel(['{"steps": ["refund ann"]}']))
            agent: Any = PlanExecute(planner, payer, ReActAgent("replanner", ScriptedModel([])))
        elif shape == "nested_sequence":
            agent = SequentialAgent("flow", [payer, SequentialAgent("after", [summary])])
        elif shape == "parallel":
            agent = SequentialAgent("flow", [payer, ParallelAgent("after", [summary])])
        elif shape == "plan_execute_step":
            planner = ReActAgent("planner", ScriptedModel([]))
            after = PlanExecute(planner, summary, ReActAgent("replanner", ScriptedModel([])))
            agent = SequentialAgent("flow", [payer, after])
        else:
            helper = ReActAgent("helper", ScriptedModel([]), "helps")
            after = Supervisor(ReActAgent("boss", ScriptedModel([])), [helper])
            agent = SequentialAgent("flow", [payer, after])
        return Runner(agent, store)

    used = 2 if shape == "plan_execute" else 1  # the planner's call first
    paused = await runner([_pay(5)]).invoke("refund ann", max_turns=used)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert f"the run paused after {used} model calls, at the run's max_turns of {used}" in str(
        refused.value
    )
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None


async def test_a_plan_executes_paused_step_resumes_with_the_calls_it_needs_left() -> None:
    """Two calls left: the executor's for the payment's result, then the replanner's, whose
    answer ends the loop. The loop's next iteration is not counted as certain (the replanner
    decides it), so the resume goes on; with one left it is refused before the refund."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(paying: list[Any], replanning: list[Any]) -> Runner:
        planner = ReActAgent("planner", ScriptedModel(['{"steps": ["refund ann"]}']))
        payer = ReActAgent("payer", ScriptedModel(paying), tools=[bank.pay])
        replanner = ReActAgent("replanner", ScriptedModel(replanning))
        return Runner(PlanExecute(planner, payer, replanner), store)

    paused = await runner([_pay(5)], []).invoke("refund ann", max_turns=4)  # 2 made
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError, match="the one call left goes to agent 'payer'"):
        await runner(["paid"], ["done"]).invoke_resume(paused.checkpoint_id, True, max_turns=3)
    assert bank.paid == []
    done = await runner(["paid"], ["done"]).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "done" and bank.paid == [("ann", 5)]


async def test_a_workflow_subclass_running_otherwise_is_not_taken_to_ask_first() -> None:
    """A SequentialAgent subclass with a run of its own may not start with its first step (here
    it answers from the session): the step before it resumes at the limit, as a step that is no
    ReActAgent does."""
    bank, store = Bank(), InMemoryCheckpointStore()

    class Cached(SequentialAgent):
        async def run(self, input: adk.AgentInput, ctx: adk.RunContext) -> Any:
            yield adk.AgentEvent.of(Message.assistant("from the cache"))

    def runner(script: list[Any]) -> Runner:
        cached = Cached("cached", [ReActAgent("summary", ScriptedModel([]))])
        return Runner(SequentialAgent("flow", [_ending_payer(bank, script), cached]), store)

    paused = await runner([_pay(5)]).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    done = await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "from the cache" and bank.paid == [("ann", 5)]


async def test_a_supervisors_round_that_pays_and_delegates_counts_the_worker_and_its_report() -> (
    None
):
    """The supervisor's paused round pays (approved) and hands over to a worker: it ends the
    supervisor without its model, but the worker asks its model, then reports back and the
    supervisor asks again. Two calls certain after the refund: with one left the resume is
    refused before the refund is paid; with two it goes on."""
    bank, store = Bank(), InMemoryCheckpointStore()
    both = Reply(
        tool_calls=[
            tool_call("pay", {"payee": "ann", "cents": 5}, id="p1"),
            tool_call("transfer_to_agent", {"agent_name": "helper"}, id="d1"),
        ]
    )

    def runner(boss: list[Any]) -> Runner:
        helper = ReActAgent("helper", ScriptedModel(["helped"]), description="helps")
        supervisor = ReActAgent("boss", ScriptedModel(boss), tools=[bank.pay])
        return Runner(Supervisor(supervisor, [helper]), store)

    paused = await runner([both]).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    for limit in (None, 2):
        with pytest.raises(RunError) as refused:
            await runner(["done"]).invoke_resume(paused.checkpoint_id, True, max_turns=limit)
        assert isinstance(refused.value.__cause__, adk.CheckpointError)
        assert "the paused round transfers to 'helper'" in str(refused.value)
        if limit == 2:  # the helper takes the one left: the report back has none
            assert "which reports back to 'boss', which asks" in str(refused.value)
        assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None
    done = await runner(["done"]).invoke_resume(paused.checkpoint_id, True, max_turns=3)
    assert done.text == "done" and bank.paid == [("ann", 5)]


@pytest.mark.parametrize("kind", ["sequential", "parallel", "loop"])
async def test_a_later_workflow_step_counts_every_agent_certain_to_ask_in_it(kind: str) -> None:
    """The step after the paused one is a workflow of two ReActAgents: a sequence's or a loop's
    iteration's steps, or a parallel workflow's branches, each ask their model as they start.
    Counted as the one call its first agent asks, the resume with one call left went on: the
    refund was paid, the second agent failed on the limit, the checkpoint was kept and a retry
    with a higher limit paid again. Refused before anything runs; with two left it goes on."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any]) -> Runner:
        steps = [ReActAgent("s1", ScriptedModel(["one"])), ReActAgent("s2", ScriptedModel(["two"]))]
        later: Any
        if kind == "sequential":
            later = SequentialAgent("later", steps)
        elif kind == "parallel":
            later = ParallelAgent("later", steps)
        else:
            later = LoopAgent("later", steps, max_iterations=1)
        return Runner(SequentialAgent("flow", [_ending_payer(bank, script), later]), store)

    paused = await runner([_pay(5)]).invoke("refund ann", max_turns=2)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert (
        "the run paused after 1 model calls of the run's max_turns of 2, and the one call left "
        "goes to step 'later' (agent 's1'): its step 'later', after the paused step 'payer', "
        "asks a model call (agent 's2') the limit does not allow" in str(refused.value)
    )
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None
    done = await runner([]).invoke_resume(paused.checkpoint_id, True, max_turns=3)
    assert done.interrupt is None and bank.paid == [("ann", 5)]


async def test_a_flows_round_transferring_to_an_agent_gone_since_the_pause_is_refused() -> None:
    """The paused round holds a transfer to 'auditor', which the redeployed flow no longer has:
    run, the payment was made, the transfer then failed the run (TransferError) and the
    checkpoint was kept for a retry to pay again. Refused before anything runs, naming the
    agents it can transfer to; the flow given its auditor back resumes it."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(clerk: list[Any], auditor: bool) -> Runner:
        desk = ReActAgent("clerk", ScriptedModel(clerk), "pays", tools=[bank.pay])
        name = "auditor" if auditor else "archivist"
        other = ReActAgent(name, ScriptedModel(["checked"]), "checks payments")
        return Runner(adk.with_sub_agents(desk, [other]), store)

    paused = await runner([_pay_and_hand_over("auditor")], True).invoke("pay ann")
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await runner([], False).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert (
        "the transfer to 'auditor' its paused round holds goes to no agent it can transfer to "
        "now ('archivist')" in str(refused.value)
    )
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None
    done = await runner([], True).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "checked" and bank.paid == [("ann", 5)]


# -- a resume answering some points only ------------------------------------------------------------


def _two_desks(bank: Bank, shape: str, store: Any, paying: list[Any], moving: list[Any]) -> Runner:
    """A payer and a mover that each pause for approval, as parallel branches, the branches
    before a summary, or one agent whose round holds both calls (``paying`` scripts it), alone
    or as a supervisor's worker."""
    if shape == "worker":
        first = isinstance(paying[0], Reply) if paying else False
        delegate = tool_call("transfer_to_agent", {"agent_name": "payer"}, id="d1")
        boss = ReActAgent(
            "boss", ScriptedModel([Reply(tool_calls=[delegate])] if first else ["ok"])
        )
        payer = ReActAgent("payer", ScriptedModel(paying), "pays", tools=[bank.pay, bank.transfer])
        return Runner(Supervisor(boss, [payer]), store)
    if shape == "round":
        return Runner(
            ReActAgent("payer", ScriptedModel(paying), tools=[bank.pay, bank.transfer]), store
        )
    payer = ReActAgent("payer", ScriptedModel(paying), tools=[bank.pay])
    mover = ReActAgent("mover", ScriptedModel(moving), tools=[bank.transfer])
    both = ParallelAgent("desks", [payer, mover])
    if shape == "parallel":
        return Runner(both, store)
    return Runner(
        SequentialAgent("flow", [both, ReActAgent("summary", ScriptedModel(["sum"]))]), store
    )


@pytest.mark.parametrize("shape", ["parallel", "then_summary", "round", "worker"])
async def test_a_resume_answering_some_points_counts_no_call_after_those_left_waiting(
    shape: str,
) -> None:
    """The person approves the payment only: the transfer's point is left waiting, so what
    holds it pauses again there (its branch does not run, its round re-raises it) and no model
    call after it comes in this resume: not the mover's results, not the summary, not the round's
    results, not the supervisor's after a report back. They were counted: with the one call left the payer's results need, the person's
    yes was refused, naming calls this resume would not make. Answered last, the transfer is
    refused at the limit, before it runs, and goes on with a higher max_turns."""
    bank, store = Bank(), InMemoryCheckpointStore()
    move = Reply(tool_calls=[tool_call("transfer", {"account": "a", "cents": 1}, id="t1")])
    both = Reply(tool_calls=[*_pay(5).tool_calls, *move.tool_calls])
    one = shape in ("round", "worker")  # one agent's round holds both calls
    first = _two_desks(bank, shape, store, [both if one else _pay(5)], [move])
    made = 1 if shape == "round" else 2  # the boss delegated first
    paused = await first.invoke("go", max_turns=made + (not one))
    assert paused.checkpoint_id is not None and paused.interrupt is not None
    ids = [point.id for point in paused.interrupt.points]
    pay_point = next(point for point in ids if "tool:pay#" in point)
    move_point = next(point for point in ids if "tool:transfer#" in point)

    resumed = _two_desks(bank, shape, store, ["paid"], ["moved"])
    again = await resumed.invoke_resume(paused.checkpoint_id, {pay_point: True})
    assert bank.paid == [("ann", 5)] and bank.sent == []
    assert again.interrupt is not None and [p.id for p in again.interrupt.points] == [move_point]

    with pytest.raises(RunError) as refused:
        await _two_desks(bank, shape, store, [], ["moved"]).invoke_resume(
            paused.checkpoint_id, {move_point: True}
        )
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert "resume with a higher max_turns" in str(refused.value) and bank.sent == []
    done = await _two_desks(bank, shape, store, ["all done"], ["moved"]).invoke_resume(
        paused.checkpoint_id, {move_point: True}, max_turns=made + 3
    )
    assert done.interrupt is None and bank.sent == [("a", 1)] and bank.paid == [("ann", 5)]


async def test_a_break_below_a_sequence_inside_a_loop_ends_the_sequence_too() -> None:
    """The paused round breaks (Google ADK's escalate) inside a sequence that is a loop's step:
    the sequence stops with the break as the loop does, so its summary never runs. The check
    took a break below a sequence as one a sequence outside any loop ignores and refused the
    resume at the limit. Outside a loop it still does (the sequence goes on to its summary)."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any], loop: bool) -> Runner:
        payer = ReActAgent(
            "payer", ScriptedModel(script), tools=[bank.pay, escalate], return_directly=["pay"]
        )
        steps = SequentialAgent("steps", [payer, ReActAgent("summary", ScriptedModel(["sum"]))])
        after = ReActAgent("after", ScriptedModel(["after"]))
        if loop:  # the loop's own later step never runs either: the break ends the loop
            return Runner(LoopAgent("flow", [steps, after], max_iterations=3), store)
        return Runner(SequentialAgent("flow", [steps]), store)

    paused = await runner([_pay_and("escalate")], True).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    done = await runner([], True).invoke_resume(paused.checkpoint_id, True)
    assert done.interrupt is None and bank.paid == [("ann", 5)] and done.text == "paid 5 to ann"

    paused = await runner([_pay_and("escalate")], False).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError, match="its step 'summary', after the paused step 'payer'"):
        await runner([], False).invoke_resume(paused.checkpoint_id, True)
    assert bank.paid == [("ann", 5)]


async def test_a_break_an_inner_loop_takes_does_not_end_the_sequence_around_it() -> None:
    """The inner loop takes the break: the sequence around it goes on to its summary, which
    asks its model, so the resume at the limit is refused (inside an outer loop too)."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(script: list[Any]) -> Runner:
        payer = ReActAgent(
            "payer", ScriptedModel(script), tools=[bank.pay, escalate], return_directly=["pay"]
        )
        inner = LoopAgent("inner", [payer], max_iterations=2)
        steps = SequentialAgent("steps", [inner, ReActAgent("summary", ScriptedModel(["sum"]))])
        return Runner(LoopAgent("outer", [steps], max_iterations=1), store)

    paused = await runner([_pay_and("escalate")]).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError, match="its step 'summary', after the paused step 'inner'"):
        await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert bank.paid == []


async def test_a_workers_round_that_exits_at_the_limit_resumes_without_a_report_back() -> None:
    """The worker's paused round holds an exit (the exit tool called beside the payment): the
    run ends with it and the worker reports nothing back, so the supervisor asks no model. The
    check counted its turn after the report back all the same and refused the resume, which
    only a higher max_turns could then resume."""
    bank, store = Bank(), InMemoryCheckpointStore()
    delegate = Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "payer"}, id="d1")])

    def runner(boss: list[Any], worker: list[Any]) -> Runner:
        payer = ReActAgent("payer", ScriptedModel(worker), "pays", tools=[bank.pay], exit_tool=True)
        return Runner(Supervisor(ReActAgent("boss", ScriptedModel(boss)), [payer]), store)

    exiting = _pay_and("exit", final_result="paid ann")
    paused = await runner([delegate], [exiting]).invoke("refund ann", max_turns=2)
    assert paused.checkpoint_id is not None
    done = await runner([], []).invoke_resume(paused.checkpoint_id, True)
    assert done.interrupt is None and bank.paid == [("ann", 5)]
    assert [e.agent_name for e in done.events if e.message is not None] == ["payer", "payer"]


async def test_a_step_with_callbacks_that_cannot_answer_for_it_is_still_taken_to_ask() -> None:
    """The summary has callbacks of its own, but no before_agent one (an after_model check):
    nothing can answer for it, and its model call, counted before any model callback runs, is
    certain. It was taken as a step a callback may answer for: at the limit the refund was paid,
    the summary failed with MaxTurnsExceeded and the checkpoint was kept for a retry to pay
    again. Refused before anything runs."""
    bank, store = Bank(), InMemoryCheckpointStore()
    checked: list[str] = []

    def note(agent: Any, ctx: Any, reply: Message) -> None:
        checked.append(reply.content)

    def runner(script: list[Any]) -> Runner:
        summary = ReActAgent(
            "summary", ScriptedModel(["sum"]), callbacks=[adk.Callbacks(after_model=note)]
        )
        return Runner(SequentialAgent("flow", [_ending_payer(bank, script), summary]), store)

    paused = await runner([_pay(5)]).invoke("refund ann", max_turns=1)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert "its step 'summary', after the paused step 'payer', asks a model call" in str(
        refused.value
    )
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None
    done = await runner([]).invoke_resume(paused.checkpoint_id, True, max_turns=2)
    assert done.text == "sum" and bank.paid == [("ann", 5)] and checked == ["sum"]


async def test_an_action_chats_round_answered_in_part_at_the_limit_pauses_again() -> None:
    """An action's chat paused on two approvals with no model call left: the person approves
    the payment only, so the tool action runs it and pauses again on the transfer, and the chat
    waiting for the round asks no model in this resume. Refused as if it would; answered last,
    the transfer is refused at the limit, before it runs, and goes on with a higher one."""
    bank, store = Bank(), InMemoryCheckpointStore()
    both = Reply(
        tool_calls=[
            *_pay(5).tool_calls,
            tool_call("transfer", {"account": "a", "cents": 1}, id="t1"),
        ]
    )

    def runner(script: list[Any]) -> Runner:
        resources = Resources()
        resources.add_model("m", ScriptedModel(script))
        resources.add_tool(bank.pay)
        resources.add_tool(bank.transfer)
        return Runner(ChatActor("payments", ["pay", "transfer"], resources=resources), store)

    paused = await runner([both]).invoke("go", max_turns=1)
    assert paused.checkpoint_id is not None and paused.interrupt is not None
    ids = [point.id for point in paused.interrupt.points]
    pay_point = next(point for point in ids if "tool:pay#" in point)
    move_point = next(point for point in ids if "tool:transfer#" in point)
    again = await runner([]).invoke_resume(paused.checkpoint_id, {pay_point: True})
    assert again.interrupt is not None and [p.id for p in again.interrupt.points] == [move_point]
    assert bank.paid == [("ann", 5)] and bank.sent == []
    with pytest.raises(RunError, match="at the run's max_turns of 1"):
        await runner(["done"]).invoke_resume(paused.checkpoint_id, {move_point: True})
    assert bank.sent == []
    done = await runner(["done"]).invoke_resume(
        paused.checkpoint_id, {move_point: True}, max_turns=2
    )
    assert done.text == "done" and bank.sent == [("a", 1)] and bank.paid == [("ann", 5)]


@adk.tool
def hand_over(ctx: adk.ToolContext) -> str:
    """Hand the case over to the auditor (a transfer a tool of one's own asks for)."""
    ctx.transfer("auditor")
    return "handed over"


def _front_runner(bank: Bank, clerk: list[Any], store: Any, auditor: str = "auditor") -> Runner:
    """A clerk with no sub-agents of its own, first step of a sequence that is a flow's agent:
    its tool's transfer passes up, ending the sequence, to the flow, which runs ``auditor``."""
    desk = ReActAgent("clerk", ScriptedModel(clerk), tools=[bank.pay, hand_over])
    front = SequentialAgent("front", [desk, ReActAgent("summary", ScriptedModel(["sum"]))])
    audit = ReActAgent(auditor, ScriptedModel(["checked"]), description="checks payments")
    return Runner(adk.with_sub_agents(front, [audit]), store)


async def test_a_round_whose_transfer_passes_up_to_a_flow_counts_its_target_alone() -> None:
    """The clerk's paused round holds a transfer (its tool's ``ctx.transfer``) beside the
    payment. The clerk has no flow of its own: the transfer ends it without its model, ends the
    sequence (no summary) and goes to the flow above, which runs the auditor, one call. The
    check counted the clerk's own results' call, as for an unknown transfer_to_agent target
    whose error goes to the model, and the summary: with the one call left it refused the
    person's yes. With none left it is refused naming the auditor."""
    bank, store = Bank(), InMemoryCheckpointStore()
    paused = await _front_runner(bank, [_pay_and("hand_over")], store).invoke("go", max_turns=2)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await _front_runner(bank, [], store).invoke_resume(paused.checkpoint_id, True, max_turns=1)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert "transfers to 'auditor', which asks a model call the limit does not allow" in str(
        refused.value
    )
    assert bank.paid == []
    done = await _front_runner(bank, [], store).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "checked" and bank.paid == [("ann", 5)]
    assert [e.agent_name for e in done.events if e.message is not None][-1] == "auditor"


async def test_a_round_whose_transfer_passes_up_to_no_agent_is_refused() -> None:
    """The flow above no longer has the auditor (renamed since the pause): the transfer that
    passes up from the clerk's round would fail the run once the payment was made, keeping the
    checkpoint for a retry to pay again. Refused before anything runs."""
    bank, store = Bank(), InMemoryCheckpointStore()
    paused = await _front_runner(bank, [_pay_and("hand_over")], store).invoke("go")
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await _front_runner(bank, [], store, "archivist").invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert "the transfer to 'auditor' its paused round holds goes to no agent" in str(refused.value)
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None


async def test_a_round_whose_transfer_leaves_a_parallel_branch_is_refused() -> None:
    """The clerk is a parallel branch: its round's transfer cannot leave the branch (the
    ParallelAgent fails it, saying to wrap the branch with with_sub_agents), though a flow
    above has the auditor. Resumed, the payment was made and the branch's transfer then failed
    the run, the checkpoint kept for a retry to pay again. Refused before anything runs."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(clerk: list[Any]) -> Runner:
        desk = ReActAgent("clerk", ScriptedModel(clerk), tools=[bank.pay, hand_over])
        desks = ParallelAgent("desks", [desk, ReActAgent("other", ScriptedModel(["other"]))])
        audit = ReActAgent("auditor", ScriptedModel(["checked"]), description="checks payments")
        return Runner(adk.with_sub_agents(desks, [audit]), store)

    paused = await runner([_pay_and("hand_over")]).invoke("go")
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert (
        "the transfer to 'auditor' that a paused round of checkpoint "
        f"'{paused.checkpoint_id}' holds would fail: it leaves the parallel branch 'clerk'"
        in str(refused.value)
    )
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None


async def test_a_round_whose_transfer_no_flow_takes_is_refused() -> None:
    """No flow above the clerk takes its round's transfer (it runs alone): resumed, the payment
    was made and the run then failed on the transfer nobody handled. Refused before."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(clerk: list[Any]) -> Runner:
        return Runner(ReActAgent("clerk", ScriptedModel(clerk), tools=[bank.pay, hand_over]), store)

    paused = await runner([_pay_and("hand_over")]).invoke("go")
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError) as refused:
        await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert isinstance(refused.value.__cause__, adk.CheckpointError)
    assert "holds would fail: no transfer flow above the round takes it" in str(refused.value)
    assert bank.paid == [] and await store.get(paused.checkpoint_id) is not None


# -- the fixes combined (reviewed: no change needed) --------------------------------------------


async def test_a_break_in_a_parallel_branch_of_a_sequence_in_a_loop_resumes_at_the_limit() -> None:
    """LoopAgent [SequentialAgent [ParallelAgent [payer paying and escalating, other], summary],
    after]: the break passes up from the branch, the sequence stops on its way to the loop and the
    loop takes it, so neither the summary nor 'after' asks. At the limit the resume goes on."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(paying: list[Any]) -> Runner:
        payer = ReActAgent(
            "payer", ScriptedModel(paying), tools=[bank.pay, escalate], return_directly=["pay"]
        )
        desks = ParallelAgent("desks", [payer, ReActAgent("other", ScriptedModel(["other"]))])
        steps = SequentialAgent("steps", [desks, ReActAgent("summary", ScriptedModel(["sum"]))])
        after = ReActAgent("after", ScriptedModel(["after"]))
        return Runner(LoopAgent("flow", [steps, after], max_iterations=3), store)

    paused = await runner([_pay_and("escalate")]).invoke("refund ann", max_turns=2)
    assert paused.checkpoint_id is not None
    done = await runner([]).invoke_resume(paused.checkpoint_id, True)
    assert done.interrupt is None and bank.paid == [("ann", 5)] and done.text == "paid 5 to ann"


@pytest.mark.parametrize("shape", ["alone", "sequence"])
async def test_a_transfer_inside_an_agent_tool_stays_there_and_ends_its_sequence(
    shape: str,
) -> None:
    """The clerk's round (its tool's ctx.transfer beside the payment) runs in an AgentTool's nested
    run: the transfer is the nested run's and is ignored outside (no flow must take it, nothing
    refused), though it ends the nested sequence (its summary never asks). The one call the
    resume needs is the caller's, for the tool's result: with it left the resume goes on."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(clerk: list[Any], front: list[Any]) -> Runner:
        desk = ReActAgent(
            "clerk", ScriptedModel(clerk), description="pays", tools=[bank.pay, hand_over]
        )
        inner: Any = desk
        if shape == "sequence":
            summary = ReActAgent("summary", ScriptedModel(["sum"]))
            inner = SequentialAgent("inner", [desk, summary], description="pays")
        return Runner(
            ReActAgent("front", ScriptedModel(front), tools=[adk.AgentTool(inner)]), store
        )

    ask = Reply(tool_calls=[tool_call("clerk" if shape == "alone" else "inner", {"request": "go"})])
    paused = await runner([_pay_and("hand_over")], [ask]).invoke("go", max_turns=2)
    assert paused.checkpoint_id is not None
    with pytest.raises(RunError, match="resume with a higher max_turns"):
        await runner([], ["final"]).invoke_resume(paused.checkpoint_id, True)
    assert bank.paid == []
    done = await runner([], ["final"]).invoke_resume(paused.checkpoint_id, True, max_turns=3)
    assert done.text == "final" and bank.paid == [("ann", 5)]


async def test_a_passed_up_transfer_answered_in_two_resumes_is_counted_in_the_last() -> None:
    """The clerk's round holds its tool's transfer beside two approvals. Answering the payment
    alone, the round pauses again (no transfer yet): resumed at the limit. Answering the other,
    the transfer passes up to the flow's auditor, which asks: refused at the limit, then resumed
    with a higher max_turns."""
    bank, store = Bank(), InMemoryCheckpointStore()

    def runner(clerk: list[Any]) -> Runner:
        desk = ReActAgent("clerk", ScriptedModel(clerk), tools=[bank.pay, bank.transfer, hand_over])
        front = SequentialAgent("front", [desk, ReActAgent("summary", ScriptedModel(["sum"]))])
        audit = ReActAgent("auditor", ScriptedModel(["checked"]), description="checks payments")
        return Runner(adk.with_sub_agents(front, [audit]), store)

    move = tool_call("transfer", {"account": "a", "cents": 1}, id="t1")
    round_ = _pay_and("hand_over")
    paused = await runner([Reply(tool_calls=[*round_.tool_calls, move])]).invoke("go", max_turns=1)
    assert paused.checkpoint_id is not None and paused.interrupt is not None
    ids = [point.id for point in paused.interrupt.points]
    pay_point = next(point for point in ids if "tool:pay#" in point)
    move_point = next(point for point in ids if "tool:transfer#" in point)
    again = await runner([]).invoke_resume(paused.checkpoint_id, {pay_point: True})
    assert again.interrupt is not None and bank.paid == [("ann", 5)] and bank.sent == []
    with pytest.raises(RunError, match="transfers to 'auditor', which asks a model call"):
        await runner([]).invoke_resume(paused.checkpoint_id, {move_point: True})
    assert bank.sent == []
    done = await runner([]).invoke_resume(paused.checkpoint_id, {move_point: True}, max_turns=2)
    assert done.text == "checked" and bank.sent == [("a", 1)] and bank.paid == [("ann", 5)]
