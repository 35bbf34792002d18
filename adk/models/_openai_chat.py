"""pyadk messages and options to and from the Chat Completions wire format (``/chat/completions``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from ..messages import (
    Message,
    MessageChunk,
    Role,
    ToolCall,
    ToolCallChunk,
    _old_unique_call_id,
    _unique_call_ids,
    parts_as_text,
)
from ..tools.base import ToolSpec
from ._openai_common import (
    arguments_text,
    base62,
    chat_part,
    content_parts,
    error_detail,
    field_of,
    function_choice_name,
    identity_of,
    ids_as_sent,
    in_band_status,
    json_schema_of,
    reasoning_of,
    require_tool_call_id,
    response_identity,
    results_in_call_order,
    text_of,
    unkeyed,
    unknown_role,
    unusable_reply,
    usage_of,
    without_tool_fields,
)
from .base import ModelError, ModelOptions

_PLAIN_ROLES = {Role.SYSTEM: "system", Role.USER: "user"}
# Enum members read once: ``Role.ASSISTANT`` is a metaclass lookup (~900 instructions in CPython
# 3.11) and the conversion compares every message of every request.
_ASSISTANT, _TOOL, _USER = Role.ASSISTANT, Role.TOOL, Role.USER


EXTRA_CONTENT = "tool_call_extra_content"
"""The ``Message.metadata`` key of what a server put on its tool calls beside the standard
fields for the client to send back with them, by call id: Gemini's ``extra_content`` (its
thought signature, ``{"google": {"thought_signature": ...}}``), which Gemini 3 requires back
with each call of the current turn and refuses the request without (HTTP 400)."""

REASONING_DETAILS = "reasoning_details"
"""The ``Message.metadata`` key of OpenRouter's ``reasoning_details`` of a reply (its reasoning
as entries: ``reasoning.text`` signed, ``reasoning.summary``, ``reasoning.encrypted``), sent
back on the message: OpenRouter requires them back for Gemini 3 and Claude's thinking in a tool
loop and refuses the request without them (HTTP 400)."""

_JOINED = frozenset({"reasoning.text", "reasoning.summary"})  # entries streamed in pieces


def _add_details(into: list[dict[str, Any]], pieces: list[Any]) -> None:
    """``pieces``, one streamed delta's ``reasoning_details``, joined into ``into``: a piece of
    the type and ``index`` of the entry before it, a text or a summary, continues that entry (its
    ``text`` / ``summary`` appended, a field it lacks taken: the signature, streamed after the
    text); any other piece is an entry of its own. OpenRouter streams an entry's text a piece
    at a time, every piece at ``index`` 0, and a client sending the pieces back as entries
    breaks the signature (what a plain answer carries is one entry). An entry whose signature
    came is whole: a piece bringing text or a signature after it, or another ``id``, begins the
    next entry (a reply's reasoning in several signed blocks, all at ``index`` 0)."""
    for piece in pieces:
        if not isinstance(piece, dict):
            continue
        last = into[-1] if into else None
        kind = piece.get("type")
        if (
            last is not None
            and kind in _JOINED
            and last.get("type") == kind
            and last.get("index") == piece.get("index")
            and not _begins_another(last, piece)
        ):
            for key, value in piece.items():
                if key in ("text", "summary") and isinstance(value, str):
                    last[key] = (last.get(key) or "") + value
                elif last.get(key) is None:
                    last[key] = value
        else:
            into.append(dict(piece))


def _begins_another(last: dict[str, Any], piece: dict[str, Any]) -> bool:
    """Whether ``piece``, of the type and index of the ``last`` entry, begins another entry: it
    names another ``id``, or ``last`` is signed (whole) and ``piece`` brings text or a
    signature."""
    named, last_id = piece.get("id"), last.get("id")
    if named is not None and last_id is not None and named != last_id:
        return True
    if last.get("signature") is None:
        return False
    return bool(piece.get("text") or piece.get("summary") or piece.get("signature"))


def short_call_id(call_id: str) -> str:
    """``call_id`` in the form Mistral's validator (``mistral_common``: its API, vLLM's
    ``--tokenizer-mode mistral``) takes, nine ASCII letters and digits: as it is if it is one,
    else nine made from its SHA-256, so the call and its result, sent apart, and every later
    request carry the same one (62**9 of them: two ids of one conversation meeting in one is
    not a worry)."""
    if len(call_id) == 9 and call_id.isascii() and call_id.isalnum():
        return call_id
    return base62(hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).digest(), 9)


