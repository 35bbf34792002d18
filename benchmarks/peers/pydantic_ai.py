"""The workloads in pydantic-ai: an ``Agent`` over ``FunctionModel`` as the fake model.

pydantic-ai agents have no sequential multi-agent workflow of their own; its sibling package
``pydantic_graph`` (a dependency of pydantic-ai-slim, the engine of the agent loop) does, so scenario
``d`` is a ``GraphBuilder`` chain of 10 steps, each appending one message to the graph state.
Instrumentation is off (the default for agents; ``auto_instrument=False`` for the graph).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_graph import GraphBuilder, StepContext

from .._harness import awaits_floor

VERSIONS = {"pydantic-ai-slim": version("pydantic-ai-slim"), "pydantic": version("pydantic")}
Variant = Callable[[], Awaitable[object]]


# The fake models are ``async def``: FunctionModel runs a plain ``def`` in a worker thread
# (``run_in_executor``), a cost no real (async) model has.
async def done(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("done")])


async def call_add(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Calls ``add(a=1, b=2)``; once the tool answered, replies ``sum=<result>``."""
    last = messages[-1]
    if isinstance(last, ModelRequest):
        for part in last.parts:
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(f"sum={part.content}")])
    call = ToolCallPart(tool_name="add", args='{"a": 1, "b": 2}', tool_call_id="call_1")
    return ModelResponse(parts=[call])


Answer = Callable[[list[ModelMessage], AgentInfo], Awaitable[ModelResponse]]


def yielding(answer: Answer) -> Answer:
    """``answer`` after yielding to the event loop, as a model awaiting its server does."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(0)
        return await answer(messages, info)

    return respond


def _add_agent(respond: Answer) -> Agent[None, str]:
    agent = Agent(FunctionModel(respond))

    @agent.tool_plain
    async def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first addend.
            b: The second addend.
        """
        return a + b

    return agent


def _variant(agent: Agent[None, str], expected: str) -> Variant:
    async def one_run() -> None:
        result = await agent.run("hi")
        if result.output != expected:
            raise AssertionError(f"expected {expected!r}, got {result.output!r}")

    return one_run


def _sequence() -> Variant:
    """pydantic-graph steps; each produces one message, as every other SDK's step does here (a
    pyadk ``Message``, a langchain ``AIMessage``, a google-adk ``Event``): pydantic-ai's own
    ``ModelResponse``, appended to the graph's state."""
    g = GraphBuilder(
        state_type=list[ModelResponse], output_type=list[ModelResponse], auto_instrument=False
    )

    async def step(ctx: StepContext[list[ModelResponse], None, Any]) -> None:
        ctx.state.append(ModelResponse(parts=[TextPart("ok")]))

    async def finish(ctx: StepContext[list[ModelResponse], None, Any]) -> list[ModelResponse]:
        return ctx.state

    steps = [g.step(step, node_id=f"step{i}") for i in range(10)]
    last = g.step(finish, node_id="finish")
    chain: list[Any] = [g.start_node, *steps, last, g.end_node]
    for source, destination in itertools.pairwise(chain):
        g.add_edge(source, destination)
    graph = g.build()

    async def one_run() -> None:
        state: list[ModelResponse] = []
        output = await graph.run(state=state)
        if len(output) != 10:
            raise AssertionError(f"expected 10 messages, got {output!r}")

    return one_run


async def build(scenario: str) -> dict[str, Variant]:
    if scenario == "a":
        return {"run": _variant(Agent(FunctionModel(done)), "done")}
    if scenario == "b":
        return {"run": _variant(_add_agent(call_add), "sum=3")}
    if scenario == "a.inflight":
        agent = Agent(FunctionModel(yielding(done)))
        return {"run": _variant(agent, "done"), "floor": awaits_floor(1)}
    if scenario == "b.inflight":
        return {"run": _variant(_add_agent(yielding(call_add)), "sum=3"), "floor": awaits_floor(2)}
    if scenario == "d":
        return {"run": _sequence()}
    raise NotImplementedError(f"pydantic-ai: no scenario {scenario!r}")
