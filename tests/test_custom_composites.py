"""Agents of your own that run other agents with their own ``ctx`` (a router, a retry wrapper):
a pause inside the child resumes through the child's ``resume(ctx)``, from a checkpoint read back
from SQLite by a new runner; a child started again with ``run()`` while its pause is being resumed
is refused, the checkpoint kept, rather than started over with the resume's answers handed to
the calls it makes anew (docs/composing.md, "Agents of your own that run other agents")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from conftest import ChatActor

import adk
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent


def _payer(paid: list[int], replies: list[Reply | str]) -> ReActAgent:
    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    return ReActAgent("payer", ScriptedModel(replies), tools=[pay])


def _call(amount: int) -> Reply:
    # One id for every call, as a server numbering each response's calls alike sends them.
    return Reply(tool_calls=[tool_call("pay", {"amount": amount}, id="call_1")])


class Wrapper(adk.BaseAgent):
    """Runs its child with its own ctx; ``resumes`` says whether it continues the child's pause
    through ``resume(ctx)`` (right) or starts it again with ``run`` (the mistake)."""

    def __init__(self, name: str, child: adk.Agent, *, resumes: bool) -> None:
        super().__init__(name)
        self.child = child
        self.resumes = resumes

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        resume = getattr(self.child, "resume", None)
        if self.resumes and ctx.resume is not None and resume is not None:
            events = resume(ctx)
        else:
            events = self.child.run(input, ctx)
        async for event in events:
            yield event


async def test_a_child_run_again_while_its_pause_resumes_is_refused_and_resume_continues_it(
    tmp_path: Path,
) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))
    paid: list[int] = []
    first = adk.Runner(
        Wrapper("router", _payer(paid, [_call(5)]), resumes=False), checkpoint_store=store
    )
    paused = await first.invoke("pay 5")
    assert paused.interrupt is not None
    assert paused.interrupt.point_ids == ["agent:router/tool:pay#call_1"]

    # A new runner (as in a new process) whose wrapper forgot resume(): its child would start
    # over, and the model now asks pay(500) under the id whose pay(5) the person approved.
    again = adk.Runner(
        Wrapper("router", _payer(paid, [_call(500), "done"]), resumes=False),
        checkpoint_store=store,
    )
    with pytest.raises(adk.RunError) as refused:
        await again.invoke_resume(paused.checkpoint_id, True)
    assert refused.value.error.type == "CheckpointError"
    assert refused.value.error.reason == "incompatible"
    assert refused.value.error.message.startswith(
        "ReActAgent 'payer' was started with run() where a pause at its place is being resumed "
        "(paused at 'agent:router/tool:pay#call_1'): an agent that runs other agents with its "
        "own ctx continues the one that paused with resume(ctx) when ctx.resume is not None"
    )
    assert paid == []  # before: [500], approved by nobody
    assert await store.get(paused.checkpoint_id) is not None

    fixed = adk.Runner(
        Wrapper("router", _payer(paid, ["done"]), resumes=True), checkpoint_store=store
    )
    done = await fixed.invoke_resume(paused.checkpoint_id, True)
    assert simplify_events(done.events) == ["router: [tool pay] paid 5", "router: done"]
    assert paid == [5]
    assert await store.get(paused.checkpoint_id) is None


class Echo(adk.BaseAgent):
    """Says it ran; then transfers to ``then``, if given (the first agent of a flow)."""

    def __init__(self, name: str, ran: list[str], then: str | None = None) -> None:
        super().__init__(name)
        self.ran = ran
        self.then = then

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        self.ran.append(self.name)
        yield adk.AgentEvent.of(f"{self.name} ran")
        if self.then is not None:
            yield adk.AgentEvent.transfer(self.then)


async def test_a_workflow_run_again_while_its_step_resumes_is_refused_before_rerunning_a_step() -> (
    None
):
    ran: list[str] = []
    paid: list[int] = []

    def wrapper(resumes: bool, replies: list[Reply | str]) -> Wrapper:
        steps = adk.SequentialAgent("steps", [Echo("notify", ran), _payer(paid, replies)])
        return Wrapper("router", steps, resumes=resumes)

    runner = adk.Runner(wrapper(False, [_call(5), "done"]))
    paused = await runner.invoke("pay 5")
    assert paused.interrupt is not None and ran == ["notify"]
    with pytest.raises(adk.RunError) as refused:
        await runner.invoke_resume(paused.checkpoint_id, True)
    assert refused.value.error.message.startswith("SequentialAgent 'steps' was started with run()")
    assert ran == ["notify"] and paid == []  # before: notify ran again, its event sent again

    runner = adk.Runner(wrapper(True, ["done"]), checkpoint_store=runner.checkpoint_store)
    done = await runner.invoke_resume(paused.checkpoint_id, True)
    assert simplify_events(done.events) == ["payer: [tool pay] paid 5", "payer: done"]
    assert ran == ["notify"] and paid == [5]


class AskThenPay(adk.BaseAgent):
    """Pauses on its own first, then runs its child with ``run``: the child has nothing paused."""

    def __init__(self, name: str, child: adk.Agent) -> None:
        super().__init__(name)
        self.child = child

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt("which amount?")
            return
        async for event in self.child.run(adk.AgentInput([adk.Message.user(ctx.resume.data)]), ctx):
            yield event


async def test_an_agents_own_pause_then_a_child_run_and_a_retry_after_resume_are_not_refused() -> (
    None
):
    paid: list[int] = []
    runner = adk.Runner(AskThenPay("asker", _payer(paid, [_call(7)])))
    asked = await runner.invoke("go")
    assert asked.interrupt is not None
    paused = await runner.invoke_resume(asked.checkpoint_id, "7")
    assert paused.interrupt is not None
    assert paused.interrupt.point_ids == ["agent:asker/tool:pay#call_1"]

    class Retry(adk.BaseAgent):
        """Resumes its child's pause, then runs it once more: nothing is paused below by then."""

        def __init__(self, name: str, child: adk.Agent) -> None:
            super().__init__(name)
            self.child = child

        async def run(
            self, input: adk.AgentInput, ctx: adk.RunContext
        ) -> AsyncIterator[adk.AgentEvent]:
            for attempt in range(2):
                child = self.child
                if attempt == 0 and ctx.resume is not None and isinstance(child, ReActAgent):
                    events = child.resume(ctx)
                else:
                    events = child.run(input, ctx)
                async for event in events:
                    yield event

    retry = adk.Runner(Retry("retry", _payer(paid, [_call(1), "first", _call(2)])))
    first = await retry.invoke("pay")
    resumed = await retry.invoke_resume(first.checkpoint_id, True)
    assert paid == [1]
    assert resumed.interrupt is not None  # the second attempt's call asks, under the same id
    assert resumed.interrupt.points[0].info["arguments"] == {"amount": 2}


