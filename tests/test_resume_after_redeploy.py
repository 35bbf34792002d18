"""Resuming a paused run after the service was redeployed with changed code.

A person may take days to answer, and the service is redeployed meanwhile: the agent tree that
resumes is not the one that paused. Each test pauses a run with one tree, saved in a real SQLite
store, and resumes it with another, as a new process would. Where the saved state still means the
same thing (steps or branches added or removed around the paused one, a compatible tool change),
the resume continues exactly where the run paused, delivers the person's answer there, and runs no
finished step again. Where it does not (the paused step, branch or action gone or renamed, a step
that ran moved after the paused one, a paused call whose arguments no longer fit its tool, a loop
or agent past its lowered limit), the resume is refused with a ``CheckpointError`` that names what
no longer matches, before anything runs, and the checkpoint stays stored: the rolled-back tree
resumes it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint

import adk
from adk import (
    Agent,
    AgentEvent,
    AgentInput,
    BaseAgent,
    CheckpointError,
    LoopAgent,
    ParallelAgent,
    Role,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
)
from adk.actions import ActionAgent, ActionContext, Event, InputEvent, OutputEvent, action
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, new_executor, new_planner, new_replanner

LOG: list[tuple[Any, ...]] = []


@pytest.fixture(autouse=True)
def _clear_log() -> None:
    LOG.clear()


class Step(BaseAgent):
    """Notes that it ran, and what resume data it was given."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        LOG.append(("ran", self.name))
        yield AgentEvent.of(f"{self.name} done")


class Ask(BaseAgent):
    """Pauses with a question; on resume notes the answer."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            LOG.append(("asked", self.name))
            yield ctx.interrupt(f"{self.name}?")
            return
        LOG.append(("answered", self.name, ctx.resume.data))
        yield AgentEvent.of(f"{self.name}: {ctx.resume.data}")


class Redeploy:
    """A run paused by one agent tree in a SQLite file, resumed by others as new processes would."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def pause(self, tree: Agent) -> list[str]:
        async with SQLiteCheckpointStore(self.path) as store:
            result = await Runner(tree, checkpoint_store=store).invoke("go", checkpoint_id="c")
        assert result.interrupt is not None
        LOG.clear()
        return result.interrupt.point_ids

    async def resume(self, tree: Agent, data: Any = "yes") -> adk.RunResult:
        async with SQLiteCheckpointStore(self.path) as store:
            return await Runner(tree, checkpoint_store=store).invoke_resume("c", data)

    async def refused(self, tree: Agent, data: Any = "yes") -> str:
        """Resume with ``tree``, which must be refused before anything ran; the error's text."""
        with pytest.raises((RunError, CheckpointError)) as raised:
            await self.resume(tree, data)
        error = raised.value
        if isinstance(error, RunError):
            assert isinstance(error.__cause__, CheckpointError), error
            error = error.__cause__
        assert [entry for entry in LOG if entry[0] != "asked"] == [], "something ran"
        assert await self.stored() is not None, "a refused resume lost the checkpoint"
        LOG.clear()
        return str(error)

    async def stored(self) -> bytes | None:
        async with SQLiteCheckpointStore(self.path) as store:
            return await store.get("c")

    async def edit(self, change: Callable[[dict[str, Any]], None]) -> None:
        """Rewrite the stored checkpoint's body (as an older pyadk would have written it)."""
        async with (
            SQLiteCheckpointStore(self.path) as store,
            rewrite_checkpoint(store, "c") as body,
        ):
            change(body)


@pytest.fixture
def deploy(tmp_path: Path) -> Redeploy:
    return Redeploy(tmp_path / "checkpoints.db")


def seq(*steps: Agent) -> SequentialAgent:
    return SequentialAgent("flow", list(steps))


# -- SequentialAgent ---------------------------------------------------------------------------


async def test_a_step_added_before_the_paused_one_neither_runs_nor_reruns_an_earlier_step(
    deploy: Redeploy,
) -> None:
    # The saved index (1) pointed at "a" in the new tree: "a" ran a second time and "b" asked
    # its question again, the answer dropped.
    await deploy.pause(seq(Step("a"), Ask("b"), Step("c")))

    result = await deploy.resume(seq(Step("new"), Step("a"), Ask("b"), Step("c")))

    assert LOG == [("answered", "b", "yes"), ("ran", "c")]
    assert result.interrupt is None and await deploy.stored() is None


async def test_a_step_removed_before_the_paused_one_still_resumes_the_paused_one(
    deploy: Redeploy,
) -> None:
    # The saved index (1) pointed at "c": "b" never got its answer, and the run finished and
    # deleted the checkpoint.
    await deploy.pause(seq(Step("a"), Ask("b"), Step("c")))

    await deploy.resume(seq(Ask("b"), Step("c")))

    assert LOG == [("answered", "b", "yes"), ("ran", "c")]


async def test_a_step_added_after_the_paused_one_runs(deploy: Redeploy) -> None:
    await deploy.pause(seq(Step("a"), Ask("b"), Step("c")))

    await deploy.resume(seq(Step("a"), Ask("b"), Step("new"), Step("c")))

    assert LOG == [("answered", "b", "yes"), ("ran", "new"), ("ran", "c")]


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param(lambda: seq(Step("a"), Step("c")), id="removed"),
        pytest.param(lambda: seq(Step("a"), Ask("b2"), Step("c")), id="renamed"),
        pytest.param(lambda: seq(Step("a"), seq(Ask("b")), Step("c")), id="wrapped"),
    ],
)
async def test_the_paused_step_gone_is_refused_and_the_rolled_back_tree_resumes(
    deploy: Redeploy, changed: Callable[[], Agent]
) -> None:
    # Removed, the run went on at "c" and finished: the answer dropped and the checkpoint
    # deleted. Renamed or wrapped, the new step asked afresh and the checkpoint was overwritten.
    await deploy.pause(seq(Step("a"), Ask("b"), Step("c")))

    error = await deploy.refused(changed())

    assert "workflow 'flow'" in error and "the step that paused, 'b'" in error
    await deploy.resume(seq(Step("a"), Ask("b"), Step("c")))
    assert LOG == [("answered", "b", "yes"), ("ran", "c")]


