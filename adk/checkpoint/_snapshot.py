"""What a checkpoint holds and how a run is rebuilt from it.

A checkpoint is the run's root input, session values, recorded history, the pending points and the
saved state of every component on their paths (address -> slot -> state). The same history encoding
serves an ``AgentTool``'s nested run, whose history travels inside the tool call's state.
"""

from __future__ import annotations

import time
from typing import Any

from ..context import _Entry, _Lane, _RunState, new_entry
from ..interrupts import _InterruptSignal, _ResumePlan
from ..messages import Message, Usage
from ._points import _MALFORMED, _expect, _malformed, _read_points
from .codec import (
    _RUN_PATHS,
    CheckpointError,
    _json_value_at,
    _plain,
    _rebuild,
    _state_where,
    _Unstorable,
    from_json_value,
    to_json_value,
)

__all__ = [
    "Snapshot",
    "dump_history",
    "load_history",
    "parse_body",
    "read_answered",
    "read_answered_plain",
    "snapshot_body",
]


def dump_history(lane: _Lane) -> list[dict[str, Any]]:
    """The lane's entries as plain data (messages stay ``Message`` objects). ``seq`` is kept: a
    resumed parallel branch tells what it saw before its fork by it."""
    return [
        {"agent": e.agent_name, "run_path": list(e.run_path), "message": e.message, "seq": e.seq}
        for e in lane.snapshot()
    ]


_LONG_RUN_PATH = 32
"""A history whose longest run path is longer than this many names is written with its run
paths in a table (``_history_body``, format version 2); up to it, each entry holds its
run path as a list, as format version 1 has it and every earlier pyadk reads."""

_PREFIX_TRIES = 8
"""How many of a new run path's shorter prefixes the table writer looks up for one already in
the table to extend (after the path written last), before writing it whole."""


def _history_body(lane: _Lane) -> tuple[list[dict[str, Any]], list[list[Any]] | None]:
    """The lane's history as a checkpoint body holds it, and its table of run paths: None (each
    entry holding its run path, ``_history_json``) unless a run path is longer than
    ``_LONG_RUN_PATH`` names. Each round of a ``LoopAgent``, an execute/replan round of a
    ``PlanExecute``, each transfer of a ``Supervisor`` adds names to the run path (DESIGN:
    Eino's run path, the chain of agents that ran), so a history of N such entries held N run
    paths of up to N names each: O(N^2) of the body (a ``PlanExecute`` of 800 steps: 1.9
    million names, 22 MB of its 23 MB; performance.md). The table holds each distinct run path
    once, as the path it extends and the names it adds (``[parent index or -1, name, ...]``),
    and an entry holds its path's index: O(N). An older pyadk does not read it: such a body is
    written as format version 2 (``codec.encode_checkpoint``), which an older pyadk refuses as
    a newer one's (``"other_version"``), the checkpoint kept, rather than as a malformed one."""
    entries = lane.snapshot()
    long = _LONG_RUN_PATH
    if any(type(e.run_path) is tuple and len(e.run_path) > long for e in entries):
        compact = _compact_history_json(entries)
        if compact is not None:
            return compact
    return _history_json(lane, entries), None


