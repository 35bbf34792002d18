"""Every exception of ``adk`` and ``prebuilt`` survives ``pickle`` with its message and fields.

A multiprocessing pool, a ``concurrent.futures`` process executor or a PyFlink worker sends a
failure back pickled, and ``BaseException``'s own protocol rebuilds it as ``cls(*args)``: an
exception whose ``__init__`` takes its fields failed to unpickle with a ``TypeError`` about missing
arguments that hid the failure itself. The classes are found by walking the packages, so a new
exception without a sample here fails ``test_every_exception_class_has_a_sample``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing
import pickle
import pkgutil
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

import adk
import prebuilt
from adk import (
    AgentEvent,
    CheckpointError,
    ErrorInfo,
    MaxTurnsExceeded,
    Message,
    MessageChunk,
    MessageStream,
    RunError,
    Runner,
    Usage,
    tool,
)
from adk._driver import _OwnFailure
from adk._hooks import _Answered
from adk.actions import ActionError
from adk.checkpoint import CheckpointStoreError
from adk.checkpoint._state import _TurnsShort
from adk.checkpoint.codec import _Unstorable
from adk.checkpoint.postgres import _Unusable
from adk.checkpoint.store import _ForeignTable
from adk.cli import _Refused
from adk.execution import LocalExecutionEnvironment, RecordError
from adk.execution._records import _KeyRefused
from adk.execution._session_store import SessionNotSaved
from adk.interrupts import Interrupt
from adk.mcp import HTTPServer, MCPConnectionError
from adk.mcp._hooks import _Malformed
from adk.models.base import ModelError
from adk.models.openai import _StreamTruncated
from adk.resources import _Unknown
from adk.runner import _OptionsNotGiven
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tools.base import ToolError
from prebuilt import MaxIterationsError, OutputSchemaError, ReActAgent
from prebuilt._instruction import InstructionError, _MissingAtResume
from prebuilt._react_state import _BadState


def _exception_classes() -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for package in (adk, prebuilt):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if (
                    isinstance(value, type)
                    and issubclass(value, BaseException)
                    and value.__module__ == module.__name__
                ):
                    found.add(value)
    return found


@tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


async def _run_error(streaming: bool) -> RunError:
    model = ScriptedModel(["a first answer", ValueError("the model broke")])
    runner = Runner(ReActAgent("agent", model), enable_streaming=streaming)
    await runner.invoke("hello")  # a turn in the history, so the failed run has events
    with pytest.raises(RunError) as raised:
        await runner.invoke("again")
    return raised.value


async def _max_turns(streaming: bool) -> MaxTurnsExceeded:
    calls = [
        Reply(tool_calls=[tool_call("lookup", {"query": str(i)}, id=f"c{i}")]) for i in range(3)
    ]
    runner = Runner(
        ReActAgent("agent", ScriptedModel(calls), tools=[lookup]), enable_streaming=streaming
    )
    with pytest.raises(MaxTurnsExceeded) as raised:
        await runner.invoke("go", max_turns=2)
    return raised.value


async def _record_error() -> RecordError:
    agent = ReActAgent("agent", ScriptedModel([ValueError("the model broke")]))
    env = LocalExecutionEnvironment()
    with pytest.raises(RecordError) as raised:
        await env.from_list([{"user": "a", "text": "hi"}], key="user").apply(agent).to_list()
    return raised.value


def _made(exc: BaseException) -> Callable[[], Awaitable[BaseException]]:
    async def make() -> BaseException:
        return exc

    return make


# One or more ways each exception is met; the real ones where the SDK raises it in a run.
SAMPLES: dict[type[BaseException], list[Callable[[], Awaitable[BaseException]]]] = {
    RunError: [lambda: _run_error(False), lambda: _run_error(True)],
    MaxTurnsExceeded: [lambda: _max_turns(False), lambda: _max_turns(True)],
    RecordError: [
        _record_error,
        _made(RecordError(3, ("a", 1), {"x": 1}, ErrorInfo("ValueError", "bad"), "run-1")),
        _made(
            RecordError(
                3,
                "a",
                {"x": 1},
                ErrorInfo("ValueError", "bad"),
                "run-1",
                usage=Usage(input_tokens=3, output_tokens=2, total_tokens=5),
            )
        ),
    ],
    SessionNotSaved: [_made(SessionNotSaved(2, "a", "the close cut it off"))],
    _KeyRefused: [_made(_KeyRefused("a bool", True))],
    ModelError: [
        _made(ModelError("rate limited", status=429)),
        _made(ModelError("rate limited", status=429, retry_after=7.5)),
        _made(ModelError("no status")),
    ],
    CheckpointStoreError: [
        _made(CheckpointStoreError("down", backend="redis", operation="get", checkpoint_id="c1"))
    ],
    CheckpointError: [
        _made(CheckpointError("unreadable")),
        _made(CheckpointError("unreadable", reason="corrupt")),  # its reason in its fields
    ],
    adk.CheckpointNotFoundError: [_made(adk.CheckpointNotFoundError("no checkpoint 'c1'"))],
    adk.CheckpointBusyError: [_made(adk.CheckpointBusyError("already being resumed"))],
    _OptionsNotGiven: [_made(_OptionsNotGiven("paused a run given run options this resume lacks"))],
    _TurnsShort: [_made(_TurnsShort("resume with a higher max_turns", 3))],
    ToolError: [_made(ToolError("no such city"))],
    ActionError: [_made(ActionError("cannot process"))],
    Interrupt: [_made(Interrupt({"question": "ok?"}, state={"step": 2}))],
    InstructionError: [_made(InstructionError("no session value 'name'"))],
    _MissingAtResume: [_made(_MissingAtResume(InstructionError("no session value 'name'")))],
    OutputSchemaError: [_made(OutputSchemaError("did not match Answer"))],
    MaxIterationsError: [_made(MaxIterationsError("past 5 model calls"))],
    # A KeyError that ``Resources.get_tool``/``get_tools`` raise to their callers.
    _Unknown: [_made(_Unknown("no tool 'x'", ("server-a",)))],
    _ForeignTable: [_made(_ForeignTable("table t is not a checkpoint table"))],
    # pyadk checkpoint delete's refusal (a resume holds it, it changed, the operator said no).
    _Refused: [_made(_Refused("checkpoint 'c-1' not deleted"))],
    _Unusable: [_made(_Unusable("connection dropped"))],
    _StreamTruncated: [_made(_StreamTruncated("ended early"))],
    _BadState: [_made(_BadState("does not fit"))],
    # A server's sampling request the client's model cannot be given: caught where it is raised
    # and sent to the server as its error answer, but a plain ValueError all the same.
    _Malformed: [_made(_Malformed("message 2: a tool_result for 'c1' answers no tool_use"))],
    MCPConnectionError: [
        _made(
            MCPConnectionError(
                "could not connect to MCP server 'http://h/mcp' (it could not be started or "
                "reached): ConnectError: All connection attempts failed",
                server=HTTPServer("http://h/mcp", headers={"Authorization": "Bearer t"}),
                stage="connect",
            )
        )
    ],
}

# Raised and caught inside the SDK, never seen by its callers, and holding live objects (an agent,
# a cause) that have no business crossing a process boundary.
INTERNAL = {_OwnFailure, _Answered, _Unstorable}


def test_every_exception_class_has_a_sample() -> None:
    missing = _exception_classes() - SAMPLES.keys() - INTERNAL
    assert not missing, f"add samples for {sorted(c.__qualname__ for c in missing)}"


def _cases() -> list[Any]:
    return [
        pytest.param(cls, i, id=f"{cls.__module__}.{cls.__name__}-{i}")
        for cls, makers in SAMPLES.items()
        for i in range(len(makers))
    ]


def _fields(exc: BaseException) -> dict[str, Any]:
    return {name: _comparable(value) for name, value in vars(exc).items() if name != "_signal"}


def _comparable(value: Any) -> Any:
    """``value`` with each event's stream (equal only to itself) as what it carried."""
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    if isinstance(value, AgentEvent) and value.output is not None and value.output.stream:
        stream = value.output.stream
        assert stream.done  # a failed run's streams have ended
        carried = (list(stream._buffer), repr(stream._error), stream._cut)
        return (value.agent_name, value.run_path, carried, value.action, value.error)
    return value


