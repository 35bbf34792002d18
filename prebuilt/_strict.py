"""A pydantic JSON schema rewritten to OpenAI's strict structured-output rules, or None when strict
mode cannot express it.

Strict mode guarantees the answer's shape but takes a subset of JSON Schema, and refuses (400) a
``strict`` schema outside it: every object closed (``additionalProperties: false``) with every
property required; a root that is an object; ``anyOf`` but not ``oneOf``, ``allOf``, ``not`` or
``if``; of the validation keywords only ``pattern`` and ``format`` (a documented list of formats)
for strings, ``minimum``/``maximum``/``exclusive*``/``multipleOf`` for numbers and
``minItems``/``maxItems`` for arrays; no ``default``; at most 10 levels of nested objects, 5,000
properties, 1,000 enum values (an enum of over 250 values at most 15,000 characters) and 120,000
characters of names, enum and const values in all.

What the rewrite may change without changing what the answer means, it does, as the ``openai``
package's ``to_strict_json_schema`` does and a little further: every property required (an
optional one is still nullable, or has its default, and the answer is validated by the model
class, which accepts it either way), ``$ref``s beside other keywords inlined, a discriminated
union's ``oneOf`` written ``anyOf`` (pydantic writes ``oneOf`` only for one, and validates the
answer by its discriminator whichever branch the schema let through, so nothing pydantic checks is
lost), and keywords strict mode does not take (``maxLength``, ``uniqueItems``, ``default``, a
``format`` outside the list, ``examples``, ...) moved into the node's description, so the model
still reads them and the model class still checks them. What would change the meaning (a ``dict``'s open
object, a tuple's ``prefixItems``, an untyped ``Any``) or exceeds a limit makes the whole schema go
without ``strict``: one refused call buys nothing. A root that is not an object (a root list, union
or scalar) is no reason: the OpenAI adapter wraps it in one (``adk.models._wrapped``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from adk.models._wrapped import needs_wrapper, wrapped_schema

__all__ = ["strict_schema"]

# The keywords strict mode documents: any other is moved into the description (a validation
# keyword such as ``maxLength`` or ``uniqueItems`` is checked by the model class anyway; an
# annotation such as ``examples`` or ``deprecated`` is for the model to read).
_SUPPORTED = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "anyOf", "$ref",
        "$defs", "definitions", "enum", "const", "title", "description", "pattern", "format",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems",
        "maxItems",
    }
)  # fmt: skip
# Keywords whose meaning strict mode cannot carry: the schema goes without ``strict``.
_INEXPRESSIBLE = frozenset(
    {
        "oneOf",  # one left beside an ``anyOf`` it could not be merged into
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "dependentRequired",
        "dependentSchemas",
        "prefixItems",
        "patternProperties",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
    }
)
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
# What makes a node a schema of some shape rather than ``{}`` (anything): strict mode needs one.
_SHAPED = frozenset({"type", "anyOf", "$ref", "enum", "const"})
_MAX_DEPTH, _MAX_PROPERTIES = 10, 5000
_MAX_ENUM_VALUES, _LARGE_ENUM, _MAX_LARGE_ENUM_CHARS = 1000, 250, 15000
_MAX_CHARS = 120_000


def strict_schema(plain: dict[str, Any]) -> dict[str, Any] | None:
    """``plain`` (left as it is) in strict-mode form, or None if strict mode cannot take it.

    A root strict mode refuses (a list, a union, a scalar) is kept: the OpenAI adapter sends such
    a schema as the one property of an object and unwraps the answer (``adk.models._wrapped``),
    so it is checked, limits and all, in the form the server gets."""
    strict: dict[str, Any] = _strict(copy.deepcopy(plain), plain)
    sent = wrapped_schema(strict) if needs_wrapper(strict) else strict
    if not _ok(sent) or not _within_limits(sent):
        return None
    return strict


def _strict(node: Any, root: dict[str, Any], inlined: frozenset[str] = frozenset()) -> Any:
    """``node`` (a copy, changed in place) made to follow strict mode's rules. ``inlined``: the
    ``$ref``s being inlined around it; a model that refers to itself beside a keyword
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
    if isinstance(node.get("oneOf"), list) and "anyOf" not in node:
        node["anyOf"] = node.pop("oneOf")
    node.pop("discriminator", None)  # pydantic's, for OpenAPI; the variants' tags say it too
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(node.get(key), list):
            node[key] = [_strict(child, root, inlined) for child in node[key]]
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        node.update({**all_of[0], **{k: v for k, v in node.items() if k != "allOf"}})
        del node["allOf"]
    if "default" in node and node["default"] is None:
        del node["default"]  # says nothing once the field is nullable and required
    _describe_unsupported(node)
    return node


