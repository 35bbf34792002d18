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


# Left a function: the test makes the tool (made here, a refusal would fail the module's import).
def count_letters(text: str, ctx: ToolContext | None = None) -> Mapping[str, int]:
    """Count the letters of a text; callable without a run too (ctx left out)."""
    if ctx is not None:
        ctx.session["counted_by"] = ctx.tool_name
    return {"letters": sum(c.isalpha() for c in text)}
