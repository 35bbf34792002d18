"""A real HTTP server that speaks the OpenAI wire protocol, for adapter tests and benchmarks.

Why hand-written on asyncio streams instead of starlette: the tests need exact control over the bytes on
the wire — a chunked SSE body that stops mid-way without its terminating chunk, a body that ends cleanly
but before the model finished, a reply that stalls past the client's timeout — and a server that starts
in well under a millisecond so every test can have its own. HTTP/1.1 with keep-alive, ``Content-Length``
request bodies (what the ``openai`` SDK sends) and chunked responses for streams is all it needs.

Every request is recorded (method, path, headers, JSON body, monotonic arrival time). Each request
consumes the next scripted :class:`Reply`; one reply renders as either protocol (Chat Completions or
Responses, streamed or not) depending on what the request asked for, so one script serves both APIs.

Run as a script (``python tests/openai_server.py``) it serves a default text reply forever and prints
``PORT <n>`` once listening; the benchmark uses that to keep the server out of the measured process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import ssl
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Call", "OpenAIServer", "RecordedRequest", "Reply", "reasoning_details_of"]


@dataclass(frozen=True)
class Call:
    """A tool call the scripted model makes; ``id`` defaults to ``call_<n>``."""

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """One scripted turn.

    ``status`` >= 400 makes it an HTTP error (``error`` is the server's message, ``retry_after`` the
    Retry-After header). ``delay`` stalls before the response headers or, for a stream with
    ``stall_after``, after the headers and that many SSE events (a server that stops mid-answer).
    For streams, ``break_after`` drops the connection after that many SSE events (an incomplete
    chunked body; a negative number counts from the end, ``-1`` leaving out Chat's ``[DONE]``, and
    one at least the number of events sends them all, then drops it), ``end_after`` ends the body
    cleanly after that many events, without the model having finished, and ``error_after`` sends
    the protocol's error event (message ``error``) after that many events. ``repeat_name`` makes tool-call fragments repeat id and name, as llama.cpp
    does. ``response_id`` replaces the id the server reports (``chatcmpl-<n>`` / ``resp_<n>``, n
    counting the server's answers), so two calls can be compared field for field. ``call_index``
    is how streamed tool-call fragments are numbered: ``"each"`` (0, 1, ... as OpenAI does),
    ``"shared"`` (every call 0, as Ollama does) or ``"none"`` (no index, as Gemini's OpenAI endpoint
    does; in a Responses stream, a function call's events with ``output_index`` 0, or without
    one, only its item id). ``call_ids`` False sends Chat tool calls without an ``id`` (servers
    that leave it out; with ``call_index="shared"``, each whole call streamed at index 0 after the
    one before). ``content_parts`` sends the content as a list of parts, reasoning as a ``thinking`` part
    (Mistral's reasoning models), in both modes. ``raw`` replaces the whole answer with these bytes
    (``status``, 200 unless given: an error's body as a proxy or a FastAPI server sends it;
    ``content_type``) whatever was asked, and ``malformed_after`` sends an SSE event
    that is not JSON after that many events of a stream. ``refusal`` is
    the model declining: Chat's ``message.refusal`` (streamed as ``delta.refusal`` fragments), a
    Responses ``refusal`` content part (streamed as ``response.refusal.delta`` events and a
    ``response.refusal.done``, or only the latter when ``refusal_deltas`` is False, or none at all,
    the refusal only in the final response object, when ``refusal_events`` is False).
    ``arguments_as_object`` sends tool-call arguments as a JSON object instead of a string (as
    some llama.cpp builds and TGI do), streamed in one fragment with the call's id and name.
    ``text_events`` is how a Responses stream carries text and reasoning: as ``"deltas"`` (as
    OpenAI does), only as each part's ``.done`` event (``"done"``, as some gateways do), or not at
    all, only in the final response object (``"final"``). ``call_added`` False streams a Responses
    function call's argument deltas without its ``output_item.added`` first: the call's id and
    name come only in its ``output_item.done``. ``error_metadata`` goes with the error
    (an HTTP error, or one reported mid-stream), as OpenRouter sends what the provider behind it
    said (``{"provider_name": ..., "raw": ...}``). ``error_code`` replaces the error's ``code``
    (the status, as text, by default) and ``error_param`` sets its ``param`` (OpenAI's name of the
    field at fault); in a stream's error event it replaces the code (vLLM's number 500 in Chat,
    ``server_error`` in Responses) with this text, as LiteLLM's proxy sends the upstream's
    status. ``finish_reason="error"`` answers as OpenRouter does when the provider failed while
    the model was answering: the choice (a stream's last) carries ``error`` (``code`` 502, or
    ``error_code``; ``error`` its message). ``echo_request`` answers the error as FastAPI-based
    servers (vLLM, LiteLLM) answer a
    model-level validator's failure: ``"detail"`` as FastAPI does, ``{"detail": [{"type":
    "value_error", "loc": ["body"], "msg": "Value error, <error>", "input": <the whole request>,
    "ctx": ...}]}``, or ``"message"``, that list's text as an OpenAI error's message, as servers
    with their own handler for validation errors do.
    ``signature`` goes on the first tool call of a Chat answer as Gemini's OpenAI endpoint puts
    its thought signature there (``extra_content.google.thought_signature``; the first of
    parallel calls alone carries one); ``OpenAIServer(thought_signatures=True)`` sets it.
    ``sign_each`` puts one on every call, ``<signature>-<place>`` after the first (what a server
    keeping something per call sends). ``finish_sent`` False answers with no finish reason
    (``null``), a stream's last chunk too, as some servers end a stream, with its ``[DONE]``.
    ``reasoning_details`` sends the reasoning as OpenRouter does for a model whose reasoning
    must come back (Gemini 3, Claude's thinking): ``reasoning`` and ``reasoning_details``, a
    ``reasoning.text`` entry (the text, signed) and a ``reasoning.encrypted`` one; streamed, the
    text in pieces each its own entry (every one at ``index`` 0, as OpenRouter streams them),
    then its signature in a text-less entry, then the encrypted one
    (:func:`reasoning_details_of` gives what a client must send back). ``reasoning_blocks``
    splits the reasoning into that many signed ``reasoning.text`` entries (Claude's thinking in
    several blocks, each signed), streamed one after the other, every piece at ``index`` 0.
    ``events`` replaces a stream's events with these, sent as they are (text or bytes: an event
    cut mid-way, invalid UTF-8, a chunk of another shape), whichever protocol was asked for;
    ``break_after`` and the other cuts apply to them. ``arguments_resent`` streams each tool
    call's arguments as servers that send them more than once do: ``"after"`` sends the whole
    arguments again after the fragments that carried them, in a fragment of their own (no id,
    no name), ``"whole"`` sends the whole call again after them, its id, name and arguments
    re-serialized (``{"a":1}`` for ``{"a": 1}``), as proxies that end a call with a
    "consolidated" chunk do, and ``"cumulative"`` makes each fragment carry the arguments so
    far, as some DeepSeek hosts do. ``arguments_done_only`` streams a Responses function call's
    arguments in its ``function_call_arguments.done`` alone, no deltas, and its finished item
    without them (OpenAI's gpt-5.3-codex-spark sends no deltas; some gateways then an item
    with empty arguments). ``endless`` is an event sent again and
    again after the stream's events, until the client hangs up (a server stuck sending empty
    chunks). ``reset`` drops the connection once the request is read, with no answer at all (a
    load balancer whose backend died mid-request), streamed or not. ``should_retry`` sends an
    HTTP error's ``x-should-retry`` header (``"false"``: the server, or a gateway that already
    retried upstream, says another attempt fails alike).
    """

    text: str = ""
    refusal: str = ""
    refusal_deltas: bool = True
    refusal_events: bool = True
    tool_calls: Sequence[Call] = ()
    reasoning: str = ""
    status: int = 200
    error: str = "scripted failure"
    retry_after: str | None = None
    delay: float = 0.0
    finish_reason: str | None = None
    usage: tuple[int, int] = (11, 7)
    cached_tokens: int = 0  # of usage's input tokens, served from the prompt cache
    reasoning_tokens: int = 0  # of usage's output tokens, spent reasoning
    cache_fields: str = "openai"  # or "deepseek": Chat usage's prompt_cache_hit/miss_tokens
    repeat_name: bool = False
    fragment: int = 4
    break_after: int | None = None
    end_after: int | None = None
    error_after: int | None = None
    stall_after: int | None = None
    response_id: str | None = None
    service_tier: str | None = None  # the tier the response says processed it
    system_fingerprint: str | None = None  # Chat Completions only
    call_index: str = "each"
    call_ids: bool = True
    content_parts: bool = False
    raw: bytes | None = None
    content_type: str = "application/json"
    malformed_after: int | None = None
    arguments_as_object: bool = False
    text_events: str = "deltas"
    call_added: bool = True
    error_metadata: dict[str, Any] | None = None
    error_code: str | None = None
    error_param: str | None = None
    echo_request: str = ""
    events: Sequence[str | bytes] | None = None
    endless: str | bytes | None = None
    signature: str | None = None
    sign_each: bool = False
    finish_sent: bool = True
    reasoning_details: bool = False
    reasoning_blocks: int = 1
    arguments_resent: str | None = None
    arguments_done_only: bool = False
    reset: bool = False
    should_retry: str | None = None

    @property
    def finish(self) -> str | None:
        if not self.finish_sent:
            return None
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    received_at: float = field(default_factory=time.monotonic)


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}


class OpenAIServer:
    """Scripted OpenAI-compatible server on 127.0.0.1 with an ephemeral port.

    Use as ``async with OpenAIServer([Reply(text="hi")]) as server: ... server.base_url``. When the
    script runs out, ``default`` answers; without a default the server answers 500 so a test that
    makes more calls than it scripted fails loudly.

    ``stalls`` counts the times the server began stalling (``delay``) before or during an answer,
    and ``hangups`` the times a client closed its connection meanwhile: a client that walks away
    releases its connection.

    ``reasoning_back`` makes the server refuse a Chat request whose assistant tool-call messages
    lack ``reasoning_content``, in the words of DeepSeek's thinking mode (``"deepseek"``) or of
    Kimi's (``"kimi"``); None (the default) takes any.

    Tool names are checked as OpenAI checks them (``^[a-zA-Z0-9_-]+$``, at most 64 characters):
    a request offering a tool named otherwise is answered 400 with OpenAI's error; so is a Chat
    request whose assistant tool calls are not each answered by a tool message after them.

    ``refuses`` names request fields the server does not take: a request carrying one is answered
    400 before any scripted reply is used, in OpenAI's words (``refusal="openai"``: "Unsupported
    parameter", with ``param`` and ``code``, as its reasoning models answer ``max_tokens``) or in
    older Azure API versions' (``"azure"``: "Unrecognized request argument supplied", neither).

    ``structured`` is how much of a ``json_schema`` response format (Chat's ``response_format``,
    Responses' ``text.format``) the server takes, refusing the rest with 400 in real servers' words:
    None takes anything; ``"openai"`` checks a ``strict`` schema against OpenAI's strict-mode rules
    (every object ``additionalProperties: false`` and every property required, only the keywords
    and formats it documents, a root object, its size limits: ``_strict_problem``) and JSON mode
    for the word "json" in the messages, as OpenAI does; ``"json_object"`` takes only JSON mode, as DeepSeek
    ("This response_format type is unavailable now") and older llama.cpp builds do;
    ``"no_strict"`` refuses the ``strict`` field as a pydantic-validated server does (422,
    ``extra_forbidden``); ``"no_refs"`` refuses schemas with ``$defs``, ``$ref`` or ``anyOf`` as
    vLLM does when its grammar backend cannot compile them (a stream request is answered 200, the
    error its first event, as vLLM's V1 engine does); ``"llama_cpp"`` refuses a schema with an
    unanchored ``pattern`` (``"\\S"``) as llama-server's grammar conversion does.

    ``tool_ids`` makes the server refuse a Chat request carrying a tool-call id Mistral's
    validator (``mistral_common``, behind api.mistral.ai and vLLM's ``--tokenizer-mode mistral``)
    refuses, any but nine ASCII letters and digits, in an assistant's call or a tool message: with
    Mistral's own 400 (``"mistral"``, its flat error object) or as OpenRouter passes it on
    (``"openrouter"``, "Provider returned error" with Mistral's answer in ``metadata.raw``).
    ``"anthropic"`` refuses, in a Chat or a Responses request, an id Anthropic and AWS Bedrock
    refuse (any but ``^[a-zA-Z0-9_-]+$``, or longer than 64 as some proxies check), as OpenRouter
    passes Anthropic's 400 on ("Provider returned error", its answer in ``metadata.raw``:
    "messages.1.content.0.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'").
    ``"openai"`` refuses an id as OpenAI's own API does, by its length only: more than 40
    characters in a Chat request, more than 64 as a Responses ``call_id`` ("Invalid
    'input[3].call_id': string too long. Expected a string with maximum length 64, ...").

    ``thought_signatures`` answers as Gemini 3 does through its OpenAI endpoint: the first tool
    call of each answer carries a thought signature (``Reply.signature``), and a Chat request
    whose current turn (after its last user message) holds an assistant's tool calls without the
    signature given with them is refused with Gemini's 400, "Function call is missing a
    thought_signature in functionCall parts", its body a list as Gemini's is.

    ``keep_reasoning_details`` refuses, as OpenRouter does for Gemini 3 (HTTP 400 "Provider
    returned error", its reason in ``metadata.raw``), a Chat request whose current turn holds an
    assistant's tool calls without the ``reasoning_details`` its reply came with (a reply with
    ``Reply.reasoning_details``), compared without their ``index``.

    ``forbids`` names fields a Chat request's messages (and their tool calls) may not carry: a
    request whose messages carry one is answered as Mistral's API answers a field it does not
    know in a message, 422 with pydantic's ``extra_forbidden`` under ``message.detail``; with
    ``forbids_as="gemini"``, as Gemini's OpenAI endpoint answers a field it does not know, 400
    "Invalid JSON payload received. Unknown name ... Cannot find field.", its body a list.

    ``hold`` keeps the first that many requests waiting until all have arrived, then answers
    them: concurrent calls (a service's first requests) all meet the server's first answer.
    A sequence holds group after group: ``hold=(3, 3)`` the first three requests until all
    three have arrived, then the next three alike (calls in flight at once, round after round).

    ``respond`` answers a request the script has no reply left for, from the request's JSON body,
    before ``default``: a model whose answer depends on what it was asked, for callers whose
    requests arrive in no fixed order (records of many keys classified concurrently).

    ``tls`` (a server-side ``ssl.SSLContext``) serves HTTPS (``root_url`` is ``https://``); the
    ALPN protocol each connection agreed on is kept in ``alpn``. A request in absolute form
    (``POST http://host/v1/chat/completions``, what a client sends an HTTP proxy) is answered as
    its path, and recorded with the target as sent: a server standing in for a proxy shows the
    requests that went through it.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        model: str = "test-model",
        default: Reply | None = None,
        record: bool = True,
        refuses: Sequence[str] = (),
        refusal: str = "openai",
        reasoning_back: str | None = None,
        tool_ids: str | None = None,
        thought_signatures: bool = False,
        keep_reasoning_details: bool = False,
        forbids: Sequence[str] = (),
        forbids_as: str = "mistral",
        structured: str | None = None,
        hold: int | Sequence[int] = 0,
        respond: Callable[[Any], Reply] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.respond = respond
        self.tls = tls
        self.alpn: list[str | None] = []
        self.structured = structured
        holds = deque([hold] if isinstance(hold, int) else hold)
        self.hold = holds.popleft() if holds else 0
        self._holds = holds  # the groups held after this one
        self._held = asyncio.Event()
        self.reasoning_back = reasoning_back
        self.tool_ids = tool_ids
        self.thought_signatures = thought_signatures
        self.keep_reasoning_details = keep_reasoning_details
        self.forbids = tuple(forbids)
        self.forbids_as = forbids_as
        self._details_given: dict[str, list[dict[str, Any]]] = {}  # call id -> its reply's
        self.signatures_given: set[str] = set()
        self._script: deque[Reply] = deque(replies)
        self.refuses = tuple(refuses)
        self.refusal = refusal
        self.default = default
        self.model = model
        self.record = record
        self.requests: list[RecordedRequest] = []
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._counter = 0
        self.port = 0
        self.stalls = 0
        self.hangups = 0

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> OpenAIServer:
        self._server = await asyncio.start_server(self._on_connection, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> OpenAIServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def root_url(self) -> str:
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def script(self, *replies: Reply) -> None:
        self._script.extend(replies)

    @property
    def open_connections(self) -> int:
        """How many client connections are open now (a client that closed one has let it go)."""
        return len(self._connections)

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self.requests]

    # -- HTTP ------------------------------------------------------------------------------------

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        if self.tls is not None:
            self.alpn.append(writer.get_extra_info("ssl_object").selected_alpn_protocol())
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # close() cancels connections still open; asyncio 3.11 would log a re-raise here
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        line = await reader.readline()
        if not line:
            return False
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            raw = await reader.readline()
            if raw in (b"\r\n", b"\n", b""):
                break
            key, _, value = raw.decode("latin-1").partition(":")
            headers[key.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        payload = await reader.readexactly(length) if length else b""
        body = json.loads(payload) if payload else None
        if self.record:
            self.requests.append(RecordedRequest(method, target, headers, body))
        if "://" in target:  # absolute form, as sent to a proxy
            target = "/" + target.split("://", 1)[1].partition("/")[2]
        target = target.partition("?")[0]  # routed by its path; recorded with its query
        if self.hold:
            self.hold -= 1
            held = self._held
            if not self.hold:
                held.set()
                if self._holds:  # the next group waits on an event of its own
                    self.hold, self._held = self._holds.popleft(), asyncio.Event()
            await held.wait()

        if method != "POST" or target not in ("/v1/chat/completions", "/v1/responses"):
            await self._send_json(writer, 404, {"error": {"message": f"Unknown path {target}"}})
            return True
        refused = [key for key in self.refuses if isinstance(body, dict) and key in body]
        if refused:
            await self._send_json(writer, 400, {"error": _refusal(refused[0], self.refusal)})
            return True
        refusal = _format_refusal(body, self.structured, responses=target == "/v1/responses")
        if refusal is not None:
            status, document = refusal
            if (
                self.structured == "no_refs"
                and body.get("stream") is True
                and target.endswith("/chat/completions")
            ):
                # vLLM's V1 engine compiles the schema once the stream has started: a 200 whose
                # first event is the error (its newer ``{"error": {...}}`` shape)
                error = {key: document[key] for key in ("message", "type", "param", "code")}
                events = [f"data: {json.dumps({'error': error})}\n\n", "data: [DONE]\n\n"]
                return await self._send_stream(reader, writer, Reply(), events)
            await self._send_json(writer, status, document)
            return True
        missing = _missing_reasoning(body, self.reasoning_back)
        if missing is not None:
            await self._send_json(writer, 400, {"error": missing})
            return True
        if self.thought_signatures and target == "/v1/chat/completions":
            unsigned = _unsigned_call(body, self.signatures_given)
            if unsigned is not None:
                await self._send_json(writer, 400, unsigned)
                return True
        if self.forbids and target == "/v1/chat/completions":
            if self.forbids_as == "gemini":
                unknown = _unknown_fields(body, self.forbids)
                if unknown is not None:
                    await self._send_json(writer, 400, unknown)
                    return True
            forbidden = _forbidden_fields(body, self.forbids)
            if forbidden is not None and self.forbids_as == "mistral":
                await self._send_json(writer, 422, forbidden)
                return True
        if self.keep_reasoning_details and target == "/v1/chat/completions":
            lost = _lost_reasoning_details(body, self._details_given)
            if lost is not None:
                await self._send_json(writer, 400, lost)
                return True
        if self.tool_ids == "anthropic":
            refused_id = _bad_anthropic_id(body)
            if refused_id is not None:
                await self._send_json(writer, 400, refused_id)
                return True
        elif self.tool_ids == "openai":
            refused_id = _long_openai_id(body)
            if refused_id is not None:
                await self._send_json(writer, 400, refused_id)
                return True
        elif self.tool_ids is not None and target == "/v1/chat/completions":
            refused_id = _bad_mistral_id(body, self.tool_ids)
            if refused_id is not None:
                await self._send_json(writer, 400, refused_id)
                return True
        invalid = _invalid_tool_name(body, responses=target == "/v1/responses")
        if invalid is None and target == "/v1/chat/completions":
            invalid = _unanswered_tool_calls(body)
        if invalid is None:
            invalid = (
                _tool_field_without_tools(body)
                if target == "/v1/chat/completions"
                else _tool_choice_without_tools(body)
            )
        if invalid is not None:
            await self._send_json(writer, 400, {"error": invalid})
            return True
        reply = self._next_reply(body)
        if reply.reasoning_details:
            for i, call in enumerate(reply.tool_calls):
                self._details_given[_call_id(call, i)] = reasoning_details_of(reply)
        if self.thought_signatures and reply.tool_calls:
            signature = f"c2lnbmF0dXJl-{self._counter + 1}"  # opaque to the client
            self.signatures_given.add(signature)
            reply = dataclasses.replace(reply, signature=signature)
        if reply.delay and reply.stall_after is None and await self._hung_up(reader, reply.delay):
            return False
        if reply.reset:
            writer.transport.abort()  # no status line, no body: the client's read fails at once
            return False
        if reply.raw is not None:
            await self._send_bytes(writer, reply.status, reply.raw, reply.content_type)
            return True
        if reply.status >= 400:
            extra = {"Retry-After": reply.retry_after} if reply.retry_after is not None else {}
            if reply.should_retry is not None:
                extra["x-should-retry"] = reply.should_retry
            if reply.echo_request:
                await self._send_json(writer, reply.status, _validation_error(reply, body), extra)
                return True
            code = reply.error_code or str(reply.status)
            error = {"message": reply.error, "type": "scripted_error", "code": code}
            if reply.error_metadata is not None:
                error["metadata"] = reply.error_metadata
            if reply.error_param is not None:
                error["param"] = reply.error_param
            await self._send_json(writer, reply.status, {"error": error}, extra)
            return True
        self._counter += 1
        responses = target == "/v1/responses"
        if isinstance(body, dict) and body.get("stream") is True:
            if reply.events is not None:
                return await self._send_stream(reader, writer, reply, list(reply.events))
            if responses:
                events = _responses_events(reply, self.model, self._counter)
            else:
                options = body.get("stream_options") or {}
                events = _chat_events(
                    reply, self.model, self._counter, options.get("include_usage")
                )
            if reply.error_after is not None:
                events = events[: reply.error_after] + _error_events(reply, responses, self.model)
            if reply.malformed_after is not None:
                cut = reply.malformed_after
                events = [*events[:cut], "data: {not json\n\n", *events[cut:]]
            return await self._send_stream(reader, writer, reply, events)
        if responses:
            document = _response_object(reply, self.model, self._counter, "completed")
        else:
            document = _chat_completion(reply, self.model, self._counter)
        await self._send_json(writer, 200, document)
        return True

    def _next_reply(self, body: Any) -> Reply:
        if self._script:
            return self._script.popleft()
        if self.respond is not None:
            return self.respond(body)
        if self.default is not None:
            return self.default
        return Reply(status=500, error="the test server has no scripted reply left")

    async def _hung_up(self, reader: asyncio.StreamReader, delay: float) -> bool:
        """Stall for ``delay`` seconds; True (and counted) if the client hangs up meanwhile."""
        self.stalls += 1
        try:
            data = await asyncio.wait_for(reader.read(1), delay)
        except TimeoutError:
            return False
        except ConnectionError:  # closed with a reset rather than a FIN
            data = b""
        if data:  # the client sent something mid-answer: not a protocol this server speaks
            raise ConnectionError("unexpected bytes from the client while answering")
        self.hangups += 1
        return True

    @classmethod
    async def _send_json(
        cls,
        writer: asyncio.StreamWriter,
        status: int,
        document: Any,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        await cls._send_bytes(
            writer, status, json.dumps(document).encode(), "application/json", extra_headers
        )

    @staticmethod
    async def _send_bytes(
        writer: asyncio.StreamWriter,
        status: int,
        data: bytes,
        content_type: str,
        extra_headers: dict[str, str] | None = None,
    ) -> None:
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(data)}",
        ]
        head.extend(f"{k}: {v}" for k, v in (extra_headers or {}).items())
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        await writer.drain()

    async def _send_stream(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        reply: Reply,
        events: Sequence[str | bytes],
    ) -> bool:
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        cut = reply.break_after if reply.break_after is not None else reply.end_after
        parts = [head.encode()]
        for position, event in enumerate(events if cut is None else events[:cut]):
            if position == reply.stall_after:
                writer.write(b"".join(parts))
                await writer.drain()
                parts.clear()
                if await self._hung_up(reader, reply.delay):
                    return False
            data = event.encode() if isinstance(event, str) else event
            parts.append(b"%x\r\n%s\r\n" % (len(data), data))
        if reply.endless is not None:
            writer.write(b"".join(parts))
            parts.clear()
            data = reply.endless.encode() if isinstance(reply.endless, str) else reply.endless
            chunk = b"%x\r\n%s\r\n" % (len(data), data)
            while not writer.is_closing():  # until the client hangs up (drain raises then)
                writer.write(chunk * 64)
                await writer.drain()
                await asyncio.sleep(0)
            return False
        if reply.break_after is not None:
            writer.write(b"".join(parts))
            await writer.drain()
            writer.transport.abort()  # no terminating chunk: the client sees a broken body
            return False
        parts.append(b"0\r\n\r\n")
        writer.write(b"".join(parts))
        await writer.drain()
        return True


def _missing_reasoning(body: Any, style: str | None) -> dict[str, Any] | None:
    """The error of a thinking-mode server (DeepSeek, Kimi) for an assistant tool-call message sent
    without its ``reasoning_content``, or None."""
    messages = body.get("messages") if isinstance(body, dict) and style else None
    for position, message in enumerate(messages if isinstance(messages, list) else ()):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        if "reasoning_content" in message:
            continue
        if style == "kimi":
            text = (
                "thinking is enabled but reasoning_content is missing in assistant tool call "
                f"message at index {position}"
            )
            return {"message": text, "type": "invalid_request_error"}
        text = "The `reasoning_content` in the thinking mode must be passed back to the API."
        return {"message": text, "type": "invalid_request_error", "param": None, "code": None}
    return None


def _unsigned_call(body: Any, given: set[str]) -> list[dict[str, Any]] | None:
    """Gemini's 400 for a request whose current turn holds tool calls without the thought
    signature given with them (see ``OpenAIServer.thought_signatures``), or None."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return None
    users = [i for i, message in enumerate(messages) if message.get("role") == "user"]
    for position, message in enumerate(messages[users[-1] if users else 0 :]):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            continue
        google = (calls[0].get("extra_content") or {}).get("google") or {}
        if google.get("thought_signature") in given:
            continue
        said = (
            "Function call is missing a thought_signature in functionCall parts. This is "
            "required for tools to work correctly, and missing thought_signature may lead to "
            "degraded model performance. Additional data, function call "
            f"`default_api:{calls[0]['function']['name']}` , position {position + 1}. Please "
            "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
        )
        return [{"error": {"code": 400, "message": said, "status": "INVALID_ARGUMENT"}}]
    return None


def _unknown_fields(body: Any, forbids: Sequence[str]) -> list[dict[str, Any]] | None:
    """Gemini's 400 for message fields it does not know (``OpenAIServer.forbids`` with
    ``forbids_as="gemini"``), or None: its JSON parser's "Unknown name" for each, a list body."""
    said: list[str] = []
    messages = body.get("messages") if isinstance(body, dict) else None
    for position, message in enumerate(messages if isinstance(messages, list) else ()):
        where = [(f"messages[{position}]", message)]
        for n, call in enumerate(message.get("tool_calls") or ()):
            where.append((f"messages[{position}].tool_calls[{n}]", call))
        said.extend(
            f"Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."
            for at, item in where
            for key in forbids
            if key in item
        )
    if not said:
        return None
    violations = [{"description": text} for text in said]
    details = [
        {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": violations}
    ]
    error = {"code": 400, "message": "\n".join(said), "status": "INVALID_ARGUMENT"}
    return [{"error": {**error, "details": details}}]


def _forbidden_fields(body: Any, forbids: Sequence[str]) -> dict[str, Any] | None:
    """Mistral's 422 for message fields it does not take (``OpenAIServer.forbids``), or None."""
    errors: list[dict[str, Any]] = []
    messages = body.get("messages") if isinstance(body, dict) else None
    for position, message in enumerate(messages if isinstance(messages, list) else ()):
        role = message.get("role")
        where: list[tuple[list[Any], dict[str, Any]]] = [
            (["body", "messages", position, role], message)
        ]
        for n, call in enumerate(message.get("tool_calls") or ()):
            where.append((["body", "messages", position, role, "tool_calls", n], call))
        for loc, item in where:
            errors.extend(
                {
                    "type": "extra_forbidden",
                    "loc": [*loc, key],
                    "msg": "Extra inputs are not permitted",
                    "input": item[key],
                }
                for key in forbids
                if key in item
            )
    if not errors:
        return None
    return {
        "object": "error",
        "message": {"detail": errors},
        "type": "invalid_request_error",
        "param": None,
        "code": None,
    }


def reasoning_details_of(reply: Reply) -> list[dict[str, Any]]:
    """The ``reasoning_details`` of a reply (``Reply.reasoning_details``), as a non-streamed
    answer carries them: a signed ``reasoning.text`` entry and a ``reasoning.encrypted`` one."""
    blocks = _reasoning_blocks(reply)
    texts = [
        {
            "type": "reasoning.text",
            "text": block,
            "signature": "c2lnbmVk" + (str(n) if n else ""),
            "format": "anthropic-claude-v1",
            "index": n,
        }
        for n, block in enumerate(blocks)
    ]
    hidden = {
        "type": "reasoning.encrypted",
        "data": "ZW5jcnlwdGVk",
        "format": "unknown",
        "index": len(blocks),
    }
    return [*texts, hidden]


def _reasoning_blocks(reply: Reply) -> list[str]:
    """The reasoning split into ``Reply.reasoning_blocks`` texts."""
    count = max(reply.reasoning_blocks, 1)
    size = -(-len(reply.reasoning) // count) or 1
    return _pieces(reply.reasoning, size) or [""]


def _streamed_reasoning_details(reply: Reply) -> list[list[dict[str, Any]]]:
    """Each streamed delta's ``reasoning_details``, as OpenRouter streams them: the text in
    pieces, then its signature alone, then the encrypted entry, every one at ``index`` 0."""
    *texts, hidden = reasoning_details_of(reply)
    deltas: list[list[dict[str, Any]]] = []
    for text in texts:
        common = {"type": "reasoning.text", "format": text["format"], "index": 0}
        deltas += [[{**common, "text": piece}] for piece in _pieces(text["text"], 8)]
        deltas.append([{**common, "text": "", "signature": text["signature"]}])
    deltas.append([{**hidden, "index": 0}])
    return deltas


def _lost_reasoning_details(
    body: Any, given: dict[str, list[dict[str, Any]]]
) -> dict[str, Any] | None:
    """OpenRouter's 400 for a request whose current turn holds a tool call without the
    ``reasoning_details`` given with it (see ``OpenAIServer.keep_reasoning_details``), or None."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return None
    users = [i for i, message in enumerate(messages) if message.get("role") == "user"]
    for message in messages[users[-1] if users else 0 :]:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        expected = given.get(calls[0].get("id")) if calls else None
        if expected is None:
            continue
        sent = message.get("reasoning_details")
        unindexed = [
            [{k: v for k, v in entry.items() if k != "index"} for entry in details]
            for details in (expected, sent if isinstance(sent, list) else [])
        ]
        if unindexed[0] == unindexed[1]:
            continue
        raw = (
            "Gemini models require OpenRouter reasoning details to be preserved in each request. "
            "Please refer to our docs: https://openrouter.ai/docs/guides/best-practices/"
            "reasoning-tokens#preserving-reasoning-blocks."
        )
        metadata = {"raw": raw, "provider_name": "Google AI Studio"}
        return {"error": {"message": "Provider returned error", "code": 400, "metadata": metadata}}
    return None


_MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")


def _bad_mistral_id(body: Any, style: str) -> dict[str, Any] | None:
    """The 400 document of a server checking tool-call ids as Mistral does (see
    ``OpenAIServer.tool_ids``), or None when every id passes."""
    ids: list[object] = []
    for message in body.get("messages") or () if isinstance(body, dict) else ():
        ids.extend(call.get("id") for call in message.get("tool_calls") or ())
        if message.get("role") == "tool":
            ids.append(message.get("tool_call_id"))
    for call_id in ids:
        if isinstance(call_id, str) and _MISTRAL_ID.fullmatch(call_id):
            continue
        said = f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9."
        error = {
            "object": "error",
            "message": said,
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
        if style == "openrouter":
            raw = json.dumps({**error, "type": "invalid_function_call", "code": "3280"})
            metadata = {"raw": raw, "provider_name": "Mistral"}
            return {
                "error": {"message": "Provider returned error", "code": 400, "metadata": metadata}
            }
        return error
    return None


_ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def _long_openai_id(body: Any) -> dict[str, Any] | None:
    """The 400 document of OpenAI's API refusing a tool-call id for its length (see
    ``OpenAIServer.tool_ids``), or None when every id of the Chat or Responses request passes."""
    places: list[tuple[str, object, int]] = []
    if isinstance(body, dict):
        for index, message in enumerate(body.get("messages") or ()):
            for number, call in enumerate(message.get("tool_calls") or ()):
                places.append((f"messages[{index}].tool_calls[{number}].id", call.get("id"), 40))
            if message.get("role") == "tool":
                places.append((f"messages[{index}].tool_call_id", message.get("tool_call_id"), 40))
        items = body.get("input")
        for index, item in enumerate(items if isinstance(items, list) else ()):
            if item.get("type") in ("function_call", "function_call_output"):
                places.append((f"input[{index}].call_id", item.get("call_id"), 64))
    for where, call_id, most in places:
        if not isinstance(call_id, str) or len(call_id) <= most:
            continue
        said = (
            f"Invalid '{where}': string too long. Expected a string with maximum length {most}, "
            f"but got a string with length {len(call_id)} instead."
        )
        return {
            "error": {
                "message": said,
                "type": "invalid_request_error",
                "param": where,
                "code": "string_above_max_length",
            }
        }
    return None


def _bad_anthropic_id(body: Any) -> dict[str, Any] | None:
    """The 400 document of a proxy passing on Anthropic's refusal of a tool-call id (see
    ``OpenAIServer.tool_ids``), or None when every id of the Chat or Responses request passes."""
    places: list[tuple[str, object]] = []
    if isinstance(body, dict):
        for index, message in enumerate(body.get("messages") or ()):
            for call in message.get("tool_calls") or ():
                places.append((f"messages.{index}.content.0.tool_use.id", call.get("id")))
            if message.get("role") == "tool":
                where = f"messages.{index}.content.0.tool_result.tool_use_id"
                places.append((where, message.get("tool_call_id")))
        for index, item in enumerate(
            body.get("input") or () if isinstance(body.get("input"), list) else ()
        ):
            if item.get("type") == "function_call":
                places.append((f"messages.{index}.content.0.tool_use.id", item.get("call_id")))
            elif item.get("type") == "function_call_output":
                where = f"messages.{index}.content.0.tool_result.tool_use_id"
                places.append((where, item.get("call_id")))
    for where, call_id in places:
        if isinstance(call_id, str) and _ANTHROPIC_ID.fullmatch(call_id):
            continue
        said = f"{where}: String should match pattern '^[a-zA-Z0-9_-]+$'"
        if isinstance(call_id, str) and len(call_id) > 64:
            said = f"{where}: String should have at most 64 characters"
        raw = json.dumps(
            {"type": "error", "error": {"type": "invalid_request_error", "message": said}}
        )
        metadata = {"raw": raw, "provider_name": "Anthropic"}
        return {"error": {"message": "Provider returned error", "code": 400, "metadata": metadata}}
    return None


def _format_refusal(
    body: Any, style: str | None, *, responses: bool
) -> tuple[int, dict[str, Any]] | None:
    """``(status, document)`` of a server refusing the request's response format (see
    ``OpenAIServer.structured``), or None when it takes it."""
    if style is None or not isinstance(body, dict):
        return None
    if responses:
        wire = (body.get("text") or {}).get("format")
        spec, field = wire, "text.format"
    else:
        wire = body.get("response_format")
        spec, field = (wire or {}).get("json_schema"), "response_format"
    if not isinstance(wire, dict):
        return None
    kind = wire.get("type")
    if style == "openai":
        if (
            kind == "json_object"
            and "json" not in json.dumps(body.get("messages" if not responses else "input")).lower()
        ):
            message = (
                "'messages' must contain the word 'json' in some form, to use 'response_format' "
                "of type 'json_object'."
            )
            return 400, _invalid_request(message, "messages")
        if kind != "json_schema" or not isinstance(spec, dict) or not spec.get("strict"):
            return None
        problem = _strict_problem(spec.get("schema"), ())
        if problem is None:
            return None
        message = f"Invalid schema for response_format '{spec.get('name')}': {problem}"
        return 400, _invalid_request(message, f"{field}.schema" if responses else field)
    if style == "json_object":
        if kind == "json_schema":
            error = _invalid_request("This response_format type is unavailable now", None)
            error["error"]["code"] = "invalid_request_error"
            return 400, error
        return None
    if style == "no_strict":
        if isinstance(spec, dict) and "strict" in spec:
            loc = (
                ["body", "text", "format", "strict"]
                if responses
                else ["body", "response_format", "json_schema", "strict"]
            )
            detail = {
                "type": "extra_forbidden",
                "loc": loc,
                "msg": "Extra inputs are not permitted",
                "input": spec["strict"],
            }
            return 422, {"detail": [detail]}
        return None
    if style == "no_refs":
        text = json.dumps((spec or {}).get("schema"))
        if kind == "json_schema" and any(word in text for word in ('"$defs"', '"$ref"', '"anyOf"')):
            message = "The provided JSON schema contains features not supported by xgrammar."
            return 400, {
                "object": "error",
                "message": message,
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        return None
    if style == "llama_cpp":
        # llama-server wraps every error of its schema-to-grammar conversion so (status 400)
        if kind == "json_schema" and '"pattern": "\\\\S"' in json.dumps((spec or {}).get("schema")):
            message = "JSON schema conversion failed:\nPattern must start with '^' and end with '$'"
            return 400, {
                "error": {"code": 400, "message": message, "type": "invalid_request_error"}
            }
        return None
    raise ValueError(f"unknown structured style {style!r}")


def _validation_error(reply: Reply, body: Any) -> dict[str, Any]:
    """A FastAPI validation error for a model-level validator: pydantic echoes the whole request
    it validated as ``input`` (the response format and its schema too)."""
    detail = {
        "type": "value_error",
        "loc": ["body"],
        "msg": f"Value error, {reply.error}",
        "input": body,
        "ctx": {"error": {}},
    }
    if reply.echo_request == "message":
        message = repr([detail])
        return {"object": "error", "message": message, "type": "BadRequestError", "code": 400}
    return {"detail": [detail]}


def _invalid_request(message: str, param: str | None) -> dict[str, Any]:
    return {
        "error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}
    }


# What OpenAI's strict mode documents ("Supported schemas"), for ``_strict_problem``.
_STRICT_KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "anyOf", "$ref",
        "$defs", "definitions", "enum", "const", "title", "description", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems",
        "maxItems",
    }
)  # fmt: skip
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)


def _strict_problem(schema: Any, context: tuple[str, ...]) -> str | None:
    """What OpenAI's strict mode says of ``schema``, or None if it holds: its rules for objects,
    the keywords and string formats it documents, a root object that is not ``anyOf``, and its
    limits (10 levels of nested objects, 5,000 properties, 1,000 enum values)."""
    if not isinstance(schema, dict):
        return None
    if not context:
        if schema.get("type") != "object":
            return (
                "schema must be a JSON Schema of 'type: \"object\"', got "
                f"'type: \"{schema.get('type')}\"'."
            )
        if "anyOf" in schema:
            return "schema must not be 'anyOf' at the root."
        problem = _strict_limits(schema)
        if problem is not None:
            return problem
    where = f"In context={context!r}, "
    properties = schema.get("properties")
    if schema.get("type") == "object" or isinstance(properties, dict):
        if schema.get("additionalProperties") is not False:
            return where + "'additionalProperties' is required to be supplied and to be false."
        required = schema.get("required") or []
        missing = [key for key in properties or {} if key not in required]
        if missing:
            return (
                where + "'required' is required to be supplied and to be an array including "
                f"every key in properties. Missing '{missing[0]}'."
            )
    if "$ref" in schema and len(schema) > 1:
        return (
            where
            + "'$ref' cannot have keywords {"
            + ", ".join(sorted(set(schema) - {"$ref"}))
            + "}."
        )
    unknown = sorted(set(schema) - _STRICT_KEYWORDS)
    if unknown:
        return where + f"'{unknown[0]}' is not permitted."
    if "format" in schema and schema["format"] not in _STRICT_FORMATS:
        return where + f"'format' {schema['format']!r} is not supported."
    if not {"type", "anyOf", "$ref", "enum", "const"} & schema.keys():
        return where + "schema must have a 'type' key."
    nested: list[tuple[tuple[str, ...], Any]] = []
    for key in ("properties", "$defs", "definitions"):
        for name, sub in (schema.get(key) or {}).items():
            nested.append(((*context, key, name), sub))
    if isinstance(schema.get("items"), dict):
        nested.append(((*context, "items"), schema["items"]))
    for position, sub in enumerate(schema.get("anyOf") or ()):
        nested.append(((*context, "anyOf", str(position)), sub))
    for inner, sub in nested:
        problem = _strict_problem(sub, inner)
        if problem is not None:
            return problem
    return None


def _strict_limits(root: dict[str, Any]) -> str | None:
    """OpenAI's size limits for a strict schema: objects nested at most 10 deep (counted through
    ``$ref``s, a recursion once), at most 5,000 properties and 1,000 enum values in all, at most
    15,000 characters in an enum of over 250 values, at most 120,000 characters of property and
    definition names, enum and const values in all."""
    properties = enum_values = names = 0
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            if isinstance(node.get("properties"), dict):
                properties += len(node["properties"])
            for key in ("properties", "$defs", "definitions"):
                names += sum(len(name) for name in node.get(key) or {})
            if isinstance(node.get("const"), str):
                names += len(node["const"])
            values = node.get("enum")
            if isinstance(values, list):
                enum_values += len(values)
                chars = sum(len(value) for value in values if isinstance(value, str))
                names += chars
                if len(values) > 250 and chars > 15000:
                    return (
                        f"an enum of {len(values)} values has {chars} characters, more than the "
                        "15000 permitted for an enum of over 250 values."
                    )
            stack.extend(node.values())
    if properties > 5000:
        return f"schema has {properties} object properties, more than the 5000 permitted."
    if enum_values > 1000:
        return f"schema has {enum_values} enum values, more than the 1000 permitted."
    if names > 120000:
        return f"schema's names and values have {names} characters, more than the 120000 permitted."

    def depth(node: Any, seen: frozenset[str]) -> int:
        if isinstance(node, list):
            return max((depth(item, seen) for item in node), default=0)
        if not isinstance(node, dict):
            return 0
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/") and ref not in seen:
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, dict) else None
            return depth(target, seen | {ref})
        own = 1 if isinstance(node.get("properties"), dict) else 0
        inner = [*(node.get("properties") or {}).values(), node.get("items"), node.get("anyOf")]
        return own + depth(inner, seen)

    levels = depth(root, frozenset())
    if levels > 10:
        return f"schema nests objects {levels} levels deep, more than the 10 permitted."
    return None


_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]+")


def _invalid_tool_name(body: Any, *, responses: bool) -> dict[str, Any] | None:
    """OpenAI's error for a function name it does not take (``^[a-zA-Z0-9_-]+$``, at most 64
    characters), or None when every tool's name is fine."""
    tools = body.get("tools") if isinstance(body, dict) else None
    for position, tool in enumerate(tools if isinstance(tools, list) else ()):
        name = tool.get("name") if responses else (tool.get("function") or {}).get("name")
        where = f"tools[{position}].name" if responses else f"tools[{position}].function.name"
        if not isinstance(name, str):
            continue
        if len(name) > 64:
            problem = (
                "string too long. Expected a string with maximum length 64, but got a string "
                f"with length {len(name)} instead."
            )
        elif not _TOOL_NAME.fullmatch(name):
            problem = (
                "string does not match pattern. Expected a string that matches the pattern "
                "'^[a-zA-Z0-9_-]+$'."
            )
        else:
            continue
        return {
            "message": f"Invalid '{where}': {problem}",
            "type": "invalid_request_error",
            "param": where,
            "code": "invalid_value",
        }
    return None


def _unanswered_tool_calls(body: Any) -> dict[str, Any] | None:
    """OpenAI Chat's error for an assistant message with ``tool_calls`` not followed by a tool
    message for each call id (a conversation carried on from a run cut off mid-round)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    messages = messages if isinstance(messages, list) else []
    for position, message in enumerate(messages):
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if message.get("role") != "assistant" or not isinstance(calls, list) or not calls:
            continue
        answered = set()
        for following in messages[position + 1 :]:
            if not isinstance(following, dict) or following.get("role") != "tool":
                break
            answered.add(following.get("tool_call_id"))
        missing = [
            c.get("id") for c in calls if isinstance(c, dict) and c.get("id") not in answered
        ]
        if missing:
            return {
                "message": (
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                    f"response messages: {', '.join(map(str, missing))}"
                ),
                "type": "invalid_request_error",
                "param": f"messages.[{position}].role",
                "code": None,
            }
    return None


def _tool_field_without_tools(body: Any) -> dict[str, Any] | None:
    """OpenAI Chat's error for ``tool_choice`` or ``parallel_tool_calls`` in a request without
    tools (vLLM refuses a ``tool_choice`` without tools as well), or None."""
    if not isinstance(body, dict) or body.get("tools"):
        return None
    for name in ("tool_choice", "parallel_tool_calls"):
        if name in body:
            return {
                "message": f"Invalid value for '{name}': '{name}' is only allowed when 'tools' "
                "are specified.",
                "type": "invalid_request_error",
                "param": name,
                "code": None,
            }
    return None


def _tool_choice_without_tools(body: Any) -> dict[str, Any] | None:
    """The Responses API's error (OpenAI's, vLLM's, Azure's) for a ``tool_choice`` a request
    without tools cannot meet, ``"required"`` or a function by name, or None."""
    if not isinstance(body, dict) or body.get("tools"):
        return None
    choice = body.get("tool_choice")
    if choice == "required":
        message = "Tool choice 'required' must be specified with 'tools' parameter."
    elif isinstance(choice, dict) and isinstance(choice.get("name"), str):
        message = f"Tool choice '{choice['name']}' not found in 'tools' parameter."
    else:
        return None
    return {
        "message": message,
        "type": "invalid_request_error",
        "param": "tool_choice",
        "code": None,
    }


def _refusal(field: str, style: str) -> dict[str, Any]:
    if style == "azure":
        message = f"Unrecognized request argument supplied: {field}"
        return {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    message = f"Unsupported parameter: '{field}' is not supported with this model."
    if field == "max_tokens":
        message += " Use 'max_completion_tokens' instead."
    return {
        "message": message,
        "type": "invalid_request_error",
        "param": field,
        "code": "unsupported_parameter",
    }


# -- Chat Completions rendering ----------------------------------------------------------------------


def _pieces(text: str, size: int) -> list[str]:
    size = max(size, 1)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _text_parts(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": text}] if text else []


def _thinking_parts(text: str) -> list[dict[str, Any]]:
    return [{"type": "thinking", "thinking": _text_parts(text)}] if text else []


def _call_id(call: Call, index: int) -> str:
    return call.id or f"call_{index}"


def _wire_arguments(reply: Reply, call: Call) -> Any:
    return json.loads(call.arguments) if reply.arguments_as_object else call.arguments


def _chat_usage(reply: Reply) -> dict[str, Any]:
    prompt, completion = reply.usage
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if reply.cache_fields == "deepseek":  # DeepSeek counts cache hits and misses, no details
        usage["prompt_cache_hit_tokens"] = reply.cached_tokens
        usage["prompt_cache_miss_tokens"] = prompt - reply.cached_tokens
    else:
        usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
    usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
    return usage


def _chat_completion(reply: Reply, model: str, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text if reply.text or not (reply.tool_calls or reply.refusal) else None,
        "refusal": reply.refusal or None,
    }
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                **({"id": _call_id(call, i)} if reply.call_ids else {}),
                "type": "function",
                "function": {"name": call.name, "arguments": _wire_arguments(reply, call)},
                **_signed(reply, i),
            }
            for i, call in enumerate(reply.tool_calls)
        ]
    if reply.content_parts:
        message["content"] = [*_thinking_parts(reply.reasoning), *_text_parts(reply.text)]
    elif reply.reasoning_details:
        message["reasoning"] = reply.reasoning
        message["reasoning_details"] = reasoning_details_of(reply)
    elif reply.reasoning:
        message["reasoning_content"] = reply.reasoning
    choice = {"index": 0, "message": message, "finish_reason": reply.finish, "logprobs": None}
    if reply.finish == "error":
        choice["error"] = _choice_error(reply)
    return {
        "id": reply.response_id or f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": _chat_usage(reply),
        **_served_by(reply),
    }


def _signed(reply: Reply, position: int) -> dict[str, Any]:
    """Gemini's thought signature on a reply's first tool call (``Reply.signature``; on each
    with ``Reply.sign_each``), or {}."""
    if reply.signature is None or (position and not reply.sign_each):
        return {}
    signature = f"{reply.signature}-{position}" if position else reply.signature
    return {"extra_content": {"google": {"thought_signature": signature}}}


def _served_by(reply: Reply, fingerprint: bool = True) -> dict[str, str]:
    """The response's ``service_tier`` and (Chat Completions) ``system_fingerprint``, if set."""
    fields: dict[str, str] = {}
    if reply.service_tier is not None:
        fields["service_tier"] = reply.service_tier
    if fingerprint and reply.system_fingerprint is not None:
        fields["system_fingerprint"] = reply.system_fingerprint
    return fields


def _choice_error(reply: Reply) -> dict[str, Any]:
    """The error OpenRouter puts on a choice whose finish reason is ``error`` (the provider
    failed while the model was answering): its code is the status, a number."""
    code: int | str = 502 if reply.error_code is None else reply.error_code
    return {"code": code, "message": reply.error}


def _chat_events(reply: Reply, model: str, n: int, include_usage: object) -> list[str]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        if finish == "error":
            choice["error"] = _choice_error(reply)
        return {
            "id": reply.response_id or f"chatcmpl-{n}",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
            **_served_by(reply),
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    if reply.content_parts:
        chunks += [chunk({"content": _thinking_parts(p)}) for p in _pieces(reply.reasoning, 8)]
        chunks += [chunk({"content": _text_parts(p)}) for p in _pieces(reply.text, 8)]
    elif reply.reasoning_details:
        details = _streamed_reasoning_details(reply)
        chunks += [
            chunk({"reasoning": "".join(e.get("text", "") for e in d), "reasoning_details": d})
            for d in details
        ]
        chunks += [chunk({"content": p}) for p in _pieces(reply.text, 8)]
    else:
        chunks += [chunk({"reasoning_content": p}) for p in _pieces(reply.reasoning, 8)]
        chunks += [chunk({"content": p}) for p in _pieces(reply.text, 8)]
    chunks += [chunk({"refusal": p}) for p in _pieces(reply.refusal, 8)]
    for i, call in enumerate(reply.tool_calls):
        index = {"each": {"index": i}, "shared": {"index": 0}, "none": {}}[reply.call_index]
        head = {**index, "type": "function"}
        if reply.call_ids:
            head["id"] = _call_id(call, i)
        first = {**head, **_signed(reply, i)}  # the call's first fragment
        if reply.arguments_as_object:
            function = {"name": call.name, "arguments": _wire_arguments(reply, call)}
            chunks.append(chunk({"tool_calls": [{**first, "function": function}]}))
            continue
        chunks.append(
            chunk({"tool_calls": [{**first, "function": {"name": call.name, "arguments": ""}}]})
        )
        sent = ""
        for part in _pieces(call.arguments, reply.fragment):
            sent += part
            if reply.arguments_resent == "cumulative":
                part = sent
            if reply.repeat_name:
                fragment = {**head, "function": {"name": call.name, "arguments": part}}
            else:
                fragment = {**index, "function": {"arguments": part}}
            chunks.append(chunk({"tool_calls": [fragment]}))
        if reply.arguments_resent == "after":
            again = {**index, "function": {"arguments": call.arguments}}
            chunks.append(chunk({"tool_calls": [again]}))
        elif reply.arguments_resent == "whole":
            arguments = json.dumps(json.loads(call.arguments), separators=(",", ":"))
            again = {**head, "function": {"name": call.name, "arguments": arguments}}
            chunks.append(chunk({"tool_calls": [again]}))
    chunks.append(chunk({}, reply.finish))
    if include_usage:
        final = chunk({})
        final["choices"] = []
        final["usage"] = _chat_usage(reply)
        chunks.append(final)
    events = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    events.append("data: [DONE]\n\n")
    return events


# -- Responses rendering -----------------------------------------------------------------------------


def _output_items(reply: Reply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if reply.reasoning:
        items.append(
            {
                "type": "reasoning",
                "id": "rs_0",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": reply.reasoning}],
            }
        )
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "output_text", "text": reply.text, "annotations": []})
    if reply.refusal:
        content.append({"type": "refusal", "refusal": reply.refusal})
    if content:
        items.append(
            {
                "type": "message",
                "id": "msg_0",
                "role": "assistant",
                "status": "completed",
                "content": content,
            }
        )
    for i, call in enumerate(reply.tool_calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{i}",
                "call_id": _call_id(call, i),
                "name": call.name,
                "arguments": _wire_arguments(reply, call),
                "status": "completed",
            }
        )
    return items


def _response_object(reply: Reply, model: str, n: int, status: str) -> dict[str, Any]:
    prompt, completion = reply.usage
    incomplete = reply.finish == "length"
    if status == "completed" and incomplete:
        status = "incomplete"
    done = status != "in_progress"
    return {
        "id": reply.response_id or f"resp_{n}",
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": status,
        **_served_by(reply, fingerprint=False),
        "output": _output_items(reply) if done else [],
        "usage": {
            "input_tokens": prompt,
            "output_tokens": completion,
            "total_tokens": prompt + completion,
            "input_tokens_details": {"cached_tokens": reply.cached_tokens},
            "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
        }
        if done
        else None,
        "incomplete_details": {"reason": "max_output_tokens"} if done and incomplete else None,
        "error": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "tool_choice": "auto",
        "tools": [],
    }


def _responses_events(reply: Reply, model: str, n: int) -> list[str]:
    events: list[dict[str, Any]] = []
    events.append(
        {"type": "response.created", "response": _response_object(reply, model, n, "in_progress")}
    )
    for index, item in enumerate(_output_items(reply)):
        kind = item["type"]
        if kind == "reasoning":
            started = {**item, "content": []}
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": started}
            )
            events += _text_events(
                reply, "response.reasoning_text", item["id"], index, reply.reasoning
            )
        elif kind == "message":
            started = {**item, "status": "in_progress", "content": []}
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": started}
            )
            events += _text_events(reply, "response.output_text", item["id"], index, reply.text)
            events += _refusal_events(reply, item["id"], index, content_index=int(bool(reply.text)))
        else:
            # call_index "none": the call's events carry only its item id, no output_index;
            # "shared": every call's output_index is 0
            at = {"each": {"output_index": index}, "shared": {"output_index": 0}, "none": {}}[
                reply.call_index
            ]
            started = {**item, "arguments": "", "status": "in_progress"}
            if reply.call_added:
                events.append({"type": "response.output_item.added", **at, "item": started})
            if not isinstance(item["arguments"], str):  # an object: only in the finished item
                events.append({"type": "response.output_item.done", **at, "item": item})
                continue
            events += [
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": item["id"],
                    **at,
                    "delta": piece,
                }
                for piece in _pieces(item["arguments"], reply.fragment)
                if not reply.arguments_done_only
            ]
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item["id"],
                    **at,
                    "arguments": item["arguments"],
                }
            )
            finished = {**item, "arguments": ""} if reply.arguments_done_only else item
            events.append({"type": "response.output_item.done", **at, "item": finished})
            continue
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    final = _response_object(reply, model, n, "completed")
    kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
    events.append({"type": kind, "response": final})
    out = []
    for seq, event in enumerate(events):
        event["sequence_number"] = seq
        out.append(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n")
    return out


def _text_events(
    reply: Reply, kind: str, item_id: str, output_index: int, text: str
) -> list[dict[str, Any]]:
    """The events carrying one text part (``kind``: output or reasoning text), as
    ``reply.text_events`` says."""
    if not text or reply.text_events == "final":
        return []
    where = {"item_id": item_id, "output_index": output_index, "content_index": 0}
    if reply.text_events == "done":
        return [{"type": f"{kind}.done", **where, "text": text, "logprobs": []}]
    return [
        {"type": f"{kind}.delta", **where, "delta": piece, "logprobs": []}
        for piece in _pieces(text, 8)
    ]


def _refusal_events(
    reply: Reply, item_id: str, output_index: int, content_index: int
) -> list[dict[str, Any]]:
    if not reply.refusal or not reply.refusal_events:
        return []
    where = {"item_id": item_id, "output_index": output_index, "content_index": content_index}
    pieces = _pieces(reply.refusal, 8) if reply.refusal_deltas else []
    events = [{"type": "response.refusal.delta", **where, "delta": piece} for piece in pieces]
    events.append({"type": "response.refusal.done", **where, "refusal": reply.refusal})
    return events


def _error_events(reply: Reply, responses: bool, model: str) -> list[str]:
    """How servers report a failure after a stream started: vLLM-style ``data: {"error": ...}`` for
    Chat Completions, a ``response.failed`` event for Responses."""
    code = reply.error_code
    if not responses:
        # vLLM's code is the status as a number; LiteLLM's proxy sends the upstream's as text
        wire: int | str = 500 if code is None else code
        error: dict[str, Any] = {"message": reply.error, "type": "server_error", "code": wire}
        if reply.error_metadata is not None:
            error["metadata"] = reply.error_metadata
        return [f"data: {json.dumps({'error': error})}\n\n", "data: [DONE]\n\n"]
    failed = _response_object(reply, model, 0, "failed")
    failed["error"] = {"code": code or "server_error", "message": reply.error}
    event = {"type": "response.failed", "response": failed, "sequence_number": 999}
    return [f"event: response.failed\ndata: {json.dumps(event)}\n\n"]


# -- standalone ------------------------------------------------------------------------------------


async def _serve_forever() -> None:
    server = await OpenAIServer(default=Reply(text="ok"), record=False).start()
    print(f"PORT {server.port}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.close()


if __name__ == "__main__":
    try:
        asyncio.run(_serve_forever())
    except KeyboardInterrupt:
        sys.exit(0)