async def test_an_action_agent_run_again_while_its_pause_resumes_is_refused() -> None:
    paid: list[int] = []

    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    def runner(resumes: bool, replies: list[Reply | str]) -> adk.Runner:
        resources = adk.Resources()
        resources.add_model("m", ScriptedModel(replies))
        resources.add_tool(pay)
        teller = ChatActor("teller", ["pay"], resources=resources)
        return adk.Runner(Wrapper("router", teller, resumes=resumes), checkpoint_store=store)

    store = InMemoryCheckpointStore()
    paused = await runner(False, [_call(5), "done"]).invoke("pay 5")
    assert paused.interrupt is not None
    with pytest.raises(adk.RunError) as refused:
        await runner(False, [_call(500), "done"]).invoke_resume(paused.checkpoint_id, True)
    assert refused.value.error.message.startswith("ChatActor 'teller' was started with run()")
    assert paid == []  # before: [500]

    done = await runner(True, ["done"]).invoke_resume(paused.checkpoint_id, True)
    assert done.text == "done" and paid == [5]


@pytest.mark.parametrize("kind", ["ParallelAgent", "LoopAgent", "FlowAgent"])
async def test_every_built_in_composite_run_again_while_its_pause_resumes_is_refused(
    kind: str,
) -> None:
    ran: list[str] = []
    paid: list[int] = []

    def child(replies: list[Reply | str]) -> adk.Agent:
        payer = _payer(paid, replies)
        if kind == "ParallelAgent":
            return adk.ParallelAgent("vote", [Echo("notify", ran), payer])
        if kind == "LoopAgent":
            return adk.LoopAgent("loop", [Echo("notify", ran), payer], max_iterations=1)
        return adk.with_sub_agents(Echo("notify", ran, then="payer"), [payer])

    def runner(resumes: bool, replies: list[Reply | str]) -> adk.Runner:
        return adk.Runner(
            Wrapper("router", child(replies), resumes=resumes), checkpoint_store=store
        )

    store = InMemoryCheckpointStore()
    paused = await runner(False, [_call(5), "done"]).invoke("pay 5")
    assert paused.interrupt is not None and ran == ["notify"]
    with pytest.raises(adk.RunError) as refused:
        await runner(False, [_call(500), "done"]).invoke_resume(paused.checkpoint_id, True)
    assert refused.value.error.message.startswith(f"{kind} ")
    assert (
        "was started with run() where a pause at its place is being resumed"
        in refused.value.error.message
    )
    assert ran == ["notify"] and paid == []

    done = await runner(True, ["done"]).invoke_resume(paused.checkpoint_id, True)
    assert simplify_events(done.events)[-2:] == ["payer: [tool pay] paid 5", "payer: done"]
    assert ran == ["notify"] and paid == [5]
