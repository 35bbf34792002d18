"""``max_turns``: a run-wide limit on model calls (the OpenAI Agents SDK's ``Runner.run(max_turns=)``,
LangGraph's ``recursion_limit``). Every agent's calls count, ``AgentTool`` nested runs' too, and
those made before a pause (the checkpoint carries the count); the call past the limit is not made
and fails the run with ``adk.MaxTurnsExceeded``, a ``RunError``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from conftest import calculator, wire_model
from openai_server import Call as WireCall
from openai_server import OpenAIServer
from openai_server import Reply as WireReply

import adk
from adk import AgentTool, Interrupt, MaxTurnsExceeded, RunError, Runner, ToolContext
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.checkpoint.codec import decode_checkpoint
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


@adk.tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


def _looping(n: int) -> list[Any]:
    """A model that looks something up ``n`` times, then answers."""
    return [
        Reply(tool_calls=[tool_call("lookup", {"query": str(i)}, id=f"c{i}")]) for i in range(n)
    ]


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_call_past_the_limit_is_not_made_and_fails_the_run(streaming: bool) -> None:
    def runner() -> Runner:
        agent = ReActAgent("agent", model, tools=[lookup])
        return Runner(agent, enable_streaming=streaming)

    model = ScriptedModel([*_looping(5), "done"])
    with pytest.raises(MaxTurnsExceeded) as raised:
        await runner().invoke("go", max_turns=3)

    exc = raised.value
    assert isinstance(exc, RunError)  # code catching every failed run catches it too
    assert len(model.requests) == 3
    assert (exc.max_turns, exc.agent_name) == (3, "agent")
    assert str(exc) == (
        "the run reached its limit of 3 model call(s) (max_turns) and agent 'agent' asked for "
        "another"
    )
    assert exc.event is exc.events[-1] and exc.error.type == "MaxTurnsExceeded"
    assert isinstance(exc.__cause__, MaxTurnsExceeded)  # the one the agent raised

    model = ScriptedModel([*_looping(5), "done"])
    events = [e async for e in runner().run("go", max_turns=3)]  # the event stream says the same
    assert events[-1].error is not None and events[-1].error.type == "MaxTurnsExceeded"
    assert isinstance(events[-1].exception, MaxTurnsExceeded)


async def test_within_the_limit_a_run_is_as_without_one() -> None:
    model = ScriptedModel([*_looping(2), "done"])
    result = await Runner(ReActAgent("agent", model, tools=[lookup])).invoke("go", max_turns=3)
    assert result.text == "done" and len(model.requests) == 3


async def test_every_agent_of_the_run_counts() -> None:
    def agents() -> adk.Agent:
        first = ReActAgent("first", ScriptedModel(["one"]))
        second = ReActAgent("second", ScriptedModel(["two"]))
        return adk.SequentialAgent("both", [first, second])

    assert (await Runner(agents()).invoke("go", max_turns=2)).text == "two"
    with pytest.raises(MaxTurnsExceeded, match="agent 'second' asked for another"):
        await Runner(agents()).invoke("go", max_turns=1)


async def test_an_action_agents_chat_requests_count() -> None:
    """An event-driven agent's built-in chat action calls the model as a ReActAgent does."""
    assert (await Runner(calculator()).invoke("1+2", max_turns=2)).text == "sum=3"
    with pytest.raises(MaxTurnsExceeded, match="agent 'calculator' asked for another"):
        await Runner(calculator()).invoke("1+2", max_turns=1)


def _delegating(inner_script: list[Any], outer_script: list[Any], **inner: Any) -> ReActAgent:
    helper = ReActAgent(
        "helper", ScriptedModel(inner_script), description="Helps.", tools=[lookup], **inner
    )
    return ReActAgent("desk", ScriptedModel(outer_script), tools=[AgentTool(helper)])


async def test_an_agent_tools_nested_run_counts_and_its_excess_fails_the_run() -> None:
    """Inside an ``AgentTool`` the limit was a tool error the model read, and a model that then
    answered ended the run as if within it."""
    ask = Reply(tool_calls=[tool_call("helper", {"request": "find x"}, id="h1")])
    agent = _delegating([*_looping(3), "found"], [ask, "answer"])

    with pytest.raises(MaxTurnsExceeded, match="agent 'helper' asked for another") as raised:
        await Runner(agent).invoke("go", max_turns=3)  # desk 1, helper 2: the third helper's
    assert raised.value.event.agent_name == "desk"  # the run's error event: its root agent's
    tool_results = [e for e in raised.value.events if e.message and e.message.role == "tool"]
    assert tool_results == []  # not a tool error for the desk's model

    agent = _delegating([*_looping(3), "found"], [ask, "answer"])
    assert (await Runner(agent).invoke("go", max_turns=6)).text == "answer"  # 1 + 4 + 1


