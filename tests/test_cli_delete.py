"""``pyadk checkpoint delete`` and ``list --older-than``, the store options ``--timeout``, and
errors naming the checkpoint: run in-process (``cli.main(argv)``) against real stores."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest
from services import PostgresServer, RedisServer, public_tables

from adk import AgentEvent, AgentInput, BaseAgent, RunContext, Runner, cli
from adk.checkpoint import PostgresCheckpointStore, RedisCheckpointStore, SQLiteCheckpointStore
from adk.checkpoint.store import CheckpointStore

pytest_plugins = ["services"]


class _Asks(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield ctx.interrupt({"question": "approve payment of 10 EUR?"})


async def _pause(store: CheckpointStore, *checkpoint_ids: str) -> None:
    runner = Runner(_Asks("payments"), checkpoint_store=store)
    for checkpoint_id in checkpoint_ids:
        assert (await runner.invoke("pay", checkpoint_id=checkpoint_id)).interrupt is not None


def _paused(path: Path, *checkpoint_ids: str) -> None:
    async def main() -> None:
        async with SQLiteCheckpointStore(path) as store:
            await _pause(store, *checkpoint_ids)

    asyncio.run(main())


def _ids(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM pyadk_checkpoints")}


def _claim_as_a_resume(path: Path, checkpoint_id: str) -> None:
    """Another process's resume claims ``checkpoint_id`` (a plain connection to the file)."""

    async def main() -> None:
        async with SQLiteCheckpointStore(path) as store:
            assert await store.claim(checkpoint_id, "worker-7")

    asyncio.run(main())


class _Terminal:
    """A stdin that is a terminal, answering ``answer`` (and running ``meanwhile`` first: what
    another process does while the operator reads the question)."""

    def __init__(self, answer: str, meanwhile: object = None) -> None:
        self.answer = answer
        self.meanwhile = meanwhile
        self.asked = 0

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        self.asked += 1
        if callable(self.meanwhile):
            self.meanwhile()
        return self.answer


@pytest.fixture
def paused(tmp_path: Path) -> Path:
    path = tmp_path / "cp.db"
    _paused(path, "c-1", "c-2")
    return path


def test_delete_deletes_one_checkpoint_and_says_so(
    paused: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["checkpoint", "delete", "c-1", "--sqlite", str(paused), "--yes"]) == 0
    assert json.loads(capsys.readouterr().out) == {"checkpoint_id": "c-1", "deleted": True}
    assert _ids(paused) == {"c-2"}

    assert cli.main(["checkpoint", "delete", "c-1", "--sqlite", str(paused), "--yes"]) == 1
    assert capsys.readouterr().err == "pyadk: no checkpoint 'c-1'\n"


