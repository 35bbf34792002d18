"""Interrupt signals, pending points and what a resumed component is told.

Addresses are structural: an agent's address is its parent's address plus ``agent:<name>``, a tool
call's is its agent's plus ``tool:<name>#<call id>``. They do not grow with sequence steps or loop
iterations (the composite keeps those in its own state), so a point id is stable and readable:
``agent:root/agent:pay/tool:transfer#call_1``.

While an interrupt travels up to the runner it is an ``_InterruptSignal``: the pending points plus the
saved state of every component on their paths, keyed by address. Each composite adds its own state as
the signal passes; the runner stores the whole signal in the checkpoint.

No ``from __future__ import annotations`` here: with it pydantic would compile every field's
annotation string when the models are created at ``import adk``. Forward references are quoted.
"""

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Interrupt",
    "InterruptInfo",
    "InterruptPoint",
    "ResumeContext",
    "agent_segment",
    "tool_segment",
]

Address = str
"""An address string such as ``agent:root/agent:pay/tool:transfer#call_1``."""

AGENT_STATE = ""
"""Slot of a component's own state at its address (flows keep theirs in another slot)."""

_CALLBACK_SLOT = "callback"
"""At a tool call's address: the key of the ``before_tool`` callback that paused the call
(``adk.callbacks``), when its pause was that callback's rather than the tool's. Its resume is the
callback's, and the tool then runs as on a first call."""

_ANSWERS_SLOT = "callback_answers"
"""At a tool call's address: the answers (``{"data": ..., "state": ...}`` by callback key) of the
``before_tool`` callbacks resumed at this call before a later pause of it (the approval's, the
function's, another callback's), so each sees its own answer again when the call resumes next,
rather than ``None`` and asking once more."""


def agent_segment(name: str) -> str:
    """The address segment of an agent named ``name``."""
    segment = _SEGMENTS.get(name)
    if segment is None:
        escaped = _escaped(name) if "/" in name or "#" in name or "%" in name else name
        segment = f"agent:{escaped}"
        if len(_SEGMENTS) >= 4096:  # names made on the fly must not grow it without bound
            _SEGMENTS.clear()
        _SEGMENTS[name] = segment
    return segment


_SEGMENTS: dict[str, str] = {}
"""``agent_segment``'s answers by agent name. One is needed for every agent start and names
repeat, so ``RunContext._child`` reads this first and calls ``agent_segment`` only for a name it
has not seen (a dictionary lookup costs a fraction of a call)."""


def tool_segment(name: str, call_id: str) -> str:
    """The address segment of one call of tool ``name``."""
    if "/" in name or "#" in name or "%" in name:
        name = _escaped(name)
    if "/" in call_id or "%" in call_id:
        call_id = _escaped(call_id)
    return f"tool:{name}#{call_id}"


def _escaped(text: str) -> str:
    """``text`` with the characters that structure an address percent-encoded: an agent named
    ``p/x`` must not pass for an agent ``x`` below an agent ``p`` (a resume addressed to one would
    reach the other)."""
    return text.replace("%", "%25").replace("/", "%2F").replace("#", "%23")


def _call_id_of(point_id: str) -> str | None:
    """The tool call id of a point at a tool call (``tool_segment``'s id, unescaped), else None:
    a resume that keys its answers by call id, as LangGraph's does, is told which point is that
    call's."""
    segment = point_id.rpartition("/")[2]  # "/" inside a name or call id is escaped
    if not segment.startswith("tool:"):
        return None
    # The first "#" ends the tool's name, which has its own escaped.
    call_id = segment.partition("#")[2]
    # Every "%" of an escaped id starts "%25", "%2F" or "%23", so replacing "%25" last cannot
    # read an escaped "%" and the text after it as another escape.
    return call_id.replace("%2F", "/").replace("%23", "#").replace("%25", "%")


