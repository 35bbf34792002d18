"""A fork server for the MCP servers the tests start: the ``mcp`` package imported once.

Importing the ``mcp`` package costs a server process about a second of CPU (its protocol types
are pydantic models built at import), and the tests start a few hundred such processes.
``conftest.py`` starts this one process per pytest session, with the package and the servers'
modules imported. A server script of this folder started by that pytest process, or by a process
it started (an app's other process, a script run by a test; a few generations down), hands its
standard streams, arguments, environment and working directory to it (``hand_off``): a fork of it
serves them, the same MCP server over the same pipes (stdio) or port (``http_server.py``,
``market_server.py``), with the script's own code. The scripts that import ``mcp`` at their top
import ``handoff`` first; ``stdio_server.py`` hands off after its lifecycle switches.

The process started for the server stays the server's process as far as its starter can tell:

- it lives as long as the fork serving, and ends as that fork ended (its exit code, or the
  signal that ended it), once the fork is gone;
- a signal sent to it (``SIGTERM``, ``SIGINT``, ``SIGHUP``; the ``mcp`` client sends
  ``SIGTERM`` to the process group) is sent on to the fork;
- if it is killed (``SIGKILL``), the fork is killed too (the fork server sees its connection
  close), and reaped before the fork server does anything else;
- if the fork server ends (killed, or at the end of its pytest process, which it outlives by a
  second at most), its forks are killed with it (``PR_SET_PDEATHSIG``), and the processes
  started for them end with 1.

The fork is the process that serves, so a server's ``pid`` tool answers the fork's process id,
and ``HTTPServerProcess.kill`` kills the fork (the HTTP servers print it after their port). A
server given ``DEMO_OWN_PROCESS`` in its environment serves in the process started for it, as
do those given a lifecycle switch of ``stdio_server.py`` (a pid file, a stall, a refusal to start,
an environment file: they are about that process), and those started with interpreter options
the fork server was not (``-X dev``, ``-W error``, ``PYTHONWARNINGS``; another Python).
``PYADK_TESTS_NO_FORK_SERVER=1`` in the tests' environment starts no fork server
(``conftest.py``).

Standard library only on the launcher's side (``hand_off``): it runs before the script imports
``mcp``. Linux only (an abstract Unix socket, named by the pytest process's id and pid
namespace); elsewhere, or without a fork server, ``hand_off`` returns ``False`` and the script
serves by itself. Forks share the fork server's hash seed (``PYTHONHASHSEED``), where
processes started apart each had their own.
"""

from __future__ import annotations

import array
import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys
from typing import Any

OWN_PROCESS = "DEMO_OWN_PROCESS"
"""Set (to anything) in a server's environment: it serves in its own process, as it did before."""

_GENERATIONS = 4  # a server started by a test's process, by its child, its grandchild...
_LIFECYCLE = ("DEMO_PID_FILE", "DEMO_STALL_UNTIL_FILE", "DEMO_REFUSE_START_FILE", "DEMO_ENV_FILE")


