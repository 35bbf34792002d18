"""Structured output against servers that take less than OpenAI's ``json_schema`` response format.

Many OpenAI-compatible servers refuse ``{"type": "json_schema", ...}`` in part or whole: older vLLM,
llama.cpp and Ollama builds and DeepSeek take only ``{"type": "json_object"}``, some proxies refuse
the ``strict`` field, grammar backends refuse schemas with ``$defs`` or ``anyOf``, and OpenAI refuses
a ``strict`` schema that breaks its strict-mode rules. A call asking for a schema then fails with a
400 that names the response format. Rather than fail, the adapter asks again one step down a ladder:

``STRICT`` (as asked) -> ``LOOSE`` (``strict`` left out) -> ``JSON_OBJECT`` (JSON mode, the schema in
the instructions) -> ``INSTRUCTED`` (no response format, the schema in the instructions).

What a refusal teaches is remembered per model instance, so later calls do not pay the refused round
trip again: for the whole server when the refusal is about the format or the ``strict`` field, for
that schema only when it is about the schema's content (another schema may well be accepted).

It is remembered only once the server has accepted the call with less. Reading an error as a
refusal goes by its words, and some errors about something else quote the request: FastAPI-based
servers (vLLM, LiteLLM) echo the whole request, our response format and schema with it, in a
model-level validation error. Such a call goes down the ladder and fails at every step; had each
step been remembered as it was taken, one bad ``max_tokens`` would have kept that schema (or the
server) out of native structured output for the model's lifetime. So each call learns into its own
``FormatFallback`` (its *trial*), and only a call that succeeded hands what it learnt on.

No SDK import here (``import adk`` stays light); ``adk.models.openai`` reads the error for us.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..messages import Message, Role
from ._openai_common import json_schema_of
from .base import ModelOptions

STRICT, LOOSE, JSON_OBJECT, INSTRUCTED = 0, 1, 2, 3

# An error about the response format: its field (Chat's ``response_format``, Responses'
# ``text.format``, a pydantic server's ``loc``), its types, or Gemini's name for the schema.
_ABOUT_FORMAT = re.compile(
    r"response_format|text\.format|[\"']text[\"'],\s*[\"']format[\"']|json[_ ]?schema|json_object"
    r"|response_schema|structured output",
    re.IGNORECASE,
)
# An error about what the schema holds rather than about the format: OpenAI's "Invalid schema for
# response_format ...", vLLM's "The provided JSON schema contains features not supported by
# xgrammar", llama-server's "JSON schema conversion failed: <reason>" (its wrapper for every
# reason its grammar conversion gives, most naming no keyword), keywords a backend does not take.
_SCHEMA_PROBLEM = re.compile(
    r"invalid schema|schema contains|schema conversion failed|features? (?:are )?not supported"
    r"|\$defs|\$ref"
    r"|\b(?:anyOf|oneOf|allOf|additionalProperties|definitions)\b",
    re.IGNORECASE,
)
# The format's field by name: what an error also speaking of tools must say to count.
_FORMAT_FIELD = re.compile(
    r"response_format|text\.format|[\"']text[\"'],\s*[\"']format[\"']", re.IGNORECASE
)
_OTHER_FIELDS = re.compile(r"\b(?:tools?|functions?)\b", re.IGNORECASE)
_STRICT = re.compile(r"\bstrict\b", re.IGNORECASE)
_SCHEMAS_KEPT = 256  # schemas whose own step is remembered, the oldest forgotten first


def json_kind(schema: Mapping[str, Any]) -> str:
    """What a JSON schema's root is, as an instruction names it: "JSON array" for a list (a
    ``RootModel[list[X]]``), "JSON value" for a string, number or boolean, else "JSON object"
    (an object, or a union of objects). Asked for "a JSON object", a model answering a list
    schema wraps the list in one, which the schema refuses."""
    kind = schema.get("type")
    if kind == "array":
        return "JSON array"
    if kind in ("string", "number", "integer", "boolean"):
        return "JSON value"
    return "JSON object"


def schema_instruction(spec: dict[str, Any]) -> str:
    """The instruction that carries a schema the server would not take as a response format. It
    says "JSON": OpenAI refuses JSON mode for a conversation that never mentions the word."""
    about = f" ({spec['description']})" if spec.get("description") else ""
    return (
        f"Reply with only a {json_kind(spec['schema'])} matching this JSON schema{about}, "
        f"without any other text or code fences:\n{json.dumps(spec['schema'], ensure_ascii=False)}"
    )


def _with_instruction(messages: Sequence[Message], text: str) -> list[Message]:
    """``messages`` with ``text`` added to the leading system message (or as one, first): servers
    whose chat templates take one system message, at the start, take this too."""
    if messages and messages[0].role == Role.SYSTEM:
        first = messages[0]
        joined = f"{first.content}\n\n{text}" if first.content else text
        return [first.model_copy(update={"content": joined}), *messages[1:]]
    return [Message.system(text), *messages]


def sent_level(request: dict[str, Any]) -> tuple[int, bool]:
    """The step of the ladder a built request is at, and whether it carried a ``strict`` field
    (even ``false``), read from the request itself: a refusal moves on from what was actually
    sent, even if another call moved the memory meanwhile."""
    if "response_format" in request:
        wire = request["response_format"]
        spec = wire.get("json_schema") if isinstance(wire, dict) else None
    elif isinstance(request.get("text"), dict) and "format" in request["text"]:
        wire = request["text"]["format"]
        spec = wire
    else:
        return INSTRUCTED, False
    if not isinstance(wire, dict) or wire.get("type") != "json_schema":
        return JSON_OBJECT, False
    if not isinstance(spec, dict) or "strict" not in spec:
        return LOOSE, False
    return (STRICT if spec["strict"] else LOOSE), True


class FormatFallback:
    """One model instance's memory of how far down the ladder its server needs calls to go."""

    __slots__ = ("active", "floor", "schemas")

    def __init__(self) -> None:
        self.floor = STRICT  # for every schema: what the server takes at all
        self.schemas: dict[str, int] = {}  # per schema (its JSON): what it takes of that one
        self.active = False  # anything learnt: only then do requests need looking at

    def _level(self, spec: dict[str, Any]) -> int:
        if not self.schemas:
            return self.floor
        return max(self.floor, self.schemas.get(_key(spec), STRICT))

    def apply(
        self,
        messages: Sequence[Message],
        options: ModelOptions,
        trial: FormatFallback | None = None,
    ) -> tuple[Sequence[Message], ModelOptions]:
        """The messages and options to send, a schema's ``response_format`` taken as far down
        the ladder as this server needs, or as this call's ``trial`` has gone. A wire format the
        user wrote (``json_object``) is sent as it is: there is no schema to fall back on."""
        assert options.response_format is not None
        spec = json_schema_of(options.response_format)
        if spec is None:
            return messages, options
        level = self._level(spec)
        if trial is not None:
            level = max(level, trial._level(spec))
        if level == STRICT or (level == LOOSE and "strict" not in spec):
            return messages, options
        if level == LOOSE:
            loose = {key: value for key, value in spec.items() if key != "strict"}
            return messages, options.model_copy(update={"response_format": loose})
        fallback = {"type": "json_object"} if level == JSON_OBJECT else None
        return (
            _with_instruction(messages, schema_instruction(spec)),
            options.model_copy(update={"response_format": fallback}),
        )

    def learn(self, trial: FormatFallback) -> None:
        """Remember what a call that succeeded learnt (its ``trial``). Steps only go down: a call
        that overlapped with another, and learnt less, takes nothing back."""
        if not trial.active:
            return
        self.floor = max(self.floor, trial.floor)
        for key, level in trial.schemas.items():
            self._remember(key, level)
        self.active = True

    def _remember(self, key: str, level: int) -> None:
        if key not in self.schemas and len(self.schemas) >= _SCHEMAS_KEPT:
            del self.schemas[next(iter(self.schemas))]  # schemas made per call: bounded
        self.schemas[key] = max(self.schemas.get(key, STRICT), level)

    def refused(
        self,
        request: dict[str, Any],
        options: ModelOptions | None,
        text: str,
        param: object,
        *,
        field_refused: bool,
    ) -> bool:
        """Whether a 400/422 answer (``text``, the server's ``param``) refuses the response format
        the request asked for a schema with; if so the next step is noted here (True: send the
        call again), in a call's trial (see the module docstring). ``field_refused``: the answer
        speaks of a field the server does not take. Every answer moves at least one step down, so
        a call is sent at most three more times."""
        if options is None or options.response_format is None:
            return False
        spec = json_schema_of(options.response_format)
        if spec is None:
            return False
        if isinstance(param, str) and param:  # OpenAI names the field at fault
            if not param.startswith(("response_format", "text")):
                return False  # another one
            if param.rsplit(".", 1)[-1] in ("name", "description"):
                return False  # a value the format's own fields hold: asking less would not mend
        level, strict_sent = sent_level(request)
        if level == INSTRUCTED or not _ABOUT_FORMAT.search(text):
            return False
        if _OTHER_FIELDS.search(text) and not _FORMAT_FIELD.search(text):
            return False  # "Invalid JSON schema for tool 'x'": a tool's schema, not ours
        schema_problem = _SCHEMA_PROBLEM.search(text) is not None
        if strict_sent and _STRICT.search(text) and (field_refused or not schema_problem):
            self.floor = max(self.floor, LOOSE)  # a server that does not know ``strict``
        elif schema_problem:
            self._remember(_key(spec), level + 1)
        elif field_refused:
            self.floor = INSTRUCTED  # the response format field itself is unknown
        else:
            self.floor = max(self.floor, JSON_OBJECT, level + 1)  # json_schema is not taken
        self.active = True
        return True


def _key(spec: dict[str, Any]) -> str:
    return json.dumps(spec["schema"], sort_keys=True)
