"""One resume of a checkpoint at a time: in this process, and through the store across processes.

Two workers that receive the same approval (a double click, a webhook delivered twice) would
otherwise both read the checkpoint before either deleted it, and both run the approved call. The
runner takes a claim before reading the checkpoint, renews it while the resume runs, and releases
it when the resume ends, however it ends. Within one process a cheaper guard comes first, and is
all that stores without claims (a user's three-method store, the in-memory one) get.

A claim is a lease: it lapses ``claim_ttl`` seconds after it was last taken, so a process that dies
mid-resume blocks the checkpoint only that long. The holder counts from when it *sent* each
renewal, so by its own clock its lease always ends no later than the store's; when a renewal fails
or comes too late (the store unreachable, the event loop blocked) the holder treats the claim as
lost — another process may hold it — and the runner stops the resume at its next event without
writing the checkpoint.

The store decides a lapse by its own clock: the wall clock of the machine for SQLite, the
server's for Redis and PostgreSQL. Counted by ``time.monotonic`` alone, a step of that clock
(NTP stepping it forward, a VM resumed) lapsed the claim for another process while its holder
still believed it held: two resumes ran. So the holder reads the store's clock too when it can
(``_lease_clock``: SQLite's, the wall clock every process on the machine shares) and counts its
lease on both, from when it sent each renewal, taking the earlier end. A server's clock cannot be
read without a request; there, and everywhere, a renewal holds only while the claim stored is
still the holder's and has not lapsed (``_renew``: ``claim`` would take a lapsed claim back, one
another resume may have taken and released meanwhile), so a holder whose claim lapsed by the
store's clock learns it at its next renewal, ``claim_ttl / 3`` at most after it lapsed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

from .._aio import being_cancelled, finish
from .codec import CheckpointBusyError, CheckpointError
from .store import (
    CheckpointStore,
    CheckpointStoreError,
    ClaimingCheckpointStore,
    _own_failure,
    _renews,
    _stray_cancellation,
)

__all__ = ["one_resume"]

logger = logging.getLogger("adk.checkpoint")

_HOST = socket.gethostname()


class _Claim:
    """A held claim on ``checkpoint_id`` in ``store`` (see the module docstring)."""

    __slots__ = (
        "_clock",
        "_clock_until",
        "_lost",
        "_renewer",
        "_stop",
        "_valid_until",
        "checkpoint_id",
        "owner",
        "store",
    )

    def __init__(self, store: ClaimingCheckpointStore, checkpoint_id: str) -> None:
        self.store = store
        self.checkpoint_id = checkpoint_id
        # Readable in the store (which host and process holds it) and unique per resume.
        self.owner = f"{_HOST}:{os.getpid()}:{os.urandom(6).hex()}"
        self._lost = False
        self._valid_until = 0.0
        # The store's own clock, when it can be read here (``_lease_clock``), and when the claim
        # ends by it: a step of that clock lapses the claim for a taker, and so for its holder.
        self._clock: Callable[[], float] | None = getattr(store, "_lease_clock", None)
        self._clock_until = 0.0
        self._stop = asyncio.Event()
        self._renewer: asyncio.Task[None] | None = None

    @property
    def lost(self) -> bool:
        """Whether the claim may have passed to another owner: a renewal said so, or it has
        lapsed by the holder's count (``time.monotonic``) or by the store's clock."""
        if self._lost or time.monotonic() >= self._valid_until:
            return True
        clock = self._clock
        return clock is not None and clock() >= self._clock_until

    async def acquire(self) -> None:
        """Take the claim, or raise ``CheckpointBusyError`` when another resume holds it."""
        ttl = self.store.claim_ttl
        sent = time.monotonic()
        clock = self._clock
        sent_by_clock = clock() if clock is not None else 0.0
        # Run to its end (``finish``): cancelled while the store writes, the claim may still be
        # taken (a SQLite write in its thread, a command already sent) and would then block every
        # resume of the checkpoint until it lapsed. So the attempt ends, however often we are
        # cancelled meanwhile (anyio cancels at every await), and, if it took the claim, gives
        # it back before the cancellation goes on.
        attempt = asyncio.ensure_future(self.store.claim(self.checkpoint_id, self.owner))
        try:
            taken = await finish(attempt)
        except asyncio.CancelledError as exc:
            if not being_cancelled():  # the store's own: nobody cancelled us
                raise _stray_cancellation("claim", self.checkpoint_id) from exc
            await self._give_back(attempt)
            raise
        except (CheckpointStoreError, CheckpointError):  # a refusal of its own too: _is_refusal
            raise
        except Exception as exc:  # a store of your own's error (an OSError): see _own_failure
            raise _own_failure("claim", self.checkpoint_id, exc) from exc
        if not taken:
            raise CheckpointBusyError(
                f"checkpoint {self.checkpoint_id!r} is already being resumed (another run holds "
                f"its claim in {self.store!r}, perhaps in another process); a checkpoint is "
                "resumed once at a time. Resume it again once that run has ended, if it paused "
                f"again; if that run's process died, its claim lapses within {ttl:g} s"
            )
        self._valid_until = sent + ttl
        self._clock_until = sent_by_clock + ttl
        self._renewer = asyncio.get_running_loop().create_task(self._renew(ttl))

    async def _give_back(self, attempt: asyncio.Future[bool]) -> None:
        """Release the claim ``attempt`` (ended) took, if it took it (the acquire was cancelled),
        to its end however often we are cancelled meanwhile: the caller raises its cancellation
        afterwards."""
        if attempt.cancelled() or attempt.exception() is not None or not attempt.result():
            return  # it failed: nothing to give back (a claim it wrote lapses within claim_ttl)
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await finish(self.store.release(self.checkpoint_id, self.owner))

    async def release(self) -> None:
        """Stop renewing and end the claim, even if the resume is being cancelled again
        meanwhile (``finish``: an anyio cancel scope, as when a Starlette client hangs up, cancels
        every await; the claim would stay and refuse every resume until it lapsed). A failed
        release is logged, not raised: the resume's outcome is settled, and the claim lapses."""
        await finish(self._release())

    async def _release(self) -> None:
        # A renewal in flight is let finish rather than cancelled: cancelled, its command might
        # still reach the server after the release and leave a claim that blocks the checkpoint
        # until it lapses.
        self._stop.set()
        if self._renewer is not None:
            await self._renewer
        if self._lost:
            return  # not ours any more: releasing could end another owner's claim
        try:
            await self.store.release(self.checkpoint_id, self.owner)
        except (Exception, asyncio.CancelledError) as exc:  # a store's own errors too
            if isinstance(exc, asyncio.CancelledError) and being_cancelled():
                raise  # (nothing cancels this task but the loop shutting down)
            failure = (  # a CancelledError of the store's own: nobody cancelled it
                _stray_cancellation("release", self.checkpoint_id)
                if isinstance(exc, asyncio.CancelledError)
                else exc
            )
            logger.warning(
                "could not release the claim on checkpoint %r (it lapses within %g s): %s",
                self.checkpoint_id,
                self.store.claim_ttl,
                failure,
                exc_info=None if isinstance(failure, CheckpointStoreError) else failure,
            )

    async def _renew(self, ttl: float) -> None:
        store = self.store
        # Only while the claim stored is still ours, unlapsed, where the store can (see the
        # module's docstring); a store of your own's ``claim`` (or a subclass's) otherwise.
        renew = store._renew if _renews(store) else store.claim  # type: ignore[attr-defined]
        clock = self._clock
        while not self._stop.is_set():
            try:
                await asyncio.wait_for(self._stop.wait(), ttl / 3)
                return
            except TimeoutError:
                pass
            sent = time.monotonic()
            sent_by_clock = clock() if clock is not None else 0.0
            try:
                held = await renew(self.checkpoint_id, self.owner)
            except (Exception, asyncio.CancelledError) as exc:  # a store's own errors too
                if isinstance(exc, asyncio.CancelledError) and being_cancelled():
                    raise  # (nothing cancels the renewals but the loop shutting down)
                # Keep trying: the claim holds until ``_valid_until`` without a renewal.
                reason = str(exc) or type(exc).__name__
                logger.warning("could not renew the claim on %r: %s", self.checkpoint_id, reason)
                continue
            if not held:
                self._lost = True
                return
            if sent < self._valid_until and (clock is None or sent_by_clock < self._clock_until):
                self._valid_until = sent + ttl
                self._clock_until = sent_by_clock + ttl
            else:
                # The claim had lapsed before this renewal was sent; someone may have taken and
                # released it meanwhile (a store of your own's ``claim`` takes it back then), so
                # ``lost`` stays true, also if the store's clock steps back. (Not ``_lost``: the
                # store holds the claim for us again, which the release ends.)
                self._valid_until = 0.0


