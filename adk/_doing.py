"""What a record's run is doing, so that a record its ``timeout`` cut off says what was running.

An execution environment's ``timeout`` cancels a record's run; its error said only that the run
took too long, not whether it was an action, a tool or a model call that hung, which is what a
user must find. While a record runs under a ``timeout`` (``_records._within``), ``doing`` holds a
``Doing``: an action (``actions._run``), a tool call (``tools._executor.run_tool_call``) and a model
call (``context.generate_counted``, a ``ReActAgent``'s turn) note themselves in it as they start
and leave as they end, nested runs (an ``AgentTool``'s, a ``ReActAgent`` an action calls) in the
same one. A timer at the deadline takes what is running then (``take``), before the cancellation
unwinds anything. ``doing`` is read only while a record under a timeout runs in the process
(``timed``, not empty): ``doing.get()`` cost ~0.8k instructions a call in a run's code (+3.4k of
a 432k action turn), a test of ``timed`` a few dozen. Otherwise a call pays that test, nothing
else; an action two tests of a local.
"""

from __future__ import annotations

import time
from contextvars import ContextVar

__all__ = ["Doing", "doing", "timed"]


class Doing:
    """The calls running in one record's run: ``{mark: (said, name, detail, since)}``
    (``time.monotonic``)."""

    __slots__ = ("_next", "cut", "running")

    def __init__(self) -> None:
        self.running: dict[int, tuple[str, object, object, float]] = {}
        self._next = 0
        self.cut: list[tuple[str, float]] | None = None

    def start(self, said: str, name: object, detail: object) -> int:
        """Note a call starting: ``said.format(name, detail)`` says what it is (each a
        ``_Shown``: ``{:q}`` quoted, ``{}`` as it is if plain), the text made only if the
        deadline comes while it runs (~0.8 µs a call noted, a third less than making it at
        once)."""
        mark = self._next
        self._next = mark + 1
        self.running[mark] = (said, name, detail, time.monotonic())
        return mark

    def end(self, mark: int) -> None:
        self.running.pop(mark, None)

    def take(self) -> None:
        """What runs now, with how long each has run: called at the deadline."""
        now = time.monotonic()
        self.cut = [
            (said.format(_Shown(name), _Shown(detail)), now - since)
            for said, name, detail, since in self.running.values()
        ]

    def said(self) -> str:
        """``"; running: action 'ask' on InputEvent for 0.50s, tool 'lookup' ..."``, outermost
        first, or ``""`` when nothing noted was running (the run's own code, a session store)."""
        if not self.cut:
            return ""
        return "; running: " + ", ".join(f"{what} for {spent:.2f}s" for what, spent in self.cut)


_LONGEST = 64
"""Characters of a name or id said; the rest is counted."""


class _Shown:
    """A noted call's name or detail for the error's text, in ``said``'s ``{:q}`` (quoted, as
    ``repr``) or ``{}`` (as it is when short and printable: a call id, ``c1``). A tool call's
    name and id are the model's, made up as it likes: a newline and a terminal's escape codes
    forged a line in a log reading the error, and 10 KB went whole into the output, the root
    span's status and each log line of it. So neither is said raw: quoted with its escapes, and
    cut at ``_LONGEST`` characters with its length said."""

    __slots__ = ("value",)

    def __init__(self, value: object) -> None:
        self.value = value

    def __format__(self, spec: str) -> str:
        value = self.value
        text = value if isinstance(value, str) else str(value)
        if len(text) > _LONGEST:
            return f"{text[:_LONGEST]!r}... ({len(text):,} characters)"
        if spec != "q" and text.isprintable():
            return text
        return repr(text)


doing: ContextVar[Doing | None] = ContextVar("adk_doing", default=None)
"""The ``Doing`` of the record whose run (under a ``timeout``) this context belongs to."""

timed: set[Doing] = set()
"""The ``Doing`` of each record under a timeout running now, in any thread (``set.add`` and
``discard`` are atomic): a call reads ``doing`` only when it is not empty. Where it is not
(another record has a timeout), a run without one reads ``None`` there, as before."""
