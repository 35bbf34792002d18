"""Checkpoint encoding: versioned, checksummed JSON; never pickle.

Loading a checkpoint runs no code: values are plain JSON, or pydantic models of types registered with
``register_type`` (stored as ``{"__adk_type__": name, "data": ...}`` and rebuilt by validation only).
The bytes are one header line (format, version, SHA-256 of the body) and the JSON body, so a
truncated or edited checkpoint is reported as such instead of resuming from wrong state.

The header of a paused run's checkpoint also carries its summary (``_SUMMARY``: the agent, run id,
save time, pending points, whether it finished, a keyed record's key and index) as JSON text with
a SHA-256 of its own, and the body's length: a listing of paused runs (``list_pending``) reads
that first line only, so it does not pay for every history. Readers that predate it ignore the
extra header keys (and the summary's keys they do not read).

``json`` and ``hashlib`` are imported by ``encode_checkpoint``/``decode_checkpoint`` when a run first
pauses or resumes, not at module level: this module loads with ``import adk`` (for
``register_type`` and ``CheckpointError``), most programs never pause, and the two modules are
~3-4 ms of a fresh interpreter's ``import adk`` that neither asyncio nor pydantic loads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from math import isfinite
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, get_args

from pydantic import BaseModel, Secret, SecretBytes, SecretStr, ValidationError
from pydantic_core import (
    PydanticSerializationError,
    SchemaSerializer,
    from_json,
    to_json,
)
from pydantic_core.core_schema import CoreConfig

from .._json_where import DEEP, ITSELF, KEY, unwritable_at
from .._nonfinite import nonfinite_at
from .._warned import Warned
from ..interrupts import AGENT_STATE
from ..messages import Message

if TYPE_CHECKING:
    from ..messages import AudioPart, FilePart, ImagePart

__all__ = [
    "FORMAT",
    "MAX_DEPTH",
    "MAX_PART_BYTES",
    "VERSION",
    "CheckpointError",
    "decode_checkpoint",
    "encode_checkpoint",
    "from_json_value",
    "register_type",
    "to_json_value",
]

FORMAT = "pyadk.checkpoint"
VERSION = 2
"""The newest checkpoint format version this pyadk writes and reads. A body is written as the
oldest version that holds it (``encode_checkpoint``): 2 only when its history's run paths are
in a table (``_RUN_PATHS``), which pyadk before it does not read; 1 otherwise, as every earlier
pyadk wrote and reads. Every version from ``_FIRST`` to ``VERSION`` is read."""
_FIRST = 1
"""The oldest checkpoint format version this pyadk reads."""
_RUN_PATHS = "run_paths"
"""The body's table of its history's run paths (``_snapshot._history_body``): format version 2."""
_TAG = "__adk_type__"
MAX_DEPTH = 200
"""Deepest nesting of lists and dicts a checkpoint value may have, checked when it is saved and
when it is loaded. A fixed limit rather than Python's recursion limit, whose reach differs between
versions (3.12 stopped spending a frame per comprehension): a checkpoint one worker saves loads in
every other, whatever Python each runs."""

_TYPES: dict[str, type[BaseModel]] = {}
_NAMES: dict[type[BaseModel], str] = {}
_OWN: set[type[BaseModel]] = set()
"""Registered models defined in the ``adk`` package itself (``Message``, ``InterruptPoint``): stored
without the fields that equal their defaults, since a history holds one per message and adk keeps
their defaults and field names stable. A user's model is stored whole: its defaults may change
between releases, and a discriminated union needs its tag field even when it is the default."""

_FLOAT = "float"
"""The tag of a float JSON has no number for (NaN, infinities): ``{"__adk_type__": "float",
"data": "nan"}`` (``"inf"``, ``"-inf"``), so a checkpoint holds what the run held and stays JSON
every reader takes. A model's data holding one says so with ``_TAGGED`` (see ``_tag_floats``)."""
_TAGGED = "tagged"

_SERIALIZER = "_adk_nan_serializer"
"""The class attribute holding a model's serializer with NaN and infinities kept as floats: in
JSON mode pydantic turns those inside ``Any`` and ``dict`` fields into ``None`` (its
``ser_json_inf_nan`` default), so a checkpoint (or an event's JSON) silently held ``null`` where the
run held NaN. The setting is the serializer's, not a dump argument; this keeps the model's own
config untouched (its ``model_dump_json`` is its owner's business).

Kept on the class itself, read from its own ``__dict__`` (a subclass, whose config or fields may
differ, gets its own), as pydantic keeps ``__pydantic_serializer__``: not in a module-level dict,
which kept alive every class a tool result, a Flink output or an event was ever dumped from (a
class made per call with ``create_model`` piled up for the process's life), nor in a
``WeakKeyDictionary``, whose serializer refers to its class (the model schema's ``cls``) and so
keeps its key alive all the same. On the class, the two form a cycle the collector frees."""

MAX_PART_BYTES = 20 * 1024 * 1024
"""Largest image, sound or file (``Message.parts``) a checkpoint holds, in bytes before base64:
a pause with a bigger one in its history is refused, naming it, rather than written as a row
of tens of megabytes every store must hold and every resume read. OpenAI takes images up to
20 MB; a bigger file belongs in storage of its own, the message holding its ``uri``."""

_SETTLED = "settled"
"""The body's list of the ids of points whose calls a resume ran and recorded (``_progress``):
listings show them no more (``_points.still_waiting``)."""
_SUMMARY = ("agent", "run_id", "saved_at", "points", "finished", _SETTLED, "record_key")
"""The body's keys a checkpoint's header repeats, as its summary (what a listing shows): a keyed
record's pause's key and index (``record_key``, ``adk._record_keys.saved``) among them."""

_MAX_INT_DIGITS = 4300
"""Longest int (decimal digits) a checkpoint holds: Python's default limit on converting ints to
and from text, so a checkpoint one worker saves parses in every other."""
_INT_LIMIT = 10**_MAX_INT_DIGITS
_INT_FLOOR = -_INT_LIMIT  # negated once here: negating it per value would cost as much as a walk

M = TypeVar("M", bound=type[BaseModel])


_Reason = Literal[
    "not_found",
    "busy",
    "max_turns",
    "missing_input",
    "other_version",
    "corrupt",
    "incompatible",
    "id_taken",
    "unstorable",
]
_REASONS: frozenset[str] = frozenset(get_args(_Reason))


class CheckpointError(Exception):
    """A checkpoint is missing, unreadable, from another version, or cannot be written.

    ``reason`` says which, one of a fixed set of words (docs/interrupts.md, "Why a resume was
    refused"), so a service answers each kind of refusal without reading the message or the
    checkpoint's bytes:

    - ``"not_found"``: no checkpoint to resume by that id (``CheckpointNotFoundError``);
    - ``"busy"``: a resume of it is running now (``CheckpointBusyError``), or held it while this
      one ran;
    - ``"max_turns"``: the resume's ``max_turns`` leaves too few model calls (also a
      ``ValueError``, its limit as ``max_turns``): sent again with a higher one, it resumes;
    - ``"missing_input"``: the resume lacks run options or a session value the paused run
      needs (also a ``ValueError``): given them, it resumes;
    - ``"other_version"``: written in another checkpoint format version: a pyadk of that
      version resumes it (a rolling deploy);
    - ``"corrupt"``: bytes no resume will ever read (not a pyadk checkpoint, truncated, edited,
      malformed);
    - ``"incompatible"``: whole, but this runner as it is now cannot resume it (its agent tree,
      tools, callbacks, registered types or settings changed since the pause, another agent's
      checkpoint): a fixed deployment (a rollback) resumes it. The default of a
      ``CheckpointError`` raised without a reason (your own agent's);
    - ``"id_taken"``: a new run given the id of a checkpoint a paused run still waits on;
    - ``"unstorable"``: what a pause must save cannot be stored (a value that is no JSON).

    Every refusal keeps the checkpoint as it was. ``reason`` is kept across ``pickle``."""

    reason: _Reason = "incompatible"

    def __init__(self, *args: object, reason: _Reason | None = None) -> None:
        super().__init__(*args)
        if reason is not None:
            if reason not in _REASONS:
                raise ValueError(
                    f"CheckpointError reason must be one of {sorted(_REASONS)}, not {reason!r}"
                )
            self.reason = reason


class CheckpointNotFoundError(CheckpointError, LookupError):
    """No checkpoint to resume by that id: never saved in the store, deleted once a resume of it
    ran to its end, or kept finished for audit (``keep_checkpoints=True``). Its own class so a
    service can answer a stale or doubled resume request (404 or 409) without reading the message,
    and apart from a checkpoint that is there but cannot be read. ``reason`` is
    ``"not_found"``."""

    reason: _Reason = "not_found"


