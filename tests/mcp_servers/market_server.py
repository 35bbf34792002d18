"""A market-data MCP server for the CrewAI port (``tests/test_app_crew.py``), written with the
``mcp`` package and served over streamable HTTP at ``/mcp``:
``python market_server.py [--port N]``; the first line on stdout is ``PORT <number> PID <pid>``
(as ``http_server.py``'s).

A crew's research tools, as CrewAI's ``MCPServerAdapter`` would load them: ``market_size`` and
``competitors`` answer from a small table, and an unknown market is a tool error.
"""

from __future__ import annotations

import argparse
import asyncio
import os

import handoff  # noqa: F401  (first: a fork of the tests' fork server may serve this process)
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

MARKETS = {
    "plant-based milk": {
        "size": "USD 19.7 billion in 2024, growing 10.2% a year",
        "competitors": "Oatly (USD 4.99/l), Alpro (USD 3.49/l), Silk (USD 3.99/l)",
    },
    "cold brew coffee": {
        "size": "USD 3.2 billion in 2024, growing 22% a year",
        "competitors": "Starbucks (USD 5.99/l), Stok (USD 4.49/l)",
    },
}


def build_server() -> MCPServer:
    server = MCPServer("market")

    @server.tool()
    def market_size(market: str) -> str:
        """The size and growth of a consumer market."""
        if market not in MARKETS:
            raise ToolError(f"no data for market {market!r}")
        return MARKETS[market]["size"]

    @server.tool()
    def competitors(market: str) -> str:
        """The main competitors in a market, with their shelf prices."""
        if market not in MARKETS:
            raise ToolError(f"no data for market {market!r}")
        return MARKETS[market]["competitors"]

    return server


async def _serve(port: int) -> None:
    app = build_server().streamable_http_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    serving = asyncio.create_task(web.serve())
    while not web.started:
        if serving.done():
            await serving  # startup failed: raise its error
            return
        await asyncio.sleep(0.01)
    print(f"PORT {web.servers[0].sockets[0].getsockname()[1]} PID {os.getpid()}", flush=True)
    await serving


def serve() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    asyncio.run(_serve(parser.parse_args().port))


if __name__ == "__main__":
    serve()
