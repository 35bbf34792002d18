"""A run's totals: ``RunResult.usage`` (every model call's reported usage, summed, nested
``AgentTool`` runs and the calls before a pause included) and ``RunResult.messages`` (the
conversation a next run carries on), and the same read while streaming with ``adk.run_usage`` /
``adk.run_messages``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from conftest import ChatActor, wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as WireReply

import adk
from adk import AgentTool, Message, Role, Runner, Usage
from adk.checkpoint.codec import CheckpointError
from adk.checkpoint.memory import InMemoryCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent, Supervisor


def used(i: int, o: int, *, cached: int = 0, reasoning: int = 0) -> Usage:
    return Usage(
        input_tokens=i,
        output_tokens=o,
        total_tokens=i + o,
        cached_input_tokens=cached,
        reasoning_output_tokens=reasoning,
    )


@adk.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adder(model: ScriptedModel) -> ReActAgent:
    return ReActAgent("calc", model, tools=[add], instruction="You add.")


def two_turns() -> ScriptedModel:
    return ScriptedModel(
        [
            Reply(
                tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="call_1")],
                usage=used(10, 5, cached=4, reasoning=2),
            ),
            Reply(text="2 + 3 = 5", usage=used(20, 6, reasoning=1)),
            lambda messages: Reply(text=f"heard {len(messages)}", usage=used(1, 1)),
        ]
    )


async def test_a_run_of_a_model_reporting_input_and_output_alone_has_their_total() -> None:
    """A scripted or custom model's ``Usage(input_tokens=, output_tokens=)``: the run's total
    was 0, so a ``total_tokens`` limit in a callback never tripped."""
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[tool_call("add", {"a": 2, "b": 3})],
                usage=Usage(input_tokens=10, output_tokens=5),
            ),
            Reply(text="5", usage=Usage(input_tokens=20, output_tokens=6)),
        ]
    )
    result = await Runner(adder(model)).invoke("2 + 3?")
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 11)
    assert result.usage.total_tokens == 41


@pytest.mark.parametrize("streaming", [False, True])
async def test_usage_sums_every_model_call_reasoning_and_cached_tokens_included(
    streaming: bool,
) -> None:
    runner = Runner(adder(two_turns()), enable_streaming=streaming)
    result = await runner.invoke("What is 2 + 3?")
    assert result.text == "2 + 3 = 5"
    assert result.usage == Usage(
        input_tokens=30,
        output_tokens=11,
        total_tokens=41,
        cached_input_tokens=4,
        reasoning_output_tokens=3,
    )


async def test_usage_is_none_when_no_call_reported_any() -> None:
    result = await Runner(adder(ScriptedModel(["hi"]))).invoke("hello")
    assert result.usage is None
    assert result.messages == [Message.user("hello"), result.events[-1].message]


@pytest.mark.parametrize("streaming", [False, True])
async def test_messages_carry_the_conversation_on(streaming: bool) -> None:
    """The input, the reply with its tool call, the tool result and the final reply (joined when
    streamed), without the instruction: given back with a new question, the model is asked the
    whole conversation once, its instruction first."""
    model = two_turns()
    runner = Runner(adder(model), enable_streaming=streaming)
    first = await runner.invoke("What is 2 + 3?")
    messages = first.messages
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert messages[0].content == "What is 2 + 3?"
    assert [c.id for c in messages[1].tool_calls] == ["call_1"]
    assert messages[2].content == "5" and messages[2].tool_call_id == "call_1"
    assert messages[3].content == "2 + 3 = 5"
    assert messages[3].usage == used(20, 6, reasoning=1)  # a streamed reply, joined

    second = await runner.invoke([*messages, Message.user("and plus 1?")])
    assert second.text == "heard 6"  # instruction, the 4 messages, the question
    asked = model.requests[-1].messages
    assert asked[0].role == Role.SYSTEM
    assert asked[1:] == [*messages, Message.user("and plus 1?")]
    assert second.usage == used(1, 1)  # the second run's own calls
    assert second.messages[:-1] == [*messages, Message.user("and plus 1?")]
    assert second.messages[-1].content == "heard 6"


@pytest.mark.parametrize("streaming", [False, True])
async def test_run_usage_and_messages_while_streaming_the_events(streaming: bool) -> None:
    """``adk.run_usage(events)`` / ``adk.run_messages(events)`` of ``runner.run``'s events: what
    ``invoke`` would give, without collecting the events first."""
    runner = Runner(adder(two_turns()), enable_streaming=streaming)
    events = runner.run("What is 2 + 3?")
    assert adk.run_usage(events) is None
    assert adk.run_messages(events) == [Message.user("What is 2 + 3?")]
    seen: list[Usage | None] = []
    async for event in events:
        if event.output is not None and event.output.stream is not None:
            async for _ in event.output.stream:
                pass
        seen.append(adk.run_usage(events))
    first, both = used(10, 5, cached=4, reasoning=2), used(30, 11, cached=4, reasoning=3)
    # A reply's usage counts by the time its event is read, so the last event's is the run's; a
    # streamed one's once the next event is asked for (its stream's end is the reader's).
    assert seen == ([None, first, first] if streaming else [first, first, both])
    total = adk.run_usage(events)
    assert total == used(10, 5, cached=4, reasoning=2) + used(20, 6, reasoning=1)
    invoked = await Runner(adder(two_turns()), enable_streaming=streaming).invoke("What is 2 + 3?")
    assert total == invoked.usage
    assert adk.run_messages(events) == invoked.messages


async def test_a_reader_that_stops_at_the_answer_has_every_call_counted() -> None:
    # A loop that breaks at the final answer (closing the run) has the run's usage: the last
    # call was counted only when the next event was asked for, so here never.
    events = Runner(adder(two_turns())).run("What is 2 + 3?")
    async for event in events:
        if event.message is not None and event.message.content == "2 + 3 = 5":
            break
    await events.aclose()
    assert adk.run_usage(events) == used(30, 11, cached=4, reasoning=3)


async def test_a_streaming_reader_that_stops_at_the_answer_has_every_call_counted() -> None:
    # A streamed answer was recorded (its usage counted, its message kept) only when the next
    # event was asked for: a reader that read it to its end and closed the run lacked its call
    # in run_usage and its message in run_messages, though the reply had come whole.
    events = Runner(adder(two_turns()), enable_streaming=True).run("What is 2 + 3?")
    async for event in events:
        stream = event.output.stream if event.output is not None else None
        if stream is not None and (await stream.collect()).content == "2 + 3 = 5":
            break
    await events.aclose()
    assert adk.run_usage(events) == used(30, 11, cached=4, reasoning=3)
    assert adk.run_messages(events)[-1].content == "2 + 3 = 5"


async def test_a_streamed_answer_not_read_to_its_end_is_not_recorded() -> None:
    # Closed while its reply was still arriving, the run records no part of it.
    events = Runner(adder(two_turns()), enable_streaming=True).run("What is 2 + 3?")
    streams = 0
    async for event in events:
        if event.output is not None and event.output.stream is not None:
            streams += 1
            if streams == 2:  # the answer's: left unread
                break
            await event.output.stream.collect()
    await events.aclose()
    assert adk.run_usage(events) == used(10, 5, cached=4, reasoning=2)
    assert [m.content for m in adk.run_messages(events)][-1] != "2 + 3 = 5"


async def test_run_usage_refuses_what_is_not_a_runs_events() -> None:
    async def events() -> AsyncIterator[adk.AgentEvent]:
        yield adk.AgentEvent()

    with pytest.raises(TypeError, match=r"run_usage\(\) takes the events Runner.run"):
        adk.run_usage(events())
    with pytest.raises(TypeError, match=r"run_messages\(\) takes the events Runner.run"):
        adk.run_messages([])  # type: ignore[arg-type]


def researcher_tool() -> AgentTool:
    inner = ReActAgent(
        "researcher",
        ScriptedModel(
            [
                Reply(tool_calls=[tool_call("add", {"a": 1, "b": 1})], usage=used(100, 10)),
                Reply(text="it is 2", usage=used(200, 20, reasoning=7)),
            ]
        ),
        description="Researches sums.",
        tools=[add],
    )
    return AgentTool(inner)


@pytest.mark.parametrize("streaming", [False, True])
async def test_usage_includes_an_agent_tools_nested_model_calls(streaming: bool) -> None:
    """The nested run's calls appear in no event of the outer run: summing the events' usage
    missed them."""

    def lead() -> ReActAgent:
        calls = Reply(tool_calls=[tool_call("researcher", {"request": "1+1"})], usage=used(1, 2))
        model = ScriptedModel([calls, Reply(text="2", usage=used(3, 4))])
        return ReActAgent("lead", model, tools=[researcher_tool()])

    runner = Runner(lead(), enable_streaming=streaming)
    result = await runner.invoke("what is 1+1?")
    expected = used(1, 2) + used(100, 10) + used(200, 20, reasoning=7) + used(3, 4)
    assert result.usage == expected
    # The conversation is the outer run's: the tool call and its result, not the nested turns.
    assert [m.role for m in result.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert result.messages[2].content == "it is 2"

    events = Runner(lead(), enable_streaming=streaming).run("what is 1+1?")
    async for _ in events:
        pass
    assert adk.run_usage(events) == expected


class _Refuse(adk.Callbacks):
    """An output guardrail: an ``after_model`` that raises on a reply it will not let through."""

    def after_model(self, ctx: adk.RunContext, request: object, reply: Message) -> None:
        if "secret" in reply.content:
            raise ValueError("refused")


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_reply_an_after_model_callback_refuses_still_counts(streaming: bool) -> None:
    """The model was called and its reply paid for, though no agent receives it: the refused
    call dropped out of the total, and inside an AgentTool, whose failure is the outer model's
    to read, out of a run that goes on and succeeds."""
    refused = Reply(text="the secret is 42", usage=used(50, 5))
    agent = ReActAgent("guarded", ScriptedModel([refused]), callbacks=[_Refuse()])
    events = Runner(agent, enable_streaming=streaming).run("tell me")
    async for event in events:
        if event.output is not None and event.output.stream is not None:
            with contextlib.suppress(ValueError):
                await event.output.stream.collect()
    assert adk.run_usage(events) == used(50, 5)

    inner = ReActAgent(
        "vault", ScriptedModel([refused]), description="Knows secrets.", callbacks=[_Refuse()]
    )
    calls = Reply(tool_calls=[tool_call("vault", {"request": "the secret"})], usage=used(1, 2))
    lead = ReActAgent(
        "lead",
        ScriptedModel([calls, Reply(text="I cannot say.", usage=used(3, 4))]),
        tools=[AgentTool(inner)],
    )
    result = await Runner(lead, enable_streaming=streaming).invoke("what is the secret?")
    assert result.messages[2].content.startswith("Error:")  # the nested run failed
    assert result.usage == used(1, 2) + used(50, 5) + used(3, 4)


async def test_a_failed_runs_error_carries_its_usage() -> None:
    """invoke raised RunError with the run's events and no usage, so a failed run's cost was
    lost to its caller (the OpenAI Agents SDK's exceptions carry it, run_data's usage)."""
    refused = Reply(text="the secret is 42", usage=used(50, 5))
    calls = Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})], usage=used(7, 1))
    agent = ReActAgent(
        "guarded", ScriptedModel([calls, refused]), tools=[add], callbacks=[_Refuse()]
    )
    with pytest.raises(adk.RunError) as failed:
        await Runner(agent).invoke("tell me")
    assert failed.value.usage == used(7, 1) + used(50, 5)

    again = ReActAgent("again", ScriptedModel([calls] * 3), tools=[add])
    with pytest.raises(adk.MaxTurnsExceeded) as limited:
        await Runner(again).invoke("add forever", max_turns=2)
    assert limited.value.usage == used(7, 1) + used(7, 1)

    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount once approved."""
        return f"paid {amount}"

    asks = Reply(tool_calls=[tool_call("pay", {"amount": 5}, id="call_p")], usage=used(10, 1))
    store = InMemoryCheckpointStore()
    payer = ReActAgent("payer", ScriptedModel([asks, ValueError("down")]), tools=[pay])
    runner = Runner(payer, checkpoint_store=store)
    paused = await runner.invoke("pay 5")
    assert paused.checkpoint_id is not None
    with pytest.raises(adk.RunError) as resumed:  # the resume's total holds the calls before
        await runner.invoke_resume(paused.checkpoint_id, True)
    assert resumed.value.usage == used(10, 1)
    assert adk.RunError.usage is None  # what a RunError raised elsewhere, or unpickled, reads


