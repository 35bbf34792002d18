"""Interrupt and resume through workflows and transfer flows: each composite saves where it was
and continues there; finished work is not re-run and its events are not re-emitted; points that
the resume does not address pause again under the same id."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from conftest import ScriptAgent, act_break, act_transfer
from test_interrupts import Asker, collect, pause_of, texts

from adk import (
    AgentEvent,
    BaseAgent,
    CheckpointError,
    LoopAgent,
    Message,
    ParallelAgent,
    ResumeContext,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    with_sub_agents,
    workflows,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.context import new_entry
from adk.history import HistoryEntry
from adk.testing import ScriptedModel, simplify_events
from prebuilt import ReActAgent


class Spy(SequentialAgent):
    """A sequence that records what ``ctx.resume`` told it each time it resumed."""

    def __init__(self, name: str, sub_agents: list[Any]) -> None:
        super().__init__(name, sub_agents)
        self.resumes: list[ResumeContext | None] = []

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.resumes.append(ctx.resume)
        return super().resume(ctx)


async def test_sequential_resume_continues_at_the_next_step() -> None:
    first, second = ScriptAgent("first", "one"), ScriptAgent("second", "two")
    asker = Asker("ask")
    third = ScriptAgent("third", "three")
    runner = Runner(SequentialAgent("seq", [first, second, asker, third]))

    events = await collect(runner.run("hi"))

    assert simplify_events(events) == [
        "first: one",
        "second: two",
        "ask: ask asks",
        "ask: [interrupt agent:seq/agent:ask]",
    ]
    resumed = await collect(runner.resume(pause_of(events).checkpoint_id, "go"))

    # Earlier steps are not re-run and their events are not re-emitted.
    assert simplify_events(resumed) == ["ask: ask got 'go'", "third: three"]
    assert (first.runs, second.runs, asker.runs, third.runs) == (1, 1, 2, 1)
    # Run paths continue where they were.
    assert [e.run_path for e in resumed] == [
        ("seq", "first", "second", "ask"),
        ("seq", "first", "second", "ask", "third"),
    ]
    assert texts(third.inputs[0]) == [
        "hi",
        "For context: [first] said: one.",
        "For context: [second] said: two.",
        "For context: [ask] said: ask asks.",
        "For context: [ask] said: ask got 'go'.",
    ]


async def test_nested_sequences_resume_at_every_level() -> None:
    a, b = ScriptAgent("a", "A"), ScriptAgent("b", "B")
    asker = Asker("ask")
    c, d = ScriptAgent("c", "C"), ScriptAgent("d", "D")
    inner = SequentialAgent("inner", [b, asker, c])
    runner = Runner(SequentialAgent("outer", [a, inner, d]))
    info = pause_of(await collect(runner.run("hi")))
    assert info.point_ids == ["agent:outer/agent:inner/agent:ask"]

    resumed = await collect(runner.resume(info.checkpoint_id, 1))

    assert simplify_events(resumed) == ["ask: ask got 1", "c: C", "d: D"]
    assert (a.runs, b.runs, c.runs, d.runs) == (1, 1, 1, 1)


async def test_loop_resume_continues_at_the_saved_iteration_and_step() -> None:
    counter = ScriptAgent("count", lambda ctx: AgentEvent.of(f"iteration {ctx.run_path}"))
    asker = Asker("ask", pause_on=(2,))  # pauses in the second iteration
    tail = ScriptAgent("tail", "tail")
    loop = LoopAgent("loop", [counter, asker, tail], max_iterations=3)
    runner = Runner(loop)

    events = await collect(runner.run("hi"))

    assert [e.agent_name for e in events] == ["count", "ask", "tail", "count", "ask", "ask"]
    info = pause_of(events)
    assert info.point_ids == ["agent:loop/agent:ask"]

    resumed = await collect(runner.resume(info.checkpoint_id, "yes"))

    # Iteration 2 continues at its "ask" step, then iteration 3 runs whole; max_iterations=3.
    assert simplify_events(resumed)[:2] == ["ask: ask got 'yes'", "tail: tail"]
    assert [e.agent_name for e in resumed] == ["ask", "tail", "count", "ask", "tail"]
    assert (counter.runs, asker.runs, tail.runs) == (3, 4, 3)
    # In iteration 3 the agent starts fresh: its point was consumed by the resume.
    assert asker.resumes[-1] is None and resumed[3].message is not None
    assert resumed[3].message.content == "ask ran"
    # Run paths continue from the saved one.
    assert resumed[0].run_path == events[-1].run_path
    assert resumed[1].run_path == (*events[-1].run_path, "tail")


async def test_loop_resume_keeps_counting_iterations_towards_the_limit() -> None:
    asker = Asker("ask", pause_on=(3,))
    loop = LoopAgent("loop", [asker], max_iterations=3)
    runner = Runner(loop)
    info = pause_of(await collect(runner.run("hi")))

    resumed = await collect(runner.resume(info.checkpoint_id, "x"))

    # The pause was in the last allowed iteration: the loop ends after it.
    assert simplify_events(resumed) == ["ask: ask got 'x'"]
    assert asker.runs == 4


async def test_break_loop_after_a_resume_stops_the_loop() -> None:
    class AskThenBreak(BaseAgent):
        async def run(self, input: Any, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                yield ctx.interrupt("continue?")
                return
            yield AgentEvent.of(f"answer {ctx.resume.data}")
            if ctx.resume.data == "stop":
                yield AgentEvent.break_loop()

    after = ScriptAgent("after", "after")
    runner = Runner(SequentialAgent("root", [LoopAgent("loop", [AskThenBreak("ask")]), after]))
    info = pause_of(await collect(runner.run("hi")))

    resumed = await collect(runner.resume(info.checkpoint_id, "stop"))

    assert simplify_events(resumed) == ["ask: answer stop", "ask: [break_loop]", "after: after"]


async def test_a_loop_broken_before_a_pause_stays_broken_after_the_resume() -> None:
    """The break was taken before the pause: after the resume the step finishes and the loop (and
    the sequence inside it) stop, as they would have without the pause."""

    class BreakThenAsk(BaseAgent):
        async def run(self, input: Any, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                yield AgentEvent.break_loop()
                yield ctx.interrupt("confirm?")
                return
            yield AgentEvent.of(f"confirmed {ctx.resume.data}")

    inner_next = ScriptAgent("inner_next", "inner next")
    next_step = ScriptAgent("next", "next")
    after = ScriptAgent("after", "after")
    body = SequentialAgent("body", [BreakThenAsk("ask"), inner_next])
    loop = LoopAgent("loop", [body, next_step], max_iterations=3)
    runner = Runner(SequentialAgent("root", [loop, after]))
    info = pause_of(await collect(runner.run("hi")))

    resumed = await collect(runner.resume(info.checkpoint_id, "yes"))

    assert simplify_events(resumed) == ["ask: confirmed yes", "after: after"]
    assert (inner_next.runs, next_step.runs) == (0, 0)


async def test_a_branch_breaking_the_loop_while_another_pauses_ends_the_loop_on_resume() -> None:
    stopper = ScriptAgent("stopper", "stop here", act_break())
    asker = Asker("ask")
    next_step = ScriptAgent("next", "next")
    loop = LoopAgent("loop", [ParallelAgent("par", [stopper, asker]), next_step])
    runner = Runner(loop)
    info = pause_of(await collect(runner.run("hi")))

    resumed = await collect(runner.resume(info.checkpoint_id, "go"))

    assert simplify_events(resumed) == ["ask: ask got 'go'"]
    assert (stopper.runs, asker.runs, next_step.runs) == (1, 2, 0)


async def test_a_paused_agent_is_found_by_its_transfer_chain_not_only_by_its_name() -> None:
    """Names need only be unique among siblings: two agents called X under B and under C."""
    x_under_b, x_under_c = Asker("X"), Asker("X")
    b = with_sub_agents(_chooser("B", ["X"]), [x_under_b])
    c = with_sub_agents(_chooser("C", ["X"]), [x_under_c])
    runner = Runner(with_sub_agents(_chooser("A", ["B"]), [b, c]))
    info = pause_of(await collect(runner.run("hi")))
    assert x_under_b.runs == 1 and x_under_c.runs == 0

    resumed = await collect(runner.resume(info.checkpoint_id, "go"))

    assert simplify_events(resumed) == ["X: X got 'go'"]
    assert (x_under_b.runs, x_under_c.runs) == (2, 0)


async def test_a_flow_history_rewriter_applies_to_the_agent_it_resumes() -> None:
    def hide_others(entries: Sequence[HistoryEntry], reader: str) -> list[Message]:
        return [e.message for e in entries if e.is_user_input or e.agent_name == reader]

    asker = Asker("B")
    a = _chooser("A", ["B"])
    runner = Runner(with_sub_agents(a, [asker], history_rewriter=hide_others))
    info = pause_of(await collect(runner.run("hi")))
    assert texts(asker.inputs[0]) == ["hi"]

    await collect(runner.resume(info.checkpoint_id, "go"))

    assert texts(asker.inputs[1]) == ["hi", "B asks"]  # not "For context: [A] said: A -> B."


async def test_nested_parallel_with_partial_resume() -> None:
    done_x = ScriptAgent("x", "x done")
    ask_a = Asker("ask_a")
    done_y = ScriptAgent("y", "y done")
    ask_b = Asker("ask_b")
    z = ScriptAgent("z", "z done")
    after = ScriptAgent("after", "after done")
    inner = ParallelAgent("inner", [ask_a, done_x])
    branch = SequentialAgent("branch", [done_y, ask_b, z])
    outer = ParallelAgent("outer", [inner, branch])
    runner = Runner(SequentialAgent("root", [outer, after]))
    point_a = "agent:root/agent:outer/agent:inner/agent:ask_a"
    point_b = "agent:root/agent:outer/agent:branch/agent:ask_b"

    events = await collect(runner.run("hi"))

    info = pause_of(events)
    assert sorted(info.point_ids) == sorted([point_a, point_b])
    assert sorted(simplify_events(events[:-1])) == [
        "ask_a: ask_a asks",
        "ask_b: ask_b asks",
        "x: x done",
        "y: y done",
    ]

    # Resume only a: b stays pending under the same id; nothing finished runs again.
    first = await collect(runner.resume(info.checkpoint_id, {point_a: "A"}))

    assert simplify_events(first)[:-1] == ["ask_a: ask_a got 'A'"]
    again = pause_of(first)
    assert again.checkpoint_id == info.checkpoint_id
    assert again.points == [p for p in info.points if p.id == point_b]
    assert (ask_a.runs, ask_b.runs, done_x.runs, done_y.runs, z.runs) == (2, 1, 1, 1, 0)

    # Plain data now reaches the one point left.
    second = await collect(runner.resume(info.checkpoint_id, "B"))

    assert simplify_events(second) == ["ask_b: ask_b got 'B'", "z: z done", "after: after done"]
    assert (ask_a.runs, ask_b.runs, done_x.runs, done_y.runs, z.runs) == (2, 2, 1, 1, 1)
    # z, resumed twice, saw its own branch only, as it would have without the pauses: not the
    # sibling branch's messages that the checkpoint's flat history holds.
    assert texts(z.inputs[0]) == [
        "hi",
        "For context: [y] said: y done.",
        "For context: [ask_b] said: ask_b asks.",
        "For context: [ask_b] said: ask_b got 'B'.",
    ]
    assert after.runs == 1
    # The agent after the fork sees every branch's messages exactly once.
    seen = texts(after.inputs[0])
    for line in ["x done", "y done", "ask_a asks", "ask_a got 'A'", "ask_b asks", "z done"]:
        assert sum(line in m for m in seen) == 1, (line, seen)
    assert seen[0] == "hi"
    assert await runner.checkpoint_store.get(info.checkpoint_id) is None


def _fork_pause() -> tuple[Runner, ScriptAgent, ScriptAgent]:
    """A parallel of two sequences: the left one pauses, then reads; the right one finishes."""
    reader = ScriptAgent("reader", "read")
    right_reader = ScriptAgent("right_reader", "read too")
    left = SequentialAgent("left", [ScriptAgent("l1", "left one"), Asker("ask"), reader])
    right = SequentialAgent("right", [ScriptAgent("r1", "right one"), right_reader])
    before = ScriptAgent("before", "before the fork")
    runner = Runner(SequentialAgent("root", [before, ParallelAgent("par", [left, right])]))
    return runner, reader, right_reader


async def test_a_resumed_branch_sees_what_it_saw_before_the_pause_not_its_siblings() -> None:
    runner, reader, right_reader = _fork_pause()
    info = pause_of(await collect(runner.run("hi")))
    assert texts(right_reader.inputs[0]) == [
        "hi",
        "For context: [before] said: before the fork.",
        "For context: [r1] said: right one.",
    ]

    await collect(runner.resume(info.checkpoint_id, "go"))

    # The right branch finished before the pause; the checkpoint's history holds its messages,
    # but the left branch never saw them and does not after the resume either.
    assert texts(reader.inputs[0]) == [
        "hi",
        "For context: [before] said: before the fork.",
        "For context: [l1] said: left one.",
        "For context: [ask] said: ask asks.",
        "For context: [ask] said: ask got 'go'.",
    ]


async def test_a_checkpoint_without_history_order_numbers_still_resumes() -> None:
    # Checkpoints written before the history kept its order numbers (and the parallel agent its
    # fork) resume as they did then: the branch sees everything the history holds.
    runner, reader, _ = _fork_pause()
    info = pause_of(await collect(runner.run("hi")))

    async with rewrite_checkpoint(runner.checkpoint_store, info.checkpoint_id) as body:
        for entry in body["history"]:
            del entry["seq"]
        for slots in body["states"].values():
            for state in slots.values():
                state.pop("fork_seq", None)
    resumed = await collect(runner.resume(info.checkpoint_id, "go"))

    assert simplify_events(resumed) == ["ask: ask got 'go'", "reader: read"]
    seen = texts(reader.inputs[0])
    assert "For context: [ask] said: ask got 'go'." in seen
    assert "For context: [r1] said: right one." in seen  # the old behaviour, kept for old data


async def test_a_history_out_of_order_is_a_corrupt_checkpoint() -> None:
    runner, _, _ = _fork_pause()
    info = pause_of(await collect(runner.run("hi")))

    async with rewrite_checkpoint(runner.checkpoint_store, info.checkpoint_id) as body:
        body["history"][0]["seq"], body["history"][1]["seq"] = 1, 0
    try:
        await collect(runner.resume(info.checkpoint_id, "go"))
    except CheckpointError as exc:
        assert "out of order" in str(exc)
    else:
        raise AssertionError("a shuffled history resumed")
    assert await runner.checkpoint_store.get(info.checkpoint_id) is not None  # nothing lost


async def test_untargeted_interrupted_agents_pause_again_without_running() -> None:
    a, b, c = Asker("a"), Asker("b"), Asker("c")
    runner = Runner(ParallelAgent("par", [a, b, c]))
    info = pause_of(await collect(runner.run("hi")))

    again = pause_of(await collect(runner.resume(info.checkpoint_id, {"agent:par/agent:b": 2})))

    assert sorted(again.point_ids) == ["agent:par/agent:a", "agent:par/agent:c"]
    assert (a.runs, b.runs, c.runs) == (1, 2, 1)
    assert {p.id: p.info for p in again.points} == {
        "agent:par/agent:a": "a waits",
        "agent:par/agent:c": "c waits",
    }


async def test_is_target_is_true_for_the_point_and_its_ancestors_only() -> None:
    a, b = Asker("a", state="sa"), Asker("b", state="sb")
    left, right = Spy("left", [a]), Spy("right", [b])
    runner = Runner(Spy("root", [ParallelAgent("par", [left, right])]))
    root = runner.agent
    assert isinstance(root, Spy)
    info = pause_of(await collect(runner.run("hi")))

    await collect(runner.resume(info.checkpoint_id, {"agent:root/agent:par/agent:left/agent:a": 1}))

    assert root.resumes[-1] == ResumeContext(
        was_interrupted=True,
        state={"index": 0, "run_path": ["root", "par"]},
        is_target=True,
        data=None,
    )
    assert left.resumes[-1] is not None and left.resumes[-1].is_target
    assert right.resumes == []  # not addressed: not resumed, its point re-raised as saved
    assert a.resumes[-1] == ResumeContext(True, "sa", True, 1)
    assert b.runs == 1


async def test_parallel_branch_that_finished_is_not_rerun() -> None:
    quick = ScriptAgent("quick", "quick done")
    asker = Asker("ask")
    runner = Runner(ParallelAgent("par", [quick, asker]))
    info = pause_of(await collect(runner.run("hi")))

    resumed = await collect(runner.resume(info.checkpoint_id, "x"))

    assert simplify_events(resumed) == ["ask: ask got 'x'"]
    assert quick.runs == 1


def _chooser(name: str, targets: list[str]) -> ScriptAgent:
    """An agent that announces and transfers to the next of ``targets`` each time it runs."""
    queue = list(targets)

    def step(ctx: RunContext) -> AgentEvent:
        return AgentEvent.transfer(queue.pop(0))

    return ScriptAgent(name, lambda ctx: AgentEvent.of(f"{name} -> {queue[0]}"), step)


async def test_transfer_chain_resumes_at_the_interrupted_agent() -> None:
    a = _chooser("A", ["B", "C"])
    b = _chooser("B", ["A"])
    c = Asker("C")
    runner = Runner(with_sub_agents(a, [b, c]))

    events = await collect(runner.run("hi"))

    assert simplify_events(events) == [
        "A: A -> B",
        "A: [transfer -> B]",
        "B: B -> A",
        "B: [transfer -> A]",
        "A: A -> C",
        "A: [transfer -> C]",
        "C: C asks",
        "C: [interrupt agent:A/agent:C]",
    ]
    assert events[-1].run_path == ("A", "B", "A", "C")
    info = pause_of(events)

    resumed = await collect(runner.resume(info.checkpoint_id, "done"))

    assert simplify_events(resumed) == ["C: C got 'done'"]
    assert resumed[0].run_path == ("A", "B", "A", "C")
    assert (a.runs, b.runs, c.runs) == (2, 1, 2)
    assert texts(c.inputs[-1]) == [
        "hi",
        "For context: [A] said: A -> B.",
        "For context: [B] said: B -> A.",
        "For context: [A] said: A -> C.",
        "C asks",
    ]


async def test_transfer_after_a_resume_continues_the_chain() -> None:
    class AskThenTransfer(BaseAgent):
        async def run(self, input: Any, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                yield ctx.interrupt("where to?")
                return
            yield AgentEvent.transfer(ctx.resume.data)

    a = _chooser("A", ["C", "D"])
    finisher = ScriptAgent("D", "D finished")
    runner = Runner(with_sub_agents(a, [AskThenTransfer("C"), finisher]))
    info = pause_of(await collect(runner.run("hi")))

    resumed = await collect(runner.resume(info.checkpoint_id, "A"))

    assert simplify_events(resumed) == [
        "C: [transfer -> A]",
        "A: A -> D",
        "A: [transfer -> D]",
        "D: D finished",
    ]
    assert resumed[-1].run_path == ("A", "C", "A", "D")
    assert a.runs == 2


async def test_react_agent_in_a_sequence_resumed_after_a_pause_sees_the_whole_history() -> None:
    model = ScriptedModel(["summary"])
    summary = ReActAgent("summary", model)
    loop = LoopAgent("loop", [Asker("ask"), ScriptAgent("stop", act_break())])
    runner = Runner(SequentialAgent("root", [loop, summary]))
    info = pause_of(await collect(runner.run("hi")))

    resumed = await collect(runner.resume(info.checkpoint_id, "fine"))

    assert simplify_events(resumed) == [
        "ask: ask got 'fine'",
        "stop: [break_loop]",
        "summary: summary",
    ]
    assert texts(model.requests[0].messages) == [
        "hi",
        "For context: [ask] said: ask asks.",
        "For context: [ask] said: ask got 'fine'.",
    ]


async def test_a_target_reached_from_a_workflow_step_resumes() -> None:
    """Its saved chain holds the step's name, which no transfer leads to: the chain goes on."""
    asker = Asker("t")
    seq = SequentialAgent("S", [ScriptAgent("a", act_transfer("t"))])
    runner = Runner(with_sub_agents(seq, [asker]))
    events = await collect(runner.run("hi"))
    assert events[-1].run_path == ("S", "a", "t")

    resumed = await collect(runner.resume(pause_of(events).checkpoint_id, "go"))

    assert simplify_events(resumed) == ["t: t got 'go'"]
    assert resumed[0].run_path == ("S", "a", "t")


