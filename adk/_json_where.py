"""Where in a value pydantic cannot write JSON: the one walk behind the errors of a checkpoint's
save (``checkpoint.codec``), an event's JSON (``_event_json``) and a keyed record's output
(``execution._records``), each of which words what it finds its own way.

pydantic's own error names no place ("invalid utf-8 sequence of 1 bytes from index 0", "Unable
to serialize unknown type", "Circular reference detected"), so when a dump fails (and only then:
no save, event or output pays for this on success) the value is written again piece by piece,
in the order pydantic writes it, until a piece fails alone. Imports pydantic only, so the
modules above share it without importing one another."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

KEY = " as a key"
"""``Unwritable.how`` of a dict key pydantic cannot write (a ``frozenset``, an object of one's
own): its path is the dict's."""
ITSELF = " that holds itself"
"""``Unwritable.how`` of a container met again inside itself: JSON holds no references."""
DEEP = " nested too deeply"
"""``Unwritable.how`` of a container ``limit`` levels down that pydantic refused as nested too
deeply, or, with nothing else wrong in a value pydantic refused so, the first one there (else
a model's field or extra that pydantic refuses alone for its nesting)."""
BELOW = " holding it further down"
"""``Unwritable.how`` of a container ``limit`` levels down that pydantic cannot write for a
reason of its pieces (bytes, an object of one's own): named there, the walk going no deeper."""

_LEAVES = frozenset({str, int, float, bool, type(None)})
"""Types pydantic writes alone whatever they hold (a lone surrogate, NaN, a long int: what JSON
text cannot hold is for the caller, who writes the text): not written again one by one, so a
long list is walked at the cost of its type checks."""


class Unwritable:
    """What a walk found: ``path``, the way to it from the top, outermost first (a ``str`` for
    a dict key, shown as ``str(key)``, or a field's name; an ``int`` for a list or tuple's
    index; a set's items have none); ``value``, what is there; ``words``, pydantic's for it
    ("" for ``ITSELF``); ``how`` it is there ("" for a value that cannot be written, or one of
    ``KEY``, ``ITSELF``, ``DEEP``, ``BELOW``)."""

    __slots__ = ("how", "path", "value", "words")

    def __init__(self, value: Any, words: str, how: str) -> None:
        self.path: list[str | int] = []  # innermost first while the walk returns, then turned
        self.value = value
        self.words = words
        self.how = how


def unwritable_at(
    value: Any,
    error: BaseException,
    limit: int,
    fallback: Callable[[Any], Any] | None = None,
) -> Unwritable | None:
    """The first place in ``value`` that pydantic (with ``fallback``, as the dump that failed)
    cannot write, or None when every piece writes alone. ``error``: the failed dump's, which
    says whether the value was refused for its nesting; ``limit``: how many levels the walk
    goes down (below, a value is written whole: Python recurses no further for it).

    Through dicts (their keys too, but ``str`` ones, which pydantic always writes), lists,
    tuples, sets, pydantic models (each field as the model writes it, its extras too) and
    dataclasses (their fields). A value nested past what pydantic writes (its limit is 255
    levels) with nothing else wrong is found by a second walk, when ``error`` says so: the first
    container ``limit`` levels down that pydantic refuses for its nesting there (told by
    writing it inside as many lists: a first walk asks for ``_SLACKS[0]`` levels fewer, for
    pydantic counts a model or a typed field a level apart from a list, and a value as deep as
    pydantic writes, beside one deeper, was named)."""
    try:
        found = _Walk(fallback, limit, deep=False).at(value, 0)
        if found is None and _says_too_deep(error):
            for slack in _SLACKS:
                found = _Walk(fallback, limit, deep=True, slack=slack).at(value, 0)
                if found is not None:
                    break
    except RecursionError:  # begun where the stack was already deep: the caller says what failed
        return None
    if found is not None:
        found.path.reverse()
    return found


def _says_too_deep(error: BaseException) -> bool:
    """Whether ``error`` is pydantic's ("Circular reference detected (depth exceeded)") or
    Python's (``RecursionError``) for a value nested too deeply."""
    return isinstance(error, RecursionError) or "depth exceeded" in str(error)


