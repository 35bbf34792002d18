"""OpenTelemetry instrumentation following the GenAI semantic conventions.

A run produces ``invoke_agent {agent}`` spans nested along its run path, ``chat {model}`` per model
call and ``execute_tool {tool}`` per tool call, plus the ``gen_ai.client.token.usage``,
``gen_ai.client.operation.duration`` and (streamed calls) ``...time_to_first_chunk`` histograms,
and the ``gen_ai.invoke_agent.duration`` and ``gen_ai.execute_tool.duration`` ones per agent run and
tool call, and the ``adk.model.retries`` counter of a model call's retried attempts. Users do not
touch this module: ``Runner`` loads it
when OpenTelemetry could be configured (see ``adk._instrument``) and uses the global providers
unless ``Runner(tracer_provider=..., meter_provider=...)`` names others. It imports only the
OpenTelemetry API, never the SDK.

Why parents are explicit: agents are async generators, and a generator's body runs in the context
of whichever task pulls it next, so attaching a span as "current" across a ``yield`` leaks it into
the consumer and breaks under concurrency and cancellation. Each span's parent is therefore passed
explicitly (the context the span lives in travels on ``RunContext._trace``); a span is made current
only around a single await that does not yield to a consumer — the model call, the tool call, and
one step of an agent's generator (``running_in``) — so HTTP client spans, spans your tools create
and what a custom agent's own code starts nest under them.

Message content (inputs, outputs, system instructions, tool arguments and results) is recorded
only when ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (read when the ``Runner`` is
built), as the JSON attributes the conventions define (``gen_ai.input.messages``, ...).
"""

from __future__ import annotations

import json
import logging
import os
import time
import traceback
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard
from urllib.parse import urlsplit

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
)
from pydantic import ValidationError

from ._approval import _Denial, _EditedCall
from ._hooks import ModelRequest, _root_span_attributes
from ._nonfinite import dumps_finite
from .events import ErrorInfo
from .interrupts import Interrupt
from .messages import Message, MessageChunk, Role, Usage, join_chunks
from .models.base import ModelError, model_name_of
from .tools.base import Tool, ToolContext, ToolError, ToolProgress, ToolResult

if TYPE_CHECKING:
    from .agent import Agent
    from .context import RunContext
    from .events import AgentEvent, AgentOutput
    from .messages import ToolCall

__all__ = ["CAPTURE_CONTENT_ENV"]

