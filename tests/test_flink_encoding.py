"""What the Flink operators send on: JSON texts only, as checkpoints hold JSON only.

The operator functions are called here as PyFlink calls them (``async_invoke`` with the ``Row`` that
``key_by`` makes, ``process_element`` with the keyed state), without a cluster: Flink's part, the
state and the key, is a stand-in. tests/test_flink.py runs the same on a real MiniCluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import enum
import importlib.util
import json
import math
import os
import pickle
import re
import subprocess
import sys
import threading
import types
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

if importlib.util.find_spec("pyflink") is None:  # tests/test_flink.py says how to get it
    pytest.skip("needs PyFlink (pip install 'pyadk[flink]')", allow_module_level=True)

import cloudpickle  # PyFlink's own dependency, which it ships a job's functions with
from flink_job import KeyedState
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pyflink.common import Row

from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    ErrorInfo,
    OpenAIChatModel,
    Resources,
    RunContext,
    Runner,
    Usage,
)
from adk.actions import ActionAgent, ActionContext, Event, InputEvent, OutputEvent, action
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import from_json_value
from adk.execution import FlinkExecutionEnvironment, FlinkKeyedOutputs, RecordError
from adk.execution._flink import (
    _AgentFunction,
    _as_json,
    _build_shipped_events,
    _decoded_key,
    _failure_text,
    _keyed_rows,
    _KeyedStateFunction,
    _KeyFinder,
    _NoKey,
    _raise_failures,
    _Reported,
    _shipping,
)
from adk.execution._records import KeyedOutput


@action(InputEvent)
def score(event: InputEvent, ctx: ActionContext) -> None:
    """Keeps the record's score (a model's number, say) in the session and outputs it; counts the
    records of its key that the session remembers. ``digits`` makes the score an int that long."""
    record: dict[str, Any] = event.input
    value = 10 ** record["digits"] if "digits" in record else float(record["score"])
    values = ctx.session.values
    values["seen"] = values.get("seen", 0) + 1
    if record.get("keep"):
        values["score"] = value
        ctx.send_event(OutputEvent(output={"seen": values["seen"]}))
    else:
        ctx.send_event(OutputEvent(output={"seen": values["seen"], "score": value}))


def _environment(**options: Any) -> FlinkExecutionEnvironment:
    # Flink's own environment is not needed to call the functions (nor to refuse records).
    return FlinkExecutionEnvironment(object(), **options)  # type: ignore[arg-type]


def _texts_of(outputs: list[str]) -> list[dict[str, Any]]:
    return [json.loads(text, parse_constant=_not_json) for text in outputs]


def _not_json(name: str) -> Any:
    raise AssertionError(f"{name} is not JSON")


# -- the encoding ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("output", "where"),
    [
        ({"score": math.nan}, "NaN at output.score"),
        ({"scores": [1.0, math.inf]}, "Infinity at output.scores[1]"),
        (-math.inf, "-Infinity at output,"),
        ({"n": 10**5000}, "an int of 5001 digits (longer than 4300) at output.n"),
        ({"": {"a.b": math.nan}}, "NaN at output['']['a.b']"),  # not output..a.b
    ],
)
def test_an_output_json_cannot_hold_is_refused_saying_where(output: Any, where: str) -> None:
    with pytest.raises(ValueError, match="the output holds") as refused:
        _as_json(KeyedOutput("k", 0, None, output=output))
    assert where in str(refused.value)
    assert "not a JSON number (make it None or a string)" in str(refused.value)


def test_text_that_only_looks_like_nan_passes_unchanged() -> None:
    output = {"fruit": "BaNaNa", "note": "Infinity and beyond", "n": 12, "big": "9" * 5000}
    assert json.loads(_as_json(KeyedOutput("k", 0, None, output=output)))["output"] == output


def test_from_list_refuses_a_record_json_cannot_hold() -> None:
    env = _environment()
    with pytest.raises(ValueError, match=r"record 1 holds NaN at score, which is not a JSON"):
        env.from_list([{"score": 1.0}, {"score": math.nan}], key="id")


def test_from_list_refuses_one_record_not_wrapped_in_a_list() -> None:
    """A dict iterated as its field names, each a record of its own, as locally."""
    with pytest.raises(TypeError, match=r"got dict \(wrap a single record in a list"):
        _environment().from_list({"id": "a", "score": 1.0}, key="id")


def test_a_plain_for_over_a_jobs_outputs_says_how_to_take_them() -> None:
    """Python's own "'FlinkKeyedOutputs' object is not iterable" said nothing of ``to_list``."""
    outputs = FlinkKeyedOutputs(_environment(), object())  # type: ignore[arg-type]
    for take in (iter, list):
        with pytest.raises(
            TypeError, match=r"'outputs\.to_list\(\)'.*'outputs\.to_datastream\(\)'"
        ):
            take(outputs)  # type: ignore[call-overload]


class _Collected:
    """A job's outputs as ``execute_and_collect`` gives them, without running a job."""

    def __init__(self, *outputs: dict[str, Any]) -> None:
        self.texts = [json.dumps(output) for output in outputs]

    def execute_and_collect(self) -> contextlib.AbstractContextManager[list[str]]:
        return contextlib.nullcontext(self.texts)


def test_a_jobs_pauses_kept_in_its_workers_memory_are_said_to_be_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without a checkpoint_store each worker kept its pauses in memory, gone with the bounded
    job: a paused output's checkpoint_id named nothing, without a word (tried on a MiniCluster,
    a record paused for approval). ``to_list`` says so; with a store, or no pause, it is quiet."""
    paused = {"key": "u14", "output": None, "checkpoint_id": "c1", "run_id": "r1"}
    done = {"key": "u1", "output": 1, "checkpoint_id": None, "run_id": "r2"}
    for env, stream, warned in (
        (_environment(), _Collected(done, paused, paused), True),
        (_environment(checkpoint_store=InMemoryCheckpointStore), _Collected(paused), False),
        (_environment(), _Collected(done), False),
    ):
        caplog.clear()
        with caplog.at_level("WARNING", logger="adk.execution"):
            taken = FlinkKeyedOutputs(env, stream).to_list()  # type: ignore[arg-type]
        assert taken == [json.loads(text) for text in stream.texts]
        said = [r.getMessage() for r in caplog.records if r.name == "adk.execution"]
        if warned:
            [message] = said
            assert message.startswith(
                "2 paused output(s) of this Flink job (the first of key 'u14')"
            )
            assert (
                "their checkpoint_id cannot be resumed" in message
                and "checkpoint_store=" in message
            )
        else:
            assert said == []


class _SensorReading(BaseModel):
    sensor: str
    value: float
    extra: dict[str, Any] = {}


@pytest.mark.parametrize("key", [None, "sensor"])
@pytest.mark.parametrize(
    ("reading", "where"),
    [
        (_SensorReading(sensor="b", value=math.nan), "NaN at value"),
        (_SensorReading(sensor="b", value=1.0, extra={"max": math.inf}), "Infinity at extra.max"),
    ],
)
def test_from_list_refuses_a_model_record_holding_nan_instead_of_sending_null(
    key: str | None, reading: _SensorReading, where: str
) -> None:
    """A pydantic model record was written with its own JSON setting, ``null`` for NaN (and
    with a key, for the NaN in its dict fields): the agent read a value the record never held,
    where a dict record holding it is refused. Both are refused now, naming where."""
    env = _environment()
    with pytest.raises(ValueError, match=rf"record 1 holds {where}, which is not a JSON"):
        env.from_list([_SensorReading(sensor="a", value=2.0), reading], key=key)


class _Frame(BaseModel):
    camera: str
    image: bytes


@pytest.mark.parametrize("key", ["camera", None])
@pytest.mark.parametrize(
    ("record", "where"),
    [
        ({"camera": "b", "image": b"\x89PNG\xff"}, "bytes that are not UTF-8 text at image"),
        (_Frame(camera="b", image=b"\x89PNG\xff"), "bytes that are not UTF-8 text at image"),
        ({"camera": "b", "tags": [1, object()]}, "object at tags[1]"),
    ],
    ids=["dict-bytes", "model-bytes", "object"],
)
def test_from_list_names_a_record_json_cannot_write_and_where(
    key: str | None, record: Any, where: str
) -> None:
    """A record holding a binary payload (an image off a broker) or an object of its own was
    refused with pydantic's words alone, ``invalid utf-8 sequence of 1 bytes from index 0`` or
    ``Unable to serialize unknown type: <class 'object'>``: neither the record among thousands
    nor its field. Now the error names both, as for a record holding NaN."""
    first = {"camera": "a", "image": b"fine, UTF-8"}
    with pytest.raises(ValueError, match=r"^record 1 cannot be written as JSON: ") as refused:
        _environment().from_list([first, record], key=key)
    assert where in str(refused.value)


def test_an_output_json_cannot_write_fails_its_record_naming_where() -> None:
    """A worker's output holding bytes that are not UTF-8 failed its record with pydantic's
    words alone; now it names where in the output they are."""
    with pytest.raises(ValueError, match=r"the output cannot be written as JSON") as refused:
        _as_json(KeyedOutput("k", 0, None, output={"frames": [b"ok", b"\xff\xd8"]}))
    assert "bytes that are not UTF-8 text at output.frames[1]" in str(refused.value)


# -- the async operator ----------------------------------------------------------------------------
def _invoked(function: _AgentFunction, *rows: Row) -> list[list[dict[str, Any]] | BaseException]:
    """Each row's outputs (or failure), the rows handed over one after another on one event loop,
    which then stops before the function is closed, as PyFlink's async operator does."""

    async def each() -> list[list[dict[str, Any]] | BaseException]:
        results: list[list[dict[str, Any]] | BaseException] = []
        for row in rows:
            try:
                results.append(_texts_of(await function.async_invoke(row)))
            except Exception as exc:
                results.append(exc)
        return results

    try:
        return asyncio.run(each())
    finally:
        function.close()


