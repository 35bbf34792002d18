"""The key of a keyed record, saved with its pause, so that its resume is refused for another key.

An execution environment resumes a paused record as a record of the key its resume names (the
local ``outputs.resume``/``apply(agent, resumes=...)``, a Flink job's resumes): on that key's
session, its writes committed there. A resume naming another key than the paused record's ran
the pause on that other key's memory and committed to it. So a keyed record's run (and its
resume) runs with its key in ``record_key``; a pause saves it in the checkpoint (``saved``), and
a resume under an environment compares it with the key it was given (``refused``) before anything
runs. A checkpoint saved before keys were saved has none and is resumed unchecked.

The key is saved in the form resumes carry it, JSON (a resume from a Kafka topic or a Flink
stream is JSON text), and compared as a session lookup would find it (``==``; a record's key is
never a bool or a float, ``ambiguous``, and a resume giving one is refused before this
comparison: a pause of a record keyed ``1.0``, saved by a pyadk that took such keys, is resumed
only by a plain ``Runner``). A key that is not a JSON value (``bytes``, a
``datetime``, an ``Enum``) cannot be given back as JSON: its JSON form (a Kafka record's ``bytes``
key is text) is another key, whose session is not the paused record's, so it is saved as its
``repr`` and its type, and only the same key (a dict resume, ``outputs.resume``) resumes it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Hashable
from contextvars import ContextVar
from typing import Any

record_key: ContextVar[tuple[Hashable, object, str | None, int] | None] = ContextVar(
    "adk_record_key", default=None
)
"""``(key, runner, checkpoint_id, index)`` while a keyed record of an execution environment runs
or resumes: its key, the environment's ``Runner`` that runs it, the checkpoint it resumes
(``None`` for a fresh record) and the record's index (a resume's own position, for one of
``apply``'s resumes: its pause keeps the index its checkpoint saved instead, ``saved``).
``None``, the default, for any other run: a plain ``Runner`` resume is not checked, nor saves
a key.

