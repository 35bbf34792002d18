"""The ``AttributeError`` of a context attribute that Google ADK has and pyadk names otherwise.

A tool or callback ported from Google ADK reads ``tool_context.state`` or
``callback_context.invocation_id``. Out of a tool, the plain ``'ToolContext' object has no
attribute 'state'`` became the error result the model read, telling no one what the name is
here; the error now says it. Each such name is a property of the context classes that raises
that error (``install``), set after the class is made so type checkers do not see it and a
ported name stays a type error. Not a ``__getattr__``: a class with one has every attribute read
of its instances left unspecialised by CPython's adaptive interpreter (it cost ~5k instructions
per agent step of a workflow, measured), and it hid a property's own ``AttributeError``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

__all__ = ["install", "no_attribute"]

_HINTS = {
    "state": "Google ADK's state is ctx.session here (ctx.session['k'], ctx.session.get('k'))",
    "invocation_id": "Google ADK's invocation_id is ctx.run_id here",
    "actions": (
        "Google ADK's actions are methods here: ctx.exit(), ctx.transfer(name), "
        "ctx.break_loop() for escalate; skip_summarization is the agent's "
        "return_directly=[tool name]"
    ),
    "tool_confirmation": (
        "Google ADK's tool_confirmation is ctx.resume here (None on a first call; the answer "
        "is ctx.resume.data): ask with raise adk.Interrupt(info) or give the tool "
        "require_approval=True"
    ),
    "request_confirmation": (
        "Google ADK's request_confirmation(hint=, payload=) is raise "
        "adk.Interrupt({'hint': ..., 'payload': ...}) here; the answer comes back as "
        "ctx.resume.data when the call runs again"
    ),
    "function_call_id": "Google ADK's function_call_id is ctx.tool_call_id here",
    "save_artifact": "there are no artifacts here: keep files in your own storage",
    "load_artifact": "there are no artifacts here: keep files in your own storage",
}


def no_attribute(obj: object, name: str) -> AttributeError:
    """The error for ``obj.name``, which does not exist, with where the Google ADK name went."""
    text = f"{type(obj).__name__!r} object has no attribute {name!r}"
    hint = _HINTS.get(name)
    if hint is not None:
        text = f"{text}: {hint}"
    return AttributeError(text, name=name, obj=obj)


def install(cls: type) -> None:
    """Give ``cls`` a property for each Google ADK name it does not have, raising
    :func:`no_attribute` (so ``getattr(ctx, "state", None)`` and ``hasattr`` behave as for any
    missing attribute)."""
    for name in _HINTS:
        if not any(name in vars(klass) for klass in cls.__mro__):
            setattr(cls, name, property(_raiser(name), doc=_HINTS[name]))


def _raiser(name: str) -> Callable[[object], NoReturn]:
    def read(obj: object) -> NoReturn:
        raise no_attribute(obj, name)

    return read
