"""Transfer between agents: with_sub_agents, lookup order (sub-agents, then parent), run paths,
one parent per agent, allow_transfer_to_parent, and the unknown-agent error."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import ScriptAgent, act_transfer, run_events

from adk import (
    AgentEvent,
    AgentInput,
    Message,
    RunContext,
    RunError,
    Runner,
    RunResult,
    SequentialAgent,
    ToolContext,
    tool,
    with_sub_agents,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import decode_checkpoint, encode_checkpoint
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent


def _once(target: str) -> ScriptAgent:
    """An agent that transfers to ``target`` on its first run and just answers afterwards."""
    agent: ScriptAgent

    def step(ctx: RunContext) -> AgentEvent:
        if agent.runs == 1:
            return AgentEvent.transfer(target)
        return AgentEvent.of("back again")

    agent = ScriptAgent("A", "routing", step)
    return agent


async def test_transfer_to_a_sub_agent_runs_it_with_a_nested_run_path() -> None:
    a = ScriptAgent("A", "routing", act_transfer("B"), "never")
    b, c = ScriptAgent("B", "B here"), ScriptAgent("C", "C here")
    events = await run_events(with_sub_agents(a, [b, c]), "question")
    assert simplify_events(events) == ["A: routing", "A: [transfer -> B]", "B: B here"]
    assert [e.run_path for e in events] == [("A",), ("A",), ("A", "B")]
    assert a.reached == 1 and a.closed == 1  # nothing pulled after the transfer
    assert c.runs == 0
    # The target starts from history: the root input, then A's words as context.
    assert b.inputs == [[Message.user("question"), Message.user("For context: [A] said: routing.")]]


async def test_control_does_not_return_to_the_source_automatically() -> None:
    a = ScriptAgent("A", act_transfer("B"))
    b = ScriptAgent("B", "done")
    await run_events(with_sub_agents(a, [b]))
    assert (a.runs, b.runs) == (1, 1)


async def test_transfer_back_to_the_parent() -> None:
    a = _once("B")
    b = ScriptAgent("B", "working", act_transfer("A"))
    events = await run_events(with_sub_agents(a, [b]))
    assert simplify_events(events) == [
        "A: routing",
        "A: [transfer -> B]",
        "B: working",
        "B: [transfer -> A]",
        "A: routing",
        "A: back again",
    ]
    assert a.paths == [("A",), ("A", "B", "A")]
    assert b.paths == [("A", "B")]


async def test_transfer_down_two_levels() -> None:
    a = ScriptAgent("A", act_transfer("B"))
    b = ScriptAgent("B", act_transfer("C"))
    c = ScriptAgent("C", "deep")
    flow = with_sub_agents(a, [with_sub_agents(b, [c])])
    events = await run_events(flow)
    assert simplify_events(events)[-1] == "C: deep"
    assert c.paths == [("A", "B", "C")]


async def test_transfer_to_an_unknown_agent_is_an_exact_error() -> None:
    a = ScriptAgent("A", act_transfer("X"))
    events = await run_events(with_sub_agents(a, [ScriptAgent("B")]))
    errors = [e for e in events if e.error is not None]
    assert len(errors) == 1
    assert errors[0].error.message == (  # type: ignore[union-attr]
        "transfer failed: agent 'X' not found when transferring from 'A'; the agents it can "
        "transfer to: 'B'"
    )
    assert events[-1] is errors[0]
    with pytest.raises(RunError, match="transfer failed: agent 'X' not found"):
        await Runner(with_sub_agents(ScriptAgent("A", act_transfer("X")), [])).invoke("hi")


async def test_a_tools_transfer_to_an_unknown_agent_lists_the_agents_it_can_reach() -> None:
    @tool
    def escalate(ctx: ToolContext) -> str:
        """Escalate the case."""
        ctx.transfer("nobody")
        return "escalated"

    front = ReActAgent(
        "front",
        ScriptedModel([Reply(tool_calls=[tool_call("escalate", {})])]),
        tools=[escalate],
        sub_agents=[
            ReActAgent("billing", ScriptedModel(["billed"]), description="Bills."),
            ReActAgent("support", ScriptedModel(["helped"]), description="Helps."),
        ],
    )
    with pytest.raises(RunError) as caught:
        await Runner(front).invoke("help")
    assert caught.value.error.message == (
        "transfer failed: agent 'nobody' not found when transferring from 'front'; the agents it "
        "can transfer to: 'billing', 'support'"
    )


async def test_unknown_target_from_a_sub_agent_names_the_sub_agent() -> None:
    b = ScriptAgent("B", act_transfer("Nope"))
    events = await run_events(with_sub_agents(ScriptAgent("A", act_transfer("B")), [b]))
    assert events[-1].error is not None
    assert events[-1].error.message == (
        "transfer failed: agent 'Nope' not found when transferring from 'B'; the agents it can "
        "transfer to: 'A'"
    )


async def test_lookup_is_sub_agents_then_parent_only() -> None:
    # DESIGN.md: the name is looked up among the agent's sub-agents, then its parent; a sibling
    # is neither.
    b = ScriptAgent("B", act_transfer("C"))
    c = ScriptAgent("C", "sibling")
    events = await run_events(with_sub_agents(ScriptAgent("A", act_transfer("B")), [b, c]))
    assert events[-1].error is not None
    assert events[-1].error.message == (
        "transfer failed: agent 'C' not found when transferring from 'B'; the agents it can "
        "transfer to: 'A'"
    )
    assert c.runs == 0


async def test_allow_transfer_to_parent_false_blocks_the_way_back() -> None:
    b = ScriptAgent("B", act_transfer("A"))
    flow = with_sub_agents(ScriptAgent("A", act_transfer("B")), [b], allow_transfer_to_parent=False)
    events = await run_events(flow)
    assert events[-1].error is not None
    assert events[-1].error.message == (
        "transfer failed: agent 'A' not found when transferring from 'B'; the agents it can "
        "transfer to: none"
    )


def test_an_agent_has_one_parent() -> None:
    shared = ScriptAgent("shared")
    with_sub_agents(ScriptAgent("P1"), [shared])
    with pytest.raises(ValueError, match="parent"):
        with_sub_agents(ScriptAgent("P2"), [shared])


async def test_wiring_sub_agents_top_down_is_not_silently_lost() -> None:
    # ``with_sub_agents(B, [C])`` after B became A's sub-agent must either give B's node in A's
    # graph the sub-agent, or refuse clearly; silently building a second, unreachable flow for B
    # makes A -> B -> C fail at run time with "not found".
    a, b = ScriptAgent("A", act_transfer("B")), ScriptAgent("B", act_transfer("C"))
    c = ScriptAgent("C", "reached C")
    root = with_sub_agents(a, [b])
    try:
        with_sub_agents(b, [c])
    except ValueError:
        return  # refused clearly: fine
    events = await run_events(root)
    assert simplify_events(events)[-1] == "C: reached C"


class _Slotted:
    """An agent whose class has ``__slots__`` and no ``__dict__``: it takes no attribute the SDK
    could mark it with. ``__weakref__`` only so a test can watch it being collected."""

    __slots__ = ("__weakref__", "description", "name", "says")

    def __init__(self, name: str, says: str | None = None) -> None:
        self.name, self.description, self.says = name, "", says

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if self.says is None:
            yield AgentEvent.transfer("C")
        else:
            yield AgentEvent.of(self.says)


@dataclasses.dataclass(frozen=True)
class _Frozen:
    """An agent that refuses attributes another way: a frozen dataclass."""

    name: str
    description: str = ""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.of("frozen")


@pytest.mark.parametrize("make", [_Slotted, _Frozen])
def test_an_agent_that_takes_no_attributes_has_one_parent_too(make: Any) -> None:
    shared = make("shared")
    first = with_sub_agents(ScriptAgent("P1"), [shared])
    with pytest.raises(ValueError, match="already has parent 'P1'"):
        with_sub_agents(ScriptAgent("P2"), [shared])
    assert [node.name for node in first.sub_agents] == ["shared"]


async def test_an_agent_that_takes_no_attributes_can_be_wired_top_down() -> None:
    """Its node in the parent's graph is found again (the parent holds it), as for other agents."""
    b = _Slotted("B")
    root = with_sub_agents(ScriptAgent("A", act_transfer("B")), [b])
    with_sub_agents(b, [ScriptAgent("C", "reached C")])
    events = await run_events(root)
    assert simplify_events(events)[-1] == "C: reached C"


