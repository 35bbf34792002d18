"""A table of the checkpoint table's name that some other program made (other columns) is refused
with an error naming the table and what a checkpoint table has, by the stores and by ``pyadk
checkpoint``, over real SQLite files and a real PostgreSQL server. It failed on first use with the
driver's words (``no such column: data``, ``column "data" does not exist``), naming neither the
table nor what was expected, and the table was left as it was (it still is)."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest
from services import PostgresServer

from adk.checkpoint import CheckpointStoreError, PostgresCheckpointStore, SQLiteCheckpointStore

pytest_plugins = ["services"]

# Each with what the error says of the table's columns.
FOREIGN = {
    "other columns": ("name TEXT PRIMARY KEY, value TEXT", "(name, value) with primary key (name)"),
    "no primary key": ("id TEXT, data BLOB, updated_at REAL", "and no primary key"),
}
EXPECTED = "id (its primary key), data and updated_at"


def _pyadk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adk.cli", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("kind", FOREIGN)
async def test_sqlite_refuses_another_programs_table(tmp_path: Path, kind: str) -> None:
    columns, said = FOREIGN[kind]
    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(f"CREATE TABLE pyadk_checkpoints ({columns})")
    async with SQLiteCheckpointStore(path) as store:
        for operation in (store.put("c-1", b"x"), store.get("c-1")):
            with pytest.raises(CheckpointStoreError) as caught:
                await operation
            message = str(caught.value)
            assert "table pyadk_checkpoints is not a checkpoint table" in message
            assert said in message and EXPECTED in message and str(path) in message
    done = _pyadk("checkpoint", "list", "--sqlite", str(path))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("pyadk: ") and "is not a checkpoint table" in done.stderr
    with contextlib.closing(sqlite3.connect(path)) as conn:  # left as it was
        assert conn.execute("SELECT count(*) FROM pyadk_checkpoints").fetchone() == (0,)


async def test_sqlite_takes_its_own_table(tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    async with SQLiteCheckpointStore(path) as store:
        await store.put("c-1", b"x")
    async with SQLiteCheckpointStore(path) as store:  # the table exists now
        assert await store.get("c-1") == b"x"


@pytest.fixture
async def database(postgres_server: PostgresServer) -> AsyncIterator[str]:
    """The DSN of a new, empty database."""
    yield await postgres_server.new_database("foreign")


@pytest.mark.parametrize("kind", FOREIGN)
async def test_postgres_refuses_another_programs_table(database: str, kind: str) -> None:
    columns, said = FOREIGN[kind]
    conn = await asyncpg.connect(database)
    try:
        await conn.execute("CREATE SCHEMA app")
        await conn.execute(f"CREATE TABLE app.jobs ({columns.replace('BLOB', 'bytea')})")
    finally:
        await conn.close()
    async with PostgresCheckpointStore(database, table="app.jobs") as store:
        for operation in (store.put("c-1", b"x"), store.get("c-1")):
            with pytest.raises(CheckpointStoreError) as caught:
                await operation
            message = str(caught.value)
            assert "table app.jobs is not a checkpoint table" in message
            assert said in message and EXPECTED in message and "table=" in message
    done = _pyadk("checkpoint", "list", "--postgres", database, "--table", "app.jobs")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("pyadk: ") and "is not a checkpoint table" in done.stderr
    conn = await asyncpg.connect(database)
    try:
        assert await conn.fetchval("SELECT count(*) FROM app.jobs") == 0
    finally:
        await conn.close()


async def test_postgres_takes_its_own_table_and_reads_a_missing_one_as_before(
    database: str,
) -> None:
    done = _pyadk("checkpoint", "list", "--postgres", database)
    assert done.returncode == 1
    assert 'relation "pyadk_checkpoints" does not exist' in done.stderr
    async with PostgresCheckpointStore(database) as store:
        await store.put("c-1", b"x")
    async with PostgresCheckpointStore(database) as store:  # the table exists now
        assert await store.get("c-1") == b"x"
    done = _pyadk("checkpoint", "list", "--postgres", database)
    assert done.returncode == 0, done.stderr
