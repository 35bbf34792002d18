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

import random
from collections import Counter

import pytest
from agent_trees import agent_tree

from adk import (
    AgentEvent,
    Role,
    Runner,
)

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
