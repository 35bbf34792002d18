"""MCP servers as resources, against real MCP servers (tests/mcp_servers) over stdio, streamable
HTTP and SSE.

Server processes are slow to start (the ``mcp`` package takes about a second to import), so the
tests that only read share one stdio server and one HTTP server for the module; tests that kill,
mutate or time out a server start their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import logging
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
import pytest_asyncio
from conftest import pid_exists, wire_model
from mcp.types import LATEST_PROTOCOL_VERSION
from mcp_servers.process import (
    STDIO_SCRIPT,
    HTTPServerProcess,
    closed_port,
    http_process_fixture,  # noqa: F401  (fixture)
    session_tasks,
    sse_process_fixture,  # noqa: F401  (fixture)
)
from openai_server import Call as OpenAICall
from openai_server import OpenAIServer
from openai_server import Reply as OpenAIReply
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from adk import (
    AgentEvent,
    AgentTool,
    AudioPart,
    FilePart,
    ImagePart,
    Interrupt,
    RunError,
    Runner,
    ToolCall,
    ToolContext,
    run_messages,
    tool,
)
from adk.actions import (
    ActionAgent,
    ActionContext,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.callbacks import Callbacks
from adk.checkpoint import SQLiteCheckpointStore
from adk.mcp import HTTPServer, MCPConnectionError, MCPToolset, SSEServer, StdioServer
from adk.messages import Message, Role
from adk.resources import Resources
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from adk.tools.base import Tool, ToolResult, ToolSpec
from prebuilt import ReActAgent

pytestmark = pytest.mark.asyncio(loop_scope="module")

_T = TypeVar("_T")


# -- helpers -------------------------------------------------------------------------------------
def stdio(*flags: str, env: dict[str, str] | None = None) -> StdioServer:
    return StdioServer(sys.executable, [str(STDIO_SCRIPT), *flags], env=env)


def narrow(kind: str) -> StdioServer:
    """A low-level server offering only ``kind`` ("tools" or "prompts")."""
    return StdioServer(sys.executable, [str(STDIO_SCRIPT.parent / "narrow_server.py"), kind])


def starts(pid_file: Path) -> list[int]:
    """The pids of the server processes started so far (each appends a line to its pid file)."""
    text = pid_file.read_text() if pid_file.exists() else ""
    return [int(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


async def run(tool: Tool, arguments: Any = None) -> ToolResult:
    """Run a tool outside an agent (these tools do not use their context)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    result = await tool.run(text, None)  # type: ignore[arg-type]
    return result if isinstance(result, ToolResult) else ToolResult(content=result)


async def call(toolset: MCPToolset, name: str, arguments: Any = None) -> ToolResult:
    tools = {tool.spec.name: tool for tool in await toolset.tools()}
    return await run(tools[name], arguments)


async def server_pid(toolset: MCPToolset) -> int:
    result = await call(toolset, "pid")
    assert not result.is_error, result.content
    pid: int = result.structured["result"]
    return pid


async def names(toolset: MCPToolset) -> set[str]:
    return {tool.spec.name for tool in await toolset.tools()}


async def eventually(
    probe: Callable[[], Awaitable[_T]], check: Callable[[_T], bool], attempts: int = 400
) -> _T:
    """Probe until ``check`` holds (notifications arrive asynchronously); bounded, not timed."""
    for _ in range(attempts):
        value = await probe()
        if check(value):
            return value
        await asyncio.sleep(0.025)
    raise AssertionError(f"condition never held; last value: {value!r}")


def owner_task(toolset: MCPToolset) -> asyncio.Task[None]:
    """The task that owns the toolset's live session (white box: shows it ends on close)."""
    live = toolset._session.current
    assert live is not None and live._task is not None
    return live._task


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


# -- servers -------------------------------------------------------------------------------------
def server_for(transport: str, http_process: HTTPServerProcess) -> StdioServer | HTTPServer:
    if transport == "stdio":
        return stdio()
    if transport == "stdio-legacy":
        return stdio("--legacy")
    assert transport == "http"
    return HTTPServer(http_process.url)


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=["stdio", "http"])
async def shared(
    request: pytest.FixtureRequest, http_process: HTTPServerProcess
) -> AsyncIterator[MCPToolset]:
    toolset = MCPToolset(server_for(request.param, http_process), call_timeout=15)
    yield toolset
    await toolset.aclose()


# -- listing and calling -------------------------------------------------------------------------
async def test_tools_are_listed_with_their_input_schemas(shared: MCPToolset) -> None:
    specs = {tool.spec.name: tool.spec for tool in await shared.tools()}
    assert {"add", "forecast", "fail", "hang", "rendezvous", "pid", "die"} <= specs.keys()
    add = specs["add"]
    assert add.description == "Add two integers."
    assert add.parameters["type"] == "object"
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert sorted(add.parameters["required"]) == ["a", "b"]
    units = specs["forecast"].parameters["properties"]["units"]
    assert units["enum"] == ["celsius", "fahrenheit"]
    assert specs["pid"].parameters["properties"] == {}


async def test_typed_arguments_and_structured_output(shared: MCPToolset) -> None:
    result = await call(shared, "add", {"a": 2, "b": 40})
    assert (result.is_error, result.content, result.structured) == (False, "42", {"result": 42})

    result = await call(shared, "forecast", {"city": "Oslo", "units": "fahrenheit"})
    assert not result.is_error
    assert result.structured == {
        "city": "Oslo",
        "temperature": 70.7,
        "units": "fahrenheit",
        "conditions": ["sunny", "dry"],
    }
    assert json.loads(result.content) == result.structured


async def test_tool_errors_become_error_results(shared: MCPToolset) -> None:
    failed = await call(shared, "fail", {"message": "the disk is full"})
    assert failed.is_error
    assert failed.content.startswith("Error:")
    assert "the disk is full" in failed.content

    invalid = await call(shared, "add", {"a": "many", "b": 1})  # refused by the server's schema
    assert invalid.is_error
    assert "valid integer" in invalid.content

    # the session survives errors
    assert (await call(shared, "add", {"a": 1, "b": 1})).content == "2"