async def test_an_agent_that_takes_no_attributes_can_be_wired_bottom_up() -> None:
    b = _Slotted("B")
    flow = with_sub_agents(b, [ScriptAgent("C", "reached C")])
    root = with_sub_agents(ScriptAgent("A", act_transfer("B")), [b])
    assert root.sub_agents == [flow]
    events = await run_events(root)
    assert simplify_events(events)[-1] == "C: reached C"


def test_the_parent_of_an_agent_that_takes_no_attributes_is_not_kept_alive_by_it() -> None:
    """The links are weak: dropping the flows frees the agents (and their entries), as an
    attribute on the agent would."""
    child = _Slotted("child", "hi")
    with_sub_agents(_Slotted("parent", "hi"), [child])
    watched = weakref.ref(child)
    del child
    gc.collect()
    assert watched() is None
    again = _Slotted("child", "hi")  # may reuse the freed id: no stale parent
    with_sub_agents(ScriptAgent("other"), [again])


def test_a_refused_sub_agent_list_adopts_none_of_them() -> None:
    """Every sub-agent is checked (names, parents) before any is adopted: a refused list must not
    leave the earlier ones claimed by a parent that never got them."""
    first, owned = ScriptAgent("first"), ScriptAgent("owned")
    with_sub_agents(ScriptAgent("owner"), [owned])
    for subs in ([first, ScriptAgent("x"), ScriptAgent("x")], [first, owned]):
        with pytest.raises(ValueError):
            with_sub_agents(ScriptAgent("P"), subs)
    assert [n.name for n in with_sub_agents(ScriptAgent("Q"), [first]).sub_agents] == ["first"]