logger = logging.getLogger("adk.tracing")

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Set to ``true`` (or ``SPAN_ONLY`` / ``SPAN_AND_EVENT``) to record message content, tool
arguments and tool results on spans."""

_SCOPE = "adk"
_SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"

# Attribute names (GenAI semantic conventions, development status).
_OPERATION = "gen_ai.operation.name"
_PROVIDER = "gen_ai.provider.name"
_AGENT_NAME = "gen_ai.agent.name"
_AGENT_DESCRIPTION = "gen_ai.agent.description"
_CONVERSATION = "gen_ai.conversation.id"
_REQUEST_MODEL = "gen_ai.request.model"
_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
_REQUEST_STOP = "gen_ai.request.stop_sequences"
_REQUEST_SEED = "gen_ai.request.seed"
_REQUEST_CHOICES = "gen_ai.request.choice.count"
_OUTPUT_TYPE = "gen_ai.output.type"
_REQUEST_STREAM = "gen_ai.request.stream"
_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"
_RESPONSE_MODEL = "gen_ai.response.model"
_RESPONSE_ID = "gen_ai.response.id"
_FINISH_REASONS = "gen_ai.response.finish_reasons"
_INPUT_TOKENS = "gen_ai.usage.input_tokens"
_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
_CACHED_TOKENS = "gen_ai.usage.cache_read.input_tokens"
_REASONING_TOKENS = "gen_ai.usage.reasoning.output_tokens"
_TOKEN_TYPE = "gen_ai.token.type"
_TOOL_NAME = "gen_ai.tool.name"
_TOOL_CALL_ID = "gen_ai.tool.call.id"
_TOOL_TYPE = "gen_ai.tool.type"
_TOOL_DESCRIPTION = "gen_ai.tool.description"
_TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
_TOOL_RESULT = "gen_ai.tool.call.result"
_INPUT_MESSAGES = "gen_ai.input.messages"
_OUTPUT_MESSAGES = "gen_ai.output.messages"
_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
_ERROR_TYPE = "error.type"
_SERVER_ADDRESS = "server.address"
_SERVER_PORT = "server.port"
_OPENAI_API_TYPE = "openai.api.type"
_OPENAI_SERVICE_TIER = "openai.request.service_tier"
_OPENAI_RESPONSE_TIER = "openai.response.service_tier"
_OPENAI_FINGERPRINT = "openai.response.system_fingerprint"
_RUN_PATH = "adk.run_path"
_CANCELLED = "adk.cancelled"  # a span event: the work was stopped, nothing went wrong
_CANCELLED_BY = "adk.cancelled.by"
_CHECKPOINT_ID = "adk.checkpoint.id"
# How an agent invocation ended, on its span and in ``gen_ai.invoke_agent.duration``: four values,
# so a paused run (an approval waiting, minutes or days) is told from one that finished without
# counting as an error, which the conventions keep ``error.type`` and the ERROR status for.
_OUTCOME = "adk.agent.outcome"
# On the span of a flow (``with_sub_agents``, a ``Supervisor``, a ``ReActAgent`` with sub-agents):
# its duration holds the whole transfer chain, where a later turn of the same agent (control back
# after a transfer) is one turn; both are ``gen_ai.agent.name`` of the root agent.
_FLOW = "adk.agent.flow"
_DENIED = "adk.approval.denied"  # a span event: a person refused the call, the tool did not fail
_PROGRESS_EVENT = "adk.tool.progress"  # a span event: a tool call's progress report
_PROGRESS = "adk.tool.progress.progress"
_PROGRESS_TOTAL = "adk.tool.progress.total"
_PROGRESS_MESSAGE = "adk.tool.progress.message"  # the tool's text: only when content is captured
_EDITED = "adk.approval.edited"  # a span attribute: the call ran with a person's edited arguments
_HEX = frozenset("0123456789abcdef")

# Request parameters the conventions name that ``ModelOptions`` has no field for: they reach the
# request through ``extra`` (passed into the body as is), under the OpenAI-style names.
_EXTRA_DOUBLES = (
    ("top_p", "gen_ai.request.top_p"),
    ("top_k", "gen_ai.request.top_k"),
    ("frequency_penalty", "gen_ai.request.frequency_penalty"),
    ("presence_penalty", "gen_ai.request.presence_penalty"),
)

# ``openai.api.type`` of an OpenAI model's ``api`` (the adapter's attribute: which endpoint it calls).
_OPENAI_API_TYPES = {"chat": "chat_completions", "responses": "responses"}

_DEFAULT_PORTS = {"https": 443, "http": 80}
_MAX_SERVERS = 64  # distinct base URLs remembered; a process talks to a handful

_TOOL_ERROR = "the tool returned an error"  # a failed tool's span status without captured content
_OTHER_TOOL = "_OTHER"  # the tool duration metric's name for a tool the agent does not have
# A name the model made up is shown, on its span's ``gen_ai.tool.name``, cut to this many
# characters (MCP's own limit on a tool's name) with what cannot be printed escaped.
_MAX_MADE_UP_NAME = 128
# ``gen_ai.tool.description`` on a tool's spans is cut to this many characters (the model is told
# the whole of it).
_MAX_DESCRIPTION = 4096
# An ``exception.stacktrace`` longer than this keeps its start and, mostly, its end (the frames
# nearest the error and the exception's own line), with how much was left out between.
_MAX_STACKTRACE = 16_384
_STACKTRACE_HEAD = 4_096

# Bucket boundaries the conventions advise for the two histograms.
_TOKEN_BUCKETS = [4.0**i for i in range(14)]  # 1, 4, 16, ... 67108864
_DURATION_BUCKETS = [0.01 * 2.0**i for i in range(14)]  # 0.01, 0.02, ... 81.92


# Values of CAPTURE_CONTENT_ENV that put content on spans: the original boolean ``true``, and the
# two of the enum OpenTelemetry's GenAI instrumentations now read (``NO_CONTENT``, ``SPAN_ONLY``,
# ``EVENT_ONLY``, ``SPAN_AND_EVENT``) that ask for it on spans. pyadk emits no content events, so
# ``EVENT_ONLY`` records nothing; a process set up for those instrumentations must not find pyadk's
# spans empty (``SPAN_AND_EVENT`` read as "not true") or full against its wishes.
_CAPTURE_VALUES = frozenset({"true", "span_only", "span_and_event"})


# The values that leave content off on purpose: the boolean's ``false``, the enum's two others.
_NO_CAPTURE_VALUES = frozenset({"", "false", "event_only", "no_content"})
_unknown_capture_values: set[str] = set()  # warned about once each (a Runner per request)


def _capture_from_env() -> bool:
    value = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower()
    if value in _CAPTURE_VALUES:
        return True
    if value not in _NO_CAPTURE_VALUES and value not in _unknown_capture_values:
        # ``1``, ``yes`` or ``on`` read as off like any value not taken, which looked like
        # content capture being broken rather than set wrong.
        _unknown_capture_values.add(value)
        logger.warning(
            "%s=%r is not a value it takes, so message content is not captured: set it to "
            "true (or SPAN_ONLY / SPAN_AND_EVENT) to capture it, false to leave it off",
            CAPTURE_CONTENT_ENV,
            os.environ.get(CAPTURE_CONTENT_ENV),
        )
    return False


def _check_provider(provider: object, parameter: str, method: str, kind: str) -> None:
    """Refuse, where the runner is made, a provider that is not one: its class (``()``
    forgotten) failed with ``get_tracer() missing 1 required positional argument``, and a
    tracer, or the other kind of provider, with an ``AttributeError`` about ``get_tracer``."""
    if provider is None:
        return
    if isinstance(provider, type):
        raise TypeError(
            f"{parameter} is the class {provider.__name__}, not a provider: pass an instance, "
            f"{provider.__name__}(...)"
        )
    if not callable(getattr(provider, method, None)):
        raise TypeError(
            f"{parameter} must be an OpenTelemetry {kind} (it has {method}), got "
            f"{type(provider).__name__}"
        )


def _is_noop_tracer_provider(provider: object) -> bool:
    # The proxy is what the API hands out while no SDK provider is set: nothing records.
    return isinstance(provider, trace.NoOpTracerProvider | trace.ProxyTracerProvider)


def _is_noop_meter_provider(provider: object) -> bool:
    # The API's proxy meter provider is private; its class name is the stable way to spot it.
    return isinstance(provider, metrics.NoOpMeterProvider) or (
        type(provider).__name__ == "_ProxyMeterProvider"
    )


def _model_resource(ctx: RunContext, name: str) -> Any:
    """The model an agent names, from the run's resources; None if it cannot be found there (the
    agent will fail for that reason, and its span must not guess a model)."""
    get_model = getattr(ctx._run.resources, "get_model", None)
    if get_model is None:
        return None
    try:
        return get_model(name)
    except KeyError:
        return None


# The attributes through which the framework's wrapper agents hold the agent they run in its place:
# a flow node's and a plan-and-execute role's ``agent``, Supervisor's report-back ``worker``,
# ReActAgent's loop core's ``owner``. adk never imports prebuilt, so it finds them by duck typing.
_WRAPPED_AGENT = ("agent", "worker", "owner")
_MAX_WRAPPERS = 8  # a bound; a Supervisor's worker that is a Supervisor is four objects deep


def _declared_model(agent: object) -> Any:
    """The model ``agent`` runs with: its ``model`` attribute, or, for a wrapper without one, that
    of the agent it wraps. The span of an agent run belongs to the outermost object started at its
    address (a flow node, Supervisor's report-back wrapper, ...), which carries the inner agent's
    name but not its model. Only an inner agent of the same name is followed, so a custom agent's
    unrelated ``agent`` attribute is never taken for the agent it runs."""
    name = getattr(agent, "name", None)
    for _ in range(_MAX_WRAPPERS):
        model = getattr(agent, "model", None)
        if model is not None:
            return model
        for attribute in _WRAPPED_AGENT:
            inner = getattr(agent, attribute, None)
            if inner is not None and getattr(inner, "name", None) == name:
                agent = inner
                break
        else:
            return None
    return None


def _server_of(base_url: object) -> tuple[str, int] | None:
    """``(server.address, server.port)`` of a model's API root (a URL's host, and its port or the
    scheme's default); None for what is not such a URL."""
    try:
        parts = urlsplit(str(base_url))
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:  # a port that is not a number
        return None
    host = parts.hostname
    if not host or port is None:
        return None
    return host, port


def _description_of(tool: Tool) -> str | None:
    """``gen_ai.tool.description``: the description in the tool's spec (what the model was told),
    cut to ``_MAX_DESCRIPTION`` characters, each lone surrogate escaped (``_utf8``). A user's
    ``Tool`` may build its spec on every read; one that fails, or is not a ``ToolSpec``, leaves
    the attribute out rather than fail the call it describes."""
    try:
        description = tool.spec.description
    except Exception:
        return None
    if not isinstance(description, str):
        return None
    if len(description) > _MAX_DESCRIPTION:
        # On every call's span: an MCP server's description of megabytes was copied onto each.
        description = f"{description[:_MAX_DESCRIPTION]}..."
    return _utf8(description)  # a server's lone surrogate: no exporter could write it


_OTHER_PROVIDER = "_OTHER"
"""``gen_ai.provider.name`` of a model that names no provider. The conventions require the
attribute on inference spans and allow a custom value where no well-known one applies; ``_OTHER``
is the value they set aside for that case (``gen_ai.system``, the attribute this one replaced, said
so) and what OpenTelemetry uses for an unknown value elsewhere (``http.request.method``). It does not
claim a provider the model may not be, and keeps the metrics' provider dimension one value."""


def _text_of(description: object) -> str | None:
    """An agent's description that is no str, a lazy translation string, read as text for its
    span (an attribute must be a str); None when reading it fails, as tracing must not fail a run
    its agent's other readers would not."""
    try:
        return str(description)
    except Exception:
        return None


def _provider_of(model: Any) -> str:
    """``gen_ai.provider.name``: the model's ``provider_name`` (e.g. ``"openai"``), or ``_OTHER``."""
    name = getattr(model, "provider_name", None)
    return name if isinstance(name, str) and name else _OTHER_PROVIDER


class _GenAITracing:
    """Creates the spans and records the metrics; ``adk._instrument`` decides when."""

    __slots__ = (
        "_agent_duration",
        "_capture",
        "_duration",
        "_failed",
        "_first_chunk",
        "_retries",
        "_servers",
        "_tokens",
        "_tool_duration",
        "_traced",
        "_tracer",
    )

    def __init__(self, tracer: Tracer, meter: metrics.Meter | None, capture_content: bool) -> None:
        self._tracer = tracer
        # Spans are recorded (the tracer is not the API's no-op one a metrics-only runner gets).
        self._traced = not isinstance(tracer, trace.NoOpTracer)
        self._capture = capture_content
        self._failed = False  # the provider's pipeline has failed once (logged at WARNING)
        self._servers: dict[str, tuple[str, int] | None] = {}  # base URL -> server, parsed once
        self._tokens: metrics.Histogram | None = None
        self._duration: metrics.Histogram | None = None
        self._first_chunk: metrics.Histogram | None = None
        self._agent_duration: metrics.Histogram | None = None
        self._tool_duration: metrics.Histogram | None = None
        self._retries: metrics.Counter | None = None
        if meter is not None:
            # The conventions' agent and tool metrics (``gen_ai.invoke_agent.duration``, for
            # frameworks that can bound one agent invocation, and ``gen_ai.execute_tool.duration``,
            # which an instrumentation that bounds a tool call SHOULD record for every one): without
            # them a service's dashboards had model calls' latency and errors but no agent's or
            # tool's, which only spans (sampled, if at all) held.
            self._agent_duration = meter.create_histogram(
                "gen_ai.invoke_agent.duration",
                unit="s",
                description="The end-to-end duration of a single agent invocation.",
                explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
            )
            self._tool_duration = meter.create_histogram(
                "gen_ai.execute_tool.duration",
                unit="s",
                description="The duration of a single tool execution.",
                explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
            )
            self._tokens = meter.create_histogram(
                "gen_ai.client.token.usage",
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS,
            )
            self._duration = meter.create_histogram(
                "gen_ai.client.operation.duration",
                unit="s",
                description="GenAI operation duration.",
                explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
            )
            self._first_chunk = meter.create_histogram(
                "gen_ai.client.operation.time_to_first_chunk",
                unit="s",
                description="Time to receive the first chunk of a streamed response.",
                explicit_bucket_boundaries_advisory=_DURATION_BUCKETS,
            )
            # The conventions have no retry metric, and ``gen_ai.client.operation.duration`` is
            # one point per call (attempts and waits included), so a provider answering 429 on
            # every other attempt showed only as slower calls: a count of the attempts that
            # failed and were retried, by the call's model and provider and the attempt's
            # ``error.type``, in pyadk's namespace as its span event is (``adk.model.retry``).
            self._retries = meter.create_counter(
                "adk.model.retries",
                unit="{retry}",
                description="Attempts of a model call that failed and were retried.",
            )

    # -- the provider's pipeline ----------------------------------------------------------------
    # Starting and ending a span runs the provider's span processors (an SDK calls each one's
    # ``on_start`` / ``on_end``, and a ``SimpleSpanProcessor`` exports there), which are not
    # pyadk's code and may fail: a vendor's processor, a redacting one of the team's, a provider
    # that is not the SDK's. Telemetry must not change what a run does, so their failure is
    # logged and the run goes on (the OpenTelemetry SDK's own processors shield a failing
    # exporter, logging it; nothing shields a failing processor). A ``try`` costs nothing until
    # it catches; setting attributes and events runs no processor.
    def _start_span(
        self,
        name: str,
        parent: Context | None,
        kind: SpanKind,
        attributes: dict[str, Any],
        links: list[Link] | None = None,
    ) -> Span:
        """``tracer.start_span``; if the provider fails, a non-recording stand-in carrying the
        parent's span context, so what this span would have parented still joins the trace."""
        try:
            return self._tracer.start_span(
                name, context=parent, kind=kind, attributes=attributes, links=links
            )
        except Exception as exc:
            self._pipeline_failed("start", name, exc)
            return NonRecordingSpan(trace.get_current_span(parent).get_span_context())

    def _end(self, span: Span) -> None:
        """``span.end()``, whose failure in the provider's processors is logged, not raised."""
        try:
            span.end()
        except Exception as exc:
            self._pipeline_failed("end", getattr(span, "name", "?"), exc)

    def _pipeline_failed(self, step: str, name: str, exc: Exception) -> None:
        """Log a failure of the provider's pipeline: the first with its traceback at WARNING, the
        rest at DEBUG (a broken processor fails on every span, and a log line per span would
        flood the log a service is read by)."""
        first = not self._failed
        self._failed = True
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "the tracer provider failed to %s span %r (%s: %s); the run goes on",
            step,
            name,
            type(exc).__name__,
            exc,
            exc_info=exc if first else None,
        )

    @classmethod
    def create(
        cls,
        tracer_provider: trace.TracerProvider | None,
        meter_provider: metrics.MeterProvider | None,
    ) -> _GenAITracing | None:
        """Tracing for these providers (the global ones where None), or None when neither records
        anything: then the run carries no tracing hooks at all."""
        _check_provider(tracer_provider, "tracer_provider", "get_tracer", "TracerProvider")
        _check_provider(meter_provider, "meter_provider", "get_meter", "MeterProvider")
        tp = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        mp = meter_provider if meter_provider is not None else metrics.get_meter_provider()
        traced = not _is_noop_tracer_provider(tp)
        measured = not _is_noop_meter_provider(mp)
        if not (traced or measured):
            return None
        tracer = tp.get_tracer(_SCOPE, schema_url=_SCHEMA_URL) if traced else trace.NoOpTracer()
        meter = mp.get_meter(_SCOPE, schema_url=_SCHEMA_URL) if measured else None
        return cls(tracer, meter, _capture_from_env())

    # -- agents ---------------------------------------------------------------------------------
    def start_agent(
        self, agent: Agent, ctx: RunContext, parent: Context | None
    ) -> tuple[Span, Context, _Measure | None]:
        """Start ``invoke_agent {agent}`` under ``parent`` (None: the caller's current context);
        return it with the context its children start in, and, when metrics are recorded, what
        ``end_agent`` records its duration with."""
        name = agent.name
        run_path = ctx.run_path
        outer_path = ctx._run.outer_path
        if outer_path:  # inside an AgentTool: the whole path, as its forwarded events carry
            run_path = (*outer_path, *run_path)
        attributes: dict[str, Any] = {
            _OPERATION: "invoke_agent",
            _AGENT_NAME: name,
            _CONVERSATION: ctx._run.run_id,
            _RUN_PATH: run_path,
        }
        description = getattr(agent, "description", "")
        if description and not isinstance(description, str):
            description = _text_of(description)  # a lazy translation string (``adk._checks``)
        if description:
            attributes[_AGENT_DESCRIPTION] = description
        model = _declared_model(agent)
        if isinstance(model, str):  # the name of a model resource
            model = _model_resource(ctx, model)
        if model is not None:
            attributes[_REQUEST_MODEL] = model_name_of(model)
            attributes[_PROVIDER] = _provider_of(model)
        else:  # required on invoke_agent spans too: a workflow, a custom agent without a model
            attributes[_PROVIDER] = _OTHER_PROVIDER
        links = None
        if parent is None:  # a run's root agent: a resume links to the run that paused
            run = ctx._run
            plan = run.plan
            if plan is not None and plan.resumed_from is not None:
                links = _resume_link(*plan.resumed_from)
                # Also as an attribute: many backends (Langfuse, Phoenix) show no links and
                # search none, and the paused run's root span names the same id (``paused``).
                attributes[_CHECKPOINT_ID] = plan.resumed_from[1]
            extra = _root_span_attributes.get()  # an execution environment's record
            if extra is not None and extra[0] is run.hooks:  # the record's runner's own run
                attributes.update(extra[1])
        span = self._start_span(
            f"invoke_agent {name}", parent, SpanKind.INTERNAL, attributes, links
        )
        measure = None
        if self._agent_duration is not None:
            measured = {
                _OPERATION: "invoke_agent",
                _AGENT_NAME: name,
                _PROVIDER: attributes[_PROVIDER],
            }
            if _REQUEST_MODEL in attributes:
                measured[_REQUEST_MODEL] = attributes[_REQUEST_MODEL]
            measure = (time.perf_counter(), measured)
        return span, trace.set_span_in_context(span, parent), measure

    def running_in(
        self, otel: Context, events: AsyncIterator[AgentEvent]
    ) -> AsyncIterator[AgentEvent]:
        """``events`` pulled with the agent's span current (``otel``: its context), so what the
        agent's own code starts between its events nests under it: spans of a custom agent's
        own, the HTTP client span of a model SDK it calls directly, a task it creates. Made
        current around each step only, never across a ``yield`` (see the module's docstring).
        Not an async iterator (a ``run`` that returned a coroutine): left for the driver to
        refuse. A runner that only measures (a meter provider, no tracer provider) has no span
        to make current: its agents' iterators are pulled as they are, at no cost per event."""
        if not self._traced or not hasattr(events, "__anext__"):
            return events
        return _running_in(otel, events)

    def trace_of(self, span: Span) -> dict[str, Any] | None:
        """A root agent span's context as a checkpoint keeps it (see ``_resume_link``)."""
        context = span.get_span_context()
        if not context.is_valid:
            return None
        return {
            "trace_id": format(context.trace_id, "032x"),
            "span_id": format(context.span_id, "016x"),
            "sampled": context.trace_flags.sampled,
        }

    def paused(self, span: Span, checkpoint_id: str) -> None:
        """The run whose root agent span is ``span`` paused and its checkpoint is saved: the span
        names it (``adk.checkpoint.id``), as the root span of its resume will, so searching one
        id finds both traces (a link, from the resume only, is not searchable in most
        backends)."""
        if span.is_recording():
            span.set_attribute(_CHECKPOINT_ID, checkpoint_id)

    def agent_event(self, span: Span, event: AgentEvent) -> None:
        """Record the agent's own actions (interrupt, transfer, exit, loop break) as span events."""
        action = event.action
        if action is None or not span.is_recording():
            return
        if action.interrupted is not None:
            span.add_event("adk.interrupt", {"adk.interrupt.ids": action.interrupted.point_ids})
        if action.transfer_to is not None:
            span.add_event("adk.transfer", {"adk.transfer.to": action.transfer_to})
        if action.exit:
            span.add_event("adk.exit")
        if action.break_loop:
            span.add_event("adk.break_loop")

    def flow(self, span: Span, measure: _Measure | None) -> None:
        """The agent span ``span`` is a flow's (a ``FlowAgent`` started there or runs in its
        place): ``adk.agent.flow=true`` on it and its duration metric, which otherwise mixed whole
        flows with the root agent's later turns under one agent name."""
        if span.is_recording():
            span.set_attribute(_FLOW, True)
        if measure is not None:
            measure[1][_FLOW] = True

    def agent_skipped(self, span: Span) -> None:
        """A ``before_agent`` callback answered for the agent, which did not run: the span's
        ``adk.skipped`` event (its output is the answer, as for an agent that ran)."""
        if span.is_recording():
            span.add_event("adk.skipped", {"adk.skipped.by": "before_agent"})

    def end_agent(
        self,
        span: Span,
        error: ErrorInfo | None,
        exception: BaseException | None,
        usage: list[int] | None = None,
        cancelled: bool = False,
        cancelled_by: str = "CancelledError",
        output: AgentOutput | None = None,
        measure: _Measure | None = None,
        interrupted: bool = False,
        late: BaseException | None = None,
        failed_by: BaseException | None = None,
    ) -> None:
        """End an agent's span; ``usage`` is ``[input, output]`` tokens of its own model calls
        that reported usage (None: none did). A ``cancelled`` agent's span gets the event a
        cancelled model or tool call's span gets (``_fail``), not an error: without it, the span of
        a run cut off by a timeout looked like that of a run that finished. ``cancelled_by`` says
        what cut it off, as ``_fail`` does: its task's cancellation, or ``GeneratorExit`` when the
        run's reader stopped reading. ``output`` is the agent's last answer, kept only when
        content is captured: its ``gen_ai.output.messages``. ``measure`` (from ``start_agent``)
        records the run's ``gen_ai.invoke_agent.duration``, with the ``error.type`` of a failed
        one, and for a run cut off too, outcome ``cancelled`` (as its span says): a count of runs
        by outcome from the metric missed every cancelled one. (A model or tool call cut off has
        no outcome attribute: its duration's ``error.type`` names the cancellation instead.)
        ``interrupted``: the agent ended with a pause (its own or a sub-agent's, a tool call's):
        not an error, but ``adk.agent.outcome`` says so, on the span and in the metric, so a
        paused run's duration (up to the pause) is not taken for a finished one's. ``late``: an
        ``after_agent`` callback's exception after the agent paused, which cannot change how it
        ended (the run waits for a person): its ``exception`` event, with no error status or
        ``error.type``, which would count a waiting run among the failed ones. ``failed_by``:
        the exception of the error an agent under this one failed with (``exception`` is the
        agent's own, recorded where it happened): without content capture, an error whose text
        is content (``_content_free``) is told on each span it fails by its content-free text."""
        if error is not None:
            outcome = "failed"
        elif cancelled:
            outcome = "cancelled"
        elif interrupted:
            outcome = "interrupted"
        else:
            outcome = "completed"
        if measure is not None and self._agent_duration is not None:
            started, measured = measure  # the agent's own dict, made by ``start_agent``
            measured[_OUTCOME] = outcome
            if error is not None:
                measured[_ERROR_TYPE] = error.type
            self._agent_duration.record(time.perf_counter() - started, measured)
        if usage is not None:  # one call: the SDK's set_attribute is a set_attributes of one
            span.set_attributes(
                {_OUTCOME: outcome, _INPUT_TOKENS: usage[0], _OUTPUT_TOKENS: usage[1]}
            )
        else:
            span.set_attribute(_OUTCOME, outcome)
        if output is not None and span.is_recording():
            answer = _answer_of(output)
            if answer is not None:
                finish = answer.metadata.get("finish_reason")
                span.set_attribute(_OUTPUT_MESSAGES, _output_messages(answer, finish))
        if cancelled:
            span.add_event(_CANCELLED, {_CANCELLED_BY: cancelled_by})
        if error is not None:
            shown = None
            if not self._capture:  # its text may be content: a refusal, a ValidationError's
                source = exception
                if source is None and failed_by is not None and _describes(error, failed_by):
                    source = failed_by  # a child's, seen as it passed: the one it failed with
                if isinstance(source, Exception):
                    shown = _content_free(source)
            # ``_utf8``: an error's text may quote what a model wrote (a lone surrogate).
            described = _utf8(str(error)) if shown is None else f"{error.type}: {shown}"
            span.set_status(Status(StatusCode.ERROR, described))
            span.set_attribute(_ERROR_TYPE, error.type)
            if exception is not None:
                _record_exception(span, exception, shown)
        elif late is not None:
            shown = (
                None if self._capture or not isinstance(late, Exception) else _content_free(late)
            )
            _record_exception(span, late, shown)
        self._end(span)

    # -- models ---------------------------------------------------------------------------------
    def _chat_attributes(self, ctx: RunContext, request: ModelRequest) -> dict[str, Any]:
        model = request.model
        provider = _provider_of(model)
        attributes: dict[str, Any] = {
            _OPERATION: "chat",
            _REQUEST_MODEL: model_name_of(model),
            _CONVERSATION: ctx._run.run_id,
            _PROVIDER: provider,
        }
        openai = provider == "openai"
        if openai:  # the conventions' OpenAI refinement: which of its APIs the call used
            api_type = _OPENAI_API_TYPES.get(getattr(model, "api", ""))
            if api_type is not None:
                attributes[_OPENAI_API_TYPE] = api_type
        base_url = getattr(model, "base_url", None)
        if base_url is not None:
            server = self._server(base_url)
            if server is not None:
                attributes[_SERVER_ADDRESS], attributes[_SERVER_PORT] = server
        options = request.options
        if options is not None:
            if options.temperature is not None:
                attributes[_REQUEST_TEMPERATURE] = options.temperature
            if options.max_tokens is not None:
                attributes[_REQUEST_MAX_TOKENS] = options.max_tokens
            if options.stop:
                attributes[_REQUEST_STOP] = options.stop
            if options.response_format is not None:
                attributes[_OUTPUT_TYPE] = "json"  # a JSON schema: structured output
            if options.extra:
                _extra_parameters(options.extra, attributes)
                if openai:
                    tier = options.extra.get("service_tier")
                    if isinstance(tier, str) and tier != "auto":  # required then, by the refinement
                        attributes[_OPENAI_SERVICE_TIER] = tier
        return attributes

    def _server(self, base_url: object) -> tuple[str, int] | None:
        """The server a model's ``base_url`` names (the adapters' attribute), parsed once per URL:
        it is looked up on every model call."""
        key = str(base_url)
        servers = self._servers
        try:
            return servers[key]
        except KeyError:
            pass
        if len(servers) >= _MAX_SERVERS:
            servers.clear()
        server = servers[key] = _server_of(key)
        return server

    def _start_chat(
        self, parent: Context | None, ctx: RunContext, request: ModelRequest, stream: bool = False
    ) -> tuple[Span, dict[str, Any]]:
        attributes = self._chat_attributes(ctx, request)
        if stream:  # required when, and only when, the request streams
            attributes[_REQUEST_STREAM] = True
        span = self._start_span(
            f"chat {attributes[_REQUEST_MODEL]}", parent, SpanKind.CLIENT, attributes
        )
        if self._capture and span.is_recording():
            system, messages = _input_messages(request.messages)
            tools = _tool_definitions(request.tools) if request.tools else None
            _set_input(span, system, messages, tools)
            frame = ctx._trace  # the calling agent's (``adk._instrument._Frame``)
            if frame is not None and not frame.asked:
                # The agent's first model call: what it was given (its prompt, its input, the
                # tools it offers) is the agent span's input too, as the conventions list it
                # (opt-in) on invoke_agent; the same JSON, not made again.
                frame.asked = True
                agent_span = frame.span
                if agent_span is not None and agent_span.is_recording():
                    _set_input(agent_span, system, messages, tools)
        return span, attributes

    async def call_model(
        self,
        parent: Context | None,
        ctx: RunContext,
        request: ModelRequest,
        call: Callable[[ModelRequest], Awaitable[Message]],
    ) -> Message:
        """One ``chat`` span around a non-streamed call, current while the model works."""
        span, attributes = self._start_chat(parent, ctx, request)
        start = time.perf_counter()
        inner = trace.set_span_in_context(span, parent)
        if self._retries is not None:
            inner = otel_context.set_value(_RETRIED, (self._retries, attributes), inner)
        token = otel_context.attach(inner)
        try:
            reply = await call(request)
        except BaseException as exc:
            self._chat_failed(span, attributes, exc, start)
            raise
        finally:
            otel_context.detach(token)
        self._chat_done(span, attributes, reply, reply.usage, start, ctx)
        return reply

    def stream_model(
        self,
        parent: Context | None,
        ctx: RunContext,
        request: ModelRequest,
        open_stream: Callable[[ModelRequest], AsyncIterator[MessageChunk]],
    ) -> AsyncIterator[MessageChunk]:
        """The chunks of a streamed call, inside a ``chat`` span that ends with the stream."""
        return _TracedStream(self, parent, ctx, request, open_stream)

    def _chat_done(
        self,
        span: Span,
        attributes: dict[str, Any],
        reply: Message,
        usage: Usage | None,
        start: float,
        ctx: RunContext,
    ) -> None:
        if usage is not None:
            frame = ctx._trace  # the calling agent's (``adk._instrument._Frame``)
            if frame is not None:
                frame.count_usage(usage)
        metadata = reply.metadata
        finish = metadata.get("finish_reason")
        response_model = metadata.get("response_model")
        if isinstance(response_model, str):  # the server's: on metric points that persist
            response_model = _utf8(response_model)
        if span.is_recording():
            if usage is not None:
                span.set_attribute(_INPUT_TOKENS, usage.input_tokens)
                span.set_attribute(_OUTPUT_TOKENS, usage.output_tokens)
                if usage.cached_input_tokens:
                    span.set_attribute(_CACHED_TOKENS, usage.cached_input_tokens)
                if usage.reasoning_output_tokens:
                    span.set_attribute(_REASONING_TOKENS, usage.reasoning_output_tokens)
            if finish:
                span.set_attribute(_FINISH_REASONS, [finish])
            if response_model:
                span.set_attribute(_RESPONSE_MODEL, response_model)
            response_id = metadata.get("response_id")
            if response_id:
                span.set_attribute(_RESPONSE_ID, response_id)
            if attributes[_PROVIDER] == "openai":  # the OpenAI refinement's response attributes
                _openai_response(span, metadata)
            if self._capture:
                span.set_attribute(_OUTPUT_MESSAGES, _output_messages(reply, finish))
        self._end(span)
        if self._duration is not None:
            measured = _metric_attributes(attributes, response_model)
            self._duration.record(time.perf_counter() - start, measured)
            if usage is not None and self._tokens is not None:
                self._tokens.record(usage.input_tokens, {**measured, _TOKEN_TYPE: "input"})
                self._tokens.record(usage.output_tokens, {**measured, _TOKEN_TYPE: "output"})

    def _chat_failed(
        self, span: Span, attributes: dict[str, Any], exc: BaseException, start: float
    ) -> None:
        error_type = _fail(span, exc)
        self._end(span)
        if self._duration is not None:
            # A call cut off (cancelled) is recorded too, up to the cut, its error.type the
            # cancellation's class as its span's adk.cancelled.by names it: left out, a timeout
            # that cut a slow provider's calls hid the slowest calls from the latency metric.
            measured = _metric_attributes(attributes, None)
            measured[_ERROR_TYPE] = error_type if error_type is not None else type(exc).__name__
            self._duration.record(time.perf_counter() - start, measured)

    def _chat_cut(self, span: Span, attributes: dict[str, Any], start: float) -> None:
        """End the span of a streamed call whose reader stopped before its end, and record its
        duration, up to the cut, as a reader gone (``GeneratorExit``, as an agent's span says)."""
        span.add_event("adk.stream.closed_early")
        self._end(span)
        if self._duration is not None:
            measured = _metric_attributes(attributes, None)
            measured[_ERROR_TYPE] = "GeneratorExit"
            self._duration.record(time.perf_counter() - start, measured)

    # -- tools ----------------------------------------------------------------------------------
    async def call_tool(
        self,
        parent: Context | None,
        ctx: ToolContext,
        call: ToolCall,
        invoke: Callable[[], Awaitable[str | ToolResult]],
        nest: Callable[[Context], None],
        tool: Tool,
    ) -> str | ToolResult:
        """One ``execute_tool`` span around a call to ``tool``, current while the tool runs;
        ``nest(context)`` hands the span's context to what the tool starts (a nested run)."""
        name = call.name
        span_name = f"execute_tool {name}"
        if getattr(tool, "_adk_unknown", False):
            # The name is whatever the model asked for (a tool the agent does not have): span
            # names are indexed by backends and must stay few (the conventions), so the span is
            # ``execute_tool`` alone, and its ``gen_ai.tool.name`` bounded and printable (a
            # control character, a lone surrogate an exporter cannot encode, 5,000 characters).
            span_name = "execute_tool"
            name = _made_up_name(name)
        attributes: dict[str, Any] = {
            _OPERATION: "execute_tool",
            _TOOL_NAME: name,
            _TOOL_CALL_ID: _utf8(call.id),  # the model's: a lone surrogate is no UTF-8
            _TOOL_TYPE: "function",
            _CONVERSATION: ctx.run_context._run.run_id,
        }
        description = _description_of(tool)
        if description:
            attributes[_TOOL_DESCRIPTION] = description
        protocol = getattr(tool, "_span_attributes", None)  # an MCP server's tool: the MCP ones
        if isinstance(protocol, dict):
            attributes.update(protocol)
        if type(call) is _EditedCall:  # gen_ai.tool.call.arguments, if captured, are the edit
            attributes[_EDITED] = True
        span = self._start_span(span_name, parent, SpanKind.INTERNAL, attributes)
        if self._capture and span.is_recording():
            span.set_attribute(_TOOL_ARGUMENTS, _utf8(call.arguments))
        inner = trace.set_span_in_context(span, parent)
        nest(inner)
        if ctx._emit is not None:  # a tool that may report progress: on its span too
            ctx._emit = _ProgressOnSpan(ctx, span, self._capture)
        token = otel_context.attach(inner)
        start = time.perf_counter()
        try:
            result = await invoke()
        except Interrupt as exc:
            ids = _interrupt_ids(exc, ctx.address)
            span.add_event("adk.interrupt", {"adk.interrupt.ids": ids})
            self._end(span)
            raise
        except BaseException as exc:
            error_type = _fail(span, exc, self._capture)
            self._end(span)
            # A call cut off is measured up to the cut, by the cancellation's class.
            self._tool_measured(call.name, tool, start, error_type or type(exc).__name__)
            raise
        finally:
            otel_context.detach(token)
        ran = True
        if isinstance(result, ToolResult):
            content = result.content
            if isinstance(result, _Denial):
                # A person said no: the call was answered as asked, nothing failed (an error
                # status would count every refusal in a tool's error rate and alert on it). The
                # tool did not run, so its duration is not recorded either.
                span.add_event(_DENIED)
                ran = False
            elif result.is_error:
                # The error text is the tool's result, content like any other (it may quote the
                # arguments): on the span only when content is captured, and as the status
                # description, not ``gen_ai.tool.call.result``, which the conventions keep for
                # calls that succeeded.
                shown = _utf8(content) if self._capture else _TOOL_ERROR
                span.set_status(Status(StatusCode.ERROR, shown))
                span.set_attribute(_ERROR_TYPE, "tool_error")
                self._end(span)
                self._tool_measured(call.name, tool, start, "tool_error")
                return result
        else:
            content = result
        if self._capture and span.is_recording():
            span.set_attribute(_TOOL_RESULT, _utf8(content))
        self._end(span)
        if ran:
            self._tool_measured(call.name, tool, start, None)
        return result

    def _tool_measured(self, name: str, tool: Tool, start: float, error_type: str | None) -> None:
        """``gen_ai.execute_tool.duration`` of a call that ran: by tool and, for a failed or cut
        off call, its ``error.type``. A call to a tool the agent does not have is recorded under ``_OTHER``:
        its name is whatever the model asked for, and each one a model made up would otherwise
        be a series of its own (its span keeps the name)."""
        histogram = self._tool_duration
        if histogram is None:
            return
        if getattr(tool, "_adk_unknown", False):
            name = _OTHER_TOOL
        measured = {_OPERATION: "execute_tool", _TOOL_NAME: name, _TOOL_TYPE: "function"}
        if error_type is not None:
            measured[_ERROR_TYPE] = error_type
        histogram.record(time.perf_counter() - start, measured)


