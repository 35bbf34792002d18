"""Fan-in: ``ActionContext.collect_events`` keeps arriving events until a set of them is complete.

LlamaIndex's ``ctx.collect_events(ev, [A, B, C])``: an action that fanned events out gets their
answers one at a time (the events of one input are processed one after another), hands each to
``collect_events``, and gets ``None`` until every expected event has come, then the events, in
the order of the expected types. Before, a port kept each arrival in sensory memory by hand.

The buffers are one input's own, as sensory memory is: kept in the input's run (``_ActionRun``),
never in the session, so the records of other keys, and a key's later records that run while
this one waits at a pause, never reach them. A pause saves them in its state as the events still
queued are saved (``_ActionRun._encode``: JSON, the checkpoint codec for fields that may hold
anything, so a registered model comes back as itself and nothing is unpickled), and the resume
validates them back into their classes. Changes are undone with the memory writes of an action
that raised (a retried attempt, a pause), so an event is collected once however often its action
runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .events import Event

if TYPE_CHECKING:
    from .plan import AgentPlan

__all__ = ["_FanIn", "check_expected"]

_MISSING: Any = object()


class _FanIn:
    """One input's fan-in buffers: buffer id -> the events collected so far, in arrival order.

    A buffer's list is never changed in place but replaced, so the undo log keeps the list an
    action found (its first change) and putting it back undoes every change the action made."""

    __slots__ = ("buffers", "undo")

    def __init__(self, buffers: dict[str, list[Event]] | None = None) -> None:
        self.buffers: dict[str, list[Event]] = buffers if buffers is not None else {}
        self.undo: dict[str, list[Event]] = {}  # buffer id -> its list before the action

    def collect(
        self, buffer_id: str, event: Event, expected: Sequence[type[Event]]
    ) -> list[Event] | None:
        """Add ``event`` to the buffer (once: the same object again is not a second arrival) and
        take the expected events out of it if they are all there."""
        buffers = self.buffers
        old = buffers.get(buffer_id, _MISSING)
        held: list[Event] = [] if old is _MISSING else old
        if buffer_id not in self.undo:
            self.undo[buffer_id] = old
        if not any(kept is event for kept in held):
            held = [*held, event]
        found = _matched(held, expected)
        if found is None:
            buffers[buffer_id] = held
            return None
        taken = {id(item) for item in found}
        left = [item for item in held if id(item) not in taken]
        if left:
            buffers[buffer_id] = left
        else:
            buffers.pop(buffer_id, None)
        return found

    def undo_changes(self) -> None:
        """Put back the buffers the action that raised changed (it runs again)."""
        buffers = self.buffers
        for buffer_id, old in self.undo.items():
            if old is _MISSING:
                buffers.pop(buffer_id, None)
            else:
                buffers[buffer_id] = old
        self.undo.clear()


def _matched(held: list[Event], expected: Sequence[type[Event]]) -> list[Event] | None:
    """For each expected type, the earliest held event of it (a subclass counts, as for an
    action's listening) not taken by another slot; None if one slot finds none. The most derived
    types choose first, so ``[Base, Sub]`` over a ``Sub`` and a ``Base`` event gives the ``Sub``
    to ``Sub`` rather than leaving it without one."""
    if len(held) < len(expected):
        return None
    chosen: dict[int, Event] = {}
    taken: set[int] = set()
    order = sorted(range(len(expected)), key=lambda slot: -len(expected[slot].__mro__))
    for slot in order:
        wanted = expected[slot]
        for place, item in enumerate(held):
            if place not in taken and isinstance(item, wanted):
                taken.add(place)
                chosen[slot] = item
                break
        else:
            return None
    return [chosen[slot] for slot in range(len(expected))]


def check_expected(
    plan: AgentPlan, action_name: str, event: object, expected: object, shared: bool
) -> tuple[type[Event], ...]:
    """``expected`` as a tuple of event classes, or the error that says what is wrong where the
    user calls ``collect_events``: a type that could never arrive would leave the fan-in waiting
    without a word until its input's run ended."""
    call = f"collect_events in action {action_name!r} of agent {plan.agent_name!r}"
    if not isinstance(event, Event):
        raise TypeError(f"{call}: its first argument is the event to collect, got {event!r}")
    if isinstance(expected, type) or not isinstance(expected, list | tuple):
        raise TypeError(
            f"{call}: expected is a list of event classes, one per event to wait for, e.g. "
            f"[Answer] * 3 or [Answer, Review]; got {expected!r}"
        )
    if not expected:
        raise ValueError(f"{call}: expected is empty; name at least one event class")
    kinds = tuple(expected)
    for kind in kinds:
        if not (isinstance(kind, type) and issubclass(kind, Event)):
            raise TypeError(f"{call}: expected holds {kind!r}, which is no Event class")
    if not isinstance(event, kinds):
        raise TypeError(
            f"{call}: {type(event).__name__} is none of the expected events "
            f"({_names(kinds)}); it would wait in the buffer for ever"
        )
    takers = plan.actions if shared else [a for a in plan.actions if a.name == action_name]
    unseen = [
        kind for kind in dict.fromkeys(kinds) if not any(_takes(a.events, kind) for a in takers)
    ]
    if unseen:
        # Said as what is missing: "the action takes Review" read as the opposite of the fault.
        whom = "no action of the agent takes" if shared else "the action does not take"
        raise ValueError(
            f"{call}: {whom} {_names(unseen)}, so none could be collected and the fan-in "
            "would never complete; "
            + (
                "add the type to its @action(...)"
                if not shared
                else "add an action for it, or do not expect it"
            )
        )
    return kinds


def _takes(listened: tuple[type[Event], ...], kind: type[Event]) -> bool:
    """Whether an action listening for ``listened`` gets events of ``kind``: ``kind`` or a base
    of it is listened for, or a subclass of it is (``[Urgency] * 2`` over ``High`` and ``Low``,
    each an ``Urgency``: a subclass counts for its class where events are collected)."""
    return issubclass(kind, listened) or any(issubclass(taken, kind) for taken in listened)


def _names(kinds: Sequence[type]) -> str:
    return ", ".join(kind.__name__ for kind in kinds)
