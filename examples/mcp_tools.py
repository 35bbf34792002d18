"""Use the tools and prompts of an MCP server (``mcp_server.py``, started over stdio).

Runs offline: ``python examples/mcp_tools.py``. The toolset starts the server on first use and
stops it when closed. An agent takes the toolset as it is (``ReActAgent(..., tools=[toolset])``) or
names single tools registered in ``Resources`` (``tools=["get_time"]``); here the tools are called
directly, the way an agent calls them: with JSON argument text, getting a ``ToolResult`` back.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from adk.mcp import MCPToolset, StdioServer
from adk.resources import Resources
from adk.tools.base import Tool, ToolResult

EXAMPLE_EXPECT = ("tool get_time", "structured: {'words': 5", "unknown time zone", "prompt message")

SERVER = StdioServer(sys.executable, [str(Path(__file__).with_name("mcp_server.py"))])


async def call(tool: Tool, arguments: str) -> ToolResult:
    result = await tool.run(arguments, None)  # type: ignore[arg-type]  # MCP tools ignore ctx
    return result if isinstance(result, ToolResult) else ToolResult(content=result)


async def main() -> None:
    async with MCPToolset(SERVER) as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        for spec in (tool.spec for tool in tools.values()):
            print(f"tool {spec.name}: {spec.description}")
            print(f"  parameters: {spec.parameters['properties']}")

        print(await call(tools["get_time"], '{"timezone": "Europe/Oslo"}'))
        stats = await call(tools["word_stats"], '{"text": "MCP servers plug into pyadk"}')
        print("structured:", stats.structured)
        # Mistakes are results the model can read, not exceptions:
        print(await call(tools["get_time"], '{"timezone": "Mars/Olympus"}'))
        print(await call(tools["get_time"], '{"timezone": '))

    # As named resources: each MCP tool and prompt is a resource; Resources closes the server.
    async with Resources() as resources:
        resources.add_mcp("local", SERVER)
        get_time = await resources.get_tool("get_time")
        print("get_time via resources:", (await call(get_time, "{}")).content)
        summarize = await resources.get_prompt("summarize")
        for message in await summarize.render(text="MCP is a protocol.", style="five words"):
            print(f"prompt message ({message.role}): {message.content!r}")


if __name__ == "__main__":
    asyncio.run(main())
