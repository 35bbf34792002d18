"""The fork server that serves the tests' MCP stdio servers (``mcp_servers/forkserver.py``,
started by ``conftest.py``): the process the client starts stays the server's process as the
client sees it. A fork serves its pipes; it ends as that fork ends (exit code, signal), passes
on the signals the client sends, and takes the fork with it when killed. A server that wants a
process of its own (``DEMO_OWN_PROCESS``) serves in it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import _FORK_SERVER, _fork_server_ended, pid_exists
from mcp_servers.forkserver import OWN_PROCESS, address
from mcp_servers.process import STDIO_SCRIPT

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or bool(os.environ.get("PYADK_TESTS_NO_FORK_SERVER")),
    reason="the fork server runs on Linux, unless PYADK_TESTS_NO_FORK_SERVER",
)


@pytest.fixture(scope="module", autouse=True)
def fork_server_listening() -> None:
    """Waits (bounded) until the session's fork server listens: it is not waited for at start."""
    for _ in range(1200):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            try:
                probe.connect(address(os.getpid()))
            except OSError:
                time.sleep(0.05)
                continue
            return
    raise AssertionError("the fork server never listened")


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rpartition(")")[2].split()[1])


class Server:
    """``stdio_server.py`` started as the ``mcp`` client starts it (its own session, pipes, a
    minimal environment), spoken to in JSON-RPC lines."""

    def __init__(
        self, script: Path = STDIO_SCRIPT, options: tuple[str, ...] = (), **env: str
    ) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *options, str(script)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={"PATH": os.environ.get("PATH", ""), **env},
            start_new_session=True,
        )
        self._id = 0
        self.request(
            "initialize",
            protocolVersion="2025-11-25",
            capabilities={},
            clientInfo={"name": "test", "version": "1"},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, **params: Any) -> Any:
        self._id += 1
        self.send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        assert self.process.stdout is not None
        while line := self.process.stdout.readline():
            message = json.loads(line)
            if message.get("id") == self._id:
                return message["result"]
        raise AssertionError("the server closed its stdout")

    def serving_pid(self) -> int:
        result = self.request("tools/call", name="pid", arguments={})
        pid: int = result["structuredContent"]["result"]
        return pid

    def close(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def server() -> Iterator[Server]:
    started = Server()
    yield started
    started.close()


def test_a_stdio_server_the_tests_start_is_served_by_a_fork_that_ends_with_its_stdin(
    server: Server,
) -> None:
    fork = server.serving_pid()
    assert fork != server.process.pid
    assert parent_of(fork) == _FORK_SERVER[0].pid
    assert server.process.stdin is not None
    server.process.stdin.close()  # as the client closes: the fork, then the process, end
    assert server.process.wait(timeout=30) == 0
    assert not pid_exists(fork)


def test_the_process_ends_with_the_forks_exit_code(server: Server) -> None:
    fork = server.serving_pid()
    server.send({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "die"}})
    assert server.process.wait(timeout=30) == 3  # the demo's die tool: os._exit(3)
    assert not pid_exists(fork)


def test_a_sigterm_to_the_process_group_ends_the_fork_and_the_process_by_it(
    server: Server,
) -> None:
    """What the ``mcp`` client sends when a server outlives its closed stdin."""
    fork = server.serving_pid()
    os.killpg(server.process.pid, signal.SIGTERM)
    assert server.process.wait(timeout=30) == -signal.SIGTERM
    assert not pid_exists(fork)


def test_a_killed_process_takes_its_fork_with_it(server: Server) -> None:
    fork = server.serving_pid()
    server.process.kill()
    assert server.process.wait(timeout=30) == -signal.SIGKILL
    for _ in range(1200):  # the fork server sees the connection close, then kills and reaps
        if not pid_exists(fork):
            break
        time.sleep(0.01)
    assert not pid_exists(fork)


def test_a_server_asking_for_its_own_process_serves_in_it() -> None:
    own = Server(**{OWN_PROCESS: "1"})
    try:
        assert own.serving_pid() == own.process.pid
    finally:
        own.close()


