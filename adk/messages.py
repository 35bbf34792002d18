"""Provider-neutral chat messages in OpenAI shape.

Messages are pydantic models so they validate input and serialise into checkpoints. (The framework
uses the normal validating constructors: pydantic's Rust validation is several times faster than
``model_construct``, which is Python.)
``ToolCall.arguments`` stays the raw JSON text the model produced; parsing happens at the tool, so a
malformed call becomes an error result for the model instead of a crash here.

No ``from __future__ import annotations`` here: with it pydantic would compile every field's
annotation string when these models are created at ``import adk`` (~40 µs a field, ~1 ms for this
module). Forward references in method signatures are quoted instead.
"""

import base64
import binascii
from collections.abc import Iterable, Iterator, Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from ._fastmodel import fast_builder

__all__ = [
    "AudioPart",
    "FilePart",
    "ImagePart",
    "Message",
    "MessageChunk",
    "Part",
    "Role",
    "ToolCall",
    "ToolCallChunk",
    "Usage",
    "join_chunks",
]


class Role(StrEnum):
    """Who a message is from. A ``StrEnum``, so members equal the OpenAI role strings
    (``Role.USER == "user"``)."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


# Enum members looked up once: ``Role.USER`` costs a metaclass lookup on every message built.
_SYSTEM, _USER, _ASSISTANT, _TOOL = Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL


class Usage(BaseModel):
    """Token counts of one model call (or a sum of several). ``cached_input_tokens`` are the input
    tokens the provider served from its prompt cache (billed lower): part of ``input_tokens``, as
    OpenAI counts them; 0 when none were, or the provider does not say.
    ``reasoning_output_tokens`` are the output tokens a reasoning model spent thinking (billed as
    output, never shown): part of ``output_tokens``; 0 when none were, or the provider does not
    say. ``total_tokens`` left out (or 0) with input or output tokens given is their sum, as a
    model reporting only those two (a scripted or custom one) means; one given is kept as it is
    (a provider may count more, or only a total)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_output_tokens: int = 0

    @model_validator(mode="after")
    def _total_of_its_parts(self) -> "Usage":
        # Only where a Usage is validated (built by hand, read back): the OpenAI adapters build
        # theirs without validation (``fast_builder``), their total worked out already.
        if not self.total_tokens and (self.input_tokens or self.output_tokens):
            self.__dict__["total_tokens"] = self.input_tokens + self.output_tokens
            self.__pydantic_fields_set__.add("total_tokens")
        return self

    def __add__(self, other: "Usage") -> "Usage":
        # Built without validation: each side's total is already its own (the validator above).
        return _new_usage(
            {
                "input_tokens": self.input_tokens + other.input_tokens,
                "output_tokens": self.output_tokens + other.output_tokens,
                "total_tokens": self.total_tokens + other.total_tokens,
                "cached_input_tokens": self.cached_input_tokens + other.cached_input_tokens,
                "reasoning_output_tokens": (
                    self.reasoning_output_tokens + other.reasoning_output_tokens
                ),
            },
            set(_USAGE_FIELDS),
        )


_USAGE_FIELDS = frozenset(Usage.model_fields)
_new_usage = fast_builder(Usage)


class _JSONText:
    """The schema of ``ToolCall.arguments``: a str, whose refusal tells a caller building a call
    by hand (the dict itself, say) to give JSON text, not pydantic's bare "Input should be a
    valid string". The custom error is pydantic-core's own wrapper: a valid str costs no Python
    call (a validator would cost one per call built, and calls are built per model turn)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema  # loaded already (pydantic's own)

        return core_schema.custom_error_schema(
            handler(source),
            "json_text",
            custom_error_message=(
                "Input should be the arguments as JSON text (a str): for a dict, give "
                "json.dumps(arguments)"
            ),
        )


class ToolCall(BaseModel):
    """A tool invocation requested by the model; ``arguments`` is raw JSON text. The model
    adapters (and ``join_chunks``) give empty arguments as ``{}``, except the last call's of a
    reply cut at its token limit (``finish_reason`` ``length``), which stay empty: the reply
    was cut before any of them came, and a ``ReActAgent`` answers the call as cut."""

    model_config = ConfigDict(defer_build=True)

    id: str
    name: str
    arguments: Annotated[str, _JSONText] = "{}"


def _bytes_in(value: Any) -> Any:
    """A part's ``data`` given as text is base64 (as MCP and JSON carry it), decoded here; bytes
    pass as they are."""
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("data given as text must be base64") from None
    return value


def _bytes_out(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


class _Base64:
    """The schema of a part's ``data``: ``_bytes_in`` before pydantic's ``bytes``, ``_bytes_out``
    to JSON. What ``BeforeValidator(_bytes_in)`` with ``PlainSerializer(_bytes_out,
    return_type=str, when_used="json")`` make, written as the core schema itself because
    importing ``PlainSerializer`` (``pydantic.functional_serializers``) cost ``import adk`` 8.9M
    instructions, more than all of adk's models (docs/performance.md, round 13)."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema  # loaded already (pydantic's own)

        return core_schema.no_info_before_validator_function(
            _bytes_in,
            handler(source),
            serialization=core_schema.plain_serializer_function_ser_schema(
                _bytes_out, return_schema=core_schema.str_schema(), when_used="json"
            ),
        )


