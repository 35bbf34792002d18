"""``Runner``: drives runs, saves a checkpoint when one pauses, and resumes it.

A runner holds configuration only (agent, store, hooks, resources); each run gets its own
``_RunState``, so one runner serves any number of concurrent runs, in scripts and in servers alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import reprlib
import sys
import threading
import weakref
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from pydantic import BaseModel

# The package and its checkpoint subpackage, for the modules only pausing, resuming, listing or
# hooks need: ``adk._preflight``, ``adk._approval``, ``adk._instrument``, ``checkpoint._claim``
# and the like load on first access (the packages' ``__getattr__``), so ``import adk`` and a run
# that never pauses skip them.
import adk

from . import _hooks, _record_keys, _tool_turns, checkpoint
from ._agent_names import _agent_names, tree_parts, unknown_designated
from ._aio import (
    AsyncCloseable,
    being_cancelled,
    closing,
    finish,
    held,
    hold,
    release,
    run_ended,
    run_resumed,
    run_started,
)
from ._checks import check_agent, check_callbacks, check_resources, shown
from ._driver import (
    NO_EVENT,
    _AgentRun,
    agent_hooks,
    agent_run,
    close_events,
    is_cancellation,
    settle,
    unyielded_pause,
)
from ._hooks import (
    LATE_METER,
    LATE_TRACER,
    Hooks,
    _record_memory,
    global_meter_set,
    global_tracer_set,
    late_providers,
    may_hook,
)
from ._naming import naming as _naming
from ._parts import attributes, members
from ._ported_names import RUNNER_HINTS as _RUNNER_HINTS
from ._ported_names import install_absent as _install_absent
from ._run_error import MaxTurnsExceeded, RunError
from .agent import Agent, AgentInput
from .checkpoint.codec import (
    CheckpointError,
    CheckpointNotFoundError,
    _read_summary,
    _Reason,
    decode_checkpoint,
    encode_checkpoint,
    to_json_value,
)
from .checkpoint.memory import InMemoryCheckpointStore
from .checkpoint.store import (
    CheckpointStore,
    CheckpointStoreError,
    _check_id,
    _deletes_if,
    _from_store,
    _PutNewStore,
    _puts_new,
    _replaces,
)
from .context import (
    _NO_OPTIONS,
    RunContext,
    Session,
    _root,
    _RunState,
    _session,
    _Turns,
    new_run,
    run_options,
)
from .events import _TRANSFER_HANDLED, AgentEvent, ErrorInfo
from .history import _messages_for
from .interrupts import (
    _CALLBACK_SLOT,
    InterruptInfo,
    _call_ids_named,
    _InterruptSignal,
    _ResumePlan,
    agent_segment,
)
from .messages import _TOOL, _USER, Message, Usage, _built
from .streams import MessageStream
from .tools.base import ToolProgress

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from .checkpoint._claim import _Claim
    from .checkpoint._pending import _Listing

__all__ = ["MaxTurnsExceeded", "RunError", "RunResult", "Runner", "run_messages", "run_usage"]

logger = logging.getLogger("adk.runner")
_new = object.__new__

RunInput = str | Message | Sequence[Message]


@dataclass(slots=True)
class RunResult:
    """Everything a finished (or paused) run produced."""

    events: list[AgentEvent]
    output: Any
    interrupt: InterruptInfo | None
    session: Session
    checkpoint_id: str | None = None
    _last_message: Message | None = field(default=None, repr=False)
    # The run's state, for ``usage`` and ``messages``: what they read, not a field of the result
    # (results compare by their fields, as before).
    _run: _RunState | None = field(default=None, repr=False, compare=False)

    @property
    def text(self) -> str:
        """The content of the last message the run produced ("" if none)."""
        last = self._last_message
        return last.content if last is not None else ""

    @property
    def usage(self) -> Usage | None:
        """The token counts of every model call of the run, summed: its agents' calls, those of
        ``AgentTool`` nested runs (which appear in no event) included. A resumed run's total
        includes the calls made before its pause. ``None`` when no call reported usage."""
        run = self._run
        return None if run is None else run.usage

    @property
    def messages(self) -> list[Message]:
        """The run's conversation, in the order a next run should get it: the input, then every
        message recorded (replies with their tool calls, tool results, streamed replies joined).
        ``runner.invoke(result.messages + [Message.user("next")])`` carries it on. A resumed
        run's starts from the paused run's input; a paused run's ends with the calls waiting for
        their answers (no results yet), so carry on from the resumed run's. The messages are as they were when the root
        agent is a single agent (no ``sub_agents``) and said them all; otherwise each recorded
        message is the ``For context: [author] ...`` user message other agents read during a
        run, since a next run gives its input to every agent as it is (a worker must not take
        the supervisor's words for its own, nor the supervisor a worker's)."""
        run = self._run
        return [] if run is None else _conversation(run, ended=True)


def run_usage(events: AsyncIterator[AgentEvent]) -> Usage | None:
    """``RunResult.usage`` of the run whose events ``Runner.run`` or ``Runner.resume`` returned:
    what its model calls reported so far, read while or after iterating them. A reply counts by
    the time its event is read (the last event's total is the run's); a streamed reply once its
    stream has ended and the next event is asked for, or the run is closed (the run's once
    the iteration ends, or a reader that stopped at the answer closes the run).
    ``None`` when no call reported usage yet (a resume that has not read its checkpoint yet,
    or never did: it made no call)."""
    run = _run_of(events, "run_usage")
    return None if run is None else run.usage


def run_messages(events: AsyncIterator[AgentEvent]) -> list[Message]:
    """``RunResult.messages`` of the run whose events ``Runner.run`` or ``Runner.resume``
    returned, as recorded so far: after the last event, the conversation a next run carries on
    (a streamed reply is recorded once it is complete). Once the run is over (its events read
    to the end, closed, or failed: a cancellation, a timeout) without pausing, each tool call
    left without a result gets one saying it did not complete, as ``RunResult.messages``. A
    reader cancelled between events (not while it awaits one) leaves the run waiting at the
    event it gave, still going to this: read the messages once the events are closed
    (``contextlib.aclosing``, ``await events.aclose()``).

    A resume's messages start from the paused run's input, which it reads from its checkpoint
    at its first event: before then, or when it never did (it raised there: the checkpoint not
    found, busy or refused, its store down; it was closed or cancelled first), this is a
    ``RuntimeError`` saying so. A ``[]`` there, kept as the conversation by a service's
    ``finally``, emptied it; nothing of such a resume ran, and the conversation is still the
    one before the paused turn."""
    # An async generator whose frame is gone has ended; a reader's own iterator is taken as
    # one still running (its calls may be running).
    ended = getattr(events, "ag_frame", True) is None
    run = _run_of(events, "run_messages")
    if run is None:
        raise RuntimeError(_unread_resume(events, ended))
    return _conversation(run, ended=ended)


def _unread_resume(events: AsyncIterator[AgentEvent], ended: bool) -> str:
    """``run_messages``' refusal of a resume that has not read its checkpoint (see there)."""
    box = _RUNS.get(events)
    named = f" of checkpoint {box.checkpoint_id!r}" if isinstance(box, _ResumeBox) else ""
    if ended:
        return (
            f"run_messages(): the resume{named} ended before its run began (it raised at its "
            "first event: the checkpoint not found, busy, unreadable or refused, its store "
            "down; or it was closed or cancelled first), so it has no messages: nothing of it "
            "ran, and the conversation is still the one before the paused turn"
        )
    return (
        f"run_messages(): the resume{named} has not begun its run yet (its first event not "
        "asked for, or still coming): its messages start from the paused run's input, which "
        "it reads from its checkpoint there; read them once its events are read or closed"
    )


class _ResumeBox(list[RunContext]):
    """Where ``Runner.resume``'s run puts its root context once it has read its checkpoint
    (``_RUNS``' entry for its events), naming the checkpoint for ``run_messages`` before."""

    __slots__ = ("checkpoint_id",)

    def __init__(self, checkpoint_id: str) -> None:
        super().__init__()
        self.checkpoint_id = checkpoint_id


# The root contexts of the runs behind the event iterators ``run`` and ``resume`` handed out (a
# resume's in a list, filled once it has read its checkpoint), for ``run_usage`` and
# ``run_messages``: weak keys, so an entry goes with its iterator. One entry per run, nothing per
# event; the context is the run's own, not an object made for this (a run in flight holds one
# GC-tracked object more, the entry's weak reference: ``tests/test_inflight_footprint.py``).
_RUNS: weakref.WeakKeyDictionary[AsyncIterator[AgentEvent], RunContext | list[RunContext]] = (
    weakref.WeakKeyDictionary()
)


def _run_of(events: AsyncIterator[AgentEvent], helper: str) -> _RunState | None:
    """The run behind ``events``; None for a resume that has not read its checkpoint."""
    try:
        root = _RUNS[events]
    except (KeyError, TypeError):
        raise TypeError(
            f"{helper}() takes the events Runner.run or Runner.resume returned, got {shown(events)}"
        ) from None
    if isinstance(root, list):
        if not root:  # a resume that has not read its checkpoint (yet): nothing ran
            return None
        root = root[0]
    return root._run


def _conversation(run: _RunState, *, ended: bool) -> list[Message]:
    """The run's root input and its root lane's messages as ``run.reader`` reads them
    (``history``'s rule: its own as they are, others' as ``For context:`` messages). Of a run
    that has ``ended`` without a pause, the tool calls left without results are answered
    (``_answer_open_calls``)."""
    entries = run.entries
    messages = _messages_for(entries, len(entries), run.root, run.reader, None)
    if ended and not run.paused:
        return _answer_open_calls(messages)
    return messages


_DID_NOT_COMPLETE = "Error: the call did not complete: the run ended before the tool returned"


def _answer_open_calls(messages: list[Message]) -> list[Message]:
    """``messages`` with a result for each tool call that has none, after the results its
    reply's calls did get: a run cut off mid-round (its reader closed it, a timeout cancelled
    it, it failed) left calls no tool message answers, and model APIs refuse such a
    conversation as the next input (OpenAI: "An assistant message with 'tool_calls' must be
    followed by tool messages responding to each 'tool_call_id'"). The result is an error the
    model reads, as the OpenAI Agents SDK and Pydantic AI close a cancelled run's calls, rather
    than the calls dropped, which would hide from the model what it asked for and what may
    have run. ``metadata["did_not_complete"]`` marks it for a program. A paused run's calls are
    left open: its resume answers them."""
    if not any(m.tool_calls for m in messages):  # most runs: nothing to look at
        return messages
    out: list[Message] = []
    index = 0
    while index < len(messages):
        message = messages[index]
        out.append(message)
        index += 1
        if not message.tool_calls or message.role != "assistant":
            continue
        answered: set[str | None] = set()
        while index < len(messages) and messages[index].role == "tool":
            answered.add(messages[index].tool_call_id)
            out.append(messages[index])
            index += 1
        out.extend(
            Message(
                role=_TOOL,
                content=_DID_NOT_COMPLETE,
                tool_call_id=call.id,
                name=call.name,
                metadata={"did_not_complete": True},
            )
            for call in message.tool_calls
            if call.id not in answered
        )
    return out


def _to_messages(value: RunInput) -> list[Message]:
    # A list is told by its type first: every keyed record of adk.execution runs with one
    # (``[Message.user(record)]``), and the ABCs' checks below cost it ~2.5k instructions each
    # (a frame of ``ABCMeta.__instancecheck__``), what a list is known to pass.
    if type(value) is not list:
        if isinstance(value, str):
            return [Message.user(value)]
        if isinstance(value, Message):
            return [value]
        if not isinstance(value, Iterable) or isinstance(value, Mapping):
            what = _input_item(value) if isinstance(value, Mapping) else _not_input(value)
            raise TypeError(f"run input must be a str, a Message or a list of Messages, got {what}")
    messages = list(value)
    calls = False
    # One plain loop, no generator expression (its function, generator and frames, ~4k
    # instructions a record): every item a Message, and whether any has a tool call or is a tool
    # result (_check_calls_answered refuses either out of its turn).
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(
                "run input must be a str, a Message or a list of Messages, got "
                f"{type(value).__name__} whose item {index} is {_input_item(message)}"
            )
        if message.tool_calls or message.role == _TOOL:  # a call, or a result, to check
            calls = True
    if not messages:  # the agent would call its model with no conversation at all
        raise ValueError("run input is an empty list: give at least one message")
    if calls:
        _check_calls_answered(messages)
    return messages


def _check_calls_answered(messages: list[Message]) -> None:
    """Refuse, at the message, an input a model API refuses for its tool messages
    (``_tool_turns.refusal``: a call no tool message right after it answers, a tool message that
    answers no call of the reply right before it), before anything runs: the run failed at its
    first model call, after a service had sent its 200. One pass at the run's start; none when
    no message has calls or is a tool message."""
    for message in messages:  # most inputs have no calls: nothing to look at
        if message.tool_calls or message.role == _TOOL:
            break
    else:  # a loop, not any() over a generator expression: ~4.3k instructions a run, per record
        return
    refused = _tool_turns.refusal(messages, "run input", _tool_turns.RUN_ADVICE)
    if refused is not None:
        raise ValueError(refused)