def _scorer(**options: Any) -> _AgentFunction:
    return _AgentFunction(ActionAgent("s", actions=[score]), _environment(**options), True, None)


def test_a_record_whose_output_json_cannot_hold_fails_and_its_session_is_dropped() -> None:
    rows = (Row("a", {"score": "1.5"}), Row("a", {"score": "nan"}), Row("a", {"score": "2"}))
    fine, failed, again = _invoked(_scorer(on_error="emit"), *rows)
    assert isinstance(fine, list) and isinstance(failed, list) and isinstance(again, list)
    assert fine[0]["output"] == {"seen": 1, "score": 1.5} and fine[0]["error"] is None

    [error] = failed
    assert error["output"] is None and error["key"] == "a"
    assert error["error"]["type"] == "ValueError"
    assert error["error"]["message"].startswith("record 1 (key 'a') cannot be sent or kept")
    assert "NaN at output.score" in error["error"]["message"]

    # Its session writes were dropped, as a failed record's are: the count goes on from 1.
    assert again[0]["output"] == {"seen": 2, "score": 2.0}


class _Opaque:
    """A value of one's own that pydantic cannot encode (what a tool's ``structured`` may be)."""

    def __repr__(self) -> str:
        return "<_Opaque>"


@action(InputEvent)
def opaque(event: InputEvent, ctx: ActionContext) -> None:
    """Counts its key's records in the session; outputs an opaque value when asked to."""
    values = ctx.session.values
    values["seen"] = values.get("seen", 0) + 1
    extra = {"reading": [_Opaque()]} if event.input.get("opaque") else {}
    ctx.send_event(OutputEvent(output={"seen": values["seen"], **extra}))


def test_a_record_whose_output_pydantic_cannot_encode_fails_naming_the_type_and_where() -> None:
    """Such a value was sent as its ``str()`` (``"<_Opaque>"``): the next operator read text in
    place of the data, and the record's session was kept as if all were well. The record fails
    as for a NaN, naming its key, the type and where; its session writes are dropped."""
    function = _AgentFunction(
        ActionAgent("o", actions=[opaque]), _environment(on_error="emit"), True, None
    )
    rows = (Row("a", {}), Row("a", {"opaque": True}), Row("a", {}))
    fine, failed, again = _invoked(function, *rows)
    assert isinstance(fine, list) and isinstance(failed, list) and isinstance(again, list)
    assert fine[0]["output"] == {"seen": 1}
    [error] = failed
    assert error["output"] is None and error["key"] == "a"
    message = error["error"]["message"]
    assert message.startswith("record 1 (key 'a') cannot be sent or kept as JSON: "), message
    assert "_Opaque at output.reading[0] (Unable to serialize unknown type: " in message
    assert "test_flink_encoding._Opaque" in message
    assert again[0]["output"] == {"seen": 2}  # the failed record's write was dropped


def test_with_on_error_raise_such_a_record_fails_the_job() -> None:
    [failure] = _invoked(_scorer(), Row("a", {"score": "nan"}))
    assert isinstance(failure, RecordError)
    assert "record 0 (key 'a') failed: ValueError: " in str(failure) and "NaN" in str(failure)


def test_a_nan_key_still_gets_its_error_out() -> None:
    [outputs] = _invoked(_scorer(on_error="emit"), Row(math.nan, {"score": "1"}))
    assert isinstance(outputs, list)
    [failed] = outputs
    assert failed["key"] == "nan" and "NaN at key" in failed["error"]["message"]


def test_a_record_whose_key_function_fails_in_key_by_is_a_record_error() -> None:
    """``from_datastream``'s ``key_by`` runs the key function in the workers, where its KeyError
    failed the job bare; shipped as PyFlink ships it (cloudpickle), it gives the record a key
    that fails it in the operator, as locally: with ``on_error="raise"`` a ``RecordError``
    saying it was the key (tests/test_flink.py runs ``"emit"`` on a MiniCluster)."""
    finder = cloudpickle.loads(cloudpickle.dumps(_KeyFinder(lambda r: r["user"], False)))
    record = {"score": "1"}
    [failure] = _invoked(_scorer(), Row(finder(record), record))
    assert isinstance(failure, RecordError) and failure.key is None and failure.run_id is None
    assert "record 0 (key None) failed: KeyError: the key function failed on it" in str(failure)
    assert finder({"user": "ann"}) == "ann"


@pytest.mark.parametrize("durable", [False, True])
def test_a_from_list_records_failure_names_its_place_in_the_list_on_any_instance(
    durable: bool,
) -> None:
    """With parallelism above 1 an instance gets some of a list's records only: its own count
    named the list's record 17 ``record 8`` (tried on a MiniCluster, parallelism 2), in the
    ``RecordError`` and in an emitted error's text, where locally it says ``record 17``. A
    ``from_list`` row carries its position; a resume, which has none, is counted as before."""
    records = [
        {"user": "a", "score": "1"},
        {"user": "b", "score": "1"},
        {"user": "b", "score": "x"},
    ]
    rows = _keyed_rows("user", records)
    nan = _keyed_rows("user", [*records[:2], {"user": "b", "score": "nan"}])[2]
    found: list[Any] = []
    for on_error, row in (("raise", rows[2]), ("emit", nan)):  # this instance's first record
        env = _environment(on_error=on_error, durable_memory=durable)
        agent = ActionAgent("s", actions=[score])
        if durable:
            function = _KeyedStateFunction(agent, env, json.loads, True)
            function.open(KeyedState(row[0]))
            try:
                found.append(list(function.process_element(row, KeyedState(row[0]))))
            except RecordError as exc:
                found.append(exc)
            finally:
                function.close()
        else:
            function = _AgentFunction(agent, env, True, json.loads, True)
            found.extend(_invoked(function, Row(row[0], row)))
    failure, emitted = found
    assert isinstance(failure, RecordError) and failure.index == 2
    assert str(failure).startswith("record 2 (key 'b') failed: ")
    [failed] = _texts_of(emitted) if durable else emitted
    assert failed["error"]["message"].startswith("record 2 (key 'b') cannot be sent or kept")


