"""Overhead of ``MCPToolset`` over calling the ``mcp`` client session directly, over stdio.

Both sides use the same server process (examples/mcp_server.py over stdio) and the same session: the
baseline calls ``client.call_tool(name, arguments)`` on the ``mcp.Client`` the toolset connected
(white box, so two server processes' different speeds do not pollute the comparison); the toolset
side runs the tool the way an agent does, ``tool.run(json_text, ctx)``, which adds parsing the
model's JSON, the session lookup, the call deadline and turning the result into a ``ToolResult``. Each round runs a small batch of direct calls
and a small batch of toolset calls back to back (order flipped every round); the ratio is the median
over rounds of toolset/direct batch time, so machine drift between rounds cancels out. Target:
ratio <= 1.1.

Two more rows: ``tools()`` as an agent calls it every turn (cached: the list is fetched once and
again only when the server announces a change) against a ``list_tools`` round trip, and session
reuse: after every call above, the toolset must still be on the one session it opened (a new
session — or server process — per call is a known fault of other SDKs).

Run from the repository root: ``python -m benchmarks.mcp_overhead [--rounds N] [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import Client

from adk.mcp import MCPToolset, StdioServer
from adk.tools.base import ToolContext

SERVER_SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "mcp_server.py"
TARGET = 1.1
CASES: dict[str, dict[str, Any]] = {
    "get_time": {"timezone": "UTC"},  # text result
    "word_stats": {"text": "the quick brown fox jumps over the lazy dog"},  # structured result
}

Call = Callable[[], Awaitable[Any]]


async def _batch(fn: Call, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await fn()
    return (time.perf_counter() - start) / calls * 1e6


async def _paired(direct: Call, toolset: Call, rounds: int, calls: int) -> dict[str, float]:
    await _batch(direct, 20)  # warm up: first-call paths, caches
    await _batch(toolset, 20)
    direct_times: list[float] = []
    toolset_times: list[float] = []
    for round_ in range(rounds):
        pairs = [(direct, direct_times), (toolset, toolset_times)]
        for fn, times in pairs if round_ % 2 == 0 else reversed(pairs):
            times.append(await _batch(fn, calls))
    ratios = [t / d for t, d in zip(toolset_times, direct_times, strict=True)]
    return {
        "us_per_call": round(statistics.median(toolset_times), 1),
        "baseline_us_per_call": round(statistics.median(direct_times), 1),
        "ratio": round(statistics.median(ratios), 3),
    }


async def _measure(rounds: int, calls: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    ctx: ToolContext = None  # type: ignore[assignment]  # MCP tools do not use their context
    async with MCPToolset(StdioServer(sys.executable, [str(SERVER_SCRIPT)])) as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        live = toolset._session.current
        assert live is not None and live.client is not None
        client: Client = live.client
        calls_made = 0
        for name, arguments in CASES.items():
            text = json.dumps(arguments)
            tool = tools[name]

            async def direct(name: str = name, arguments: dict[str, Any] = arguments) -> Any:
                result = await client.call_tool(name, arguments)
                assert not result.is_error
                return result

            async def through_toolset(tool: Any = tool, text: str = text) -> Any:
                result = await tool.run(text, ctx)
                assert not result.is_error, result.content
                return result

            row = await _paired(direct, through_toolset, rounds, calls)
            calls_made += 20 + rounds * calls
            rows.append({"benchmark": f"mcp_overhead.stdio.{name}", **row, "target": TARGET})

        async def list_direct() -> Any:
            return await client.list_tools()

        async def list_toolset() -> Any:
            return await toolset.tools()

        row = await _paired(list_direct, list_toolset, rounds, calls)
        rows.append({"benchmark": "mcp_overhead.stdio.tools_per_turn", **row, "target": TARGET})

        opened = toolset._session.connections_opened
        rows.append(
            {
                "benchmark": "mcp_overhead.stdio.session_reuse",
                "tool_calls": calls_made,
                "sessions_opened": opened,
                "target": 1,
            }
        )
    return rows


def run(rounds: int = 30, calls: int = 20) -> list[dict[str, Any]]:
    """Measure every case; one row each, plus the session-reuse check."""
    return asyncio.run(_measure(rounds, calls))


def main() -> None:
    parser = argparse.ArgumentParser(description="MCPToolset overhead vs the mcp client session")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=20, help="calls per batch")
    args = parser.parse_args()
    rows = run(args.rounds, args.calls)
    print(f"{'benchmark':<38} {'toolset µs':>11} {'direct µs':>10} {'ratio':>7}  target")
    for row in rows:
        if "ratio" in row:
            verdict = "ok" if row["ratio"] <= TARGET else "OVER"
            print(
                f"{row['benchmark']:<38} {row['us_per_call']:>11.1f} "
                f"{row['baseline_us_per_call']:>10.1f} {row['ratio']:>7.3f}  <= {TARGET} {verdict}"
            )
        else:
            verdict = "ok" if row["sessions_opened"] == row["target"] else "FAIL"
            print(
                f"{row['benchmark']:<38} {row['sessions_opened']} session(s) for "
                f"{row['tool_calls']} calls  == {row['target']} {verdict}"
            )


if __name__ == "__main__":
    main()