async def test_non_text_content_arrives_as_parts_with_placeholders_in_the_text(
    shared: MCPToolset,
) -> None:
    # Binary blocks become parts carrying their bytes (a model that takes images sees the
    # chart), and placeholders naming their kind in the text, for a model that reads text only.
    result = await call(shared, "media")

    assert not result.is_error
    assert result.content.splitlines() == [
        "a chart of sales",
        "[image: image/png]",
        "[audio: audio/wav]",
        "[resource link: report <file:///reports/q3.pdf>]",
        "notes: up 4%",
        "[resource: file:///raw.bin (application/octet-stream)]",
    ]
    assert result.parts == (
        ImagePart(mime_type="image/png", data=b"\x89PNG\r\n\x1a\n"),
        AudioPart(mime_type="audio/wav", data=b"RIFF"),
        FilePart(mime_type="application/octet-stream", data=b"\x00\x01\x02", uri="file:///raw.bin"),
    )


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_mcp_tools_image_reaches_the_model_as_an_image(
    api: str, shared: MCPToolset
) -> None:
    """The chart an MCP tool returns is sent to the model as an image, not only as the text
    ``[image: image/png]``: Chat Completions' tool messages take text, so the round's images
    follow them in a user message naming the call; a Responses function output holds them."""
    toolset = MCPToolset(shared.server, tool_filter=["media"], call_timeout=15)
    script = [OpenAIReply(tool_calls=[OpenAICall("media", "{}", "c1")]), OpenAIReply(text="up")]
    async with OpenAIServer(script) as server:
        model = wire_model(server, api, parts="send")
        agent = ReActAgent("analyst", model, tools=[toolset])
        async with Runner(agent) as runner:
            result = await runner.invoke("how were sales?")
        second = server.bodies[1]
    assert result.output is not None and result.output.content == "up"
    png = "data:image/png;base64,iVBORw0KGgo="
    if api == "chat":
        messages = second["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "user"]
        assert messages[2]["content"].splitlines()[1] == "[image: image/png]"
        assert messages[3]["content"] == [
            {"type": "text", "text": "Attached by tool call c1 (media):"},
            {"type": "image_url", "image_url": {"url": png}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            # Chat's file part takes PDFs only: the blob goes as its placeholder
            {"type": "text", "text": "[resource: file:///raw.bin (application/octet-stream)]"},
        ]
    else:
        (output,) = [i for i in second["input"] if i.get("type") == "function_call_output"]
        assert output["call_id"] == "c1"
        items = output["output"]
        assert items[0]["type"] == "input_text" and "[image: image/png]" in items[0]["text"]
        assert items[1:] == [
            {"type": "input_image", "image_url": png},
            {"type": "input_text", "text": "[audio: audio/wav]"},  # a function output takes none
            # input_file takes the file types OpenAI's guide lists, not a blob of no stated type
            {
                "type": "input_text",
                "text": "[resource: file:///raw.bin (application/octet-stream)]",
            },
        ]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_mcp_tools_image_reaches_a_text_only_server_as_its_placeholder(
    api: str, shared: MCPToolset
) -> None:
    """A model server other than OpenAI's is sent no content part by default (``parts="text"``):
    a model without vision (vLLM, llama.cpp, Ollama) refused the request holding the MCP tool's
    image, and each later one of the run. The tool's result goes as its text, placeholders and
    all, as before parts were sent."""
    toolset = MCPToolset(shared.server, tool_filter=["media"], call_timeout=15)
    script = [OpenAIReply(tool_calls=[OpenAICall("media", "{}", "c1")]), OpenAIReply(text="up")]
    async with OpenAIServer(script) as server:
        agent = ReActAgent("analyst", wire_model(server, api), tools=[toolset])
        async with Runner(agent) as runner:
            result = await runner.invoke("how were sales?")
        second = server.bodies[1]
    assert result.output is not None and result.output.content == "up"
    text = "\n".join(
        [
            "a chart of sales",
            "[image: image/png]",
            "[audio: audio/wav]",
            "[resource link: report <file:///reports/q3.pdf>]",
            "notes: up 4%",
            "[resource: file:///raw.bin (application/octet-stream)]",
        ]
    )
    if api == "chat":
        assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool"]
        assert second["messages"][2] == {"role": "tool", "tool_call_id": "c1", "content": text}
    else:
        (output,) = [i for i in second["input"] if i.get("type") == "function_call_output"]
        assert output == {"type": "function_call_output", "call_id": "c1", "output": text}
    assert ";base64," not in json.dumps(second)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_binary_blocks_of_no_or_another_type_reach_a_text_only_server_as_their_text(
    api: str,
) -> None:
    """The text of a tool's result names each binary block as the part it becomes, so a text-only
    server (``parts="text"``, the default off OpenAI) is sent that text alone, as before parts
    were sent. A blob without a MIME type was named ``(binary data)`` and its part
    ``(application/octet-stream)``, an image typed ``application/octet-stream`` ``[image: ...]``
    and its file part ``[file: unnamed (...)]``: each was sent twice over, the second time as a
    line added after the result, naming a block the server never sent."""
    toolset = MCPToolset(narrow("untyped"), call_timeout=15)
    script = [OpenAIReply(tool_calls=[OpenAICall("blocks", "{}", "c1")]), OpenAIReply(text="ok")]
    async with toolset, OpenAIServer(script) as server:
        result = await call(toolset, "blocks")
        agent = ReActAgent("analyst", wire_model(server, api), tools=[toolset])
        async with Runner(agent) as runner:
            assert (await runner.invoke("what came?")).text == "ok"
        second = server.bodies[1]
    if api == "chat":
        assert second["messages"][2] == {
            "role": "tool",
            "tool_call_id": "c1",
            "content": result.content,
        }
    else:
        (output,) = [i for i in second["input"] if i.get("type") == "function_call_output"]
        assert output["output"] == result.content
    assert result.content.splitlines() == [
        "three blocks",
        "[resource: file:///raw.bin (application/octet-stream)]",
        "[file: unnamed (application/octet-stream)]",
        "[file: unnamed (video/mp4)]",
    ]
    assert result.parts == (
        FilePart(mime_type="application/octet-stream", data=b"\x00\x01\x02", uri="file:///raw.bin"),
        FilePart(mime_type="application/octet-stream", data=b"\x00\x01\x02"),
        FilePart(mime_type="video/mp4", data=b"\x00\x01\x02"),
    )


@pytest.mark.parametrize("legacy", [False, True])
async def test_large_results_arrive_over_streamable_http(
    legacy: bool, http_process: HTTPServerProcess
) -> None:
    """A handshake-era server (most servers in use) streams each answer as a server-sent event,
    which the mcp client refuses beyond 1 MiB: a large file or a screenshot failed as "connection
    lost", and the session was torn down, while the same result over stdio (or answered as JSON,
    as a 2026-07-28 server does) arrived."""
    process = HTTPServerProcess(legacy=True) if legacy else http_process
    if legacy:
        await asyncio.to_thread(process.start)
    try:
        async with MCPToolset(HTTPServer(process.url)) as toolset:
            result = await call(toolset, "large", {"size": 3_000_000})
            assert not result.is_error, result.content[:300]
            assert result.content == "x" * 3_000_000
            assert toolset._session.connections_opened == 1
    finally:
        if legacy:
            process.stop()


async def test_an_answer_beyond_the_event_limit_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer the transport cannot take is reported as such, not only as a lost connection;
    its call fails alone, the session kept (its loss was one request's own: taken for the
    session's, the next call reconnected, failing every call in flight on it)."""
    monkeypatch.setattr("adk.mcp._servers._MAX_EVENT_SIZE", 1_000_000)
    process = HTTPServerProcess(legacy=True)
    await asyncio.to_thread(process.start)
    try:
        async with MCPToolset(HTTPServer(process.url)) as toolset:
            result = await call(toolset, "large", {"size": 1_500_000})
            assert result.is_error
            assert "lost while tool 'large' was running (SSE stream failed: " in result.content
            assert "exceeded the 1000000 byte limit" in result.content
            assert (await call(toolset, "add", {"a": 1, "b": 2})).content == "3"
            assert toolset._session.connections_opened == 1
    finally:
        process.stop()


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_tools_named_as_models_refuse_get_names_they_take(
    shared: MCPToolset, api: str
) -> None:
    """MCP allows dots and 128 characters in a tool name, model APIs neither: one such tool made
    every model call offering the server's tools fail with HTTP 400. Such tools are offered under a
    name models take (a name that fits keeps it; a clash or a long name gets a hash), and calls
    still reach the server's tool."""
    tools = {tool.spec.name: tool for tool in await shared.tools()}
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", name) for name in tools)
    assert "files_read" in tools and "add" in tools  # names that fit are kept
    dotted = [n for n in tools if n.startswith("files_read_")]
    long = [n for n in tools if n.startswith("report_quarterly_")]
    assert len(dotted) == 1 and len(long) == 1 and len(long[0]) == 64
    assert (await run(tools["files_read"], {"path": "a"})).content == "underscored read a"
    assert (await run(tools[dotted[0]], {"path": "a"})).content == "dotted read a"
    assert (await run(tools[long[0]])).content == "long name answered"
    assert {t.spec.name for t in await shared.tools()} == set(tools)  # the same names again

    async with OpenAIServer([OpenAIReply(text="ok")]) as server:
        model = wire_model(server, api)
        async with model:
            specs = [tool.spec for tool in tools.values()]
            assert (await model.generate([Message.user("hi")], tools=specs)).content == "ok"


async def test_malformed_arguments_are_error_results(shared: MCPToolset) -> None:
    truncated = await call(shared, "add", '{"a": 1,')
    assert truncated.is_error
    assert "invalid arguments for tool 'add'" in truncated.content
    assert "not valid JSON" in truncated.content

    not_an_object = await call(shared, "add", "[1, 2]")
    assert not_an_object.is_error
    assert "JSON object" in not_an_object.content

    no_arguments = await call(shared, "pid", "")  # models send "" for parameterless tools
    assert not no_arguments.is_error


async def test_arguments_no_transport_can_send_are_error_results_and_keep_the_session(
    shared: MCPToolset,
) -> None:
    # JSON the model may write that json.loads takes but MCP cannot carry: a lone surrogate
    # (escaped, or raw from an adapter) cannot be encoded as UTF-8, and it ended the session (over
    # stdio and HTTP alike), cutting every other run's call in flight ("connection ... was lost");
    # NaN and 1e400 were sent as null; nesting past the parser's limit raised RecursionError.
    pid = await server_pid(shared)
    sessions = shared._session.connections_opened
    cases = {
        '{"a": 1, "b": "\\ud800"}': "lone surrogate",
        '{"a": 1, "\ud800": 2}': "lone surrogate",
        '{"a": NaN, "b": 2}': "not a finite number",
        '{"a": 1e400, "b": 2}': "not a finite number",
        # An integer longer than Python reads: said so, not in Python's words for a programmer
        # ('use sys.set_int_max_str_digits() to increase the limit').
        '{"a": 1' + "0" * 5000 + ', "b": 2}': "arguments hold an integer of 5001 digits",
        "[" * 100_000 + "]" * 100_000: "nested too deeply",
        # Within json.loads' limit, past the transport's writer's (pydantic's, 255 levels): it
        # read 'tool ... failed: ValueError: Circular reference detected (depth exceeded)'.
        '{"a": 1, "b": 2, "c": ' + "[" * 300 + "]" * 300 + "}": "nested too deeply",
    }
    for text, why in cases.items():
        result = await call(shared, "add", text)
        assert result.is_error, text[:40]
        assert result.content.startswith("Error: invalid arguments for tool 'add': "), (
            result.content
        )
        assert why in result.content
    assert await server_pid(shared) == pid
    assert shared._session.connections_opened == sessions
    assert (await call(shared, "add", {"a": 1, "b": 2})).content == "3"
    # A pair of surrogates, escaped, is one character: sent as it is.
    paired = await call(shared, "forecast", '{"city": "Z\\u00fcrich \\ud83d\\ude00"}')
    assert not paired.is_error, paired.content
    assert "Z\u00fcrich \U0001f600" in paired.content


async def test_concurrent_calls_run_over_one_session(shared: MCPToolset) -> None:
    pid = await server_pid(shared)
    sessions = shared._session.connections_opened
    group = uuid.uuid4().hex
    # Each call returns only once all five are inside the server at the same time: this cannot
    # pass if calls were serialised over the session (they would time out instead).
    results = await asyncio.gather(
        *(call(shared, "rendezvous", {"group": group, "n": 5, "tag": f"t{i}"}) for i in range(5))
    )
    assert [r.content for r in results] == [f"t{i}" for i in range(5)]
    assert not any(r.is_error for r in results)
    assert await server_pid(shared) == pid
    assert shared._session.connections_opened == sessions


async def test_concurrent_first_uses_of_a_toolset_share_one_listing(
    http_process: HTTPServerProcess,
) -> None:
    """A service's first requests, arriving together on a toolset not yet used (no startup
    ``tools()``), each sent the server a ``tools/list`` of their own: 100 agents starting at once
    sent 100 listings, which took seconds on a loaded server, and with a short ``call_timeout``
    failed runs with "did not answer within ... while listing its tools". mcp.md says a toolset
    "lists them once". Concurrent first uses now wait for one listing; one that gives up
    waiting, the one that started it too, does not stop it for the others."""
    async with MCPToolset(HTTPServer(http_process.url)) as counter:
        before = (await call(counter, "hang_stats")).structured["listed"]
    async with MCPToolset(HTTPServer(http_process.url)) as toolset:
        waiting = [asyncio.create_task(toolset.tools()) for _ in range(20)]
        await asyncio.sleep(0)  # every use has asked: the listing is under way
        for leaving in (waiting[0], waiting[7]):
            leaving.cancel()
        results = await asyncio.gather(*waiting, return_exceptions=True)
        assert [type(r).__name__ for r in results] == [
            "CancelledError" if i in (0, 7) else "list" for i in range(20)
        ]
        listed = {tuple(t.spec.name for t in r) for r in results if isinstance(r, list)}
        assert len(listed) == 1 and "hang_stats" in next(iter(listed))
        after = (await call(toolset, "hang_stats")).structured["listed"]  # the listing cached
    assert after == before + 1


async def test_uses_that_joined_a_listing_a_change_made_stale_share_one_listing_again() -> None:
    """A change the server announced while concurrent first uses waited for one listing (a tool
    added as the service started) made every use that had joined it list again on its own: 20
    uses, 21 ``tools/list`` requests, the very burst sharing the listing was for. They list
    again together: one more listing for all of them."""
    async with MCPToolset(stdio()) as toolset:
        # Connected, no listing of ours yet. The mcp client lists the tools on its first call
        # to learn their output schemas: counted before the uses start, not among theirs.
        await toolset._call("hang_stats", "hang_stats", "{}")
        before = (await toolset._call("hang_stats", "hang_stats", "{}")).structured["listed"]
        # The change is asked for first, so the server announces it before it answers the
        # listing asked for next (one ordered stdio stream): the listing the uses share is stale.
        change = asyncio.create_task(toolset._call("add_tool", "add_tool", '{"name": "fresh"}'))
        await asyncio.sleep(0)
        results = await asyncio.gather(*(toolset.tools() for _ in range(20)))
        assert (await change).content == "added fresh"
        assert all("fresh" in {t.spec.name for t in tools} for tools in results)
        after = (await toolset._call("hang_stats", "hang_stats", "{}")).structured["listed"]
    assert after - before == 2  # the shared listing, and the one listing again after the change


async def test_event_loops_of_two_threads_each_get_their_own_session() -> None:
    """One toolset (one Runner's) used from two threads' event loops at once, as a service
    running ``asyncio.run`` per request in worker threads does: the second loop found the first
    loop's live connection and sent its call through it, which failed ("attached to a different
    loop") as an agent error. Each loop now has its own session (a stdio server each), closed as
    that loop ends."""
    toolset = MCPToolset(stdio())
    both = threading.Barrier(2, timeout=60)
    answers: list[object] = []

    async def use() -> None:
        async with asyncio.timeout(60):
            [add] = [tool for tool in await toolset.tools() if tool.spec.name == "add"]
            await asyncio.to_thread(both.wait)  # both loops have listed the tools
            answers.append((await add.run('{"a": 1, "b": 2}')).content)
            await asyncio.to_thread(both.wait)  # neither loop ends while the other calls

    def serve() -> None:
        try:
            asyncio.run(use())
        except BaseException as exc:
            answers.append(exc)
            both.abort()

    threads = [threading.Thread(target=serve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        await asyncio.to_thread(thread.join)
    assert answers == ["3", "3"]
    await toolset.aclose()


class _DeadlinesByTest:
    """``anyio`` for ``adk.mcp._toolset``, whose ``move_on_after(delay)`` (a call's
    ``call_timeout``) gives a scope the test ends: the delay asked for is noted with the scope
    and the task that made it, and the scope's deadline is an hour away until the test moves it
    to now. Everything else is anyio's own."""

    def __init__(self) -> None:
        self.made: list[tuple[float, anyio.CancelScope, asyncio.Task[Any] | None]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(anyio, name)

    def move_on_after(self, delay: float) -> anyio.CancelScope:
        scope = anyio.move_on_after(3600)
        self.made.append((delay, scope, asyncio.current_task()))
        return scope


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_hanging_call_times_out_and_the_server_is_told(
    transport: str, http_process: HTTPServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call past its ``call_timeout`` is cancelled, the model reads that it timed out, the
    server is told, and the session goes on. The call's timeout comes when the server has begun
    the call, by moving its deadline to then: with a real 0.5 s a loaded machine timed the call
    out before the server had started it (its counts never moved), or timed out the stats calls
    themselves."""
    deadlines = _DeadlinesByTest()
    monkeypatch.setattr("adk.mcp._toolset.anyio", deadlines)
    async with MCPToolset(server_for(transport, http_process), call_timeout=0.5) as toolset:
        before = (await call(toolset, "hang_stats")).structured
        hanging = asyncio.ensure_future(call(toolset, "hang"))
        await eventually(
            lambda: call(toolset, "hang_stats"),
            lambda r: r.structured["started"] == before["started"] + 1,
        )
        [(delay, scope)] = [(d, scope) for d, scope, task in deadlines.made if task is hanging]
        assert delay == 0.5  # the call's own timeout, call_timeout
        scope.deadline = anyio.current_time()  # its time is up
        result = await hanging
        assert result.is_error
        assert result.content == "Error: tool 'hang' timed out after 0.5s and was cancelled"
        # The request was cancelled on the server too, and the session is still good.
        after = await eventually(
            lambda: call(toolset, "hang_stats"),
            lambda r: r.structured["cancelled"] == before["cancelled"] + 1,
        )
        assert after.structured["started"] == before["started"] + 1


@contextlib.asynccontextmanager
async def _dropping_proxy(port: int, trigger: bytes) -> AsyncIterator[int]:
    """A TCP proxy to ``port`` on a port of its own, which drops (aborts, both ways) the one
    connection whose request holds ``trigger`` once it has passed that request on, as a proxy
    or a load balancer dropping one connection does; yields its port."""
    dropped = False

    async def pump(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, watched: bool
    ) -> bool:
        """Pass bytes on until the end; True once ``trigger`` was passed on (``watched``)."""
        seen = b""
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
            seen = (seen + data)[-65536:]
            if watched and trigger in seen:
                return True
        return False

    handlers: set[asyncio.Task[None]] = set()
    writers: list[asyncio.StreamWriter] = []

    async def serve(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        nonlocal dropped
        handler = asyncio.current_task()
        assert handler is not None
        handlers.add(handler)
        writers.append(client_w)
        server_r, server_w = await asyncio.open_connection("127.0.0.1", port)
        writers.append(server_w)
        down = asyncio.ensure_future(pump(server_r, client_w, False))
        try:
            if await pump(client_r, server_w, True) and not dropped:
                dropped = True
                client_w.transport.abort()
                server_w.transport.abort()
            await down
        except OSError:
            pass
        finally:
            down.cancel()
            client_w.transport.abort()
            server_w.transport.abort()

    listening = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield listening.sockets[0].getsockname()[1]
    finally:
        listening.close()
        for writer in writers:  # every connection ends: each handler sees its end and returns
            writer.transport.abort()
        await asyncio.gather(*handlers, return_exceptions=True)
        await listening.wait_closed()


async def test_a_call_whose_connection_a_proxy_drops_fails_alone_and_the_server_lets_it_go(
    http_process: HTTPServerProcess,
) -> None:
    """The real server behind a proxy that drops the connection of one call (``hang``) after
    passing it on: the call fails alone, saying it may have run and is not sent again; the
    server, which started it, ends it (its session's state after the half exchange is sound);
    and the same session serves the next calls."""
    async with (
        _dropping_proxy(http_process.port, b'"name":"hang"') as port,
        MCPToolset(HTTPServer(f"http://127.0.0.1:{port}/mcp"), call_timeout=15) as toolset,
    ):
        before = (await call(toolset, "hang_stats")).structured
        result = await call(toolset, "hang")
        assert result.is_error and "was lost while tool 'hang' was running" in result.content
        assert "the call is not sent again, as the tool may have run" in result.content
        after = await eventually(
            lambda: call(toolset, "hang_stats"),
            lambda r: r.structured["cancelled"] == before["cancelled"] + 1,
        )
        assert after.structured["started"] == before["started"] + 1
        assert (await call(toolset, "add", {"a": 1, "b": 2})).content == "3"
        assert toolset._session.connections_opened == 1


@pytest.mark.parametrize("legacy", [False, True])
async def test_a_call_over_http_is_bounded_by_call_timeout_alone(
    legacy: bool, http_process: HTTPServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The HTTP client's read timeout (5 minutes, for the idle event stream) also cut off any call
    whose answer took longer, as a lost connection, whatever ``call_timeout`` said. (The read
    timeout is shortened here so that the test does not wait 5 minutes.)"""
    monkeypatch.setattr("adk.mcp._servers._SSE_READ_TIMEOUT", 0.5)
    process = HTTPServerProcess(legacy=True) if legacy else http_process
    if legacy:
        await asyncio.to_thread(process.start)
    try:
        async with MCPToolset(HTTPServer(process.url, timeout=0.5), call_timeout=2) as toolset:
            result = await call(toolset, "hang")
            assert result.content == "Error: tool 'hang' timed out after 2s and was cancelled"
            assert toolset._session.connections_opened == 1
    finally:
        if legacy:
            process.stop()


async def test_calls_waiting_for_a_connection_are_bounded_by_call_timeout_alone(
    http_process: HTTPServerProcess,
) -> None:
    """More calls at once than the HTTP client's pool has connections (100) wait for one. A call
    that waited longer than the server's ``timeout`` (``HTTPServer(timeout=...)``, for connecting
    and each exchange) failed with httpx's ``PoolTimeout``, which ended the whole session: every
    call on it, those the server was running included, read 'the connection ... was lost', and
    their results were lost with it (a keyed pipeline of 128 records at once over a tool slower
    than 30 s, the default). A call's time, waiting for a connection too, is ``call_timeout``'s
    to bound, as its answer's is (above)."""
    async with MCPToolset(HTTPServer(http_process.url, timeout=0.5), call_timeout=1.5) as toolset:
        results = await asyncio.gather(*(call(toolset, "hang") for _ in range(110)))
        said = {result.content for result in results}
        assert said == {"Error: tool 'hang' timed out after 1.5s and was cancelled"}
        assert (await call(toolset, "add", {"a": 2, "b": 3})).content == "5"
        assert toolset._session.connections_opened == 1


async def test_a_handshake_era_session_whose_connections_all_hang_is_reopened_not_wedged() -> None:
    """A handshake-era (2025-11-25) server is told of a cancelled call by a
    ``notifications/cancelled`` POST, sent by the ``mcp`` client's writer before any later message.
    With every connection of the pool (100, the event stream's included) held by a call the
    server does not answer, that POST waited for a connection without a bound (the pool timeout
    dropped for every POST): never, since only the cancellations it carried would free one. The
    writer waited with it, so every later call of the session timed out too, for good. A
    notification waits for a connection within the server's ``timeout``, as before; past it the
    session is lost and the next call reopens it."""
    process = HTTPServerProcess(legacy=True)
    await asyncio.to_thread(process.start)
    try:
        server = HTTPServer(process.url, timeout=0.5)
        async with MCPToolset(server, call_timeout=1.5) as toolset:
            results = await asyncio.gather(*(call(toolset, "hang") for _ in range(100)))
            assert {result.is_error for result in results} == {True}
            assert (await call(toolset, "add", {"a": 2, "b": 3})).content == "5"
    finally:
        process.stop()


async def test_filter_and_prefix(http_process: HTTPServerProcess) -> None:
    url = http_process.url
    async with MCPToolset(HTTPServer(url), tool_filter=["add", "pid"], prefix="demo") as toolset:
        assert await names(toolset) == {"demo_add", "demo_pid"}
        assert (await call(toolset, "demo_add", {"a": 1, "b": 2})).content == "3"

    def hangs(spec: ToolSpec) -> bool:
        return spec.name.startswith("hang")

    async with MCPToolset(HTTPServer(url), tool_filter=hangs) as toolset:
        assert await names(toolset) == {"hang", "hang_stats"}

    with pytest.raises(ValueError, match="prefix"):
        MCPToolset(HTTPServer(url), prefix="")
    with pytest.raises(TypeError, match="tool_filter"):
        MCPToolset(HTTPServer(url), tool_filter="add")
    with pytest.raises(TypeError, match="StdioServer, HTTPServer or SSEServer"):
        MCPToolset(url)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="http"):
        HTTPServer("127.0.0.1:8000/mcp")


async def test_a_prefix_that_leaves_no_room_for_the_tools_names_is_refused_where_given(
    http_process: HTTPServerProcess,
) -> None:
    """Model APIs take tool names of 64 characters; a longer one is cut to its first 55 and a
    hash. A prefix of 54 characters or more made every such name ``<prefix>_<hash>`` (every name
    at all from 63 on), the tools told apart by the hash alone: refused where it is given,
    naming the limit, and nothing is registered."""
    server = HTTPServer(http_process.url)  # not connected to: refused before
    with pytest.raises(ValueError, match=r"prefix must be at most 53 characters, got 54 "):
        MCPToolset(server, prefix="p" * 54)
    resources = Resources()
    with pytest.raises(ValueError, match=r"at most 53 characters, got 70 .*tell apart"):
        resources.add_mcp("tools", server, prefix="s" * 70)
    assert MCPToolset(server, prefix="p" * 53).prefix == "p" * 53
    assert resources.add_mcp("tools", server, prefix="short").prefix == "short"  # name still free


async def test_a_tool_error_reads_as_one_sentence_under_the_name_the_model_called(
    http_process: HTTPServerProcess,
) -> None:
    """The ``mcp`` package words a failed tool ``Error executing tool <name>: <why>``, and adk
    prefixed ``Error: ``: the model read ``Error: Error executing tool fail: ...``, under the
    server's name where it had called ``demo_fail``. It reads adk's words for a failed call."""
    async with MCPToolset(HTTPServer(http_process.url), prefix="demo") as toolset:
        failed = await call(toolset, "demo_fail", {"message": "the disk is full"})
        invalid = await call(toolset, "demo_add", {"a": "many", "b": 1})
    assert (failed.is_error, failed.content) == (
        True,
        "Error: tool 'demo_fail' failed: the disk is full",
    )
    assert invalid.is_error
    assert invalid.content.startswith("Error: tool 'demo_add' failed: 1 validation error"), (
        invalid.content
    )


async def test_a_crashed_tools_error_without_a_reason_says_the_server_gave_none() -> None:
    """A crash is worded ``Error executing tool <name>`` alone (the server keeps its reason);
    another server's own words are kept as they are."""
    from mcp.types import CallToolResult, TextContent

    from adk.mcp._toolset import _to_result

    def result(text: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    crashed = _to_result(result("Error executing tool add"), "demo_add", "add")
    assert (crashed.is_error, crashed.content) == (
        True,
        "Error: tool 'demo_add' failed; the server did not say why",
    )
    other = _to_result(result("Error executing tool adder: no"), "demo_add", "add")
    assert other.content == "Error: Error executing tool adder: no"  # not its words for 'add'
    own = _to_result(result("quota exceeded"), "demo_add", "add")
    assert own.content == "Error: quota exceeded"


async def test_a_command_line_given_as_the_command_is_refused_where_the_server_is_described(
    tmp_path: Path,
) -> None:
    """``StdioServer("python server.py")`` ran the whole text as one program's name, which
    failed only at the first use, as ``FileNotFoundError``. It is refused where it is described,
    saying how to split it; a program whose path holds a space is still run."""
    with pytest.raises(ValueError, match=r"is a command line: give the program and its argum"):
        StdioServer(f"{sys.executable} {STDIO_SCRIPT}")
    with pytest.raises(TypeError, match=r"env must be a mapping of variable names to values"):
        StdioServer(sys.executable, [str(STDIO_SCRIPT)], env=["DEBUG=1"])  # type: ignore[arg-type]
    spaced = tmp_path / "my tools" / "serve"
    spaced.parent.mkdir()
    spaced.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{STDIO_SCRIPT}"\n')
    spaced.chmod(0o755)
    async with MCPToolset(StdioServer(str(spaced)), tool_filter=["add"]) as toolset:
        assert (await call(toolset, "add", {"a": 1, "b": 2})).content == "3"


async def test_a_connection_that_fails_says_what_to_look_at(
    http_process: HTTPServerProcess,
) -> None:
    """A stdio server that ended before the handshake (its script missing, an import error)
    failed with a bare "Connection closed", and a URL without the path the server serves MCP at
    with a bare 404 Not Found: each now says where to look."""
    ended = MCPToolset(StdioServer(sys.executable, ["-c", "import sys; sys.exit(2)"]))
    with pytest.raises(ConnectionError, match="Connection closed") as caught:
        await ended.tools()
    assert str(caught.value).endswith(
        "; the server process ended, or closed its stdout, before answering: its stderr, shown "
        "above, may say why"
    )
    root = http_process.url.removesuffix("/mcp")
    with pytest.raises(ConnectionError, match="404") as caught:
        await MCPToolset(HTTPServer(root)).tools()
    assert str(caught.value).endswith(
        "; the URL has no path, and MCP servers serve at one, as a rule /mcp for streamable HTTP "
        "(HTTPServer) and /sse for SSE (SSEServer)"
    )
    with pytest.raises(ConnectionError, match="404") as caught:  # a path of its own: no guess
        await MCPToolset(HTTPServer(f"{root}/tools")).tools()
    assert "the URL has no path" not in str(caught.value)


async def test_two_stdio_servers_of_one_interpreter_are_told_apart_by_their_scripts() -> None:
    """Shown by the command alone, every ``python server.py`` was ``MCP server '.../python'``:
    two servers whose tools clash were named alike, as was a server that failed to start among
    several. The script is shown (a file or ``-m module``); the other arguments never are."""
    narrow = STDIO_SCRIPT.parent / "narrow_server.py"
    first = StdioServer(sys.executable, [str(STDIO_SCRIPT), "--api-key=sk-secret"])
    second = StdioServer(sys.executable, [str(narrow), "tools"])
    assert str(first) == f"{sys.executable} {STDIO_SCRIPT}"
    assert str(second) == f"{sys.executable} {narrow}"
    assert str(StdioServer(sys.executable, ["-m", "notes.server", "--token", "t"])) == (
        f"{sys.executable} -m notes.server"
    )
    assert str(StdioServer(sys.executable, ["sk-not-a-file"])) == sys.executable
    assert str(StdioServer(sys.executable, ["--api-key=sk-x", str(STDIO_SCRIPT)])) == (
        sys.executable
    )
    model = ScriptedModel(["never asked"])
    clashing = [MCPToolset(first, tool_filter=["add"]), MCPToolset(stdio(), tool_filter=["add"])]
    with pytest.raises(RunError, match="two tools are named 'add'") as caught:
        await Runner(ReActAgent("ops", model, tools=clashing)).invoke("add")
    assert f"MCP server '{sys.executable} {STDIO_SCRIPT}'" in str(caught.value)
    assert "sk-secret" not in str(caught.value)
    for toolset in clashing:
        await toolset.aclose()


async def test_a_filter_naming_the_prefixed_tool_is_refused_as_its_tools_are_listed() -> None:
    """``tool_filter`` takes the server's names, but the model (and every error it reads) shows
    the prefixed ones: a filter copying ``demo_add`` matched nothing, so the agent was silently
    offered no tools and the model told ``unknown tool 'demo_add'; available tools: none``. The
    listing refuses it, naming the server's name to use instead, and the agent fails at start."""
    async with MCPToolset(stdio(), tool_filter=["demo_add", "pid"], prefix="demo") as toolset:
        with pytest.raises(
            RuntimeError, match=r"tool_filter names tool\(s\) 'demo_add' \(the server's 'add'\)"
        ):
            await toolset.tools()
        model = ScriptedModel(["never asked"])
        with pytest.raises(RunError, match="tool_filter names"):
            await Runner(ReActAgent("ops", model, tools=[toolset])).invoke("add")
        assert model.calls == 0


async def test_a_filter_name_the_server_does_not_list_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with MCPToolset(stdio(), tool_filter=["add", "ad"]) as toolset:
        with caplog.at_level("WARNING", logger="adk.mcp"):
            assert await names(toolset) == {"add"}
    [record] = [r for r in caplog.records if "tool_filter" in r.getMessage()]
    assert "lists no tool named 'ad', which tool_filter names (it lists 'add'," in (
        record.getMessage()
    )


@pytest.mark.parametrize(
    ("transport", "version"),
    [
        ("stdio", LATEST_PROTOCOL_VERSION),
        ("stdio-legacy", "2025-11-25"),
        ("http", LATEST_PROTOCOL_VERSION),
    ],
)
async def test_an_mcp_tool_calls_span_carries_the_mcp_attributes(
    transport: str, version: str, http_process: HTTPServerProcess
) -> None:
    # The MCP conventions ask a client whose tool call a GenAI execute_tool span already traces to
    # add the MCP attributes to that span rather than start another: the method, the transport,
    # and for a URL server its address and port (never the URL, which may carry a token); and the
    # protocol version the session settled on (the server's, for a handshake-era server), which
    # was missing.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="c1")]), "5"])
    server = server_for(transport, http_process)
    async with MCPToolset(server, tool_filter=["add"]) as toolset:
        runner = Runner(ReActAgent("ops", model, tools=[toolset]), tracer_provider=provider)
        assert (await runner.invoke("add", run_id="conv-6")).text == "5"
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool add"]
    expected: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two integers.",
        "gen_ai.conversation.id": "conv-6",
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": version,
    }
    if transport.startswith("stdio"):
        expected["network.transport"] = "pipe"
    else:
        expected["network.transport"] = "tcp"
        expected["network.protocol.name"] = "http"
        expected["server.address"] = "127.0.0.1"
        expected["server.port"] = http_process.port
    assert dict(span.attributes or {}) == expected
    assert span.status.status_code == StatusCode.UNSET
    provider.shutdown()


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_mcp_servers_tool_call_carries_the_trace_context_of_its_span(
    transport: str, http_process: HTTPServerProcess
) -> None:
    # MCP's SEP-414 and the MCP conventions carry the caller's trace context in a request's
    # params._meta, so an instrumented server's spans join the run's trace under the call. The
    # mcp package injects the current context; the execute_tool span is current while the tool
    # runs, so what the server receives names that span, under a runner's own tracer provider
    # (the mcp package's span then records nothing and passes its parent's context on).
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    seen: list[str] = []

    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            seen.append(messages[-1].content)
            return Reply(text="ok")
        return Reply(tool_calls=[tool_call("trace_parent", {})])

    server = server_for(transport, http_process)
    async with MCPToolset(server, tool_filter=["trace_parent"]) as toolset:
        agent = ReActAgent("ops", ScriptedModel(reply), tools=[toolset])
        assert (await Runner(agent, tracer_provider=provider).invoke("go")).text == "ok"
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool trace_parent"]
    context = span.get_span_context()
    (traceparent,) = seen
    version, trace_id, span_id, _flags = traceparent.split("-")
    assert (version, trace_id, span_id) == (
        "00",
        format(context.trace_id, "032x"),
        format(context.span_id, "016x"),
    )
    provider.shutdown()


async def test_an_mcp_tool_registered_under_another_name_keeps_its_spans_mcp_attributes(
    http_process: HTTPServerProcess,
) -> None:
    """``Resources.add_tool(mcp_tool, name=...)``: the renamed tool hid the MCP tool's
    ``_span_attributes``, so its calls' spans lost every MCP attribute."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([Reply(tool_calls=[tool_call("plus", {"a": 2, "b": 3}, id="c1")]), "5"])
    async with MCPToolset(HTTPServer(http_process.url), tool_filter=["add"]) as toolset:
        (add,) = await toolset.tools()
        resources = Resources()
        resources.add_tool(add, name="plus")
        agent = ReActAgent("ops", model, tools=["plus"])
        runner = Runner(agent, resources=resources, tracer_provider=provider)
        assert (await runner.invoke("add")).text == "5"
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool plus"]
    attributes = dict(span.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["server.port"] == http_process.port
    provider.shutdown()


async def test_a_callbacks_pause_before_an_mcp_call_needing_approval(tmp_path: Path) -> None:
    # A runner's before_tool callback asks a person before every call, and the MCP tool then asks
    # for approval: each reads its own answer, from a fresh runner over the SQLite file (the
    # callback read the approval's True as its answer and stopped the call; the tool could have
    # read the callback's "go" as a decision).
    seen: list[Any] = []

    def desk(ctx: ToolContext, call: ToolCall) -> ToolResult | None:
        seen.append(None if ctx.resume is None else ctx.resume.data)
        if ctx.resume is None:
            raise Interrupt({"confirm": call.name})
        return None if ctx.resume.data == "go" else ToolResult.error("stopped")

    db = tmp_path / "cp.db"
    result = None
    for answer in (None, "go", True):
        model = ScriptedModel(
            lambda m: (
                m[-1].content
                if m[-1].role == "tool"
                else Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="c1")])
            )
        )
        async with (
            SQLiteCheckpointStore(db) as store,
            MCPToolset(stdio(), tool_filter=["add"], require_approval=["add"]) as toolset,
        ):
            agent = ReActAgent("ops", model, tools=[toolset])
            runner = Runner(agent, store, callbacks=[Callbacks(before_tool=desk)])
            if answer is None:
                result = await runner.invoke("add", checkpoint_id="ops-1")
                assert result.interrupt is not None
                assert result.interrupt.points[0].info == {"confirm": "add"}
            else:
                result = await runner.invoke_resume("ops-1", answer)
        if answer == "go":
            assert result.interrupt is not None
            assert result.interrupt.points[0].info["type"] == "approval"
    assert result is not None and result.interrupt is None and result.text == "5"
    assert seen == [None, "go", "go"]


async def test_a_denied_mcp_call_is_not_a_failed_tool_span() -> None:
    # An MCP tool's denial comes from the same decision as a function tool's: its execute_tool
    # span must say a person refused (an event), not that the tool failed (an error status).
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="c1")]), "ok"])
    async with MCPToolset(stdio(), tool_filter=["add"], require_approval=["add"]) as toolset:
        runner = Runner(ReActAgent("ops", model, tools=[toolset]), tracer_provider=provider)
        paused = await runner.invoke("add", run_id="conv-5")
        assert paused.checkpoint_id is not None
        exporter.clear()
        assert (await runner.invoke_resume(paused.checkpoint_id, "no")).text == "ok"
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool add"]
    assert span.status.status_code == StatusCode.UNSET
    assert [e.name for e in span.events] == ["adk.approval.denied"]
    assert "error.type" not in dict(span.attributes or {})
    provider.shutdown()


async def test_tools_needing_approval_pause_and_run_only_once_approved(
    http_process: HTTPServerProcess, tmp_path: Path
) -> None:
    # An MCP server's tools could not ask for a person's approval as @tool(require_approval=True)
    # does; a service had to wrap each one. require_approval names them (server names, as in
    # tool_filter); the pause and the decision are the function tool's, so a service resumes
    # both alike, from another runner over the same SQLite file.
    calls = [
        OpenAICall("demo_add", json.dumps({"a": 2, "b": 3}), "c1"),
        OpenAICall("demo_pid", "{}", "c2"),
    ]

    def service(store: SQLiteCheckpointStore, base_url: str) -> Runner:
        toolset = MCPToolset(
            HTTPServer(http_process.url),
            tool_filter=["add", "pid"],
            prefix="demo",
            require_approval=["add"],
        )
        model = wire_model(base_url)
        return Runner(ReActAgent("ops", model, tools=[toolset]), checkpoint_store=store)

    for decision, result in [
        ({"approved": True}, "5"),
        (
            {"approved": False, "reason": "not today"},
            "Error: the call to 'demo_add' was not approved: not today",
        ),
    ]:
        script = [OpenAIReply(tool_calls=calls), OpenAIReply(text="done")]
        db = tmp_path / f"{uuid.uuid4().hex}.db"
        async with OpenAIServer(script) as server:
            async with (
                SQLiteCheckpointStore(db) as store,
                service(store, server.base_url) as runner,
            ):
                paused = await runner.invoke("add 2 and 3")
            assert paused.interrupt is not None and paused.checkpoint_id is not None
            (point,) = paused.interrupt.points
            assert point.id == "agent:ops/tool:demo_add#c1"
            assert point.info == {
                "type": "approval",
                "tool": "demo_add",
                "arguments": {"a": 2, "b": 3},
                "tool_call_id": "c1",
            }
            assert [
                e.message.name for e in paused.events if e.message and e.message.role == "tool"
            ] == ["demo_pid"]

            async with (
                SQLiteCheckpointStore(db) as store,
                service(store, server.base_url) as runner,
            ):
                with pytest.raises(ValueError, match="is not a decision"):
                    await runner.invoke_resume(paused.checkpoint_id, {"approve": True})
                done = await runner.invoke_resume(paused.checkpoint_id, decision)
            assert done.text == "done"
            tool_results = {
                m["tool_call_id"]: m["content"]
                for m in server.bodies[-1]["messages"]
                if m["role"] == "tool"
            }
            assert tool_results["c1"] == result and tool_results["c2"].isdigit()

    with pytest.raises(TypeError, match="require_approval"):
        MCPToolset(HTTPServer(http_process.url), require_approval="add")


async def test_a_str_require_approval_is_refused_saying_a_bool_is_taken() -> None:
    """The OpenAI Agents SDK's hosted MCP tool takes require_approval="always" or "never": the
    refusal named only tool names and predicates, not the True a port wanted, nor the mapping of
    tool names to rules."""
    with pytest.raises(TypeError) as refused:
        MCPToolset(HTTPServer("http://127.0.0.1:9/mcp"), require_approval="always")
    assert str(refused.value) == (
        "require_approval must be True or False, a collection of tool names, a mapping of tool "
        "names to True, False or a function (ctx, arguments) -> bool, or a predicate of tool "
        "specs, not a str ('always')"
    )
    with pytest.raises(TypeError, match=r"^tool_filter must be a collection of tool names or a"):
        MCPToolset(HTTPServer("http://127.0.0.1:9/mcp"), tool_filter="add")


async def test_a_denial_holds_after_a_redeploy_stops_asking_for_approval(
    http_process: HTTPServerProcess, tmp_path: Path
) -> None:
    # A call paused for approval, then a redeploy took the tool out of require_approval before
    # the person's "no" came back: the call ran on the server and its result reached the model,
    # the denial ignored. A function tool that lost require_approval honours it; so does this.
    db = tmp_path / "checkpoints.db"

    def service(store: SQLiteCheckpointStore, base_url: str, approval: bool) -> Runner:
        toolset = MCPToolset(
            HTTPServer(http_process.url),
            tool_filter=["add"],
            require_approval=approval,
        )
        model = wire_model(base_url)
        return Runner(ReActAgent("ops", model, tools=[toolset]), checkpoint_store=store)

    script = [
        OpenAIReply(tool_calls=[OpenAICall("add", json.dumps({"a": 2, "b": 3}), "c1")]),
        OpenAIReply(text="done"),
    ]
    async with OpenAIServer(script) as server:
        async with SQLiteCheckpointStore(db) as store, service(store, server.base_url, True) as r:
            paused = await r.invoke("add 2 and 3")
        assert paused.checkpoint_id is not None
        async with SQLiteCheckpointStore(db) as store, service(store, server.base_url, False) as r:
            done = await r.invoke_resume(paused.checkpoint_id, {"approved": False, "reason": "no"})
    assert done.text == "done"
    (result,) = [m for m in server.bodies[-1]["messages"] if m["role"] == "tool"]
    assert result["content"] == "Error: the call to 'add' was not approved: no"


async def test_sse_transport(sse_process: HTTPServerProcess) -> None:
    async with MCPToolset(SSEServer(sse_process.url)) as toolset:
        assert (await call(toolset, "add", {"a": 3, "b": 4})).structured == {"result": 7}
        forecast = await call(toolset, "forecast", {"city": "Bergen"})
        assert forecast.structured["units"] == "celsius"
        (greet,) = [p for p in await toolset.prompts() if p.name == "greet"]
        assert await greet.render(name="Ola") == [
            Message.user("Write a cheerful greeting for Ola.")
        ]


async def test_servers_without_prompts_or_tools_offer_none() -> None:
    # Most servers declare only the tools capability; asking them for prompts would only get
    # "method not found", so a missing capability means an empty list, kept like any other.
    async with Resources() as resources:
        tools_only = resources.add_mcp("tools_only", narrow("tools"))
        assert await tools_only.prompts() == []
        assert tools_only._cached("prompts") == []  # white box: listed once, not per lookup
        assert await names(tools_only) == {"ping"}
        resources.add_prompt("hello", "Hi {name}")
        with pytest.raises(KeyError) as unknown:
            await resources.get_prompt("hell")
        assert str(unknown.value) == "\"no prompt named 'hell' (known: hello)\""

        prompts_only = resources.add_mcp("prompts_only", narrow("prompts"), prefix="p")
        assert await prompts_only.tools() == []
        (hello,) = await prompts_only.prompts()
        assert await hello.render() == [Message.user("Hi!")]
        assert (await run(await resources.get_tool("ping"))).content == "pong"


# -- list changes --------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", ["stdio-legacy", "http"])
async def test_tool_list_changes_are_picked_up_when_announced(
    transport: str, http_process: HTTPServerProcess
) -> None:
    """Handshake-era servers announce with a plain notification (stdio-legacy); 2026-07-28 servers
    only to a subscriptions/listen stream the client keeps open (http; the same code on stdio)."""
    quiet, loud = f"quiet_{uuid.uuid4().hex[:8]}", f"loud_{uuid.uuid4().hex[:8]}"
    async with MCPToolset(server_for(transport, http_process)) as toolset:
        assert loud not in await names(toolset)

        # A change nobody announces is not seen: the list is cached, not fetched per use.
        assert not (await call(toolset, "add_tool_silently", {"name": quiet})).is_error
        assert quiet not in await names(toolset)

        # An announced change makes the next use fetch the whole list again.
        assert not (await call(toolset, "add_tool", {"name": loud})).is_error
        listed = await eventually(lambda: names(toolset), lambda found: loud in found)
        assert quiet in listed
        assert (await call(toolset, loud, {"text": "echo"})).content == "echo"


# -- prompts and resources -----------------------------------------------------------------------
async def test_a_prompts_argument_or_a_uri_no_transport_can_carry_is_refused_keeping_the_session(
    shared: MCPToolset,
) -> None:
    # A lone surrogate cannot be encoded as UTF-8: sent, it ended the session (a prompt's render
    # then failed as a lost connection, MCPConnectionError, and the session opened again).
    pid = await server_pid(shared)
    sessions = shared._session.connections_opened
    (greet,) = [p for p in await shared.prompts() if p.name == "greet"]
    with pytest.raises(
        ValueError, match=r"prompt 'greet': argument 'name' holds '\\ud800', a lone"
    ):
        await greet.render(name="Ada \ud800")
    with pytest.raises(ValueError, match=r"uri holds '\\udc00', a lone surrogate"):
        await shared.read_resource("notes://\udc00")
    assert await server_pid(shared) == pid
    assert shared._session.connections_opened == sessions
    (note,) = await shared.read_resource("notes://monday")
    assert getattr(note, "text", None) == "note of monday"


async def test_prompts_are_listed_and_rendered_through_resources(shared: MCPToolset) -> None:
    resources = Resources()
    assert resources.add_mcp("demo", shared) is shared

    greet = await resources.get_prompt("greet")
    assert greet.description == "A greeting for someone."
    assert [(a.name, a.required) for a in greet.arguments] == [("name", True), ("mood", False)]  # type: ignore[attr-defined]
    assert await greet.render(name="Ada") == [Message.user("Write a cheerful greeting for Ada.")]
    rendered = await greet.render(name="Ada", mood="grumpy")
    assert rendered == [Message.user("Write a grumpy greeting for Ada.")]
    with pytest.raises(ValueError, match="prompt 'greet' needs argument"):
        await greet.render(mood="grumpy")

    # A prompt's image is a part of its message, as a tool's is, with its placeholder as text.
    chart = await (await resources.get_prompt("explain_chart")).render()
    assert chart == [
        Message.user("What does this chart show?"),
        Message.user(
            "[image: image/png]",
            parts=[ImagePart(mime_type="image/png", data=b"\x89PNG\r\n\x1a\n")],
        ),
    ]

    review = await (await resources.get_prompt("review")).render(code="x = 1")
    assert [(m.role, m.content) for m in review] == [
        (Role.USER, "Review this code:\nx = 1"),
        (Role.ASSISTANT, "Sure. What should I focus on?"),
        (Role.USER, "Correctness first."),
    ]

    add = await resources.get_tool("add")
    assert (await run(add, {"a": 20, "b": 22})).content == "42"
    assert [t.spec.name for t in await resources.tools(["pid", "add"])] == ["pid", "add"]
    with pytest.raises(KeyError, match="no prompt named 'nope'"):
        await resources.get_prompt("nope")


async def test_a_prompts_assistant_image_is_kept_as_a_part_and_sent_as_its_placeholder(
    shared: MCPToolset,
) -> None:
    """A rendered prompt's assistant message keeps its image as a part, as a sampling request's
    does (it was dropped: the message had the placeholder text alone), and ``OpenAIChatModel``
    sends that message its text with the placeholder, as neither API takes parts there."""
    resources = Resources()
    resources.add_mcp("demo", shared)
    rendered = await (await resources.get_prompt("redraw")).render()
    assert rendered == [
        Message.user("Draw a chart."),
        Message(
            role=Role.ASSISTANT,
            content="[image: image/gif]",
            parts=(ImagePart(mime_type="image/gif", data=b"GIF89a"),),
        ),
        Message.user("Make it blue."),
    ]
    async with OpenAIServer([OpenAIReply(text="Blue now.")]) as wire:
        async with wire_model(wire, parts="send") as model:
            await model.generate(rendered)
        (request,) = wire.requests
    assert request.body["messages"] == [
        {"role": "user", "content": "Draw a chart."},
        {"role": "assistant", "content": "[image: image/gif]"},
        {"role": "user", "content": "Make it blue."},
    ]


async def test_resources_name_tools_and_prompts_with_prefixes(
    http_process: HTTPServerProcess,
) -> None:
    async with Resources() as resources:
        resources.add_mcp("plain", HTTPServer(http_process.url))
        resources.add_mcp("other", HTTPServer(http_process.url), prefix="b")
        prefixed = await resources.get_tool("b_add")
        assert prefixed.spec.name == "b_add"
        assert (await run(prefixed, {"a": 2, "b": 3})).content == "5"
        assert (await resources.get_tool("add")).spec.name == "add"
        assert (await resources.get_prompt("b_greet")).name == "b_greet"
        assert resources.get_mcp("other").prefix == "b"
        with pytest.raises(KeyError, match="no tool named 'nope'"):
            await resources.get_tool("nope")
        with pytest.raises(ValueError, match="already registered"):
            resources.add_mcp("plain", HTTPServer(http_process.url))


async def test_resources_refuse_name_clashes(http_process: HTTPServerProcess) -> None:
    async with Resources() as resources:
        resources.add_mcp("one", HTTPServer(http_process.url))
        resources.add_mcp("two", HTTPServer(http_process.url))
        with pytest.raises(ValueError, match="offered by MCP servers 'one' and 'two'"):
            await resources.get_tool("add")
        with pytest.raises(ValueError, match="offered by MCP servers 'one' and 'two'"):
            await resources.get_prompt("greet")

    async with Resources() as resources:
        resources.add_tool(_Shout(), name="add")
        resources.add_mcp("one", HTTPServer(http_process.url))
        with pytest.raises(ValueError, match="'add' is offered by MCP server 'one' and also"):
            await resources.get_tool("pid")


async def test_an_unreachable_server_does_not_hide_the_others(
    http_process: HTTPServerProcess,
) -> None:
    async with Resources() as resources:
        resources.add_mcp("down", HTTPServer(f"http://127.0.0.1:{closed_port()}/mcp"))
        resources.add_mcp("up", HTTPServer(http_process.url))
        assert (await resources.get_tool("add")).spec.name == "add"
        with pytest.raises(KeyError, match=r"could not be asked: down: could not connect"):
            await resources.get_tool("nope")


async def test_a_failing_server_does_not_delay_lookups_found_elsewhere(
    tmp_path: Path, http_process: HTTPServerProcess
) -> None:
    go, refuse, pid_file = tmp_path / "go", tmp_path / "refuse", tmp_path / "pids"
    env = {
        "DEMO_PID_FILE": str(pid_file),
        "DEMO_STALL_UNTIL_FILE": str(go),  # starts stall until `go` exists...
        "DEMO_REFUSE_START_FILE": str(refuse),  # ...then exit at once if `refuse` exists
    }
    async with Resources() as resources:
        # The failing server has no prefix, so it may offer any name and every lookup asks it
        # (one with a prefix is not asked for names without it, as up's here).
        resources.add_mcp("up", HTTPServer(http_process.url), prefix="u")
        resources.add_mcp("down", MCPToolset(stdio(env=env), connect_timeout=60))

        # A server never heard from is waited for (its tools could clash): here it fails at once.
        go.touch()
        refuse.touch()
        assert (await resources.get_tool("u_add")).spec.name == "u_add"
        assert len(starts(pid_file)) == 1

        # Now it stalls while starting. Having failed last time, it is not waited for when the
        # names are found elsewhere (else each lookup would take the 60s connect_timeout)...
        go.unlink()
        refuse.unlink()
        assert (await asyncio.wait_for(resources.get_tool("u_add"), 20)).spec.name == "u_add"
        await eventually(lambda: asyncio.sleep(0, starts(pid_file)), lambda pids: len(pids) == 2)
        tools = await asyncio.wait_for(resources.tools(["u_pid", "u_add"]), 20)
        assert [tool.spec.name for tool in tools] == ["u_pid", "u_add"]
        assert len(starts(pid_file)) == 2  # ...and lookups share its one retry under way

        # A name found nowhere else waits for that retry, which succeeds once the server answers.
        go.touch()
        add = await asyncio.wait_for(resources.get_tool("add"), 30)
        assert (await run(add, {"a": 1, "b": 2})).content == "3"
        assert len(starts(pid_file)) == 2


async def test_a_lookup_starts_only_the_servers_whose_prefix_the_name_has(tmp_path: Path) -> None:
    """The first lookup of a tool registered in code started every MCP server to see whether it
    offered the name too, and a lookup of one server's tool started the others: a server with a
    prefix offers only names that start with it, so it is asked for those alone."""
    files, git = tmp_path / "files", tmp_path / "git"
    async with Resources() as resources:
        resources.add_tool(_Shout())
        resources.add_prompt("hello", "Hello {name}")
        resources.add_mcp("files", stdio(env={"DEMO_PID_FILE": str(files)}), prefix="files")
        # A prefix model APIs refuse in a tool name: its tools are offered as git_v2_<name>.
        resources.add_mcp("git", stdio(env={"DEMO_PID_FILE": str(git)}), prefix="git.v2")
        assert (await resources.get_tool("shout")).spec.name == "shout"
        assert [tool.spec.name for tool in await resources.tools(["shout"])] == ["shout"]
        assert (await resources.get_prompt("hello")).name == "hello"
        with pytest.raises(KeyError, match=r"not asked, .*'files' \(files_\.\.\.\)"):
            await resources.get_tool("nope")
        assert starts(files) == [] and starts(git) == []

        found = await resources.tools(["shout", "git_v2_add"])
        assert [tool.spec.name for tool in found] == ["shout", "git_v2_add"]
        assert (await run(found[1], {"a": 2, "b": 3})).content == "5"
        assert (await resources.get_prompt("git.v2_greet")).name == "git.v2_greet"
        assert len(starts(git)) == 1 and starts(files) == []
        with pytest.raises(KeyError, match="no tool named 'git_v2_nope'"):
            await resources.get_tool("git_v2_nope")
        assert starts(files) == []

        resources.add_tool(_Shout(), name="files_add")  # a name the files server offers too
        with pytest.raises(ValueError, match="'files_add' is offered by MCP server 'files'"):
            await resources.get_tool("files_add")
        assert len(starts(files)) == 1


async def test_a_lookup_starts_no_server_whose_tool_filter_names_other_tools(
    tmp_path: Path,
) -> None:
    """A server without a prefix was started at every first lookup, of a tool kept in code too,
    even when its tool_filter of names said which tools it could offer: those names (made fit for
    model APIs as its listing makes them) are all a lookup needs to ask it for."""
    calc, files = tmp_path / "calc", tmp_path / "files"
    async with Resources() as resources:
        resources.add_tool(_Shout())
        add_only = MCPToolset(stdio(env={"DEMO_PID_FILE": str(calc)}), tool_filter=["add"])
        resources.add_mcp("calc", add_only)
        # Both offered: "files.read" as "files_read" cut and hashed, the plain name being taken.
        readers = MCPToolset(
            stdio(env={"DEMO_PID_FILE": str(files)}), tool_filter=["files.read", "files_read"]
        )
        resources.add_mcp("files", readers)
        assert (await resources.get_tool("shout")).spec.name == "shout"
        assert [tool.spec.name for tool in await resources.tools(["shout"])] == ["shout"]
        with pytest.raises(KeyError, match=r"tool_filter names other tools: 'calc', 'files'"):
            await resources.get_tool("nope")
        assert starts(calc) == [] and starts(files) == []

        assert (await run(await resources.get_tool("add"), {"a": 2, "b": 3})).content == "5"
        assert len(starts(calc)) == 1 and starts(files) == []
        dotted = "files_read_" + hashlib.sha256(b"files.read").hexdigest()[:8]
        assert (await resources.get_tool(dotted)).spec.name == dotted
        assert len(starts(files)) == 1

    async with Resources() as resources:
        # A name the filter names is still checked against the server: no silent hiding.
        resources.add_tool(_Shout(), name="add")
        resources.add_mcp("calc", MCPToolset(stdio(), tool_filter=["add"]))
        with pytest.raises(ValueError, match="'add' is offered by MCP server 'calc'"):
            await resources.get_tool("add")


class _Shout:
    """A plain in-code tool."""

    spec = ToolSpec(name="shout", description="Upper-cases text.")

    async def run(self, arguments: str, ctx: Any) -> str:
        text: str = json.loads(arguments)["text"]
        return text.upper()


class _Model:
    model_name = "fake"

    def __init__(self) -> None:
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


async def test_resources_hold_models_tools_and_template_prompts() -> None:
    resources = Resources()
    model = _Model()
    resources.add_model("main", model)
    assert resources.get_model("main") is model
    with pytest.raises(KeyError, match="no model named 'other' \\(known: main\\)"):
        resources.get_model("other")

    resources.add_tool(_Shout())
    resources.add_tool(_Shout(), name="yell")
    yell = await resources.get_tool("yell")
    assert yell.spec.name == "yell"
    assert yell.spec.description == "Upper-cases text."
    assert (await run(yell, {"text": "hi"})).content == "HI"
    with pytest.raises(ValueError, match="already registered"):
        resources.add_tool(_Shout())
    with pytest.raises(TypeError, match="add_tool needs a Tool"):
        resources.add_tool(lambda: None)  # type: ignore[arg-type]

    resources.add_prompt("hello", "Greet {name} warmly; keep {{braces}} as they are.")
    hello = await resources.get_prompt("hello")
    assert await hello.render(name="Kari") == [
        Message.user("Greet Kari warmly; keep {braces} as they are.")
    ]
    with pytest.raises(ValueError, match="prompt 'hello' needs argument\\(s\\): name"):
        await hello.render()
    resources.add_prompt(
        "persona", [Message.system("You are {role}."), Message.user("{question}")], "Role play."
    )
    persona = await (await resources.get_prompt("persona")).render(
        role="a {pirate}", question="Where?"
    )
    assert [(m.role, m.content) for m in persona] == [
        (Role.SYSTEM, "You are a {pirate}."),  # values are not expanded again
        (Role.USER, "Where?"),
    ]
    with pytest.raises(TypeError, match="add_prompt needs"):
        resources.add_prompt("bad", 42)  # type: ignore[arg-type]

    await resources.aclose()
    assert model.closed == 1


# -- dropped connections -------------------------------------------------------------------------
async def test_stdio_server_dying_mid_call_is_an_error_then_the_next_call_reconnects(
    tmp_path: Path,
) -> None:
    refuse = tmp_path / "refuse-to-start"
    # A secret passed as an argument (the demo server ignores it) never reaches the model.
    secret = "--api-key=sk-arg-secret"
    server = StdioServer(
        sys.executable, [str(STDIO_SCRIPT), secret], env={"DEMO_REFUSE_START_FILE": str(refuse)}
    )
    async with MCPToolset(server) as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        first = await server_pid(toolset)
        died = await run(tools["die"])
        assert died.is_error
        assert "lost while tool 'die' was running" in died.content
        assert "reconnect on the next call" in died.content
        # Named by its command and script (the command alone named every ``python x.py``
        # alike), never by its other arguments.
        shown = f"{sys.executable} {STDIO_SCRIPT}"
        assert f"MCP server '{shown}'" in died.content and "sk-arg" not in died.content

        second = await server_pid(toolset)  # reconnected: a new server process
        assert second != first
        assert not pid_exists(first)

        # If the server cannot come back, the one reconnect attempt fails with a clear error...
        refuse.touch()
        await run(tools["die"])
        down = await run(tools["pid"])
        assert down.is_error
        assert down.content.startswith(
            f"Error: tool 'pid' is unavailable: could not connect to MCP server '{shown}'"
        )
        assert "sk-arg" not in down.content

        # ...and a later call, once it can, reconnects again.
        refuse.unlink()
        assert await server_pid(toolset) not in (first, second)


async def test_http_server_dying_mid_call_then_reconnect_fails_clearly_then_recovers() -> None:
    process = HTTPServerProcess()
    await asyncio.to_thread(process.start)
    try:
        async with MCPToolset(HTTPServer(process.url)) as toolset:
            pid_tool = {tool.spec.name: tool for tool in await toolset.tools()}["pid"]
            first = await server_pid(toolset)
            died = await call(toolset, "die")
            assert died.is_error
            assert "lost while tool 'die' was running" in died.content
            await asyncio.to_thread(process.wait)

            down = await run(pid_tool)
            assert down.is_error  # the one reconnect attempt failed: a clear error
            assert f"could not connect to MCP server '{process.url}'" in down.content

            await asyncio.to_thread(process.start)  # same port
            assert await server_pid(toolset) not in (first, 0)
    finally:
        process.stop()


async def test_stateful_http_session_lost_to_a_restart_is_renewed() -> None:
    process = HTTPServerProcess(legacy=True)  # handshake era: the server keeps session state
    await asyncio.to_thread(process.start)
    try:
        async with MCPToolset(HTTPServer(process.url)) as toolset:
            first = await server_pid(toolset)
            await asyncio.to_thread(process.kill)
            await asyncio.to_thread(process.start)
            assert await server_pid(toolset) != first
    finally:
        process.stop()


@pytest.mark.parametrize("style", ["express", "text", "code"])
async def test_a_session_refused_the_way_other_servers_do_is_renewed(style: str) -> None:
    """Servers not built on the ``mcp`` package refuse a session they lost (a restart) with a 400
    or with another error code than ``mcp``'s (tests/mcp_servers/sessions.py). The request never
    reached a tool, so it is sent again on a new session, for calls and listings alike; before,
    every later use failed with the server's refusal until the toolset was closed."""
    process = HTTPServerProcess(legacy=True, sessions=style)
    await asyncio.to_thread(process.start)
    try:
        async with MCPToolset(HTTPServer(process.url)) as toolset:
            first = await server_pid(toolset)
            opened = toolset._session.connections_opened
            await asyncio.to_thread(process.kill)
            await asyncio.to_thread(process.start)
            second = await server_pid(toolset)
            assert second != first
            assert toolset._session.connections_opened == opened + 1

            await asyncio.to_thread(process.kill)
            await asyncio.to_thread(process.start)
            toolset._session.tools_epoch += 1  # (white box) the next use lists the tools again
            assert "pid" in await names(toolset)
            assert await server_pid(toolset) not in (first, second)
    finally:
        process.stop()


async def test_http_server_gone_while_idle_is_reconnected_before_the_call_fails() -> None:
    # The call's request could not even be sent (connection refused), so it is safe to try it
    # on a new session at once: the error says the server is unreachable, not that the call was
    # interrupted, and credentials in the URL stay hidden.
    process = HTTPServerProcess()
    await asyncio.to_thread(process.start)
    try:
        secret = f"http://alice:s3cret-pw@127.0.0.1:{process.port}/mcp?api_key=sk-live-123"
        async with MCPToolset(HTTPServer(secret)) as toolset:
            pid_tool = {tool.spec.name: tool for tool in await toolset.tools()}["pid"]
            first = int((await run(pid_tool)).content)
            opened = toolset._session.connections_opened
            await asyncio.to_thread(process.kill)

            down = await run(pid_tool)
            assert down.is_error
            shown = f"http://***@127.0.0.1:{process.port}/mcp?api_key=***"
            assert down.content.startswith(
                f"Error: tool 'pid' is unavailable: could not connect to MCP server '{shown}'"
            )
            assert "s3cret" not in down.content and "sk-live" not in down.content

            await asyncio.to_thread(process.start)  # same port
            assert int((await run(pid_tool)).content) not in (first, 0)
            assert toolset._session.connections_opened == opened + 1
    finally:
        process.stop()


async def test_an_http_error_is_named_with_its_status_and_what_the_server_said() -> None:
    """A server refusing the token (or failing otherwise) with a body that is not a JSON-RPC error
    was reported as "Server returned an error response", the mcp client's stand-in: neither the
    status nor the server's words, so an expired token looked like a broken server."""
    process = HTTPServerProcess(token="s3cret-token")
    await asyncio.to_thread(process.start)
    try:
        for headers in (None, {"Authorization": "Bearer expired"}):
            toolset = MCPToolset(HTTPServer(process.url, headers=headers))
            with pytest.raises(ConnectionError) as caught:
                await toolset.tools()
            assert "HTTP 401 Unauthorized" in str(caught.value)
            assert "The access token is missing or expired" in str(caught.value)
            assert "s3cret" not in str(caught.value)
        good = {"Authorization": "Bearer s3cret-token"}
        async with MCPToolset(HTTPServer(process.url, headers=good)) as toolset:
            assert (await call(toolset, "add", {"a": 1, "b": 2})).content == "3"
    finally:
        process.stop()


async def test_credentials_in_server_urls_are_never_shown() -> None:
    port = closed_port()
    url = f"https://bob:hunter2@127.0.0.1:{port}/mcp?token=sk-live-9&region=eu#frag"
    shown = f"https://***@127.0.0.1:{port}/mcp?token=***&region=***#***"
    http = HTTPServer(url, headers={"Authorization": "Bearer sk-head"})
    assert http.url == url  # kept as given, for connecting
    assert str(http) == shown
    assert repr(http) == f"HTTPServer(url={shown!r}, timeout=30.0)"
    assert str(SSEServer("http://u:pw@h/sse?k=v")) == "http://***@h/sse?k=***"
    assert str(HTTPServer("http://127.0.0.1:8000/mcp")) == "http://127.0.0.1:8000/mcp"
    stdio_server = StdioServer("npx", ["-y", "server", "--token", "sk-arg"], env={"K": "sk-env"})
    assert "sk-env" not in repr(stdio_server)
    assert str(stdio_server) == "npx"  # what error texts show: args may hold a secret too
    assert "'sk-arg'" in repr(stdio_server)  # the developer's view keeps them

    toolset = MCPToolset(HTTPServer(url.replace("https", "http"), timeout=5))
    assert "hunter2" not in repr(toolset) and "sk-live" not in repr(toolset)
    with pytest.raises(ConnectionError) as failed:
        await toolset.tools()
    assert "hunter2" not in str(failed.value) and "sk-live" not in str(failed.value)
    assert "http://***@127.0.0.1" in str(failed.value)

    async with Resources() as resources:
        resources.add_mcp("remote", toolset)
        with pytest.raises(KeyError) as unknown:
            await resources.get_tool("add")
        assert "could not be asked: remote" in str(unknown.value)
        assert "hunter2" not in str(unknown.value) and "sk-live" not in str(unknown.value)
    with pytest.raises(ValueError) as invalid:
        HTTPServer("ftp://carol:pw2@host/mcp")
    assert "pw2" not in str(invalid.value)


@pytest.mark.parametrize("kind", [HTTPServer, SSEServer])
@pytest.mark.parametrize(
    "value",
    ["Bearer sk-live-1\n", " Bearer sk-live-1", "Bearer sk-live-1\r\nX: y", "Bearer sk-live\x001"],
)
async def test_a_header_value_http_refuses_is_an_error_that_does_not_show_it(
    kind: type[HTTPServer | SSEServer], value: str
) -> None:
    """The HTTP client would refuse it only when connecting, quoting the value in the error that
    becomes a tool error the model reads (a token read from a file keeps its newline)."""
    with pytest.raises(ValueError, match=r"header 'Authorization' has a value HTTP") as refused:
        kind("http://127.0.0.1:1/mcp", headers={"Authorization": value})
    assert "Bearer" not in str(refused.value) and "sk-live" not in str(refused.value)


async def test_header_names_and_non_str_values_are_refused_and_good_headers_kept() -> None:
    with pytest.raises(ValueError, match="header name 'X Key' is not a valid HTTP header name"):
        HTTPServer("http://h/mcp", headers={"X Key": "v"})
    with pytest.raises(TypeError, match="header 'X-Key' must have a str value, got int"):
        HTTPServer("http://h/mcp", headers={"X-Key": 3})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="non-ASCII"):
        SSEServer("http://h/sse", headers={"X-Key": "clé"})
    good = {"Authorization": "Bearer a.b-c_d~e+f/g=", "X-Empty": "", "X-Inner": "a \t b"}
    assert HTTPServer("http://h/mcp", headers=good).headers == good


# -- lifecycle -----------------------------------------------------------------------------------
async def test_nothing_starts_before_first_use_and_failures_name_the_server(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "started"
    # Not an MCP server: it leaves a mark and exits.
    script = f"open({str(marker)!r}, 'w').close()"
    toolset = MCPToolset(StdioServer(sys.executable, ["-c", script]), connect_timeout=10)
    await asyncio.sleep(0.05)
    assert not marker.exists()
    with pytest.raises(ConnectionError, match="could not connect to MCP server"):
        await toolset.tools()
    assert marker.exists()

    missing = tmp_path / "no-such-server"
    with pytest.raises(ConnectionError, match="no-such-server"):
        await MCPToolset(StdioServer(str(missing))).tools()

    url = f"http://127.0.0.1:{closed_port()}/mcp"
    toolset = MCPToolset(HTTPServer(url))
    with pytest.raises(ConnectionError, match=f"could not connect to MCP server '{url}'"):
        await toolset.prompts()
    assert session_tasks(url) == []  # a failed connect leaves nothing running


async def test_a_server_that_cannot_be_used_is_one_error_naming_it_and_what_failed(
    tmp_path: Path,
) -> None:
    """A server down when a run starts: the service catches one type, ``MCPConnectionError`` (a
    ``ConnectionError``, as before), whose ``server`` is the description given and ``stage``
    says what failed: a program not found or a port nothing listens on (``connect``), a
    process that ended before answering (``handshake``); in a run, the ``RunError``'s cause and
    its ``error.type``. Nothing is left running. Before, each was a bare ``ConnectionError``
    whose text alone told them apart."""
    missing_program = StdioServer(str(tmp_path / "no-such-server"))
    missing_script = StdioServer(sys.executable, [str(tmp_path / "gone.py")])
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    closed = HTTPServer(url)
    for server, stage, says in [
        (missing_program, "connect", "it could not be started or reached"),
        (missing_script, "handshake", "the MCP handshake failed"),
        (closed, "connect", "it could not be started or reached"),
    ]:
        toolset = MCPToolset(server, connect_timeout=10)
        with pytest.raises(MCPConnectionError) as raised:
            await toolset.tools()
        error = raised.value
        assert isinstance(error, ConnectionError)
        assert (error.server, error.stage) == (server, stage)
        assert str(error).startswith(f"could not connect to MCP server '{server}' ({says}): ")
        model = ScriptedModel(["never asked"])
        with pytest.raises(RunError) as failed:
            await Runner(ReActAgent("a", model, tools=[toolset])).invoke("go")
        assert isinstance(failed.value.__cause__, MCPConnectionError), failed.value.__cause__
        assert failed.value.error.type == "MCPConnectionError"
        assert model.requests == []
        await toolset.aclose()
    assert session_tasks(url) == []  # a failed connect leaves nothing running


async def test_an_optional_toolset_whose_server_is_down_leaves_the_agent_its_other_tools(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``optional=True``: a server that cannot be used is logged (an ``adk.mcp`` warning naming
    it and why) and its tools are not offered, so the agent runs with its other tools, where the
    run failed; a server that comes back is used again (the next run tries again); a toolset not
    marked optional still fails the run."""
    process = HTTPServerProcess()
    process.reserve_port()  # down, until started on it
    toolset = MCPToolset(HTTPServer(process.url), optional=True)

    def note(text: str) -> str:
        """Keep a note."""
        return f"noted {text}"

    model = ScriptedModel([Reply(tool_calls=[tool_call("note", {"text": "hi"})]), "done"])
    with caplog.at_level("WARNING", logger="adk.mcp"):
        result = await Runner(ReActAgent("a", model, tools=[toolset, note])).invoke("go")
    assert result.text == "done"
    assert [spec.name for spec in model.requests[0].tools] == ["note"]
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
    assert warning.startswith(f"could not connect to MCP server '{process.url}' (it could not")
    assert warning.endswith("; its tools are not offered (optional=True)")
    await asyncio.to_thread(process.start)
    try:
        assert "add" in await names(toolset)  # back: offered again
        await toolset.aclose()
    finally:
        await asyncio.to_thread(process.stop)
    with pytest.raises(TypeError, match="optional must be True or False"):
        MCPToolset(HTTPServer(process.url), optional="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_optional_servers_listing_that_times_out_leaves_its_tools_out(
    transport: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server whose handshake answers but whose listing does not (a backend it asks is down)
    cannot be used, as one whose handshake is not answered: ``MCPConnectionError`` stage
    ``"list"``, its ``TimeoutError`` the cause. So an ``optional=True`` toolset leaves its tools
    out with the warning and the agent runs with its others, where the listing's bare
    ``TimeoutError`` failed the run; the server answering again is used again; a toolset not
    optional still fails."""
    # The server leaves its first listings unanswered: the optional toolset's, then the strict
    # one's (over stdio each has a process of its own; over HTTP they share one).
    process: HTTPServerProcess | None = None
    if transport == "stdio":
        server: StdioServer | HTTPServer = stdio(env={"DEMO_STALL_LISTINGS": "1"})
    else:
        monkeypatch.setenv("DEMO_STALL_LISTINGS", "2")  # the server process's
        process = HTTPServerProcess()
        await asyncio.to_thread(process.start)
        server = HTTPServer(process.url)
    try:
        toolset = MCPToolset(server, call_timeout=1, optional=True)

        def note(text: str) -> str:
            """Keep a note."""
            return f"noted {text}"

        model = ScriptedModel([Reply(tool_calls=[tool_call("note", {"text": "hi"})]), "done"])
        with caplog.at_level("WARNING", logger="adk.mcp"):
            result = await Runner(ReActAgent("a", model, tools=[toolset, note])).invoke("go")
        assert result.text == "done"
        assert [spec.name for spec in model.requests[0].tools] == ["note"]
        (warning,) = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
        assert warning == (
            f"MCP server '{server}' did not answer within 1s while listing its tools; its tools "
            "are not offered (optional=True)"
        )
        strict = MCPToolset(server, call_timeout=1)
        with pytest.raises(MCPConnectionError) as caught:
            await strict.tools()
        assert caught.value.stage == "list" and caught.value.server == server
        assert isinstance(caught.value.__cause__, TimeoutError)
        await strict.aclose()
        assert "add" in await names(toolset)  # answering again: offered again
        await toolset.aclose()
    finally:
        if process is not None:
            await asyncio.to_thread(process.stop)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_lookup_of_an_optional_servers_tool_while_it_is_down_says_the_server_is_down(
    transport: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``Resources.get_tool`` of a tool of an ``optional=True`` server that cannot be used said
    only "no tool named 'add' (known: none)", as if the server did not offer it: it names the
    server, as error texts show it (credentials masked), and why it could not be asked, as for a
    server not optional. The server back, the tool is found."""
    refuse = tmp_path / "refuse"
    process = HTTPServerProcess()
    if transport == "stdio":
        refuse.touch()  # the server exits at once
        server: StdioServer | HTTPServer = stdio(env={"DEMO_REFUSE_START_FILE": str(refuse)})
        shown = str(server)
    else:
        port = process.reserve_port()  # down, until started on it
        server = HTTPServer(f"http://alice:s3cret-pw@127.0.0.1:{port}/mcp?api_key=sk-live-123")
        shown = f"http://***@127.0.0.1:{port}/mcp?api_key=***"
    resources = Resources()
    resources.add_mcp("notes", MCPToolset(server, optional=True))
    try:
        for _ in range(2):  # the failing server retried, or not waited for: the same words
            with pytest.raises(KeyError) as caught:
                await resources.get_tool("add")
            text = caught.value.args[0]
            assert text.startswith(
                "no tool named 'add'; MCP servers that could not be asked: notes: could not "
                f"connect to MCP server '{shown}' ("
            ), text
            assert "s3cret" not in text and "sk-live" not in text
        if transport == "stdio":
            refuse.unlink()
        else:
            await asyncio.to_thread(process.start)  # the same port
        assert (await resources.get_tool("add")).spec.name == "add"
    finally:
        await resources.aclose()
        await asyncio.to_thread(process.stop)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_servers_bad_tools_are_warned_about_once_for_each_listing(
    transport: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool left out (a schema that is no object schema) and a name listed twice are warned
    about once for each distinct listing of the server, not on every reading of it: a runner
    made and closed per request reads the listing anew on each connection, and the same lines
    were logged on every run. A listing that changed (a tool added) warns again, once; the first
    listing, read again, does not."""
    process: HTTPServerProcess | None = None
    if transport == "stdio":
        server: StdioServer | HTTPServer = stdio(env={"DEMO_BAD_TOOLS": "1"})
    else:
        monkeypatch.setenv("DEMO_BAD_TOOLS", "1")  # the server process's
        process = HTTPServerProcess()
        await asyncio.to_thread(process.start)
        server = HTTPServer(process.url)
    toolset = MCPToolset(server, call_timeout=15)

    def warned() -> list[str]:
        said = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
        return [
            "left out" if "leaves out, its tool 'string_schema'" in text else "twice"
            for text in said
            if "leaves out" in text or "lists 2 tools named 'add', which differ" in text
        ]

    async def request(*replies: str | Reply) -> None:
        """A run of a runner made for it and closed after it, as a service may do."""
        model = ScriptedModel([*replies, "done"])
        async with Runner(ReActAgent("a", model, tools=[toolset])) as runner:
            assert (await runner.invoke("go")).text == "done"

    try:
        with caplog.at_level("WARNING", logger="adk.mcp"):
            await request()
            assert sorted(warned()) == ["left out", "twice"]
            await request()
            await request()
            assert sorted(warned()) == ["left out", "twice"]  # the same listing: no more
            # The server's listing changes (a tool added), announced: read again in the run.
            added = Reply(tool_calls=[tool_call("add_tool", {"name": "extra"})])
            model = ScriptedModel([added, "done", "done"])
            async with Runner(ReActAgent("a", model, tools=[toolset])) as runner:
                assert (await runner.invoke("go")).text == "done"
                await eventually(lambda: names(toolset), lambda listed: "extra" in listed)
                assert (await runner.invoke("go")).text == "done"
            assert sorted(warned()) == ["left out", "left out", "twice", "twice"]
            await request()  # stdio: a new process, its first listing; HTTP: the changed one
            assert sorted(warned()) == ["left out", "left out", "twice", "twice"]
    finally:
        await toolset.aclose()
        if process is not None:
            await asyncio.to_thread(process.stop)


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_names_the_server_does_not_list_are_warned_about_once_for_each_listing(
    transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``tool_filter`` or ``require_approval`` name the server does not list is warned about
    once for each distinct listing, as a bad tool is (``ListingWarnings``): the same two lines
    were logged on every reading of an unchanged listing (each runner made per request, each
    reconnect). A listing that changed (a tool added) warns again, once."""
    process: HTTPServerProcess | None = None
    if transport == "stdio":
        server: StdioServer | HTTPServer = stdio()
    else:
        process = HTTPServerProcess()
        await asyncio.to_thread(process.start)
        server = HTTPServer(process.url)
    toolset = MCPToolset(
        server, tool_filter=["add", "add_tool", "gone"], require_approval=["absent"]
    )

    def warned() -> list[str]:
        said = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
        return sorted(
            "filter" if "which tool_filter names" in text else "approval"
            for text in said
            if "lists no tool named 'gone', which tool_filter names" in text
            or "lists no tool named 'absent', which require_approval names" in text
        )

    async def request() -> None:
        """A run of a runner made for it and closed after it, as a service may do."""
        async with Runner(ReActAgent("a", ScriptedModel(["done"]), tools=[toolset])) as runner:
            assert (await runner.invoke("go")).text == "done"

    try:
        with caplog.at_level("WARNING", logger="adk.mcp"):
            await request()
            assert warned() == ["approval", "filter"]
            await request()
            await request()
            assert warned() == ["approval", "filter"]  # the same listing: no more
            # The server's listing changes (a tool added), announced: read again in the run.
            added = Reply(tool_calls=[tool_call("add_tool", {"name": "extra"})])
            model = ScriptedModel([added, "done", "done"])
            async with Runner(ReActAgent("a", model, tools=[toolset])) as runner:
                assert (await runner.invoke("go")).text == "done"
                await eventually(toolset.tools, lambda _: len(warned()) > 2)  # read anew
                assert (await runner.invoke("go")).text == "done"
            assert warned() == ["approval", "approval", "filter", "filter"]
            await request()  # stdio: a new process, its first listing; HTTP: the changed one
            assert warned() == ["approval", "approval", "filter", "filter"]
    finally:
        await toolset.aclose()
        if process is not None:
            await asyncio.to_thread(process.stop)


async def test_a_listing_read_in_another_order_is_the_same_listing_for_its_warnings() -> None:
    """A server whose listing comes in another order on each reading (tools kept in a Go map or
    a Python set, iterated in no fixed order) logged its warnings again on every reading: the
    digest was of the list as it came. A listing is its tools, in whatever order; one that
    changed (a tool's schema) still warns again."""
    from adk.mcp._session import ListingWarnings

    bad = {"name": "string_schema", "inputSchema": {"type": "string"}}
    add = {"name": "add", "inputSchema": {"type": "object", "properties": {}}}
    warned = ListingWarnings()
    assert warned.first("left out", [add, bad])
    assert not warned.first("left out", [bad, add])  # the same tools, listed the other way
    assert not warned.first("left out", [{**add, "inputSchema": add["inputSchema"]}, bad])
    assert warned.first("left out", [bad, {**add, "description": "Adds."}])  # changed
    assert warned.first("twice", [add, bad])  # another warning's own


async def test_an_approved_call_of_an_optional_server_down_at_the_resume_waits_for_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A call of an ``optional=True`` server's tool paused for approval while the server was up,
    resumed approved while it cannot be started: its tools are not offered then, and the resume
    is refused before anything runs (the checkpoint kept), not answered as an unknown tool, which
    would spend the person's approval on nothing; resumed once the server is back, the call runs
    and the model reads its result. The refusal said only that the agent 'no longer has' the
    tool, as if a deploy had removed it, so an operator might drop a checkpoint that resumes once
    the server is back: it names that case too."""
    refuse = tmp_path / "refuse"
    store = SQLiteCheckpointStore(tmp_path / "checkpoints.db")
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="c1")]), "ok"])

    def service() -> Runner:
        server = stdio(env={"DEMO_REFUSE_START_FILE": str(refuse)})
        toolset = MCPToolset(server, tool_filter=["add"], require_approval=["add"], optional=True)
        return Runner(ReActAgent("ops", model, tools=[toolset]), checkpoint_store=store)

    async with store:
        async with service() as runner:
            paused = await runner.invoke("add 2 and 3")
        assert paused.checkpoint_id is not None
        refuse.touch()  # the server cannot be started now
        with caplog.at_level("WARNING", logger="adk.mcp"):
            async with service() as runner:
                with pytest.raises(RunError) as refused:
                    await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
                assert [p.checkpoint_id async for p in runner.pending()] == [paused.checkpoint_id]
        # The refusal says what the operator can do: not only that a deploy removed the tool.
        assert "the paused calls need tools it no longer has: add (removed or renamed " in str(
            refused.value
        )
        assert "an optional MCP server's while it cannot be used" in str(refused.value)
        warnings = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
        assert any(w.endswith("its tools are not offered (optional=True)") for w in warnings)
        assert len(model.requests) == 1  # nothing ran
        refuse.unlink()
        async with service() as runner:
            done = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
    assert done.text == "ok"
    (result,) = [m for m in model.requests[-1].messages if m.role == Role.TOOL]
    assert (result.tool_call_id, result.content) == ("c1", "5")


class Adder(ActionAgent):
    """Calls the demo server's ``add`` with a request of its own (no model), outputs the
    response."""

    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        call = tool_call("add", {"a": 2, "b": 3}, "c1")
        ctx.send_event(ToolRequestEvent(tool_calls=[call], tools=["add"]))

    @action(ToolResponseEvent)
    def answer(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
        [response] = event.responses
        ctx.send_event(OutputEvent(output=[response.content, response.metadata.get("is_error")]))


async def test_an_approved_call_resumed_while_its_mcp_server_is_down_says_the_server_is_down(
    tmp_path: Path, http_process: HTTPServerProcess
) -> None:
    """An action's call of an MCP server's tool paused for approval while the server was up,
    resumed while nothing answers at its URL (not ``optional``): the resume is refused before
    anything runs, the checkpoint kept. The refusal said only that the agent 'no longer has'
    the tool ('removed or renamed since the pause, or ... an optional MCP server's'), which a
    pipeline's operator reads as a deploy that dropped it, where the lookup had said which
    server could not be asked and why; it says so now, and the resume runs once it is back."""
    store = SQLiteCheckpointStore(tmp_path / "checkpoints.db")

    def runner(url: str) -> Runner:
        resources = Resources()
        toolset = MCPToolset(HTTPServer(url), tool_filter=["add"], require_approval=["add"])
        resources.add_mcp("devices", toolset)
        return Runner(Adder("adder"), resources=resources, checkpoint_store=store)

    down = f"http://127.0.0.1:{closed_port()}/mcp"  # the server, while it is down
    async with store:
        async with runner(http_process.url) as first:
            paused = await first.invoke("go")
        assert paused.checkpoint_id is not None
        async with runner(down) as second:
            with pytest.raises(RunError) as refused:
                await second.invoke_resume(paused.checkpoint_id, {"approved": True})
            assert [p.checkpoint_id async for p in second.pending()] == [paused.checkpoint_id]
        said = str(refused.value)
        assert "the paused calls need tools it no longer has: add" in said
        assert "add: no tool named 'add'; MCP servers that could not be asked: devices: " in said
        assert "could not connect" in said
        async with runner(http_process.url) as third:
            done = await third.invoke_resume(paused.checkpoint_id, {"approved": True})
    assert done.output == ["5", None]


async def test_a_denial_resumed_while_its_mcp_server_is_down_closes_the_call(
    tmp_path: Path, http_process: HTTPServerProcess
) -> None:
    """As above, the server down at the resume, but the person denies the call: a denied call
    never runs, so nothing is asked of the server (its address, a listener that drops every
    connection, is never connected to) and the action gets the denial as the call's result,
    the run finished. The resume was refused ('need tools it no longer has') for a denial as for
    an approval, so a person's no could not close the run while the server was down."""
    store = SQLiteCheckpointStore(tmp_path / "checkpoints.db")
    connections: list[object] = []

    async def dropped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer.get_extra_info("peername"))
        writer.close()

    def runner(url: str) -> Runner:
        resources = Resources()
        toolset = MCPToolset(HTTPServer(url), tool_filter=["add"], require_approval=["add"])
        resources.add_mcp("devices", toolset)
        return Runner(Adder("adder"), resources=resources, checkpoint_store=store)

    listener = await asyncio.start_server(dropped, "127.0.0.1", 0)
    down = f"http://127.0.0.1:{listener.sockets[0].getsockname()[1]}/mcp"
    async with listener, store:
        async with runner(http_process.url) as first:
            paused = await first.invoke("go")
        assert paused.checkpoint_id is not None
        async with runner(down) as second:
            done = await second.invoke_resume(
                paused.checkpoint_id, {"approved": False, "reason": "not today"}
            )
            assert [p async for p in second.pending()] == []
    assert done.output == ["Error: the call to 'add' was not approved: not today", True]
    assert connections == []


async def test_a_denial_resumed_while_an_optional_servers_tools_are_not_offered_goes_on(
    tmp_path: Path, http_process: HTTPServerProcess
) -> None:
    """A ``ReActAgent``'s call of an ``optional=True`` server's tool paused for approval, the
    server down at the resume (its tools not offered): an approval waits for it (refused, the
    checkpoint kept, the refusal saying a denial would close it), a denial goes on, the model
    reading the denial as the call's result."""
    store = SQLiteCheckpointStore(tmp_path / "checkpoints.db")
    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="c1")]),
            lambda messages: messages[-1].content,
        ]
    )

    def service(url: str) -> Runner:
        toolset = MCPToolset(
            HTTPServer(url), tool_filter=["add"], require_approval=["add"], optional=True
        )
        return Runner(ReActAgent("ops", model, tools=[toolset]), checkpoint_store=store)

    down = f"http://127.0.0.1:{closed_port()}/mcp"
    async with store:
        async with service(http_process.url) as runner:
            paused = await runner.invoke("add 2 and 3")
        assert paused.checkpoint_id is not None
        async with service(down) as runner:
            with pytest.raises(RunError) as refused:
                await runner.invoke_resume(paused.checkpoint_id, True)
            assert "deny the approval of 'agent:ops/tool:add#c1' to close it" in str(refused.value)
            assert [p.checkpoint_id async for p in runner.pending()] == [paused.checkpoint_id]
            done = await runner.invoke_resume(paused.checkpoint_id, False)
            assert [p async for p in runner.pending()] == []
    assert done.text == "Error: the call to 'add' was not approved"
    assert len(model.requests) == 2


async def test_a_server_that_never_answers_its_handshake_is_a_handshake_failure(
    tmp_path: Path,
) -> None:
    error, _, pid_file, _ = await timed_out(tmp_path, 0.5, MCPToolset.tools)
    assert "(the MCP handshake failed): no answer" in str(error)
    assert error.stage == "handshake" and isinstance(error.server, StdioServer)
    assert not pid_exists(int(pid_file.read_text()))


async def test_an_http_server_whose_connection_never_opens_is_a_connect_failure() -> None:
    """An HTTP server whose TCP connection never opens (a host dropping the connection attempt,
    as a firewall or a wrong address does; here a port whose accept queue is full, so the kernel
    drops it) is stage ``"connect"``: the server was not reached. It was ``"handshake"``, 'the MCP
    handshake failed', as for a server that answered wrongly, because an HTTP transport counted
    as opened before any connection was made, so a service telling a network fault from a broken
    server by the stage looked at the server."""
    listener = socket.socket()
    fillers: list[socket.socket] = []
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        for _ in range(3):  # the queue takes one; the other attempts are dropped, as ours is
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        server = HTTPServer(f"http://127.0.0.1:{port}/mcp")
        with pytest.raises(MCPConnectionError) as raised:
            await MCPToolset(server, connect_timeout=1).tools()
    finally:
        for opened in (*fillers, listener):
            opened.close()
    assert (raised.value.stage, raised.value.server) == ("connect", server)
    assert str(raised.value) == (
        f"could not connect to MCP server '{server}' (it could not be started or reached): "
        "no answer within 1s (connect_timeout)"
    )
    # One that takes the connection and never answers was reached: its handshake failed.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        server = HTTPServer(f"http://127.0.0.1:{silent.getsockname()[1]}/mcp")
        with pytest.raises(MCPConnectionError, match=r"\(the MCP handshake failed\): no answer"):
            await MCPToolset(server, connect_timeout=1).tools()


def stalled(tmp_path: Path) -> tuple[StdioServer, Path]:
    """A stdio server that starts but never answers, and the file it writes its pid to."""
    pid_file = tmp_path / "pid"
    env = {"DEMO_PID_FILE": str(pid_file), "DEMO_STALL_UNTIL_FILE": str(tmp_path / "never")}
    return stdio(env=env), pid_file


async def timed_out(
    tmp_path: Path, connect_timeout: float, connect: Callable[[MCPToolset], Awaitable[Any]]
) -> tuple[MCPConnectionError, float, Path, MCPToolset]:
    """``connect`` a toolset of a stalled server with ``connect_timeout``; return the error it
    raised, the timeout that gave it, the server's pid file and the toolset. The tests are about a server
    that started and never answered: on a machine loaded enough that Python had not even
    started the server (written its pid) within the timeout, the attempt is made again with
    a fresh server and the timeout doubled, instead of the test failing on a missing pid."""
    for attempt in range(5):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        server, pid_file = stalled(folder)
        toolset = MCPToolset(server, connect_timeout=connect_timeout)
        with pytest.raises(MCPConnectionError) as raised:
            await connect(toolset)
        if pid_file.exists():
            return raised.value, connect_timeout, pid_file, toolset
        connect_timeout *= 2
    raise AssertionError("the stalled server never started within its connect_timeout")


async def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    error, timeout, pid_file, _ = await timed_out(tmp_path, 0.5, MCPToolset.tools)
    assert isinstance(error, ConnectionError)
    assert f"no answer within {timeout:g}s (connect_timeout)" in str(error)
    assert not pid_exists(int(pid_file.read_text()))


async def test_concurrent_callers_share_one_connect_attempt(tmp_path: Path) -> None:
    # A model's parallel tool calls to a server that does not answer: one server is started and
    # all fail together, instead of one attempt (and one connect_timeout) after another.
    failures: list[BaseException] = []

    async def five_callers(toolset: MCPToolset) -> None:
        failures[:] = await asyncio.gather(
            *(toolset.tools() for _ in range(5)), return_exceptions=True
        )
        raise failures[0]

    _, timeout, pid_file, toolset = await timed_out(tmp_path, 1, five_callers)
    said = f"no answer within {timeout:g}s"
    assert all(isinstance(f, ConnectionError) and said in str(f) for f in failures)
    assert len(failures) == 5 and len(starts(pid_file)) == 1
    # The failure is not kept: the next use tries again.
    with pytest.raises(ConnectionError):
        await toolset.tools()
    assert len(starts(pid_file)) == 2


async def test_a_cancelled_caller_does_not_abort_a_connect_others_wait_for(tmp_path: Path) -> None:
    go, pid_file = tmp_path / "go", tmp_path / "pids"
    env = {"DEMO_PID_FILE": str(pid_file), "DEMO_STALL_UNTIL_FILE": str(go)}
    async with MCPToolset(stdio(env=env), connect_timeout=60) as toolset:
        first = asyncio.create_task(toolset.tools())
        second = asyncio.create_task(toolset.tools())
        await eventually(lambda: asyncio.sleep(0, starts(pid_file)), bool)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        go.touch()
        assert "add" in {tool.spec.name for tool in await second}
        assert await server_pid(toolset) == starts(pid_file)[0]


async def test_a_caller_arriving_while_an_abandoned_connect_winds_down_connects_afresh(
    tmp_path: Path,
) -> None:
    go, pid_file = tmp_path / "go", tmp_path / "pids"
    env = {"DEMO_PID_FILE": str(pid_file), "DEMO_STALL_UNTIL_FILE": str(go)}
    async with MCPToolset(stdio(env=env), connect_timeout=60) as toolset:
        first = asyncio.create_task(toolset.tools())  # e.g. a run that then times out
        await eventually(lambda: asyncio.sleep(0, starts(pid_file)), bool)
        first.cancel()
        await asyncio.sleep(0)
        assert not first.done()  # its abandoned attempt is still stopping the stalled server
        go.touch()
        # Nobody cancelled this caller: it gets a connection, not the dying attempt's cancellation.
        assert "add" in await names(toolset)
        with pytest.raises(asyncio.CancelledError):
            await first
        abandoned, fresh = starts(pid_file)
        assert await server_pid(toolset) == fresh
        assert not pid_exists(abandoned)


async def test_stdio_servers_start_while_stderr_is_redirected_to_memory() -> None:
    # redirect_stderr, pytest's capsys and notebook hosts put a stream without a file descriptor
    # in sys.stderr; the server's stderr then goes to the process's original stderr.
    with contextlib.redirect_stderr(io.StringIO()):
        async with MCPToolset(stdio()) as toolset:
            assert await server_pid(toolset) > 0


async def test_cancelling_a_connect_leaves_nothing_running(tmp_path: Path) -> None:
    server, pid_file = stalled(tmp_path)
    toolset = MCPToolset(server, connect_timeout=60)
    before = set(session_tasks(server))
    connecting = asyncio.create_task(toolset.tools())
    await eventually(lambda: asyncio.sleep(0, pid_file.exists()), bool)
    assert not connecting.done()
    connecting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await connecting
    assert not pid_exists(int(pid_file.read_text()))
    assert set(session_tasks(server)) <= before


async def test_a_run_cancelled_by_a_cancel_scope_while_connecting_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    # Starlette cancels a streaming response whose client hung up with an anyio cancel scope,
    # which cancels the task again at every await: the run's close waited for the abandoned
    # connect with a plain wait, which ended at once, and the server outlived the run.
    server, pid_file = stalled(tmp_path)
    toolset = MCPToolset(server, connect_timeout=60)
    runner = Runner(ReActAgent("worker", ScriptedModel(["never"]), tools=[toolset]))
    with anyio.CancelScope() as scope:

        async def cancel_once_started() -> None:
            await eventually(lambda: asyncio.sleep(0, pid_file.exists()), bool)
            scope.cancel()

        watcher = asyncio.ensure_future(cancel_once_started())
        async with contextlib.aclosing(runner.run("Go.")) as events:
            async for _ in events:
                pass
    await watcher
    assert scope.cancelled_caught
    assert not pid_exists(int(pid_file.read_text()))
    assert session_tasks(server) == []


@pytest.mark.parametrize("closer", ["runner", "resources", "toolset"])
async def test_closing_under_a_cancelled_cancel_scope_still_stops_the_server(closer: str) -> None:
    # A request handler closing what it used as its client hangs up: the close is cancelled at
    # every await, and a shielded close returned at once, with the server still running.
    resources = Resources()
    toolset = resources.add_mcp("demo", stdio())
    runner = Runner(
        ReActAgent("worker", ScriptedModel(["never"]), tools=["pid"]), resources=resources
    )
    pid = await server_pid(toolset)
    owner = owner_task(toolset)
    closing = {"runner": runner, "resources": resources, "toolset": toolset}[closer]
    with anyio.CancelScope() as scope:
        scope.cancel()
        await closing.aclose()
    assert scope.cancelled_caught
    assert not pid_exists(pid)
    assert owner.done()


async def test_cancelling_the_task_using_the_toolset_closes_it_and_the_server_exits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    toolset = MCPToolset(stdio(), call_timeout=None)
    pids: list[int] = []

    async def use() -> None:
        async with toolset:
            pids.append(await server_pid(toolset))
            await call(toolset, "hang")

    task = asyncio.create_task(use())
    await eventually(lambda: asyncio.sleep(0, pids), bool)
    await eventually(lambda: call(toolset, "hang_stats"), lambda r: r.structured["started"] == 1)
    owner = owner_task(toolset)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not pid_exists(pids[0])
    assert owner.done()
    assert errors_logged(caplog) == []


async def test_a_cancelled_call_leaves_the_session_usable_until_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    toolset = MCPToolset(stdio(), call_timeout=None)
    pid = await server_pid(toolset)
    hanging = asyncio.create_task(call(toolset, "hang"))
    await eventually(lambda: call(toolset, "hang_stats"), lambda r: r.structured["started"] == 1)
    hanging.cancel()
    with pytest.raises(asyncio.CancelledError):
        await hanging
    await eventually(lambda: call(toolset, "hang_stats"), lambda r: r.structured["cancelled"] == 1)
    assert await server_pid(toolset) == pid

    # Closing the resources a runner was given closes the sessions of their MCP servers.
    owner = owner_task(toolset)
    resources = Resources()
    resources.add_mcp("demo", toolset)
    await resources.aclose()
    assert not pid_exists(pid)
    assert owner.done()
    await toolset.aclose()  # closing twice is fine
    assert errors_logged(caplog) == []


# -- with agents --------------------------------------------------------------------------------
async def test_react_agent_calls_mcp_tools_from_a_toolset(shared: MCPToolset) -> None:
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("add", {"a": 2, "b": 3}),
                    tool_call("fail", {"message": "no luck"}),
                    tool_call("add", "{oops"),
                ]
            ),
            "The sum is 5.",
        ]
    )
    agent = ReActAgent("calc", model, tools=[shared])
    result = await Runner(agent).invoke("Add 2 and 3.")

    assert result.text == "The sum is 5."
    lines = simplify_events(result.events)
    assert "calc: [tool add] 5" in lines
    assert any(line.startswith("calc: [tool fail] Error:") and "no luck" in line for line in lines)
    assert any("[tool add] Error: invalid arguments for tool 'add'" in line for line in lines)
    assert {"add", "forecast", "hang"} <= {spec.name for spec in model.requests[0].tools}
    results = {m.tool_call_id: m.content for m in model.requests[1].messages if m.role == "tool"}
    assert results["call_1"] == "5"


async def test_named_mcp_tools_and_prompts_in_agents_and_agent_tools(
    http_process: HTTPServerProcess,
) -> None:
    resources = Resources()
    resources.add_mcp("demo", HTTPServer(http_process.url), prefix="demo")
    inner_model = ScriptedModel(
        [Reply(tool_calls=[tool_call("demo_forecast", {"city": "Oslo"})]), "Sunny in Oslo."]
    )
    inner = ReActAgent(
        "weather", inner_model, description="Knows the weather.", tools=["demo_forecast"]
    )
    outer_model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("weather", {"request": "Weather in Oslo?"})]),
            "Pack sunglasses.",
        ]
    )
    outer = ReActAgent("planner", outer_model, tools=[AgentTool(inner), "demo_add"])

    async with Runner(outer, resources=resources, enable_streaming=True) as runner:
        greeting = await (await resources.get_prompt("demo_greet")).render(name="Ada")
        result = await runner.invoke(greeting)

    assert result.text == "Pack sunglasses."
    assert outer_model.requests[0].messages[-1].content == "Write a cheerful greeting for Ada."
    assert {spec.name for spec in outer_model.requests[0].tools} == {"weather", "demo_add"}
    assert [spec.name for spec in inner_model.requests[0].tools] == ["demo_forecast"]
    (forecast,) = [m for m in inner_model.requests[1].messages if m.role == "tool"]
    assert json.loads(forecast.content)["city"] == "Oslo"
    assert "planner: [tool weather] Sunny in Oslo." in simplify_events(result.events)