class CheckpointBusyError(CheckpointError):
    """The checkpoint is being resumed right now, in this process or in another holding its claim
    on a shared store: a request to retry later (409), not a broken checkpoint. ``reason`` is
    ``"busy"``."""

    reason: _Reason = "busy"


def register_type(model: M, name: str | None = None) -> M:
    """Allow instances of ``model`` in interrupt info/state and session values of checkpoints.

    Usable as a decorator. The name defaults to ``module.QualName`` and is what the checkpoint stores,
    so keep it stable across releases (pass ``name=`` when moving a class).
    """
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError("register_type takes a pydantic model class")
    tag = name or f"{model.__module__}.{model.__qualname__}"
    known = _TYPES.get(tag)
    if known is not None and known is not model:
        raise ValueError(f"checkpoint type name {tag!r} is already registered for {known!r}")
    _TYPES[tag] = model
    _NAMES[model] = tag
    if model.__module__.partition(".")[0] == "adk":
        _OWN.add(model)
    return model


def _type_name(model: type[BaseModel]) -> str | None:
    """The name ``model`` is registered under, or None (for ``AgentEvent.to_dict``)."""
    return _NAMES.get(model)


def _named_type(name: str) -> type[BaseModel] | None:
    """The model registered as ``name``, or None (for ``AgentEvent.from_dict``)."""
    return _TYPES.get(name)


def _json_dump(value: BaseModel, **options: Any) -> Any:
    """``value.model_dump(mode="json", **options)``, but NaN and infinities stay floats wherever
    they are (see ``_SERIALIZER``), for the caller to store or refuse."""
    return _nan_serializer(type(value)).to_python(value, mode="json", **options)


def _nan_serializer(cls: type[BaseModel]) -> SchemaSerializer:
    """``cls``'s serializer with NaN and infinities kept (``_SERIALIZER``), made once: as
    floats in ``to_python``, as ``NaN``/``Infinity`` in ``to_json``."""
    serializer: SchemaSerializer | None = cls.__dict__.get(_SERIALIZER)
    if serializer is None:
        cls.model_rebuild()  # builds a deferred (defer_build) model's schema; else a no-op
        schema = cls.__pydantic_core_schema__
        # The model's own config (bytes, timedelta modes...) lives in its model schema, wrapped in
        # a "definitions" schema when the model refers to itself. The serializer's config is what
        # values in ``Any`` and ``dict`` fields are written with, nested models' included; typed
        # floats are floats in ``to_python`` whatever it says (``to_json`` writes those with the
        # model's own setting: see ``_nan_json``).
        model_schema = schema["schema"] if schema["type"] == "definitions" else schema
        config = cast(CoreConfig, dict(model_schema.get("config") or {}))
        config["ser_json_inf_nan"] = "constants"
        serializer = SchemaSerializer(schema, config)
        setattr(cls, _SERIALIZER, serializer)
    return serializer


_EXCLUDED = "_adk_excluded_fields"
"""The class attribute holding, per model, a serializer for each field it leaves out of its
dumps (``_with_excluded``), kept on the class as ``_SERIALIZER`` is."""


def _with_excluded(value: BaseModel, data: dict[str, Any]) -> dict[str, Any]:
    """``data``, a dump of ``value``, with the fields its model leaves out of dumps
    (``Field(exclude=True)``) written in too, by name: a checkpoint holds what the run held.
    Left out, such a field came back as its default on resume, or, one without a default, made
    the checkpoint fail to load for ever. (Those of models nested in ``value`` stay out: one
    without a default is refused, ``_refuse_unstored``.)"""
    cls = type(value)
    excluded: tuple[tuple[str, SchemaSerializer], ...] | None = cls.__dict__.get(_EXCLUDED)
    if excluded is None:
        excluded = _excluded_serializers(cls)
        setattr(cls, _EXCLUDED, excluded)
    for name, serializer in excluded:
        data[name] = serializer.to_python(getattr(value, name), mode="json", round_trip=True)
    unstored: dict[Any, tuple[str, ...]] | None = cls.__dict__.get(_UNSTORED)
    if unstored is None:
        unstored = _nested_unstored(cls)
        setattr(cls, _UNSTORED, unstored)
    if unstored:  # rare: a model holding one with a required excluded field, or a secret
        if len(unstored) > (_SECRET in unstored):
            _refuse_unstored(value, unstored, cls.__qualname__, 0)
        if _SECRET in unstored:
            masked = _masked(data, cls.__qualname__, 0)
            if masked is not None:
                raise _Unstorable(
                    f"{masked} is a secret (SecretStr, SecretBytes, Secret), which pydantic "
                    f"writes as {_MASK!r}: the resumed run would get that instead of the "
                    "secret; keep secrets out of what a pause saves (look them up where they are "
                    "used), hold them as plain values, or write them with a field_serializer"
                )
    return data


_MASK = "**********"  # what pydantic writes for a secret in JSON mode


def _masked(data: Any, path: str, depth: int) -> str | None:
    """Where in ``data``, the dump of a model whose schema holds a secret type, a secret was
    written masked; None if nowhere (none set, or one a ``field_serializer`` writes whole)."""
    if data == _MASK:
        return path
    if depth >= MAX_DEPTH:
        return None
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for key, item in items:
        found = _masked(
            item, _joined(path, key) if isinstance(key, str) else f"{path}[{key}]", depth + 1
        )
        if found is not None:
            return found
    return None


_UNSTORED = "_adk_unstored_fields"
"""The class attribute holding, per model, the classes of the models (and pydantic dataclasses)
its schema nests that leave a field without a default out of their dumps, with those fields;
and, under ``_SECRET``, whether its schema holds a secret type (``_nested_unstored``)."""

_SECRETS = (SecretStr, SecretBytes, Secret)
_SECRET = object()  # the key of ``_nested_unstored``'s answer saying a secret type is there


def _nested_unstored(cls: type[BaseModel]) -> dict[Any, tuple[str, ...]]:
    """The classes in ``cls``'s schema (itself included, for a model that nests itself) with
    required fields marked ``exclude=True``. Their dump, made by their own serializer wherever
    they are nested, leaves those out, and ``_with_excluded`` writes in only the fields of the
    model it stores: nested in it, such a model would be saved without the field and the
    checkpoint could never load. ``_SECRET`` is there too when the schema holds a secret type
    (``SecretStr``...), which pydantic writes as ``"**********"``: saved so, the resumed run
    would get that text for the secret. Worked out once per class, from its core schema."""
    _nan_serializer(cls)  # builds a deferred model's schema
    found: dict[Any, tuple[str, ...]] = {}
    for node in _schema_nodes(cls.__pydantic_core_schema__):
        held = node.get("cls")
        if _is_secret(node, held):
            found[_SECRET] = ()
        elif node.get("type") in ("model", "dataclass") and isinstance(held, type):
            fields = getattr(held, "__pydantic_fields__", None) or {}
            names = tuple(
                name for name, info in fields.items() if info.exclude is True and info.is_required()
            )
            if names:
                found[held] = names
    if cls.__pydantic_core_schema__["type"] != "definitions":
        found.pop(cls, None)  # it does not nest itself: its own fields are ``_with_excluded``'s
    return found


def _is_secret(node: dict[str, Any], held: Any) -> bool:
    """Whether the core schema ``node`` is (part of) a secret type's: ``SecretStr`` and
    ``SecretBytes`` check their class, ``Secret[...]`` is written by pydantic's own function."""
    kind = node.get("type")
    if kind == "is-instance":
        return isinstance(held, type) and issubclass(held, _SECRETS)
    if kind == "function-plain":
        function = node.get("function")
        return getattr(function, "__module__", None) == "pydantic.types" and getattr(
            function, "__name__", ""
        ).startswith("_serialize_secret")
    return False


def _refuse_unstored(
    value: Any, unstored: dict[Any, tuple[str, ...]], path: str, depth: int
) -> None:
    """Raise ``_Unstorable`` for the first model nested in ``value`` (not ``value`` itself, at
    depth 0, whose excluded fields ``_with_excluded`` writes in) that leaves out a required
    field: the pause fails naming it (``path``: where it is), rather than save a checkpoint that
    could never be loaded."""
    if depth >= MAX_DEPTH:
        return
    if isinstance(value, (list, tuple, set, frozenset)):
        for index, item in enumerate(value):
            _refuse_unstored(item, unstored, f"{path}[{index}]", depth + 1)
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _refuse_unstored(item, unstored, f"{path}[{key!r}]", depth + 1)
        return
    fields = getattr(type(value), "__pydantic_fields__", None)
    if not isinstance(fields, dict):
        return
    names = unstored.get(type(value))
    if names is None:  # a subclass where the schema names its base is written as the base
        names = next(
            (n for c, n in unstored.items() if c is not _SECRET and isinstance(value, c)), None
        )
    if names and depth:
        raise _Unstorable(
            f"{path} ({type(value).__qualname__}) leaves its field(s) "
            f"{', '.join(map(repr, names))} out of its dumps (Field(exclude=True)) and they have "
            "no default: a model nested in a stored one is saved as its dump, so the checkpoint "
            "could never be loaded; give them a default"
        )
    for name, info in fields.items():
        if not depth or info.exclude is not True:  # a nested one's excluded field is not saved
            _refuse_unstored(getattr(value, name, None), unstored, f"{path}.{name}", depth + 1)


