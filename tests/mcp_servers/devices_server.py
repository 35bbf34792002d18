"""A device registry MCP server over stdio, for the sensor-alert pipeline's tests: ``python
devices_server.py``. ``device_info`` gives a device's site, model and alert limit (a structured
result); an unknown device is a tool error, and so is the first question about d07 (a registry
busy for a moment, which the caller asks again)."""

from __future__ import annotations

import handoff  # noqa: F401  (first: a fork of the tests' fork server may serve this process)
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel


class Device(BaseModel):
    device: str
    site: str
    model: str
    limit: float


def _registry() -> dict[str, Device]:
    sites = ["north", "south", "east"]
    return {
        f"d{n:02d}": Device(
            device=f"d{n:02d}", site=sites[n % 3], model=f"TX-{n % 4}", limit=70.0 + n % 5
        )
        for n in range(12)
    }


REGISTRY = _registry()


def build_server() -> MCPServer:
    server = MCPServer("devices", log_level="WARNING")
    busy_once = {"d07"}  # the registry is busy the first time d07 is asked about

    @server.tool()
    def device_info(device: str) -> Device:
        """A registered device: its site, model and the reading above which it alerts."""
        if device in busy_once:
            busy_once.discard(device)
            raise ToolError("registry busy, try again")
        if device not in REGISTRY:
            raise ToolError(f"no device {device} in the registry")
        return REGISTRY[device]

    return server


if __name__ == "__main__":
    build_server().run("stdio")
