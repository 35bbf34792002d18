"""The event rules every agent runs under: stamping, ending actions, errors, break outside loops,
and generators always closed."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import ScriptAgent, act_break, act_exit, act_transfer, do, other_tasks, run_events

from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    LoopAgent,
    Message,
    MessageChunk,
    MessageStream,
    ParallelAgent,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
)
from adk.events import AgentOutput, message_event, tool_result_event
from adk.testing import simplify_events


@pytest.mark.parametrize(
    "message",
    [Message.assistant("ok"), Message.tool("3", tool_call_id="c1", name="add"), Message.user("u")],
)
def test_the_frameworks_message_events_equal_agent_event_of(message: Message) -> None:
    """``message_event`` builds the framework's own message events without the classmethod: it
    must make exactly what ``AgentEvent.of`` makes, in every slot."""
    made, reference = message_event(message), AgentEvent.of(message)
    assert type(made) is AgentEvent and made == reference
    for name in AgentEvent.__slots__:
        assert getattr(made, name) == getattr(reference, name), name
    assert made.output is not None and reference.output is not None
    for name in AgentOutput.__slots__:
        assert getattr(made.output, name) == getattr(reference.output, name), name


def test_a_tool_results_event_equals_message_event() -> None:
    """``tool_result_event`` makes the event of a tool result from the call's name the result
    was made with (a ``ToolCall``'s name is a str), without reading the message: exactly what
    ``message_event`` makes of it."""
    message = Message.tool("3", tool_call_id="c1", name="add")
    made, reference = tool_result_event(message, "add"), message_event(message)
    assert type(made) is AgentEvent and made == reference
    for slot in AgentEvent.__slots__:
        assert getattr(made, slot) == getattr(reference, slot), slot
    assert made.output is not None and reference.output is not None
    assert made.output.message is message
    for slot in AgentOutput.__slots__:
        assert getattr(made.output, slot) == getattr(reference.output, slot), slot


async def test_framework_stamps_agent_name_and_run_path_on_blank_events() -> None:
    agent = ScriptAgent("solo", "hello", lambda ctx: AgentEvent.custom({"k": 1}))
    events = await run_events(agent)
    assert [(e.agent_name, e.run_path) for e in events] == [("solo", ("solo",))] * 2
    assert agent.paths == [("solo",)]
    assert agent.contexts[0].agent_name == "solo"


async def test_framework_keeps_names_and_paths_the_agent_set_itself() -> None:
    def preset(ctx: RunContext) -> AgentEvent:
        return AgentEvent("ghost", ("x", "y"), AgentEvent.of("boo").output)

    events = await run_events(SequentialAgent("seq", [ScriptAgent("a", preset)]))
    assert [(e.agent_name, e.run_path) for e in events] == [("ghost", ("x", "y"))]


async def test_after_exit_nothing_more_is_pulled_and_the_generator_is_closed() -> None:
    after: list[str] = []
    agent = ScriptAgent("a", "before", act_exit(), do(lambda: after.append("pulled")), "after")
    events = await run_events(agent)
    assert simplify_events(events) == ["a: before", "a: [exit]"]
    assert after == []
    assert agent.reached == 1  # the step after the exit was never begun
    assert agent.closed == 1 and agent.completed == 0


async def test_after_interrupt_nothing_more_is_pulled_and_the_generator_is_closed() -> None:
    agent = ScriptAgent("a", "before", lambda ctx: ctx.interrupt({"ask": "ok?"}), "after")
    events = await run_events(agent)
    assert simplify_events(events)[0] == "a: before"
    assert events[-1].interrupted is not None
    assert len(events) == 2
    assert agent.reached == 1 and agent.closed == 1 and agent.completed == 0


async def test_unhandled_transfer_at_the_root_stops_the_agent_and_fails_clearly() -> None:
    agent = ScriptAgent("a", "hi", act_transfer("B"), "after")
    events = await run_events(agent)
    assert simplify_events(events) == [
        "a: hi",
        "a: [transfer -> B]",
        "a: [error transfer failed: agent 'B' not found when transferring from 'a']",
    ]
    assert agent.reached == 1 and agent.closed == 1


async def test_a_raising_agent_gives_exactly_one_error_event_with_the_live_exception() -> None:
    boom = ValueError("boom")
    agent = ScriptAgent("a", "partial", boom, "never")
    events = await run_events(agent)
    assert simplify_events(events) == ["a: partial", "a: [error boom]"]
    errors = [e for e in events if e.error is not None]
    assert len(errors) == 1
    error = errors[0]
    assert error.exception is boom
    assert (error.error.type, error.error.message) == ("ValueError", "boom")  # type: ignore[union-attr]
    assert (error.agent_name, error.run_path) == ("a", ("a",))
    assert agent.closed == 1


async def test_an_exception_before_the_first_yield_is_one_error_event() -> None:
    class Broken:
        name = "broken"
        description = ""

        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            raise KeyError("missing")
            yield AgentEvent.of("unreachable")

    events = await run_events(Broken())
    assert len(events) == 1
    assert events[0].error is not None and events[0].error.type == "KeyError"
    assert isinstance(events[0].exception, KeyError)


async def test_an_agent_whose_run_raises_before_returning_events_gives_one_error_event() -> None:
    # ``run`` need not be an async generator (ParallelAgent's and ReActAgent's are plain methods
    # returning one); an exception raised by the call itself is still an exception "raised inside
    # an agent" and must become one error event, not escape the runner.
    class Eager:
        name = "eager"
        description = ""

        def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            raise ValueError("refused before starting")

    events = await run_events(Eager())  # at the root
    assert simplify_events(events) == ["eager: [error refused before starting]"]
    assert isinstance(events[0].exception, ValueError)

    after = ScriptAgent("after")
    events = await run_events(SequentialAgent("seq", [Eager(), after]))  # as a step
    assert simplify_events(events) == ["eager: [error refused before starting]"]
    assert after.runs == 0


async def _cancelled_inside(ctx: RunContext) -> None:
    """Awaits a future someone else cancelled: ``CancelledError`` without the run being cancelled."""
    future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    future.cancel()
    await future


async def test_an_agent_raising_cancelled_error_on_its_own_fails_like_any_exception() -> None:
    # Not the run's cancellation (nobody cancelled the task running it): one error event, like any
    # exception. A parallel branch dying of it used to count as finished (its failure was lost,
    # its sibling ran on); at the root or in a sequence it escaped the run as if the caller's
    # task had been cancelled.
    for make in (
        lambda a: a,
        lambda a: SequentialAgent("seq", [a, ScriptAgent("next", "never")]),
        lambda a: ParallelAgent("par", [a, ScriptAgent("sibling", asyncio.Event(), "never")]),
    ):
        agent = ScriptAgent("a", "partial", _cancelled_inside, "never")
        async with asyncio.timeout(5):
            events = await run_events(make(agent))
        assert simplify_events(events) == ["a: partial", "a: [error CancelledError]"]
        assert isinstance(events[-1].exception, asyncio.CancelledError)
        assert agent.closed == 1 and other_tasks() == set()
        with pytest.raises(RunError) as info:
            await Runner(make(ScriptAgent("a", _cancelled_inside))).invoke("x")
        assert info.value.error.type == "CancelledError"


async def test_cancelling_the_task_running_an_agent_is_not_an_error_event() -> None:
    started = asyncio.Event()
    agent = ScriptAgent("a", do(started.set), asyncio.Event())
    for make in (
        lambda a: a,
        lambda a: SequentialAgent("seq", [a]),
        lambda a: ParallelAgent("par", [a]),
    ):
        started.clear()
        task = asyncio.create_task(run_events(make(agent)))
        async with asyncio.timeout(5):
            await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert agent.cancelled == 3 and other_tasks() == set()


class _FailingCleanup(BaseAgent):
    """Says one thing, then waits; its cleanup raises however it is ended."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        try:
            yield AgentEvent.of("one")
            await asyncio.Event().wait()
            yield AgentEvent.of("never")
        finally:
            raise ValueError("cleanup failed")


def _wrapped(agent: BaseAgent, how: str) -> Any:
    if how == "sequence":
        return SequentialAgent("seq", [agent])
    if how == "loop":
        return LoopAgent("loop", [agent])
    if how == "parallel":
        return ParallelAgent("par", [agent, ScriptAgent("sibling", asyncio.Event())])
    return agent


@pytest.mark.parametrize("how", ["root", "sequence", "loop", "parallel"])
async def test_a_cleanup_failing_while_the_run_is_closed_is_raised_by_the_close(how: str) -> None:
    # The reader stops early; the agent's cleanup then fails. The close raises that error (as
    # Python does for any generator whose cleanup fails), not "async generator ignored
    # GeneratorExit": the driver used to yield an error event into a generator being closed.
    run = Runner(_wrapped(_FailingCleanup("a"), how)).run("go")
    async with asyncio.timeout(5):
        assert simplify_events([await anext(run)]) == ["a: one"]
        with pytest.raises(ValueError, match="cleanup failed"):
            await run.aclose()  # type: ignore[attr-defined]
    assert other_tasks() == set()


@pytest.mark.parametrize("how", ["root", "sequence", "loop", "parallel"])
async def test_a_cleanup_failing_while_the_run_is_cancelled_does_not_continue_the_run(
    how: str,
) -> None:
    # Cancelled (here by a timeout), the agent's cleanup fails. That error propagates like the
    # cancellation would: the run must not go on with an error event as if nothing had cancelled
    # it. A parallel branch used to do so and then wait, forever, for its reader to take the
    # event, while the reader waited for the branch to finish cancelling.
    seen: list[AgentEvent] = []
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(10):  # fails the test, rather than hanging it, if the run hangs
        with pytest.raises(ValueError, match="cleanup failed"):
            async with asyncio.timeout(5) as deadline:
                async for event in Runner(_wrapped(_FailingCleanup("a"), how)).run("go"):
                    seen.append(event)
                    deadline.reschedule(loop.time() + 0.01)
    assert simplify_events(seen) == ["a: one"]
    assert other_tasks() == set()


@pytest.mark.parametrize("ending", ["error", "exit"])
async def test_a_branch_ending_the_run_while_a_sibling_cleanup_fails_ends_it(ending: str) -> None:
    # The sibling is cancelled and its cleanup fails: the run ends with the first branch's event.
    # The sibling's driver used to make its failure an event and wait to hand it over, while the
    # parallel agent waited for the sibling to finish: the run hung.
    last = ValueError("first failed") if ending == "error" else act_exit()
    first = ScriptAgent("first", lambda ctx: asyncio.sleep(0.01), "first", last)
    agent = ParallelAgent("par", [_FailingCleanup("sibling"), first])
    async with asyncio.timeout(5):
        events = await run_events(agent)
    wanted = "first: [error first failed]" if ending == "error" else "first: [exit]"
    assert sorted(simplify_events(events)) == sorted(["sibling: one", "first: first", wanted])
    assert events[-1].agent_name == "first" and other_tasks() == set()


async def test_an_error_deep_in_nested_workflows_surfaces_exactly_once() -> None:
    boom = LookupError("deep")
    inner = SequentialAgent("inner", [ScriptAgent("x", "x"), ScriptAgent("deep", boom)])
    middle = LoopAgent("middle", [SequentialAgent("wrap", [inner])])
    outer = SequentialAgent("outer", [middle, ScriptAgent("never")])
    events = await run_events(outer)
    errors = [e for e in events if e.error is not None]
    assert len(errors) == 1 and errors[0].exception is boom
    assert errors[0].agent_name == "deep"
    assert events[-1] is errors[0]


async def test_a_stream_that_fails_midway_gives_one_error_event() -> None:
    async def chunks() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="par")
        raise ConnectionError("stream cut")

    agent = ScriptAgent("a", lambda ctx: AgentEvent.streaming(MessageStream(chunks())), "never")
    events = [e async for e in Runner(agent).run("q")]  # nobody reads the stream
    errors = [e for e in events if e.error is not None]
    assert len(errors) == 1 and isinstance(errors[0].exception, ConnectionError)
    assert events[-1] is errors[0] and agent.reached == 0 and agent.closed == 1


