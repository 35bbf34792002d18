"""OpenAIChatModel against a real HTTP server speaking the OpenAI wire protocol (tests/openai_server.py).

Nothing here is mocked: the adapter drives the real ``openai`` SDK over loopback HTTP, and assertions
read what the server recorded (bodies, headers, arrival times) and what the adapter returned.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
import logging
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable
from email.utils import formatdate
from typing import Any

import openai
import pydantic
import pytest
from conftest import run_events, wire_model
from openai.types.chat import ChatCompletionChunk
from openai_server import Call, OpenAIServer, Reply, reasoning_details_of

from adk import RunContext, RunError, Runner, SequentialAgent, tool
from adk.callbacks import Callbacks, ModelRequest
from adk.checkpoint.codec import from_json_value, to_json_value
from adk.messages import Message, MessageChunk, Role, ToolCall, Usage, join_chunks
from adk.models import ChatModel, ModelError, ModelOptions, RetryPolicy
from adk.models._openai_chat import ChatStreamDecoder, chat_messages
from adk.models._retry import retry_after_seconds
from adk.models.openai import OpenAIChatModel
from adk.tools._executor import unique_call_ids
from adk.tools.base import ToolSpec
from prebuilt import ReActAgent

FAST = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.01, jitter=False)
ADD = ToolSpec(
    name="add",
    description="Add two integers.",
    parameters={
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
)
APIS = ["chat", "responses"]


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer() as srv:
        yield srv


def make_model(
    server: OpenAIServer, api: str = "chat", retry: RetryPolicy = FAST
) -> OpenAIChatModel:
    return wire_model(server, api, retry=retry)


async def collect(stream: AsyncIterator[MessageChunk]) -> list[MessageChunk]:
    return [chunk async for chunk in stream]


async def call(
    model: OpenAIChatModel, streaming: bool, messages: list[Message], **kw: Any
) -> Message:
    if streaming:
        return join_chunks(await collect(model.stream(messages, **kw)))
    return await model.generate(messages, **kw)


def run_add(message: Message) -> list[Message]:
    """Execute the model's ``add`` calls like a tool loop would."""
    results = []
    for tc in message.tool_calls:
        args = json.loads(tc.arguments)
        results.append(Message.tool(str(args["a"] + args["b"]), tool_call_id=tc.id, name=tc.name))
    return results


# -- text, reasoning, usage ---------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_text_reply_with_reasoning_usage_and_finish_reason(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    server.script(Reply(text="Paris is the capital.", reasoning="Recall geography.", usage=(21, 5)))
    async with make_model(server, api) as model:
        message = await call(
            model, streaming, [Message.system("Be brief."), Message.user("Capital of France?")]
        )
    assert message.role == Role.ASSISTANT
    assert message.content == "Paris is the capital."
    assert message.reasoning == "Recall geography."
    assert message.tool_calls == []
    assert message.usage == Usage(input_tokens=21, output_tokens=5, total_tokens=26)
    assert message.metadata["finish_reason"] == "stop"

    (request,) = server.requests
    assert request.path == f"/v1/{'chat/completions' if api == 'chat' else 'responses'}"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = request.body
    assert body["model"] == "test-model"
    conversation = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of France?"},
    ]
    assert body["messages" if api == "chat" else "input"] == conversation
    assert body.get("stream", False) is streaming
    if api == "chat" and streaming:
        # usage only arrives in a stream when asked for; the server omits it otherwise
        assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("streaming", [False, True])
