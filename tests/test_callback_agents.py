"""The ``agent`` a ``before_agent``/``after_agent`` callback is given is the agent the user made,
not a wrapper the framework runs in its place: a ``Supervisor`` worker's report-back, a
``PlanExecute`` role's step, the loop of a ``ReActAgent`` that has agents to transfer to. A
callback that compares it with its agents (``agent is writer``) or reads its settings
(``agent.output_key``, CrewAI's ``task_callback`` ported) must find them."""

from __future__ import annotations

import json

from adk import Agent, Runner
from adk.callbacks import Callbacks
from adk.context import RunContext
from adk.events import ErrorInfo
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, Supervisor, new_executor, new_planner, new_replanner


def _transfer(name: str) -> Reply:
    return Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": name})])


async def test_callbacks_get_the_agents_the_user_made() -> None:
    writer = ReActAgent("writer", ScriptedModel(["A draft."]), description="W", output_key="draft")
    planner = new_planner(ScriptedModel([json.dumps({"steps": ["check"]})]), name="r_planner")
    executor = new_executor(ScriptedModel(["Checked."]), tools=[], name="r_executor")
    replanner = new_replanner(ScriptedModel(["Fine."]), name="r_replanner")
    review = PlanExecute(planner, executor, replanner, name="review", description="R")
    manager = ReActAgent(
        "manager", ScriptedModel([_transfer("writer"), _transfer("review"), "Done."])
    )
    app = Supervisor(manager, [writer, review])

    started: list[object] = []
    saved: dict[str, str] = {}

    def before(agent: Agent, ctx: RunContext) -> None:
        started.append(agent)

    def after(agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        key = getattr(agent, "output_key", None)  # a task_callback saving each task's output
        if isinstance(agent, ReActAgent) and key is not None:
            saved[agent.name] = ctx.session[key]

    await Runner(app, callbacks=[Callbacks(before_agent=before, after_agent=after)]).invoke("go")

    assert saved == {"writer": "A draft."}
    mine = {id(a) for a in (app, manager, writer, review, planner, executor, replanner)}
    named = {a.name: a for a in started if id(a) in mine}  # type: ignore[attr-defined]
    assert set(named) == {"manager", "writer", "review", "r_planner", "r_executor", "r_replanner"}
    # The framework's own: the PlanExecute's inner loop, a public LoopAgent; nothing private.
    others = [type(a).__name__ for a in started if id(a) not in mine]
    assert others == ["LoopAgent"]
