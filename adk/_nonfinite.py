"""NaN and infinities, which no JSON number holds: the one walk that finds them in data
(``nonfinite_at``: a checkpoint's model dumps, an MCP answer), and standard JSON text for data
that may hold them, each written as a string (``dumps_finite``).

``json.dumps`` writes them as ``NaN``/``Infinity``, which no other JSON reader takes (a backend's
``JSON.parse``, ``jq``), so output meant for others (``pyadk checkpoint`` lines, a span's
``gen_ai.tool.definitions``) writes each as text instead. Data holds one rarely: the value is
dumped once as it is, and walked only when that dump met one. ``json`` is imported by
``dumps_finite`` when first called, not here: the checkpoint codec, which ``import adk`` loads,
imports ``nonfinite_at`` (see its own module docstring).

``adk._json_where`` walks for where pydantic cannot write a value, asking pydantic piece by
piece: pydantic writes NaN (as ``null`` or ``NaN``) without an error, so that walk never stops at
one, and each caller here asks this question only once its own check (``json.dumps`` with
``allow_nan=False``, pydantic's ``null``) says one may be there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


class NonFinite:
    """What ``nonfinite_at`` found: ``number``, the NaN or infinity; ``path``, the way to it from
    the top, outermost first (a ``str`` for a dict key, shown as ``str(key)``; an ``int`` for a
    list or tuple's index; a set's items have none); ``key``: the number is a key of the dict
    the path leads to, or inside one (a tuple key's item), not in a value."""

    __slots__ = ("key", "number", "path")

    def __init__(self, number: float, key: bool = False) -> None:
        self.number = number
        self.path: list[str | int] = []  # innermost first while the walk returns, then turned
        self.key = key


def nonfinite_at(value: Any) -> NonFinite | None:
    """The first NaN or infinity in ``value`` (a float, or inside dicts, keys (a tuple key's
    items too) and values, lists, tuples, sets and frozensets, as a model's dump holds them), or
    None. The path is built only on the way back from one, so a walk that finds none builds
    nothing."""
    found = _found_in(value)
    if found is not None:
        found.path.reverse()
    return found


def _found_in(value: Any) -> NonFinite | None:
    if isinstance(value, float):
        return None if math.isfinite(value) else NonFinite(value)
    if isinstance(value, dict):
        for key, item in value.items():
            # A float key pydantic writes as "None"; a tuple's as its items joined, "1.0,None"
            if type(key) is not str and (found := _found_in(key)) is not None:
                return NonFinite(found.number, key=True)  # the key's own path is no way to it
            found = _found_in(item)
            if found is not None:
                found.path.append(str(key))
                return found
    elif isinstance(value, (list, tuple)):  # a tuple: a `|` union is built per value walked
        for index, item in enumerate(value):
            found = _found_in(item)
            if found is not None:
                found.path.append(index)
                return found
    elif isinstance(value, (set, frozenset)):  # pydantic writes a python dump's set as a list
        for item in value:
            found = _found_in(item)
            if found is not None:
                return found
    return None


def dumps_finite(value: Any, text: Callable[[float], str], **options: Any) -> str:
    """``json.dumps(value, allow_nan=False, **options)``, with each NaN or infinity inside
    ``value`` (in a dict's values, a list or a tuple) written as the string ``text(number)``."""
    import json  # deferred: see the module docstring

    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:  # a NaN or an infinity somewhere (or what the walk cannot mend: raised)
        return json.dumps(_as_text(value, text), allow_nan=False, **options)


def _as_text(value: Any, text: Callable[[float], str]) -> Any:
    """``value`` with each NaN or infinity where ``json.dumps`` writes it as a number (a dict's
    values, a list, a tuple) written as ``text(number)``: a copy, where ``nonfinite_at`` only
    looks. Not a key (one that is NaN is raised by the second dump: no caller's data has one, a
    checkpoint's keys and a schema's being text), nor in a set, which ``json.dumps`` writes only
    through ``default=`` (``str(a_set)``, say), as it is."""
    if isinstance(value, float) and not math.isfinite(value):
        return text(value)
    if isinstance(value, dict):
        return {key: _as_text(item, text) for key, item in value.items()}
    if isinstance(value, (list, tuple)):  # a tuple: a `|` union is built per value walked
        return [_as_text(item, text) for item in value]
    return value
