"""``FlinkExecutionEnvironment``: any agent over a PyFlink ``DataStream``, for more than one machine.

The job is ``key_by`` and then PyFlink's async I/O operator (``AsyncDataStream.ordered_wait``).
Flink sends every record of a key to the same parallel instance of the operator. Inside an
instance, one asyncio loop runs up to ``max_concurrency`` records at once, and records of one key
are chained, so they run one after another in arrival order. Each record is one run of a
``Runner``, through the same code as ``LocalExecutionEnvironment`` (``_records.py``): the same
input, the same outputs, and a session committed when the record ends or pauses and dropped when it
fails.

What differs from the local environment, because of what PyFlink offers:

- **Per-key sessions (and so short-term memory) live in the operator instance's memory.** PyFlink's
  async operator has no keyed state (docs/event_driven.md says why), so they are not in Flink's
  state and do not survive a failover or a rescale. In a job that restores state (checkpointing
  on, or started from a savepoint), a record that would keep session values fails instead, saying
  so, rather than leave memory that a restore would lose without a word.
  ``durable_memory=True`` runs a ``KeyedProcessFunction`` instead: sessions in Flink's keyed state
  (checkpointed, restored on failover), records one at a time per parallel instance.
- **The agent and resources are built in each worker.** ``apply`` takes an agent, or a function
  that builds one; ``resources`` and ``callbacks`` are functions too, because MCP sessions and HTTP
  clients cannot be shipped to a worker. PyFlink ships these functions with cloudpickle, the way it
  ships every Python function of a job.
- **A failed record fails the job** (``on_error="raise"``, Flink's failover then applies), or it
  becomes an output with ``error`` (``on_error="emit"``).

``pyflink`` is imported by this module only (``pip install 'pyadk[flink]'``), never by
``import adk`` or ``import adk.execution``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import itertools
import json
import os
import sys
import threading
from collections.abc import Callable, Coroutine, Hashable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar

import cloudpickle
from pydantic.errors import PydanticUndefinedAnnotation
from pydantic_core import to_jsonable_python
from pyflink.common import Row, Time, Types
from pyflink.common.typeinfo import PickledBytesTypeInfo
from pyflink.datastream import (
    AsyncDataStream,
    DataStream,
    StreamExecutionEnvironment,
)
from pyflink.datastream.functions import AsyncFunction, KeyedProcessFunction
from pyflink.datastream.state import ValueStateDescriptor

from .._hooks import _record_memory
from .._record_keys import tupled
from ..actions.events import Event, _unbuilt
from ..agent import Agent
from ..checkpoint.codec import (
    CheckpointError,
    _models_nan_kept,
    from_json_value,
    to_json_value,
)
from ..checkpoint.store import CheckpointStore
from ..context import _new_run_id
from ..events import ErrorInfo, _type_name
from ..messages import Usage
from ..runner import Runner
from ._flink_resumes import RESUME_MARK, keyed_row
from ._records import (
    KeyedOutput,
    KeySelector,
    OnError,
    RecordError,
    _as_json,
    _json_text,
    _KeyRefused,
    _unwritable,
    check_options,
    check_records,
    checked_key,
    checked_max_turns,
    key_failure,
    key_of,
    logger,
    resume_record,
    run_record,
    timed_out,
)
from ._resumes import NEEDS_A_KEY, Resume, parsed

__all__ = ["FlinkExecutionEnvironment", "FlinkKeyedInput", "FlinkKeyedOutputs"]

AgentSource = Agent | Callable[[], Agent]
_BACKSTOP_GRACE = 60.0
"""Seconds Flink's timer allows past the longest the records ahead of one could take."""
_T = TypeVar("_T")


def _flink_environment() -> StreamExecutionEnvironment:
    """PyFlink's environment, which starts a JVM for its gateway: without Java that was a bare
    ``FileNotFoundError: ... 'java'`` from deep inside PyFlink, saying neither what needs it nor
    where it was looked for."""
    try:
        return StreamExecutionEnvironment.get_execution_environment()
    except FileNotFoundError as exc:
        java = str(exc.filename or "")
        if os.path.basename(java) != "java":
            raise
        home = os.environ.get("JAVA_HOME")
        where = f"JAVA_HOME ({home!r}) has no bin/java" if home else "no 'java' is on PATH"
        raise RuntimeError(
            f"FlinkExecutionEnvironment needs a Java runtime (11 or newer), as PyFlink starts "
            f"a JVM, and {where}: install one, or set JAVA_HOME to one"
        ) from exc