class _ProgressOnSpan:
    """A tool call's way to the caller (``ToolContext._emit``) that also records the call's own
    progress reports on its ``execute_tool`` span, as ``adk.tool.progress`` events: how far, out
    of what, and the report's message when content is captured (it is the tool's text). Events
    an ``AgentTool`` forwards from its nested run pass untouched: their tools' spans have them."""

    __slots__ = ("_capture", "_emit", "_path", "_span")

    def __init__(self, ctx: ToolContext, span: Span, capture: bool) -> None:
        assert ctx._emit is not None
        self._emit = ctx._emit
        self._path = ctx.run_path
        self._span = span
        self._capture = capture

    def __call__(self, event: AgentEvent) -> None:
        output = event.output
        report = output.custom if output is not None else None
        # Not once its call has ended (``_executor._Emitter.ended``): its span has ended too,
        # and the report is dropped.
        if (
            type(report) is ToolProgress
            and event.run_path == self._path
            and not getattr(self._emit, "ended", False)
        ):
            attributes: dict[str, Any] = {}
            if report.progress is not None:
                attributes[_PROGRESS] = report.progress
            if report.total is not None:
                attributes[_PROGRESS_TOTAL] = report.total
            if self._capture and report.message is not None:
                attributes[_PROGRESS_MESSAGE] = _utf8(report.message)
            self._span.add_event(_PROGRESS_EVENT, attributes)
        self._emit(event)

    async def passed(self) -> None:
        """The way it wraps's ``passed`` (``_executor._Emitter.passed``), when it has one."""
        passed = getattr(self._emit, "passed", None)
        if passed is not None:
            await passed()

    @property
    def ended(self) -> bool:
        """Whether the call it reports for has ended (``_executor._Emitter.ended``): an MCP
        call's report coming after is dropped quietly (``adk.mcp._hooks._Reports``), as
        without tracing, not warned about as a tool's own late report."""
        return bool(getattr(self._emit, "ended", False))

    def taken(self) -> Any:
        """The way it wraps's ``taken`` (``_executor._Emitter.taken``), when it has one; else a
        future done already (each event counts as taken once emitted)."""
        taken = getattr(self._emit, "taken", None)
        if taken is not None:
            return taken()
        import asyncio

        done = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class _TracedStream:
    """A streamed model call's chunks inside its ``chat`` span.

    The span starts when the first chunk is asked for (that is when the model call starts) and ends
    when the stream ends, fails, is closed, or — abandoned unread — is garbage-collected. Usage,
    finish reason and metadata (the adapter's response model and id) come from the chunks as they
    pass, the way joining them would: chunks are kept only when content is captured.
    """

    __slots__ = (
        "_attributes",
        "_chunks",
        "_ctx",
        "_finish",
        "_first",
        "_metadata",
        "_open_stream",
        "_otel",
        "_owner",
        "_parent",
        "_request",
        "_source",
        "_span",
        "_start",
        "_state",
        "_usage",
    )

    _NEW, _OPEN, _DONE = 0, 1, 2

    def __init__(
        self,
        owner: _GenAITracing,
        parent: Context | None,
        ctx: RunContext,
        request: ModelRequest,
        open_stream: Callable[[ModelRequest], AsyncIterator[MessageChunk]],
    ) -> None:
        self._owner = owner
        self._parent = parent
        self._ctx = ctx
        self._request = request
        self._open_stream = open_stream
        self._state = self._NEW
        self._span: Span | None = None
        self._otel: Context | None = None
        self._source: AsyncIterator[MessageChunk] | None = None
        self._attributes: dict[str, Any] = {}
        self._chunks: list[MessageChunk] | None = None
        self._usage: Usage | None = None
        self._finish: str | None = None
        self._metadata: dict[str, Any] | None = None
        self._start = 0.0
        self._first: float | None = None  # seconds from the request to its first chunk

    def __aiter__(self) -> _TracedStream:
        return self

    async def __anext__(self) -> MessageChunk:
        if self._state != self._OPEN:
            if self._state == self._DONE:
                raise StopAsyncIteration
            self._begin()
        assert self._source is not None and self._otel is not None
        token = otel_context.attach(self._otel)
        try:
            chunk = await anext(self._source)
        except StopAsyncIteration:
            self._finish_span(None)
            raise
        except BaseException as exc:
            self._finish_span(exc)
            raise
        finally:
            otel_context.detach(token)
        if self._first is None:
            self._first_chunk()
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.finish_reason:
            self._finish = chunk.finish_reason
        if chunk.metadata:  # usually on one chunk only: merged in order, a later key wins
            metadata = self._metadata
            self._metadata = chunk.metadata if metadata is None else {**metadata, **chunk.metadata}
        if self._chunks is not None:
            self._chunks.append(chunk)
        return chunk

    def _begin(self) -> None:
        owner = self._owner
        span, self._attributes = owner._start_chat(self._parent, self._ctx, self._request, True)
        self._span = span
        otel = trace.set_span_in_context(span, self._parent)
        if owner._retries is not None:
            otel = otel_context.set_value(_RETRIED, (owner._retries, self._attributes), otel)
        self._otel = otel
        self._chunks = [] if owner._capture and span.is_recording() else None
        self._start = time.perf_counter()
        self._state = self._OPEN
        try:
            self._source = self._open_stream(self._request)
        except BaseException as exc:
            self._finish_span(exc)
            raise

    def _first_chunk(self) -> None:
        """Time the first chunk: streaming's own latency, what a reader waits before anything
        shows (``gen_ai.response.time_to_first_chunk``, once per stream)."""
        self._first = first = time.perf_counter() - self._start
        span = self._span
        if span is not None and span.is_recording():
            span.set_attribute(_TIME_TO_FIRST_CHUNK, first)

    def _finish_span(self, exc: BaseException | None) -> None:
        self._state = self._DONE
        self._source = None
        span = self._span
        assert span is not None
        owner = self._owner
        self._first_measured(exc is None)
        if exc is not None:
            owner._chat_failed(span, self._attributes, exc, self._start)
            return
        if self._chunks is not None:
            reply = join_chunks(self._chunks)
        else:
            reply = Message.assistant()
            if self._metadata is not None:
                reply.metadata.update(self._metadata)
            if self._finish:
                reply.metadata["finish_reason"] = self._finish
        owner._chat_done(span, self._attributes, reply, self._usage, self._start, self._ctx)

    def _first_measured(self, ended: bool) -> None:
        """Record the time to the first chunk, if one came: a stream ended, failed or left by
        its reader alike (the model it named is read from a stream that ``ended`` only)."""
        histogram = self._owner._first_chunk
        if self._first is not None and histogram is not None:
            response_model = None
            if ended and self._metadata is not None:
                response_model = self._metadata.get("response_model")
                if isinstance(response_model, str):
                    response_model = _utf8(response_model)
            histogram.record(self._first, _metric_attributes(self._attributes, response_model))

    def _abandon(self) -> None:
        """End the span of a stream nobody will finish reading (garbage-collected: no metric,
        whose record takes a lock the collector may have interrupted the holder of)."""
        self._state = self._DONE
        span = self._span
        if span is not None:
            span.add_event("adk.stream.closed_early")
            self._owner._end(span)

    async def aclose(self) -> None:
        if self._state == self._OPEN:
            source = self._source
            self._state = self._DONE
            if self._span is not None:
                self._first_measured(False)
                self._owner._chat_cut(self._span, self._attributes, self._start)
            self._source = None
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()
        self._state = self._DONE

    def __del__(self) -> None:
        if self._state == self._OPEN:
            self._abandon()


