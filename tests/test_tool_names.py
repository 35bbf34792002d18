"""Name clashes among tools and agents: two tools of one name never reach a model and one never
hides another. A clash is a ``ValueError`` naming the name and both of its sources, raised where it
can first be known: when an agent is made or wired for tools and agents given in code, when a
server's tools are first listed for MCP tools, and for tools that appear later (an MCP server's
list changed) when an agent next starts, before its model is called.

The MCP cases run against real MCP servers (tests/mcp_servers).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import ScriptAgent, run_events
from mcp_servers.process import STDIO_SCRIPT, HTTPServerProcess

import adk
from adk import AgentTool, with_sub_agents
from adk.mcp import StdioServer
from adk.testing import ScriptedModel
from adk.tools.base import ToolSpec
from prebuilt import ReActAgent, Supervisor


@adk.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _other_add(a: int, b: int) -> int:
    """Add two numbers, another way."""
    return b + a


other_add = adk.FunctionTool(_other_add, name="add")


def transfer_to_agent(agent_name: str) -> str:
    """A tool of the user's own that happens to have the transfer tool's name."""
    return agent_name


def _finish(reason: str) -> str:
    """A tool of the user's own named like the exit tool."""
    return reason


my_exit = adk.FunctionTool(_finish, name="exit")


class _Shout:
    """A tool written by hand, registered under the name an MCP server also offers."""

    spec = ToolSpec(name="shout", description="Upper-cases text.")

    async def run(self, arguments: str, ctx: Any) -> str:
        text: str = json.loads(arguments or "{}").get("text", "")
        return text.upper()


class _Offers:
    """A toolset offering the tools it was given."""

    def __init__(self, *tools: Any) -> None:
        self._tools = [t if isinstance(t, adk.Tool) else adk.FunctionTool(t) for t in tools]

    async def tools(self, ctx: Any) -> list[Any]:
        return list(self._tools)


def _narrow(kind: str) -> StdioServer:
    return StdioServer(sys.executable, [str(STDIO_SCRIPT.parent / "narrow_server.py"), kind])


@pytest.fixture(scope="module")
def http_process() -> Iterator[HTTPServerProcess]:
    process = HTTPServerProcess()
    process.start()
    yield process
    process.stop()


# -- ReActAgent: tools given in code fail when the agent is made ----------------------------------
def test_two_tools_of_one_name_are_refused_naming_both() -> None:
    with pytest.raises(ValueError, match="agent 'a': two tools are named 'add'") as raised:
        ReActAgent("a", ScriptedModel(), tools=[add, other_add])
    assert "function test_tool_names.add" in str(raised.value)
    assert "function test_tool_names._other_add" in str(raised.value)


def test_a_tool_named_like_the_exit_tool_is_refused_when_the_agent_adds_it() -> None:
    with pytest.raises(ValueError, match="two tools are named 'exit'") as raised:
        ReActAgent("a", ScriptedModel(), tools=[my_exit], exit_tool=True)
    assert "the exit tool (exit_tool=True)" in str(raised.value)
    ReActAgent("a", ScriptedModel(), tools=[my_exit])  # without exit_tool the name is free


def test_a_tool_named_like_an_agent_tool_is_refused_naming_the_agent() -> None:
    helper = ReActAgent("add", ScriptedModel(), description="Adds.")
    with pytest.raises(ValueError, match="two tools are named 'add'") as raised:
        ReActAgent("a", ScriptedModel(), tools=[add, AgentTool(helper)])
    assert "AgentTool of agent 'add'" in str(raised.value)


def test_a_tool_resource_named_twice_or_like_a_tool_given_is_refused() -> None:
    # The resource's tool is registered under that name, so the model would be offered two.
    with pytest.raises(ValueError, match="two tools are named 'add'") as raised:
        ReActAgent("a", ScriptedModel(), tools=[add, "add"])
    assert "tool resource 'add'" in str(raised.value)
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        ReActAgent("a", ScriptedModel(), tools=["add", "add"])


