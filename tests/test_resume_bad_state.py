"""A checkpoint whose saved states do not fit the agents resuming it fails clearly and loses nothing.

The checksum catches bytes that changed after they were written; these tests write well-formed,
correctly checksummed checkpoints whose *content* does not fit: what another version of the code,
a changed agent tree or a buggy writer would leave. Every composite reads its saved state back on
resume (workflow step index and run path, loop iteration, finished parallel branches, the agent a
transfer chain paused in, an ``AgentTool``'s nested run, a ReAct loop's open calls and counters).
A state that does not fit must end the resume with a ``CheckpointError`` naming the component — not
a ``KeyError`` from deep inside, not a resume that quietly starts over or skips the paused step,
and not a tool error that the model is left to work around — and the checkpoint must stay stored,
so the run can still be resumed once the cause is fixed.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest

from adk import (
    Agent,
    AgentTool,
    CheckpointError,
    LoopAgent,
    Message,
    ParallelAgent,
    Role,
    RunError,
    Runner,
    SequentialAgent,
    tool,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import decode_checkpoint, encode_checkpoint, to_json_value
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, new_executor, new_planner, new_replanner


@tool(require_approval=True)
async def pay(amount: int) -> str:
    """Pay an amount (a person approves it first)."""
    return f"paid {amount}"


def _payer(name: str) -> ReActAgent:
    """Calls ``pay`` (which pauses for approval), then answers with the tool's result."""
    return ReActAgent(name, _calling("pay", {"amount": 3}), tools=[pay], description=name)


def _calling(tool_name: str, arguments: dict[str, Any]) -> ScriptedModel:
    """Calls the tool until a tool result comes back, then answers with it (by the conversation,
    not by position: a resumed agent's model is asked again from where the conversation stands)."""

    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"answer: {messages[-1].content}")
        return Reply(tool_calls=[tool_call(tool_name, arguments)])

    return ScriptedModel(reply)


def _workflows() -> Agent:
    """Pauses in its first step; its state names the step, the loop and the parallel branches."""
    return SequentialAgent(
        "steps",
        [
            _payer("first"),
            ParallelAgent("both", [_payer("left"), _payer("right")]),
            LoopAgent("again", [_payer("looped")], max_iterations=2),
        ],
    )


def _transfers() -> Agent:
    """Transfers to ``child``, which pauses inside the agent it calls as a tool."""
    inner = AgentTool(_payer("inner"))
    child = ReActAgent("child", _calling("inner", {"request": "pay"}), tools=[inner])
    root_script = [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "child"})])]
    return ReActAgent("root", ScriptedModel(root_script), sub_agents=[child], description="root")


async def _paused(build: Callable[[], Agent], approvals: int = 0) -> tuple[dict[str, Any], Runner]:
    """A run of ``build()`` paused at its first approval and resumed ``approvals`` times (each
    approving every pending call); the body of its checkpoint, and a runner for another resume."""
    store = InMemoryCheckpointStore()
    runner = Runner(build(), checkpoint_store=store)
    result = await runner.invoke("go", checkpoint_id="good")
    for _ in range(approvals):
        assert result.checkpoint_id == "good"
        result = await runner.invoke_resume("good", _approve_all(result.interrupt))
    assert result.interrupt is not None and result.checkpoint_id == "good"
    data = await store.get("good")
    assert data is not None
    return decode_checkpoint(data, "good"), Runner(build(), checkpoint_store=store)


def _approve_all(interrupt: Any) -> dict[str, Any]:
    return {point.id: {"approved": True} for point in interrupt.points}


async def _resume_with(body: dict[str, Any], runner: Runner) -> CheckpointError:
    """Resume ``body`` saved under a new id, approving its pending calls; the ``CheckpointError``
    it fails with. The checkpoint must still be stored afterwards."""
    store = runner.checkpoint_store
    await store.put("edited", encode_checkpoint(body))
    approvals = {point["id"]: {"approved": True} for point in body["points"]}
    with pytest.raises((RunError, CheckpointError)) as raised:
        await runner.invoke_resume("edited", approvals)
    assert await store.get("edited") is not None, "a failed resume lost the checkpoint"
    error = raised.value
    if isinstance(error, RunError):
        assert isinstance(error.__cause__, CheckpointError), error
        return error.__cause__
    return error


def _done(call_id: str, answers: str | None = None) -> dict[str, Any]:
    """An entry of a ReActAgent's ``done`` as a resume records it, for call ``call_id`` (its
    result answering ``answers``, the same call unless given)."""
    result = Message(role=Role.TOOL, content="paid 3", tool_call_id=answers or call_id)
    entry = {"id": call_id, "tool": "pay", "message": result, "action": None}
    return cast(dict[str, Any], to_json_value(entry, "done"))


def _state(body: dict[str, Any], address_end: str, slot: str = "") -> dict[str, Any]:
    [address] = [a for a in body["states"] if a.endswith(address_end)]
    state: dict[str, Any] = body["states"][address][slot]
    return state


