"""Name clashes among tools and agents: two tools of one name never reach a model and one never
hides another. A clash is a ``ValueError`` naming the name and both of its sources, raised where it
can first be known: when an agent is made or wired for tools and agents given in code, when a
server's tools are first listed for MCP tools, and for tools that appear later (an MCP server's
list changed) when an agent next starts, before its model is called.

The MCP cases run against real MCP servers (tests/mcp_servers).
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import pytest
from conftest import ChatActor, ScriptAgent, run_events
from mcp_servers.process import (
    STDIO_SCRIPT,
    HTTPServerProcess,
    http_process_fixture,  # noqa: F401  (fixture)
)
from pydantic import ValidationError

import adk
from adk import AgentTool, RunError, Runner, with_sub_agents
from adk.actions import ChatRequestEvent
from adk.checkpoint import InMemoryCheckpointStore
from adk.mcp import HTTPServer, MCPToolset, StdioServer
from adk.resources import Resources
from adk.testing import Reply, ScriptedModel, tool_call
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


def test_one_toolset_given_twice_is_refused() -> None:
    toolset = _Offers(add)
    with pytest.raises(ValueError, match="agent 'a': toolset _Offers is given twice"):
        ReActAgent("a", ScriptedModel(), tools=[toolset, toolset])
    ReActAgent("a", ScriptedModel(), tools=[toolset, _Offers(other_add)])  # clash known per run


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


async def test_a_clash_appearing_while_a_run_is_paused_fails_the_resume_and_loses_nothing() -> None:
    # The toolset's tools are resolved again on resume: a clash that appeared meanwhile fails the
    # resume before anything runs, and the checkpoint stays, to be resumed once it is fixed.
    paid: list[int] = []

    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    toolset = _Offers(add)
    call = tool_call("pay", {"amount": 5}, id="call_1")
    model = ScriptedModel([Reply(tool_calls=[call]), "done"])
    store = InMemoryCheckpointStore()
    runner = Runner(ReActAgent("a", model, tools=[pay, toolset]), checkpoint_store=store)
    paused = await runner.invoke("pay 5")
    assert paused.interrupt is not None and paused.checkpoint_id is not None

    toolset._tools.append(adk.FunctionTool(_other_add, name="pay"))
    with pytest.raises(RunError, match="two tools are named 'pay'"):
        await runner.invoke_resume(paused.checkpoint_id, True)
    assert paid == [] and await store.get(paused.checkpoint_id) is not None

    toolset._tools.pop()
    assert (await runner.invoke_resume(paused.checkpoint_id, True)).text == "done"
    assert paid == [5]


# -- Resources: a tool registered in code and a server's tool of the same name --------------------
async def test_a_tool_added_in_code_does_not_hide_an_mcp_tool_of_its_name(
    http_process: HTTPServerProcess,
) -> None:
    # Looking up the name added in code must see the server's tool too, not return the first
    # found: which tool a name meant would otherwise depend on what was looked up before.
    async with Resources() as resources:
        resources.add_tool(_Shout(), name="add")
        resources.add_mcp("demo", HTTPServer(http_process.url))
        with pytest.raises(ValueError, match="'add' is offered by MCP server 'demo'") as raised:
            await resources.get_tool("add")
        assert "registered with add_tool" in str(raised.value)
        with pytest.raises(ValueError, match="'add' is offered by MCP server 'demo'"):
            await resources.tools(["add"])


async def test_a_react_agent_naming_a_clashing_resource_fails_before_its_model_is_called(
    http_process: HTTPServerProcess,
) -> None:
    async with Resources() as resources:
        resources.add_tool(_Shout(), name="add")
        resources.add_mcp("demo", HTTPServer(http_process.url))
        model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
        agent = ReActAgent("a", model, tools=["add"])
        events = await run_events(Runner(agent, resources=resources))
        error = events[-1].error
        assert error is not None and "'add' is offered by MCP server 'demo'" in error.message
        assert model.calls == 0


async def test_a_tool_added_after_a_server_listed_its_name_is_refused_at_once(
    http_process: HTTPServerProcess,
) -> None:
    async with Resources() as resources:
        resources.add_mcp("demo", HTTPServer(http_process.url))
        assert (await resources.get_tool("pid")).spec.name == "pid"
        with pytest.raises(ValueError, match="'add' is offered by MCP server 'demo'"):
            resources.add_tool(_Shout(), name="add")
        assert (await resources.get_prompt("review")).name == "review"  # lists the prompts
        with pytest.raises(ValueError, match="'greet' is offered by MCP server 'demo'"):
            resources.add_prompt("greet", "Hello {name}")
        # Refused, so not registered: the server's tool is still found.
        assert (await resources.get_tool("add")).spec.name == "add"
        resources.add_tool(_Shout())  # a name of its own is fine


async def test_a_clash_of_names_renamed_for_model_apis_names_the_servers_own_names(
    http_process: HTTPServerProcess,
) -> None:
    # One server's "files.read" is offered as "files_read", the name another server's tool has.
    async with Resources() as resources:
        dotted = MCPToolset(HTTPServer(http_process.url), tool_filter=["files.read"])
        plain = MCPToolset(HTTPServer(http_process.url), tool_filter=["files_read"])
        resources.add_mcp("dotted", dotted)
        resources.add_mcp("plain", plain)
        with pytest.raises(ValueError, match="'files_read' is offered by MCP servers") as raised:
            await resources.get_tool("files_read")
        assert "'dotted' (its tool 'files.read')" in str(raised.value)


async def test_a_name_a_server_lists_twice_is_left_out_and_its_other_tools_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two tools of one name that differ: a call by that name could reach either, so neither is
    offered (a warning naming it says why) and the model calling it reads the unknown-tool error,
    while the server's other tool works. The whole listing failed, so no tool of the server did
    (this test asserted that RuntimeError before; the brief of branch mc asked for this)."""
    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("ping", {}, id="c1"), tool_call("pong", {}, id="c2")]),
            "done",
        ]
    )
    async with MCPToolset(_narrow("duplicates")) as toolset:
        with caplog.at_level("WARNING", logger="adk.mcp"):
            assert [tool.spec.name for tool in await toolset.tools()] == ["pong"]
        events = await run_events(ReActAgent("a", model, tools=[toolset]))
    assert [e.error for e in events if e.error is not None] == []
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
    assert "lists 2 tools named 'ping', which differ: none is offered" in warning
    answers = {m.tool_call_id: m.content for m in model.requests[1].messages if m.role == "tool"}
    assert answers["c1"].startswith("Error: unknown tool 'ping'; available tools: pong")
    assert not answers["c2"].startswith("Error"), answers["c2"]


