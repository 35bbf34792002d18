"""The life of an MCP client session: one owner task per connection, lazy connect, reconnect.

The ``mcp`` client is built from anyio task groups and cancel scopes, which must be entered and
exited in the same task. A session used by an agent is opened by whichever task first needs it and
used by many others (parallel tool calls, several runs), and closed by yet another (the runner's
``aclose``). So no caller ever enters the client's contexts: each connection gets a dedicated owner
task that enters them, publishes the connected ``mcp.Client``, waits for a stop signal and exits
them itself. Callers only make requests on the published client, which is safe from any task.

The owner task also isolates callers from transport failures: when a transport's task group
crashes (an HTTP server dying mid-request), the cancellation lands in the owner task, and callers
see a clean "connection closed" error instead of being cancelled themselves.

A dropped connection is noticed three ways: the transport's read stream ends (stdio server exited),
the owner task ends (transport crashed), or a request fails with ``CONNECTION_CLOSED``. The next
user of the session then reconnects — one attempt per use (shared by every caller that needs the
session while it is under way), so a server that stays down gives a clear error each time instead
of a retry loop, and one that comes back is picked up again.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import json
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, suppress
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
from mcp.client import Client
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp.types import (
    METHOD_NOT_FOUND,
    Implementation,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    PromptListChangedNotification,
    Tool,
    ToolListChangedNotification,
)
from opentelemetry import context as otel_context  # loaded by the mcp package already

from .._aio import AsyncCloseable, being_cancelled, finish
from .._warned import Warned
from ._hooks import NO_HOOKS, _ClientHooks, _current_call, _loggable, log_forwarder
from ._servers import HTTPServer, ServerConfig, _current_delivery, _Delivery

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams
    from mcp.client.session import IncomingMessage

__all__ = ["Connection", "ListingWarnings", "MCPConnectionError", "Session", "describe_error"]

logger = logging.getLogger("adk.mcp")

_CLIENT_INFO = Implementation(name="pyadk", version="0.1.0")
# What each ``MCPConnectionError.stage`` of a connect says in its message.
_STAGES = {
    "connect": "it could not be started or reached",
    "handshake": "the MCP handshake failed",
}
# Backoff for re-opening a dropped change stream on a connection that is otherwise alive.
_RELISTEN_DELAY = 0.5
_RELISTEN_MAX_DELAY = 30.0


_Stage = Literal["connect", "handshake", "list", "request"]
"""What failed, for ``MCPConnectionError.stage``."""


class MCPConnectionError(ConnectionError):
    """An MCP server could not be used: it could not be started or reached (``stage``
    ``"connect"``; an ``HTTPServer`` whose connection did not open within ``connect_timeout``
    too, an ``SSEServer``'s is not told apart), it was reached but its MCP handshake failed or did not answer within
    ``connect_timeout`` (``"handshake"``), the connection was lost twice while its tools or
    prompts were listed or the listing got no answer within ``call_timeout`` (``"list"``, the
    ``TimeoutError`` its ``__cause__``), or it was lost twice while another request of the
    toolset's own was made
    (``"request"``: a prompt rendered, a resource read). ``server`` is the server's description
    as given (``StdioServer``, ``HTTPServer``, ``SSEServer``: its ``repr`` shows a stdio
    server's arguments, never headers), the message names it as error texts do (credentials
    masked) and says why. A ``ConnectionError``, as before it had a class of its own (an
    extension to DESIGN.md); in a run it fails the agent that asked for the tools, and
    ``RunError``'s ``__cause__`` is this error (``error.type`` ``"MCPConnectionError"``). Nothing
    of the attempt is left running: a stdio server started is stopped."""

    def __init__(self, message: str, *, server: ServerConfig, stage: _Stage) -> None:
        super().__init__(message)
        self.server = server
        self.stage = stage

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickled with its fields (``cls(*args)`` would lack them): see ``adk._error_pickle``.
        from .._error_pickle import reduce_error

        return reduce_error(self)


def _unreached(exc: BaseException) -> bool:
    """Whether ``exc``, a failed connect, says the server could not be started or reached at
    all (a command not found, a port nothing listens on), not that it answered badly."""
    import httpx2

    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout):
        return True
    return isinstance(exc, OSError) and not isinstance(exc, MCPConnectionError | TimeoutError)


def describe_error(exc: BaseException, server: ServerConfig | None = None) -> str:
    """A one-line reason for a failure, digging the first real error out of exception groups
    (anyio task groups wrap transport failures in them). With ``server``, credentials in its URL
    are masked, since transport errors may quote it and the text may reach the model. An error's
    words may be the server's (a JSON-RPC error's message): line breaks, control characters and
    bidi overrides in them are escaped as a server's log message is (``_loggable``), since the
    reason goes into warnings (an optional toolset's server left out), debug lines and errors an
    application logs: one line, as said, which a server cannot make forge another."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        text = exc.error.message
    else:
        text = str(exc)
        text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return _loggable(server._redact(text) if server is not None else text)


def _unreadable_answer(exc: Exception) -> Any:
    """An error answer to the request whose answer the transport could not read (``exc``, its
    failure to parse a message: a result that is not an object, JSON nested deeper than the
    client's parser reads), when the message says which request it answers; else None.

    The client drops a message it cannot read and reports it on the side, so the request it
    answered waited out its whole timeout and failed as the server not answering ("did not answer
    within 60s", "timed out"), when the server had answered, wrongly. With this answer the request
    fails at once, saying the answer could not be read and why."""
    read = _read_unreadable(exc)
    if read is None:
        return None
    message, errors = read
    if "method" in message:  # a request or notification
        return None
    request_id = message.get("id")
    if type(request_id) not in (int, str):
        return None
    from mcp.shared.message import SessionMessage
    from mcp.types import INTERNAL_ERROR, ErrorData, JSONRPCError

    # Why, as the error about the answer says it (a response's result), else the first.
    about = [e for e in errors if e.get("loc", ())[:1] == ("JSONRPCResponse",)] or errors
    answer = ErrorData(
        code=INTERNAL_ERROR,
        message=f"the server's answer could not be read by the MCP client ({_why(about)})",
    )
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=answer))