def _compact_history_json(
    entries: list[_Entry],
) -> tuple[list[dict[str, Any]], list[list[Any]]] | None:
    """The entries with their run paths as indices into a table of paths (``_history_body``);
    None when an entry is not of the shape the framework records (a name that is not a
    ``str``), or a value cannot be stored: the listed form's writer writes, or reports, it.

    Entries of one agent's run share its context's path tuple (found by identity, ``known``);
    a new path is looked up by value, then stored as an extension of the path written last
    when that is a prefix of it (a loop's or a plan's next round), else of the longest of its
    ``_PREFIX_TRIES`` shorter prefixes in the table, else whole. Each distinct path is hashed
    or compared once, in C, never walked name by name in Python."""
    out: list[dict[str, Any]] = []
    table: list[list[Any]] = []
    known: dict[int, int] = {}  # id(path) -> index (the tuples are held by ``entries``)
    by_value: dict[tuple[str, ...], int] = {}
    last: tuple[str, ...] = ()
    last_index = -1
    try:
        for entry in entries:
            agent, path, seq = entry.agent_name, entry.run_path, entry.seq
            if type(agent) is not str or type(path) is not tuple or type(seq) is not int:
                return None
            index = known.get(id(path))
            if index is None:
                index = by_value.get(path)
                if index is None:
                    "".join(path)  # a TypeError unless every name is a str
                    index = len(table)
                    parent, start = -1, 0
                    if last_index >= 0 and len(last) < len(path) and path[: len(last)] == last:
                        parent, start = last_index, len(last)
                    else:
                        for cut in range(len(path) - 1, max(len(path) - 1 - _PREFIX_TRIES, 0), -1):
                            found = by_value.get(path[:cut])
                            if found is not None:
                                parent, start = found, cut
                                break
                    table.append([parent, *path[start:]])
                    by_value[path] = index
                    last, last_index = path, index
                known[id(path)] = index
            message = _plain(entry.message, 2)  # where the generic walk writes it
            out.append({"agent": agent, "run_path": index, "message": message, "seq": seq})
    except (_Unstorable, TypeError):
        return None
    return out, table


def _history_json(lane: _Lane, entries: list[_Entry] | None = None) -> list[dict[str, Any]]:
    """``to_json_value(dump_history(lane), "history")``, the same data, written entry by entry
    from the lane without making each entry's dict to walk it: a checkpoint's history is most of
    its save, and the generic walk (an entry's dict, its keys, its run path's names one by one)
    cost half as much again as writing the messages themselves. An entry of another shape than
    the framework records (a name that is not a ``str``) is written by the generic walk, and a
    value that cannot be stored is reported by it, as it was. ``entries``: the lane's
    ``snapshot()``, when the caller has it."""
    out: list[dict[str, Any]] = []
    try:
        for entry in lane.snapshot() if entries is None else entries:
            agent, path, seq = entry.agent_name, entry.run_path, entry.seq
            if type(agent) is str and type(path) is tuple and type(seq) is int:
                "".join(path)  # a TypeError unless every name is a str, as the walk checks
                message = _plain(entry.message, 2)  # where the generic walk writes it
                out.append({"agent": agent, "run_path": list(path), "message": message, "seq": seq})
            else:
                out.append(_json_value_at(_entry_data(entry), "history", 1))
    except (_Unstorable, TypeError):
        generic: list[dict[str, Any]] = to_json_value(dump_history(lane), "history")
        return generic  # or its error, which names where, as it always did
    return out


def _entry_data(entry: _Entry) -> dict[str, Any]:
    """One entry as ``dump_history`` writes it."""
    return {
        "agent": entry.agent_name,
        "run_path": list(entry.run_path),
        "message": entry.message,
        "seq": entry.seq,
    }


_ENTRY_KEYS = frozenset({"agent", "run_path", "message", "seq"})


def _read_history(stored: Any, run_paths: Any = None) -> list[dict[str, Any]]:
    """``from_json_value(stored)``, checked to be a history (``_is_history``): ``CheckpointError``
    if it is not one. Entries of the shape a save writes are read without the generic walk over
    each entry's dict and run path, and checked as they are read; on the first that is not, the
    generic walk and check read the whole history again, so what is refused, and the error
    saying why, are what they were. With ``run_paths`` (the body's table of run paths, format
    version 2: ``_history_body``), entries refer to the table by index; each entry's
    ``run_path`` is then its path's tuple, one shared by every entry of that path."""
    if run_paths is not None:
        return _compact_history_read(stored, _read_run_paths(run_paths))
    out = _history_read(stored)
    if out is None:
        out = from_json_value(stored)
        _expect(_is_history(out), "history is not a list of recorded messages")
    return out


