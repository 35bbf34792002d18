"""``KeyedOutput.usage``: what the model calls of a record's run reported, so that a pipeline bills
per record, locally and in the JSON a Flink job emits (``to_dict``, built by the function the
Flink operators use). The model is a real OpenAI wire server (``tests/openai_server.py``, in
this process), which reports 11 input and 7 output tokens per call."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import wire_model
from openai_server import Call, OpenAIServer, Reply

from adk import Usage, tool
from adk.actions import ActionAgent, ActionContext, InputEvent, OutputEvent, action
from adk.checkpoint import InMemoryCheckpointStore
from adk.execution import KeyedOutput, LocalExecutionEnvironment, _records
from adk.models import RetryPolicy
from prebuilt import ReActAgent

ONE = Usage(input_tokens=11, output_tokens=7, total_tokens=18)
TWO = ONE + ONE


@tool
def look_up(name: str) -> str:
    """Look a customer up.

    Args:
        name: Their name.
    """
    return f"{name} is a customer"


@tool(require_approval=True)
def refund(name: str) -> str:
    """Refund a customer.

    Args:
        name: Their name.
    """
    return f"refunded {name}"


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer() as served:
        yield served


def _agent(server: OpenAIServer) -> ReActAgent:
    model = wire_model(server, retry=RetryPolicy(max_attempts=1))
    return ReActAgent("clerk", model, tools=[look_up, refund])


async def test_each_records_output_carries_its_runs_usage_locally_and_in_its_dict(
    server: OpenAIServer,
) -> None:
    """A record that made one model call, one that made two (a tool round), and one whose second
    call failed (on_error="emit": its first call was paid all the same)."""
    server.script(
        Reply(text="hello ann"),
        Reply(tool_calls=[Call("look_up", '{"name": "bob"}')]),
        Reply(text="bob is known"),
        Reply(tool_calls=[Call("look_up", '{"name": "eve"}')]),
        Reply(status=400, error="refused"),
    )
    env = LocalExecutionEnvironment(max_concurrency=1, on_error="emit")
    records = [{"user": "ann", "text": "hi"}, {"user": "bob", "text": "bob?"}]
    records.append({"user": "eve", "text": "eve?"})
    outputs = await env.from_list(records, key="user").apply(_agent(server)).to_list()
    assert [(o.key, o.error is None, o.usage) for o in outputs] == [
        ("ann", True, ONE),
        ("bob", True, TWO),
        ("eve", False, ONE),
    ]
    for output in outputs:
        data = output.to_dict()
        assert data == json.loads(_records._as_json(output))  # the Flink operators' own text
        assert data["usage"] == (output.usage.model_dump() if output.usage else None)
    assert outputs[1].to_dict()["usage"] == {
        "input_tokens": 22,
        "output_tokens": 14,
        "total_tokens": 36,
        "cached_input_tokens": 0,
        "reasoning_output_tokens": 0,
    }


async def test_a_paused_records_resume_carries_the_whole_runs_usage(server: OpenAIServer) -> None:
    """As RunResult.usage: the pause's output says what the run had spent when it paused, its
    resume's what the whole run spent (the calls before the pause included), so a record is
    billed on its last output. A resume given as a dict of an older pyadk, without "usage",
    is taken as before."""
    env = LocalExecutionEnvironment(checkpoint_store=InMemoryCheckpointStore())
    for old in (False, True):
        server.script(Reply(tool_calls=[Call("refund", '{"name": "ann"}')]), Reply(text="done"))
        records = [{"user": "ann", "text": "refund me"}]
        (paused,) = await env.from_list(records, key="user").apply(_agent(server)).to_list()
        assert paused.checkpoint_id is not None and paused.usage == ONE
        given = {**paused.to_dict(), "resume": True}
        if old:
            del given["usage"]
        later = env.from_list([], key="user").apply(_agent(server), resumes=[given])
        (resumed,) = await later.to_list()
        assert (resumed.output, resumed.resumed, resumed.usage) == ("done", True, TWO)


@action(InputEvent)
def twice(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output="first"))
    ctx.send_event(OutputEvent(output="second"))


async def test_a_runs_usage_is_on_its_last_output_only_and_none_without_calls() -> None:
    """An ActionAgent's run has an output per OutputEvent: the usage goes on the last, so a sum
    over a run's outputs counts it once (none here: no model call reported any)."""
    env = LocalExecutionEnvironment()
    agent = ActionAgent("twice", actions=[twice])
    outputs = await env.from_list([{"user": "ann"}], key="user").apply(agent).to_list()
    assert [(o.output, o.usage) for o in outputs] == [("first", None), ("second", None)]
    assert outputs[-1].to_dict()["usage"] is None


def test_an_output_made_without_usage_has_none_in_its_dict() -> None:
    data: dict[str, Any] = KeyedOutput("k", 0, None, output="x").to_dict()
    assert data["usage"] is None


async def test_a_record_error_carries_the_failed_runs_usage(server: OpenAIServer) -> None:
    """Under on_error="raise" a failed record is a RecordError, not an output: it carries the
    usage its output would have (the calls before the failure were paid, RunError.usage), so a
    pipeline that stops on the first failure still bills it. None when no call reported any."""
    server.script(
        Reply(tool_calls=[Call("look_up", '{"name": "eve"}')]),
        Reply(status=400, error="refused"),
    )
    env = LocalExecutionEnvironment()
    records = [{"user": "eve", "text": "eve?"}]
    with pytest.raises(_records.RecordError) as raised:
        await env.from_list(records, key="user").apply(_agent(server)).to_list()
    assert raised.value.usage == ONE
    server.script(Reply(status=400, error="refused"))
    with pytest.raises(_records.RecordError) as raised:
        await env.from_list(records, key="user").apply(_agent(server)).to_list()
    assert raised.value.usage is None