async def test_an_error_inside_a_workflow_surfaces_once_and_stops_it() -> None:
    boom = RuntimeError("step two broke")
    first, second, third = ScriptAgent("s1", "one"), ScriptAgent("s2", boom), ScriptAgent("s3")
    events = await run_events(SequentialAgent("seq", [first, second, third]))
    assert simplify_events(events) == ["s1: one", "s2: [error step two broke]"]
    assert [e.exception for e in events if e.error] == [boom]
    assert third.runs == 0
    with pytest.raises(RunError) as info:
        await Runner(SequentialAgent("seq", [ScriptAgent("s1"), ScriptAgent("s2", boom)])).invoke(
            "x"
        )
    assert info.value.event.exception is boom
    assert info.value.__cause__ is boom


async def test_break_loop_outside_any_loop_is_ignored() -> None:
    a = ScriptAgent("a", "one", act_break(), "two")
    b = ScriptAgent("b", "three")
    events = await run_events(SequentialAgent("seq", [a, b]))
    assert simplify_events(events) == ["a: one", "a: [break_loop]", "a: two", "b: three"]
    assert a.completed == 1 and b.completed == 1


async def test_break_loop_at_the_root_lets_the_agent_finish() -> None:
    agent = ScriptAgent("a", act_break(), "still here")
    events = await run_events(agent)
    assert simplify_events(events) == ["a: [break_loop]", "a: still here"]
    assert agent.completed == 1