def test_unkeyed_from_list_records_on_two_instances_have_keys_of_their_own() -> None:
    """Without a key a record's key is its number: each instance counted from 0, so with
    parallelism 2 two records had the key ``("record", 0)`` (tried on a MiniCluster), and a
    consumer joining the outputs by key mixed them up. A list's record is its position."""

    class Collections:  # Flink's environment, for from_list: the collection it is given
        def from_collection(self, rows: list[Row], type_info: Any) -> list[Row]:
            return rows

    env = FlinkExecutionEnvironment(Collections(), on_error="emit")  # type: ignore[arg-type]
    rows = env.from_list([{"score": s} for s in ("1", "2", "3", "nan")])._stream
    agent = ActionAgent("s", actions=[score])
    outputs: list[dict[str, Any]] = []
    for mine in (rows[0::2], rows[1::2]):  # what each of two instances gets
        for found in _invoked(_AgentFunction(agent, env, False, json.loads), *mine):
            assert isinstance(found, list)
            outputs += found
    assert sorted(output["key"] for output in outputs) == [["record", n] for n in range(4)]
    assert [output["output"]["score"] for output in outputs[:3]] == [1.0, 3.0, 2.0]
    assert outputs[3]["error"]["message"].startswith("record 3 (key ('record', 3)) cannot")


def _no_resources() -> Resources:
    raise ValueError("no API key for OpenAI: pass api_key= or set OPENAI_API_KEY")


def test_what_the_async_operator_fails_with_is_raised_by_the_operator_after_it() -> None:
    """Raised from ``async_invoke``, a failure (a ``RecordError`` under ``on_error="raise"``, a
    worker's ``resources`` function that raises) was kept by PyFlink's async operator to raise at
    its next element, and dropped when its element completed before the operator's end of input:
    on a MiniCluster 2 of 8 one-record jobs (parallelism 2) ended with no output and no error.
    The function PyFlink is given hands it on as an output; the map after it raises it."""
    rows = (Row("a", {"score": "1"}), Row("a", {"score": "x"}))
    _, direct = _invoked(_scorer(), *rows)  # as async_invoke raises it
    reported = _Reported(_scorer())

    async def each(function: _Reported, *given: Row) -> list[list[str]]:
        return [await function.async_invoke(row) for row in given]

    try:
        [text], [marked] = asyncio.run(each(reported, *rows))
    finally:
        reported.close()
    assert _raise_failures(text) == text and json.loads(text)["output"]["score"] == 1.0
    with pytest.raises(RecordError) as raised:
        _raise_failures(marked)
    failure = raised.value
    assert isinstance(direct, RecordError) and (failure.index, failure.key) == (1, "a")
    assert str(failure) == str(direct) and failure.error.type == "ActionError" and failure.run_id
    # What the action raised (``ErrorInfo.cause``), as the record's error held it where it ran:
    # an operator groups a raising job's failure by it as it groups emitted outputs.
    assert failure.error == direct.error and failure.error.cause == "ValueError"

    env = _environment(on_error="emit", resources=_no_resources)  # emit: still the job's failure
    broken = _Reported(_AgentFunction(ActionAgent("s", actions=[score]), env, True, None))
    try:
        [[marked]] = asyncio.run(each(broken, rows[0]))
    finally:
        broken.close()
    with pytest.raises(RuntimeError, match=r"operator failed: ValueError: no API key for OpenAI"):
        _raise_failures(marked)

    paid = Usage(input_tokens=5, output_tokens=2, total_tokens=7)
    kept = RecordError(3, ("a", 1), None, ErrorInfo("E", "m"), "r-1", usage=paid)
    with pytest.raises(RecordError) as raised:
        _raise_failures(_failure_text(kept))
    again = raised.value
    assert (again.index, again.key, again.run_id, again.usage, str(again)) == (
        3,
        ("a", 1),
        "r-1",
        paid,
        str(kept),
    )


def test_records_after_a_failure_the_job_raises_do_not_run() -> None:
    """PyFlink's async operator raised a record's failure at the next element it was handed,
    which never ran; handed on as an output, the failure waits for the records before it
    (ordered outputs) before its map fails the job, and the records handed over meanwhile (up to
    ``max_concurrency``) ran, model calls and tools included. They are the failure again, not
    run: the map raises the first record's."""
    ran: list[Any] = []

    @action(InputEvent)
    def counted(event: InputEvent, ctx: ActionContext) -> None:
        ran.append(event.input["n"])
        if event.input.get("bad"):
            raise ValueError("bad record")
        ctx.send_event(OutputEvent(output=event.input["n"]))

    agent = ActionAgent("c", actions=[counted])
    reported = _Reported(_AgentFunction(agent, _environment(on_error="raise"), True, None))
    rows = [Row("a", {"n": 0}), Row("b", {"n": 1, "bad": True}), Row("c", {"n": 2})]

    async def each() -> list[list[str]]:
        return [await reported.async_invoke(row) for row in rows]

    try:
        [fine], [failed], [after] = asyncio.run(each())
    finally:
        reported.close()
    assert ran == [0, 1] and json.loads(_raise_failures(fine))["output"] == 0
    for marked in (failed, after):
        with pytest.raises(RecordError, match=r"^record 1 \(key 'b'\) failed: ActionError"):
            _raise_failures(marked)


# -- the durable-memory operator -------------------------------------------------------------------
def test_a_session_json_cannot_hold_fails_its_record_instead_of_the_job() -> None:
    """With durable memory the session is saved as checkpoint JSON, which refuses an int too long
    to read back: the record fails (an output, with on_error="emit") and the state keeps the
    session before it. (It used NaN, which checkpoint JSON now keeps: see the next test.)"""
    env = _environment(on_error="emit", durable_memory=True)
    function = _KeyedStateFunction(ActionAgent("s", actions=[score]), env, None)
    state = KeyedState("a")
    function.open(state)
    try:
        fine = _texts_of(list(function.process_element({"score": "1", "keep": True}, state)))
        assert fine[0]["output"] == {"seen": 1}
        kept = state.stored

        outputs = list(function.process_element({"digits": 5000, "keep": True}, state))
        [failed] = _texts_of(outputs)
        assert failed["output"] is None and failed["error"]["type"] == "CheckpointError"
        assert "record 1 (key 'a') cannot be sent or kept as JSON" in failed["error"]["message"]
        assert "the session of key 'a'" in failed["error"]["message"]
        # The refusal's word, as every other CheckpointError's output has (ErrorInfo.reason).
        assert failed["error"].get("reason") == "unstorable", failed["error"]
        assert state.stored == kept

        again = _texts_of(list(function.process_element({"score": "2", "keep": True}, state)))
        assert again[0]["output"] == {"seen": 2}
    finally:
        function.close()


