"""A rolling deploy: workers of an older pyadk and of this one share one checkpoint store and one
event/output format. ``tests/fixtures/<commit>/`` holds what the pyadk of that commit saved and
gave (``tests/upgrade_scenarios.py``, run with it): the pauses that
``tests/test_checkpoint_upgrade.py``'s scenarios do not make (a keyed record of
``LocalExecutionEnvironment``, a tool's unregistered pydantic result saved beside a paused call,
by a ``ReActAgent`` and by an ``ActionAgent``, sessions holding a registered model), that pyadk's
own resume of each (over SQLite), and its events' and a failed output's JSON. This pyadk lists
each pause, resumes it as the older one did, and reads the older events as they were written.

The other direction (this pyadk's pauses and events read by the older one) was checked by hand
with that commit's code (docs/interrupts.md, "Upgrading pyadk while runs are paused"): its
pauses resume there as here, and an error event naming a ``cause`` (or a refused resume's
``reason``, added since) is refused by its ``AgentEvent.from_dict`` (docs/agents.md, "Events as
JSON")."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from upgrade_scenarios import CASES, FIXTURES, LEDGER, Asker, _fixer, events, lookup

from adk import AgentEvent, Resources, RunError, Runner, cli
from adk.actions import ActionContext, OutputEvent, ToolResponseEvent, action
from adk.checkpoint import PendingCheckpoint, SQLiteCheckpointStore, list_pending
from adk.execution import LocalExecutionEnvironment
from adk.testing import ScriptedModel
from prebuilt import ReActAgent

COMMITS = sorted(p.name for p in FIXTURES.iterdir() if (p / "events.json").exists())
"""``fcb362c``: 28 Nov, before keyed pauses were listed with their key and index, an error named
its cause, and an ``ActionAgent``'s paused round kept a tool's unregistered model."""
BY_NAME = {case.name: case for case in CASES}


def _kept(commit: str, name: str) -> tuple[bytes, dict[str, Any]]:
    """The pause ``name`` saved at ``commit``, and what that pyadk gave at it and its resume."""
    folder = FIXTURES / commit
    return (folder / f"{name}.ckpt").read_bytes(), json.loads((folder / f"{name}.json").read_text())


def test_every_commit_has_its_cases() -> None:
    assert COMMITS
    for commit in COMMITS:
        assert {p.stem for p in (FIXTURES / commit).glob("*.ckpt")} == set(BY_NAME), commit


@pytest.mark.parametrize("commit", COMMITS)
def test_an_older_pyadks_pauses_are_listed(
    commit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Its keyed record's pause is listed without its key: that pyadk saved it in the body alone.
    path = str(tmp_path / "checkpoints.db")
    listed, expected = asyncio.run(_listed(commit, path))
    assert {e.checkpoint_id: e.point_ids for e in listed} == expected
    assert all(e.error is None and not e.keyed and e.key is None for e in listed)
    assert cli.main(["checkpoint", "list", "--sqlite", path]) == 0  # in this process
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {line["checkpoint_id"] for line in lines} == set(expected)
    assert all("key" not in line and "error" not in line for line in lines)


async def _listed(commit: str, path: str) -> tuple[list[PendingCheckpoint], dict[str, Any]]:
    """The listing of ``commit``'s pauses put in the SQLite file ``path``, and each one's point
    ids as that pyadk's pause gave them."""
    expected = {}
    async with SQLiteCheckpointStore(path) as store:
        for name in BY_NAME:
            data, kept = _kept(commit, name)
            await store.put(kept["checkpoint_id"], data)
            paused = kept["paused"]
            points = paused["paused"]["interrupt"]["points"] if "sessions" in paused else None
            ids = [p["id"] for p in points] if points is not None else paused["interrupt"]
            expected[kept["checkpoint_id"]] = ids
        listed = [entry async for entry in list_pending(store)]
    return listed, expected


@pytest.mark.parametrize("commit", COMMITS)
@pytest.mark.parametrize("name", sorted(BY_NAME))
async def test_an_older_pyadks_pause_resumes_as_it_resumed_there(
    commit: str, name: str, tmp_path: Path
) -> None:
    # As that pyadk saved it: its ActionAgent's round had saved the tool's unregistered model as
    # None (with a warning) and its ReActAgent's history the model without its default field;
    # this pyadk resumes what was saved, registered session values as their types.
    data, kept = _kept(commit, name)
    async with SQLiteCheckpointStore(str(tmp_path / "checkpoints.db")) as store:
        await store.put(kept["checkpoint_id"], data)
        resumed = await BY_NAME[name].resume(store, kept["paused"])
        assert await store.get(kept["checkpoint_id"]) is None  # finished: deleted
    assert json.loads(json.dumps(resumed)) == kept["resumed"]


