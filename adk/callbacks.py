"""Callbacks: your own code around agents, model calls and tool calls.

Give a ``Runner`` any number of callback objects (``Runner(agent, callbacks=[...])``). A callback
object is a ``Callbacks`` subclass overriding the methods it needs, a ``Callbacks(...)`` built from
plain functions (``Callbacks(before_model=check, after_tool=redact)``), or any object with some of
the methods below. Every method may be a plain or an ``async`` function, except ``on_event``, which
runs inline for every event and must be plain.

========================================  =======================================================
``before_agent(agent, ctx)``              an agent is about to run; return its answer (a ``str``,
                                          a ``Message``) to skip it (see "Skipping an agent")
``after_agent(agent, ctx, error)``        it finished (``error`` is its ``ErrorInfo`` or None;
                                          observe only: return None)
``before_model(ctx, request)``            a model call is about to be made; may change
                                          ``request.messages``/``tools``/``options`` in place
                                          (for this call only), or return a ``Message`` to
                                          answer instead of the model
``after_model(ctx, request, reply)``      the reply is in; return a ``Message`` to replace it
``before_tool(ctx, call)``                a tool call is about to run (``call.arguments`` is
                                          the model's raw JSON text); return a ``str``,
                                          ``ToolResult``, dict or pydantic model to answer
                                          instead of the tool, or assign ``call.arguments`` (a
                                          copy of the model's call) to run it with others
``after_tool(ctx, call, result)``         the tool answered, or raised (``result`` is then the
                                          error result the model would read); return a
                                          ``str``/``ToolResult`` (or a dict, a model) to
                                          replace it
``on_event(event)``                       every event the run yields, just before the consumer
                                          sees it
========================================  =======================================================

Runner-wide and per-agent: ``Runner(agent, callbacks=[...])`` sees every agent, model call and
tool call of the run (Google ADK's plugins); an agent given ``callbacks=[...]`` itself
(``ReActAgent``, the workflow agents, ``ActionAgent``, ``PlanExecute``) has them run for its own
start and end, model calls and tool calls only: not for its sub-agents, nor for the nested run of
an ``AgentTool`` it calls (Google ADK's ``before_model_callback=`` and the like). Per-agent
callbacks are the same objects, but ``on_event`` is runner-wide only (it sees every event of the
run); a workflow agent makes no model or tool call of its own, so it takes agent hooks only.

Composition (several objects, or one object's methods across a run), in one rule: callbacks run in
the order they were given, the runner's before the agent's own (Google ADK runs plugins first).
A ``before_agent``/``before_model``/``before_tool`` that returns a value short-circuits: the
remaining ``before_*`` callbacks (a runner's value skips the agent's own) and the agent or call
itself are skipped. Every ``after_model``/``after_tool`` then runs, in order, on the current
result — what the model or tool produced, or the short-circuit value — and each may replace it
(the next one sees the replacement). That is the Google ADK plugin order for ``before_*``;
``after_*`` chain instead of stopping at the first replacement so that, e.g., a redacting callback
and a logging callback both see every reply.

Skipping an agent: a ``before_agent`` that returns a value skips the agent, and that value is its
answer (Google ADK's ``before_agent_callback`` returning ``Content``): the agent yields one message
event authored by it, so a sequence, loop, flow, ``Supervisor`` or ``AgentTool`` takes it as the
agent's answer, and the run's history records it. A ``str`` is an assistant message; a ``Message``
must be an assistant's, calling no tools. A ``ReActAgent`` writes its ``output_key`` from it, as
from a model's answer; with an ``output_schema`` the answer must match it (a ``str``/``Message``
holding the JSON, a ``dict`` or an instance of the schema) and the instance follows as a
``custom`` output, as the model's validated answer does. A wrapper that runs an agent in place (a
flow, ``Supervisor``'s report-back, a ``PlanExecute`` role) passes the answer to that agent and goes
on around it: the worker still reports back, a skipped planner's answer is read as its plan.
``after_agent`` still runs, with no error (Google ADK skips it), and the agent's span records the
skip (``adk.skipped``). An agent that resumes after a pause is not skipped: it was let run before
the pause and waits for the resume's answers, so ``before_agent`` is called again (with
``ctx.resume`` set) only to observe, and a value it returns then is logged and ignored. An agent
skipped before a pause is not run again on resume: it has answered, and the answer is in the
checkpoint's history.

Pausing a tool call: a ``before_tool`` callback may raise ``Interrupt`` (a person asked before
the call, LangChain's HumanInTheLoopMiddleware). The call pauses before its tool runs, and the
checkpoint records which callback paused it (``_keys``: its function's qualified name). On resume
each party at the call sees only its own pause's resume: the callback its own (else None, never
the approval's decision or the function's answer, ``_views``), and the tool none, running as on
a first call (``tools._executor``); a callback that let the call through after its answer sees
that answer again at the call's later pauses (``_paused_by`` saves it) rather than asking twice.
``after_tool`` sees the resume the tool ran with, None when a ``before_tool`` answered the call
(the pending resume is then another party's: ``call_tool``).
Model callbacks and ``after_tool`` cannot pause (``_model_pause``, ``_after_tool_pause``), nor
can ``before_agent``, ``after_agent`` and ``on_event`` (``_agent_pause``).

Where they see things: ``ctx`` is the agent's ``RunContext`` (``ctx.agent_name``, ``ctx.session``,
``ctx.run_path``) or, for tools, the call's ``ToolContext``. A wrapper that runs its inner agent in
place (a ``ReActAgent`` and its loop, a flow's root agent) is one agent: ``before_agent`` runs once.
``on_event`` sees the events of the run the ``Runner`` drives, not the private events of an
``AgentTool``'s nested run (unless the tool forwards them with ``emit_inner_events``).

Streamed model calls: ``before_model`` works the same (a returned message is streamed as one
chunk). ``after_model`` must see the whole reply before the agent does, so when any ``after_model``
is registered a streamed reply is held until the model has finished and then passed on (as it came,
or as one chunk carrying the replacement). Observe replies without holding streams through tracing
(``adk.tracing``) instead.

Exceptions raised by a callback are not swallowed: in ``before_agent``/``after_agent``/``on_event``
and the model hooks they fail the agent (an error event; an agent's own callback fails that agent,
as a runner's does); in the tool hooks they become the tool's error result, as a failing tool
would. A ``CancelledError`` while the run is not being cancelled is
such a failure too, not the cancellation of the run's reader. Only a settled outcome stands:
``after_agent`` failing for an agent that already failed or paused, or ``on_event`` failing on the
event that ends the run, is logged, and that event still goes out (see docs/tracing.md). Tracing
does not depend on callbacks: spans record the calls that really happened (a call a callback
answered has no ``chat``/``execute_tool`` span).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from pydantic import BaseModel

from . import _hooks
from ._aio import being_cancelled, closing
from ._hooks import ModelRequest
from .events import message_event as _message_event
from .interrupts import (
    _ANSWERS_SLOT,
    _CALLBACK_SLOT,
    Interrupt,
    ResumeContext,
    _InterruptSignal,
    _ResumePlan,
)
from .messages import Message, MessageChunk, ToolCall, ToolCallChunk, join_chunks
from .models.base import ModelOptions
from .tools._executor import tool_failure
from .tools.base import _LIVE, ToolContext, ToolResult
from .tools.function import _ModelResult, _serialise

if TYPE_CHECKING:
    from .agent import Agent
    from .context import RunContext
    from .events import AgentEvent, ErrorInfo

__all__ = ["Callbacks", "ModelRequest"]

_T = TypeVar("_T")
_MaybeAwaitable: TypeAlias = _T | Awaitable[_T]
_ToolOutput: TypeAlias = str | ToolResult
_ToolAnswer: TypeAlias = _ToolOutput | dict[str, Any] | BaseModel  # what a tool callback may return
_AgentAnswer: TypeAlias = str | Message | dict[str, Any] | BaseModel  # what before_agent may return

_HOOKS = (
    "before_agent",
    "after_agent",
    "before_model",
    "after_model",
    "before_tool",
    "after_tool",
    "on_event",
)


class Callbacks:
    """A set of callbacks: subclass and override what you need, or pass plain functions.

    ``Callbacks(before_model=fn, ...)`` uses the given functions (plain or async) in place of the
    methods; methods neither overridden nor given cost nothing at run time.
    """

    def __init__(
        self,
        *,
        # The methods' own signatures below, which the given functions are called with (and
        # checked against where they are given, ``_check_signature``): a type checker refuses a
        # function of another shape, or one returning what the hook does not take.
        before_agent: Callable[[Agent, RunContext], _MaybeAwaitable[_AgentAnswer | None]]
        | None = None,
        after_agent: Callable[[Agent, RunContext, ErrorInfo | None], _MaybeAwaitable[None]]
        | None = None,
        before_model: Callable[[RunContext, ModelRequest], _MaybeAwaitable[Message | None]]
        | None = None,
        after_model: Callable[[RunContext, ModelRequest, Message], _MaybeAwaitable[Message | None]]
        | None = None,
        before_tool: Callable[[ToolContext, ToolCall], _MaybeAwaitable[_ToolAnswer | None]]
        | None = None,
        after_tool: Callable[
            [ToolContext, ToolCall, _ToolOutput], _MaybeAwaitable[_ToolAnswer | None]
        ]
        | None = None,
        on_event: Callable[[AgentEvent], None] | None = None,
    ) -> None:
        given = {
            "before_agent": before_agent,
            "after_agent": after_agent,
            "before_model": before_model,
            "after_model": after_model,
            "before_tool": before_tool,
            "after_tool": after_tool,
            "on_event": on_event,
        }
        for name, fn in given.items():
            if fn is None:
                continue
            if not callable(fn):
                raise TypeError(f"Callbacks({name}=...) needs a function, got {fn!r}")
            setattr(self, name, fn)

    def before_agent(self, agent: Agent, ctx: RunContext) -> _MaybeAwaitable[_AgentAnswer | None]:
        """``agent`` is about to run at ``ctx``; return its answer (a ``str``, a ``Message``; for
        an agent with an ``output_schema`` also a dict or an instance) to skip it."""
        return None

    def after_agent(
        self, agent: Agent, ctx: RunContext, error: ErrorInfo | None
    ) -> _MaybeAwaitable[None]:
        """``agent`` finished; ``error`` says why it failed (None: it ended normally or was
        stopped by its caller)."""
        return None

    def before_model(
        self, ctx: RunContext, request: ModelRequest
    ) -> _MaybeAwaitable[Message | None]:
        """Return a ``Message`` to answer instead of the model (the model is not called)."""
        return None

    def after_model(
        self, ctx: RunContext, request: ModelRequest, reply: Message
    ) -> _MaybeAwaitable[Message | None]:
        """Return a ``Message`` to replace ``reply``."""
        return None

    def before_tool(self, ctx: ToolContext, call: ToolCall) -> _MaybeAwaitable[_ToolAnswer | None]:
        """Return a result to answer instead of the tool (the tool does not run); a dict or a
        pydantic model is sent as JSON. ``call.arguments`` is the model's raw JSON text."""
        return None

    def after_tool(
        self, ctx: ToolContext, call: ToolCall, result: _ToolOutput
    ) -> _MaybeAwaitable[_ToolAnswer | None]:
        """Return a result to replace ``result`` (a dict or a pydantic model is sent as JSON)."""
        return None

    def on_event(self, event: AgentEvent) -> None:
        """Every event of the run, just before the consumer sees it. Keep it quick."""


