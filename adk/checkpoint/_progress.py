"""What a resume has done, recorded in the checkpoint it resumes before anything else can fail.

A resume that ran an approved call and then failed (the model down right after a payment, a worker
dying), or whose reader left, used to leave the checkpoint as it was before the call: resuming it
again ran the call again. The runner gives a resumed run a ``_Progress`` (``_ResumePlan.progress``)
through which a component rewrites its own saved state in the checkpoint, under the same id and the
resume's claim: a ``ReActAgent`` adds the results of its resumed round's finished calls (``done``),
and an ``ActionAgent``'s built-in tool action adds them to the answers its pause saved (``done``,
``places``, ``structured``: ``adk.actions._builtin``), so that a later resume replays them
instead of running the calls again. LangGraph keeps a super-step's finished writes for the same
reason, and Google ADK appends each function response to the session as it comes.

The run the runner resumes records, and so does an ``AgentTool``'s nested run in it (which
shares its plan and session; its agents' states are in the checkpoint under their own addresses,
below the call's), only into a state the checkpoint holds at the component's address. The body
written is the loaded one with that state extended and the session as it is now (what the
finished calls wrote in it); points, history, usage and the rest stay as saved, so the same
answers resume it; the ids of the points a record settled are noted (``codec._SETTLED``) for
listings to leave out. The write compares and replaces in one atomic step where the store can
(``store._ReplacingStore``: every built-in store), a read then a write otherwise. Refused, it
looks at what the store holds: a write of its own that failed but landed, or the same pause with
another resume's records in it (one whose claim lapsed as its record was on its way), is written
over while this resume holds the claim, and the finish deletes the latter too; anything else is
left alone. A compatible addition within format version 1: a pyadk that does not know the keys
resumes the checkpoint as before (running the calls again); one from before an ``ActionAgent``'s
round recorded refuses such a checkpoint of one (its recorded calls' points lie under no call it
runs: ``cannot reach the paused point(s)``), keeping it, rather than run them again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..interrupts import AGENT_STATE, is_within
from .codec import _SETTLED, CheckpointError, decode_checkpoint, encode_checkpoint, to_json_value
from .store import CheckpointStore, _from_store, _replaces

if TYPE_CHECKING:
    from ..context import RunContext
    from ._claim import _Claim

__all__ = ["_Progress"]

logger = logging.getLogger("adk.checkpoint")


class _Progress:
    """A resume's way to record progress in its checkpoint (see the module's docstring).

    ``body`` and ``loaded`` are the checkpoint as last written (by the pause, then by each record),
    ``tried`` the writes that failed since (each may have landed all the same, a connection lost
    before the store's answer): the runner finishes (deletes) the checkpoint only if the store
    holds one of them (``body_of``). ``earlier``: the points an earlier resume's records settled
    (``accounted``)."""

    __slots__ = (
        "_failed",
        "_lock",
        "_queued",
        "body",
        "checkpoint_id",
        "claim",
        "earlier",
        "loaded",
        "store",
        "tried",
    )

    def __init__(
        self,
        store: CheckpointStore,
        checkpoint_id: str,
        body: dict[str, Any],
        loaded: bytes,
        claim: _Claim | None,
    ) -> None:
        self.store = store
        self.checkpoint_id = checkpoint_id
        self.body = body
        self.loaded = loaded
        self.claim = claim
        # Not only the last: a later record refused (the store holds a failed write that
        # landed, not what it compares with) must not make the finish forget the landed one.
        self.tried: list[tuple[dict[str, Any], bytes]] | None = None
        self.earlier = _settled(body)
        self._lock: asyncio.Lock | None = None  # made at the first record: most resumes make none
        # The addresses whose write failed: not tried again (see ``record``).
        self._failed: set[str] | None = None
        # The records waiting to be written, in the order they were asked for: whoever takes
        # the lock next writes them all in one write (see ``record``).
        self._queued: list[_Queued] = []

    def body_of(self, stored: bytes | None) -> dict[str, Any] | None:
        """The body of ``stored`` if it is this resume's checkpoint: as loaded or last written,
        or as a write that failed since wrote it (which landed, then: taken as last written),
        or the pause this resume loaded with another resume's records in it (``_same_pause``);
        else None (deleted, another run's, or a pause saved since)."""
        if stored is None:
            return None
        if stored == self.loaded:
            return self.body
        for body, data in self.tried or ():
            if stored == data:
                self.body, self.loaded = body, stored
                return body
        return self._same_pause(stored)

    def _same_pause(self, stored: bytes | None) -> dict[str, Any] | None:
        """The body of ``stored`` if it is the pause this resume loaded with only other records
        in it (``_RECORDED``: an earlier resume's, whose claim lapsed as its record was on its
        way and landed once this one had loaded the checkpoint), else None. Every other part is
        the pause's own and no other write keeps it whole: a pause saved again (a resume pausing
        again, a new run) has its own ``saved_at``, history and points, a finished one its
        marker. Read only when the store holds bytes this resume did not write: a refused record,
        a finish that found others."""
        if stored is None:
            return None
        try:
            body = decode_checkpoint(stored, self.checkpoint_id)
        except CheckpointError:
            return None
        mine = self.body
        if body.keys() - _RECORDED != mine.keys() - _RECORDED:
            return None
        for key, value in body.items():
            if key not in _RECORDED and mine[key] != value:
                return None
        return body

    def accounted(self, targets: Collection[str]) -> tuple[list[str], list[str]]:
        """Of the points this resume answered (``targets``): those its records settled, and
        those with no record standing for them in the checkpoint as last written (their
        component keeps none, or the write failed), which a later resume of it runs again.
        A point an earlier resume's records settled is in neither: replayed, it did not run."""
        settled = _settled(self.body)
        recorded = [t for t in targets if t in settled and t not in self.earlier]
        return recorded, [t for t in targets if t not in settled]

    def can_record(self, ctx: RunContext) -> bool:
        """Whether ``ctx``'s component has a state of its own in this checkpoint to extend."""
        # Told by the run's plan, not by holding the run: the run holds its plan, the plan this
        # (``plan.progress``), and a reference back would keep each resumed run in a cycle for
        # the collector (tests/test_run_cycles.py). A nested run (an AgentTool's) shares the plan
        # and the session, and its agents' states are in the checkpoint under their own
        # addresses (below the call's): it records there as the runner's own run does.
        run = ctx._run
        if run.plan is None or run.plan.progress is not self:
            return False
        states = self.body.get("states")
        slots = states.get(ctx.address) if isinstance(states, dict) else None
        return isinstance(slots, dict) and isinstance(slots.get(AGENT_STATE), dict)

    async def record(
        self, ctx: RunContext, values: Mapping[str, Any], what: str, settles: Sequence[str] = ()
    ) -> bool:
        """Write the checkpoint again with each key of ``values`` in ``ctx``'s saved state set to
        its value (a ``ReActAgent`` sets ``done``, an ``ActionAgent``'s tool action ``done``,
        ``places`` and ``structured``) and the session as it is now; True once written. Not written
        (False, with an ``adk.checkpoint`` warning naming ``what`` was to be recorded): the claim
        was lost (the run stops at its next event, ``Runner._resume_claimed``), the store holds
        other bytes under the id now, the store failed (with any exception: a store of the three
        public methods raises its own, an ``OSError``, not only ``CheckpointStoreError``; one let
        out here ended the call's task without its outcome, and a round of several calls waited for
        it forever), or a value cannot be stored. The run goes on as it would have without the
        record: a failed write must not end a run that may still finish (and delete its checkpoint),
        nor turn the store's error at its end (``the resumed run of checkpoint ... finished``) into
        one a service reads as nothing having run. Once a write at ``ctx``'s address failed, later
        ones are not tried (False, no warning): calls that ended together wait on the lock, and
        would each try again and warn again (a store down: each waiting for its own timeout in
        turn). ``settles``: the addresses of what ``values`` finished (its calls): the checkpoint's
        points at or below them are noted as settled (``codec._SETTLED``), which listings no longer
        show as waiting; the points themselves stay, so the same answers still resume it. Both
        (``values``' entries too) are read when the write happens, under the lock: a caller
        appending to shared lists (calls that ended together) has the first write hold and settle
        them all, and a later record with nothing new to write (each key holds its value and the
        points are settled) writes nothing (True), told before the claim is looked at: a claim lost
        since that write does not make it a warning. Records asked for while one is written (or in
        the same step of the event loop), at any address (the branches of a ``ParallelAgent``),
        are written together in one write by the first to take the lock (``_write_queued``);
        each ``record`` returns once its own is written."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        mine = _Queued(ctx, values, settles)
        self._queued.append(mine)
        try:
            # Written with the records asked for meanwhile, in one write: each wrote the whole
            # checkpoint, one after the other, so k branches of a fan-out approved at once wrote
            # it k times, the checkpoint itself growing with the fan-out (quadratic).
            async with self._lock:
                if mine.outcome is None:  # not written yet by the holder before
                    # One step of the loop first, for the calls ending in this one (branches
                    # whose approved calls return at once) to join: a store whose write does
                    # not wait (the in-memory one) would have each written alone.
                    await asyncio.sleep(0)
                    await self._write_queued()
        finally:
            # Cancelled before it was written (not written), or its holder cancelled after
            # its outcome was set: out of the queue either way, which holds its context (and
            # through it the run holding this object: a cycle while it waits).
            if mine in self._queued:
                self._queued.remove(mine)
        outcome = mine.outcome
        if outcome is True or outcome is False:
            return outcome
        logger.warning(
            "could not record %s in checkpoint %r, which this resume goes on without: "
            "%s; until the resume finishes (and deletes the checkpoint), resuming the "
            "checkpoint again runs that again",
            what,
            self.checkpoint_id,
            outcome,
        )
        return False

    async def _write_queued(self) -> None:
        """Write every record waiting (``_queued``) in one write, with the lock held, and set
        each one's ``outcome``: True once written; the error's text for one whose write failed
        (not the exception, whose traceback holds the records: a cycle), and False for the
        others at its address, as for one at an address whose write failed
        before (not tried again, no warning); a value that cannot be stored fails the records
        at its address only. Cancelled meanwhile, the records not written stay queued for the
        next holder (its own is taken out by ``record``)."""
        batch = [queued for queued in self._queued if queued.outcome is None]
        failed = self._failed
        if failed is None:
            failed = self._failed = set()
        live: list[_Queued] = []
        for queued in batch:
            address = queued.ctx.address
            if address in failed:
                queued.outcome = False
                continue
            try:
                queued.stored = {
                    key: to_json_value(value, f"saved state.{address}.{key}")
                    for key, value in queued.values.items()
                }
            except Exception as exc:
                queued.outcome = str(exc)
                failed.add(address)
                continue
            live.append(queued)
        if live:
            try:
                await self._write(live)
            except Exception as exc:  # a store's own errors too (see ``record``)
                for queued in live:
                    address = queued.ctx.address
                    queued.outcome = False if address in failed else str(exc)
                    failed.add(address)
            else:
                for queued in live:
                    queued.outcome = True
        self._queued = [queued for queued in self._queued if queued.outcome is None]

    async def _write(self, records: Sequence[_Queued]) -> None:
        """The write of ``records`` (``_write_queued``'s, their values stored as JSON), with the
        lock held; its failures raise. Nothing written when an earlier write already holds it
        all (see ``record``).

        Refused because the store holds other bytes, it looks at them (``body_of``): a write of
        this resume's that failed but landed is taken as last written and the record made on
        it; the pause this resume loaded with another resume's records in it (``_same_pause``:
        that resume's claim lapsed as its record was on its way, and it landed once this one
        had loaded the checkpoint) is consistent, and this resume, which holds the claim now
        (looked at again), writes over it what it ran, so its own records stand and its finish
        deletes the checkpoint. Anything else is not its to write."""
        checkpoint_id = self.checkpoint_id
        claim = self.claim
        store = self.store
        tried = self.tried
        if tried is None:
            tried = self.tried = []
        replacing = _replaces(store)
        old = self.loaded
        rebases = _REBASES
        while True:
            built = self._built(records)
            if built is None:
                return  # an earlier write (of calls that ended together) holds it all
            # Looked at once there is something to write, not before: a claim lost after the
            # earlier write that holds it all warned that a resume runs this again, when it
            # replays it (the run still stops at its next event, ``Runner._resume_claimed``).
            if claim is not None and claim.lost:
                raise CheckpointError(
                    "lost the claim on it: another resume may hold it", reason="busy"
                )
            body, data = built
            if replacing:  # compared and written in one step (``store._ReplacingStore``)
                tried.append(built)  # a write that fails may have landed (a connection lost)
                replace = store._replace(checkpoint_id, old, data)  # type: ignore[attr-defined]
                if await _from_store(replace, "put", checkpoint_id):
                    break
                tried.pop()  # refused: not written (the writes that failed before it stay)
                now = await _from_store(store.get(checkpoint_id), "get", checkpoint_id)
            else:  # a store of the three methods: a look, then a write (see interrupts.md)
                now = await _from_store(store.get(checkpoint_id), "get", checkpoint_id)
                if now == old:
                    tried.append(built)
                    await _from_store(store.put(checkpoint_id, data), "put", checkpoint_id)
                    break
            # Written again only as the loop's start allows: something still to write (the
            # store may hold a landed write of this resume's that has it), the claim held.
            if not rebases or self.body_of(now) is None:
                raise CheckpointError(
                    "it is no longer the one this resume loaded (deleted, or replaced by another "
                    "run's pause)",
                    reason="busy",
                )
            assert now is not None  # (``body_of``)
            rebases -= 1
            old = now
        self.body, self.loaded, self.tried = body, data, None

    def _built(self, records: Sequence[_Queued]) -> tuple[dict[str, Any], bytes] | None:
        """The body ``_write`` writes, on the checkpoint as last written, with each of
        ``records``' values set in the saved state at its address (in their order: a later
        record at the same address over an earlier one), and its bytes; None when that holds it
        all already."""
        body_settled = _settled(self.body)
        settled = list(body_settled)
        settles = [at for record in records for at in record.settles]
        if settles:
            for point in self.body["points"]:
                point_id = point["id"]
                if point_id not in settled and any(is_within(point_id, at) for at in settles):
                    settled.append(point_id)
        states = self.body["states"]
        changed = len(settled) != len(body_settled)
        for record in records:
            address = record.ctx.address
            slots = states[address]
            written = slots[AGENT_STATE]
            stored = record.stored
            if all(key in written and written[key] == value for key, value in stored.items()):
                continue
            own = dict(written)
            own.update(stored)
            if states is self.body["states"]:
                states = dict(states)  # copied once: the body as last written stays as it was
            states[address] = {**slots, AGENT_STATE: own}
            changed = True
        if not changed:
            return None
        body = dict(self.body)
        body["states"] = states
        # The session as it is now (what the finished calls wrote in it): one for the run and
        # the nested runs of its AgentTools, so any record's context reads it.
        body["session"] = to_json_value(records[0].ctx._run.session.values, "session")
        if settles:
            body[_SETTLED] = settled
        return body, encode_checkpoint(body)


class _Queued:
    """A record waiting to be written (``_Progress.record``): the component's context, its
    values (read when the write happens), what they settle, the values as JSON once read, and
    the outcome once written (True), skipped (False) or failed (the error's text)."""

    __slots__ = ("ctx", "outcome", "settles", "stored", "values")

    def __init__(self, ctx: RunContext, values: Mapping[str, Any], settles: Sequence[str]) -> None:
        self.ctx = ctx
        self.values = values
        self.settles = settles
        self.stored: dict[str, Any] = {}
        self.outcome: bool | str | None = None


_RECORDED = frozenset({"states", "session", _SETTLED})
"""The parts of a checkpoint's body a record writes (``_Progress._write``): two bodies alike in
every other part are the same pause (``_Progress._same_pause``)."""
_REBASES = 3
"""How often a record refused for another resume's records in the pause (``_same_pause``) is
written over them again before it gives up: each time, the lapsed resume wrote once more
meanwhile, which it stops doing at its next look at its claim."""


def _settled(body: dict[str, Any]) -> list[Any]:
    """The ids a checkpoint's body notes as settled: none unless a list (compared, never hashed:
    a checkpoint written elsewhere may hold anything there)."""
    settled = body.get(_SETTLED)
    return settled if isinstance(settled, list) else []
