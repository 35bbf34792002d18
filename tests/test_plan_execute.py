"""PlanExecute: plan, execute one step at a time, replan until the replanner responds."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from conftest import wire_model
from openai_server import OpenAIServer
from openai_server import Reply as Wire
from pydantic import BaseModel

import adk
from adk import AgentEvent, AgentInput, BaseAgent, LoopAgent, RunContext, Runner, SequentialAgent
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import decode_checkpoint, encode_checkpoint
from adk.checkpoint.sqlite import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import (
    ExecutedStep,
    MaxIterationsError,
    OutputRejected,
    Plan,
    PlanExecute,
    ReActAgent,
    Supervisor,
    new_executor,
    new_planner,
    new_replanner,
)
from prebuilt.plan_execute import _update_plan


@adk.tool
def lookup(topic: str) -> str:
    """Look a fact up."""
    return {"capital": "Paris", "population": "2.1 million"}.get(topic, "unknown")


def plan_json(*steps: str) -> str:
    return json.dumps({"steps": list(steps)})


def update(*steps: str) -> Reply:
    return Reply(tool_calls=[tool_call("update_plan", {"steps": list(steps)})])


def lookup_call(topic: str) -> Reply:
    return Reply(tool_calls=[tool_call("lookup", {"topic": topic})])


async def test_plan_execute_with_a_replan() -> None:
    planner_model = ScriptedModel([plan_json("find the capital", "find its population")])
    executor_model = ScriptedModel(
        [
            lookup_call("capital"),
            "The capital is Paris.",
            lookup_call("population"),
            "Paris has 2.1 million people.",
        ]
    )
    replanner_model = ScriptedModel(
        [update("find the population of Paris"), "Paris, with 2.1 million people."]
    )
    agent = PlanExecute(
        new_planner(planner_model),
        new_executor(executor_model, [lookup]),
        new_replanner(replanner_model),
    )
    result = await Runner(agent).invoke("What is the capital of France and its population?")

    assert simplify_events(result.events) == [
        'planner: {"steps": ["find the capital", "find its population"]}',
        "planner: [custom Plan(steps=['find the capital', 'find its population'])]",
        'executor: [call lookup {"topic": "capital"}]',
        "executor: [tool lookup] Paris",
        "executor: The capital is Paris.",
        'replanner: [call update_plan {"steps": ["find the population of Paris"]}]',
        "replanner: [tool update_plan] Plan updated:\n1. find the population of Paris",
        'executor: [call lookup {"topic": "population"}]',
        "executor: [tool lookup] 2.1 million",
        "executor: Paris has 2.1 million people.",
        "replanner: Paris, with 2.1 million people.",
        "replanner: [break_loop]",
    ]
    assert result.text == "Paris, with 2.1 million people."
    session = result.session
    assert session["objective"] == "What is the capital of France and its population?"
    assert session["plan"] == Plan(steps=[])
    assert session["executed_steps"] == [
        ExecutedStep(step="find the capital", result="The capital is Paris."),
        ExecutedStep(step="find the population of Paris", result="Paris has 2.1 million people."),
    ]

    # The planner asked natively for a Plan.
    options = planner_model.requests[0].options
    assert options is not None and options.response_format is not None
    assert options.response_format["name"] == "Plan"
    # The executor got one step with its context, not the whole conversation.
    first_step = executor_model.requests[0].messages
    assert [m.role for m in first_step] == ["system", "user"]
    assert "Objective:\nWhat is the capital of France" in first_step[1].content
    assert "1. find the capital\n2. find its population" in first_step[1].content
    assert first_step[1].content.endswith("which is:\nfind the capital")
    second_step = executor_model.requests[2].messages[1].content
    assert "1. find the capital\n   Result: The capital is Paris." in second_step
    assert second_step.endswith("which is:\nfind the population of Paris")
    # The replanner saw what was done and what is left.
    replan = replanner_model.requests[0].messages[1].content
    assert "Result: The capital is Paris." in replan
    assert "Remaining plan:\n1. find its population" in replan
    assert [s.name for s in replanner_model.requests[0].tools] == ["update_plan"]
    final_review = replanner_model.requests[1].messages[1].content
    assert "Remaining plan:\n(no steps)" in final_review


async def test_update_plans_event_carries_the_new_plan_for_a_ui() -> None:
    """A UI following the plan from the events had the replanner's new plan only as the text of
    the update_plan tool's result ("Plan updated:\n1. ..."), to parse back; the tool's event
    carries it as its structured value now, as a Plan, also in the event's JSON for a service
    streaming the events."""
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("a", "b")])),
        new_executor(ScriptedModel(["did a", "did c"])),
        new_replanner(ScriptedModel([update("c"), "Done."])),
    )
    seen: list[object] = []
    watch = adk.Callbacks(after_tool=lambda ctx, call, result: seen.append(result))
    result = await Runner(agent, callbacks=[watch]).invoke("go")

    assert seen == ["Plan updated:\n1. c"]  # after_tool gets the text, as before
    [event] = [
        e for e in result.events if e.output is not None and e.output.tool_name == "update_plan"
    ]
    assert event.output is not None and event.output.message is not None
    assert event.output.message.metadata["structured"] == Plan(steps=["c"])
    assert event.to_dict()["output"]["message"]["metadata"]["structured"] == {"steps": ["c"]}
    assert result.session["executed_steps"][-1] == ExecutedStep(step="c", result="did c")


async def test_replanner_can_respond_before_the_plan_is_finished() -> None:
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("a", "b", "c")])),
        new_executor(ScriptedModel(["a done"])),
        new_replanner(ScriptedModel(["Answered early."])),
    )
    result = await Runner(agent).invoke("go")
    assert result.text == "Answered early."
    assert result.session["plan"] == Plan(steps=["b", "c"])


async def test_update_plan_needs_steps() -> None:
    replanner_model = ScriptedModel([update(" "), "Fine, done."])
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("a")])),
        new_executor(ScriptedModel(["a done"])),
        new_replanner(replanner_model),
    )
    result = await Runner(agent).invoke("go")
    assert "replanner: [tool update_plan] Error: update_plan needs at least one step" in "\n".join(
        simplify_events(result.events)
    )
    assert result.text == "Fine, done."


async def test_max_iterations_without_a_response_is_an_error() -> None:
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("step")])),
        new_executor(ScriptedModel(["did it"], cycle=True)),
        new_replanner(ScriptedModel([update("step again")], cycle=True)),
        max_iterations=3,
    )
    events = [e async for e in Runner(agent).run("go")]
    assert sum(1 for line in simplify_events(events) if line == "executor: did it") == 3
    last = events[-1]
    assert last.error is not None and last.agent_name == "plan_execute"
    assert "exceeds max iterations (3 execute/replan rounds)" in last.error.message
    assert isinstance(last.exception, MaxIterationsError)


async def test_a_plan_longer_than_max_iterations_says_how_much_was_left() -> None:
    """A planner's plan of more steps than max_iterations allows rounds (200 against the default
    10) ran its first steps, then failed saying only that the rounds ran out: nothing told that
    the plan could not have been carried out within them."""
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json(*(f"step {i}" for i in range(1, 201)))])),
        new_executor(ScriptedModel(["did it"], cycle=True)),
        new_replanner(ScriptedModel([""], cycle=True)),  # keeps the plan
        max_iterations=3,
    )
    events = [e async for e in Runner(agent).run("go")]
    last = events[-1]
    assert last.error is not None
    assert last.error.message == (
        "plan-execute 'plan_execute' exceeds max iterations (3 execute/replan rounds) without a "
        "response, with 197 of the plan's steps left and 3 done (a plan needs a round per step: "
        "raise max_iterations, or have the planner write fewer steps)"
    )


async def test_planner_without_a_plan_is_an_error() -> None:
    planner = new_planner(ScriptedModel(["no idea", "still no idea"]))
    agent = PlanExecute(planner, new_executor(ScriptedModel([])), new_replanner(ScriptedModel([])))
    events = [e async for e in Runner(agent).run("go")]
    assert events[-1].error is not None
    assert "does not match Plan after a retry" in events[-1].error.message


# -- any agents as roles --------------------------------------------------------------------------
class TextPlanner(BaseAgent):
    """Writes its plan as fenced JSON text, the way a plain chat model would."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.of('```json\n{"steps": ["wash", "dry"]}\n```')


