"""Shared test helpers: a scriptable custom agent, runner shortcuts, a task-leak check, an
``add`` tool, the plain event-driven agent that asks a model and one that uses ``add``, money
tools that need approval, a real SQLite checkpoint store and the ``OpenAIChatModel`` that talks
to a test's OpenAI wire server (``wire_model``).

Test modules import these directly (``from conftest import ScriptAgent``); keep this file generic.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import IO, Any

import pytest

from adk import (
    AgentEvent,
    AgentInput,
    AgentOutput,
    BaseAgent,
    Message,
    Resources,
    Role,
    RunContext,
    Runner,
    ToolContext,
    tool,
)
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    action,
)
from adk.agent import Agent
from adk.callbacks import Callbacks
from adk.checkpoint import CheckpointStore, SQLiteCheckpointStore
from adk.models.openai import OpenAIChatModel
from adk.testing import Reply, ScriptedModel, tool_call

# -- the bytecode of the processes tests start ---------------------------------------------------
CHILD_PYCACHE = Path.home() / ".cache" / "pyadk-tests" / "pycache"
"""Where the Python processes tests start keep their bytecode when the environment writes none in
place (``pytest_configure``); outside every checkout, like the benchmarks' ``~/.cache/pyadk-bench``."""
_SAVED_ENVIRONMENT: list[str] = []  # the PYTHONDONTWRITEBYTECODE this session set aside


_RAM = Path("/dev/shm")
_RAM_FREE_AT_LEAST = 2 << 30  # bytes free on it, or the tests' files stay on disk


def _tmpfs_mounted_at(path: Path) -> bool:
    try:
        mounts = Path("/proc/mounts").read_text()
    except OSError:
        return False
    return any(
        fields[1:3] == [str(path), "tmpfs"]
        for fields in (line.split() for line in mounts.splitlines())
        if len(fields) > 3 and "noexec" not in fields[3].split(",")
    )


