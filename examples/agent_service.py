"""An agent service on Starlette and uvicorn: sessions, Server-Sent Events, approvals, tracing.

What docs/service.md describes, in one program:

- **Shared at startup.** The model client, the tools and the ``Runner`` are made once, in the
  app's lifespan, and used by every request; ``async with runner`` closes them at shutdown.
- ``POST /sessions/{id}/messages`` **streams the run as Server-Sent Events**: ``delta`` events
  with the pieces of each answer as the model writes them, then each run event as
  ``event.to_dict()``. A session is the conversation so far (``adk.run_messages``), kept only
  when a run ended: a run cut off (client gone, timeout) leaves the session as it was, and the
  client sends its message again (keeping it works too: ``adk.run_messages`` answers each call
  the run cut off as not completed, but a tool that ran before the cut may then be asked for
  again; docs/service.md says so). A second
  message to a session whose run is still going is refused with ``409``.
- **A per-request timeout** (``asyncio.timeout``) ends a run that takes too long with an
  ``error`` event; **a client that hangs up** cancels its run (Starlette cancels the response).
- **Approvals.** A payment waits for a person: the run ends with a ``paused`` event carrying the
  checkpoint id, and the session waits for the decision: its next message is refused with ``409``
  and the checkpoint to decide on (the paused turn's messages end with the call no result answers
  yet, which a model API refuses as input). ``POST /resume/{checkpoint_id}`` carries the decision
  keyed by the point id the ``paused`` event showed (``{"decision": {point_id: true}}``, the
  form docs/interrupts.md "Resuming" advises: a decision sent twice after the turn paused again
  for another call is refused, not taken for that call), holding the session as a
  run does, and the resumed turn, whole, becomes the session's
  conversation (a ``404``, the checkpoint gone, ends the wait). Its refusals are told apart
  before the ``200``, by the ``CheckpointError``'s ``reason`` (never by reading the checkpoint's
  bytes): ``404`` for a checkpoint that is gone (stale, or approved already),
  ``409`` for one being resumed now, ``400`` for a decision that does not fit, ``503`` while the
  checkpoint store is down (nothing ran: the decision can be sent again). A checkpoint it
  cannot resume as asked is kept in the store and told apart by what lets it through: ``422``
  for a ``max_turns`` too low for it (a message and a resume may send ``"max_turns"``: sent
  again with a higher one, it resumes; the session waits on it), ``503`` for one paused at a
  tool or a gate this version no longer has, or given run options it does not pass (a fixed
  deployment, a rollback, resumes it; the session waits on it), ``410`` for bytes no resume can
  read, which ends the wait (a resume of it refused from then on); and ``500`` with the
  session's lock given back for anything unforeseen. A store failing as the
  resumed run ends (it ran: the checkpoint is left behind) ends the stream with an ``error``
  event saying so, not a stream broken off.
- **Tracing.** A ``traceparent`` header is honoured by hand (opentelemetry-sdk's propagator): the
  request's span is made current where the run's events are read, so the run's spans nest under it;
  a resume's too, whose first event is read in the handler (``_first_in``).

It runs offline (a scripted model stands in for the LLM) and plays the client itself, once
Starlette and uvicorn, which pyadk does not depend on, are installed::

    pip install starlette uvicorn
    python examples/agent_service.py
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import tempfile
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path
from typing import Any

import uvicorn
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import adk
from adk.checkpoint import (
    CheckpointStore,
    CheckpointStoreError,
    SQLiteCheckpointStore,
)
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

EXAMPLE_EXPECT = (
    "[client] deltas: ['The tota', 'l is 5.']",
    "[client] session s1: You first asked: 2+3?",
    "[client] busy: 409 session 's1' is answering another message",
    "[client] timed out: {'error': 'the run took longer than 2 s'}",
    "[client] after a client gone at the start: 200",
    "[client] paused at agent:clerk/tool:send_payment#",
    "[client] while it waits: 409 session 's1' waits for a decision",
    "[client] doubled: 409 checkpoint",
    "[client] approved: Paid: sent 4200 cents to ACME.",
    "[client] after the approval: 200",
    "[client] stale: 404 no checkpoint",
    "[client] bad decision: 400 resume data for approval point",
    "[trace] POST /sessions/{session_id}/messages > invoke_agent clerk > execute_tool add",
    "[trace] POST /resume/{checkpoint_id} > invoke_agent clerk > execute_tool send_payment",
)

logger = logging.getLogger("agent_service")
REQUEST_TIMEOUT = 2.0  # seconds a run may take; a real service allows more
UNRESUMABLE_KEPT = 1000  # refusals for good remembered (``Sessions.unresumable``)
_PROPAGATOR = TraceContextTextMapPropagator()
looking = asyncio.Event()  # set while lookup runs, for the client's second message
paying = asyncio.Event()  # set while send_payment runs, for the client's doubled click
payment_done = asyncio.Event()


@adk.tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@adk.tool
async def lookup(invoice: str) -> str:
    """Look an invoice up in a slow back-office system."""
    looking.set()
    await asyncio.sleep(3600)  # longer than any request may take
    return f"{invoice}: due"


@adk.tool(require_approval=True)
async def send_payment(payee: str, amount_cents: int) -> str:
    """Send money; a person approves every call."""
    paying.set()
    await payment_done.wait()
    return f"sent {amount_cents} cents to {payee}"


def scripted(messages: list[adk.Message]) -> Any:
    """Stands in for an LLM: adds, looks invoices up, pays, or reports the last tool result."""
    last = messages[-1]
    if last.role == "tool":
        return f"Paid: {last.content}." if last.name == "send_payment" else "The total is 5."
    if "first" in last.content:  # what the session remembers
        return f"You first asked: {messages[0].content}"
    if "+" in last.content:
        return Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3})])
    if "invoice" in last.content:
        return Reply(tool_calls=[tool_call("lookup", {"invoice": "INV-9"})])
    if "pay" in last.content.lower():
        payment = {"payee": "ACME", "amount_cents": 4200}
        return Reply(tool_calls=[tool_call("send_payment", payment)])
    return "Ask me to add, to look an invoice up or to pay."


# -- the service ----------------------------------------------------------------------------------


class Sessions:
    """The conversations, in memory: a real service keeps them in its database, by session id.

    One run per session at a time: its lock is held from the request to the run's end, and kept
    only meanwhile: a service sees a new session id for each conversation, and one lock kept per
    session it ever saw would grow for as long as it runs."""

    def __init__(self) -> None:
        self.messages: dict[str, list[adk.Message]] = {}
        self.locks: dict[str, asyncio.Lock] = {}
        # A session whose turn paused for an approval waits for the decision: its messages end
        # with the call no result answers yet, which a model API refuses as input, so its next
        # message is refused until the resume, which carries the turn on, ends it.
        self.waiting: dict[str, str] = {}  # session id -> the checkpoint of its paused turn
        self.paused: dict[str, str] = {}  # checkpoint id -> its session
        # Checkpoints no resume can read (corrupt, edited), with why: their sessions went on
        # without them, so a resume of one sent again is refused, not run outside its session
        # should someone repair it. The store is the truth: an entry is needed only while the
        # store still holds its checkpoint (one it no longer holds is a 404 for any resume, and
        # its entry goes), and only the newest ``UNRESUMABLE_KEPT`` are kept: an older one
        # forgotten is refused all the same by the runner, which reads the same bytes, only
        # without its session's id. (Per worker, in memory: a real service keeps this with its
        # sessions, in its database.)
        self.unresumable: OrderedDict[str, tuple[str, str | None]] = OrderedDict()

    def refused(self, checkpoint_id: str, why: str, session_id: str | None) -> None:
        """A resume of the checkpoint was refused for good: its session (waiting on it) goes on,
        and the refusal is remembered, the oldest forgotten past ``UNRESUMABLE_KEPT``."""
        self.gone(checkpoint_id)
        self.unresumable[checkpoint_id] = (why, session_id)
        self.unresumable.move_to_end(checkpoint_id)
        while len(self.unresumable) > UNRESUMABLE_KEPT:
            self.unresumable.popitem(last=False)

    def pause(self, session_id: str, checkpoint_id: str) -> None:
        """The session's turn paused (again): it waits for a decision, its conversation kept as
        before the turn (the resume starts again from the paused run's input). Marked as the
        paused event is sent, not once the response ends: a client approving at once found the
        checkpoint no session's, and its resume ran outside the session's lock."""
        self.paused.pop(self.waiting.get(session_id, ""), None)
        self.waiting[session_id] = checkpoint_id
        self.paused[checkpoint_id] = session_id

    def ended(self, session_id: str, events: AsyncIterator[adk.AgentEvent]) -> None:
        """A turn of the session ended without pausing (a run, or the resume of its pause): its
        conversation is the session's now, whole."""
        self.messages[session_id] = adk.run_messages(events)
        self.paused.pop(self.waiting.pop(session_id, ""), None)

    def gone(self, checkpoint_id: str) -> None:
        """The checkpoint is no more (resumed by another worker, lost by its store): a session
        waiting on it goes on, its conversation as before the paused turn. Without this, every
        message of it was refused (409) and every resume of it answered 404, for good."""
        session_id = self.paused.pop(checkpoint_id, None)
        if session_id is not None:
            del self.waiting[session_id]

    async def take(self, session_id: str) -> bool:
        """Take the session for a run: False while a run of it goes on."""
        lock = self.locks.setdefault(session_id, asyncio.Lock())
        if lock.locked():
            return False
        await lock.acquire()  # free, so it takes it at once: nothing comes between, no one waits
        return True

    def give_back(self, session_id: str) -> None:
        """The session's run ended: its lock goes (no one waits on it: a second message is
        answered 409, not queued)."""
        self.locks.pop(session_id).release()


class SessionStream(StreamingResponse):
    """A run's events as Server-Sent Events, holding its session's lock (and ending the request's
    span) until the response ends, however it ends. Not in the body's ``finally``: a generator's
    ``finally`` runs only once it has started, and a server whose ``send`` raises once its client
    is gone (as ASGI 2.4 asks) fails the response at its start, before the body's first step: the
    session would answer 409 for good. (uvicorn's does not raise: there the body always starts.)
    ``run``: a run that started before the response (a resume's, whose first event the handler
    read), closed here too: a body that never started never closed it, and it stayed suspended,
    its spans open and its checkpoint claimed, until the collector found it."""

    def __init__(
        self,
        body: AsyncGenerator[str, None],
        give_back: Callable[[], None],
        span: trace.Span,
        run: AsyncGenerator[adk.AgentEvent, None] | None = None,
    ) -> None:
        super().__init__(body, media_type="text/event-stream")
        self.body = body
        self.give_back = give_back
        self.span = span
        self.run = run

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                try:
                    await self.body.aclose()  # a body cut off at a yield: its run is closed now
                finally:
                    if self.run is not None:  # closed by the body, unless it never started
                        await self.run.aclose()
            finally:
                self.give_back()
                self.span.end()


def build_app(
    checkpoints: Path, tracer_provider: TracerProvider, store: CheckpointStore | None = None
) -> Starlette:
    """The service, its checkpoints in a SQLite file at ``checkpoints``, or in ``store`` when one
    is given (a Redis or PostgreSQL store every worker shares; its maker closes it)."""
    sessions = Sessions()
    tracer = tracer_provider.get_tracer("agent-service")
    runner: adk.Runner | None = None

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        nonlocal runner
        # Made once, shared by every request; a real service makes an OpenAIChatModel here (and
        # its MCPToolsets), which ``async with`` closes at shutdown, after the runs in flight.
        model = ScriptedModel(scripted, record=False)
        agent = ReActAgent("clerk", model, tools=[add, lookup, send_payment])
        given = contextlib.nullcontext(store) if store is not None else None
        async with (
            given or SQLiteCheckpointStore(checkpoints) as shared_store,  # shared by every worker
            adk.Runner(
                agent,
                checkpoint_store=shared_store,
                enable_streaming=True,
                tracer_provider=tracer_provider,
            ) as shared,
        ):
            runner = shared
            yield

    async def post_message(request: Request) -> Response:
        assert runner is not None
        session_id = request.path_params["session_id"]
        try:
            asked = await request.json()
            text, max_turns = asked["message"], _max_turns(asked)
            if not isinstance(text, str):
                raise TypeError("message must be a string")
        except (ValueError, KeyError, TypeError) as exc:
            expected = "{'message': str, 'max_turns': int (optional)}"
            return JSONResponse({"error": f"expected {expected}: {exc}"}, 400)
        if (waiting := sessions.waiting.get(session_id)) is not None:
            error = f"session {session_id!r} waits for a decision on checkpoint {waiting!r}"
            return JSONResponse({"error": error, "checkpoint_id": waiting}, 409)
        if not await sessions.take(session_id):
            return JSONResponse(
                {"error": f"session {session_id!r} is answering another message"}, 409
            )
        earlier = sessions.messages.get(session_id, [])
        events = runner.run(
            [*earlier, adk.Message.user(text)], run_id=session_id, max_turns=max_turns
        )
        span = _request_span(tracer, request, "POST /sessions/{session_id}/messages")

        async def body() -> AsyncGenerator[str, None]:
            paused: list[str] = []
            on_pause = _Pauses(paused, functools.partial(sessions.pause, session_id))
            try:
                async with (
                    contextlib.aclosing(events),
                    contextlib.aclosing(_in_span(span, _sse(events, on_pause))) as chunks,
                    asyncio.timeout(REQUEST_TIMEOUT),
                ):
                    async for chunk in chunks:
                        yield chunk
                # Ended: its conversation is the session's now. A run cut off leaves it as it was.
                if not paused:
                    sessions.ended(session_id, events)
            except TimeoutError:
                message = f"the run took longer than {REQUEST_TIMEOUT:g} s"
                yield _event("error", {"error": message})

        return SessionStream(body(), functools.partial(sessions.give_back, session_id), span)

    def unreadable(checkpoint_id: str, error: str, session_id: str | None) -> Response:
        """Answer a resume of a checkpoint no resume can read (its bytes corrupt or edited):
        410, gone for good for this service, the same on every retry and after any deploy. Its
        session goes on, as before the paused turn: waiting on it, every message of the session
        was refused (409), for good. The checkpoint is kept in the store as it is (the runner
        leaves it as it was; this neither deletes nor moves it): whoever runs the service may
        read what is left of it, but a resume sent here again is refused at once, since the
        session went on without that turn (``Sessions.unresumable``)."""
        why = f"checkpoint {checkpoint_id!r} cannot be resumed by this service: {error}"
        body = {"error": why, "checkpoint_id": checkpoint_id, "kept": True, "resumable": False}
        return JSONResponse(body | {"session_id": session_id}, 410)

    def refusal(checkpoint_id: str, exc: adk.CheckpointError, session_id: str | None) -> Response:
        """Answer a resume the runner refused (raised, or as its first event): nothing ran, the
        checkpoint is kept as it was. Told apart by its ``reason`` (docs/service.md), which says
        what would let it through:

        - ``"not_found"``, 404, gone (resumed by another worker, a stale link): its session goes
          on;
        - ``"busy"``, 409, being resumed now (a double click);
        - ``"max_turns"``, 422, the ``max_turns`` it was held against (its ``max_turns``) leaves
          too few model calls for what it must make: the client's to raise, so the same
          checkpoint resumes once the decision is sent again with a higher ``"max_turns"``, and
          the session waits on it;
        - ``"corrupt"``, 410, bytes no resume will ever read: nothing makes it resumable, so its
          session goes on (``unreadable``);
        - any other, 503, the service as now deployed cannot resume it: ``"other_version"``
          (another pyadk release wrote it: a worker of that release resumes it, as in a rolling
          deploy), ``"incompatible"`` (a tool or a ``before_tool`` gate it paused at removed
          since, an agent tree that no longer leads there), ``"missing_input"`` (run options the
          paused run was given that this version does not pass): a fixed deployment (a
          rollback) resumes it, so the session waits on it, and the decision can be sent again
          then (or the checkpoint deleted, once it is known it never will be: a 404 then ends
          the wait)."""
        reason = exc.reason
        if reason == "not_found":
            sessions.gone(checkpoint_id)  # its session, if it waits on it, goes on
            return JSONResponse({"error": str(exc)}, 404)  # a stale link, sent twice
        if reason == "busy":  # a double click
            return JSONResponse({"error": str(exc)}, 409)
        if reason == "corrupt":
            sessions.refused(checkpoint_id, str(exc), session_id)
            return unreadable(checkpoint_id, str(exc), session_id)
        kept = {"checkpoint_id": checkpoint_id, "kept": True, "resumable": True}
        kept["session_id"] = session_id
        if reason == "max_turns":
            why = f"checkpoint {checkpoint_id!r} cannot be resumed within max_turns: {exc}"
            return JSONResponse(
                kept | {"error": why, "max_turns": getattr(exc, "max_turns", None)}, 422
            )
        why = (
            f"this service cannot resume checkpoint {checkpoint_id!r} now: {exc}; send the "
            "decision again once it can"
        )
        return JSONResponse(kept | {"error": why}, 503)

    async def refused_before(checkpoint_id: str, why: str, session_id: str | None) -> Response:
        """A resume of a checkpoint refused for good before, while the store still holds it: its
        session went on without it, so it is not run now (410 again). The store is the truth:
        one it no longer holds is forgotten and answered 404, as any checkpoint gone is."""
        try:
            held = await runner_of().checkpoint_store.get(checkpoint_id) is not None
        except CheckpointStoreError as down:
            return JSONResponse({"error": str(down)}, 503)
        if held:
            return unreadable(checkpoint_id, why, session_id)
        sessions.unresumable.pop(checkpoint_id, None)  # (a resume beside this one may have)
        return JSONResponse({"error": f"no checkpoint {checkpoint_id!r}"}, 404)

    def runner_of() -> adk.Runner:
        assert runner is not None
        return runner

    async def resume(request: Request) -> Response:
        assert runner is not None
        try:
            asked = await request.json()
            decision, max_turns = asked["decision"], _max_turns(asked)
        except (ValueError, KeyError, TypeError) as exc:
            expected = "{'decision': ..., 'max_turns': int (optional)}"
            return JSONResponse({"error": f"expected {expected}: {exc}"}, 400)
        checkpoint_id = request.path_params["checkpoint_id"]
        # The resume carries its session's turn on: it holds the session as a run does. (A
        # pause of another worker's session is resumed all the same; a real service keeps its
        # sessions, and which checkpoint each waits on, in its database.)
        session_id = sessions.paused.get(checkpoint_id)
        if session_id is not None and not await sessions.take(session_id):
            error = f"checkpoint {checkpoint_id!r} is being resumed, or its session is busy"
            return JSONResponse({"error": error}, 409)
        give_back = functools.partial(sessions.give_back, session_id) if session_id else _nothing
        if (refused := sessions.unresumable.get(checkpoint_id)) is not None:
            try:  # refused before: its session went on without it, so it is not run now
                return await refused_before(checkpoint_id, *refused)
            finally:
                give_back()
        # The resumed run starts at its first read, here: with the request's span current, so
        # its spans nest under it (a trace of its own, linked to the run that paused). Ended
        # with the response, or here when the resume is answered without one.
        span = _request_span(tracer, request, "POST /resume/{checkpoint_id}")
        try:
            response = await resumed(span, checkpoint_id, decision, max_turns, session_id)
        except BaseException:
            span.end()
            raise
        if not isinstance(response, SessionStream):  # answered without the run's events
            span.end()
        return response

    async def resumed(
        span: trace.Span,
        checkpoint_id: str,
        decision: Any,
        max_turns: int | None,
        session_id: str | None,
    ) -> Response:
        """The resume of ``resume``, its first read with the request's ``span`` current."""
        assert runner is not None
        give_back = functools.partial(sessions.give_back, session_id) if session_id else _nothing
        events = runner.resume(checkpoint_id, decision, max_turns=max_turns)
        try:  # the request's refusals come with the first event: answer them before the 200
            first = await _first_in(span, events)  # None: a resume that said nothing (ended)
        except adk.CheckpointError as exc:  # before ValueError: a refusal may be both
            try:  # the session held while it is told apart (it may end the session's wait)
                await events.aclose()
                return refusal(checkpoint_id, exc, session_id)
            finally:
                give_back()
        except ValueError as exc:  # the decision does not fit the pause: the client's to fix
            await events.aclose()
            give_back()
            return JSONResponse({"error": str(exc)}, 400)
        except CheckpointStoreError as exc:  # the store is down: nothing ran, ask again later
            give_back()
            return JSONResponse({"error": str(exc)}, 503)
        except BaseException as exc:  # unforeseen (a bug): none is known today
            # The session waits on, its lock given back, so the decision can be sent again: left
            # held, every later resume and message of it answered 409, for good.
            try:
                await events.aclose()
            finally:
                give_back()
            if not isinstance(exc, Exception):  # a cancellation, an exit: not this request's
                raise
            logger.exception("resume of checkpoint %r failed", checkpoint_id)
            return JSONResponse({"error": f"the resume failed: {type(exc).__name__}"}, 500)
        if first is not None and isinstance(first.exception, adk.CheckpointError):
            # Refused as its first event, not raised (the tool it paused at removed since, a
            # before_tool gate this version lacks, a max_turns too low): nothing ran.
            try:
                await events.aclose()
                return refusal(checkpoint_id, first.exception, session_id)
            finally:
                give_back()

        async def body() -> AsyncGenerator[str, None]:
            paused: list[str] = []
            mark = functools.partial(sessions.pause, session_id) if session_id else None
            last: list[adk.AgentEvent] = []
            async with contextlib.aclosing(events):
                try:
                    async for chunk in _sse(_chain(first, events, last), _Pauses(paused, mark)):
                        yield chunk
                except CheckpointStoreError as exc:  # the run ended, its checkpoint was left
                    yield _event("error", {"error": str(exc)})  # the decision must not be resent
            # A resumed run that failed keeps its checkpoint, to be resumed again: the session
            # waits on. Otherwise the turn ended, and the conversation goes on.
            failed = bool(last) and last[-1].error is not None
            if session_id is not None and not paused and not failed:
                sessions.ended(session_id, events)

        return SessionStream(_in_span(span, body()), give_back, span, events)

    routes = [
        Route("/sessions/{session_id}/messages", post_message, methods=["POST"]),
        Route("/resume/{checkpoint_id}", resume, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def _max_turns(body: Any) -> int | None:
    """The request's ``max_turns`` (how many model calls its run may make, those before a pause
    counted), None when it sends none; a ``ValueError`` for what is not a positive int."""
    limit = body.get("max_turns") if isinstance(body, dict) else None
    if limit is not None and (type(limit) is not int or limit < 1):
        raise ValueError(f"max_turns must be a positive int, not {limit!r}")
    return limit


def _request_span(tracer: trace.Tracer, request: Request, name: str) -> trace.Span:
    """The request's server span, in the caller's trace when it sent a ``traceparent``."""
    parent = _PROPAGATOR.extract(dict(request.headers))
    return tracer.start_span(name, context=parent, kind=trace.SpanKind.SERVER)


async def _in_span(
    span: trace.Span, chunks: AsyncGenerator[str, None]
) -> AsyncGenerator[str, None]:
    """``chunks`` read with the request's span current, so the run, which starts at the first
    read, nests its spans under it. Current for each read alone, never across a ``yield``: the
    body is closed where the response ends, which may be another task (another contextvars
    Context) than the one it ran in (a client that stopped reading, its send cancelled by the
    timeout, then gone), and a context attached there cannot be detached: OpenTelemetry logs
    "Failed to detach context"."""
    current = trace.set_span_in_context(span)
    async with contextlib.aclosing(chunks):
        while True:
            token = otel_context.attach(current)
            try:
                chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            finally:
                otel_context.detach(token)
            yield chunk


async def _first_in(
    span: trace.Span, events: AsyncIterator[adk.AgentEvent]
) -> adk.AgentEvent | None:
    """The first event of ``events`` (None: none), read with the request's ``span`` current: a
    resume starts at its first read, so its spans nest under the request's."""
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        return await anext(events, None)
    finally:
        otel_context.detach(token)


async def _chain(
    first: adk.AgentEvent | None, rest: AsyncIterator[adk.AgentEvent], last: list[adk.AgentEvent]
) -> AsyncIterator[adk.AgentEvent]:
    """``first`` (None: no event at all), then ``rest``; ``last`` holds the last event passed
    on."""
    if first is None:
        return
    last[:] = [first]
    yield first
    async for event in rest:
        last[:] = [event]
        yield event


def _nothing() -> None:
    pass


class _Pauses:
    """Where a run's pause goes as its event is sent: ``paused`` (the response's), and ``mark``
    (``Sessions.pause``, for a session's run)."""

    def __init__(self, paused: list[str], mark: Callable[[str], None] | None) -> None:
        self.paused = paused
        self.mark = mark

    def __call__(self, checkpoint_id: str) -> None:
        self.paused.append(checkpoint_id)
        if self.mark is not None:
            self.mark(checkpoint_id)


async def _sse(
    events: AsyncIterator[adk.AgentEvent], on_pause: Callable[[str], None]
) -> AsyncGenerator[str, None]:
    """The run as Server-Sent Events: pieces of each answer as they come, then each event; the
    checkpoint id of a pause goes to ``on_pause`` before its event is sent."""
    async for event in events:
        stream = event.output.stream if event.output is not None else None
        if stream is not None:
            try:
                async for chunk in stream:
                    if chunk.content:
                        yield _event("delta", chunk.content)
            except Exception:  # the model failed mid-answer: its error event comes next
                continue
        if event.interrupted is not None:
            on_pause(event.interrupted.checkpoint_id)
            yield _event("paused", event.to_dict()["action"]["interrupted"])
        else:
            data = event.to_dict()
            if isinstance(event.exception, adk.ModelError):  # an adapter's subclass too
                # A model's failure names its endpoint and quotes its provider, whose words may
                # name the account (OpenAI's rate limit names the organization): logged for the
                # operator, the client told what it can act on. (The service's own failures, a
                # store down, it explains to the client as its other answers do.)
                logger.error("a model failed: %s", event.error.message)
                data["error"] = {"type": "ModelError", "message": "the model failed; try again"}
            yield _event("event", data)


def _event(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(data, allow_nan=False)}\n\n"


# -- a client -------------------------------------------------------------------------------------


async def post(
    port: int, path: str, body: Any, headers: dict[str, str] | None = None
) -> tuple[int, list[tuple[str, Any]]]:
    """POST ``body`` as JSON: the status and the Server-Sent Events (or ``[("json", body)]``)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    head = f"POST {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{extra}"
    writer.write(f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
    try:
        status = int((await reader.readline()).split()[1])
        chunked = False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            chunked |= line.lower().startswith(b"transfer-encoding: chunked")
        if not chunked:
            return status, [("json", json.loads(await reader.read()))]
        text = b""
        while size := int(await reader.readline(), 16):
            text += await reader.readexactly(size)
            await reader.readline()
        events = []
        for block in text.decode().split("\n\n")[:-1]:
            fields = dict(line.split(": ", 1) for line in block.splitlines())
            events.append((fields["event"], json.loads(fields["data"])))
        return status, events
    finally:
        writer.close()


async def main() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    with tempfile.TemporaryDirectory() as tmp:
        app = build_app(Path(tmp) / "checkpoints.db", tracer_provider)
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        # timeout_graceful_shutdown=5 in production: runs in flight get 5 s, then are cancelled.
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve())
        while not server.started:
            if serving.done():
                await serving  # startup failed: raise its error
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]

        traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        status, events = await post(
            port, "/sessions/s1/messages", {"message": "2+3?"}, {"traceparent": traceparent}
        )
        print("[client] deltas:", [data for name, data in events if name == "delta"])

        # The session goes on: its next run is given the conversation so far.
        asking = asyncio.create_task(post(port, "/sessions/s1/messages", {"message": "invoice?"}))
        await looking.wait()  # (the example plays both sides: the first is in flight now)
        status, [(_, busy)] = await post(port, "/sessions/s1/messages", {"message": "again?"})
        print(f"[client] busy: {status} {busy['error']}")
        status, events = await asking
        print("[client] timed out:", events[-1][1])
        status, events = await post(port, "/sessions/s1/messages", {"message": "What first?"})
        remembered = [data for name, data in events if name == "event"][-1]
        print("[client] session s1:", remembered["output"]["message"]["content"])

        # A server whose send raises once its client is gone (as ASGI 2.4 asks) fails the
        # response at its start, before its body's first step: the session is free all the same.
        async def gone(message: Any) -> None:
            raise OSError("the client is gone")

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": json.dumps({"message": "Hi"}).encode()}

        path = "/sessions/s3/messages"
        scope = {"type": "http", "asgi": {"spec_version": "2.4"}, "method": "POST"}
        scope |= {"path": path, "headers": [], "query_string": b"", "root_path": ""}
        with contextlib.suppress(Exception):
            await app(scope, receive, gone)
        status, events = await post(port, path, {"message": "What first?"})
        print(f"[client] after a client gone at the start: {status}")

        status, events = await post(port, "/sessions/s1/messages", {"message": "pay ACME"})

        paused = events[-1][1]
        point = paused["points"][0]["id"]
        print(f"[client] paused at {point}")
        status, [(_, waits)] = await post(port, "/sessions/s1/messages", {"message": "hello?"})
        print(f"[client] while it waits: {status} {waits['error'][:35]}")  # decide first
        resume = f"/resume/{paused['checkpoint_id']}"
        decision = {"decision": {point: True}}  # keyed by the point shown: safe sent twice
        approving = asyncio.create_task(post(port, resume, decision))
        await paying.wait()
        status, [(_, doubled)] = await post(port, resume, decision)
        print(f"[client] doubled: {status} {doubled['error'][:10]}")
        payment_done.set()
        status, events = await approving
        answer = [data for name, data in events if name == "event"][-1]
        print("[client] approved:", answer["output"]["message"]["content"])
        status, events = await post(port, "/sessions/s1/messages", {"message": "What first?"})
        print(f"[client] after the approval: {status}")  # the session goes on, the turn whole
        status, [(_, stale)] = await post(port, resume, decision)
        print(f"[client] stale: {status} {stale['error'][:13]}")

        status, events = await post(port, "/sessions/s2/messages", {"message": "pay ACME"})
        resume = f"/resume/{events[-1][1]['checkpoint_id']}"
        typo = {"decision": {events[-1][1]["points"][0]["id"]: {"approve": True}}}
        status, [(_, bad)] = await post(port, resume, typo)
        print(f"[client] bad decision: {status} {bad['error'][:40]}")

        server.should_exit = True
        await serving

    by_id = {span.context.span_id: span for span in spans.get_finished_spans()}
    tool = next(s for s in by_id.values() if s.name == "execute_tool add")
    assert format(tool.context.trace_id, "032x") == traceparent.split("-")[1]  # the caller's trace
    # The approved payment ran in its resume, under the request that sent the decision.
    paid = next(
        s
        for s in by_id.values()
        if s.name == "execute_tool send_payment"
        and not any(e.name == "adk.interrupt" for e in s.events)
    )
    for span in (tool, paid):
        chain = [span.name]
        while span.parent is not None and span.parent.span_id in by_id:
            span = by_id[span.parent.span_id]
            chain.insert(0, span.name)
        print("[trace]", " > ".join(chain))


if __name__ == "__main__":
    asyncio.run(main())
