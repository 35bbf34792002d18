"""``KeyedOutput.to_dict()``: a local run's outputs as the JSON data a Flink job emits for them,
built by the function the Flink operators use (``_records._as_json``, which ``_flink`` imports),
so a consumer reads both alike; and such JSON for text holding a lone surrogate."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from typing import Any

import pytest
from pydantic import BaseModel, Field, model_serializer

from adk import Interrupt
from adk.actions import ActionAgent, ActionContext, InputEvent, OutputEvent, action
from adk.checkpoint import InMemoryCheckpointStore
from adk.events import ErrorInfo
from adk.execution import KeyedOutput, LocalExecutionEnvironment, _records

KEYS = {"key", "output", "error", "interrupt", "checkpoint_id", "run_id", "resumed", "usage"}


class Score(BaseModel):
    value: float
    label: str = Field(alias="Label")


@action(InputEvent)
def judge(event: InputEvent, ctx: ActionContext) -> None:
    record: dict[str, Any] = event.input
    if record["kind"] == "fail":
        raise ValueError("no score for this one")
    if record["kind"] == "ask" and ctx.resume is None:
        raise Interrupt({"approve": record["n"]})
    ctx.send_event(OutputEvent(output=Score(value=record["n"] / 2, Label=f"n{record['n']}")))


def agent() -> ActionAgent:
    return ActionAgent("judge", actions=[judge])


async def test_a_local_outputs_dict_is_the_dict_a_flink_job_emits_for_it() -> None:
    env = LocalExecutionEnvironment(checkpoint_store=InMemoryCheckpointStore(), on_error="emit")
    records = [
        {"user": ["ann", 1], "kind": "ok", "n": 3},
        {"user": ["bob", 2], "kind": "fail", "n": 0},
        {"user": ["eve", 3], "kind": "ask", "n": 9},
    ]
    outputs = await env.from_list(records, key=lambda r: tuple(r["user"])).apply(agent()).to_list()
    done, failed, paused = outputs

    for output in outputs:
        data = output.to_dict()
        assert data == json.loads(_records._as_json(output))  # the Flink operators' own text
        assert set(data) == KEYS
        assert data["key"] == list(output.key)  # JSON's array, as Flink's text gives it
        assert data["run_id"] == output.run_id and data["resumed"] is False
    assert done.to_dict()["output"] == {"value": 1.5, "Label": "n3"}
    assert done.to_dict()["error"] is None and done.to_dict()["interrupt"] is None
    assert failed.to_dict()["error"] == {
        "type": "ActionError",
        "message": failed.error.message if failed.error else None,
        "cause": "ValueError",  # what the action raised
    }
    assert "no score for this one" in failed.to_dict()["error"]["message"]
    asked = paused.to_dict()
    assert asked["checkpoint_id"] == paused.checkpoint_id is not None
    assert asked["interrupt"]["checkpoint_id"] == paused.checkpoint_id
    assert asked["interrupt"]["points"][0]["info"] == {"approve": 9}

    # The dict, with the person's answer added, is a resume, as a Flink job's JSON text is.
    resume = {**asked, "resume": "yes"}
    later = await env.from_list([], key="user").apply(agent(), resumes=[resume]).to_list()
    assert [(o.key, o.to_dict()["output"], o.resumed) for o in later] == [
        (("eve", 3), {"value": 4.5, "Label": "n9"}, True)
    ]


def test_an_output_json_cannot_hold_is_refused_as_on_flink() -> None:
    with pytest.raises(ValueError, match=r"the output holds NaN at output\.x"):
        KeyedOutput("k", 0, None, output={"x": float("nan")}).to_dict()


def test_an_output_json_cannot_write_is_refused_naming_where() -> None:
    """Bytes that are not UTF-8 (a thumbnail an action output) were refused with pydantic's
    words alone (``invalid utf-8 sequence of 1 bytes from index 0``), naming no place."""
    output = KeyedOutput("k", 0, None, output={"thumb": {"png": b"\x89PNG\xff"}})
    with pytest.raises(
        ValueError, match=r"^record 0 \(key 'k'\) cannot be written as JSON: bytes "
    ):
        output.to_dict()
    with pytest.raises(ValueError, match=r"not UTF-8 text at output\.thumb\.png \(decode them"):
        output.to_dict()


def test_text_holding_a_lone_surrogate_is_written_escaped_and_reads_back_the_same() -> None:
    """A model's ``"\\ud800"`` escape in an output or a key: pydantic refused to write it
    ('surrogates not allowed') and the record failed on Flink. It is written ASCII-escaped."""
    odd = "x\ud800y"
    output = KeyedOutput(odd, 0, None, output={"text": odd, "n": [1, 2.5]})
    text = _records._as_json(output)
    text.encode("utf-8")  # valid UTF-8 for the next operator and any sink
    assert json.loads(text) == output.to_dict()
    assert output.to_dict()["key"] == odd and output.to_dict()["output"] == {
        "text": odd,
        "n": [1, 2.5],
    }
    assert _records._json_text(odd, "record 0") == json.dumps(odd)
    plain = KeyedOutput("k", 0, None, output="é")  # the common case stays UTF-8, unescaped
    assert '"é"' in _records._as_json(plain)


class _Reading:
    """A value of one's own that pydantic cannot encode (no model, no dataclass)."""

    def __init__(self, value: float) -> None:
        self.value = value