def test_sub_agent_names_must_be_unique() -> None:
    with pytest.raises(ValueError):
        with_sub_agents(ScriptAgent("A"), [ScriptAgent("B"), ScriptAgent("B")])


async def test_a_handled_transfer_does_not_end_the_enclosing_workflow() -> None:
    a = ScriptAgent("A", act_transfer("B"))
    b = ScriptAgent("B", "b")
    after = ScriptAgent("after", "next step")
    events = await run_events(SequentialAgent("seq", [with_sub_agents(a, [b]), after]))
    assert simplify_events(events) == ["A: [transfer -> B]", "B: b", "after: next step"]
    assert b.paths == [("seq", "A", "B")]
    assert after.inputs[0][-1] == Message.user("For context: [B] said: b.")


async def test_transfer_from_a_tool_of_a_react_agent() -> None:
    helper = ScriptAgent("helper", "helped", description="Helps with things")
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "helper"})])]
    )
    router = ReActAgent("router", model, sub_agents=[helper])
    events = await run_events(router)
    assert simplify_events(events)[-2:] == ["router: [transfer -> helper]", "helper: helped"]
    spec = next(t for t in model.requests[0].tools if t.name == "transfer_to_agent")
    assert spec.parameters["properties"]["agent_name"]["enum"] == ["helper"]
    assert "Helps with things" in spec.description


