"""MCP beyond tools and prompts, against real MCP servers (tests/mcp_servers): progress and log
messages of a running call, a server asking the user for input (elicitation) or the client's
model for a completion (sampling), the server's resources, results that break their tool's output
schema and cancelled calls; over stdio and streamable HTTP, in both protocol eras (2026-07-28, and
the ``initialize`` handshake era with ``--legacy``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import wire_model
from mcp.types import (
    BlobResourceContents,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequestParams,
    ElicitResult,
    TextContent,
    TextResourceContents,
    ToolResultContent,
    ToolUseContent,
)
from mcp_servers.process import STDIO_SCRIPT, HTTPServerProcess
from openai_server import Call as WireCall
from openai_server import OpenAIServer
from openai_server import Reply as WireReply
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import adk.checkpoint.codec as codec
from adk import Interrupt, MaxTurnsExceeded, Resources, RunContext, Runner, tool
from adk.actions import (
    ActionAgent,
    ActionContext,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.callbacks import Callbacks, ModelRequest
from adk.mcp import HTTPServer, MCPProgress, MCPToolset, StdioServer
from adk.messages import Message, ToolCall, Usage
from adk.models.base import ModelError, ModelOptions
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from adk.tools.base import ToolContext, ToolResult, ToolSpec
from prebuilt import ReActAgent

pytestmark = pytest.mark.asyncio(loop_scope="module")

RAW_PROGRESS_SCRIPT = Path(__file__).resolve().parent / "mcp_servers" / "raw_progress_server.py"

TRANSPORTS = ["stdio", "stdio-legacy", "http", "http-legacy"]


@pytest.fixture(scope="module")
def http_servers() -> Iterator[dict[bool, HTTPServerProcess]]:
    """The demo server over streamable HTTP, in each protocol era (keyed by ``legacy``)."""
    servers = {legacy: HTTPServerProcess(legacy=legacy) for legacy in (False, True)}
    try:
        for process in servers.values():
            process.start()
        yield servers
    finally:
        for process in servers.values():
            process.stop()


def server_for(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> StdioServer | HTTPServer:
    legacy = transport.endswith("-legacy")
    if transport.startswith("stdio"):
        return StdioServer(sys.executable, [str(STDIO_SCRIPT), *(["--legacy"] if legacy else [])])
    return HTTPServer(http_servers[legacy].url)


async def call(toolset: MCPToolset, name: str, arguments: dict[str, Any]) -> ToolResult:
    tools = {tool.spec.name: tool for tool in await toolset.tools()}
    result = await tools[name].run(json.dumps(arguments), None)  # type: ignore[arg-type]
    assert isinstance(result, ToolResult)
    return result


async def eventually(
    probe: Callable[[], Awaitable[ToolResult]], check: Callable[[ToolResult], bool]
) -> ToolResult:
    """Probe until ``check`` holds (the server learns of a cancellation asynchronously); bounded
    by attempts, not timed."""
    for _ in range(400):
        value = await probe()
        if check(value):
            return value
        await asyncio.sleep(0.025)
    raise AssertionError(f"condition never held; last value: {value!r}")


# -- elicitation and sampling --------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_server_asking_for_input_or_a_completion_unanswered_is_a_clear_error(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """Without handlers the toolset declares neither capability: the server refuses the call
    itself, with its own words and nothing else (a 2026-07-28 HTTP server answers that with HTTP
    400 and the JSON-RPC error as body, which was appended to the text as raw JSON), and the
    session goes on."""
    async with MCPToolset(server_for(transport, http_servers), call_timeout=15) as toolset:
        booked = await call(toolset, "book", {"destination": "Oslo"})
        summary = await call(toolset, "summarize", {"text": "a long text"})
        after = await call(toolset, "add", {"a": 1, "b": 2})

    assert (booked.is_error, booked.content) == (
        True,
        "Error: tool 'book' failed: Client did not declare the form elicitation capability "
        "required by resolver 'demo:_ask_date'",
    )
    assert (summary.is_error, summary.content) == (
        True,
        "Error: tool 'summarize' failed: Client did not declare the sampling capability "
        "required by resolver 'demo:_sample_summary'",
    )
    assert after.content == "3"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_an_elicitation_handler_answers_the_server_in_the_middle_of_a_call(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def ask_user(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        asked.append((params.message, params.requested_schema))  # type: ignore[union-attr]
        if len(asked) == 1:
            return ElicitResult(action="accept", content={"date": "2027-01-02"})
        return ElicitResult(action="decline")

    server = server_for(transport, http_servers)
    async with MCPToolset(server, call_timeout=15, elicitation=ask_user) as toolset:
        booked = await call(toolset, "book", {"destination": "Oslo"})
        declined = await call(toolset, "book", {"destination": "Rome"})

    assert (booked.is_error, booked.content) == (False, "booked Oslo on 2027-01-02")
    assert [message for message, _ in asked] == [
        "When do you want to travel to Oslo?",
        "When do you want to travel to Rome?",
    ]
    assert asked[0][1]["properties"]["date"]["type"] == "string"
    assert declined.is_error and "elicitation was decline" in declined.content


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_pyadk_model_answers_a_servers_sampling_request(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    model = ScriptedModel(["Short."])
    server = server_for(transport, http_servers)
    async with MCPToolset(server, call_timeout=15, sampling=model) as toolset:
        summary = await call(toolset, "summarize", {"text": "a long text"})

    assert (summary.is_error, summary.content) == (False, "summary (scripted): Short.")
    (request,) = model.requests
    assert [(m.role.value, m.content) for m in request.messages] == [
        ("system", "Be brief."),
        ("user", "Summarize: a long text"),
    ]
    assert request.options is not None and request.options.max_tokens == 50


SCREENSHOT_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="  # the demo's SCREENSHOT


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_servers_sampling_request_with_an_image_reaches_a_vision_model_as_an_image(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """A server asking the client's model about a screenshot: the model is sent the image (an
    ``image_url`` content part), beside the text with its placeholder, as an MCP tool's image
    is, because it was sent the placeholder alone, so a vision model could only answer that it
    saw no image."""
    async with OpenAIServer([WireReply(text="A login form.")]) as wire:
        model = wire_model(wire, parts="send")
        toolset = MCPToolset(server_for(transport, http_servers), call_timeout=15, sampling=model)
        async with model, toolset:
            described = await call(toolset, "describe", {})
        (request,) = wire.requests
    assert (described.is_error, described.content) == (
        False,
        "description (test-model): A login form.",
    )
    assert request.body["messages"] == [
        {"role": "system", "content": "You see images."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Describe this screenshot.\n[image: image/png]"},
                {"type": "image_url", "image_url": {"url": SCREENSHOT_URL}},
            ],
        },
    ]


@pytest.mark.parametrize("parts", ["send", "text"])
async def test_a_sampled_assistant_image_stays_its_placeholder_and_a_text_model_gets_the_text(
    parts: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """A conversation holding an image the assistant made and a sound the user sent: the sound
    goes as ``input_audio``, as a user's does; the assistant's image is its placeholder in the
    message's text, since neither OpenAI API takes parts on an assistant message (the message
    keeps the part, for a model that does). A model told ``parts="text"`` is sent each message's
    text with its placeholders and no content part, the request it was sent before sampled
    images were given as parts."""
    sampler = ScriptedModel(["Seen."])
    async with OpenAIServer([WireReply(text="A logo and a form.")]) as wire:
        model = wire_model(wire, parts=parts)
        toolset = MCPToolset(server_for("http", http_servers), call_timeout=15, sampling=model)
        async with model, toolset:
            described = await call(toolset, "describe", {"conversation": True})
        (request,) = wire.requests
        async with MCPToolset(server_for("http", http_servers), sampling=sampler) as toolset:
            await call(toolset, "describe", {"conversation": True})
    assert described.content == "description (test-model): A logo and a form."
    sent = request.body["messages"]
    assert sent[:3] == [
        {"role": "system", "content": "You see images."},
        {"role": "user", "content": "Draw a logo."},
        {"role": "assistant", "content": "Here it is:\n[image: image/gif]"},
    ]
    if parts == "text":
        assert sent[3:] == [
            {"role": "user", "content": "[audio: audio/wav]"},
            {"role": "user", "content": "Describe this screenshot.\n[image: image/png]"},
        ]
    else:
        assert sent[3:] == [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "[audio: audio/wav]"},
                    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Describe this screenshot.\n[image: image/png]"},
                    {"type": "image_url", "image_url": {"url": SCREENSHOT_URL}},
                ],
            },
        ]
    # What the model was given, whatever it sends of it: each image and sound as a part.
    (given,) = sampler.requests
    assert [(m.role.value, [p.mime_type for p in m.parts]) for m in given.messages] == [
        ("system", []),
        ("user", []),
        ("assistant", ["image/gif"]),
        ("user", ["audio/wav"]),
        ("user", ["image/png"]),
    ]


async def test_a_sampled_image_is_not_held_to_the_checkpoint_limit(
    http_servers: dict[bool, HTTPServerProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``MAX_PART_BYTES`` is what a checkpoint holds of a part; a server's sampling message is
    in no history, so the model is given an image over it, and a run whose call sampled one
    pauses (its checkpoint saved) as any other."""
    monkeypatch.setattr(codec, "MAX_PART_BYTES", 4)  # the screenshot holds 16 bytes

    @tool(require_approval=True)
    def deploy(version: str) -> str:
        """Deploys ``version``."""
        return f"deployed {version}"

    sampler = ScriptedModel(["A form."])
    toolset = MCPToolset(server_for("stdio", http_servers), call_timeout=15, sampling=sampler)
    calls = [tool_call("describe", {}), tool_call("deploy", {"version": "2"})]
    model = ScriptedModel([Reply(tool_calls=calls), "Done."])
    async with Runner(ReActAgent("agent", model, tools=[toolset, deploy])) as runner:
        paused = await runner.invoke("Look, then deploy 2.")
    assert paused.checkpoint_id is not None
    (given,) = sampler.requests
    (image,) = given.messages[-1].parts
    assert (image.mime_type, len(image.data or b"")) == ("image/png", 16)