def approval_agent(store: InMemoryCheckpointStore) -> Runner:
    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount once approved."""
        return f"paid {amount}"

    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("pay", {"amount": 5}, id="call_p")], usage=used(10, 1)),
            Reply(text="done", usage=used(30, 3)),
        ]
    )
    return Runner(ReActAgent("payer", model, tools=[pay]), checkpoint_store=store)


async def test_a_resumed_runs_usage_includes_the_calls_before_its_pause() -> None:
    store = InMemoryCheckpointStore()
    runner = approval_agent(store)
    paused = await runner.invoke("pay 5")
    assert paused.checkpoint_id is not None and paused.usage == used(10, 1)

    # The paused run's conversation ends with the call that waits, which has no result yet.
    assert [m.role for m in paused.messages] == [Role.USER, Role.ASSISTANT]
    assert [c.id for c in paused.messages[-1].tool_calls] == ["call_p"]

    done = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
    assert done.text == "done"
    assert done.usage == used(10, 1) + used(30, 3)
    # The whole conversation, from the paused run's input.
    assert [m.role for m in done.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert done.messages[0].content == "pay 5" and done.messages[2].content == "paid 5"


async def test_the_streamed_resumes_usage_includes_the_calls_before_its_pause() -> None:
    store = InMemoryCheckpointStore()
    runner = approval_agent(store)
    paused = await runner.invoke("pay 5")
    assert paused.checkpoint_id is not None
    events = runner.resume(paused.checkpoint_id, {"approved": True})
    assert adk.run_usage(events) is None  # the checkpoint is not read yet
    async for _ in events:
        pass
    assert adk.run_usage(events) == used(10, 1) + used(30, 3)
    assert adk.run_messages(events)[-1].content == "done"


async def test_a_resumes_messages_before_it_read_its_checkpoint_are_an_error_not_empty() -> None:
    """``run_messages`` of a resume that had not read its checkpoint was ``[]``: a service that
    keeps a turn's ``run_messages(events)`` in a ``finally`` (keeping a cut run's conversation
    "works too") replaced the session's conversation with nothing when the resume was refused
    at its first event (a checkpoint resumed already, a store down) or cut off before it. Nothing
    of such a resume ran: it is a ``RuntimeError`` saying so, and the conversation is kept."""
    store = InMemoryCheckpointStore()
    runner = approval_agent(store)
    paused = await runner.invoke("pay 5")
    assert paused.checkpoint_id is not None
    conversation = paused.messages[:1]  # the service's, before the paused turn

    events = runner.resume(paused.checkpoint_id, {"approved": True})
    with pytest.raises(RuntimeError, match="has not begun its run yet") as unread:
        adk.run_messages(events)
    assert repr(paused.checkpoint_id) in str(unread.value)
    assert adk.run_usage(events) is None  # no call made yet: as before
    async with contextlib.aclosing(events):
        async for _ in events:
            pass
    assert [m.role for m in adk.run_messages(events)][-1] == Role.ASSISTANT  # read: as before

    again = runner.resume(paused.checkpoint_id, {"approved": True})  # resumed already: gone
    try:
        async with contextlib.aclosing(again):
            async for _ in again:
                pass
    except adk.CheckpointNotFoundError:
        pass
    finally:
        with pytest.raises(RuntimeError, match="ended before its run began"):
            conversation = adk.run_messages(again)  # was [], the conversation emptied
    assert [m.content for m in conversation] == ["pay 5"]
    assert adk.run_usage(again) is None

    closed = runner.resume("never-read", True)  # closed before its first event
    await closed.aclose()
    with pytest.raises(RuntimeError, match="'never-read' ended before its run began"):
        adk.run_messages(closed)


async def paused_with_usage(store: InMemoryCheckpointStore, usage: object) -> tuple[Runner, str]:
    """A run paused for approval, its checkpoint's saved usage (10 in, 1 out) replaced by
    ``usage`` (``None``: removed, as an older pyadk wrote it)."""
    runner = approval_agent(store)
    paused = await runner.invoke("pay 5")
    assert paused.checkpoint_id is not None
    async with rewrite_checkpoint(store, paused.checkpoint_id) as body:
        assert body["usage"] == used(10, 1).model_dump()
        if usage is None:
            del body["usage"]
        else:
            body["usage"] = usage
    return runner, paused.checkpoint_id


async def test_an_older_checkpoint_without_usage_resumes_counting_from_the_resume() -> None:
    runner, checkpoint_id = await paused_with_usage(InMemoryCheckpointStore(), None)

    done = await runner.invoke_resume(checkpoint_id, {"approved": True})
    assert done.usage == used(30, 3)


@pytest.mark.parametrize(
    "bad", [{"input_tokens": "10"}, {"tokens": 1}, [10, 1], {"input_tokens": -1}]
)
async def test_a_checkpoint_with_a_malformed_usage_is_refused_and_kept(bad: object) -> None:
    store = InMemoryCheckpointStore()
    runner, checkpoint_id = await paused_with_usage(store, bad)

    with pytest.raises(CheckpointError, match="usage is not a map of token counts"):
        await runner.invoke_resume(checkpoint_id, {"approved": True})
    assert await store.get(checkpoint_id) is not None


async def test_a_supervisors_messages_are_all_for_context() -> None:
    """A next run gives its input to every agent as it is: the supervisor's words and calls, and
    a worker's, are the ``For context:`` user messages every other agent reads during a run, so
    no agent takes another's words, or tool calls it does not have, for its own."""
    weather = ReActAgent(
        "weather",
        ScriptedModel([Reply(text="Sunny.", usage=used(5, 1)), "Rain."]),
        description="Knows the weather.",
    )
    transfer = Reply(
        tool_calls=[tool_call("transfer_to_agent", {"agent_name": "weather"}, id="t1")],
        usage=used(2, 1),
    )
    boss_model = ScriptedModel(
        [transfer, Reply(text="It is sunny.", usage=used(7, 2)), transfer, "Rain tomorrow."]
    )
    runner = Runner(Supervisor(ReActAgent("boss", boss_model, description="Delegates."), [weather]))
    result = await runner.invoke("Weather in Oslo?")
    assert result.usage == used(2, 1) + used(5, 1) + used(7, 2)
    messages = result.messages
    assert messages[0] == Message.user("Weather in Oslo?")
    assert all(m.role == Role.USER for m in messages)
    said = [m.content for m in messages[1:]]
    assert said[0].startswith("For context: [boss] called tool: `transfer_to_agent`")
    assert any(m.startswith("For context: [weather] said: Sunny.") for m in said)
    assert said[-1].startswith("For context: [boss] said: It is sunny.")

    second = await runner.invoke([*messages, Message.user("And tomorrow?")])
    assert second.text == "Rain tomorrow."
    # The worker reads the first turn as context: no tool call or answer it did not make.
    seen = weather.model.requests[1].messages  # type: ignore[attr-defined]
    assert all(m.role == Role.USER for m in seen[: len(messages) + 1])