def address(pytest_pid: int) -> str:
    """The abstract Unix socket of the fork server of the pytest process ``pytest_pid`` of this
    process's pid namespace. Abstract sockets are the network namespace's: another container
    on the same network (whose pytest process often has this one's number) names its own."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0
    return f"\0pyadk-tests-mcp-forkserver-{namespace}-{pytest_pid}"


# -- the launcher's side: the process the MCP client started ----------------------------------
def hand_off(module: str) -> bool:
    """Have the fork server serve this process's stdio with ``module``'s ``serve()``, and wait for
    that fork to end; exits this process as the fork ended. Returns ``False`` (nothing done)
    where there is no fork server for this process's parent, or this server wants a process of
    its own."""
    if not sys.platform.startswith("linux"):
        return False
    if os.environ.get(OWN_PROCESS) or any(os.environ.get(name) for name in _LIFECYCLE):
        return False
    connection = _connect()
    if connection is None:
        return False
    try:
        request = {
            "module": module,
            "script": os.path.realpath(sys.argv[0]),
            "argv": sys.argv,
            "env": dict(os.environ),
            "cwd": os.getcwd(),
            "interpreter": _interpreter(),
        }
        fds = array.array("i", [0, 1, 2])
        connection.sendmsg(
            [json.dumps(request).encode() + b"\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
        )
    except OSError:  # no working directory, a standard stream closed: served here, as before
        connection.close()
        return False
    reader = connection.makefile("rb")
    line = reader.readline()
    if not line:
        os._exit(1)  # the fork server went away before it answered
    if line == b"0\n":  # not its script (another checkout's): served here
        reader.close()
        connection.close()
        return False
    child = int(line)
    # The fork holds the pipes now: this process's copies would keep them open after it ends.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)

    def forward(signum: int, frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    line = reader.readline()  # the fork's end (a signal forwarded meanwhile: read on, PEP 475)
    if not line:
        os._exit(1)  # the fork server went away: the fork with it
    status = json.loads(line)
    if status.get("signal"):
        signum = int(status["signal"])
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    os._exit(int(status.get("code", 1)))


_NOT_COMPARED = ("dont_write_bytecode", "hash_randomization", "utf8_mode")
"""Interpreter flags a fork may differ in from the process started for it: bytecode it writes,
its hash seed (said above), the UTF-8 mode a C locale turns on (the fork server is given a
minimal environment; a UTF-8 locale reads and writes as that mode does)."""


def _interpreter() -> list[Any]:
    """What a fork runs with of its interpreter, as this process's: a server started with
    another (``-X dev``, ``-W error``, ``-O``, ``PYTHONWARNINGS``; another Python) serves in its
    own process, under those."""
    flags = {
        name: getattr(sys.flags, name)
        for name in dir(sys.flags)
        if not name.startswith(("_", "n_"))
        and name not in _NOT_COMPARED
        and not callable(getattr(sys.flags, name))
    }
    return [
        os.path.realpath(sys.executable),
        sys.version,
        sorted(flags.items()),
        list(sys.warnoptions),
        sorted((str(name), str(value)) for name, value in sys._xoptions.items()),
    ]


def _connect() -> socket.socket | None:
    """A connection to the fork server of this process's parent, or of the parent's parent (an
    app's process a test started, whose server this is), and so on for a few generations;
    ``None`` where none of them has one."""
    pid = os.getppid()
    for _ in range(_GENERATIONS):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(address(pid))
        except OSError:
            connection.close()
        else:
            return connection
        try:
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            return None
        if pid <= 1:
            return None
    return None


# -- the fork server --------------------------------------------------------------------------
def _serve_child(request: dict[str, Any], fds: list[int]) -> None:
    """In the fork: take the launcher's streams, arguments, environment and directory, and run
    its module's ``serve()``; never returns."""
    code = 1
    try:
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.argv = list(request["argv"])
        import importlib

        code = 0
        module = importlib.import_module(request["module"])
        if hasattr(module, "serve"):
            module.serve()
        else:  # an app server: ``build_server().run("stdio")`` under its ``__main__`` guard
            module.build_server().run("stdio")
    except SystemExit as exit:
        code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _receive(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    fds = array.array("i")
    data, ancillary, _, _ = connection.recvmsg(1 << 20, socket.CMSG_LEN(3 * fds.itemsize))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    while not data.endswith(b"\n"):
        more = connection.recv(1 << 20)
        if not more:
            raise ConnectionError("the launcher went away")
        data += more
    return json.loads(data), list(fds)


def _ours(request: dict[str, Any]) -> bool:
    """Whether the script asking is the file of the module this process imported for it (not
    another checkout's copy, a server of another version), run by this interpreter with its
    options (``_interpreter``)."""
    module = sys.modules.get(str(request.get("module")))
    path = getattr(module, "__file__", None)
    return (
        path is not None
        and os.path.realpath(path) == request.get("script")
        and json.loads(json.dumps(_interpreter())) == request.get("interpreter")
    )


def _die_with(parent: int, prctl: Any) -> None:
    """In a fork: be killed when the fork server ends (killed, or ended with its pytest
    process), as its launcher is told it did; a fork left serving would hold its port, or its
    client's pipes, past the session."""
    prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the line above
        os._exit(1)


def main(pytest_pid: int, modules: list[str]) -> None:
    import ctypes
    import importlib

    for module in modules:  # the servers' imports, done once here
        importlib.import_module(module)
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    server = os.getpid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address(pytest_pid))
    listener.listen(64)
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    children: dict[int, socket.socket] = {}  # fork's pid: its launcher's connection
    by_connection: dict[socket.socket, int] = {}
    while os.getppid() == pytest_pid:
        readable, _, _ = select.select([listener, wakeup_read, *by_connection], [], [], 1.0)
        if wakeup_read in readable:
            os.read(wakeup_read, 4096)
        while children:  # reap every fork that ended; tell its launcher how
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            connection = children.pop(pid, None)
            if connection is None:
                continue
            by_connection.pop(connection, None)
            if os.WIFSIGNALED(status):
                said = {"signal": os.WTERMSIG(status)}
            else:
                said = {"code": os.waitstatus_to_exitcode(status)}
            with contextlib.suppress(OSError):  # a launcher killed: nobody to tell
                connection.sendall(json.dumps(said).encode() + b"\n")
            connection.close()
        for connection in [c for c in readable if c in by_connection]:
            # A launcher's connection is readable only once it closed: it was killed, and
            # its fork goes with it, before anything else is done (a server started again
            # at once finds its port free, as it would had the killed process served itself).
            pid = by_connection.pop(connection)
            del children[pid]
            connection.close()
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        if listener in readable:
            try:
                connection, _ = listener.accept()
            except OSError:  # out of descriptors, a connection reset: the launcher serves itself
                continue
            uid = struct.unpack(
                "3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
            )[1]
            if uid != os.getuid():
                connection.close()
                continue
            try:
                request, fds = _receive(connection)
            except (OSError, ValueError):
                connection.close()
                continue
            if not _ours(request):
                for fd in fds:
                    os.close(fd)
                with contextlib.suppress(OSError):
                    connection.sendall(b"0\n")
                connection.close()
                continue
            pid = os.fork()
            if pid == 0:
                _die_with(server, prctl)
                listener.close()
                connection.close()
                for other in by_connection:
                    other.close()
                signal.set_wakeup_fd(-1)
                os.close(wakeup_read)
                os.close(wakeup_write)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _serve_child(request, fds)
            for fd in fds:
                os.close(fd)
            try:
                connection.sendall(f"{pid}\n".encode())
            except OSError:  # the launcher is gone already: so is its fork
                connection.close()
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
                continue
            children[pid] = connection
            by_connection[connection] = pid


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