async def test_deepseeks_prompt_cache_hits_are_cached_input_tokens(
    server: OpenAIServer, streaming: bool
) -> None:
    """DeepSeek reports cache hits as ``usage.prompt_cache_hit_tokens`` (and the rest as
    ``prompt_cache_miss_tokens``), not in ``prompt_tokens_details``: they were read as none."""
    server.script(Reply(text="hi", usage=(40, 3), cached_tokens=32, cache_fields="deepseek"))
    async with make_model(server) as model:
        message = await call(model, streaming, [Message.user("hi")])
    assert message.usage == Usage(
        input_tokens=40, output_tokens=3, total_tokens=43, cached_input_tokens=32
    )


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_reply_is_read_without_asking_the_sdk_for_names_it_lacks(
    server: OpenAIServer, api: str, streaming: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name an SDK response object lacks goes through pydantic's ``__getattr__`` and an
    AttributeError raised and caught, ~2-4 µs a read: the Responses API's ``Response`` has no
    ``system_fingerprint``, read for every reply's identity, and a Chat usage without
    ``prompt_tokens_details`` (most servers but OpenAI) was read for ``prompt_cache_hit_tokens``,
    an extra the SDK serves through the same hook. Both are read from the object's dicts now, and
    what they say still comes through (DeepSeek's cache hits)."""
    lacking: list[tuple[str, str]] = []
    getattr_of_pydantic = pydantic.BaseModel.__getattr__

    def spied(self: pydantic.BaseModel, name: str) -> Any:
        if type(self).__module__.startswith("openai."):
            lacking.append((type(self).__name__, name))
        return getattr_of_pydantic(self, name)

    monkeypatch.setattr(pydantic.BaseModel, "__getattr__", spied)
    again = Reply(text="again", usage=(9, 1), cached_tokens=4, cache_fields="deepseek")
    server.script(Reply(text="hi", usage=(40, 3)), again)
    async with make_model(server, api) as model:
        await call(model, streaming, [Message.user("hi")])  # the SDK's first use: not counted
        lacking.clear()
        message = await call(model, streaming, [Message.user("hi")])
    assert lacking == []
    assert message.content == "again"
    assert message.metadata["response_model"] == "test-model"
    assert message.usage == Usage(
        input_tokens=9, output_tokens=1, total_tokens=10, cached_input_tokens=4
    )


async def test_streamed_chunks_arrive_incrementally(server: OpenAIServer) -> None:
    server.script(Reply(text="one two three four five six"))
    async with make_model(server) as model:
        chunks = await collect(model.stream([Message.user("count")]))
    texts = [c.content for c in chunks if c.content]
    assert len(texts) > 1 and "".join(texts) == "one two three four five six"
    assert chunks[-1].usage == Usage(input_tokens=11, output_tokens=7, total_tokens=18)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_length_finish_reason(server: OpenAIServer, api: str, streaming: bool) -> None:
    server.script(Reply(text="cut sho", finish_reason="length"))
    async with make_model(server, api) as model:
        message = await call(model, streaming, [Message.user("long story")])
    assert message.content == "cut sho"
    assert message.metadata["finish_reason"] == "length"


# -- tool calls ---------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_call_round_trip(server: OpenAIServer, api: str, streaming: bool) -> None:
    server.script(
        Reply(tool_calls=[Call("add", '{"a": 2, "b": 3}', id="call_abc")]),
        Reply(text="2 + 3 = 5"),
    )
    history = [Message.user("What is 2 + 3?")]
    async with make_model(server, api) as model:
        first = await call(model, streaming, history, tools=[ADD])
        assert first.content == ""
        assert [(t.id, t.name, json.loads(t.arguments)) for t in first.tool_calls] == [
            ("call_abc", "add", {"a": 2, "b": 3})
        ]
        assert first.metadata["finish_reason"] == "tool_calls"
        history += [first, *run_add(first)]
        final = await call(model, streaming, history, tools=[ADD])
    assert final.content == "2 + 3 = 5"
    assert final.tool_calls == []

    sent = server.requests[1].body
    if api == "chat":
        assert sent["tools"] == [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two integers.",
                    "parameters": ADD.parameters,
                },
            }
        ]
        assert sent["messages"][1:] == [
            {
                "role": "assistant",
                "content": "",  # present, not absent: some servers reject a missing content
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_abc", "content": "5"},
        ]
    else:
        assert sent["tools"] == [
            {
                "type": "function",
                "name": "add",
                "description": "Add two integers.",
                "parameters": ADD.parameters,
                "strict": False,
            }
        ]
        assert sent["input"][1:] == [
            {
                "type": "function_call",
                "call_id": "call_abc",
                "name": "add",
                "arguments": '{"a": 2, "b": 3}',
            },
            {"type": "function_call_output", "call_id": "call_abc", "output": "5"},
        ]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_call_arguments_sent_as_an_object_are_kept(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    """Some llama.cpp builds and TGI send ``arguments`` as a JSON object, not a string: the call
    used to reach the tool with ``{}``, its arguments silently dropped."""
    calls = [Call("add", '{"a": 2, "b": 3}', id="c1"), Call("add", '{"a": 4, "b": 5}', id="c2")]
    server.script(Reply(tool_calls=calls, arguments_as_object=True))
    async with make_model(server, api) as model:
        message = await call(model, streaming, [Message.user("go")], tools=[ADD])
    assert [(t.id, json.loads(t.arguments)) for t in message.tool_calls] == [
        ("c1", {"a": 2, "b": 3}),
        ("c2", {"a": 4, "b": 5}),
    ]


@pytest.mark.parametrize("style", ["deepseek", "kimi"])
@pytest.mark.parametrize("streaming", [False, True])
async def test_reasoning_goes_back_to_servers_that_require_it(style: str, streaming: bool) -> None:
    """DeepSeek's and Kimi's thinking modes refuse a conversation whose assistant tool-call
    messages come without their ``reasoning_content``: the second turn of every tool loop failed
    with HTTP 400. Servers that take no reasoning back (the default) still get none."""
    async with OpenAIServer(reasoning_back=style) as server:
        server.script(
            Reply(tool_calls=[Call("add", '{"a": 2, "b": 3}', id="c1")], reasoning="Add them."),
            Reply(text="5"),
            Reply(text="done"),
        )
        history = [Message.user("2 + 3?")]
        async with make_model(server) as model:
            first = await call(model, streaming, history, tools=[ADD])
            history += [first, *run_add(first)]
            assert (await call(model, streaming, history, tools=[ADD])).content == "5"
            history += [Message.assistant("5"), Message.user("thanks")]
            assert (await call(model, streaming, history, tools=[ADD])).content == "done"
        sent = [body["messages"] for body in server.bodies]
        assert len(sent) == 4  # the one refusal, then reasoning goes back from then on
        assert "reasoning_content" not in sent[1][1]
        for messages in sent[2:]:
            assert messages[1]["reasoning_content"] == "Add them."
        assert sent[3][3] == {"role": "assistant", "content": "5"}  # only beside tool calls


@pytest.mark.parametrize("streaming", [False, True])
async def test_geminis_thought_signatures_go_back_with_their_calls(streaming: bool) -> None:
    """Gemini 3 through its OpenAI endpoint puts a thought signature on a reply's (first) tool
    call, ``extra_content.google.thought_signature``, and refuses a request whose current turn
    holds the call without it: "Function call is missing a thought_signature in functionCall
    parts" (HTTP 400; ai.google.dev/gemini-api/docs/thought-signatures, "you must pass back
    thought signatures during function calling"; openai/codex#7586, crmne/ruby_llm#588). The
    adapter dropped it, so the second call of every tool loop failed. It is kept in the reply's
    ``metadata["tool_call_extra_content"]`` (by call id), which the history and checkpoints
    keep, and sent back on its call."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with OpenAIServer(thought_signatures=True) as server:
        server.script(
            Reply(tool_calls=[Call("add", '{"a": 1, "b": 2}'), Call("add", '{"a": 3, "b": 4}')]),
            Reply(tool_calls=[Call("add", '{"a": 3, "b": 7}', id="second")]),
            Reply(text="10"),
            Reply(text="ok"),
        )
        async with make_model(server) as model:
            runner = Runner(ReActAgent("calc", model, tools=[add]), enable_streaming=streaming)
            result = await runner.invoke("1+2, 3+4, then add them")
            assert result.text == "10"
            replies = [m for m in result.messages if m.tool_calls]
            extras = [m.metadata["tool_call_extra_content"] for m in replies]
            assert extras == [
                {"call_0": {"google": {"thought_signature": "c2lnbmF0dXJl-1"}}},
                {"second": {"google": {"thought_signature": "c2lnbmF0dXJl-2"}}},
            ]
            # a checkpoint keeps it
            assert from_json_value(to_json_value(result.messages)) == result.messages
            later = await runner.invoke([*result.messages, Message.user("thanks")])
            assert later.text == "ok"
    assert len(server.requests) == 4  # none refused
    last = server.bodies[2]["messages"]
    sent = [m["tool_calls"] for m in last if m.get("tool_calls")]
    assert sent[0][0]["extra_content"] == {"google": {"thought_signature": "c2lnbmF0dXJl-1"}}
    assert "extra_content" not in sent[0][1]  # the second of parallel calls had none
    assert sent[1][0]["extra_content"] == {"google": {"thought_signature": "c2lnbmF0dXJl-2"}}


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_thought_signature_goes_back_with_a_call_given_an_id_of_its_own(
    streaming: bool,
) -> None:
    """The next reply's call under the id of the call before (``call_0``, a server numbering
    each response's calls) gets an id of its own in the run, ``call_0-1``: what the server put
    on it (Gemini's thought signature) is kept under that id and sent back on it, and each
    result goes back under its own call's id."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with OpenAIServer(thought_signatures=True) as server:
        server.script(
            Reply(tool_calls=[Call("add", '{"a": 1, "b": 2}')]),
            Reply(tool_calls=[Call("add", '{"a": 3, "b": 4}')]),
            Reply(text="done"),
        )
        async with make_model(server) as model:
            runner = Runner(ReActAgent("calc", model, tools=[add]), enable_streaming=streaming)
            result = await runner.invoke("1+2, then 3+4")
            assert result.text == "done"
    replies = [m for m in result.messages if m.tool_calls]
    assert [[call.id for call in m.tool_calls] for m in replies] == [["call_0"], ["call_0-1"]]
    assert [m.metadata["tool_call_extra_content"] for m in replies] == [
        {"call_0": {"google": {"thought_signature": "c2lnbmF0dXJl-1"}}},
        {"call_0-1": {"google": {"thought_signature": "c2lnbmF0dXJl-2"}}},
    ]
    last = server.bodies[2]["messages"]
    sent = [call for m in last if m.get("tool_calls") for call in m["tool_calls"]]
    assert [call["id"] for call in sent] == ["call_0", "call_0-1"]
    assert [call["extra_content"]["google"]["thought_signature"] for call in sent] == [
        "c2lnbmF0dXJl-1",
        "c2lnbmF0dXJl-2",
    ]
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == ["call_0", "call_0-1"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_responses_call_under_a_reused_id_goes_back_under_its_own(
    streaming: bool,
) -> None:
    """The Responses API pairs each ``function_call_output`` with its ``function_call`` by
    ``call_id`` within one request: the next response's call under the id of the one before
    (``call_0``) is sent back, with its output, under the id of its own the run gave it."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with OpenAIServer() as server:
        server.script(
            Reply(tool_calls=[Call("add", '{"a": 1, "b": 2}')]),
            Reply(tool_calls=[Call("add", '{"a": 3, "b": 4}')]),
            Reply(text="done"),
        )
        async with make_model(server, "responses") as model:
            runner = Runner(ReActAgent("calc", model, tools=[add]), enable_streaming=streaming)
            result = await runner.invoke("1+2, then 3+4")
            assert result.text == "done"
    items = server.bodies[2]["input"]
    calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
    outputs = [item for item in items if item.get("type") == "function_call_output"]
    assert calls == [item["call_id"] for item in outputs] == ["call_0", "call_0-1"]
    assert [item["output"] for item in outputs] == ["3", "7"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_openrouters_reasoning_details_go_back_with_their_message(streaming: bool) -> None:
    """OpenRouter gives a reasoning model's reasoning as ``reasoning_details`` (a signed
    ``reasoning.text``, a ``reasoning.encrypted``) and, for Gemini 3 (and Claude's thinking),
    refuses a tool loop's next request without them on the assistant message: "Gemini models
    require OpenRouter reasoning details to be preserved in each request" (HTTP 400; openrouter.ai
    reasoning-tokens#preserving-reasoning-blocks; microsoft/agent-framework#2947). The adapter
    read the text alone, so the second call of every tool loop failed. They are kept in the
    reply's ``metadata["reasoning_details"]`` and sent back on it; streamed, the pieces of one
    entry are joined into it (OpenRouter streams every entry at ``index`` 0, the signature in a
    text-less piece after the text: OpenRouterTeam/ai-sdk-provider#520, agno-agi/agno#8861), so
    what goes back is what a plain answer would have carried."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    first = Reply(
        tool_calls=[Call("add", '{"a": 1, "b": 2}', id="c1")],
        reasoning="I should add these numbers with the tool.",
        reasoning_details=True,
    )
    async with OpenAIServer(keep_reasoning_details=True) as server:
        server.script(first, Reply(text="3"))
        async with make_model(server) as model:
            runner = Runner(ReActAgent("calc", model, tools=[add]), enable_streaming=streaming)
            result = await runner.invoke("1+2?")
    assert result.text == "3"
    assert len(server.requests) == 2  # none refused
    reply = next(m for m in result.messages if m.tool_calls)
    assert reply.reasoning == "I should add these numbers with the tool."
    expected = reasoning_details_of(first)
    if streaming:  # as streamed: each at index 0
        expected = [{**entry, "index": 0} for entry in expected]
    assert reply.metadata["reasoning_details"] == expected
    user, sent, _ = server.bodies[1]["messages"]
    assert sent["tool_calls"][0]["id"] == "c1" and sent["reasoning_details"] == expected
    assert "reasoning_details" not in user


@pytest.mark.parametrize("streaming", [False, True])
async def test_each_signed_reasoning_block_goes_back_whole(streaming: bool) -> None:
    """Claude's thinking through OpenRouter can come in several blocks, each a ``reasoning.text``
    entry signed on its own; streamed, OpenRouter sends every piece at ``index`` 0, each block's
    signature in a text-less piece after its text. The stream's pieces were joined by type and
    index alone, so the second block's text went on the first's (its signature dropped) and the
    signed text sent back was neither block: OpenRouter (Anthropic: "Invalid signature in
    thinking block") refused the tool loop's next call. A block whose signature came is whole: a
    piece with text (or a signature) after it begins the next one."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    first = Reply(
        tool_calls=[Call("add", '{"a": 1, "b": 2}', id="c1")],
        reasoning="First I think about it. Then I add with the tool.",
        reasoning_details=True,
        reasoning_blocks=2,
    )
    async with OpenAIServer(keep_reasoning_details=True) as server:
        server.script(first, Reply(text="3"))
        async with make_model(server) as model:
            runner = Runner(ReActAgent("calc", model, tools=[add]), enable_streaming=streaming)
            result = await runner.invoke("1+2?")
    assert result.text == "3"
    assert len(server.requests) == 2  # none refused
    reply = next(m for m in result.messages if m.tool_calls)
    assert reply.reasoning == first.reasoning
    expected = reasoning_details_of(first)
    assert [e["signature"] for e in expected[:2]] == ["c2lnbmVk", "c2lnbmVk1"]
    if streaming:  # as streamed: each at index 0
        expected = [{**entry, "index": 0} for entry in expected]
    assert reply.metadata["reasoning_details"] == expected


@pytest.mark.parametrize("streaming", [False, True])
async def test_what_a_server_refuses_to_be_sent_back_is_left_out_once_refused(
    streaming: bool,
) -> None:
    """What the adapter keeps to send back (Gemini's ``extra_content`` on a call, OpenRouter's
    ``reasoning_details``) goes to whichever server the conversation is sent to. One that
    validates messages strictly refuses the request: Mistral answers a field it does not know in
    a message with 422 ``extra_forbidden``, "Extra inputs are not permitted" (loc ``["body",
    "messages", 1, "assistant", "reasoning_content"]`` in charmbracelet/crush#1590 and
    BerriAI/litellm#30835). Once refused so, they are left out, for that call and from then on;
    the history keeps them."""
    history = [
        Message.user("2 + 3?"),
        Message.assistant("", [ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 3}')]),
        Message.tool("5", tool_call_id="c1", name="add"),
    ]
    history[1].metadata["tool_call_extra_content"] = {"c1": {"google": {"thought_signature": "s"}}}
    history[1].metadata["reasoning_details"] = [{"type": "reasoning.encrypted", "data": "e"}]
    kept = dict(history[1].metadata)
    server = OpenAIServer(forbids=["extra_content", "reasoning_details"])
    async with server, make_model(server) as model:
        server.script(Reply(text="5"), Reply(text="again"))
        assert (await call(model, streaming, history, tools=[ADD])).content == "5"
        assert (await call(model, streaming, history, tools=[ADD])).content == "again"
    assert len(server.requests) == 3  # the one refusal, then left out from then on
    assert "reasoning_details" in server.bodies[0]["messages"][1]
    for body in server.bodies[1:]:
        assert "reasoning_details" not in body["messages"][1]
        assert "extra_content" not in body["messages"][1]["tool_calls"][0]
    assert history[1].metadata == kept


@pytest.mark.parametrize("streaming", [False, True])
async def test_what_gemini_does_not_know_is_left_out_once_refused(streaming: bool) -> None:
    """A conversation that went through OpenRouter (its reply's ``reasoning_details`` kept) sent
    on to Gemini's own OpenAI endpoint (another agent's model, a transfer, a fallback): Gemini
    answers a field it does not know with 400 "Invalid JSON payload received. Unknown name
    \"reasoning_details\" at 'messages[1]': Cannot find field." (its body a list: as for
    "google" in Alishahryar1/free-claude-code#542). Read as no refusal of the kept fields,
    every call of that conversation failed; they are left out once refused, as for Mistral."""
    history = [
        Message.user("2 + 3?"),
        Message.assistant("", [ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 3}')]),
        Message.tool("5", tool_call_id="c1", name="add"),
    ]
    history[1].metadata["reasoning_details"] = [{"type": "reasoning.encrypted", "data": "e"}]
    kept = dict(history[1].metadata)
    server = OpenAIServer(forbids=["reasoning_details"], forbids_as="gemini")
    async with server, make_model(server) as model:
        server.script(Reply(text="5"), Reply(text="again"))
        assert (await call(model, streaming, history, tools=[ADD])).content == "5"
        assert (await call(model, streaming, history, tools=[ADD])).content == "again"
    assert len(server.requests) == 3  # the one refusal, then left out from then on
    assert "reasoning_details" in server.bodies[0]["messages"][1]
    for body in server.bodies[1:]:
        assert "reasoning_details" not in body["messages"][1]
    assert history[1].metadata == kept


@pytest.mark.parametrize("streaming", [False, True])
async def test_what_a_reply_keeps_goes_back_only_to_the_server_it_came_from(
    streaming: bool,
) -> None:
    """What a reply keeps to be sent back (Gemini's ``extra_content`` on a call, OpenRouter's
    ``reasoning_details``) went to every server the conversation was sent to: a history carried
    from one provider to another (a service switching model, a Supervisor with two providers)
    sent a field only its maker knows, which a strict server refuses (here Mistral's 422, once,
    after which the model sent none for any conversation). The reply is tagged with the server
    it came from (``metadata["kept_from"]``, a digest of its URL), and what it keeps goes back
    to that server only; a message without the tag (a checkpoint saved before it) goes as it
    did, to any server."""
    async with (
        OpenAIServer(thought_signatures=True) as gemini,
        OpenAIServer(forbids=["extra_content", "reasoning_details"]) as strict,
    ):
        first = Reply(
            tool_calls=[Call("add", '{"a": 2, "b": 3}', id="c1")],
            reasoning="Add them.",
            reasoning_details=True,
        )
        gemini.script(first, Reply(text="5 again"))
        strict.script(Reply(text="5"), Reply(text="5 still"))
        async with make_model(gemini) as made, make_model(strict) as other:
            reply = await call(made, streaming, [Message.user("2 + 3?")], tools=[ADD])
            assert reply.metadata["tool_call_extra_content"] == {
                "c1": {"google": {"thought_signature": "c2lnbmF0dXJl-1"}}
            }
            assert reply.metadata["reasoning_details"]
            history = [Message.user("2 + 3?"), reply, *run_add(reply)]
            # a checkpoint keeps the tag
            history = from_json_value(to_json_value(history))
            assert (await other.generate(history, tools=[ADD])).content == "5"
            assert (await made.generate(history, tools=[ADD])).content == "5 again"
            # a message saved before the tag goes to any server, as it did
            untagged = history[1].model_copy(deep=True)
            untagged.metadata.pop("kept_from", None)
            assert (
                await other.generate([history[0], untagged, history[2]], tools=[ADD])
            ).content == "5 still"
    to_other, untagged_sent = strict.bodies[0]["messages"][1], strict.bodies[1]["messages"][1]
    assert "reasoning_details" not in to_other
    assert "extra_content" not in to_other["tool_calls"][0]
    assert "reasoning_details" in untagged_sent  # then refused once, and left out from then on
    assert len(strict.requests) == 3
    back = gemini.bodies[1]["messages"][1]
    assert back["tool_calls"][0]["extra_content"] == {
        "google": {"thought_signature": "c2lnbmF0dXJl-1"}
    }
    assert back["reasoning_details"] == reply.metadata["reasoning_details"]
    tag = reply.metadata["kept_from"]  # the server's URL is not in it
    assert isinstance(tag, str) and "127.0.0.1" not in tag and "http" not in tag


@pytest.mark.parametrize("streaming", [False, True])
async def test_what_a_reply_keeps_goes_back_only_to_the_model_that_made_it(
    server: OpenAIServer, streaming: bool
) -> None:
    """What a reply keeps to be sent back was tagged with its server alone, so a gateway serving
    several models (OpenRouter; a service switching model, ``model_name`` set between calls)
    sent one model's thought signature and signed reasoning to another, which refuses it (a
    signature is bound to its model: Gemini's 400 "Corrupted thought signature", Anthropic's
    "Invalid signature in thinking block"). The tag names the model too; a message saved with
    the server's tag alone (before the model was in it) goes to any model on that server, as it
    did, and one of another server to none."""
    server.script(
        Reply(
            tool_calls=[Call("add", '{"a": 2, "b": 3}', id="c1")],
            reasoning="Add them.",
            reasoning_details=True,
            signature="sig",
        ),
        *[Reply(text="5")] * 4,
    )
    async with make_model(server) as model:
        reply = await call(model, streaming, [Message.user("2 + 3?")], tools=[ADD])
        history = [Message.user("2 + 3?"), reply, *run_add(reply)]
        history = from_json_value(to_json_value(history))  # a checkpoint keeps the tag
        model.model_name = "another-model"  # the same gateway, another model
        await model.generate(history, tools=[ADD])
        model.model_name = "test-model"
        await model.generate(history, tools=[ADD])
        # the tag of the previous version: a digest of the server's URL alone
        old = hashlib.sha256(server.base_url.encode()).hexdigest()[:16]
        saved_before = history[1].model_copy(deep=True)
        saved_before.metadata["kept_from"] = old
        model.model_name = "another-model"
        await model.generate([history[0], saved_before, history[2]], tools=[ADD])
        saved_before.metadata["kept_from"] = "0123456789abcdef"  # another server's
        await model.generate([history[0], saved_before, history[2]], tools=[ADD])
    other, same, old_tag, elsewhere = (body["messages"][1] for body in server.bodies[1:])
    for withheld in (other, elsewhere):
        assert "reasoning_details" not in withheld
        assert "extra_content" not in withheld["tool_calls"][0]
    for sent in (same, old_tag):
        assert sent["reasoning_details"] == reply.metadata["reasoning_details"]
        assert sent["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": "sig"}}
    assert reply.metadata["kept_from"] not in (old, "")


@pytest.mark.parametrize("streaming", [False, True])
async def test_what_a_reply_keeps_is_tagged_with_the_model_a_call_asked_for(
    server: OpenAIServer, streaming: bool
) -> None:
    """A call's ``options.extra`` travels as ``extra_body`` and so names the model of that call
    when it holds ``model`` (one call to another model on a gateway): the reply was tagged with
    the adapter's ``model_name`` all the same, so its signature went back to that model, which
    refuses it, and was withheld from the model that made it when asked again the same way."""
    server.script(
        Reply(
            tool_calls=[Call("add", '{"a": 2, "b": 3}', id="c1")],
            reasoning="Add them.",
            reasoning_details=True,
            signature="sig",
        ),
        *[Reply(text="5")] * 2,
    )
    other = ModelOptions(extra={"model": "other-model"})
    async with make_model(server) as model:
        reply = await call(model, streaming, [Message.user("2 + 3?")], tools=[ADD], options=other)
        history = [Message.user("2 + 3?"), reply, *run_add(reply)]
        await model.generate(history, tools=[ADD])  # to the adapter's own model
        await model.generate(history, tools=[ADD], options=other)
    assert [body["model"] for body in server.bodies] == ["other-model", "test-model", "other-model"]
    own, same = (body["messages"][1] for body in server.bodies[1:])
    assert "reasoning_details" not in own
    assert "extra_content" not in own["tool_calls"][0]
    assert same["reasoning_details"] == reply.metadata["reasoning_details"]
    assert same["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": "sig"}}


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
async def test_a_call_that_asked_for_another_model_names_it_in_its_error(
    server: OpenAIServer, streaming: bool
) -> None:
    """A call whose ``options.extra`` names a model asks the server for that one (extra_body),
    but its error named ``model_name``: a 404 for the model asked said to check
    'test-model', which the server has."""
    server.script(
        Reply(status=404, error="The model `other-model` does not exist"),
        Reply(text="an answer cut short in its middle", break_after=3),
    )
    other = ModelOptions(extra={"model": "other-model"})
    async with make_model(server) as model:
        with pytest.raises(ModelError, match="HTTP 404") as caught:
            await call(model, streaming, [Message.user("hi")], options=other)
        text = str(caught.value)
        assert "(model 'other-model')" in text and "check the model name, 'other-model'" in text
        assert "test-model" not in text, text
        if streaming:  # and one failing after chunks reached the caller
            with pytest.raises(ModelError, match="mid-stream") as cut:
                await call(model, streaming, [Message.user("hi")], options=other)
            assert "(model 'other-model')" in str(cut.value), str(cut.value)


@pytest.mark.parametrize("resent", ["after", "whole", "cumulative"])
@pytest.mark.parametrize("call_index", ["each", "shared", "none"])
async def test_tool_call_arguments_a_server_sends_more_than_once_are_taken_once(
    server: OpenAIServer, resent: str, call_index: str
) -> None:
    """Servers that stream a call's arguments more than once: proxies sending the whole
    arguments again after the fragments (lidge-jun/opencodex#361), or the whole call again, its
    arguments re-serialized, in a "consolidated" chunk (elizaOS/eliza#16973), and hosts sending
    the arguments so far in every fragment (DeepSeek's, NousResearch/hermes-agent#35718). Joined
    as they came, the arguments were ``{...}{...}``, JSON no tool takes (the call failed), and
    the call sent again under its id was a second call, the tool run twice. Each call is taken
    once, with its arguments once."""
    calls = [
        Call("add", '{"a": 1, "b": 2}', id="call_a"),
        Call("add", '{"a": 30, "b": 4}', id="call_b"),
    ]
    server.script(Reply(tool_calls=calls, arguments_resent=resent, call_index=call_index))
    async with make_model(server) as model:
        message = join_chunks(await collect(model.stream([Message.user("1+2, 30+4?")])))
    assert [json.loads(c.arguments) for c in message.tool_calls] == [
        {"a": 1, "b": 2},
        {"a": 30, "b": 4},
    ]
    assert [(c.id, c.name) for c in message.tool_calls] == [("call_a", "add"), ("call_b", "add")]
    assert message.metadata["finish_reason"] == "tool_calls"


@pytest.mark.parametrize("call_index", ["each", "none"])
async def test_responses_arguments_sent_only_in_their_done_event_are_read(
    server: OpenAIServer, call_index: str
) -> None:
    """OpenAI's gpt-5.3-codex-spark streams a function call's arguments in its
    ``response.function_call_arguments.done`` alone, without deltas, and gateways then send its
    finished item with empty arguments (BerriAI/litellm#27144, Wei-Shaw/sub2api#6629): the
    ``.done`` event was ignored, and the call went to its tool with ``{}``. Read from there when
    no delta carried them; after deltas it repeats them, and is ignored."""
    calls = [Call("add", '{"a": 1, "b": 2}', id="c1"), Call("add", '{"a": 3, "b": 4}', id="c2")]
    server.script(
        Reply(tool_calls=calls, arguments_done_only=True, call_index=call_index),
        Reply(tool_calls=calls, call_index=call_index),
    )
    async with make_model(server, "responses") as model:
        for _ in range(2):
            message = join_chunks(await collect(model.stream([Message.user("1+2, 3+4?")])))
            assert message.tool_calls == [
                ToolCall(id=c.id or "", name=c.name, arguments=c.arguments) for c in calls
            ]


async def test_a_second_call_like_the_first_is_still_a_call(server: OpenAIServer) -> None:
    """What ``_WireCall.repeats`` must not take for a repeat: a server without ids numbering
    every call 0 sends two equal calls (a die rolled twice), each whole with its name; two
    calls of ids of their own with equal arguments, at one wire index or two; and two equal
    calls at index 0, each a head with its name then its arguments whole in one fragment, with
    no id or one id for both: the name again after a whole call says a new call begins, and
    the arguments after it are that call's, not the first call's again. Nor the second of two
    calls sharing an id on their heads alone, each sent whole again under it: its repeat went
    to the first call, whose arguments became ``{...}{...}``, and a third's head reopened the
    first call, its arguments then ``{...}{...}`` too."""
    same = '{"a": 1, "b": 1}'
    server.script(
        Reply(
            tool_calls=[Call("add", same)] * 2,
            call_ids=False,
            call_index="shared",
            arguments_as_object=True,
        ),
        Reply(tool_calls=[Call("add", same, id="x"), Call("add", same, id="y")]),
        Reply(
            tool_calls=[Call("add", same, id="x"), Call("add", same, id="y")],
            call_index="shared",
        ),
        # each call's head (its name) and then its arguments in one fragment, every call at
        # index 0: without ids, and with one id for all repeated in every fragment (llama.cpp)
        Reply(tool_calls=[Call("add", same)] * 2, call_ids=False, call_index="shared", fragment=64),
        Reply(
            tool_calls=[Call("add", same, id="x")] * 2,
            call_index="shared",
            fragment=64,
            repeat_name=True,
        ),
        # calls sharing one id given on their heads alone, each sent whole again under it at
        # its end (a proxy's "consolidated" chunk): the second call's repeat is its own
        Reply(
            tool_calls=[Call("add", same, id="x")] * 2,
            call_index="shared",
            fragment=64,
            arguments_resent="whole",
        ),
        Reply(
            tool_calls=[Call("add", same, id="x")] * 2,
            call_index="none",
            fragment=4,
            arguments_resent="whole",
        ),
        # three such calls: the third's head named the id's first call, reopened it
        Reply(tool_calls=[Call("add", same, id="x")] * 3, call_index="shared", fragment=4),
    )
    async with make_model(server) as model:
        for times in [2] * 7 + [3]:
            message = join_chunks(await collect(model.stream([Message.user("roll twice")])))
            assert [json.loads(c.arguments) for c in message.tool_calls] == [
                {"a": 1, "b": 1}
            ] * times


async def test_calls_given_ids_of_their_own_keep_what_the_server_put_on_them() -> None:
    """A server that gives two calls of one answer the same id, each with what it wants back
    (``extra_content``): the reply kept them by id, the second over the first, and once the
    agent gave the second call an id of its own (``unique_call_ids``, ``dup-1``) the first call
    went back with the second's and the second with none. Each is kept by the id the call has
    once ids are made unique, and found so whether they were or not."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    calls = [Call("add", '{"a": 1, "b": 2}', id="dup"), Call("add", '{"a": 3, "b": 4}', id="dup")]
    async with OpenAIServer() as server:
        server.script(
            Reply(tool_calls=calls, signature="s", sign_each=True),
            Reply(text="3, 7"),
            Reply(tool_calls=calls, signature="s", sign_each=True),
        )
        async with make_model(server) as model:
            result = await Runner(ReActAgent("calc", model, tools=[add])).invoke("1+2, 3+4?")
            assert result.text == "3, 7"
            reply = next(m for m in result.messages if m.tool_calls)
            assert [c.id for c in reply.tool_calls] == ["dup", "dup-1"]
            # a reply whose ids were not made unique (a caller of generate) sends them alike
            plain = await model.generate([Message.user("1+2, 3+4?")], tools=[ADD])
    signed = [{"google": {"thought_signature": "s"}}, {"google": {"thought_signature": "s-1"}}]
    sent = server.bodies[1]["messages"][1]["tool_calls"]
    assert [c["id"] for c in sent] == ["dup", "dup-1"]
    assert [c.get("extra_content") for c in sent] == signed
    assert [c.id for c in plain.tool_calls] == ["dup", "dup"]
    (wire,) = chat_messages([plain])
    assert [c.get("extra_content") for c in wire["tool_calls"]] == signed


@pytest.mark.parametrize("repeat_name", [False, True])
@pytest.mark.parametrize("call_index", ["each", "shared", "none"])
async def test_streamed_calls_sharing_an_id_stay_apart(
    server: OpenAIServer, call_index: str, repeat_name: bool
) -> None:
    """Three streamed calls of one answer sharing an id (what a non-streamed reply keeps as three
    calls, ``test_calls_given_ids_of_their_own_keep_what_the_server_put_on_them``): the decoder
    took a known id for a fragment of its call (llama.cpp repeats the id in every fragment), so
    the three became one call, its arguments run together ('{"a": 1}{"a": 3}{"a": 5}'), and it
    kept the last call's signature alone. A known id whose call is whole begins a new call when
    the fragment brings more arguments, as a fragment without an id does (``_WireCall``)."""
    calls = [Call("add", f'{{"a": {n}, "b": 1}}', id="dup") for n in (1, 3, 5)]
    server.script(
        Reply(
            tool_calls=calls,
            signature="s",
            sign_each=True,
            call_index=call_index,
            repeat_name=repeat_name,
        )
    )
    async with make_model(server) as model:
        message = join_chunks(await collect(model.stream([Message.user("go")], tools=[ADD])))
    assert [(c.id, c.arguments) for c in message.tool_calls] == [
        ("dup", '{"a": 1, "b": 1}'),
        ("dup", '{"a": 3, "b": 1}'),
        ("dup", '{"a": 5, "b": 1}'),
    ]
    unique_call_ids(message.tool_calls)
    (wire,) = chat_messages([message])
    assert [(c["id"], c.get("extra_content")) for c in wire["tool_calls"]] == [
        ("dup", {"google": {"thought_signature": "s"}}),
        ("dup-1", {"google": {"thought_signature": "s-1"}}),
        ("dup-2", {"google": {"thought_signature": "s-2"}}),
    ]


async def test_a_refusal_echoing_the_kept_fields_does_not_turn_them_off() -> None:
    """A FastAPI-based server (vLLM, LiteLLM) answers a model-level validator's failure with the
    whole request echoed as the error's ``input``, the list's text as the OpenAI error's message.
    Refusing some other field so, its text held the conversation's ``reasoning_details`` (in the
    echo) beside its words of refusal: the kept fields were read as refused and left out for the
    model from then on, the call sent again without them. The echo is not read (as f27e1c8 made
    it for Mistral's ``detail``): the refusal is the call's error, and the fields still go."""
    history = [
        Message.user("2 + 3?"),
        Message.assistant("", [ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 3}')]),
        Message.tool("5", tool_call_id="c1", name="add"),
    ]
    history[1].metadata["reasoning_details"] = [{"type": "reasoning.encrypted", "data": "e"}]
    bad = Reply(status=400, error="unsupported parameter: top_k", echo_request="message")
    async with OpenAIServer([bad, Reply(text="5")]) as server, make_model(server) as model:
        with pytest.raises(ModelError, match="unsupported parameter: top_k"):
            await model.generate(history, tools=[ADD])
        assert len(server.requests) == 1  # not sent again without the kept fields
        assert (await model.generate(history, tools=[ADD])).content == "5"
    assert "reasoning_details" in server.bodies[1]["messages"][1]


async def test_mistrals_validation_error_is_quoted() -> None:
    """Mistral answers a request its schema refuses with 422 and the validation errors under
    ``message.detail`` (``{"object": "error", "message": {"detail": [{"type": "extra_forbidden",
    "loc": [...], "msg": "Extra inputs are not permitted", "input": ...}]}}``, as in
    Gage-Technologies/mistral-go#3): the ModelError said only "HTTP 422: Error code: 422". It
    says each error's type, location and reason, the input each quotes left out."""
    history = [Message.user("hi there, private words")]
    async with OpenAIServer(forbids=["content"]) as server, make_model(server) as model:
        with pytest.raises(ModelError) as caught:
            await model.generate(history)
    said = str(caught.value)
    assert "HTTP 422:" in said and "extra_forbidden" in said
    assert "Extra inputs are not permitted" in said and "'messages', 0, 'user', 'content'" in said
    assert "private words" not in said
    assert len(server.requests) == 1


async def test_geminis_error_sent_as_a_list_is_quoted() -> None:
    """Gemini's OpenAI endpoint answers an error with a list holding the error object,
    ``[{"error": {"code": 400, "message": ..., "status": "INVALID_ARGUMENT"}}]`` (as quoted in
    discuss.ai.google.dev/t/109823 for a missing thought signature): the ModelError said only
    "HTTP 400: Error code: 400", the server's reason lost. Here a history whose tool call came
    from another model, which Gemini 3 refuses for its missing thought signature."""
    history = [
        Message.user("2 + 3?"),
        Message.assistant("", [ToolCall(id="c1", name="add", arguments='{"a": 2, "b": 3}')]),
        Message.tool("5", tool_call_id="c1", name="add"),
    ]
    async with OpenAIServer(thought_signatures=True) as server, make_model(server) as model:
        with pytest.raises(ModelError, match="HTTP 400: Function call is missing a thought_sig"):
            await model.generate(history, tools=[ADD])
        assert len(server.requests) == 1  # a 400: not retried


VLLM_ID = "chatcmpl-tool-e5add885dbb342de950be95dd89b71e7"  # vLLM's Mistral parser, before 0.7


@pytest.mark.parametrize("style", ["mistral", "openrouter"])
@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_call_ids_go_as_mistral_takes_them_once_refused(
    style: str, streaming: bool
) -> None:
    """Mistral (its API, and vLLM serving a Mistral model with ``--tokenizer-mode mistral``: both
    validate with ``mistral_common``) refuses a conversation holding a tool-call id that is not
    nine ASCII letters and digits: "Tool call id was abc123 but must be a-z, A-Z, 0-9, with a
    length of 9." (langchain-ai/langchain#24668; vllm-project/vllm#12332, whose own parser made
    ``chatcmpl-tool-...`` ids it then refused; through OpenRouter "Provider returned error" with
    Mistral's answer in ``metadata.raw``, openclaw/openclaw#57672). Ids another server made, or
    pyadk's own (``call_0`` for a call that came without one, ``call_0-1`` for a repeated one),
    failed the second turn of every tool loop with HTTP 400. Once refused, each id is sent as
    nine letters and digits made from it, the same on the call and on its result, for this and
    every later call; an id that already is one goes as it is, and the run keeps the ids."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    calls = [
        Call("add", '{"a": 1, "b": 2}', id=VLLM_ID),
        Call("add", '{"a": 3, "b": 4}', id="aB3xK9mP2"),  # one of Mistral's own: kept
        Call("add", '{"a": 5, "b": 6}', id="call_0"),
    ]
    async with OpenAIServer(tool_ids=style) as server:
        server.script(
            Reply(tool_calls=calls), Reply(text="3, 7, 11"), Reply(text="5"), Reply(text="9")
        )
        async with make_model(server) as model:
            agent = ReActAgent("calc", model, tools=[add])
            runner = Runner(agent, enable_streaming=streaming)
            result = await runner.invoke("1+2, 3+4, 5+6?")
            assert result.text == "3, 7, 11"
            # the run's history keeps the ids as they came
            kept = [
                e.output.message.tool_call_id
                for e in result.events
                if e.output is not None
                and e.output.message is not None
                and e.output.role == Role.TOOL
            ]
            assert sorted(kept) == sorted([VLLM_ID, "aB3xK9mP2", "call_0"])
            # a later conversation holding those calls goes in the form taken at once
            later = await runner.invoke([*result.messages, Message.user("and 2+3?")])
            assert later.text == "5"
    refused, sent, again = server.bodies[1], server.bodies[2], server.bodies[3]
    assert len(server.requests) == 4  # the one refusal, none after it
    assert [c["id"] for c in refused["messages"][1]["tool_calls"]] == [c.id for c in calls]
    for body in (sent, again):
        assistant, *results = body["messages"][1:5]
        ids = [c["id"] for c in assistant["tool_calls"]]
        assert all(len(i) == 9 and i.isascii() and i.isalnum() for i in ids)
        assert len(set(ids)) == 3 and ids[1] == "aB3xK9mP2"
        assert [m["tool_call_id"] for m in results] == ids  # each result answers its call
        assert ids == [c["id"] for c in sent["messages"][1]["tool_calls"]]  # the same each time


@pytest.mark.parametrize("repeat_name", [False, True])
async def test_streamed_fragments_joined_by_index(server: OpenAIServer, repeat_name: bool) -> None:
    """llama.cpp repeats id and name in every fragment; the joined call must name the tool once."""
    calls = [Call("add", '{"a": 10, "b": 20}', id="c1"), Call("mul", '{"x": [1, 2, 3]}', id="c2")]
    server.script(Reply(text="Let me compute.", tool_calls=calls, repeat_name=repeat_name))
    async with make_model(server) as model:
        chunks = await collect(model.stream([Message.user("go")], tools=[ADD]))
    fragments = [f for c in chunks for f in c.tool_calls]
    assert len(fragments) > 4  # arguments really arrived in pieces
    if repeat_name:
        assert sum(f.name == "add" for f in fragments) > 1
    message = join_chunks(chunks)
    assert message.content == "Let me compute."
    assert [(t.id, t.name, t.arguments) for t in message.tool_calls] == [
        ("c1", "add", '{"a": 10, "b": 20}'),
        ("c2", "mul", '{"x": [1, 2, 3]}'),
    ]
    assert message.usage is not None and message.usage.total_tokens == 18


@pytest.mark.parametrize("call_index", ["each", "none", "shared"])
@pytest.mark.parametrize("call_added", [True, False])
async def test_responses_calls_whose_events_carry_no_output_index_stay_apart(
    server: OpenAIServer, call_index: str, call_added: bool
) -> None:
    # Keyed by output_index alone, every call without one (or all with one index) was one call:
    # two calls became one with both arguments run together ('{"path": "a.txt"}{"path":
    # "b.txt"}'). Each event names its item (item_id, item.id), which keeps them apart.
    # Without call_added, argument deltas come with no output_item.added before them: the
    # call's id and name come only in its output_item.done, which was once skipped as repeating
    # the deltas, and the call was made to a tool named '' (answered "unknown tool").
    calls = [
        Call("read", '{"path": "a.txt"}', id="call_a"),
        Call("write", '{"path": "b.txt"}', id="call_b"),
    ]
    reply = Reply(tool_calls=calls, call_index=call_index, call_added=call_added, response_id="r")
    server.script(reply, reply)
    async with make_model(server, "responses") as model:
        streamed = await call(model, True, [Message.user("go")], tools=[ADD])
        plain = await call(model, False, [Message.user("go")], tools=[ADD])
    assert [(t.id, t.name, t.arguments) for t in streamed.tool_calls] == [
        ("call_a", "read", '{"path": "a.txt"}'),
        ("call_b", "write", '{"path": "b.txt"}'),
    ]
    assert streamed == plain


@pytest.mark.parametrize("call_index", ["shared", "none"])
@pytest.mark.parametrize("repeat_name", [False, True])
async def test_streamed_calls_with_a_shared_or_missing_index_stay_apart(
    server: OpenAIServer, call_index: str, repeat_name: bool
) -> None:
    """Ollama labels every call index 0 and Gemini's endpoint sends no index: a new call id starts
    a new call, and fragments without an id continue the call before them."""
    calls = [
        Call("read", '{"path": "a.txt"}', id="call_a"),
        Call("write", '{"path": "b.txt"}', id="call_b"),
    ]
    reply = Reply(tool_calls=calls, call_index=call_index, repeat_name=repeat_name, response_id="r")
    server.script(reply, reply)
    async with make_model(server) as model:
        streamed = await call(model, True, [Message.user("go")], tools=[ADD])
        plain = await call(model, False, [Message.user("go")], tools=[ADD])
    assert [(t.id, t.name, t.arguments) for t in streamed.tool_calls] == [
        ("call_a", "read", '{"path": "a.txt"}'),
        ("call_b", "write", '{"path": "b.txt"}'),
    ]
    assert streamed == plain


@pytest.mark.parametrize("call_index", ["shared", "none"])
@pytest.mark.parametrize("style", ["fragments", "repeat_name", "whole"])
@pytest.mark.parametrize("names", [("read", "write"), ("read", "read")])
async def test_streamed_calls_without_ids_at_one_index_stay_apart(
    server: OpenAIServer, call_index: str, style: str, names: tuple[str, str]
) -> None:
    """A server that sends no call ids and numbers every call 0 (or none) streams each whole call
    after the one before. Read as one call (the fragments of one index, no new id to tell them
    apart), two calls became one: the first's name, both arguments run together
    ('{"path": "a.txt"}{"path": "b.txt"}'), which the tool refused as invalid JSON. A fragment
    after a call whose arguments are a whole object, bringing another name or more arguments,
    begins the next call; a name repeated in every fragment (llama.cpp) still continues one."""
    calls = [Call(names[0], '{"path": "a.txt"}'), Call(names[1], '{"path": "b.txt", "n": 2}')]
    reply = Reply(
        tool_calls=calls,
        call_index=call_index,
        call_ids=False,
        repeat_name=style == "repeat_name",
        arguments_as_object=style == "whole",
        response_id="r",
    )
    server.script(reply, reply)
    async with make_model(server) as model:
        streamed = await call(model, True, [Message.user("go")], tools=[ADD])
        plain = await call(model, False, [Message.user("go")], tools=[ADD])
    assert [(t.id, t.name, t.arguments) for t in streamed.tool_calls] == [
        ("call_0", names[0], '{"path": "a.txt"}'),
        ("call_1", names[1], '{"path": "b.txt", "n": 2}'),
    ]
    assert streamed == plain


def test_a_call_without_id_at_one_index_is_one_call_until_its_arguments_are_whole() -> None:
    """What does not begin a new call at a shared index: the fragments of one call, whatever
    names they repeat, until its arguments are a whole object (even one that looks closed,
    ``{"a": {}``); then the call's name alone again, or whitespace. Read with the SDK's own chunk
    type, as the adapter reads a stream."""

    def chunk(name: str | None, arguments: str, finish: str | None = None) -> ChatCompletionChunk:
        function = {"arguments": arguments} | ({"name": name} if name else {})
        delta = {"tool_calls": [{"index": 0, "function": function}]} if finish is None else {}
        return ChatCompletionChunk.model_validate(
            {
                "id": "c",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    decoder = ChatStreamDecoder()
    fragments = [
        chunk("lookup", ""),
        chunk("lookup", '{"a": {}'),  # ends with } but is not whole yet
        chunk(None, ', "b": 1}'),
        chunk("lookup", ""),  # the name again, nothing more: still the same call
        chunk(None, "  "),
        chunk(None, "", "tool_calls"),
    ]
    chunks = [c for c in map(decoder.feed, fragments) if c is not None]
    message = join_chunks(chunks)
    assert [(t.id, t.name, t.arguments) for t in message.tool_calls] == [
        ("call_0", "lookup", '{"a": {}, "b": 1}  ')
    ]


@pytest.mark.parametrize("streaming", [False, True])
async def test_content_sent_as_parts_is_read_as_text_and_reasoning(
    server: OpenAIServer, streaming: bool
) -> None:
    # Mistral's reasoning models: [{"type": "thinking", "thinking": [text parts]}, {"type": "text"}]
    server.script(Reply(text="The answer is 42.", reasoning="Six times seven.", content_parts=True))
    async with make_model(server) as model:
        message = await call(model, streaming, [Message.user("6 * 7?")])
    assert message.content == "The answer is 42."
    assert message.reasoning == "Six times seven."
    assert message.metadata["finish_reason"] == "stop"


# -- request body: options as the protocol expects ----------------------------------------------

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


async def test_chat_request_carries_options(server: OpenAIServer) -> None:
    server.script(Reply(text='{"city": "Paris"}'))
    options = ModelOptions(
        temperature=0.2,
        max_tokens=64,
        tool_choice="add",
        stop=["END"],
        response_format={"name": "city", "schema": SCHEMA, "strict": True},
        extra={"seed": 7, "top_k": 5},
    )
    async with make_model(server) as model:
        await model.generate([Message.user("where?")], tools=[ADD], options=options)
    body = server.requests[0].body
    assert body["tools"][0]["function"]["name"] == "add"
    assert body["tool_choice"] == {"type": "function", "function": {"name": "add"}}
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "city", "schema": SCHEMA, "strict": True},
    }
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 64  # not OpenAI itself: the field every compatible server knows
    assert "max_completion_tokens" not in body
    assert body["stop"] == ["END"]
    assert body["seed"] == 7 and body["top_k"] == 5  # extra fields pass through


@pytest.mark.parametrize("streaming", [False, True])
async def test_tool_fields_are_left_out_of_a_chat_request_without_tools(
    server: OpenAIServer, streaming: bool
) -> None:
    # OpenAI refuses tool_choice and parallel_tool_calls in a request without tools (a 400 the
    # server here answers too); options shared by agents with and without tools must not fail
    # the ones without
    server.script(Reply(text="plain"), Reply(text="with tools"))
    options = ModelOptions(tool_choice="auto", extra={"parallel_tool_calls": False, "seed": 7})
    async with make_model(server) as model:
        plain = await call(model, streaming, [Message.user("hi")], options=options)
        tooled = await call(model, streaming, [Message.user("hi")], tools=[ADD], options=options)
    assert (plain.content, tooled.content) == ("plain", "with tools")
    without, with_tools = (request.body for request in server.requests)
    assert "tool_choice" not in without and "parallel_tool_calls" not in without
    assert without["seed"] == 7  # the rest of extra still goes
    assert with_tools["tool_choice"] == "auto" and with_tools["parallel_tool_calls"] is False


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("choice", ["required", "add"])
async def test_tool_fields_are_left_out_of_a_responses_request_without_tools(
    server: OpenAIServer, streaming: bool, choice: str
) -> None:
    # The Responses API refuses a tool_choice that a request without tools cannot meet ("Tool
    # choice 'required' must be specified with 'tools' parameter", a 400 the server here answers
    # too), as Chat refuses any: options shared by agents with and without tools must not fail
    # the ones without
    server.script(Reply(text="plain"), Reply(text="with tools"))
    options = ModelOptions(tool_choice=choice, extra={"parallel_tool_calls": False, "seed": 7})
    async with make_model(server, "responses") as model:
        plain = await call(model, streaming, [Message.user("hi")], options=options)
        tooled = await call(model, streaming, [Message.user("hi")], tools=[ADD], options=options)
    assert (plain.content, tooled.content) == ("plain", "with tools")
    without, with_tools = (request.body for request in server.requests)
    assert "tool_choice" not in without and "parallel_tool_calls" not in without
    assert without["seed"] == 7  # the rest of extra still goes
    assert with_tools["tool_choice"] in ("required", {"type": "function", "name": "add"})
    assert with_tools["parallel_tool_calls"] is False


@pytest.mark.parametrize("api", APIS)
async def test_a_before_model_callback_that_takes_the_tools_away_keeps_the_call_valid(
    server: OpenAIServer, api: str
) -> None:
    # Run-wide tool_choice="required" (every agent must call a tool) and a callback that
    # withholds the tools from a call (a last turn made to answer): the request leaves the
    # choice out rather than fail with the 400 OpenAI answers it with
    def answer_now(ctx: RunContext, request: ModelRequest) -> None:
        request.tools = []

    server.script(Reply(text="done"))
    async with make_model(server, api) as model:
        agent = ReActAgent("calc", model, tools=[add_numbers])
        runner = Runner(agent, callbacks=[Callbacks(before_model=answer_now)])
        options = {"model_options": {"tool_choice": "required"}}
        result = await runner.invoke("1 + 2?", options=options)
    assert result.text == "done"
    body = server.requests[0].body
    assert "tools" not in body and "tool_choice" not in body


@tool
def add_numbers(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_run_wide_tool_options_reach_an_agent_without_tools(server: OpenAIServer) -> None:
    # AutoGen's parallel_tool_calls=False on the client every agent shares: here run-wide model
    # options, which reach the writer too, who has no tools
    server.script(
        Reply(tool_calls=[Call("add_numbers", json.dumps({"a": 1, "b": 2}))]),
        Reply(text="3"),
        Reply(text="Three."),
    )
    async with make_model(server) as model:
        calc = ReActAgent("calc", model, tools=[add_numbers])
        team = SequentialAgent("team", [calc, ReActAgent("writer", model)])
        options = {
            "model_options": {"tool_choice": "auto", "extra": {"parallel_tool_calls": False}}
        }
        result = await Runner(team).invoke("1 + 2?", options=options)
    assert result.text == "Three."
    assert "parallel_tool_calls" not in server.requests[-1].body


async def test_responses_request_carries_options(server: OpenAIServer) -> None:
    server.script(Reply(text='{"city": "Paris"}'))
    options = ModelOptions(
        temperature=0.5,
        max_tokens=32,
        tool_choice="required",
        response_format=SCHEMA,  # a bare JSON schema is accepted too
        extra={"store": False},
    )
    async with make_model(server, "responses") as model:
        await model.generate([Message.user("where?")], tools=[ADD], options=options)
    body = server.requests[0].body
    assert body["tools"][0]["name"] == "add"
    assert body["tool_choice"] == "required"
    assert body["text"] == {"format": {"type": "json_schema", "name": "response", "schema": SCHEMA}}
    assert body["max_output_tokens"] == 32
    assert body["temperature"] == 0.5
    assert body["store"] is False


@pytest.mark.parametrize("api", APIS)
async def test_response_format_keeps_its_description(server: OpenAIServer, api: str) -> None:
    server.script(Reply(text='{"city": "Paris"}'))
    response_format = {"name": "city", "description": "Where it is.", "schema": SCHEMA}
    async with make_model(server, api) as model:
        await model.generate(
            [Message.user("where?")], options=ModelOptions(response_format=response_format)
        )
    body = server.requests[0].body
    sent = body["response_format"]["json_schema"] if api == "chat" else body["text"]["format"]
    assert sent["description"] == "Where it is."
    assert sent["name"] == "city" and sent["schema"] == SCHEMA


async def test_tool_choice_by_name_in_responses_shape(server: OpenAIServer) -> None:
    server.script(Reply(text="ok"))
    async with make_model(server, "responses") as model:
        await model.generate(
            [Message.user("x")], tools=[ADD], options=ModelOptions(tool_choice="add")
        )
    assert server.requests[0].body["tool_choice"] == {"type": "function", "name": "add"}


async def test_bad_input_fails_before_any_request(server: OpenAIServer) -> None:
    async with make_model(server, "responses") as model:
        with pytest.raises(ValueError, match="stop"):
            await model.generate([Message.user("x")], options=ModelOptions(stop=["END"]))
        orphan = Message(role=Role.TOOL, content="5")
        with pytest.raises(ValueError, match="tool_call_id"):
            await model.generate([Message.user("x"), orphan])
        with pytest.raises(ValueError, match="response_format"):
            await model.generate(
                [Message.user("x")], options=ModelOptions(response_format={"name": "x"})
            )
    assert server.requests == []


@pytest.mark.parametrize(
    ("refused", "sent", "refusal"),
    [
        ("max_tokens", "max_completion_tokens", "openai"),  # o-series on Azure or a proxy
        ("max_tokens", "max_completion_tokens", "azure"),
        ("max_completion_tokens", "max_tokens", "azure"),  # older Azure API versions
    ],
)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_refused_max_tokens_field_is_sent_in_the_other_spelling(
    refused: str, sent: str, refusal: str, streaming: bool
) -> None:
    """OpenAI's reasoning models refuse ``max_tokens`` wherever they are served, not only at
    api.openai.com: the call failed with HTTP 400 whatever the user did, short of ``extra``."""
    async with OpenAIServer(refuses=[refused], refusal=refusal) as server:
        server.script(Reply(text="one"), Reply(text="two"))
        async with make_model(server) as model:
            model._max_tokens_field = refused  # (white box) as chosen for this server's URL
            options = ModelOptions(max_tokens=50)
            first = await call(model, streaming, [Message.user("hi")], options=options)
            second = await call(model, streaming, [Message.user("hi")], options=options)
        assert (first.content, second.content) == ("one", "two")
        bodies = server.bodies
        assert len(bodies) == 3  # one refusal, then the other spelling from then on
        assert bodies[0][refused] == 50 and sent not in bodies[0]
        for body in bodies[1:]:
            assert body[sent] == 50 and refused not in body


@pytest.mark.parametrize("refused", ["max_tokens", "reasoning", "stream_options"])
async def test_calls_refused_together_are_all_sent_again(refused: str) -> None:
    """A service's first requests, in flight together, all refused for what the adapter sends on
    its own (a max_tokens spelling, reasoning left out, stream_options). The first to read its
    refusal changed the model; the others then compared their refusal with the changed model
    (the field it now uses, reasoning it now sends), found nothing left to change, and failed
    with the server's HTTP 400, which a retry of the user's would have got past."""
    calls = 4
    server = OpenAIServer(
        hold=calls,
        default=Reply(text="ok"),
        refuses=["max_tokens"] if refused == "max_tokens" else ["stream_options"],
        reasoning_back="deepseek" if refused == "reasoning" else None,
    )
    history = [
        Message.user("2 + 3?"),
        Message.assistant("", [ToolCall(id="c1", name="add", arguments="{}")], reasoning="Add."),
        Message.tool("5", tool_call_id="c1", name="add"),
    ]
    options = ModelOptions(max_tokens=20) if refused == "max_tokens" else None
    streaming = refused == "stream_options"
    async with server, make_model(server) as model:
        answers = await asyncio.gather(
            *(call(model, streaming, history, tools=[ADD], options=options) for _ in range(calls))
        )
        assert [answer.content for answer in answers] == ["ok"] * calls
        assert len(server.requests) == 2 * calls  # each refused once, then sent again


def _adapted(body: dict[str, Any], kind: str) -> bool:
    """Whether a Chat request was sent adapted as ``kind`` says (see the test below)."""
    assistant = body["messages"][1]
    if kind == "max_tokens":
        return "max_completion_tokens" in body
    if kind == "stream_options":
        return "stream_options" not in body
    if kind == "reasoning":
        return "reasoning_content" in assistant
    if kind == "tool_ids":
        return assistant["tool_calls"][0]["id"] != "call_0"
    return "reasoning_details" not in assistant  # kept fields


@pytest.mark.parametrize(
    "kind", ["max_tokens", "stream_options", "reasoning", "tool_ids", "kept fields"]
)
async def test_an_adaptation_is_kept_only_once_the_adapted_call_succeeded(kind: str) -> None:
    """A refusal read as one of a field the adapter sends on its own (a max_tokens spelling,
    stream_options, reasoning left out, a tool-call id, the kept fields) changed the model at
    once, before the call sent again adapted had been answered: when that call failed too, for
    something else, a misread refusal changed the model for its lifetime. The change is kept
    only once the adapted call succeeded, as a response format's step is
    (``FormatFallback.learn``)."""
    server = OpenAIServer(
        refuses={"max_tokens": ["max_tokens"], "stream_options": ["stream_options"]}.get(kind, ()),
        reasoning_back="deepseek" if kind == "reasoning" else None,
        tool_ids="mistral" if kind == "tool_ids" else None,
        forbids=["reasoning_details"] if kind == "kept fields" else (),
    )
    history = [
        Message.user("2 + 3?"),
        Message.assistant("", [ToolCall(id="call_0", name="add", arguments="{}")]),
        Message.tool("5", tool_call_id="call_0", name="add"),
    ]
    history[1].metadata["reasoning_details"] = [{"type": "reasoning.encrypted", "data": "e"}]
    options = ModelOptions(max_tokens=20)
    streaming = kind == "stream_options"
    unrelated = Reply(status=400, error="something else entirely")
    async with server, make_model(server) as model:
        server.script(unrelated, Reply(text="ok"))
        with pytest.raises(ModelError, match="something else entirely"):
            await call(model, streaming, history, tools=[ADD], options=options)
        # refused again, then sent adapted, which now succeeds: kept from then on
        assert (await call(model, streaming, history, tools=[ADD], options=options)).content == (
            "ok"
        )
        server.script(Reply(text="again"))
        assert (await call(model, streaming, history, tools=[ADD], options=options)).content == (
            "again"
        )
    assert [_adapted(body, kind) for body in server.bodies] == [False, True, False, True, True]


@pytest.mark.parametrize("refusal", ["openai", "azure"])
async def test_a_refused_stream_options_is_left_out(refusal: str) -> None:
    """Gateways and older Azure API versions refuse ``stream_options``: every stream failed."""
    async with OpenAIServer(refuses=["stream_options"], refusal=refusal) as server:
        server.script(Reply(text="one"), Reply(text="two"))
        async with make_model(server) as model:
            first = await call(model, True, [Message.user("hi")])
            second = await call(model, True, [Message.user("hi")])
        assert (first.content, second.content) == ("one", "two")
        assert first.usage is None  # the server sends none unless asked
        assert ["stream_options" in body for body in server.bodies] == [True, False, False]


async def test_other_refusals_naming_max_tokens_fail_at_once() -> None:
    """A value the server refuses is not mended by the other spelling; nor is a field the user
    set; and a server refusing both spellings fails rather than going round."""
    async with OpenAIServer() as server:
        server.script(Reply(status=400, error="max_tokens is too large: 100000."))
        async with make_model(server) as model:
            with pytest.raises(ModelError, match="too large"):
                await model.generate([Message.user("hi")], options=ModelOptions(max_tokens=100000))
        assert len(server.requests) == 1
    async with OpenAIServer(refuses=["max_tokens", "max_completion_tokens"]) as server:
        async with make_model(server) as model:
            with pytest.raises(ModelError, match="max_completion_tokens"):
                await model.generate([Message.user("hi")], options=ModelOptions(max_tokens=9))
        assert len(server.requests) == 2
    async with OpenAIServer(refuses=["max_tokens"]) as server:
        async with make_model(server) as model:
            with pytest.raises(ModelError, match="Unsupported parameter"):
                await model.generate(
                    [Message.user("hi")], options=ModelOptions(extra={"max_tokens": 9})
                )
        assert len(server.requests) == 1


async def test_a_validation_error_echoing_the_request_does_not_change_the_max_tokens_field() -> (
    None
):
    """FastAPI-based servers (vLLM, LiteLLM) echo the whole request in a model-level validation
    error: a conversation speaking of an "unknown parameter" beside ``max_tokens`` read as the
    server refusing the field, and every later call went with the other spelling."""
    asked = [Message.user("What does 'Unknown parameter' mean in an API error?")]
    bad = Reply(status=400, error="Conversation roles must alternate.", echo_request="detail")
    async with OpenAIServer([bad], default=Reply(text="ok")) as server:
        async with make_model(server) as model:
            with pytest.raises(ModelError, match="roles must alternate"):
                await model.generate(asked, options=ModelOptions(max_tokens=9))
            await model.generate(asked, options=ModelOptions(max_tokens=9))
        first, second = server.bodies
        assert first["max_tokens"] == second["max_tokens"] == 9


# -- retries ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "wanted"),
    [
        (lambda: ModelOptions(temprature=0.2), "temprature.*Extra inputs are not permitted"),
        (lambda: ModelOptions(max_tokens=-5), "max_tokens.*greater than or equal to 1"),
        (lambda: ModelOptions(max_tokens=0), "max_tokens.*greater than or equal to 1"),
        (lambda: ModelOptions(temperature=-0.1), "temperature.*greater than or equal to 0"),
        (lambda: ModelOptions(temperature=float("nan")), "temperature"),
        (lambda: RetryPolicy(max_atempts=5), "max_atempts.*Extra inputs are not permitted"),
        (lambda: RetryPolicy(max_attempts=0), "max_attempts.*greater than or equal to 1"),
        (lambda: RetryPolicy(initial_delay=-1), "initial_delay.*greater than or equal to 0"),
        (lambda: RetryPolicy(max_delay=float("inf")), "max_delay.*finite"),
    ],
)
def test_options_and_retry_policies_refuse_unknown_fields_and_out_of_range_values(
    make: Callable[[], object], wanted: str
) -> None:
    """A misspelt option used to be dropped without a word, leaving the default in force."""
    with pytest.raises(pydantic.ValidationError, match=f"(?s){wanted}"):
        make()


@pytest.mark.parametrize("streaming", [False, True])
async def test_retry_on_status_chooses_which_statuses_are_retried(
    server: OpenAIServer, streaming: bool
) -> None:
    """The statuses retried were fixed (408, 409, 429, 5xx): a gateway answering 400 when it is
    overloaded failed the call at once, and a service whose own queue paces rate limits could
    not keep a 429 from being retried behind its back (tenacity's ``retry_if_exception`` and
    openai's own retries let users choose). ``retry_on_status`` replaces the set."""
    fast = FAST.model_copy(update={"retry_on_status": RetryPolicy.TRANSIENT_STATUS | {400}})
    server.script(Reply(status=400, error="overloaded, try again"), Reply(text="second time"))
    async with make_model(server, retry=fast) as model:
        answer = await call(model, streaming, [Message.user("hi")])
        assert answer.content == "second time" and len(server.requests) == 2
        # Changed in place, counted from the next call: a 429 left to the caller's own queue.
        model.retry.retry_on_status = RetryPolicy.TRANSIENT_STATUS - {429}
        server.script(Reply(status=429, error="slow down"))
        with pytest.raises(ModelError, match="HTTP 429: slow down") as raised:
            await call(model, streaming, [Message.user("hi")])
        assert raised.value.status == 429 and len(server.requests) == 3
        assert "gave up" not in str(raised.value)  # one attempt
        server.script(Reply(status=503, error="busy"), Reply(text="after the 503"))
        answer = await call(model, streaming, [Message.user("hi")])  # the rest still retried
        assert answer.content == "after the 503"
        assert len(server.requests) == 5
        model.retry.retry_on_status = None  # the default again: a 400 is not retried
        server.script(Reply(status=400, error="bad request"), Reply(text="left"))
        with pytest.raises(ModelError, match="HTTP 400: bad request"):
            await call(model, streaming, [Message.user("hi")])
        assert len(server.requests) == 6


@pytest.mark.parametrize("statuses", [{200}, {600}, {True}, {"429"}, 429, {429.0}], ids=repr)
def test_retry_on_status_takes_only_error_statuses(statuses: Any) -> None:
    """Checked when given and when set, as the other fields are: a status the adapter never
    fails with (a 200), a bool or a string ("429" from a config file read as text) would be a
    set that never matches, the retries chosen silently gone."""
    with pytest.raises(pydantic.ValidationError, match="retry_on_status"):
        RetryPolicy(retry_on_status=statuses)
    policy = RetryPolicy(retry_on_status=[429, 503])  # any iterable of ints, kept as a frozenset
    assert policy.retry_on_status == frozenset({429, 503})
    with pytest.raises(pydantic.ValidationError, match="retry_on_status"):
        policy.retry_on_status = statuses
    assert policy.retry_on_status == frozenset({429, 503})
    # Serialisable: JSON and back (a config file, a worker's settings).
    again = RetryPolicy.model_validate_json(policy.model_dump_json())
    assert again == policy and RetryPolicy.model_validate_json("{}").retry_on_status is None


@pytest.mark.parametrize("retry", [3, {"max_attempts": 3}])
def test_a_retry_that_is_not_a_policy_is_refused_where_the_model_is_made(retry: Any) -> None:
    """``retry=3`` was an ``AttributeError`` about ``'int' object has no attribute
    'max_attempts'``, and a dict passed the constructor to fail the first call that failed."""
    with pytest.raises(TypeError, match=r"retry must be an adk.RetryPolicy, got (int|dict); e.g."):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9", retry=retry)


async def test_options_set_after_the_model_is_made_work_or_are_refused(
    server: OpenAIServer,
) -> None:
    """``retry`` set after the model is made is what its next call retries by (the retry runner
    was built from the first policy, so the assignment changed the attribute alone); ``api`` and
    ``timeout``, which the model's requests and client are built for, are refused naming the
    way that works: ``model.api = "responses"`` sent a Chat request to the Responses endpoint."""
    server.script(Reply(status=500, error="hiccup"), Reply(text="not reached"))
    async with make_model(server) as model:
        model.retry = RetryPolicy(max_attempts=1, initial_delay=0, max_delay=0)
        with pytest.raises(ModelError, match="hiccup"):
            await model.generate([Message.user("hi")])
        assert len(server.requests) == 1
        with pytest.raises(TypeError, match=r"retry must be an adk.RetryPolicy, got int"):
            model.retry = 3  # type: ignore[assignment]
        for name, value in (("api", "responses"), ("timeout", 5.0)):
            with pytest.raises(AttributeError, match=rf"OpenAIChatModel.{name} is fixed when "):
                setattr(model, name, value)
        assert (model.api, model.timeout) == ("chat", None)
        assert (await model.generate([Message.user("hi")])).content == "not reached"
        assert server.requests[-1].path.endswith("/chat/completions")


async def test_a_field_of_the_models_retry_policy_changed_is_what_its_next_call_retries_by(
    server: OpenAIServer,
) -> None:
    """``model.retry.max_attempts = 1`` (the policy the model was made with, changed in place):
    its next failing call is not retried. The runner read ``max_attempts`` once, when the policy
    was given, and its backoff's delays per call, so a change of the delays took effect and one
    of the attempts was ignored without a word (the call was made three times)."""
    server.script(Reply(status=500, error="hiccup"), Reply(status=500, error="again"))
    server.script(Reply(text="second time"))
    async with make_model(server, retry=FAST.model_copy()) as model:
        model.retry.max_attempts = 1
        with pytest.raises(ModelError, match="hiccup"):
            await model.generate([Message.user("hi")])
        assert len(server.requests) == 1
        model.retry.max_attempts = 2  # and up again: retried once
        assert (await model.generate([Message.user("hi")])).content == "second time"
        assert len(server.requests) == 3
        with pytest.raises(pydantic.ValidationError, match="greater than or equal to 1"):
            model.retry.max_attempts = 0  # checked as the argument is
        assert model.retry.max_attempts == 2


@pytest.mark.parametrize("given", ["argument", "environment"])
async def test_a_key_http_cannot_send_is_refused_where_the_model_is_made_never_shown(
    given: str, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key read from a file keeps its newline: it was taken, and every call failed as a
    "connection error", retried three times, with the key itself in the error text (``Illegal
    header value b'Bearer sk-...\\n'``), which reaches events, logs and traces."""
    secret = "sk-read-from-a-file\n"
    source = "api_key" if given == "argument" else "OPENAI_API_KEY"
    monkeypatch.setenv("OPENAI_API_KEY", secret if given == "environment" else "sk-ok")
    with pytest.raises(ValueError, match=f"^{source} holds a line break") as caught:
        OpenAIChatModel(
            "m", base_url=server.base_url, api_key=secret if given == "argument" else None
        )
    assert "sk-read" not in str(caught.value)
    server.script(Reply(text="hi"))
    async with OpenAIChatModel("m", base_url=server.base_url, api_key=secret.strip()) as model:
        assert (await model.generate([Message.user("hi")])).content == "hi"
    assert server.requests[0].headers["authorization"] == "Bearer sk-read-from-a-file"


@pytest.mark.parametrize("given", ["argument", "environment"])
@pytest.mark.parametrize("end", [" ", "\t"])
async def test_a_key_ending_with_a_space_is_refused_where_the_model_is_made_never_shown(
    given: str, end: str, server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HTTP's header value ends with a visible character, so a key pasted or quoted with a space
    after it ("Bearer sk-... ") failed every call as the newline did, retried, with the key in
    the error text; a space before it is sent (servers that ignore the key take it)."""
    secret = "sk-pasted-with-a-space" + end
    source = "api_key" if given == "argument" else "OPENAI_API_KEY"
    monkeypatch.setenv("OPENAI_API_KEY", secret if given == "environment" else "sk-ok")
    with pytest.raises(ValueError, match=f"^{source} ends with a space or tab") as caught:
        OpenAIChatModel(
            "m", base_url=server.base_url, api_key=secret if given == "argument" else None
        )
    assert "sk-pasted" not in str(caught.value)
    server.script(Reply(text="hi"))
    async with OpenAIChatModel("m", base_url=server.base_url, api_key=" sk-lead") as model:
        assert (await model.generate([Message.user("hi")])).content == "hi"


@pytest.mark.parametrize("end", ["\n", " "])
async def test_a_clients_key_http_cannot_send_is_refused_where_the_model_is_made_never_shown(
    end: str, server: OpenAIServer
) -> None:
    """``client=AsyncOpenAI(api_key=<a key read from a file>)`` was taken as is (``api_key=`` was
    checked, a client's key not): every call failed as a "connection error", retried, with the
    key in the ModelError's text (``Illegal header value b'Bearer sk-...\\n'``), which pyadk put
    into the run's error event, and from there logs and traces."""
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-read-from-a-file" + end)
    with pytest.raises(
        ValueError, match=r"^the api_key of client= (holds a line|ends with a)"
    ) as e:
        OpenAIChatModel("m", client=client)
    assert "sk-read" not in str(e.value)
    await client.close()


async def test_a_header_http_cannot_send_fails_the_call_once_without_showing_it(
    server: OpenAIServer,
) -> None:
    """A header the client sends that HTTP refuses (Azure's ``api-key`` in ``default_headers``,
    read from a file with its newline) failed as a retried "connection error" quoting it, and the
    error's chain (printed by logs, recorded by tracing) quoted it again."""
    client = openai.AsyncOpenAI(
        base_url=server.base_url, api_key="k", default_headers={"api-key": "sk-secret\n"}
    )
    server.script(Reply(text="never"))
    events = await run_events(
        Runner(ReActAgent("a", OpenAIChatModel("m", client=client, retry=FAST)))
    )
    error, exception = events[-1].error, events[-1].exception
    assert error is not None and exception is not None
    assert "a request header holds what HTTP cannot send" in error.message
    assert "the value is not shown" in error.message and "gave up" not in error.message
    assert "sk-secret" not in "".join(traceback.format_exception(exception))
    assert server.requests == []  # nothing was sent, and it was not sent again
    await client.close()


async def test_the_synchronous_openai_client_is_refused_where_the_model_is_made(
    server: OpenAIServer,
) -> None:
    """``client=openai.OpenAI(...)`` was taken: its calls block the event loop, and on a server
    that loop serves (this one) the first call hung for ever."""
    sync_client = openai.OpenAI(base_url=server.base_url, api_key="k")
    with pytest.raises(TypeError, match=r"client= takes the asynchronous client.*not OpenAI"):
        OpenAIChatModel("m", client=sync_client)
    sync_client.close()
    async_client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k")
    server.script(Reply(text="hi"))
    async with OpenAIChatModel("m", client=async_client) as model:
        assert (await model.generate([Message.user("hi")])).content == "hi"
    await async_client.close()


def test_merged_options_and_provider_fields_in_extra_still_work() -> None:
    base = ModelOptions(temperature=0, extra={"seed": 1})
    merged = base.merged(ModelOptions(max_tokens=1, extra={"user": "u"}))
    assert merged == ModelOptions(temperature=0, max_tokens=1, extra={"seed": 1, "user": "u"})
    assert ModelOptions.model_validate(merged.model_dump()) == merged  # as checkpoints load it
    assert RetryPolicy(max_attempts=1, initial_delay=0, max_delay=0).max_attempts == 1


@pytest.mark.parametrize("streaming", [False, True])
async def test_500_then_200_succeeds_with_one_retry(server: OpenAIServer, streaming: bool) -> None:
    server.script(Reply(status=500, error="upstream hiccup"), Reply(text="recovered"))
    async with make_model(server) as model:
        message = await call(model, streaming, [Message.user("hi")])
    assert message.content == "recovered"
    assert len(server.requests) == 2


async def test_429_retry_after_is_honoured(server: OpenAIServer) -> None:
    server.script(Reply(status=429, error="slow down", retry_after="0.2"), Reply(text="ok"))
    policy = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=5.0, jitter=False)
    async with make_model(server, retry=policy) as model:
        assert (await model.generate([Message.user("hi")])).content == "ok"
    first, second = server.requests
    assert second.received_at - first.received_at >= 0.2


@pytest.mark.parametrize("api", APIS)
async def test_a_model_error_carries_the_wait_the_server_asked_for(
    server: OpenAIServer, api: str
) -> None:
    """docs/models.md: a service whose own queue paces rate limits leaves 429 out of the
    retries; the ModelError says how long the server asked it to wait (seconds or an HTTP
    date), as it does for a wait too long to retry and for the last answer of retries run out.
    Before, the error held the status alone, and the header only in the SDK's error it was
    raised from, which an error quoting a cut or keyed answer leaves out of its chain."""
    paced = RetryPolicy(max_attempts=3, retry_on_status=RetryPolicy.TRANSIENT_STATUS - {429})
    server.script(
        Reply(status=429, error="slow down", retry_after="7"),
        Reply(status=429, retry_after=formatdate(time.time() + 120, usegmt=True)),
        Reply(status=503, error="busy", retry_after="3600"),
    )
    waits = []
    async with wire_model(server, api, retry=paced) as model:
        for _ in range(3):
            with pytest.raises(ModelError) as failed:
                await model.generate([Message.user("hi")])
            waits.append(failed.value.retry_after)
    assert waits[0] == 7.0 and 100 < waits[1] <= 120 and waits[2] == 3600.0
    assert len(server.requests) == 3  # none was retried
    key = "sk-proj-0123456789abcdef"
    server.script(Reply(status=429, error=f"Key {key} is rate limited", retry_after="5"))
    async with wire_model(server, api, api_key=key, retry=paced) as model:
        with pytest.raises(ModelError) as masked:
            await model.generate([Message.user("hi")])
    assert key not in str(masked.value) and masked.value.__cause__ is None
    assert masked.value.retry_after == 5.0  # the masked error made anew keeps it
    server.script(
        Reply(status=503, retry_after="0"), Reply(status=503, retry_after="0.01"), Reply(status=500)
    )
    async with wire_model(server, api, retry=RetryPolicy(max_attempts=2, initial_delay=0)) as model:
        runner = Runner(ReActAgent("r", model=model), enable_streaming=True)
        with pytest.raises(RunError) as stopped:
            await runner.invoke("hi")
        assert isinstance(stopped.value.__cause__, ModelError)
        assert stopped.value.__cause__.retry_after == 0.01  # the last answer's
        with pytest.raises(ModelError) as unsaid:
            await model.generate([Message.user("hi")])
    assert unsaid.value.status == 500 and unsaid.value.retry_after is None


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_server_saying_not_to_retry_is_not_retried(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    """``x-should-retry: false``, which the openai (and anthropic) client obeys and a gateway
    that already retried or failed over upstream sends: another attempt would fail alike, and
    each is waited on (and may be billed). With the client's own retries off, the adapter
    retried it as its status says; a ``true`` or no header leaves the status to decide."""
    server.script(
        Reply(status=503, error="all upstreams failed", should_retry="false"),
        Reply(status=503, should_retry="true"),
        Reply(text="second try"),
    )
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match=r"HTTP 503: all upstreams failed") as failed:
            await call(model, streaming, [Message.user("hi")])
        assert failed.value.status == 503 and "attempts" not in str(failed.value)
        assert "x-should-retry" in str(failed.value)  # says why it was not retried
        assert (await call(model, streaming, [Message.user("hi")])).content == "second try"
    assert len(server.requests) == 3


async def test_retry_after_beats_max_delay(server: OpenAIServer) -> None:
    """Retrying sooner than the server asked would only be refused again."""
    server.script(Reply(status=429, error="slow down", retry_after="0.3"), Reply(text="ok"))
    policy = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.05, jitter=True)
    async with make_model(server, retry=policy) as model:
        assert (await model.generate([Message.user("hi")])).content == "ok"
    first, second = server.requests
    assert second.received_at - first.received_at >= 0.3


async def test_a_retry_after_beyond_a_minute_fails_at_once_saying_so(server: OpenAIServer) -> None:
    server.script(Reply(status=503, error="busy", retry_after="3600"), Reply(text="unused"))
    policy = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.05)
    async with make_model(server, retry=policy) as model:
        with pytest.raises(ModelError, match=r"HTTP 503: busy \(the server asked to wait 3600 s"):
            await model.generate([Message.user("hi")])
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_fail_at_once(server: OpenAIServer, status: int) -> None:
    server.script(Reply(status=status, error="Invalid value for 'tools'"), Reply(text="unused"))
    async with make_model(server) as model:
        with pytest.raises(ModelError) as caught:
            await model.generate([Message.user("hi")])
    assert caught.value.status == status
    assert f"HTTP {status}" in str(caught.value)
    assert "Invalid value for 'tools'" in str(caught.value)
    assert len(server.requests) == 1


async def test_what_the_provider_behind_a_router_said_is_in_the_error(
    server: OpenAIServer,
) -> None:
    """OpenRouter says "Provider returned error" and puts the provider's own answer in
    ``metadata.raw``: the error used to say only the former."""
    said = {"provider_name": "Venice", "raw": '{"error": "context length exceeded: 9000 > 8192"}'}
    server.script(
        Reply(status=400, error="Provider returned error", error_metadata=said),
        Reply(text="partial", error_after=2, error="Provider returned error", error_metadata=said),
        # "any error occurred while the LLM is producing the output will be emitted in the
        # response body" with status 200 (OpenRouter's docs)
        Reply(
            raw=json.dumps(
                {"error": {"message": "Provider returned error", "metadata": said}}
            ).encode()
        ),
    )
    async with make_model(server) as model:
        with pytest.raises(ModelError, match="HTTP 400: Provider returned error") as plain:
            await model.generate([Message.user("hi")])
        with pytest.raises(ModelError, match="mid-stream") as streamed:
            await collect(model.stream([Message.user("hi")]))
        with pytest.raises(ModelError, match="answered with an error") as in_body:
            await model.generate([Message.user("hi")])
    for caught in (plain, streamed, in_body):
        assert "Venice" in str(caught.value)
        assert "context length exceeded: 9000 > 8192" in str(caught.value)


OVERLOADED = {"message": "Provider returned error", "code": 502}
FAILED_RESPONSE = {
    "id": "resp_9",
    "object": "response",
    "created_at": 0,
    "model": "test-model",
    "status": "failed",
    "output": [],
    "error": {"code": "server_error", "message": "The server had an error"},
}


@pytest.mark.parametrize(
    ("api", "body"),
    [
        *[(api, {"error": OVERLOADED}) for api in APIS],
        *[(api, {"error": {**OVERLOADED, "code": "429"}}) for api in APIS],
        ("responses", FAILED_RESPONSE),
    ],
    ids=[
        "code_502-chat",
        "code_502-responses",
        "code_429_text-chat",
        "code_429_text-responses",
        "failed_response",
    ],
)
async def test_a_200_answer_holding_a_transient_error_is_retried(
    server: OpenAIServer, api: str, body: dict[str, Any]
) -> None:
    # OpenRouter answers 200 with {"error": {"code": 502, ...}} when the provider behind it
    # failed, and a Responses server a response whose status is "failed" with server_error:
    # the same answer as an HTTP status would have been retried.
    server.script(Reply(raw=json.dumps(body).encode()), Reply(text="second try"))
    async with make_model(server, api) as model:
        message = await model.generate([Message.user("hi")])
    assert message.content == "second try"
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
async def test_a_200_answer_holding_a_transient_error_every_time_says_so(
    server: OpenAIServer, api: str
) -> None:
    server.script(*[Reply(raw=json.dumps({"error": OVERLOADED}).encode())] * 3)
    async with make_model(server, api) as model:
        with pytest.raises(
            ModelError, match=r"answered with an error: Provider returned error.*3 attempts"
        ) as failed:
            await model.generate([Message.user("hi")])
    assert failed.value.status == 502
    assert len(server.requests) == 3


@pytest.mark.parametrize("status", [408, 409, 429, 502, 503])
async def test_transient_statuses_are_retried_until_attempts_run_out(
    server: OpenAIServer, status: int
) -> None:
    server.script(*[Reply(status=status, error="try later")] * 3, Reply(text="unused"))
    async with make_model(server) as model:
        with pytest.raises(ModelError, match="3 attempts") as caught:
            await model.generate([Message.user("hi")])
    assert caught.value.status == status
    assert "try later" in str(caught.value)
    assert len(server.requests) == 3


async def test_an_exhausted_quota_is_not_retried(server: OpenAIServer) -> None:
    """OpenAI answers an exhausted quota (billing) with 429 too; waiting seconds does not mend
    it, so it fails at once instead of after every attempt's backoff."""
    quota = "You exceeded your current quota, please check your plan and billing details."
    server.script(Reply(status=429, error=quota, error_code="insufficient_quota"), Reply(text="x"))
    async with make_model(server) as model:
        with pytest.raises(ModelError, match="HTTP 429: You exceeded your current quota") as caught:
            await model.generate([Message.user("hi")])
    assert caught.value.status == 429 and "attempts" not in str(caught.value)
    assert len(server.requests) == 1


async def test_timeout_retried_then_surfaced(server: OpenAIServer) -> None:
    server.script(Reply(text="late", delay=5.0), Reply(text="late", delay=5.0))
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", timeout=0.1)
    policy = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01)
    model = OpenAIChatModel("test-model", client=client, retry=policy)
    try:
        with pytest.raises(ModelError, match=r"timed out.*2 attempts"):
            await model.generate([Message.user("hi")])
    finally:
        await client.close()
    assert len(server.requests) == 2


def test_timeout_must_be_positive_seconds() -> None:
    for bad in (0, -1.5, float("nan"), float("inf"), True, "5"):
        with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
            OpenAIChatModel("m", base_url="http://x", timeout=bad)  # type: ignore[arg-type]
    assert OpenAIChatModel("m", base_url="http://x", timeout=2).timeout == 2.0
    assert OpenAIChatModel("m", base_url="http://x").timeout is None


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_timeout_argument_fires_is_retried_then_surfaced(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    server.script(Reply(text="late", delay=5.0), Reply(text="late", delay=5.0))
    policy = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01)
    model = wire_model(server, api, api_key="k", retry=policy, timeout=0.1)
    async with model:
        with pytest.raises(ModelError, match=r"the request timed out.*2 attempts") as caught:
            await call(model, streaming, [Message.user("hi")])
    assert isinstance(caught.value.__cause__, openai.APITimeoutError)
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_timeout_applies_to_a_borrowed_client_for_this_model_only(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    # A stream stalls after its headers and opening event (nothing for the caller yet): the timeout
    # bounds each read of the body, not only the wait for headers, and the attempt is retried.
    stalled = Reply(text="late", delay=5.0, stall_after=1 if streaming else None)
    server.script(stalled, Reply(text="on time"))
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k")  # SDK default: 10 minutes
    model = OpenAIChatModel(
        "test-model",
        client=client,
        api=api,  # type: ignore[arg-type]
        retry=FAST,
        timeout=0.25,
    )
    try:
        message = await call(model, streaming, [Message.user("hi")])
    finally:
        await client.close()
    assert message.content == "on time"
    assert len(server.requests) == 2
    assert client.timeout == openai.DEFAULT_TIMEOUT  # the user's client keeps its own setting


@pytest.mark.parametrize("api", APIS)
async def test_stream_stalling_after_chunks_times_out_without_retry(
    server: OpenAIServer, api: str
) -> None:
    server.script(
        Reply(text="an answer that stops half way", delay=5.0, stall_after=4),
        Reply(text="unused"),
    )
    received: list[MessageChunk] = []
    model = wire_model(server, api, api_key="k", retry=FAST, timeout=0.1)
    async with model:
        with pytest.raises(ModelError, match=r"mid-stream.*the request timed out"):
            async for chunk in model.stream([Message.user("hi")]):
                received.append(chunk)
    assert "".join(c.content for c in received).startswith("an answer")
    assert len(server.requests) == 1  # chunks had reached the caller: never retried


async def test_own_client_retries_are_switched_off(server: OpenAIServer) -> None:
    """A user's client configured to retry must not retry under the adapter: only the policy does."""
    server.script(*[Reply(status=500)] * 5)
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=4)
    model = OpenAIChatModel("test-model", client=client, retry=RetryPolicy(max_attempts=1))
    try:
        with pytest.raises(ModelError, match="HTTP 500"):
            await model.generate([Message.user("hi")])
    finally:
        await model.aclose()
        await client.close()
    assert len(server.requests) == 1


async def test_connection_refused_is_retried_then_surfaced() -> None:
    async with OpenAIServer() as srv:
        url = srv.base_url
    model = wire_model(url, name="m", api_key="k", retry=FAST)
    async with model:
        with pytest.raises(ModelError, match=r"connection error.*3 attempts"):
            await model.generate([Message.user("hi")])


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_connection_reset_before_any_answer_is_retried_then_surfaced(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    """A load balancer whose backend died mid-request drops the connection with no answer at
    all: a failure without a status, retried (nothing reached the caller), and named once the
    attempts run out."""
    server.script(Reply(reset=True), Reply(text="second try"))
    async with make_model(server, api) as model:
        assert (await call(model, streaming, [Message.user("hi")])).content == "second try"
    server.script(*[Reply(reset=True)] * 3)
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match=r"connection error.*gave up after 3 attempts") as e:
            await call(model, streaming, [Message.user("hi")])
    assert e.value.status is None
    assert len(server.requests) == 5


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    assert retry_after_seconds({"retry-after": "0.25"}) == 0.25
    assert retry_after_seconds({"retry-after-ms": "150", "retry-after": "9"}) == 0.15
    now = 1_700_000_000.0
    assert retry_after_seconds({"retry-after": formatdate(now + 30, usegmt=True)}, now=now) == 30
    assert retry_after_seconds({"retry-after": formatdate(now - 30, usegmt=True)}, now=now) == 0
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


# -- response identity in metadata ---------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_reply_metadata_names_the_served_model_and_response_id(api: str) -> None:
    # the server answers as a model other than the one asked for: the metadata says who answered
    async with (
        OpenAIServer([Reply(text="hi")] * 2, model="served-model-v2") as server,
        make_model(server, api) as model,
    ):
        first = await model.generate([Message.user("hi")])
        second = await model.generate([Message.user("hi")])
    ids = ("chatcmpl-1", "chatcmpl-2") if api == "chat" else ("resp_1", "resp_2")
    assert [first.metadata, second.metadata] == [
        {"finish_reason": "stop", "response_model": "served-model-v2", "response_id": ident}
        for ident in ids
    ]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "reply",
    [
        Reply(text="hello there", response_id="reply-42"),
        Reply(tool_calls=[Call("add", '{"a": 1, "b": 2}')], response_id="reply-42"),
        Reply(text="cut sho", finish_reason="length", response_id="reply-42"),
    ],
    ids=["text", "tool_calls", "length"],
)
async def test_streamed_reply_has_the_metadata_of_a_plain_one(api: str, reply: Reply) -> None:
    async with (
        OpenAIServer([reply, reply], model="served-model-v2") as server,
        make_model(server, api) as model,
    ):
        plain = await call(model, False, [Message.user("hi")], tools=[ADD])
        streamed = await call(model, True, [Message.user("hi")], tools=[ADD])
    assert plain.metadata == {
        "finish_reason": reply.finish,
        "response_model": "served-model-v2",
        "response_id": "reply-42",
    }
    assert streamed.metadata == plain.metadata


@pytest.mark.parametrize("api", APIS)
async def test_reply_metadata_says_the_tier_and_backend_that_served_it(api: str) -> None:
    # The tier that processed the call (what it is billed at; a request for auto or flex does not
    # say) and the backend's fingerprint (with a seed: whether answers can be compared) were
    # dropped; they are the reply's, as its model and id are, plain or streamed.
    served = Reply(text="hi", service_tier="flex", system_fingerprint="fp_44709d6fcb")
    async with OpenAIServer([served] * 2) as server, make_model(server, api) as model:
        plain = await call(model, False, [Message.user("hi")])
        streamed = await call(model, True, [Message.user("hi")])
    expected = {"service_tier": "flex"}
    if api == "chat":  # the Responses API has no system_fingerprint
        expected["system_fingerprint"] = "fp_44709d6fcb"
    for reply in (plain, streamed):
        assert {k: v for k, v in reply.metadata.items() if k in _SERVED_BY} == expected


_SERVED_BY = ("service_tier", "system_fingerprint")


@pytest.mark.parametrize("api", APIS)
async def test_streamed_reply_metadata_through_a_runner(api: str) -> None:
    """The framework's own stream (``MessageStream``, recorded in history) keeps it too."""
    async with (
        OpenAIServer([Reply(text="streamed")], model="served-model-v2") as server,
        make_model(server, api) as model,
    ):
        agent = ReActAgent("bot", model)
        result = await Runner(agent, enable_streaming=True).invoke("hi")
    (stream,) = [e.output.stream for e in result.events if e.output and e.output.stream]
    message = await stream.collect()
    assert message.content == "streamed"
    assert message.metadata["response_model"] == "served-model-v2"
    assert message.metadata["response_id"] == ("chatcmpl-1" if api == "chat" else "resp_1")


# -- refusals ------------------------------------------------------------------------------------

REFUSAL = "I'm sorry, but I can't help with that request."


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "reply",
    [
        Reply(refusal=REFUSAL, response_id="reply-42"),
        Reply(text="Here is part of it.", refusal=REFUSAL, response_id="reply-42"),
    ],
    ids=["refusal_only", "text_and_refusal"],
)
async def test_streamed_refusal_matches_the_plain_reply(api: str, reply: Reply) -> None:
    async with OpenAIServer([reply, reply]) as server, make_model(server, api) as model:
        plain = await call(model, False, [Message.user("something forbidden")])
        streamed = await call(model, True, [Message.user("something forbidden")])
    assert plain.metadata["refusal"] == REFUSAL
    assert plain.metadata["finish_reason"] == "stop"
    assert plain.content == reply.text
    assert streamed.metadata == plain.metadata
    assert streamed.content == plain.content


@pytest.mark.parametrize("text_events", ["done", "final"])
async def test_a_responses_stream_without_text_deltas_still_has_its_text(
    server: OpenAIServer, text_events: str
) -> None:
    """Some gateways send a part's text only in its ``.done`` event, or only in the final
    response: the streamed reply came out empty while the plain one had the text."""
    reply = Reply(text="Paris.", reasoning="Recall.", text_events=text_events, response_id="r")
    server.script(reply, reply)
    async with make_model(server, "responses") as model:
        streamed = await call(model, True, [Message.user("Capital of France?")])
        plain = await call(model, False, [Message.user("Capital of France?")])
    assert (streamed.content, streamed.reasoning) == ("Paris.", "Recall.")
    assert streamed == plain


async def test_streamed_refusal_read_from_the_done_event_alone(server: OpenAIServer) -> None:
    server.script(Reply(text="Partly:", refusal=REFUSAL, refusal_deltas=False))
    async with make_model(server, "responses") as model:
        message = await call(model, True, [Message.user("something forbidden")])
    assert message.content == "Partly:"
    assert message.metadata["refusal"] == REFUSAL
    assert message.metadata["finish_reason"] == "stop"


async def test_streamed_refusal_read_from_the_final_response_alone(server: OpenAIServer) -> None:
    # no refusal events: the refusal part is only in response.completed's response object
    server.script(Reply(text="Partly:", refusal=REFUSAL, refusal_events=False))
    async with make_model(server, "responses") as model:
        chunks = await collect(model.stream([Message.user("something forbidden")]))
    message = join_chunks(chunks)
    assert message.content == "Partly:"
    assert message.metadata["refusal"] == REFUSAL
    assert message.metadata["finish_reason"] == "stop"
    assert server.requests and all("refusal" not in c.metadata for c in chunks[:-1])


@pytest.mark.parametrize("api", APIS)
async def test_refusal_stream_broken_before_it_finished_is_retried(
    server: OpenAIServer, api: str
) -> None:
    # refusal fragments reach the caller only with the finishing chunk, so a stream broken among
    # them delivered nothing yet: it is retried, and the first try's fragments are not kept
    server.script(Reply(refusal=REFUSAL, break_after=3), Reply(refusal=REFUSAL))
    async with make_model(server, api) as model:
        chunks = await collect(model.stream([Message.user("something forbidden")]))
    message = join_chunks(chunks)
    assert len(server.requests) == 2
    assert message.content == ""
    assert message.metadata["refusal"] == REFUSAL
    assert message.metadata["finish_reason"] == "stop"


# -- streams that fail ----------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_stream_broken_mid_way_raises(server: OpenAIServer, api: str) -> None:
    server.script(Reply(text="a long answer that will not arrive whole", break_after=4))
    received: list[MessageChunk] = []
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match="mid-stream"):
            async for chunk in model.stream([Message.user("hi")]):
                received.append(chunk)
    assert received and "".join(c.content for c in received) != ""
    assert len(server.requests) == 1  # chunks reached the caller: never retried


@pytest.mark.parametrize(
    ("api", "cut", "usage"),
    [("chat", -1, True), ("chat", -2, False), ("chat", 99, True), ("responses", 99, True)],
    ids=["chat_without_done", "chat_without_usage_or_done", "chat_body_unended", "responses"],
)
async def test_a_stream_cut_once_the_model_finished_keeps_the_whole_answer(
    server: OpenAIServer, api: str, cut: int, usage: bool
) -> None:
    # The connection dropped after the finish reason (Chat: before its usage chunk or [DONE]) or
    # after response.completed, as servers and proxies that close before ending the body do: the
    # answer is whole, and failing threw it away with the run.
    server.script(Reply(text="a whole answer, finished", break_after=cut), Reply(text="unused"))
    async with make_model(server, api) as model:
        message = join_chunks(await collect(model.stream([Message.user("hi")])))
    assert message.content == "a whole answer, finished"
    assert message.metadata["finish_reason"] == "stop"
    assert (message.usage is not None) is usage
    assert len(server.requests) == 1


@pytest.mark.parametrize("cut", [None, -2], ids=["ended", "cut_after_the_finish"])
async def test_a_stream_whose_answer_ends_in_an_error_raises_instead_of_passing_for_whole(
    server: OpenAIServer, cut: int | None
) -> None:
    # OpenRouter ends the answer of a provider that failed mid-way with finish_reason "error" and
    # the error on the choice: the cut answer passed for a whole one ("error" was taken as any
    # finish reason), and once a connection lost after the finish kept the answer, even a
    # stream cut right after it did.
    server.script(
        Reply(
            text="the first half of an answ",
            finish_reason="error",
            error="provider died",
            break_after=cut,
        ),
        Reply(text="unused"),
    )
    received: list[MessageChunk] = []
    async with make_model(server) as model:
        with pytest.raises(ModelError, match="provider died") as caught:
            async for chunk in model.stream([Message.user("hi")]):
                received.append(chunk)
    assert "".join(c.content for c in received).startswith("the first")
    assert "mid-stream" in str(caught.value) and caught.value.status == 502
    assert len(server.requests) == 1  # chunks reached the caller: never retried


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
async def test_an_answer_ending_in_an_error_before_anything_was_seen_is_retried(
    server: OpenAIServer, streaming: bool
) -> None:
    # The same answer before anything reached the caller (a whole body; a stream whose first
    # chunk is the failed finish) is retried as the status its error's code stands for, and
    # fails for good when that is not a transient one.
    server.script(
        Reply(text="half" if not streaming else "", finish_reason="error"),
        Reply(text="a whole answer"),
        Reply(finish_reason="error", error_code="400", error="bad tool schema"),
    )
    async with make_model(server) as model:
        message = await call(model, streaming, [Message.user("hi")])
        assert message.content == "a whole answer" and len(server.requests) == 2
        with pytest.raises(ModelError, match="bad tool schema") as caught:
            await call(model, streaming, [Message.user("hi")])
    assert caught.value.status == 400 and len(server.requests) == 3


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
async def test_an_answer_deepseek_cut_for_want_of_resources_is_no_answer(
    server: OpenAIServer, streaming: bool
) -> None:
    """DeepSeek ends an answer its inference resources ran short for with the finish reason
    ``insufficient_system_resource`` (its API reference lists it beside ``stop`` and
    ``length``): the cut answer passed for a whole one. It is a failure, an overload (503):
    retried while nothing has reached the caller, and raised mid-stream after that."""
    server.script(
        Reply(text="half" if not streaming else "", finish_reason="insufficient_system_resource"),
        Reply(text="a whole answer"),
        Reply(text="the first half of an answ", finish_reason="insufficient_system_resource"),
    )
    async with make_model(server) as model:
        message = await call(model, streaming, [Message.user("hi")])
        assert message.content == "a whole answer" and len(server.requests) == 2
        if streaming:
            with pytest.raises(ModelError, match="insufficient_system_resource") as caught:
                await call(model, streaming, [Message.user("hi")])
            assert "mid-stream" in str(caught.value) and caught.value.status == 503
            assert len(server.requests) == 3  # chunks reached the caller: never retried


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
async def test_a_tool_call_groq_could_not_parse_is_asked_for_again(
    server: OpenAIServer, streaming: bool
) -> None:
    """Groq answers a tool call its parser could not read with a 400 (streamed: an error
    event) coded ``tool_use_failed``, "Failed to call a function. Please adjust your prompt.",
    intermittently (Llama and Kimi models: pydantic/pydantic-ai#2774). It is about what the
    model generated, not the request, which samples anew when sent again and often succeeds;
    as a 400 it failed the run at once. It is retried as a failure without a status is; any
    other 400 still fails at once."""
    failed = "Failed to call a function. Please adjust your prompt."
    server.script(
        Reply(status=400, error=failed, error_code="tool_use_failed")
        if not streaming
        else Reply(error=failed, error_code="tool_use_failed", error_after=1),
        Reply(tool_calls=[Call("add", '{"a": 1, "b": 2}', id="c1")]),
        Reply(status=400, error="bad tool schema"),
    )
    async with make_model(server) as model:
        message = await call(model, streaming, [Message.user("1+2?")], tools=[ADD])
        assert [c.name for c in message.tool_calls] == ["add"] and len(server.requests) == 2
        with pytest.raises(ModelError, match="bad tool schema"):
            await call(model, streaming, [Message.user("1+2?")], tools=[ADD])
    assert len(server.requests) == 3


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
async def test_a_tool_call_groq_could_not_parse_follows_the_users_policy(
    server: OpenAIServer, streaming: bool
) -> None:
    """Groq's ``tool_use_failed`` is asked for again only while the policy retries statuses at
    all: a user who turned status retries off (``retry_on_status=frozenset()``) had it retried
    all the same, each retry a generation billed. Any policy retrying some status retries it,
    at most ``max_attempts`` tries in all."""
    failed = "Failed to call a function. Please adjust your prompt."

    def refusal() -> Reply:
        if streaming:
            return Reply(error=failed, error_code="tool_use_failed", error_after=1)
        return Reply(status=400, error=failed, error_code="tool_use_failed")

    server.script(refusal(), refusal(), refusal(), refusal(), Reply(text="never asked"))
    off = FAST.model_copy(update={"retry_on_status": frozenset()})
    async with make_model(server, retry=off) as model:
        with pytest.raises(ModelError, match="Failed to call a function") as caught:
            await call(model, streaming, [Message.user("1+2?")], tools=[ADD])
    assert len(server.requests) == 1
    assert caught.value.status == (None if streaming else 400)  # an event has no status
    some = FAST.model_copy(update={"retry_on_status": frozenset({503})})
    async with make_model(server, retry=some) as model:
        with pytest.raises(ModelError, match="Failed to call a function"):
            await call(model, streaming, [Message.user("1+2?")], tools=[ADD])
    assert len(server.requests) == 1 + FAST.max_attempts


@pytest.mark.parametrize("api", APIS)
async def test_stream_ending_early_raises_instead_of_truncating(
    server: OpenAIServer, api: str
) -> None:
    server.script(Reply(text="a long answer that ends too soon", end_after=4))
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match="ended before the model finished"):
            await collect(model.stream([Message.user("hi")]))
    assert len(server.requests) == 1


@pytest.mark.parametrize("calls", [(), (Call("add", '{"a": 1, "b": 2}', id="c1"),)])
async def test_a_stream_ended_by_done_without_a_finish_reason_is_finished(
    server: OpenAIServer, calls: tuple[Call, ...]
) -> None:
    """Some servers end a Chat stream with ``[DONE]`` and never send a finish reason: the answer
    is whole (the server said the stream is over), but it was "ended before the model
    finished", as a body cut short without ``[DONE]`` is. The SDK hides ``[DONE]``; the adapter
    watches for it, and a stream it ended is finished: ``stop``, or ``tool_calls`` when it made
    calls. Without ``[DONE]`` (a body ended early, or a connection cut), it still raises."""
    server.script(
        Reply(text="a whole answer", tool_calls=calls, finish_sent=False, signature="s"),
        Reply(text="a whole answer", finish_sent=False, end_after=-1),  # all but [DONE]
        Reply(text="a whole answer", finish_sent=False, break_after=-1),  # and the body cut
    )
    async with make_model(server) as model:
        message = join_chunks(await collect(model.stream([Message.user("hi")], tools=[ADD])))
        with pytest.raises(ModelError, match="ended before the model finished"):
            await collect(model.stream([Message.user("hi")]))
        with pytest.raises(ModelError, match="connection error"):
            await collect(model.stream([Message.user("hi")]))
    assert message.content == "a whole answer"
    assert message.metadata["finish_reason"] == ("tool_calls" if calls else "stop")
    assert message.tool_calls == [
        ToolCall(id=c.id or "", name=c.name, arguments=c.arguments) for c in calls
    ]
    if calls:  # what the stream's finishing chunk records, as for a finish reason
        assert message.metadata["tool_call_extra_content"] == {
            "c1": {"google": {"thought_signature": "s"}}
        }
    assert message.usage is not None  # the usage chunk came before [DONE]
    assert message.metadata["response_id"] == "chatcmpl-1"
    assert len(server.requests) == 3


@pytest.mark.parametrize("api", APIS)
async def test_stream_error_event_mid_way_raises(server: OpenAIServer, api: str) -> None:
    server.script(
        Reply(text="partial answer before the failure", error="engine crashed", error_after=4)
    )
    received: list[MessageChunk] = []
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match=r"mid-stream.*engine crashed"):
            async for chunk in model.stream([Message.user("hi")]):
                received.append(chunk)
    assert received
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    "code",
    [None, "503", "429", "rate_limit_exceeded"],
    ids=["vllm_500_or_server_error", "text_503", "text_429", "named_rate_limit"],
)
async def test_a_stream_failing_transiently_before_its_first_chunk_is_retried(
    server: OpenAIServer, api: str, code: str | None
) -> None:
    # The server had sent its 200 headers when the engine failed (vLLM), or the upstream behind a
    # proxy answered 503/429 (LiteLLM): the error comes as the stream's first event. Nothing has
    # reached the caller, so it is retried as the same answer sent as an HTTP status would be.
    server.script(
        Reply(text="never seen", error="engine overloaded", error_after=0, error_code=code),
        Reply(text="second try"),
    )
    async with make_model(server, api) as model:
        received = await collect(model.stream([Message.user("hi")]))
    assert join_chunks(received).content == "second try"
    assert len(server.requests) == 2


async def test_openais_own_server_error_before_the_first_chunk_is_retried(
    server: OpenAIServer,
) -> None:
    # OpenAI's mid-stream error names its kind in "type" and has no code.
    error = {
        "message": "The server had an error while processing your request.",
        "type": "server_error",
        "param": None,
        "code": None,
    }
    sse = f"data: {json.dumps({'error': error})}\n\ndata: [DONE]\n\n".encode()
    server.script(Reply(raw=sse, content_type="text/event-stream"), Reply(text="second try"))
    async with make_model(server) as model:
        received = await collect(model.stream([Message.user("hi")]))
    assert join_chunks(received).content == "second try"
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("code", ["400", "insufficient_quota"])
async def test_a_stream_refused_before_its_first_chunk_is_not_retried(
    server: OpenAIServer, api: str, code: str
) -> None:
    server.script(
        Reply(text="never seen", error="no can do", error_after=0, error_code=code),
        Reply(text="unused"),
    )
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match="no can do") as failed:
            await collect(model.stream([Message.user("hi")]))
    assert failed.value.status == (400 if code == "400" else None)
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_error_whose_code_is_a_huge_number_is_a_model_error(
    server: OpenAIServer, api: str
) -> None:
    # A code of digits too long for int() (Python refuses past 4,300 digits) is no status: the
    # error event failed the call with int()'s ValueError, from inside the retry decision,
    # instead of the ModelError quoting the server's message.
    server.script(
        Reply(text="never seen", error="no can do", error_after=0, error_code="5" * 5000),
        Reply(text="unused"),
    )
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match="no can do") as failed:
            await collect(model.stream([Message.user("hi")]))
    assert failed.value.status is None
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_failing_transiently_every_time_names_its_status_and_attempts(
    server: OpenAIServer, api: str
) -> None:
    server.script(*[Reply(text="never seen", error="engine overloaded", error_after=0)] * 3)
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match=r"engine overloaded.*gave up after 3 attempts") as e:
            await collect(model.stream([Message.user("hi")]))
    assert e.value.status == 500
    assert len(server.requests) == 3


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_failing_transiently_after_its_first_chunk_is_not_retried(
    server: OpenAIServer, api: str
) -> None:
    server.script(
        Reply(text="partial answer before the failure", error="overloaded", error_after=6),
        Reply(text="unused"),
    )
    received: list[MessageChunk] = []
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match=r"mid-stream.*overloaded") as failed:
            async for chunk in model.stream([Message.user("hi")]):
                received.append(chunk)
    assert received and failed.value.status == 500
    assert len(server.requests) == 1  # chunks reached the caller: a retry would repeat them


