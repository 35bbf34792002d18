"""A pipeline operator's trial of the event-driven layer, run locally: support tickets keyed by
customer through an ``ActionAgent`` whose chat (an ``OpenAIChatModel`` over the real OpenAI wire
server) calls ``device_info`` on a real MCP server over stdio (``mcp_servers/devices_server.py``)
and ``dispatch``, a function tool a person approves. Each customer's conversation is kept in
short-term memory across its tickets; one ticket pauses for approval and is found again through
the store's listing; one ticket fails. One model server and one MCP server serve the module."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from openai_server import Call, OpenAIServer, Reply
from pydantic import BaseModel

import adk
from adk import Message, Resources
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.checkpoint import InMemoryCheckpointStore, list_pending
from adk.execution import LocalExecutionEnvironment
from adk.mcp import StdioServer
from tests.conftest import wire_model

pytestmark = pytest.mark.asyncio(loop_scope="module")

DEVICES_SERVER = Path(__file__).resolve().parent / "mcp_servers" / "devices_server.py"


class Dispatched(BaseModel):
    device: str
    technician: str


@adk.tool(require_approval=True)
def dispatch(device: str) -> Dispatched:
    """Send a technician to a device (a person approves each dispatch)."""
    return Dispatched(device=device, technician="kim")


def _respond(body: Any) -> Reply:
    """The model: asks the registry about the ticket's device, dispatches for a ticket that says
    "broken", and answers with the last tool's text; it says how many user turns it saw, which
    shows the conversation the pipeline keeps per customer."""
    messages = body["messages"]
    turns = sum(1 for m in messages if m["role"] == "user")
    last = messages[-1]
    if last["role"] == "tool":
        return Reply(text=f"turn {turns}: {last['content']}")
    ticket = json.loads(last["content"])
    if ticket["text"] == "garbled":
        return Reply(status=400, error="the request could not be parsed")
    if "broken" in ticket["text"]:
        return Reply(tool_calls=[Call("dispatch", json.dumps({"device": ticket["device"]}))])
    return Reply(tool_calls=[Call("device_info", json.dumps({"device": ticket["device"]}))])


class Desk(ActionAgent):
    """Each ticket asks the model (with the customer's conversation so far); each answer is kept
    in that conversation and output. A ticket without a device fails; ``site`` tickets ask the
    registry directly through the tool action and read its structured result."""

    @action(InputEvent)
    def intake(self, event: InputEvent, ctx: ActionContext) -> None:
        ticket = event.input
        if "device" not in ticket:
            raise LookupError(f"ticket {ticket['ticket']} names no device")
        if ticket["text"] == "site":
            asked = json.dumps({"device": ticket["device"]})
            call = adk.ToolCall(id="site", name="device_info", arguments=asked)
            ctx.send_event(ToolRequestEvent(tool_calls=[call]))
            return
        said = Message.user(json.dumps(ticket))
        conversation = [*ctx.short_term_memory.get("conversation", []), said]
        ctx.short_term_memory.set("conversation", conversation)
        ctx.send_event(
            ChatRequestEvent(model="m", messages=conversation, tools=["device_info", "dispatch"])
        )

    @action(ChatResponseEvent)
    def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        conversation = [*ctx.short_term_memory.get("conversation", []), event.response]
        ctx.short_term_memory.set("conversation", conversation)
        ctx.send_event(OutputEvent(output=event.response.content))

    @action(ToolResponseEvent)
    def site(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
        if event.responses[0].tool_call_id != "site":
            return  # the chat's own rounds: the chat takes them
        assert event.structured is not None
        ctx.send_event(OutputEvent(output={"site": event.structured[0]["site"]}))


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def resources() -> AsyncIterator[Resources]:
    async with (
        OpenAIServer([], respond=_respond) as server,
        wire_model(server, name="m") as model,
        Resources() as found,
    ):
        found.add_model("m", model)
        found.add_mcp("devices", StdioServer(sys.executable, [str(DEVICES_SERVER)]))
        found.add_tool(dispatch)
        yield found


TICKETS = [
    {"customer": "acme", "ticket": "T1", "device": "d01", "text": "slow"},
    {"customer": "bolt", "ticket": "T2", "device": "d02", "text": "broken"},
    {"customer": "acme", "ticket": "T3", "device": "d03", "text": "noisy"},
    {"customer": "zeta", "ticket": "T4", "text": "help"},
    {"customer": "bolt", "ticket": "T5", "device": "d05", "text": "site"},
]


async def test_a_keyed_pipeline_with_a_chat_an_mcp_tool_an_approval_and_a_failure(
    resources: Resources,
) -> None:
    store = InMemoryCheckpointStore()
    env = LocalExecutionEnvironment(resources=resources, checkpoint_store=store, on_error="emit")
    outputs = env.from_list(TICKETS, key="customer").apply(Desk("desk"))
    found = {o.record["ticket"]: o for o in await outputs.to_list()}
    turn, said = found["T1"].output.split(": ", 1)
    assert (turn, json.loads(said)["site"]) == ("turn 1", "south")
    turn, said = found["T3"].output.split(": ", 1)
    assert (turn, json.loads(said)["site"]) == ("turn 2", "north")  # acme's conversation kept
    assert found["T5"].output == {"site": "east"}  # d05's structured content, as sent
    failed = found["T4"].error
    assert failed is not None and (failed.type, failed.cause) == ("ActionError", "LookupError")

    paused = found["T2"]
    assert paused.checkpoint_id is not None and paused.interrupt is not None
    [entry] = await list_pending(store)
    assert (entry.key, entry.index, entry.run_id) == ("bolt", 1, paused.run_id)
    [point] = entry.points
    assert point.info["tool"] == "dispatch"
    [done] = await outputs.resume(paused, {point.id: {"approved": True}})
    assert done.output == 'turn 1: {"device":"d02","technician":"kim"}'
    conversation = outputs.sessions["bolt"]["memory:desk"]["conversation"]
    assert [m.role for m in conversation] == ["user", "assistant"]
    assert await list_pending(store) == []


async def test_the_pause_resumed_from_its_json_and_failures_grouped_by_cause(
    resources: Resources,
) -> None:
    """The approvals come back as the paused output's JSON with the answer added (a topic's
    message), found through the runner's listing; a model that refuses a request fails that
    record with the chat's ModelError as its cause; usage is billed on each record's last
    output, the resume's including the call before its pause."""
    store = InMemoryCheckpointStore()
    env = LocalExecutionEnvironment(resources=resources, checkpoint_store=store, on_error="emit")
    tickets = [
        {"customer": "acme", "ticket": "T6", "device": "d06", "text": "broken"},
        {"customer": "bolt", "ticket": "T7", "device": "d07", "text": "garbled"},
        {"customer": "zeta", "ticket": "T8", "text": "help"},
    ]
    outputs = env.from_list(tickets, key="customer").apply(Desk("desk"))
    paused, garbled, orphan = await outputs.to_list()
    causes = sorted((o.error.type, o.error.cause) for o in (garbled, orphan) if o.error)
    assert causes == [("ActionError", "LookupError"), ("ActionError", "ModelError")]
    assert garbled.to_dict()["error"]["cause"] == "ModelError"
    assert paused.usage is not None and paused.usage.output_tokens > 0

    [entry] = await outputs.runner.pending()
    assert (entry.keyed, entry.key, entry.index) == (True, "acme", 0)
    approval = json.dumps({**paused.to_dict(), "resume": {"approved": True}})
    later = LocalExecutionEnvironment(resources=resources, checkpoint_store=store)
    resumed = later.from_list([], key="customer").apply(Desk("desk"), resumes=[approval])
    [done] = await resumed.to_list()
    assert (done.key, done.resumed, done.run_id) == ("acme", True, paused.run_id)
    assert done.output == 'turn 1: {"device":"d06","technician":"kim"}'
    assert done.usage is not None
    assert done.usage.output_tokens == 2 * paused.usage.output_tokens  # both calls, billed once