class FlinkExecutionEnvironment:
    """Runs agents over keyed PyFlink streams (see the module docstring for what differs from the
    local environment).

    ``env`` defaults to ``StreamExecutionEnvironment.get_execution_environment()``, with its Python
    workers set to this interpreter. ``max_concurrency`` is the async operator's capacity, and so
    the number of records in flight per parallel instance. ``timeout`` (seconds) bounds one
    record's own run, not the time it waits behind earlier records of its key: a record that runs
    longer is cancelled, its session writes are dropped, and it fails like any record
    (``on_error``). The async operator's own timer, which also counts that wait, is set to what
    ``max_concurrency`` records of one key could take, as a backstop for a record that does not
    end when cancelled.
    ``resources``, ``callbacks`` and ``checkpoint_store`` are functions each worker calls to build
    its own; give paused records a store that outlives the worker (SQLite, Redis, PostgreSQL),
    and resume them through the job, as records of their keys (``apply(agent, resumes=...)``).
    ``tracer_provider`` and ``meter_provider`` are functions too (an extension to DESIGN.md): each
    worker's runner traces its records with the provider its call gives (an OTLP exporter's,
    say). Without them a worker's runner uses the global providers of the worker's process,
    which on a cluster is not the job script's: a provider the script sets globally is set in
    the client, and the records run untraced.

    ``durable_memory=True`` keeps each key's session (and so short-term memory) in Flink's keyed
    state instead, where it is part of Flink's checkpoints and survives a failover; the price is
    one record at a time per parallel instance (a ``KeyedProcessFunction``), so throughput comes
    from parallelism alone. ``max_concurrency`` and ``timeout`` do not apply then. Without it, a
    job that restores state (checkpointing enabled when ``apply`` is called, or a savepoint to
    start from) fails each record that would keep session values, as a restore would lose them;
    enabled after ``apply``, the outputs' ``to_datastream``/``to_list`` refuse the job.
    """

    def __init__(
        self,
        env: StreamExecutionEnvironment | None = None,
        *,
        max_concurrency: int = 64,
        timeout: float = 600.0,
        on_error: OnError = "raise",
        resources: Callable[[], Any] | None = None,
        callbacks: Callable[[], Iterable[Any]] | None = None,
        checkpoint_store: Callable[[], CheckpointStore] | None = None,
        durable_memory: bool = False,
        tracer_provider: Callable[[], Any] | None = None,
        meter_provider: Callable[[], Any] | None = None,
    ) -> None:
        check_options(max_concurrency, on_error, timeout, optional_timeout=False)
        factories = (
            ("resources", resources),
            ("callbacks", callbacks),
            ("checkpoint_store", checkpoint_store),
            ("tracer_provider", tracer_provider),
            ("meter_provider", meter_provider),
        )
        for name, value in factories:
            if value is not None and not callable(value):
                raise TypeError(
                    f"{name} must be a function that builds them in each worker, "
                    f"not {type(value).__name__}"
                )
        if env is None:
            env = _flink_environment()
            env.set_python_executable(sys.executable)
        self.env = env
        self.max_concurrency = max_concurrency
        self.timeout = timeout
        self.on_error: OnError = on_error
        self.resources = resources
        self.callbacks = callbacks
        self.checkpoint_store = checkpoint_store
        self.durable_memory = durable_memory
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider

    def from_datastream(self, stream: DataStream, key: KeySelector = None) -> FlinkKeyedInput:
        """Records from a ``DataStream``. ``key``: a function of the record or a field name, as in
        the local environment; ``None`` makes every record its own key (no ``key_by``)."""
        return FlinkKeyedInput(self, stream, checked_key(key), json_records=False)

    def from_list(self, records: Iterable[Any], key: KeySelector = None) -> FlinkKeyedInput:
        """Records from a list (a bounded source, e.g. for tests and small jobs). They travel as
        JSON text, not pickles: each must be JSON data or a pydantic model (which arrives as its
        JSON data); NaN, infinity or an over-long int is a ``ValueError`` naming the record.

        ``key`` is applied here, to each record's JSON data (what the agent gets), and the key
        travels with the record as JSON text too (a tuple comes back a tuple): the workers then
        decode each record once, to run it, instead of once more to find its key. A record whose
        key cannot be found, or cannot travel as JSON, is a ``ValueError`` naming it."""
        check_records(records)
        selector = checked_key(key)
        # A model record's NaN stays NaN, to be refused as a dict's is: written with the model's
        # own setting (``ser_json_inf_nan``), it was ``null``, a value the record never held.
        kept = [_kept_json(record, index) for index, record in enumerate(records)]
        if selector is None:
            rows = [Row(_json_text(record, f"record {i}"), i) for i, record in enumerate(kept)]
            stream = self.env.from_collection(rows, type_info=_UNKEYED_ROW)
        else:
            rows = _keyed_rows(selector, kept)
            stream = self.env.from_collection(rows, type_info=_KEYED_ROW)
        return FlinkKeyedInput(self, stream, selector, json_records=True)


class FlinkKeyedInput:
    """A stream with its key selector, waiting for an agent (``apply``)."""

    def __init__(
        self,
        env: FlinkExecutionEnvironment,
        stream: DataStream,
        key: KeySelector,
        json_records: bool,
    ) -> None:
        self._env = env
        self._stream = stream
        self._key = key
        self._json_records = json_records

    def apply(
        self,
        agent: AgentSource,
        *,
        resumes: DataStream | None = None,
        max_turns: int | None = None,
    ) -> FlinkKeyedOutputs:
        """Run ``agent`` (or the agent a function builds, in each worker) over the records.

        ``resumes``: a ``DataStream`` of paused outputs (their JSON text, or that text parsed to a
        dict) each with the resume's data added under ``"resume"``. Each runs as a record of its
        key (after the key's records before it, on the key's session, its writes kept for the
        key's next records), and its outputs join the stream. Only with a key: without one a
        record keeps no memory, and a ``Runner`` over the checkpoint store resumes it as well.

        ``max_turns``: the most model calls each record's run may make, as locally (a record past
        it fails under ``on_error``; a resume keeps its pause's limit unless this is given)."""
        if not isinstance(agent, Agent) and not callable(agent):
            raise TypeError(f"apply takes an Agent or a function that builds one, not {agent!r}")
        limit = checked_max_turns(max_turns)
        env = self._env
        restores: str | None = None
        parse = json.loads if self._json_records else None
        # from_list's keyed records are Row(key JSON, record JSON, position), keyed by the key's text.
        json_keys = self._json_records and self._key is not None
        stream = self._stream
        if resumes is not None:
            stream = self._with_resumes(stream, resumes, json_keys)
        if json_keys:
            stream = stream.key_by(_key_text, key_type=Types.STRING())
        elif self._key is not None:
            stream = stream.key_by(_KeyFinder(self._key, resumes is not None))
        if env.durable_memory:
            if self._key is None:
                raise ValueError(
                    "durable_memory keeps memory per key: give from_list/from_datastream a key"
                )
            function = _KeyedStateFunction(
                agent, env, parse, json_keys, resumes is not None, max_turns=limit
            )
            with _shipping(agent):  # both pickle the function, which holds the agent
                _build_shipped_events(function)
                outputs = stream.process(function, output_type=Types.STRING())
        else:
            # A record waits behind at most max_concurrency - 1 records of its key, each cut off
            # at ``timeout``: Flink's timer (from the record's arrival) fires only past all that.
            backstop = env.timeout * env.max_concurrency + _BACKSTOP_GRACE
            keyed = self._key is not None
            restores = _why_state_is_restored(env.env) if keyed else None
            function = _AgentFunction(
                agent, env, keyed, parse, json_keys, resumes is not None, restores, max_turns=limit
            )
            with _shipping(agent):  # both pickle the function, which holds the agent
                _build_shipped_events(function)
                operator = AsyncDataStream.ordered_wait(
                    stream,
                    _Reported(function),
                    Time.milliseconds(int(backstop * 1000)),
                    capacity=env.max_concurrency,
                    output_type=Types.STRING(),
                )
                outputs = _AgentOutputs(operator)
        applied = FlinkKeyedOutputs(env, outputs)
        # Shipped to keep memory in the operator: see ``FlinkKeyedOutputs._check_restores``.
        applied._memory_in_operator = (
            self._key is not None and not env.durable_memory and restores is None
        )
        return applied

    def _with_resumes(self, stream: DataStream, resumes: DataStream, json_keys: bool) -> DataStream:
        """The records and the resumes as one stream, for ``key_by``: a resume as the records
        travel (``from_list``'s keyed rows, or a ``Resume`` among the records' own objects, which
        are made pickled objects first if they were of a type of their own)."""
        if self._key is None:
            raise ValueError(NEEDS_A_KEY)
        if not isinstance(resumes, DataStream):
            raise TypeError(f"resumes must be a PyFlink DataStream, not {type(resumes).__name__}")
        if json_keys:
            marked = resumes.map(keyed_row, output_type=_KEYED_ROW)
        else:
            if not isinstance(stream.get_type(), PickledBytesTypeInfo):
                stream = stream.map(_same, output_type=Types.PICKLED_BYTE_ARRAY())
            marked = resumes.map(parsed, output_type=Types.PICKLED_BYTE_ARRAY())
        # PyFlink's key_by forwards each input of the union to an operator of the records'
        # parallelism, which Flink refuses for an input of another ("Forward partitioning does
        # not allow change of parallelism"): the resumes are mapped at the records' parallelism.
        marked.set_parallelism(stream._j_data_stream.getParallelism())
        return stream.union(marked)