async def _running_in(
    otel: Context, events: AsyncIterator[AgentEvent]
) -> AsyncGenerator[AgentEvent, None]:
    """See ``_GenAITracing.running_in``. Each step attaches the context and detaches it before
    the event goes on, in the task that pulls it, so the consumer never runs inside the span.
    Closing this closes ``events`` (as the driver closes an agent's iterator, within the span
    too, for the agent's clean-up)."""
    event: AgentEvent | None = None
    try:
        while True:
            token = otel_context.attach(otel)
            try:
                event = await anext(events)
            except StopAsyncIteration:
                return
            finally:
                otel_context.detach(token)
            yield event
    finally:
        event = None  # not kept by a finished frame (see ``adk._driver.NO_EVENT``)
        aclose = getattr(events, "aclose", None)
        if aclose is not None and getattr(events, "ag_frame", True) is not None:
            token = otel_context.attach(otel)
            try:
                await aclose()
            finally:
                otel_context.detach(token)


def _extra_parameters(extra: dict[str, Any], attributes: dict[str, Any]) -> None:
    """The conventions' request parameters among ``ModelOptions.extra``. Only numbers are taken (a
    value of another type is the server's to refuse, not a figure to report), and the choice count
    only when it is not the default of one, as the conventions ask."""
    for key, attribute in _EXTRA_DOUBLES:
        value = extra.get(key)
        if type(value) is float or type(value) is int:
            attributes[attribute] = float(value)
    seed = extra.get("seed")
    if type(seed) is int:
        attributes[_REQUEST_SEED] = seed
    choices = extra.get("n")
    if type(choices) is int and choices != 1:
        attributes[_REQUEST_CHOICES] = choices