class Worker(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        step = input.messages[-1].content.rsplit("\n", 1)[-1]
        yield AgentEvent.of(f"{step}: ok")


class Reviewer(BaseAgent):
    """Adds a step with a Plan custom output once, then answers."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        done = [e.step for e in ctx.session["executed_steps"]]
        if done == ["wash"]:
            yield AgentEvent.custom(Plan(steps=["dry", "fold"]))
        elif len(done) == 3:
            yield AgentEvent.of(f"Laundry done: {', '.join(done)}.")


async def test_any_agents_can_fill_the_roles() -> None:
    agent = PlanExecute(TextPlanner("p"), Worker("w"), Reviewer("r"), name="laundry")
    result = await Runner(agent).invoke("do the laundry")
    assert simplify_events(result.events) == [
        'p: ```json\n{"steps": ["wash", "dry"]}\n```',
        "w: wash: ok",
        "r: [custom Plan(steps=['dry', 'fold'])]",
        "w: dry: ok",
        "w: fold: ok",
        "r: Laundry done: wash, dry, fold.",
        "r: [break_loop]",
    ]
    paths = [e.run_path for e in result.events]
    assert paths[0] == ("laundry", "p")
    assert paths[1] == ("laundry", "p", "execute_replan", "w")
    assert isinstance(agent, SequentialAgent)
    assert isinstance(agent.sub_agents[1], LoopAgent)


class Scripted(BaseAgent):
    """Emits the events ``make(ctx)`` returns (a role played by plain code)."""

    def __init__(self, name: str, make: Any) -> None:
        super().__init__(name)
        self.make = make

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        for event in self.make(ctx):
            yield event


class Receipt(BaseModel):
    step: str
    ok: bool


async def test_custom_outputs_as_plans_and_step_results() -> None:
    # A planner may hand over its plan as data (a dict here), an executor its result as a model,
    # a dict or text; results are recorded as JSON text, and a replanner may end the loop itself.
    results = iter([AgentEvent.custom(Receipt(step="wash", ok=True)), AgentEvent.custom({"n": 2})])
    agent = PlanExecute(
        Scripted("p", lambda ctx: [AgentEvent.custom({"steps": ["wash", "count"]})]),
        Scripted("w", lambda ctx: [next(results)]),
        Scripted(
            "r",
            lambda ctx: (
                [AgentEvent.of("All done."), AgentEvent.break_loop()]
                if len(ctx.session["executed_steps"]) == 2
                else []
            ),
        ),
    )

    result = await Runner(agent).invoke("chores")

    assert result.session["executed_steps"] == [
        ExecutedStep(step="wash", result='{"step":"wash","ok":true}'),
        ExecutedStep(step="count", result='{"n": 2}'),
    ]
    assert result.text == "All done."


async def test_a_planner_whose_custom_output_is_not_a_plan_says_so() -> None:
    agent = PlanExecute(
        Scripted("p", lambda ctx: [AgentEvent.custom(["wash"])]),
        Scripted("w", lambda ctx: []),
        Scripted("r", lambda ctx: []),
    )

    with pytest.raises(adk.RunError, match=r"planner 'p' produced no plan: its output \['wash'\]"):
        await Runner(agent).invoke("chores")


async def test_output_key_stores_the_answer_for_a_later_agents_instruction() -> None:
    # CrewAI's Task(context=[research_task]) with a planning researcher: the next agent's
    # instruction names the PlanExecute's answer, as it would a ReActAgent's output_key.
    research = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["look up", "compare"]})])),
        new_executor(ScriptedModel(["found", "compared"])),
        new_replanner(
            ScriptedModel(
                [
                    Reply(tool_calls=[tool_call("update_plan", {"steps": ["compare prices"]})]),
                    "Oatly is dearest.",
                ]
            )
        ),
        name="research",
        output_key="research",
    )
    writer = ReActAgent(
        "writer", ScriptedModel(["A report."]), instruction="Write from: {research}"
    )

    result = await Runner(SequentialAgent("crew", [research, writer])).invoke("Milk market.")

    assert result.session["research"] == "Oatly is dearest."
    assert writer.model.requests[0].messages[0].content == "Write from: Oatly is dearest."
    # A replanner's blank reply after the last step: the step's result is the answer stored.
    blank = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["look up"]})])),
        new_executor(ScriptedModel(["found it"])),
        new_replanner(ScriptedModel([""])),
        output_key="research",
    )
    assert (await Runner(blank).invoke("Milk.")).session["research"] == "found it"
    with pytest.raises(
        TypeError, match="PlanExecute 'plan_execute': output_key must be a non-empty"
    ):
        PlanExecute(Worker("p"), Worker("e"), Reviewer("r"), output_key="")


@pytest.mark.parametrize("steps", [[], ["  ", ""]])
async def test_a_planners_plan_without_steps_is_retried_as_an_answer_off_the_schema(
    steps: list[str],
) -> None:
    """A model's empty plan (or one of blank steps, which Plan drops) is the planner's output
    retry, told why, as an answer that is no plan at all is: it failed the run at once (the
    step's "produced no plan"), where prose got the retry. Once corrected the run goes on; an
    empty plan again ends the planner with OutputSchemaError, as any answer that fails its retry
    does. Never the replanner asked for an answer with nothing done."""
    empty = json.dumps({"steps": steps})
    planner = new_planner(ScriptedModel([empty, json.dumps({"steps": ["look it up"]})]))
    executor = new_executor(ScriptedModel(["Tea is a drink."]))
    agent = PlanExecute(planner, executor, new_replanner(ScriptedModel(["Tea: a drink."])))
    result = await Runner(agent).invoke("Research tea.")
    assert result.text == "Tea: a drink."
    retry = planner.model.requests[1].messages[-1].content
    assert retry.startswith(
        "Your answer does not match the required Plan JSON schema: the plan has no steps (blank "
        "ones are dropped); a plan needs at least one"
    )
    rejected = [e.output.custom for e in result.events if e.output and e.output.custom]
    assert isinstance(rejected[0], OutputRejected) and rejected[0].schema_name == "Plan"
    assert rejected[0].problem.startswith("the plan has no steps")

    executor = new_executor(ScriptedModel([]))
    replanner = new_replanner(ScriptedModel(["An answer made up from nothing."]))
    agent = PlanExecute(new_planner(ScriptedModel([empty, empty])), executor, replanner)
    with pytest.raises(adk.RunError, match="does not match Plan after a retry: the plan has no"):
        await Runner(agent).invoke("Research tea.")
    assert executor.model.requests == [] and replanner.model.requests == []


class EmptyPlanner(BaseAgent):
    """Answers a Plan of no steps, as its custom output: no model to retry."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.custom(Plan(steps=[]))


async def test_a_plan_without_steps_from_a_planner_with_no_retry_fails_the_run() -> None:
    # Any other planner (an agent of your own, a plan stored in the session) has no output retry:
    # its empty plan fails the run, rather than asking the replanner for an answer from nothing.
    replanner = new_replanner(ScriptedModel(["An answer made up from nothing."]))
    agent = PlanExecute(EmptyPlanner("planner"), Worker("w"), replanner)
    with pytest.raises(
        adk.RunError, match="planner 'planner' produced no plan: its plan has no steps"
    ):
        await Runner(agent).invoke("Research tea.")
    assert replanner.model.requests == []


async def test_an_empty_plan_is_an_answer_outside_a_planners_step() -> None:
    # Only a planner's is retried: the same schema's empty plan from an agent that is no
    # planner (a replanner's "nothing left", an agent of its own) is a valid answer.
    agent = ReActAgent("lister", ScriptedModel([json.dumps({"steps": []})]), output_schema=Plan)
    result = await Runner(agent).invoke("Anything left?")
    assert result.output == Plan(steps=[])


@pytest.mark.parametrize(
    ("limit", "error"), [(0, ValueError), (None, TypeError), (True, TypeError), (2.5, TypeError)]
)
def test_max_iterations_is_checked_in_plan_executes_name(limit: Any, error: type) -> None:
    # Not the inner loop's message ("LoopAgent 'execute_replan'"), nor its None (no limit).
    roles = new_planner(ScriptedModel([])), new_executor(ScriptedModel([]))
    with pytest.raises(error, match="PlanExecute 'trip': max_iterations must be an int >= 1"):
        PlanExecute(*roles, new_replanner(ScriptedModel([])), limit, name="trip")


def test_roles_need_distinct_names() -> None:
    with pytest.raises(ValueError, match="three differently named agents"):
        PlanExecute(Worker("x"), Worker("x"), Reviewer("r"))


# -- interrupts, checkpoints, streaming -------------------------------------------------------------
async def test_interrupt_inside_a_step_resumes_from_a_persistent_checkpoint(
    tmp_path: object,
) -> None:
    ran: list[str] = []

    @adk.tool(require_approval=True)
    def book(flight: str) -> str:
        """Book a flight."""
        ran.append(flight)
        return f"booked {flight}"

    def app(executor_script: list[str | Reply]) -> PlanExecute:
        return PlanExecute(
            new_planner(ScriptedModel([plan_json("book AF1", "tell the user")])),
            new_executor(ScriptedModel(executor_script), [book]),
            new_replanner(ScriptedModel([update("tell the user"), "You are booked on AF1."])),
        )

    store = SQLiteCheckpointStore(f"{tmp_path}/checkpoints.db")
    book_call = Reply(tool_calls=[tool_call("book", {"flight": "AF1"})])
    first = await Runner(app([book_call]), checkpoint_store=store).invoke("book me AF1")
    assert first.interrupt is not None and first.checkpoint_id is not None
    assert first.interrupt.point_ids == [
        "agent:plan_execute/agent:execute_replan/agent:executor/tool:book#call_1"
    ]
    assert first.session["plan"] == Plan(steps=["book AF1", "tell the user"])
    # As a new process would: fresh agents, state only from the stored checkpoint bytes.
    fresh = app(["AF1 booked.", "Told."])
    second = await Runner(fresh, checkpoint_store=store).invoke_resume(
        first.checkpoint_id, {"approved": True}
    )
    assert simplify_events(second.events)[:2] == [
        "executor: [tool book] booked AF1",
        "executor: AF1 booked.",
    ]
    assert second.text == "You are booked on AF1."
    assert ran == ["AF1"]
    assert fresh.planner.model.calls == 0  # type: ignore[attr-defined]  # no re-planning
    steps = second.session["executed_steps"]
    assert steps == [
        ExecutedStep(step="book AF1", result="AF1 booked."),
        ExecutedStep(step="tell the user", result="Told."),
    ]
    # The resumed executor continued the saved conversation: call, approved result, answer.
    resumed = fresh.executor.model.requests[0].messages  # type: ignore[attr-defined]
    assert [m.role for m in resumed] == ["system", "user", "assistant", "tool"]
    await store.aclose()


@pytest.mark.parametrize("responds", [True, False])
async def test_a_pause_in_the_last_round_resumes_and_ends_as_that_round_would(
    responds: bool,
) -> None:
    """Unlike a ReActAgent's last model call, the last execute/replan round that pauses can
    still finish within the limit (the replanner answers in it), so it pauses; and fails as
    the same round without a pause would when the replanner does not respond."""
    ran: list[str] = []

    @adk.tool(require_approval=True)
    def book(flight: str) -> str:
        """Book a flight."""
        ran.append(flight)
        return f"booked {flight}"

    book_call = Reply(tool_calls=[tool_call("book", {"flight": "AF1"})])
    answer: str | Reply = "You are booked on AF1." if responds else update("check in")
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("book AF1")])),
        new_executor(ScriptedModel([book_call, "AF1 booked."]), [book]),
        new_replanner(ScriptedModel([answer])),
        max_iterations=1,
    )
    runner = Runner(agent)
    first = await runner.invoke("book me AF1")
    assert first.interrupt is not None and first.checkpoint_id is not None

    events = [e async for e in runner.resume(first.checkpoint_id, {"approved": True})]

    assert ran == ["AF1"] and "executor: AF1 booked." in simplify_events(events)
    if responds:
        assert events[-1].error is None
        assert "replanner: You are booked on AF1." in simplify_events(events)
    else:
        assert events[-1].error is not None
        assert "exceeds max iterations (1 execute/replan rounds)" in events[-1].error.message


