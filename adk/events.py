"""Agent events: output (message, stream or custom data) plus actions.

Events are slotted dataclasses, not pydantic models: they are created for every step of every run
and carry live objects (streams, exceptions) that are never serialised as they are. ``to_dict`` and
``from_dict`` (built from ``adk._event_json``) give a client their JSON form on request only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# ``adk._event_json`` loads on first use (the package's ``__getattr__``): only ``to_dict`` and
# ``from_dict`` need it, never a run.
import adk

from ._checks import check_name, shown
from .interrupts import InterruptInfo, _InterruptSignal
from .messages import Message, Role
from .streams import MessageStream

__all__ = ["AgentAction", "AgentEvent", "AgentOutput", "ErrorInfo"]

_new = object.__new__
_TOOL = Role.TOOL  # an enum member looked up once: `Role.TOOL` costs a metaclass lookup each time


_OURS = ("adk", "prebuilt")
"""The packages whose private classes are named by their nearest public base (``_type_name``)."""


def _type_name(exc: BaseException) -> str:
    """The name of ``exc``'s class, or of its nearest public base when the class is one of
    pyadk's private ones (``KeyError`` for a lookup's ``_Unknown``): what a user reads in an
    error can be caught and looked up, where such a name is neither. A user's own private class
    keeps its name, which the user can catch."""
    cls = type(exc)
    name = cls.__name__
    if not name.startswith("_") or cls.__module__.partition(".")[0] not in _OURS:
        return name  # a user's own private class is theirs to read and catch: kept
    for base in cls.__mro__[1:]:
        if not base.__name__.startswith("_"):
            return base.__name__
    return name  # pragma: no cover  (BaseException is public)


@dataclass(slots=True)
class ErrorInfo:
    """A serialisable description of an error: the exception type name and its message.

    ``cause`` (an extension to DESIGN.md): for an error that only says where something failed
    and wraps what did, the type name of the exception it wraps; ``None`` for any other. An
    ``ActionAgent``'s action that raised fails its run with an ``ActionError`` naming the action
    (``type``), and ``cause`` is what the action raised (``ValueError``, ``ModelError``): what an
    operator groups a pipeline's failed records by, without parsing the message.

    ``reason`` (an extension to DESIGN.md): for a ``CheckpointError`` (or an error whose
    ``cause`` is one), its ``reason``, one word of a fixed set (``"busy"``, ``"corrupt"``, ...:
    docs/interrupts.md, "Why a resume was refused"); ``None`` for any other error. A service
    reading events or a pipeline's outputs answers a busy checkpoint apart from a broken one
    without the exception or the message."""

    type: str
    message: str
    cause: str | None = None
    reason: str | None = None

    @classmethod
    def of(cls, exc: BaseException) -> ErrorInfo:
        """The type name and message of ``exc``; an empty message becomes the type name, so
        ``message`` is never empty. ``cause`` for an exception whose class wraps another's
        (``_names_cause``, ``adk.actions.ActionError``'s) and that was raised from one;
        ``reason`` for a ``CheckpointError``, or one such a wrapper was raised from."""
        name = _type_name(exc)
        wrapped = exc.__cause__ if getattr(exc, "_names_cause", False) else None
        # Through wrappers of wrappers (an action's failure inside an action's nested run): the
        # exception that went wrong, not the next place that reported it (a bounded walk: a
        # chain of causes may loop).
        for _ in range(100):
            if wrapped is None or not getattr(wrapped, "_names_cause", False):
                break
            if wrapped.__cause__ is None:
                break
            wrapped = wrapped.__cause__
        cause = _type_name(wrapped) if wrapped is not None else None
        refused = wrapped if wrapped is not None else exc
        reason = refused.reason if isinstance(refused, adk.CheckpointError) else None
        return cls(type=name, message=str(exc) or name, cause=cause, reason=reason)

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


@dataclass(slots=True, init=False)
class AgentOutput:
    """Exactly one of ``message``, ``stream`` or ``custom``; ``role`` and ``tool_name`` are readable
    without consuming a stream.

    ``shown_only`` (an extension to DESIGN.md) marks a stream shown to the caller as it arrives
    that is not an answer of the agent: the built-in chat action's model replies in a streaming
    run (``adk.actions``). The framework does not record it in history, nor take it as the run's
    output (``RunResult.output``), an ``AgentTool``'s result, a ``PlanExecute`` step's text or an
    agent span's answer, nor read it for the agent (the agent that yields it reads it). It is the
    output's, so it stays with the event wherever the event goes (``RunResult.events``, an
    ``AgentTool``'s forwarded copy, ``to_dict``/``from_dict`` as ``"shown_only": true``)."""

    message: Message | None
    stream: MessageStream | None
    custom: Any
    role: Role | None
    tool_name: str | None
    shown_only: bool

    def __init__(
        self,
        message: Message | None = None,
        stream: MessageStream | None = None,
        custom: Any = None,
        role: Role | str | None = None,
        tool_name: str | None = None,
        shown_only: bool = False,
    ) -> None:
        given = (message is not None) + (stream is not None) + (custom is not None)
        if given > 1:
            raise ValueError("AgentOutput holds exactly one of message, stream or custom")
        if shown_only is not False:
            if shown_only is not True:
                raise TypeError(
                    f"AgentOutput(shown_only=...) takes True or False, got {shown(shown_only)}"
                )
            if stream is None:
                # Streams only: the framework reads the mark on a stream's event alone, so no
                # message event (nearly all of them) pays for it.
                raise ValueError(
                    "AgentOutput(shown_only=True) marks a stream shown as it arrives; give it "
                    "stream=, not a message or a custom value (an event that is not an answer "
                    "and no stream is AgentEvent.custom)"
                )
        if message is not None and not isinstance(message, Message):
            raise TypeError(f"AgentOutput(message=...) takes a Message, got {shown(message)}")
        if stream is not None and not isinstance(stream, MessageStream):
            raise TypeError(f"AgentOutput(stream=...) takes a MessageStream, got {shown(stream)}")
        if tool_name is not None and not isinstance(tool_name, str):
            raise TypeError(f"AgentOutput(tool_name=...) takes a str, got {shown(tool_name)}")
        self.message = message
        self.stream = stream
        self.custom = custom
        self.shown_only = shown_only
        if message is not None:
            self.role = message.role
            self.tool_name = tool_name or (message.name if message.role is _TOOL else None)
        else:
            self.role = Role(role) if role is not None else (Role.ASSISTANT if stream else None)
            self.tool_name = tool_name


@dataclass(slots=True)
class AgentAction:
    """What the emitting agent asks of the framework."""

    exit: bool = False
    transfer_to: str | None = None
    break_loop: bool = False
    interrupted: InterruptInfo | None = None
    custom: Any = None


# Private flags set by the framework while an event travels up through composites.
_TRANSFER_HANDLED = 1  # a flow has acted on this transfer; enclosing agents let it pass
# (4 is adk._driver._RECORDED.) The top of a run (the runner, or an AgentTool for its nested run)
# clears an event's flags once every layer below is done with it (when the next event arrives, or
# the run ends): an event object yielded again, in a later run or passed on from another runner,
# starts clean rather than passing for a break already taken.
_BREAK_HANDLED = 2  # the innermost loop has taken this break; outer loops ignore it
_FORWARDED = 8  # a copy an AgentTool shows from its nested run (emit_inner_events): not an
# output of the agent that yields it, whose output the tool's result is (a PlanExecute's step
# must not take a plan or a result from it). Set on the copy, so it never needs clearing.
# (A stream only shown, no answer, is no flag but ``AgentOutput.shown_only``: what an event *is*
# must outlive the run, its JSON included, where these flags say what layers have done with it.)


@dataclass(slots=True)
class AgentEvent:
    """One thing that happened in a run. The framework stamps ``agent_name`` and ``run_path``."""

    agent_name: str = ""
    run_path: tuple[str, ...] = ()
    output: AgentOutput | None = None
    action: AgentAction | None = None
    error: ErrorInfo | None = None
    exception: BaseException | None = field(default=None, repr=False, compare=False)
    _flags: int = field(default=0, repr=False, compare=False)
    _signal: _InterruptSignal | None = field(default=None, repr=False, compare=False)

    # -- constructors -------------------------------------------------------------------------
    @classmethod
    def of(cls, message: Message | str, *, agent_name: str = "") -> AgentEvent:
        """An event carrying one message (a string becomes an assistant message)."""
        if type(message) is not Message:  # the common case costs one identity test
            if isinstance(message, str):
                message = Message.assistant(message)
            elif not isinstance(message, Message):
                # Else the event would be made and fail later, far from here, on a missing .role.
                raise TypeError(f"AgentEvent.of takes a Message or a str, got {shown(message)}")
        # Made for nearly every message an agent emits: the event and its output are built with
        # their fields set directly, no keyword handling or argument checks.
        output = _new(AgentOutput)
        output.message = message
        output.stream = output.custom = None
        output.shown_only = False
        role = output.role = message.role
        output.tool_name = message.name if role is _TOOL else None
        event = _new(cls)
        event.agent_name = agent_name
        event.run_path = ()
        event.output = output
        event.action = event.error = event.exception = event._signal = None
        event._flags = 0
        return event

    @classmethod
    def streaming(cls, stream: MessageStream, *, role: Role = Role.ASSISTANT) -> AgentEvent:
        """An event carrying ``stream`` while it is still arriving. The framework records the
        joined message in history once the stream ends, before it pulls the agent's next event."""
        if not isinstance(stream, MessageStream):  # None would make an event with no output
            raise TypeError(f"AgentEvent.streaming takes a MessageStream, got {shown(stream)}")
        return cls(output=AgentOutput(stream=stream, role=role))

    @classmethod
    def custom(cls, value: Any) -> AgentEvent:
        """An event carrying application data ``value``; not recorded in history, so no model
        sees it."""
        return cls(output=AgentOutput(custom=value))

    @classmethod
    def exit(cls) -> AgentEvent:
        """An action event that ends the emitting agent and every agent around it, so the run
        ends (inside an ``AgentTool``, only the nested run ends)."""
        return cls(action=AgentAction(exit=True))

    @classmethod
    def transfer(cls, agent_name: str) -> AgentEvent:
        """An action event that ends the emitting agent and asks the enclosing flow
        (``with_sub_agents``) to run ``agent_name`` next; if no flow can, the run fails with a
        ``TransferError``."""
        check_name(agent_name, "AgentEvent.transfer")
        return cls(action=AgentAction(transfer_to=agent_name))

    @classmethod
    def break_loop(cls) -> AgentEvent:
        """An action event that stops the innermost enclosing loop once the emitting agent has
        finished (this event does not end it); ignored outside any loop."""
        return cls(action=AgentAction(break_loop=True))

    @classmethod
    def from_error(cls, exc: BaseException) -> AgentEvent:
        """An error event for ``exc``: ``error`` is its serialisable summary, ``exception`` the
        live object (never saved). The framework stops the agent after it."""
        if not isinstance(exc, BaseException):
            raise TypeError(f"AgentEvent.from_error takes an exception, got {shown(exc)}")
        return cls(error=ErrorInfo.of(exc), exception=exc)

    # -- readers ------------------------------------------------------------------------------
    @property
    def message(self) -> Message | None:
        """The output message, if this event carries a (non-streamed) message."""
        return self.output.message if self.output is not None else None

    @property
    def interrupted(self) -> InterruptInfo | None:
        """The points the run now waits on, if this event reports a pause."""
        return self.action.interrupted if self.action is not None else None

    @property
    def ends_agent(self) -> bool:
        """True if the framework stops pulling from the emitting agent after this event."""
        action = self.action
        if action is None:
            return False
        return bool(
            action.exit
            or action.interrupted is not None
            or (action.transfer_to is not None and not self._flags & _TRANSFER_HANDLED)
        )

    # -- JSON data ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """This event as JSON data for a client (``json.dumps`` it for SSE, NDJSON, a websocket);
        ``from_dict`` makes the event back. Fields left at their defaults are left out; the format
        is documented field by field in docs/agents.md.

        Custom data (``output.custom``, ``action.custom``, interrupt infos) must be JSON values or
        pydantic models registered with ``adk.register_type``, as in checkpoints; anything else is
        a ``TypeError`` naming the field. A streaming event is encoded as its joined message once
        its stream has been read to its end (``"streamed": true`` says it came as a stream);
        before that, or if the stream failed, it is a ``ValueError``: this never reads a stream
        behind its readers' backs. ``exception`` is never encoded (``error`` describes it).
        """
        data: dict[str, Any] = {"agent_name": self.agent_name, "run_path": list(self.run_path)}
        output = self.output
        if output is not None:
            out: dict[str, Any] = {}
            if output.message is not None:
                out["message"] = adk._event_json.dump_message(output.message, "output.message")
            elif output.stream is not None:
                try:
                    message = output.stream._final_message()
                except ValueError as exc:
                    raise ValueError(f"a streaming event cannot be encoded yet: {exc}") from None
                out["message"] = adk._event_json.dump_message(message, "output.message")
                out["streamed"] = True
                if output.shown_only:
                    out["shown_only"] = True
            elif output.custom is not None:
                out["custom"], custom_type = adk._event_json.dump_value(
                    output.custom, "output.custom"
                )
                if custom_type is not None:
                    out["custom_type"] = custom_type
            if output.role is not None:
                out["role"] = output.role.value
            if output.tool_name is not None:
                out["tool_name"] = output.tool_name
            data["output"] = out
        action = self.action
        if action is not None:
            act: dict[str, Any] = {}
            if action.exit:
                act["exit"] = True
            if action.transfer_to is not None:
                act["transfer_to"] = action.transfer_to
            if action.break_loop:
                act["break_loop"] = True
            if action.interrupted is not None:
                act["interrupted"] = adk._event_json.dump_interrupt(action.interrupted)
            if action.custom is not None:
                act["custom"], custom_type = adk._event_json.dump_value(
                    action.custom, "action.custom"
                )
                if custom_type is not None:
                    act["custom_type"] = custom_type
            data["action"] = act
        if self.error is not None:
            data["error"] = {"type": self.error.type, "message": self.error.message}
            if self.error.cause is not None:  # only then: a reader before it reads the rest
                data["error"]["cause"] = self.error.cause
            if self.error.reason is not None:  # a CheckpointError's only, as ``cause``
                data["error"]["reason"] = self.error.reason
        return data

    @classmethod
    def from_dict(cls, data: Any) -> AgentEvent:
        """The event ``to_dict`` encoded (parsed JSON). A streamed message comes back as a
        finished stream (``MessageStream.from_message``); registered models come back as their
        types (register them first), nested ones as their data. Anything that is not such data
        is a ``ValueError`` naming the field; ``exception`` is ``None``."""
        fields = adk._event_json.checked(
            data, "", {"agent_name", "run_path", "output", "action", "error"}
        )
        agent_name = fields.get("agent_name", "")
        run_path = fields.get("run_path", [])
        if not isinstance(agent_name, str):
            raise ValueError(f"event agent_name: expected a str, got {shown(agent_name)}")
        if not (isinstance(run_path, list) and all(isinstance(p, str) for p in run_path)):
            raise ValueError(f"event run_path: expected a list of str, got {shown(run_path)}")
        event = cls(agent_name=agent_name, run_path=tuple(run_path))
        if "output" in fields:
            event.output = _output_from(fields["output"])
        if "action" in fields:
            event.action = _action_from(fields["action"])
        if "error" in fields:
            error = adk._event_json.checked(fields["error"], "error", _ERROR_KEYS)
            kind, text, cause = error.get("type"), error.get("message"), error.get("cause")
            if not (isinstance(kind, str) and isinstance(text, str)):
                raise ValueError("event error: type and message must be strings")
            if cause is not None and not isinstance(cause, str):
                raise ValueError(
                    f"event error: cause must be a string or absent, got {shown(cause)}"
                )
            # Any word, not only this pyadk's: a newer one's reason is read, not refused.
            reason = error.get("reason")
            if reason is not None and not (isinstance(reason, str) and reason):
                raise ValueError(
                    "event error: reason must be a word (a CheckpointError's reason) or absent, "
                    f"got {shown(reason)}"
                )
            event.error = ErrorInfo(kind, text, cause, reason)
        return event


_ERROR_KEYS = {"type", "message", "cause", "reason"}
_OUTPUT_KEYS = {"message", "streamed", "shown_only", "custom", "custom_type", "role", "tool_name"}
_ACTION_KEYS = {"exit", "transfer_to", "break_loop", "interrupted", "custom", "custom_type"}


def _output_from(data: Any) -> AgentOutput:
    fields = adk._event_json.checked(data, "output", _OUTPUT_KEYS)
    role, tool_name = fields.get("role"), fields.get("tool_name")
    if tool_name is not None and not isinstance(tool_name, str):
        raise ValueError(f"event output.tool_name: expected a str, got {shown(tool_name)}")
    try:
        role = Role(role) if role is not None else None
    except ValueError:
        raise ValueError(f"event output.role: not a role: {role!r}") from None
    if "message" in fields and "custom" in fields:
        raise ValueError("event output: holds one of message or custom, not both")
    adk._event_json.check_custom_type(fields, "output")
    streamed = fields.get("streamed", False)
    if type(streamed) is not bool or (streamed and "message" not in fields):
        raise ValueError("event output.streamed: true (with a message) or left out")
    shown_only = fields.get("shown_only", False)  # JSON written before it: left out, False
    if type(shown_only) is not bool or (shown_only and not streamed):
        raise ValueError("event output.shown_only: true (with a streamed message) or left out")
    if "message" in fields:
        message = adk._event_json.load_message(fields["message"], "output.message")
        if role is not None and role is not message.role:
            raise ValueError(
                f"event output.role: {role.value!r} but the message's is {message.role.value!r}"
            )
        if streamed:
            stream = MessageStream.from_message(message)
            return AgentOutput(stream=stream, role=role, tool_name=tool_name, shown_only=shown_only)
        return AgentOutput(message=message, tool_name=tool_name)
    custom = adk._event_json.load_value(
        fields.get("custom"), fields.get("custom_type"), "output.custom"
    )
    return AgentOutput(custom=custom, role=role, tool_name=tool_name)


def _action_from(data: Any) -> AgentAction:
    fields = adk._event_json.checked(data, "action", _ACTION_KEYS)
    exit_, break_loop = fields.get("exit", False), fields.get("break_loop", False)
    transfer_to = fields.get("transfer_to")
    if type(exit_) is not bool or type(break_loop) is not bool:
        raise ValueError("event action: exit and break_loop must be true or false")
    if transfer_to is not None and not isinstance(transfer_to, str):
        raise ValueError(f"event action.transfer_to: expected a str, got {shown(transfer_to)}")
    interrupted = fields.get("interrupted")
    adk._event_json.check_custom_type(fields, "action")
    return AgentAction(
        exit=exit_,
        transfer_to=transfer_to,
        break_loop=break_loop,
        interrupted=adk._event_json.load_interrupt(interrupted)
        if interrupted is not None
        else None,
        custom=adk._event_json.load_value(
            fields.get("custom"), fields.get("custom_type"), "action.custom"
        ),
    )


def message_event(message: Message) -> AgentEvent:
    """``AgentEvent.of(message)``, for the framework's own messages (a model's reply, a tool's
    result): a classmethod call costs more than the rest of it in CPython 3.11 (the lookup on the
    class is not specialised and binds a method object), and this runs on every model turn and
    tool call. ``tests/test_event_rules.py`` holds the two equal."""
    output = _new(AgentOutput)
    output.message = message
    output.stream = output.custom = None
    output.shown_only = False
    role = output.role = message.role
    output.tool_name = message.name if role is _TOOL else None
    event = _new(AgentEvent)
    event.agent_name = ""
    event.run_path = ()
    event.output = output
    event.action = event.error = event.exception = event._signal = None
    event._flags = 0
    return event


def tool_result_event(message: Message, tool_name: str) -> AgentEvent:
    """``message_event(message)`` of a tool result the framework has just made with
    ``tool_message(..., name=tool_name)`` (role ``tool``): given the name, it reads neither of
    the message's fields, each a pydantic read that CPython 3.11 does not specialise (~0.5k
    instructions). ``tests/test_event_rules.py`` holds it equal to ``message_event``."""
    output = _new(AgentOutput)
    output.message = message
    output.stream = output.custom = None
    output.shown_only = False
    output.role = _TOOL
    output.tool_name = tool_name
    event = _new(AgentEvent)
    event.agent_name = ""
    event.run_path = ()
    event.output = output
    event.action = event.error = event.exception = event._signal = None
    event._flags = 0
    return event