async def test_stream_broken_before_first_chunk_is_retried(server: OpenAIServer) -> None:
    # the first event is the role-only opener, which carries nothing for the caller
    server.script(Reply(text="never seen", break_after=1), Reply(text="second try"))
    async with make_model(server) as model:
        message = join_chunks(await collect(model.stream([Message.user("hi")])))
    assert message.content == "second try"
    assert len(server.requests) == 2


# -- malformed answers ----------------------------------------------------------------------------

COMPLETION = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
    }
).encode()


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize(
    ("reply", "says"),
    [
        (Reply(raw=b"{not json"), r"not valid JSON \(.*\): '\{not json'"),
        (
            Reply(raw=b"<html>proxy login</html>", content_type="text/html"),
            r"not JSON: '<html>proxy login</html>'",
        ),
        (
            Reply(raw=json.dumps({"error": {"message": "model overloaded"}}).encode()),
            "answered with an error: model overloaded",
        ),
    ],
    ids=["invalid_json", "html", "error_object"],
)
async def test_a_malformed_answer_is_a_model_error_naming_the_call(
    server: OpenAIServer, api: str, reply: Reply, says: str
) -> None:
    server.script(reply, Reply(text="unused"))
    endpoint = "chat.completions" if api == "chat" else "responses"
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match=rf"{endpoint} call to .*'test-model'.*{says}"):
            await model.generate([Message.user("hi")])
    assert len(server.requests) == 1  # the wrong kind of answer: asking again would not help