def _provided(obj: object, name: str) -> Callable[..., Any] | None:
    """The callable ``obj`` offers for hook ``name``, or None when it has none (or only
    ``Callbacks``' own no-op)."""
    fn: Callable[..., Any] | None = getattr(obj, name, None)
    if fn is None:
        return None
    if not callable(fn):
        raise TypeError(f"{obj!r}.{name} is not callable")
    if getattr(fn, "__func__", None) is getattr(Callbacks, name):
        return None
    return fn


async def _observe(hook: str, callbacks: Sequence[Callable[..., Any]], *args: Any) -> Any:
    """Call an agent hook's callbacks in order (plain or async). ``before_agent``'s first value
    stops the others and is returned (the agent's answer, see "Skipping an agent"); the other
    hooks only observe. A ``CancelledError`` of their own, while the run is not being cancelled,
    fails the run rather than cancelling its reader (``_callback_cancelled``)."""
    for fn in callbacks:
        try:
            result = fn(*args)
            if _isawaitable(result):
                result = await result
        except asyncio.CancelledError as exc:
            if being_cancelled():
                raise
            raise _callback_cancelled(hook, fn) from exc
        except Interrupt as exc:
            raise _agent_pause(fn, hook) from exc
        if result is not None:
            if hook == "before_agent":
                return _check_answer(fn, result)
            raise TypeError(
                f"{hook} callback {fn!r} returned a value; {hook} callbacks only observe "
                f"(return None){_AFTER_AGENT_HINT if hook == 'after_agent' else ''}"
            )
    return None


