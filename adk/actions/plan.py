"""``@action`` and ``AgentPlan``: which actions run for which event types, checked once.

``AgentPlan.compile(agent)`` collects the agent's actions (methods and static methods marked with
``@action``, and the functions passed as ``actions=``), adds the built-in chat and tool actions,
checks every signature, and answers "who listens for this event type" from a per-type cache. The
plan is also a description: ``to_dict()``/``to_json()`` give the actions by event type and the
agent's own resources as JSON, for logs, reviews and other runtimes.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace, UnionType
from typing import (
    TYPE_CHECKING,
    Any,
    Protocol,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from ..models.base import RetryPolicy
from . import _builtin
from .context import ActionContext
from .events import ChatRequestEvent, Event, InputEvent, ToolRequestEvent, ToolResponseEvent

if TYPE_CHECKING:
    from .agent import ActionAgent

__all__ = ["AgentPlan", "CompiledAction", "action"]

_MARK = "_adk_action_events"
_RETRY = "_adk_action_retry"
_F = TypeVar("_F")


def action(*events: type[Event], retry: RetryPolicy | None = None) -> Callable[[_F], _F]:
    """Mark a function or method ``(event, ctx)`` (sync or async) as reacting to ``events``.

    An action listens for the event types named and their subclasses. Works above or below
    ``@staticmethod`` and ``@classmethod``.

    ``retry`` (an extension, as LlamaIndex's ``@step(retry_policy=...)``): an action that raises
    runs again on the same event, up to ``retry.max_attempts`` times in all, after the policy's
    backoff. A failed attempt's sent events are dropped and its memory writes undone, as for a
    pause; what it did outside (a call to a service) is not undone, so the action must be safe to
    run again. ``adk.Interrupt``, cancellation and the run's own failures are not retried, nor
    a failure carrying an HTTP status (``status_code``, ``status``: a ``ModelError``, an SDK's
    error; ``response.status_code``: httpx's ``raise_for_status()``) that the policy does not
    retry (``retry_on_status``, by default 408, 409, 429, 5xx).
    """
    if not events:
        raise TypeError("@action needs at least one event type, e.g. @action(InputEvent)")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise TypeError(
            f"@action(retry=...) takes an adk.RetryPolicy, got {type(retry).__name__}; e.g. "
            "retry=RetryPolicy(max_attempts=3, initial_delay=0.5)"
        )
    for event_type in events:
        if not (isinstance(event_type, type) and issubclass(event_type, Event)):
            if len(events) == 1 and (
                inspect.isfunction(event_type) or isinstance(event_type, staticmethod)
            ):
                # ``@action`` without its parentheses is handed the function it marks.
                raise TypeError(
                    f"@action needs the event types it listens for: write "
                    f"@action(InputEvent) (or your own Event class) above "
                    f"{event_type.__name__}, not a bare @action"
                )
            raise TypeError(
                f"@action takes Event subclasses, got {event_type!r}; "
                "define events as classes deriving from adk.actions.Event"
            )

    def mark(function: _F) -> _F:
        target = function.__func__ if isinstance(function, staticmethod | classmethod) else function
        if not callable(target):
            raise TypeError(f"@action decorates functions, not {type(function).__name__}")
        try:
            setattr(target, _MARK, tuple(events))
        except AttributeError:  # a bound method, a builtin: nowhere to keep the mark
            raise TypeError(
                f"@action cannot mark {target!r}, which takes no attributes: put @action above "
                "the method's def in its class, or mark a wrapper of it, "
                "action(...)(functools.partial(obj.method))"
            ) from None
        setattr(target, _RETRY, retry)
        return function

    return mark


def _type_key(event_type: type) -> str:
    return f"{event_type.__module__}.{event_type.__qualname__}"


class CompiledAction(Protocol):
    """One action of a compiled plan (``AgentPlan.actions``), read-only: its ``name``, the event
    classes it listens for (``events``), the function it calls (``function``, its
    ``module.QualName``), whether that is a coroutine function (``is_async``), whether it is one
    of the built-in chat and tool actions (``builtin``), its ``retry`` policy, and ``describe()``,
    its entry in ``AgentPlan.to_dict()``."""

    @property
    def name(self) -> str: ...

    @property
    def events(self) -> tuple[type[Event], ...]: ...

    @property
    def function(self) -> str: ...

    @property
    def is_async(self) -> bool: ...

    @property
    def builtin(self) -> bool: ...

    @property
    def retry(self) -> RetryPolicy | None: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class _Action:
    """One compiled action: what it listens for and how to call it."""

    name: str
    events: tuple[type[Event], ...]
    call: Callable[[Any, Any], Any]
    function: str
    is_async: bool
    builtin: bool = False
    retry: RetryPolicy | None = None

    def describe(self) -> dict[str, Any]:
        described = {
            "name": self.name,
            "function": self.function,
            "listens": [_type_key(t) for t in self.events],
            "async": self.is_async,
            "builtin": self.builtin,
        }
        if self.retry is not None:
            described["retry"] = self.retry.model_dump()
        return described


def _origin(call: Callable[..., Any]) -> Any:
    """What describes ``call`` in a plan: the function under a method, decorators and
    ``functools.partial``; the class of a callable object (which has no ``__qualname__``)."""
    raw = inspect.unwrap(getattr(call, "__func__", call))
    while isinstance(raw, functools.partial):
        raw = inspect.unwrap(raw.func)
    return raw if hasattr(raw, "__qualname__") else type(raw)


def _signature_error(name: str, call: Callable[..., Any]) -> str:
    """Why ``call`` cannot be an action. A method's own signature is shown, self included: the
    bound method's hid the parameter taken as self, so ``def start(event, ctx)`` in an agent class
    (self left out, as in a function action) read "its signature is (ctx)", as if ``event`` were
    the one missing."""
    function = getattr(call, "__func__", None) if inspect.ismethod(call) else None
    if function is None:
        return f"action {name!r} must take (event, ctx); its signature is {inspect.signature(call)}"
    own = inspect.signature(function)
    message = f"action {name!r} must take (event, ctx) after self; its signature is {own}"
    first = next(iter(own.parameters), None)
    if first in ("self", None):
        return message
    # Two parameters, neither of them self: written as a function action is.
    try:
        own.bind(None, None)
    except TypeError:
        return message
    return f"{message}, which takes no self: add self first, or mark it @staticmethod"


def _compile_one(name: str, call: Callable[..., Any], events: tuple[type[Event], ...]) -> _Action:
    raw = _origin(call)
    if inspect.isasyncgenfunction(raw) or inspect.isgeneratorfunction(raw):
        # Its call only makes a generator, which nothing iterates: the action would never run.
        raise TypeError(
            f"action {name!r} is a generator function; an action returns nothing and sends "
            "events with ctx.send_event(...) instead of yielding them"
        )
    signature: inspect.Signature | None = None
    try:
        signature = inspect.signature(call)
        signature.bind(None, None)
    except TypeError:
        raise TypeError(_signature_error(name, call)) from None
    except ValueError:  # no signature to inspect (a builtin): trust it
        pass
    typed = _event_annotation(call, raw)
    if signature is not None and typed is None and _ctx_first(signature, raw):
        raise TypeError(
            f"action {name!r} takes (ctx, event): an action takes the event first, then ctx "
            "(event, ctx), the reverse of a LlamaIndex step's (self, ctx, ev); swap its parameters "
            "(an event parameter named ctx or context: type it as its events, or the one after "
            "it as ActionContext)"
        )
    if typed is not None:
        wrong = [t.__name__ for t in events if not issubclass(t, typed)]
        if wrong:
            named = " | ".join(t.__name__ for t in typed)
            raise TypeError(
                f"action {name!r} listens for {', '.join(wrong)} but its event parameter is "
                f"typed {named}: it would be handed events it does not take; name the events "
                f"it takes in @action(...), or type the parameter as they are"
            )
    marked = getattr(call, "__func__", call)
    return _Action(
        name=name,
        events=events,
        call=call,
        function=f"{raw.__module__}:{raw.__qualname__}",
        is_async=inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(raw),
        retry=getattr(marked, _RETRY, None),
    )


def _ctx_first(signature: inspect.Signature, raw: Any) -> bool:
    """Whether an action's first parameter is the context, as in a LlamaIndex step ``(self, ctx,
    ev)``; asked only when it is not typed as events (``_event_annotation``: a class, a union,
    text resolved in the action's module), which makes it the event whatever its name. It is the
    context when typed ``ActionContext`` (the class, or its name as text), or named ``ctx`` or
    ``context`` unless the parameter after it is the context (typed ``ActionContext`` or named
    so) or its annotation is text that cannot be resolved (a class local to a function) naming
    an ``...Event``. Such an action was taken and failed only when it ran, handed the event as
    ``ctx`` ("'InputEvent' object has no attribute 'send_event'")."""
    parameters = list(signature.parameters.values())
    if not parameters:
        return False
    first = parameters[0]
    annotation = first.annotation
    if isinstance(annotation, str):
        # Resolved as the event's is: an event class's name (a user's ``Context``) says nothing.
        with contextlib.suppress(Exception):  # unresolvable: the text is all there is
            annotation = _resolved(annotation, raw)
    if _is_context_type(annotation):
        return True
    if first.name not in ("ctx", "context"):
        return False
    second = parameters[1] if len(parameters) > 1 else None
    if second is not None and (
        second.name in ("ctx", "context") or _is_context_type(second.annotation)
    ):
        return False  # (event, ctx) with the event named ctx or context
    return not (isinstance(annotation, str) and _text_name(annotation).endswith("Event"))


def _is_context_type(annotation: Any) -> bool:
    """``ActionContext`` (or a subclass), or text naming it."""
    if isinstance(annotation, str):
        return _text_name(annotation) == "ActionContext"
    return isinstance(annotation, type) and issubclass(annotation, ActionContext)


def _text_name(annotation: str) -> str:
    """The class an annotation written as text names: ``'adk.actions.ActionContext'`` is
    ``ActionContext``."""
    return annotation.strip("'\" ").rsplit(".", 1)[-1]


_TYPED: weakref.WeakKeyDictionary[Any, tuple[type[Event], ...] | None] = weakref.WeakKeyDictionary()
"""Per action function, what ``_event_annotation`` read: an agent class's actions are checked
each time an agent of it is made, and resolving string annotations costs tens of microseconds."""


def _resolved(annotation: str, raw: Any) -> Any:
    """The event parameter's annotation, a string, resolved alone in ``raw``'s module. Not
    ``get_type_hints(raw)``, which resolves every annotation of the function and failed on one
    that names a class imported only under ``TYPE_CHECKING`` (``ctx: ActionContext``, where
    type-checking linters move an import used only in annotations): the event's went
    unchecked."""
    if isinstance(raw, type):
        # A callable object's class (``_origin``): its ``__call__`` holds the annotation and its
        # module's names; a class has no ``__globals__``, and the name failed to resolve, so a
        # callable object's event parameter went unchecked where functions' are checked.
        raw = inspect.unwrap(raw.__call__)
    holder = SimpleNamespace(__annotations__={"event": annotation})
    return get_type_hints(holder, globalns=getattr(raw, "__globals__", None)).get("event")


def _event_annotation(call: Callable[..., Any], raw: Any) -> tuple[type[Event], ...] | None:
    """The event classes ``call``'s event parameter is annotated with, or None when it names
    none to check against (no annotation, ``Any``, a type that is no event, a name that cannot
    be resolved here). A LlamaIndex or Haystack port reads a step's events from its annotations;
    here ``@action(...)`` decides, and an annotation that disagrees was silently wrong."""
    # Cached by function, for a function or a method of it; a partial's parameters are its own.
    key = raw if call is raw or getattr(call, "__func__", None) is raw else None
    if key is not None:
        try:
            return _TYPED[key]
        except (KeyError, TypeError):  # not seen yet, or not weakly referable
            pass
    found: tuple[type[Event], ...] | None = None
    try:
        first = next(iter(inspect.signature(call).parameters.values()), None)
        annotation = None if first is None else first.annotation
        if isinstance(annotation, str):  # ``from __future__ import annotations``
            annotation = _resolved(annotation, raw)
    except Exception:  # unresolvable names (TYPE_CHECKING imports, locals): nothing to check
        annotation = None
    members = (
        get_args(annotation)
        if isinstance(annotation, UnionType) or (get_origin(annotation) is Union)
        else (annotation,)
    )
    if members and all(isinstance(m, type) and issubclass(m, Event) for m in members):
        found = tuple(members)
    if key is not None:
        with contextlib.suppress(TypeError):
            _TYPED[key] = found
    return found


def _class_actions(agent: ActionAgent) -> list[_Action]:
    """Actions declared on the agent's class and its bases, in definition order, bases first. A
    subclass's definition of a name replaces its base's; defining it without ``@action`` (or as
    ``None``) removes the action."""
    marked: dict[str, tuple[type[Event], ...]] = {}
    for klass in reversed(type(agent).__mro__):
        for attr, raw in vars(klass).items():
            target = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
            events = getattr(target, _MARK, None)
            marked.pop(attr, None)  # re-inserted below: the order follows the latest definition
            if events is not None:
                marked[attr] = events
    return [_compile_one(attr, getattr(agent, attr), events) for attr, events in marked.items()]


class AgentPlan:
    """The compiled form of an ``ActionAgent``: its actions by event type and its resources."""

    def __init__(
        self, agent_name: str, actions: Sequence[_Action], resources: dict[str, Any]
    ) -> None:
        self.agent_name = agent_name
        self._actions: tuple[_Action, ...] = tuple(actions)
        # The same tuple, typed as the public protocol a user can name (a tuple is covariant).
        self.actions: tuple[CompiledAction, ...] = self._actions
        self.resources = resources
        self._listeners: dict[type, tuple[_Action, ...]] = {}
        self._user_listens_tool_responses = any(
            issubclass(ToolResponseEvent, a.events) for a in self._actions if not a.builtin
        )

    @classmethod
    def compile(cls, agent: ActionAgent) -> AgentPlan:
        """Collect, check and index ``agent``'s actions. Raises ``TypeError`` for an action with
        the wrong signature and ``ValueError`` for two actions of one name or an agent that no
        input would ever start."""
        found = _class_actions(agent)
        for function in agent._extra_actions:
            events = getattr(getattr(function, "__func__", function), _MARK, None)
            if events is None:
                raise TypeError(
                    f"{function!r} was passed as an action but is not marked with @action(...)"
                )
            name = getattr(function, "__name__", None) or _origin(function).__name__
            found.append(_compile_one(name, function, events))
        names = [a.name for a in found]
        clashes = sorted({n for n in names if names.count(n) > 1})
        if clashes:
            raise ValueError(f"agent {agent.name!r} has two actions named {', '.join(clashes)}")
        if agent.builtin_actions:
            found += [
                _builtin_action("builtin.chat", _builtin.chat_action, ChatRequestEvent),
                # The chat action also takes the tool responses of the chats it started.
                _builtin_action(
                    "builtin.chat_tool_responses", _builtin.chat_action, ToolResponseEvent
                ),
                _builtin_action("builtin.tools", _builtin.tool_action, ToolRequestEvent),
            ]
        plan = cls(agent.name, found, _describe_resources(agent.resources))
        if not plan.listeners(InputEvent):
            raise ValueError(
                f"agent {agent.name!r} has no action for InputEvent, so no input would start it; "
                "mark one with @action(InputEvent)"
            )
        return plan

    def listeners(self, event_type: type) -> tuple[_Action, ...]:
        """The actions that run for an event of ``event_type``, in plan order."""
        found = self._listeners.get(event_type)
        if found is None:
            found = self._listeners[event_type] = tuple(
                a for a in self._actions if issubclass(event_type, a.events)
            )
        return found

    def event_type(self, key: str) -> type[Event] | None:
        """The event class a checkpoint names by ``key``: one the plan listens for, or a subclass
        of one. Only classes already imported are found; nothing is imported by name.

        ``key`` is ``module.QualName``. Where no class has it, the one class of that name under
        another module is taken: a job run as a script pauses with ``__main__.Spend``, and the
        service that resumes it imports the script (``jobs.Spend``), or a redeploy moved the
        module. Several of that name are none (``named_alike`` lists them for the error)."""
        alike = self.named_alike(key)
        exact = [candidate for candidate in alike if _type_key(candidate) == key]
        if exact:
            return exact[0]
        return alike[0] if len(alike) == 1 else None

    def named_alike(self, key: str) -> list[type[Event]]:
        """The event classes the plan takes (and their subclasses) whose name ``key`` ends with,
        whatever their module, by module and name."""
        stack: list[type[Event]] = [t for a in self._actions for t in a.events]
        seen: set[type] = set()
        found: list[type[Event]] = []
        while stack:
            candidate = stack.pop()
            if candidate in seen:
                continue
            seen.add(candidate)
            if key.endswith(f".{candidate.__qualname__}"):
                found.append(candidate)
            stack.extend(candidate.__subclasses__())
        return sorted(found, key=_type_key)

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON data: each action (function, event types, async, built-in), the action
        names by event type (``module.QualName``) and the agent's own resources."""
        by_type: dict[str, list[str]] = {}
        for found in self.actions:
            for event_type in found.events:
                by_type.setdefault(_type_key(event_type), []).append(found.name)
        return {
            "agent": self.agent_name,
            "actions": {a.name: a.describe() for a in self.actions},
            "actions_by_event": by_type,
            "resources": self.resources,
        }

    def to_json(self, indent: int | None = 2) -> str:
        """``to_dict()`` as JSON text; ``indent=None`` gives one line."""
        return json.dumps(self.to_dict(), indent=indent)

    def __repr__(self) -> str:
        return f"<AgentPlan {self.agent_name!r}: {', '.join(a.name for a in self.actions)}>"


def _builtin_action(name: str, call: Callable[..., Any], event_type: type[Event]) -> _Action:
    found = _compile_one(name, call, (event_type,))
    return _Action(found.name, found.events, found.call, found.function, found.is_async, True)


def _describe_resources(resources: Any) -> dict[str, Any]:
    if resources is None:
        return {}
    described: dict[str, Any] = resources._describe()
    return described
