"""Checkpoint stores: where a paused run's checkpoint bytes are kept.

The protocols, the in-memory store and ``list_pending`` (what paused runs wait on) load with the
package. ``SQLiteCheckpointStore``,
``RedisCheckpointStore`` and ``PostgresCheckpointStore`` load on first access, so ``import adk``
stays light and never imports ``redis`` or ``asyncpg`` (it works without them installed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._pending import PendingCheckpoint, list_pending
from .memory import InMemoryCheckpointStore
from .store import (
    CheckpointStore,
    CheckpointStoreError,
    ClaimingCheckpointStore,
    ListingCheckpointStore,
)

if TYPE_CHECKING:
    from .postgres import PostgresCheckpointStore
    from .redis import RedisCheckpointStore
    from .sqlite import SQLiteCheckpointStore

__all__ = [
    "CheckpointStore",
    "CheckpointStoreError",
    "ClaimingCheckpointStore",
    "InMemoryCheckpointStore",
    "ListingCheckpointStore",
    "PendingCheckpoint",
    "PostgresCheckpointStore",
    "RedisCheckpointStore",
    "SQLiteCheckpointStore",
    "list_pending",
]

# name -> (module, the third-party package it needs, the pyadk extra that installs it)
_LAZY = {
    # SQLite needs only the standard library, but its worker thread machinery is not free to import.
    "SQLiteCheckpointStore": (".sqlite", "sqlite3", ""),
    "RedisCheckpointStore": (".redis", "redis", "redis"),
    "PostgresCheckpointStore": (".postgres", "asyncpg", "postgres"),
}


def __getattr__(name: str) -> Any:
    try:
        module_name, dependency, extra = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    try:
        module = importlib.import_module(module_name, __name__)
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] != dependency:
            raise
        raise ModuleNotFoundError(
            f"{name} needs {dependency!r}, which is not installed: pip install 'pyadk[{extra}]'",
            name=dependency,
        ) from exc
    value = getattr(module, name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
