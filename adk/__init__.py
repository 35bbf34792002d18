"""pyadk: an asyncio multi-agent orchestration SDK in ADK style.

``import adk`` loads the core only; the OpenAI adapter, MCP and the optional checkpoint backends load
when first used, and so do the private modules that only some paths need (``_LAZY_MODULES``).
"""

import importlib
from typing import TYPE_CHECKING, Any

from .agent import Agent, AgentInput, BaseAgent, ResumableAgent
from .agent_tool import AgentTool
from .callbacks import Callbacks
from .checkpoint.codec import CheckpointError, register_type
from .context import RunContext, Session
from .events import AgentAction, AgentEvent, AgentOutput, ErrorInfo
from .flow import FlowAgent, with_sub_agents
from .history import HistoryEntry, HistoryRewriter
from .interrupts import Interrupt, InterruptInfo, InterruptPoint, ResumeContext
from .messages import Message, MessageChunk, Role, ToolCall, ToolCallChunk, Usage
from .models.base import ChatModel, ModelError, ModelOptions, RetryPolicy
from .resources import Prompt, Resources
from .runner import RunError, Runner, RunResult
from .streams import MessageStream
from .tools import (
    FunctionTool,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    Toolset,
    ToolSpec,
    tool,
)
from .workflows import LoopAgent, ParallelAgent, SequentialAgent

if TYPE_CHECKING:  # for type checkers only; at run time they load on first use (see below)
    from . import _approval as _approval
    from . import _event_json as _event_json
    from . import _preflight as _preflight
    from .models.openai import OpenAIChatModel

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentAction",
    "AgentEvent",
    "AgentInput",
    "AgentOutput",
    "AgentTool",
    "BaseAgent",
    "Callbacks",
    "ChatModel",
    "CheckpointError",
    "ErrorInfo",
    "FlowAgent",
    "FunctionTool",
    "HistoryEntry",
    "HistoryRewriter",
    "Interrupt",
    "InterruptInfo",
    "InterruptPoint",
    "LoopAgent",
    "Message",
    "MessageChunk",
    "MessageStream",
    "ModelError",
    "ModelOptions",
    "OpenAIChatModel",
    "ParallelAgent",
    "Prompt",
    "Resources",
    "ResumableAgent",
    "ResumeContext",
    "RetryPolicy",
    "Role",
    "RunContext",
    "RunError",
    "RunResult",
    "Runner",
    "SequentialAgent",
    "Session",
    "Tool",
    "ToolCall",
    "ToolCallChunk",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Toolset",
    "Usage",
    "register_type",
    "tool",
    "with_sub_agents",
]


# Private modules that only some paths need, which the framework's own modules reach as attributes
# of this package (``adk._preflight.Preflight``) so that they load when first used: a resume's
# check before anything runs, the approval decisions, an event's JSON form.
_LAZY_MODULES = frozenset({"_approval", "_event_json", "_preflight"})


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        # Importing binds the submodule on this package, so later lookups skip this hook.
        return importlib.import_module(f".{name}", __name__)
    # The OpenAI adapter imports the openai SDK; load it only when asked for.
    if name == "OpenAIChatModel":
        from .models.openai import OpenAIChatModel

        return OpenAIChatModel
    raise AttributeError(f"module 'adk' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names, with the lazily loaded ``OpenAIChatModel`` among them."""
    return sorted({*globals(), *__all__})