async def test_of_several_transfer_calls_in_one_turn_the_first_valid_one_is_made() -> None:
    """Models make parallel calls, sometimes two transfers at once. The conversation goes to the
    first valid one in the model's order; a misspelled one gets its usual error and the later
    valid ones are told they were ignored, so the history claims no transfer that did not
    happen."""
    billing = ScriptAgent("billing", "billing here", description="Invoices")
    support = ScriptAgent("support", "support here", description="Problems")
    calls = [
        tool_call("transfer_to_agent", {"agent_name": "biling"}, id="c1"),
        tool_call("transfer_to_agent", {"agent_name": "support"}, id="c2"),
        tool_call("transfer_to_agent", {"agent_name": "billing"}, id="c3"),
    ]
    router = ReActAgent("router", ScriptedModel([Reply(tool_calls=calls)]))
    root = with_sub_agents(router, [billing, support])

    events = await run_events(root)

    results = {
        e.output.message.tool_call_id: e.output.message
        for e in events
        if e.output and e.output.role == "tool"
    }
    assert "cannot transfer to 'biling'" in results["c1"].content
    assert results["c2"].content == "Transferred to agent 'support'"
    assert results["c3"].content == (
        "Error: ignored: one transfer per turn; the conversation goes to 'support', named by "
        "this turn's first transfer_to_agent call"
    )
    assert results["c3"].metadata["is_error"] is True
    assert simplify_events(events)[-2:] == [
        "router: [transfer -> support]",
        "support: support here",
    ]
    assert billing.runs == 0


async def test_tools_that_transfer_in_one_turn_the_first_call_wins_not_the_last_to_finish() -> None:
    @tool
    async def to_billing(ctx: ToolContext) -> str:
        """Hand over to billing at once."""
        ctx.transfer("billing")
        return "to billing"

    @tool
    async def to_support(ctx: ToolContext) -> str:
        """Think, then hand over to support."""
        await asyncio.sleep(0.02)  # finishes last: it used to win
        ctx.transfer("support")
        return "to support"

    billing, support = ScriptAgent("billing", "billing here"), ScriptAgent("support", "support")
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("to_billing", {}), tool_call("to_support", {})])]
    )
    router = ReActAgent("router", model, tools=[to_billing, to_support])

    events = await run_events(with_sub_agents(router, [billing, support]))

    assert simplify_events(events)[-2:] == [
        "router: [transfer -> billing]",
        "billing: billing here",
    ]
    assert support.runs == 0


async def test_a_transfer_made_before_a_pause_stands_after_the_resume() -> None:
    @tool(require_approval=True)
    async def escalate(ctx: ToolContext) -> str:
        """Escalate to billing, once approved."""
        ctx.transfer("billing")
        return "escalated"

    billing, support = ScriptAgent("billing", "billing here"), ScriptAgent("support", "support")
    calls = [tool_call("transfer_to_agent", {"agent_name": "support"}), tool_call("escalate", {})]
    router = ReActAgent("router", ScriptedModel([Reply(tool_calls=calls)]), tools=[escalate])
    runner = Runner(with_sub_agents(router, [billing, support]))

    paused = await runner.invoke("help")
    assert paused.checkpoint_id is not None
    done = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})

    assert simplify_events(done.events)[-2:] == [
        "router: [transfer -> support]",
        "support: support",
    ]
    assert billing.runs == 0


async def test_agents_transferring_in_a_cycle_stop_at_max_transfers() -> None:
    """Two agents whose models always hand over to the other: the run ends with one clear error
    once the chain has made more transfers than the flow allows, instead of running for ever."""

    def hand_over_to(name: str) -> ScriptedModel:
        call = tool_call("transfer_to_agent", {"agent_name": name})
        return ScriptedModel(lambda messages: Reply(tool_calls=[call]))

    pong = ReActAgent("pong", hand_over_to("ping"), description="pong")
    ping = ReActAgent("ping", hand_over_to("pong"), description="ping")
    root = with_sub_agents(ping, [pong], max_transfers=5)
    with pytest.raises(RunError, match="more than 5 transfers in one run") as raised:
        await Runner(root).invoke("go")
    transfers = [e for e in raised.value.events if e.action and e.action.transfer_to]
    assert len(transfers) == 6  # the sixth is refused
    with pytest.raises(ValueError, match="max_transfers"):
        with_sub_agents(ReActAgent("x", hand_over_to("y")), [], max_transfers=0)