def test_another_checkouts_server_is_not_served_with_this_ones_code(tmp_path: Path) -> None:
    """The fork server forks with the modules it imported: a copy of the script elsewhere (an
    older or newer checkout's server) serves in its own process."""
    copy = tmp_path / "mcp_servers"
    shutil.copytree(STDIO_SCRIPT.parent, copy, ignore=shutil.ignore_patterns("__pycache__"))
    elsewhere = Server(script=copy / STDIO_SCRIPT.name)
    try:
        assert elsewhere.serving_pid() == elsewhere.process.pid
    finally:
        elsewhere.close()


# The start of the scripts below: ``serving_pid(script)``, a server started and asked its pid.
_SERVING_PID = """
import json, subprocess, sys

def serving_pid(script):
    # The stdio server `script` started as the mcp client starts it; it and its pid tool's answer.
    server = subprocess.Popen(
        [sys.executable, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={"PATH": ""}, start_new_session=True,
    )
    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "pid", "arguments": {}}},
    ):
        server.stdin.write(json.dumps(message).encode() + b"\\n")
    server.stdin.flush()
    for line in server.stdout:
        answer = json.loads(line)
        if answer.get("id") == 2:
            return server, answer["result"]["structuredContent"]["result"]
    raise AssertionError("the server closed its stdout")
"""
_GRANDCHILD = (
    _SERVING_PID
    + """
server, serving = serving_pid(sys.argv[1])
print(server.pid, serving)
server.stdin.close()
print(server.wait())
"""
)


