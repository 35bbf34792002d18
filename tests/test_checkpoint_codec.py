"""The checkpoint codec: versioned, checksummed JSON that never runs code on load.

Covers value encoding (JSON values, registered pydantic models, clear errors for anything else),
the header (format, version, checksum), damaged checkpoints (edited, truncated, from another
version, not a checkpoint at all), and hostile ones: checkpoints naming dangerous or unregistered
types, or carrying pickle payloads, must fail with ``CheckpointError`` without executing anything —
proved with sentinel files the payloads would create.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pickle
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import VERSION as PYDANTIC_VERSION
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Json,
    RootModel,
    SecretStr,
    field_serializer,
    field_validator,
    model_validator,
)
from test_interrupts import Asker, DictStore, collect, pause_of

import adk
from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    CheckpointError,
    Message,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    Session,
    ToolContext,
)
from adk._json_where import unwritable_at
from adk.actions import ActionAgent, ActionContext, Event, InputEvent, OutputEvent, action
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore, codec
from adk.checkpoint.codec import (
    FORMAT,
    MAX_DEPTH,
    VERSION,
    decode_checkpoint,
    encode_checkpoint,
    from_json_value,
    register_type,
    to_json_value,
)
from adk.execution import LocalExecutionEnvironment
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


@register_type
class Point(BaseModel):
    x: int
    y: int = 0
    label: str = ""


@register_type
class Shape(BaseModel):
    points: list[Point]
    tags: dict[str, str] = {}


def _touch(path: str) -> None:
    Path(path).touch()


class Touch(BaseModel):
    """Never registered: a model whose validation has a side effect, standing in for any class an
    attacker could name in a checkpoint."""

    path: str

    @model_validator(mode="after")
    def _side_effect(self) -> Touch:
        _touch(self.path)
        return self


class Boom:
    """Pickling this is harmless; unpickling it would create ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_touch, (self.path,))


def with_header(payload: bytes, **header: Any) -> bytes:
    """Checkpoint bytes around ``payload`` with a correct checksum (what a deliberate tamperer or a
    buggy writer produces); ``header`` overrides fields."""
    fields = {"format": FORMAT, "version": VERSION, "sha256": hashlib.sha256(payload).hexdigest()}
    fields.update(header)
    return json.dumps(fields).encode() + b"\n" + payload


# -- values -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -12,
        2**70,
        1.5,
        "",
        'ünïcødé 🙂 \n\t"quotes"',
        [],
        {},
        [1, "a", None, [2, [3]]],
        {"a": {"b": [1, {"c": None}]}},
        {"__adk_type__": "adk.Message", "data": {"role": "user"}},  # user data, not a type tag
        {"__adk_type__": "dict", "data": 5},
        {"nested": {"__adk_type__": "x"}},
    ],
)
def test_json_values_round_trip_exactly(value: Any) -> None:
    encoded = to_json_value(value)
    assert json.loads(json.dumps(encoded)) == encoded
    assert from_json_value(json.loads(json.dumps(encoded))) == value


def test_registered_models_round_trip_with_a_type_tag() -> None:
    shape = Shape(points=[Point(x=1), Point(x=2, y=3, label="b")], tags={"k": "v"})
    value = {"shape": shape, "list": [Point(x=9)], "message": Message.user("hi")}

    encoded = to_json_value(value)

    assert encoded["shape"]["__adk_type__"] == f"{__name__}.Shape"
    assert encoded["message"]["__adk_type__"] == "adk.Message"
    decoded = from_json_value(json.loads(json.dumps(encoded)))
    assert decoded == value
    assert isinstance(decoded["shape"], Shape) and isinstance(decoded["list"][0], Point)


def test_tuples_come_back_as_lists() -> None:
    assert from_json_value(to_json_value({"t": (1, (2, 3))})) == {"t": [1, [2, 3]]}


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({1: "a"}, "dict keys must be strings, got 1"),
        ({"ok": {None: 1}}, "dict keys must be strings"),
        ({1, 2}, "set cannot be stored in a checkpoint"),
        (b"raw", "bytes cannot be stored in a checkpoint"),
        (object(), "object cannot be stored in a checkpoint"),
        ({"deep": [Touch.model_construct(path="x")]}, "Touch is not registered for checkpoints"),
    ],
)
def test_values_that_cannot_be_stored_are_clear_errors(value: Any, problem: str) -> None:
    with pytest.raises(CheckpointError, match="saved state") as caught:
        to_json_value(value, "saved state")
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": {"b": {1, 2}}}, "session.a.b: set cannot be stored"),
        ({"a": [{"b": [b"x"]}]}, "session.a.b: bytes cannot be stored"),  # lists add no step
        ({"a": {"b": {3: "x"}}}, "session.a.b: dict keys must be strings, got 3"),
        ({"a": (object(),)}, "session.a: object cannot be stored"),
        ({1: "x"}, "session: dict keys must be strings, got 1"),
    ],
)
def test_errors_say_where_in_the_value(value: Any, message: str) -> None:
    with pytest.raises(CheckpointError) as caught:
        to_json_value(value, "session")
    assert str(caught.value).startswith(message)


def test_subclasses_of_json_types_are_stored_as_their_base() -> None:
    class Name(str):
        pass

    class Ordered(dict[str, Any]):
        pass

    value = {"name": Name("ann"), "nested": Ordered(x=[1, 2.5, True, None])}
    assert json.loads(json.dumps(to_json_value(value))) == {
        "name": "ann",
        "nested": {"x": [1, 2.5, True, None]},
    }


def test_unregistered_model_error_names_the_fix() -> None:
    with pytest.raises(CheckpointError, match=r"call adk\.register_type\(Touch\)"):
        to_json_value(Touch.model_construct(path="x"))


@register_type
class Reviewed(BaseModel):
    verdict: str

    @field_validator("verdict")
    @classmethod
    def approved(cls, verdict: str) -> str:
        if verdict != "approved":  # a validator made stricter since the save, say
            raise _REVIEW_REFUSAL[0]("the verdict must be approved")
        return verdict


_REVIEW_REFUSAL: list[type[Exception]] = [adk.ToolError]  # what Reviewed's validator raises


@pytest.mark.parametrize("refusal", [adk.ToolError, TypeError, KeyError])
def test_a_saved_model_its_validator_rejects_with_a_tool_error_is_a_checkpoint_error(
    refusal: type[Exception],
) -> None:
    # pydantic passes an adk.ToolError (the ModelRetry of a Pydantic AI port's validators) through
    # unwrapped: loading the value must still fail as any value that does not validate does. So
    # does it a TypeError or a KeyError (review rv12: they escaped from_json_value bare).
    saved = to_json_value({"v": Reviewed(verdict="approved")})
    saved["v"]["data"]["verdict"] = "no"
    _REVIEW_REFUSAL[0] = refusal
    try:
        with pytest.raises(CheckpointError, match=r"invalid value of type .*the verdict must be"):
            from_json_value(json.loads(json.dumps(saved)))
    finally:
        _REVIEW_REFUSAL[0] = adk.ToolError


def test_register_type_rules() -> None:
    class Local(BaseModel):
        a: int = 1

    assert register_type(Local, name="tests.codec.Local") is Local
    assert register_type(Local, name="tests.codec.Local") is Local  # idempotent
    assert to_json_value(Local(a=2)) == {"__adk_type__": "tests.codec.Local", "data": {"a": 2}}

    class Other(BaseModel):
        a: int = 1

    with pytest.raises(ValueError, match="already registered"):
        register_type(Other, name="tests.codec.Local")
    with pytest.raises(TypeError, match="pydantic model class"):
        register_type(dict)  # type: ignore[type-var]
    assert adk.register_type is register_type


# -- user models: stored whole, by alias -----------------------------------------------------------


class Card(BaseModel):
    kind: Literal["card"] = "card"
    last4: str


class Bank(BaseModel):
    kind: Literal["bank"] = "bank"
    iban: str


@register_type
class Payment(BaseModel):
    """A camelCase API model with a discriminated union whose tags are defaults, JSON text, and
    aliases of every kind (validation reads none of a serialization alias)."""

    amount_eur: int = Field(alias="amountEur")
    method: Annotated[Card | Bank, Field(discriminator="kind")]
    approved: bool = False
    raw: Json[dict[str, int]] = Field(default='{"n": 1}', validate_default=True)
    user_id: int = Field(default=0, serialization_alias="userId")
    ref: str = Field(default="", validation_alias="reference")


def test_models_with_aliases_unions_and_json_fields_load_back() -> None:
    payment = Payment(
        amountEur=10, method=Bank(iban="DE00"), raw='{"n": 2}', user_id=7, reference="r-1"
    )

    data = encode_checkpoint({"session": to_json_value({"p": payment}, "session")})

    assert from_json_value(decode_checkpoint(data)["session"]) == {"p": payment}


