"""What a long run or a wide resume costs grows linearly: counted (names written, look-ups made),
never timed.

- ``_ResumePlan`` answers ``resume_for`` and forgets answered points (``consume``) through an index
  of the points by ancestor address: a resume of P points made P x P ``is_within`` tests, each
  component's look-up testing every pending point and each answered point's removal rebuilding
  the list.
- A checkpoint writes each distinct run path once, in a table (format version 2): a loop of N
  rounds (a plan of N steps, a chain of N transfers) has run paths of up to N names, and each
  entry held its own.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import adk
from adk import AgentEvent, BaseAgent, CheckpointError, ParallelAgent, Runner
from adk import interrupts as interrupts_module
from adk.checkpoint import InMemoryCheckpointStore, codec
from adk.checkpoint import _snapshot as snapshot_module
from adk.checkpoint.codec import encode_checkpoint
from adk.context import new_entry, new_run
from adk.interrupts import (
    AGENT_STATE,
    InterruptPoint,
    _InterruptSignal,
    _ResumePlan,
    is_within,
)


def _signal(ids: list[str]) -> _InterruptSignal:
    return _InterruptSignal(
        [InterruptPoint(id=i, address=i.split("/"), info=n) for n, i in enumerate(ids)],
        {i: {AGENT_STATE: f"state of {i}"} for i in ids[::2]},
    )


class _Reference:
    """``_ResumePlan``'s answers as it gave them before its index: every point tested."""

    def __init__(self, ids: list[str], targets: dict[str, Any]) -> None:
        self.ids = list(ids)
        self.targets = targets

    def resume_for(self, address: str) -> tuple[bool, bool] | None:
        if not any(is_within(p, address) for p in self.ids):
            return None
        return True, any(is_within(t, address) for t in self.targets)

    def consume(self, address: str) -> None:
        self.ids = [p for p in self.ids if not is_within(p, address)]


def test_the_resume_plans_index_answers_as_testing_every_point_did() -> None:
    """Random trees of addresses (``#`` call ids, a ``/`` at either end, the empty address, a
    name that begins with another, an encoded ``/``), points answered in several rounds: every
    look-up answers as the scan of every point did."""
    rng = random.Random(7)
    # "agent:ab" and "tool:t#call_12" begin with another part: below "agent:a" by its text,
    # not by its segments; "agent:a%2Fb" is a name holding a "/", as an address encodes it.
    parts = ["agent:r", "agent:a", "agent:ab", "agent:a%2Fb", "agent:b"]
    parts += ["tool:t#call_1", "tool:t#call_12", "tool:t#call_2", "", "x"]
    for _ in range(40):
        ids = ["/".join(rng.choice(parts) for _ in range(rng.randint(1, 4))) for _ in range(12)]
        addresses = sorted({i[:k] for i in ids for k in range(len(i) + 1)} | {"agent:zz"})
        targets = {i: n for n, i in enumerate(rng.sample(ids, 4))}
        plan, reference = _ResumePlan(_signal(ids), dict(targets)), _Reference(ids, targets)
        for _ in range(6):
            for address in addresses:
                got, want = plan.resume_for(address), reference.resume_for(address)
                assert (got is None) == (want is None), address
                if got is not None and want is not None:
                    assert (got.was_interrupted, got.is_target) == want, address
                    assert got.data == targets.get(address)
                assert [p.id for p in plan.within(address)] == [
                    p for p in reference.ids if is_within(p, address)
                ]
                given = plan.subtree(address)  # states are never forgotten, points are
                assert [p.id for p in given.points] == [p.id for p in plan.within(address)]
                assert list(given.states.items()) == [
                    (a, s) for a, s in plan.states.items() if is_within(a, address)
                ]
            assert [p.id for p in plan.points] == reference.ids
            gone = rng.choice(addresses)
            plan.consume(gone)
            reference.consume(gone)
        assert [p.id for p in plan.points] == reference.ids


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]

    def counted(address: str, ancestor: str) -> bool:
        calls[0] += 1
        return is_within(address, ancestor)

    monkeypatch.setattr(interrupts_module, "is_within", counted)
    return calls