async def test_a_consumer_that_stops_early_closes_every_generator() -> None:
    gate = asyncio.Event()
    a = ScriptAgent("a", "first", gate, "never")
    seq = SequentialAgent("seq", [a, ScriptAgent("b", "never")])
    before = other_tasks()
    events = Runner(seq).run("go")
    first = await anext(events)
    assert first.message is not None and first.message.content == "first"
    await events.aclose()  # type: ignore[attr-defined]
    assert a.closed == 1 and a.completed == 0
    assert other_tasks() == before


class _Events:
    """An async iterator of one event per text, without ``aclose`` (not a generator)."""

    def __init__(self, *texts: str) -> None:
        self.items = [AgentEvent.of(text) for text in texts]

    def __aiter__(self) -> _Events:
        return self

    async def __anext__(self) -> AgentEvent:
        if not self.items:
            raise StopAsyncIteration
        return self.items.pop(0)


class _ClosableEvents(_Events):
    """``_Events`` with an ``aclose`` that counts its calls in ``closed``."""

    def __init__(self, *texts: str) -> None:
        super().__init__(*texts)
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


class _Plain:
    """An agent by the protocol alone, not a ``BaseAgent``: its run is ``events``."""

    name = "plain"
    description = "not a BaseAgent"

    def __init__(self, events: _Events) -> None:
        self.events = events

    def run(self, input: AgentInput, ctx: RunContext) -> Any:
        return self.events


