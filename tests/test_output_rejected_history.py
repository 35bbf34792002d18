"""An answer a ``ReActAgent`` rejected for not matching its ``output_schema`` leaves the run's
history: the agents after it, ``RunResult.messages`` (the next run's input) and a checkpoint hold
only the corrected answer. Its event still went out (a client drops it at ``OutputRejected``); the
agent's own conversation keeps it, and the retry prompt after it, for the retry and across a
pause."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

import adk
from adk import Runner
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, Supervisor, new_planner, new_replanner


class Article(BaseModel):
    title: str
    words: int


BAD = '{"title": "Tea", "words": "many"}'
GOOD = '{"title": "Tea", "words": 300}'


def _transfer(name: str) -> Reply:
    return Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": name})])


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_supervisor_and_the_next_run_read_only_the_corrected_answer(
    streaming: bool,
) -> None:
    # A CrewAI task with output_pydantic, ported as a worker with output_schema: the manager
    # read the rejected JSON and the corrected one as two answers of the writer, with nothing
    # to tell which one held, and so did the next run given result.messages.
    writer_model = ScriptedModel([BAD, GOOD], chunk_size=5)
    writer = ReActAgent("writer", writer_model, description="Writes.", output_schema=Article)
    manager_model = ScriptedModel([_transfer("writer"), "Published."])
    app = Supervisor(ReActAgent("manager", manager_model), [writer])

    result = await Runner(app, enable_streaming=streaming).invoke("An article on tea.")

    shown = [e.output.message.content for e in result.events if e.output and e.output.message]
    if not streaming:
        assert BAD in shown  # it went out as it came, before it could be checked
    assert writer_model.requests[1].messages[-2].content == BAD  # the retry saw it
    read = [m.content for m in manager_model.requests[1].messages]
    assert read[-1] == f"For context: [writer] said: {GOOD}."
    assert not any(BAD in text for text in read)
    assert not any(BAD in m.content for m in result.messages)


async def test_a_plan_step_passes_on_the_corrected_answer_and_what_follows() -> None:
    # In a PlanExecute role the step passes its entries up as they come: the rejected one had
    # gone up before it was rejected, and taking it out must not make the step skip the next.
    executor_model = ScriptedModel([BAD, GOOD])
    plan_execute = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["write it"]})])),
        ReActAgent("executor", executor_model, output_schema=Article),
        new_replanner(ScriptedModel(["Tea, 300 words."])),
    )
    after = ScriptedModel(["Sent."])
    app = adk.SequentialAgent("crew", [plan_execute, ReActAgent("mailer", after)])

    result = await Runner(app).invoke("An article on tea.")

    assert (
        result.session["executed_steps"][0].result
        == Article(title="Tea", words=300).model_dump_json()
    )
    read = [m.content for m in after.requests[0].messages]
    assert f"For context: [executor] said: {GOOD}." in read
    assert read[-1] == "For context: [replanner] said: Tea, 300 words.."
    assert not any(BAD in text for text in read)


@adk.tool(require_approval=True)
def publish(title: str) -> str:
    """Publish an article."""
    return f"published {title}"


def _publisher(model: ScriptedModel) -> ReActAgent:
    return ReActAgent("publisher", model, tools=[publish], output_schema=Article)


async def test_a_pause_after_the_retry_resumes_on_the_same_conversation(tmp_path: object) -> None:
    # The retry's reply calls a tool that asks a person; a fresh runner resumes from SQLite.
    # The rejected answer is in no history now, so the pause saves it (and the retry prompt)
    # itself: after the resume the model is asked on the conversation it had, the call's
    # result added.
    path = f"{tmp_path}/checkpoints.db"
    call = Reply(tool_calls=[tool_call("publish", {"title": "Tea"}, id="p1")])
    first = ScriptedModel([BAD, call])
    paused = await Runner(_publisher(first), checkpoint_store=SQLiteCheckpointStore(path)).invoke(
        "Publish tea.", checkpoint_id="tea"
    )
    assert paused.interrupt is not None
    assert not any(m.content == BAD for m in paused.messages)

    second = ScriptedModel([GOOD])
    resumer = Runner(_publisher(second), checkpoint_store=SQLiteCheckpointStore(path))
    done = await resumer.invoke_resume("tea", True)

    assert done.output == Article(title="Tea", words=300)
    retry = first.requests[1].messages  # the request, BAD, the retry prompt
    assert [m.content for m in retry[:2]] == ["Publish tea.", BAD] and len(retry) == 3
    resumed = second.requests[0].messages
    assert resumed[:3] == retry
    assert [c.id for c in resumed[3].tool_calls] == ["p1"]
    assert (resumed[4].role, resumed[4].content) == ("tool", "published Tea")
    assert len(resumed) == 5
    assert [m.content for m in done.messages if m.role == "assistant"] == ["", GOOD]
