"""``ShortTermMemory``: an agent's memory as Flink Agents' ``MemoryObject``, with dotted paths.

Memory is a dict of JSON data (or registered models), kept in the session and in checkpoints as
it is. ``set("user.name", "x")`` makes ``user`` a nested *object*: a dict holding the marker key
``"__adk_object__": True`` beside its fields, which is how it stays apart from a dict *value*
(``set("prefs", {"lang": "en"})`` gives that dict back as it was, as Flink Agents does) while
staying plain JSON in every store. ``get`` of an object gives a view of it (a ``ShortTermMemory``
over its path), whose reads and writes go to memory: it finds the object by its path each time, so
a view held across a ``delete`` of its object writes where a new one is made, not into a dict
nothing keeps.

Memory written before paths existed may hold names with dots (``"user.name"`` was one key): such a
name is found by its whole name first, so old memory reads and writes as it did. When an object is
made at the root (``user``), the old names under it (``"user.name"``) move into it, so the object
and the paths agree; one that cannot move (``"user"`` already a value, or two old names that would
be one value and one object) stays as it is, still found by its whole name.

The undotted ``get``/``set`` are the per-action calls: ``get`` adds one type check to its dict
lookup (is the value an object?), ``set`` adds the lookup of the value it replaces (an object is
not replaced by a value) to the JSON check that dominates it, and a path is looked at only when
the name has a dot and is not a key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..checkpoint.codec import CheckpointError, to_json_value

__all__ = ["ShortTermMemory"]

_MISSING: Any = object()

_OBJECT = "__adk_object__"
"""The key that marks a dict in memory as a nested object (its value ``True``)."""

_NESTED = "NestedObject"
"""What ``get_fields`` gives for a nested object, as Flink Agents' ``get_fields`` does."""


def _is_object(value: Any) -> bool:
    return type(value) is dict and _OBJECT in value


