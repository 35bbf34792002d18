"""What a tool is, for an error that names two tools of one name.

A clash is only fixable when the message says where each tool came from: the function it wraps,
the agent an ``AgentTool`` runs, the MCP server that offers it. Tools the framework makes say so
through an ``_adk_origin`` property; any other tool is named by its class. Only error paths call
this: nothing here runs per call.
"""

from __future__ import annotations

import functools

__all__ = ["function_origin", "tool_origin"]


def tool_origin(tool: object) -> str:
    """``tool`` described for an error message (``function app.tools.add``, ``AgentTool of agent
    'billing'``, ``tool 'files.read' of MCP server 'https://...'``)."""
    origin = getattr(tool, "_adk_origin", None)
    if isinstance(origin, str):
        return origin
    kind = type(tool)
    return f"{kind.__module__}.{kind.__qualname__} object"


def function_origin(fn: object) -> str:
    """A function tool's function by its qualified name (a partial by the function it wraps, a
    callable object by its class)."""
    target = fn.func if isinstance(fn, functools.partial) else fn
    qualname = getattr(target, "__qualname__", None)
    module = getattr(target, "__module__", None)
    if isinstance(qualname, str) and isinstance(module, str):
        return f"function {module}.{qualname}"
    kind = type(target)
    return f"callable {kind.__module__}.{kind.__qualname__} object"
