"""A support desk of two agents with a transfer; refunds wait for a person, approved later elsewhere.

A ``triage`` agent answers shipping questions with its own tool and transfers refund requests to a
``refunds`` agent (``ReActAgent(sub_agents=[...])`` gives it the ``transfer_to_agent`` tool). The
refunds agent's ``issue_refund`` is a ``@tool(require_approval=True)``: its run pauses before any
money moves, and the runner saves the pause in a SQLite file under the ticket's checkpoint id.

A second script, started here as a new process, builds the same agents, lists the runs that wait
(``runner.pending()``, read from the file: nothing runs) and resumes each with a person's
decision: refunds up to 100.00 EUR approved, larger ones denied with a reason the agent reads.

    python examples/support_desk.py                         # the tickets, then the approvals
    python examples/support_desk.py --db desk.db            # keep the SQLite file
    python examples/support_desk.py --approve --db desk.db  # the second script alone

The models are ``ScriptedModel``s so it runs offline, each scripted as one function of the
messages it is sent rather than a list of replies: a list answers by turn, so the new process's
model would start its list over, ask for the paused refund again and pause again; a function
answers the refund's result with the final reply in whichever process it runs.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from pathlib import Path

from adk import Message, Role, Runner, tool
from adk.checkpoint import SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

EXAMPLE_EXPECT = (
    "ticket-1: Order A-1001 is out for delivery, due tomorrow.",
    "ticket-2 waits: issue_refund {'order_id': 'A-1002', 'amount_cents': 2500}",
    "ticket-2: approved -> Done: refunded 25.00 EUR on order A-1002.",
    "ticket-3: denied -> The refund was not made: over the desk's limit of 100.00 EUR.",
    "runs still waiting: 0",
)

TICKETS = {
    "ticket-1": "Where is my order A-1001?",
    "ticket-2": "Please refund 25.00 EUR for order A-1002, it arrived broken.",
    "ticket-3": "I want a refund of 480.00 EUR for order A-1003.",
}
LIMIT_CENTS = 10_000


@tool
def track_order(order_id: str) -> str:
    """Where an order is.

    Args:
        order_id: The order, e.g. "A-1001".
    """
    return f"Order {order_id} is out for delivery, due tomorrow."


@tool(require_approval=True)
def issue_refund(order_id: str, amount_cents: int) -> str:
    """Refund an order. A person approves every refund.

    Args:
        order_id: The order to refund.
        amount_cents: How much, in euro cents.
    """
    # A real tool would call the payment provider here, with an idempotency key (docs/interrupts.md).
    return f"refunded {amount_cents / 100:.2f} EUR on order {order_id}"


def _request(messages: list[Message]) -> str:
    """The customer's ticket: the first user message the agent was sent."""
    return next(m.content for m in messages if m.role == Role.USER)


def triage_model(messages: list[Message]) -> Reply | str:
    """Stands in for an LLM: refunds go to the refunds agent, the rest is tracked here."""
    last, ticket = messages[-1], _request(messages)
    if last.role == Role.TOOL:
        return last.content
    if "refund" in ticket.lower():
        return Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "refunds"})])
    order = re.search(r"A-\d+", ticket)
    arguments = {"order_id": order.group() if order else "unknown"}
    return Reply(tool_calls=[tool_call("track_order", arguments, id="track_1")])


def refunds_model(messages: list[Message]) -> Reply | str:
    """Stands in for an LLM: ask for the refund the ticket names, then report what came of it."""
    last = messages[-1]
    if last.role == Role.TOOL:
        if last.content.startswith("Error:"):  # denied: "...was not approved: <reason>"
            return f"The refund was not made: {last.content.rsplit(': ', 1)[-1]}."
        return f"Done: {last.content}."
    ticket = _request(messages)
    order = re.search(r"A-\d+", ticket)
    amount = re.search(r"(\d+)\.(\d\d) EUR", ticket)
    arguments = {
        "order_id": order.group() if order else "unknown",
        "amount_cents": int(amount.group(1)) * 100 + int(amount.group(2)) if amount else 0,
    }
    return Reply(tool_calls=[tool_call("issue_refund", arguments, id="refund_1")])


def build_runner(store: SQLiteCheckpointStore) -> Runner:
    """The same agents in both scripts: a checkpoint holds state, not code, and the resuming
    process finds its place by the agents' names."""
    refunds = ReActAgent(
        "refunds",
        ScriptedModel(refunds_model),
        instruction="You refund orders. Every refund needs a person's approval.",
        description="Refunds orders.",
        tools=[issue_refund],
    )
    triage = ReActAgent(
        "triage",
        ScriptedModel(triage_model),
        instruction="You answer support tickets; hand refund requests to the refunds agent.",
        tools=[track_order],
        sub_agents=[refunds],
    )
    return Runner(triage, checkpoint_store=store)


async def take_tickets(db: Path) -> int:
    """The first script: one run per ticket; the refunds pause and wait in ``db``."""
    async with SQLiteCheckpointStore(db) as store:
        runner = build_runner(store)
        for ticket_id, text in TICKETS.items():
            result = await runner.invoke(text, checkpoint_id=ticket_id)
            if result.interrupt is None:
                print(f"{ticket_id}: {result.text}")
                continue
            for point in result.interrupt.points:
                print(f"{ticket_id} waits: {point.info['tool']} {point.info['arguments']}")
    print("the approvals, in a new process:", flush=True)
    child = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--approve", "--db", str(db)
    )
    return await child.wait()


async def approve(db: Path) -> int:
    """The second script: list what waits, decide, resume each run."""
    async with SQLiteCheckpointStore(db) as store:
        runner = build_runner(store)
        waiting = [pending async for pending in runner.pending()]
        for pending in sorted(waiting, key=lambda p: p.checkpoint_id):
            decisions = {}
            for point in pending.points:
                amount = point.info["arguments"]["amount_cents"]
                if amount <= LIMIT_CENTS:
                    decisions[point.id] = True
                else:
                    reason = f"over the desk's limit of {LIMIT_CENTS / 100:.2f} EUR"
                    decisions[point.id] = {"approved": False, "reason": reason}
            result = await runner.invoke_resume(pending.checkpoint_id, decisions)
            verdict = "approved" if all(d is True for d in decisions.values()) else "denied"
            print(f"{pending.checkpoint_id}: {verdict} -> {result.text}")
        left = [pending async for pending in runner.pending()]
        print(f"runs still waiting: {len(left)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", type=Path, help="SQLite checkpoint file (default: a temp dir)")
    parser.add_argument("--approve", action="store_true", help="run the second script only")
    args = parser.parse_args(argv)
    if args.approve:
        if args.db is None:
            parser.error("--approve needs --db, the file the first script saved its pauses in")
        return asyncio.run(approve(args.db))
    if args.db is not None:
        return asyncio.run(take_tickets(args.db))
    with tempfile.TemporaryDirectory() as tmp:
        return asyncio.run(take_tickets(Path(tmp) / "desk.db"))


if __name__ == "__main__":
    raise SystemExit(main())
