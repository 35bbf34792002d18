"""Cross-process resume through a SQLite checkpoint file: a run pauses in one subprocess and is
resumed in another, which shares nothing with the first but the file. Also runs the
``examples/payment_approval.py`` example end to end.

The subprocesses run this file as a script (see ``main`` at the bottom): ``start`` runs until the
pause and prints the interrupt as JSON, ``resume`` resumes and prints what happened. Each side
effect (an agent run, a tool call) is appended to a log file, so the test can see what ran in
which process.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    Interrupt,
    RunContext,
    Runner,
    SequentialAgent,
    ToolContext,
    register_type,
    tool,
)
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent

ROOT = Path(__file__).resolve().parent.parent


class TransferOrder(BaseModel):
    iban: str
    amount_cents: int


# An explicit name: the class lives in ``__main__`` in the subprocesses and in this module under
# pytest, and a stable name is what lets a checkpoint outlive the code layout.
register_type(TransferOrder, "tests.TransferOrder")


def _log(path: Path, entry: str) -> None:
    with path.open("a") as f:
        f.write(f"{os.getpid()} {entry}\n")


def _build(log: Path) -> Runner:
    """The agents, identical in both processes."""

    class Intro(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            _log(log, "intro")
            ctx.session["customer"] = "Ann"
            yield AgentEvent.of("intro: customer is Ann")

    @tool
    def lookup(name: str) -> str:
        """Find a customer's IBAN."""
        _log(log, "lookup")
        return f"{name}: DE02 1234"

    @tool
    def transfer(iban: str, amount_cents: int, ctx: ToolContext) -> str:
        """Send money; a person confirms first."""
        resume = ctx.resume
        _log(log, f"transfer {json.dumps(resume.data if resume else None)}")
        if resume is None:
            order = TransferOrder(iban=iban, amount_cents=amount_cents)
            raise Interrupt({"confirm": f"{amount_cents} to {iban}"}, state=order)
        assert isinstance(resume.state, TransferOrder), resume.state
        return f"sent {resume.state.amount_cents} to {resume.state.iban}: {resume.data}"

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role == "tool":
            return f"finished for {messages[1].content}"
        calls = [
            tool_call("lookup", {"name": "Ann"}, id="call_1"),
            tool_call("transfer", {"iban": "DE02 1234", "amount_cents": 500}, id="call_2"),
        ]
        return Reply(tool_calls=calls)

    pay = ReActAgent("pay", ScriptedModel(reply), tools=[lookup, transfer])
    store = SQLiteCheckpointStore(os.environ["CHECKPOINT_DB"])
    return Runner(SequentialAgent("root", [Intro("intro"), pay]), checkpoint_store=store)


async def _start(log: Path) -> dict[str, Any]:
    runner = _build(log)
    events = [e async for e in runner.run("pay Ann 5 EUR", checkpoint_id="pay-ann")]
    await runner.checkpoint_store.aclose()  # type: ignore[attr-defined]
    info = events[-1].interrupted
    return {
        "events": simplify_events(events),
        "checkpoint_id": info.checkpoint_id if info else None,
        "points": [{"id": p.id, "info": p.info} for p in info.points] if info else [],
    }


async def _resume(log: Path, checkpoint_id: str, data: Any) -> dict[str, Any]:
    runner = _build(log)
    result = await runner.invoke_resume(checkpoint_id, data)
    await runner.checkpoint_store.aclose()  # type: ignore[attr-defined]
    return {
        "events": simplify_events(result.events),
        "session": result.session.values,
        "text": result.text,
    }


def main(argv: list[str]) -> None:
    command, log = argv[0], Path(argv[1])
    if command == "start":
        out = asyncio.run(_start(log))
    else:
        out = asyncio.run(_resume(log, argv[2], json.loads(argv[3])))
    print(json.dumps(out))


# -- the tests ----------------------------------------------------------------------------------


def _run(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CHECKPOINT_DB": str(db)}
    return subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )


def _log_entries(log: Path) -> list[tuple[int, str]]:
    lines = log.read_text().splitlines()
    return [(int(pid), entry) for pid, entry in (line.split(" ", 1) for line in lines)]


