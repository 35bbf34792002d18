"""``apply(agent, max_turns=)`` in the execution environments: each record's run (and each resume)
has ``Runner.run``'s limit on model calls, so a pipeline can cap a runaway agent per record. It
had no way to set it: an agent that kept calling a tool ran one record without end. A record past
the limit is a failed record under ``on_error``; a resume keeps its pause's limit unless the apply
gives one (as ``Runner.resume``)."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import pytest

import adk
from adk import Interrupt, MaxTurnsExceeded, ToolContext
from adk.checkpoint import InMemoryCheckpointStore
from adk.execution import KeyedOutput, LocalExecutionEnvironment, RecordError
from adk.messages import Message
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


@adk.tool
def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


@adk.tool
def approve(item: str, ctx: ToolContext) -> str:
    """Ask a person to approve an item."""
    if ctx.resume is None:
        raise Interrupt(f"approve {item}?")
    return f"{item}: {ctx.resume.data}"


def _reply(messages: list[Message]) -> Any:
    """A record saying "runaway" keeps looking things up, for ever; one saying "pause" asks for
    an approval first, then runs away; any other is answered at once."""
    asked = next(m.content for m in messages if m.role == "user")
    if "pause" in asked and not any(m.role == "tool" for m in messages):
        return Reply(tool_calls=[tool_call("approve", {"item": "x"}, id="a1")])
    if "runaway" in asked or "pause" in asked:
        return Reply(tool_calls=[tool_call("lookup", {"query": "more"}, id=f"c{len(messages)}")])
    return "answered"


def runaway_agent() -> tuple[ReActAgent, ScriptedModel]:
    model = ScriptedModel(_reply)
    return ReActAgent("agent", model, tools=[lookup, approve]), model


def calls_for(model: ScriptedModel, text: str) -> int:
    """The model calls made for the records whose input holds ``text``."""
    return sum(
        1
        for request in model.requests
        if text in next(m.content for m in request.messages if m.role == "user")
    )


RECORDS = [{"user": "ann", "text": "runaway"}, {"user": "bob", "text": "hello"}]


async def test_a_runaway_record_stops_at_the_limit_and_is_a_failed_output() -> None:
    agent, model = runaway_agent()
    env = LocalExecutionEnvironment(on_error="emit")
    outputs = await env.from_list(RECORDS, key="user").apply(agent, max_turns=3).to_list()

    failed, answered = outputs
    assert failed.key == "ann" and failed.error is not None
    assert failed.error.type == "MaxTurnsExceeded" and "limit of 3" in failed.error.message
    assert calls_for(model, "runaway") == 3  # the fourth was not made
    assert answered.key == "bob" and answered.output == "answered" and answered.error is None


async def test_with_on_error_raise_the_record_error_is_caused_by_max_turns_exceeded() -> None:
    agent, model = runaway_agent()
    env = LocalExecutionEnvironment()
    with pytest.raises(RecordError) as raised:
        await env.from_list(RECORDS[:1], key="user").apply(agent, max_turns=2).to_list()
    assert raised.value.key == "ann" and raised.value.error.type == "MaxTurnsExceeded"
    assert isinstance(raised.value.__cause__, MaxTurnsExceeded)
    assert calls_for(model, "runaway") == 2


async def test_unkeyed_records_have_the_limit_too() -> None:
    agent, model = runaway_agent()
    env = LocalExecutionEnvironment(on_error="emit")
    outputs = await env.from_list(["runaway", "hello"]).apply(agent, max_turns=2).to_list()
    assert [o.error.type if o.error else o.output for o in outputs] == [
        "MaxTurnsExceeded",
        "answered",
    ]
    assert calls_for(model, "runaway") == 2


class _DictStore:
    """A ``SessionStore`` over a dict (the async get/put a Redis or database store has)."""

    def __init__(self) -> None:
        self.kept: dict[Hashable, dict[str, Any]] = {}

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        return self.kept.get(key)

    async def put(self, key: Hashable, values: dict[str, Any]) -> None:
        self.kept[key] = values


async def test_records_with_a_session_store_have_the_limit_too() -> None:
    """The store's path runs a record on its own copy of the key's session: the limit reaches
    it, and the failed record's session is not put."""
    agent, model = runaway_agent()
    store = _DictStore()
    env = LocalExecutionEnvironment(on_error="emit")
    applied = env.from_list(RECORDS, key="user").apply(agent, sessions=store, max_turns=2)
    failed, answered = await applied.to_list()
    assert failed.error is not None and failed.error.type == "MaxTurnsExceeded"
    assert answered.output == "answered"
    assert calls_for(model, "runaway") == 2
    assert "ann" not in store.kept


async def _paused(store: Any, max_turns: int | None) -> KeyedOutput:
    """ann's record, paused for approval after one model call."""
    agent, _ = runaway_agent()
    env = LocalExecutionEnvironment(checkpoint_store=store)
    applied = env.from_list([{"user": "ann", "text": "pause"}], key="user")
    [paused] = await applied.apply(agent, max_turns=max_turns).to_list()
    assert paused.checkpoint_id is not None
    return paused


def _answer(paused: KeyedOutput) -> dict[str, Any]:
    return {
        "key": paused.key,
        "checkpoint_id": paused.checkpoint_id,
        "run_id": paused.run_id,
        "resume": "yes",
    }


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize(
    ("at_pause", "at_resume", "limit"),
    [(3, None, 3), (3, 5, 5), (None, 4, 4)],
)
async def test_a_resume_keeps_its_pauses_limit_unless_the_apply_gives_one(
    at_pause: int | None, at_resume: int | None, limit: int, kept: bool
) -> None:
    """Through ``apply(resumes=)``: the call before the pause counts, under the apply's limit if
    it gives one, else under the paused run's (none saved: the apply's counts from the resume).
    ``kept``: the key has a session, which the resume runs on (the other way a resume runs)."""
    store = InMemoryCheckpointStore()
    paused = await _paused(store, at_pause)
    agent, model = runaway_agent()
    env = LocalExecutionEnvironment(checkpoint_store=store, on_error="emit")
    sessions = {"ann": {"tier": "gold"}} if kept else {}
    resuming = env.from_list([], key="user").apply(
        agent, sessions=sessions, resumes=[_answer(paused)], max_turns=at_resume
    )
    [failed] = await resuming.to_list()

    assert failed.resumed and failed.run_id == paused.run_id
    assert failed.error is not None and failed.error.type == "MaxTurnsExceeded"
    assert f"limit of {limit} " in failed.error.message
    assert model.calls == (limit - 1 if at_pause is not None else limit)


async def test_outputs_resume_has_the_applys_limit_and_raises_as_a_record() -> None:
    store = InMemoryCheckpointStore()
    agent, model = runaway_agent()
    env = LocalExecutionEnvironment(checkpoint_store=store)
    applied = env.from_list([{"user": "ann", "text": "pause"}], key="user").apply(
        agent, max_turns=4
    )
    [paused] = await applied.to_list()
    with pytest.raises(RecordError) as raised:
        await applied.resume(paused, "yes")
    assert isinstance(raised.value.__cause__, MaxTurnsExceeded)
    assert model.calls == 4  # one before the pause, three after it


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (True, TypeError), ("3", TypeError)])
def test_a_bad_max_turns_is_refused_at_apply(value: Any, error: type[Exception]) -> None:
    agent, _ = runaway_agent()
    records = LocalExecutionEnvironment().from_list(RECORDS, key="user")
    with pytest.raises(error, match="max_turns must be a positive int or None"):
        records.apply(agent, max_turns=value)