def test_a_durable_session_keeps_nan_and_infinity() -> None:
    """Checkpoint JSON keeps NaN and infinities (tagged): a durable session holding one was a
    failed record, its session writes dropped, where the operator's memory kept it."""
    env = _environment(on_error="emit", durable_memory=True)
    function = _KeyedStateFunction(ActionAgent("s", actions=[score]), env, None)
    state = KeyedState("a")
    function.open(state)
    try:
        kept = _texts_of(list(function.process_element({"score": "-inf", "keep": True}, state)))
        assert kept[0]["output"] == {"seen": 1} and kept[0]["error"] is None
        assert "Infinity" not in state.stored  # JSON every reader takes
        assert from_json_value(json.loads(state.stored))["score"] == -math.inf
        again = _texts_of(list(function.process_element({"score": "nan", "keep": True}, state)))
        assert again[0]["output"] == {"seen": 2}  # the session with -inf was read back
    finally:
        function.close()
    assert math.isnan(from_json_value(json.loads(state.stored))["score"])


def test_operators_still_emit_ordinary_outputs_as_before() -> None:
    text = _as_json(KeyedOutput("k", 0, None, output={"a": [1, 2.5, None, "x"]}))
    assert json.loads(text) == {
        "key": "k",
        "output": {"a": [1, 2.5, None, "x"]},
        "error": None,
        "interrupt": None,
        "checkpoint_id": None,
        "run_id": None,
        "resumed": False,
        "usage": None,
    }


def test_a_records_root_span_carries_its_key_on_a_flink_worker() -> None:
    """The Flink operators run records through the same code as the local environment: a traced
    worker's record runs name their key on their root span (``adk.record.key``), so a trace
    backend finds a key's runs whichever environment ran them. The worker's runner is made here
    with a provider of the test's own (a worker uses the global one)."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    function = _scorer()
    function._runner = Runner(ActionAgent("s", actions=[score]), tracer_provider=provider)
    outputs = _invoked(function, Row("a", {"score": "1"}), Row(7, {"score": "2"}))
    assert all(isinstance(found, list) for found in outputs)
    roots = [s for s in spans.get_finished_spans() if s.name == "invoke_agent s"]
    assert [(s.attributes or {}).get("adk.record.key") for s in roots] == ["a", 7]
    provider.shutdown()


_WORKER_SPANS = InMemorySpanExporter()


def _worker_tracing() -> TracerProvider:
    """What a job gives as ``tracer_provider``: a function building the worker's provider."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_WORKER_SPANS))
    return provider


def test_a_worker_traces_its_records_with_the_provider_the_environment_builds() -> None:
    """A worker's runner could be traced only by a global provider set in the worker's process,
    which the job script, run in the client, never sets on a cluster, and the environment took
    no provider: ``tracer_provider=`` (and ``meter_provider=``) are functions each worker calls,
    as ``resources`` is, shipped as PyFlink ships them (cloudpickle)."""
    spans = _WORKER_SPANS
    spans.clear()
    env = _environment(on_error="emit", tracer_provider=_worker_tracing)
    shipped = cloudpickle.loads(
        cloudpickle.dumps(_AgentFunction(ActionAgent("s", actions=[score]), env, True, None))
    )
    [outputs] = _invoked(shipped, Row("a", {"score": "1"}))
    assert isinstance(outputs, list)
    roots = [s for s in spans.get_finished_spans() if s.name == "invoke_agent s"]
    assert [(s.attributes or {}).get("adk.record.key") for s in roots] == ["a"]
    assert (roots[0].attributes or {}).get("gen_ai.conversation.id") == outputs[0]["run_id"]
    for option in ("tracer_provider", "meter_provider"):
        with pytest.raises(TypeError, match=f"{option} must be a function that builds them"):
            _environment(**{option: TracerProvider()})


# -- the run id ------------------------------------------------------------------------------------
def _traced(function: _AgentFunction | _KeyedStateFunction) -> tuple[InMemorySpanExporter, Any]:
    """The worker's runner made here, traced by a provider of the test's own."""
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    function._runner = Runner(function._agent, tracer_provider=provider)
    return spans, provider


def _conversations(spans: InMemorySpanExporter) -> list[Any]:
    roots = [s for s in spans.get_finished_spans() if s.name == "invoke_agent s"]
    return [(s.attributes or {}).get("gen_ai.conversation.id") for s in roots]


def test_each_output_carries_its_records_run_id_the_id_its_trace_has() -> None:
    """As locally (``KeyedOutput.run_id``), every output of a record, a failed one's above all,
    names the record's run: tracing's ``gen_ai.conversation.id``, so it leads to its trace."""
    function = _scorer(on_error="emit")
    spans, provider = _traced(function)
    rows = (Row("a", {"score": "1"}), Row("a", {"score": "x"}), Row("a", {"score": "nan"}))
    fine, failed, unsendable = _invoked(function, *rows)
    assert isinstance(fine, list) and isinstance(failed, list) and isinstance(unsendable, list)
    assert failed[0]["error"]["type"] == "ActionError"  # float("x"), raised in the action
    assert "NaN at output.score" in unsendable[0]["error"]["message"]
    ids = [fine[0]["run_id"], failed[0]["run_id"], unsendable[0]["run_id"]]
    assert all(isinstance(run_id, str) and run_id for run_id in ids) and len(set(ids)) == 3
    assert _conversations(spans) == ids
    provider.shutdown()


def test_a_record_error_carries_its_records_run_id() -> None:
    function = _scorer()
    spans, provider = _traced(function)
    failures = _invoked(function, Row("a", {"score": "x"}), Row("b", {"score": "nan"}))
    assert all(isinstance(failure, RecordError) for failure in failures)
    run_ids = [failure.run_id for failure in failures if isinstance(failure, RecordError)]
    assert all(run_ids) and _conversations(spans) == run_ids
    provider.shutdown()


def test_a_record_the_backstop_timer_gives_up_on_names_its_run() -> None:
    """Flink's own timer fires (here, from the worker's loop) for a record still running: it is
    cancelled and fails with the run id its run had, not with none."""
    started = asyncio.Event()

    @action(InputEvent)
    async def hang(event: InputEvent, ctx: ActionContext) -> None:
        started.set()
        await asyncio.Event().wait()

    env = _environment(on_error="emit")
    function = _AgentFunction(ActionAgent("s", actions=[hang]), env, True, None)
    spans, provider = _traced(function)
    row = Row("a", "record")

    async def timed_out() -> tuple[list[str], BaseException | None]:
        function._loop = asyncio.get_running_loop()  # as the worker's runner built here would
        running = asyncio.ensure_future(function.async_invoke(row))
        await started.wait()
        texts = function.timeout(row)
        try:
            await running
        except BaseException as exc:
            return texts, exc
        return texts, None

    try:
        texts, ended = asyncio.run(timed_out())
    finally:
        function.close()
    assert isinstance(ended, asyncio.CancelledError)
    [failed] = _texts_of(texts)
    assert failed["error"]["type"] == "TimeoutError" and failed["key"] == "a"
    assert failed["run_id"] and _conversations(spans) == [failed["run_id"]]
    provider.shutdown()


def test_durable_memory_outputs_carry_the_run_id() -> None:
    env = _environment(on_error="emit", durable_memory=True)
    function = _KeyedStateFunction(ActionAgent("s", actions=[score]), env, None)
    spans, provider = _traced(function)
    state = KeyedState("a")
    function.open(state)
    try:
        fine = _texts_of(list(function.process_element({"score": "1", "keep": True}, state)))
        failed = _texts_of(list(function.process_element({"digits": 5000, "keep": True}, state)))
    finally:
        function.close()
    assert failed[0]["error"]["type"] == "CheckpointError"
    ids = [fine[0]["run_id"], failed[0]["run_id"]]
    assert all(ids) and _conversations(spans) == ids
    provider.shutdown()