async def test_cross_process_resume_through_sqlite(tmp_path: Path) -> None:
    db, log = tmp_path / "checkpoints.db", tmp_path / "effects.log"

    started = _run(db, "start", str(log))

    assert started.returncode == 0, started.stderr
    paused = json.loads(started.stdout.splitlines()[-1])
    assert paused["checkpoint_id"] == "pay-ann"
    assert paused["points"] == [
        {"id": "agent:root/agent:pay/tool:transfer#call_2", "info": {"confirm": "500 to DE02 1234"}}
    ]
    assert paused["events"][-1] == "pay: [interrupt agent:root/agent:pay/tool:transfer#call_2]"
    first_pid = _log_entries(log)[0][0]

    resumed = _run(db, "resume", str(log), "pay-ann", json.dumps("confirmed by Bob"))

    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout.splitlines()[-1])
    assert out["events"] == [
        "pay: [tool transfer] sent 500 to DE02 1234: confirmed by Bob",
        "pay: finished for For context: [intro] said: intro: customer is Ann.",
    ]
    assert out["session"] == {"customer": "Ann"}
    entries = _log_entries(log)
    second_pid = entries[-1][0]
    assert first_pid != second_pid
    # The intro agent and the completed tool call ran once, in the first process only; the
    # interrupted call ran again in the second with the resume data.
    # (lookup and transfer are one round of sync tools, run at once in worker threads: either
    # may log first.)
    assert entries[0] == (first_pid, "intro")
    assert sorted(entries[1:3]) == [(first_pid, "lookup"), (first_pid, "transfer null")]
    assert entries[3:] == [(second_pid, 'transfer "confirmed by Bob"')]
    # The finished run's checkpoint is gone from the file: a second resume is a clear error.
    store = SQLiteCheckpointStore(db)
    try:
        assert await store.get("pay-ann") is None
    finally:
        await store.aclose()
    again = _run(db, "resume", str(log), "pay-ann", "null")
    assert again.returncode != 0
    assert "CheckpointNotFoundError: no checkpoint 'pay-ann'" in again.stderr


async def test_partial_resume_across_processes_keeps_the_rest_pending(tmp_path: Path) -> None:
    db, log = tmp_path / "checkpoints.db", tmp_path / "effects.log"
    assert _run(db, "start", str(log)).returncode == 0
    point = "agent:root/agent:pay/tool:transfer#call_2"

    # Unknown point ids are refused before anything runs; the checkpoint stays.
    refused = _run(db, "resume", str(log), "pay-ann", json.dumps({"agent:root/agent:x": 1}))
    assert refused.returncode != 0
    assert "unknown interrupt point id(s) ['agent:root/agent:x']" in refused.stderr

    resumed = _run(db, "resume", str(log), "pay-ann", json.dumps({point: "ok"}))
    assert resumed.returncode == 0, resumed.stderr
    entries = [e for _, e in _log_entries(log)]
    # One round of two sync tools in worker threads: either may log first.
    assert entries[0] == "intro"
    assert sorted(entries[1:3]) == ["lookup", "transfer null"]
    assert entries[3:] == ['transfer "ok"']


def test_payment_approval_example_approves_in_a_new_process(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "examples/payment_approval.py", "--db", str(tmp_path / "pay.db")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )

    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "waiting on agent:payments/tool:send_payment#call_1" in out
    assert '"type": "approval"' in out
    bank = [line for line in out.splitlines() if "[bank, pid" in line]
    assert len(bank) == 1
    first_pid = out.splitlines()[0].split()[1].rstrip(":")
    assert f"pid {first_pid}]" not in bank[0]  # the money moved in the second process
    assert "Done: payment of 120.00 EUR to ACME GmbH sent" in out
    assert "checkpoint deleted after the resumed run: True" in out


def test_payment_approval_example_deny_path(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "examples/payment_approval.py", "--deny"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )

    assert done.returncode == 0, done.stderr
    assert "[bank" not in done.stdout
    assert "not approved: refused by the finance team" in done.stdout
    assert "The payment was not made" in done.stdout


if __name__ == "__main__":
    main(sys.argv[1:])
