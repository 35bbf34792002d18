"""A typed user's pauses and resumes: an approval tool, a resumable agent, answers keyed by point,
the pending list, events as JSON (checked by mypy --strict, not run)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any, assert_type

from pydantic import BaseModel

import adk
from adk import (
    AgentEvent,
    AgentInput,
    Interrupt,
    InterruptInfo,
    InterruptPoint,
    ResumeContext,
    RunContext,
    Runner,
    ToolContext,
    register_type,
    run_messages,
    run_usage,
    tool,
)
from adk.checkpoint import PendingCheckpoint, SQLiteCheckpointStore, list_pending
from adk.testing import ScriptedModel
from prebuilt import ReActAgent


@register_type
class Approval(BaseModel):
    approved: bool
    reason: str = ""


assert_type(Approval, type[Approval])


@tool
def transfer(amount_cents: int, ctx: ToolContext) -> str:
    resume = ctx.resume
    if resume is None or not resume.was_interrupted:
        raise Interrupt({"amount_cents": amount_cents}, state={"asked": True})
    answer = Approval.model_validate(resume.data)
    return "sent" if answer.approved else f"refused: {answer.reason}"


class Checklist(adk.BaseAgent):
    """A resumable agent: asks once, goes on from its saved state."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield ctx.interrupt({"question": "ready?"}, state={"step": 1})

    async def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        resume = ctx.resume
        assert resume is not None
        assert_type(resume, ResumeContext)
        step: int = resume.state["step"]
        yield AgentEvent.of(f"step {step}: {resume.data}")


def resumable(agent: adk.ResumableAgent) -> None:
    print(agent.name)


async def main() -> None:
    resumable(Checklist("checklist"))
    model = ScriptedModel(["done"])
    store = SQLiteCheckpointStore("pauses.db")
    runner = Runner(ReActAgent("payer", model, tools=[transfer]), checkpoint_store=store)
    events = runner.run("send 5 EUR", checkpoint_id="pay-1")
    async for event in events:
        paused = event.interrupted
        if paused is not None:
            assert_type(paused, InterruptInfo)
            for point in paused.points:
                assert_type(point, InterruptPoint)
                print(point.id, point.address, point.info)
            print(json.dumps(event.to_dict()))
    usage = run_usage(events)
    print(usage.total_tokens if usage is not None else 0, len(run_messages(events)))

    result = await runner.invoke("send 5 EUR")
    if result.interrupt is not None:
        checkpoint_id = result.interrupt.checkpoint_id
        assert_type(checkpoint_id, str)
        answers: dict[str, Any] = {
            point.id: Approval(approved=True) for point in result.interrupt.points
        }
        resumed = await runner.invoke_resume(checkpoint_id, answers)
        print(resumed.text)
        async for event in runner.resume(checkpoint_id, Approval(approved=False, reason="no")):
            print(event.agent_name, event.run_path)
    async for pending in runner.pending(prefix="pay-"):
        print(pending.checkpoint_id, pending.saved_at, pending.resuming, pending.error)
    waiting = await runner.pending(prefix="pay-")  # all at once, as a list
    assert_type(waiting, list[PendingCheckpoint])
    assert_type(await list_pending(runner.checkpoint_store), list[PendingCheckpoint])
    listing = runner.pending()
    assert_type(await anext(listing), PendingCheckpoint)
    await listing.aclose()
    sent = AgentEvent.from_dict(json.loads("{}"))
    assert_type(sent, AgentEvent)