def _unreadable_request(exc: Exception) -> Any:
    """The Invalid Request error answering a server's request that the transport could not read
    (``exc``: params that are not an object, a sampling request whose tool schema is nested
    deeper than the client's parser reads), when its id is readable; else None.

    The client drops a message it cannot read, so the request went unanswered: the server
    waited for the answer while the call that made it ask waited on the server, until the call's
    ``call_timeout``. JSON-RPC answers a request it cannot read with this error, saying why."""
    read = _read_unreadable(exc)
    if read is None:
        return None
    message, errors = read
    request_id = message.get("id")
    if "method" not in message or type(request_id) not in (int, str):
        return None
    from mcp.shared.message import SessionMessage
    from mcp.types import INVALID_REQUEST, ErrorData, JSONRPCError

    # Why, as the error about the request says it (its params), else the first.
    about = [e for e in errors if e.get("loc", ())[:1] == ("JSONRPCRequest",)] or errors
    answer = ErrorData(
        code=INVALID_REQUEST,
        message=f"the client could not read this request ({_why(about)})",
    )
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=answer))


def _why(errors: list[Any]) -> str:
    """The first of a parser's ``errors`` on one line: where, and what is wrong, cut short."""
    where = ".".join(str(part) for part in errors[0].get("loc", ())[1:])
    why = f"{where}: {errors[0].get('msg')}" if where else str(errors[0].get("msg"))
    return why[:300]


def _read_unreadable(exc: Exception) -> tuple[dict[str, Any], list[Any]] | None:
    """The JSON-RPC-looking object the transport could not parse as a message (``exc``, its
    failure to parse it), and the parser's errors; None when it is not to be found."""
    from pydantic import ValidationError  # loaded by the mcp package already

    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors(include_url=False)
    message: object = None
    for error in errors:
        given = error.get("input")
        # The message itself is the input of a field it lacks (an answer lacks a request's
        # "method"); any other dict is a field's value, whose "id" names some other request (a
        # message with an object as its id, method or version holding a waiting call's id).
        loc = error.get("loc", ())
        if error.get("type") == "missing" and len(loc) == 2 and isinstance(given, dict):
            message = given
            break
        if not loc and isinstance(given, str | bytes):
            # The whole message, not JSON the client's parser reads: read it here (a field's
            # text, a request's params as a string, is no message).
            import json

            try:
                message = json.loads(given)
            except (RecursionError, ValueError):
                # Nested past Python's parser too (a result 100,000 levels deep), or no JSON
                # (an answer cut off mid-line): the answer's own id, at its start or end, is read
                # as the stdio reader reads it; a line that shows none (garbage) answers nothing.
                message = _answered_id(given)
            break
    if not isinstance(message, dict) or not errors:
        return None
    return message, errors


