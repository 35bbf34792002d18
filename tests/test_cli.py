"""The ``pyadk`` command, run as a real subprocess against a real SQLite checkpoint file."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg  # type: ignore[import-untyped]
import pytest
from pydantic import BaseModel
from services import PostgresServer, RedisServer, closed_port, public_tables

from adk import AgentEvent, AgentInput, BaseAgent, RunContext, Runner, cli, register_type
from adk.checkpoint import (
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
)
from adk.checkpoint.codec import FORMAT, VERSION, decode_checkpoint

pytest_plugins = ["services"]


class _Asks(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.of("checking")
        yield ctx.interrupt({"question": "approve payment of 10 EUR?"})


def _pyadk(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adk.cli", *args], capture_output=True, text=True, timeout=60
    )


async def test_show_prints_pending_points(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    store = SQLiteCheckpointStore(path)
    result = await Runner(_Asks("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="c-1")
    await store.aclose()
    assert result.interrupt is not None

    done = _pyadk("checkpoint", "show", "c-1", "--sqlite", str(path))

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["agent"] == "asker"
    assert [p["id"] for p in summary["points"]] == ["agent:asker"]
    assert summary["points"][0]["info"] == {"question": "approve payment of 10 EUR?"}
    assert summary["history_entries"] == 1
    assert summary["finished"] is False and isinstance(summary["saved_at"], float)


async def test_show_says_a_run_kept_after_it_finished_waits_on_nothing(tmp_path: Path) -> None:
    # keep_checkpoints=True keeps the checkpoint of a finished resume for audit, its points
    # included: shown without a word, an operator would read them as a decision still awaited.
    path = tmp_path / "checkpoints.db"
    async with SQLiteCheckpointStore(path) as store:
        runner = Runner(_Approved("asker"), checkpoint_store=store, keep_checkpoints=True)
        await runner.invoke("pay", checkpoint_id="c-1")
        assert (await runner.invoke_resume("c-1", True)).text == "paid"

    done = _pyadk("checkpoint", "show", "c-1", "--sqlite", str(path))

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["finished"] is True
    assert [p["id"] for p in summary["points"]] == ["agent:asker"]  # what it had waited on


async def test_show_says_whether_a_resume_holds_the_checkpoint(tmp_path: Path) -> None:
    # `checkpoint list` says it; `show`, what an operator reads before approving, said nothing,
    # and a second approval of a run another process was resuming would be refused.
    path = tmp_path / "checkpoints.db"
    async with SQLiteCheckpointStore(path) as store:
        await Runner(_Asks("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="c-1")
        await Runner(_Asks("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="c-2")
        assert await store.claim("c-2", "a-worker-resuming-it")

    shown = {}
    for checkpoint_id in ("c-1", "c-2"):
        done = _pyadk("checkpoint", "show", checkpoint_id, "--sqlite", str(path))
        assert done.returncode == 0, done.stderr
        shown[checkpoint_id] = json.loads(done.stdout)["resuming"]

    assert shown == {"c-1": False, "c-2": True}


class _Approved(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt({"question": "approve payment of 10 EUR?"})
            return
        yield AgentEvent.of("paid")


async def test_missing_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    async with SQLiteCheckpointStore(path) as store:
        await store.put("another", b"x")
    done = _pyadk("checkpoint", "show", "nope", "--sqlite", str(path))
    assert done.returncode == 1
    assert "no checkpoint 'nope'" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["", "--sqlite", "{tmp}/cp.db"], "checkpoint id must not be empty"),
        (["x" * 1025, "--sqlite", "{tmp}/cp.db"], "the limit is 1024"),
        (["c-1", "--sqlite", ""], "needs a file path"),
        (["c-1", "--redis", "nota-url"], "Redis URL must specify one of the following schemes"),
    ],
)
def test_a_malformed_command_line_is_a_usage_error(
    tmp_path: Path, args: list[str], message: str
) -> None:
    done = _pyadk("checkpoint", "show", *(arg.format(tmp=tmp_path) for arg in args))
    assert done.returncode == 2
    assert done.stderr.startswith("pyadk: ") and message in done.stderr
    assert "Traceback" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_show_never_creates_or_changes_a_file(tmp_path: Path) -> None:
    typo = tmp_path / "typo" / "dir" / "cp.db"
    done = _pyadk("checkpoint", "show", "c-1", "--sqlite", str(typo))
    assert done.returncode == 1
    assert f"no SQLite checkpoint file at {typo}" in done.stderr
    assert list(tmp_path.iterdir()) == []  # not even the directories

    other = tmp_path / "other.db"  # some other program's database
    with contextlib.closing(sqlite3.connect(other)) as conn, conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    before = other.read_bytes()
    done = _pyadk("checkpoint", "show", "c-1", "--sqlite", str(other))
    assert done.returncode == 1
    assert "no such table: pyadk_checkpoints" in done.stderr
    assert other.read_bytes() == before  # no table added, not switched to WAL


async def test_show_prints_json_even_for_an_old_checkpoint_holding_nan(tmp_path: Path) -> None:
    """Checkpoints written before the codec refused NaN may hold it; the output stays JSON."""
    path = tmp_path / "checkpoints.db"
    store = SQLiteCheckpointStore(path)
    await Runner(_Asks("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="c-1")
    body = decode_checkpoint(await _get(store, "c-1"))
    body["points"][0]["info"] = {"score": float("nan"), "limit": float("inf")}
    payload = json.dumps(body).encode()  # how the old codec wrote them: NaN, Infinity
    header = {"format": FORMAT, "version": VERSION, "sha256": hashlib.sha256(payload).hexdigest()}
    await store.put("c-1", json.dumps(header).encode() + b"\n" + payload)
    await store.aclose()

    done = _pyadk("checkpoint", "show", "c-1", "--sqlite", str(path))

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout, parse_constant=_not_json)
    assert summary["points"][0]["info"] == {"score": "nan", "limit": "inf"}


async def _get(store: SQLiteCheckpointStore, checkpoint_id: str) -> bytes:
    data = await store.get(checkpoint_id)
    assert data is not None
    return data


def _not_json(constant: str) -> None:
    raise ValueError(f"not JSON: {constant}")


@register_type
class _Refund(BaseModel):
    order: str
    amount_cents: int


class _AsksRefund(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield ctx.interrupt(_Refund(order="A-1", amount_cents=500))


async def test_list_prints_each_paused_run_as_a_json_line(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    store = SQLiteCheckpointStore(path)
    await Runner(_Asks("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="shop-1/a")
    await Runner(_Asks("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="shop-2/a")
    await Runner(_AsksRefund("refunds"), checkpoint_store=store).invoke(
        "refund", checkpoint_id="shop-1/b"
    )
    await store.put("shop-1/c", b"damaged")
    assert await store.claim("shop-2/a", "a-worker-resuming-it")
    await store.aclose()

    done = _pyadk("checkpoint", "list", "--sqlite", str(path))

    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    by_id = {line["checkpoint_id"]: line for line in lines}
    assert sorted(by_id) == ["shop-1/a", "shop-1/b", "shop-1/c", "shop-2/a"]
    asked = by_id["shop-1/a"]
    assert (asked["agent"], asked["points"][0]["id"]) == ("asker", "agent:asker")
    assert asked["points"][0]["info"] == {"question": "approve payment of 10 EUR?"}
    assert isinstance(asked["saved_at"], float) and asked["run_id"]
    # Another process's resume holds shop-2/a (its claim): listed, but as being resumed.
    assert (asked["resuming"], by_id["shop-2/a"]["resuming"]) == (False, True)
    # A registered type the command's process does not know is printed as stored, not refused.
    assert by_id["shop-1/b"]["points"][0]["info"] == {
        "__adk_type__": f"{__name__}._Refund",
        "data": {"order": "A-1", "amount_cents": 500},
    }
    assert by_id["shop-1/c"] == {
        "checkpoint_id": "shop-1/c",
        "error": "checkpoint 'shop-1/c' is not a pyadk checkpoint or is corrupt (unreadable header)",
        "reason": "corrupt",  # an operator's script sorts the unreadable without the message
    }

    done = _pyadk("checkpoint", "list", "--sqlite", str(path), "--prefix", "shop-1/")
    assert sorted(json.loads(line)["checkpoint_id"] for line in done.stdout.splitlines()) == [
        "shop-1/a",
        "shop-1/b",
        "shop-1/c",
    ]
    done = _pyadk("checkpoint", "list", "--sqlite", str(path), "--agent", "refunds")
    listed = [json.loads(line)["checkpoint_id"] for line in done.stdout.splitlines()]
    assert sorted(listed) == ["shop-1/b", "shop-1/c"]  # and the unreadable one: whose is unknown


class _AsksOddly(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield ctx.interrupt({"question": "approve x\ud800y?"})


async def test_a_pause_whose_text_holds_a_lone_surrogate_is_listed_and_shown(
    tmp_path: Path,
) -> None:
    """Its info (a model's ``"\\ud800"`` escape) was printed as UTF-8, which it has no form in:
    the command failed with a UnicodeEncodeError traceback. It prints that text escaped."""
    path = tmp_path / "checkpoints.db"
    store = SQLiteCheckpointStore(path)
    await Runner(_AsksOddly("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="odd")
    await store.aclose()

    for command in ("list", "show"):
        args = ("checkpoint", command, *(("odd",) if command == "show" else ()))
        done = _pyadk(*args, "--sqlite", str(path))
        assert done.returncode == 0, done.stderr
        shown = json.loads(done.stdout)
        assert shown["points"][0]["info"] == {"question": "approve x\ud800y?"}


def test_list_failures(tmp_path: Path) -> None:
    done = _pyadk("checkpoint", "list", "--sqlite", str(tmp_path / "typo.db"))
    assert done.returncode == 1 and "no SQLite checkpoint file" in done.stderr
    assert list(tmp_path.iterdir()) == []
    done = _pyadk("checkpoint", "list", "--sqlite", str(tmp_path / "x.db"), "--prefix", "x" * 1025)
    assert done.returncode == 2
    assert done.stderr.startswith("pyadk: checkpoint id prefix is 1025 UTF-8 bytes long")
    done = _pyadk("checkpoint", "list", "--redis", f"redis://127.0.0.1:{closed_port()}/0")
    assert done.returncode == 1
    assert ": ids failed: " in done.stderr and "Traceback" not in done.stderr


async def test_postgres_is_only_read_and_a_table_of_another_name_is_reached(
    postgres_server: PostgresServer,
) -> None:
    """``--postgres`` opened the service's own store, which creates its tables on first use: the
    command that "only reads" created ``pyadk_checkpoints`` and its claims table in whatever
    database it was pointed at, and failed ("permission denied for schema public") for an
    operator's role that can only read. It reads now: a missing table is an error naming it,
    nothing is created, a read-only role can show and list, and ``--table`` reaches a store
    made with another table name."""
    dsn = await postgres_server.new_database("cli")

    for args in (["list"], ["show", "c-1"]):
        done = _pyadk("checkpoint", *args, "--postgres", dsn)
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert 'relation "pyadk_checkpoints" does not exist' in done.stderr
    assert await public_tables(dsn) == set()

    async with PostgresCheckpointStore(dsn, table="approvals") as store:
        result = await Runner(_Asks("asker"), checkpoint_store=store).invoke(
            "pay", checkpoint_id="c-1"
        )
        assert result.interrupt is not None
    reader = f"reader_{uuid.uuid4().hex[:10]}"
    conn = await asyncpg.connect(dsn)
    await conn.execute(f"CREATE ROLE {reader} LOGIN")
    await conn.execute(f"GRANT SELECT ON approvals, approvals_claims TO {reader}")
    await conn.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    await conn.close()
    as_reader = dsn.replace("postgresql://postgres@", f"postgresql://{reader}@")

    shown = _pyadk("checkpoint", "show", "c-1", "--postgres", as_reader, "--table", "approvals")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["points"][0]["info"] == {
        "question": "approve payment of 10 EUR?"
    }
    listed = _pyadk("checkpoint", "list", "--postgres", as_reader, "--table", "approvals")
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["checkpoint_id"] for line in listed.stdout.splitlines()] == ["c-1"]
    assert await public_tables(dsn) == {"approvals", "approvals_claims"}


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        ("host=db port=5432", 'scheme is expected to be either "postgresql" or "postgres"'),
        ("postgresql://bob:s3cret@db:notaport/x", "invalid literal for int()"),
        ("postgresql://bob:s3cret@[::1/x", "Invalid IPv6 URL"),
        ("postgresql://bob:s3cret@db/x?sslmode=bogus", "`sslmode` parameter must be one of"),
    ],
)
@pytest.mark.parametrize("action", [["list"], ["show", "c-1"]])
def test_a_malformed_postgres_dsn_is_a_usage_error(
    action: list[str], dsn: str, message: str
) -> None:
    """A DSN asyncpg refuses is a malformed command line (status 2), as a Redis URL that is not
    one: it exited 1, the status of a store that is down, so a script retried it."""
    done = _pyadk("checkpoint", *action, "--postgres", dsn)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("pyadk: ") and message in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "s3cret" not in done.stderr


def test_an_unreachable_postgres_server_is_a_store_failure() -> None:
    done = _pyadk("checkpoint", "list", "--postgres", f"postgresql://u@127.0.0.1:{closed_port()}/x")
    assert done.returncode == 1 and ": ids failed: " in done.stderr
    assert "Traceback" not in done.stderr


async def test_redis_key_prefix_reaches_a_store_made_with_another_prefix(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    """A service's store made with its own key prefix could not be looked into: ``list`` printed
    nothing, as if no run waited, and ``show`` said there was no such checkpoint."""
    prefix = f"app{uuid.uuid4().hex[:8]}:"
    async with RedisCheckpointStore(redis_server.url, prefix=prefix) as store:
        await Runner(_Asks("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="c-1")
    shown = _pyadk("checkpoint", "show", "c-1", "--redis", redis_server.url, "--key-prefix", prefix)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["agent"] == "asker"
    listed = _pyadk("checkpoint", "list", "--redis", redis_server.url, "--key-prefix", prefix)
    assert listed.returncode == 0, listed.stderr
    assert [json.loads(line)["checkpoint_id"] for line in listed.stdout.splitlines()] == ["c-1"]

    for wrong, store_args in (
        (["--key-prefix", prefix], ["--sqlite", str(tmp_path / "x.db")]),
        (["--table", "approvals"], ["--redis", redis_server.url]),
        (["--table", "no-such-name!"], ["--postgres", "postgresql://localhost/x"]),
    ):
        done = _pyadk("checkpoint", "list", *store_args, *wrong)
        assert done.returncode == 2 and done.stderr.startswith("pyadk: ")
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("changed", "what"),
    [
        ({"history": 5}, "history is not a list"),
        ({"session": [1, "a"]}, "session is not an object"),
        ({"points": "x"}, "points is not a list"),
        ({"agent": None}, "agent is not a str"),
    ],
)
async def test_show_of_a_malformed_body_with_a_valid_checksum_is_a_clear_error(
    tmp_path: Path, changed: dict[str, object], what: str
) -> None:
    """A checkpoint whose checksum matches but whose body is not what pyadk writes (another
    tool's, or edited and sealed again) made ``show`` fail with a traceback ("object of type 'int'
    has no len()"), where ``list`` reported it as malformed."""
    path = tmp_path / "checkpoints.db"
    async with SQLiteCheckpointStore(path) as store:
        await Runner(_Asks("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="c-1")
        body = {**decode_checkpoint(await _get(store, "c-1")), **changed}
        payload = json.dumps(body).encode()
        digest = hashlib.sha256(payload).hexdigest()
        header = {"format": FORMAT, "version": VERSION, "sha256": digest}
        await store.put("c-1", json.dumps(header).encode() + b"\n" + payload)

    done = _pyadk("checkpoint", "show", "c-1", "--sqlite", str(path))

    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr == f"pyadk: checkpoint 'c-1' is malformed: {what}\n"


def _main_into_closed_pipe(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str]:
    """``pyadk ARGS | head -0``: the command run in this process, its stdout a real pipe whose
    reader has left; its exit status and stderr."""
    reader, writer = os.pipe()
    os.close(reader)
    with open(writer, "w", encoding="utf-8") as stdout:
        monkeypatch.setattr(sys, "stdout", stdout)
        status = cli.main(list(args))
        monkeypatch.undo()
        with contextlib.suppress(BrokenPipeError):  # what is still buffered (before the fix)
            stdout.close()
    return status, capsys.readouterr().err


def test_a_reader_that_leaves_ends_the_command_quietly_not_as_a_store_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `pyadk checkpoint list ... | head` said `pyadk: [Errno 32] Broken pipe` with status 1, the
    # status of a store that failed mid-way, and `show ... | head` ended in a traceback.
    path = tmp_path / "checkpoints.db"

    async def pause() -> None:
        async with SQLiteCheckpointStore(path) as store:
            for n in range(3):
                await Runner(_Asks("asker"), checkpoint_store=store).invoke(
                    "pay", checkpoint_id=f"c-{n}"
                )

    asyncio.run(pause())
    listed = _main_into_closed_pipe(
        monkeypatch, capsys, "checkpoint", "list", "--sqlite", str(path)
    )
    assert listed == (141, "")
    shown = _main_into_closed_pipe(
        monkeypatch, capsys, "checkpoint", "show", "c-1", "--sqlite", str(path), "--full"
    )
    assert shown == (141, "")


class _AsksInEuros(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield ctx.interrupt({"question": "pay 10 € to Zoë?"})


def test_text_the_outputs_encoding_cannot_write_is_printed_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A Latin-1 locale's pipe (or a Windows console's code page) has no '€': the command ended
    # in a UnicodeEncodeError traceback, printing nothing of the run an operator looked for.
    path = tmp_path / "checkpoints.db"

    async def pause() -> None:
        async with SQLiteCheckpointStore(path) as store:
            await Runner(_AsksInEuros("asker"), checkpoint_store=store).invoke(
                "pay", checkpoint_id="c-€"
            )

    asyncio.run(pause())
    for command in (["list"], ["show", "c-€"]):
        written = io.BytesIO()
        with io.TextIOWrapper(written, encoding="latin-1", write_through=True) as stdout:
            monkeypatch.setattr(sys, "stdout", stdout)
            status = cli.main(["checkpoint", *command, "--sqlite", str(path)])
            monkeypatch.undo()
            text = written.getvalue().decode("ascii")  # escaped: \u20ac, also in the id
        printed = json.loads(text)
        assert status == 0 and printed["checkpoint_id"] == "c-€"
        assert printed["points"][0]["info"] == {"question": "pay 10 € to Zoë?"}


def test_ctrl_c_ends_the_command_as_it_ends_python_without_a_traceback() -> None:
    # A listing waiting on a store that does not answer, ended with Ctrl-C: killed by SIGINT as
    # before (a shell loop running it stops too), but no KeyboardInterrupt traceback through
    # asyncio's machinery on stderr.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        silent.settimeout(60)
        url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
        command = subprocess.Popen(
            [sys.executable, "-m", "adk.cli", "checkpoint", "list", "--redis", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        connection, _ = silent.accept()  # the command waits for the server's answer now
        with connection:
            command.send_signal(signal.SIGINT)
            out, err = command.communicate(timeout=60)
    assert (command.returncode, out, err) == (-signal.SIGINT, "", "")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
def test_output_that_cannot_be_written_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    # `pyadk checkpoint show ... > file` on a full disk ended in an OSError traceback (its print
    # was outside the try), and `list` said only `[Errno 28] No space left on device`, as if the
    # store had failed. Not a reader that left either: status 1, not 141.
    path = tmp_path / "checkpoints.db"

    async def pause() -> None:
        async with SQLiteCheckpointStore(path) as store:
            await Runner(_Asks("asker"), checkpoint_store=store).invoke("pay", checkpoint_id="c-1")

    asyncio.run(pause())
    for command in (["list"], ["show", "c-1"]):
        with open("/dev/full", "w") as full:
            done = subprocess.run(
                [sys.executable, "-m", "adk.cli", "checkpoint", *command, "--sqlite", str(path)],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                timeout=60,
            )
        assert (done.returncode, done.stderr) == (
            1,
            "pyadk: could not write the output: [Errno 28] No space left on device\n",
        ), command


def test_ctrl_c_in_main_called_with_argv_reaches_the_caller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The command kills its own process with SIGINT after Ctrl-C; a Python caller of main(argv)
    # (a wrapper script, a test) gets the KeyboardInterrupt instead and keeps its process.
    def interrupted(argv: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", interrupted)
    handler = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        cli.main(["checkpoint", "list", "--sqlite", "x.db"])
    assert signal.getsignal(signal.SIGINT) is handler  # not reset to the default either