async def test_any_object_satisfying_the_protocol_is_an_agent() -> None:
    # Its run's iterator has no aclose: nothing to close, still runs.
    after = ScriptAgent("after")
    events = await run_events(SequentialAgent("seq", [_Plain(_Events("p1", "p2")), after]))
    assert simplify_events(events) == ["plain: p1", "plain: p2"]
    assert after.inputs[0][-2:] == [
        Message.user("For context: [plain] said: p1."),
        Message.user("For context: [plain] said: p2."),
    ]


async def test_a_steps_iterator_that_ran_to_its_end_is_still_closed() -> None:
    # The step runner skips closing a generator that ran to its end (it has nothing left to
    # close); any other iterator is closed as before, even after its last event.
    iterator = _ClosableEvents("p1")
    plain = _Plain(iterator)
    events = await run_events(SequentialAgent("seq", [plain, ScriptAgent("after", "done")]))
    assert simplify_events(events) == ["plain: p1", "after: done"]
    assert iterator.closed == 1


def test_base_agent_needs_a_name() -> None:
    with pytest.raises(ValueError):
        ScriptAgent("")


def test_event_of_sets_every_field_like_the_constructor() -> None:
    """``AgentEvent.of`` skips the dataclass ``__init__`` for speed: it must still set every field
    (a field added later and forgotten there would be unset) to what the constructor would."""
    message = Message.tool("42", tool_call_id="call_1", name="lookup")
    fast = AgentEvent.of(message, agent_name="a")
    slow = AgentEvent("a", (), AgentOutput(message))
    for f in dataclasses.fields(AgentEvent):
        assert getattr(fast, f.name) == getattr(slow, f.name), f.name
    assert fast.output is not None and fast.output.tool_name == "lookup"
    assert fast.output.role == slow.output.role == "tool"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("make", "complaint"),
    [
        (lambda: AgentEvent.of(None), "AgentEvent.of takes a Message or a str, got None"),
        (lambda: AgentEvent.of({"role": "user"}), "AgentEvent.of takes a Message or a str"),
        (lambda: AgentEvent.streaming(None), "AgentEvent.streaming takes a MessageStream"),
        (lambda: AgentEvent.streaming("text"), "AgentEvent.streaming takes a MessageStream"),
        (lambda: AgentEvent.transfer(None), "AgentEvent.transfer needs a str name"),
        (lambda: AgentEvent.from_error("boom"), "AgentEvent.from_error takes an exception"),
        (lambda: AgentOutput(message="hi"), r"AgentOutput\(message=...\) takes a Message"),
        (lambda: AgentOutput(stream=[]), r"AgentOutput\(stream=...\) takes a MessageStream"),
        (lambda: AgentOutput(custom=1, tool_name=3), r"AgentOutput\(tool_name=...\) takes a str"),
    ],
)
def test_event_helpers_refuse_a_wrong_type_where_it_is_given(make: Any, complaint: str) -> None:
    """Else the event is made and fails later, far from the mistake (``None.role`` in a runner),
    or passes for an event with no output or no transfer at all."""
    with pytest.raises(TypeError, match=complaint):
        make()


