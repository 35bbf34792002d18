"""The events actions react to: a pydantic base class and the built-in kinds.

Events are pydantic models, unlike ``AgentEvent``: they are the user's own data types, they travel
between actions, and a paused agent saves the ones still waiting in its checkpoint. Every event has
an ``id``; responses name the request they answer by it (``request_id``), which is how the
built-in chat action finds its conversation again when a tool response arrives.

No ``from __future__ import annotations`` here: with it pydantic would compile every field's
annotation string at class creation. Forward references are quoted.
"""

import itertools
import os
import weakref
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .._fastmodel import fast_builder
from ..messages import Message, ToolCall
from ..models.base import ModelOptions

__all__ = [
    "ChatRequestEvent",
    "ChatResponseEvent",
    "Event",
    "InputEvent",
    "OutputEvent",
    "ToolRequestEvent",
    "ToolResponseEvent",
]


# Event ids: a random per-process prefix and a counter. Ids are saved in checkpoints, so they must
# not collide with the ids a resumed run in another process makes: the prefix sees to that, at a
# fraction of a uuid4's cost (an event is made for every step of every input).
_ID_PREFIX = os.urandom(6).hex()
_event_numbers = itertools.count(1)


def _new_event_id() -> str:
    return f"{_ID_PREFIX}-{next(_event_numbers)}"


_unbuilt: "weakref.WeakSet[type[Event]]" = weakref.WeakSet()
"""User event classes whose annotations could not be resolved where they were defined (a forward
reference to a class defined later, a name imported under ``if TYPE_CHECKING``): still deferred.
``FlinkExecutionEnvironment.apply`` builds those it ships, or names what is missing (see
``adk.execution._flink``); kept weakly, so a class dropped is forgotten."""


