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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from pydantic import ValidationError

from .._aio import closing
from .._hooks import ModelRequest
from ..messages import Message, MessageChunk, Role
from ..streams import MessageStream
from ..tools.base import ToolSpec
from .base import ChatModel, ModelOptions

if TYPE_CHECKING:  # ``RunContext.generate`` calls this module: ``adk.context`` imports it
    from ..context import RunContext

__all__ = [
    "chunks",
    "free_tool_choice",
    "generate",
    "request_of",
    "resource_model",
    "stream",
    "with_run_options",
]


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
    """One streamed model call, as a ``MessageStream`` of its chunks (see ``chunks``)."""
    return MessageStream(chunks(ctx, model, messages, tools, options))


def chunks(
    ctx: RunContext,
    model: ChatModel,
    messages: list[Message],
    tools: Sequence[ToolSpec],
    options: ModelOptions | None,
) -> AsyncIterator[MessageChunk]:
    """The chunks of one streamed model call, for a stream to wrap: the call is counted (and may
    be refused) now, and made when the first chunk is read."""
    run = ctx._run
    if run.turns is not None:  # the run's max_turns: counted before the call, which it may refuse
        run.turns.take(ctx)
    hooks = run.hooks
    if hooks is None:
        return _checking(model, _stream_of(model)(messages, tools=tools, options=options))
    _stream_of(model)  # fails here, before the hooks open a span for a call that cannot be made
    request = ModelRequest(model, messages, list(tools), options, stream=True)
    opened: AsyncIterator[MessageChunk] = hooks.stream_model(ctx, request, _open_stream)
    return opened


def resource_model(ctx: RunContext, name: str, agent_name: str) -> ChatModel:
    """The model resource ``name`` of the run (``Runner(resources=...)``) that the agent called
    ``agent_name`` names: a ``ReActAgent``'s ``model="..."``, a custom agent's
    ``ctx.generate("...", ...)``; ``KeyError`` listing the known names when there is none."""
    resources = ctx._run.resources
    if resources is None:
        # A Google ADK port passes the provider's model name (``model="gemini-2.0-flash"``):
        # say what a str is here, and how to call a model by its provider's name.
        raise LookupError(
            f"agent '{agent_name}' names model {name!r} but the runner has no resources: a "
            "str model is the name of a model resource (Runner(agent, resources=resources), "
            f"resources.add_model({name!r}, model)); to call a provider's model, pass a "
            f"ChatModel: adk.OpenAIChatModel({name!r}, base_url=...)"
        )
    found: ChatModel = resources.get_model(name)
    return found


def request_of(
    ctx: RunContext, model: object, messages: object, tools: object, options: object
) -> tuple[ChatModel, list[Message], list[ToolSpec]]:
    """The model, messages and tool specs of a call an agent of the user's makes through its
    context (``RunContext.generate``/``stream``), checked: what the model would fail on deep in
    an adapter (a dict for options, a str taken as a list of characters, a tool function that
    is not a tool) is a ``TypeError`` here, naming the agent, before the call is counted.

    ``messages`` is what ``Runner.run`` takes as input (a ``str`` is one user message, a
    ``Message``, or messages); ``tools`` are ``ToolSpec``s or ``Tool``s (their ``spec``: the
    agent runs the calls itself). Each call is the user's own agent's, not a hot path: the
    framework's agents call ``generate``/``stream`` with what they checked when made."""
    where = f"agent '{ctx.agent_name}': ctx.generate/ctx.stream"
    chat: ChatModel
    if isinstance(model, str) and model:
        chat = ctx._model_named(model)  # an ActionAgent's own resources first
    elif callable(getattr(model, "generate", None)) and not isinstance(model, type):
        chat = cast("ChatModel", model)
    else:
        raise TypeError(
            f"{where}: model must be a ChatModel or the name of a model resource, got "
            f"{_shown(model)}"
        )
    if isinstance(messages, str):
        listed = [Message.user(messages)]
    elif isinstance(messages, Message):
        listed = [messages]
    elif isinstance(messages, Iterable) and not isinstance(messages, (bytes, Mapping)):
        listed = list(messages)
        for item in listed:
            if not isinstance(item, Message):
                raise TypeError(
                    f"{where}: messages must be Messages (or one str, a user message), got "
                    f"{_shown(item)} among them"
                )
    else:
        raise TypeError(
            f"{where}: messages must be a str, a Message or a list of Messages, got "
            f"{_shown(messages)}"
        )
    if not isinstance(tools, Iterable) or isinstance(tools, (str, bytes, Mapping)):
        raise TypeError(
            f"{where}: tools must be a list of ToolSpecs or Tools, got {_shown(tools)}"
            f"{_tool_hint(tools)}"
        )
    specs: list[ToolSpec] = []
    for item in tools:
        spec = item if isinstance(item, ToolSpec) else getattr(item, "spec", None)
        if not isinstance(spec, ToolSpec):
            raise TypeError(
                f"{where}: tools must be ToolSpecs or Tools, got {_shown(item)}{_tool_hint(item)}"
            )
        specs.append(spec)
    if options is not None and not isinstance(options, ModelOptions):
        raise TypeError(
            f"{where}: options must be a ModelOptions (ModelOptions(**options) for a dict), got "
            f"{type(options).__name__}"
        )
    return chat, listed, specs


def with_run_options(
    name: str, options: ModelOptions | None, keep_format: bool, given: object
) -> ModelOptions:
    """``options`` with the run's ``"model_options"`` (``ctx.options``: a ``ModelOptions`` or a
    mapping of its fields, ``given``) merged over them, for this run only: a per-request setting
    beats the agent's (or the call's) own, as Eino's per-run options and the OpenAI Agents SDK's
    ``RunConfig.model_settings`` do. With ``keep_format`` the ``response_format`` of ``options``
    stays: the caller parses the reply by that schema (a ``ReActAgent``'s native
    ``output_schema``, a ``ctx.generate`` given one), so a run cannot swap it for another. The
    agent ``name`` is for the error a bad value gets."""
    if isinstance(given, ModelOptions):
        run = given
    elif isinstance(given, Mapping):
        try:
            run = ModelOptions(**given)
        except ValidationError as exc:
            raise ValueError(f"agent '{name}': run option model_options is invalid: {exc}") from exc
    else:
        raise TypeError(
            f"agent '{name}': run option model_options must be a ModelOptions or a mapping of "
            f"its fields, got {type(given).__name__}"
        )
    merged = (options or ModelOptions()).merged(run)
    if keep_format and options is not None and merged.response_format != options.response_format:
        merged = merged.merged(ModelOptions(response_format=options.response_format))
    return merged


def free_tool_choice(options: ModelOptions | None) -> ModelOptions | None:
    """``options`` without a ``tool_choice`` that forces a tool ("required", "any" or a named tool).

    After a tool round the model must be free to answer: forced on every call, it could only call
    tools until the agent's limit (``ReActAgent``'s ``max_iterations``, a chat's
    ``max_tool_rounds``), as the OpenAI Agents SDK's ``reset_tool_choice`` knows. "auto" and
    "none" stay, since neither forces anything.
    """
    if options is None or options.tool_choice in (None, "auto", "none"):
        return options
    return options.model_copy(update={"tool_choice": None})


def _tool_hint(value: object) -> str:
    """How to make a tool of what was given in its place: a ``Toolset`` (an ``MCPToolset``)
    offers its tools only when asked, a plain function is not a tool until wrapped."""
    if callable(getattr(value, "tools", None)):
        return " (a Toolset's tools are await toolset.tools(ctx))"
    if callable(value):
        return " (make it a tool with @adk.tool)"
    return ""


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
