"""A stream only shown (``AgentOutput.shown_only``) that an agent of one's own yields over a live
source (``ctx.stream``) is closed by the framework when the run is closed at its event, as a
recorded stream is: the caller breaks out of the run mid-stream and closes it, or its task is
cancelled. The driver held only the streams it records, so the model's stream (an HTTP response
on a real model) stayed open until the garbage collector found it, and agents.md told agent
authors to close it themselves.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from typing import Any

import pytest
from conftest import wire_model
from openai_server import OpenAIServer
from openai_server import Reply as WireReply

from adk import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    AgentOutput,
    BaseAgent,
    ChatModel,
    LoopAgent,
    MessageChunk,
    MessageStream,
    ModelOptions,
    ParallelAgent,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    ToolSpec,
    run_messages,
    tool,
)
from adk.callbacks import Callbacks
from adk.messages import Message
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


class Watched(ScriptedModel):
    """A model whose stream sends ``reply`` in 4-character chunks, noting how many chunks were
    read and whether the stream was closed. ``endless``: the stream then never ends (still
    sending, as a slow model's connection is)."""

    def __init__(self, reply: str, *, endless: bool) -> None:
        super().__init__([reply], cycle=endless, chunk_size=4)
        self.endless = endless
        self.read = 0
        self.closed = 0

    async def stream(  # type: ignore[override]
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        options: ModelOptions | None = None,
    ) -> AsyncIterator[MessageChunk]:
        try:
            async for chunk in super().stream(messages, tools=tools, options=options):
                self.read += 1
                yield chunk
            if self.endless:
                await asyncio.Event().wait()
        finally:
            self.closed += 1


def endless_model() -> Watched:
    """A stream that never ends, for tests that it is closed rather than read to an end."""
    return Watched("a reply nobody reads to the end", endless=True)


def counting_model() -> Watched:
    """A stream of a hundred chunks: an end reached is every chunk read."""
    return Watched("x" * 400, endless=False)


class Narrator(BaseAgent):
    """Shows its model's reply as it arrives (only shown: not its answer), then reads it; it
    does not close the stream itself."""

    def __init__(self, name: str, model: ChatModel) -> None:
        super().__init__(name, "Shows a reply.")
        self.model = model

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        stream = ctx.stream(self.model, "tell me")
        yield AgentEvent(output=AgentOutput(stream=stream, shown_only=True))
        reply = await stream.collect()
        yield AgentEvent.custom(len(reply.content))


def _tree(shape: str, model: ChatModel) -> Agent:
    return _tree_of(shape, Narrator("narrator", model))


def _tree_of(shape: str, narrator: Agent) -> Agent:
    if shape == "sequence":  # the workflows' step runner
        return SequentialAgent("seq", [narrator])
    if shape == "loop":
        return LoopAgent("loop", [narrator], max_iterations=1)
    if shape == "parallel":  # ``drive`` in a branch task
        return ParallelAgent("par", [narrator])
    return narrator  # the runner's inline driver


SHAPES = ["root", "sequence", "loop", "parallel"]


async def _leave_mid_stream(runner: Runner) -> AgentEvent:
    """Read the first shown stream's first chunk, then leave the stream and close the run;
    the event is returned (kept, so no collector closes its stream instead)."""
    events = runner.run("go")
    async with aclosing(events):
        async for event in events:
            if event.output is not None and event.output.stream is not None:
                assert event.output.shown_only
                async for _chunk in event.output.stream:
                    break
                return event
    raise AssertionError("no stream shown")


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_run_closed_at_a_shown_stream_closes_the_models_stream(shape: str) -> None:
    model = endless_model()
    event = await _leave_mid_stream(Runner(_tree(shape, model), enable_streaming=True))
    assert model.closed == 1
    assert event.output is not None and event.output.stream is not None
    assert event.output.stream.done


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_run_cancelled_mid_shown_stream_closes_the_models_stream(shape: str) -> None:
    model = endless_model()
    reading = asyncio.Event()
    kept: list[AgentEvent] = []

    async def read() -> None:
        events = Runner(_tree(shape, model), enable_streaming=True).run("go")
        async with aclosing(events):
            async for event in events:
                if event.output is not None and event.output.stream is not None:
                    kept.append(event)
                    async for _chunk in event.output.stream:
                        reading.set()  # then waits for a chunk that never comes

    task = asyncio.create_task(read())
    await reading.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.closed == 1


async def test_a_run_closed_at_a_fully_read_shown_stream_records_nothing() -> None:
    """A shown stream read to its end before the run was closed is no answer: not recorded as
    a recorded stream would be when its run is closed at its event."""
    model = ScriptedModel(["shown, not said"])
    runner = Runner(Narrator("narrator", model), enable_streaming=True)
    events = runner.run("go")
    async with aclosing(events):
        async for event in events:
            if event.output is not None and event.output.stream is not None:
                assert (await event.output.stream.collect()).content == "shown, not said"
                break
    assert [m.content for m in run_messages(events)] == ["go"]


@pytest.mark.parametrize("how", ["invoke", "run"])
async def test_a_run_failing_at_a_shown_streams_event_closes_the_stream(how: str) -> None:
    """An ``on_event`` callback that fails on the event ends the run there (``invoke``'s and
    ``run``'s inline drivers): the stream nobody will read is closed, not left to the GC."""
    kept: list[MessageStream] = []

    def on_event(event: AgentEvent) -> None:
        if event.output is not None and event.output.stream is not None:
            kept.append(event.output.stream)
            raise RuntimeError("the event log is down")

    runner = Runner(
        Narrator("narrator", endless_model()),
        callbacks=[Callbacks(on_event=on_event)],
        enable_streaming=True,
    )
    with pytest.raises(RunError, match="the event log is down"):
        if how == "invoke":
            await runner.invoke("go")
        else:
            async with aclosing(runner.run("go")) as events:
                async for event in events:
                    if event.error is not None:
                        raise RunError(event, [])
    assert len(kept) == 1 and kept[0].done


async def wait_for(condition: Callable[[], bool], within: float) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("shape", ["root", "sequence"])
async def test_a_run_closed_at_a_shown_stream_releases_the_models_connection(shape: str) -> None:
    async with OpenAIServer(
        [WireReply(text="a long answer nobody reads to the end", delay=5.0, stall_after=4)]
    ) as server:
        model = wire_model(server)
        kept: Any = await _leave_mid_stream(Runner(_tree(shape, model), enable_streaming=True))
        await wait_for(lambda: server.hangups == 1, within=2.0)  # well before the 5 s stall ends
        assert kept.output.stream.done
        await model.aclose()


class ShowsAndEnds(BaseAgent):
    """Shows its model's reply on the event that also ends it: the framework closes the agent
    there, so the agent never reads the stream."""

    def __init__(self, name: str, model: ChatModel, ending: AgentAction) -> None:
        super().__init__(name, "Shows a reply and ends.")
        self.model = model
        self.ending = ending

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        stream = ctx.stream(self.model, "tell me")
        async for _chunk in stream:  # shown once the model has begun to answer: the call is
            break  # made (a stream is called when first read), its connection open
        yield AgentEvent(output=AgentOutput(stream=stream, shown_only=True), action=self.ending)


async def test_invoke_closes_a_shown_stream_on_the_event_that_ends_the_agent() -> None:
    """``invoke`` never reads a shown stream (it is no output) and the agent that would have read
    it is closed at its event (an exit): its inline driver let the stream go as for any shown
    stream, and the model's stream stayed open until the garbage collector found it. (A transfer
    at the root fails the run, which closed the stream already; below the root, the drivers read
    the stream to its end before closing the agent, for the reader who has its event.)"""
    model = endless_model()
    agent = ShowsAndEnds("narrator", model, AgentAction(exit=True))
    result = await Runner(agent, enable_streaming=True).invoke("go")
    assert model.closed == 1
    shown = [event for event in result.events if event.output is not None]
    assert len(shown) == 1 and shown[0].output is not None and shown[0].output.stream is not None
    assert shown[0].output.stream.done


def _ending_tree(shape: str, model: ChatModel) -> Agent:
    narrator = ShowsAndEnds("narrator", model, AgentAction(exit=True))
    if shape == "flow":  # the root's model transfers to the narrator
        transfer = tool_call("transfer_to_agent", {"agent_name": "narrator"})
        return ReActAgent(
            "desk", ScriptedModel([Reply(tool_calls=[transfer])]), sub_agents=[narrator]
        )
    return _tree_of(shape, narrator)


@pytest.mark.parametrize("shape", ["sequence", "loop", "parallel", "flow"])
async def test_invoke_closes_a_shown_stream_on_an_exit_below_a_workflow_or_flow(shape: str) -> None:
    """A workflow at the root drives itself (its step runner), which reads a stream carried on
    the event that ends a step to its end (``settle``) for ``run``'s reader, who has the event:
    under ``invoke``, which never reads a shown stream, an exit read the model's whole reply
    nobody would see (an endless one, for good) rather than closing it."""
    model = counting_model()
    result = await Runner(_ending_tree(shape, model), enable_streaming=True).invoke("go")
    assert (model.read, model.closed) == (1, 1)  # the one chunk the narrator read
    (shown,) = [e for e in result.events if e.agent_name == "narrator" and e.output is not None]
    assert shown.output is not None and shown.output.stream is not None
    assert shown.output.stream.done


async def test_invoke_resume_closes_a_shown_stream_on_an_exit() -> None:
    """``invoke_resume`` collects the events of ``run``'s drivers, which read a stream on the
    event that ends an agent to its end for ``run``'s reader (``settle``): it never reads a
    shown one, and the exit ends the run, so the stream is closed there too."""

    @tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    model = counting_model()
    asker = ReActAgent(
        "asker",
        ScriptedModel([Reply(tool_calls=[tool_call("pay", {"amount": 1})]), "Paid."]),
        tools=[pay],
    )
    narrator = ShowsAndEnds("narrator", model, AgentAction(exit=True))
    runner = Runner(SequentialAgent("seq", [asker, narrator]), enable_streaming=True)
    paused = await runner.invoke("go")
    assert paused.checkpoint_id is not None
    result = await runner.invoke_resume(paused.checkpoint_id, True)
    assert (model.read, model.closed) == (1, 1)
    (shown,) = [e for e in result.events if e.agent_name == "narrator" and e.output is not None]
    assert shown.output is not None and shown.output.stream is not None
    assert shown.output.stream.done


async def test_invoke_closes_a_shown_stream_on_a_transfer_a_flow_handles() -> None:
    """A transfer ends the agent that shows the stream as an exit does, and the flow's driver
    read the stream to its end (``settle``) before the agent transferred to ran: under
    ``invoke`` no one reads it, so it is closed."""
    model = counting_model()
    narrator = ShowsAndEnds("narrator", model, AgentAction(transfer_to="desk"))
    transfer = tool_call("transfer_to_agent", {"agent_name": "narrator"})
    desk_model = ScriptedModel([Reply(tool_calls=[transfer]), "Back at the desk."])
    desk = ReActAgent("desk", desk_model, sub_agents=[narrator])
    result = await Runner(desk, enable_streaming=True).invoke("go")
    assert result.text == "Back at the desk."
    assert (model.read, model.closed) == (1, 1)
    (shown,) = [e for e in result.events if e.agent_name == "narrator" and e.output is not None]
    assert shown.output is not None and shown.output.stream is not None
    assert shown.output.stream.done


class _ShowsABreakingStreamAndExits(BaseAgent):
    """Exits on an event showing a stream (no answer) whose source breaks after one chunk."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        async def chunks() -> AsyncIterator[MessageChunk]:
            yield MessageChunk(content="progress ")
            raise RuntimeError("the wire broke")

        shown = AgentOutput(stream=MessageStream(chunks()), shown_only=True)
        yield AgentEvent(output=shown, action=AgentAction(exit=True))


@pytest.mark.parametrize("shape", ["alone", "sequence", "sequence in a sequence", "parallel"])
@pytest.mark.parametrize("how", ["run", "run reading the stream", "invoke"])
async def test_a_shown_stream_that_breaks_on_an_exit_fails_nothing(how: str, shape: str) -> None:
    """A stream only shown is no answer: its failure is its readers' to see, not the agent's.
    On an exit the drivers read it to its end for the reader who has the event (``settle``),
    and raised its error there: the run failed, as the workflow above the agent's when nested
    (``inner``, ``outer``), but only when the reader had not read the stream; one who had, and
    ``invoke`` (which closes it), saw the run end cleanly."""
    shower = _ShowsABreakingStreamAndExits("shower")
    root: Agent = shower
    if shape == "sequence":
        root = SequentialAgent("outer", [shower])
    elif shape == "sequence in a sequence":
        root = SequentialAgent("outer", [SequentialAgent("inner", [shower])])
    elif shape == "parallel":
        root = ParallelAgent("outer", [SequentialAgent("inner", [shower])])
    runner = Runner(root, enable_streaming=True)
    if how == "invoke":
        result = await runner.invoke("go")
        events = result.events
    else:
        events = []
        async for event in runner.run("go"):
            events.append(event)
            output = event.output
            if how == "run reading the stream" and output is not None:
                assert output.stream is not None
                with pytest.raises(RuntimeError, match="the wire broke"):
                    await output.stream.collect()
    assert [event.error for event in events if event.error is not None] == []
    (shown,) = [event for event in events if event.output is not None]
    assert shown.output is not None and shown.output.stream is not None
    if how != "invoke":  # read to its end for the reader, its failure kept for them
        assert shown.output.stream.done
        with pytest.raises(RuntimeError, match="the wire broke"):
            await shown.output.stream.collect()
