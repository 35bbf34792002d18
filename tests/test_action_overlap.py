"""The built-in chat's model calls for events queued together overlap (an LLM grader per passage),
while the responses are processed in the order the requests were sent.

The wire server's ``hold`` keeps the first N requests waiting until all N have arrived: chats
made one after the other never get there (the first waits for the others), so a run that does
not overlap them fails on the guard's timeout, which only detects the hang."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from conftest import wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as WireReply
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from span_capture import exporter_fixture, provider_fixture  # noqa: F401  (fixtures)

from adk import Interrupt, MaxTurnsExceeded, Message, Resources, Role, Runner, tool
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    action,
)
from adk.actions._run import _ActionRun
from adk.checkpoint import InMemoryCheckpointStore
from adk.models import RetryPolicy
from adk.testing import ScriptedModel

HANG = 10.0  # seconds: a guard against the hang of chats that do not overlap, not a timing


@tool
def score(passage: str) -> int:
    """Score a passage."""
    return len(passage)


class Grader(ActionAgent):
    """Sends one chat per passage; outputs each grade as its response is processed."""

    @action(InputEvent)
    @staticmethod
    def grade_all(event: InputEvent, ctx: ActionContext) -> None:
        tools = ["score"] if ctx.run_context.options.get("with_tool") else []
        for passage in str(event.input).split():
            ctx.send_event(
                ChatRequestEvent(model="m", messages=[Message.user(passage)], tools=tools)
            )

    @action(ChatResponseEvent)
    @staticmethod
    def grade(event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


def _answer(body: Any) -> WireReply:
    """A grade for the passage asked about; with a tool offered, a call of it first."""
    messages = body["messages"]
    passage = messages[0]["content"]
    if body.get("tools") and messages[-1]["role"] != "tool":
        return WireReply(tool_calls=[Call("score", f'{{"passage": "{passage}"}}')])
    return WireReply(text=f"{passage}: good")


@asynccontextmanager
async def _grader(server: OpenAIServer) -> AsyncIterator[tuple[Grader, Any]]:
    """The grader over ``server``'s model, and the model, closed at the end of the block."""
    model = wire_model(server, name="m")
    resources = Resources()
    resources.add_model("m", model)
    resources.add_tool(score)
    try:
        yield Grader("grader", resources=resources), model
    finally:
        await model.aclose()


@pytest.mark.parametrize("with_tool", [False, True])
async def test_chats_queued_together_are_in_flight_at_once_and_answered_in_request_order(
    with_tool: bool,
) -> None:
    # With a tool, each chat's second round (its tool's result read) overlaps too.
    async with (
        OpenAIServer(respond=_answer, hold=(3, 3) if with_tool else 3) as server,
        _grader(server) as (agent, _),
    ):
        result = await asyncio.wait_for(
            Runner(agent).invoke("alpha beta gamma", options={"with_tool": with_tool}), HANG
        )
    # The outputs are in the order the requests were sent, whatever order they were answered in.
    assert [e.message.content for e in result.events if e.message] == [
        "alpha: good",
        "beta: good",
        "gamma: good",
    ]
    calls = 6 if with_tool else 3
    assert len(server.requests) == calls  # each chat asked its model once per round, no more
    assert result.usage is not None and result.usage.input_tokens == 11 * calls
    if with_tool:  # each chat's second round read its own tool's result
        tool_results = [
            [m for m in request.body["messages"] if m["role"] == Role.TOOL.value]
            for request in server.requests[3:]
        ]
        assert sorted(r[0]["content"] for r in tool_results) == ["4", "5", "5"]


async def test_max_turns_stops_overlapping_chats_at_the_same_call_as_one_after_the_other() -> None:
    # Two turns left for three chats: the first two are made (together), the third is refused
    # before it reaches the server, as when they ran one after the other.
    async with OpenAIServer(respond=_answer, hold=2) as server, _grader(server) as (agent, _):
        with pytest.raises(MaxTurnsExceeded):
            await asyncio.wait_for(Runner(agent).invoke("alpha beta gamma", max_turns=2), HANG)
    assert [request.body["messages"][0]["content"] for request in server.requests] in (
        ["alpha", "beta"],
        ["beta", "alpha"],
    )


async def test_a_failing_chat_among_overlapping_ones_fails_the_run_naming_it() -> None:
    def answer(body: Any) -> WireReply:
        passage = body["messages"][0]["content"]
        if passage == "beta":
            return WireReply(status=400, error="bad passage")
        return WireReply(text=f"{passage}: good")

    async with OpenAIServer(respond=answer, hold=3) as server, _grader(server) as (agent, _):
        result = await asyncio.wait_for(_events(Runner(agent), "alpha beta gamma"), HANG)
    errors = [e.error for e in result if e.error is not None]
    assert len(errors) == 1 and "bad passage" in str(errors[0])
    assert "builtin.chat" in str(errors[0])
    # The chat before the failing one was answered but its response not yet processed, as when
    # the chats ran one after the other: no output.
    assert not [e for e in result if e.message is not None and e.message.content]


async def _events(runner: Runner, text: str) -> list[Any]:
    return [event async for event in runner.run(text)]


