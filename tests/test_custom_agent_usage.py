"""The model calls a custom agent makes itself count in ``RunResult.usage`` and ``adk.run_usage``
when it emits their replies as events (``AgentEvent.of(reply)``, ``AgentEvent.streaming(...)``),
the way agents.md shows custom agents answer: counted as the run records the message, once, as a
``ReActAgent``'s are. They were not counted at all: only ``ReActAgent`` and the actions' chat
rounds added their replies' usage, so a run of custom agents reported ``None``, and a run mixing
them with ``ReActAgent`` reported a part."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from conftest import ChatActor, wire_model
from openai_server import OpenAIServer
from openai_server import Reply as WireReply

import adk
from adk import AgentEvent, AgentInput, AgentTool, BaseAgent, Message, RunContext, Runner, Usage
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatResponseEvent,
    OutputEvent,
    action,
)
from adk.models import ChatModel
from adk.testing import Reply, ScriptedModel
from prebuilt import ReActAgent


def used(i: int, o: int) -> Usage:
    return Usage(input_tokens=i, output_tokens=o, total_tokens=i + o)


def answering_3(agent_type: type[ActionAgent]) -> Runner:
    """A runner of ``agent_type`` whose model resource ``m`` answers "3" once, for 12 + 1 tokens."""
    resources = adk.Resources()
    resources.add_model("m", ScriptedModel([Reply("3", usage=used(12, 1))]))
    return Runner(agent_type("reviewed", resources=resources))


class Summarizer(BaseAgent):
    """A custom agent that calls its model itself and answers with the reply: streamed when the
    run streams, whole otherwise."""

    def __init__(self, name: str, model: ChatModel) -> None:
        super().__init__(name, description="Summarizes a text.")
        self.model = model

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        prompt = [Message.system("Summarize."), *input.messages]
        if input.enable_streaming:
            yield AgentEvent.streaming(adk.MessageStream(self.model.stream(prompt)))
        else:
            yield AgentEvent.of(await self.model.generate(prompt))


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_custom_agents_own_calls_count_over_the_wire(api: str, streaming: bool) -> None:
    async with OpenAIServer() as server:
        server.script(WireReply(text="short", usage=(40, 2)))
        async with wire_model(server, api) as model:
            runner = Runner(Summarizer("summary", model), enable_streaming=streaming)
            events = runner.run("a long text")
            async for event in events:
                if event.output is not None and event.output.stream is not None:
                    await event.output.stream.collect()
    assert adk.run_usage(events) == used(40, 2)
    assert adk.run_messages(events)[-1].content == "short"


@pytest.mark.parametrize("streaming", [False, True])
async def test_custom_and_react_agents_calls_sum_once_each(streaming: bool) -> None:
    """Beside a ``ReActAgent`` in a workflow, and inside an ``AgentTool``'s nested run: every
    reply once (the ``ReActAgent``'s replies are counted as recorded too, now, not twice)."""
    inner = Summarizer("inner", ScriptedModel([Reply("it is", usage=used(5, 1))]))
    tool_call = Reply(
        tool_calls=[adk.testing.tool_call("inner", {"request": "x"})], usage=used(10, 2)
    )
    lead = ReActAgent(
        "lead",
        ScriptedModel([tool_call, Reply("done", usage=used(20, 3))]),
        tools=[AgentTool(inner)],
    )
    first = Summarizer("first", ScriptedModel([Reply("gist", usage=used(7, 4))]))
    pipeline = adk.SequentialAgent("pipeline", [first, lead])
    result = await Runner(pipeline, enable_streaming=streaming).invoke("text")
    assert result.text == "done"
    assert result.usage == used(7, 4) + used(10, 2) + used(5, 1) + used(20, 3)


async def test_an_action_that_outputs_its_chat_reply_counts_it_once() -> None:
    """The chat action counts its rounds as it makes them (they need not become events); an
    action that sends the reply on as its output does not count it a second time."""

    class Asker(ChatActor):
        @action(ChatResponseEvent)
        def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            ctx.send_event(OutputEvent(output=event.response))  # the reply itself, usage and all

    result = await answering_3(Asker).invoke("1 + 2?")
    assert result.text == "3"
    assert result.messages[-1].usage == used(12, 1)
    assert result.usage == used(12, 1)


async def test_a_message_without_usage_counts_nothing() -> None:
    class Plain(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            yield AgentEvent.of("no model here")

    assert (await Runner(Plain("plain")).invoke("hi")).usage is None


async def test_a_chat_reply_output_after_a_pause_counts_once() -> None:
    """An action that has its chat reply reviewed before sending it (a pause on the
    ``ChatResponseEvent``) outputs it on resume: the one model call counts once. The reply
    restored from the checkpoint is another object than the one the chat round counted, and the
    checkpoint's usage already holds it, so it was counted a second time (26 tokens for 13)."""

    class Reviewed(ChatActor):
        @action(ChatResponseEvent)
        @staticmethod
        def answer(event: ChatResponseEvent, ctx: ActionContext) -> None:
            if ctx.resume is None:
                raise adk.Interrupt("send this answer?")
            ctx.send_event(OutputEvent(output=event.response))

    runner = answering_3(Reviewed)
    paused = await runner.invoke("1 + 2?")
    assert paused.interrupt is not None
    assert paused.usage == used(12, 1)
    resumed = await runner.invoke_resume(paused.interrupt.checkpoint_id, True)
    assert resumed.text == "3"
    assert resumed.usage == used(12, 1)


class Draft(adk.actions.Event):
    """An action's own event carrying the chat's reply on to a review (not a ChatResponseEvent)."""

    reply: Message


async def test_a_chat_reply_an_event_of_its_own_carries_past_a_pause_counts_once() -> None:
    """As above, with the reply passed on in an event of the application's own (a ``Draft`` a
    review action pauses on) and in the paused action's queue: restored from the checkpoint,
    each is another object than the one the chat round counted, and was counted again."""

    class Reviewed(ChatActor):
        @action(ChatResponseEvent)
        @staticmethod
        def draft(event: ChatResponseEvent, ctx: ActionContext) -> None:
            ctx.send_event(Draft(reply=event.response))
            ctx.send_event(Draft(reply=event.response))

        @action(Draft)
        @staticmethod
        def review(event: Draft, ctx: ActionContext) -> None:
            if ctx.resume is None:
                raise adk.Interrupt("send this answer?")
            ctx.send_event(OutputEvent(output=event.reply))

    runner = answering_3(Reviewed)
    paused = await runner.invoke("1 + 2?")
    assert paused.interrupt is not None
    assert paused.usage == used(12, 1)
    resumed = await runner.invoke_resume(paused.interrupt.checkpoint_id, True)
    assert resumed.interrupt is not None  # the second draft's review
    assert resumed.text == "3"
    assert resumed.usage == used(12, 1)
    done = await runner.invoke_resume(resumed.interrupt.checkpoint_id, True)
    assert done.text == "3"
    assert done.usage == used(12, 1)


class Review(adk.actions.Event):
    """Asks for a review of the draft an action keeps in sensory memory."""


@pytest.mark.parametrize("memory", ["sensory", "short_term"])
async def test_a_chat_reply_kept_in_memory_over_a_pause_counts_once(memory: str) -> None:
    """The reply kept in the input's sensory memory (or the agent's short-term memory, in the
    session) while a person is asked, and output on resume: the memory saved with the pause
    gives back another object, counted again."""

    class Reviewed(ChatActor):
        @action(ChatResponseEvent)
        @staticmethod
        def keep(event: ChatResponseEvent, ctx: ActionContext) -> None:
            kept = ctx.sensory_memory if memory == "sensory" else ctx.short_term_memory
            kept.set("draft", event.response)
            ctx.send_event(Review())

        @action(Review)
        @staticmethod
        def review(event: Review, ctx: ActionContext) -> None:
            if ctx.resume is None:
                raise adk.Interrupt("send this answer?")
            kept = ctx.sensory_memory if memory == "sensory" else ctx.short_term_memory
            ctx.send_event(OutputEvent(output=kept.get("draft")))

    runner = answering_3(Reviewed)
    paused = await runner.invoke("1 + 2?")
    assert paused.interrupt is not None
    resumed = await runner.invoke_resume(paused.interrupt.checkpoint_id, True)
    assert resumed.text == "3"
    assert resumed.usage == used(12, 1)
