"""Resuming a paused record inside a Flink job (``apply(agent, resumes=stream)``), as a record of
its key: the key's memory lives in the job, so a resume run elsewhere (a ``Runner`` over the
checkpoint store) wrote to a copy of the session saved at the pause, and the key's next records
never saw what it wrote.

The operator functions are called here as PyFlink calls them, with what ``apply``'s ``key_by``
hands over (a resume as ``resumes`` is mapped); tests/test_flink.py runs resumes on a MiniCluster.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

import pytest

if importlib.util.find_spec("pyflink") is None:  # tests/test_flink.py says how to get it
    pytest.skip("needs PyFlink (pip install 'pyadk[flink]')", allow_module_level=True)

from flink_job import KeyedState, book
from pyflink.common import Row
from test_execution_max_turns import RECORDS as RUNAWAY_RECORDS
from test_execution_max_turns import calls_for, runaway_agent

from adk import AgentEvent, AgentInput, BaseAgent, Interrupt, RunContext, Runner
from adk.actions import ActionAgent, ActionContext, Event, InputEvent, OutputEvent, action
from adk.checkpoint import (
    CheckpointStore,
    InMemoryCheckpointStore,
    RedisCheckpointStore,
    list_pending,
)
from adk.checkpoint.codec import decode_checkpoint
from adk.execution import FlinkExecutionEnvironment, LocalExecutionEnvironment, RecordError, _flink
from adk.execution._flink import FlinkKeyedInput, _AgentFunction, _KeyedStateFunction
from adk.execution._flink_resumes import keyed_row, parsed
from adk.execution._records import OnError

_T = TypeVar("_T")


class _Job:
    """One operator of a keyed job with ``resumes``, fed elements as ``key_by`` hands them over:
    ``from_list``'s keyed rows (``json_keys``) or the records' own objects."""

    def __init__(
        self,
        durable: bool,
        json_keys: bool,
        agent: Any = None,
        max_turns: int | None = None,
        store: CheckpointStore | None = None,
        on_error: OnError = "emit",
    ) -> None:
        store = self.store = store if store is not None else InMemoryCheckpointStore()
        env = FlinkExecutionEnvironment(
            object(),  # type: ignore[arg-type]
            on_error=on_error,
            checkpoint_store=lambda: store,
            durable_memory=durable,
        )
        if agent is None:
            agent = ActionAgent("ledger", actions=[book])
        parse = json.loads if json_keys else None
        self.json_keys, self.durable = json_keys, durable
        self.function: _AgentFunction | _KeyedStateFunction
        if durable:
            self.function = _KeyedStateFunction(
                agent, env, parse, json_keys, True, max_turns=max_turns
            )
            self.function.open(KeyedState("unused"))
            self.states: dict[str, KeyedState] = {}
        else:
            self.function = _AgentFunction(
                agent, env, True, parse, json_keys, True, max_turns=max_turns
            )

    def drive(self, steps: Coroutine[Any, Any, _T]) -> _T:
        """Runs ``steps`` to their end, then closes the operator function as the job's end
        does, whatever happened."""
        try:
            return asyncio.run(steps)
        finally:
            self.function.close()

    async def record(self, user: str, amount: int) -> list[dict[str, Any]]:
        return await self.element({"user": user, "amount": amount})

    async def element(self, record: dict[str, Any]) -> list[dict[str, Any]]:
        """``record``, keyed by its ``user``, as the job's records come."""
        user = record["user"]
        if self.json_keys:
            return await self._element(json.dumps(user), Row(json.dumps(user), json.dumps(record)))
        return await self._element(user, record)

    async def resume(self, text: str) -> list[dict[str, Any]]:
        """A resume as ``apply`` maps the ``resumes`` stream's text, keyed as ``key_by`` keys it."""
        if self.json_keys:
            row = keyed_row(text)
            return await self._element(row[0], row)
        resume = parsed(text)
        return await self._element(resume.key, resume)

    async def _element(self, key: Any, element: Any) -> list[dict[str, Any]]:
        if isinstance(self.function, _AgentFunction):
            texts = await self.function.async_invoke(Row(key, element))
        else:
            state = self.states.setdefault(key, KeyedState(key))
            self.function._state = state
            texts = await asyncio.to_thread(
                lambda: list(self.function.process_element(element, state))  # type: ignore[union-attr]
            )
        return [json.loads(text) for text in texts]


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("json_keys", [False, True])
def test_a_resume_in_the_stream_runs_as_a_record_of_its_key(
    durable: bool, json_keys: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The resume runs on the key's session as the records since the pause left it, and the key's
    next record sees what it wrote, as ``LocalExecutionEnvironment``'s ``outputs.resume``."""
    job = _Job(durable, json_keys)

    async def run() -> list[list[dict[str, Any]]]:
        [paused] = await job.record("ann", 500)
        assert paused["checkpoint_id"] and paused["interrupt"] is not None
        after = await job.record("ann", 5)  # not held up by the pause
        # The paused output as the job gave it, with the person's answer added.
        resumed = await job.resume(json.dumps({**paused, "resume": "approved"}))
        for output in resumed:
            assert output["run_id"] == paused["run_id"]  # the paused run goes on
        return [after, resumed, await job.record("ann", 1), await job.record("bob", 2)]

    with caplog.at_level(logging.WARNING, logger="adk.runner"):
        after, resumed, next_one, other = job.drive(run())
    assert not caplog.records  # resumed as a record of its key: nothing to warn of
    assert [o["output"] for o in after] == [5]
    assert [o["output"] for o in resumed] == [505]
    assert [o["output"] for o in next_one] == [506]  # the resume's write reached the key's memory
    assert [o["output"] for o in other] == [2]


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize(
    ("resume", "problem"),
    [
        ({"key": "ann", "resume": "approved"}, "has no checkpoint_id (a non-empty str), got None"),
        ({"checkpoint_id": "c1", "resume": "approved"}, "has no key"),
        ([1, 2], "is a list, not a paused output"),
    ],
)
def test_a_resume_that_names_no_paused_record_fails_as_a_record(
    durable: bool, resume: Any, problem: str
) -> None:
    """A resume that does not say what to resume is a failed output (on_error), not a failed job,
    and leaves the key's memory as it was."""
    job = _Job(durable, json_keys=True)

    async def run() -> list[list[dict[str, Any]]]:
        return [
            await job.record("ann", 5),
            await job.resume(json.dumps(resume)),
            await job.record("ann", 1),
        ]

    before, [failed], after = job.drive(run())
    assert failed["error"]["type"] == "ValueError" and failed["output"] is None
    assert problem in failed["error"]["message"] and "resume 1" in failed["error"]["message"]
    assert [o["output"] for o in before] == [5] and [o["output"] for o in after] == [6]


def test_resumes_need_a_key() -> None:
    """Without a key a record keeps no memory: a Runner over the checkpoint store resumes it as
    the job would, so apply says so instead of taking resumes it has no key to order by."""
    env = FlinkExecutionEnvironment(object())  # type: ignore[arg-type]
    records = FlinkKeyedInput(env, object(), None, json_records=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="resumes run as records of their key"):
        records.apply(ActionAgent("ledger", actions=[book]), resumes=object())  # type: ignore[arg-type]


@pytest.mark.parametrize("durable", [False, True])
def test_a_runner_resuming_a_jobs_keyed_pause_warns_its_writes_stay_out_of_the_key(
    durable: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Resumed by a Runner over the job's checkpoint store, a keyed record of a Flink job runs on
    the session saved at its pause, and what it writes never reaches the key's memory in the job:
    it did so silently. Now it warns, naming the key and the way through the job."""
    job = _Job(durable, json_keys=True)
    [paused] = job.drive(job.record("ann", 500))
    runner = Runner(ActionAgent("ledger", actions=[book]), checkpoint_store=job.store)

    with caplog.at_level(logging.WARNING, logger="adk.runner"):
        resumed = asyncio.run(runner.invoke_resume(paused["checkpoint_id"], "approved"))

    assert resumed.interrupt is None  # it still runs: the person's answer is not lost
    [warning] = caplog.records
    message = warning.getMessage()
    assert "a Flink job (key 'ann')" in message and "apply(agent, resumes=...)" in message
    assert paused["checkpoint_id"] in message


def test_a_local_pause_resumed_by_a_runner_does_not_warn(caplog: pytest.LogCaptureFixture) -> None:
    """Locally the key's memory is the ``sessions`` the caller holds, and resuming with the
    runner is a documented plain run: no warning there."""
    store = InMemoryCheckpointStore()
    env = LocalExecutionEnvironment(checkpoint_store=store)

    async def run() -> None:
        outputs = env.from_list([{"user": "ann", "amount": 500}], key="user")
        applied = outputs.apply(ActionAgent("ledger", actions=[book]))
        [paused] = await applied.to_list()
        assert paused.checkpoint_id is not None
        await applied.runner.invoke_resume(paused.checkpoint_id, "approved")

    with caplog.at_level(logging.WARNING, logger="adk.runner"):
        asyncio.run(run())
    assert not caplog.records


def test_a_record_of_the_users_own_that_looks_like_a_marked_resume_is_a_record() -> None:
    """The mark tells from_list's JSON rows from resumes; a record of the user's own (a
    from_datastream str) is never taken for a resume, whatever it starts with."""

    @action(InputEvent)
    def echo(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))

    env = FlinkExecutionEnvironment(object(), on_error="emit")  # type: ignore[arg-type]
    function = _AgentFunction(ActionAgent("echo", actions=[echo]), env, True, None, False, True)
    text = '\x1e{"key": "a", "checkpoint_id": "c1"}'
    try:
        texts = asyncio.run(function.async_invoke(Row("a", text)))
    finally:
        function.close()
    assert [json.loads(t)["output"] for t in texts] == [text]


@pytest.mark.parametrize("durable", [False, True])
def test_an_approval_given_twice_is_a_failed_output_not_a_failed_job(durable: bool) -> None:
    """An approvals topic delivers at least once: the second delivery names a pause already
    resumed (its checkpoint deleted). Its CheckpointError left the operator and failed the job
    whatever ``on_error`` said (a restart replays it and fails again); it is a failed output
    of its own under the paused run's id now, as locally, and books nothing twice."""
    job = _Job(durable, json_keys=True)

    async def run() -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
        [paused] = await job.record("ann", 500)
        answer = json.dumps({**paused, "resume": "approved"})
        later = [await job.resume(answer), await job.resume(answer), await job.record("ann", 1)]
        return paused, later

    paused, (resumed, [again], after) = job.drive(run())
    assert [o["output"] for o in resumed] == [500]
    assert again["error"]["type"] == "CheckpointNotFoundError" and again["output"] is None
    assert "no checkpoint" in again["error"]["message"]
    assert again["run_id"] == paused["run_id"]
    assert [o["output"] for o in after] == [501]


@pytest.mark.parametrize("durable", [False, True])
def test_a_resume_whose_data_the_runner_refuses_is_a_failed_output_not_a_failed_job(
    durable: bool,
) -> None:
    """Data the resume refuses before anything runs (here, for a point the pause does not have;
    an approval neither yes nor no, an edit that does not fit, alike) is a person's mistake that
    a restart replays: its ValueError left the operator and failed the job whatever
    ``on_error`` said. It is a failed output under the paused run's id, as locally, and the pause
    waits for a good answer."""
    job = _Job(durable, json_keys=True)

    async def run() -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
        [paused] = await job.record("ann", 500)
        wrong = json.dumps({**paused, "resume": {"agent:ledger/nowhere": "approved"}})
        right = json.dumps({**paused, "resume": "approved"})
        later = [await job.resume(wrong), await job.resume(right), await job.record("ann", 1)]
        return paused, later

    paused, ([refused], resumed, after) = job.drive(run())
    assert refused["error"]["type"] == "ValueError" and refused["output"] is None
    assert "unknown interrupt point id" in refused["error"]["message"]
    assert refused["run_id"] == paused["run_id"]
    assert [o["output"] for o in resumed] == [500]
    assert [o["output"] for o in after] == [501]


_NOBODY_LISTENS = "redis://127.0.0.1:9"
"""A Redis no server answers: a real store whose every call fails (a store down)."""


@pytest.mark.parametrize("durable", [False, True])
def test_a_resumes_outputs_say_resumed_as_locally(durable: bool) -> None:
    """A Flink job's JSON outputs had no ``resumed``, which ``KeyedOutput`` has locally: a sink
    could tell a resume's outputs (an approved refund) from a record's only by remembering the
    run ids of the pauses. Each output says it, a failed resume's too."""
    job = _Job(durable, json_keys=True)

    async def run() -> list[list[dict[str, Any]]]:
        [paused] = await job.record("ann", 500)
        resumed = await job.resume(json.dumps({**paused, "resume": "approved"}))
        twice = await job.resume(json.dumps({**paused, "resume": "approved"}))  # gone: fails
        nameless = await job.resume(json.dumps({"key": "ann", "resume": "approved"}))
        return [[paused], await job.record("ann", 1), resumed, twice, nameless]

    paused, record, resumed, twice, nameless = job.drive(run())
    assert [o["resumed"] for o in paused + record] == [False, False]
    assert [(o["output"], o["resumed"]) for o in resumed] == [(500, True)]
    assert [(o["error"]["type"], o["resumed"]) for o in twice + nameless] == [
        ("CheckpointNotFoundError", True),
        ("ValueError", True),
    ]


def _paused_elsewhere() -> dict[str, Any]:
    """A paused output of ann's 500, from a job whose store was up."""
    job = _Job(False, True)
    [paused] = job.drive(job.record("ann", 500))
    assert paused["checkpoint_id"]
    return paused


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("json_keys", [False, True])
def test_a_resume_whose_store_is_down_follows_on_error_not_failing_the_job(
    durable: bool, json_keys: bool
) -> None:
    """A resume whose checkpoint store is down made the runner raise (its claim failed with a
    CheckpointStoreError), which left the operator and failed the job whatever ``on_error``
    said, where locally it is a failed output: it is the resume's failed output under the paused
    run's id, the key's memory untouched, and the key goes on."""
    paused = _paused_elsewhere()
    job = _Job(durable, json_keys, store=RedisCheckpointStore(_NOBODY_LISTENS))

    async def run() -> list[list[dict[str, Any]]]:
        first = await job.record("ann", 5)  # no pause: the store is not needed
        failed = await job.resume(json.dumps({**paused, "resume": "approved"}))
        return [first, failed, await job.record("ann", 1)]

    first, [failed], after = job.drive(run())
    assert [o["output"] for o in first] == [5]
    assert failed["error"]["type"] == "CheckpointStoreError" and failed["output"] is None
    assert "claim of checkpoint" in failed["error"]["message"]
    assert failed["run_id"] == paused["run_id"] and failed["key"] == "ann"
    assert [o["output"] for o in after] == [6]


@pytest.mark.parametrize("durable", [False, True])
def test_a_resume_whose_store_is_down_is_a_record_error_with_on_error_raise(
    durable: bool,
) -> None:
    """With ``on_error="raise"`` it fails the job as any failed record does: a ``RecordError``
    naming the resume, its key and the paused run, the store's error its cause, not the store's
    bare error."""
    paused = _paused_elsewhere()
    job = _Job(durable, True, store=RedisCheckpointStore(_NOBODY_LISTENS), on_error="raise")
    resume = json.dumps({**paused, "resume": "approved"})
    with pytest.raises(RecordError, match=r"\(key 'ann'\) failed: CheckpointStoreError") as info:
        job.drive(job.resume(resume))
    assert info.value.run_id == paused["run_id"]
    assert type(info.value.__cause__).__name__ == "CheckpointStoreError"


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("json_keys", [False, True])
def test_a_resume_naming_another_key_is_a_failed_output_touching_no_memory(
    durable: bool, json_keys: bool
) -> None:
    """Ann's pause resumed as bob's ran on bob's memory in the job (booking her 500 to him): the
    pause saves its key now, so it is a failed output under the paused run's id, as locally
    (tests/test_resume_keys.py); neither key's memory changes, and ann's own resume goes on."""
    job = _Job(durable, json_keys)

    async def run() -> tuple[dict[str, Any], list[list[dict[str, Any]]]]:
        [paused] = await job.record("ann", 500)
        await job.record("bob", 7)
        wrong = json.dumps({**paused, "key": "bob", "resume": "approved"})
        right = json.dumps({**paused, "resume": "approved"})
        later = [await job.resume(wrong), await job.record("bob", 1), await job.resume(right)]
        return paused, later

    paused, ([refused], bob, ann) = job.drive(run())
    assert refused["error"]["type"] == "CheckpointError" and refused["output"] is None
    assert "paused a record of key 'ann', not of key 'bob'" in refused["error"]["message"]
    assert refused["run_id"] == paused["run_id"]
    assert [o["output"] for o in bob] == [8] and [o["output"] for o in ann] == [500]


@pytest.mark.parametrize("durable", [False, True])
def test_a_bytes_key_given_back_as_json_text_is_refused_not_split(durable: bool) -> None:
    """A ``from_datastream`` of Kafka messages keyed by their ``bytes`` key: the job's JSON output
    gives the key as text, and a resume of that text was keyed by the text, another key, whose
    memory it made beside the ``bytes`` key's. It is refused now, saying why."""
    job = _Job(durable, json_keys=False)

    async def run() -> list[list[dict[str, Any]]]:
        await job._element(b"ann", {"user": "ann", "amount": 5})
        [paused] = await job._element(b"ann", {"user": "ann", "amount": 500})
        assert paused["key"] == "ann"  # JSON has no bytes
        refused = await job.resume(json.dumps({**paused, "resume": "approved"}))
        return [refused, await job._element(b"ann", {"user": "ann", "amount": 1})]

    [refused], after = job.drive(run())
    assert refused["error"]["type"] == "CheckpointError"
    assert "key b'ann' (a bytes, which is not a JSON value)" in refused["error"]["message"]
    assert [o["output"] for o in after] == [6]
    if not durable:
        assert isinstance(job.function, _AgentFunction)
        assert list(job.function._sessions) == [b"ann"]
    else:
        assert list(job.states) == [b"ann", "ann"] and job.states["ann"].stored is None


# -- apply(agent, max_turns=): tests/test_execution_max_turns.py has the local environment's --


class _Stream:
    """Enough of a ``DataStream`` for ``apply`` to build its operator function."""

    def key_by(self, *args: Any, **kwargs: Any) -> _Stream:
        return self


class _Built(Exception):
    pass


@pytest.mark.parametrize("durable", [False, True])
def test_a_flink_record_past_the_limit_is_a_failed_output(
    durable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``apply(max_turns=)`` reaches the operator function both ways (the async operator and
    ``durable_memory``'s), which fails the runaway record under ``on_error`` and answers the
    next one."""

    agent, model = runaway_agent()
    env = FlinkExecutionEnvironment(object(), on_error="emit", durable_memory=durable)  # type: ignore[arg-type]
    built: list[Any] = []

    def build(function: Any) -> None:
        built.append(function)
        raise _Built  # the function is all this test needs: no job is built

    monkeypatch.setattr(_flink, "_build_shipped_events", build)
    monkeypatch.setattr(_flink, "_why_state_is_restored", lambda env: None)  # no job to restore
    records = FlinkKeyedInput(env, _Stream(), "user", json_records=False)  # type: ignore[arg-type]
    with pytest.raises(_Built):
        records.apply(agent, max_turns=2)
    [function] = built

    async def element(record: dict[str, Any]) -> list[dict[str, Any]]:
        if durable:
            state = KeyedState(record["user"])
            function._state = state
            texts = await asyncio.to_thread(lambda: list(function.process_element(record, state)))
        else:
            texts = await function.async_invoke(Row(record["user"], record))
        return [json.loads(text) for text in texts]

    async def run() -> list[list[dict[str, Any]]]:
        return [await element(record) for record in RUNAWAY_RECORDS]

    if durable:
        function.open(KeyedState("unused"))
    try:
        [failed], [answered] = asyncio.run(run())
    finally:
        function.close()
    assert failed["error"]["type"] == "MaxTurnsExceeded" and failed["key"] == "ann"
    assert answered["output"] == "answered" and answered["error"] is None
    assert calls_for(model, "runaway") == 2


def test_a_bad_max_turns_is_refused_at_flink_apply() -> None:

    agent, _ = runaway_agent()
    env = FlinkExecutionEnvironment(object())  # type: ignore[arg-type]
    records = FlinkKeyedInput(env, _Stream(), "user", json_records=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_turns must be a positive int or None"):
        records.apply(agent, max_turns=0)


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize(("at_pause", "at_resume", "limit"), [(3, None, 3), (3, 5, 5)])
def test_a_flink_resume_keeps_its_pauses_limit_unless_the_apply_gives_one(
    durable: bool, at_pause: int, at_resume: int | None, limit: int
) -> None:
    """A paused record resumed through the job's ``resumes`` goes on counting the call before
    its pause, under the limit of the ``apply`` that resumes it if given, else its pause's."""
    store = InMemoryCheckpointStore()
    agent, model = runaway_agent()
    first = _Job(durable, json_keys=True, agent=agent, max_turns=at_pause, store=store)
    [paused] = first.drive(first.element({"user": "ann", "text": "pause"}))
    assert paused["checkpoint_id"] is not None and model.calls == 1
    again = _Job(durable, json_keys=True, agent=agent, max_turns=at_resume, store=store)
    [failed] = again.drive(again.resume(json.dumps({**paused, "resume": "yes"})))
    assert failed["error"]["type"] == "MaxTurnsExceeded" and failed["run_id"] == paused["run_id"]
    assert f"limit of {limit} " in failed["error"]["message"]
    assert model.calls == limit


class _Desk(BaseAgent):
    """A manager's desk every key shares: asks the manager, then says what was decided."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt("refund?")
        else:
            yield AgentEvent.of(f"refund {ctx.resume.data}")


@pytest.mark.parametrize("durable", [False, True])
def test_a_runner_of_its_own_inside_a_jobs_record_saves_no_key_memory(
    durable: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """An action that hands a case to a desk through a ``Runner`` of its own, under the record's
    run id (one conversation id), made a pause of the desk's: the record's note that its key's
    memory lives in the job was told by the run id and reached it, so resuming the desk's pause
    outside the job, as the desk is meant to be resumed, warned that its writes would not reach
    the key's memory in a Flink job, which the desk never had. The note is the environment
    runner's own run's, as the record key is (``adk._record_keys``)."""
    desk = Runner(_Desk("desk"), InMemoryCheckpointStore())

    @action(InputEvent)
    async def escalate(event: InputEvent, ctx: ActionContext) -> None:
        case = event.input["user"]
        paused = await desk.invoke(
            f"case {case}", checkpoint_id=f"case-{case}", run_id=ctx.run_context.run_id
        )
        assert paused.interrupt is not None
        ctx.send_event(OutputEvent(output="escalated"))

    job = _Job(durable, json_keys=True, agent=ActionAgent("cases", actions=[escalate]))
    [escalated] = job.drive(job.record("ann", 5))
    assert escalated["output"] == "escalated"
    data = asyncio.run(desk.checkpoint_store.get("case-ann"))
    assert data is not None and "memory" not in decode_checkpoint(data, "case-ann")

    with caplog.at_level(logging.WARNING, logger="adk.runner"):
        resumed = asyncio.run(desk.invoke_resume("case-ann", "ok"))
    assert resumed.text == "refund ok"
    assert not caplog.records


class _Part(Event):
    index: int
    amount: int


@action(InputEvent)
def _fan_out(event: InputEvent, ctx: ActionContext) -> None:
    for index in range(3):
        ctx.send_event(_Part(index=index, amount=event.input["amount"]))


@action(_Part)
def _fan_in(event: _Part, ctx: ActionContext) -> None:
    found = ctx.collect_events(event, [_Part] * 3)
    if event.index == 1 and event.amount >= 100 and ctx.resume is None:
        raise Interrupt({"approve": event.amount})
    if found is not None:
        ctx.send_event(OutputEvent(output=[e.amount for e in found if isinstance(e, _Part)]))


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("json_keys", [False, True])
def test_a_fan_in_paused_in_a_job_resumes_with_its_events_and_mixes_with_no_other_record(
    durable: bool, json_keys: bool
) -> None:
    """A record paused mid fan-in (``collect_events``): its key's next records run meanwhile
    with fan-ins of their own, and the resume through the job's stream of resumes finds the
    events it had collected, whether the key's state is in the operator or in keyed state."""
    job = _Job(durable, json_keys, agent=ActionAgent("joiner", actions=[_fan_out, _fan_in]))

    async def run() -> list[list[dict[str, Any]]]:
        [paused] = await job.element({"user": "ann", "amount": 500})
        assert paused["checkpoint_id"] and paused["interrupt"] is not None
        saved = decode_checkpoint(await job.store.get(paused["checkpoint_id"]) or b"", "c")
        [state] = saved["states"].values()
        assert [e["fields"]["amount"] for e in state[""]["collected"]["action:_fan_in"]] == [500]
        after = await job.element({"user": "ann", "amount": 5})
        other = await job.element({"user": "bob", "amount": 7})
        resumed = await job.resume(json.dumps({**paused, "resume": "approved"}))
        return [after, other, resumed]

    after, other, resumed = job.drive(run())
    assert [o["output"] for o in after] == [[5, 5, 5]]
    assert [o["output"] for o in other] == [[7, 7, 7]]
    assert [o["output"] for o in resumed] == [[500, 500, 500]]


@pytest.mark.parametrize("durable", [False, True])
def test_a_jobs_keyed_pause_is_listed_with_its_key_and_the_operators_index(durable: bool) -> None:
    """An approvals page over the job's checkpoint store lists the pause with its key (as the
    job's resumes name it) and the operator's count of the record, as locally; the pause its
    resume makes again keeps that index, not the resume's count."""
    job = _Job(durable, json_keys=True, agent=ActionAgent("twice", actions=[_asks_twice]))

    async def run() -> tuple[list[Any], list[Any]]:
        await job.record("bob", 1)
        [paused] = await job.record("ann", 5)
        first = await list_pending(job.store)
        await job.resume(json.dumps({**paused, "resume": "amount ok"}))
        return first, await list_pending(job.store)

    first, again = job.drive(run())
    listed = sorted((e.key, e.index, e.keyed) for e in first)
    assert listed == [("ann", 1, True), ("bob", 0, True)]
    assert sorted((e.key, e.index) for e in again) == [("ann", 1), ("bob", 0)]


@action(InputEvent)
def _asks_twice(event: InputEvent, ctx: ActionContext) -> None:
    """Asks for the amount, then for the payee, then books it."""
    if ctx.resume is None:
        raise Interrupt("amount?")
    if ctx.resume.data == "amount ok":
        raise Interrupt("payee?")
    ctx.send_event(OutputEvent(output=event.input["amount"]))
