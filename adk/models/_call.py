"""Calling a model from an agent, through the run's hooks (tracing, callbacks) when it has any."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Sequence

from .._hooks import ModelRequest
from ..context import RunContext
from ..messages import Message, MessageChunk
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
    hooks = ctx._run.hooks
    if hooks is None:
        return model.generate(messages, tools=tools, options=options)
    request = ModelRequest(model, messages, list(tools), options, stream=False)
    call: Awaitable[Message] = hooks.call_model(ctx, request, _generate)
    return call


async def _generate(request: ModelRequest) -> Message:
    model: ChatModel = request.model
    return await model.generate(request.messages, tools=request.tools, options=request.options)


def stream(
    ctx: RunContext,
    model: ChatModel,
    messages: list[Message],
    tools: Sequence[ToolSpec],
    options: ModelOptions | None,
) -> MessageStream:
    hooks = ctx._run.hooks
    if hooks is None:
        return MessageStream(model.stream(messages, tools=tools, options=options))
    request = ModelRequest(model, messages, list(tools), options, stream=True)
    return MessageStream(hooks.stream_model(ctx, request, _open_stream))


def _open_stream(request: ModelRequest) -> AsyncIterator[MessageChunk]:
    model: ChatModel = request.model
    return model.stream(request.messages, tools=request.tools, options=request.options)