async def test_a_step_that_ran_moved_after_the_paused_one_is_refused(deploy: Redeploy) -> None:
    # Resumed at the saved index, "a" ran again and "b" never got its answer.
    await deploy.pause(seq(Step("a"), Ask("b"), Step("c")))

    error = await deploy.refused(seq(Ask("b"), Step("a"), Step("c")))

    assert "'a' ran before step 'b' paused and now come after it" in error


async def test_steps_reordered_before_the_paused_one_resume(deploy: Redeploy) -> None:
    await deploy.pause(seq(Step("a"), Step("x"), Ask("b"), Step("c")))

    await deploy.resume(seq(Step("x"), Step("a"), Ask("b"), Step("c")))

    assert LOG == [("answered", "b", "yes"), ("ran", "c")]


# -- LoopAgent ---------------------------------------------------------------------------------


def loop(*steps: Agent, max_iterations: int | None = 3) -> LoopAgent:
    return LoopAgent("loop", list(steps), max_iterations=max_iterations)


class AskOnce(BaseAgent):
    """Pauses in the loop's second iteration only."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        seen = ctx.session.get("seen", 0)
        ctx.session["seen"] = seen + 1
        if seen == 1 and ctx.resume is None:
            LOG.append(("asked", self.name))
            yield ctx.interrupt("again?")
            return
        LOG.append(("answered", self.name, ctx.resume.data) if ctx.resume else ("ran", self.name))
        yield AgentEvent.of(self.name)


async def test_a_loop_step_added_before_the_paused_one_does_not_rerun_a_step(
    deploy: Redeploy,
) -> None:
    await deploy.pause(loop(Step("a"), AskOnce("b")))

    await deploy.resume(loop(Step("new"), Step("a"), AskOnce("b")))

    # The paused iteration (the second) goes on after "b"; the third runs the new steps.
    assert LOG == [("answered", "b", "yes"), ("ran", "new"), ("ran", "a"), ("ran", "b")]


async def test_max_iterations_lowered_below_the_paused_iteration_is_refused(
    deploy: Redeploy,
) -> None:
    await deploy.pause(loop(Step("a"), AskOnce("b")))

    error = await deploy.refused(loop(Step("a"), AskOnce("b"), max_iterations=1))

    assert "workflow 'loop'" in error and "paused in iteration 2" in error
    assert "max_iterations of 1" in error
    await deploy.resume(loop(Step("a"), AskOnce("b"), max_iterations=2))
    assert LOG == [("answered", "b", "yes")]


# -- ParallelAgent -----------------------------------------------------------------------------


def par(*branches: Agent) -> SequentialAgent:
    return seq(Step("first"), ParallelAgent("both", list(branches)))


async def test_a_branch_added_runs_and_the_finished_one_does_not_run_again(
    deploy: Redeploy,
) -> None:
    # The finished branch was saved as index 0, which the new branch took: "a" ran again and
    # "new" was taken for finished.
    await deploy.pause(par(Step("a"), Ask("b")))

    await deploy.resume(par(Step("new"), Step("a"), Ask("b")))

    assert sorted(LOG) == [("answered", "b", "yes"), ("ran", "new")]


async def test_a_finished_branch_removed_still_resumes_the_paused_one(deploy: Redeploy) -> None:
    # Index 0 (finished) now named "b": the paused branch was taken for finished, its answer
    # dropped, and the checkpoint deleted.
    await deploy.pause(par(Step("a"), Ask("b")))

    await deploy.resume(par(Ask("b")))

    assert LOG == [("answered", "b", "yes")]


async def test_branches_reordered_resume_the_paused_one_only(deploy: Redeploy) -> None:
    await deploy.pause(par(Step("a"), Ask("b")))

    await deploy.resume(par(Ask("b"), Step("a")))

    assert LOG == [("answered", "b", "yes")]


async def test_the_paused_branch_renamed_is_refused(deploy: Redeploy) -> None:
    await deploy.pause(par(Step("a"), Ask("b")))

    error = await deploy.refused(par(Step("a"), Ask("b2")))

    assert "workflow 'both'" in error and "the branch(es) that paused, 'b'" in error
    await deploy.resume(par(Step("a"), Ask("b")))
    assert LOG == [("answered", "b", "yes")]


async def test_a_sequence_turned_parallel_is_refused(deploy: Redeploy) -> None:
    # The sequence's state read as a parallel one had no finished branches: "a" ran again.
    await deploy.pause(SequentialAgent("flow", [Step("a"), Ask("b")]))

    error = await deploy.refused(ParallelAgent("flow", [Step("a"), Ask("b")]))

    assert "workflow 'flow'" in error and "'finished'" in error


async def test_a_parallel_checkpoint_without_branch_names_resumes_by_position(
    deploy: Redeploy,
) -> None:
    # Written before the names were saved: read as before.
    await deploy.pause(par(Step("a"), Ask("b")))
    await deploy.edit(lambda body: body["states"]["agent:flow/agent:both"][""].pop("branches"))

    await deploy.resume(par(Step("a"), Ask("b")))

    assert LOG == [("answered", "b", "yes")]


# -- nesting -----------------------------------------------------------------------------------


def nested(inner_steps: list[Agent], outer_before: list[Agent]) -> LoopAgent:
    inner = SequentialAgent("inner", inner_steps)
    branches = ParallelAgent("branches", [Step("side"), inner])
    return LoopAgent("outer", [*outer_before, branches], max_iterations=1)


async def test_steps_added_at_every_level_of_a_nesting_resume_the_paused_step(
    deploy: Redeploy,
) -> None:
    await deploy.pause(nested([Step("x"), Ask("y")], [Step("pre")]))

    changed = nested([Step("x0"), Step("x"), Ask("y"), Step("z")], [Step("pre0"), Step("pre")])
    await deploy.resume(changed)

    assert LOG == [("answered", "y", "yes"), ("ran", "z")]


async def test_a_step_moved_inside_a_nesting_is_refused_by_the_workflow_that_holds_it(
    deploy: Redeploy,
) -> None:
    await deploy.pause(nested([Step("x"), Ask("y")], [Step("pre")]))

    error = await deploy.refused(nested([Ask("y"), Step("x")], [Step("pre")]))

    assert "workflow 'inner'" in error and "'x' ran before step 'y' paused" in error


# -- ActionAgent -------------------------------------------------------------------------------


class Publisher(ActionAgent):
    @action(InputEvent)
    def log(self, event: InputEvent, ctx: ActionContext) -> None:
        LOG.append(("ran", "log"))

    @action(InputEvent)
    def publish(self, event: InputEvent, ctx: ActionContext) -> None:
        if ctx.resume is None:
            raise adk.Interrupt("publish?")
        LOG.append(("answered", "publish", ctx.resume.data))
        ctx.send_event(OutputEvent(output=f"{event.input}: {ctx.resume.data}"))


class AuditedPublisher(ActionAgent):
    """``Publisher`` with an action added before the paused one (actions run in order)."""

    @action(InputEvent)
    def audit(self, event: InputEvent, ctx: ActionContext) -> None:
        LOG.append(("ran", "audit"))

    @action(InputEvent)
    def log(self, event: InputEvent, ctx: ActionContext) -> None:
        LOG.append(("ran", "log"))

    @action(InputEvent)
    def publish(self, event: InputEvent, ctx: ActionContext) -> None:
        if ctx.resume is None:
            raise adk.Interrupt("publish?")
        LOG.append(("answered", "publish", ctx.resume.data))
        ctx.send_event(OutputEvent(output=f"{event.input}: {ctx.resume.data}"))


class RenamedPublisher(ActionAgent):
    @action(InputEvent)
    def log(self, event: InputEvent, ctx: ActionContext) -> None:
        LOG.append(("ran", "log"))

    @action(InputEvent)
    def release(self, event: InputEvent, ctx: ActionContext) -> None:
        LOG.append(("ran", "release"))


class ReorderedPublisher(ActionAgent):
    @action(InputEvent)
    def publish(self, event: InputEvent, ctx: ActionContext) -> None:
        LOG.append(("ran", "publish"))

    @action(InputEvent)
    def log(self, event: InputEvent, ctx: ActionContext) -> None:
        LOG.append(("ran", "log"))


async def test_an_action_added_before_the_paused_one_does_not_rerun_an_earlier_action(
    deploy: Redeploy,
) -> None:
    # The saved listener index (1) pointed at "log" in the new agent: it ran again, and
    # "publish" asked afresh, the answer dropped.
    await deploy.pause(Publisher("p"))

    result = await deploy.resume(AuditedPublisher("p"))

    assert LOG == [("answered", "publish", "yes")] and result.text == "go: yes"


@pytest.mark.parametrize(
    ("changed", "complaint"),
    [
        (RenamedPublisher, "the action that paused, 'publish', no longer takes InputEvent"),
        (ReorderedPublisher, "'log' ran on the event before action 'publish' paused"),
    ],
)
async def test_the_paused_action_gone_or_moved_is_refused(
    deploy: Redeploy, changed: type[ActionAgent], complaint: str
) -> None:
    await deploy.pause(Publisher("p"))

    error = await deploy.refused(changed("p"))

    assert "agent 'p'" in error and complaint in error
    assert (await deploy.resume(Publisher("p"))).text == "go: yes"


async def test_an_action_checkpoint_without_action_names_resumes_by_position(
    deploy: Redeploy,
) -> None:
    await deploy.pause(Publisher("p"))
    await deploy.edit(lambda body: body["states"]["agent:p"][""].pop("actions"))

    assert (await deploy.resume(Publisher("p"))).text == "go: yes"


def _spend_agent(module: str, also: str | None = None) -> ActionAgent:
    """An agent whose paused action runs on a ``Spend`` event of its own, the class defined in
    ``module`` (a job run as a script defines it in ``__main__``; the service that resumes it
    imports the script as a module). ``also``: a second ``Spend`` class, of that module, which
    the agent takes too."""

    class Spend(Event):
        amount: int

    Spend.__module__, Spend.__qualname__ = module, "Spend"
    taken: list[type[Event]] = [Spend]
    if also is not None:

        class Other(Event):
            amount: int

        Other.__module__, Other.__qualname__ = also, "Spend"
        taken.append(Other)

    @action(InputEvent)
    def ask(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(Spend(amount=120))

    @action(*taken)
    def approve(event: Any, ctx: ActionContext) -> None:
        if ctx.resume is None:
            raise adk.Interrupt({"approve": event.amount})
        ctx.send_event(OutputEvent(output=f"{event.amount}: {ctx.resume.data}"))

    return ActionAgent("spender", actions=[ask, approve])


async def test_an_event_class_under_another_module_resumes_by_its_name(deploy: Redeploy) -> None:
    """A pause saves its events by module and class name: one paused by a job run as a script
    (``__main__.Spend``) was refused by the service that imports the script (``jobs.Spend``),
    "an event of type '__main__.Spend', which none of its actions takes", though it takes
    ``Spend``; so was a module moved in a redeploy. The one class of that name the agent takes
    is found; two are refused, naming both."""
    await deploy.pause(_spend_agent("__main__"))

    error = await deploy.refused(_spend_agent("jobs", also="ledger"))
    assert "'__main__.Spend'" in error
    assert "its classes of that name, jobs.Spend and ledger.Spend, are more than one" in error

    result = await deploy.resume(_spend_agent("jobs"))
    assert result.text == "120: yes"


async def test_another_class_of_that_name_with_other_fields_is_refused(deploy: Redeploy) -> None:
    """Reviewed (rv3): the one class of the saved name, under another module, is taken whatever
    it is; a different class that happens to share the name (its fields another's) is not read
    as it: the event's fields fail its validation (events forbid unknown fields), so the resume
    is refused naming the event, nothing runs and the checkpoint is kept. No change needed."""
    await deploy.pause(_spend_agent("__main__"))

    class Spend(Event):
        total: str

    Spend.__module__, Spend.__qualname__ = "travel", "Spend"

    @action(InputEvent)
    def ask(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(Spend(total="x"))

    @action(Spend)
    def approve(event: Any, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.total))

    error = await deploy.refused(ActionAgent("spender", actions=[ask, approve]))
    assert "the '__main__.Spend' event is invalid" in error, error
    result = await deploy.resume(_spend_agent("jobs"))
    assert result.text == "120: yes"


# -- tools awaiting approval -------------------------------------------------------------------


def _payer(pay: adk.FunctionTool, max_iterations: int = 20) -> ReActAgent:
    def reply(messages: list[adk.Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"model saw: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay", {"payee": "ACME", "amount_cents": 120})])

    return ReActAgent("payer", ScriptedModel(reply), tools=[pay], max_iterations=max_iterations)


@adk.tool(require_approval=True)
def pay(payee: str, amount_cents: int) -> str:
    """Send money."""
    LOG.append(("paid", payee, amount_cents))
    return f"sent {amount_cents} to {payee}"


@adk.tool(require_approval=True, name="pay")
def pay_renamed_parameter(payee: str, amount: int = 100) -> str:
    """Send money (``amount_cents`` renamed, with a default)."""
    LOG.append(("paid", payee, amount))
    return f"sent {amount} to {payee}"


@adk.tool(require_approval=True, name="pay")
def pay_with_memo(payee: str, amount_cents: int, memo: str = "") -> str:
    """Send money (a parameter added, with a default)."""
    LOG.append(("paid", payee, amount_cents))
    return f"sent {amount_cents} to {payee}"


@adk.tool(name="pay")
def pay_unguarded(payee: str, amount_cents: int) -> str:
    """Send money (no longer requires approval)."""
    LOG.append(("paid", payee, amount_cents))
    return f"sent {amount_cents} to {payee}"


async def test_a_paused_call_whose_arguments_no_longer_fit_its_tool_is_refused(
    deploy: Redeploy,
) -> None:
    # The approved call came back to the model as "invalid arguments": the approval dropped,
    # the checkpoint deleted.
    await deploy.pause(_payer(pay))

    error = await deploy.refused(_payer(pay_renamed_parameter), {"approved": True})

    assert "'agent:payer/tool:pay#call_1'" in error and "no longer fit tool 'pay'" in error
    assert "amount_cents" in error
    await deploy.resume(_payer(pay), {"approved": True})
    assert LOG == [("paid", "ACME", 120)]


async def test_a_compatible_parameter_change_resumes_the_approved_call(deploy: Redeploy) -> None:
    await deploy.pause(_payer(pay))

    result = await deploy.resume(_payer(pay_with_memo), {"approved": True})

    assert LOG == [("paid", "ACME", 120)] and result.text == "model saw: sent 120 to ACME"


async def test_a_denial_holds_when_the_tool_no_longer_requires_approval(
    deploy: Redeploy,
) -> None:
    # The tool without the flag ignored the decision: the denied payment was made.
    await deploy.pause(_payer(pay))

    result = await deploy.resume(_payer(pay_unguarded), {"approved": False, "reason": "no"})

    assert LOG == []
    assert result.text == "model saw: Error: the call to 'pay' was not approved: no"


async def test_an_approval_holds_when_the_tool_no_longer_requires_approval(
    deploy: Redeploy,
) -> None:
    await deploy.pause(_payer(pay))

    await deploy.resume(_payer(pay_unguarded), {"approved": True})

    assert LOG == [("paid", "ACME", 120)]


@adk.tool(require_approval=True, name="book")
def book(seat_for: str, ctx: adk.ToolContext) -> str:
    """Book a seat once approved; asks which seat."""
    if ctx.resume is None or ctx.resume.state is None:
        raise adk.Interrupt("window or aisle?", state={"for": seat_for})
    LOG.append(("booked", ctx.resume.state["for"], ctx.resume.data))
    return f"booked {ctx.resume.data}"


@adk.tool(name="book")
def book_unguarded(seat_for: str, ctx: adk.ToolContext) -> str:
    """Book a seat; asks which seat."""
    if ctx.resume is None:
        raise adk.Interrupt("window or aisle?", state={"for": seat_for})
    LOG.append(("booked", ctx.resume.state["for"], ctx.resume.data))
    return f"booked {ctx.resume.data}"


def _booker(tool: adk.FunctionTool) -> ReActAgent:
    def reply(messages: list[adk.Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"model saw: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("book", {"seat_for": "Ann"})])

    return ReActAgent("booker", ScriptedModel(reply), tools=[tool])


async def test_an_approved_call_that_pauses_on_its_own_gets_its_answer(deploy: Redeploy) -> None:
    # The answer to the tool's own question ("window") was read as the approval decision: the
    # call came back "not approved", though it had been approved.
    await deploy.pause(_booker(book))
    paused = await deploy.resume(_booker(book), {"approved": True})
    assert paused.interrupt is not None and paused.interrupt.points[0].info == "window or aisle?"

    done = await deploy.resume(_booker(book), "window")

    assert LOG == [("booked", "Ann", "window")] and done.text == "model saw: booked window"


async def test_a_call_paused_unapproved_is_refused_once_the_tool_requires_approval(
    deploy: Redeploy,
) -> None:
    # The tool paused on its own question; the redeployed tool requires approval, which this
    # call never got: running it with the answer would skip the approval.
    await deploy.pause(_booker(book_unguarded))

    error = await deploy.refused(_booker(book), "window")

    assert "tool 'book' requires approval" in error and "without having been approved" in error
    await deploy.resume(_booker(book_unguarded), "window")
    assert LOG == [("booked", "Ann", "window")]


# -- ReActAgent limits -------------------------------------------------------------------------


@adk.tool
def balance() -> str:
    """The account's balance."""
    return "500"


def _checking_payer(max_iterations: int) -> ReActAgent:
    """Checks the balance (one model call), then pays (a second): pauses after 2 model calls."""

    def reply(messages: list[adk.Message]) -> Reply:
        last = messages[-1]
        if last.role != Role.TOOL:
            return Reply(tool_calls=[tool_call("balance", {}, id="call_0")])
        if last.name == "balance":
            return Reply(tool_calls=[tool_call("pay", {"payee": "ACME", "amount_cents": 120})])
        return Reply(text=f"model saw: {last.content}")

    model = ScriptedModel(reply)
    return ReActAgent("payer", model, tools=[balance, pay], max_iterations=max_iterations)


async def test_max_iterations_lowered_below_the_paused_model_calls_is_refused(
    deploy: Redeploy,
) -> None:
    # The approved payment was made, then the run failed on the limit with the checkpoint kept:
    # resuming again after raising the limit paid a second time.
    await deploy.pause(_checking_payer(max_iterations=5))

    error = await deploy.refused(_checking_payer(max_iterations=1), {"approved": True})

    assert "agent 'payer'" in error and "paused after 2 model calls" in error
    assert "max_iterations of 1" in error
    result = await deploy.resume(_checking_payer(max_iterations=3), {"approved": True})
    assert LOG == [("paid", "ACME", 120)] and result.text == "model saw: sent 120 to ACME"


# -- what no composite can see ------------------------------------------------------------------


class AlwaysAsk(BaseAgent):
    """Asks whenever it runs, resumed or not."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        LOG.append(("asked", self.name))
        yield ctx.interrupt(f"{self.name}?")


async def test_a_workflow_replaced_by_a_plain_agent_of_its_name_keeps_the_checkpoint(
    deploy: Redeploy,
) -> None:
    # The plain agent ran, ignoring the resume, the run finished and the checkpoint was deleted:
    # the answer addressed to "b" inside the workflow was never delivered. (Then the plain agent
    # ran before the end-of-run check refused the resume; now the check before the run refuses
    # it: a plain agent pauses only at its own address.)
    await deploy.pause(seq(Step("a"), SequentialAgent("w", [Ask("b")]), Step("c")))

    error = await deploy.refused(seq(Step("a"), Step("w"), Step("c")))

    assert "cannot reach the paused point(s) ['agent:flow/agent:w/agent:b']" in error
    assert "agent 'w' at 'agent:flow/agent:w' is a Step, which holds no agents" in error
    await deploy.resume(seq(Step("a"), SequentialAgent("w", [Ask("b")]), Step("c")))
    assert LOG == [("answered", "b", "yes"), ("ran", "c")]


def _front(*sub_agents: ReActAgent) -> ReActAgent:
    transfer = Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "payer"})])
    return ReActAgent("front", ScriptedModel([transfer], cycle=True), sub_agents=sub_agents)


async def test_a_react_agent_built_without_the_sub_agent_that_paused_says_so(
    deploy: Redeploy,
) -> None:
    # A second script that rebuilt the front desk without its sub_agents= was refused with "the
    # checkpoint does not fit agent 'front': the checkpoint holds no saved state for it", which
    # named neither the paused point nor the sub-agents it lacked.
    [point] = await deploy.pause(_front(_payer(pay)))
    assert point == "agent:front/agent:payer/tool:pay#call_1"

    error = await deploy.refused(_front(), True)

    assert f"cannot reach the paused point(s) ['{point}']" in error
    assert "agent 'front' has no sub-agents now" in error
    assert "build it with the sub_agents= it had at the pause" in error
    result = await deploy.resume(_front(_payer(pay)), True)
    assert LOG == [("paid", "ACME", 120)] and result.text == "model saw: sent 120 to ACME"


async def test_a_resume_that_pauses_elsewhere_does_not_overwrite_the_undelivered_answer(
    deploy: Redeploy,
) -> None:
    # The new agent's pause replaced the checkpoint: the point "b" waited at, gone with it.
    await deploy.pause(seq(Step("a"), SequentialAgent("w", [Ask("b")])))
    before = await deploy.stored()

    with pytest.raises(RunError, match="cannot reach the paused point"):
        await deploy.resume(seq(Step("a"), AlwaysAsk("w")))

    assert await deploy.stored() == before
    assert LOG == [], "the new agent ran before the refusal"


class Logged(BaseAgent):
    """A custom agent around a workflow: notes that it ran, and runs (or resumes) the workflow
    with its own context, so the workflow's steps lie below its address."""

    def __init__(self, inner: SequentialAgent) -> None:
        super().__init__(inner.name)
        self.inner = inner

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        LOG.append(("logged", self.name))
        async for event in self.inner.run(input, ctx):
            yield event

    async def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        LOG.append(("logged", self.name))
        async for event in self.inner.resume(ctx):
            yield event


async def test_a_custom_agent_that_runs_a_workflow_with_its_own_context_resumes(
    deploy: Redeploy,
) -> None:
    # The check before the resume took it for a plain agent, which pauses only at its own
    # address, and refused every resume of a point inside the workflow it runs.
    def tree() -> SequentialAgent:
        return seq(Step("a"), Logged(SequentialAgent("w", [Step("x"), Ask("b")])), Step("c"))

    assert await deploy.pause(tree()) == ["agent:flow/agent:w/agent:b"]

    await deploy.resume(tree())

    assert LOG == [("logged", "w"), ("answered", "b", "yes"), ("ran", "c")]


class DuckAsk:
    """An agent by the ``Agent`` protocol alone (no ``BaseAgent``): the check before a resume
    cannot see what it runs, so only the check at the end of the run guards it."""

    description = ""

    def __init__(self, name: str) -> None:
        self.name = name

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        LOG.append(("asked", self.name))
        yield ctx.interrupt(f"{self.name}?")


async def test_what_the_check_before_the_run_cannot_see_is_still_refused_at_its_end(
    deploy: Redeploy,
) -> None:
    await deploy.pause(seq(Step("a"), SequentialAgent("w", [Ask("b")])))
    before = await deploy.stored()

    with pytest.raises(RunError, match="never reached the paused point") as raised:
        await deploy.resume(seq(Step("a"), DuckAsk("w")))

    assert isinstance(raised.value.__cause__, CheckpointError)
    assert await deploy.stored() == before


def _pays_twice(pay_tool: adk.FunctionTool, refund_tool: adk.FunctionTool | str) -> ReActAgent:
    """A payer whose model asks for a payment and a refund in one reply, both needing approval."""

    def reply(messages: list[adk.Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text="done")
        return Reply(
            tool_calls=[
                tool_call("pay", {"payee": "ACME", "amount_cents": 120}),
                tool_call("refund", {"payee": "Bob", "amount_cents": 30}),
            ]
        )

    return ReActAgent("payer", ScriptedModel(reply), tools=[pay_tool, refund_tool])


@adk.tool(require_approval=True)
def refund(payee: str, amount_cents: int) -> str:
    """Give money back."""
    LOG.append(("refunded", payee, amount_cents))
    return f"refunded {amount_cents} to {payee}"


@adk.tool(require_approval=True, name="refund")
def refund_renamed_parameter(payee: str, cents: int) -> str:
    """Give money back (``amount_cents`` renamed, without a default)."""
    LOG.append(("refunded", payee, cents))
    return f"refunded {cents} to {payee}"


async def test_a_refused_call_runs_none_of_the_calls_paused_beside_it(deploy: Redeploy) -> None:
    # The payment, approved beside a refund whose arguments no longer fit, was made before the
    # refund's call refused the resume; the checkpoint was kept with the payment still pending,
    # so the resume that followed the fix paid a second time.
    await deploy.pause(_pays_twice(pay, refund))
    approved = {"approved": True}
    ids = ["agent:payer/tool:pay#call_1", "agent:payer/tool:refund#call_2"]
    decisions = dict.fromkeys(ids, approved)

    error = await deploy.refused(_pays_twice(pay, refund_renamed_parameter), decisions)

    assert "no longer fit tool 'refund'" in error
    await deploy.resume(_pays_twice(pay, refund), decisions)
    assert LOG == [("paid", "ACME", 120), ("refunded", "Bob", 30)]


@adk.tool(require_approval=True)
def give_back(payee: str, cents: int) -> str:
    """Give money back (registered as the resource ``refund``, its parameter renamed)."""
    LOG.append(("refunded", payee, cents))
    return f"refunded {cents} to {payee}"


async def test_a_tool_resource_under_another_name_is_checked_before_its_round_runs() -> None:
    # A tool registered under another name than its own is wrapped; the check before a resumed
    # round must reach the tool inside, or the payment beside it is made again.
    store = InMemoryCheckpointStore()

    def runner(refund_tool: adk.FunctionTool) -> Runner:
        resources = adk.Resources()
        resources.add_tool(refund_tool, name="refund")
        return Runner(_pays_twice(pay, "refund"), checkpoint_store=store, resources=resources)

    paused = await runner(refund).invoke("go", checkpoint_id="c")
    assert paused.interrupt is not None
    LOG.clear()
    decisions = {point: {"approved": True} for point in paused.interrupt.point_ids}

    with pytest.raises(RunError, match="no longer fit tool 'give_back'"):
        await runner(give_back).invoke_resume("c", decisions)

    assert LOG == [] and await store.get("c") is not None


# -- checked before anything runs --------------------------------------------------------------
# Each component checks its saved state when the resume reaches it; by then a parallel branch or
# another call of the same tool round may have made its approved call. The refused resume keeps
# the checkpoint, so the resume after the fix made that call a second time. The runner now walks
# the whole tree the way the resume will go before anything runs.


@adk.tool(require_approval=True, name="pay", thread=False)
def pay_inline(payee: str, amount_cents: int) -> str:
    """Send money (run on the event loop: it is made before any other branch or call starts)."""
    LOG.append(("paid", payee, amount_cents))
    return f"sent {amount_cents} to {payee}"


def _paying_branch() -> ReActAgent:
    return _payer(pay_inline)


@pytest.mark.parametrize(
    ("changed", "complaint"),
    [
        (Step("w"), "agent 'w' at 'agent:both/agent:w' is a Step"),
        (SequentialAgent("w", [Ask("b2")]), "the step that paused, 'b', is no longer one"),
    ],
    ids=["replaced-by-a-plain-agent", "paused-step-renamed"],
)
async def test_a_branch_that_cannot_resume_keeps_its_sibling_from_paying(
    deploy: Redeploy, changed: Agent, complaint: str
) -> None:
    # The payer branch paid, then the other branch (or the end-of-run check) refused the resume
    # with the checkpoint kept: the resume after the rollback paid a second time.
    def tree(w: Agent) -> ParallelAgent:
        return ParallelAgent("both", [_paying_branch(), w])

    points = await deploy.pause(tree(SequentialAgent("w", [Ask("b")])))
    answers = {
        "agent:both/agent:payer/tool:pay#call_1": {"approved": True},
        "agent:both/agent:w/agent:b": "yes",
    }
    assert sorted(points) == sorted(answers)

    error = await deploy.refused(tree(changed), answers)

    assert complaint in error
    await deploy.resume(tree(SequentialAgent("w", [Ask("b")])), answers)
    assert sorted(LOG) == [("answered", "b", "yes"), ("paid", "ACME", 120)]


@adk.tool(require_approval=True)
def ship(item: str) -> str:
    """Ship an item."""
    LOG.append(("shipped", item))
    return f"shipped {item}"


def _shipper(*tools: adk.FunctionTool) -> ReActAgent:
    """An agent for an ``AgentTool``: ships one item, which needs approval."""

    def reply(messages: list[adk.Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"shipper saw: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("ship", {"item": "lamp"}, id="call_9")])

    return ReActAgent("shipper", ScriptedModel(reply), description="ships", tools=list(tools))


def _pays_and_ships(shipper: Agent | object) -> ReActAgent:
    """Pays and asks the shipper agent (as a tool) in one round; both pause for approval."""

    def reply(messages: list[adk.Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text="done")
        return Reply(
            tool_calls=[
                tool_call("pay", {"payee": "ACME", "amount_cents": 120}, id="call_1"),
                tool_call("shipper", {"request": "ship the lamp"}, id="call_2"),
            ]
        )

    tool = adk.AgentTool(shipper) if isinstance(shipper, Agent) else shipper
    return ReActAgent("payer", ScriptedModel(reply), tools=[pay_inline, tool])


SHIP_POINTS = {
    "agent:payer/tool:pay#call_1": {"approved": True},
    "agent:payer/tool:shipper#call_2/agent:shipper/tool:ship#call_9": {"approved": True},
}


@pytest.mark.parametrize(
    ("changed", "complaint"),
    [
        (_shipper(), "the paused calls need tools it no longer has: ship"),
        (SequentialAgent("shipper", [Step("s")], description="ships"), "saved state lacks"),
    ],
    ids=["nested-tool-removed", "nested-agent-changed-kind"],
)
async def test_a_nested_agent_tool_that_cannot_resume_keeps_the_call_beside_it_from_paying(
    deploy: Redeploy, changed: Agent, complaint: str
) -> None:
    # The round's checks before it starts knew the function tools only: the payment ran, then
    # the nested run refused to resume, with the checkpoint kept; the next resume paid again.
    assert sorted(await deploy.pause(_pays_and_ships(_shipper(ship)))) == sorted(SHIP_POINTS)

    error = await deploy.refused(_pays_and_ships(changed), SHIP_POINTS)

    assert complaint in error
    await deploy.resume(_pays_and_ships(_shipper(ship)), SHIP_POINTS)
    assert LOG == [("paid", "ACME", 120), ("shipped", "lamp")]


class Offering:
    """A ``Toolset``: the tools it offers are asked for when an agent's run starts (the check
    before a resume does not ask it: a real one, an MCP server, would be asked over the wire)."""

    def __init__(self, *tools: Any) -> None:
        self._tools = list(tools)

    async def tools(self, ctx: RunContext) -> list[Any]:
        return self._tools


async def test_an_agent_tool_from_a_toolset_is_checked_before_its_round_runs(
    deploy: Redeploy,
) -> None:
    # The check before the resume cannot see a toolset's tools; the round's own check before it
    # starts must see into the nested run, or the payment beside it is made and, the checkpoint
    # kept, made again.
    def payer(shipper: ReActAgent) -> ReActAgent:
        return _pays_and_ships(Offering(adk.AgentTool(shipper)))

    assert sorted(await deploy.pause(payer(_shipper(ship)))) == sorted(SHIP_POINTS)

    error = await deploy.refused(payer(_shipper()), SHIP_POINTS)

    assert "need tools it no longer has: ship" in error
    await deploy.resume(payer(_shipper(ship)), SHIP_POINTS)
    assert LOG == [("paid", "ACME", 120), ("shipped", "lamp")]


def _refunder() -> ReActAgent:
    """Refunds through the tool resource ``refund``; the refund needs approval."""

    def reply(messages: list[adk.Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"refunder saw: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("refund", {"payee": "Bob", "amount_cents": 30})])

    return ReActAgent("refunder", ScriptedModel(reply), tools=["refund"])


@pytest.mark.parametrize("changed", [refund_renamed_parameter, give_back], ids=["same", "renamed"])
async def test_a_tool_resource_of_a_branch_is_checked_before_the_branch_beside_it_pays(
    changed: adk.FunctionTool,
) -> None:
    # The walk before the resume did not look at tool resources: the payer branch paid before
    # the refunder's paused call found its arguments no longer fit the registered tool.
    store = InMemoryCheckpointStore()

    def runner(refund_tool: adk.FunctionTool) -> Runner:
        resources = adk.Resources()
        resources.add_tool(refund_tool, name="refund")
        tree = ParallelAgent("both", [_paying_branch(), _refunder()])
        return Runner(tree, checkpoint_store=store, resources=resources)

    paused = await runner(refund).invoke("go", checkpoint_id="c")
    assert paused.interrupt is not None and len(paused.interrupt.point_ids) == 2
    LOG.clear()
    approvals = {point: {"approved": True} for point in paused.interrupt.point_ids}

    with pytest.raises(RunError, match=f"no longer fit tool '{changed.name}'"):
        await runner(changed).invoke_resume("c", approvals)

    assert LOG == [] and await store.get("c") is not None
    await runner(refund).invoke_resume("c", approvals)
    assert sorted(LOG) == [("paid", "ACME", 120), ("refunded", "Bob", 30)]


async def test_max_iterations_lowered_to_the_paused_model_calls_is_refused(
    deploy: Redeploy,
) -> None:
    # At exactly the model calls made, the approved payment was made and the run then failed
    # on the limit (its result needs one more model call), with the checkpoint kept: the
    # resume after raising the limit paid a second time.
    await deploy.pause(_checking_payer(max_iterations=5))

    error = await deploy.refused(_checking_payer(max_iterations=2), {"approved": True})

    assert "paused after 2 model calls, at its max_iterations of 2" in error
    result = await deploy.resume(_checking_payer(max_iterations=3), {"approved": True})
    assert LOG == [("paid", "ACME", 120)] and result.text == "model saw: sent 120 to ACME"


async def test_a_paused_call_returned_directly_still_resumes_at_the_limit(
    deploy: Redeploy,
) -> None:
    # Its result is the agent's answer: no model call follows, so the limit does not stand in
    # the way.
    def payer(max_iterations: int) -> ReActAgent:
        agent = _checking_payer(max_iterations)
        agent.return_directly = frozenset({"pay"})
        return agent

    await deploy.pause(payer(max_iterations=5))

    result = await deploy.resume(payer(max_iterations=2), {"approved": True})

    assert LOG == [("paid", "ACME", 120)] and result.text == "sent 120 to ACME"


# -- what a resume checks that the walk must check too -------------------------------------------
# PlanExecute's steps restore their own state (objective, plan, finished steps, the history fork
# their agent runs on) and a ReActAgent renders its current instruction at resume. The walk
# before the resume made neither check, and walked a PlanExecute's executor on the run's history
# rather than on its step's: what did not fit was found when the branch resumed, after the
# branch beside it had paid, and the kept checkpoint paid again.


async def _resume_with(
    deploy: Redeploy, tree: Agent, data: Any, session: dict[str, Any] | None = None
) -> adk.RunResult:
    async with SQLiteCheckpointStore(deploy.path) as store:
        runner = Runner(tree, checkpoint_store=store)
        return await runner.invoke_resume("c", data, session=session)


def _instructed_shipper(instruction: str) -> ReActAgent:
    agent = _shipper(ship)
    agent.instruction = instruction
    return agent


async def test_an_instruction_needing_a_missing_value_keeps_the_branch_beside_it_from_paying(
    deploy: Redeploy,
) -> None:
    def tree(instruction: str) -> ParallelAgent:
        return ParallelAgent("both", [_paying_branch(), _instructed_shipper(instruction)])

    points = await deploy.pause(tree("Ship what is asked."))
    answers = {point: {"approved": True} for point in points}
    assert len(answers) == 2
    before = await deploy.stored()

    with pytest.raises(RunError, match=r"uses \{tier\} but the session has no value 'tier'") as e:
        await deploy.resume(tree("Ship for {tier} customers."), answers)

    assert e.value.error.type == "InstructionError"  # as when the resume failed on it
    assert LOG == [] and await deploy.stored() == before
    await _resume_with(deploy, tree("Ship for {tier} customers."), answers, {"tier": "gold"})
    assert sorted(LOG) == [("paid", "ACME", 120), ("shipped", "lamp")]


def _executor_reply(messages: list[adk.Message]) -> Reply:
    if messages[-1].role == Role.TOOL:
        return Reply(text=f"executor saw: {messages[-1].content}")
    return Reply(tool_calls=[tool_call("ship", {"item": "lamp"}, id="call_9")])


def _planning_shipper() -> PlanExecute:
    """A PlanExecute whose one step ships a lamp, which needs approval."""
    return PlanExecute(
        new_planner(ScriptedModel(lambda _: Reply(text='{"steps": ["ship the lamp"]}'))),
        new_executor(ScriptedModel(_executor_reply), [ship]),
        new_replanner(ScriptedModel(lambda _: Reply(text="All shipped."))),
    )


_STEP = "agent:both/agent:plan_execute/agent:execute_replan/agent:executor"


def _set_step(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        body["states"][_STEP]["plan_execute_step"][key] = value

    return change


def _set_role(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(body: dict[str, Any]) -> None:
        body["states"][_STEP]["plan_execute"] = value

    return change


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        (_set_step("plan", "ship the lamp"), "'plan' must be a Plan"),
        (_set_step("executed", [{"step": 1}]), "'executed' must be a list of ExecutedStep"),
        (_set_step("fork", 10_000), "'fork' is 10000, past the history's end"),
        (_set_role({"plan": None, "stored": "yes", "text": None}), "not the state a role saves"),
        (lambda body: body["session"].pop("plan"), "cannot resume: plan-execute: the session"),
    ],
    ids=["plan", "executed", "fork-past-the-history", "role-state", "session-without-a-plan"],
)
async def test_a_plan_execute_step_state_that_does_not_fit_keeps_the_branch_beside_it_from_paying(
    deploy: Redeploy, change: Callable[[dict[str, Any]], None], complaint: str
) -> None:
    def tree() -> ParallelAgent:
        return ParallelAgent("both", [_paying_branch(), _planning_shipper()])

    points = await deploy.pause(tree())
    answers = {point: {"approved": True} for point in points}
    assert sorted(answers) == sorted(
        ["agent:both/agent:payer/tool:pay#call_1", f"{_STEP}/tool:ship#call_9"]
    )
    original = await deploy.stored()
    assert original is not None
    await deploy.edit(change)

    error = await deploy.refused(tree(), answers)

    assert complaint in error
    async with SQLiteCheckpointStore(deploy.path) as store:
        await store.put("c", original)
    result = await deploy.resume(tree(), answers)
    assert sorted(LOG) == [("paid", "ACME", 120), ("shipped", "lamp")]
    assert result.text == "All shipped."


def _forked_parallel() -> ParallelAgent:
    return ParallelAgent("w", [SequentialAgent("s", [Step("s1"), Ask("b")]), Step("x")])


def _forked_plan_execute() -> PlanExecute:
    """A PlanExecute whose executor is a workflow of agents that do not read their history, so
    nothing but the step itself checks the history fork it saved."""
    return PlanExecute(
        new_planner(ScriptedModel(lambda _: Reply(text='{"steps": ["ask b"]}'))),
        SequentialAgent("executor", [Ask("b")]),
        new_replanner(ScriptedModel(lambda _: Reply(text="All shipped."))),
    )


@pytest.mark.parametrize(
    ("build", "address_end", "slot", "key"),
    [
        (_forked_parallel, "agent:both/agent:w", "", "fork_seq"),
        (_forked_plan_execute, "agent:executor", "plan_execute_step", "fork"),
    ],
    ids=["parallel-branches", "plan-execute-step"],
)
async def test_a_saved_fork_past_the_history_keeps_the_branch_beside_it_from_paying(
    deploy: Redeploy, build: Callable[[], Agent], address_end: str, slot: str, key: str
) -> None:
    # A history order number saved at the pause (where parallel branches, or a PlanExecute
    # step's lane, forked) was read as any whole number: one past the history's end gave the
    # branch a view with its siblings' entries (or the step's lane none of its own), and the
    # resume went on with it, the payment beside it made.
    def tree() -> ParallelAgent:
        return ParallelAgent("both", [_paying_branch(), build()])

    points = await deploy.pause(tree())
    answers = {point: {"approved": True} for point in points}
    assert len(answers) == 2
    original = await deploy.stored()
    assert original is not None

    def change(body: dict[str, Any]) -> None:
        [address] = [a for a in body["states"] if a.endswith(address_end)]
        body["states"][address][slot][key] = 10_000

    await deploy.edit(change)

    error = await deploy.refused(tree(), answers)

    assert f"{key!r} is 10000, past the history's end" in error
    async with SQLiteCheckpointStore(deploy.path) as store:
        await store.put("c", original)
    await deploy.resume(tree(), answers)
    assert ("paid", "ACME", 120) in LOG and ("answered", "b", {"approved": True}) in LOG


async def test_a_nested_instruction_needing_a_missing_value_keeps_the_call_beside_it_from_paying(
    deploy: Redeploy,
) -> None:
    # An AgentTool's nested agent renders its instruction when the nested run resumes: by then
    # the payment of the same round was made, and the failure went to the model as the tool's.
    assert sorted(await deploy.pause(_pays_and_ships(_instructed_shipper("Ship.")))) == sorted(
        SHIP_POINTS
    )

    error = await deploy.refused(_pays_and_ships(_instructed_shipper("Ship {tier}.")), SHIP_POINTS)

    assert "uses {tier} but the session has no value 'tier'" in error
    tree = _pays_and_ships(_instructed_shipper("Ship {tier}."))
    result = await _resume_with(deploy, tree, SHIP_POINTS, {"tier": "gold"})
    assert LOG == [("paid", "ACME", 120), ("shipped", "lamp")] and result.text == "done"


def _asks_the_shipper(toolset: Offering) -> ReActAgent:
    """Asks the shipper agent, which a toolset offers as a tool, to ship the lamp."""

    def reply(messages: list[adk.Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            LOG.append(("model saw", messages[-1].content))
            return Reply(text="done")
        return Reply(tool_calls=[tool_call("shipper", {"request": "ship the lamp"}, id="call_2")])

    return ReActAgent("asker", ScriptedModel(reply), tools=[toolset])


async def test_a_nested_instruction_the_walk_cannot_see_keeps_the_checkpoint(
    deploy: Redeploy,
) -> None:
    # A toolset's AgentTool is not walked before the resume; its nested agent found the missing
    # value when it resumed, and the AgentTool told the model its tool had failed: the run
    # finished without the approved shipment and the checkpoint was gone.
    def tree(instruction: str) -> ReActAgent:
        return _asks_the_shipper(Offering(adk.AgentTool(_instructed_shipper(instruction))))

    (point,) = await deploy.pause(tree("Ship."))
    answer = {point: {"approved": True}}

    error = await deploy.refused(tree("Ship {tier}."), answer)

    assert "uses {tier} but the session has no value 'tier'" in error
    result = await _resume_with(deploy, tree("Ship {tier}."), answer, {"tier": "gold"})
    assert LOG == [("shipped", "lamp"), ("model saw", "shipper saw: shipped lamp")]
    assert result.text == "done"
