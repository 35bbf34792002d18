"""Instruction templates filled from session values.

``{key}`` is replaced by the session value ``key`` as text, ``str(value)`` and nothing for None, as
Google ADK's ``inject_session_state`` inserts it; ``{key?}`` by the value or nothing when the
session has none (Google ADK's optional placeholder). Keys may hold ``.``, ``-`` and ``:``, so
Google ADK's scoped keys (``{user:name}``, ``{app:tier}``) read the session values of those names.
``{{key}}`` is the literal text ``{key}``. Every other brace stays as it is, so JSON samples need no
escaping, nested objects (``{"a": {"b": 1}}``) included: treating every ``}}`` as an escape would
eat the closing brace of each nested object. Substitution is one pass over the template, so braces
inside a value (``"{secret}"`` typed by a user) are never expanded: a user cannot make the
instruction read other session values.

An instruction may also be a function of the agent's ``RunContext`` returning the text, sync or
async (Google ADK's ``InstructionProvider``): ``provide_instruction`` calls it. Its text is used as
it is, no placeholders filled in (as Google ADK leaves a provider's text alone), so a provider
that quotes JSON or a user's words needs no escaping.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

from adk import CheckpointError, Interrupt
from adk._error_pickle import rebuild_error

if TYPE_CHECKING:
    from adk import RunContext
    from adk.checkpoint.codec import _Reason

__all__ = [
    "InstructionError",
    "InstructionProvider",
    "check_provider",
    "provide_instruction",
    "render_instruction",
]

InstructionProvider: TypeAlias = "Callable[[RunContext], str | Awaitable[str]]"
"""A function of the agent's context returning its instruction, sync or async."""

# What ``_read`` notes for a placeholder whose value the session lacks (``str`` never gives None).
_Read = tuple[str | None, ...]

_NAME = r"[A-Za-z_][A-Za-z0-9_.:\-]*"
_FIELD = re.compile(rf"\{{\{{({_NAME}\??)\}}\}}|\{{({_NAME})(\??)\}}")


def render_instruction(template: str, values: Mapping[str, Any], agent_name: str = "") -> str:
    """``template`` with its placeholders filled from ``values`` (see the module docstring).

    A required placeholder without a value is a ``KeyError`` naming the key and the agent, because
    a model told "You help {user}" literally would answer wrongly without any visible failure.
    """
    if "{" not in template and "}" not in template:
        return template

    def substitute(match: re.Match[str]) -> str:
        escaped = match.group(1)
        if escaped is not None:
            return f"{{{escaped}}}"
        key = match.group(2)
        if key in values:
            return _text(values[key])
        if match.group(3):
            return ""
        who = f"agent '{agent_name}'" if agent_name else "the instruction"
        raise InstructionError(
            f"{who} uses {{{key}}} but the session has no value {key!r} "
            f"(write {{{key}?}} for an optional value, {{{{{key}}}}} for the literal text {{{key}}})"
        )

    return _FIELD.sub(substitute, template)


async def provide_instruction(
    provider: InstructionProvider, ctx: RunContext, agent_name: str
) -> str:
    """The text ``provider`` gives for ``ctx``, awaited if it is a coroutine. Anything but a str
    is a ``TypeError`` naming the agent: a None or a dict sent as the system prompt would change
    what the model is told without a visible failure."""
    try:
        text = provider(ctx)
        if inspect.isawaitable(text):
            text = await text
    except Interrupt as exc:
        # Taken for the agent's own pause, it paused a run the agent could not resume (it has
        # saved no state before a model call): the person's answer then failed the resume.
        raise TypeError(
            f"agent '{agent_name}': its instruction function raised adk.Interrupt; an "
            "instruction cannot pause the run (the agent saves nothing before a model call to "
            "resume from): ask the person in a tool or a before_tool callback, or before the run"
        ) from exc
    if not isinstance(text, str):
        raise TypeError(
            f"agent '{agent_name}': its instruction function must return a str, "
            f"got {type(text).__name__}"
        )
    return text


def check_provider(provider: InstructionProvider, what: str) -> None:
    """Refuse, where the agent is made, an instruction function that cannot be called with the
    context (``lambda: "..."``): it would fail the agent's first model call instead. A callable
    whose signature cannot be read is taken as it is; a decorated one is checked as the wrapper
    that is called (as ``adk.callbacks`` checks callbacks), not as the function it wraps."""
    try:
        signature = inspect.signature(provider, follow_wrapped=False)
    except (TypeError, ValueError):
        return
    try:
        signature.bind("ctx")
    except TypeError as exc:
        raise TypeError(
            f"{what} instruction function {provider!r} cannot be called as fn(ctx): {exc}"
        ) from None


def _keys(template: str) -> tuple[str, ...]:
    """The session values ``template``'s placeholders read, each once, in order; empty for an
    instruction without placeholders (which then never needs rendering again)."""
    if "{" not in template:
        return ()
    found = (m.group(2) for m in _FIELD.finditer(template) if m.group(2) is not None)
    return tuple(dict.fromkeys(found))


def _read(keys: tuple[str, ...], values: Mapping[str, Any]) -> _Read:
    """What the placeholders ``keys`` would insert from ``values`` now (None where missing): two
    equal reads render the same text, so comparing them tells whether a render can differ,
    without rendering. Compared as text, not as objects, so a value changed in place (a list a
    tool appended to) counts as changed."""
    return tuple(_text(values[k]) if k in values else None for k in keys)


def _text(value: Any) -> str:
    """A session value as a placeholder inserts it: its ``str()``, and nothing for None, as
    Google ADK's ``inject_session_state`` does (``str(None)`` told the model "None")."""
    return "" if value is None else str(value)


class InstructionError(KeyError):
    """An instruction placeholder names a session value that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class _MissingAtResume(InstructionError, CheckpointError):
    """The instruction a paused agent renders at resume needs a session value the session lacks,
    found by the check before the resume runs (``adk._preflight``) or, where that cannot see, by
    the resume. Both errors: the instruction's as at any start, and a refused resume, so the
    runner refuses it before any other branch or call makes its approved call, and an
    ``AgentTool`` fails its caller's resume with it (the checkpoint kept) rather than telling the
    caller's model the tool failed, the nested approval dropped. Its ``reason`` is
    ``"missing_input"``: the resume given the value resumes it."""

    reason: _Reason = "missing_input"

    def __init__(self, error: InstructionError) -> None:
        super().__init__(
            f"{error}; the resume is refused and the checkpoint is kept (resume it with the "
            "value given: invoke_resume(..., session={...}))"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle finds a class by its qualified name, and this one's is InstructionError's (set
        # below), another class: the default reduce failed with a PicklingError. Rebuilt by a
        # function of this module instead, args and attributes as they were.
        return (_missing_at_resume, self.args, dict(vars(self)) or None)


# Named as the error it is to those who read it: an error event's ``type`` says InstructionError,
# as it did when the resume failed on it, not this class's private name.
_MissingAtResume.__name__ = _MissingAtResume.__qualname__ = InstructionError.__name__


def _missing_at_resume(*args: Any) -> _MissingAtResume:
    """A ``_MissingAtResume`` being unpickled (``__reduce__``)."""
    return rebuild_error(_MissingAtResume, args)
