"""Real Redis and PostgreSQL servers for tests and benchmarks, started on 127.0.0.1.

Each server runs from a fresh temporary directory on an ephemeral port and is torn down (process
stopped, directory removed) afterwards. As pytest fixtures they are session-scoped: one server per
test session, shared by every test that asks, with tests isolated by key prefix / table name.

Binaries are looked up on ``PATH``, then (PostgreSQL) in ``$PYADK_PG_BINDIR`` and the Debian layout
``/usr/lib/postgresql/<version>/bin``. When they are missing the fixtures skip with the reason —
except under ``CI=true``, where a missing service must fail the run instead of silently skipping
the tests that need it (``.ci/services.sh`` installs them there).

PostgreSQL refuses to run as root, so when the tests run as root the server runs as the
``postgres`` system user (or ``nobody``) through ``subprocess.Popen(user=...)``.

Use from pytest: ``pytest_plugins = ["services"]`` (then request ``redis_server`` /
``postgres_server``); from a script: ``with run_redis() as server: server.url``.

PYTEST_DONT_REWRITE (imported by test modules before pytest loads it as a plugin; no asserts here)
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = [
    "PostgresServer",
    "RedisServer",
    "ServiceUnavailable",
    "closed_port",
    "find_postgres_bindir",
    "find_redis_server",
    "hold_port",
    "postgres_server",
    "redis_server",
    "run_postgres",
    "run_redis",
]

_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 10.0


class ServiceUnavailable(RuntimeError):
    """The binaries for a service are not installed."""


@dataclass(frozen=True)
class RedisServer:
    port: int
    directory: Path

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


@dataclass(frozen=True)
class PostgresServer:
    port: int
    directory: Path
    user: str = "postgres"
    database: str = "postgres"

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.database}"

    async def new_database(self, prefix: str) -> str:
        """The DSN of a new, empty database of this server, named ``prefix`` and a random tail:
        for a test that must see what a command creates (or does not) in a database of its own."""
        import uuid

        import asyncpg

        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        admin = await asyncpg.connect(self.dsn)
        try:
            await admin.execute(f"CREATE DATABASE {name}")
        finally:
            await admin.close()
        return self.dsn.rsplit("/", 1)[0] + f"/{name}"


async def public_tables(dsn: str) -> set[str]:
    """The names of the tables in the ``public`` schema of the database ``dsn`` names."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    finally:
        await conn.close()
    return {row[0] for row in rows}


def find_redis_server() -> str | None:
    """Path of ``redis-server``, or None."""
    return shutil.which("redis-server") or next(
        (
            p
            for p in ("/usr/bin/redis-server", "/usr/local/bin/redis-server")
            if os.access(p, os.X_OK)
        ),
        None,
    )


