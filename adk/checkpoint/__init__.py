"""Checkpoint stores: where a paused run's checkpoint bytes are kept.

The protocols and the in-memory store (every ``Runner``'s default) load with the package.
``SQLiteCheckpointStore``, ``RedisCheckpointStore`` and ``PostgresCheckpointStore`` load on first
access, so ``import adk`` stays light and never imports ``redis`` or ``asyncpg`` (it works without
them installed). So do ``list_pending`` and ``PendingCheckpoint`` (what paused runs wait on), and
the modules only pausing and resuming need (``_snapshot``, ``_claim``, ``_pending``, ``_points``):
the runner reaches them as attributes of this package (``checkpoint._claim.one_resume``), so a run
that never pauses never loads them, nor a program that never runs one.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..interrupts import InterruptPoint
from ..messages import Message
from .codec import register_type
from .memory import InMemoryCheckpointStore
from .store import (
    CheckpointStore,
    CheckpointStoreError,
    ClaimingCheckpointStore,
    HeadReadingCheckpointStore,
    ListingCheckpointStore,
)

if TYPE_CHECKING:
    from . import _claim as _claim
    from . import _pending as _pending
    from . import _points as _points
    from . import _progress as _progress
    from . import _snapshot as _snapshot
    from ._pending import PendingCheckpoint, list_pending
    from .postgres import PostgresCheckpointStore
    from .redis import RedisCheckpointStore
    from .sqlite import SQLiteCheckpointStore

__all__ = [
    "CheckpointStore",
    "CheckpointStoreError",
    "ClaimingCheckpointStore",
    "HeadReadingCheckpointStore",
    "InMemoryCheckpointStore",
    "ListingCheckpointStore",
    "PendingCheckpoint",
    "PostgresCheckpointStore",
    "RedisCheckpointStore",
    "SQLiteCheckpointStore",
    "list_pending",
]

# The framework's own types that states, infos and events' custom data commonly hold, under stable
# names: registered with the package, which every checkpoint and every event's JSON form imports
# (in ``_snapshot``, which loads only when a run pauses, an event's ``to_dict`` would miss them).
for _model, _name in (
    (Message, "adk.Message"),
    (InterruptPoint, "adk.InterruptPoint"),
):
    register_type(_model, _name)
del _model, _name

# name -> (module, the third-party package it needs or "" for none, the pyadk extra that installs it)
_LAZY = {
    "PendingCheckpoint": ("._pending", "", ""),
    "list_pending": ("._pending", "", ""),
    # SQLite needs only the standard library, but its worker thread machinery is not free to import.
    "SQLiteCheckpointStore": (".sqlite", "sqlite3", ""),
    "RedisCheckpointStore": (".redis", "redis", "redis"),
    "PostgresCheckpointStore": (".postgres", "asyncpg", "postgres"),
}


# Submodules of this package loaded on first access (see the module docstring).
_LAZY_MODULES = frozenset({"_claim", "_pending", "_points", "_progress", "_snapshot"})


def _lazy_attribute(name: str) -> Any:
    if name in _LAZY_MODULES:
        # Importing binds the submodule on this package, so later lookups skip this hook.
        return importlib.import_module(f".{name}", __name__)
    try:
        module_name, dependency, extra = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    try:
        module = importlib.import_module(module_name, __name__)
    except ModuleNotFoundError as exc:
        if not dependency or (exc.name or "").partition(".")[0] != dependency:
            raise
        raise ModuleNotFoundError(
            f"{name} needs {dependency!r}, which is not installed: pip install 'pyadk[{extra}]'",
            name=dependency,
        ) from exc
    value = getattr(module, name)
    globals()[name] = value  # later lookups skip this hook
    return value


if not TYPE_CHECKING:
    # Hidden from type checkers, which see the lazy names' imports above instead: a module
    # ``__getattr__`` makes every other name they look up its return type, without an error,
    # so a misspelt import (``from adk.checkpoint import SQLiteStore``) type-checked as ``Any``.
    __getattr__ = _lazy_attribute


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
