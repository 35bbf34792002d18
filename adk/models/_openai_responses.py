"""pyadk messages and options to and from the Responses wire format (``/responses``).

The Responses API models a conversation as typed items: plain messages, ``function_call`` items
(the assistant's tool calls, keyed by ``call_id``) and ``function_call_output`` items (tool results).
Results come back the same way and are folded into one assistant ``Message``; the finish reason is
expressed in Chat Completions vocabulary (``stop``, ``tool_calls``, ``length``, ``content_filter``) so
code reading ``metadata["finish_reason"]`` need not care which API answered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import Message, MessageChunk, Role, ToolCall, ToolCallChunk, parts_as_text
from ..tools.base import ToolSpec
from ._openai_common import (
    arguments_text,
    function_choice_name,
    identity_of,
    ids_as_sent,
    in_band_status,
    json_schema_of,
    require_tool_call_id,
    response_identity,
    responses_part,
    results_in_call_order,
    text_of,
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
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}
_DONE_TEXT = frozenset(
    {
        "response.output_text.done",
        "response.reasoning_text.done",
        "response.reasoning_summary_text.done",
    }
)


def responses_input(
    messages: Sequence[Message], *, send_parts: bool = True, fit_ids: bool = False
) -> list[dict[str, Any]]:
    """Input items. System messages stay in place as ``system`` items (rather than ``instructions``)
    so their order relative to the conversation is kept. Without ``send_parts`` (``parts="text"``)
    a message's parts are the placeholders in its text (:func:`parts_as_text`), no content item
    but text is sent. Tool-call ids go as they are, except with ``fit_ids`` (a server that refused
    one, see :func:`~adk.models._openai_chat.chat_messages`): then one that does not fit
    (``fits_wire``) goes as ``wire_call_ids`` makes it, the same for a call and its output."""
    out: list[dict[str, Any]] = []
    rounds: list[tuple[int, list[str]]] = []  # replies of several calls: results_in_call_order
    as_sent = ids_as_sent(messages, fit_ids=fit_ids)
    for position, message in enumerate(messages):
        role = message.role
        if role == _ASSISTANT:
            calls = message.tool_calls
            if message.content or not calls:
                out.append({"role": "assistant", "content": message.content})
            sent: list[str] = []
            for call in calls:
                call_id = as_sent(call.id)
                sent.append(call_id)
                out.append(
                    {
                        "type": "function_call",
                        "call_id": call_id,
                        "name": call.name,
                        "arguments": call.arguments or "{}",
                    }
                )
            if len(calls) > 1:
                rounds.append((len(out), sent))
        elif role == _TOOL:
            output: str | list[dict[str, Any]] = message.content
            if message.parts and not send_parts:
                output = parts_as_text(message.content, message.parts)
            elif message.parts:  # a function's output takes images and files beside its text
                output = (
                    [{"type": "input_text", "text": message.content}] if message.content else []
                )
                output.extend(responses_part(part) for part in message.parts)
            call_id = as_sent(require_tool_call_id(message, position))
            out.append({"type": "function_call_output", "call_id": call_id, "output": output})
        elif role in _PLAIN_ROLES:
            if message.parts and role == _USER and not send_parts:
                text = parts_as_text(message.content, message.parts)
                out.append({"role": "user", "content": text})
            elif message.parts and role == _USER:
                content = (
                    [{"type": "input_text", "text": message.content}] if message.content else []
                )
                content.extend(responses_part(part) for part in message.parts)
                out.append({"role": "user", "content": content})
            else:
                out.append({"role": _PLAIN_ROLES[role], "content": message.content})
        else:
            raise unknown_role(message, position)
    if rounds:
        results_in_call_order(out, rounds, "type", "function_call_output", "call_id")
    return out


def responses_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tools. ``strict`` is sent as False: the Responses API defaults it to True, which
    rejects ordinary schemas (optional properties, no ``additionalProperties: false``) that the Chat
    API accepts, and pyadk validates arguments at the tool anyway."""
    out: list[dict[str, Any]] = []
    for spec in tools:
        tool: dict[str, Any] = {
            "type": "function",
            "name": spec.name,
            "parameters": spec.parameters,
            "strict": False,
        }
        if spec.description:
            tool["description"] = spec.description
        out.append(tool)
    return out