async def test_the_excess_of_parallel_agent_tool_calls_fails_the_run() -> None:
    asks = [tool_call("helper", {"request": f"find {i}"}, id=f"h{i}") for i in range(2)]
    helper_replies = [lambda m: Reply(tool_calls=[tool_call("lookup", {"query": "q"}, id="l")])]
    agent = _delegating(helper_replies * 20, [Reply(tool_calls=asks), "answer"])

    with pytest.raises(MaxTurnsExceeded) as raised:
        await Runner(agent).invoke("go", max_turns=4)
    tool_results = [e for e in raised.value.events if e.message and e.message.role == "tool"]
    assert tool_results == []


class _Approvals:
    """A tool that pauses once per call for a person's answer."""

    def __init__(self) -> None:
        @adk.tool
        def approve(item: str, ctx: ToolContext) -> str:
            """Ask a person to approve an item."""
            if ctx.resume is None:
                raise Interrupt(f"approve {item}?")
            return f"{item}: {ctx.resume.data}"

        self.tool = approve


def _pausing_runner(store: Any, script: list[Any]) -> Runner:
    agent = ReActAgent("agent", ScriptedModel(script), tools=[_Approvals().tool, lookup])
    return Runner(agent, checkpoint_store=store)


async def test_the_count_goes_on_across_a_pause_with_a_fresh_runner(tmp_path: Path) -> None:
    pause = Reply(tool_calls=[tool_call("approve", {"item": "x"}, id="a1")])
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        paused = await _pausing_runner(store, [*_looping(2), pause]).invoke("go", max_turns=5)
        assert paused.checkpoint_id is not None  # 3 calls made
        saved = await store.get(paused.checkpoint_id)

        # The limit given at the start holds (a resume without max_turns), and the three calls
        # before the pause count: the third after it is refused.
        resumed = _pausing_runner(store, [*_looping(5), "done"])
        with pytest.raises(MaxTurnsExceeded) as raised:
            await resumed.invoke_resume(paused.checkpoint_id, "yes")
        assert raised.value.max_turns == 5

        # A resume's own max_turns replaces it, still counting the calls before the pause.
        await store.put(paused.checkpoint_id, saved)  # as paused: the failed resume kept it
        resumed = _pausing_runner(store, [*_looping(4), "done"])
        assert (await resumed.invoke_resume(paused.checkpoint_id, "yes", max_turns=8)).text == (
            "done"
        )
        await store.put(paused.checkpoint_id, saved)
        resumed = _pausing_runner(store, [*_looping(4), "done"])
        with pytest.raises(MaxTurnsExceeded, match="limit of 7"):
            await resumed.invoke_resume(paused.checkpoint_id, "yes", max_turns=7)


async def test_a_round_paused_with_no_call_left_is_refused_on_resume_before_it_runs() -> None:
    """The paused call's result would need a model call the limit does not allow: run, the
    approved call would be made, the run fail on the limit with the checkpoint kept, and a
    retry with a higher limit make it again. Refused before anything runs, as a round paused at
    ``max_iterations`` is; a resume's own higher ``max_turns`` goes on."""
    approved: list[str] = []

    @adk.tool(require_approval=True)
    def pay(item: str) -> str:
        """Pay for an item."""
        approved.append(item)
        return f"paid {item}"

    def runner(script: list[Any]) -> Runner:
        return Runner(ReActAgent("agent", ScriptedModel(script), tools=[pay]), store)

    store = InMemoryCheckpointStore()
    pause = Reply(tool_calls=[tool_call("pay", {"item": "x"}, id="p1")])
    paused = await runner([pause]).invoke("go", max_turns=1)
    assert paused.checkpoint_id is not None
    for lower in (None, 1):  # the saved limit, spent; then a resume's own, as low
        with pytest.raises(RunError) as refused:
            await runner(["done"]).invoke_resume(paused.checkpoint_id, True, max_turns=lower)
        assert isinstance(refused.value.__cause__, adk.CheckpointError)
        assert isinstance(refused.value.__cause__, ValueError)  # the resume's max_turns: resend
        assert getattr(refused.value.__cause__, "max_turns", None) == 1
        assert "the run paused after 1 model calls, at the run's max_turns of 1" in str(
            refused.value
        )
        assert approved == [] and await store.get(paused.checkpoint_id) is not None

    # Beyond: a checkpoint of three calls resumed under a lower limit.
    three = await runner([*_looping(2), pause]).invoke("go", max_turns=5)
    assert three.checkpoint_id is not None
    with pytest.raises(RunError, match="after 3 model calls, beyond the run's max_turns of 2"):
        await runner(["done"]).invoke_resume(three.checkpoint_id, True, max_turns=2)
    assert approved == []

    done = await runner(["done"]).invoke_resume(paused.checkpoint_id, True, max_turns=2)
    assert done.text == "done" and approved == ["x"]


