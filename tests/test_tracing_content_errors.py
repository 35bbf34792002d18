"""Without content capture, an agent's failure whose text is content stays off its spans.

A model's refusal is the model's answer, and a pydantic ``ValidationError`` quotes the values it
refused: both are content, as a ``ToolError``'s words are for a tool's span. An agent that failed
with one had it on its ``invoke_agent`` span's status and ``exception`` event, and on the status
of every agent above it (a ``Supervisor``'s flow), where ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_
MESSAGE_CONTENT`` was off. Real HTTP: the refusal comes from the OpenAI wire protocol server.
"""

from __future__ import annotations

import gc
import json
import types
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from openai_server import Call, OpenAIServer
from openai_server import Reply as ServedReply
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import BaseModel
from span_capture import exporter_fixture, provider_fixture  # noqa: F401  (fixtures)

import adk
from adk import AgentEvent, AgentInput, BaseAgent, RunContext, RunError, Runner
from adk.actions import ActionAgent, ActionContext, InputEvent, OutputEvent, action
from adk.models import RetryPolicy
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tracing import CAPTURE_CONTENT_ENV
from prebuilt import ReActAgent, Supervisor

SECRET = "4111-1111-1111"


class Refund(BaseModel):
    cents: int


def _told(spans: Sequence[ReadableSpan]) -> str:
    """Everything the spans say: attributes, statuses, events and their attributes."""
    told = []
    for span in spans:
        told.append(f"{span.name} {dict(span.attributes or {})} {span.status.description}")
        for event in span.events:
            told.append(f"{span.name} {event.name} {dict(event.attributes or {})}")
    return "\n".join(told)