def _same(record: Any) -> Any:
    return record


@dataclasses.dataclass(frozen=True, slots=True)
class _NoKey:
    """The key of a record whose key could not be found (``key_by`` runs in the workers, where
    the selector's exception failed the job whatever ``on_error`` said, as the bare error): the
    record goes on to the operator under this key, which fails it there, as locally, with the
    error said as ``key_failure`` says it. Equal for equal errors, pickled by reference."""

    type: str
    message: str


class _KeyFinder:
    """``key_by``'s selector for ``from_datastream``'s records: the key, a resume's own
    (in a job with resumes), or a ``_NoKey`` saying why none could be found."""

    __slots__ = ("resumes", "selector")

    def __init__(self, selector: KeySelector, resumes: bool) -> None:
        self.selector = selector
        self.resumes = resumes

    def __call__(self, record: Any) -> Hashable:
        if self.resumes and type(record) is Resume:
            return record.key
        try:
            return key_of(self.selector, record, 0)
        except Exception as exc:
            error = key_failure(self.selector, exc)
            return _NoKey(error.type, error.message)

    def __getstate__(self) -> tuple[KeySelector, bool]:
        return self.selector, self.resumes

    def __setstate__(self, state: tuple[KeySelector, bool]) -> None:
        self.selector, self.resumes = state


class FlinkKeyedOutputs:
    """The agent's outputs as a ``DataStream`` of JSON texts (not pickles), each an object with
    ``key``, ``output``, ``error`` (``{"type", "message"}`` or ``null``), ``interrupt`` (its points,
    or ``null``), ``checkpoint_id``, ``run_id`` (the record's run, as ``KeyedOutput.run_id``:
    tracing's ``gen_ai.conversation.id``, so a failed record leads to its trace and logs) and
    ``resumed`` (an output of a resume, as ``KeyedOutput.resumed``)."""

    def __init__(self, env: FlinkExecutionEnvironment, stream: DataStream) -> None:
        self._env = env
        self.stream = stream
        self._memory_in_operator = False

    if not TYPE_CHECKING:  # to a type checker they are not iterable ('for', list()): they are not

        def __iter__(self) -> Iterator[dict[str, Any]]:
            # Python's own "not iterable" said nothing of how a job's outputs are taken.
            raise TypeError(
                "FlinkKeyedOutputs are a job's outputs: run the job and take them with "
                "'outputs.to_list()', or add a sink to 'outputs.to_datastream()', not 'for' or "
                "list()"
            )

    def to_datastream(self) -> DataStream:
        """The outputs as a ``DataStream`` of JSON texts, to add operators or a sink to; nothing
        runs until the Flink job is executed. ``RuntimeError`` if the job restores state now but
        did not when the agent was applied (see ``_check_restores``)."""
        self._check_restores()
        return self.stream

    def to_list(self) -> list[dict[str, Any]]:
        """Run the job and collect every output, parsed (for bounded sources); refused as
        ``to_datastream`` is, before the job starts."""
        self._check_restores()
        with self.stream.execute_and_collect() as results:
            outputs = [json.loads(text) for text in results]
        if self._env.checkpoint_store is None:
            self._warn_of_lost_pauses(outputs)
        return outputs

    @staticmethod
    def _warn_of_lost_pauses(outputs: list[dict[str, Any]]) -> None:
        """Without a ``checkpoint_store``, each worker's runner kept its pauses in its own memory
        (``InMemoryCheckpointStore``), which ended with this job: the paused outputs' ids name
        checkpoints that no resume can find any more, where a local run's are resumed in the
        process. Said once the job is over, as nothing can be done about it sooner."""
        paused = [output for output in outputs if output.get("checkpoint_id")]
        if paused:
            logger.warning(
                "%d paused output(s) of this Flink job (the first of key %r) were saved in the "
                "workers' own memory, as FlinkExecutionEnvironment was given no checkpoint_store, "
                "and ended with the job: their checkpoint_id cannot be resumed. Give it "
                "checkpoint_store=, a function building a store that outlives the workers "
                "(SQLite on shared storage, Redis, PostgreSQL), and run the records again",
                len(paused),
                paused[0].get("key"),
            )

    def _check_restores(self) -> None:
        """Refuse a job that restores state (checkpointing, a savepoint) when the async operator
        was applied to one that did not. PyFlink shipped the operator's function at ``apply``,
        and a worker is told nothing of checkpointing (its runtime context's job parameters are
        empty; PyFlink has no hook before a job is submitted), so the records would keep memory
        in the operator, which a restore loses without a word. Checked where the outputs are
        taken, as the job is built; checkpointing enabled after that is still not seen."""
        if not self._memory_in_operator:
            return
        why = _why_state_is_restored(self._env.env)
        if why is not None:
            raise RuntimeError(
                f"this job restores state ({why}), but did not when the agent was applied, and "
                "PyFlink shipped the agent's operator then: its records would keep their memory "
                "in the operator, which a restore loses. Enable checkpointing (or set the "
                "savepoint) before apply, or use FlinkExecutionEnvironment(durable_memory=True), "
                "and build the job again (the operator applied is part of this one)"
            )


