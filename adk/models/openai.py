"""``OpenAIChatModel``: any OpenAI-compatible server (OpenAI, vLLM, Ollama, llama.cpp) as a ChatModel.

This is the only module that imports the ``openai`` SDK (about a second to import), with
``_openai_tls`` (the clients' TLS context), which only it imports, so ``import adk`` stays light;
``adk.models`` loads it on first use of ``OpenAIChatModel``. The wire mapping lives in
``_openai_chat`` / ``_openai_responses`` and the retry policy in ``_retry``; this module owns the
client, error classification and the streaming contract.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Literal, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import openai

from .._aio import SharedCloseable
from .._loop_clients import LoopClients
from .._urls import redacted_url
from ..messages import Message, MessageChunk
from ..tools.base import ToolSpec
from ._openai_chat import KEPT_FIELDS, ChatStreamDecoder, chat_message, chat_request, server_tag
from ._openai_chat import short_call_id as _short_call_id
from ._openai_common import (
    SHORTEST_KEY,
    error_detail,
    fits_wire,
    in_band_status,
    json_schema_of,
    quotes_key,
    unkeyed,
    unkeyed_bytes,
)
from ._openai_responses import ResponsesStreamDecoder, responses_message, responses_request
from ._openai_tls import http_client
from ._retry import RetryRunner, retry_after_seconds
from ._structured import FormatFallback
from ._wrapped import UnwrappingDecoder, WrappedSchemas, unwrap_text, wraps
from .base import RETRY_AFTER_LIMIT, ModelError, ModelOptions, RetryPolicy

__all__ = ["OpenAIChatModel"]

_OPENAI_HOST = "api.openai.com"
_OPENAI_SUBDOMAIN = "." + _OPENAI_HOST
_OPENAI_URL = f"https://{_OPENAI_HOST}/v1"  # the openai client's default base_url
_KEYLESS = "not-needed"  # servers without auth still get a syntactically valid bearer token
# Keys local servers' docs give, which are no secret: masked as a short key, each hid the words
# it stands for in what a server said ("model ollama/llama3" read "model ***/llama3"). Lower case.
_PLACEHOLDER_KEYS = frozenset(
    {"empty", "ollama", "lm-studio", "none", "null", "1234", "dummy", "no-key", _KEYLESS}
)
_PLACEHOLDER_LONGEST = max(map(len, _PLACEHOLDER_KEYS))
_T = TypeVar("_T")

_ENDPOINT_SUFFIXES = ("/chat/completions", "/completions", "/responses")


class _StreamTruncated(Exception):
    """The server ended a stream cleanly but before the model finished."""


class _DoneWatch:
    """An SDK stream's SSE decoder, put in its place (``_watch_done``) to tell a Chat stream the
    server ended with ``[DONE]`` from one whose body ended without it: the SDK stops at
    ``[DONE]`` and hides it, so both end the same way for its caller. It keeps the last event
    the SDK read (one attribute set an event): the SDK reads none after ``[DONE]``, so that is
    the last one only when it came."""

    __slots__ = ("_decoder", "_last")

    def __init__(self, decoder: Any) -> None:
        self._decoder = decoder
        self._last: Any = None

    async def aiter_bytes(self, iterator: Any) -> AsyncIterator[Any]:
        async for sse in self._decoder.aiter_bytes(iterator):
            self._last = sse
            yield sse

    def __getattr__(self, name: str) -> Any:  # anything else the SDK asks its decoder
        return getattr(self._decoder, name)

    def ended(self) -> bool:
        """Whether the stream's last event was ``[DONE]``."""
        data = getattr(self._last, "data", None)
        return isinstance(data, str) and data.startswith("[DONE]")


def _watch_done(sdk_stream: Any) -> _DoneWatch | None:
    """A ``_DoneWatch`` in place of ``sdk_stream``'s SSE decoder (``AsyncStream._decoder``,
    private, read at its first event), or None when it has none to replace: then a stream
    without a finish reason is cut short, as before the watch."""
    decoder = getattr(sdk_stream, "_decoder", None)
    if decoder is None or not callable(getattr(decoder, "aiter_bytes", None)):
        return None
    watch = _DoneWatch(decoder)
    sdk_stream._decoder = watch
    return watch


# What HTTP forbids in the Authorization header the key is sent in: line breaks and the other
# control characters (a tab aside), and anything beyond ASCII; a space or tab may not end it.
_NOT_IN_A_HEADER = re.compile(r"[^\t\x20-\x7e]")


def _check_api_key(key: str, source: str) -> None:
    """Refuse, where the model is made, a key HTTP cannot send: one read from a file with its
    newline was taken, and every call failed as a "connection error", retried, with the key
    itself in the error text (``Illegal header value b'Bearer sk-...\\n'``), which reaches
    events, logs and traces. The value is never shown."""
    if not isinstance(key, str):
        raise TypeError(f"{source} must be a str, got {type(key).__name__}")
    if _NOT_IN_A_HEADER.search(key) is not None:
        raise ValueError(
            f"{source} holds a line break, another control character or a non-ASCII character, "
            "which HTTP does not allow in the header it is sent in (a key read from a file keeps "
            "its newline: strip it); the value is not shown"
        )
    if key[-1] in " \t":
        # The header is "Bearer <key>", and HTTP's header value ends with a visible character, so
        # a key pasted or quoted with a space after it fails as the newline did (h11: "Illegal
        # header value", the key in the text); one before it is sent, and servers that ignore
        # the key (Ollama, vLLM) take it, so that is left alone.
        raise ValueError(
            f"{source} ends with a space or tab, which HTTP does not allow at the end of the "
            "header it is sent in (strip it); the value is not shown"
        )