def _answered_id(text: str | bytes) -> dict[str, Any] | None:
    """``{"id": ...}`` of the answer ``text``, a message too deeply nested to parse, when its
    start or end shows its own ``id`` (``_stdio._request_id``); else None."""
    from ._stdio import _EDGE, _request_id

    if isinstance(text, str):  # the edges only are encoded, not a message of megabytes
        found = _request_id(
            text[:_EDGE].encode(errors="replace"), text[-_EDGE:].encode(errors="replace")
        )
    else:
        found = _request_id(text[:_EDGE], text[-_EDGE:])
    return None if found is None else {"id": found}


def _batch(exc: Exception) -> list[Any] | None:
    """The messages of a JSON-RPC batch (a list of messages) that the transport could not parse
    as one message (``exc``), each as if it came alone (an unreadable one as
    ``_unreadable_answer`` has it); None when ``exc`` is about no batch.

    MCP up to 2025-03-26 lets a server send batches (2025-03-26: a client MUST accept them) and
    the client negotiates those versions, but reads one message at a time: a batch was dropped
    as unreadable, and a call answered in one waited out its whole timeout."""
    from pydantic import ValidationError  # loaded by the mcp package already

    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors(include_url=False)
    given = errors[0].get("input") if errors else None
    if not isinstance(given, list) or not given or any(len(e.get("loc", ())) != 1 for e in errors):
        return None
    from mcp.shared.message import SessionMessage
    from mcp.types import jsonrpc_message_adapter

    messages: list[Any] = []
    for item in given:
        try:
            message = jsonrpc_message_adapter.validate_python(item, by_name=False)
        except ValidationError as error:
            messages.append(_unreadable_answer(error) or error)
        else:
            messages.append(SessionMessage(message))
    return messages


def _answers_nothing(message: JSONRPCError, server: ServerConfig) -> None:
    """Log a server's error whose id is null: JSON-RPC's answer to a message the server could
    not read (a parse error, an invalid request), naming no request. The client drops it,
    rightly (a call cannot be told from another, nor from a notification), but without a word:
    the call it was meant for failed only at its ``call_timeout``, as 'timed out', and the
    server's words were nowhere."""
    error = message.error
    logger.warning(
        "MCP server '%s' sent an error answering no request (its id is null: the server could "
        "not read the message it answers), which no call can be failed with: %s (code %s)",
        server,
        _loggable(server._redact(str(error.message))[:500]),  # it cannot forge a log line
        error.code,
    )


class ListingWarnings:
    """The listings of one server that a warning was logged for (a tool left out, a name listed
    twice), so that each distinct listing warns once, and a listing that changed warns again.

    A listing is read again on every connection (a runner closed and made again per request, an
    event loop per request, a reconnect), and on every use of a connection whose changes cannot
    be watched (a 2026-07-28 server without the change stream); the same bad tool was warned
    about each time, the same lines filling a service's log with nothing new. Shared by a
    toolset's sessions (one per event loop, in several threads too); the last ``_KEPT``
    listings are remembered. A listing is told by a digest of it (its entries' JSON, keys
    sorted, in sorted order, so one read in another order is the same), made only when it has
    something to warn about."""

    _KEPT = 64
    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen = Warned(self._KEPT)

    def first(self, what: str, listing: Any) -> bool:
        """Whether ``listing`` (JSON data) is warned about for ``what`` the first time; it is
        remembered from now on. One that cannot be told (not JSON) is always the first."""
        try:
            if isinstance(listing, list):
                # Its tools in any order: a server may list them in none fixed (a Go map, a
                # set), and every reading warned again.
                entries = sorted(json.dumps(item, sort_keys=True, default=repr) for item in listing)
                text = json.dumps(entries)
            else:
                text = json.dumps(listing, sort_keys=True, default=repr)
        except (TypeError, ValueError, RecursionError):
            return True
        return self._seen.first(f"{what}:{hashlib.sha256(text.encode()).hexdigest()}")


