"""What an agent is: the ``Agent`` / ``ResumableAgent`` protocols, ``AgentInput`` and ``BaseAgent``."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from types import FunctionType
from typing import Any, Protocol, runtime_checkable

from ._checks import agent_description, check_name
from .context import RunContext
from .events import AgentEvent
from .messages import Message

__all__ = ["Agent", "AgentInput", "BaseAgent", "ResumableAgent"]


class AgentInput:
    """The messages an agent starts from, and whether the run streams.

    Inputs built from the run's history are computed lazily: many agents (routers, custom steps)
    never read them, and a workflow of N agents would otherwise rebuild N histories per run.
    ``history.build_input`` makes those: their messages are ``_build(*_build_args)``, called when
    first read (a function and its arguments rather than a closure: a closure costs a cell per
    captured name). ``_build`` outlives the read: it tells an agent with a ``history_rewriter``
    that this input is the history's view, which the rewriter replaces, not one a parent made.
    """

    __slots__ = ("_build", "_build_args", "_messages", "enable_streaming")

    def __init__(self, messages: list[Message] | None = None, enable_streaming: bool = False):
        self._messages = messages
        self._build: Callable[..., list[Message]] | None = None
        self._build_args: tuple[Any, ...] = ()
        self.enable_streaming = enable_streaming

    @property
    def messages(self) -> list[Message]:
        """The input messages, built from the run's history when first read (many agents never
        read them) and kept from then on. Assigning replaces them."""
        if self._messages is None:
            build = self._build
            self._messages = build(*self._build_args) if build is not None else []
            self._build_args = ()  # ``_build`` stays: it marks an input built from the history
        return self._messages

    @messages.setter
    def messages(self, value: list[Message]) -> None:
        self._messages = value
        self._build, self._build_args = None, ()

    def __repr__(self) -> str:
        return f"AgentInput({self.messages!r}, enable_streaming={self.enable_streaming})"


@runtime_checkable
class Agent(Protocol):
    """Anything with a name, a description and ``run(input, ctx)`` returning events."""

    name: str
    description: str

    def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Start the agent on ``input``; returns its events (an ``async def`` that yields fits).
        The framework stops pulling after an exit, unhandled transfer, interrupt or error."""
        ...


def _agent_new(cls: type, *args: object, **kwargs: object) -> Any:
    """``Agent.__new__``: ``adk.Agent(...)`` written as another SDK's ``Agent(name=, ...)`` is
    told which agent to make. Set after the class is made, so type checkers do not see it (a
    ``__new__`` in the protocol's body could become one of its members)."""
    if cls is Agent:
        raise TypeError(
            "adk.Agent is the protocol every agent satisfies, not an agent to make: a model agent "
            "(the OpenAI Agents SDK's Agent, Google ADK's Agent or LlmAgent) is "
            "prebuilt.ReActAgent(name, model, instruction=..., tools=[...]), and a custom agent "
            "a subclass of adk.BaseAgent"
        )
    return super(Agent, cls).__new__(cls)  # type: ignore[misc]


Agent.__new__ = staticmethod(_agent_new)  # type: ignore[method-assign]


@runtime_checkable
class ResumableAgent(Agent, Protocol):
    """An agent that continues from the state it saved when it interrupted (``ctx.resume``)."""

    def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Called instead of ``run`` when a resume addresses this agent (or something below it);
        there is no input: continue from ``ctx.resume`` (the ``state`` saved, the ``data`` sent)."""
        ...


def _check_run_signature(cls: str, run: Callable[..., Any], without_self: bool) -> None:
    """Refuse, where the class ``cls`` is defined, a ``run`` that cannot be called as
    ``run(input, ctx)``: ``async def run(self, input)`` failed each run with "run() takes 2
    positional arguments but 3 were given", naming neither what it is given nor why.
    ``without_self``: called without the instance (a static or class method, or a callable
    that is no descriptor, ``run = Answer()``, as Python calls it). A ``run`` whose signature
    cannot be read is left to run."""
    try:
        signature = inspect.signature(run)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*(None,) * (2 if without_self else 3))  # (self,) input, ctx
    except TypeError:
        names = ", ".join(signature.parameters)
        raise TypeError(
            f"{cls}.run({names}) cannot be called as run(input, ctx): the framework passes "
            "both; write async def run(self, input: adk.AgentInput, ctx: adk.RunContext)"
        ) from None


class BaseAgent:
    """Convenience base: holds ``name`` and ``description``; override ``async def run``.

    An agent without ``resume`` that was interrupted is run again with ``ctx.resume`` set, which is
    often all a custom agent needs: check ``ctx.resume`` and continue from its ``state``/``data``.
    """

    _adk_parent: Any = None  # the flow this agent was made a sub-agent of (one parent only)
    _adk_flow: Any = None  # the flow node that represents this agent in a transfer graph
    _adk_callbacks: Any = None  # its own callbacks (``adk.callbacks._AgentCallbacks``), if any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("run")
        if own is None:
            return
        if isinstance(own, staticmethod | classmethod):
            _check_run_signature(cls.__name__, cls.run, True)
        elif isinstance(own, FunctionType):
            _check_run_signature(cls.__name__, own, False)
        elif not hasattr(type(own), "__get__"):
            # No descriptor (an object with ``__call__``, ``functools.partial`` before 3.14):
            # Python calls it without the instance, as run(input, ctx).
            _check_run_signature(cls.__name__, own, True)
        # Another descriptor binds as it likes (``__get__``): left to run.

    def __init__(self, name: str, description: str = "") -> None:
        self.name = check_name(name, "an agent")
        self.description = agent_description(description, f"agent {name!r}")

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        """Override with an ``async def`` that yields events; ``ctx.resume`` is set when a resume
        runs the agent again after its interrupt."""
        raise NotImplementedError(f"{type(self).__name__} must implement run()")
        yield  # pragma: no cover - makes this an async generator for type checkers

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"
