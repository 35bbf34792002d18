"""Chaos trials of a service in production, as the engineer on call would run them: replicas
resuming one checkpoint, clients that leave at the worst moment, stores and processes that go away.

The service is ``examples/agent_service.py`` under a real uvicorn (what docs/service.md tells
users to write), the stores are real servers (``tests/services.py``), the client a plain socket.
Waits are for what happened (a tool started, a connection seen closed, a request ended), never
for a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import importlib.util
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import uvicorn
from conftest import resumes_failing_unforeseen
from mcp_servers.process import STDIO_SCRIPT, HTTPServerProcess
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from services import (
    PostgresServer,
    RedisServer,
    _postgres_account,
    _RunAs,
    _wait_postgres,
    find_postgres_bindir,
    find_redis_server,
    hold_port,
    run_postgres,
)

import adk
from adk import CheckpointBusyError, Runner
from adk.checkpoint import (
    CheckpointStoreError,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
    codec,
)
from adk.mcp import HTTPServer, MCPToolset, StdioServer
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

pytest_plugins = ["services"]

ROOT = Path(__file__).resolve().parent.parent


def _example(name: str) -> ModuleType:
    """An example program as a module (its ``main()`` is not run)."""
    spec = importlib.util.spec_from_file_location(
        f"_chaos_{name}", ROOT / "examples" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def _streaming_service() -> ModuleType:
    """examples/streaming_service.py, loaded once: it registers a checkpoint type by name, which a
    second load would register again (refused) under a class of its own."""
    return _example("streaming_service")


class _Served:
    """An ASGI app under a real uvicorn, counting the requests it has ended."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.ended = 0
        self.changed = asyncio.Condition()
        config = uvicorn.Config(self, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["type"] == "http":
                async with self.changed:
                    self.ended += 1
                    self.changed.notify_all()

    async def requests_ended(self, count: int) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(lambda: self.ended >= count), 60)

    async def connections_closed(self) -> None:
        """Until uvicorn has seen every client connection close (its protocol dropped them)."""
        for _ in range(6000):  # 60 s: a guard, not a timing
            if not self.server.server_state.connections:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("uvicorn never saw the client leave")

    @property
    def port(self) -> int:
        port: int = self.server.servers[0].sockets[0].getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def _serving(app: Any) -> AsyncIterator[_Served]:
    served = _Served(app)
    task = asyncio.create_task(served.server.serve())
    try:
        while not served.server.started:
            if task.done():
                await task
            await asyncio.sleep(0.01)
        yield served
    finally:
        served.server.should_exit = True
        await task


