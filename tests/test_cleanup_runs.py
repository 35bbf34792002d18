"""A run made and finished inside the cleanup of a cancelled task is an ordinary run.

A service saying goodbye on shutdown, or persisting its state when cancelled, runs an agent in
``except CancelledError: await runner.invoke(...); raise``, or (Starlette, anyio code) in a shielded
``anyio.CancelScope`` inside a cancelled one. The task has a cancellation pending all along
(``Task.cancelling()`` > 0), which came before the run started: it is not the run's. Only one that
comes while the run goes on (the count rising above what it was when the run started) cancels it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from conftest import ScriptAgent
from test_interrupts import Asker

from adk import AgentEvent, ErrorInfo, Interrupt, RunContext, RunError, Runner, tool
from adk.agent import Agent
from adk.callbacks import Callbacks
from adk.checkpoint import CheckpointStoreError, InMemoryCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

FORMS = ["except CancelledError", "anyio shielded scope"]


def _waiting_tool() -> tuple[asyncio.Event, Any]:
    """A tool ``wait`` that never returns, and an event set once it is called (the run waits in
    it)."""
    waiting = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait."""
        waiting.set()
        await asyncio.Event().wait()
        return "never"

    return waiting, wait


async def _in_cleanup(
    form: str,
    work: Callable[[], Awaitable[Any]],
    again: Callable[[Callable[[], None]], Awaitable[None]] | None = None,
) -> tuple[str, Any]:
    """Run ``work`` in the cleanup of a cancelled task, in ``form``; ("value", its result) or
    ("raised", its exception). ``again``, when given, is started alongside ``work`` with a function
    that cancels the cleanup itself (a real cancellation of the run made there)."""
    outcome: list[tuple[str, Any]] = []
    started = asyncio.Event()
    scopes: list[anyio.CancelScope] = []

    async def do_work(cancel_again: Callable[[], None]) -> None:
        watcher = asyncio.ensure_future(again(cancel_again)) if again is not None else None
        try:
            outcome.append(("value", await work()))
        except BaseException as exc:
            outcome.append(("raised", exc))
        finally:
            if watcher is not None:
                watcher.cancel()

    async def service() -> None:
        if form == "except CancelledError":
            try:
                started.set()
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                await do_work(asyncio.current_task().cancel)  # type: ignore[union-attr]
                raise
        else:
            with anyio.CancelScope() as scope:
                scopes.append(scope)
                try:
                    started.set()
                    await asyncio.Event().wait()
                finally:
                    with anyio.CancelScope(shield=True) as shield:
                        await do_work(shield.cancel)

    task = asyncio.create_task(service())
    await started.wait()
    if form == "except CancelledError":
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    else:
        scopes[0].cancel()
        await task  # the scope took its own cancellation
    assert len(outcome) == 1
    return outcome[0]


async def _fails() -> Any:
    """Await a future someone else cancelled: a CancelledError of one's own, no one cancelled us."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.cancel()
    return await future


@pytest.mark.parametrize("form", FORMS)
async def test_a_failing_after_agent_fails_a_run_made_in_cleanup(form: str) -> None:
    """The callback's error fails the run (``RunError``), as anywhere else: it was only logged as
    the error of an agent "which was cancelled", and the run reported its answer."""

    def flaky(agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        raise ConnectionError("metrics backend down")

    runner = Runner(
        ReActAgent("a", ScriptedModel(["hello"])), callbacks=[Callbacks(after_agent=flaky)]
    )
    how, value = await _in_cleanup(form, lambda: runner.invoke("bye"))
    assert how == "raised" and isinstance(value, RunError), value
    assert isinstance(value.__cause__, ConnectionError)


async def _events(runner: Runner) -> list[AgentEvent]:
    async with contextlib.aclosing(runner.run("bye")) as events:
        return [event async for event in events]


@pytest.mark.parametrize("form", FORMS)
async def test_a_failing_agent_in_cleanup_is_a_run_error_not_a_bare_exception(form: str) -> None:
    """An exception raised while the cleanup handles the CancelledError has it as its
    ``__context__``: taken for the cancellation's own, it escaped the run bare, no error event."""
    runner = Runner(ReActAgent("a", ScriptedModel([ConnectionError("model down")], cycle=True)))
    how, value = await _in_cleanup(form, lambda: runner.invoke("bye"))
    assert how == "raised" and isinstance(value, RunError), value
    assert value.error == ErrorInfo("ConnectionError", "model down")
    how, value = await _in_cleanup(form, lambda: _events(runner))  # ``run``: its error event
    assert how == "value", value
    assert value[-1].error == ErrorInfo("ConnectionError", "model down")