async def test_streaming_run_records_step_results_from_streams() -> None:
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("one")], chunk_size=3)),
        new_executor(ScriptedModel(["first result"], chunk_size=3)),
        new_replanner(ScriptedModel(["All done."], chunk_size=3)),
    )
    runner = Runner(agent, enable_streaming=True)
    events = []
    async for event in runner.run("go", session={}):
        if event.output is not None and event.output.stream is not None:
            await event.output.stream.collect()
        events.append(event)
    assert simplify_events(events)[-3:] == [
        "executor: first result",
        "replanner: All done.",
        "replanner: [break_loop]",
    ]
    assert events[2].output is not None and events[2].output.stream is not None


async def test_from_model_builds_all_three_roles() -> None:
    model = ScriptedModel(
        [plan_json("look up the capital"), lookup_call("capital"), "Paris.", "It is Paris."]
    )
    agent = PlanExecute.from_model(model, [lookup], max_iterations=2)
    result = await Runner(agent).invoke("capital of France?")
    assert result.text == "It is Paris."
    assert [a.name for a in (agent.planner, agent.executor, agent.replanner)] == [
        "planner",
        "executor",
        "replanner",
    ]


async def test_a_silent_replanner_keeps_the_plan_and_the_loop_ends_when_nothing_is_left() -> None:
    class Silent(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            return
            yield AgentEvent.of("unreachable")

    agent = PlanExecute(TextPlanner("p"), Worker("w"), Silent("r"))
    result = await Runner(agent).invoke("laundry")
    assert simplify_events(result.events) == [
        'p: ```json\n{"steps": ["wash", "dry"]}\n```',
        "w: wash: ok",
        "w: dry: ok",
        "r: [break_loop]",
    ]
    assert result.text == "dry: ok"


# -- breaks that inner loops take ---------------------------------------------------------------
def refine_loop(name: str, *said: str) -> LoopAgent:
    """A role's own loop that says its lines and breaks out of itself in its first round."""
    return LoopAgent(
        name,
        [
            Scripted(
                f"{name}_critic",
                lambda ctx: [*(AgentEvent.of(text) for text in said), AgentEvent.break_loop()],
            )
        ],
    )


async def test_a_break_an_executors_own_loop_took_is_not_a_response() -> None:
    # The executor's loop takes its break; the replanner keeps replanning, so the rounds run out.
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("draft")])),
        refine_loop("executor", "draft ok"),
        new_replanner(ScriptedModel([update("draft again")], cycle=True)),
        max_iterations=2,
    )
    events = [e async for e in Runner(agent).run("go")]
    assert simplify_events(events).count("executor_critic: draft ok") == 2
    assert isinstance(events[-1].exception, MaxIterationsError)


async def test_a_break_a_replanners_own_loop_took_does_not_end_its_turn() -> None:
    # The replanner reviews in a loop of its own, then answers: its answer is the response.
    answerer = Scripted("answerer", lambda ctx: [AgentEvent.of("FINAL ANSWER")])
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("s1", "s2")])),
        new_executor(ScriptedModel(["r1", "r2"])),
        SequentialAgent("replanner", [refine_loop("review", "looks fine"), answerer]),
    )
    result = await Runner(agent).invoke("go")
    assert simplify_events(result.events)[2:] == [
        "executor: r1",
        "review_critic: looks fine",
        "review_critic: [break_loop]",
        "answerer: FINAL ANSWER",
        "replanner: [break_loop]",
    ]
    assert result.text == "FINAL ANSWER"
    assert result.session["plan"] == Plan(steps=["s2"])


async def test_an_inner_plan_executes_response_is_not_the_outer_ones() -> None:
    # A PlanExecute as the executor of another: its replanner's answer ends its own loop only.
    inner = PlanExecute(
        Scripted("inner_planner", lambda ctx: [AgentEvent.custom(Plan(steps=["sub"]))]),
        Scripted("inner_executor", lambda ctx: [AgentEvent.of("sub done")]),
        Scripted("inner_replanner", lambda ctx: [AgentEvent.of("inner answer")]),
        name="executor",
    )
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("big")])),
        inner,
        new_replanner(ScriptedModel([update("big again")], cycle=True)),
        max_iterations=2,
    )
    events = [e async for e in Runner(agent).run("go")]
    assert simplify_events(events).count("inner_replanner: inner answer") == 2
    assert isinstance(events[-1].exception, MaxIterationsError)
    assert events[-1].agent_name == "plan_execute"


async def test_an_executor_that_breaks_ends_the_loop_as_the_response() -> None:
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("a", "b")])),
        Scripted("w", lambda ctx: [AgentEvent.of("stop here"), AgentEvent.break_loop()]),
        Scripted("r", lambda ctx: [AgentEvent.of("never")]),
    )
    result = await Runner(agent).invoke("go")
    assert simplify_events(result.events)[-2:] == ["w: stop here", "w: [break_loop]"]
    assert result.text == "stop here"


async def test_an_executor_that_breaks_still_finishes_and_its_step_counts() -> None:
    """DESIGN: a break lets the emitting agent finish; the loop stops after it."""
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("look it up")])),
        Scripted("w", lambda ctx: [AgentEvent.break_loop(), AgentEvent.of("the answer is 42")]),
        Scripted("r", lambda ctx: [AgentEvent.of("never")]),
    )
    result = await Runner(agent).invoke("go")
    assert result.text == "the answer is 42"
    assert [(s.step, s.result) for s in result.session["executed_steps"]] == [
        ("look it up", "the answer is 42")
    ]


async def test_an_executor_that_broke_before_a_pause_ends_the_loop_after_the_resume() -> None:
    class BreakThenAsk(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                yield AgentEvent.break_loop()
                yield ctx.interrupt("sure?")
                return
            yield AgentEvent.of(f"done: {ctx.resume.data}")

    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("a", "b")])),
        BreakThenAsk("w"),
        Scripted("r", lambda ctx: [AgentEvent.of("never")]),
    )
    runner = Runner(agent)
    paused = await runner.invoke("go")
    assert paused.interrupt is not None
    result = await runner.invoke_resume(paused.checkpoint_id, "yes")
    assert result.text == "done: yes"
    assert [s.step for s in result.session["executed_steps"]] == ["a"]


# -- what a replanner's reply means -------------------------------------------------------------
async def test_a_blank_replanner_reply_after_the_last_step_answers_with_its_result() -> None:
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("a", "b")])),
        new_executor(ScriptedModel(["result a", "result b"])),
        new_replanner(ScriptedModel(["", ""])),
    )
    result = await Runner(agent).invoke("go")
    assert result.text == "result b"


async def test_an_empty_replanner_reply_keeps_the_remaining_plan() -> None:
    # Models do return an empty message; it is no answer, so step b still runs.
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("a", "b")])),
        new_executor(ScriptedModel(["A done", "B done"])),
        new_replanner(ScriptedModel(["", "both done"])),
    )
    result = await Runner(agent).invoke("go")
    assert [s.step for s in result.session["executed_steps"]] == ["a", "b"]
    assert result.text == "both done"


async def test_a_replanner_answer_is_its_last_output_not_a_tool_result_before_it() -> None:
    @adk.tool
    def note(text: str) -> str:
        """Take a note."""
        return "noted"

    replanner = new_replanner(
        ScriptedModel([Reply(tool_calls=[tool_call("note", {"text": "x"})]), " ", "done"])
    )
    replanner.tools.append(note)
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("a", "b")])),
        new_executor(ScriptedModel(["A done", "B done"])),
        replanner,
    )
    result = await Runner(agent).invoke("go")
    assert [s.step for s in result.session["executed_steps"]] == ["a", "b"]
    assert result.text == "done"


async def test_blank_plan_steps_are_dropped() -> None:
    executor_model = ScriptedModel(["did it"])
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("  ", "", " real step ")])),
        new_executor(executor_model),
        new_replanner(ScriptedModel(["done"])),
    )
    result = await Runner(agent).invoke("go")
    assert result.session["executed_steps"] == [ExecutedStep(step="real step", result="did it")]
    assert executor_model.calls == 1
    assert Plan.model_validate({"steps": [" ", "x "]}) == Plan(steps=["x"])


# -- plans stored in the session by a role that then pauses ---------------------------------------
@adk.tool
def set_plan(steps: list[str], ctx: adk.ToolContext) -> str:
    """Store the plan."""
    ctx.session["plan"] = Plan(steps=steps)
    return "stored"