@pytest.mark.parametrize("transport", ["stdio", "http-legacy"])
async def test_a_sampling_reply_cut_at_max_tokens_tells_the_server_so(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """The reply's finish reason is the result's stopReason: one cut at the server's max_tokens
    was answered 'endTurn', so the server took a cut completion for a whole one."""
    cut = Message.assistant("Short but")
    cut.metadata["finish_reason"] = "length"
    filtered = Message.assistant("")
    filtered.metadata["finish_reason"] = "content_filter"
    model = ScriptedModel([cut, filtered, "Whole."])
    server = server_for(transport, http_servers)
    async with MCPToolset(server, call_timeout=15, sampling=model) as toolset:
        summaries = [(await call(toolset, "summarize", {"text": "abc"})).content for _ in range(3)]

    assert summaries == [
        "summary (scripted): Short but (stopped: maxTokens)",
        "summary (scripted):  (stopped: content_filter)",
        "summary (scripted): Whole.",
    ]


@pytest.mark.parametrize("transport", ["stdio", "http-legacy"])
async def test_a_sampling_model_asked_for_a_runs_call_counts_in_that_run(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """The server's completions are the run's model calls: their usage is in the run's total,
    they are traced and they count against max_turns, because the model was called on its own, so a server could
    spend the run's model without limit and its tokens were in no total."""
    sampler = ScriptedModel(
        [Reply(text="Short.", usage=Usage(input_tokens=7, output_tokens=2, total_tokens=9))],
        cycle=True,
    )
    toolset = MCPToolset(server_for(transport, http_servers), call_timeout=15, sampling=sampler)
    summarize = tool_call("summarize", {"text": "a long text"})
    agent_usage = Usage(input_tokens=1, output_tokens=1, total_tokens=2)
    model = ScriptedModel(
        [Reply(tool_calls=[summarize], usage=agent_usage), Reply(text="Done.", usage=agent_usage)]
    )
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    agent = ReActAgent("agent", model, tools=[toolset])
    async with Runner(agent, tracer_provider=provider) as runner:
        result = await runner.invoke("Go.")
    assert "agent: [tool summarize] summary (scripted): Short." in simplify_events(result.events)
    assert result.usage == Usage(input_tokens=9, output_tokens=4, total_tokens=13)
    chats = [span for span in exporter.get_finished_spans() if span.name.startswith("chat")]
    assert len(chats) == 3  # the agent's two calls and the server's completion
    # The completion is the agent's call: on its span, so the trace's agent usage sums to the
    # run's (it was on no span, the tool call's frame keeping it).
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent agent"]
    assert span.attributes is not None
    assert (
        span.attributes["gen_ai.usage.input_tokens"],
        span.attributes["gen_ai.usage.output_tokens"],
    ) == (9, 4)
    provider.shutdown()

    # two turns: the agent's first call, then the server's completion, refused a third
    model = ScriptedModel([Reply(tool_calls=[summarize]), "Done."])
    async with Runner(ReActAgent("agent", model, tools=[toolset])) as runner:
        with pytest.raises(MaxTurnsExceeded):
            await runner.invoke("Go.", max_turns=2)
    assert len(sampler.requests) == 2  # the first run's, and the second run's within its limit
    await toolset.aclose()


@pytest.mark.parametrize("traced", [False, True])
async def test_a_sampling_model_asked_for_an_agents_call_goes_through_the_agents_own_callbacks(
    traced: bool, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """The server's completion for an agent's call is a model call of that agent's (its context
    is the call's): the agent's own before_model callback sees it, traced or not. Traced, the
    tool call's context pointed at a frame of its own, without the agent's callbacks, so turning
    tracing on changed which callbacks ran: a guardrail on the agent let the completion by."""
    asked: list[tuple[str, str]] = []

    def before_model(ctx: RunContext, request: ModelRequest) -> None:
        asked.append((ctx.agent_name, request.model.model_name))

    sampler = ScriptedModel(["Short."], cycle=True, model_name="sampler")
    toolset = MCPToolset(server_for("stdio", http_servers), call_timeout=15, sampling=sampler)
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("summarize", {"text": "a long text"})]), "Done."],
        model_name="agent-model",
    )
    own = [Callbacks(before_model=before_model)]
    agent = ReActAgent("agent", model, tools=[toolset], callbacks=own)
    provider = TracerProvider() if traced else None
    async with toolset, Runner(agent, tracer_provider=provider) as runner:
        result = await runner.invoke("Go.")
    assert "agent: [tool summarize] summary (sampler): Short." in simplify_events(result.events)
    assert asked == [("agent", "agent-model"), ("agent", "sampler"), ("agent", "agent-model")]
    if provider is not None:
        provider.shutdown()