async def test_cancelling_a_run_closes_the_session_and_the_server_exits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    resources = Resources()
    toolset = resources.add_mcp("demo", stdio())
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("pid")]), Reply(tool_calls=[tool_call("hang")]), "never"]
    )
    agent = ReActAgent("worker", model, tools=["pid", "hang"])
    pids: list[int] = []

    async def serve() -> None:
        async with Runner(agent, resources=resources) as runner:
            async for event in runner.run("Go."):
                message = event.output.message if event.output is not None else None
                if message is not None and message.role == "tool" and message.name == "pid":
                    pids.append(int(message.content))

    task = asyncio.create_task(serve())
    await eventually(lambda: asyncio.sleep(0, model.calls), lambda calls: calls == 2)
    owner = owner_task(toolset)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(pids) == 1
    assert not pid_exists(pids[0])
    assert owner.done()
    assert errors_logged(caplog) == []


async def test_importing_adk_does_not_import_mcp() -> None:
    code = (
        "import sys, adk, adk.resources, adk.tools.base; "
        "heavy = [m for m in ('mcp', 'adk.mcp', 'httpx2') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, cwd=Path(__file__).parent.parent, stderr=subprocess.PIPE
    )
    _, stderr = await process.communicate()
    assert process.returncode == 0, stderr.decode()


