"""tests/flink_job.py's runs for tests/test_flink.py, started as soon as pytest has collected the
tests that read them, and run one after the other in the background while the rest of the suite runs.

Why: each run is a process of its own that starts a JVM, a local Flink MiniCluster and PyFlink's
Python workers for job after job, a minute or more of a machine's time; run where its test stands,
the suite waited for it while pytest, which runs one test at a time, left a CPU core idle. Started
at once, it uses that core. The tests read the same outputs and assert the same things; only the
moment the job scripts run changes (and with it the tests' reported durations, which now show the
wait for what is left of a run).

A test names the arguments of the run it reads with ``@pytest.mark.flink_run(*args)`` (declared
in pyproject.toml: it is applied before this plugin loads) and takes its outputs with
``finished(request)``. Only runs whose tests are selected start (none under
``--collect-only``); a run its test asks for before it was started (e.g. the hook did not run)
starts then; what is still running when the session ends is killed, and so is a run whose
pytest was killed (``_LEADER``).

Used as a plugin: ``pytest_plugins = ["flink_runs"]`` in tests/test_flink.py.

PYTEST_DONT_REWRITE (a plugin module: no asserts here)
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["Finished", "finished"]

ROOT = Path(__file__).resolve().parent.parent
JOB = ROOT / "tests" / "flink_job.py"
# Per run, from its own start: a guard against a hung job, not a time the run must keep. It is
# longer than the 300 s a run had when nothing else ran beside it, as it now shares the machine
# with the rest of the suite; the reading test's own timeout bounds how long the suite waits.
_TIMEOUT = 600.0
_MARKER = "flink_run"

# The leader of a run's process group: it starts the job script and, when pytest is gone however
# it went (SIGKILL, or SIGTERM, which ``timeout`` sends and pytest does not catch: no
# ``pytest_sessionfinish``), kills the group. pytest holds the other end of its stdin, a pipe no
# other process inherits, so its end of file says so. The group is a session of its own, which
# no signal for pytest's group reaches: without this, the job ran on, for good if it hung.
_LEADER = """
import os, signal, subprocess, sys, threading

def watch():
    while os.read(0, 512):
        pass
    os.killpg(0, signal.SIGKILL)

threading.Thread(target=watch, daemon=True).start()
code = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL).wait()
if code < 0:  # the script's signal, as its exit status
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code)  # no interpreter shutdown beside the watching thread
"""


@dataclass(frozen=True)
class Finished:
    """How one run of the job script ended: its exit status and what it printed."""

    returncode: int
    stdout: str
    stderr: str


class _Runs:
    """The runs asked for, in order, on one background thread; each result is kept for its test.

    ``job`` is the script each run starts, fixed when the runs are made: tests/test_flink_runs.py
    makes its own runs of a stand-in script, and the session's runs, started in the background at
    collection, must not start that stand-in when those tests run first (``pytest
    tests/test_flink_runs.py tests/test_flink.py``), as they could while it was the module's
    ``JOB``, read as each run started, that those tests replaced."""

    def __init__(self, job: Path = JOB) -> None:
        self._job = job
        self._lock = threading.Lock()
        self._queue: list[tuple[str, ...]] = []
        self._done: dict[tuple[str, ...], Finished] = {}
        self._ended: dict[tuple[str, ...], threading.Event] = {}
        self._process: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._stopped = False

    def start(self, runs: list[tuple[str, ...]]) -> None:
        with self._lock:
            for args in runs:
                if args not in self._ended:
                    self._ended[args] = threading.Event()
                    if self._stopped:  # no thread would take it: the reader must not wait for ever
                        self._done[args] = Finished(-1, "", "the session ended before it started")
                        self._ended[args].set()
                    else:
                        self._queue.append(args)
            if self._queue and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._work, name="flink runs", daemon=True)
                self._thread.start()

    def result(self, args: tuple[str, ...]) -> Finished:
        self.start([args])
        self._ended[args].wait()  # the test's own timeout bounds this wait; the run has its own
        return self._done[args]

    def stop(self) -> None:
        """Kill the run in progress and start no other (the session is over)."""
        with self._lock:
            self._stopped = True
            self._queue.clear()
            if self._process is not None:  # not reaped yet (see _run): its pid names its group
                _kill(self._process)
        if self._thread is not None:
            self._thread.join()

    def _work(self) -> None:
        while True:
            with self._lock:
                if self._stopped or not self._queue:
                    return
                args = self._queue.pop(0)
            try:
                done = self._run(args)
            except BaseException as exc:  # reported by the test that reads it, never lost here
                done = Finished(-1, "", f"the run could not be made: {exc!r}")
            self._done[args] = done
            self._ended[args].set()

    def _run(self, args: tuple[str, ...]) -> Finished:
        # Files, not pipes: Flink logs far more than a pipe holds, and nobody reads until the end.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            with self._lock:
                if self._stopped:
                    return Finished(-1, "", "the session ended before the run started")
                # A session of its own, so that a kill reaches the JVM and workers it starts too.
                process = subprocess.Popen(
                    [sys.executable, "-c", _LEADER, sys.executable, str(self._job), *args],
                    cwd=ROOT,
                    stdin=subprocess.PIPE,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
                self._process = process
            hung: list[bool] = []
            guard = threading.Timer(_TIMEOUT, self._hung, (process, hung))
            guard.daemon = True  # a session ending without stop() must not wait for it at exit
            guard.start()
            try:
                _exited(process)
            finally:
                guard.cancel()
            with self._lock:
                # The script has exited but is not reaped, so its pid still names its group:
                # what it left running there (its JVM, its workers) is killed with it. Reaped,
                # the pid may become another's, so the group is never signalled after that.
                _kill(process)
                returncode = process.wait()
                self._process = None
            if process.stdin is not None:
                process.stdin.close()
            if hung:
                err.write(f"\n(killed: still running after {_TIMEOUT:.0f} s)".encode())
            out.seek(0)
            err.seek(0)
            return Finished(
                returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace")
            )

    def _hung(self, process: subprocess.Popen[bytes], hung: list[bool]) -> None:
        """The hang guard: kill the run's group if its script has not been reaped yet."""
        with self._lock:
            if self._process is process:
                hung.append(True)
                _kill(process)


def _exited(process: subprocess.Popen[bytes]) -> None:
    """Wait until ``process`` has exited, leaving it unreaped where the system allows."""
    if hasattr(os, "waitid"):
        with contextlib.suppress(ChildProcessError):  # reaped by another: wait() says how
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    else:  # macOS before Python 3.13: reaped here, so what it left running is left running
        process.wait()


def _kill(process: subprocess.Popen[bytes]) -> None:
    """Kill the run's process group: the script, its JVM and its Python workers. Never once the
    script is reaped (``returncode`` set): its pid may be another process's by then."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


_RUNS = _Runs()


def finished(request: pytest.FixtureRequest) -> Finished:
    """The run the requesting test's ``flink_run`` marker names, once it has ended."""
    marker = request.node.get_closest_marker(_MARKER)
    if marker is None:
        raise TypeError(f"{request.node.nodeid} has no @pytest.mark.{_MARKER}(...)")
    return _RUNS.result(tuple(marker.args))


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    runs: list[tuple[str, ...]] = []
    for item in session.items:
        marker = item.get_closest_marker(_MARKER)
        if marker is not None and tuple(marker.args) not in runs:
            runs.append(tuple(marker.args))
    _RUNS.start(runs)


def pytest_sessionfinish(session: pytest.Session) -> None:
    _RUNS.stop()