async def test_a_paused_run_with_such_a_model_resumes() -> None:
    class Pay(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                ctx.session["payment"] = Payment(amountEur=10, method=Card(last4="4242"))
                yield ctx.interrupt("approve?")
                return
            payment = ctx.session["payment"]
            yield AgentEvent.of(f"paid {payment.amount_eur} by {payment.method.kind}")

    runner = Runner(Pay("pay"))
    paused = await runner.invoke("go")
    assert paused.checkpoint_id is not None
    assert (await runner.invoke_resume(paused.checkpoint_id, True)).text == "paid 10 by card"


@register_type
class Account(BaseModel):
    """A model that keeps its API key out of its dumps (logs, API answers)."""

    owner: str
    api_key: str = Field(exclude=True)
    limit: float = Field(default=1.0, exclude=True)


async def test_fields_a_model_leaves_out_of_its_dumps_are_kept_across_a_pause() -> None:
    """A ``Field(exclude=True)`` field was left out of the checkpoint as out of any dump: one
    without a default made the checkpoint fail to load for ever, one with a default came back
    as the default."""
    saved = to_json_value(Account(owner="ann", api_key="k-1", limit=float("inf")))
    assert Account(owner="ann", api_key="k-1").model_dump() == {"owner": "ann"}  # dumps: still out

    class Hold(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                ctx.session["account"] = Account(owner="ann", api_key="k-1", limit=5.0)
                yield ctx.interrupt("go on?")
                return
            account = ctx.session["account"]
            yield AgentEvent.of(f"{account.owner} {account.api_key} {account.limit}")

    runner = Runner(Hold("hold"))
    paused = await runner.invoke("go")
    assert paused.checkpoint_id is not None
    assert (await runner.invoke_resume(paused.checkpoint_id, True)).text == "ann k-1 5.0"
    assert from_json_value(decode_checkpoint(encode_checkpoint({"v": saved}))["v"]) == Account(
        owner="ann", api_key="k-1", limit=float("inf")
    )


def test_fields_equal_to_their_default_are_stored() -> None:
    """A later release may change a default; the saved value must not change with it."""

    class Before(BaseModel):
        amount: int
        approved: bool = False

    class After(BaseModel):
        amount: int
        approved: bool = True

    register_type(Before, name="tests.codec.ApprovalBefore")
    register_type(After, name="tests.codec.ApprovalAfter")
    saved = to_json_value(Before(amount=10_000))
    assert saved["data"] == {"amount": 10_000, "approved": False}

    saved["__adk_type__"] = "tests.codec.ApprovalAfter"  # the same checkpoint, read by the new code
    assert from_json_value(saved) == After(amount=10_000, approved=False)


def test_adk_messages_are_still_stored_without_their_defaults() -> None:
    """A history holds one per message: its empty fields stay out (adk keeps them stable)."""
    encoded = to_json_value(Message.user("hi"))
    assert encoded == {"__adk_type__": "adk.Message", "data": {"role": "user", "content": "hi"}}


@pytest.mark.skipif(
    tuple(int(part) for part in PYDANTIC_VERSION.split(".")[:2]) < (2, 11),
    reason="validating by field name needs pydantic 2.11",
)
def test_models_saved_by_field_name_before_still_load() -> None:
    """Checkpoints written before models were stored by alias hold field names."""
    old = {
        "__adk_type__": f"{__name__}.Payment",
        "data": {"amount_eur": 7, "method": {"kind": "card", "last4": "1111"}},
    }
    assert from_json_value(old) == Payment(amountEur=7, method=Card(last4="1111"))


# -- numbers JSON cannot hold ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": 10**4300}, "session.a: int longer than 4300 digits"),
        ({"a": {"b": [-(10**5000)]}}, "session.a.b: int longer than 4300 digits"),
    ],
)
def test_numbers_json_cannot_hold_are_refused_with_their_place(value: Any, message: str) -> None:
    with pytest.raises(CheckpointError) as caught:
        to_json_value(value, "session")
    assert str(caught.value).startswith(message)


def test_the_largest_numbers_json_holds_round_trip() -> None:
    value = {"big": 10**4300 - 1, "small": -(10**4300) + 1, "float": 1.7976931348623157e308}
    data = encode_checkpoint({"session": to_json_value(value)})
    assert from_json_value(decode_checkpoint(data)["session"]) == value


@register_type
class Reading(BaseModel):
    value: float
    count: int = 0
    extra: dict[str, Any] = {}
    note: Any = None


@register_type
class Bounds(BaseModel):
    """Floats in a tuple and a set: its JSON dump holds them in lists, which the walk for NaN
    (``adk._nonfinite.nonfinite_at``) reads as it reads a python dump's tuples and sets."""

    pair: tuple[float, float]
    seen: frozenset[float]


def test_an_int_json_cannot_hold_inside_a_model_is_refused() -> None:
    with pytest.raises(CheckpointError) as caught:
        encode_checkpoint({"session": to_json_value({"r": Reading(value=1.0, count=10**5000)})})
    assert str(caught.value).startswith("session.r.count: int longer than 4300 digits")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            Reading(value=1.0, extra={"by": {frozenset({"a"}): 1}}),
            "session.r.extra.by: dict key frozenset({'a'}) cannot be written as JSON",
        ),
        (
            Reading(value=1.0, note=[{"k": {frozenset({1}): 1}}]),
            "session.r.note.k: dict key frozenset({1}) cannot be written as JSON",
        ),
        (Reading(value=1.0, note=object()), "session.r.note: object cannot be stored"),
        (Reading(value=1.0, note=b"\xff"), "session.r.note: bytes that are not UTF-8 text"),
        (
            Message(role="user", content="x", metadata={"m": {frozenset({1}): 1}}),
            "session.r.metadata.m: dict key frozenset({1}) cannot be written as JSON",
        ),
    ],
)
def test_what_a_registered_model_holds_that_json_cannot_write_is_named_where(
    value: BaseModel, message: str
) -> None:
    """A plain dict's frozenset key was a ``CheckpointError`` naming where; one inside a
    registered model (and a message's metadata) let pydantic's bare ``TypeError`` ("`frozenset`
    not valid as object key") out of the save, and an object of its own or bytes not UTF-8 in
    a registered model's ``Any`` field pydantic's words naming no place."""
    with pytest.raises(CheckpointError) as caught:
        to_json_value({"r": value}, "session")
    assert str(caught.value).startswith(message), str(caught.value)


def _holding_itself() -> dict[str, Any]:
    looped: dict[str, Any] = {"ok": 1}
    looped["again"] = looped
    return looped


@pytest.mark.parametrize(
    ("value", "where"),
    [
        (Reading(value=1.0, note=_holding_itself()), "session.r.note.again: it holds itself"),
        (
            Message(role="user", content="x", metadata={"m": _holding_itself()}),
            "session.r.metadata.m.again: it holds itself",
        ),
    ],
    ids=["model", "message-metadata"],
)
def test_what_holds_itself_inside_a_model_is_named_where_it_loops(value: Any, where: str) -> None:
    """A dict holding itself inside a registered model was named 200 keys deep
    (``session.r.note.again.again...``: the walk for where pydantic failed had no guard), and
    inside a message's metadata was pydantic's bare ``ValueError`` ("Circular reference
    detected"), naming no place, which a pause read as its error."""
    with pytest.raises(CheckpointError) as caught:
        to_json_value({"r": value}, "session")
    assert str(caught.value).startswith(where), str(caught.value)
    assert "again.again" not in str(caught.value)


@dataclasses.dataclass
class _Blob:
    name: str
    data: Any


class _Open(BaseModel, extra="allow"):
    name: str = ""


class _Held(BaseModel):
    raw: Any


def _nested(levels: int, inside: Any = None) -> Any:
    value = inside
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("metadata", "where"),
    [
        # A dataclass's field and a model's extra: named there, not the dataclass or model
        # whole ("m: _Blob cannot be stored in a checkpoint ('utf-8' codec can't decode...)").
        ({"m": _Blob("a", b"\xff")}, "session.r.metadata.m.data: bytes that are not UTF-8 text"),
        ({"m": _Open(raw=object())}, "session.r.metadata.m.raw: object cannot be stored"),
        # A key holding a lone surrogate is a string key pydantic writes: the value under it
        # is what it cannot, not the key ("dict key '\\ud800' ...; use string keys").
        ({"m": {"\ud800": object()}}, "session.r.metadata.m.\ud800: object cannot be stored"),
        # Nested past what pydantic writes (255 levels), with nothing else wrong: said so, not
        # "session.r: cannot be stored in a checkpoint: Circular reference detected (depth
        # exceeded)", naming neither the place nor the cause.
        ({"m": _nested(300)}, f"session.r.metadata.m: nested deeper than {MAX_DEPTH} levels"),
        # Beside a value nested deeply but not past it, which a checkpoint holds: the other.
        (
            {"fine": _nested(205), "m": _nested(300)},
            f"session.r.metadata.m: nested deeper than {MAX_DEPTH} levels",
        ),
        # A model's field nested past it: too deep, there (was "session.r.metadata.m.name: list
        # cannot be stored in a checkpoint (Circular reference detected (depth exceeded)); use
        # JSON values or ...", blaming a list of JSON values for a reference it does not hold).
        (
            {"m": _Held(raw=_nested(300))},
            f"session.r.metadata.m.raw: nested deeper than {MAX_DEPTH} levels",
        ),
        # Past it only where it is, below a model whose every field writes alone: the second
        # walk went into no such model ("session.r: cannot be stored in a checkpoint: Circular
        # reference detected (depth exceeded)", no place).
        (
            {"m": _nested(60, _Held(raw=_nested(200)))},
            f"session.r.metadata.m.raw: nested deeper than {MAX_DEPTH} levels",
        ),
        # A model's extra, alike (was "m: _Open cannot be stored ... (Circular reference ...").
        (
            {"m": _Open(name="a", raw=_nested(300))},
            f"session.r.metadata.m.raw: nested deeper than {MAX_DEPTH} levels",
        ),
    ],
    ids=[
        "dataclass-field",
        "model-extra",
        "surrogate-key",
        "too-deep",
        "too-deep-beside",
        "too-deep-in-a-field",
        "too-deep-through-a-model",
        "too-deep-in-an-extra",
    ],
)
def test_what_a_messages_metadata_holds_that_json_cannot_write_is_named_where_it_is(
    metadata: dict[str, Any], where: str
) -> None:
    """The checkpoint's walk for where pydantic failed named less than the records' walk did
    for the same value (a dataclass or a model's extra whole), blamed a string key, and found
    nothing in a value only too deep; one walk (``adk._json_where``) serves both now."""
    with pytest.raises(CheckpointError) as caught:
        to_json_value({"r": Message(role="user", content="x", metadata=metadata)}, "session")
    assert str(caught.value).startswith(where), str(caught.value)


