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
import contextlib
import random

import pytest
from agent_trees import agent_tree

from adk import Runner

SEEDS = range(120)


def _others() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


@pytest.mark.parametrize("streaming", [False, True], ids=["messages", "streams"])
async def test_closing_or_cancelling_a_run_anywhere_leaves_nothing_running(
    streaming: bool,
) -> None:
    for seed in SEEDS:
        choose = random.Random(seed)
        runner = Runner(agent_tree(seed, choose.random() < 0.5, []), enable_streaming=streaming)
        steps = choose.randint(0, 8)
        if choose.random() < 0.5:
            async with contextlib.aclosing(runner.run("go")) as events:
                seen = 0
                async for event in events:
                    stream = event.output.stream if event.output is not None else None
                    if stream is not None and choose.random() < 0.5:
                        async with contextlib.aclosing(aiter(stream)) as chunks:
                            async for _ in chunks:
                                break  # a reader that stops mid-stream
                    seen += 1
                    if seen > steps:
                        break
        else:

            async def read(runner: Runner = runner) -> None:
                async with contextlib.aclosing(runner.run("go")) as events:
                    async for event in events:
                        if event.output is not None and event.output.stream is not None:
                            await event.output.stream.collect()

            reader = asyncio.create_task(read())
            for _ in range(steps):
                await asyncio.sleep(0)
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

        assert _others() == [], f"seed {seed}: left running"
        again = await Runner(agent_tree(seed, False, []), enable_streaming=streaming).invoke("go")
        assert again.interrupt is None and again.text.endswith("done"), f"seed {seed}"
