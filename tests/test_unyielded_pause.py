"""A custom agent that calls ``ctx.interrupt(...)`` without yielding the event (or awaits it) is
failed with an error naming ``yield ctx.interrupt(...)``, wherever it runs: at the root (``invoke``
and ``run`` drive it inline), as a workflow's step (the step runner), a parallel branch or a flow's
agent (``drive``). Before, the pause's event was made and dropped: the run went on past a pause
meant to wait for a person, with no pause, no error and no word of why."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    LoopAgent,
    ParallelAgent,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    with_sub_agents,
)
from adk.callbacks import Callbacks

FORGOT = (
    r"agent 'approver' called ctx\.interrupt\(\.\.\.\) but did not yield .*yield ctx\.interrupt"
)
AWAITED = r"agent 'approver' awaited ctx\.interrupt\(\.\.\.\).*write yield ctx\.interrupt\(\.\.\.\)"


class Forgot(BaseAgent):
    """Asks for an approval the way a newcomer porting a UserProxyAgent first wrote it."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        ctx.interrupt({"ask": "approve the payment?"})
        yield AgentEvent.of("approved")


class Awaited(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        await ctx.interrupt({"ask": "approve the payment?"})  # type: ignore[misc]
        yield AgentEvent.of("approved")


class Asks(BaseAgent):
    """Pauses as documented: the event is yielded."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt({"ask": "approve the payment?"})
        yield AgentEvent.of("approved")


class Records(BaseAgent):
    """A step after the approval: it must not run when the approval did not pause."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.runs = 0

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.runs += 1
        yield AgentEvent.of("paid")


def trees(asker: BaseAgent) -> dict[str, Callable[[], tuple[BaseAgent, Records | None]]]:
    """The places a custom agent runs in, each with a step after it (when there is one)."""

    def sequence() -> tuple[BaseAgent, Records | None]:
        pay = Records("pay")
        return SequentialAgent("steps", [asker, pay]), pay

    def loop() -> tuple[BaseAgent, Records | None]:
        pay = Records("pay")
        return LoopAgent("loop", [asker, pay], max_iterations=1), pay

    def parallel() -> tuple[BaseAgent, Records | None]:
        return ParallelAgent("both", [asker, Records("other")]), None

    def flow() -> tuple[BaseAgent, Records | None]:
        return with_sub_agents(asker, [Records("helper")]), None

    return {
        "root": lambda: (asker, None),
        "sequence": sequence,
        "loop": loop,
        "parallel": parallel,
        "flow": flow,
    }


PLACES = list(trees(Forgot("approver")))


@pytest.mark.parametrize("place", PLACES)
async def test_a_pause_made_and_not_yielded_fails_the_agent_wherever_it_runs(place: str) -> None:
    agent, after = trees(Forgot("approver"))[place]()
    with pytest.raises(RunError, match=FORGOT) as raised:
        await Runner(agent).invoke("Pay ACME.")
    assert isinstance(raised.value.__cause__, RuntimeError)
    if after is not None:
        assert after.runs == 0  # the payment after the approval never ran
    # ``run`` drives a root agent on another path than ``invoke``: the same error event.
    agent, _ = trees(Forgot("approver"))[place]()
    events = [event async for event in Runner(agent).run("Pay ACME.")]
    errors = [event for event in events if event.error is not None]
    assert len(errors) == 1 and errors[0].agent_name == "approver"
    assert errors[0].error is not None and "yield ctx.interrupt(...)" in errors[0].error.message
    assert all(event.interrupted is None for event in events)


@pytest.mark.parametrize("place", PLACES)
async def test_an_awaited_pause_is_a_type_error_naming_yield(place: str) -> None:
    agent, _ = trees(Awaited("approver"))[place]()
    with pytest.raises(RunError, match=AWAITED) as raised:
        await Runner(agent).invoke("Pay ACME.")
    error = raised.value.__cause__
    assert isinstance(error, TypeError)
    assert "can't be used in 'await' expression" in str(error.__cause__)  # Python's own, kept


@pytest.mark.parametrize("place", PLACES)
async def test_a_yielded_pause_pauses_and_resumes_as_before(place: str) -> None:
    agent, after = trees(Asks("approver"))[place]()
    runner = Runner(agent)
    paused = await runner.invoke("Pay ACME.")
    assert paused.interrupt is not None
    if after is not None:
        assert after.runs == 0
    resumed = await runner.invoke_resume(paused.interrupt.checkpoint_id, True)
    assert resumed.interrupt is None
    if after is not None:
        assert after.runs == 1


async def test_the_check_holds_with_agent_callbacks_and_leaves_other_type_errors_alone() -> None:
    class Seen(Callbacks):
        def __init__(self) -> None:
            self.errors: list[str] = []

        def after_agent(self, agent: object, ctx: RunContext, error: object) -> None:
            if error is not None:
                self.errors.append(str(getattr(error, "message", "")))

    seen = Seen()
    with pytest.raises(RunError, match=FORGOT):
        await Runner(Forgot("approver"), callbacks=[seen]).invoke("Pay ACME.")
    assert len(seen.errors) == 1 and "yield ctx.interrupt(...)" in seen.errors[0]

    class Fails(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            event = ctx.interrupt("approve?")
            yield AgentEvent.of(event.agent_name + 1)  # type: ignore[operator]  # its own slip

    with pytest.raises(RunError, match="can only concatenate str") as raised:
        await Runner(Fails("approver")).invoke("Pay ACME.")
    assert "ctx.interrupt" not in str(raised.value)


class ForgotThenEnds(BaseAgent):
    """Makes the pause, then ends with an exit or a transfer in its place: an event that stops
    the agent as the pause would have, so the agent never reaches its end (where the check for
    an unyielded pause was made) and the run went on, or ended, as if it had never asked."""

    def __init__(self, name: str, ending: str) -> None:
        super().__init__(name)
        self.ending = ending

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        ctx.interrupt({"ask": "approve the payment?"})
        if self.ending == "exit":
            yield AgentEvent.exit()
        else:
            yield AgentEvent.transfer("helper")


@pytest.mark.parametrize("ending", ["exit", "transfer"])
@pytest.mark.parametrize("place", PLACES)
async def test_a_pause_made_and_replaced_by_an_exit_or_transfer_fails_the_agent(
    place: str, ending: str
) -> None:
    agent, after = trees(ForgotThenEnds("approver", ending))[place]()
    with pytest.raises(RunError, match=FORGOT) as raised:
        await Runner(agent).invoke("Pay ACME.")
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert f"ended with {'an exit' if ending == 'exit' else 'a transfer'}" in str(raised.value)
    if after is not None:
        assert after.runs == 0
    agent, _ = trees(ForgotThenEnds("approver", ending))[place]()
    events = [event async for event in Runner(agent).run("Pay ACME.")]
    errors = [event for event in events if event.error is not None]
    assert len(errors) == 1 and errors[0].agent_name == "approver"
    # The failure replaces the event that ended the agent: no exit or transfer reached anyone.
    assert all(event.action is None for event in events)


async def test_a_yielded_pause_then_on_resume_an_exit_is_no_unyielded_pause() -> None:
    """A resumed agent that ends with an exit made no pause in the resumed run: it exits."""

    class AsksThenExits(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                yield ctx.interrupt({"ask": "approve the payment?"})
            yield AgentEvent.exit()

    pay = Records("pay")
    runner = Runner(SequentialAgent("steps", [AsksThenExits("approver"), pay]))
    paused = await runner.invoke("Pay ACME.")
    assert paused.interrupt is not None
    resumed = await runner.invoke_resume(paused.interrupt.checkpoint_id, True)
    assert resumed.interrupt is None and pay.runs == 0
    assert resumed.events[-1].action is not None and resumed.events[-1].action.exit
