"""A runner closes only what nobody else holds open: ``Resources``, MCP toolsets and models shared
by runners made per request survive each request's ``async with Runner(...)``, against real MCP
servers (tests/mcp_servers) over stdio and streamable HTTP and the OpenAI wire server.

One HTTP server process for the module; each stdio server is a fork of the session's fork server.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from typing import Any

import pytest
from conftest import pid_exists, wire_model
from mcp_servers.process import (
    STDIO_SCRIPT,
    HTTPServerProcess,
    http_process_fixture,  # noqa: F401  (fixture)
    session_tasks,
)
from openai_server import OpenAIServer
from openai_server import Reply as WireReply

import adk.runner
from adk import RunError, Runner, tool
from adk._aio import held, release
from adk.mcp import HTTPServer, MCPToolset, StdioServer
from adk.resources import Resources
from adk.runner import RunResult
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest.fixture(params=["stdio", "http"])
def server(request: pytest.FixtureRequest, http_process: HTTPServerProcess) -> Any:
    if request.param == "stdio":
        return StdioServer(sys.executable, [str(STDIO_SCRIPT)])
    return HTTPServer(http_process.url)


def asks_pid(*more: Reply) -> ScriptedModel:
    """A request's model: it calls the MCP server's ``pid`` tool, then answers."""
    return ScriptedModel([Reply(tool_calls=[tool_call("pid")]), *more, "done"])


def pids(result: RunResult) -> list[int]:
    """What the ``pid`` calls of a run answered (the serving process, for a stdio server)."""
    return [
        int(event.message.content)
        for event in result.events
        if event.message is not None
        and event.message.role == "tool"
        and event.message.name == "pid"
    ]


async def request(agent: ReActAgent, resources: Resources | None, closes: str) -> list[int]:
    """One request of a service: a runner of ``agent`` over ``resources`` asks which process
    serves it and is closed at the request's end, in ``async with`` for ``closes == "async
    with"``, else by hand (``aclose``); what its ``pid`` calls answered."""
    if closes == "async with":
        async with Runner(agent, resources=resources) as runner:
            return pids(await runner.invoke("which process?"))
    runner = Runner(agent, resources=resources)
    try:
        return pids(await runner.invoke("which process?"))
    finally:
        await runner.aclose()


def shared_resources(server: Any) -> tuple[Resources, MCPToolset]:
    resources = Resources()
    return resources, resources.add_mcp("demo", server)


@pytest.mark.parametrize("holder", ["resources", "runner"])
@pytest.mark.parametrize("request_closes", ["async with", "aclose"])
async def test_shared_resources_survive_a_runner_per_request(
    server: Any, holder: str, request_closes: str
) -> None:
    """A service holds its ``Resources`` open for its life (``async with resources:``, or a
    runner of its own inside ``async with``); each request's runner, closed at the request's end,
    leaves them open: every request is served by the one session (one stdio server process), and
    the service's end closes it. Before, each request's end closed them, and the next request
    connected again (a new process)."""
    resources, toolset = shared_resources(server)
    life = (
        resources
        if holder == "resources"
        else Runner(ReActAgent("app", asks_pid()), resources=resources)
    )
    served: list[int] = []
    sessions: set[int] = set()
    async with life:
        for _ in range(3):
            agent = ReActAgent("clerk", asks_pid(), tools=["pid"])
            served += await request(agent, resources, request_closes)
            sessions.add(id(toolset._session))
            assert len(session_tasks(server)) == 1  # still open between requests
        assert len(sessions) == 1  # one session served every request
        assert len(set(served)) == 1 and len(served) == 3
    assert session_tasks(server) == []  # the service's end closed it
    if isinstance(server, StdioServer):
        assert not pid_exists(served[0])


async def test_a_runner_that_alone_uses_its_resources_closes_them(server: Any) -> None:
    """DESIGN's ``async with runner:`` closes resources: the runner given a ``Resources`` no one
    else holds, and one that found its toolset on its agent, close them at their end."""
    resources, _ = shared_resources(server)
    async with Runner(ReActAgent("clerk", asks_pid(), tools=["pid"]), resources=resources) as r:
        [pid] = pids(await r.invoke("which process?"))
        assert len(session_tasks(server)) == 1
    assert session_tasks(server) == []
    toolset = MCPToolset(server)
    async with Runner(ReActAgent("clerk", asks_pid(), tools=[toolset])) as r:
        [again] = pids(await r.invoke("which process?"))
    assert session_tasks(server) == []
    if isinstance(server, StdioServer):
        assert not pid_exists(pid) and not pid_exists(again)
    # An unentered runner closed by hand is the one user too.
    runner = Runner(ReActAgent("clerk", asks_pid(), tools=["pid"]), resources=resources)
    await runner.invoke("which process?")
    await runner.aclose()
    assert session_tasks(server) == []


