"""Runner: inputs, invoke and RunResult, RunError, many concurrent runs on one runner, cancelling
a run, ``async with``; plus the test helpers users get (ScriptedModel, simplify_events)."""

from __future__ import annotations

import asyncio
import collections
import enum
import typing
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest
from conftest import ScriptAgent, act_exit, act_transfer, do, other_tasks, run_events

from adk import (
    AgentEvent,
    AgentInput,
    AgentTool,
    Callbacks,
    Message,
    MessageChunk,
    MessageStream,
    ModelOptions,
    ParallelAgent,
    Role,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    Session,
    ToolCall,
    ToolSpec,
    tool,
    with_sub_agents,
)
from adk.checkpoint import CheckpointStoreError, SQLiteCheckpointStore
from adk.messages import Usage, join_chunks
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent, Supervisor

# -- inputs and results -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("hello", [Message.user("hello")]),
        (Message.user("as message"), [Message.user("as message")]),
        (
            [Message.system("sys"), Message.user("q")],
            [Message.system("sys"), Message.user("q")],
        ),
    ],
)
async def test_run_accepts_str_message_or_list(given: Any, expected: list[Message]) -> None:
    agent = ScriptAgent("a", "ok")
    events = await run_events(agent, given)
    assert agent.inputs == [expected]
    assert simplify_events(events) == ["a: ok"]


async def test_run_rejects_other_input() -> None:
    with pytest.raises(TypeError):
        Runner(ScriptAgent("a")).run([Message.user("ok"), "not a message"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="a str, a Message or a list of Messages, got int"):
        Runner(ScriptAgent("a")).run(123)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "got"),
    [
        ([{"role": "user", "content": "hi"}], "got list whose item 0 is a dict"),
        (
            [Message.user("hi"), ("assistant", "hello")],
            "got list whose item 1 is tuple ('assistant', 'hello')",
        ),
        ({"messages": [Message.user("hi")]}, "got a dict"),  # LangGraph's input state
    ],
)
def test_input_of_another_framework_is_refused_naming_what_is_wrong(given: Any, got: str) -> None:
    # A list of LangChain/OpenAI-style messages was refused as "got list", naming the one thing
    # that was right, and nothing said how to make a Message.
    with pytest.raises(TypeError) as refused:
        Runner(ScriptAgent("a")).run(given)
    assert got in str(refused.value) and "adk.Message.user(text)" in str(refused.value)


@pytest.mark.parametrize("agent", [None, "x", ScriptAgent, object()])
def test_a_runner_refuses_what_is_not_an_agent_when_it_is_made(agent: Any) -> None:
    with pytest.raises(TypeError, match=r"Runner\(agent\): expected an agent .* got"):
        Runner(agent)


