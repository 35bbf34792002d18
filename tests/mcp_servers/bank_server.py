"""A bank's reference-data MCP server over stdio, for the bank-support port
(``tests/test_app_bank_support.py``): ``python bank_server.py``. ``exchange_rate`` is what one
unit of a currency costs in US dollars; a currency the bank does not trade is a tool error, which
the model reads and may correct."""

from __future__ import annotations

import handoff  # noqa: F401  (first: a fork of the tests' fork server may serve this process)
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

RATES = {"EUR": 1.08, "GBP": 1.27, "JPY": 0.0067}


def build_server() -> MCPServer:
    server = MCPServer("bank", log_level="WARNING")

    @server.tool()
    def exchange_rate(currency: str) -> float:
        """What one unit of a currency (an ISO 4217 code) costs in US dollars."""
        if currency not in RATES:
            raise ToolError(f"the bank does not trade {currency}; it trades {', '.join(RATES)}")
        return RATES[currency]

    return server


if __name__ == "__main__":
    build_server().run("stdio")
