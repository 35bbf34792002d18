"""A run served over HTTP by a real Starlette app under uvicorn, as docs/service.md shows it.

Starlette cancels a streaming response's task with an anyio cancel scope when its client hangs
up, and such a scope cancels again at every await until it is left: what a run does to clean up
after a client left must finish all the same (its spans end, its model connection is released,
its session store's locks are let go), and the next request is served as usual. The model is a
real OpenAI wire server (``tests/openai_server.py``), the client a plain asyncio socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from conftest import wire_model
from mcp_servers.process import STDIO_SCRIPT, HTTPServerProcess
from openai_server import OpenAIServer, Reply
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import adk
from adk import AgentEvent, Runner
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply as ScriptedReply
from adk.testing import ScriptedModel, tool_call
from prebuilt import ReActAgent


@contextlib.asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[int]:
    """Serve ``app`` under uvicorn on a free loopback port; yield the port."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                await task  # startup failed: raise its error
            await asyncio.sleep(0.01)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await task


async def send(port: int, path: str, body: Any) -> tuple[int, asyncio.StreamReader, Any]:
    """Send a POST of ``body`` as JSON; the status, the reader past the head, and the writer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {len(data)}\r\n\r\n"
    writer.write(head.encode() + data)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    while await reader.readline() not in (b"\r\n", b""):
        pass
    return status, reader, writer


async def post(port: int, path: str, body: Any) -> tuple[asyncio.StreamReader, Any]:
    """Send a POST of ``body`` as JSON that must be answered 200; the reader and the writer."""
    status, reader, writer = await send(port, path, body)
    assert status == 200
    return reader, writer


async def answer(port: int, path: str, body: Any) -> tuple[int, str]:
    """POST ``body``; the status and the whole body (a stream's pieces joined)."""
    status, reader, writer = await send(port, path, body)
    try:
        if status != 200 or path == "/chat":  # not a stream: the body to its end
            return status, (await reader.read()).decode()
        pieces = []
        while piece := await next_chunk(reader):
            pieces.append(piece)
        return status, b"".join(pieces).decode()
    finally:
        writer.close()


async def next_chunk(reader: asyncio.StreamReader) -> bytes:
    """The next piece of a chunked body (b"" at its end)."""
    size = int(await reader.readline(), 16)
    data = await reader.readexactly(size) if size else b""
    await reader.readline()
    return data


class _Ends(SpanProcessor):
    """Sets ``ended`` once a span named ``name`` ends."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.ended = asyncio.Event()

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if span.name == self.name:
            self.ended.set()


def sse_of(runner: Runner) -> Starlette:
    """``POST /chat``: the run's answer as Server-Sent Events, one per piece of text."""

    async def chat(request: Request) -> StreamingResponse:
        message = (await request.json())["message"]

        async def body() -> AsyncIterator[str]:
            async with contextlib.aclosing(runner.run(message)) as events:
                async for event in events:
                    stream = event.output.stream if event.output is not None else None
                    if stream is not None:
                        async for chunk in stream:
                            yield f"data: {json.dumps(chunk.content)}\n\n"
                    yield f"event: agent\ndata: {json.dumps(AgentEvent.to_dict(event))}\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])


async def test_a_client_hanging_up_mid_answer_ends_every_span_of_its_run() -> None:
    # The agent's span was never ended: closing the answer's unread stream raised the scope's
    # repeated cancellation, which skipped the agent's end (its span, its after_agent callbacks).
    spans = InMemorySpanExporter()
    agent_end = _Ends("invoke_agent clerk")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    provider.add_span_processor(agent_end)
    stalled = Reply(text="A long answer. " * 20, stall_after=2, delay=60)
    async with OpenAIServer([stalled], default=Reply(text="Hello again.")) as model_server:
        agent = ReActAgent("clerk", wire_model(model_server, retry=None))
        runner = Runner(agent, enable_streaming=True, tracer_provider=provider)
        async with serving(sse_of(runner)) as port:
            reader, writer = await post(port, "/chat", {"message": "Tell me a long story."})
            assert (await next_chunk(reader)).startswith(b"data: ")
            writer.close()  # the client hangs up mid-answer
            await asyncio.wait_for(agent_end.ended.wait(), 10)

            reader, writer = await post(port, "/chat", {"message": "Hello?"})
            pieces = [await next_chunk(reader) for _ in range(3)]
            writer.close()
        assert b"".join(pieces).decode().count("data: ") == 3  # the next request is served

    (first, *_) = [s for s in spans.get_finished_spans() if s.name == "invoke_agent clerk"]
    assert [e.name for e in first.events] == ["adk.cancelled"]
    assert first.status.status_code is not StatusCode.ERROR  # cut off, not failed
    assert sorted(s.name for s in spans.get_finished_spans() if s.parent is not None) == [
        "chat test-model",
        "chat test-model",
    ]


paying = asyncio.Event()
release = asyncio.Event()


@adk.tool(require_approval=True)
async def send_payment(payee: str, cents: int) -> str:
    """Send money; a person approves every call."""
    paying.set()
    await release.wait()
    return f"sent {cents} cents to {payee}"


def _clerk(messages: list[adk.Message]) -> Any:
    if messages[-1].role == "tool":
        return f"done: {messages[-1].content}"
    return ScriptedReply(tool_calls=[tool_call("send_payment", {"payee": "ACME", "cents": 42})])


def approvals(runner: Runner) -> Starlette:
    """``POST /chat`` pauses for approval; ``POST /resume`` carries the decision, its refusals
    told apart by class, as docs/service.md maps them."""

    async def chat(request: Request) -> Response:
        result = await runner.invoke((await request.json())["message"])
        return JSONResponse({"checkpoint_id": result.checkpoint_id})

    async def resume(request: Request) -> Response:
        body = await request.json()
        events = runner.resume(body["checkpoint_id"], body["decision"])
        try:
            first = await anext(events)  # the request's refusals come with the first event
        except (adk.CheckpointNotFoundError, adk.CheckpointBusyError, ValueError) as exc:
            await events.aclose()
            status = {adk.CheckpointNotFoundError: 404, adk.CheckpointBusyError: 409}
            return JSONResponse({"error": str(exc)}, status_code=status.get(type(exc), 400))

        async def rest() -> AsyncIterator[str]:
            async with contextlib.aclosing(events):
                event: AgentEvent | None = first
                while event is not None:
                    yield f"data: {json.dumps(event.to_dict())}\n\n"
                    event = await anext(events, None)

        return StreamingResponse(rest(), media_type="text/event-stream")

    routes = [Route("/chat", chat, methods=["POST"]), Route("/resume", resume, methods=["POST"])]
    return Starlette(routes=routes)


async def test_a_stale_or_doubled_resume_is_refused_with_a_class_a_service_maps_to_a_status(
    tmp_path: Path,
) -> None:
    # Both were a bare CheckpointError, told apart from a broken checkpoint only by the message.
    paying.clear()
    release.clear()
    workers = []
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(2):  # two workers sharing the checkpoints' file, each with its own store
            store = await stack.enter_async_context(SQLiteCheckpointStore(tmp_path / "cp.db"))
            agent = ReActAgent("clerk", ScriptedModel(_clerk), tools=[send_payment])
            runner = Runner(agent, checkpoint_store=store)
            workers.append(await stack.enter_async_context(serving(approvals(runner))))
        first, second = workers

        status, text = await answer(first, "/chat", {"message": "Pay ACME."})
        checkpoint_id = json.loads(text)["checkpoint_id"]
        resume = {"checkpoint_id": checkpoint_id, "decision": True}

        status, text = await answer(second, "/resume", {**resume, "decision": "maybe"})
        assert (status, "is not a decision" in text) == (400, True)

        approved = asyncio.create_task(answer(second, "/resume", resume))  # the other worker
        await paying.wait()
        status, text = await answer(first, "/resume", resume)  # clicked twice, at another worker
        assert (status, "already being resumed" in text) == (409, True)
        release.set()
        status, text = await approved
        assert status == 200 and "done: sent 42 cents to ACME" in text

        status, text = await answer(first, "/resume", resume)  # the same click, retried later
        assert (status, f"no checkpoint {checkpoint_id!r}" in text) == (404, True)
        status, text = await answer(first, "/resume", {**resume, "checkpoint_id": "nope"})
        assert status == 404


_MCP_TRACE_SCRIPT = """
import asyncio, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider

class Open(SpanProcessor):
    def __init__(self):
        self.open = {}
    def on_start(self, span, parent_context=None):
        self.open[span.context.span_id] = span
    def on_end(self, span):
        self.open.pop(span.context.span_id, None)

spans = Open()
provider = TracerProvider()
provider.add_span_processor(spans)
trace.set_tracer_provider(provider)  # the mcp package traces with the global provider

import adk
from adk.mcp import HTTPServer, MCPToolset
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

async def main():
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    toolset = MCPToolset(HTTPServer(sys.argv[1]))
    async with adk.Runner(ReActAgent("calc", model, tools=[toolset])) as runner:
        with trace.get_tracer("service").start_as_current_span("POST /chat") as request:
            assert (await runner.invoke("1+2?")).text == "3"
        ours = request.get_span_context().trace_id
        print(sorted(s.name for s in spans.open.values() if s.context.trace_id == ours))

asyncio.run(main())
"""


def test_an_mcp_session_opened_during_a_request_leaves_nothing_open_in_its_trace() -> None:
    # The session's own task ran in the request's trace context: the mcp package's span of the
    # server's notification stream, open until the session closes, kept that trace open for the
    # life of the process.
    server = HTTPServerProcess()
    server.start()
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        script = textwrap.dedent(_MCP_TRACE_SCRIPT)
        done = subprocess.run(
            [sys.executable, "-c", script, server.url],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


_MCP_HANDSHAKE_SCRIPT = """
import asyncio, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

class Open(SpanProcessor):
    def __init__(self):
        self.open = {}
    def on_start(self, span, parent_context=None):
        self.open[span.context.span_id] = span
    def on_end(self, span):
        self.open.pop(span.context.span_id, None)

spans, opened = InMemorySpanExporter(), Open()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(spans))
provider.add_span_processor(opened)
trace.set_tracer_provider(provider)  # the mcp package traces with the global provider

import adk
from adk.mcp import HTTPServer, MCPToolset, StdioServer
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

async def main(where):
    server = HTTPServer(where) if where.startswith("http") else StdioServer(sys.executable, [where])
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    async with adk.Runner(ReActAgent("calc", model, tools=[MCPToolset(server)])) as runner:
        with trace.get_tracer("service").start_as_current_span("POST /chat") as request:
            assert (await runner.invoke("1+2?")).text == "3"
        ours = request.get_span_context().trace_id
        finished = spans.get_finished_spans()
        by_id = {s.context.span_id: s.name for s in finished}
        for span in finished:
            if span.name.startswith("MCP send"):
                parent = by_id.get(span.parent.span_id) if span.parent else None
                print(span.name, "|", parent, "|", span.context.trace_id == ours)
        print(sorted(s.name for s in opened.open.values() if s.context.trace_id == ours))

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.parametrize("transport", ["stdio", "http", "http-legacy"])
def test_an_mcp_sessions_handshake_is_in_the_trace_of_the_run_that_waited_for_it(
    transport: str,
) -> None:
    """The mcp package traces its requests with the current context, and the session's own task
    runs outside any trace (48570e2, so its change stream is in no request's trace): its
    handshake, server/discover (and a legacy server's initialize), made in that task, was a trace
    of its own per connect, a root span no request led to, while the run that opened the
    session waited for it. It is now under the span that opened the session (the agent listing
    its tools), and nothing of the session stays open in the run's trace."""
    server: HTTPServerProcess | None = None
    if transport == "stdio":
        where = str(STDIO_SCRIPT)
    else:
        server = HTTPServerProcess(legacy=transport == "http-legacy")
        server.start()
        where = server.url
    try:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        script = textwrap.dedent(_MCP_HANDSHAKE_SCRIPT)
        done = subprocess.run(
            [sys.executable, "-c", script, where],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
    finally:
        if server is not None:
            server.stop()
    assert done.returncode == 0, done.stderr
    *sent, still_open = done.stdout.strip().splitlines()
    handshake = ["MCP send server/discover | invoke_agent calc | True"]
    if transport == "http-legacy":  # probed, then the initialize handshake
        handshake.append("MCP send initialize | invoke_agent calc | True")
    assert sorted(sent) == sorted(
        [
            *handshake,
            "MCP send tools/list | invoke_agent calc | True",
            "MCP send tools/call add | execute_tool add | True",
        ]
    )
    assert still_open == "[]"  # the change stream (a modern server's) is in no run's trace


def _documented_session_stream() -> type[StreamingResponse]:
    """The ``SessionStream`` docs/service.md shows, as written there."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "service.md").read_text()
    found = re.search(r"^class SessionStream\(StreamingResponse\):\n(?:(?: {4}.*)?\n)+", page, re.M)
    assert found is not None, "docs/service.md no longer shows class SessionStream"
    namespace: dict[str, Any] = {"asyncio": asyncio, "StreamingResponse": StreamingResponse}
    exec(found.group(0), namespace)
    made: type[StreamingResponse] = namespace["SessionStream"]
    return made


class _Hanging(adk.BaseAgent):
    """Says one part after another; closing it awaits, as closing a model's connection does."""

    async def run(self, input: adk.AgentInput, ctx: adk.RunContext) -> AsyncIterator[AgentEvent]:
        try:
            for part in range(100):
                yield AgentEvent.of(adk.Message.assistant(f"part {part}"))
        finally:
            await asyncio.sleep(0)


@pytest.mark.parametrize("spec", ["2.3", "2.4"])
async def test_the_documented_session_stream_gives_its_lock_back_when_its_close_is_cancelled(
    spec: str,
) -> None:
    """The response is cancelled in an anyio cancel scope (a middleware's task group runs the
    app, as Starlette's BaseHTTPMiddleware does) while the client reads nothing more: the scope
    cancels again at every await, the run's close (which awaits) included. The session's lock
    must be given back all the same, or the session answers 409 for good."""
    stream_class = _documented_session_stream()
    lock = asyncio.Lock()
    await lock.acquire()
    events = Runner(_Hanging("talker")).run("hi")

    async def body() -> AsyncIterator[str]:
        async with contextlib.aclosing(events):
            async for event in events:
                yield f"data: {json.dumps(AgentEvent.to_dict(event))}\n\n"

    locks = {"s1": lock}  # the sessions with a run going on
    response = stream_class(body(), "s1", locks)  # type: ignore[call-arg]
    stalled = asyncio.Event()

    async def send(message: Any) -> None:
        if message["type"] == "http.response.body":
            stalled.set()  # the client reads no more: its first piece is never taken
            await asyncio.Event().wait()

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # no disconnect comes: the middleware cancels
        return {}

    scope = {"type": "http", "asgi": {"spec_version": spec}, "method": "POST", "headers": []}
    async with anyio.create_task_group() as group:
        group.start_soon(response, scope, receive, send)
        await stalled.wait()
        group.cancel_scope.cancel()
    assert not lock.locked() and "s1" not in locks  # given back, and not kept
