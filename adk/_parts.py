"""What an object of the agent tree holds: its attributes and the members of its containers.

Shared by the runner (``_closable_parts``: what to close; ``_named_without_resources``: an agent
naming a resource), the walk of an agent tree's names (``_agent_names.tree_parts``) and the
resume's check before it runs (``_preflight``: whether a custom agent holds agents it may run),
which all find an agent tree's parts by duck typing, as ``adk`` knows nothing of the agent
classes built on it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
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


_LEAVES = frozenset({str, bytes, bytearray, int, float, complex, bool, type(None)})
"""What holds no part, told by its type alone."""


def members(value: Any, depth: int = 3, keep: Callable[[object], bool] | None = None) -> list[Any]:
    """``value`` itself, or what a list, tuple, set or dict of them (nested a few deep) holds;
    with ``keep``, only those it keeps (a container nested deeper is given as it is without
    ``keep``, and passed over with it, neither looked into nor judged). Text, numbers and None
    are passed over by their type, neither kept nor each a call: an agent of one's own keeping
    its documents (100k strings) or records in memory cost every walk ~0.2 s, and a container
    of them only is passed over in C (a Runner's walk of a ReActAgent for what to close read
    each text its agents and tools hold: ~4 times as long)."""
    if type(value) in _LEAVES:
        return []
    if depth and isinstance(value, dict):
        value = list(value.values())
    if depth and isinstance(value, (list, tuple, set, frozenset)):
        if _LEAVES.issuperset(map(type, value)):
            return []
        return [
            member
            for item in value
            if type(item) not in _LEAVES
            for member in members(item, depth - 1, keep)
        ]
    if keep is None:
        return [value]
    if isinstance(value, (dict, list, tuple, set, frozenset)):  # nested deeper: not looked into
        return []
    return [value] if keep(value) else []