_Data = Annotated[bytes, _Base64]
"""A part's bytes: raw in Python, base64 text in JSON (a checkpoint, an event's ``to_dict``)."""


class _BinaryPart(BaseModel):
    """What the three parts share: immutable, and a repr that gives the size of the data rather
    than the bytes (a screenshot's repr was megabytes in a log line)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            if name == "data" and isinstance(value, bytes):
                yield name, _Size(len(value))
            else:
                yield name, value


def _of_kind(mime_type: str, kind: str, part: type) -> str:
    """``mime_type`` if it is a ``kind/...`` type, else the error naming the part: an image sent
    as ``application/pdf`` would reach the model as an image it cannot read."""
    if not mime_type.startswith(kind + "/"):
        raise ValueError(f"an {part.__name__}'s mime_type is an {kind}/... type, not {mime_type!r}")
    return mime_type


class _Size(int):
    def __repr__(self) -> str:
        return f"<{int(self)} bytes>"


class ImagePart(_BinaryPart):
    """An image a message carries: ``data`` is its bytes (base64 text is decoded), ``mime_type``
    an ``image/...`` type (``image/png``, ``image/jpeg``...)."""

    type: Literal["image"] = "image"
    mime_type: str
    data: _Data

    @field_validator("mime_type")
    @classmethod
    def _image_type(cls, value: str) -> str:
        return _of_kind(value, "image", cls)


class AudioPart(_BinaryPart):
    """A sound a message carries: ``data`` is its bytes, ``mime_type`` an ``audio/...`` type."""

    type: Literal["audio"] = "audio"
    mime_type: str
    data: _Data

    @field_validator("mime_type")
    @classmethod
    def _audio_type(cls, value: str) -> str:
        return _of_kind(value, "audio", cls)


class FilePart(_BinaryPart):
    """A file a message carries (a PDF, a CSV, an MCP server's binary resource): its ``data``, or
    a ``uri`` where it is, or both; ``name`` is its file name when known."""

    type: Literal["file"] = "file"
    mime_type: str = "application/octet-stream"
    data: _Data | None = None
    uri: str | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _somewhere(self) -> "FilePart":
        if self.data is None and self.uri is None:
            raise ValueError("a FilePart needs its data or a uri")
        return self


Part = Annotated[ImagePart | AudioPart | FilePart, Field(discriminator="type")]
"""What ``Message.parts`` and ``ToolResult.parts`` hold: an image, a sound or a file."""


def _no_parts(parts: tuple[Any, ...]) -> bool:
    return not parts


def _shown_args(
    args: Iterable[tuple[str | None, Any]],
) -> Iterator[tuple[str | None, Any]]:
    """A model's ``__repr_args__`` without ``parts=()`` (a ``Message``'s, a ``ToolResult``'s):
    not in every repr (logs, doctests, a callback printing one), shown when it holds some."""
    for name, value in args:
        if name != "parts" or value:
            yield name, value


def part_placeholder(part: "ImagePart | AudioPart | FilePart") -> str:
    """The text standing for ``part`` where only text goes (``content``, a model that takes no
    parts): the placeholders MCP results always had."""
    if isinstance(part, ImagePart):
        return f"[image: {part.mime_type}]"
    if isinstance(part, AudioPart):
        return f"[audio: {part.mime_type}]"
    if part.uri is not None:
        return f"[resource: {part.uri} ({part.mime_type})]"
    return f"[file: {part.name or 'unnamed'} ({part.mime_type})]"


def parts_as_text(content: str, parts: "tuple[ImagePart | AudioPart | FilePart, ...]") -> str:
    """``content`` with the placeholder of each of ``parts`` it does not already hold appended, a
    line each: the text a reader of text alone is given (a model told ``parts="text"``; an
    ``AgentTool``'s result, for the agents reading the history). A tool's result keeps one for
    each of its parts (``[image: image/png]``), so it is as it is; a user's message does not, and
    gets them."""
    wanted = [part_placeholder(part) for part in parts]
    extra: list[str] = []
    for placeholder in dict.fromkeys(wanted):
        missing = wanted.count(placeholder) - content.count(placeholder)
        extra.extend([placeholder] * missing)
    if not extra:
        return content
    return "\n".join([content, *extra] if content else extra)


class Message(BaseModel):
    """One chat message. ``name`` carries the tool name on tool messages. ``parts`` holds the
    images, sounds and files it carries beside its text (``content`` keeps a placeholder for each
    where a model takes text only); empty for most messages, and then left out of its dumps."""

    model_config = ConfigDict(defer_build=True)

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    reasoning: str | None = None
    usage: Usage | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    parts: tuple[Part, ...] = Field(default=(), exclude_if=_no_parts)

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        return _shown_args(super().__repr_args__())

    @classmethod
    def system(cls, text: str) -> "Message":
        """A system message with ``text``. Called on ``Message`` with an exact ``str``, it is built
        without validation (same result, about half the cost of ``Message(role=...)``)."""
        if cls is Message and type(text) is str:
            return _built(_SYSTEM, text)
        return cls(role=_SYSTEM, content=text)

    @classmethod
    def user(
        cls, text: str, *, parts: Iterable["ImagePart | AudioPart | FilePart"] = ()
    ) -> "Message":
        """A user message with ``text`` (built like ``system``), and the ``parts`` (images,
        sounds, files) it carries."""
        if not parts and cls is Message and type(text) is str:
            return _built(_USER, text)
        if parts:
            return cls(role=_USER, content=text, parts=tuple(parts))
        return cls(role=_USER, content=text)

    @classmethod
    def assistant(
        cls,
        text: str = "",
        tool_calls: Iterable[ToolCall] = (),
        *,
        usage: Usage | None = None,
        reasoning: str | None = None,
    ) -> "Message":
        """An assistant message: ``text`` and/or ``tool_calls`` (any iterable, stored as a list),
        with the ``usage`` and ``reasoning`` the model reported."""
        if not tool_calls and usage is None and reasoning is None:
            if cls is Message and type(text) is str:
                return _built(_ASSISTANT, text)
            return cls(role=_ASSISTANT, content=text)  # fewer fields to validate: the common case
        return cls(
            role=_ASSISTANT,
            content=text,
            tool_calls=list(tool_calls),
            usage=usage,
            reasoning=reasoning,
        )

    @classmethod
    def tool(
        cls,
        content: str,
        *,
        tool_call_id: str,
        name: str | None = None,
        parts: Iterable["ImagePart | AudioPart | FilePart"] = (),
    ) -> "Message":
        """A tool result: ``tool_call_id`` is the id of the assistant's ``ToolCall`` it answers;
        ``name`` is the tool's name (events expose it as ``tool_name``); ``parts`` the images,
        sounds and files it returned."""
        if parts:
            return cls(
                role=_TOOL,
                content=content,
                tool_call_id=tool_call_id,
                name=name,
                parts=tuple(parts),
            )
        if cls is Message:
            return tool_message(content, tool_call_id, name)
        return cls(role=_TOOL, content=content, tool_call_id=tool_call_id, name=name)


# Messages of plain text are built for every model turn, tool result and event; pydantic's
# validating constructor costs about twice what building the instance directly does. The builders
# are only called with arguments that validation would pass through unchanged (a ``Role`` member,
# exact ``str`` values) and make an instance equal in every respect to the validated one; a test
# holds them to that. ``fast_builder`` falls back to validation if pydantic's layout changes.
_new_message = fast_builder(Message)


def _built(role: Role, text: str) -> Message:
    return _new_message(
        {
            "role": role,
            "content": text,
            "tool_calls": [],
            "tool_call_id": None,
            "name": None,
            "reasoning": None,
            "usage": None,
            "metadata": {},
            "parts": (),
        },
        {"role", "content"},
    )


def _built_tool(content: str, tool_call_id: str, name: str | None) -> Message:
    return _new_message(
        {
            "role": _TOOL,
            "content": content,
            "tool_calls": [],
            "tool_call_id": tool_call_id,
            "name": name,
            "reasoning": None,
            "usage": None,
            "metadata": {},
            "parts": (),
        },
        {"role", "content", "tool_call_id", "name"},
    )


def tool_message(content: str, tool_call_id: str, name: str | None) -> Message:
    """``Message.tool(content, tool_call_id=tool_call_id, name=name)``: the framework makes one
    for every tool call, and calls this rather than the classmethod, whose lookup and binding
    cost more than building the message (see ``_built``)."""
    if type(content) is str and type(tool_call_id) is str and (name is None or type(name) is str):
        return _built_tool(content, tool_call_id, name)
    return Message(role=_TOOL, content=content, tool_call_id=tool_call_id, name=name)


_CALL_ID_MARK = "-"
"""What joins a call id and the number that makes it a call's own (``<id>-<n>``). Tool-call ids
pyadk makes are letters, digits, ``_`` and ``-`` only, as Anthropic and AWS Bedrock take them
(``^[a-zA-Z0-9_-]+$``, also behind an OpenAI-compatible proxy): ids made before were
``<id>~<n>``, which a checkpoint or a history saved then still holds (ids are opaque in pyadk;
the OpenAI adapter sends such an id as ``wire_call_ids`` makes it to a server that refused it)."""


def _unique_call_ids(ids: Sequence[str]) -> list[str]:
    """The ids calls of one reply holding ``ids`` have once each has its own: the first of a
    repeated id keeps it, a later one (or an empty one) is ``<id>-<place>`` (``call-<place>``
    for an empty one), a higher number where an id of the reply holds that one already
    (``unique_call_ids`` renames them so). Applied to ids made so, it gives them back unchanged:
    what a reply keeps by call id (``OpenAIChatModel``'s ``tool_call_extra_content``) is kept
    and found by these, whether the calls were renamed or not."""
    seen: set[str] = set()
    out: list[str] = []
    held: set[str] | None = None  # the reply's own ids, read only when one is renamed (rare)
    for index, call_id in enumerate(ids):
        if call_id in seen or not call_id:
            if held is None:
                held = set(ids)
            base, number = call_id or "call", index
            call_id = f"{base}{_CALL_ID_MARK}{number}"
            while call_id in seen or call_id in held:
                number += 1
                call_id = f"{base}{_CALL_ID_MARK}{number}"
        seen.add(call_id)
        out.append(call_id)
    return out


def _old_unique_call_id(call_id: str, index: int) -> str:
    """The id ``_unique_call_ids`` gave the ``index``-th call of a reply, holding ``call_id``,
    before ids were made of letters, digits, ``_`` and ``-`` only: where a reply saved then keeps
    what its server put on its calls (its metadata's keys)."""
    return f"{call_id or 'call'}~{index}"


class ToolCallChunk(BaseModel):
    """A streamed fragment of a tool call; fragments with the same ``index`` form one call."""

    model_config = ConfigDict(defer_build=True)

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


class MessageChunk(BaseModel):
    """One streamed delta of an assistant message. ``metadata`` goes into the joined message's
    ``metadata`` (an adapter puts the response id on its last chunk, say), so a streamed reply can
    record what a non-streamed one does."""

    model_config = ConfigDict(defer_build=True)

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCallChunk] = Field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def join_chunks(chunks: Iterable[MessageChunk]) -> Message:
    """Join streamed deltas into one assistant message.

    Tool-call fragments are grouped by ``index``: id and name are taken once per index (the first
    non-empty value wins, because some servers repeat the name in every fragment) and argument text is
    concatenated. The last usage seen wins (servers report cumulative usage in the final chunk).
    Chunk metadata is merged in order (a later chunk's key wins); ``finish_reason`` comes from the
    chunks' ``finish_reason`` fields. A call none of whose arguments came has ``{}``, but the
    last call of a reply cut at its token limit (``length``), whose arguments stay empty (see
    ``ToolCall``).
    """
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, list[Any]] = {}  # index -> [id, name, [argument parts]]
    usage: Usage | None = None
    finish_reason: str | None = None
    metadata: dict[str, Any] = {}
    for chunk in chunks:
        if chunk.content:
            content.append(chunk.content)
        if chunk.reasoning:
            reasoning.append(chunk.reasoning)
        for frag in chunk.tool_calls:
            slot = calls.get(frag.index)
            if slot is None:
                slot = calls[frag.index] = [None, None, []]
            if frag.id and slot[0] is None:
                slot[0] = frag.id
            if frag.name and slot[1] is None:
                slot[1] = frag.name
            if frag.arguments:
                slot[2].append(frag.arguments)
        if chunk.usage is not None:
            usage = chunk.usage
        if chunk.finish_reason:
            finish_reason = chunk.finish_reason
        if chunk.metadata:
            metadata.update(chunk.metadata)
    tool_calls = [
        ToolCall(
            id=slot[0] or f"call_{index}", name=slot[1] or "", arguments="".join(slot[2]) or "{}"
        )
        for index, slot in sorted(calls.items())
    ]
    if finish_reason == "length" and tool_calls and not calls[max(calls)][2]:
        tool_calls[-1].arguments = ""  # cut before any of its arguments came: see ToolCall
    message = Message.assistant(
        "".join(content), tool_calls, usage=usage, reasoning="".join(reasoning) or None
    )
    if metadata:
        message.metadata.update(metadata)
    if finish_reason:
        message.metadata["finish_reason"] = finish_reason
    return message