@pytest.mark.parametrize("api", APIS)
async def test_a_malformed_stream_event_is_a_model_error(server: OpenAIServer, api: str) -> None:
    server.script(Reply(text="never seen", malformed_after=0), Reply(text="unused"))
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match=r"failed: the server's answer is not valid JSON"):
            await collect(model.stream([Message.user("hi")]))
    assert len(server.requests) == 1


_LONG_NUMBER = "5" * 5000  # past the 4,300 digits Python's int() (and so json) reads


def _with_a_long_number(api: str, streaming: bool) -> bytes:
    """A server's answer holding a JSON number of thousands of digits, no string: a stream's error
    event whose ``code`` it is, or a completion whose creation time it is."""
    if streaming:
        if api == "chat":
            event = f'{{"error": {{"message": "no can do", "code": {_LONG_NUMBER}}}}}'
        else:
            event = (
                f'{{"type": "error", "message": "no can do", "code": {_LONG_NUMBER}, '
                '"sequence_number": 0}'
            )
        return f"data: {event}\n\n".encode()
    if api == "chat":
        return (
            f'{{"id": "x", "object": "chat.completion", "created": {_LONG_NUMBER}, "model": "m", '
            '"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, '
            '"finish_reason": "stop"}]}'
        ).encode()
    return (
        f'{{"id": "x", "object": "response", "created_at": {_LONG_NUMBER}, "model": "m", '
        '"status": "completed", "output": []}'
    ).encode()


