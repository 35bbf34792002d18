"""One resume of a checkpoint at a time across processes: the stores' claims, and the runner's use
of them.

Workers in separate processes share a store (a SQLite file, a Redis, a PostgreSQL); an approval
delivered to two of them must pay once. Each backend runs against its real server; "processes" are
real subprocesses for SQLite, and separate store objects (no in-process guard between them) for
the network stores.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from claiming_stores import StoreFactory, make_store_fixture  # noqa: F401  (the fixture)
from conftest import other_tasks
from services import PostgresServer

import adk.checkpoint._claim
from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    CheckpointError,
    Message,
    Role,
    RunContext,
    RunError,
    Runner,
    tool,
)
from adk.checkpoint import (
    CheckpointStoreError,
    ClaimingCheckpointStore,
    InMemoryCheckpointStore,
    PostgresCheckpointStore,
    RedisCheckpointStore,
    SQLiteCheckpointStore,
    list_pending,
)
from adk.checkpoint._claim import _in_process, being_resumed
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

pytest_plugins = ["services"]

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------------------------------
# The stores' claims


async def test_stores_that_can_claim_say_so(make_store: StoreFactory) -> None:
    assert isinstance(make_store(), ClaimingCheckpointStore)
    assert not isinstance(InMemoryCheckpointStore(), ClaimingCheckpointStore)


async def test_one_owner_at_a_time(make_store: StoreFactory) -> None:
    mine, theirs = make_store(), make_store()

    assert await mine.claim("cp-1", "me")
    assert await mine.claim("cp-1", "me")  # a renewal
    assert not await theirs.claim("cp-1", "them")
    assert await theirs.claim("cp-2", "them")  # claims are per id

    await theirs.release("cp-1", "them")  # not theirs: no effect
    assert not await theirs.claim("cp-1", "them")

    await mine.release("cp-1", "me")
    assert await theirs.claim("cp-1", "them")
    assert not await mine.claim("cp-1", "me")


async def test_a_claim_lapses_after_claim_ttl_unless_renewed(make_store: StoreFactory) -> None:
    # Margins of 0.35 s or more on each side: a loaded machine delays a store call by a good part
    # of that (0.15 s margins failed now and then with Postgres under load).
    mine, theirs = make_store(claim_ttl=1.0), make_store(claim_ttl=1.0)
    assert await mine.claim("cp", "me")

    await asyncio.sleep(0.6)
    assert await mine.claim("cp", "me")  # renewed: 1 s more from now
    await asyncio.sleep(0.6)
    assert not await theirs.claim("cp", "them")  # 1.2 s after the first claim, still held

    await asyncio.sleep(0.75)
    assert await theirs.claim("cp", "them")  # lapsed: taken over
    assert not await mine.claim("cp", "me")  # and the old owner cannot renew


async def test_claims_leave_checkpoints_alone(make_store: StoreFactory) -> None:
    store = make_store()
    await store.put("cp", b"state")

    assert await store.claim("cp", "me")
    assert await store.claim("no-checkpoint", "me")  # a claim needs no checkpoint
    assert await store.get("cp") == b"state"
    assert await store.get("no-checkpoint") is None

    await store.delete("cp")
    await store.put("cp", b"new state")
    assert not await make_store().claim("cp", "them")  # the claim outlives the row it guards
    await store.release("cp", "me")
    assert await store.get("cp") == b"new state"


async def test_bad_owners_and_ttls_are_refused(make_store: StoreFactory) -> None:
    store = make_store()
    with pytest.raises(TypeError, match="owner"):
        await store.claim("cp", "")
    with pytest.raises(TypeError, match="owner"):
        await store.release("cp", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="checkpoint id"):
        await store.claim("", "me")
    for ttl in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="claim_ttl"):
            make_store(claim_ttl=ttl)


async def test_sqlite_claims_skip_the_fsync_and_checkpoints_keep_it(tmp_path: Path) -> None:
    store = SQLiteCheckpointStore(tmp_path / "cp.db")
    assert await store.claim("cp", "me")
    await store.release("cp", "me")
    # A claim write runs with synchronous=NORMAL; the connection must be back at FULL (2) after.
    mode = await store._run("get", "cp", lambda conn: conn.execute("PRAGMA synchronous").fetchone())
    assert mode == (2,)
    await store.aclose()


async def test_sqlite_makes_its_claims_table_only_when_first_claiming(tmp_path: Path) -> None:
    """A file that is only read or written (an older file, a copy being inspected with ``pyadk
    checkpoint show``) keeps its schema: claims need a table of their own only once used."""
    db = tmp_path / "cp.db"

    def tables() -> set[str]:
        with contextlib.closing(sqlite3.connect(db)) as conn:
            rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            return {name for (name,) in rows}

    async with SQLiteCheckpointStore(db) as store:
        await store.put("cp", b"state")
        assert await store.get("cp") == b"state"
        assert tables() == {"pyadk_checkpoints"}
        await store.release("cp", "me")  # before any claim: nothing to end, no error
        assert await store.claim("cp", "me")
    assert tables() == {"pyadk_checkpoints", "pyadk_checkpoint_claims"}


async def test_postgres_claims_table_beside_a_long_table_name(
    postgres_server: PostgresServer,
) -> None:
    name = "t" * 63  # "<name>_claims" would pass PostgreSQL's 63-character limit
    first, second = (PostgresCheckpointStore(postgres_server.dsn, table=name) for _ in range(2))
    try:
        assert await first.claim("cp", "me")
        assert not await second.claim("cp", "them")
        await first.put("cp", b"state")
        assert await second.get("cp") == b"state"
    finally:
        await first.aclose()
        await second.aclose()


async def test_an_unreachable_store_fails_to_claim_clearly() -> None:
    store = RedisCheckpointStore("redis://127.0.0.1:1/0")
    with pytest.raises(CheckpointStoreError) as caught:
        await store.claim("cp", "me")
    assert (caught.value.backend, caught.value.operation) == ("redis", "claim")
    await store.aclose()


# --------------------------------------------------------------------------------------------------
# The runner: one resume at a time

paid: list[int] = []


@pytest.fixture(autouse=True)
def _no_payments_yet() -> None:
    paid.clear()


def _payer(pay_seconds: float = 0.05, until: asyncio.Event | None = None) -> ReActAgent:
    """An agent that pays once approved, taking ``pay_seconds``, or, given ``until``, until it
    is set (at most 10 s: a test waiting on something that never comes fails, not hangs)."""

    @tool(require_approval=True)
    async def pay(amount: int) -> str:
        """Pay an amount once a person approves it."""
        if until is None:
            await asyncio.sleep(pay_seconds)
        else:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(until.wait(), 10)
        paid.append(amount)
        return f"paid {amount}"

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"done: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay", {"amount": int(messages[-1].content)})])

    return ReActAgent("payer", ScriptedModel(reply), tools=[pay])


async def _paused(store: ClaimingCheckpointStore, amount: int = 5) -> str:
    result = await Runner(_payer(), checkpoint_store=store).invoke(str(amount))
    assert result.checkpoint_id is not None
    return result.checkpoint_id


async def _lapses(store: ClaimingCheckpointStore, checkpoint_id: str, owner: str) -> None:
    """Wait (up to 10 s) until ``owner`` can take ``checkpoint_id``'s claim, the old one having
    lapsed: polled, not slept for a fixed time, since a loaded machine delays the store's calls."""
    for _ in range(1000):
        if await store.claim(checkpoint_id, owner):
            return
        await asyncio.sleep(0.01)
    pytest.fail(f"the claim on {checkpoint_id!r} never lapsed")