async def test_a_sequence_step_index_past_its_steps() -> None:
    body, runner = await _paused(_workflows)
    _state(body, "agent:steps")["index"] = 7

    error = await _resume_with(body, runner)

    # The index counts the steps the saved run path says this iteration started (one: it paused
    # in its first step), not the steps the workflow has now, which may have changed since.
    assert "workflow 'steps'" in str(error) and "'index'" in str(error) and "below 1" in str(error)


async def test_a_workflow_with_no_saved_state() -> None:
    body, runner = await _paused(_workflows)
    del body["states"]["agent:steps"]

    error = await _resume_with(body, runner)

    assert "workflow 'steps'" in str(error) and "no saved state" in str(error)


async def test_a_loop_iteration_at_its_limit_does_not_skip_the_paused_step() -> None:
    # Without the check the loop saw its limit reached and ended: the run "finished" without the
    # paused call ever being run, and its approval was lost.
    body, runner = await _paused(_workflows, approvals=2)
    assert [p["id"] for p in body["points"]] == [
        "agent:steps/agent:again/agent:looped/tool:pay#call_1"
    ]
    _state(body, "agent:again")["iteration"] = 2

    error = await _resume_with(body, runner)

    assert "workflow 'again'" in str(error) and "'iteration'" in str(error)


async def test_parallel_branches_finished_out_of_range() -> None:
    body, runner = await _paused(_workflows, approvals=1)
    _state(body, "agent:both")["finished"] = [0, 5]

    error = await _resume_with(body, runner)

    assert "workflow 'both'" in str(error) and "'finished'" in str(error)


async def test_a_transfer_chain_paused_in_an_agent_the_tree_no_longer_has() -> None:
    body, runner = await _paused(_transfers)
    _state(body, "agent:root", "flow")["agent"] = "renamed"

    error = await _resume_with(body, runner)

    assert "agent 'root'" in str(error) and "'renamed' is not among" in str(error)


async def test_an_agent_inside_an_agent_tool_that_cannot_resume_fails_the_run_not_the_tool() -> (
    None
):
    body, runner = await _paused(_transfers)
    _state(body, "tool:inner#call_1/agent:inner")["iterations"] = None

    error = await _resume_with(body, runner)

    assert "agent 'inner'" in str(error) and "'iterations'" in str(error)


async def test_an_agent_tool_nested_run_that_cannot_be_read_fails_the_run_not_the_tool() -> None:
    # Caught as a tool failure, the model would have been told "tool 'inner' failed" and carried
    # on: the paused nested run and its approval silently dropped.
    body, runner = await _paused(_transfers)
    _state(body, "tool:inner#call_1")["root_input"] = "go"

    error = await _resume_with(body, runner)

    assert "agent tool 'inner'" in str(error) and "'root_input'" in str(error)


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("iterations", None, "'iterations' must be a whole number"),
        ("open", ["call_9"], "open tool calls ['call_9']"),
        ("open", [], "open tool calls []"),
        ("action", {"exit": "yes"}, "'action' is not a saved action"),
        ("done", "call_1", "'done' is not a list of finished calls"),
        ("done", [{"id": "call_1"}], "'done' holds no finished call"),
        ("done", [_done("call_9")], "'done' names call 'call_9', which is not an open call"),
        ("done", [_done("call_1"), _done("call_1")], "'done' names call 'call_1'"),
        ("done", [_done("call_1", answers="call_9")], "or its result does not answer it"),
        ("done", [{**_done("call_1"), "action": {"exit": 1}}], "'action' is not a saved action"),
    ],
)
async def test_a_react_state_that_does_not_fit(field: str, value: Any, expected: str) -> None:
    body, runner = await _paused(_workflows)
    _state(body, "agent:first")[field] = value

    error = await _resume_with(body, runner)

    assert "agent 'first'" in str(error) and expected in str(error)


async def test_the_checkpoint_still_resumes_after_a_failed_attempt() -> None:
    body, runner = await _paused(_workflows)
    bad = copy.deepcopy(body)
    _state(bad, "agent:steps")["index"] = 7
    await _resume_with(bad, runner)

    result = await runner.invoke_resume("good", {"approved": True})

    assert result.interrupt is not None  # on to the parallel branches' approvals
    assert "answer: paid 3" in [e.message.content for e in result.events if e.message is not None]
    assert {p.id.rsplit("/", 2)[-2] for p in result.interrupt.points} == {
        "agent:left",
        "agent:right",
    }


# -- every field, every wrong shape ---------------------------------------------------------------

_WRONG_VALUES: list[Any] = [None, -1, 10**6, "x", [], {}, [1], {"a": 1}, True, 1.5]
_DELETE = object()


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if path:
        yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*path, index))