async def test_a_toolset_both_registered_and_given_to_an_agent_closes_once(server: Any) -> None:
    """A runner closes its ``Resources`` and the toolset its agent holds at once (concurrently):
    when the toolset is the one registered too, its two closes overlap. The runner awaits both,
    so that was harmless; but a close called while another is under way returned at once, the
    session still open, where it now returns once the first has closed it."""
    resources, toolset = shared_resources(server)
    runner = Runner(ReActAgent("clerk", asks_pid(), tools=[toolset]), resources=resources)
    [pid] = pids(await runner.invoke("which process?"))
    await runner.aclose()
    assert session_tasks(server) == []
    if isinstance(server, StdioServer):
        assert not pid_exists(pid)
    # A second close called while the first is under way returns once the toolset is closed.
    await toolset.tools()
    assert len(session_tasks(server)) == 1
    first = asyncio.ensure_future(toolset.aclose())
    await asyncio.sleep(0)  # the first close starts, and waits on the session's end
    assert toolset._sessions.peek() is None and len(session_tasks(server)) == 1
    await toolset.aclose()
    assert session_tasks(server) == []
    await first


@pytest.mark.parametrize("first", ["runner", "resources block"])
async def test_the_first_holder_ending_leaves_them_open_to_a_runner_mid_run(
    server: Any, first: str
) -> None:
    """Two holders of one ``Resources``: a runner (or the caller's ``async with resources:``)
    ends while another runner, inside its own ``async with``, is in the middle of a run between
    two calls of the server. The run goes on over the same session, and the second runner's end
    closes it, as it is the last holder. Before, the first end closed the session under the run:
    its next call connected again (a new server process, left to nobody to close)."""
    resources, toolset = shared_resources(server)
    inside, go_on = asyncio.Event(), asyncio.Event()

    @tool
    async def wait_a_little() -> str:
        """Wait until told to go on."""
        inside.set()
        await go_on.wait()
        return "went on"

    script = asks_pid(
        Reply(tool_calls=[tool_call("wait_a_little")]), Reply(tool_calls=[tool_call("pid")])
    )
    second = Runner(ReActAgent("clerk", script, tools=["pid", wait_a_little]), resources=resources)
    first_holder: Any = (
        resources
        if first == "resources block"
        else Runner(ReActAgent("other", asks_pid()), resources=resources)
    )
    await first_holder.__aenter__()
    async with second:
        running = asyncio.create_task(second.invoke("which process, twice?"))
        try:
            async with asyncio.timeout(30):
                await inside.wait()
            session = toolset._session
            await first_holder.__aexit__(None, None, None)  # the first holder's end, mid-run
            assert len(session_tasks(server)) == 1
        finally:
            go_on.set()
            result = await running
        before, after = pids(result)
        assert before == after and toolset._session is session
    assert session_tasks(server) == []  # the last holder's end closed it
    if isinstance(server, StdioServer):
        assert not pid_exists(before)


async def test_concurrent_requests_share_one_session_and_the_service_end_closes_it(
    server: Any,
) -> None:
    """Requests served at once, each with its runner in ``async with``: none of their ends closes
    the session under the others, and the service's end leaves no session, task or process."""
    resources, _ = shared_resources(server)
    before = {t for t in asyncio.all_tasks() if not t.done()}

    async def request() -> list[int]:
        async with Runner(ReActAgent("clerk", asks_pid(), tools=["pid"]), resources=resources) as r:
            return pids(await r.invoke("which process?"))

    async with resources:
        served = await asyncio.gather(*(request() for _ in range(4)))
        assert len(session_tasks(server)) == 1
    [pid] = {pid for pids_ in served for pid in pids_}
    assert session_tasks(server) == []
    if isinstance(server, StdioServer):
        assert not pid_exists(pid)
    assert {t for t in asyncio.all_tasks() if not t.done()} <= before | {asyncio.current_task()}