class OpenAIChatModel(SharedCloseable):
    """A ChatModel over the ``openai`` package's ``AsyncOpenAI``, Chat Completions or Responses API.

    ``base_url`` (else ``OPENAI_BASE_URL``, else OpenAI itself) is the API root. The rule: a URL
    with no path gets ``/v1`` appended, because OpenAI, vLLM, Ollama and llama.cpp all serve the API
    there — ``http://localhost:8000`` and ``http://localhost:8000/v1`` mean the same. A URL with any
    other path is used as given (``https://openrouter.ai/api/v1``, ``.../v1beta/openai``). A URL that
    names an endpoint (``.../v1/chat/completions``) is rejected with the URL to write instead.

    ``api_key`` (else ``OPENAI_API_KEY``) is required for OpenAI itself; for other servers it may be
    omitted and a placeholder is sent, since local servers usually ignore it.

    ``client``: bring your own ``AsyncOpenAI`` (for proxies, headers, separate connect and read
    timeouts); it is used through ``client.with_options(max_retries=0)`` (and ``timeout`` if given)
    and is not closed by :meth:`aclose` — you own it. Do not combine it with ``base_url`` /
    ``api_key``.

    ``timeout`` (seconds) is handed to the SDK, which bounds connecting and each wait for the server
    (for the response headers, for the next piece of a body or stream) with it — not the whole call,
    so a long answer streaming steadily is not cut off while one that stalls is. It applies to the
    client this model builds or, with your own ``client``, to this model's requests only (that
    client keeps its setting for its other users). ``None`` keeps the client's default (the SDK's
    10 minutes, or what your client says). A timed-out attempt is retried like any transient
    failure; when attempts run out, :class:`ModelError` says the request timed out.

    Retries follow ``retry`` (tenacity): connection errors, timeouts, HTTP 408/409/429/5xx (not a
    429 saying the quota is exhausted, ``insufficient_quota``, nor an error the server sent with
    ``x-should-retry: false``), waiting
    what Retry-After says (even beyond ``max_delay``, up to ``RETRY_AFTER_LIMIT``, 60 s; a
    server asking for longer is not retried) or exponential backoff with jitter. The SDK's own
    retries are off so nothing retries twice. Other failures raise :class:`ModelError` at once, naming
    the status and the server's message. A stream is retried only before its first chunk reached the
    caller (an error event it sends before then counts as the status its code stands for, see
    ``in_band_status``); a stream that breaks or ends early after that raises ``ModelError``, never
    truncates. A connection lost once the model had finished (the finish reason, or
    ``response.completed``, had come) ends the stream as it is: the answer is whole (a Chat
    stream's usage, which comes after the finish reason, may be missing then).
    A 200 answer that is malformed (not JSON, no choices, no event stream) raises ``ModelError`` at
    once, quoting what came instead.

    ``max_tokens`` is sent as ``max_completion_tokens`` to OpenAI itself (its reasoning models refuse
    ``max_tokens``) and as ``max_tokens`` to other servers (the field they all understand); a server
    that refuses the one gets the other from then on, and one that refuses ``stream_options`` gets
    streams without it (see ``_adapt``). Reasoning text is read from ``reasoning_content`` /
    ``reasoning`` (vLLM, llama.cpp, Ollama) or Responses reasoning items, and sent back beside tool
    calls only to a server that refuses a conversation without it (DeepSeek's and Kimi's thinking
    modes). A schema ``response_format`` the server refuses is asked for again with less: without
    ``strict``, then JSON mode, then none, the schema then in the system message (``_structured``),
    remembered per model. ``metadata["finish_reason"]`` uses Chat vocabulary for both APIs.

    ``parts``: how a message's images, sounds and files (``Message.parts``) are sent. ``"send"``:
    as content parts (``image_url``, ``input_audio``, ``file``; ``input_image``, ``input_file``).
    ``"text"``: as their placeholders in the message's text (``[image: image/png]``), no content
    part but text, for a server that takes text only (vLLM, llama.cpp or Ollama serving a model
    without vision refuses the request, and every later one of the run, the part staying in its
    history). ``None`` (the default): ``"send"`` to OpenAI itself (api.openai.com and its regional
    endpoints, eu.api.openai.com...), whose chat models take images, ``"text"`` to any other
    server, which is asked for parts only when you say it takes them, so an agent that worked
    before parts were sent keeps working.
    """

    supports_response_format = True
    """Structured output is asked for natively (``response_format`` / ``text.format``), falling
    back to JSON mode or instructions on a server that refuses it."""
    provider_name = "openai"
    """``gen_ai.provider.name`` in traces (the wire protocol; the server may be vLLM or Ollama)."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        client: openai.AsyncOpenAI | None = None,
        api: Literal["chat", "responses"] = "chat",
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
        parts: Literal["send", "text"] | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(
                "OpenAIChatModel needs a model name, e.g. OpenAIChatModel('gpt-4o-mini')"
            )
        if model.startswith(("http://", "https://")):
            # OpenAIChatModel("http://localhost:11434/v1", "llama3"): the URL first, as some
            # clients take it, was refused as a base_url of 'llama3'.
            raise ValueError(
                f"OpenAIChatModel's first argument is the model name, got a URL, {model!r}: "
                "pass the URL as base_url=, OpenAIChatModel('llama3', "
                "base_url='http://localhost:11434/v1')"
            )
        if api not in ("chat", "responses"):
            raise ValueError(f"api must be 'chat' or 'responses', not {api!r}")
        if parts is not None:
            _check_parts(parts)
        self.model_name = model
        self._api: Literal["chat", "responses"] = api
        if retry is not None and not isinstance(retry, RetryPolicy):
            # Read only when a call fails: an int (retry=3) was an AttributeError about
            # 'max_attempts' here, a dict one at the first failed call.
            raise TypeError(
                f"retry must be an adk.RetryPolicy, got {type(retry).__name__}; e.g. "
                "retry=RetryPolicy(max_attempts=3, initial_delay=0.5)"
            )
        self._retry = retry if retry is not None else RetryPolicy()
        self._timeout = _check_timeout(timeout)
        sdk_timeout = openai.not_given if self._timeout is None else self._timeout
        if client is not None:
            if isinstance(client, openai.OpenAI):
                # The synchronous client's calls block the event loop (every other run waits),
                # and hang for ever on a server served by that loop; its answer is then no
                # awaitable either.
                raise TypeError(
                    f"client= takes the asynchronous client, openai.AsyncOpenAI (or "
                    f"AsyncAzureOpenAI), not {type(client).__name__}: build it with the same "
                    "arguments"
                )
            if base_url is not None or api_key is not None:
                raise ValueError(
                    "pass either client= or base_url=/api_key=, not both: configure the client "
                    "you pass in with the URL and key it should use"
                )
            # with_options makes a copy sharing the connection pool: the timeout applies to this
            # model's requests only, the client keeps its own setting for its other users.
            given_key = getattr(client, "api_key", None)
            if isinstance(given_key, str) and given_key:  # (a key provider is called per request)
                _check_api_key(given_key, "the api_key of client=")
            self._client = client.with_options(max_retries=0, timeout=sdk_timeout)
            self._clients: LoopClients[openai.AsyncOpenAI] | None = None
        else:
            url, url_query = _resolve_base_url(base_url)
            key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
            if key:
                _check_api_key(key, "api_key" if api_key is not None else "OPENAI_API_KEY")
            if not key:
                if url is None:
                    raise ValueError(
                        "no API key for OpenAI: pass api_key= or set OPENAI_API_KEY (or point "
                        "base_url / OPENAI_BASE_URL at an OpenAI-compatible server)"
                    )
                key = _KEYLESS
            self._client_options: dict[str, Any] = {
                "api_key": key,
                # OpenAI's URL given when none is: the client would read OPENAI_BASE_URL itself,
                # and take one set empty as its URL where _resolve_base_url reads it as unset.
                "base_url": _OPENAI_URL if url is None else url,
                "max_retries": 0,
                "timeout": sdk_timeout,
            }
            if url_query:
                # sent with every request (the SDK joins the endpoint after the URL's query)
                self._client_options["default_query"] = url_query
            self._client = self._new_client()
            # The SDK's connection pool belongs to the loop it is used on: a client per loop, each
            # closed as its loop ends (``asyncio.run`` per request, from several threads too).
            self._clients = LoopClients(self._client, self._new_client, _close_client)
        self.base_url = str(self._client.base_url).rstrip("/")
        # How errors and repr show it: a gateway's credentials may be in the URL (user:pw@), a
        # key in its query, whose values are masked too.
        query = self._client_options.get("default_query") if client is None else None
        self._shown_url = redacted_url(
            f"{self.base_url}?{urlencode(query)}" if query else self.base_url
        )
        # The server what replies keep to be sent back goes back to (``KEPT_FROM``, with the
        # model: ``_origin_for``): its URL without credentials (a gateway's user:pw@, not the
        # server) and without the query; ``_origin`` is the tag of the server alone, which
        # messages saved before the model was in the tag carry.
        self._server_id = redacted_url(self.base_url).partition("?")[0]
        self._origin = server_tag(self._server_id)
        self._origins: tuple[str, str] = ("", "")  # (the model name, its KEPT_FROM) last made
        host = urlsplit(self.base_url).hostname or ""
        # OpenAI itself: api.openai.com and its regional endpoints (eu.api.openai.com, which the
        # openai client's data_residency= selects; mtls.api.openai.com).
        official = host == _OPENAI_HOST or host.endswith(_OPENAI_SUBDOMAIN)
        # What the adapter adds to a request on its own: the field max_tokens travels in, and
        # whether streams ask for usage. A server that refuses either changes them (_adapt).
        self._max_tokens_field = "max_completion_tokens" if official else "max_tokens"
        # ``parts=None``'s value, which setting None restores (``parts``'s setter).
        self._default_parts: Literal["send", "text"] = "send" if official else "text"
        self._parts: Literal["send", "text"] = parts if parts is not None else self._default_parts
        self._send_parts = self._parts == "send"
        self._stream_usage = True
        self._send_reasoning = False  # reasoning_content beside tool calls (thinking modes)
        self._short_ids = False  # tool-call ids as nine letters and digits (Mistral)
        self._fit_ids = False  # tool-call ids made to fit ^[a-zA-Z0-9_-]{1,64}$ (Anthropic)
        self._send_kept = True  # what replies' metadata keeps to be sent back (KEPT_FIELDS)
        self._formats = FormatFallback()  # how much of a schema response_format the server takes
        self._wrapped = WrappedSchemas()  # strict schemas sent wrapped, not walked per call
        self._closed = False
        self._runner = RetryRunner(
            self._retry,
            is_transient=self._is_transient,
            retry_after=_retry_after,
            status_of=_in_band_status_of,
        )
        if api == "chat":
            self._build = chat_request
            self._endpoint = "chat.completions"
        else:
            self._build = responses_request
            self._endpoint = "responses"

    def _origin_for(self, model: str) -> str:
        """The ``KEPT_FROM`` of ``model`` on this model's server: what a reply of it keeps to
        be sent back goes back to it alone (``model_name`` may be set between calls, so it is
        made per name, the last one kept)."""
        name, tag = self._origins
        if name != model or not tag:
            tag = server_tag(self._server_id, model)
            self._origins = (model, tag)
        return tag

    def _new_client(self) -> openai.AsyncOpenAI:
        """A client of this model's own (where it is made, then one per event loop), its HTTP
        client given the process's TLS context: loading the CA store per client cost ~18 ms of
        CPU each (``_openai_tls``)."""
        options = self._client_options
        return openai.AsyncOpenAI(
            **options, http_client=http_client(options["base_url"], options["timeout"])
        )

    async def _create(self, request: dict[str, Any]) -> Any:
        """``create`` of the Chat or Responses API, through the running loop's client: one this
        model made for the loop (see ``LoopClients``), or the client passed in, the caller's to
        manage."""
        if self._closed:  # aclose() ended a retry's backoff: no client is made for the attempt
            raise RuntimeError(_closed_message(self))
        clients = self._clients
        client = self._client if clients is None else (clients.get() or await clients.bind())
        create = client.chat.completions.create if self._api == "chat" else client.responses.create
        try:
            return await create(**request)
        except UnicodeEncodeError:
            # A lone surrogate (a model's "\ud800" escape, in a message sent back to it) has no
            # UTF-8 form, so the SDK could not write the request and the call failed without
            # reaching the server. Sent with each one as U+FFFD, what a UTF-8 decoder makes of
            # a broken sequence; only when it happens, so the common request is not walked.
            return await create(**_without_surrogates(request))

    def __repr__(self) -> str:
        return (
            f"OpenAIChatModel({self.model_name!r}, base_url={self._shown_url!r}, api={self._api!r})"
        )

    # -- options ---------------------------------------------------------------------------------
    # Options set after the model is made: ``parts`` and ``retry`` were read once, into what
    # the calls use (a flag, the retry runner), so assigning them changed the attribute alone;
    # they now take effect at the next call. ``api`` and ``timeout`` went into what the model
    # built (the request builder and decoder, the client), and an assignment sent a Chat
    # request to the Responses endpoint: refused, naming the way that works. ``model_name`` is
    # read per call, a plain attribute.

    @property
    def parts(self) -> Literal["send", "text"]:
        """How a message's parts are sent (see the class docstring); settable, checked, None
        restoring the default (as ``parts=None`` chooses it)."""
        return self._parts

    @parts.setter
    def parts(self, value: Literal["send", "text"] | None) -> None:
        if value is None:
            value = self._default_parts
        _check_parts(value)
        self._parts = value
        self._send_parts = value == "send"

    @property
    def api(self) -> Literal["chat", "responses"]:
        """The API the model calls, ``"chat"`` or ``"responses"``: fixed when the model is made."""
        return self._api

    @api.setter
    def api(self, value: object) -> None:
        raise _fixed("api", value)

    @property
    def timeout(self) -> float | None:
        """Each attempt's timeout, in seconds (None: the client's): fixed when the model is
        made, as its client is built with it."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: object) -> None:
        raise _fixed("timeout", value)

    @property
    def retry(self) -> RetryPolicy:
        """How transient failures are retried; settable (the next call retries by the new
        policy), as its fields are (``model.retry.max_attempts = 1``: read when a call fails)."""
        return self._retry

    @retry.setter
    def retry(self, value: RetryPolicy) -> None:
        if not isinstance(value, RetryPolicy):
            raise TypeError(
                f"retry must be an adk.RetryPolicy, got {type(value).__name__}; e.g. "
                "retry=RetryPolicy(max_attempts=3, initial_delay=0.5)"
            )
        self._retry = value
        # Sharing the backoffs of the calls running under the old one, which ``aclose`` wakes.
        self._runner = self._runner.with_policy(value)

    # -- calls -----------------------------------------------------------------------------------

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        """One model call; the assistant message with usage and ``metadata["finish_reason"]``."""
        self._check_open()
        return await self._send(messages, tools, options, False, self._create_message)

    async def _send(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: ModelOptions | None,
        stream: bool,
        call: Callable[[dict[str, Any], bool], Awaitable[_T]],
    ) -> _T:
        """``call`` with the request, retried by the retry policy, and sent again adapted while
        the server refuses something the call can go without (``_adapt``: a field, or some of a
        schema response format). What the call learns of the response format is remembered only
        once the server accepts it (``FormatFallback.learn``); a call that still fails raises the
        server's last answer, noting the first refusal (``_note_refusal``). ``call`` is told
        whether the request asked for the answer wrapped (``_wrapped``): it unwraps it."""
        request, wrapped = self._request(messages, tools, options, stream=stream)
        adapted: set[str] = set()
        changes: dict[str, Any] = {}  # what this call changed of what the adapter adds (_adapt)
        trial: FormatFallback | None = None  # what this call learns of the response format
        refusal: ModelError | None = None  # the first answer read as refusing it
        while True:
            try:
                result = await self._runner.run(
                    functools.partial(call, request, wrapped),
                    on_failure=functools.partial(self._failure_of, request),
                )
                break
            except ModelError as exc:
                if trial is None and options is not None and options.response_format is not None:
                    trial = FormatFallback()
                if not self._adapt(exc, request, options, adapted, changes, trial):
                    _note_refusal(exc, refusal)
                    if getattr(exc, "_adk_quoted_cause", False):
                        # The server's answer, which the chain holds whole, quoted this model's
                        # key or echoed the request (``_failure``): read by ``_adapt`` above,
                        # and left out of the traceback that logs and spans print.
                        raise exc from None
                    raise
                if refusal is None and trial is not None and trial.active:
                    refusal = exc
            request, wrapped = self._request(
                messages, tools, options, stream=stream, trial=trial, changes=changes
            )
        # The server accepted the call so changed: the model keeps the changes from now on. Not
        # before: a refusal misread (the adapted call failing for something else) would have
        # changed the model for its lifetime.
        if changes:
            self._learn(changes)
        if trial is not None:
            self._formats.learn(trial)  # the server accepted the call with that much less
        return result

    def _learn(self, changes: dict[str, Any]) -> None:
        """Keep what a call that succeeded changed of what the adapter adds (``_adapt``)."""
        for name, value in changes.items():
            if name not in _ADAPTED:  # pragma: no cover - _adapt writes these names only
                raise AssertionError(f"not an adaptation: {name!r}")
            setattr(self, f"_{name}", value)

    async def _create_message(self, request: dict[str, Any], wrapped: bool) -> Message:
        """The non-streaming call for ``request`` (``_send``'s ``call``), read as a message within
        the attempt: a 200 answer that is not a completion fails it (see ``_failure``), and one
        holding an error whose code is a transient status (OpenRouter's overloaded provider) is
        retried like that status. A ``wrapped`` answer's text is the value it wraps."""
        response = await self._create(request)
        if self._api == "chat":  # what it keeps is tagged with the model asked
            message = chat_message(
                response, self._own_key(), origin=self._origin_for(_model_asked(request))
            )
        else:
            message = responses_message(response, self._own_key())
        if wrapped:
            cut = message.metadata.get("finish_reason") == "length"
            message.content = unwrap_text(message.content, cut)
        return message

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        """The model's answer as it is produced; ``adk.messages.join_chunks`` rebuilds the message.

        The last chunk carries usage (Chat streams ask for ``include_usage``) and the finish reason.
        """
        self._check_open()
        sdk_stream, decoder, first, watch = await self._send(
            messages, tools, options, True, self._open_stream
        )
        sent = 1
        try:
            yield first
            try:
                async for event in sdk_stream:
                    chunk = decoder.feed(event)
                    if chunk is not None:
                        yield chunk
                        sent += 1
                if not decoder.finished:
                    # Ended with [DONE] and no finish reason (some servers send none): whole.
                    end = decoder.end() if watch is not None and watch.ended() else None
                    if end is None:
                        raise _StreamTruncated()
                    yield end
            except (
                openai.APIError,
                _StreamTruncated,
                ModelError,
                json.JSONDecodeError,
                UnicodeDecodeError,
                RecursionError,
            ) as exc:
                if decoder.finished and isinstance(exc, openai.APIConnectionError):
                    # The model had finished (a finish reason, response.completed): the answer is
                    # whole, and only the stream's end was lost with the connection (Chat's usage
                    # chunk and [DONE], a body's last bytes), as servers and proxies that close
                    # before ending the body do. Failing would throw a whole answer away.
                    return
                error = self._failure(exc, 1, after_chunks=sent, model=_extra_model(options))
                if getattr(error, "_adk_quoted_cause", False):
                    raise error from None  # the server's answer quoted a secret (``_failure``)
                raise error from exc
        finally:
            await sdk_stream.close()

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: ModelOptions | None,
        *,
        stream: bool,
        trial: FormatFallback | None = None,
        changes: dict[str, Any] | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """The request's keyword arguments, and whether it asks for the answer wrapped: a strict
        schema whose root strict mode refuses (a list, a union, a scalar) goes as the one property
        of an object (``_wrapped``), after the fallback's step, so a step without ``strict`` sends
        the schema as it is. ``changes``: what this call changed of what the adapter adds
        (``_adapt``), over the model's own."""
        wrapped = False
        if options is not None and options.response_format is not None:
            if self._formats.active or trial is not None:
                messages, options = self._formats.apply(messages, options, trial)
            spec = (
                json_schema_of(options.response_format)
                if options.response_format is not None
                else None
            )
            if spec is not None and wraps(spec):
                wire = {**spec, "schema": self._wrapped.of(spec["schema"])}
                options = options.model_copy(update={"response_format": wire})
                wrapped = True
        changed = changes or _UNCHANGED
        # the model this call asks for: options.extra travels as extra_body, over the request's
        asked = _extra_model(options)
        request = self._build(
            self.model_name,
            messages,
            tools,
            options,
            stream=stream,
            max_tokens_field=changed.get("max_tokens_field", self._max_tokens_field),
            stream_usage=changed.get("stream_usage", self._stream_usage),
            send_reasoning=changed.get("send_reasoning", self._send_reasoning),
            send_parts=self._send_parts,
            short_ids=changed.get("short_ids", self._short_ids),
            fit_ids=changed.get("fit_ids", self._fit_ids),
            send_kept=changed.get("send_kept", self._send_kept),
            origin=self._origin_for(self.model_name if asked is None else asked),
            server=self._origin,
        )
        return request, wrapped

    def _adapt(
        self,
        error: ModelError,
        request: dict[str, Any],
        options: ModelOptions | None,
        adapted: set[str],
        changes: dict[str, Any],
        trial: FormatFallback | None = None,
    ) -> bool:
        """Whether the call failed because the server refused a field the adapter added on its
        own, which is then changed for this call (True: send the call again), noted in
        ``changes``, which the model keeps for every later call once this one succeeded
        (``_send``): a refusal misread, the call sent changed failing for something else, leaves
        the model as it was.

        ``max_tokens`` travels as ``max_tokens`` except to api.openai.com, but OpenAI's reasoning
        models refuse it wherever they are served (Azure, a proxy), and a few servers refuse
        ``max_completion_tokens``; gateways and older Azure API versions refuse
        ``stream_options``. The server says so in a 400 (or 422) naming the field; the other
        spelling is used, or the stream goes without usage. Each field is changed once per call
        (``adapted``), so a server refusing both spellings fails instead of going round.

        The reverse too: DeepSeek's and Kimi's thinking modes refuse assistant tool-call messages
        sent without their ``reasoning_content``, which is then sent back (``chat_messages``).
        And Mistral refuses a tool-call id that is not nine letters and digits (another server's,
        pyadk's own ``call_0``), which then go as ``short_call_id`` makes them; Anthropic and AWS
        Bedrock (behind OpenRouter, LiteLLM or another proxy, Chat or Responses) refuse one but
        ``^[a-zA-Z0-9_-]{1,64}$`` (an earlier pyadk's ``call_0~1``, Kimi's ``functions.add:0``),
        and OpenAI itself one longer than 40 (Chat) or 64 (Responses' ``call_id``), which then
        go as ``wire_call_ids`` makes them (ids go as they are until then: Kimi K2
        reads its own back, and answers in the form the history's ids have); and a message
        field it does not know (422 ``extra_forbidden``), such as what replies of Gemini or
        OpenRouter keep to be sent back (``KEPT_FIELDS``), which is then left out.

        A schema ``response_format`` the server refuses goes one step down ``_structured``'s
        ladder (``strict`` left out, JSON mode, instructions only), for this call only: the step
        is noted in its ``trial``, which the model learns only once the call succeeded.
        """
        if self._closed:
            return False
        if (
            trial is not None
            and ("response_format" in request or "text" in request)
            and self._format_refused(error.__cause__, request, options, trial)
        ):
            # each refusal moves down a step; counted anyway, so nothing can make a call go round
            steps = sum(1 for done in adapted if done.startswith("response_format"))
            adapted.add(f"response_format {steps}")
            return steps < 3
        # What to change is read from the request the server refused, not from the model: calls
        # refused together (a service's first requests) each change the model the same way, and
        # the model the first one changed does not say what a later one was sent with.
        if (
            self._api == "chat"
            and "reasoning_content" not in adapted
            and _wants_reasoning_back(error.__cause__)
            and not _sent_reasoning(request)
        ):
            changes["send_reasoning"] = True
            adapted.add("reasoning_content")
            return True
        if (
            self._api == "chat"
            and "tool_call_ids" not in adapted
            and _wants_short_ids(error.__cause__)
            and not _sent_short_ids(request)
        ):
            changes["short_ids"] = True
            adapted.add("tool_call_ids")
            return True
        if (
            "fitting ids" not in adapted
            and _wants_fitting_ids(error.__cause__)
            and not _sent_fitting_ids(request)
        ):
            changes["fit_ids"] = True
            adapted.add("fitting ids")
            return True
        if (
            self._api == "chat"
            and "kept fields" not in adapted
            and _sent_kept(request)
            and _refuses_kept(error.__cause__)
        ):
            changes["send_kept"] = False
            adapted.add("kept fields")
            return True
        own = [field for field in _MAX_TOKENS_FIELDS if field in request]
        if "stream_options" in request:
            own.append("stream_options")
        refused = _refused_parameter(error.__cause__, own)
        if refused is None or refused in adapted or self._closed:
            return False
        if refused == "stream_options":
            changes["stream_usage"] = False
            adapted.add(refused)
        else:
            swapped = (
                "max_tokens" if refused == "max_completion_tokens" else "max_completion_tokens"
            )
            changes["max_tokens_field"] = swapped
            adapted.update(("max_tokens", "max_completion_tokens"))
        return True

    def _format_refused(
        self,
        exc: BaseException | None,
        request: dict[str, Any],
        options: ModelOptions | None,
        trial: FormatFallback,
    ) -> bool:
        """Whether a 400/422 answer refuses the schema response format (see ``_structured``).

        Also an error event a stream sent before its first chunk (``_adapt`` runs before any chunk
        reached the caller) with such a code: vLLM's V1 engine compiles the schema only once the
        stream has started, so its grammar backend's refusal comes as a 200 stream's first event."""
        if isinstance(exc, openai.APIStatusError):
            if exc.status_code not in (400, 422):
                return False
        elif not (
            isinstance(exc, openai.APIError)
            and isinstance(exc.body, dict)
            and str(exc.body.get("code")) in ("400", "422")
        ):
            return False
        body = exc.body
        param = body.get("param") if isinstance(body, dict) else None
        if isinstance(body, (dict, list)):
            text = _error_text(body)
        else:
            text = body if isinstance(body, str) else exc.message
        code = body.get("code") if isinstance(body, dict) else None
        refused = code in _REFUSAL_CODES or _REFUSAL.search(text) is not None
        return trial.refused(request, options, text, param, field_refused=refused)

    async def _open_stream(
        self, request: dict[str, Any], wrapped: bool
    ) -> tuple[
        Any,
        ChatStreamDecoder | ResponsesStreamDecoder | UnwrappingDecoder,
        MessageChunk,
        _DoneWatch | None,
    ]:
        """Open a stream and read up to its first chunk — the part of a stream that may be retried,
        because nothing has reached the caller yet. A ``wrapped`` answer's chunks carry the value
        it wraps. A Chat stream's ``[DONE]`` is watched for (``_DoneWatch``): a stream it ended
        without a finish reason, once a chunk reached the caller, is finished (``stream``)."""
        sdk_stream = await self._create(request)
        watch = _watch_done(sdk_stream) if self._api == "chat" else None
        inner: ChatStreamDecoder | ResponsesStreamDecoder = (
            ChatStreamDecoder(self._origin_for(_model_asked(request)), self._own_key())
            if self._api == "chat"
            else ResponsesStreamDecoder()
        )
        decoder = UnwrappingDecoder(inner) if wrapped else inner
        events = 0
        answered = False  # an event held a choice: the server began an answer
        try:
            while True:
                try:
                    event = await sdk_stream.__anext__()
                except StopAsyncIteration:
                    if watch is None or not watch.ended():
                        raise _ended_early(sdk_stream, events) from None
                    # Ended with [DONE] before any chunk: the server said the stream is over.
                    # Asked again, it would run (and bill) the prompt again for the same answer.
                    end = decoder.end() if answered else None
                    if end is None:
                        raise ModelError(
                            "the server ended the stream with [DONE] without an answer (no "
                            "event held a choice)"
                        ) from None
                    return sdk_stream, decoder, end, watch
                events += 1
                if not answered and watch is not None:  # (a Chat event: Responses' have none)
                    choices = getattr(event, "choices", None)
                    answered = type(choices) is list and bool(choices)
                chunk = decoder.feed(event)
                if chunk is not None:
                    return sdk_stream, decoder, chunk, watch
        except BaseException:
            await sdk_stream.close()
            raise

    # -- errors ----------------------------------------------------------------------------------

    def _is_transient(self, exc: BaseException, policy: RetryPolicy) -> bool:
        """Whether to retry: a transient failure (a status ``policy`` retries), unless the model
        was closed meanwhile (the failure is then the close cutting the call off, and a retry
        would meet a closed client)."""
        if self._closed or not _is_transient(exc, policy):
            return False
        hinted = _retry_after(exc)
        return hinted is None or hinted <= RETRY_AFTER_LIMIT

    def _failure_of(self, request: dict[str, Any], exc: Exception, attempts: int) -> Exception:
        """``_failure`` of a call sending ``request``, naming the model it asked for (read only
        when it failed)."""
        return self._failure(exc, attempts, model=_model_asked(request), request=request)

    def _failure(
        self,
        exc: Exception,
        attempts: int,
        *,
        after_chunks: int = 0,
        model: str | None = None,
        request: dict[str, Any] | None = None,
    ) -> Exception:
        """The error to raise for a call that failed for good. Errors that are not about the call
        (a bug, a bad argument caught by the SDK) pass through unchanged.

        A 200 answer that is malformed (a body or stream event that is not JSON, a completion
        without choices) is not retried: it is a server or proxy answering the wrong thing, which
        asking again rarely changes, and the message quotes what came instead. One holding an
        error whose code is a transient status is retried as that status is (``_is_transient``).
        ``model``: the model the call asked for (``_model_asked``), named in the error;
        ``request``, the request refused, whose tool a refusal naming ``tools[N]`` names."""
        model = self.model_name if model is None else model
        where = f"{self._endpoint} call to {self._shown_url} (model {model!r})"
        if after_chunks:
            where += f" failed mid-stream after {after_chunks} chunk(s):"
        else:
            where += " failed:"
        tries = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
        if self._closed and isinstance(
            exc, (openai.APIConnectionError, _StreamTruncated, RuntimeError)
        ):
            # aclose() closed the connections under the call (or, during a retry's backoff, the
            # client the next attempt needed)
            return _untyped(
                ModelError(f"{where} the model was closed (aclose()) while the call was running")
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            hinted = _retry_after(exc) if _is_transient(exc, self._retry) else None
            wait = (
                f" (the server asked to wait {hinted:g} s, longer than the "
                f"{RETRY_AFTER_LIMIT:g} s a call waits: not retried)"
                if hinted is not None and hinted > RETRY_AFTER_LIMIT
                else ""
            )
            if _told_not_to_retry(exc) and _is_transient_status(status, exc.body, self._retry):
                wait = " (not retried: the server's x-should-retry said false)"
            said, cut = self._bounded(_server_message(exc, self._own_key()))
            # A 404 is a model name the server does not have (OpenAI's "The model ... does not
            # exist") or a base_url off the server's API ("404 page not found", a gateway's
            # "Unknown path"): the server's words alone do not say which to check.
            check = (
                f" (check the model name, {model!r}, and that base_url, "
                f"{self._shown_url}, is where the server's OpenAI API starts: most serve it "
                "under /v1)"
                if status == 404
                else ""
            )
            named = _tool_named(said, request)
            error = self._quoting(
                ModelError(
                    f"{where} HTTP {status}: {said}{named}{tries}{wait}{check}",
                    status=status,
                    retry_after=_retry_after(exc),
                ),
                said,
                exc,
                cut,
            )
            if _told_not_to_retry(exc):  # for a retry seeing only this error (an action's)
                error._adk_not_retried = True  # type: ignore[attr-defined]  # see RetryPolicy
            return error
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(f"{where} the request timed out{tries}")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__
            if _illegal_header(cause):
                error = ModelError(
                    f"{where} a request header holds what HTTP cannot send (such as a line "
                    "break, another control character or a space at its end): the client's "
                    "api_key, a key its api_key provider gave, or one of its default_headers; "
                    f"the value is not shown{tries}"
                )
                error._adk_secret_cause = True  # type: ignore[attr-defined]  # see _raise_final
                return error
            detail = f"{type(cause).__name__}: {cause}" if cause is not None else exc.message
            return ModelError(f"{where} connection error ({detail}){tries}")
        if isinstance(exc, openai.APIError):  # an error event in a stream: body is its error
            body = exc.body
            if isinstance(body, str) and body.strip():
                # the error as text (Hugging Face's TGI: {"error": ..., "error_type": ...}),
                # which the SDK's message, "An error occurred during streaming", leaves out
                detail = f": {unkeyed(body, self._own_key())[:500]}"
            else:
                detail = error_detail(body, self._own_key())
            said, cut = self._bounded(_without_echo(f"{exc.message}{detail}"))
            return self._quoting(
                ModelError(f"{where} {said}{tries}", status=in_band_status(exc.body)),
                said,
                exc,
                cut,
            )
        if isinstance(exc, _StreamTruncated):
            return ModelError(f"{where} the stream ended before the model finished{tries}")
        if isinstance(exc, ModelError):  # reported inside a stream, or an unusable 200 answer
            return self._key_masked(
                ModelError(f"{where} {exc}{tries}", status=exc.status, retry_after=exc.retry_after)
            )
        if isinstance(exc, json.JSONDecodeError):  # the SDK parsing a body or stream event
            # the key masked before the cut, which would leave part of a key it went through
            doc = unkeyed(exc.doc, self._own_key())
            return self._key_masked(
                _untyped(
                    ModelError(
                        f"{where} the server's answer is not valid JSON ({exc.msg}): {doc[:200]!r}"
                    )
                )
            )
        if type(exc) is ValueError and _raised_by_json(exc):
            # The SDK parsing a body or stream event holding an integer past the digits Python
            # reads (4,300 by default): JSON all the same, so no JSONDecodeError.
            return _untyped(
                ModelError(f"{where} the server's answer holds a number too long to read: {exc}")
            )
        if isinstance(exc, UnicodeDecodeError):  # the SDK decoding a body or a stream's line
            return _untyped(
                ModelError(
                    f"{where} the server's answer is not valid UTF-8 ({exc.reason} at byte "
                    f"{exc.start}): {_around(exc.object, exc.start, self._own_key())!r}"
                )
            )
        if isinstance(exc, RecursionError):  # the SDK parsing JSON nested past Python's reach
            return _untyped(
                ModelError(f"{where} the server's answer is JSON nested too deeply to read ({exc})")
            )
        return exc

    def _key_masked(self, error: ModelError) -> ModelError:
        """``error``, which quotes a 200 answer that is no completion (an in-band ``error``
        object, its provider's raw answer, a body that is not JSON), with this model's API key
        masked, and marked so that its chain, holding the key too, is not printed with it. The
        decoders, and ``_failure`` for a body that is not JSON or UTF-8, mask the key before
        they cut what they quote (200 or 500 characters), given it: a key a cut went through
        is not found whole here."""
        key = self._own_key()
        if not quotes_key(str(error), key):
            return error
        masked = ModelError(
            unkeyed(str(error), key), status=error.status, retry_after=error.retry_after
        )
        if getattr(error, "_adk_untyped", False):
            _untyped(masked)
        masked._adk_quoted_cause = True  # type: ignore[attr-defined]  # see _send
        return masked

    def _own_key(self) -> str | None:
        """This model's API key, to mask where a server quotes it (None: none to mask: no key,
        the placeholder sent to a server without auth or one a local server's docs give
        (``_PLACEHOLDER_KEYS``, any case), or one under ``SHORTEST_KEY`` characters: none is a
        secret, and each would mask words and numbers)."""
        given = getattr(self._client, "api_key", None)
        if not isinstance(given, str) or len(given) < SHORTEST_KEY:
            return None
        if len(given) <= _PLACEHOLDER_LONGEST and given.lower() in _PLACEHOLDER_KEYS:
            return None  # (a real key, longer, is not lowered at every call)
        return given

    def _bounded(self, said: str) -> tuple[str, bool]:
        """What a server said, to quote: cut to ``_SAID_SHOWN`` characters (Gemini answers each
        unknown field with a line of its own, thousands for a long conversation), the API key
        masked first so that a cut through it leaves none of it; and whether it was cut."""
        if len(said) <= _SAID_SHOWN:
            return said, False
        said = unkeyed(said, self._own_key())
        shown = said[:_SAID_SHOWN]
        return f"{shown}... ({len(said) - len(shown)} more characters not shown)", True

    def _quoting(
        self, error: ModelError, said: str, exc: openai.APIError, cut: bool = False
    ) -> ModelError:
        """``error``, which quotes what the server said (``said``), with this model's API key
        masked: a server refusing a key may quote it whole ("Incorrect API key provided: sk-...";
        OpenAI masks all but its ends, gateways and self-hosted servers do not), and the text
        reaches RunErrors, logs and span status. Marked so that the chain, whose SDK error holds
        the server's whole answer, is not printed with it when the key was quoted, or when the
        answer held more than was shown (``_without_echo``: a request echoed back; ``cut``: a
        long answer, ``_bounded``)."""
        key = self._own_key()
        if quotes_key(said, key):  # (the rest of the text is ours: URL, model name)
            error = ModelError(
                unkeyed(str(error), key), status=error.status, retry_after=error.retry_after
            )
        elif not cut and not quotes_key(str(exc), key) and _ECHOED_INPUT.search(str(exc)) is None:
            return error
        error._adk_quoted_cause = True  # type: ignore[attr-defined]  # see _send
        return error

    # -- lifecycle -------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(_closed_message(self))

    async def aclose(self) -> None:
        """Close the HTTP connections (only of a client this model created, whose calls still
        running then fail with ``ModelError``, not retried). Later calls raise ``RuntimeError``.
        The connections of other loops still running (other threads) close as those loops end."""
        if self._closed:
            return
        self._closed = True
        self._runner.wake()  # a call waiting out a retry's backoff fails now
        if self._clients is not None:
            await self._clients.aclose()


async def _close_client(client: openai.AsyncOpenAI) -> None:
    await client.close()


# What ``_adapt`` may change for a call, which ``_learn`` keeps: ``OpenAIChatModel``'s attributes
# of these names, ``_`` before each.
_ADAPTED = frozenset(
    {"max_tokens_field", "stream_usage", "send_reasoning", "short_ids", "fit_ids", "send_kept"}
)
_UNCHANGED: dict[str, Any] = {}  # ``_request``'s changes when there are none (never written)


def _note_refusal(error: ModelError, refusal: ModelError | None) -> None:
    """Note on the error a call fails with the first answer that was read as refusing its
    response format, when there was one. The error raised is the last: the server's answer to the
    request that carried the least of the format, so about what stood in the way once the format
    no longer did (and, when the refusal was an unrelated error misread, the same error again)."""
    if refusal is not None and refusal is not error:
        error.add_note(
            f"(the call was sent again with less of its schema response_format after the "
            f"server's first answer, read as refusing it: {refusal})"
        )


def _without_surrogates(value: Any) -> Any:
    """``value`` (a request's keyword arguments) with each lone surrogate in its text replaced by
    U+FFFD, and a surrogate pair that JSON escapes left as two code units joined into its
    character; the dicts, lists and tuples it holds are copied, anything else kept as it is."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_without_surrogates(item) for item in value)
    return value


def _check_parts(parts: object) -> None:
    """Refuse a ``parts`` that is not one (the constructor's and the setter's check)."""
    if parts not in ("send", "text"):
        raise ValueError(
            "parts must be 'send' (images, sounds and files as content parts), 'text' (as "
            "their placeholder text, for a text-only server) or None (the default: 'send' "
            f"to api.openai.com, 'text' elsewhere), not {parts!r}"
        )


def _fixed(name: str, value: object) -> AttributeError:
    """The refusal of setting ``name``, fixed when an ``OpenAIChatModel`` is made."""
    return AttributeError(
        f"OpenAIChatModel.{name} is fixed when the model is made (its client and requests are "
        f"built for it): make a new OpenAIChatModel(..., {name}={value!r}) instead of setting it"
    )


def _check_timeout(timeout: float | None) -> float | None:
    """``timeout`` if it is None or a positive number of seconds; a clear error otherwise (the SDK
    would take 0 or a negative number and fail every call with a confusing timeout)."""
    if timeout is None:
        return None
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        raise ValueError(
            f"timeout must be a positive number of seconds, or None for the client's default; "
            f"got {timeout!r}"
        )
    return float(timeout)


def _resolve_base_url(base_url: str | None) -> tuple[str | None, dict[str, str]]:
    """The API root to use (see the class docstring for the rule), None meaning OpenAI's
    default, and the query it came with, to send with every request.

    Why the query apart: the SDK joins the endpoint to the URL as text, after its query
    (``/v1/?api-version=2024-10-21chat/completions``), so a URL with one (Azure's
    ``api-version``, a gateway's key) sent every call to a path no server has. Kept as the
    client's ``default_query``, it goes with every request; a key given twice, which the SDK
    would send under another name (``key[]``), is refused. A fragment, which HTTP never sends,
    is dropped."""
    source = "base_url"
    if base_url is None:
        base_url = os.environ.get("OPENAI_BASE_URL") or None
        source = "OPENAI_BASE_URL"
        if base_url is None:
            return None, {}
    parts = urlsplit(base_url.strip())
    query: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in query:  # the SDK would send it as key[]=...: another name
            raise ValueError(
                f"{source} gives the query parameter {key!r} more than once, which the client "
                f"cannot send as given: give it once; got {_masked(base_url)!r}"
            )
        query[key] = value
    url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(
            f"{source} must be an http(s) URL such as 'http://localhost:8000/v1'; got "
            f"{_masked(base_url)!r}"
        )
    path = parts.path
    for suffix in _ENDPOINT_SUFFIXES:
        if path.endswith(suffix):
            root = _masked(url[: len(url) - len(suffix)])
            hint = f"write {root!r}" + (" with its query" if query else "")
            raise ValueError(
                f"{source} should be the API root, not the {suffix} endpoint: {hint} "
                "(the client appends the endpoint itself)"
            )
    if not path:
        url += "/v1"
    return url, query


def _masked(url: str) -> str:
    """A ``base_url`` to quote in an error: with its credentials masked (``redacted_url``), and,
    for one that is no URL (a scheme left out: ``user:pw@host/v1``), everything up to its last
    ``@``."""
    head, at, tail = url.rpartition("@")
    if at and "://" not in head:
        return f"***@{tail}"
    return redacted_url(url)


def _around(data: bytes, at: int, key: str | None) -> bytes:
    """Up to 100 bytes of ``data`` either side of ``at`` (where it stopped being UTF-8), ``key``
    masked before they are cut: the key is ASCII (``_check_api_key``) and the byte at ``at`` is
    not, so no key goes across ``at``, and each side is masked apart."""
    before, after = data[:at], data[at:]
    return unkeyed_bytes(before, key)[-100:] + unkeyed_bytes(after, key)[:100]


def _ended_early(sdk_stream: Any, events: int) -> Exception:
    """Why a stream ended before its first chunk: cut short (transient, retried), or, when not one
    event arrived and the server did not even answer with an event stream, the wrong kind of answer
    (a proxy's page, a server ignoring ``stream``), which is not retried."""
    response = getattr(sdk_stream, "response", None)
    kind = response.headers.get("content-type", "") if response is not None else ""
    if events or not kind or kind.startswith("text/event-stream"):
        return _StreamTruncated()
    return ModelError(f"the server answered a stream request with {kind!r}, not an event stream")


def _untyped(error: ModelError) -> ModelError:
    """``error``, marked for ``adk.tracing`` to type as ``ModelError``, not by the exception it is
    raised from: that of a 200 answer the adapter could not read is which Python parser failed
    (``UnicodeDecodeError``, ``RecursionError``, ``JSONDecodeError``), and that of a model closed
    under its call the connection error the close caused, which would read as an unreachable
    provider (``APIConnectionError``)."""
    error._adk_untyped = True  # type: ignore[attr-defined]
    return error


def _raised_by_json(exc: BaseException) -> bool:
    """Whether ``exc`` was raised parsing JSON (its innermost frame is the ``json`` package's:
    the C scanner raises from its caller's frame)."""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_globals.get("__name__") in ("json.decoder", "json.scanner")


def _illegal_header(cause: BaseException | None) -> bool:
    """Whether a connection error's cause is h11 refusing a header value (httpx's
    ``LocalProtocolError: Illegal header value b'Bearer sk-...\\n'``): its text quotes the value,
    an API key as often as not, which the error must not carry into events, logs and traces."""
    while cause is not None:
        if type(cause).__name__ == "LocalProtocolError" and "Illegal header value" in str(cause):
            return True
        cause = cause.__cause__
    return False


def _is_transient(exc: BaseException, policy: RetryPolicy) -> bool:
    if _told_not_to_retry(exc):
        return False
    if isinstance(exc, openai.APIError) and _failed_generation(exc.body):
        # Asked again while the policy retries statuses at all: each retry is a generation
        # billed, which a user who turned status retries off (an empty set) did not ask for.
        return policy.retry_on_status is None or bool(policy.retry_on_status)
    if isinstance(exc, openai.APIStatusError):
        return _is_transient_status(exc.status_code, exc.body, policy)
    # APITimeoutError is an APIConnectionError: a timed-out attempt is retried like a dropped one.
    if isinstance(exc, openai.APIConnectionError):
        return not _illegal_header(exc.__cause__)  # the same header would be refused again
    if isinstance(exc, _StreamTruncated):
        return True
    # A stream's error event before its first chunk (the retry runner sees no later one), read as
    # the status it stands for: a server that had sent its 200 headers before the engine failed
    # or the upstream refused (vLLM, LiteLLM's proxy, Responses' response.failed) said the same as
    # an HTTP 503 or 429 would, and nothing has reached the caller yet.
    if isinstance(exc, openai.APIError):  # (not a status error: those were read above)
        status = in_band_status(exc.body)
        return status is not None and _is_transient_status(status, exc.body, policy)
    # A 200 body holding an error (OpenRouter), or a Responses stream's failure event: the code it
    # came with, read as a status by the wire format's reader.
    if isinstance(exc, ModelError) and exc.status is not None:
        return _is_transient_status(exc.status, None, policy)
    return False


def _in_band_status_of(exc: BaseException) -> int | None:
    """The status an error event inside a stream stands for (the SDK's bare ``APIError``, whose
    body is the event's error), as ``_is_transient`` reads it to retry it: the attempt's
    ``adk.model.retry`` event says ``"500"`` for vLLM's ``{"error": {"code": 500}}``, as the
    ``chat`` span says when such an error fails the call, not ``APIError``."""
    if isinstance(exc, openai.APIError) and not isinstance(
        exc, (openai.APIStatusError, openai.APIConnectionError)
    ):
        return in_band_status(exc.body)
    return None


def _failed_generation(body: object) -> bool:
    """Whether an error is a server refusing to pass on what the model generated, not the
    request: Groq's 400 ``tool_use_failed`` ("Failed to call a function. Please adjust your
    prompt."), a tool call its parser could not read (often with Llama and Kimi models,
    intermittently: pydantic/pydantic-ai#2774, pipecat-ai/pipecat#1168), sent as the answer's
    status or, streamed, as an error event. The same request samples anew and often succeeds,
    so it is retried whatever ``retry_on_status`` says of 400 (which the request itself would
    get again), as long as it retries some status: an empty set, status retries turned off,
    fails it at once, as each retry is a generation billed."""
    return isinstance(body, dict) and body.get("code") == "tool_use_failed"


def _is_transient_status(status: int, body: object, policy: RetryPolicy) -> bool:
    if status == 429 and _is_quota(body):
        return False  # a billing limit: asking again in seconds does not mend it
    return policy._retries_status(status)


def _is_quota(body: object) -> bool:
    """Whether an error body is OpenAI's (and Azure's) exhausted quota, sent with status 429 like a
    rate limit."""
    return isinstance(body, dict) and "insufficient_quota" in (body.get("code"), body.get("type"))


def _told_not_to_retry(exc: BaseException) -> bool:
    """Whether an HTTP error came with ``x-should-retry: false``: the header the openai and
    anthropic clients obey (and which, their retries being off, only this adapter reads), sent by
    a server, or a gateway that already retried or failed over upstream, to say another attempt
    would fail alike. (``true`` adds nothing to the policy: the status decides, as
    ``retry_on_status`` says.)"""
    if not isinstance(exc, openai.APIStatusError):
        return False
    said = exc.response.headers.get("x-should-retry")
    return isinstance(said, str) and said.strip().lower() == "false"


def _retry_after(exc: BaseException) -> float | None:
    if isinstance(exc, openai.APIStatusError):
        return retry_after_seconds(exc.response.headers)
    return None


# How servers say a request field is not one they take (OpenAI "Unsupported parameter: 'x'",
# gateways "Unknown parameter", Azure "Unrecognized request argument supplied: x", pydantic-based
# servers "Extra inputs are not permitted") — not a field whose value is wrong ("max_tokens is too
# large"), which asking with the other spelling would not mend.
_REFUSAL = re.compile(
    r"(?:unsupported|unknown|unrecognized|unrecognised)\s+(?:request\s+)?"
    r"(?:parameter|argument|field)|extra inputs are not permitted|extra_forbidden",
    re.IGNORECASE,
)
_REFUSAL_CODES = frozenset({"unsupported_parameter", "unknown_parameter"})


# DeepSeek: "The `reasoning_content` in the thinking mode must be passed back to the API."; Kimi:
# "thinking is enabled but reasoning_content is missing in assistant tool call message at index 3".
_REASONING_WANTED = re.compile(
    r"reasoning_content\W.{0,60}(?:must be passed back|is missing)", re.IGNORECASE
)


_MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")


# Mistral's validator (mistral_common), behind its API and vLLM's ``--tokenizer-mode mistral``:
# "Tool call id was call_0 but must be a-z, A-Z, 0-9, with a length of 9."
_SHORT_IDS_WANTED = re.compile(
    r"tool call id was .{0,300}?must be a-z, a-z, 0-9, with a length of 9", re.IGNORECASE
)


def _wants_short_ids(exc: BaseException | None) -> bool:
    """Whether a server's answer refuses a tool-call id for not being nine letters and digits
    (Mistral's 400; OpenRouter's, with Mistral's answer in ``metadata.raw``; a local server's
    500, once its retries ran out)."""
    return _refusal_says(exc, _SHORT_IDS_WANTED)


def _sent_short_ids(request: dict[str, Any]) -> bool:
    """Whether every tool-call id a Chat request carried already was nine letters and digits:
    then making them so cannot mend what the server refused."""
    for message in request.get("messages", ()):
        ids = [call["id"] for call in message.get("tool_calls", ())]
        if message.get("role") == "tool":
            ids.append(message.get("tool_call_id", ""))
        if any(_short_call_id(i) != i for i in ids):
            return False
    return True


# Anthropic's 400, as OpenRouter or LiteLLM pass it on: "messages.1.content.0.tool_use.id: String
# should match pattern '^[a-zA-Z0-9_-]+$'" (or "... should have at most 64 characters", and
# tool_result.tool_use_id alike); AWS Bedrock's: "Value '...' at 'messages.1.member.content.1.
# member.toolUse.toolUseId' failed to satisfy constraint: Member must satisfy regular expression
# pattern: [a-zA-Z0-9_-]+" (or "... must have length less than or equal to 64"). OpenAI's own, of
# an id's length (at most 40 in a Chat request, 64 as a Responses call_id): "Invalid
# 'messages[2].tool_calls[0].id': string too long. Expected a string with maximum length 40, ..."
# (or 'messages[3].tool_call_id', 'input[5].call_id'); ids made to fit are 35 at most.
_FITTING_IDS_WANTED = re.compile(
    r"(?:tool_use\.id|tool_use_id)\W{1,4}string should (?:match pattern|have at most 64)"
    r"|tooluseid\W.{0,80}?failed to satisfy constraint"
    r"|'(?:messages\[\d+\]\.(?:tool_calls\[\d+\]\.id|tool_call_id)|input\[\d+\]\.call_id)'"
    r"\W{1,4}string too long",
    re.IGNORECASE,
)


def _wants_fitting_ids(exc: BaseException | None) -> bool:
    """Whether a server's answer refuses a tool-call id for not being letters, digits, ``_`` and
    ``-``, 1 to 64 of them (Anthropic's or Bedrock's 400, also behind a proxy), or for its length
    (OpenAI's own 400)."""
    return _refusal_says(exc, _FITTING_IDS_WANTED)


def _refusal_says(exc: BaseException | None, words: re.Pattern[str]) -> bool:
    """Whether ``exc`` is a server's answer whose body (its JSON as text) holds ``words``."""
    if not isinstance(exc, openai.APIStatusError):
        return False
    body = exc.body
    text = json.dumps(body, ensure_ascii=False) if isinstance(body, (dict, list)) else str(body)
    return words.search(text) is not None


def _sent_fitting_ids(request: dict[str, Any]) -> bool:
    """Whether every tool-call id a Chat or Responses request carried fitted already: then making
    them fit cannot mend what the server refused."""
    ids: list[Any] = []
    for message in request.get("messages", ()):
        ids.extend(call["id"] for call in message.get("tool_calls", ()))
        if message.get("role") == "tool":
            ids.append(message.get("tool_call_id", ""))
    items = request.get("input", ())
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("type") in ("function_call", "function_call_output"):
            ids.append(item.get("call_id", ""))
    return all(isinstance(i, str) and fits_wire(i) for i in ids)


_KEPT_NAMED = re.compile(rf"\b(?:{'|'.join(KEPT_FIELDS)})\b")


def _sent_kept(request: dict[str, Any]) -> bool:
    """Whether a Chat request carried any of ``KEPT_FIELDS`` (on a message or a tool call)."""
    for message in request.get("messages", ()):
        if "reasoning_details" in message:
            return True
        if any("extra_content" in call for call in message.get("tool_calls", ())):
            return True
    return False


def _refuses_kept(exc: BaseException | None) -> bool:
    """Whether a 400/422 answer refuses one of ``KEPT_FIELDS`` as a field the server does not
    take in a message (Mistral: ``extra_forbidden``, "Extra inputs are not permitted", its loc
    naming the field; Gemini: 'Unknown name "reasoning_details" at ...: Cannot find field.', a
    list body; others: "unknown/unrecognized ... field" or "additional properties are not
    allowed" naming it)."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422):
        return False
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), dict):
        body = body["message"]  # Mistral's validation errors: {"message": {"detail": [...]}}
    text = _error_text(body) if isinstance(body, (dict, list)) else str(body)
    # each error's echoed input left out of the text: a ``detail``'s by ``_error_text``, one in
    # a message's text (a FastAPI server's errors listed as an OpenAI error's message) cut here
    text = _without_echo(text)
    if _KEPT_NAMED.search(text) is None:
        return False
    lowered = text.lower()
    return (
        _REFUSAL.search(text) is not None
        or "additional properties" in lowered
        or "cannot find field" in lowered
    )


def _sent_reasoning(request: dict[str, Any]) -> bool:
    """Whether a Chat request carried reasoning back (``chat_messages``' ``send_reasoning``)."""
    return any("reasoning_content" in message for message in request.get("messages", ()))


def _wants_reasoning_back(exc: BaseException | None) -> bool:
    """Whether a 400 answer refuses a conversation for leaving out the reasoning it came with."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code != 400:
        return False
    body = exc.body
    text = json.dumps(body, ensure_ascii=False) if isinstance(body, dict) else str(body)
    return _REASONING_WANTED.search(text) is not None


def _refused_parameter(exc: BaseException | None, fields: Sequence[str]) -> str | None:
    """Which of ``fields`` a 400/422 answer refuses as a field the server does not take: the
    error's ``param`` (OpenAI, Azure), else the first of them the message names beside words of
    refusal. None when the answer is about something else."""
    if not fields or not isinstance(exc, openai.APIStatusError):
        return None
    if exc.status_code not in (400, 422):
        return None
    body = exc.body
    if isinstance(body, dict):
        param, code = body.get("param"), body.get("code")
        text = _error_text(body)
        if param in fields and (code in _REFUSAL_CODES or _REFUSAL.search(text)):
            return str(param)
    else:
        text = body if isinstance(body, str) else exc.message
    if not _REFUSAL.search(text):
        return None
    named = [
        (found.start(), name)
        for name in fields
        if (found := re.search(rf"\b{name}\b", text)) is not None
    ]
    return min(named)[1] if named else None


def _error_text(body: dict[str, Any] | list[Any]) -> str:
    """An error body as text to read for what it refuses, without what FastAPI-based servers (vLLM,
    LiteLLM) echo of the request: each validation error's ``input`` is the value validated — for a
    model-level validator the whole request, response format, schema and messages with it — and
    never says why it failed (``loc`` and ``msg`` do)."""
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(body, dict) and isinstance(detail, list):
        kept = [
            {key: value for key, value in item.items() if key != "input"}
            if isinstance(item, dict)
            else item
            for item in detail
        ]
        body = {**body, "detail": kept}
    return json.dumps(body, ensure_ascii=False)


# Where a pydantic validation error, as text, begins to quote the value it validated: FastAPI-based
# servers (vLLM, LiteLLM) answer a model-level validator's failure with the whole request as its
# ``input`` (``[{'type': ..., 'loc': ..., 'msg': ..., 'input': {... 'messages': ...}}]``), in
# ``detail`` or as an OpenAI error's ``message``.
_ECHOED_INPUT = re.compile(r"""[{,]\s*['"]input['"]\s*:""")


def _without_echo(text: str) -> str:
    """``text`` up to where it quotes the request a server echoed back (``_ECHOED_INPUT``): the
    conversation, which errors, logs and spans must not carry (content is recorded only when
    captured), and which never says why the request failed (``loc`` and ``msg``, before it, do)."""
    found = _ECHOED_INPUT.search(text)
    if found is None:
        return text
    listed = _listed_errors(text)
    if listed is not None:
        return listed
    return f"{text[: found.start()]}, ... (the request the server echoed is not shown)"


# How much of what a server said a ModelError quotes (``OpenAIChatModel._bounded``).
_SAID_SHOWN = 2000

# The longest text read as a list of validation errors (``_listed_errors``); a longer one is cut.
_ERRORS_READ = 256 * 1024
_ERRORS_SHOWN = 1000  # of the errors' text, without their inputs (a union's can be long)
# FastAPI's newer text of a RequestValidationError: this line, then one error's repr a line.
_ERRORS_HEAD = re.compile(r"\d+ validation errors?:")


def _listed_errors(text: str) -> str | None:
    """``text``, a server's message that is wholly a list of pydantic validation errors (vLLM sends
    ``str()`` of FastAPI's: the list's repr, or a count's line and then one error's repr a line),
    as each error's type, location and reason, without the ``input`` each quotes; None if it is
    not that. Cut where the first ``input`` begins (``_without_echo``), the text would say why
    the first error failed and not the others: a message's union refused lists every branch, the
    first seldom the one that explains. Read as Python literals (``ast.literal_eval``: no code
    runs); an error that is not one (a ``ctx`` holding a ``ValueError``) leaves it to the cut."""
    if len(text) > _ERRORS_READ:
        return None
    head, _, rest = text.strip().partition("\n")
    if head.startswith("["):
        items, shown = [text.strip()], ""
    elif _ERRORS_HEAD.fullmatch(head.strip()):
        items = [line.strip() for line in rest.splitlines() if line.strip().startswith("{")]
        shown = f"{head.strip()} "
    else:
        return None
    errors: list[dict[str, Any]] = []
    for item in items:
        try:
            value = ast.literal_eval(item)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None
        for error in value if isinstance(value, list) else [value]:
            if not isinstance(error, dict) or not isinstance(error.get("msg"), str):
                return None
            errors.append({key: error[key] for key in ("type", "loc", "msg") if key in error})
    if not errors:
        return None
    said = str(errors)
    if len(said) > _ERRORS_SHOWN:
        said = f"{said[:_ERRORS_SHOWN]}..."
    return f"{shown}{said} (the request the server echoed is not shown)"


def _server_message(exc: openai.APIStatusError, key: str | None) -> str:
    """What the server said in its error answer; ``key`` (the model's API key) masked before
    the cuts to 500 characters here, which would leave part of a key they went through for
    ``_bounded`` and ``_quoting`` not to find."""
    body = exc.body
    if isinstance(body, list) and body and isinstance(body[0], dict):
        # Gemini's OpenAI endpoint: [{"error": {"code": 400, "message": ..., "status": ...}}],
        # which the SDK keeps whole and names only "Error code: 400"
        error = body[0].get("error")
        if isinstance(error, dict):
            body = error
    if isinstance(body, dict):
        message = body.get("message")
        if isinstance(message, str) and message:
            return _without_echo(message + error_detail(body, key))
        detail = body.get("detail")  # FastAPI-style servers (vLLM validation errors)
        if detail is None and isinstance(message, dict):
            # Mistral: {"object": "error", "message": {"detail": [...]}, "type": ...}
            detail = message.get("detail")
        if isinstance(detail, list):
            detail = [
                {key: value for key, value in item.items() if key != "input"}
                if isinstance(item, dict)
                else item
                for item in detail
            ]
        if detail:
            return _without_echo(unkeyed(str(detail), key)[:500])
    if isinstance(body, str) and body:
        return _without_echo(unkeyed(body, key)[:500])
    return _without_echo(exc.message)


def _closed_message(model: OpenAIChatModel) -> str:
    """Why a closed model refuses a call: most often a Runner was closed (``async with runner:``)
    and its agents, the model with them, were then run by another runner."""
    return (
        f"{model!r} is closed: its aclose() ran, or that of a Runner whose agents use it "
        "(async with runner: closes every model of its agents that nothing else holds open); "
        "keep one runner open for as long as the agents run (or hold the model open around "
        "the runners made per request: async with model:), or make a new model"
    )


def _extra_model(options: ModelOptions | None) -> str | None:
    """The model a call's ``options.extra`` names (sent as ``extra_body``, over the request's
    own), or None."""
    asked = options.extra.get("model") if options is not None and options.extra else None
    return asked if isinstance(asked, str) else None


_TOOL_PLACE = r"\btools\[(\d{1,4})\]"


def _tool_named(said: str, request: dict[str, Any] | None) -> str:
    """`` (tools[3] is tool 'search')`` for a refusal that places what it refuses by the tool's
    index in the request (OpenAI's "Invalid 'tools[3].function.description': string too long",
    its 1,024-character limit on a description, a docstring's summary easily past it), which
    the user, who gave the tools as functions, could only count out; else ``""``."""
    found = re.search(_TOOL_PLACE, said) if request is not None else None
    tools = request.get("tools") if request is not None else None
    if found is None or not isinstance(tools, list) or int(found.group(1)) >= len(tools):
        return ""
    entry = tools[int(found.group(1))]
    if not isinstance(entry, dict):
        return ""
    inner = entry.get("function")  # Chat's shape; the Responses API's names it in the entry
    name = (inner if isinstance(inner, dict) else entry).get("name")
    return f" ({found.group(0)} is tool {name!r})" if isinstance(name, str) else ""


def _model_asked(request: dict[str, Any]) -> str:
    """The model ``request`` asks for: its ``extra_body``'s (a call's ``options.extra``, which
    the SDK sends over the request's own fields) when that names one, else its own."""
    extra = request.get("extra_body")
    asked = extra.get("model") if extra else None
    return asked if isinstance(asked, str) else str(request["model"])
