"""Paused runs of the kinds ``tests/checkpoint_scenarios.py`` does not make, for a rolling deploy's
checks (``tests/test_rolling_upgrade.py``): a keyed record of ``LocalExecutionEnvironment``, a
tool's unregistered pydantic result saved beside a paused call (a ``ReActAgent``'s history and an
``ActionAgent``'s round) and a session holding a registered model.

Each scenario pauses into a checkpoint store (``pause``) and resumes it (``resume``), giving what
it did as plain data to compare. Run as a script from the root of this repository against a
worktree of an older commit, it writes each pause's bytes and what the older pyadk gave at the
pause and at its own resume of the same bytes (over SQLite) to ``tests/fixtures/<commit>/``::

    git worktree add --detach /tmp/pyadk-old <commit>
    PYTHONPATH=/tmp/pyadk-old python tests/upgrade_scenarios.py <commit>

The code here runs on the pyadk of 28 Nov (``fcb362c``) as on this one: it uses nothing newer.
``tests/test_action_tool_events.py`` takes its ``Asker``, ``lookup`` and ``fix`` from here (this
file imports nothing of the tests, so that it runs alone against an older pyadk).
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import adk
from adk import Message, Resources, Runner, ToolCall, tool
from adk.actions import (
    ActionAgent,
    ActionContext,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.checkpoint import (
    CheckpointStore,
    InMemoryCheckpointStore,
    SQLiteCheckpointStore,
    list_pending,
)
from adk.execution import KeyedOutput, LocalExecutionEnvironment
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

RECORDS = [
    {"user": "ann", "amount": 5},
    {"user": "bob", "amount": 7},
    {"user": "ann", "amount": 500},
]
"""Ann books 5, bob 7, then ann's 500 waits for approval (record 2, key 'ann')."""


@action(InputEvent)
def book(event: InputEvent, ctx: ActionContext) -> None:
    """Adds the amount to the key's balance; an amount over 100 waits for approval first."""
    amount = event.input["amount"]
    if amount > 100 and ctx.resume is None:
        raise adk.Interrupt({"approve": amount})
    if amount > 100 and ctx.resume is not None and ctx.resume.data != "approved":
        amount = 0
    balance = ctx.short_term_memory.get("balance", 0) + amount
    ctx.short_term_memory.set("balance", balance)
    ctx.send_event(OutputEvent(output=balance))


LEDGER = ActionAgent("ledger", actions=[book])


class Site(BaseModel):
    """A tool's result, not registered: a checkpoint keeps it as its fields."""

    site: str
    limit: float = 70.0


class Account(BaseModel):
    """A session value of a registered type: a checkpoint keeps it as itself (named as when this
    file runs as a script, ``__main__``, as when a test imports it)."""

    owner: str
    cents: int = 0


adk.register_type(Account, "upgrade.Account")


@tool
def lookup() -> Site:
    """Look the device up."""
    return Site(site="north")


@tool(require_approval=True)
def fix() -> str:
    """Fix the device (a person approves it)."""
    return "fixed"


def _fixer(messages: list[Message]) -> Reply | str:
    if messages[-1].role == "tool":
        return "done"
    return Reply(tool_calls=[tool_call("lookup", {}), tool_call("fix", {})])


class Asker(ActionAgent):
    """Calls the tools its input names in one round; outputs the round's structured values."""

    @action(InputEvent)
    @staticmethod
    def ask(event: InputEvent, ctx: ActionContext) -> None:
        names = event.input.split()
        calls = [ToolCall(id=f"c{i}", name=n, arguments="{}") for i, n in enumerate(names)]
        ctx.send_event(ToolRequestEvent(tool_calls=calls))

    @action(ToolResponseEvent)
    @staticmethod
    def answered(event: ToolResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.structured))


def _plain(value: Any) -> Any:
    """``value`` as JSON data (models as their fields, tagged with their class)."""
    if isinstance(value, BaseModel):
        return {type(value).__name__: _plain(value.model_dump())}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _result(result: adk.RunResult) -> dict[str, Any]:
    """What a plain run gave, as JSON data: its text, output, pause, session and messages (with
    the structured value each tool message carries)."""
    return {
        "text": result.text,
        "output": _plain(result.output),
        "interrupt": None if result.interrupt is None else result.interrupt.point_ids,
        "session": _plain(dict(result.session.values)),
        "messages": [
            [str(m.role), m.content, m.name, _plain((m.metadata or {}).get("structured"))]
            for m in result.messages
        ],
    }


def _outputs(outputs: list[KeyedOutput]) -> list[dict[str, Any]]:
    """Keyed outputs as plain data (run ids left out: each run makes its own)."""
    found = []
    for output in outputs:
        data = output.to_dict()
        data.pop("run_id", None)
        if data.get("checkpoint_id") is not None:
            data["checkpoint_id"] = "<set>"
        found.append(data)
    return found