class _WatchedReadStream(AsyncCloseable):
    """Passes the transport's incoming messages through and reports when they end.

    The end of this stream is the earliest sign that a stdio server has exited; noticing it lets
    the next call reconnect *before* sending, instead of losing a request to a dead pipe. A
    JSON-RPC batch is passed on one message at a time (``_batch``).
    """

    def __init__(
        self,
        inner: Any,
        on_end: Callable[[], None],
        server: ServerConfig,
        write: Any = None,
        listings: set[Any] | None = None,
        warned: ListingWarnings | None = None,
    ) -> None:
        self._inner = inner
        self._warned = warned
        self._write = write  # where a request the client cannot read is refused
        self._on_end = on_end
        self._server = server
        self._batched: list[Any] = []  # the rest of a batch, in reverse order
        # The ids of the client's tools/list requests not answered yet (``_WatchedWriteStream``).
        self._listings: set[Any] = set() if listings is None else listings

    @property
    def last_context(self) -> Any:
        # The mcp dispatcher reads the sender's contextvars from here (HTTP transports set it).
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        if self._batched:
            message = self._batched.pop()
        else:
            try:
                message = await self._inner.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                self._on_end()
                raise
            if isinstance(message, Exception):
                batch = _batch(message)
                if batch is None:
                    message = _unreadable_answer(message) or message
                else:
                    batch.reverse()
                    message = batch.pop()
                    self._batched = batch
        if isinstance(message, Exception):  # alone or in a batch
            refusal = _unreadable_request(message)
            if refusal is not None:
                await self._refuse(refusal)
            return message
        inner = getattr(message, "message", None)
        if type(inner) is JSONRPCError and inner.id is None:
            _answers_nothing(inner, self._server)
        elif self._listings and type(inner) is JSONRPCResponse:
            # An id echoed as a string ("3" for 3) is the request's, as the client reads it.
            listing = coerce_request_id(inner.id)
            if listing in self._listings:
                self._listings.discard(listing)
                result = inner.result
                if isinstance(result, dict) and isinstance(result.get("tools"), list):
                    kept = _kept_tools(result["tools"], self._server, self._warned)
                    inner.result = {**result, "tools": kept}
        elif self._listings and type(inner) is JSONRPCError and inner.id is not None:
            self._listings.discard(coerce_request_id(inner.id))
        return message

    async def _refuse(self, refusal: Any) -> None:
        """Sends the server ``refusal``, the error answering a request of its the client could
        not read (``_unreadable_request``); a transport already closed takes nothing."""
        if self._write is None:
            return
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await self._write.send(refusal)

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WatchedWriteStream:
    """Passes the client's messages to the transport, noting the ids of its ``tools/list``
    requests, whose answers ``_WatchedReadStream`` reads before the client does
    (``_kept_tools``). Anything else is the transport's stream's own."""

    def __init__(self, inner: Any, listings: set[Any]) -> None:
        self._inner = inner
        self._listings = listings

    async def send(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if type(message) is JSONRPCRequest and message.method == "tools/list":
            self._listings.add(coerce_request_id(message.id))
        elif (
            self._listings
            and type(message) is JSONRPCNotification
            and message.method == "notifications/cancelled"
        ):
            # The client gave up a request (cancelled, or timed out: the dispatcher says so to
            # the server either way): a listing's answer will not be read, and its id, kept, was
            # kept for the connection's life.
            cancelled = cancelled_request_id_from_params(message.params)
            if cancelled is not None:
                self._listings.discard(coerce_request_id(cancelled))
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedWriteStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc_info)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _kept_tools(
    tools: list[Any], server: ServerConfig, warned: ListingWarnings | None = None
) -> list[Any]:
    """The entries of a ``tools/list`` answer that are tools a model can be offered; each other
    is left out with an ``adk.mcp`` warning naming it and why. The client parses the whole answer
    at once, so one entry it cannot read (an input schema that is not an object, a tool without
    a name) failed the listing, and no tool of the server could be used; an input schema that
    parses but is no object schema (``{"type": "string"}``, ``properties`` that are not an
    object) was offered, and a model API refuses every request offering it (HTTP 400). With
    ``warned``, the warnings are logged once for each distinct answer (``ListingWarnings``)."""
    from pydantic import ValidationError  # loaded by the mcp package already

    kept: list[Any] = []
    left_out: list[tuple[str, str]] = []  # each tool left out, as shown, and why
    for position, entry in enumerate(tools):
        named = entry.get("name") if isinstance(entry, dict) else None
        shown = repr(named) if isinstance(named, str) else f"at position {position + 1}"
        if not isinstance(entry, dict):
            why = f"it is not an object but a {type(entry).__name__}"
        else:
            try:
                tool = Tool.model_validate(entry, by_name=False)
            except ValidationError as exc:
                error = exc.errors(include_url=False)[0]
                where = ".".join(str(part) for part in error.get("loc", ()))
                why = f"{where}: {error.get('msg')}" if where else str(error.get("msg"))
            else:
                why = _schema_fault(tool.input_schema, "input") or ""
                output = entry.get("outputSchema")
                if not why and output is not None:
                    why = _schema_fault(output, "output") or ""
        if not why:
            kept.append(entry)
        else:
            left_out.append((shown, why))
    if left_out and (warned is None or warned.first("left out", tools)):
        for shown, why in left_out:
            logger.warning(
                "MCP server '%s' lists a tool the client leaves out, its tool %s: %s; its other "
                "tools are offered",
                server,
                server._redact(shown)[:200],
                server._redact(why)[:300],
            )
    return kept


