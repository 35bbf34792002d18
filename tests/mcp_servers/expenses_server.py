"""An expenses MCP server over stdio, for the expense-report app's tests: ``python
expenses_server.py``. ``receipt`` reads a receipt of the demo ledger (a structured result, an
error for an unknown one), ``employee`` who filed it."""

from __future__ import annotations

import handoff  # noqa: F401  (first: a fork of the tests' fork server may serve this process)
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel


class Receipt(BaseModel):
    id: str
    merchant: str
    category: str
    amount_cents: int


RECEIPTS = {
    "R-1": Receipt(id="R-1", merchant="Hotel Lux", category="lodging", amount_cents=48000),
    "R-2": Receipt(id="R-2", merchant="Taxi Co", category="travel", amount_cents=3500),
}


def build_server() -> MCPServer:
    server = MCPServer("expenses", log_level="WARNING")

    @server.tool()
    def receipt(receipt_id: str) -> Receipt:
        """A receipt of the ledger: merchant, category and amount."""
        if receipt_id not in RECEIPTS:
            raise ToolError(f"no receipt {receipt_id}")
        return RECEIPTS[receipt_id]

    @server.tool()
    def employee(employee_id: str) -> str:
        """The employee's name and cost centre."""
        return f"{employee_id}: Ann Lee, cost centre CC-7"

    return server


if __name__ == "__main__":
    build_server().run("stdio")
