"""A web chat product's trial: many conversations, many turns each, one ``runner.run`` a turn,
streamed to the browser as Server-Sent Events, a tool that waits on the user's approval.

The app follows docs/service.md: Starlette under uvicorn, the conversation kept by the app
(``adk.run_messages`` of a turn that ended), one turn per conversation at a time (``409`` for a
second, the double click), the turn's lock given back by the response however it ends. A turn
that pauses for an approval leaves its conversation *waiting*: the next message is refused with
the checkpoint to decide on (its messages end with a call no result answers, which a model API
refuses as input), and the decision, the next request, resumes the run under the same lock and
keeps the resumed run's messages, the whole turn. The model is ``OpenAIChatModel`` talking to the
wire server (``tests/openai_server.py``), which refuses tool calls left without results as
OpenAI does; one server and one app serve the whole module.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import uvicorn
from conftest import resumes_failing_unforeseen, wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as Wire
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

import adk
from prebuilt import ReActAgent

pytestmark = pytest.mark.asyncio(loop_scope="module")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# -- the app ---------------------------------------------------------------------------------------

looking = asyncio.Event()  # set while ``lookup`` runs
lookups_cancelled: list[str] = []
payments: list[str] = []


@adk.tool
async def lookup(order: str) -> str:
    """Look an order up in a slow back office."""
    looking.set()
    try:
        await asyncio.Event().wait()  # the client leaves first
    except asyncio.CancelledError:
        lookups_cancelled.append(order)
        raise
    return "shipped"


@adk.tool(require_approval=True)
def pay(payee: str, cents: int) -> str:
    """Send money; the user approves every call."""
    payments.append(payee)
    return f"sent {cents} cents to {payee}"


def model_reply(body: dict[str, Any]) -> Wire:
    """The LLM: answers from the last message of the request it was sent."""
    last = body["messages"][-1]
    if last["role"] == "tool":
        return Wire(text=f"Done: {last['content']}.")
    text = last["content"]
    if "pay" in text:
        return Wire(tool_calls=[Call("pay", json.dumps({"payee": "ACME", "cents": 42}))])
    if "order" in text:
        return Wire(tool_calls=[Call("lookup", json.dumps({"order": "A-1"}))])
    if "stall" in text:  # a model that writes two pieces, then stops mid-answer
        return Wire(text="one two three four five", fragment=4, stall_after=2, delay=3600)
    return Wire(text=f"You said {text!r}; {len(body['messages'])} messages so far.", fragment=6)


@dataclass
class Conversation:
    messages: list[adk.Message] = field(default_factory=list)
    busy: bool = False  # a turn (or a decision's resume) is going on
    waiting: str | None = None  # the checkpoint of a turn paused on an approval


class Turn(StreamingResponse):
    """A turn's events; frees its conversation when the response ends, however it ends."""

    def __init__(self, body: Any, conversation: Conversation) -> None:
        super().__init__(body, media_type="text/event-stream")
        self.conversation = conversation

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            try:
                await self.body_iterator.aclose()  # type: ignore[attr-defined]
            finally:
                self.conversation.busy = False


