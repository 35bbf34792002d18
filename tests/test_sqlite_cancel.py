"""A run cancelled while its checkpoint's save waits for another connection's SQLite write lock
ends at once, over a real file locked by a real second connection.

SQLite's busy wait cannot be cut short, so the store's thread kept waiting the whole
``busy_timeout`` for the cancelled save, and the run's cancellation then waited as long again for
the delete of that checkpoint (saved under an id no one learnt), queued behind it: twice
``busy_timeout`` (30 s by default) before the cancellation took effect. The save now gives up
while it waits for the lock, writing nothing, and a delete of a checkpoint that was never
written takes no lock."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from adk import AgentEvent, AgentInput, BaseAgent, RunContext, Runner
from adk.checkpoint import SQLiteCheckpointStore

HOUR = 3600.0  # the store's busy_timeout: a wait it cannot cut short would hang the test


class _Approves(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt({"question": f"approve {input.messages[-1].content}?"})
            return
        yield AgentEvent.of(f"done: {ctx.resume.data}")


class _Watched(SQLiteCheckpointStore):
    """The real store, telling when a save has begun."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, busy_timeout=HOUR)
        self.saving = asyncio.Event()

    async def put(self, id: str, data: bytes) -> None:
        self.saving.set()
        await super().put(id, data)


@contextlib.contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another connection (another process's, as far as SQLite can tell) holding the write
    lock until the block ends."""
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


async def cancelled_while_saving(runner: Runner, store: _Watched, **options: str) -> None:
    """Start a run that pauses, cancel it once its save has begun, and wait for it to end (an
    hour's guard against the wait the fix removes: the test fails rather than hang)."""
    store.saving.clear()
    task = asyncio.create_task(runner.invoke("pay 10 EUR", **options))
    await store.saving.wait()
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=60)
    assert task in done, "the cancellation waited for the locked database"
    with pytest.raises(asyncio.CancelledError):
        task.result()


async def test_a_run_cancelled_while_its_save_waits_for_the_lock_ends_at_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cp.db"
    store = _Watched(path)
    runner = Runner(_Approves("payer"), checkpoint_store=store)
    assert [i async for i in store.ids()] == []  # the file and its table exist
    try:
        with write_locked(path):
            await cancelled_while_saving(runner, store)
            assert [i async for i in store.ids()] == []  # reads go on meanwhile
        # Nothing saved, nothing left under an id no one knows, and the store writes again.
        assert [i async for i in store.ids()] == []
        paused = await runner.invoke("pay 20 EUR")
        assert paused.interrupt is not None and paused.checkpoint_id is not None
        assert [i async for i in store.ids()] == [paused.checkpoint_id]
        done = await runner.invoke_resume(paused.checkpoint_id, "yes")
        assert done.text == "done: yes"
    finally:
        await store.aclose()
    with contextlib.closing(sqlite3.connect(path)) as check:
        assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def test_a_save_under_a_given_id_goes_on_after_the_cancellation(tmp_path: Path) -> None:
    """Under an id the caller gave, the cancellation does not wait for the save either, and the
    save is not dropped: it lands once the lock is free, whole (as a write a network store had
    sent), and resumes; no delete of it was queued, so nothing undoes it."""
    path = tmp_path / "cp.db"
    store = _Watched(path)
    runner = Runner(_Approves("payer"), checkpoint_store=store)
    try:
        assert [i async for i in store.ids()] == []  # the file and its table exist
        with write_locked(path):
            await cancelled_while_saving(runner, store, checkpoint_id="order-1")
        await store.put("after", b"x")  # queued behind the save: that has ended
        assert sorted([i async for i in store.ids()]) == ["after", "order-1"]
        done = await runner.invoke_resume("order-1", "yes")
        assert done.text == "done: yes"
    finally:
        await store.aclose()


async def test_a_delete_drops_a_put_of_its_id_still_waiting_for_the_lock(tmp_path: Path) -> None:
    """The store's own contract, without a run: the delete would undo the put, so the put waiting
    for the lock is dropped and neither waits (the delete finds nothing to delete: no lock)."""
    path = tmp_path / "cp.db"
    async with SQLiteCheckpointStore(path, busy_timeout=HOUR) as store:
        await store.put("kept", b"old")
        with write_locked(path):
            put = asyncio.create_task(store.put("gone", b"x"))
            await asyncio.sleep(0)  # queued
            delete = asyncio.create_task(store.delete("gone"))
            done, _ = await asyncio.wait([put, delete], timeout=60)
            assert done == {put, delete}, "the put waited for the lock"
            assert put.result() is None and delete.result() is None  # put, then deleted
        assert await store.get("gone") is None
        assert [i async for i in store.ids()] == ["kept"]
        await store.put("gone", b"later")  # a put after the delete is not dropped
        assert await store.get("gone") == b"later"