Only the record's own run saves the key (``key_to_save``), and only the resume of the record's
own checkpoint is checked (``key_to_check``): a ``Runner`` of the application's own that a tool
or an action runs inside the record (a delegate, an escalation desk every key shares) makes runs
and pauses of its own, which belong to no key. Set for the whole record, the variable reaches
them too: their pauses saved the record's key, and resuming one inside a record of another key
was refused as that key's pause. They are told apart by the runner, not by the run id, which a
delegate may share (one conversation id) and a resume need not give."""

_JSON_SCALARS = (str, int, bool, type(None))


def ambiguous(key: Any) -> str | None:
    """Why ``key`` is refused as a record's key, or None (the rule docs/event_driven.md's "What a
    key may be" states). Python's ``==`` (a dict's lookup, so the local environment's queues and
    ``sessions``) takes ``True`` for ``1`` and ``1.0``, ``-0.0`` for ``0.0``, ``Decimal(1)`` or
    numpy's ``int64(1)`` for ``1``, while Flink keys each apart (``key_by`` partitions on the key's
    JSON text, or its pickle): one key's records shared their order and memory locally, and on
    Flink only where two such keys met in one parallel instance. A NaN equals no key, itself
    included: each record was a key of its own, its memory never read again. A ``sessions``
    mapping of the application's own cannot hold ``1`` and ``True`` apart, so such keys are
    refused everywhere rather than kept distinct. Exact ``str`` and ``int`` (a key's usual
    types) cost two type tests; a tuple or frozenset (a ``NamedTuple`` too) is looked
    through."""
    kind = type(key)
    if kind is str or kind is int or key is None:
        return None
    if kind is tuple or kind is frozenset or isinstance(key, (tuple, frozenset)):
        # A NamedTuple's items too: ``Shard("eu", 1.0)`` is ``("eu", 1)`` to a dict.
        for item in key:
            problem = ambiguous(item)
            if problem is not None:
                return problem
        return None
    if kind is bool:
        return (
            f"a bool, which Python takes for the int {int(key)} (a dict, and so the "
            f"records' queues and sessions here, makes {key!r}, {int(key)} and {float(key)} one "
            "key) while Flink keys them apart; key by an int or a str (int(flag), str(flag))"
        )
    if isinstance(key, float):
        if math.isnan(key):
            return (
                "NaN, which equals no key, itself included, so each record would be a key of its "
                "own (its memory never read again); key by a str or an int"
            )
        return (
            "a float, which Python takes for an equal int or float of another form "
            "(1.0 is 1, -0.0 is 0.0: one key here) while Flink keys them apart; key by an int "
            "(round it) or a str"
        )
    if kind.__module__ == "numpy" and not isinstance(key, str | bytes):
        # Its bool (not a Number to ``numbers``) equals True and 1 as a bool does; its ints and
        # floats are refused below too, but said in one place.
        return (
            f"a numpy {kind.__name__}, which Python takes for an equal int, float or bool (one "
            "key here) while Flink keys them apart; key by int(...) or str(...)"
        )
    if kind in _NOT_NUMBERS:
        return None
    if isinstance(key, numbers.Number) and not isinstance(key, int):
        return (
            f"a {type(key).__qualname__}, a number Python takes for an equal int or "
            "float (one key here) while Flink keys them apart; key by an int or a str"
        )
    if len(_NOT_NUMBERS) < 256:
        _NOT_NUMBERS.add(kind)
    return None


_NOT_NUMBERS: set[type] = set()
"""Types of keys the number rule passed (not numbers, or ints such as an ``IntEnum``'s):
``isinstance(key, numbers.Number)`` is an ABC's check, a Python frame (~2.5k instructions) for
every record keyed by ``bytes`` (a Kafka message's key), a ``datetime`` or a frozen model; its
type's next key skips it. At most 256 (a type made per record would be one each)."""


def key_to_save(runner: object) -> tuple[Hashable, str | None, int] | None:
    """``(key, checkpoint_id, index)`` of the keyed record whose own run ``runner`` is pausing
    (``checkpoint_id``: the one it resumes, None for a fresh record), else None."""
    keyed = record_key.get()
    if keyed is None or keyed[1] is not runner:
        return None
    return (keyed[0], keyed[2], keyed[3])


def key_to_check(runner: object, checkpoint_id: str) -> tuple[Hashable] | None:
    """``(key,)`` of the keyed record that ``runner`` resumes from ``checkpoint_id``, else None."""
    keyed = record_key.get()
    if keyed is None or keyed[1] is not runner or keyed[2] != checkpoint_id:
        return None
    return (keyed[0],)


def tupled(value: Any) -> Any:
    """JSON's arrays back as tuples, as a key that was a tuple left as an array."""
    return tuple(tupled(item) for item in value) if type(value) is list else value


def _json_key(key: Any) -> bool:
    """Whether ``key`` comes back from JSON as it is (a tuple as an array, made a tuple again)."""
    kind = type(key)
    if kind in _JSON_SCALARS:
        return True
    if kind is float:
        return math.isfinite(key)
    return kind is tuple and all(_json_key(item) for item in key)


def _listed(key: Any) -> Any:
    return [_listed(item) for item in key] if type(key) is tuple else key


def saved(key: Hashable, index: int | None) -> dict[str, Any] | None:
    """What a pause saves of its record's key: ``{"value": <its JSON value>}``, or for a key that
    JSON would turn into another, ``{"repr": ..., "type": ...}`` (``None`` if even that fails:
    the pause is then resumed unchecked, as one saved before keys were); with ``"index"``, the
    record's position in its stream, when known (``index``), for a listing of the pauses to
    name the record (``adk.checkpoint.list_pending``). A pyadk from before the index reads the
    key alone (``refused`` looks at no other key of it)."""
    found: dict[str, Any]
    if _json_key(key):
        found = {"value": _listed(key)}
    else:
        try:
            found = {"repr": repr(key), "type": type(key).__name__}
        except Exception:  # a key type whose ``__repr__`` fails
            return None
    if index is not None:
        found["index"] = index
    return found


def listed(kept: Any) -> tuple[Any, int | None, str | None] | None:
    """``(key, index, shown)`` as a listing shows a pause's saved key (``saved``'s): a JSON key
    as its value (an array as a tuple, ``shown`` None), any other as its ``repr`` (``shown`` its
    type's name: the repr is no key of the record); the index None when not saved (a pause
    saved before the index was). None when ``kept`` is no saved key (none, or a form this
    version cannot read)."""
    if not isinstance(kept, dict):
        return None
    index = kept.get("index")
    if type(index) is not int:
        index = None
    if "value" in kept:
        return (tupled(kept["value"]), index, None)
    if isinstance(kept.get("repr"), str):
        kind = kept.get("type")
        return (kept["repr"], index, kind if isinstance(kind, str) else "?")
    return None


def refused(kept: Any, key: Hashable) -> str | None:
    """Why a resume given ``key`` may not resume a pause that saved ``kept`` (``saved``'s), or
    ``None`` when ``key`` is the paused record's key."""
    if isinstance(kept, dict) and "value" in kept:
        paused = tupled(kept["value"])
        try:
            if paused == key:
                return None
        except Exception:  # a key whose ``__eq__`` fails is not the paused one
            pass
        return (
            f"paused a record of key {paused!r}, not of key {key!r}: the resume names another "
            "key than the pause's checkpoint (its memory is another key's), so it is refused; "
            "give the paused output's own key"
        )
    if isinstance(kept, dict) and isinstance(kept.get("repr"), str):
        try:
            same = repr(key) == kept["repr"]
        except Exception:
            same = False
        if same:
            return None
        return (
            f"paused a record of key {kept['repr']} (a {kept.get('type')}, which is not a JSON "
            f"value), not of key {key!r}: a resume given as JSON carries such a key as another "
            "(a bytes key as text), whose memory is not the paused record's, so it is refused; "
            "key the records by a JSON value (a str, a number, a bool, None or a tuple of them: "
            "key=lambda message: message.key().decode() for a Kafka message's bytes key), or "
            "resume with the paused output itself (outputs.resume)"
        )
    return f"saved its record's key in a form this version cannot read: {kept!r}"
