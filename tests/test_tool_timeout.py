"""``timeout=`` on ``@tool`` / ``FunctionTool``: a call past its limit is cancelled and the model
reads an error naming the tool and the limit while the run goes on; a sync function's thread runs
on (no thread can be killed) and its late result reaches no one; the function's own
``TimeoutError``, an ``Interrupt`` and the run's cancellation are not the timeout; bad values are
refused where the tool is made. No assertion here depends on how long anything took: a timed-out
call waits on an event that is never set (or set only after the run)."""

from __future__ import annotations

import asyncio
import functools
import math
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from conftest import run_events

from adk import FunctionTool, Interrupt, Runner, ToolContext, tool
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


def _agent(tools: list[Any], *calls: Any) -> ReActAgent:
    """A ReActAgent whose model asks for ``calls`` in one turn, then answers ``done``."""
    return ReActAgent("agent", ScriptedModel([Reply(tool_calls=list(calls)), "done"]), tools=tools)


def _results(agent: ReActAgent) -> dict[str, str]:
    """The tool messages the model read on its second call, by tool call id."""
    assert isinstance(agent.model, ScriptedModel)
    requests = agent.model.requests
    assert len(requests) == 2
    return {m.tool_call_id or "": m.content for m in requests[1].messages if m.role == "tool"}


async def test_an_async_call_past_its_timeout_is_cancelled_and_the_model_reads_why() -> None:
    cancelled: list[bool] = []

    @tool(timeout=0.05)
    async def stuck(city: str) -> str:
        """Never answers."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return city

    @tool(timeout=30)
    async def quick(city: str) -> str:
        """Answers at once, well within its limit."""
        return f"sunny in {city}"

    agent = _agent(
        [stuck, quick],
        tool_call("stuck", {"city": "Oslo"}, id="c1"),
        tool_call("quick", {"city": "Oslo"}, id="c2"),
    )
    events = await run_events(agent)

    assert _results(agent) == {
        "c1": "Error: tool 'stuck' timed out: no result within its limit of 0.05 s",
        "c2": "sunny in Oslo",
    }
    assert cancelled == [True]
    assert events[-1].error is None and events[-1].output is not None  # the run went on
    assert isinstance(agent.model, ScriptedModel)
    read = {m.tool_call_id: m for m in agent.model.requests[1].messages if m.role == "tool"}
    assert read["c1"].metadata.get("is_error") is True and "is_error" not in read["c2"].metadata


async def test_a_sync_tool_in_a_thread_times_out_and_its_late_result_reaches_no_one() -> None:
    """No thread can be killed: the run goes on at the limit, the thread runs to its end and its
    result (or its exception) is dropped."""
    release = threading.Event()
    finished = threading.Event()

    @tool(timeout=0.05)
    def blocking(path: str) -> str:
        """Blocks on I/O that does not come."""
        release.wait()
        finished.set()
        raise RuntimeError("late failure nobody reads")

    agent = _agent([blocking], tool_call("blocking", {"path": "/x"}, id="c1"))
    events = await run_events(agent)
    release.set()
    await asyncio.to_thread(finished.wait)

    assert _results(agent) == {
        "c1": "Error: tool 'blocking' timed out: no result within its limit of 0.05 s"
    }
    assert events[-1].error is None
    assert not any("late failure" in str(e) for e in events)


async def test_the_functions_own_timeout_error_is_its_failure_not_the_tools_timeout() -> None:
    @tool(timeout=30)
    async def fetch(url: str) -> str:
        """Gives up on its own deadline."""
        async with asyncio.timeout(0):
            await asyncio.Event().wait()
        return url

    agent = _agent([fetch], tool_call("fetch", {"url": "u"}, id="c1"))
    await run_events(agent)
    assert _results(agent) == {"c1": "Error: tool 'fetch' failed: TimeoutError"}


async def test_a_timed_tool_that_interrupts_pauses_the_run_and_resumes() -> None:
    @tool(timeout=30)
    def refund(amount: int, ctx: ToolContext) -> str:
        """Refund after a person agrees."""
        if ctx.resume is None:
            raise Interrupt(f"refund {amount}?")
        return f"refunded {amount}: {ctx.resume.data}"

    agent = _agent([refund], tool_call("refund", {"amount": 5}, id="c1"))
    runner = Runner(agent)
    events = await run_events(runner)
    paused = events[-1].interrupted
    assert paused is not None and paused.points[0].info == "refund 5?"

    resumed = [event async for event in runner.resume(paused.checkpoint_id, "yes")]
    assert resumed[-1].error is None
    assert _results(agent) == {"c1": "refunded 5: yes"}


async def test_cancelling_the_run_cancels_a_timed_tool() -> None:
    started = asyncio.Event()
    cancelled: list[bool] = []

    @tool(timeout=3600)
    async def slow(n: int) -> int:
        """Waits until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return n

    run = asyncio.create_task(run_events(_agent([slow], tool_call("slow", {"n": 1}, id="c1"))))
    await started.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert cancelled == [True]