@pytest.mark.parametrize(
    "fine",
    [_nested(254), _nested(60, _Held(raw=_nested(193)))],
    ids=["list", "through-a-model"],
)
def test_a_value_as_deep_as_a_checkpoint_holds_is_not_named_beside_one_too_deep(
    fine: Any,
) -> None:
    """Whether a value 200 levels down is too deep where it is was told by writing it inside as
    many lists, which pydantic counts a level or two apart from where it is (a message's
    metadata, a model in it): the deepest value a checkpoint holds was named "nested deeper
    than 200 levels" beside the one that is."""
    to_json_value({"r": Message(role="user", content="x", metadata={"fine": fine})}, "session")
    with pytest.raises(CheckpointError) as caught:
        metadata = {"fine": fine, "m": _nested(300)}
        to_json_value({"r": Message(role="user", content="x", metadata=metadata)}, "session")
    where = f"session.r.metadata.m: nested deeper than {MAX_DEPTH} levels"
    assert str(caught.value).startswith(where), str(caught.value)


def test_a_walk_for_the_place_that_runs_out_of_stack_finds_none_rather_than_raise() -> None:
    """The walk recurses two frames a level (``adk._json_where``), begun on top of a save's own
    recursion: out of stack, it finds nothing (its caller gives pydantic's words) rather than
    let Python's RecursionError out of a pause."""
    value = _nested(150, b"\xff")
    frames, frame = 0, sys._getframe()
    while frame is not None:
        frames, frame = frames + 1, frame.f_back
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(frames + 100)
    try:
        assert unwritable_at(value, ValueError("invalid utf-8"), MAX_DEPTH) is None
    finally:
        sys.setrecursionlimit(limit)
    found = unwritable_at(value, ValueError("invalid utf-8"), MAX_DEPTH)
    assert found is not None and found.value == b"\xff" and len(found.path) == 150


async def test_a_pause_of_a_registered_model_with_a_key_json_cannot_write_fails_clearly() -> None:
    store = DictStore()
    state = Reading(value=1.0, extra={"by": {frozenset({"a"}): 1}})
    events = await collect(Runner(Asker("root", state=state), checkpoint_store=store).run("hi"))
    last = events[-1]
    assert last.interrupted is None and last.error is not None
    assert last.error.type == "CheckpointError"
    assert last.error.message.startswith("could not save checkpoint"), last.error.message
    assert "state of agent:root.extra.by: dict key frozenset({'a'})" in last.error.message
    assert store.data == {}


def _same(a: Any, b: Any) -> bool:
    """Equality that takes NaN for NaN (``nan != nan``), through dicts, lists and models."""
    if isinstance(a, BaseModel) and type(a) is type(b):
        return _same(a.__dict__, b.__dict__)
    if isinstance(a, float) and isinstance(b, float) and a != a:
        return b != b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and type(a) is type(b)


NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    "value",
    [
        {"a": {"b": NAN}, "c": [INF, -INF], "d": 1.5},
        # pydantic's JSON mode made these None: NaN inside Any and dict fields of models
        Reading(value=1.0, extra={"mean": NAN, "__adk_type__": "not a tag"}, note=[-INF]),
        Reading(value=NAN),  # a typed float
        Message.user("hi").model_copy(update={"metadata": {"score": NAN, "p": [INF]}}),
        {"models": [Shape(points=[Point(x=1)]), Reading(value=INF)], "nan": NAN},
        Bounds(pair=(0.0, NAN), seen=frozenset([1.0, -INF])),
    ],
    ids=["plain", "any-fields", "typed", "message-metadata", "mixed", "tuple-and-set"],
)
def test_nan_and_infinities_round_trip(value: Any) -> None:
    """NaN and infinities are kept, tagged, in JSON every reader takes; those inside models' dumps
    were silently saved as null (pydantic's JSON mode) or refused (typed floats)."""
    data = encode_checkpoint({"session": to_json_value({"v": value}, "session")})
    payload = data.partition(b"\n")[2]
    json.loads(payload, parse_constant=_refuse)  # strict JSON: no NaN or Infinity tokens
    back = from_json_value(decode_checkpoint(data)["session"])["v"]
    assert _same(back, value), back


def _refuse(name: str) -> None:
    raise AssertionError(f"{name} in a checkpoint body")


def test_a_tagged_float_that_is_not_one_is_malformed() -> None:
    with pytest.raises(CheckpointError, match="not a tagged float"):
        from_json_value({"__adk_type__": "float", "data": "1e999"})


async def test_a_pause_for_approval_holding_nan_is_kept_and_resumes(tmp_path: Path) -> None:
    """A model wrote NaN in a call needing approval, after a tool kept NaN in the session: the
    pause failed with an error event in place of the approval request (the human was never asked
    and the run was lost), or, with NaN in a message's metadata, resumed with None. Now the
    checkpoint holds it and the resume gets back what the run held, through SQLite."""
    sent: list[float] = []

    @adk.tool
    def measure(ctx: ToolContext) -> str:
        """Measure."""
        ctx.session["mean"] = NAN
        ctx.session["bounds"] = {"low": -INF, "high": INF}
        return "measured"

    @adk.tool(require_approval=True)
    def set_threshold(threshold: float, ctx: ToolContext) -> str:
        """Set the alert threshold."""
        sent.append(threshold)
        return f"set, mean {ctx.session['mean']}"

    measured = tool_call("measure", {}, id="m")
    setting = tool_call("set_threshold", {"threshold": NAN}, id="s")  # '{"threshold": NaN}'
    model = ScriptedModel(
        [Reply(tool_calls=[measured]), Reply(tool_calls=[setting]), Reply(text="done")]
    )
    store = SQLiteCheckpointStore(tmp_path / "cp.db")
    runner = Runner(
        ReActAgent("ops", model, tools=[measure, set_threshold]), checkpoint_store=store
    )
    try:
        info = pause_of(await collect(runner.run("set it")))
        [point] = info.points
        assert point.info["arguments"]["threshold"] != point.info["arguments"]["threshold"]  # NaN
        session = Session()
        events = await collect(runner.resume(info.checkpoint_id, {point.id: True}, session=session))
    finally:
        await runner.aclose()
        await store.aclose()
    assert [e.error for e in events if e.error is not None] == []
    assert len(sent) == 1 and sent[0] != sent[0]
    assert _same(session.values, {"mean": NAN, "bounds": {"low": -INF, "high": INF}})
    assert events[-1].message is not None and events[-1].message.content == "done"


# -- the header ---------------------------------------------------------------------------------


def test_encoded_checkpoint_is_a_header_line_and_a_json_body() -> None:
    body = {"agent": "root", "values": to_json_value({"p": Point(x=1)})}

    data = encode_checkpoint(body)

    head, _, payload = data.partition(b"\n")
    header = json.loads(head)
    # Version 1, which every pyadk reads: only a body with a table of run paths is version 2
    # (VERSION), the form an older pyadk does not read (test_run_growth.py).
    assert header == {
        "format": "pyadk.checkpoint",
        "version": 1,
        "sha256": hashlib.sha256(payload).hexdigest(),
    }
    assert json.loads(payload) == body
    assert decode_checkpoint(data) == body
    tabled = {**body, "run_paths": [[-1, "root"]]}
    assert json.loads(encode_checkpoint(tabled).partition(b"\n")[0])["version"] == VERSION == 2


def test_lone_surrogates_are_written_escaped_and_load_back_the_same() -> None:
    """A lone surrogate (a model's JSON escape ``"\\ud800"`` makes one) has no UTF-8 form: the
    save failed with 'surrogates not allowed' and the paused run was lost. The document is written
    ASCII-escaped instead: valid UTF-8, its checksum over those bytes, the same text on load, and
    the listing's summary readable."""
    odd = "x\ud800y\udfff \u0000 é 🙂"
    body = {
        "agent": "root",
        "points": [{"id": "agent:root", "address": ["agent:root"], "info": {"q": odd}}],
        "values": to_json_value({odd: [odd, Point(x=1, label=odd)]}),
    }

    data = encode_checkpoint(body)

    data.decode("utf-8")  # a store of text (or a reader of UTF-8) takes it
    head, _, payload = data.partition(b"\n")
    header = json.loads(head)
    assert header["sha256"] == hashlib.sha256(payload).hexdigest()
    assert payload.isascii()
    assert decode_checkpoint(data) == body
    values = from_json_value(decode_checkpoint(data)["values"])
    assert values == {odd: [odd, Point(x=1, label=odd)]}
    summary = codec._read_summary(data, len(data))
    assert summary is not None and summary["points"][0]["info"] == {"q": odd}


