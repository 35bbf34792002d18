"""Instruction templates filled from session values.

``{key}`` is replaced by the session value ``key``; ``{{`` and ``}}`` are literal braces. Substitution
is one pass over the template, so braces inside a value (``"{secret}"`` typed by a user) stay as
they are and are never expanded: a user cannot make the instruction read other session values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["render_instruction"]

_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_.\-]*)\}")


def render_instruction(template: str, values: Mapping[str, Any], agent_name: str = "") -> str:
    if "{" not in template and "}" not in template:
        return template

    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        key = match.group(1)
        if key not in values:
            who = f"agent '{agent_name}'" if agent_name else "the instruction"
            raise ValueError(
                f"{who} uses {{{key}}} but the session has no value {key!r} "
                "(write {{ and }} for literal braces)"
            )
        return str(values[key])

    return _FIELD.sub(substitute, template)