async def test_max_transfers_counts_the_transfers_made_before_a_pause() -> None:
    """A chain paused after two transfers resumes with two made: the resumed chain started
    counting from 0 again, so a chain pausing on its way had ``max_transfers`` afresh at every
    pause. A checkpoint saved before the count was counts from the resume; a malformed count is
    refused before anything runs."""

    @tool(require_approval=True)
    def approve() -> str:
        """Approve."""
        return "approved"

    def pauses_then_hands_over(name: str) -> ScriptedModel:
        def reply(messages: list[Message]) -> Reply:
            if messages[-1].content == "approved":  # its approval came: hand over
                return Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": name})])
            return Reply(tool_calls=[tool_call("approve", {}, id="a1")])

        return ScriptedModel(reply)

    def runner(store: InMemoryCheckpointStore) -> Runner:
        ping = ReActAgent("ping", pauses_then_hands_over("pong"), tools=[approve])
        pong = ReActAgent("pong", pauses_then_hands_over("ping"), tools=[approve])
        return Runner(with_sub_agents(ping, [pong], max_transfers=2), store)

    store = InMemoryCheckpointStore()
    paused = await runner(store).invoke("go")  # ping pauses at once
    assert paused.checkpoint_id is not None
    # Each decision keyed by its point: plain data after a plain resume that paused for another
    # call's approval may be that decision sent again, and is refused (docs/interrupts.md).

    def approved(result: RunResult) -> dict[str, object]:
        assert result.interrupt is not None
        return {point: True for point in result.interrupt.point_ids}

    paused = await runner(store).invoke_resume(paused.checkpoint_id, True)  # 1: ping -> pong
    paused = await runner(store).invoke_resume(
        paused.checkpoint_id, approved(paused)
    )  # 2: pong -> ping
    assert paused.checkpoint_id is not None
    saved = await store.get(paused.checkpoint_id)
    assert saved is not None
    with pytest.raises(RunError, match="more than 2 transfers in one run"):
        await runner(store).invoke_resume(paused.checkpoint_id, approved(paused))  # 3: refused

    body = decode_checkpoint(saved, "x")
    assert body["states"]["agent:ping"]["flow"]["transfers"] == 2
    for bad in (-1, "2", 1.5):
        await store.put(paused.checkpoint_id, encode_checkpoint(_with_flow_count(body, bad)))
        with pytest.raises(RunError, match="'transfers' must be a whole number"):
            await runner(store).invoke_resume(paused.checkpoint_id, approved(paused))
    await store.put(paused.checkpoint_id, encode_checkpoint(_with_flow_count(body, None)))
    resumed = await runner(store).invoke_resume(
        paused.checkpoint_id, approved(paused)
    )  # counts from here
    assert resumed.interrupt is not None


def _with_flow_count(body: dict[str, Any], count: object) -> dict[str, Any]:
    """The checkpoint body with its flow's saved count replaced (None: left out, as saved
    before the count was)."""
    flow = {k: v for k, v in body["states"]["agent:ping"]["flow"].items() if k != "transfers"}
    if count is not None:
        flow["transfers"] = count
    slots = {**body["states"]["agent:ping"], "flow": flow}
    return {**body, "states": {**body["states"], "agent:ping": slots}}


async def test_a_transfer_from_a_workflow_step_nests_under_the_step_that_asked() -> None:
    """The flow wraps a sequence; its step ``a`` transfers: the target runs under ``a``'s path,
    and an unknown target names ``a`` as the source, not the sequence."""
    target = ScriptAgent("t", "t here")
    seq = SequentialAgent("S", [ScriptAgent("a", act_transfer("t"))])
    events = await run_events(with_sub_agents(seq, [target]))
    assert [e.run_path for e in events] == [("S", "a"), ("S", "a", "t")]

    lost = SequentialAgent("S2", [ScriptAgent("a", act_transfer("nowhere"))])
    events = await run_events(with_sub_agents(lost, [ScriptAgent("u")]))
    assert events[-1].error is not None
    assert events[-1].error.message == (
        "transfer failed: agent 'nowhere' not found when transferring from 'a'; the agents it "
        "can transfer to: 'u'"
    )