def pid_exists(pid: int) -> bool:
    """Whether a process ``pid`` exists (a zombie not reaped yet too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ram_backed_basetemp(config: pytest.Config) -> None:
    """Where the machine has a tmpfs at ``/dev/shm`` (mounted with exec, 2 GiB free), the tests'
    temporary folders (``tmp_path``) are made there rather than on disk: the SQLite checkpoint
    store commits every write with an fsync (``synchronous=FULL``), which a disk pays in
    milliseconds and tmpfs does not, and 55 test files write checkpoints to SQLite files in
    ``tmp_path`` (five of them: 87.7 -> 66.3 s by pytest's clock on a loaded machine). The
    store, its SQL and its locks are the same; what no test can see (an fsync reaching the disk,
    which only a power cut would tell) is all that differs. A ``--basetemp`` given, or
    ``PYADK_TESTS_DISK_TMP=1``, keeps them on disk. The folder is named by this process's id and
    pid namespace; the next session of that namespace removes it, but for the newest left (to
    look at after a failed run). Another namespace's (a container sharing ``/dev/shm``) are left
    alone: their processes cannot be seen from here."""
    if config.option.basetemp or os.environ.get("PYADK_TESTS_DISK_TMP"):
        return
    if not sys.platform.startswith("linux") or not _tmpfs_mounted_at(_RAM):
        return
    try:
        free = os.statvfs(_RAM)
    except OSError:
        return
    if free.f_bavail * free.f_frsize < _RAM_FREE_AT_LEAST or not os.access(_RAM, os.W_OK):
        return
    try:  # the pids named are this pid namespace's: another's sessions are not seen from here
        ours = f"pyadk-tests-{os.stat('/proc/self/ns/pid').st_ino}-"
    except OSError:
        return
    left = []
    for folder in _RAM.glob(f"{ours}*"):
        pid = folder.name.removeprefix(ours)
        if pid.isdigit() and not pid_exists(int(pid)):
            with contextlib.suppress(OSError):
                left.append((folder.stat().st_mtime, folder))
    for _, folder in sorted(left)[:-1]:
        shutil.rmtree(folder, ignore_errors=True)
    config.option.basetemp = str(_RAM / f"{ours}{os.getpid()}")


@pytest.hookimpl(tryfirst=True)  # before pytest's tmp_path plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    """Where the environment says not to write bytecode (``PYTHONDONTWRITEBYTECODE``, set on this
    machine and in many CI images), the Python processes the tests start (service replicas, app
    and example runs, job scripts; not MCP stdio servers, which get a minimal environment) keep
    theirs in ``CHILD_PYCACHE`` (``PYTHONPYCACHEPREFIX``), never in the checkout: pyadk, prebuilt
    and the test helpers are compiled once, not in every process (~0.2 s of CPU a process that
    imports them). The folder is kept between sessions, since a prefix also makes a process
    compile the installed packages it imports (~2 s for pyadk's) instead of reading the bytecode
    pip wrote beside them; bytecode is checked against its source's time and size, as in
    ``__pycache__``. This process is left as it is: it compiled its own modules before this hook.
    An environment that writes bytecode, or names its own prefix, is left alone."""
    _ram_backed_basetemp(config)
    _start_fork_server()
    dont_write = os.environ.get("PYTHONDONTWRITEBYTECODE")
    if not dont_write or os.environ.get("PYTHONPYCACHEPREFIX"):
        return
    CHILD_PYCACHE.mkdir(parents=True, exist_ok=True)
    _SAVED_ENVIRONMENT.append(dont_write)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = str(CHILD_PYCACHE)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Warns (in pytest's warnings summary, failing nothing) when the MCP fork server ended
    before the session did: it could not start (its imports, its socket's name taken) or died,
    and every MCP server started after that served in a process of its own, a second of CPU
    each, which only made the run slower."""
    said = _fork_server_ended(
        _FORK_SERVER[0] if _FORK_SERVER else None,
        _FORK_SERVER_STDERR[0] if _FORK_SERVER_STDERR else None,
    )
    if said is not None:
        warnings.warn(pytest.PytestWarning(said), stacklevel=1)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Puts the environment back as it was, and stops the MCP fork server."""
    while _SAVED_ENVIRONMENT:
        os.environ.pop("PYTHONPYCACHEPREFIX", None)
        os.environ["PYTHONDONTWRITEBYTECODE"] = _SAVED_ENVIRONMENT.pop()
    while _FORK_SERVER:
        process = _FORK_SERVER.pop()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    while _FORK_SERVER_STDERR:
        _FORK_SERVER_STDERR.pop().close()


# -- the MCP servers' fork server ----------------------------------------------------------------
MCP_SERVERS = Path(__file__).resolve().parent / "mcp_servers"
_FORK_SERVER: list[subprocess.Popen[bytes]] = []
_FORK_SERVER_STDERR: list[IO[bytes]] = []  # what it wrote there, for ``_fork_server_ended``
_FORK_SERVER_SHOWN = 4000  # characters of its stderr the warning shows, its end
_FORKED_MODULES = (
    "stdio_server",
    "narrow_server",
    "http_server",
    "market_server",
    "bank_server",
    "devices_server",
    "expenses_server",
    "library_server",
    "travel_server",
    "writing_server",
    "mcp.server.stdio",
    "mcp.server.runner",
)
"""What the fork server imports before it forks: the servers' scripts (as modules) and the parts
of the ``mcp`` package they import when they serve."""
_MINIMAL_ENVIRONMENT = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")
"""What a stdio server is given of its parent's environment (the ``mcp`` client's default)."""


def _start_fork_server() -> None:
    """Starts ``mcp_servers/forkserver.py`` for the stdio MCP servers this process starts: each
    hands its pipes to a fork of it, which has the ``mcp`` package imported already (about a
    second of CPU a server otherwise). Not waited for: a server started before it listens
    serves by itself. It is given what a stdio server is given of the environment, and ends
    with this process. ``PYADK_TESTS_NO_FORK_SERVER=1`` leaves it out (every server then serves
    in the process started for it, as before). What it writes to stderr is kept in a file, for
    the warning a fork server gone before the session's end makes (``pytest_sessionfinish``)."""
    if not sys.platform.startswith("linux") or os.environ.get("PYADK_TESTS_NO_FORK_SERVER"):
        return
    environment = {name: os.environ[name] for name in _MINIMAL_ENVIRONMENT if name in os.environ}
    errors = tempfile.TemporaryFile()  # noqa: SIM115  (closed at pytest_unconfigure)
    _FORK_SERVER_STDERR.append(errors)
    _FORK_SERVER.append(
        subprocess.Popen(
            [
                sys.executable,
                str(MCP_SERVERS / "forkserver.py"),
                str(os.getpid()),
                *_FORKED_MODULES,
            ],
            stdin=subprocess.DEVNULL,
            stderr=errors,
            env=environment,
            start_new_session=True,
        )
    )


def _fork_server_ended(
    process: subprocess.Popen[bytes] | None, errors: IO[bytes] | None
) -> str | None:
    """What to say of a fork server ``process`` that has ended (``None`` while it serves, or
    where none was started): how it ended and the end of what it wrote to ``errors``, its
    stderr."""
    if process is None or process.poll() is None:
        return None
    code = process.returncode
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    said = ""
    if errors is not None:
        errors.seek(0)
        said = errors.read().decode("utf-8", "replace")[-_FORK_SERVER_SHOWN:]
    return (
        f"the MCP servers' fork server (tests/mcp_servers/forkserver.py) ended ({how}) before the "
        "session did: the MCP servers started after that each served in a process of its own, "
        "about a second of CPU more each (the tests pass, slower); its stderr:\n"
        + (said or "(nothing)")
    )


Step = str | Message | BaseException | asyncio.Event | Callable[[RunContext], Any]
"""One step of a ``ScriptAgent``:

- ``str`` / ``Message``: yield it as an output message (a string is assistant text);
- an exception instance: raise it;
- an ``asyncio.Event``: wait until it is set;
- a callable ``(ctx) -> AgentEvent | None`` (may be async): yield what it returns, if anything.
"""


def act_exit() -> Callable[[RunContext], AgentEvent]:
    return lambda ctx: AgentEvent.exit()


def act_break() -> Callable[[RunContext], AgentEvent]:
    return lambda ctx: AgentEvent.break_loop()


def act_transfer(name: str) -> Callable[[RunContext], AgentEvent]:
    return lambda ctx: AgentEvent.transfer(name)


def do(fn: Callable[[], Any]) -> Callable[[RunContext], None]:
    """A step that calls ``fn()`` for its side effect (e.g. ``do(event.set)``) and yields nothing."""

    def step(ctx: RunContext) -> None:
        fn()

    return step


class ScriptAgent(BaseAgent):
    """A custom agent that plays ``steps`` and records what it saw and how it ended.

    ``reached`` is the highest step index begun (so a test can prove nothing after an ending event
    was pulled); ``closed`` counts runs whose generator finished or was closed (its ``finally``
    ran); ``cancelled`` counts runs that saw ``CancelledError``.
    """

    def __init__(self, name: str, *steps: Step, description: str = "") -> None:
        super().__init__(name, description)
        self.steps = steps
        self.inputs: list[list[Message]] = []
        self.paths: list[tuple[str, ...]] = []
        self.contexts: list[RunContext] = []
        self.reached = -1
        self.runs = 0
        self.completed = 0
        self.closed = 0
        self.cancelled = 0

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.runs += 1
        self.inputs.append(list(input.messages))
        self.paths.append(ctx.run_path)
        self.contexts.append(ctx)
        try:
            for index, step in enumerate(self.steps):
                self.reached = max(self.reached, index)
                event = await _perform(step, ctx)
                if event is not None:
                    yield event
            self.completed += 1
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.closed += 1


async def _perform(step: Step, ctx: RunContext) -> AgentEvent | None:
    if isinstance(step, str):
        return AgentEvent.of(step)
    if isinstance(step, Message):
        return AgentEvent(output=AgentOutput(step))
    if isinstance(step, BaseException):
        raise step
    if isinstance(step, asyncio.Event):
        await step.wait()
        return None
    result = step(ctx)
    if inspect.isawaitable(result):
        result = await result
    return result if isinstance(result, AgentEvent) else None


async def run_events(agent: Agent | Runner, input: Any = "hi", **kwargs: Any) -> list[AgentEvent]:
    """All events of one run of ``agent`` (or of a prepared runner), streams read to the end."""
    runner = agent if isinstance(agent, Runner) else Runner(agent)
    events = []
    async for event in runner.run(input, **kwargs):
        if event.output is not None and event.output.stream is not None:
            await event.output.stream.collect()
        events.append(event)
    return events


def resumes_failing_unforeseen(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Makes every ``Runner.resume`` fail at its first event with an exception no service maps
    (``RuntimeError("a bug nobody foresaw")``), until the function returned is called: a
    service's last resort, since no such failure of a store or a run is known."""
    failing = True
    resume = Runner.resume

    def broken_resume(self: Runner, *args: Any, **kwargs: Any) -> Any:
        if not failing:
            return resume(self, *args, **kwargs)

        async def fails() -> AsyncIterator[AgentEvent]:
            raise RuntimeError("a bug nobody foresaw")
            yield  # an async generator

        return fails()

    def mend() -> None:
        nonlocal failing
        failing = False

    monkeypatch.setattr(Runner, "resume", broken_resume)
    return mend


def other_tasks() -> set[asyncio.Task[Any]]:
    """Every task of the running loop except the caller's (for leak checks around a run)."""
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t is not current}


def contents(messages: list[Message]) -> list[str]:
    return [m.content for m in messages]


@tool(progress=True)
async def crunch(steps: int, ctx: ToolContext) -> str:
    """Crunch numbers."""
    for step in range(1, steps + 1):
        ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"crunched {steps}"


@tool(require_approval=True)
async def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


class ChatActor(ActionAgent):
    """The plain event-driven leaf: asks its model resource ``model`` through the built-in chat
    and tool actions, offering the tools named in ``tools``, with ``prompt`` as the user's message
    (its input's text when there is none), and outputs the answer's text."""

    def __init__(
        self,
        name: str,
        tools: Sequence[str] = (),
        *,
        model: str = "m",
        prompt: str | None = None,
        **options: Any,
    ) -> None:
        self.chat_model = model
        self.chat_tools = list(tools)
        self.prompt = prompt
        super().__init__(name, **options)

    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        text = str(event.input) if self.prompt is None else self.prompt
        request = [Message.user(text)]
        ctx.send_event(
            ChatRequestEvent(model=self.chat_model, messages=request, tools=self.chat_tools)
        )

    @action(ChatResponseEvent)
    def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


class Quiet(ActionAgent):
    """An event-driven agent that says it is asking, then keeps its chat's reply in memory: no output after the chat (what a streaming
    run shows of that chat is its only sign)."""

    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output="asking"))
        ctx.send_event(ChatRequestEvent(model="m", messages=[Message.user("hi")]))

    @action(ChatResponseEvent)
    def keep(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.short_term_memory.set("reply", event.response.content)


class Bank:
    """Money tools a person approves first (``require_approval``), each noting what it did:
    ``pay`` in ``paid``, ``transfer`` in ``sent``."""

    def __init__(self) -> None:
        self.paid: list[tuple[str, int]] = []
        self.sent: list[tuple[str, int]] = []

        @tool(require_approval=True)
        def pay(payee: str, cents: int) -> str:
            """Pay someone.

            Args:
                payee: who is paid.
                cents: how much.
            """
            self.paid.append((payee, cents))
            return f"paid {cents} to {payee}"

        @tool(require_approval=True)
        def transfer(account: str, cents: int) -> str:
            """Move money to an account.

            Args:
                account: where it goes.
                cents: how much.
            """
            self.sent.append((account, cents))
            return f"sent {cents} to {account}"

        self.pay = pay
        self.transfer = transfer


def sqlite_store(tmp_path: Path) -> SQLiteCheckpointStore:
    """A real SQLite store in ``tmp_path``: one per resume, as a service resumes in another
    process, all over the same file."""
    return SQLiteCheckpointStore(str(tmp_path / "checkpoints.db"))


def wire_model(
    server: Any,
    api: str = "chat",
    *,
    name: str = "test-model",
    api_key: str = "sk-test",
    **options: Any,
) -> OpenAIChatModel:
    """The ``OpenAIChatModel`` a test talks to its wire server (``tests/openai_server.py``)
    with: ``server``'s ``base_url``, or the URL itself when given a ``str`` (a server a test
    restarts, or a service built from its URL); ``api`` is ``"chat"`` or ``"responses"``, and
    ``options`` (``retry``, ``timeout``) go to the model as they are."""
    base_url = server if isinstance(server, str) else server.base_url
    return OpenAIChatModel(name, base_url=base_url, api_key=api_key, api=api, **options)  # type: ignore[arg-type]


async def checkpoint_ids(store: CheckpointStore) -> list[str]:
    """The ids of the checkpoints ``store`` keeps."""
    return [id async for id in store.ids()]


def _adds(messages: list[Message]) -> Reply:
    """Calls add(1, 2), then answers ``sum=`` with what it returned."""
    if messages[-1].role == Role.TOOL:
        return Reply(text=f"sum={messages[-1].content}")
    return Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})])


def calculator(model_name: str = "scripted", callbacks: Sequence[Callbacks] = ()) -> ActionAgent:
    """An ``ActionAgent`` named ``calculator`` whose every input makes one model call, one ``add``
    call and a second model call, answering ``sum=3``."""
    resources = Resources()
    resources.add_model("m", ScriptedModel(_adds, model_name=model_name))
    resources.add_tool(add)
    return ChatActor("calculator", ["add"], resources=resources, callbacks=callbacks)
