"""Agent events: output (message, stream or custom data) plus actions.

Events are slotted dataclasses, not pydantic models: they are created for every step of every run
and carry live objects (streams, exceptions) that are never serialised as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._checks import check_name, shown
from .interrupts import InterruptInfo, _InterruptSignal
from .messages import Message, Role
from .streams import MessageStream

__all__ = ["AgentAction", "AgentEvent", "AgentOutput", "ErrorInfo"]

_new = object.__new__
_TOOL = Role.TOOL  # an enum member looked up once: `Role.TOOL` costs a metaclass lookup each time


@dataclass(slots=True)
class ErrorInfo:
    """A serialisable description of an error: the exception type name and its message."""

    type: str
    message: str

    @classmethod
    def of(cls, exc: BaseException) -> ErrorInfo:
        """The type name and message of ``exc``; an empty message becomes the type name, so
        ``message`` is never empty."""
        return cls(type=type(exc).__name__, message=str(exc) or type(exc).__name__)

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


@dataclass(slots=True, init=False)
class AgentOutput:
    """Exactly one of ``message``, ``stream`` or ``custom``; ``role`` and ``tool_name`` are readable
    without consuming a stream."""

    message: Message | None
    stream: MessageStream | None
    custom: Any
    role: Role | None
    tool_name: str | None

    def __init__(
        self,
        message: Message | None = None,
        stream: MessageStream | None = None,
        custom: Any = None,
        role: Role | str | None = None,
        tool_name: str | None = None,
    ) -> None:
        given = (message is not None) + (stream is not None) + (custom is not None)
        if given > 1:
            raise ValueError("AgentOutput holds exactly one of message, stream or custom")
        if message is not None and not isinstance(message, Message):
            raise TypeError(f"AgentOutput(message=...) takes a Message, got {shown(message)}")
        if stream is not None and not isinstance(stream, MessageStream):
            raise TypeError(f"AgentOutput(stream=...) takes a MessageStream, got {shown(stream)}")
        if tool_name is not None and not isinstance(tool_name, str):
            raise TypeError(f"AgentOutput(tool_name=...) takes a str, got {shown(tool_name)}")
        self.message = message
        self.stream = stream
        self.custom = custom
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


def message_event(message: Message) -> AgentEvent:
    """``AgentEvent.of(message)``, for the framework's own messages (a model's reply, a tool's
    result): a classmethod call costs more than the rest of it in CPython 3.11 (the lookup on the
    class is not specialised and binds a method object), and this runs on every model turn and
    tool call. ``tests/test_event_rules.py`` holds the two equal."""
    output = _new(AgentOutput)
    output.message = message
    output.stream = output.custom = None
    role = output.role = message.role
    output.tool_name = message.name if role is _TOOL else None
    event = _new(AgentEvent)
    event.agent_name = ""
    event.run_path = ()
    event.output = output
    event.action = event.error = event.exception = event._signal = None
    event._flags = 0
    return event