@adk.tool(require_approval=True)
def notify(text: str) -> str:
    """Tell the user (needs approval)."""
    return "notified"


def store_and_notify(*steps: str) -> Reply:
    return Reply(
        tool_calls=[
            tool_call("set_plan", {"steps": list(steps)}),
            tool_call("notify", {"text": "planned"}),
        ]
    )


async def test_a_planner_that_stores_its_plan_and_pauses_in_one_turn(tmp_path: object) -> None:
    # Resumed from the stored checkpoint bytes by fresh agents, as a new process would.
    def app(planner_script: list[str | Reply]) -> PlanExecute:
        planner = ReActAgent("planner", ScriptedModel(planner_script), tools=[set_plan, notify])
        return PlanExecute(
            planner,
            new_executor(ScriptedModel(["A", "B"])),
            new_replanner(ScriptedModel(["", "done"])),
        )

    store = SQLiteCheckpointStore(f"{tmp_path}/checkpoints.db")
    first = await Runner(app([store_and_notify("a", "b")]), checkpoint_store=store).invoke("go")
    assert first.interrupt is not None and first.checkpoint_id is not None
    second = await Runner(app(["planned"]), checkpoint_store=store).invoke_resume(
        first.checkpoint_id, True
    )
    assert [s.step for s in second.session["executed_steps"]] == ["a", "b"]
    assert second.text == "done"
    await store.aclose()


async def test_a_replanner_that_stores_a_plan_and_pauses_in_one_turn() -> None:
    replanner = ReActAgent(
        "replanner",
        ScriptedModel([store_and_notify("b"), "stored it", "all done"]),
        tools=[set_plan, notify],
    )
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("a", "x")])),
        new_executor(ScriptedModel(["A", "B"])),
        replanner,
    )
    runner = Runner(agent)
    first = await runner.invoke("go")
    assert first.interrupt is not None and first.checkpoint_id is not None
    second = await runner.invoke_resume(first.checkpoint_id, True)
    # Its reply after the pause is no answer: it stored a new plan, and step b runs.
    assert [s.step for s in second.session["executed_steps"]] == ["a", "b"]
    assert second.text == "all done"


async def test_a_plan_execute_the_executor_calls_leaves_the_outer_state_alone(
    tmp_path: object,
) -> None:
    # The inner PlanExecute shares the session (AgentTool does) and so the same keys; the outer
    # run's objective, plan and finished steps must survive it, also across a pause inside it.
    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    def app(
        inner_executor: list[str | Reply],
        outer_executor: list[str | Reply],
        outer_replanner: list[str | Reply],
    ) -> PlanExecute:
        inner = PlanExecute(
            new_planner(ScriptedModel([plan_json("pay 5")]), name="inner_planner"),
            new_executor(ScriptedModel(inner_executor), [pay], name="inner_executor"),
            new_replanner(ScriptedModel(["Paid 5."]), name="inner_replanner"),
            name="payments",
            description="Makes payments.",
        )
        return PlanExecute(
            new_planner(ScriptedModel([plan_json("check the bill", "pay the bill")])),
            new_executor(ScriptedModel(outer_executor), [adk.AgentTool(inner)]),
            new_replanner(ScriptedModel(outer_replanner)),
        )

    pay_call = Reply(tool_calls=[tool_call("payments", {"request": "pay 5"})])
    store = SQLiteCheckpointStore(f"{tmp_path}/checkpoints.db")
    first = await Runner(
        app(
            [Reply(tool_calls=[tool_call("pay", {"amount": 5})])],
            ["The bill is 5.", pay_call],
            [update("pay the bill")],
        ),
        checkpoint_store=store,
    ).invoke("settle my bill")
    assert first.interrupt is not None and first.checkpoint_id is not None
    fresh = app(["Paid."], ["Paid the bill."], ["Bill checked and paid."])
    second = await Runner(fresh, checkpoint_store=store).invoke_resume(
        first.checkpoint_id, {"approved": True}
    )
    assert second.text == "Bill checked and paid."
    assert second.session["objective"] == "settle my bill"
    assert second.session["executed_steps"] == [
        ExecutedStep(step="check the bill", result="The bill is 5."),
        ExecutedStep(step="pay the bill", result="Paid the bill."),
    ]
    assert second.session["plan"] == Plan(steps=[])
    await store.aclose()


async def test_a_role_resumed_after_a_pause_inside_a_plan_execute_it_called_reads_its_own_state(
    tmp_path: object,
) -> None:
    # A resumed ReActAgent renders its instruction from the session, which held the inner
    # PlanExecute's objective, plan and finished steps (it paused inside them): the executor
    # went on told the inner objective as its own, where it had started with the outer one.
    def app(
        inner_executor: list[str | Reply],
        outer_executor: list[str | Reply],
        outer_replanner: list[str | Reply],
    ) -> tuple[PlanExecute, ScriptedModel]:
        model = ScriptedModel(outer_executor)
        executor = new_executor(
            model,
            [adk.AgentTool(_payments(inner_executor))],
            instruction="Work towards: {objective}. Left to do: {plan}",
        )
        outer = PlanExecute(
            new_planner(ScriptedModel([plan_json("check the bill", "pay the bill")])),
            executor,
            new_replanner(ScriptedModel(outer_replanner)),
        )
        return outer, model

    pay_call = Reply(tool_calls=[tool_call("payments", {"request": "pay 5"})])
    store = SQLiteCheckpointStore(f"{tmp_path}/checkpoints.db")
    paused, _ = app(
        [Reply(tool_calls=[tool_call("pay", {"amount": 5})])],
        ["The bill is 5.", pay_call],
        [update("pay the bill")],
    )
    first = await Runner(paused, checkpoint_store=store).invoke("settle my bill")
    assert first.interrupt is not None and first.checkpoint_id is not None
    # The inner one gave the role's state back as it paused (it saved its own in its steps).
    assert first.session["objective"] == "settle my bill"
    # Earlier versions paused with the inner one's in the session: the step puts its own back.
    async with rewrite_checkpoint(store, first.checkpoint_id) as body:
        assert body["session"]["objective"] == "settle my bill"
        body["session"]["objective"] = "pay 5"
        body["session"]["plan"] = {"__adk_type__": "prebuilt.Plan", "data": {"steps": ["pay 5"]}}
    fresh, model = app(["Paid."], ["Paid the bill."], ["Bill checked and paid."])
    second = await Runner(fresh, checkpoint_store=store).invoke_resume(
        first.checkpoint_id, {"approved": True}
    )

    assert second.text == "Bill checked and paid."
    system = model.requests[0].messages[0]
    assert system.content == "Work towards: settle my bill. Left to do: 1. pay the bill"
    await store.aclose()


async def test_a_role_that_ran_a_plan_execute_reads_its_own_state_at_its_next_model_call() -> None:
    # A ReActAgent renders its instruction again before a model call when what it reads changed.
    # The PlanExecute the executor ran (an AgentTool: the same session) left its objective and
    # plan there, so the executor's next call was told the inner objective as its own.
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("payments", {"request": "pay 5"})]), "Paid the bill."]
    )
    executor = new_executor(
        model,
        [adk.AgentTool(_payments(["Paid."]))],
        instruction="Work towards: {objective}. Left to do: {plan}",
    )
    outer = PlanExecute(
        new_planner(ScriptedModel([plan_json("pay the bill")])),
        executor,
        new_replanner(ScriptedModel(["Bill paid."])),
    )
    result = await Runner(outer).invoke("settle my bill")
    assert result.text == "Bill paid."
    first, second = (request.messages[0].content for request in model.requests)
    assert first == second == "Work towards: settle my bill. Left to do: 1. pay the bill"


async def test_a_role_whose_plan_execute_failed_reads_its_own_state_at_its_next_model_call() -> (
    None
):
    # The PlanExecute the executor ran (an AgentTool) failed: the tool's error went to the
    # executor's model, and its next call was told the inner objective and plan as its own, as
    # the inner one gave the outer values back only when it ended normally.
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("payments", {"request": "pay 5"})]), "Could not pay."]
    )
    payments = PlanExecute(
        ReActAgent("inner_planner", ScriptedModel(["I cannot plan a payment."])),
        new_executor(ScriptedModel([]), name="inner_executor"),
        new_replanner(ScriptedModel([]), name="inner_replanner"),
        name="payments",
        description="Makes payments.",
    )
    executor = new_executor(
        model,
        [adk.AgentTool(payments)],
        instruction="Work towards: {objective}. Left to do: {plan}",
    )
    outer = PlanExecute(
        new_planner(ScriptedModel([plan_json("pay the bill")])),
        executor,
        new_replanner(ScriptedModel(["Bill not paid."])),
    )
    result = await Runner(outer).invoke("settle my bill")
    assert result.text == "Bill not paid."
    assert "planner 'inner_planner' produced no plan" in model.requests[1].messages[-1].content
    first, second = (request.messages[0].content for request in model.requests)
    assert first == second == "Work towards: settle my bill. Left to do: 1. pay the bill"


async def test_a_plan_execute_as_the_executor_pauses_with_the_outer_state_in_the_session() -> None:
    # As the role itself (a workflow in the role), the inner one's pause went up with its own
    # objective, plan and finished steps in the session, so the checkpoint (and the paused
    # run's session) held them; it now gives the outer ones back first, as an AgentTool's does.
    def app(inner_executor: list[str | Reply]) -> PlanExecute:
        payments = _payments(inner_executor)
        return PlanExecute(
            new_planner(ScriptedModel([plan_json("pay the bill")])),
            payments,
            new_replanner(ScriptedModel(["Bill paid."])),
        )

    store = InMemoryCheckpointStore()
    paused = await Runner(
        app([Reply(tool_calls=[tool_call("pay", {"amount": 5})])]), checkpoint_store=store
    ).invoke("settle my bill")
    assert paused.interrupt is not None and paused.checkpoint_id is not None
    assert paused.session["objective"] == "settle my bill"
    assert paused.session["plan"] == Plan(steps=["pay the bill"])
    assert paused.session["executed_steps"] == []

    resumed = await Runner(app(["Paid."]), checkpoint_store=store).invoke_resume(
        paused.checkpoint_id, {"approved": True}
    )
    assert resumed.text == "Bill paid."
    assert resumed.session["executed_steps"] == [
        ExecutedStep(step="pay the bill", result="Paid 5.")
    ]


