"""Which paused runs wait, and on what: read from the checkpoints themselves, without resuming.

A service that pauses runs for approval needs the list of pending checkpoints — to show a person
what waits on them, to expire old ones. Kept by the service beside the store, that list drifts from
it (a resumed run deletes its checkpoint; a crash between the two writes leaves them out of step),
so ``list_pending`` reads it from the store: the ids from ``ids(prefix)``
(``ListingCheckpointStore``), then each checkpoint, decoded as a resume would (checksum verified,
registered types rebuilt by validation: no code runs, nothing is unpickled) but only as far as its
points. A checkpoint that cannot be read is listed with its error instead of ending the listing.

The gets go out ``_BATCH`` at a time: a listing of a network store is then bound by the round
trips of its batches, not of every checkpoint, while only that many checkpoints are held at once.

Only the summary in a checkpoint's header is read (``codec._read_summary``: the agent, run id, save
time and points, checked by a checksum of their own and the checkpoint's length): the history, the
session and the saved states, most of a long run's bytes, are neither parsed nor hashed. A store
that can send only each checkpoint's first ``_HEAD`` bytes and its length does (``heads``, the
optional ``HeadReadingCheckpointStore``: SQLite, Redis, PostgreSQL, or a user's store); another
store's whole bytes are read, and only their header parsed. A checkpoint without a summary to
trust (saved by an older pyadk, or damaged) is read whole, as before, so it is listed with the
error a resume would meet; one damaged in its body without its length changing lists from its
summary, and its resume refuses it: the header's checksum of the body could be checked only by
hashing every history, which a listing exists not to read (docs/interrupts.md).

A checkpoint being resumed stays in the store until its resume ends, so each entry says whether a
resume holds it (``resuming``): one a service's approvals page must not offer to approve again (a
second resume is refused). This process's own resumes are known without asking the store; those
of other processes by their claims, which the built-in stores read for a whole batch in one round
trip (``_claimed_ids``: private, as DESIGN.md names no such method), sent beside the batch's gets.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Generator, Sequence
from typing import Any, cast

from .._record_keys import listed
from ..interrupts import InterruptPoint
from ._claim import resumed_here
from ._points import parse_points, still_waiting
from .codec import _SETTLED, CheckpointError, _read_summary, decode_checkpoint
from .store import CheckpointStore, _check_prefix, _from_store, _reads_heads_claimed

__all__ = ["PendingCheckpoint", "list_pending"]

_BATCH = 16
"""Checkpoints read at once while listing."""
_HEAD = 64 * 1024
"""Bytes of a checkpoint read for its header, in stores that can send a checkpoint's first bytes
(``heads``): far more than a summary of a few points takes; a longer header is read whole."""


class PendingCheckpoint:
    """A paused run's checkpoint, as ``list_pending`` reads it.

    ``checkpoint_id``: what ``Runner.resume`` takes. ``agent``: the root agent's name (the runner
    that can resume it has an agent of that name). ``run_id``: the paused run's id.
    ``points``: what it waits on, as the interrupt event reported them (``id`` is the key of the
    ``{point_id: data}`` a resume takes; ``info`` what the person is asked). ``saved_at``: when it
    paused, in seconds since the epoch (``time.time()``), or ``None`` for checkpoints saved by a
    pyadk that did not record it. ``resuming``: whether a resume holds the checkpoint now — in
    this process, or (in a store that keeps claims: every built-in one but the in-memory store)
    in any process; it stays listed until that resume ends (and, if the run pauses again, after
    it), but a resume of it now is refused as "already being resumed".

    ``key`` and ``index``: for the pause of a keyed record of an execution environment
    (``LocalExecutionEnvironment``/``FlinkExecutionEnvironment``: ``keyed`` is True), its key, as
    a resume names it (a JSON value, an array as a tuple; a key that is not one, ``bytes``, as
    its ``repr``, which only the key itself resumes), and its position in the stream, as its
    ``KeyedOutput.index`` was (on Flink, the operator's count); a resume's new pause keeps its
    record's. So an approvals page shows "record 17 (key 'acme')" and builds the resume
    (``{"key", "checkpoint_id", "run_id", "resume"}``). ``None`` (``keyed`` False) for any other
    run's pause, and for a keyed one saved by a pyadk before this was listed; ``index`` alone is
    ``None`` for the pause of a resume of a checkpoint saved before the index was.

    ``error``: the ``CheckpointError`` that kept the checkpoint from being read (damaged, from a
    newer pyadk, naming a type not registered in this process: its ``reason``, ``"corrupt"``,
    ``"other_version"`` or ``"incompatible"``, says which); the other fields are then empty
    (``agent``, ``run_id``, ``saved_at``, ``key`` and ``index`` ``None``, ``keyed`` False,
    ``points`` ``[]``). Resuming it fails the same way.

    A plain slotted class rather than a dataclass, whose creation would cost more when this
    module loads (at a process's first listing, not with ``import adk``: see the package's
    docstring) for a record only a listing builds.
    """

    __slots__ = (
        "_key_shown",
        "agent",
        "checkpoint_id",
        "error",
        "index",
        "key",
        "keyed",
        "points",
        "resuming",
        "run_id",
        "saved_at",
    )

    def __init__(
        self,
        checkpoint_id: str,
        *,
        agent: str | None = None,
        run_id: str | None = None,
        points: list[InterruptPoint] | None = None,
        saved_at: float | None = None,
        error: CheckpointError | None = None,
        resuming: bool = False,
        keyed: bool = False,
        key: Any = None,
        index: int | None = None,
    ) -> None:
        self.checkpoint_id = checkpoint_id
        self.agent = agent
        self.run_id = run_id
        self.points: list[InterruptPoint] = points if points is not None else []
        self.saved_at = saved_at
        self.error = error
        self.resuming = resuming
        self.keyed = keyed
        self.key = key
        self.index = index
        # The type of a key listed as its repr (not a JSON value: ``bytes``), else None.
        self._key_shown: str | None = None

    @property
    def point_ids(self) -> list[str]:
        """The pending points' ids: the keys of the ``{point_id: data}`` that a resume takes."""
        return [point.id for point in self.points]

    def __repr__(self) -> str:
        if self.error is not None:
            return f"PendingCheckpoint({self.checkpoint_id!r}, error={str(self.error)!r})"
        resuming = ", resuming=True" if self.resuming else ""
        record = f", key={self.key!r}, index={self.index!r}" if self.keyed else ""
        return (
            f"PendingCheckpoint({self.checkpoint_id!r}, agent={self.agent!r}{record}, "
            f"point_ids={self.point_ids!r}, saved_at={self.saved_at!r}{resuming})"
        )


class _Listing(AsyncIterator[PendingCheckpoint]):
    """What ``list_pending`` (and ``Runner.pending``) give: an async iterator of the entries,
    that may also be awaited for a list of them (``await runner.pending()``), which a new user
    tries first and which failed with Python's "async_generator can't be used in 'await'
    expression". Awaited after some entries were read, it gives the rest; either way the
    store's listing is closed at the end (or at ``aclose``)."""

    __slots__ = ("_awaited", "_entries")

    def __init__(self, entries: AsyncGenerator[PendingCheckpoint, None]) -> None:
        self._entries = entries
        self._awaited = False

    def __aiter__(self) -> _Listing:
        return self

    def __anext__(self) -> Awaitable[PendingCheckpoint]:
        return self._entries.__anext__()

    def aclose(self) -> Awaitable[None]:
        """Stop the listing early, closing the store's listing of ids."""
        return self._entries.aclose()

    def __await__(self) -> Generator[Any, None, list[PendingCheckpoint]]:
        # Awaited again it would give [], read as "no run waits": refused, as a coroutine is.
        if self._awaited:
            raise RuntimeError(
                "this listing of pending checkpoints was awaited already and is read once: "
                "call runner.pending() (or list_pending) again for a fresh one"
            )
        self._awaited = True
        return self._all().__await__()

    async def _all(self) -> list[PendingCheckpoint]:
        try:
            return [entry async for entry in self._entries]
        finally:
            await self._entries.aclose()


def list_pending(
    store: CheckpointStore, prefix: str | None = None, *, agent: str | None = None
) -> _Listing:
    """The checkpoints of paused runs in ``store`` whose ids start with ``prefix`` (all for
    ``None``), as ``PendingCheckpoint``s, streamed in the order the store lists its ids
    (``async for``), or all at once as a list (``await list_pending(...)``).

    With ``agent``, only the checkpoints of runs whose root agent has that name, and those that
    cannot be read (whose agent is unknown). Left out: checkpoints deleted since their id was
    listed (resumed meanwhile), and those of finished runs kept for audit
    (``Runner(keep_checkpoints=True)``). A checkpoint that cannot be read is listed with its
    ``error`` and the listing goes on; a store that fails (``CheckpointStoreError``) ends it.

    ``store`` must be able to list its ids (``ListingCheckpointStore``: every built-in store is);
    any other is a ``TypeError`` here, as are a prefix or agent that are not strings.
    """
    return _Listing(_listing(store, prefix, agent, rebuild=True))


def _listing(
    store: CheckpointStore,
    prefix: str | None,
    agent: str | None,
    *,
    rebuild: bool,
    batch: int = _BATCH,
) -> AsyncGenerator[PendingCheckpoint, None]:
    """``list_pending``; ``rebuild=False`` keeps each point's info as its stored JSON (registered
    types as their tagged data): for ``pyadk checkpoint list``, whose process has none of the
    application's types registered, and prints JSON anyway. ``batch``: checkpoints read at once
    (the command reads more a round trip than a service, which holds less at once)."""
    ids = getattr(store, "ids", None)
    if not callable(ids):
        name = type(store).__name__
        raise TypeError(
            f"listing pending checkpoints needs a store that can list its ids, and {name} has no "
            f"ids() method: add `def ids(self, prefix: str | None = None) -> AsyncIterator[str]` "
            f"to {name}, yielding the ids it holds that start with prefix (all for None), as "
            "adk.checkpoint.ListingCheckpointStore describes"
        )
    start = _check_prefix(prefix)
    if agent is not None and not isinstance(agent, str):
        raise TypeError(f"agent must be an agent's name (a str) or None, got {agent!r}")
    listing: AsyncIterator[str] = ids(start or None)
    return _pending(store, listing, agent, rebuild, batch)


async def _pending(
    store: CheckpointStore,
    listing: AsyncIterator[str],
    agent: str | None,
    rebuild: bool,
    size: int = _BATCH,
) -> AsyncGenerator[PendingCheckpoint, None]:
    try:
        batch: list[str] = []
        async for checkpoint_id in listing:
            batch.append(checkpoint_id)
            if len(batch) == size:
                for entry in await _read(store, batch, agent, rebuild):
                    yield entry
                batch = []
        for entry in await _read(store, batch, agent, rebuild):
            yield entry
    finally:
        closer = getattr(listing, "aclose", None)
        if closer is not None:
            await closer()


async def _read(
    store: CheckpointStore, batch: list[str], agent: str | None, rebuild: bool
) -> list[PendingCheckpoint]:
    """The entries of ``batch``'s checkpoints, read at once with which of them are claimed; the
    first store failure is raised once every read has ended, so none is left running."""
    if not batch:
        return []
    lookup = getattr(store, "_claimed_ids", None)
    heads = getattr(store, "heads", None)
    found: list[object]
    claimed: object = set()
    if heads is not None and lookup is not None and _reads_heads_claimed(store):
        # Both in one round trip (Redis's ``_heads_claimed``).
        found_heads, claimed = await store._heads_claimed(batch, _HEAD)  # type: ignore[attr-defined]
        found = [found_heads]
    else:
        reads: list[Awaitable[object]]
        if heads is not None:
            reads = [heads(batch, _HEAD)]
        else:
            reads = [_from_store(store.get(id), "get", id) for id in batch]
        if lookup is not None:
            reads.append(lookup(batch))
        found = await _gathered(reads)
        if lookup is not None:
            claimed = found.pop()
    # Checked once the reads have ended, so it is as fresh as what they found.
    resuming = resumed_here(store, batch) | cast("set[str]", claimed)
    # What each checkpoint is: its summary, the whole bytes (to decode), or None (gone).
    read: list[dict[str, Any] | object]
    if heads is not None:
        read = []
        whole: list[int] = []  # places of those without a summary to trust: read whole
        for place, head in enumerate(_checked_heads(store, found[0], len(batch))):
            summary = _read_summary(*head) if head is not None else None
            if head is not None and summary is None:
                whole.append(place)
            read.append(summary)
        if whole:
            gets = [_from_store(store.get(batch[p]), "get", batch[p]) for p in whole]
            for place, data in zip(whole, await _gathered(gets), strict=True):
                read[place] = data
    else:
        read = found
    entries = []
    for checkpoint_id, data in zip(batch, read, strict=True):
        if data is None:
            continue  # resumed (or deleted) since it was listed: no longer pending
        entry = _entry(checkpoint_id, data, rebuild)
        if entry is not None and entry.error is None:
            entry.resuming = checkpoint_id in resuming
        if entry is None or (agent is not None and entry.agent not in (agent, None)):
            continue
        entries.append(entry)
    return entries


def _checked_heads(store: object, found: object, count: int) -> list[tuple[bytes, int] | None]:
    """What ``store.heads`` gave for ``count`` ids, refused unless it is one (first bytes,
    length) or None per id (a user's store may implement it): else the listing would fail deep
    in its reading, or pair a head with another id's checkpoint."""
    if isinstance(found, list) and len(found) == count:
        for head in found:
            if head is not None and not (
                isinstance(head, tuple)
                and len(head) == 2
                and isinstance(head[0], bytes)
                and type(head[1]) is int
            ):
                break
        else:
            return found
    shown = repr(found)
    raise TypeError(
        f"{type(store).__name__}.heads(ids, limit) gave "
        f"{shown if len(shown) <= 200 else shown[:200] + '...'} for {count} ids; it must give a "
        "list of one (first bytes, length) or None per id, in the ids' order "
        "(adk.checkpoint.HeadReadingCheckpointStore)"
    )


async def _gathered(reads: Sequence[Awaitable[object]]) -> list[object]:
    """The outcomes of ``reads``; the first store failure is raised once every read has ended."""
    found = await asyncio.gather(*reads, return_exceptions=True)
    for outcome in found:
        if isinstance(outcome, BaseException):
            raise outcome
    return found


def _entry(checkpoint_id: str, data: Any, rebuild: bool) -> PendingCheckpoint | None:
    """What the checkpoint waits on, from its summary (a dict) or its bytes (``data``); None for
    a finished run kept for audit."""
    try:
        if isinstance(data, dict):
            body = data
        elif not isinstance(data, bytes | bytearray | memoryview):
            raise CheckpointError(
                f"checkpoint {checkpoint_id!r} cannot be read: the store returned "
                f"{type(data).__name__}, not bytes",
                reason="corrupt",
            )
        else:
            # The header alone when it carries a summary: the rest is not parsed nor hashed.
            summary = _read_summary(bytes(data[:_HEAD]), len(data))
            body = summary if summary is not None else decode_checkpoint(bytes(data), checkpoint_id)
        if body.get("finished"):
            return None
        agent = body.get("agent")
        if not isinstance(agent, str):
            raise CheckpointError(
                f"checkpoint {checkpoint_id!r} is malformed: agent is not a str", reason="corrupt"
            )
        # Not the points of calls a failed or abandoned resume ran and recorded: their answers
        # are not needed again (``_progress``).
        points = still_waiting(
            parse_points(body, checkpoint_id, rebuild=rebuild), body.get(_SETTLED)
        )
    except CheckpointError as exc:
        return PendingCheckpoint(checkpoint_id, error=exc)
    run_id = body.get("run_id")
    saved = body.get("saved_at")
    saved_at: float | None = None  # not recorded (an older pyadk): the listing does not fail
    if isinstance(saved, int | float) and not isinstance(saved, bool) and math.isfinite(saved):
        saved_at = float(saved)
    # A keyed record's: its key and index (unread, in a form of a later pyadk: not keyed).
    record = listed(body.get("record_key"))
    entry = PendingCheckpoint(
        checkpoint_id,
        agent=agent,
        run_id=run_id if isinstance(run_id, str) else None,
        points=points,
        saved_at=saved_at,
        keyed=record is not None,
        key=record[0] if record is not None else None,
        index=record[1] if record is not None else None,
    )
    if record is not None:
        entry._key_shown = record[2]
    return entry
