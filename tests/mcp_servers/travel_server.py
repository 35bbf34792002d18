"""A travel-data MCP server over stdio, for the travel-concierge port
(``tests/test_app_travel.py``): ``python travel_server.py``. ``points_of_interest`` lists a
city's sights (a structured result), ``search_flights`` the flights between two airports on a
day; an unknown city is a tool error. ``TRAVEL_CALLS_FILE``, when set, names a file each call
appends a line to (``tool argument``), so a test can count what reached the server."""

from __future__ import annotations

import os

import handoff  # noqa: F401  (first: a fork of the tests' fork server may serve this process)
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel


class Sight(BaseModel):
    name: str
    kind: str


class Sights(BaseModel):
    city: str
    sights: list[Sight]


class Flight(BaseModel):
    flight: str
    departs: str
    price_cents: int


SIGHTS = {
    "Lisbon": [Sight(name="Belem Tower", kind="monument"), Sight(name="Alfama", kind="quarter")],
    "Porto": [Sight(name="Ribeira", kind="quarter")],
}


def _log(line: str) -> None:
    path = os.environ.get("TRAVEL_CALLS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(line + "\n")


def build_server() -> MCPServer:
    server = MCPServer("travel", log_level="WARNING")

    @server.tool()
    def points_of_interest(city: str) -> Sights:
        """The sights of a city worth a visit."""
        _log(f"points_of_interest {city}")
        if city not in SIGHTS:
            raise ToolError(f"no guide for {city}")
        return Sights(city=city, sights=SIGHTS[city])

    @server.tool()
    def search_flights(origin: str, destination: str, date: str) -> list[Flight]:
        """Flights from one airport to another on a day (YYYY-MM-DD)."""
        _log(f"search_flights {origin}-{destination} {date}")
        return [
            Flight(flight="TP541", departs=f"{date}T07:05", price_cents=18900),
            Flight(flight="LH1166", departs=f"{date}T12:40", price_cents=23400),
        ]

    return server


if __name__ == "__main__":
    build_server().run("stdio")