@action(InputEvent)
def keep_quietly(event: InputEvent, ctx: ActionContext) -> None:
    """Keeps the score in the session and outputs nothing (an int ``digits`` long, if given)."""
    record: dict[str, Any] = event.input
    ctx.session.values["score"] = (
        10 ** record["digits"] if "digits" in record else float(record["score"])
    )


def test_a_record_without_outputs_whose_session_cannot_be_kept_names_its_run() -> None:
    """Its only output is its error, made after the run: it still names the run."""
    env = _environment(on_error="emit", durable_memory=True)
    function = _KeyedStateFunction(ActionAgent("s", actions=[keep_quietly]), env, None)
    spans, provider = _traced(function)
    state = KeyedState("a")
    function.open(state)
    try:
        [failed] = _texts_of(list(function.process_element({"digits": 5000}, state)))
    finally:
        function.close()
    assert "the session of key 'a'" in failed["error"]["message"]
    assert failed["run_id"] and _conversations(spans) == [failed["run_id"]]
    provider.shutdown()


# -- from_list's keyed records: each decoded once ---------------------------------------------------
class _Source:
    """Flink's part of a ``from_list`` job, standing in for PyFlink's: the collection, and the
    ``Row(key, value)`` that ``key_by`` hands to the keyed operator."""

    def __init__(self, elements: list[Any]) -> None:
        self.elements = elements
        self.selector: Any = None
        self.function: Any = None
        self.mapped: Any = None

    def from_collection(self, elements: list[Any], type_info: Any) -> _Source:
        return _Source(list(elements))

    def key_by(self, selector: Any, key_type: Any = None) -> _Source:
        self.selector = selector
        return self

    def process(self, function: Any, output_type: Any) -> _Source:
        self.function = function
        return self

    # What apply reads of the environment: no checkpointing, no savepoint to start from.
    def get_checkpoint_config(self) -> _Source:
        return self

    def is_checkpointing_enabled(self) -> bool:
        return False

    @property
    def _j_stream_execution_environment(self) -> _Source:
        return self

    def getConfiguration(self) -> _Source:  # Java's name
        return self

    def toMap(self) -> dict[str, str]:
        return {}

    @staticmethod
    def ordered_wait(stream: _Source, function: Any, *args: Any, **kwargs: Any) -> _Source:
        stream.function = function
        return stream

    def map(self, function: Any, output_type: Any) -> _Source:  # after the async operator
        self.mapped = function
        return self

    @property
    def _j_data_stream(self) -> _Source:  # what the outputs' DataStream is made of
        return self

    def run(self, durable: bool) -> list[dict[str, Any]]:
        """Each element through ``key_by``'s selector and then the operator, as Flink would."""
        function, texts = self.function, []
        if durable:
            states: dict[Any, KeyedState] = {}
            function.open(KeyedState("unused"))
            try:
                for element in self.elements:
                    key = self.selector(element)
                    state = states.setdefault(key, KeyedState(key))
                    function._state = state
                    texts += function.process_element(element, state)
            finally:
                function.close()
            return _texts_of(texts)

        async def each() -> None:
            for element in self.elements:
                given = await function.async_invoke(Row(self.selector(element), element))
                texts.extend(map(self.mapped, given))

        try:
            asyncio.run(each())
        finally:
            function.close()
        return _texts_of(texts)