@pytest.mark.parametrize("streaming", [False, True], ids=["generate", "stream"])
@pytest.mark.parametrize("api", APIS)
async def test_an_answer_holding_a_number_too_long_to_read_is_a_model_error(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    # The SDK's json.loads refuses an integer past 4,300 digits with a bare ValueError (no
    # JSONDecodeError: the text is JSON), which failed the call as that ValueError, saying to
    # raise sys.set_int_max_str_digits(), where any other answer that cannot be read is a
    # ModelError naming the call. (A code given as a string was fixed before: in_band_status.)
    body = _with_a_long_number(api, streaming)
    kind = "text/event-stream" if streaming else "application/json"
    server.script(Reply(raw=body, content_type=kind), Reply(text="unused"))
    endpoint = "chat.completions" if api == "chat" else "responses"
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match=rf"{endpoint} call .*number too long") as failed:
            await call(model, streaming, [Message.user("hi")])
    assert failed.value.status is None
    assert len(server.requests) == 1  # the same answer again: not retried


@pytest.mark.parametrize("api", APIS)
async def test_a_malformed_stream_event_mid_way_is_a_model_error(
    server: OpenAIServer, api: str
) -> None:
    server.script(Reply(text="a long answer that goes wrong", malformed_after=4))
    received: list[MessageChunk] = []
    async with make_model(server, api) as model:
        with pytest.raises(ModelError, match=r"mid-stream after \d+ chunk\(s\).*not valid JSON"):
            async for chunk in model.stream([Message.user("hi")]):
                received.append(chunk)
    assert received
    assert len(server.requests) == 1