def test_an_agent_needs_a_non_empty_str_name() -> None:
    with pytest.raises(TypeError, match="an agent needs a str name, got int 42"):
        ScriptAgent(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got None"):
        ScriptAgent(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty name"):
        ScriptAgent("")


async def test_an_empty_input_list_is_refused_before_the_agent_runs() -> None:
    agent = ScriptAgent("a", "ok")
    runner = Runner(agent)
    with pytest.raises(ValueError, match="empty list"):
        runner.run([])
    with pytest.raises(ValueError, match="empty list"):
        await runner.invoke([])
    assert agent.runs == 0


def _paused_turn() -> list[Message]:
    """A paused turn's messages as a service keeps them: the question, then the reply whose
    calls wait (``add`` for a person's approval), no result for them."""
    return [
        Message.user("1 + 2?"),
        Message.assistant(
            "", tool_calls=[ToolCall(id="call_1", name="add", arguments='{"a": 1, "b": 2}')]
        ),
    ]


async def _refused_by_run_and_invoke(given: list[Message]) -> list[str]:
    """What ``Runner.run`` and ``Runner.invoke`` each said refusing ``given`` with a
    ``ValueError``, at the call, before the agent ran."""
    agent = ScriptAgent("a", "ok")
    runner = Runner(agent)
    with pytest.raises(ValueError) as refused_run:
        runner.run(given)
    with pytest.raises(ValueError) as refused_invoke:
        await runner.invoke(given)
    assert agent.runs == 0
    return [str(refused_run.value), str(refused_invoke.value)]


@pytest.mark.parametrize(
    "given",
    [
        pytest.param([*_paused_turn(), Message.user("and 3 + 4?")], id="a message appended"),
        pytest.param(_paused_turn(), id="the paused turn as it is"),
        # (A result after the user's next message is refused saying where it is:
        # test_a_result_a_message_separates_from_its_call_is_refused_saying_where_it_is.)
    ],
)
async def test_an_input_whose_tool_call_no_result_answers_is_refused_at_the_call(
    given: list[Message],
) -> None:
    """A service kept a paused turn's messages and sent them on: every provider refuses an
    assistant message's call that no tool message right after it answers (OpenAI's 400 'tool_call_ids
    did not have response messages'), so the run failed at the model, after the service had sent
    its 200. Refused at the call now, naming the message, the tool and the call id, nothing run."""
    for said in await _refused_by_run_and_invoke(given):
        assert "message 1" in said and "'add'" in said and "'call_1'" in said, said
        assert "if its run paused there, resume its checkpoint;" in said, said
        assert "if its run was cut off" in said and "read them once closed" in said, said
        assert "or answer the call (Message.tool(" in said, said


async def test_a_result_right_after_the_call_under_another_id_is_named_in_the_refusal() -> None:
    """A tool message does follow the call, named for its tool, but under another id (a service
    that made its own ids, "call-1" for "call_1"): the refusal said no tool message right after it
    answers the call, sending the reader to look for a missing message rather than at the ids.
    It names the ids the tool messages there answer."""
    given = [*_paused_turn(), Message.tool("3", tool_call_id="call-1", name="add")]
    with pytest.raises(ValueError) as refused:
        await Runner(ScriptAgent("a", "ok")).invoke(given)
    said = str(refused.value)
    assert "'call_1'" in said and "answer the call ids ['call-1']" in said, said


def _answered_turn() -> list[Message]:
    """A turn whose call ``call_1`` is answered right after it, then the model's answer."""
    return [
        *_paused_turn(),
        Message.tool("3", tool_call_id="call_1", name="add"),
        Message.assistant("3"),
    ]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        pytest.param(  # no assistant message with calls at all: the no-calls path must look too
            [Message.tool("3", tool_call_id="call_1", name="add"), Message.user("hi")],
            "run input message 0 (tool) answers the call id 'call_1', which no assistant message "
            "right before it makes",
            id="a result opening the input",
        ),
        pytest.param(  # event.message collected over a streaming run: the replies are missing
            [
                Message.user("1 + 2?"),
                Message.tool("3", tool_call_id="call_1", name="add"),
                Message.user("Times two?"),
            ],
            "adk.run_messages(events)",
            id="a streaming run's event.message collected",
        ),
        pytest.param(
            [*_answered_turn()[:3], Message.tool("9", tool_call_id="call_9", name="add")],
            "message 3 (tool) answers the call id 'call_9', which the assistant message it "
            "follows (message 1) does not make (its call ids: ['call_1'])",
            id="an id the call right before it does not make",
        ),
        pytest.param(
            [*_answered_turn()[:3], Message.tool("3", tool_call_id="call_1", name="add")],
            "message 3 (tool) answers the call id 'call_1' of message 1 (assistant) a second "
            "time (message 2 answered it)",
            id="answered twice right after the call",
        ),
        pytest.param(
            [*_answered_turn(), Message.tool("3", tool_call_id="call_1", name="add")],
            "message 4 (tool) answers the call id 'call_1' of message 1 (assistant) a second "
            "time (message 2 answered it)",
            id="answered again after the model's answer",
        ),
        pytest.param(
            [*_answered_turn(), Message(role=Role.TOOL, content="3")],
            "message 4 (tool) answers the call id None",
            id="a result with no call id",
        ),
    ],
)
async def test_a_tool_result_that_answers_no_call_before_it_is_refused_at_the_result(
    given: list[Message], said: str
) -> None:
    """A tool message that answers no call of the assistant message right before it (an id no
    earlier message made, a call answered already, a streaming reader's collected messages
    missing the replies) was taken, and the provider refused the run at its first model call
    (OpenAI: "messages with role 'tool' must be a response to a preceding message with
    'tool_calls'"), after a service had sent its 200. Refused at the result now, nothing run."""
    for message in await _refused_by_run_and_invoke(given):
        assert said in message, message
        assert "model APIs refuse" in message and "drop " in message, message


@pytest.mark.parametrize(
    ("between", "at"),
    [
        (Message.user("and in Rome?"), "message 2 (user)"),
        (Message.system("Be brief."), "message 3 (system)"),
    ],
)
async def test_a_result_a_message_separates_from_its_call_is_refused_saying_where_it_is(
    between: Message, at: str
) -> None:
    """A call whose result is there but after another message (a user message a UI put between
    a call and its result, a system note between two results) was refused as a call no tool
    message answers, advising to resume a checkpoint or to answer the call, which it is: the
    refusal names the result, the message between, and to move the result up."""
    calls = [ToolCall(id="call_a", name="weather"), ToolCall(id="call_b", name="weather")]
    results = [
        Message.tool("sunny", tool_call_id="call_a", name="weather"),
        Message.tool("rain", tool_call_id="call_b", name="weather"),
    ]
    given = [Message.user("Oslo and Bergen?"), Message.assistant("", tool_calls=calls)]
    if between.role == Role.USER:  # before both results: call_a's is message 3
        given += [between, *results]
        late, call = "message 3", "'call_a'"
    else:  # between them: call_b's is message 4
        given += [results[0], between, results[1]]
        late, call = "message 4", "'call_b'"
    agent = ScriptAgent("a", "ok")
    with pytest.raises(ValueError) as refused:
        await Runner(agent).invoke(given)
    message = str(refused.value)
    assert f"call id {call}" in message, message
    assert f"answered by {late} (tool), after {at}" in message, message
    assert "move the tool messages that answer message 1 right after it" in message, message
    assert "resume its checkpoint" not in message, message  # no pause left it open
    assert agent.runs == 0


class _Messages(list[Message]):
    """A list subclass, as a caller's own message history type may be."""


def _tool_turn_refusals() -> list[tuple[list[Message], str]]:
    """One input of each tool-turn refusal, with what its refusal says."""
    late = [*_paused_turn(), Message.user("x"), Message.tool("3", tool_call_id="call_1")]
    return [
        (_paused_turn(), "no tool message right after it answers the call"),
        ([Message.tool("3", tool_call_id="call_1"), Message.user("hi")], "message 0 (tool)"),
        ([Message.user("1"), Message.tool("3", tool_call_id="call_1")], "message 1 (tool)"),
        ([*_answered_turn(), Message.tool("3", tool_call_id="call_1")], "a second time"),
        (late, "answered by message 3 (tool), after message 2 (user)"),
    ]