def _excluded_serializers(cls: type[BaseModel]) -> tuple[tuple[str, SchemaSerializer], ...]:
    """A serializer for each field of ``cls`` marked ``exclude=True``, made from the field's own
    schema in the model's (within its definitions, for a model that refers to itself)."""
    names = [name for name, info in cls.model_fields.items() if info.exclude is True]
    if not names:
        return ()
    _nan_serializer(cls)  # builds a deferred model's schema
    schema = cls.__pydantic_core_schema__
    definitions = schema.get("definitions") if schema["type"] == "definitions" else None
    model_schema = schema["schema"] if definitions is not None else schema
    # Down to the model's fields, past references and the validator functions
    # (``@model_validator``) wrapped around the model and around its fields; the model's own
    # config is on the "model" schema on the way.
    config = cast(CoreConfig, {})
    while model_schema.get("type") != "model-fields":
        if model_schema.get("type") == "definition-ref" and definitions is not None:
            ref = model_schema["schema_ref"]
            model_schema = next(d for d in definitions if d.get("ref") == ref)
            continue
        if model_schema.get("type") == "model":
            config = cast(CoreConfig, dict(model_schema.get("config") or {}))
        model_schema = model_schema["schema"]
    fields = model_schema["fields"]
    config["ser_json_inf_nan"] = "constants"
    found = []
    for name in names:
        field_schema: Any = fields[name]["schema"]
        if definitions is not None:
            field_schema = {
                "type": "definitions",
                "schema": field_schema,
                "definitions": definitions,
            }
        found.append((name, SchemaSerializer(field_schema, config)))
    return tuple(found)


def _chose_nan(cls: type[BaseModel]) -> bool:
    """Whether ``cls``'s config says how its JSON writes NaN and infinities
    (``ser_json_inf_nan``): then JSON meant for others (a tool result, a Flink output) is written
    as its owner asked, ``"NaN"`` strings or ``null`` (only pydantic's default, ``null`` unasked
    for, lost the value silently). Checkpoints keep NaN whatever it says."""
    return "ser_json_inf_nan" in cls.model_config


def _nan_json(value: BaseModel) -> str:
    """``value.model_dump_json()``, but with NaN and infinities written ``NaN``, ``Infinity``,
    as pydantic writes them in a dict or a dataclass, instead of ``null``: through its JSON data
    (``_json_dump``), since a model's own serializer writes its typed floats with its own
    setting. A model whose config sets that (``_chose_nan``) is written as it says."""
    if _chose_nan(type(value)):
        return value.model_dump_json()
    return to_json(_json_dump(value)).decode()