async def test_a_root_agent_with_sub_agents_gives_even_its_own_messages_as_context() -> None:
    """A ReActAgent with sub-agents that answered alone: a next run may transfer, and the
    sub-agent would then read the root's answer as its own."""
    helper = ReActAgent("helper", ScriptedModel(["unused"]), description="Helps.")
    root = ReActAgent("root", ScriptedModel(["hi there"]), sub_agents=[helper])
    result = await Runner(root).invoke("hello")
    assert result.messages[0] == Message.user("hello")
    assert [(m.role, m.content) for m in result.messages[1:]] == [
        (Role.USER, "For context: [root] said: hi there.")
    ]


# -- against the OpenAI wire server (tests/openai_server.py), usage as the server reports it ----


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("streaming", [False, True])
async def test_openai_models_usage_and_conversation_over_the_wire(
    api: str, streaming: bool
) -> None:
    async with OpenAIServer() as server:
        server.script(
            WireReply(
                tool_calls=[Call("add", '{"a": 2, "b": 3}', id="call_w")],
                usage=(11, 7),
                cached_tokens=4,
                reasoning_tokens=3,
            ),
            WireReply(text="2 + 3 = 5", usage=(30, 5)),
            WireReply(text="6", usage=(50, 1)),
        )
        model = wire_model(server, api)
        async with model:
            runner = Runner(ReActAgent("calc", model, tools=[add]), enable_streaming=streaming)
            events = runner.run("What is 2 + 3?")
            async for event in events:
                if event.output is not None and event.output.stream is not None:
                    await event.output.stream.collect()
            first = Usage(
                input_tokens=11,
                output_tokens=7,
                total_tokens=18,
                cached_input_tokens=4,
                reasoning_output_tokens=3,
            )
            assert adk.run_usage(events) == first + Usage(
                input_tokens=30, output_tokens=5, total_tokens=35
            )
            messages = adk.run_messages(events)
            assert [m.role for m in messages] == [
                Role.USER,
                Role.ASSISTANT,
                Role.TOOL,
                Role.ASSISTANT,
            ]
            assert messages[-1].content == "2 + 3 = 5"

            second = await runner.invoke([*messages, Message.user("plus 1?")])
        assert second.text == "6"
        assert second.usage == Usage(input_tokens=50, output_tokens=1, total_tokens=51)
        sent = server.requests[2].body
        if api == "chat":
            assert [m["role"] for m in sent["messages"]] == [
                "user",
                "assistant",
                "tool",
                "assistant",
                "user",
            ]
            assert sent["messages"][1]["tool_calls"][0]["id"] == "call_w"
            assert sent["messages"][3]["content"] == "2 + 3 = 5"
        else:
            kinds = [item.get("type", item.get("role")) for item in sent["input"]]
            assert kinds == ["user", "function_call", "function_call_output", "assistant", "user"]
            assert sent["input"][1]["call_id"] == "call_w"