@pytest.mark.parametrize(
    "made",
    [tuple, lambda given: (m for m in given), _Messages, collections.deque],
    ids=["a tuple", "a generator", "a list subclass", "a deque"],
)
async def test_a_run_input_other_than_a_list_is_refused_for_its_tool_turns_as_a_list_is(
    made: Any,
) -> None:
    """pf5 read an exact list on a path of its own (``type(value) is list``) and every other
    iterable through the ABC checks, and the rebase that followed let a tool result through the
    list's path (542d81b): each tool-turn refusal fires for the other iterables too, saying the
    same, nothing run."""
    agent = ScriptAgent("a", "ok")
    runner = Runner(agent)
    for given, said in _tool_turn_refusals():
        with pytest.raises(ValueError) as as_list:
            await runner.invoke(list(given))
        with pytest.raises(ValueError) as as_other:
            await runner.invoke(made(given))
        assert said in str(as_list.value), as_list.value
        assert str(as_other.value) == str(as_list.value)
    assert agent.runs == 0


async def test_call_ids_a_model_uses_again_in_a_later_reply_are_answered_per_reply() -> None:
    """Some models number their calls afresh in each reply (``call_0`` every time): each result
    answers the call of the reply right before it, so a reused id is no second answer."""
    again = [
        Message.user("1 + 2 + 3?"),
        Message.assistant("", tool_calls=[ToolCall(id="call_0", name="add")]),
        Message.tool("3", tool_call_id="call_0", name="add"),
        Message.assistant("", tool_calls=[ToolCall(id="call_0", name="add")]),
        Message.tool("6", tool_call_id="call_0", name="add"),
        Message.assistant("6"),
    ]
    agent = ScriptAgent("a", "ok")
    assert (await Runner(agent).invoke(again)).text == "ok"
    assert agent.inputs == [again]


async def test_an_input_whose_tool_calls_are_each_answered_is_taken() -> None:
    answered = [
        *_paused_turn(),
        Message.assistant(
            "", tool_calls=[ToolCall(id="call_2", name="add"), ToolCall(id="call_3", name="add")]
        ),
    ]
    answered[2:2] = [Message.tool("3", tool_call_id="call_1", name="add"), Message.assistant("3")]
    answered += [  # two calls of one reply, answered in another order: providers take it
        Message.tool("0", tool_call_id="call_3", name="add"),
        Message.tool("0", tool_call_id="call_2", name="add"),
        Message.user("thanks"),
    ]
    agent = ScriptAgent("a", "ok")
    result = await Runner(agent).invoke(answered)
    assert result.text == "ok" and agent.inputs == [answered]


@pytest.mark.parametrize(
    ("value", "got"),
    [
        ([{"role": "user", "content": "hi"}], "got list whose item 0 is a dict (make it a Message"),
        ({"role": "user", "content": "hi"}, "got a dict (make it a Message"),
        ([Message.user("hi"), "and you?"], "got list whose item 1 is str 'and you?'"),
        (42, "got int"),
    ],
)
async def test_run_input_that_is_not_messages_is_refused_saying_which_item(
    value: Any, got: str
) -> None:
    """An OpenAI-style caller passes chat dicts (the OpenAI Agents SDK's input items): the refusal
    said only "got list", not which item was wrong nor how to make a Message of a dict."""
    agent = ScriptAgent("a", "ok")
    runner = Runner(agent)
    with pytest.raises(TypeError) as refused:
        await runner.invoke(value)
    message = str(refused.value)
    assert message.startswith("run input must be a str, a Message or a list of Messages, ")
    assert got in message
    if "dict" in got:
        assert "adk.Message.model_validate(d)" in message
    assert agent.runs == 0


@pytest.mark.parametrize("session", ["abc", [("a", 1)], 42])
async def test_a_session_that_is_not_a_mapping_is_refused_up_front(session: Any) -> None:
    agent = ScriptAgent("a", "ok")
    runner = Runner(agent)
    wanted = f"session must be a Session or a mapping, got {type(session).__name__}"
    with pytest.raises(TypeError, match=wanted):
        runner.run("hi", session=session)
    with pytest.raises(TypeError, match=wanted):
        await runner.invoke("hi", session=session)
    assert agent.runs == 0


@pytest.mark.parametrize("make", [dict, Session])
async def test_a_session_key_that_is_not_a_str_is_refused_before_the_run_does_any_work(
    make: Any,
) -> None:
    # Taken, {1: ...} failed the run only at its first pause, after the work before it: the
    # checkpoint saves the session as JSON. A resume given one is refused alike, the checkpoint
    # kept.
    agent = ScriptAgent("a", "work", lambda ctx: ctx.interrupt({"q": 1}))
    runner = Runner(agent)
    wanted = r"session keys must be str, got the key int 1: a session is saved in a checkpoint"
    with pytest.raises(TypeError, match=wanted):
        runner.run("hi", session=make({"user": "Ann", 1: "x"}))
    with pytest.raises(TypeError, match=wanted):
        await runner.invoke("hi", session=make({1: "x"}))
    assert agent.runs == 0
    paused = await runner.invoke("hi", session=make({"user": "Ann"}))
    assert paused.checkpoint_id is not None and agent.runs == 1
    with pytest.raises(TypeError, match=wanted):
        runner.resume(paused.checkpoint_id, "yes", session=make({1: "x"}))
    with pytest.raises(TypeError, match=wanted):
        await runner.invoke_resume(paused.checkpoint_id, "yes", session=make({1: "x"}))
    assert agent.runs == 1
    resumed = await runner.invoke_resume(paused.checkpoint_id, "yes")
    assert agent.runs == 2 and resumed.session.values == {"user": "Ann"}  # the checkpoint kept


