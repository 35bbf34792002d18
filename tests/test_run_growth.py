"""What a long run or a wide resume costs grows linearly: counted (names written, look-ups made),
never timed.

- ``_ResumePlan`` answers ``resume_for`` and forgets answered points (``consume``) through an index
  of the points by ancestor address: a resume of P points made P x P ``is_within`` tests, each
  component's look-up testing every pending point and each answered point's removal rebuilding
  the list.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

import adk
from adk import AgentEvent, BaseAgent, ParallelAgent, Runner
from adk import interrupts as interrupts_module
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
    """Random trees of addresses (``#`` call ids, a ``/`` at either end, the empty address),
    points answered in several rounds: every look-up answers as the scan of every point did."""
    rng = random.Random(7)
    parts = ["agent:r", "agent:a", "agent:b", "tool:t#call_1", "tool:t#call_2", "", "x"]
    for _ in range(200):
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