def sse(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


def chat_app(runner: adk.Runner) -> tuple[Starlette, dict[str, Conversation]]:
    conversations: dict[str, Conversation] = {}

    async def turn(conversation: Conversation, events: AsyncIterator[adk.AgentEvent], first: Any):
        waiting = None
        async with contextlib.aclosing(events):
            event = first if first is not None else await anext(events, None)
            while event is not None:
                if event.output is not None and event.output.stream is not None:
                    with contextlib.suppress(Exception):  # a failed model: its error comes next
                        async for chunk in event.output.stream:
                            if chunk.content:
                                yield sse("delta", chunk.content)
                if event.interrupted is not None:
                    waiting = event.interrupted.checkpoint_id
                yield sse("event", event.to_dict())
                event = await anext(events, None)
        # The turn ended (a turn cut off never comes here: its conversation stays as it was).
        conversation.messages = adk.run_messages(events)
        conversation.waiting = waiting

    def take(conversation: Conversation) -> Response | None:
        if conversation.busy:  # no await since the test: nothing comes between
            return JSONResponse({"error": "a turn of this conversation is going on"}, 409)
        conversation.busy = True
        return None

    async def post_message(request: Request) -> Response:
        text = (await request.json()).get("message")
        if not isinstance(text, str):
            return JSONResponse({"error": "expected {'message': str}"}, 400)
        conversation = conversations.setdefault(request.path_params["cid"], Conversation())
        if conversation.waiting is not None and not conversation.busy:
            waiting = {"error": "waiting for a decision", "checkpoint_id": conversation.waiting}
            return JSONResponse(waiting, 409)
        if (busy := take(conversation)) is not None:
            return busy
        events = runner.run(
            [*conversation.messages, adk.Message.user(text)], run_id=request.path_params["cid"]
        )
        return Turn(turn(conversation, events, None), conversation)

    async def post_decision(request: Request) -> Response:
        conversation = conversations.get(request.path_params["cid"])
        if conversation is None or conversation.waiting is None:
            return JSONResponse({"error": "nothing waits for a decision"}, 404)
        if (busy := take(conversation)) is not None:
            return busy
        events = runner.resume(conversation.waiting, (await request.json()).get("decision"))
        try:  # the resume's refusals come with its first event: answer them before the 200
            first = await anext(events)
        except (ValueError, adk.CheckpointError) as exc:
            await events.aclose()
            conversation.busy = False
            return JSONResponse({"error": str(exc)}, 400 if isinstance(exc, ValueError) else 409)
        return Turn(turn(conversation, events, first), conversation)

    routes = [
        Route("/c/{cid}/messages", post_message, methods=["POST"]),
        Route("/c/{cid}/decision", post_decision, methods=["POST"]),
    ]
    return Starlette(routes=routes), conversations


# -- a browser -------------------------------------------------------------------------------------


@dataclass
class Answer:
    status: int
    events: list[tuple[str, Any]]

    @property
    def deltas(self) -> list[str]:
        return [data for name, data in self.events if name == "delta"]

    @property
    def last(self) -> dict[str, Any]:
        return dict(self.events[-1][1])


async def post(
    port: int, path: str, body: Any, leave: asyncio.Event | None = None, after: int = 0
) -> Answer:
    """POST ``body``; the answer's Server-Sent Events. With ``leave``, hang up once it is set,
    after reading ``after`` events."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    head = f"POST {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {len(data)}"
    writer.write(head.encode() + b"\r\n\r\n" + data)
    try:
        status = int((await reader.readline()).split()[1])
        chunked = False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            chunked |= line.lower().startswith(b"transfer-encoding: chunked")
        if not chunked:
            return Answer(status, [("json", json.loads(await reader.read()))])
        events: list[tuple[str, Any]] = []
        text = b""
        while leave is None or len(events) < after:
            size = int(await reader.readline(), 16)
            if not size:
                break
            text += await reader.readexactly(size)
            await reader.readline()
            *blocks, rest = text.decode().split("\n\n")
            text = rest.encode()
            for block in blocks:
                fields = dict(line.split(": ", 1) for line in block.splitlines())
                events.append((fields["event"], json.loads(fields["data"])))
        if leave is not None:
            await leave.wait()
        return Answer(status, events)
    finally:
        writer.close()


# -- fixtures --------------------------------------------------------------------------------------


class OpenSpans(SpanProcessor):
    """The spans started and not ended yet."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        self.open.pop(span.context.span_id, None)


@dataclass
class Service:
    port: int
    llm: OpenAIServer
    conversations: dict[str, Conversation]
    spans: OpenSpans

    async def say(self, cid: str, text: str, **leaving: Any) -> Answer:
        return await post(self.port, f"/c/{cid}/messages", {"message": text}, **leaving)

    def sent(self) -> list[tuple[str, str]]:
        """The (role, content) of the last request the model was sent."""
        return [(m["role"], m.get("content") or "") for m in self.llm.bodies[-1]["messages"]]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def service() -> AsyncIterator[Service]:
    spans = OpenSpans()
    provider = TracerProvider()
    provider.add_span_processor(spans)
    async with OpenAIServer(respond=model_reply) as llm:
        agent = ReActAgent("chat", wire_model(llm), instruction="Be brief.", tools=[lookup, pay])
        async with adk.Runner(agent, enable_streaming=True, tracer_provider=provider) as runner:
            app, conversations = chat_app(runner)
            config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
            server = uvicorn.Server(config)
            serving = asyncio.create_task(server.serve())
            while not server.started:
                if serving.done():
                    await serving  # the start failed: its error
                await asyncio.sleep(0.01)
            yield Service(server.servers[0].sockets[0].getsockname()[1], llm, conversations, spans)
            server.should_exit = True
            await serving


async def until(condition: Any) -> None:
    """Wait (a bounded number of loop steps) for ``condition()`` to hold."""
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("the condition never held")


# -- the trial -------------------------------------------------------------------------------------


async def test_turns_carry_the_conversation_and_stream_their_answer(service: Service) -> None:
    first = await service.say("a", "hello")
    assert first.status == 200
    assert "".join(first.deltas) == "You said 'hello'; 2 messages so far."
    assert len(first.deltas) > 1  # pieces, as the model wrote them
    second = await service.say("a", "again")
    assert "".join(second.deltas) == "You said 'again'; 4 messages so far."
    assert service.sent() == [
        ("system", "Be brief."),
        ("user", "hello"),
        ("assistant", "You said 'hello'; 2 messages so far."),
        ("user", "again"),
    ]
    other = await service.say("b", "hi")  # another conversation starts afresh
    assert "".join(other.deltas) == "You said 'hi'; 2 messages so far."


async def test_a_client_leaving_mid_tool_cancels_the_turn_and_leaves_the_conversation(
    service: Service,
) -> None:
    await service.say("c", "hello")
    kept = list(service.conversations["c"].messages)
    looking.clear()
    gone = asyncio.Event()
    leaving = asyncio.create_task(service.say("c", "where is my order?", leave=gone))
    await looking.wait()
    double = await service.say("c", "where is my order?")  # the double click
    assert (double.status, double.last["error"]) == (409, "a turn of this conversation is going on")
    gone.set()
    await leaving  # the browser tab closed
    await until(lambda: not service.conversations["c"].busy)
    assert lookups_cancelled == ["A-1"]
    assert service.conversations["c"].messages == kept  # nothing half-written
    await until(lambda: not service.spans.open)  # every span of the cut turn ended
    after = await service.say("c", "still there?")
    assert "".join(after.deltas) == "You said 'still there?'; 4 messages so far."


async def test_a_client_leaving_mid_answer_closes_the_model_call(service: Service) -> None:
    hangups = service.llm.hangups
    gone = asyncio.Event()
    gone.set()
    cut = await service.say("d", "stall please", leave=gone, after=1)
    assert cut.deltas and "one two three four five".startswith("".join(cut.deltas))
    await until(lambda: service.llm.hangups == hangups + 1)  # the model's connection was closed
    await until(lambda: not service.conversations["d"].busy and not service.spans.open)
    assert service.conversations["d"].messages == []
    assert (await service.say("d", "hi")).status == 200


async def test_an_approval_waits_for_the_next_request_and_the_conversation_goes_on(
    service: Service,
) -> None:
    await service.say("e", "hello")
    paused = await service.say("e", "pay ACME")
    interrupted = paused.last["action"]["interrupted"]
    checkpoint = interrupted["checkpoint_id"]
    assert interrupted["points"][0]["info"]["tool"] == "pay" and payments == []

    refused = await service.say("e", "what now?")  # a new message while the approval waits
    assert (refused.status, refused.last["checkpoint_id"]) == (409, checkpoint)
    typo = await post(service.port, "/c/e/decision", {"decision": {"approve": True}})
    assert typo.status == 400 and service.conversations["e"].waiting == checkpoint

    approved = await post(service.port, "/c/e/decision", {"decision": True})
    assert approved.status == 200 and payments == ["ACME"]
    assert "".join(approved.deltas) == "Done: sent 42 cents to ACME."  # streamed after resume
    assert service.conversations["e"].waiting is None
    stale = await post(service.port, "/c/e/decision", {"decision": True})
    assert stale.status == 404

    after = await service.say("e", "thanks")  # the model API takes the conversation
    assert after.status == 200 and "".join(after.deltas).startswith("You said 'thanks'; 8")
    assert [role for role, _ in service.sent()] == [
        "system", "user", "assistant", "user", "assistant", "tool", "assistant", "user",
    ]  # fmt: skip


async def test_a_long_conversation_is_sent_once_per_turn_without_duplicates(
    service: Service,
) -> None:
    for turn in range(60):
        answer = await service.say("f", f"turn {turn}")
        assert answer.status == 200
    sent = service.sent()
    assert len(sent) == 1 + 2 * 60 - 1  # the instruction once, each earlier message once
    assert [text for role, text in sent if role == "user"] == [f"turn {n}" for n in range(60)]
    assert len(service.conversations["f"].messages) == 2 * 60


# -- examples/agent_service.py, the service docs/service.md shows -----------------------------------


def _example_service(name: str) -> Any:
    """examples/agent_service.py loaded afresh as module ``name``: each test patches its own copy
    (its model, its agent, its payment event) without touching another test's."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / "agent_service.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def _asked(example: Any) -> list[list[adk.Message]]:
    """The messages each call of ``example``'s scripted model is given, in order, as it is
    called (the model's replies are the example's own)."""
    asked: list[list[adk.Message]] = []
    scripted = example.scripted
    example.scripted = lambda messages: asked.append(messages) or scripted(messages)
    return asked


def _roles(messages: list[adk.Message]) -> list[tuple[str, str | None]]:
    return [(m.role.value, m.name) for m in messages]


# The conversation the model is sent at the message after a paid turn: the paused turn whole
# (the call, its result, the answer) and the new message.
_PAID_THEN_ASKED = [
    ("user", None), ("assistant", None), ("tool", "send_payment"), ("assistant", None), ("user", None),
]  # fmt: skip


@contextlib.asynccontextmanager
async def _serving(app: Any, log_level: str = "warning") -> AsyncIterator[int]:
    """``app`` served by uvicorn on an ephemeral port (given), stopped when the block ends."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level=log_level))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():
                await serving
            await asyncio.sleep(0.01)
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await serving


async def test_the_example_service_keeps_a_conversation_whole_across_its_approval(
    tmp_path: Path,
) -> None:
    """examples/agent_service.py kept a paused turn's messages (ending with the call waiting on
    the person, no result for it), took the next message meanwhile, and its resume never wrote
    the conversation back: every later message of the session sent the model the unanswered
    call, which OpenAI refuses (400), for good. A message while the approval waits is refused
    with the checkpoint to decide on; the resumed turn is the session's conversation."""
    example = _example_service("_chat_agent_service")
    asked = _asked(example)
    example.payment_done.set()
    app = example.build_app(tmp_path / "checkpoints.db", TracerProvider())
    async with _serving(app) as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "pay"})
        paused = events[-1][1]["checkpoint_id"]
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
        assert status == 409 and events[0][1]["checkpoint_id"] == paused
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 200 and events[-1][1]["output"]["message"]["content"].startswith("Paid")
        await example.post(port, "/sessions/s1/messages", {"message": "What first?"})
    assert _roles(asked[-1]) == _PAID_THEN_ASKED


