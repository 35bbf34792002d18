"""Tracing and callbacks combined into the one ``Hooks`` object a run carries — or ``None``.

``build_hooks`` returns None when there is nothing to do (no callbacks, and OpenTelemetry absent or
not configured), so a plain run pays one ``is None`` test per hook point. It imports ``adk.tracing``
(and with it the OpenTelemetry API) only when OpenTelemetry could be configured: a provider was
passed, the API is already imported by someone (whoever configures a global provider imports it),
or the environment names a provider.

Each agent run gets a ``_Frame`` kept on its ``RunContext._trace``; child contexts copy it, so the
frame is how a child finds its parent span — explicitly, never through OpenTelemetry's implicit
context, which does not survive async generators. A frame also recognises wrappers: an agent
started at the same address and run path as the frame on its context (a ``ReActAgent`` running its
flow and loop, a flow's root agent, ``Supervisor``'s report-back wrapper) is the same agent, so it
gets no second span and no second ``before_agent``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from . import _hooks
from ._aio import being_cancelled
from ._hooks import Hooks, ModelRequest, _Answered, _run_timeout, otel_may_be_configured
from .callbacks import _AgentCallbacks, _Answer, _CallbackChain
from .events import _FORWARDED, ErrorInfo
from .messages import _ASSISTANT

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import Span, TracerProvider

    from .agent import Agent
    from .context import RunContext
    from .events import AgentEvent, AgentOutput
    from .messages import Message, MessageChunk, ToolCall, Usage
    from .tools.base import Tool, ToolContext, ToolResult
    from .tracing import _GenAITracing, _Measure

__all__ = ["agent_hooks", "build_hooks"]

logger = logging.getLogger("adk.callbacks")


def build_hooks(
    callbacks: Iterable[Any],
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
) -> Hooks | None:
    """The hooks for a runner with these callbacks and providers (None: nothing to hook)."""
    chain = _CallbackChain.of(callbacks)
    tracing: _GenAITracing | None = None
    if tracer_provider is not None or meter_provider is not None or otel_may_be_configured():
        # Imported here, not at the top, so that `import adk` never loads OpenTelemetry: most
        # runs are not traced. (No cycle is involved: adk.tracing does not import this module.)
        from .tracing import _GenAITracing

        tracing = _GenAITracing.create(tracer_provider, meter_provider)
    if tracing is None and chain is None:
        return None
    if tracing is not None and tracing._capture:  # chosen here: no test per event otherwise
        return _CapturingInstrumented(tracing, chain)
    return _Instrumented(tracing, chain)


def agent_hooks() -> Hooks:
    """The hooks of a run that had none when an agent with callbacks of its own started in it
    (``adk._driver.agent_hooks``): no tracing, no runner callbacks, only agents' own. Stateless,
    so one serves every such run."""
    return _AGENT_HOOKS


class _Frame:
    """One traced agent run (or tool call): where it runs, its span, and its context for
    children. An agent with callbacks of its own (``own``) has the chains that run for it here:
    the runner's callbacks then its own, per hook (``agents``, ``models``, ``tools``; None where
    none run). ``answer`` is a ``before_agent`` answer kept for the agent a wrapper runs in place
    (``_adk_in_place``), which takes it when it starts."""

    __slots__ = (
        "address",
        "agent",
        "agents",
        "answer",
        "asked",
        "caller",
        "ctx",
        "exception",
        "failed_by",
        "failure",
        "interrupted",
        "measure",
        "models",
        "otel",
        "output",
        "own",
        "run_path",
        "span",
        "tools",
        "usage",
    )

    def __init__(
        self,
        agent: Agent | None,
        ctx: RunContext,
        address: str,
        *,
        span: Span | None = None,
        otel: Context | None = None,
    ) -> None:
        self.agent = agent
        # None once its span has ended (``agent_end``, or a failing ``before_agent`` in
        # ``agent_start``) or its tool call returned: the context's ``_trace`` is this frame,
        # so kept, each traced run left the two in a reference cycle.
        self.ctx: RunContext | None = ctx
        self.address = address
        self.run_path = ctx.run_path
        self.span = span
        self.otel = otel
        self.exception: BaseException | None = None
        # The exception of the error a child failed it with (not recorded here: where it
        # happened), read only for its text without content capture (``tracing.end_agent``).
        self.failed_by: BaseException | None = None
        self.failure: AgentEvent | None = None  # the runner's error that failed the run (root)
        self.interrupted = False  # a pause passed through it: its own, a sub-agent's, a call's
        self.usage: list[int] | None = None  # [input, output] tokens of the agent's model calls
        self.output: AgentOutput | None = None  # its last answer (content capture only)
        self.measure: _Measure | None = None  # its duration metric's start and attributes
        self.asked = False  # its first model call's input is on its span (content capture only)
        self.own: _AgentCallbacks | None = None
        self.agents: _CallbackChain | None = None
        self.models: _CallbackChain | None = None
        self.tools: _CallbackChain | None = None
        self.answer: Any = None
        self.caller: _Frame | None = None  # a tool call's: the frame of the agent that made it

    def count_usage(self, usage: Usage) -> None:
        """Add a model call's usage to the agent's (tracing, for its span's ``gen_ai.usage.*``).
        A tool call's frame adds it to its calling agent's: a model call made for the call (an
        MCP server's sampling request, ``adk.mcp``) is that agent's, and on no span its tokens
        were missing from a trace's sum of agent usage, which ``RunResult.usage`` holds."""
        if self.caller is not None:
            self.caller.count_usage(usage)
            return
        total = self.usage
        if total is None:
            self.usage = [usage.input_tokens, usage.output_tokens]
        else:
            total[0] += usage.input_tokens
            total[1] += usage.output_tokens


def _timed_out(frame: _Frame) -> ErrorInfo | None:
    """The error of a root agent whose run an execution environment's timeout cut off: the record
    fails with a ``TimeoutError``, and its trace, which its output leads to, must say so too
    rather than show a run that was merely cancelled."""
    timeout = _run_timeout.get()
    if timeout is None or len(frame.run_path) != 1:
        return None
    ctx = frame.ctx
    if ctx is None:
        return None
    run = ctx._run
    if run.nested or timeout[0] != run.run_id:  # an AgentTool's run shares the run id
        return None
    reason = timeout[1]()
    return ErrorInfo("TimeoutError", reason) if reason is not None else None


def _otel_of(ctx: RunContext) -> Context | None:
    frame: _Frame | None = ctx._trace
    return frame.otel if frame is not None else None


class _Instrumented(Hooks):
    """Tracing (optional) plus callbacks (optional) behind the runtime's hook points.

    Callbacks sit outside tracing: ``before_*`` callbacks run first and may answer a call
    themselves, so a ``chat``/``execute_tool`` span measures exactly the calls that happen.
    """

    def __init__(self, tracing: _GenAITracing | None, chain: _CallbackChain | None) -> None:
        self._tracing = tracing
        self._chain = chain
        self._agents = (
            chain if chain is not None and (chain.before_agent or chain.after_agent) else None
        )
        self._frames = tracing is not None or self._agents is not None
        self.answers_agents = chain is not None and bool(chain.before_agent)
        # An agent with callbacks of its own has started under these hooks: from then on a model
        # or tool call looks for them on its agent's frame. Until then (most runners, always) the
        # calls test this flag and nothing more.
        self._own = False
        self.on_event = chain.run_on_event if chain is not None and chain.on_event else None
        self._models = chain if chain is not None and chain.wraps_models else None
        self._tools = chain if chain is not None and chain.wraps_tools else None

    # -- agents ---------------------------------------------------------------------------------
    _captures = False  # message content goes on spans (``_CapturingInstrumented``)

    def annotate(
        self, ctx: RunContext, attributes: Mapping[str, int], content: Mapping[str, str]
    ) -> None:
        frame: _Frame | None = ctx._trace
        span = frame.span if frame is not None else None
        if span is None or not span.is_recording():
            return
        span.set_attributes(attributes)
        if content and self._captures:
            span.set_attributes(content)

    async def agent_start(
        self, agent: Agent, ctx: RunContext, resumed: bool = False
    ) -> _Frame | None:
        if not self._frames:
            if not _hooks.agent_callbacks or getattr(agent, "_adk_callbacks", None) is None:
                return None
            # The first agent with callbacks of its own: frames from now on, which is where
            # its callbacks are found for its model and tool calls.
            self._frames = True
        parent: _Frame | None = ctx._trace
        address = ctx.address
        if parent is not None and parent.address == address and parent.run_path == ctx.run_path:
            _in_place(parent, agent, self._tracing)
            return None  # a wrapper running its inner agent in place: one agent, one frame
        frame = _Frame(agent, ctx, address)
        agents = self._agents
        own: _AgentCallbacks | None = getattr(agent, "_adk_callbacks", None)
        if own is not None:
            self._own = True
            chain = own.after(self._chain)
            frame.own = own
            frame.models = chain if chain.wraps_models else None
            frame.tools = chain if chain.wraps_tools else None
            agents = chain if chain.before_agent or chain.after_agent else None
        frame.agents = agents
        tracing = self._tracing
        if tracing is not None:
            frame.span, frame.otel, frame.measure = tracing.start_agent(
                agent, ctx, parent.otel if parent is not None else None
            )
            if getattr(agent, "_adk_flow_span", False):
                tracing.flow(frame.span, frame.measure)
        ctx._trace = frame
        if agents is not None:
            try:
                answer = await agents.run_before_agent(_made(agent), ctx)
            except BaseException as exc:
                # The driver will not call agent_end for a start that failed: close the span here.
                # A callback's own CancelledError is a RuntimeError by now (``callbacks``): one
                # that is not an Exception is the run's cancellation, not the agent's failure.
                # A root agent's may be a record's timeout (``_timed_out``), as in ``agent_end``.
                if tracing is not None and frame.span is not None:
                    measure = frame.measure
                    if isinstance(exc, Exception):
                        tracing.end_agent(frame.span, ErrorInfo.of(exc), exc, measure=measure)
                    else:
                        timed_out = _timed_out(frame)
                        cancelled = timed_out is None
                        tracing.end_agent(
                            frame.span, timed_out, None, cancelled=cancelled, measure=measure
                        )
                frame.ctx = None  # no agent_end to let go of it: no cycle left behind
                raise
            if answer is not None:
                if resumed:
                    # It was let run before its pause and waits for the resume's answers:
                    # skipped now, its paused calls would never run (see adk.callbacks).
                    logger.warning(
                        "before_agent answered for agent %r as it resumed after a pause; an agent "
                        "is skipped only when it starts, so the answer is ignored",
                        agent.name,
                    )
                elif getattr(agent, "_adk_in_place", False):
                    frame.answer = answer  # for the agent it runs in place, which answers
                else:
                    if tracing is not None and frame.span is not None:
                        tracing.agent_skipped(frame.span)
                    raise _Answered(frame, _Answer(agent, answer))
        return frame

    def agent_events(
        self, handle: _Frame | None, events: AsyncIterator[AgentEvent]
    ) -> AsyncIterator[AgentEvent]:
        tracing = self._tracing
        if tracing is None or handle is None or handle.otel is None:
            return events
        return tracing.running_in(handle.otel, events)

    def agent_event(self, handle: _Frame | None, event: AgentEvent) -> None:
        if handle is None:
            return
        action = event.action
        if action is not None and action.interrupted is not None:
            # A pause ends the agent that yields it and each one it passes through on its way
            # to the runner: their spans' outcome (``adk.agent.outcome=interrupted``).
            handle.interrupted = True
        if event.run_path is handle.run_path or event.run_path == handle.run_path:  # its own
            if event.error is not None and handle.exception is None:
                handle.exception = event.exception
            tracing = self._tracing
            if tracing is not None and action is not None and handle.span is not None:
                tracing.agent_event(handle.span, event)
        elif event.error is not None and handle.failed_by is None:  # a child's, passing up
            handle.failed_by = event.exception

    async def agent_end(
        self, handle: _Frame | None, error: ErrorInfo | None, cancelled: bool = False
    ) -> None:
        """``after_agent`` callbacks, then the end of the span. A failing ``after_agent`` fails
        an agent that ended well (its exception goes to the driver, which makes it the error of
        whoever can still report one); an agent that failed already keeps its own error, and a
        cancelled one its cancellation, and the callback's exception is only logged: a second
        error event would break the event rules."""
        if handle is None:
            return
        if handle.answer is not None:  # a wrapper marked ``_adk_in_place`` ran no agent in place
            logger.warning(
                "before_agent answered for agent %r, which runs another agent in place, but "
                "none started there to answer: the answer was not used",
                handle.agent.name if handle.agent is not None else handle.address,
            )
        exception = handle.exception
        late: Exception | None = None  # a paused agent's failing after_agent (see below)
        failure = handle.failure
        if error is None and failure is not None:
            error, exception = failure.error, failure.exception
        try:
            agents = handle.agents
            if agents is not None and handle.agent is not None:
                try:
                    assert handle.ctx is not None  # let go of at the end of this method
                    await agents.run_after_agent(_made(handle.agent), handle.ctx, error)
                except Exception as exc:
                    # Cut off (its task cancelled, a timeout, a client gone; the cancellation
                    # may have come as its stream closed, ``_driver.finish``, so ``cancelled``
                    # is not told yet): raised, the callback's error replaced the cancellation
                    # in flight, so a cancelled task ended with it and ``asyncio.timeout`` raised
                    # it rather than TimeoutError.
                    cut = cancelled or being_cancelled()
                    if error is None and not cut and not handle.interrupted:
                        error, exception = ErrorInfo.of(exc), exc
                        raise
                    if error is None and not cut:
                        # Paused: its pause went up to the runner, which saves the checkpoint;
                        # the run waits for a person and did not fail. The span keeps
                        # ``interrupted`` and records the callback's exception as an event.
                        late = exc
                        settled = "paused (the pause stands)"
                    elif error is None:
                        settled = "was cancelled"
                    else:
                        settled = f"had failed already ({error})"
                    logger.warning(
                        "after_agent callback failed for agent %r, which %s",
                        handle.agent.name,
                        settled,
                        exc_info=exc,
                    )
        except BaseException as exc:
            # The run's cancellation (a timeout, a client gone) while an after_agent callback
            # waited: the span says cancelled, or the record's timeout, as when the agent was cut
            # off itself, not that the agent finished.
            if not isinstance(exc, Exception):
                cancelled = True
            raise
        finally:
            tracing = self._tracing
            if tracing is not None and handle.span is not None:
                by = "CancelledError"
                if not cancelled:
                    abandoned = handle.ctx is not None and handle.ctx._run.abandoned
                    if (abandoned or (error is None and not handle.interrupted)) and (
                        being_cancelled()
                    ):
                        # Closed by its task's cancellation that came while someone else awaited
                        # (``invoke``'s, ``invoke_resume``'s or an ``AgentTool``'s collector
                        # reading the streamed answer this agent's event carried; a reader
                        # cancelled as it read one): the close, not the CancelledError, reached
                        # the agent, which was cut off by the cancellation all the same. Only a
                        # cancellation that came after its run started: one its task had
                        # pending then (a run in a cancelled task's cleanup) did not cut it off
                        # (``_aio.being_cancelled``).
                        cancelled = True
                    elif abandoned:
                        # Closed because the run's reader stopped reading mid-run (``break``,
                        # ``aclose``): inside the driver that looks like the close after the
                        # run's last event, but the agent was cut off, as a cancelled one is.
                        cancelled, by = True, "GeneratorExit"
                if cancelled and error is None:
                    error = _timed_out(handle)
                tracing.end_agent(
                    handle.span,
                    error,
                    exception if error is not None else None,
                    handle.usage,
                    cancelled and error is None,
                    by,
                    handle.output,
                    handle.measure,
                    handle.interrupted,
                    late,
                    handle.failed_by,
                )
            # The exceptions were for the span, which has ended: kept, each one's traceback
            # (frames holding this run's contexts, whose ``_trace`` is this frame) made a
            # reference cycle of a failed traced run.
            handle.exception = handle.failed_by = handle.failure = None
            handle.ctx = None  # its ``_trace`` is this frame: no cycle left behind

    def trace_of(self, ctx: RunContext) -> dict[str, Any] | None:
        frame: _Frame | None = ctx._trace
        tracing = self._tracing
        if tracing is None or frame is None or frame.span is None:
            return None
        return tracing.trace_of(frame.span)

    def paused(self, ctx: RunContext, checkpoint_id: str) -> None:
        frame: _Frame | None = ctx._trace
        tracing = self._tracing
        if tracing is not None and frame is not None and frame.span is not None:
            tracing.paused(frame.span, checkpoint_id)

    def run_failed(self, ctx: RunContext, event: AgentEvent) -> None:
        frame: _Frame | None = ctx._trace
        if frame is not None and frame.ctx is ctx and frame.failure is None:
            frame.failure = event

    # -- models ---------------------------------------------------------------------------------
    async def call_model(
        self,
        ctx: RunContext,
        request: ModelRequest,
        call: Callable[[ModelRequest], Awaitable[Message]],
    ) -> Message:
        tracing, models = self._tracing, self._models
        if self._own:
            frame: _Frame | None = ctx._trace
            if frame is not None and frame.own is not None:
                models = frame.models
        if models is None:
            if tracing is None:
                return await call(request)
            return await tracing.call_model(_otel_of(ctx), ctx, request, call)
        if tracing is not None:
            call = functools.partial(tracing.call_model, _otel_of(ctx), ctx, call=call)
        return await models.call_model(ctx, request, call)

    def stream_model(
        self,
        ctx: RunContext,
        request: ModelRequest,
        open_stream: Callable[[ModelRequest], AsyncIterator[MessageChunk]],
    ) -> AsyncIterator[MessageChunk]:
        tracing, models = self._tracing, self._models
        if self._own:
            frame: _Frame | None = ctx._trace
            if frame is not None and frame.own is not None:
                models = frame.models
        if tracing is not None:
            open_stream = functools.partial(
                tracing.stream_model, _otel_of(ctx), ctx, open_stream=open_stream
            )
        if models is None:
            return open_stream(request)
        return models.stream_model(ctx, request, open_stream)

    # -- tools ----------------------------------------------------------------------------------
    def _tool_chain(self, ctx: RunContext) -> _CallbackChain | None:
        """The tool callbacks that run for a call made at ``ctx``: the runner's, or, once an
        agent with callbacks of its own has started, those its frame holds for its calls."""
        tools = self._tools
        if self._own:
            frame: _Frame | None = ctx._trace
            if frame is not None and frame.own is not None:
                tools = frame.tools
        return tools

    def edits_calls(self, ctx: RunContext) -> bool:
        return self._tool_chain(ctx) is not None

    async def call_tool(
        self,
        ctx: ToolContext,
        call: ToolCall,
        invoke: Callable[[], Awaitable[str | ToolResult]],
        tool: Tool,
    ) -> str | ToolResult:
        tracing, tools = self._tracing, self._tool_chain(ctx.run_context)
        if tools is None:
            if tracing is None:
                return await invoke()
            return await _traced_tool(tracing, ctx, call, invoke, tool)
        if tracing is not None:
            invoke = functools.partial(_traced_tool, tracing, ctx, call, invoke, tool)
        return await tools.call_tool(ctx, call, invoke)


def _made(agent: Agent) -> Agent:
    """The agent as the user made it, for the agent callbacks: a private object the framework
    runs in its place (a ``Supervisor`` worker's report-back, a ``PlanExecute`` role's step, the
    loop of a ``ReActAgent`` with agents to transfer to) names it as ``_adk_agent``. Given the
    wrapper, a callback comparing ``agent is writer`` or reading ``agent.output_key`` found
    neither. Only when agent callbacks run: one attribute read per agent start."""
    return getattr(agent, "_adk_agent", agent)


def _in_place(frame: _Frame, agent: Agent, tracing: _GenAITracing | None) -> None:
    """An agent that a wrapper runs in place starts under the wrapper's ``frame`` (one agent):
    it takes the answer a ``before_agent`` callback gave for the wrapper (unless it is a wrapper
    too: then the agent it runs does). Callbacks of its own other than the frame's would never
    run (they are found when a frame is made): refused rather than silently left out."""
    own = getattr(agent, "_adk_callbacks", None)
    if own is not None and own is not frame.own:
        raise TypeError(
            f"agent {agent.name!r} has callbacks of its own but is run in place by "
            f"{getattr(frame.agent, 'name', None)!r}, at its address, as part of that agent, "
            "so they would never run: give them to the agent that runs it, or run it as an "
            "agent of its own (a sub-agent, a workflow step)"
        )
    if tracing is not None and frame.span is not None and getattr(agent, "_adk_flow_span", False):
        tracing.flow(frame.span, frame.measure)  # a ReActAgent's sub-agents: its flow in place
    answer = frame.answer
    if answer is not None and not getattr(agent, "_adk_in_place", False):
        frame.answer = None
        if tracing is not None and frame.span is not None:
            tracing.agent_skipped(frame.span)  # the span is the wrapper's, which is this agent
        raise _Answered(None, _Answer(agent, answer))


class _CapturingInstrumented(_Instrumented):
    """The hooks of a runner that records message content: each agent's own answers are kept, so
    its ``invoke_agent`` span can record the last as ``gen_ai.output.messages``, which the
    conventions list (opt-in) on agent spans. A runner that does not capture content is built as
    ``_Instrumented``, whose ``agent_event`` does no more than before."""

    _captures = True

    def agent_event(self, handle: _Frame | None, event: AgentEvent) -> None:
        super().agent_event(handle, event)
        output = event.output
        if handle is None or output is None:
            return
        if event.run_path is handle.run_path or event.run_path == handle.run_path:  # its own
            message = output.message
            # A stream is an assistant's answer (unless only shown: ``shown_only``); a message
            # may be a tool's result, not an answer; a tool's progress report (``_FORWARDED``) is
            # none.
            if message is None:
                if not output.shown_only and not event._flags & _FORWARDED:
                    handle.output = output
            elif message.role == _ASSISTANT:
                handle.output = output


async def _traced_tool(
    tracing: _GenAITracing,
    ctx: ToolContext,
    call: ToolCall,
    invoke: Callable[[], Awaitable[str | ToolResult]],
    tool: Tool,
) -> str | ToolResult:
    """Run the call in its span, with the tool's context pointing at the span, so a nested run the
    tool starts (``AgentTool``) puts its root agent span under this tool's span. The frame keeps
    the calling agent's own callbacks and counts usage into its span: a model call made for the
    tool call through its context (an MCP server's sampling request, ``adk.mcp``) is the agent's,
    as it is untraced, where the context is the agent's own; without them tracing changed which
    callbacks ran for it, and its tokens were on no agent span."""
    outer = ctx.run_context
    made: list[_Frame] = []

    def nest(otel: Context) -> None:
        inner = outer._fork()
        frame = _Frame(None, inner, ctx.address, otel=otel)
        calling: _Frame | None = outer._trace
        if calling is not None:
            frame.caller = calling
            if calling.own is not None:
                frame.own, frame.models, frame.tools = calling.own, calling.models, calling.tools
        inner._trace = frame
        ctx.run_context = inner
        made.append(frame)

    try:
        return await tracing.call_tool(_otel_of(outer), ctx, call, invoke, nest, tool)
    finally:
        ctx.run_context = outer
        for frame in made:  # the call's context is done with: no cycle left behind
            frame.ctx = None


_AGENT_HOOKS = _Instrumented(None, None)
_AGENT_HOOKS._frames = _AGENT_HOOKS._own = True
