"""An ``AgentTool(emit_inner_events=True)`` shows its inner agent's events outside, flagged as no
output of the agent that yields them (``_FORWARDED``). They were taken as outputs all the same:
a run paused inside such a tool had the inner agent's shown message as its ``RunResult.output``
(and ``text``), where the same run with the events not shown had the caller's own last output,
for a ``ReActAgent`` caller and an ``ActionAgent`` one alike; and an ``AgentTool`` whose agent
called such a tool in turn answered with the message it was shown rather than its agent's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import ScriptAgent
from test_interrupts import Asker

import adk
from adk import (
    Agent,
    AgentEvent,
    AgentInput,
    AgentTool,
    BaseAgent,
    Message,
    ParallelAgent,
    Resources,
    RunContext,
    Runner,
    SequentialAgent,
)
from adk.actions import (
    ActionAgent,
    ActionContext,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.agent_tool import _SHOWN_AHEAD
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


def pausing() -> SequentialAgent:
    """Says something, then pauses: the message is shown outside before the pause."""
    steps = [ScriptAgent("first", "first done"), Asker("step")]
    return SequentialAgent("inner", steps, description="Works, then asks.")


class Caller(ActionAgent):
    """Says ``"<name> starts"``, then calls its one tool through the built-in tool action; says
    nothing of the result (a run of it answers with its first words)."""

    def __init__(self, name: str, tool: AgentTool) -> None:
        resources = Resources()
        resources.add_tool(tool)
        super().__init__(name, resources=resources, description="Calls its tool.")
        self.tool_name = tool.spec.name

    @action(InputEvent)
    async def start(self, event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=f"{self.name} starts"))
        call = tool_call(self.tool_name, {"request": "go"}, id="c1")
        ctx.send_event(ToolRequestEvent(tool_calls=[call]))

    @action(ToolResponseEvent)
    async def done(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
        pass


@pytest.mark.parametrize("shown", [False, True])
async def test_a_run_paused_in_a_react_agents_agent_tool_keeps_the_callers_output(
    shown: bool,
) -> None:
    model = ScriptedModel([Reply(tool_calls=[tool_call("inner", {"request": "go"})]), "x"])
    outer = ReActAgent("outer", model, tools=[AgentTool(pausing(), emit_inner_events=shown)])

    result = await Runner(outer).invoke("hi")

    assert result.interrupt is not None
    shown_texts = [e.message.content for e in result.events if e.run_path[:2] == ("outer", "inner")]
    assert shown_texts == (["first done", "step asks"] if shown else [])
    # The caller's own last output (its tool call), as when nothing is shown.
    assert isinstance(result.output, Message) and result.output.tool_calls[0].name == "inner"
    assert result.text == ""


@pytest.mark.parametrize("shown", [False, True])
async def test_a_run_paused_in_an_action_agents_agent_tool_keeps_the_callers_output(
    shown: bool,
) -> None:
    result = await Runner(Caller("caller", AgentTool(pausing(), emit_inner_events=shown))).invoke(
        "hi"
    )

    assert result.interrupt is not None
    assert len([e for e in result.events if e.run_path[:2] == ("caller", "inner")]) == 2 * shown
    assert result.text == "caller starts"


async def test_an_agent_tool_answers_with_its_agents_message_not_one_it_was_shown() -> None:
    deep = AgentTool(ScriptAgent("deep", "deep says", description="Says."), emit_inner_events=True)
    middle = AgentTool(Caller("middle", deep), emit_inner_events=True)
    model = ScriptedModel([Reply(tool_calls=[tool_call("middle", {"request": "go"})]), "done"])

    result = await Runner(ReActAgent("outer", model, tools=[middle])).invoke("hi")

    assert result.text == "done"
    # Both shown outside, the deep agent's under the middle's path...
    shown = [(e.run_path, e.message.content) for e in result.events if len(e.run_path) > 1]
    assert shown == [
        (("outer", "middle"), "middle starts"),
        (("outer", "middle", "deep"), "deep says"),
    ]
    # ...and the middle tool's result is its agent's own last message.
    assert model.requests[1].messages[-1].content == "middle starts"


async def test_a_resumed_run_pausing_again_in_the_tool_keeps_the_callers_output() -> None:
    """A resumed run's driver clears each event's flags as the next one comes, before its
    collector builds the result: the shown events are known by the run, not by their flags."""

    async def paused_twice(shown: bool) -> tuple[object, str]:
        steps = [ScriptAgent("first", "first done"), Asker("step"), Asker("again")]
        inner = SequentialAgent("inner", steps, description="Asks twice.")
        model = ScriptedModel([Reply(tool_calls=[tool_call("inner", {"request": "go"})]), "x"])
        runner = Runner(
            ReActAgent("outer", model, tools=[AgentTool(inner, emit_inner_events=shown)])
        )
        paused = await runner.invoke("hi")
        assert paused.checkpoint_id is not None
        resumed = await runner.invoke_resume(paused.checkpoint_id, "yes")
        assert resumed.interrupt is not None
        inner_texts = [e.message.content for e in resumed.events if len(e.run_path) > 1]
        assert inner_texts == (["step got 'yes'", "again asks"] if shown else [])
        return resumed.output, resumed.text

    assert await paused_twice(True) == await paused_twice(False)


class _Shown:
    """An output a test can watch die (a weak reference), as a forwarded stream's chunks would."""