class _Walk:
    """One walk of ``unwritable_at``: ``above`` holds the ids of the containers on the way;
    ``deep``: the second walk, for the first container ``limit`` levels down."""

    __slots__ = ("above", "deep", "fallback", "limit", "slack")

    def __init__(
        self, fallback: Callable[[Any], Any] | None, limit: int, deep: bool, slack: int = 0
    ) -> None:
        self.fallback = fallback
        self.limit = limit
        self.deep = deep
        self.slack = slack  # levels fewer than the walk's that ``_refused_below`` puts it in
        self.above: set[int] = set()

    def at(self, value: Any, depth: int) -> Unwritable | None:
        """The first place pydantic cannot write in ``value``, ``depth`` levels down."""
        cls = type(value)
        if cls in _LEAVES:
            return None
        if id(value) in self.above:
            return Unwritable(value, "", ITSELF)
        below = depth < self.limit
        items: Iterable[tuple[str | int | None, Any]] | None = None
        container = True
        if isinstance(value, dict):
            if below:
                for key in value:
                    said = None if type(key) is str else _unwriting({key: None}, self.fallback)
                    if said is not None:
                        return Unwritable(key, said, KEY)
                items = ((str(key), item) for key, item in value.items())
        elif isinstance(value, (list, tuple)):
            items = enumerate(value) if below else None
        elif isinstance(value, (set, frozenset)):
            items = ((None, item) for item in value) if below else None
        elif isinstance(value, BaseModel):
            if below:
                return self._in_model(value, depth)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            if below:
                fields = dataclasses.fields(value)
                items = ((f.name, getattr(value, f.name, None)) for f in fields)
        else:
            container = False
        if items is not None:
            return self._in_items(value, items, depth)
        said = _unwriting(value, self.fallback)
        if not container:
            return None if said is None else Unwritable(value, said, "")
        # ``limit`` levels down: written whole.
        if said is None:
            if self.deep and _refused_below(value, depth - self.slack, self.fallback):
                return Unwritable(value, "", DEEP)
            return None
        return Unwritable(value, said, DEEP if "depth exceeded" in said else BELOW)

    def _in_items(
        self, value: Any, items: Iterable[tuple[str | int | None, Any]], depth: int
    ) -> Unwritable | None:
        """``at`` of each of ``items`` (a name or index, and what is there) of ``value``."""
        self.above.add(id(value))
        try:
            for name, item in items:
                found = self.at(item, depth + 1)
                if found is not None:
                    if name is not None:
                        found.path.append(name)
                    return found
        finally:
            self.above.discard(id(value))
        return None

    def _in_model(self, value: BaseModel, depth: int) -> Unwritable | None:
        """``at`` of a model: its fields by name, each written by the model's own rules (its
        config, its field serializers: pydantic's plain ones would blame bytes a model writes
        as base64), then its extras; else the model itself, which writes itself and fails."""
        failing = _failing_field(value, self.fallback)
        if failing is not None:
            name, inner, exc, plain = failing
            found = self._in_items(value, ((name, inner),), depth) if plain else None
            words = str(exc)
            deep = "depth exceeded" in words  # refused alone for its nesting: too deep, there
            if found is None and deep and plain and not self.deep:
                found = self._deeply(value, ((name, inner),), depth)
            if found is None:  # written by the model's own rules: the field is named whole
                found = Unwritable(inner, words, DEEP if deep else "")
                found.path.append(name)
            return found
        if self.deep:  # every field writes alone: one may be too deep only where it is
            found = self._in_items(value, _plain_fields(value), depth)
            if found is not None:
                return found
        extras = value.__pydantic_extra__
        if extras:
            found = self._in_items(value, extras.items(), depth)
            if found is not None:
                return found
        said = _unwriting(value, self.fallback)
        if said is None:
            return None
        if "depth exceeded" not in said:
            return Unwritable(value, said, "")
        # Refused alone for its nesting (the first walk names no depth): in an extra, or whole.
        if extras and not self.deep:
            found = self._deeply(value, extras.items(), depth)
            if found is not None:
                return found
        for name, item in (extras or {}).items():
            alone = _unwriting(item, self.fallback)
            if alone is not None and "depth exceeded" in alone:
                found = Unwritable(item, alone, DEEP)
                found.path.append(name)
                return found
        return Unwritable(value, said, DEEP)

    def _deeply(
        self, value: Any, items: Collection[tuple[str | int | None, Any]], depth: int
    ) -> Unwritable | None:
        """``_in_items`` by the second walk (``deep``, each of ``_SLACKS``), for what the first
        found refused for its nesting alone."""
        for slack in _SLACKS:
            walk = _Walk(self.fallback, self.limit, deep=True, slack=slack)
            found = walk._in_items(value, items, depth)
            if found is not None:
                return found
        return None


