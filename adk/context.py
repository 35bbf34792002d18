"""Run context: run path, address, session values, history lanes and the resume plan.

One ``_RunState`` exists per run (and per nested ``AgentTool`` run); each agent gets its own cheap
``RunContext`` pointing at it. Nothing per-run lives on the ``Runner``, so a runner can drive any
number of runs at once.
"""

from __future__ import annotations

import itertools
import os
import weakref
from collections.abc import (
    Generator,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ._doing import doing, timed
from ._ported_names import install as _install_ported_names
from ._run_error import MaxTurnsExceeded
from .events import AgentAction, AgentEvent
from .interrupts import (
    _SEGMENTS,
    Address,
    ResumeContext,
    _InterruptSignal,
    _ResumePlan,
    agent_segment,
)
from .messages import Message, Usage
from .models import _call
from .models.base import model_name_of
from .streams import MessageStream

if TYPE_CHECKING:
    from .models.base import ChatModel, ModelOptions
    from .tools.base import Tool, ToolSpec

__all__ = ["HistoryEntry", "RunContext", "Session"]

_new = object.__new__

# What ``RunContext.options`` reads in a run given no options: one shared read-only empty mapping.
_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})


class Session:
    """Key-value store shared by every agent of a run (and by ``AgentTool`` inner runs).

    It reads like a mapping (``get``, ``[]``, ``in``, ``len``, ``keys``, ``items``, so
    ``dict(session)`` copies it), but ``values`` is the underlying dict, not a method.
    """

    __slots__ = ("values",)

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        self.values: dict[str, Any] = dict(values) if values else {}

    def get(self, key: str, default: Any = None) -> Any:
        """The value under ``key``, or ``default`` when it is not set."""
        return self.values.get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.values[key] = value

    def __delitem__(self, key: str) -> None:
        del self.values[key]

    def __contains__(self, key: object) -> bool:
        return key in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)

    def keys(self) -> KeysView[str]:
        """A live view of the keys: later changes to the session show through."""
        return self.values.keys()

    def items(self) -> ItemsView[str, Any]:
        """A live view of the ``(key, value)`` pairs: later changes show through."""
        return self.values.items()

    def update(self, values: Mapping[str, Any]) -> None:
        """Set every key of ``values``, replacing existing ones; every agent of the run sees the
        change at once."""
        self.values.update(values)

    def __repr__(self) -> str:
        return f"Session({self.values!r})"


