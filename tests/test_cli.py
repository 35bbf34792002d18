"""The ``pyadk`` command, run as a real subprocess against a real SQLite checkpoint file."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from adk import AgentEvent, AgentInput, BaseAgent, RunContext, Runner
from adk.checkpoint import SQLiteCheckpointStore


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


def test_missing_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    done = _pyadk("checkpoint", "show", "nope", "--sqlite", str(tmp_path / "empty.db"))
    assert done.returncode == 1
    assert "no checkpoint 'nope'" in done.stderr