KEPT_FIELDS = ("extra_content", "reasoning_details")
"""The wire fields of what a reply's metadata keeps to be sent back (:data:`EXTRA_CONTENT`,
:data:`REASONING_DETAILS`), left out (``send_kept=False``) for a server that refused them."""

KEPT_FROM = "kept_from"
"""The ``Message.metadata`` key naming the server and model a reply that keeps
:data:`KEPT_FIELDS` came from: a digest of the server's URL and the model's name
(``server_tag``), never the URL, which may name a private host. What the reply keeps goes back
to that model on that server only: a signature is bound to the model that made it (another
model refuses it: Gemini's 400 "Corrupted thought signature", Anthropic's "Invalid signature in
thinking block"), and one gateway serves many. A message tagged with the server alone (saved
before the model was in the tag) goes to any model on that server, and one without a tag
(saved before it was written) to any server, as they did."""


def server_tag(base_url: str, model: str | None = None) -> str:
    """The :data:`KEPT_FROM` of ``model`` on a server whose API root is ``base_url`` (its
    credentials and query left out by the caller): 16 hex digits of the SHA-256 of both, the
    same in every process; without ``model``, of the URL alone (the tag before the model was in
    it, which messages saved then carry)."""
    text = base_url if model is None else f"{base_url}\n{model}"
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def chat_messages(
    messages: Sequence[Message],
    *,
    send_reasoning: bool = False,
    send_parts: bool = True,
    short_ids: bool = False,
    fit_ids: bool = False,
    send_kept: bool = True,
    origin: str | None = None,
    server: str | None = None,
) -> list[dict[str, Any]]:
    """Wire messages. Assistant messages always carry ``content`` (``""`` beside tool calls: some
    servers reject its absence) and carry ``tool_calls`` only when there are some (OpenAI rejects an
    empty list). Reasoning is not sent back by default: OpenAI refuses fields it does not know in
    a message, and DeepSeek's older reasoner refused ``reasoning_content``. With
    ``send_reasoning`` (a server in a thinking mode that requires it: DeepSeek, Kimi) assistant
    messages with tool calls carry it as ``reasoning_content``, ``""`` when they have none. Without
    ``send_parts`` (``parts="text"``: a text-only server) no content part but text is sent: a
    message's parts are the placeholders in its text (:func:`parts_as_text`), and a tool round
    is followed by no user message of parts. Tool-call ids go as they are (a server reading its
    own back, as Kimi K2's ``functions.add:0``, gets them as it made them), except with
    ``fit_ids`` (a server that refused an id, as Anthropic and Bedrock behind a proxy refuse
    one but ``^[a-zA-Z0-9_-]{1,64}$``): then one that does not fit (``fits_wire``: an earlier
    pyadk's ``<id>~<n>``, a server's with ``.`` or ``:``, more than 64 characters) goes as
    ``wire_call_ids`` makes it, the same for a call and its result. With ``short_ids`` (a server
    that refused an id, as Mistral does) each goes as :func:`short_call_id` makes it. What a reply's
    metadata keeps to be sent back (Gemini's ``extra_content`` on its calls, OpenRouter's
    ``reasoning_details``) goes back on it, unless ``send_kept`` is off (a server that refused
    them: :data:`KEPT_FIELDS`) or the message came from a model or server other than ``origin``
    (the :data:`KEPT_FROM` of the model and server the request goes to; None: sent whatever the
    message's); ``server``: the tag of that server alone, which a message saved before the model
    was in the tag carries (sent, as it was then)."""
    out: list[dict[str, Any]] = []
    attached: list[dict[str, Any]] | None = None  # the parts of a round's tool messages
    rounds: list[tuple[int, list[str]]] = []  # replies of several calls: results_in_call_order
    as_sent = short_call_id if short_ids else ids_as_sent(messages, fit_ids=fit_ids)
    for position, message in enumerate(messages):
        role = message.role
        if attached is not None and role != _TOOL:
            out.append({"role": "user", "content": attached})
            attached = None
        if role == _ASSISTANT:
            entry: dict[str, Any] = {"role": "assistant", "content": message.content}
            metadata = message.metadata
            # What the reply kept goes back to the server it came from (an untagged message's
            # to any): another may refuse a field it does not know (Mistral's 422).
            kept = send_kept and bool(metadata)
            if kept and origin is not None:
                tag = metadata.get(KEPT_FROM, origin)
                kept = tag == origin or (server is not None and tag == server)
            if message.tool_calls:
                calls = []
                for call in message.tool_calls:
                    calls.append(
                        {
                            "id": as_sent(call.id),
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments or "{}"},
                        }
                    )
                entry["tool_calls"] = calls
                extras = metadata.get(EXTRA_CONTENT) if kept else None
                if type(extras) is dict:
                    # kept by the id each call has once ids are made unique (as the agent makes
                    # them: a reply's calls may share one), found so whether they were or not
                    given = [call.id for call in message.tool_calls]
                    ids = _unique_call_ids(given)
                    for index, (call_id, wire) in enumerate(zip(ids, calls, strict=True)):
                        extra = extras.get(call_id)
                        if extra is None and call_id != given[index]:
                            # a reply saved by an earlier pyadk keeps it under its old form
                            extra = extras.get(_old_unique_call_id(given[index], index))
                        if extra is not None:
                            wire["extra_content"] = extra
                if send_reasoning:
                    entry["reasoning_content"] = message.reasoning or ""
                if len(calls) > 1:
                    rounds.append((len(out) + 1, [str(wire["id"]) for wire in calls]))
            if kept:
                details = metadata.get(REASONING_DETAILS)
                if details:
                    entry[REASONING_DETAILS] = details
            out.append(entry)
        elif role == _TOOL:
            call_id = as_sent(require_tool_call_id(message, position))
            if message.parts and not send_parts:
                text = parts_as_text(message.content, message.parts)
                out.append({"role": "tool", "tool_call_id": call_id, "content": text})
                continue
            out.append({"role": "tool", "tool_call_id": call_id, "content": message.content})
            if message.parts:
                # A tool message takes text only: its images and files follow the round, in
                # one user message, each tool's under a line naming its call.
                attached = attached or []
                label = f"Attached by tool call {call_id} ({message.name or 'tool'}):"
                attached.append({"type": "text", "text": label})
                attached.extend(chat_part(part) for part in message.parts)
        elif role in _PLAIN_ROLES:
            if message.parts and role == _USER:
                if not send_parts:
                    text = parts_as_text(message.content, message.parts)
                    out.append({"role": "user", "content": text})
                    continue
                content = [{"type": "text", "text": message.content}] if message.content else []
                content.extend(chat_part(part) for part in message.parts)
                out.append({"role": "user", "content": content})
            else:
                out.append({"role": _PLAIN_ROLES[role], "content": message.content})
        else:
            raise unknown_role(message, position)
    if attached is not None:
        out.append({"role": "user", "content": attached})
    if rounds:
        results_in_call_order(out, rounds, "role", "tool", "tool_call_id")
    return out