class _Report(BaseModel):
    extra: dict[str, Any]


class _Loose(BaseModel, extra="allow"):
    name: str = ""


@dataclasses.dataclass
class _Row:
    cells: list[Any]


@action(InputEvent)
def read(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output={"sensor": event.input["id"], "rows": [_Reading(1.5)]}))


async def test_an_output_json_cannot_hold_is_an_error_naming_the_record_its_key_and_the_type() -> (
    None
):
    """An output holding a value pydantic cannot encode (an object of one's own, what a tool's
    ``structured`` result may be) was written as its ``str()``: ``"<...._Reading object at
    0x...>"`` reached a consumer in place of the data, with no word. It is a ``ValueError``
    naming the record, its key, the type and where it is; the output itself is kept as it was."""
    env = LocalExecutionEnvironment()
    [output] = (
        await env.from_list([{"id": "s1"}], key="id")
        .apply(ActionAgent("reader", actions=[read]))
        .to_list()
    )
    assert isinstance(output.output["rows"][0], _Reading)  # locally, the value as it was sent
    with pytest.raises(ValueError) as refused:
        output.to_dict()
    said = str(refused.value)
    assert said.startswith("record 0 (key 's1') cannot be written as JSON: "), said
    assert "_Reading at output.rows[0] (Unable to serialize unknown type: " in said, said
    assert "test_keyed_output_json._Reading" in said, said
    assert output.output["rows"][0].value == 1.5  # nothing lost

    # A key JSON cannot hold (a local key may be any hashable), and a dict key, the same way.
    with pytest.raises(ValueError, match=r"JSON: _Reading at key \(Unable to serialize unknown"):
        KeyedOutput(_Reading(2.0), 0, None, output="fine").to_dict()
    with pytest.raises(ValueError, match=r"JSON: _Reading as a key at output\.by_reading \("):
        KeyedOutput("k", 0, None, output={"by_reading": {_Reading(2.0): 1}}).to_dict()
    # Inside a model's field of type Any (a model's dump met it first: same error, same place).
    with pytest.raises(ValueError, match=r"JSON: _Reading at output\[0\]\.extra\.raw \("):
        KeyedOutput("k", 0, None, output=[_Report(extra={"raw": _Reading(3.0)})]).to_dict()
    # A model's extra and a dataclass's field: named there, not the model or dataclass whole.
    with pytest.raises(ValueError, match=r"JSON: _Reading at output\.raw \("):
        KeyedOutput("k", 0, None, output=_Loose(raw=_Reading(3.0))).to_dict()
    with pytest.raises(ValueError, match=r"JSON: _Reading at output\.cells\[1\] \("):
        KeyedOutput("k", 0, None, output=_Row(cells=[1, _Reading(3.0)])).to_dict()
    # A dict key pydantic cannot write (a frozenset), in a model too, where it was a TypeError,
    # which a Flink operator does not take as a record's failure either.
    with pytest.raises(ValueError, match=r"JSON: frozenset as a key at output\.raw \(`frozenset` "):
        KeyedOutput("k", 0, None, output=_Loose(raw={frozenset({1}): 1})).to_dict()
    # Text holding a lone surrogate beside it is JSON (written escaped): the object is named.
    with pytest.raises(ValueError, match=r"JSON: _Reading at output\.r \("):
        KeyedOutput("k", 0, None, output={"t": "x\ud800", "r": _Reading(1.0)}).to_dict()
    # One that holds itself: Python's RecursionError before (a Flink job failed on it, its
    # operator taking only a ValueError as the record's failure), in a model's field too.
    looped: list[Any] = [1]
    looped.append({"again": looped})
    with pytest.raises(
        ValueError, match=r"JSON: it holds itself \(the list at output\.rows\[1\]\.again is inside"
    ):
        KeyedOutput("k", 0, None, output={"rows": looped}).to_dict()
    with pytest.raises(ValueError, match=r"JSON: it holds itself \(the list at output\[0\]\.extra"):
        KeyedOutput("k", 0, None, output=[_Report(extra={"l": looped})]).to_dict()
    # Nested deeper than Python recurses: a ValueError too, not a RecursionError.
    deep: list[Any] = []
    for _ in range(sys.getrecursionlimit() + 10):
        deep = [deep]
    with pytest.raises(ValueError, match=r"JSON: list nested deeper than 200 levels at output\["):
        KeyedOutput("k", 0, None, output=deep).to_dict()
    # Nested past what pydantic writes but not past Python: too deep too, with its place (was
    # pydantic's words alone, 'Circular reference detected (depth exceeded)').
    deep = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(ValueError, match=r"JSON: list nested deeper than 200 levels at output\["):
        KeyedOutput("k", 0, None, output=deep).to_dict()
    # In a model's field or extra: too deep there (was 'list at output[0].extra
    # (Circular reference detected (depth exceeded); make it JSON data or a pydantic model)').
    with pytest.raises(
        ValueError, match=r"JSON: list nested deeper than 200 levels at output\[0\]\.e"
    ):
        KeyedOutput("k", 0, None, output=[_Report(extra={"d": deep})]).to_dict()
    with pytest.raises(ValueError, match=r"JSON: list nested deeper than 200 levels at output\.d"):
        KeyedOutput("k", 0, None, output=_Loose(d=deep)).to_dict()
    # Bytes 210 levels down, which JSON nests: the bytes are what it cannot write, not the
    # nesting (was 'list nested deeper than 200 levels ... (flatten it)').
    deep = b"\xff"
    for _ in range(210):
        deep = [deep]
    with pytest.raises(ValueError) as refused:
        KeyedOutput("k", 0, None, output=deep).to_dict()
    assert "nested deeper" not in str(refused.value) and "flatten" not in str(refused.value)
    assert "'utf-8' codec can't decode byte 0xff" in str(refused.value), str(refused.value)
    # What pydantic encodes (sets, dataclasses, dates) is written as before.
    assert KeyedOutput("k", 0, None, output={"tags": {"a"}}).to_dict()["output"] == {"tags": ["a"]}
    assert KeyedOutput("k", 0, None, output=_Row(cells=[1])).to_dict()["output"] == {"cells": [1]}


