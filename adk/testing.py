"""Test helpers for users' tests and ours: ``ScriptedModel`` and ``simplify_events``.

``ScriptedModel`` replays scripted replies — text, tool calls, errors, delays, streamed or not — and
records every request it received, so agent logic can be tested without a model server. (Adapters
are tested against a real HTTP server instead; this is not a stand-in for them.)
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .events import AgentEvent
from .messages import Message, MessageChunk, ToolCall, ToolCallChunk, Usage, join_chunks
from .models.base import ModelOptions
from .tools.base import ToolSpec

__all__ = ["Reply", "ScriptedModel", "ScriptedRequest", "simplify_events", "tool_call"]


def tool_call(name: str, arguments: dict[str, Any] | str | None = None, id: str = "") -> ToolCall:
    """A tool call for a script; dict arguments are JSON-encoded, a string is kept raw."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return ToolCall(id=id, name=name, arguments=raw)


@dataclass(slots=True)
class Reply:
    """One scripted model turn: text and/or tool calls, or an error; optionally delayed."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    error: BaseException | None = None
    delay: float = 0.0
    usage: Usage | None = None
    reasoning: str | None = None

    def __post_init__(self) -> None:
        # Checked where the script is written: a call given as a dict, or one call not in a
        # list, failed only at its turn, mid-run, with pydantic's errors for a Message.
        if isinstance(self.tool_calls, ToolCall | dict | str):
            raise TypeError(
                f"Reply tool_calls must be a list, got {type(self.tool_calls).__name__} "
                "(for one call, write tool_calls=[tool_call(name, arguments)])"
            )
        # Kept as a list: the check iterates the calls, which would leave a generator (which
        # Message.assistant takes, "any iterable") empty for the turn; None is no calls, as it
        # was to Message.assistant.
        calls = self.tool_calls
        self.tool_calls = [] if calls is None else calls if type(calls) is list else list(calls)
        for index, call in enumerate(self.tool_calls):
            if not isinstance(call, ToolCall):
                self.tool_calls = _calls_with(self.tool_calls, index, call)


def _calls_with(calls: list[ToolCall], index: int, call: object) -> list[ToolCall]:
    """``calls`` with the item at ``index``, which is no ``ToolCall``, made one, or the refusal.
    A dict of a ``ToolCall``'s own fields (``{"id": ..., "name": ..., "arguments": "{...}"}``) is
    one: ``Message.assistant`` validates it so, and such a script played before the calls were
    checked. Anything else (a chat dict's ``function``, arguments not JSON text) failed only at
    its turn, mid-run. A new list: the caller's is left as it was."""
    if isinstance(call, dict):
        try:
            made = ToolCall.model_validate(call)
        except ValidationError:
            pass
        else:
            return [*calls[:index], made, *calls[index + 1 :]]
    raise TypeError(
        f"Reply tool_calls[{index}] is {type(call).__name__} {call!r:.60}; make each "
        "call with adk.testing.tool_call(name, arguments)"
    )


ScriptItem = str | Message | Reply | BaseException | Callable[[list[Message]], Any]


@dataclass(slots=True)
class ScriptedRequest:
    """What the model was asked: messages, tool specs, options, and whether it streamed."""

    messages: list[Message]
    tools: list[ToolSpec]
    options: ModelOptions | None
    stream: bool


def _script_of(script: Iterable[Any]) -> list[Any]:
    """The script as a list, refusing what would play wrong, when the model is made: one reply
    given bare, where the list goes (a str was read a character per call, the first answer "h";
    a ``Message`` as its fields), and an item no reply is made of (it failed only at its turn)."""
    if isinstance(script, str | Message | Reply | BaseException):
        raise TypeError(
            f"ScriptedModel takes a list of replies (or one callable answering every call), got "
            f"{type(script).__name__} {script!r:.60}: for one reply, write ScriptedModel([...])"
        )
    items = list(script)
    for index, item in enumerate(items):
        if not (isinstance(item, str | Message | Reply | BaseException) or callable(item)):
            raise TypeError(
                f"ScriptedModel script item {index} is {type(item).__name__} {item!r:.60}; an item "
                "is a str, a Message, a Reply, an exception or a callable returning one"
            )
    return items


class ScriptedModel:
    """A ``ChatModel`` that answers from a script.

    ``script`` is a list of items used one per call (``cycle=True`` starts over at the end), or a
    single callable ``(messages) -> item`` used for every call. An item is a ``str`` (assistant
    text), a ``Message``, a ``Reply``, an exception instance (raised), or a callable returning one
    of those. Streams split text into ``chunk_size`` pieces and tool-call arguments into two
    fragments, the way servers do.

    A streamed reply joins (``adk.messages.join_chunks``) to the message ``generate`` returns, as
    with a real adapter: both carry ``metadata["finish_reason"]`` ("tool_calls" or "stop" unless a
    scripted ``Message`` names another, e.g. "length") and a scripted message's other metadata. A
    scripted ``Message`` is the reply itself, not a copy, so that default is added to its metadata.
    """

    def __init__(
        self,
        script: Iterable[ScriptItem] | Callable[[list[Message]], Any] = (),
        *,
        model_name: str = "scripted",
        cycle: bool = False,
        chunk_size: int = 8,
        record: bool = True,
        supports_response_format: bool = True,
    ) -> None:
        self.model_name = model_name
        self._responder = script if callable(script) else None
        self._script: list[Any] = [] if callable(script) else _script_of(script)
        self._position = 0
        self._calls = 0
        self._cycle = cycle
        self._chunk_size = max(1, chunk_size)
        self._record = record
        self._ids = itertools.count(1)
        self.supports_response_format = supports_response_format
        self.requests: list[ScriptedRequest] = []

    @property
    def calls(self) -> int:
        """How many replies the model has given (or raised), in all."""
        return self._calls

    @property
    def remaining(self) -> int:
        """Script items not used yet (before a cycling script starts over); 0 for a callable
        script."""
        return len(self._script) - self._position

    def _next(
        self, messages: Sequence[Message], tools: Sequence[ToolSpec], options: Any, stream: bool
    ) -> Any:
        self._calls += 1
        if self._record:
            self.requests.append(ScriptedRequest(list(messages), list(tools), options, stream))
        if self._responder is not None:
            item: Any = self._responder(list(messages))
        else:
            if self._position >= len(self._script):
                if not (self._cycle and self._script):
                    # Said with the ways out: the usual cause is one model serving several runs
                    # (a runner invoked per request, an execution environment's records), each
                    # going on where the last left off.
                    raise RuntimeError(
                        f"ScriptedModel script exhausted after {len(self._script)} replies: "
                        "give it a reply for every call of every run it serves (runs sharing "
                        "the model go on where the last left off), cycle=True to start the "
                        "script over, or one callable that answers from the messages"
                    )
                self._position = 0
            item = self._script[self._position]
            self._position += 1
        while callable(item) and not isinstance(item, BaseException | Message | Reply):
            item = item(list(messages))
        return item

    def _reply(self, item: Any) -> tuple[Message | None, BaseException | None, float]:
        if isinstance(item, BaseException):
            return None, item, 0.0
        delay = 0.0
        if isinstance(item, str):
            message = Message.assistant(item)
        elif isinstance(item, Message):
            message = self._with_ids(item)
        elif isinstance(item, Reply):
            if item.error is not None:
                return None, item.error, item.delay
            message = self._with_ids(
                Message.assistant(
                    item.text, item.tool_calls, usage=item.usage, reasoning=item.reasoning
                )
            )
            delay = item.delay
        else:
            raise TypeError(f"ScriptedModel cannot reply with {item!r}")
        # In place, not on a copy: copying a Message costs microseconds per turn, which benchmarks
        # run on this model would count, and the default is what the reply means anyway.
        metadata = message.metadata
        if "finish_reason" not in metadata:
            metadata["finish_reason"] = "tool_calls" if message.tool_calls else "stop"
        return message, None, delay

    def _with_ids(self, message: Message) -> Message:
        if any(not call.id for call in message.tool_calls):
            calls = [
                call if call.id else call.model_copy(update={"id": f"call_{next(self._ids)}"})
                for call in message.tool_calls
            ]
            message = message.model_copy(update={"tool_calls": calls})
        return message

    async def generate(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        """Record the request and answer with the next script item, after its delay; a scripted
        exception is raised."""
        message, error, delay = self._reply(self._next(messages, tools, options, False))
        if delay:
            await asyncio.sleep(delay)
        if error is not None:
            # Raised afresh and not left in a local: this frame is in the traceback, so the local
            # would close a cycle (exception -> traceback -> frame -> exception) that only the
            # cyclic GC frees, with every frame of the failed run behind it. A script may hand out
            # one instance many times, and re-raising an instance prepends to its old traceback.
            try:
                raise error.with_traceback(None)
            finally:
                del error
        assert message is not None
        return message

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        """The next script item as chunks (see the class docstring). An async generator: the item
        is taken, and the request recorded, only when iteration starts."""
        message, error, delay = self._reply(self._next(messages, tools, options, True))
        if delay:
            await asyncio.sleep(delay)
        if error is not None:
            try:  # as in generate
                raise error.with_traceback(None)
            finally:
                del error
        assert message is not None
        for chunk in self._chunks(message):
            yield chunk
            await asyncio.sleep(0)

    def _chunks(self, message: Message) -> list[MessageChunk]:
        size = self._chunk_size
        text = message.content
        chunks = [MessageChunk(content=text[i : i + size]) for i in range(0, len(text), size)]
        if message.reasoning:
            chunks.insert(0, MessageChunk(reasoning=message.reasoning))
        for index, call in enumerate(message.tool_calls):
            half = len(call.arguments) // 2
            chunks.append(
                MessageChunk(
                    tool_calls=[
                        ToolCallChunk(
                            index=index, id=call.id, name=call.name, arguments=call.arguments[:half]
                        )
                    ]
                )
            )
            chunks.append(
                MessageChunk(
                    tool_calls=[ToolCallChunk(index=index, arguments=call.arguments[half:])]
                )
            )
        metadata = message.metadata
        rest = (
            {k: v for k, v in metadata.items() if k != "finish_reason"} if len(metadata) > 1 else {}
        )
        chunks.append(
            MessageChunk(
                usage=message.usage, finish_reason=metadata["finish_reason"], metadata=rest
            )
        )
        return chunks


def simplify_events(events: Iterable[AgentEvent]) -> list[str]:
    """Events as short strings for assertions, e.g. ``"A: hello"``, ``"A: [call add {...}]"``,
    ``"A: [tool add] 3"``, ``"A: [transfer -> B]"``, ``"A: [exit]"``, ``"A: [error ...]"``.

    Streams must have been read (they show as their joined message).
    """
    lines: list[str] = []
    for event in events:
        who = event.agent_name
        output = event.output
        if output is not None:
            message = output.message
            if output.stream is not None:
                stream = output.stream
                message = join_chunks(stream._buffer) if stream.done else None
                if message is None:
                    lines.append(f"{who}: [unread stream]")
            if message is not None:
                if message.role == "tool":
                    lines.append(f"{who}: [tool {message.name}] {message.content}")
                else:
                    if message.content:
                        lines.append(f"{who}: {message.content}")
                    for call in message.tool_calls:
                        lines.append(f"{who}: [call {call.name} {call.arguments}]")
            elif output.stream is None:
                lines.append(f"{who}: [custom {output.custom!r}]")
        action = event.action
        if action is not None:
            if action.transfer_to is not None:
                lines.append(f"{who}: [transfer -> {action.transfer_to}]")
            if action.exit:
                lines.append(f"{who}: [exit]")
            if action.break_loop:
                lines.append(f"{who}: [break_loop]")
            if action.interrupted is not None:
                lines.append(f"{who}: [interrupt {', '.join(action.interrupted.point_ids)}]")
        if event.error is not None:
            lines.append(f"{who}: [error {event.error.message}]")
    return lines