def _session(values: Mapping[str, Any] | None) -> Session:
    """``Session(values)``, made for every run that is not given one: ``__init__``'s frame costs
    more than the rest of it."""
    session = _new(Session)
    session.values = dict(values) if values else {}
    return session


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One message of the history as a rewriter (and ``RunContext.history_entries``) sees it.

    Defined here rather than in ``adk.history`` (which re-exports it) so the context can make
    them: ``adk.history`` imports this module."""

    agent_name: str
    message: Message
    is_user_input: bool = False


class _Entry:
    """One recorded event in the history: who said what, and when (a run-wide sequence number).

    Made blank and filled in (``new_entry``): one is made for every message recorded, and calling
    a class that has no ``__init__`` is the cheapest way to make an object (about half of what an
    ``__init__`` costs, and less than ``object.__new__``)."""

    __slots__ = ("_as_context", "agent_name", "message", "run_path", "seq")

    agent_name: str
    run_path: tuple[str, ...]
    message: Message
    seq: int
    _as_context: Message | None  # cached "For context: ..." rewrite


def new_entry(agent_name: str, run_path: tuple[str, ...], message: Message, seq: int) -> _Entry:
    """A history entry (``_AgentRun.observe`` makes the entries of events' messages inline)."""
    entry = _Entry()
    entry.agent_name = agent_name
    entry.run_path = run_path
    entry.message = message
    entry.seq = seq
    entry._as_context = None
    return entry


class _Lane:
    """A branch of the event log. The root lane has no parent; a parallel branch's lane sees its
    parent's first ``base`` entries plus its own. A branch resumed from a checkpoint sees
    ``inherited`` instead: the entries it saw before the pause (the history is saved flat, so its
    parent's view then also holds the sibling branches' entries, which it must not see).

    ``root`` is what an agent's input built from the lane starts with: the run's root input,
    unless a parent agent gave the lane an input of its own (``PlanExecute``'s step prompt, so a
    workflow in a role reads the step as a plain agent there does)."""

    __slots__ = ("base", "entries", "inherited", "parent", "root")

    parent: _Lane | None
    entries: list[_Entry]
    inherited: list[_Entry] | None
    base: int
    root: list[Message]

    def snapshot(self) -> list[_Entry]:
        if self.parent is None:
            return self.entries
        if self.inherited is not None:
            return self.inherited + self.entries
        return self.parent.snapshot()[: self.base] + self.entries

    def merge(self, lanes: list[_Lane]) -> None:
        """Fold finished branch lanes back in, in the order their events happened."""
        merged = [entry for lane in lanes for entry in lane.entries]
        merged.sort(key=lambda e: e.seq)
        self.entries.extend(merged)


def new_lane(
    parent: _Lane, inherited: list[_Entry] | None = None, root: list[Message] | None = None
) -> _Lane:
    """A lane below ``parent``: a parallel branch's, or with ``root`` and ``inherited`` one that
    starts over with an input of its own. (Lanes and run states are made for every run: see
    ``_Entry`` for why their classes have no ``__init__``.)"""
    lane = _Lane()
    lane.parent = parent
    lane.entries = []
    lane.inherited = inherited
    lane.base = len(parent.snapshot()) if inherited is None else 0
    lane.root = parent.root if root is None else root
    return lane


class _RunState(_Lane):
    """Everything one run shares between its agents (made by ``new_run``).

    It is also the run's root lane (``history``): the two are made together, one per run, and
    live as long as each other, so one object serves as both. A run in flight then holds one
    GC-tracked object fewer for the cyclic collector to walk (issue #8's concurrent runs). The
    run's root input is that lane's ``root``: one slot, not a second one beside it that would
    have to be kept the same (the checkpoint saves it once, as ``root_input``)."""

    __slots__ = (
        "_run_id",
        "_session",
        "abandoned",
        "counted",
        "designated",
        "forwarded",
        "hooks",
        "keeps_shown",
        "nested",
        "options",
        "outer_path",
        "paused",
        "plan",
        "reader",
        "resources",
        "seq",
        "totals",
        "turns",
        "unyielded",
        "usage",
    )

    # The run's session: ``None`` for a run given none until first read (``session``), so that a
    # run waiting on its model holds one GC-tracked object fewer (most runs never read theirs).
    _session: Session | None
    plan: _ResumePlan | None
    nested: bool
    # An AgentTool's nested run: the run path, in the enclosing runs, of the agent whose tool call
    # it is (the outer path its forwarded events carry before their own); ``()`` for a runner's
    # run. Its agents' own paths stay relative to the nested run (history, callbacks, options).
    outer_path: tuple[str, ...]
    # Its reader stopped reading (closed the runner's generator) before the run's last event: the
    # agents closed from then on were cut off, not finished (``Runner._drive_plain``, tracing).
    abandoned: bool
    # Its run ended with a pause whose checkpoint was saved: the calls left without results
    # wait for the resume, which answers them (``runner._conversation``).
    paused: bool
    # The events an ``AgentTool`` showed from its nested run in this run (``_FORWARDED``
    # copies), None until one is: a collected run's output is then found without them
    # (``runner._own_output``), so a run that shows none pays no test per event for them. The
    # copies themselves, not their flags, which the drivers clear as the next event comes (a
    # resumed run's collector reads them after), and not their ids, which a copy dropped by
    # some layer could pass on to a later event. Held until the run ends, as a collected run's
    # events are anyway; kept only where ``keeps_shown`` says a collector will read them.
    forwarded: list[AgentEvent] | None
    # Whether a collector (``invoke``, ``invoke_resume``) reads this run's ``forwarded``. Not
    # the run of ``Runner.run``/``resume``, whose reader has each event and keeps what it wants,
    # nor an ``AgentTool``'s nested run: there the copies were held for nothing until the run
    # ended, each shown output (a forwarded stream with all its chunks) once per enclosing
    # level, so a long streamed run showing a sub-agent's replies grew by every one of them.
    keeps_shown: bool
    hooks: Any
    resources: Any
    _run_id: str | None
    seq: int  # the order of recorded messages across lanes (an int: no object per run)
    # The run's options (``Runner.run(options=...)``), read-only, and the agents designated their
    # own (``agent_options=``): agent name -> the run-wide options with the agent's merged over
    # them. ``None`` when no agent is designated, so an agent start tests one attribute.
    options: Mapping[str, Any]
    designated: dict[str, Mapping[str, Any]] | None
    # The token counts its model calls reported, summed (``count_usage``; ``RunResult.usage``):
    # ``None`` until one reports any. ``totals`` is the run they are summed in when it is not
    # this one (``None``: a runner's run, not a reference to itself, which would make every run
    # state a reference cycle): an ``AgentTool``'s nested run sums into the enclosing runner's
    # run, whose total then holds the nested calls too (they appear in none of its events).
    usage: Usage | None
    totals: _RunState | None
    # The replies counted by ``count_usage`` (a call made outside the events: the actions' chat
    # rounds, ``RunContext.count_usage``), by id, so that recording one of them as an event's
    # message does not count it again; ``None`` until one is (most runs count only as they
    # record). Weak: a reply is not kept alive for this.
    counted: weakref.WeakValueDictionary[int, Message] | None
    # The run's ``max_turns`` and the model calls it has made (``_Turns``), shared with its
    # ``AgentTool`` nested runs; ``None`` without a limit, the one test a model call then pays.
    turns: _Turns | None
    # Whose recorded messages ``RunResult.messages`` gives as they are (the runner's root agent's,
    # when it is a single agent); "" (none: every one as ``For context:``) by default.
    reader: str
    # The addresses of the agents that made a pause's event with ``ctx.interrupt`` in this run:
    # one of them whose events end without that pause (the agent did not yield it) is failed by
    # its driver (``_driver.unyielded_pause``). ``None`` until one is made, so an agent's end
    # tests one attribute; kept after the pause is yielded, as a yielded pause ends the agent.
    unyielded: set[str] | None

    def options_for(self, agent_name: str) -> Mapping[str, Any]:
        """The options that apply to the agent named ``agent_name`` in this run."""
        designated = self.designated
        if designated is None:
            return self.options
        return designated.get(agent_name, self.options)

    @property
    def history(self) -> _Lane:
        """The run's root lane: the run state itself (see the class docstring)."""
        return self

    @property
    def session(self) -> Session:
        """The run's session, made empty on first use if the run was given none."""
        session = self._session
        if session is None:  # ``_session(None)``, inlined
            session = self._session = _new(Session)
            session.values = {}
        return session

    @property
    def run_id(self) -> str:
        """The run's id, made when first asked for (by tracing or a checkpoint): most runs never
        need one."""
        run_id = self._run_id
        if run_id is None:
            run_id = self._run_id = _new_run_id()
        return run_id

    def next_seq(self) -> int:
        """The next message's place in the run's order (branches record in parallel)."""
        seq = self.seq
        self.seq = seq + 1
        return seq


def new_run(
    root_input: list[Message],
    session: Session | None,
    run_id: str | None = None,
    plan: _ResumePlan | None = None,
    hooks: Any = None,
    resources: Any = None,
    nested: bool = False,
) -> _RunState:
    """A run's state, with an empty root lane; without a ``session``, an empty one is made when
    first read."""
    run = _RunState()
    run.parent = run.inherited = None  # the root lane's fields (``_RunState.history``)
    run.entries = []
    run.base = 0
    run.root = root_input
    run._session = session
    run.plan = plan
    run.nested = nested
    run.outer_path = ()
    run.abandoned = False
    run.paused = False
    run.forwarded = None
    run.keeps_shown = False
    run.hooks = hooks
    run.resources = resources
    run._run_id = run_id
    run.seq = 0
    run.options = _NO_OPTIONS
    run.designated = None
    run.usage = None
    run.totals = None
    run.counted = None
    run.turns = None
    run.reader = ""
    run.unyielded = None
    return run


class _Turns:
    """A run's ``max_turns``: the limit and the model calls made so far, every agent's (nested
    runs share their enclosing run's), those before a pause included (a checkpoint saves both)."""

    __slots__ = ("limit", "used")

    def __init__(self, limit: int, used: int = 0) -> None:
        self.limit = limit
        self.used = used

    def take(self, ctx: RunContext) -> None:
        """Count one model call of the agent of ``ctx``, or raise ``MaxTurnsExceeded`` if the
        run has made as many as it may (before the call: nothing is sent)."""
        used = self.used
        if used >= self.limit:
            raise MaxTurnsExceeded.at(self.limit, ctx)
        self.used = used + 1


async def generate_counted(
    ctx: RunContext,
    model: ChatModel,
    messages: list[Message],
    specs: Sequence[ToolSpec],
    options: ModelOptions | None,
) -> Message:
    """The one path of a model call made for an agent other than a ``ReActAgent`` (which merges
    its options and counts its replies as it records them): ``RunContext.generate``, the
    built-in chat action of ``adk.actions``, an MCP server's sampling request. The call through
    the run's hooks (``_call.generate``), the reply's usage counted in the run's total at once
    (``count_usage``). Its arguments are checked already (``_call.request_of`` for a user's
    call), and ``options`` have the run's merged over them (``run_model_options``), by the
    caller: the chat action frees a forced ``tool_choice`` after that merge."""
    # A record's run under a timeout: its error names a call cut off (``adk._doing``).
    running = doing.get() if timed else None
    if running is None:
        reply = await _call.generate(ctx, model, messages, specs, options)
    else:
        mark = running.start("model {:q} (agent {:q})", model_name_of(model), ctx.agent_name)
        try:
            reply = await _call.generate(ctx, model, messages, specs, options)
        finally:
            running.end(mark)
    count_usage(ctx, reply)
    return reply


def stream_counted(
    ctx: RunContext,
    model: ChatModel,
    messages: list[Message],
    specs: Sequence[ToolSpec],
    options: ModelOptions | None,
) -> MessageStream:
    """``generate_counted``, streamed: counted against ``max_turns`` now, the reply's usage once
    the stream has ended whole (``_CountedStream``)."""
    stream = _CountedStream(_call.chunks(ctx, model, messages, specs, options))
    stream._ctx = ctx
    return stream


def run_model_options(ctx: RunContext, options: ModelOptions | None) -> ModelOptions | None:
    """``options`` with the run option ``"model_options"`` (the agent's, designated or run-wide)
    merged over them, as a ``ReActAgent`` merges it over its own: a run given per-request
    settings (a temperature, a provider's ``extra``) gets them on every model call, not on a
    ``ReActAgent``'s alone. A ``response_format`` in ``options`` stays: the caller reads the
    reply by it. One identity test for a run given no options."""
    given = ctx.options
    if given is _NO_OPTIONS:
        return options
    found = given.get("model_options")
    if found is None:
        return options
    return _call.with_run_options(ctx.agent_name, options, True, found)


def count_usage(ctx: RunContext, reply: Message) -> None:
    """Add the usage of a model reply that is not (yet) an event's message to its run's total,
    once: recorded later as an event's message, it is not counted again (``count_recorded``)."""
    usage = reply.usage
    if usage is not None and note_counted(ctx, reply):
        run = ctx._run
        _add_usage(run if run.totals is None else run.totals, usage)


def note_counted(ctx: RunContext, reply: Message) -> bool:
    """Note ``reply`` as counted in its run's total, so that recording it as an event's message
    does not count it (again); False if it was noted already. Alone (without ``count_usage``)
    for a reply whose usage the total already holds from before a pause: the actions' chat
    replies restored on resume, whose count the checkpoint's usage kept but not which replies
    it covered."""
    run = ctx._run
    if run.totals is not None:
        run = run.totals
    counted = run.counted
    if counted is None:
        counted = run.counted = weakref.WeakValueDictionary()
    elif counted.get(id(reply)) is reply:
        return False
    counted[id(reply)] = reply
    return True


def note_restored(ctx: RunContext, found: object) -> None:
    """Note as counted every model reply (a message with a ``usage``) in ``found``, the state a
    resumed agent saved when it paused (``ctx.interrupt(info, state)``), in the lists, tuples,
    dicts and pydantic models it holds. A reply a custom agent got through ``ctx.generate`` and
    kept in its state to emit after the resume (a draft a person approves) was counted when it
    came, and the checkpoint's usage holds it; restored, it is another object than the one the
    weak counted map knows, and emitting it would count it again. Only on resume, when the run
    has a usage to protect, over what the pause saved (JSON, so no cycles)."""
    if isinstance(found, Message):
        if found.usage is not None:
            note_counted(ctx, found)
    elif isinstance(found, BaseModel):
        for value in found.__dict__.values():
            note_restored(ctx, value)
    elif isinstance(found, (list, tuple)):
        for value in found:
            note_restored(ctx, value)
    elif isinstance(found, dict):
        for value in found.values():
            note_restored(ctx, value)


def count_recorded(run: _RunState, message: Message, usage: Usage) -> None:
    """Count the ``usage`` of ``message``, an event's message being recorded (called only when it
    has one): a reply a custom agent emits counts as a ``ReActAgent``'s does, unless
    ``count_usage`` counted it already."""
    if run.totals is not None:
        run = run.totals
    counted = run.counted
    if counted is None or counted.get(id(message)) is not message:
        _add_usage(run, usage)


def _add_usage(run: _RunState, usage: Usage) -> None:
    total = run.usage
    run.usage = usage if total is None else total + usage


def run_options(options: object, agent_options: object) -> tuple[Mapping[str, Any], Any]:
    """``(options, designated)`` for a ``_RunState`` from what ``Runner.run`` was given, checked
    and copied (a caller changing its dict afterwards does not change the run). Called only when
    either is given: a run without options does none of this."""
    if options is None:
        base: dict[str, Any] = {}
    elif isinstance(options, Mapping):
        base = _option_dict(options, "options")
    else:
        raise TypeError(
            f"options must be a mapping of option name to value, got {type(options).__name__}"
        )
    designated: dict[str, Mapping[str, Any]] | None = None
    if agent_options is not None:
        if not isinstance(agent_options, Mapping):
            raise TypeError(
                "agent_options must be a mapping of agent name to that agent's options, got "
                f"{type(agent_options).__name__}"
            )
        designated = {}
        for name, own in agent_options.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f"agent_options: keys must be agent names (str), got {name!r}")
            if not isinstance(own, Mapping):
                raise TypeError(
                    f"agent_options[{name!r}] must be a mapping of option name to value, got "
                    f"{type(own).__name__}"
                )
            designated[name] = MappingProxyType({**base, **_option_dict(own, name)})
    return (MappingProxyType(base) if base else _NO_OPTIONS), designated or None