def test_a_tool_named_like_the_transfer_tool_is_refused_when_sub_agents_are_given() -> None:
    sub = ReActAgent("sub", ScriptedModel(["x"]))
    with pytest.raises(ValueError, match="'transfer_to_agent'") as raised:
        ReActAgent("root", ScriptedModel(), tools=[transfer_to_agent], sub_agents=[sub])
    assert "clashes with the transfer tool" in str(raised.value)
    assert "function test_tool_names.transfer_to_agent" in str(raised.value)
    # The refused agent did not claim its sub-agent.
    with_sub_agents(ReActAgent("other", ScriptedModel()), [sub])


def test_a_tool_named_like_the_transfer_tool_is_refused_when_the_agent_is_wired() -> None:
    # Given sub-agents afterwards...
    mine = ReActAgent("mine", ScriptedModel(), tools=[transfer_to_agent])
    sub = ScriptAgent("sub")
    with pytest.raises(ValueError, match="clashes with the transfer tool"):
        with_sub_agents(mine, [sub])
    with_sub_agents(ScriptAgent("other"), [sub])  # nothing was adopted
    # ...or made a sub-agent that may transfer back to its parent.
    child = ReActAgent("child", ScriptedModel(), tools=[transfer_to_agent])
    with pytest.raises(ValueError, match="clashes with the transfer tool"):
        with_sub_agents(ScriptAgent("parent"), [ScriptAgent("x"), child])
    # Without a parent to go back to, it gets no transfer tool: nothing clashes.
    with_sub_agents(ScriptAgent("parent"), [child], allow_transfer_to_parent=False)


def test_a_supervisor_with_a_tool_named_like_the_transfer_tool_is_refused() -> None:
    boss = ReActAgent("boss", ScriptedModel(), tools=[transfer_to_agent])
    with pytest.raises(ValueError, match="clashes with the transfer tool"):
        Supervisor(boss, [ScriptAgent("worker")])
    # A worker reports back by itself, without a transfer tool: its own tool of that name stays.
    worker = ReActAgent("worker", ScriptedModel(), tools=[transfer_to_agent])
    Supervisor(ReActAgent("boss2", ScriptedModel()), [worker])


# -- ReActAgent: tools resolved per run fail the run before the model is called -------------------
async def test_a_toolset_tool_clashing_with_a_given_tool_fails_the_run_naming_both() -> None:
    model = ScriptedModel(["never"])
    events = await run_events(ReActAgent("a", model, tools=[add, _Offers(other_add)]))
    error = events[-1].error
    assert error is not None and error.type == "ValueError"
    assert "agent 'a': two tools are named 'add'" in error.message
    assert "function test_tool_names.add" in error.message
    assert "function test_tool_names._other_add from toolset _Offers" in error.message
    assert model.calls == 0


async def test_a_toolset_tool_named_like_the_transfer_tool_fails_the_run_naming_it() -> None:
    model = ScriptedModel(["never"])
    agent = ReActAgent(
        "root", model, tools=[_Offers(transfer_to_agent)], sub_agents=[ScriptAgent("sub")]
    )
    events = await run_events(agent)
    error = events[-1].error
    assert error is not None and "clashes with the transfer tool" in error.message
    assert "from toolset _Offers" in error.message
    assert model.calls == 0


# -- agents: one name, one agent, wherever a transfer can go --------------------------------------
def test_a_sub_agent_named_like_its_new_parents_parent_is_refused() -> None:
    # "b" could transfer to its sub-agent "a" or back to its parent "a": one would hide the other.
    b = with_sub_agents(ScriptAgent("b"), [ScriptAgent("a")])
    with pytest.raises(ValueError, match="two agents named 'a'"):
        with_sub_agents(ScriptAgent("a"), [b])
    with_sub_agents(ScriptAgent("a"), [b], allow_transfer_to_parent=False)  # no way back: fine


def test_a_sub_agent_named_like_the_agents_parent_is_refused() -> None:
    b = ScriptAgent("b")
    with_sub_agents(ScriptAgent("a"), [b])
    with pytest.raises(ValueError, match="two agents named 'a'"):
        with_sub_agents(b, [ScriptAgent("a")])
    with_sub_agents(b, [ScriptAgent("c")])
