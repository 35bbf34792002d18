"""``ctx.generate`` / ``ctx.stream``: a model call an agent of the user's own makes through its run.

An agent of one's own that called ``self.model.generate(...)`` got none of what a framework
agent's model call gets: no ``before_model``/``after_model`` callbacks, no ``chat`` span, no count
against the run's ``max_turns``, no streaming, and its usage counted only if it emitted the reply.
Called through its ``RunContext`` it takes the path a ``ReActAgent``'s calls take
(``adk.models._call``): these tests hold it to each of those, with real components (the OpenAI
wire server for the adapter's span attributes, SQLite for a pause and a resume by a fresh runner).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import other_tasks, wire_model
from openai_server import OpenAIServer
from openai_server import Reply as WireReply
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from span_capture import exporter_fixture, provider_fixture  # noqa: F401  (fixtures)

import adk
from adk import (
    AgentEvent,
    AgentInput,
    AgentTool,
    BaseAgent,
    Callbacks,
    ChatModel,
    MaxTurnsExceeded,
    Message,
    MessageChunk,
    ModelOptions,
    RunContext,
    Runner,
    SequentialAgent,
    ToolSpec,
    Usage,
)
from adk.actions import ActionAgent, ActionContext, InputEvent, OutputEvent, action
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tracing import CAPTURE_CONTENT_ENV
from prebuilt import ReActAgent


def used(i: int, o: int) -> Usage:
    return Usage(input_tokens=i, output_tokens=o, total_tokens=i + o)


class Summarizer(BaseAgent):
    """Answers with its model's summary of the input, streamed when the run streams, as
    agents.md shows; ``model`` may be the name of a model resource."""

    def __init__(self, name: str, model: ChatModel | str) -> None:
        super().__init__(name, description="Summarizes.")
        self.model = model

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        prompt = [Message.system("Summarize."), *input.messages]
        if ctx.enable_streaming:
            stream = ctx.stream(self.model, prompt)
            yield AgentEvent.streaming(stream)
            await stream.collect()
        else:
            yield AgentEvent.of(await ctx.generate(self.model, prompt))


class Checker(BaseAgent):
    """Asks its model ``calls`` times, keeping each reply to itself (it only acts on them), then
    says how many it made; streams its calls when the run streams, reading them itself."""

    def __init__(self, name: str, model: ChatModel, calls: int = 1) -> None:
        super().__init__(name, description="Checks.")
        self.model = model
        self.calls = calls

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        for _ in range(self.calls):
            if ctx.enable_streaming:
                await ctx.stream(self.model, input.messages).collect()
            else:
                await ctx.generate(self.model, input.messages)
        yield AgentEvent.of(f"checked {self.calls}")


# -- callbacks ------------------------------------------------------------------------------------
@pytest.mark.parametrize("streaming", [False, True])
async def test_the_runs_model_callbacks_see_the_call_and_may_replace_its_reply(
    streaming: bool,
) -> None:
    seen: list[tuple[str, str, bool]] = []

    def before(ctx: RunContext, request: adk.callbacks.ModelRequest) -> None:
        seen.append((ctx.agent_name, request.messages[0].content, request.stream))
        request.messages.append(Message.user("Be brief."))  # for this call only

    def after(ctx: RunContext, request: Any, reply: Message) -> Message:
        return Message.assistant(reply.content.upper(), usage=reply.usage)

    model = ScriptedModel([Reply("short.", usage=used(9, 2))])
    runner = Runner(
        Summarizer("summary", model),
        enable_streaming=streaming,
        callbacks=[Callbacks(before_model=before, after_model=after)],
    )
    result = await runner.invoke("a long text")
    assert seen == [("summary", "Summarize.", streaming)]
    assert [m.content for m in model.requests[0].messages] == [
        "Summarize.",
        "a long text",
        "Be brief.",
    ]
    assert model.requests[0].stream is streaming
    assert result.text == "SHORT."
    assert result.usage == used(9, 2)


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_before_model_answer_replaces_the_call(streaming: bool) -> None:
    model = ScriptedModel(["never asked"])
    answer = Message.assistant("cached summary", usage=used(0, 0))
    runner = Runner(
        Summarizer("summary", model),
        enable_streaming=streaming,
        callbacks=[Callbacks(before_model=lambda ctx, request: answer)],
    )
    result = await runner.invoke("a long text", max_turns=1)
    assert result.text == "cached summary"
    assert model.requests == []  # the model was not called
    # The answer stands for a call: it counts against max_turns as a ReActAgent's would.
    with pytest.raises(MaxTurnsExceeded):
        await Runner(
            Checker("twice", model, calls=2),
            callbacks=[Callbacks(before_model=lambda ctx, request: answer)],
        ).invoke("x", max_turns=1)


async def test_the_runners_callbacks_see_the_call_wherever_the_agent_runs() -> None:
    """A ``before_model`` of the runner's sees a custom agent's call however deep it runs (a
    workflow's step, an ``AgentTool``'s nested run), as it sees a ``ReActAgent``'s."""
    seen: list[tuple[str, ...]] = []
    inner = Summarizer("inner", ScriptedModel(["it is"]))
    lead = ReActAgent(
        "lead",
        ScriptedModel([Reply(tool_calls=[tool_call("inner", {"request": "x"})]), "done"]),
        tools=[AgentTool(inner)],
    )
    pipeline = SequentialAgent("pipeline", [Summarizer("first", ScriptedModel(["gist"])), lead])
    callbacks = Callbacks(before_model=lambda ctx, request: seen.append(ctx.run_path))
    assert (await Runner(pipeline, callbacks=[callbacks]).invoke("text")).text == "done"
    lead_path = ("pipeline", "first", "lead")  # run paths grow with each step
    assert seen == [("pipeline", "first"), lead_path, ("inner",), lead_path]