def chat_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for spec in tools:
        function: dict[str, Any] = {"name": spec.name, "parameters": spec.parameters}
        if spec.description:
            function["description"] = spec.description
        out.append({"type": "function", "function": function})
    return out


def chat_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    options: ModelOptions | None,
    *,
    stream: bool,
    max_tokens_field: str,
    stream_usage: bool = True,
    send_reasoning: bool = False,
    send_parts: bool = True,
    short_ids: bool = False,
    fit_ids: bool = False,
    send_kept: bool = True,
    origin: str | None = None,
    server: str | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create``.

    Streams ask for ``stream_options.include_usage`` (unless ``stream_usage`` is off: a server that
    refused it) so the final chunk carries token counts. ``send_reasoning``, ``send_parts``,
    ``short_ids``, ``fit_ids``, ``send_kept``, ``origin`` and ``server``: see :func:`chat_messages`. ``options.extra`` travels as
    ``extra_body`` and so overrides anything set here. Without tools, ``tool_choice`` and ``parallel_tool_calls`` are left out
    (:data:`~adk.models._openai_common.TOOL_FIELDS`).
    """
    request: dict[str, Any] = {
        "model": model,
        "messages": chat_messages(
            messages,
            send_reasoning=send_reasoning,
            send_parts=send_parts,
            short_ids=short_ids,
            fit_ids=fit_ids,
            send_kept=send_kept,
            origin=origin,
            server=server,
        ),
    }
    if tools:
        request["tools"] = chat_tools(tools)
    if stream:
        request["stream"] = True
        if stream_usage:
            request["stream_options"] = {"include_usage": True}
    if options is None:
        return request
    if options.temperature is not None:
        request["temperature"] = options.temperature
    if options.max_tokens is not None:
        request[max_tokens_field] = options.max_tokens
    if options.stop is not None:
        request["stop"] = list(options.stop)
    if options.tool_choice is not None and tools:
        name = function_choice_name(options.tool_choice)
        if name is not None:
            request["tool_choice"] = {"type": "function", "function": {"name": name}}
        else:
            request["tool_choice"] = options.tool_choice
    if options.response_format is not None:
        schema = json_schema_of(options.response_format)
        request["response_format"] = (
            {"type": "json_schema", "json_schema": schema}
            if schema is not None
            else options.response_format
        )
    if options.extra:
        request["extra_body"] = dict(options.extra) if tools else without_tool_fields(options.extra)
    return request


def _tool_calls(raw: object, cut: bool = False) -> tuple[list[ToolCall], dict[str, Any] | None]:
    """The calls of a message's ``tool_calls``, and what the server put on them to be sent back
    (:data:`EXTRA_CONTENT`), by the id each call has once ids are made unique
    (``_unique_call_ids``: two calls may share one), or None. Empty arguments are ``{}``, but
    the last call's of a reply ``cut`` at its token limit (see ``ToolCall``)."""
    calls: list[ToolCall] = []
    extras: dict[int, Any] | None = None  # by the call's place
    blank = False  # whether the last call's arguments came empty
    for position, call in enumerate(raw if isinstance(raw, list) else ()):
        function = getattr(call, "function", None)
        if function is None:  # a non-function ("custom") tool call: not ours to run
            continue
        call_id = text_of(getattr(call, "id", None)) or f"call_{position}"
        arguments = arguments_text(getattr(function, "arguments", None))
        blank = not arguments
        calls.append(
            ToolCall(
                id=call_id,
                name=text_of(getattr(function, "name", None)),
                arguments=arguments or "{}",
            )
        )
        extra = field_of(call, "extra_content")
        if extra is not None:
            extras = extras or {}
            extras[len(calls) - 1] = extra
    if cut and blank:
        calls[-1].arguments = ""
    if extras is None:
        return calls, None
    ids = _unique_call_ids([call.id for call in calls])
    return calls, {ids[place]: extra for place, extra in extras.items()}


