"""Tools: the protocol, function tools, toolsets and the tool context."""

from .base import Tool, ToolContext, ToolError, ToolProgress, ToolResult, Toolset, ToolSpec
from .function import FunctionTool, tool

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolProgress",
    "ToolResult",
    "ToolSpec",
    "Toolset",
    "tool",
]
