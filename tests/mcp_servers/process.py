"""Run the demo MCP server over HTTP (or SSE) as a subprocess on 127.0.0.1, for tests.

A real process, so a test can kill it (or let a tool end it) and start it again on the same port to
exercise reconnection. The calls block; from async code run them in a thread
(``await asyncio.to_thread(server.start)``) so the event loop keeps serving the client meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from services import hold_port

__all__ = [
    "STDIO_SCRIPT",
    "HTTPServerProcess",
    "closed_port",
    "http_process_fixture",
    "session_tasks",
    "sse_process_fixture",
]

_HERE = Path(__file__).resolve().parent
STDIO_SCRIPT = _HERE / "stdio_server.py"
_HTTP_SCRIPT = _HERE / "http_server.py"
_START_TIMEOUT = 30.0
_STDERR_SHOWN = 4000  # characters of a server's stderr a failed start shows, its end
_STDERR_ENDED = 10.0  # seconds an ended server's stderr is waited for to end too


def session_tasks(server: object) -> list[asyncio.Task[Any]]:
    """The running loop's tasks keeping an MCP session to ``server`` open (one per live session,
    named by ``adk.mcp``): none left once its toolsets are closed."""
    return [t for t in asyncio.all_tasks() if t.get_name() == f"mcp session {server}"]


def closed_port() -> int:
    """A loopback port with nothing listening (it was free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class HTTPServerProcess:
    """The demo server over streamable HTTP (``/mcp``) or, with ``sse=True``, SSE (``/sse``);
    ``sessions`` names how it refuses sessions it does not know, ``token`` the bearer token it
    wants (``sessions.py``), ``tls`` a certificate chain and key to serve HTTPS with; ``script`` serves another server of this folder the same way (a
    ``--port`` option, ``PORT <n>`` on its first line, then ``PID <pid>`` of the process
    serving where a fork serves it, streamable HTTP at ``/mcp``)."""

    def __init__(
        self,
        *,
        sse: bool = False,
        legacy: bool = False,
        sessions: str | None = None,
        token: str | None = None,
        script: Path | None = None,
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self._script = _HTTP_SCRIPT if script is None else script
        self._flags = [*(["--sse"] if sse else []), *(["--legacy"] if legacy else [])]
        self._scheme = "http"
        if tls is not None:  # (certificate chain, key): served over HTTPS
            self._flags += ["--certfile", str(tls[0]), "--keyfile", str(tls[1])]
            self._scheme = "https"
        if sessions is not None:
            self._flags += ["--sessions", sessions]
        if token is not None:
            self._flags += ["--token", token]
        self._path = "/sse" if sse else "/mcp"
        self._process: subprocess.Popen[str] | None = None
        self._serving = 0  # the pid of the process serving (``start``)
        self._stderr: _StderrCopy | None = None  # this run's stderr, until it ended
        self._reservation: socket.socket | None = None  # holds the port (``reserve_port``)
        self._release: weakref.finalize[[], None] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self.port}{self._path}"

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def reserve_port(self) -> int:
        """Hold a port for this server (the one it had, or one the OS picks) and return it;
        ``start`` serves on it. Until then a connection to it is refused, as to a server that is
        down, and no other socket takes it (``services.hold_port``)."""
        if self._reservation is None:
            self._reservation = hold_port(self.port)
            self.port = self._reservation.getsockname()[1]
            self._release = weakref.finalize(self, self._reservation.close)
        return self.port

    def start(self) -> str:
        """Start the server (on the port it had before, if it ran already); return its URL.

        A server that does not start raises ``RuntimeError`` saying why: its exit code, the port
        and the end of its standard error."""
        assert self._process is None or self._process.poll() is not None, "already running"
        self._close_pipe()
        port = self.reserve_port()
        process = subprocess.Popen(
            [sys.executable, str(self._script), "--port", str(port), *self._flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._process = process
        assert process.stderr is not None
        self._stderr = _StderrCopy(process.stderr.fileno(), process.stderr.close)
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout=_START_TIMEOUT):
                self._failed(f"no PORT line within {_START_TIMEOUT:g}s")
        line = process.stdout.readline()  # "" if it ended first
        said = line.split()
        if said[:1] != ["PORT"] or said[1:2] != [str(port)]:
            self._failed(f"its first line on stdout was {line!r}")
        # The process serving: this one's fork of the fork server (``forkserver.py``) when one
        # serves it, which a kill must end itself, as a crash would.
        self._serving = int(said[3]) if said[2:3] == ["PID"] else process.pid
        return self.url

    def _failed(self, what: str) -> NoReturn:
        """Stop what started and raise why it did not start."""
        errors, self._stderr = self._stderr, None  # its end is in the error too
        assert self._process is not None and errors is not None
        self.stop(release=False)
        code = self._process.returncode
        said = errors.end(_STDERR_ENDED).decode("utf-8", "replace")
        tail = said[-_STDERR_SHOWN:] if said.strip() else "(nothing)\n"
        raise RuntimeError(
            f"the MCP server {' '.join([self._script.name, *self._flags])} did not start on "
            f"127.0.0.1:{self.port}: {what}; it ended with exit code {code}; its stderr:\n{tail}"
        )

    def wait(self) -> int:
        """Wait for the process to end by itself (a tool told it to); return its exit code. The
        port stays this server's, for ``start``."""
        assert self._process is not None
        code = self._process.wait(timeout=_START_TIMEOUT)
        self._close_pipe()
        return code

    def kill(self) -> None:
        """End the server abruptly, as a crash would: the process serving is killed. Where a
        fork of the fork server serves, that fork; the process started for it then ends as the
        fork did, once the fork is gone (so its port is free when this returns). The port stays
        this server's, for ``start``."""
        if self._process is not None and self._process.poll() is None:
            if self._serving not in (0, self._process.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._serving, signal.SIGKILL)
            else:
                self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=_START_TIMEOUT)
        self._close_pipe()

    def stop(self, *, release: bool = True) -> None:
        """End the server as a shutdown would (``SIGTERM``), killing it after 10 s; with
        ``release`` its port is let go too (``start`` takes it again if still free)."""
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._close_pipe()
        if release and self._release is not None:
            self._release()
            self._reservation = self._release = None

    def _close_pipe(self) -> None:
        """Close this run's stdout pipe, and let its stderr's copy end (``_StderrCopy``)."""
        if self._process is not None and self._process.stdout is not None:
            self._process.stdout.close()
        errors, self._stderr = self._stderr, None
        if errors is not None:
            errors.end(_STDERR_ENDED)


@pytest.fixture(name="http_process", scope="module")
def http_process_fixture() -> Iterator[HTTPServerProcess]:
    """The demo server over streamable HTTP, one process for a test module's tests. A module
    brings it in with ``from mcp_servers.process import http_process_fixture``; the fixture's
    name differs from the function's so a test's ``http_process`` parameter shadows no import."""
    process = HTTPServerProcess()
    process.start()
    yield process
    process.stop()


@pytest.fixture(name="sse_process", scope="module")
def sse_process_fixture() -> Iterator[HTTPServerProcess]:
    """The demo server over SSE, one process for a test module's tests (as ``http_process``)."""
    process = HTTPServerProcess(sse=True)
    process.start()
    yield process
    process.stop()


class _StderrCopy:
    """Copies what a server writes to its stderr (a pipe, ``fd``) to this process's stderr as it
    comes, as an inherited stderr would: pytest shows it with the test running then (a server of
    a module's fixture too), and keeps its end, for a failed start's words. A thread reads it
    until its end of file (the process, and the fork serving it, ended) and then ``close``s it.
    """

    def __init__(self, fd: int, close: Callable[[], None]) -> None:
        self._fd, self._close = fd, close
        self._tail = bytearray()
        self._copying = threading.Thread(target=self._copy, name=f"stderr of {fd}", daemon=True)
        self._copying.start()

    def _copy(self) -> None:
        try:
            while chunk := os.read(self._fd, 65536):
                self._tail += chunk
                del self._tail[: -4 * _STDERR_SHOWN]  # enough for its last characters
                with contextlib.suppress(OSError):  # a stderr closed: only not shown
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(2, view) :]
        finally:
            self._close()

    def end(self, timeout: float) -> bytes:
        """The end of what it wrote, once its stderr ended (within ``timeout`` seconds: a fork
        left serving keeps it open, and it is copied on meanwhile)."""
        self._copying.join(timeout)
        return bytes(self._tail)
