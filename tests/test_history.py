"""What each agent sees: root input plus recorded events, other agents' messages rewritten as
"For context: ..." user messages, recording rules, parallel lanes and history_rewriter."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

import pytest
from conftest import ScriptAgent, act_transfer, do, run_events

from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    FlowAgent,
    HistoryEntry,
    LoopAgent,
    Message,
    MessageChunk,
    MessageStream,
    ParallelAgent,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    Session,
    ToolCall,
    with_sub_agents,
)
from adk.testing import ScriptedModel
from prebuilt import ReActAgent


async def test_a_later_step_sees_the_earlier_steps_output_as_context() -> None:
    a, b = ScriptAgent("A", "the answer is 42"), ScriptAgent("B", "ok")
    await run_events(SequentialAgent("seq", [a, b]), "what is it?")
    assert a.inputs == [[Message.user("what is it?")]]
    assert b.inputs == [
        [Message.user("what is it?"), Message.user("For context: [A] said: the answer is 42.")]
    ]


async def test_root_input_is_kept_as_given() -> None:
    b = ScriptAgent("B")
    root = [
        Message.system("rules"),
        Message.user("q1"),
        Message.assistant("a1"),
        Message.user("q2"),
    ]
    await run_events(SequentialAgent("seq", [ScriptAgent("A", "x"), b]), root)
    assert b.inputs[0][:4] == root


async def test_tool_calls_and_results_of_others_are_rewritten() -> None:
    call = ToolCall(id="c1", name="add", arguments='{"a": 1, "b": 2}')
    other = ToolCall(id="c2", name="mul", arguments="{}")
    a = ScriptAgent(
        "A",
        Message.assistant("", [call]),
        Message.tool("3", tool_call_id="c1", name="add"),
        Message.assistant("let me multiply", [other]),
    )
    b = ScriptAgent("B")
    await run_events(SequentialAgent("seq", [a, b]), "sum")
    assert b.inputs[0][1:] == [
        Message.user('For context: [A] called tool: `add` with arguments: {"a": 1, "b": 2}.'),
        Message.user("For context: [A] `add` tool returned result: 3."),
        Message.user(
            "For context: [A] said: let me multiply. [A] called tool: `mul` with arguments: {}."
        ),
    ]


async def test_an_agent_sees_its_own_messages_as_they_are() -> None:
    call = ToolCall(id="c1", name="look", arguments="{}")
    mine = [
        Message.assistant("thinking", [call]),
        Message.tool("found", tool_call_id="c1", name="look"),
    ]
    a = ScriptAgent("A", *mine)
    b = ScriptAgent("B", "B's turn")
    await run_events(LoopAgent("loop", [a, b], max_iterations=2), "go")
    second = a.inputs[1]
    assert second == [
        Message.user("go"),
        *mine,
        Message.user("For context: [B] said: B's turn."),
    ]


async def test_custom_outputs_and_actions_are_not_recorded() -> None:
    a = ScriptAgent("A", lambda ctx: AgentEvent.custom({"n": 1}), "words")
    b = ScriptAgent("B")
    await run_events(SequentialAgent("seq", [a, b]), "q")
    assert b.inputs[0] == [Message.user("q"), Message.user("For context: [A] said: words.")]


async def test_a_stream_is_recorded_as_its_collected_message() -> None:
    async def chunks() -> AsyncIterator[MessageChunk]:
        for part in ("str", "eam", "ed"):
            yield MessageChunk(content=part)

    a = ScriptAgent("A", lambda ctx: AgentEvent.streaming(MessageStream(chunks())))
    b = ScriptAgent("B")
    seen: list[str] = []
    async for event in Runner(SequentialAgent("seq", [a, b])).run("q"):
        if event.output is not None and event.output.stream is not None:
            seen.extend([c.content async for c in event.output.stream])  # the user reads it live
    assert seen == ["str", "eam", "ed"]
    assert b.inputs[0][-1] == Message.user("For context: [A] said: streamed.")


async def test_a_stream_nobody_reads_is_still_recorded() -> None:
    a = ScriptAgent(
        "A", lambda ctx: AgentEvent.streaming(MessageStream([MessageChunk(content="x")]))
    )
    b = ScriptAgent("B")
    async for _ in Runner(SequentialAgent("seq", [a, b])).run("q"):
        pass
    assert b.inputs[0][-1] == Message.user("For context: [A] said: x.")


async def test_parallel_branches_see_their_own_lane_and_the_next_step_sees_all_in_time_order() -> (
    None
):
    x_said, y_said = asyncio.Event(), asyncio.Event()
    # Branch 1 is a sequence: x1, then (after y1 happened in the sibling) x1b; then x2 reads.
    x1 = ScriptAgent("X1", "x1", do(x_said.set), y_said, "x1b")
    x2 = ScriptAgent("X2", "x2")
    y = ScriptAgent("Y", x_said, "y1", do(y_said.set))
    before = ScriptAgent("P0", "before the fork")
    z = ScriptAgent("Z")
    par = ParallelAgent("par", [SequentialAgent("lane", [x1, x2]), y])
    async with asyncio.timeout(5):
        await run_events(SequentialAgent("seq", [before, par, z]), "q")

    def ctx_(who: str, text: str) -> Message:
        return Message.user(f"For context: [{who}] said: {text}.")

    # X2 started after Y said y1, but Y's lane is not its lane.
    assert x2.inputs[0] == [
        Message.user("q"),
        ctx_("P0", "before the fork"),
        ctx_("X1", "x1"),
        ctx_("X1", "x1b"),
    ]
    assert y.inputs[0] == [Message.user("q"), ctx_("P0", "before the fork")]
    # After the fork, the lanes merge in the order things happened (not lane by lane).
    assert z.inputs[0] == [
        Message.user("q"),
        ctx_("P0", "before the fork"),
        ctx_("X1", "x1"),
        ctx_("Y", "y1"),
        ctx_("X1", "x1b"),
        ctx_("X2", "x2"),
    ]


async def test_run_context_history_of_a_branch_excludes_its_siblings() -> None:
    x_said, y_read = asyncio.Event(), asyncio.Event()
    views: dict[str, list[str]] = {}

    def read(who: str) -> Callable[[RunContext], None]:
        def step(ctx: RunContext) -> None:
            views[who] = [m.content for m in ctx.history]
            y_read.set()

        return step

    x = ScriptAgent("X", "from x", do(x_said.set), y_read)
    y = ScriptAgent("Y", x_said, "from y", read("Y"))
    async with asyncio.timeout(5):
        await run_events(ParallelAgent("par", [x, y]))
    assert views["Y"] == ["from y"]


async def test_history_rewriter_on_a_flow_replaces_the_default_rewriting() -> None:
    calls: list[tuple[list[HistoryEntry], str]] = []

    def rewriter(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
        calls.append((list(entries), agent_name))
        return [Message.user(f"{e.agent_name or 'user'}> {e.message.content}") for e in entries]

    a = ScriptAgent("A", "passing you on", act_transfer("B"))
    b = ScriptAgent("B", "fine")
    flow = with_sub_agents(a, [b], history_rewriter=rewriter)
    await run_events(flow, "hello")
    assert b.inputs == [[Message.user("user> hello"), Message.user("A> passing you on")]]
    entries, reader = calls[-1]
    assert reader == "B"
    assert [(e.agent_name, e.is_user_input) for e in entries] == [("", True), ("A", False)]
    assert entries[1].message == Message.assistant("passing you on")


async def test_a_flows_history_rewriter_also_shapes_its_root_agents_input_in_a_workflow() -> None:
    # DESIGN.md: ``history_rewriter=`` on a flow replaces the default rewriting. When the flow is
    # a workflow step its root agent's input is built from history too, so the rewriter applies
    # to it as well (otherwise the same agent sees two different views of the run: the default
    # one when first started, the rewritten one when a sub-agent transfers back to it).
    def rewriter(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
        return [Message.user(f"{agent_name} sees {e.message.content}") for e in entries]

    a = ScriptAgent("A", "a")
    flow = with_sub_agents(a, [ScriptAgent("B")], history_rewriter=rewriter)
    await run_events(SequentialAgent("seq", [ScriptAgent("P", "p"), flow]), "q")
    assert a.inputs == [[Message.user("A sees q"), Message.user("A sees p")]]


async def test_a_stream_that_carries_a_transfer_is_recorded_for_the_target() -> None:
    """The flow lets the driver finish after the transfer, so the stream is recorded."""

    async def chunks() -> AsyncIterator[MessageChunk]:
        for part in ("handing ", "over"):
            await asyncio.sleep(0)
            yield MessageChunk(content=part)

    def stream_and_transfer(ctx: RunContext) -> AgentEvent:
        event = AgentEvent.streaming(MessageStream(chunks()))
        event.action = AgentEvent.transfer("B").action
        return event

    b = ScriptAgent("B", "fine")
    read: list[str] = []
    async for event in Runner(with_sub_agents(ScriptAgent("A", stream_and_transfer), [b])).run(
        "hi"
    ):
        if event.output is not None and event.output.stream is not None:
            read.append((await event.output.stream.collect()).content)
    assert read == ["handing over"]
    assert b.inputs == [[Message.user("hi"), Message.user("For context: [A] said: handing over.")]]


async def test_a_sub_flows_own_rewriter_shapes_what_its_agents_see_when_reached_by_transfer() -> (
    None
):
    def tagged(tag: str) -> Callable[[Sequence[HistoryEntry], str], list[Message]]:
        def rewriter(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
            return [Message.user(f"{tag}:{agent_name}:{e.message.content}") for e in entries]

        return rewriter

    c = ScriptAgent("C", "c says")
    b = with_sub_agents(
        ScriptAgent("B", "b says", act_transfer("C")), [c], history_rewriter=tagged("sub")
    )
    a = ScriptAgent("A", "a says", act_transfer("B"))
    await run_events(with_sub_agents(a, [b], history_rewriter=tagged("root")), "hi")
    assert c.inputs == [
        [Message.user("sub:C:hi"), Message.user("sub:C:a says"), Message.user("sub:C:b says")]
    ]


async def test_a_session_copies_into_a_dict() -> None:
    session = Session({"ab": 1, "cd": 2})
    assert dict(session) == {"ab": 1, "cd": 2}
    assert list(session.items()) == [("ab", 1), ("cd", 2)] and list(session.keys()) == ["ab", "cd"]


async def test_a_flows_rewriter_leaves_an_input_its_parent_made_alone() -> None:
    """The rewriter shapes how an agent reads the history, not what a parent asks of it."""

    def rewriter(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
        return [Message.user("rewritten history")]

    a = ScriptAgent("A", "a")
    flow = with_sub_agents(a, [ScriptAgent("B")], history_rewriter=rewriter)

    class Parent(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            async for event in flow.run(AgentInput([Message.user("STEP: do this")]), ctx):
                yield event

    await run_events(Parent("parent"), "q")
    assert a.inputs == [[Message.user("STEP: do this")]]


async def test_an_empty_reply_of_another_agent_is_read_as_having_said_nothing() -> None:
    """An answer with no text and no tool calls (a model that said nothing, or only reasoned:
    reasoning is not shown to others) became a bare "For context:", a message that told its
    reader nothing, not even that the agent had answered."""
    a = ScriptAgent("A", Message.assistant(""), Message.assistant("", reasoning="hmm"))
    b = ScriptAgent("B")
    await run_events(SequentialAgent("seq", [a, b]), "go")
    assert b.inputs == [
        [
            Message.user("go"),
            Message.user("For context: [A] said nothing."),
            Message.user("For context: [A] said nothing."),
        ]
    ]


class _Says(BaseAgent):
    """Says its lines in turn, one per run."""

    def __init__(self, name: str, *lines: str) -> None:
        super().__init__(name)
        self.lines = list(lines)

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield AgentEvent.of(self.lines.pop(0))


class _MentionFrom(BaseAgent):
    """AutoGen's TextMentionTermination("APPROVE", sources=["critic"]): who said it counts."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__("stop_check")
        self.text, self.source = text, source
        self.seen: list[list[tuple[str, str, bool]]] = []

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        entries = ctx.history_entries
        self.seen.append([(e.agent_name, e.message.content, e.is_user_input) for e in entries])
        last = entries[-1]
        if last.agent_name == self.source and self.text in last.message.content:
            yield AgentEvent.break_loop()


