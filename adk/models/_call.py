"""Calling a model from an agent, through the run's hooks (tracing, callbacks) when it has any.

Every model call goes through here, so this is where a ``ChatModel`` of the user's that answers
with the wrong thing (a ``str``, a dict, ``None``, a message with role ``tool``, a stream of
strings) is stopped with a ``TypeError`` naming the model's class, before the answer reaches an
agent that would fail on it with an ``AttributeError`` or send it back as an invalid request.

Without hooks the model's own awaitable is handed back, with no wrapper coroutine around it (one
frame fewer on every resumption, one object fewer per run in flight): a model object's replies are
checked until it has answered properly once, which is where a broken adapter shows, and from then
on a call costs one attribute lookup (the mark is set on the model object, as ``_adk_parent`` is on
agents; an object that takes no attributes is checked on every call). With hooks every reply is
checked: their coroutine is there anyway.
"""

from __future__ import annotations

import contextlib
import reprlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from .._aio import closing
from .._hooks import ModelRequest
from ..context import RunContext
from ..messages import Message, MessageChunk, Role
from ..streams import MessageStream
from ..tools.base import ToolSpec
from .base import ChatModel, ModelOptions

__all__ = ["generate", "stream"]


def generate(
    ctx: RunContext,
    model: ChatModel,
    messages: list[Message],
    tools: Sequence[ToolSpec],
    options: ModelOptions | None,
) -> Awaitable[Message]:
    """The awaitable of one model call. Not a coroutine of its own: without hooks the caller
    awaits the model's, one frame fewer on every resumption and one object fewer per run in
    flight."""
    run = ctx._run
    if run.turns is not None:  # the run's max_turns: counted before the call, which it may refuse
        run.turns.take(ctx)
    hooks = run.hooks
    if hooks is None:
        call = model.generate(messages, tools=tools, options=options)
        return call if getattr(model, "_adk_answered", False) else _first_reply(model, call)
    request = ModelRequest(model, messages, list(tools), options, stream=False)
    checked: Awaitable[Message] = hooks.call_model(ctx, request, _generate)
    return checked


async def _first_reply(model: ChatModel, call: Awaitable[Message]) -> Message:
    reply = _checked(model, await call)
    with contextlib.suppress(Exception):  # an object that refuses it is checked every time
        model._adk_answered = True  # type: ignore[attr-defined]
    return reply


async def _generate(request: ModelRequest) -> Message:
    model: ChatModel = request.model
    reply = await model.generate(request.messages, tools=request.tools, options=request.options)
    return _checked(model, reply)


def _checked(model: ChatModel, reply: object) -> Message:
    """``reply`` if it is an assistant message, else the ``TypeError`` that says what it was."""
    if isinstance(reply, Message) and reply.role == Role.ASSISTANT:
        return reply
    if isinstance(reply, Message):
        problem = f"a Message with role {reply.role.value!r}"
    else:
        problem = _shown(reply)
    raise TypeError(
        f"model {type(model).__name__}: generate() returned {problem}; a ChatModel must return "
        "an assistant Message (Message.assistant(...), tool calls in its tool_calls)"
    )


def stream(
    ctx: RunContext,
    model: ChatModel,
    messages: list[Message],
    tools: Sequence[ToolSpec],
    options: ModelOptions | None,
) -> MessageStream:
    run = ctx._run
    if run.turns is not None:  # the run's max_turns: counted before the call, which it may refuse
        run.turns.take(ctx)
    hooks = run.hooks
    if hooks is None:
        chunks = _stream_of(model)(messages, tools=tools, options=options)
        return MessageStream(_checking(model, chunks))
    _stream_of(model)  # fails here, before the hooks open a span for a call that cannot be made
    request = ModelRequest(model, messages, list(tools), options, stream=True)
    return MessageStream(hooks.stream_model(ctx, request, _open_stream))


def _open_stream(request: ModelRequest) -> AsyncIterator[MessageChunk]:
    model: ChatModel = request.model
    return _checking(
        model, _stream_of(model)(request.messages, tools=request.tools, options=request.options)
    )


def _stream_of(model: ChatModel) -> Callable[..., AsyncIterator[MessageChunk]]:
    """``model.stream``; for a model that has only ``generate`` (the protocol asks for both), a
    ``TypeError`` saying so instead of an ``AttributeError`` from deep in the agent."""
    try:
        return model.stream
    except AttributeError:
        raise TypeError(
            f"model {type(model).__name__} has no stream() method, which a streaming run "
            "(enable_streaming=True) calls; a ChatModel implements both generate() and stream()"
        ) from None


def _checking(model: ChatModel, chunks: AsyncIterator[MessageChunk]) -> AsyncIterator[MessageChunk]:
    return chunks if getattr(model, "_adk_streamed", False) else _first_stream(model, chunks)


async def _first_stream(
    model: ChatModel, chunks: AsyncIterator[MessageChunk]
) -> AsyncIterator[MessageChunk]:
    """``chunks``, each checked; the model is marked as checked once a whole stream passed."""
    async with closing(chunks):
        async for chunk in chunks:
            if not isinstance(chunk, MessageChunk):
                raise TypeError(
                    f"model {type(model).__name__}: stream() yielded {_shown(chunk)}; a "
                    "ChatModel's stream must yield MessageChunks"
                )
            yield chunk
    with contextlib.suppress(Exception):
        model._adk_streamed = True  # type: ignore[attr-defined]


def _shown(value: object) -> str:
    return "None" if value is None else f"{type(value).__name__} {reprlib.repr(value)}"