def test_ordinary_text_is_still_written_as_utf8_not_escaped() -> None:
    body = {"agent": "root", "points": [], "text": "é 🙂"}
    data = encode_checkpoint(body)
    assert "é 🙂".encode() in data
    assert decode_checkpoint(data) == body


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: d.replace(b'"root"', b'"r00t"'), "checksum does not match"),
        (lambda d: d[:-1], "checksum does not match"),
        (lambda d: d[: len(d) // 2 + d.index(b"\n") // 2], "checksum does not match"),
        (lambda d: d[: d.index(b"\n") + 1], "checksum does not match"),
        (lambda d: d[: d.index(b"\n")], "unreadable header"),
        (lambda d: d[:10], "unreadable header"),
        (lambda d: b"", "unreadable header"),
        (lambda d: b"\x00" * 64, "unreadable header"),
        (lambda d: d + b" ", "checksum does not match"),
        (lambda d: d.replace(b'"sha256":"', b'"sha256":"0'), "checksum does not match"),
    ],
    ids=[
        "edited",
        "truncated-by-one",
        "truncated-half",
        "header-only",
        "header-cut",
        "ten-bytes",
        "empty",
        "zeros",
        "appended",
        "bad-digest",
    ],
)
def test_damaged_checkpoints_say_what_is_wrong(damage: Any, message: str) -> None:
    data = encode_checkpoint({"agent": "root", "history": [{"n": i} for i in range(20)]})

    with pytest.raises(CheckpointError, match=message) as caught:
        decode_checkpoint(damage(data), "cp-1")

    assert "checkpoint 'cp-1'" in str(caught.value)


@pytest.mark.parametrize("version", [0, 3, 99, "1", None, True, 1.0])
def test_incompatible_version_is_a_clear_error(version: Any) -> None:
    data = with_header(b'{"agent":"root"}', version=version)

    with pytest.raises(CheckpointError) as caught:
        decode_checkpoint(data, "cp-1")

    assert f"format version {version!r}" in str(caught.value)
    assert f"reads version {VERSION}" in str(caught.value)


def test_other_formats_are_not_mistaken_for_checkpoints() -> None:
    data = with_header(b'{"agent":"root"}', format="someone.else")
    with pytest.raises(CheckpointError, match="is not a pyadk checkpoint"):
        decode_checkpoint(data)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"{not json", "is corrupt"),
        (b"[1, 2]", "body is not an object"),
        (b'"text"', "body is not an object"),
        (b"\xff\xfe", "is corrupt"),
    ],
)
def test_a_body_with_a_valid_checksum_must_still_be_a_json_object(
    payload: bytes, message: str
) -> None:
    with pytest.raises(CheckpointError, match=message):
        decode_checkpoint(with_header(payload))


def test_deeply_nested_body_is_a_checkpoint_error_not_a_crash() -> None:
    payload = b'{"agent":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(CheckpointError):
        decode_checkpoint(with_header(payload))


# -- through the runner -------------------------------------------------------------------------


async def _paused() -> tuple[Runner, Any, str, dict[str, Any]]:
    """A runner with one run paused; its store, the checkpoint id and the decoded body."""
    runner = Runner(SequentialAgent("root", [Asker("ask")]), checkpoint_store=DictStore())
    store = runner.checkpoint_store
    info = pause_of(await collect(runner.run("hi", session={"k": "v"})))
    data = await store.get(info.checkpoint_id)
    assert data is not None
    return runner, store, info.checkpoint_id, decode_checkpoint(data)


async def test_resuming_a_tampered_checkpoint_is_a_checksum_error() -> None:
    runner, store, cid, _ = await _paused()
    data = await store.get(cid)
    assert data is not None
    await store.put(cid, data.replace(b'"hi"', b'"HI"'))

    with pytest.raises(CheckpointError, match="checksum does not match"):
        await collect(runner.resume(cid, "x"))


async def test_resuming_a_truncated_checkpoint_is_a_clear_error() -> None:
    runner, store, cid, _ = await _paused()
    data = await store.get(cid)
    assert data is not None
    await store.put(cid, data[: len(data) - 7])

    with pytest.raises(CheckpointError, match=rf"checkpoint '{cid}' is corrupt or was modified"):
        await collect(runner.resume(cid, "x"))


async def test_resuming_a_checkpoint_of_another_version_is_a_clear_error() -> None:
    runner, store, cid, body = await _paused()
    await store.put(cid, with_header(json.dumps(body).encode(), version=VERSION + 1))

    with pytest.raises(CheckpointError, match=f"format version {VERSION + 1}"):
        await collect(runner.resume(cid, "x"))


async def test_a_checkpoint_of_a_newer_version_says_so_and_is_kept_for_that_version() -> None:
    # After a rollback, checkpoints the newer release wrote must stay for it to resume.
    runner, store, cid, body = await _paused()
    newer = with_header(json.dumps(body).encode(), version=VERSION + 1)
    await store.put(cid, newer)

    with pytest.raises(CheckpointError, match="a newer pyadk wrote it"):
        await collect(runner.resume(cid, "x"))

    assert await store.get(cid) == newer


@pytest.mark.parametrize(
    "tag",
    [
        "os.system",
        "subprocess.Popen",
        "builtins.eval",
        "builtins.exec",
        "pickle.loads",
        f"{__name__}.Touch",  # a real model class with a side effect, just not registered
    ],
)
async def test_type_tags_of_unregistered_classes_run_no_code(tag: str, tmp_path: Path) -> None:
    sentinel = tmp_path / "pwned"
    payload = {
        "__adk_type__": tag,
        "data": {
            "path": str(sentinel),
            "command": f"touch {sentinel}",
            "args": ["touch", str(sentinel)],
            "source": f"open({str(sentinel)!r}, 'w')",
        },
    }
    runner, store, cid, body = await _paused()
    body["session"]["k"] = payload
    await store.put(cid, encode_checkpoint(body))  # a valid checksum: the tamperer recomputed it

    with pytest.raises(CheckpointError, match=f"unregistered type '{tag}'"):
        await collect(runner.resume(cid, "x"))

    assert not sentinel.exists()


def test_the_unregistered_model_payload_is_live(tmp_path: Path) -> None:
    # Proves the test above could fail: validating the payload as that class has the side effect.
    sentinel = tmp_path / "pwned"
    Touch.model_validate({"path": str(sentinel)})
    assert sentinel.exists()


def test_an_unregistered_tag_whose_class_is_registered_under_another_module_says_so() -> None:
    # A file that pauses a run when imported (``travel_app.Hold``, the default name is
    # module.QualName) and resumes it when run as a script registers its class as
    # ``__main__.Hold``: the same class, which the checkpoint cannot find by its saved name. The
    # error said to register a type the resuming process had registered.
    class Hold(BaseModel):
        flight: str

    Hold.__module__ = "__main__"
    Hold.__qualname__ = "EinoPortHold"
    register_type(Hold)  # as the script registers it
    saved = {"__adk_type__": "travel_app.EinoPortHold", "data": {"flight": "TP541"}}

    with pytest.raises(CheckpointError) as refused:
        from_json_value(saved)
    assert "refers to unregistered type 'travel_app.EinoPortHold'" in str(refused.value)
    assert "registered here as '__main__.EinoPortHold'" in str(refused.value)
    assert "(name='travel_app.EinoPortHold' reads this checkpoint)" in str(refused.value)

    # A class of another name registered under that module is no namesake: the hint names none.
    with pytest.raises(CheckpointError) as other:
        from_json_value({"__adk_type__": "travel_app.EinoPortGone", "data": {}})
    assert str(other.value) == (
        "refers to unregistered type 'travel_app.EinoPortGone'; register it with adk.register_type "
        "before resuming"
    )