async def test_a_plan_a_helper_of_the_replanner_updates_is_the_replanners() -> None:
    # The replanner asks a helper agent (an AgentTool: a nested run of its own) to revise the
    # plan. update_plan looked for the step to hand its plan to in the helper's run only, found
    # none, and tagged the plan as another's: the replanner's reply ended the loop as its answer
    # and the revised step never ran.
    helper = ReActAgent(
        "helper",
        ScriptedModel([update("step two"), "Updated."]),
        description="Revises the plan.",
        tools=[adk.FunctionTool(_update_plan, name="update_plan")],
    )
    replanner = ReActAgent(
        "replanner",
        ScriptedModel(
            [
                Reply(tool_calls=[tool_call("helper", {"request": "revise the plan"})]),
                "I had the plan revised.",
                "All done.",
            ]
        ),
        tools=[adk.AgentTool(helper)],
    )
    executor = ScriptedModel(["One done.", "Two done."])
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("step one")])), new_executor(executor), replanner
    )

    result = await Runner(agent).invoke("go")

    assert result.text == "All done."
    assert executor.calls == 2
    assert executor.requests[1].messages[1].content.endswith("which is:\nstep two")


def _payments(inner_executor: list[str | Reply]) -> PlanExecute:
    """A PlanExecute that pays (its executor's pay call waits for approval), for nesting."""

    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    return PlanExecute(
        new_planner(ScriptedModel([plan_json("pay 5")]), name="inner_planner"),
        new_executor(ScriptedModel(inner_executor), [pay], name="inner_executor"),
        new_replanner(ScriptedModel(["Paid 5."]), name="inner_replanner"),
        name="payments",
        description="Makes payments.",
    )


async def test_a_plan_execute_the_replanner_calls_leaves_the_outer_state_alone(
    tmp_path: object,
) -> None:
    # As for the executor: the inner one keeps its state under the same keys. The replanner's
    # answer after it is the response (the inner's plan is not one the replanner stored), and the
    # outer objective and finished steps survive it, also across a pause inside it.
    def app(inner_executor: list[str | Reply], outer_replanner: list[str | Reply]) -> PlanExecute:
        payments = adk.AgentTool(_payments(inner_executor))
        return PlanExecute(
            new_planner(ScriptedModel([plan_json("check the bill")])),
            new_executor(ScriptedModel(["The bill is 5."])),
            ReActAgent("replanner", ScriptedModel(outer_replanner), tools=[payments]),
        )

    pay_call = Reply(tool_calls=[tool_call("payments", {"request": "pay 5"})])
    store = SQLiteCheckpointStore(f"{tmp_path}/checkpoints.db")
    first = await Runner(
        app([Reply(tool_calls=[tool_call("pay", {"amount": 5})])], [pay_call]),
        checkpoint_store=store,
    ).invoke("settle my bill")
    assert first.interrupt is not None and first.checkpoint_id is not None
    fresh = app(["Paid."], ["Bill checked and paid."])
    second = await Runner(fresh, checkpoint_store=store).invoke_resume(
        first.checkpoint_id, {"approved": True}
    )
    assert second.text == "Bill checked and paid."
    assert second.session["objective"] == "settle my bill"
    assert second.session["executed_steps"] == [
        ExecutedStep(step="check the bill", result="The bill is 5.")
    ]
    assert second.session["plan"] == Plan(steps=[])
    await store.aclose()


@pytest.mark.parametrize("pauses", [False, True], ids=["at-once", "paused-in-the-same-turn"])
@pytest.mark.parametrize("store", ["update_plan", "set_plan"])
async def test_a_plan_execute_as_the_replanner_keeps_its_plans_to_itself(
    store: str, pauses: bool
) -> None:
    # A PlanExecute as another's replanner: its planner's Plan output, and a plan its own
    # replanner stored (a store in the session itself, then a pause in the same model turn),
    # passed for plans the outer replanner handed over, so the outer loop went on with the
    # inner steps as its own after the inner one had answered.
    calls = [tool_call(store, {"steps": ["inner two"]}, id="call_s")]
    if pauses:
        calls.append(tool_call("notify", {"text": "replanned"}, id="call_n"))
    inner = PlanExecute(
        new_planner(ScriptedModel([plan_json("inner one")]), name="inner_planner"),
        new_executor(ScriptedModel(["Inner one done.", "Inner two done."]), name="inner_executor"),
        ReActAgent(
            "inner_replanner",
            ScriptedModel([Reply(tool_calls=calls), "Replanned.", "Inner answer."]),
            tools=[adk.FunctionTool(_update_plan, name="update_plan"), set_plan, notify],
        ),
        name="review",
    )
    outer_executor = ScriptedModel(["Outer one done.", "not an outer step"])
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("outer one")])), new_executor(outer_executor), inner
    )
    runner = Runner(agent, checkpoint_store=InMemoryCheckpointStore())

    result = await runner.invoke("go")
    if pauses:
        assert result.interrupt is not None and result.checkpoint_id is not None
        result = await runner.invoke_resume(result.checkpoint_id, True)

    assert result.text == "Inner answer."
    assert outer_executor.calls == 1
    assert result.session["executed_steps"] == [
        ExecutedStep(step="outer one", result="Outer one done.")
    ]


async def test_a_plan_execute_as_the_planner_plans_with_its_answer_not_its_own_plan() -> None:
    # Its planner's plan is its own working plan; what it hands over as the outer planner is its
    # answer. An answer that is no plan took the inner plan for the outer one.
    def app(answer: str) -> tuple[PlanExecute, ScriptedModel]:
        inner = PlanExecute(
            new_planner(ScriptedModel([plan_json("inner one")]), name="inner_planner"),
            new_executor(ScriptedModel(["Inner one done."]), name="inner_executor"),
            new_replanner(ScriptedModel([answer]), name="inner_replanner"),
            name="research",
        )
        executor = ScriptedModel(["Outer done."])
        outer = PlanExecute(inner, new_executor(executor), new_replanner(ScriptedModel(["Done."])))
        return outer, executor

    agent, executor = app(plan_json("outer one"))
    result = await Runner(agent).invoke("go")
    assert result.text == "Done."
    assert executor.requests[0].messages[1].content.endswith("which is:\nouter one")

    agent, executor = app("I researched it.")
    with pytest.raises(adk.RunError, match="planner 'research' produced no plan"):
        await Runner(agent).invoke("go")
    assert executor.calls == 0


async def test_a_replanner_that_runs_a_plan_execute_then_stores_a_plan() -> None:
    # Its own plan counts, stored after the inner one's; the next step runs on the outer state.
    executor_model = ScriptedModel(["The bill is 5.", "Told them."])
    replanner_model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("payments", {"request": "pay 5"})]),
            Reply(tool_calls=[tool_call("set_plan", {"steps": ["tell the user"]})]),
            "stored it",
            "Paid and told.",
        ]
    )
    payments = adk.AgentTool(_payments(["Paid."]))
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("check the bill")])),
        new_executor(executor_model),
        ReActAgent("replanner", replanner_model, tools=[payments, set_plan]),
    )
    result = await Runner(agent).invoke("settle my bill")
    assert result.text == "Paid and told."
    assert [s.step for s in result.session["executed_steps"]] == ["check the bill", "tell the user"]
    second_step = executor_model.requests[1].messages[1].content
    assert second_step.startswith("Objective:\nsettle my bill")
    assert "1. check the bill\n   Result: The bill is 5." in second_step


async def test_a_plan_execute_the_planner_calls_leaves_the_outer_state_alone() -> None:
    # The planner consults an inner PlanExecute, then plans: the objective stays the user's, and a
    # planner that gives no plan of its own fails rather than taking the inner one's.
    def app(planner_script: list[str | Reply], executor_model: ScriptedModel) -> PlanExecute:
        payments = adk.AgentTool(_payments(["Paid."]))
        return PlanExecute(
            ReActAgent("planner", ScriptedModel(planner_script), tools=[payments]),
            new_executor(executor_model),
            new_replanner(ScriptedModel(["Done."])),
        )

    consult = Reply(tool_calls=[tool_call("payments", {"request": "pay 5"})])
    executor_model = ScriptedModel(["Told them."])
    result = await Runner(app([consult, plan_json("tell the user")], executor_model)).invoke(
        "settle my bill"
    )
    assert result.text == "Done."
    assert result.session["objective"] == "settle my bill"
    assert executor_model.requests[0].messages[1].content.startswith("Objective:\nsettle my bill")

    with pytest.raises(adk.RunError, match="planner 'planner' produced no plan"):
        await Runner(app([consult, "I asked payments."], ScriptedModel([]))).invoke("go")


# -- two PlanExecutes in one tree -------------------------------------------------------------------
def _transfer(name: str) -> Reply:
    return Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": name})])


