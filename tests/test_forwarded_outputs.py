"""An ``AgentTool(emit_inner_events=True)`` shows its inner agent's events outside, flagged as no
output of the agent that yields them (``_FORWARDED``). They were taken as outputs all the same:
a run paused inside such a tool had the inner agent's shown message as its ``RunResult.output``
(and ``text``), where the same run with the events not shown had the caller's own last output,
for a ``ReActAgent`` caller and an ``ActionAgent`` one alike; and an ``AgentTool`` whose agent
called such a tool in turn answered with the message it was shown rather than its agent's own.
"""

from __future__ import annotations

import pytest
from conftest import ScriptAgent
from test_interrupts import Asker

from adk import AgentTool, Message, Resources, Runner, SequentialAgent
from adk.actions import (
    ActionAgent,
    ActionContext,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
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