class _WorkerAgent:
    """What both operators' functions share: the configuration shipped to the workers, the
    ``Runner`` each worker builds at its first record, and how a record's outputs leave."""

    def __init__(
        self,
        agent: AgentSource,
        env: FlinkExecutionEnvironment,
        parse: Callable[[str], Any] | None,
        json_keys: bool = False,
        resumes: bool = False,
        *,
        max_turns: int | None = None,
    ) -> None:
        self._agent = agent
        self._max_turns = max_turns  # ``apply``'s, checked there: each record's run's limit
        self._parse = parse
        self._json_keys = json_keys
        self._resumes = resumes
        self._resources = env.resources
        self._callbacks = env.callbacks
        self._store = env.checkpoint_store
        self._providers = (env.tracer_provider, env.meter_provider)
        self._on_error = env.on_error
        self._runner: Runner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._numbers = itertools.count()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(self._fresh())
        state["_numbers"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._numbers = itertools.count()

    def _fresh(self) -> dict[str, Any]:
        """The attributes a worker starts without (they are made there, not shipped)."""
        return {"_runner": None, "_loop": None}

    def _runner_for_this_worker(self) -> Runner:
        """Built on the loop the records run on, at the first record: resources made here (MCP
        sessions, HTTP clients) belong to that loop."""
        runner = self._runner
        if runner is None:
            agent = self._agent if isinstance(self._agent, Agent) else self._agent()
            resources = self._resources() if self._resources is not None else None
            callbacks = self._callbacks() if self._callbacks is not None else ()
            store = self._store() if self._store is not None else None
            tracing, metering = (make() if make is not None else None for make in self._providers)
            runner = Runner(
                agent,
                store,
                callbacks=callbacks,
                resources=resources,
                tracer_provider=tracing,
                meter_provider=metering,
            )
            self._runner, self._loop = runner, asyncio.get_running_loop()
        return runner

    def _close_runner(self) -> None:
        """Close the worker's resources (MCP sessions, model clients) on the loop that made them,
        or, when that loop has stopped, on a loop of their own.

        PyFlink's async operator stops and closes its loop before it calls ``close()``; its
        resources are still to be closed then (clients bound to the old loop close as well as they
        can: the process is often about to end, but a long-lived worker must not leak them).
        """
        runner, loop = self._runner, self._loop
        self._runner = self._loop = None
        if runner is None:
            return
        with suppress(Exception):  # the job is ending; a failing close must not mask its result
            if loop is not None and loop.is_running():
                asyncio.run_coroutine_threadsafe(runner.aclose(), loop).result(timeout=30)
            else:
                asyncio.run(asyncio.wait_for(runner.aclose(), 30))

    def _numbered(self, value: Any, counted: int) -> int:
        """The number a record's errors and spans name (``index``), and an unkeyed record's key:
        a ``from_list`` row's position in the list, which the row carries (its last field); else
        (a ``from_datastream`` record, a resume) ``counted``, this instance's count of what it
        received, Flink giving it no position. The count alone named a list's record by its
        place among those of its own instance: with parallelism 2, record 17 failed as
        ``record 8``, and two unkeyed records both had the key ``("record", 0)``."""
        if self._parse is not None and isinstance(value, Row):  # only from_list's rows
            place = 2 if self._json_keys else 1
            if len(value) > place and value[place] >= 0:
                position: int = value[place]
                return position
        return counted

    def _record(self, value: Any) -> Any:
        """The record that ``value`` carries: from_list's JSON decoded (once), with a key a
        ``Row(key JSON, record JSON, position)`` whose record is its second field, without one
        a ``Row(record JSON, position)``; or, in a job with
        ``resumes``, a ``Resume`` (its text marked in from_list's rows, else one of the objects)."""
        if self._json_keys:
            value = value[1]
            # Only there: a record of the user's own may be a str starting with the mark.
            if self._resumes and value.startswith(RESUME_MARK):
                return parsed(value[1:])
        elif self._parse is not None and isinstance(value, Row):  # unkeyed: (JSON, position)
            value = value[0]
        return self._parse(value) if self._parse is not None else value

    async def _run(
        self,
        runner: Runner,
        sessions: dict[Hashable, dict[str, Any]] | None,
        index: int,
        key: Hashable,
        record: Any,
        seconds: float | None,
        run_id: str,
    ) -> list[KeyedOutput]:
        """``record``'s run, or, for a ``Resume``, the paused record's resume as a record of its
        key: on ``sessions`` (the key's session now, none if it keeps none: the one saved at the
        pause), committed into them as any record's run."""
        resuming = type(record) is Resume
        if resuming and (record.problem is not None or record.checkpoint_id is None):
            exc = ValueError(f"resume {index} (key {key!r}) {record.problem}")
            return [KeyedOutput(key, index, None, error=ErrorInfo.of(exc), _exception=exc)]
        # A keyed record's pause notes that its key's memory is in this job (see _record_memory).
        token = None
        if sessions is not None:
            held = (runner, f"a Flink job (key {key!r})")
            token = _record_memory.set(held)
        try:
            if not resuming:
                return await run_record(
                    runner, sessions, index, key, record, seconds, run_id, self._max_turns
                )
            paused = KeyedOutput(
                key, index, None, checkpoint_id=record.checkpoint_id, run_id=record.run_id
            )
            return await resume_record(
                runner, sessions, paused, record.data, seconds, self._max_turns
            )
        except Exception as exc:
            # The runner itself raised rather than failing the run: a pause that is over or
            # unreadable (resumed already: an approval delivered twice), data the resume refuses
            # before anything runs (an approval neither yes nor no, an edit that does not fit),
            # a checkpoint store that is down (its claim fails). It is this record's failure
            # (``on_error``, ``_leaving``), as locally: raised here it failed the job whatever
            # ``on_error`` said, and a restart replayed it into failing again. Its writes are
            # dropped: nothing was committed into ``sessions``.
            failed = ErrorInfo.of(exc)
            given = None if resuming else record
            return [KeyedOutput(key, index, given, error=failed, run_id=run_id, _exception=exc)]
        finally:
            if token is not None:
                _record_memory.reset(token)

    def _key(self, key: Any) -> Hashable:
        """The key Flink hands over, as the key selector gave it (see ``_keyed_rows``)."""
        return _decoded_key(key) if self._json_keys else key

    def _keyless(self, index: int, found: _NoKey, record: Any) -> list[str]:
        """The failure of a record whose key could not be found: it never ran (no ``run_id``),
        its key is ``None``, as locally; ``on_error`` applies (``_leaving``)."""
        error = ErrorInfo(found.type, found.message)
        failed = KeyedOutput(None, index, record, error=error)
        return self._leaving([failed], index, None, record, None)

    def _leaving(
        self,
        outputs: list[KeyedOutput],
        index: int,
        key: Hashable,
        record: Any,
        run_id: str | None,
        commit: Callable[[], None] | None = None,
    ) -> list[str]:
        """The record's outputs as JSON texts, its session kept by ``commit`` once they are; a
        failed record raises (``on_error="raise"``) or its error is the output. ``run_id`` is the
        record's run's, for the error of a record that had no output to take it from.

        An output (or, through ``commit``, a session) holding what JSON cannot (NaN, say, from a
        model's data) fails the record, as a checkpoint refuses it: its session writes are dropped
        and the error says where the value is, rather than a text no JSON reader takes."""
        if type(record) is Resume:  # a resume's outputs, failed ones too, say so (``resumed``)
            for output in outputs:
                output.resumed = True
        if all(output.error is None for output in outputs):
            try:
                texts = [_as_json(output) for output in outputs]
                if commit is not None:
                    commit()
                return texts
            except (ValueError, CheckpointError) as exc:  # pydantic's encoder raises ValueErrors
                reason = f"record {index} (key {key!r}) cannot be sent or kept as JSON: {exc}"
                # A pause whose request cannot be sent (NaN in a tool's arguments, say) is saved
                # all the same (checkpoints keep NaN): its id goes out with the error, so the
                # pause can still be resumed rather than lost with the request.
                paused, saved = _paused_in(outputs)
                reason += saved
                # A refused session's CheckpointError keeps its word, as ``ErrorInfo.of`` has it.
                word = exc.reason if isinstance(exc, CheckpointError) else None
                error = ErrorInfo(_type_name(exc), reason, reason=word)
                outputs = [
                    KeyedOutput(
                        key,
                        index,
                        record,
                        error=error,
                        checkpoint_id=paused,
                        run_id=run_id,
                        resumed=type(record) is Resume,
                        usage=outputs[-1].usage if outputs else None,  # its calls were made
                        _exception=exc,
                    )
                ]
        if self._on_error == "raise":
            for output in outputs:
                if output.error is not None:
                    failure = RecordError(
                        index, key, record, output.error, output.run_id, usage=output.usage
                    )
                    raise failure from output._exception
        return [_as_json(output, failed=True) for output in outputs]


class _AgentFunction(_WorkerAgent, AsyncFunction):  # type: ignore[misc]  # pyflink is untyped
    """The async operator's function: records of one key chained, keys concurrent, sessions per
    key in this instance's memory (none for records without a key: each is its own)."""

    def __init__(
        self,
        agent: AgentSource,
        env: FlinkExecutionEnvironment,
        keyed: bool,
        parse: Callable[[str], Any] | None,
        json_keys: bool = False,
        resumes: bool = False,
        restores: str | None = None,
        *,
        max_turns: int | None = None,
    ) -> None:
        super().__init__(agent, env, parse, json_keys, resumes, max_turns=max_turns)
        self._keyed = keyed
        self._restores = restores
        self._timeout = env.timeout
        self._sessions: dict[Hashable, dict[str, Any]] = {}
        self._tails: dict[Hashable, asyncio.Future[None]] = {}
        # The records in flight, by the identity of the value PyFlink handed over (it hands the
        # same object to ``timeout``): their task, key, number and run id.
        self._running: dict[int, tuple[asyncio.Task[Any], Hashable, int, str]] = {}

    def _fresh(self) -> dict[str, Any]:
        return {**super()._fresh(), "_sessions": {}, "_tails": {}, "_running": {}}

    def close(self) -> None:
        self._close_runner()

    async def async_invoke(self, value: Any) -> list[str]:
        index = next(self._numbers)
        if self._keyed:  # after key_by, PyFlink hands over Row(key, record)
            key, record = (
                (self._key(value[0]), value[1]) if isinstance(value, Row) else (None, value)
            )
            index = self._numbered(record, index)
        else:
            index = self._numbered(value, index)
            key, record = ("record", index), value
        record = self._record(record)
        if type(key) is _NoKey:  # its key could not be found (``_KeyFinder``): it fails alone
            return self._keyless(index, key, record)
        task = asyncio.current_task()
        assert task is not None
        # Made here so that the backstop timer can name the record's run (a resume's goes on).
        resumed = type(record) is Resume and record.run_id
        run_id = resumed or _new_run_id()
        self._running[id(value)] = (task, key, index, run_id)
        runner = self._runner_for_this_worker()
        before = self._tails.get(key)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[key] = done
        try:
            if before is not None:
                await asyncio.shield(before)
            # The record runs on its key's session as the record before it left it, and keeps it
            # once its outputs are encoded (see ``_leaving``), before the next one may start.
            sessions = self._sessions
            mine: dict[Hashable, dict[str, Any]] | None = None
            if self._keyed:
                mine = {key: sessions[key]} if key in sessions else {}
            outputs = await self._run(runner, mine, index, key, record, self._timeout, run_id)
            commit = (lambda: sessions.update(mine)) if mine else None
            if commit is not None and self._restores is not None:
                outputs, commit = [self._not_kept(index, key, record, run_id, outputs)], None
            return self._leaving(outputs, index, key, record, run_id, commit)
        finally:
            done.set_result(None)
            if self._tails.get(key) is done:
                del self._tails[key]
            self._running.pop(id(value), None)

    def _not_kept(
        self, index: int, key: Hashable, record: Any, run_id: str, outputs: list[KeyedOutput]
    ) -> KeyedOutput:
        """The failure of a record that would keep session values (memory) for its key in a job
        that restores state: they would live only in this operator's memory, and a restore would
        run the key's next records on none, silently (see ``_why_state_is_restored``). Failing
        the record drops its writes, so no key ever has memory that a restore could lose.

        A record that paused (``outputs``) has its pause saved all the same, with the memory it
        wrote: the failure names that checkpoint, as ``_leaving`` does for a pause whose request
        cannot be sent, so that it can still be resumed elsewhere rather than lost."""
        paused, saved = _paused_in(outputs)
        exc = RuntimeError(
            f"record {index} (key {key!r}) keeps session values (memory) for its key, which "
            "the async operator holds in its own memory, not in Flink's state (PyFlink's async "
            f"operator has no keyed state); this job restores state ({self._restores}), and a "
            "restore would run the key's next records without them. Use "
            "FlinkExecutionEnvironment(durable_memory=True) to keep memory in keyed state, or "
            f"an agent that keeps no session values{saved}"
        )
        return KeyedOutput(
            key,
            index,
            record,
            error=ErrorInfo.of(exc),
            checkpoint_id=paused,
            run_id=run_id,
            usage=outputs[-1].usage if outputs else None,  # its run's calls were made
            _exception=exc,
        )

    def timeout(self, value: Any) -> list[str]:
        """Flink's backstop timer fired (on a thread of its own): cancel the record and fail it
        like any record, so ``on_error="emit"`` makes it an output instead of failing the job."""
        keyed = self._keyed and isinstance(value, Row)
        unknown = (None, self._key(value[0]) if keyed else None, -1, None)
        task, key, index, run_id = self._running.get(id(value), unknown)
        loop = self._loop
        if task is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(task.cancel)
        record = self._record(value[1] if keyed else value)
        reason = "was not done by the async operator's timeout (its wait included)"
        failed = timed_out(index, key, record, reason, run_id)
        return self._leaving([failed], index, key, record, run_id)


class _AgentOutputs(DataStream):  # type: ignore[misc]  # pyflink is untyped
    """The async operator's outputs through ``_raise_failures``, as ``to_datastream()`` gives them,
    the settings of an operator (name, uid, parallelism, ...) reaching the agent's operator.

    Set on the map alone, as a ``DataStream`` sets them on its last operator, they named and
    scaled that map: PyFlink's chaining of two Python operators keeps the first one's uid (a uid
    set on the outputs then named nothing, and a savepoint's state found no operator of it), and
    the agent's operator kept the job's parallelism. The map follows the operator's parallelism
    and slot sharing, which keep the two chained, and a uid of its own, derived from the one
    given, for where they are not chained."""

    def __init__(self, operator: DataStream) -> None:
        super().__init__(operator.map(_raise_failures, output_type=Types.STRING())._j_data_stream)
        self._operator = operator

    def get_name(self) -> str:
        name: str = self._operator.get_name()
        return name

    def name(self, name: str) -> _AgentOutputs:
        self._operator.name(name)
        return self

    def set_description(self, description: str) -> _AgentOutputs:
        self._operator.set_description(description)
        return self

    def uid(self, uid: str) -> _AgentOutputs:
        self._operator.uid(uid)
        super().uid(f"{uid}/raise-failures")
        return self

    def set_uid_hash(self, uid_hash: str) -> _AgentOutputs:
        self._operator.set_uid_hash(uid_hash)
        return self

    def set_parallelism(self, parallelism: int) -> _AgentOutputs:
        self._operator.set_parallelism(parallelism)
        super().set_parallelism(parallelism)
        return self

    def set_max_parallelism(self, max_parallelism: int) -> _AgentOutputs:
        self._operator.set_max_parallelism(max_parallelism)
        super().set_max_parallelism(max_parallelism)
        return self

    def force_non_parallel(self) -> _AgentOutputs:
        self._operator.force_non_parallel()
        super().force_non_parallel()
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> _AgentOutputs:
        self._operator.slot_sharing_group(slot_sharing_group)
        super().slot_sharing_group(slot_sharing_group)
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> _AgentOutputs:
        self._operator.set_buffer_timeout(timeout_millis)
        super().set_buffer_timeout(timeout_millis)
        return self

    def start_new_chain(self) -> _AgentOutputs:
        self._operator.start_new_chain()
        return self

    def disable_chaining(self) -> _AgentOutputs:
        self._operator.disable_chaining()
        return self


_FAILED = "\x15"
"""What starts an output text of ``_Reported`` that is a failure for ``_raise_failures`` to raise:
an output is JSON, which never starts with this character."""


class _Reported(AsyncFunction):  # type: ignore[misc]  # pyflink is untyped
    """The async operator's function as PyFlink is given it: what ``_AgentFunction`` raises (a
    ``RecordError`` under ``on_error="raise"``, a ``resources`` function that fails on a worker)
    is handed on as an output for ``_raise_failures``, the operator after it, to raise.

    Raised from ``async_invoke``, PyFlink's async operator kept it to raise at its next element
    or while it waited for the elements in flight at the end of its input, and dropped it when
    the element had completed before that wait (``_wait_for_in_flight_inputs_finished`` loops
    only while some are in flight): the job ended without the record's outputs and without an
    error (in a trial, 2 of 8 one-record jobs at parallelism 2). A map's exception fails the
    job when it is raised.

    Once a failure is handed on, the records handed over after it do not run: they are that
    failure again. PyFlink raised it at the next element, which never ran, where the output waits
    for the records before it (ordered) before the map fails the job, and up to
    ``max_concurrency`` records handed over meanwhile ran, model calls and tools included."""

    def __init__(self, function: _AgentFunction) -> None:
        self.function = function
        self._failure: str | None = None  # the first failure handed on, once there is one

    def open(self, runtime_context: Any) -> None:
        self._failure = None
        self.function.open(runtime_context)

    def close(self) -> None:
        self.function.close()

    async def async_invoke(self, value: Any) -> list[str]:
        if self._failure is not None:  # the job is failing: this record is not to run
            return [self._failure]
        try:
            return await self.function.async_invoke(value)
        except Exception as exc:
            return [self._failed(exc)]

    def timeout(self, value: Any) -> list[str]:
        try:
            return self.function.timeout(value)
        except Exception as exc:
            return [self._failed(exc)]

    def _failed(self, exc: Exception) -> str:
        text = _failure_text(exc)
        if self._failure is None:
            self._failure = text
        return text


def _failure_text(exc: Exception) -> str:
    """``exc`` as an output text of ``_Reported``: JSON of what ``_raise_failures`` raises again
    (a record's failure with its fields), marked."""
    failure: dict[str, Any] = {"type": _type_name(exc), "message": str(exc)}
    if type(exc) is RecordError:
        failure["record"] = {
            "index": exc.index,
            "key": exc.key,
            "error": {
                "type": exc.error.type,
                "message": exc.error.message,
                "cause": exc.error.cause,  # what an action raised, as a local RecordError has
                "reason": exc.error.reason,  # a refused resume's, as a local RecordError has
            },
            "run_id": exc.run_id,
            "usage": None if exc.usage is None else exc.usage.model_dump(),
        }
    return _FAILED + json.dumps(failure, default=repr)


def _raise_failures(text: str) -> str:
    """The outputs of ``_Reported`` on to the job, a failure among them raised, which fails the
    job: a ``RecordError`` as the record's own, anything else as a ``RuntimeError`` naming it."""
    if not text.startswith(_FAILED):
        return text
    failure = json.loads(text[1:])
    record = failure.get("record")
    if record is None:
        raise RuntimeError(f"the agent's operator failed: {failure['type']}: {failure['message']}")
    key = record["key"]
    found = record["error"]
    error = ErrorInfo(found["type"], found["message"], found.get("cause"), found.get("reason"))
    usage = None if record["usage"] is None else Usage.model_validate(record["usage"])
    raise RecordError(
        record["index"],
        tupled(key) if type(key) is list else key,
        None,
        error,
        record["run_id"],
        usage=usage,
    )


class _KeyedStateFunction(_WorkerAgent, KeyedProcessFunction):  # type: ignore[misc]
    """The ``durable_memory`` operator's function: each key's session in Flink's keyed state (as
    checkpoint-encoded JSON), so it is in Flink's checkpoints and survives a failover; records
    run one at a time per instance, on an event loop of the worker's own."""

    def __init__(
        self,
        agent: AgentSource,
        env: FlinkExecutionEnvironment,
        parse: Callable[[str], Any] | None,
        json_keys: bool = False,
        resumes: bool = False,
        *,
        max_turns: int | None = None,
    ) -> None:
        super().__init__(agent, env, parse, json_keys, resumes, max_turns=max_turns)
        self._state: Any = None
        self._thread: _LoopThread | None = None

    def _fresh(self) -> dict[str, Any]:
        return {**super()._fresh(), "_state": None, "_thread": None}

    def open(self, runtime_context: Any) -> None:
        descriptor = ValueStateDescriptor("adk.session", Types.STRING())
        self._state = runtime_context.get_state(descriptor)
        self._thread = _LoopThread()

    def close(self) -> None:
        self._close_runner()
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def process_element(self, value: Any, ctx: Any) -> Iterator[str]:
        assert self._thread is not None, "the function was not opened"
        index, key = next(self._numbers), self._key(ctx.get_current_key())
        index = self._numbered(value, index)
        record = self._record(value)
        if type(key) is _NoKey:  # its key could not be found (``_KeyFinder``): no state touched
            yield from self._keyless(index, key, record)
            return
        stored = self._state.value()
        sessions: dict[Hashable, dict[str, Any]] = {}
        if stored is not None:
            sessions[key] = from_json_value(json.loads(stored))
        # Its error's too, should its session fail to be kept (a resume's run goes on).
        run_id = (type(record) is Resume and record.run_id) or _new_run_id()
        outputs = self._thread.run(self._one(index, key, record, sessions, run_id))

        def commit() -> None:  # refuses what a checkpoint refuses, NaN included
            text = json.dumps(to_json_value(sessions[key], f"the session of key {key!r}"))
            self._state.update(text)

        kept = commit if key in sessions else None
        yield from self._leaving(outputs, index, key, record, run_id, kept)

    async def _one(
        self,
        index: int,
        key: Hashable,
        record: Any,
        sessions: dict[Hashable, dict[str, Any]],
        run_id: str,
    ) -> list[KeyedOutput]:
        runner = self._runner_for_this_worker()
        return await self._run(runner, sessions, index, key, record, None, run_id)


class _LoopThread:
    """An event loop on a thread of its own, for an operator whose calls are synchronous."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self._loop.close()


@contextmanager
def _shipping(agent: AgentSource) -> Iterator[None]:
    """Around PyFlink's pickling of the operator's function, which ships ``agent``: an agent
    holding what cannot be pickled (its own ``resources=``, with a model's HTTP client or an MCP
    session, as every local example gives them) failed ``apply`` with cloudpickle's words alone,
    ``TypeError: cannot pickle '_thread.RLock' object``, naming neither the agent nor the part.
    Only on a failure is the agent pickled again, to tell whether it is the cause."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc.__cause__, PydanticUndefinedAnnotation):
            raise  # an event class that cannot be built: ``_build_shipped_events`` named it
        problem = _unshippable(agent)
        if problem is None:
            raise
        raise TypeError(f"{problem} ({type(exc).__name__}: {exc}); {_SHIP_HINT}") from exc


_SHIP_HINT = (
    "models, MCP sessions, HTTP clients and stores cannot travel to the Flink workers: give "
    "apply a function that builds the agent in each worker (apply(lambda: MyAgent('name', "
    "resources=build_resources()))), or give the environment resources=build_resources, a "
    "function each worker calls"
)


def _unshippable(agent: AgentSource) -> str | None:
    """What of ``agent`` cannot be pickled, said for an error; None if it pickles."""
    try:
        cloudpickle.dumps(agent)
    except Exception:
        pass
    else:
        return None
    if not isinstance(agent, Agent):
        name = _source_name(agent)
        return (
            f"apply cannot ship the function {name} to the Flink workers: what it holds cannot "
            "be pickled (a model, an MCP session or a client it uses from outside: build them "
            "inside it)"
        )
    held = getattr(agent, "__dict__", {})
    for name, value in held.items():
        try:
            cloudpickle.dumps(value)
        except Exception:
            return (
                f"apply cannot ship agent {agent.name!r} to the Flink workers: its attribute "
                f"{name!r} ({type(value).__module__}.{type(value).__qualname__}) cannot be pickled"
            )
    return f"apply cannot ship agent {agent.name!r} to the Flink workers: it cannot be pickled"


def _source_name(source: object) -> str:
    """A function's name for ``_unshippable``'s error: its ``__qualname__``, else (a callable
    object, a ``functools.partial``) its repr, else its class's name, for one whose repr or
    attribute look-up fails: that failure would replace the error being raised."""
    try:
        name = getattr(source, "__qualname__", None)
        return name if isinstance(name, str) else repr(source)
    except Exception:
        return f"{type(source).__qualname__} object"


def _build_shipped_events(function: _WorkerAgent) -> None:
    """Build the event classes of the job script that ``function`` ships, before PyFlink pickles
    it: a class whose annotations could not be resolved where it was defined (``_unbuilt``: a
    forward reference to a class defined later in the script) is still deferred, and a deferred
    class cannot be unpickled by the workers (a RecursionError there). Built now, with the whole
    script run up to ``apply``, the names usually resolve; a name that never will (imported only
    under ``if TYPE_CHECKING``) is a ``TypeError`` here naming the class and the name.

    Only when some event class was left deferred (rare) is the function pickled once more here,
    to find the classes it ships by value; classes pickled by reference are imported by the
    workers, where they build at first use as anywhere."""
    if all(cls.__pydantic_complete__ for cls in _unbuilt):
        return
    _EventBuilder(io.BytesIO()).dump(function)


# cloudpickle's own test of whether it pickles a class by reference (importable) or by value;
# private, so, should a release drop it, every deferred event class shipped is built here.
_by_reference: Callable[[type], bool] = getattr(
    cloudpickle.cloudpickle, "_should_pickle_by_reference", lambda cls: False
)


class _EventBuilder(cloudpickle.Pickler):  # type: ignore[misc]  # cloudpickle is untyped
    """A pickling pass that builds each still-deferred event class it ships by value."""

    def reducer_override(self, obj: Any) -> Any:
        if (
            isinstance(obj, type)
            and issubclass(obj, Event)
            and not obj.__pydantic_complete__
            and not _by_reference(obj)
        ):
            try:
                obj.model_rebuild()
            except PydanticUndefinedAnnotation as exc:
                raise TypeError(
                    f"event class {obj.__qualname__} cannot be shipped to the Flink workers: its "
                    f"annotation {exc.name!r} is not defined in {obj.__module__} (a name imported "
                    "only under 'if TYPE_CHECKING', or a class defined inside a function after "
                    "it). Import or define it at run time before apply, or call "
                    f"{obj.__name__}.model_rebuild() where it is defined"
                ) from exc
        return super().reducer_override(obj)


def _paused_in(outputs: list[KeyedOutput]) -> tuple[str | None, str]:
    """The checkpoint a record's run paused in, if it paused, and the note naming it that the
    record's error ends with (``""`` if none): one wording for every failure of a paused record."""
    paused = next((output.checkpoint_id for output in outputs if output.checkpoint_id), None)
    saved = f" (its pause is saved as checkpoint {paused!r})" if paused is not None else ""
    return paused, saved


_RECOVERY_OPTIONS = ("execution.state-recovery.path", "execution.savepoint.path")
"""Where a job is told to start from a savepoint or checkpoint (Flink 2's name, then 1's)."""


def _why_state_is_restored(env: StreamExecutionEnvironment) -> str | None:
    """Why a job of ``env`` would restore its operators' state, or ``None`` if it never does:
    with checkpointing on, a failover (and a rescale) restores the last checkpoint and its source
    goes on from there; a job started from a savepoint or checkpoint restores that one. Read when
    the agent is applied, as PyFlink ships the operator's function then."""
    if env.get_checkpoint_config().is_checkpointing_enabled():
        return "checkpointing is enabled"
    options = env._j_stream_execution_environment.getConfiguration().toMap()
    for option in _RECOVERY_OPTIONS:
        path = options.get(option)
        if path:
            return f"it starts from the savepoint or checkpoint {option}={path}"
    return None


_UNKEYED_ROW = Types.ROW([Types.STRING(), Types.LONG()])
"""A record of ``from_list`` without a key: its JSON text and its position in the list."""

_KEYED_ROW = Types.ROW([Types.STRING(), Types.STRING(), Types.LONG()])
"""A keyed record of ``from_list``: its key's JSON text, its own, and its position in the list
(-1 for a resume, which has none)."""


def _keyed_rows(selector: KeySelector, records: Iterable[Any]) -> list[Row]:
    """``records`` as they travel with a key: each one's key (of its JSON data, as the agent gets
    it) and the record, each as JSON text, and its position (which its errors name). Every record is checked before any key is found, so
    a record JSON cannot hold is named as such, wherever the key selector would fail first."""
    data = [_jsonable(record, index) for index, record in enumerate(records)]  # its text, decoded
    texts = [_json_text(value, f"record {index}") for index, value in enumerate(data)]
    return [
        Row(_key_json(selector, value, index), text, index)
        for index, (value, text) in enumerate(zip(data, texts, strict=True))
    ]


def _kept_json(record: Any, index: int) -> Any:
    """``_models_nan_kept(record, fallback=False)``; what it cannot write is a ``ValueError``
    naming the record and where in it (``_unwritable``), not pydantic's words alone: its
    ``PydanticSerializationError``, a model holding itself ("Circular reference detected", a
    plain ValueError), a dict key it cannot write (a ``frozenset``: a TypeError), or a dict or
    list holding itself (a ``RecursionError``)."""
    try:
        return _models_nan_kept(record, fallback=False)
    except (ValueError, TypeError, RecursionError) as exc:
        raise _unwritable(record, f"record {index}", None, exc) from None


def _jsonable(record: Any, index: int) -> Any:
    """``to_jsonable_python(record)``, failing as ``_kept_json`` does."""
    try:
        return to_jsonable_python(record)
    except (ValueError, TypeError, RecursionError) as exc:
        raise _unwritable(record, f"record {index}", None, exc) from None


def _key_json(selector: KeySelector, data: Any, index: int) -> str:
    try:
        key = key_of(selector, data, index)
    except _KeyRefused as exc:  # found, and of a type keys may not be (``ambiguous``)
        raise ValueError(
            f"the key of record {index} ({exc.key!r}) is refused: {exc.problem}"
        ) from exc
    except Exception as exc:
        raise ValueError(
            f"the key of record {index} could not be found: {key_failure(selector, exc)}"
        ) from exc
    problem = _not_a_json_key(key)
    if problem is not None:
        raise ValueError(f"the key of record {index} ({key!r}) cannot travel as JSON: {problem}")
    try:
        return _json_text(key, f"the key of record {index}")
    except ValueError as exc:
        raise ValueError(
            f"the key of record {index} ({key!r}) cannot travel as JSON: {exc}"
        ) from exc


# What a key can be and come back equal to itself from its JSON text (a tuple as an array).
_JSON_KEY_TYPES = (str, int, float, type(None))


def _not_a_json_key(key: Any) -> str | None:
    """Why ``key`` would not come back from JSON as itself, or ``None``. pydantic's encoder turns
    a ``datetime``, ``bytes`` or ``Enum`` into a string and a ``frozenset`` into an array, so two
    distinct keys could share one text, or a key come back unequal to itself (a different
    session); each is refused instead. (bool is an int; a str or int subclass, a ``StrEnum``,
    comes back as its value, which it equals.)"""
    if isinstance(key, tuple):
        for item in key:
            problem = _not_a_json_key(item)
            if problem is not None:
                return problem
        return None
    if isinstance(key, _JSON_KEY_TYPES):
        return None
    return (
        f"{type(key).__qualname__} is not a JSON key (use a str, an int, None or a tuple of them)"
    )


def _key_text(row: Row) -> str:
    """``key_by``'s selector for ``from_list``'s keyed records: the key's text, found without
    decoding the record."""
    text: str = row[0]
    return text


def _decoded_key(text: str) -> Hashable:
    """A key from its JSON text: JSON's arrays back as tuples (a key is hashable, so an array was
    a tuple)."""
    key = json.loads(text)
    found: Hashable = tupled(key) if type(key) is list else key
    return found