async def test_two_plan_executes_from_model_in_one_supervisor_are_independent() -> None:
    # Their roles are named after them, so the second planner reads the first one's plan as
    # another agent's words, not as a plan it wrote itself.
    research_model = ScriptedModel([plan_json("look it up"), "Found it.", "Research done."])
    writing_model = ScriptedModel([plan_json("write it up"), "Wrote it.", "Writing done."])
    boss = ReActAgent(
        "boss", ScriptedModel([_transfer("research"), _transfer("writing"), "All done."])
    )
    research = PlanExecute.from_model(research_model, name="research", description="Researches.")
    writing = PlanExecute.from_model(writing_model, name="writing", description="Writes.")
    assert [research.planner.name, research.executor.name, research.replanner.name] == [
        "research_planner",
        "research_executor",
        "research_replanner",
    ]
    result = await Runner(Supervisor(boss, [research, writing])).invoke("report on X")
    assert result.text == "All done."
    writing_planner_saw = writing_model.requests[0].messages
    assert not [m for m in writing_planner_saw if m.role == "assistant"]
    assert any(
        m.content.startswith("For context: [research_planner] said:") for m in writing_planner_saw
    )
    # The default name keeps the role names it always had (and checkpoints made with them).
    default = PlanExecute.from_model(ScriptedModel([]))
    assert [default.planner.name, default.executor.name, default.replanner.name] == [
        "planner",
        "executor",
        "replanner",
    ]


def test_plan_execute_workers_whose_roles_share_a_name_are_refused() -> None:
    boss = ReActAgent("boss", ScriptedModel([]))  # refused: it gets no workers

    def by_hand(name: str) -> PlanExecute:
        model = ScriptedModel([])
        return PlanExecute(new_planner(model), new_executor(model), new_replanner(model), name=name)

    with pytest.raises(
        ValueError,
        match=r"Supervisor 'boss': the planner of worker 'writing' and the planner of worker "
        r"'research' are both named 'planner', so each would read the other's messages as its "
        r"own; name them apart",
    ):
        Supervisor(boss, [by_hand("research"), by_hand("writing")])
    # ... and a role named like the supervisor or another worker.
    lone = PlanExecute.from_model(ScriptedModel([]), name="research")
    with pytest.raises(ValueError, match=r"the executor of worker 'research' and worker "):
        Supervisor(boss, [lone, ReActAgent("research_executor", ScriptedModel([]))])
    clash = PlanExecute(
        ReActAgent("boss", ScriptedModel([])),
        new_executor(ScriptedModel([])),
        new_replanner(ScriptedModel([])),
    )
    with pytest.raises(
        ValueError, match=r"the planner of worker 'plan_execute' and the supervisor"
    ):
        Supervisor(boss, [clash])
    # Apart, they are fine; so is a role named like its own PlanExecute.
    Supervisor(boss, [lone, PlanExecute.from_model(ScriptedModel([]), name="writing")])
    fresh = ReActAgent("boss", ScriptedModel([]))
    Supervisor(fresh, [PlanExecute.from_model(ScriptedModel([]), name="planner")])


def _by_hand(name: str) -> PlanExecute:
    """A PlanExecute whose roles keep the bare names (built by hand, not by from_model)."""
    model = ScriptedModel([])
    roles = new_planner(model), new_executor(model), new_replanner(model)
    return PlanExecute(*roles, name=name, description=f"Does {name}.")


_SHARED = (
    r"the planner of PlanExecute 'research' and the planner of PlanExecute 'writing' are both "
    r"named 'planner': they write to one history, which each agent reads by author name, so "
    r"each would read the other's messages as its own; name them apart"
)


@pytest.mark.parametrize(
    ("build", "owner"),
    [
        (lambda a, b: SequentialAgent("both", [a, b]), "SequentialAgent 'both'"),
        (lambda a, b: LoopAgent("both", [a, b], max_iterations=2), "LoopAgent 'both'"),
        (lambda a, b: adk.ParallelAgent("both", [a, b]), "ParallelAgent 'both'"),
        (
            lambda a, b: SequentialAgent("both", [SequentialAgent("first", [a]), b]),
            "SequentialAgent 'both'",
        ),
        (
            lambda a, b: adk.with_sub_agents(ReActAgent("router", ScriptedModel([])), [a, b]),
            "agent 'router'",
        ),
    ],
    ids=["sequential", "loop", "parallel", "nested", "transfer-flow"],
)
def test_plan_executes_whose_roles_share_a_name_are_refused_in_any_composition(
    build: Any, owner: str
) -> None:
    # Only Supervisor refused them: in a sequence (or a loop, or after a parallel's branches
    # merged) the second planner read the first one's plan as one it wrote.
    with pytest.raises(ValueError, match=f"^{owner}: {_SHARED}$"):
        build(_by_hand("research"), _by_hand("writing"))


def test_agents_that_share_a_name_with_a_plan_execute_role_only_where_they_meet() -> None:
    # A plain agent named like a role, in one history with it, is refused too.
    with pytest.raises(
        ValueError,
        match=r"^SequentialAgent 's': the executor of PlanExecute 'research' and agent "
        r"'executor' are both named 'executor'",
    ):
        SequentialAgent("s", [_by_hand("research"), ReActAgent("executor", ScriptedModel([]))])
    # The same PlanExecute twice is one agent, not two; one called as an AgentTool runs on a
    # history of its own (its planner reads the caller's messages as another agent's).
    again = _by_hand("research")
    SequentialAgent("s", [LoopAgent("twice", [again], max_iterations=2), again])
    desk = ReActAgent("desk", ScriptedModel([]), tools=[adk.AgentTool(_by_hand("writing"))])
    SequentialAgent("s", [_by_hand("research"), desk])
    # Plain agents may still share a name, as they always could.
    SequentialAgent(
        "s",
        [
            ReActAgent("w", ScriptedModel([])),
            SequentialAgent("t", [ReActAgent("w", ScriptedModel([]))]),
        ],
    )


def test_one_agent_as_a_role_of_two_plan_executes_in_one_history_is_refused() -> None:
    # One planner object given to two PlanExecutes: in a sequence the second planner read the
    # first one's plan as its own, as two planners of one name would, but the check let it pass
    # as "one agent wired in twice".
    planner = new_planner(ScriptedModel([]))

    def with_shared_planner(name: str) -> PlanExecute:
        model = ScriptedModel([])
        executor = new_executor(model, name=f"{name}_executor")
        return PlanExecute(
            planner,
            executor,
            new_replanner(model, name=f"{name}_replanner"),
            name=name,
            description=f"Does {name}.",
        )

    research, writing = with_shared_planner("research"), with_shared_planner("writing")
    shared = (
        r"the planner of PlanExecute 'research' is also the planner of PlanExecute 'writing' "
        r"\(one agent 'planner'\): both write to one history, which each reads by author name, "
        r"so each would read the other's messages as its own; give each its own agent, named apart"
    )
    with pytest.raises(ValueError, match=f"^SequentialAgent 's': {shared}$"):
        SequentialAgent("s", [research, writing])
    with pytest.raises(ValueError, match=f"^agent 'router': {shared}$"):
        adk.with_sub_agents(ReActAgent("router", ScriptedModel([])), [research, writing])
    # Each in a history of its own (one called as an AgentTool) is fine.
    desk = ReActAgent("desk", ScriptedModel([]), tools=[adk.AgentTool(writing)])
    SequentialAgent("s", [research, desk])


def test_a_plan_execute_role_named_like_the_flow_parent_or_deep_in_a_worker_is_refused() -> None:
    # The parent of a transfer flow writes to the history its sub-agents do, and a Supervisor's
    # worker runs in it too: a coordinator named like a role below it, or a PlanExecute inside a
    # worker (in a sequence) whose role is named like the supervisor, read each other's messages
    # as their own. Only the sub-agents were compared, and a worker only by its own name.
    with pytest.raises(
        ValueError,
        match=r"^agent 'planner': the planner of PlanExecute 'research' and agent 'planner' "
        r"are both named 'planner'",
    ):
        adk.with_sub_agents(ReActAgent("planner", ScriptedModel([])), [_by_hand("research")])
    with pytest.raises(
        ValueError,
        match=r"^agent 'planner': the planner of PlanExecute 'research' and agent 'planner' "
        r"are both named 'planner'",
    ):
        Supervisor(
            ReActAgent("planner", ScriptedModel([])),
            [SequentialAgent("team", [_by_hand("research")])],
        )
    with pytest.raises(ValueError, match=r"^agent 'boss': .* both named 'planner'"):
        Supervisor(
            ReActAgent("boss", ScriptedModel([])),
            [SequentialAgent("one", [_by_hand("research")]), _by_hand("writing")],
        )
    # Named apart, both are fine.
    adk.with_sub_agents(ReActAgent("router", ScriptedModel([])), [_by_hand("research")])
    Supervisor(
        ReActAgent("boss", ScriptedModel([])),
        [SequentialAgent("team", [_by_hand("research")]), ReActAgent("w", ScriptedModel([]))],
    )


@pytest.mark.parametrize(
    ("build", "owner"),
    [
        (lambda flow, b: SequentialAgent("both", [flow, b]), "SequentialAgent 'both'"),
        (
            lambda flow, b: adk.with_sub_agents(ReActAgent("router", ScriptedModel([])), [flow, b]),
            "agent 'router'",
        ),
        (
            lambda flow, b: Supervisor(ReActAgent("boss", ScriptedModel([])), [flow, b]),
            "agent 'boss'",
        ),
    ],
    ids=["sequential", "transfer-flow", "supervisor"],
)
@pytest.mark.parametrize("where", ["parent", "sub-agent"])
def test_a_plan_execute_inside_a_nested_flow_is_checked_at_the_outer_level(
    build: Any, owner: str, where: str
) -> None:
    # A flow nested under a workflow or another flow was walked only by its own name: a
    # PlanExecute as the flow's parent, or inside a sub-agent's node, kept its roles out of the
    # outer check, and its planner and another's both wrote as 'planner' to one history.
    helper = ReActAgent("helper", ScriptedModel([]))
    if where == "parent":
        flow = adk.with_sub_agents(_by_hand("research"), [helper])
    else:
        flow = adk.with_sub_agents(helper, [SequentialAgent("team", [_by_hand("research")])])
    with pytest.raises(ValueError, match=f"^{owner}: {_SHARED}$"):
        build(flow, _by_hand("writing"))