def _call_ids_named(keys: list[Any], pending: list[str]) -> str:
    """For the keys of a refused resume that are the tool call ids of pending points (the id the
    model gave the call, ``call_1``, which LangGraph keys its answers by), a clause naming the
    point each is the call of, as the point ids alone leave the user to find the key's point in a
    list of long addresses; "" when there is none."""
    calls: dict[str, list[str]] = {}
    for point_id in pending:
        call_id = _call_id_of(point_id)
        if call_id is not None:
            calls.setdefault(call_id, []).append(point_id)
    named = []
    for key in keys:
        points = calls.get(key) if isinstance(key, str) else None
        if points:
            which = f"point {points[0]!r}" if len(points) == 1 else f"points {points}"
            named.append(f"{key!r} is the tool call id of pending {which}")
    if not named:
        return ""
    return f"; answers are keyed by point id, not by tool call id: {', '.join(named)}"


def join_address(parent: Address, segment: str) -> Address:
    return f"{parent}/{segment}" if parent else segment


def is_within(address: Address, ancestor: Address) -> bool:
    """True if ``address`` is ``ancestor`` or lies below it."""
    return address == ancestor or address.startswith(ancestor + "/") or not ancestor


def _ancestors(address: Address) -> list[Address]:
    """Every ``ancestor`` that ``is_within(address, ancestor)`` holds true for: the empty
    address, ``address`` up to each of its ``/``, and ``address`` itself."""
    found = [""]
    at = address.find("/")
    while at != -1:
        found.append(address[:at])
        at = address.find("/", at + 1)
    if address:
        found.append(address)
    return found


class InterruptPoint(BaseModel):
    """One place where a run waits: its id (the address string), the address parts and the info."""

    model_config = ConfigDict(defer_build=True)

    id: str
    address: list[str]
    info: Any = None


class InterruptInfo(BaseModel):
    """Every point a paused run waits on, and the checkpoint that holds it."""

    model_config = ConfigDict(defer_build=True)

    checkpoint_id: str = ""
    points: list[InterruptPoint] = Field(default_factory=list)

    @property
    def point_ids(self) -> list[str]:
        """The pending points' ids: the keys of the ``{point_id: data}`` that a resume takes."""
        return [p.id for p in self.points]


@dataclass(slots=True)
class ResumeContext:
    """What a component is told when its run resumes.

    ``was_interrupted``: it (or something below it) was paused; ``state``: what it saved then;
    ``is_target``: the resume addresses it or something below it; ``data``: the resume data addressed
    to exactly this point.
    """

    was_interrupted: bool = False
    state: Any = None
    is_target: bool = False
    data: Any = None


class Interrupt(Exception):
    """Raise from a tool or agent to pause the run until someone resumes it.

    ``info`` is shown to whoever resumes (a question, an approval request); ``state`` is saved in the
    checkpoint and handed back as ``ctx.resume.state``. Both must be JSON values or registered
    pydantic models.
    """

    def __init__(self, info: Any = None, state: Any = None) -> None:
        super().__init__(info)
        self.info = info
        self.state = state
        self._signal: _InterruptSignal | None = None

    @classmethod
    def _from_signal(cls, signal: "_InterruptSignal", state: Any = None) -> "Interrupt":
        """An interrupt that re-raises points gathered below (a nested run) with ``state`` on top."""
        exc = cls(None, state)
        exc._signal = signal
        return exc


class _InterruptSignal:
    """Pending points and saved states (address -> slot -> state) travelling up to the runner.

    A plain slotted class, not a dataclass: it is created at ``import adk`` and a dataclass costs
    ~0.5 ms to create; nothing compares signals or needs the generated methods.
    """

    __slots__ = ("points", "states")

    def __init__(
        self,
        points: list[InterruptPoint] | None = None,
        states: dict[Address, dict[str, Any]] | None = None,
    ) -> None:
        self.points = [] if points is None else points
        self.states: dict[Address, dict[str, Any]] = {} if states is None else states

    def __repr__(self) -> str:
        return f"_InterruptSignal(points={self.points!r}, states={self.states!r})"

    @classmethod
    def single(cls, address: Address, info: Any, state: Any) -> "_InterruptSignal":
        signal = cls([InterruptPoint(id=address, address=address.split("/"), info=info)])
        if state is not None:
            signal.states[address] = {AGENT_STATE: state}
        return signal

    def save(self, address: Address, state: Any, slot: str = AGENT_STATE) -> None:
        self.states.setdefault(address, {})[slot] = state

    def merge(self, other: "_InterruptSignal") -> None:
        self.points.extend(other.points)
        for address, slots in other.states.items():
            self.states.setdefault(address, {}).update(slots)

    def info(self) -> InterruptInfo:
        return InterruptInfo(points=list(self.points))


