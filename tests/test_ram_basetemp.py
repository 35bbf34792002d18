"""The session's temporary folders on tmpfs (``conftest._ram_backed_basetemp``): a session
removes the folders earlier sessions left, never one a session still running uses."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import conftest
import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's /dev/shm")


@pytest.fixture
def ram(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder standing for /dev/shm (a tmpfs with room)."""
    monkeypatch.setattr(conftest, "_RAM", tmp_path)
    monkeypatch.setattr(conftest, "_tmpfs_mounted_at", lambda path: True)
    monkeypatch.setattr(conftest, "_RAM_FREE_AT_LEAST", 0)
    monkeypatch.delenv("PYADK_TESTS_DISK_TMP", raising=False)
    return tmp_path


def configured() -> Any:
    config = SimpleNamespace(option=SimpleNamespace(basetemp=None))
    conftest._ram_backed_basetemp(config)  # type: ignore[arg-type]
    return config.option.basetemp


def no_such_pid() -> int:
    """A process id no process has (above the kernel's highest)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


def test_a_folder_of_a_session_in_another_pid_namespace_is_left_alone(ram: Path) -> None:
    """Another container sharing /dev/shm (``--ipc=host``) runs a session whose process this
    one cannot see: its live folder looked like a dead session's and was removed."""
    namespace = os.stat("/proc/self/ns/pid").st_ino
    theirs = [ram / f"pyadk-tests-{namespace + 1}-{no_such_pid() + n}" for n in range(2)]
    for folder in theirs:
        folder.mkdir()
        (folder / "checkpoints.db").write_bytes(b"in use")
    configured()
    assert all((folder / "checkpoints.db").exists() for folder in theirs)


def test_a_session_removes_the_folders_dead_sessions_left_but_the_newest(ram: Path) -> None:
    namespace = os.stat("/proc/self/ns/pid").st_ino
    dead = [ram / f"pyadk-tests-{namespace}-{no_such_pid() + n}" for n in range(3)]
    live = ram / f"pyadk-tests-{namespace}-{os.getppid()}"
    for at, folder in enumerate([*dead, live]):
        folder.mkdir()
        os.utime(folder, (at, at))
    assert configured() == str(ram / f"pyadk-tests-{namespace}-{os.getpid()}")
    assert sorted(ram.iterdir()) == sorted([dead[-1], live])