def _openai_response(span: Span, metadata: dict[str, Any]) -> None:
    """``openai.response.service_tier`` (required by the conventions when the response names one)
    and ``openai.response.system_fingerprint``, from what ``OpenAIChatModel`` put in the reply's
    metadata."""
    tier = metadata.get("service_tier")
    if isinstance(tier, str) and tier:
        span.set_attribute(_OPENAI_RESPONSE_TIER, tier)
    fingerprint = metadata.get("system_fingerprint")
    if isinstance(fingerprint, str) and fingerprint:
        span.set_attribute(_OPENAI_FINGERPRINT, fingerprint)


_Measure = tuple[float, dict[str, Any]]
"""An agent run's start (``time.perf_counter``) and the attributes of its duration metric."""


def _is_hex(value: object, length: int) -> TypeGuard[str]:
    """Lower-case hex digits only (``int(x, 16)`` also takes signs, spaces and underscores)."""
    return isinstance(value, str) and len(value) == length and _HEX.issuperset(value)


def _resume_link(saved: Any, checkpoint_id: str) -> list[Link] | None:
    """The link from a resumed run's root span to the root span of the run that paused, from what
    ``trace_of`` saved in the checkpoint; None for anything else (a resume never fails for it)."""
    if not isinstance(saved, dict):
        return None
    trace_id, span_id = saved.get("trace_id"), saved.get("span_id")
    if not (_is_hex(trace_id, 32) and _is_hex(span_id, 16)):
        return None
    context = SpanContext(
        int(trace_id, 16),
        int(span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(
            TraceFlags.SAMPLED if saved.get("sampled") is True else TraceFlags.DEFAULT
        ),
    )
    if not context.is_valid:  # all zeros
        return None
    return [Link(context, {_CHECKPOINT_ID: checkpoint_id})]


def _fail(span: Span, exc: BaseException, capture: bool = True) -> str | None:
    """Mark ``span`` failed by ``exc``; return its ``error.type`` (None for a cancellation, which
    is recorded as an event, not an error: the caller stopped the work, nothing went wrong).
    Without ``capture``, an error whose text is content (``_content_free``) is recorded without
    it."""
    if not isinstance(exc, Exception):
        span.add_event(_CANCELLED, {_CANCELLED_BY: type(exc).__name__})
        return None
    error_type = _error_type(exc)
    shown = None if capture else _content_free(exc)
    if shown is None:
        span.set_status(Status(StatusCode.ERROR, _utf8(str(exc)) or error_type))
        span.set_attribute(_ERROR_TYPE, error_type)
        _record_exception(span, exc, None)
        return error_type
    span.set_status(Status(StatusCode.ERROR, shown))
    span.set_attribute(_ERROR_TYPE, error_type)
    _record_exception(span, exc, shown)
    return error_type


def _made_up_name(name: str) -> str:
    """A tool name a model made up, as its span shows it: at most ``_MAX_MADE_UP_NAME``
    characters (``...`` marking a cut), each one that cannot be printed (a control character, a
    line break, a lone surrogate) escaped as Python writes it (``\\x1b``, ``\\ud800``)."""
    shown = name[: _MAX_MADE_UP_NAME + 1]
    if not shown.isprintable():
        shown = "".join(
            c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in shown
        )
    if len(shown) <= _MAX_MADE_UP_NAME:
        return shown
    return f"{shown[:_MAX_MADE_UP_NAME]}..."


def _describes(error: ErrorInfo, exc: BaseException) -> bool:
    """Whether ``error`` is the description of ``exc``: the error event of a child is passed up
    as it is (the same ``ErrorInfo``), but an agent may fail with another error than the first
    a child's event carried past it (an ``AgentTool``'s inner error it forwarded, say)."""
    return ErrorInfo.of(exc) == error


def _record_exception(span: Span, exc: BaseException, shown: str | None) -> None:
    """``span.record_exception(exc)``, or, with ``shown`` (``_content_free``'s text for an
    exception whose own text is content), the SDK's attributes with the message replaced, in the
    stack trace too (its last line), and the exceptions chained to it left out (one handled
    while raising it may quote the same). Either way the stack trace is bounded (``_bounded``)."""
    if not span.is_recording():  # a metrics-only runner's: nothing to format the trace for
        return
    if shown is None:
        stacktrace = "".join(traceback.format_exception(exc))
        written = _utf8(stacktrace)  # a message quoting a model's lone surrogate: no UTF-8
        if written is stacktrace and len(stacktrace) <= _MAX_STACKTRACE:
            span.record_exception(exc)
        else:
            # The SDK's own attributes, overridden: its message is ``str(exc)`` as it is.
            span.record_exception(
                exc,
                {"exception.message": _utf8(str(exc)), "exception.stacktrace": _bounded(written)},
            )
        return
    where = "".join(traceback.format_tb(exc.__traceback__))
    kind = type(exc)
    module = kind.__module__
    named = (
        f"{module}.{kind.__qualname__}" if module and module != "builtins" else kind.__qualname__
    )
    span.record_exception(
        exc,
        {
            "exception.message": shown,
            "exception.stacktrace": _bounded(
                f"Traceback (most recent call last):\n{where}{named}: {shown}\n"
            ),
        },
    )


def _bounded(stacktrace: str) -> str:
    """``exception.stacktrace`` of at most about ``_MAX_STACKTRACE`` characters: a deep recursion
    (a ``RecursionError`` through two functions calling each other, which Python's "previous
    line repeated" does not fold) made one of 80 KB on each span it failed, where backends cut or
    drop a span's attributes and an OTLP batch has a size limit. Its start and its end are kept
    (where it began; the frames nearest the error and the exception's own line), with how many
    characters were left out between."""
    if len(stacktrace) <= _MAX_STACKTRACE:
        return stacktrace
    tail = _MAX_STACKTRACE - _STACKTRACE_HEAD
    left_out = len(stacktrace) - _STACKTRACE_HEAD - tail
    return (
        f"{stacktrace[:_STACKTRACE_HEAD]}\n  ... {left_out} characters left out ...\n"
        f"{stacktrace[-tail:]}"
    )


def _content_free(exc: Exception, depth: int = 100) -> str | None:
    """What to record of ``exc``, when content is not captured, in place of a text that is content
    (None when its text is not): a ``ToolError``'s is the tool's answer to the model, as
    ``ToolResult.error``'s is (recorded as ``_TOOL_ERROR``); a pydantic ``ValidationError``'s
    quotes each value it refused (``input_value=...``), a model's argument as often as not, so it
    is recorded by where and why it failed, without the values. Any other exception pyadk marked
    with the text it has without what it quotes (``tools.base._own_words``: an
    ``OutputSchemaError`` repeating a model's refusal) is recorded as that text, and a wrapper
    that names its cause and quotes it (``_names_cause``: an ``ActionError``) with the quote
    replaced by the cause's content-free text (``depth``: a bounded walk, a chain may loop)."""
    own = getattr(exc, "_adk_content_free", None)
    if type(own) is str and not isinstance(exc, ToolError):
        return own
    if isinstance(exc, ToolError):
        # pyadk's own words (a call past its ``timeout=``) are no content, and tell an SRE why;
        # a text marked (``tools.base._own_words``) is those words without what they quote (an
        # AgentTool's inner error, a require_approval function's exception).
        own = getattr(exc, "_adk_content_free", None)
        if own is True:
            return None
        return own if type(own) is str else _TOOL_ERROR
    if isinstance(exc, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or '(value)'}: {error['msg']} "
            f"[type={error['type']}]"
            for error in exc.errors(include_url=False, include_input=False, include_context=False)
        )
        count = exc.error_count()
        return f"{count} validation error{'s' if count != 1 else ''} for {exc.title}: {problems}"
    cause = exc.__cause__
    if depth and isinstance(cause, Exception) and getattr(exc, "_names_cause", False):
        # A wrapper that says where its cause failed and quotes it (``adk.actions.ActionError``):
        # the quote told without its content, the wrapper's own words kept.
        inner = _content_free(cause, depth - 1)
        quoted = str(cause)
        text = str(exc)
        if inner is not None and quoted and quoted in text:
            return text.replace(quoted, inner)
    return None


