"""``LocalExecutionEnvironment``: any agent over keyed records, in one process.

The semantics are those of a keyed stream: records of one key run one after another, in the order
they came, each seeing the session (and so the short-term memory) the previous one left; records of
different keys run concurrently, at most ``max_concurrency`` keys at a time. A record's session
changes are kept when its run ends or pauses and dropped when it fails, so a failed record cannot
leave half its writes behind for the next record of its key.

Each record is one run of a ``Runner`` that the environment builds: callbacks, tracing, resources
and checkpoints work as for any run, and a record that pauses is reported with its checkpoint id,
resumable with ``outputs.resume`` as a record of its key (it waits for its key's running record,
runs on the key's session and commits like any record), or through ``apply(agent, resumes=...)``,
a stream of resumes read beside the records, in the shape a Flink job takes (``_resumes``), so one
script runs here and on Flink.
"""

from __future__ import annotations

import asyncio
import types
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Hashable,
    Iterable,
    Iterator,
    Mapping,
)
from typing import TYPE_CHECKING, Any, Generic, overload

from .._aio import cancel_and_wait
from .._checks import check_callbacks, check_resources
from .._driver import is_cancellation
from ..agent import Agent
from ..checkpoint.store import CheckpointStore
from ..events import ErrorInfo
from ..messages import Usage
from ..runner import Runner, _check_store
from ._records import (
    KeyedOutput,
    KeySelector,
    OnError,
    RecordError,
    Sessions,
    check_options,
    check_records,
    check_sessions,
    checked_key,
    checked_max_turns,
    key_failure,
    key_of,
    resume_record,
    run_record,
)
from ._resumes import NEEDS_A_KEY, Resume, parsed
from ._session_store import SessionNotSaved

__all__ = ["KeyedInput", "KeyedOutputs", "LocalExecutionEnvironment"]

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider
    from typing_extensions import TypeVar

    from ..checkpoint._pending import PendingCheckpoint

    # The ``sessions`` an application holds: the one given, or the dict it made for none. The
    # default (PEP 696) keeps a bare ``KeyedOutputs`` annotation valid under ``mypy --strict``,
    # and covariance keeps any application's outputs one (``sessions`` is read, not replaced).
    _S = TypeVar("_S", bound=Sessions, covariant=True, default=Sessions)
else:
    from typing import TypeVar

    # Python 3.11's TypeVar takes no default: type checkers read the one above.
    _S = TypeVar("_S", covariant=True)
_Given = TypeVar("_Given", bound=Sessions)  # what ``apply`` is given

BUFFER_PER_KEY = 4
"""Records read ahead per running key, at most (see ``_Scheduler``)."""


