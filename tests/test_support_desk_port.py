"""A customer-support app as a Google ADK user ports it, paused in one process and resumed in
another through a SQLite file: a ``Supervisor`` whose workers chain through the session (one with
``output_schema`` and ``output_key``, one with ``output_key``, one whose instruction reads both),
a refund tool that pauses with ``raise adk.Interrupt``, an ``AgentTool``, tool callbacks, a
streaming run whose every event is sent with ``to_dict``, ``runner.pending()`` from the resuming
process, and tracing into memory.

What no other test holds together: a supervisor's worker resumed in a fresh process renders its
instruction from values its siblings stored before the pause (the checkpoint's session), then
reports back to the supervisor, and nothing that ran before the pause (the siblings, the
``AgentTool`` call) runs again. The subprocesses run this file as a script (``main`` at the
bottom); each side effect is appended to a log file with the process id.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel

import adk
from adk.callbacks import Callbacks
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent, Supervisor

ROOT = Path(__file__).resolve().parent.parent


class Ticket(BaseModel):
    category: str
    priority: str


# A name of its own: the class is ``__main__.Ticket`` in the subprocesses.
adk.register_type(Ticket, "tests.support.Ticket")


def _log(entry: str) -> None:
    with Path(os.environ["EFFECTS_LOG"]).open("a") as f:
        f.write(f"{os.getpid()} {entry}\n")


@adk.tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up."""
    _log(f"lookup {order_id}")
    return {"order_id": order_id, "status": "delivered"}


@adk.tool
def refund(order_id: str, amount_cents: int, tool_context: adk.ToolContext) -> dict[str, Any]:
    """Refund an order once a person approved it."""
    resume = tool_context.resume
    if resume is None:
        _log(f"refund asked {order_id}")
        raise adk.Interrupt(
            {"type": "refund_approval", "order_id": order_id, "amount_cents": amount_cents},
            state={"customer": tool_context.session["user:name"]},
        )
    _log(f"refund {order_id} {json.dumps(resume.data)}")
    return {"status": "refunded", "for": resume.state["customer"]}


def _said(messages: list[adk.Message], agent: str) -> bool:
    return any(f"[{agent}] said" in m.content for m in messages)


def _boss(messages: list[adk.Message]) -> Any:
    for worker in ("triage", "orders", "billing"):
        if not _said(messages, worker):
            return Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": worker})])
    return "Your refund is done."


def _billing(messages: list[adk.Message]) -> Any:
    last = messages[-1]
    if last.role == "tool" and last.name == "policy":
        call = tool_call("refund", {"order_id": "A-1", "amount_cents": 4200}, id="call_r")
        return Reply(tool_calls=[call])
    if last.role == "tool":
        return f"Refund: {last.content}"
    return Reply(tool_calls=[tool_call("policy", {"request": "A-1?"}, id="call_p")])


def _policy(messages: list[adk.Message]) -> str:
    _log("policy")
    return "Delivered orders are refunded within 30 days."


class _Audit(Callbacks):
    def before_tool(self, ctx: adk.ToolContext, call: adk.ToolCall) -> None:
        _log(f"before_tool {call.name}")

    def after_tool(self, ctx: adk.ToolContext, call: adk.ToolCall, result: Any) -> None:
        _log(f"after_tool {call.name}")


def _runner(store: SQLiteCheckpointStore, provider: TracerProvider) -> tuple[adk.Runner, Any]:
    """The app, built the same in both processes; also the billing agent's model, whose
    requests show the instruction it was given."""
    triage = ReActAgent(
        "triage",
        ScriptedModel(['```json\n{"category": "refund", "priority": "high"}\n```']),
        description="Classifies requests.",
        instruction="Classify what {user:name} asks.",
        output_schema=Ticket,
        output_key="ticket",
    )
    orders = ReActAgent(
        "orders",
        ScriptedModel(
            lambda m: (
                "A-1 was delivered."
                if m[-1].role == "tool"
                else Reply(tool_calls=[tool_call("lookup_order", {"order_id": "A-1"})])
            )
        ),
        description="Looks orders up.",
        tools=[lookup_order],
        output_key="order_status",
    )
    policy = ReActAgent("policy", ScriptedModel(_policy), description="Knows the refund policy.")
    billing_model = ScriptedModel(_billing)
    billing = ReActAgent(
        "billing",
        billing_model,
        description="Refunds orders.",
        instruction="Order: {order_status} Ticket: {ticket}",
        tools=[refund, adk.AgentTool(policy)],
    )
    app = Supervisor(ReActAgent("boss", ScriptedModel(_boss)), [triage, orders, billing])
    runner = adk.Runner(
        app,
        checkpoint_store=store,
        enable_streaming=True,
        callbacks=[_Audit()],
        tracer_provider=provider,
    )
    return runner, billing_model


async def _sent(events: Any) -> list[dict[str, Any]]:
    """The run's events as a streaming service sends them: each stream read, then to_dict."""
    sent = []
    async for event in events:
        if event.output is not None and event.output.stream is not None:
            await event.output.stream.collect()
        sent.append(event.to_dict())
    return sent


