"""MCP beyond tools and prompts, against real MCP servers (tests/mcp_servers): progress and log
messages of a running call, a server asking the user for input (elicitation) or the client's
model for a completion (sampling), and the server's resources; over stdio and streamable HTTP, in
both protocol eras (2026-07-28, and the ``initialize`` handshake era with ``--legacy``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_servers.process import STDIO_SCRIPT, HTTPServerProcess

from adk.mcp import HTTPServer, MCPToolset, StdioServer
from adk.tools.base import ToolResult

pytestmark = pytest.mark.asyncio(loop_scope="module")

TRANSPORTS = ["stdio", "stdio-legacy", "http", "http-legacy"]


@pytest.fixture(scope="module")
def http_servers() -> Iterator[dict[bool, HTTPServerProcess]]:
    """The demo server over streamable HTTP, in each protocol era (keyed by ``legacy``)."""
    servers = {legacy: HTTPServerProcess(legacy=legacy) for legacy in (False, True)}
    try:
        for process in servers.values():
            process.start()
        yield servers
    finally:
        for process in servers.values():
            process.stop()


def server_for(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> StdioServer | HTTPServer:
    legacy = transport.endswith("-legacy")
    if transport.startswith("stdio"):
        return StdioServer(sys.executable, [str(STDIO_SCRIPT), *(["--legacy"] if legacy else [])])
    return HTTPServer(http_servers[legacy].url)


async def call(toolset: MCPToolset, name: str, arguments: dict[str, Any]) -> ToolResult:
    tools = {tool.spec.name: tool for tool in await toolset.tools()}
    result = await tools[name].run(json.dumps(arguments), None)  # type: ignore[arg-type]
    assert isinstance(result, ToolResult)
    return result


# -- elicitation and sampling --------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_asking_for_input_or_a_completion_unanswered_is_a_clear_error(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """Without handlers the toolset declares neither capability: the server refuses the call
    itself, with its own words and nothing else (a 2026-07-28 HTTP server answers that with HTTP
    400 and the JSON-RPC error as body, which was appended to the text as raw JSON), and the
    session goes on."""
    async with MCPToolset(server_for(transport, http_servers), call_timeout=15) as toolset:
        booked = await call(toolset, "book", {"destination": "Oslo"})
        summary = await call(toolset, "summarize", {"text": "a long text"})
        after = await call(toolset, "add", {"a": 1, "b": 2})

    assert (booked.is_error, booked.content) == (
        True,
        "Error: tool 'book' failed: Client did not declare the form elicitation capability "
        "required by resolver 'demo:_ask_date'",
    )
    assert (summary.is_error, summary.content) == (
        True,
        "Error: tool 'summarize' failed: Client did not declare the sampling capability "
        "required by resolver 'demo:_sample_summary'",
    )
    assert after.content == "3"
