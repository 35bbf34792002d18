"""The ``pyadk`` command: look into paused runs without writing code.

``pyadk checkpoint show ID --sqlite PATH`` prints what a paused run waits on (its points and their
info) as JSON, so an operator can see what a person is being asked before resuming it. Reading a
checkpoint verifies its checksum and runs no code.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from . import __version__, checkpoint
from .checkpoint.codec import CheckpointError, decode_checkpoint
from .checkpoint.store import CheckpointStore

__all__ = ["main"]


def _store(args: argparse.Namespace) -> CheckpointStore:
    # The Redis and PostgreSQL stores are loaded by adk.checkpoint only when first named here.
    if args.sqlite:
        return checkpoint.SQLiteCheckpointStore(args.sqlite)
    if args.redis:
        return checkpoint.RedisCheckpointStore(args.redis)
    return checkpoint.PostgresCheckpointStore(args.postgres)


async def _show(args: argparse.Namespace) -> dict[str, Any]:
    store = _store(args)
    try:
        data = await store.get(args.checkpoint_id)
    finally:
        closer = getattr(store, "aclose", None)
        if closer is not None:
            await closer()
    if data is None:
        raise CheckpointError(f"no checkpoint {args.checkpoint_id!r}")
    body = decode_checkpoint(data, args.checkpoint_id)
    summary = {
        "checkpoint_id": args.checkpoint_id,
        "agent": body.get("agent"),
        "run_id": body.get("run_id"),
        "points": body.get("points", []),
        "history_entries": len(body.get("history", [])),
        "session_keys": sorted(body.get("session", {})),
        "bytes": len(data),
    }
    if args.full:
        summary["body"] = body
    return summary


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pyadk", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"pyadk {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    checkpoint = commands.add_parser("checkpoint", help="inspect checkpoints of paused runs")
    actions = checkpoint.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print a checkpoint's pending points as JSON")
    show.add_argument("checkpoint_id")
    where = show.add_mutually_exclusive_group(required=True)
    where.add_argument("--sqlite", metavar="PATH", help="SQLite checkpoint file")
    where.add_argument("--redis", metavar="URL", help="Redis URL (pyadk[redis])")
    where.add_argument("--postgres", metavar="DSN", help="PostgreSQL DSN (pyadk[postgres])")
    show.add_argument("--full", action="store_true", help="also print the whole checkpoint body")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        summary = asyncio.run(_show(args))
    except (CheckpointError, checkpoint.CheckpointStoreError, OSError) as exc:
        print(f"pyadk: {exc}", file=sys.stderr)
        return 1
    json.dump(summary, sys.stdout, indent=2, ensure_ascii=False)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