async def test_the_example_services_session_stops_waiting_once_its_checkpoint_is_gone(
    tmp_path: Path,
) -> None:
    """A session waiting on a checkpoint that is no more (resumed by another worker sharing the
    store, lost by a store that restarted) answered every message 409 'waits for a decision'
    and every resume of it 404 'no checkpoint', for good. The 404 of the checkpoint a session
    waits on ends the wait; the conversation is as before the paused turn (its call, answered
    by no result, is not sent to the model)."""
    from adk.checkpoint import InMemoryCheckpointStore

    example = _example_service("_chat_agent_service_gone")
    asked = _asked(example)
    store = InMemoryCheckpointStore()
    app = example.build_app(tmp_path / "unused.db", TracerProvider(), store)
    async with _serving(app) as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "pay"})
        paused = events[-1][1]["checkpoint_id"]
        await store.delete(paused)  # resumed elsewhere, or lost with the store
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
        assert status == 409 and events[0][1]["checkpoint_id"] == paused
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 404 and "no checkpoint" in events[0][1]["error"]
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
        assert status == 200, events
    assert [(m.role.value, m.content) for m in asked[-1]] == [("user", "hi")]


async def test_the_example_services_approval_sent_as_the_pause_arrives_is_the_sessions_turn(
    tmp_path: Path,
) -> None:
    """The session was marked waiting only once its paused run's response had ended, after the
    paused event was sent: a client approving at once (a program, a fast click) found the
    checkpoint belonging to no session, and its resume ran outside the session's lock, its
    turn (the payment) never written to the conversation; the session then waited on the
    checkpoint that resume had deleted. The pause is the session's as its event is sent: the
    early resume is refused (409) while the paused run's response ends, then taken."""
    example = _example_service("_chat_agent_service_early")
    asked = _asked(example)
    example.payment_done.set()
    sent = asyncio.Event()  # the paused run's events are all sent; its response not ended
    release = asyncio.Event()
    sse = example._sse
    seen: list[str] = []

    async def slow_to_end(events: Any, *args: Any) -> AsyncIterator[str]:
        async for chunk in sse(events, *args):
            if chunk.startswith("event: paused"):
                seen.append(json.loads(chunk.split("data: ", 1)[1])["checkpoint_id"])
            yield chunk
        if not sent.is_set():  # the first response only: its end comes late
            sent.set()
            await release.wait()

    example._sse = slow_to_end
    app = example.build_app(tmp_path / "checkpoints.db", TracerProvider())
    async with _serving(app) as port:
        paying = asyncio.create_task(
            example.post(port, "/sessions/s1/messages", {"message": "pay"})
        )
        await sent.wait()
        [paused] = seen
        early, _ = await example.post(port, f"/resume/{paused}", {"decision": True})
        release.set()
        status, events = await paying
        assert status == 200 and events[-1][0] == "paused"
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert (early, status) == (409, 200), events
        await example.post(port, "/sessions/s1/messages", {"message": "What first?"})
    assert _roles(asked[-1]) == _PAID_THEN_ASKED


