"""Tools: the protocol, function tools, toolsets and the tool context."""

from .base import Tool, ToolContext, ToolError, ToolResult, Toolset, ToolSpec
from .function import FunctionTool, tool

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Toolset",
    "tool",
]