class _Thumbnail(BaseModel):
    name: str
    png: bytes


@pytest.mark.parametrize(
    ("output", "where"),
    [
        (_Thumbnail(name="t", png=b"\x89PNG\xff"), "at output.png "),
        ({"thumbs": [_Thumbnail(name="t", png=b"\x89PNG\xff")]}, "at output.thumbs[0].png "),
    ],
    ids=["model", "model-in-dict"],
)
def test_an_output_model_json_cannot_write_is_refused_naming_where(output: Any, where: str) -> None:
    """An output that is (or holds) a model with bytes that are not UTF-8 (an action's
    OutputEvent(output=Thumbnail(...))) was refused with pydantic's words alone, a bare
    UnicodeDecodeError ("'utf-8' codec can't decode byte 0x89"): the walk naming where was
    reached only for an output of dicts and lists."""
    with pytest.raises(
        ValueError, match=r"^record 0 \(key 'k'\) cannot be written as JSON: bytes th"
    ) as no:
        KeyedOutput("k", 0, None, output=output).to_dict()
    assert where in str(no.value)


class _Nested(BaseModel):
    """A model that writes itself (``@model_serializer``) nested past pydantic's limit: the
    walk names the model, not a place inside it."""

    @model_serializer
    def _written(self) -> Any:
        value: Any = 1
        for _ in range(300):
            value = [value]
        return value