async def test_the_example_services_resume_that_fails_leaves_its_session_waiting(
    tmp_path: Path,
) -> None:
    """A resumed run that ends in an error keeps its checkpoint (the runner deletes it only for a
    run that finished), to be resumed again. The session stopped waiting all the same: its next
    message was taken, and the decision sent again ran as no session's turn, outside its lock,
    its turn never kept. The session waits on the kept checkpoint until a resume of it ends."""
    example = _example_service("_chat_agent_service_failed")
    asked: list[list[adk.Message]] = []
    scripted = example.scripted
    down = [True]  # the model fails once the payment's result comes

    def model(messages: list[adk.Message]) -> Any:
        asked.append(messages)
        if down[0] and messages[-1].role == "tool":
            raise ConnectionError("the model API is down")
        return scripted(messages)

    example.scripted = model
    example.payment_done.set()
    app = example.build_app(tmp_path / "checkpoints.db", TracerProvider())
    async with _serving(app) as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "pay"})
        paused = events[-1][1]["checkpoint_id"]
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 200 and events[-1][1]["error"] is not None
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
        assert status == 409 and events[0][1]["checkpoint_id"] == paused
        down[0] = False
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 200 and events[-1][1]["output"]["message"]["content"].startswith("Paid")
        await example.post(port, "/sessions/s1/messages", {"message": "What first?"})
    assert _roles(asked[-1]) == _PAID_THEN_ASKED


class _QuotaError(adk.ModelError):
    """A model adapter's own kind of ``ModelError``."""


@pytest.mark.parametrize("kind", [adk.ModelError, _QuotaError], ids=["ModelError", "subclass"])
async def test_the_example_service_keeps_a_models_words_from_its_client(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: type[adk.ModelError]
) -> None:
    """A model's failure (a ModelError: its endpoint, model and the provider's words, which may
    name the account) was sent to the client in the stream's error event as it was; security.md
    says that message is the operator's. It is logged, and the client gets the type and words
    of the service's own. So is an adapter's own subclass of ModelError, which the service told
    by its type's name and sent on as it was."""
    example = _example_service(f"_chat_agent_service_model_words_{kind.__name__}")
    said = "HTTP 429: Rate limit reached for gpt-4o in organization org-Abc123 on tokens per min"

    def model(messages: list[adk.Message]) -> Any:
        raise kind(f"chat.completions call to http://llm.internal/v1 failed: {said}")

    example.scripted = model
    app = example.build_app(tmp_path / "checkpoints.db", TracerProvider())
    with caplog.at_level(logging.ERROR, logger="agent_service"):
        async with _serving(app) as port:
            status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
    assert status == 200 and events[-1][1]["error"]["type"] == "ModelError"
    assert "org-Abc123" not in json.dumps(events) and "llm.internal" not in json.dumps(events)
    assert said in caplog.text  # the operator has it