def _error_type(exc: Exception) -> str:
    """``error.type``: the exception's class name, but for a model call that failed with an HTTP
    status (``ModelError.status``), that status as text, as the HTTP conventions have it. The
    adapters raise one ``ModelError`` for every failure, so its name alone put a rate limit
    (429), a refused request (400) and an overloaded server (503) under one value on the span
    and in the duration metric, where a service's error dashboards and alerts group by it; the
    span's ``exception`` event still names the class. A ``ModelError`` without a status is
    typed by the exception it was raised from, the client's (``APITimeoutError``,
    ``APIConnectionError``): by its own name a provider that timed out and one that could not be
    reached were one value. One raised from nothing (an error whose cause held a secret is raised
    ``from None``), from a private class of the adapter's (a name no documentation gives), or
    that the adapter marks (``_adk_untyped``: a malformed answer, whose cause is the parser that
    failed, and a closed model, whose connection error is not the provider's) stays
    ``ModelError``."""
    if isinstance(exc, ModelError):
        if type(exc.status) is int:
            return str(exc.status)
        cause = exc.__cause__
        if (
            cause is not None
            and not type(cause).__name__.startswith("_")
            and not getattr(exc, "_adk_untyped", False)  # a malformed answer, a closed model
        ):
            return type(cause).__name__
    return type(exc).__name__