@action(InputEvent)
def tally(event: InputEvent, ctx: ActionContext) -> None:
    memory = ctx.short_term_memory
    memory.set("seen", [*memory.get("seen", []), event.input["n"]])
    ctx.send_event(OutputEvent(output=memory.get("seen")))


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize(
    ("key", "keys"),
    [
        ("id", ["a", "b", "a", "b"]),
        # A tuple key travels as JSON and comes back a tuple (a session's key must be hashable).
        # (Its second item an int: a bool key is refused, docs/event_driven.md#what-a-key-may-be.)
        (lambda r: (r["id"], r["n"] // 2), [["a", 0], ["b", 0], ["a", 1], ["b", 1]]),
    ],
)
def test_from_lists_keyed_records_are_decoded_once_each(
    monkeypatch: pytest.MonkeyPatch, durable: bool, key: Any, keys: list[Any]
) -> None:
    """The key was found by decoding each record's JSON in ``key_by`` and the operator decoded it
    again to run it: now the key travels with the record and the record is decoded once."""
    from adk.execution import _flink

    decoded: list[Any] = []

    def loads(text: str | bytes, **options: Any) -> Any:
        value = json.loads(text, **options)
        if isinstance(value, dict) and "n" in value:  # a record, not a key or a kept session
            decoded.append(value["n"])
        return value

    monkeypatch.setattr(_flink, "json", type("Json", (), {"loads": loads, "dumps": json.dumps}))
    monkeypatch.setattr(_flink, "AsyncDataStream", _Source)
    env = FlinkExecutionEnvironment(_Source([]), durable_memory=durable)  # type: ignore[arg-type]
    records = [{"id": "ab"[n % 2], "n": n} for n in range(4)]
    applied = env.from_list(records, key=key).apply(ActionAgent("t", actions=[tally]))
    source = applied.to_datastream()._j_data_stream  # the async operator's: its map's stream
    assert isinstance(source, _Source)
    outputs = source.run(durable)
    assert sorted(decoded) == [0, 1, 2, 3]
    assert [o["key"] for o in outputs] == keys
    expected = [[0], [1], [0, 2], [1, 3]] if key == "id" else [[0], [1], [2], [3]]
    assert [o["output"] for o in outputs] == expected


_NO_JAVA_SCRIPT = """
from adk.execution import FlinkExecutionEnvironment

try:
    FlinkExecutionEnvironment()
except RuntimeError as exc:
    print(exc)
"""


@pytest.mark.parametrize("java_home", [None, "/nonexistent/jdk"])
def test_an_environment_without_java_says_it_needs_one(
    java_home: str | None, tmp_path: Path
) -> None:
    """PyFlink starts a JVM for its gateway: without Java the environment failed with a bare
    ``FileNotFoundError: [Errno 2] No such file or directory: 'java'`` from inside PyFlink."""
    env = {key: value for key, value in os.environ.items() if key != "JAVA_HOME"}
    env["PATH"] = str(tmp_path)  # no java on it
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    if java_home is not None:
        env["JAVA_HOME"] = java_home
    done = subprocess.run(
        [sys.executable, "-c", _NO_JAVA_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    where = (
        "no 'java' is on PATH"
        if java_home is None
        else "JAVA_HOME ('/nonexistent/jdk') has no bin/java"
    )
    assert done.stdout.strip() == (
        "FlinkExecutionEnvironment needs a Java runtime (11 or newer), as PyFlink starts a JVM, "
        f"and {where}: install one, or set JAVA_HOME to one"
    )


def test_from_list_names_a_record_whose_key_cannot_be_found_or_sent() -> None:
    """The key is found where the records are listed, so a bad one is refused there, naming the
    record, instead of failing the job in a worker."""
    env = _environment()
    with pytest.raises(
        ValueError,
        match=r"the key of record 1 could not be found: KeyError: the record has no field 'id'",
    ):
        env.from_list([{"id": "a"}, {"name": "b"}], key="id")
    with pytest.raises(ValueError, match=r"the key of record 0 \(nan\) is refused: NaN, which"):
        env.from_list([{"score": "nan"}], key=lambda r: float(r["score"]))


@pytest.mark.parametrize(
    ("key", "kind"),
    [
        # Two distinct keys whose encodings are one text: both would be one key (one session).
        (lambda r: datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC), "datetime"),
        (lambda r: r["id"].encode(), "bytes"),
        # Back from JSON as a tuple, unequal to the key it was (another session for its records).
        (lambda r: frozenset({r["id"]}), "frozenset"),
        (lambda r: ("a", b"b"), "bytes"),
        (lambda r: _Colour.RED, "_Colour"),
    ],
)
def test_from_list_refuses_a_key_json_would_turn_into_another(key: Any, kind: str) -> None:
    """pydantic's encoder made such a key a string or an array without a word, so distinct keys
    could collapse into one or a key come back unequal to itself; it is refused like a NaN key."""
    with pytest.raises(
        ValueError, match=rf"the key of record 0 \(.*\) cannot travel as JSON: {kind} "
    ):
        _environment().from_list([{"id": "a"}], key=key)


def test_from_list_takes_keys_that_come_back_as_themselves() -> None:
    for key in [None, 1, 2**70, "a", _Level.HIGH, ("a", (1, None))]:
        (row,) = _keyed_rows(lambda r, k=key: k, [{"id": "a"}])
        assert _decoded_key(row[0]) == key


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        (True, "a bool"),
        (1.0, "a float"),
        (1.5, "a float"),
        (-0.0, "a float"),
        (("a", False), "a bool"),
    ],
)
def test_from_list_refuses_a_key_python_and_flink_compare_apart(key: Any, problem: str) -> None:
    """``True``, ``1`` and ``1.0`` (and ``-0.0`` and ``0.0``) are one key to the operator's dicts
    but three texts to ``key_by``: whether two such keys shared a session depended on the parallel
    instance each was sent to. Refused where the records are listed, as locally."""
    with pytest.raises(ValueError, match=rf"the key of record 0 \(.*\) is refused: {problem}, "):
        _environment().from_list([{"id": "a"}], key=lambda r: key)


def test_from_datastreams_key_finder_refuses_a_bool_key_for_its_record_alone() -> None:
    """``key_by``'s selector in the workers: such a key fails its record (a ``_NoKey``, failed
    by the operator under ``on_error``), as one whose key cannot be found does."""
    found = _KeyFinder("flag", False)({"flag": True})
    assert found == _NoKey("TypeError", found.message)
    assert found.message.startswith("its key True is refused: a bool, which Python takes")
    assert _KeyFinder("id", False)({"id": 7}) == 7


class _Colour(enum.Enum):
    RED = "red"


class _Level(enum.StrEnum):
    HIGH = "high"


# -- the async operator in a job that restores state ------------------------------------------------
_RESTORES = "checkpointing is enabled"


def _tallies(restores: str | None, **options: Any) -> _AgentFunction:
    agent = ActionAgent("t", actions=[tally])
    return _AgentFunction(agent, _environment(**options), True, None, restores=restores)


def test_a_record_keeping_memory_fails_where_a_restore_would_lose_it() -> None:
    """The async operator keeps a key's memory in its own memory, which no checkpoint holds: in a
    job that restores state (checkpointing, a savepoint), a restore would run the key on empty
    memory without a word. So a record that would keep memory fails, saying why, and keeps none:
    there is nothing for a restore to lose."""
    function = _tallies(_RESTORES, on_error="emit")
    rows = (Row("a", {"n": 0}), Row("a", {"n": 1}))
    first, second = _invoked(function, *rows)
    for outputs in (first, second):
        assert isinstance(outputs, list)
        [failed] = outputs
        assert failed["output"] is None and failed["error"]["type"] == "RuntimeError"
        message = failed["error"]["message"]
        assert "keeps session values (memory) for its key" in message
        assert "(checkpointing is enabled)" in message and "durable_memory=True" in message
        assert failed["run_id"]
    assert function._sessions == {}

    [failure] = _invoked(_tallies(_RESTORES), Row("a", {"n": 0}))
    assert isinstance(failure, RecordError) and "durable_memory=True" in str(failure)


def test_in_such_a_job_a_record_keeping_no_memory_runs_as_usual() -> None:
    shouting = _AgentFunction(
        ActionAgent("s", actions=[keep_nothing]), _environment(), True, None, restores=_RESTORES
    )
    [outputs] = _invoked(shouting, Row("a", {"n": 0}))
    assert isinstance(outputs, list) and outputs[0]["output"] == 0 and outputs[0]["error"] is None
    # And a job that restores nothing keeps memory in the operator, as before.
    first, second = _invoked(_tallies(None), Row("a", {"n": 0}), Row("a", {"n": 1}))
    assert isinstance(first, list) and isinstance(second, list)
    assert (first[0]["output"], second[0]["output"]) == ([0], [0, 1])


@action(InputEvent)
def keep_nothing(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output=event.input["n"]))


class _AsksWithNaN(BaseAgent):
    """Pauses for approval of a threshold a model gave as NaN."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt({"type": "approval", "arguments": {"threshold": math.nan}})
        else:
            yield AgentEvent.custom({"approved": ctx.resume.data})


@pytest.mark.parametrize("on_error", ["emit", "raise"])
def test_a_pause_whose_request_json_cannot_hold_gives_its_checkpoint(on_error: str) -> None:
    """The interrupt's info went out with null where the run held NaN (pydantic's JSON mode);
    refused now, the error says where, and names the checkpoint the pause was saved in, which
    resumes: the pause is not lost with its request."""
    store = InMemoryCheckpointStore()
    env = _environment(on_error=on_error, checkpoint_store=lambda: store)
    function = _AgentFunction(_AsksWithNaN("asker"), env, True, None)
    [outcome] = _invoked(function, Row("a", {"go": True}))
    if isinstance(outcome, BaseException):
        assert isinstance(outcome, RecordError)
        message = str(outcome)
    else:
        [failed] = outcome
        assert failed["output"] is None and failed["interrupt"] is None
        assert failed["checkpoint_id"]
        message = failed["error"]["message"]
    assert "NaN at interrupt.points[0].info.arguments.threshold" in message
    [checkpoint_id] = list(store._data)
    assert f"its pause is saved as checkpoint {checkpoint_id!r}" in message
    runner = Runner(_AsksWithNaN("asker"), checkpoint_store=store)
    resumed = asyncio.run(runner.invoke_resume(checkpoint_id, True))
    assert resumed.output == {"approved": True}


class _RemembersThenAsks(BaseAgent):
    """Notes the request in its key's memory, then pauses for approval."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            ctx.session.values["asked"] = True
            yield ctx.interrupt({"type": "approval", "arguments": {"amount": 5}})
        else:
            yield AgentEvent.custom({"approved": ctx.resume.data, **ctx.session.values})


@pytest.mark.parametrize("on_error", ["emit", "raise"])
def test_a_paused_record_keeping_memory_in_such_a_job_gives_its_checkpoint(on_error: str) -> None:
    """A record that paused after writing its key's memory failed, in a job that restores state,
    without its checkpoint id: the pause, saved in the store with the memory it wrote, could no
    longer be found to be resumed elsewhere (a Runner over the same store), and the person was
    never asked. The error now names the checkpoint, as a pause whose request cannot be sent does."""
    store = InMemoryCheckpointStore()
    env = _environment(on_error=on_error, checkpoint_store=lambda: store)
    asker = _RemembersThenAsks("asker")
    function = _AgentFunction(asker, env, True, None, restores=_RESTORES)
    [outcome] = _invoked(function, Row("a", {"go": True}))
    [checkpoint_id] = list(store._data)
    if isinstance(outcome, BaseException):
        assert isinstance(outcome, RecordError)
        message = str(outcome)
    else:
        [failed] = outcome
        assert failed["output"] is None and failed["checkpoint_id"] == checkpoint_id
        message = failed["error"]["message"]
    assert "keeps session values (memory) for its key" in message
    assert f"its pause is saved as checkpoint {checkpoint_id!r}" in message
    assert function._sessions == {}
    runner = Runner(_RemembersThenAsks("asker"), checkpoint_store=store)
    resumed = asyncio.run(runner.invoke_resume(checkpoint_id, True))
    assert resumed.output == {"approved": True, "asked": True}


