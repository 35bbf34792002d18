"""Pausing and resuming does not change what a run does.

For random agent trees (sequences, parallel branches with and without a concurrency limit, loops,
``AgentTool`` callers, transfers to sub-agents, nested three deep, with ReAct leaves that call one
tool and answer, event-driven leaves that do the same through actions, and custom agents that pause
themselves), a run where every tool call waits for
approval and every custom agent asks a person, resumed until it finishes, must run each tool
exactly as often, and say exactly what, the same tree says with no pauses at all — whichever
points each resume approves (all, or a random part, the rest pausing again), whether each resume
is made by a fresh runner over the stored checkpoint (as another process would) and whether it
streams.

This is the contract of resume as one property: finished work is not re-run, paused work is not
lost, nothing is said twice. Seeds are fixed, so a failure names a tree to replay.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter

import pytest
from agent_trees import agent_tree

from adk import (
    AgentEvent,
    Interrupt,
    Role,
    Runner,
    ToolContext,
    tool,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent

SEEDS = range(60)


def _said(events: list[AgentEvent]) -> list[str]:
    """What the agents answered (streamed answers were collected by ``invoke``)."""
    said = []
    for event in events:
        output = event.output
        if output is None or output.role != Role.ASSISTANT:
            continue
        message = output.message
        if message is None and output.stream is not None:
            message = output.stream._joined  # collected by invoke, before the result was made
        if message is not None and message.content:
            said.append(message.content)
    return said


@pytest.mark.parametrize(
    ("fresh_runners", "partial", "streaming"),
    [(False, False, False), (True, True, False), (True, True, True)],
    ids=["approve-all", "fresh-runner-partial", "fresh-runner-partial-streaming"],
)
async def test_a_run_paused_at_every_tool_call_does_what_an_unpaused_one_does(
    fresh_runners: bool, partial: bool, streaming: bool
) -> None:
    for seed in SEEDS:
        ran_plain: list[str] = []
        plain = await Runner(agent_tree(seed, False, ran_plain, askers=True, actors=True)).invoke(
            "go"
        )

        ran: list[str] = []
        runner = Runner(
            agent_tree(seed, True, ran, askers=True, actors=True), enable_streaming=streaming
        )
        result = await runner.invoke("go")
        said = _said(result.events)
        choose = random.Random(seed)
        resumes = 0
        while result.interrupt is not None:
            resumes += 1
            assert resumes < 100, f"seed {seed}: does not finish"
            points = result.interrupt.points
            chosen = [p for p in points if choose.random() < 0.5] if partial else points
            approvals = {p.id: {"approved": True} for p in chosen or points[:1]}
            if fresh_runners:
                store = runner.checkpoint_store
                runner = Runner(
                    agent_tree(seed, True, ran, askers=True, actors=True),
                    store,
                    enable_streaming=streaming,
                )
            assert result.checkpoint_id is not None
            result = await runner.invoke_resume(result.checkpoint_id, approvals)
            said += _said(result.events)

        assert ran_plain and resumes >= 1, f"seed {seed}: nothing paused"
        assert Counter(ran) == Counter(ran_plain), f"seed {seed}: tools ran differently"
        assert Counter(said) == Counter(_said(plain.events)), f"seed {seed}: said differently"


@pytest.mark.parametrize("streaming", [False, True])
async def test_results_that_end_a_react_agent_survive_a_pause_in_their_round(
    streaming: bool,
) -> None:
    """One turn calls two return-directly tools (finishing out of call order), ``exit`` and a tool
    that pauses. Paused and resumed by a fresh runner, the run emits the held results in the same
    order (call order, the exit result last), ends on ``final_result`` and stores it."""

    def build(pause: bool) -> ReActAgent:
        b_done = asyncio.Event()

        @tool
        async def direct_a() -> str:
            """A."""
            await b_done.wait()
            return "from a"

        @tool
        async def direct_b() -> str:
            """B."""
            b_done.set()
            return "from b"

        @tool
        def gate(ctx: ToolContext) -> str:
            """Needs approval."""
            if pause and ctx.resume is None:
                raise Interrupt("approve?")
            return "approved"

        reply = Reply(
            tool_calls=[
                tool_call("direct_a", {}, id="c1"),
                tool_call("direct_b", {}, id="c2"),
                tool_call("exit", {"final_result": "all done"}, id="c3"),
                tool_call("gate", {}, id="c4"),
            ]
        )
        return ReActAgent(
            "a",
            ScriptedModel([reply]),
            tools=[direct_a, direct_b, gate],
            return_directly=["direct_a", "direct_b"],
            exit_tool=True,
            output_key="out",
        )

    plain = await Runner(build(False), enable_streaming=streaming).invoke("go")
    store = InMemoryCheckpointStore()
    paused = await Runner(build(True), store, enable_streaming=streaming).invoke("go")
    assert paused.interrupt is not None and paused.checkpoint_id is not None
    resumed = await Runner(build(True), store, enable_streaming=streaming).invoke_resume(
        paused.checkpoint_id, True
    )

    ending = ["a: [tool direct_a] from a", "a: [tool direct_b] from b", "a: [tool exit] all done"]
    assert simplify_events(plain.events)[-4:] == [*ending, "a: [exit]"]
    assert simplify_events(resumed.events) == ["a: [tool gate] approved", *ending, "a: [exit]"]
    assert resumed.text == plain.text == "all done"
    assert resumed.session["out"] == plain.session["out"] == "all done"
