"""pyadk: an asyncio multi-agent orchestration SDK in ADK style.

``import adk`` loads the core only (messages, events, agents, tools, models' contract, the runner).
What only some programs use loads when first used: the OpenAI adapter, MCP, the optional
checkpoint backends, the composite agents and resources (``_LAZY``: ``adk.SequentialAgent`` and
``from adk import SequentialAgent`` load ``adk.workflows`` then), and the private modules that only
some paths need (``_LAZY_MODULES``).
"""

import importlib
from typing import TYPE_CHECKING, Any

from .agent import Agent, AgentInput, BaseAgent, ResumableAgent
from .checkpoint.codec import (
    CheckpointBusyError,
    CheckpointError,
    CheckpointNotFoundError,
    register_type,
)
from .context import RunContext, Session
from .events import AgentAction, AgentEvent, AgentOutput, ErrorInfo
from .history import HistoryEntry, HistoryRewriter
from .interrupts import Interrupt, InterruptInfo, InterruptPoint, ResumeContext
from .messages import (
    AudioPart,
    FilePart,
    ImagePart,
    Message,
    MessageChunk,
    Part,
    Role,
    ToolCall,
    ToolCallChunk,
    Usage,
)
from .models.base import ChatModel, ModelError, ModelOptions, RetryPolicy
from .runner import MaxTurnsExceeded, RunError, Runner, RunResult, run_messages, run_usage
from .streams import MessageStream
from .tools import (
    FunctionTool,
    Tool,
    ToolContext,
    ToolError,
    ToolProgress,
    ToolResult,
    Toolset,
    ToolSpec,
    tool,
)

if TYPE_CHECKING:  # for type checkers only; at run time they load on first use (see below)
    from . import _approval as _approval
    from . import _event_json as _event_json
    from . import _instrument as _instrument
    from . import _preflight as _preflight
    from .agent_tool import AgentTool
    from .callbacks import Callbacks
    from .flow import FlowAgent, with_sub_agents
    from .models.openai import OpenAIChatModel
    from .resources import Prompt, Resources
    from .workflows import LoopAgent, ParallelAgent, SequentialAgent

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentAction",
    "AgentEvent",
    "AgentInput",
    "AgentOutput",
    "AgentTool",
    "AudioPart",
    "BaseAgent",
    "Callbacks",
    "ChatModel",
    "CheckpointBusyError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ErrorInfo",
    "FilePart",
    "FlowAgent",
    "FunctionTool",
    "HistoryEntry",
    "HistoryRewriter",
    "ImagePart",
    "Interrupt",
    "InterruptInfo",
    "InterruptPoint",
    "LoopAgent",
    "MaxTurnsExceeded",
    "Message",
    "MessageChunk",
    "MessageStream",
    "ModelError",
    "ModelOptions",
    "OpenAIChatModel",
    "ParallelAgent",
    "Part",
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
    "ToolProgress",
    "ToolResult",
    "ToolSpec",
    "Toolset",
    "Usage",
    "register_type",
    "run_messages",
    "run_usage",
    "tool",
    "with_sub_agents",
]


# Private modules that only some paths need, which the framework's own modules reach as attributes
# of this package (``adk._preflight.Preflight``) so that they load when first used: a resume's
# check before anything runs, the approval decisions, an event's JSON form, a runner's callbacks
# and tracing. With them, the modules of the lazy public names (``_LAZY``), which ``import adk``
# loaded and bound here before: ``adk.workflows.SequentialAgent`` still works after ``import adk``.
_LAZY_MODULES = frozenset(
    {
        "_approval",
        "_event_json",
        "_instrument",
        "_preflight",
        "agent_tool",
        "callbacks",
        "flow",
        "resources",
        "workflows",
    }
)


# Public names whose modules load when a name is first asked for: nothing in the core imports them
# (the runner drives any agent through the same protocol), and a program that uses none of them
# (a lone ReActAgent, a custom agent) does not pay for importing them. The OpenAI adapter also
# imports the openai SDK.
_LAZY = {
    "AgentTool": ".agent_tool",
    "Callbacks": ".callbacks",
    "FlowAgent": ".flow",
    "with_sub_agents": ".flow",
    "LoopAgent": ".workflows",
    "ParallelAgent": ".workflows",
    "SequentialAgent": ".workflows",
    "OpenAIChatModel": ".models.openai",
    "Prompt": ".resources",
    "Resources": ".resources",
}


def _lazy_attribute(name: str) -> Any:
    if name in _LAZY_MODULES:
        # Importing binds the submodule on this package, so later lookups skip this hook.
        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'adk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this hook
    return value


if not TYPE_CHECKING:
    # Hidden from type checkers, which see the lazy names' imports above instead: a module
    # ``__getattr__`` makes every other name they look up its return type, without an error,
    # so a misspelt import (``from adk import SequentialAgnet``) type-checked as ``Any``.
    __getattr__ = _lazy_attribute


def __dir__() -> list[str]:
    """The module's names, with the lazily loaded ones (``_LAZY``) among them."""
    return sorted({*globals(), *__all__})
