"""Structured output: asking a model for JSON matching a pydantic model, and reading the answer.

Models that support it get the schema natively (``ModelOptions.response_format``); the others get
it in the system instruction. Either way the answer is validated here, because even native
structured output is only as good as the server implementing it, and models without it like to wrap
JSON in Markdown code fences.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from adk import MessageChunk, register_type
from adk.models._structured import json_kind
from adk.tools.base import ToolError

from ._partial_json import PartialJSON
from ._strict import strict_schema

__all__ = [
    "OutputRejected",
    "OutputSchemaError",
    "parse_output",
    "parse_output_json",
    "rejection",
    "response_format",
    "retry_prompt",
    "schema_instruction",
    "stream_output",
]

_Schema = TypeVar("_Schema", bound=BaseModel)

_NOT_IN_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_FENCE_OPENING = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n")  # as a fenced block opens
_FENCE_ARRIVING = re.compile(r"```[A-Za-z0-9_-]*[ \t]*")  # its line not ended yet
_OPENING_TAIL = re.compile(r"[A-Za-z0-9_-]*[ \t]*")  # what continues an arriving opening
_SPACES = re.compile(r"[ \t]*")  # ... once it reached its spaces


class OutputSchemaError(ValueError):
    """The final answer did not match ``output_schema``, even after one retry."""


class OutputRejected(BaseModel):
    """The ``custom`` output a ``ReActAgent`` emits when the model's answer (its event just
    before) does not match ``output_schema`` and the model is asked again: the reply to the
    retry comes next. A client shown the rejected answer, streamed or whole, learns here to drop
    it; its chunks and the corrected answer's would otherwise run on with nothing between.
    Application data, as every custom output: not recorded, no model sees it."""

    # Built on first use, not at import, as prebuilt's and adk's other models (test_import_light).
    model_config = ConfigDict(defer_build=True)

    schema_name: str  # the output schema's class name
    problem: str  # what did not match, as the retry told the model


# Registered so a service can send it with ``AgentEvent.to_dict`` (``custom_type``) and a client
# rebuild it with ``from_dict``; the name is kept stable, as ``prebuilt.Plan``'s.
register_type(OutputRejected, "prebuilt.OutputRejected")


def response_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The ``ModelOptions.response_format`` value asking natively for ``schema``.

    In OpenAI's strict mode where the schema allows it (the server then guarantees the shape):
    pydantic's schema rewritten to strict mode's rules by ``_strict.strict_schema``; a root that
    is not an object (``RootModel[list[X]]``, a union) too, which the OpenAI adapter sends wrapped
    in one and unwraps the answer of. A schema strict mode cannot express (a ``dict`` field, whose
    object takes any key) is sent as pydantic writes it, without ``strict``, rather than be
    refused once first. The name is one
    OpenAI takes (``^[a-zA-Z0-9_-]{1,64}$``: a generic model is named ``Page[int]``)."""
    plain = schema.model_json_schema()
    name = _NOT_IN_NAME.sub("_", schema.__name__)[:64] or "response"
    strict = strict_schema(plain)
    if strict is not None:
        return {"name": name, "schema": strict, "strict": True}
    return {"name": name, "schema": plain}


def schema_instruction(schema: type[BaseModel]) -> str:
    """What to append to the instruction of a model without native structured output."""
    plain = schema.model_json_schema()
    return (
        f"When you give your final answer, reply with only a {json_kind(plain)} matching this "
        f"JSON schema, without any other text or code fences:\n{json.dumps(plain)}"
    )


def _explain(error: ValidationError) -> str:
    problems = error.errors(include_url=False)
    if any(p["type"] == "json_invalid" for p in problems):
        return f"the answer is not valid JSON ({problems[0]['msg']})"
    parts = []
    for p in problems:
        where = ".".join(str(part) for part in p["loc"]) or "the object"
        parts.append(f"{where}: {p['msg']}")
    return "; ".join(parts)


def parse_output(schema: type[BaseModel], text: str) -> tuple[BaseModel | None, str | None]:
    """``(instance, None)`` if ``text`` (or the code-fenced block in it) matches ``schema``,
    else ``(None, why)`` with a short explanation a model can act on."""
    parsed, _, problem = parse_output_json(schema, text)
    return parsed, problem


def parse_output_json(
    schema: type[BaseModel], text: str, context: Any = None
) -> tuple[BaseModel | None, str, str | None]:
    """As ``parse_output``, with the JSON text the instance was read from: ``text`` itself, or
    the fenced block without its fences and the words around it (``text`` when it does not
    match). That is what ``output_key`` stores: a later ``{key}`` or ``json.loads`` reads the
    object, not the Markdown the model wrapped it in. ``context`` is pydantic's validation
    context (``ValidationInfo.context``: a ``ReActAgent`` gives its run options)."""
    try:
        return schema.model_validate_json(text.strip(), context=context), text, None
    except ValidationError as exc:
        first: ValidationError | ToolError = exc
    except ToolError as exc:  # a validator's ModelRetry: its words are the problem
        first = exc
    block = _fenced(text)
    if block is not None:
        try:
            return schema.model_validate_json(block, context=context), block, None
        except (ValidationError, ToolError) as exc:
            first = exc
    return None, text, rejection(first) if isinstance(first, ToolError) else _explain(first)


def _fenced(text: str) -> str | None:
    """The first Markdown-fenced block of ``text`` (between an opening fence's line and the next
    fence), stripped; None without one. Found by searching for the two fences rather than by
    one regex with a lazy body and the closing ``\\n?[ \\t]*`````: that scanned the rest of a
    run of spaces at each character of it, quadratic in the run (300,000 spaces in a model's
    answer held the event loop for minutes). The same block: what precedes the closing fence on
    its line is whitespace the strip drops."""
    opening = _FENCE_OPENING.search(text)
    if opening is None:
        return None
    closing = text.find("```", opening.end())
    if closing < 0:
        return None
    return text[opening.end() : closing].strip()


