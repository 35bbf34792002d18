"""Pieces both OpenAI wire formats (Chat Completions and Responses) share.

These helpers read the ``openai`` SDK's response objects by attribute, never importing the SDK: only
``adk.models.openai`` may import it (``import adk`` stays light), and servers that are merely
OpenAI-compatible return shapes the SDK's types do not promise (``reasoning_content``, missing ids, a
``null`` where a list belongs), so defensive reads are needed anyway.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from .._fastmodel import fast_builder
from ..messages import AudioPart, FilePart, ImagePart, Message, Role, Usage, part_placeholder
from .base import ModelError

_STANDARD_CHOICES = frozenset({"auto", "none", "required"})
_WIRE_FORMATS = frozenset({"json_schema", "json_object", "text"})
_SCHEMA_KEYS = frozenset({"type", "properties", "$ref", "$defs", "anyOf", "oneOf", "allOf"})


def text_of(value: object) -> str:
    """``value`` if it is a non-empty string, else ``""`` (servers send ``null`` for absent text)."""
    return value if isinstance(value, str) else ""


def arguments_text(value: object) -> str:
    """Tool-call arguments as the JSON text a ``ToolCall`` holds.

    The wire format says a string; some servers (llama.cpp builds, TGI) send the JSON object
    itself, which read as text would be lost and the tool called with ``{}``, so it is encoded.
    """
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def _field(obj: object, key: str) -> object:
    """``obj[key]`` of a dict (what the SDK keeps for shapes its types do not know), else the
    attribute."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key, None)


def content_parts(parts: list[Any]) -> tuple[str, str]:
    """``(text, thinking)`` of a message content sent as a list of parts instead of a string.

    Mistral's reasoning models do this: ``[{"type": "thinking", "thinking": [{"type": "text",
    "text": ...}]}, {"type": "text", "text": ...}]``. Text parts (``text``, ``output_text``) make the
    content and thinking parts the reasoning; other kinds (images, say) are not text and are skipped.
    """
    text: list[str] = []
    thinking: list[str] = []
    for part in parts:
        kind = _field(part, "type")
        if kind in ("text", "output_text"):
            text.append(text_of(_field(part, "text")))
        elif kind == "thinking":
            inner = _field(part, "thinking")
            if isinstance(inner, list):
                thinking.append(content_parts(inner)[0])
            else:
                thinking.append(text_of(inner))
    return "".join(text), "".join(thinking)


SHORTEST_KEY = 4
"""The shortest API key masked where a server quotes it (``unkeyed``): a shorter one is no
secret, and masked it would hide numbers and words (key ``1``: ``messages[***]``)."""
_LONG_KEY = 8  # a key this long is masked wherever it is; a shorter one only as a whole token
_KEY_CHARACTERS = r"A-Za-z0-9_\-"  # what a key's token is made of, which its ends are not next to


@functools.lru_cache(maxsize=8)
def _short_key(key: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![{_KEY_CHARACTERS}]){re.escape(key)}(?![{_KEY_CHARACTERS}])")


@functools.lru_cache(maxsize=8)
def _short_key_bytes(key: str) -> re.Pattern[bytes]:
    return re.compile(_short_key(key).pattern.encode("utf-8", "surrogatepass"))


def unkeyed(text: str, key: str | None) -> str:
    """``text`` with ``key`` (the model's API key, None: none to mask) masked as ``***``: done
    before any cut of what a server said, which would leave part of a key it went through. A
    key under 8 characters (LiteLLM's ``sk-1234``, a local server's) is masked where it stands
    as a whole token (``key sk-1234.``, not ``sk-1234-model``), as plain replacing would mask
    words and numbers that merely hold it."""
    if key is None:
        return text
    if len(key) >= _LONG_KEY:
        return text.replace(key, "***")
    return _short_key(key).sub("***", text)


def unkeyed_bytes(data: bytes, key: str | None) -> bytes:
    """``unkeyed`` of bytes (a body that is not UTF-8, quoted around where it stopped being
    so)."""
    if key is None:
        return data
    if len(key) >= _LONG_KEY:
        return data.replace(key.encode("utf-8", "surrogatepass"), b"***")
    return _short_key_bytes(key).sub(b"***", data)