def _interrupt_ids(exc: Interrupt, address: str) -> list[str]:
    """The points an ``Interrupt`` raised by a tool at ``address`` pauses on."""
    signal = exc._signal
    return [p.id for p in signal.points] if signal is not None else [address]


_RETRIED = otel_context.create_key("adk.model.retries")
"""The context key under which a model call's context holds the retry counter and the call's
span attributes (only when metrics are recorded), for ``_count_retry``."""


def _count_retry(error_type: str) -> None:
    """Count an attempt of the current model call that failed with ``error_type`` and is retried
    (``adk.models._retry._record_retry`` calls it, inside the call's context): one point of
    ``adk.model.retries`` with the call's metric attributes and the attempt's ``error.type``.
    Nothing outside a call of a runner that records metrics."""
    found = otel_context.get_value(_RETRIED)
    if not isinstance(found, tuple):
        return
    counter: metrics.Counter = found[0]
    attributes: dict[str, Any] = found[1]
    measured = _metric_attributes(attributes, None)
    measured[_ERROR_TYPE] = error_type
    counter.add(1, measured)


def _metric_attributes(attributes: dict[str, Any], response_model: str | None) -> dict[str, Any]:
    """The low-cardinality subset of a chat span's attributes that metrics carry."""
    measured = {
        _OPERATION: attributes[_OPERATION],
        _PROVIDER: attributes[_PROVIDER],
        _REQUEST_MODEL: attributes[_REQUEST_MODEL],
    }
    address = attributes.get(_SERVER_ADDRESS)
    if address is not None:
        measured[_SERVER_ADDRESS] = address
        measured[_SERVER_PORT] = attributes[_SERVER_PORT]
    if response_model:
        measured[_RESPONSE_MODEL] = response_model
    return measured