def _describe_unsupported(node: dict[str, Any]) -> None:
    """Moves the keywords strict mode does not take, but whose meaning the model class keeps,
    into the description."""
    moved = {key: node.pop(key) for key in sorted(node.keys() - _SUPPORTED - _INEXPRESSIBLE)}
    if isinstance(node.get("format"), str) and node["format"] not in _FORMATS:
        moved["format"] = node.pop("format")
    if not moved:
        return
    note = "; ".join(
        f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in moved.items()
    )
    about = node.get("description")
    node["description"] = f"{about} ({note})" if isinstance(about, str) and about else note


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any] | None:
    if not ref.startswith("#/"):
        return None if ref != "#" else root
    found: Any = root
    for part in ref[2:].split("/"):
        found = found.get(part) if isinstance(found, dict) else None
    return found if isinstance(found, dict) else None


def _ok(node: Any, *, schema: bool = True) -> bool:
    """Whether ``node`` keeps to strict mode's rules: every object closed, no keyword it cannot
    carry, every schema of some shape. ``schema``: ``node`` is a schema, not a map of them."""
    if isinstance(node, list):
        return all(_ok(child) for child in node)
    if not isinstance(node, dict):
        return True
    if not schema:
        return all(_ok(child) for child in node.values())
    if _INEXPRESSIBLE & node.keys() or not _SHAPED & node.keys():
        return False
    if (node.get("type") == "object" or "properties" in node) and node.get(
        "additionalProperties"
    ) is not False:
        return False
    return all(
        _ok(child, schema=key not in ("properties", "$defs", "definitions"))
        for key, child in node.items()
        if key in ("properties", "$defs", "definitions", "items", "anyOf")
    )


def _within_limits(schema: dict[str, Any]) -> bool:
    """Whether ``schema`` keeps to strict mode's size limits. Nesting is counted in objects along
    a path, following ``$ref``s but not a recursion (which strict mode allows); properties, enum
    values and names as written, each definition once."""
    properties = enum_values = chars = 0
    nodes: list[Any] = [schema]
    while nodes:
        node = nodes.pop()
        if isinstance(node, list):
            nodes.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
                chars += sum(len(name) for name in value)
                properties += len(value) if key == "properties" else 0
                nodes.extend(value.values())
            elif key == "enum" and isinstance(value, list):
                enum_values += len(value)
                strings = sum(len(item) for item in value if isinstance(item, str))
                chars += strings
                if len(value) > _LARGE_ENUM and strings > _MAX_LARGE_ENUM_CHARS:
                    return False
            elif key == "const" and isinstance(value, str):
                chars += len(value)
            elif key in ("items", "anyOf"):
                nodes.append(value)
    if properties > _MAX_PROPERTIES or enum_values > _MAX_ENUM_VALUES or chars > _MAX_CHARS:
        return False
    return _depth(schema, schema, frozenset(), {}) <= _MAX_DEPTH


def _depth(node: Any, root: dict[str, Any], path: frozenset[str], known: dict[str, int]) -> int:
    """The most objects nested along one path from ``node``; ``path``: the refs followed to it;
    ``known``: each ref's depth once measured, so shared definitions are not walked per use."""
    if isinstance(node, list):
        return max((_depth(child, root, path, known) for child in node), default=0)
    if not isinstance(node, dict):
        return 0
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _resolve(root, ref)
        if ref in path or target is None:
            return 0
        if ref not in known:
            known[ref] = _depth(target, root, path | {ref}, known)
        return known[ref]
    own = 1 if isinstance(node.get("properties"), dict) else 0
    children: list[Any] = list((node.get("properties") or {}).values())
    children += [node.get("items"), node.get("anyOf")]
    return own + max((_depth(child, root, path, known) for child in children), default=0)
