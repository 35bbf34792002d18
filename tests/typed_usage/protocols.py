"""A typed user's own implementations of adk's protocols: a tool class, a toolset, a checkpoint
store, a session store, a history rewriter, an instruction provider (checked by mypy --strict,
not run)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from adk import (
    Agent,
    AgentEvent,
    AgentInput,
    BaseAgent,
    FunctionTool,
    HistoryEntry,
    Message,
    RunContext,
    Runner,
    SequentialAgent,
    Tool,
    ToolContext,
    ToolResult,
    Toolset,
    ToolSpec,
    tool,
)
from adk.checkpoint import CheckpointStore
from adk.execution import LocalExecutionEnvironment, SessionStore
from adk.testing import ScriptedModel
from prebuilt import ReActAgent


@dataclass(frozen=True)
class Echo:
    """An agent of one's own that is a frozen dataclass: its name is read-only."""

    name: str
    description: str = "repeats the request"

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.of(input.messages[-1].content)


class Named:
    """An agent whose name and description are properties."""

    @property
    def name(self) -> str:
        return "named"

    @property
    def description(self) -> str:
        return "has a name of its own"

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.exit()


class Shout:
    """A tool written as a class."""

    spec = ToolSpec(
        name="shout",
        description="Upper-cases text.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    )

    async def run(self, arguments: str, ctx: ToolContext) -> str | ToolResult:
        return arguments.upper()


@tool
def add(a: int, b: int) -> int:
    return a + b


class Calculator:
    """A toolset that hands out function tools."""

    async def tools(self, ctx: RunContext) -> list[FunctionTool]:
        return [add]


class BaseAgentChild(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.description = "may change its own"
        yield AgentEvent.of("done")


class DictStore:
    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    async def get(self, id: str) -> bytes | None:
        return self.data.get(id)

    async def put(self, id: str, data: bytes) -> None:
        self.data[id] = data

    async def delete(self, id: str) -> None:
        self.data.pop(id, None)


class KeyValueSessions:
    def __init__(self) -> None:
        self.kept: dict[Hashable, dict[str, Any]] = {}

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        return self.kept.get(key)

    async def put(self, key: Hashable, values: dict[str, Any]) -> None:
        self.kept[key] = values


def last_three(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
    return [entry.message for entry in entries[-3:]]


async def instruction(ctx: RunContext) -> str:
    return f"You help {ctx.session.get('user', 'someone')}."


def fits() -> None:
    agents: list[Agent] = [Echo("echo"), Named(), BaseAgentChild("child")]
    Runner(SequentialAgent("steps", agents))
    Runner(Echo("echo"))
    shout: Tool = Shout()
    calculator: Toolset = Calculator()
    store: CheckpointStore = DictStore()
    sessions: SessionStore = KeyValueSessions()
    agent = ReActAgent(
        "helper",
        ScriptedModel(["hi"]),
        instruction=instruction,
        tools=[shout, calculator, add, "search"],
        history_rewriter=last_three,
    )
    env = LocalExecutionEnvironment(checkpoint_store=store)
    applied = env.from_list(["a", "b"], key=len).apply(agent, sessions=sessions)
    assert applied.sessions is sessions


def refused() -> None:
    # What is not a tool source is an error, not Any.
    ReActAgent("helper", ScriptedModel(["hi"]), tools=[42])  # type: ignore[list-item]