@pytest.mark.parametrize(
    ("output", "where"),
    [
        (_Nested(), "at output ("),
        ({"a": _Nested()}, "at output.a ("),
        ([_Nested()], "at output[0] ("),
    ],
    ids=["top", "in-dict", "in-list"],
)
def test_a_model_too_deep_at_a_short_path_is_named_there_without_an_ellipsis(
    output: Any, where: str
) -> None:
    """A value too deep whose place is short (a model that writes itself nested too deeply,
    found where it is) was said to be 'at output.a... (flatten it)', and 'at output...' at the top,
    as if the path went on and had been cut: only a path longer than is shown is cut."""
    with pytest.raises(ValueError, match=r"_Nested nested deeper than 200 levels") as no:
        KeyedOutput("k", 0, None, output=output).to_dict()
    assert where in str(no.value) and "..." not in str(no.value), str(no.value)


class _Tally(BaseModel):
    counts: dict[Any, int]


def test_a_model_holding_a_key_json_cannot_write_is_a_value_error_naming_where() -> None:
    """A model whose dict field has a key JSON cannot write (a ``frozenset``) escaped the walk as
    pydantic's bare ``TypeError`` (its field serializer raises one, not a ValueError): to_dict
    raised it unnamed, and a Flink operator, taking only a ValueError as a record's failure,
    failed the job (test_flink_encoding has the operator's case)."""
    tally = _Tally(counts={frozenset({"a", "b"}): 2})
    with pytest.raises(
        ValueError, match=r"^record 0 \(key 'k'\) cannot be written as JSON: "
    ) as no:
        KeyedOutput("k", 0, None, output={"tally": tally}).to_dict()
    assert "frozenset as a key at output.tally.counts" in str(no.value)


def test_beside_a_lone_surrogate_a_key_json_cannot_write_is_still_named() -> None:
    """Text holding a lone surrogate sends the output through the escaped writing, whose own
    refusal of a frozenset key (a TypeError) went out bare: to_dict raised it unnamed, and a
    Flink operator, which takes only a ValueError as a record's failure, failed the job."""
    output = {"text": "\ud800", "counts": {frozenset("ab"): 2}}
    with pytest.raises(
        ValueError, match=r"^record 0 \(key 'k'\) cannot be written as JSON: "
    ) as no:
        KeyedOutput("k", 0, None, output=output).to_dict()
    assert "frozenset as a key at output.counts" in str(no.value)


class _Badge:
    """A key of one's own (hashable, not JSON), as a local run may key its records by."""

    def __init__(self, number: int) -> None:
        self.number = number

    def __hash__(self) -> int:
        return self.number

    def __repr__(self) -> str:
        return f"_Badge({self.number})"


def test_a_failed_outputs_dict_gives_its_error_whatever_its_key_as_on_flink() -> None:
    """A Flink job emits a failed record's error with its key as its ``repr`` when JSON cannot
    hold the key (a NaN), so that the error leaves; to_dict, "the dict a Flink job emits for
    it", raised a ValueError about the key instead, and a consumer shipping a local run's
    errors lost them (a key of one's own, written as its str before, is refused since outputs
    lost ``fallback=str``). An output that did not fail is still refused for such a key."""
    failed = ErrorInfo("RuntimeError", "no score for this one")
    for key, said in ((math.nan, "nan"), (_Badge(7), "_Badge(7)")):
        data = KeyedOutput(key, 0, None, error=failed).to_dict()
        assert data["key"] == said and data["error"] == {
            "type": "RuntimeError",
            "message": "no score for this one",
        }
        with pytest.raises(ValueError, match=r"^record 0 \(key .*\) cannot be written as JSON"):
            KeyedOutput(key, 0, None, output="fine").to_dict()