async def test_an_action_agents_chat_rounds_count() -> None:
    """The built-in chat action calls the model outside any ReActAgent: its rounds count too."""

    resources = adk.Resources()
    resources.add_model(
        "m",
        ScriptedModel(
            [
                Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})], usage=used(8, 2)),
                Reply(text="3", usage=used(12, 1, reasoning=1)),
            ]
        ),
    )
    resources.add_tool(add)
    result = await Runner(ChatActor("asker", ["add"], resources=resources)).invoke("1 + 2?")
    assert result.text == "3"
    assert result.usage == used(8, 2) + used(12, 1, reasoning=1)


class TokenLimitExceeded(Exception):
    """A port's pydantic-ai ``UsageLimitExceeded``."""


class TokenLimit(adk.Callbacks):
    """pydantic-ai's ``UsageLimits(total_tokens_limit=...)`` as a callback: no model call once
    the run's calls, nested runs' included, have used the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.seen: list[tuple[str, Usage | None]] = []

    def before_model(self, ctx: adk.RunContext, request: object) -> None:
        self.seen.append((ctx.agent_name, ctx.usage))
        if ctx.usage is not None and ctx.usage.total_tokens >= self.limit:
            raise TokenLimitExceeded(f"{ctx.usage.total_tokens} tokens used of {self.limit}")


async def test_a_callback_reads_the_runs_usage_so_far_nested_calls_included() -> None:
    """A limit on a run's tokens (pydantic-ai's ``UsageLimits``, with ``usage=ctx.usage`` passed
    to a delegate) needs the run's total while it runs: ``RunResult.usage`` comes at the end, and
    ``run_usage`` takes the events, which a callback does not have."""
    calls = Reply(tool_calls=[tool_call("researcher", {"request": "1+1"})], usage=used(1, 2))
    model = ScriptedModel([calls, Reply(text="2", usage=used(3, 4))])
    limit = TokenLimit(1000)
    runner = Runner(ReActAgent("lead", model, tools=[researcher_tool()]), callbacks=[limit])
    result = await runner.invoke("what is 1+1?")
    assert result.usage == used(1, 2) + used(100, 10) + used(200, 20, reasoning=7) + used(3, 4)
    assert limit.seen == [
        ("lead", None),
        ("researcher", used(1, 2)),  # the nested run reads the enclosing run's total
        ("researcher", used(1, 2) + used(100, 10)),
        ("lead", used(1, 2) + used(100, 10) + used(200, 20, reasoning=7)),
    ]

    low = TokenLimit(100)  # used up by the nested run's first call
    model = ScriptedModel([calls, Reply(text="never asked")])
    runner = Runner(ReActAgent("lead", model, tools=[researcher_tool()]), callbacks=[low])
    with pytest.raises(adk.RunError) as failed:
        await runner.invoke("what is 1+1?")
    assert isinstance(failed.value.__cause__, TokenLimitExceeded)
    assert str(failed.value.__cause__) == "113 tokens used of 100"
    assert len(model.requests) == 1  # the lead's second call was not made


# -- a run cut off mid-round: its conversation is one a model API takes ----------------------------

_started: list[asyncio.Event] = []  # the running test's (an event belongs to its loop)


@adk.tool
async def lookup(city: str) -> str:
    """Look a city up; runs until the run is cut off."""
    _started[-1].set()
    await asyncio.Event().wait()
    return city


@pytest.mark.parametrize("cut", ["closed", "timed out"])
async def test_a_run_cut_off_mid_round_gives_messages_a_model_api_takes(cut: str) -> None:
    """A run closed by its reader (a client gone) or cancelled by a timeout while a tool ran
    gave ``run_messages`` ending with the model's calls and the results of only those that had
    returned: OpenAI refused it as the next input ("An assistant message with 'tool_calls' must
    be followed by tool messages responding to each 'tool_call_id'"), so a service that kept it
    could not carry the conversation on. Each call left without a result now gets one saying it
    did not complete, after the others, and the conversation goes on over the wire."""
    _started.append(asyncio.Event())
    async with OpenAIServer() as server:
        server.script(
            WireReply(
                tool_calls=[
                    Call("add", '{"a": 2, "b": 3}', id="call_a"),
                    Call("lookup", '{"city": "Oslo"}', id="call_b"),
                ]
            ),
            WireReply(text="Sorry, the lookup did not finish; 2 + 3 = 5."),
        )
        async with wire_model(server, "chat") as model:
            runner = Runner(ReActAgent("calc", model, tools=[add, lookup]))
            events = runner.run("2 + 3, and the weather in Oslo?")
            if cut == "closed":
                async with contextlib.aclosing(events):
                    async for event in events:
                        if event.output is not None and event.output.role == Role.TOOL:
                            break  # the add result: lookup is still running
            else:
                added = asyncio.Event()

                async def read() -> None:
                    async for event in events:
                        if event.output is not None and event.output.role == Role.TOOL:
                            added.set()  # lookup is still running

                reading = asyncio.ensure_future(read())
                await added.wait()
                reading.cancel()  # as asyncio.timeout would
                with pytest.raises(asyncio.CancelledError):
                    await reading
            messages = adk.run_messages(events)
            assert [(m.role, m.tool_call_id) for m in messages] == [
                (Role.USER, None),
                (Role.ASSISTANT, None),
                (Role.TOOL, "call_a"),
                (Role.TOOL, "call_b"),
            ]
            assert messages[2].content == "5" and "did_not_complete" not in messages[2].metadata
            closing = messages[3]
            assert closing.name == "lookup" and closing.metadata == {"did_not_complete": True}
            assert closing.content.startswith("Error: the call did not complete")

            carried = await runner.invoke([*messages, Message.user("so?")])
        assert carried.text == "Sorry, the lookup did not finish; 2 + 3 = 5."
        sent = server.requests[1].body["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]


async def test_a_reader_cancelled_between_events_is_told_to_read_the_messages_once_closed() -> None:
    """A service's reader cancelled while it was not reading (sending an event to its client, a
    timeout there), the run's events left unclosed: the run waits at the event it gave, so
    ``run_messages`` takes it as still going and its model's call has no result yet, and a next
    run on those messages was refused with the advice to resume its checkpoint, which there is
    none of. The refusal says both now; once the events are closed the call is answered as not
    completed, and the conversation goes on."""
    _started.append(asyncio.Event())  # (lookup never starts: the reader stops at its call)
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("lookup", {"city": "Oslo"}, id="call_o")]), "Sorry."]
    )
    runner = Runner(ReActAgent("w", model, tools=[lookup]))
    events = runner.run("weather?")
    sending = asyncio.Event()

    async def read() -> None:
        async for event in events:
            if event.message is not None and event.message.tool_calls:
                sending.set()
                await asyncio.Event().wait()  # sending it to a client that does not read

    reading = asyncio.ensure_future(read())
    await sending.wait()
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    seen = adk.run_messages(events)  # not closed: a run still going, its call open
    assert [(m.role, m.tool_call_id) for m in seen] == [(Role.USER, None), (Role.ASSISTANT, None)]
    with pytest.raises(ValueError) as refused:
        runner.run([*seen, Message.user("so?")])
    said = str(refused.value)
    assert "if its run paused there, resume its checkpoint" in said, said
    assert "if its run was cut off" in said and "read them once closed" in said, said

    await events.aclose()
    closed = adk.run_messages(events)
    assert [(m.role, m.tool_call_id) for m in closed][-1] == (Role.TOOL, "call_o")
    assert closed[-1].metadata == {"did_not_complete": True}
    assert (await runner.invoke([*closed, Message.user("so?")])).text == "Sorry."


async def test_a_paused_runs_messages_keep_the_call_that_waits_and_a_running_one_is_untouched() -> (
    None
):
    """A paused run's call is answered by its resume, so its messages keep it open (a result
    saying it did not complete would be false); nor is a call answered while the run runs."""
    _started.append(asyncio.Event())

    @adk.tool(require_approval=True)
    def pay(cents: int) -> str:
        """Pay."""
        return f"paid {cents}"

    model = ScriptedModel([Reply(tool_calls=[tool_call("pay", {"cents": 5}, id="call_p")])])
    paused = await Runner(ReActAgent("payer", model, tools=[pay])).invoke("pay 5")
    assert paused.interrupt is not None
    assert [m.role for m in paused.messages] == [Role.USER, Role.ASSISTANT]

    model = ScriptedModel([Reply(tool_calls=[tool_call("lookup", {"city": "Oslo"}, id="c")])])
    events = Runner(ReActAgent("w", model, tools=[lookup])).run("weather?")
    async with contextlib.aclosing(events):
        async for _ in events:  # the model's call, whose lookup runs once the event is taken
            assert [m.role for m in adk.run_messages(events)] == [Role.USER, Role.ASSISTANT]
            break
    assert [m.role for m in adk.run_messages(events)][-1] == Role.TOOL  # closed: answered


def _weather_calls(*cities: str) -> Reply:
    return Reply(tool_calls=[tool_call("weather", {"city": c}) for c in cities])


@adk.tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@adk.tool(require_approval=True)
def approved_pay(cents: int) -> str:
    """Pay, once a person approves."""
    return f"paid {cents}"


async def _ended_runs_messages(kind: str) -> list[Message]:
    """The messages of a run of ``kind``, read as a service keeps them once the run is over."""
    if kind == "resumed after its pause":
        model = ScriptedModel(
            [
                Reply(
                    tool_calls=[
                        tool_call("approved_pay", {"cents": 5}),
                        *_weather_calls("Oslo").tool_calls,
                    ]
                ),
                "paid",
            ]
        )
        runner = Runner(
            ReActAgent("payer", model, tools=[approved_pay, weather]),
            checkpoint_store=InMemoryCheckpointStore(),
        )
        paused = await runner.invoke("pay 5 and the weather")
        assert paused.checkpoint_id is not None
        return (await runner.invoke_resume(paused.checkpoint_id, True)).messages
    if kind == "an agent tool's":
        inner = ReActAgent(
            "forecaster",
            ScriptedModel([_weather_calls("Oslo"), "sunny"]),
            tools=[weather],
            description="Forecasts.",
        )
        outer_model = ScriptedModel(
            [Reply(tool_calls=[tool_call("forecaster", {"request": "Oslo?"})]), "it is sunny"]
        )
        return (
            await Runner(ReActAgent("outer", outer_model, tools=[AgentTool(inner)])).invoke("go")
        ).messages
    if kind == "cut by max_turns":
        model = ScriptedModel([_weather_calls("Oslo", "Rome")] * 3)
        events = Runner(ReActAgent("w", model, tools=[weather])).run("go", max_turns=2)
        async with contextlib.aclosing(events):
            seen = [event async for event in events]
        assert seen[-1].error is not None and seen[-1].error.type == "MaxTurnsExceeded"
        return adk.run_messages(events)
    if kind == "ended by an exit call beside another":
        model = ScriptedModel(
            [
                Reply(
                    tool_calls=[
                        tool_call("exit", {"final_result": "bye"}),
                        *_weather_calls("Oslo").tool_calls,
                    ]
                )
            ]
        )
        agent = ReActAgent("w", model, tools=[weather], exit_tool=True)
        return (await Runner(agent).invoke("go")).messages
    assert kind == "ended by a return_directly call beside another"
    model = ScriptedModel([_weather_calls("Oslo", "Rome")])
    agent = ReActAgent("w", model, tools=[weather], return_directly=["weather"])
    return (await Runner(agent).invoke("go")).messages


@pytest.mark.parametrize(
    "kind",
    [
        "resumed after its pause",
        "an agent tool's",
        "cut by max_turns",
        "ended by an exit call beside another",
        "ended by a return_directly call beside another",
    ],
)
async def test_an_ended_runs_messages_are_taken_as_the_next_runs_input(kind: str) -> None:
    """A run's messages once it is over (not paused) are what a service carries on: the run
    input's check of tool turns (``_tool_turns.refusal``) must take them whatever ended the run,
    and the next model call gets them as they are. (Reviewed: every kind was taken; this pins it
    beside the cut-off and supervisor runs' tests above.)"""
    messages = await _ended_runs_messages(kind)
    assert any(m.tool_calls for m in messages), messages  # a conversation with tool turns
    model = ScriptedModel(["next answer"])
    result = await Runner(ReActAgent("next", model)).invoke([*messages, Message.user("next")])
    assert result.text == "next answer"
    assert model.requests[0].messages[-len(messages) - 1 : -1] == messages
