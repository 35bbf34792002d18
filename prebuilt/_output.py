"""Structured output: asking a model for JSON matching a pydantic model, and reading the answer.

Models that support it get the schema natively (``ModelOptions.response_format``); the others get
it in the system instruction. Either way the answer is validated here, because even native
structured output is only as good as the server implementing it, and models without it like to wrap
JSON in Markdown code fences.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

__all__ = [
    "OutputSchemaError",
    "parse_output",
    "response_format",
    "retry_prompt",
    "schema_instruction",
]

_FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)


class OutputSchemaError(ValueError):
    """The final answer did not match ``output_schema``, even after one retry."""


def response_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The ``ModelOptions.response_format`` value asking natively for ``schema``."""
    return {"name": schema.__name__, "schema": schema.model_json_schema()}


def schema_instruction(schema: type[BaseModel]) -> str:
    """What to append to the instruction of a model without native structured output."""
    return (
        "When you give your final answer, reply with only a JSON object matching this JSON "
        f"schema, without any other text or code fences:\n{json.dumps(schema.model_json_schema())}"
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
    try:
        return schema.model_validate_json(text.strip()), None
    except ValidationError as exc:
        first = exc
    fenced = _FENCED.search(text)
    if fenced is not None:
        try:
            return schema.model_validate_json(fenced.group(1).strip()), None
        except ValidationError as exc:
            first = exc
    return None, _explain(first)


def retry_prompt(schema: type[BaseModel], problem: str) -> str:
    """The message that gives the model its one chance to correct an answer."""
    return (
        f"Your answer does not match the required {schema.__name__} JSON schema: {problem}. "
        "Reply again with only the corrected JSON object."
    )