async def test_workers_with_their_own_stores_resume_once(make_store: StoreFactory) -> None:
    # The resume that gets through pays until the others have ended: on a loaded machine, one
    # had resumed, deleted the checkpoint and released its claim before another's first query
    # (on a new connection) came, which then found no checkpoint instead of a claim.
    checkpoint_id = await _paused(make_store())
    paying = asyncio.Event()
    workers = [Runner(_payer(until=paying), checkpoint_store=make_store()) for _ in range(3)]
    resumes = [
        asyncio.ensure_future(w.invoke_resume(checkpoint_id, {"approved": True})) for w in workers
    ]
    pending = set(resumes)
    while len(pending) > 1:
        _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    paying.set()

    results = await asyncio.gather(*resumes, return_exceptions=True)

    done = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, CheckpointError)]
    assert [r.text for r in done] == ["done: paid 5"]
    assert len(refused) == 2
    assert all("already being resumed" in str(e) and "claim" in str(e) for e in refused)
    assert paid == [5]
    assert await make_store().claim(checkpoint_id, "probe")  # released when the resume ended


async def test_a_long_resume_keeps_its_claim(make_store: StoreFactory) -> None:
    # A ttl of 1 s: the renewals come every third of it, and each has two thirds of it to get
    # through (with 0.3 s, a renewal delayed 0.2 s on a loaded machine lost the claim).
    checkpoint_id = await _paused(make_store(claim_ttl=1.0))
    slow = Runner(_payer(pay_seconds=2.5), checkpoint_store=make_store(claim_ttl=1.0))
    first = asyncio.ensure_future(slow.invoke_resume(checkpoint_id, {"approved": True}))

    await asyncio.sleep(2.0)  # twice the ttl: only renewals keep the claim
    other = Runner(_payer(), checkpoint_store=make_store(claim_ttl=1.0))
    with pytest.raises(CheckpointError, match="already being resumed"):
        await other.invoke_resume(checkpoint_id, {"approved": True})

    assert (await first).text == "done: paid 5"
    assert paid == [5]