_MAX_PATH_NAMES = 1 << 24
"""Most names a table of run paths may expand to, all its paths together (16,777,216: 128 MB of
tuples): a table a few megabytes long whose every path extends the one before by a name expands
quadratically, and a checkpoint is input from outside. A run that held more (a loop of ~5,800
rounds paused) is refused as ``"incompatible"``, as past ``MAX_DEPTH`` is: a pyadk of a bigger
limit resumes it."""


def _read_run_paths(table: Any) -> list[tuple[str, ...]]:
    """A body's table of run paths (``_compact_history_json``) as tuples, each built once from
    the one it extends; ``CheckpointError`` if it is not one, or expands past
    ``_MAX_PATH_NAMES`` (counted before any is built)."""
    _expect(type(table) is list, "run_paths is not a list")
    lengths: list[int] = []
    for item in table:
        parent = item[0] if type(item) is list and item else None
        _expect(
            type(parent) is int and -1 <= parent < len(lengths),
            "run_paths holds an item that is not an earlier path's index and names",
        )
        assert type(parent) is int and type(item) is list
        lengths.append((lengths[parent] if parent >= 0 else 0) + len(item) - 1)
    if sum(lengths) > _MAX_PATH_NAMES:
        raise CheckpointError(
            f"holds run paths of {sum(lengths)} names in all, past this pyadk's limit of "
            f"{_MAX_PATH_NAMES} (adk.checkpoint._snapshot._MAX_PATH_NAMES)",
            reason="incompatible",
        )
    paths: list[tuple[str, ...]] = []
    for item in table:
        parent, names = item[0], tuple(item[1:])
        try:
            "".join(names)  # JSON holds no str subclass: a TypeError unless every name is a str
        except TypeError:
            _expect(False, "run_paths holds a name that is not a str")
        paths.append(paths[parent] + names if parent >= 0 else names)
    return paths


def _compact_history_read(stored: Any, paths: list[tuple[str, ...]]) -> list[dict[str, Any]]:
    """The entries of a history whose run paths are indices into ``paths``; ``CheckpointError``
    at the first that is not one."""
    _expect(type(stored) is list, "history is not a list of recorded messages")
    out: list[dict[str, Any]] = []
    count = len(paths)
    for item in stored:
        fits = type(item) is dict  # other keys are a later pyadk's addition, as in version 1
        agent, index, seq = (
            (item.get("agent"), item.get("run_path"), item.get("seq")) if fits else (0, 0, 0)
        )
        _expect(
            fits
            and type(agent) is str
            and type(seq) is int
            and type(index) is int
            and 0 <= index < count,
            "history is not a list of recorded messages",
        )
        message = _rebuild(item.get("message"), 2)
        _expect(isinstance(message, Message), "history is not a list of recorded messages")
        out.append({"agent": agent, "run_path": paths[index], "message": message, "seq": seq})
    return out


def _history_read(stored: Any) -> list[dict[str, Any]] | None:
    """The entries of ``stored`` as ``_read_history`` reads them, or None at the first entry not
    of the shape a save writes (nothing is refused here but a message that does not load, which
    the generic walk would refuse first as well: the entries before it are of that shape)."""
    if type(stored) is not list:
        return None
    out: list[dict[str, Any]] = []
    for item in stored:
        if type(item) is not dict or not item.keys() <= _ENTRY_KEYS:
            return None
        agent, path, seq = item.get("agent"), item.get("run_path"), item.get("seq")
        if type(agent) is not str or type(seq) is not int or type(path) is not list:
            return None  # an older pyadk's entries have no seq: read by the generic walk
        try:
            "".join(path)  # JSON holds no str subclass: a TypeError unless every name is a str
        except TypeError:
            return None
        message = _rebuild(item.get("message"), 2)  # where the generic walk reads it
        if not isinstance(message, Message):
            return None
        out.append({"agent": agent, "run_path": path, "message": message, "seq": seq})
    return out