def quotes_key(text: str, key: str | None) -> bool:
    """Whether ``text`` holds ``key`` where ``unkeyed`` masks it."""
    if key is None:
        return False
    if len(key) >= _LONG_KEY:
        return key in text
    return _short_key(key).search(text) is not None


def error_detail(error: object, key: str | None = None) -> str:
    """What a server's error object adds to its ``message``: a router's account of the provider
    behind it (OpenRouter: ``metadata.provider_name`` and ``metadata.raw``, the provider's own
    answer, when its message is only "Provider returned error"; ``metadata.reasons`` of a
    moderation refusal), as `` (provider: raw)``, or "". ``key`` (the model's API key) is masked
    before the cut to 500 characters, which would leave part of a key it went through."""
    metadata = _field(error, "metadata")
    if not isinstance(metadata, dict):
        return ""
    said = metadata.get("raw") or metadata.get("reasons")
    if not said:
        return ""
    said = unkeyed(said if isinstance(said, str) else json.dumps(said, ensure_ascii=False), key)
    provider = metadata.get("provider_name")
    who = f"{provider}: " if isinstance(provider, str) and provider else ""
    return f" ({who}{said[:500]})"


# Error codes a server sends inside a 200 answer (a stream's error event, a failed response) for
# what over HTTP is a status: OpenAI's Responses API names them instead of numbering them.
_NAMED_STATUS = {"server_error": 500, "rate_limit_exceeded": 429}


def in_band_status(error: object) -> int | None:
    """The HTTP status an error object sent inside a 200 answer stands for, or None.

    A stream reports a failure as an event once its 200 headers are out: vLLM and llama.cpp as
    ``{"error": {"code": 500, ...}}``, LiteLLM's proxy with the upstream's status as text
    (``"code": "429"``), Responses as ``response.failed`` / ``error`` with a named code
    (``server_error``, ``rate_limit_exceeded``). Read as the status it stands for, a failure that
    came before the first chunk is retried like the same answer sent as an HTTP status. Without a
    code, the type is read: OpenAI's own server errors come as ``{"type": "server_error", "code":
    null}``."""
    code = _field(error, "code")
    if code is None:
        code = _field(error, "type")
    if isinstance(code, str):
        named = _NAMED_STATUS.get(code.strip().lower())
        if named is not None:
            return named
        digits = code.strip()
        # a status has three digits: int() of thousands of them raises (Python's 4,300 limit)
        code = int(digits) if len(digits) <= 6 and digits.isascii() and digits.isdigit() else None
    if isinstance(code, bool) or not isinstance(code, int):
        return None
    return code if 400 <= code <= 599 else None


def unusable_reply(reply: object, what: str, key: str | None = None) -> ModelError:
    """The error for a successful (HTTP 200) answer that is not the object asked for.

    A body that is not JSON reaches the adapter as text (the SDK hands it over as it came); a JSON
    body holding an ``error`` object (some proxies and servers answer an overload that way) is quoted,
    since the server's own message says more than a missing field does, and its code read as the
    status it stands for (``in_band_status``: OpenRouter's ``"code": 502`` or ``429`` for the
    provider behind it), so that an overload is retried as the same answer with that status is.
    ``what`` names the missing part, e.g. "a chat completion without choices". ``key`` (the
    model's API key) is masked before what is quoted is cut, which would leave part of a key it
    went through for the model not to find.
    """
    if isinstance(reply, str):
        return ModelError(f"the server's answer is not JSON: {unkeyed(reply, key)[:200]!r}")
    error = _field(reply, "error")
    if isinstance(error, str) and error.strip():
        # the error as text, as Hugging Face's TGI sends it ({"error": ..., "error_type": ...})
        return ModelError(f"the server answered with an error: {unkeyed(error, key)[:500]}")
    message = _field(error, "message") if error is not None else None
    if isinstance(message, str) and message:
        return ModelError(
            f"the server answered with an error: {message}{error_detail(error, key)}",
            status=in_band_status(error),
        )
    return ModelError(f"the server returned {what}")