@asynccontextmanager
async def one_resume(store: CheckpointStore, checkpoint_id: str) -> AsyncIterator[_Claim | None]:
    """Hold ``checkpoint_id`` for one resume: refused with ``CheckpointBusyError`` while another
    resume holds it; the store's claim (None for stores without claims) for the body to watch."""
    with _in_process(store, checkpoint_id):
        claim = await _claim(store, checkpoint_id)
        try:
            yield claim
        finally:
            if claim is not None:
                await claim.release()


_RESUMING: dict[int, set[str]] = {}
"""Checkpoint ids being resumed in this process, by ``id()`` of their store (an entry lives only
while a resume runs, and the resume holds the store, so the id cannot be reused meanwhile)."""
_RESUMING_LOCK = threading.Lock()
"""Guards ``_RESUMING``: the in-memory and SQLite stores may be shared by event loops in several
threads, and check-then-add must be one step or two threads could both resume one checkpoint."""


@contextmanager
def _in_process(store: CheckpointStore, checkpoint_id: str) -> Iterator[None]:
    """Hold ``checkpoint_id`` for one resume at a time in this process, across runners sharing
    the store object, without a round trip to the store."""
    key = id(store)
    with _RESUMING_LOCK:
        claimed = _RESUMING.setdefault(key, set())
        if checkpoint_id in claimed:
            raise CheckpointBusyError(
                f"checkpoint {checkpoint_id!r} is already being resumed; a checkpoint is resumed "
                "once at a time (resume it again once that run has ended, if it paused again)"
            )
        claimed.add(checkpoint_id)
    try:
        yield
    finally:
        with _RESUMING_LOCK:
            claimed.discard(checkpoint_id)
            if not claimed:
                del _RESUMING[key]


def being_resumed(store: CheckpointStore, checkpoint_id: str) -> bool:
    """Whether a run in this process is resuming ``checkpoint_id`` of ``store`` now."""
    with _RESUMING_LOCK:
        claimed = _RESUMING.get(id(store))
        return claimed is not None and checkpoint_id in claimed


def resumed_here(store: CheckpointStore, checkpoint_ids: list[str]) -> set[str]:
    """Which of ``checkpoint_ids`` of ``store`` a run in this process is resuming now (one lock
    for a listing's batch)."""
    with _RESUMING_LOCK:
        claimed = _RESUMING.get(id(store))
        return set() if claimed is None else claimed.intersection(checkpoint_ids)


async def _claim(store: CheckpointStore, checkpoint_id: str) -> _Claim | None:
    """The claim on ``checkpoint_id``, taken; None for a store that cannot claim (a user's
    three-method store, the in-memory one: the runner's in-process guard is all they get)."""
    if not isinstance(store, ClaimingCheckpointStore):
        return None
    claim = _Claim(store, checkpoint_id)
    await claim.acquire()
    return claim