def test_delete_refuses_a_checkpoint_a_resume_holds(
    paused: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _claim_as_a_resume(paused, "c-1")
    assert cli.main(["checkpoint", "delete", "c-1", "--sqlite", str(paused), "--yes"]) == 1
    err = capsys.readouterr().err
    assert "checkpoint 'c-1' is being resumed" in err and "not deleted" in err
    assert _ids(paused) == {"c-1", "c-2"}


def test_a_claim_taken_after_the_check_keeps_the_checkpoint(
    paused: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A resume that claims the checkpoint while the operator reads the question (after the
    command looked, before it deletes) is not deleted under: the delete is made under a claim
    of the command's own, which the resume's refuses."""

    def resume_claims() -> None:  # in a thread of its own: the command's loop is waiting here
        worker = threading.Thread(target=_claim_as_a_resume, args=(paused, "c-1"))
        worker.start()
        worker.join()

    terminal = _Terminal("y\n", resume_claims)
    monkeypatch.setattr("sys.stdin", terminal)
    assert cli.main(["checkpoint", "delete", "c-1", "--sqlite", str(paused)]) == 1
    assert terminal.asked == 1
    assert "checkpoint 'c-1' is being resumed" in capsys.readouterr().err
    assert _ids(paused) == {"c-1", "c-2"}


def test_a_checkpoint_paused_again_after_the_check_is_not_deleted(
    paused: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the operator was shown is what is deleted, or nothing: a new pause saved under the
    id meanwhile (a resume that paused again) is left."""

    def paused_again() -> None:
        with sqlite3.connect(paused) as conn:
            (c2,) = conn.execute("SELECT data FROM pyadk_checkpoints WHERE id = 'c-2'").fetchone()
            conn.execute("UPDATE pyadk_checkpoints SET data = ? WHERE id = 'c-1'", (c2,))

    monkeypatch.setattr("sys.stdin", _Terminal("yes\n", paused_again))
    assert cli.main(["checkpoint", "delete", "c-1", "--sqlite", str(paused)]) == 1
    assert "changed since it was read" in capsys.readouterr().err
    assert _ids(paused) == {"c-1", "c-2"}


def test_delete_asks_on_a_terminal_and_refuses_without_yes_elsewhere(
    paused: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = _Terminal("\n")  # Enter: the default, no
    monkeypatch.setattr("sys.stdin", terminal)
    assert cli.main(["checkpoint", "delete", "c-1", "--sqlite", str(paused)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("delete checkpoint 'c-1' (agent 'payments', run ")
    assert "waiting on 1 point)? [y/N] " in err and "pyadk: checkpoint 'c-1' not deleted" in err
    assert _ids(paused) == {"c-1", "c-2"}

    class NotATerminal(_Terminal):
        def isatty(self) -> bool:
            return False

    monkeypatch.setattr("sys.stdin", NotATerminal("y\n"))
    assert cli.main(["checkpoint", "delete", "c-1", "--sqlite", str(paused)]) == 2
    assert "stdin is not a terminal to ask on: add --yes" in capsys.readouterr().err
    assert _ids(paused) == {"c-1", "c-2"}


class _Interrupted(_Terminal):
    """A terminal whose operator presses Ctrl-C at the question (SIGINT to the process, as the
    terminal sends it), then, if the question is still waiting, answers ``y``: a ``readline``
    that SIGINT does not end is retried by Python (PEP 475) and reads on."""

    read_on = False

    def readline(self) -> str:
        os.kill(os.getpid(), signal.SIGINT)
        self.read_on = True  # not reached when Ctrl-C ends the question
        return "y\n"


@pytest.mark.skipif(os.name != "posix", reason="Ctrl-C is sent as SIGINT with os.kill")
@pytest.mark.parametrize("target", [["c-1"], ["--older-than", "0s"]])
def test_ctrl_c_at_the_question_ends_it(
    paused: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    target: list[str],
) -> None:
    """Ctrl-C at the question ends the command, nothing deleted: asyncio.run's handler of
    SIGINT only cancelled the task, which could not run while the loop waited in the question's
    readline, so the question went on waiting (the operator's Ctrl-C did nothing) and a ``y``
    typed next was read."""
    terminal = _Interrupted("y\n")
    monkeypatch.setattr("sys.stdin", terminal)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["checkpoint", "delete", *target, "--sqlite", str(paused)])
    assert not terminal.read_on
    assert "[y/N] " in capsys.readouterr().err
    assert _ids(paused) == {"c-1", "c-2"}
    assert signal.getsignal(signal.SIGINT) is handler  # as it was


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "delete takes a checkpoint ID or --older-than DURATION"),
        (["c-1", "--older-than", "1d"], "delete takes a checkpoint ID or --older-than DURATION"),
        (["c-1", "--agent", "x"], "--prefix and --agent narrow --older-than"),
        (["--older-than", "7x"], "'7x' is not a duration"),
        (["c-1", "--timeout", "0"], "'0' is not a positive number of seconds"),
        (["c-1", "--timeout", "nan"], "'nan' is not a positive number of seconds"),
    ],
)
def test_delete_usage_errors(
    paused: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as raised:
        status = cli.main(["checkpoint", "delete", "--sqlite", str(paused), "--yes", *args])
        raise SystemExit(status)
    assert raised.value.code == 2
    assert message in capsys.readouterr().err
    assert _ids(paused) == {"c-1", "c-2"}


def test_delete_creates_no_file_and_no_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "typo" / "cp.db"
    assert cli.main(["checkpoint", "delete", "c-1", "--sqlite", str(missing), "--yes"]) == 1
    assert "no SQLite checkpoint file" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (x)")
    assert cli.main(["checkpoint", "delete", "c-1", "--sqlite", str(other), "--yes"]) == 1
    assert "no such table: pyadk_checkpoints" in capsys.readouterr().err
    with sqlite3.connect(other) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    assert tables == {"notes"}


def test_list_and_delete_older_than(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The documented expiry job as a command: the runs paused before the cutoff, by their
    saved_at, are listed and deleted, but for one a resume holds and one no resume can read
    (no age to go by); the counts are said."""
    path = tmp_path / "cp.db"
    _paused(path, "a", "b", "c")
    _claim_as_a_resume(path, "b")
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO pyadk_checkpoints VALUES ('junk', x'00', 0)")
    where = ["--sqlite", str(path)]

    assert cli.main(["checkpoint", "list", *where, "--older-than", "1h"]) == 0
    assert capsys.readouterr().out == ""  # none paused an hour ago
    assert cli.main(["checkpoint", "delete", *where, "--older-than", "1h", "--yes"]) == 0
    assert "pyadk: deleted 0 checkpoints" in capsys.readouterr().err
    assert _ids(path) == {"a", "b", "c", "junk"}

    later = time.time() + 2 * 3600
    monkeypatch.setattr(cli, "_now", lambda: later)  # two hours later
    assert cli.main(["checkpoint", "list", *where, "--older-than", "1h30m"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(entry["checkpoint_id"] for entry in listed) == ["a", "b", "c"]
    assert cli.main(["checkpoint", "list", *where, "--older-than", "3h"]) == 0
    assert capsys.readouterr().out == ""

    assert cli.main(["checkpoint", "delete", *where, "--older-than", "1h", "--yes"]) == 0
    captured = capsys.readouterr()
    deleted = [json.loads(line)["checkpoint_id"] for line in captured.out.splitlines()]
    assert sorted(deleted) == ["a", "c"]
    assert "deleted 2 checkpoints" in captured.err and "left 1 a resume holds" in captured.err
    assert _ids(path) == {"b", "junk"}


def test_an_older_than_before_any_calendar_date_says_its_cutoff(
    paused: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A duration so long its cutoff has no calendar date (before year 1, past the platform's
    time_t): no run paused that long ago, and the counts say so. Saying the cutoff failed with
    an OverflowError's traceback (exit 1) from the counts' message."""
    where = ["--sqlite", str(paused), "--older-than", "9999999999999999d", "--yes"]
    assert cli.main(["checkpoint", "delete", *where]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("pyadk: deleted 0 checkpoints of runs paused before -")
    assert "s from 1970-01-01 UTC; left 0 a resume holds" in captured.err
    assert _ids(paused) == {"c-1", "c-2"}


def test_an_error_names_the_checkpoint_it_was_about(
    paused: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store's read of the claims failed as ``ids failed: ...``, naming no checkpoint (here a
    claims table another tool made without the columns pyadk reads)."""
    with sqlite3.connect(paused) as conn:
        conn.execute("CREATE TABLE pyadk_checkpoint_claims (id TEXT PRIMARY KEY)")
    for action in ("show", "delete"):
        args = ["checkpoint", action, "c-1", "--sqlite", str(paused)]
        assert cli.main([*args, "--yes"] if action == "delete" else args) == 1
        err = capsys.readouterr().err
        assert err.startswith("pyadk: checkpoint 'c-1': sqlite checkpoint store at ")
        assert "no such column: expires_at" in err
    assert _ids(paused) == {"c-1", "c-2"}


def test_the_deletes_claim_outlasts_its_slowest_store_operation(
    paused: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command's claim lasted a store's 30 s (``claim_ttl``) however long ``--timeout`` let
    each operation take: a compare-and-delete waiting 31 s for another process's write lock
    (within SQLite's ``busy_timeout``, the timeout) found its claim lapsed, and a resume that
    claimed meanwhile and started the run had the checkpoint deleted under it (its bytes
    unchanged). The clock is moved on, not waited for."""
    from adk.checkpoint import sqlite as sqlite_module
    from adk.checkpoint.sqlite import _ExistingSQLiteStore

    clock = sqlite_module._now
    skew = [0.0]
    monkeypatch.setattr(sqlite_module, "_now", lambda: clock() + skew[0])
    resumed: list[bool] = []
    delete_if = _ExistingSQLiteStore._delete_if

    async def slow(self: _ExistingSQLiteStore, id: str, old: bytes) -> bool:
        skew[0] = 31.0  # the write lock waited for

        async def resume_claims() -> bool:
            async with SQLiteCheckpointStore(paused) as store:
                return await store.claim(id, "worker-7")

        resumed.append(await asyncio.to_thread(asyncio.run, resume_claims()))
        return await delete_if(self, id, old)

    monkeypatch.setattr(_ExistingSQLiteStore, "_delete_if", slow)
    where = ["--sqlite", str(paused), "--timeout", "60", "--yes"]
    assert cli.main(["checkpoint", "delete", "c-1", *where]) == 0
    assert resumed == [False]  # refused: the command's claim still held
    assert _ids(paused) == {"c-2"}


@pytest.fixture(scope="module")
def silent_port() -> Iterator[int]:
    """A port whose listener never answers (connections queue in its backlog): a hung server."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield listener.getsockname()[1]


@pytest.mark.parametrize("scheme", ["redis", "postgres"])
def test_timeout_bounds_each_store_operation_and_the_error_names_the_checkpoint(
    silent_port: int, scheme: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that stops answering held the command for the store's 10 s per operation with
    no way to say less; ``--timeout`` says it, and the error names the checkpoint."""
    where = (
        ["--redis", f"redis://127.0.0.1:{silent_port}/0"]
        if scheme == "redis"
        else ["--postgres", f"postgresql://u@127.0.0.1:{silent_port}/x"]
    )
    for action in (["show", "c-1"], ["delete", "c-1", "--yes"]):
        assert cli.main(["checkpoint", *action, *where, "--timeout", "0.2"]) == 1
        err = capsys.readouterr().err
        assert "'c-1'" in err and "Traceback" not in err
        assert "no answer within 0.2 s" in err or "TimeoutError" in err


async def test_delete_from_redis_under_a_claim(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"cli{uuid.uuid4().hex[:8]}:"
    async with RedisCheckpointStore(redis_server.url, prefix=prefix) as store:
        await _pause(store, "c-1", "c-2")
        assert await store.claim("c-2", "worker-7")
    where = ["--redis", redis_server.url, "--key-prefix", prefix, "--yes"]

    statuses = await asyncio.to_thread(
        lambda: [cli.main(["checkpoint", "delete", id, *where]) for id in ("c-1", "c-2", "c-3")]
    )

    assert statuses == [0, 1, 1]
    err = capsys.readouterr().err
    assert "checkpoint 'c-2' is being resumed" in err and "no checkpoint 'c-3'" in err
    async with RedisCheckpointStore(redis_server.url, prefix=prefix) as store:
        assert [id async for id in store.ids()] == ["c-2"]
        assert await store.claim("c-1", "another")  # the command's own claim was released
        await _pause(store, "c-4")
    # The claim lasts as long as the operations may take, within what Redis takes as an expiry.
    huge = ["checkpoint", "delete", "c-4", *where, "--timeout", "1e300"]
    assert await asyncio.to_thread(cli.main, huge) == 0


async def test_delete_from_postgres_creates_nothing_and_deletes_under_a_claim(
    postgres_server: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    dsn = await postgres_server.new_database("clidel")

    def delete(checkpoint_id: str) -> int:
        return cli.main(["checkpoint", "delete", checkpoint_id, "--postgres", dsn, "--yes"])

    assert await asyncio.to_thread(delete, "c-1") == 1
    assert 'relation "pyadk_checkpoints" does not exist' in capsys.readouterr().err
    assert await public_tables(dsn) == set()

    async with PostgresCheckpointStore(dsn) as store:
        await _pause(store, "c-1", "c-2", "c-3")
    conn = await asyncpg.connect(dsn)
    await conn.execute("DROP TABLE pyadk_checkpoints_claims")  # a table made by hand, say
    await conn.close()
    assert await asyncio.to_thread(delete, "c-3") == 0  # the claims table made, as a store does
    assert await public_tables(dsn) == {"pyadk_checkpoints", "pyadk_checkpoints_claims"}
    async with PostgresCheckpointStore(dsn) as store:
        assert await store.claim("c-2", "worker-7")
    assert [await asyncio.to_thread(delete, id) for id in ("c-1", "c-2")] == [0, 1]
    assert "checkpoint 'c-2' is being resumed" in capsys.readouterr().err
    async with PostgresCheckpointStore(dsn) as store:
        assert [id async for id in store.ids()] == ["c-2"]
        assert await store.claim("c-1", "another")  # released

    # A role that may delete checkpoints but not create tables, the claims table missing: the
    # error says which table is missing, not only "get of checkpoint 'c-2' failed: permission
    # denied for schema public" (it may read; it is the claims table it may not make).
    role = f"op_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("DROP TABLE pyadk_checkpoints_claims")
        await conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
        await conn.execute(f"CREATE ROLE {role} LOGIN")
        await conn.execute(f"GRANT SELECT, DELETE ON pyadk_checkpoints TO {role}")
        user = dsn.split("://", 1)[1].split("@", 1)[0]
        as_role = dsn.replace(f"://{user}@", f"://{role}@", 1)
        argv = ["checkpoint", "delete", "c-2", "--postgres", as_role, "--yes"]
        assert await asyncio.to_thread(cli.main, argv) == 1
        err = capsys.readouterr().err
        assert '"pyadk_checkpoints_claims"' in err and "permission denied" in err
        assert "create" in err and "Traceback" not in err
        assert await public_tables(dsn) == {"pyadk_checkpoints"}
    finally:
        await conn.execute(f"DROP OWNED BY {role}")
        await conn.execute(f"DROP ROLE {role}")
        await conn.close()


def test_list_reads_many_checkpoints_a_round_trip(
    paused: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command read 16 checkpoints a batch, as a service's ``list_pending`` does: two round
    trips a batch (heads, claims), each with asyncpg's reset of its connection, 5,000 for 20,000
    runs in PostgreSQL (5.5 s); it reads 256 a batch."""
    with sqlite3.connect(paused) as conn:
        (data,) = conn.execute("SELECT data FROM pyadk_checkpoints WHERE id = 'c-1'").fetchone()
        rows = [(f"run-{i:04d}", data, 0.0) for i in range(300)]
        conn.executemany("INSERT INTO pyadk_checkpoints VALUES (?, ?, ?)", rows)
    batches: list[int] = []
    heads = SQLiteCheckpointStore.heads

    async def counted(store: SQLiteCheckpointStore, ids: list[str], limit: int) -> object:
        batches.append(len(ids))
        return await heads(store, ids, limit)

    monkeypatch.setattr(SQLiteCheckpointStore, "heads", counted)
    assert cli.main(["checkpoint", "list", "--sqlite", str(paused)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 302
    assert batches == [256, 46]


async def test_a_delete_cancelled_while_claiming_gives_the_claim_back(tmp_path: Path) -> None:
    """Ctrl-C while the command's claim is being written: the claim, taken all the same, was
    left to refuse every resume until it lapsed (``claim_ttl``)."""
    async with SQLiteCheckpointStore(tmp_path / "cp.db") as store:
        await _pause(store, "c-1")
        deleting = asyncio.ensure_future(cli._deleted_under_claim(store, "c-1", lambda _: True))
        await asyncio.sleep(0)  # its claim is sent to the store's thread
        deleting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await deleting
        assert await store.claim("c-1", "a-resume")  # given back
        assert await store.get("c-1") is not None
