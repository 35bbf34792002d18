"""tests/flink_runs.py, the plugin that runs test_flink's job scripts in the background, on a
stand-in job script (no Flink needed): what a run leaves running is killed with it, the session's
end kills a run in progress and wakes its reader, and no process group is signalled once its
script has been reaped, as its pid may be another's by then (pid_max is 32768 here)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import flink_runs
import pytest
from flink_runs import Finished, _Runs

JOB = """
import os, pathlib, subprocess, sys, time
left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(left.pid, flush=True)
pathlib.Path(__file__).with_name("left").write_text(f"{left.pid} {os.getpid()}")
if sys.argv[1:] == ["hang"]:
    time.sleep(120)
"""


@pytest.fixture
def runs(tmp_path: Path) -> Any:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    made = _Runs(job)
    yield made
    made.stop()


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie left to a parent that does not reap counts)."""
    deadline = time.monotonic() + 30  # a bound for a loaded machine, not a time asserted
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)  # the test's own leftover: cleaned up before it fails
    return False


def _left(done: Finished) -> int:
    return int(done.stdout.split()[0])


@pytest.mark.skipif(not hasattr(os, "waitid"), reason="kept unreaped with os.waitid")
def test_what_a_run_leaves_running_is_killed_as_it_ends(runs: _Runs) -> None:
    done = runs.result(())
    assert done.returncode == 0, done.stderr
    assert _gone(_left(done))


def test_the_session_ending_after_a_run_signals_no_process_group(
    runs: _Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = runs.result(())
    assert done.returncode == 0, done.stderr
    signalled: list[int] = []
    monkeypatch.setattr(os, "killpg", lambda pid, sig: signalled.append(pid))
    runs.stop()
    assert signalled == []  # the script was reaped: its pid may name another's group now


def test_the_session_ending_kills_a_run_in_progress_and_wakes_its_reader(
    runs: _Runs, tmp_path: Path
) -> None:
    read: list[Finished] = []
    reader = threading.Thread(target=lambda: read.append(runs.result(("hang",))))
    reader.start()
    left = tmp_path / "left"
    while not left.exists() or not left.read_text():  # the script is running and has its child
        time.sleep(0.01)
    runs.stop()
    reader.join()
    [done] = read
    assert done.returncode == -signal.SIGKILL
    assert _gone(_left(done))
    # A run asked for after the session ended is not waited for.
    assert runs.result(("later",)).stderr == "the session ended before it started"


def test_a_hung_run_is_killed_by_its_guard(runs: _Runs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flink_runs, "_TIMEOUT", 0.5)
    done = runs.result(("hang",))
    assert done.returncode == -signal.SIGKILL
    assert "(killed: still running after 0 s)" in done.stderr
    assert _gone(_left(done))


def test_a_run_that_cannot_start_is_reported_to_its_reader(
    runs: _Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    done = runs.result(())
    assert done.returncode == -1 and "could not be made" in done.stderr


def test_runs_start_the_job_they_were_made_for_whatever_the_module_names_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's runs start in the background at collection; this file's tests name a
    stand-in script of their own, which the session's runs must not start when these tests run
    first (their arguments given first), as they could when each run read the module's JOB."""
    job = tmp_path / "job.py"
    job.write_text(JOB)
    made = _Runs(job)
    monkeypatch.setattr(flink_runs, "JOB", tmp_path / "another.py")  # what it used to patch
    try:
        done = made.result(())
    finally:
        made.stop()
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "left").exists()


SESSION = """
import sys, time
sys.path.insert(0, sys.argv[1])
import flink_runs
from pathlib import Path
flink_runs._Runs(Path(sys.argv[2])).start([("hang",)])
time.sleep(120)
"""


def test_a_session_killed_outright_takes_its_run_with_it(tmp_path: Path) -> None:
    """pytest killed by a signal it cannot catch (SIGKILL; SIGTERM, which ``timeout`` sends, ends
    it as abruptly) never reaches ``stop``: the run, in a session of its own so that no signal
    for pytest's group reaches it, ran on (a Flink job: minutes of a JVM and its workers)."""
    job = tmp_path / "job.py"
    job.write_text(JOB)
    tests = Path(__file__).parent
    session = subprocess.Popen([sys.executable, "-c", SESSION, str(tests), str(job)])
    try:
        left = tmp_path / "left"
        while not left.exists() or not left.read_text():  # the run is going
            assert session.poll() is None
            time.sleep(0.01)
    finally:
        session.kill()
        session.wait()
    grandchild, script = map(int, left.read_text().split())
    assert _gone(script) and _gone(grandchild)
