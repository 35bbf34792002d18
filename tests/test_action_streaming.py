"""The built-in chat action streams under ``Runner(enable_streaming=True)``, as ``ReActAgent``
does: each model call is an ``AgentEvent.streaming`` event the caller reads as it arrives.

Only shown: what the run records (history, usage, ``RunResult.output``), checkpoints and sends as
events (``ChatResponseEvent``, ``ToolRequestEvent``) is what it is without streaming, and a run
that does not stream never calls the model's ``stream``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import aclosing
from typing import Any

import pytest
from conftest import Quiet, pay, wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as WireReply
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adk import (
    AgentEvent,
    AgentTool,
    Interrupt,
    Message,
    ModelOptions,
    Resources,
    RunError,
    Runner,
    SequentialAgent,
    Usage,
    run_usage,
    tool,
)
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    action,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import decode_checkpoint
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tracing import CAPTURE_CONTENT_ENV
from prebuilt import PlanExecute, ReActAgent, new_planner, new_replanner


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


class Calculator(ActionAgent):
    """Asks its model with the ``add`` tool, and outputs the answer with a note of its own."""

    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        request = ChatRequestEvent(model="m", messages=[Message.user(event.input)], tools=["add"])
        ctx.send_event(request)

    @action(ToolRequestEvent, ChatResponseEvent)
    def watch(self, event: Event, ctx: ActionContext) -> None:
        seen = ctx.sensory_memory.get("seen") or []
        ctx.sensory_memory.set("seen", [*seen, type(event).__name__])

    @action(ChatResponseEvent)
    def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output={"seen": ctx.sensory_memory.get("seen")}))
        ctx.send_event(OutputEvent(output=event.response.content))


def _script() -> list[Any]:
    return [
        Reply(
            "Let me add.",
            tool_calls=[tool_call("add", {"a": 1, "b": 2})],
            usage=Usage(input_tokens=5, output_tokens=2, total_tokens=7),
        ),
        Reply("The sum is 3.", usage=Usage(input_tokens=9, output_tokens=4, total_tokens=13)),
    ]


def _resources(model: Any) -> Resources:
    resources = Resources()
    resources.add_model("m", model)
    resources.add_tool(add)
    resources.add_tool(pay)
    return resources


async def _shown(events: list[AgentEvent]) -> list[str]:
    """The text of each streamed event, read chunk by chunk as a caller prints it."""
    texts = []
    for event in events:
        if event.output is not None and event.output.stream is not None:
            texts.append("".join([chunk.content async for chunk in event.output.stream]))
    return texts


async def test_each_model_call_streams_to_the_caller_as_it_arrives() -> None:
    model = ScriptedModel(_script())
    runner = Runner(Calculator("calc", resources=_resources(model)), enable_streaming=True)
    events = []
    async for event in runner.run("1+2?"):
        events.append(event)
        if event.output is not None and event.output.stream is not None:
            # Read while the run waits: the chat action goes on once the reply has arrived.
            assert [c.content async for c in event.output.stream]
    assert await _shown(events) == ["Let me add.", "The sum is 3."]
    assert [request.stream for request in model.requests] == [True, True]
    streamed = [e for e in events if e.output is not None and e.output.stream is not None]
    assert all(e.agent_name == "calc" and e.output.role == "assistant" for e in streamed)


async def test_a_streaming_run_records_outputs_and_sends_what_one_without_does() -> None:
    results = {}
    for streaming in (False, True):
        model = ScriptedModel(_script())
        runner = Runner(Calculator("calc", resources=_resources(model)), enable_streaming=streaming)
        results[streaming] = (await runner.invoke("1+2?"), model)
    plain, streamed = results[False][0], results[True][0]
    # The same outputs, the streamed replies beside them; the events the actions got alike.
    assert [e.output for e in streamed.events if e.output.stream is None] == [
        e.output for e in plain.events
    ]
    assert plain.text == streamed.text == "The sum is 3."
    assert streamed.events[-2].output.custom == {"seen": ["ToolRequestEvent", "ChatResponseEvent"]}
    # Nothing of the chat in history (the agent's outputs only), usage counted once.
    assert streamed.messages == plain.messages
    assert [m.content for m in streamed.messages] == ["1+2?", "The sum is 3."]
    assert streamed.usage == plain.usage
    assert streamed.usage is not None and streamed.usage.total_tokens == 20
    # The model was asked the same, streamed or not.
    asked = [[r.messages for r in model.requests] for _, model in results.values()]
    assert asked[0] == asked[1]


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_runs_model_options_reach_the_chat_over_the_requests_own(
    streaming: bool,
) -> None:
    """The chat action's model call takes ``ctx.generate``'s path, run options included: the
    run's ``"model_options"`` merged over the ``ChatRequestEvent``'s ``options``, as over a
    ``ReActAgent``'s, each round. The chat sent the request's options alone."""

    class Asker(ActionAgent):
        @action(InputEvent)
        def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            options = ModelOptions(max_tokens=40, temperature=0.9)
            messages = [Message.user(event.input)]
            ctx.send_event(ChatRequestEvent(model="m", messages=messages, options=options))

        @action(ChatResponseEvent)
        def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))

    model = ScriptedModel(["one", "two"])
    runner = Runner(Asker("asker", resources=_resources(model)), enable_streaming=streaming)
    result = await runner.invoke("x", options={"model_options": {"temperature": 0.2}})
    assert result.text == "one"
    await runner.invoke("x")
    given, plain = (request.options for request in model.requests)
    assert given == ModelOptions(max_tokens=40, temperature=0.2)
    assert plain == ModelOptions(max_tokens=40, temperature=0.9)
    assert [request.stream for request in model.requests] == [streaming, streaming]


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_forced_tool_choice_is_dropped_after_the_chats_first_tool_round(
    streaming: bool,
) -> None:
    """A ``tool_choice`` that forces a tool, the request's own or the run's ``"model_options"``,
    holds for the chat's first call only, as a ``ReActAgent``'s (``reset_tool_choice``): sent
    every round, the model could only call tools and the chat failed at ``max_tool_rounds``,
    and a run-wide one that ``ReActAgent``s take in stride failed an event-driven agent's chat
    of the same run."""

    class Forced(ActionAgent):
        @action(InputEvent)
        def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            options = ModelOptions(tool_choice=event.input or None, temperature=0.5)
            messages = [Message.user("1+2?")]
            request = ChatRequestEvent(model="m", messages=messages, tools=["add"], options=options)
            ctx.send_event(request)

        @action(ChatResponseEvent)
        def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))

    model = ScriptedModel(_script() + _script())
    runner = Runner(Forced("forced", resources=_resources(model)), enable_streaming=streaming)
    assert (await runner.invoke("required")).text == "The sum is 3."
    run_wide = {"model_options": {"tool_choice": {"type": "function", "name": "add"}}}
    assert (await runner.invoke("", options=run_wide)).text == "The sum is 3."
    chosen = [(r.options.tool_choice, r.options.temperature) for r in model.requests if r.options]
    assert chosen == [
        ("required", 0.5),
        (None, 0.5),  # the model must be free to answer
        ({"type": "function", "name": "add"}, 0.5),
        (None, 0.5),
    ]


async def test_a_run_that_does_not_stream_never_calls_stream() -> None:
    class NoStream:
        model_name = "no-stream"

        def __init__(self) -> None:
            self.inner = ScriptedModel(_script())

        async def generate(self, messages: Any, *, tools: Any = (), options: Any = None) -> Any:
            return await self.inner.generate(messages, tools=tools, options=options)

    result = await Runner(Calculator("calc", resources=_resources(NoStream()))).invoke("1+2?")
    assert result.text == "The sum is 3."


def quiet(name: str = "quiet") -> Quiet:
    resources = Resources()
    resources.add_model("m", ScriptedModel(["kept, not said"]))
    return Quiet(name, "Asks quietly.", resources=resources)


async def test_a_model_without_stream_fails_a_streaming_chat_saying_so() -> None:
    class NoStream:
        model_name = "no-stream"

        async def generate(self, messages: Any, *, tools: Any = (), options: Any = None) -> Any:
            return Message.assistant("never streamed")

    runner = Runner(Calculator("calc", resources=_resources(NoStream())), enable_streaming=True)
    with pytest.raises(RunError, match=r"model NoStream has no stream\(\) method"):
        await runner.invoke("1+2?")


async def test_a_shown_reply_is_not_the_runs_output_when_no_output_follows() -> None:
    result = await Runner(quiet(), enable_streaming=True).invoke("go")
    assert await _shown(result.events) == ["kept, not said"]
    assert result.text == "asking"
    assert result.session["memory:quiet"] == {"reply": "kept, not said"}
    assert [m.content for m in result.messages] == ["go", "asking"]


async def test_a_resumed_runs_output_is_not_a_shown_reply() -> None:
    class Gated(Quiet):
        @action(InputEvent)
        def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            if ctx.resume is None:
                raise Interrupt("ask?")
            ctx.send_event(OutputEvent(output="approved"))
            ctx.send_event(ChatRequestEvent(model="m", messages=[Message.user("hi")]))

    resources = Resources()
    resources.add_model("m", ScriptedModel(["kept, not said"]))
    store = InMemoryCheckpointStore()
    runner = Runner(
        Gated("gated", resources=resources), checkpoint_store=store, enable_streaming=True
    )
    await runner.invoke("go", checkpoint_id="c1")
    done = await runner.invoke_resume("c1", "yes")
    assert await _shown(done.events) == ["kept, not said"]
    assert done.text == "approved"


async def test_an_agent_tools_result_and_a_plan_steps_result_are_not_a_shown_reply() -> None:
    boss_model = ScriptedModel([Reply(tool_calls=[tool_call("quiet", {"request": "go"})]), "ok"])
    boss = ReActAgent("boss", boss_model, tools=[AgentTool(quiet(), emit_inner_events=True)])
    events = [e async for e in Runner(boss, enable_streaming=True).run("go")]
    assert "kept, not said" in await _shown(events)  # shown outside, as the nested run's are
    [result] = [m for m in boss_model.requests[1].messages if m.role == "tool"]
    assert result.content == "asking"

    replanner_model = ScriptedModel(["All done."])
    agent = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["ask quietly"]})])),
        quiet("executor"),
        new_replanner(replanner_model),
    )
    done = await Runner(agent, enable_streaming=True).invoke("plan it")
    assert done.text == "All done."
    asked = "\n".join(m.content for m in replanner_model.requests[0].messages)
    assert "asking" in asked and "kept, not said" not in asked


async def test_an_agent_span_answer_is_not_a_shown_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        runner = Runner(quiet(), enable_streaming=True, tracer_provider=provider)
        await runner.invoke("go")
    finally:
        provider.shutdown()
    [span] = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent quiet"]
    [answer] = json.loads((span.attributes or {})["gen_ai.output.messages"])
    assert answer["parts"][0]["content"] == "asking"
    [chat] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert "kept, not said" in (chat.attributes or {})["gen_ai.output.messages"]


async def test_a_pause_in_a_streaming_chat_saves_what_one_without_saves() -> None:
    class Payer(ActionAgent):
        @action(InputEvent)
        def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.send_event(
                ChatRequestEvent(model="m", messages=[Message.user("pay 5")], tools=["pay"])
            )

        @action(ChatResponseEvent)
        def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))

    def script() -> ScriptedModel:
        return ScriptedModel(
            [Reply("Paying.", tool_calls=[tool_call("pay", {"amount": 5})], usage=None), "Paid."]
        )

    states = {}
    for streaming in (False, True):
        store = InMemoryCheckpointStore()
        runner = Runner(
            Payer("payer", resources=_resources(script())),
            checkpoint_store=store,
            enable_streaming=streaming,
        )
        events = [event async for event in runner.run("go", checkpoint_id="c1")]
        assert await _shown(events) == (["Paying."] if streaming else [])
        body = decode_checkpoint((await store.get("c1")) or b"", "c1")
        assert body["history"] == []  # the chat's replies are the chat's, not the history's
        state = body["states"]["agent:payer"][""]
        states[streaming] = json.loads(
            json.dumps(state["chats"]).replace(state["event"]["fields"]["id"], "<id>")
        )
        # Resumed, the chat's next call streams too.
        resumed = [e async for e in runner.resume("c1", {"approved": True})]
        assert await _shown(resumed) == (["Paid."] if streaming else [])
        assert [e.message.content for e in resumed if e.message] == ["Paid."]
    [plain, streamed] = [list(states[False].values()), list(states[True].values())]
    for chat in (*plain, *streamed):
        chat["request"]["fields"].pop("id")
    assert plain == streamed


async def test_inside_a_sequence_and_an_agent_tool_the_shown_reply_is_no_answer() -> None:
    class Drafter(ActionAgent):
        @action(InputEvent)
        def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.send_event(ChatRequestEvent(model="m", messages=[Message.user(event.input)]))

        @action(ChatResponseEvent)
        def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            ctx.send_event(OutputEvent(output=f"draft: {event.response.content}"))

    def drafter() -> Drafter:
        resources = Resources()
        resources.add_model("m", ScriptedModel(["raw words"]))
        return Drafter("drafter", "Drafts a text.", resources=resources)

    reviewer_model = ScriptedModel(["reviewed"])
    sequence = SequentialAgent("flow", [drafter(), ReActAgent("reviewer", reviewer_model)])
    done = await Runner(sequence, enable_streaming=True).invoke("write")
    assert done.text == "reviewed"
    # The reviewer read the drafter's output, not its chat's reply.
    [_, seen] = reviewer_model.requests[0].messages
    assert seen.content == "For context: [drafter] said: draft: raw words."

    boss_model = ScriptedModel(
        [Reply(tool_calls=[tool_call("drafter", {"request": "write"})]), "done"]
    )
    boss = ReActAgent("boss", boss_model, tools=[AgentTool(drafter(), emit_inner_events=True)])
    events = [e async for e in Runner(boss, enable_streaming=True).run("go")]
    tool_results = [m for m in boss_model.requests[1].messages if m.role == "tool"]
    assert [m.content for m in tool_results] == ["draft: raw words"]
    # The inner chat's stream was shown outside, as the nested run's events are.
    assert "raw words" in await _shown(events)


async def test_an_openai_model_streams_its_chat_over_the_wire() -> None:
    text = "Streaming tokens over the wire, piece by piece."
    async with OpenAIServer(
        [
            WireReply(tool_calls=[Call("add", json.dumps({"a": 2, "b": 3}))], usage=(12, 3)),
            WireReply(text=text, usage=(20, 9)),
        ]
    ) as server:
        model = wire_model(server)
        runner = Runner(Calculator("calc", resources=_resources(model)), enable_streaming=True)
        pieces: list[list[str]] = []
        events = []
        run = runner.run("2+3?")
        async for event in run:
            events.append(event)
            if event.output is not None and event.output.stream is not None:
                pieces.append([chunk.content async for chunk in event.output.stream])
        assert all(request.body["stream"] is True for request in server.requests)
        await model.aclose()
    assert "".join(pieces[1]) == text
    assert len([p for p in pieces[1] if p]) > 1  # in pieces, as the server sent them
    assert [e.message.content for e in events if e.message] == [text]
    usage = run_usage(run)
    assert usage is not None and usage.input_tokens == 32  # each streamed reply's, once


async def wait_for(condition: Callable[[], bool], within: float) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_a_run_closed_mid_stream_releases_the_models_connection() -> None:
    async with OpenAIServer(
        [WireReply(text="a long answer nobody reads to the end", delay=5.0, stall_after=4)]
    ) as server:
        model = wire_model(server)
        resources = Resources()
        resources.add_model("m", model)
        events = Runner(Quiet("quiet", resources=resources), enable_streaming=True).run("go")
        async with aclosing(events):
            async for event in events:
                if event.output is not None and event.output.stream is not None:
                    async for _chunk in event.output.stream:
                        break  # the caller walks away from the stream, then from the run
                    break
        await wait_for(lambda: server.hangups == 1, within=2.0)  # well before the 5 s stall ends
        await model.aclose()
