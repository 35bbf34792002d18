"""What an MCP server sends a client besides answers, and what the toolset does with it.

A server may report the progress of a call, send log messages, ask the user for input in the
middle of a call (elicitation) or ask the client's model for a completion (sampling). The ``mcp``
client refuses elicitation and sampling by default (the server gets an error it can handle) and
drops progress and logs. ``MCPToolset`` takes a handler for each (an extension to DESIGN.md); none
of them costs anything when not given, but progress: a call made in a run reports the server's
progress to the caller of the run (``ToolContext.report_progress``), handler or not; a call made
outside a run without a handler sends no progress token (so the server sends no progress); without
a log level no log opt-in is sent.

An in-flight MCP call cannot be checkpointed, so elicitation is answered while the call waits; it
cannot pause the run for a person the way an approval does.

The elicitation and sampling handlers are given the ``ToolContext`` of the call the server asks
for, so a service can put a question to the person whose run made the call. The ``mcp`` client
handles a server's request in the context of the call's own request where the transport ties it
to one: a 2026-07-28 server's questions come as the call's answer (``InputRequiredResult``), and
over streamable HTTP a handshake-era server asks on the call's own response stream. So the call
sets ``_current_call`` around its request, and the handler reads it there. A handshake-era stdio
server's request names no call (the pipe is shared by all): the handler is given None, never the
context of another call, since the connection's tasks start outside any call.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from math import isfinite
from typing import TYPE_CHECKING, Any, get_args

from mcp.client.session import ClientRequestContext, ElicitationFnT, LoggingFnT, SamplingFnT
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    LoggingLevel,
    LoggingMessageNotificationParams,
    SamplingCapability,
    SamplingMessageContentBlock,
    SamplingToolsCapability,
    TextContent,
    Tool,
    ToolResultContent,
    ToolUseContent,
)
from opentelemetry import context as otel_context  # loaded by the mcp package already

from ..context import generate_counted
from ..messages import _CALL_ID_MARK, Message, Role, ToolCall
from ..models.base import ChatModel, ModelOptions, model_name_of
from ..tools.base import ToolSpec
from ._content import blocks_message, result_of
from ._names import _model_names, _model_parameters
from ._sendable import (
    LONE_SURROGATE,
    NOT_AN_OBJECT,
    NOT_FINITE,
    NOT_JSON,
    not_finite_at,
    parse_arguments,
    printable,
)

if TYPE_CHECKING:
    from ..tools.base import ToolContext
    from ._servers import ServerConfig

__all__ = ["ElicitationHandler", "MCPProgress", "ProgressHandler", "SamplingHandler"]

logger = logging.getLogger("adk.mcp")
# Where a server's own log messages go: apart from pyadk's, so an application can route them.
server_logger = logging.getLogger("adk.mcp.server")

_LEVELS: tuple[str, ...] = get_args(LoggingLevel)
_PYTHON_LEVEL = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


# What a server's log text may not bring into a log record as it is: a line break would start a
# line that reads as another record of the application's own (a forged "CRITICAL ..." line), and
# the C0 and C1 controls, DEL and the bidirectional overrides and isolates act on, or reorder, the
# terminal of an operator reading the log. Each is written as its escape (tab stays).
_LOG_UNSAFE = {
    **{
        code: f"\\x{code:02x}"
        for code in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))
    },
    0x0A: "\\n",
    0x0D: "\\r",
    **{code: f"\\u{code:04x}" for code in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F))},
    **{code: f"\\u{code:04x}" for code in (*range(0x2066, 0x206A), 0x2028, 0x2029)},
}


def _loggable(text: str) -> str:
    """``text``, a server's, with what ``_LOG_UNSAFE`` names escaped."""
    return text.translate(_LOG_UNSAFE)


@dataclass(frozen=True, slots=True)
class MCPProgress:
    """A progress report of a running MCP tool call: ``tool`` as the model sees it (``prefix``
    included), ``progress`` so far, out of ``total`` when the server knows it, and its
    ``message``."""

    tool: str
    progress: float
    total: float | None
    message: str | None