async def test_a_toolset_the_caller_holds_is_not_closed_with_the_resources_holding_it(
    server: Any,
) -> None:
    """A toolset registered in a ``Resources`` that a runner closes, held open by the caller's
    ``async with toolset:``, stays open until that block ends."""
    toolset = MCPToolset(server)
    async with toolset:
        resources = Resources()
        resources.add_mcp("demo", toolset)
        async with Runner(ReActAgent("clerk", asks_pid(), tools=["pid"]), resources=resources) as r:
            [pid] = pids(await r.invoke("which process?"))
        assert len(session_tasks(server)) == 1
        await resources.aclose()  # closed by hand too: the toolset is the caller's
        assert len(session_tasks(server)) == 1
    assert session_tasks(server) == []
    if isinstance(server, StdioServer):
        assert not pid_exists(pid)


async def test_a_shared_model_survives_a_runner_per_request_over_a_shared_agent() -> None:
    """An agent tree made once, its ``OpenAIChatModel`` held open by the service: a runner per
    request in ``async with`` no longer closes the model, which refused every later request's
    call (``RuntimeError``, a closed model)."""
    async with OpenAIServer(default=WireReply(text="hello")) as wire:
        model = wire_model(wire)
        agent = ReActAgent("clerk", model)
        async with model:
            for _ in range(2):
                async with Runner(agent) as runner:
                    assert (await runner.invoke("hi")).text == "hello"
            assert not model._closed
        assert model._closed
        with pytest.raises(RunError, match="is closed"):
            await Runner(agent).invoke("hi")
        assert len(wire.requests) == 2


class _Closing(ScriptedModel):
    """A model of one's own with a connection to close: counts its closes."""

    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_one_model_registered_under_two_names_is_closed_once() -> None:
    """A model registered as "fast" and "default" (one client under two names) is closed once by
    the resources' close, as a runner closes each part once: a model of one's own whose close is
    not idempotent failed the second (the two ran at once)."""
    model = _Closing(["hi"])
    resources = Resources()
    resources.add_model("fast", model)
    resources.add_model("default", model)
    with pytest.raises(ValueError, match="a model named 'fast' is already registered"):
        resources.add_model("fast", _Closing(["hi"]))  # its client would be closed by nobody
    await resources.aclose()
    assert model.closed == 1


async def test_a_runner_inside_two_blocks_at_once_holds_until_the_last_ends() -> None:
    """One runner shared by two ``async with`` blocks (two tasks of a service, say): the first
    block's end closes nothing, the last one's closes what the runner alone used."""
    model = _Closing(["hi"])
    runner = Runner(ReActAgent("a", model))
    async with runner:
        async with runner:
            pass
        assert model.closed == 0
        assert (await runner.invoke("hi")).text == "hi"
    assert model.closed == 1


class _AppRunner(Runner):
    """A runner of one's own closing more of its own: its ``aclose`` ends its ``async with``,
    as ``AsyncCloseable``'s blocks end (``await obj.aclose()``)."""

    closed_own = 0

    async def aclose(self) -> None:
        await super().aclose()
        self.closed_own += 1


async def test_a_runner_subclasss_own_aclose_ends_its_async_with_block() -> None:
    """84bef13's block end closed the runner's parts without its ``aclose``: a subclass closing a
    client of its own there left it open at every ``async with``'s end."""
    model = _Closing(["hi"])
    runner = _AppRunner(ReActAgent("a", model))
    async with runner:
        async with runner:
            pass
        assert (runner.closed_own, model.closed) == (0, 0)  # the outer block still holds them
    assert (runner.closed_own, model.closed) == (1, 1)


async def test_an_explicit_close_closes_at_once_whoever_holds_it() -> None:
    """``aclose()`` on the ``Resources`` itself is the explicit close: it does not wait for the
    holders (as the docs say), unlike a block's or a runner's end."""
    model = _Closing(["hi"])
    resources = Resources()
    resources.add_model("m", model)
    async with resources, Runner(ReActAgent("a", "m"), resources=resources):
        await resources.aclose()
        assert model.closed == 1