_SLACKS = (2, 0)
"""The second walk's ``slack``s, in turn: first sure of what it names, then exact."""


def _refused_below(value: Any, depth: int, fallback: Callable[[Any], Any] | None) -> bool:
    """Whether pydantic refuses ``value``, which it writes alone, for its nesting when it is
    ``depth`` levels down (put inside as many lists): a value nested deeply but not past what
    pydantic writes is not the one to name, beside one that is."""
    inside = value
    for _ in range(depth):
        inside = [inside]
    said = _unwriting(inside, fallback)
    return said is not None and "depth exceeded" in said


def _unwriting(value: Any, fallback: Callable[[Any], Any] | None) -> str | None:
    """pydantic's words for why it cannot write ``value`` alone, or None if it can (text holding
    a lone surrogate can, in Python's terms). A plain ``ValueError`` is its words for a value
    nested too deeply or holding itself, a ``TypeError`` for a dict key it cannot write (a
    ``frozenset``), a ``UnicodeDecodeError`` for bytes that are not UTF-8."""
    try:
        to_jsonable_python(value, fallback=fallback)
    except (ValueError, TypeError) as exc:  # pydantic's, UnicodeDecodeError, too deep, a key
        return str(exc)
    return None


def _failing_field(
    value: BaseModel, fallback: Callable[[Any], Any] | None
) -> tuple[str, Any, Exception, bool] | None:
    """The first field of ``value`` that its own serializer cannot write as JSON, each written
    alone as the dump that failed wrote it (the model's config and serializers, its excluded
    fields left out): its name, its value, pydantic's error, and whether a walk into the value
    may judge its pieces by pydantic's plain rules (false when the model's config says how it
    writes values, ``ser_json_bytes="base64"`` say, or the field has a serializer of its own:
    a walk would blame bytes the model writes). None when every field writes alone, or the
    model writes itself (``@model_serializer``): then the model is the place. Only on a failure:
    the walks for where a value is that pydantic could not write (a save, a Flink output)."""
    cls = type(value)
    rules = _own_rules(cls)
    if rules is None:
        return None
    own, plain = rules
    serializer = value.__pydantic_serializer__
    for name in cls.model_fields:
        try:
            # A RootModel's ``include`` picks from its value, not its one field: written whole.
            # (Told by its class flag: importing ``pydantic.RootModel`` is not light.)
            chosen = None if getattr(cls, "__pydantic_root_model__", False) else {name}
            serializer.to_python(value, mode="json", include=chosen, fallback=fallback)
        except (ValueError, TypeError) as exc:  # pydantic's, a cycle's, a dict key's (frozenset)
            return name, getattr(value, name, None), exc, plain and name not in own
    return None


def _own_rules(cls: type[BaseModel]) -> tuple[set[str], bool] | None:
    """The fields ``cls`` writes by serializers of its own, and whether the rest are written by
    pydantic's plain rules (no ``ser_json_`` config, no ``"*"`` serializer); None when the
    model writes itself (``@model_serializer``)."""
    decorators = cls.__pydantic_decorators__
    if decorators.model_serializers:
        return None
    own: set[str] = set()
    for decorator in decorators.field_serializers.values():
        own.update(decorator.info.fields)
    plain = "*" not in own and not any(key.startswith("ser_json_") for key in cls.model_config)
    return own, plain


def _plain_fields(value: BaseModel) -> list[tuple[str | int | None, Any]]:
    """The fields of ``value`` that pydantic writes by its plain rules, by name, for the second
    walk to go into (not those excluded, nor those the model writes its own way)."""
    cls = type(value)
    rules = _own_rules(cls)
    if rules is None or not rules[1] or getattr(cls, "__pydantic_root_model__", False):
        return []
    own = rules[0]
    return [
        (name, getattr(value, name, None))
        for name, field in cls.model_fields.items()
        if name not in own and not field.exclude
    ]
