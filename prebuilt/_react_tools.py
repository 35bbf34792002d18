"""The tools ``ReActAgent`` adds by itself: ``transfer_to_agent`` and ``exit``.

Both only ask for an action through the ``ToolContext``; the agent loop turns the action into an
event after the round, so the model's tool call always gets its answer in the conversation first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from adk import FunctionTool, ToolCall, ToolContext, ToolResult, ToolSpec

__all__ = ["EXIT_TOOL", "TRANSFER_TOOL", "TransferTool", "exit_tool", "extra_transfers"]

TRANSFER_TOOL = "transfer_to_agent"
EXIT_TOOL = "exit"


class TransferTool:
    """``transfer_to_agent(agent_name)``: hand the conversation to another agent.

    The schema enumerates the valid targets and the description lists each with its description,
    so a model can choose without guessing. A wrong name is an error result the model can correct
    (models do misspell names), not a crash of the run.
    """

    def __init__(self, targets: Sequence[tuple[str, str]]) -> None:
        self._targets = [name for name, _ in targets]
        lines = "\n".join(f"- {name}: {desc or '(no description)'}" for name, desc in targets)
        self._spec = ToolSpec(
            name=TRANSFER_TOOL,
            description="Transfer the conversation to another agent that is better suited to "
            f"handle it. Available agents:\n{lines}",
            parameters={
                "type": "object",
                "properties": {
                    "agent_name": {
                        "type": "string",
                        "enum": list(self._targets),
                        "description": "The name of the agent to transfer to.",
                    },
                },
                "required": ["agent_name"],
            },
        )

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    def target_of(self, arguments: str) -> str | None:
        """The agent a call with ``arguments`` transfers to; None when the call is invalid (the
        tool answers it with an error the model can correct)."""
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            return None
        name = parsed.get("agent_name") if isinstance(parsed, dict) else None
        return name if isinstance(name, str) and name in self._targets else None

    async def run(self, arguments: str, ctx: ToolContext) -> str | ToolResult:
        valid = ", ".join(self._targets)
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            parsed = None
        name = parsed.get("agent_name") if isinstance(parsed, dict) else None
        if not isinstance(name, str):  # say what is wrong: not "no such agent: None"
            return ToolResult.error(
                f"invalid arguments for tool '{TRANSFER_TOOL}': expected a JSON object like "
                f'{{"agent_name": "<name>"}}; valid agent names: {valid}'
            )
        if name not in self._targets:
            # Not "no such agent": the name may be a peer's or another branch's, an agent that
            # exists but is not this one's to transfer to (the targets are its sub-agents and its
            # parent), and the model told it did not exist said so to the user.
            return ToolResult.error(
                f"cannot transfer to {name!r}: not an agent {ctx.agent_name!r} can transfer "
                f"to; valid agent names: {valid}"
            )
        ctx.transfer(name)
        return f"Transferred to agent '{name}'"


class _IgnoredTransfer:
    """Answers a turn's second and later valid ``transfer_to_agent`` calls: the conversation can
    go to one agent only, and it goes to the one the first call names."""

    def __init__(self, chosen: str) -> None:
        self._chosen = chosen

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(name=TRANSFER_TOOL)

    async def run(self, arguments: str, ctx: ToolContext) -> ToolResult:
        return ToolResult.error(
            "ignored: one transfer per turn; the conversation goes to "
            f"{self._chosen!r}, named by this turn's first transfer_to_agent call"
        )


def extra_transfers(
    calls: Sequence[ToolCall], tools: Mapping[str, object]
) -> dict[str, _IgnoredTransfer] | None:
    """For a turn with several valid ``transfer_to_agent`` calls (models do make parallel ones),
    the tools that answer all but the first, by call id; None when there is at most one.

    The first in the model's order wins, as in the OpenAI Agents SDK's handoffs, rather than
    whichever call happens to finish last; the others are told so in their results, so the history
    does not claim transfers that did not happen."""
    if len(calls) < 2:
        return None
    transfer = tools.get(TRANSFER_TOOL)
    if not isinstance(transfer, TransferTool):
        return None
    chosen: str | None = None
    ignored: dict[str, _IgnoredTransfer] | None = None
    for call in calls:
        if call.name != TRANSFER_TOOL:
            continue
        target = transfer.target_of(call.arguments)
        if target is None:
            continue
        if chosen is None:
            chosen = target
        else:
            ignored = ignored if ignored is not None else {}
            ignored[call.id] = _IgnoredTransfer(chosen)
    return ignored


def _exit(final_result: str, ctx: ToolContext) -> str:
    """End the conversation with a final result. Call it only when the task is completely done.

    Args:
        final_result: The final answer to give to the user.
    """
    ctx.exit()
    return final_result


def exit_tool() -> FunctionTool:
    """A fresh ``exit(final_result)`` tool (a tool object per agent keeps agents independent)."""
    return FunctionTool(_exit, name=EXIT_TOOL)