ProgressHandler = Callable[["ToolContext | None", MCPProgress], Awaitable[None] | None]
"""``MCPToolset(on_progress=)``: called with the call's ``ToolContext`` (None for a tool run
outside a run) and each progress report, while the call runs."""


ElicitationHandler = Callable[
    ["ToolContext | None", ElicitRequestParams],
    Awaitable[ElicitResult | ErrorData] | ElicitResult | ErrorData,
]
"""``MCPToolset(elicitation=)``: answers a server asking the user for input, given the asking
call's ``ToolContext`` (None when the transport does not say, see above) and the server's
request (the ``mcp`` package's params: ``message``, and ``requested_schema`` or ``url``)."""

_SamplingAnswer = CreateMessageResult | CreateMessageResultWithTools | ErrorData

SamplingHandler = Callable[
    ["ToolContext | None", CreateMessageRequestParams],
    Awaitable[_SamplingAnswer] | _SamplingAnswer,
]
"""``MCPToolset(sampling=)`` as a function: answers a server asking for a completion, given the
asking call's ``ToolContext`` (or None) and the server's request as the ``mcp`` client parsed it
(its ``tools``, ``tool_choice`` and ``tool_use``/``tool_result`` blocks included, which it is
sent only when the toolset is told ``sampling_tools=True``: it answers them with a
``CreateMessageResultWithTools``)."""

_current_call: ContextVar[ToolContext | None] = ContextVar("adk_mcp_call", default=None)
"""The ``ToolContext`` of the MCP call whose request is being made (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class _ClientHooks:
    """What a connection's ``mcp.Client`` is given: the handlers of server requests and the
    level from which the server's log messages are wanted."""

    elicitation: ElicitationFnT | None = None
    sampling: SamplingFnT | None = None
    log_level: LoggingLevel | None = None
    sampling_tools: bool = False
    """Whether the client declares ``sampling.tools``: it answers sampling requests giving
    tools (``sampling_tools``)."""

    def sampling_capability(self) -> SamplingCapability | None:
        """What the client declares of sampling beyond answering it (the ``mcp`` client declares
        plain sampling when given a callback): ``tools`` when it takes them."""
        return SamplingCapability(tools=SamplingToolsCapability()) if self.sampling_tools else None


NO_HOOKS = _ClientHooks()
"""A connection's hooks when its toolset was given none: the ``mcp`` client's defaults."""


def check_log_level(level: object) -> LoggingLevel | None:
    """``log_level`` as MCP spells it. Python's spelling of a level's name (``"INFO"``) is the
    same level, so it is taken; a Python level number is refused naming the name to write."""
    if level is None or level in _LEVELS:
        return level  # type: ignore[return-value]
    if isinstance(level, str) and level.lower() in _LEVELS:
        return level.lower()  # type: ignore[return-value]
    hint = ""
    if isinstance(level, int) and not isinstance(level, bool):
        names = [name for name, number in _PYTHON_LEVEL.items() if number == level]
        if names:
            hint = f" (for Python's level {logging.getLevelName(level)}, write {names[0]!r})"
    raise ValueError(f"log_level must be None or one of {', '.join(_LEVELS)}; got {level!r}{hint}")


def check_handler(handler: object, what: str, kinds: str = "a function") -> None:
    if handler is not None and not callable(handler):
        raise TypeError(f"{what} must be {kinds} or None, got {type(handler).__name__}")


_NO_TRACE = otel_context.Context()
"""The trace context of a server's request that names no call (a handshake-era stdio server's):
none. The connection's reader, which hands it over, was started during the session's handshake,
in the trace context of whoever opened the session (``_session._Handshake``), a run this request
is no part of: spans the handler starts (a model SDK's, the user's own) would be put in that
run's trace, long ended."""