def chat_message(completion: Any, key: str | None = None, *, origin: str | None = None) -> Message:
    """The assistant message of a ``ChatCompletion`` (first choice); ``ModelError`` for an answer
    that is not one (see :func:`unusable_reply`), ``key`` (the model's API key) masked in what
    it quotes before the cut. What it keeps to be sent back is tagged with ``origin``, the
    :data:`KEPT_FROM` of the server that answered."""
    choices = getattr(completion, "choices", None)
    if not choices:
        raise unusable_reply(completion, "a chat completion without choices", key)
    if not isinstance(choices, list):  # the SDK keeps what its types do not fit as it came
        raise unusable_reply(
            completion,
            f"a chat completion whose choices is not a list: {_shown(choices, key)}",
            key,
        )
    choice = choices[0]
    finish = getattr(choice, "finish_reason", None)
    if finish == "error" or finish == _NO_RESOURCE:
        raise _failed_answer(choice, key)
    raw = getattr(choice, "message", None)
    if raw is None or isinstance(raw, (str, int, float, list)):
        raise unusable_reply(
            completion,
            f"a chat completion whose first choice has no message object: {_shown(choice, key)}",
            key,
        )
    content = getattr(raw, "content", None)
    reasoning = reasoning_of(raw)
    if isinstance(content, list):
        content, thinking = content_parts(content)
        reasoning += thinking
    finish = getattr(choice, "finish_reason", None)
    calls, extras = _tool_calls(getattr(raw, "tool_calls", None), finish == "length")
    message = Message.assistant(
        text_of(content),
        calls,
        usage=usage_of(getattr(completion, "usage", None), "prompt_tokens", "completion_tokens"),
        reasoning=reasoning or None,
    )
    if extras is not None:
        message.metadata[EXTRA_CONTENT] = extras
    details = field_of(raw, REASONING_DETAILS)
    if isinstance(details, list) and details:
        message.metadata[REASONING_DETAILS] = details
    if origin is not None and (extras is not None or REASONING_DETAILS in message.metadata):
        message.metadata[KEPT_FROM] = origin
    if isinstance(finish, str):
        message.metadata["finish_reason"] = finish
    refusal = getattr(raw, "refusal", None)
    if isinstance(refusal, str) and refusal:
        message.metadata["refusal"] = refusal
    response_identity(message, completion)
    return message


