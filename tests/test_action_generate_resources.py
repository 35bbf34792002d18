"""An ``ActionAgent``'s action calling a model by name through ``ctx.run_context.generate``/
``stream`` (agents.md: a model may be named by resource name) finds it where the agent's built-in
chat action finds its model: the agent's own ``resources=`` first, the runner's for the names the
agent does not define, and a name both define as different objects refused (the decision
architecture.md states for an ``ActionAgent``'s resources). It looked in the runner's alone: an agent given its
model by its own resources failed with "the runner has no resources", or was silently run on the
runner's model of that name. A tool the agent's chat calls reaches the same through its
``tool_ctx.run_context``.
"""

from __future__ import annotations

import pytest

import adk
from adk import Message, Runner
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


class Namer(ActionAgent):
    """Asks the model named ``m`` through its run context, generated or streamed."""

    def __init__(self, resources: adk.Resources, streamed: bool = False) -> None:
        super().__init__("namer", resources=resources)
        self.streamed = streamed

    @action(InputEvent)
    async def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        run = ctx.run_context
        if self.streamed:
            reply = await run.stream("m", str(event.input)).collect()
        else:
            reply = await run.generate("m", str(event.input))
        ctx.send_event(OutputEvent(output=reply.content))


def registry(**models: ScriptedModel) -> adk.Resources:
    resources = adk.Resources()
    for name, model in models.items():
        resources.add_model(name, model)
    return resources


@pytest.mark.parametrize("streamed", [False, True])
async def test_an_action_finds_its_agents_own_model_by_name(streamed: bool) -> None:
    own = ScriptedModel(["the agent's"])
    result = await Runner(Namer(registry(m=own), streamed)).invoke("hi")
    assert result.text == "the agent's" and len(own.requests) == 1
    # With the runner's resources beside (another name), still the agent's own.
    other = ScriptedModel(["the runner's"])
    own = ScriptedModel(["the agent's"])
    runner = Runner(Namer(registry(m=own), streamed), resources=registry(n=other))
    assert (await runner.invoke("hi")).text == "the agent's" and not other.requests


async def test_the_runners_model_serves_a_name_the_agent_does_not_define() -> None:
    shared = ScriptedModel(["the runner's"])
    runner = Runner(Namer(registry(n=ScriptedModel([]))), resources=registry(m=shared))
    assert (await runner.invoke("hi")).text == "the runner's"


async def test_a_name_both_define_as_different_models_is_refused_as_the_chat_refuses_it() -> None:
    own, shared = ScriptedModel(["the agent's"]), ScriptedModel(["the runner's"])
    runner = Runner(Namer(registry(m=own)), resources=registry(m=shared))
    with pytest.raises(adk.RunError, match="model name 'm' is defined both by agent 'namer'"):
        await runner.invoke("hi")
    assert not own.requests and not shared.requests
    # The same object in both is one model.
    same = ScriptedModel(["one"])
    assert (await Runner(Namer(registry(m=same)), resources=registry(m=same)).invoke("x")).text


async def test_an_unknown_name_says_what_both_registries_know() -> None:
    runner = Runner(Namer(registry(a=ScriptedModel([]))), resources=registry(b=ScriptedModel([])))
    with pytest.raises(adk.RunError, match="neither its own resources nor the runner's"):
        await runner.invoke("hi")


async def test_a_tool_the_agents_chat_calls_finds_the_agents_model() -> None:
    @adk.tool
    async def summarize(text: str, ctx: adk.ToolContext) -> str:
        """Summarize a text."""
        return (await ctx.run_context.generate("m", text)).content

    chat = ScriptedModel([Reply(tool_calls=[tool_call("summarize", {"text": "long"})]), "done"])
    inner = ScriptedModel(["gist"])
    resources = registry(chat=chat, m=inner)
    resources.add_tool(summarize)

    class Chatter(ActionAgent):
        @action(InputEvent)
        async def start(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.send_event(
                ChatRequestEvent(
                    model="chat", messages=[Message.user(str(event.input))], tools=["summarize"]
                )
            )

        @action(ChatResponseEvent)
        async def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))

    result = await Runner(Chatter("chatter", resources=resources)).invoke("go")
    assert result.text == "done" and len(inner.requests) == 1
    assert chat.requests[1].messages[-1].content == "gist"