async def test_the_example_services_resume_refused_as_its_first_event_gives_its_session_back(
    tmp_path: Path,
) -> None:
    """A resume refused as its first event (an error event caused by a ``CheckpointError``: a
    ``before_tool`` gate the paused version had and this one lacks) was answered 500 with the
    session's lock still held: every later resume of it answered 409 'being resumed', every
    message 409, for good, even once the service could resume it. The refusal gives the lock
    back, as the raised refusals do. Then it was answered 422, the session freed from the
    checkpoint and every later resume of it refused, for good: a gate removed by a redeploy is
    this version's to fix, not the checkpoint's, and a rollback resumes it. So it is a 503,
    the checkpoint kept and resumable, the session waiting on it (its message refused naming
    the checkpoint, not 'is answering another message'), and the decision sent once the
    service can resume it (here: the checkpoint as the version that has the gate reads it) is
    the session's turn."""
    from checkpoint_rewrite import rewrite_checkpoint

    from adk.checkpoint import InMemoryCheckpointStore

    example = _example_service("_chat_agent_service_gate")
    asked = _asked(example)
    example.payment_done.set()
    store = InMemoryCheckpointStore()
    app = example.build_app(tmp_path / "unused.db", TracerProvider(), store)
    async with _serving(app) as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "pay"})
        paused = events[-1][1]["checkpoint_id"]
        point = events[-1][1]["points"][0]["id"]
        before = await store.get(paused)
        async with rewrite_checkpoint(store, paused) as body:  # paused by a gate since removed
            body["states"][point] = {"callback": "gone_module.gate#0"}
        for attempt in range(2):  # refused again, not 409 'being resumed'
            status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
            error = events[0][1]
            assert status == 503 and "before_tool" in error["error"], (attempt, events)
            assert (error["kept"], error["resumable"], error["session_id"]) == (True, True, "s1")
            status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
            assert status == 409 and events[0][1]["checkpoint_id"] == paused, events  # waits
        assert not example.paying.is_set()
        await store.put(paused, before)  # the gate is back (a rollback): its pause resumes
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 200 and events[-1][1]["output"]["message"]["content"].startswith("Paid")
        await example.post(port, "/sessions/s1/messages", {"message": "What first?"})
    assert _roles(asked[-1]) == _PAID_THEN_ASKED


class _Deployed:
    """A toolset standing for what the deployed version has: ``tool``, or not (removed by a
    redeploy, back after a rollback)."""

    def __init__(self, tool: adk.Tool) -> None:
        self.tool = tool
        self.deployed = True

    async def tools(self, ctx: adk.RunContext) -> list[adk.Tool]:
        return [self.tool] if self.deployed else []


async def test_the_example_services_pause_at_a_tool_removed_then_back_waits_for_the_rollback(
    tmp_path: Path,
) -> None:
    """A redeploy removed the tool a session's turn paused at: the resume was answered 422, the
    session freed from the checkpoint and every later resume of it refused, so once a rollback
    brought the tool back the approval could no longer be given, though the checkpoint was
    whole and the version could resume it. A 503 now, the checkpoint kept and resumable, the
    session waiting on it; after the rollback the decision sent again is the session's turn."""
    example = _example_service("_chat_agent_service_rollback")
    deployed = _Deployed(example.send_payment)
    example.send_payment = deployed  # the agent's tools come from what is deployed
    asked = _asked(example)
    example.payment_done.set()
    app = example.build_app(tmp_path / "checkpoints.db", TracerProvider())
    async with _serving(app) as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "pay"})
        paused = events[-1][1]["checkpoint_id"]
        deployed.deployed = False  # the redeploy
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        error = events[0][1]
        assert status == 503 and "send_payment" in error["error"], events
        assert f"cannot resume checkpoint {paused!r} now" in error["error"], error
        assert (error["kept"], error["resumable"], error["session_id"]) == (True, True, "s1")
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
        assert status == 409 and events[0][1]["checkpoint_id"] == paused, events
        assert not example.paying.is_set()
        deployed.deployed = True  # the rollback
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 200 and events[-1][1]["output"]["message"]["content"].startswith("Paid")
        await example.post(port, "/sessions/s1/messages", {"message": "What first?"})
    assert _roles(asked[-1]) == _PAID_THEN_ASKED


async def test_the_example_services_resume_refused_at_max_turns_keeps_its_session_waiting(
    tmp_path: Path,
) -> None:
    """A turn paused with no model call of its ``max_turns`` left: its resume is refused before
    the payment is made ('resume with a higher max_turns'). Answered 422 as a checkpoint the
    service cannot resume, the session was freed from it and every later resume refused, so
    the fix the refusal names could not be sent. A 422 saying it, the checkpoint resumable, the
    session waiting on it; the decision sent again with a higher ``max_turns`` is its turn."""
    example = _example_service("_chat_agent_service_turns")
    asked = _asked(example)
    example.payment_done.set()
    app = example.build_app(tmp_path / "checkpoints.db", TracerProvider())
    async with _serving(app) as port:
        say = {"message": "pay", "max_turns": 1}
        status, events = await example.post(port, "/sessions/s1/messages", say)
        assert status == 200 and events[-1][0] == "paused", events
        paused = events[-1][1]["checkpoint_id"]
        resume = f"/resume/{paused}"
        for attempt in range(2):
            status, events = await example.post(port, resume, {"decision": True})
            error = events[0][1]
            assert status == 422 and "resume with a higher max_turns" in error["error"], (
                attempt,
                events,
            )
            assert error["max_turns"] == 1, error  # the limit it was held against
            assert (error["kept"], error["resumable"], error["session_id"]) == (True, True, "s1")
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
        assert status == 409 and events[0][1]["checkpoint_id"] == paused, events
        status, events = await example.post(port, resume, {"decision": True, "max_turns": 0})
        assert status == 400 and "max_turns must be a positive int" in events[0][1]["error"]
        assert not example.paying.is_set()
        status, events = await example.post(port, resume, {"decision": True, "max_turns": 2})
        assert status == 200 and events[-1][1]["output"]["message"]["content"].startswith("Paid")
        await example.post(port, "/sessions/s1/messages", {"message": "What first?"})
    assert _roles(asked[-1]) == _PAID_THEN_ASKED