async def test_a_sampling_request_keeps_the_servers_options_over_the_runs(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """The run option ``"model_options"`` is merged over its agents' model calls (ReActAgent,
    ``ctx.generate``, the chat action), not over a server's sampling request, which asks for
    its own ``max_tokens`` and temperature: taken through ``ctx.generate`` it got the run's
    settings (a ``max_tokens`` of 5 cut the server's 50-token summary)."""
    sampler = ScriptedModel(["Short."], cycle=True)
    toolset = MCPToolset(server_for("stdio", http_servers), call_timeout=15, sampling=sampler)
    summarize = tool_call("summarize", {"text": "a long text"})
    model = ScriptedModel([Reply(tool_calls=[summarize]), "Done."])
    async with Runner(ReActAgent("agent", model, tools=[toolset])) as runner:
        run_options = {"model_options": {"max_tokens": 5, "temperature": 1.5}}
        assert (await runner.invoke("Go.", options=run_options)).text == "Done."
    await toolset.aclose()
    assert [r.options for r in model.requests] == [ModelOptions(max_tokens=5, temperature=1.5)] * 2
    assert [r.options for r in sampler.requests] == [ModelOptions(max_tokens=50)]


class _FailingModel:
    model_name = "failing"

    async def generate(self, messages: Any, *, tools: Any = (), options: Any = None) -> Any:
        raise ModelError("rate limited", status=429)

    def stream(self, messages: Any, *, tools: Any = (), options: Any = None) -> Any:
        raise NotImplementedError


async def test_a_failing_sampling_model_is_an_error_the_server_handles_and_the_model_reads(
    http_servers: dict[bool, HTTPServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    async with MCPToolset(server_for("stdio", http_servers), sampling=_FailingModel()) as toolset:
        summary = await call(toolset, "summarize", {"text": "a long text"})
        after = await call(toolset, "add", {"a": 1, "b": 2})

    assert summary.is_error
    assert summary.content == (
        "Error: tool 'summarize' failed: the client's model failed: ModelError: rate limited"
    )
    assert after.content == "3"
    assert "MCP sampling request failed: ModelError: rate limited" in caplog.text


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_sampling_or_elicitation_answer_no_transport_can_carry_is_an_error_answer(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    # A lone surrogate ("\\ud800", which a model may write escaped in its JSON) cannot be
    # encoded as UTF-8: sent, it ended the session, the call reading a lost connection.
    def elicit(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content={"date": "May \ud800"})

    model = ScriptedModel(["bad \ud800 text", "fine"])
    server = server_for(transport, http_servers)
    async with MCPToolset(server, call_timeout=15, sampling=model, elicitation=elicit) as toolset:
        summary = await call(toolset, "summarize", {"text": "abc"})
        booked = await call(toolset, "book", {"destination": "Oslo"})
        again = await call(toolset, "summarize", {"text": "abc"})
        opened = toolset._session.connections_opened

    assert summary.is_error
    assert "the client's model's answer cannot be sent: it holds a lone surrogate" in (
        summary.content
    )
    assert booked.is_error
    assert "the client's elicitation handler's answer cannot be sent" in booked.content
    assert again.content == "summary (scripted): fine"
    assert opened == 1


async def test_an_elicitation_answer_holding_nan_is_an_error_answer_not_null(
    http_servers: dict[bool, HTTPServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    """NaN and infinities are no JSON numbers: an answer holding one was sent with null in its
    place (the person's value lost, the server reading 'not given' or failing its own check on a
    null). It is an error answer naming where, as a lone surrogate is; the session goes on."""
    answers = iter([{"date": "May 2", "nights": float("nan")}, {"date": "May 2"}])

    def elicit(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        return ElicitResult(action="accept", content=next(answers))

    async with MCPToolset(server_for("stdio", http_servers), elicitation=elicit) as toolset:
        booked = await call(toolset, "book", {"destination": "Oslo"})
        again = await call(toolset, "book", {"destination": "Oslo"})

    assert booked.is_error
    assert (
        "the client's elicitation handler's answer cannot be sent: it holds nan at "
        "content.nights, not a finite number, which JSON cannot carry"
    ) in booked.content, booked.content
    assert "content.nights" in caplog.text
    assert again.content == "booked Oslo on May 2"


async def test_an_answer_holding_nan_in_a_set_or_as_a_key_is_an_error_answer_not_null(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """A python dump keeps a set (and a float key, or a tuple key holding one) as it is, where
    pydantic writes the set as a list with null for a NaN and the key as "None" ("1.0,None" for
    a tuple's): the walk for NaN goes into both, as into a list (not_finite_at, before
    adk._nonfinite.nonfinite_at, walked dicts' values, lists and tuples only, and these answers
    reached the server with null). One connection, the module's server: each refused answer is
    the error of its call alone."""
    cases = [
        ({"tried": {float("inf")}}, "it holds inf at _meta.tried, "),
        ({"seen": frozenset([2.0, float("nan")])}, "it holds nan at _meta.seen, "),
        ({"by": {float("nan"): "x"}}, "it holds nan at _meta.by (as a key), "),
        # pydantic writes a tuple key as its items joined, a NaN in it as "None": "1.0,None"
        ({"at": {(1.0, float("inf")): "x"}}, "it holds inf at _meta.at (as a key), "),
    ]
    answers = iter([meta for meta, _ in cases] + [None])

    def elicit(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        held = next(answers)
        return ElicitResult(
            action="accept",
            content={"date": "May 2"},
            **({} if held is None else {"_meta": held}),  # type: ignore[arg-type]
        )

    async with MCPToolset(server_for("http", http_servers), elicitation=elicit) as toolset:
        refused = [await call(toolset, "book", {"destination": "Oslo"}) for _ in cases]
        again = await call(toolset, "book", {"destination": "Oslo"})

    for result, (_, where) in zip(refused, cases, strict=True):
        assert result.is_error
        assert f"the client's elicitation handler's answer cannot be sent: {where}" in (
            result.content
        ), result.content
    assert again.content == "booked Oslo on May 2"


@pytest.mark.parametrize("transport", ["stdio", "stdio-legacy"])
async def test_sampling_options_a_model_cannot_take_are_an_error_the_server_handles(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    model = ScriptedModel(["never"])
    server = server_for(transport, http_servers)
    async with MCPToolset(server, call_timeout=15, sampling=model) as toolset:
        summary = await call(toolset, "summarize", {"text": "abc", "temperature": -1})
        after = await call(toolset, "add", {"a": 1, "b": 2})

    assert summary.is_error
    assert "the client's model failed: ValidationError: 1 validation error for ModelOptions " in (
        summary.content
    )
    assert "temperature Input should be greater than or equal to 0" in summary.content
    assert model.requests == []
    assert after.content == "3"


async def test_a_sampling_function_answers_the_server_too(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    def sample(ctx: ToolContext | None, params: CreateMessageRequestParams) -> CreateMessageResult:
        (message,) = params.messages
        text = message.content.text  # type: ignore[union-attr]
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=text.upper()), model="upper"
        )

    async with MCPToolset(server_for("http", http_servers), sampling=sample) as toolset:
        summary = await call(toolset, "summarize", {"text": "abc"})
    assert summary.content == "summary (upper): SUMMARIZE: ABC"


# -- sampling with tools (SEP-1577) ---------------------------------------------------------------
FORECAST_PARAMETERS = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@pytest.mark.parametrize("transport", ["stdio-legacy", "http-legacy"])
async def test_a_server_runs_an_agent_loop_with_the_clients_model_proposing_its_tools_calls(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """A server offering its tool with its sampling request: the client's model (on the OpenAI
    wire) is offered it under a name the API takes (``forecast.today`` -> ``forecast_today``),
    proposes a call, which the server gets as a ``tool_use`` block by its own name and runs (pyadk
    runs nothing), and the server's next request, holding its ``tool_result``, reaches the model
    as the assistant's ``tool_calls`` and the tool message answering them, by id. The client had
    not declared ``sampling.tools``, so the server refused to send tools at all."""
    script = [
        WireReply(tool_calls=[WireCall("forecast_today", '{"city": "Oslo"}', id="call_a")]),
        WireReply(text="Sunny in Oslo."),
    ]
    async with OpenAIServer(script) as wire:
        model = wire_model(wire)
        toolset = MCPToolset(server_for(transport, http_servers), call_timeout=15, sampling=model)
        async with model, toolset:
            answer = await call(toolset, "weather_agent", {"question": "Weather in Oslo?"})
        first, second = wire.requests
    assert (answer.is_error, answer.content) == (False, "Sunny in Oslo. (endTurn, 3 messages)")
    offered = [
        {
            "type": "function",
            "function": {
                "name": "forecast_today",
                "description": "Today's forecast for a city.",
                "parameters": FORECAST_PARAMETERS,
            },
        }
    ]
    assert first.body["tools"] == offered and first.body["tool_choice"] == "auto"
    assert first.body["messages"] == [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "Weather in Oslo?"},
    ]
    assert second.body["tools"] == offered
    proposed = second.body["messages"][2]
    assert proposed["role"] == "assistant" and not proposed.get("content")
    assert proposed["tool_calls"] == [
        {
            "id": "call_a",
            "type": "function",
            "function": {"name": "forecast_today", "arguments": '{"city": "Oslo"}'},
        }
    ]
    assert second.body["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_a",
        "content": "forecast.today: sunny in Oslo",
    }
    assert len(second.body["messages"]) == 4


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_sampled_tool_call_reaches_the_server_as_tool_use_in_both_eras(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """One sampling request with a tool the model must call (``tool_choice`` ``required``): the
    model is offered the tool with that choice, and its text and call are answered as a text
    block and a ``tool_use`` block with ``stopReason`` ``toolUse``, through a 2026-07-28 input
    round as through a handshake-era request."""
    model = ScriptedModel(
        [Reply("Checking.", tool_calls=[tool_call("forecast_today", {"city": "Rome"}, id="c1")])]
    )
    async with MCPToolset(server_for(transport, http_servers), sampling=model) as toolset:
        picked = await call(toolset, "pick_city", {"question": "Where is it sunny?"})
    assert picked.content == "toolUse: forecast.today({'city': 'Rome'}) id=c1"
    (request,) = model.requests
    assert list(request.tools) == [
        ToolSpec(
            name="forecast_today",
            description="Today's forecast for a city.",
            parameters=FORECAST_PARAMETERS,
        )
    ]
    assert request.options is not None and request.options.tool_choice == "required"


async def test_a_sampled_tool_without_arguments_is_offered_with_properties(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """A server's tool taking no arguments, its schema ``{"type": "object"}`` (MCP needs no
    ``properties``): OpenAI refuses an object schema without ``properties`` ('object schema
    missing properties', HTTP 400), so the request failed where the toolset's own listing of such
    a tool adds them. A sampling request's tools are offered as the toolset offers its own."""
    model = ScriptedModel([Reply(tool_calls=[tool_call("clock_now", {}, id="c1")])])
    server = server_for("stdio-legacy", http_servers)
    async with MCPToolset(server, sampling=model) as toolset:
        picked = await call(toolset, "pick_city", {"question": "Time?", "offer": "clock"})
    assert picked.content == "toolUse: clock.now({}) id=c1"
    (request,) = model.requests
    assert [(spec.name, spec.parameters) for spec in request.tools] == [
        ("clock_now", {"type": "object", "properties": {}})
    ]


async def test_two_sampled_tools_whose_names_are_made_fit_alike_keep_their_own_calls(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """``forecast.today`` and ``forecast_today`` offered together: the second keeps its name, the
    first is given a hashed one, and the model's call of each reaches the server by its own
    name (parallel calls, in the model's order)."""
    hashed = "forecast_today_" + hashlib.sha256(b"forecast.today").hexdigest()[:8]
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call(hashed, {"city": "Oslo"}, id="c1"),
                    tool_call("forecast_today", {"city": "Rome"}, id="c2"),
                ]
            )
        ]
    )
    server = server_for("stdio-legacy", http_servers)
    async with MCPToolset(server, sampling=model) as toolset:
        picked = await call(toolset, "pick_city", {"question": "?", "offer": "both_forecasts"})
    assert picked.content == (
        "toolUse: forecast.today({'city': 'Oslo'}) id=c1; forecast_today({'city': 'Rome'}) id=c2"
    )
    (request,) = model.requests
    assert [spec.name for spec in request.tools] == [hashed, "forecast_today"]


class _NoIdsModel:
    """A model of one's own proposing calls without ids."""

    model_name = "no-ids"

    async def generate(self, messages: Any, *, tools: Any = (), options: Any = None) -> Any:
        calls = [ToolCall(id="", name="forecast_today", arguments='{"city": "Rome"}')]
        return Message.assistant(tool_calls=calls)

    def stream(self, messages: Any, *, tools: Any = (), options: Any = None) -> Any:
        raise NotImplementedError


async def test_a_sampled_call_without_an_id_is_given_one_the_server_can_answer_by(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """A ``tool_use`` block's id is how the server's ``tool_result`` answers it; a model leaving
    its call's out is given one (as the OpenAI adapters give theirs), since a call with an empty
    id came back in a ``tool_result`` that could be matched to nothing."""
    async with MCPToolset(
        server_for("stdio-legacy", http_servers), sampling=_NoIdsModel()
    ) as toolset:
        picked = await call(toolset, "pick_city", {"question": "Where?"})
    assert picked.content == "toolUse: forecast.today({'city': 'Rome'}) id=call_0"


async def test_parallel_sampled_calls_sharing_an_id_are_told_apart_for_the_servers_next_request(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """A model server numbering every call of a reply ``call_0`` (the tool executor's
    ``unique_call_ids`` is there for them): its two parallel calls went to the server as two
    ``tool_use`` blocks of one id, which the server answered and sent back, and the client refused
    its own reply in the next request ('two tool_use blocks have id'), ending the server's loop. A
    repeated id is made the call's own, ``<id>-<place>``, as a ``ReActAgent``'s is."""
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("forecast_today", {"city": "Oslo"}, id="call_0"),
                    tool_call("forecast_today", {"city": "Rome"}, id="call_0"),
                ]
            ),
            "Sunny in both.",
        ]
    )
    server = server_for("stdio-legacy", http_servers)
    async with MCPToolset(server, call_timeout=15, sampling=model) as toolset:
        answer = await call(toolset, "weather_agent", {"question": "Oslo and Rome?"})
    assert (answer.is_error, answer.content) == (False, "Sunny in both. (endTurn, 3 messages)")
    _, second = model.requests
    (proposed,) = [m for m in second.messages if m.tool_calls]
    assert [c.id for c in proposed.tool_calls] == ["call_0", "call_0-1"]
    assert [(m.tool_call_id, m.content) for m in second.messages if m.role == "tool"] == [
        ("call_0", "forecast.today: sunny in Oslo"),
        ("call_0-1", "forecast.today: sunny in Rome"),
    ]


async def test_sampled_call_ids_stay_unique_across_the_rounds_of_one_conversation(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """A server running its agent loop keeps the whole conversation and sends it back each
    round: a model server numbering each reply's calls from ``call_0`` (or a model giving no id,
    made ``call_<place>``) gave the second round's call the first's id, so the third request held
    two ``tool_use`` blocks and two ``tool_result`` blocks of one id (a model API such as
    Anthropic's refuses a conversation repeating a tool_use id, and a server keying results by id
    mixes them up). An id taken earlier in the request is made the call's own, as within a
    reply."""
    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("forecast_today", {"city": "Oslo"}, id="call_0")]),
            Reply(tool_calls=[tool_call("forecast_today", {"city": "Rome"}, id="call_0")]),
            "Sunny in both.",
        ]
    )
    server = server_for("stdio-legacy", http_servers)
    async with MCPToolset(server, call_timeout=15, sampling=model) as toolset:
        answer = await call(toolset, "weather_agent", {"question": "Oslo, then Rome?"})
    assert (answer.is_error, answer.content) == (False, "Sunny in both. (endTurn, 5 messages)")
    third = model.requests[2]
    ids = [c.id for m in third.messages for c in m.tool_calls]
    assert ids == ["call_0", "call_0-0"]
    assert [(m.tool_call_id, m.content) for m in third.messages if m.role == "tool"] == [
        ("call_0", "forecast.today: sunny in Oslo"),
        ("call_0-0", "forecast.today: sunny in Rome"),
    ]


async def test_a_sampled_call_with_arguments_that_are_no_object_is_an_error_answer(
    http_servers: dict[bool, HTTPServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    """A ``tool_use`` block's input is an object; a model proposing a call with other arguments
    (text that is not JSON) is an error answer naming them, which the server handles."""
    model = ScriptedModel([Reply(tool_calls=[tool_call("forecast_today", "{Rome", id="c1")])])
    async with MCPToolset(server_for("stdio-legacy", http_servers), sampling=model) as toolset:
        picked = await call(toolset, "pick_city", {"question": "Where?"})
    assert picked.is_error
    assert (
        "the client's model failed: it proposed a call of 'forecast_today' whose arguments are "
        "not a JSON object: '{Rome'" in picked.content
    )


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        ('{"city": "Rome", "days": NaN}', "NaN is not a finite number, which JSON cannot carry"),
        ('{"city": "Rome", "days": 1e400}', "1e400 is not a finite number"),
        ('{"city": "Rome\\ud800"}', "arguments hold '\\ud800', a lone surrogate"),
        # JSON objects json.loads cannot read: called 'not a JSON object' (the reply read again
        # with a bare json.loads), and the integer in Python's words ('use
        # sys.set_int_max_str_digits() to increase the limit').
        (
            '{"city": "Rome", "days": 1' + "0" * 5000 + "}",
            "arguments hold an integer of 5001 digits",
        ),
        (
            '{"city": "Rome", "d": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "arguments are nested too deeply to be read",
        ),
    ],
    ids=["nan", "inf", "surrogate", "long-int", "too-deep-to-read"],
)
async def test_a_sampled_call_whose_arguments_no_transport_carries_is_an_error_answer(
    arguments: str, why: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """A model's call bound for an MCP server is refused when its arguments hold what JSON
    cannot carry, as a call of an MCP tool is (``adk.mcp._sendable.parse_arguments``);
    proposed in a sampling reply, NaN and 1e400 reached the server as null (``days: None``),
    the model's value lost without a word, and a lone surrogate refused the reply for 'it
    holds a lone surrogate', naming neither the call nor the value."""
    model = ScriptedModel([Reply(tool_calls=[tool_call("forecast_today", arguments, id="c1")])])
    async with MCPToolset(server_for("http", http_servers), sampling=model) as toolset:
        picked = await call(toolset, "pick_city", {"question": "Where?"})
    assert picked.is_error, picked.content
    said = "the client's model failed: it proposed a call of 'forecast_today' whose arguments"
    assert f"{said} cannot be sent: {why}" in picked.content, picked.content


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        (
            "orphan_result",
            "message 2: a tool_result for 'call_9' answers no tool_use of the message before it",
        ),
        (
            "wrong_id",
            "message 3: a tool_result for 'call_9' answers no tool_use of the message before it",
        ),
        (
            "twice",
            "message 3: two tool_result blocks answer the tool_use 'call_1'",
        ),
        ("empty_id", "message 2: a tool_use of 'forecast.today' has no id"),
        (
            "unanswered",
            "message 2: tool_use 'call_1' (forecast.today) not answered by a tool_result in the "
            "next message",
        ),
    ],
)
async def test_a_sampling_request_whose_tool_blocks_do_not_pair_up_is_refused_with_the_reason(
    case: str, reason: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """A server (not one the ``mcp`` package checks) sending a ``tool_result`` that answers no
    call, or a call with no id, or one left unanswered: the server gets an error answer (invalid
    params) saying which message is wrong, and the model is not called, since its API would
    refuse the conversation in words about a request the server never saw."""
    model = ScriptedModel(["never asked"])
    async with MCPToolset(server_for("stdio-legacy", http_servers), sampling=model) as toolset:
        answer = await call(toolset, "sample_raw", {"case": case})
        # The connection serves on: the same server's well-formed request is answered.
        summary = await call(toolset, "summarize", {"text": "abc"})
    assert answer.content == (
        f"refused (-32602): the client cannot send this sampling request to its model: {reason}"
    )
    assert summary.content == "summary (scripted): never asked"
    assert len(model.requests) == 1


async def test_sampling_tools_are_declared_for_a_model_and_for_a_function_that_says_so(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """A server sends tools only to a client declaring ``sampling.tools``: a ``ChatModel`` is
    declared by default (``sampling_tools=False`` keeps a model without tool calling from being
    given them), a function only when told ``sampling_tools=True``, and then it gets the
    request as it is (``tools``, ``tool_choice``, the ``tool_result`` blocks) and may answer
    with ``tool_use`` blocks."""
    seen: list[CreateMessageRequestParams] = []

    def sample(ctx: ToolContext | None, params: CreateMessageRequestParams) -> Any:
        seen.append(params)
        if len(seen) == 1:
            use = ToolUseContent(
                type="tool_use", id="f1", name="forecast.today", input={"city": "Lima"}
            )
            return CreateMessageResultWithTools(
                role="assistant", content=[use], model="fn", stop_reason="toolUse"
            )
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="Sunny."), model="fn"
        )

    server = server_for("stdio-legacy", http_servers)
    async with MCPToolset(server, sampling=sample) as toolset:
        plain = await call(toolset, "weather_agent", {"question": "Lima?"})
    async with MCPToolset(server, sampling=ScriptedModel(["x"]), sampling_tools=False) as toolset:
        refused = await call(toolset, "weather_agent", {"question": "Lima?"})
    for undeclared in (plain, refused):
        assert undeclared.is_error
        assert "Client does not support sampling tools capability" in undeclared.content
    assert seen == []

    async with MCPToolset(server, sampling=sample, sampling_tools=True) as toolset:
        answer = await call(toolset, "weather_agent", {"question": "Lima?"})
    assert answer.content == "Sunny. (None, 3 messages)"
    first, second = seen
    assert [tool.name for tool in first.tools or ()] == ["forecast.today"]
    assert first.tool_choice is not None and first.tool_choice.mode == "auto"
    (result,) = second.messages[2].content_as_list
    assert isinstance(result, ToolResultContent) and result.tool_use_id == "f1"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_failing_handler_is_an_error_the_server_handles_in_both_eras(
    transport: str, http_servers: dict[bool, HTTPServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    """A handler that raises answers the server with an error naming the handler, as a failing
    sampling model does, and is logged: a 2026-07-28 call's input round raised it out of the call
    (the model read "tool 'book' failed: RuntimeError: ...", nothing logged), a handshake-era one
    sent the bare message; the session goes on."""

    async def ask_user(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        raise RuntimeError("the question desk is down")

    def sample(ctx: ToolContext | None, params: CreateMessageRequestParams) -> CreateMessageResult:
        raise LookupError("no model\nfor this user")

    server = server_for(transport, http_servers)
    with caplog.at_level(logging.WARNING, logger="adk.mcp"):
        async with MCPToolset(
            server, call_timeout=15, elicitation=ask_user, sampling=sample
        ) as toolset:
            booked = await call(toolset, "book", {"destination": "Oslo"})
            summary = await call(toolset, "summarize", {"text": "abc"})
            after = await call(toolset, "add", {"a": 1, "b": 2})

    assert (booked.is_error, booked.content) == (
        True,
        "Error: tool 'book' failed: the client's elicitation handler failed: "
        "RuntimeError: the question desk is down",
    )
    assert (summary.is_error, summary.content) == (
        True,
        "Error: tool 'summarize' failed: the client's sampling handler failed: "
        "LookupError: no model for this user",
    )
    assert after.content == "3"
    logged = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
    assert logged == [
        "the MCP elicitation handler failed: RuntimeError: the question desk is down",
        "the MCP sampling handler failed: LookupError: no model for this user",
    ]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_handlers_are_told_which_call_asks_where_the_transport_says(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """A service puts a server's question to the person whose run made the call. A handshake-era
    stdio server's request names no call: None, never another call's context."""
    asked: dict[str, str | None] = {}

    def ask_user(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        asked["elicitation"] = None if ctx is None else f"{ctx.run_id} {ctx.tool_call_id}"
        return ElicitResult(action="accept", content={"date": "2027-01-02"})

    def sample(ctx: ToolContext | None, params: CreateMessageRequestParams) -> CreateMessageResult:
        asked["sampling"] = None if ctx is None else f"{ctx.run_id} {ctx.tool_call_id}"
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="ok"), model="m"
        )

    toolset = MCPToolset(
        server_for(transport, http_servers), call_timeout=15, elicitation=ask_user, sampling=sample
    )
    calls = [tool_call("book", {"destination": "Oslo"}), tool_call("summarize", {"text": "t"})]
    model = ScriptedModel([Reply(tool_calls=calls), "Done."])
    async with Runner(ReActAgent("agent", model, tools=[toolset])) as runner:
        result = await runner.invoke("Go.", run_id="run-7")

    assert "agent: [tool book] booked Oslo on 2027-01-02" in simplify_events(result.events)
    if transport == "stdio-legacy":
        assert asked == {"elicitation": None, "sampling": None}
    else:
        assert asked == {"elicitation": "run-7 call_1", "sampling": "run-7 call_2"}


async def test_a_question_that_names_no_call_is_answered_outside_any_trace() -> None:
    """The session's handshake is made in the trace context of whoever opened it (here the
    agent listing its tools, under a traced run), so the tasks the mcp client starts as it
    connects, among them the reader that hands a server's requests to the handlers, keep that
    context: a handshake-era stdio server's question names no call and belongs to no run, so
    its handler (and the spans it starts, a model SDK's, the user's own) must not find that run's
    span current."""
    provider = TracerProvider()
    current: dict[str, bool] = {}

    def ask_user(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        assert ctx is None  # the pipe is shared: no call
        current["elicitation"] = otel_trace.get_current_span().get_span_context().is_valid
        return ElicitResult(action="accept", content={"date": "2027-01-02"})

    def sample(ctx: ToolContext | None, params: CreateMessageRequestParams) -> CreateMessageResult:
        current["sampling"] = otel_trace.get_current_span().get_span_context().is_valid
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="ok"), model="m"
        )

    toolset = MCPToolset(
        server_for("stdio-legacy", {}), call_timeout=15, elicitation=ask_user, sampling=sample
    )
    calls = [tool_call("book", {"destination": "Oslo"}), tool_call("summarize", {"text": "t"})]
    model = ScriptedModel([Reply(tool_calls=calls), "Done."])
    agent = ReActAgent("agent", model, tools=[toolset])
    async with Runner(agent, tracer_provider=provider) as runner:  # opened by the run
        result = await runner.invoke("Go.")
    assert "agent: [tool book] booked Oslo on 2027-01-02" in simplify_events(result.events)
    assert current == {"elicitation": False, "sampling": False}
    provider.shutdown()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_two_calls_asking_at_once_each_get_their_own_context(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    """Two calls of one round on one session, each question waiting until both are asked: each
    handler is given its own call's context (the test above has its calls ask different handlers,
    not necessarily at once)."""
    asked: list[tuple[str, str | None]] = []
    both = asyncio.Event()

    async def ask_user(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        asked.append((params.message, None if ctx is None else ctx.tool_call_id))
        if len(asked) == 2:
            both.set()
        await both.wait()  # bounded by the call_timeout
        day = "01" if "Oslo" in params.message else "02"
        return ElicitResult(action="accept", content={"date": f"2027-01-{day}"})

    toolset = MCPToolset(server_for(transport, http_servers), call_timeout=15, elicitation=ask_user)
    calls = [tool_call("book", {"destination": "Oslo"}), tool_call("book", {"destination": "Rome"})]
    model = ScriptedModel([Reply(tool_calls=calls), "Done."])
    async with Runner(ReActAgent("agent", model, tools=[toolset])) as runner:
        result = await runner.invoke("Go.")

    events = simplify_events(result.events)
    assert "agent: [tool book] booked Oslo on 2027-01-01" in events
    assert "agent: [tool book] booked Rome on 2027-01-02" in events
    legacy_stdio = transport == "stdio-legacy"
    assert sorted(asked) == [
        ("When do you want to travel to Oslo?", None if legacy_stdio else "call_1"),
        ("When do you want to travel to Rome?", None if legacy_stdio else "call_2"),
    ]


async def test_a_server_first_used_from_a_handler_does_not_take_that_call_for_its_own(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """A handler of one server's question that starts another server (a handshake-era stdio one,
    whose requests name no call) did so inside the asking call: the new connection's tasks
    carried that call's context, and the second server's questions were put to its person."""
    asked: list[str | None] = []

    def ask_b(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        asked.append(None if ctx is None else ctx.tool_call_id)
        return ElicitResult(action="accept", content={"date": "2027-03-04"})

    b = MCPToolset(server_for("stdio-legacy", http_servers), call_timeout=15, elicitation=ask_b)

    async def ask_a(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        assert ctx is not None and ctx.tool_call_id == "call_1"
        await b.tools()  # b connects here, inside call_1's request
        return ElicitResult(action="accept", content={"date": "2027-01-02"})

    a = MCPToolset(server_for("http", http_servers), call_timeout=15, elicitation=ask_a)
    model = ScriptedModel([Reply(tool_calls=[tool_call("book", {"destination": "Oslo"})]), "ok"])
    async with Runner(ReActAgent("agent", model, tools=[a])) as runner, b:
        await runner.invoke("Go.")
        assert (await call(b, "book", {"destination": "Rome"})).content == (
            "booked Rome on 2027-03-04"
        )
    assert asked == [None]


async def test_a_request_made_from_a_handler_is_not_taken_for_the_asking_call(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """A prompt rendered by a handler of a call's question asks a question of its own (over
    HTTP, on the prompt request's stream): it was put to the person of the call."""
    asked: list[str | None] = []

    def ask_b(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        asked.append(None if ctx is None else ctx.tool_call_id)
        return ElicitResult(action="accept", content={"date": "2027-03-04"})

    b = MCPToolset(server_for("http-legacy", http_servers), call_timeout=15, elicitation=ask_b)
    rendered: list[str] = []

    async def ask_a(ctx: ToolContext | None, params: ElicitRequestParams) -> ElicitResult:
        assert ctx is not None and ctx.tool_call_id == "call_1"
        (trip,) = [prompt for prompt in await b.prompts() if prompt.name == "trip"]
        rendered.extend(message.content for message in await trip.render())
        return ElicitResult(action="accept", content={"date": "2027-01-02"})

    a = MCPToolset(server_for("http", http_servers), call_timeout=15, elicitation=ask_a)
    model = ScriptedModel([Reply(tool_calls=[tool_call("book", {"destination": "Oslo"})]), "ok"])
    async with Runner(ReActAgent("agent", model, tools=[a])) as runner, b:
        await runner.invoke("Go.")
    assert rendered == ["Plan a trip on 2027-03-04."]
    assert asked == [None]


# -- progress and log messages -------------------------------------------------------------------
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_progress_of_a_call_reaches_on_progress_with_the_calls_context(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    reports: list[tuple[str, MCPProgress]] = []

    def on_progress(ctx: ToolContext | None, progress: MCPProgress) -> None:
        assert ctx is not None
        reports.append((ctx.tool_call_id, progress))

    toolset = MCPToolset(
        server_for(transport, http_servers), prefix="demo", call_timeout=15, on_progress=on_progress
    )
    model = ScriptedModel([Reply(tool_calls=[tool_call("demo_work", {"steps": 2})]), "Done."])
    async with Runner(ReActAgent("worker", model, tools=[toolset])) as runner:
        result = await runner.invoke("Work.")

    # The server was asked for progress (a progress token) only because a handler was given.
    assert "worker: [tool demo_work] did 2 steps (progress asked)" in simplify_events(result.events)
    assert reports == [
        ("call_1", MCPProgress("demo_work", 1.0, 2.0, "step 1 of 2")),
        ("call_1", MCPProgress("demo_work", 2.0, 2.0, "step 2 of 2")),
    ]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_without_a_progress_handler_the_server_is_not_asked_for_progress(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    async with MCPToolset(server_for(transport, http_servers), call_timeout=15) as toolset:
        assert (await call(toolset, "work", {"steps": 1})).content == "did 1 steps"


async def test_a_failing_progress_handler_is_logged_and_the_call_goes_on(
    http_servers: dict[bool, HTTPServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    def on_progress(ctx: ToolContext | None, progress: MCPProgress) -> None:
        raise RuntimeError("display is gone")

    server = server_for("stdio", http_servers)
    async with MCPToolset(server, on_progress=on_progress) as toolset:
        result = await call(toolset, "work", {"steps": 1})
    assert result.content == "did 1 steps (progress asked)"
    assert "the on_progress handler failed for tool 'work'" in caplog.text


async def test_progress_holding_nan_or_an_infinity_is_reported_without_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server that does not follow MCP sends ``NaN`` and ``1e999`` in its progress
    (tests/mcp_servers/raw_progress_server.py): ``report_progress`` raised inside the ``mcp``
    client's callback, which logged an ERROR traceback and dropped the report, on_progress's
    too. Now the caller gets the report without the non-finite number, with one warning for
    the call, and on_progress gets it as the server sent it."""
    handed: list[MCPProgress] = []

    def on_progress(ctx: ToolContext | None, progress: MCPProgress) -> None:
        handed.append(progress)

    server = StdioServer(sys.executable, [str(RAW_PROGRESS_SCRIPT)])
    toolset = MCPToolset(server, call_timeout=15, on_progress=on_progress)
    model = ScriptedModel([Reply(tool_calls=[tool_call("count", {})]), "Done."])
    with caplog.at_level(logging.WARNING):
        async with Runner(ReActAgent("counter", model, tools=[toolset])) as runner:
            result = await runner.invoke("Count.")

    shown = [e.output.custom for e in result.events if e.output is not None and e.output.custom]
    assert [(p.progress, p.total, p.message) for p in shown] == [
        (None, 2.0, "counting"),
        (1.0, None, "halfway"),
        (2.0, 2.0, "done"),
    ]
    assert [(p.progress != p.progress, p.total, p.message) for p in handed[:1]] == [
        (True, 2.0, "counting")
    ]
    assert handed[1:] == [
        MCPProgress("count", 1.0, float("inf"), "halfway"),
        MCPProgress("count", 2.0, 2.0, "done"),
    ]
    assert result.output is not None and result.output.content == "Done."
    warnings = [r for r in caplog.records if r.name == "adk.mcp" and "not finite" in r.message]
    assert len(warnings) == 1 and "tool 'count'" in warnings[0].message
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_server_log_messages_go_to_the_adk_mcp_server_logger_from_the_level_asked(
    transport: str, http_servers: dict[bool, HTTPServerProcess], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="adk.mcp.server")
    server = server_for(transport, http_servers)

    def logged() -> list[tuple[int, str]]:
        records = [r for r in caplog.records if r.name == "adk.mcp.server"]
        caplog.clear()
        return [(r.levelno, r.getMessage()) for r in records]

    async with MCPToolset(server, call_timeout=15) as toolset:  # not asked: none
        await call(toolset, "work", {"steps": 1})
    assert logged() == []

    async with MCPToolset(server, call_timeout=15, log_level="info") as toolset:
        await call(toolset, "work", {"steps": 2})
    assert logged() == [
        (logging.INFO, f"MCP server '{server} (worker)': finished step 1"),
        (logging.INFO, f"MCP server '{server} (worker)': finished step 2"),
    ]

    async with MCPToolset(server, call_timeout=15, log_level="debug") as toolset:
        await call(toolset, "work", {"steps": 1})
    assert [level for level, _ in logged()] == [logging.DEBUG, logging.INFO]

    # Python's spelling of a level's name is that level: "INFO" was refused, as MCP spells it
    # "info".
    async with MCPToolset(server, call_timeout=15, log_level="INFO") as toolset:  # type: ignore[arg-type]
        await call(toolset, "work", {"steps": 1})
    assert [level for level, _ in logged()] == [logging.INFO]


async def test_handlers_and_log_levels_that_cannot_work_are_refused() -> None:
    server = StdioServer(sys.executable, [str(STDIO_SCRIPT)])
    with pytest.raises(ValueError, match="log_level must be None or one of debug, info"):
        MCPToolset(server, log_level="verbose")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"got 30 \(for Python's level WARNING, write 'warning'\)"):
        MCPToolset(server, log_level=logging.WARNING)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_progress must be a function or None"):
        MCPToolset(server, on_progress="print")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="elicitation must be a function or None"):
        MCPToolset(server, elicitation=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sampling must be a ChatModel, a function or None"):
        MCPToolset(server, sampling=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"sampling_tools=True needs sampling= \(a ChatModel"):
        MCPToolset(server, sampling_tools=True)
    with pytest.raises(TypeError, match="sampling_tools must be a bool or None, got str"):
        MCPToolset(server, sampling=ScriptedModel(["x"]), sampling_tools="yes")  # type: ignore[arg-type]


# -- resources -----------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_servers_resources_are_listed_and_read(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    server = server_for(transport, http_servers)
    async with MCPToolset(server, call_timeout=15) as toolset:
        listed = await toolset.list_resources()
        today = await toolset.read_resource("notes://today")
        monday = await toolset.read_resource("notes://monday")  # a template's URI
        logo = await toolset.read_resource("logo://png")
        with pytest.raises(RuntimeError) as missing:
            await toolset.read_resource("notes://nothing/here")
        after = await call(toolset, "add", {"a": 1, "b": 2})

    assert [(r.uri, r.name, r.mime_type) for r in listed] == [
        ("notes://today", "today", "text/plain"),
        ("logo://png", "logo", "image/png"),
    ]
    assert today == [
        TextResourceContents(uri="notes://today", mime_type="text/plain", text="water the plants")
    ]
    assert [part.text for part in monday if isinstance(part, TextResourceContents)] == [
        "note of monday"
    ]
    (image,) = logo
    assert isinstance(image, BlobResourceContents) and image.mime_type == "image/png"
    assert str(missing.value) == (
        f"MCP server '{server}' failed while reading resource 'notes://nothing/here': "
        "Unknown resource: notes://nothing/here"
    )
    assert after.content == "3"


async def test_a_server_without_resources_lists_none() -> None:
    server = StdioServer(sys.executable, [str(STDIO_SCRIPT.parent / "narrow_server.py"), "tools"])
    async with MCPToolset(server) as toolset:
        assert await toolset.list_resources() == []


# -- tool results --------------------------------------------------------------------------------
async def test_a_result_breaking_the_tools_output_schema_says_the_tool_ran() -> None:
    """The mcp client refuses such a result with a jsonschema report of many lines: the model
    read "failed" and a dump, and could well call the tool again, which had run."""
    server = StdioServer(sys.executable, [str(STDIO_SCRIPT.parent / "narrow_server.py"), "schema"])
    async with MCPToolset(server) as toolset:
        count = await call(toolset, "count", {})
        bare = await call(toolset, "bare", {})
    assert (count.is_error, count.content) == (
        True,
        "Error: tool 'count' ran, but its result was refused: its structured content does not "
        "match the tool's output schema ('many' is not of type 'integer')",
    )
    assert (bare.is_error, bare.content) == (
        True,
        "Error: tool 'bare' ran, but its result was refused: it has no structured content, which "
        "the tool's output schema requires",
    )


async def test_a_tool_whose_output_schema_is_broken_is_said_to_have_run() -> None:
    """The mcp client checks a result against the tool's output schema after the call, and a
    schema it cannot use (a reference leading nowhere, an invalid keyword) fails that check: the
    model read "tool failed" and a metaschema report of many lines, for a tool that had run."""
    server = StdioServer(sys.executable, [str(STDIO_SCRIPT.parent / "narrow_server.py"), "schema"])
    async with MCPToolset(server) as toolset:
        dangling = await call(toolset, "dangling", {})
        broken = await call(toolset, "broken", {})
    assert (dangling.is_error, dangling.content) == (
        True,
        "Error: tool 'dangling' ran, but its result was refused: the tool's output schema is not "
        "a valid JSON schema (PointerToNowhere: '/$defs/Missing' does not exist within {'type': "
        "'object', 'properties': {'n': {'$ref': '#/$defs/Missing'}}})",
    )
    assert (broken.is_error, broken.content) == (
        True,
        "Error: tool 'broken' ran, but its result was refused: the tool's output schema is not "
        "a valid JSON schema ('zero' is not of type 'number')",
    )


# -- cancellation --------------------------------------------------------------------------------
@pytest.mark.parametrize("transport", ["http", "http-legacy"])
async def test_a_call_cancelled_over_http_is_cancelled_on_the_server_and_the_session_goes_on(
    transport: str, http_servers: dict[bool, HTTPServerProcess]
) -> None:
    async with MCPToolset(server_for(transport, http_servers), call_timeout=None) as toolset:
        before = (await call(toolset, "hang_stats", {})).structured
        hanging = asyncio.create_task(call(toolset, "hang", {}))
        await eventually(
            lambda: call(toolset, "hang_stats", {}),
            lambda r: r.structured["started"] == before["started"] + 1,
        )
        hanging.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hanging
        await eventually(
            lambda: call(toolset, "hang_stats", {}),
            lambda r: r.structured["cancelled"] == before["cancelled"] + 1,
        )
        assert (await call(toolset, "add", {"a": 1, "b": 2})).content == "3"
        assert toolset._session.connections_opened == 1


# -- structured content on the event-driven layer's ToolResponseEvent -----------------------------
class _Lookup(ActionAgent):
    """Sends one ``ToolRequestEvent`` of the calls its input names (JSON: ``[[name, arguments],
    ...]``) and outputs what the response holds."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: ActionContext) -> None:
        named = json.loads(event.input)
        calls = [
            ToolCall(id=f"c{i}", name=name, arguments=args) for i, (name, args) in enumerate(named)
        ]
        ctx.send_event(ToolRequestEvent(tool_calls=calls))

    @action(ToolResponseEvent)
    @staticmethod
    def answered(event: ToolResponseEvent, ctx: ActionContext) -> None:
        texts = [response.content for response in event.responses]
        ctx.send_event(OutputEvent(output={"texts": texts, "structured": event.structured}))


_CALLS = json.dumps(
    [["forecast", '{"city": "Oslo"}'], ["add", '{"a": 1, "b": 2}'], ["ticket", '{"title": "x"}']]
)
_FORECAST = {
    "city": "Oslo",
    "temperature": 21.5,
    "units": "celsius",
    "conditions": ["sunny", "dry"],
}


async def test_an_mcp_tools_structured_content_is_on_the_tool_response_event(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """``ToolResult.structured`` (an MCP tool's ``structuredContent``) reached an action as the
    response's text only: an action wanting the data parsed the text, which a server may write
    otherwise than its data. ``ToolResponseEvent.structured`` holds it, one per response (the
    server wraps ``add``'s int as ``{"result": 3}``, its structured content)."""
    resources = Resources()
    resources.add_mcp("demo", HTTPServer(http_servers[False].url))
    async with resources:
        result = await Runner(_Lookup("lookup", resources=resources)).invoke(_CALLS)
    texts, structured = result.output["texts"], result.output["structured"]
    assert structured is not None and len(structured) == 3
    assert structured[0] == _FORECAST
    assert json.loads(texts[0]) == _FORECAST
    assert structured[1] == {"result": 3}
    assert structured[2] == {"id": 7, "title": "x"}


class _Confirming(_Lookup):
    """``_Lookup``, and a second action on the response that pauses for a person before it
    outputs what the response holds: the response is saved in the checkpoint with the pause."""

    @action(ToolResponseEvent)
    @staticmethod
    def confirm(event: ToolResponseEvent, ctx: ActionContext) -> None:
        if ctx.resume is None:
            raise Interrupt("confirm the lookup?")
        ctx.send_event(OutputEvent(output={"confirmed": event.structured}))


async def test_structured_content_is_kept_across_pauses_of_the_round_and_of_its_response(
    http_servers: dict[bool, HTTPServerProcess],
) -> None:
    """``add`` needs approval: the round pauses with ``forecast`` answered, its structured content
    saved beside its answer (``_Round.answer``'s state), and the response sent on resume holds it.
    A second action on that response pauses in turn: the response is saved as the event to go on
    with (through the checkpoint codec, the field typed ``list[Any]``), and read back whole."""
    resources = Resources()
    toolset = MCPToolset(HTTPServer(http_servers[False].url), require_approval=["add"])
    resources.add_mcp("demo", toolset)
    calls = json.dumps([["forecast", '{"city": "Oslo"}'], ["add", '{"a": 1, "b": 2}']])
    async with resources:
        runner = Runner(_Confirming("lookup", resources=resources))
        first = await runner.invoke(calls)
        assert first.interrupt is not None
        second = await runner.invoke_resume(first.interrupt.checkpoint_id, True)
        assert second.interrupt is not None
        assert second.output["structured"] == [_FORECAST, {"result": 3}]
        assert [json.loads(text) for text in second.output["texts"]] == [_FORECAST, 3]
        third = await runner.invoke_resume(second.interrupt.checkpoint_id, True)
    assert third.interrupt is None
    assert third.output == {"confirmed": [_FORECAST, {"result": 3}]}