@pytest.fixture
def no_unpickling(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fails the test if anything unpickles while it runs; returns the attempts for asserting."""
    attempts: list[str] = []

    def refuse(name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            attempts.append(name)
            raise AssertionError(f"{name} was called while loading a checkpoint")

        return call

    monkeypatch.setattr(pickle, "loads", refuse("pickle.loads"))
    monkeypatch.setattr(pickle, "load", refuse("pickle.load"))
    monkeypatch.setattr(pickle, "Unpickler", refuse("pickle.Unpickler"))
    return attempts


async def test_pickle_payloads_are_never_unpickled(
    tmp_path: Path, no_unpickling: list[str]
) -> None:
    sentinel = tmp_path / "pwned"
    bomb = pickle.dumps(Boom(sentinel))
    runner, store, cid, body = await _paused()
    cases = {
        "the whole checkpoint is a pickle": bomb,
        "a pickle after a valid header": with_header(bomb),
        "a pickle after the JSON body": encode_checkpoint(body) + b"\n" + bomb,
    }
    for name, data in cases.items():
        await store.put(cid, data)
        with pytest.raises(CheckpointError):
            await collect(runner.resume(cid, "x"))
        assert not sentinel.exists(), name

    # A pickle stored as a value comes back as the text it is.
    body["session"]["blob"] = bomb.decode("latin-1")
    await store.put(cid, encode_checkpoint(body))
    result = await runner.invoke_resume(cid, "x")
    assert result.session["blob"] == bomb.decode("latin-1")
    assert not sentinel.exists()
    assert no_unpickling == []


async def test_deeply_nested_info_is_an_error_event_when_saving() -> None:
    value: Any = 1
    for _ in range(5_000):
        value = [value]
    runner = Runner(Asker("root", info=value))

    events = await collect(runner.run("hi"))

    assert events[-1].error is not None
    assert events[-1].error.message.startswith("could not save checkpoint")


@pytest.mark.parametrize("levels", [MAX_DEPTH, 600, 5000])
async def test_deeply_nested_value_in_a_checkpoint_is_a_checkpoint_error(levels: int) -> None:
    """Deep nesting parses as JSON, but a checkpoint refuses it with a clear error, at the same
    depth on every Python version (not wherever the recursion limit happens to be reached)."""
    runner, store, cid, body = await _paused()
    body["session"]["k"] = "DEEP"  # spliced in as text: json.dumps itself would recurse
    payload = json.dumps(body, separators=(",", ":")).encode()
    payload = payload.replace(b'"DEEP"', b"[" * levels + b"]" * levels)
    await store.put(cid, _signed(payload))  # a valid checksum: only the depth is wrong

    with pytest.raises(CheckpointError, match=f"nested deeper than {MAX_DEPTH} levels"):
        await collect(runner.resume(cid, "x"))
    assert await store.get(cid) is not None  # kept: nothing was lost


def _signed(payload: bytes) -> bytes:
    """A checkpoint with ``payload`` as its body and a matching header."""
    header = {"format": "pyadk.checkpoint", "version": 1}
    header["sha256"] = hashlib.sha256(payload).hexdigest()
    return json.dumps(header, separators=(",", ":")).encode() + b"\n" + payload


def test_values_nest_up_to_max_depth_and_no_deeper() -> None:
    deepest: Any = 1
    for _ in range(MAX_DEPTH - 1):  # the session dict itself is the first level
        deepest = [deepest]
    assert from_json_value(to_json_value({"k": deepest})) == {"k": deepest}

    with pytest.raises(CheckpointError, match=f"session.k: nested deeper than {MAX_DEPTH}"):
        to_json_value({"k": [deepest]}, "session")


async def test_a_value_too_deep_to_save_ends_the_run_with_a_clear_error() -> None:
    deep: Any = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]

    class Pauser(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            ctx.session["deep"] = deep
            yield ctx.interrupt("wait")

    events = await collect(Runner(Pauser("p")).run("go"))
    assert events[-1].error is not None
    assert "could not save checkpoint" in events[-1].error.message
    assert f"session.deep: nested deeper than {MAX_DEPTH} levels" in events[-1].error.message


async def test_an_interrupt_state_too_deep_to_resume_is_refused_at_the_pause() -> None:
    """A state is saved on its own (its errors name it) but read back inside the body's
    ``states``, two levels down (address, slot): saved from depth 0, a state one or two levels
    deeper than a resume reads was saved, and its run paused for good, every resume refusing
    the checkpoint as malformed. Refused at the pause, as before; the deepest that resumes still
    pauses and resumes."""

    def nested(levels: int) -> Any:
        value: Any = 1
        for _ in range(levels):
            value = [value]
        return value

    class Keeper(BaseAgent):
        def __init__(self, name: str, levels: int) -> None:
            super().__init__(name)
            self.levels = levels

        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            yield ctx.interrupt("wait", state=nested(self.levels))

        async def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            assert ctx.resume is not None and ctx.resume.state == nested(self.levels)
            yield AgentEvent.of(Message.assistant("resumed"))

    deepest = MAX_DEPTH - 2  # lists under the states' address and slot
    store = InMemoryCheckpointStore()
    runner = Runner(Keeper("k", deepest), checkpoint_store=store)
    paused = await runner.invoke("go")
    assert paused.checkpoint_id is not None
    assert (await runner.invoke_resume(paused.checkpoint_id, "ok")).text == "resumed"

    for levels in (deepest + 1, deepest + 2):
        runner = Runner(Keeper("k", levels), checkpoint_store=store)
        events = await collect(runner.run("go"))
        assert events[-1].error is not None, levels
        assert "could not save checkpoint" in events[-1].error.message
        assert f"state of agent:k: nested deeper than {MAX_DEPTH}" in events[-1].error.message
    assert [key async for key in store.ids()] == []  # nothing saved that cannot be resumed


async def test_registered_type_with_invalid_data_is_a_checkpoint_error() -> None:
    runner, store, cid, body = await _paused()
    body["session"]["k"] = {"__adk_type__": f"{__name__}.Point", "data": {"x": "not a number"}}
    await store.put(cid, encode_checkpoint(body))

    with pytest.raises(CheckpointError, match=f"invalid value of type '{__name__}.Point'"):
        await collect(runner.resume(cid, "x"))


MALFORMED: dict[str, Any] = {
    "agent missing": lambda b: b.pop("agent"),
    "points not a list": lambda b: b.update(points="ab"),
    "point id not text": lambda b: b["points"][0].update(id=5),
    "root input not messages": lambda b: b.update(root_input=[1, 2]),
    "root input an object": lambda b: b.update(root_input={}),
    "root input a number": lambda b: b.update(root_input=5),
    "states a list": lambda b: b.update(states=[]),
    "state slots not an object": lambda b: b.update(states={"agent:root": 5}),
    "workflow state missing": lambda b: b.update(states={}),
    "workflow state wrong shape": lambda b: b.update(states={"agent:root": {"": {"i": 0}}}),
    "session a string": lambda b: b.update(session="abc"),
    "session a list": lambda b: b.update(session=[1, 2]),
    "history a string": lambda b: b.update(history="xy"),
    "history entry not an object": lambda b: b.update(history=[5]),
    "history entry without message": lambda b: b.update(history=[{"agent": "a"}]),
    "history message not a message": lambda b: b.update(
        history=[{"agent": "a", "run_path": ["a"], "message": "text"}]
    ),
    "history run path a number": lambda b: b.update(
        history=[
            {
                "agent": "a",
                "run_path": 5,
                "message": {"__adk_type__": "adk.Message", "data": {"role": "user"}},
            }
        ]
    ),
}


@pytest.mark.parametrize("change", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_malformed_checkpoint_bodies_are_clear_errors(change: Any) -> None:
    """A body with a valid checksum but the wrong shape (a buggy writer, a hand edit) must fail
    with ``CheckpointError`` — or, where only the component can tell, end in an error event — and
    never crash with an internal exception, run the agent from scratch, or lose the checkpoint."""
    runner, store, cid, body = await _paused()
    change(body)
    data = encode_checkpoint(body)
    await store.put(cid, data)

    try:
        events = await collect(runner.resume(cid, "x"))
    except CheckpointError:
        events = []
    else:
        assert events and events[-1].error is not None, [
            (e.agent_name, e.output, e.error) for e in events
        ]
        assert not any(e.message is not None and e.message.content == "ask asks" for e in events)
    assert await store.get(cid) == data


@pytest.mark.parametrize("resume", [None, "x"], ids=["no-data", "data"])
async def test_checkpoint_without_pending_points_is_a_clear_error(resume: Any) -> None:
    """Resuming it must not quietly start the run over from the beginning."""
    runner, store, cid, body = await _paused()
    body["points"] = []
    await store.put(cid, encode_checkpoint(body))
    asker = runner.agent.sub_agents[0]  # type: ignore[attr-defined]

    with pytest.raises(CheckpointError, match="no pending points"):
        await collect(runner.resume(cid, resume))

    assert asker.runs == 1


@register_type
class GuardedAccount(BaseModel):
    """``Account`` with model validators, which wrap the model's schema and its fields'."""

    owner: str
    api_key: str = Field(exclude=True)

    @model_validator(mode="wrap")
    @classmethod
    def _wrapped(cls, value: Any, handler: Any) -> Any:
        return handler(value)

    @model_validator(mode="before")
    @classmethod
    def _before(cls, value: Any) -> Any:
        return value


def test_an_excluded_field_of_a_model_with_validators_is_stored() -> None:
    """The excluded field's serializer is found past the validator functions pydantic wraps
    around the model and around its fields (the pause failed with a bare KeyError)."""
    saved = to_json_value(GuardedAccount(owner="ann", api_key="k-1"))
    loaded = from_json_value(decode_checkpoint(encode_checkpoint({"v": saved}))["v"])
    assert loaded == GuardedAccount(owner="ann", api_key="k-1")
    assert loaded.api_key == "k-1"


class Credential(BaseModel):
    """A model nested in a stored one, keeping its secret out of its dumps, with no default."""

    name: str
    secret: str = Field(exclude=True)


class Quota(BaseModel):
    """As ``Credential``, but its excluded field has a default."""

    limit: int = Field(default=10, exclude=True)


class Admin(Credential):
    """A subclass, held where the schema names ``Credential``."""


@register_type
class Vault(BaseModel):
    """A registered model nesting models that leave fields out of their dumps."""

    owner: str
    credentials: list[Credential] = []
    quota: Quota = Quota()
    backup: Credential | None = None


async def test_a_nested_model_whose_required_field_is_left_out_fails_the_pause() -> None:
    """A model nested in a stored one is saved as its own dump, without its ``exclude=True``
    fields: one without a default was saved missing, the pause went well, and its checkpoint
    failed to load for ever. The pause now fails, naming where the model is and the field."""

    class Hold(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                ctx.session["vault"] = Vault(
                    owner="ann", credentials=[Credential(name="db", secret="pw")]
                )
                yield ctx.interrupt("go on?")

    store = InMemoryCheckpointStore()
    with pytest.raises(RunError, match="could not save checkpoint 'cp'") as caught:
        await Runner(Hold("hold"), store).invoke("go", checkpoint_id="cp")
    assert "Vault.credentials[0] (Credential) leaves its field(s) 'secret' out" in str(caught.value)
    assert await store.get("cp") is None
    # Anywhere it is nested, a subclass where the schema names its base too.
    with pytest.raises(
        CheckpointError, match=r"value\.v: Vault\.backup \(Admin\) leaves its field"
    ):
        to_json_value({"v": Vault(owner="ann", backup=Admin(name="root", secret="pw"))})
    # An excluded field with a default comes back as the default (interrupts.md), and a value
    # holding no such model is stored.
    kept = from_json_value(to_json_value(Vault(owner="ann", quota=Quota(limit=3))))
    assert kept == Vault(owner="ann")


@register_type
class Connection(BaseModel):
    """A model holding its API key as pydantic's ``SecretStr``, kept out of logs and reprs."""

    url: str
    api_key: SecretStr


@register_type
class RevealedConnection(BaseModel):
    """``Connection`` written with its key whole by a serializer of its own."""

    url: str
    api_key: SecretStr

    @field_serializer("api_key", when_used="json")
    def _whole(self, key: SecretStr) -> str:
        return key.get_secret_value()


async def test_a_secret_pydantic_would_write_masked_fails_the_pause() -> None:
    """pydantic writes a ``SecretStr`` as ``'**********'`` in JSON: a model holding one was saved
    so, the pause went well, and the resumed run called its service with ``**********`` for its
    key. The pause fails now, naming the secret; one the model writes whole is stored."""

    class Hold(BaseAgent):
        def __init__(self, name: str, connection: BaseModel) -> None:
            super().__init__(name)
            self.connection = connection

        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                ctx.session["connection"] = self.connection
                yield ctx.interrupt("go on?")
                return
            yield AgentEvent.of(ctx.session["connection"].api_key.get_secret_value())

    store = InMemoryCheckpointStore()
    masked = Hold("hold", Connection(url="https://x", api_key=SecretStr("sk-1")))
    with pytest.raises(RunError, match="could not save checkpoint 'cp'") as caught:
        await Runner(masked, store).invoke("go", checkpoint_id="cp")
    assert "Connection.api_key is a secret (SecretStr, SecretBytes, Secret)" in str(caught.value)
    assert await store.get("cp") is None

    whole = Hold("hold", RevealedConnection(url="https://x", api_key=SecretStr("sk-1")))
    runner = Runner(whole, store)
    paused = await runner.invoke("go", checkpoint_id="cp")
    assert paused.interrupt is not None
    assert (await runner.invoke_resume("cp", True)).text == "sk-1"


# -- where an error says the value is --------------------------------------------------------------


@register_type
class Tally(BaseModel):
    n: int


@register_type
class Keyring(BaseModel):
    keys: dict[str, SecretStr]


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (object(), "state of agent:a/tool:ask#c1: object cannot be stored"),
        ({"seen": {1, 2}}, "state of agent:a/tool:ask#c1.seen: set cannot be stored"),
        # Found only when json.dumps fails on the model's dump, by another walk of the body.
        (Tally(n=10**5000), "state of agent:a/tool:ask#c1.n: int longer than 4300 digits"),
    ],
)
async def test_an_unstorable_interrupt_state_is_named_by_its_tool_call(
    state: Any, message: str
) -> None:
    """An ``Interrupt``'s state is its component's own slot, an empty key: the error named the
    path ``saved state.agent:a/tool:ask#c1.:`` (or ``states.agent:a/tool:ask#c1..n`` for a
    number inside a model), a stray dot read as a typo."""

    @adk.tool
    async def ask(ctx: ToolContext) -> str:
        """Asks first."""
        raise adk.Interrupt("ok?", state=state)

    model = ScriptedModel([Reply(tool_calls=[tool_call("ask", {}, id="c1")])])
    with pytest.raises(RunError, match="could not save checkpoint 'cp'") as caught:
        await Runner(ReActAgent("a", model=model, tools=[ask])).invoke("go", checkpoint_id="cp")
    assert f"'cp': {message}" in str(caught.value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"": {"a.b": object()}}, "session['']['a.b']: object cannot be stored"),
        ({"x": {"": 10**5000}}, "session.x['']: int longer than 4300 digits"),
    ],
)
def test_an_empty_or_dotted_key_in_an_error_path_is_quoted(value: Any, message: str) -> None:
    """A key joined with a dot as it is, ``session..a.b``, names no one place."""
    with pytest.raises(CheckpointError) as caught:
        to_json_value(value, "session")
    assert str(caught.value).startswith(message)