class _ResumePlan:
    """What a resumed run knows: the saved signal and the targeted points with their data.

    ``resume_for(address)`` answers a component's ``ctx.resume`` in O(depth of the address):
    the pending points are indexed by each of their ancestors (``_under``), and the targets'
    ancestors are a set, so a resume of P points asks O(P) look-ups, not P x P ``is_within``
    tests, and forgetting the points below an address (``consume``) costs what it removes.
    """

    __slots__ = (
        "_points",
        "_states_under",
        "_target_under",
        "_under",
        "answered",
        "answered_plain",
        "plain_approval",
        "progress",
        "reached",
        "resumed_from",
        "states",
        "targets",
    )

    def __init__(
        self,
        signal: _InterruptSignal,
        targets: dict[Address, Any],
        answered: tuple[Address, ...] = (),
    ) -> None:
        # The pending points by their position in the signal (in order), and, for each address
        # at or above a point (``_ancestors``: what ``is_within`` holds true), the positions of
        # the points at or below it, in order.
        self._points: dict[int, InterruptPoint] = dict(enumerate(signal.points))
        self._under: dict[Address, dict[int, None]] = {}
        for index, point in self._points.items():
            for ancestor in _ancestors(point.id):
                self._under.setdefault(ancestor, {})[index] = None
        self.states = signal.states
        # The saved states' addresses by each address at or above them, as ``_under`` the
        # points': built at the first ``subtree`` (a resume re-raising no branch never needs it).
        self._states_under: dict[Address, dict[Address, None]] | None = None
        self.targets = targets
        self._target_under = {a for target in targets for a in _ancestors(target)}
        # The points earlier resumes of the checkpoint answered, as it noted them: its next pause
        # notes them again, with this resume's own (``checkpoint._snapshot.snapshot_body``).
        self.answered = answered
        # The point this resume gave plain data to (not ``{point_id: data}``), if it was: its
        # pause notes it, and refuses plain data for another point next (``runner._addressed``).
        self.answered_plain: Address | None = None
        # Whether that point was an approval: an approval paused at it next is then another call
        # under a reused id (a server numbering each response's calls ``call_0``), not it again.
        self.plain_approval = False
        self.reached: set[Address] = set()
        # ``(the trace the checkpoint kept, checkpoint id)`` when the paused run was traced: for
        # tracing to link the resumed run's root span to the paused run's (``adk.tracing``).
        self.resumed_from: tuple[Any, str] | None = None
        # The runner's ``adk.checkpoint._progress._Progress``: records in the checkpoint being
        # resumed what a resumed component finished (a ``ReActAgent``'s resumed calls), so that a
        # later resume of it does not run that again. None when nothing can record (a plan made
        # elsewhere than by a runner's resume).
        self.progress: Any = None

    @property
    def points(self) -> list[InterruptPoint]:
        """The points still pending (not forgotten by ``consume``), in the signal's order."""
        return list(self._points.values())

    def within(self, address: Address) -> list[InterruptPoint]:
        """The pending points at or below ``address`` (``is_within``), in order."""
        under = self._under.get(address)
        if not under:
            return []
        points = self._points
        return [points[index] for index in under]

    def holds(self, address: Address) -> bool:
        """Whether a pending point lies at or below ``address``."""
        return bool(self._under.get(address))

    def resume_for(self, address: Address, slot: str = AGENT_STATE) -> ResumeContext | None:
        """The resume view of one address, or None if nothing at or below it was interrupted."""
        if not self._under.get(address):
            return None
        if address in self.targets:
            self.reached.add(address)
        slots = self.states.get(address)
        return ResumeContext(
            was_interrupted=True,
            state=slots.get(slot) if slots else None,
            is_target=address in self._target_under or self._settled_within(address),
            data=self.targets.get(address),
        )

    def _settled_within(self, address: Address) -> bool:
        """Whether a point at or below ``address`` is one an earlier resume's records settled
        (``progress.earlier``): its call ran and was recorded, and listings no longer show it,
        so a resume of the points still listed does not answer it. What holds it runs, and
        replays the call (``settle``), as when the resume answers it: not addressed, an agent
        holding one re-raised it (``_AgentRun.skipped``), and the run paused again at a point
        no listing had shown. Not the point's own address: a call asked there is one that did
        not run to its record (a checkpoint from before calls got ids of their own may share
        one point between two calls, one recorded), and with no answer it would be denied, not
        asked again."""
        progress = self.progress
        if progress is None or not progress.earlier:
            return False
        settled = progress.earlier
        return any(p.id != address and p.id in settled for p in self.within(address))

    def leaves_waiting(self, address: Address) -> bool:
        """Whether a pending point at or below ``address`` is one this resume does not answer
        (it answers some points only): what holds it pauses there again, the point re-raised
        unchanged (an agent not addressed does not run, ``_AgentRun.skipped``; a call not
        addressed does not run, its round pausing once the others ran), so nothing after it
        runs in this resume. The resume's check counts no model call after it
        (``adk._turns_left``). A point an earlier resume's records settled (``progress.earlier``:
        its call ran and was recorded) is left waiting by none: its call is replayed, not paused
        again (``settle``), and the listings no longer show it, so a resume of the points still
        listed answers every point that pauses. Counted as waiting, it skipped the resume's
        ``max_turns`` checks: the calls ran, then the model call after them failed on the limit."""
        targets = self.targets
        progress = self.progress
        settled = () if progress is None else progress.earlier
        return any(p.id not in targets and p.id not in settled for p in self.within(address))

    def unreached(self) -> list[Address]:
        """The points the resume addressed that no component at their address was asked about:
        the agents resuming the checkpoint no longer lead there, and the data was not delivered.
        Each composite checks its own saved place; this catches what none of them can see (a
        workflow that paused inside replaced by a plain agent of its name, say)."""
        return [address for address in self.targets if address not in self.reached]

    def callback_at(self, address: Address) -> Any:
        """The key of the ``before_tool`` callback that paused the call at ``address`` (None when
        its pause was the tool's own, or it is not paused)."""
        slots = self.states.get(address)
        return slots.get(_CALLBACK_SLOT) if slots else None

    def info_at(self, address: Address) -> Any:
        """The info of the pending point at exactly ``address`` (None if none is pending there):
        what the paused component asked, e.g. an approval request."""
        for point in self.within(address):
            if point.id == address:
                return point.info
        return None

    def settle(self, address: Address) -> None:
        """A call at ``address`` that an earlier resume of this checkpoint finished and recorded
        (``progress``): its points count as answered (the answers go nowhere, the call does not
        run again) and are forgotten, as ``consume`` forgets a resumed call's."""
        for target in self.targets:
            if is_within(target, address):
                self.reached.add(target)
        self.consume(address)

    def consume(self, address: Address) -> None:
        """Forget the points at or below ``address`` once it has resumed: if the same component
        runs again later in this run (a loop's next iteration) it starts fresh."""
        under = self._under.pop(address, None)
        if not under:
            return
        points = self._points
        for index in under:
            point = points.pop(index)
            for ancestor in _ancestors(point.id):
                others = self._under.get(ancestor)  # None: ``address``, or named twice
                if others is not None:
                    others.pop(index, None)
                    if not others:
                        del self._under[ancestor]

    def subtree(self, address: Address) -> _InterruptSignal:
        """The saved points and states at or below ``address``, to re-raise them unchanged."""
        states = self.states
        index = self._states_under
        if index is None or len(index.get("", ())) != len(states):  # built, or states added
            index = {}
            for at in states:
                for ancestor in _ancestors(at):
                    index.setdefault(ancestor, {})[at] = None
            self._states_under = index
        # Each re-raised branch finds its own states, not every state tested (P x P in a
        # resume of P paused branches leaving most waiting); in the order ``states`` has them.
        found = {at: dict(states[at]) for at in index.get(address, ())}
        return _InterruptSignal(points=self.within(address), states=found)