def reasoning_of(obj: object) -> str:
    """Reasoning text a server attached to a message or delta.

    vLLM and llama.cpp call it ``reasoning_content``; Ollama, OpenRouter and newer vLLM call it
    ``reasoning``. Neither is part of the SDK's types, so both arrive as pydantic extras.
    """
    # Read the field dicts instead of getattr: a missing attribute on an SDK model goes through
    # pydantic's __getattr__ and a raised AttributeError, ~4 µs a time, twice per streamed chunk.
    fields = getattr(obj, "__dict__", None) or {}
    extra = getattr(obj, "__pydantic_extra__", None) or {}
    for key in ("reasoning_content", "reasoning"):
        value = fields.get(key) or extra.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def usage_of(usage: object, input_key: str, output_key: str) -> Usage | None:
    """Token counts from an SDK usage object whose input/output fields have the given names (and
    whose input details, ``<input_key>_details.cached_tokens``, count the prompt-cache hits, or,
    from DeepSeek, which sends no such details, ``prompt_cache_hit_tokens``; whose output
    details, ``<output_key>_details.reasoning_tokens``, count a reasoning model's thinking)."""
    if usage is None:
        return None
    prompt = getattr(usage, input_key, None)
    completion = getattr(usage, output_key, None)
    total = getattr(usage, "total_tokens", None)
    cached = getattr(getattr(usage, f"{input_key}_details", None), "cached_tokens", None)
    if not isinstance(cached, int):  # the SDK keeps fields it does not know as extras
        cached = field_of(usage, "prompt_cache_hit_tokens")
    reasoning = getattr(getattr(usage, f"{output_key}_details", None), "reasoning_tokens", None)
    prompt = prompt if isinstance(prompt, int) else 0
    completion = completion if isinstance(completion, int) else 0
    total = total if isinstance(total, int) else prompt + completion
    cached = cached if isinstance(cached, int) and cached > 0 else 0
    reasoning = reasoning if isinstance(reasoning, int) and reasoning > 0 else 0
    if (
        type(prompt) is int
        and type(completion) is int
        and type(total) is int
        and type(cached) is int
        and type(reasoning) is int
    ):  # what a server's JSON gives: built as validation would, without it (~1-2 µs a reply)
        return _new_usage(
            {
                "input_tokens": prompt,
                "output_tokens": completion,
                "total_tokens": total,
                "cached_input_tokens": cached,
                "reasoning_output_tokens": reasoning,
            },
            {
                "input_tokens",
                "output_tokens",
                "total_tokens",
                "cached_input_tokens",
                "reasoning_output_tokens",
            },
        )
    return Usage(  # a bool (an int to isinstance) is validated into the int it stands for
        input_tokens=prompt,
        output_tokens=completion,
        total_tokens=total,
        cached_input_tokens=cached,
        reasoning_output_tokens=reasoning,
    )


_new_usage = fast_builder(Usage)


def field_of(obj: object, name: str) -> object:
    """``getattr(obj, name, None)`` for a field or extra of an SDK response object, which is a
    pydantic model keeping the fields its types do not know as extras: read from its dicts, as a
    name the model lacks (the Responses API's ``Response`` has no ``system_fingerprint``; most
    servers send no ``prompt_cache_hit_tokens``) goes through pydantic's ``__getattr__`` and an
    ``AttributeError`` raised and caught, ~2-4 µs a read. Any other object is read by
    ``getattr``."""
    extra = getattr(obj, "__pydantic_extra__", None)
    if type(extra) is not dict:
        return getattr(obj, name, None)
    value = obj.__dict__.get(name)
    return value if value is not None else extra.get(name)


TOOL_FIELDS = ("tool_choice", "parallel_tool_calls")
"""Fields that speak only of tools, left out of a request without tools (also from ``extra``).
OpenAI's Chat Completions answers either there with a 400 ("'parallel_tool_calls' is only
allowed when 'tools' are specified"); its Responses API (and vLLM's, and Azure's) a
``tool_choice`` of ``"required"`` or naming a function ("Tool choice 'required' must be
specified with 'tools' parameter", "Tool choice 'add' not found in 'tools' parameter"). Options
shared by agents with and without tools (run-wide model options, AutoGen's
``parallel_tool_calls=False`` on the one client every agent uses, a ``before_model`` callback
that takes the tools away) would otherwise fail the agents without; with no tool to choose or
call in parallel they say nothing."""


