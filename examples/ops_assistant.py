"""An operations assistant on ``PlanExecute``: a runbook planned, carried out step by step, a
restart that waits for a person's approval, and the plan's progress shown from the events.

The planner writes a plan for an incident, the executor carries out one step at a time with its
tools, and after each step the replanner either revises what is left or answers. Restarting a
host needs a person's approval (``@tool(require_approval=True)``): the run pauses inside that
step and the runner saves a checkpoint in a SQLite file. A fresh runner, with agents built anew
as a new process would build them, resumes it from the file: the plan, the finished steps and
their results come back from the checkpoint, the approved restart runs, and the replanner adds a
step before it answers. Scripted models stand in for an LLM, so the example runs offline.

What a UI would show comes from the events alone (see docs/prebuilt.md, "Following the plan from
the events"): the plan is the planner's ``Plan`` output, a revised one rides the ``update_plan``
tool's event as its structured value, and each round carries out the plan's first step.

Run from the repository root::

    python examples/ops_assistant.py
    python examples/ops_assistant.py --deny      # the restart is refused; the plan changes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from adk import AgentEvent, Message, Runner, tool
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import Plan, PlanExecute

EXAMPLE_EXPECT = (
    "plan: check web1 | check web2 | restart web2 | verify web2",
    "step 3: restart web2",
    "waiting on agent:incident/agent:execute_replan/agent:incident_executor/tool:restart#",
    "[ops] restarting web2",
    "plan revised: verify web2 | tell on-call",
    "step 5: tell on-call",
    "answer: web2 was stuck on a full disk; restarted with approval, verified, on-call told.",
)

HOSTS = {"web1": "healthy", "web2": "unresponsive: disk full"}


@tool
def check(host: str) -> str:
    """Check a host's health.

    Args:
        host: The host name.
    """
    return f"{host}: {HOSTS[host]}"


@tool(require_approval=True)
def restart(host: str) -> str:
    """Restart a host. A person must approve every restart.

    Args:
        host: The host name.
    """
    print(f"  [ops] restarting {host}")
    HOSTS[host] = "healthy"
    return f"{host} restarted"


@tool
def page(text: str) -> str:
    """Send a message to the on-call engineer.

    Args:
        text: The message.
    """
    return "on-call paged"


# -- scripted models standing in for an LLM ------------------------------------------------------
def planner_model(messages: list[Message]) -> str:
    steps = ["check web1", "check web2", "restart web2", "verify web2"]
    return json.dumps({"steps": steps})


def executor_model(messages: list[Message]) -> Any:
    """Carries out the step the prompt ends with, calling the tool it names."""
    last = messages[-1]
    if last.role == "tool":
        return f"done: {last.content}"
    step = last.content.rsplit("\n", 1)[-1]
    verb, _, host = step.partition(" ")
    if verb in ("check", "verify"):
        return Reply(tool_calls=[tool_call("check", {"host": host.removesuffix(" again")})])
    if verb == "restart":
        return Reply(tool_calls=[tool_call("restart", {"host": host})])
    return Reply(tool_calls=[tool_call("page", {"text": "web2 restarted after a full disk"})])


def replanner_model(messages: list[Message]) -> Any:
    """Keeps the plan (a blank reply) until the restart; then adds a step; then answers."""
    prompt = messages[-1].content
    if "restart web2\n   Result: done: web2 restarted" in prompt and "tell on-call" not in prompt:
        return Reply(
            tool_calls=[tool_call("update_plan", {"steps": ["verify web2", "tell on-call"]})]
        )
    refused = "Result: done: Error: the call to 'restart' was not approved" in prompt
    if refused and "tell on-call" not in prompt:
        return Reply(tool_calls=[tool_call("update_plan", {"steps": ["tell on-call"]})])
    if "tell on-call\n   Result:" in prompt:
        if "restarted" in prompt:
            return "web2 was stuck on a full disk; restarted with approval, verified, on-call told."
        return "web2 is down (disk full); the restart was refused, on-call told."
    return ""


def build_agent() -> PlanExecute:
    """The same agent in both phases: the checkpoint holds state, not code."""
    return PlanExecute.from_model(
        ScriptedModel(_by_role), tools=[check, restart, page], name="incident"
    )


def _by_role(messages: list[Message]) -> Any:
    """One scripted model for all three roles (``from_model``), told apart by their prompts."""
    system = messages[0].content
    if system.startswith("You are a planner"):
        return planner_model(messages)
    if system.startswith("You carry out one step"):
        return executor_model(messages)
    return replanner_model(messages)


# -- the plan's progress, from the events --------------------------------------------------------
class Progress:
    """What a UI tracks: the plan as it stands, and which step is running."""

    def __init__(self, agent: PlanExecute) -> None:
        self.executor, self.replanner = agent.executor.name, agent.replanner.name
        self.plan: list[str] = []
        self.done = 0
        self.role: str | None = None

    def show(self, event: AgentEvent) -> None:
        output = event.output
        if output is not None and isinstance(output.custom, Plan):
            self.plan = list(output.custom.steps)
            print(f"plan: {' | '.join(self.plan)}")
        if event.agent_name != self.role:
            self.role = event.agent_name
            if self.role == self.executor:
                print(f"step {self.done + 1}: {self.plan[0]}")
            elif self.role == self.replanner:
                self.plan, self.done = self.plan[1:], self.done + 1
        message = output.message if output is not None else None
        if message is None:
            return
        if isinstance(message.metadata.get("structured"), Plan):
            self.plan = list(message.metadata["structured"].steps)
            print(f"plan revised: {' | '.join(self.plan)}")
        elif message.role == "tool":
            print(f"  {message.name}: {message.content}")


async def run(db: Path, approve: bool) -> int:
    async with SQLiteCheckpointStore(db) as store:
        agent = build_agent()
        progress = Progress(agent)
        paused = None
        async for event in Runner(agent, checkpoint_store=store).run("web2 alerts: no response"):
            progress.show(event)
            paused = event.interrupted or paused
        if paused is None:
            print("the run did not pause")
            return 1
        [point] = paused.points
        print(f"waiting on {point.id}: restart {point.info['arguments']['host']}?")

        # Later, maybe in another process after a deploy: agents built anew, state from the file.
        agent = build_agent()
        progress.executor, progress.replanner = agent.executor.name, agent.replanner.name
        decision = {"approved": approve, "reason": None if approve else "not in business hours"}
        print(f"a person answers: {'approve' if approve else 'deny'}")
        async for event in Runner(agent, checkpoint_store=store).resume(
            paused.checkpoint_id, decision
        ):
            progress.show(event)
            if event.error is not None:
                print(f"error: {event.error}")
                return 1
            message = event.message
            answered = message is not None and message.role == "assistant" and message.content
            if event.agent_name == progress.replanner and answered and not message.tool_calls:
                print(f"answer: {message.content}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--deny", action="store_true", help="refuse the restart")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(run(Path(tmp) / "checkpoints.db", approve=not args.deny))


if __name__ == "__main__":
    raise SystemExit(main())
