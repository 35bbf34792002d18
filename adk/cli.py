"""The ``pyadk`` command: look into paused runs without writing code.

``pyadk checkpoint show ID --sqlite PATH`` prints what a paused run waits on (its points and their
info) as JSON, so an operator can see what a person is being asked before resuming it.
``pyadk checkpoint list --sqlite PATH`` prints every paused run of the store, one JSON object a
line as they are read (a store may hold many); ``--older-than 7d`` only those paused before then.
Reading a checkpoint verifies its checksum and runs no code.
``pyadk checkpoint delete ID --sqlite PATH`` deletes a paused run an operator abandons, and
``delete --older-than 7d`` every paused run that old (the expiry job), each under a claim of its
own, as a resume takes one: one a resume holds is left, and none is deleted under a resume.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, cast

from . import __version__, checkpoint
from ._aio import finish
from ._nonfinite import dumps_finite
from ._record_keys import listed
from .checkpoint._pending import PendingCheckpoint, _entry, _gathered, _listing
from .checkpoint._points import still_waiting
from .checkpoint.codec import (
    _SETTLED,
    CheckpointError,
    CheckpointNotFoundError,
    decode_checkpoint,
)
from .checkpoint.sqlite import _ExistingSQLiteStore, _ReadOnlySQLiteStore
from .checkpoint.store import (
    CheckpointStore,
    ClaimingCheckpointStore,
    _check_id,
    _check_prefix,
)

__all__ = ["main"]


def _store(args: argparse.Namespace) -> CheckpointStore:
    """The store the arguments name; ``ValueError`` for a malformed path, URL or table name.
    ``show`` and ``list`` open stores read-only: they never create a SQLite file (nor the
    directories of a mistyped path: a path that is not a file is a ``FileNotFoundError``), nor a
    PostgreSQL table in the database named (and work with a role that can only read). ``delete``
    writes, but creates no file nor checkpoint table either. ``--timeout`` bounds each store
    operation (SQLite's wait for another process's lock)."""
    if args.table is not None and args.postgres is None:
        raise ValueError("--table names a PostgreSQL table: use it with --postgres")
    if args.key_prefix is not None and args.redis is None:
        raise ValueError("--key-prefix is the Redis store's key prefix: use it with --redis")
    writes = args.action == "delete"
    if args.sqlite is not None:
        wait = args.timeout or _SQLITE_WAIT
        if writes:
            store: _ExistingSQLiteStore | _ReadOnlySQLiteStore = _ExistingSQLiteStore(
                args.sqlite, busy_timeout=wait, claim_ttl=_claim_ttl(wait)
            )
        else:
            store = _ReadOnlySQLiteStore(args.sqlite, busy_timeout=wait)
        if store.path != ":memory:" and not os.path.isfile(store.path):
            raise FileNotFoundError(f"no SQLite checkpoint file at {store.path}")
        return store
    timeout = args.timeout or _NETWORK_TIMEOUT
    # The Redis and PostgreSQL stores' modules import their clients: loaded only when named.
    if args.redis is not None:
        prefix = {} if args.key_prefix is None else {"prefix": args.key_prefix}
        return checkpoint.RedisCheckpointStore(
            args.redis, timeout=timeout, claim_ttl=_claim_ttl(timeout), **prefix
        )
    # The public name first: without asyncpg it says which extra to install, as Redis's does.
    checkpoint.PostgresCheckpointStore  # noqa: B018
    from .checkpoint.postgres import _ExistingPostgresStore, _ReadOnlyPostgresStore

    kind_pg = _ExistingPostgresStore if writes else _ReadOnlyPostgresStore
    return kind_pg(
        args.postgres,
        args.table or "pyadk_checkpoints",
        timeout=timeout,
        claim_ttl=_claim_ttl(timeout),
    )


def _claim_ttl(timeout: float) -> float:
    """How long the delete's claim lasts: a store's 30 s and the time the operations made under
    it may take (reading the checkpoint again, the compare-and-delete; each within ``timeout``,
    twice that for PostgreSQL's wait for a pooled connection and then the statement). Not
    renewed (SQLite's renewal would wait behind the statement it is to outlast): lasting less,
    a slow compare-and-delete found it lapsed and deleted what a resume had claimed meanwhile.
    A command killed holding it (kill -9) refuses resumes that long; Ctrl-C releases it. At
    most ``_LONGEST_CLAIM``: Redis and PostgreSQL refuse an expiry past their range (a
    ``--timeout 1e300``'s), where the claim failed."""
    return min(_CLAIM_TTL + 4 * timeout, _LONGEST_CLAIM)


_CLAIM_TTL = 30.0
"""The stores' own ``claim_ttl``."""
_LONGEST_CLAIM = 1e9
"""About 31 years: longer than any operation waits, within every store's range of expiries."""


_SQLITE_WAIT = 30.0
"""``--timeout``'s default for SQLite: the store's own ``busy_timeout``."""
_NETWORK_TIMEOUT = 10.0
"""``--timeout``'s default for Redis and PostgreSQL: their stores' own ``timeout``."""


async def _closed(store: CheckpointStore) -> None:
    closer = getattr(store, "aclose", None)
    if closer is not None:
        await closer()


async def _show(store: CheckpointStore, args: argparse.Namespace) -> dict[str, Any]:
    # Whether a resume holds it, read beside it as ``checkpoint list`` does: an operator shown a
    # paused run must not be led to approve one another process is already resuming (its resume
    # would be refused). Only claims tell (the command's own process resumes nothing); a store
    # that keeps none (a custom one) says False, as in the listing.
    lookup = getattr(store, "_claimed_ids", None)
    reads: list[Awaitable[object]] = [store.get(args.checkpoint_id)]
    if lookup is not None:
        reads.append(lookup([args.checkpoint_id]))
    try:
        found = await _gathered(reads)  # both end before the store closes
    finally:
        await _closed(store)
    data = cast("bytes | None", found[0])
    claimed = cast("set[str]", found[1]) if lookup is not None else set()
    if data is None:
        raise CheckpointNotFoundError(f"no checkpoint {args.checkpoint_id!r}")
    body = decode_checkpoint(data, args.checkpoint_id)
    _check_shape(body, args.checkpoint_id)
    summary = {
        "checkpoint_id": args.checkpoint_id,
        "agent": body.get("agent"),
        "run_id": body.get("run_id"),
        "saved_at": body.get("saved_at"),
        # A run kept for audit (keep_checkpoints=True) after its resume finished still holds the
        # points it paused at; without this an operator reads them as a decision still awaited.
        "finished": bool(body.get("finished")),
        "resuming": args.checkpoint_id in claimed,
        # A keyed record's pause: its key and index, as the listing shows them.
        **_record_of(body),
        # Not the points of calls a resume ran and recorded (their answers are not needed).
        "points": still_waiting(body.get("points", []), body.get(_SETTLED)),
        "history_entries": len(body.get("history", [])),
        "session_keys": sorted(body.get("session", {})),
        "bytes": len(data),
    }
    if args.full:
        summary["body"] = body
    return summary


def _record_of(body: dict[str, Any]) -> dict[str, Any]:
    record = listed(body.get("record_key"))
    return {"key": record[0], "index": record[1]} if record is not None else {}


def _check_shape(body: dict[str, Any], checkpoint_id: str) -> None:
    """Refuse a body whose checksum matches but that is not shaped as pyadk writes it (another
    tool's, or edited and sealed again), as a ``CheckpointError``: the summary reads these parts,
    and would otherwise fail with a traceback. What a listing checks (``parse_points``), and the
    history and session the summary counts."""
    for part, kind, name in (
        ("agent", str, "a str"),
        ("points", list, "a list"),
        ("history", list, "a list"),
        ("session", dict, "an object"),
    ):
        # Only the agent is required: an older pyadk's body may lack the others.
        if (part in body or part == "agent") and not isinstance(body.get(part), kind):
            raise CheckpointError(
                f"checkpoint {checkpoint_id!r} is malformed: {part} is not {name}",
                reason="corrupt",
            )


async def _list(store: CheckpointStore, args: argparse.Namespace) -> int:
    """Print each pending checkpoint as it is read: a listing may be long, and what was printed
    before a store failure stays useful. The exit status: 0, or ``_printed``'s once a line cannot
    be written (the reader gone, a full disk), where the listing stops and the store is closed."""
    cutoff = _cutoff(args)
    try:
        # Closed before the store, also when the listing stops early: its ids are read from it.
        async with contextlib.aclosing(
            _listing(store, args.prefix, args.agent, rebuild=False, batch=_CLI_BATCH)
        ) as entries:
            async for entry in entries:
                if cutoff is not None and not _older(entry, cutoff):
                    continue
                status = _printed(_to_json(_listed(entry), indent=None))
                if status:
                    return status
    finally:
        await _closed(store)
    return 0


def _cutoff(args: argparse.Namespace) -> float | None:
    """The ``saved_at`` before which a run paused to be ``--older-than`` (None: not asked)."""
    return None if args.older_than is None else _now() - args.older_than


_now = time.time
"""The clock ``--older-than`` counts back from, as ``saved_at`` is written (a seam for tests)."""


def _older(entry: PendingCheckpoint, cutoff: float) -> bool:
    """Whether ``entry`` is a readable run's pause saved before ``cutoff``. One without an age
    (unreadable: its ``error``; saved by a pyadk that did not record ``saved_at``) is not: an
    expiry job must not delete what no one has looked at (``list`` without ``--older-than`` shows
    them)."""
    return entry.error is None and entry.saved_at is not None and entry.saved_at < cutoff


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _duration(text: str) -> float:
    """``--older-than``'s ``7d``, ``12h``, ``30m``, ``90s``, ``1w``, or parts of them
    (``1d12h``) as seconds; anything else is a malformed command line."""
    parts = list(_DURATION.finditer(text))
    if not parts or "".join(part.group(0) for part in parts) != text:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: write a number and a unit, s, m, h, d or w (7d, 12h, "
            "30m, 1d12h)"
        )
    seconds = sum(float(part.group(1)) * _UNITS[part.group(2)] for part in parts)
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(f"{text!r} is too long a duration")
    return seconds


def _seconds(text: str) -> float:
    """``--timeout``'s seconds: a finite number above zero."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


class _Refused(Exception):
    """A delete not made, on purpose (a resume holds it, it changed, the operator said no): its
    message is said, and the status is 1."""


async def _delete(store: CheckpointStore, args: argparse.Namespace) -> int:
    try:
        if args.older_than is not None:
            return await _delete_older(store, args)
        return await _delete_one(store, args)
    finally:
        await _closed(store)


async def _delete_one(store: CheckpointStore, args: argparse.Namespace) -> int:
    """Delete ``args.checkpoint_id``'s checkpoint: looked at (and shown to confirm), then deleted
    under a claim, only if it still holds the bytes looked at."""
    checkpoint_id: str = args.checkpoint_id
    lookup = getattr(store, "_claimed_ids", None)
    reads: list[Awaitable[object]] = [store.get(checkpoint_id)]
    if lookup is not None:
        reads.append(lookup([checkpoint_id]))
    found = await _gathered(reads)
    data = cast("bytes | None", found[0])
    if data is None:
        raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id!r}")
    if lookup is not None and checkpoint_id in cast("set[str]", found[1]):
        raise _Refused(_BEING_RESUMED.format(checkpoint_id))
    if not args.yes and not _confirmed(f"delete {_described(checkpoint_id, data)}?"):
        raise _Refused(f"checkpoint {checkpoint_id!r} not deleted")
    outcome = await _deleted_under_claim(store, checkpoint_id, lambda now: now == data)
    if outcome == "deleted":
        return _printed(_to_json({"checkpoint_id": checkpoint_id, "deleted": True}, indent=None))
    if outcome == "gone":
        raise CheckpointNotFoundError(f"no checkpoint {checkpoint_id!r} (deleted meanwhile)")
    if outcome == "resuming":
        raise _Refused(_BEING_RESUMED.format(checkpoint_id))
    raise _Refused(
        f"checkpoint {checkpoint_id!r} changed since it was read (a resume paused it again): "
        "not deleted; look at it again (pyadk checkpoint show)"
    )


_BEING_RESUMED = (
    "checkpoint {!r} is being resumed (a resume holds its claim): not deleted; delete it once "
    "that resume has ended, if it paused again"
)


async def _delete_older(store: CheckpointStore, args: argparse.Namespace) -> int:
    """The expiry job: every readable paused run saved before the cutoff, each deleted under a
    claim once read again under it (not paused again since listed), printed as deleted; the
    counts on stderr."""
    cutoff = _cutoff(args)
    assert cutoff is not None
    counts = dict.fromkeys(("deleted", "resuming", "changed", "gone"), 0)
    old: list[str] = []
    async with contextlib.aclosing(
        _listing(store, args.prefix, args.agent, rebuild=False, batch=_CLI_BATCH)
    ) as entries:
        async for entry in entries:
            if _older(entry, cutoff):
                if entry.resuming:
                    counts["resuming"] += 1
                else:
                    old.append(entry.checkpoint_id)
    if old and not args.yes:
        question = f"delete the {len(old)} checkpoints of runs paused before {_when(cutoff)}?"
        if not _confirmed(question):
            raise _Refused("nothing deleted")

    def still_old(checkpoint_id: str) -> Callable[[bytes], bool]:
        def old_enough(data: bytes) -> bool:
            entry = _entry(checkpoint_id, data, False)
            if entry is None or not _older(entry, cutoff):
                return False
            return args.agent is None or entry.agent == args.agent

        return old_enough

    status = 0
    try:
        for checkpoint_id in old:
            outcome = await _deleted_under_claim(store, checkpoint_id, still_old(checkpoint_id))
            counts[outcome] += 1
            if outcome == "deleted" and not status:
                line = {"checkpoint_id": checkpoint_id, "deleted": True}
                status = _printed(_to_json(line, indent=None))
                if status:
                    break  # the reader left: no more deleted unseen
    finally:
        with contextlib.suppress(OSError):
            print(
                f"pyadk: deleted {counts['deleted']} checkpoints of runs paused before "
                f"{_when(cutoff)}; left {counts['resuming']} a resume holds, "
                f"{counts['changed']} paused again since listed, {counts['gone']} gone "
                "meanwhile",
                file=sys.stderr,
            )
    return status


async def _deleted_under_claim(
    store: CheckpointStore, checkpoint_id: str, still: Callable[[bytes], bool]
) -> str:
    """Delete ``checkpoint_id``'s checkpoint under a claim of the command's own, as a resume
    takes one: while held, no resume starts (it is refused as busy), and one that holds it
    refuses this. Read again under it, deleted only if ``still`` says so of what is there, with
    the store's compare-and-delete (``_delete_if``): nothing comes between the check and the
    delete. ``"deleted"``, ``"resuming"`` (a resume holds it), ``"gone"``, ``"changed"``."""
    if not isinstance(store, ClaimingCheckpointStore):  # never: every built-in store claims
        raise TypeError(f"{type(store).__name__} keeps no claims")
    owner = f"pyadk-checkpoint-delete:{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"
    # Run to their end (``finish``): cancelled (Ctrl-C) while the store writes, a claim taken
    # would refuse every resume until it lapsed; one taken as the command was cancelled is
    # given back before the cancellation goes on.
    attempt = asyncio.ensure_future(store.claim(checkpoint_id, owner))
    try:
        taken = await finish(attempt)
    except asyncio.CancelledError:
        if not attempt.cancelled() and attempt.exception() is None and attempt.result():
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await finish(store.release(checkpoint_id, owner))
        raise
    if not taken:
        return "resuming"
    try:
        data = await store.get(checkpoint_id)
        if data is None:
            return "gone"
        if not still(data):
            return "changed"
        if await finish(_delete_if(store, checkpoint_id, data)):
            return "deleted"
        return "gone" if await store.get(checkpoint_id) is None else "changed"
    finally:
        try:
            await finish(store.release(checkpoint_id, owner))
        except checkpoint.CheckpointStoreError as exc:
            with contextlib.suppress(OSError):
                print(
                    f"pyadk: warning: the claim on checkpoint {checkpoint_id!r} could not be "
                    f"released (it lapses within {store.claim_ttl:g} s): {exc}",
                    file=sys.stderr,
                )


async def _delete_if(store: CheckpointStore, checkpoint_id: str, data: bytes) -> bool:
    deleting = getattr(store, "_delete_if", None)
    if deleting is None:  # never: every built-in store has it
        raise TypeError(f"{type(store).__name__} cannot compare and delete")
    return bool(await deleting(checkpoint_id, data))


def _described(checkpoint_id: str, data: bytes) -> str:
    """What the confirmation asks about: whose run, since when, waiting on how many points."""
    entry = _entry(checkpoint_id, data, False)
    if entry is None:
        return f"checkpoint {checkpoint_id!r} (a finished run kept for audit)"
    if entry.error is not None:
        return f"checkpoint {checkpoint_id!r} (unreadable: {entry.error})"
    since = "" if entry.saved_at is None else f", paused at {_when(entry.saved_at)}"
    points = len(entry.points)
    return (
        f"checkpoint {checkpoint_id!r} (agent {entry.agent!r}, run {entry.run_id!r}{since}, "
        f"waiting on {points} point{'s' if points != 1 else ''})"
    ).translate(_TERMINAL_UNSAFE)


def _when(seconds: float) -> str:
    """``seconds`` since the epoch as a UTC date, or as seconds where the platform has no date
    for them (a cutoff ``--older-than`` a very long time: before year 1, or before 1970 on
    Windows)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))
    except (OverflowError, OSError, ValueError):
        return f"{seconds:.0f} s from 1970-01-01 UTC"


def _confirmed(question: str) -> bool:
    """Ask ``question`` on the terminal (stderr: stdout carries JSON); yes only for y or yes.
    Ctrl-C ends the question (``KeyboardInterrupt``, nothing deleted; see ``_interruptible``)."""
    print(f"{question} [y/N] ", end="", file=sys.stderr, flush=True)
    with _interruptible():
        answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C raises ``KeyboardInterrupt`` here, in the main thread's blocking read: asyncio.run's
    handler of SIGINT only cancels its task, which cannot run while the loop waits in the read
    (retried after the signal, PEP 475), so the question went on waiting and read the answer
    typed next. Python's own handler is put back for the read, and asyncio's after it."""
    replaced = threading.current_thread() is threading.main_thread()  # only there it can be
    previous = signal.signal(signal.SIGINT, signal.default_int_handler) if replaced else None
    try:
        yield
    finally:
        if replaced:  # None: a handler not set from Python (an embedding's)
            signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


_CLI_BATCH = 256
"""Checkpoints the command reads at once: a listing of a network store is bound by its round
trips, two a batch (heads, claims) and asyncpg's reset of each connection as it goes back to its
pool, which ``list_pending``'s 16 (a service's, holding little at once) made 5,000 for 20,000
runs in PostgreSQL. At most 256 heads of 64 KiB (16 MiB) held at once; a few KiB each, as a
checkpoint's header is."""