@pytest.mark.parametrize(
    ("checkpoint_id", "error", "wanted"),
    [
        (123, TypeError, "must be a str, got int"),
        ("", ValueError, "must not be empty"),
        ("a\x00b", ValueError, "NUL"),
        ("x" * 1025, ValueError, "limit is 1024"),
    ],
)
async def test_a_bad_checkpoint_id_is_refused_before_the_run_does_any_work(
    checkpoint_id: Any, error: type[Exception], wanted: str
) -> None:
    """The stores' own rule, applied when the run starts rather than at its pause."""
    agent = ScriptAgent("a", "work", lambda ctx: ctx.interrupt({"q": 1}))
    runner = Runner(agent)
    with pytest.raises(error, match=wanted):
        runner.run("hi", checkpoint_id=checkpoint_id)
    with pytest.raises(error, match=wanted):
        await runner.invoke("hi", checkpoint_id=checkpoint_id)
    assert agent.runs == 0
    paused = await runner.invoke("hi", checkpoint_id="fine")  # a good id still pauses under it
    assert paused.checkpoint_id == "fine"


@pytest.mark.parametrize(
    ("checkpoint_id", "wanted"),
    [("", "must not be empty"), ("a\x00b", "NUL"), ("x" * 1025, "limit is 1024")],
)
@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_a_bad_checkpoint_id_to_resume_is_a_value_error_not_a_store_error(
    checkpoint_id: str, wanted: str, store: str
) -> None:
    """A resume's id the stores' rule refuses is the caller's mistake (ValueError), as it was,
    not a CheckpointStoreError: a service reads that as its store being down and asks again.
    The store's operations wrap any exception of their own (a store of your own's OSError), so
    the rule is applied at the call, before the claim or the read touches the store."""
    agent = ScriptAgent("a", "work", lambda ctx: ctx.interrupt({"q": 1}))
    runner = Runner(
        agent, checkpoint_store=SQLiteCheckpointStore(":memory:") if store == "sqlite" else None
    )
    with pytest.raises(ValueError, match=wanted) as refused:
        await runner.invoke_resume(checkpoint_id, "yes")
    assert not isinstance(refused.value, CheckpointStoreError)
    assert agent.runs == 0


def test_run_and_resume_are_typed_as_the_closable_generators_they_return() -> None:
    """So ``contextlib.aclosing(runner.run(...))`` (docs/interrupts.md) type-checks."""
    for method in (Runner.run, Runner.resume):
        assert typing.get_type_hints(method)["return"] == AsyncGenerator[AgentEvent, None]


async def test_invoke_collects_a_run_result() -> None:
    def write(ctx: RunContext) -> None:
        ctx.session["written"] = True

    agent = SequentialAgent("seq", [ScriptAgent("a", "first", write), ScriptAgent("b", "second")])
    result = await Runner(agent).invoke("go", session={"given": 1})
    assert simplify_events(result.events) == ["a: first", "b: second"]
    assert result.output == Message.assistant("second")
    assert result.text == "second"
    assert result.interrupt is None and result.checkpoint_id is None
    assert isinstance(result.session, Session)
    assert result.session.values == {"given": 1, "written": True}


async def test_a_runner_whose_agent_is_replaced_runs_the_new_one_under_its_name() -> None:
    # The root's run path and address are made once per agent, not once per runner.
    runner = Runner(ScriptAgent("first", "one"))
    assert (await runner.invoke("go")).events[0].run_path == ("first",)
    runner.agent = ScriptAgent("second", "two")
    invoked = (await runner.invoke("go")).events
    streamed = [event async for event in runner.run("go")]
    for events in (invoked, streamed):
        assert [(e.agent_name, e.run_path, e.message) for e in events] == [
            ("second", ("second",), Message.assistant("two"))
        ]


async def test_invoke_output_is_the_last_custom_value_when_the_run_ends_with_one() -> None:
    agent = ScriptAgent("a", "words", lambda ctx: AgentEvent.custom({"score": 9}))
    result = await Runner(agent).invoke("go")
    assert result.output == {"score": 9}
    assert result.text == "words"


async def test_a_session_object_is_used_as_is_and_a_mapping_is_copied() -> None:
    def bump(ctx: RunContext) -> None:
        ctx.session["n"] = ctx.session.get("n", 0) + 1

    runner = Runner(ScriptAgent("a", bump))
    session = Session({"n": 1})
    result = await runner.invoke("x", session=session)
    assert result.session is session and session["n"] == 2
    values = {"n": 5}
    result = await runner.invoke("x", session=values)
    assert result.session["n"] == 6 and values == {"n": 5}


async def test_invoke_raises_run_error_with_the_event_and_the_events_so_far() -> None:
    boom = ConnectionError("db down")
    runner = Runner(SequentialAgent("seq", [ScriptAgent("a", "ok"), ScriptAgent("b", boom)]))
    with pytest.raises(RunError) as info:
        await runner.invoke("go")
    err = info.value
    assert err.event.agent_name == "b" and err.event.exception is boom
    assert err.error.type == "ConnectionError" and err.error.message == "db down"
    assert simplify_events(err.events) == ["a: ok", "b: [error db down]"]
    assert err.__cause__ is boom
    assert "db down" in str(err)