def _is_usage(usage: Any) -> bool:
    """A saved usage: token counts by ``Usage`` field name, each a non-negative int."""
    return (
        isinstance(usage, dict)
        and usage.keys() <= _USAGE_FIELDS
        and all(type(n) is int and n >= 0 for n in usage.values())
    )


_USAGE_FIELDS = frozenset(Usage.model_fields)


def _is_history(entries: Any) -> bool:
    return isinstance(entries, list) and all(
        isinstance(e, dict)
        and isinstance(e.get("agent"), str)
        and isinstance(e.get("run_path"), list)
        and all(type(name) is str for name in e["run_path"])
        and isinstance(e.get("message"), Message)
        for e in entries
    )


def load_history(run: _RunState, entries: Any, *, checked: bool = False) -> None:
    """Append saved entries to the run's root lane with their saved order numbers (renumbered in
    order when a checkpoint from before they were saved has none), and continue numbering after
    them. ``checked``: ``entries`` are a ``Snapshot``'s history, which ``parse_body`` checked."""
    if not checked and not _is_history(entries):
        raise CheckpointError(
            "checkpoint history is not a list of recorded messages", reason="corrupt"
        )
    lane = run.history.entries
    numbered = all(type(item.get("seq")) is int for item in entries)
    last = -1
    for item in entries:
        message = item["message"]
        seq = item["seq"] if numbered else run.next_seq()
        if seq <= last:
            raise CheckpointError("checkpoint history is out of order", reason="corrupt")
        last = seq
        # A tuple stays itself (``tuple(t) is t``): entries read from a table of run paths
        # share one per path, as the paused run's entries shared their context's.
        lane.append(new_entry(str(item["agent"]), tuple(item["run_path"]), message, seq))
    run.seq = max(run.seq, last + 1)


_STATE_DEPTH = 2
"""How deep a saved state lies in the body's ``states`` (by address, then slot), which a resume
reads whole (``from_json_value``): the depth its nesting is counted from when saved."""


def snapshot_body(
    run: _RunState, signal: _InterruptSignal, agent_name: str, enable_streaming: bool
) -> dict[str, Any]:
    """The JSON body of a checkpoint for ``run`` paused at ``signal``."""
    history, run_paths = _history_body(run.history)
    body: dict[str, Any] = {
        "agent": agent_name,
        "run_id": run.run_id,
        "enable_streaming": enable_streaming,
        "root_input": to_json_value(run.root, "root input"),
        "session": to_json_value(run.session.values, "session"),
        "history": history,
        "points": [
            {"id": p.id, "address": p.address, "info": to_json_value(p.info, f"info of {p.id}")}
            for p in signal.points
        ],
        # Each state on its own, so that an error names the component and not the body's keys
        # (the component's own slot is an empty key: ``saved state.<address>.`` read as a typo),
        # from the depth it is read back at (``states`` is read whole: address, slot, state).
        "states": {
            address: {
                slot: _json_value_at(state, _state_where(address, slot), _STATE_DEPTH)
                for slot, state in slots.items()
            }
            for address, slots in signal.states.items()
        },
        # When the run paused (seconds since the epoch), for listings of paused runs
        # (``list_pending``): the stores' own write times are not readable through the protocol.
        "saved_at": time.time(),
    }
    if run_paths is not None:
        # The history's run paths, each once (``_history_body``): format version 2.
        body[_RUN_PATHS] = run_paths
    plan = run.plan
    if plan is not None:
        # A resume pausing again: the points it and the resumes before it answered, for a refusal
        # of an answer sent again to one of them (a double click, a retried request) to say so
        # (``Runner._resume_claimed``) rather than call an id the run reported unknown. Only for
        # that message: an older pyadk ignores it, and a resume never fails for it.
        answered = _answered_by(plan, signal)
        if answered:
            body[_ANSWERED] = answered
        if plan.answered_plain is not None:
            # The point this resume gave plain data to: plain data for another point pending
            # next may be the same answer sent again, and is refused (``runner._addressed``).
            body[_ANSWERED_PLAIN] = plan.answered_plain
            if plan.plain_approval:
                # It was an approval: an approval pending at that id next is another call (an
                # approved call asks for no approval again), under an id its server reused.
                body[_PLAIN_APPROVAL] = True
    if run.usage is not None:
        # The usage the run's model calls reported so far (``RunResult.usage``), token counts by
        # name: the resumed run's total goes on from it. Absent when none reported any, as in the
        # checkpoints of an older pyadk, whose resumed runs count from the resume.
        body["usage"] = run.usage.model_dump()
    turns = run.turns
    if turns is not None:
        # The run's max_turns and the model calls it made (every agent's, nested runs' too): the
        # resumed run goes on counting. Absent for a run without a limit, and in the checkpoints
        # of an older pyadk.
        body["turns"] = {"max_turns": turns.limit, "used": turns.used}
    if run.options or run.designated:
        # The names of the run options it was given, never their values (a client, a
        # connection: ``Runner.run``): a resume must give them again, and one that does not is
        # refused before anything runs (``Runner._resume_claimed``). ``agents``: the names that
        # applied to each agent options were designated to (the run-wide ones included).
        names: dict[str, Any] = {"run": sorted(run.options)}
        if run.designated:
            names["agents"] = {name: sorted(own) for name, own in run.designated.items()}
        body["options"] = names
    return body


