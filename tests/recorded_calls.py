"""What the tests of a resume that must not repeat a recorded call share
(test_action_records_calls, test_resume_records_calls): ``stores``, a factory of stores over
one place (in memory, a SQLite file, a Redis key prefix), each call a store of its own as
another worker's would be; ``runner_over``, a runner over one such store, closed after; and
``stuck_ship``, an approved shipping tool that never ends. A test module brings the fixture in
with ``from recorded_calls import stores_fixture``; its name differs from the function's so a
test's ``stores`` parameter shadows no imported name."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from services import RedisServer

from adk import Runner, tool
from adk.checkpoint import (
    CheckpointStore,
    InMemoryCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
)

StoreFactory = Callable[[], CheckpointStore]


@pytest.fixture(name="stores", params=["memory", "sqlite", "redis"])
def stores_fixture(request: pytest.FixtureRequest, tmp_path: Path) -> StoreFactory:
    """A factory of stores over one place: each resume gets its own, as another worker would."""
    if request.param == "memory":
        memory = InMemoryCheckpointStore()
        return lambda: memory
    if request.param == "sqlite":
        return functools.partial(SQLiteCheckpointStore, tmp_path / "checkpoints.db")
    redis_server: RedisServer = request.getfixturevalue("redis_server")
    prefix = f"rc{os.urandom(4).hex()}:"
    return functools.partial(RedisCheckpointStore, redis_server.url, prefix=prefix)


@contextlib.asynccontextmanager
async def runner_over(agent: Any, stores: StoreFactory) -> AsyncIterator[Runner]:
    """A runner of ``agent`` over a store of its own from ``stores``, closed when the block ends
    (the in-memory one is the place itself, kept open)."""
    store = stores()
    try:
        yield Runner(agent, checkpoint_store=store)
    finally:
        close = getattr(store, "aclose", None)
        if close is not None and not isinstance(store, InMemoryCheckpointStore):
            await close()


def stuck_ship() -> Any:
    """An approved shipping tool (``ship``) that never ships: a resume is cut off, or its reader
    leaves, while it runs, so the shipping is not recorded."""
    never = asyncio.Event()

    @tool(require_approval=True, name="ship")
    async def stuck_ship(item: str) -> str:
        """Ship an item once a person approves it (this one never gets to it)."""
        await never.wait()
        return "unreachable"

    return stuck_ship