async def test_streaming_runs_give_agents_the_preference_and_invoke_collects_streams() -> None:
    agent = ReActAgent("chat", ScriptedModel(["streamed reply"], chunk_size=3))
    seen: list[AgentInput] = []

    class Watch(ScriptAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            seen.append(input)
            assert ctx.enable_streaming
            async for event in super().run(input, ctx):
                yield event

    runner = Runner(SequentialAgent("seq", [Watch("w"), agent]), enable_streaming=True)
    result = await runner.invoke("hi")
    assert seen[0].enable_streaming
    assert result.text == "streamed reply"
    stream_events = [e for e in result.events if e.output is not None and e.output.stream]
    assert len(stream_events) == 1


# -- many runs on one runner --------------------------------------------------------------------


async def test_a_thousand_concurrent_runs_on_one_runner_keep_their_sessions_apart() -> None:
    async def write(ctx: RunContext) -> AgentEvent:
        me = ctx.session["me"]
        ctx.session["seen"] = me
        for _ in range(3):
            await asyncio.sleep(0)  # let the other runs interleave
        return AgentEvent.of(f"wrote {me}")

    async def read(ctx: RunContext) -> AgentEvent:
        await asyncio.sleep(0)
        return AgentEvent.of(f"{ctx.session['me']}|{ctx.session['seen']}")

    reader = ScriptAgent("reader", read)
    runner = Runner(SequentialAgent("seq", [ScriptAgent("writer", write), reader]))
    before = other_tasks()
    results = await asyncio.gather(
        *(runner.invoke(f"q{i}", session={"me": i}) for i in range(1000))
    )
    assert [r.text for r in results] == [f"{i}|{i}" for i in range(1000)]
    assert all(r.session["seen"] == i for i, r in enumerate(results))
    # Each run's history is its own: the reader saw its run's input and writer only.
    for inputs in reader.inputs:
        question, context = inputs
        assert context.content == f"For context: [writer] said: wrote {question.content[1:]}."
    assert other_tasks() == before


# -- cancelling and closing ---------------------------------------------------------------------


async def test_cancelling_a_run_while_branches_are_blocked_leaves_no_task() -> None:
    a_in, b_in, never = asyncio.Event(), asyncio.Event(), asyncio.Event()
    a = ScriptAgent("a", do(a_in.set), never)
    b = ScriptAgent("b", do(b_in.set), "b is waiting", never)
    runner = Runner(SequentialAgent("seq", [ParallelAgent("par", [a, b])]))
    before = other_tasks()
    task = asyncio.create_task(runner.invoke("go"))
    async with asyncio.timeout(5):
        await a_in.wait()
        await b_in.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert a.cancelled == 1  # was awaiting inside its body
    assert (a.closed, b.closed) == (1, 1)  # b was parked at a yield: its generator was closed
    assert (a.completed, b.completed) == (0, 0)
    assert other_tasks() == before


async def test_a_timeout_around_a_run_leaves_no_task_and_closes_generators() -> None:
    other_in, never = asyncio.Event(), asyncio.Event()
    blocker = ScriptAgent("blocker", "started", never)
    other = ScriptAgent("other", do(other_in.set), never)
    runner = Runner(ParallelAgent("par", [blocker, other]))
    before = other_tasks()
    seen: list[str] = []
    loop = asyncio.get_running_loop()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(5) as deadline:
            async for event in runner.run("go"):
                seen.extend(simplify_events([event]))
                await other_in.wait()
                deadline.reschedule(loop.time())  # waiting for the next event times out
    assert seen == ["blocker: started"]
    assert (blocker.closed, other.closed) == (1, 1)
    assert (blocker.completed, other.completed) == (0, 0)
    assert other_tasks() == before


async def test_cancelling_during_concurrent_tool_calls_leaves_no_task() -> None:
    entered: list[str] = []
    both_in = asyncio.Event()

    @tool
    async def slow(tag: str) -> str:
        """Never finishes."""
        entered.append(tag)
        if len(entered) == 2:
            both_in.set()
        await asyncio.Event().wait()
        return tag

    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("slow", {"tag": "x"}), tool_call("slow", {"tag": "y"})])]
    )
    runner = Runner(ReActAgent("agent", model, tools=[slow]))
    before = other_tasks()
    task = asyncio.create_task(runner.invoke("go"))
    async with asyncio.timeout(5):
        await both_in.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert other_tasks() == before


async def test_async_with_runner_closes_its_resources() -> None:
    class Resources:
        def __init__(self) -> None:
            self.closed = 0

        async def aclose(self) -> None:
            self.closed += 1

    resources = Resources()
    async with Runner(ScriptAgent("a", "ok"), resources=resources) as runner:
        assert (await runner.invoke("x")).text == "ok"
        assert resources.closed == 0
    assert resources.closed == 1
    async with Runner(ScriptAgent("a")):  # no resources: nothing to close
        pass


class _ClosingModel(ScriptedModel):
    def __init__(self, fails: bool = False) -> None:
        super().__init__(["ok"])
        self.closed = 0
        self.fails = fails

    async def aclose(self) -> None:
        self.closed += 1
        if self.fails:
            raise OSError("connection already gone")


class _ClosingToolset:
    def __init__(self) -> None:
        self.closed = 0

    async def tools(self, ctx: Any) -> list[Any]:
        return []

    async def aclose(self) -> None:
        self.closed += 1


async def test_async_with_runner_closes_what_its_agent_tree_holds() -> None:
    """Models and toolsets (MCP) given to agents directly, wherever they sit: workflow steps, an
    ``AgentTool``'s agent, a supervisor's workers. Each once; one that fails to close keeps no
    other open, and its error is raised once all are closed."""
    shared, inner, worker, lead = _ClosingModel(), _ClosingModel(), _ClosingModel(), _ClosingModel()
    broken, toolset = _ClosingModel(fails=True), _ClosingToolset()
    helper = ReActAgent("helper", inner, description="Helps.")
    boss = ReActAgent("boss", shared, tools=[toolset, AgentTool(helper)])
    team = Supervisor(ReActAgent("lead", lead), [ReActAgent("worker", worker, tools=[toolset])])
    steps = SequentialAgent("steps", [boss, team, ReActAgent("again", shared)])
    root = ParallelAgent("root", [steps, ReActAgent("odd", broken)])
    with pytest.raises(OSError, match="connection already gone"):
        async with Runner(root):
            pass
    assert [m.closed for m in (shared, inner, worker, lead, broken)] == [1, 1, 1, 1, 1]
    assert toolset.closed == 1