@pytest.mark.parametrize(
    "ending", ["finished", "paused again", "error", "cancelled", "cancelled by a cancel scope"]
)
async def test_every_ending_releases_the_claim(make_store: StoreFactory, ending: str) -> None:
    store = make_store()
    checkpoint_id = await _paused(store)
    agent = _payer(pay_seconds=30 if ending.startswith("cancelled") else 0)
    runner = Runner(agent, checkpoint_store=store)

    if ending == "finished":
        await runner.invoke_resume(checkpoint_id, {"approved": True})
    elif ending == "paused again":
        await runner.invoke_resume(checkpoint_id)  # no approval: the call pauses again
    elif ending == "error":
        with pytest.raises(ValueError, match="unknown interrupt point"):
            await runner.invoke_resume(checkpoint_id, {"agent:nowhere": 1})
    elif ending == "cancelled by a cancel scope":
        # What Starlette does to a streaming response whose client hung up: anyio cancels the
        # task again at every await until the scope is left, the release's await included. The
        # claim used to stay, refusing every resume for claim_ttl ("already being resumed").
        with anyio.CancelScope() as scope:
            asyncio.get_running_loop().call_later(0.1, scope.cancel)
            await runner.invoke_resume(checkpoint_id, {"approved": True})
        assert scope.cancelled_caught
    else:
        task = asyncio.ensure_future(runner.invoke_resume(checkpoint_id, {"approved": True}))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert await make_store().claim(checkpoint_id, "probe")


async def test_a_missing_checkpoint_is_reported_and_its_claim_released(
    make_store: StoreFactory,
) -> None:
    runner = Runner(_payer(), checkpoint_store=make_store())
    with pytest.raises(CheckpointError, match="no checkpoint 'nope'"):
        await runner.invoke_resume("nope")
    assert await make_store().claim("nope", "probe")


