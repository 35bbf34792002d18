"""Where an MCP server lives: a command to spawn (stdio), a streamable HTTP endpoint, or an SSE one.

These are plain descriptions — constructing one starts nothing and opens nothing — so they can sit
in configuration and be handed to ``MCPToolset`` or ``Resources.add_mcp``. Each knows how to open a
fresh transport to its server; the toolset decides when (lazily, and again after a dropped
connection).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shutil
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, cast
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from .._urls import redacted_url as _redacted
from . import _stdio

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["HTTPServer", "SSEServer", "ServerConfig", "StdioServer"]

logger = logging.getLogger("adk.mcp")

# How long an idle server-to-client event stream may stay silent before the HTTP client gives up on
# it. Deliberately long: a server legitimately sends nothing while no tool list changes. Tool calls
# are bounded by the toolset's ``call_timeout``, not by this: over streamable HTTP the answer to a
# request (a POST) is awaited without a read timeout (see ``_RefusalWatch``). Over SSE answers come
# on the event stream, so a call silent for longer than this ends the connection.
_SSE_READ_TIMEOUT = 300.0
# The largest message an MCP server may send: a server-sent event or a JSON answer over streamable
# HTTP, a line over stdio (``_stdio``). The mcp client's default for an event (1 MiB) refused larger
# results — a file, a screenshot — from handshake-era servers, which answer every request as an
# event, while the same result answered as JSON or over stdio (no limit there then) arrived. This
# bounds what a misbehaving server can make the client buffer for one answer; large enough for a
# file or screenshot as base64 (a checkpoint holds a part of at most 20 MiB, MAX_PART_BYTES).
_MAX_EVENT_SIZE = 64 * 1024 * 1024


def _check_timeout(timeout: float) -> float:
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def _check_url(url: str, kind: str) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        shown = _redacted(url) if isinstance(url, str) else url
        raise ValueError(f"{kind} url must be an http:// or https:// URL, got {shown!r}")
    return url


# What HTTP allows in a header (RFC 9110): a name is a token; a value is visible ASCII with inner
# spaces or tabs. The HTTP client refuses anything else only when it connects, quoting the value in
# an error that becomes a tool error the model reads, and a header usually holds a token (one read
# from a file keeps its newline). So they are checked here, and the value never shown.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"(?:[\x21-\x7e](?:[ \t]*[\x21-\x7e])*)?")


def _check_headers(headers: Mapping[str, str] | None, kind: str) -> dict[str, str] | None:
    if headers is None:
        return None
    if not isinstance(headers, Mapping):
        raise TypeError(f"{kind} headers must be a mapping of str to str")
    checked: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"{kind} header name {name!r} is not a valid HTTP header name")
        if not isinstance(value, str):
            raise TypeError(
                f"{kind} header {name!r} must have a str value, got {type(value).__name__}"
            )
        if not _HEADER_VALUE.fullmatch(value):
            raise ValueError(
                f"{kind} header {name!r} has a value HTTP does not allow (leading or trailing "
                "whitespace, a line break or another control character, or a non-ASCII "
                "character; a token read from a file keeps its newline); the value is not shown"
            )
        checked[name] = value
    return checked


def _child_stderr() -> TextIO:
    """Where a stdio server's stderr goes: this process's stderr, read at connect time so that
    redirections made by the application count.

    A subprocess can only write to a real file, so when ``sys.stderr`` has been replaced by an
    in-memory stream (``contextlib.redirect_stderr``, pytest's capture, notebook and GUI hosts) the
    server writes to the original stderr instead; with none at all (``pythonw``), nowhere.
    """
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation, closed files
            continue
    return cast("TextIO", subprocess.DEVNULL)  # the process spawner takes a descriptor too


class _Delivery:
    """Whether one tool call provably never reached its server's tools.

    A tool call is never sent twice (tools are not assumed idempotent), unless it provably never
    reached a tool: the very first HTTP request made for it could not even open a connection (a
    server gone while the session was idle), or the server refused it for its session (see
    ``_refuses_session``). The toolset sets one in ``_current_delivery`` around a call; the HTTP
    transport makes the call's requests in the caller's context, so it finds it there. Only the
    first request counts: a call can take several (input rounds, a re-list), and once one went
    out the tool may have run. For a request that may be repeated anyway (a listing, whose pages
    are requests of their own), ``every_request`` makes any of them count.

    ``failure`` is what the first request answered with an HTTP error status said (``HTTP 401
    Unauthorized: <the body, shortened>``): the mcp client reports such an answer, unless its body
    is a JSON-RPC error, as "Server returned an error response", without status or words.
    ``broken``: why an exchange of one of its requests failed after its connection was open.
    """

    __slots__ = ("broken", "every_request", "failure", "reached", "refused", "requests")

    def __init__(self, *, every_request: bool = False, watch_reach: bool = False) -> None:
        self.requests = 0
        self.refused = False
        # Why a request's HTTP exchange failed once its connection was open (``_RefusalWatch``:
        # answered with an error in its stead, the session kept); a listing asks again.
        self.broken: str | None = None
        self.every_request = every_request
        self.failure: str | None = None
        # With ``watch_reach`` (a handshake's): whether a connection to the server was opened,
        # which tells a server never reached from one that did not answer. None: not watched.
        self.reached: bool | None = False if watch_reach else None

    async def _note_reach(self, event: str, info: object) -> None:
        """The HTTP connection's ``trace`` callback while ``reached`` is watched."""
        if event == "connection.connect_tcp.complete":
            self.reached = True

    def detail(self, described: str) -> str:
        """`` (HTTP ...)`` to add to ``described`` (an error's text), or "" when there is nothing
        to add."""
        failure = self.failure
        return f" ({failure})" if failure and failure not in described else ""


_current_delivery: ContextVar[_Delivery | None] = ContextVar("adk_mcp_delivery", default=None)

_SESSION_HEADER = "mcp-session-id"
# What a 400 answer says when it refuses a session (a Node server copying the TypeScript SDK's
# example: "Bad Request: No valid session ID provided"; the mcp package before 2.0 the same in
# plain text; others "Invalid or missing session ID", "Session not found"; the TypeScript
# transport on a restarted server: "Server not initialized"), not any 400 that names a session (a
# tool's argument error about its ``session_name``).
_SESSION_REFUSAL = re.compile(
    r"session[ _-]?id\b|(?:no valid|invalid|unknown|expired) session"
    r"|session (?:not found|terminated|expired)|not initiali[sz]ed",
    re.IGNORECASE,
)
_REFUSAL_BODY_LIMIT = 65536  # a refusal is a line of text; a larger body is something else


async def _body_text(response: httpx2.Response) -> str:
    """The start of a short error body, on one line ("" for a long one, which is not read)."""
    size = response.headers.get("content-length", "")
    if size.isdigit() and int(size) > _REFUSAL_BODY_LIMIT:
        return ""
    try:
        body = await response.aread()
    except httpx2.DecodingError:  # compressed, and cut by ``_bounded``
        return ""
    return " ".join(body[:_REFUSAL_BODY_LIMIT].decode("utf-8", "replace").split())


async def _bounded(response: httpx2.Response) -> httpx2.Response:
    """``response``, or, when its length is not given (a chunked body), one with at most
    ``_REFUSAL_BODY_LIMIT`` bytes of its body, read here, the rest let go with its connection: an
    error answer is read for what it says, and one whose body never ends (a hostile or broken
    server) was read whole, without a read timeout (``_RefusalWatch``), until the call's
    deadline, the client's memory growing with it. What the ``mcp`` client reads after is this
    start of it."""
    if response.headers.get("content-length", "").isdigit():
        return response  # read by ``_body_text`` if short, else not at all
    kept = bytearray()
    async for part in response.aiter_raw():
        kept += part
        if len(kept) > _REFUSAL_BODY_LIMIT:
            break
    await response.aclose()
    headers = [
        (name, value)
        for name, value in response.headers.raw
        if name.lower() not in (b"content-length", b"transfer-encoding")
    ]
    return httpx2.Response(
        response.status_code,
        headers=headers,
        content=bytes(kept[:_REFUSAL_BODY_LIMIT]),
        extensions=response.extensions,
    )


# The start of a POST's JSON-RPC message that is no request: a notification, or the client's
# answer (result or error) to a request of the server's. As the ``mcp`` client writes them.
_NO_REQUEST = re.compile(
    rb'\A\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*(?:"method"\s*:|"id"\s*:\s*(?:-?\d+|"(?:[^"\\]|\\.)*")'
    rb'\s*,\s*"(?:result|error)"\s*:)'
)


def _answers_nothing(request: httpx2.Request) -> bool:
    """Whether ``request`` (a POST) sends a notification or an answer of the client's: the
    ``mcp`` client reads no answer to one (a 2xx body is closed unread), so neither does
    ``_capped``, whose reading would hand a body cut off or never ending (no read timeout on a
    POST) to the client's writer. A message starting otherwise is taken for a request."""
    try:
        return _NO_REQUEST.match(request.content[:256]) is not None
    except httpx2.RequestNotRead:
        return False


async def _capped(request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
    """``response``, the answer to a POST, or, when it is a JSON answer (not an event stream, whose
    events the ``mcp`` client caps) over ``_MAX_EVENT_SIZE`` bytes once decoded, an answer of a
    JSON-RPC error saying so under the request's id, the body read no further and its connection
    let go. The ``mcp`` client reads a JSON answer whole, however large (a server answering 500
    MB, or a compressed body that inflates a thousandfold). Read here in full (the client would
    read it at once anyway); decoded as it comes, so a compressed body is capped as it inflates."""
    if not response.headers.get("content-type", "").lower().startswith("application/json"):
        return response
    limit = _MAX_EVENT_SIZE
    parts: list[bytes] = []
    size = 0
    try:
        async for part in response.aiter_bytes():
            size += len(part)
            if size > limit:
                break
            parts.append(part)
    finally:  # the client never sees this response to close it: its connection let go here
        with anyio.CancelScope(shield=True):
            await response.aclose()
    if size <= limit:
        headers = [
            (name, value)
            for name, value in response.headers.raw
            if name.lower() not in (b"content-length", b"transfer-encoding", b"content-encoding")
        ]
        return httpx2.Response(
            response.status_code,
            headers=headers,
            content=b"".join(parts),
            extensions=response.extensions,
        )
    parts.clear()
    try:
        asked = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        asked = None
    request_id = asked.get("id") if isinstance(asked, dict) else None
    why = (
        f"the server's answer was over the {limit} bytes one MCP message may be: it was dropped "
        "unread"
    )
    refusal = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": why}}
    return httpx2.Response(
        response.status_code,
        headers=[(b"content-type", b"application/json")]
        + [(n, v) for n, v in response.headers.raw if n.lower() == b"mcp-session-id"],
        content=json.dumps(refusal).encode(),
        extensions=response.extensions,
    )


_FAILURE_CHARS = 300  # of an error answer's body in a failure's reason
_UNSHOWN = frozenset({"script", "style"})  # elements whose text is no words of a page


def _page_words(page: str) -> str:
    """The words of an HTML page (a proxy's error page): its title's, the tags in it left out,
    or, with no title closed or an empty one, its text without its tags, scripts and style
    sheets; a tag never closed (``<a`` to the page's end) is left out with what follows it.

    Read once through, split at each ``<`` (a page is a server's, up to 64 KB: a pattern
    searching each ``<title`` to the page's end for its ``>`` took 0.9 s of the event loop for
    a page of them)."""
    parts = page.split("<")
    text: list[str] = [parts[0]]
    title: list[str] = []
    titled = False  # a title was closed
    into: list[str] | None = None  # the title's words while in it
    skipping = ""  # the script or style element being left out
    for part in parts[1:]:
        tag, closed, after = part.partition(">")
        if not closed:
            continue  # no tag closed before the next ``<``: neither tag nor words
        # Its name as far as told apart here (no name looked for is over 7 characters).
        name = tag[:8].split(None, 1)[0].lower() if tag[:1].strip() else ""
        if skipping:
            if name == "/" + skipping:
                skipping = ""
                text.append(" " + after)
            continue
        if name in _UNSHOWN:
            skipping = name
            continue
        if name == "title" and not titled:
            into = title
        elif name == "/title" and into is not None:
            into, titled = None, True
        text.append(" " + after)  # a title never closed is the page's text with the rest
        if into is not None:
            into.append(" " + after)
    words = " ".join("".join(title).split()) if titled else ""
    return words or " ".join("".join(text).split())


async def _failure_text(response: httpx2.Response) -> str:
    """``HTTP 401 Unauthorized: <what the body says, up to 300 characters>``, or "" for a JSON-RPC
    error: the mcp client reports its message, so the body would only repeat it, as raw JSON in
    a text the model reads (2026-07-28 servers answer every JSON-RPC error with HTTP 400).

    The body is the server's (or a proxy's) text in an error the model reads, a run's history and
    checkpoint keep and an application logs: its control characters and bidi overrides are
    escaped as a server's log message is (``_hooks._loggable``: a proxy's page could clear the
    terminal of whoever reads it), and an HTML page (a proxy's ``502 Bad Gateway``, of some KB)
    is given by its words (``_page_words``: its title's, or its text), never its markup."""
    said = await _body_text(response)
    if _is_jsonrpc_error(said):
        return ""
    head = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
    if said.startswith("<") or "html" in response.headers.get("content-type", "").lower():
        said = _page_words(said)
    from ._hooks import _loggable

    said = _loggable(said[: _FAILURE_CHARS + 1])
    if len(said) > _FAILURE_CHARS:
        said = said[:_FAILURE_CHARS] + "..."
    return f"{head}: {said}" if said else head


def _is_jsonrpc_error(body: str) -> bool:
    if not body.startswith("{"):
        return False
    try:
        value = json.loads(body)
    except ValueError:  # cut short, or not JSON after all
        return False
    error = value.get("error") if isinstance(value, dict) else None
    return isinstance(error, dict) and isinstance(error.get("message"), str)


async def _refuses_session(request: httpx2.Request, response: httpx2.Response) -> bool:
    """Whether ``response`` refuses ``request`` for its session, so nothing of it ran.

    The spec's answer to a session the server does not know is HTTP 404, but servers differ in
    the body (the ``mcp`` package: JSON-RPC ``INVALID_REQUEST``; the TypeScript transport: code
    -32001, with no content type; others: plain text), and many answer 400 instead, which the
    ``mcp`` client reports as an opaque "Server returned an error response". Only the HTTP
    status shows them all, so it is read here, where the response still has it: a 404 to a
    request carrying a session id, or a 400 whose body is about the session. The body of such an
    answer is read here (it is short) and stays readable for the ``mcp`` client.
    """
    if _SESSION_HEADER not in request.headers:
        return False
    if response.status_code == 404:
        return True
    if response.status_code != 400:
        return False
    return bool(_SESSION_REFUSAL.search(await _body_text(response)))


def _is_listen(request: httpx2.Request) -> bool:
    """Whether ``request`` opens a 2026-07-28 change stream (``subscriptions/listen``): a stream
    that is silent while nothing changes, like the event stream, so it keeps the read timeout,
    which notices one cut off without a word (and the toolset then lists again)."""
    try:
        return b'"subscriptions/listen"' in request.content
    except httpx2.RequestNotRead:
        return False


_REQUEST_START = re.compile(rb'\{"jsonrpc":"2\.0","id":(?:-?\d+|"(?:[^"\\]|\\.)*"),"method":')
"""How the ``mcp`` client's JSON-RPC request starts (its fields in order, ``httpx2``'s compact
JSON); a notification has no ``id``, a response no ``method``."""


def _is_request(request: httpx2.Request) -> bool:
    """Whether ``request`` POSTs a JSON-RPC request (a call, a listing), whose caller bounds its
    wait (``call_timeout``, ``connect_timeout``), not a notification or an answer to the server,
    which the ``mcp`` client's writer sends itself, holding up every later message while it
    waits. Read from the body's start: parsing a call's arguments would cost per call."""
    try:
        return _REQUEST_START.match(request.content) is not None
    except httpx2.RequestNotRead:
        return False


# A POST failing so was never answered by the server: the session is lost, as before (the next
# use reconnects, and a call provably not sent is sent again there: ``_Delivery.refused``).
_UNREACHED = (
    httpx2.ConnectError,
    httpx2.ConnectTimeout,
    httpx2.ProxyError,
    httpx2.UnsupportedProtocol,
    httpx2.PoolTimeout,
)


def _unsent(request: httpx2.Request) -> tuple[str, str]:
    """What ``request``, a POST of a notification or an answer of the client's whose exchange
    failed, sent, and what follows if it did not arrive, for a warning: a lost cancellation
    leaves the server running the request it cancels (a call the client reported ended), a
    lost answer leaves the server's request waiting."""
    from ._hooks import _loggable

    try:
        sent = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        sent = None
    if not isinstance(sent, dict):
        return "a notification or an answer of the client's", ""
    method, params = sent.get("method"), sent.get("params")
    if method == "notifications/cancelled" and isinstance(params, dict):
        cancelled = _loggable(json.dumps(params.get("requestId"))[:100])
        return (
            f"the client's cancellation of its request {cancelled}",
            ": the server may go on running that request (a call the client gave up on)",
        )
    if isinstance(method, str):
        return f"the client's notification {_loggable(method[:100])}", ""
    answered = _loggable(json.dumps(sent.get("id"))[:100])
    return (
        f"the client's answer to the server's request {answered}",
        ": the server's request may wait on for it",
    )


class _RefusalWatch(httpx2.AsyncBaseTransport):
    """An HTTP transport that notes, in the caller's ``_Delivery``, a first request that provably
    reached no tool: its connection could not be opened (refused, timed out, TLS handshake
    failed), or the server refused it for its session; and what an HTTP error answer said.

    It also waits for the answer to a POST (a request to the server: a tool call's answer comes
    when the tool is done) without a read timeout: the client's read timeout, long for the sake of
    the idle event stream, cut off every call that took longer, as a lost connection, whatever the
    toolset's ``call_timeout`` (which bounds calls and listings) said. Likewise for a connection
    of the pool (100) to send a JSON-RPC request on (``_is_request``): with every one busy with a
    call, a POST waited at most the server's ``timeout`` for one, and its ``PoolTimeout`` ended
    the ``mcp`` client's writer, so the session and every call on it, those the server was
    running included, were lost. A notification or an answer to the server keeps that bound:
    the writer sends it itself, every later message waiting behind it, and a handshake-era
    server's ``notifications/cancelled`` for calls holding every connection could not get one
    until those calls ended, which only it could make them do: waiting without a bound, the
    session's every later call timed out, for good; past the bound the session is lost, and the
    next call reopens it. Connecting, sending and other requests (the event streams, closing the
    session) keep their timeouts."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, shown: str = "") -> None:
        self._inner = inner
        self._shown = shown  # the server, as its texts name it

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._watched(request)
            # What the mcp client reads of a 2xx answer: a request's, unless 202 Accepted (no
            # answer).
            read = 200 <= response.status_code < 300 and response.status_code != 202
            if request.method == "POST" and read and not _answers_nothing(request):
                return await _capped(request, response)
            return response
        except httpx2.TransportError as exc:
            if request.method != "POST" or isinstance(exc, _UNREACHED):
                raise
            return self._failed(request, exc)

    def _failed(self, request: httpx2.Request, exc: httpx2.TransportError) -> httpx2.Response:
        """The answer to ``request``, a POST whose exchange failed once its connection was open
        (reset, closed before its answer, cut off mid-answer: a proxy dropping one connection):
        for a JSON-RPC request, an error under its id saying so, its ``_Delivery`` marked
        ``broken``; for a notification or an answer of the client's, 202 Accepted, with a
        warning that it may not have arrived. Raised, the failure ended the ``mcp`` client's
        transport (its task group), so the session and every call in flight on it were lost for
        one failed request; a connection that could not be opened at all still does (the server
        is gone: ``_UNREACHED``, the next use reconnects)."""
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        from ._hooks import _loggable

        why = _loggable(why[:300])
        try:
            asked = json.loads(request.content) if _is_request(request) else None
        except (ValueError, httpx2.RequestNotRead):
            asked = None
        request_id = asked.get("id") if isinstance(asked, dict) else None
        if type(request_id) not in (int, str):
            sent, then = _unsent(request)
            logger.warning(
                "MCP server '%s': an HTTP request sending %s failed (%s): it may not have "
                "arrived%s; the session goes on",
                self._shown,
                sent,
                why,
                then,
            )
            return httpx2.Response(202, request=request)
        delivery = _current_delivery.get()
        if delivery is not None:
            delivery.broken = why
        message = (
            f"the HTTP exchange with the server failed before its answer came ({why}); the "
            "request may have reached it"
        )
        error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": message}}
        return httpx2.Response(
            200,
            headers=[(b"content-type", b"application/json")],
            content=json.dumps(error).encode(),
            request=request,
        )

    async def _watched(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "POST" and not _is_listen(request):
            timeouts = request.extensions.get("timeout")
            if isinstance(timeouts, dict):
                if _is_request(request):
                    request.extensions["timeout"] = {**timeouts, "read": None, "pool": None}
                else:
                    request.extensions["timeout"] = {**timeouts, "read": None}
        delivery = _current_delivery.get()
        if delivery is None:
            return await self._inner.handle_async_request(request)
        if delivery.reached is False:  # a handshake's request: note the connection opening
            request.extensions["trace"] = delivery._note_reach
        delivery.requests += 1
        first = delivery.requests == 1 or delivery.every_request
        try:
            response = await self._inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            delivery.refused = first
            raise
        if delivery.reached is False:  # answered over a connection opened before
            delivery.reached = True
        status = response.status_code
        read_refusal = first and status in (400, 404) and _SESSION_HEADER in request.headers
        read_failure = status >= 400 and request.method == "POST" and delivery.failure is None
        if read_refusal or read_failure:
            response = await _bounded(response)
        if first and status in (400, 404):
            delivery.refused = await _refuses_session(request, response)
        if read_failure:
            delivery.failure = await _failure_text(response)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _http_client(
    headers: dict[str, str] | None,
    timeout: httpx2.Timeout,
    *,
    watched: bool = True,
    auth: httpx2.Auth | None = None,
    shown: str = "",
) -> httpx2.AsyncClient:
    """A URL server's HTTP client: the proxies the environment names used as ``httpx2``'s own
    client uses them, every TLS context the process's shared one, and (``watched``, an
    ``HTTPServer``'s) each transport watched (``_RefusalWatch``).

    A client given a ``transport=`` reads no proxy from the environment (``httpx2`` takes the
    transport as the whole say), so with the watch alone a service behind a corporate proxy sent
    every request straight to the server, which it could not reach. So the proxies are read here,
    by ``httpx2``'s own reading of ``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY``
    (lowercase first, as ``urllib`` reads them; a ``NO_PROXY`` domain with a leading dot covers
    the domain itself too, as curl and ``requests`` read it: ``environment_proxies``), each
    mounted for its URLs with a transport to it, and a host ``NO_PROXY`` names mounted to the
    direct one, as the default client mounts them. Read when a connection is opened, as a
    default client reads them when made.

    The transports share the process's TLS context (``adk.models._openai_tls``, the one
    ``OpenAIChatModel``'s clients share): each built its own, loading the CA store into it (~18 ms
    of CPU, one more per proxy), per connection; so did every connection to an ``https://``
    proxy, which ``httpx2`` checks with a context of its own (``proxy_transport``). It is the
    context each would build, by the same call, rebuilt when ``SSL_CERT_FILE``, ``SSL_CERT_DIR``
    or the CA file or directory they name changes, read as the connection opens as before; where
    none is shared (an SDK on another HTTP library, truststore's context) each transport builds
    its own as before.

    An ``SSEServer``'s client is made here too (``_sse_client``, given to the ``mcp`` client as
    its ``httpx_client_factory``), unwatched: its default one built a context per connection."""
    from ..models._openai_tls import environment_proxies, proxy_transport, shared_tls_context

    context = shared_tls_context()
    verify: ssl.SSLContext | bool = True if context is None else context
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {}
    for pattern, proxy in environment_proxies().items():
        if proxy is None:
            mounts[pattern] = None
        else:
            to_proxy = proxy_transport(proxy, context)
            mounts[pattern] = _RefusalWatch(to_proxy, shown) if watched else to_proxy
    direct: httpx2.AsyncBaseTransport = httpx2.AsyncHTTPTransport(verify=verify)
    if watched:
        direct = _RefusalWatch(direct, shown)
    return httpx2.AsyncClient(
        headers=headers, timeout=timeout, auth=auth, transport=direct, mounts=mounts
    )


def _sse_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """An ``SSEServer``'s HTTP client, the ``mcp`` client's ``httpx_client_factory``: as its
    default one (``create_mcp_http_client``), but on the process's TLS context and with the
    environment's proxies read as ``HTTPServer``'s are (``_http_client``)."""
    if timeout is None:  # the mcp client always gives one; its default's, should it not
        timeout = httpx2.Timeout(30.0, read=_SSE_READ_TIMEOUT)
    return _http_client(headers, timeout, watched=False, auth=auth)


def _proxy_for(url: str) -> str | None:
    """The proxy the environment names for ``url``, as ``_http_client`` mounts it (the most
    specific pattern first, as ``httpx2`` orders them), shown with its credentials masked;
    None for none (or a host ``NO_PROXY`` names, or a variable that cannot be read)."""
    from httpx2._utils import URLPattern

    from ..models._openai_tls import environment_proxies

    try:
        target = httpx2.URL(url)
        mounted = [(URLPattern(key), proxy) for key, proxy in environment_proxies().items()]
        patterns = sorted(mounted, key=lambda item: item[0])
    except Exception:  # only a hint: never in the way of the error it adds to
        return None
    for pattern, proxy in patterns:
        if pattern.matches(target):
            return None if proxy is None else _redacted(proxy)
    return None


class _URLServer:
    """Showing a server reached by URL without the credentials the URL may carry."""

    url: str
    headers: Mapping[str, str] | None
    timeout: float

    def _redact(self, text: str) -> str:
        """``text`` (an error message, say) with this server's URL and its secrets masked: the
        whole URL, or its user info or query string quoted on their own; and the values of the
        headers it is sent with (a token), whole or word by word (a server refusing ``Bearer
        <token>`` may quote the token alone), where a word is long enough to be a secret."""
        parts = urlsplit(self.url)
        userinfo = parts.netloc.rpartition("@")[0]
        text = text.replace(self.url, str(self))
        if userinfo:
            text = text.replace(f"{userinfo}@", "***@")
        if parts.query:
            text = text.replace(parts.query, "***")
        for secret in self._header_secrets:
            text = text.replace(secret, "***")
        return text

    @functools.cached_property
    def _header_secrets(self) -> tuple[str, ...]:
        """The header values, and their words, to mask in texts: those of 8 characters or more
        (shorter ones, ``json`` or ``1``, would mask words of the text that are no secret), the
        longest first, so a value is masked whole before its words."""
        found: set[str] = set()
        for value in (self.headers or {}).values():
            found.update(word for word in (value, *value.split()) if len(word) >= 8)
        return tuple(sorted(found, key=len, reverse=True))

    def __str__(self) -> str:
        return _redacted(self.url)

    def _connect_hint(self, reason: str) -> str:
        """What to add to ``reason``, why a connection failed, to say what to do: a URL with no
        path is refused (404) by servers serving MCP at one, which the bare Not Found left to
        guess; and the proxy the environment names for the URL, if any, its credentials masked
        (a proxy that is down failed naming the server alone)."""
        hint = ""
        if "404" in reason and urlsplit(self.url).path in ("", "/"):
            hint = (
                "; the URL has no path, and MCP servers serve at one, as a rule /mcp for "
                "streamable HTTP (HTTPServer) and /sse for SSE (SSEServer)"
            )
        proxy = _proxy_for(self.url)
        if proxy is not None:
            hint += f"; its requests went through the proxy the environment names, '{proxy}'"
        return hint

    def __repr__(self) -> str:  # headers are left out: they usually hold a token
        return f"{type(self).__name__}(url={str(self)!r}, timeout={self.timeout!r})"


def _span_attributes(server: object) -> dict[str, Any]:
    """The MCP conventions' attributes of a tool call to ``server``, for its ``execute_tool`` span
    (they ask an MCP client to add them to a GenAI tool span rather than start a second one):
    ``mcp.method.name``, the transport (``pipe`` for stdio, ``tcp`` for HTTP), and a URL
    server's address and port (its port or the scheme's default; never the URL, which may carry
    credentials)."""
    attributes: dict[str, Any] = {"mcp.method.name": "tools/call"}
    if isinstance(server, StdioServer):
        attributes["network.transport"] = "pipe"
    elif isinstance(server, _URLServer):
        attributes["network.transport"] = "tcp"
        attributes["network.protocol.name"] = "http"
        try:
            parts = urlsplit(server.url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:  # a port that is not a number: the server refuses to connect anyway
            return attributes
        if parts.hostname:
            attributes["server.address"] = parts.hostname
            attributes["server.port"] = port
    return attributes


@dataclass(frozen=True)
class StdioServer:
    """An MCP server run as a subprocess speaking MCP over its stdin/stdout.

    ``env`` is merged over a minimal inherited environment (``PATH``, ``HOME``, ``USER``, ...), not
    the whole parent environment, so secrets in the parent do not leak to third-party servers by
    default. The server's stderr goes to this process's stderr. It is shown (``str``, error texts)
    by its command and the script it runs (a first argument that is a file, or ``-m module``):
    the other ``args`` and ``env`` may hold secrets.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)  # often holds API keys
    cwd: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.command, str) or not self.command:
            raise ValueError(f"StdioServer needs a command to run, got {self.command!r}")
        _check_not_a_command_line(self.command)
        if isinstance(self.args, str):
            raise TypeError("StdioServer args must be a sequence of strings, not one string")
        object.__setattr__(self, "args", tuple(str(arg) for arg in self.args))
        if self.env is not None:
            if not isinstance(self.env, Mapping):
                raise TypeError(
                    "StdioServer env must be a mapping of variable names to values "
                    f"(env={{'DEBUG': '1'}}), not {type(self.env).__name__}"
                )
            object.__setattr__(self, "env", {str(k): str(v) for k, v in self.env.items()})

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        params = StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=dict(self.env) if self.env is not None else None,
            cwd=os.fspath(self.cwd) if self.cwd is not None else None,
        )
        if not _stdio.READABLE:  # an mcp release without the helpers it calls
            return stdio_client(params, errlog=_child_stderr())
        return _stdio.stdio_transport(
            params, errlog=_child_stderr(), shown=str(self), limit=_MAX_EVENT_SIZE
        )

    def _redact(self, text: str) -> str:
        return text

    def _connect_hint(self, reason: str) -> str:
        """What to add to ``reason``, why a connection failed: a process that ended before the
        handshake (a script not found, an import error) showed as a bare "Connection closed"."""
        if "Connection closed" in reason:
            return (
                "; the server process ended, or closed its stdout, before answering: its "
                "stderr, shown above, may say why"
            )
        return ""

    def __str__(self) -> str:
        # The command and its script: it names the server in error texts, which a model reads
        # (and runs keep in history and checkpoints), and the other args may hold a secret
        # (``--api-key=...``). ``repr``, for the developer, shows the args (``env`` never).
        return self._shown

    @functools.cached_property
    def _shown(self) -> str:
        """The command, and the script it runs when its first argument names one: a file that
        exists, or ``-m module``. The command alone named every ``python server.py`` alike, so
        two servers run by one interpreter (their tools clashing, one failing to start) could
        not be told apart. A script's path or a module's name is no secret; the args after it
        are not shown."""
        args = self.args
        if len(args) >= 2 and args[0] == "-m":
            return f"{self.command} -m {args[1]}"
        if args and not args[0].startswith("-"):
            where = os.path.join(os.fspath(self.cwd), args[0]) if self.cwd else args[0]
            if os.path.isfile(where):
                return f"{self.command} {args[0]}"
        return self.command