class _ForgetfulResume(BaseAgent):
    """Pauses; its ``resume``, a plain ``def``, forgets to return the events it was to make."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.runs = 0

    async def run(self, input: Any, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.runs += 1
        yield ctx.interrupt("go on?")

    def resume(self, ctx: RunContext) -> None:
        return None


async def test_a_resume_that_gives_no_events_fails_rather_than_run_the_agent_again() -> None:
    """An agent's ``resume`` that returned None (no iterator of events) was taken for an agent
    without one, and its ``run`` started again from the top on resume, as if it had never
    paused: what it did before its pause was done twice, without a word. It fails now."""
    for make in (lambda a: a, lambda a: SequentialAgent("seq", [a])):
        agent = _ForgetfulResume("forgetful")
        runner = Runner(make(agent), InMemoryCheckpointStore())
        paused = await runner.invoke("go")
        assert paused.checkpoint_id is not None and agent.runs == 1
        with pytest.raises(RunError, match="NoneType"):
            await runner.invoke_resume(paused.checkpoint_id, "yes")
        assert agent.runs == 1


def test_each_resumed_branchs_view_is_the_history_before_the_fork_and_its_own() -> None:
    """The views a resumed ParallelAgent gives its branches are made from entries grouped by
    branch once (``workflows._branch_views``), where each branch's was picked from the whole
    history (quadratic in a wide fan-out): the same entries in the same order, those of a
    branch's nested steps and of an earlier round of the same branch (before the fork)
    included, and the order of the history kept even where the order numbers are not."""
    rng = random.Random(20)
    paths = [("root",), ("root", "par"), *[("root", "par", f"b{i}") for i in range(6)]]
    paths += [("root", "par", "b1", "inner"), ("root", "par", "b10"), ("other",)]
    entries = [
        new_entry(path[-1], path, Message.assistant(str(n)), rng.randrange(40))
        for n, path in enumerate(rng.choice(paths) for _ in range(200))
    ]
    fork = 20
    views = workflows._branch_views(entries, fork)
    for name in ("b0", "b1", "b5", "b10", "missing"):
        child = SimpleNamespace(run_path=("root", "par", name))
        expected = [e for e in entries if e.seq < fork or e.run_path[:3] == child.run_path]
        assert views(child) == expected, name  # type: ignore[arg-type]