@contextlib.contextmanager
def _no_collector() -> Iterator[None]:
    """The cyclic garbage collector off: what is released must be released by the code, not by
    a collection that happens to come."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _open(port: int, path: str, body: Any) -> tuple[asyncio.StreamReader, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len(data)}\r\n\r\n"
    writer.write(head.encode() + data)
    await writer.drain()
    return reader, writer


async def _answer(port: int, path: str, body: Any) -> tuple[int, str]:
    reader, writer = await _open(port, path, body)
    try:
        text = (await reader.read()).decode()
    finally:
        writer.close()
    return int(text.split()[1]), text


def _json_body(text: str) -> Any:
    """The JSON body of an HTTP answer read whole (as ``_answer`` gives it)."""
    return json.loads(text.split("\r\n\r\n", 1)[1])


@contextlib.asynccontextmanager
async def _handling(service: ModuleType, runner: Runner) -> AsyncIterator[int]:
    """``examples/streaming_service.py``'s ``Service`` over ``runner``, served on an ephemeral
    port (given) until the block ends."""
    server = await asyncio.start_server(service.Service(runner).handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def _streamed_answer(lines: list[Any]) -> str:
    """The text of the streamed answer a streaming_service response ends with."""
    answer = adk.AgentEvent.from_dict(lines[-1]["event"])
    assert answer.output is not None and answer.output.stream is not None
    return (await answer.output.stream.collect()).content


async def _paused(port: int) -> str:
    """Ask the example service for a payment (session s1): the id of the pause it answers."""
    status, text = await _answer(port, "/sessions/s1/messages", {"message": "pay"})
    found = re.search(r'"checkpoint_id": "(\w+)"', text)
    assert status == 200 and found is not None, text
    return found[1]


# --------------------------------------------------------------------------------------------------
# Clients that leave


async def test_a_resume_whose_client_left_before_its_answer_started_lets_the_checkpoint_go(
    tmp_path: Path,
) -> None:
    """The approval's client leaves while the approved call runs; the handler takes the resume's
    first event after that, and Starlette, seeing the client gone, cancels the response before
    its body starts, so the body's ``aclosing`` never runs. The resume, suspended at its first
    event, must let the checkpoint go all the same (the in-process guard, and the store's claim,
    which it renews while it is open): with the cyclic collector off, nothing but dropping the
    response closes it, and the approval sent again must run (the cut resume kept the
    checkpoint as it was), not be refused as "already being resumed" (409)."""
    service = _example("agent_service")
    app = service.build_app(tmp_path / "checkpoints.db", TracerProvider())
    with _no_collector():
        async with _serving(app) as served:
            checkpoint_id = await _paused(served.port)
            path = f"/resume/{checkpoint_id}"

            _, writer = await _open(served.port, path, {"decision": True})
            await service.paying.wait()  # the approved call runs: the client leaves now
            writer.close()
            await served.connections_closed()
            service.payment_done.set()  # the handler gets its first event, the client is gone
            await served.requests_ended(2)

            # The cut resume kept its checkpoint as it was (docs/service.md): sent again, it runs.
            status, text = await _answer(served.port, path, {"decision": True})
            assert status == 200, text
            assert "Paid: sent 4200 cents to ACME." in text


async def test_a_resume_lacking_the_paused_runs_options_is_the_services_fault_not_a_400(
    tmp_path: Path,
) -> None:
    """A version of the service that passed ``options={"deps": ...}`` paused a payment; the next
    version forgot them, and the example answered the approval ``400`` (its ``ValueError``
    mapping): the client was told its decision was wrong. Then 422, a checkpoint this service
    cannot resume, which freed the session waiting on it for good, though the version that
    passes the options again (a fix, a rollback) resumes it. The service's to fix, nothing ran,
    the checkpoint kept and resumable: 503 (a ``ValueError`` with no ``max_turns``, which a
    refusal the client fixes by sending a higher one carries)."""
    service = _example("agent_service")
    service.payment_done.set()
    async with SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store:
        tools = [service.add, service.lookup, service.send_payment]
        agent = ReActAgent("clerk", ScriptedModel(service.scripted, record=False), tools=tools)
        async with Runner(agent, checkpoint_store=store) as before:  # the version with deps
            paused = await before.invoke("pay ACME", options={"deps": "a client"})
        assert paused.checkpoint_id is not None
        app = service.build_app(tmp_path / "checkpoints.db", TracerProvider())
        async with _serving(app) as served:
            path = f"/resume/{paused.checkpoint_id}"
            status, text = await _answer(served.port, path, {"decision": "maybe"})
            assert status == 400 and "is not a decision" in text  # the client's mistake still
            status, text = await _answer(served.port, path, {"decision": True})
            assert status == 503, text
            assert "this resume lacks: options 'deps'" in text
            assert '"kept":true,"resumable":true' in text.replace(" ", ""), text
            assert not service.paying.is_set()  # the payment was not made
        assert await store.get(paused.checkpoint_id) is not None


async def test_a_streaming_service_answers_a_resume_lacking_run_options_503_not_400(
    tmp_path: Path,
) -> None:
    """As above, for ``examples/streaming_service.py``: its handler caught ``ValueError`` before
    ``CheckpointError``, so the refusal (both) was still answered ``400``, the client's fault,
    after 5953a2f made it a ``CheckpointError`` for this very reason. Then ``500``, then ``422``
    ("a retry cannot help"), though the version passing the options again resumes it: ``503``,
    as agent_service.py answers it, the checkpoint kept. A checkpoint gone is ``404``, as there
    (it was ``409``, the answer for one being resumed)."""
    service = _streaming_service()
    agent = ReActAgent("clerk", ScriptedModel(service.scripted_model), tools=[service.send_payment])
    async with (
        SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store,
        Runner(agent, checkpoint_store=store, enable_streaming=True) as runner,
    ):
        paused = await runner.invoke("Pay the ACME invoice.", options={"deps": "a client"})
        assert paused.checkpoint_id is not None
        async with _handling(service, runner) as http:
            resume = {"checkpoint_id": paused.checkpoint_id, "decision": {"approved": True}}
            status, error = await service.post(http, "/resume", resume)
            assert status == 503, error
            assert "this resume lacks: options 'deps'" in error
            assert f"cannot resume checkpoint {paused.checkpoint_id!r} now" in error
            bad = {"checkpoint_id": paused.checkpoint_id, "decision": "maybe"}
            status, error = await service.post(http, "/resume", bad)
            assert status == 400, error  # the client's mistake still
            gone = {"checkpoint_id": "never-saved", "decision": {"approved": True}}
            status, error = await service.post(http, "/resume", gone)
            assert status == 404, error
        assert await store.get(paused.checkpoint_id) is not None


async def test_a_resume_refused_by_its_first_event_is_answered_503_not_a_200_stream(
    tmp_path: Path,
) -> None:
    """A resume the runner refuses before anything runs but as its first event (an error event
    caused by a ``CheckpointError``, not raised: here a ``before_tool`` gate the paused version
    had and this one lacks) was answered ``200`` with the error in the stream, where the raised
    refusals get their status: the client could not tell "nothing ran, the service must be
    fixed" from a run that failed. Both examples answer it before the ``200``: ``503``, the
    service's to fix, the checkpoint kept and resumable once the gate is back (it was ``422``,
    "no retry helps", and agent_service.py freed the session waiting on it for good). Nothing
    ran, the checkpoint is kept."""
    from adk import Callbacks, Interrupt, ToolCall, ToolContext

    def gate(ctx: ToolContext, call: ToolCall) -> None:
        if ctx.resume is None:
            raise Interrupt("ok?")

    service = _example("agent_service")
    service.payment_done.set()
    streaming = _streaming_service()
    async with SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store:
        tools = [service.add, service.lookup, service.send_payment]
        agent = ReActAgent("clerk", ScriptedModel(service.scripted, record=False), tools=tools)
        gated = Runner(agent, checkpoint_store=store, callbacks=[Callbacks(before_tool=gate)])
        async with gated:
            paused = await gated.invoke("pay ACME")
        assert paused.checkpoint_id is not None
        app = service.build_app(tmp_path / "checkpoints.db", TracerProvider())
        async with _serving(app) as served:
            path = f"/resume/{paused.checkpoint_id}"
            status, text = await _answer(served.port, path, {"decision": True})
            assert status == 503, text
            assert "no longer has (removed since the pause?)" in text
            assert not service.paying.is_set()  # the payment was not made
        assert await store.get(paused.checkpoint_id) is not None

        agent = ReActAgent(
            "clerk", ScriptedModel(streaming.scripted_model), tools=[streaming.send_payment]
        )
        gated = Runner(agent, checkpoint_store=store, callbacks=[Callbacks(before_tool=gate)])
        async with gated:
            paused = await gated.invoke("Pay the ACME invoice.")
        assert paused.checkpoint_id is not None
        async with (
            Runner(agent, checkpoint_store=store, enable_streaming=True) as runner,
            _handling(streaming, runner) as http,
        ):
            resume = {"checkpoint_id": paused.checkpoint_id, "decision": {"approved": True}}
            status, error = await streaming.post(http, "/resume", resume)
            assert status == 503, error
            assert "no longer has (removed since the pause?)" in error
        assert await store.get(paused.checkpoint_id) is not None


async def test_a_streaming_services_unforeseen_failure_is_a_json_500_and_the_decision_resent_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception the handler does not map, from a resume's first event, left the handler:
    the connection dropped with nothing said (asyncio's log alone had it). It is a JSON ``500``
    as agent_service.py answers it; the checkpoint is kept and the decision sent again resumes
    it. (Injected into the runner's resume: no unmapped failure is known.)"""
    service = _streaming_service()
    mend = resumes_failing_unforeseen(monkeypatch)
    agent = ReActAgent("clerk", ScriptedModel(service.scripted_model), tools=[service.send_payment])
    async with (
        SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store,
        Runner(agent, checkpoint_store=store, enable_streaming=True) as runner,
        _handling(service, runner) as http,
    ):
        lines = await service.post(http, "/chat", {"message": "Pay the ACME invoice."})
        paused = lines[-1]["event"]["action"]["interrupted"]
        resume_body = {"checkpoint_id": paused["checkpoint_id"], "decision": {"approved": True}}
        status, error = await service.post(http, "/resume", resume_body)
        assert (status, error) == (500, "the run failed: RuntimeError")
        mend()
        lines = await service.post(http, "/resume", resume_body)
        assert await _streamed_answer(lines) == "paid: sent 4200 cents to ACME"


async def test_a_streaming_service_tells_a_max_turns_refusal_from_an_unreadable_checkpoint(
    tmp_path: Path,
) -> None:
    """``examples/streaming_service.py`` answered every resume refusal that was neither a
    checkpoint gone nor one being resumed ``422`` "cannot be resumed by this service" (a retry
    cannot help): a run paused with no model call of its ``max_turns`` left, whose refusal says
    "resume with a higher max_turns", read as a checkpoint no retry resumes. It is a ``422``
    naming the limit (``"max_turns"``), and the decision sent again with a higher one resumes
    it; a checkpoint no resume can read is a ``410``, ``"resumable": false``."""
    service = _streaming_service()
    agent = ReActAgent("clerk", ScriptedModel(service.scripted_model), tools=[service.send_payment])
    async with (
        SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store,
        Runner(agent, checkpoint_store=store, enable_streaming=True) as runner,
        _handling(service, runner) as http,
    ):
        lines = await service.post(http, "/chat", {"message": "Pay ACME.", "max_turns": 1})
        paused = lines[-1]["event"]["action"]["interrupted"]["checkpoint_id"]
        resume = {"checkpoint_id": paused, "decision": {"approved": True}}
        status, text = await _answer(http, "/resume", resume)
        body = _json_body(text)
        assert status == 422 and "resume with a higher max_turns" in body["error"], text
        assert (body["max_turns"], body["kept"], body["resumable"]) == (1, True, True), body
        lines = await service.post(http, "/resume", resume | {"max_turns": 2})
        assert await _streamed_answer(lines) == "paid: sent 4200 cents to ACME"

        lines = await service.post(http, "/chat", {"message": "Pay ACME."})
        paused = lines[-1]["event"]["action"]["interrupted"]["checkpoint_id"]
        await store.put(paused, b"\x00 not a checkpoint")
        resume = {"checkpoint_id": paused, "decision": {"approved": True}}
        status, text = await _answer(http, "/resume", resume)
        body = _json_body(text)
        assert status == 410 and "is not a pyadk checkpoint" in body["error"], text
        assert (body["kept"], body["resumable"]) == (True, False), body

        # Edited under a whole summary header, its length kept: the service read the header
        # alone (a listing) and answered 503 "resumable" for good; the resume's reason is 410.
        lines = await service.post(http, "/chat", {"message": "Pay ACME."})
        paused = lines[-1]["event"]["action"]["interrupted"]["checkpoint_id"]
        whole = await store.get(paused)
        assert whole is not None and whole.endswith(b"}")
        await store.put(paused, whole[:-1] + b" ")
        resume = {"checkpoint_id": paused, "decision": {"approved": True}}
        status, text = await _answer(http, "/resume", resume)
        assert status == 410 and "checksum does not match" in _json_body(text)["error"], text