async def test_the_example_services_session_is_freed_from_a_checkpoint_no_resume_can_read(
    tmp_path: Path,
) -> None:
    """A checkpoint whose bytes are corrupt answered every resume 500, and its session waited on
    it for good: every message 409 'waits for a decision'. The resume answers 410 saying the
    checkpoint cannot be resumed (it was 422, which now says "resend with other options") and
    the session goes on; the session's next message is its turn again (its conversation as
    before the paused turn); the checkpoint is kept in the store, as it was, and a resume of it
    sent again is refused the same way, not run outside the session."""
    from adk.checkpoint import InMemoryCheckpointStore

    example = _example_service("_chat_agent_service_broken")
    asked = _asked(example)
    example.payment_done.set()
    store = InMemoryCheckpointStore()
    app = example.build_app(tmp_path / "unused.db", TracerProvider(), store)
    async with _serving(app) as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "pay"})
        paused = events[-1][1]["checkpoint_id"]
        await store.put(paused, b"\x00 not a checkpoint")
        kept = await store.get(paused)
        for attempt in range(2):  # sent again: the same refusal, nothing run
            status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
            error = events[0][1]
            assert status == 410, (attempt, status, events)
            assert f"checkpoint {paused!r} cannot be resumed" in error["error"], error
            assert "is not a pyadk checkpoint or is corrupt" in error["error"], error
            assert (error["kept"], error["resumable"], error["session_id"]) == (True, False, "s1")
        assert not example.paying.is_set()  # the payment was not made
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
        assert status == 200, events
        assert [(m.role.value, m.content) for m in asked[-1]] == [("user", "hi")]
        # A body edited under a whole summary header, its length kept: the example read the
        # header alone (through a listing) and answered 503 "resumable" until someone deleted
        # it, its session waiting for good. The resume read the body and says so (reason
        # "corrupt"): a 410.
        status, events = await example.post(port, "/sessions/s2/messages", {"message": "pay"})
        edited = events[-1][1]["checkpoint_id"]
        whole = await store.get(edited)
        assert whole is not None and whole.endswith(b"}")
        await store.put(edited, whole[:-1] + b" ")
        status, events = await example.post(port, f"/resume/{edited}", {"decision": True})
        assert status == 410 and "checksum does not match" in events[0][1]["error"], events
        status, events = await example.post(port, "/sessions/s2/messages", {"message": "hi"})
        assert status == 200, events  # its session went on
        assert [(m.role.value, m.content) for m in asked[-1]] == [("user", "hi")]
    assert await store.get(paused) == kept  # kept as it was: not deleted, not moved


async def test_the_example_services_checkpoint_of_another_pyadk_release_keeps_its_session_waiting(
    tmp_path: Path,
) -> None:
    """A checkpoint written by another pyadk release (a newer worker's pause, resumed by an old
    worker during a rolling deploy) is read by no resume of this version, and its listing says
    so (``error``): answered 410 "resumable": false, its session freed from it and every later
    resume refused, though the checkpoint is whole and a worker of that release resumes it (its
    refusal says so: "it is kept as it was"). A 503 now, the session waiting on it; once a
    worker that reads it serves the resume (here: the bytes as this release writes them), the
    decision sent again is the session's turn."""
    from adk.checkpoint import InMemoryCheckpointStore

    example = _example_service("_chat_agent_service_release")
    example.payment_done.set()
    store = InMemoryCheckpointStore()
    app = example.build_app(tmp_path / "unused.db", TracerProvider(), store)
    async with _serving(app) as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "pay"})
        paused = events[-1][1]["checkpoint_id"]
        written = await store.get(paused)
        assert written is not None
        line, _, rest = written.partition(b"\n")
        header = json.loads(line)
        newer = (
            json.dumps(header | {"version": adk.checkpoint.codec.VERSION + 1}).encode()
            + b"\n"
            + rest
        )
        await store.put(paused, newer)  # as a newer release's worker wrote it
        for attempt in range(2):
            status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
            error = events[0][1]
            assert status == 503 and "a newer pyadk wrote it" in error["error"], (attempt, events)
            assert (error["kept"], error["resumable"], error["session_id"]) == (True, True, "s1")
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
        assert status == 409 and events[0][1]["checkpoint_id"] == paused, events
        assert not example.paying.is_set()
        await store.put(paused, written)  # a worker of the release that reads it
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 200 and events[-1][1]["output"]["message"]["content"].startswith("Paid")


