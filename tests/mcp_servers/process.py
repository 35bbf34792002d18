"""Run the demo MCP server over HTTP (or SSE) as a subprocess on 127.0.0.1, for tests.

A real process, so a test can kill it (or let a tool end it) and start it again on the same port to
exercise reconnection. The calls block; from async code run them in a thread
(``await asyncio.to_thread(server.start)``) so the event loop keeps serving the client meanwhile.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["STDIO_SCRIPT", "HTTPServerProcess", "closed_port"]

_HERE = Path(__file__).resolve().parent
STDIO_SCRIPT = _HERE / "stdio_server.py"
_HTTP_SCRIPT = _HERE / "http_server.py"
_START_TIMEOUT = 30.0


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
        self.port = 0

    @property
    def url(self) -> str:
        return f"{self._scheme}://127.0.0.1:{self.port}{self._path}"

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    def start(self) -> str:
        """Start the server (on the port it had before, if it ran already); return its URL."""
        assert self._process is None or self._process.poll() is not None, "already running"
        process = subprocess.Popen(
            [sys.executable, str(self._script), "--port", str(self.port), *self._flags],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._process = process
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + _START_TIMEOUT
            while not selector.select(timeout=0.1):
                if process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the demo MCP server did not start ({self._flags})")
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"unexpected first line from the demo MCP server: {line!r}")
        said = line.split()
        self.port = int(said[1])
        # The process serving: this one's fork of the fork server (``forkserver.py``) when one
        # serves it, which a kill must end itself, as a crash would.
        self._serving = int(said[3]) if said[2:3] == ["PID"] else process.pid
        return self.url

    def wait(self) -> int:
        """Wait for the process to end by itself (a tool told it to); return its exit code."""
        assert self._process is not None
        code = self._process.wait(timeout=_START_TIMEOUT)
        self._close_pipe()
        return code

    def kill(self) -> None:
        """End the server abruptly, as a crash would: the process serving is killed. Where a
        fork of the fork server serves, that fork; the process started for it then ends as the
        fork did, once the fork is gone (so its port is free when this returns)."""
        if self._process is not None and self._process.poll() is None:
            if self._serving != self._process.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._serving, signal.SIGKILL)
            else:
                self._process.send_signal(signal.SIGKILL)
            self._process.wait(timeout=_START_TIMEOUT)
        self._close_pipe()

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self._process is not None and self._process.stdout is not None:
            self._process.stdout.close()
