"""Structured output: asking a model for JSON matching a pydantic model, and reading the answer.

Models that support it get the schema natively (``ModelOptions.response_format``); the others get
it in the system instruction. Either way the answer is validated here, because even native
structured output is only as good as the server implementing it, and models without it like to wrap
JSON in Markdown code fences.
"""

from __future__ import annotations

import copy
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

_NOT_IN_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_FENCED = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n(.*?)\n?[ \t]*```", re.DOTALL)


class OutputSchemaError(ValueError):
    """The final answer did not match ``output_schema``, even after one retry."""


def response_format(schema: type[BaseModel]) -> dict[str, Any]:
    """The ``ModelOptions.response_format`` value asking natively for ``schema``.

    In OpenAI's strict mode where the schema allows it: the server then guarantees the shape, but
    takes only schemas whose every object has ``additionalProperties: false`` and lists every
    property as required, which pydantic's schema does not (a field with a default is optional).
    So every property is made required (an optional one is still nullable, or has its default,
    and the answer is validated by the model class, which accepts it either way), ``$ref``s beside
    other keywords are inlined, and ``default: null`` dropped, as the ``openai`` package's own
    ``to_strict_json_schema`` does. A schema strict mode cannot express (a ``dict`` field, whose
    object takes any key) is sent as pydantic writes it, without ``strict``. The name is one OpenAI
    takes (``^[a-zA-Z0-9_-]{1,64}$``: a generic model is named ``Page[int]``)."""
    plain = schema.model_json_schema()
    name = _NOT_IN_NAME.sub("_", schema.__name__)[:64] or "response"
    strict = _strict(copy.deepcopy(plain), plain)
    if _strict_ok(strict):
        return {"name": name, "schema": strict, "strict": True}
    return {"name": name, "schema": plain}


def _strict(node: Any, root: dict[str, Any], inlined: frozenset[str] = frozenset()) -> Any:
    """``node`` (a copy, changed in place) made to follow OpenAI's strict-mode rules. ``inlined``:
    the ``$ref``s being inlined around it; a model that refers to itself beside a keyword
    (``child: Node = Field(description=...)``) keeps a bare ``$ref`` there rather than being
    inlined for ever."""
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        if ref in inlined:
            return {"$ref": ref}
        target = _resolve(root, ref)
        if target is not None:  # the ref's keywords, the node's own overriding them
            merged = {**copy.deepcopy(target), **node}
            del merged["$ref"]
            return _strict(merged, root, inlined | {ref})
    for key in ("$defs", "definitions", "properties"):
        children = node.get(key)
        if isinstance(children, dict):
            node[key] = {name: _strict(child, root, inlined) for name, child in children.items()}
    if isinstance(node.get("properties"), dict):
        node["required"] = list(node["properties"])
    if node.get("type") == "object" and "additionalProperties" not in node:
        node["additionalProperties"] = False
    if isinstance(node.get("items"), dict):
        node["items"] = _strict(node["items"], root, inlined)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(node.get(key), list):
            node[key] = [_strict(child, root, inlined) for child in node[key]]
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        node.update({**all_of[0], **{k: v for k, v in node.items() if k != "allOf"}})
        del node["allOf"]
    if "default" in node and node["default"] is None:
        del node["default"]
    return node


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any] | None:
    if not ref.startswith("#/"):
        return None
    found: Any = root
    for part in ref[2:].split("/"):
        found = found.get(part) if isinstance(found, dict) else None
    return found if isinstance(found, dict) else None


def _strict_ok(node: Any) -> bool:
    """Whether every object in ``node`` closes its properties, as strict mode requires."""
    if isinstance(node, list):
        return all(_strict_ok(child) for child in node)
    if not isinstance(node, dict):
        return True
    if (node.get("type") == "object" or "properties" in node) and node.get(
        "additionalProperties"
    ) is not False:
        return False
    return all(_strict_ok(child) for key, child in node.items() if isinstance(child, (dict, list)))


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


def retry_prompt(schema: type[BaseModel], problem: str, *, with_schema: bool = False) -> str:
    """The message that gives the model its one chance to correct an answer.

    ``with_schema`` when the schema went natively: a server may have ignored the response format
    without a word (older Ollama builds, proxies dropping fields they do not know), and then the
    model has never seen the schema it is asked to correct its answer to."""
    prompt = (
        f"Your answer does not match the required {schema.__name__} JSON schema: {problem}. "
        "Reply again with only the corrected JSON object."
    )
    if with_schema:
        prompt += f" The schema:\n{json.dumps(schema.model_json_schema())}"
    return prompt