def test_a_masked_secret_under_an_empty_key_is_named_with_it() -> None:
    with pytest.raises(CheckpointError, match=r"Keyring\.keys\[''\] is a secret"):
        to_json_value(Keyring(keys={"": SecretStr("sk-1")}))


# -- registered models in places typed Any, nested in a stored model -------------------------------


@register_type
class Finding(BaseModel):
    source: str
    score: float = 0.0


@register_type
class Dossier(BaseModel):
    """What a research tool keeps across a pause: its loosely typed places hold models."""

    lead: Any = None
    found: list[Any] = []
    by_source: dict[str, Any] = {}
    best: Finding | None = None
    notes: dict[str, Any] = {}


@register_type
class Shelf(BaseModel):
    """A registered model whose serializer writes a model held in ``Any`` its own way."""

    kept: Any = None

    @field_serializer("kept")
    def _as_text(self, kept: Any) -> Any:
        return f"finding from {kept.source}" if isinstance(kept, Finding) else kept


async def test_a_registered_model_in_a_stored_models_any_place_comes_back_as_itself(
    tmp_path: Path,
) -> None:
    """pydantic writes a model held in ``Any`` (``list[Any]``, ``dict[str, Any]``) as its bare
    fields: a registered model nested so in an ``Interrupt``'s state or a session value came back
    from the checkpoint as a dict, and the resumed code failed on ``.source``."""
    one, two = Finding(source="wiki", score=0.5), Finding(source="arxiv", score=float("nan"))
    dossier = Dossier(
        lead=one,
        found=[one, {"__adk_type__": "not a tag"}, [two]],
        by_source={"arxiv": two, "deep": Dossier(lead=two)},
        best=one,
        notes={"n": float("inf"), "plain": {"source": "x"}},
    )
    asker = Asker("asker", info="go on?", state=dossier)

    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await Runner(asker, store).invoke(
            "go", checkpoint_id="cp", session={"kept": {"d": dossier}}
        )
        assert paused.interrupt is not None
        await Runner(asker, store).invoke_resume("cp", "yes")
    [_, resume] = asker.resumes
    assert resume is not None
    for back in (resume.state, asker.session_seen[1]["kept"]["d"]):
        assert isinstance(back, Dossier)
        assert back.lead == one and back.best == one
        assert back.found[0] == one and back.found[1] == {"__adk_type__": "not a tag"}
        assert isinstance(back.found[2][0], Finding) and back.found[2][0].source == "arxiv"
        assert isinstance(back.by_source["arxiv"], Finding)
        assert isinstance(back.by_source["deep"], Dossier)
        assert isinstance(back.by_source["deep"].lead, Finding)
        assert back.notes == {"n": float("inf"), "plain": {"source": "x"}}  # a dict stays one


def test_a_model_with_an_any_place_holding_plain_data_is_saved_without_the_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Walking a model's dump beside it to tag the registered models in its ``Any`` places copies
    the whole dump in Python: for a table of plain rows (20,000 in a ``dict[str, Any]``) five
    times the save itself, at every pause, finding nothing. Made only when one is there."""
    walked: list[object] = []
    walk = codec._models_tagged

    def counted(value: Any, data: Any, depth: int, found: list[bool], *expected: Any) -> Any:
        walked.append(value)
        return walk(value, data, depth, found, *expected)

    monkeypatch.setattr(codec, "_models_tagged", counted)
    plain = Dossier(notes={"rows": [{"a": i, "b": [i, "x"]} for i in range(50)]})
    assert from_json_value(to_json_value(plain)) == plain
    assert walked == []

    deep = Dossier(notes={"rows": [{"a": 1, "b": [Finding(source="wiki")]}]})
    back = from_json_value(to_json_value(deep))
    assert walked and walked[0] is deep  # (and on, within it)
    assert isinstance(back.notes["rows"][0]["b"][0], Finding)  # found, however deep


def test_a_model_its_holders_serializer_writes_otherwise_keeps_what_was_written() -> None:
    assert from_json_value(to_json_value(Shelf(kept=Finding(source="wiki")))) == Shelf(
        kept="finding from wiki"
    )


class _Unlisted(BaseModel):
    """A model nobody registered."""

    source: str


class _Noting(BaseAgent):
    """Says something with a registered model in its message's metadata, then asks."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            said = Message.assistant("noted").model_copy(
                update={"metadata": {"finding": Finding(source="wiki"), "n": 1}}
            )
            yield AgentEvent.of(said)
            yield ctx.interrupt("go on?")
            return
        yield AgentEvent.of("done")


async def test_a_registered_model_in_a_messages_metadata_comes_back_as_itself(
    tmp_path: Path,
) -> None:
    """The codec looked into a stored model's places typed ``Any`` but not into adk's own
    ``Message``'s ``metadata``: a registered model a reply carried there came back from the
    checkpoint's history as a dict."""
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await Runner(_Noting("noter"), store).invoke("go", checkpoint_id="cp")
        assert paused.interrupt is not None
        done = await Runner(_Noting("noter"), store).invoke_resume("cp", "yes")
    [noted] = [m for m in done.messages if m.content == "noted"]
    assert noted.metadata == {"finding": Finding(source="wiki"), "n": 1}
    assert isinstance(noted.metadata["finding"], Finding)
    plain = to_json_value(Message.user("hi").model_copy(update={"metadata": {"k": "v"}}))
    assert plain["data"] == {"role": "user", "content": "hi", "metadata": {"k": "v"}}  # untagged


class _Reading(Event):
    n: int


class _Frame(BaseModel):
    image: bytes