async def test_the_example_services_refusal_reads_the_one_checkpoint_not_a_listing_of_the_store(
    tmp_path: Path,
) -> None:
    """Whether a refused resume's checkpoint is readable was asked of
    ``runner.pending(checkpoint_id)``, a listing by prefix: the in-memory store copies every id
    it holds to pick those, Redis ``SCAN``s its whole keyspace (a round trip per page of keys),
    the session held meanwhile, for every refused resume (each resend through a redeploy's
    503s). The store is asked for that one checkpoint (a ``get``); its answer is the same."""
    from adk.checkpoint import InMemoryCheckpointStore

    listed: list[str | None] = []

    class Store(InMemoryCheckpointStore):
        def ids(self, prefix: str | None = None) -> AsyncIterator[str]:
            listed.append(prefix)
            return super().ids(prefix)

    example = _example_service("_chat_agent_service_one_read")
    store = Store()
    app = example.build_app(tmp_path / "unused.db", TracerProvider(), store)
    async with _serving(app) as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "pay"})
        paused = events[-1][1]["checkpoint_id"]
        await store.put(paused, b"\x00 not a checkpoint")
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 410 and events[0][1]["resumable"] is False, events
    assert listed == []  # the store was not listed
    assert not example.paying.is_set()


async def test_the_example_services_memory_of_unresumable_checkpoints_is_bounded_by_the_store(
    tmp_path: Path,
) -> None:
    """``Sessions.unresumable`` (checkpoints refused for good, whose sessions went on) only
    grew: one entry per such checkpoint for as long as the worker ran, kept after the store
    had let the checkpoint go. It keeps the newest ``UNRESUMABLE_KEPT``; one forgotten is
    refused all the same by the runner, which reads the same bytes (only without its
    session's id); and one whose checkpoint the store no longer holds goes at its next resume,
    a 404 as for any checkpoint gone."""
    from adk.checkpoint import InMemoryCheckpointStore

    example = _example_service("_chat_agent_service_bounded")
    made: list[Any] = []

    class Seen(example.Sessions):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    example.Sessions = Seen
    example.UNRESUMABLE_KEPT = 2
    store = InMemoryCheckpointStore()
    app = example.build_app(tmp_path / "unused.db", TracerProvider(), store)
    async with _serving(app) as port:
        ids = []
        for session in ("s1", "s2", "s3"):
            path = f"/sessions/{session}/messages"
            status, events = await example.post(port, path, {"message": "pay"})
            ids.append(events[-1][1]["checkpoint_id"])
            await store.put(ids[-1], b"\x00 not a checkpoint")
            status, events = await example.post(port, f"/resume/{ids[-1]}", {"decision": True})
            assert status == 410 and events[0][1]["session_id"] == session, events
        [sessions] = made
        assert list(sessions.unresumable) == ids[1:]  # the oldest forgotten
        status, events = await example.post(port, f"/resume/{ids[0]}", {"decision": True})
        assert status == 410 and events[0][1]["session_id"] is None, events  # refused still
        assert list(sessions.unresumable) == [ids[2], ids[0]]
        await store.delete(ids[2])  # let go by the store (an operator, a TTL)
        status, events = await example.post(port, f"/resume/{ids[2]}", {"decision": True})
        assert status == 404 and "no checkpoint" in events[0][1]["error"], events
        assert list(sessions.unresumable) == [ids[0]]
    assert not example.paying.is_set()


async def test_the_example_services_resume_gives_its_session_back_on_an_unexpected_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception the resume handler does not map went out of the handler with the session's
    lock taken: a bare 500, then every resume of the checkpoint 409 'being resumed', every message
    of the session 409, for good. The lock is given back; the session still waits on its kept
    checkpoint, and the decision sent again resumes it. (The failure is injected into the
    runner's resume: a store's own failures are CheckpointStoreErrors now, answered 503, and
    no unmapped one is known; this pins the handler's last resort.)"""
    from adk.checkpoint import InMemoryCheckpointStore

    mend = resumes_failing_unforeseen(monkeypatch)
    example = _example_service("_chat_agent_service_unexpected")
    example.payment_done.set()
    store = InMemoryCheckpointStore()
    app = example.build_app(tmp_path / "unused.db", TracerProvider(), store)
    async with _serving(app, log_level="critical") as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "pay"})
        paused = events[-1][1]["checkpoint_id"]
        status, _ = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 500
        mend()
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "hi"})
        assert status == 409 and events[0][1]["checkpoint_id"] == paused, events  # waits, free
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        assert status == 200, events
        assert events[-1][1]["output"]["message"]["content"].startswith("Paid")


class _Asks(adk.BaseAgent, adk.ResumableAgent):
    """Pauses each turn for a decision; its resume says nothing (``quiet``: a turn whose decision
    was all it needed, a ResumableAgent as a service may run) or is refused with the
    CheckpointError a pause no longer fitting the agent is."""

    def __init__(self, name: str, resumed: str) -> None:
        super().__init__(name)
        self.resumed = resumed

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        yield ctx.interrupt({"question": "go on?"})

    async def resume(self, ctx: adk.RunContext) -> AsyncIterator[adk.AgentEvent]:
        if self.resumed == "refused":
            raise adk.CheckpointError("the pause does not fit this agent")
        return
        yield  # an async generator that yields nothing


