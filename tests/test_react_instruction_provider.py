"""A ReActAgent's instruction may be a function of its context (Google ADK's InstructionProvider).

A Google ADK port builds the instruction in code from the session, the user or the time:
``instruction=fn`` with ``fn(ctx) -> str``, sync or async. It was refused where the agent was made,
so a port had to rewrite it as ``{key}`` placeholders or as a ``before_model`` callback editing the
system message. The function is asked before every model call (what it reads cannot be known),
its text used as it is (no placeholders filled in, as Google ADK leaves a provider's text alone),
and asked again when a paused agent resumes, as the system prompt is never saved.
"""

from __future__ import annotations

import functools
import inspect
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as WireReply
from pydantic import BaseModel

import adk
from adk import RunContext, RunError, Runner, ToolContext
from adk.checkpoint import SQLiteCheckpointStore
from adk.models import RetryPolicy
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, new_executor, new_planner, new_replanner

FAST = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01, jitter=False)


def set_tier(tier: str, ctx: ToolContext) -> str:
    """Change the customer's tier.

    Args:
        tier: The new tier.
    """
    ctx.session["user:tier"] = tier
    return f"tier is {tier}"


@adk.tool(require_approval=True)
def refund(amount_cents: int) -> str:
    """Refund the customer."""
    return f"refunded {amount_cents}"


def support(ctx: RunContext) -> str:
    return f"You are {ctx.agent_name}. The customer is {ctx.session.get('user:tier', 'unknown')}."


def systems(model: ScriptedModel) -> list[str]:
    """Each request's system prompt (the conversation's head), "" where there is none."""
    return [
        r.messages[0].content if r.messages and r.messages[0].role == "system" else ""
        for r in model.requests
    ]


async def test_a_sync_function_is_asked_before_every_model_call() -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("set_tier", {"tier": "gold"})]), Reply(text="done")]
    )
    agent = ReActAgent("helpdesk", model, instruction=support, tools=[set_tier])
    result = await Runner(agent).invoke("upgrade me", session={"user:tier": "silver"})
    assert result.text == "done"
    assert systems(model) == [
        "You are helpdesk. The customer is silver.",
        "You are helpdesk. The customer is gold.",
    ]
    # One system prompt, at the head, in every request.
    assert [m.role for m in model.requests[1].messages].count("system") == 1


async def test_an_async_function_is_awaited_and_its_text_is_not_a_template() -> None:
    async def instruction(ctx: RunContext) -> str:
        return 'Answer as JSON like {"ok": true}; {user:tier} is literal here.'

    model = ScriptedModel(["fine"])
    await Runner(ReActAgent("a", model, instruction=instruction)).invoke("hi")
    assert systems(model) == ['Answer as JSON like {"ok": true}; {user:tier} is literal here.']


async def test_an_empty_text_sends_no_system_prompt() -> None:
    model = ScriptedModel(["fine"])
    await Runner(ReActAgent("a", model, instruction=lambda ctx: "")).invoke("hi")
    assert systems(model) == [""]


async def test_with_an_output_schema_the_schemas_instruction_follows_the_text() -> None:
    class Ticket(BaseModel):
        priority: int

    model = ScriptedModel(['{"priority": 2}'])
    agent = ReActAgent(
        "triage", model, instruction=lambda ctx: "Triage the ticket.", output_schema=Ticket
    )
    result = await Runner(agent).invoke("printer on fire")
    assert result.output == Ticket(priority=2)
    # ScriptedModel takes the schema natively, so the prompt is the function's text alone.
    assert systems(model) == ["Triage the ticket."]
    assert model.requests[0].options.response_format is not None