class _Gated(ActionAgent):
    """Passes its record on as an event of its own, and pauses on that event: the record, which
    the paused action no longer holds, is saved only as the run's input message's metadata."""

    @action(InputEvent)
    def read(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(_Reading(n=event.input["n"]))

    @action(_Reading)
    def gate(self, event: _Reading, ctx: ActionContext) -> None:
        if ctx.resume is None:
            raise adk.Interrupt({"approve": event.n})
        ctx.send_event(OutputEvent(output=event.n))


async def test_a_record_whose_field_no_checkpoint_holds_fails_its_pause_naming_the_field() -> None:
    """A keyed record's pause saves the record in its input message's metadata. One holding
    bytes that are not UTF-8 (a binary payload off a broker) or an object of its own failed the
    pause with pydantic's words alone, ``could not save checkpoint '...': 'utf-8' codec can't
    decode byte 0x89 in position 0`` or ``Unable to serialize unknown type: <class 'object'>``,
    naming neither the record nor its field. Now the error names where the value is."""
    env = LocalExecutionEnvironment(checkpoint_store=InMemoryCheckpointStore(), on_error="emit")
    records = [
        {"k": "a", "n": 1, "payload": b"\x89PNG\xff"},
        {"k": "b", "n": 2, "deep": [{"handle": object()}]},
        {"k": "c", "n": 3, "payload": b"text"},  # UTF-8: stored as its text, as before
        {"k": "d", "n": 4, "frame": _Frame(image=b"\xff\xd8")},  # a model's field named too
    ]
    outputs = env.from_list(records, key="k").apply(_Gated("gated"))
    binary, unknown, fine, framed = await outputs.to_list()
    assert binary.error is not None and binary.error.type == "CheckpointError"
    assert "root input.metadata['adk.record'].payload: bytes that are not UTF-8 text" in (
        binary.error.message
    )
    assert unknown.error is not None
    assert "root input.metadata['adk.record'].deep.handle: object cannot be stored" in (
        unknown.error.message
    )
    assert binary.checkpoint_id is None and "a" not in outputs.sessions  # nothing kept of it
    assert framed.error is not None
    assert "root input.metadata['adk.record'].frame.image: bytes that are not UTF-8" in (
        framed.error.message
    )
    assert fine.error is None and fine.checkpoint_id is not None
    [done] = await outputs.resume(fine, "yes")
    assert done.output == 3


class _EncodedFrame(BaseModel):
    """Writes its bytes itself (base64), as its owner asked: JSON takes them."""

    model_config = ConfigDict(ser_json_bytes="base64")
    image: bytes
    extra: Any = None


class _HexFrame(BaseModel):
    image: bytes
    extra: Any = None

    @field_serializer("image")
    def _hex(self, image: bytes) -> str:
        return image.hex()


@pytest.mark.parametrize("frame", [_EncodedFrame, _HexFrame])
def test_the_walk_for_what_a_pause_cannot_write_blames_no_field_the_model_writes(
    frame: type[_EncodedFrame] | type[_HexFrame],
) -> None:
    """The walk that names where in a message's metadata the value pydantic cannot write is
    wrote each field alone by pydantic's plain rules: a model's bytes that its own config or
    serializer writes (base64, hex) were blamed ("frame.image: bytes that are not UTF-8 text
    ...; decode them, or base64-encode them") and the object that failed was never named."""
    held = frame(image=b"\x89PNG\xff", extra={"handle": object()})
    message = Message(role="user", content="x", metadata={"frame": held})
    with pytest.raises(CheckpointError) as refused:
        to_json_value(message, "m")
    assert str(refused.value).startswith("m.metadata.frame.extra"), str(refused.value)
    assert "object" in str(refused.value) and "image" not in str(refused.value)
    to_json_value(Message(role="user", content="x", metadata={"frame": frame(image=b"\xff")}))


class _Payload(RootModel[Any]):
    pass


def test_the_walk_looks_into_a_root_models_value() -> None:
    """A RootModel's one field, ``root``, is looked into as a model's fields are: asked alone
    (``include={"root"}``), pydantic picks from the root's value and writes it."""
    message = Message(role="user", content="x", metadata={"r": _Payload({"x": b"\xff"})})
    with pytest.raises(CheckpointError, match=r"^m\.metadata\.r\.root\.x: bytes that are not"):
        to_json_value(message, "m")


async def test_an_unregistered_model_in_a_stored_models_any_place_fails_the_pause() -> None:
    """It was saved as pydantic's dict of its fields without a word, and the resumed code met a
    dict where it had left the model; an unregistered model anywhere else fails the pause naming
    it. Now this one does too, naming where it is."""
    dossier = Dossier(lead=_Unlisted(source="wiki"))
    events = await collect(Runner(Asker("asker", info="go on?", state=dossier)).run("go"))
    error = events[-1].error
    assert error is not None
    assert re.search(
        r"could not save checkpoint '.*': state of agent:asker\.lead: _Unlisted is not "
        r"registered for checkpoints \(held where the model is typed Any",
        error.message,
    ), error.message
    deep = Dossier(by_source={"x": [Dossier(notes={"n": _Unlisted(source="arxiv")})]})
    with pytest.raises(CheckpointError, match=r"^v\.by_source\.x\.notes\.n: _Unlisted is not"):
        to_json_value(deep, "v")
    typed = Dossier(best=Finding(source="wiki"), found=[{"source": "x"}])  # typed or plain: kept
    assert from_json_value(to_json_value(typed)) == typed


class _Inner(BaseModel):
    """Unregistered, every field at its default unless given."""

    name: str = "x"
    size: int = 0


class _Rows(dict[str, Any]):
    """A dict of one's own: walked as a dict is."""


@register_type
class _Holder(BaseModel):
    """A registered model with a place typed ``Any`` and one typed with its class."""

    rows: Any = None
    inner: _Inner = _Inner()


@pytest.mark.parametrize("where", ["plain", "in-a-tuple-in-a-dict-subclass"])
def test_the_one_look_for_models_finds_those_each_save_needs(where: str) -> None:
    """``codec._holds_model`` is the look of both saves that walk for models (it was two
    copies, ``_holds_model`` and ``_holds_registered``): in a message's metadata any model
    counts, so one unregistered is kept whole, its fields at their defaults too; in a
    registered model's ``Any`` place, a registered one is tagged (it comes back a model, not a
    dict) and an unregistered one of a class its schema does not name is refused, while one
    of a class it names (``_Inner``, through its ``inner`` field) is looked through, not
    counted."""

    def put(value: Any) -> Any:
        return value if where == "plain" else _Rows(deep=(value,))

    def got(value: Any) -> Any:
        return value if where == "plain" else value["deep"][0]

    def back(value: Any) -> Any:
        data = encode_checkpoint({"s": to_json_value({"v": value}, "session")})
        return from_json_value(decode_checkpoint(data)["s"])["v"]

    message = Message.user("hi").model_copy(update={"metadata": {"m": put(_Inner())}})
    assert got(back(message).metadata["m"]) == {"name": "x", "size": 0}

    assert codec._holds_model([put(_Inner())])
    assert codec._holds_model([put(Point(x=1))], (_Holder, _Inner))
    assert not codec._holds_model([put(_Inner(name="y"))], (_Holder, _Inner))
    assert codec._holds_model([put(_Reviewedless())], (_Holder, _Inner))

    held = back(_Holder(rows=put(Point(x=1))))
    assert got(held.rows) == Point(x=1)
    with pytest.raises(CheckpointError, match="_Reviewedless is not registered"):
        to_json_value(_Holder(rows=put(_Reviewedless())))


class _Reviewedless(BaseModel):
    """Unregistered, of a class no registered model's schema names."""

    note: str = ""


class _FrozenInner(BaseModel):
    """Unregistered and hashable (a set's item), every field at its default unless given."""

    model_config = ConfigDict(frozen=True)
    name: str = "x"
    size: int = 0


@register_type
class _FrozenMark(BaseModel):
    """Registered and hashable."""

    model_config = ConfigDict(frozen=True)
    at: int = 0


@pytest.mark.parametrize("kind", [set, frozenset])
def test_a_model_inside_a_set_is_found_as_inside_a_list(kind: type) -> None:
    """pydantic writes a set as a list, so a set in a place typed ``Any`` comes back a list;
    the models it held are looked at as a list's are (``codec._holds_model``, which walked no
    set): in a message's metadata one kept whole, its fields at their defaults too (it came
    back ``{}``, every value lost without a word); in a registered model's ``Any`` place a
    registered one tagged (it came back a dict) and an unregistered one refused (it was saved
    as a dict)."""

    def back(value: Any) -> Any:
        data = encode_checkpoint({"s": to_json_value({"v": value}, "session")})
        return from_json_value(decode_checkpoint(data)["s"])["v"]

    message = Message.user("hi").model_copy(update={"metadata": {"m": kind([_FrozenInner()])}})
    assert back(message).metadata["m"] == [{"name": "x", "size": 0}]
    marks = [_FrozenMark(at=1), _FrozenMark(at=2), _FrozenMark(at=3)]
    held = back(_Holder(rows={"seen": kind(marks), "n": 1.5}))
    assert sorted(held.rows["seen"], key=lambda mark: mark.at) == marks
    with pytest.raises(CheckpointError, match="_FrozenInner is not registered"):
        to_json_value(_Holder(rows=kind([_FrozenInner()])))


# -- models a checkpoint changed without a word: in extras, unregistered in Any, as a dict key -----


@register_type
class _Notebook(BaseModel):
    """A registered model taking extra fields: what it is given beyond its fields is kept."""

    model_config = ConfigDict(extra="allow")
    title: str = ""


async def test_a_model_in_a_models_extras_comes_back_as_itself_or_fails_the_pause(
    tmp_path: Path,
) -> None:
    """pydantic writes a model in another's extras (``extra="allow"``) as its bare fields, and
    neither the look for models nor the walk read ``__pydantic_extra__``: a registered one came
    back from the checkpoint as a dict, and an unregistered one was saved so without a word."""
    finding = Finding(source="wiki", score=0.5)
    notebook = _Notebook(title="t", lead=finding, more=[{"f": finding}], n=1)
    asker = Asker("asker", info="go on?", state=notebook)
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await Runner(asker, store).invoke(
            "go", checkpoint_id="cp", session={"kept": _Notebook(inner=notebook)}
        )
        assert paused.interrupt is not None
        await Runner(asker, store).invoke_resume("cp", "yes")
        [_, resume] = asker.resumes
        assert resume is not None
        kept = asker.session_seen[1]["kept"]
        assert isinstance(kept, _Notebook) and isinstance(kept.inner, _Notebook)
        for back in (resume.state, kept.inner):
            assert back == notebook
            assert isinstance(back.lead, Finding) and isinstance(back.more[0]["f"], Finding)

        unlisted = Asker("asker", info="go on?", state=_Notebook(lead=_Unlisted(source="x")))
        events = await collect(Runner(unlisted, store).run("go", checkpoint_id="cp2"))
    error = events[-1].error
    assert error is not None
    assert re.search(
        r"state of agent:asker\.lead: _Unlisted is not registered for checkpoints \(held where "
        r"the model is typed Any, it would come back as a dict\)",
        error.message,
    ), error.message
    with pytest.raises(CheckpointError, match=r"^v\.deep\.lead: _Unlisted is not") as caught:
        to_json_value(_Notebook(deep=_Notebook(lead=_Unlisted(source="x"))), "v")
    assert caught.value.reason == "unstorable"


class _Either(BaseModel):
    """Unregistered, in a place typed with its class or ``Any`` (``list[_Inner] | Any``)."""

    rows: list[_Inner] | Any = None
    pair: tuple[_Inner, Any] | None = None


@register_type
class _Ledger(BaseModel):
    """Names ``_Inner`` in its schema (``inner``), and holds anything in ``rows``."""

    inner: _Inner = _Inner()
    rows: Any = None
    either: _Either = _Either()


async def test_an_unregistered_model_of_a_class_the_schema_names_in_an_any_place_fails_the_pause(
    tmp_path: Path,
) -> None:
    """The look for models took a model of a class the stored model's schema names (``_Inner``,
    through ``inner``) to sit in a place typed with its class, always: one in ``rows: Any`` was
    saved as pydantic's dict of its fields and a tool's result came back from the checkpoint
    as a dict. It fails the pause now, naming where it is, as one of a class the schema does
    not name does; one where its class is the place's type still needs no registration."""
    ledger = _Ledger(inner=_Inner(name="i"), rows=[_Inner(name="r")])
    asker = Asker("asker", info="go on?")
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        events = await collect(
            Runner(asker, store).run("go", checkpoint_id="cp", session={"ledger": ledger})
        )
        error = events[-1].error
        assert error is not None
        assert re.search(
            r"session\.ledger\.rows: _Inner is not registered for checkpoints \(held where the "
            r"model is typed Any, it would come back as a dict\); call adk\.register_type",
            error.message,
        ), error.message
        assert await store.get("cp") is None  # nothing half-saved

        typed = _Ledger(
            inner=_Inner(name="i"),
            rows={"n": [1, {"source": "x"}]},
            either=_Either(rows=[_Inner(name="e")], pair=(_Inner(name="p"), 2)),
        )
        asker = Asker("asker", info="go on?")
        paused = await Runner(asker, store).invoke(
            "go", checkpoint_id="cp", session={"ledger": typed}
        )
        assert paused.interrupt is not None
        await Runner(asker, store).invoke_resume("cp", "yes")
    back = asker.session_seen[1]["ledger"]
    assert back == typed
    assert isinstance(back.either.rows[0], _Inner) and isinstance(back.either.pair[0], _Inner)

    for loose in (
        _Ledger(rows={"deep": (_Inner(),)}),
        _Ledger(either=_Either(pair=(_Inner(), _Inner(name="loose")))),
    ):
        with pytest.raises(CheckpointError, match=r"^v\.(rows\.deep|either\.pair): _Inner is"):
            to_json_value(loose, "v")


def test_models_in_a_place_typed_with_their_class_or_any_are_saved_without_the_walks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Unregistered models in ``list[_Inner] | Any`` round-trip as themselves, as before the
    read back: the save reads the model back to tell, and that is all it needs. It also walked
    the dump beside the value (``_models_tagged``, for no registered model there) and the value
    beside what it read back (``_lost_model``), though that came back equal: 30,000 such rows
    took 1.4 s to save against 27 ms before the read back, at every pause."""
    walked: list[str] = []

    def counting(name: str) -> Any:
        walk = getattr(codec, name)

        def counted(*args: Any) -> Any:
            walked.append(name)
            return walk(*args)

        return counted

    for name in ("_models_tagged", "_lost_model"):
        monkeypatch.setattr(codec, name, counting(name))
    typed = _Ledger(either=_Either(rows=[_Inner(name=str(i)) for i in range(50)]))
    back = from_json_value(to_json_value(typed))
    assert back == typed and isinstance(back.either.rows[0], _Inner)
    assert walked == []
    with pytest.raises(CheckpointError, match=r"^v\.rows: _Inner is not registered"):
        to_json_value(_Ledger(rows=[_Inner()]), "v")  # one that would come back a dict: walked
    assert "_lost_model" in walked


class _ById(BaseModel):
    """Equal by its id alone: its ``__eq__`` reads the other's id, whatever the other is."""

    id: int = 0

    def __eq__(self, other: object) -> bool:
        return self.id == other.id  # type: ignore[attr-defined]

    __hash__ = BaseModel.__hash__


@register_type
class _ByIdLedger(BaseModel):
    """Names ``_ById`` in its schema (``lead``), and holds anything in ``rows``."""

    lead: _ById = _ById()
    rows: list[_ById] | Any = None


def test_a_models_own_eq_does_not_break_the_read_back() -> None:
    """The save compares what it read back with the value: a model's own ``__eq__`` raising
    for a dict (``other.id``) must neither fail the save nor decide it."""
    typed = _ByIdLedger(rows=[_ById(id=1)])
    back = from_json_value(to_json_value(typed))
    assert isinstance(back.rows[0], _ById) and back.rows[0].id == 1
    with pytest.raises(CheckpointError, match=r"^v\.rows\.a: _ById is not registered"):
        to_json_value(_ByIdLedger(rows={"a": _ById(id=2)}), "v")


def test_a_model_as_a_dict_key_in_an_any_place_is_refused_where_the_walk_meets_it() -> None:
    """pydantic writes a (hashable) model as a dict key as its text, so the key came back as
    ``"name='x' size=0"``. Where the save walks the model's ``Any`` places (it holds a registered
    model, or an unregistered one there), such a key fails it, naming where; a tuple there comes
    back a list, as a tuple anywhere does, its models as themselves."""
    keyed = _Holder(rows={"by": {_FrozenInner(): Point(x=1)}})
    with pytest.raises(CheckpointError, match=r"^v\.rows\.by: dict key _FrozenInner\(") as caught:
        to_json_value(keyed, "v")
    assert caught.value.reason == "unstorable"
    with pytest.raises(CheckpointError, match=r"^v\.either\.rows: dict key _FrozenInner\("):
        to_json_value(_Ledger(either=_Either(rows={_FrozenInner(): _Inner()})), "v")
    paired = from_json_value(to_json_value(_Holder(rows=(Point(x=1), "a"))))
    assert paired.rows == [Point(x=1), "a"] and isinstance(paired.rows[0], Point)


async def test_a_tools_result_with_a_model_in_its_extras_comes_back_through_a_pause(
    tmp_path: Path,
) -> None:
    """A tool's structured result (a registered model taking extras) kept in the history a
    checkpoint holds: the finding in its extras came back as a dict after the resume. A tool
    pausing with an unregistered model of a class its state's schema names, held in ``Any``,
    fails the pause naming the call, where it was saved as a dict."""

    @adk.tool
    async def look(ctx: ToolContext) -> adk.ToolResult:
        """Looks something up."""
        return adk.ToolResult(
            content="found", structured=_Notebook(title="n", lead=Finding(source="wiki"))
        )

    @adk.tool
    async def ask(ctx: ToolContext) -> str:
        """Asks first."""
        if ctx.resume is None:
            raise adk.Interrupt("ok?")
        return "yes"

    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("look", {}, id="c1")]),
            Reply(tool_calls=[tool_call("ask", {}, id="c2")]),
            Reply(text="done"),
        ]
    )
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        paused = await Runner(ReActAgent("a", model=model, tools=[look, ask]), store).invoke(
            "go", checkpoint_id="cp"
        )
        assert paused.interrupt is not None
        done = await Runner(ReActAgent("a", model=model, tools=[look, ask]), store).invoke_resume(
            "cp", True
        )
    [found] = [m for m in done.messages if m.content == "found"]
    kept = found.metadata[codec.STRUCTURED]
    assert isinstance(kept, _Notebook) and isinstance(kept.lead, Finding)

    @adk.tool
    async def hold(ctx: ToolContext) -> str:
        """Pauses holding a ledger."""
        raise adk.Interrupt("ok?", state=_Ledger(rows={"seen": _Inner(name="s")}))

    agent = ReActAgent(
        "a", model=ScriptedModel([Reply(tool_calls=[tool_call("hold", {})])]), tools=[hold]
    )
    with pytest.raises(RunError, match="could not save checkpoint 'cp'") as caught:
        await Runner(agent).invoke("go", checkpoint_id="cp")
    assert re.search(r"/tool:hold#[^:]*\.rows\.seen: _Inner is not registered", str(caught.value))
