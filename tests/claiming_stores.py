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


@pytest.fixture(name="make_store", params=["sqlite", "redis", "postgres"])
async def make_store_fixture(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[StoreFactory]:
    unique = uuid.uuid4().hex[:12]
    factory: Callable[..., Any]
    if request.param == "sqlite":
        factory = functools.partial(SQLiteCheckpointStore, tmp_path / "checkpoints.db")
    elif request.param == "redis":
        redis_server: RedisServer = request.getfixturevalue("redis_server")
        factory = functools.partial(RedisCheckpointStore, redis_server.url, prefix=f"c{unique}:")
    else:
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        factory = functools.partial(PostgresCheckpointStore, pg.dsn, table=f"cl_{unique}")
    made: list[Any] = []

    def make(**options: Any) -> ClaimingCheckpointStore:
        store = factory(**options)
        made.append(store)
        return store

    yield make
    for store in made:
        await store.aclose()