async def test_a_custom_agent_reads_who_said_each_message_of_its_history() -> None:
    # The writer's "APPROVE" must not end the chat: only the critic's does. ctx.history has the
    # messages without their authors, which a termination check or a speaker selector needs.
    writer = _Says("writer", "Draft; APPROVE?", "Draft 2")
    critic = _Says("critic", "Shorter.", "APPROVE")
    stop = _MentionFrom("APPROVE", "critic")
    events = await run_events(LoopAgent("team", [writer, critic, stop], max_iterations=5), "Write.")
    assert [e.action.break_loop for e in events if e.action] == [True]
    assert stop.seen[-1] == [
        ("", "Write.", True),  # the run's input, as a history_rewriter sees it
        ("writer", "Draft; APPROVE?", False),
        ("critic", "Shorter.", False),
        ("writer", "Draft 2", False),
        ("critic", "APPROVE", False),
    ]


async def test_the_authors_of_a_custom_agents_history_survive_a_pause() -> None:
    class Ask(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if ctx.resume is None:
                yield ctx.interrupt("go on?")
                return
            yield AgentEvent.of(
                " ".join(
                    f"{e.agent_name or 'input'}:{e.message.content}" for e in ctx.history_entries
                )
            )

    runner = Runner(SequentialAgent("seq", [_Says("a", "one"), Ask("ask")]))
    paused = await runner.invoke("start")
    assert paused.checkpoint_id is not None
    done = await runner.invoke_resume(paused.checkpoint_id, True)
    assert done.text == "input:start a:one"


def _users_only(entries: Sequence[HistoryEntry]) -> list[Message]:
    """Google ADK's ``include_contents="none"`` ported with one parameter, as a reader of "a
    function of the history entries" writes it."""
    return [e.message for e in entries if e.is_user_input]


@pytest.mark.parametrize(
    "give",
    [
        lambda f: with_sub_agents(ScriptAgent("A"), [ScriptAgent("B")], history_rewriter=f),
        lambda f: FlowAgent(ScriptAgent("A"), history_rewriter=f),
        lambda f: ReActAgent("A", ScriptedModel(["never"]), history_rewriter=f),
    ],
    ids=["with_sub_agents", "FlowAgent", "ReActAgent"],
)
def test_a_rewriter_that_cannot_take_the_entries_and_the_agent_name_is_refused_where_given(
    give: Callable[[object], object],
) -> None:
    """Called, it failed the agent's every start with "takes 1 positional argument but 2 were
    given", naming neither the hook nor what it is called with."""
    with pytest.raises(TypeError, match=r"cannot be called as f\(entries, agent_name\)"):
        give(_users_only)
    with pytest.raises(TypeError, match="history_rewriter must be a function f"):
        give("user input only")


async def test_a_rewriter_that_returns_the_entries_fails_its_agent_saying_to_take_their_messages() -> (
    None
):
    """A list of entries reached the model as its input unchecked: a test model took it, and a
    provider's adapter failed on it far from the rewriter."""

    def users_only(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
        return [e for e in entries if e.is_user_input]  # type: ignore[misc]

    model = ScriptedModel(["never"])
    reader = ReActAgent("reader", model, history_rewriter=users_only)
    with pytest.raises(RunError) as raised:
        await Runner(SequentialAgent("seq", [ScriptAgent("P", "p"), reader])).invoke("q")
    said = raised.value.error.message
    assert "agent 'reader': history_rewriter" in said
    assert "must return a list of Messages, got HistoryEntry among them" in said
    assert "entry.message" in said
    assert model.requests == []


async def test_a_rewriter_that_parts_a_call_from_its_result_is_refused_naming_it() -> None:
    """A rewriter trimming a long conversation to save tokens (here: dropping the tool results)
    parted a model's tool call from its result. Its messages went to the model as they were, and
    a real server answered 400 ("tool_call_ids did not have response messages") naming no
    rewriter, after the request was sent; the run's own input is refused for the same before
    anything runs. The rewriter's answer is checked as that input is: the agent fails naming it,
    and no model is asked."""
    from conftest import wire_model
    from openai_server import OpenAIServer
    from openai_server import Reply as WireReply

    def without_tool_results(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
        return [e.message for e in entries if e.message.role != "tool"]

    earlier = [
        Message.user("1 + 2?"),
        Message.assistant("", [ToolCall(id="call_1", name="add", arguments='{"a": 1, "b": 2}')]),
        Message.tool("3", tool_call_id="call_1", name="add"),
        Message.assistant("3"),
    ]
    async with OpenAIServer([WireReply(text="6")]) as server:
        async with wire_model(server) as model:
            agent = ReActAgent("calc", model, history_rewriter=without_tool_results)
            with pytest.raises(RunError) as failed:
                await Runner(agent).invoke([*earlier, Message.user("Times two?")])
        assert server.requests == []  # refused before the model was asked
    assert isinstance(failed.value.__cause__, ValueError)
    message = str(failed.value)
    assert "agent 'calc': history_rewriter" in message and "without_tool_results" in message
    assert "message 1 (assistant) calls the tool 'add' (call id 'call_1')" in message
    assert "never between a model's tool calls and their results" in message


async def test_a_rewriter_keeping_a_result_without_its_call_is_refused_naming_it() -> None:
    """The other way round: a cut by count that keeps a tool result and drops the call before it."""

    def last_three(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
        return [e.message for e in entries][-3:]

    earlier = [
        Message.user("1 + 2?"),
        Message.assistant("", [ToolCall(id="call_1", name="add", arguments="{}")]),
        Message.tool("3", tool_call_id="call_1", name="add"),
        Message.assistant("3"),
    ]
    model = ScriptedModel(["6"])
    agent = ReActAgent("calc", model, history_rewriter=last_three)
    with pytest.raises(RunError, match=r"history_rewriter .*last_three.* message 0 \(tool\)"):
        await Runner(agent).invoke([*earlier, Message.user("Times two?")])
    assert model.requests == []

    def last_two(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
        return [e.message for e in entries][-2:]

    # A cut before a user message is taken as it is.
    agent = ReActAgent("calc", model, history_rewriter=last_two)
    assert (await Runner(agent).invoke([*earlier, Message.user("Times two?")])).text == "6"


async def test_an_async_rewriter_is_refused_where_it_is_given() -> None:
    """Summarising old turns takes a model call, so a user writes the rewriter ``async def``. It
    was taken where given (it can be called as f(entries, agent_name)) and failed every start of
    the agent with "must return a list of Messages, got coroutine" and a RuntimeWarning that the
    coroutine was never awaited. It is refused where it is given, saying where to summarise."""

    async def summarise(entries: Sequence[HistoryEntry], agent_name: str) -> list[Message]:
        return [e.message for e in entries]

    with pytest.raises(TypeError, match=r"history_rewriter .*summarise.* is async") as refused:
        ReActAgent("assistant", ScriptedModel(["hi"]), history_rewriter=summarise)
    assert "before_model callback" in str(refused.value)
    with pytest.raises(TypeError, match=r"history_rewriter .*summarise.* is async"):
        with_sub_agents(ScriptAgent("A"), [ScriptAgent("B")], history_rewriter=summarise)


async def test_a_rewriter_object_whose_call_is_async_fails_the_agent_without_a_stray_coroutine() -> (
    None
):
    """One that cannot be told async where it is given (an object whose ``__call__`` returns an
    awaitable it makes) fails the agent saying the same, its coroutine closed, not left to warn
    "never awaited" when collected."""

    class Later:
        def __init__(self) -> None:
            self.made: list[Coroutine[Any, Any, list[Message]]] = []

        def __call__(self, entries: Sequence[HistoryEntry], agent_name: str) -> object:
            async def messages() -> list[Message]:
                return [e.message for e in entries]

            self.made.append(messages())
            return self.made[-1]

    model, later = ScriptedModel(["hi"]), Later()
    with pytest.raises(RunError, match=r"history_rewriter .* is async") as failed:
        await Runner(ReActAgent("assistant", model, history_rewriter=later)).invoke("hello")
    assert isinstance(failed.value.__cause__, TypeError) and model.requests == []
    assert [inspect.getcoroutinestate(c) for c in later.made] == [inspect.CORO_CLOSED]
