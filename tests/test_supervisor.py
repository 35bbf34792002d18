"""Supervisor: the supervisor delegates, each worker reports back, the supervisor answers."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import adk
from adk import AgentEvent, AgentInput, BaseAgent, RunContext, Runner
from adk.checkpoint import InMemoryCheckpointStore
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent, Supervisor


def transfer(name: str) -> Reply:
    return Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": name})])


@adk.tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@adk.tool
def convert(amount: float, to: str) -> str:
    """Convert euros."""
    return f"{amount * 2:.0f} {to}"


def two_workers() -> tuple[ReActAgent, ReActAgent, ReActAgent]:
    weather = ReActAgent(
        "weather",
        ScriptedModel([Reply(tool_calls=[tool_call("get_weather", {"city": "Oslo"})]), "Sunny."]),
        description="Knows the weather.",
        tools=[get_weather],
    )
    money = ReActAgent(
        "money",
        ScriptedModel([Reply(tool_calls=[tool_call("convert", {"amount": 5, "to": "USD"})]), "10"]),
        description="Converts currencies.",
        tools=[convert],
    )
    boss = ReActAgent(
        "boss",
        ScriptedModel([transfer("weather"), transfer("money"), "Sunny, and 10 USD."]),
        description="Delegates.",
    )
    return boss, weather, money


async def test_two_workers_event_sequence() -> None:
    boss, weather, money = two_workers()
    result = await Runner(Supervisor(boss, [weather, money])).invoke("Weather in Oslo, 5 EUR?")
    lines = simplify_events(result.events)
    assert lines == [
        'boss: [call transfer_to_agent {"agent_name": "weather"}]',
        "boss: [tool transfer_to_agent] Transferred to agent 'weather'",
        "boss: [transfer -> weather]",
        'weather: [call get_weather {"city": "Oslo"}]',
        "weather: [tool get_weather] sunny in Oslo",
        "weather: Sunny.",
        "weather: [transfer -> boss]",
        'boss: [call transfer_to_agent {"agent_name": "money"}]',
        "boss: [tool transfer_to_agent] Transferred to agent 'money'",
        "boss: [transfer -> money]",
        'money: [call convert {"amount": 5, "to": "USD"}]',
        "money: [tool convert] 10 USD",
        "money: 10",
        "money: [transfer -> boss]",
        "boss: Sunny, and 10 USD.",
    ]
    assert result.text == "Sunny, and 10 USD."
    paths = [e.run_path for e in result.events]
    assert paths[0] == ("boss",)
    assert paths[3] == ("boss", "weather")
    assert paths[7] == ("boss", "weather", "boss")
    assert paths[-1] == ("boss", "weather", "boss", "money", "boss")


async def test_supervisor_tool_lists_workers_and_workers_get_no_transfer_tool() -> None:
    boss, weather, money = two_workers()
    await Runner(Supervisor(boss, [weather, money])).invoke("go")
    boss_tools = boss.model.requests[0].tools  # type: ignore[union-attr]
    spec = next(s for s in boss_tools if s.name == "transfer_to_agent")
    assert spec.parameters["properties"]["agent_name"]["enum"] == ["weather", "money"]
    assert "- weather: Knows the weather." in spec.description
    # Workers report back deterministically: their models are not offered a transfer.
    worker_tools = weather.model.requests[0].tools  # type: ignore[union-attr]
    assert [s.name for s in worker_tools] == ["get_weather"]
    # The supervisor's second turn sees what the worker did, as context.
    seen = [m.content for m in boss.model.requests[1].messages]  # type: ignore[union-attr]
    assert "For context: [weather] said: Sunny.." in seen


async def test_a_worker_that_exits_ends_the_run() -> None:
    finisher = ReActAgent(
        "finisher",
        ScriptedModel([Reply(tool_calls=[tool_call("exit", {"final_result": "bye"})])]),
        description="Ends things.",
        exit_tool=True,
    )
    boss_model = ScriptedModel([transfer("finisher"), "never said"])
    result = await Runner(Supervisor(ReActAgent("boss", boss_model), [finisher])).invoke("go")
    assert simplify_events(result.events)[-3:] == [
        'finisher: [call exit {"final_result": "bye"}]',
        "finisher: [tool exit] bye",
        "finisher: [exit]",
    ]
    assert boss_model.calls == 1  # no transfer back, the supervisor never speaks again
    assert result.text == "bye"


async def test_a_failing_worker_ends_the_run_with_its_error() -> None:
    class Broken(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            raise RuntimeError("worker broke")
            yield AgentEvent.of("unreachable")

    boss_model = ScriptedModel([transfer("broken"), "never"])
    app = Supervisor(ReActAgent("boss", boss_model), [Broken("broken", "Breaks.")])
    events = [e async for e in Runner(app).run("go")]
    assert simplify_events(events)[-1] == "broken: [error worker broke]"
    assert boss_model.calls == 1


async def test_nested_supervisors() -> None:
    clerk = ReActAgent("clerk", ScriptedModel(["filed"]), description="Files papers.")
    manager = ReActAgent(
        "manager",
        ScriptedModel([transfer("clerk"), "papers are filed"]),
        description="Manages the clerk.",
    )
    ceo_model = ScriptedModel([transfer("manager"), "done: papers filed"])
    ceo = ReActAgent("ceo", ceo_model)
    app = Supervisor(ceo, [Supervisor(manager, [clerk])])
    result = await Runner(app).invoke("file the papers")
    assert [line for line in simplify_events(result.events) if "[tool" not in line] == [
        'ceo: [call transfer_to_agent {"agent_name": "manager"}]',
        "ceo: [transfer -> manager]",
        'manager: [call transfer_to_agent {"agent_name": "clerk"}]',
        "manager: [transfer -> clerk]",
        "clerk: filed",
        "clerk: [transfer -> manager]",
        "manager: papers are filed",
        "manager: [transfer -> ceo]",
        "ceo: done: papers filed",
    ]
    # The middle supervisor may only hand work down; it reports up by answering.
    manager_spec = manager.model.requests[0].tools[0]  # type: ignore[union-attr]
    assert manager_spec.parameters["properties"]["agent_name"]["enum"] == ["clerk"]


async def test_interrupted_worker_resumes_and_reports_back() -> None:
    @adk.tool(require_approval=True)
    def refund(amount: int) -> str:
        """Refund money."""
        return f"refunded {amount}"

    cashier = ReActAgent(
        "cashier",
        ScriptedModel([Reply(tool_calls=[tool_call("refund", {"amount": 7})]), "Refund made."]),
        description="Handles refunds.",
        tools=[refund],
    )
    boss = ReActAgent("boss", ScriptedModel([transfer("cashier"), "Your refund is done."]))
    runner = Runner(Supervisor(boss, [cashier]))
    first = await runner.invoke("refund me")
    assert first.interrupt is not None and first.checkpoint_id is not None
    assert first.interrupt.point_ids == ["agent:boss/agent:cashier/tool:refund#call_1"]
    second = await runner.invoke_resume(first.checkpoint_id, True)
    assert simplify_events(second.events) == [
        "cashier: [tool refund] refunded 7",
        "cashier: Refund made.",
        "cashier: [transfer -> boss]",
        "boss: Your refund is done.",
    ]
    assert second.events[-1].run_path == ("boss", "cashier", "boss")


async def test_a_supervisor_that_keeps_delegating_stops_at_max_transfers() -> None:
    """Every delegation is a transfer there and one back: a supervisor whose model never stops
    delegating ends with a TransferError once the run has made more transfers than allowed."""
    worker = ReActAgent("worker", ScriptedModel(["done"], cycle=True), description="Works.")
    boss = ReActAgent("boss", ScriptedModel([transfer("worker")], cycle=True), description="Boss")
    runner = Runner(Supervisor(boss, [worker], max_transfers=6))
    with pytest.raises(adk.RunError, match="more than 6 transfers in one run") as raised:
        await runner.invoke("go")
    events = raised.value.events
    delegations = [e for e in events if e.action and e.action.transfer_to == "worker"]
    assert len(delegations) == 4  # 3 delegations and back (6 transfers); the 4th goes over


async def test_a_delegation_whose_report_back_would_pass_the_limit_is_refused_first() -> None:
    """With an odd limit the last delegation fits and its report back does not: the worker ran
    (its tools too) for a run that then failed. Refused before the worker runs."""
    worker_model = ScriptedModel(["done"], cycle=True)
    worker = ReActAgent("worker", worker_model, description="Works.")
    boss = ReActAgent("boss", ScriptedModel([transfer("worker")], cycle=True), description="Boss")
    runner = Runner(Supervisor(boss, [worker], max_transfers=5))
    with pytest.raises(adk.RunError) as raised:
        await runner.invoke("go")
    assert raised.value.error.message == (
        "more than 5 transfers in one run: the transfer to 'worker' would be the 5th, and its "
        "report back to 'boss' the 6th (raise max_transfers, a parameter of with_sub_agents and "
        "Supervisor, if the conversation needs more)"
    )
    assert len(worker_model.requests) == 2  # two delegations and back; the third never ran


async def test_a_worker_paused_with_no_transfer_left_is_refused_before_it_resumes() -> None:
    """A checkpoint paused in a worker after three transfers, resumed once the limit was
    lowered to three (or two): the worker's report back would fail the run after its paused
    call ran. Refused before anything runs, the checkpoint kept; resumed under four it goes on."""
    refunds: list[int] = []

    @adk.tool(require_approval=True)
    def refund(cents: int) -> str:
        """Refund."""
        refunds.append(cents)
        return "refunded"

    def runner(limit: int) -> Runner:
        def boss_reply(messages: list[adk.Message]) -> Reply:
            reports = sum("said: Refunded" in m.content for m in messages)
            return Reply("All done.") if reports == 2 else transfer("cashier")

        def cashier_reply(messages: list[adk.Message]) -> Reply:
            if messages[-1].content == "refunded":
                return Reply("Refunded.")
            return Reply(tool_calls=[tool_call("refund", {"cents": 5}, id="r1")])

        cashier = ReActAgent(
            "cashier", ScriptedModel(cashier_reply), description="Refunds.", tools=[refund]
        )
        boss = ReActAgent("boss", ScriptedModel(boss_reply), description="Boss.")
        return Runner(Supervisor(boss, [cashier], max_transfers=limit), store)

    store = InMemoryCheckpointStore()
    first = await runner(4).invoke("two refunds")
    assert first.checkpoint_id is not None
    second = await runner(4).invoke_resume(first.checkpoint_id, True)  # transfers 2, 3: paused
    assert second.interrupt is not None and refunds == [5]
    # Keyed by its point: plain data after a plain resume that paused for a call's approval
    # may be that decision sent again, and is refused (docs/interrupts.md, "Resuming").
    approved = dict.fromkeys(second.interrupt.point_ids, True)
    for limit, where in ((3, "at"), (2, "beyond")):
        with pytest.raises(adk.RunError) as refused:
            await runner(limit).invoke_resume(first.checkpoint_id, approved)
        assert str(refused.value.__cause__) == (
            "the checkpoint does not fit agent 'boss' (its transfers): its worker 'cashier' "
            f"paused after 3 transfers, {where} max_transfers of {limit}: its report back would "
            "pass the limit; raise max_transfers and resume again"
        )
        assert refunds == [5] and await store.get(first.checkpoint_id) is not None
    done = await runner(4).invoke_resume(first.checkpoint_id, approved)
    assert done.text == "All done." and refunds == [5, 5]


async def test_a_worker_without_resume_runs_again_on_its_history_and_reports_back() -> None:
    # A worker with no ``resume`` is run again when the run resumes (DESIGN "Interrupts"): with
    # the input built from history, as it would be outside a supervisor, not an empty one.
    class Approver(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                yield ctx.interrupt("approve?")
                return
            asked = input.messages[0].content if input.messages else "nothing"
            yield AgentEvent.of(f"approved: {asked}")

    boss = ReActAgent("boss", ScriptedModel([transfer("approver"), "Order 42 is approved."]))
    runner = Runner(Supervisor(boss, [Approver("approver", "Approves orders.")]))
    first = await runner.invoke("please approve order 42")
    assert first.interrupt is not None and first.checkpoint_id is not None
    second = await runner.invoke_resume(first.checkpoint_id, True)
    assert simplify_events(second.events) == [
        "approver: approved: please approve order 42",
        "approver: [transfer -> boss]",
        "boss: Order 42 is approved.",
    ]


async def test_a_worker_cannot_hand_over_to_another_worker() -> None:
    # Documented: a transfer target is a sub-agent or the parent; there is no peer transfer. The
    # model's own transfer tool lists the valid names; a tool's ctx.transfer failed the run
    # saying only "not found", leaving the user to guess that only the supervisor is reachable.
    @adk.tool
    def handoff(ctx: adk.ToolContext) -> str:
        """Hand the case to billing."""
        ctx.transfer("billing")
        return "handed"

    support = ReActAgent(
        "support",
        ScriptedModel([Reply(tool_calls=[tool_call("handoff", {})])]),
        description="Supports.",
        tools=[handoff],
    )
    billing = ReActAgent("billing", ScriptedModel(["billed"]), description="Bills.")
    boss = ReActAgent("boss", ScriptedModel([transfer("support"), "never"]))
    with pytest.raises(adk.RunError) as caught:
        await Runner(Supervisor(boss, [support, billing])).invoke("help")
    assert caught.value.error.message == (
        "transfer failed: agent 'billing' not found when transferring from 'support'; the agents "
        "it can transfer to: 'boss'"
    )
    assert billing.model.calls == 0  # type: ignore[union-attr]


async def test_a_second_supervisor_over_one_agent_is_refused_saying_to_build_once() -> None:
    # A crew built per request from agents made once: the second Supervisor over the same
    # supervisor agent is refused, saying what to do instead, and the first one still runs.
    boss, weather, money = two_workers()
    app = Supervisor(boss, [weather, money])

    with pytest.raises(ValueError) as refused:
        Supervisor(boss, [weather, money])

    assert str(refused.value) == (
        "agent 'boss' already has sub-agents ('weather', 'money'): an agent is wired once, so "
        "build the flow (with_sub_agents, Supervisor, ReActAgent(sub_agents=)) once and run it "
        "as often as needed, concurrent runs included, or give another flow agents of its own"
    )
    result = await Runner(app).invoke("Weather in Oslo, 5 EUR?")
    assert result.text == "Sunny, and 10 USD."


def test_a_supervisor_without_workers_is_refused() -> None:
    boss = ReActAgent("boss", ScriptedModel([]))
    with pytest.raises(ValueError, match=r"Supervisor 'boss': a supervisor needs at least one"):
        Supervisor(boss, [])
    with pytest.raises(ValueError, match=r"needs at least one worker"):
        Supervisor(boss, iter(()))
