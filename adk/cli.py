"""The ``pyadk`` command: look into paused runs without writing code.

``pyadk checkpoint show ID --sqlite PATH`` prints what a paused run waits on (its points and their
info) as JSON, so an operator can see what a person is being asked before resuming it.
``pyadk checkpoint list --sqlite PATH`` prints every paused run of the store, one JSON object a
line as they are read (a store may hold many). Reading a checkpoint verifies its checksum and runs
no code.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Awaitable, Sequence
from typing import Any, cast

from . import __version__, checkpoint
from ._nonfinite import dumps_finite
from ._record_keys import listed
from .checkpoint._pending import PendingCheckpoint, _gathered, _listing
from .checkpoint._points import still_waiting
from .checkpoint.codec import (
    _SETTLED,
    CheckpointError,
    CheckpointNotFoundError,
    decode_checkpoint,
)
from .checkpoint.sqlite import _ReadOnlySQLiteStore
from .checkpoint.store import CheckpointStore, _check_id, _check_prefix

__all__ = ["main"]


def _store(args: argparse.Namespace) -> CheckpointStore:
    """The store the arguments name; ``ValueError`` for a malformed path, URL or table name.
    Stores are opened read-only: showing a checkpoint never creates a SQLite file (nor the
    directories of a mistyped path: a path that is not a file is a ``FileNotFoundError``), nor a
    PostgreSQL table in the database named (and works with a role that can only read)."""
    if args.table is not None and args.postgres is None:
        raise ValueError("--table names a PostgreSQL table: use it with --postgres")
    if args.key_prefix is not None and args.redis is None:
        raise ValueError("--key-prefix is the Redis store's key prefix: use it with --redis")
    if args.sqlite is not None:
        store = _ReadOnlySQLiteStore(args.sqlite)
        if store.path != ":memory:" and not os.path.isfile(store.path):
            raise FileNotFoundError(f"no SQLite checkpoint file at {store.path}")
        return store
    # The Redis and PostgreSQL stores' modules import their clients: loaded only when named.
    if args.redis is not None:
        if args.key_prefix is None:
            return checkpoint.RedisCheckpointStore(args.redis)
        return checkpoint.RedisCheckpointStore(args.redis, prefix=args.key_prefix)
    # The public name first: without asyncpg it says which extra to install, as Redis's does.
    checkpoint.PostgresCheckpointStore  # noqa: B018
    from .checkpoint.postgres import _ReadOnlyPostgresStore

    return _ReadOnlyPostgresStore(args.postgres, args.table or "pyadk_checkpoints")


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
        closer = getattr(store, "aclose", None)
        if closer is not None:
            await closer()
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
    try:
        # Closed before the store, also when the listing stops early: its ids are read from it.
        async with contextlib.aclosing(
            _listing(store, args.prefix, args.agent, rebuild=False)
        ) as entries:
            async for entry in entries:
                status = _printed(_to_json(_listed(entry), indent=None))
                if status:
                    return status
    finally:
        closer = getattr(store, "aclose", None)
        if closer is not None:
            await closer()
    return 0


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
        if args.action == "list":
            _check_prefix(args.prefix)
        else:
            _check_id(args.checkpoint_id)
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
        summary = asyncio.run(_show(store, args))
    except (CheckpointError, checkpoint.CheckpointStoreError, OSError) as exc:
        print(f"pyadk: {exc}", file=sys.stderr)
        return 2 if _malformed_dsn(args, exc) else 1
    return _printed(_to_json(summary, indent=2))


if __name__ == "__main__":
    raise SystemExit(main())