def rejection(error: ToolError) -> str:
    """The problem a schema's validator raising ``adk.ToolError`` (a Pydantic AI port's
    ``ModelRetry``) gives: its words, or, raised without any, that it rejected the answer: the
    model reads it in the retry prompt, which otherwise said "the required X JSON schema: ."."""
    return str(error) or "the schema's validator rejected it (adk.ToolError without a message)"


def retry_prompt(schema: type[BaseModel], problem: str, *, with_schema: bool = False) -> str:
    """The message that gives the model its one chance to correct an answer.

    ``with_schema`` when the schema went natively: a server may have ignored the response format
    without a word (older Ollama builds, proxies dropping fields they do not know), and then the
    model has never seen the schema it is asked to correct its answer to."""
    prompt = (
        f"Your answer does not match the required {schema.__name__} JSON schema: {problem}. "
        f"Reply again with only the corrected {json_kind(schema.model_json_schema())}."
    )
    if with_schema:
        prompt += f" The schema:\n{json.dumps(schema.model_json_schema())}"
    return prompt


def stream_output(
    stream: AsyncIterable[MessageChunk], schema: type[_Schema], context: Any = None
) -> AsyncIterator[_Schema]:
    """The answer in ``stream`` (a streamed reply's ``MessageStream``, or any async iterable of
    chunks) as instances of ``schema`` while it arrives: after each chunk, the JSON so far is
    completed as pydantic's partial parsing does (open strings, lists and objects closed, a
    string still arriving kept as far as it came) and validated; each instance that validates
    and differs from the last one yielded is yielded. pydantic-ai's ``stream_output()``.

    A partial instance is for showing progress, not acting on: a field whose value is still
    arriving may hold part of it, and one with a default holds the default until its value
    comes. The agent validates the whole answer and emits the instance it trusts as the
    ``custom`` output; an answer that does not match is followed by ``OutputRejected``, and the
    retry's reply streams anew. The answer is read as the agent reads it: as JSON, else the
    first code-fenced block in it (```json), at its start or after some words; text that is
    neither yields nothing. Reading the stream here does not take it from other readers.
    ``context`` is pydantic's validation context, for a schema whose validators read one (the
    agent validates with its run options: pass the same, or what the validators need of them).
    """
    if not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise TypeError(f"stream_output's schema must be a pydantic model class, got {schema!r}")
    return _partials(stream, schema, context)


async def _partials(
    stream: AsyncIterable[MessageChunk], schema: type[_Schema], context: Any
) -> AsyncIterator[_Schema]:
    # Each chunk is scanned once (``PartialJSON``), not the whole answer again; the completed
    # text is validated only when it changed, since the same text gives the same instance.
    # Validating it is the one pass over the whole answer left per chunk: a schema's validators
    # (a model validator, a field validator reading ``info.data``, a discriminated union) see the
    # instance whole, so only validating it whole proves that an instance yielded is valid.
    #
    # The answer is read as the agent reads it whole (``parse_output_json``): as JSON, else the
    # first code-fenced block in it. Once the text is not JSON (words, or the fence itself), it is
    # searched for a fence's opening line, from where the last search could have missed one.
    parser: PartialJSON | None = PartialJSON()
    fenced = False  # the parser reads the block of a fence, not the answer from its start
    prose = ""  # the answer, once it is not JSON and while no fence opened in it
    searched = 0  # where in ``prose`` the search for a fence goes on
    # Whether a fence's opening line is arriving at ``searched`` (None: not one), True once it
    # reached the spaces after its language: a chunk that only continues that line is checked
    # alone, not by searching the line again from its backticks (quadratic in a run of spaces).
    arriving: bool | None = None
    completed: str | None = None
    last: _Schema | None = None
    async for chunk in stream:
        piece = chunk.content
        if not piece:
            continue
        now: str | None = None
        if parser is not None:
            now = parser.feed(piece)
            if parser.broken and not fenced:
                prose, parser = parser.text, None
        else:
            prose += piece
        if parser is None:
            if arriving is not None and (_SPACES if arriving else _OPENING_TAIL).fullmatch(piece):
                arriving = arriving or piece[-1] in " \t"
                continue
            fence = _FENCE_OPENING.search(prose, searched)
            if fence is None:
                searched, arriving = _fence_search_from(prose, searched)
                continue
            parser, fenced = PartialJSON(), True
            now = parser.feed(prose[fence.end() :])
            prose = ""
        if now is None or now == completed:
            continue
        completed = now
        try:
            # Validated as JSON, as the agent validates the whole answer: in Python mode a strict
            # schema takes no "red" for an Enum nor "2024-01-02" for a date, and yielded nothing.
            value = schema.model_validate_json(now, context=context)
        except (ValueError, ToolError):  # not yet valid: ValidationError is a ValueError
            continue
        if value != last:
            last = value
            yield value


def _fence_search_from(prose: str, searched: int) -> tuple[int, bool | None]:
    """Where the search for a fence's opening line in ``prose`` goes on, after one from
    ``searched`` found none: at an opening still arriving at its end (backticks, a language,
    no line end yet), else before its last two characters (backticks a chunk cut), so each
    character is searched about once however long the words before the fence. With it, whether
    an opening is arriving there: None if not, else whether its line reached its spaces."""
    at = prose.rfind("```", searched)
    if at >= 0 and _FENCE_ARRIVING.fullmatch(prose, at) is not None:
        return at, prose[-1] in " \t"
    return max(searched, len(prose) - 2), None