async def _answer(kind: str, handler: Callable[[Any, Any], Any], params: Any) -> Any:
    """What the user's ``kind`` handler answers a server's question with (awaited when it is a
    coroutine), for the asking call's context; one that raises is an error answer the server can
    handle, logged (``_handler_failed``)."""
    call = _current_call.get()
    token = otel_context.attach(_NO_TRACE) if call is None else None
    try:
        outcome = handler(call, params)
        return _sendable(
            f"{kind} handler", await outcome if inspect.isawaitable(outcome) else outcome
        )
    except Exception as exc:
        return _handler_failed(kind, exc)
    finally:
        if token is not None:
            otel_context.detach(token)


def _sendable(source: str, answer: Any) -> Any:
    """``answer`` to a server's request, or an error answer when it cannot be sent: text holding
    a lone surrogate (``"\\ud800"``, which a model may write, escaped, in its JSON) cannot be
    encoded as UTF-8, and the transport's writer failing on it ended the session, every call in
    flight on it cut, the asking one reading a lost connection. NaN or an infinity (an
    elicitation's number, a sampled call's input) is one too: written as null, the value was
    lost without a word. Checked by serializing it as the transport will, and walking its python
    dump for floats (once more per answer: a model call's cost, or a person's time, dwarfs it)."""
    dump = getattr(answer, "model_dump_json", None)
    if dump is None:
        return answer
    try:
        dump(by_alias=True, exclude_unset=True)
    except ValueError as exc:  # PydanticSerializationError: UTF-8 cannot encode it, or JSON hold it
        words = str(exc)  # else an object of the handler's own, say: it failed the writer too
        why = f"it holds {LONE_SURROGATE}" if "surrogate" in words else printable(words)
    else:  # NaN and infinities are written as null: the person's or model's value lost
        found = not_finite_at(answer.model_dump(by_alias=True, exclude_unset=True))
        if found is None:
            return answer
        why = f"it holds {found[0]!r} at {found[1]}, {NOT_FINITE}"
    logger.warning("MCP request answered with an error: the client's %s's answer: %s", source, why)
    return ErrorData(
        code=INTERNAL_ERROR, message=f"the client's {source}'s answer cannot be sent: {why}"
    )