async def test_a_react_agents_tool_event_carries_an_mcp_tools_structured_content_across_a_pause(
    shared: MCPToolset,
) -> None:
    """A ``ReActAgent``'s tool event for an MCP tool with structured output carried the text
    alone: code reading the run's events had to parse the text back (which a server may write
    otherwise), where an event-driven agent reads ``event.structured``. The tool message
    carries it as ``metadata["structured"]`` (as ``is_error`` rides there: for code, never sent
    to a model), through ``to_dict``/``from_dict``, and in the checkpoint of a round that
    paused beside it: the resumed run's messages hold it as the tool gave it."""

    @tool(require_approval=True)
    def pay(cents: int) -> str:
        """Pay; a person approves."""
        return f"paid {cents}"

    both = [tool_call("forecast", {"city": "Oslo"}, id="f"), tool_call("pay", {"cents": 5}, id="p")]
    model = ScriptedModel([Reply(tool_calls=both), "done"])
    runner = Runner(ReActAgent("clerk", model, tools=[shared, pay]))  # not closed: shared's
    events = [e async for e in runner.run("Weather, then pay.")]
    expected = {
        "city": "Oslo",
        "temperature": 21.5,
        "units": "celsius",
        "conditions": ["sunny", "dry"],
    }
    [shown] = [e for e in events if e.message is not None and e.message.name == "forecast"]
    assert shown.message is not None and shown.message.metadata["structured"] == expected
    again = AgentEvent.from_dict(json.loads(json.dumps(shown.to_dict()))).message
    assert again is not None and again.metadata["structured"] == expected
    paused = events[-1].interrupted
    assert paused is not None
    resuming = runner.resume(paused.checkpoint_id, True)
    resumed = [e async for e in resuming]
    assert resumed[-1].message is not None and resumed[-1].message.content == "done"
    [kept] = [m for m in run_messages(resuming) if m.name == "forecast"]
    assert kept.metadata["structured"] == expected