def test_sub_agents_wired_top_down_are_checked_against_the_whole_graph() -> None:
    # Wiring a sub-agent of a flow after the flow was made (top-down) compared the new
    # sub-agents with that sub-agent only, not with the graph it already was in: a PlanExecute
    # parent's planner and one under the sub-agent both wrote as 'planner' to one history.
    helper = ReActAgent("helper", ScriptedModel([]))
    adk.with_sub_agents(_by_hand("research"), [helper])
    with pytest.raises(ValueError, match=f"^agent 'helper': {_SHARED}$"):
        adk.with_sub_agents(helper, [_by_hand("writing")])
    assert helper.sub_agents == []  # refused before anything was adopted
    # Named apart, it is fine.
    adk.with_sub_agents(helper, [PlanExecute.from_model(ScriptedModel([]), name="writing")])


async def test_a_checkpoint_of_the_old_role_names_resumes_or_fails_clearly() -> None:
    # Before roles were named after the PlanExecute, from_model(name="research") named them
    # planner, executor and replanner: a run paused in one of them does not fit the new names
    # and is refused naming the step, keeping the checkpoint; the old names, given by hand,
    # resume it.
    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    def model() -> ScriptedModel:
        """One script for all three roles, as from_model shares one model."""
        pay_call = Reply(tool_calls=[tool_call("pay", {"amount": 5})])
        return ScriptedModel([plan_json("pay 5"), pay_call, "Paid 5.", "Bill paid."])

    shared = model()
    old = PlanExecute(
        new_planner(shared), new_executor(shared, [pay]), new_replanner(shared), name="research"
    )
    runner = Runner(old)
    first = await runner.invoke("pay my bill")
    assert first.interrupt is not None and first.checkpoint_id is not None

    renamed = Runner(
        PlanExecute.from_model(model(), [pay], name="research"),
        checkpoint_store=runner.checkpoint_store,
    )
    with pytest.raises(
        adk.RunError, match=r"the step that paused, 'executor', is no longer one of its steps"
    ):
        await renamed.invoke_resume(first.checkpoint_id, {"approved": True})

    resumed_model = ScriptedModel(["Paid 5.", "Bill paid."])
    by_hand = PlanExecute(
        new_planner(ScriptedModel([])),
        new_executor(resumed_model, [pay]),
        new_replanner(ScriptedModel(["Bill paid."])),
        name="research",
    )
    again = Runner(by_hand, checkpoint_store=runner.checkpoint_store)
    result = await again.invoke_resume(first.checkpoint_id, {"approved": True})
    assert result.text == "Bill paid."


# -- a workflow in a role reads the step prompt ----------------------------------------------------
def _user_texts(request: Any) -> list[str]:
    return [m.content for m in request.messages if m.role == "user"]


async def test_a_workflow_executor_reads_the_step_as_a_plain_agent_would() -> None:
    # Its first agent's input is the step prompt; the next one's adds what the first said; the
    # run's input and earlier steps stay out, as they do for a plain executor.
    researcher_model = ScriptedModel(["Paris.", "2.1 million."])
    writer_model = ScriptedModel(["The capital is Paris.", "Paris has 2.1 million people."])
    executor = SequentialAgent(
        "executor",
        [ReActAgent("researcher", researcher_model), ReActAgent("writer", writer_model)],
    )
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("find the capital", "find its population")])),
        executor,
        new_replanner(ScriptedModel(["", "Paris, 2.1 million."])),
    )
    result = await Runner(agent).invoke("Capital of France and its population?")
    assert result.text == "Paris, 2.1 million."
    assert [s.result for s in result.session["executed_steps"]] == [
        "The capital is Paris.",
        "Paris has 2.1 million people.",
    ]
    [first_prompt] = _user_texts(researcher_model.requests[0])
    assert first_prompt.startswith("Objective:\nCapital of France and its population?")
    assert first_prompt.endswith("which is:\nfind the capital")
    assert _user_texts(writer_model.requests[0]) == [
        first_prompt,
        "For context: [researcher] said: Paris..",
    ]
    [second_prompt] = _user_texts(researcher_model.requests[1])
    assert second_prompt.endswith("which is:\nfind its population")
    assert "   Result: The capital is Paris." in second_prompt
    assert simplify_events(result.events)[2:6] == [
        "researcher: Paris.",
        "writer: The capital is Paris.",
        "researcher: 2.1 million.",
        "writer: Paris has 2.1 million people.",
    ]


async def test_a_workflow_executor_paused_in_its_second_agent_resumes_on_the_step(
    tmp_path: object,
) -> None:
    @adk.tool(require_approval=True)
    def publish(text: str) -> str:
        """Publish (a person approves it first)."""
        return f"published {text}"

    def app(writer_script: list[str | Reply]) -> tuple[PlanExecute, ScriptedModel, ScriptedModel]:
        researcher_model = ScriptedModel(["Paris."])
        editor_model = ScriptedModel(["Published Paris."])
        executor = SequentialAgent(
            "executor",
            [
                ReActAgent("researcher", researcher_model),
                ReActAgent("writer", ScriptedModel(writer_script), tools=[publish]),
                ReActAgent("editor", editor_model),
            ],
        )
        agent = PlanExecute(
            new_planner(ScriptedModel([plan_json("find the capital")])),
            executor,
            new_replanner(ScriptedModel(["Published: Paris."])),
        )
        return agent, researcher_model, editor_model

    store = SQLiteCheckpointStore(f"{tmp_path}/checkpoints.db")
    first_app, _, _ = app([Reply(tool_calls=[tool_call("publish", {"text": "Paris"})])])
    first = await Runner(first_app, checkpoint_store=store).invoke("Capital of France?")
    assert first.interrupt is not None and first.checkpoint_id is not None

    fresh, researcher_model, editor_model = app(["Done."])
    second = await Runner(fresh, checkpoint_store=store).invoke_resume(
        first.checkpoint_id, {"approved": True}
    )
    assert second.text == "Published: Paris."
    assert second.session["executed_steps"] == [
        ExecutedStep(step="find the capital", result="Published Paris.")
    ]
    assert researcher_model.calls == 0  # it had finished before the pause
    # The agent after the paused one reads the step as it stood, from before the pause too.
    prompt, *context = _user_texts(editor_model.requests[0])
    assert prompt.startswith("Objective:\nCapital of France?")
    assert prompt.endswith("which is:\nfind the capital")
    assert context == [
        "For context: [researcher] said: Paris..",
        'For context: [writer] called tool: `publish` with arguments: {"text": "Paris"}.',
        "For context: [writer] `publish` tool returned result: published Paris.",
        "For context: [writer] said: Done..",
    ]
    await store.aclose()


async def test_a_plan_execute_as_the_executor_plans_the_step() -> None:
    # Given directly as the executor, the inner PlanExecute plans the step it is given, not the
    # whole conversation; the outer run goes on from its own state.
    inner_planner_model = ScriptedModel([plan_json("look it up")])
    inner = PlanExecute(
        new_planner(inner_planner_model, name="inner_planner"),
        new_executor(ScriptedModel(["Paris."]), name="inner_executor"),
        new_replanner(ScriptedModel(["The capital is Paris."]), name="inner_replanner"),
        name="executor",
    )
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("find the capital")])),
        inner,
        new_replanner(ScriptedModel(["Paris."])),
    )
    result = await Runner(agent).invoke("Capital of France?")
    assert result.text == "Paris."
    [prompt] = _user_texts(inner_planner_model.requests[0])
    assert prompt.startswith("Objective:\nCapital of France?")
    assert prompt.endswith("which is:\nfind the capital")
    assert result.session["objective"] == "Capital of France?"
    assert result.session["executed_steps"] == [
        ExecutedStep(step="find the capital", result="The capital is Paris.")
    ]


async def test_a_workflow_replanner_reads_the_review_prompt() -> None:
    critic_model = ScriptedModel(["Looks complete."])
    replanner = SequentialAgent(
        "replanner",
        [
            ReActAgent("critic", critic_model),
            Scripted("answerer", lambda ctx: [AgentEvent.of("FINAL")]),
        ],
    )
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("s1")])),
        new_executor(ScriptedModel(["r1"])),
        replanner,
    )
    result = await Runner(agent).invoke("go")
    assert result.text == "FINAL"
    [prompt] = _user_texts(critic_model.requests[0])
    assert "1. s1\n   Result: r1" in prompt and "Remaining plan:\n(no steps)" in prompt


