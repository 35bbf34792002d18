"""A stream only shown (``AgentOutput.shown_only``: an event-driven chat's model reply in a
streaming run) stays so wherever its event goes: in ``RunResult.events`` once the run is over, in
``to_dict``'s JSON (``"shown_only": true``) and back through ``from_dict``. A relay, a service
that yields a remote run's events from an agent of its own (docs/agents.md, "events as JSON"),
then records the remote agent's answers and never its shown replies: its history, its
``RunResult.output``, an ``AgentTool``'s result over it and a ``PlanExecute`` step run by it.
The reply was marked by a private event flag, which ``to_dict`` did not write and the runner
cleared once the next event came, so the relay took the reply for an answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import Quiet

from adk import (
    AgentEvent,
    AgentInput,
    AgentTool,
    BaseAgent,
    Message,
    Resources,
    RunContext,
    Runner,
)
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    action,
)
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, new_planner, new_replanner


class Counter(ActionAgent):
    """Asks its model, then outputs how many words the reply had (not the reply itself)."""

    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(ChatRequestEvent(model="m", messages=[Message.user(event.input)]))

    @action(ChatResponseEvent)
    def count(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=f"words={len(event.response.content.split())}"))


def _remote(kind: type[ActionAgent], reply: str) -> Runner:
    resources = Resources()
    resources.add_model("m", ScriptedModel([reply], cycle=True))
    return Runner(kind("remote", resources=resources), enable_streaming=True)


@contextlib.asynccontextmanager
async def serving(runner: Runner) -> AsyncIterator[int]:
    """A service streaming ``runner``'s runs as NDJSON over a loopback socket, as a service
    sends events to its clients: each stream's pieces as they come, then every event as
    ``{"event": event.to_dict()}``. One request line ``{"message": ...}``; yields the port."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            question = json.loads(await reader.readline())["message"]
            async with contextlib.aclosing(runner.run(question)) as events:
                async for event in events:
                    lines = []
                    if event.output is not None and event.output.stream is not None:
                        async for chunk in event.output.stream:
                            lines.append({"delta": chunk.content})
                    lines.append({"event": event.to_dict()})
                    for line in lines:
                        writer.write(json.dumps(line, allow_nan=False).encode() + b"\n")
                    await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


class Relay(BaseAgent):
    """Runs its input on the remote service and yields the remote agent's events as its own."""

    def __init__(self, name: str, port: int) -> None:
        super().__init__(name, "Asks the remote agent.")
        self.port = port

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            writer.write(json.dumps({"message": input.messages[-1].content}).encode() + b"\n")
            await writer.drain()
            while line := await reader.readline():
                data = json.loads(line)
                if "event" in data:
                    remote = AgentEvent.from_dict(data["event"])
                    yield AgentEvent(output=remote.output, action=remote.action)
        finally:
            writer.close()


class InProcessRelay(BaseAgent):
    """The same relay over a runner of this process: the remote run's event objects, re-yielded
    once that run has moved past them (its runner clears the private flags then)."""

    def __init__(self, name: str, runner: Runner) -> None:
        super().__init__(name, "Asks the remote agent.")
        self.runner = runner

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        result = await self.runner.invoke(input.messages[-1].content)
        for remote in result.events:
            yield AgentEvent(output=remote.output, action=remote.action)


@contextlib.asynccontextmanager
async def relay_of(kind: type[ActionAgent], reply: str, over: str) -> AsyncIterator[BaseAgent]:
    runner = _remote(kind, reply)
    if over == "in-process":
        yield InProcessRelay("relay", runner)
        return
    async with serving(runner) as port:
        yield Relay("relay", port)


