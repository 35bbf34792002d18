"""A low-level MCP server offering one kind of thing only: ``python narrow_server.py tools`` serves
one tool and no prompts capability (like most real servers), ``... prompts`` one prompt and no
tools capability; ``... duplicates`` lists two tools of one name (a server breaking MCP's rule
that a server's tool names are unique); ``... schema`` has tools whose results break their own
output schema (``count``: structured content of the wrong type, ``bare``: none at all) or whose
output schema is broken (``dangling``: a reference to nothing, ``broken``: an invalid keyword);
``... untyped`` has a tool ``blocks`` returning binary blocks whose type is missing or not their
kind's (a blob without a MIME type, an image sent as ``application/octet-stream``, a sound as
``video/mp4``). Built on the ``mcp`` package's low-level ``Server``, which declares only the
capabilities it has handlers for."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import handoff  # noqa: F401  (first: a fork of the tests' fork server may serve this process)
from mcp import types
from mcp.server.lowlevel.server import Server
from mcp.server.stdio import stdio_server


async def _list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    tool = types.Tool(name="ping", description="Answers pong.", input_schema={"type": "object"})
    return types.ListToolsResult(tools=[tool])


async def _list_duplicates(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object"}
    return types.ListToolsResult(
        tools=[
            types.Tool(name="ping", description="Answers pong.", input_schema=schema),
            types.Tool(name="ping", description="Answers pong too.", input_schema=schema),
            types.Tool(name="pong", description="Answers pong.", input_schema=schema),
        ]
    )


_COUNT_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


# An output schema whose reference leads nowhere, and one jsonschema cannot use (no such type).
_DANGLING_SCHEMA = {"type": "object", "properties": {"n": {"$ref": "#/$defs/Missing"}}}
_BROKEN_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}


async def _list_schema_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    schema = {"type": "object"}
    return types.ListToolsResult(
        tools=[
            *(
                types.Tool(name=name, input_schema=schema, output_schema=_COUNT_SCHEMA)
                for name in ("count", "bare")
            ),
            types.Tool(name="dangling", input_schema=schema, output_schema=_DANGLING_SCHEMA),
            types.Tool(name="broken", input_schema=schema, output_schema=_BROKEN_SCHEMA),
        ]
    )


async def _call_schema_tool(ctx: Any, params: Any) -> types.CallToolResult:
    text = [types.TextContent(type="text", text="counted many")]
    if params.name == "count":
        return types.CallToolResult(content=text, structured_content={"n": "many"})
    if params.name in ("dangling", "broken"):
        return types.CallToolResult(content=text, structured_content={"n": 1})
    return types.CallToolResult(content=text)


async def _call_tool(ctx: Any, params: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="pong")])


async def _list_untyped(ctx: Any, params: Any) -> types.ListToolsResult:
    tool = types.Tool(name="blocks", description="Odd blocks.", input_schema={"type": "object"})
    return types.ListToolsResult(tools=[tool])


async def _call_untyped(ctx: Any, params: Any) -> types.CallToolResult:
    blob = types.BlobResourceContents(uri="file:///raw.bin", blob="AAEC")  # no mime type
    return types.CallToolResult(
        content=[
            types.TextContent(type="text", text="three blocks"),
            types.EmbeddedResource(type="resource", resource=blob),
            types.ImageContent(type="image", data="AAEC", mime_type="application/octet-stream"),
            types.AudioContent(type="audio", data="AAEC", mime_type="video/mp4"),
        ]
    )


async def _list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="hello", description="Says hi.")])


async def _get_prompt(ctx: Any, params: Any) -> types.GetPromptResult:
    text = types.TextContent(type="text", text="Hi!")
    return types.GetPromptResult(messages=[types.PromptMessage(role="user", content=text)])


def build(kind: str) -> Server[Any]:
    if kind == "tools":
        return Server("tools-only", on_list_tools=_list_tools, on_call_tool=_call_tool)
    if kind == "schema":
        return Server("schema", on_list_tools=_list_schema_tools, on_call_tool=_call_schema_tool)
    if kind == "untyped":
        return Server("untyped", on_list_tools=_list_untyped, on_call_tool=_call_untyped)
    if kind == "duplicates":
        return Server("duplicates", on_list_tools=_list_duplicates, on_call_tool=_call_tool)
    assert kind == "prompts", kind
    return Server("prompts-only", on_list_prompts=_list_prompts, on_get_prompt=_get_prompt)


async def _serve(server: Server[Any]) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def serve() -> None:
    anyio.run(_serve, build(sys.argv[1]))


if __name__ == "__main__":
    serve()