def _models_nan_kept(value: Any, *, fallback: bool = True) -> Any:
    """``value`` with the pydantic models in it (through dicts, lists and tuples) dumped as
    ``pydantic_core.to_json(value, fallback=str)`` dumps them (by alias, what it cannot encode as
    its ``str``), but with NaN and infinities kept (``_json_dump``): ``to_json`` writes a model's
    with the model's own setting, ``null`` by default, where it writes a dict's as ``NaN``. Text,
    the usual value, is returned at once. ``fallback=False``: what a model holds that it cannot
    encode is its ``PydanticSerializationError``, as ``to_json(value)`` without one raises. A
    model whose config sets how NaN is written (``_chose_nan``) is dumped as ``to_json`` dumps it
    (``"NaN"`` strings, say), not refused for a NaN its owner had made JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        if _chose_nan(type(value)):
            return from_json(to_json(value, by_alias=True, fallback=str if fallback else None))
        if fallback:
            return _json_dump(value, by_alias=True, fallback=str)
        return _json_dump(value, by_alias=True)
    if isinstance(value, dict):
        return {key: _models_nan_kept(item, fallback=fallback) for key, item in value.items()}
    if isinstance(value, (list, tuple)):  # a tuple: a `|` union is built per value walked
        return [_models_nan_kept(item, fallback=fallback) for item in value]
    return value


def to_json_value(value: Any, where: str = "value") -> Any:
    """``value`` as JSON data; registered models are tagged. Anything else is a clear error that
    names where in ``value`` it is (``where`` + the dict keys leading to it)."""
    return _json_value_at(value, where, 0)


def _json_value_at(value: Any, where: str, depth: int) -> Any:
    """``to_json_value`` of a value read back ``depth`` levels inside what ``from_json_value``
    reads (a saved state, inside the body's ``states`` by address and slot): written from
    there, so that what nests too deep for its reading is refused when saved, not saved and then
    refused as malformed by every resume."""
    try:
        return _plain(value, depth)
    except _Unstorable as exc:
        path = where
        for key in reversed(exc.keys):
            path = _joined(path, key)
        raise CheckpointError(f"{path}: {exc.reason}", reason="unstorable") from None


def _joined(path: str, key: str) -> str:
    """``path`` with the dict key ``key`` below it: ``path.key``, or ``path['']`` for a key a dot
    would hide or confuse (empty, or holding a dot), so an error's path names one place."""
    if key and "." not in key:
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def _state_where(address: str, slot: str) -> str:
    """How errors name a component's saved state: its address, and the slot unless it is the
    component's own (``AGENT_STATE``, an ``Interrupt``'s state) — slots are not the user's keys."""
    if slot == AGENT_STATE:
        return f"state of {address}"
    return f"state {slot!r} of {address}"


class _Unstorable(Exception):
    """A value ``_plain`` cannot store; ``keys`` collects the dict keys on the way out, so the
    path to it is only built when there is an error (saves walk every message of a history)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.keys: list[str] = []


_SCALARS = frozenset({str, bool, type(None)})


def _plain(value: Any, depth: int) -> Any:
    # Exact types first (one set lookup for most values); subclasses take the isinstance path.
    cls = type(value)
    if cls in _SCALARS:
        return value
    if cls is int:  # the checks of _number, inlined: saves walk every value
        if _INT_FLOOR < value < _INT_LIMIT:
            return value
        return _number(value)
    if cls is float:
        if isfinite(value):
            return value
        return {_TAG: _FLOAT, "data": repr(value)}
    if depth >= MAX_DEPTH:
        raise _Unstorable(f"nested deeper than {MAX_DEPTH} levels")
    if cls is dict:
        return _plain_dict(value, depth + 1)
    if cls is list or cls is tuple:
        return [_plain(v, depth + 1) for v in value]
    if cls in _OWN:  # a history's messages: before the isinstance tests, which a model pays most
        if cls is Message and value.metadata.get(STRUCTURED) is not None:
            return _tool_message_json(value, depth)
        return _own_json(value, cls, depth)
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, float):
        return _plain(float(value), depth)
    if isinstance(value, int):
        return _number(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return _plain_dict(value, depth + 1)
    if isinstance(value, BaseModel):
        tag = _NAMES.get(cls)
        if tag is None:
            raise _Unstorable(
                f"{cls.__qualname__} is not registered for checkpoints; "
                "call adk.register_type(" + cls.__qualname__ + ")"
            )
        # By field name, every field (a changed default must not change a loaded value), read back
        # accepting names and aliases (``_rebuild``): a field may have a serialization alias that
        # validation never reads. round_trip: Json[...] fields stay text.
        try:
            dump = _json_dump(value, round_trip=True)
        except (ValueError, TypeError, UnicodeDecodeError) as exc:  # a frozenset key: TypeError
            # What pydantic cannot write (an object of its own in an ``Any`` field, a dict key
            # JSON cannot hold, bytes that are not UTF-8) is named where, as in a plain dict.
            raise _unwritable_model(value, exc) from None
        data = _with_excluded(value, dump)
        if _has_any_place(cls):
            expected = _schema_classes(cls)
            walk = _models_to_walk(value, expected)
            if walk:
                stored: dict[str, Any] = {_TAG: tag, "data": data}
                if walk == _CHECK and _comes_back(value, stored, depth):
                    return stored  # the usual answer: its models sit where their class is typed
                found: list[bool] = []
                tagged = _models_tagged(value, data, depth, found, expected)
                if found:  # rebuilt before validation, as a dump holding tagged floats is
                    stored = {_TAG: tag, "data": tagged, _TAGGED: True}
                if walk == _CHECK:
                    _check_kept(value, stored, depth)
                return stored
        return {_TAG: tag, "data": data}
    raise _Unstorable(
        f"{cls.__qualname__} cannot be stored in a checkpoint; "
        "use JSON values or pydantic models registered with adk.register_type"
    )


_OWN_WAYS: dict[type[BaseModel], tuple[SchemaSerializer, tuple[str, ...]]] = {}
"""Per model of ``_OWN``, its serializer (``_nan_serializer``) and its fields with a place typed
``Any`` (``_any_fields``), found once: a save writes one ``Message`` per recorded event, and
reading the two off the class (a mapping proxy made per read of ``cls.__dict__``) per message
cost a sixth of writing it. A module-level dict, unlike ``_SERIALIZER``'s class attribute, as
these are adk's own few classes, alive as long as the module anyway."""


STRUCTURED = "structured"
"""The ``Message.metadata`` key of a tool message's ``ToolResult.structured``
(``adk.tools._executor``): machine-readable output beside the text, for code reading the tool's
event, never sent to a model. Anything a tool gave, so a checkpoint or an event's JSON may not
hold it."""

_warned_structured = Warned()
"""The (tool name, place) pairs ``dropped_structured`` warned about, the last 256 of them: a set
of every one grew by an entry per tool name for the life of the process."""


def dropped_structured(message: Message, why: object, where: str) -> Message:
    """``message`` with its ``structured`` value None, where ``where`` (a checkpoint, an event's
    JSON) cannot hold it (``why``): a warning the first time for its tool there, rather than a
    pause or an event refused for a value beside the text the model read."""
    tool = message.name or "?"
    if _warned_structured.first((tool, where)):
        logging.getLogger("adk.tools").warning(
            "tool %r returned a ToolResult.structured that %s cannot hold (%s): its tool "
            "message's metadata['structured'] is None there, its text kept; return JSON values "
            "or a model registered with adk.register_type",
            tool,
            where,
            why,
        )
    return message.model_copy(update={"metadata": {**message.metadata, STRUCTURED: None}})


def warns_of(message: Message, where: str) -> bool:
    """Whether ``dropped_structured(message, ..., where)`` will warn: the first time for its
    tool there. Only then is the value walked for where it fails (``_unwritable``), for the
    warning to say: the place is thrown away, and a save of a history holding it, or each event
    of it, paid a walk of the whole value (30,000 items: three times the save's own dump)."""
    return (message.name or "?", where) not in _warned_structured


def _tool_message_json(value: Message, depth: int) -> dict[str, Any]:
    """``_own_json`` of a tool message carrying a tool's structured output (``STRUCTURED``):
    saved as it is when the checkpoint can hold it, else with None for it
    (``dropped_structured``). Only such a message pays the attempt: at a save, never per call."""
    try:
        return _own_json(value, Message, depth, None)
    except (PydanticSerializationError, _Unstorable, ValueError, TypeError) as exc:
        return _own_json(dropped_structured(value, exc, "a checkpoint"), Message, depth)


def _own_json(
    value: Any, cls: type[BaseModel], depth: int, locate: bool | None = True
) -> dict[str, Any]:
    """``_plain`` of a model of ``_OWN``: stored without the fields that equal their defaults,
    tagged with its registered name. ``locate``: what pydantic cannot write is looked for, for
    the error to name (``_unwritable``); else the error gives pydantic's words. None: a tool
    message's, looked for when its dropped value will be warned of (``warns_of``), asked on a
    failure only (a save writes every tool message of a history)."""
    way = _OWN_WAYS.get(cls)
    if way is None:
        way = _OWN_WAYS[cls] = (_nan_serializer(cls), _any_fields(cls))
    serializer, places = way
    # NaN and infinities in the dump stay floats (``_json_dump``): ``encode_checkpoint`` tags
    # them when ``json.dumps`` meets one, so the common save does not walk every dump.
    try:
        data = serializer.to_python(value, mode="json", exclude_defaults=True)
    except (ValueError, UnicodeDecodeError, TypeError) as exc:
        # A place typed ``Any`` (a message's ``metadata``: a keyed record's input message
        # carries the record there) holding what pydantic cannot write: bytes that are not
        # UTF-8 (UnicodeDecodeError), an object of its own, a dict key JSON cannot hold (a
        # frozenset: TypeError), a dict or list holding itself (a plain ValueError, "Circular
        # reference detected"). The pause failed with pydantic's words alone ("'utf-8' codec
        # can't decode byte 0xff"), naming neither the message nor the value.
        if locate is None:
            locate = warns_of(value, "a checkpoint")
        if not locate:
            raise _Unstorable(f"cannot be stored in a checkpoint: {exc}") from None
        raise _unwritable(value, places, exc) from None
    tag = _NAMES[cls]
    if "parts" in data:  # a message's images and files (most have none, and no key)
        data["parts"] = _stored_parts(value.parts)
    # Only its places typed ``Any`` are looked into (a ``Message``'s ``metadata``): a history
    # holds one per message, most with nothing there but text.
    if places and _holds_model([getattr(value, name) for name in places]):
        # Those places dumped whole: ``exclude_defaults`` reaches into the models they hold,
        # whose dumps the walk compares with their own, and an unregistered one, kept as its
        # fields (a tool's structured result), would come back without those at their defaults.
        whole = _json_dump(value, include=set(places), round_trip=True)
        data.update((name, whole[name]) for name in places if name in data)
        found: list[bool] = []
        tagged = _models_tagged(value, data, depth, found, None)
        if found:
            return {_TAG: tag, "data": tagged, _TAGGED: True}
    return {_TAG: tag, "data": data}


def _unwritable(value: BaseModel, places: tuple[str, ...], error: Exception) -> _Unstorable:
    """The ``_Unstorable`` for a model of ``_OWN`` pydantic could not dump (``error``), its
    ``keys`` the path to the first value inside ``places`` it cannot write, found by writing
    them piece by piece (only on this failure: a save pays nothing for it)."""
    for name in places:
        found = _unwritable_in(getattr(value, name, None), error)
        if found is not None:
            found.keys.append(name)
            return found
    return _Unstorable(f"cannot be stored in a checkpoint: {error}")


def _unwritable_model(value: BaseModel, exc: Exception) -> _Unstorable:
    """The ``_Unstorable`` for a registered model pydantic could not dump (``exc``), with the
    path to what it could not write when a walk finds it (only on this failure)."""
    found = _unwritable_in(value, exc)
    return found if found is not None else _Unstorable(_unstorable_reason(value, exc))


_INTO = "stored in a checkpoint"  # what ``_unstorable_reason`` says a value cannot be


def _unwritable_in(value: Any, error: BaseException, into: str = _INTO) -> _Unstorable | None:
    """Where in ``value`` pydantic's JSON dump failed (``error``), found by ``unwritable_at``,
    as an ``_Unstorable`` whose ``keys`` lead to it (innermost first, as ``_plain``'s): dict
    keys and field names, no list's index, as every checkpoint error's path. ``into``: what
    the reason says the value cannot be (an event's JSON says "written as JSON")."""
    found = unwritable_at(value, error, MAX_DEPTH)
    if found is None:
        return None
    bad, how = found.value, found.how
    if how == ITSELF:
        reason = (
            f"it holds itself (a {type(bad).__qualname__} inside itself): JSON holds no "
            "references; give a copy, or what it stands for"
        )
    elif how == KEY:
        reason = f"dict key {bad!r} cannot be written as JSON; use string keys"
    elif how == DEEP:
        reason = f"nested deeper than {MAX_DEPTH} levels"
    else:  # what it is, or, MAX_DEPTH levels down, what holds it
        reason = _unstorable_reason(bad, found.words, into)
    unstorable = _Unstorable(reason)
    unstorable.keys = [key for key in reversed(found.path) if isinstance(key, str)]
    return unstorable


def _unstorable_reason(value: Any, exc: object, into: str = _INTO) -> str:
    """Why ``value``, which pydantic could not write (``exc``: its error, or its words), cannot
    be ``into``."""
    if isinstance(value, (bytes, bytearray)):
        return (
            f"{type(value).__name__} that are not UTF-8 text cannot be {into}; decode them, "
            "or base64-encode them, first"
        )
    return (
        f"{type(value).__qualname__} cannot be {into} ({exc}); use JSON values or pydantic "
        "models registered with adk.register_type"
    )


def _stored_parts(parts: Iterable[ImagePart | AudioPart | FilePart]) -> list[dict[str, Any]]:
    """A message's parts as a checkpoint holds them: whole (``exclude_defaults`` dropped their
    ``type``, which tells them apart when read back), their bytes base64, none over
    ``MAX_PART_BYTES``."""
    stored = []
    for index, part in enumerate(parts):
        size = len(part.data or b"")
        if size > MAX_PART_BYTES:
            error = _Unstorable(
                f"{part.type} of {size} bytes ({part.mime_type}) is over MAX_PART_BYTES "
                f"({MAX_PART_BYTES}) a checkpoint holds; keep it elsewhere and give its uri "
                "(FilePart(uri=...))"
            )
            error.keys += [str(index), "parts"]
            raise error
        stored.append(part.model_dump(mode="json", exclude_none=True))
    return stored


_ANY_PLACE = "_adk_any_place"
"""The class attribute saying whether a model's schema has a place typed ``Any`` (``Any``,
``object``, ``dict[str, Any]``, ``list[Any]``, a bare ``dict``...), anywhere in its nested models
too: only such a model's values are walked for registered models (``_models_tagged``)."""


def _has_any_place(cls: type[BaseModel]) -> bool:
    """Whether ``cls``'s schema has a place typed ``Any`` (``_ANY_PLACE``), worked out once. A
    model taking extra fields (``extra="allow"``, its or a nested model's) has one: its extras,
    which pydantic writes as it writes an ``Any`` field's value."""
    known: bool | None = cls.__dict__.get(_ANY_PLACE)
    if known is None:
        _nan_serializer(cls)  # builds a deferred model's schema
        known = any(_is_loose(node) for node in _schema_nodes(cls.__pydantic_core_schema__))
        setattr(cls, _ANY_PLACE, known)
    return known


def _is_loose(node: dict[str, Any]) -> bool:
    """Whether a core schema node is a place typed ``Any``, or says its model takes extras."""
    return (
        node.get("type") == "any"
        or node.get("extra_fields_behavior") == "allow"
        or node.get("extra_behavior") == "allow"
    )


_ANY_FIELDS = "_adk_any_fields"
"""The class attribute holding the names of a model's fields whose schema has a place typed
``Any`` (``_any_fields``)."""

_SCHEMA_CLASSES = "_adk_schema_classes"
"""The class attribute holding the model classes a model's schema names (``_schema_classes``)."""


def _schema_nodes(schema: Any) -> Iterable[dict[str, Any]]:
    """Every node of a core schema (its dicts, through lists and values, but not a model's
    class, a default or metadata, which are no schema): the one walk of the schema questions
    worked out once per class (``_nested_unstored``, ``_has_any_place``, ``_any_fields``,
    ``_schema_classes``)."""
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, dict):
            yield node
            pending.extend(
                item for key, item in node.items() if key not in ("cls", "default", "metadata")
            )


