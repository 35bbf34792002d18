"""What a model or a failing tool decides stays bounded on spans: span names stay few and short,
and an exception's stack trace has a size limit.

Backends index span names (the conventions ask for low-cardinality ones), and a span's attributes
go through exporters that must encode them: a tool name a model made up went into a span name as
it came, control characters, lone surrogates and all, and a deep recursion's stack trace into an
``exception`` event at 80 KB. The in-memory exporter reads the spans as an exporter gets them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from span_capture import exporter_fixture, provider_fixture  # noqa: F401  (fixtures)

from adk import RunError, Runner
from adk.messages import Message, ToolCall
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tools import tool
from adk.tracing import CAPTURE_CONTENT_ENV
from prebuilt import ReActAgent

SECRET = "4111-1111-1111"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _tool_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("execute_tool")]


async def test_a_tool_name_the_model_made_up_is_no_span_name_and_is_shown_bounded(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # The span was "execute_tool <the name>": 5,000 characters, an escape sequence, a line
    # break and a lone surrogate (which no exporter can encode as UTF-8) in a span name, and one
    # span name per name a model made up.
    made_up = "evil\x1b[31m\nname\ud800" + "x" * 5000
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call(made_up, {}), tool_call("add", {"a": 1, "b": 2})]), "done"]
    )
    async with Runner(ReActAgent("r", model, tools=[add]), tracer_provider=provider) as runner:
        await runner.invoke("go")
    unknown, known = sorted(_tool_spans(exporter), key=lambda s: s.name)
    assert known.name == "execute_tool add"  # a tool the agent has keeps its name
    assert (known.attributes or {})["gen_ai.tool.name"] == "add"
    assert unknown.name == "execute_tool"
    shown = str((unknown.attributes or {})["gen_ai.tool.name"])
    assert shown.startswith("evil\\x1b[31m\\nname\\ud800xxx")
    assert shown.endswith("x...")
    assert len(shown) == 128 + 3
    assert shown.isprintable()
    shown.encode()  # UTF-8, as an exporter writes it
    assert (unknown.attributes or {})["gen_ai.tool.call.id"]  # the call is still told apart


def _there(n: int) -> int:
    return _back(n + 1)


def _back(n: int) -> int:
    return _there(n + 1)


@tool
def deep() -> int:
    """Recurse until Python stops it."""
    return _there(0)


class _Account(BaseModel):
    number: int


def _deep_validation(n: int, value: str) -> None:
    if n:
        _deeper_validation(n - 1, value)  # two functions: Python's traceback folds no repeat
    _Account.model_validate({"number": value})


def _deeper_validation(n: int, value: str) -> None:
    _deep_validation(n, value)


@tool
def check(account: str) -> str:
    """Validate an account deep down."""
    _deep_validation(200, account)  # 400 frames: well within the recursion limit
    return "ok"


def _exception_of(span: ReadableSpan) -> dict[str, Any]:
    (event,) = [e for e in span.events if e.name == "exception"]
    return dict(event.attributes or {})


@pytest.mark.parametrize("capture", [False, True])
async def test_a_deep_recursions_stacktrace_is_bounded_and_keeps_its_ends(
    capture: bool,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two functions calling each other are not folded by Python's "previous line repeated", so
    # the RecursionError's stack trace was ~80 KB on the tool's span; a ValidationError raised
    # 400 frames deep (its text is content: recorded without it when content is not captured)
    # made one as long through the content-free path.
    if capture:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    else:
        monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    calls = [tool_call("deep", {}), tool_call("check", {"account": SECRET})]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    async with Runner(ReActAgent("r", model, tools=[deep, check]), tracer_provider=provider) as r:
        await r.invoke("go")
    spans = {s.name: s for s in _tool_spans(exporter)}
    recursion = _exception_of(spans["execute_tool deep"])
    validation = _exception_of(spans["execute_tool check"])
    for recorded in (recursion, validation):
        stacktrace = str(recorded["exception.stacktrace"])
        assert len(stacktrace) < 16_384 + 100
        assert stacktrace.startswith("Traceback (most recent call last):\n")
        assert "characters left out" in stacktrace
        assert f"{recorded['exception.message']}\n" in stacktrace[-2000:]  # its own line kept
    assert str(recursion["exception.stacktrace"]).endswith(
        "RecursionError: maximum recursion depth exceeded\n"
    )
    assert recursion["exception.type"] == "RecursionError"
    if not capture:
        assert SECRET not in str(validation)


def _unencodable(spans: Sequence[ReadableSpan]) -> list[str]:
    """Each span attribute, status or event attribute that has no UTF-8 form, as an exporter
    (OTLP's protobuf, a JSON one) must write it."""
    found = []
    for span in spans:
        told: list[tuple[str, object]] = [(f"{span.name} status", span.status.description or "")]
        told += [(f"{span.name} {k}", v) for k, v in (span.attributes or {}).items()]
        for event in span.events:
            told += [
                (f"{span.name} {event.name} {k}", v) for k, v in (event.attributes or {}).items()
            ]
        for where, value in told:
            for text in value if isinstance(value, tuple) else (value,):
                if isinstance(text, str):
                    try:
                        text.encode()
                    except UnicodeEncodeError:
                        found.append(where)
    return found


async def test_a_lone_surrogate_a_model_wrote_is_captured_as_its_escape(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A model's "\ud83d" escape (half an emoji) is a lone surrogate, which has no UTF-8 form:
    # captured as it came, in gen_ai.output.messages, the arguments, the result and the call
    # id, it failed the exporter's encoding of the whole batch, every span in it lost.
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")

    @tool
    def echo() -> str:
        """Answer with half an emoji."""
        return "half \ud83d"

    calls = [tool_call("echo", {}, id="call\ud83d")]
    model = ScriptedModel([Reply(tool_calls=calls), "done \ud83d"])
    async with Runner(ReActAgent("r", model, tools=[echo]), tracer_provider=provider) as runner:
        await runner.invoke("go \ud83d")
    spans = exporter.get_finished_spans()
    assert _unencodable(spans) == []
    (tool_span,) = _tool_spans(exporter)
    attributes = dict(tool_span.attributes or {})
    assert attributes["gen_ai.tool.call.result"] == "half \\ud83d"
    assert attributes["gen_ai.tool.call.id"] == "call\\ud83d"
    last_chat = [s for s in spans if s.name.startswith("chat")][-1]
    (output,) = json.loads(str(dict(last_chat.attributes or {})["gen_ai.output.messages"]))
    assert output["parts"] == [{"type": "text", "content": "done \ud83d"}]  # JSON's escape


async def test_a_tools_description_on_its_span_is_bounded_and_encodable(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # gen_ai.tool.description is on every call's span: an MCP server's description of 10,000
    # characters (a hostile one's of megabytes) was copied onto each, and one with a lone
    # surrogate failed the exporter's encoding of the batch. The model is told all of it.
    @tool(description="Look up. \ud83d" + "y" * 10_000)
    def lookup() -> str:
        return "found"

    model = ScriptedModel([Reply(tool_calls=[tool_call("lookup", {})]), "done"])
    async with Runner(ReActAgent("r", model, tools=[lookup]), tracer_provider=provider) as runner:
        await runner.invoke("go")
    (span,) = _tool_spans(exporter)
    described = str((span.attributes or {})["gen_ai.tool.description"])
    assert described.startswith("Look up. \\ud83dyyy")
    assert described.endswith("y...")
    assert len(described) == 4096 + 3 + 5  # cut, then the surrogate written as 6 characters
    assert _unencodable([span]) == []
    assert "y" * 10_000 in model.requests[0].tools[0].description  # the model's is whole


async def test_an_error_quoting_a_lone_surrogate_is_recorded_encodable(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # A failure whose text quotes what a model wrote (a provider's 400 echoing the request, a
    # half emoji in it): the text went, as it came, into the chat and agent spans' status
    # descriptions and their exception events' message and stack trace, where a lone surrogate
    # failed the exporter's encoding of the whole batch. Content capture is off: such an
    # error's text is not taken for content, it is shown.
    model = ScriptedModel([ValueError("bad request: 'go \ud83d'")])
    async with Runner(ReActAgent("r", model), tracer_provider=provider) as runner:
        with pytest.raises(RunError):
            await runner.invoke("go")
    spans = exporter.get_finished_spans()
    assert _unencodable(spans) == []
    failed = [s for s in spans if s.status.description]
    assert {s.name.split()[0] for s in failed} == {"chat", "invoke_agent"}
    for span in failed:
        assert "bad request: 'go \\ud83d'" in str(span.status.description)
        recorded = _exception_of(span)
        assert recorded["exception.message"] == "bad request: 'go \\ud83d'"
        assert str(recorded["exception.stacktrace"]).endswith(
            "ValueError: bad request: 'go \\ud83d'\n"
        )


async def test_a_records_str_key_with_a_lone_surrogate_is_an_encodable_attribute(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # adk.record.key is the record's key as it came (a str key from an event source: a half
    # emoji cut in two), on the record's root span, where a lone surrogate failed the
    # exporter's encoding of the whole batch.
    from adk.execution import LocalExecutionEnvironment

    env = LocalExecutionEnvironment(tracer_provider=provider)
    agent = ReActAgent("keyed", ScriptedModel(["done"]))
    outputs = (
        await env.from_list([{"k": "user\ud83d", "text": "hi"}], key="k").apply(agent).to_list()
    )
    assert [o.key for o in outputs] == ["user\ud83d"]  # the key itself is as it came
    assert _unencodable(exporter.get_finished_spans()) == []
    (root,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent keyed"]
    assert (root.attributes or {})["adk.record.key"] == "user\\ud83d"


async def test_a_made_up_tool_name_in_a_call_cut_at_the_token_limit_is_no_span_name(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    # A call cut at the token limit (``cut_calls``) was answered by a stand-in named after the
    # call, which the tracer took for a tool the agent has: a name the model made up became a
    # span name ("execute_tool <the name>", unbounded, unencodable) after all.
    made_up = "evil\x1b[31m\nname\ud800" + "x" * 5000
    calls = [
        ToolCall(id=f"c{i}", name=n, arguments='{"a": 1, "b')
        for i, n in enumerate([made_up, "add"])
    ]
    cut = Message.assistant("", calls)
    cut.metadata["finish_reason"] = "length"
    model = ScriptedModel([cut, "done"])
    async with Runner(ReActAgent("r", model, tools=[add]), tracer_provider=provider) as runner:
        result = await runner.invoke("go")
    names = sorted(s.name for s in _tool_spans(exporter))
    assert names == ["execute_tool", "execute_tool add"], [n[:40] for n in names]
    answers = [m.content for m in result.messages if m.role == "tool"]
    assert "unknown tool" in answers[0] and "available tools: add" in answers[0], answers[0]
    assert "cut at its token limit" in answers[1], answers[1]  # a tool it has: answered as cut