def _option_dict(options: Mapping[Any, Any], where: str) -> dict[str, Any]:
    values = dict(options)
    for key in values:
        if not isinstance(key, str):
            raise TypeError(f"{where}: option names must be str, got {key!r}")
    return values


# Run ids: a random per-process prefix and a counter; unique across processes and far cheaper
# than a uuid4 per run.
_RUN_PREFIX = os.urandom(6).hex()
_run_numbers = itertools.count(1)


def _new_run_id() -> str:
    return f"{_RUN_PREFIX}-{next(_run_numbers)}"


class RunContext:
    """What an agent knows about the run it is part of. Passed explicitly to ``run``."""

    __slots__ = (
        "_lane",
        "_loop_depth",
        "_run",
        "_trace",
        "address",
        "enable_streaming",
        "options",
        "run_path",
    )

    def __init__(
        self,
        run: _RunState,
        run_path: tuple[str, ...],
        address: Address,
        lane: _Lane,
        *,
        enable_streaming: bool = False,
        options: Mapping[str, Any] | None = None,
        loop_depth: int = 0,
        trace: Any = None,
    ) -> None:
        self._run = run
        self._trace = trace  # the tracing layer's parent span for whatever runs under this context
        self.run_path = run_path
        self.address = address
        self._lane = lane
        self.enable_streaming = enable_streaming
        # What applies to this agent: read-only, so one agent cannot change another's.
        self.options: Mapping[str, Any] = (
            _NO_OPTIONS
            if options is None
            else options
            if isinstance(options, MappingProxyType)
            else MappingProxyType(dict(options))
        )
        self._loop_depth = loop_depth

    # -- public view ---------------------------------------------------------------------------
    @property
    def session(self) -> Session:
        """The run's session, shared by every agent of the run and by ``AgentTool`` nested runs."""
        return self._run.session

    @property
    def run_id(self) -> str:
        """The run's id: ``run_id=`` given to ``Runner.run``/``invoke`` (a conversation id), else
        one made for the run. It stays the same across a pause and its resumes, is shared by
        ``AgentTool`` nested runs, and is what tracing reports as ``gen_ai.conversation.id``."""
        return self._run.run_id

    @property
    def usage(self) -> Usage | None:
        """What the run's model calls reported so far, summed: ``RunResult.usage`` while the run
        goes on (None until a call reports any). An ``AgentTool``'s nested run reads the enclosing
        run's total, which its calls count in, so a callback can hold a whole run, delegates
        included, to a token budget (pydantic-ai's ``UsageLimits``) before each model call."""
        run = self._run
        totals = run.totals
        return (run if totals is None else totals).usage

    @property
    def agent_name(self) -> str:
        """The name of the agent this context belongs to: the last element of ``run_path``."""
        return self.run_path[-1] if self.run_path else ""

    @property
    def resume(self) -> ResumeContext | None:
        """Set when this run resumes and this component (or something below it) was interrupted."""
        plan = self._run.plan
        return plan.resume_for(self.address) if plan is not None else None

    def interrupt(self, info: Any = None, state: Any = None) -> AgentEvent:
        """An event that pauses the run at this agent; yield it. ``state`` returns on resume.

        Only yielding it pauses: the agent's address is noted so that its driver fails an agent
        whose events end without it (called without ``yield``, or awaited), which would
        otherwise end as if it had never asked (``_driver.unyielded_pause``)."""
        signal = _InterruptSignal.single(self.address, info, state)
        run = self._run
        if run.unyielded is None:
            run.unyielded = set()
        run.unyielded.add(self.address)
        return _interrupt_event(signal)

    @property
    def history(self) -> list[Message]:
        """The messages recorded so far in this agent's view of the run (raw, not rewritten)."""
        return [entry.message for entry in self._lane.snapshot()]

    @property
    def history_entries(self) -> list[HistoryEntry]:
        """This agent's view of the run with who said what: the input it starts from (the run's,
        ``is_user_input``, no author) then each recorded message with its agent's name, as a
        ``history_rewriter`` gets them. For a check that depends on the author (a termination
        condition on the critic's words only, a speaker selector), which ``history`` cannot tell.
        Made on each read."""
        lane = self._lane
        entries = [HistoryEntry("", message, True) for message in lane.root]
        entries.extend(HistoryEntry(e.agent_name, e.message) for e in lane.snapshot())
        return entries

    async def generate(
        self,
        model: ChatModel | str,
        messages: str | Message | Iterable[Message],
        *,
        tools: Iterable[ToolSpec | Tool] = (),
        options: ModelOptions | None = None,
    ) -> Message:
        """Call ``model`` as this run's agents call theirs, and return its reply.

        For an agent of your own: ``await ctx.generate(self.model, prompt)`` in place of
        ``await self.model.generate(prompt)``. The call goes through the framework's own path,
        the one a ``ReActAgent``'s calls take: the run's ``before_model``/``after_model``
        callbacks (a ``before_model`` answer replaces the call), a ``chat {model}`` span under
        this agent's span, counted against the run's ``max_turns`` (refused past it with
        ``MaxTurnsExceeded``, nothing sent), and the reply's usage added to the run's total
        (``RunResult.usage``, ``ctx.usage``) now, whether or not the agent emits the reply (an
        event of the reply itself is not counted again).

        ``model`` is a ``ChatModel`` or the name of a model resource (``Runner(resources=)``);
        ``messages`` a ``str`` (one user message), a ``Message`` or messages; ``tools``
        ``ToolSpec``s or ``Tool``s to offer (the agent runs the calls the reply asks for);
        ``options`` a ``ModelOptions``, with the run option ``"model_options"`` merged over it as
        over a ``ReActAgent``'s own (a ``response_format`` given here stays). The reply is an
        assistant ``Message``."""
        chat, listed, specs = _call.request_of(self, model, messages, tools, options)
        return await generate_counted(self, chat, listed, specs, run_model_options(self, options))

    def stream(
        self,
        model: ChatModel | str,
        messages: str | Message | Iterable[Message],
        *,
        tools: Iterable[ToolSpec | Tool] = (),
        options: ModelOptions | None = None,
    ) -> MessageStream:
        """``generate``, streamed: the reply as a ``MessageStream``, for
        ``yield AgentEvent.streaming(stream)`` when the run streams (``ctx.enable_streaming``),
        then ``await stream.collect()`` for the joined reply. The call is counted against
        ``max_turns`` (or refused) here, made when the stream is first read, inside a ``chat``
        span that ends with it; the reply's usage counts once the stream has ended, emitted or
        not. With ``after_model`` callbacks the chunks are held until the model has finished,
        as for a ``ReActAgent`` (``adk.callbacks``)."""
        chat, listed, specs = _call.request_of(self, model, messages, tools, options)
        return stream_counted(self, chat, listed, specs, run_model_options(self, options))

    # -- framework internals -------------------------------------------------------------------
    def _model_named(self, name: str) -> ChatModel:
        """The model resource ``name`` that ``generate``/``stream`` call by name: the run's
        (``Runner(resources=)``). An ``ActionAgent`` given resources of its own runs its actions
        under a context that looks in the agent's first (``adk.actions._run``), as its chat does."""
        return _call.resource_model(self, name, self.agent_name)

    def _child(self, name: str, run_path: tuple[str, ...] | None = None) -> RunContext:
        """Context for a child agent: its address nests under ours; its run path is given or ours
        plus its name."""
        ctx = _new(RunContext)  # made for every agent start: one call, no keyword handling
        run = ctx._run = self._run
        ctx.run_path = run_path if run_path is not None else (*self.run_path, name)
        try:  # ``agent_segment(name)``, read from its cache: a lookup costs far less than a call
            segment = _SEGMENTS[name]
        except KeyError:
            segment = agent_segment(name)
        ctx.address = f"{self.address}/{segment}" if self.address else segment
        ctx._lane = self._lane
        ctx.enable_streaming = self.enable_streaming
        # Ours unless agents are designated options (then ours may be our own designated ones).
        designated = run.designated
        ctx.options = self.options if designated is None else designated.get(name, run.options)
        ctx._loop_depth = self._loop_depth
        ctx._trace = self._trace
        return ctx

    def _fork(self, *, lane: _Lane | None = None, loop_depth: int | None = None) -> RunContext:
        """The same place in the run with another history lane or loop depth."""
        return self._copy(
            self.run_path,
            self.address,
            lane if lane is not None else self._lane,
            self._loop_depth if loop_depth is None else loop_depth,
        )

    def _copy(
        self, run_path: tuple[str, ...], address: Address, lane: _Lane, loop_depth: int
    ) -> RunContext:
        ctx = _new(RunContext)
        ctx._run = self._run
        ctx.run_path = run_path
        ctx.address = address
        ctx._lane = lane
        ctx.enable_streaming = self.enable_streaming
        ctx.options = self.options
        ctx._loop_depth = loop_depth
        ctx._trace = self._trace
        return ctx

    def _resume_slot(self, slot: str) -> ResumeContext | None:
        plan = self._run.plan
        return plan.resume_for(self.address, slot) if plan is not None else None

    def _record(self, agent_name: str, message: Message) -> None:
        # (``_AgentRun.observe`` has a copy of this inline, for the messages of events.)
        run = self._run
        seq = run.seq
        run.seq = seq + 1
        self._lane.entries.append(new_entry(agent_name, self.run_path, message, seq))
        usage = message.usage
        if usage is not None:
            count_recorded(run, message, usage)

    def _withdraw(self, message: Message) -> None:
        """Take ``message`` out of the history this agent recorded it in: a reply that turned
        out not to be the agent's answer (``ReActAgent`` rejects one off its ``output_schema``
        and asks again). Its event went out as it came, before it could be checked; left in the
        history, every later agent and the next run read the rejected answer beside the
        corrected one, unable to tell them apart. Taken from each lane above too, since one may
        already hold it (a ``PlanExecute`` step passes its lane's entries up as they come). Only
        on that rare path: a scan from the end of each lane."""
        lane: _Lane | None = self._lane
        while lane is not None:
            entries = lane.entries
            for index in range(len(entries) - 1, -1, -1):
                if entries[index].message is message:
                    del entries[index]
                    break
            lane = lane.parent