@dataclass
class Case:
    """A paused run: ``pause`` saves it as ``checkpoint_id`` and gives what the pause gave;
    ``resume`` resumes it (with the pause's JSON, for a keyed record) and gives what it did."""

    name: str
    pause: Callable[[CheckpointStore], Awaitable[dict[str, Any]]]
    resume: Callable[[CheckpointStore, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _keyed_pause(store: CheckpointStore) -> dict[str, Any]:
    env = LocalExecutionEnvironment(checkpoint_store=store)
    applied = env.from_list(RECORDS, key="user").apply(LEDGER)
    *_, paused = await applied.to_list()
    assert paused.checkpoint_id is not None
    return {"paused": paused.to_dict(), "sessions": applied.sessions}


async def _keyed_resume(store: CheckpointStore, pause: dict[str, Any]) -> dict[str, Any]:
    # A service's approvals page answers the paused output's JSON (the Flink way), in a fresh
    # environment over the same store, with the sessions the first run left.
    paused = pause["paused"]
    answer = {k: paused[k] for k in ("key", "checkpoint_id", "run_id")}
    env = LocalExecutionEnvironment(checkpoint_store=store)
    applied = env.from_list([{"user": "bob", "amount": 1}], key="user").apply(
        LEDGER, sessions=pause["sessions"], resumes=[{**answer, "resume": "approved"}]
    )
    return {"outputs": _outputs(await applied.to_list()), "sessions": applied.sessions}


async def _react_pause(store: CheckpointStore) -> dict[str, Any]:
    agent = ReActAgent("fixer", ScriptedModel(_fixer), tools=[lookup, fix])
    session = {"account": Account(owner="ann", cents=5), "accounts": [Account(owner="bob")]}
    paused = await Runner(agent, checkpoint_store=store).invoke(
        "go", checkpoint_id="react_structured", session=session
    )
    return _result(paused)


async def _react_resume(store: CheckpointStore, pause: dict[str, Any]) -> dict[str, Any]:
    agent = ReActAgent("fixer", ScriptedModel(_fixer), tools=[lookup, fix])
    return _result(
        await Runner(agent, checkpoint_store=store).invoke_resume("react_structured", True)
    )


def _asker() -> Asker:
    resources = Resources()
    resources.add_tool(lookup)
    resources.add_tool(fix)
    return Asker("asker", resources=resources)


async def _action_pause(store: CheckpointStore) -> dict[str, Any]:
    paused = await Runner(_asker(), checkpoint_store=store).invoke(
        "lookup fix",
        checkpoint_id="action_structured",
        session={"account": Account(owner="cat", cents=9)},
    )
    return _result(paused)


async def _action_resume(store: CheckpointStore, pause: dict[str, Any]) -> dict[str, Any]:
    runner = Runner(_asker(), checkpoint_store=store)
    return _result(await runner.invoke_resume("action_structured", True))


@action(InputEvent)
def refuse(event: InputEvent, ctx: ActionContext) -> None:
    """Fails every record: its error event and failed output name what it raised."""
    raise ValueError("amount must be positive")


class Note(BaseModel):
    """A tool's result with a field left None."""

    site: str
    note: str | None = None


@tool
def note() -> Note:
    """Look the note up."""
    return Note(site="north")


def _noter(messages: list[Message]) -> Reply | str:
    if messages[-1].role == "tool":
        return "done"
    return Reply(tool_calls=[tool_call("note", {}), tool_call("fix", {})])


async def events() -> dict[str, Any]:
    """The JSON of a paused ReActAgent run's events (a tool's model result beside an approval)
    and of a failed action's run, and the failed record's ``KeyedOutput.to_dict`` (no run id)."""
    found = []
    agent = ReActAgent("noter", ScriptedModel(_noter), tools=[note, fix])
    runner = Runner(agent, checkpoint_store=InMemoryCheckpointStore())
    async for event in runner.run("go", checkpoint_id="events"):
        found.append(event.to_dict())
    failing = ActionAgent("accounts", actions=[refuse])
    async for event in Runner(failing).run("x"):
        found.append(event.to_dict())
    env = LocalExecutionEnvironment(on_error="emit")
    outputs = await env.from_list([{"user": "ann"}], key="user").apply(failing).to_list()
    return {"events": found, "keyed": _outputs(outputs)}


CASES = [
    Case("keyed_record", _keyed_pause, _keyed_resume),
    Case("react_structured", _react_pause, _react_resume),
    Case("action_structured", _action_pause, _action_resume),
]


FIXTURES = Path(__file__).parent / "fixtures"


async def _write(commit: str) -> None:
    """Each case's pause as the pyadk on ``sys.path`` saves it, with what that pyadk gave at the
    pause and at its resume of those bytes, under ``FIXTURES / commit``."""
    out = FIXTURES / commit
    out.mkdir(parents=True, exist_ok=True)
    print(f"pyadk from {Path(adk.__file__).parent}")
    for case in CASES:
        store = InMemoryCheckpointStore()
        paused = await case.pause(store)
        at_pause = json.loads(json.dumps(paused))  # before the resume changes its sessions
        [entry] = [e async for e in list_pending(store)]
        data = await store.get(entry.checkpoint_id)
        assert data is not None
        with tempfile.TemporaryDirectory() as folder:
            async with SQLiteCheckpointStore(str(Path(folder) / "checkpoints.db")) as sqlite:
                await sqlite.put(entry.checkpoint_id, data)
                resumed = await case.resume(sqlite, paused)
                assert await sqlite.get(entry.checkpoint_id) is None
        (out / f"{case.name}.ckpt").write_bytes(data)
        kept = {"checkpoint_id": entry.checkpoint_id, "paused": at_pause, "resumed": resumed}
        (out / f"{case.name}.json").write_text(json.dumps(kept, indent=1, sort_keys=True) + "\n")
        print(f"{case.name}: {len(data)} bytes, checkpoint {entry.checkpoint_id}")
    written = json.dumps(await events(), indent=1, sort_keys=True)
    (out / "events.json").write_text(written + "\n")


if __name__ == "__main__":
    asyncio.run(_write(sys.argv[1]))
