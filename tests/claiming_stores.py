"""What the claim tests share (test_resume_claims, test_claim_clocks): ``make_store``, new
store objects over one backend's data (SQLite, Redis, PostgreSQL), each with the options it is
given, as separate processes would have; every one made is closed after the test. A test module
brings the fixture in with ``from claiming_stores import make_store_fixture``; its name differs
from the function's so a test's ``make_store`` parameter shadows no imported name."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from services import PostgresServer, RedisServer

from adk.checkpoint import (
    ClaimingCheckpointStore,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
)

StoreFactory = Callable[..., ClaimingCheckpointStore]


def backend_factory(request: pytest.FixtureRequest, tmp_path: Path, tag: str) -> Callable[..., Any]:
    """A maker of new store objects over one backend's data, by the fixture's param (``sqlite``,
    ``redis`` or ``postgres``: the server fixtures of ``services.py``), each test's data kept
    apart by ``tag`` and a unique suffix (a Redis prefix, a PostgreSQL table)."""
    unique = uuid.uuid4().hex[:12]
    if request.param == "sqlite":
        return functools.partial(SQLiteCheckpointStore, tmp_path / "checkpoints.db")
    if request.param == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        return functools.partial(RedisCheckpointStore, redis_server.url, prefix=f"{tag}{unique}:")
    pg: PostgresServer = request.getfixturevalue("postgres_server")
    return functools.partial(PostgresCheckpointStore, pg.dsn, table=f"{tag}_{unique}")


@pytest.fixture(name="make_store", params=["sqlite", "redis", "postgres"])
async def make_store_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreFactory]:
    factory = backend_factory(request, tmp_path, "cl")
    made: list[Any] = []

    def make(**options: Any) -> ClaimingCheckpointStore:
        store = factory(**options)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.aclose()