class Event(BaseModel):
    """Base of every event. Subclass it for your own: fields are validated like any pydantic model.

    ``extra="forbid"``: a misspelt field is an error where the event is made, not a value that
    silently never arrives.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: str = Field(default_factory=_new_event_id)

    if not TYPE_CHECKING:  # type checkers keep pydantic's keyword-only signature of each event

        def __init__(self, /, *args: Any, **data: Any) -> None:
            """pydantic's ``__init__``, with a positional argument refused by a message that says
            how to pass it: ``OutputEvent("done")`` (Flink Agents' Java ``new OutputEvent(x)``)
            failed with ``BaseModel.__init__() takes 1 positional argument but 2 were given``.
            The validator is called as pydantic's own ``__init__`` calls it, so no frame is added
            to an event's construction."""
            if args:
                raise TypeError(_by_name(type(self), len(args)))
            self.__pydantic_validator__.validate_python(data, self_instance=self)

        # Read by pydantic: validating an event (a nested field, ``model_validate``) need not
        # call this ``__init__``, which only adds the message above to pydantic's.
        __init__.__pydantic_base_init__ = True

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Build your own event classes where they are defined; only the built-in ones wait for
        their first use. A class still deferred holds pydantic's placeholder validator, which
        cannot be unpickled (it recurses until Python gives up), and PyFlink ships the classes
        of a job script to its workers pickled by value: the job failed on its workers with a
        RecursionError. A class whose annotations cannot be resolved yet stays deferred, and is
        noted in ``_unbuilt``, so that a Flink job builds it before shipping it, or says why it
        cannot."""
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__module__ != __name__ and cls.model_rebuild(raise_errors=False) is False:
            _unbuilt.add(cls)


def _by_name(cls: type[Event], given: int) -> str:
    """The error for an event made with ``given`` positional arguments: its fields by name."""
    fields = [name for name in cls.model_fields if name != "id"]
    example = f"{cls.__name__}({fields[0]}=...)" if fields else f"{cls.__name__}()"
    listed = ", ".join(fields) if fields else "none besides id"
    return (
        f"{cls.__name__} takes its fields by name, not by position ({given} given): e.g. "
        f"{example}; its fields: {listed}"
    )


class InputEvent(Event):
    """Starts the agent: one per input.

    ``input`` is the record (under an execution environment) or, under a ``Runner`` or in a
    workflow, the text of the last input message. ``messages`` is the conversation the agent was
    started with (``Runner``, workflows); for a record, the user message made of it (the record
    itself for text or messages, else its JSON), which a chat can be given as it is.
    """

    input: Any = None
    messages: list[Message] = Field(default_factory=list)


class OutputEvent(Event):
    """What the agent produces: each one surfaces as an ``AgentEvent`` output (a ``Message`` as a
    message, a ``str`` as an assistant message, anything else as custom data)."""

    output: Any = None


class ChatRequestEvent(Event):
    """Ask the model resource named ``model``. The built-in chat action offers it the tools named in
    ``tools``, runs the tool calls it makes (through ``ToolRequestEvent``s) and answers with one
    ``ChatResponseEvent`` once the model replies without tool calls, after at most
    ``max_tool_rounds`` rounds of calls."""

    model: str
    messages: list[Message]
    tools: list[str] = Field(default_factory=list)
    options: ModelOptions | None = None
    max_tool_rounds: int = Field(default=10, ge=0)

    @field_validator("model", mode="before")
    @classmethod
    def _a_model_name(cls, model: object) -> object:
        """A model object given for its name (as a ``ReActAgent`` takes one) failed as pydantic's
        "Input should be a valid string", which did not say that the request names a resource:
        an event is data, saved in checkpoints, so it cannot hold the model itself."""
        if isinstance(model, str) or not hasattr(model, "generate"):
            return model
        raise ValueError(
            "model takes the name of a model resource, not the model itself: register it, "
            "resources.add_model('my_model', model), and name it, model='my_model'"
        )

    @field_validator("tools", mode="before")
    @classmethod
    def _tool_names(cls, tools: object) -> object:
        """Tools given as objects or functions (as a ``ReActAgent`` takes them), for their names:
        said as ``model`` is."""
        if isinstance(tools, list | tuple) and any(not isinstance(t, str) for t in tools):
            given = next(t for t in tools if not isinstance(t, str))
            if callable(given) or hasattr(given, "spec"):
                raise ValueError(
                    "tools takes the names of tool resources, not the tools themselves: register "
                    "them, resources.add_tool(my_tool), and name them, tools=['my_tool']"
                )
        return tools

    @field_validator("tools")
    @classmethod
    def _one_tool_per_name(cls, tools: list[str]) -> list[str]:
        """Refuse a name given twice where the request is made: the model would be offered two
        tools of one name (some providers refuse such a request, others call either)."""
        if len(set(tools)) != len(tools):
            twice = next(name for i, name in enumerate(tools) if name in tools[:i])
            raise ValueError(f"tool {twice!r} is named twice; offer each tool once")
        return tools


class ChatResponseEvent(Event):
    """The model's final reply to the ``ChatRequestEvent`` whose id is ``request_id``."""

    request_id: str
    response: Message


class ToolRequestEvent(Event):
    """Run ``tool_calls``. ``tools`` names the tools the caller may use (``None``: any tool the
    resources have); ``model`` is the model resource that asked, if any."""

    tool_calls: list[ToolCall]
    tools: list[str] | None = None
    model: str | None = None


class ToolResponseEvent(Event):
    """The tool messages answering the ``ToolRequestEvent`` whose id is ``request_id``, one per call
    in the order of the calls. A failed call is an error message the model can read.

    ``structured`` holds, one per response, the machine-readable output its tool gave beside the
    text (``ToolResult.structured``: an MCP tool's structured content), None for a call that gave
    none; the field is None when no call gave any. The text is what a model reads; this is for an
    action that wants the data (an extension to DESIGN.md's shape, optional, so an event made or
    saved without it is as it was)."""

    request_id: str
    responses: list[Message]
    structured: list[Any] | None = None

    @model_validator(mode="after")
    def _one_structured_per_response(self) -> "ToolResponseEvent":
        structured = self.structured
        if structured is not None and len(structured) != len(self.responses):
            raise ValueError(
                f"structured holds {len(structured)} values for {len(self.responses)} "
                "responses: one per response (None for one without), or None for none"
            )
        return self


# The framework's own events, built from values already valid (messages, tool calls it holds):
# without validation, which costs more than the rest of routing an event (see ``_fastmodel``).
_build_input = fast_builder(InputEvent)
_build_chat_response = fast_builder(ChatResponseEvent)
_build_tool_request = fast_builder(ToolRequestEvent)
_build_tool_response = fast_builder(ToolResponseEvent)
_INPUT_SET = frozenset({"input", "messages"})
_CHAT_RESPONSE_SET = frozenset({"request_id", "response"})
_TOOL_REQUEST_SET = frozenset({"tool_calls", "tools", "model"})
_TOOL_RESPONSE_SET = frozenset({"request_id", "responses"})


def _input_event(input: Any, messages: list[Message]) -> InputEvent:
    values = {"id": _new_event_id(), "input": input, "messages": messages}
    return _build_input(values, set(_INPUT_SET))


def _chat_response_event(request_id: str, response: Message) -> ChatResponseEvent:
    values = {"id": _new_event_id(), "request_id": request_id, "response": response}
    return _build_chat_response(values, set(_CHAT_RESPONSE_SET))


def _tool_request_event(
    tool_calls: list[ToolCall], tools: list[str] | None, model: str | None
) -> ToolRequestEvent:
    values = {"id": _new_event_id(), "tool_calls": tool_calls, "tools": tools, "model": model}
    return _build_tool_request(values, set(_TOOL_REQUEST_SET))


def _tool_response_event(
    request_id: str, responses: list[Message], structured: list[Any] | None = None
) -> ToolResponseEvent:
    values = {
        "id": _new_event_id(),
        "request_id": request_id,
        "responses": responses,
        "structured": structured,
    }
    fields_set = set(_TOOL_RESPONSE_SET)
    if structured is not None:
        fields_set.add("structured")
    return _build_tool_response(values, fields_set)