_ANSWERED = "answered"
_ANSWERED_PLAIN = "answered_plain"
_PLAIN_APPROVAL = "answered_plain_approval"


def _answered_by(plan: _ResumePlan, signal: _InterruptSignal) -> list[str]:
    """The ids of the points answered by the resume of ``plan`` and the resumes before it that
    ``signal``, its pause, no longer waits on: the points it targeted, those an earlier resume's
    records settled, and those the checkpoint it resumed noted as answered. A point paused again
    (its tool asked again) waits, and is not among them."""
    waiting = {p.id for p in signal.points}
    earlier = plan.progress.earlier if plan.progress is not None else ()
    done = {*plan.answered, *plan.targets, *(i for i in earlier if isinstance(i, str))}
    return sorted(done - waiting)


def read_answered_plain(body: dict[str, Any]) -> tuple[str | None, bool]:
    """The point the resume that saved ``body`` gave plain data to, if it did (``snapshot_body``),
    and whether it was an approval; None for anything but a str (a checkpoint of an older pyadk
    has none: plain data goes on), and not an approval unless noted ``True`` (a checkpoint saved
    before that was noted: its point is told apart by id alone, as then)."""
    point = body.get(_ANSWERED_PLAIN)
    if not isinstance(point, str):
        return None, False
    return point, body.get(_PLAIN_APPROVAL) is True


def read_answered(body: dict[str, Any]) -> tuple[str, ...]:
    """The ids a checkpoint's body notes as answered by earlier resumes (``snapshot_body``):
    none unless a list, its ids only. Read leniently, as only a refusal's message uses them."""
    answered = body.get(_ANSWERED)
    if not isinstance(answered, list):
        return ()
    return tuple(i for i in answered if isinstance(i, str))


def _read_option_names(names: Any) -> tuple[list[str], dict[str, list[str]]] | None:
    """A saved ``options`` as (run-wide names, names by designated agent); ``CheckpointError``
    if it is not one."""
    if names is None:
        return None

    def is_names(value: Any) -> bool:
        return isinstance(value, list) and all(isinstance(name, str) for name in value)

    agents = names.get("agents", {}) if isinstance(names, dict) else None
    _expect(
        isinstance(names, dict)
        and names.keys() <= {"run", "agents"}
        and is_names(names.get("run"))
        and isinstance(agents, dict)
        and all(isinstance(a, str) and is_names(v) for a, v in agents.items()),
        "options is not the names of the run options by where they applied",
    )
    assert isinstance(agents, dict)
    return names["run"], agents