async def test_without_a_timeout_a_tool_has_none() -> None:
    @tool
    def plain(n: int) -> int:
        """No limit."""
        return n

    assert plain.timeout is None and FunctionTool(plain.fn, timeout=2.5).timeout == 2.5


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("5", TypeError),
        (True, TypeError),
        ([1], TypeError),
        (0, ValueError),
        (-1, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
    ],
)
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(
    value: object, error: type[Exception]
) -> None:
    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    with pytest.raises(error, match=r"tool 'lookup': timeout must be a number of seconds > 0"):
        tool(timeout=value)(lookup)  # type: ignore[arg-type]


def test_a_timeout_on_a_sync_tool_run_inline_is_refused() -> None:
    """Inline, the function holds the event loop: the timeout could fire only after it returned."""

    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    async def fetch(city: str) -> str:
        """Look a city up."""
        return city

    with pytest.raises(ValueError, match=r"tool 'lookup': timeout= needs .* thread=False runs it"):
        FunctionTool(lookup, thread=False, timeout=1)
    assert FunctionTool(fetch, thread=False, timeout=1).timeout == 1  # async: nothing inline


async def test_a_timed_out_call_drops_the_actions_it_asked_for() -> None:
    """As for any call that fails: the model must read the error, not have the run end on it."""

    @tool(timeout=0.05)
    async def finish(ctx: ToolContext) -> str:
        """Ends the run, then hangs."""
        ctx.exit()
        await asyncio.Event().wait()
        return "finished"

    agent = _agent([finish], tool_call("finish", {}, id="c1"))
    events = await run_events(agent)
    assert _results(agent) == {
        "c1": "Error: tool 'finish' timed out: no result within its limit of 0.05 s"
    }
    assert events[-1].output is not None and events[-1].output.message.content == "done"


async def test_the_approval_of_a_timed_tool_is_not_timed() -> None:
    """Only the function's run is timed: the pause for a person's decision is no timeout."""

    @tool(timeout=30, require_approval=True)
    async def refund(amount: int) -> str:
        """Refund an amount."""
        return f"refunded {amount}"

    agent = _agent([refund], tool_call("refund", {"amount": 5}, id="c1"))
    runner = Runner(agent)
    paused = (await run_events(runner))[-1].interrupted
    assert paused is not None
    resumed = [event async for event in runner.resume(paused.checkpoint_id, True)]
    assert resumed[-1].error is None
    assert _results(agent) == {"c1": "refunded 5"}


def _in_a_loop_of_its_own(main: Any) -> bool:
    """Run ``asyncio.run(main())`` in a thread of its own, with a default executor of one worker
    thread (as a busy process's pool of six, on two CPUs, would be once six calls hung); True
    when it returned. The join's bound is a hang guard, not a measurement: the runs take
    milliseconds, and a loop starved of its executor never returns."""
    done = threading.Event()

    async def with_one_worker() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1))
        await main()
        done.set()

    runner = threading.Thread(target=asyncio.run, args=(with_one_worker(),), daemon=True)
    runner.start()
    runner.join(60)
    return done.is_set() and not runner.is_alive()