def without_tool_fields(extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` (a copy) without :data:`TOOL_FIELDS`, for a request without tools."""
    return {key: value for key, value in extra.items() if key not in TOOL_FIELDS}


def function_choice_name(choice: str | dict[str, Any]) -> str | None:
    """The tool name a ``tool_choice`` forces, or None for auto/none/required/other shapes.

    A bare string other than auto/none/required is read as a tool name, which is what a user writing
    ``tool_choice="get_weather"`` means. Dicts in either wire shape are recognised.
    """
    if isinstance(choice, str):
        return None if choice in _STANDARD_CHOICES else choice
    if choice.get("type") == "function":
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else choice.get("name")
        return name if isinstance(name, str) else None
    return None


def json_schema_of(response_format: dict[str, Any]) -> dict[str, Any] | None:
    """``response_format`` as ``{"name", "schema", "strict"?}``, or None if it is already wire-shaped.

    Accepts the documented ``{"name": ..., "schema": {...}, "strict": bool}`` (plus an optional
    ``description``, which both APIs show the model), a bare JSON schema
    (``{"type": "object", ...}``) and, for convenience, the Chat wire shape
    ``{"type": "json_schema", "json_schema": {...}}``. Other ``type`` values (``json_object``,
    ``text``) return None so callers pass them through as the user wrote them.
    """
    kind = response_format.get("type")
    if kind == "json_schema" and isinstance(response_format.get("json_schema"), dict):
        spec: dict[str, Any] = response_format["json_schema"]
    elif kind in _WIRE_FORMATS:
        return None
    elif "schema" in response_format:
        spec = response_format
    elif _SCHEMA_KEYS.intersection(response_format):
        spec = {"schema": response_format}
    else:
        spec = {}
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise ValueError(
            "ModelOptions.response_format must be {'name': ..., 'schema': {...JSON schema...}} "
            f"or a JSON schema; got {response_format!r}"
        )
    out: dict[str, Any] = {"name": spec.get("name") or "response", "schema": schema}
    if spec.get("description"):
        out["description"] = spec["description"]
    if spec.get("strict") is not None:
        out["strict"] = bool(spec["strict"])
    return out


_WIRE_ID = re.compile(r"[A-Za-z0-9_-]{1,64}").fullmatch

FITTING_IDS: dict[str, None] = {}
"""Tool-call ids ``fits_wire`` found fitting, at most ``_FITTING_KEPT`` (emptied when full):
a conversation sends every id again at each request, and a look here (~0.2k instructions)
costs a tenth of the pattern's match. Callers ask ``call_id in FITTING_IDS or
fits_wire(call_id)``."""

_FITTING_KEPT = 4096


def fits_wire(call_id: str) -> bool:
    """Whether a tool-call id goes to a server as it is: letters, digits, ``_`` and ``-``, 1 to
    64 of them, the ids Anthropic and AWS Bedrock take (``tool_use.id: String should match
    pattern '^[a-zA-Z0-9_-]+$'``, also behind OpenRouter, LiteLLM or another OpenAI-compatible
    proxy; some proxies refuse more than 64). OpenAI's ``call_...``, vLLM's
    ``chatcmpl-tool-...``, Anthropic's ``toolu_...`` and the ids pyadk makes (``call_0``,
    ``<id>-<n>``) fit; an id made by an earlier pyadk (``<id>~<n>``, in a checkpoint or a saved
    history), a server's with ``.``, ``:`` or ``|`` in it, or a longer one, does not."""
    if _WIRE_ID(call_id) is None:
        return False
    if len(FITTING_IDS) >= _FITTING_KEPT:
        FITTING_IDS.clear()
    FITTING_IDS[call_id] = None
    return True


_NOT_WIRE = re.compile(r"[^A-Za-z0-9_-]")

_BASE62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def base62(data: bytes, length: int) -> str:
    """``length`` letters and digits made from the first 8 bytes of ``data`` (a digest)."""
    number = int.from_bytes(data[:8], "big")
    out = []
    for _ in range(length):
        number, digit = divmod(number, 62)
        out.append(_BASE62[digit])
    return "".join(out)


def _wire_form(call_id: str, salt: int) -> str:
    """``call_id`` as an id that fits (``fits_wire``): its first 24 characters, each that does not
    fit made ``_`` (``call`` for an empty id), ``-`` and 10 letters and digits of the SHA-256 of
    the id (with ``salt`` before it, past 0), at most 35 characters (OpenAI itself takes at most
    40 in a Chat request)."""
    head = _NOT_WIRE.sub("_", call_id[:24]) or "call"
    text = call_id if not salt else f"{salt}\n{call_id}"
    return f"{head}-{base62(hashlib.sha256(text.encode('utf-8', 'surrogatepass')).digest(), 10)}"


def wire_call_ids(messages: Sequence[Message]) -> dict[str, str]:
    """Each tool-call id of ``messages`` (an assistant's call or a tool message's) that does not
    fit (``fits_wire``), with the id it is sent as: made from the id alone (``_wire_form``), so a
    call and its result, sent apart, and every later request carry the same, unless that is an id
    of the request already (one sent as it is, or another's made so), when it is made again with a
    salt; the ids are taken in sorted order, so the request's order does not matter. Read only
    for a request holding such an id to a server that refused one (``fit_ids``): the adapters
    call it at the first one they meet."""
    fitting: set[str] = set()
    odd: set[str] = set()
    for message in messages:
        ids = [call.id for call in message.tool_calls]
        if message.tool_call_id is not None:
            ids.append(message.tool_call_id)
        for call_id in ids:
            (fitting if call_id in FITTING_IDS or fits_wire(call_id) else odd).add(call_id)
    out: dict[str, str] = {}
    for call_id in sorted(odd):
        salt = 0
        wire = _wire_form(call_id, salt)
        while wire in fitting:
            salt += 1
            wire = _wire_form(call_id, salt)
        fitting.add(wire)
        out[call_id] = wire
    return out


def require_tool_call_id(message: Message, position: int) -> str:
    if not message.tool_call_id:
        raise ValueError(
            f"messages[{position}] is a tool result without tool_call_id; build it with "
            "Message.tool(content, tool_call_id=<the id of the call it answers>)"
        )
    return message.tool_call_id


def unknown_role(message: Message, position: int) -> ValueError:
    roles = ", ".join(r.value for r in Role)
    return ValueError(f"messages[{position}] has role {message.role!r}; expected one of {roles}")


# metadata key -> the response's field: what the server said about the answer itself.
_IDENTITY = (
    ("response_model", "model"),
    ("response_id", "id"),
    ("service_tier", "service_tier"),
    ("system_fingerprint", "system_fingerprint"),
)


def identity_of(response: Any) -> dict[str, str]:
    """``response_model`` (the model that actually answered), ``response_id``, ``service_tier``
    (the tier that processed the request, which a request for ``auto`` or ``flex`` does not
    tell: it is what the call is billed at) and ``system_fingerprint`` (the backend
    configuration, which with a ``seed`` says whether answers can be compared) of a response,
    completion or stream chunk, as far as the server said them; tracing reports them all."""
    identity: dict[str, str] = {}
    # ``field_of``'s reads, its dicts taken once: a call of it per name costs more than them
    extra = getattr(response, "__pydantic_extra__", None)
    fields = response.__dict__ if type(extra) is dict else None
    for key, attribute in _IDENTITY:
        if fields is None or extra is None:
            value = getattr(response, attribute, None)
        else:
            value = fields.get(attribute)
            if value is None:
                value = extra.get(attribute)
        if isinstance(value, str) and value:
            identity[key] = value
    return identity


def response_identity(message: Message, response: Any) -> None:
    """Record :func:`identity_of` ``response`` in ``message.metadata``."""
    message.metadata.update(identity_of(response))


# -- parts (images, sounds, files) on the wire ---------------------------------------------------
def data_url(mime_type: str, data: bytes) -> str:
    """``data`` as the ``data:`` URL both APIs take for an image or a file's bytes."""
    return f"data:{mime_type};base64,{base64.b64encode(data).decode('ascii')}"


def _web_uri(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


_IMAGES = frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"})
"""The images both APIs take (``image_url``, ``input_image``), by :func:`_essence`; another (an
SVG chart, a TIFF) is refused with the whole request, so it is sent as its placeholder text."""

_MISSPELT = {"image/jpg": "image/jpeg"}
"""Types by a name the registry lacks, which a server checking a ``data:`` URL's type refuses."""


def _essence(mime: str) -> str:
    """``mime`` as the type it names, in the form sent: its ``type/subtype`` in lower case without
    parameters (a MIME type is case-insensitive and may carry them: ``image/png; charset=binary``,
    ``IMAGE/PNG``), ``image/jpg`` as ``image/jpeg``. Read per part, as is a ``data:`` URL's type:
    OpenAI checks that type against the ones it takes, and others refuse ``image/jpg``."""
    essence = mime.partition(";")[0].strip().lower()
    return _MISSPELT.get(essence, essence)


_RESPONSES_FILES = frozenset(
    {
        "application/pdf",
        "application/json",
        "application/xml",
        "application/rtf",
        "application/msword",
        "application/vnd.ms-excel",
        "application/vnd.ms-powerpoint",
        "application/vnd.oasis.opendocument.text",
    }
)
_OFFICE = "application/vnd.openxmlformats-officedocument."  # .docx, .xlsx, .pptx


def _responses_file(mime: str) -> bool:
    """Whether Responses' ``input_file`` takes a file of type ``mime`` (an :func:`_essence`):
    the kinds OpenAI's file-inputs guide lists, PDFs, text and code (``text/...``, JSON, XML),
    rich documents, presentations and spreadsheets. Another (an MCP server's blob of no stated
    type, ``application/octet-stream``; an archive; a video) is refused with the whole request."""
    return mime in _RESPONSES_FILES or mime.startswith(("text/", _OFFICE))


_CHAT_AUDIO = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
"""The audio Chat Completions takes (``input_audio``'s formats), by :func:`_essence`."""


def chat_part(part: ImagePart | AudioPart | FilePart) -> dict[str, Any]:
    """``part`` as a Chat Completions content part: an image (PNG, JPEG, WebP, GIF) as
    ``image_url``, a sound as
    ``input_audio`` (wav and mp3 only), a PDF's bytes as ``file``; what the API cannot take
    (other audio, other files, which its ``file`` refuses, a file known only by a URI that is
    not an image on the web) as its placeholder text, so the request is never refused for it.
    A type is read, and a ``data:`` URL's written, as :func:`_essence`."""
    mime, data = _essence(part.mime_type), part.data
    if data is None:  # a FilePart with a uri only
        uri = part.uri if isinstance(part, FilePart) else None
        if uri is not None and mime in _IMAGES and _web_uri(uri):
            return {"type": "image_url", "image_url": {"url": uri}}
        return {"type": "text", "text": part_placeholder(part)}
    if mime.startswith("image/"):
        if mime not in _IMAGES:
            return {"type": "text", "text": part_placeholder(part)}
        return {"type": "image_url", "image_url": {"url": data_url(mime, data)}}
    if mime.startswith("audio/"):
        fmt = _CHAT_AUDIO.get(mime)
        if fmt is None:
            return {"type": "text", "text": part_placeholder(part)}
        encoded = base64.b64encode(data).decode("ascii")
        return {"type": "input_audio", "input_audio": {"data": encoded, "format": fmt}}
    if mime != "application/pdf":  # Chat's ``file`` takes PDFs only and refuses the request
        return {"type": "text", "text": part_placeholder(part)}
    name = part.name if isinstance(part, FilePart) and part.name else "file"
    return {"type": "file", "file": {"file_data": data_url(mime, data), "filename": name}}


def responses_part(part: ImagePart | AudioPart | FilePart) -> dict[str, Any]:
    """``part`` as a Responses input content item (in a message's content or a
    ``function_call_output``'s output): ``input_image`` (PNG, JPEG, WebP, GIF), ``input_file``
    (the types :func:`_responses_file` says it takes); audio, which a function's output cannot
    hold, another image type and another file, as its placeholder text. A type is read, and a
    ``data:`` URL's written, as :func:`_essence`."""
    mime, data = _essence(part.mime_type), part.data
    if data is None:  # a FilePart with a uri only
        uri = part.uri if isinstance(part, FilePart) else None
        if uri is not None and _web_uri(uri):
            if _responses_file(mime):
                return {"type": "input_file", "file_url": uri}
            if mime in _IMAGES:
                return {"type": "input_image", "image_url": uri}
        return {"type": "input_text", "text": part_placeholder(part)}
    if mime.startswith("image/"):
        if mime not in _IMAGES:
            return {"type": "input_text", "text": part_placeholder(part)}
        return {"type": "input_image", "image_url": data_url(mime, data)}
    if not _responses_file(mime):  # audio, which a function's output cannot hold, too
        return {"type": "input_text", "text": part_placeholder(part)}
    name = part.name if isinstance(part, FilePart) and part.name else "file"
    return {"type": "input_file", "file_data": data_url(mime, data), "filename": name}


def results_in_call_order(
    out: list[dict[str, Any]],
    rounds: list[tuple[int, list[str]]],
    field: str,
    kind: str,
    id_field: str,
) -> None:
    """Sort, in place, the tool results in ``out`` that answer each of ``rounds``' calls into
    the calls' order: ``(start, ids)`` says the results of the calls ``ids`` (in the reply's
    order, as sent) begin at ``out[start]``, a run of items whose ``field`` is ``kind`` and
    ``id_field`` the id of the call each answers. A conversation holds a round's results in the
    order they finished (a call answered on resume after the round's others, a slow call after a
    fast one); OpenAI pairs them by id, but not every server behind an OpenAI-compatible
    endpoint does: Gemini's function responses are reported to be matched to its calls by
    order, Bedrock's toolResult blocks to be refused out of its toolUse order, and a chat
    template that renders results without their ids leaves the model to pair them by position.
    A run with an id that none or two of the calls have, or answered twice, is left as it is:
    the server's refusal, if any, then names it as it was given. Only for replies of more than
    one call: a model request's other messages cost nothing more."""
    size = len(out)
    for start, ids in rounds:
        end = start
        while end < size and out[end].get(field) == kind:
            end += 1
        if end - start < 2:
            continue
        if end - start == len(ids):
            # the common case, every call answered in its order: a plain loop, no frame (this
            # runs per model call for each multi-call round of the whole history)
            at = start
            for call_id in ids:
                if out[at][id_field] != call_id:
                    break
                at += 1
            else:
                continue
        if len(set(ids)) != len(ids):  # two calls share an id: which result answers which is moot
            continue
        by_id = {item[id_field]: item for item in out[start:end]}
        if len(by_id) != end - start:  # a call answered twice
            continue
        placed = [by_id[call_id] for call_id in ids if call_id in by_id]
        if len(placed) == end - start:  # else a result answers none of the calls: as given
            out[start:end] = placed


def ids_as_sent(messages: Sequence[Message], *, fit_ids: bool) -> Callable[[str], str]:
    """How each tool-call id of ``messages`` goes on the wire, the same for a call and its
    result (Chat) or output (Responses): as it is, or with ``fit_ids`` (a server that refused an
    id) made to fit when it does not (``fits_wire``), as ``wire_call_ids`` maps the ids of
    ``messages`` (mapped once, when the first such id is met)."""
    if not fit_ids:
        return _as_it_is
    wire_ids: dict[str, str] | None = None

    def fitted(call_id: str) -> str:
        nonlocal wire_ids
        if call_id in FITTING_IDS or fits_wire(call_id):
            return call_id
        # rare: an id an earlier pyadk made (``<id>~<n>``), a server's with ``:``
        if wire_ids is None:
            wire_ids = wire_call_ids(messages)
        return wire_ids[call_id]

    return fitted


def _as_it_is(call_id: str) -> str:
    return call_id