class LocalExecutionEnvironment:
    """Runs agents over keyed records on this process's event loop.

    ``max_concurrency`` bounds the keys processed at once (and so the runs in flight).
    ``on_error``: ``"raise"`` stops everything at the first failed record (``RecordError``: no
    record starts after it, and the source is read no further);
    ``"emit"`` reports it as a ``KeyedOutput`` with ``error`` and carries on. ``timeout``
    (seconds, default none) bounds one record's own run, not its wait behind earlier records of
    its key: a record that runs longer is cancelled, its session writes are dropped, and it fails
    like any record, with a ``TimeoutError``; it bounds each call of a ``SessionStore`` too
    (``_session_store``). The other arguments are the ``Runner``'s, for the
    runs of every record.
    """

    def __init__(
        self,
        *,
        max_concurrency: int = 64,
        on_error: OnError = "raise",
        timeout: float | None = None,
        resources: Any = None,
        callbacks: Iterable[Any] = (),
        checkpoint_store: CheckpointStore | None = None,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        check_options(max_concurrency, on_error, timeout, optional_timeout=True)
        self.max_concurrency = max_concurrency
        self.on_error: OnError = on_error
        self.timeout = timeout
        # Checked here, not when apply builds the records' Runner: a mistake shows where it is.
        check_resources(resources, "LocalExecutionEnvironment")
        if checkpoint_store is not None:
            _check_store(checkpoint_store, "LocalExecutionEnvironment")
        self.resources = resources
        self.callbacks = check_callbacks(callbacks, "LocalExecutionEnvironment")
        self.checkpoint_store = checkpoint_store
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider

    def from_list(
        self, records: Iterable[Any] | AsyncIterable[Any], key: KeySelector = None
    ) -> KeyedInput:
        """Records from a list or any iterable, sync or async (an async one may be unbounded: it is
        read as fast as the outputs are taken).

        ``key``: a function of the record, or the name of a field (a mapping key or attribute);
        ``None`` makes every record its own key (all independent: no session is kept for them).
        """
        check_records(records)
        return KeyedInput(self, records, checked_key(key))


class KeyedInput:
    """Records with their key selector, waiting for an agent (``apply``)."""

    def __init__(
        self,
        env: LocalExecutionEnvironment,
        records: Iterable[Any] | AsyncIterable[Any],
        key: KeySelector,
    ) -> None:
        self._env = env
        self._records = records
        self._key = key
        # A generator or iterator (a broker consumer) can be read once: a second agent applied
        # to it would get nothing, or, read at the same time, fail inside the source.
        self._read_once = isinstance(records, Iterator | AsyncIterator)
        self._applied = False

    @overload
    def apply(
        self,
        agent: Agent | Callable[[], Agent],
        *,
        sessions: None = None,
        resumes: Iterable[Any] | AsyncIterable[Any] | None = None,
        max_turns: int | None = None,
    ) -> KeyedOutputs[dict[Any, dict[str, Any]]]: ...
    @overload
    def apply(
        self,
        agent: Agent | Callable[[], Agent],
        *,
        # ``| None``: a caller's own optional parameter passed on (typed as what it may be; when
        # it is None, the dict made is there). Not a third overload: an argument holding Any
        # (``dict[str, Any]`` values) that matched two would make the result Any.
        sessions: _Given | None,
        resumes: Iterable[Any] | AsyncIterable[Any] | None = None,
        max_turns: int | None = None,
    ) -> KeyedOutputs[_Given]: ...
    def apply(
        self,
        agent: Agent | Callable[[], Agent],
        *,
        sessions: Sessions | None = None,
        resumes: Iterable[Any] | AsyncIterable[Any] | None = None,
        max_turns: int | None = None,
    ) -> KeyedOutputs[Any]:
        """Run ``agent`` over the records; iterate the result (or ``await .to_list()``).

        ``agent`` may also be a function that builds it, as ``FlinkKeyedInput.apply`` takes (an
        extension to DESIGN.md): called once, here, so a job written for Flink
        (``apply(lambda: Ledger("ledger"))``) runs and is tested locally as it is.

        ``sessions``: each key's session values to start from, updated in place as records
        commit (not used without a key). Pass the ``sessions`` of an earlier application to carry
        keys' memory from one batch to the next, or a ``SessionStore`` (async ``get``/``put``) to
        keep it in a store of your own, such as Redis or a database, across restarts.

        ``resumes``: paused outputs to resume, as ``FlinkKeyedInput.apply`` takes them (each a
        dict, or its JSON text, with ``key``, ``checkpoint_id`` and ``run_id``, and the resume's
        data under ``"resume"``), from an iterable or async iterable read beside the records.
        Each runs as a record of its key (after the key's records read before it, on the key's
        session, its writes kept), its outputs in the stream under the paused run's ``run_id``;
        one naming no paused record is a failed output of its own. Only with a key.

        ``max_turns``: the most model calls each record's run may make (``Runner.run``'s), so a
        runaway agent cannot spend without end on one record; a record past it fails
        (``MaxTurnsExceeded``) under ``on_error``. A resume (``resumes``, ``outputs.resume``)
        goes on counting the calls made before its pause, under this limit if given, else
        under the one its paused run had.
        """
        if not isinstance(agent, Agent):
            agent = _built(agent)
        limit = checked_max_turns(max_turns)
        check_sessions(sessions)
        if resumes is not None:
            _check_resumes(resumes, self._key)
        if self._read_once and self._applied:
            raise RuntimeError(
                f"these records are an iterator ({type(self._records).__name__}), which can be "
                "read only once, and an agent was already applied to them: apply one agent (a "
                "SequentialAgent or ParallelAgent of several), or give records that can be read "
                "again, such as a list"
            )
        self._applied = True
        env = self._env
        runner = Runner(
            agent,
            env.checkpoint_store,
            callbacks=env.callbacks,
            resources=env.resources,
            tracer_provider=env.tracer_provider,
            meter_provider=env.meter_provider,
        )
        given = sessions if sessions is not None else {}
        outputs = KeyedOutputs(env, runner, self._records, self._key, given)
        outputs._resumes = resumes
        outputs._max_turns = limit
        return outputs


def _check_resumes(resumes: Any, key: KeySelector) -> None:
    """Refuse at ``apply`` what no resume could come of: no key to run them as records of (as
    Flink refuses it), or not an iterable of resumes (one resume, a dict or its text, is
    iterable as its fields or characters: never meant)."""
    if key is None:
        raise ValueError(NEEDS_A_KEY)
    if isinstance(resumes, str | bytes | bytearray | Mapping) or not isinstance(
        resumes, Iterable | AsyncIterable
    ):
        raise TypeError(
            f"resumes must be an iterable or async iterable of resumes, got "
            f"{type(resumes).__name__} (wrap a single resume in a list)"
        )


class KeyedOutputs(Generic[_S]):
    """The outputs of an agent over keyed records, as they are produced (one pass).

    ``sessions`` holds each key's session values after its records; ``resume`` resumes a record
    that paused as a record of its key (``runner`` resumes it as a plain run, on the session
    saved at the pause). Stopping early (``break``) leaves records running until the outputs are
    closed: use ``async with outputs:`` around the loop, or ``await outputs.aclose()``.
    """

    def __init__(
        self,
        env: LocalExecutionEnvironment,
        runner: Runner,
        records: Iterable[Any] | AsyncIterable[Any],
        key: KeySelector,
        sessions: _S,
    ) -> None:
        self._env = env
        self.runner = runner
        self._records = records
        self._key = key
        self._iterator: AsyncGenerator[KeyedOutput, None] | None = None
        # Closed before it was iterated (a shutdown that came before its consumer started): an
        # iteration then ends at once, as one that was running would have.
        self._closed = False
        self._scheduler: _Scheduler | None = None  # while the records are being processed
        # The keys with a resume running or waiting outside the stream's turns (``_in_order``).
        self._resuming: dict[Hashable, _KeyLock] = {}
        self.sessions = sessions
        self._resumes: Iterable[Any] | AsyncIterable[Any] | None = None  # ``apply``'s
        self._max_turns: int | None = None  # ``apply``'s, for every record's run and resume

    if not TYPE_CHECKING:  # to a type checker they are not iterable ('for', list()): they are not

        def __iter__(self) -> Iterator[KeyedOutput]:
            # Python's own "'KeyedOutputs' object is not iterable" said nothing of how to take
            # them; a sync iteration cannot run the records (they run on the event loop it would
            # block).
            raise TypeError(
                "KeyedOutputs are produced on the event loop: take them with 'async for output "
                "in outputs' (inside 'async with outputs:' to stop early) or 'await "
                "outputs.to_list()', not 'for' or list()"
            )

    def __aiter__(self) -> AsyncIterator[KeyedOutput]:
        if self._iterator is not None:
            raise RuntimeError("these outputs were already iterated; apply the agent again")
        self._iterator = _nothing() if self._closed else self._run()
        return self._iterator

    async def aclose(self) -> None:
        """Cancel the records still running and wait for them to end; outputs not taken yet are
        dropped. From any task: a service's shutdown closes the outputs that another task
        iterates, whose loop then ends as if the records had; closed before any iteration began,
        an iteration ends at once, reading and running no record."""
        iterator, scheduler = self._iterator, self._scheduler
        if iterator is None:  # not iterated yet: it never will be (see ``_closed``)
            self._closed = True
            return
        running = isinstance(iterator, types.AsyncGeneratorType) and iterator.ag_running
        if running and scheduler is not None:
            # Another task waits in it for an output: an async generator cannot be closed then
            # ("already running"). Stop the records here and end that wait.
            try:
                await scheduler.stop()
            finally:  # a put the stop cut off is reported here, and the loop ends all the same
                scheduler.end()
            return
        await iterator.aclose()

    async def __aenter__(self) -> KeyedOutputs[_S]:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def resume(
        self, paused: KeyedOutput | PendingCheckpoint, data: Any = None
    ) -> list[KeyedOutput]:
        """Resume the record that paused with ``paused`` (its output with a ``checkpoint_id``,
        or its entry in the store's listing, ``list_pending``, which names its key); ``data``
        as for ``Runner.resume``. Its outputs are returned, not added to the stream.

        It runs as a record of its key: after the record of its key running now, if any, and
        before the ones that arrive meanwhile (counted among the ``max_concurrency`` keys
        running, so it may wait for room); on the session the key has now, and its writes
        are kept in ``sessions`` like any record's. It fails like a record (``on_error``: a
        ``RecordError`` raised here, or an output with ``error``), without stopping the stream.
        After the stream, the resumes of one key still run one at a time.
        Records without a key, or whose key has no session kept, resume on the session saved
        at the pause.
        """
        if not isinstance(paused, KeyedOutput):
            paused = self._from_listing(paused)
        if paused.checkpoint_id is None:
            raise ValueError(
                "resume takes a paused record's output (a KeyedOutput with a checkpoint_id), "
                f"got {paused!r}"
            )
        scheduler = self._scheduler
        if scheduler is not None and not scheduler.closed:
            turn = await scheduler.wait_for_turn(paused.key)
            try:
                return self._checked(await self._resumed(paused, data))
            finally:
                turn.end()
        return self._checked(await self._resumed(paused, data))

    def _from_listing(self, entry: object) -> KeyedOutput:
        """The paused output a listing's entry stands for (its key, index, checkpoint and run
        ids), or a ``ValueError`` saying why it cannot be one. Its index is -1 where the pause
        saved none (a pause of a pyadk from before the listing named records)."""
        from ..checkpoint._pending import PendingCheckpoint  # loaded by a listing already

        if not isinstance(entry, PendingCheckpoint):
            raise ValueError(
                "resume takes a paused record's output (a KeyedOutput with a checkpoint_id) or "
                f"its entry in list_pending, got {entry!r}"
            )
        if entry.error is not None:
            raise ValueError(
                f"checkpoint {entry.checkpoint_id!r} cannot be resumed: its listing could not "
                f"read it ({entry.error})"
            )
        if not entry.keyed and self._key is not None:
            raise ValueError(
                f"checkpoint {entry.checkpoint_id!r} names no record key (a pause of a run that "
                "is no keyed record's, or of a pyadk from before pauses were listed with their "
                "key): give resume the paused output, or one made of its key, "
                "KeyedOutput(key=..., index=..., record=None, checkpoint_id=..., run_id=...)"
            )
        if entry._key_shown is not None:
            raise ValueError(
                f"checkpoint {entry.checkpoint_id!r} paused a record of key {entry.key} (a "
                f"{entry._key_shown}, which a listing shows as its repr, not the key itself, "
                "which is not a JSON value): give resume the paused output, or one made of the "
                "key itself, KeyedOutput(key=..., index=..., record=None, checkpoint_id=..., "
                "run_id=...)"
            )
        index = entry.index if entry.index is not None else -1
        return KeyedOutput(
            entry.key, index, None, checkpoint_id=entry.checkpoint_id, run_id=entry.run_id
        )

    async def _resumed(self, paused: KeyedOutput, data: Any) -> list[KeyedOutput]:
        """``_resume``'s outputs, or its failure when the runner or the key's session store
        raised (a checkpoint gone, resumed already; a store that is down) rather than failing
        the run: a failed output under the paused run's id, as the stream's resumes fail
        (``_Scheduler.work``), which ``_checked`` raises or returns as ``on_error`` says."""
        try:
            return await self._resume(paused, data)
        except SessionNotSaved:  # cut off by a cancellation: that is what the caller gets
            raise
        except Exception as exc:
            error = ErrorInfo.of(exc)
            failed = KeyedOutput(
                paused.key,
                paused.index,
                paused.record,
                error=error,
                run_id=paused.run_id,
                resumed=True,
                _exception=exc,
            )
            return [failed]

    async def _resume(self, paused: KeyedOutput, data: Any) -> list[KeyedOutput]:
        if self._key is None:  # no session per key: nothing to keep in order
            return await resume_record(
                self.runner, None, paused, data, self._env.timeout, self._max_turns
            )
        # One at a time per key even where no turn orders them (the stream is over, or stopped
        # and its waiting turns given): each resume copies the key's session and commits its
        # copy, so two at once would drop the first one's writes.
        key, resuming = paused.key, self._resuming
        held = resuming.get(key)
        if held is None:
            held = resuming[key] = _KeyLock()
        held.users += 1
        try:
            async with held.lock:
                return await resume_record(
                    self.runner, self.sessions, paused, data, self._env.timeout, self._max_turns
                )
        finally:
            held.users -= 1
            if not held.users:
                del resuming[key]

    def _checked(self, found: list[KeyedOutput]) -> list[KeyedOutput]:
        if self._env.on_error == "raise":
            for output in found:
                if output.error is not None:
                    failure = RecordError(
                        output.index,
                        output.key,
                        output.record,
                        output.error,
                        output.run_id,
                        usage=output.usage,
                    )
                    raise failure from output._exception
        return found

    async def to_list(self) -> list[KeyedOutput]:
        """Every output, in record order (and, within a record, in the order it was produced),
        then the outputs of ``apply``'s ``resumes``, in the resumes' order."""
        found = [output async for output in self]
        found.sort(key=lambda output: (output.resumed, output.index, output._seq))
        return found

    async def _run(self) -> AsyncGenerator[KeyedOutput, None]:
        scheduler = self._scheduler = _Scheduler(self)
        scheduler.feeder = asyncio.create_task(scheduler.feed())
        results, output_room = scheduler.results, scheduler.output_room
        try:
            while True:
                item = await results.get()
                output_room.set()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            await scheduler.stop()


class _Scheduler:
    """Reads the records, queues them per key, and keeps at most ``max_concurrency`` keys running.

    The reader waits while ``BUFFER_PER_KEY`` times ``max_concurrency`` records wait behind their
    keys' running ones, or, for a new key, while ``max_concurrency`` keys are running, so an
    unbounded source is read only as fast as it is processed, however few keys it has. (Records
    waiting behind their key's running one let its worker go on to the next without a new task.)
    Outputs wait for the consumer in a queue of that same size; a worker with an output and no
    room waits, holding its key, so a slow consumer slows the records and, through them, the
    reading. Nothing else waits on the consumer, so it cannot deadlock while outputs are taken.
    While a resume waits for its turn, workers queue their outputs past that size: the consumer
    may be what is waiting for the resume (a loop that approves what pauses), not taking
    outputs, and the workers the resume waits for must not wait for it in turn. The reader then
    waits instead, while the outputs not taken fill the queue, so what piles up is at most the
    outputs of the records read so far, however long the resume waits.
    """

    def __init__(self, outputs: KeyedOutputs[Any]) -> None:
        self.outputs = outputs
        self.limit = outputs._env.max_concurrency
        self.most_buffered = self.limit * BUFFER_PER_KEY
        self.emit_errors = outputs._env.on_error == "emit"
        # Without a key every record is its own: no session to read or keep (see run_record).
        self.sessions = outputs.sessions if outputs._key is not None else None
        # Unbounded as a queue: ``put`` keeps it to ``most_buffered`` (see the class docstring).
        self.results: asyncio.Queue[KeyedOutput | BaseException | None] = asyncio.Queue()
        self.output_room = asyncio.Event()
        self.resumes_waiting = 0
        self.waiting: dict[Hashable, deque[tuple[int, Any]]] = {}
        self.workers: set[asyncio.Task[None]] = set()
        self.buffered = 0
        self.room = asyncio.Event()
        self.room.set()
        self.closed = False  # no worker will start any more: a resume runs on its own
        # A record failed with ``on_error="raise"``: the iteration ends with it, so no record
        # starts after it (the records of its key behind it included) and no more are read.
        self.failed = False
        self.feeder: asyncio.Task[None] | None = None

    async def feed(self) -> None:
        try:
            resumes = self.outputs._resumes
            if resumes is None:
                await self.read_records()
            else:
                await self.read_with_resumes(resumes)
            while self.workers:
                await asyncio.gather(*list(self.workers))
            self.closed = True
            await self.results.put(None)
        except (Exception, asyncio.CancelledError) as exc:
            if is_cancellation(exc):
                raise
            await self.results.put(exc)

    async def read_records(self) -> None:
        index = 0
        async for record in _each(self.outputs._records):
            try:
                key = key_of(self.outputs._key, record, index)
            except Exception as exc:
                error = key_failure(self.outputs._key, exc)
                await self.fail(index, None, record, exc, error=error)
            else:
                await self.place(index, key, record)
            index += 1
            if self.failed:  # the iteration ends with that failure: read no further
                return
            if self.resumes_waiting:
                await self.read_on()

    async def read_with_resumes(self, resumes: Iterable[Any] | AsyncIterable[Any]) -> None:
        """The records and the resumes read at once, each placed as it comes (a resume behind
        its key's records read so far), as Flink's union of the two streams keys them: a resume
        waiting for its source does not hold up the records, nor the records the resumes. The
        first source to fail stops the other."""
        readers = [
            asyncio.create_task(self.read_records()),
            asyncio.create_task(self.read_resumes(resumes)),
        ]
        try:
            for reader in asyncio.as_completed(readers):
                await reader
        finally:
            await cancel_and_wait(readers)

    async def read_resumes(self, resumes: Iterable[Any] | AsyncIterable[Any]) -> None:
        """Each resume placed as a record of its key; one that names no paused record fails
        at once (``on_error``), as on Flink, where it is a failed output of its own."""
        index = 0
        async for given in _each(resumes):
            resume = parsed(given)
            if resume.checkpoint_id is None:  # ``problem`` says why
                problem = resume.problem
                if isinstance(given, KeyedOutput):  # the natural mistake here, never on Flink
                    problem = (
                        "is a KeyedOutput: give its key, checkpoint_id and run_id in a dict with "
                        "the resume's data under 'resume', as a Flink job takes it, or call "
                        "outputs.resume(paused, data)"
                    )
                exc = ValueError(f"resume {index} (key {resume.key!r}) {problem}")
                await self.fail(index, resume.key, given, exc, resumed=True)
            else:
                await self.place(index, resume.key, _Resuming(index, given, resume))
            index += 1
            if self.failed:
                return
            if self.resumes_waiting:
                await self.read_on()

    async def read_on(self) -> None:
        """Wait, before reading on, while a resume waits for its turn (``outputs.resume``) and
        the outputs not taken fill the queue (see the class docstring)."""
        results = self.results
        while self.resumes_waiting and results.qsize() >= self.most_buffered:
            self.output_room.clear()
            await self.output_room.wait()

    async def place(self, index: int, key: Hashable, record: Any) -> None:
        """Queue ``record`` behind its key's running one, or start a worker for its key, once
        there is room: fewer than ``most_buffered`` records waiting, or fewer than ``limit``
        keys running. The key is looked up again after each wait: a resume may have started
        a worker for it meanwhile (``take_turn``), and a second would run beside it."""
        while True:
            queued = self.waiting.get(key)
            if queued is not None:
                if self.buffered < self.most_buffered:
                    queued.append((index, record))
                    self.buffered += 1
                    return
            elif len(self.workers) < self.limit:
                self.waiting[key] = deque([(index, record)])
                self.buffered += 1
                self.workers.add(asyncio.create_task(self.work(key)))
                return
            self.room.clear()
            await self.room.wait()

    async def work(self, key: Hashable) -> None:
        queued, runner, results = self.waiting[key], self.outputs.runner, self.results
        most_buffered = self.most_buffered
        timeout, max_turns = self.outputs._env.timeout, self.outputs._max_turns
        try:
            seq = 0
            while queued and not self.failed:
                index, record = queued.popleft()
                if type(record) is _Turn:  # a paused record's resume: its caller runs it
                    await record.hand_over()
                    continue
                self.buffered -= 1
                self.room.set()
                resuming: _Resuming | None = record if type(record) is _Resuming else None
                resumed = resuming is not None
                try:
                    if resuming is not None:  # one of ``apply``'s resumes, as a record of its key
                        paused = resuming.paused
                        record = paused.record
                        found = await resume_record(
                            runner, self.sessions, paused, resuming.data, timeout, max_turns
                        )
                    else:
                        found = await run_record(
                            runner, self.sessions, index, key, record, timeout, None, max_turns
                        )
                except SessionNotSaved:  # cut off by the close, which reports it (``stop``)
                    raise
                except Exception as exc:  # the runner itself failed (e.g. a checkpoint store)
                    # A resume's failure names the paused run it was to go on with (its trace),
                    # as when its checkpoint is gone: resumed already, an approval given twice.
                    run_id = resuming.paused.run_id if resuming is not None else None
                    await self.fail(index, key, record, exc, resumed, run_id)
                    continue
                for output in found:
                    if output.error is not None and not self.emit_errors:
                        self.failed = True
                        failure = _failure(
                            index, key, record, output.error, output.run_id, resumed, output.usage
                        )
                        failure.__cause__ = output._exception
                        await self.put(failure)
                        continue
                    output._seq = seq
                    seq += 1
                    if results.qsize() < most_buffered:  # room: no wait, no frame of ``put``
                        results.put_nowait(output)
                    else:
                        await self.put(output)
        finally:
            for _, waiting in queued:  # stopped: resumes waiting here go on without the stream
                if type(waiting) is _Turn:
                    waiting.give()
            del self.waiting[key]
            # Leave the set now, not in a done callback: the reader, woken below, counts it.
            self.workers.discard(asyncio.current_task())
            self.room.set()

    async def put(self, output: KeyedOutput | BaseException) -> None:
        """Queue an output for the consumer once there is room (none is needed while a resume
        waits for its turn)."""
        results = self.results
        while results.qsize() >= self.most_buffered and not self.resumes_waiting:
            self.output_room.clear()
            await self.output_room.wait()
        results.put_nowait(output)

    async def wait_for_turn(self, key: Hashable) -> _Turn:
        """``take_turn`` and wait until it is given, with the outputs' bound lifted meanwhile."""
        self.resumes_waiting += 1
        self.output_room.set()
        try:
            turn = await self.take_turn(key)
            try:
                await turn.given
            except BaseException:
                turn.end()
                raise
            return turn
        finally:
            self.resumes_waiting -= 1

    async def take_turn(self, key: Hashable) -> _Turn:
        """A place for a resume in ``key``'s queue, behind the records of the key read so far.
        If none runs, a worker starts for the key once fewer than ``max_concurrency`` keys run
        (the key's next records wait behind it); stopped meanwhile, the resume goes on alone."""
        turn = _Turn()
        while True:
            queued = self.waiting.get(key)
            if queued is not None:
                queued.append((-1, turn))
                return turn
            if self.closed:
                turn.give()
                return turn
            if len(self.workers) < self.limit:
                break
            self.room.clear()
            await self.room.wait()
        self.waiting[key] = deque([(-1, turn)])
        self.workers.add(asyncio.create_task(self.work(key)))
        return turn

    async def fail(
        self,
        index: int,
        key: Hashable,
        record: Any,
        exc: Exception,
        resumed: bool = False,
        run_id: str | None = None,
        error: ErrorInfo | None = None,
    ) -> None:
        """Report record ``index`` failed with ``exc`` (``error``: how to describe it, when not
        as ``exc`` says itself)."""
        if error is None:
            error = ErrorInfo.of(exc)
        if self.emit_errors:
            output = KeyedOutput(key, index, record, error=error, run_id=run_id, resumed=resumed)
            await self.put(output)
        else:
            self.failed = True
            failure = _failure(index, key, record, error, run_id, resumed)
            failure.__cause__ = exc
            await self.put(failure)

    async def stop(self) -> None:
        """Cancel the reader and every running record, and wait for them to end. A record whose
        session's put was cut off or failed meanwhile is raised (``SessionNotSaved``): the only
        word of that key's session not being saved."""
        self.closed = True
        tasks = [*self.workers] if self.feeder is None else [self.feeder, *self.workers]
        # Only the tasks this stop ends: a second stop (the iteration's, after a close from
        # another task) reports nothing again.
        tasks = [task for task in tasks if not task.done()]
        # Through cancellations of the caller (an anyio cancel scope): see ``cancel_and_wait``.
        await cancel_and_wait(tasks)
        # By identity: the reader, waiting for the workers, ends with a worker's error too.
        found = {
            id(error): error
            for task in tasks
            if not task.cancelled() and isinstance(error := task.exception(), SessionNotSaved)
        }
        unsaved = list(found.values())
        if len(unsaved) == 1:
            raise unsaved[0]
        if unsaved:  # each key named, each store error kept
            raise ExceptionGroup(f"the sessions of {len(unsaved)} keys may not be saved", unsaved)

    def end(self) -> None:
        """End the iteration, which waits for an output: the outputs not taken are dropped (as
        when it is closed) and the end is queued. Nothing else puts any more: it is stopped."""
        results = self.results
        while not results.empty():
            results.get_nowait()
        results.put_nowait(None)


def _failure(
    index: int,
    key: Hashable,
    record: Any,
    error: ErrorInfo,
    run_id: str | None,
    resumed: bool,
    usage: Usage | None = None,
) -> RecordError:
    failure = RecordError(index, key, record, error, run_id, usage=usage)
    if resumed:  # ``index`` is the resume's position among ``apply``'s resumes, not a record's
        failure.args = (f"resume {index} (key {key!r}) failed: {error}",)
    return failure


class _Resuming:
    """One of ``apply``'s resumes in its key's queue: the paused output it names, as
    ``resume_record`` takes it (its ``index`` the resume's position among the resumes, its
    ``record`` the resume as given), and the resume's data."""

    __slots__ = ("data", "paused")

    def __init__(self, index: int, given: Any, resume: Resume) -> None:
        self.paused = KeyedOutput(
            resume.key,
            index,
            given,
            checkpoint_id=resume.checkpoint_id,
            run_id=resume.run_id,
        )
        self.data = resume.data


class _KeyLock:
    """The lock that keeps one key's resumes one at a time, and how many hold or wait for it (it
    is dropped with the last, so a long-lived application keeps none per key)."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


class _Turn:
    """A resume's place in its key's queue: the worker ``give``s the key to the resume's caller,
    which runs it in its own task (so cancelling the caller cancels the resume), and waits until
    the caller ``end``s it, so the key's next record sees what the resume wrote."""

    __slots__ = ("ended", "given")

    def __init__(self) -> None:
        loop = asyncio.get_running_loop()
        self.given: asyncio.Future[None] = loop.create_future()
        self.ended: asyncio.Future[None] = loop.create_future()

    def give(self) -> None:
        if not self.given.done():
            self.given.set_result(None)

    def end(self) -> None:
        if not self.ended.done():
            self.ended.set_result(None)

    async def hand_over(self) -> None:
        self.give()
        await self.ended  # already done if the caller was cancelled while waiting for its turn


async def _nothing() -> AsyncGenerator[KeyedOutput, None]:
    """The iteration of outputs closed before it began: no record is read or run."""
    return
    yield


async def _each(records: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(records, AsyncIterable):
        async for record in records:
            yield record
    else:
        for record in records:
            yield record


def _built(source: object) -> Agent:
    """The agent a function given to ``apply`` builds (Flink's ``apply`` calls it in each
    worker; here there is one process, so once). Refused before anything is read."""
    if not callable(source):
        raise TypeError(f"apply takes an Agent or a function that builds one, not {source!r}")
    agent = source()
    if not isinstance(agent, Agent):
        raise TypeError(
            f"apply was given {source!r} to build the agent, and it returned "
            f"{type(agent).__name__}, not an Agent"
        )
    return agent