async def test_a_round_that_ends_the_agent_resumes_with_no_call_left() -> None:
    """A return-directly call needs no model call after it: its pause at the limit resumes."""

    @adk.tool(require_approval=True)
    def pay(item: str) -> str:
        """Pay for an item."""
        return f"paid {item}"

    agent = ReActAgent(
        "agent",
        ScriptedModel([Reply(tool_calls=[tool_call("pay", {"item": "x"}, id="p1")])]),
        tools=[pay],
        return_directly=["pay"],
    )
    runner = Runner(agent)
    paused = await runner.invoke("go", max_turns=1)
    assert paused.checkpoint_id is not None
    assert (await runner.invoke_resume(paused.checkpoint_id, True)).text == "paid x"


async def test_a_nested_runs_calls_before_the_pause_count_after_it() -> None:
    store = InMemoryCheckpointStore()
    pause = Reply(tool_calls=[tool_call("approve", {"item": "x"}, id="a1")])
    helper = ReActAgent(
        "helper",
        ScriptedModel([*_looping(2), pause, "found"]),
        description="Helps.",
        tools=[_Approvals().tool, lookup],
    )
    ask = Reply(tool_calls=[tool_call("helper", {"request": "find x"}, id="h1")])
    desk = ReActAgent("desk", ScriptedModel([ask, "answer"]), tools=[AgentTool(helper)])
    runner = Runner(desk, checkpoint_store=store)

    paused = await runner.invoke("go", max_turns=5)  # desk 1, helper 3
    assert paused.checkpoint_id is not None
    data = await store.get(paused.checkpoint_id)
    assert data is not None
    assert decode_checkpoint(data, "x")["turns"] == {"max_turns": 5, "used": 4}

    # The helper's answer would be the 5th call, the desk's the 6th: the four before the pause
    # count, so the resume is refused before the approved call runs again (test_max_turns_pauses)
    with pytest.raises(RunError, match="after 4 model calls of the run's max_turns of 5"):
        await runner.invoke_resume(paused.checkpoint_id, "yes")
    assert (await runner.invoke_resume(paused.checkpoint_id, "yes", max_turns=6)).text == "answer"


async def test_a_run_paused_without_a_limit_counts_from_its_resume() -> None:
    """An older checkpoint, or a run started without max_turns: nothing was counted."""
    store = InMemoryCheckpointStore()
    pause = Reply(tool_calls=[tool_call("approve", {"item": "x"}, id="a1")])
    paused = await _pausing_runner(store, [*_looping(3), pause]).invoke("go")
    assert paused.checkpoint_id is not None
    data = await store.get(paused.checkpoint_id)
    assert data is not None and "turns" not in decode_checkpoint(data, "x")

    resumed = _pausing_runner(store, [*_looping(1), "done"])
    assert (await resumed.invoke_resume(paused.checkpoint_id, "yes", max_turns=2)).text == "done"


@pytest.mark.parametrize(
    "turns",
    [
        {"max_turns": 0, "used": 0},
        {"max_turns": 3, "used": -1},
        {"max_turns": "3", "used": 0},
        {"max_turns": 3},
        [3, 0],
    ],
)
async def test_a_checkpoint_whose_turns_are_malformed_is_refused(turns: Any) -> None:
    store = InMemoryCheckpointStore()
    pause = Reply(tool_calls=[tool_call("approve", {"item": "x"}, id="a1")])
    paused = await _pausing_runner(store, [pause]).invoke("go", max_turns=3)
    assert paused.checkpoint_id is not None
    async with rewrite_checkpoint(store, paused.checkpoint_id) as body:
        body["turns"] = turns

    with pytest.raises(adk.CheckpointError, match="turns is not a max_turns"):
        await _pausing_runner(store, ["done"]).invoke_resume(paused.checkpoint_id, "yes")


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-1, ValueError), (True, TypeError), ("3", TypeError), (2.0, TypeError)],
)
async def test_max_turns_must_be_a_positive_int(value: Any, error: type[Exception]) -> None:
    model = ScriptedModel(["hi"])
    runner = Runner(ReActAgent("agent", model))
    with pytest.raises(error, match="max_turns must be a positive int or None"):
        await runner.invoke("go", max_turns=value)
    with pytest.raises(error, match="max_turns must be a positive int or None"):
        runner.run("go", max_turns=value)
    with pytest.raises(error, match="max_turns must be a positive int or None"):
        runner.resume("any", max_turns=value)
    with pytest.raises(error, match="max_turns must be a positive int or None"):
        await runner.invoke_resume("any", max_turns=value)
    assert model.requests == []


async def test_a_service_over_the_openai_wire_stops_at_the_limit() -> None:
    calls = [
        WireReply(tool_calls=[WireCall("lookup", json.dumps({"query": str(i)}), f"c{i}")])
        for i in range(5)
    ]
    async with OpenAIServer([*calls, WireReply(text="done")]) as server:
        model = wire_model(server, name="wire", api_key="test")
        async with Runner(ReActAgent("agent", model, tools=[lookup])) as runner:
            with pytest.raises(MaxTurnsExceeded, match="limit of 2"):
                await runner.invoke("go", max_turns=2)
        assert len(server.requests) == 2