async def test_closing_a_runner_of_a_sub_agent_leaves_the_agents_above_it_open() -> None:
    lead, worker = _ClosingModel(), _ClosingModel()
    sub = ReActAgent("worker", worker, description="Works.")
    with_sub_agents(ReActAgent("lead", lead), [sub])
    async with Runner(sub):
        pass
    assert (worker.closed, lead.closed) == (1, 0)


class _SlottedTool:
    """A tool wrapper with slots only (as an MCP tool is), holding the toolset it calls."""

    __slots__ = ("_toolset", "spec")

    def __init__(self, toolset: _ClosingToolset) -> None:
        self._toolset = toolset
        self.spec = ToolSpec(name="wrapped", description="A wrapped tool.")

    async def run(self, arguments: str, ctx: Any) -> str:
        return "ok"


async def test_closing_reaches_through_slotted_tools_and_nested_containers() -> None:
    toolset, nested = _ClosingToolset(), _ClosingToolset()
    agent = ReActAgent("a", ScriptedModel(["ok"]), tools=[_SlottedTool(toolset)])
    agent.extra = {"groups": [[nested]]}  # type: ignore[attr-defined]
    async with Runner(agent):
        pass
    assert (toolset.closed, nested.closed) == (1, 1)


async def test_a_runner_held_inside_the_agent_tree_is_not_closed_from_it() -> None:
    """It belongs to whoever made it; closing it from here would walk back into this tree."""
    model = _ClosingModel()
    agent = ReActAgent("a", model)
    inner = Runner(agent)
    agent.helper_runner = inner  # type: ignore[attr-defined]
    async with asyncio.timeout(5):
        async with Runner(agent):
            pass
    assert model.closed == 1


# -- helpers for users' tests -------------------------------------------------------------------


async def test_simplify_events_gives_short_readable_lines() -> None:
    call = ToolCall(id="c1", name="add", arguments='{"a": 1}')

    async def chunks() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="stre")
        yield MessageChunk(content="amed")

    a = ScriptAgent(
        "A",
        "hello",
        Message.assistant("", [call]),
        Message.tool("3", tool_call_id="c1", name="add"),
        lambda ctx: AgentEvent.streaming(MessageStream(chunks())),
        lambda ctx: AgentEvent.custom([1, 2]),
        act_transfer("B"),
    )
    b = ScriptAgent("B", "bye", act_exit())
    events = await run_events(with_sub_agents(a, [b]))
    assert simplify_events(events) == [
        "A: hello",
        'A: [call add {"a": 1}]',
        "A: [tool add] 3",
        "A: streamed",
        "A: [custom [1, 2]]",
        "A: [transfer -> B]",
        "B: bye",
        "B: [exit]",
    ]
    failing = await run_events(ScriptAgent("C", ValueError("bad thing")))
    assert simplify_events(failing) == ["C: [error bad thing]"]


async def test_scripted_model_replays_its_script_and_records_requests() -> None:
    model = ScriptedModel(
        [
            "plain text",
            Reply(text="calling", tool_calls=[tool_call("f", {"x": 1})]),
            Message.assistant("a message"),
            lambda messages: f"saw {len(messages)} messages",
            ValueError("scripted failure"),
        ]
    )
    options = ModelOptions(temperature=0.5)
    first = await model.generate([Message.user("1")], options=options)
    assert first.content == "plain text" and first.tool_calls == []
    assert first.metadata == {"finish_reason": "stop"}  # as a real adapter reports it
    second = await model.generate([Message.user("2")])
    assert second.content == "calling" and second.tool_calls[0].name == "f"
    assert second.tool_calls[0].id  # ids are filled in
    assert (await model.generate([])).content == "a message"
    assert (await model.generate([Message.user("a"), Message.user("b")])).content == (
        "saw 2 messages"
    )
    with pytest.raises(ValueError, match="scripted failure"):
        await model.generate([])
    with pytest.raises(RuntimeError, match="exhausted"):
        await model.generate([])
    assert model.requests[0].messages == [Message.user("1")]
    assert model.requests[0].options == options and not model.requests[0].stream


@pytest.mark.parametrize(
    ("script", "shown"),
    [
        ("hello", "str 'hello'"),
        (Reply(text="hi"), "Reply Reply(text='hi', tool_calls=[], error=None, delay=0.0, usage"),
    ],
)
async def test_a_scripted_model_given_one_reply_bare_is_refused_when_made(
    script: Any, shown: str
) -> None:
    """``ScriptedModel("hello")`` was read a character per call: the agent answered "h", then
    "e", without a word; a bare ``Reply`` failed with "'Reply' object is not iterable"."""
    with pytest.raises(TypeError) as refused:
        ScriptedModel(script)
    assert str(refused.value) == (
        "ScriptedModel takes a list of replies (or one callable answering every call), got "
        f"{shown}: for one reply, write ScriptedModel([...])"
    )
    one = ScriptedModel([script])
    assert (await Runner(ReActAgent("a", one)).invoke("hi")).text in ("hello", "hi")


