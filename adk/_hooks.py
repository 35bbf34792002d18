"""The seams where tracing and user callbacks attach to a run.

The runtime calls these at fixed points (agent start/end, every event, every model call, every tool
call); the runner calls ``on_event`` for every event it passes on, and ``run_failed`` when it ends a
run with an error of its own. A run without tracing or callbacks has ``hooks = None`` and pays one
``is None`` test per point. ``Hooks`` here passes everything through; tracing and callbacks
subclass it and are combined into one object by the runner, so the runtime never knows which are
present.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ._ported_names import REQUEST_HINTS as _REQUEST_HINTS
from ._ported_names import install as _install_ported_names

if TYPE_CHECKING:
    from .agent import Agent
    from .context import RunContext
    from .events import AgentEvent, ErrorInfo
    from .messages import Message, MessageChunk, ToolCall
    from .tools.base import Tool, ToolContext, ToolResult

__all__ = ["Hooks", "ModelRequest", "annotate", "may_hook"]


class _Answered(Exception):
    """Raised by ``Hooks.agent_start`` when a ``before_agent`` callback answered for the agent:
    the driver runs ``agent`` (an ``adk.callbacks._Answer``, the answer's events) in its place,
    under ``handle``, so the answer passes through the rules as the agent's own events would.
    An exception because a skip is rare: an agent that runs pays nothing for it."""

    def __init__(self, handle: Any, agent: Any) -> None:
        super().__init__("answered by a before_agent callback")
        self.handle = handle
        self.agent = agent


# Whether an agent of this process has been given callbacks of its own (``callbacks=``): set when
# the first ``adk.callbacks._AgentCallbacks`` is made, never reset. Until then no agent can have
# any, so an agent start in a run without hooks tests this instead of looking for them on the agent
# (``getattr(agent, "_adk_callbacks", None)``, ~0.5k instructions, paid by every step of a workflow).
# Set when made, not when first run, so an agent made later, during a run included, is not missed.
agent_callbacks = False

_PROVIDER_ENV = ("OTEL_PYTHON_TRACER_PROVIDER", "OTEL_PYTHON_METER_PROVIDER")


def otel_may_be_configured() -> bool:
    """Whether global OpenTelemetry providers may be set: its API is imported (whoever configures
    one imports it) or its environment names one."""
    return (
        "opentelemetry.trace" in sys.modules
        or "opentelemetry.metrics" in sys.modules
        or any(name in os.environ for name in _PROVIDER_ENV)
    )


def global_tracer_set() -> bool:
    """Whether a global tracer provider that records is set: OpenTelemetry's API is imported and
    its provider is neither the default proxy nor a no-op. Never imports OpenTelemetry."""
    trace: Any = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.NoOpTracerProvider | trace.ProxyTracerProvider)


def global_meter_set() -> bool:
    """Whether a global meter provider that records is set: OpenTelemetry's metrics API is
    imported and its provider is neither the default proxy nor a no-op. Never imports
    OpenTelemetry."""
    metrics: Any = sys.modules.get("opentelemetry.metrics")
    if metrics is None:
        return False
    provider = metrics.get_meter_provider()
    # The API's proxy meter provider is private; its class name is the stable way to spot it.
    return not (
        isinstance(provider, metrics.NoOpMeterProvider)
        or type(provider).__name__ == "_ProxyMeterProvider"
    )


# What a runner built to use a global provider that was not set yet waits for (a bit each), and
# looks for once per run until it is set (``Runner._set_since``).
LATE_TRACER = 1
LATE_METER = 2


def late_providers(tracer_provider: object, meter_provider: object) -> int:
    """The global providers a runner built with these will look for per run: each it was not
    given and that was not set (recording) when it was built."""
    late = 0
    if tracer_provider is None and not global_tracer_set():
        late |= LATE_TRACER
    if meter_provider is None and not global_meter_set():
        late |= LATE_METER
    return late


def may_hook(callbacks: tuple[Any, ...], tracer_provider: object, meter_provider: object) -> bool:
    """Whether a runner built with these may have hooks (``adk._instrument.build_hooks`` decides).
    False in the common case, no callbacks and no OpenTelemetry, where the runner then loads
    neither ``adk._instrument`` nor ``adk.callbacks``."""
    return (
        bool(callbacks)
        or tracer_provider is not None
        or meter_provider is not None
        or otel_may_be_configured()
    )


_root_span_attributes: ContextVar[tuple[Hooks, Mapping[str, Any]] | None] = ContextVar(
    "adk_root_span_attributes", default=None
)
"""``(hooks, attributes)``: attributes for the root ``invoke_agent`` span of the run started in
this context by the runner whose hooks these are — how an execution environment puts a record's
key on its run's trace without a parameter on ``Runner.invoke``. Read only by tracing, once per
root span; the hooks (one object per ``Runner``) keep the attributes off any other run started
inside it (a tool that invokes a runner of its own), which inherits the context. Not the run id,
which such a run may be given (one conversation id with the record's)."""

_run_timeout: ContextVar[tuple[str, Callable[[], str | None]] | None] = ContextVar(
    "adk_run_timeout", default=None
)
"""``(run id, reason)``: ``reason()`` says why the run with that id was cut off if a timeout of an
execution environment's cut it off (else None) — read by tracing only when a root agent ends
cancelled, so the trace of a record that failed for its timeout says so as its output does."""


_record_memory: ContextVar[tuple[object, str] | None] = ContextVar(
    "adk_record_memory", default=None
)
"""``(runner, where)``: the run of that ``Runner`` (the environment's, which runs the record) is a
keyed record whose key's memory lives in ``where`` (a Flink job), out of reach of any session a
plain resume gets. A pause of that run saves ``where`` in its checkpoint, and a ``Runner``
resuming the checkpoint outside such a context warns that what it writes will not reach that
memory; the environment sets it when it resumes the record as a record of its key. Told by the
runner, not the run id, as the record key is (``adk._record_keys``): a ``Runner`` of the
application's own inside the record (a desk every key shares), even one given the record's run
id, makes pauses of its own, which hold no key's memory."""


class ModelRequest:
    """One model call as hooks see it. ``tools`` is the call's own list; ``messages`` and
    ``options`` are the agent's own: tracing only reads them, and the model callbacks, which may
    change them in place, get copies (``callbacks._own_request``)."""

    __slots__ = ("messages", "model", "options", "stream", "tools")

    def __init__(
        self, model: Any, messages: list[Message], tools: list[Any], options: Any, stream: bool
    ) -> None:
        self.model = model
        self.messages = messages
        self.tools = tools
        self.options = options
        self.stream = stream


# where a Google ADK LlmRequest name went (adk._ported_names)
_install_ported_names(ModelRequest, _REQUEST_HINTS)


def annotate(
    ctx: RunContext, attributes: Mapping[str, int], content: Mapping[str, str] | None = None
) -> None:
    """Set ``attributes`` on the span of the agent running at ``ctx`` (nothing when the run is
    not traced), and ``content`` too when message content is captured (``CAPTURE_CONTENT_ENV``):
    what a component that runs an agent in its place knows of the invocation and its span does
    not (a ``PlanExecute`` step's place in its plan). An untraced run pays one ``is None``
    test."""
    hooks: Hooks | None = ctx._run.hooks
    if hooks is not None:
        hooks.annotate(ctx, attributes, content or {})


class Hooks:
    """Pass-through hooks; subclasses override what they need."""

    on_event: Callable[[AgentEvent], None] | None = None
    """Called by the runner with every event it passes on, just before (None: nothing to call).
    The runner, not the driver, calls it: it alone sees a run's events as they go out — a pause
    with its checkpoint id, and the errors it adds itself."""

    answers_agents: bool = False
    """Whether a ``before_agent`` callback of the run may answer for an agent (skipping it): a
    resume's check (``adk.workflows._check_turns_left``) cannot then tell that a step will ask
    its model."""

    def annotate(
        self, ctx: RunContext, attributes: Mapping[str, int], content: Mapping[str, str]
    ) -> None:
        """Attributes for the span of the agent running at ``ctx``, ``content`` only when
        message content is captured (see ``annotate``, the function)."""

    async def agent_start(self, agent: Agent, ctx: RunContext, resumed: bool = False) -> Any:
        """Called before an agent runs (``resumed``: it continues after a pause); the return
        value comes back to ``agent_end``. Raises ``_Answered`` when the agent is skipped."""
        return None

    def agent_events(
        self, handle: Any, events: AsyncIterator[AgentEvent]
    ) -> AsyncIterator[AgentEvent]:
        """The agent's event iterator as the driver pulls it, once per agent start: tracing makes
        the agent's span current while the agent's own code runs (``adk.tracing``)."""
        return events

    def agent_event(self, handle: Any, event: AgentEvent) -> None:
        """Called for every event the agent emits (after stamping, before the consumer sees it)."""

    async def agent_end(
        self, handle: Any, error: ErrorInfo | None, cancelled: bool = False
    ) -> None:
        """Called when the agent finished, failed or was closed; ``cancelled`` when it ended
        because its task was cancelled (it has no error then)."""

    def run_failed(self, ctx: RunContext, event: AgentEvent) -> None:
        """The runner ends the run of the root agent at ``ctx`` with its own error ``event`` (a
        transfer nobody took, a checkpoint it could not save, a callback that failed): the root
        agent counts as failed with it when it ends (``agent_end``), if it has not ended yet."""

    def trace_of(self, ctx: RunContext) -> dict[str, Any] | None:
        """The trace of the root agent at ``ctx`` as a checkpoint keeps it (JSON data), so that a
        resume can link to it; None when the run is not traced."""
        return None

    def paused(self, ctx: RunContext, checkpoint_id: str) -> None:
        """The run of the root agent at ``ctx`` paused, its checkpoint saved as ``checkpoint_id``."""

    async def call_model(
        self,
        ctx: RunContext,
        request: ModelRequest,
        call: Callable[[ModelRequest], Awaitable[Message]],
    ) -> Message:
        """Wraps one non-streamed model call (and, for streams, the whole joined reply)."""
        return await call(request)

    def stream_model(
        self,
        ctx: RunContext,
        request: ModelRequest,
        open_stream: Callable[[ModelRequest], AsyncIterator[MessageChunk]],
    ) -> AsyncIterator[MessageChunk]:
        """Wraps one streamed model call; the chunks pass through the returned iterator."""
        return open_stream(request)

    async def call_tool(
        self,
        ctx: ToolContext,
        call: ToolCall,
        invoke: Callable[[], Awaitable[str | ToolResult]],
        tool: Tool,
    ) -> str | ToolResult:
        """Wraps one tool call to ``tool`` (the one that answers it: tracing reads its spec); may
        short-circuit or replace the result."""
        return await invoke()

    def edits_calls(self, ctx: RunContext) -> bool:
        """Whether tool callbacks run for a tool call made at ``ctx`` (the runner's, or the
        calling agent's own): they may edit the call they are given, so ``run_tool_call`` gives
        them a copy. Tracing only reads the call."""
        return False