def _shown(value: object, key: str | None) -> str:
    """``value``'s repr for an error, cut at 200 characters, ``key`` masked before the cut."""
    shown = unkeyed(repr(value), key)
    return shown if len(shown) <= 200 else shown[:200] + "..."


_NO_RESOURCE = "insufficient_system_resource"
"""DeepSeek's finish reason for an answer its inference resources ran short for: cut off, as one
whose finish reason is ``error`` is (``_failed_answer``)."""


def _failed_answer(choice: Any, key: str | None) -> ModelError:
    """The error for a choice whose finish reason says the answer was cut off by a failure
    (``error``, :data:`_NO_RESOURCE`). ``error``: OpenRouter ends so the answer of a provider
    that failed while the model was answering, with the error on the choice (``{"code": 502,
    "message": ...}``). ``insufficient_system_resource``: DeepSeek's, the generation interrupted for want of
    inference resources, an overload (503). The answer is cut, not finished: taken as one, it
    passed for whole. The code is read as the status it stands for (``in_band_status``), so a
    failure before anything reached the caller is retried as that status is. ``key``: masked
    before what the provider said is cut (``error_detail``)."""
    if getattr(choice, "finish_reason", None) == _NO_RESOURCE:
        return ModelError(
            "the model's answer was cut off: finish reason insufficient_system_resource (the "
            "server's inference resources ran short)",
            status=503,
        )
    error = getattr(choice, "error", None)  # not an SDK field: kept as the dict it came as
    message = error.get("message") if isinstance(error, dict) else None
    said = message if isinstance(message, str) and message else "no details given"
    return ModelError(
        f"the model's answer ended in an error: {said}{error_detail(error, key)}",
        status=in_band_status(error),
    )