def test_a_server_started_by_a_process_the_test_started_is_served_by_a_fork() -> None:
    """An app's other process, or a script a test runs, starts servers too."""
    done = subprocess.run(
        [sys.executable, "-c", _GRANDCHILD, str(STDIO_SCRIPT)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    started, serving, code = done.stdout.split()
    assert serving != started and code == "0"
    assert not pid_exists(int(serving))


_ITS_OWN_FORK_SERVER = (
    _SERVING_PID
    + """
import ctypes, os, signal, socket
folder = sys.argv[1]
sys.path.insert(0, folder)
from forkserver import address

# Orphans are this process's to reap (as pid 1 may not, in a container): a fork still serving
# after its fork server is gone shows as one not ended, rather than as a zombie or not at all.
ctypes.CDLL(None, use_errno=True).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
fork_server = subprocess.Popen(
    [sys.executable, folder + "/forkserver.py", str(os.getpid()), "stdio_server"],
    stdin=subprocess.DEVNULL,
)
for _ in range(6000):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(address(os.getpid()))
        except OSError:
            signal.sigtimedwait([], 0.01)
            continue
        break
server, fork = serving_pid(folder + "/stdio_server.py")
fork_server.kill()
fork_server.wait()
server.wait(timeout=60)  # its stdin still open: the fork has no end of input to end at
for _ in range(1000):
    if os.waitpid(fork, os.WNOHANG)[0] == fork:
        print(server.pid != fork, "ended")
        break
    signal.sigtimedwait([], 0.01)
else:
    os.kill(fork, signal.SIGKILL)
    os.waitpid(fork, 0)
    print(server.pid != fork, "outlived its fork server")
"""
)


def test_a_fork_ends_with_its_fork_server() -> None:
    """A fork server gone (killed, or ended as the pytest process did) takes its forks with it:
    a fork serving on (an HTTP server's port, a stdio server whose client still holds its
    pipes) outlived the session, while the process started for it had ended as though the
    server had. Run with a fork server of its own (the session's must live on)."""
    done = subprocess.run(
        [sys.executable, "-c", _ITS_OWN_FORK_SERVER, str(STDIO_SCRIPT.parent)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split() == ["True", "ended"], done.stdout + done.stderr


def test_a_server_started_with_interpreter_options_of_its_own_serves_in_its_process() -> None:
    """The fork server's interpreter runs what it forks: a server started with options of its
    own (``-X dev``, ``-W error``, ``-O``; or another Python) would have been served without
    them, a test of them passing for the wrong reason."""
    own = Server(options=("-X", "dev", "-W", "error"))
    try:
        assert own.serving_pid() == own.process.pid
    finally:
        own.close()


_IN_ANOTHER_PID_NAMESPACE = """
import json, subprocess, sys
pytest_pid, script = sys.argv[1], sys.argv[2]
# This process is the namespace's pid 1: its next child gets the pytest process's number.
with open("/proc/sys/kernel/ns_last_pid", "w") as last:
    last.write(str(int(pytest_pid) - 1))
parent = subprocess.Popen([sys.executable, "-c", sys.argv[3], script], stdout=subprocess.PIPE)
said = parent.communicate()[0].decode()
print(pytest_pid, said)
"""


def test_a_server_in_another_pid_namespace_is_not_served_by_this_sessions_fork_server() -> None:
    """A pytest process of another pid namespace (another container on the same network, as
    two CI jobs' often are) has this one's number as often as not: its servers' launchers
    found this session's fork server by that number and were served by it, in this container,
    with its files; that session's own fork server could not bind the name at all."""
    if not shutil.which("unshare"):
        pytest.skip("no unshare(1) here")
    unshare = ["unshare", "--pid", "--fork", "--mount-proc"]
    arguments = [str(os.getpid()), str(STDIO_SCRIPT), _GRANDCHILD]
    done = subprocess.run(
        [*unshare, sys.executable, "-c", _IN_ANOTHER_PID_NAMESPACE, *arguments],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0 and "unshare" in done.stderr:
        pytest.skip(f"no pid namespace to be made here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    parent, started, serving, code = done.stdout.split()
    assert int(started) > int(parent)  # the launcher's parent had the pytest process's number
    assert serving == started and code == "0"  # so it served itself: no fork server there


def test_a_fork_server_that_could_not_start_is_described_with_its_stderr(tmp_path: Path) -> None:
    """A second fork server of this session cannot bind its socket's name (the session's
    holds it): it ends at once, and what the session's end warns of says how, and why."""
    with (tmp_path / "stderr").open("w+b") as errors:
        process = subprocess.Popen(
            [sys.executable, str(STDIO_SCRIPT.parent / "forkserver.py"), str(os.getpid())],
            stdin=subprocess.DEVNULL,
            stderr=errors,
        )
        try:
            assert process.wait(timeout=60) == 1
        finally:  # it served (the session's had gone): not left behind
            process.kill()
            process.wait()
        said = _fork_server_ended(process, errors)
    assert said is not None
    assert said.startswith(
        "the MCP servers' fork server (tests/mcp_servers/forkserver.py) ended (exit code 1) "
        "before the session did: "
    )
    assert said.endswith("OSError: [Errno 98] Address already in use\n")  # its stderr
    assert _fork_server_ended(_FORK_SERVER[0], None) is None  # the session's: serving


_KILLS_IT = """
from conftest import _FORK_SERVER

def test_the_fork_server_is_killed() -> None:
    _FORK_SERVER[0].kill()
    _FORK_SERVER[0].wait()
"""


def test_a_fork_server_gone_before_the_session_ended_is_a_warning_in_its_summary(
    tmp_path: Path,
) -> None:
    """A fork server that could not start, or died, was not seen: every MCP server started
    after that served in a process of its own, and the tests passed, slower. The session ends
    with a warning in pytest's summary (its tests pass)."""
    (tmp_path / "test_session.py").write_text(_KILLS_IT)
    tests = Path(__file__).resolve().parent
    path = os.pathsep.join([str(tests), str(tests.parent)])  # its conftest, this checkout's adk
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": path, "PYADK_TESTS_DISK_TMP": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = done.stdout
    assert done.returncode == 0, said + done.stderr
    assert "1 passed, 1 warning" in said
    summary = said[said.index("warnings summary") :]
    assert (
        "PytestWarning: the MCP servers' fork server (tests/mcp_servers/forkserver.py) ended "
        f"(killed by signal {signal.SIGKILL.value}) before the session did" in summary
    )