# What a Google ADK port returning ``Content`` from ``after_agent_callback`` is told to do instead:
# the answer has been streamed, recorded and stored by then (see docs/google_adk.md).
_AFTER_AGENT_HINT = (
    ": the agent's answer is out when it ends (streamed, in the history, in its output_key); "
    "to replace a model agent's answer, return a Message from after_model for its final reply "
    "(the one without tool calls), or add a step after the agent that answers instead"
)


def _check_answer(fn: Callable[..., Any], value: Any) -> Any:
    """A ``before_agent`` value that may be an agent's answer. Which of them fits the agent is
    for the agent to say (``_answer_events``); anything else is refused here, as a callback that
    only observes may return a value by accident (a count, ``list.pop``)."""
    if isinstance(value, (str, Message, dict, BaseModel)):
        return value
    raise TypeError(
        f"before_agent callback {fn!r} returned {type(value).__name__}; return None to run the "
        "agent, or its answer to skip it: a str or a Message (for an agent with an output_schema "
        "also a dict or an instance of the schema)"
    )


def _callback_cancelled(hook: str, fn: object) -> RuntimeError:
    """The failure a ``CancelledError`` out of an agent or event callback is when the run is not
    being cancelled: the callback awaited something that someone else cancelled (or read a
    cancelled future's result). Raised as it is, it would get past every ``except Exception``
    that makes a callback's failure the run's error event, and pass for the cancellation of
    whoever reads the run, which nobody cancelled. (Agents' own are told apart the same way,
    ``_driver.is_cancellation``; a model or tool callback fails inside its call, which does.)"""
    return RuntimeError(
        f"{hook} callback {fn!r} raised CancelledError while the run was not being cancelled "
        "(it awaited something that was cancelled)"
    )