class ChatStreamDecoder:
    """Turns ``ChatCompletionChunk``s into ``MessageChunk``s; ``finished`` once a finish reason came.

    Tool-call fragments pass through as ``ToolCallChunk``s with whatever id/name each fragment
    carries; ``adk.messages.join_chunks`` takes them once per index (llama.cpp repeats the name in
    every fragment). The index is the decoder's, not the server's: servers disagree on the wire
    index (Ollama labels every call 0, Gemini's OpenAI endpoint sends none), so a fragment with a
    call id not seen before starts a new call, one without an id continues the call its wire index
    (or, without one, its place in the delta) last named, and calls are numbered in arrival order.
    Except after a call whose arguments are already a whole JSON object (see ``_WireCall``): a
    fragment without an id that brings another name, or more arguments, starts a new call, since
    servers that send no ids and number every call 0 stream each whole call after the one before,
    and nothing may follow a whole object in one call's arguments.
    Content sent as a list of parts (Mistral's reasoning models) is read as text plus reasoning.
    Only choice 0 is read. Chunks that carry nothing (the role-only opener) yield None, so "nothing
    reached the caller yet" stays true for as long as it really is. The chunk
    with the finish reason also carries the stream's ``response_model`` / ``response_id`` (read from
    the first chunk that names them) as metadata, as a non-streamed completion would.

    Refusal fragments (``delta.refusal``) are collected rather than passed on — a chunk has no field
    for them and per-chunk metadata would overwrite itself — and the joined text goes into the
    finishing chunk's ``metadata["refusal"]``, as ``message.refusal`` does for a non-streamed reply.
    A refusal-only stream therefore first reaches the caller with its finishing chunk; a stream that
    breaks before then is retried with a fresh decoder, so no fragment is counted twice.
    """

    __slots__ = (
        "_at",
        "_calls",
        "_details",
        "_extras",
        "_given",
        "_identity",
        "_ids",
        "_key",
        "_origin",
        "_refusal",
        "finished",
    )

    def __init__(self, origin: str | None = None, key: str | None = None) -> None:
        self.finished = False
        self._origin = origin  # KEPT_FROM of what the stream keeps to be sent back
        self._key = key  # the model's API key, masked in what an error quotes before its cut
        self._identity: dict[str, str] = {}
        self._refusal: list[str] = []
        self._extras: dict[int, Any] | None = None  # call index -> its extra_content
        self._details: list[dict[str, Any]] = []  # OpenRouter's reasoning_details, joined
        # wire key (see _place) -> the call that key last named
        self._at: dict[int, _WireCall] = {}
        self._ids: dict[str, int] = {}  # call id -> the last call's index that had it
        self._given: dict[int, str] = {}  # call index -> its id (calls may share one)
        self._calls = 0

    def feed(self, chunk: Any) -> MessageChunk | None:
        if not self._identity:
            self._identity = identity_of(chunk)
        usage = usage_of(getattr(chunk, "usage", None), "prompt_tokens", "completion_tokens")
        content = reasoning = ""
        fragments: list[ToolCallChunk] = []
        finish: str | None = None
        choices = getattr(chunk, "choices", None)
        if choices is not None and type(choices) is not list:  # the SDK keeps it as it came
            raise ModelError(
                f"a stream event's choices is not a list: {_shown(choices, self._key)}"
            )
        for choice in choices or ():
            if getattr(choice, "index", 0) not in (0, None):
                continue
            delta = getattr(choice, "delta", None)
            if delta is not None:
                reasoning = reasoning_of(delta)
                extra = getattr(delta, "__pydantic_extra__", None)  # not an SDK field
                details = extra.get(REASONING_DETAILS) if extra else None
                if details and type(details) is list:
                    _add_details(self._details, details)
                raw_content = getattr(delta, "content", None)
                if isinstance(raw_content, str):
                    content = raw_content
                elif isinstance(raw_content, list):
                    content, thinking = content_parts(raw_content)
                    reasoning += thinking
                refusal = text_of(getattr(delta, "refusal", None))
                if refusal:
                    self._refusal.append(refusal)
                raw_calls = getattr(delta, "tool_calls", None)
                # What is no list of calls, or no call (a string, a number), holds none: iterated,
                # an object's keys and a string's characters each became a call of no name.
                for position, raw in enumerate(raw_calls if type(raw_calls) is list else ()):
                    if raw is None or isinstance(raw, (str, int, float, list)):
                        continue
                    function = getattr(raw, "function", None)
                    wire = getattr(raw, "index", None)
                    call_id = text_of(getattr(raw, "id", None))
                    name = text_of(getattr(function, "name", None))
                    arguments = arguments_text(getattr(function, "arguments", None))
                    extra = field_of(raw, "extra_content") if call_id or name else None
                    index, name, arguments = self._place(
                        wire if isinstance(wire, int) else -1 - position,
                        call_id,
                        name,
                        arguments,
                        extra is not None,
                    )
                    if extra is not None:  # on a call's head (Gemini sends each call whole)
                        if self._extras is None:
                            self._extras = {}
                        self._extras[index] = extra
                    fragments.append(
                        ToolCallChunk(
                            index=index,
                            id=call_id or None,
                            name=name or None,
                            arguments=arguments,
                        )
                    )
            reason = getattr(choice, "finish_reason", None)
            if reason is not None:  # (most deltas: None, which == compares slowly)
                if reason == "error" or reason == _NO_RESOURCE:  # (a list: unhashable)
                    raise _failed_answer(choice, self._key)
                if isinstance(reason, str) and reason:
                    finish = reason
                    self.finished = True
        if finish is not None:
            return MessageChunk(
                content=content,
                reasoning=reasoning,
                tool_calls=fragments,
                usage=usage,
                finish_reason=finish,
                metadata=self._final_metadata(),
            )
        if not (content or reasoning or fragments or usage is not None):
            return None
        return MessageChunk(content=content, reasoning=reasoning, tool_calls=fragments, usage=usage)

    def end(self) -> MessageChunk:
        """The finishing chunk of a stream the server ended with ``[DONE]`` before any finish
        reason came (some servers send none): the answer is whole, ``stop``, or ``tool_calls``
        when it made calls, with what a finishing chunk records (``_final_metadata``). A stream
        that ended without ``[DONE]`` is cut short, and this is not asked for."""
        self.finished = True
        return MessageChunk(
            finish_reason="tool_calls" if self._calls else "stop",
            metadata=self._final_metadata(),
        )

    def _place(
        self, key: int, call_id: str, name: str, arguments: str, signed: bool = False
    ) -> tuple[int, str, str]:
        """The index of the call a fragment belongs to, and the name and arguments to pass on
        with it (the arguments it adds: see ``_WireCall.add``, and none when it repeats a whole
        call's, ``_WireCall.repeats``). ``key`` is its wire index, or for a fragment without one
        ``-1 - its place in the delta``; ``signed``: it carries what only a call's head does
        (``extra_content``)."""
        current = self._at.get(key)
        if not call_id:
            if current is None:
                self._at[key] = _WireCall(self._new_index(), "", name, arguments)
                return self._calls - 1, name, arguments
            if current.closed is None:  # a continuation: the common case
                return current.index, name, current.add(name, arguments)
            # the whole arguments sent again at the end; not after the call's name came again
            # (closed is that name), which begins a call of that name (see after_whole)
            if not name and not current.closed and current.repeats(arguments):
                return current.index, name, ""
            # the call at this key has a whole object as its arguments: see _WireCall.after_whole
            named = current.after_whole(name, arguments)
            if named is None:
                return current.index, name, arguments
            # begun by a head of its name alone that came with an id (calls sharing one on their
            # heads alone): the id names this call from now on, as a head with arguments makes it
            began = current.head_id if current.closed and named == current.closed else ""
            index = self._new_index()
            if began:
                self._ids[began] = index
            self._at[key] = _WireCall(index, began, named, arguments)
            return index, named, arguments
        if current is not None and current.id == call_id and current.closed is None:
            # llama.cpp repeats the id in every fragment
            return current.index, name, current.add(name, arguments)
        known = self._ids.get(call_id)
        # A wire index never seen before is a call of its own, though its id is taken (two calls
        # at indices 0 and 1 both given "dup", their heads sent before their arguments): the
        # id's call came at a wire index of its own too.
        if (
            known is not None
            and current is None
            and key >= 0
            and any(k >= 0 for k, c in self._at.items() if c.index == known)
        ):
            known = None
        if known is not None:
            # Calls of one answer may share an id (every one "call_0"): once the id's call is
            # whole, a fragment with it at another wire index, or bringing more arguments or a
            # head's extra_content, begins the next call, as one without an id does (_WireCall).
            held = current if current is not None and current.index == known else None
            if held is None:
                held = next((c for c in self._at.values() if c.index == known), None)
            if held is not None and held.closed is not None:
                if (
                    held is current
                    and not signed
                    and not held.closed
                    and name in ("", held.name)
                    and held.repeats(arguments)
                ):
                    # the whole call sent again under its id (a proxy's "consolidated" chunk
                    # after the deltas): the same call, which run twice would act twice; not
                    # after a head of the call's name alone (closed: that name), which began
                    # the next call sharing the id
                    return held.index, name, ""
                if held is not current or signed or arguments.strip():
                    known = None
                else:
                    held.after_whole(name, arguments)  # the call's name again, remembered
                    if held.closed:
                        held.head_id = call_id  # the id of the call it may begin
        if known is not None:
            index = known
        elif current is not None and not current.id and current.closed is None:
            index = self._ids[call_id] = current.index  # the id of a call whose first had none
            self._given[index] = call_id
        else:
            index = self._ids[call_id] = self._new_index()
            self._given[index] = call_id
        if current is not None and current.index == index:
            current.id = call_id
            arguments = current.add(name, arguments)
        else:
            self._at[key] = _WireCall(index, call_id, name, arguments)
        return index, name, arguments

    def _new_index(self) -> int:
        index = self._calls
        self._calls += 1
        return index

    def _final_metadata(self) -> dict[str, Any]:
        """What the finishing chunk records: the stream's identity, its refusal if it had one,
        and what the server put on its calls to be sent back (:data:`EXTRA_CONTENT`), by the id
        ``join_chunks`` gives each call (its own, else ``call_<index>``) made unique as
        ``_unique_call_ids`` makes it, with the server it came from (:data:`KEPT_FROM`)."""
        metadata: dict[str, Any] = dict(self._identity)
        if self._refusal:
            metadata["refusal"] = "".join(self._refusal)
        if self._details:
            metadata[REASONING_DETAILS] = self._details
        if self._extras:
            given = self._given
            ids = _unique_call_ids(
                [given.get(index) or f"call_{index}" for index in range(self._calls)]
            )
            metadata[EXTRA_CONTENT] = {ids[index]: extra for index, extra in self._extras.items()}
        if self._origin is not None and (self._details or self._extras):
            metadata[KEPT_FROM] = self._origin
        return metadata


