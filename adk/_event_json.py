"""Events as client-facing JSON data: the pieces ``AgentEvent.to_dict``/``from_dict`` are made of.

The format is for clients (a browser reading SSE, a service reading NDJSON), so it carries no
internal tags: a registered pydantic model is its fields, and the registered name travels next to it
(``custom_type``, ``info_type``) only where ``from_dict`` rebuilds it. Values follow the rule
checkpoints follow (JSON values, or pydantic models registered with ``adk.register_type``), and use
the checkpoint codec's registry and number checks, except that NaN and infinities, which a
checkpoint keeps tagged, are refused here: standard JSON has no number for them, a client's
``JSON.parse`` refuses pydantic's ``NaN``, and a string or tag would be taken for data; the walk is its own because the codec tags
models, and a mode switch in the codec's walk would cost every checkpoint save.

Nothing here runs unless a program calls ``to_dict``/``from_dict``: runs never do.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from .checkpoint.codec import (
    MAX_DEPTH,
    STRUCTURED,
    _holds_model,
    _json_dump,
    _named_type,
    _namesake_hint,
    _number,
    _type_name,
    _Unstorable,
    _unwritable_in,
    _validator_rejected,
    dropped_structured,
    warns_of,
)
from .interrupts import InterruptInfo, InterruptPoint
from .messages import Message

_SCALARS = frozenset({str, bool, type(None)})


def dump_value(value: Any, where: str) -> tuple[Any, str | None]:
    """``value`` as JSON data and, if it is a registered model, its registered name (so
    ``load_value`` rebuilds it); a value JSON cannot hold is a ``TypeError`` naming ``where`` and
    the dict keys leading to it."""
    name = None
    if isinstance(value, BaseModel):
        name = _type_name(type(value))
    try:
        return _data(value, 0), name
    except _Unstorable as exc:
        path = "".join(f".{key}" for key in reversed(exc.keys))
        raise TypeError(f"event {where}{path}: {exc.reason}") from None


def _data(value: Any, depth: int) -> Any:
    cls = type(value)
    # Tuples, not `str | bool` unions, which would be built for every value walked.
    if cls in _SCALARS or isinstance(value, (str, bool)):
        return value
    if isinstance(value, (int, float)):
        return _number(value)
    if depth >= MAX_DEPTH:
        raise _Unstorable(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, (list, tuple)):
        return [_data(item, depth + 1) for item in value]
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Unstorable(f"dict keys must be strings, got {key!r}")
            try:
                out[key] = _data(item, depth + 1)
            except _Unstorable as exc:
                exc.keys.append(key)
                raise
        return out
    if isinstance(value, BaseModel):
        if _type_name(cls) is None:  # the rule checkpoints follow: one rule for every value
            raise _Unstorable(
                f"{cls.__qualname__} is not registered; call adk.register_type({cls.__qualname__})"
            )
        # By field name, like checkpoints (``round_trip``: ``Json[...]`` fields stay text); the
        # dump is walked too, for the NaN or over-long int a model field may hold (kept as NaN by
        # ``_json_dump``, where pydantic's JSON mode makes one in an ``Any`` field ``None``).
        return _data(_json_dump(value, round_trip=True), depth)
    raise _Unstorable(
        f"{cls.__qualname__} is not JSON data; use JSON values or pydantic models registered "
        "with adk.register_type"
    )


def load_value(data: Any, type_name: Any, where: str) -> Any:
    """Inverse of ``dump_value``: ``data`` as it is, or rebuilt as the registered ``type_name``.
    ``data`` is held to what ``dump_value`` makes: parsed JSON may hold NaN, infinities (Python's
    ``json.loads`` takes them) or any depth, which would fail only later, where the event is sent
    on or saved in a checkpoint."""
    try:
        _data(data, 0)
    except _Unstorable as exc:
        path = "".join(f".{key}" for key in reversed(exc.keys))
        raise ValueError(f"event {where}{path}: {exc.reason}") from None
    if type_name is None:
        return data
    model = _named_type(type_name) if isinstance(type_name, str) else None
    if model is None:
        raise ValueError(
            f"event {where}: type {type_name!r} is not registered; register it with "
            f"adk.register_type before from_dict{_namesake_hint(type_name, 'this event')}"
        )
    try:
        return model.model_validate(data, by_alias=True, by_name=True)
    except ValidationError as exc:
        raise ValueError(f"event {where}: not a valid {type_name!r}: {exc}") from exc
    except Exception as exc:
        if not _validator_rejected(exc):
            raise
        raise ValueError(f"event {where}: not a valid {type_name!r}: {exc}") from exc


def dump_message(message: Message, where: str) -> dict[str, Any]:
    """A message's fields (``None`` ones left out; ``metadata`` checked like custom data). A tool
    message's ``structured`` value (a tool's ``ToolResult.structured``) that JSON cannot hold is
    written as None, with a warning (``dropped_structured``): the event is sent with its text,
    as the model read it, not refused for a value beside it."""
    try:
        return _message_data(message, where, None)
    except TypeError as exc:
        if message.metadata.get(STRUCTURED) is not None:
            return _message_data(dropped_structured(message, exc, _WHERE), where)
        if _locates(message):
            raise
    return _message_data(message, where)  # fails again, naming where (its value is None)


def _locates(message: Message) -> bool:
    """Whether a failed dump of ``message`` looks for where: a tool's value is walked for it
    only for the warning (``warns_of``). Asked on a failure only: not per event."""
    return STRUCTURED not in message.metadata or warns_of(message, _WHERE)


_WHERE = "an event's JSON"  # what ``dropped_structured`` says cannot hold a tool's value


def _message_data(message: Message, where: str, locate: bool | None = True) -> dict[str, Any]:
    """``locate``: whether a failure is looked for, None to ask ``_locates`` (on a failure)."""
    try:
        dumped = _json_dump(message, exclude_none=True)  # NaN in metadata kept, then refused
        if message.metadata and _holds_model([message.metadata]):
            # ``exclude_none`` reached into the models there (a tool's structured result) and
            # left out their None fields, which a reader of the event then missed: the metadata
            # dumped whole (only when it holds a model: most messages' holds none).
            dumped["metadata"] = _json_dump(message, include={"metadata"})["metadata"]
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        # Metadata holding what pydantic cannot write: an object of its own, bytes that are not
        # UTF-8, a frozenset key, a dict holding itself (a bare ValueError). Its words name no
        # place; the codec's walk finds it (only on this failure) and the error names it.
        if locate is None:
            locate = _locates(message)
        found = _unwritable_in(message.metadata, exc, into="written as JSON") if locate else None
        if found is None:
            raise TypeError(f"event {where}: {exc}") from None
        path = "".join(f".{key}" for key in reversed(found.keys))
        raise TypeError(f"event {where}.metadata{path}: {found.reason}") from None
    data, _ = dump_value(dumped, where)
    result: dict[str, Any] = data
    return result


def load_message(data: Any, where: str) -> Message:
    try:
        return Message.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"event {where}: not a valid message: {exc}") from exc


def dump_interrupt(info: InterruptInfo) -> dict[str, Any]:
    """The pause's JSON; an info it cannot hold (NaN in a tool's arguments) is a ``TypeError``
    that also names the checkpoint the pause was saved in (a checkpoint keeps NaN): a service
    that logs it can still resume the pause its client was never sent."""
    try:
        return _interrupt_data(info)
    except TypeError as exc:
        if not info.checkpoint_id:
            raise
        raise TypeError(
            f"{exc} (the pause is saved as checkpoint {info.checkpoint_id!r})"
        ) from None


def _interrupt_data(info: InterruptInfo) -> dict[str, Any]:
    points = []
    for point in info.points:
        data, name = dump_value(point.info, f"action.interrupted.points[{point.id!r}].info")
        entry: dict[str, Any] = {"id": point.id, "address": list(point.address), "info": data}
        if name is not None:
            entry["info_type"] = name
        points.append(entry)
    return {"checkpoint_id": info.checkpoint_id, "points": points}


def load_interrupt(data: Any) -> InterruptInfo:
    where = "action.interrupted"
    fields = checked(data, where, {"checkpoint_id", "points"})
    points = fields.get("points", [])
    if not isinstance(points, list):
        raise ValueError(f"event {where}.points: expected a list, got {type(points).__name__}")
    loaded = []
    for index, point in enumerate(points):
        at = f"{where}.points[{index}]"
        entry = checked(point, at, {"id", "address", "info", "info_type"})
        info = load_value(entry.get("info"), entry.get("info_type"), f"{at}.info")
        try:
            loaded.append(
                InterruptPoint(id=entry.get("id"), address=entry.get("address"), info=info)
            )
        except ValidationError as exc:
            raise ValueError(f"event {at}: not a valid interrupt point: {exc}") from exc
    try:
        return InterruptInfo(checkpoint_id=fields.get("checkpoint_id", ""), points=loaded)
    except ValidationError as exc:
        raise ValueError(f"event {where}: not valid: {exc}") from exc


def check_custom_type(fields: dict[str, Any], where: str) -> None:
    """A ``custom_type`` comes with the custom value it names (it would be silently dropped)."""
    if "custom_type" in fields and "custom" not in fields:
        raise ValueError(f"event {where}.custom_type: without a custom value")


def checked(data: Any, where: str, keys: set[str]) -> dict[str, Any]:
    """``data`` if it is an object with no key outside ``keys`` (a misspelt key is an error, not
    a field silently left at its default)."""
    if not isinstance(data, dict):
        raise ValueError(f"event {where or 'data'}: expected an object, got {type(data).__name__}")
    unknown = sorted(str(key) for key in data if key not in keys)
    if unknown:
        raise ValueError(f"event {where or 'data'}: unknown field(s) {', '.join(unknown)}")
    return data