# Callbacks may be plain or async functions: call, then await only what is awaitable.
_isawaitable = inspect.isawaitable


# What each hook is called with, and how a Google ADK port's callback of that hook is written,
# for the refusal of a callback that cannot take the call (``_check_signature``).
_PARAMETERS = {
    "before_agent": ("agent, ctx", "before_agent_callback(callback_context)"),
    "after_agent": ("agent, ctx, error", "after_agent_callback(callback_context)"),
    "before_model": ("ctx, request", "before_model_callback(callback_context, llm_request)"),
    "after_model": ("ctx, request, reply", "after_model_callback(callback_context, llm_response)"),
    "before_tool": ("ctx, call", "before_tool_callback(tool, args, tool_context)"),
    "after_tool": (
        "ctx, call, result",
        "after_tool_callback(tool, args, tool_context, tool_response)",
    ),
    "on_event": ("event", ""),
}


def _check_signature(hook: str, fn: Callable[..., Any]) -> None:
    """Refuse, where it is given, a callback that cannot be called with ``hook``'s arguments (a
    Google ADK callback ported with its own parameters, a method missing one): called, it would
    raise a ``TypeError`` at every agent, model or tool call, and in a tool hook that becomes the
    tool's error result, which the model reads while the run goes on, the tool never run. A
    callable whose signature cannot be read (some builtins) is taken as it is. A decorated
    function is checked as the wrapper that is called, not the function ``functools.wraps``
    names in ``__wrapped__``: a decorator may supply arguments itself (click's
    ``pass_context``), so the function's own parameters say nothing of what the call takes."""
    try:
        signature = inspect.signature(fn, follow_wrapped=False)
    except (TypeError, ValueError):
        return
    parameters, google = _PARAMETERS[hook]
    try:
        signature.bind(*parameters.split(", "))
    except TypeError as exc:
        text = f"{hook} callback {fn!r} cannot be called as {hook}({parameters}): {exc}"
        if google:
            text += f" (Google ADK's {google} is {hook}({parameters}) here)"
        raise TypeError(text) from None


