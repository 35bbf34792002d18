"""MCP servers as pyadk resources: their tools become tools, their prompts become prompts.

``StdioServer``, ``HTTPServer`` (streamable HTTP) and ``SSEServer`` say where a server is;
``MCPToolset(server)`` offers its tools to agents, connecting on first use. ``Resources.add_mcp``
registers a server's tools and prompts by name. ``MCPProgress`` is what an ``on_progress`` handler
is given as a call reports progress; ``MCPConnectionError`` what a server that cannot be
used raises. Importing this package imports the ``mcp`` SDK,
so ``import adk`` does not import it.
"""

from ._hooks import MCPProgress
from ._servers import HTTPServer, SSEServer, StdioServer
from ._session import MCPConnectionError
from ._toolset import MCPToolset

__all__ = [
    "HTTPServer",
    "MCPConnectionError",
    "MCPProgress",
    "MCPToolset",
    "SSEServer",
    "StdioServer",
]