def _schema_fault(schema: Any, which: str) -> str | None:
    """Why a tool's ``which`` (input or output) schema is no object schema a model API takes and
    the negotiated protocol version's model reads (the client checks a listing against it before
    parsing it, so one such schema failed the whole listing), or None: it is no object, its
    ``type`` is missing or another (``string``), a property is no schema, its ``properties`` are
    not an object, its ``required`` not a list of names or its ``$schema`` not a string. Not a
    full JSON Schema check (a reference leading nowhere, a keyword of the wrong type deeper in
    are the server's to fix, and a model API may take them)."""
    if not isinstance(schema, dict):
        return f"its {which} schema is not an object but a {type(schema).__name__}"
    if "type" not in schema:
        return f"its {which} schema has no type (an object schema's is 'object')"
    kind = schema["type"]
    if kind != "object":
        return f"its {which} schema is of type {kind!r}, not an object schema"
    properties = schema.get("properties")
    if properties is not None:
        if not isinstance(properties, dict):
            return f"its {which} schema's properties are not an object"
        for name, value in properties.items():
            if not isinstance(value, dict | bool):
                return f"its {which} schema's property {str(name)[:80]!r} is no schema"
    required = schema.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(name, str) for name in required)
    ):
        return f"its {which} schema's required is not a list of names"
    uri = schema.get("$schema")
    if uri is not None and not isinstance(uri, str):  # null: not given, as every version reads it
        return f"its {which} schema's $schema is not a string"
    return None


class _WatchedTransport(AbstractAsyncContextManager["TransportStreams"]):
    """A server's transport with its read side watched (see ``_WatchedReadStream``)."""

    def __init__(
        self,
        inner: AbstractAsyncContextManager[TransportStreams],
        on_end: Callable[[], None],
        server: ServerConfig,
        on_open: Callable[[], None] | None = None,
        warned: ListingWarnings | None = None,
    ) -> None:
        self._inner = inner
        self._on_end = on_end
        self._server = server
        self._on_open = on_open
        self._warned = warned

    async def __aenter__(self) -> TransportStreams:
        read, write = await self._inner.__aenter__()
        if self._on_open is not None:
            self._on_open()
        listings: set[Any] = set()
        watched = _WatchedReadStream(
            read, self._on_end, self._server, write, listings, self._warned
        )
        return watched, _WatchedWriteStream(write, listings)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)