class _Reading(BaseModel):
    value: float
    extra: dict[str, Any]


@pytest.mark.parametrize(
    ("output", "where"),
    [
        (_Reading(value=1.0, extra={"mean": math.nan}), "NaN at output.extra.mean"),
        ([{"r": _Reading(value=math.inf, extra={})}], "Infinity at output[0].r.value"),
    ],
)
def test_nan_in_an_output_model_is_refused_not_sent_as_null(output: Any, where: str) -> None:
    """``to_json`` wrote a model's NaN with the model's own setting, ``null``: the next operator
    read a null the record never held, and nothing said so."""
    with pytest.raises(ValueError, match=re.escape(where)):
        _as_json(KeyedOutput("k", 0, None, output=output))
    fine = json.loads(_as_json(KeyedOutput("k", 0, None, output=_Reading(value=2.5, extra={}))))
    assert fine["output"] == {"value": 2.5, "extra": {}}


class _ReadingAsStrings(BaseModel):
    """A model whose owner made its NaN JSON: pydantic writes it as ``"NaN"`` strings."""

    model_config = ConfigDict(ser_json_inf_nan="strings")
    value: float
    extra: dict[str, Any]


def test_an_output_model_that_writes_its_nan_as_strings_is_sent_as_it_says() -> None:
    """Refusing the NaN that pydantic's default silently wrote as null also refused the NaN of a
    model configured to write it as a string (``ser_json_inf_nan="strings"``, JSON others read),
    whose records had gone out as its owner asked: the record failed instead."""
    output = [_ReadingAsStrings(value=math.nan, extra={"max": math.inf})]
    sent = json.loads(_as_json(KeyedOutput("k", 0, None, output=output)), parse_constant=_not_json)
    assert sent["output"] == [{"value": "NaN", "extra": {"max": "Infinity"}}]
    assert sent["error"] is None


def test_a_job_scripts_own_event_class_reaches_the_workers() -> None:
    """PyFlink pickles a job script's functions and classes by value (cloudpickle) and unpickles
    them in its workers. An event class still deferred (``Event`` defers building until first use)
    held pydantic's placeholder validator, whose unpickling recursed until Python gave up: every
    job whose agent had an event class of its own failed on its workers with a RecursionError."""

    class Flagged(Event):  # local, so pickled by value, as a job script's (__main__) classes are
        review_id: str

    @action(InputEvent)
    def flag(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(Flagged(review_id=event.input["id"]))

    @action(Flagged)
    def report(event: Flagged, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=f"flagged {event.review_id}"))

    function = _AgentFunction(
        lambda: ActionAgent("flags", actions=[flag, report]), _environment(), True, None
    )
    shipped = pickle.loads(cloudpickle.dumps(function))

    [outputs] = _invoked(shipped, Row("a", {"id": "r1"}))

    assert isinstance(outputs, list) and outputs[0]["output"] == "flagged r1"


_SCRIPT_HEAD = """
from typing import TYPE_CHECKING

from pydantic import BaseModel

from adk.actions import ActionAgent, ActionContext, Event, InputEvent, OutputEvent, action
"""


@pytest.fixture
def job_script() -> Iterator[Callable[[str], types.ModuleType]]:
    """A job script's module, its classes pickled by value as a ``__main__``'s are (its names
    resolve in it, as in a script run up to ``apply``)."""
    made: list[types.ModuleType] = []

    def run(source: str) -> types.ModuleType:
        module = types.ModuleType(f"_job_script_{len(made)}")
        sys.modules[module.__name__] = module
        cloudpickle.register_pickle_by_value(module)
        made.append(module)
        exec(compile(_SCRIPT_HEAD + source, module.__name__, "exec"), module.__dict__)
        return module

    yield run
    for module in made:
        cloudpickle.unregister_pickle_by_value(module)
        del sys.modules[module.__name__]


def test_an_event_class_naming_a_class_defined_after_it_reaches_the_workers(
    job_script: Callable[[str], types.ModuleType],
) -> None:
    """An event class whose annotation names a class the script defines later could not be
    built where it was defined: it stayed deferred, and the workers failed to unpickle it (a
    RecursionError). apply builds it first, the script having run that far."""
    script = job_script(
        """
class Noted(Event):
    note: "Note"

class Note(BaseModel):
    text: str

@action(InputEvent)
def take(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(Noted(note=Note(text=event.input["text"])))

@action(Noted)
def report(event: Noted, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output=event.note.text.upper()))

def build() -> ActionAgent:
    return ActionAgent("notes", actions=[take, report])
"""
    )
    assert not script.Noted.__pydantic_complete__  # deferred where it was defined
    function = _AgentFunction(script.build, _environment(), True, None)

    _build_shipped_events(function)
    shipped = pickle.loads(cloudpickle.dumps(function))
    [outputs] = _invoked(shipped, Row("a", {"text": "hi"}))

    assert isinstance(outputs, list) and outputs[0]["output"] == "HI"


def test_an_event_class_whose_annotation_never_resolves_is_named_at_apply(
    job_script: Callable[[str], types.ModuleType],
) -> None:
    """A name imported only for type checkers never resolves: refused before the job is shipped,
    naming the class and the name, instead of a RecursionError on every worker."""
    script = job_script(
        """
if TYPE_CHECKING:
    from decimal import Decimal as Money

class Charged(Event):
    amount: "Money"

@action(InputEvent)
def charge(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(Charged(amount=event.input["amount"]))

@action(Charged)
def report(event: Charged, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output=str(event.amount)))

def build() -> ActionAgent:
    return ActionAgent("charges", actions=[charge, report])
"""
    )
    function = _AgentFunction(script.build, _environment(), True, None)

    with pytest.raises(TypeError, match="event class Charged cannot be shipped") as caught:
        _build_shipped_events(function)
    assert "annotation 'Money' is not defined" in str(caught.value)
    assert "TYPE_CHECKING" in str(caught.value)


