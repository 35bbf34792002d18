"""One keyed record's run, shared by the execution environments: the output records, the errors,
key selection, the record as a run's input, and the per-key session that a record commits when
it ends or pauses and drops when it fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import math
import types
from collections.abc import (
    AsyncIterable,
    Callable,
    Coroutine,
    Hashable,
    Iterable,
    Mapping,
    MutableMapping,
)
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from .._checks import check_count
from .._doing import Doing, doing, timed
from .._error_pickle import reduce_error
from .._hooks import _root_span_attributes, _run_timeout
from .._json_where import BELOW, DEEP, ITSELF, unwritable_at
from .._record_keys import ambiguous, record_key
from ..actions.agent import RECORD_KEY, ActionAgent
from ..agent import Agent
from ..checkpoint.codec import (
    _MAX_INT_DIGITS,
    MAX_DEPTH,
    _joined,
    _json_dump,
    _models_nan_kept,
)
from ..context import Session, _new_run_id
from ..events import ErrorInfo
from ..interrupts import InterruptInfo
from ..messages import Message, Role, Usage
from ..runner import _MODULES, _OTEL, RunError, Runner, RunResult, _max_turns
from ..tools.base import ToolProgress
from ._session_store import (
    SessionNotSaved,
    Sessions,
    SessionStore,
    check_sessions,
    put_session,
)

__all__ = [
    "KeySelector",
    "KeyedOutput",
    "OnError",
    "RecordError",
    "SessionStore",
    "Sessions",
    "check_records",
    "check_sessions",
    "checked_max_turns",
    "key_failure",
    "key_of",
    "resume_record",
    "run_record",
    "timed_out",
]

logger = logging.getLogger("adk.execution")

KeySelector = Callable[[Any], Hashable] | str | None
OnError = Literal["raise", "emit"]


@dataclass(slots=True)
class KeyedOutput:
    """One output of one record: ``output`` is custom data or a message's text (the message
    itself is ``message``). A failed record (with ``on_error="emit"``) has ``error``; a paused one
    has ``interrupt`` and ``checkpoint_id``. ``run_id`` is the id of the record's run, which
    tracing reports as ``gen_ai.conversation.id``: how to find a record's trace, a failed one's
    above all (``None`` for a record that never ran, as when its key could not be computed).
    ``resumed``: an output of a paused record's resume, not of a record's first run; for one of
    ``apply``'s ``resumes``, ``index`` is the resume's position among them and ``record`` the
    resume as given, so a consumer tells it from the output of the record at that position.
    ``usage``: what the model calls of the record's run reported, summed as ``RunResult.usage``
    is (a resume's including the calls before its pause), on the run's last output only (an
    ``ActionAgent``'s earlier outputs have ``None``, so a sum over a run's outputs counts it once);
    a failed record's as ``RunError.usage``; ``None`` when no call reported any, or the record
    was cut off by its timeout or never ran. A run with no output at all reports it nowhere."""

    key: Hashable
    index: int
    record: Any = field(repr=False)
    output: Any = None
    message: Message | None = field(default=None, repr=False)
    error: ErrorInfo | None = None
    interrupt: InterruptInfo | None = field(default=None, repr=False)
    checkpoint_id: str | None = None
    run_id: str | None = field(default=None, repr=False)
    resumed: bool = field(default=False, repr=False)
    usage: Usage | None = field(default=None, repr=False)
    _seq: int = field(default=0, repr=False, compare=False)
    _exception: BaseException | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """This output as the JSON data a Flink job emits for it (``FlinkExecutionEnvironment``'s
        outputs are this dict's JSON text): ``key``, ``output`` (custom data as JSON, a model by
        alias, a message's text), ``error`` (``{"type", "message"}``, and ``"cause"`` or
        ``"reason"`` when it has one, or None), ``interrupt`` (the ``InterruptInfo``'s JSON or None), ``checkpoint_id``, ``run_id``, ``resumed``, ``usage``
        (``Usage``'s fields, or None; a consumer reading a dict of an older pyadk without it
        reads it as None); so a
        consumer reads a local run's outputs and a Flink job's alike (and a paused one, with
        ``"resume"`` added, is a resume either takes). ``index``, ``record`` and ``message`` are
        local only. A value JSON cannot hold or pydantic cannot write (NaN, an infinity, bytes
        that are not UTF-8, an object of one's own, a list that holds itself) is a
        ``ValueError`` naming the record, its key and where the value is, as on Flink (where it
        fails the record); the output itself is left as it was. A failed output's key JSON
        cannot hold (NaN, an object of one's own) is given as its ``repr``, as on Flink, so that
        its error is not lost."""
        failed = self.error is not None
        text = _as_json(self, failed, what=f"record {self.index} (key {self.key!r})")
        found: dict[str, Any] = json.loads(text)
        return found


class RecordError(Exception):
    """A record failed (with ``on_error="raise"``); the records still running were cancelled.
    ``run_id`` is its run's, as on ``KeyedOutput``: the failure's trace. ``usage``: what the
    model calls of its run reported before it failed (``RunError.usage``), as its output would
    have it under ``on_error="emit"``: those calls were paid; ``None`` when none reported any,
    or the record never ran or was cut off by its timeout."""

    def __init__(
        self,
        index: int,
        key: Hashable,
        record: Any,
        error: ErrorInfo,
        run_id: str | None = None,
        *,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(f"record {index} (key {key!r}) failed: {error}")
        self.index = index
        self.key = key
        self.record = record
        self.error = error
        self.run_id = run_id
        self.usage = usage

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickled with its fields (``cls(*args)`` would lack them): see ``adk._error_pickle``.
        return reduce_error(self)


def check_options(
    max_concurrency: int, on_error: str, timeout: float | None, *, optional_timeout: bool
) -> None:
    """The options every environment takes, checked where the environment is made."""
    check_count(max_concurrency, "max_concurrency")
    if on_error not in ("raise", "emit"):
        raise ValueError(f"on_error must be 'raise' or 'emit', not {on_error!r}")
    if timeout is None and optional_timeout:
        return
    if (
        not isinstance(timeout, int | float)
        or isinstance(timeout, bool)
        or not math.isfinite(timeout)
        or timeout <= 0
    ):
        wanted = "a positive number of seconds" + (" or None" if optional_timeout else "")
        raise ValueError(f"timeout must be {wanted}, got {timeout!r}")


def checked_max_turns(max_turns: object) -> int | None:
    """``apply``'s ``max_turns``, checked as ``Runner.run`` checks it (a positive int, or None),
    once at ``apply`` rather than failing every record."""
    return None if max_turns is None else _max_turns(max_turns)


def check_records(records: object) -> None:
    """Refuse, where ``from_list`` is called, what is not an iterable of records, or is one
    record that iterates as something else: a str or bytes as its characters, a dict as its
    field names, a pydantic model as its (field, value) pairs. Each ran as a record of its own,
    without a word, and never the record meant."""
    if isinstance(records, str | bytes | bytearray | Mapping | BaseModel) or not isinstance(
        records, Iterable | AsyncIterable
    ):
        hint = "wrap a single record in a list"
        if isinstance(records, Mapping):
            hint += "; for a mapping of records, pass its .values()"
        raise TypeError(
            f"from_list takes an iterable of records, got {type(records).__name__} ({hint})"
        )


def checked_key(key: KeySelector) -> KeySelector:
    if key is not None and not callable(key) and not isinstance(key, str):
        raise TypeError("key must be a function of the record, a field name, or None")
    return key


def key_of(selector: KeySelector, record: Any, index: int) -> Hashable:
    """The key of ``record``: ``selector(record)``, its field ``selector``, or its position."""
    if selector is None:
        return index
    value: Hashable
    if isinstance(selector, str):
        # A dict by its type first: the ABC's check is a Python frame, ~2.5k instructions a record.
        if type(record) is dict or isinstance(record, Mapping):
            value = record[selector]
        else:
            if isinstance(record, _TEXT) and not hasattr(record, selector):
                # A JSONL file read as it is (``from_list(open(path), key="device")``): each
                # line is text, and "the record has no field 'device'" did not say why.
                raise TypeError(
                    f"key={selector!r} reads a field of each record, and this record is text "
                    f"({type(record).__name__}), which has none: parse it for its key, "
                    f"key=lambda line: json.loads(line)[{selector!r}] (the agent gets the "
                    "line), or give parsed records"
                )
            value = getattr(record, selector)
            if isinstance(value, _METHODS):
                # A broker's message whose key is a method (confluent_kafka's ``Message.key()``):
                # the bound method is hashable but a new one per record, so every record would
                # silently be a key of its own, its memory never read again, piling up per record.
                raise TypeError(
                    f"key {selector!r} is a method of the record ({type(record).__name__}."
                    f"{selector}), not a value: pass key=lambda record: record.{selector}()"
                )
    else:
        value = selector(record)
    hash(value)  # an unhashable key fails here, for this record, with a TypeError
    if type(value) is not str:  # the usual key: no call
        problem = ambiguous(value)
        if problem is not None:
            raise _KeyRefused(problem, value)
    return value


class _KeyRefused(TypeError):
    """A key of a type whose equality Python and Flink disagree on (``_record_keys.ambiguous``):
    the record fails alone, as one whose key cannot be found; ``problem`` says why, ``key`` is
    the key refused."""

    def __init__(self, problem: str, key: Any) -> None:
        super().__init__(problem, key)
        self.problem = problem
        self.key = key

    def __str__(self) -> str:
        return f"its key {self.key!r} is refused: {self.problem}"

    def __reduce__(self) -> tuple[Any, ...]:
        return reduce_error(self)


_METHODS = (types.MethodType, types.BuiltinMethodType)
_TEXT = (str, bytes, bytearray)


def key_failure(selector: KeySelector, exc: Exception) -> ErrorInfo:
    """The error of a record whose key could not be found, said in the terms of the ``key=`` the
    user gave: a bare ``KeyError: 'user'`` read as the agent failing on the record, not as the
    record lacking the field its key is read from. The type stays the exception's (what
    ``on_error="emit"`` outputs and ``RecordError`` report); only the message says where it came
    from. Built only when a key fails."""
    if isinstance(exc, _KeyRefused):  # the key was found, and is refused: said as it is
        return ErrorInfo("TypeError", str(exc))
    error = ErrorInfo.of(exc)
    if isinstance(exc, TypeError) and error.message.startswith("unhashable type"):
        message = f"its key is not hashable ({error.message}): a key must be, as a dict's is"
    elif isinstance(selector, str):
        missing = (isinstance(exc, KeyError) and exc.args == (selector,)) or (
            isinstance(exc, AttributeError) and exc.name == selector
        )
        if not missing:  # key_of's own words (a method for a key), or a property that failed
            return error
        message = (
            f"the record has no field {selector!r}, which key={selector!r} reads its key "
            "from: give every record one, or pass a function (key=lambda record: ...) that "
            "finds a key for each"
        )
    else:
        message = f"the key function failed on it: {error.message}"
    return ErrorInfo(error.type, message)


async def run_record(
    runner: Runner,
    sessions: Sessions | None,
    index: int,
    key: Hashable,
    record: Any,
    seconds: float | None = None,
    run_id: str | None = None,
    max_turns: int | None = None,
) -> list[KeyedOutput]:
    """Run ``record`` with its key's session; commit the session unless the run failed.

    ``sessions`` is ``None`` for records without a key: each is its own, so its session starts
    empty and is not kept (nothing could read it again, and an unbounded stream would pile them
    up). A run longer than ``seconds`` (the environment's ``timeout``) is cancelled, so it commits
    nothing, and fails with a ``TimeoutError``: a hung call must not hold its key (and a place
    among the records running) for ever. ``run_id`` is the run's, made here unless the caller
    needs to know it before the run ends (Flink's backstop timer reports a record it gave up on).
    ``max_turns``: ``apply``'s, the run's limit of model calls (checked there); a run past it
    fails (``MaxTurnsExceeded``) like any failed record."""
    if run_id is None:
        run_id = _new_run_id()
    # A dict is told by its type first: ``isinstance(a_dict, MutableMapping)`` misses abc's cache
    # every time (dict is registered, and a registered class found is not cached), ~5k
    # instructions a record through three Python frames.
    if (
        sessions is not None
        and type(sessions) is not dict
        and not isinstance(sessions, MutableMapping)
    ):
        return await _stored(runner, sessions, index, key, record, run_id, None, seconds, max_turns)
    run = _run_record(runner, sessions, index, key, record, run_id, None, max_turns)
    if seconds is None:  # the common case, per record: no frame more than needed
        return await run
    return await _within(seconds, index, key, record, run_id, run)


async def resume_record(
    runner: Runner,
    sessions: Sessions | None,
    paused: KeyedOutput,
    data: Any,
    seconds: float | None = None,
    max_turns: int | None = None,
) -> list[KeyedOutput]:
    """Resume a paused record as a record of its key: on the session its key has now (the
    writes of the key's records since the pause included), committed like any record's. A key
    with no session kept (none, or forgotten) resumes on the session saved at the pause. The run
    goes on under its run id (the checkpoint's): its outputs carry the paused output's.
    ``max_turns`` as for ``Runner.resume``: without it, the limit saved at the pause holds."""
    assert paused.checkpoint_id is not None
    index, key, record, run_id = paused.index, paused.key, paused.record, paused.run_id
    resuming = (paused.checkpoint_id, data)
    if (
        sessions is not None
        and type(sessions) is not dict
        and not isinstance(sessions, MutableMapping)
    ):
        found = await _stored(
            runner, sessions, index, key, record, run_id, resuming, seconds, max_turns
        )
    else:
        run = _run_record(runner, sessions, index, key, record, run_id, resuming, max_turns)
        found = await _within(seconds, index, key, record, run_id, run)
    for output in found:
        output.resumed = True
    return found


async def _stored(
    runner: Runner,
    store: SessionStore,
    index: int,
    key: Hashable,
    record: Any,
    run_id: str | None,
    resuming: tuple[str, Any] | None,
    seconds: float | None,
    max_turns: int | None,
) -> list[KeyedOutput]:
    """``run_record``/``resume_record`` with the key's session in a ``SessionStore``: read before
    the run and kept after it, each within ``seconds`` of its own (the record's ``timeout``: a
    hung store must not hold the key for ever, and the run's time is the run's alone), the run
    itself committing into a mapping of that one key as it would into the sessions. A put once started
    is let end even if the caller is cancelled meanwhile, for a bounded time (``put_session``),
    so a record that ended has its writes kept whole, or an error names its key. A store that
    fails fails the record."""
    values = await _got(store, index, key, seconds)
    if values is not None and not (
        isinstance(values, dict) and all(type(name) is str for name in values)
    ):
        # Else the run failed deep in building the session ("dictionary update sequence ..."),
        # naming neither the store nor its get: a get that returns the stored text or bytes,
        # its parsing forgotten, is the likely mistake. Nothing is put: what is kept stays.
        raise TypeError(
            f"{type(store).__name__}.get({key!r}) gave {type(values).__name__}"
            f"{'' if not isinstance(values, dict) else ' with keys that are not all str'}; a "
            "SessionStore's get gives a dict of the key's values or None, as put was given"
        )
    one: dict[Hashable, dict[str, Any]] = {} if values is None else {key: values}
    run = _run_record(runner, one, index, key, record, run_id, resuming, max_turns)
    found = await _within(seconds, index, key, record, run_id, run)
    kept = one.get(key)
    if kept is not None and kept is not values:  # committed: it ended or paused
        try:
            await put_session(store, index, key, kept, seconds)
        except SessionNotSaved:  # cut off by a cancellation: the close reports it
            raise
        except Exception as exc:
            # The record ran (its trace is there) and its writes were lost: its failure names
            # its run, as any failed run's does (a record that never ran, its read failed,
            # names none), and the pause it saved, if it paused, which no output would name
            # any more (as a Flink record's failure names a pause it cannot send).
            error = ErrorInfo.of(exc)
            paused = next((out.checkpoint_id for out in found if out.checkpoint_id), None)
            failed = KeyedOutput(
                key,
                index,
                record,
                error=error,
                checkpoint_id=paused,
                run_id=run_id,
                usage=found[-1].usage if found else None,  # what it cost ran all the same
                _exception=exc,
            )
            return [failed]
    return found


async def _got(
    store: SessionStore, index: int, key: Hashable, seconds: float | None
) -> dict[str, Any] | None:
    if seconds is None:
        return await store.get(key)
    try:
        async with asyncio.timeout(seconds) as scope:
            return await store.get(key)
    except TimeoutError:
        if not scope.expired():  # a TimeoutError of the store's own
            raise
        raise TimeoutError(
            f"record {index} (key {key!r}) was not run: {type(store).__name__}.get did not end "
            f"within timeout={seconds}s"
        ) from None


async def _within(
    seconds: float | None,
    index: int,
    key: Hashable,
    record: Any,
    run_id: str | None,
    run: Coroutine[Any, Any, list[KeyedOutput]],
) -> list[KeyedOutput]:
    if seconds is None:
        return await run
    reason = f"ran longer than timeout={seconds}s"
    token = None
    # What runs when the deadline comes (an action, a tool, a model call), taken by a timer at
    # the deadline, before the cancellation unwinds it: the error says what was cut off.
    running = Doing()
    noting = doing.set(running)
    timed.add(running)
    loop = asyncio.get_running_loop()
    taking = None
    try:
        async with asyncio.timeout(seconds) as scope:
            deadline = scope.when()
            assert deadline is not None
            taking = loop.call_at(deadline, running.take)
            if run_id is not None:  # the root span of a run cut off fails with what its output says
                said = f"record {index} (key {key!r}) {reason}"
                token = _run_timeout.set(
                    (run_id, lambda: said + running.said() if scope.expired() else None)
                )
            found = await run
        if loop.time() > deadline:
            _overran(index, key, seconds)
        return found
    except TimeoutError:
        if not scope.expired():  # a TimeoutError of the run's own, raised through
            raise
        return [timed_out(index, key, record, reason + running.said(), run_id)]
    finally:
        if taking is not None:
            taking.cancel()
        timed.discard(running)
        doing.reset(noting)
        if token is not None:
            _run_timeout.reset(token)


def _error_json(error: ErrorInfo) -> dict[str, str]:
    """A failed output's error as its JSON gives it: ``cause`` and ``reason`` only when there is
    one, so a consumer of an older pyadk's outputs reads what it read."""
    found = {"type": error.type, "message": error.message}
    if error.cause is not None:
        found["cause"] = error.cause
    if error.reason is not None:  # a CheckpointError's (a resume refused), as ``cause``
        found["reason"] = error.reason
    return found


def _overran(index: int, key: Hashable, seconds: float) -> None:
    """A record that ended past its deadline without the timeout firing: its code held the event
    loop (a sync action's blocking call), so the timer could not run. It cannot be cut off then,
    and what it did stands, but it is not silent: it held every other record too."""
    logger.warning(
        "record %d (key %r) ran past its timeout=%ss and was not cut off: the event loop was "
        "blocked (a sync action's blocking call, or code that does not await), which held every "
        "other record too, or too busy to run the timer in time; its outputs stand. Make a "
        "blocking call async, e.g. `await asyncio.to_thread(call, ...)` in an `async def` action",
        index,
        key,
        seconds,
    )


def timed_out(
    index: int, key: Hashable, record: Any, reason: str, run_id: str | None = None
) -> KeyedOutput:
    """The failed output of a record cut off by a timeout."""
    error = ErrorInfo.of(TimeoutError(f"record {index} (key {key!r}) {reason}"))
    return KeyedOutput(key, index, record, error=error, run_id=run_id)


async def _run_record(
    runner: Runner,
    sessions: MutableMapping[Hashable, dict[str, Any]] | None,
    index: int,
    key: Hashable,
    record: Any,
    run_id: str | None,
    resuming: tuple[str, Any] | None,
    max_turns: int | None,
) -> list[KeyedOutput]:
    values = sessions.get(key) if sessions is not None else None
    session = Session(_copied(values) if values else None)
    # A traced run's root span names the record (a runner without hooks has no spans: nothing set).
    token = None
    # A global provider set since the runner was built: its hooks. Looked for as the run does
    # (``Runner.invoke``), only while OpenTelemetry is imported: no call per record otherwise.
    if runner._late_global and _OTEL in _MODULES:
        runner._set_since()
    if runner._hooks is not None and run_id is not None:
        token = _root_span_attributes.set((runner._hooks, _record_attributes(key, index)))
    # A keyed record's pause saves its key, and its resume is refused for another (_record_keys):
    # its own run's and checkpoint's only, not those of a Runner of its own run inside it.
    keyed = None
    if sessions is not None:
        resumed = resuming[0] if resuming is not None else None
        keyed = record_key.set((key, runner, resumed, index))
    try:
        if resuming is None:
            result = await runner.invoke(
                _as_input(record), session=session, run_id=run_id, max_turns=max_turns
            )
        elif values is None:  # no session kept for the key: the one saved at the pause
            result = await runner.invoke_resume(*resuming, session=session, max_turns=max_turns)
        else:
            result = await runner._invoke_resume_on(*resuming, session, max_turns)
    except RunError as exc:
        failed = KeyedOutput(
            key, index, record, error=exc.error, run_id=run_id, usage=exc.usage, _exception=exc
        )
        return [failed]
    finally:
        if token is not None:
            _root_span_attributes.reset(token)
        if keyed is not None:
            record_key.reset(keyed)
    # Kept: the record ran to its end or paused. An empty session is not kept for a key that had
    # none, so a stateless agent over an unbounded stream of keys keeps nothing per key.
    if sessions is not None and (session.values or key in sessions):
        sessions[key] = session.values
    found = _outputs_of(runner.agent, result, key, index, record)
    for output in found:
        output.run_id = run_id
    if found:  # on the last output alone: a sum over the run's outputs counts it once
        found[-1].usage = result.usage
    return found


_RECORD_KEY = "adk.record.key"
_RECORD_INDEX = "adk.record.index"
_INT64 = 2**63


def _record_attributes(key: Hashable, index: int) -> dict[str, Any]:
    """The span attributes naming a record: ``adk.record.index``, and ``adk.record.key`` as a
    trace backend can search it — a ``str``, ``bool``, ``float`` or 64-bit ``int`` key as it is
    (OpenTelemetry's attribute types; OTLP has no wider integer), any other as its ``str`` (a
    tuple ``("acme", 42)`` as ``"('acme', 42)"``), or none when that fails; a lone surrogate in
    the text (half an emoji cut in two), which has no UTF-8 form, as its escape ``\\ud83d``."""
    attributes: dict[str, Any] = {_RECORD_INDEX: index}
    kind = type(key)
    if kind is str or kind is bool or kind is float:
        value: Any = key
    elif isinstance(key, int) and kind is int and -_INT64 <= key < _INT64:
        value = key
    else:
        try:
            value = str(key)
        except Exception:  # a key type whose ``__str__`` fails: the span goes without
            return attributes
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:  # a lone surrogate: no exporter could write it, nor the batch
            value = value.encode("utf-8", "backslashreplace").decode()
    attributes[_RECORD_KEY] = value
    return attributes


def _copied(values: dict[str, Any]) -> dict[str, Any]:
    """A copy of a key's session values deep enough that a failed record's writes stay in it:
    dicts and lists are copied all the way down, and pydantic models deeply (memory is JSON data
    or registered models: a model changed in place, ``profile.visits += 1``, is a write like any
    other), other objects are shared."""

    def copy(value: Any) -> Any:
        kind = type(value)
        if kind is dict:
            return {k: copy(v) for k, v in value.items()}
        if kind is list:
            return [copy(v) for v in value]
        if kind in _SCALARS:
            return value
        if isinstance(value, BaseModel):
            return value.model_copy(deep=True)
        return value

    copied: dict[str, Any] = copy(values)
    return copied


_SCALARS = frozenset({str, int, float, bool, type(None)})


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
        # (a model's NaN written NaN, as a dict's: the model must not read null for it)
        text = to_json(_models_nan_kept(record), fallback=str).decode()
    except (TypeError, ValueError):
        text = str(record)
    return [Message(role=Role.USER, content=text, metadata={RECORD_KEY: record})]


def _outputs_of(
    agent: Agent, result: RunResult, key: Hashable, index: int, record: Any
) -> list[KeyedOutput]:
    """An ``ActionAgent``'s every output (each ``OutputEvent``); any other agent's final one.

    A paused run of another agent has no final output yet: ``result.output`` is then only its
    last output so far (a model's tool-call turn, an earlier step's answer), and the real one
    comes from the resume. An ``ActionAgent``'s outputs before a pause are final: its finished
    actions do not run again on resume."""
    found: list[KeyedOutput] = []
    if isinstance(agent, ActionAgent):
        root = (agent.name,)
        for event in result.events:
            out = event.output
            # A tool's progress report is shown, no output (a run's events hold them).
            if out is None or event.run_path != root or type(out.custom) is ToolProgress:
                continue
            found.append(_output(key, index, record, out.message, out.custom))
    elif result.output is not None and result.interrupt is None:
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


def _as_json(output: KeyedOutput, failed: bool = False, what: str | None = None) -> str:
    """An output as JSON text, what travels to the next operator. A ``failed`` record's key is
    given as its ``repr`` if JSON cannot hold it (a NaN key), so that its error can leave.

    What pydantic cannot write (an object of one's own, bytes that are not UTF-8, a list that
    holds itself) is a ``ValueError`` naming where it is (``_unwritable``), never its ``str()``
    (``"<Reading object at 0x...>"``, its data lost without a word) nor a ``RecursionError``
    (a Flink operator takes only a ``ValueError`` as a record's failure: the job failed).
    ``what``: who the error names, ``"the output"`` unless given (``to_dict`` names the record
    and its key)."""
    if failed:
        try:
            return _as_json(output)
        except ValueError:
            output = dataclasses.replace(output, key=repr(output.key))
    writing = "the output" if what is None else what
    try:  # a model's dump may meet what it cannot write, or recurse in what holds itself
        kept = _models_nan_kept(output.output, fallback=False)
        # NaN kept (pydantic's JSON mode made one in an info ``null``), for _json_text to refuse
        interrupt = _json_dump(output.interrupt) if output.interrupt is not None else None
    except (ValueError, TypeError, RecursionError) as exc:  # a model's bytes, a cycle, say
        held = {"key": output.key, "output": output.output, "interrupt": output.interrupt}
        raise _unwritable(held, writing, None, exc) from None
    data = {
        "key": output.key,
        "output": kept,
        "error": _error_json(output.error) if output.error is not None else None,
        "interrupt": interrupt,
        "checkpoint_id": output.checkpoint_id,
        "run_id": output.run_id,
        "resumed": output.resumed,
        "usage": output.usage.model_dump() if output.usage is not None else None,
    }
    holding = "the output" if what is None else f"{what} cannot be written as JSON: the output"
    return _json_text(data, holding, _encoded(data, None, writing))


_HOLDS_ITSELF = (
    "it holds itself (a dict or list inside itself), or nests deeper than Python can write"
)
"""Why a value whose writing recursed until Python's ``RecursionError`` cannot be JSON."""


class _Unreadable:
    """What stands for a value JSON cannot hold (NaN, infinity, an over-long int) while a text is
    read back to find where that value is."""

    def __init__(self, what: str) -> None:
        self.what = what


def _encoded(
    value: Any, fallback: Callable[[Any], Any] | None = None, what: str = "the value"
) -> bytes:
    """``to_json(value, fallback=fallback)``, or, when ``value`` holds a lone surrogate (a model's
    ``"\\ud800"`` escape), which has no UTF-8 form (pydantic refused it, 'surrogates not
    allowed', and the record failed), the same JSON written ASCII-escaped: it reads back as the
    same text. Rare, so the common output pays nothing. What pydantic cannot write at all
    (bytes that are not UTF-8; without a ``fallback``, an object of its own) is a ``ValueError``
    naming ``what`` and where in it the value is (``_unwritable``)."""
    try:
        return to_json(value, fallback=fallback)
    except PydanticSerializationError as exc:
        if "surrogates not allowed" not in str(exc):
            raise _unwritable(value, what, fallback, exc) from None
    try:
        data = to_jsonable_python(value, fallback=fallback)
    except (ValueError, TypeError) as exc:  # pydantic's, a cycle's, a frozenset key's TypeError
        raise _unwritable(value, what, fallback, exc) from None
    return json.dumps(data, ensure_ascii=True, separators=(",", ":")).encode()


def _unwritable(
    value: Any, what: str, fallback: Callable[[Any], Any] | None, error: Exception
) -> ValueError:
    """The error for ``value`` (``what``) that pydantic could not write as JSON (``error``): it
    said only what failed ("invalid utf-8 sequence of 1 bytes from index 0", "Unable to serialize
    unknown type"), not which record or output, nor where in it (a record among thousands, a
    binary payload in one field). Looked for only on this failure (``unwritable_at``)."""
    found = unwritable_at(value, error, MAX_DEPTH, fallback)
    if found is None:
        if isinstance(error, RecursionError):  # deeper than Python recurses, the walk not
            error = ValueError(_HOLDS_ITSELF)
        return ValueError(f"{what} cannot be written as JSON: {error}")
    place = ""
    for key in found.path:
        place = f"{place}[{key}]" if isinstance(key, int) else _joined(place, key)
    bad, how = found.value, found.how
    if isinstance(bad, (bytes, bytearray)) and not how:
        problem = f"{type(bad).__name__} that are not UTF-8 text"
        hint = "decode them, or base64-encode them, first"
    elif how == ITSELF:  # as _HOLDS_ITSELF says it, where it is found
        return ValueError(
            f"{what} cannot be written as JSON: it holds itself (the {type(bad).__qualname__} "
            f"at {place or 'its top'} is inside itself; JSON holds no references: give a copy, "
            "or what it stands for)"
        )
    elif how == DEEP:
        problem = f"{type(bad).__qualname__} nested deeper than {MAX_DEPTH} levels"
        if len(place) > 60:  # cut only when there is more: a model refused whole is at its place
            place = f"{place[:60]}..."
        hint = "flatten it"
    elif how == BELOW:  # the walk went no deeper: pydantic's words say what is there
        return ValueError(
            f"{what} cannot be written as JSON: the {type(bad).__qualname__} {MAX_DEPTH} "
            f"levels down at {place[:60]}... holds what pydantic cannot write ({found.words}; "
            "make it JSON data or a pydantic model)"
        )
    else:
        problem = f"{type(bad).__qualname__}{how}"
        hint = f"{found.words}; make it JSON data or a pydantic model"
    return ValueError(
        f"{what} cannot be written as JSON: {problem} at {place or 'its top'} ({hint})"
    )


def _json_text(value: Any, what: str, text: bytes | None = None) -> str:
    """``value`` (``what``, for the error) as JSON text: ``text``, its encoding by pydantic, or
    made here (without a fallback: a value pydantic cannot encode is its ``ValueError``).

    pydantic writes NaN and infinity as ``NaN`` and ``Infinity``, which are not JSON: other
    operators' readers refuse them, and ``to_list`` would read them back as floats no checkpoint
    takes. They are a ``ValueError`` saying where they are, as in checkpoints, and so is an int
    too long for Python to read back. Looked for only when the text could hold one (a scan of its
    bytes), so an ordinary output costs no second pass."""
    if text is None:
        text = _encoded(value, what=what)
    if b"NaN" in text or b"Infinity" in text or len(text) > _MAX_INT_DIGITS:
        problem = _unreadable_in(text)
        if problem is not None:
            raise ValueError(f"{what} holds {problem}")
    return text.decode()


def _unreadable_in(text: bytes) -> str | None:
    """Where in ``text`` the first value JSON cannot hold is, and what it is; ``None`` if the
    bytes that looked like one were inside strings."""

    def integer(digits: str) -> Any:
        size = len(digits.lstrip("-"))
        if size > _MAX_INT_DIGITS:
            return _Unreadable(f"an int of {size} digits (longer than {_MAX_INT_DIGITS})")
        return int(digits)

    return _where(json.loads(text, parse_constant=_Unreadable, parse_int=integer), "")


def _where(value: Any, path: str) -> str | None:
    if isinstance(value, _Unreadable):
        return (
            f"{value.what} at {path or 'its top'}, which is not a JSON number "
            "(make it None or a string)"
        )
    items: Iterable[tuple[str, Any]] = ()
    if isinstance(value, dict):
        items = ((_joined(path, key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{path}[{n}]", item) for n, item in enumerate(value))
    for inner, item in items:
        found = _where(item, inner)
        if found is not None:
            return found
    return None