@pytest.mark.parametrize("over", ["json", "in-process"])
async def test_a_relay_records_the_remote_answers_and_not_its_shown_replies(over: str) -> None:
    async with relay_of(Counter, "the shown reply", over) as relay:
        for streaming in (False, True):
            result = await Runner(relay, enable_streaming=streaming).invoke("x")
            # The relay took only the remote answer as its own (the reply was in its history:
            # ["x", "the shown reply", "words=3"]) ...
            assert [m.content for m in result.messages] == ["x", "words=3"]
            assert result.text == "words=3"
            # ... and showed the remote reply, which its caller can tell is only shown.
            [shown] = [e for e in result.events if e.output is not None and e.output.stream]
            assert shown.output is not None and shown.output.shown_only
            assert shown.output.stream is not None
            assert (await shown.output.stream.collect()).content == "the shown reply"


@pytest.mark.parametrize("over", ["json", "in-process"])
async def test_a_relays_output_tool_result_and_step_text_are_never_a_shown_reply(
    over: str,
) -> None:
    async with relay_of(Quiet, "kept, not said", over) as relay:
        result = await Runner(relay, enable_streaming=True).invoke("go")
        assert result.text == "asking"
        assert [m.content for m in result.messages] == ["go", "asking"]

        boss_model = ScriptedModel(
            [Reply(tool_calls=[tool_call("relay", {"request": "go"})]), "ok"]
        )
        boss = ReActAgent("boss", boss_model, tools=[AgentTool(relay)])
        await Runner(boss, enable_streaming=True).invoke("go")
        [tool_result] = [m for m in boss_model.requests[1].messages if m.role == "tool"]
        assert tool_result.content == "asking"

        replanner = ScriptedModel(["All done."])
        planner = new_planner(ScriptedModel([json.dumps({"steps": ["ask the remote agent"]})]))
        agent = PlanExecute(planner, relay, new_replanner(replanner))
        assert (await Runner(agent, enable_streaming=True).invoke("plan it")).text == "All done."
        asked = "\n".join(m.content for m in replanner.requests[0].messages)
        assert "asking" in asked and "kept, not said" not in asked


async def test_a_caller_tells_a_shown_reply_from_an_answer_as_it_arrives() -> None:
    """``output.shown_only`` on the live event, on an ``AgentTool``'s forwarded copy of it, and
    on the events the run gave (``RunResult.events``), where the private flags are cleared."""
    resources = Resources()
    resources.add_model("m", ScriptedModel(["the shown reply"], cycle=True))
    counter = Counter("counter", "Counts words.", resources=resources)
    boss_model = ScriptedModel(
        [Reply(tool_calls=[tool_call("counter", {"request": "x"})]), "three words"]
    )
    boss = ReActAgent("boss", boss_model, tools=[AgentTool(counter, emit_inner_events=True)])
    streams: list[tuple[str, bool]] = []
    async for event in Runner(boss, enable_streaming=True).run("go"):
        if event.output is not None and event.output.stream is not None:
            text = "".join([chunk.content async for chunk in event.output.stream])
            streams.append((text, event.output.shown_only))
    assert streams == [("", False), ("the shown reply", True), ("three words", False)]

    result = await Runner(counter, enable_streaming=True).invoke("x")
    marks = [(e.output.stream is not None, e.output.shown_only) for e in result.events if e.output]
    assert marks == [(True, True), (False, False)]


async def test_the_wire_says_which_streams_are_only_shown() -> None:
    """What a client of any language reads: the chat's reply is marked, the answer is not."""
    runner = _remote(Counter, "the shown reply")
    async with serving(runner) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b'{"message": "x"}\n')
        lines: list[Any] = [json.loads(line) async for line in reader]
        writer.close()
    events = [line["event"] for line in lines if "event" in line]
    outputs = [event["output"] for event in events if "output" in event]
    assert "".join(line["delta"] for line in lines if "delta" in line) == "the shown reply"
    assert outputs[0]["streamed"] is True and outputs[0]["shown_only"] is True
    assert outputs[0]["message"]["content"] == "the shown reply"
    assert outputs[1] == {
        "message": {"role": "assistant", "content": "words=3", "tool_calls": [], "metadata": {}},
        "role": "assistant",
    }