async def test_a_streaming_service_keeps_a_checkpoint_of_another_pyadk_release_resumable(
    tmp_path: Path,
) -> None:
    """A checkpoint written by another pyadk release (a newer worker's pause, resumed by an
    older one in a rolling deploy) is listed with an ``error``, and ``examples/
    streaming_service.py`` answered it ``410`` ``"resumable": false``, though a worker of that
    release resumes it. A ``503``, ``"resumable": true``; the same decision, once a worker that
    reads it serves it (here: its bytes as this release wrote them), resumes it."""
    service = _streaming_service()
    agent = ReActAgent("clerk", ScriptedModel(service.scripted_model), tools=[service.send_payment])
    async with (
        SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store,
        Runner(agent, checkpoint_store=store, enable_streaming=True) as runner,
        _handling(service, runner) as http,
    ):
        lines = await service.post(http, "/chat", {"message": "Pay ACME."})
        paused = lines[-1]["event"]["action"]["interrupted"]["checkpoint_id"]
        written = await store.get(paused)
        assert written is not None
        line, _, rest = written.partition(b"\n")
        header = json.loads(line)
        newer = json.dumps(header | {"version": codec.VERSION + 1}).encode()
        await store.put(paused, newer + b"\n" + rest)
        resume = {"checkpoint_id": paused, "decision": {"approved": True}}
        status, text = await _answer(http, "/resume", resume)
        body = _json_body(text)
        assert status == 503 and "a newer pyadk wrote it" in body["error"], text
        assert (body["kept"], body["resumable"]) == (True, True), body
        await store.put(paused, written)  # a worker of the release that reads it
        lines = await service.post(http, "/resume", resume)
        assert await _streamed_answer(lines) == "paid: sent 4200 cents to ACME"


@adk.actions.action(adk.actions.InputEvent)
def _pause_no_checkpoint_holds(
    event: adk.actions.InputEvent, ctx: adk.actions.ActionContext
) -> None:
    raise adk.Interrupt({"what": object()})  # info a checkpoint cannot hold: the save fails


async def test_a_streaming_services_new_run_failing_at_its_first_event_is_not_a_kept_checkpoint(
    tmp_path: Path,
) -> None:
    """A ``/chat`` run whose first event is a ``CheckpointError`` (its pause could not be saved)
    was answered as a resume of a checkpoint the service cannot resume: ``422`` "checkpoint None
    cannot be resumed", ``"kept": true``, of a checkpoint that never was. It is the run's own
    end, streamed as any run's is; the body's stray ``checkpoint_id`` does not make it a resume."""
    service = _streaming_service()
    agent = adk.actions.ActionAgent("asker", actions=[_pause_no_checkpoint_holds])
    async with (
        SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store,
        Runner(agent, checkpoint_store=store) as runner,
        _handling(service, runner) as http,
    ):
        for body in ({"message": "go"}, {"message": "go", "checkpoint_id": "c-1"}):
            lines = await service.post(http, "/chat", body)
            assert isinstance(lines, list), lines  # a 200 stream, not (status, error)
            ended = adk.AgentEvent.from_dict(lines[-1]["event"])
            assert ended.error is not None and ended.error.type == "CheckpointError"
            assert "cannot be stored in a checkpoint" in ended.error.message