async def test_a_resume_left_early_cleans_up_before_it_lets_the_checkpoint_go(
    tmp_path: Path,
) -> None:
    """The reader closes the resume while a tool call is still running: the call is cancelled, and
    its cleanup finished, while the resume still holds the claim; the claim is gone once the
    close returns."""
    order: list[str] = []

    class Recording(SQLiteCheckpointStore):
        async def release(self, id: str, owner: str) -> None:
            order.append("claim released")
            await super().release(id, owner)

    @tool
    async def quick() -> str:
        """Answer at once."""
        return "quick"

    @tool
    async def slow() -> str:
        """Take a long time."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            order.append("call cancelled")
            await asyncio.sleep(0.05)  # its cleanup takes a while (closing a connection, say)
            order.append("cleanup done")
            raise
        return "slow"

    def reply(messages: list[Message]) -> Any:
        if messages[-1].role == Role.USER:
            return Reply(tool_calls=[tool_call("pay", {"amount": 1})])
        return Reply(tool_calls=[tool_call("quick", {}), tool_call("slow", {})])

    agent = ReActAgent("payer", ScriptedModel(reply), tools=[*_payer().tools, quick, slow])
    async with Recording(tmp_path / "cp.db") as store:
        runner = Runner(agent, checkpoint_store=store)
        paused = await runner.invoke("go")
        assert paused.checkpoint_id is not None
        resumed = runner.resume(paused.checkpoint_id, {"approved": True})
        async with contextlib.aclosing(resumed) as events:
            async for event in events:
                if event.output is not None and event.output.message.content == "quick":
                    break  # the reader goes away; ``slow`` is still running

        assert order == ["call cancelled", "cleanup done", "claim released"]
        assert await store.claim(paused.checkpoint_id, "probe")


class _Flaky:
    """A real store whose claims and releases can be made to fail, as if it were unreachable."""

    def __init__(self, store: ClaimingCheckpointStore) -> None:
        self.store = store
        self.claim_ttl = store.claim_ttl
        self.failing: set[str] = set()

    def _fail(self, operation: str, id: str) -> None:
        if operation in self.failing:
            raise CheckpointStoreError("unreachable", operation=operation, checkpoint_id=id)

    async def get(self, id: str) -> bytes | None:
        return await self.store.get(id)

    async def put(self, id: str, data: bytes) -> None:
        await self.store.put(id, data)

    async def delete(self, id: str) -> None:
        await self.store.delete(id)

    async def claim(self, id: str, owner: str) -> bool:
        self._fail("claim", id)
        return await self.store.claim(id, owner)

    async def release(self, id: str, owner: str) -> None:
        self._fail("release", id)
        await self.store.release(id, owner)


class _CountedFailures(_Flaky):
    """A ``_Flaky`` store that tells when its first claim was taken and when three claims in a
    row failed: renewals come a third of ``claim_ttl`` apart, so the holder's claim has lapsed by
    its own clock then (it counts from when it sent its last renewal that went through)."""

    def __init__(self, store: ClaimingCheckpointStore) -> None:
        super().__init__(store)
        self.taken = asyncio.Event()
        self.three_failed = asyncio.Event()
        self._failures = 0

    async def claim(self, id: str, owner: str) -> bool:
        try:
            held = await super().claim(id, owner)
        except CheckpointStoreError:
            self._failures += 1
            if self._failures == 3:
                self.three_failed.set()
            raise
        self._failures = 0
        self.taken.set()
        return held


class _SlowClaims(_Flaky):
    """A real store whose claims are written at once but answered late (a busy server)."""

    def __init__(self, store: ClaimingCheckpointStore) -> None:
        super().__init__(store)
        self.claiming = asyncio.Event()

    async def claim(self, id: str, owner: str) -> bool:
        taken = await self.store.claim(id, owner)  # written; the answer is slow to come back
        self.claiming.set()
        await asyncio.sleep(0.2)
        return taken


async def test_a_resume_cancelled_while_it_takes_its_claim_gives_the_claim_back(
    make_store: StoreFactory,
) -> None:
    """The claim is written all the same: left there, it would refuse every resume for
    claim_ttl ("already being resumed") though nobody resumes."""
    checkpoint_id = await _paused(make_store())
    slow = _SlowClaims(make_store())
    task = asyncio.ensure_future(
        Runner(_payer(), checkpoint_store=slow).invoke_resume(checkpoint_id, {"approved": True})
    )
    await slow.claiming.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    done = await Runner(_payer(), checkpoint_store=make_store()).invoke_resume(
        checkpoint_id, {"approved": True}
    )
    assert done.text == "done: paid 5" and paid == [5]


async def test_a_resume_cancelled_by_an_anyio_cancel_scope_while_it_takes_its_claim_gives_it_back(
    make_store: StoreFactory,
) -> None:
    """anyio's cancel scopes cancel a task again at every await until it leaves the scope, so
    the giving back of a claim that was being taken (written, but its answer not in yet) was
    cancelled too: the claim stayed, refusing every resume ("already being resumed") for
    claim_ttl though nobody was resuming, and the attempt went on as a task after the cancelled
    resume had returned (found by fault injection)."""
    checkpoint_id = await _paused(make_store())
    store = _SlowClaims(make_store())
    with anyio.CancelScope() as scope:
        resume = asyncio.ensure_future(
            Runner(_payer(), checkpoint_store=store).invoke_resume(
                checkpoint_id, {"approved": True}
            )
        )
        await store.claiming.wait()
        scope.cancel()
        await resume
    assert scope.cancelled_caught and resume.cancelled()
    assert other_tasks() == set()  # the cleanup has finished, not left running

    done = await Runner(_payer(), checkpoint_store=make_store()).invoke_resume(
        checkpoint_id, {"approved": True}
    )
    assert done.text == "done: paid 5" and paid == [5]


@pytest.mark.parametrize("taken_over", [True, False])
async def test_a_resume_that_loses_its_claim_stops_without_writing(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture, taken_over: bool
) -> None:
    """Renewals fail for longer than the ttl. Whether or not another worker took the claim
    meanwhile (when none did, one may have taken it and finished), the resume stops."""
    # Driven by the claim's own steps, not by sleeps: on a loaded machine the claim was not yet
    # taken 0.05 s after the resume began (it then failed to take it), or had not lapsed 0.5 s
    # later (the other worker could not take it).
    checkpoint_id = await _paused(make_store())
    saved = await make_store().get(checkpoint_id)
    flaky = _CountedFailures(make_store(claim_ttl=0.3))
    paying = asyncio.Event()
    runner = Runner(_payer(until=paying), checkpoint_store=flaky)
    resume = asyncio.ensure_future(runner.invoke_resume(checkpoint_id, {"approved": True}))

    await flaky.taken.wait()
    flaky.failing.add("claim")  # the store becomes unreachable for renewals...
    await flaky.three_failed.wait()  # ...past the ttl: the holder counts its claim lost
    other = make_store(claim_ttl=30)
    if taken_over:
        await _lapses(other, checkpoint_id, "another worker")  # ...it lapses, is taken
    flaky.failing.clear()
    paying.set()

    with pytest.raises(RunError, match="lost the claim") as caught:
        await resume

    assert caught.value.error.type == "CheckpointError"
    assert paid == [5]  # the call in flight had run; nothing after it did
    assert await make_store().get(checkpoint_id) == saved  # neither deleted nor rewritten
    # The other worker's claim stays; with none, the claim is free for the next resume.
    if taken_over:
        assert not await make_store().claim(checkpoint_id, "probe")
    else:
        await _lapses(make_store(), checkpoint_id, "probe")
    assert "could not renew the claim" in caplog.text


async def test_a_failed_release_is_logged_and_the_claim_lapses(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # A ttl of 1 s: with 0.3 s, a resume slowed down on a loaded machine had ended its claim's
    # ttl before the probe asked whether the claim was still held.
    checkpoint_id = await _paused(make_store())
    flaky = _Flaky(make_store(claim_ttl=1.0))
    flaky.failing.add("release")
    runner = Runner(_payer(), checkpoint_store=flaky)

    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        result = await runner.invoke_resume(checkpoint_id, {"approved": True})

    assert result.text == "done: paid 5"
    assert "could not release the claim" in caplog.text
    assert not await make_store().claim(checkpoint_id, "probe")
    await _lapses(make_store(), checkpoint_id, "probe")


class _OwnErrors(_Flaky):
    """A store of one's own that raises its own errors, not ``CheckpointStoreError``."""

    def _fail(self, operation: str, id: str) -> None:
        if operation in self.failing:
            self.failing.discard(operation)  # once
            raise OSError(f"{operation} went wrong")