async def test_a_cancelled_listings_id_is_not_kept_for_the_connections_life(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ids of ``tools/list`` requests not answered yet are kept per connection, for their
    answers to be filtered (``_WatchedReadStream``); one never answered, its listing cancelled
    (or timed out: the client sends the same ``notifications/cancelled`` then), stayed there for
    the connection's life, one more for each such listing. The cancellation drops it."""
    import adk.mcp._session as session_module

    writers: list[Any] = []
    listed = asyncio.Event()

    class Recorded(session_module._WatchedWriteStream):
        def __init__(self, inner: Any, listings: set[Any]) -> None:
            super().__init__(inner, listings)
            writers.append(self)

        async def send(self, item: Any) -> None:
            await super().send(item)
            if self._listings:
                listed.set()

    monkeypatch.setattr(session_module, "_WatchedWriteStream", Recorded)
    toolset = MCPToolset(stdio(env={"DEMO_STALL_LISTINGS": "1"}), call_timeout=30)
    try:
        listing = asyncio.create_task(toolset.tools())
        await asyncio.wait_for(listed.wait(), 30)  # the listing's request went out
        listing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await listing
        assert "add" in await names(toolset)  # the next listing is answered, on that connection
        assert len(writers) == 1
        assert writers[0]._listings == set()
    finally:
        await toolset.aclose()