# -- message content (only with CAPTURE_CONTENT_ENV=true) ---------------------------------------
def _arguments(raw: str) -> Any:
    """A call's arguments as the object the conventions ask for; the raw text when it is not JSON
    a backend reads (``NaN``, which Python's parser takes, would make the whole attribute
    unreadable to a backend's ``JSON.parse``)."""
    try:
        return json.loads(raw, parse_constant=_not_json)
    except ValueError:
        return raw


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _parts(message: Message) -> list[dict[str, Any]]:
    if message.role == Role.TOOL:
        return [
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content},
            *_media(message),
        ]
    parts: list[dict[str, Any]] = []
    if message.reasoning:
        parts.append({"type": "reasoning", "content": message.reasoning})
    if message.content:
        parts.append({"type": "text", "content": message.content})
    for call in message.tool_calls:
        parts.append(
            {
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": _arguments(call.arguments),
            }
        )
    if message.parts:
        parts.extend(_media(message))
    return parts


def _media(message: Message) -> list[dict[str, Any]]:
    """A message's images, sounds and files as the conventions' ``blob`` (``uri`` for one known
    by its address) parts, without their bytes: a span is no place for megabytes of a
    screenshot, even with content captured. Their modality and MIME type say what was sent."""
    return [
        {
            "type": "uri" if part.data is None else "blob",
            "modality": part.type,
            "mime_type": part.mime_type,
        }
        for part in message.parts
    ]


def _input_messages(messages: Sequence[Message]) -> tuple[str | None, str]:
    """``(gen_ai.system_instructions, gen_ai.input.messages)`` as the conventions' JSON.

    The instructions are the leading system messages: the system prompt an agent renders from its
    instruction and puts first, configuration rather than conversation. A system message further
    on is part of the chat history (one a user or a history rewriter put there), which the
    conventions keep in ``gen_ai.input.messages``, in the order it was sent: moved to the
    instructions, it lost its place among the turns it was written between."""
    system: list[dict[str, Any]] = []
    chat: list[dict[str, Any]] = []
    for message in messages:
        if not chat and message.role == Role.SYSTEM:
            system.append({"type": "text", "content": message.content})
        else:
            chat.append({"role": str(message.role), "parts": _parts(message)})
    instructions = _utf8(json.dumps(system, ensure_ascii=False)) if system else None
    return instructions, _utf8(json.dumps(chat, ensure_ascii=False))


def _set_input(span: Span, system: str | None, messages: str, tools: str | None) -> None:
    """A model call's input, as the conventions' JSON attributes, on a ``chat`` span or, for an
    agent's first call, on its ``invoke_agent`` span."""
    if system is not None:
        span.set_attribute(_SYSTEM_INSTRUCTIONS, system)
    span.set_attribute(_INPUT_MESSAGES, messages)
    if tools is not None:
        span.set_attribute(_TOOL_DEFINITIONS, tools)


def _tool_definitions(tools: Sequence[Any]) -> str:
    """``gen_ai.tool.definitions``: the request's tools (``ToolSpec``) as the conventions' JSON.

    Standard JSON, as the messages are: a schema can hold a non-finite number (a parameter
    defaulting to ``float("inf")``), which ``json.dumps`` would write as ``Infinity``, making the
    whole attribute unreadable to a backend's ``JSON.parse``; such a number is recorded as that
    text instead (only when one is there: the usual schema is dumped once, unwalked)."""
    definitions = [
        {
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        }
        for spec in tools
    ]
    # ``default=str``: a schema is JSON data; anything else in it is shown, not a failed call.
    # A NaN or an infinity is written as the text ``json.dumps`` would have written.
    return _utf8(dumps_finite(definitions, json.dumps, ensure_ascii=False, default=str))


def _answer_of(output: AgentOutput) -> Message | None:
    """The message of an agent's answer: a streamed one only once it was read to its end (the
    reader reads it before asking for the next event, so by the agent's end it has been, unless
    the reader stopped or the stream failed: then there is no whole answer to record)."""
    if output.message is not None:
        return output.message
    stream = output.stream
    if stream is None:
        return None
    try:
        return stream._final_message()
    except ValueError:
        return None


def _output_messages(reply: Message, finish: str | None) -> str:
    """``gen_ai.output.messages``. The message's ``finish_reason`` is the model's when it reported
    one (as ``gen_ai.response.finish_reasons`` has it); otherwise one of the output-message
    schema's own values, ``tool_call`` or ``stop`` (the schema version pyadk's schema URL names
    requires the field; later ones keep it, deprecated, optional)."""
    reason = finish or ("tool_call" if reply.tool_calls else "stop")
    message = {"role": "assistant", "parts": _parts(reply), "finish_reason": reason}
    return _utf8(json.dumps([message], ensure_ascii=False))


def _utf8(text: str) -> str:
    """``text`` as an exporter can write it: a lone surrogate (a model's ``"\\ud800"`` escape,
    half of an emoji cut in two) has no UTF-8 form, and one in an attribute failed the OTLP
    exporter's encoding of the whole batch, every span in it lost. Each is written as its
    escape, ``\\ud800``, which inside the JSON attributes is JSON's own for it. Content
    (captured only on request), a tool call's id and a response's model go through here: ASCII,
    the common case, is told at once."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text
