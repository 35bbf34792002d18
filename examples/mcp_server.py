"""A small MCP server written with the ``mcp`` package, for ``mcp_tools.py``: ``python mcp_server.py``.

It speaks MCP over stdin/stdout, needs no network, and offers:

- ``get_time(timezone)``: the current time in an IANA time zone (an error for unknown zones);
- ``word_stats(text)``: counts, returned as structured output;
- the prompt ``summarize(text, style)``.
"""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

server = MCPServer("example-tools", log_level="WARNING")


class WordStats(BaseModel):
    words: int
    characters: int
    longest_word: str


@server.tool()
def get_time(timezone: str = "UTC") -> str:
    """The current time in an IANA time zone, e.g. "Europe/Oslo"."""
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown time zone {timezone!r}") from None
    return datetime.now(zone).strftime("%Y-%m-%d %H:%M:%S %Z")


@server.tool()
def word_stats(text: str) -> WordStats:
    """Count the words and characters of a text."""
    words = text.split()
    return WordStats(
        words=len(words), characters=len(text), longest_word=max(words, key=len, default="")
    )


@server.prompt()
def summarize(text: str, style: str = "one sentence") -> str:
    """Ask for a summary of a text."""
    return f"Summarize the following text in {style}:\n\n{text}"


if __name__ == "__main__":
    server.run("stdio")