def _by_name(spans: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


@pytest.mark.parametrize("capture", [False, True])
async def test_a_models_refusal_failing_an_agent_is_content_kept_off_its_spans(
    capture: bool,
    provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if capture:
        monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    else:
        monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    served = [
        ServedReply(tool_calls=[Call("transfer_to_agent", json.dumps({"agent_name": "payer"}))]),
        ServedReply(refusal=f"I will not refund card {SECRET}."),
    ]
    async with OpenAIServer(served) as server:
        model = adk.OpenAIChatModel(
            "gpt-test", base_url=server.base_url, api_key="sk", retry=RetryPolicy(max_attempts=1)
        )
        payer = ReActAgent("payer", model, description="Refunds.", output_schema=Refund)
        app = Supervisor(ReActAgent("boss", model), [payer])
        async with Runner(app, tracer_provider=provider) as runner:
            with pytest.raises(RunError, match="refused"):
                await runner.invoke("Refund me.")
    spans = exporter.get_finished_spans()
    payer_span = _by_name(spans, "invoke_agent payer")
    (flow_span,) = [s for s in spans if s.name == "invoke_agent boss" and s.parent is None]
    for span in (payer_span, flow_span):
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["error.type"] == "OutputSchemaError"
        assert span.status.description is not None
        assert "refused to answer with Refund" in span.status.description
    (exception,) = [e for e in payer_span.events if e.name == "exception"]
    assert exception.attributes is not None
    assert "refused to answer with Refund" in str(exception.attributes["exception.message"])
    if capture:  # content captured: the refusal is there, as the model's answer is
        assert SECRET in str(payer_span.status.description)
        assert SECRET in str(exception.attributes["exception.message"])
    else:
        assert SECRET not in _told(spans)


class _Checked(BaseModel):
    account: int


class _Validating(BaseAgent):
    """Reads the account its input names as a model would: a pydantic model that refuses it."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        _Checked.model_validate({"account": input.messages[-1].content})
        yield AgentEvent.of(adk.Message.assistant("checked"))


async def test_a_validation_error_failing_an_agent_is_recorded_without_its_values(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    app = adk.SequentialAgent("steps", [_Validating("checker")])
    with pytest.raises(RunError):
        await Runner(app, tracer_provider=provider).invoke(f"card {SECRET}")
    spans = exporter.get_finished_spans()
    assert SECRET not in _told(spans)
    checker = _by_name(spans, "invoke_agent checker")
    assert checker.status.description == (
        "ValidationError: 1 validation error for _Checked: account: Input should be a valid "
        "integer, unable to parse string as an integer [type=int_parsing]"
    )
    assert _by_name(spans, "invoke_agent steps").status.description == checker.status.description
    (exception,) = [e for e in checker.events if e.name == "exception"]
    attributes: dict[str, Any] = dict(exception.attributes or {})
    assert attributes["exception.type"] == "pydantic_core._pydantic_core.ValidationError"
    assert str(attributes["exception.stacktrace"]).endswith(
        f"ValidationError: {checker.status.description.split(': ', 1)[1]}\n"
    )


async def test_a_failed_traced_run_leaves_no_traceback_in_a_reference_cycle(
    provider: TracerProvider,
) -> None:
    """The frame of each traced agent kept the exception its span recorded (and now the one a
    child failed it with), whose traceback holds the frames of the run's agents, whose contexts
    hold that frame: a failed traced run's frames and tracebacks waited for the cyclic
    collector. (test_run_cycles runs every shape traced for the rest: the contexts and frames.)"""
    worker = ReActAgent(
        "w", ScriptedModel([ConnectionError("down"), ConnectionError("down")]), description="Works."
    )
    boss = ReActAgent(
        "boss",
        ScriptedModel([Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "w"})])]),
    )
    runner = Runner(
        adk.SequentialAgent("steps", [Supervisor(boss, [worker])]), tracer_provider=provider
    )
    with pytest.raises(RunError):  # a first run: what is made once (imports, caches) is made
        await runner.invoke("hi")
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        with pytest.raises(RunError):
            await runner.invoke("hi")
        gc.collect()
        kept = [
            type(o).__name__
            for o in gc.garbage
            if isinstance(o, types.TracebackType | types.FrameType)
        ]
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
    assert kept == []


async def test_an_agent_failing_after_a_forwarded_inner_error_is_described_by_its_own(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``AgentTool`` forwarding its inner events passes the inner agent's error event up
    through the calling agent, which then fails with another error: the spans above it say
    that one, not the content-free text of the error that passed first."""
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    checker = adk.AgentTool(_Validating("checker", description="Checks."), emit_inner_events=True)
    call = Reply(tool_calls=[tool_call("checker", {"request": f"card {SECRET}"})])
    caller = ReActAgent(
        "caller", ScriptedModel([call, ConnectionError("model down")]), tools=[checker]
    )
    with pytest.raises(RunError, match="model down"):
        await Runner(adk.SequentialAgent("steps", [caller]), tracer_provider=provider).invoke("x")
    spans = exporter.get_finished_spans()
    assert SECRET not in _told(spans)
    for name in ("invoke_agent caller", "invoke_agent steps"):
        assert _by_name(spans, name).status.description == "ConnectionError: model down"


class _CheckingActions(ActionAgent):
    """An event-driven agent whose action reads the account as ``_Validating`` does."""

    @action(InputEvent)
    def check(self, event: InputEvent, ctx: ActionContext) -> None:
        _Checked.model_validate({"account": event.input})
        ctx.send_event(OutputEvent(output="checked"))


async def test_a_validation_error_an_action_raised_is_recorded_without_its_values(
    provider: TracerProvider, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An ``ActionError`` says which action failed and quotes what it raised: a pydantic
    ``ValidationError``'s values were on the agent's span and every ancestor's, wrapped, where
    the same error raised by the agent itself was kept off them."""
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    app = adk.SequentialAgent("steps", [_CheckingActions("checker")])
    with pytest.raises(RunError, match=SECRET):  # the run's error is the caller's: all of it
        await Runner(app, tracer_provider=provider).invoke(f"card {SECRET}")
    spans = exporter.get_finished_spans()
    assert SECRET not in _told(spans)
    checker = _by_name(spans, "invoke_agent checker")
    assert checker.status.description == (
        "ActionError: action 'check' of agent 'checker' failed on InputEvent: ValidationError: "
        "1 validation error for _Checked: account: Input should be a valid integer, unable to "
        "parse string as an integer [type=int_parsing]"
    )
    assert _by_name(spans, "invoke_agent steps").status.description == checker.status.description
    (exception,) = [e for e in checker.events if e.name == "exception"]
    attributes: dict[str, Any] = dict(exception.attributes or {})
    assert attributes["exception.type"] == "adk.actions._builtin.ActionError"
    assert attributes["exception.message"] == checker.status.description.split(": ", 1)[1]
