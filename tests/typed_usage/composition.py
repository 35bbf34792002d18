"""A typed user's prebuilt agents, workflows and AgentTool (checked by mypy --strict, not run)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import assert_type

from pydantic import BaseModel

import adk
from adk import AgentEvent, AgentTool, Runner, RunResult, ToolContext, tool
from adk.flow import FlowAgent, with_sub_agents
from adk.testing import ScriptedModel
from adk.workflows import LoopAgent, ParallelAgent, SequentialAgent
from prebuilt import (
    OutputRejected,
    Plan,
    PlanExecute,
    ReActAgent,
    Supervisor,
    new_executor,
    new_planner,
    new_replanner,
    stream_output,
)


class Forecast(BaseModel):
    city: str
    celsius: int


@tool
def weather(city: str, ctx: ToolContext) -> Forecast:
    return Forecast(city=city, celsius=4)


async def structured() -> Forecast | None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": 4}'])
    agent = ReActAgent(
        "forecaster", model, tools=[weather], output_schema=Forecast, output_key="forecast"
    )
    result = await Runner(agent).invoke("Weather in Oslo?")
    if isinstance(result.output, Forecast):
        assert_type(result.output, Forecast)
        return result.output
    return None


async def streamed(runner: Runner) -> list[Forecast]:
    shown: list[Forecast] = []
    async for event in runner.run("Weather?"):
        output = event.output
        if output is None:
            continue
        if output.stream is not None:
            async for partial in stream_output(output.stream, Forecast):
                assert_type(partial, Forecast)
                shown.append(partial)
        elif isinstance(output.custom, OutputRejected):
            shown.clear()
    return shown


def tools_lists() -> None:
    # A list of FunctionTools (invariant list[FunctionTool]) where the agent takes tool sources.
    tools = [weather]
    ReActAgent("a", ScriptedModel(["x"]), tools=tools)
    agents = [ReActAgent("w1", ScriptedModel(["x"])), ReActAgent("w2", ScriptedModel(["x"]))]
    SequentialAgent("seq", agents)
    ParallelAgent("par", agents, max_concurrency=2)
    LoopAgent("loop", agents, max_iterations=3)
    # The name forgotten, or the sub-agents: refused here as at run time (the runtime refusal
    # of a workflow's __new__ must not make them type-check).
    SequentialAgent(agents)  # type: ignore[call-arg, arg-type]
    SequentialAgent("seq")  # type: ignore[call-arg]
    ParallelAgent("par")  # type: ignore[call-arg]
    Supervisor(ReActAgent("boss", ScriptedModel(["x"])), agents)
    flow = with_sub_agents(ReActAgent("router", ScriptedModel(["x"])), agents)
    assert_type(flow, FlowAgent)
    ReActAgent("r", ScriptedModel(["x"]), sub_agents=agents)


class Step(adk.BaseAgent):
    async def run(self, input: adk.AgentInput, ctx: adk.RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.of(f"{self.name} done")


async def compose() -> RunResult:
    model = ScriptedModel(["ok"])
    researcher = ReActAgent("researcher", model, description="finds facts")
    as_tool = AgentTool(researcher, emit_inner_events=True)
    writer = ReActAgent("writer", model, tools=[as_tool, weather], description="writes")
    pipeline = SequentialAgent("pipeline", [Step("prepare"), writer])
    plan_execute = PlanExecute(
        new_planner(model), new_executor(model, [weather]), new_replanner(model), max_iterations=5
    )
    one_model = PlanExecute.from_model(model, [weather])
    team = Supervisor(
        ReActAgent("boss", model, description="delegates"), [pipeline, plan_execute, one_model]
    )
    result = await Runner(team).invoke("write a report")
    plan = result.session.get("plan")
    if isinstance(plan, Plan):
        assert_type(plan.steps, list[str])
    return result


class Router(adk.BaseAgent):
    """An agent of one's own running a child with its own ctx (docs/composing.md, "Agents of
    your own that run other agents"): ``ResumableAgent`` narrows for ``resume``, and the
    child's events are closed in a ``finally`` (``aclosing`` is refused: ``run`` is typed as an
    ``AsyncIterator``, which has no ``aclose``)."""

    def __init__(self, name: str, child: adk.Agent) -> None:
        super().__init__(name)
        self.child = child

    async def run(self, input: adk.AgentInput, ctx: adk.RunContext) -> AsyncIterator[AgentEvent]:
        child = self.child
        key = f"route {ctx.address}"  # its own choices keyed by its place (composing.md)
        assert_type(ctx.address, str)
        if ctx.resume is None:
            ctx.session[key] = child.name
        if ctx.resume is not None and isinstance(child, adk.ResumableAgent):
            events = child.resume(ctx)
        else:
            events = child.run(input, ctx)
        try:
            async for event in events:
                yield event
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        votes = [e.message.content for e in ctx.history_entries if e.agent_name != self.name]
        assert_type(votes, list[str])
