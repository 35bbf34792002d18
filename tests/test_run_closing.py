"""A run closed or cancelled at any point leaves nothing running.

For random agent trees (see ``agent_trees``), a reader closes the run after a random number of
events, or the task reading it is cancelled after a random number of loop steps. By the time the
close returns (or the cancelled task has been awaited) no task of the run may be left — parallel
branches, concurrent tool calls, nested ``AgentTool`` runs, model streams — without waiting for
asyncio to finalize dropped generators or for the garbage collector; and the same tree runs again
to its end. (A tool round left at a yield used to be finalized only later, its calls still
running: this test found it.)
"""

from __future__ import annotations

import asyncio
import random

import pytest
from agent_trees import agent_tree, end_a_run

from adk import RunError, Runner

SEEDS = range(120)


def _others() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


@pytest.mark.parametrize("streaming", [False, True], ids=["messages", "streams"])
async def test_closing_or_cancelling_a_run_anywhere_leaves_nothing_running(
    streaming: bool,
) -> None:
    for seed in SEEDS:
        choose = random.Random(seed)
        runner = Runner(
            agent_tree(seed, choose.random() < 0.5, [], actors=True), enable_streaming=streaming
        )
        steps = choose.randint(0, 8)
        kind = "closed" if choose.random() < 0.5 else "cancelled"
        await end_a_run(runner, kind, steps, choose)

        assert _others() == [], f"seed {seed}: left running"
        again = await Runner(
            agent_tree(seed, False, [], actors=True), enable_streaming=streaming
        ).invoke("go")
        assert again.interrupt is None and again.text.endswith("done"), f"seed {seed}"


@pytest.mark.parametrize("streaming", [False, True], ids=["messages", "streams"])
async def test_a_model_failing_anywhere_ends_the_run_with_one_error_and_nothing_running(
    streaming: bool,
) -> None:
    # Any agent that speaks in the run (not one behind an AgentTool: its failure is a tool result
    # for the caller's model) fails after its tool ran, in a run paused at every tool call or in
    # one that is not: one error event names it, nothing is left running, and a resume that
    # failed keeps its checkpoint.
    for seed in range(0, 120, 2):
        plain = await Runner(agent_tree(seed, False, [], actors=True)).invoke("go")
        speakers = sorted({e.agent_name for e in plain.events if e.agent_name.startswith("leaf")})
        if not speakers:
            continue
        choose = random.Random(seed)
        failing = choose.choice(speakers)
        tree = agent_tree(seed, choose.random() < 0.5, [], failing=failing, actors=True)
        runner = Runner(tree, enable_streaming=streaming)
        checkpoint_id = None

        with pytest.raises(RunError) as raised:
            result = await runner.invoke("go")
            while result.interrupt is not None:
                checkpoint_id = result.checkpoint_id
                assert checkpoint_id is not None
                approvals = {p.id: {"approved": True} for p in result.interrupt.points}
                result = await runner.invoke_resume(checkpoint_id, approvals)

        errors = [e for e in raised.value.events if e.error is not None]
        assert len(errors) == 1 and f"{failing}'s model went away" in str(errors[0].error), seed
        assert _others() == [], f"seed {seed}: left running"
        if checkpoint_id is not None:
            assert await runner.checkpoint_store.get(checkpoint_id) is not None, seed