def _read_turns(turns: Any) -> tuple[int, int] | None:
    """A saved ``turns`` as (limit, calls made); ``CheckpointError`` if it is not one."""
    if turns is None:
        return None
    _expect(
        isinstance(turns, dict)
        and turns.keys() == {"max_turns", "used"}
        and type(turns["max_turns"]) is int
        and type(turns["used"]) is int
        and turns["max_turns"] >= 1
        and turns["used"] >= 0,
        "turns is not a max_turns and a count of model calls",
    )
    return turns["max_turns"], turns["used"]


class Snapshot:
    """A parsed checkpoint body.

    A plain slotted class rather than a dataclass: this module loads with ``import adk`` (through
    the runner and ``AgentTool``) and a dataclass costs ~0.5 ms to create, for a record only a
    resume ever builds.
    """

    __slots__ = (
        "agent",
        "enable_streaming",
        "history",
        "option_names",
        "root_input",
        "run_id",
        "session",
        "signal",
        "trace",
        "turns",
        "usage",
    )

    def __init__(
        self,
        *,
        agent: str,
        run_id: str,
        enable_streaming: bool,
        root_input: list[Message],
        session: dict[str, Any],
        history: list[dict[str, Any]],
        signal: _InterruptSignal,
        trace: Any = None,
        usage: Usage | None = None,
        turns: tuple[int, int] | None = None,
        option_names: tuple[list[str], dict[str, list[str]]] | None = None,
    ) -> None:
        self.agent = agent
        self.run_id = run_id
        self.enable_streaming = enable_streaming
        self.root_input = root_input
        self.session = session
        self.history = history
        self.signal = signal
        # The paused run's trace (``Hooks.trace_of``), when it was traced: JSON data that only
        # tracing reads, to link the resume's spans to it. Not checked here: a resume never fails
        # for it, tracing ignores what it cannot read.
        self.trace = trace
        self.usage = usage
        # The paused run's max_turns and the model calls it had made (None: it had no limit).
        self.turns = turns
        # The names of the run options the paused run was given, run-wide and by designated
        # agent (None: it was given none, or an older pyadk saved it).
        self.option_names = option_names


def parse_body(body: dict[str, Any], checkpoint_id: str) -> Snapshot:
    """Rebuild a snapshot from a verified body; anything malformed is a ``CheckpointError``.

    The checksum proves the bytes are what was written, not that a writer wrote a sensible body, so
    the shape is checked here before anything acts on it.
    """
    try:
        # Compared with the root agent's name: another value (a list, a number) was read as its
        # text, and the refusal named an agent "['x']" as if the checkpoint were another's.
        _expect(isinstance(body.get("agent"), str), "agent is not a str")
        points = _read_points(body)
        states = from_json_value(body.get("states", {}))
        _expect(
            isinstance(states, dict)
            and all(isinstance(a, str) and isinstance(v, dict) for a, v in states.items()),
            "states is not a map of address to slots",
        )
        root_input = from_json_value(body["root_input"])
        _expect(
            isinstance(root_input, list) and all(isinstance(m, Message) for m in root_input),
            "root input is not a list of messages",
        )
        session = from_json_value(body.get("session", {}))
        _expect(isinstance(session, dict), "session is not an object")
        history = _read_history(body.get("history", []), body.get(_RUN_PATHS))
        usage = body.get("usage")
        _expect(usage is None or _is_usage(usage), "usage is not a map of token counts")
        return Snapshot(
            agent=body["agent"],
            run_id=str(body.get("run_id", "")),
            enable_streaming=bool(body.get("enable_streaming", False)),
            root_input=root_input,
            session=session,
            history=history,
            signal=_InterruptSignal(points, states),
            trace=body.get("trace"),
            usage=None if usage is None else Usage(**usage),
            turns=_read_turns(body.get("turns")),
            option_names=_read_option_names(body.get("options")),
        )
    except _MALFORMED as exc:
        raise _malformed(exc, checkpoint_id) from exc