async def test_a_result_that_is_not_text_fails_the_agent_naming_it() -> None:
    model = ScriptedModel(["never"])
    agent = ReActAgent("a", model, instruction=lambda ctx: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(RunError, match="agent 'a': its instruction function must return a str"):
        await Runner(agent).invoke("hi")
    assert model.requests == []  # the model is not called with a wrong prompt


async def test_an_error_in_the_function_fails_the_agent() -> None:
    def broken(ctx: RunContext) -> str:
        raise LookupError("no such customer")

    model = ScriptedModel(["never"])
    with pytest.raises(RunError, match="no such customer"):
        await Runner(ReActAgent("a", model, instruction=broken)).invoke("hi")
    assert model.requests == []


async def test_a_resume_in_another_process_asks_the_function_again(tmp_path: Path) -> None:
    # The checkpoint holds no system prompt: the resumed agent's first model call gets the
    # function's text as it is at the resume (here the shift changed while the run waited).
    shift = {"now": "day"}

    def instruction(ctx: RunContext) -> str:
        return f"{support(ctx)} Shift: {shift['now']}."

    def agent(model: ScriptedModel) -> ReActAgent:
        return ReActAgent("helpdesk", model, instruction=instruction, tools=[refund])

    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        first = ScriptedModel([Reply(tool_calls=[tool_call("refund", {"amount_cents": 5})])])
        paused = await Runner(agent(first), checkpoint_store=store).invoke(
            "refund me", checkpoint_id="c", session={"user:tier": "silver"}
        )
        assert paused.interrupt is not None
        shift["now"] = "night"
        second = ScriptedModel(["refunded"])
        result = await Runner(agent(second), checkpoint_store=store).invoke_resume(
            "c", {"approved": True}
        )
    assert result.text == "refunded"
    assert systems(first) == ["You are helpdesk. The customer is silver. Shift: day."]
    assert systems(second) == ["You are helpdesk. The customer is silver. Shift: night."]
    roles = [m.role for m in second.requests[0].messages]
    assert roles == ["system", "user", "assistant", "tool"]
    assert second.requests[0].messages[-1].content == "refunded 5"


async def test_the_functions_text_goes_over_the_wire_as_the_system_message() -> None:
    tiering = WireReply(tool_calls=[Call("set_tier", '{"tier": "gold"}')])
    async with OpenAIServer([tiering, WireReply(text="done")]) as server:
        model = wire_model(server, api_key="k", retry=FAST)
        async with model:
            agent = ReActAgent("helpdesk", model, instruction=support, tools=[set_tier])
            result = await Runner(agent).invoke("go", session={"user:tier": "silver"})
        bodies = server.bodies
    assert result.text == "done"
    assert [body["messages"][0] for body in bodies] == [
        {"role": "system", "content": "You are helpdesk. The customer is silver."},
        {"role": "system", "content": "You are helpdesk. The customer is gold."},
    ]


async def test_a_function_assigned_mid_run_is_asked_before_the_next_call() -> None:
    holder: list[ReActAgent] = []

    def switch(ctx: ToolContext) -> str:
        """Switch the instruction."""
        holder[0].instruction = support
        return "switched"

    model = ScriptedModel([Reply(tool_calls=[tool_call("switch", {})]), Reply(text="done")])
    agent = ReActAgent("helpdesk", model, instruction="Plain {user:tier}.", tools=[switch])
    holder.append(agent)
    await Runner(agent).invoke("go", session={"user:tier": "silver"})
    assert systems(model) == ["Plain silver.", "You are helpdesk. The customer is silver."]


def test_a_function_that_cannot_take_the_context_is_refused_where_the_agent_is_made() -> None:
    with pytest.raises(TypeError, match=r"ReActAgent 'a': instruction function .* fn\(ctx\)"):
        ReActAgent("a", ScriptedModel(["x"]), instruction=lambda: "Help.")  # type: ignore[arg-type]


async def test_a_decorated_function_is_checked_as_the_wrapper_that_is_called() -> None:
    # A decorator that supplies an argument itself (click's pass_context shape), its wrapper
    # given the function's signature by functools.wraps: inspect.signature followed __wrapped__
    # to (tier, ctx), which cannot take (ctx), and refused a function that runs.
    def with_tier(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(ctx: RunContext) -> str:
            return fn(ctx.session.get("user:tier", "none"), ctx)

        return wrapper

    @with_tier
    def persona(tier: str, ctx: RunContext) -> str:
        return f"Help a {tier} customer."

    model = ScriptedModel(["ok"])
    await Runner(ReActAgent("a", model, instruction=persona)).invoke(
        "hi", session={"user:tier": "gold"}
    )
    assert systems(model) == ["Help a gold customer."]


async def test_plan_execute_roles_made_by_their_functions_take_an_instruction_function() -> None:
    # new_planner, new_executor and new_replanner pass instruction= to their ReActAgent, which
    # takes a function, but typed it str: a port's strict type check refused what runs.
    def executor_instruction(ctx: RunContext) -> str:
        return f"Do one step toward: {ctx.session.get('objective')}"

    for make in (new_planner, new_executor, new_replanner):
        annotation = inspect.signature(make).parameters["instruction"].annotation
        assert annotation == "str | InstructionProvider", make.__name__
    executor_model = ScriptedModel(["Paris."])
    agent = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["find the capital"]})])),
        new_executor(executor_model, instruction=executor_instruction),
        new_replanner(ScriptedModel(["It is Paris."])),
    )
    result = await Runner(agent).invoke("What is the capital of France?")
    assert result.text == "It is Paris."
    assert systems(executor_model) == ["Do one step toward: What is the capital of France?"]