def test_an_agent_holding_what_cannot_be_pickled_is_named_as_apply_ships_it(
    job_script: Callable[[str], types.ModuleType],
) -> None:
    """apply(agent) with the agent's own resources (a model's HTTP client), as the local
    examples give them, failed in PyFlink's pickling with cloudpickle's words alone ("cannot
    pickle '_thread.RLock' object"). apply's shipping (here its first pickling pass, over a
    script's deferred event class) names the agent and the part, and says what to do; a
    function that closes over them is named as such. tests/test_flink.py applies it on Flink."""
    script = job_script(
        """
class Noted(Event):
    note: "Note"

class Note(BaseModel):
    text: str

@action(InputEvent)
def take(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(Noted(note=Note(text=event.input["text"])))

@action(Noted)
def report(event: Noted, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output=event.note.text))
"""
    )
    resources = Resources()
    resources.add_model("m", OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1"))
    agent = ActionAgent("notes", actions=[script.take, script.report], resources=resources)
    for source, named in (
        (agent, "apply cannot ship agent 'notes' to the Flink workers: its attribute 'resources'"),
        (lambda: agent, "apply cannot ship the function test_an_agent_holding_what_cannot_be"),
    ):
        function = _AgentFunction(source, _environment(), True, None)
        with pytest.raises(TypeError, match="cannot pickle") as refused, _shipping(source):
            _build_shipped_events(function)
        assert str(refused.value).startswith(named)
        assert "give apply a function that builds the agent in each worker" in str(refused.value)


def test_a_record_that_ran_but_whose_output_cannot_be_sent_keeps_its_usage() -> None:
    """d139c17 puts a record's usage on its failed output wherever the run ran and its outputs
    were lost afterwards (its session not kept, its memory refused); a pause whose request JSON
    cannot hold (a model's NaN) failed here without it, though its model call was made and paid:
    a pipeline billing per record lost it. Its failed output carries the run's usage now."""
    from adk import Usage, tool
    from adk.testing import Reply, ScriptedModel, tool_call
    from prebuilt import ReActAgent

    @tool(require_approval=True)
    def set_threshold(threshold: float) -> str:
        """Set the alert threshold."""
        return f"set to {threshold}"

    usage = Usage(input_tokens=5, output_tokens=2, total_tokens=7)
    asks = Reply(tool_calls=[tool_call("set_threshold", {"threshold": math.nan})], usage=usage)
    agent = ReActAgent("asker", ScriptedModel([asks]), tools=[set_threshold])
    store = InMemoryCheckpointStore()
    env = _environment(on_error="emit", checkpoint_store=lambda: store)
    [outcome] = _invoked(_AgentFunction(agent, env, True, None), Row("a", "set it"))
    assert isinstance(outcome, list)
    [failed] = outcome
    assert "cannot be sent or kept as JSON" in failed["error"]["message"]
    assert failed["checkpoint_id"]  # the pause was saved all the same
    assert failed["usage"] == usage.model_dump()


class _EncodedFrame(BaseModel):
    """Writes its bytes itself (base64), as its owner asked: JSON takes them."""

    model_config = ConfigDict(ser_json_bytes="base64")
    camera: str
    image: bytes
    extra: Any = None


@pytest.mark.parametrize("key", ["camera", None])
def test_from_list_blames_no_field_a_record_model_writes_itself(key: str | None) -> None:
    """The walk naming where a record JSON cannot write is wrote each field by pydantic's plain
    rules: a model's bytes that its config writes as base64 were blamed ("bytes that are not UTF-8
    text at image (decode them, or base64-encode them, first)") and the object that failed was
    never named."""
    record = _EncodedFrame(camera="b", image=b"\x89PNG\xff", extra={"handle": object()})
    with pytest.raises(ValueError, match=r"^record 0 cannot be written as JSON: ") as refused:
        _environment().from_list([record], key=key)
    assert " at extra " in str(refused.value) and "image" not in str(refused.value)


@action(InputEvent)
def emit_itself(event: InputEvent, ctx: ActionContext) -> None:
    """Outputs a dict; one that holds itself when the record says so (a user's bug)."""
    output: dict[str, Any] = {"n": event.input["n"]}
    if event.input.get("cycle"):
        output["self"] = output
    ctx.send_event(OutputEvent(output=output))


def test_an_output_holding_itself_fails_its_record_not_the_job() -> None:
    """Writing such an output recursed until Python's RecursionError, which no record's error
    caught: async_invoke raised it and the Flink job failed, every other record's output lost,
    under on_error="emit" too. It is a ValueError failing its record, as NaN in an output is."""
    agent = ActionAgent("s", actions=[emit_itself])
    function = _AgentFunction(agent, _environment(on_error="emit"), True, None)
    looped, fine = _invoked(function, Row("a", {"n": 1, "cycle": True}), Row("b", {"n": 2}))
    assert isinstance(looped, list) and isinstance(fine, list)
    [error] = looped
    assert error["error"]["type"] == "ValueError" and error["key"] == "a"
    assert "the output cannot be written as JSON: it holds itself" in error["error"]["message"]
    assert fine[0]["output"] == {"n": 2} and fine[0]["error"] is None


class _Tally(BaseModel):
    counts: dict[Any, int]


@action(InputEvent)
def tally_by_sets(event: InputEvent, ctx: ActionContext) -> None:
    """Outputs a model whose dict field is keyed by a frozenset when the record says so."""
    key: Any = frozenset(event.input["tags"]) if event.input.get("sets") else "n"
    ctx.send_event(OutputEvent(output=_Tally(counts={key: 1})))


def test_an_output_model_holding_a_key_json_cannot_write_fails_its_record_not_the_job() -> None:
    """pydantic refuses such a key with a TypeError, which the walk for where let out: the
    operator (taking a ValueError as the record's failure) raised it and the job failed, every
    other record's output lost, under on_error="emit" too."""
    function = _AgentFunction(
        ActionAgent("t", actions=[tally_by_sets]), _environment(on_error="emit"), True, None
    )
    bad, fine = _invoked(function, Row("a", {"sets": True, "tags": ["x"]}), Row("b", {}))
    assert isinstance(bad, list) and isinstance(fine, list), bad
    [error] = bad
    assert error["error"]["type"] == "ValueError" and error["key"] == "a"
    assert "frozenset as a key at output.counts" in error["error"]["message"]
    assert fine[0]["output"] == {"counts": {"n": 1}} and fine[0]["error"] is None


def test_from_list_names_a_record_holding_itself() -> None:
    record: dict[str, Any] = {"camera": "a"}
    record["self"] = record
    with pytest.raises(ValueError, match=r"^record 1 cannot be written as JSON: it holds itself"):
        _environment().from_list([{"camera": "b"}, record], key="camera")


class _Frame(BaseModel):
    camera: str
    extra: Any = None


@pytest.mark.parametrize("key", [None, "camera"])
def test_from_list_names_a_model_record_holding_itself_or_a_key_json_cannot_write(
    key: str | None,
) -> None:
    """A model record pydantic refused was let out with its words alone: one holding itself as a
    bare "Circular reference detected (id repeated)", one whose dict has a frozenset key as a
    bare TypeError (a plain dict's too, where a key is read), neither naming the record."""
    looped = _Frame(camera="a")
    looped.extra = [looped]
    with pytest.raises(ValueError, match=r"^record 1 cannot be written as JSON: it holds itself"):
        _environment().from_list([{"camera": "b"}, looped], key=key)
    for record in (
        _Frame(camera="a", extra={frozenset("x"): 1}),
        {"camera": "a", "extra": {frozenset("x"): 1}},
    ):
        with pytest.raises(ValueError, match=r"^record 1 cannot be written as JSON: ") as no:
            _environment().from_list([{"camera": "b"}, record], key=key)
        assert "frozenset as a key at extra" in str(no.value)


class _BuildsWithALock:
    """A callable building the agent, holding what cannot be pickled, whose repr fails."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __call__(self) -> ActionAgent:
        return ActionAgent("s", actions=[score])

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_function_apply_cannot_ship_is_named_even_when_its_repr_fails() -> None:
    """apply named a function it could not ship by its repr when it had no ``__qualname__`` (a
    callable object): one whose repr raised replaced the shipping error with its own."""
    source = _BuildsWithALock()
    with pytest.raises(TypeError, match="cannot ship the function") as refused, _shipping(source):
        cloudpickle.dumps(source)
    assert "_BuildsWithALock" in str(refused.value)


def test_a_raised_records_refusal_reason_reaches_the_job_as_a_local_one_has_it() -> None:
    """A record whose resume was refused (its checkpoint resumed already, ``"not_found"``)
    fails a raising job with the ``RecordError`` a local run raises: its ``reason`` too."""
    refused = ErrorInfo("CheckpointNotFoundError", "gone", reason="not_found")
    with pytest.raises(RecordError) as raised:
        _raise_failures(_failure_text(RecordError(0, "ann", None, refused, "r-1")))
    assert raised.value.error == refused