_install_ported_names(RunContext)  # where a Google ADK name went (adk._ported_names)


class _CountedStream(MessageStream):
    """The stream of a call made through ``RunContext.stream``: its reply counts in the run's
    usage as the stream ends, as ``RunContext.generate`` counts a reply, so a reply the agent
    reads without emitting it counts too. Counted as the joined message the stream's readers
    and ``collect`` get, so that the run recording it as an event's message adds nothing
    (``count_recorded``). A stream that failed or was cut off reported no whole reply and
    counts nothing, as its ``chat`` span reports no usage."""

    __slots__ = ("_ctx",)

    _ctx: RunContext

    async def _fetch_one(self) -> None:
        try:
            await MessageStream._fetch_one(self)
            if self._closed and self._error is None and not self._cut:  # it ended, whole
                count_usage(self._ctx, self._final_message())
        finally:
            # A kept error's traceback reaches this frame (see ``MessageStream._fetch_one``): it
            # must not keep the stream, which keeps the error.
            del self

    def __await__(self) -> Generator[Any, None, Message]:
        # ``await ctx.stream(...)`` is an easy slip beside ``await ctx.generate(...)``; Python's
        # own refusal names this private class and not the fix.
        raise TypeError(
            "ctx.stream(...) returns the reply as a MessageStream, which is not awaited: yield "
            "AgentEvent.streaming(stream) to show it, read it (async for chunk in stream), or "
            "join it (await stream.collect()); await ctx.generate(...) for the whole reply at once"
        )


def _root(
    run: _RunState, run_path: tuple[str, ...], address: Address, enable_streaming: bool
) -> RunContext:
    """``RunContext(run, run_path, address, run.history, enable_streaming=enable_streaming)``,
    the context of a run's root agent, made for every run: one call, no keyword handling."""
    ctx = _new(RunContext)
    ctx._run = run
    ctx._trace = None
    ctx.run_path = run_path
    ctx.address = address
    ctx._lane = run  # its root lane (``_RunState.history``)
    ctx.enable_streaming = enable_streaming
    designated = run.designated
    ctx.options = run.options if designated is None else designated.get(run_path[-1], run.options)
    ctx._loop_depth = 0
    return ctx


def _interrupt_event(signal: _InterruptSignal) -> AgentEvent:
    return AgentEvent(action=AgentAction(interrupted=signal.info()), _signal=signal)
