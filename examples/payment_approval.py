"""A payment that waits for a person's approval — paused in one process, resumed in another.

An agent (``ReActAgent`` driven by a scripted model, so the example runs offline) proposes a
payment through a ``@tool(require_approval=True)`` tool. The run pauses before any money moves and
the runner saves a checkpoint in a SQLite file. This process prints the approval request, then
starts a *new* process that loads the checkpoint from the file and resumes with the decision; only
then does the tool run. After the resumed run finishes the checkpoint is deleted.

Run from the repository root::

    python examples/payment_approval.py                 # approve
    python examples/payment_approval.py --deny          # the agent is told the payment was refused
    python examples/payment_approval.py --db pay.db     # keep the SQLite file somewhere you choose

The second process is this same file started as
``python examples/payment_approval.py --resume CHECKPOINT_ID --db PATH --decision approve``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from adk import Message, Runner, tool
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

EXAMPLE_EXPECT = (
    "waiting on agent:payments/tool:send_payment#call_1",
    "Done: payment of 120.00 EUR to ACME GmbH sent",
    "checkpoint deleted after the resumed run: True",
)


@tool(require_approval=True)
def send_payment(payee: str, amount_cents: int, reference: str) -> str:
    """Send a bank transfer. A person must approve every call.

    Args:
        payee: Who receives the money.
        amount_cents: The amount, in euro cents.
        reference: The reference printed on the payee's statement.
    """
    # A real tool would call the bank here. It runs only after approval, in the resuming process.
    print(f"  [bank, pid {os.getpid()}] {amount_cents / 100:.2f} EUR -> {payee} ({reference})")
    return f"payment of {amount_cents / 100:.2f} EUR to {payee} sent, reference {reference}"


def scripted_model(messages: list[Message]) -> Any:
    """Stands in for an LLM: propose the payment, then report what the tool said."""
    last = messages[-1]
    if last.role == "tool":
        if last.metadata.get("is_error") or last.content.startswith("Error:"):
            return "The payment was not made: it was not approved."
        return f"Done: {last.content}."
    arguments = {"payee": "ACME GmbH", "amount_cents": 12_000, "reference": "INV-2041"}
    return Reply(
        text="Invoice INV-2041 is due; I'll pay it.",
        tool_calls=[tool_call("send_payment", arguments, id="call_1")],
    )


def build_runner(store: SQLiteCheckpointStore) -> Runner:
    """The same agent in both processes: the checkpoint holds state, not code."""
    agent = ReActAgent(
        "payments",
        ScriptedModel(scripted_model),
        instruction="You pay due invoices. Every payment needs a person's approval.",
        tools=[send_payment],
    )
    return Runner(agent, checkpoint_store=store)


def show(event: Any) -> None:
    message = event.message
    if message is None:
        return
    if message.role == "tool":
        print(f"  [{event.agent_name}] {message.name} returned: {message.content}")
    elif message.content:
        print(f"  [{event.agent_name}] {message.content}")
    for call in message.tool_calls:
        print(f"  [{event.agent_name}] proposes {call.name}({call.arguments})")


async def request_payment(db: Path, decision: str) -> int:
    """Phase 1: run until the approval pause, then let a new process resume it."""
    async with SQLiteCheckpointStore(db) as store:
        runner = build_runner(store)
        print(f"process {os.getpid()}: asking the agent to pay the invoice")
        interrupt = None
        async for event in runner.run("Please settle invoice INV-2041."):
            show(event)
            interrupt = event.interrupted or interrupt
        if interrupt is None:
            print("the run did not pause")
            return 1
        print(f"paused; checkpoint {interrupt.checkpoint_id!r} saved in {db}")
        for point in interrupt.points:
            print(f"  waiting on {point.id}:\n    {json.dumps(point.info)}")

        print(f"a person decides: {decision}; resuming in a new process", flush=True)
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--resume",
            interrupt.checkpoint_id,
            "--db",
            str(db),
            "--decision",
            decision,
        )
        if await child.wait() != 0:
            return 1
        gone = await store.get(interrupt.checkpoint_id) is None
        print(f"process {os.getpid()}: checkpoint deleted after the resumed run: {gone}")
        return 0 if gone else 1


async def resume_payment(db: Path, checkpoint_id: str, decision: str) -> int:
    """Phase 2, in a fresh process: load the checkpoint from SQLite and resume with the decision."""
    approved = decision == "approve"
    async with SQLiteCheckpointStore(db) as store:
        runner = build_runner(store)
        print(f"process {os.getpid()}: resuming {checkpoint_id!r}")
        reason = None if approved else "refused by the finance team"
        async for event in runner.resume(checkpoint_id, {"approved": approved, "reason": reason}):
            show(event)
            if event.error is not None:
                print(f"  error: {event.error}")
                return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", type=Path, help="SQLite checkpoint file (default: a temp dir)")
    parser.add_argument("--deny", action="store_true", help="refuse the payment")
    parser.add_argument("--resume", metavar="CHECKPOINT_ID", help=argparse.SUPPRESS)
    parser.add_argument("--decision", choices=["approve", "deny"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.resume:
        if args.db is None or args.decision is None:
            parser.error("--resume needs --db and --decision")
        return asyncio.run(resume_payment(args.db, args.resume, args.decision))
    decision = "deny" if args.deny else "approve"
    if args.db is not None:
        return asyncio.run(request_payment(args.db, decision))
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(request_payment(Path(tmp) / "checkpoints.db", decision))


if __name__ == "__main__":
    raise SystemExit(main())