def _copied(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with its nested objects copied (the values in them are shared, as a shallow
    copy shares them): what a copy of memory must be for writes into its objects to stay in it."""
    return {
        name: _copied(value) if type(value) is dict and _OBJECT in value else value
        for name, value in values.items()
    }


class ShortTermMemory:
    """Key-value memory of one agent: kept per input key (``ctx.short_term_memory``), or for one
    input's run (``ctx.sensory_memory``). Values are JSON data or pydantic models
    registered with ``adk.register_type``: memory is saved in checkpoints, and a value that could
    not be saved is refused when it is set, not when a pause later fails.

    It is Flink Agents' ``MemoryObject`` too: a name with dots is a path (``set("user.name",
    "x")`` makes the object ``user``), ``get`` of an object gives a view of it (this class, over
    the object), and ``new_object``, ``is_exist``, ``get_field_names`` and ``get_fields`` behave
    as there. See the module docstring for how objects are kept.

    While an action runs, the memory keeps the value each name had before the action's first write
    to it, so the writes of an action that raises ``Interrupt`` can be undone: the action runs
    again on resume, and its writes must not count twice (like the events it sent, which are
    dropped). Writes through ``set``/``delete``/``new_object`` (and views) are undone; a value
    changed in place is not.
    """

    __slots__ = ("_deep", "_kind", "_undo", "_values")

    def __init__(self, values: dict[str, Any]) -> None:
        self._values = values
        self._undo: dict[str, Any] = {}  # root name -> its value before the running action wrote it
        # Writes inside objects, in order: (object, name, value before), undone last to first.
        self._deep: list[tuple[dict[str, Any], str, Any]] = []
        # What errors call it: sensory memory is one too (``_ActionRun`` names it so), and told
        # "short-term memory" its user would look for the write in the wrong place.
        self._kind = "short-term memory"

    # -- the per-action calls: a name without dots costs what a dict's would, nearly -----------
    def get(self, key: str, default: Any = None) -> Any:
        """The value at ``key`` (a name, or a dotted path), or ``default``; a nested object is
        given as a view of it. Change a value through ``set``: a change made in place is not
        undone when the action is interrupted."""
        value = self._values.get(key, _MISSING)
        if value is _MISSING:
            try:
                dotted = "." in key
            except TypeError:  # not a str: no path, and no key (as a dict's get)
                return default
            return self._get_at(self._names(key), default) if dotted else default
        if type(value) is dict and _OBJECT in value:
            return _MemoryView(self, (key,))
        return value

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` at ``key``: a name, or a dotted path whose missing objects are made.
        ``TypeError`` now, not at the next pause, if a checkpoint could not hold it; ``ValueError``
        if ``key`` is an object (delete it first) or its path goes through a value. Undone if the
        running action is interrupted."""
        if not isinstance(key, str):
            raise TypeError(f"{self._kind} keys are strings, got {key!r}")
        values = self._values
        if "." in key and key not in values:
            self._set_at(self._split(key), value, key)
            return
        # One call beside the JSON check that dominates a set, for one refusal on every write.
        self._check(value, key)
        old = values.get(key, _MISSING)
        if type(old) is dict and _OBJECT in old:
            raise self._is_an_object(key)
        undo = self._undo
        if key not in undo:
            undo[key] = old
        values[key] = value

    def delete(self, key: str) -> None:
        """Forget ``key``, a value or an object with all it holds (no error if it is not there)."""
        values = self._values
        if isinstance(key, str) and "." in key and key not in values:
            self._delete_at(self._names(key))
            return
        if key not in self._undo:
            self._undo[key] = values.get(key, _MISSING)
        values.pop(key, None)

    # -- Flink Agents' MemoryObject --------------------------------------------------------------
    def new_object(self, path: str, *, overwrite: bool = False) -> ShortTermMemory:
        """The object at ``path``, made (with its missing parents) unless it exists; a value
        there is ``ValueError``, or with ``overwrite`` replaced by an empty object."""
        return self._new_object_at(self._split(path), overwrite, path)

    def is_exist(self, path: str) -> bool:
        """Whether ``path`` holds a value or an object."""
        return self.get(path, _MISSING) is not _MISSING

    def get_field_names(self) -> list[str]:
        """The names of this object's own fields, sorted."""
        return sorted(self._fields())

    def get_fields(self) -> dict[str, Any]:
        """This object's own fields: each value, and ``"NestedObject"`` for a nested object."""
        fields = self._fields()
        return {
            name: _NESTED if _is_object(fields[name]) else fields[name] for name in sorted(fields)
        }

    # -- mapping ---------------------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        try:
            value = self._values[key]
        except KeyError:
            if isinstance(key, str) and "." in key:
                found = self._get_at(self._names(key), _MISSING)
                if found is not _MISSING:
                    return found
            raise
        if type(value) is dict and _OBJECT in value:
            return _MemoryView(self, (key,))
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __contains__(self, key: object) -> bool:
        if key in self._values:
            return True
        return isinstance(key, str) and "." in key and self.get(key, _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def to_dict(self) -> dict[str, Any]:
        """A shallow copy of the memory (the values themselves are not copied; a nested object is
        its dict, ``"__adk_object__"`` marker included)."""
        return dict(self._values)

    def __repr__(self) -> str:
        return f"ShortTermMemory({self._values!r})"

    # -- paths -----------------------------------------------------------------------------------
    def _fields(self) -> dict[str, Any]:
        return self._values

    def _split(self, path: str) -> tuple[str, ...]:
        """``path``'s names. A path has no empty name, nor the objects' marker (which a view's
        single name would reach too)."""
        if not isinstance(path, str):
            raise TypeError(f"{self._kind} keys are strings, got {path!r}")
        names = tuple(path.split("."))
        if len(names) > 1 and "" in names:
            raise ValueError(f"{self._kind} path {path!r} has an empty name between its dots")
        if _OBJECT in names and (len(names) > 1 or isinstance(self, _MemoryView)):
            raise ValueError(f"{self._kind} path {path!r}: {_OBJECT!r} is memory's own name")
        return names

    def _names(self, path: str) -> tuple[str, ...] | None:
        """``path``'s names for a read or a delete, ``None`` for a path nothing can be at (as
        ``_split`` would refuse it)."""
        if not isinstance(path, str):
            return None
        names = tuple(path.split("."))
        if (len(names) > 1 and "" in names) or (
            _OBJECT in names and (len(names) > 1 or isinstance(self, _MemoryView))
        ):
            return None
        return names

    def _check(self, value: Any, path: str) -> None:
        """Refuse what memory cannot hold, naming the path."""
        if type(value) is dict and _OBJECT in value:
            raise self._marked(path)
        try:
            to_json_value(value, f"{self._kind} {path!r}")
        except CheckpointError as exc:
            raise self._refused(value, path, exc) from None

    def _marked(self, path: str) -> TypeError:
        return TypeError(
            f"{self._kind} {path!r}: a dict with the key {_OBJECT!r} is how memory marks a "
            "nested object; use new_object(...) for one, or give the dict another key"
        )

    def _refused(self, value: Any, path: str, exc: CheckpointError) -> TypeError:
        if isinstance(value, ShortTermMemory):
            return TypeError(
                f"{self._kind} {path!r}: the value is a memory object; use new_object(...) "
                "to make a nested object, or set its fields one by one"
            )
        return TypeError(str(exc))

    def _is_an_object(self, path: str) -> ValueError:
        return ValueError(
            f"{self._kind} {path!r} is an object, not a value: delete it first to put a value "
            "there (Flink Agents refuses it too)"
        )

    def _node(self, names: tuple[str, ...]) -> dict[str, Any] | None:
        """The object at ``names`` (the root for none), or ``None`` if there is none."""
        node = self._values
        for name in names:
            child = node.get(name)
            if type(child) is not dict or _OBJECT not in child:
                return None
            node = child
        return node

    def _get_at(self, names: tuple[str, ...] | None, default: Any) -> Any:
        if names is None:
            return default
        parent = self._node(names[:-1])
        if parent is None:
            return default
        value = parent.get(names[-1], _MISSING)
        if value is _MISSING:
            return default
        if type(value) is dict and _OBJECT in value:
            return _MemoryView(self, names)
        return value

    def _write(self, node: dict[str, Any], names: tuple[str, ...], value: Any) -> None:
        """``node[names[-1]] = value`` (``_MISSING``: remove it), undoable; ``node`` is the object
        at ``names[:-1]``."""
        undo, name = self._undo, names[-1]
        if node is self._values:
            if name not in undo:
                undo[name] = node.get(name, _MISSING)
        else:
            if names[0] not in undo:  # so that ``_undo`` says the action wrote something
                undo[names[0]] = self._values.get(names[0], _MISSING)
            self._deep.append((node, name, node.get(name, _MISSING)))
        if value is _MISSING:
            node.pop(name, None)
        else:
            node[name] = value

    def _parent(self, names: tuple[str, ...], path: str) -> dict[str, Any]:
        """The object ``names[-1]`` belongs in, made with its missing parents (and, for one made
        at the root, the old dotted names under it moved in)."""
        node = self._values
        for depth, name in enumerate(names[:-1]):
            child = node.get(name, _MISSING)
            if child is _MISSING:
                child = {_OBJECT: True}
                self._write(node, names[: depth + 1], child)
                if depth == 0:
                    self._gather(name, child)
            elif type(child) is not dict or _OBJECT not in child:
                held = ".".join(names[: depth + 1])
                raise ValueError(
                    f"{self._kind} path {path!r} goes through {held!r}, which holds a value, not "
                    f"an object: delete {held!r} first to make it an object"
                )
            node = child
        return node

    def _set_at(self, names: tuple[str, ...], value: Any, path: str) -> None:
        self._check(value, path)
        node = self._parent(names, path)
        if _is_object(node.get(names[-1])):
            raise self._is_an_object(path)
        self._write(node, names, value)

    def _new_object_at(self, names: tuple[str, ...], overwrite: bool, path: str) -> ShortTermMemory:
        node = self._parent(names, path)
        found = node.get(names[-1], _MISSING)
        if found is _MISSING or not _is_object(found):
            if found is not _MISSING and not overwrite:
                raise ValueError(
                    f"{self._kind} {path!r} holds a value, not an object: pass overwrite=True "
                    "to replace it with an empty object"
                )
            made: dict[str, Any] = {_OBJECT: True}
            self._write(node, names, made)
            if len(names) == 1:
                self._gather(names[0], made)
        return _MemoryView(self, names)

    def _delete_at(self, names: tuple[str, ...] | None) -> None:
        if names is None:
            return
        node = self._node(names[:-1])
        if node is not None and names[-1] in node:
            self._write(node, names, _MISSING)

    def _gather(self, name: str, made: dict[str, Any]) -> None:
        """Move the root's old dotted names under ``name`` (``"user.name"``, saved before memory
        had paths) into the object just made there, so the object holds what its paths find. A
        name that would go through a value, or land where something already is, stays where it
        is (still found by its whole name)."""
        values, prefix = self._values, name + "."
        old = [key for key in values if key.startswith(prefix)] if len(values) > 1 else []
        for key in sorted(old, key=len):  # shorter names first: a parent before its fields
            names = (name, *key[len(prefix) :].split("."))
            if "" in names or _OBJECT in names:
                continue
            node = made
            for depth in range(1, len(names) - 1):
                child = node.get(names[depth], _MISSING)
                if child is _MISSING:
                    child = {_OBJECT: True}
                    self._write(node, names[: depth + 1], child)
                elif type(child) is not dict or _OBJECT not in child:
                    break
                node = child
            else:
                if names[-1] not in node:
                    self._write(node, names, values[key])
                    self._write(values, (key,), _MISSING)

    # -- interrupted actions ---------------------------------------------------------------------
    def _undo_writes(self) -> None:
        """Put back what the running action's writes replaced (it was interrupted)."""
        deep = self._deep
        for node, name, value in reversed(deep):
            if value is _MISSING:
                node.pop(name, None)
            else:
                node[name] = value
        deep.clear()
        values = self._values
        for key, value in self._undo.items():
            if value is _MISSING:
                values.pop(key, None)
            else:
                values[key] = value
        self._undo.clear()

    def _keep_writes(self) -> None:
        """The running action returned: its writes stand."""
        self._undo.clear()
        self._deep.clear()


class _MemoryView(ShortTermMemory):
    """A nested object of a memory: the memory's methods, on the object at ``_path``, found by
    its path at each call (see the module docstring). Writes are the memory's own, undone with
    its others."""

    __slots__ = ("_path", "_root")

    def __init__(self, root: ShortTermMemory, path: tuple[str, ...]) -> None:
        # Not ShortTermMemory's: a view has no values or undo of its own.
        self._root = root
        self._path = path
        self._kind = root._kind

    def get(self, key: str, default: Any = None) -> Any:
        names = self._names(key)
        return self._root._get_at(None if names is None else (*self._path, *names), default)

    def set(self, key: str, value: Any) -> None:
        names = self._split(key)
        self._root._set_at((*self._path, *names), value, self._shown(key))

    def delete(self, key: str) -> None:
        names = self._names(key)
        self._root._delete_at(None if names is None else (*self._path, *names))

    def new_object(self, path: str, *, overwrite: bool = False) -> ShortTermMemory:
        names = (*self._path, *self._split(path))
        return self._root._new_object_at(names, overwrite, self._shown(path))

    def __getitem__(self, key: str) -> Any:
        found = self.get(key, _MISSING)
        if found is _MISSING:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key, _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields())

    def __len__(self) -> int:
        return len(self._fields())

    def to_dict(self) -> dict[str, Any]:
        """A shallow copy of the object's fields (without its marker)."""
        return dict(self._fields())

    def __repr__(self) -> str:
        return f"ShortTermMemory({'.'.join(self._path)!r}: {self._fields()!r})"

    def _fields(self) -> dict[str, Any]:
        node = self._root._node(self._path)
        if node is None:
            return {}
        return {name: value for name, value in node.items() if name != _OBJECT}

    def _shown(self, key: str) -> str:
        return ".".join((*self._path, key))