async def test_an_interrupt_from_the_function_fails_the_run_rather_than_pausing_it() -> None:
    # It paused the run, which the agent (having saved nothing before a model call) could not
    # resume: the person's answer failed the resume with "holds no saved state".
    def ask(ctx: RunContext) -> str:
        raise adk.Interrupt("which persona?")

    model = ScriptedModel(["never"])
    with pytest.raises(RunError, match=r"its instruction function raised adk\.Interrupt") as failed:
        await Runner(ReActAgent("a", model, instruction=ask)).invoke("hi")
    assert failed.value.events[-1].action is None  # no pause, no checkpoint
    assert model.requests == []


async def test_a_function_failing_at_resume_refuses_it_before_the_approved_call_runs(
    tmp_path: Path,
) -> None:
    """The function fails when the resumed agent asks it (its database down, a value it reads
    gone): it was asked only before the model call after the paused round, so the approved
    refund was made first, the run then failed with its checkpoint kept, and the retry once the
    function answered refunded again. Asked before anything runs, it refuses the resume."""
    refunds: list[int] = []
    crm = {"up": True}

    @adk.tool(require_approval=True)
    def refund_once(amount_cents: int) -> str:
        """Refund the customer."""
        refunds.append(amount_cents)
        return f"refunded {amount_cents}"

    async def instruction(ctx: RunContext) -> str:
        if not crm["up"]:
            raise ConnectionError("the CRM is down")
        return support(ctx)

    def agent(model: ScriptedModel) -> ReActAgent:
        return ReActAgent("helpdesk", model, instruction=instruction, tools=[refund_once])

    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        first = ScriptedModel([Reply(tool_calls=[tool_call("refund_once", {"amount_cents": 5})])])
        paused = await Runner(agent(first), checkpoint_store=store).invoke(
            "refund me", checkpoint_id="c"
        )
        assert paused.interrupt is not None
        crm["up"] = False
        refused = ScriptedModel(["never"])
        with pytest.raises(RunError, match="the CRM is down") as raised:
            await Runner(agent(refused), checkpoint_store=store).invoke_resume("c", True)
        assert isinstance(raised.value.__cause__, adk.CheckpointError)
        assert "instruction function" in str(raised.value)
        assert "checkpoint is kept" in str(raised.value)
        assert refunds == [] and refused.requests == []
        assert await store.get("c") is not None
        crm["up"] = True
        second = ScriptedModel(["refunded"])
        result = await Runner(agent(second), checkpoint_store=store).invoke_resume("c", True)
    assert result.text == "refunded" and refunds == [5]


async def test_a_function_failing_at_resume_is_not_asked_when_the_round_ends_the_agent() -> None:
    """A paused round that ends the agent (a result returned directly) asks the model nothing
    after it, so the function is not asked either, and its failure refuses nothing."""
    asked: list[str] = []

    def instruction(ctx: RunContext) -> str:
        asked.append(ctx.agent_name)
        if len(asked) > 1:
            raise ConnectionError("the CRM is down")
        return support(ctx)

    model = ScriptedModel([Reply(tool_calls=[tool_call("refund", {"amount_cents": 5})])])
    runner = Runner(
        ReActAgent(
            "helpdesk", model, instruction=instruction, tools=[refund], return_directly=["refund"]
        )
    )
    paused = await runner.invoke("refund me")
    assert paused.interrupt is not None
    result = await runner.invoke_resume(paused.interrupt.checkpoint_id, True)
    assert result.text == "refunded 5" and asked == ["helpdesk"]