async def test_a_tool_appearing_in_a_servers_list_later_fails_the_next_run_naming_both(
    http_process: HTTPServerProcess,
) -> None:
    late = f"late_{uuid.uuid4().hex[:8]}"
    mine = adk.FunctionTool(_other_add, name=late)
    async with Resources() as resources:
        toolset = resources.add_mcp("demo", HTTPServer(http_process.url))
        resources.add_tool(mine)
        by_name = ScriptedModel(["first", "never"])
        named = ReActAgent("named", by_name, tools=["add"])
        direct = ScriptedModel(["first", "never"])
        given = ReActAgent("given", direct, tools=[mine, toolset])
        runner = Runner(named, resources=resources)
        assert (await runner.invoke("hi")).text == "first"
        assert (await Runner(given).invoke("hi")).text == "first"

        (adder,) = [t for t in await toolset.tools() if t.spec.name == "add_tool"]
        added = await adder.run(json.dumps({"name": late}), None)  # type: ignore[arg-type]
        assert not added.is_error
        for _ in range(400):  # the server's announcement arrives asynchronously
            if toolset._cached("tools") is None:
                break
            await asyncio.sleep(0.025)

        with pytest.raises(RunError, match=f"'{late}' is offered by MCP server 'demo'"):
            await runner.invoke("hi")
        assert by_name.calls == 1
        events = await run_events(given)
        error = events[-1].error
        assert error is not None and f"two tools are named '{late}'" in error.message
        assert f"tool '{late}' of MCP server" in error.message
        assert direct.calls == 1


# -- the event-driven layer -----------------------------------------------------------------------
def test_a_chat_request_offering_one_tool_twice_is_refused_where_it_is_made() -> None:
    with pytest.raises(ValidationError, match="'add' is named twice"):
        ChatRequestEvent(model="m", messages=[], tools=["add", "pid", "add"])


async def test_an_action_agents_tools_see_a_clash_between_add_tool_and_a_server(
    http_process: HTTPServerProcess,
) -> None:
    async with Resources() as resources:
        model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
        resources.add_model("m", model)
        resources.add_tool(_Shout(), name="add")
        resources.add_mcp("demo", HTTPServer(http_process.url))
        with pytest.raises(RunError, match="'add' is offered by MCP server 'demo'"):
            await Runner(ChatActor("asker", ["add"], prompt="go"), resources=resources).invoke("go")
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


class _Spaced(_Shout):
    spec = ToolSpec(name="shout loud", description="Upper-cases text.")


def test_a_tool_resource_name_model_apis_refuse_is_refused_where_it_is_registered() -> None:
    """``Resources.add_tool(tool, name="a.b")`` was taken: the model was then offered a tool
    named ``a.b``, which model APIs refuse (a 400 on every model call offering it), where
    ``@tool(name=...)``, ``AgentTool`` and ``ReActAgent`` refuse such a name when it is given."""
    resources = Resources()
    with pytest.raises(ValueError, match=r"cannot register tool 'a\.b'.*no spaces or dots"):
        resources.add_tool(add, name="a.b")
    with pytest.raises(ValueError, match=r"'shout loud'.*its spec's name \(.*_Spaced"):
        resources.add_tool(_Spaced())
    with pytest.raises(ValueError, match=r"cannot register tool 'x{65}'"):
        resources.add_tool(add, name="x" * 65)
    resources.add_tool(add, name="a_b-2")  # refused ones were not registered; valid ones are
    assert resources._tools.keys() == {"a_b-2"}
