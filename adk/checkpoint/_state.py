"""Reading a component's saved state back when a run resumes.

A checkpoint's checksum proves its bytes are what was written, not that the state in it fits the
agents now resuming it: another version of the code may have written it, the agent tree may have
changed since the pause, or a writer may have had a bug. Each composite (workflows, transfer
flows, ``AgentTool``, ``ReActAgent``) reads its own state through ``SavedState``, so a state that
does not fit ends the resume with a ``CheckpointError`` that names the component and the field —
instead of a ``KeyError`` from deep inside a resume or, worse, a resume that quietly starts over
or skips the paused step.
"""

from __future__ import annotations

from typing import Any

from .._error_pickle import reduce_error
from ..messages import Message
from .codec import CheckpointError, _Reason

__all__ = ["SavedState"]


class _TurnsShort(CheckpointError, ValueError):
    """A resume refused, before anything ran, because the run's ``max_turns`` (saved at the
    pause, or the resume's own) leaves fewer model calls than the resume is certain to make
    (``adk._turns_left``): "resume with a higher max_turns". A ``ValueError`` as
    ``adk.runner._OptionsNotGiven`` is: an argument of the resume call does not fit the
    checkpoint, and the same checkpoint resumes once it is sent again with another. So a service
    tells it from a checkpoint that cannot be read or that this version cannot resume (a tool
    removed since the pause), by class alone: a ``CheckpointError`` that is also a ``ValueError``
    keeps the session waiting on its checkpoint (docs/service.md). Its name is private: a
    service reads its ``reason``, ``"max_turns"`` (``ErrorInfo.type`` reads ``CheckpointError``).

    ``max_turns`` is the limit the resume was held against (the saved one, or the resume's own),
    named as ``MaxTurnsExceeded.max_turns`` is: what tells it from a resume lacking run options
    (``getattr(exc, "max_turns", None)``), whose fix is the serving code's, where a higher limit
    may be the caller's to give."""

    reason: _Reason = "max_turns"

    def __init__(self, message: str, max_turns: int) -> None:
        super().__init__(message)
        self.max_turns = max_turns

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickled with its field (``cls(*args)`` would lack it): see ``adk._error_pickle``.
        return reduce_error(self)


_MISSING: Any = object()


class SavedState:
    """The state ``owner`` (e.g. ``"workflow 'steps'"``) saved at the pause, read field by field.

    Every accessor returns the field when it has the expected shape and raises ``CheckpointError``
    otherwise; ``default`` is for fields that older checkpoints do not have.
    """

    __slots__ = ("_owner", "values")

    def __init__(self, owner: str, state: Any) -> None:
        self._owner = owner
        if not isinstance(state, dict):
            raise self.error("the checkpoint holds no saved state for it")
        self.values: dict[str, Any] = state

    def error(self, what: str, reason: _Reason = "incompatible") -> CheckpointError:
        """The refusal of a saved state that does not fit ``owner`` as it is now (a tree changed
        since the pause, ``"incompatible"``), or of the ``reason`` a value in it gave."""
        return CheckpointError(f"the checkpoint does not fit {self._owner}: {what}", reason=reason)

    def turns_short(self, what: str, max_turns: int) -> CheckpointError:
        """The refusal of a resume that ``max_turns`` leaves too few model calls (``what``
        says which and ends with "resume with a higher max_turns")."""
        return _TurnsShort(f"the checkpoint does not fit {self._owner}: {what}", max_turns)

    def _field(self, key: str, default: Any) -> Any:
        value = self.values.get(key, default)
        if value is _MISSING:
            raise self.error(f"its saved state lacks {key!r}")
        return value

    def count(self, key: str, *, default: Any = _MISSING, below: int | None = None) -> int:
        """A non-negative int (a step index, an iteration number), below ``below`` if given."""
        value = self._field(key, default)
        if type(value) is not int or value < 0 or (below is not None and value >= below):
            bound = f" below {below}" if below is not None else ""
            raise self.error(f"{key!r} must be a whole number from 0{bound}, not {value!r}")
        return value

    def order(self, key: str, *, end: int) -> int:
        """A history order number (an entry's ``seq``): where branches or a lane forked. It lies
        at most at ``end``, the number the run's history gives next (nothing was recorded after
        the pause yet): one past it would make a view of the wrong entries (a branch's with its
        siblings', a lane's without its own) that the resume would go on with."""
        value = self.count(key)
        if value > end:
            raise self.error(
                f"{key!r} is {value}, past the history's end (its entries are numbered below {end})"
            )
        return value

    def names(self, key: str, *, default: Any = _MISSING) -> list[str]:
        """A list of strings (a run path, tool call ids)."""
        value = self._field(key, default)
        if not isinstance(value, list) or not all(type(item) is str for item in value):
            raise self.error(f"{key!r} must be a list of strings, not {value!r}")
        return value

    def counts(self, key: str, *, default: Any = _MISSING, below: int) -> list[int]:
        """A list of indices below ``below`` (finished branches)."""
        value = self._field(key, default)
        if not isinstance(value, list) or not all(
            type(item) is int and 0 <= item < below for item in value
        ):
            raise self.error(f"{key!r} must be a list of indices below {below}, not {value!r}")
        return value

    def messages(self, key: str) -> list[Message]:
        value = self._field(key, _MISSING)
        if not isinstance(value, list) or not all(isinstance(m, Message) for m in value):
            raise self.error(f"{key!r} must be a list of messages")
        return value