async def test_a_stalled_client_whose_run_timed_out_then_leaves_logs_no_context_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The client stops reading mid-stream: a send of the body waits (as uvicorn's does while its
    write buffer is full), and the run's ``REQUEST_TIMEOUT`` cancels the response's task there,
    outside the body, which stays suspended at a ``yield``. When the response ends (the client
    hangs up), ``SessionStream`` closes the body from the request's task: another contextvars
    Context than the response's task the body ran in. A context attached in the body and detached in its
    ``finally`` then fails (``ContextVar.reset``), which OpenTelemetry logs as "Failed to detach
    context". Nothing may be logged, and the trace keeps its shape: the request's span ended, the
    run's spans under it."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    service = _example("agent_service")
    app = service.build_app(tmp_path / "checkpoints.db", provider)
    stalled: list[bool] = []
    cut = asyncio.Event()

    async def stalling(scope: Any, receive: Any, send: Any) -> None:
        """The app, the first request's client no longer reading after the body's first piece:
        its next send waits until cancelled."""
        pieces = 0

        async def waiting(message: Any) -> None:
            nonlocal pieces
            if message["type"] == "http.response.body" and not stalled:
                pieces += 1
                if pieces > 1:
                    stalled.append(True)
                    try:
                        await asyncio.Event().wait()
                    finally:
                        cut.set()
            await send(message)

        await app(scope, receive, waiting)

    with caplog.at_level(logging.DEBUG, logger="opentelemetry.context"):
        async with _serving(stalling) as served:
            reader, writer = await _open(served.port, "/sessions/s1/messages", {"message": "2+3?"})
            await reader.readuntil(b"event: ")  # the body's first piece came: now it stalls
            await cut.wait()  # the run's timeout cancelled the stalled send
            writer.close()
            await served.connections_closed()
            await served.requests_ended(1)
            # The session's lock was given back: it takes its next message.
            status, text = await _answer(served.port, "/sessions/s1/messages", {"message": "2+3?"})
            assert status == 200 and "The total is 5." in text

    logged = [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry")]
    assert logged == []
    finished = spans.get_finished_spans()
    requests = [s for s in finished if s.name == "POST /sessions/{session_id}/messages"]
    runs = [s for s in finished if s.name == "invoke_agent clerk"]
    assert len(requests) == len(runs) == 2
    by_start = sorted(runs, key=lambda s: s.start_time or 0)
    for request, run in zip(
        sorted(requests, key=lambda s: s.start_time or 0), by_start, strict=True
    ):
        assert run.parent is not None and run.parent.span_id == request.context.span_id
        assert run.context.trace_id == request.context.trace_id


# --------------------------------------------------------------------------------------------------
# The store going away, and coming back


@pytest.fixture
def redis_port() -> Iterator[int]:
    """A loopback port held for the test's own Redis (``hold_port``): killed and started again on
    it (``_own_redis``), the server finds it free, not taken meanwhile by an outgoing connection
    (its client's own, retrying, among them) or another server binding port 0."""
    with contextlib.closing(hold_port()) as held:
        port: int = held.getsockname()[1]
        yield port


@contextlib.contextmanager
def _own_redis(
    directory: Path, port: int, *, durable: bool = True, options: tuple[str, ...] = ()
) -> Iterator[subprocess.Popen[bytes]]:
    """A redis-server of the test's own on ``port``; ``durable``: keeping its data in
    ``directory`` with every write on disk before it is answered (``appendfsync always``), as a
    production Redis holding checkpoints must: killed and started again, it has them all."""
    binary = find_redis_server()
    if binary is None:
        pytest.skip("redis-server is not installed")
    command = [
        binary,
        "--port", str(port),
        "--bind", "127.0.0.1",
        "--dir", str(directory),
        "--save", "",
        "--appendonly", "yes" if durable else "no",
        "--appendfsync", "always",
        *options,
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        while True:
            assert process.poll() is None, "redis-server did not start"
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", port), 1) as s,
            ):
                s.sendall(b"PING\r\n")
                if s.recv(64).startswith(b"+PONG"):
                    break
            time.sleep(0.02)
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


async def test_a_service_whose_store_is_down_says_so_and_serves_on_then_resumes(
    tmp_path: Path,
    redis_port: int,
) -> None:
    """The checkpoints' Redis is killed while a run waits for approval. The approval's request
    was answered with nothing (streaming_service: the connection dropped, the handler's
    ``CheckpointStoreError`` unhandled, since it is no ``CheckpointError``): it must be a 503
    saying the store failed, runs that need no store are served meanwhile, and once the server
    is back (its data on disk) the approval resumes the run."""
    service = _streaming_service()
    port = redis_port
    store = RedisCheckpointStore(f"redis://127.0.0.1:{port}/0", timeout=5)
    agent = ReActAgent("clerk", ScriptedModel(service.scripted_model), tools=[service.send_payment])
    async with (
        store,
        Runner(agent, checkpoint_store=store, enable_streaming=True) as runner,
        _handling(service, runner) as http,
    ):
        with _own_redis(tmp_path, port) as redis:
            lines = await service.post(http, "/chat", {"message": "Pay the ACME invoice."})
            paused = lines[-1]["event"]["action"]["interrupted"]
            redis.kill()  # SIGKILL: no goodbye to its clients
            redis.wait()

        resume = {"checkpoint_id": paused["checkpoint_id"], "decision": {"approved": True}}
        status, error = await service.post(http, "/resume", resume)
        assert status == 503
        assert error.startswith("redis checkpoint store at redis://127.0.0.1:")
        assert "claim of checkpoint" in error and "failed: ConnectionError" in error
        lines = await service.post(http, "/chat", {"message": "Just break, please."})
        assert lines[-1]["event"]["error"]["type"] == "ModelError"  # served all the same
        status, error = await service.post(http, "/pending", {}, method="GET")
        assert status == 503

        with _own_redis(tmp_path, port):  # back, with what it had
            lines = await service.post(http, "/resume", resume)
            assert await _streamed_answer(lines) == "paid: sent 4200 cents to ACME"


async def test_a_starlette_service_whose_store_is_down_answers_503_then_resumes(
    tmp_path: Path,
    redis_port: int,
) -> None:
    """As above, for ``examples/agent_service.py`` (docs/service.md's table): the approval sent
    while the checkpoints' Redis is down was a bare ``500 Internal Server Error``, the handler's
    ``CheckpointStoreError`` unhandled, which tells the client neither that nothing ran nor that
    the same decision can be sent again."""
    service = _example("agent_service")
    service.payment_done.set()  # the payment answers at once
    port = redis_port
    async with RedisCheckpointStore(f"redis://127.0.0.1:{port}/0", timeout=5) as store:
        app = service.build_app(tmp_path / "unused.db", TracerProvider(), store=store)
        async with _serving(app) as served:
            with _own_redis(tmp_path, port) as redis:
                checkpoint_id = await _paused(served.port)
                redis.kill()
                redis.wait()

            path = f"/resume/{checkpoint_id}"
            status, text = await _answer(served.port, path, {"decision": True})
            assert status == 503, text
            assert "claim of checkpoint" in text and "failed: ConnectionError" in text
            status, text = await _answer(served.port, "/sessions/s2/messages", {"message": "2+3?"})
            assert status == 200 and "The total is 5." in text  # served all the same
            status, text = await _answer(served.port, "/sessions/s3/messages", {"message": "pay"})
            assert status == 200 and "could not save checkpoint" in text  # said, not a pause
            assert '"event: paused' not in text and "failed: ConnectionError" in text

            with _own_redis(tmp_path, port):
                status, text = await _answer(served.port, path, {"decision": True})
                assert status == 200 and "Paid: sent 4200 cents to ACME." in text


async def test_a_redis_that_evicts_keys_when_full_is_named_before_a_claim_relies_on_it(
    tmp_path: Path, redis_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """A Redis with a memory limit and an eviction policy (managed Redis often comes with
    ``maxmemory-policy volatile-lru``) drops keys with an expiry first when it is full: a claim
    is one, so a second replica took the checkpoint a first one was resuming, and both ran the
    approved call; under an ``allkeys-*`` policy paused runs are dropped too. Nothing said so.
    The store asks the server once, at its first claim, and warns."""
    port = redis_port
    url = f"redis://127.0.0.1:{port}/0"
    with _own_redis(tmp_path, port, durable=False):
        async with RedisCheckpointStore(url) as admin:
            redis = admin._clients.get() or await admin._clients.bind()  # the store's own client
            await redis.redis.config_set("maxmemory", "4mb")
            await redis.redis.config_set("maxmemory-policy", "volatile-lru")
        first, second = RedisCheckpointStore(url, ttl=3600), RedisCheckpointStore(url)
        async with first, second:
            with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
                assert await first.claim("pay-7", "replica-a")
            warned = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
            assert len(warned) == 1
            assert "maxmemory-policy volatile-lru" in warned[0]
            assert "resumed twice at once" in warned[0] and "noeviction" in warned[0]
            assert "paused runs lost" in warned[0]  # they expire (ttl=), so they are evictable

            # Why: paused runs that expire (ttl=) fill the server, and the claim is evicted. Redis's
            # LRU is sampled, not exact: which write evicts the claim varies, so the runs are
            # written until it has gone (a few hundred at most; 4 MiB holds about sixty).
            claim_key = first._claim_key("pay-7")
            probe = (first._clients.get() or await first._clients.bind()).redis
            for n in range(2000):
                await first.put(f"run-{n}", b"x" * 65536)
                if not await probe.exists(claim_key):
                    break
            assert not await probe.exists(claim_key)
            assert await second.claim("pay-7", "replica-b")  # taken while replica-a holds it

            caplog.clear()
            assert await first.claim("pay-8", "replica-a")  # asked once per store
            assert not [r for r in caplog.records if r.name == "adk.checkpoint"]

        async with RedisCheckpointStore(url) as admin:
            redis = admin._clients.get() or await admin._clients.bind()
            await redis.redis.config_set("maxmemory-policy", "noeviction")
            caplog.clear()
            assert await admin.claim("pay-9", "replica-a")
            assert not [r for r in caplog.records if r.name == "adk.checkpoint"]
            # Full: a write is refused (the pause says so), nothing is evicted.
            with pytest.raises(CheckpointStoreError, match="OutOfMemoryError"):
                for n in range(100):
                    await admin.put(f"more-{n}", b"x" * 65536)

    # A managed Redis that refuses CONFIG cannot be asked: its claims work, nothing is said.
    with _own_redis(tmp_path, port, durable=False, options=("--rename-command", "CONFIG", "")):
        async with RedisCheckpointStore(url) as store:
            caplog.clear()
            assert await store.claim("pay-10", "replica-a")
            assert store._eviction_checked
            assert not [r for r in caplog.records if r.name == "adk.checkpoint"]


async def test_a_store_whose_first_claims_come_at_once_warns_of_eviction_once(
    tmp_path: Path, redis_port: int, caplog: pytest.LogCaptureFixture
) -> None:
    """The eviction check is made once per store even when its first claims come together (a
    replica starting under a burst of resumes): each one asked the server and warned."""
    port = redis_port
    url = f"redis://127.0.0.1:{port}/0"
    with _own_redis(tmp_path, port, durable=False):
        async with RedisCheckpointStore(url) as store:
            redis = store._clients.get() or await store._clients.bind()
            await redis.redis.config_set("maxmemory", "64mb")
            await redis.redis.config_set("maxmemory-policy", "allkeys-lru")
            with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
                taken = await asyncio.gather(*(store.claim(f"run-{n}", "a") for n in range(4)))
            assert taken == [True] * 4
            warned = [r.getMessage() for r in caplog.records if r.name == "adk.checkpoint"]
            assert len(warned) == 1 and "maxmemory-policy allkeys-lru" in warned[0]


# --------------------------------------------------------------------------------------------------
# Replicas in real processes over one store, and processes killed (SIGKILL) at the worst moment

REPLICA = """
import asyncio, os, signal, sys
from pathlib import Path
from adk import CheckpointError, Message, Role, Runner, tool
from adk.checkpoint import PostgresCheckpointStore, RedisCheckpointStore, SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

kind, where, name, mode, ledger, go = sys.argv[1:7]

@tool(require_approval=True)
async def pay(amount: int) -> str:
    '''Pay an amount once a person approves it.'''
    print("paying", flush=True)
    await asyncio.sleep(0.2)  # long enough for the other replicas to come
    with open(ledger, "a") as f:
        f.write(f"{amount}\\n")
    if mode == "die-after-paying":
        os.kill(os.getpid(), signal.SIGKILL)  # paid, and gone before the run could say so
    return f"paid {amount}"

def reply(messages):
    if messages[-1].role == Role.TOOL:
        if mode == "die-before-the-model":
            print("asking", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # paid, the result in, gone as the model is asked
        return Reply(text=f"done: {messages[-1].content}")
    return Reply(tool_calls=[tool_call("pay", {"amount": int(messages[-1].content)})])

def store():
    if kind == "sqlite":
        return SQLiteCheckpointStore(where, claim_ttl=1.0)
    if kind == "redis":
        return RedisCheckpointStore(where, prefix=name, claim_ttl=1.0)
    return PostgresCheckpointStore(where, table=name, claim_ttl=1.0)

async def main():
    async with store() as checkpoints:
        runner = Runner(ReActAgent("payer", ScriptedModel(reply), tools=[pay]), checkpoint_store=checkpoints)
        if mode == "pause-forever":
            # Pauses again and again under one id, with a big session: a resumed run rewrites its
            # own checkpoint (a new run may not replace one still waiting), and this model asks
            # for another payment after each refusal, so every resume pauses anew.
            def ask_again(messages):
                rounds = sum(1 for m in messages if m.role == Role.TOOL)
                return Reply(tool_calls=[tool_call("pay", {"amount": rounds + 1})])

            runner = Runner(ReActAgent("payer", ScriptedModel(ask_again), tools=[pay]), checkpoint_store=checkpoints)
            paused = await runner.invoke("1", checkpoint_id="big", session={"notes": "x" * (1 << 20)})
            n = 1
            while True:
                # Keyed by its point: plain data after a plain resume that paused for another
                # call's approval is refused as maybe that decision sent again (interrupts.md).
                assert paused.interrupt is not None
                refused = {point: {"approved": False} for point in paused.interrupt.point_ids}
                paused = await runner.invoke_resume("big", refused)
                n += 1
                if n == 3:
                    print("ready", flush=True)
        print("ready", flush=True)
        while not Path(go).exists():
            await asyncio.sleep(0.005)
        try:
            result = await runner.invoke_resume(sys.argv[7], {"approved": True})
            print("result", result.text, flush=True)
        except CheckpointError as exc:
            print("refused", type(exc).__name__, exc, flush=True)

asyncio.run(main())
"""


@pytest.fixture(params=["sqlite", "redis", "postgres"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str]:
    """(kind, where, name): one backend's real server, as every replica reaches it."""
    name = f"chaos_{uuid.uuid4().hex[:12]}"
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "checkpoints.db"), name
    if request.param == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        return "redis", redis_server.url, f"{name}:"
    pg: PostgresServer = request.getfixturevalue("postgres_server")
    return "postgres", pg.dsn, name


def _store_of(shared: tuple[str, str, str], **options: Any) -> Any:
    kind, where, name = shared
    if kind == "sqlite":
        return SQLiteCheckpointStore(where, **options)
    if kind == "redis":
        return RedisCheckpointStore(where, prefix=name, **options)
    return PostgresCheckpointStore(where, table=name, **options)


@contextlib.asynccontextmanager
async def _replicas(
    shared: tuple[str, str, str], mode: str, tmp_path: Path, count: int, *extra: str
) -> AsyncIterator[list[asyncio.subprocess.Process]]:
    """``count`` replica processes, each told ready; killed if still running at the end."""
    args = (*shared, mode, str(tmp_path / "ledger"), str(tmp_path / "go"), *extra)
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            REPLICA,
            *args,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(count)
    ]
    try:
        for process in processes:
            assert await _line(process) == "ready"
        yield processes
    finally:
        for process in processes:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            await process.wait()


async def _line(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode().strip()
    if not line and process.stderr is not None:
        line = "(exited) " + (await process.stderr.read()).decode()[-2000:]
    return line


def _payer(ledger: Path) -> ReActAgent:
    """The replicas' agent, in this process: pays (a line in ``ledger``) once approved."""

    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount once a person approves it."""
        with ledger.open("a") as f:
            f.write(f"{amount}\n")
        return f"paid {amount}"

    def reply(messages: list[adk.Message]) -> Any:
        if messages[-1].role == adk.Role.TOOL:
            return Reply(text=f"done: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay", {"amount": int(messages[-1].content)})])

    return ReActAgent("payer", ScriptedModel(reply), tools=[pay])


async def _lapses(store: Any, checkpoint_id: str) -> None:
    """Until a dead replica's claim has lapsed (polled: a loaded machine delays the store)."""
    for _ in range(1000):
        if await store.claim(checkpoint_id, "probe"):
            await store.release(checkpoint_id, "probe")
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"the claim on {checkpoint_id!r} never lapsed")


async def test_replicas_resuming_one_checkpoint_at_once_pay_once(
    shared_store: tuple[str, str, str], tmp_path: Path
) -> None:
    """Three service replicas (processes, each with its own store object) get the same approval
    at once: one pays; the others are refused while it runs (busy) or after it ended (gone)."""
    async with _store_of(shared_store) as store:
        paused = await Runner(_payer(tmp_path / "ledger"), checkpoint_store=store).invoke("7")
    assert paused.checkpoint_id is not None
    async with _replicas(shared_store, "resume", tmp_path, 3, paused.checkpoint_id) as replicas:
        (tmp_path / "go").touch()  # all three resume at once
        outputs = [(await r.communicate())[0].decode().splitlines() for r in replicas]
    endings = sorted(lines[-1].split(" ", 2)[:2] for lines in outputs)
    assert endings[-1] == ["result", "done:"], outputs
    assert all(
        ending == ["refused", "CheckpointBusyError"]
        or ending == ["refused", "CheckpointNotFoundError"]
        for ending in endings[:-1]
    ), outputs
    assert (tmp_path / "ledger").read_text() == "7\n"


async def test_a_replica_killed_right_after_the_approved_call_leaves_the_checkpoint_resumable(
    shared_store: tuple[str, str, str], tmp_path: Path
) -> None:
    """A replica dies (SIGKILL) the moment the approved call has run, before it returned (its
    result is not recorded: nothing is). Left in the store: the
    checkpoint as it was before the resume, whole, and the dead replica's claim, which refuses
    a resume with a clear error until it lapses (claim_ttl); then the checkpoint resumes, and
    the call runs again, as interrupts.md warns (calls behind approvals must be idempotent)."""
    ledger = tmp_path / "ledger"
    async with _store_of(shared_store, claim_ttl=1.0) as store:
        paused = await Runner(_payer(tmp_path / "ledger"), checkpoint_store=store).invoke("4")
        checkpoint_id = paused.checkpoint_id
        assert checkpoint_id is not None
        before = await store.get(checkpoint_id)
        async with _replicas(shared_store, "die-after-paying", tmp_path, 1, checkpoint_id) as (
            replica,
        ):
            (tmp_path / "go").touch()
            assert await _line(replica) == "paying"
            assert await replica.wait() == -signal.SIGKILL
        assert ledger.read_text() == "4\n"
        assert await store.get(checkpoint_id) == before  # nothing half-written, nothing lost

        runner = Runner(_payer(tmp_path / "ledger"), checkpoint_store=store)
        with pytest.raises(CheckpointBusyError, match=r"process died, its claim lapses within 1 s"):
            await runner.invoke_resume(checkpoint_id, {"approved": True})
        await _lapses(store, checkpoint_id)
        result = await runner.invoke_resume(checkpoint_id, {"approved": True})
        assert result.text == "done: paid 4"
        assert ledger.read_text() == "4\n4\n"  # paid twice: the documented hazard
        assert await store.get(checkpoint_id) is None


async def test_a_replica_killed_after_the_approved_call_returned_leaves_it_recorded(
    shared_store: tuple[str, str, str], tmp_path: Path
) -> None:
    """A replica dies (SIGKILL) once the approved call has returned, as it asks the model: the
    call's result was recorded in the checkpoint before that, so once the dead replica's claim
    lapses the checkpoint resumes from the result, and the call does not run again."""
    ledger = tmp_path / "ledger"
    async with _store_of(shared_store, claim_ttl=1.0) as store:
        paused = await Runner(_payer(tmp_path / "ledger"), checkpoint_store=store).invoke("4")
        checkpoint_id = paused.checkpoint_id
        assert checkpoint_id is not None
        before = await store.get(checkpoint_id)
        async with _replicas(shared_store, "die-before-the-model", tmp_path, 1, checkpoint_id) as (
            replica,
        ):
            (tmp_path / "go").touch()
            assert await _line(replica) == "paying"
            assert await _line(replica) == "asking"
            assert await replica.wait() == -signal.SIGKILL
        assert ledger.read_text() == "4\n"
        recorded = await store.get(checkpoint_id)
        assert recorded is not None and recorded != before  # the same id, the result recorded

        await _lapses(store, checkpoint_id)
        runner = Runner(_payer(tmp_path / "ledger"), checkpoint_store=store)
        result = await runner.invoke_resume(checkpoint_id, {"approved": True})
        assert result.text == "done: paid 4"
        assert ledger.read_text() == "4\n"  # paid once
        assert await store.get(checkpoint_id) is None


async def test_a_process_killed_while_it_saves_pauses_leaves_a_whole_checkpoint(
    shared_store: tuple[str, str, str], tmp_path: Path
) -> None:
    """A process pausing a run under one id again and again (each resume refused, the model
    asks anew), each save 1 MiB of session, is killed (SIGKILL) in the middle of a save: the
    checkpoint left is a whole one, which resumes."""
    ledger = tmp_path / "ledger"
    async with _replicas(shared_store, "pause-forever", tmp_path, 1) as (writer,):
        writer.kill()  # saving its next pause now, or about to
        await writer.wait()
    async with _store_of(shared_store) as store:
        await _lapses(store, "big")  # the killed writer was resuming it: its claim lapses (1 s)
        result = await Runner(_payer(tmp_path / "ledger"), checkpoint_store=store).invoke_resume(
            "big", {"approved": True}
        )
    assert result.session is not None and result.session["notes"] == "x" * (1 << 20)
    amount = int(ledger.read_text())
    assert amount >= 2 and result.text == f"done: paid {amount}"


async def test_a_resume_whose_store_died_after_the_approved_call_says_the_run_finished(
    tmp_path: Path,
    redis_port: int,
) -> None:
    """The checkpoints' Redis dies while the approved call runs; the run finishes, and deleting
    its checkpoint fails. The error was the store's bare ``delete of checkpoint ... failed``,
    which reads like the "nothing ran, send it again" of a store down at the start (a 503 in
    docs/service.md): the approval was sent again, and the payment made twice. It must say the
    run finished and that resuming the checkpoint again runs it again."""
    port = redis_port
    ledger = tmp_path / "ledger"
    holder: list[subprocess.Popen[bytes]] = []

    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount once a person approves it."""
        with ledger.open("a") as f:
            f.write(f"{amount}\n")
        holder[0].kill()  # the store dies while the payment is made
        holder[0].wait()
        return f"paid {amount}"

    def reply(messages: list[adk.Message]) -> Any:
        if messages[-1].role == adk.Role.TOOL:
            return Reply(text=f"done: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay", {"amount": 3})])

    agent = ReActAgent("payer", ScriptedModel(reply), tools=[pay])
    async with RedisCheckpointStore(f"redis://127.0.0.1:{port}/0", timeout=5) as store:
        runner = Runner(agent, checkpoint_store=store)
        with _own_redis(tmp_path, port) as redis:
            paused = await runner.invoke("pay 3")
            checkpoint_id = paused.checkpoint_id
            assert checkpoint_id is not None
            before = await store.get(checkpoint_id)
            holder.append(redis)
            with pytest.raises(CheckpointStoreError) as caught:
                await runner.invoke_resume(checkpoint_id, {"approved": True})
        message = str(caught.value)
        assert message.startswith(f"the resumed run of checkpoint {checkpoint_id!r} finished")
        assert "resuming it again would run again what this resume ran" in message
        assert "with no record of it kept, for 'agent:payer/tool:pay#" in message  # store down
        assert "failed: ConnectionError" in message  # the store's own words follow
        assert caught.value.operation in ("get", "delete")
        assert ledger.read_text() == "3\n"

        with _own_redis(tmp_path, port):  # back: the checkpoint is there, as the error said
            assert await store.get(checkpoint_id) == before


async def _drop_cancelled_timers() -> None:
    """Until the event loop has dropped every timer cancelled so far. asyncio keeps a cancelled
    ``call_later`` handle in its heap, with the contextvars Context it was made in, until it
    comes first in the heap, or until cancelled handles are over 100 and over half the heap,
    when it drops them all at its next step; 200 more cancelled ones make it so. The slow tool's
    ``asyncio.sleep(3600)``, cancelled as its client left, is such a handle, and its Context holds
    the current span (22 objects a session): whether a round's were still there when counted
    hung on when uvicorn's 0.1 s tick last let the heap's head go, so the count went up and down
    by one round's worth (880) under load. Only cancelled timers go: a live one a run left
    behind is still counted."""
    loop = asyncio.get_running_loop()
    for handle in [loop.call_later(3600, int) for _ in range(200)]:
        handle.cancel()
    await asyncio.sleep(0)  # the loop's next step drops them


async def test_clients_leaving_mid_stream_under_load_leave_nothing_behind(tmp_path: Path) -> None:
    """Rounds of concurrent sessions whose clients hang up mid-stream (a tool is running): every
    session's lock is given back, no task is left, and the objects alive stay flat from round to
    round (counted after the loop dropped its cancelled timers and a collection: what grows per
    run would show as thousands)."""
    service = _example("agent_service")
    app = service.build_app(tmp_path / "checkpoints.db", TracerProvider())
    sessions, rounds = 40, 6

    async def leave_mid_stream(port: int, session: str) -> None:
        reader, writer = await _open(port, f"/sessions/{session}/messages", {"message": "invoice?"})
        try:
            assert b" 200 " in await reader.readline()
            await reader.readuntil(b"event: event")  # the model's call of the slow tool came
        finally:
            writer.close()

    async with _serving(app) as served:
        counts, tasks = [], []
        for n in range(rounds):
            names = [f"r{n}-{i}" for i in range(sessions)]
            await asyncio.gather(*(leave_mid_stream(served.port, name) for name in names))
            await served.connections_closed()
            await served.requests_ended((n + 1) * sessions)
            await _drop_cancelled_timers()
            gc.collect()
            counts.append(len(gc.get_objects()))
            tasks.append(len(asyncio.all_tasks()))
        # Every lock was given back: each session takes its next message.
        status, text = await _answer(
            served.port, f"/sessions/r{rounds - 1}-0/messages", {"message": "2+3?"}
        )
        assert status == 200 and "The total is 5." in text
    assert len(set(tasks)) == 1, tasks
    # Two objects per session of slack (the example kept a lock per session it had seen until
    # test_a_service_keeps_no_lock_for_a_session_with_no_run_going_on); a run that left anything
    # behind would add tens per session.
    assert counts[-1] - counts[2] <= 2 * sessions * (rounds - 3), counts


async def test_a_service_keeps_no_lock_for_a_session_with_no_run_going_on(tmp_path: Path) -> None:
    """A service that runs for weeks sees a new session id for each conversation: the lock that
    keeps a session to one run at a time must go when the run ends (answered, timed out, its
    client gone), or the service holds one per session it ever saw. Counted as the asyncio
    locks alive after a collection, before and after many sessions' runs."""
    service = _example("agent_service")
    service.looking.clear()
    app = service.build_app(tmp_path / "checkpoints.db", TracerProvider())
    sessions = 40

    def locks() -> int:
        gc.collect()
        return sum(type(o) is asyncio.Lock for o in gc.get_objects())

    async def leave_mid_stream(port: int, session: str) -> None:
        reader, writer = await _open(port, f"/sessions/{session}/messages", {"message": "invoice?"})
        try:
            assert b" 200 " in await reader.readline()
            await reader.readuntil(b"event: event")  # the model's call of the slow tool came
        finally:
            writer.close()

    async with _serving(app) as served:
        status, _ = await _answer(served.port, "/sessions/warm/messages", {"message": "2+3?"})
        assert status == 200
        before = locks()
        answered = await asyncio.gather(
            *(
                _answer(served.port, f"/sessions/a{i}/messages", {"message": "2+3?"})
                for i in range(sessions)
            )
        )
        assert all(status == 200 and "The total is 5." in text for status, text in answered)
        await asyncio.gather(*(leave_mid_stream(served.port, f"b{i}") for i in range(sessions)))
        await served.connections_closed()
        await served.requests_ended(1 + 2 * sessions)
        after = locks()
        # A session that ran before takes its next message (its lock was given back, then made again).
        status, text = await _answer(served.port, "/sessions/b0/messages", {"message": "2+3?"})
        assert status == 200 and "The total is 5." in text
    assert after - before <= 2, (before, after)  # was one per session: 80


async def test_a_starlette_service_says_when_a_finished_resume_left_its_checkpoint(
    tmp_path: Path,
    redis_port: int,
) -> None:
    """The store dies while the approved payment is made: the client got the answer, then a
    stream that broke off (the resume's ``CheckpointStoreError`` raised in the response's body),
    and no word that the approval must not be sent again. It must end with an ``error`` event
    saying so."""
    service = _example("agent_service")
    service.payment_done.clear()
    port = redis_port
    async with RedisCheckpointStore(f"redis://127.0.0.1:{port}/0", timeout=5) as store:
        app = service.build_app(tmp_path / "unused.db", TracerProvider(), store=store)
        async with _serving(app) as served:
            with _own_redis(tmp_path, port) as redis:
                checkpoint_id = await _paused(served.port)
                path = f"/resume/{checkpoint_id}"
                approving = asyncio.create_task(_answer(served.port, path, {"decision": True}))
                await service.paying.wait()
                redis.kill()  # the store dies while the payment is made
                redis.wait()
                service.payment_done.set()
                status, text = await approving
    assert status == 200 and "Paid: sent 4200 cents to ACME." in text
    error = text[text.index("event: error") :]
    assert f"the resumed run of checkpoint {checkpoint_id!r} finished" in error
    assert "resuming it again would run again what this resume ran" in error
    assert text.endswith("0\r\n\r\n")  # the stream ended, not broken off


# --------------------------------------------------------------------------------------------------
# Shutting down with runs in flight


async def test_a_streaming_service_says_when_a_finished_resume_left_its_checkpoint(
    tmp_path: Path,
    redis_port: int,
) -> None:
    """streaming_service, as bca7efb made agent_service: the store dies while the approved call
    runs, the run finishes and its checkpoint cannot be deleted. The ``CheckpointStoreError``
    raised after the answer went out of the handler: the stream broke off (the client read no
    end), with no word that the approval must not be sent again. It must end with an error line
    saying the run finished, and the stream's end."""
    service = _streaming_service()
    port = redis_port
    holder: list[subprocess.Popen[bytes]] = []

    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount once a person approves it."""
        holder[0].kill()  # the store dies while the payment is made
        holder[0].wait()
        return f"paid {amount}"

    def reply(messages: list[adk.Message]) -> Any:
        if messages[-1].role == adk.Role.TOOL:
            return Reply(text=f"done: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay", {"amount": 3})])

    agent = ReActAgent("payer", ScriptedModel(reply), tools=[pay])
    store = RedisCheckpointStore(f"redis://127.0.0.1:{port}/0", timeout=5)
    async with (
        store,
        Runner(agent, checkpoint_store=store, enable_streaming=True) as runner,
        _handling(service, runner) as http,
    ):
        with _own_redis(tmp_path, port) as redis:
            lines = await service.post(http, "/chat", {"message": "pay 3"})
            paused = lines[-1]["event"]["action"]["interrupted"]
            holder.append(redis)
            resume = {"checkpoint_id": paused["checkpoint_id"], "decision": True}
            lines = await service.post(http, "/resume", resume)
    said = [line["event"]["output"]["message"]["content"] for line in lines if "event" in line]
    assert said == ["paid 3", "done: paid 3"]  # the payment's result, then the answer
    error = lines[-1]["error"]
    assert f"the resumed run of checkpoint {paused['checkpoint_id']!r} finished" in error
    assert "resuming it again would run again what this resume ran" in error


async def test_a_graceful_shutdown_cancels_the_runs_in_flight_and_leaves_their_checkpoints(
    tmp_path: Path,
) -> None:
    """uvicorn stops with a run streaming (its tool running) and a resume paying: past
    ``timeout_graceful_shutdown`` it cancels both and ends the lifespan (``async with runner``,
    the store) without waiting for them to unwind. Each is cancelled as when its client hangs
    up: the tool is cancelled, the resume's claim is given back, and its checkpoint stays as it
    was, so the approval resumes on the next start."""
    service = _example("agent_service")
    service.payment_done.clear()
    database = tmp_path / "checkpoints.db"
    served = _Served(service.build_app(database, TracerProvider()))
    served.server.config.timeout_graceful_shutdown = 0.5  # production: seconds, not half of one
    serving = asyncio.create_task(served.server.serve())
    while not served.server.started:
        assert not serving.done()
        await asyncio.sleep(0.01)
    checkpoint_id = await _paused(served.port)
    async with SQLiteCheckpointStore(database) as store:
        before = await store.get(checkpoint_id)

    _, streaming = await _open(served.port, "/sessions/s2/messages", {"message": "invoice?"})
    _, resuming = await _open(served.port, f"/resume/{checkpoint_id}", {"decision": True})
    await asyncio.gather(service.looking.wait(), service.paying.wait())
    served.server.should_exit = True
    await serving
    await served.requests_ended(3)  # the two cut off have unwound too
    streaming.close()
    resuming.close()

    async with SQLiteCheckpointStore(database) as store:
        assert await store.get(checkpoint_id) == before  # kept as it was
        assert await store.claim(checkpoint_id, "next-start")  # given back, not left to lapse
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


# --------------------------------------------------------------------------------------------------
# MCP servers killed mid-call


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_an_mcp_server_killed_mid_call_fails_the_call_not_the_run_and_comes_back(
    transport: str,
) -> None:
    """The MCP server dies while a run's tool call runs on it (the demo server's ``die`` tool
    ends its process). The run goes on: the model reads that the connection was lost and the
    call was not repeated (it may have run); the next run reconnects, to a new stdio process,
    or to the HTTP server started again on its port. Over HTTP only that call's exchange is
    known lost (a proxy dropping it reads the same), so the session is kept until a request
    finds the server gone, and the call's error says it is not sent again rather than that
    the next call reconnects."""

    def reply(messages: list[adk.Message]) -> Any:
        last = messages[-1]
        if last.role == adk.Role.TOOL:
            return f"{last.name}: {last.content}"
        return Reply(tool_calls=[tool_call(last.content, {})])

    process = HTTPServerProcess()
    if transport == "http":
        await asyncio.to_thread(process.start)
        server: Any = HTTPServer(process.url)
    else:
        server = StdioServer(sys.executable, [str(STDIO_SCRIPT)])
    try:
        toolset = MCPToolset(server)
        agent = ReActAgent("ops", ScriptedModel(reply), tools=[toolset])
        async with Runner(agent) as runner:
            first = int((await runner.invoke("pid")).text.split("pid: ")[1])
            died = await runner.invoke("die")
            assert died.text.startswith("die: Error: the connection to MCP server")
            assert "was lost while tool 'die' was running" in died.text
            if transport == "http":
                assert "the call is not sent again, as the tool may have run" in died.text
            else:
                assert "it will reconnect on the next call" in died.text
            if transport == "http":
                await asyncio.to_thread(process.wait)
                await asyncio.to_thread(process.start)  # same port
            second = int((await runner.invoke("pid")).text.split("pid: ")[1])
            assert second != first
    finally:
        if transport == "http":
            process.stop()


# --------------------------------------------------------------------------------------------------
# PostgreSQL stopped and started again


@contextlib.contextmanager
def _postgres_stopped(server: PostgresServer) -> Iterator[None]:
    """Stop ``server`` (a fast shutdown, as an operator's ``pg_ctl stop``), then start it again
    on its port, its data as it was, when the block ends."""
    data = server.directory / "data"
    os.kill(int((data / "postmaster.pid").read_text().split()[0]), signal.SIGINT)
    for _ in range(3000):  # it removes its pid file once stopped (60 s guard)
        if not (data / "postmaster.pid").exists():
            break
        time.sleep(0.02)
    else:
        raise AssertionError("postgres did not stop")
    # Its port held while it is down (``hold_port``): the pool's reconnects (as their source
    # port), or another server, could take it, and it would not start again on it.
    held = hold_port(server.port)
    try:
        yield
    finally:
        with held:  # let go once it listens on it again
            bindir = find_postgres_bindir()
            assert bindir is not None
            user = _RunAs.of(_postgres_account())
            command = [str(bindir / "postgres"), "-D", str(data), "-p", str(server.port)]
            for setting in ("listen_addresses=127.0.0.1", "unix_socket_directories=", "fsync=off"):
                command += ["-c", setting]
            process = subprocess.Popen(
                command,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                user=user.uid,
                group=user.gid,
                extra_groups=user.extra_groups,
                env=user.env,
            )
            _restarted.append(process)
            assert _wait_postgres(process, bindir, server.port), "postgres did not start again"


_restarted: list[subprocess.Popen[bytes]] = []


async def test_a_postgres_stopped_while_a_run_waits_fails_clearly_then_resumes(
    tmp_path: Path,
) -> None:
    """PostgreSQL is stopped while a run waits for approval: the approval's resume is refused
    with the store's error (nothing ran), a run pausing meanwhile says it could not save, and once
    the server is back the pool's dead connections are replaced and the approval resumes."""
    ledger = tmp_path / "ledger"
    try:
        with run_postgres() as server:
            store = PostgresCheckpointStore(server.dsn, table="chaos", timeout=5)
            async with store, Runner(_payer(ledger), checkpoint_store=store) as runner:
                paused = await runner.invoke("5")
                assert paused.checkpoint_id is not None
                with _postgres_stopped(server):
                    with pytest.raises(CheckpointStoreError, match="claim of checkpoint"):
                        await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
                    with pytest.raises(adk.RunError, match="could not save checkpoint 'other'"):
                        await runner.invoke("6", checkpoint_id="other")
                assert not ledger.exists()
                result = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
                assert result.text == "done: paid 5"
                assert ledger.read_text() == "5\n"
                assert await store.get(paused.checkpoint_id) is None
            while _restarted:
                process = _restarted.pop()
                process.send_signal(signal.SIGINT)
                process.wait(30)
    finally:
        for process in _restarted:
            process.kill()
            process.wait()
        _restarted.clear()