@pytest.mark.parametrize("commit", COMMITS)
async def test_an_older_keyed_pause_resumed_by_its_listing_is_refused_and_kept(
    commit: str, tmp_path: Path
) -> None:
    # Its listing names no key: outputs.resume refuses the entry, and a resume dict made of it
    # (key None) is refused as another key's (docs/event_driven.md); nothing runs, the pause is
    # kept and resumes with its key afterwards.
    data, kept = _kept(commit, "keyed_record")
    sessions = kept["paused"]["sessions"]
    before = json.dumps(sessions, sort_keys=True)
    async with SQLiteCheckpointStore(str(tmp_path / "checkpoints.db")) as store:
        await store.put(kept["checkpoint_id"], data)
        [entry] = [e async for e in list_pending(store)]
        env = LocalExecutionEnvironment(checkpoint_store=store, on_error="emit")
        applied = env.from_list([], key="user").apply(LEDGER, sessions=sessions)
        with pytest.raises(ValueError, match="names no record key"):
            await applied.resume(entry, "approved")
        made = {"key": entry.key, "checkpoint_id": entry.checkpoint_id, "run_id": entry.run_id}
        refused = env.from_list([], key="user").apply(
            LEDGER, sessions=sessions, resumes=[{**made, "resume": "approved"}]
        )
        [failed] = await refused.to_list()
        assert failed.error is not None and failed.error.type == "CheckpointError"
        assert "paused a record of key 'ann', not of key None" in failed.error.message
        assert await store.get(kept["checkpoint_id"]) == data
        assert json.dumps(sessions, sort_keys=True) == before
        resumed = await BY_NAME["keyed_record"].resume(store, kept["paused"])
    assert json.loads(json.dumps(resumed)) == kept["resumed"]


@pytest.mark.parametrize("commit", COMMITS)
def test_an_older_pyadks_events_are_read_as_written(commit: str) -> None:
    written = json.loads((FIXTURES / commit / "events.json").read_text())
    assert [AgentEvent.from_dict(data).to_dict() for data in written["events"]] == written["events"]


def _as_before(data: Any) -> Any:
    """``data`` (events' or outputs' JSON) without what this pyadk adds: an error's ``cause``
    and a tool's model result's None fields."""
    if isinstance(data, dict):
        return {k: _as_before(v) for k, v in data.items() if k != "cause" and v is not None}
    if isinstance(data, list):
        return [_as_before(v) for v in data]
    return data


@pytest.mark.parametrize("commit", COMMITS)
async def test_this_pyadks_events_and_outputs_add_to_an_older_ones_and_change_nothing(
    commit: str,
) -> None:
    # A consumer of the older JSON reads this pyadk's: the same keys and values, with an error's
    # cause and a structured model's None fields added (an older from_dict refuses the cause:
    # docs/agents.md). An error that names no cause has no key.
    written = json.loads((FIXTURES / commit / "events.json").read_text())
    now = await events()
    assert _as_before(now) == _as_before(written)
    errors = [e["error"] for e in now["events"] if "error" in e]
    errors += [o["error"] for o in now["keyed"]]
    assert errors and all(error["cause"] == "ValueError" for error in errors)
    assert now["events"] != written["events"]


class _Contents(Asker):
    """``Asker``, outputting its round's results as the model would read them."""

    @action(ToolResponseEvent)
    @staticmethod
    def answered(event: ToolResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=[response.content for response in event.responses]))


@pytest.mark.parametrize("commit", COMMITS)
async def test_an_older_pyadks_pause_whose_tool_is_gone_is_closed_by_a_denial(
    commit: str, tmp_path: Path
) -> None:
    """The older pyadk's pauses at ``fix``'s approval (a ``ReActAgent``'s and an
    ``ActionAgent``'s), resumed by this one deployed without ``fix``: an approval is refused,
    the checkpoint kept, naming the denial that would close it; a denial closes it, the model
    (or the action) getting the 'not approved' result. Refused for a denial too before: a
    person's no could not close a run whose tool a deploy had removed."""
    react, _ = _kept(commit, "react_structured")
    action, _ = _kept(commit, "action_structured")
    model = ScriptedModel(_fixer)
    asker = Resources()
    asker.add_tool(lookup)
    runners = {
        "react_structured": Runner(ReActAgent("fixer", model, tools=[lookup])),
        "action_structured": Runner(_Contents("asker", resources=asker)),
    }
    async with SQLiteCheckpointStore(str(tmp_path / "checkpoints.db")) as store:
        await store.put("react_structured", react)
        await store.put("action_structured", action)
        results = {}
        for name, runner in runners.items():
            runner.checkpoint_store = store
            with pytest.raises(RunError, match="to close it without it") as refused:
                await runner.invoke_resume(name, True)
            assert "the paused calls need tools it no longer has: fix (" in str(refused.value)
            assert await store.get(name) == (react if name == "react_structured" else action)
            results[name] = await runner.invoke_resume(name, {"approved": False, "reason": "gone"})
            assert await store.get(name) is None
    denial = "Error: the call to 'fix' was not approved: gone"
    assert results["react_structured"].text == "done"
    assert model.requests[-1].messages[-1].content == denial
    assert results["action_structured"].output == ['{"site":"north","limit":70.0}', denial]