_ENTERING = threading.Lock()
"""Taken by a runner's ``async with`` enter and end (and ``aclose``'s letting go), which count
its blocks and hold its parts: event loops in several threads may share a runner, where two
enters at once both held its parts and the count and holds went apart. One lock for every
runner, held for a few reads, so a runner made per request costs no lock of its own."""


_BLOCK_END: ContextVar[tuple[Runner, list[Any] | None] | None] = ContextVar(
    "adk_runner_block_end", default=None
)
"""Set by a runner's ``async with`` end for its ``aclose`` (a subclass's own too): the runner and
what the block let go of under ``_ENTERING``, which ``aclose`` closes rather than what the runner
holds by then (another thread's block, entered since)."""


def _not_input(value: object) -> str:
    """What a run input that is no message is, for the refusal: an agent or an agent class (the
    OpenAI Agents SDK's ``Runner.run(agent, input)`` carried over to a runner's ``run``) is
    told where it goes."""
    if isinstance(value, type):
        return f"the class {value.__name__} (the agent goes to Runner(agent), made of the class)"
    name = getattr(value, "name", None)
    if isinstance(name, str) and callable(getattr(value, "run", None)):
        return (
            f"the agent {type(value).__name__} {name!r} (it goes to Runner(agent), and the "
            "user's input to its run or invoke)"
        )
    return type(value).__name__


def _not_a_runner(method: str, given: object) -> TypeError:
    """The refusal of ``Runner.run(agent, input)`` (or ``invoke``) called on the class with the
    agent where the runner goes, as the OpenAI Agents SDK calls its ``Runner.run``: it failed on
    the agent's missing attributes (``'Echo' object has no attribute '_new_run'``)."""
    if isinstance(given, type):
        what = f"the class {given.__name__} (make the agent first, an instance of it)"
    else:
        name = getattr(given, "name", None)
        what = f"{type(given).__name__} {name!r}" if isinstance(name, str) else shown(given)
        if callable(getattr(given, "run", None)):
            what = f"the agent {what}"
    return TypeError(
        f"Runner.{method} is called on a Runner: adk.Runner(agent).run(input) for its events, "
        "await adk.Runner(agent).invoke(input) for its result (the OpenAI Agents SDK's "
        f"Runner.run(agent, input)); got {what} where the runner goes"
    )


def _input_item(item: object) -> str:
    """What a run input item is, for the refusal: a dict is what an OpenAI-style caller passes
    (``{"role": "user", "content": ...}``, the OpenAI Agents SDK's input items), so the refusal
    says how to make a ``Message`` of one."""
    if isinstance(item, Mapping):
        return (
            "a dict (make it a Message: adk.Message.user(text), or adk.Message.model_validate(d) "
            "for a chat message dict with 'role' and 'content')"
        )
    # A LangChain-style ("assistant", "hello") tuple, or any other stray item.
    return f"{shown(item)} (make each message with adk.Message.user(text), or .system, .assistant)"


def _check_run_options(session: object, checkpoint_id: object) -> None:
    """Check ``run``/``invoke``'s options up front: a bad ``checkpoint_id``, or a session key
    that is not a str, would otherwise fail only at the pause, after all the run's work, and a bad
    ``session`` deep in ``dict()``. (Called only when either is given: none per plain run.)"""
    if checkpoint_id is not None:
        _check_id(checkpoint_id)  # the stores' own rule
    if session is None:
        return
    if not isinstance(session, Session | Mapping):
        raise TypeError(f"session must be a Session or a mapping, got {type(session).__name__}")
    for key in session.values if isinstance(session, Session) else session:
        if not isinstance(key, str):
            # Taken, such a key failed the run only at its first pause, after all its work: a
            # checkpoint saves the session as JSON, whose keys are text (DESIGN: session values
            # are read by str key, ``ctx.session[k]`` and ``{key}`` placeholders). A str subclass
            # (a StrEnum member naming the keys) is text to JSON and equal to its str: taken.
            raise TypeError(
                f"session keys must be str, got the key {shown(key)}: a session is saved in a "
                "checkpoint as JSON, whose keys are text"
            )


_STORE_METHODS = ("get", "put", "delete")  # CheckpointStore's


def _check_store(store: object, what: str = "Runner") -> None:
    """Refuse, when the runner is made, a ``checkpoint_store`` that is not a store: a path or URL
    (``"cp.db"``, LangGraph's connection string) or a store's class (its ``()`` forgotten) was
    taken, and the run failed only at its first pause, after all its work, unable to save it.
    A class whose methods need no instance (static or class methods: a store kept as a
    namespace) is a store as it is, duck-typed like any other."""
    if isinstance(store, type) and not all(
        isinstance(inspect.getattr_static(store, name, None), staticmethod | classmethod)
        for name in _STORE_METHODS
    ):
        raise TypeError(
            f"{what} checkpoint_store is the class {store.__name__}, not a store: pass an "
            f"instance, {store.__name__}(...)"
        )
    if not all(callable(getattr(store, name, None)) for name in _STORE_METHODS):
        raise TypeError(
            f"{what} checkpoint_store must be a checkpoint store (async get, put and delete), "
            f"got {shown(store)}; for a file, SQLiteCheckpointStore(path) (adk.checkpoint)"
        )


def _described(exc: BaseException) -> str:
    """``exc`` as ``Type: message`` (its type alone when it has no message)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _check_resume_id(checkpoint_id: object) -> None:
    """Refuse, at the call, a checkpoint id that is not a str, saying what was likely meant: the
    ``RunResult`` itself (its ``checkpoint_id`` is the id; it failed deep in the claim with
    "unhashable type: 'RunResult'"), or ``None``, the ``checkpoint_id`` of a run that did not
    pause. The stores' other rules on ids (``_check_id``: empty, a NUL, too long) are checked
    here too, before the claim or the read: raised by the store's operation, their
    ``ValueError`` would be wrapped as any store's own failure is (``_from_store``), and read as
    a store that is down where it is the caller's mistake."""
    if isinstance(checkpoint_id, str):
        _check_id(checkpoint_id)
        return
    if checkpoint_id is None:
        hint = (
            ": a RunResult's checkpoint_id is None when its run did not pause "
            "(check result.interrupt)"
        )
    elif isinstance(getattr(checkpoint_id, "checkpoint_id", None), str):
        hint = f": pass its checkpoint_id ({type(checkpoint_id).__name__}.checkpoint_id)"
    else:
        hint = ""
    raise TypeError(f"checkpoint id must be a str, got {type(checkpoint_id).__name__}{hint}")


def _max_turns(max_turns: object) -> int:
    """A ``max_turns`` given (not None), checked at the call: a positive int. A bool is refused:
    ``max_turns=True`` would be a limit of one model call."""
    if isinstance(max_turns, bool) or not isinstance(max_turns, int):
        raise TypeError(f"max_turns must be a positive int or None, got {shown(max_turns)}")
    if max_turns < 1:
        raise ValueError(f"max_turns must be a positive int or None, got {max_turns}")
    return max_turns


def _resume_options(
    session: Session | Mapping[str, Any] | None,
    options: Mapping[str, Any] | None,
    agent_options: Mapping[str, Mapping[str, Any]] | None,
) -> tuple[Session | None, tuple[Mapping[str, Any], Any] | None]:
    """``resume``/``invoke_resume``'s arguments, checked up front: the session to run in (a
    mapping copied into a new one) and the run options, if any were given."""
    if session is not None:
        _check_run_options(session, None)
        if not isinstance(session, Session):
            session = Session(session)
    given = None
    if options is not None or agent_options is not None:
        given = run_options(options, agent_options)
    return session, given