# -- tracing --------------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _no_content_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)


def named(spans: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("streaming", [False, True])
async def test_the_chat_span_nests_under_the_agent_with_the_adapters_attributes(
    api: str, streaming: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    served = WireReply(text="short", usage=(40, 2), response_id="resp-7")
    async with OpenAIServer([served, served], model="served-model") as server:
        model = wire_model(server, api)
        options = ModelOptions(temperature=0.5, max_tokens=64)

        class Twice(BaseAgent):
            """Two calls, one kept to itself, the other its answer."""

            async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
                await ctx.generate(model, input.messages, options=options)
                if ctx.enable_streaming:
                    yield AgentEvent.streaming(ctx.stream(model, input.messages, options=options))
                else:
                    yield AgentEvent.of(await ctx.generate(model, input.messages, options=options))

        runner = Runner(Twice("twice"), tracer_provider=provider, enable_streaming=streaming)
        result = await runner.invoke("a long text", run_id="conv-3")
        await model.aclose()
    assert result.text == "short"
    assert result.usage == used(80, 4)
    port = int(server.base_url.split(":")[2].split("/")[0])
    spans = exporter.get_finished_spans()
    (agent,) = named(spans, "invoke_agent twice")
    chats = named(spans, "chat test-model")
    assert len(chats) == 2
    for chat in chats:
        assert chat.parent is not None and chat.parent.span_id == agent.context.span_id
        assert chat.kind == SpanKind.CLIENT and chat.status.status_code == StatusCode.UNSET
        found = attrs(chat)
        assert {k: found[k] for k in found if k != "gen_ai.response.time_to_first_chunk"} == {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "test-model",
            "gen_ai.provider.name": "openai",
            "gen_ai.conversation.id": "conv-3",
            "gen_ai.request.temperature": 0.5,
            "gen_ai.request.max_tokens": 64,
            "server.address": "127.0.0.1",
            "server.port": port,
            "openai.api.type": "chat_completions" if api == "chat" else "responses",
            "gen_ai.response.model": "served-model",
            "gen_ai.response.id": "resp-7",
            "gen_ai.response.finish_reasons": ("stop",),
            "gen_ai.usage.input_tokens": 40,
            "gen_ai.usage.output_tokens": 2,
            **({"gen_ai.request.stream": True} if streaming and chat is chats[1] else {}),
        }
    # The agent's span sums its own calls' usage, the one it kept to itself included.
    assert attrs(agent)["gen_ai.usage.input_tokens"] == 80
    assert attrs(agent)["gen_ai.usage.output_tokens"] == 4


async def test_a_tool_and_an_action_call_through_their_run_context(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """What agents.md and llamaindex.md say: a tool's call through ``tool_ctx.run_context`` is
    traced under its ``execute_tool`` span, an action's through ``ctx.run_context`` under its
    agent's, both counted in the run's usage and ``max_turns``."""
    inner = ScriptedModel([Reply("gist", usage=used(3, 1))], model_name="inner")

    @adk.tool
    async def summarize(text: str, ctx: adk.ToolContext) -> str:
        """Summarize a text."""
        return (await ctx.run_context.generate(inner, text)).content

    calls = [Reply(tool_calls=[tool_call("summarize", {"text": "long"})]), Reply("done")]
    agent = ReActAgent("writer", ScriptedModel(calls), tools=[summarize])
    result = await Runner(agent, tracer_provider=provider).invoke("go", max_turns=3)
    assert result.text == "done" and result.usage == used(3, 1)
    with pytest.raises(MaxTurnsExceeded):  # the tool's call is the run's second
        agent = ReActAgent("writer", ScriptedModel(calls), tools=[summarize])
        await Runner(agent).invoke("go", max_turns=1)

    resources = adk.Resources()
    resources.add_model("llm", ScriptedModel([Reply("hi", usage=used(5, 2))], model_name="llm"))

    class Asker(ActionAgent):
        @action(InputEvent)
        async def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            llm = await ctx.get_resource("llm")
            reply = await ctx.run_context.generate(llm, str(event.input))
            ctx.send_event(OutputEvent(output=reply.content))

    asked = await Runner(Asker("asker", resources=resources), tracer_provider=provider).invoke("x")
    assert asked.text == "hi" and asked.usage == used(5, 2)
    spans = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}

    def parent(name: str) -> str:
        (span,) = named(spans, name)
        assert span.parent is not None
        return by_id[span.parent.span_id].name

    assert parent("chat inner") == "execute_tool summarize"
    assert parent("chat llm") == "invoke_agent asker"


# -- max_turns ------------------------------------------------------------------------------------
@pytest.mark.parametrize("streaming", [False, True])
async def test_max_turns_counts_the_calls_and_refuses_the_one_past_it(streaming: bool) -> None:
    model = ScriptedModel(["ok"] * 5)
    runner = Runner(Checker("checker", model, calls=3), enable_streaming=streaming)
    assert (await runner.invoke("x", max_turns=3)).text == "checked 3"
    with pytest.raises(MaxTurnsExceeded) as raised:
        await runner.invoke("x", max_turns=2)
    assert (raised.value.max_turns, raised.value.agent_name) == (2, "checker")
    assert len(model.requests) == 5  # the third call of the second run was not made


async def test_a_custom_agents_calls_and_a_react_agents_share_the_limit() -> None:
    def pipeline() -> SequentialAgent:
        react = ReActAgent("react", ScriptedModel(["one"]))
        return SequentialAgent("pipeline", [Checker("first", ScriptedModel(["ok"] * 2), 2), react])

    assert (await Runner(pipeline()).invoke("x", max_turns=3)).text == "one"
    with pytest.raises(MaxTurnsExceeded) as raised:
        await Runner(pipeline()).invoke("x", max_turns=2)
    assert raised.value.agent_name == "react"


async def test_the_limit_is_served_over_the_wire() -> None:
    async with OpenAIServer([WireReply(text="ok")] * 3) as server:
        model = wire_model(server)
        with pytest.raises(MaxTurnsExceeded, match="limit of 2"):
            await Runner(Checker("checker", model, calls=3)).invoke("x", max_turns=2)
        await model.aclose()
    assert len(server.requests) == 2


# -- usage ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("streaming", [False, True])
async def test_usage_counts_each_reply_once_kept_or_emitted(streaming: bool) -> None:
    """A reply the agent keeps to itself counts (before, only emitted replies did); one it emits
    is counted when it came, not again when the run records it; inside an ``AgentTool``'s nested
    run both count in the run's total."""
    kept = Checker("kept", ScriptedModel([Reply("fine", usage=used(3, 1))] * 2), calls=2)
    emitted = Summarizer("emitted", ScriptedModel([Reply("gist", usage=used(7, 4))]))
    nested = Checker("nested", ScriptedModel([Reply("ok", usage=used(5, 1))]))
    lead = ReActAgent(
        "lead",
        ScriptedModel(
            [
                Reply(tool_calls=[tool_call("nested", {"request": "x"})], usage=used(10, 2)),
                Reply("done", usage=used(20, 3)),
            ]
        ),
        tools=[AgentTool(nested)],
    )
    budget: list[Usage | None] = []
    runner = Runner(
        SequentialAgent("pipeline", [kept, emitted, lead]),
        enable_streaming=streaming,
        callbacks=[Callbacks(before_model=lambda ctx, request: budget.append(ctx.usage))],
    )
    events = runner.run("text")
    async for event in events:
        if event.output is not None and event.output.stream is not None:
            await event.output.stream.collect()
    total = used(6, 2) + used(7, 4) + used(10, 2) + used(5, 1) + used(20, 3)
    assert adk.run_usage(events) == total
    # ctx.usage before each call: the kept replies were in the total as soon as they came.
    assert budget[:3] == [None, used(3, 1), used(6, 2)]


async def test_a_streamed_reply_the_agent_reads_itself_counts_once_it_ended() -> None:
    model = ScriptedModel([Reply("fine", usage=used(3, 1)), Reply("cut", usage=used(1, 1))])

    class Reader(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            before = ctx.usage
            async for _ in ctx.stream(model, input.messages):
                pass
            after = ctx.usage
            cut = ctx.stream(model, input.messages)
            await anext(aiter(cut))
            await cut.aclose()  # closed before its end: no whole reply, nothing counted
            yield AgentEvent.custom([before, after, ctx.usage])

    result = await Runner(Reader("reader")).invoke("x")
    assert result.output == [None, used(3, 1), used(3, 1)]
    assert result.usage == used(3, 1)


# -- streaming ------------------------------------------------------------------------------------
class HeldModel:
    """Streams its first chunk, then waits for the test to release the rest: what a reader has
    read before then came while the model was still answering."""

    model_name = "held"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def generate(self, messages: Sequence[Message], **_: Any) -> Message:
        raise AssertionError("a streaming run streams")

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="Hel")
        await self.release.wait()
        yield MessageChunk(content="lo.", usage=used(4, 2), finish_reason="stop")


async def test_a_streaming_run_gets_the_reply_chunk_by_chunk() -> None:
    model = HeldModel()
    runner = Runner(Summarizer("summary", model), enable_streaming=True)
    events = runner.run("text")
    event = await anext(events)
    assert event.output is not None and event.output.stream is not None
    chunks = aiter(event.output.stream)
    first = await anext(chunks)
    assert first.content == "Hel" and not event.output.stream.done  # the model is still at it
    model.release.set()
    assert [chunk.content async for chunk in chunks] == ["lo."]
    assert [e async for e in events] == []
    assert adk.run_messages(events)[-1].content == "Hello."
    assert adk.run_usage(events) == used(4, 2)


# -- pause and resume -----------------------------------------------------------------------------
class Drafter(BaseAgent):
    """Drafts an answer, pauses for a person to approve it (the draft kept in its state), then
    emits the draft, or asks its model again with the person's note."""

    def __init__(self, name: str, model: ChatModel) -> None:
        super().__init__(name)
        self.model = model

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        resume = ctx.resume
        if resume is None:
            draft = await ctx.generate(self.model, input.messages)
            yield ctx.interrupt({"approve": draft.content}, state={"draft": draft})
            return
        draft = resume.state["draft"]
        if resume.data == "ok":
            yield AgentEvent.of(draft)  # the reply restored from the checkpoint
        else:
            yield AgentEvent.of(await ctx.generate(self.model, [draft, Message.user(resume.data)]))


async def test_a_pause_between_calls_keeps_their_count_and_usage(tmp_path: Path) -> None:
    script = [Reply("draft", usage=used(10, 2)), Reply("better", usage=used(12, 3))]
    seen: list[str] = []
    callbacks = [Callbacks(before_model=lambda ctx, request: seen.append(ctx.agent_name))]
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        first = Runner(
            Drafter("drafter", ScriptedModel(script)), checkpoint_store=store, callbacks=callbacks
        )
        paused = await first.invoke("write", max_turns=1)
        assert paused.interrupt is not None and paused.usage == used(10, 2)
        # A fresh runner: the limit of 1 holds, the call before the pause counting.
        again = Runner(
            Drafter("drafter", ScriptedModel(script[1:])),
            checkpoint_store=store,
            callbacks=callbacks,
        )
        with pytest.raises(MaxTurnsExceeded, match="limit of 1"):
            await again.invoke_resume(paused.interrupt.checkpoint_id, "shorter")
        resumed = await again.invoke_resume(paused.interrupt.checkpoint_id, "shorter", max_turns=2)
    assert resumed.text == "better"
    assert resumed.usage == used(22, 5)  # the whole turn: the call before the pause too
    assert seen == ["drafter", "drafter"]


async def test_a_reply_kept_in_the_state_and_emitted_after_the_resume_counts_once() -> None:
    """Restored from the checkpoint, the draft is another object than the reply counted when it
    came (and in the checkpoint's usage): emitted, it was counted a second time."""
    runner = Runner(Drafter("drafter", ScriptedModel([Reply("draft", usage=used(10, 2))])))
    paused = await runner.invoke("write")
    assert paused.interrupt is not None
    resumed = await runner.invoke_resume(paused.interrupt.checkpoint_id, "ok")
    assert resumed.text == "draft"
    assert resumed.messages[-1].usage == used(10, 2)
    assert resumed.usage == used(10, 2)


# -- cancellation ---------------------------------------------------------------------------------
class HangingModel:
    """Signals that a call started (or its stream's first chunk went out), then never answers."""

    model_name = "hanging"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.closed = False

    async def generate(self, messages: Sequence[Message], **_: Any) -> Message:
        self.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.closed = True
        raise AssertionError("unreachable")

    async def stream(self, messages: Sequence[Message], **_: Any) -> AsyncIterator[MessageChunk]:
        try:
            yield MessageChunk(content="Hel")
            self.started.set()
            await asyncio.Event().wait()
        finally:
            self.closed = True


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_run_cancelled_mid_call_stops_the_call_and_ends_its_span(
    streaming: bool, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    model = HangingModel()
    before = other_tasks()
    runner = Runner(
        Summarizer("summary", model), tracer_provider=provider, enable_streaming=streaming
    )
    task = asyncio.ensure_future(runner.invoke("text"))
    await model.started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.closed  # the model's call was stopped, not left running
    assert other_tasks() == before  # nothing of the run is left behind
    spans = exporter.get_finished_spans()
    (chat,) = named(spans, "chat hanging")
    (agent,) = named(spans, "invoke_agent summary")
    assert chat.parent is not None and chat.parent.span_id == agent.context.span_id
    for span in (chat, agent):  # cut off, not failed, and not passed off as finished
        assert span.status.status_code == StatusCode.UNSET
        assert [e.name for e in span.events] == ["adk.cancelled"]


# -- run options ----------------------------------------------------------------------------------
class Asker(BaseAgent):
    """Asks its model once with options of its own (a JSON reply format), answering with it."""

    def __init__(self, name: str, model: ChatModel, options: ModelOptions | None) -> None:
        super().__init__(name, description="Asks.")
        self.model = model
        self.own = options

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.enable_streaming:
            stream = ctx.stream(self.model, input.messages, options=self.own)
            yield AgentEvent.streaming(stream)
            await stream.collect()
        else:
            yield AgentEvent.of(await ctx.generate(self.model, input.messages, options=self.own))


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_runs_model_options_apply_to_the_call_as_to_a_react_agents(
    streaming: bool,
) -> None:
    """The run option ``"model_options"`` (``invoke(options=)``, or designated to the agent)
    is merged over the call's own options, as over a ``ReActAgent``'s, so a temperature or a
    provider's ``extra`` given for a run reaches every model call of the run; a
    ``response_format`` the call gave stays, as the agent reads its reply by it. It was left
    out: the run's settings did not reach an agent of one's own."""
    schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    own = ModelOptions(max_tokens=50, temperature=0.9, response_format=schema)
    model = ScriptedModel(["{}", "{}", "{}"])
    runner = Runner(Asker("asker", model, own), enable_streaming=streaming)
    run_wide = {"temperature": 0.1, "response_format": {"type": "json_object"}}
    await runner.invoke("x", options={"model_options": run_wide})
    await runner.invoke("x", agent_options={"asker": {"model_options": ModelOptions(stop=["."])}})
    await runner.invoke("x")
    first, designated, plain = (request.options for request in model.requests)
    assert first == ModelOptions(max_tokens=50, temperature=0.1, response_format=schema)
    assert designated == own.merged(ModelOptions(stop=["."]))
    assert plain is own  # a run given no options: the call's own, untouched
    assert [request.stream for request in model.requests] == [streaming] * 3
    with pytest.raises(adk.RunError, match="agent 'asker': run option model_options must be"):
        await runner.invoke("x", options={"model_options": 0.5})


# -- what it takes --------------------------------------------------------------------------------
async def test_a_model_named_by_resource_name_is_the_runs_resource() -> None:
    resources = adk.Resources()
    resources.add_model("fast", ScriptedModel(["from the resource"]))
    result = await Runner(Summarizer("summary", "fast"), resources=resources).invoke("x")
    assert result.text == "from the resource"
    with pytest.raises(adk.RunError, match="names model 'fast' but the runner has no resources"):
        await Runner(Summarizer("summary", "fast")).invoke("x")
    with pytest.raises(adk.RunError, match=r"KeyError.*'slow'"):
        await Runner(Summarizer("summary", "slow"), resources=resources).invoke("x")


async def test_messages_and_tools_take_the_forms_a_user_writes() -> None:
    @adk.tool
    def lookup(query: str) -> str:
        """Look something up."""
        return query

    model = ScriptedModel(["a", "b", "c"])

    class Asker(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            await ctx.generate(model, "just text", tools=[lookup])
            await ctx.generate(model, Message.user("one message"), tools=[lookup.spec])
            await ctx.generate(model, (m for m in input.messages))
            yield AgentEvent.of("asked")

    await Runner(Asker("asker")).invoke("the input")
    asked = [([m.content for m in r.messages], [t.name for t in r.tools]) for r in model.requests]
    assert asked == [
        (["just text"], ["lookup"]),
        (["one message"], ["lookup"]),
        (["the input"], []),
    ]


class Listing(adk.Toolset):
    """A toolset, whose tools an agent asks for at run time."""

    async def tools(self, ctx: RunContext) -> list[adk.Tool]:
        return []


async def test_a_stream_awaited_as_a_reply_is_refused_saying_how_to_read_it() -> None:
    """``await ctx.stream(...)`` beside ``await ctx.generate(...)`` is an easy slip; Python's own
    refusal named a private class ("object _CountedStream can't be used in 'await' expression")."""
    model = ScriptedModel(["never"])

    class Awaiting(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            yield AgentEvent.of(await ctx.stream(model, input.messages))  # type: ignore[misc]

    with pytest.raises(adk.RunError) as raised:
        await Runner(Awaiting("awaiting"), enable_streaming=True).invoke("x")
    assert raised.value.error.type == "TypeError"
    said = raised.value.error.message
    assert "ctx.stream(...) returns the reply as a MessageStream, which is not awaited" in said
    assert "await stream.collect()" in said and "await ctx.generate(...)" in said
    assert model.requests == []  # the stream was never read: no call was made


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"model": object()}, "model must be a ChatModel or the name of a model resource"),
        ({"model": ScriptedModel}, "model must be a ChatModel or the name of a model resource"),
        ({"messages": ["hi"]}, "messages must be Messages .* got str 'hi' among them"),
        ({"messages": 3}, "messages must be a str, a Message or a list of Messages, got int 3"),
        ({"tools": [print]}, r"tools must be ToolSpecs or Tools, .* \(make it a tool with @adk"),
        ({"tools": "lookup"}, "tools must be a list of ToolSpecs or Tools, got str"),
        (
            {"tools": Listing()},
            r"got Listing .*\(a Toolset's tools are await toolset.tools\(ctx\)\)",
        ),
        (
            {"tools": [Listing()]},
            r"got Listing .*\(a Toolset's tools are await toolset.tools\(ctx\)\)",
        ),
        ({"options": {"temperature": 0}}, r"options must be a ModelOptions \(ModelOptions\(\*\*"),
    ],
)
@pytest.mark.parametrize("streaming", [False, True])
async def test_what_it_cannot_take_is_refused_naming_the_agent_before_any_call(
    call: dict[str, Any], message: str, streaming: bool
) -> None:
    model = ScriptedModel(["never"])

    class Wrong(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            given: dict[str, Any] = {"model": model, "messages": "hi", **call}
            method = ctx.stream if streaming else ctx.generate
            reply = method(given.pop("model"), given.pop("messages"), **given)
            yield AgentEvent.of(await reply.collect() if streaming else await reply)  # type: ignore[union-attr,misc]

    with pytest.raises(adk.RunError) as raised:
        await Runner(Wrong("wrong")).invoke("x", max_turns=1)
    assert raised.value.error.type == "TypeError"
    assert raised.value.error.message.startswith("agent 'wrong': ctx.generate/ctx.stream: ")
    assert re.search(message, raised.value.error.message), raised.value.error.message
    assert model.requests == []