class Connection:
    """One connected client session and the task that owns it."""

    def __init__(
        self,
        server: ServerConfig,
        on_message: Callable[[Any], None],
        hooks: _ClientHooks = NO_HOOKS,
        warned: ListingWarnings | None = None,
    ) -> None:
        self._server = server
        self._on_message = on_message
        self._hooks = hooks
        self._warned = warned
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[Client] | None = None
        # What the HTTP transport notes about the handshake's requests (made in the owner task):
        # an HTTP error answer's status and words, for the error a failed connect raises.
        # Over HTTP also whether a connection to the server opened (``_Delivery.reached``).
        self._handshake = _Delivery(watch_reach=isinstance(server, HTTPServer))
        self.client: Client | None = None
        # The MCP version the handshake settled on, read once there: tracing reports it on each
        # tool call's span (``mcp.protocol.version``) without touching the client.
        self.protocol_version: str | None = None
        self.lost = False
        # Whether the transport was opened (a stdio server's process started, an HTTP client
        # made): a connect failing after that failed in the handshake, unless the server could
        # not be reached at all (``_unreached``).
        self._transport_opened = False
        # True while the cached tool/prompt lists can be trusted to be announced when they change:
        # always on handshake-era connections (changes arrive as plain notifications), and on
        # 2026-07-28 connections while the subscriptions/listen stream is open.
        self.watching = True

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.lost

    def mark_lost(self) -> None:
        self.lost = True

    def _opened(self) -> None:
        self._transport_opened = True

    async def open(self, wait_limit: float) -> Client:
        """Start the owner task and wait until the session is connected (or failed)."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        # Whoever gives up on `ready` first, its outcome is retrieved here: no "never retrieved".
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._ready = ready
        # The owner task (and every task of the connection: its reader, the handlers of the
        # server's requests that name no call) runs outside any MCP call, also when connected
        # from within one (a handler using another server): the handlers would take that call
        # for the one asking.
        context = contextvars.copy_context()
        context.run(_current_call.set, None)
        # Nor inside any trace: the session outlives the run that opened it and serves every run
        # after it, so the spans of its own work (the mcp package's stream of server
        # notifications, open until the session closes) would sit in that one run's trace, a
        # request's in a service, keeping it open for the life of the process. Its handshake
        # alone is made in the opener's trace (``_Handshake``): bounded, and the opener's wait.
        opener = otel_context.get_current()
        context.run(otel_context.attach, otel_context.Context())
        self._task = asyncio.create_task(
            self._own(ready, opener), name=f"mcp session {self._server}", context=context
        )
        server = self._server
        try:
            async with asyncio.timeout(wait_limit):
                client = await asyncio.shield(ready)
        except TimeoutError:
            await self.close()
            # An HTTP transport opens without connecting: reached once a connection opened.
            reached = self._transport_opened and self._handshake.reached is not False
            stage: _Stage = "handshake" if reached else "connect"
            raise MCPConnectionError(
                f"could not connect to MCP server '{server}' ({_STAGES[stage]}): "
                f"no answer within {wait_limit:g}s (connect_timeout)",
                server=server,
                stage=stage,
            ) from None
        except Exception as exc:
            await self.close()
            stage = "handshake" if self._transport_opened and not _unreached(exc) else "connect"
            reason = describe_error(exc, server)
            reason += server._redact(self._handshake.detail(reason))
            reason += server._connect_hint(reason)
            raise MCPConnectionError(
                f"could not connect to MCP server '{server}' ({_STAGES[stage]}): {reason}",
                server=server,
                stage=stage,
            ) from exc
        except BaseException:
            await self.close()  # cancelled while connecting: leave nothing running behind
            raise
        self.client = client
        version = client.protocol_version
        self.protocol_version = version if isinstance(version, str) and version else None
        return client

    async def close(self) -> None:
        """Ask the owner task to exit the session's contexts, and wait until it has."""
        task = self._task
        if task is None:
            return
        self.lost = True
        self._stop.set()
        if self._ready is None or not self._ready.done():
            task.cancel()  # still handshaking: abort it (it is the owner task that gets cancelled)
        try:
            # To its end even if our caller is cancelled meanwhile, once or at every await (an
            # anyio cancel scope: a shield returned at once there), so no subprocess is left
            # behind when this returns; the cancellation is raised afterwards.
            await finish(task)
        except asyncio.CancelledError:
            if being_cancelled():
                raise  # we are being cancelled ourselves (not a cancelled task's cleanup's run)
            # else: the owner ended by the cancellation we sent it; nothing to report
        except (Exception, BaseExceptionGroup) as exc:  # closing never fails the caller
            reason = describe_error(exc, self._server)
            logger.debug("MCP session with '%s' closed with: %s", self._server, reason)

    async def _own(self, ready: asyncio.Future[Client], opener: otel_context.Context) -> None:
        """The owner task: every async context of the session is entered and exited here;
        ``opener``, the trace context of whoever opened it, only for the handshake."""
        _current_delivery.set(self._handshake)  # this task's context only
        try:
            transport = _WatchedTransport(
                self._server._transport(), self.mark_lost, self._server, self._opened, self._warned
            )
            hooks = self._hooks
            level = hooks.log_level
            client = Client(
                transport,
                mode="auto",
                cache=None,  # the toolset caches lists itself and re-lists on change notices
                message_handler=self._handle,
                client_info=_CLIENT_INFO,
                # None: the mcp client's defaults, which refuse (elicitation, sampling) or drop
                # (logs); given, the client declares the capability to the server.
                elicitation_callback=hooks.elicitation,
                sampling_callback=hooks.sampling,
                sampling_capabilities=hooks.sampling_capability(),
                logging_callback=None if level is None else log_forwarder(self._server, level),
                log_level=level,
            )
            async with _Handshake(client, opener), anyio.create_task_group() as group:
                caps = client.server_capabilities
                tools = bool(caps.tools and caps.tools.list_changed)
                prompts = bool(caps.prompts and caps.prompts.list_changed)
                if tools or prompts:
                    # Subscribed before the session is published, so no change goes unnoticed
                    # between a first listing and the subscription.
                    await group.start(self._watch_changes, client, tools, prompts)
                if not ready.done():
                    ready.set_result(client)
                await self._stop.wait()
                group.cancel_scope.cancel()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not self._stop.is_set():
                reason = describe_error(exc, self._server)
                logger.debug("MCP session with '%s' ended: %s", self._server, reason)
        finally:
            self.lost = True
            if not ready.done():  # cancelled (or worse) while connecting
                ready.set_exception(ConnectionError("the connection was closed while connecting"))

    async def _watch_changes(
        self,
        client: Client,
        tools: bool,
        prompts: bool,
        *,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Keep a subscriptions/listen stream open for list changes (2026-07-28 connections).

        On those connections changes are announced only to such a stream; the events also reach
        the message handler, which is what advances the epochs. When the stream drops while the
        connection lives (a restarted stateless HTTP server), it is opened again, and everything
        counts as changed, since announcements in between were missed. Handshake-era connections
        get plain notifications and need none of this.
        """
        started = False

        def report_started() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        delay = _RELISTEN_DELAY
        while not self.lost:
            try:
                async with client.listen(
                    tools_list_changed=tools, prompts_list_changed=prompts
                ) as subscription:
                    if started:
                        self._on_message(None)  # re-subscribed: changes may have been missed
                    self.watching = True
                    report_started()
                    delay = _RELISTEN_DELAY
                    async for _event in subscription:
                        pass
            except ListenNotSupportedError:
                report_started()
                return  # handshake era: plain notifications, `watching` stays true
            except MCPError as exc:
                reason = describe_error(exc, self._server)
                logger.debug("MCP change stream from '%s' ended: %s", self._server, reason)
                if exc.code == METHOD_NOT_FOUND:  # not served: lists are re-fetched on every use
                    self.watching = False
                    report_started()
                    return
            except (SubscriptionLost, TimeoutError) as exc:
                reason = describe_error(exc, self._server)
                logger.debug("MCP change stream from '%s' ended: %s", self._server, reason)
            self.watching = False
            self._on_message(None)
            report_started()
            await anyio.sleep(delay)
            delay = min(delay * 2, _RELISTEN_MAX_DELAY)
        report_started()

    async def _handle(self, message: IncomingMessage) -> None:
        self._on_message(message)


class _Handshake:
    """``client`` entered (connected, its handshake made) with ``opener`` the current trace
    context, exited as it is. The ``mcp`` package traces its requests with the current context:
    made in the session's own context (outside any trace, see ``Connection.open``), the handshake's
    ``MCP send server/discover`` (and a legacy server's ``initialize``) spans were traces of their
    own, where the connect a run waited for (a cold start, a reconnect) belongs in the run's trace,
    under the span that asked (the agent listing its tools, the tool call that found the session
    gone). Bounded: the handshake ends before the session is published. What the session does
    afterwards (its change stream, ``_watch_changes``, started after this) stays outside it; the
    tasks the ``mcp`` client starts as it connects (its transport's, its reader's) keep the opener's
    context, where the ``mcp`` package starts no spans (a server's request it hands to
    ``MCPToolset``'s handlers outside any call is made untraced there, ``adk.mcp._hooks``)."""

    __slots__ = ("_client", "_opener")

    def __init__(self, client: Client, opener: otel_context.Context) -> None:
        self._client = client
        self._opener = opener

    async def __aenter__(self) -> Client:
        token = otel_context.attach(self._opener)
        try:
            return await self._client.__aenter__()
        finally:
            otel_context.detach(token)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._client.__aexit__(exc_type, exc, tb)


class _Attempt:
    """A connect in progress, and how many callers are waiting for it."""

    __slots__ = ("task", "waiters")

    def __init__(self, task: asyncio.Task[Connection]) -> None:
        self.task = task
        self.waiters = 0


class SharedListing:
    """A toolset's listing (of its tools or prompts) in progress on one session, and how many
    callers are waiting for it: concurrent first uses share one ``tools/list`` request, as
    concurrent connects share one attempt (``Session.connection``)."""

    __slots__ = ("task", "waiters")

    def __init__(self, task: asyncio.Task[Any]) -> None:
        self.task = task
        self.waiters = 0


class Session:
    """Lazily connected, reconnecting access to one MCP server, shared by a toolset's tools.

    ``tools_epoch``/``prompts_epoch`` advance whenever the server announces a list change or the
    session reconnects; a cached list tagged with an older epoch must be fetched again.
    """

    def __init__(
        self,
        server: ServerConfig,
        *,
        connect_timeout: float,
        hooks: _ClientHooks = NO_HOOKS,
        warned: ListingWarnings | None = None,
    ) -> None:
        self.server = server
        self._connect_timeout = connect_timeout
        self._hooks = hooks
        # The listings warned about, shared by the toolset's sessions (``ListingWarnings``).
        self.warned = ListingWarnings() if warned is None else warned
        self._live: Connection | None = None
        self._attempt: _Attempt | None = None
        self._lock = asyncio.Lock()
        self.tools_epoch = 0
        self.prompts_epoch = 0
        self.connections_opened = 0
        # The toolset's listings under way on this session, by kind ("tools", "prompts").
        self.listings: dict[str, SharedListing] = {}

    @property
    def current(self) -> Connection | None:
        return self._live

    async def connection(self) -> Connection:
        """The live connection, connecting first if there is none or the last one dropped.

        One attempt per call, shared: callers that need the session while a connect is under way
        wait for that attempt and share its outcome (a model's parallel tool calls to a server that
        is down all fail after one ``connect_timeout``, not one after another, and start one
        server, not one each). Failure raises ``ConnectionError`` naming the server and the reason;
        the next call tries again. If every waiting caller is cancelled, the attempt is abandoned;
        a caller arriving after that starts a new one.
        """
        live = self._live
        if live is not None and live.usable:
            return live
        attempt = self._attempt
        if attempt is None or attempt.task.done():
            task = asyncio.create_task(self._connect(), name=f"mcp connect {self.server}")
            attempt = self._attempt = _Attempt(task)
            task.add_done_callback(functools.partial(self._attempt_ended, attempt))
        attempt.waiters += 1
        try:
            return await asyncio.shield(attempt.task)
        finally:
            attempt.waiters -= 1
            if attempt.waiters == 0 and not attempt.task.done():
                # Every caller gave up (was cancelled): stop connecting, and wait until the
                # half-started session is closed, so nothing is left running behind, through
                # further cancellations too (an anyio cancel scope cancels every await: a plain
                # wait ended at once, and the server outlived the run's close). The attempt
                # is forgotten first: a caller arriving while it winds down starts a fresh one
                # (queued behind it on the lock) instead of sharing its cancellation.
                if self._attempt is attempt:
                    self._attempt = None
                attempt.task.cancel()
                await finish(asyncio.wait([attempt.task]))

    async def _connect(self) -> Connection:
        async with self._lock:
            live = self._live
            if live is not None:
                self._live = None
                await live.close()
            fresh = Connection(self.server, self._on_message, self._hooks, self.warned)
            await fresh.open(self._connect_timeout)
            self._live = fresh
            self.connections_opened += 1
            # Whatever was listed on an earlier connection may have changed while it was down.
            self.tools_epoch += 1
            self.prompts_epoch += 1
            return fresh

    def _attempt_ended(self, attempt: _Attempt, task: asyncio.Task[Connection]) -> None:
        if self._attempt is attempt:
            self._attempt = None
        if not task.cancelled():
            task.exception()  # retrieved: a failure nobody waited for is not "never retrieved"

    def _on_message(self, message: Any) -> None:
        if message is None:  # the change stream ended: assume anything may have changed
            self.tools_epoch += 1
            self.prompts_epoch += 1
        elif isinstance(message, ToolListChangedNotification):
            self.tools_epoch += 1
        elif isinstance(message, PromptListChangedNotification):
            self.prompts_epoch += 1
        elif isinstance(message, Exception):
            reason = describe_error(message, self.server)
            logger.debug("MCP transport for '%s' reported: %s", self.server, reason)

    async def aclose(self) -> None:
        """Close the current connection, if any. The session may connect again on next use."""
        async with self._lock:
            live, self._live = self._live, None
            if live is not None:
                await live.close()