def _check_not_a_command_line(command: str) -> None:
    """Refuse a whole command line given as the command (``StdioServer("python server.py")``):
    it is run as one program's name, so it failed only when first used, as a file not found. Only
    when that is certain: the whole text is no program, while its first word is one (a command
    whose path holds a space is taken)."""
    words = command.split()
    if len(words) < 2 or shutil.which(command) is not None:
        return
    if shutil.which(words[0]) is None:
        return
    args = ", ".join(repr(word) for word in words[1:])
    raise ValueError(
        f"StdioServer's command is one program, and {command!r} is a command line: give the "
        f"program and its arguments apart, StdioServer({words[0]!r}, [{args}])"
    )


@dataclass(frozen=True, repr=False)
class HTTPServer(_URLServer):
    """An MCP server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``).

    ``timeout`` bounds connecting and each HTTP exchange but a call's wait for its answer, and
    for a free connection to send it on, which its ``call_timeout`` bounds (a notification, a
    cancelled call's, waits for one within ``timeout``: ``_RefusalWatch``); ``headers`` are sent
    with every request (authentication, for instance) and must be valid HTTP (checked here, the
    value never shown).
    The URL is shown with its user info and query values masked. Requests go through the proxy
    the environment names (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``), read as
    each connection opens (``_http_client``).
    """

    url: str
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    timeout: float = 30.0

    def __post_init__(self) -> None:
        _check_url(self.url, "HTTPServer")
        object.__setattr__(self, "timeout", _check_timeout(self.timeout))
        object.__setattr__(self, "headers", _check_headers(self.headers, type(self).__name__))

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[TransportStreams]:
        timeout = httpx2.Timeout(self.timeout, read=max(self.timeout, _SSE_READ_TIMEOUT))
        headers: dict[str, str] = dict(self.headers) if self.headers else {}
        async with (
            _http_client(headers, timeout, shown=str(self)) as http,
            streamable_http_client(
                self.url, http_client=http, max_sse_event_size=_MAX_EVENT_SIZE
            ) as streams,
        ):
            yield streams


@dataclass(frozen=True, repr=False)
class SSEServer(_URLServer):
    """An MCP server reached over the older HTTP+SSE transport at ``url`` (e.g. ``.../sse``).

    Kept for servers that have not moved to streamable HTTP; prefer ``HTTPServer`` otherwise. Its
    HTTP client (``_sse_client``) reads the proxy variables and shares the process's TLS context
    as ``HTTPServer``'s does.
    """

    url: str
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    timeout: float = 30.0

    def __post_init__(self) -> None:
        _check_url(self.url, "SSEServer")
        object.__setattr__(self, "timeout", _check_timeout(self.timeout))
        object.__setattr__(self, "headers", _check_headers(self.headers, type(self).__name__))

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        headers: dict[str, Any] | None = dict(self.headers) if self.headers else None
        return sse_client(
            self.url,
            headers=headers,
            timeout=self.timeout,
            sse_read_timeout=max(self.timeout, _SSE_READ_TIMEOUT),
            httpx_client_factory=_sse_client,
        )


ServerConfig = StdioServer | HTTPServer | SSEServer
"""Any of the server descriptions above."""
