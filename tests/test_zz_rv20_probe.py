import pytest
from adk import Runner, Message
from adk.tools import tool
from prebuilt import ReActAgent
from tests.openai_server import Call, OpenAIServer, Reply
from tests.test_openai_model import make_model

@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("shape", ["noids", "shared"])
async def test_probe(streaming, shape):
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b
    kw = {"call_ids": False}
    if shape == "shared":
        kw["call_index"] = "shared"
    async with OpenAIServer(thought_signatures=True) as server:
        server.script(
            Reply(tool_calls=[Call("add", '{"a": 1, "b": 2}'), Call("add", '{"a": 3, "b": 4}')], **kw),
            Reply(tool_calls=[Call("add", '{"a": 3, "b": 7}')], **kw),
            Reply(text="10"),
        )
        async with make_model(server) as model:
            runner = Runner(ReActAgent("calc", model, tools=[add]), enable_streaming=streaming)
            result = await runner.invoke("go")
            print([ (m.tool_calls, m.metadata.get("tool_call_extra_content")) for m in result.messages if m.tool_calls])
            assert result.text == "10"

from adk.events import AgentEvent
import json
@pytest.mark.parametrize("streaming", [False, True])
async def test_probe_events(streaming):
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b
    first = Reply(tool_calls=[Call("add", '{"a": 1, "b": 2}', id="c1")], reasoning="think think", reasoning_details=True)
    async with OpenAIServer(thought_signatures=True) as server:
        server.script(first, Reply(text="3"))
        async with make_model(server) as model:
            runner = Runner(ReActAgent("calc", model, tools=[add]), enable_streaming=streaming)
            n = 0
            async for ev in runner.run("go"):
                if ev.output is not None and ev.output.stream is not None:
                    await ev.output.stream.collect()
                d = json.loads(json.dumps(ev.to_dict()))
                back = AgentEvent.from_dict(d)
                assert back.to_dict() == ev.to_dict()
                n += 1
                if ev.output and ev.output.message is None and ev.output.stream is not None:
                    m = d["output"]["message"]
                    if m.get("tool_calls"): print(m.get("metadata"))

import asyncio
from adk.messages import ToolCall
from tests.test_openai_model import ADD
@pytest.mark.parametrize("kind", ["ids", "kept"])
async def test_probe_race(kind):
    history = [
        Message.user("2 + 3?"),
        Message.assistant("", [ToolCall(id="call_0", name="add", arguments='{"a": 2, "b": 3}')]),
        Message.tool("5", tool_call_id="call_0", name="add"),
    ]
    history[1].metadata["reasoning_details"] = [{"type": "reasoning.encrypted", "data": "e"}]
    kw = {"tool_ids": "mistral"} if kind == "ids" else {"forbids": ["reasoning_details"]}
    server = OpenAIServer(hold=2, default=Reply(text="ok"), **kw)
    async with server, make_model(server) as model:
        a, b = await asyncio.gather(model.generate(history, tools=[ADD]), model.generate(history, tools=[ADD]))
        assert a.content == b.content == "ok"
        c = await model.generate(history, tools=[ADD])
    print([r.status if hasattr(r, "status") else None for r in server.requests], len(server.requests))
    assert len(server.requests) == 5