def test_event_of_still_takes_message_subclasses_and_text() -> None:
    class Tagged(Message):
        pass

    tagged = Tagged(role="user", content="hi")
    assert AgentEvent.of(tagged).message is tagged
    assert AgentEvent.of("hi").message == Message.assistant("hi")


# -- what an agent may yield ----------------------------------------------------------------------
BREAK = AgentEvent.break_loop()  # a shared constant, yielded in run after run


class _YieldsConstant(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield BREAK


async def test_an_event_object_yielded_again_acts_the_same_every_time() -> None:
    """The framework flags events as they travel (a loop marks a break it took); the flags are
    cleared at the top of the run, so the constant is not taken for a break already handled."""
    runner = Runner(LoopAgent("loop", [_YieldsConstant("a")], max_iterations=5))
    for _ in range(3):
        result = await runner.invoke("x")
        assert [e.action.break_loop for e in result.events if e.action] == [True]


async def test_an_agent_may_pass_on_the_events_of_another_runner() -> None:
    """Delegating to another runner (or replaying kept events) re-yields delivered events."""
    inner = Runner(ScriptAgent("inner", "inner says hi"))
    kept: list[AgentEvent] = []

    class Delegating(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            async for event in inner.run("hi"):
                kept.append(event)
                yield event

    class Replaying(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            for event in kept:
                yield event

    assert (await Runner(Delegating("outer")).invoke("x")).text == "inner says hi"
    assert (await Runner(Replaying("replay")).invoke("x")).text == "inner says hi"


@pytest.mark.parametrize("thing", [None, "text", Message.assistant("hi"), {"a": 1}])
async def test_an_agent_yielding_something_else_than_an_event_gets_a_clear_error(
    thing: object,
) -> None:
    class Odd(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[Any]:
            yield thing

    with pytest.raises(RunError, match=r"agent 'odd' yielded .*async generator of AgentEvent"):
        await Runner(SequentialAgent("s", [Odd("odd")])).invoke("x")


def placed(agent: BaseAgent, wrap: str) -> BaseAgent:
    """``agent`` as the root ("root", "stream") or as the one step of a workflow of kind ``wrap``."""
    if wrap == "sequence":
        return SequentialAgent("s", [agent])
    if wrap == "parallel":
        return ParallelAgent("p", [agent])
    if wrap == "loop":
        return LoopAgent("l", [agent], max_iterations=2)
    return agent


class _Returning(BaseAgent):
    """``async def run`` that returns an event instead of yielding it: a coroutine, not events."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AgentEvent:  # type: ignore[override]
        return AgentEvent.of("lost")


@pytest.mark.parametrize("wrap", ["root", "sequence", "parallel", "loop", "stream"])
async def test_an_agent_whose_run_returns_instead_of_yielding_gets_a_clear_error(wrap: str) -> None:
    agent = _Returning("odd")
    root = placed(agent, wrap)
    expected = r"agent 'odd' failed: TypeError: run\(\) returned a coroutine, not an async iterator"
    # pytest turns a "coroutine was never awaited" RuntimeWarning into a failure here (pyproject).
    if wrap == "stream":
        events = [event async for event in Runner(root).run("x")]
        assert events[-1].error is not None
        assert "run() returned a coroutine" in events[-1].error.message
    else:
        with pytest.raises(RunError, match=expected):
            await Runner(root).invoke("x")
    gc.collect()  # a coroutine left unclosed would warn now


class _SyncGenerator(BaseAgent):
    """``def run`` that yields: a generator, which ``async for`` cannot read."""

    def run(self, input: AgentInput, ctx: RunContext) -> Any:  # type: ignore[override]
        yield AgentEvent.of("lost")


class _ReturningList(BaseAgent):
    """``def run`` that returns a list of its events."""

    def run(self, input: AgentInput, ctx: RunContext) -> Any:  # type: ignore[override]
        return [AgentEvent.of("lost")]


@pytest.mark.parametrize("wrap", ["root", "sequence", "parallel", "loop", "stream"])
@pytest.mark.parametrize(
    ("kind", "returned"),
    [(_SyncGenerator, "a generator (a def run that yields)"), (_ReturningList, "a list")],
)
async def test_an_agent_whose_run_is_not_async_gets_a_clear_error(
    wrap: str, kind: type[BaseAgent], returned: str
) -> None:
    """A newcomer's ``def run`` (yielding, or returning a list) failed with Python's "'async for'
    requires an object with __aiter__ method, got generator", which said neither what was wrong
    with the agent nor what to write instead."""
    agent = kind("odd")
    root = placed(agent, wrap)
    expected = (
        f"agent 'odd' failed: TypeError: run() returned {returned}, not an async iterator of "
        "events: write it as async def run(...) and yield each event"
    )
    if wrap == "stream":
        events = [event async for event in Runner(root).run("x")]
        assert events[-1].error is not None
        assert f"agent 'odd' failed: {events[-1].error.type}: {events[-1].error.message}" == (
            expected
        )
    else:
        with pytest.raises(RunError) as failed:
            await Runner(root).invoke("x")
        assert str(failed.value) == expected


async def test_names_with_slashes_do_not_nest_addresses() -> None:
    """An agent named ``p/x`` is not below an agent ``p``: resuming one must not reach the other."""

    class Ask(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                yield ctx.interrupt(f"{self.name}?")
                return
            yield AgentEvent.of(f"{self.name} got {ctx.resume.data}")

    runner = Runner(ParallelAgent("par", [Ask("p"), Ask("p/x")]))
    paused = await runner.invoke("go")
    assert paused.interrupt is not None
    ids = sorted(paused.interrupt.point_ids)
    assert ids == ["agent:par/agent:p", "agent:par/agent:p%2Fx"]

    again = await runner.invoke_resume(paused.checkpoint_id, {"agent:par/agent:p%2Fx": "yes"})

    assert [e.message.content for e in again.events if e.message] == ["p/x got yes"]
    assert again.interrupt is not None and again.interrupt.point_ids == ["agent:par/agent:p"]