def test_a_wide_resume_asks_each_point_once_not_every_point_per_component(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """400 pending points, each component asking its own and answered (consumed) one by one:
    160,000 ``is_within`` tests and 400 rebuilds of the list before, none now."""
    ids = [f"agent:root/agent:par/agent:b{n}/tool:pay#call_{n}" for n in range(400)]
    plan = _ResumePlan(_signal(ids), {i: True for i in ids})
    calls = _counting(monkeypatch)
    for point in ids:
        branch = point.rsplit("/", 1)[0]
        found = plan.resume_for(branch)
        assert found is not None and found.is_target
        own = plan.resume_for(point)
        assert own is not None and own.data is True
        plan.consume(point)
        assert plan.resume_for(point) is None
    assert plan.points == [] and plan.resume_for("agent:root") is None
    assert calls[0] == 0


class _Asks(BaseAgent):
    async def run(self, input: adk.AgentInput, ctx: adk.RunContext):  # type: ignore[override]
        if ctx.resume is not None and ctx.resume.is_target:
            yield AgentEvent.of(adk.Message.assistant(f"{self.name}: {ctx.resume.data}"))
            return
        yield ctx.interrupt(f"{self.name}?")


async def test_a_fan_out_answered_in_rounds_tests_no_point_per_look_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ParallelAgent of 60 paused branches answered in three resumes: each resume answers its
    branches, the others pause again, and no resume tests the points one by one."""
    width = 60
    agent = ParallelAgent("par", [_Asks(f"b{n}") for n in range(width)])
    runner = Runner(agent)
    first = await runner.invoke("go")
    assert first.interrupt is not None and first.checkpoint_id is not None
    points = [p.id for p in first.interrupt.points]
    assert len(points) == width
    calls = _counting(monkeypatch)
    checkpoint, answered = first.checkpoint_id, []
    for round_ in range(3):
        batch = points[round_ * 20 : (round_ + 1) * 20]
        result = await runner.invoke_resume(checkpoint, {p: round_ for p in batch})
        answered += [m.content for e in result.events if (m := e.message) is not None]
        if round_ < 2:
            assert result.interrupt is not None
            assert len(result.interrupt.points) == width - 20 * (round_ + 1)
            checkpoint = result.interrupt.checkpoint_id or checkpoint
        else:
            assert result.interrupt is None
    assert sorted(answered) == sorted(f"b{n}: {n // 20}" for n in range(width))
    assert calls[0] <= 3 * width  # 20 x 60 per resume before (1,200+), linear now


class _AsksKeeping(_Asks):
    """Asks as ``_Asks`` does, saving a state of its own with its pause (as a ``ReActAgent``
    does): a branch not answered gives it back unchanged (``_ResumePlan.subtree``)."""

    async def run(self, input: adk.AgentInput, ctx: adk.RunContext):  # type: ignore[override]
        if ctx.resume is not None and ctx.resume.is_target:
            said = f"{self.name}: {ctx.resume.data}, kept {ctx.resume.state}"
            yield AgentEvent.of(adk.Message.assistant(said))
            return
        yield ctx.interrupt(f"{self.name}?", state={"asked": self.name})


async def test_branches_left_waiting_give_back_their_own_states_not_every_states_test(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A ParallelAgent of 60 paused branches, each with a saved state, 20 answered: each of the
    40 left waiting gives back its point and its state (``subtree``), found by address, not by
    testing every saved state (40 x 60 tests a resume, P x P for a resume of P points)."""
    width = 60
    runner = Runner(ParallelAgent("par", [_AsksKeeping(f"b{n}") for n in range(width)]))
    first = await runner.invoke("go")
    assert first.interrupt is not None and first.checkpoint_id is not None
    points = [p.id for p in first.interrupt.points]
    calls = _counting(monkeypatch)
    result = await runner.invoke_resume(first.checkpoint_id, {p: "yes" for p in points[:20]})
    first_said = sorted(m.content for e in result.events if (m := e.message) is not None)
    assert first_said == sorted(f"b{n}: yes, kept {{'asked': 'b{n}'}}" for n in range(20))
    assert result.interrupt is not None and result.interrupt.checkpoint_id is not None
    assert [p.id for p in result.interrupt.points] == points[20:]
    assert calls[0] <= width  # 2,400 before
    monkeypatch.undo()
    answers = {p: "later" for p in points[20:]}
    last = await runner.invoke_resume(result.interrupt.checkpoint_id, answers)
    assert last.interrupt is None
    said = sorted(m.content for e in last.events if (m := e.message) is not None)
    # Each state given back whole, through the pause again, to its own branch.
    assert said == sorted(f"b{n}: later, kept {{'asked': 'b{n}'}}" for n in range(20, width))


# --- A checkpoint's run paths -------------------------------------------------------------------


class _Round(BaseAgent):
    """One round of a loop: says which, twice, and asks for approval in round ``ask``; resumed,
    it says what it was told and breaks the loop."""

    def __init__(self, name: str, ask: int) -> None:
        super().__init__(name)
        self.ask = ask
        self.rounds = 0

    async def run(self, input: adk.AgentInput, ctx: adk.RunContext):  # type: ignore[override]
        if ctx.resume is not None and ctx.resume.is_target:
            yield AgentEvent.of(adk.Message.assistant(f"told {ctx.resume.data}"))
            yield AgentEvent.break_loop()
            return
        self.rounds += 1
        if self.rounds == self.ask:
            yield ctx.interrupt("go on?")
            return
        yield AgentEvent.of(adk.Message.assistant(f"round {self.rounds}"))
        yield AgentEvent.of(adk.Message.assistant(f"round {self.rounds}, again"))


def _loop(rounds: int) -> adk.LoopAgent:
    return adk.LoopAgent("loop", [_Round("worker", rounds)], max_iterations=rounds + 5)


def _body_of(data: bytes) -> tuple[dict[str, Any], dict[str, Any]]:
    head, _, body = data.partition(b"\n")
    return json.loads(head), json.loads(body)


def _names_written(body: dict[str, Any]) -> int:
    """The run-path names a body holds: in its entries (a list each) and in its table."""
    listed = sum(len(e["run_path"]) for e in body["history"] if isinstance(e["run_path"], list))
    return listed + sum(len(item) - 1 for item in body.get("run_paths", []))


async def _paused(agent: Any, store: InMemoryCheckpointStore) -> tuple[Runner, bytes]:
    runner = Runner(agent, checkpoint_store=store)
    result = await runner.invoke("go", checkpoint_id="c")
    assert result.interrupt is not None
    data = await store.get("c")
    assert data is not None
    return runner, data


async def test_a_long_loops_checkpoint_writes_each_run_path_once() -> None:
    """A LoopAgent paused in round 120: each round's run path is the last one's plus a name, and
    the checkpoint held each entry's whole path (7,259 names, quadratic in the rounds); its table
    holds each name once (version 2), and the resume sees the same history, each entry's run path
    equal to what the paused run recorded and the two entries of a round sharing one tuple, as
    the paused run's shared their context's (each entry had a copy of its own)."""
    rounds = 120
    store = InMemoryCheckpointStore()
    runner, data = await _paused(_loop(rounds), store)
    header, body = _body_of(data)
    entries = body["history"]
    assert len(entries) == 2 * (rounds - 1)
    assert _names_written(body) <= len(entries)  # 14,518 before
    assert header["version"] == codec.VERSION == 2

    seen: list[adk.history.HistoryEntry] = []
    original_load = snapshot_module.load_history

    def loading(run: Any, items: Any, *, checked: bool = False) -> None:
        original_load(run, items, checked=checked)
        seen.extend(run.history.snapshot())

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(snapshot_module, "load_history", loading)
        result = await runner.invoke_resume("c", "yes")
    assert result.interrupt is None and result.output is not None
    paths = [("loop",) + ("worker",) * n for n in range(1, rounds)]
    assert [e.run_path for e in seen] == [p for p in paths for _ in range(2)]
    said = [f"round {n}{again}" for n in range(1, rounds) for again in ("", ", again")]
    assert [e.message.content for e in seen] == said
    assert len({id(e.run_path) for e in seen}) == rounds - 1  # one a path, not one an entry


async def test_a_short_runs_checkpoint_stays_in_the_form_every_pyadk_reads() -> None:
    """Run paths up to 32 names are written in each entry, as format version 1, which pyadk
    before the table wrote and reads: a rolling deploy's older workers resume such pauses."""
    _, data = await _paused(_loop(30), InMemoryCheckpointStore())
    header, body = _body_of(data)
    assert header["version"] == 1 and "run_paths" not in body
    assert all(isinstance(e["run_path"], list) for e in body["history"])


async def test_an_older_pyadk_refuses_the_table_as_a_newer_ones_and_keeps_it() -> None:
    """A pyadk that reads version 1 only (the one before) meets a pause written with the table
    as another release's ("other_version": a rolling deploy's older worker answers 503 and a
    newer one resumes it), not as a malformed one."""
    store = InMemoryCheckpointStore()
    _, data = await _paused(_loop(40), store)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(codec, "VERSION", 1)
        with pytest.raises(CheckpointError) as caught:
            await Runner(_loop(40), checkpoint_store=store).invoke_resume("c", "yes")
    assert caught.value.reason == "other_version"
    assert "format version 2; this pyadk reads version 1 (a newer pyadk wrote it" in str(
        caught.value
    )
    assert await store.get("c") == data


async def test_a_checkpoint_with_each_run_path_listed_resumes_as_the_table_does() -> None:
    """The same long pause written as format version 1 (each entry's run path a list: what pyadk
    wrote before the table, and writes for short paths) resumes to the same result."""
    results = []
    for limit in (snapshot_module._LONG_RUN_PATH, 10_000):
        store = InMemoryCheckpointStore()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(snapshot_module, "_LONG_RUN_PATH", limit)
            runner, data = await _paused(_loop(50), store)
        header = _body_of(data)[0]
        assert header["version"] == (2 if limit < 50 else 1)
        result = await runner.invoke_resume("c", "yes")
        results.append([(e.agent_name, e.run_path, e.message) for e in result.events])
    assert results[0] == results[1]


def _damaged(body: dict[str, Any], change: Any) -> bytes:
    change(body)
    return encode_checkpoint(body)


@pytest.mark.parametrize(
    ("name", "change"),
    [
        ("table not a list", lambda b: b.update(run_paths={"0": ["loop"]})),
        ("an item not a list", lambda b: b["run_paths"].__setitem__(1, "loop")),
        ("an empty item", lambda b: b["run_paths"].__setitem__(1, [])),
        ("a later parent", lambda b: b["run_paths"].__setitem__(1, [5, "worker"])),
        ("its own parent", lambda b: b["run_paths"].__setitem__(1, [1, "worker"])),
        ("a parent below -1", lambda b: b["run_paths"].__setitem__(1, [-2, "worker"])),
        ("a parent that is true", lambda b: b["run_paths"].__setitem__(1, [True, "worker"])),
        ("a name not a str", lambda b: b["run_paths"].__setitem__(1, [0, 7])),
        ("an index past the table", lambda b: b["history"][0].update(run_path=10_000)),
        ("an index below 0", lambda b: b["history"][0].update(run_path=-1)),
        ("a listed path beside the table", lambda b: b["history"][0].update(run_path=["loop"])),
    ],
)
async def test_a_damaged_table_of_run_paths_is_refused_and_kept(name: str, change: Any) -> None:
    store = InMemoryCheckpointStore()
    _, data = await _paused(_loop(40), store)
    damaged = _damaged(_body_of(data)[1], change)
    await store.put("c", damaged)
    with pytest.raises(CheckpointError) as caught:
        await Runner(_loop(40), checkpoint_store=store).invoke_resume("c", "yes")
    assert caught.value.reason == "corrupt", name
    assert "is malformed" in str(caught.value)
    assert await store.get("c") == damaged


async def test_a_table_expanding_past_the_limit_is_refused_before_it_is_built() -> None:
    """A table of 6,000 paths, each the one before plus a name (a 50 KB body), expands to 18
    million names: refused as past the limit, counted before a tuple is built, and kept."""
    store = InMemoryCheckpointStore()
    _, data = await _paused(_loop(40), store)
    body = _body_of(data)[1]
    body["run_paths"] = [[-1, "loop"]] + [[n, "w"] for n in range(6_000)]
    damaged = encode_checkpoint(body)
    await store.put("c", damaged)
    with pytest.raises(CheckpointError) as caught:
        await Runner(_loop(40), checkpoint_store=store).invoke_resume("c", "yes")
    assert caught.value.reason == "incompatible"
    assert f"past this pyadk's limit of {snapshot_module._MAX_PATH_NAMES}" in str(caught.value)
    assert await store.get("c") == damaged


def test_the_table_gives_back_every_entrys_run_path_whatever_their_order() -> None:
    """Run paths of random trees (branches interleaved, paths shorter than the one before, the
    same path as a new tuple, the empty path), written with the table and read back: each entry
    gets its own path, equal paths get one tuple, and the table holds fewer names than the
    entries' paths did."""
    rng = random.Random(11)
    for _ in range(60):
        run = new_run([adk.Message.user("go")], None)
        known: list[tuple[str, ...]] = [("root",) * 33]
        for seq in range(rng.randint(1, 80)):
            base = rng.choice(known)
            pick = rng.random()
            if pick < 0.5:
                path = (*base, rng.choice("abc"))
            elif pick < 0.7:
                path = base[: rng.randint(0, len(base))]
            else:
                path = tuple(list(base))  # equal, another tuple
            known.append(path)
            run.history.entries.append(new_entry("a", path, adk.Message.assistant("x"), seq))
        written, table = snapshot_module._history_body(run.history)
        entries = run.history.snapshot()
        if table is None:  # no path past 32 names
            assert all(len(e.run_path) <= snapshot_module._LONG_RUN_PATH for e in entries)
            continue
        body = json.loads(
            encode_checkpoint({"history": written, "run_paths": table}).split(b"\n")[1]
        )
        read = snapshot_module._read_history(body["history"], body["run_paths"])
        assert [e["run_path"] for e in read] == [e.run_path for e in entries]
        assert len({id(e["run_path"]) for e in read}) == len({e.run_path for e in entries})
        assert sum(len(item) - 1 for item in table) <= sum(len(e.run_path) for e in entries)


def test_a_long_history_with_an_entry_of_another_shape_is_written_listed_as_before() -> None:
    """An entry the framework does not record (its agent's name a ``str`` subclass) sends the
    whole history to the listed form's writer, which writes it by the generic walk as it did:
    version 1, no table."""

    class Name(str):
        pass

    run = new_run([adk.Message.user("go")], None)
    for seq in range(3):
        agent = Name("a") if seq == 1 else "a"
        path = ("root",) * (40 + seq)
        run.history.entries.append(new_entry(agent, path, adk.Message.assistant("x"), seq))
    written, table = snapshot_module._history_body(run.history)
    assert table is None
    assert written == snapshot_module._history_json(run.history)
    assert [len(e["run_path"]) for e in written] == [40, 41, 42]
