"""Pausing and resuming does not change what a run does.

For random agent trees (sequences, parallel branches with and without a concurrency limit, loops,
``AgentTool`` callers, transfers to sub-agents, nested three deep, with ReAct leaves that call one
tool and answer, event-driven leaves that do the same through actions, and custom agents that pause
themselves), a run where every tool call waits for
approval and every custom agent asks a person, resumed until it finishes, must run each tool
exactly as often, and say exactly what, the same tree says with no pauses at all, and an agent
after it must be given the same history — whichever points each resume approves (all, or a
random part, the rest pausing again), whether each resume is made by a fresh runner over the
stored checkpoint (as another process would) and whether it streams. The representative trees of
``faults`` are checked the same way over a SQLite file, each resume by a new runner and store,
with hypothesis choosing the points each resume answers; there the answer and the session must
match too.

This is the contract of resume as one property: finished work is not re-run, paused work is not
lost, nothing is said twice. Seeds and examples are fixed, so a failure names a case to replay.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from agent_trees import agent_tree
from faults import APPROVE, TREES, Faults, said, session_json
from hypothesis import HealthCheck, given, settings

from adk import (
    Agent,
    AgentEvent,
    AgentInput,
    BaseAgent,
    Interrupt,
    RunContext,
    Runner,
    SequentialAgent,
    ToolContext,
    tool,
)
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent

SEEDS = range(60)


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
        seen_plain: list[Counter[str]] = []
        # Compared with a run that streams alike: streaming shows more than it says (an
        # event-driven leaf's chat replies, as well as its output), but records the same.
        plain_runner = Runner(
            _recorded(seed, False, ran_plain, seen_plain), enable_streaming=streaming
        )
        plain = await plain_runner.invoke("go")
        if streaming:
            unstreamed: list[Counter[str]] = []
            await Runner(_recorded(seed, False, [], unstreamed)).invoke("go")
            assert unstreamed == seen_plain, f"seed {seed}: streaming changed the history"

        ran: list[str] = []
        seen: list[Counter[str]] = []
        runner = Runner(_recorded(seed, True, ran, seen), enable_streaming=streaming)
        result = await runner.invoke("go")
        answers = said(result.events)
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
                runner = Runner(_recorded(seed, True, ran, seen), store, enable_streaming=streaming)
            assert result.checkpoint_id is not None
            result = await runner.invoke_resume(result.checkpoint_id, approvals)
            answers += said(result.events)

        assert ran_plain and resumes >= 1, f"seed {seed}: nothing paused"
        assert Counter(ran) == Counter(ran_plain), f"seed {seed}: tools ran differently"
        assert Counter(answers) == Counter(said(plain.events)), f"seed {seed}: said differently"
        assert seen == seen_plain, f"seed {seed}: the last agent was given another history"


def _recorded(seed: int, approval: bool, ran: list[str], seen: list[Counter[str]]) -> Agent:
    """The tree of ``seed``, then an agent that records the history it is given (as a multiset:
    parallel branches interleave differently when some of them paused)."""

    class Recorder(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            seen.append(Counter(f"{m.role}: {m.content}" for m in input.messages))
            yield AgentEvent.of("recorded")

    tree = agent_tree(seed, approval, ran, askers=True, actors=True)
    return SequentialAgent("root", [tree, Recorder("recorder")])


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


class _Recorder(BaseAgent):
    """Runs last: records the history and the session it is given."""

    def __init__(self, seen: list[tuple[Counter[str], str]]) -> None:
        super().__init__("recorder", description="records")
        self.seen = seen

    async def run(self, input: Any, ctx: Any) -> Any:
        history = Counter(f"{m.role}: {m.content}" for m in input.messages)
        self.seen.append((history, session_json(ctx.session.values)))
        yield AgentEvent.of("recorded")


@settings(
    derandomize=True,  # the same examples every run: a failure is reproducible
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    max_examples=30,
)
@given(tree=st.sampled_from(sorted(TREES)), streaming=st.booleans(), choices=st.data())
def test_resuming_any_points_in_any_order_across_processes_matches_an_unpaused_run(
    tmp_path_factory: Any, tree: str, streaming: bool, choices: st.DataObject
) -> None:
    """Each resume answers some of the pending points (hypothesis picks which) and is made by a
    new runner over a new store object on the SQLite file (as another process would). The
    unanswered points stay pending under their ids; at the end the work done, what was said,
    the answer, the session and the history a last agent is given are those of a run that
    never paused (the trees of ``faults``: workflows, transfers, supervisor, plan-execute, agent
    tools, concurrent tool calls with approvals and ``Interrupt``, event-driven agents)."""
    path = tmp_path_factory.mktemp("orders") / "checkpoints.db"
    asyncio.run(_orders(path, tree, streaming, choices))


async def _orders(path: Path, tree: str, streaming: bool, choices: st.DataObject) -> None:
    def build(faults: Faults, pause: bool, seen: list[Any]) -> Any:
        return SequentialAgent("root", [TREES[tree](faults, pause), _Recorder(seen)])

    plain_seen: list[Any] = []
    faults = Faults()
    plain = await Runner(build(faults, False, plain_seen), enable_streaming=streaming).invoke("go")
    expected = (Counter(faults.log), plain.text, session_json(plain.session.values))

    faults = Faults()
    seen: list[Any] = []
    spoken: list[str] = []
    pending: list[str] = []
    chosen: set[str] = set()
    for step in itertools.count():
        assert step < 30, "does not finish"
        async with SQLiteCheckpointStore(path) as store:
            runner = Runner(build(faults, True, seen), store, enable_streaming=streaming)
            if step == 0:
                result = await runner.invoke("go", checkpoint_id="cp")
            else:
                result = await runner.invoke_resume("cp", dict.fromkeys(chosen, APPROVE))
        spoken += said(result.events)
        if result.interrupt is None:
            break
        unanswered = set(pending) - chosen
        assert unanswered <= set(result.interrupt.point_ids), "unanswered points were lost"
        pending = sorted(result.interrupt.point_ids)
        chosen = choices.draw(st.sets(st.sampled_from(pending), min_size=1), label="answered")

    assert (Counter(faults.log), result.text, session_json(result.session.values)) == expected
    assert Counter(spoken) == Counter(said(plain.events))
    assert seen[-1] == plain_seen[-1], "the last agent saw another history or session"