class _WireCall:
    """What the decoder knows of the call a wire key last named: its index, id and name, and its
    argument text so far, kept to tell whether it is a whole JSON object yet.

    Why: some servers send calls without ids, every one at index 0 (or with no index), each whole
    call after the one before; read as one call, two calls became one, its arguments run together
    (``{"path": "a"}{"path": "b"}``). Once the arguments so far are a whole object, the call can
    have nothing more (any text after a whole object makes its JSON invalid), so a fragment
    without an id that brings more arguments, or a name other than the call's, begins the next
    call. A fragment bringing only the call's own name again (llama.cpp repeats the name in every
    fragment) adds nothing and is no proof of a new call; it is remembered, and the arguments
    after it begin a new call of that name. Before the arguments are whole, a fragment continues
    the call whatever it brings, as it always did (the rule "id and name once per index").

    Whether the arguments are whole is asked only of a fragment without an id after text that
    ends with ``}`` (the last character of any whole object), so a call's stream is parsed once
    or twice at most, not per fragment.
    """

    __slots__ = ("_parts", "closed", "head_id", "id", "index", "name")

    def __init__(self, index: int, call_id: str, name: str, arguments: str) -> None:
        self.index = index
        self.id = call_id
        self.name = name
        self._parts: list[str] = [arguments] if arguments else []
        # None while the arguments may go on; once they are a whole object, the name a fragment
        # repeated since ("" for none)
        self.closed: str | None = None
        self.head_id = ""  # the id a head of the name alone came with since (see closed)
        if arguments.rstrip().endswith("}"):
            self._check_whole()

    def add(self, name: str, arguments: str) -> str:
        """Take a fragment of this call; the arguments it adds, to pass on: ``arguments``, or,
        from a server that sends the arguments so far again in every fragment (cumulative, as
        some DeepSeek hosts do: ``{"a``, ``{"a": 1``, ``{"a": 1}``), what a fragment adds to
        them. Read so only when the fragment opens an object (``{``) and begins with the text so
        far, itself opening one: a fragment continuing that text does so only where the value
        after it is an object beginning as the whole does (``{"a": `` then ``{"a": 1}}``, a key
        nested in itself, cut at that very place), never with ``{{``. A plain stream's
        fragments cost one comparison each."""
        if name and not self.name:
            self.name = name
        if arguments:
            parts = self._parts
            if (
                parts
                and arguments[0] == "{"
                and len(arguments) > len(first := parts[0])
                and arguments.startswith(first)
            ):
                # (the first fragment checked before the text is joined: a fragment opening a
                # nested object seldom begins so, and the join is paid only then)
                text = "".join(parts) if len(parts) > 1 else first
                if len(arguments) > len(text) and text[0] == "{" and arguments.startswith(text):
                    arguments = arguments[len(text) :]
                    parts[:] = [text]
            parts.append(arguments)
            if arguments.rstrip().endswith("}"):
                self._check_whole()
        return arguments

    def repeats(self, arguments: str) -> bool:
        """Whether ``arguments`` are this call's whole arguments again (once they are whole):
        some proxies send them again at the end, after the fragments that carried them, where
        appended they made ``{...}{...}``, JSON no tool takes. The same object written
        otherwise (re-serialized: ``{"a": 1}`` for ``{"a":1}``) is the same arguments."""
        if self.closed is None or not arguments.strip():
            return False
        text = "".join(self._parts)
        if arguments.strip() == text.strip():
            return True
        try:
            return bool(json.loads(arguments) == json.loads(text))
        except (ValueError, RecursionError):
            return False

    def _check_whole(self) -> None:
        text = "".join(self._parts)
        self._parts = [text]
        try:
            whole = isinstance(json.loads(text), dict)
        except (ValueError, RecursionError):  # not JSON (yet), or nested past the parser's depth
            whole = False
        if whole:
            self.closed = ""

    def after_whole(self, name: str, arguments: str) -> str | None:
        """For a fragment without an id after this call's arguments became whole: the name of the
        new call it begins, or None when it belongs to this one (a repeat of the name alone, or
        whitespace)."""
        if not self.name:  # its name has not come yet: what comes is its own, as it always was
            self.name = name
            return None
        if name and name != self.name:
            return name
        if not arguments.strip():
            if name:
                self.closed = name  # the call's name again: a new call's, if arguments follow
            return None
        # arguments with no name since the call became whole: nothing says whose they are
        return name or self.closed or None