_READER_GONE = 141
"""The exit status once the output's reader has left (``pyadk checkpoint list ... | head``): 128
plus SIGPIPE's number, as a command the signal ended has, so a pipeline read with ``pipefail``
tells it from a store failure (1). Python ignores SIGPIPE, so a write to the closed pipe raises
``BrokenPipeError`` instead, an ``OSError``, which was reported as ``pyadk: [Errno 32] Broken
pipe`` with status 1 (a listing), or a traceback (``show``)."""


def _printed(text: str) -> int:
    """Print ``text`` as a line, flushed; the exit status: 0, ``_READER_GONE`` when the output's
    reader has left (a closed pipe), 1 when the output cannot be written (a full disk: said on
    stderr, not as a store's failure, nor as a traceback). Once a write failed, stdout is pointed
    at the null device so the interpreter's flush at exit does not fail again on what is still
    buffered (as Python's docs on SIGPIPE advise)."""
    try:
        print(text, flush=True)
    except OSError as exc:
        with contextlib.suppress(OSError, ValueError):  # a stdout with no descriptor
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        if isinstance(exc, BrokenPipeError):
            return _READER_GONE
        with contextlib.suppress(OSError):  # stderr on the same full disk: nothing to tell
            print(f"pyadk: could not write the output: {exc}", file=sys.stderr)
        return 1
    return 0