async def test_a_scripted_model_run_past_its_end_says_how_to_serve_more_calls() -> None:
    """One scripted model shared by several runs (a runner invoked per request, the records of an
    execution environment) runs out after the first: the error only said "script exhausted after
    1 replies", leaving a newcomer to find ``cycle=True`` or a callable script in the docs."""
    runner = Runner(ReActAgent("bot", ScriptedModel(["Hi!"])))
    assert (await runner.invoke("hello")).text == "Hi!"
    with pytest.raises(RunError) as failed:
        await runner.invoke("hello again")
    message = str(failed.value)
    assert "ScriptedModel script exhausted after 1 replies: " in message
    assert "give it a reply for every call of every run" in message
    assert "cycle=True" in message and "one callable" in message


async def test_a_scripted_model_item_no_reply_is_made_of_is_refused_when_made() -> None:
    """An item that is not a reply (a chat dict, say) failed only at its turn, mid-run."""
    with pytest.raises(TypeError) as refused:
        ScriptedModel(["fine", {"role": "assistant", "content": "hi"}])
    assert str(refused.value) == (
        "ScriptedModel script item 1 is dict {'role': 'assistant', 'content': 'hi'}; an item is "
        "a str, a Message, a Reply, an exception or a callable returning one"
    )


def test_a_reply_whose_tool_calls_are_not_tool_calls_is_refused_when_written() -> None:
    """A call written as a chat dict, or one call not in a list, failed only at its turn, mid-run,
    with pydantic's validation errors for a Message."""
    with pytest.raises(TypeError) as refused:
        Reply(tool_calls=[tool_call("f", {}), {"name": "g", "arguments": {}}])  # type: ignore[list-item]
    assert str(refused.value) == (
        "Reply tool_calls[1] is dict {'name': 'g', 'arguments': {}}; make each call with "
        "adk.testing.tool_call(name, arguments)"
    )
    with pytest.raises(TypeError) as refused:
        Reply(tool_calls=tool_call("f", {}))  # type: ignore[arg-type]
    assert str(refused.value) == (
        "Reply tool_calls must be a list, got ToolCall (for one call, write "
        "tool_calls=[tool_call(name, arguments)])"
    )
    assert Reply(tool_calls=(tool_call("f", {}),)).tool_calls[0].name == "f"  # type: ignore[arg-type]