class Runner(AsyncCloseable):
    """Drives ``agent``: ``run``/``invoke`` start a run, ``resume``/``invoke_resume`` continue a
    paused one from its checkpoint."""

    def __init__(
        self,
        agent: Agent,
        checkpoint_store: CheckpointStore | None = None,
        enable_streaming: bool = False,
        callbacks: Iterable[Any] = (),
        resources: Any = None,
        *,
        keep_checkpoints: bool = False,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        """``callbacks``: ``adk.callbacks.Callbacks`` objects, run in the order given, for every
        agent of the run, before an agent's own (``ReActAgent(callbacks=...)``).
        ``tracer_provider``/``meter_provider``: where spans and metrics go (default: the global
        OpenTelemetry providers, as configured when the runner is built, or, for a global
        provider set later, from the first run after it is; none configured costs nothing)."""
        check_agent(agent, "Runner(agent)")
        if checkpoint_store is not None:
            _check_store(checkpoint_store)
        self.agent = agent
        self.checkpoint_store: CheckpointStore = (
            checkpoint_store if checkpoint_store is not None else InMemoryCheckpointStore()
        )
        self.enable_streaming = enable_streaming
        self.callbacks = check_callbacks(callbacks, "Runner")
        check_resources(resources, "Runner")
        if resources is None and _naming:  # none alive has named a resource: none to find
            _named_without_resources(agent)
        self.resources = resources
        self.keep_checkpoints = keep_checkpoints
        self._hooks: Hooks | None = None
        if may_hook(self.callbacks, tracer_provider, meter_provider):  # else nothing to load
            self._hooks = adk._instrument.build_hooks(
                self.callbacks, tracer_provider, meter_provider
            )
        self._on_event = self._hooks.on_event if self._hooks is not None else None
        # Built to use a global tracer or meter provider while none was set (a runner made at
        # import time, telemetry set up later in ``main()``): each run looks whether one has
        # been set since (``_set_since``) and, once one has, the runner's hooks are built anew
        # for it. A bit per provider still awaited (``adk._hooks.LATE_*``); 0: not looking.
        self._late_global = late_providers(tracer_provider, meter_provider)
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        # (agent, run path, address, reader of its messages) of the root, made on the first run
        # (see ``_root_context``).
        self._root_names: tuple[Agent, tuple[str, ...], str, str] | None = None

    # -- running ---------------------------------------------------------------------------------
    def run(
        self,
        input: RunInput,
        *,
        options: Mapping[str, Any] | None = None,
        agent_options: Mapping[str, Mapping[str, Any]] | None = None,
        checkpoint_id: str | None = None,
        session: Session | Mapping[str, Any] | None = None,
        run_id: str | None = None,
        max_turns: int | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Start a run; iterate the returned events. Closing the iterator cancels the run.

        ``input``: a str, a ``Message`` or a list of them; a list whose assistant message has a
        tool call that no tool message right after it answers (a paused run's messages carried
        on) is refused here (``ValueError``), as every model API refuses it.

        ``session``: a ``Session`` is the run's own, so it holds the run's writes afterwards (pass
        the same one to carry values across runs); a mapping is copied into a new one.

        ``options``: run options every agent of the run reads as ``ctx.options`` (``AgentTool``
        nested runs included); ``agent_options``: ``{agent name: options}``, merged over
        ``options`` for the agent of that name only (Eino's ``DesignateAgent``). Neither is saved
        in a checkpoint, only their names: a resume is given its own, those names at least.

        ``max_turns``: the most model calls the whole run may make, every agent's (``AgentTool``
        nested runs' too); the call past it fails the run with ``MaxTurnsExceeded``. Saved in a
        checkpoint with the calls made so far: a resume goes on counting.

        ``checkpoint_id``: the id a pause of this run is saved under (one per pause). The id of a
        checkpoint a paused run still waits on, or that a resume in this process runs, refuses
        the run before its agent runs: its only event is an error event whose ``exception`` is a
        ``CheckpointError`` with ``reason`` ``"id_taken"``."""
        messages = _to_messages(input)
        if checkpoint_id is not None or session is not None:
            _check_run_options(session, checkpoint_id)
        # Without a session the run makes its own when one is first read (``_RunState.session``).
        values = session if session is None or isinstance(session, Session) else Session(session)
        try:
            run = self._new_run(messages, values, run_id)
        except AttributeError:
            if not isinstance(self, Runner):  # Runner.run(agent, input): nothing paid per run
                raise _not_a_runner("run", self) from None
            raise
        if options is not None or agent_options is not None:  # checked here, before any work
            run.options, run.designated = run_options(options, agent_options)
            if agent_options is not None:
                self._check_designated(agent_options)
        if max_turns is not None:
            run.turns = _Turns(_max_turns(max_turns))
        ctx = _root_context(self, run)
        input_ = AgentInput(messages, self.enable_streaming)
        if checkpoint_id is None:
            events = self._drive_root(ctx, input_, None)
        else:  # looked at first (``_id_taken``): one generator more per event, for these runs
            events = self._run_named(ctx, input_, checkpoint_id)
        _RUNS[events] = ctx  # the root context: its run is what run_usage and run_messages read
        return events

    def resume(
        self,
        checkpoint_id: str,
        resume: Any = None,
        *,
        options: Mapping[str, Any] | None = None,
        agent_options: Mapping[str, Mapping[str, Any]] | None = None,
        session: Session | Mapping[str, Any] | None = None,
        max_turns: int | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """Continue a paused run. ``resume`` is ``{point_id: data}``, or plain data when exactly one
        point is pending; ``None`` resumes every pending point without data.

        ``session``: a ``Session`` for the resumed run, to read its values during and after the
        run. The checkpoint's saved values are written into it (they win over the same keys);
        other values already in it stay, e.g. who approved. A mapping is copied into a new one;
        without either, the run gets a new ``Session`` holding the saved values.

        ``options``/``agent_options``: as for ``run``. The paused run's options were not saved
        (they belong to the call, and may hold what cannot be saved, a client say): the resumed
        run has these. Their names were: a resume lacking one is refused (``ValueError``, by
        the first ``__anext__``, nothing run and the checkpoint kept).

        ``max_turns``: the run's limit of model calls from here on, counting those made before
        the pause; without it, the limit the paused run was started with (if any) holds."""
        given, options_given = _resume_options(session, options, agent_options)
        if agent_options is not None:
            self._check_designated(agent_options)
        limit = None if max_turns is None else _max_turns(max_turns)
        box = _ResumeBox(checkpoint_id)  # the run's root context, once the checkpoint is read
        events = self._resume(checkpoint_id, resume, box, given, options_given, max_turns=limit)
        _RUNS[events] = box
        return events

    async def invoke(
        self,
        input: RunInput,
        *,
        options: Mapping[str, Any] | None = None,
        agent_options: Mapping[str, Mapping[str, Any]] | None = None,
        checkpoint_id: str | None = None,
        session: Session | Mapping[str, Any] | None = None,
        run_id: str | None = None,
        max_turns: int | None = None,
    ) -> RunResult:
        """Run to the end (or to a pause) and collect the result; raises ``RunError`` on error
        (``MaxTurnsExceeded``, a ``RunError``, past ``max_turns``). ``session``, ``options``,
        ``agent_options`` and ``max_turns`` as for ``run``; the run's session is
        ``RunResult.session``."""
        if checkpoint_id is not None or session is not None:
            _check_run_options(session, checkpoint_id)
        # Without a session the run makes its own when one is first read (``_RunState.session``).
        values = session if session is None or isinstance(session, Session) else _session(session)
        # A fresh run: ``_new_run`` inlined, and a plain text input made straight into its message
        # (what ``_to_messages`` does with an exact ``str``: ``Message.user``'s own fast path).
        messages = [_built(_USER, input)] if type(input) is str else _to_messages(input)
        try:
            late_global = self._late_global
        except AttributeError:
            if not isinstance(self, Runner):  # Runner.invoke(agent, input): nothing paid per run
                raise _not_a_runner("invoke", self) from None
            raise
        if late_global and _OTEL in _MODULES:
            self._set_since()
        run = new_run(messages, values, run_id or None, None, self._hooks, self.resources)
        run.keeps_shown = True  # its collector reads what an AgentTool showed (``_own_output``)
        if options is not None or agent_options is not None:  # checked here, before any work
            run.options, run.designated = run_options(options, agent_options)
            if agent_options is not None:
                self._check_designated(agent_options)
        if max_turns is not None:
            run.turns = _Turns(_max_turns(max_turns))
        agent, ctx = self.agent, _root_context(self, run)
        fused = getattr(agent, "_adk_drive", None)
        # A plain root agent's run and the run's collector are one object (``_RootRun``); a
        # fused agent's driver makes its own ``_AgentRun``.
        own: _RootRun | None = None
        collected: _Collecting
        if fused is None:
            collected = own = _root_run(self, agent, ctx, checkpoint_id)
        else:
            collected = _collector(self, ctx, checkpoint_id)
        agent_input = _new(AgentInput)  # ``AgentInput(run.root, self.enable_streaming)``
        agent_input._messages = run.root
        agent_input._build = None
        agent_input._build_args = ()
        agent_input.enable_streaming = self.enable_streaming
        on_event = self._on_event
        baseline = run_started()  # cancellations its task had pending: not the run's
        try:
            if checkpoint_id is not None:  # the id a paused run waits on: refused before it runs
                refused = await self._named_refusal(ctx, checkpoint_id)
                if refused is not None:
                    collected.add(refused, checked=True)
                    return collected.result(run.session, run)
            if fused is not None:  # drives itself under the rules: what ``drive`` would call
                driven = fused(agent_input, ctx)
                del agent_input  # the agent's now: this frame does not keep it while the run waits
                try:
                    async for event in driven:
                        if on_event is not None and event._signal is None and event.error is None:
                            on_event(event)  # the others once checked (``_check``)
                        if not collected.add(event) and await collected.take(event):
                            break
                except Exception as exc:  # a hook at the root failed (see ``_root_failed``)
                    if is_cancellation(exc):
                        raise
                    _drop_first_frame(exc)
                    await collected.take(_root_failed(ctx, exc))
                finally:
                    event = NO_EVENT  # see _driver.NO_EVENT
                    await _close_root(driven, collected.ended)
                return collected.result(run.session, run)
            # Any other agent is driven here, inline, under the same rules as ``drive`` applies:
            # a generator fewer per run and per event than iterating ``drive``. A fresh run has no
            # resume plan, so what only a resume does is left out: ``skipped`` (it answers None
            # without a plan), ``events`` (it calls ``run`` unless resumed) and ``needs_finish``'s
            # test of ``resumed``.
            assert own is not None
            if own.hooks is not None:
                early = await own.start()
                if early is not None:
                    await collected.take(early)
                    early = NO_EVENT  # its error's traceback keeps this frame (_driver.NO_EVENT)
                    return collected.result(run.session, run)
            try:
                events = own.agent.run(agent_input, ctx)  # or the answer a callback gave
                if own.hooks is not None:
                    events = own.hooks.agent_events(own.handle, events)
                del agent_input  # (see above: one GC-tracked object fewer per run in flight)
                try:
                    async for event in events:
                        stop = own.observe(event)
                        if on_event is not None and event._signal is None and event.error is None:
                            on_event(event)  # the others once checked (``_check``)
                        if not collected.add(event) and await collected.take(event):
                            break
                        if own.stream is not None:
                            # A stream only shown is let go: ``take`` closed one on an exit.
                            await own.record_stream()
                        if stop:
                            # ``_drive``'s ``settle`` for a stream that is an answer, which
                            # ``take`` read (its failure left to the agent: a child's here,
                            # closed next); one only shown, ``take`` closed or leaves unread.
                            out = event.output
                            settled = None
                            if out is not None and out.stream is not None and not out.shown_only:
                                settled = await settle(event, own)  # observed by ``own``
                            if settled is not None:  # a child's stream failed: its error
                                await collected.take(settled)
                                settled = None
                            break
                    else:
                        if ctx._run.unyielded is not None:  # a pause made: its own? (``_drive``)
                            unyielded_pause(own)
                finally:
                    event = NO_EVENT  # see _driver.NO_EVENT
                    if getattr(events, "ag_frame", True) is not None:
                        await close_events(events)
            except (Exception, asyncio.CancelledError) as exc:
                if own.cancelled_by(exc):
                    raise
                _drop_first_frame(exc)
                if collected.ended:  # closing the agent after the run's last event failed
                    _log_after_end(exc)
                else:
                    await collected.take(own.failed(exc))
            finally:
                if own.stream is not None or own.hooks is not None:  # ``needs_finish``, not resumed
                    await _finish_root(own, collected)
            return collected.result(run.session, run)
        except asyncio.CancelledError:
            interrupt = collected.interrupt
            if checkpoint_id is None and interrupt is not None:
                # The run paused and its checkpoint is saved under an id made up for it, which
                # the caller, cancelled before this returns, can never learn: nothing could
                # resume it, and a persistent store would keep it for good.
                await self._forget(interrupt.checkpoint_id)
            raise
        finally:
            if baseline is not None:
                run_ended(baseline)

    async def invoke_resume(
        self,
        checkpoint_id: str,
        resume: Any = None,
        *,
        options: Mapping[str, Any] | None = None,
        agent_options: Mapping[str, Mapping[str, Any]] | None = None,
        session: Session | Mapping[str, Any] | None = None,
        max_turns: int | None = None,
    ) -> RunResult:
        """``resume`` collected like ``invoke``; the run's session is ``RunResult.session``.
        ``options``/``agent_options`` as for ``resume``: not the paused run's; ``max_turns`` as
        for ``resume``."""
        given, options_given = _resume_options(session, options, agent_options)
        if agent_options is not None:
            self._check_designated(agent_options)
        limit = None if max_turns is None else _max_turns(max_turns)
        box: list[RunContext] = []
        resumed = self._resume(
            checkpoint_id, resume, box, given, options_given, max_turns=limit, collected=True
        )
        return await _collect(resumed, box)

    async def _invoke_resume_on(
        self, checkpoint_id: str, resume: Any, session: Session, max_turns: int | None = None
    ) -> RunResult:
        """``invoke_resume`` on ``session`` as it is, the checkpoint's saved values not written
        into it: an execution environment resumes a paused record on its key's session as the
        key's later records left it, not as it was at the pause (see ``adk.execution``).
        ``max_turns`` as for ``resume``, checked by the caller."""
        box: list[RunContext] = []
        resumed = self._resume(
            checkpoint_id,
            resume,
            box,
            session,
            None,
            own_session=True,
            max_turns=max_turns,
            collected=True,
        )
        return await _collect(resumed, box)

    # -- internals ---------------------------------------------------------------------------
    def _check_designated(self, agent_options: Mapping[str, Any]) -> None:
        """Refuse ``agent_options`` naming no agent of the tree (``adk._agent_names``), once
        ``run_options`` has checked its shape: a typo left the options unread, with no word."""
        refused = unknown_designated(agent_options, (self.agent, self.resources), _is_part)
        if refused is not None:
            raise refused

    def _new_run(
        self,
        messages: list[Message],
        session: Session | None,
        run_id: str | None,
        plan: _ResumePlan | None = None,
    ) -> _RunState:
        if self._late_global and _OTEL in _MODULES:
            self._set_since()
        return new_run(messages, session, run_id or None, plan, self._hooks, self.resources)

    def _set_since(self) -> None:
        """For a runner built to use a global tracer or meter provider while none was set, once
        one has been set since (each run's cheap look): if it records,
        build the runner's hooks anew for it (callbacks and the providers it was given kept), for
        this run and every later one. Either way the runner stops looking for that provider:
        OpenTelemetry sets each global provider once. A run already going keeps the hooks it
        began with. Runners in several threads may build them at once: each builds the same.
        Called by each run while OpenTelemetry is imported (``_OTEL in _MODULES``, which costs a
        run less than a call would) until both are set."""
        late = self._late_global
        # Reads the API's own ``_TRACER_PROVIDER`` and ``_METER_PROVIDER``, which
        # ``set_tracer_provider`` and ``set_meter_provider`` set, once for good (as loading one
        # named by ``OTEL_PYTHON_TRACER_PROVIDER`` does), because ``get_tracer_provider()`` reads
        # the environment each time it finds none, several µs where a whole run of a one-turn
        # agent takes about seven. Inline, not a call: this runs every run until both are set.
        found = 0
        if late & LATE_TRACER:
            module = _MODULES.get(_OTEL_TRACE)
            if module is not None and getattr(module, "_TRACER_PROVIDER", None) is not None:
                found = LATE_TRACER
        if late & LATE_METER:
            module = _MODULES.get(_OTEL_METRICS)
            if module is not None and getattr(module, "_METER_PROVIDER", None) is not None:
                found |= LATE_METER
        if not found:
            return
        self._late_global = late & ~found
        if (found & LATE_TRACER and global_tracer_set()) or (
            found & LATE_METER and global_meter_set()
        ):
            hooks = adk._instrument.build_hooks(
                self.callbacks, self._tracer_provider, self._meter_provider
            )
            self._hooks = hooks
            self._on_event = hooks.on_event if hooks is not None else None

    def _drive_root(
        self,
        ctx: RunContext,
        input: AgentInput,
        checkpoint_id: str | None,
        claim: _Claim | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """The root agent's events under the runner's rules (``_check``), each given to
        ``on_event`` just before it goes out. A resume that lost its ``claim`` on the checkpoint
        stops at the next event: the checkpoint may be another resume's now.

        An agent with a driver of its own (``_adk_drive``: the framework's sequences and loops)
        is iterated under ``_drive_fused``; any other is driven by ``_drive_plain``, which applies
        ``drive``'s rules itself: one generator fewer on every event."""
        agent = self.agent
        fused = getattr(agent, "_adk_drive", None)
        if fused is not None:
            return self._drive_fused(ctx, fused(input, ctx), checkpoint_id, claim)
        return self._drive_plain(agent_run(agent, ctx), input, checkpoint_id, claim)

    async def _drive_fused(
        self,
        ctx: RunContext,
        events: AsyncGenerator[AgentEvent, None],
        checkpoint_id: str | None,
        claim: _Claim | None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """``_drive_root`` of the ``events`` of an agent that applies ``drive``'s rules itself."""
        on_event = self._on_event
        watched = on_event is not None or claim is not None  # one test per event when neither
        ended = False  # the run's last event is out: what fails from then on can only be logged
        previous: AgentEvent | None = None
        baseline = run_started()  # cancellations its task had pending: not the run's
        try:
            async for event in events:
                if watched:
                    if (
                        claim is not None
                        and claim.lost
                        and event.interrupted is None  # a pause saves nothing then (``_check``)
                        and event.error is None  # the run ends with it anyway
                    ):
                        ended = True
                        lost = _claim_lost(event.agent_name, event.run_path, claim.checkpoint_id)
                        yield _final(on_event, _made(ctx, lost))
                        return
                    if on_event is not None and event._signal is None and event.error is None:
                        on_event(event)  # the others once checked (``_check``)
                if previous is not None:  # every layer below is done with it: see adk.events
                    previous._flags = 0
                previous = event
                if event._signal is None and event.action is None and event.error is None:
                    yield event
                    if baseline is not None:  # a run started with cancellations pending
                        run_resumed(baseline)
                    continue
                event, after = await _check(self, ctx, checkpoint_id, event, claim)
                ended = (
                    event.error is not None or after is not None or event.interrupted is not None
                )
                yield event
                if after is not None:
                    yield after
                if ended:
                    return
                if baseline is not None:
                    run_resumed(baseline)
        except GeneratorExit:
            if not ended:  # as ``_drive_plain``'s: the reader left mid-run
                ctx._run.abandoned = True
            raise
        except Exception as exc:  # a hook at the root failed (see ``_root_failed``)
            if is_cancellation(exc):
                raise
            ended = True
            yield _final(on_event, _root_failed(ctx, exc))
        finally:
            event = NO_EVENT  # see _driver.NO_EVENT
            if previous is not None:
                previous._flags = 0
                previous = None
            try:
                await _close_root(events, ended)
            finally:
                run_ended(baseline)

    async def _drive_plain(
        self,
        own: _AgentRun,
        input: AgentInput,
        checkpoint_id: str | None,
        claim: _Claim | None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """``_drive_root`` of an agent without a driver of its own: ``drive``'s rules (its
        ``_drive``) and the runner's (``_drive_fused``'s) applied in one generator, in the same
        order as the two generators did, one inside the other. What fails in the agent or in
        ``drive``'s rules becomes the agent's error event (``own.failed``); what fails in the
        runner's rules (a hook at the root) fails the run with ``_root_failed`` before the agent
        is closed; a failure once the run's last event is out is logged."""
        ctx = own.ctx
        on_event = self._on_event
        watched = on_event is not None or claim is not None  # one test per event when neither
        ended = False  # the run's last event is out: what fails from then on can only be logged
        closed = False  # the reader closed this generator: what fails from then on is raised
        previous: AgentEvent | None = None
        baseline = run_started()  # cancellations its task had pending: not the run's
        try:
            early = own.skipped()
            if early is None and own.hooks is not None:
                early = await own.start()
            if early is not None:  # a pause re-raised, or a failed start: it ends the run
                previous = early
                early, after = await _check(self, ctx, checkpoint_id, early, claim)
                ended = True
                yield early
                if after is not None:
                    yield after
                return
            try:
                events = own.events(input)
                del input  # the agent's now: not kept while the run waits (a GC-tracked object)
                try:  # ``_drive``'s: not `async with closing(...)`, try/finally is cheaper
                    async for event in events:
                        stop = own.observe(event)
                        # The runner's rules (``_drive_fused``'s), their failures the run's.
                        try:
                            if watched:
                                if (
                                    claim is not None
                                    and claim.lost
                                    and event.interrupted is None
                                    and event.error is None
                                ):
                                    ended = True
                                    lost = _claim_lost(
                                        event.agent_name, event.run_path, claim.checkpoint_id
                                    )
                                    yield _final(on_event, _made(ctx, lost))
                                    return
                                if (
                                    on_event is not None
                                    and event._signal is None
                                    and event.error is None
                                ):
                                    on_event(event)
                            if previous is not None:  # see adk.events
                                previous._flags = 0
                            previous = event
                            if (
                                event._signal is None
                                and event.action is None
                                and event.error is None
                            ):
                                after = None
                            else:
                                event, after = await _check(self, ctx, checkpoint_id, event, claim)
                                ended = (
                                    event.error is not None
                                    or after is not None
                                    or event.interrupted is not None
                                )
                        except Exception as exc:
                            if is_cancellation(exc):
                                raise
                            ended = True
                            yield _final(on_event, _root_failed(ctx, exc))
                            return
                        yield event
                        if after is not None:
                            yield after
                        if ended:
                            return
                        if baseline is not None:  # a run started with cancellations pending
                            run_resumed(baseline)
                        # ``_drive``'s, once the reader took the event.
                        if own.stream is not None:
                            await own.record_stream()
                        if stop:
                            settled = await settle(event, own)  # observed by ``own``
                            if settled is not None:  # a child's stream failed: see ``settle``
                                previous._flags = 0
                                previous = settled
                                settled, after = await _check(
                                    self, ctx, checkpoint_id, settled, claim
                                )
                                ended = True
                                yield settled
                                if after is not None:
                                    yield after
                                return
                            break
                    else:
                        if ctx._run.unyielded is not None:  # a pause made: its own? (``_drive``)
                            unyielded_pause(own)
                except GeneratorExit:
                    closed = True
                    if not ended:  # the reader left mid-run: the agents closed now were cut off
                        ctx._run.abandoned = True
                    raise
                finally:
                    if getattr(events, "ag_frame", True) is not None:
                        await close_events(events)
            except (Exception, asyncio.CancelledError) as exc:
                if closed or ended or own.cancelled_by(exc):
                    raise
                failed = own.failed(exc)
                if previous is not None:
                    previous._flags = 0
                previous = failed
                failed, after = await _check(self, ctx, checkpoint_id, failed, claim)
                ended = True
                yield failed
                if after is not None:
                    yield after
            finally:
                event = failed = settled = NO_EVENT  # see _driver.NO_EVENT
                after = None
                if own.needs_finish:
                    await own.finish()
        except Exception as exc:
            if is_cancellation(exc):
                raise
            if ended:  # as ``_close_root``: the run's outcome stands
                _log_after_end(exc)
                return
            if closed:
                raise
            ended = True  # a hook at the root failed (see ``_root_failed``)
            yield _final(on_event, _root_failed(ctx, exc))
        finally:
            event = early = NO_EVENT  # see _driver.NO_EVENT
            if previous is not None:
                previous._flags = 0
                previous = None
            run_ended(baseline)

    async def _pause(
        self,
        ctx: RunContext,
        event: AgentEvent,
        signal: _InterruptSignal,
        checkpoint_id: str | None,
    ) -> AgentEvent:
        """Save the checkpoint; the interrupt event then reports its id, or an error event says why
        it could not be saved (a failed write leaves any previous checkpoint as it was)."""
        run = ctx._run
        generated = checkpoint_id is None
        if checkpoint_id is None:
            checkpoint_id = os.urandom(16).hex()
        elif run.plan is None and checkpoint._claim.being_resumed(
            self.checkpoint_store, checkpoint_id
        ):
            # A new run pausing under the id of a checkpoint that is being resumed would overwrite
            # it, and the resume would then delete the new one when it finished.
            taken = _being_resumed(checkpoint_id, "could not save checkpoint")
            return AgentEvent(
                event.agent_name, event.run_path, error=ErrorInfo.of(taken), exception=taken
            )
        elif run.plan is not None and run.plan.unreached():
            # Saving would replace the checkpoint that still holds the undelivered answers.
            return _unreached(self.agent.name, checkpoint_id, run.plan.unreached())
        try:
            body = checkpoint._snapshot.snapshot_body(
                run, signal, self.agent.name, self.enable_streaming
            )
            hooks = run.hooks
            if hooks is not None:
                trace = hooks.trace_of(ctx)  # the paused run's trace, for the resume to link to
                if trace is not None:
                    body["trace"] = trace
            memory = _record_memory.get()
            if memory is not None and memory[0] is self:  # the record's own run's pause
                body["memory"] = memory[1]  # where the key's memory is: see ``_resume_claimed``
            keyed = _record_keys.key_to_save(self)
            if keyed is not None:  # a keyed record's: its resume must name its key (see there)
                index: int | None = keyed[2]
                if keyed[1] is not None:  # a resume's pause: the record's index, as first saved
                    index = _saved_index(run.plan)
                key = _record_keys.saved(keyed[0], index)
                if key is not None:
                    body["record_key"] = key
            data = encode_checkpoint(body)
            if generated or run.plan is not None:
                await self.checkpoint_store.put(checkpoint_id, data)
            elif await self._put_new(checkpoint_id, data):
                taken = _waits(checkpoint_id, "could not save checkpoint")
                return AgentEvent(
                    event.agent_name, event.run_path, error=ErrorInfo.of(taken), exception=taken
                )
        except (Exception, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError):
                if generated:  # the write may have landed under an id nobody will ever learn
                    await self._forget(checkpoint_id)
                if being_cancelled():
                    raise
                # The store's own (it awaited something someone else cancelled): a failure
                # to save, not the cancellation of the run's reader, which nobody cancelled.
            reason = str(exc) or type(exc).__name__
            error = ErrorInfo(
                "CheckpointError",
                f"could not save checkpoint {checkpoint_id!r}: {reason}",
                # The refusal's word (``"unstorable"``); none for a store that failed to write.
                reason=exc.reason if isinstance(exc, CheckpointError) else None,
            )
            return AgentEvent(event.agent_name, event.run_path, error=error, exception=exc)
        assert event.action is not None and event.action.interrupted is not None
        event.action.interrupted.checkpoint_id = checkpoint_id
        if run.hooks is not None:
            run.hooks.paused(ctx, checkpoint_id)  # the root span names it (tracing)
        return event

    async def _put_new(self, checkpoint_id: str, data: bytes) -> bool:
        """Save a new run's pause under the id it was given, unless a checkpoint that still
        waits is there (not finished; one this runner cannot read counts as waiting): True when
        refused, nothing written. Saved, the pause would replace it, and its pending decision
        with it, with no word: the person's yes to the first question ("pay bob?") would then
        resume the second ("pay eve?"), plain data going to the one point pending. A resumed run
        rewrites its own checkpoint and a generated id is new, so neither comes here. The stores
        pyadk ships look and write in one atomic step (``_PutNewStore``), so two new runs pausing
        at once under one id cannot both save; a store of only the public protocol (or a
        subclass of a built-in one with a ``get`` or ``put`` of its own) is read, then written,
        and those two may still replace each other (docs/interrupts.md)."""
        store = self.checkpoint_store
        if _puts_new(store):  # not a subclass that reads or writes its own way (_puts_new)
            assert isinstance(store, _PutNewStore)
            return await store._put_new(checkpoint_id, data, _waiting) is not None
        old = await store.get(checkpoint_id)
        if old is not None and _waiting(old):
            return True
        await store.put(checkpoint_id, data)
        return False

    async def _run_named(
        self, ctx: RunContext, input: AgentInput, checkpoint_id: str
    ) -> AsyncGenerator[AgentEvent, None]:
        """``_drive_root`` of a new run given ``checkpoint_id``, refused with an error event
        before its agent runs when that id is taken (``_named_refusal``)."""
        baseline = run_started()  # cancellations its task had pending: not the run's
        try:
            refused = await self._named_refusal(ctx, checkpoint_id)
        finally:
            run_ended(baseline)
        if refused is not None:
            yield refused
            return
        try:
            async with closing(self._drive_root(ctx, input, checkpoint_id)) as events:
                async for event in events:
                    yield event
        finally:
            event = NO_EVENT  # see _driver.NO_EVENT

    async def _named_refusal(self, ctx: RunContext, checkpoint_id: str) -> AgentEvent | None:
        """The error event refusing a new run (``run``, ``invoke``) given ``checkpoint_id``
        before its agent runs, when that id is taken (``_id_taken``): the run's only event,
        given to ``on_event`` as the one that ends it; None when the id is free."""
        taken = await self._id_taken(checkpoint_id)
        if taken is None:
            return None
        return _final(self._on_event, _made(ctx, _refusal(ctx, taken)))

    async def _id_taken(self, checkpoint_id: str) -> CheckpointError | None:
        """The refusal (``reason`` ``"id_taken"``) of a new run given the id of a checkpoint a
        paused run still waits on, or that a resume in this process runs; None when the id is
        free (nothing there, or a finished checkpoint kept for audit, which a pause replaces).

        Looked at before the run starts, one read of the store for a run given an id: refused
        only at its pause (``_put_new``, which still decides, atomically, should a pause be
        saved there meanwhile), the run had paid for its model calls and made its tools' calls
        before the pause, all for nothing. A store that fails to answer refuses nothing here: a
        run that never pauses needs no store, and one that pauses is refused (or its save fails)
        at the pause as before."""
        store = self.checkpoint_store
        if checkpoint._claim.being_resumed(store, checkpoint_id):
            return _being_resumed(checkpoint_id, _AT_START)
        try:
            waiting = await _still_waits(store, checkpoint_id)
        except (Exception, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError) and being_cancelled():
                raise
            logger.debug(
                "checkpoint %r could not be looked at before the run: %s", checkpoint_id, exc
            )
            return None
        return _waits(checkpoint_id, _AT_START) if waiting else None

    async def _forget(self, checkpoint_id: str | None) -> None:
        """Delete the checkpoint of a pause saved under a generated id that its run, cancelled,
        could not report. Best effort, but to its end even if cancelled again (as anyio does):
        the caller raises its cancellation afterwards."""
        if checkpoint_id is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await finish(self.checkpoint_store.delete(checkpoint_id))

    async def _resume(
        self,
        checkpoint_id: str,
        resume: Any,
        run_box: list[RunContext] | None = None,
        session: Session | None = None,
        options: tuple[Mapping[str, Any], Any] | None = None,
        own_session: bool = False,
        max_turns: int | None = None,
        collected: bool = False,
    ) -> AsyncGenerator[AgentEvent, None]:
        """``collected``: ``_collect`` reads the run's events (``invoke_resume``), and so what an
        ``AgentTool`` showed in it (``_RunState.keeps_shown``)."""
        _check_resume_id(checkpoint_id)  # by the first __anext__, as a missing checkpoint is
        baseline = run_started()  # cancellations its task had pending: not the run's
        try:
            async with checkpoint._claim.one_resume(self.checkpoint_store, checkpoint_id) as claim:
                # Closed before the claim ends: a resume left early finishes its cleanup
                # (cancelling its tool calls) while it still holds the checkpoint.
                resumed = self._resume_claimed(
                    checkpoint_id,
                    resume,
                    run_box,
                    session,
                    claim,
                    options,
                    own_session,
                    max_turns,
                    collected,
                )
                try:
                    async with closing(resumed) as events:
                        async for event in events:
                            yield event
                finally:
                    event = NO_EVENT  # see _driver.NO_EVENT
        finally:
            run_ended(baseline)

    async def _resume_claimed(
        self,
        checkpoint_id: str,
        resume: Any,
        run_box: list[RunContext] | None,
        given: Session | None,
        claim: _Claim | None,
        options: tuple[Mapping[str, Any], Any] | None = None,
        own_session: bool = False,
        max_turns: int | None = None,
        collected: bool = False,
    ) -> AsyncGenerator[AgentEvent, None]:
        data = await _from_store(self.checkpoint_store.get(checkpoint_id), "get", checkpoint_id)
        if data is None:
            hint = ""
            if isinstance(self.checkpoint_store, InMemoryCheckpointStore):
                # The default store: a resume in another process, or after a restart, lands here.
                hint = (
                    "; the in-memory store (the default) holds the pauses of this process only: "
                    "to resume in another process or after a restart, give the Runner a store "
                    "they share (SQLiteCheckpointStore, RedisCheckpointStore, "
                    "PostgresCheckpointStore)"
                )
            if checkpoint_id.startswith("agent:"):  # a point id (InterruptPoint.id) given instead
                hint += (
                    f"; {checkpoint_id!r} looks like an interrupt point's id: resume takes the "
                    "run's checkpoint id (RunResult.checkpoint_id), and a point id as a key of "
                    "its data, resume(checkpoint_id, {point_id: data})"
                )
            # A second resume of one pause (a retried request, an approval clicked twice) lands
            # here too, and the in-memory hint alone sent that user looking for another process.
            raise CheckpointNotFoundError(
                f"no checkpoint {checkpoint_id!r} in {self.checkpoint_store!r}: it was never "
                "saved there, or a resume of it ran to the end, which deletes it "
                f"(Runner(keep_checkpoints=True) keeps it, marked finished){hint}"
            )
        body = decode_checkpoint(data, checkpoint_id)
        if body.get("finished"):
            raise CheckpointNotFoundError(
                f"checkpoint {checkpoint_id!r} belongs to a run that has finished; it is kept "
                "for audit (keep_checkpoints=True) and cannot be resumed again"
            )
        snapshot = checkpoint._snapshot.parse_body(body, checkpoint_id)
        if snapshot.agent != self.agent.name:
            raise CheckpointError(
                f"checkpoint {checkpoint_id!r} belongs to agent {snapshot.agent!r}, "
                f"not to {self.agent.name!r}",
                reason="incompatible",
            )
        if not own_session and _record_memory.get() is None and "memory" in body:
            # A keyed record of a job that holds its key's memory (a Flink job): run here, on the
            # session saved at the pause, its writes reach no later record of its key.
            logger.warning(
                "checkpoint %r paused a record whose key's memory lives in %s: resumed by a "
                "Runner, it runs on the session saved at the pause, and what it writes there "
                "will not reach that memory (the key's next records will not see it); resume it "
                "through the job instead (FlinkExecutionEnvironment: apply(agent, resumes=...))",
                checkpoint_id,
                body["memory"],
            )
        answered = checkpoint._snapshot.read_answered(body)
        plain_before = checkpoint._snapshot.read_answered_plain(body)
        targets = _targets(snapshot.signal, resume, checkpoint_id, answered, plain_before)
        if snapshot.option_names is not None:
            self._check_options_given(checkpoint_id, snapshot.option_names, options)
        if given is None:
            session = Session(snapshot.session)
        else:
            session = given
            if not own_session:
                session.update(snapshot.session)
        plan = _ResumePlan(snapshot.signal, targets, answered)
        if resume is not None and not _keyed(resume):  # plain data, for the one point pending
            plan.answered_plain = next(iter(targets))
            info = snapshot.signal.points[0].info
            plan.plain_approval = adk._approval.is_approval_request(info)
        if snapshot.trace is not None:
            plan.resumed_from = (snapshot.trace, checkpoint_id)
        run = self._new_run(snapshot.root_input, session, snapshot.run_id or None, plan)
        run.keeps_shown = collected
        # What the resumed run finishes before anything else can fail (an approved call's
        # result) is recorded in the checkpoint through it, so a later resume does not run it
        # again (``adk.checkpoint._progress``); the checkpoint is finished as it was last written.
        progress = checkpoint._progress._Progress(
            self.checkpoint_store, checkpoint_id, body, data, claim
        )
        plan.progress = progress
        run.usage = snapshot.usage  # the calls before the pause count in the resumed run's total
        if options is not None:  # the call's own: a checkpoint holds none (see ``resume``)
            run.options, run.designated = options
        saved = snapshot.turns  # (limit, calls made) when the paused run had a max_turns
        limit = max_turns if max_turns is not None else saved[0] if saved is not None else None
        if limit is not None:  # the calls before the pause count (none saved: none counted)
            run.turns = _Turns(limit, saved[1] if saved is not None else 0)
        checkpoint._snapshot.load_history(run, snapshot.history, checked=True)
        ctx = _root_context(self, run)
        if run_box is not None:
            run_box.append(ctx)
        # Before anything runs: a point the resume cannot reach, or a saved state that does not
        # fit, found only when the run gets there would come after other branches and calls ran
        # (an approved payment made, and made again on the next resume of the kept checkpoint).
        # Refused as the same checks refused it during the run: an error event (``RunError``
        # from ``invoke_resume``) caused by the ``CheckpointError``; the checkpoint is kept.
        try:
            keyed = _record_keys.key_to_check(self, checkpoint_id)
            if keyed is not None and "record_key" in body:
                # Resumed as a record of the key the resume names (an execution environment's):
                # another key than the pause's would run it on, and commit to, that key's memory.
                # A checkpoint saved before keys were has none: resumed unchecked, as it was.
                problem = _record_keys.refused(body["record_key"], keyed[0])
                if problem is not None:
                    raise CheckpointError(
                        f"checkpoint {checkpoint_id!r} {problem}", reason="incompatible"
                    )
            self._check_gates(snapshot.signal, checkpoint_id)
            preflight = adk._preflight.Preflight(plan, checkpoint_id)
            preflight.run(self.agent, ctx)
            if preflight.deferred is not None:  # a toolset's tools to find (an edited call's)
                await preflight.finish()
        except CheckpointError as exc:
            name = self.agent.name
            refused = AgentEvent(name, (name,), error=ErrorInfo.of(exc), exception=exc)
            yield _final(self._on_event, _made(ctx, refused))
            return
        input = AgentInput(snapshot.root_input, self.enable_streaming)
        # Finished unless the last event failed or paused: a resumed run may well end without
        # an event (an approval whose step only writes the session), and must not keep a
        # checkpoint that a second resume would run again.
        finished = True
        try:
            async with closing(self._drive_root(ctx, input, checkpoint_id, claim)) as events:
                async for event in events:
                    yield event
                    finished = event.error is None and event.interrupted is None
        finally:
            event = NO_EVENT  # see _driver.NO_EVENT
        if finished:
            if claim is not None and claim.lost:
                lost = _claim_lost(self.agent.name, (self.agent.name,), checkpoint_id)
                yield _final(self._on_event, _made(ctx, lost))
                return
            unreached = plan.unreached()
            if unreached:  # finished without delivering the answer: keep it for a fixed tree
                missed = _unreached(self.agent.name, checkpoint_id, unreached)
                yield _final(self._on_event, _made(ctx, missed))
                return
            try:
                await self._finish(checkpoint_id, progress)
            except (CheckpointStoreError, CheckpointError) as exc:
                # Bare, the store's words read like a store down at the start, when nothing ran
                # and the request can simply be sent again: sent again now, what the resume ran
                # and did not record (an approved call) runs twice. Same class (a service's
                # handling of store failures still applies). A store of your own's refusal
                # (a CheckpointError, ``_is_refusal``) too: bare, a CheckpointNotFoundError here
                # says the resume found nothing, when it ran.
                kept = "marked finished" if self.keep_checkpoints else "deleted"
                raise CheckpointStoreError(
                    f"the resumed run of checkpoint {checkpoint_id!r} finished, but the "
                    f"checkpoint could not be {kept}: it may still be stored, and "
                    f"{_resumed_again(progress, plan.targets)}; delete it once the store is back. "
                    f"{exc if isinstance(exc, CheckpointStoreError) else _described(exc)}",
                    backend=getattr(exc, "backend", None),
                    operation=getattr(exc, "operation", None),
                    checkpoint_id=getattr(exc, "checkpoint_id", checkpoint_id),
                ) from exc

    def _check_gates(self, signal: _InterruptSignal, checkpoint_id: str) -> None:
        """Refuse (``CheckpointError``, before anything runs, the checkpoint kept) a resume of a
        tool call paused by a ``before_tool`` callback that no callback of this runner or of an
        agent of its tree is now (by its function's module and qualified name, as the checkpoint
        records it): with nobody to read the answer, the call went on as on a first call, and a
        tool without an approval or a question of its own ran, a person's "stop" dropped."""
        paused: dict[str, str] = {}
        for point in signal.points:
            slots = signal.states.get(point.id)
            key = slots.get(_CALLBACK_SLOT) if slots else None
            if isinstance(key, str):
                paused[point.id] = key
        if not paused:
            return
        # Loaded here: a runner without callbacks (the gate removed) may not have loaded it.
        from .callbacks import before_tool_names

        have = before_tool_names(self.callbacks, tree_parts((self.agent, self.resources), _is_part))
        gone = {p: key for p, key in paused.items() if key.split("#", 1)[0] not in have}
        if gone:
            named = "; ".join(f"{p!r} by {key.split('#', 1)[0]!r}" for p, key in gone.items())
            raise CheckpointError(
                f"the resume of checkpoint {checkpoint_id!r} cannot give the answer to the "
                f"call(s) a before_tool callback paused, which this runner no longer has (removed "
                f"since the pause?): {named}. Without it the call would go on as on a first "
                "call, its tool run unasked by it; give the runner (or the agent) that callback "
                "again, one of that module and name that lets the call through if it should no "
                "longer ask; the checkpoint is kept as it was",
                reason="incompatible",
            )

    def _check_options_given(
        self,
        checkpoint_id: str,
        saved: tuple[list[str], dict[str, list[str]]],
        options: tuple[Mapping[str, Any], Any] | None,
    ) -> None:
        """Refuse (``_OptionsNotGiven``, before anything runs, the checkpoint kept) a resume that
        lacks run options the paused run was given: they are not saved (values may be clients), so
        the resumed tools read none, and a tool reading its ``deps`` failed only once the
        resume reached it, its approved call not made, or an agent went on without them.
        Compared by name: run-wide, and for each agent options were designated to (that the
        tree still has), the names that apply to it."""
        base, designated = options if options is not None else (_NO_OPTIONS, None)
        run_names, by_agent = saved
        missing = [name for name in run_names if name not in base]
        lines = [f"options {', '.join(map(repr, missing))}"] if missing else []
        if by_agent:
            known = _agent_names((self.agent, self.resources), _is_part)
            for agent, names in by_agent.items():
                applies = designated.get(agent, base) if designated else base
                lost = [n for n in names if n not in applies and n not in missing]
                if lost and agent in known:
                    lines.append(f"agent_options[{agent!r}] {', '.join(map(repr, lost))}")
        if lines:
            raise _OptionsNotGiven(
                f"checkpoint {checkpoint_id!r} paused a run given run options this resume lacks: "
                f"{'; '.join(lines)}. Run options are not saved (a client, a connection): give "
                "them to the resume again (resume(..., options=..., agent_options=...)), any "
                f"value (None) for one no agent reads now. {_NOTHING_RAN}"
            )

    async def _finish(self, checkpoint_id: str, progress: checkpoint._progress._Progress) -> None:
        """A resumed run finished: delete its checkpoint, or mark a kept one as finished so it is
        never resumed twice (an approved payment must not be paid again). Only if it is still the
        checkpoint this resume loaded (or last wrote, recording its progress): another process
        may have paused a new run under the same id meanwhile (the claim keeps out other resumes,
        not new runs), and that must not be lost. The delete, as the finished marker, is
        compared with the bytes read and done in one step where the store can
        (``store._DeletingIfStore``: every built-in store): a pause saved under the id just
        after the read stays; a store of the three methods gets a read, then a delete.
        """
        store = self.checkpoint_store
        stored = await _from_store(store.get(checkpoint_id), "get", checkpoint_id)
        body = progress.body_of(stored)
        if body is None:
            return
        if self.keep_checkpoints:
            data = encode_checkpoint({**body, "finished": True})
            if stored is not None and _replaces(store):  # over those bytes only, in one step
                replace = store._replace(checkpoint_id, stored, data)  # type: ignore[attr-defined]
                await _from_store(replace, "put", checkpoint_id)  # refused: another run's now
            else:  # a store of the three methods: a read, then a write
                await _from_store(store.put(checkpoint_id, data), "put", checkpoint_id)
        elif _deletes_if(store):  # over those bytes only, in one step
            delete = store._delete_if(checkpoint_id, stored)  # type: ignore[attr-defined]
            await _from_store(delete, "delete", checkpoint_id)  # refused: another run's now
        else:  # a store of the three methods: a read, then a delete
            await _from_store(store.delete(checkpoint_id), "delete", checkpoint_id)

    # -- listing -----------------------------------------------------------------------------
    def pending(self, prefix: str | None = None) -> _Listing:
        """The checkpoints of paused runs this runner can resume (its agent's, and those that
        cannot be read, with their ``error``), read from its store without resuming them or
        running any code: ``adk.checkpoint.list_pending(self.checkpoint_store, prefix,
        agent=self.agent.name)``, read with ``async for``, or awaited for a list. Its store
        must list its ids (every built-in one does); another is a ``TypeError`` naming what to
        add."""
        return checkpoint.list_pending(self.checkpoint_store, prefix, agent=self.agent.name)

    # -- lifecycle ---------------------------------------------------------------------------
    # Class defaults, so a runner never entered (one per request) pays nothing for them: how many
    # ``async with`` blocks are inside this runner now, and what it holds open for them.
    _entered = 0
    _holding: list[Any] | None = None

    async def __aenter__(self) -> Self:
        """Hold open, for the block, what the runner's runs use (``aclose`` says what): another
        runner's end, or the end of an ``async with`` on one of them, leaves it open meanwhile,
        and this block's end closes what nobody else holds then. Blocks in event loops of
        several threads at once (``asyncio.run`` per request in worker threads) are counted
        as one loop's are (``_ENTERING``)."""
        with _ENTERING:
            if self._entered == 0 and self._holding is None:
                parts = self._parts()
                for part in parts:
                    hold(part)
                self._holding = parts
            self._entered += 1
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        del exc, tb  # not kept in this frame while it awaits: see _driver.NO_EVENT
        with _ENTERING:
            self._entered -= 1
            if self._entered:
                return
            # Let go in the same step as the count reaches 0: an enter of another thread after
            # it holds the parts afresh, so the close below leaves them to that block.
            holding, self._holding = self._holding, None
        # Through ``aclose``, a subclass's own too (``async with`` ends with it, as every
        # ``AsyncCloseable``'s does), which closes what was let go of here (``_BLOCK_END``).
        token = _BLOCK_END.set((self, holding))
        try:
            await self.aclose()
        finally:
            _BLOCK_END.reset(token)

    def _parts(self) -> list[Any]:
        """What the runner closes: every part of the agent tree that has an ``aclose``, then its
        ``resources`` (if they have one)."""
        parts = _closable_parts(self.agent)
        resources = self.resources
        if (
            resources is not None
            and callable(getattr(resources, "aclose", None))
            and not any(part is resources for part in parts)
        ):
            parts.append(resources)
        return parts

    async def aclose(self) -> None:
        """Close what the runner's runs use that nobody else holds open: its ``resources`` and
        every part of the agent tree that has an ``aclose`` (models, MCP toolsets, tools, agents;
        see ``_closable_parts``), each once. Held open, and so left to its last holder to close,
        is what another runner uses inside its own ``async with runner:``, and a ``Resources``,
        ``MCPToolset`` or ``OpenAIChatModel`` inside an ``async with`` on it: a runner made per
        request over shared ones closes nothing under the others' runs. The runner lets go of
        what it held for its own ``async with`` first. One failing does not keep the others
        open: all are closed, then the first failure is raised (the others are logged)."""
        ending = _BLOCK_END.get()
        if ending is not None and ending[0] is self:  # its block's end: what the block let go of
            _BLOCK_END.set(None)  # once: a second aclose in it lets go of what it holds then
            holding = ending[1]
        else:
            with _ENTERING:
                holding, self._holding = self._holding, None
        await self._close(holding)

    async def _close(self, holding: list[Any] | None) -> None:
        """``aclose`` once the runner let go of ``holding``, what it held for its blocks."""
        parts = self._parts()
        if holding:
            for part in holding:
                release(part)
            found = {id(part) for part in parts}
            parts += [part for part in holding if id(part) not in found]  # gone from the tree since
        parts = [part for part in parts if not held(part)]
        if not parts:
            return
        # Concurrently, and to its end even if our caller is cancelled meanwhile (a cancelled run
        # unwinding; under an anyio cancel scope at every await, where a shield returned at once
        # with the servers still running): no session or server process is left behind when this
        # returns, and the cancellation is raised afterwards (``finish``).
        outcomes = await finish(
            asyncio.gather(*(_aclose(part) for part in parts), return_exceptions=True)
        )
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        for failure in failures[1:]:
            logger.warning("closing a part of the runner failed: %s", failure, exc_info=failure)
        if failures:
            raise failures[0]


_install_absent(Runner, _RUNNER_HINTS)  # the OpenAI Agents SDK's run_streamed, run_sync


_UPWARD = frozenset({"parent", "_adk_parent"})  # a flow's link to the agent above it


def _closable_parts(root: object) -> list[Any]:
    """The objects with an ``aclose`` in the agent tree under ``root``, each once.

    The tree is what agents, tools, toolsets and models hold in their attributes (directly or in
    a list, tuple, set or dict): sub-agents, workflow steps, flow nodes, the agent of an
    ``AgentTool`` or of a wrapper, tools, toolsets, models. Found by duck typing (``_is_part``),
    as ``adk`` knows nothing of the agent classes built on it; links up to an enclosing flow are
    not followed. An object with its own ``aclose`` is not looked into: it closes what it holds.
    """
    seen: set[int] = set()
    found: list[Any] = []
    pending: list[object] = [root]
    while pending:
        part = pending.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        if callable(getattr(part, "aclose", None)):
            found.append(part)
            continue
        for name, value in attributes(part):
            if name not in _UPWARD:
                pending.extend(members(value, keep=_is_part))
    return found


def _named_without_resources(agent: Agent) -> None:
    """Refuse (``ValueError``) a tree, given to a ``Runner`` with no resources, that has an agent
    naming a resource (a ``ReActAgent``'s str model or tool: ``_adk_named_resource``): it could
    only fail at that agent's first model call, after the steps before it had run. The tree is
    the one ``agent_options`` and ``aclose`` find (``tree_parts``): what its agents and tools
    hold in their attributes. Through the framework's own classes (``adk``'s and
    ``prebuilt``'s, which hold agents only in ``sub_agents``, ``tools``, ``agent`` and
    ``worker``) a few attribute reads per agent, not ``tree_parts``' walk of every attribute
    (~0.7 ms for one ReActAgent while it probed each text held, ~0.1 ms since ``members``
    passes text over), since a service may make a Runner per request; through a
    class of the user's own (an agent or tool of their own, a subclass of ours: it may keep
    agents anywhere, ``self.helpers = {...}``) every attribute too, directly or in a list,
    tuple, set or dict, as ``tree_parts`` reads it. Only while an agent that has named one is
    alive (``adk._naming``), so a process of ``ChatModel``s pays nothing for it. A runner given
    resources is not looked at: they may be filled after it is made. An agent of your own that
    calls a model by name (``ctx.generate("fast", ...)``) is not known here, and fails at that
    call as before."""
    pending: list[object] = [agent]
    seen: set[int] = set()
    while pending:
        part = pending.pop()
        if id(part) in seen:
            continue
        seen.add(id(part))
        # Read from the class: a value answering every attribute (a ``MagicMock``, an RPC
        # proxy) would hand back something to call, whose call failed the Runner or went out.
        ask = getattr(type(part), "_adk_named_resource", None)
        named = ask(part) if callable(ask) else None
        if named is not None:
            kind, name = named
            owner = getattr(part, "name", "?")
            if kind == "model":
                instead = (
                    f"resources.add_model({name!r}, model)); to call a provider's model, pass a "
                    f"ChatModel instead: adk.OpenAIChatModel({name!r}, base_url=...)"
                )
            else:
                instead = f"resources.add_tool(tool, name={name!r})), or give the tool itself"
            raise ValueError(
                f"agent {owner!r} names {kind} {name!r}, and the Runner has no resources: a str "
                f"{kind} is the name of a {kind} resource, which the run looks up in the "
                f"runner's (Runner(agent, resources=resources), or an execution environment's "
                f"resources=, {instead}"
            )
        if not _answers_any(part):  # a mock's ``agent`` is a new child each level down
            for attribute in ("sub_agents", "tools"):
                held = getattr(part, attribute, None)
                if isinstance(held, list | tuple):
                    pending.extend(held)
            for attribute in ("agent", "worker"):  # a flow's, AgentTool's; a Supervisor's
                inner = getattr(part, attribute, None)
                if inner is not None and not isinstance(inner, str):
                    pending.append(inner)
        if not type(part).__module__.startswith(_FRAMEWORK):  # the user's: held anywhere
            for name, value in attributes(part):
                if name not in _UPWARD:
                    pending.extend(members(value, keep=_holds_agents))


_FRAMEWORK = ("adk.", "prebuilt.")
"""The modules of the classes whose agents ``_named_without_resources`` finds by name."""


_MODELS_GETATTR = getattr(BaseModel, "__getattr__", None)


def _answers_any(value: object) -> bool:
    """Whether ``value``'s class answers any attribute name (``__getattr__``: a mock, an RPC
    proxy, a delegating wrapper), so that what it "has" says nothing of what it holds. A
    pydantic model's (its private attributes) answers no other name: an agent or tool of one's
    own that is a model is looked into."""
    answer = getattr(type(value), "__getattr__", None)
    return answer is not None and answer is not _MODELS_GETATTR


def _holds_agents(value: object) -> bool:
    """An agent (``run``) or a tool (``spec``: an ``AgentTool``, a tool of one's own holding an
    agent), which ``_named_without_resources`` looks into; not a model nor a toolset, which
    hold none, nor a ``Runner`` (see ``_is_part``) or a class."""
    if isinstance(value, type | Runner):
        return False
    if _answers_any(value):
        # One answering any name (a ``MagicMock``, an RPC proxy) is asked through its class:
        # probed, a mock grew a child per name read, which the walk then probed, for ever. An
        # agent or tool of one's own that delegates (a wrapper's ``__getattr__``) says so there.
        kind = type(value)
        return hasattr(kind, "spec") or callable(getattr(kind, "run", None))
    try:
        return hasattr(value, "spec") or callable(getattr(value, "run", None))
    except Exception:  # a property of the user's failing: not something the walk looks into
        return False


def _is_part(value: object) -> bool:
    """An agent (``run``), model (``generate``), toolset (``tools()``) or tool (``spec``). Not a
    ``Runner``: one reachable from an agent is owned by whoever made it (and closing it from
    here would walk back into this tree)."""
    if isinstance(value, type | Runner):
        return False
    return hasattr(value, "spec") or any(
        callable(getattr(value, name, None)) for name in ("run", "generate", "tools")
    )


async def _aclose(part: Any) -> None:
    closed = part.aclose()
    if inspect.isawaitable(closed):
        await closed


def _claim_lost(agent_name: str, run_path: tuple[str, ...], checkpoint_id: str) -> AgentEvent:
    """The error that ends a resume whose claim on its checkpoint may have passed to another."""
    error = CheckpointError(
        f"lost the claim on checkpoint {checkpoint_id!r}: it could not be renewed in time (the "
        "store unreachable or the event loop blocked for longer than the store's claim_ttl), so "
        "another resume may hold it now; stopped here, leaving the checkpoint as it is",
        reason="busy",
    )
    return AgentEvent(agent_name, run_path, error=ErrorInfo.of(error), exception=error)


def _resumed_again(progress: checkpoint._progress._Progress, targets: Collection[str]) -> str:
    """What resuming again a checkpoint left behind by a finished resume would do, by what this
    resume recorded there (``_Progress.accounted``): run again what it ran unrecorded, or only
    what came after the recorded calls."""
    recorded, unrecorded = progress.accounted(targets)
    if unrecorded:
        named = ", ".join(map(repr, unrecorded[:3]))
        more = f" and {len(unrecorded) - 3} more" if len(unrecorded) > 3 else ""
        replayed = "; the calls it recorded are replayed" if recorded else ""
        return (
            "resuming it again would run again what this resume ran with no record of it kept, "
            f"for {named}{more} (an approved call), and what came after{replayed}"
        )
    after = "and run again what came after them (the model calls)"
    if recorded:
        return (
            "resuming it again would replay the recorded results of the calls this resume ran, "
            f"not run them, {after}"
        )
    return (
        "this resume ran no paused call (an earlier resume recorded them): resuming it again "
        f"would replay them too {after}"
    )


def _saved_index(plan: _ResumePlan | None) -> int | None:
    """The record index the checkpoint a keyed record's resume loaded saved with its key (the
    record's, not the resume's own position among ``apply``'s resumes), for its pause to keep;
    None when it saved none (a checkpoint from before the index was saved)."""
    progress = plan.progress if plan is not None else None
    if progress is None:
        return None
    record = _record_keys.listed(progress.body.get("record_key"))  # as a listing reads it
    return record[1] if record is not None else None


def _unreached(agent_name: str, checkpoint_id: str, points: list[str]) -> AgentEvent:
    """The error that ends a resume that never reached some of the points it addressed."""
    error = CheckpointError(
        f"the resume of checkpoint {checkpoint_id!r} never reached the paused point(s) "
        f"{points}: the agents resuming it no longer lead there (changed since the pause?), so "
        "the resume data was not delivered; the checkpoint is kept as it was",
        reason="incompatible",
    )
    return AgentEvent(agent_name, (agent_name,), error=ErrorInfo.of(error), exception=error)


def _targets(
    signal: _InterruptSignal,
    resume: Any,
    checkpoint_id: str = "",
    answered: tuple[str, ...] = (),
    plain_before: tuple[str | None, bool] = (None, False),
) -> dict[str, Any]:
    """Which points a resume addresses, with their data; data for an approval request must be a
    decision (``check_decision``), checked here, before anything runs. ``answered``: the points
    earlier resumes of checkpoint ``checkpoint_id`` answered, which a refusal names as such;
    ``plain_before``: the point the resume that made this pause gave plain data to, and whether
    it was an approval."""
    targets = _addressed(signal, resume, checkpoint_id, answered, plain_before)
    for point in signal.points:
        if point.id not in targets:
            continue
        if adk._approval.is_approval_request(point.info):
            adk._approval.check_decision(point.id, targets[point.id])
        elif targets[point.id] is resume and isinstance(resume, Mapping):
            _check_not_keyed_by_call(point.id, resume)
        slots = signal.states.get(point.id)
        if slots and slots.get(_CALLBACK_SLOT) is not None:
            _check_kept(point.id, slots[_CALLBACK_SLOT], targets[point.id])
    return targets


def _check_not_keyed_by_call(point_id: str, data: Mapping[Any, Any]) -> None:
    """Refuse (``ValueError``) the data of the one pending point when it is a mapping keyed by
    that point's tool call id, ``{"call_1": "window"}``, as LangGraph keys its answers: a mapping
    naming no point id is plain data, and the tool was resumed with the whole mapping for its
    answer. (An approval's decision is refused as none by ``check_decision``.)"""
    keyed = _call_ids_named(list(data), [point_id])
    if keyed:
        raise ValueError(
            f"resume data {reprlib.repr(data)} for point {point_id!r} is keyed by tool call id"
            f"{keyed}; with one point pending, pass its data alone, or key it by point id, "
            f"{{{point_id!r}: data}}. {_NOTHING_RAN}"
        )


def _check_kept(point_id: str, callback: object, data: object) -> None:
    """Refuse (``ValueError``) an answer to a ``before_tool`` callback's pause that a checkpoint
    cannot hold. The callback's answer is saved with the call's later pauses (the approval, the
    function's questions: ``callbacks._paused_by``) so that it is not asked twice; found there,
    the run failed after the resume had run its other calls (an approved payment beside it, made
    again on the next resume of the checkpoint it kept)."""
    try:
        to_json_value(data, "the answer")
    except CheckpointError as exc:
        raise ValueError(
            f"resume data for point {point_id!r}, paused by before_tool callback {callback!r}, "
            f"cannot be kept in a checkpoint ({exc}): a callback's answer is saved with the "
            "call's later pauses (the approval, the function's questions). Nothing ran and the "
            "checkpoint is kept"
        ) from None


def _addressed(
    signal: _InterruptSignal,
    resume: Any,
    checkpoint_id: str = "",
    answered: tuple[str, ...] = (),
    plain_before: tuple[str | None, bool] = (None, False),
) -> dict[str, Any]:
    """Which points a resume addresses, with their data."""
    pending = [p.id for p in signal.points]
    if resume is None:
        return dict.fromkeys(pending)
    # A mapping naming any point address targets points: one mistyped id among them must be
    # reported as unknown, not turn the whole mapping into data for a single point.
    if _keyed(resume):
        unknown = [k for k in resume if k not in pending]
        if unknown:
            # An answer sent again (a double click, a retried request) to a point an earlier
            # resume answered, the run pausing again on another: named as answered, since the
            # person was shown that id, and "unknown" reads as a typo in it.
            again = [k for k in unknown if k in answered]
            unknown = [k for k in unknown if k not in answered]
            said = [f"unknown interrupt point id(s) {unknown}"] if unknown else []
            if again:
                said.append(
                    f"point(s) {again} already answered by an earlier resume of checkpoint "
                    f"{checkpoint_id!r} (an answer sent twice?), which paused again on the "
                    "points still pending"
                )
            raise ValueError(
                f"{'; '.join(said)}; pending points: {pending}"
                f"{_call_ids_named(unknown, pending)}. {_NOTHING_RAN}"
            )
        return dict(resume)
    if len(pending) != 1:
        keys = list(resume) if isinstance(resume, Mapping) else []
        raise ValueError(
            f"{len(pending)} points are pending ({pending}); pass resume data as {{point_id: data}}"
            f"{_call_ids_named(keys, pending)}. {_NOTHING_RAN}"
        )
    before, was_approval = plain_before
    if (
        before is not None
        and (before != pending[0] or was_approval)
        and adk._approval.is_approval_request(signal.points[0].info)
    ):
        # The resume before was given plain data too, for another point, and paused here for an
        # approval: this may be that answer sent again (a double click, a retried request), and
        # taken as this point's it would approve a call nobody was shown (the payment the model
        # asked for next). An answer keyed by this point's id says it is this call's decision.
        # The same id is another call too when that answer was an approval: an approved call
        # asks for no approval again, so this is the next call under a reused id (a server
        # numbering each response's calls ``call_0``). (A question's answer stays plain: a
        # repeat answers a question, it runs no call.)
        where = (
            f"another call, point {pending[0]!r}"
            if before != pending[0]
            else "another call the model asked for under the same point id (its server "
            "numbers each response's calls)"
        )
        raise ValueError(
            f"plain resume data for checkpoint {checkpoint_id!r} is refused: the resume before "
            f"was given plain data for point {before!r} and paused again for the approval of "
            f"{where}, so this may be that answer sent again (a double click, a retried "
            "request) and would decide a call it was not given for; answer the point pending "
            f"now by its id, {{{pending[0]!r}: data}}. {_NOTHING_RAN}"
        )
    return {pending[0]: resume}


def _keyed(resume: Any) -> bool:
    """Whether resume data is keyed by point id (``{point_id: data}``): a mapping naming any
    point address (a string starting with ``agent:``); anything else is plain data."""
    return isinstance(resume, Mapping) and any(
        isinstance(k, str) and k.startswith("agent:") for k in resume
    )


_NOTHING_RAN = "Nothing ran and the checkpoint is kept"


class _OptionsNotGiven(CheckpointError, ValueError):
    """A resume refused, before anything ran, for lacking run options the paused run was given.

    A ``CheckpointError`` as the other refusals of a resume the serving code must fix (a
    ``before_tool`` gate removed since the pause, an agent tree that no longer fits): a service
    that deployed a version forgetting its ``deps`` must not answer its client's resume as a bad
    request (400); the caller's data was fine, and sending it again after the fix resumes. Also a
    ``ValueError``, which it was before, so an ``except ValueError`` written then still catches it.
    Its ``reason`` is ``"missing_input"``.
    """

    reason: _Reason = "missing_input"


_MODULES = sys.modules
_OTEL = "opentelemetry"
"""Imported by whoever sets a global tracer or meter provider: until it is, a runner built
without one has nothing to look at (``Runner._set_since``)."""
_OTEL_TRACE = "opentelemetry.trace"
_OTEL_METRICS = "opentelemetry.metrics._internal"  # where the API keeps ``_METER_PROVIDER``


def _root_context(runner: Runner, run: _RunState) -> RunContext:
    """The root agent's context: its run path and address are made once per agent, not per run."""
    agent = runner.agent
    cached = runner._root_names
    if cached is None or cached[0] is not agent:
        # Who reads ``RunResult.messages`` as their own: a single root agent; none for one with
        # sub-agents, whose next run gives its input to every one of them (``_conversation``).
        reader = "" if getattr(agent, "sub_agents", None) else agent.name
        cached = runner._root_names = (agent, (agent.name,), agent_segment(agent.name), reader)
    run.reader = cached[3]
    return _root(run, cached[1], cached[2], runner.enable_streaming)


async def _check(
    runner: Runner,
    ctx: RunContext,
    checkpoint_id: str | None,
    event: AgentEvent,
    claim: _Claim | None = None,
) -> tuple[AgentEvent, AgentEvent | None]:
    """The runner's rules for an event with an action, error or pause that reaches the top of a
    run (at the root's ``ctx``): the event to pass on (an interrupt once its checkpoint is saved,
    or the error saying why it could not be) and an event to follow it, if any; the run ends
    after either. A transfer nobody handled ends the run with an error. A resume that lost its
    ``claim`` saves nothing: the checkpoint may be another resume's now.

    The events that end the run go to ``on_event`` here, as they go out (a pause with its
    checkpoint id); the caller gave it the others."""
    on_event = runner._on_event
    if event._signal is not None:
        if claim is not None and claim.lost:
            lost = _claim_lost(event.agent_name, event.run_path, claim.checkpoint_id)
            return _final(on_event, _made(ctx, lost)), None
        paused = await runner._pause(ctx, event, event._signal, checkpoint_id)
        if paused is not event:  # the checkpoint could not be saved
            _made(ctx, paused)
        else:
            ctx._run.paused = True
        return _final(on_event, paused), None
    if event.error is not None:
        return _final(on_event, event), None
    action = event.action
    if (
        action is not None
        and action.transfer_to is not None
        and not event._flags & _TRANSFER_HANDLED
    ):
        message = (
            f"transfer failed: agent '{action.transfer_to}' not found when "
            f"transferring from '{event.agent_name}'"
        )
        error = AgentEvent(
            event.agent_name, event.run_path, error=ErrorInfo("TransferError", message)
        )
        return event, _final(on_event, _made(ctx, error))
    return event, None


def _made(ctx: RunContext, event: AgentEvent) -> AgentEvent:
    """An error event the runner makes itself, to end the run of the root agent at ``ctx``: the
    hooks count the root agent as failed with it (its span, ``after_agent``)."""
    hooks = ctx._run.hooks
    if hooks is not None:
        hooks.run_failed(ctx, event)
    return event


def _root_failed(ctx: RunContext, exc: Exception) -> AgentEvent:
    """The error event for an exception that came out of the root agent's run past the driver,
    which turns the agent's own into events: a hook at the root failed (an ``after_agent``
    callback as the agent ended, ``on_event`` on one of its events). The run fails with it."""
    event = AgentEvent(ctx.agent_name, ctx.run_path, error=ErrorInfo.of(exc), exception=exc)
    return _made(ctx, event)


def _final(on_event: Callable[[AgentEvent], None] | None, event: AgentEvent) -> AgentEvent:
    """Give ``on_event`` an event that ends the run. The outcome is settled by then (an error,
    or a pause whose checkpoint is saved), so if the callback raises the event still goes out
    and the exception is logged: there is no event left to report it with."""
    if on_event is not None:
        try:
            on_event(event)
        except Exception as exc:
            logger.warning(
                "on_event callback failed on the event that ends the run: %s", exc, exc_info=exc
            )
    return event


async def _close_root(events: AsyncIterator[AgentEvent], ended: bool) -> None:
    """Close the root agent's events. Once the run's last event is out (``ended``), a failure
    while closing (the ``after_agent`` callback of an agent that paused, an agent's cleanup) has
    no event left to become: it is logged and the run's outcome stands."""
    if not ended:
        await close_events(events)
        return
    try:
        await close_events(events)
    except Exception as exc:
        if is_cancellation(exc):
            raise
        _log_after_end(exc)


async def _finish_root(own: _AgentRun, collected: _Collecting) -> None:
    """``invoke``'s end of the root agent's run (its hooks: ``after_agent``, its span): a failure
    there fails the run, unless the run has ended already (then it is logged)."""
    try:
        await own.finish()
    except Exception as exc:
        if is_cancellation(exc):
            raise
        _drop_first_frame(exc)
        if collected.ended:
            _log_after_end(exc)
        else:
            assert collected.root is not None
            await collected.take(_root_failed(collected.root, exc))


def _log_after_end(exc: BaseException) -> None:
    logger.warning("failure after the run's last event: %s", exc, exc_info=exc)


def _drop_first_frame(exc: BaseException) -> None:
    """Drop the traceback's first frame, the caller's, whose locals will hold the error event
    made of ``exc`` and so ``exc``: the run would end in a reference cycle (see
    ``_driver.NO_EVENT``). The frames where it happened stay."""
    if exc.__traceback__ is not None:
        exc.__traceback__ = exc.__traceback__.tb_next


def _collector(
    runner: Runner | None = None, ctx: RunContext | None = None, checkpoint_id: str | None = None
) -> _Collected:
    """A new ``_Collected``, one per run (see ``context._Entry`` for why it has no ``__init__``)."""
    collected = _Collected()
    collected.runner = runner
    collected.root = ctx
    collected.checkpoint_id = checkpoint_id
    collected.gathered = None  # made with the first event: a run waiting on its model holds none
    collected.last_message = collected.output = collected.interrupt = collected.failure = None
    return collected


def _root_run(runner: Runner, agent: Agent, ctx: RunContext, checkpoint_id: str | None) -> _RootRun:
    """``invoke``'s run of a plain root agent with its collector: ``agent_run`` and
    ``_collector`` in one object (``agent_run``'s fields repeated here rather than a call more
    per run; ``tests/test_fast_constructors.py`` checks that every field is set)."""
    run = _RootRun()
    run.agent = agent
    run.ctx = ctx
    run.name = agent.name
    run.path = ctx.run_path
    run.hooks = ctx._run.hooks
    # The flag first: until an agent has callbacks of its own, this is all an agent start pays.
    if _hooks.agent_callbacks and run.hooks is None and getattr(agent, "_adk_callbacks", None):
        run.hooks = agent_hooks(ctx)
    run.handle = None
    run.error = None
    run.cancelled = False
    run.resumed = False
    run.stream = None
    run.stream_author = ""
    run.runner = runner  # and ``_collector``'s
    run.root = ctx
    run.checkpoint_id = checkpoint_id
    run.gathered = None
    run.last_message = run.output = run.interrupt = run.failure = None
    return run


class _Collecting:
    """What ``invoke`` gathers from a run's events. It never raises while the run goes on (an
    error event ends the collection, and ``result`` raises ``RunError``), so ``invoke`` can drive
    the root agent inline without mistaking its own failure for the agent's.

    The methods only: the fields are slots of ``_Collected`` or, for ``invoke``'s plain root
    agent, of ``_RootRun``, which is that agent's ``_AgentRun`` too."""

    # No slots of its own (so ``_RootRun`` can also be an ``_AgentRun``), and no ``__dict__``.
    # Hidden from mypy, which would otherwise refuse the methods' assignments to the fields.
    if not TYPE_CHECKING:
        __slots__ = ()

    # The runner and the root's context are there for ``take``'s rules (in ``invoke``; a resumed
    # run's events arrive checked). Kept here rather than in an object of their own: one object
    # fewer per run for the cyclic GC to walk while the run waits on its model.
    runner: Runner | None
    root: RunContext | None
    checkpoint_id: str | None
    gathered: list[AgentEvent] | None  # the events, made with the first one
    last_message: Message | None  # for ``RunResult.text``
    output: Any
    interrupt: InterruptInfo | None
    failure: AgentEvent | None  # the error event that ended the run

    def add(self, event: AgentEvent, checked: bool = False) -> bool:
        """Collect an event that needs nothing of the runner (no stream to read, no action, error
        or pause: most events) or one that ``take`` has ``checked``; False, and nothing collected,
        for an event that needs ``take``. (One call for the common case: it is made per event.)"""
        out = event.output
        if not checked:
            if (
                event._signal is not None
                or event.action is not None
                or event.error is not None
                or (out is not None and out.stream is not None)
            ):
                return False
            events = self.gathered
            if events is None:
                self.gathered = [event]
            else:
                events.append(event)
            if out is not None:
                message = out.message
                if message is not None:
                    self.output = self.last_message = message
                else:
                    custom = out.custom
                    # A tool's progress report is never the run's answer (a run paused or cut
                    # off right after one had it as its output): read for custom outputs only.
                    if type(custom) is not ToolProgress:
                        self.output = custom
            return True  # no error, no action: the rest has nothing to note
        events = self.gathered
        if events is None:
            self.gathered = [event]
        else:
            events.append(event)
        if out is not None:
            if out.message is not None:
                self.output = out.message
                self.last_message = out.message
            elif out.stream is None and type(out.custom) is not ToolProgress:  # see above
                self.output = out.custom
        if event.error is not None and self.failure is None:
            self.failure = event
        if event.action is not None and event.action.interrupted is not None:
            self.interrupt = event.action.interrupted
        return True

    async def take(self, event: AgentEvent) -> bool:
        """Collect an event under the runner's rules (``_check``: a pause saves its checkpoint);
        True when the run ends with it."""
        output = event.output
        if output is not None and output.stream is not None:
            await self.take_stream(event, output.stream, output.shown_only)
        if event._signal is None and event.action is None and event.error is None:
            self.add(event, checked=True)
            return False
        assert self.runner is not None and self.root is not None
        event, after = await _check(self.runner, self.root, self.checkpoint_id, event)
        self.add(event, checked=True)
        if after is not None:
            self.add(after, checked=True)
        return event.error is not None or after is not None or event.interrupted is not None

    @property
    def ended(self) -> bool:
        """Whether the run's last event is in: an error, or a pause."""
        return self.failure is not None or self.interrupt is not None

    async def take_stream(self, event: AgentEvent, stream: MessageStream, shown: bool) -> None:
        """The stream an event carries: read to its end as the run's output, or, only shown (no
        output), closed when the event is an exit or a transfer. Either ends the agent that
        yielded it, which alone would read a shown stream (an exit ends the run; a transfer, one
        a flow handles, hands the run on), and ``invoke`` never reads one; left open, the
        agent's driver (a workflow's step runner at the root, a flow's, ``invoke_resume``'s)
        would read it to its end first (``settle``, for ``run``'s reader, who has the event),
        the model's whole reply that no one is shown, or for good from a model still sending."""
        if not shown:
            await self.add_stream(stream)
        else:
            action = event.action
            if action is not None and (action.exit or action.transfer_to is not None):
                await stream.aclose()

    async def add_stream(self, stream: MessageStream) -> None:
        """Read a streamed message to its end (before its event is collected). A stream that
        fails is left to the agent: it reads the same stream, so its error event follows and
        ``invoke`` raises ``RunError`` like for any other failure, not the stream's raw error."""
        try:
            self.output = await stream.collect()
        except Exception:
            return
        self.last_message = self.output

    def result(self, session: Session, run: _RunState | None = None) -> RunResult:
        """The run's result; ``RunError`` if it ended with an error event.

        The events are handed over, not shared: the collector forgets them. On Python 3.12+ a
        frame in an exception's traceback keeps its caller's frame alive (``f_back``), so the
        frame of ``invoke``, which holds this collector, lives as long as the error event's
        exception; were the collector still holding that event, they would form a reference
        cycle, left to the cyclic GC (``tests/test_run_cycles.py``)."""
        error, events = self.failure, self.gathered or []
        self.failure = self.gathered = None
        if run is not None and run.forwarded is not None:
            self.output, self.last_message = _own_output(events, run.forwarded)
        for event in events:  # the run is over: no layer reads them any more (see adk.events)
            event._flags = 0
        if error is not None:
            failed = (
                MaxTurnsExceeded.of_run(error.exception, error, events)
                if isinstance(error.exception, MaxTurnsExceeded)
                else RunError(error, events)
            )
            if run is not None and run.usage is not None:
                failed.usage = run.usage  # what the failed run cost
            try:
                raise failed from error.exception
            finally:  # the error's traceback holds this frame: no cycle through its local
                del failed
        interrupt = self.interrupt
        checkpoint_id = interrupt.checkpoint_id if interrupt is not None else None
        # ``RunResult(events, self.output, ...)`` with its fields set directly: one per run.
        result = _new(RunResult)
        result.events = events
        result.output = self.output
        result.interrupt = interrupt
        result.session = session
        result.checkpoint_id = checkpoint_id
        result._last_message = self.last_message
        result._run = run
        return result


def _own_output(events: list[AgentEvent], shown: list[AgentEvent]) -> tuple[Any, Message | None]:
    """The output and the last message of a run's ``events``, as ``_Collecting.add`` keeps them,
    without the ``shown`` ones an ``AgentTool`` showed from its nested run (``_FORWARDED``):
    those are the inner agent's, not outputs of the agent that yields them, and a run paused
    inside the tool (or whose agent says nothing after it) had the inner agent's shown message
    as its output, where the same run not showing them had its own. Read again only for a run
    one was shown in (``_RunState.forwarded``), so ``add`` tests nothing more per event."""
    skipped = {id(event) for event in shown}  # alive in ``shown``: no id is another's
    output: Any = None
    last: Message | None = None
    for event in events:
        out = event.output
        if out is None or id(event) in skipped:
            continue
        message = out.message
        if message is not None:
            output = last = message
        elif out.stream is not None:
            joined = out.stream._joined  # as ``add_stream`` read it (None: it failed)
            if not out.shown_only and joined is not None:
                output = last = joined
        elif type(out.custom) is not ToolProgress:
            output = out.custom
    return output, last


# The slots of a collector (``_Collecting``'s fields), in ``_Collected`` and in ``_RootRun``.
_COLLECTING = (
    "checkpoint_id",
    "failure",
    "gathered",
    "interrupt",
    "last_message",
    "output",
    "root",
    "runner",
)


class _Collected(_Collecting):
    """A collector of its own: for a fused root agent and a resumed run."""

    __slots__ = _COLLECTING


class _RootRun(_AgentRun, _Collecting):
    """``invoke``'s run of a plain root agent and the run's collector in one object: one object
    fewer per run in flight (both live exactly as long as ``invoke``'s frame)."""

    __slots__ = _COLLECTING


async def _collect(events: AsyncIterator[AgentEvent], box: list[RunContext]) -> RunResult:
    """``invoke_resume``: a resumed run's events collected like ``invoke``'s."""
    collected = _collector()
    try:
        async for event in events:
            output = event.output
            if output is not None and output.stream is not None:
                await collected.take_stream(event, output.stream, output.shown_only)
            collected.add(event, checked=True)  # the root's rules were applied by _drive_root
    finally:
        event = NO_EVENT  # see _driver.NO_EVENT
        await close_events(events)
    if not box:  # the resume failed before it made its run (it raised: not reached)
        return collected.result(Session())
    root = box[0]
    return collected.result(root.session, root._run)


def _waiting(data: bytes) -> bool:
    """Whether the checkpoint ``data`` is one a run still waits on: not finished (a finished one
    is kept for audit, ``keep_checkpoints``, and never resumed again); one this runner cannot
    read counts as waiting. Pure: a store may call it in its own thread (``_PutNewStore``)."""
    try:
        return not decode_checkpoint(data).get("finished")
    except CheckpointError:
        return True


async def _still_waits(store: CheckpointStore, checkpoint_id: str) -> bool:
    """Whether a checkpoint that still waits is under ``checkpoint_id`` (``_waiting``), for the
    look before a named run (``Runner._id_taken``): told by the summary its header carries, as a
    listing reads it, its first bytes alone where the store reads them (``heads``), so a big
    checkpoint kept for audit is neither sent whole nor hashed and parsed on the event loop; one
    without a summary to trust (an older pyadk's, damaged) is read whole and decoded. A body
    damaged under a whole summary header is told by its summary here: the pause's own look
    (``_put_new``) decodes it, and refuses it as waiting."""
    pending = checkpoint._pending
    heads = getattr(store, "heads", None)
    if heads is not None:
        [head] = pending._checked_heads(store, await heads([checkpoint_id], pending._HEAD), 1)
        if head is None:
            return False
        summary = _read_summary(*head)
        if summary is not None:
            return not summary.get("finished")
    data = await store.get(checkpoint_id)
    if not isinstance(data, bytes | bytearray | memoryview):
        return False  # none, or not bytes: the pause's look says what is wrong
    summary = _read_summary(bytes(data[: pending._HEAD]), len(data))
    if summary is not None:
        return not summary.get("finished")
    return _waiting(bytes(data))


def _waits(checkpoint_id: str, doing: str) -> CheckpointError:
    """The refusal of a new run under the id of a checkpoint that still waits: at its start
    (``Runner._id_taken``) or, should one be saved meanwhile, at its pause (``doing`` says
    which)."""
    return CheckpointError(
        f"{doing} {checkpoint_id!r}: a paused run waits there, and this run's pause would "
        "replace it and its pending decision; pause a new run under another id (one per pause, "
        "e.g. f'{conversation}.{turn}'), or resume that run (or delete its checkpoint) first",
        reason="id_taken",
    )


_AT_START = "a new run is refused before it starts: checkpoint"


def _refusal(ctx: RunContext, error: CheckpointError) -> AgentEvent:
    """The error event of a run refused before its root agent ran."""
    return AgentEvent(ctx.agent_name, ctx.run_path, error=ErrorInfo.of(error), exception=error)


def _being_resumed(checkpoint_id: str, doing: str) -> CheckpointError:
    """The refusal of a new run under the id of a checkpoint a resume in this process runs."""
    return CheckpointError(
        f"{doing} {checkpoint_id!r}: it is being resumed; pause a new run under another id (one "
        "per pause) or after that resume has ended",
        reason="id_taken",
    )
