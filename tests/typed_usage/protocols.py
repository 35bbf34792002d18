"""A typed user's own implementations of adk's protocols: a tool class, a toolset, a checkpoint
store, a session store, a history rewriter, an instruction provider (checked by mypy --strict,
not run)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable, Sequence
from typing import Any

from adk import (
    Agent,
    AgentEvent,
    AgentInput,
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


class Declared(Agent):
    """An agent that names the protocol as its base and sets its name, as a plain class does.

    (So ``Agent.name`` stays a plain attribute to type checkers: declared read-only, it would
    make this class abstract and its assignments errors, though a frozen dataclass, whose fields
    are read-only, would then be an ``Agent`` too. It is not one now: give such an agent plain
    attributes, or subclass ``BaseAgent``.)"""

    def __init__(self, name: str) -> None:
        self.name = name
        self.description = "declared"

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.of("done")


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
    Runner(SequentialAgent("steps", [Declared("one"), Declared("two")]))
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