async def test_a_run_cancelled_while_chats_overlap_cancels_every_call_in_flight() -> None:
    async with (
        OpenAIServer(default=WireReply(text="late", delay=30.0)) as server,
        _grader(server) as (agent, _),
    ):
        run = asyncio.ensure_future(Runner(agent).invoke("alpha beta gamma"))
        try:
            await asyncio.wait_for(_until(lambda: server.stalls == 3), HANG)  # all three sent
            run.cancel()
            with pytest.raises(asyncio.CancelledError):
                await run
            # Each call's connection was let go, none left waiting for its reply.
            await asyncio.wait_for(_until(lambda: server.hangups == 3), HANG)
        finally:
            run.cancel()


async def test_a_models_own_interrupt_pauses_a_lone_chat_and_fails_overlapping_ones() -> None:
    # A model call cannot pause through a callback (refused); a model raising Interrupt itself
    # pauses a chat that runs alone, as before, but fails among overlapping chats: the others'
    # replies would have nowhere to be saved with the pause.
    def resources(script: list[Any]) -> Resources:
        found = Resources()
        found.add_model("m", ScriptedModel(script))
        return found

    alone = await Runner(Grader("grader", resources=resources([Interrupt("ask?")]))).invoke("a")
    assert alone.interrupt is not None
    events = [
        event
        async for event in Runner(
            Grader("grader", resources=resources(["a: good", Interrupt("ask?")]))
        ).run("a b")
    ]
    errors = [str(e.error) for e in events if e.error is not None]
    assert len(errors) == 1 and "failed on ChatRequestEvent: Interrupt" in errors[0]
    assert not any(e.action is not None and e.action.interrupted for e in events)


async def _until(condition: Any) -> None:
    while True:
        if condition():
            return
        await asyncio.sleep(0.005)


# -- the same record overlapped and one after the other -------------------------------------------
@tool(require_approval=True)
def audit(passage: str) -> int:
    """Score a passage a person approves first."""
    return 10 * len(passage)


class Keeper(ActionAgent):
    """One chat per passage, offering ``score`` and ``audit``; each grade is noted in short-term
    memory and the notes so far are the output, so that the order responses are processed in
    shows in both."""

    @action(InputEvent)
    @staticmethod
    def grade_all(event: InputEvent, ctx: ActionContext) -> None:
        for passage in str(event.input).split():
            ctx.send_event(
                ChatRequestEvent(
                    model="m", messages=[Message.user(passage)], tools=["score", "audit"]
                )
            )

    @action(ChatResponseEvent)
    @staticmethod
    def grade(event: ChatResponseEvent, ctx: ActionContext) -> None:
        notes = [*ctx.short_term_memory.get("notes", []), event.response.content]
        ctx.short_term_memory.set("notes", notes)
        ctx.send_event(OutputEvent(output=" | ".join(notes)))


# The first passage's answers come last: overlapping replies arrive in reverse request order.
_LATE = {"alpha": 0.06, "beta": 0.03, "gamma": 0.0}


def _reverse_answer(body: Any) -> WireReply:
    """``alpha`` asks for ``audit`` (approval), the others for ``score``; then a grade."""
    messages = body["messages"]
    passage = messages[0]["content"]
    delay = _LATE[passage]
    if messages[-1]["role"] != "tool":
        name = "audit" if passage == "alpha" else "score"
        call = Call(name, f'{{"passage": "{passage}"}}', id=f"c-{passage}")
        return WireReply(tool_calls=[call], delay=delay, response_id=f"r-{passage}-1")
    return WireReply(
        text=f"{passage}: {messages[-1]['content']}", delay=delay, response_id=f"r-{passage}-2"
    )


async def _paused_and_resumed(server: OpenAIServer) -> tuple[Any, Any]:
    store = InMemoryCheckpointStore()
    model = wire_model(server, name="m")
    resources = Resources()
    resources.add_model("m", model)
    resources.add_tool(score)
    resources.add_tool(audit)
    runner = Runner(Keeper("keeper", resources=resources), checkpoint_store=store)
    try:
        paused = await asyncio.wait_for(runner.invoke("alpha beta gamma", checkpoint_id="cp"), HANG)
        assert paused.interrupt is not None
        [point] = paused.interrupt.points
        resumed = await asyncio.wait_for(
            runner.invoke_resume("cp", {point.id: {"approved": True}}), HANG
        )
    finally:
        await model.aclose()
    return paused, resumed