async def test_a_workflow_executor_paused_before_the_step_view_resumes_as_it_ran() -> None:
    # A checkpoint from before the step prompt reached workflow roles saved no 'fork': its agents
    # ran on the run's history, and they go on doing so (their saved states refer to it).
    @adk.tool(require_approval=True)
    def publish(text: str) -> str:
        """Publish (a person approves it first)."""
        return f"published {text}"

    def app(writer_script: list[str | Reply]) -> tuple[PlanExecute, ScriptedModel]:
        editor_model = ScriptedModel(["Published Paris."])
        executor = SequentialAgent(
            "executor",
            [
                ReActAgent(
                    "writer",
                    ScriptedModel(writer_script),
                    tools=[publish],
                ),
                ReActAgent("editor", editor_model),
            ],
        )
        agent = PlanExecute(
            new_planner(ScriptedModel([plan_json("find the capital")])),
            executor,
            new_replanner(ScriptedModel(["Published: Paris."])),
        )
        return agent, editor_model

    store = InMemoryCheckpointStore()
    publish_call = Reply(tool_calls=[tool_call("publish", {"text": "Paris"})])
    first = await Runner(app([publish_call])[0], checkpoint_store=store).invoke(
        "Capital?", checkpoint_id="c"
    )
    assert first.interrupt is not None
    body = decode_checkpoint(await store.get("c") or b"", "c")
    [address] = [a for a in body["states"] if a.endswith("agent:executor")]
    del body["states"][address]["plan_execute_step"]["fork"]
    await store.put("old", encode_checkpoint(body))

    fresh, editor_model = app(["Done."])
    second = await Runner(fresh, checkpoint_store=store).invoke_resume("old", {"approved": True})
    assert second.text == "Published: Paris."
    assert _user_texts(editor_model.requests[0])[0] == "Capital?"


async def test_two_plan_executes_in_parallel_branches_keep_their_own_plans() -> None:
    # They share the session's keys. One replanner answers while the other's update_plan call
    # has just stored its plan: it took that plan for its own and its loop went on with the
    # other's step, and its step's write-back lost the other's new plan, so the other's loop
    # ended on the tool's 'Plan updated' text. update_plan now hands its plan to its own step.
    replanned, answered = asyncio.Event(), asyncio.Event()

    def update_plan(steps: list[str], ctx: adk.ToolContext) -> str:
        """Replace the plan (new_replanner's tool), then let the other branch answer."""
        try:
            return _update_plan(steps, ctx)
        finally:
            replanned.set()

    class AnswersOnceTheOtherReplans(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            await replanned.wait()
            yield AgentEvent.of("A answer")
            answered.set()

    @adk.tool
    async def hold() -> str:
        """Wait until the other branch has answered."""
        await answered.wait()
        return "held"

    a_executor = ScriptedModel(["A1 done"])
    research = PlanExecute(
        new_planner(ScriptedModel([plan_json("a1")]), name="a_planner"),
        new_executor(a_executor, name="a_executor"),
        AnswersOnceTheOtherReplans("a_replanner"),
        name="research",
    )
    replan_and_hold = Reply(
        tool_calls=[tool_call("update_plan", {"steps": ["b2"]}), tool_call("hold", {})]
    )
    b_executor = ScriptedModel(["B1 done", "B2 done"])
    writing = PlanExecute(
        new_planner(ScriptedModel([plan_json("b1")]), name="b_planner"),
        new_executor(b_executor, name="b_executor"),
        ReActAgent(
            "b_replanner",
            ScriptedModel([replan_and_hold, "B answer"]),
            tools=[adk.FunctionTool(update_plan), hold],
            return_directly=["update_plan"],
        ),
        name="writing",
    )
    result = await Runner(adk.ParallelAgent("both", [research, writing])).invoke("go")
    said = simplify_events(result.events)
    assert "a_replanner: A answer" in said and said[-2:] == [
        "b_replanner: B answer",
        "b_replanner: [break_loop]",
    ]
    assert a_executor.calls == 1 and b_executor.calls == 2
    assert b_executor.requests[1].messages[1].content.endswith("which is:\nb2")


async def test_a_plan_another_plan_execute_stored_between_two_steps_is_refused() -> None:
    # Between two steps of one PlanExecute (here while a callback awaits), one beside it stored
    # its plan: the next step would carry out the other's plan, so the run fails saying why.
    b_planned = asyncio.Event()

    async def before_agent(agent: Any, ctx: RunContext) -> None:
        if agent.name == "b_executor":
            b_planned.set()  # its planner has stored its plan by now
        elif agent.name == "a_executor":
            await b_planned.wait()

    def plan_execute(name: str) -> PlanExecute:
        return PlanExecute(
            new_planner(ScriptedModel([plan_json(f"{name}1")]), name=f"{name}_planner"),
            new_executor(ScriptedModel([f"{name}1 done"]), name=f"{name}_executor"),
            new_replanner(ScriptedModel([f"{name} answer"]), name=f"{name}_replanner"),
            name=name,
        )

    runner = Runner(
        adk.ParallelAgent("both", [plan_execute("a"), plan_execute("b")]),
        callbacks=[adk.Callbacks(before_agent=before_agent)],
    )
    with pytest.raises(
        adk.RunError,
        match=r"plan-execute role 'a_executor': session\['plan'\] holds a plan another "
        r"PlanExecute stored \(agent:both/agent:b\) since this one's last step\. PlanExecutes "
        r"running at the same time in one session \(branches of a ParallelAgent\) share",
    ):
        await runner.invoke("go")


@pytest.mark.parametrize("emit", [False, True])
async def test_plans_an_agent_tool_shows_from_its_nested_run_are_not_the_roles(emit: bool) -> None:
    # A replanner that asks a PlanExecute (an AgentTool) and then answers: with the tool's inner
    # events shown outside (emit_inner_events), they pass through the replanner's step as its
    # agent's events, the inner planner's Plan among them. The copies the tool shows had their
    # flags cleared, _INNER_PLAN with them, and the step took that plan for one its replanner
    # handed over: the outer loop went on executing the inner plan after the replanner answered.
    inner = PlanExecute.from_model(
        ScriptedModel([plan_json("look it up"), "Found it.", "It is 42."]),
        name="inner",
        description="Researches a question.",
    )
    replanner = ReActAgent(
        "outer_replanner",
        ScriptedModel([Reply(tool_calls=[tool_call("inner", {"request": "what is it?"})]), "42."]),
        tools=[adk.AgentTool(inner, emit_inner_events=emit)],
    )
    executor = ScriptedModel(["Asked."])
    outer = PlanExecute(
        new_planner(ScriptedModel([plan_json("ask")]), name="outer_planner"),
        new_executor(executor, name="outer_executor"),
        replanner,
        name="outer",
    )
    result = await Runner(outer).invoke("find the answer")
    assert result.text == "42."
    assert executor.calls == 1


@pytest.mark.parametrize("role", ["planner", "executor", "replanner"])
async def test_a_model_stream_failing_inside_a_workflow_role_is_its_agents_error(role: str) -> None:
    """A role that is a workflow (a ``SequentialAgent`` executor, say) whose agent's streamed reply
    breaks mid-stream (a real wire server sending an SSE event that is not JSON): the run fails as
    that agent's error, which its ``after_agent`` sees, as when the agent is the role itself. The
    step read the stream for the role's text first and raised the model's error itself, so the
    run failed as the workflow's ("agent 'work' failed: ModelError ..."), the agent that called
    the model never failed, and its callbacks and span saw it closed instead."""
    seen: list[tuple[str, str | None]] = []

    def after_agent(agent: Any, ctx: RunContext, error: Any) -> None:
        seen.append((agent.name, error.type if error is not None else None))

    async with OpenAIServer(
        respond=lambda body: Wire(text="a partial answer", malformed_after=2)
    ) as server:
        failing = ReActAgent("caller", wire_model(server), instruction="Answer.")
        work = SequentialAgent("work", [failing])
        roles: dict[str, adk.Agent] = {
            "planner": new_planner(ScriptedModel([plan_json("one step")])),
            "executor": new_executor(ScriptedModel(["done"])),
            "replanner": new_replanner(ScriptedModel(["the answer"])),
        }
        roles[role] = work
        agent = PlanExecute(roles["planner"], roles["executor"], roles["replanner"])
        runner = Runner(
            agent, enable_streaming=True, callbacks=[adk.Callbacks(after_agent=after_agent)]
        )
        with pytest.raises(adk.RunError) as raised:
            await runner.invoke("go")
    assert raised.value.event.agent_name == "caller", raised.value
    assert raised.value.error.type == "ModelError"
    assert ("caller", "ModelError") in seen, seen


class _ExitsWithABrokenStream(BaseAgent):
    """Exits with a streamed answer whose source breaks after its first chunk."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        async def chunks() -> AsyncIterator[adk.MessageChunk]:
            yield adk.MessageChunk(content="a partial ")
            raise adk.ModelError("the wire broke")

        stream = adk.MessageStream(chunks())
        yield AgentEvent(output=adk.AgentOutput(stream=stream), action=adk.AgentAction(exit=True))


@pytest.mark.parametrize("how", ["invoke", "run reading the stream"])
async def test_an_executor_workflows_exit_whose_stream_breaks_fails_the_run(how: str) -> None:
    """An agent inside a workflow executor exits with a streamed answer that breaks. The step's
    ``_text_of`` leaves the stream's failure to the agent that streamed it, but on an exit that
    agent is closed at once and the driver above skipped the stream its reader had read: the run
    ended as if it had answered (``invoke`` gave the planner's plan JSON as the run's text)."""
    executor = SequentialAgent("work", [_ExitsWithABrokenStream("streamer")])
    agent = PlanExecute(
        new_planner(ScriptedModel([plan_json("one", "two")])),
        executor,
        new_replanner(ScriptedModel(["the answer"])),
    )
    runner = Runner(agent, enable_streaming=True)
    if how == "invoke":
        with pytest.raises(adk.RunError) as raised:
            await runner.invoke("go")
        failure = raised.value.event
    else:
        errors = []
        async for event in runner.run("go"):
            output = event.output
            if output is not None and output.stream is not None and event.agent_name == "streamer":
                with pytest.raises(adk.ModelError):  # as a streaming UI reads it
                    await output.stream.collect()
            if event.error is not None:
                errors.append(event)
        assert len(errors) == 1, errors
        failure = errors[0]
    assert failure.agent_name == "streamer" and failure.error is not None
    assert failure.error.type == "ModelError"