def _listed(entry: PendingCheckpoint) -> dict[str, Any]:
    if entry.error is not None:
        error = entry.error
        return {"checkpoint_id": entry.checkpoint_id, "error": str(error), "reason": error.reason}
    return {
        "checkpoint_id": entry.checkpoint_id,
        "agent": entry.agent,
        "run_id": entry.run_id,
        "saved_at": entry.saved_at,
        "resuming": entry.resuming,
        **({"key": entry.key, "index": entry.index} if entry.keyed else {}),
        "points": [{"id": p.id, "address": p.address, "info": p.info} for p in entry.points],
    }


def _where(parser: argparse.ArgumentParser) -> None:
    """The options naming the store (exactly one)."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--sqlite", metavar="PATH", help="SQLite checkpoint file")
    where.add_argument("--redis", metavar="URL", help="Redis URL (pyadk[redis])")
    where.add_argument("--postgres", metavar="DSN", help="PostgreSQL DSN (pyadk[postgres])")
    parser.add_argument(
        "--table", help="the PostgreSQL store's table, if not pyadk_checkpoints (schema.table too)"
    )
    parser.add_argument(
        "--key-prefix", help="the Redis store's key prefix, if not 'pyadk:checkpoint:'"
    )
    parser.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help="seconds each store operation may take before the command fails (Redis and "
        "PostgreSQL: 10; SQLite, waiting for another process's write lock: 30)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyadk", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"pyadk {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    checkpoint = commands.add_parser("checkpoint", help="inspect checkpoints of paused runs")
    actions = checkpoint.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print a checkpoint's pending points as JSON")
    show.add_argument("checkpoint_id")
    _where(show)
    show.add_argument("--full", action="store_true", help="also print the whole checkpoint body")
    listing = actions.add_parser(
        "list", help="print every paused run's checkpoint, one JSON object a line"
    )
    _where(listing)
    listing.add_argument("--prefix", help="only the checkpoint ids that start with PREFIX")
    listing.add_argument("--agent", help="only the runs of the root agent named AGENT")
    listing.add_argument(
        "--older-than",
        type=_duration,
        metavar="DURATION",
        help="only the runs that paused longer ago than DURATION (7d, 12h, 30m, 1d12h), by "
        "their saved_at; not those without one (unreadable, or saved by an older pyadk)",
    )
    deleting = actions.add_parser(
        "delete",
        help="delete a paused run's checkpoint (or every one --older-than), never one a resume "
        "holds",
        description="Delete the checkpoint ID (a paused run abandoned: it can no longer be "
        "resumed), or with --older-than every paused run that old. Each is deleted under a "
        "claim, as a resume takes one: one a resume holds is not deleted, and no resume "
        "starts while it is. Asks first on a terminal; --yes to skip that (required when "
        "stdin is not a terminal).",
    )
    deleting.add_argument("checkpoint_id", nargs="?", help="the checkpoint to delete")
    _where(deleting)
    deleting.add_argument(
        "--older-than",
        type=_duration,
        metavar="DURATION",
        help="instead of ID: every paused run that paused longer ago than DURATION (7d, 12h, "
        "30m), each printed as it is deleted, counts on stderr",
    )
    deleting.add_argument(
        "--prefix", help="with --older-than: only the checkpoint ids that start with PREFIX"
    )
    deleting.add_argument(
        "--agent", help="with --older-than: only the runs of the root agent named AGENT"
    )
    deleting.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    return parser


# Characters JSON leaves raw (it escapes only C0 controls) that a terminal acts on or that change
# how text reads: DEL and the C1 controls (U+009B is CSI, U+009D OSC: colours, a window title, a
# hyperlink, in terminals that take 8-bit controls), and the bidirectional overrides, isolates
# and marks (a right-to-left override shows the text after it reversed). A checkpoint holds what
# models wrote, and the command prints it to an operator's terminal: each is written as its
# \u escape, which reads back as the same JSON. Only inside strings: JSON's own syntax is ASCII.
_TERMINAL_UNSAFE = {
    code: f"\\u{code:04x}"
    for code in (
        *range(0x7F, 0xA0),
        0x061C,
        0x200E,
        0x200F,
        *range(0x202A, 0x202F),
        *range(0x2066, 0x206A),
    )
}


def _to_json(value: Any, indent: int | None) -> str:
    """``value`` as standard JSON: checkpoints written before the codec refused NaN and
    infinities may hold them, and each is printed as its ``str`` (``"nan"``, ``"inf"``). Text
    holding a lone surrogate (a model's ``"\\ud800"`` escape), which has no UTF-8 form to
    print, is written ASCII-escaped, as the checkpoint holds it; so is text the output's
    encoding cannot write (``€`` to a Latin-1 locale's pipe, a Windows console's code page),
    which failed with a traceback: ``\\u20ac`` is the same JSON. Terminal controls are escaped
    (``_TERMINAL_UNSAFE``)."""
    text = dumps_finite(value, str, indent=indent, ensure_ascii=False)
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (UnicodeEncodeError, LookupError):
        return dumps_finite(value, str, indent=indent, ensure_ascii=True)
    return text.translate(_TERMINAL_UNSAFE)


def _malformed_dsn(args: argparse.Namespace, exc: Exception) -> bool:
    """Whether ``exc`` is asyncpg's refusal of ``--postgres``'s DSN (a ``ValueError``: its
    ``ClientConfigurationError``, or urllib's and ``int``'s as it parses): a malformed command
    line, as a Redis URL that is not one. The store refuses a DSN that is no postgresql:// URL
    when it is made (a ``ValueError`` from ``_store``); the rest asyncpg reads only as it
    connects, so the store reports it from its first operation, as a failure of the store."""
    return args.postgres is not None and isinstance(exc.__cause__, ValueError)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; the exit status is 0 on success, 1 when the checkpoint cannot be shown
    (missing, unreadable, store down) or the listing fails (store down: what was listed before is
    printed) or the output cannot be written (a full disk, said so), 2 for a malformed command line (a PostgreSQL DSN asyncpg refuses included) and 141
    when the output's reader left before the end (``| head``), with nothing on stderr. Ctrl-C
    ends it as it ends Python, killed by SIGINT (a shell shows 130, and a shell loop running it
    stops too), but without the traceback through asyncio's machinery, once ``asyncio.run`` has
    cancelled the reading, which closes the store; given ``argv`` (called from Python, not as
    the command) the ``KeyboardInterrupt`` is raised to the caller. A listed checkpoint that
    cannot be read is a line with its ``error``, not a failure."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        if argv is not None:
            raise
        if os.name == "posix":
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return 128 + signal.SIGINT  # where a process cannot be killed by its own SIGINT


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    try:
        _check_arguments(args)
        store = _store(args)
    except ValueError as exc:  # an empty or over-long id, an empty path, a malformed URL
        print(f"pyadk: {exc}", file=sys.stderr)
        return 2
    except (ImportError, OSError) as exc:  # no such file; the store's extra is not installed
        print(f"pyadk: {exc}", file=sys.stderr)
        return 1
    try:
        if args.action == "list":
            return asyncio.run(_list(store, args))
        if args.action == "delete":
            return asyncio.run(_delete(store, args))
        summary = asyncio.run(_show(store, args))
    except _Refused as exc:
        print(f"pyadk: {exc}", file=sys.stderr)
        return 1
    except (CheckpointError, checkpoint.CheckpointStoreError, OSError) as exc:
        print(f"pyadk: {_naming(exc, getattr(args, 'checkpoint_id', None))}", file=sys.stderr)
        return 2 if _malformed_dsn(args, exc) else 1
    return _printed(_to_json(summary, indent=2))


def _check_arguments(args: argparse.Namespace) -> None:
    """Refuse (``ValueError``) what the parser cannot: a malformed id or prefix, ``delete``
    without its one target, or asking for confirmation where no one can answer."""
    if args.action == "list":
        _check_prefix(args.prefix)
        return
    if args.action == "show":
        _check_id(args.checkpoint_id)
        return
    if (args.checkpoint_id is None) == (args.older_than is None):
        raise ValueError("delete takes a checkpoint ID or --older-than DURATION (one of them)")
    if args.checkpoint_id is not None:
        _check_id(args.checkpoint_id)
        if args.prefix is not None or args.agent is not None:
            raise ValueError("--prefix and --agent narrow --older-than: not with an ID")
    else:
        _check_prefix(args.prefix)
    if not args.yes and not _interactive():
        raise ValueError(
            "delete asks for confirmation, and stdin is not a terminal to ask on: add --yes"
        )


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (OSError, ValueError):  # a closed stdin
        return False


def _naming(exc: Exception, checkpoint_id: str | None) -> str:
    """``exc``'s message, naming ``checkpoint_id`` (the one the command is about) when it does
    not: a store's read of its claims (``ids failed``) or a lost connection said which
    operation failed, not on which checkpoint."""
    message = str(exc)
    if checkpoint_id is None or repr(checkpoint_id) in message:
        return message
    return f"checkpoint {checkpoint_id!r}: {message}"


if __name__ == "__main__":
    raise SystemExit(main())
