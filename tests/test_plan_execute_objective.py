"""PlanExecute's objective: what was asked, without the transfer bookkeeping of a flow around it."""

from __future__ import annotations

import json

from adk import Message, Runner
from adk.testing import ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, Supervisor, new_executor, new_planner, new_replanner


def _research(planner_model: ScriptedModel, executor_model: ScriptedModel) -> PlanExecute:
    return PlanExecute(
        new_planner(planner_model, name="r_planner"),
        new_executor(executor_model, tools=[], name="r_executor"),
        new_replanner(ScriptedModel(["Tea costs 4 EUR."]), name="r_replanner"),
        name="research",
        description="Researches with a plan.",
    )


async def test_a_worker_plan_execute_objective_leaves_out_the_supervisors_transfers() -> None:
    # A supervisor says what it wants and transfers in one message (and, as models do, asks for
    # a second transfer beside it). The objective every executor and replanner prompt repeats
    # held the transfer_to_agent calls and their results ("Transferred to agent 'research'",
    # "Error: ignored: one transfer per turn ..."): routing that says nothing about the task.
    delegate = Message.assistant(
        "Research tea prices",
        [
            tool_call("transfer_to_agent", {"agent_name": "research"}, id="t1"),
            tool_call("transfer_to_agent", {"agent_name": "research"}, id="t2"),
        ],
    )
    planner_model = ScriptedModel([json.dumps({"steps": ["find prices"]})])
    executor_model = ScriptedModel(["4 EUR a box."])
    manager = ReActAgent("manager", ScriptedModel([delegate, "Tea costs 4 EUR."]))
    app = Supervisor(manager, [_research(planner_model, executor_model)])

    result = await Runner(app).invoke("Write about tea.")

    objective = "Write about tea.\nFor context: [manager] said: Research tea prices."
    assert result.session["objective"] == objective
    prompt = executor_model.requests[0].messages[-1].content
    assert prompt.startswith(f"Objective:\n{objective}\n\nPlan (remaining steps):\n1. find prices")
    assert "transfer" not in prompt.lower()
    # The planner still reads the conversation as it is.
    planner_view = [m.content for m in planner_model.requests[0].messages]
    assert any("`transfer_to_agent` tool returned result" in text for text in planner_view)