def elicitation_callback(handler: ElicitationHandler | None) -> ElicitationFnT | None:
    """``MCPToolset(elicitation=)`` as the ``mcp`` client's callback."""
    check_handler(handler, "elicitation")
    if handler is None:
        return None

    async def elicit(
        context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        return await _answer("elicitation", handler, params)  # type: ignore[no-any-return]

    return elicit


def declares_sampling_tools(sampling: object, setting: object) -> bool:
    """Whether ``MCPToolset(sampling=sampling, sampling_tools=setting)`` declares that it answers
    sampling requests giving tools. A server checks the declaration before giving any (the
    ``mcp`` server refuses to send them otherwise), so it is made only where they are answered:
    by default for a ``ChatModel``, which pyadk offers them; a function may answer with
    ``tool_use`` blocks or not, so it says so (``True``); ``False`` keeps a model that cannot
    call tools from being given them."""
    if setting is None:
        return isinstance(sampling, ChatModel)
    if not isinstance(setting, bool):
        raise TypeError(f"sampling_tools must be a bool or None, got {type(setting).__name__}")
    if setting and sampling is None:
        raise ValueError("sampling_tools=True needs sampling= (a ChatModel or a function)")
    return setting


def sampling_callback(sampling: object) -> SamplingFnT | None:
    """``MCPToolset(sampling=)`` as the ``mcp`` client's callback: a pyadk ``ChatModel``
    answers with its reply; a function is a ``SamplingHandler``."""
    if sampling is None:
        return None
    if isinstance(sampling, ChatModel):
        return _ModelSampling(sampling)
    check_handler(sampling, "sampling", "a ChatModel, a function")
    handler: SamplingHandler = sampling  # type: ignore[assignment]

    async def sample(
        context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> _SamplingAnswer:
        return await _answer("sampling", handler, params)  # type: ignore[no-any-return]

    return sample


class _ModelSampling:
    """Answers a server's ``sampling/createMessage`` with a pyadk chat model. The server's
    messages are given to the model as an MCP tool's result is (``_sampled_messages``): their
    text, with a placeholder for each image and sound, and those as the message's ``parts``; a
    model that fails is an error answer the server can handle.

    A server may give tools with its request (MCP 2025-11-25, SEP-1577; the client declares
    ``sampling.tools`` for it, see ``sampling_capability``): the model is offered them as
    ``ToolSpec``s, named as model APIs take them (``_model_names``), with the server's
    ``tool_choice``, and a reply proposing calls is answered as ``tool_use`` blocks by the
    server's names (``stopReason`` ``toolUse``). pyadk runs none of them: the server does, and
    sends its next request with ``tool_result`` blocks, which the model is given as the tool
    messages answering its calls. A request whose tool blocks do not pair up is refused with an
    error answer saying what is wrong, before the model is called (a model API would refuse it,
    in words about a request the server never saw).

    Asked for a call of a run (the call's context known, see the module docstring), the model is
    called as the run's agents call theirs (``RunContext.generate``): counted against ``max_turns``,
    its usage in the run's total, through the run's tracing and model callbacks. Called on its
    own, a server could spend the run's model without limit or trace, its tokens in no total."""

    __slots__ = ("_model",)

    def __init__(self, model: ChatModel) -> None:
        self._model = model

    async def __call__(
        self, context: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult | CreateMessageResultWithTools | ErrorData:
        answer: _SamplingAnswer = _sendable("model", await self._reply_to(params))
        return answer

    async def _reply_to(
        self, params: CreateMessageRequestParams
    ) -> CreateMessageResult | CreateMessageResultWithTools | ErrorData:
        tools = _SampledTools(params.tools or ())
        try:
            messages = _sampled_messages(params, tools)
        except _Malformed as exc:
            logger.warning("MCP sampling request refused: %s", _loggable(str(exc)))
            return ErrorData(
                code=INVALID_PARAMS,
                message=f"the client cannot send this sampling request to its model: {exc}",
            )
        try:
            # Inside: options a model cannot take (a negative temperature) are the server's
            # error to handle too, not an exception in the client's request handling.
            options = ModelOptions(
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                stop=list(params.stop_sequences) if params.stop_sequences else None,
                tool_choice=_tool_choice(params) if tools.specs else None,
            )
            call = _current_call.get()
            if call is None:  # no run to count in (a handshake-era stdio server's request)
                token = otel_context.attach(_NO_TRACE)  # nor any run's trace (``_NO_TRACE``)
                try:
                    reply = await self._model.generate(messages, tools=tools.specs, options=options)
                finally:
                    otel_context.detach(token)
            else:  # the run's path (generate_counted), with the server's options as asked: the
                # run's "model_options" are its agents' settings, not the server's request's
                reply = await generate_counted(
                    call.run_context, self._model, messages, tools.specs, options
                )
            uses = tools.uses_of(reply.tool_calls, _used_ids(params))
        except Exception as exc:
            reason = str(exc) if isinstance(exc, _Malformed) else _reason(exc)
            logger.warning("MCP sampling request failed: %s", reason)
            return ErrorData(code=INTERNAL_ERROR, message=f"the client's model failed: {reason}")
        model = model_name_of(self._model)
        text = TextContent(type="text", text=reply.content)
        stop_reason = _stop_reason(reply.metadata.get("finish_reason"))
        if params.tools is None and params.tool_choice is None:  # a server taking no tool_use
            return CreateMessageResult(
                role="assistant", content=text, model=model, stop_reason=stop_reason
            )
        if not uses:
            return CreateMessageResultWithTools(
                role="assistant", content=text, model=model, stop_reason=stop_reason
            )
        blocks: list[SamplingMessageContentBlock] = [text] if reply.content else []
        blocks.extend(uses)
        return CreateMessageResultWithTools(
            role="assistant", content=blocks, model=model, stop_reason="toolUse"
        )


class _Malformed(ValueError):
    """A sampling request that cannot be sent to the model as the server gave it, or a reply
    that cannot be sent to the server."""


class _SampledTools:
    """The tools of a server's sampling request: as the model is offered them (``specs``, named
    as model APIs take them, ``_model_names``) and the way back to the server's names."""

    __slots__ = ("_by_model_name", "_model_name", "specs")

    def __init__(self, tools: Sequence[Tool]) -> None:
        names = [tool.name for tool in tools]
        offered = _model_names(names)
        self._model_name = dict(zip(names, offered, strict=True))
        self._by_model_name = dict(zip(offered, names, strict=True))
        self.specs = tuple(
            ToolSpec(
                name=name,
                description=tool.description or "",
                parameters=_model_parameters(tool.input_schema),  # as the toolset offers its own
            )
            for name, tool in zip(offered, tools, strict=True)
        )

    def model_name(self, name: str) -> str:
        """The name the model knows the server's tool ``name`` by; one the request does not
        offer (named in an earlier ``tool_use``) is made fit as a listing makes it."""
        offered = self._model_name.get(name)
        return offered if offered is not None else _model_names([name])[0]

    def uses_of(
        self, calls: Sequence[ToolCall], used: Collection[str] = ()
    ) -> list[ToolUseContent]:
        """The model's proposed ``calls`` as the ``tool_use`` blocks the server runs, each with an
        id of its own: the server's ``tool_result`` answers by it, and its next request holding
        two blocks of one id is refused (``_sampled_messages``). One without an id (a
        ``ChatModel`` of one's own may leave it out) is given ``call_<place>``, as the OpenAI
        adapters give theirs; one repeating an earlier call's, of this reply or of the
        conversation's earlier rounds (``used``, the request's ``tool_use`` ids: a model server
        numbering every reply's calls from ``call_0``), is made ``<id>-<place>`` (a higher
        number where that is taken too, by the conversation or by a call of this reply), as
        ``unique_call_ids`` makes a ``ReActAgent``'s."""
        uses = [self._use_of(call, position) for position, call in enumerate(calls)]
        seen: set[str] = set(used)
        held: set[str] | None = None  # the reply's own ids, read only when one is renamed
        for position, use in enumerate(uses):
            if use.id in seen:
                if held is None:
                    held = {other.id for other in uses}
                base, number = use.id, position
                renamed = f"{base}{_CALL_ID_MARK}{number}"
                while renamed in seen or renamed in held:
                    number += 1
                    renamed = f"{base}{_CALL_ID_MARK}{number}"
                use.id = renamed
            seen.add(use.id)
        return uses

    def _use_of(self, call: ToolCall, position: int) -> ToolUseContent:
        """The model's proposed ``call`` (its ``position``-th) as a ``tool_use`` block."""
        try:  # what no transport carries is refused, as in a call of the server's tool
            arguments = parse_arguments(call.arguments)
        except ValueError as exc:
            # Told by parse_arguments' words: reading the text again with a bare json.loads
            # called an object it cannot read (a long integer, deep nesting) 'not an object'.
            if not str(exc).startswith((NOT_JSON, NOT_AN_OBJECT)):
                # NaN, 1e400, a lone surrogate: was sent (null) or failed the whole reply
                raise _Malformed(
                    f"it proposed a call of '{call.name}' whose arguments cannot be sent: {exc}"
                ) from None
            raise _Malformed(
                f"it proposed a call of '{call.name}' whose arguments are not a JSON object: "
                f"{call.arguments[:200]!r}"
            ) from None
        name = self._by_model_name.get(call.name, call.name)
        id_ = call.id or f"call_{position}"
        return ToolUseContent(type="tool_use", id=id_, name=name, input=arguments)


def _used_ids(params: CreateMessageRequestParams) -> set[str]:
    """The ids of the ``tool_use`` blocks a sampling request's conversation holds: a server
    running its agent loop sends back every round's, and a new call must not repeat one."""
    used: set[str] = set()
    for sampled in params.messages:
        content = sampled.content
        for block in content if isinstance(content, list) else (content,):
            if isinstance(block, ToolUseContent):
                used.add(block.id)
    return used


def _tool_choice(params: CreateMessageRequestParams) -> str | None:
    """MCP's ``toolChoice`` as ``ModelOptions.tool_choice``: its modes are OpenAI's words."""
    return None if params.tool_choice is None else params.tool_choice.mode


def _sampled_messages(params: CreateMessageRequestParams, tools: _SampledTools) -> list[Message]:
    """A server's sampling request's system prompt and messages as the model is given them.

    Each message is its blocks' text, a placeholder standing for each image and sound, and those
    as its ``parts`` (``blocks_message``): so a vision model reads the screenshot a server asks
    about, and a model told ``parts="text"`` is sent the text with the placeholders. No part is
    held to ``MAX_PART_BYTES``: the message is in no history, so no checkpoint holds it (a call
    in flight cannot pause), and one too big for the model's API is the model's error, which the
    server gets as an error answer.

    An assistant's ``tool_use`` blocks are its ``tool_calls`` (named as the model is offered the
    tools), and a user's ``tool_result`` blocks the tool messages answering them (by id, named by
    the call's tool, with the result's text and parts), before any other block of that message.
    Each ``tool_use`` must be answered in the next message and each ``tool_result`` answer one of
    the message before (SEP-1577), and ids must be given and distinct, else ``_Malformed``: a
    model API refuses such a conversation."""
    messages: list[Message] = []
    if params.system_prompt:
        messages.append(Message.system(params.system_prompt))
    asked: dict[str, str] = {}  # the previous message's tool_use ids not answered yet: names
    for position, sampled in enumerate(params.messages, start=1):
        content = sampled.content
        if type(content) is TextContent and not asked:  # the common case, as it always was
            messages.append(blocks_message(sampled.role, [content]))
            continue
        blocks: list[object] = list(content) if isinstance(content, list) else [content]
        uses = [block for block in blocks if isinstance(block, ToolUseContent)]
        results = [block for block in blocks if isinstance(block, ToolResultContent)]
        rest = [b for b in blocks if not isinstance(b, ToolUseContent | ToolResultContent)]
        if results and sampled.role != "user":
            raise _Malformed(f"message {position} is the assistant's and holds tool_result blocks")
        if uses and sampled.role != "assistant":
            raise _Malformed(f"message {position} is the user's and holds tool_use blocks")
        answered: set[str] = set()
        for result in results:
            name = asked.pop(result.tool_use_id, None)
            if name is None:
                id_ = result.tool_use_id
                raise _Malformed(
                    f"message {position}: two tool_result blocks answer the tool_use '{id_}'"
                    if id_ in answered
                    else f"message {position}: a tool_result for '{id_}' answers no tool_use of "
                    "the message before it"
                )
            answered.add(result.tool_use_id)
            answer = result_of(result.content, result.structured_content, result.is_error)
            messages.append(
                Message.tool(
                    answer.content,
                    tool_call_id=result.tool_use_id,
                    name=tools.model_name(name),
                    parts=answer.parts,
                )
            )
        if asked:
            raise _Malformed(_unanswered(position - 1, asked))
        if uses:
            for use in uses:
                if not use.id:
                    raise _Malformed(f"message {position}: a tool_use of '{use.name}' has no id")
                if use.id in asked:
                    raise _Malformed(f"message {position}: two tool_use blocks have id '{use.id}'")
                asked[use.id] = use.name
            said = blocks_message("assistant", rest)
            calls = [
                ToolCall(
                    id=use.id,
                    name=tools.model_name(use.name),
                    arguments=json.dumps(use.input, ensure_ascii=False),
                )
                for use in uses
            ]
            messages.append(
                Message(
                    role=Role.ASSISTANT, content=said.content, tool_calls=calls, parts=said.parts
                )
            )
        elif rest or not results:
            messages.append(blocks_message(sampled.role, rest))
    if asked:
        raise _Malformed(_unanswered(len(params.messages), asked))
    return messages


def _unanswered(position: int, asked: dict[str, str]) -> str:
    calls = ", ".join(f"'{id_}' ({name})" for id_, name in asked.items())
    return f"message {position}: tool_use {calls} not answered by a tool_result in the next message"


def _stop_reason(finish_reason: object) -> str:
    """MCP's ``stopReason`` for a reply's finish reason: a reply cut at ``max_tokens`` says so
    (``maxTokens``), as the server needs to know its completion is cut short, not ``endTurn``; a
    reason MCP names no value for (``content_filter``) is passed as it is (the field is open)."""
    if finish_reason is None or finish_reason == "stop":
        return "endTurn"
    if finish_reason == "length":
        return "maxTokens"
    return str(finish_reason)


def _reason(exc: Exception) -> str:
    """``exc`` on one line, named by its type (pydantic's errors take several lines)."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _handler_failed(kind: str, exc: Exception) -> ErrorData:
    """The answer to a server whose question a failing handler could not answer: an error it
    handles, as it handles a refusal. Raised on, the failure reached the server (and the model)
    only over a handshake-era connection, logged by the ``mcp`` package; a 2026-07-28 call's input
    round raised it out of the call, so the model read the tool as failed and nothing was logged."""
    reason = _reason(exc)
    logger.warning("the MCP %s handler failed: %s", kind, reason, exc_info=exc)
    return ErrorData(code=INTERNAL_ERROR, message=f"the client's {kind} handler failed: {reason}")


def log_forwarder(server: ServerConfig, level: LoggingLevel) -> LoggingFnT:
    """The ``mcp`` client's logging callback: a server's log messages at ``level`` or above go to
    the ``adk.mcp.server`` logger, at the matching Python level, naming the server. (Handshake-era
    servers send every level unasked; 2026-07-28 ones only what each request opts in to.)"""
    floor = _LEVELS.index(level)

    async def forward(params: LoggingMessageNotificationParams) -> None:
        if _LEVELS.index(params.level) < floor:
            return
        data = params.data
        text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, default=str)
        # The server's words are escaped (``_LOG_UNSAFE``): it cannot forge a line of the log.
        named = _loggable(params.logger) if params.logger else params.logger
        source = f"{server} ({named})" if named else str(server)
        server_logger.log(
            _PYTHON_LEVEL[params.level],
            "MCP server '%s': %s",
            source,
            _loggable(text),
            extra={"mcp_server": str(server), "mcp_logger": named},
        )

    return forward


def progress_callback(
    handler: ProgressHandler | None, ctx: ToolContext | None, tool: str
) -> _Reports:
    """The ``mcp`` client's progress callback of one call (``_Reports``), showing each report to
    the caller of the run (``ctx.report_progress``, when the call runs in one) and handing it to
    ``handler``, if given. A failing handler is logged; the call goes on."""
    return _Reports(handler, ctx, tool)


class _Reports:
    """The ``mcp`` client's progress callback of one call: each report shown to the caller of the
    run (``ctx.report_progress``, when the call runs in one) and handed to ``handler``, if given.

    Shown coalesced: while a report shown is not yet taken by the run's reader, a later one is
    kept, replacing any kept before, and shown once it is (the newest then), so the caller gets a
    report for each it reads, the latest each time, and the last one kept is shown as the call
    ends (``flush``), before its result. A server sending 100,000 reports for a call made as
    many events, each put on the round's queue (about 1.3 KB each) however slowly the run was
    read: 130 MB waiting for a reader that had stopped to write to a slow client. The handler
    is given every report, as the server sent it.

    A server that does not follow MCP may send ``NaN`` or an infinity (``1e999``), which a
    ``ToolProgress`` cannot hold (``report_progress`` refused it, inside the ``mcp`` client's
    callback, which logged the traceback and dropped the report, the handler's too): such a
    number is left out of the caller's report (``None``), with one warning per call, and the
    handler is given the report as the server sent it."""

    __slots__ = ("_ctx", "_handler", "_kept", "_shown", "_tool", "_waiting", "_warned")

    def __init__(self, handler: ProgressHandler | None, ctx: ToolContext | None, tool: str) -> None:
        self._handler = handler
        self._ctx = ctx
        self._tool = tool
        self._shown = ctx is not None and ctx._emit is not None
        self._warned = False
        # The report kept while the one shown is not yet taken, and what is waiting for that:
        # the future the run's reader resolves (``_Emitter.taken``), None while none is shown.
        self._kept: tuple[float | None, float | None, str | None] | None = None
        self._waiting: asyncio.Future[None] | None = None

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        waiting = self._show(progress, total, message) if self._shown else None
        handler = self._handler
        if handler is not None:
            try:
                outcome = handler(self._ctx, MCPProgress(self._tool, progress, total, message))
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                logger.warning(
                    "the on_progress handler failed for tool '%s'", self._tool, exc_info=True
                )
        if waiting is not None:
            await self._pass_on(waiting)

    def _show(
        self, progress: float, total: float | None, message: str | None
    ) -> asyncio.Future[None] | None:
        """Show the report, or keep it while the last one shown is not taken; the future to wait
        on for the reports kept meanwhile when this one is shown (None when kept, or dropped)."""
        ctx = self._ctx
        assert ctx is not None
        if getattr(ctx._emit, "ended", False):
            # The call was cancelled or timed out after the server sent this: ``mcp`` runs
            # each progress callback in a task of its own, so one can come after the call
            # ended. Not the tool's doing (``_Emitter.late`` would tell its author to await
            # a task), and a service whose clients leave would log it often: dropped.
            logger.debug("a progress report of tool '%s' came after its call ended", self._tool)
            return None
        report = self._finite(progress, total, message)
        if self._waiting is not None:
            self._kept = report  # shown once the one before is taken
            return None
        ctx.report_progress(*report)
        taken = getattr(ctx._emit, "taken", None)
        if taken is None:  # a way out of another kind: every report is shown
            return None
        waiting: asyncio.Future[None] = taken()
        self._waiting = waiting
        return waiting

    async def _pass_on(self, waiting: asyncio.Future[None]) -> None:
        """Once the report shown is taken, show the one kept meanwhile, if any, and so on."""
        ctx = self._ctx
        assert ctx is not None
        try:
            while True:
                await waiting
                report, self._kept = self._kept, None
                if report is None or self._waiting is not waiting:
                    return
                if getattr(ctx._emit, "ended", False):
                    return
                ctx.report_progress(*report)
                waiting = self._waiting = ctx._emit.taken()  # type: ignore[union-attr]
        finally:
            if self._waiting is waiting:
                self._waiting = None

    def flush(self) -> None:
        """Show the report kept, if any, and stop waiting: the call's answer came (the
        reports before it came first), so it is shown before its result."""
        report, self._kept = self._kept, None
        self.close()
        ctx = self._ctx
        if report is not None and ctx is not None and not getattr(ctx._emit, "ended", False):
            ctx.report_progress(*report)

    def close(self) -> None:
        """Stop waiting for the report shown to be taken (the call ended, or was cancelled: the
        reader of a stopped round resolves nothing), so no task waits on after the call."""
        waiting, self._waiting = self._waiting, None
        if waiting is not None and not waiting.done():
            waiting.set_result(None)

    def _finite(
        self, progress: float, total: float | None, message: str | None
    ) -> tuple[float | None, float | None, str | None]:
        """The report as a ``ToolProgress`` can hold it: a number that is not finite left out,
        with one warning for the call."""
        if isfinite(progress) and (total is None or isfinite(total)):
            return progress, total, message
        if not self._warned:
            self._warned = True
            logger.warning(
                "the MCP server of tool '%s' sent progress with a number that is not "
                "finite (progress=%r, total=%r); it is left out of the report",
                self._tool,
                progress,
                total,
            )
        return (
            progress if isfinite(progress) else None,
            total if total is not None and isfinite(total) else None,
            message,
        )
