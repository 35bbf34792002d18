"""A claim's holder and the process that takes a lapsed claim over judge the lapse by one clock.

The SQLite store decides that a claim has lapsed by the wall clock (``adk.checkpoint.sqlite._now``);
its holder used to count its claim by ``time.monotonic`` alone. A step of the wall clock (NTP
stepping it forward, a VM resumed) let another process take over a claim whose holder still
believed it held: two resumes of one checkpoint ran. The holder now reads the store's clock too.
The stores whose clock is a server's cannot be read so: there, and in every built-in store, a
renewal holds only while the claim stored is still the holder's, unlapsed (``_renew``), so a
holder learns at its next renewal that its claim lapsed, and one taken and released by another
meanwhile is not taken back as if nothing had happened.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from claiming_stores import make_store_fixture  # noqa: F401

import adk.checkpoint.sqlite
from adk import CheckpointError, Message, Role, RunError, Runner, tool
from adk.checkpoint import (
    ClaimingCheckpointStore,
    SQLiteCheckpointStore,
)
from adk.checkpoint import _claim as _claim_module
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

pytest_plugins = ["services"]


class _Clock:
    """The SQLite store's clock, stepped by hand: it starts at the wall clock's time."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    stepped = _Clock()
    monkeypatch.setattr(adk.checkpoint.sqlite, "_now", stepped)
    return stepped


async def test_a_sqlite_claim_a_clock_step_lapsed_is_lost_for_its_holder_as_for_a_taker(
    tmp_path: Path, clock: _Clock
) -> None:
    db = tmp_path / "c.db"
    async with SQLiteCheckpointStore(db) as mine, SQLiteCheckpointStore(db) as theirs:
        claim = await _claim_module._claim(mine, "cp")
        assert claim is not None and not claim.lost

        clock.now += 29  # within claim_ttl (30 s): still held, for both
        assert not claim.lost
        assert not await theirs.claim("cp", "another worker")

        clock.now += 2  # the wall clock stepped past the claim's end
        assert await theirs.claim("cp", "another worker")  # taken over ...
        assert claim.lost  # ... and its holder knows it (it believed it held: two holders)

        await claim.release()  # ends nothing of the taker's
        assert not await mine.claim("cp", "a third worker")


WHILE_PAYING: list[Callable[[], Any]] = []
"""What happens while ``pay`` pays (the clock steps, another worker takes the claim over)."""


async def test_a_sqlite_renewal_of_a_claim_its_clock_lapsed_is_refused(
    tmp_path: Path, clock: _Clock
) -> None:
    """As Redis's (whose lapsed claim key is gone): lapsed, nobody may have taken it, but
    another resume may have taken and released it; a new claim still takes it."""
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        assert await store.claim("cp", "me")
        clock.now += 29
        assert await store._renew("cp", "me")  # held: 30 s more from now
        clock.now += 31
        assert not await store._renew("cp", "me")
        assert await store.claim("cp", "me")


@tool(require_approval=True)
async def pay(amount: int) -> str:
    """Pay an amount once a person approves it."""
    for happens in WHILE_PAYING:
        await happens()
    return f"paid {amount}"


def _payer() -> ReActAgent:
    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"done: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay", {"amount": 5})])

    return ReActAgent("payer", ScriptedModel(reply), tools=[pay])


async def test_a_resume_whose_claim_a_clock_step_lapsed_stops_and_leaves_the_checkpoint(
    tmp_path: Path, clock: _Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """While the approved call ran, the wall clock stepped past the claim's end and another
    worker took the checkpoint over (it loads the pause, and runs the call again: the cost of a
    lapse). The first resume must not go on as the holder: it used to record the call's result
    over the pause the other worker loaded and finish (delete) the checkpoint under it."""
    db = tmp_path / "c.db"
    async with SQLiteCheckpointStore(db) as store, SQLiteCheckpointStore(db) as other:
        runner = Runner(_payer(), checkpoint_store=store)
        paused = await runner.invoke("pay 5", checkpoint_id="order")
        assert paused.interrupt is not None
        saved = await store.get("order")

        async def step_and_take_over() -> None:
            clock.now += 31
            assert await other.claim("order", "another worker")

        with (
            caplog.at_level(logging.WARNING, logger="adk.checkpoint"),
            pytest.raises(RunError, match="lost the claim on checkpoint 'order'") as lost,
        ):
            WHILE_PAYING.append(step_and_take_over)
            try:
                await runner.invoke_resume("order", {"approved": True})
            finally:
                WHILE_PAYING.clear()

        assert isinstance(lost.value.__cause__, CheckpointError)  # another resume may hold it
        assert lost.value.__cause__.reason == "busy"
        assert await store.get("order") == saved  # as the other worker loaded it
        assert "could not record" in caplog.text and "lost the claim" in caplog.text
        assert not await store.claim("order", "a third worker")  # the other's claim stands


async def test_a_renewal_holds_only_while_the_claim_is_still_the_owners(
    make_store: Callable[..., ClaimingCheckpointStore],
) -> None:
    """``claim`` takes a free or lapsed claim; a renewal takes none: the holder's claim was
    taken over, or taken and released by another (as after a lapse), and it is not its any
    more, whatever its own count says."""
    mine, theirs = make_store(), make_store()
    renew = mine._renew  # type: ignore[attr-defined]
    assert await mine.claim("cp", "me")
    assert await renew("cp", "me")

    await mine.release("cp", "me")  # as a lapse: free for anyone
    assert await theirs.claim("cp", "them")
    assert not await renew("cp", "me")  # taken over
    await theirs.release("cp", "them")
    assert not await renew("cp", "me")  # taken and released: not taken back by a renewal
    assert await mine.claim("cp", "me")  # a claim takes a free one, as before


async def test_a_holders_claim_taken_and_released_by_another_is_lost_at_its_next_renewal(
    tmp_path: Path,
) -> None:
    """Between two renewals another resume took the claim over (it had lapsed by the store's
    clock: a server's, which the holder cannot read) and released it. The renewal used to take
    the claim back (``claim`` takes a free one) and the holder went on, after the other resume
    ran."""
    db = tmp_path / "c.db"
    async with SQLiteCheckpointStore(db, claim_ttl=0.3) as mine, SQLiteCheckpointStore(db) as other:
        claim = await _claim_module._claim(mine, "cp")
        assert claim is not None and claim._renewer is not None
        await mine.release("cp", claim.owner)  # lapsed, by the store's clock
        assert await other.claim("cp", "another worker")
        await other.release("cp", "another worker")

        await asyncio.wait_for(claim._renewer, 30)  # the renewal found the claim gone: it ended
        assert claim._lost  # told by the store, not by its own count
        await claim.release()