async def test_a_toolset_of_held_resources_given_to_the_agents_stays_open(server: Any) -> None:
    """The toolset ``add_mcp`` returns, given to the agents themselves (``tools=[toolset]``)
    while the service holds its ``Resources`` open: a request's runner, closed at its end (in
    ``async with``, or by hand with or without the resources), leaves it open, as the holder of
    the ``Resources`` closes it. Before, the runner found the toolset on its agent, saw no holder
    of the toolset itself and closed it: each next request connected again (a new process)."""
    resources, toolset = shared_resources(server)
    served: list[int] = []
    async with resources:
        for closes in ("async with", "aclose", "aclose without resources"):
            agent = ReActAgent("clerk", asks_pid(), tools=[toolset])
            given = None if closes == "aclose without resources" else resources
            served += await request(agent, given, closes)
            assert len(session_tasks(server)) == 1, closes  # still open between requests
        async with toolset:  # a block on the toolset leaves it to the holder of the resources
            pass
        assert len(session_tasks(server)) == 1
        assert len(served) == 3 and len(set(served)) == 1
    assert session_tasks(server) == []  # the holder's end closed it
    if isinstance(server, StdioServer):
        assert not pid_exists(served[0])


async def test_a_model_of_held_resources_given_to_the_agents_stays_open() -> None:
    """A model registered in ``Resources`` the service holds, and given to an agent itself: a
    request's runner leaves it to the holder of the ``Resources`` (registered after the hold
    began, too); the holder's end closes it, once. An explicit ``resources.aclose()`` still
    closes it at once."""
    model = _Closing(["hi", "hi"])
    resources = Resources()
    async with resources:
        resources.add_model("m", model)
        async with Runner(ReActAgent("a", model), resources=resources) as runner:
            assert (await runner.invoke("hi")).text == "hi"
        await Runner(ReActAgent("a", model)).aclose()
        assert model.closed == 0
    assert model.closed == 1
    async with resources:
        await resources.aclose()
        assert model.closed == 2


class _Meeting(_Closing):
    """A model whose ``aclose`` a runner's enter looks up (``Runner._parts``), the place where two
    threads' enters of one runner met: the first look waits there until the other thread's enter
    is there too, or waits its turn to enter (for the lock the enters take, announced by
    ``_Announcing``), and says which it was."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies)
        self.meeting = threading.Condition()
        self.looks = 0  # of the enters, while armed
        self.armed = True
        self.first_in = threading.Event()
        self.waiting = threading.Event()  # the other enter waits its turn
        self.met = False  # both enters were in the place at once

    @property
    def aclose(self) -> Any:
        if self.armed:
            with self.meeting:
                self.looks += 1
                if self.looks == 1:
                    self.first_in.set()
                    self.meeting.wait_for(lambda: self.looks == 2 or self.waiting.is_set(), 30)
                else:
                    self.met = True
                    self.meeting.notify_all()
                self.armed = self.looks < 2 and not self.waiting.is_set()
        return self._close

    async def _close(self) -> None:
        self.closed += 1


class _Announcing:
    """A lock that announces, on ``waiting``, a taker that must wait for it."""

    def __init__(self, model: _Meeting) -> None:
        self.lock = threading.Lock()
        self.model = model

    def __enter__(self) -> None:
        if not self.lock.acquire(blocking=False):
            with self.model.meeting:
                self.model.waiting.set()
                self.model.meeting.notify_all()
            self.lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self.lock.release()


async def test_one_runner_entered_from_two_threads_loops_at_once_closes_its_parts_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A service running ``asyncio.run`` per request in worker threads, over one shared runner:
    two enters at once each found the runner entered by nobody and held its parts, so the
    count of blocks and the holds went apart: the model was closed by one block's end while
    the other's enter was under way, or one hold was lost and the last end left it held,
    never closed (here: both blocks open at once). The enters and ends are counted
    under a lock now: the second waits its turn, and the model closes once, at the last end."""
    model = _Meeting(["hi", "hi"])
    runner = Runner(ReActAgent("a", model))
    monkeypatch.setattr(adk.runner, "_ENTERING", _Announcing(model), raising=False)
    failures: list[BaseException] = []
    both_in = threading.Barrier(2)

    async def request() -> None:
        async with runner:
            await asyncio.to_thread(both_in.wait, 30)  # the two blocks open at once

    def worker() -> None:
        try:
            asyncio.run(request())
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)

    first, second = threading.Thread(target=worker), threading.Thread(target=worker)
    try:
        first.start()
        assert await asyncio.to_thread(model.first_in.wait, 30)  # the first enter is there
        second.start()
        await asyncio.to_thread(first.join, 30)
        await asyncio.to_thread(second.join, 30)
        assert not first.is_alive() and not second.is_alive() and not failures, failures
        assert (model.closed, held(model)) == (1, False)  # closed by the last block's end
        assert not model.met, "both threads' enters held the runner's parts at once"
    finally:
        while not release(model):  # a hold lost by a failure must not outlive the test
            pass