@pytest.mark.parametrize(("cls", "index"), _cases())
async def test_an_exception_survives_pickling_with_its_message_and_fields(
    cls: type[BaseException], index: int
) -> None:
    exc = await SAMPLES[cls][index]()
    assert type(exc) is cls
    exc.add_note("a note added on the way up")

    copy = pickle.loads(pickle.dumps(exc))

    assert type(copy) is cls
    assert str(copy) == str(exc) and copy.args == exc.args
    assert _fields(copy) == _fields(exc)
    assert copy.__notes__ == ["a note added on the way up"]


async def test_a_run_error_comes_back_from_a_process_pool_with_its_events() -> None:
    loop = asyncio.get_running_loop()
    # spawn, not fork: a worker forked from a process running threads may deadlock.
    spawn = multiprocessing.get_context("spawn")
    with (
        ProcessPoolExecutor(max_workers=1, mp_context=spawn) as pool,
        pytest.raises(RunError) as raised,
    ):
        await loop.run_in_executor(pool, _fail_in_worker)
    exc = raised.value
    assert str(exc) == "agent 'agent' failed: ValueError: the model broke"
    assert exc.error == ErrorInfo("ValueError", "the model broke")
    assert exc.event is exc.events[-1]
    messages = [e.message for e in exc.events if e.message is not None]
    assert [(m.role, m.content) for m in messages] == [("assistant", ""), ("tool", "found x")]


def _fail_in_worker() -> None:
    call = Reply(tool_calls=[tool_call("lookup", {"query": "x"}, id="c1")])
    model = ScriptedModel([call, ValueError("the model broke")])
    asyncio.run(Runner(ReActAgent("agent", model, tools=[lookup])).invoke("hello"))


async def test_an_ended_stream_unpickles_as_what_it_carried_and_an_open_one_refuses() -> None:
    async def chunks() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="hel")
        yield MessageChunk(content="lo", finish_reason="stop")
        raise ValueError("the server went away")

    stream = MessageStream(chunks())
    with pytest.raises(TypeError, match="before it has ended"):
        pickle.dumps(stream)
    with pytest.raises(ValueError, match="went away"):
        await stream.collect()

    copy = pickle.loads(pickle.dumps(stream))
    assert copy.done and [c.content async for c in _upto_error(copy)] == ["hel", "lo"]
    with pytest.raises(ValueError, match="went away"):
        await copy.collect()

    whole = MessageStream.from_message(Message.assistant("hi"))
    assert await pickle.loads(pickle.dumps(whole)).collect() == await whole.collect()


async def _upto_error(stream: MessageStream) -> AsyncIterator[MessageChunk]:
    with contextlib.suppress(ValueError):
        async for chunk in stream:
            yield chunk
