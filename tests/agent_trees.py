"""Random agent trees for property tests: sequences, parallel branches with and without a
concurrency limit, loops, ``AgentTool`` callers and transfers to sub-agents, nested three deep,
with ReAct leaves that call one tool and answer (and, on request, custom agents that pause
themselves and event-driven ``ActionAgent`` leaves that do the same through the built-in chat and
tool actions). A seed names a tree, so a failure can be replayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator
from typing import Any

from conftest import ChatActor

from adk import (
    Agent,
    AgentEvent,
    AgentInput,
    AgentTool,
    BaseAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    Resources,
    Role,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    tool,
)
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


def agent_tree(
    seed: int,
    approval: bool,
    ran: list[str],
    failing: str = "",
    askers: bool = False,
    actors: bool = False,
) -> Agent:
    """The tree of ``seed``; its ``work`` tool appends the caller's tag to ``ran``. The model of
    the agent named ``failing`` fails when asked for its answer (after its tool ran). With
    ``askers``, some leaves are custom agents that pause themselves (``ctx.interrupt``) rather
    than through a tool's approval; with ``actors``, some leaves are ``ActionAgent``s. Separate
    generators pick them, so the tree's shape for a seed is the same either way."""
    rnd = random.Random(seed)
    pick_askers = random.Random(-seed - 1)
    pick_actors = random.Random(-seed - 2)
    names = iter(range(1, 1000))

    @tool(require_approval=approval)
    async def work(tag: str) -> str:
        """Do one agent's work."""
        await asyncio.sleep(0)
        ran.append(tag)
        return f"worked {tag}"

    def model(name: str, tool_name: str, arguments: dict[str, Any]) -> ScriptedModel:
        def reply(messages: list[Message]) -> Reply:
            if messages[-1].role == Role.TOOL:
                if name == failing:
                    return Reply(error=ConnectionError(f"{name}'s model went away"))
                return Reply(text=f"{name} done")
            return Reply(tool_calls=[tool_call(tool_name, arguments)])

        return ScriptedModel(reply)

    def react(name: str, tool_name: str, arguments: dict[str, Any], tools: list[Any]) -> Agent:
        return ReActAgent(name, model(name, tool_name, arguments), tools=tools, description=name)

    def leaf() -> Agent:
        name = f"leaf{next(names)}"
        if actors and pick_actors.random() < 0.4:
            resources = Resources()
            resources.add_model("model", model(name, "work", {"tag": name}))
            resources.add_tool(work)
            return ChatActor(
                name, ["work"], model="model", prompt="go", description=name, resources=resources
            )
        return react(name, "work", {"tag": name}, [work])

    def asker() -> Agent:
        """A custom agent that asks a person (pauses itself) when approvals are on."""
        return _Asker(f"asker{next(names)}", approval, ran)

    def node(depth: int) -> Agent:
        if depth == 0 or rnd.random() < 0.35:
            return asker() if askers and pick_askers.random() < 0.25 else leaf()
        kind = rnd.choice(["sequence", "parallel", "loop", "caller", "router"])
        name = f"{kind}{next(names)}"
        if kind == "caller":
            inner = leaf()
            return react(name, inner.name, {"request": "go"}, [AgentTool(inner)])
        if kind == "router":  # transfers to its last sub-agent, which answers for it
            targets = [leaf() for _ in range(rnd.randint(1, 2))]
            transfer = tool_call("transfer_to_agent", {"agent_name": targets[-1].name})
            model = ScriptedModel(lambda messages: Reply(tool_calls=[transfer]))
            return ReActAgent(name, model, sub_agents=targets, description=name)
        children = [node(depth - 1) for _ in range(rnd.randint(1, 3))]
        if kind == "sequence":
            return SequentialAgent(name, children)
        if kind == "parallel":
            return ParallelAgent(name, children, max_concurrency=rnd.choice([None, 1, 2]))
        return LoopAgent(name, children, max_iterations=2)

    return node(3)


class _Asker(BaseAgent):
    """Pauses the run with ``ctx.interrupt`` (when ``asks``), then says it was answered; records
    its name in ``ran`` when it does its work, like the ``work`` tool."""

    def __init__(self, name: str, asks: bool, ran: list[str]) -> None:
        super().__init__(name, description=name)
        self.asks = asks
        self.ran = ran

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if self.asks and ctx.resume is None:
            yield ctx.interrupt(f"{self.name}: may I?")
            return
        self.ran.append(self.name)
        yield AgentEvent.of(f"{self.name} done")


async def end_a_run(
    runner: Runner, kind: str, steps: int, choose: random.Random | None = None
) -> None:
    """Run ``runner`` once and end it the ``kind`` way:

    - ``"closed"``: the reader closes the run after ``steps`` + 1 events (with ``choose``, it
      also stops reading some streams midway);
    - ``"cancelled"``: the task reading the run is cancelled after ``steps`` loop steps;
    - otherwise to its end, approving every pause (a ``RunError`` is expected of a tree built
      with ``failing`` and is swallowed).
    """
    if kind == "closed":
        async with contextlib.aclosing(runner.run("go")) as events:
            seen = 0
            async for event in events:
                stream = event.output.stream if event.output is not None else None
                if stream is not None and choose is not None and choose.random() < 0.5:
                    async with contextlib.aclosing(aiter(stream)) as chunks:
                        async for _ in chunks:
                            break  # a reader that stops mid-stream
                seen += 1
                if seen > steps:
                    return
    elif kind == "cancelled":

        async def read() -> None:
            async with contextlib.aclosing(runner.run("go")) as events:
                async for event in events:
                    if event.output is not None and event.output.stream is not None:
                        await event.output.stream.collect()

        reader = asyncio.create_task(read())
        for _ in range(steps):
            await asyncio.sleep(0)
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    else:
        with contextlib.suppress(RunError):
            result = await runner.invoke("go")
            while result.interrupt is not None:
                assert result.checkpoint_id is not None
                approvals = {p.id: {"approved": True} for p in result.interrupt.points}
                result = await runner.invoke_resume(result.checkpoint_id, approvals)
