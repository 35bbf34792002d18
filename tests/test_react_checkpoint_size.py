"""A paused ReActAgent's checkpoint holds its conversation once, and resumes exactly as before.

The history saved with every checkpoint already holds each message the agent emitted (and the
input it was built from), so the agent's own saved state refers to it instead of repeating it. Each
case pauses the same scripted run twice: once writing the state of earlier versions (the whole
conversation, ``_SAVE_WHOLE_CONVERSATION``), which the current code must still resume, and once as
now. Both must show the models exactly the same messages and emit the same events; the unique
markers put in the conversation's messages must appear twice in the old checkpoint and once now.
The system prompt is not saved any more (the resume renders the current instruction): checkpoints
that saved it at the start of their ``head`` (``_SAVE_SYSTEM_PROMPT``) must resume the same too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from pydantic import BaseModel

import adk
from adk import (
    Agent,
    AgentTool,
    CheckpointError,
    LoopAgent,
    Message,
    ParallelAgent,
    Runner,
    SequentialAgent,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import decode_checkpoint
from adk.history import HistoryEntry, default_rewriter
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import PlanExecute, ReActAgent, Supervisor, _react_state, new_planner, new_replanner

INPUT = "INPUT-MARK-q7"
THOUGHT = "THOUGHT-MARK-q7"
INTRO = "INTRO-MARK-q7"
BOSS = "BOSS-MARK-q7"
OUTER = "OUTER-MARK-q7"
SYSTEM = "SYSTEM-MARK-q7"
RETRY = "Reply again with only the corrected JSON object"  # from the structured-output retry


def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"RESULT-MARK-{topic}: facts about {topic}"


@adk.tool(require_approval=True)
def publish(title: str) -> str:
    """Publish an article (needs a person's approval).

    Args:
        title: The article's title.
    """
    return f"PUBLISHED-MARK-{title}"


def research(thought: str = THOUGHT, topic: str = "tides", *titles: str) -> Reply:
    """The model's tool round: a completed lookup and approval-gated publishes, with text."""
    calls = [tool_call("lookup", {"topic": topic}, id="call_1")]
    calls += [
        tool_call("publish", {"title": title}, id=f"call_{i}")
        for i, title in enumerate(titles or ("Tides",), start=2)
    ]
    return Reply(text=thought, tool_calls=calls)


def writer(name: str, model: ScriptedModel, **options: Any) -> ReActAgent:
    return ReActAgent(
        name, model, description="Researches and publishes.", tools=[lookup, publish], **options
    )


Built = tuple[Agent, list[ScriptedModel]]


@dataclass
class Case:
    build: Callable[[], Built]
    once: dict[str, int]  # marker -> copies saved before (the history, and each conversation)
    kept: tuple[str, ...] = ()  # never emitted: saved once, in the agent's state, before and now
    dropped: tuple[str, ...] = ()  # the system prompt: saved once before, not now (rendered again)
    resumes: tuple[Any, ...] = (True,)  # resume data, one pause after another
    streaming: bool = False
    answers_after: bool = True  # a model is asked again after the resume


def root_agent() -> Built:
    model = ScriptedModel([research(), "published it"])
    return writer("solo", model), [model]


def in_sequence() -> Built:
    planner = ScriptedModel([f"{INTRO} plan: research, then publish"])
    model = ScriptedModel([research(), "published it"])
    agent = SequentialAgent("pipeline", [ReActAgent("planner", planner), writer("writer", model)])
    return agent, [planner, model]


def in_supervisor() -> Built:
    transfer = tool_call("transfer_to_agent", {"agent_name": "writer"}, id="call_t")
    boss = ScriptedModel([Reply(text=BOSS, tool_calls=[transfer]), "the article is out"])
    model = ScriptedModel([research(), "published it"])
    return Supervisor(ReActAgent("boss", boss), [writer("writer", model)]), [boss, model]


def in_a_loop() -> Built:
    """The second iteration reads the first one's answer as its own (same agent, another run
    path) and pauses."""
    model = ScriptedModel(["FIRST-PASS-MARK nothing to publish yet", research(), "published it"])
    return LoopAgent("rounds", [writer("writer", model)], max_iterations=2), [model]


def in_parallel() -> Built:
    """Two writers pause in parallel branches, one after a planner of its own. On resume the merged
    history interleaves the branches' messages, so neither the planner's message nor a writer's
    own ones are where that writer's branch had them."""
    first = ScriptedModel([research("THOUGHT-MARK-a", "alpha"), "a published"])
    planner = ScriptedModel([f"{INTRO} plan for b"])
    second = ScriptedModel([research("THOUGHT-MARK-b", "beta"), "b published"])
    planned = SequentialAgent(
        "planned", [ReActAgent("planner", planner), writer("writer_b", second)]
    )
    team = ParallelAgent("team", [writer("writer_a", first), planned])
    return team, [first, planner, second]


def in_agent_tool() -> Built:
    inner = ScriptedModel([research(), "published it"])
    call = tool_call("researcher", {"request": "tides, please"}, id="call_r")
    outer = ScriptedModel([Reply(text=OUTER, tool_calls=[call]), "the desk is done"])
    desk = ReActAgent("desk", outer, tools=[AgentTool(writer("researcher", inner))])
    return desk, [outer, inner]


def in_a_plan_execute_role() -> Built:
    """A workflow as PlanExecute's executor: its agents read the step prompt (their lane's root,
    not the run's input) and the step's own messages, and the writer pauses after the intro's
    message. Its input is rebuilt from the step prompt, which the step renders again from the
    state it saved, so the intro's message is not saved a second time in the writer's state."""
    planner = ScriptedModel(['{"steps": ["research tides and publish"]}'])
    intro = ScriptedModel([f"{INTRO} research first, then publish"])
    model = ScriptedModel([research(), "published it"])
    replanner = ScriptedModel(["the article is out"])
    executor = SequentialAgent("executor", [ReActAgent("intro", intro), writer("writer", model)])
    agent = PlanExecute(new_planner(planner), executor, new_replanner(replanner))
    return agent, [planner, intro, model, replanner]


class Verdict(BaseModel):
    text: str


def after_a_retry() -> Built:
    """The structured-output retry prompt is never emitted: it is kept as a message."""
    model = ScriptedModel(["not JSON at all", research(), '{"text": "published"}'])
    agent = writer("solo", model, instruction=f"{SYSTEM} Research, then publish.")
    agent.output_schema = Verdict
    return agent, [model]


def holding_a_result() -> Built:
    """A return-directly result waits, unemitted, until the round ends after the last resume; the
    model is not asked again, so the events show that it was kept."""
    model = ScriptedModel([research(THOUGHT, "tides", "Alpha", "Beta")])
    return writer("solo", model, return_directly=["lookup"]), [model]


def pausing_twice() -> Built:
    """Resuming one of two approvals pauses again: the resumed agent saves its state again."""
    model = ScriptedModel([research(THOUGHT, "tides", "Alpha", "Beta"), "both published"])
    return writer("solo", model), [model]


def with_a_rewriter() -> Built:
    """A history rewriter is user code: the input it made is kept as it was, not rebuilt."""

    def rewriter(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
        return [*default_rewriter(entries, agent_name), Message.user("(rewritten)")]

    planner = ScriptedModel([f"{INTRO} plan"])
    model = ScriptedModel([research(), "published it"])
    agent = writer("writer", model, history_rewriter=rewriter)
    return SequentialAgent("pipeline", [ReActAgent("planner", planner), agent]), [planner, model]


RESULT = "RESULT-MARK-tides"


def twice(*markers: str) -> dict[str, int]:
    return dict.fromkeys(markers, 2)


CASES = {
    "root agent": Case(root_agent, once=twice(INPUT, THOUGHT, RESULT)),
    "sequential": Case(in_sequence, once=twice(INPUT, INTRO, THOUGHT, RESULT)),
    "sequential streaming": Case(
        in_sequence, once=twice(INPUT, INTRO, THOUGHT, RESULT), streaming=True
    ),
    "supervisor": Case(in_supervisor, once=twice(INPUT, BOSS, THOUGHT, RESULT)),
    "loop": Case(in_a_loop, once=twice(INPUT, "FIRST-PASS-MARK", THOUGHT, RESULT)),
    "parallel": Case(
        in_parallel,
        once={
            INPUT: 3,
            **twice(INTRO, "THOUGHT-MARK-a", "THOUGHT-MARK-b"),
            **twice("RESULT-MARK-alpha", "RESULT-MARK-beta"),
        },
        resumes=({"agent:team/agent:planned/agent:writer_b/tool:publish#call_2": True}, True),
    ),
    "agent tool": Case(in_agent_tool, once=twice(INPUT, OUTER, THOUGHT, RESULT)),
    # The tool's result is also the executor role's last output text, which the role saves.
    "plan-execute workflow role": Case(in_a_plan_execute_role, once=twice(INTRO, THOUGHT)),
    "structured output retry": Case(
        after_a_retry, once=twice(INPUT, THOUGHT, RESULT), kept=(RETRY,), dropped=(SYSTEM,)
    ),
    "held return-directly result": Case(
        holding_a_result,
        once=twice(INPUT, THOUGHT, RESULT),  # before: in the conversation and the held results
        resumes=({"agent:solo/tool:publish#call_3": True}, True),
        answers_after=False,
    ),
    "pausing twice": Case(
        pausing_twice,
        once=twice(INPUT, THOUGHT, RESULT),
        resumes=({"agent:solo/tool:publish#call_2": True}, True),
    ),
    "history rewriter": Case(with_a_rewriter, once=twice(THOUGHT, RESULT), kept=("(rewritten)",)),
}


@dataclass
class Trace:
    checkpoints: list[bytes] = field(default_factory=list)  # as stored, one per pause
    events: list[list[str]] = field(default_factory=list)  # per invocation
    requests: list[list[dict[str, Any]]] = field(default_factory=list)  # what the models saw
    calls_at_pause: int = 0  # model calls before the first resume


async def pause_and_resume(
    case: Case, monkeypatch: pytest.MonkeyPatch, *, legacy: bool, with_prompt: bool = False
) -> Trace:
    """Run the case until it pauses, then resume it until it finishes, recording everything.

    ``legacy`` writes the first checkpoint as the earliest versions did (the whole conversation),
    ``with_prompt`` as versions that saved the system prompt in ``head`` did; resuming it and any
    later pause always use the current code."""
    agent, models = case.build()
    store = InMemoryCheckpointStore()
    runner = Runner(agent, checkpoint_store=store, enable_streaming=case.streaming)
    trace = Trace()
    monkeypatch.setattr(_react_state, "_SAVE_WHOLE_CONVERSATION", legacy)
    monkeypatch.setattr(_react_state, "_SAVE_SYSTEM_PROMPT", with_prompt)
    result = await runner.invoke(f"{INPUT} research tides and publish")
    monkeypatch.setattr(_react_state, "_SAVE_WHOLE_CONVERSATION", False)
    monkeypatch.setattr(_react_state, "_SAVE_SYSTEM_PROMPT", False)
    trace.events.append(simplify_events(result.events))
    trace.calls_at_pause = sum(model.calls for model in models)
    for data in case.resumes:
        assert result.checkpoint_id is not None and result.interrupt is not None
        stored = await store.get(result.checkpoint_id)
        assert stored is not None
        trace.checkpoints.append(stored)
        result = await runner.invoke_resume(result.checkpoint_id, data)
        trace.events.append(simplify_events(result.events))
    assert result.interrupt is None
    trace.requests = [
        [m.model_dump(mode="json") for m in request.messages]
        for model in models
        for request in model.requests
    ]
    return trace


def react_states(checkpoint: bytes) -> list[dict[str, Any]]:
    """The saved states of the paused ReAct agents (raw JSON, by their ``iterations`` key)."""
    states = decode_checkpoint(checkpoint)["states"]
    return [
        slot
        for slots in states.values()
        for slot in slots.values()
        if isinstance(slot, dict) and "iterations" in slot
    ]


@pytest.mark.parametrize("name", list(CASES))
async def test_checkpoint_holds_the_conversation_once_and_resumes_the_same(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[name]
    before = await pause_and_resume(case, monkeypatch, legacy=True)
    after = await pause_and_resume(case, monkeypatch, legacy=False)

    # The old format still resumes, and the new one resumes to exactly the same conversation.
    assert all("messages" in s for s in react_states(before.checkpoints[0]))
    assert after.requests == before.requests
    assert after.events == before.events
    if case.answers_after:  # the rebuilt conversation went to a model
        assert len(after.requests) > after.calls_at_pause

    for checkpoint in after.checkpoints:
        states = react_states(checkpoint)
        assert states and all("messages" not in s for s in states)
    first_before, first_after = before.checkpoints[0], after.checkpoints[0]
    for marker, copies in case.once.items():
        assert first_before.count(marker.encode()) == copies, marker
        for checkpoint in after.checkpoints:
            assert checkpoint.count(marker.encode()) == 1, marker
    for marker in case.kept:
        assert first_before.count(marker.encode()) == 1, marker
        assert first_after.count(marker.encode()) == 1, marker
    for marker in case.dropped:
        assert first_before.count(marker.encode()) == 1, marker
        for checkpoint in after.checkpoints:
            assert checkpoint.count(marker.encode()) == 0, marker
    assert len(first_after) < len(first_before)


@pytest.mark.parametrize("name", list(CASES))
async def test_a_checkpoint_that_saved_the_system_prompt_resumes_the_same(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The previous version's state: the system prompt first in ``head`` (then the input, when
    it was not derivable), held results counted from it. Its prompt is replaced by the one the
    instruction renders now, here the same, so the models see what they would have seen."""
    case = CASES[name]
    before = await pause_and_resume(case, monkeypatch, legacy=False, with_prompt=True)
    after = await pause_and_resume(case, monkeypatch, legacy=False)

    assert all("head" in s and "given" not in s for s in react_states(before.checkpoints[0]))
    assert after.requests == before.requests
    assert after.events == before.events
    first = react_states(before.checkpoints[0])
    for checkpoint in before.checkpoints[1:]:  # an agent that paused again saved as now
        assert all("given" in s or s in first for s in react_states(checkpoint))
    for marker in case.dropped:
        assert before.checkpoints[0].count(marker.encode()) == 1, marker


async def test_a_long_conversation_does_not_grow_the_saved_state() -> None:
    """Fifty tool rounds before the pause: the agent's own state stays a few hundred bytes."""
    rounds = [
        Reply(text="thinking " * 20, tool_calls=[tool_call("lookup", {"topic": f"t{i}"}, f"r{i}")])
        for i in range(50)
    ]
    model = ScriptedModel([*rounds, research(), "published it"])
    store = InMemoryCheckpointStore()
    runner = Runner(writer("solo", model, max_iterations=60), checkpoint_store=store)
    paused = await runner.invoke(f"{INPUT} research tides and publish")
    assert paused.checkpoint_id is not None
    stored = await store.get(paused.checkpoint_id)
    assert stored is not None
    (state,) = react_states(stored)
    assert len(repr(state)) < 500
    assert stored.count(INPUT.encode()) == 1
    done = await runner.invoke_resume(paused.checkpoint_id, True)
    assert done.text == "published it"
    assert len(model.requests[-1].messages) == 1 + 50 * 2 + 3  # input, rounds, the last round


async def test_a_checkpoint_whose_history_lost_the_messages_fails_clearly_and_keeps() -> None:
    model = ScriptedModel([research(), "published it"])
    store = InMemoryCheckpointStore()
    runner = Runner(writer("solo", model), checkpoint_store=store)
    paused = await runner.invoke(f"{INPUT} research tides and publish")
    assert paused.checkpoint_id is not None
    original = await store.get(paused.checkpoint_id)
    assert original is not None
    async with rewrite_checkpoint(store, paused.checkpoint_id) as body:
        body["history"] = body["history"][:1]  # the tool result is gone

    with pytest.raises(adk.RunError, match="cannot rebuild its conversation") as failed:
        await runner.invoke_resume(paused.checkpoint_id, True)
    assert isinstance(failed.value.__cause__, CheckpointError)
    assert "history holds 1 messages of 'solo', the conversation needs 2" in str(failed.value)
    assert model.calls == 1  # nothing ran: the model was not asked again

    await store.put(paused.checkpoint_id, original)  # the intact checkpoint still resumes
    done = await runner.invoke_resume(paused.checkpoint_id, True)
    assert done.text == "published it"


async def test_a_malformed_state_is_a_clear_error() -> None:
    model = ScriptedModel([research(), "published it"])
    store = InMemoryCheckpointStore()
    runner = Runner(writer("solo", model), checkpoint_store=store)
    paused = await runner.invoke("research tides and publish")
    assert paused.checkpoint_id is not None
    async with rewrite_checkpoint(store, paused.checkpoint_id) as body:
        body["states"]["agent:solo"][""]["tail"] = ["three"]
    with pytest.raises(adk.RunError, match="'three' is not a valid count or position"):
        await runner.invoke_resume(paused.checkpoint_id, True)
