"""A tool whose hints name what this module imports only under ``TYPE_CHECKING``, as
type-checking linters (ruff's TC rules) leave a module whose imports are used only in
annotations, with ``from __future__ import annotations`` (test_tools)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import adk

if TYPE_CHECKING:
    from collections.abc import Mapping

    from adk import ToolContext


@adk.tool
def count_words(text: str, ctx: ToolContext) -> Mapping[str, int]:
    """Count the words of a text."""
    ctx.session["counted_by"] = ctx.tool_name
    return {"words": len(text.split())}
