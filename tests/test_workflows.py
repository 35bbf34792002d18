"""SequentialAgent, LoopAgent and ParallelAgent: order, run paths, exit, break, max_iterations,
interleaving, backpressure, max_concurrency, and cancellation of sibling branches."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest
from conftest import ScriptAgent, act_break, act_exit, act_transfer, do, other_tasks, run_events

from adk import (
    AgentAction,
    AgentEvent,
    AgentInput,
    AgentOutput,
    BaseAgent,
    Callbacks,
    LoopAgent,
    MessageChunk,
    MessageStream,
    ModelError,
    ParallelAgent,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    with_sub_agents,
)
from adk.testing import simplify_events

# -- SequentialAgent ----------------------------------------------------------------------------


async def test_sequential_runs_steps_in_order_with_growing_run_paths() -> None:
    a1, a2, a3 = ScriptAgent("a1", "one"), ScriptAgent("a2", "two"), ScriptAgent("a3", "three")
    events = await run_events(SequentialAgent("seq", [a1, a2, a3]))
    assert simplify_events(events) == ["a1: one", "a2: two", "a3: three"]
    assert [e.run_path for e in events] == [
        ("seq", "a1"),
        ("seq", "a1", "a2"),
        ("seq", "a1", "a2", "a3"),
    ]
    assert [a.paths for a in (a1, a2, a3)] == [
        [("seq", "a1")],
        [("seq", "a1", "a2")],
        [("seq", "a1", "a2", "a3")],
    ]


async def test_exit_in_the_first_step_stops_the_rest() -> None:
    pulled: list[int] = []
    first = ScriptAgent("first", "go", act_exit(), do(lambda: pulled.append(1)), "never")
    rest = [ScriptAgent("second", "no"), ScriptAgent("third", "no")]
    events = await run_events(SequentialAgent("seq", [first, *rest]))
    assert simplify_events(events) == ["first: go", "first: [exit]"]
    assert pulled == [] and first.reached == 1
    assert first.closed == 1 and first.completed == 0  # its generator was closed, finally ran
    assert [a.runs for a in rest] == [0, 0]


async def test_nested_sequences_extend_the_run_path() -> None:
    inner = SequentialAgent("inner", [ScriptAgent("x", "x"), ScriptAgent("y", "y")])
    outer = SequentialAgent("outer", [ScriptAgent("a", "a"), inner, ScriptAgent("b", "b")])
    events = await run_events(outer)
    assert [e.run_path for e in events] == [
        ("outer", "a"),
        ("outer", "a", "inner", "x"),
        ("outer", "a", "inner", "x", "y"),
        ("outer", "a", "inner", "b"),
    ]


def test_workflows_reject_duplicate_names_and_bad_limits() -> None:
    with pytest.raises(ValueError, match="unique"):
        SequentialAgent("seq", [ScriptAgent("a"), ScriptAgent("a")])
    with pytest.raises(ValueError):
        LoopAgent("loop", [ScriptAgent("a")], max_iterations=0)
    with pytest.raises(ValueError):
        ParallelAgent("par", [ScriptAgent("a")], max_concurrency=0)


@pytest.mark.parametrize("make", [SequentialAgent, ParallelAgent, LoopAgent])
def test_workflows_refuse_sub_agents_that_are_not_agents_naming_the_position(make: Any) -> None:
    kind = make.__name__
    with pytest.raises(TypeError, match=rf"{kind} 'w': sub_agents\[1\]: expected an agent.*int 42"):
        make("w", [ScriptAgent("a"), 42])
    with pytest.raises(TypeError, match=r"sub_agents\[0\]: .*the class ScriptAgent"):
        make("w", [ScriptAgent])
    with pytest.raises(TypeError, match="sub_agents must be a list of agents, got str 'ab'"):
        make("w", "ab")
    with pytest.raises(TypeError, match="sub_agents must be a list of agents, got None"):
        make("w", None)
    with pytest.raises(TypeError, match=f"a {kind} needs a str name, got int 7"):
        make(7, [ScriptAgent("a")])


@pytest.mark.parametrize("bad", ["3", 2.5, True, 1.0])
def test_workflow_limits_must_be_ints(bad: Any) -> None:
    """A str failed at the first comparison, inside the run; 2.5 ran 3 iterations and True ran
    one: each is refused where the workflow is made."""
    with pytest.raises(TypeError, match="LoopAgent 'loop': max_iterations must be an int >= 1"):
        LoopAgent("loop", [ScriptAgent("a")], max_iterations=bad)
    with pytest.raises(TypeError, match="ParallelAgent 'par': max_concurrency must be an int"):
        ParallelAgent("par", [ScriptAgent("a")], max_concurrency=bad)


def test_with_sub_agents_refuses_a_non_agent_before_adopting_any() -> None:
    """The whole list is checked first: a bad entry leaves the good ones free to be wired
    elsewhere (an agent has one parent)."""
    good = ScriptAgent("good")
    with pytest.raises(TypeError, match=r"agent 'w': sub_agents\[1\]: expected an agent.*int 42"):
        with_sub_agents(ScriptAgent("w"), [good, 42])  # type: ignore[list-item]
    flow = with_sub_agents(ScriptAgent("v"), [good])
    assert [sub.name for sub in flow.sub_agents] == ["good"]
    with pytest.raises(TypeError, match=r"with_sub_agents\(agent\): expected an agent"):
        with_sub_agents(None, [ScriptAgent("x")])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="max_transfers must be an int >= 1 or None, got str"):
        with_sub_agents(ScriptAgent("u"), [], max_transfers="5")  # type: ignore[arg-type]


async def test_a_loop_with_no_steps_and_no_limit_is_refused() -> None:
    # It would repeat nothing forever without ever awaiting: the event loop hangs, and neither
    # task.cancel() nor asyncio.timeout can stop it. With a limit it ends at once.
    with pytest.raises(ValueError, match="no sub-agents"):
        LoopAgent("loop", [])
    async with asyncio.timeout(5):
        assert await run_events(LoopAgent("loop", [], max_iterations=3)) == []


# -- LoopAgent ----------------------------------------------------------------------------------


async def test_loop_repeats_until_max_iterations_with_growing_run_paths() -> None:
    a, b = ScriptAgent("a", "A"), ScriptAgent("b", "B")
    events = await run_events(LoopAgent("loop", [a, b], max_iterations=3))
    assert simplify_events(events) == ["a: A", "b: B"] * 3
    assert (a.runs, b.runs) == (3, 3)
    assert [e.run_path for e in events[:4]] == [
        ("loop", "a"),
        ("loop", "a", "b"),
        ("loop", "a", "b", "a"),
        ("loop", "a", "b", "a", "b"),
    ]


async def test_loop_without_limit_stops_at_break_after_the_agent_finishes() -> None:
    runs = {"n": 0}

    def maybe_break(ctx: RunContext) -> AgentEvent | None:
        runs["n"] += 1
        return AgentEvent.break_loop() if runs["n"] == 3 else None

    worker = ScriptAgent("worker", "tick", maybe_break, "finishing")
    after = ScriptAgent("after", "never in this iteration")
    events = await run_events(LoopAgent("loop", [worker, after]))
    assert worker.runs == 3 and worker.completed == 3  # the breaking agent finished
    assert after.runs == 2  # the step after the breaking one did not run in iteration 3
    assert simplify_events(events)[-3:] == [
        "worker: tick",
        "worker: [break_loop]",
        "worker: finishing",
    ]


async def test_exit_in_a_loop_nested_in_a_sequence_ends_everything() -> None:
    a, c, d = ScriptAgent("a", "A"), ScriptAgent("c", "C"), ScriptAgent("d", "D")
    exiter = ScriptAgent("exiter", "bye", act_exit(), "never")
    seq = SequentialAgent("seq", [LoopAgent("loop", [a, exiter, c]), d])
    events = await run_events(seq)
    assert simplify_events(events) == ["a: A", "exiter: bye", "exiter: [exit]"]
    assert (a.runs, c.runs, d.runs) == (1, 0, 0)
    assert exiter.closed == 1 and exiter.completed == 0


async def test_break_in_an_inner_loop_leaves_the_outer_loop_running() -> None:
    x = ScriptAgent("x", "x")
    breaker = ScriptAgent("breaker", act_break(), "b-done")
    after = ScriptAgent("after", "after")
    inner = LoopAgent("inner", [x, breaker], max_iterations=5)
    outer = LoopAgent("outer", [inner, after], max_iterations=3)
    events = await run_events(outer)
    assert (x.runs, breaker.runs, after.runs) == (3, 3, 3)
    assert (
        simplify_events(events)
        == [
            "x: x",
            "breaker: [break_loop]",
            "breaker: b-done",
            "after: after",
        ]
        * 3
    )


async def test_break_in_a_sequence_inside_a_loop_stops_the_sequence_and_the_loop() -> None:
    # docs/architecture.md: the sequence stops after the step that asked; the loop sees the same
    # event and stops after the step it is running.
    breaker = ScriptAgent("breaker", act_break(), "finishing")
    skipped, later = ScriptAgent("skipped"), ScriptAgent("later")
    loop = LoopAgent("loop", [SequentialAgent("seq", [breaker, skipped]), later], max_iterations=4)
    events = await run_events(loop)
    assert simplify_events(events) == ["breaker: [break_loop]", "breaker: finishing"]
    assert (breaker.runs, skipped.runs, later.runs) == (1, 0, 0)


async def test_a_loop_stops_at_the_first_error() -> None:
    a = ScriptAgent("a", "A")
    boom = ScriptAgent("boom", ValueError("nope"))
    events = await run_events(LoopAgent("loop", [a, boom]))
    assert simplify_events(events) == ["a: A", "boom: [error nope]"]
    assert a.runs == 1


# -- ParallelAgent ------------------------------------------------------------------------------


async def test_parallel_events_interleave_as_they_happen() -> None:
    # Each branch can only go on once the other has said something: run one after the other,
    # this deadlocks; run concurrently, the events must come a1 < b1 < a2.
    a_said, b_said = asyncio.Event(), asyncio.Event()
    a = ScriptAgent("a", "a1", do(a_said.set), b_said, "a2")
    b = ScriptAgent("b", a_said, "b1", do(b_said.set), "b2")
    async with asyncio.timeout(5):
        events = await run_events(ParallelAgent("par", [a, b]))
    lines = simplify_events(events)
    assert sorted(lines) == ["a: a1", "a: a2", "b: b1", "b: b2"]
    assert lines.index("a: a1") < lines.index("b: b1") < lines.index("a: a2")
    assert {e.run_path for e in events} == {("par", "a"), ("par", "b")}


async def test_each_branch_waits_until_its_previous_event_was_taken() -> None:
    produced: list[int] = []
    steps: list[Any] = []
    for i in range(4):
        steps += [do(partial(produced.append, i)), f"a{i}"]
    fast = ScriptAgent("fast", *steps)
    other = ScriptAgent("other", "o1", "o2")
    seen = 0
    async with asyncio.timeout(5):
        async for event in Runner(ParallelAgent("par", [fast, other])).run("go"):
            if event.agent_name != "fast":
                continue
            seen += 1
            for _ in range(20):  # give the branch every chance to run ahead
                await asyncio.sleep(0)
            assert len(produced) == seen, "the branch ran ahead of its consumer"
    assert seen == 4


@pytest.mark.parametrize("limit", [1, 2, 3])
async def test_max_concurrency_bounds_the_running_branches(limit: int) -> None:
    state = {"active": 0, "peak": 0}

    def enter() -> None:
        state["active"] += 1
        state["peak"] = max(state["peak"], state["active"])

    def leave() -> None:
        state["active"] -= 1

    branches = [ScriptAgent(f"b{i}", do(enter), f"hi{i}", f"bye{i}", do(leave)) for i in range(6)]
    async with asyncio.timeout(5):
        events = await run_events(ParallelAgent("par", branches, max_concurrency=limit))
    assert state["peak"] == limit
    assert [b.completed for b in branches] == [1] * 6
    assert len(events) == 12


async def test_a_failing_branch_cancels_its_siblings_and_leaves_no_task() -> None:
    started, never = asyncio.Event(), asyncio.Event()
    blocker = ScriptAgent("blocker", "started", do(started.set), never, "never")
    failer = ScriptAgent("failer", started, RuntimeError("branch broke"))
    after = ScriptAgent("after", "never")
    before = other_tasks()
    async with asyncio.timeout(5):
        events = await run_events(
            SequentialAgent("seq", [ParallelAgent("par", [blocker, failer]), after])
        )
    assert simplify_events(events) == ["blocker: started", "failer: [error branch broke]"]
    assert blocker.cancelled == 1 and blocker.closed == 1 and blocker.completed == 0
    assert after.runs == 0
    assert other_tasks() == before


async def test_exit_in_a_branch_cancels_the_siblings_and_ends_the_run() -> None:
    started, never = asyncio.Event(), asyncio.Event()
    blocker = ScriptAgent("blocker", do(started.set), never)
    exiter = ScriptAgent("exiter", started, "done", act_exit(), "never")
    after = ScriptAgent("after", "never")
    before = other_tasks()
    async with asyncio.timeout(5):
        events = await run_events(
            SequentialAgent("seq", [ParallelAgent("par", [blocker, exiter]), after])
        )
    assert simplify_events(events) == ["exiter: done", "exiter: [exit]"]
    assert blocker.cancelled == 1 and exiter.closed == 1 and after.runs == 0
    assert other_tasks() == before


async def test_an_unhandled_transfer_from_a_branch_is_an_error() -> None:
    # docs/architecture.md: there is no single "next agent" for a set of concurrent branches.
    mover = ScriptAgent("mover", act_transfer("elsewhere"))
    events = await run_events(ParallelAgent("par", [mover, ScriptAgent("other")]))
    errors = [e for e in events if e.error is not None]
    assert len(errors) == 1 and "transfer failed" in errors[0].error.message  # type: ignore[union-attr]


async def test_steps_after_a_parallel_agent_continue_the_run_path() -> None:
    par = ParallelAgent("par", [ScriptAgent("a", "A")])
    events = await run_events(SequentialAgent("seq", [par, ScriptAgent("z", "Z")]))
    assert [e.run_path for e in events] == [("seq", "par", "a"), ("seq", "par", "z")]


async def test_a_loop_of_agents_that_never_await_can_still_be_cancelled() -> None:
    """An unbounded loop whose step yields without ever awaiting would never give the event loop
    back: every so many iterations the loop does, so a timeout (or any cancellation) gets
    through and other runs keep going."""

    class Busy(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            yield AgentEvent.of("again")

    other_ran = asyncio.Event()

    async def other() -> None:
        other_ran.set()

    runner = Runner(LoopAgent("forever", [Busy("busy")]))
    task = asyncio.create_task(other())
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await runner.invoke("go")
    assert other_ran.is_set()
    await task


# -- failures and streams at the edges of a parallel run ------------------------------------------
async def test_a_branch_whose_after_agent_callback_fails_fails_the_parallel_run() -> None:
    """A failure the driver itself raises must not pass for a finished branch."""

    def after_agent(agent: Any, ctx: RunContext, error: Any) -> None:
        if agent.name == "b":
            raise RuntimeError(f"after_agent failed for {agent.name}")

    slow = asyncio.Event()
    par = ParallelAgent("P", [ScriptAgent("b", "b done"), ScriptAgent("c", slow, "c done")])
    runner = Runner(par, callbacks=[Callbacks(after_agent=after_agent)])

    with pytest.raises(RunError, match="after_agent failed for b"):
        await runner.invoke("hi")
    assert not other_tasks()


async def _chunks(*parts: str) -> AsyncIterator[MessageChunk]:
    for part in parts:
        await asyncio.sleep(0)
        yield MessageChunk(content=part)


async def test_a_branch_that_exits_with_a_stream_is_read_to_its_end() -> None:
    """Cancelling the branch that ended the run would cut its stream off unread."""

    def exit_streaming(ctx: RunContext) -> AgentEvent:
        stream = MessageStream(_chunks("final ", "answer"))
        return AgentEvent(output=AgentOutput(stream=stream), action=AgentAction(exit=True))

    blocked = ScriptAgent("b", asyncio.Event(), "never")
    par = ParallelAgent("P", [ScriptAgent("a", exit_streaming), blocked])
    # The consumer reads the stream only after the run: the driver has closed the parallel agent
    # right after the exit event by then.
    events = [event async for event in Runner(par).run("hi")]
    streams = [e.output.stream for e in events if e.output is not None and e.output.stream]
    assert [(await stream.collect()).content for stream in streams] == ["final answer"]
    assert blocked.cancelled == 1 and not other_tasks()


async def _breaking() -> AsyncIterator[MessageChunk]:
    yield MessageChunk(content="a partial ")
    raise ModelError("the wire broke")


def _exit_breaking(ctx: RunContext) -> AgentEvent:
    stream = MessageStream(_breaking())
    return AgentEvent(output=AgentOutput(stream=stream), action=AgentAction(exit=True))


@pytest.mark.parametrize("shape", ["sequence in a sequence", "loop", "parallel"])
@pytest.mark.parametrize("how", ["run", "run reading the stream", "invoke"])
async def test_an_exit_whose_stream_fails_inside_a_nested_workflow_fails_as_its_agents(
    how: str, shape: str
) -> None:
    """An agent two workflows down exits with a streamed reply that breaks mid-way. The outer
    workflow read the stream (``settle``) and failed as its child's, the inner workflow, the agent
    that streamed it never told (its ``after_agent`` saw no error); and when the reader had read
    the stream first (a streaming UI does; ``invoke`` does), ``settle`` skipped the finished
    stream: the run ended with the exit as if the answer had come, its error lost (``invoke`` of
    a ``ParallelAgent``, which the runner drives itself, did not settle at all)."""
    seen: list[tuple[str, str | None]] = []

    def after_agent(agent: Any, ctx: RunContext, error: Any) -> None:
        seen.append((agent.name, error.type if error is not None else None))

    streamer = ScriptAgent("streamer", _exit_breaking)
    root: BaseAgent
    if shape == "sequence in a sequence":
        root = SequentialAgent("outer", [SequentialAgent("inner", [streamer])])
    elif shape == "loop":
        root = LoopAgent("outer", [SequentialAgent("inner", [streamer])], max_iterations=2)
    else:  # a parallel agent at the root (driven by the runner, not by a step runner)
        blocked = ScriptAgent("blocked", asyncio.Event(), "never")
        root = ParallelAgent("outer", [SequentialAgent("inner", [streamer]), blocked])
    runner = Runner(root, callbacks=[Callbacks(after_agent=after_agent)])
    if how == "invoke":
        with pytest.raises(RunError) as raised:
            await runner.invoke("hi")
        failure = raised.value.event
    else:
        errors = []
        async for event in runner.run("hi"):
            if how == "run reading the stream" and event.output is not None:
                assert event.output.stream is not None
                with pytest.raises(ModelError):
                    await event.output.stream.collect()
            if event.error is not None:
                errors.append(event)
        assert len(errors) == 1, errors
        failure = errors[0]
    assert (failure.agent_name, failure.run_path) == ("streamer", ("outer", "inner", "streamer"))
    assert failure.error is not None and failure.error.type == "ModelError"
    assert ("streamer", "ModelError") in seen, seen
    assert not other_tasks()


async def test_leaving_at_an_exit_event_with_a_stream_that_stalls_closes_at_once() -> None:
    """Nobody reads the stream then: the run closes without waiting for it."""

    async def stalled() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="start ")
        await asyncio.Event().wait()

    def exit_streaming(ctx: RunContext) -> AgentEvent:
        return AgentEvent(
            output=AgentOutput(stream=MessageStream(stalled())), action=AgentAction(exit=True)
        )

    par = ParallelAgent("P", [ScriptAgent("a", exit_streaming), ScriptAgent("b", asyncio.Event())])
    events = Runner(par).run("hi")
    async with asyncio.timeout(5):
        async for event in events:
            if event.action is not None and event.action.exit:
                break
        await events.aclose()
    assert not other_tasks()