@pytest.mark.parametrize("form", FORMS)
async def test_a_callbacks_own_cancelled_error_fails_a_run_made_in_cleanup(form: str) -> None:
    """A callback that awaited something someone else cancelled fails the run, as it does in a
    task nobody cancelled: its CancelledError passed for the run's cancellation."""

    async def before(agent: Agent, ctx: RunContext) -> None:
        await _fails()

    runner = Runner(
        ReActAgent("a", ScriptedModel(["hello"])), callbacks=[Callbacks(before_agent=before)]
    )
    how, value = await _in_cleanup(form, lambda: runner.invoke("bye"))
    assert how == "raised" and isinstance(value, RunError), value
    assert "before_agent" in str(value)


@pytest.mark.parametrize("form", FORMS)
async def test_a_tools_own_cancelled_error_is_its_failure_in_a_run_made_in_cleanup(
    form: str,
) -> None:
    """The model is told the call failed and answers, as in a task nobody cancelled."""

    @tool
    async def lookup() -> str:
        """Look it up."""
        return str(await _fails())

    model = ScriptedModel([Reply(tool_calls=[tool_call("lookup")]), "could not look it up"])
    runner = Runner(ReActAgent("a", model, tools=[lookup]))
    how, value = await _in_cleanup(form, lambda: runner.invoke("bye"))
    assert how == "value", value
    assert value.text == "could not look it up"
    told = [m for m in model.requests[-1].messages if m.role == "tool"]
    assert len(told) == 1 and "CancelledError" in str(told[0].content)


class _BrokenStore(InMemoryCheckpointStore):
    """A store whose write awaits something someone else cancelled (its own failure)."""

    async def put(self, id: str, data: bytes) -> None:
        await _fails()


@pytest.mark.parametrize("form", FORMS)
async def test_a_store_failing_at_a_pause_made_in_cleanup_fails_the_run(form: str) -> None:
    """A pause whose checkpoint could not be saved fails the run with a CheckpointError, as in a
    task nobody cancelled: the store's CancelledError passed for the run's cancellation."""
    runner = Runner(ScriptAgent("p", "hello", Interrupt("approve?")), _BrokenStore())
    how, value = await _in_cleanup(form, lambda: runner.invoke("bye", checkpoint_id="c1"))
    assert how == "raised" and isinstance(value, RunError), value
    assert value.error is not None and value.error.type == "CheckpointError"


@pytest.mark.parametrize("form", FORMS)
async def test_a_pause_made_in_cleanup_is_saved_and_resumed_in_cleanup(form: str) -> None:
    """The agent's ``Interrupt``, raised while the cleanup handles the CancelledError, escaped the
    run bare (taken for part of the cancellation): no checkpoint saved, nothing to resume."""
    store = InMemoryCheckpointStore()
    runner = Runner(Asker("ask", how="raise"), store)
    how, value = await _in_cleanup(form, lambda: runner.invoke("bye", checkpoint_id="c1"))
    assert how == "value" and value.interrupt is not None, value
    assert await store.get("c1") is not None
    how, value = await _in_cleanup(form, lambda: runner.invoke_resume("c1", "yes"))
    assert how == "value" and value.interrupt is None and value.text == "ask got 'yes'", value
    assert await store.get("c1") is None  # finished: the resume removed it


