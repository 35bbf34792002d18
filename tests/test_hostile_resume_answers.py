"""Random answers to a paused run with several pending points.

The ``parallel`` tree of ``faults`` paused at four points: three tool calls waiting for approval
(``@tool(require_approval=True)``) and a custom agent asking a person. ``hypothesis`` answers it
with random JSON-shaped data: plain data (with four points pending: refused, but for ``None``,
every point with data ``None``), or data keyed by
some of the points (and by keys that are not points) whose values are clear decisions, decisions
under ``"approved"`` with a reason or edited arguments, or random JSON (``recursive``).

What must hold (docs/interrupts.md, Resuming and Approvals): an answer is either refused, with a
``ValueError`` that says what is wrong, before anything runs and with the checkpoint kept as it
was (it then resumes with a good answer), or accepted, and then applied whole: every call
approved with a clear yes ran (with the arguments an accepted edit gave), every call denied did
not, and every point it did not answer waits again in the run's next pause. Never a crash, an
error event, or an answer half applied.
"""

from __future__ import annotations

import asyncio
from typing import Any

import hypothesis.strategies as st
from faults import APPROVE, TREES, Faults
from hypothesis import HealthCheck, given, settings

from adk import CheckpointError, RunError, Runner
from adk.checkpoint import InMemoryCheckpointStore

EXAMPLES = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

ASK = "agent:par_then/agent:par/agent:ask"
CALLS = {  # approval point -> the tag its call works on
    "agent:par_then/agent:par/agent:a/tool:work#a_0": "a.0",
    "agent:par_then/agent:par/agent:a/tool:work#a_1": "a.1",
    "agent:par_then/agent:par/agent:b/tool:work#b_0": "b.0",
}
POINTS = [ASK, *CALLS]

_paused: list[bytes] = []


def paused() -> bytes:
    if not _paused:

        async def pause() -> bytes:
            store = InMemoryCheckpointStore()
            runner = Runner(TREES["parallel"](Faults(), True), store)
            result = await runner.invoke("go", checkpoint_id="cp")
            assert result.interrupt is not None
            assert sorted(result.interrupt.point_ids) == sorted(POINTS)
            data = await store.get("cp")
            assert data is not None
            return data

        _paused.append(asyncio.run(pause()))
    return _paused[0]


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
    | st.sampled_from(["yes", "No", " approve ", "maybe", "denied", "a.0"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["approved", "reason", "arguments", "approve", "args", "tag", "x"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=10,
)
YES: list[Any] = [True, "yes", " Y ", "approve", {"approved": True}, {"approved": "yes", "by": "x"}]
NO: list[Any] = [False, None, "no", "Denied", {"approved": False, "reason": "too much"}]
_decisions = st.one_of(
    st.sampled_from(YES),
    st.sampled_from(NO),
    st.builds(lambda tag: {"approved": True, "arguments": {"tag": tag}}, st.text(max_size=4)),
    st.builds(lambda arguments: {"approved": True, "arguments": arguments}, _json),
    st.builds(lambda approved: {"approved": approved}, _json),
    _json,
)
_keyed = st.builds(
    lambda chosen, extra: {**chosen, **extra},
    st.dictionaries(st.sampled_from(POINTS), _decisions, min_size=1, max_size=4),
    st.one_of(  # now and then, a key that is no pending point
        *[st.just({})] * 4,
        st.dictionaries(
            st.sampled_from(["a_0", "agent:par_then/agent:par/agent:c", "", "cp"]),
            _decisions,
            min_size=1,
            max_size=1,
        ),
    ),
)


@settings(EXAMPLES, max_examples=150)
@given(answer=st.one_of(_keyed, _keyed, _keyed, _json))
def test_a_random_answer_is_refused_untouched_or_applied_whole(answer: Any) -> None:
    paused()  # made on a loop of its own, before the example's
    asyncio.run(_answer(answer))


def _kind(decision: Any) -> str | None:
    """ "yes" or "no" for the clear decisions the docs list (``YES``, ``NO``); None for others."""
    if any(decision == known and type(decision) is type(known) for known in YES):
        return "yes"
    if any(decision == known and type(decision) is type(known) for known in NO):
        return "no"
    return None


async def _answer(answer: Any) -> None:
    data = paused()
    store = InMemoryCheckpointStore()
    await store.put("cp", data)
    faults = Faults()
    runner = Runner(TREES["parallel"](faults, True), store)
    try:
        result = await runner.invoke_resume("cp", answer)
    except (ValueError, TypeError) as exc:
        assert "Nothing ran" in str(exc) or "before anything runs" in str(exc) or str(exc), exc
        assert faults.log == [], f"refused after running {faults.log}"
        assert await store.get("cp") == data, "a refused answer changed the checkpoint"
        # The checkpoint still resumes, with a good answer.
        good = await runner.invoke_resume("cp", dict.fromkeys(POINTS, APPROVE))
        assert good.interrupt is None and {"a.0", "a.1", "ask", "b.0"} <= set(faults.log)
        return
    except (RunError, CheckpointError) as exc:
        raise AssertionError(f"an answer ended the resume with an error: {exc!r}") from exc

    assert [e.error for e in result.events if e.error is not None] == []
    if answer is None:  # a resume without data: every pending point, with data None
        answer = dict.fromkeys(POINTS)
    assert isinstance(answer, dict) and answer, "plain data was taken with four points pending"
    assert set(answer) <= set(POINTS), "a key that is no pending point was taken"
    waiting = set(result.interrupt.point_ids) if result.interrupt is not None else set()
    for point in POINTS:
        if point not in answer:
            assert point in waiting, f"{point} was not answered but does not wait"
    ran = list(faults.log)
    for point, tag in CALLS.items():
        if point not in answer:
            continue
        decision = answer[point]
        kind = _kind(decision)
        edited = (
            isinstance(decision, dict)
            and isinstance(decision.get("arguments"), dict)
            and decision.get("approved") is True
        )
        if edited:
            assert decision["arguments"]["tag"] in ran, (point, decision, ran)
        elif kind == "yes":
            assert tag in ran, (point, decision, ran)
        elif kind == "no":
            assert tag not in ran, (point, decision, ran)
    if ASK in answer:
        assert "ask" in ran