class _CallbackChain:
    """The runner's callback objects, compiled per hook into the list of functions to call."""

    __slots__ = (
        "_tool_keys",
        "after_agent",
        "after_model",
        "after_tool",
        "before_agent",
        "before_model",
        "before_tool",
        "on_event",
    )

    def __init__(self, callbacks: Iterable[Any]) -> None:
        self.before_agent: list[Callable[..., Any]] = []
        self.after_agent: list[Callable[..., Any]] = []
        self.before_model: list[Callable[..., Any]] = []
        self.after_model: list[Callable[..., Any]] = []
        self.before_tool: list[Callable[..., Any]] = []
        self.after_tool: list[Callable[..., Any]] = []
        self.on_event: list[Callable[[AgentEvent], None]] = []
        self._tool_keys: list[str] | None = None
        for obj in callbacks:
            if isinstance(obj, type):
                raise TypeError(f"callbacks takes objects, not classes: use {obj.__name__}()")
            found = [(name, fn) for name in _HOOKS if (fn := _provided(obj, name)) is not None]
            if not found and not isinstance(obj, Callbacks):
                hint = " (wrap a function as Callbacks(before_model=fn))" if callable(obj) else ""
                raise TypeError(
                    f"{obj!r} is not a callbacks object: it has none of {', '.join(_HOOKS)}{hint}"
                )
            for name, fn in found:
                _check_signature(name, fn)
                if name == "on_event" and inspect.iscoroutinefunction(fn):
                    raise TypeError(
                        f"on_event callback {fn!r} must be a plain function: it runs inline for "
                        "every event (hand slow work to a task or a queue)"
                    )
                getattr(self, name).append(fn)

    @classmethod
    def of(cls, callbacks: Iterable[Any]) -> _CallbackChain | None:
        chain = cls(callbacks)
        return chain if any(getattr(chain, name) for name in _HOOKS) else None

    def then(self, other: _CallbackChain) -> _CallbackChain:
        """This chain's callbacks, then ``other``'s, hook by hook: a runner's and an agent's own,
        in the order they run (the runner's first)."""
        both = _CallbackChain(())
        for name in _HOOKS:
            setattr(both, name, [*getattr(self, name), *getattr(other, name)])
        return both

    @property
    def tool_keys(self) -> list[str]:
        """The ``before_tool`` callbacks' keys (``_keys``), made when first needed: at a tool
        call of a resumed run, or when a callback pauses."""
        keys = self._tool_keys
        if keys is None:
            keys = self._tool_keys = _keys(self.before_tool)
        return keys

    @property
    def wraps_models(self) -> bool:
        return bool(self.before_model or self.after_model)

    @property
    def wraps_tools(self) -> bool:
        return bool(self.before_tool or self.after_tool)

    # -- agents and events ----------------------------------------------------------------------
    async def run_before_agent(self, agent: Agent, ctx: RunContext) -> Any:
        """The first answer a ``before_agent`` callback gives (None: the agent runs)."""
        return await _observe("before_agent", self.before_agent, agent, ctx)

    async def run_after_agent(self, agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        await _observe("after_agent", self.after_agent, agent, ctx, error)

    def run_on_event(self, event: AgentEvent) -> None:
        for fn in self.on_event:
            try:
                result = fn(event)
            except asyncio.CancelledError as exc:
                if being_cancelled():
                    raise
                raise _callback_cancelled("on_event", fn) from exc
            except Interrupt as exc:
                raise _agent_pause(fn, "on_event") from exc
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: close it so Python does not warn later
                raise TypeError(f"on_event callback {fn!r} returned an awaitable; it must be plain")

    # -- models ---------------------------------------------------------------------------------
    async def run_before_model(self, ctx: RunContext, request: ModelRequest) -> Message | None:
        for fn in self.before_model:
            try:
                reply = fn(ctx, request)
                if _isawaitable(reply):
                    reply = await reply
            except Interrupt as exc:
                raise _model_pause(fn, "before_model") from exc
            if reply is not None:
                return _check_message(fn, "before_model", reply)
        return None

    async def run_after_model(
        self, ctx: RunContext, request: ModelRequest, reply: Message
    ) -> Message:
        given = reply
        try:
            for fn in self.after_model:
                try:
                    replaced = fn(ctx, request, reply)
                    if _isawaitable(replaced):
                        replaced = await replaced
                except Interrupt as exc:
                    raise _model_pause(fn, "after_model") from exc
                if replaced is not None:
                    reply = _check_message(fn, "after_model", replaced)
        except BaseException:
            # A callback refused the reply (an output guardrail), so no agent receives it and
            # nothing records it; the model was called and the reply paid for all the same, and
            # the run's total counts every call (inside an AgentTool, of a run that goes on).
            from .context import count_usage

            count_usage(ctx, given)
            raise
        return reply

    async def call_model(
        self,
        ctx: RunContext,
        request: ModelRequest,
        call: Callable[[ModelRequest], Awaitable[Message]],
    ) -> Message:
        _own_request(request)
        reply = await self.run_before_model(ctx, request) if self.before_model else None
        if reply is None:
            reply = await call(request)
        if not self.after_model:
            return reply
        return await self.run_after_model(ctx, request, reply)

    async def stream_model(
        self,
        ctx: RunContext,
        request: ModelRequest,
        open_stream: Callable[[ModelRequest], AsyncIterator[MessageChunk]],
    ) -> AsyncIterator[MessageChunk]:
        """A streamed call through the model callbacks (see the module docstring)."""
        _own_request(request)
        reply = await self.run_before_model(ctx, request)
        if reply is None:
            source = open_stream(request)
            if not self.after_model:
                async with closing(source):
                    async for chunk in source:
                        yield chunk
                return
            async with closing(source):
                chunks = [chunk async for chunk in source]
            reply = join_chunks(chunks)
            final = await self.run_after_model(ctx, request, reply)
            if final is reply:
                for chunk in chunks:
                    yield chunk
                return
            reply = final
        else:
            reply = await self.run_after_model(ctx, request, reply)
        yield _as_chunk(reply)

    # -- tools ----------------------------------------------------------------------------------
    async def call_tool(
        self,
        ctx: ToolContext,
        call: ToolCall,
        invoke: Callable[[], Awaitable[_ToolOutput]],
    ) -> _ToolOutput:
        result: _ToolOutput | None = None
        plan = ctx.run_context._run.plan
        views = _views(plan, ctx.address, self.tool_keys) if plan is not None else None
        for index, fn in enumerate(self.before_tool):
            if views is not None:
                ctx._view = views.get(self.tool_keys[index])
            try:
                result = fn(ctx, call)
                if _isawaitable(result):
                    result = await result
            except Interrupt as exc:
                _paused_by(exc, ctx.address, self.tool_keys[index], views)
                raise
            finally:
                ctx._view = _LIVE
            if result is not None:
                result = _check_tool_output(fn, "before_tool", result)
                break
        if result is None:
            try:
                result = await invoke()
            except Interrupt as exc:
                if views:
                    _paused_by(exc, ctx.address, None, views)
                raise
            except (Exception, asyncio.CancelledError) as exc:
                # The tool raised: its error result is what after_tool reviews (Google ADK's
                # on_tool_error_callback), as the model would read it. Without after_tool the
                # exception goes on to the executor, which makes the same result.
                failed = tool_failure(exc, call.name, ctx) if self.after_tool else None
                if failed is None:
                    raise
                result = failed
        elif plan is not None and self.after_tool:
            # A before_tool answered: the tool did not run, so no resume answered it. The call's
            # pending resume is another party's (the answering callback's own, an approval the
            # tool never reached), which after_tool would take for the tool's.
            ctx._view = None
        # A model a function tool returned is shown as its text, as the model reads it
        # (``_ModelResult``); kept whole, with the model, unless a callback replaces it.
        shown = result.content if type(result) is _ModelResult else result
        try:
            for fn in self.after_tool:
                try:
                    replaced = fn(ctx, call, shown)
                    if _isawaitable(replaced):
                        replaced = await replaced
                except Interrupt as exc:
                    raise _after_tool_pause(fn) from exc
                if replaced is not None:
                    result = _check_tool_output(fn, "after_tool", replaced)
                    shown = result.content if type(result) is _ModelResult else result
        finally:
            ctx._view = _LIVE
        return result


class _AgentCallbacks:
    """An agent's own callbacks (``callbacks=`` of ``ReActAgent`` and the others), kept on the
    agent as ``_adk_callbacks``; the run's hooks find them there when the agent starts
    (``adk._instrument``). ``chain`` is the agent's; ``after(runner)`` the chain that runs for
    the agent in a run of a runner with ``runner``'s callbacks (the runner's first), made once
    per runner: per agent start it is a lookup, not a new chain."""

    __slots__ = ("_last", "chain")

    def __init__(self, chain: _CallbackChain) -> None:
        self.chain = chain
        self._last: tuple[_CallbackChain | None, _CallbackChain] = (None, chain)
        _hooks.agent_callbacks = True  # agent starts look for them from now on (see there)

    def after(self, runner: _CallbackChain | None) -> _CallbackChain:
        last = self._last
        if last[0] is runner:
            return last[1]
        both = self.chain if runner is None else runner.then(self.chain)
        self._last = (runner, both)
        return both


def _agent_callbacks(callbacks: object, what: str, *, calls: bool = True) -> _AgentCallbacks | None:
    """The ``callbacks=`` given to the agent ``what`` (``"ReActAgent 'x'"``), checked where they
    are given: None when they have nothing to run. ``calls``: the agent makes model and tool
    calls of its own (a workflow agent makes none, so model and tool hooks would never run)."""
    if isinstance(callbacks, (str, bytes)) or not isinstance(callbacks, Iterable):
        raise TypeError(
            f"{what}: callbacks must be a list of callback objects, got {type(callbacks).__name__}"
        )
    chain = _CallbackChain.of(callbacks)
    if chain is None:
        return None
    if chain.on_event:
        raise TypeError(
            f"{what}: on_event is runner-wide (it sees every event of the run): give "
            "that callback object to Runner(agent, callbacks=[...]) instead"
        )
    if not calls:
        given = [name for name in _HOOKS[2:] if getattr(chain, name)]  # past the agent hooks
        if given:
            raise TypeError(
                f"{what} makes no model or tool calls of its own, so its callbacks take "
                f"before_agent and after_agent only, not {', '.join(given)}: give those to the "
                "agents that make the calls, or to the Runner for all of them"
            )
    return _AgentCallbacks(chain)


def _answer_message(agent: str, value: Any) -> Message:
    """A ``before_agent`` answer as the message of an agent without an output schema."""
    if isinstance(value, str):
        return Message.assistant(value)
    if isinstance(value, Message):
        if value.role != "assistant":
            raise TypeError(
                f"before_agent answered for agent {agent!r} with a {value.role.value!r} message; "
                "an agent's answer is an assistant message (Message.assistant(...), or a str)"
            )
        if value.tool_calls:
            # Recorded in the history with no results, it would make the next model call that
            # reads the history invalid (every provider wants a result for each call).
            raise TypeError(
                f"before_agent answered for agent {agent!r} with a message that calls tools; "
                "an answer that skips the agent calls none (its tools would never run)"
            )
        return value
    raise TypeError(
        f"before_agent answered for agent {agent!r} with a {type(value).__name__}, which only "
        "an agent with an output_schema takes; answer with a str or a Message"
    )


def _answer_events(agent: Any, value: Any, ctx: RunContext) -> list[AgentEvent]:
    """The events of ``agent`` skipped with ``value`` as its answer: what the agent makes of it
    (``_adk_answer``: a ``ReActAgent`` checks it against its output schema and writes its
    output key), else one message event."""
    answer = getattr(agent, "_adk_answer", None)
    if answer is not None:
        events: list[AgentEvent] = answer(value, ctx)
        return events
    return [_message_event(_answer_message(agent.name, value))]


class _Answer:
    """What runs in place of an agent that a ``before_agent`` callback skipped: its answer's
    events (``_answer_events``), made when the driver pulls them, so a value the agent refuses
    fails it as its own error would (``after_agent`` sees the error)."""

    __slots__ = ("agent", "description", "name", "value")

    def __init__(self, agent: Agent, value: Any) -> None:
        self.agent = agent
        self.name = agent.name
        self.description = agent.description
        self.value = value

    async def run(self, input: object, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        for event in _answer_events(self.agent, self.value, ctx):
            yield event


def _own_request(request: ModelRequest) -> None:
    """Give the model callbacks a request of their own to change in place, as they may: its
    messages list and options are the agent's, so an edit meant for one call would otherwise stay
    in the agent, repeated on every later call and saved in its checkpoints. Shallow: the messages
    themselves are shared (a callback replaces a message rather than editing it)."""
    request.messages = list(request.messages)
    options = request.options
    if isinstance(options, ModelOptions):
        request.options = _copied_options(options)


def _copied_options(options: ModelOptions) -> ModelOptions:
    """A copy of ``options`` whose lists and dicts (``stop``, ``extra``, ...) are its own too.
    Not a deep copy: that costs several times more, on every model call."""
    copied = options.model_copy()
    fields = copied.__dict__  # written directly: assigning would mark the fields as set
    for name, value in list(fields.items()):
        if isinstance(value, (list, dict)):  # tuples here: a `|` union is built per call
            fields[name] = value.copy()
    return copied


def _check_message(fn: Callable[..., Any], hook: str, value: Any) -> Message:
    if not isinstance(value, Message):
        raise TypeError(
            f"{hook} callback {fn!r} returned {type(value).__name__}; return a Message or None"
        )
    return value


def _check_tool_output(fn: Callable[..., Any], hook: str, value: Any) -> _ToolOutput:
    """A tool callback's result as a tool's. A dict or a pydantic model is sent as JSON, as a
    function tool's return value is: Google ADK's tool callbacks return a dict, and a port's
    cached or refused result should not need rewriting. Other values are refused, as a callback
    that only observes may return one by accident (a count, ``list.pop``)."""
    if isinstance(value, (str, ToolResult)):
        return value
    if isinstance(value, (dict, BaseModel)):
        return _serialise(value)
    raise TypeError(
        f"{hook} callback {fn!r} returned {type(value).__name__}; return a str, a ToolResult, "
        "a dict or a pydantic model (sent as JSON), or None"
    )


def _keys(fns: Sequence[Callable[..., Any]]) -> list[str]:
    """A key for each ``before_tool`` callback that names it across a restart: its function's
    module and qualified name (a method's includes its class), ``#2``, ``#3``... for a second and
    third of one name. A checkpoint records which callback paused a call by it, so a redeploy
    that adds or removes other callbacks does not hand one callback's answer to another."""
    keys: list[str] = []
    for fn in fns:
        func = getattr(fn, "__func__", fn)
        name = getattr(func, "__qualname__", None) or type(func).__qualname__
        key = f"{getattr(func, '__module__', None) or type(func).__module__}.{name}"
        count = sum(1 for k in keys if k == key or k.startswith(key + "#"))
        keys.append(f"{key}#{count + 1}" if count else key)
    return keys


def before_tool_names(runner_callbacks: Iterable[Any], parts: Iterable[object]) -> set[str]:
    """The names (``_keys`` without their count) of the ``before_tool`` callbacks a runner's
    runs may call: the runner's own and those of every agent of its tree (``parts``). A resume
    refuses a call paused by a callback none of them is (``Runner._check_gates``)."""
    fns: list[Callable[..., Any]] = []
    chain = _CallbackChain.of(runner_callbacks)
    if chain is not None:
        fns.extend(chain.before_tool)
    for part in parts:
        own = getattr(part, "_adk_callbacks", None)
        if isinstance(own, _AgentCallbacks):
            fns.extend(own.chain.before_tool)
    return {key.split("#", 1)[0] for key in _keys(fns)}


def _views(plan: _ResumePlan, address: str, keys: list[str]) -> dict[str, ResumeContext]:
    """What each ``before_tool`` callback at the call at ``address`` of a resumed run sees as
    ``ctx.resume``, by key: its own pause's resume when the call paused in it, the answer it was
    given at an earlier pause of this call when a later party paused it since (it let the call
    through then, and must not ask again), else nothing (None). Never the tool's resume: the
    approval's decision or the function's answer is not the callback's."""
    slots = plan.states.get(address)
    if not slots:
        return {}
    own = plan.resume_for(address)
    if own is None:
        # The call that paused here has resumed (its points consumed; its slots stay in the
        # plan): this is a later call at the same address, a later round's of a model that
        # numbers every turn's calls alike, which starts fresh. Its callbacks took the first
        # call's answers for their own and let it through unasked.
        return {}
    views: dict[str, ResumeContext] = {}
    answers = slots.get(_ANSWERS_SLOT)
    if isinstance(answers, dict):
        for key, answer in answers.items():
            if key in keys and isinstance(answer, dict):
                data, state = answer.get("data"), answer.get("state")
                views[key] = ResumeContext(True, state, True, data)
    paused = slots.get(_CALLBACK_SLOT)
    if paused is not None and paused in keys and own.is_target:
        views[paused] = own
    return views


def _paused_by(
    exc: Interrupt, address: str, key: str | None, views: dict[str, ResumeContext] | None
) -> None:
    """Record, in the signal of the pause ``exc`` makes at the call at ``address``, who paused
    it (``key``: a ``before_tool`` callback's; None: the tool's) and the answers the callbacks
    that let the call through on this resume were given (``_views``), to see them again."""
    signal = exc._signal
    if signal is None:
        signal = exc._signal = _InterruptSignal.single(address, exc.info, exc.state)
    if key is not None:
        signal.save(address, key, _CALLBACK_SLOT)
    answers = {
        k: {"data": view.data, "state": view.state} for k, view in (views or {}).items() if k != key
    }
    if answers:
        signal.save(address, answers, _ANSWERS_SLOT)


def _model_pause(fn: Callable[..., Any], hook: str) -> TypeError:
    """The refusal of an ``Interrupt`` out of a model callback. A pause there would be the
    agent's, saving none of its conversation: the resume found no state to go on from and
    failed with the checkpoint kept. A ``before_tool`` callback (or a tool) can pause a call."""
    return TypeError(
        f"{hook} callback {fn!r} raised adk.Interrupt: a model callback cannot pause the run "
        "(the agent saves no state to resume a model call from); raise it in a before_tool "
        "callback or in a tool, which pause one tool call and resume it"
    )


_NO_PAUSE = {
    "before_agent": "the agent has not started, so it has saved no state to resume from, and "
    "its resume would take the callback's answer for its own",
    "after_agent": "the agent has finished and saves nothing to resume from (inside an "
    "AgentTool its resume would run it again)",
    "on_event": "it observes the events going out, and its pause would be taken for the "
    "agent's, which saved nothing to resume from",
}


def _agent_pause(fn: Callable[..., Any], hook: str) -> TypeError:
    """The refusal of an ``Interrupt`` out of ``before_agent``, ``after_agent`` or ``on_event``,
    which fails the agent (or the run) as their other errors do. Their pause was taken for the
    agent's own, which has saved nothing: an agent that cannot resume without state failed the
    resume ("holds no saved state"), one inside an ``AgentTool`` ran again from the start at
    every resume (its tools too), and a custom agent would have read the callback's answer as
    its own. Pausing an agent's start properly would need the callback's pause told apart at
    the agent's address and hidden from the agent and the workflows above it (see
    docs/interrupts.md): a person is asked at a tool call instead."""
    return TypeError(
        f"{hook} callback {fn!r} raised adk.Interrupt: {_NO_PAUSE[hook]}; raise it in a "
        "before_tool callback or in a tool, which pause one tool call and resume it (an agent "
        "called through an AgentTool is such a call)"
    )


def _after_tool_pause(fn: Callable[..., Any]) -> TypeError:
    """The refusal of an ``Interrupt`` out of ``after_tool``, which fails the call as its other
    errors do. The call has run by then, and a pause there is the call's: its resume ran the tool
    again (a payment made twice). Ask before the call, in ``before_tool``."""
    return TypeError(
        f"after_tool callback {fn!r} raised adk.Interrupt: the call has run, and its resume "
        "would run it again; pause in a before_tool callback, before the call runs"
    )


def _as_chunk(message: Message) -> MessageChunk:
    """``message`` as one streamed chunk (joining it gives the message back)."""
    calls = [
        ToolCallChunk.model_construct(index=i, id=c.id, name=c.name, arguments=c.arguments)
        for i, c in enumerate(message.tool_calls)
    ]
    finish = message.metadata.get("finish_reason") or ("tool_calls" if calls else "stop")
    return MessageChunk.model_construct(
        content=message.content,
        reasoning=message.reasoning or "",
        tool_calls=calls,
        usage=message.usage,
        finish_reason=finish,
    )
