"""Callbacks: your own code around agents, model calls and tool calls.

Give a ``Runner`` any number of callback objects (``Runner(agent, callbacks=[...])``). A callback
object is a ``Callbacks`` subclass overriding the methods it needs, a ``Callbacks(...)`` built from
plain functions (``Callbacks(before_model=check, after_tool=redact)``), or any object with some of
the methods below. Every method may be a plain or an ``async`` function, except ``on_event``, which
runs inline for every event and must be plain.

========================================  =======================================================
``before_agent(agent, ctx)``              an agent is about to run (observe only: return None)
``after_agent(agent, ctx, error)``        it finished (``error`` is its ``ErrorInfo`` or None)
``before_model(ctx, request)``            a model call is about to be made; may change
                                          ``request.messages``/``tools``/``options`` in place
                                          (for this call only), or return a ``Message`` to
                                          answer instead of the model
``after_model(ctx, request, reply)``      the reply is in; return a ``Message`` to replace it
``before_tool(ctx, call)``                a tool call is about to run (``call.arguments`` is
                                          the model's raw JSON text); return a ``str``,
                                          ``ToolResult``, dict or pydantic model to answer
                                          instead of the tool
``after_tool(ctx, call, result)``         the tool answered; return a ``str``/``ToolResult``
                                          (or a dict, a model) to replace its result
``on_event(event)``                       every event the run yields, just before the consumer
                                          sees it
========================================  =======================================================

Composition (several objects, or one object's methods across a run), in one rule: callbacks run in
the order they were given. A ``before_model``/``before_tool`` that returns a value short-circuits:
the remaining ``before_*`` callbacks and the call itself are skipped. Every ``after_model`` /
``after_tool`` then runs, in order, on the current result — what the model or tool produced, or the
short-circuit value — and each may replace it (the next one sees the replacement). That is the
Google ADK plugin order for ``before_*``; ``after_*`` chain instead of stopping at the first
replacement so that, e.g., a redacting callback and a logging callback both see every reply.

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
and the model hooks they fail the agent (an error event); in the tool hooks they become the tool's
error result, as a failing tool would. A ``CancelledError`` while the run is not being cancelled is
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

from ._aio import closing
from ._hooks import ModelRequest
from .messages import Message, MessageChunk, ToolCall, ToolCallChunk, join_chunks
from .models.base import ModelOptions
from .streams import _being_cancelled
from .tools.base import ToolContext, ToolResult
from .tools.function import _serialise

if TYPE_CHECKING:
    from .agent import Agent
    from .context import RunContext
    from .events import AgentEvent, ErrorInfo

__all__ = ["Callbacks", "ModelRequest"]

_T = TypeVar("_T")
_MaybeAwaitable: TypeAlias = _T | Awaitable[_T]
_ToolOutput: TypeAlias = str | ToolResult
_ToolAnswer: TypeAlias = _ToolOutput | dict[str, Any] | BaseModel  # what a tool callback may return

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
        before_agent: Callable[..., Any] | None = None,
        after_agent: Callable[..., Any] | None = None,
        before_model: Callable[..., Any] | None = None,
        after_model: Callable[..., Any] | None = None,
        before_tool: Callable[..., Any] | None = None,
        after_tool: Callable[..., Any] | None = None,
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

    def before_agent(self, agent: Agent, ctx: RunContext) -> _MaybeAwaitable[None]:
        """``agent`` is about to run at ``ctx``."""
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


async def _observe(hook: str, callbacks: Sequence[Callable[..., Any]], *args: Any) -> None:
    """Call an agent hook's callbacks in order (plain or async); they only observe. A
    ``CancelledError`` of their own, while the run is not being cancelled, fails the run rather
    than cancelling its reader (``_callback_cancelled``)."""
    for fn in callbacks:
        try:
            result = fn(*args)
            if _isawaitable(result):
                result = await result
        except asyncio.CancelledError as exc:
            if _being_cancelled():
                raise
            raise _callback_cancelled(hook, fn) from exc
        if result is not None:
            raise TypeError(
                f"{hook} callback {fn!r} returned a value; agent callbacks only observe "
                "(return None)"
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


class _CallbackChain:
    """The runner's callback objects, compiled per hook into the list of functions to call."""

    __slots__ = (
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

    @property
    def wraps_models(self) -> bool:
        return bool(self.before_model or self.after_model)

    @property
    def wraps_tools(self) -> bool:
        return bool(self.before_tool or self.after_tool)

    # -- agents and events ----------------------------------------------------------------------
    async def run_before_agent(self, agent: Agent, ctx: RunContext) -> None:
        await _observe("before_agent", self.before_agent, agent, ctx)

    async def run_after_agent(self, agent: Agent, ctx: RunContext, error: ErrorInfo | None) -> None:
        await _observe("after_agent", self.after_agent, agent, ctx, error)

    def run_on_event(self, event: AgentEvent) -> None:
        for fn in self.on_event:
            try:
                result = fn(event)
            except asyncio.CancelledError as exc:
                if _being_cancelled():
                    raise
                raise _callback_cancelled("on_event", fn) from exc
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: close it so Python does not warn later
                raise TypeError(f"on_event callback {fn!r} returned an awaitable; it must be plain")

    # -- models ---------------------------------------------------------------------------------
    async def run_before_model(self, ctx: RunContext, request: ModelRequest) -> Message | None:
        for fn in self.before_model:
            reply = fn(ctx, request)
            if _isawaitable(reply):
                reply = await reply
            if reply is not None:
                return _check_message(fn, "before_model", reply)
        return None

    async def run_after_model(
        self, ctx: RunContext, request: ModelRequest, reply: Message
    ) -> Message:
        for fn in self.after_model:
            replaced = fn(ctx, request, reply)
            if _isawaitable(replaced):
                replaced = await replaced
            if replaced is not None:
                reply = _check_message(fn, "after_model", replaced)
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
        for fn in self.before_tool:
            result = fn(ctx, call)
            if _isawaitable(result):
                result = await result
            if result is not None:
                result = _check_tool_output(fn, "before_tool", result)
                break
        if result is None:
            result = await invoke()
        for fn in self.after_tool:
            replaced = fn(ctx, call, result)
            if _isawaitable(replaced):
                replaced = await replaced
            if replaced is not None:
                result = _check_tool_output(fn, "after_tool", replaced)
        return result


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
