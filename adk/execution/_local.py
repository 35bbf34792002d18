"""``LocalExecutionEnvironment``: any agent over keyed records, in one process.

The semantics are those of a keyed stream: records of one key run one after another, in the order
they came, each seeing the session (and so the short-term memory) the previous one left; records of
different keys run concurrently, at most ``max_concurrency`` keys at a time. A record's session
changes are kept when its run ends or pauses and dropped when it fails, so a failed record cannot
leave half its writes behind for the next record of its key.

Each record is one run of a ``Runner`` that the environment builds: callbacks, tracing, resources
and checkpoints work as for any run, and a record that pauses is reported with its checkpoint id,
resumable with ``outputs.runner``.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Callable,
    Hashable,
    Iterable,
    Mapping,
)
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_core import to_json

from .._driver import is_cancellation
from ..actions.agent import RECORD_KEY, ActionAgent
from ..agent import Agent
from ..checkpoint.store import CheckpointStore
from ..context import Session
from ..events import ErrorInfo
from ..interrupts import InterruptInfo
from ..messages import Message, Role
from ..runner import RunError, Runner, RunResult

__all__ = ["KeyedInput", "KeyedOutput", "KeyedOutputs", "LocalExecutionEnvironment", "RecordError"]

BUFFER_PER_KEY = 4
"""Records read ahead per running key, at most (see ``_Scheduler``)."""

KeySelector = Callable[[Any], Hashable] | str | None
OnError = Literal["raise", "emit"]


@dataclass(slots=True)
class KeyedOutput:
    """One output of one record: ``output`` is custom data or a message's text (the message
    itself is ``message``). A failed record (with ``on_error="emit"``) has ``error``; a paused one
    has ``interrupt`` and ``checkpoint_id``."""

    key: Hashable
    index: int
    record: Any = field(repr=False)
    output: Any = None
    message: Message | None = field(default=None, repr=False)
    error: ErrorInfo | None = None
    interrupt: InterruptInfo | None = field(default=None, repr=False)
    checkpoint_id: str | None = None
    _seq: int = field(default=0, repr=False, compare=False)
    _exception: BaseException | None = field(default=None, repr=False, compare=False)


class RecordError(Exception):
    """A record failed (with ``on_error="raise"``); the records still running were cancelled."""

    def __init__(self, index: int, key: Hashable, record: Any, error: ErrorInfo) -> None:
        super().__init__(f"record {index} (key {key!r}) failed: {error}")
        self.index = index
        self.key = key
        self.record = record
        self.error = error


class LocalExecutionEnvironment:
    """Runs agents over keyed records on this process's event loop.

    ``max_concurrency`` bounds the keys processed at once (and so the runs in flight).
    ``on_error``: ``"raise"`` stops everything at the first failed record (``RecordError``);
    ``"emit"`` reports it as a ``KeyedOutput`` with ``error`` and carries on. The other arguments
    are the ``Runner``'s, for the runs of every record.
    """

    def __init__(
        self,
        *,
        max_concurrency: int = 64,
        on_error: OnError = "raise",
        resources: Any = None,
        callbacks: Iterable[Any] = (),
        checkpoint_store: CheckpointStore | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        if on_error not in ("raise", "emit"):
            raise ValueError(f"on_error must be 'raise' or 'emit', not {on_error!r}")
        self.max_concurrency = max_concurrency
        self.on_error: OnError = on_error
        self.resources = resources
        self.callbacks = tuple(callbacks)
        self.checkpoint_store = checkpoint_store
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider

    def from_list(
        self, records: Iterable[Any] | AsyncIterable[Any], key: KeySelector = None
    ) -> KeyedInput:
        """Records from a list or any iterable, sync or async (an async one may be unbounded).

        ``key``: a function of the record, or the name of a field (a mapping key or attribute);
        ``None`` makes every record its own key (all independent).
        """
        if not isinstance(records, Iterable | AsyncIterable):
            raise TypeError(f"from_list takes an iterable of records, got {type(records).__name__}")
        if key is not None and not callable(key) and not isinstance(key, str):
            raise TypeError("key must be a function of the record, a field name, or None")
        return KeyedInput(self, records, key)


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

    def apply(self, agent: Agent) -> KeyedOutputs:
        """Run ``agent`` over the records; iterate the result (or ``await .to_list()``)."""
        if not isinstance(agent, Agent):
            raise TypeError(f"apply takes an Agent, got {type(agent).__name__}")
        env = self._env
        runner = Runner(
            agent,
            env.checkpoint_store,
            callbacks=env.callbacks,
            resources=env.resources,
            tracer_provider=env.tracer_provider,
            meter_provider=env.meter_provider,
        )
        return KeyedOutputs(env, runner, self._records, self._key)


class KeyedOutputs:
    """The outputs of an agent over keyed records, as they are produced (one pass).

    ``sessions`` holds each key's session values after its records; ``runner`` resumes the
    records that paused (``await outputs.runner.invoke_resume(output.checkpoint_id, ...)``).
    Stopping early (``break``) leaves records running until the outputs are closed: use
    ``async with outputs:`` around the loop, or ``await outputs.aclose()``.
    """

    def __init__(
        self,
        env: LocalExecutionEnvironment,
        runner: Runner,
        records: Iterable[Any] | AsyncIterable[Any],
        key: KeySelector,
    ) -> None:
        self._env = env
        self.runner = runner
        self._records = records
        self._key = key
        self._iterator: AsyncGenerator[KeyedOutput, None] | None = None
        self.sessions: dict[Hashable, dict[str, Any]] = {}

    def __aiter__(self) -> AsyncIterator[KeyedOutput]:
        if self._iterator is not None:
            raise RuntimeError("these outputs were already iterated; apply the agent again")
        self._iterator = self._run()
        return self._iterator

    async def aclose(self) -> None:
        """Cancel the records still running and wait for them to end."""
        if self._iterator is not None:
            await self._iterator.aclose()

    async def __aenter__(self) -> KeyedOutputs:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def to_list(self) -> list[KeyedOutput]:
        """Every output, in record order (and, within a record, in the order it was produced)."""
        found = [output async for output in self]
        found.sort(key=lambda output: (output.index, output._seq))
        return found

    async def _run(self) -> AsyncGenerator[KeyedOutput, None]:
        scheduler = _Scheduler(self)
        feeder = asyncio.create_task(scheduler.feed())
        try:
            while True:
                item = await scheduler.results.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            await scheduler.stop(feeder)

    # -- one record ------------------------------------------------------------------------------
    def key_of(self, record: Any, index: int) -> Hashable:
        selector = self._key
        if selector is None:
            return index
        value: Hashable
        if isinstance(selector, str):
            value = record[selector] if isinstance(record, Mapping) else getattr(record, selector)
        else:
            value = selector(record)
        hash(value)  # an unhashable key fails here, for this record, with a TypeError
        return value

    async def run_one(self, index: int, key: Hashable, record: Any) -> list[KeyedOutput]:
        values = self.sessions.get(key)
        session = Session(_copied(values) if values else None)
        try:
            result = await self.runner.invoke(_as_input(record), session=session)
        except RunError as exc:
            return [KeyedOutput(key, index, record, error=exc.error, _exception=exc)]
        self.sessions[key] = session.values  # kept: the record ran to its end or paused
        return _outputs_of(self.runner.agent, result, key, index, record)


class _Scheduler:
    """Reads the records, queues them per key, and keeps at most ``max_concurrency`` keys running.

    The reader waits while ``max_concurrency`` keys are running and ``BUFFER_PER_KEY`` times that
    many records wait, so an unbounded source is read only as fast as it is processed. (Records
    waiting behind their key's running one let its worker go on to the next without a new task.)
    """

    def __init__(self, outputs: KeyedOutputs) -> None:
        self.outputs = outputs
        self.limit = outputs._env.max_concurrency
        self.most_buffered = self.limit * BUFFER_PER_KEY
        self.emit_errors = outputs._env.on_error == "emit"
        self.results: asyncio.Queue[KeyedOutput | BaseException | None] = asyncio.Queue()
        self.waiting: dict[Hashable, deque[tuple[int, Any]]] = {}
        self.workers: set[asyncio.Task[None]] = set()
        self.buffered = 0
        self.room = asyncio.Event()
        self.room.set()

    async def feed(self) -> None:
        try:
            index = 0
            async for record in _each(self.outputs._records):
                try:
                    key = self.outputs.key_of(record, index)
                except Exception as exc:
                    self.fail(index, None, record, exc)
                    index += 1
                    continue
                while len(self.workers) >= self.limit and self.buffered >= self.most_buffered:
                    self.room.clear()
                    await self.room.wait()
                queued = self.waiting.get(key)
                if queued is not None:
                    queued.append((index, record))
                    self.buffered += 1
                else:
                    while len(self.workers) >= self.limit:
                        self.room.clear()
                        await self.room.wait()
                    self.waiting[key] = deque([(index, record)])
                    self.buffered += 1
                    self.workers.add(asyncio.create_task(self.work(key)))
                index += 1
            while self.workers:
                await asyncio.gather(*list(self.workers))
            self.results.put_nowait(None)
        except (Exception, asyncio.CancelledError) as exc:
            if is_cancellation(exc):
                raise
            self.results.put_nowait(exc)

    async def work(self, key: Hashable) -> None:
        queued = self.waiting[key]
        try:
            seq = 0
            while queued:
                index, record = queued.popleft()
                self.buffered -= 1
                self.room.set()
                try:
                    found = await self.outputs.run_one(index, key, record)
                except Exception as exc:  # the runner itself failed (e.g. a checkpoint store)
                    self.fail(index, key, record, exc)
                    continue
                for output in found:
                    if output.error is not None and not self.emit_errors:
                        failure = RecordError(index, key, record, output.error)
                        failure.__cause__ = output._exception
                        self.results.put_nowait(failure)
                        continue
                    output._seq = seq
                    seq += 1
                    self.results.put_nowait(output)
        finally:
            del self.waiting[key]
            # Leave the set now, not in a done callback: the reader, woken below, counts it.
            self.workers.discard(asyncio.current_task())
            self.room.set()

    def fail(self, index: int, key: Hashable, record: Any, exc: Exception) -> None:
        error = ErrorInfo.of(exc)
        if self.emit_errors:
            self.results.put_nowait(KeyedOutput(key, index, record, error=error))
        else:
            failure = RecordError(index, key, record, error)
            failure.__cause__ = exc
            self.results.put_nowait(failure)

    async def stop(self, feeder: asyncio.Task[None]) -> None:
        """Cancel the reader and every running record, and wait for them to end."""
        tasks = [feeder, *self.workers]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _each(records: Iterable[Any] | AsyncIterable[Any]) -> AsyncIterator[Any]:
    if isinstance(records, AsyncIterable):
        async for record in records:
            yield record
    else:
        for record in records:
            yield record


def _copied(values: dict[str, Any]) -> dict[str, Any]:
    """A copy of a key's session values deep enough that a failed record's writes stay in it:
    dicts and lists are copied all the way down (memory is JSON data), other objects are shared."""

    def copy(value: Any) -> Any:
        if type(value) is dict:
            return {k: copy(v) for k, v in value.items()}
        if type(value) is list:
            return [copy(v) for v in value]
        return value

    copied: dict[str, Any] = copy(values)
    return copied


def _as_input(record: Any) -> list[Message]:
    """A record as a run's input: text and messages as they are; anything else as a user message
    whose text is the record's JSON and which carries the record itself (``ActionAgent`` takes it
    as ``InputEvent.input``)."""
    if isinstance(record, str):
        return [Message.user(record)]
    if isinstance(record, Message):
        return [record]
    if isinstance(record, list) and record and all(isinstance(m, Message) for m in record):
        return list(record)
    try:  # pydantic's encoder: models, dataclasses, dates; what it cannot encode as text
        text = to_json(record, fallback=str).decode()
    except (TypeError, ValueError):
        text = str(record)
    return [Message(role=Role.USER, content=text, metadata={RECORD_KEY: record})]


def _outputs_of(
    agent: Agent, result: RunResult, key: Hashable, index: int, record: Any
) -> list[KeyedOutput]:
    """An ``ActionAgent``'s every output (each ``OutputEvent``); any other agent's final one."""
    found: list[KeyedOutput] = []
    if isinstance(agent, ActionAgent):
        root = (agent.name,)
        for event in result.events:
            out = event.output
            if out is None or event.run_path != root:
                continue
            found.append(_output(key, index, record, out.message, out.custom))
    elif result.output is not None:
        message = result.output if isinstance(result.output, Message) else None
        found.append(_output(key, index, record, message, None if message else result.output))
    if result.interrupt is not None:
        found.append(
            KeyedOutput(
                key,
                index,
                record,
                interrupt=result.interrupt,
                checkpoint_id=result.checkpoint_id,
            )
        )
    return found


def _output(
    key: Hashable, index: int, record: Any, message: Message | None, custom: Any
) -> KeyedOutput:
    if message is not None:
        return KeyedOutput(key, index, record, output=message.content, message=message)
    return KeyedOutput(key, index, record, output=custom)
