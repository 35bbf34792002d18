"""Tools as model APIs take them: a server's tool names and input schemas, in a toolset's listing
and in a server's sampling request, are made fit the same way (``_model_names``,
``_model_parameters``)."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from typing import Any

_NOT_IN_NAMES = re.compile(r"[^a-zA-Z0-9_-]")  # what a tool name may not hold for model APIs
_NAME_LIMIT = 64
_DIGEST = 8  # hex digits of the hash a name cut to fit is given (``_model_names``)
_KEPT = _NAME_LIMIT - _DIGEST - 1  # what a name cut to fit keeps of its start


def _model_names(names: list[str]) -> list[str]:
    """``names`` (a server's tool names, prefixed) as names model APIs take for a tool.

    MCP allows dots and up to 128 characters; OpenAI and Anthropic take ``[a-zA-Z0-9_-]{1,64}``
    and refuse the whole request otherwise (HTTP 400), so one such tool would fail every model
    call of an agent offered the server's tools. A name that fits is kept. Another has each
    character outside that set made ``_``; if that is too long, or taken by a name of the
    server's, it is cut and given a hash of the original name (``..._1a2b3c4d``; of the name and
    a count where that is taken too, ``_hashed``), so the same server names map to the same names
    on every listing. Calls go by the server's name.

    Two names made fit alike (``a.b`` and ``a b``) are both hashed, and clashes are settled in
    the order of the server's names, not of its listing, so a name means one tool of the server
    whatever the listing's order or its other tools: the first listed kept ``a_b`` before, and a
    server listing the two in another order (another process, a set's order under another
    ``PYTHONHASHSEED``) or adding ``a b`` swapped the names, so a call saved in a checkpoint as
    ``a_b`` ran the other tool on its resume.
    """
    out = list(names)
    taken = {name for name in names if _is_model_name(name)}
    made = {position: _NOT_IN_NAMES.sub("_", name) or "_" for position, name in enumerate(names)}
    alike = Counter(safe for position, safe in made.items() if names[position] not in taken)
    for position in sorted(range(len(names)), key=names.__getitem__):
        name = names[position]
        if name in taken:
            continue
        safe = made[position]
        if len(safe) > _NAME_LIMIT or safe in taken or alike[safe] > 1:
            safe = _hashed(name, safe, taken)
        taken.add(safe)
        out[position] = safe
    return out


def _hashed(name: str, safe: str, taken: set[str]) -> str:
    """``safe`` (``name`` made fit) cut and given a hash of ``name``; where that is taken too (a
    server naming a tool what another's name hashes to), a hash of ``name`` and a count, so no
    two tools are offered under one name (a model API refuses the request, or the model's call
    of one goes to the other)."""
    salt = b""
    for count in range(1, len(taken) + 2):  # at most len(taken) of them are taken
        digest = hashlib.sha256(name.encode() + salt).hexdigest()[:_DIGEST]
        hashed = f"{safe[:_KEPT]}_{digest}"
        if hashed not in taken:
            return hashed
        salt = b"\0%d" % count
    raise AssertionError("unreachable: more hashes tried than names taken")


def _offered_as(name: str) -> tuple[str, ...]:
    """The names ``_model_names`` may give a tool named ``name`` (prefixed): the name itself when
    it fits model APIs, else the name made fit, or that cut and given a hash (which one depends on
    the server's other names)."""
    if _is_model_name(name):
        return (name,)
    safe = _NOT_IN_NAMES.sub("_", name) or "_"
    digest = hashlib.sha256(name.encode()).hexdigest()[:_DIGEST]
    hashed = f"{safe[:_KEPT]}_{digest}"
    return (hashed,) if len(safe) > _NAME_LIMIT else (safe, hashed)


def _is_model_name(name: str) -> bool:
    return len(name) <= _NAME_LIMIT and _NOT_IN_NAMES.search(name) is None and bool(name)


# The keywords of a tool's schema that MCP's models take as null (null: not given).
_NULLABLE = ("properties", "required", "$schema")


def _model_parameters(schema: Any) -> dict[str, Any]:
    """A server's tool's ``inputSchema`` as model APIs take a tool's parameters: an object schema
    given ``properties`` when it has none (MCP's schema of a tool without arguments may be
    ``{"type": "object"}``, which OpenAI refuses, 'object schema missing properties', HTTP 400,
    failing the whole request), and without the keywords MCP's schemas may give as null
    (``properties``, ``required``, ``$schema``: every protocol version takes that, a model API
    refuses it likewise)."""
    parameters = dict(schema) if isinstance(schema, dict) else {}
    for keyword in _NULLABLE:
        if keyword in parameters and parameters[keyword] is None:
            del parameters[keyword]
    parameters.setdefault("type", "object")
    if parameters["type"] == "object":
        parameters.setdefault("properties", {})
    return parameters