def test_a_timed_out_sync_call_keeps_no_thread_of_the_loops_executor() -> None:
    """A timed-out sync function's thread runs on, but not in the event loop's default
    executor: there it held a worker until it ended, so calls that hang (the case a timeout is
    for) used the pool up and every sync tool of the process (any to_thread, getaddrinfo) then
    waited behind them; and asyncio.run, which waits for that executor's threads at its end,
    never returned."""
    release = threading.Event()
    answers: list[str] = []

    @tool(timeout=0.05)
    def hangs(path: str) -> str:
        """Blocks on I/O that does not come."""
        release.wait()
        return path

    @tool
    def plain(n: int) -> int:
        """A sync tool without a limit, run in the loop's executor."""
        return n

    async def main() -> None:
        first = _agent([hangs], tool_call("hangs", {"path": "/x"}, id="c1"))
        await run_events(first)
        assert _results(first) == {
            "c1": "Error: tool 'hangs' timed out: no result within its limit of 0.05 s"
        }
        second = _agent([plain], tool_call("plain", {"n": 7}, id="c2"))
        await run_events(second)
        answers.append(_results(second)["c2"])

    try:
        assert _in_a_loop_of_its_own(main), "the loop waited for the timed-out call's thread"
        assert answers == ["7"]
    finally:
        release.set()


async def test_a_sync_generators_items_are_collected_in_its_thread_within_its_timeout() -> None:
    """A sync generator function was called in its thread, which returned the generator at once:
    its items were then read by the result's serialisation on the event loop, where a blocking
    read stalled the run (and every other run of the loop) and no timeout could fire."""
    loop_thread = threading.get_ident()
    release = threading.Event()
    finished = threading.Event()

    @tool
    def rows(count: int) -> Any:
        """Read rows."""
        for index in range(count):
            yield {"row": index, "on_the_loop": threading.get_ident() == loop_thread}

    @tool(timeout=0.05)
    def slow_rows() -> Any:
        """Read rows from a source that does not answer."""
        yield "first"
        release.wait(10)  # bounded so that a regression fails rather than hangs the suite
        finished.set()
        yield "late"

    agent = _agent(
        [rows, slow_rows],
        tool_call("rows", {"count": 2}, id="c1"),
        tool_call("slow_rows", {}, id="c2"),
    )
    events = await run_events(agent)
    release.set()
    await asyncio.to_thread(finished.wait)
    assert _results(agent) == {
        "c1": '[{"row":0,"on_the_loop":false},{"row":1,"on_the_loop":false}]',
        "c2": "Error: tool 'slow_rows' timed out: no result within its limit of 0.05 s",
    }
    assert events[-1].error is None


async def test_a_sync_generator_given_up_is_closed_at_its_next_item() -> None:
    """A sync generator's thread read it on after its call was given up (timed out, or the run
    cancelled): an endless one (a feed, a poll) grew its list until memory ran out, and its
    ``finally`` (a cursor, a file) never ran. Read item by item, it is closed at the next one."""
    stop = threading.Event()  # ends the generators should they never be closed (a regression)
    closed = {"timed": threading.Event(), "untimed": threading.Event()}
    started = threading.Event()

    def feed(which: str) -> Any:
        try:
            while not stop.wait(0.001):
                started.set()
                yield which
        finally:
            closed[which].set()

    timed = FunctionTool(functools.partial(feed, "timed"), name="timed", timeout=0.05)
    untimed = FunctionTool(functools.partial(feed, "untimed"), name="untimed")
    try:
        agent = _agent([timed], tool_call("timed", {}, id="c1"))
        await run_events(agent)
        assert _results(agent) == {
            "c1": "Error: tool 'timed' timed out: no result within its limit of 0.05 s"
        }
        assert await asyncio.to_thread(closed["timed"].wait, 10)

        started.clear()
        agent = _agent([untimed], tool_call("untimed", {}, id="c1"))
        run = asyncio.ensure_future(run_events(agent))
        assert await asyncio.to_thread(started.wait, 10)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert await asyncio.to_thread(closed["untimed"].wait, 10)
    finally:
        stop.set()
