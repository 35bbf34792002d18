"""A paused call's point id names one call of its conversation (its input included, so a
``LoopAgent``'s next iteration too; a ``Supervisor``'s worker asked again is in
tests/test_app_supervisor.py), never two.

A model (a server numbering each response's calls ``call_0``, or a scripted one giving each
reply's call the same id) could give its next call the id of the call just answered: that call
paused under the same point id, so an approval keyed by that id and sent twice (a double click,
a retried webhook) approved the next call, which nobody was shown. A call whose id an earlier
call of the conversation holds now gets one of its own (``<id>-<n>``): in a ``ReActAgent``
(streamed or not, nested in an ``AgentTool`` too) and in an ``ActionAgent``'s chat. The wire
cases (a real OpenAI-protocol server) are in tests/test_app_back_office.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import adk
from adk import AgentTool, LoopAgent, Message, Resources, Role, Runner, run_messages
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    action,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

PAID: list[str] = []
PAYEES = ["bob", "eve", "carol"]


@pytest.fixture(autouse=True)
def _nothing_paid_yet() -> None:
    PAID.clear()


@adk.tool(require_approval=True)
def settle(payee: str, cents: int) -> str:
    """Settle."""
    PAID.append(payee)
    return f"settled {cents} with {payee}"


def _same_id_each_reply(messages: list[Message]) -> Any:
    """Settles with each payee in turn, every call under the id ``c1``, then answers."""
    done = sum(m.role == Role.TOOL for m in messages)
    if done < len(PAYEES):
        return Reply(tool_calls=[tool_call("settle", {"payee": PAYEES[done], "cents": 5}, id="c1")])
    return Reply(text="all settled")


async def _double_click(runner: Runner, first: str, second: str) -> None:
    """Pause at ``first``; approve it keyed by its id; the model's next call pauses at
    ``second``; the same approval sent again is refused, nothing paid."""
    paused = await runner.invoke("settle", checkpoint_id="cid")
    assert paused.interrupt is not None and paused.interrupt.point_ids == [first]
    again = await runner.invoke_resume("cid", {first: True})
    assert again.interrupt is not None and again.interrupt.point_ids == [second]
    assert again.interrupt.points[0].info["arguments"]["payee"] == "eve"
    assert PAID == ["bob"]
    with pytest.raises(ValueError, match="already answered by an earlier resume"):
        await runner.invoke_resume("cid", {first: True})  # the same click again
    assert PAID == ["bob"]
    assert [entry.point_ids for entry in await runner.pending()] == [[second]]


@pytest.mark.parametrize("streaming", [False, True], ids=["generated", "streamed"])
async def test_a_react_agents_next_call_under_the_same_id_pauses_at_a_point_of_its_own(
    streaming: bool,
) -> None:
    runner = Runner(
        ReActAgent("payables", ScriptedModel(_same_id_each_reply), tools=[settle]),
        InMemoryCheckpointStore(),
        enable_streaming=streaming,
    )
    point = "agent:payables/tool:settle#"
    await _double_click(runner, point + "c1", point + "c1-1")
    third = await runner.invoke_resume("cid", {point + "c1-1": True})
    assert third.interrupt is not None and third.interrupt.point_ids == [point + "c1-2"]
    events = runner.resume("cid", {point + "c1-2": True})
    async for _ in events:
        pass
    assert PAID == PAYEES
    # The history the model was sent has each call once, each result paired with its own call.
    messages = run_messages(events)
    calls = [call.id for m in messages for call in m.tool_calls]
    results = [m.tool_call_id for m in messages if m.role == Role.TOOL]
    assert calls == results == ["c1", "c1-1", "c1-2"]


async def test_a_streamed_replys_event_encoded_as_its_stream_ends_carries_the_calls_own_id() -> (
    None
):
    """A service sends each streaming event's chunks, then ``event.to_dict()`` as soon as its
    stream is read (docs/service.md, examples/streaming_service.py), before the run moves on:
    the joined message it encodes carries the id the call pauses, and is answered, under; else
    a client pairing results with calls by id showed eve's result under bob's call."""
    runner = Runner(
        ReActAgent("payables", ScriptedModel(_same_id_each_reply), tools=[settle]),
        InMemoryCheckpointStore(),
        enable_streaming=True,
    )
    point = "agent:payables/tool:settle#"
    calls: list[str] = []
    results: list[str] = []
    resume: dict[str, bool] | None = None
    for _ in PAYEES:
        events = runner.run("settle", checkpoint_id="cid") if resume is None else None
        events = events or runner.resume("cid", resume)
        async for event in events:
            stream = event.output.stream if event.output is not None else None
            if stream is not None:
                async for _chunk in stream:
                    pass
            encoded = event.to_dict()
            message = (encoded.get("output") or {}).get("message") or {}
            calls += [call["id"] for call in message.get("tool_calls") or []]
            if message.get("role") == "tool":
                results.append(message["tool_call_id"])
            if event.action is not None and event.action.interrupted is not None:
                resume = {event.action.interrupted.points[0].id: True}
    assert calls == ["c1", "c1-1", "c1-2"]
    assert results == ["c1", "c1-1"]
    assert resume == {point + "c1-2": True}


async def test_an_agent_tools_inner_call_under_the_same_id_pauses_at_a_point_of_its_own() -> None:
    inner = ReActAgent(
        "payables", ScriptedModel(_same_id_each_reply), tools=[settle], description="Pays."
    )

    def outer(messages: list[Message]) -> Any:
        if messages[-1].role == Role.TOOL:
            return Reply(text=messages[-1].content)
        return Reply(tool_calls=[tool_call("payables", {"request": "settle"}, id="o1")])

    runner = Runner(
        ReActAgent("desk", ScriptedModel(outer), tools=[AgentTool(inner)]),
        InMemoryCheckpointStore(),
    )
    point = "agent:desk/tool:payables#o1/agent:payables/tool:settle#"
    await _double_click(runner, point + "c1", point + "c1-1")


SENT: list[list[Message]] = []


def _one_payee_a_reply(messages: list[Message]) -> Any:
    """Settles with the next payee under the id ``c1``, then answers once its result is in."""
    SENT.append(list(messages))
    if messages[-1].role == Role.TOOL:
        return Reply(text="settled")
    done = sum(m.role == Role.TOOL for m in messages)
    return Reply(tool_calls=[tool_call("settle", {"payee": PAYEES[done], "cents": 5}, id="c1")])


async def test_a_loops_next_iteration_under_the_same_id_pauses_at_a_point_of_its_own() -> None:
    """A ``LoopAgent``'s next iteration has the earlier one's call (``c1``, the same address: a
    loop's iterations do not grow it) in its input: its call under that id gets one of its own,
    else the approval sent twice approved eve."""
    runner = Runner(
        LoopAgent(
            "loop",
            [ReActAgent("payables", ScriptedModel(_one_payee_a_reply), tools=[settle])],
            max_iterations=2,
        ),
        InMemoryCheckpointStore(),
    )
    point = "agent:loop/agent:payables/tool:settle#"
    await _double_click(runner, point + "c1", point + "c1-1")
    done = await runner.invoke_resume("cid", {point + "c1-1": True})
    assert done.interrupt is None and PAID == ["bob", "eve"]
    # eve's result carries her call's id, and the model was sent each call paired with its own
    messages = [e.output.message for e in done.events if e.output and e.output.message]
    assert [m.tool_call_id for m in messages if m.role == Role.TOOL] == ["c1-1"]
    sent = SENT[-1]
    calls = [call.id for m in sent for call in m.tool_calls]
    assert calls == [m.tool_call_id for m in sent if m.role == Role.TOOL] == ["c1", "c1-1"]


class _Desk(ActionAgent):
    """An event-driven agent whose chat settles with each payee under the id ``c1``."""

    def __init__(self) -> None:
        resources = Resources()
        resources.add_model("m", ScriptedModel(_same_id_each_reply))
        resources.add_tool(settle)
        super().__init__("desk", resources=resources)

    @action(InputEvent)
    async def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        messages = [Message.user(event.input)]
        ctx.send_event(ChatRequestEvent(model="m", messages=messages, tools=["settle"]))

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))


async def test_an_action_agents_next_call_under_the_same_id_pauses_at_a_point_of_its_own() -> None:
    runner = Runner(_Desk(), InMemoryCheckpointStore())
    paused = await runner.invoke("settle", checkpoint_id="probe")
    assert paused.interrupt is not None
    [first] = paused.interrupt.point_ids
    assert first.endswith("/tool:settle#c1")
    await runner.aclose()
    PAID.clear()
    runner = Runner(_Desk(), InMemoryCheckpointStore())
    await _double_click(runner, first, first + "-1")


class _TwoChats(ActionAgent):
    """Asks its model once for bob, then, bob's chat answered, once more for eve: two chats of
    one run whose model calls ``settle`` under the id ``c1`` in each."""

    def __init__(self) -> None:
        resources = Resources()
        resources.add_model("m", ScriptedModel(_settle_the_one_asked))
        resources.add_tool(settle)
        super().__init__("desk", resources=resources)

    @action(InputEvent)
    async def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(
            ChatRequestEvent(model="m", messages=[Message.user("bob")], tools=["settle"])
        )

    @action(ChatResponseEvent)
    @staticmethod
    def answer(event: ChatResponseEvent, ctx: ActionContext) -> None:
        if PAID == ["bob"]:
            ctx.send_event(
                ChatRequestEvent(model="m", messages=[Message.user("eve")], tools=["settle"])
            )
        else:
            ctx.send_event(OutputEvent(output=event.response.content))


def _settle_the_one_asked(messages: list[Message]) -> Any:
    if messages[-1].role == Role.TOOL:
        return Reply(text="settled")
    payee = messages[-1].content
    return Reply(tool_calls=[tool_call("settle", {"payee": payee, "cents": 5}, id="c1")])


async def test_an_action_agents_later_chat_under_the_same_id_pauses_at_a_point_of_its_own() -> None:
    """The chats of one run pause at the same address (the tool action's): the second chat's
    call under the first one's id gets one of its own (the first chat resumed from its pause,
    so the run's ids are read from what the resume restored), else the approval of bob's call
    sent twice approved eve's."""
    runner = Runner(_TwoChats(), InMemoryCheckpointStore())
    point = "agent:desk/action:builtin.tools/tool:settle#"
    await _double_click(runner, point + "c1", point + "c1-1")
    done = await runner.invoke_resume("cid", {point + "c1-1": True})
    assert done.text == "settled" and PAID == ["bob", "eve"]


class _DeskAskedAgain(_Desk):
    """A chat asked with an earlier chat's call ``c1`` (bob's, settled) in its messages."""

    @action(InputEvent)
    async def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        earlier = tool_call("settle", {"payee": "bob", "cents": 5}, id="c1")
        messages = [
            Message.user(event.input),
            Message.assistant(tool_calls=[earlier]),
            Message.tool("settled 5 with bob", tool_call_id="c1"),
            Message.user("and the next one"),
        ]
        ctx.send_event(ChatRequestEvent(model="m", messages=messages, tools=["settle"]))


async def test_an_action_agents_chat_call_under_an_id_its_request_holds_gets_one_of_its_own() -> (
    None
):
    """The chat's first reply calls ``c1`` again, which the request's messages hold: it pauses
    at ``#c1-1``, and the chat's history carries each call id once."""
    runner = Runner(_DeskAskedAgain(), InMemoryCheckpointStore())
    paused = await runner.invoke("settle", checkpoint_id="cid")
    assert paused.interrupt is not None
    [point] = paused.interrupt.point_ids
    assert point.endswith("/tool:settle#c1-1")
    assert paused.interrupt.points[0].info["arguments"]["payee"] == "eve"
    again = await runner.invoke_resume("cid", {point: True})
    assert again.interrupt is not None and again.interrupt.point_ids == [point[:-1] + "2"]
    assert again.interrupt.points[0].info["arguments"]["payee"] == "carol"
    done = await runner.invoke_resume("cid", {point[:-1] + "2": False})
    assert done.interrupt is None and PAID == ["eve"]


FIXTURE = Path(__file__).parent / "fixtures" / "main_0039c81_reused_call_id_pause.ckpt"
"""Saved by pyadk 0039c81 (before calls got ids of their own in a run): the agent of
``test_a_react_agents_next_call...`` paused for eve's call under bob's point id, ``#c1``, after
a resume keyed ``{'...#c1': True}``."""


async def test_a_pause_saved_under_a_reused_id_resumes_by_its_old_point_id() -> None:
    """A checkpoint saved before: listed, and answered, by the point id it was saved with;
    the model's next call under that id then pauses at a point of its own."""
    store = InMemoryCheckpointStore()
    await store.put("old-1", FIXTURE.read_bytes())
    runner = Runner(
        ReActAgent("payables", ScriptedModel(_same_id_each_reply), tools=[settle]), store
    )
    point = "agent:payables/tool:settle#c1"
    assert [entry.point_ids for entry in await runner.pending()] == [[point]]
    third = await runner.invoke_resume("old-1", {point: True})
    assert PAID == ["eve"]
    assert third.interrupt is not None and third.interrupt.point_ids == [point + "-1"]
    assert third.interrupt.points[0].info["arguments"]["payee"] == "carol"
    done = await runner.invoke_resume("old-1", {point + "-1": False})
    assert done.text == "all settled" and PAID == ["eve"]


async def test_an_action_agents_streamed_chat_encoded_as_its_stream_ends_carries_the_calls_own_id() -> (
    None
):
    """A streaming run shows each chat's reply as it comes (``chat_streamed``); a service
    encodes that event as soon as its stream is read, before the action goes on: the joined
    message it sends carries the id the call pauses under, as a ``ReActAgent``'s does, else the
    client shown eve's call under ``c1`` is asked to approve ``#c1-1``, a call it never saw."""
    runner = Runner(_TwoChats(), InMemoryCheckpointStore(), enable_streaming=True)
    point = "agent:desk/action:builtin.tools/tool:settle#"
    calls: list[str] = []
    points: list[str] = []
    resume: dict[str, bool] | None = None
    for _ in range(3):
        events = runner.run("settle", checkpoint_id="cid") if not points else None
        events = events or runner.resume("cid", resume or {})
        resume = None
        async for event in events:
            stream = event.output.stream if event.output is not None else None
            if stream is not None:
                async for _chunk in stream:
                    pass
            message = (event.to_dict().get("output") or {}).get("message") or {}
            calls += [call["id"] for call in message.get("tool_calls") or []]
            if event.action is not None and event.action.interrupted is not None:
                points.append(event.action.interrupted.points[0].id)
                resume = {points[-1]: True}
        if resume is None:
            break
    assert points == [point + "c1", point + "c1-1"]
    assert calls == ["c1", "c1-1"]
    assert PAID == ["bob", "eve"]
