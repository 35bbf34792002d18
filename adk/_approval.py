"""The decisions that answer ``@tool(require_approval=True)``: what approves, what denies, and what
is neither.

Only a clear yes approves (``True``, a yes-word, alone or under ``"approved"``), so a value that
merely looks like one (``"false"``, ``1``) never lets a call through. A value that is neither a
clear yes nor a clear no — ``{"approve": True}`` with its key mistyped, Google ADK's
``{"confirmed": True}``, ``"maybe"`` — is not read as a no either: the runner refuses the resume
before anything runs (``check_decision``), so the checkpoint stays and the person's answer can be
sent again in the right shape. Read as a denial it would end the paused call for good and delete
the checkpoint, losing what the person decided.

One module for both sides: the tool (``FunctionTool``) reads decisions with ``approves``, and the
runner checks resume data aimed at an approval request with ``check_decision``.
"""

from __future__ import annotations

import reprlib
from collections.abc import Mapping
from typing import Any

__all__ = ["approves", "check_decision", "is_approval_request"]

_YES = frozenset({"y", "yes", "true", "approve", "approved"})
_NO = frozenset({"n", "no", "false", "deny", "denied", "reject", "rejected"})
_REQUEST_KEYS = frozenset({"type", "tool", "arguments", "tool_call_id"})
_SHAPES = (
    'True or False, "yes" or "no", or {"approved": True or False, "reason": "..." (optional)}; '
    "None denies"
)


def is_approval_request(info: object) -> bool:
    """Whether a pending point's ``info`` is what ``require_approval`` pauses with."""
    return (
        isinstance(info, Mapping)
        and info.get("type") == "approval"
        and _REQUEST_KEYS.issubset(info.keys())
    )


def _verdict(value: object) -> bool | None:
    """True for a clear yes, False for a clear no (``None`` included), None for neither."""
    if value is True:
        return True
    if value is False or value is None:
        return False
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _YES:
            return True
        if word in _NO:
            return False
    return None


def _read(decision: object) -> tuple[bool | None, object]:
    """The verdict of a decision and its reason (None when it gives none)."""
    if isinstance(decision, Mapping):
        if "approved" not in decision:
            return None, None
        reason = decision.get("reason")
        if reason is not None and not isinstance(reason, str):
            return None, None
        return _verdict(decision["approved"]), reason
    return _verdict(decision), None


def check_decision(point_id: str, decision: object) -> None:
    """Refuse (``ValueError``) a decision that neither approves nor denies clearly."""
    if _read(decision)[0] is None:
        raise ValueError(
            f"resume data for approval point {point_id!r} is not a decision: {reprlib.repr(decision)}; "
            f"expected {_SHAPES}. Nothing ran and the checkpoint is kept"
        )


def approves(decision: Any) -> tuple[bool, str | None]:
    """Whether ``decision`` approves, and the reason it gives. Anything but a clear yes denies
    (the runner has already refused what is neither, see ``check_decision``)."""
    verdict, reason = _read(decision)
    return verdict is True, reason if isinstance(reason, str) and reason else None