def _any_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of ``cls`` (one of adk's own models) whose schema has a place typed ``Any``,
    worked out once: what a save of one looks into for registered models. A model that refers
    to itself has all its fields looked into."""
    known: tuple[str, ...] | None = cls.__dict__.get(_ANY_FIELDS)
    if known is None:
        _nan_serializer(cls)  # builds a deferred model's schema
        schema = cls.__pydantic_core_schema__
        fields = next(
            (n["fields"] for n in _schema_nodes(schema) if n.get("type") == "model-fields"), None
        )
        if fields is None or schema["type"] == "definitions":
            known = tuple(cls.model_fields) if _has_any_place(cls) else ()
        else:
            known = tuple(
                name
                for name, field in fields.items()
                if any(n.get("type") == "any" for n in _schema_nodes(field))
            )
        setattr(cls, _ANY_FIELDS, known)
    return known


_LOOSE_FIELDS = "_adk_loose_fields"
"""The class attribute holding the names of a model's fields typed ``Any`` somewhere in their own
type, not counting the models it names (``_loose_fields``)."""


def _loose_fields(cls: type[BaseModel]) -> frozenset[str]:
    """The fields of ``cls`` whose own type has a place typed ``Any`` (``rows: Any``,
    ``dict[str, Any]``, ``list[Inner] | Any``), worked out once: a model in such a field may be
    in that place, where pydantic writes it as its fields and validation leaves it a dict. A
    model in another field (``inner: Inner``) sits in a place typed with its class, and only its
    own fields are looked at so (``_push_fields``). A schema of shared definitions (a model
    referring to itself, or naming one twice) has all its fields counted, when it has a place
    typed ``Any`` at all."""
    known: frozenset[str] | None = cls.__dict__.get(_LOOSE_FIELDS)
    if known is None:
        _nan_serializer(cls)  # builds a deferred model's schema
        schema = cls.__pydantic_core_schema__
        fields = next(
            (n["fields"] for n in _schema_nodes(schema) if n.get("type") == "model-fields"), None
        )
        if fields is None or schema["type"] == "definitions":
            known = frozenset(cls.model_fields) if _has_any_place(cls) else frozenset()
        else:
            known = frozenset(name for name, field in fields.items() if _own_any(field))
        setattr(cls, _LOOSE_FIELDS, known)
    return known


def _own_any(schema: Any) -> bool:
    """Whether a field's core schema has a place typed ``Any`` outside the models it names."""
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, list):
            pending.extend(node)
        elif isinstance(node, dict):
            kind = node.get("type")
            if kind == "any":
                return True
            if kind in ("model", "dataclass", "definition-ref"):
                continue  # a model's place: its own fields are looked at as its class says
            pending.extend(
                item for key, item in node.items() if key not in ("cls", "default", "metadata")
            )
    return False


def _push_fields(value: BaseModel, typed: list[Any], loose: list[Any]) -> None:
    """``value``'s field values onto ``typed`` or ``loose`` by ``_loose_fields``, its extras
    (``extra="allow"``) onto ``loose``: pydantic writes them as an ``Any`` field's value."""
    names = _loose_fields(type(value))
    if names:
        for name, item in value.__dict__.items():
            (loose if name in names else typed).append(item)
    else:
        typed.extend(value.__dict__.values())
    extra = value.__pydantic_extra__
    if extra:
        loose.extend(extra.values())


_WALK = 1
"""``_models_to_walk``: the dump is walked for registered models (``_models_tagged``)."""
_CHECK = 2
"""``_models_to_walk``: walked, and what is stored read back to see the models come back
(``_check_kept``). The dump as it is is read back first (``_comes_back``): equal to the value,
it is stored so, without either walk (``list[Inner] | Any`` holding 30,000 ``Inner``: 1.4 s
with them, a fifth of that without)."""


def _models_to_walk(value: BaseModel, expected: tuple[type, ...]) -> int:
    """Whether a stored model's dump must be walked (``_WALK``), and its stored form read back
    too (``_CHECK``), found without building anything (0: neither, the usual answer; a look
    costs a fraction of the walk that then finds nothing). ``_WALK``: a registered model is in
    it, or an unregistered one of none of the ``expected`` classes (``_schema_classes``), which
    can only be in a place typed ``Any`` (the walk refuses it). ``_CHECK``: an unregistered model
    of one of them in a field typed ``Any`` in its own type (``_loose_fields``) or in extras:
    whether its place is typed with its class (``list[Inner] | Any``) or ``Any`` (it would come
    back as a dict) only reading it back tells. Dict keys are not looked at: a look at every
    dict's keys cost the look of a 30,000-row table a third more (a model as a key, written as
    its text, is refused where the walk or the read back meets it, ``_models_tagged``,
    ``_lost_model``).

    Values in places typed with a model's class are looked into only for the models they hold,
    as the look of ``_holds_model``; in loose places every model counts."""
    result = 0
    typed: list[Any] = []
    loose: list[Any] = []
    _push_fields(value, typed, loose)
    while typed:  # places typed with a model's class: only the models there are looked into
        item = typed.pop()
        cls = type(item)
        if cls is dict:
            typed.extend(item.values())
        elif cls is list or cls is tuple:
            typed.extend(item)
        elif cls is str or cls is int or cls is float or cls is bool or item is None:
            continue
        elif isinstance(item, BaseModel):
            if cls in _NAMES or not issubclass(cls, expected):
                result = _WALK  # a registered model's own ``_plain`` looks into it
            else:
                _push_fields(item, typed, loose)
        elif isinstance(item, dict):
            typed.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):  # a set: written as a list
            typed.extend(item)
    while loose:  # places typed ``Any`` (nothing here is pushed back onto ``typed``)
        item = loose.pop()
        cls = type(item)
        if cls is dict:  # exact types first, isinstance last: most items are rows of plain data
            loose.extend(item.values())
        elif cls is list or cls is tuple:
            loose.extend(item)
        elif cls is str or cls is int or cls is float or cls is bool or item is None:
            continue
        elif isinstance(item, BaseModel):
            if cls in _NAMES or not issubclass(cls, expected):
                result = _WALK
            else:
                return _CHECK
        elif isinstance(item, dict):
            loose.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            loose.extend(item)
    return result


