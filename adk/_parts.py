"""What an object of the agent tree holds: its attributes and the members of its containers.

Shared by the runner (``_closable_parts``: what to close) and the resume's check before it runs
(``_preflight``: whether a custom agent holds agents it may run), which both find an agent tree's
parts by duck typing, as ``adk`` knows nothing of the agent classes built on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


def attributes(part: object) -> Iterator[tuple[str, Any]]:
    """``part``'s attributes: its ``__dict__`` and its slots (tool wrappers such as an MCP tool,
    which holds its toolset, have slots only)."""
    yield from getattr(part, "__dict__", {}).items()
    for cls in type(part).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__"):
                with contextlib.suppress(AttributeError):
                    yield name, getattr(part, name)


def members(value: Any, depth: int = 3) -> list[Any]:
    """``value`` itself, or what a list, tuple, set or dict of them (nested a few deep) holds."""
    if depth and isinstance(value, dict):
        value = list(value.values())
    if depth and isinstance(value, list | tuple | set | frozenset):
        return [member for item in value for member in members(item, depth - 1)]
    return [value]
