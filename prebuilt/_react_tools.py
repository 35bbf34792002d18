"""The tools ``ReActAgent`` adds by itself: ``transfer_to_agent`` and ``exit``.

Both only ask for an action through the ``ToolContext``; the agent loop turns the action into an
event after the round, so the model's tool call always gets its answer in the conversation first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from adk import FunctionTool, ToolContext, ToolResult, ToolSpec

__all__ = ["EXIT_TOOL", "TRANSFER_TOOL", "TransferTool", "exit_tool"]

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
            return ToolResult.error(
                f"cannot transfer to {name!r}: no such agent; valid agent names: {valid}"
            )
        ctx.transfer(name)
        return f"Transferred to agent '{name}'"


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