def _check_kept(value: BaseModel, stored: dict[str, Any], depth: int) -> None:
    """Refuse ``value``, about to be stored as ``stored``, when reading it back would give a dict
    (or another class) for an unregistered model it holds, or text for a model it has as a dict
    key (``_CHECK``): the error names where it is. Read back as a resume reads it, so a place
    typed with the model's class passes. One that cannot be read back at all is left as it was
    (its resume says why)."""
    try:
        back = _rebuild(stored, depth)
    except Exception:
        return
    if _same(value, back):
        return
    lost = _lost_model(value, back, depth)
    if lost is not None:
        raise lost


def _comes_back(value: BaseModel, stored: dict[str, Any], depth: int) -> bool:
    """Whether ``stored``, ``value``'s dump untagged, reads back equal to ``value`` (``_CHECK``):
    then it is stored so, without ``_models_tagged``'s walk of the dump nor ``_lost_model``'s
    of the value, each a Python walk of it all. One that does not (a registered model or an
    unregistered one in a place typed ``Any``, a NaN, a model key) takes both."""
    try:
        back = _rebuild(stored, depth)
    except Exception:
        return False
    return _same(value, back)


def _same(value: BaseModel, back: Any) -> bool:
    """Whether ``back``, ``value`` read back, equals it by pydantic's equality: the same class
    at every model, so no model came back as a dict or another class, and no model key as text.
    A model whose class has its own ``__eq__`` is not asked (it may call unlike things equal);
    one nested that raises comparing itself with a dict (``other.id``) makes it not the same."""
    if type(value).__eq__ is not BaseModel.__eq__:
        return False
    try:
        return bool(back == value)
    except Exception:
        return False


def _lost_model(value: Any, back: Any, depth: int) -> _Unstorable | None:
    """The first unregistered model ``value`` holds that ``back``, what a resume reads of it,
    holds as something else, or the first model among its dicts' keys; None when none is.
    The error's ``keys`` lead to it (dict keys and field names, as every checkpoint error's)."""
    if depth >= MAX_DEPTH:
        return None
    pairs: Iterable[tuple[Any, Any, Any]]
    if isinstance(value, BaseModel):
        cls = type(value)
        if type(back) is not cls:
            # Registered: written tagged. Text or another value: a serializer of the holder's
            # wrote it so (``_models_tagged`` keeps that too).
            if cls in _NAMES or not isinstance(back, (dict, BaseModel)):
                return None
            return _Unstorable(
                f"{cls.__qualname__} is not registered for checkpoints (held where the model "
                f"is typed Any, it would come back as {_as_what(back)}); call "
                "adk.register_type(" + cls.__qualname__ + ")"
            )
        extra = value.__pydantic_extra__ or {}
        back_extra = back.__pydantic_extra__ or {}
        pairs = [
            *((name, getattr(value, name), getattr(back, name, None)) for name in cls.model_fields),
            *((name, item, back_extra.get(name)) for name, item in extra.items()),
        ]
    elif isinstance(value, dict) and isinstance(back, dict):
        for key in value:
            if isinstance(key, BaseModel):
                return _model_key(key)
        pairs = [(key, item, back.get(key)) for key, item in value.items() if key in back]
    elif (
        isinstance(value, (list, tuple, set, frozenset))
        and isinstance(back, (list, tuple))
        and len(value) == len(back)
    ):
        pairs = [(None, item, got) for item, got in zip(value, back, strict=True)]
    else:
        return None
    for key, item, got in pairs:
        lost = _lost_model(item, got, depth + 1)
        if lost is not None:
            if isinstance(key, str):
                lost.keys.append(key)
            return lost
    return None


def _model_key(key: BaseModel) -> _Unstorable:
    """The refusal of a model as a dict key in a place typed ``Any``: pydantic writes it as its
    ``str``, so it would come back as text."""
    return _Unstorable(
        f"dict key {key!r} cannot be written as JSON (a model as a key would come back as "
        "its text); use string keys"
    )


def _as_what(back: Any) -> str:
    """How ``_lost_model`` names what a model would come back as."""
    if isinstance(back, dict):
        return "a dict"
    return f"a {type(back).__qualname__}"


def _schema_classes(cls: type[BaseModel]) -> tuple[type, ...]:
    """The model (and dataclass) classes ``cls``'s schema names, itself and those nested in it,
    worked out once: a model of one of them (or of a subclass) in a stored model sits in a place
    typed with its class, which validation rebuilds; a model of another class can only be in a
    place typed ``Any``, where pydantic writes it as a dict (``_models_tagged`` refuses it)."""
    known: tuple[type, ...] | None = cls.__dict__.get(_SCHEMA_CLASSES)
    if known is None:
        _nan_serializer(cls)  # builds a deferred model's schema
        named = {
            node["cls"]
            for node in _schema_nodes(cls.__pydantic_core_schema__)
            if node.get("type") in ("model", "dataclass") and isinstance(node.get("cls"), type)
        }
        known = (cls, *(c for c in named if c is not cls))
        setattr(cls, _SCHEMA_CLASSES, known)
    return known


def _holds_model(values: Iterable[Any], expected: tuple[type, ...] = ()) -> bool:
    """Whether a pydantic model that a walk must look at is among ``values`` or inside them
    (through dicts, lists, tuples, sets and the fields of the models it need not look at), found
    without building anything: most values hold none, and a look costs a fraction of the walk
    that then finds nothing.

    A model of none of the ``expected`` classes is one to look at, and a registered model is:
    so with ``()``, the default, any model is, registered or not (a message's ``metadata``
    whose dump must not leave out the fields at their defaults, ``_own_json`` and
    ``_event_json``). Given a model's ``_schema_classes``, a registered model or one of none of
    them (one in a place typed ``Any``, to refuse) is: only then is ``_models_tagged``'s walk,
    which copies the whole dump in Python, worth making (a model with a ``dict[str, Any]`` of
    plain data, a table of rows, is saved every pause: the look is a sixth of the save, the walk
    five times it)."""
    pending = list(values)
    while pending:
        item = pending.pop()
        cls = type(item)
        if cls is dict:
            pending.extend(item.values())
        elif cls is list or cls is tuple:
            pending.extend(item)
        elif cls is str or cls is int or cls is float or cls is bool or item is None:
            continue
        elif isinstance(item, BaseModel):
            if cls in _NAMES or not issubclass(cls, expected):
                return True
            pending.extend(item.__dict__.values())
            if item.__pydantic_extra__:  # ``extra="allow"``: written as an ``Any`` place's
                pending.extend(item.__pydantic_extra__.values())
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):  # a set: written as a list
            pending.extend(item)
    return False


def _models_tagged(
    value: Any, data: Any, depth: int, found: list[bool], expected: tuple[type, ...] | None
) -> Any:
    """``data``, the JSON dump of ``value``, written as ``_plain`` writes plain data (``_escaped``),
    with each registered model ``value`` holds below its top written as ``_plain`` writes it,
    tagged; ``found`` gets an item when there was one. pydantic writes a model in an ``Any``
    place as its bare fields, so it came back from a checkpoint as a dict; a place typed with
    its class took it back by validation alone, and takes the rebuilt model as well. A model
    of none of the ``expected`` classes (``_schema_classes``; None: any) that is not registered
    is refused, as one anywhere else is: it sits in a place typed ``Any``, and would come back
    as a dict.

    Walks ``value`` and its dump side by side, and takes a model for its tag only where the dump
    holds that model's own dump: a serializer of the outer model's that writes it otherwise (a
    ``field_serializer``, a ``model_serializer``) keeps what it wrote."""
    if depth >= MAX_DEPTH:
        return _escaped(data)
    if isinstance(value, BaseModel):
        if not isinstance(data, dict):
            return _escaped(data)
        fields = type(value).__pydantic_fields__
        known: Any = fields
        held: Callable[[str], Any] = value.__getattribute__
        extra = value.__pydantic_extra__
        if extra:  # ``extra="allow"``: its extras are dumped beside its fields
            known = {**extra, **fields}
            held = _field_or_extra(value, extra)
    elif isinstance(value, dict) and isinstance(data, dict):
        known, held = value, value.__getitem__
    elif (
        isinstance(value, (list, tuple, set, frozenset))  # a set: its dump, a list in its order
        and isinstance(data, list)
        and len(value) == len(data)
    ):
        return [
            _model_tagged(v, item, depth + 1, found, expected)
            for v, item in zip(value, data, strict=True)
        ]
    else:
        return _escaped(data)
    out = {}
    unknown = False
    for key, item in data.items():
        if key not in known:  # a serializer's own key, or a model key pydantic wrote as its text
            if known is value and not unknown:  # its keys looked at once (30,000 int keys...)
                unknown = True
                keyed = next((k for k in value if isinstance(k, BaseModel)), None)
                if keyed is not None:
                    raise _model_key(keyed)
            out[key] = _escaped(item)
            continue
        try:
            out[key] = _model_tagged(held(key), item, depth + 1, found, expected)
        except _Unstorable as exc:
            exc.keys.append(key)
            raise
    return {_TAG: "dict", "data": out} if _TAG in out else out