async def test_overlapping_chats_give_what_one_after_the_other_gives_across_a_pause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The replies arrive in reverse order; the first chat's tool round then waits for approval
    while the others' tool rounds are queued behind it: nothing of the others is asked again on
    resume, and outputs, memory, usage and what the model was sent are those of a run that
    made its chats one after the other (the overlap turned off)."""
    runs = []
    for overlap in (True, False):
        if not overlap:
            monkeypatch.setattr(_ActionRun, "_overlaps", lambda self, event: False)
        # Overlapped, the server holds each round's three requests until all have arrived.
        hold = (3, 3) if overlap else 0
        async with OpenAIServer(respond=_reverse_answer, hold=hold) as server:
            paused, resumed = await _paused_and_resumed(server)
        runs.append((paused, resumed, server.requests))
    (paused, resumed, requests), (paused_1, resumed_1, requests_1) = runs
    assert [e.message.content for e in resumed.events if e.message] == [
        "alpha: 50",
        "alpha: 50 | beta: 4",
        "alpha: 50 | beta: 4 | gamma: 5",
    ]
    assert resumed.session["memory:keeper"] == {"notes": ["alpha: 50", "beta: 4", "gamma: 5"]}
    # Each chat's model was asked once per round over pause and resume: three before the pause,
    # three after it (its tool results), none paid twice.
    assert len(requests) == 6
    asked = [(r.body["messages"][0]["content"], len(r.body["messages"])) for r in requests]
    assert sorted(asked) == sorted({(p, n) for p in _LATE for n in (1, 3)})
    assert [p.id for p in paused.interrupt.points] == [p.id for p in paused_1.interrupt.points]
    for one, other in ((paused, paused_1), (resumed, resumed_1)):
        assert [e.message.content for e in one.events if e.message] == [
            e.message.content for e in other.events if e.message
        ]
        assert one.usage is not None and one.usage == other.usage
        assert dict(one.session) == dict(other.session)
    assert sorted(json.dumps(r.body, sort_keys=True) for r in requests) == sorted(
        json.dumps(r.body, sort_keys=True) for r in requests_1
    )


async def test_a_chat_failing_first_lets_the_calls_still_in_flight_go_and_leaves_no_task() -> None:
    def answer(body: Any) -> WireReply:
        if body["messages"][0]["content"] == "alpha":
            return WireReply(status=400, error="bad passage")
        return WireReply(text="late", delay=30.0)

    # Held until all three have arrived: the two after it are on the wire when it fails.
    async with OpenAIServer(respond=answer, hold=3) as server, _grader(server) as (agent, _):
        events = await asyncio.wait_for(_events(Runner(agent), "alpha beta gamma"), HANG)
        [error] = [e.error for e in events if e.error is not None]
        assert "bad passage" in str(error)
        # The two calls after it were cancelled: their connections closed, no task left.
        await asyncio.wait_for(_until(lambda: server.hangups == 2), HANG)
        left = [t for t in asyncio.all_tasks() if "generate" in repr(t.get_coro())]
        assert left == []


async def test_a_503_on_one_overlapping_call_is_retried_by_its_model_alone() -> None:
    asked: dict[str, int] = {}

    def answer(body: Any) -> WireReply:
        passage = body["messages"][0]["content"]
        asked[passage] = asked.get(passage, 0) + 1
        if passage == "beta" and asked[passage] == 1:
            return WireReply(status=503, error="busy")
        return WireReply(text=f"{passage}: good")

    async with (
        OpenAIServer(respond=answer, hold=3) as server,
        _grader(server) as (agent, model),
    ):
        model.retry = RetryPolicy(max_attempts=2, initial_delay=0.001, jitter=False)
        result = await asyncio.wait_for(Runner(agent).invoke("alpha beta gamma"), HANG)
    assert [e.message.content for e in result.events if e.message] == [
        "alpha: good",
        "beta: good",
        "gamma: good",
    ]
    assert asked == {"alpha": 1, "beta": 2, "gamma": 1}


@pytest.mark.parametrize("limit", [3, 5, 7])
async def test_max_events_stops_overlapping_chats_where_one_after_the_other_stops(
    limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Input, three requests, three responses: 7 events; at 3 the third request is not taken in,
    # at 5 the second response is not.
    seen = []
    for overlap in (True, False):
        if not overlap:
            monkeypatch.setattr(_ActionRun, "_overlaps", lambda self, event: False)
        async with OpenAIServer(respond=_answer) as server:
            model = wire_model(server, name="m")
            resources = Resources()
            resources.add_model("m", model)
            agent = Grader("grader", resources=resources, max_events=limit)
            try:
                events = await asyncio.wait_for(_events(Runner(agent), "alpha beta gamma"), HANG)
            finally:
                await model.aclose()
        outputs = [e.message.content for e in events if e.message]
        errors = [str(e.error) for e in events if e.error is not None]
        seen.append(
            (outputs, errors, sorted(r.body["messages"][0]["content"] for r in server.requests))
        )
    assert seen[0] == seen[1]
    assert bool(seen[0][1]) == (limit < 7)


async def test_each_overlapping_chat_has_its_span_under_the_agents(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with OpenAIServer(respond=_answer, hold=3) as server, _grader(server) as (agent, _):
        await asyncio.wait_for(
            Runner(agent, tracer_provider=provider).invoke("alpha beta gamma"), HANG
        )
    spans = exporter.get_finished_spans()
    [root] = [s for s in spans if s.name == "invoke_agent grader"]
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 3
    for chat in chats:  # each its own span, a child of the agent's (none of another chat's)
        assert chat.parent is not None and chat.parent.span_id == root.context.span_id
    assert len({chat.context.span_id for chat in chats}) == 3