async def test_a_stream_answered_without_an_event_stream_is_not_retried(
    server: OpenAIServer,
) -> None:
    server.script(Reply(raw=COMPLETION), Reply(text="unused"))
    async with make_model(server) as model:
        with pytest.raises(ModelError, match="'application/json', not an event stream"):
            await collect(model.stream([Message.user("hi")]))
    assert len(server.requests) == 1


# -- closing and walking away ---------------------------------------------------------------------


async def wait_for(condition: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("phase", ["generate", "stream_opening", "stream_midway"])
async def test_aclose_with_a_call_in_flight_fails_it_at_once_without_retrying(
    server: OpenAIServer, api: str, phase: str
) -> None:
    stall = {"generate": None, "stream_opening": 1, "stream_midway": 4}[phase]
    server.script(Reply(text="an answer that takes a while", delay=5.0, stall_after=stall))
    slow_retry = RetryPolicy(max_attempts=3, initial_delay=5.0, max_delay=5.0, jitter=False)
    model = make_model(server, api, retry=slow_retry)
    received: list[MessageChunk] = []

    async def run() -> None:
        if phase == "generate":
            await model.generate([Message.user("hi")])
        else:
            async for chunk in model.stream([Message.user("hi")]):
                received.append(chunk)

    task = asyncio.create_task(run())
    await wait_for(lambda: server.stalls == 1 and (phase != "stream_midway" or bool(received)))
    started = time.monotonic()
    await model.aclose()
    with pytest.raises(ModelError, match=r"closed \(aclose\(\)\) while the call was running"):
        await task
    assert time.monotonic() - started < 2.0  # no retry backoff of 5 s
    assert len(server.requests) == 1
    await wait_for(lambda: server.hangups == 1)


@pytest.mark.parametrize("api", APIS)
async def test_aclose_during_a_retrys_backoff_fails_the_call_at_once(
    server: OpenAIServer, api: str
) -> None:
    server.script(Reply(status=503, error="busy"), Reply(text="never asked for"))
    slow_retry = RetryPolicy(max_attempts=3, initial_delay=5.0, max_delay=5.0, jitter=False)
    model = make_model(server, api, retry=slow_retry)
    task = asyncio.create_task(model.generate([Message.user("hi")]))
    await wait_for(lambda: len(server.requests) == 1)
    await asyncio.sleep(0.1)  # into the 5 s backoff
    started = time.monotonic()
    await model.aclose()
    with pytest.raises(ModelError, match=r"closed \(aclose\(\)\) while the call was running"):
        await task
    assert time.monotonic() - started < 2.0
    assert len(server.requests) == 1


async def test_aclose_wakes_a_backoff_begun_under_the_retry_policy_set_before(
    server: OpenAIServer,
) -> None:
    """A call waiting out a backoff, then ``model.retry`` set (the next call's policy), then
    ``aclose``: the call fails at once, as without the new policy. The setter built a new retry
    runner and ``aclose`` woke that one only, so the call slept its backoff out (an hour here)."""
    server.script(Reply(status=503, error="busy"), Reply(text="never asked for"))
    hour = RetryPolicy(max_attempts=3, initial_delay=3600.0, max_delay=3600.0, jitter=False)
    model = make_model(server, retry=hour)
    task = asyncio.create_task(model.generate([Message.user("hi")]))
    await wait_for(lambda: len(server.requests) == 1)
    await asyncio.sleep(0.1)  # into the backoff
    model.retry = RetryPolicy(max_attempts=1)
    await model.aclose()
    try:
        await wait_for(task.done)
    finally:
        task.cancel()
    with pytest.raises(ModelError, match=r"closed \(aclose\(\)\) while the call was running"):
        await task
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("how", ["cancel", "aclose"])
async def test_a_stream_left_mid_way_releases_its_connection(
    server: OpenAIServer, api: str, how: str
) -> None:
    server.script(
        Reply(text="a long answer nobody reads to the end", delay=5.0, stall_after=4),
        Reply(text="next"),
    )
    async with make_model(server, api) as model:
        received: list[MessageChunk] = []
        stream = model.stream([Message.user("hi")])

        async def read() -> None:
            async for chunk in stream:
                received.append(chunk)

        task = asyncio.create_task(read())
        await wait_for(lambda: server.stalls == 1 and bool(received))
        if how == "cancel":
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        else:
            task.cancel()  # stop the reader, then close the stream as a consumer walking away does
            with pytest.raises(asyncio.CancelledError):
                await task
            await stream.aclose()  # type: ignore[attr-defined]
        await wait_for(lambda: server.hangups == 1, within=2.0)  # well before the 5 s stall ends
        assert (await model.generate([Message.user("again")])).content == "next"


# -- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_base_url_with_or_without_v1(server: OpenAIServer, suffix: str) -> None:
    server.script(Reply(text="ok"))
    async with OpenAIChatModel("m", base_url=server.root_url + suffix, api_key="k") as model:
        assert (await model.generate([Message.user("hi")])).content == "ok"
        assert model.base_url == server.base_url
    assert server.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("root", ["/v1", ""])
async def test_a_base_url_query_goes_with_every_request(
    server: OpenAIServer, api: str, root: str
) -> None:
    """Azure OpenAI takes its ``api-version`` as a query on every request (the v1 API's preview
    features, ``.../openai/v1?api-version=preview``; a deployment's URL,
    ``.../openai/deployments/<name>?api-version=2024-10-21``; Microsoft's "Azure OpenAI v1 API"
    page), and gateways put keys and routing there. Given in ``base_url``, the SDK joined the
    endpoint after the query (``/v1/?api-version=2024-10-21chat/completions``): every call went
    to a path no server has and failed with a 404 about it. The query is kept as the client's
    default query: sent with every request, a retried one and a stream too, and the ``/v1`` rule
    reads the path alone."""
    server.script(Reply(status=503), Reply(text="one"), Reply(text="two"))
    url = f"{server.root_url}{root}?api-version=2024-10-21&tag=a"
    async with OpenAIChatModel("m", base_url=url, api=api, retry=FAST) as model:
        assert (await model.generate([Message.user("hi")])).content == "one"
        assert join_chunks(await collect(model.stream([Message.user("hi")]))).content == "two"
        assert "api-version" in repr(model) and "2024-10-21" not in repr(model)  # masked
    endpoint = "/v1/chat/completions" if api == "chat" else "/v1/responses"
    query = "?api-version=2024-10-21&tag=a"
    assert [request.path for request in server.requests] == [endpoint + query] * 3
    # A key given twice would go as "tag[]" (the SDK's way with a list): refused, not renamed.
    with pytest.raises(ValueError, match="'tag' more than once"):
        OpenAIChatModel("m", base_url=f"{server.root_url}/v1?tag=a&tag=b")


def test_endpoint_url_is_rejected_with_the_fix() -> None:
    with pytest.raises(ValueError, match="'http://localhost:8000/v1'"):
        OpenAIChatModel("m", base_url="http://localhost:8000/v1/chat/completions")
    with pytest.raises(ValueError, match="http"):
        OpenAIChatModel("m", base_url="localhost:8000")


async def test_configuration_from_environment(
    server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.root_url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.script(Reply(text="ok"))
    async with OpenAIChatModel("m") as model:
        assert model.model_name == "m"
        assert isinstance(model, ChatModel)
        await model.generate([Message.user("hi")])
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_an_empty_openai_base_url_is_openai_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """``OPENAI_BASE_URL=`` (set empty, as a shell's ``export OPENAI_BASE_URL=`` leaves it) is
    read as unset, as the adapter meant: the client it made read the empty value itself, so the
    model's base_url was '' and every call failed as a connection error ('Request URL is missing
    an http:// or https:// protocol'), and parts went as text to OpenAI."""
    monkeypatch.setenv("OPENAI_BASE_URL", "")
    model = OpenAIChatModel("gpt-4o", api_key="sk-test")
    assert model.base_url == "https://api.openai.com/v1"
    assert str(model._client.base_url) == "https://api.openai.com/v1/"
    assert str(model._new_client().base_url) == "https://api.openai.com/v1/"
    assert model.parts == "send"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="no API key for OpenAI"):
        OpenAIChatModel("gpt-4o")


def test_openai_itself_needs_a_key_and_gets_max_completion_tokens(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ValueError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini")
    model = OpenAIChatModel("gpt-4o-mini", api_key="sk-x")
    assert model.base_url == "https://api.openai.com/v1"
    request = model._build(  # request building only: nothing is sent
        "gpt-4o-mini",
        [Message.user("x")],
        (),
        ModelOptions(max_tokens=5),
        stream=False,
        max_tokens_field=model._max_tokens_field,
    )
    assert request["max_completion_tokens"] == 5 and "max_tokens" not in request


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="api must be"):
        OpenAIChatModel("m", base_url="http://x", api="completions")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        OpenAIChatModel("m", base_url="http://x", client=openai.AsyncOpenAI(api_key="k"))
    with pytest.raises(ValueError, match="model name"):
        OpenAIChatModel("", base_url="http://x")


async def test_aclose_closes_own_client_but_not_a_borrowed_one(server: OpenAIServer) -> None:
    server.script(Reply(text="a"), Reply(text="b"))
    model = make_model(server)
    await model.aclose()
    await model.aclose()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await model.generate([Message.user("hi")])

    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k")
    async with OpenAIChatModel("m", client=client) as borrowed:
        assert (await borrowed.generate([Message.user("hi")])).content == "a"
    reply = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}]
    )
    assert reply.choices[0].message.content == "b"  # the user's client still works
    await client.close()


