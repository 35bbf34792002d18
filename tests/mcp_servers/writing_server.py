"""A writing-desk MCP server over stdio, for the AutoGen team port (``tests/test_app_team.py``):
``python writing_server.py``. ``count_words`` counts a text's words (a structured result),
``rhymes`` lists words rhyming with one; a word it has no rhymes for is a tool error.
``WRITING_CALLS_FILE``, when set, names a file each call appends a line to, so a test can count
what reached the server (and from which process)."""

from __future__ import annotations

import os

import handoff  # noqa: F401  (first: a fork of the tests' fork server may serve this process)
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel


class Count(BaseModel):
    words: int
    lines: int


RHYMES = {"tea": ["sea", "free", "key"], "cup": ["up", "sup"]}


def _log(line: str) -> None:
    path = os.environ.get("WRITING_CALLS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(f"{os.getpid()} {line}\n")


def build_server() -> MCPServer:
    server = MCPServer("writing", log_level="WARNING")

    @server.tool()
    def count_words(text: str) -> Count:
        """Count the words and lines of a text."""
        _log(f"count_words {len(text.split())}")
        return Count(words=len(text.split()), lines=len(text.splitlines()) or 1)

    @server.tool()
    def rhymes(word: str) -> list[str]:
        """Words that rhyme with a word."""
        _log(f"rhymes {word}")
        if word not in RHYMES:
            raise ToolError(f"no rhymes for {word}")
        return RHYMES[word]

    return server


if __name__ == "__main__":
    build_server().run("stdio")