@pytest.mark.parametrize("form", FORMS)
async def test_a_run_made_in_cleanup_is_cancelled_by_a_cancellation_that_comes_while_it_runs(
    form: str,
) -> None:
    """The cleanup cancelled again (``Task.cancel()``; anyio: the shielded scope cancelled) while
    its run waits in a tool: the run is cancelled, its after_agent callback sees it cut off and a
    failing one does not replace the cancellation."""
    waiting, wait = _waiting_tool()
    ended: list[str] = []

    def after(agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        ended.append(agent.name)
        raise ConnectionError("metrics backend down")

    runner = Runner(
        ReActAgent(
            "a", ScriptedModel([Reply(tool_calls=[tool_call("wait")]), "never"]), tools=[wait]
        ),
        callbacks=[Callbacks(after_agent=after)],
    )

    async def again(cancel: Callable[[], None]) -> None:
        await waiting.wait()
        cancel()

    how, value = await _in_cleanup(form, lambda: runner.invoke("bye"), again)
    assert how == "raised" and isinstance(value, asyncio.CancelledError), value
    assert ended == ["a"]


class _ClaimingStore(InMemoryCheckpointStore):
    """A store with claims, whose ``claim`` or ``release`` (``failing``) awaits something someone
    else cancelled."""

    claim_ttl = 30.0

    def __init__(self, failing: str) -> None:
        super().__init__()
        self.failing = failing
        self.released = 0

    async def claim(self, id: str, owner: str) -> bool:
        if self.failing == "claim":
            await _fails()
        return True

    async def release(self, id: str, owner: str) -> None:
        self.released += 1
        if self.failing == "release":
            await _fails()


@pytest.mark.parametrize("form", FORMS)
async def test_a_claim_failing_in_a_resume_made_in_cleanup_is_the_stores_error(form: str) -> None:
    """A store's own CancelledError as it claims is a ``CheckpointStoreError``, as in a task
    nobody cancelled; it passed for the resume's cancellation (the claim given back as if)."""
    store = _ClaimingStore("claim")
    runner = Runner(Asker("ask", how="raise"), store)
    assert (await runner.invoke("hi", checkpoint_id="c1")).interrupt is not None
    how, value = await _in_cleanup(form, lambda: runner.invoke_resume("c1", "yes"))
    assert how == "raised" and isinstance(value, CheckpointStoreError), value
    assert value.operation == "claim"


@pytest.mark.parametrize("form", FORMS)
async def test_a_release_failing_after_a_resume_made_in_cleanup_is_logged(
    form: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The resume ran to its end: a store's own CancelledError as it gives back the claim is
    logged (the claim lapses), as in a task nobody cancelled, not raised as the resume's
    cancellation, its result lost."""
    store = _ClaimingStore("release")
    runner = Runner(Asker("ask", how="raise"), store)
    assert (await runner.invoke("hi", checkpoint_id="c1")).interrupt is not None
    with caplog.at_level(logging.WARNING):
        how, value = await _in_cleanup(form, lambda: runner.invoke_resume("c1", "yes"))
    assert how == "value" and value.text == "ask got 'yes'", value
    assert store.released == 1
    assert "could not release the claim on checkpoint 'c1'" in caplog.text


@pytest.mark.parametrize("form", FORMS)
async def test_the_spans_of_a_run_made_in_cleanup_say_how_it_ended(form: str) -> None:
    """Failed: ``failed`` (it was ``cancelled``: the failure passed for the cleanup's
    cancellation); cancelled again while it waited in a tool: ``cancelled``."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    waiting, wait = _waiting_tool()

    def outcomes() -> list[Any]:
        found = [
            (s.attributes or {}).get("adk.agent.outcome")
            for s in exporter.get_finished_spans()
            if s.name.startswith("invoke_agent")
        ]
        exporter.clear()
        return found

    failing = Runner(
        ReActAgent("a", ScriptedModel([ConnectionError("model down")])), tracer_provider=provider
    )
    how, value = await _in_cleanup(form, lambda: failing.invoke("bye"))
    assert how == "raised" and isinstance(value, RunError), value
    assert outcomes() == ["failed"]

    async def again(cancel: Callable[[], None]) -> None:
        await waiting.wait()
        cancel()

    model = ScriptedModel([Reply(tool_calls=[tool_call("wait")]), "never"])
    waits = Runner(ReActAgent("a", model, tools=[wait]), tracer_provider=provider)
    how, value = await _in_cleanup(form, lambda: waits.invoke("bye"), again)
    assert how == "raised" and isinstance(value, asyncio.CancelledError), value
    assert outcomes() == ["cancelled"]


@pytest.mark.parametrize("form", FORMS)
async def test_an_mcp_server_that_never_answers_fails_a_run_made_in_cleanup(form: str) -> None:
    """Its handshake timed out and the session was torn down: the run fails with a ``RunError``
    caused by the ``MCPConnectionError``, as in a task nobody cancelled; the error (its
    ``__context__`` the cleanup's CancelledError) escaped the run bare."""
    import socket

    from adk.mcp import HTTPServer, MCPConnectionError, MCPToolset

    with socket.socket() as silent:  # takes the connection, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        server = HTTPServer(f"http://127.0.0.1:{silent.getsockname()[1]}/mcp")
        runner = Runner(
            ReActAgent(
                "a", ScriptedModel(["hello"]), tools=[MCPToolset(server, connect_timeout=0.2)]
            )
        )
        try:
            how, value = await _in_cleanup(form, lambda: runner.invoke("bye"))
        finally:
            await runner.aclose()
    assert how == "raised" and isinstance(value, RunError), value
    assert isinstance(value.__cause__, MCPConnectionError), value.__cause__


async def test_a_baseline_left_behind_by_a_run_ended_elsewhere_is_passed_over() -> None:
    """A ``run()`` generator abandoned in a cleanup is closed by the loop's finaliser in another
    context: its baseline, still in the reader's context, is only marked ended. There it no longer
    hides the cleanup's own pending cancellation, nor is it taken for an enclosing run's."""
    import contextvars

    from adk._aio import being_cancelled, run_ended, run_started

    seen: list[tuple[bool, ...]] = []

    async def cleanup() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            baseline = run_started()
            inside = being_cancelled()
            contextvars.copy_context().run(run_ended, baseline)  # ended elsewhere
            after = being_cancelled()
            assert run_started() is not None  # a new run's, the count still 1
            seen.append((baseline is not None, inside, after))
            raise

    task = asyncio.create_task(cleanup())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert seen == [(True, False, True)]
    assert run_started() is None  # nothing kept by a run in a task nobody cancelled


@pytest.mark.parametrize("form", FORMS)
async def test_a_run_read_on_after_its_cleanup_gave_up_the_cancellation_is_still_cancellable(
    form: str,
) -> None:
    """A ``run()`` started in a cleanup and read on once the cleanup has taken its cancellation
    back (``uncancel()``, as ``asyncio.timeout`` does; anyio: the cancelled scope left): the
    count it started with is no longer pending, so a cancellation that comes later is the run's
    and cancels it, rather than being taken for the cleanup's and the waiting tool's failure."""
    waiting, wait = _waiting_tool()

    runner = Runner(
        ReActAgent(
            "a", ScriptedModel([Reply(tool_calls=[tool_call("wait")]), "done"]), tools=[wait]
        )
    )
    started = asyncio.Event()
    read: list[AgentEvent] = []

    async def service() -> None:
        events = runner.run("bye")
        try:
            if form == "except CancelledError":
                try:
                    started.set()
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    read.append(await anext(events))  # made in the cleanup
                    asyncio.current_task().uncancel()  # type: ignore[union-attr]
            else:
                with anyio.CancelScope() as scope:
                    try:
                        started.set()
                        scope.cancel()
                        await asyncio.Event().wait()
                    finally:
                        with anyio.CancelScope(shield=True):
                            read.append(await anext(events))
            assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
            async for event in events:  # the tool waits: the test cancels this task
                read.append(event)
        finally:
            await events.aclose()

    task = asyncio.create_task(service())
    await started.wait()
    if form == "except CancelledError":
        task.cancel()
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [event.error for event in read] == [None]


@pytest.mark.parametrize("how", ["invoke", "run"])
async def test_a_cancellation_requested_but_not_yet_delivered_when_a_run_starts_is_the_runs(
    how: str,
) -> None:
    """Ctrl-C under ``asyncio.run`` cancels the main task from a signal handler, in the middle of
    whatever step the task is taking: a run started later in that step found the count at 1 and
    took the cancellation for one from before it (a cleanup's), though it had not been delivered.
    Delivered inside the run, it went to the tool the run waited for: the run went on and
    answered, the caller's cancellation lost (or, in an MCP listing, came out as a RunError of
    a CancelledError), and Ctrl-C did not stop the program."""

    @tool
    async def step() -> str:
        """Suspends once."""
        await asyncio.sleep(0)
        return "stepped"

    model = ScriptedModel([Reply(tool_calls=[tool_call("step", {})]), "answered"])
    runner = Runner(ReActAgent("agent", model, tools=[step]))

    async def request() -> Any:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()  # as asyncio.run's SIGINT handler does, mid-step
        if how == "invoke":
            return (await runner.invoke("go")).text
        return [event async for event in runner.run("go")]

    outcome = asyncio.ensure_future(request())
    await asyncio.wait([outcome])
    assert outcome.cancelled(), outcome.result()


@pytest.mark.parametrize("in_cleanup", [False, True])
async def test_a_timeout_expiring_as_a_run_starts_is_a_timeout_at_the_caller(
    in_cleanup: bool,
) -> None:
    """``asyncio.timeout(0)`` cancels its task from a callback, before the run's first step
    ends: the run is cancelled (it does not answer), and the caller sees ``TimeoutError``, in a
    cleanup too (the cleanup's cancellation stays the cleanup's, the timeout's is the run's)."""

    @tool
    async def step() -> str:
        """Suspends once."""
        await asyncio.sleep(0)
        return "stepped"

    model = ScriptedModel([Reply(tool_calls=[tool_call("step", {})]), "answered"])
    runner = Runner(ReActAgent("agent", model, tools=[step]))

    async def timed() -> Any:
        async with asyncio.timeout(0):
            return (await runner.invoke("go")).text

    async def request() -> Any:
        if not in_cleanup:
            return await timed()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return await timed()

    outcome = asyncio.ensure_future(request())
    await asyncio.sleep(0)
    if in_cleanup:
        outcome.cancel()
    await asyncio.wait([outcome])
    assert isinstance(outcome.exception(), TimeoutError), outcome