@pytest.mark.parametrize("ending", ["finished", "paused again"])
async def test_a_release_failing_with_a_stores_own_error_is_logged_not_raised_over_the_outcome(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture, ending: str
) -> None:
    """The resume's outcome is settled when its claim is released: an error of a store of one's
    own used to replace it (a resume that had paid, or paused again under new points, raised
    ``OSError`` instead; found by fault injection). Logged, as a ``CheckpointStoreError`` is."""

    class TwoQuestions(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            asked = ctx.resume.state if ctx.resume is not None else 0
            if asked < (2 if ending == "paused again" else 1):
                yield ctx.interrupt(f"question {asked + 1}?", state=asked + 1)
                return
            yield AgentEvent.of("answered")

    store = _OwnErrors(make_store())
    paused = await Runner(TwoQuestions("q"), checkpoint_store=store).invoke("go")
    assert paused.checkpoint_id is not None
    store.failing.add("release")
    runner = Runner(TwoQuestions("q"), checkpoint_store=store)
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        result = await runner.invoke_resume(paused.checkpoint_id, "yes")
    if ending == "finished":
        assert result.text == "answered"
    else:
        assert result.interrupt is not None and result.interrupt.points[0].info == "question 2?"
    assert "could not release the claim" in caplog.text and "release went wrong" in caplog.text


async def test_a_renewal_failing_with_a_stores_own_error_is_retried(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """Such an error used to end the renewals for good, so a resume outlasting ``claim_ttl``
    stopped with "lost the claim" though the next renewal would have worked."""
    # The payment lasts until a renewal after the failed one has gone through: without retries,
    # none does, and the claim is lost once its ttl has passed. A ttl of 1.5 s: the retry comes
    # two thirds of it after the claim, so it has half a second to get through (with 0.3 s, a
    # retry delayed 0.1 s on a loaded machine lost the claim).
    checkpoint_id = await _paused(make_store())
    store = _OwnErrors(make_store(claim_ttl=1.5))
    store.failing.add("claim")  # the first renewal (the claim itself is taken before)
    original = store.claim
    renewed = asyncio.Event()

    async def claim(id: str, owner: str) -> bool:
        if not hasattr(store, "taken"):
            store.taken = True  # type: ignore[attr-defined]
            return await store.store.claim(id, owner)
        held = await original(id, owner)  # the first renewal raises
        renewed.set()
        return held

    store.claim = claim  # type: ignore[method-assign]
    runner = Runner(_payer(until=renewed), checkpoint_store=store)
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        result = await runner.invoke_resume(checkpoint_id, {"approved": True})
    assert result.text == "done: paid 5" and paid == [5]
    assert "could not renew the claim" in caplog.text and "claim went wrong" in caplog.text


class _CancelledInside(_Flaky):
    """A store whose chosen operation awaits something that someone else cancelled (a future a
    connection pool cancelled as it closed, say): it raises ``CancelledError`` though nobody
    cancelled the run."""

    def _fail(self, operation: str, id: str) -> None:
        if operation in self.failing:
            self.failing.discard(operation)
            future = asyncio.get_running_loop().create_future()
            future.cancel()
            future.result()  # raises CancelledError

    async def get(self, id: str) -> bytes | None:
        self._fail("get", id)
        return await self.store.get(id)

    async def put(self, id: str, data: bytes) -> None:
        self._fail("put", id)
        await self.store.put(id, data)

    async def delete(self, id: str) -> None:
        self._fail("delete", id)
        await self.store.delete(id)


@pytest.mark.parametrize("operation", ["put", "claim", "get", "delete", "release"])
async def test_a_store_raising_cancelled_error_on_its_own_fails_clearly_and_keeps_the_checkpoint(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, operation: str
) -> None:
    """Such a ``CancelledError`` used to pass for the cancellation of the task running the run or
    the resume, which nobody had cancelled: a server would drop the request without a word, as if
    its client had gone (found by fault injection). It is the store failing: saving the pause
    fails with an error event, a resume with ``CheckpointStoreError`` naming the operation (the
    checkpoint is kept and resumes), and a failed release is logged as any other."""
    store = _CancelledInside(SQLiteCheckpointStore(tmp_path / "cp.db"))
    try:
        reader: asyncio.Task[Any]
        if operation == "put":
            store.failing.add("put")
            reader = asyncio.ensure_future(Runner(_payer(), checkpoint_store=store).invoke("5"))
            with pytest.raises(RunError, match=r"could not save checkpoint .*CancelledError"):
                await reader
            return
        checkpoint_id = await _paused(store)
        store.failing.add(operation)
        runner = Runner(_payer(), checkpoint_store=store)
        reader = asyncio.ensure_future(runner.invoke_resume(checkpoint_id, {"approved": True}))
        if operation == "release":
            with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
                assert (await reader).text == "done: paid 5"
            assert "could not release the claim" in caplog.text and "CancelledError" in caplog.text
            return
        with pytest.raises(CheckpointStoreError, match=f"{operation} of checkpoint") as failed:
            await reader
        assert failed.value.operation == operation and "CancelledError" in str(failed.value)
        if operation != "delete":  # (a failed delete leaves it too, its work done)
            done = await runner.invoke_resume(checkpoint_id, {"approved": True})
            assert done.text == "done: paid 5" and paid == [5]
    finally:
        await store.store.aclose()  # type: ignore[attr-defined]


# --------------------------------------------------------------------------------------------------
# Real processes over one SQLite file

WORKER = """
import asyncio, sys
from pathlib import Path
from adk import CheckpointError, Message, Role, Runner, tool
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

db, checkpoint_id, ledger, go, pay_seconds = sys.argv[1:6]

@tool(require_approval=True)
async def pay(amount: int) -> str:
    '''Pay an amount once a person approves it.'''
    print("paying", flush=True)
    await asyncio.sleep(float(pay_seconds))
    with open(ledger, "a") as f:
        f.write(f"{amount}\\n")
    return f"paid {amount}"

def reply(messages):
    if messages[-1].role == Role.TOOL:
        return Reply(text=f"done: {messages[-1].content}")
    return Reply(tool_calls=[tool_call("pay", {"amount": int(messages[-1].content)})])

async def main():
    store = SQLiteCheckpointStore(db, claim_ttl=float(sys.argv[6]))
    runner = Runner(ReActAgent("payer", ScriptedModel(reply), tools=[pay]), checkpoint_store=store)
    print("ready", flush=True)
    while not Path(go).exists():
        await asyncio.sleep(0.005)
    try:
        result = await runner.invoke_resume(checkpoint_id, {"approved": True})
        print("result", result.text, flush=True)
    except CheckpointError as exc:
        print("refused", exc, flush=True)
    finally:
        await store.aclose()

asyncio.run(main())
"""


_spawned: list[asyncio.subprocess.Process] = []


@pytest.fixture(autouse=True)
async def _no_worker_left() -> AsyncIterator[None]:
    yield
    while _spawned:
        process = _spawned.pop()
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()


async def _worker(*args: str) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WORKER,
        *args,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _spawned.append(process)
    return process


async def _line(process: asyncio.subprocess.Process) -> str:
    assert process.stdout is not None
    return (await asyncio.wait_for(process.stdout.readline(), 60)).decode().strip()


async def test_processes_sharing_a_sqlite_file_resume_once(tmp_path: Path) -> None:
    db, ledger, go = tmp_path / "cp.db", tmp_path / "ledger", tmp_path / "go"
    async with SQLiteCheckpointStore(db) as store:
        checkpoint_id = await _paused(store, 7)
    args = (str(db), checkpoint_id, str(ledger), str(go), "0.3", "30")
    workers = [await _worker(*args) for _ in range(3)]
    assert [await _line(w) for w in workers] == ["ready"] * 3
    go.touch()  # all three resume at once

    outputs = [(await w.communicate())[0].decode() for w in workers]

    assert [w.returncode for w in workers] == [0, 0, 0]
    assert sorted(o.splitlines()[-1].split(" ", 1)[0] for o in outputs) == [
        "refused",
        "refused",
        "result",
    ]
    assert "result done: paid 7" in "".join(outputs)
    assert ledger.read_text() == "7\n"


async def test_a_dead_workers_claim_lapses_and_the_checkpoint_resumes(tmp_path: Path) -> None:
    db, ledger, go = tmp_path / "cp.db", tmp_path / "ledger", tmp_path / "go"
    go.touch()
    async with SQLiteCheckpointStore(db) as store:
        checkpoint_id = await _paused(store, 4)
    # A ttl of 1 s, and the lapse polled for: with 0.5 s and a fixed sleep, a loaded machine
    # could let the claim lapse before the first resume asked, or not yet after the sleep.
    worker = await _worker(str(db), checkpoint_id, str(ledger), str(go), "600", "1")
    assert await _line(worker) == "ready"
    assert await _line(worker) == "paying"  # it holds the claim and waits on the payment
    worker.send_signal(signal.SIGKILL)
    await worker.wait()

    async with SQLiteCheckpointStore(db, claim_ttl=1.0) as store:
        runner = Runner(_payer(), checkpoint_store=store)
        with pytest.raises(CheckpointError, match=r"lapses within 1 s"):
            await runner.invoke_resume(checkpoint_id, {"approved": True})
        await _lapses(store, checkpoint_id, "probe")
        await store.release(checkpoint_id, "probe")
        result = await runner.invoke_resume(checkpoint_id, {"approved": True})

    assert result.text == "done: paid 4"
    assert not ledger.exists()  # the dead worker never paid; this resume did
    assert paid == [4]


# --------------------------------------------------------------------------------------------------
# The in-process guard, across threads


class _Meeting:
    """Where the two resuming threads (``a`` and ``b``) meet, told by what each has done: hashed
    the checkpoint id so many times (``hashed``), waits on the guard's lock (``waiting``), got
    past the guard (``inside``) or left it (``done``). Waits are for what the other thread does,
    not for a time: a thread stalled by a loaded machine is waited for. (A 60 s guard turns a
    bug that would hang the test into a failure.)"""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.hashed = {"a": 0, "b": 0}
        self.waiting: set[str] = set()
        self.inside: set[str] = set()
        self.done: set[str] = set()

    def note(self, where: set[str], *, gone: bool = False) -> None:
        with self.changed:
            name = threading.current_thread().name
            where.discard(name) if gone else where.add(name)
            self.changed.notify_all()

    def wait_for_other(self, ready: Callable[[str], bool]) -> None:
        """Until ``ready(other thread)``, or the other is done."""
        other = "b" if threading.current_thread().name == "a" else "a"
        with self.changed:
            met = self.changed.wait_for(lambda: ready(other) or other in self.done, 60)
        assert met, f"thread {other!r} never got there"

    def hash_in_step(self) -> None:
        """A thread's ``n``-th hash of the id waits until the other has hashed it ``n`` times, or
        waits on the guard's lock: each look-up or insertion of the id in the guard's set waits
        for the other thread's, so two checks not made under one lock both see the id absent
        before either adds it."""
        with self.changed:
            name = threading.current_thread().name
            self.hashed[name] += 1
            count = self.hashed[name]
            self.changed.notify_all()
        self.wait_for_other(lambda other: self.hashed[other] >= count or other in self.waiting)


class _WatchedLock:
    """The guard's lock, noting a thread that waits on it: a thread holding it while it waits
    for the other knows the other is held off, not late."""

    def __init__(self, meeting: _Meeting) -> None:
        self.lock = threading.Lock()
        self.meeting = meeting

    def __enter__(self) -> None:
        ours = threading.current_thread().name in ("a", "b")
        if ours:
            self.meeting.note(self.meeting.waiting)
        self.lock.acquire()
        if ours:
            self.meeting.note(self.meeting.waiting, gone=True)

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


class _MeetingId(str):
    """A checkpoint id whose hashing keeps the two threads in step (``_Meeting.hash_in_step``)."""

    meeting: _Meeting

    def __hash__(self) -> int:
        if threading.current_thread().name in ("a", "b"):
            self.meeting.hash_in_step()
        return str.__hash__(self)


def test_threads_sharing_a_store_resume_a_checkpoint_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The in-memory and SQLite stores may be shared by event loops in several threads: two
    resumes of one checkpoint racing in two threads must still be one resume at a time.

    The threads go through the guard's set in step (each look-up or insertion of the id waits
    for the other's, or for the other to wait on the guard's lock), and the one inside waits
    for the other to be refused or to come in too, each by what the other does: with 0.5 s
    barrier timeouts a thread started late on a loaded machine met nobody, and the race was not
    run at all (nor was it when both met: the last to arrive checked and added before the other
    looked)."""
    store = InMemoryCheckpointStore()
    meeting = _Meeting()
    monkeypatch.setattr(adk.checkpoint._claim, "_RESUMING_LOCK", _WatchedLock(meeting))
    checkpoint_id = _MeetingId("pay-1")
    checkpoint_id.meeting = meeting
    inside: list[str] = []
    refused: list[str] = []

    def resume() -> None:
        try:
            try:
                with _in_process(store, checkpoint_id):
                    inside.append(threading.current_thread().name)
                    meeting.note(meeting.inside)
                    # Both inside at once is the guard letting both through.
                    meeting.wait_for_other(lambda other: other in meeting.inside)
                    assert being_resumed(store, checkpoint_id)
            except CheckpointError:
                refused.append(threading.current_thread().name)
        finally:
            meeting.note(meeting.done)

    threads = [threading.Thread(target=resume, name=name) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(inside) == 1 and len(refused) == 1, (inside, refused)
    assert all(meeting.hashed.values())  # both checked the guard
    assert not being_resumed(store, "pay-1")


async def test_an_expiry_jobs_delete_meets_a_resume_as_interrupts_md_says(
    make_store: StoreFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # docs/interrupts.md, "Expiring abandoned checkpoints": a plain delete during a resume loses
    # to it (the call is made, its record refused with a warning, its new pause saved under the
    # id); under a claim the job cannot take a checkpoint a resume holds, and a resume of one the
    # job holds is refused as busy, then finds nothing. Passes: documents what is.
    paying, paying_bob = asyncio.Event(), asyncio.Event()

    @tool(require_approval=True)
    async def pay(payee: str) -> str:
        """Pay someone once a person approves it."""
        if payee == "bob":
            paying_bob.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(paying.wait(), 10)
        paid.append(payee)
        return f"paid {payee}"

    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role != Role.TOOL:
            return Reply(tool_calls=[tool_call("pay", {"payee": "bob"}, id="c1")])
        if "bob" in messages[-1].content:
            return Reply(tool_calls=[tool_call("pay", {"payee": "eve"}, id="c2")])
        return Reply(text="done")

    service, job = make_store(), make_store()
    runner = Runner(
        ReActAgent("payer", ScriptedModel(reply), tools=[pay]), checkpoint_store=service
    )
    await runner.invoke("pay", checkpoint_id="x")
    resume = asyncio.ensure_future(runner.invoke_resume("x", True))
    await asyncio.wait_for(paying_bob.wait(), 10)
    [entry] = [entry async for entry in list_pending(job)]
    assert entry.resuming  # what the job's listing shows
    assert not await job.claim("x", "expiry-job")  # the resume holds it
    with caplog.at_level(logging.WARNING, logger="adk.checkpoint"):
        await job.delete("x")  # a plain delete: taken
        paying.set()
        paused_again = await resume
    assert paid == ["bob"]
    assert "it is no longer the one this resume loaded (deleted" in caplog.text
    assert paused_again.checkpoint_id == "x" and paused_again.interrupt is not None
    [entry] = [entry async for entry in list_pending(job)]
    assert [p.info["arguments"] for p in entry.points] == [{"payee": "eve"}]

    assert await job.claim("x", "expiry-job")  # nobody resumes it now
    with pytest.raises(CheckpointError) as busy:
        await runner.invoke_resume("x", True)
    assert busy.value.reason == "busy"
    await job.delete("x")
    await job.release("x", "expiry-job")
    with pytest.raises(CheckpointError) as gone:
        await runner.invoke_resume("x", True)
    assert gone.value.reason == "not_found" and paid == ["bob"]