async def test_a_reply_takes_a_call_written_as_a_dict_of_a_tool_calls_fields() -> None:
    """A dict of a ToolCall's own fields is a call Message.assistant validates: such a script
    played before the check of a Reply's calls (666736c), which refused it with the chat dicts
    that failed mid-run. It plays again, and the list the test wrote is left as it was."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    written: list[Any] = [{"id": "c1", "name": "add", "arguments": '{"a": 1, "b": 2}'}]
    reply = Reply(tool_calls=written)
    assert written == [{"id": "c1", "name": "add", "arguments": '{"a": 1, "b": 2}'}]
    model = ScriptedModel([reply, "3 it is"])
    result = await Runner(ReActAgent("calc", model, tools=[add])).invoke("1 + 2?")
    assert result.text == "3 it is"
    (asked, answered) = (model.requests[1].messages[-2], model.requests[1].messages[-1])
    assert [(call.id, call.name) for call in asked.tool_calls] == [("c1", "add")]
    assert (answered.tool_call_id, answered.content) == ("c1", "3")


async def test_a_reply_keeps_tool_calls_given_as_a_generator_or_none() -> None:
    """Message.assistant takes any iterable of calls: the check of a Reply's calls iterated a
    generator and left it empty, so the turn made no call without a word; None (no calls) failed
    with a bare "'NoneType' object is not iterable"."""
    calls = Reply(tool_calls=(tool_call(name, {"a": 1}) for name in ["f", "g"]))  # type: ignore[arg-type]
    assert [call.name for call in calls.tool_calls] == ["f", "g"]
    model = ScriptedModel([calls, Reply(text="none", tool_calls=None)])  # type: ignore[arg-type]
    first = await model.generate([])
    assert [call.name for call in first.tool_calls] == ["f", "g"]
    second = await model.generate([])
    assert (second.content, second.tool_calls) == ("none", [])


async def test_scripted_model_streams_the_same_message_it_would_return() -> None:
    reply = Reply(text="a longer answer", tool_calls=[tool_call("f", {"x": 1}, id="c1")])
    model = ScriptedModel([reply, reply], chunk_size=4)
    whole = await model.generate([])
    stream = MessageStream(model.stream([]))
    chunks = [c async for c in stream]
    assert len(chunks) > 3
    streamed = await stream.collect()
    assert (streamed.content, streamed.tool_calls) == (whole.content, whole.tool_calls)
    assert model.requests[1].stream


async def test_scripted_model_gives_the_same_metadata_streamed_or_not() -> None:
    """Both modes report a finish reason, as real adapters do, and keep a scripted message's
    metadata: a streamed reply joins to exactly the message ``generate`` returns."""
    cut = Message.assistant("cut off mid", usage=Usage(input_tokens=3, output_tokens=5))
    cut.metadata.update({"finish_reason": "length", "response_id": "r1"})
    calling = Reply(text="calling", tool_calls=[tool_call("f", {"x": 1}, id="c1")])
    expected = [{"finish_reason": "stop"}, {"finish_reason": "tool_calls"}, dict(cut.metadata)]
    for item, metadata in zip(["plain text", calling, cut], expected, strict=True):
        model = ScriptedModel([item, item], chunk_size=4)
        whole = await model.generate([])
        streamed = join_chunks([c async for c in model.stream([])])
        assert whole.metadata == metadata
        assert streamed == whole


async def test_a_scripted_model_error_becomes_the_agents_error_event() -> None:
    agent = ReActAgent("agent", ScriptedModel([ConnectionError("model down")]))
    events = await run_events(agent)
    assert simplify_events(events) == ["agent: [error model down]"]
    assert isinstance(events[0].exception, ConnectionError)


async def test_invoke_streaming_model_failure_is_a_run_error() -> None:
    """With streaming on, a model that fails mid-stream ends ``invoke`` with ``RunError`` (the
    agent's error event, the model's exception as its cause), as it does without streaming."""
    runner = Runner(
        ReActAgent("r", ScriptedModel([ConnectionError("boom")])), enable_streaming=True
    )
    with pytest.raises(RunError) as caught:
        await runner.invoke("hi")
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert caught.value.event.agent_name == "r"


# -- a model of the user's own that answers with the wrong thing -------------------------------


class _HandModel:
    """A user's own ``ChatModel`` that answers with whatever it was given, right or wrong; with
    streaming on, each reply is the list of chunks to yield."""

    model_name = "by-hand"

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.calls = 0

    async def generate(self, messages: Any, *, tools: Any = (), options: Any = None) -> Any:
        self.calls += 1
        return self.replies.pop(0)

    async def stream(
        self, messages: Any, *, tools: Any = (), options: Any = None
    ) -> AsyncIterator[Any]:
        self.calls += 1
        for chunk in self.replies.pop(0):
            yield chunk


@tool
def _add(a: int) -> int:
    """Add one."""
    return a + 1


_CALL_ADD = ToolCall(id="c1", name="_add", arguments='{"a": 1}')


@pytest.mark.parametrize(
    ("reply", "shown"),
    [
        ("plain text", "returned str 'plain text'"),
        ({"role": "assistant", "content": "hi"}, "returned dict"),
        (None, "returned None;"),
        (
            Message(role=Role.TOOL, content="", tool_calls=[_CALL_ADD]),
            "returned a Message with role 'tool'",
        ),
    ],
)
async def test_a_model_reply_that_is_not_an_assistant_message_fails_the_run_naming_the_model(
    reply: Any, shown: str
) -> None:
    model = _HandModel(reply, Message.assistant("never asked for"))
    with pytest.raises(RunError) as caught:
        await Runner(ReActAgent("r", model, tools=[_add])).invoke("hi")
    assert isinstance(caught.value.__cause__, TypeError)
    assert f"model _HandModel: generate() {shown}" in str(caught.value)
    assert model.calls == 1  # no follow-up request built on the wrong reply


@pytest.mark.parametrize("chunk", ["text chunk", None, Message.assistant("a whole message")])
async def test_a_model_stream_yielding_other_than_message_chunks_fails_the_run(chunk: Any) -> None:
    model = _HandModel([MessageChunk(content="fine, "), chunk])
    runner = Runner(ReActAgent("r", model), enable_streaming=True)
    with pytest.raises(RunError, match=r"model _HandModel: stream\(\) yielded"):
        await runner.invoke("hi")


async def test_each_model_object_is_checked_until_it_has_answered_properly() -> None:
    """Without hooks a model is checked until its first proper reply (then it costs nothing
    more): one that answered does not vouch for another object of its class."""
    good = _HandModel(Message.assistant("fine"))
    assert (await Runner(ReActAgent("r", good)).invoke("hi")).text == "fine"
    bad = _HandModel("plain text")
    with pytest.raises(RunError, match="generate\\(\\) returned str"):
        await Runner(ReActAgent("r", bad)).invoke("hi")
    streamed = _HandModel([MessageChunk(content="fine")], ["text chunk"])
    runner = Runner(ReActAgent("r", streamed), enable_streaming=True)
    assert (await runner.invoke("hi")).text == "fine"
    with pytest.raises(RunError, match=r"stream\(\) yielded str"):
        await Runner(ReActAgent("r", _HandModel(["text chunk"])), enable_streaming=True).invoke("x")


async def test_with_hooks_every_model_reply_is_checked() -> None:
    """A model that answered properly once is still checked when the run has hooks (here a
    callback): their coroutine around the call is there anyway."""
    model = _HandModel(Message.assistant("", [_CALL_ADD]), "plain text")
    runner = Runner(
        ReActAgent("r", model, tools=[_add]), callbacks=[Callbacks(on_event=lambda event: None)]
    )
    with pytest.raises(RunError, match="generate\\(\\) returned str 'plain text'"):
        await runner.invoke("hi")
    assert model.calls == 2


async def test_a_session_key_that_is_a_str_subclass_is_taken_and_survives_a_pause(
    tmp_path: Any,
) -> None:
    # A StrEnum naming an application's session keys is a str to JSON and to every lookup:
    # the check of session keys refused it (type(key) is not str) though the run and its
    # checkpoint (saved as JSON in SQLite) take it.
    class Key(enum.StrEnum):
        USER = "user"

    agent = ScriptAgent("a", "work", lambda ctx: ctx.interrupt({"q": ctx.session["user"]}))
    async with Runner(agent, checkpoint_store=SQLiteCheckpointStore(tmp_path / "cp.db")) as runner:
        paused = await runner.invoke("hi", session={Key.USER: "Ann"})
        assert paused.checkpoint_id is not None
        resumed = await runner.invoke_resume(paused.checkpoint_id, "yes")
        assert resumed.session.values == {"user": "Ann"}
        again = await runner.invoke("hi", session=Session({Key.USER: "Bo"}))
        assert again.checkpoint_id is not None
    assert agent.runs == 3