def _field_or_extra(value: BaseModel, extra: dict[str, Any]) -> Callable[[str], Any]:
    """How ``_models_tagged`` reads a model's field or extra by its name."""

    def held(name: str) -> Any:
        return extra[name] if name in extra else getattr(value, name)

    return held


def _model_tagged(
    value: Any, data: Any, depth: int, found: list[bool], expected: tuple[type, ...] | None
) -> Any:
    """One place of ``_models_tagged``'s walk: a registered model there, dumped as pydantic
    dumps it, is written tagged (and walked itself, by ``_plain``); an unregistered one of
    none of the ``expected`` classes, dumped so, is refused."""
    if isinstance(value, BaseModel):
        cls = type(value)
        if cls in _NAMES:
            if data == _json_dump(value, round_trip=True):
                found.append(True)
                return _plain(value, depth)
        elif (
            expected is not None
            and not issubclass(cls, expected)
            and data == _json_dump(value, round_trip=True)
        ):
            raise _Unstorable(
                f"{cls.__qualname__} is not registered for checkpoints (held where the model "
                "is typed Any, it would come back as a dict); call "
                "adk.register_type(" + cls.__qualname__ + ")"
            )
    return _models_tagged(value, data, depth, found, expected)


def _number(value: int | float) -> int | float:
    """``value`` if JSON can hold it: no NaN or infinity (not JSON; other readers refuse them), no
    int longer than ``_MAX_INT_DIGITS`` digits (Python refuses to parse it back). Checkpoints tag
    the floats instead (``_FLOAT``); an event's JSON refuses them with this."""
    if isinstance(value, float):
        if isfinite(value):
            return value
        raise _Unstorable(f"float {value!r} is not a JSON number; store None or a string instead")
    if _INT_FLOOR < value < _INT_LIMIT:
        return value
    raise _Unstorable(
        f"int longer than {_MAX_INT_DIGITS} digits cannot be stored in a checkpoint (JSON readers "
        "refuse it); store it as a string"
    )