def responses_request(
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
    """Keyword arguments for ``client.responses.create``. ``max_tokens`` becomes
    ``max_output_tokens`` (``max_tokens_field``, ``stream_usage``, ``send_reasoning``,
    ``short_ids``, ``send_kept``, ``origin`` and ``server`` are Chat concerns; ``send_parts`` and
    ``fit_ids``: see :func:`responses_input`) and ``response_format`` becomes ``text.format``. ``stop`` is
    rejected: the Responses API has no stop sequences. Without tools, ``tool_choice`` and
    ``parallel_tool_calls`` are left out (:data:`~adk.models._openai_common.TOOL_FIELDS`), as
    from a Chat request."""
    del max_tokens_field, stream_usage, send_reasoning, short_ids, send_kept, origin, server
    request: dict[str, Any] = {
        "model": model,
        "input": responses_input(messages, send_parts=send_parts, fit_ids=fit_ids),
    }
    if tools:
        request["tools"] = responses_tools(tools)
    if stream:
        request["stream"] = True
    if options is None:
        return request
    if options.stop:
        raise ValueError(
            "ModelOptions.stop is not supported by the Responses API; use "
            "OpenAIChatModel(..., api='chat') for stop sequences"
        )
    if options.temperature is not None:
        request["temperature"] = options.temperature
    if options.max_tokens is not None:
        request["max_output_tokens"] = options.max_tokens
    if options.tool_choice is not None and tools:
        name = function_choice_name(options.tool_choice)
        if name is not None:
            request["tool_choice"] = {"type": "function", "name": name}
        else:
            request["tool_choice"] = options.tool_choice
    if options.response_format is not None:
        schema = json_schema_of(options.response_format)
        request["text"] = {
            "format": {"type": "json_schema", **schema}
            if schema is not None
            else options.response_format
        }
    if options.extra:
        request["extra_body"] = dict(options.extra) if tools else without_tool_fields(options.extra)
    return request


def _finish_reason(response: Any, has_tool_calls: bool) -> str:
    if getattr(response, "status", None) == "incomplete":
        details = getattr(response, "incomplete_details", None)
        reason = text_of(getattr(details, "reason", None))
        return _INCOMPLETE.get(reason, reason or "incomplete")
    return "tool_calls" if has_tool_calls else "stop"


def _failed(response: Any) -> ModelError:
    """The error for a failed ``Response`` (``status == "failed"``, or a stream's
    ``response.failed``): its error's code and message, and the status that code stands for
    (``in_band_status``), so that an overload is retried as the same answer over HTTP is."""
    error = getattr(response, "error", None)
    message = text_of(getattr(error, "message", None))
    code = text_of(getattr(error, "code", None))
    text = f"{code}: {message}" if code and message else message or code or "no details given"
    return ModelError(f"the response failed: {text}", status=in_band_status(error))


_UNFINISHED = frozenset({"in_progress", "queued", "cancelled"})
"""The statuses of a ``Response`` that holds no finished answer (``failed`` is read apart, with
its error; ``incomplete`` is an answer cut short, whose finish reason says so)."""


def _listed(value: object) -> list[Any]:
    """``value`` if it is a list, else empty: the SDK keeps a field its types do not fit (an
    ``output`` of ``true``, a ``content`` of ``5``) as it came, and iterating it failed."""
    return value if type(value) is list else []


def _reasoning_text(item: Any) -> str:
    parts = [text_of(getattr(p, "text", None)) for p in _listed(getattr(item, "content", None))]
    if not any(parts):
        parts = [text_of(getattr(p, "text", None)) for p in _listed(getattr(item, "summary", None))]
    return "".join(parts)


def _output_text(response: Any) -> str:
    """The text parts of a ``Response``'s output messages, joined ("" when it has none)."""
    return "".join(
        text_of(getattr(part, "text", None))
        for item in _listed(getattr(response, "output", None))
        if getattr(item, "type", None) == "message"
        for part in _listed(getattr(item, "content", None))
        if getattr(part, "type", None) != "refusal"
    )


def _output_reasoning(response: Any) -> str:
    return "".join(
        _reasoning_text(item)
        for item in _listed(getattr(response, "output", None))
        if getattr(item, "type", None) == "reasoning"
    )


def _output_refusal(response: Any) -> str:
    """The refusal parts of a ``Response``'s output messages, joined ("" when it has none)."""
    return "".join(
        text_of(getattr(part, "refusal", None))
        for item in _listed(getattr(response, "output", None))
        if getattr(item, "type", None) == "message"
        for part in _listed(getattr(item, "content", None))
        if getattr(part, "type", None) == "refusal"
    )


def responses_message(response: Any, key: str | None = None) -> Message:
    """The assistant message of a ``Response``: text parts joined, function calls as tool calls;
    ``ModelError`` for a failed response or an answer that is not one (see ``unusable_reply``),
    ``key`` (the model's API key) masked in what it quotes before the cut."""
    status = getattr(response, "status", None)
    if status == "failed":
        raise _failed(response)
    if status in _UNFINISHED:
        # A background response's first answer (``background: true``, set by a caller's extra
        # or a proxy), or one cancelled: taken as it came, it passed for a finished empty answer.
        raise ModelError(
            f"the response is not finished: status {status!r} (a background response, which "
            "this adapter does not poll; ask without 'background')"
        )
    output = getattr(response, "output", None)
    if not isinstance(output, list):
        raise unusable_reply(response, "a response without output", key)
    calls: list[ToolCall] = []
    blank = False  # whether the last call's arguments came empty: see ToolCall
    for item in output:
        if getattr(item, "type", None) == "function_call":
            arguments = arguments_text(getattr(item, "arguments", None))
            blank = not arguments
            calls.append(
                ToolCall(
                    id=text_of(getattr(item, "call_id", None))
                    or text_of(getattr(item, "id", None))
                    or f"call_{len(calls)}",
                    name=text_of(getattr(item, "name", None)),
                    arguments=arguments or "{}",
                )
            )
    finish = _finish_reason(response, bool(calls))
    if finish == "length" and calls and blank:  # cut before any of its arguments came
        calls[-1].arguments = ""
    message = Message.assistant(
        _output_text(response),
        calls,
        usage=usage_of(getattr(response, "usage", None), "input_tokens", "output_tokens"),
        reasoning=_output_reasoning(response) or None,
    )
    message.metadata["finish_reason"] = finish
    refusal = _output_refusal(response)
    if refusal:
        message.metadata["refusal"] = refusal
    response_identity(message, response)
    return message


class ResponsesStreamDecoder:
    """Turns Responses stream events into ``MessageChunk``s; ``finished`` once the response completed.

    Function calls are numbered 0, 1, ... in the order their items appear (``output_index`` counts
    every item, messages and reasoning too), each told apart by its item id where events carry one
    (see ``_index``). Arguments come from the delta events; a server that sends none has them
    read from ``function_call_arguments.done`` (OpenAI's gpt-5.3-codex-spark), and one that only
    sends the finished item (no deltas) still gets its arguments through from ``output_item.done``,
    and one whose deltas come before the call's ``output_item.added`` (or without one) its id and
    name, which only the item carries.
    ``response.failed`` and ``error`` events raise ``ModelError``. The finishing chunk carries the
    response's ``response_model`` / ``response_id`` as metadata, as a non-streamed response would:
    what the final response object says, over what ``response.created`` / ``in_progress`` said.

    Text and reasoning come from the delta events. A server that sends a part's text only in its
    ``.done`` event (``response.output_text.done``...) has it read from there, and one that sends
    no text events at all from the final response object, each only when no delta of that kind
    came, so nothing is read twice and a streamed reply says what a non-streamed one would.

    Refusal text (``response.refusal.delta``) is collected per content part rather than passed on,
    and the finishing chunk carries it joined in ``metadata["refusal"]``, as a non-streamed
    response's refusal parts would. ``response.refusal.done`` replaces what the deltas of its part
    said with the finished text, so a server sending only that event is read too and one sending
    both is not read twice. A server that sends no refusal events at all still lists the refusal
    parts in the final response object, which is read when the events said nothing.
    """

    __slots__ = (
        "_argued",
        "_calls",
        "_count",
        "_identified",
        "_identity",
        "_named",
        "_reasoned",
        "_refusals",
        "_texted",
        "finished",
    )

    def __init__(self) -> None:
        self.finished = False
        self._texted = False  # some output text arrived (deltas or a .done event)
        self._reasoned = False  # the same for reasoning
        # ("id", item id) and ("at", output_index or None) -> tool-call index
        self._calls: dict[tuple[str, object], int] = {}
        self._identified: set[int] = set()  # tool-call indexes tied to an item id
        self._count = 0  # tool calls seen
        self._argued: set[int] = set()  # tool-call indexes whose arguments were streamed
        self._named: set[int] = set()  # tool-call indexes whose item (id and name) was read
        self._identity: dict[str, str] = {}
        self._refusals: dict[tuple[object, object], list[str]] = {}  # (output, content) -> text

    def _index(self, output_index: object, item_id: object) -> int:
        """The tool-call index of the call an event is about. The protocol gives every call event
        both the item's id and ``output_index``, but a server may leave the index out: keyed by
        the index alone, every such call was one, their arguments run together. So the id
        decides where there is one, and whichever of the two an event carries is tied to its
        call, so an event with only one of them finds its call too; an index already tied to
        another id is another call (a server numbering every item 0)."""
        place: tuple[str, object] = ("at", output_index if isinstance(output_index, int) else None)
        if not (isinstance(item_id, str) and item_id):
            index = self._calls.get(place)
            if index is None:
                index = self._calls[place] = self._new_call()
            return index
        key = ("id", item_id)
        index = self._calls.get(key)
        if index is None:
            index = self._calls.get(place) if place[1] is not None else None
            if index is None or index in self._identified:
                index = self._new_call()
            self._calls[key] = index
            self._identified.add(index)
        if place[1] is not None:
            self._calls.setdefault(place, index)
        return index

    def _new_call(self) -> int:
        self._count += 1
        return self._count - 1

    def feed(self, event: Any) -> MessageChunk | None:
        kind = getattr(event, "type", None)
        if kind == "response.output_text.delta":
            text = text_of(getattr(event, "delta", None))
            if not text:
                return None
            self._texted = True
            return _chunk(content=text)
        if kind in ("response.reasoning_text.delta", "response.reasoning_summary_text.delta"):
            text = text_of(getattr(event, "delta", None))
            if not text:
                return None
            self._reasoned = True
            return _chunk(reasoning=text)
        if kind in _DONE_TEXT:
            return self._done_text(event, kind)
        if kind == "response.function_call_arguments.delta":
            index = self._index(
                getattr(event, "output_index", None), getattr(event, "item_id", None)
            )
            self._argued.add(index)
            fragment = ToolCallChunk(
                index=index, id=None, name=None, arguments=text_of(getattr(event, "delta", None))
            )
            return _chunk(tool_calls=[fragment])
        if kind == "response.function_call_arguments.done":
            # The call's whole arguments: passed on only when no delta carried them (OpenAI's
            # gpt-5.3-codex-spark sends none, and gateways then a finished item without them:
            # BerriAI/litellm#27144, Wei-Shaw/sub2api#6629); after deltas, a repeat.
            index = self._index(
                getattr(event, "output_index", None), getattr(event, "item_id", None)
            )
            arguments = arguments_text(getattr(event, "arguments", None))
            if index in self._argued or not arguments:
                return None
            self._argued.add(index)
            fragment = ToolCallChunk(index=index, id=None, name=None, arguments=arguments)
            return _chunk(tool_calls=[fragment])
        if kind in ("response.output_item.added", "response.output_item.done"):
            item = getattr(event, "item", None)
            if getattr(item, "type", None) != "function_call":
                return None
            index = self._index(getattr(event, "output_index", None), getattr(item, "id", None))
            named = index in self._named
            if index in self._argued:
                if named:
                    return None  # the finished item repeats what the deltas already carried
                arguments = ""  # the deltas carried them; the call's id and name come only here
            else:
                arguments = arguments_text(getattr(item, "arguments", None))
                if arguments:
                    self._argued.add(index)
            self._named.add(index)
            fragment = ToolCallChunk(
                index=index,
                id=text_of(getattr(item, "call_id", None)) or None,
                name=text_of(getattr(item, "name", None)) or None,
                arguments=arguments,
            )
            return _chunk(tool_calls=[fragment])
        if kind in ("response.refusal.delta", "response.refusal.done"):
            self._refuse(event, kind == "response.refusal.done")
            return None
        if kind in ("response.completed", "response.incomplete"):
            self.finished = True
            response = getattr(event, "response", None)
            return MessageChunk(
                content="" if self._texted else _output_text(response),
                reasoning="" if self._reasoned else _output_reasoning(response),
                usage=usage_of(getattr(response, "usage", None), "input_tokens", "output_tokens"),
                finish_reason=_finish_reason(response, bool(self._count)),
                metadata=self._final_metadata(response),
            )
        if kind in ("response.created", "response.in_progress"):
            self._identity.update(identity_of(getattr(event, "response", None)))
            return None
        if kind == "response.failed":
            raise _failed(getattr(event, "response", None))
        if kind == "error":
            code = text_of(getattr(event, "code", None))
            message = text_of(getattr(event, "message", None)) or "no details given"
            raise ModelError(
                f"the server reported an error mid-stream: {code or 'error'}: {message}",
                status=in_band_status(event),
            )
        return None

    def _done_text(self, event: Any, kind: str) -> MessageChunk | None:
        """A part's finished text, passed on only when no delta of its kind came before it."""
        text = text_of(getattr(event, "text", None))
        if kind == "response.output_text.done":
            if self._texted or not text:
                return None
            self._texted = True
            return _chunk(content=text)
        if self._reasoned or not text:
            return None
        self._reasoned = True
        return _chunk(reasoning=text)

    def _refuse(self, event: Any, done: bool) -> None:
        """Add a refusal delta to its content part's text, or set the part's finished text."""
        # Indexes as keys: another value (a list, an object) could not be one, and is none.
        output, content = (
            getattr(event, "output_index", None),
            getattr(event, "content_index", None),
        )
        part = (
            output if isinstance(output, int) else None,
            content if isinstance(content, int) else None,
        )
        if done:
            self._refusals[part] = [text_of(getattr(event, "refusal", None))]
        else:
            self._refusals.setdefault(part, []).append(text_of(getattr(event, "delta", None)))

    def end(self) -> MessageChunk | None:
        """None: a Responses stream is finished by its ``response.completed`` alone (Chat's
        ``[DONE]``, which ``ChatStreamDecoder.end`` reads as an end, is none of its events)."""
        return None

    def _final_metadata(self, response: Any) -> dict[str, str]:
        """What the finishing chunk records: the response's identity, and its refusal if any."""
        metadata = {**self._identity, **identity_of(response)}
        refusal = "".join("".join(parts) for parts in self._refusals.values())
        refusal = refusal or _output_refusal(response)
        if refusal:
            metadata["refusal"] = refusal
        return metadata


def _chunk(
    *,
    content: str = "",
    reasoning: str = "",
    tool_calls: list[ToolCallChunk] | None = None,
    usage: Any = None,
    finish_reason: str | None = None,
) -> MessageChunk:
    return MessageChunk(
        content=content,
        reasoning=reasoning,
        tool_calls=tool_calls if tool_calls is not None else [],
        usage=usage,
        finish_reason=finish_reason,
    )