async def _start() -> dict[str, Any]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    async with SQLiteCheckpointStore(os.environ["CHECKPOINT_DB"]) as store:
        runner, billing_model = _runner(store, provider)
        sent = await _sent(
            runner.run("Refund A-1 please", session={"user:name": "Ann"}, checkpoint_id="conv-1.1")
        )
    root = next(s for s in spans.get_finished_spans() if s.parent is None)
    return {
        "sent": sent,
        "billing_system": billing_model.requests[0].messages[0].content,
        "root_span": format(root.context.span_id, "016x"),
    }


async def _resume(data: Any) -> dict[str, Any]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    async with SQLiteCheckpointStore(os.environ["CHECKPOINT_DB"]) as store:
        runner, billing_model = _runner(store, provider)
        pending = [
            {"checkpoint_id": p.checkpoint_id, "run_id": p.run_id, "info": p.points[0].info}
            async for p in runner.pending()
        ]
        session = adk.Session()
        sent = await _sent(runner.resume(pending[0]["checkpoint_id"], data, session=session))
        left = [p.checkpoint_id async for p in runner.pending()]
    root = next(s for s in spans.get_finished_spans() if s.parent is None)
    return {
        "pending": pending,
        "sent": sent,
        "session": dict(session.values),
        "left": left,
        "billing_system": billing_model.requests[0].messages[0].content,
        "links": [
            [format(link.context.span_id, "016x"), dict(link.attributes or {})]
            for link in root.links
        ],
    }


def main(argv: list[str]) -> None:
    out = asyncio.run(_start() if argv[0] == "start" else _resume(json.loads(argv[1])))
    print(json.dumps(out))


# -- the test -----------------------------------------------------------------------------------


def _run(tmp: Path, *args: str) -> dict[str, Any]:
    env = {
        **os.environ,
        "CHECKPOINT_DB": str(tmp / "checkpoints.db"),
        "EFFECTS_LOG": str(tmp / "effects.log"),
    }
    done = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return out


def test_a_ported_support_desk_pauses_for_a_refund_and_resumes_in_another_process(
    tmp_path: Path,
) -> None:
    started = _run(tmp_path, "start")
    paused = started["sent"][-1]["action"]["interrupted"]
    assert paused["checkpoint_id"] == "conv-1.1"
    assert [p["id"] for p in paused["points"]] == ["agent:boss/agent:billing/tool:refund#call_r"]
    ticket = {"category": "refund", "priority": "high"}
    custom = [e["output"] for e in started["sent"] if "custom" in e.get("output", {})]
    assert custom == [{"custom": ticket, "custom_type": "tests.support.Ticket"}]
    system = 'Order: A-1 was delivered. Ticket: {"category": "refund", "priority": "high"}'
    assert started["billing_system"] == system  # the fenced answer stored as its JSON

    resumed = _run(tmp_path, "resume", json.dumps({"approved": True}))
    assert resumed["pending"] == [
        {
            "checkpoint_id": "conv-1.1",
            "run_id": resumed["pending"][0]["run_id"],
            "info": {"type": "refund_approval", "order_id": "A-1", "amount_cents": 4200},
        }
    ]
    # The worker resumed in this process renders its instruction from what its siblings stored
    # before the pause, restored from the checkpoint.
    assert resumed["billing_system"] == system
    lines = [
        (e["agent_name"], e["output"]["message"]["content"])
        for e in resumed["sent"]
        if "message" in e.get("output", {})
    ]
    assert lines == [
        ("billing", '{"status":"refunded","for":"Ann"}'),
        ("billing", 'Refund: {"status":"refunded","for":"Ann"}'),
        ("boss", "Your refund is done."),
    ]
    assert json.loads(resumed["session"]["ticket"]) == ticket
    assert resumed["session"]["order_status"] == "A-1 was delivered."
    assert resumed["left"] == []
    assert resumed["links"] == [[started["root_span"], {"adk.checkpoint.id": "conv-1.1"}]]

    entries = [line.split(" ", 1) for line in (tmp_path / "effects.log").read_text().splitlines()]
    first, second = entries[0][0], entries[-1][0]
    assert first != second
    assert [e for pid, e in entries if pid == first] == [
        "before_tool transfer_to_agent",
        "after_tool transfer_to_agent",
        "before_tool transfer_to_agent",
        "after_tool transfer_to_agent",
        "before_tool lookup_order",
        "lookup A-1",
        "after_tool lookup_order",
        "before_tool transfer_to_agent",
        "after_tool transfer_to_agent",
        "before_tool policy",
        "policy",
        "after_tool policy",
        "before_tool refund",
        "refund asked A-1",
    ]
    # Only the paused call ran again; the siblings and the AgentTool call did not.
    assert [e for pid, e in entries if pid == second] == [
        "before_tool refund",
        'refund A-1 {"approved": true}',
        "after_tool refund",
    ]


if __name__ == "__main__":
    main(sys.argv[1:])
