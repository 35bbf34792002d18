"""The workloads in LangGraph / LangChain: a ``BaseChatModel`` subclass (with ``bind_tools``) as the
fake model.

Variant ``run`` uses ``langchain.agents.create_agent`` (LangChain 1.x's recommended agent, a compiled
LangGraph graph); variant ``prebuilt`` uses the older ``langgraph.prebuilt.create_react_agent``, so
the faster of the two is on record. Scenario ``d`` is a ``StateGraph`` over ``MessagesState`` with 10
nodes in a chain, each adding one message. No checkpointer, LangSmith tracing off.
"""

from __future__ import annotations

import asyncio
import os
import warnings
from collections.abc import Awaitable, Callable, Sequence
from importlib.metadata import version
from typing import Any

os.environ["LANGSMITH_TRACING"] = "false"
os.environ["LANGCHAIN_TRACING_V2"] = "false"

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, MessagesState, StateGraph

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from langgraph.prebuilt import create_react_agent

from .._harness import awaits_floor

VERSIONS = {
    "langgraph": version("langgraph"),
    "langchain": version("langchain"),
    "langchain-core": version("langchain-core"),
    "pydantic": version("pydantic"),
}
Variant = Callable[[], Awaitable[object]]


class _FakeChat(BaseChatModel):
    """Answers from ``reply(messages)``; ``bind_tools`` formats tools the way real chat models do.
    With ``yields`` the async path first yields to the event loop, as a model awaiting its server
    does (in-flight runs)."""

    yields: bool = False

    @property
    def _llm_type(self) -> str:
        return "bench"

    def reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        raise NotImplementedError

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages))])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        if self.yields:
            await asyncio.sleep(0)
        return ChatResult(generations=[ChatGeneration(message=self.reply(messages))])

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)


class DoneChat(_FakeChat):
    def reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        return AIMessage("done")


class AddChat(_FakeChat):
    """Calls ``add(a=1, b=2)``; once the tool answered, replies ``sum=<result>``."""

    def reply(self, messages: Sequence[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(f"sum={last.content}")
        call = {"name": "add", "args": {"a": 1, "b": 2}, "id": "call_1", "type": "tool_call"}
        return AIMessage("", tool_calls=[call])


@tool
async def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


def _variant(graph: Any, expected: str, messages: int | None = None) -> Variant:
    async def one_run() -> None:
        out = await graph.ainvoke({"messages": [HumanMessage("hi")]})
        last = out["messages"][-1].content
        if last != expected:
            raise AssertionError(f"expected {expected!r}, got {last!r}")
        if messages is not None and len(out["messages"]) != messages:
            raise AssertionError(f"expected {messages} messages, got {len(out['messages'])}")

    return one_run


def _sequence() -> Any:
    graph = StateGraph(MessagesState)

    async def step(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage("ok")]}

    names = [f"step{i}" for i in range(10)]
    for name in names:
        graph.add_node(name, step)
    for source, destination in zip([START, *names], [*names, END], strict=True):
        graph.add_edge(source, destination)
    return graph.compile()


async def build(scenario: str) -> dict[str, Variant]:
    if scenario == "a":
        return {
            "run": _variant(create_agent(DoneChat()), "done"),
            "prebuilt": _variant(create_react_agent(DoneChat(), []), "done"),
        }
    if scenario == "b":
        return {
            "run": _variant(create_agent(AddChat(), [add]), "sum=3"),
            "prebuilt": _variant(create_react_agent(AddChat(), [add]), "sum=3"),
        }
    if scenario == "a.inflight":
        return {
            "run": _variant(create_agent(DoneChat(yields=True)), "done"),
            "floor": awaits_floor(1),
        }
    if scenario == "b.inflight":
        graph = create_agent(AddChat(yields=True), [add])
        return {"run": _variant(graph, "sum=3"), "floor": awaits_floor(2)}
    if scenario == "d":
        return {"run": _variant(_sequence(), "ok", messages=11)}
    raise NotImplementedError(f"langgraph: no scenario {scenario!r}")
