"""A typed user's MCP servers, resources, checkpoint stores and own model (checked by mypy
--strict, not run)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Literal, assert_type

import adk
from adk import (
    ChatModel,
    Message,
    MessageChunk,
    ModelOptions,
    Prompt,
    Resources,
    Runner,
    ToolContext,
    ToolSpec,
)
from adk.checkpoint import (
    CheckpointStore,
    InMemoryCheckpointStore,
    PendingCheckpoint,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
    list_pending,
)
from adk.mcp import (
    HTTPServer,
    MCPConnectionError,
    MCPProgress,
    MCPToolset,
    SSEServer,
    StdioServer,
)
from adk.models.openai import OpenAIChatModel
from prebuilt import ReActAgent


class EchoModel:
    """A user's own model: satisfies ``ChatModel`` structurally."""

    model_name = "echo"

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        return Message.assistant(messages[-1].content)

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content=messages[-1].content)


def on_progress(ctx: ToolContext | None, progress: MCPProgress) -> None:
    print(progress.tool, progress.progress)


async def mcp_and_resources() -> None:
    echo: ChatModel = EchoModel()
    stdio = StdioServer("python", ["server.py"], env={"TOKEN": "x"})
    http = HTTPServer("http://127.0.0.1:1/mcp", headers={"Authorization": "Bearer x"})
    sse = SSEServer("http://127.0.0.1:1/sse")
    toolset = MCPToolset(stdio, tool_filter=["search"], prefix="docs", on_progress=on_progress)
    resources = Resources()
    resources.add_model("echo", echo)
    resources.add_model("gpt", OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:1/v1"))
    resources.add_mcp("web", http)
    resources.add_mcp("feed", sse, prefix="feed")
    resources.add_prompt("greet", "Hello {name}")
    resources.add_model("not a model", "gpt-4o")  # type: ignore[arg-type]
    model = resources.get_model("echo")
    assert_type(model, ChatModel)
    prompt = await resources.get_prompt("greet")
    assert_type(prompt, Prompt)
    assert_type(await prompt.render(name="ann"), list[Message])
    # The server's prompts, usable where adk's Prompt protocol is expected.
    prompts: Sequence[Prompt] = await toolset.prompts()
    assert_type(await toolset.prompts(), list[Prompt])  # adk's protocol, no private class
    print([p.name for p in prompts])
    agent = ReActAgent("helper", "echo", tools=[toolset, "docs_search"])
    async with Runner(agent, resources=resources) as runner:
        result = await runner.invoke("hi")
        print(result.text)
    async with toolset:
        tools = await toolset.tools()
        print([t.spec.name for t in tools])
    try:
        print(await MCPToolset(http, optional=False).tools())
    except MCPConnectionError as failed:  # a ConnectionError naming the server and the stage
        assert_type(failed.server, StdioServer | HTTPServer | SSEServer)
        assert_type(failed.stage, Literal["connect", "handshake", "list", "request"])
    MCPToolset(http, optional="yes")  # type: ignore[arg-type]


async def stores(redis_url: str, dsn: str) -> None:
    chosen: list[CheckpointStore] = [
        InMemoryCheckpointStore(),
        SQLiteCheckpointStore("checkpoints.db"),
        RedisCheckpointStore(redis_url),
        PostgresCheckpointStore(dsn),
    ]
    for store in chosen:
        runner = Runner(ReActAgent("a", EchoModel()), checkpoint_store=store)
        async for pending in runner.pending():
            assert_type(pending, PendingCheckpoint)
            print(pending.checkpoint_id, [point.id for point in pending.points])
    sqlite = SQLiteCheckpointStore("checkpoints.db")
    async with sqlite:
        async for pending in list_pending(sqlite):
            print(pending.checkpoint_id)
    data = await sqlite.get("c1")
    assert_type(data, bytes | None)
    print(adk.CheckpointNotFoundError)