def _edited(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    edited = copy.deepcopy(body)
    parent = edited
    for key in path[:-1]:
        parent = parent[key]
    if value is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return edited


@pytest.mark.parametrize("build", [_workflows, _transfers], ids=["workflows", "transfers"])
async def test_every_wrong_field_resumes_or_fails_with_a_checkpoint_error(
    build: Callable[[], Agent],
) -> None:
    """Each field of the body, replaced by each wrong shape or removed: the resume either works
    (some fields are informational) or fails with ``CheckpointError`` — never another exception."""
    body, _ = await _paused(build)
    outcomes: Counter[str] = Counter()
    others: list[str] = []
    for path in _paths(body):
        for value in [*_WRONG_VALUES, _DELETE]:
            runner = Runner(build(), checkpoint_store=InMemoryCheckpointStore())
            await runner.checkpoint_store.put(
                "edited", encode_checkpoint(_edited(body, path, value))
            )
            try:
                result = await runner.invoke_resume("edited")  # no data: edited points need no ids
                told = [e.message.content for e in result.events if e.message is not None]
                # ... and no part of the run was told of a checkpoint error and went on
                assert not [t for t in told if "CheckpointError" in t], (path, value, told)
                outcomes["resumed"] += 1
            except CheckpointError:
                outcomes["CheckpointError"] += 1
            except RunError as exc:
                cause = exc.__cause__
                kind = type(cause).__name__
                if isinstance(cause, CheckpointError):
                    outcomes["CheckpointError"] += 1
                elif kind == "MaxIterationsError" and path[-1] == "iterations":
                    outcomes["MaxIterationsError"] += 1  # a count past the limit: a fitting state
                else:
                    others.append(f"{path} = {value!r}: {exc}")

    assert not others, "\n".join(others)
    assert outcomes["CheckpointError"] > 100 and outcomes["resumed"] > 0, outcomes


async def test_plan_execute_steps_in_the_session_that_are_not_steps() -> None:
    # The session travels in the checkpoint; PlanExecute validated the plan it found there but
    # not the executed steps ("'str' object has no attribute 'step'" from deep inside).
    def app() -> Agent:
        return PlanExecute(
            new_planner(ScriptedModel([json.dumps({"steps": ["pay", "tell"]})])),
            new_executor(_calling("pay", {"amount": 1}), [pay]),
            new_replanner(ScriptedModel(["All done."])),
        )

    body, runner = await _paused(app)
    body["session"]["executed_steps"] = ["paid"]

    await runner.checkpoint_store.put("edited", encode_checkpoint(body))
    with pytest.raises(
        RunError, match=r"session\['executed_steps'\] is not a list of ExecutedStep"
    ):
        await runner.invoke_resume("edited", {"approved": True})


def _plan_execute_paused_in(role: str) -> Callable[[], Agent]:
    """A PlanExecute whose ``role`` pauses (its other roles are model-backed and answer at once)."""

    def build() -> Agent:
        roles: dict[str, Agent] = {
            "planner": new_planner(ScriptedModel([json.dumps({"steps": ["pay"]})])),
            "executor": new_executor(ScriptedModel(["nothing to pay"])),
            "replanner": new_replanner(ScriptedModel(["All done."])),
        }
        roles[role] = _payer(role)
        return PlanExecute(roles["planner"], roles["executor"], roles["replanner"])

    return build


@pytest.mark.parametrize(
    ("role", "field", "value", "expected"),
    [
        ("planner", "objective", 5, "'objective' must be a str, not 5"),
        ("executor", "plan", "pay", "'plan' must be a Plan, not 'pay'"),
        ("executor", "executed", ["paid"], "'executed' must be a list of ExecutedStep"),
        ("executor", "fork", "x", "'fork' must be a whole number from 0, not 'x'"),
        ("replanner", "fork", -1, "'fork' must be a whole number from 0, not -1"),
        ("replanner", "plan", "pay", "'plan' must be a Plan, not 'pay'"),
        ("replanner", "executed", [{"step": "pay"}], "'executed' must be a list of ExecutedStep"),
    ],
)
async def test_a_plan_execute_step_state_that_does_not_fit(
    role: str, field: str, value: Any, expected: str
) -> None:
    # Each step saves at a pause the PlanExecute state it started from, and resumes from it:
    # a PlanExecute its role runs as an AgentTool may have left its own in the session by then.
    body, runner = await _paused(_plan_execute_paused_in(role))
    _state(body, f"agent:{role}", "plan_execute_step")[field] = value

    error = await _resume_with(body, runner)

    assert f"plan-execute role '{role}'" in str(error) and expected in str(error)


async def test_a_paused_replanner_with_steps_in_the_session_that_are_not_steps() -> None:
    body, runner = await _paused(_plan_execute_paused_in("replanner"))
    body["session"]["executed_steps"] = ["paid"]

    await runner.checkpoint_store.put("edited", encode_checkpoint(body))
    with pytest.raises(
        RunError, match=r"session\['executed_steps'\] is not a list of ExecutedStep"
    ):
        await runner.invoke_resume("edited", {"approved": True})