@pytest.mark.parametrize("resumed", ["quiet", "refused"])
async def test_the_example_services_resume_gives_its_session_back_however_it_begins(
    tmp_path: Path, resumed: str
) -> None:
    """A resume's first event is awaited before the 200 (its refusals come with it). A resume that
    yields no events made ``anext`` raise StopAsyncIteration: the request failed 500 holding the
    session's lock, every later message of it answered 409 'is answering another message'. One
    whose first event is a CheckpointError (refused, not raised) was answered 500 without giving
    the lock back, its next resume 409 'being resumed, or its session is busy' for good. A quiet
    resume ends the turn (200, no events); a refused one (503: this version cannot resume the
    readable checkpoint, a fixed one may) leaves the session waiting on it, its lock given
    back: its next resume is refused the same way, not 409 'being resumed', and its next message
    is refused as waiting for that decision, not as 'is answering another message'."""
    example = _example_service(f"_chat_agent_service_resumed_{resumed}")
    example.ReActAgent = lambda name, model, tools: _Asks(name, resumed)
    app = example.build_app(tmp_path / "checkpoints.db", TracerProvider())
    async with _serving(app, log_level="critical") as port:
        status, events = await example.post(port, "/sessions/s1/messages", {"message": "go"})
        assert status == 200 and events[-1][0] == "paused", events
        paused = events[-1][1]["checkpoint_id"]
        status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
        if resumed == "quiet":
            assert (status, events) == (200, [])
            status, events = await example.post(port, "/sessions/s1/messages", {"message": "next"})
            assert status == 200 and events[-1][0] == "paused", events  # its next turn, taken
        else:
            assert status == 503 and "does not fit" in events[0][1]["error"], events
            status, events = await example.post(port, f"/resume/{paused}", {"decision": True})
            assert status == 503 and "does not fit" in events[0][1]["error"], events  # not 409
            status, events = await example.post(port, "/sessions/s1/messages", {"message": "next"})
            assert status == 409 and events[0][1]["checkpoint_id"] == paused, events  # waits


def _snippet_of(page: str, marker: str) -> str:
    """The Python block of ``docs/<page>`` holding ``marker``."""
    text = (EXAMPLES.parent / "docs" / page).read_text()
    return next(b.split("```")[0] for b in text.split("```python\n")[1:] if marker in b)


async def test_the_service_pages_resume_handler_answers_a_resume_that_says_nothing(
    tmp_path: Path,
) -> None:
    """service.md's resume handler (the snippet of two workers sharing checkpoints) takes the
    first event before its 200: with ``anext(events)``, a resume yielding no events raised
    StopAsyncIteration out of the handler, a bare 500 for a turn that ended well. The snippet is
    run as the page has it, its agent a ResumableAgent whose resume says nothing."""
    code = _snippet_of("service.md", "def worker(store")
    code = code.replace("asyncio.run(main())", "")  # its worker and client, not its own run
    namespace: dict[str, Any] = {"__name__": "_service_snippet"}
    exec(compile(code, "<service.md worker>", "exec"), namespace)
    namespace["ReActAgent"] = lambda name, model, tools: _Asks(name, "quiet")
    async with adk.checkpoint.SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        config = uvicorn.Config(
            namespace["worker"](store), host="127.0.0.1", port=0, log_level="critical"
        )
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve())
        try:
            while not server.started:
                if serving.done():
                    await serving
                await asyncio.sleep(0.01)
            port = server.servers[0].sockets[0].getsockname()[1]
            status, answer = await namespace["post"](port, "/chat", {"message": "go"})
            checkpoint_id = json.loads(answer[answer.index("{") :])["checkpoint_id"]
            assert status == 200 and checkpoint_id, answer
            status, answer = await namespace["post"](
                port, f"/resume/{checkpoint_id}", {"decision": True}
            )
            assert status == 200, answer
        finally:
            server.should_exit = True
            await serving


async def _asgi_post(
    app: Any, path: str, body: Any, send: Any = None, spec: str = "2.4"
) -> list[dict[str, Any]]:
    """``body`` POSTed to ``app`` as an ASGI server would, no server between: the messages the
    app sent (``send``, when given, sends them instead)."""
    sent: list[dict[str, Any]] = []
    requested = [{"type": "http.request", "body": json.dumps(body).encode(), "more_body": False}]

    async def receive() -> dict[str, Any]:
        if requested:
            return requested.pop()
        await asyncio.Event().wait()  # the client stays: no disconnect
        return {}

    async def keep(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": spec},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-type", b"application/json")],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }
    await app(scope, receive, send or keep)
    return sent


async def test_the_example_services_resume_whose_response_never_starts_closes_its_run(
    tmp_path: Path,
) -> None:
    """The resume handler reads the resumed run's first event before it answers, so the run has
    started by then; a server whose ``send`` raises once its client is gone (ASGI 2.4) fails the
    response at its start, before its body's first step, and the body, which closes the run,
    never ran: the run stayed suspended, its ``invoke_agent`` span open under a request span
    that had ended, its checkpoint claimed, until the collector found the generator."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from starlette.requests import ClientDisconnect

    from adk.checkpoint import InMemoryCheckpointStore

    example = _example_service("_chat_agent_service_unstarted")
    example.payment_done.set()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = example.build_app(tmp_path / "unused.db", provider, InMemoryCheckpointStore())

    async def gone(message: dict[str, Any]) -> None:
        raise OSError("the client is gone")

    async with app.router.lifespan_context(app):
        sent = await _asgi_post(app, "/sessions/s1/messages", {"message": "pay"})
        text = b"".join(m.get("body", b"") for m in sent).decode()
        paused = json.loads(text.split("event: paused\ndata: ", 1)[1].split("\n", 1)[0])
        exporter.clear()
        with pytest.raises(ClientDisconnect):
            await _asgi_post(app, f"/resume/{paused['checkpoint_id']}", {"decision": True}, gone)
        ended = [span.name for span in exporter.get_finished_spans()]
        assert "POST /resume/{checkpoint_id}" in ended
        assert "invoke_agent clerk" in ended, ended  # the resumed run was closed, not left