def test_import_adk_does_not_import_openai() -> None:
    """The wire-mapping and retry helpers must stay importable without the (slow) openai SDK."""
    code = (
        "import sys, adk, adk.models, adk.models._openai_chat, adk.models._openai_responses, "
        "adk.models._retry; assert 'openai' not in sys.modules, 'openai imported eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- a full ReAct tool loop through the adapter ---------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_react_agent_tool_loop(server: OpenAIServer, api: str, streaming: bool) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    server.script(
        Reply(
            tool_calls=[
                Call("add", '{"a": 2, "b": 3}', id="c1"),
                Call("add", '{"a": 10, "b": 1}', id="c2"),
            ],
            repeat_name=True,
        ),
        Reply(text="The sums are 5 and 11."),
    )
    async with make_model(server, api) as model:
        agent = ReActAgent("calc", model, instruction="You add numbers.", tools=[add])
        result = await Runner(agent, enable_streaming=streaming).invoke("What are 2+3 and 10+1?")
    assert result.text == "The sums are 5 and 11."
    tool_results = sorted(
        (e.output.message.tool_call_id, e.output.message.content)
        for e in result.events
        if e.output is not None and e.output.message is not None and e.output.role == Role.TOOL
    )
    assert tool_results == [("c1", "5"), ("c2", "11")]

    first, second = (r.body for r in server.requests)
    assert first.get("stream", False) is streaming
    if api == "chat":
        assert first["tools"][0]["function"]["name"] == "add"
        assert first["messages"][0] == {"role": "system", "content": "You add numbers."}
        sent = second["messages"]
        assert sent[2]["role"] == "assistant" and sent[2]["content"] == ""
        assert [c["id"] for c in sent[2]["tool_calls"]] == ["c1", "c2"]
        returned = sorted((m["tool_call_id"], m["content"]) for m in sent[3:])
    else:
        assert first["tools"][0]["name"] == "add"
        sent = second["input"]
        assert [i["call_id"] for i in sent if i.get("type") == "function_call"] == ["c1", "c2"]
        returned = sorted(
            (i["call_id"], i["output"]) for i in sent if i.get("type") == "function_call_output"
        )
    assert returned == [("c1", "5"), ("c2", "11")]