def find_postgres_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``postgres``, or None; the newest version wins."""
    candidates: list[str] = []
    if env := os.environ.get("PYADK_PG_BINDIR"):
        candidates.append(env)
    if initdb := shutil.which("initdb"):
        candidates.append(str(Path(initdb).resolve().parent))  # Debian links some into PATH
    debian = glob.glob("/usr/lib/postgresql/*/bin")
    debian.sort(key=lambda p: [int(n) for n in re.findall(r"\d+", p)], reverse=True)
    candidates += debian
    candidates += ["/usr/local/pgsql/bin"]
    for directory in candidates:
        path = Path(directory)
        if all(os.access(path / name, os.X_OK) for name in ("initdb", "postgres", "pg_isready")):
            return path
    return None


def closed_port() -> int:
    """A loopback port with nothing listening (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def hold_port(port: int = 0) -> socket.socket:
    """A socket that holds ``127.0.0.1:port`` (0: a port the OS picks) for a server the test
    starts, kills and starts again on it; closing it lets the port go. It is bound with
    ``SO_REUSEADDR`` and never listens, so a server binding the port with ``SO_REUSEADDR`` too
    (asyncio's and uvicorn's default, Redis, PostgreSQL) can, while nothing else takes the port
    in the meantime: the kernel gives no outgoing connection a bound port as its source port
    (a client retrying while its server is down could get it, connected to itself), nor
    one to another process binding port 0, and a connection to it is refused, as to a server
    that is down. Without it, a server started again on its port could find it taken on a busy
    machine. ``RuntimeError`` if the port is taken (a server listens on it)."""
    sock = socket.socket()
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
    except OSError as exc:
        sock.close()
        raise RuntimeError(f"port 127.0.0.1:{port} is taken: {exc}") from exc
    return sock


@contextlib.contextmanager
def run_redis(*, attempts: int = 5) -> Iterator[RedisServer]:
    """Start ``redis-server`` without persistence on a free loopback port."""
    binary = find_redis_server()
    if binary is None:
        raise ServiceUnavailable("redis-server is not installed (apt-get install redis-server)")
    directory = Path(tempfile.mkdtemp(prefix="pyadk-redis-"))
    try:
        for attempt in range(attempts):
            port = closed_port()
            log = directory / "redis.log"
            command = [
                binary,
                "--port", str(port),
                "--bind", "127.0.0.1",
                "--save", "",
                "--appendonly", "no",
                "--dir", str(directory),
                "--daemonize", "no",
            ]  # fmt: skip
            with open(log, "ab") as out:
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            try:
                if _wait_redis(process, port):
                    yield RedisServer(port, directory)
                    return
                if attempt == attempts - 1 or "Address already in use" not in _tail(log):
                    raise RuntimeError(f"redis-server did not start:\n{_tail(log)}")
            finally:
                _stop(process, signal.SIGTERM)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def run_postgres(*, durable: bool = False, attempts: int = 5) -> Iterator[PostgresServer]:
    """Create a cluster with ``initdb`` and start ``postgres`` on a free loopback port.

    ``durable=False`` (tests) turns fsync off for speed; benchmarks pass ``durable=True`` so the
    numbers mean what they would in production. Authentication is ``trust`` on loopback.
    """
    bindir = find_postgres_bindir()
    if bindir is None:
        raise ServiceUnavailable(
            "PostgreSQL server binaries (initdb, postgres) are not installed "
            "(apt-get install postgresql)"
        )
    directory = Path(tempfile.mkdtemp(prefix="pyadk-pg-"))
    account = _postgres_account()
    try:
        if account is not None:
            os.chown(directory, account.pw_uid, account.pw_gid)
        data = directory / "data"
        initdb = [
            str(bindir / "initdb"),
            "-D", str(data),
            "-U", "postgres",
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ]  # fmt: skip
        user = _RunAs.of(account)
        result = subprocess.run(
            initdb,
            capture_output=True,
            text=True,
            user=user.uid,
            group=user.gid,
            extra_groups=user.extra_groups,
            env=user.env,
        )
        if result.returncode != 0:
            raise RuntimeError(f"initdb failed ({result.returncode}):\n{result.stderr[-4000:]}")
        settings = {
            "listen_addresses": "127.0.0.1",
            "unix_socket_directories": "",
            "max_connections": "100",
            "shared_buffers": "32MB",
        }
        if not durable:
            settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        for attempt in range(attempts):
            port = closed_port()
            log = directory / f"postgres-{attempt}.log"
            command = [str(bindir / "postgres"), "-D", str(data), "-p", str(port)]
            for name, value in settings.items():
                command += ["-c", f"{name}={value}"]
            with open(log, "ab") as out:
                process = subprocess.Popen(
                    command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    user=user.uid,
                    group=user.gid,
                    extra_groups=user.extra_groups,
                    env=user.env,
                )
            try:
                if _wait_postgres(process, bindir, port):
                    yield PostgresServer(port, directory)
                    return
                if attempt == attempts - 1 or "already in use" not in _tail(log):
                    raise RuntimeError(f"postgres did not start:\n{_tail(log)}")
            finally:
                _stop(process, signal.SIGINT)  # "fast" shutdown: disconnect clients, stop
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _postgres_account() -> pwd.struct_passwd | None:
    """Who runs PostgreSQL: nobody special unless we are root, which PostgreSQL refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise RuntimeError("running as root and there is neither a 'postgres' nor a 'nobody' user")


@dataclass(frozen=True)
class _RunAs:
    """``subprocess`` arguments that run a command as ``account`` (all None: as ourselves)."""

    uid: int | None = None
    gid: int | None = None
    extra_groups: list[int] | None = None
    env: dict[str, str] | None = None

    @classmethod
    def of(cls, account: pwd.struct_passwd | None) -> _RunAs:
        if account is None:
            return cls()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": account.pw_dir}
        return cls(account.pw_uid, account.pw_gid, [], env)


def _wait_redis(process: subprocess.Popen[bytes], port: int) -> bool:
    """True once the server answers PING; False if it exited (e.g. the port was taken)."""
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as s:
            s.sendall(b"PING\r\n")
            if s.recv(64).startswith(b"+PONG"):
                return True
        time.sleep(0.02)
    raise RuntimeError(f"redis-server did not answer on port {port} within {_START_TIMEOUT}s")


def _wait_postgres(process: subprocess.Popen[bytes], bindir: Path, port: int) -> bool:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        ready = subprocess.run(
            [str(bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port), "-t", "1"],
            check=False,
        )
        if ready.returncode == 0:
            return True
        time.sleep(0.05)
    raise RuntimeError(f"postgres did not accept connections on port {port} in {_START_TIMEOUT}s")


def _stop(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _tail(path: Path, size: int = 4000) -> str:
    try:
        return path.read_bytes()[-size:].decode(errors="replace")
    except OSError:
        return "(no log)"


def _unavailable(reason: str) -> None:
    """Skip locally; fail under CI=true, where every service must be there."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} — CI=true, so this is an error, not a skip", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    try:
        with run_redis() as server:
            yield server
    except ServiceUnavailable as exc:
        _unavailable(str(exc))


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        with run_postgres() as server:
            yield server
    except ServiceUnavailable as exc:
        _unavailable(str(exc))