def _plain_dict(value: dict[Any, Any], depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str and not isinstance(key, str):
            raise _Unstorable(f"dict keys must be strings, got {key!r}")
        try:
            out[key] = _plain(item, depth)
        except _Unstorable as exc:
            exc.keys.append(key)
            raise
    if _TAG in out:
        return {_TAG: "dict", "data": out}
    return out


def _namesake_hint(tag: object, reader: str = "this checkpoint") -> str:
    """For an unregistered ``tag`` (of ``reader``): the types registered under their default name
    (module.QualName) whose class name is the tag's but whose module is not. The same class
    imported under another module name (a file run as a script is ``__main__``, imported it is
    its module's name) saves one tag and looks for another."""
    if not isinstance(tag, str):
        return ""
    namesakes = sorted(
        known
        for known, model in _TYPES.items()
        if known == f"{model.__module__}.{model.__qualname__}"
        and tag.endswith(f".{model.__qualname__}")
    )
    if not namesakes:
        return ""
    shown = ", ".join(repr(known) for known in namesakes)
    return (
        f"; a class of that name is registered here as {shown}, the name its module gives it "
        "(a file run as a script is __main__): if it is the same class, register it with "
        "adk.register_type(Model, name=...) in every process that saves or reads it "
        f"(name={tag!r} reads {reader})"
    )


def from_json_value(value: Any) -> Any:
    """Inverse of ``to_json_value``; only registered types are rebuilt, by validation."""
    return _rebuild(value, 0)


_BIGGER = "saved under a bigger limit, which a pyadk of that limit reads"
"""Why a checkpoint over this pyadk's limits is ``"incompatible"``, not malformed: its words."""


def _over_depth() -> str:
    return f"{MAX_DEPTH} levels, this pyadk's MAX_DEPTH: {_BIGGER}"


def _too_deep() -> CheckpointError:
    """The refusal of values nested deeper than ``MAX_DEPTH``: ``"incompatible"``, not corrupt,
    as one saved under a bigger limit (another release's, a deployment that set it) is resumed
    by a pyadk of that limit, where a service answering ``"corrupt"`` would free its session."""
    return CheckpointError(
        f"holds values nested deeper than {_over_depth()}", reason="incompatible"
    )


def _rebuild(value: Any, depth: int) -> Any:
    if isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise _too_deep()
        return [_rebuild(v, depth + 1) for v in value]
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise _too_deep()
        tag = value.get(_TAG)
        if tag is None:
            return {k: _rebuild(v, depth + 1) for k, v in value.items()}
        data = value.get("data")
        if tag == "dict" and isinstance(data, dict):
            return {k: _rebuild(v, depth + 1) for k, v in data.items()}
        if tag == _FLOAT:
            if data not in ("nan", "inf", "-inf"):
                raise CheckpointError(
                    f"is malformed: {data!r} is not a tagged float", reason="corrupt"
                )
            return float(data)
        model = _TYPES.get(tag) if isinstance(tag, str) else None
        if model is None:
            raise CheckpointError(
                f"refers to unregistered type {tag!r}; register it with "
                f"adk.register_type before resuming{_namesake_hint(tag)}",
                # The code that registers it resumes it; a tag no name (or a "dict" tag whose
                # data is none) no pyadk writes.
                reason="incompatible" if isinstance(tag, str) and tag != "dict" else "corrupt",
            )
        if value.get(_TAGGED) is True:  # its data holds tagged floats (``_tag_floats``)
            data = _rebuild(data, depth + 1)
        if model in _OWN and isinstance(data, dict) and "parts" in data:
            _check_parts(data["parts"])
        try:
            # Names and aliases both: values are saved by field name, and checkpoints written by
            # alias (earlier versions, briefly) must still load.
            return model.model_validate(data, by_alias=True, by_name=True)
        except ValidationError as exc:
            # The model's fields changed since the pause (or its validator): the code that wrote
            # it reads it.
            raise CheckpointError(
                f"holds an invalid value of type {tag!r}: {exc}", reason="incompatible"
            ) from exc
        except Exception as exc:
            if not _validator_rejected(exc):
                raise
            # The model's fields changed since the pause (or its validator): the code that wrote
            # it reads it.
            raise CheckpointError(
                f"holds an invalid value of type {tag!r}: {exc}", reason="incompatible"
            ) from exc
    return value


def _validator_rejected(exc: Exception) -> bool:
    """Whether ``exc``, out of a model's validation, is a validator's ``adk.ToolError``: the
    rejection a Pydantic AI port's validators raise as ``ModelRetry`` (docs/pydantic_ai.md),
    which pydantic passes through unwrapped where it wraps a ``ValueError``. A value it rejects
    is as invalid as one failing validation: read back, it fails as that does, not as a bare
    ``ToolError`` (``adk._event_json`` too). So is a validator's ``TypeError`` or ``KeyError``,
    which pydantic does not wrap either (a checkpoint's own values raising them are malformed,
    ``_points._MALFORMED``; a tool's argument model and a saved action event refuse them so)."""
    from ..tools.base import ToolError  # here: adk.tools.base imports this module

    return isinstance(exc, (ToolError, TypeError, KeyError))


def _check_parts(parts: Any) -> None:
    """Refuse a stored message's part whose base64 text holds more than ``MAX_PART_BYTES``, as a
    save refuses it, before it is decoded: a checkpoint no pyadk of this limit writes (a hostile
    one, its checksum matching, or one saved under a bigger limit) would otherwise make a part of
    any size in memory and send it to the model."""
    if not isinstance(parts, list):
        return  # not a message's parts: its validation says so
    limit = 4 * -(-MAX_PART_BYTES // 3)  # the base64 length of MAX_PART_BYTES bytes
    for index, part in enumerate(parts):
        data = part.get("data") if isinstance(part, dict) else None
        if isinstance(data, str) and len(data) > limit:
            kind = part.get("type")
            size = len(data) // 4 * 3 - data[-2:].count("=")  # what it decodes to, if base64
            raise CheckpointError(
                f"holds a part over this pyadk's limit: part {index} of a message "
                f"({kind if isinstance(kind, str) else 'part'}) holds {size} bytes, over "
                f"MAX_PART_BYTES ({MAX_PART_BYTES}) a checkpoint holds: {_BIGGER}",
                # Not corrupt: a pyadk of the bigger limit it was saved under resumes it.
                reason="incompatible",
            )


def encode_checkpoint(body: dict[str, Any]) -> bytes:
    """Header line + JSON body. ``body`` must already be JSON data (see ``to_json_value``)."""
    import hashlib  # deferred to the first pause: see the module docstring
    import json

    try:
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:  # NaN or infinity (tagged now) or an over-long int inside a model's dump
        body = _tag_floats(body)
        try:
            text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except ValueError as exc:
            raise CheckpointError(
                _body_unjson(body) or f"cannot be stored: {exc}", reason="unstorable"
            ) from None
    try:
        payload = text.encode()
        escape = False
    except UnicodeEncodeError:
        # A lone surrogate ("\ud800", which a model's JSON escape can produce) has no UTF-8 form:
        # this document is written ASCII-escaped instead (``\ud800``), which loads back the same
        # text and keeps the checkpoint valid UTF-8. Rare, so the common save pays nothing.
        text = json.dumps(body, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
        payload = text.encode()
        escape = True
    version = VERSION if _RUN_PATHS in body else 1  # the oldest that reads it: see VERSION
    header = {"format": FORMAT, "version": version, "sha256": hashlib.sha256(payload).hexdigest()}
    if "points" in body:  # a paused run's: its summary for listings (see the module docstring)
        summary = {key: body[key] for key in _SUMMARY if key in body}
        # Cannot fail: these values are the body's, which was just written (escaped as it was).
        brief = json.dumps(summary, separators=(",", ":"), ensure_ascii=escape, allow_nan=False)
        header["size"] = len(payload)
        header["summary"] = brief
        header["summary_sha256"] = hashlib.sha256(brief.encode()).hexdigest()
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + payload


def _read_summary(head: bytes, size: int) -> dict[str, Any] | None:
    """The summary a checkpoint's header carries (its body's ``_SUMMARY`` keys), given the
    checkpoint's first bytes (``head``, the header line whole) and its length in bytes; None
    when there is none to trust (an older pyadk's checkpoint, a header cut off in ``head``, a
    length or a summary checksum that does not match): the caller then reads it whole, which
    reports what is wrong. The body is not read, so a body damaged without changing its length
    goes unnoticed here; a resume, which reads it, refuses it."""
    import hashlib  # deferred to the first listing: see the module docstring
    import json

    line, newline, _ = head.partition(b"\n")
    if not newline:
        return None
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):  # a line nested past the parser's reach: not pyadk's
        return None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        return None
    version, length = header.get("version"), header.get("size")
    text, digest = header.get("summary"), header.get("summary_sha256")
    if (
        type(version) is not int
        or not _FIRST <= version <= VERSION
        or type(length) is not int
        or len(line) + 1 + length != size
        or not isinstance(text, str)
        or not isinstance(digest, str)
    ):
        return None
    try:
        if hashlib.sha256(text.encode()).hexdigest() != digest:
            return None
        summary = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return summary if isinstance(summary, dict) else None


def _tag_floats(value: Any) -> Any:
    """``value`` (a checkpoint body) with the NaN and infinities inside models' dumps tagged as
    ``_plain`` tags them elsewhere; a model's data that held one is marked ``_TAGGED`` so that
    loading rebuilds its tags before validation (the dumps of the others load as they are, unwalked).
    A model's data marked already (its nested registered models tagged, ``_models_tagged``) is
    plain data but for the dumps of those: walked on, not escaped again, which would hide their
    tags. Only called when a save met such a float, so ordinary saves walk no dump."""
    if isinstance(value, list):
        return [_tag_floats(item) for item in value]
    if not isinstance(value, dict):
        return value
    tag = value.get(_TAG)
    if not isinstance(tag, str) or tag == "dict":
        return {key: _tag_floats(item) for key, item in value.items()}
    data = value.get("data")
    if value.get(_TAGGED) is True:  # written as plain data already, its models tagged (_plain)
        return {_TAG: tag, "data": _tag_floats(data), _TAGGED: True}
    if tag == _FLOAT or nonfinite_at(data) is None:
        return value
    return {_TAG: tag, "data": _escaped(data), _TAGGED: True}


def _escaped(value: Any) -> Any:
    """A model's dump as ``_plain`` writes plain data: NaN and infinities tagged, and a dict with
    a key ``_TAG`` wrapped so that ``_rebuild`` does not take it for a tag."""
    if isinstance(value, float) and not isfinite(value):
        return {_TAG: _FLOAT, "data": repr(value)}
    if isinstance(value, list):
        return [_escaped(item) for item in value]
    if isinstance(value, dict):
        out = {key: _escaped(item) for key, item in value.items()}
        return {_TAG: "dict", "data": out} if _TAG in out else out
    return value


def _body_unjson(body: dict[str, Any]) -> str | None:
    """``_unjson`` of a checkpoint body, naming a component's saved state as the pause's
    ``to_json_value`` does (``_state_where``), not by the body's keys."""
    states = body.get("states")
    if isinstance(states, dict):
        for address, slots in states.items():
            for slot, state in slots.items() if isinstance(slots, dict) else ():
                found = _unjson(state, _state_where(address, slot))
                if found is not None:
                    return found
    return _unjson({key: value for key, value in body.items() if key != "states"}, "")


def _unjson(value: Any, path: str) -> str | None:
    """Where in ``value`` (from ``path``) the first number that JSON cannot hold is, and why (see
    ``_number``); only called when a save failed on one, inside a model's dump."""
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        try:
            _number(value)
        except _Unstorable as exc:
            return f"{path}: {exc.reason}"
        return None
    if isinstance(value, dict):
        if isinstance(value.get(_TAG), str):  # a tagged model or dict: the path goes on inside
            return _unjson(value.get("data"), path)
        for key, item in value.items():
            found = _unjson(item, _joined(path, str(key)))
            if found is not None:
                return found
    elif isinstance(value, list):
        for item in value:
            found = _unjson(item, path)
            if found is not None:
                return found
    return None


def _other_version(version: object) -> str:
    """What to do with a checkpoint of another format ``version`` (the refusal's ending): a newer
    pyadk's waits for that pyadk; an older one's, of a format this pyadk no longer reads, is
    resumed by a release that reads it, such as the one that wrote it (docs/interrupts.md,
    "Upgrading pyadk while runs are paused: the format's versioning policy")."""
    if type(version) is not int or version < 1:  # no pyadk wrote it (1 since the first)
        return ""
    if version > VERSION:
        return (
            " (a newer pyadk wrote it: resume it with that version or a later one; it is "
            "kept as it was)"
        )
    return (
        f" (an older pyadk wrote it, in a format this one no longer reads: resume it with a "
        f"pyadk that reads version {version}, such as the one that paused it, for instance by "
        "keeping a worker of that release for the runs paused before the upgrade; it is kept "
        "as it was)"
    )


def decode_checkpoint(data: bytes, checkpoint_id: str = "") -> dict[str, Any]:
    """Parse and verify checkpoint bytes; every failure is a ``CheckpointError`` saying which."""
    import hashlib  # deferred to the first resume: see the module docstring
    import json

    label = f"checkpoint {checkpoint_id!r}" if checkpoint_id else "checkpoint"

    def fail(why: str, reason: _Reason = "corrupt") -> CheckpointError:
        return CheckpointError(f"{label} {why}", reason=reason)

    head, newline, payload = bytes(data).partition(b"\n")
    try:
        header = json.loads(head) if newline else None
    except (ValueError, RecursionError):  # nested past the parser's reach: no header of pyadk's
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise fail("is not a pyadk checkpoint or is corrupt (unreadable header)")
    version = header.get("version")
    # Not True or 1.0 either: a writer's mistake.
    if type(version) is not int or not _FIRST <= version <= VERSION:
        reads = "" if _FIRST == VERSION else f" and earlier ones back to {_FIRST}"
        raise fail(
            f"was written in checkpoint format version {version!r}; "
            f"this pyadk reads version {VERSION}{reads}{_other_version(version)}",
            # A version pyadk writes (an int from 1, the first release's): a pyadk of that
            # version reads it; any other value (True, 1.0, text, 0, a negative) is no pyadk's,
            # so nothing ever reads it.
            "other_version" if type(version) is int and version >= 1 else "corrupt",
        )
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise fail("is corrupt or was modified: its checksum does not match (truncated or edited)")
    try:
        body = json.loads(payload)
    except RecursionError as exc:  # nested far deeper than MAX_DEPTH: the parser gave up first
        # Incompatible, as past MAX_DEPTH is (``_too_deep``): a pyadk of a bigger limit (and the
        # recursion limit it needs) wrote and resumes it.
        raise fail(f"holds values nested deeper than {_over_depth()}", "incompatible") from exc
    except ValueError as exc:
        raise fail(f"is corrupt: {exc}") from exc
    if not isinstance(body, dict):
        raise fail("is corrupt: body is not an object")
    return body