@pytest.mark.parametrize("api", APIS)
def test_each_asyncio_run_closes_the_connections_it_opened(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``asyncio.run`` per request (a sync web framework), on one thread and on several at once.
    The model made a client for each new loop and dropped the old one with its connections open:
    the SDK's finalizer then closed them from whichever loop was running when the collector freed
    it, logging "Task exception was never retrieved ... Event loop is closed" for nearly every
    request, the sockets left open meanwhile; and two threads' loops swapped one client between
    a thread's binding and its use. Each loop's client is now closed as its loop ends."""
    ready = threading.Event()
    held: dict[str, Any] = {}

    def serve() -> None:
        async def main() -> None:
            async with OpenAIServer(default=Reply(text="fine")) as srv:
                held.update(srv=srv, loop=asyncio.get_running_loop(), stop=asyncio.Event())
                ready.set()
                await held["stop"].wait()

        asyncio.run(main())

    def settled(srv: OpenAIServer) -> bool:
        """Whether the server saw every connection closed (bounded probes, not a timing test)."""
        for _ in range(500):
            if srv.open_connections == 0:
                return True
            time.sleep(0.01)
        return False

    async def request(model: OpenAIChatModel, collect: bool) -> str:
        if collect:
            gc.collect()  # the collector runs inside some request's loop in a busy service
        chunks = [chunk async for chunk in model.stream([Message.user("hi")])]
        return (await model.generate([Message.user("hi")])).content + chunks[0].content

    answers: list[str] = []

    def requests(model: OpenAIChatModel, count: int, collect: bool = False) -> None:
        for _ in range(count):
            answers.append(asyncio.run(request(model, collect)))

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        assert ready.wait(10)
        srv: OpenAIServer = held["srv"]
        model = make_model(srv, api)
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            for _ in range(3):
                requests(model, 1, collect=True)
                assert settled(srv)  # that loop's connections closed with it
            workers = [threading.Thread(target=requests, args=(model, 4)) for _ in range(3)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(30)
            gc.collect()
            assert settled(srv)
        assert answers == ["finefine"] * 15
        assert [r.getMessage() for r in caplog.records] == []
        asyncio.run(model.aclose())
    finally:
        held["loop"].call_soon_threadsafe(held["stop"].set)
        thread.join(10)


def test_a_model_serves_one_asyncio_run_after_another() -> None:
    """``asyncio.run`` per request (scripts, notebooks, sync web frameworks): the model's own
    client is made again for each new loop, instead of failing with "Event loop is closed"."""
    ready = threading.Event()
    held: dict[str, Any] = {}

    def serve() -> None:
        async def main() -> None:
            async with OpenAIServer() as srv:
                held.update(srv=srv, loop=asyncio.get_running_loop(), stop=asyncio.Event())
                ready.set()
                await held["stop"].wait()

        asyncio.run(main())

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        assert ready.wait(10)
        srv: OpenAIServer = held["srv"]
        srv.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
        model = make_model(srv)
        answers = [asyncio.run(model.generate([Message.user("hi")])).content for _ in range(3)]
        assert answers == ["one", "two", "three"]
        asyncio.run(model.aclose())
    finally:
        held["loop"].call_soon_threadsafe(held["stop"].set)
        thread.join(10)


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("streaming", [False, True])
async def test_text_holding_lone_surrogates_is_sent_with_each_as_a_replacement_character(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    """A model's ``"\\ud800"`` escape gives a lone surrogate, which has no UTF-8 form: sent back
    in the history (or given in the input, or in a tool's result), the SDK could not write the
    request, and the run failed with a bare ``UnicodeEncodeError`` before reaching the server.
    It is sent with each lone one as U+FFFD; a pair escaped as two code units is its character."""

    @tool
    def look() -> str:
        """Look."""
        return "seen \udc00"

    server.script(Reply(text="hm \ud800", tool_calls=[Call("look")]), Reply(text="done"))
    model = wire_model(server, api)
    runner = Runner(ReActAgent("a", model, tools=[look]), enable_streaming=streaming)
    events = await run_events(runner, "hi \ud801 \ud83d\ude00")
    await model.aclose()
    assert [e.error for e in events if e.error is not None] == []
    assert len(server.bodies) == 2  # the second turn, carrying the history, reached the server
    sent = json.dumps(server.bodies[-1], ensure_ascii=False)
    assert "hi \ufffd \U0001f600" in sent
    assert "hm \ufffd" in sent
    assert "seen \ufffd" in sent


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_refusal_placing_a_tool_by_its_index_names_the_tool(api: str) -> None:
    """OpenAI refuses a tool description over 1,024 characters (a docstring's summary is easily
    that), placing it by its index, "Invalid 'tools[1].function.description'": a user who gave
    functions could only count the tools out. The error names the tool at that index."""
    field = "tools[1].function.description" if api == "chat" else "tools[1].description"
    said = (
        f"Invalid '{field}': string too long. Expected a string with maximum length 1024, but "
        "got a string with length 1800 instead."
    )
    tools = [
        ToolSpec(name="search", description="Search."),
        ToolSpec(name="summarise", description="Summarise. " * 180),
    ]
    async with OpenAIServer() as server:
        server.script(
            Reply(status=400, error=said, error_param=field, error_code="string_above_max_length"),
            Reply(status=400, error="Invalid 'tools[7].function.parameters': bad."),
        )
        async with make_model(server, api) as model:
            with pytest.raises(ModelError) as refused:
                await model.generate([Message.user("hi")], tools=tools)
            assert str(refused.value).endswith(f"{said} (tools[1] is tool 'summarise')")
            with pytest.raises(ModelError) as refused:  # an index the request has not: as said
                await model.generate([Message.user("hi")], tools=tools)
            assert str(refused.value).endswith("Invalid 'tools[7].function.parameters': bad.")


def test_a_rounds_results_go_in_its_calls_order_and_a_run_that_does_not_fit_is_left_as_given() -> (
    None
):
    # Results come in the order their calls finished; the wire sends them in the calls' order
    # (servers pairing them by position misread them otherwise), per round, the short ids a
    # server that refused ids gets included. A round whose results do not answer its calls one
    # to one (an id no call has, one answered twice, two calls sharing an id) is sent as given:
    # the server's refusal then names what was given.
    def reply(*ids: str) -> Message:
        calls = [ToolCall(id=i, name="f", arguments="{}") for i in ids]
        return Message.assistant("", tool_calls=calls)

    def result(call_id: str) -> Message:
        return Message.tool("r", tool_call_id=call_id, name="f")

    conversation = [
        Message.user("hi"),
        reply("a", "b", "c"),
        *map(result, "cab"),
        reply("d", "e"),
        *map(result, "ed"),
        Message.user("more"),
    ]

    def answered(wire: list[dict[str, Any]]) -> list[str]:
        return [m["tool_call_id"] for m in wire if m["role"] == "tool"]

    assert answered(chat_messages(conversation)) == list("abcde")
    short = chat_messages(conversation, short_ids=True)
    assert answered(short) == [
        c["id"] for m in short if m.get("tool_calls") for c in m["tool_calls"]
    ]
    for odd in (
        [reply("a", "b"), result("b"), result("x")],
        [reply("a", "b"), result("b"), result("b")],
        [reply("a", "a"), result("a"), result("a")],
    ):
        assert answered(chat_messages(odd)) == [m.tool_call_id for m in odd[1:]]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_call_cut_at_the_token_limit_is_answered_as_cut(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    """A reply cut at its token limit (Chat's ``finish_reason: "length"``, a Responses reply
    ``incomplete`` for ``max_output_tokens``) in the middle of a call's arguments: the tool was
    run with them and the model (and whoever reads the history) got only "invalid JSON
    arguments", nothing saying the reply was cut, where raising max_tokens is the fix. The cut
    call is answered so, without running the tool; a whole call of the same reply runs."""
    ran: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        ran.append(a + b)
        return a + b

    server.script(
        Reply(
            tool_calls=[Call("add", '{"a": 1, "b": 2}'), Call("add", '{"a": 3, "b')],
            finish_reason="length",
        ),
        Reply(tool_calls=[Call("add", '{"a": 5, "b": ')], finish_reason="length"),
        # cut deep in nesting: past what json.loads recurses through (RecursionError, 3.11)
        Reply(tool_calls=[Call("add", '{"a": ' + "[" * 5_000)], finish_reason="length"),
        Reply(text="ok"),
    )
    async with make_model(server, api) as model:
        runner = Runner(ReActAgent("calc", model, tools=[add]), enable_streaming=streaming)
        result = await runner.invoke("add")
    assert result.text == "ok"
    assert [m.metadata.get("finish_reason") for m in result.messages if m.tool_calls] == [
        "length",
        "length",
        "length",
    ]
    answers = [m.content for m in result.messages if m.role == Role.TOOL]
    assert len(answers) == 4
    assert answers.count("3") == 1  # the whole call's (results come as calls end)
    for cut in (a for a in answers if a != "3"):
        assert "cut at its token limit" in cut, cut
        assert "max_tokens" in cut, cut
        assert "'add'" in cut, cut
    assert ran == [3]  # the cut calls did not run


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_call_cut_at_the_token_limit_before_its_arguments_is_answered_as_cut(
    server: OpenAIServer, api: str, streaming: bool
) -> None:
    """A reply cut at its token limit right after its last call's name, none of its arguments
    come: the adapter made them ``{}``, as for a call without arguments, and the tool ran with
    its defaults, which the model never chose. The call is answered as cut; a whole call with
    ``{}`` of a reply that was not cut runs."""
    ran: list[str] = []

    @tool
    def wipe(scope: str = "all") -> str:
        """Wipe a scope."""
        ran.append(scope)
        return f"wiped {scope}"

    server.script(
        Reply(tool_calls=[Call("wipe", "")], finish_reason="length"),
        Reply(tool_calls=[Call("wipe", "{}")]),
        Reply(text="ok"),
    )
    async with make_model(server, api) as model:
        runner = Runner(ReActAgent("w", model, tools=[wipe]), enable_streaming=streaming)
        result = await runner.invoke("wipe")
    assert result.text == "ok"
    answers = [m.content for m in result.messages if m.role == Role.TOOL]
    assert "cut at its token limit" in answers[0] and "'wipe'" in answers[0], answers[0]
    assert answers[1:] == ["wiped all"]
    assert ran == ["all"]  # only the whole call ran
