"""The ``AttributeError`` of a context attribute that Google ADK has and pyadk names otherwise.

A tool or callback ported from Google ADK reads ``tool_context.state`` or
``callback_context.invocation_id``. Out of a tool, the plain ``'ToolContext' object has no
attribute 'state'`` became the error result the model read, telling no one what the name is
here; the error now says it. Only a missing attribute pays for this (``__getattr__`` runs after
the normal lookup failed), and type checkers do not see it (the classes define it outside
``TYPE_CHECKING``), so a misspelt attribute is still a type error.
"""

from __future__ import annotations

from typing import Any

__all__ = ["missing_attribute", "no_attribute"]

_HINTS = {
    "state": "Google ADK's state is ctx.session here (ctx.session['k'], ctx.session.get('k'))",
    "invocation_id": "Google ADK's invocation_id is ctx.run_id here",
    "actions": (
        "Google ADK's actions are methods here: ctx.exit(), ctx.transfer(name), "
        "ctx.break_loop() for escalate"
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


def missing_attribute(obj: object, name: str) -> Any:
    """What a context's ``__getattr__`` does for ``name``: raise :func:`no_attribute`, unless
    the class has ``name`` (a property, a slot), which then raised an ``AttributeError`` of its
    own (``self.run_context.run_id`` over a stand-in run context lacking it, a subclass's
    property): Python calls ``__getattr__`` after it, and 'object has no attribute' would both
    hide that error and deny an attribute the class has. The attribute is read again so that its
    own error is raised (or its value returned, if it has one now)."""
    if any(name in vars(klass) for klass in type(obj).__mro__):
        return object.__getattribute__(obj, name)
    raise no_attribute(obj, name)