class _Shows(BaseAgent):
    """Shows ``count`` custom outputs, each watched in ``watched``, then answers."""

    def __init__(self, name: str, count: int, watched: list[weakref.ref[_Shown]]) -> None:
        super().__init__(name, "Shows its progress.")
        self.count, self.watched = count, watched

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        for _ in range(self.count):
            value = _Shown()
            self.watched.append(weakref.ref(value))
            yield AgentEvent.custom(value)
            del value
        yield AgentEvent.of("shown all")


@adk.tool(require_approval=True)
def start() -> str:
    """Start the work."""
    return "started"


def _nest(depth: int, watched: list[weakref.ref[_Shown]], pause_first: bool) -> ReActAgent:
    """``depth`` levels: ReActAgents each calling the next as a forwarding AgentTool, the last
    an agent showing 20 outputs; the outermost first asks for approval when ``pause_first``."""
    agent: Agent = _Shows(f"level{depth}", 20, watched)
    for level in range(depth - 1, 0, -1):
        script: list[Reply | str] = [
            Reply(tool_calls=[tool_call(agent.name, {"request": "go"})]),
            f"level{level} done",
        ]
        tools: list[Any] = [AgentTool(agent, emit_inner_events=True)]
        if level == 1 and pause_first:
            script.insert(0, Reply(tool_calls=[tool_call("start")]))
            tools.append(start)
        agent = ReActAgent(f"level{level}", ScriptedModel(script), tools=tools, description="d")
    assert isinstance(agent, ReActAgent)
    return agent


@pytest.mark.parametrize("how", ["run", "resume"])
async def test_the_events_a_streamed_run_was_shown_are_not_kept_by_the_run(how: str) -> None:
    """Every event an AgentTool showed was kept by the run it was shown in until that run
    ended (``_RunState.forwarded``), for the collector of ``invoke`` to tell its own output
    from them; but ``runner.run``'s and ``runner.resume``'s reader has each event as it comes,
    and an AgentTool's nested run has no collector: each shown output (a forwarded stream with
    every chunk) was held once per enclosing level, so a long streamed run showing a
    sub-agent's replies grew by all of them while its reader had long let them go."""
    watched: list[weakref.ref[_Shown]] = []
    runner = Runner(_nest(4, watched, pause_first=how == "resume"))
    if how == "run":
        events = runner.run("hi")
    else:
        paused = await runner.invoke("hi")
        assert paused.checkpoint_id is not None
        events = runner.resume(paused.checkpoint_id, True)
    alive = None
    async with contextlib.aclosing(events):
        async for event in events:
            if event.message is not None and event.message.content == "level1 done":
                del event
                gc.collect()
                # The run goes on (its last event is still to come): the shown ones let go.
                alive = [ref for ref in watched if ref() is not None]
    assert len(watched) == 20
    assert alive == []


async def test_invoke_still_tells_its_own_output_from_what_it_was_shown_at_depth() -> None:
    # invoke's run keeps what it was shown (its collector reads it): the run's output is its
    # own last message, the shown ones stamped with the whole path.
    watched: list[weakref.ref[_Shown]] = []
    result = await Runner(_nest(4, watched, pause_first=False)).invoke("hi")
    shown = [e for e in result.events if len(e.run_path) == 4]
    assert len(shown) == 21 and shown[0].run_path == ("level1", "level2", "level3", "level4")
    assert [e.output.custom for e in shown[:20] if e.output is not None] == [
        ref() for ref in watched
    ]
    assert result.text == "level1 done"


@pytest.mark.parametrize(("depth", "width"), [(2, 1), (6, 50)])
async def test_a_forwarding_agent_tool_runs_no_further_ahead_of_a_slow_reader(
    depth: int, width: int
) -> None:
    """Events without a stream that a forwarding AgentTool showed did not wait for the reader:
    the nested run went on at its own pace, so a slow reader (a client on a slow link) had all
    of them waiting in memory, however many: a ParallelAgent inside the tool, which holds one
    event per branch for a reader at the root, held its whole output there. Now a forwarding
    call waits for the reader once it is _SHOWN_AHEAD events ahead."""
    watched: list[weakref.ref[_Shown]] = []
    count = 10 if width > 1 else 100  # each branch's: 100 or 500 events in all
    shows = [_Shows(f"shows{i}", count, watched) for i in range(width)]
    inner: Agent = shows[0] if width == 1 else ParallelAgent("fan", shows, description="Fans out.")
    for level in range(depth - 1, 0, -1):
        script = [Reply(tool_calls=[tool_call(inner.name, {"request": "go"})]), f"level{level}"]
        tools = [AgentTool(inner, emit_inner_events=True)]
        inner = ReActAgent(f"level{level}", ScriptedModel(script), tools=tools, description="d")
    events = Runner(inner).run("hi")
    taken = 0
    ahead = []
    async with contextlib.aclosing(events):
        async for event in events:
            if event.output is not None and isinstance(event.output.custom, _Shown):
                taken += 1
                if taken in (1, 5):
                    for _ in range(200):  # a slow reader: the nested runs may go on meanwhile
                        await asyncio.sleep(0)
                    ahead.append(len(watched) - taken)
    assert taken == len(watched) == count * width
    # Each forwarding level a window ahead, the fan-out one event per branch.
    bound = _SHOWN_AHEAD * (depth - 1) + width
    assert max(ahead) <= bound < count * width - 5, (ahead, bound)
