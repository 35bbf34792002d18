"""Support tickets as a keyed stream: triage, refunds a person approves, memory per customer.

    python examples/ticket_pipeline.py

A data engineer's pipeline, offline. Tickets arrive keyed by customer. ``TicketDesk`` is an
``ActionAgent`` (Flink Agents style):

1. (``triage``, on ``InputEvent``) checks the ticket, keeps its customer in sensory memory (the
   record's own, kept across a pause) and asks the model ``triage`` to classify it, offering the
   ``order_status`` and ``issue_refund`` tools. ``issue_refund`` needs a person's approval
   (``require_approval=True``): the record pauses there;
2. (built-in chat and tool actions) run the model's tool calls;
3. (``enrich``, on ``Classified``) looks the customer up in a CRM that fails now and then, and is
   retried (``retry=RetryPolicy(...)``): a failed attempt's writes and events are dropped;
4. (``record``, on ``Enriched``) keeps the customer's ticket history in short-term memory (per
   key, across records) and outputs one dict per ticket.

The pipeline runs twice, as a service that restarts. The first run's refund pauses, and the
customer's next ticket runs at once. Then the process "restarts": a new environment over the
same SQLite files (checkpoints, and the customers' memory in a ``SessionStore``), with more
tickets and the person's approval, which arrives as a resume beside the records (the shape a
Flink job reads from an approvals topic). A ticket without text fails alone
(``on_error="emit"``). Each record is traced: its outputs' ``run_id`` is its trace's
``gen_ai.conversation.id`` (a resume goes on under its pause's), and its root span names its
key (``adk.record.key``).

The same agent and resources run on Flink, where the resources are a function each worker calls
and the approvals a stream of the paused outputs' JSON with ``"resume"`` added::

    env = FlinkExecutionEnvironment(on_error="emit", resources=build_resources,
                                    checkpoint_store=lambda: SQLiteCheckpointStore(path),
                                    tracer_provider=build_tracing)  # each worker's own
    first = env.from_list(FIRST, key="customer").apply(lambda: TicketDesk("desk")).to_list()
    approvals = env.env.from_collection([json.dumps({**paused, "resume": {point_id: "approved"}})],
                                        type_info=Types.STRING())
    env.from_list(LATER, key="customer").apply(lambda: TicketDesk("desk"), resumes=approvals)

(tests/flink_job.py runs that job). There a key's memory lives in the job, so the second job
starts it again: carrying it across jobs takes ``durable_memory=True`` and a savepoint.

The model is an ``adk.testing.ScriptedModel`` that reads the ticket, so the example runs offline;
register an ``adk.OpenAIChatModel(...)`` as ``triage`` for a real one.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import tempfile
from collections.abc import Hashable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from adk import Message, Resources, RetryPolicy, Role, tool
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    Event,
    InputEvent,
    OutputEvent,
    action,
)
from adk.checkpoint import SQLiteCheckpointStore
from adk.checkpoint.codec import from_json_value, to_json_value
from adk.execution import KeyedOutput, LocalExecutionEnvironment
from adk.testing import Reply, ScriptedModel, tool_call

EXAMPLE_EXPECT = (
    "[acme] T1 billing: refund of 120 waiting for approval",
    "[acme] T2 shipping (tickets so far: 1)",
    "[bolt] T3 other (tickets so far: 1)",
    "[zeta] T4 failed: ActionError: action 'triage' of agent 'desk' failed on InputEvent: "
    "ValueError: ticket T4 has no text",
    "restarted: acme has 1 tickets in memory",
    "crm retried for T6",
    "[bolt] T6 shipping (tickets so far: 2)",
    "[acme] T1 billing (approved): refund 120 issued",
    "acme's tickets: 3",
    "T1's trace: 2 runs of record key acme (its pause and its resume)",
)

# --- tools the model may call ----------------------------------------------------------------


@tool
def order_status(order: str) -> str:
    """The shipping status of an order."""
    return f"order {order} left the warehouse yesterday"


@tool(require_approval=True)
def issue_refund(ticket: str, amount: int) -> str:
    """Refund a customer; a person approves each refund first."""
    return f"refund {amount} issued"


def triage_model(messages: list[Message]) -> Reply:
    """Classifies a ticket by its words; asks for a refund or an order's status first."""
    last = messages[-1]
    if last.role == Role.TOOL:
        ticket = json.loads(messages[0].content)
        category = "billing" if "refund" in last.content else "shipping"
        return Reply(
            text=json.dumps({"id": ticket["id"], "category": category, "note": last.content})
        )
    ticket = json.loads(last.content)
    words = ticket["text"].lower()
    if "refund" in words:
        return Reply(
            tool_calls=[
                tool_call("issue_refund", {"ticket": ticket["id"], "amount": ticket["amount"]})
            ]
        )
    if "where" in words:
        return Reply(tool_calls=[tool_call("order_status", {"order": ticket["order"]})])
    return Reply(text=json.dumps({"id": ticket["id"], "category": "other", "note": ""}))


# --- the agent -------------------------------------------------------------------------------


class Classified(Event):
    ticket: str
    category: str
    note: str


class Enriched(Event):
    ticket: str
    category: str
    note: str
    tier: str


class FlakyCrm:
    """A CRM lookup that fails the first time it is asked about some tickets."""

    def __init__(self) -> None:
        self.failed: set[str] = set()

    def tier(self, customer: str, ticket: str) -> str:
        if ticket.endswith("6") and ticket not in self.failed:
            self.failed.add(ticket)
            print(f"crm retried for {ticket}")
            raise ConnectionError("CRM timed out")
        return "gold" if customer == "acme" else "standard"


CRM = FlakyCrm()


class TicketDesk(ActionAgent):
    @action(InputEvent)
    @staticmethod
    def triage(event: InputEvent, ctx: ActionContext) -> None:
        ticket: dict[str, Any] = event.input
        if not ticket.get("text"):
            raise ValueError(f"ticket {ticket['id']} has no text")
        ctx.sensory_memory.set("customer", ticket["customer"])
        request = ChatRequestEvent(
            model="triage",
            messages=[Message.user(json.dumps(ticket))],
            tools=["order_status", "issue_refund"],
        )
        ctx.send_event(request)

    @action(ChatResponseEvent)
    @staticmethod
    def classified(event: ChatResponseEvent, ctx: ActionContext) -> None:
        found = json.loads(event.response.content)
        ctx.send_event(
            Classified(ticket=found["id"], category=found["category"], note=found["note"])
        )

    @action(Classified, retry=RetryPolicy(max_attempts=3, initial_delay=0.01, jitter=False))
    @staticmethod
    def enrich(event: Classified, ctx: ActionContext) -> None:
        tier = CRM.tier(ctx.sensory_memory.get("customer"), event.ticket)
        ctx.send_event(Enriched(**event.model_dump(), tier=tier))

    @action(Enriched)
    @staticmethod
    def record(event: Enriched, ctx: ActionContext) -> None:
        memory = ctx.short_term_memory
        history = [*memory.get("tickets", []), event.ticket]
        memory.set("tickets", history)
        ctx.send_event(
            OutputEvent(
                output={
                    "ticket": event.ticket,
                    "category": event.category,
                    "note": event.note,
                    "tier": event.tier,
                    "tickets_so_far": len(history),
                }
            )
        )


# --- where the customers' memory is kept: SQLite, as JSON ----------------------------------


class SQLiteSessions:
    """A ``SessionStore``: each customer's session values as JSON text in a SQLite table (the
    codec keeps registered models and NaN; a local file's calls are quick enough to make on the
    event loop, where a networked store's client would be async)."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS sessions (key TEXT PRIMARY KEY, data TEXT)")

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        row = self.db.execute("SELECT data FROM sessions WHERE key = ?", (str(key),)).fetchone()
        return None if row is None else from_json_value(json.loads(row[0]))

    async def put(self, key: Hashable, values: dict[str, Any]) -> None:
        text = json.dumps(to_json_value(values, f"session of {key!r}"))
        self.db.execute("INSERT OR REPLACE INTO sessions VALUES (?, ?)", (str(key), text))
        self.db.commit()


def build_resources() -> Resources:
    """The model and tools, by the names the agent's events give (a function: on Flink each
    worker calls it)."""
    resources = Resources()
    resources.add_model("triage", ScriptedModel(triage_model))
    resources.add_tool(order_status)
    resources.add_tool(issue_refund)
    return resources


def environment(folder: Path, tracer_provider: TracerProvider) -> LocalExecutionEnvironment:
    """The environment as the service builds it at each start: over the same files."""
    return LocalExecutionEnvironment(
        max_concurrency=8,
        on_error="emit",
        timeout=30,
        resources=build_resources(),
        checkpoint_store=SQLiteCheckpointStore(str(folder / "checkpoints.db")),
        tracer_provider=tracer_provider,
    )


def show(output: KeyedOutput) -> str:
    ticket = output.record.get("id") if isinstance(output.record, dict) else None
    if output.error is not None:
        return f"[{output.key}] {ticket} failed: {output.error}"
    if output.interrupt is not None:
        [point] = output.interrupt.points
        amount = point.info["arguments"]["amount"]
        return f"[{output.key}] {ticket} billing: refund of {amount} waiting for approval"
    done = output.output
    approved = " (approved)" if output.resumed else ""
    if done["category"] == "billing":
        return f"[{output.key}] {done['ticket']} billing{approved}: {done['note']}"
    return f"[{output.key}] {done['ticket']} {done['category']} (tickets so far: {done['tickets_so_far']})"


FIRST = [
    {"id": "T1", "customer": "acme", "text": "Please refund my order", "amount": 120},
    {"id": "T2", "customer": "acme", "text": "Where is order 77?", "order": "77"},
    {"id": "T3", "customer": "bolt", "text": "Thanks, all good"},
    {"id": "T4", "customer": "zeta", "text": ""},
]
LATER = [
    {"id": "T5", "customer": "acme", "text": "Just saying hi"},
    {"id": "T6", "customer": "bolt", "text": "Where is order 9?", "order": "9"},
]


async def main() -> None:
    exporter = InMemorySpanExporter()
    tracing = TracerProvider()
    tracing.add_span_processor(SimpleSpanProcessor(exporter))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        agent = TicketDesk("desk")

        # The first run: the refund pauses; acme's next ticket runs at once.
        env = environment(folder, tracing)
        outputs = env.from_list(FIRST, key="customer").apply(
            agent, sessions=SQLiteSessions(folder / "memory.db")
        )
        first = await outputs.to_list()
        for output in first:
            print(show(output))
        [paused] = [o for o in first if o.checkpoint_id is not None]
        # What goes to the approvals topic: the paused output as JSON, the person's answer added,
        # keyed by the point they were shown, so a topic delivering it twice approves no other call.
        assert paused.interrupt is not None
        approval = json.dumps(
            {
                "key": paused.key,
                "checkpoint_id": paused.checkpoint_id,
                "run_id": paused.run_id,
                "resume": {paused.interrupt.points[0].id: "approved"},
            }
        )

        # The service restarts: new objects over the same files, more tickets and the approval.
        sessions = SQLiteSessions(folder / "memory.db")
        kept = await sessions.get("acme")
        assert kept is not None
        print(f"restarted: acme has {len(kept['memory:desk']['tickets'])} tickets in memory")
        env = environment(folder, tracing)
        outputs = env.from_list(LATER, key="customer").apply(
            agent, sessions=sessions, resumes=[approval]
        )
        for output in await outputs.to_list():
            print(show(output))
        final = await sessions.get("acme")
        assert final is not None
        # T2 and T5 ran while T1 waited; T1's write came with its resume (the order of a
        # record and a resume of one key read at about the same time is not fixed).
        print(f"acme's tickets: {len(final['memory:desk']['tickets'])}")

    # Each record's run is traced: its outputs' run_id is its trace's gen_ai.conversation.id,
    # and its root span names its key (adk.record.key). A resume goes on under the same id.
    runs = [
        span.attributes
        for span in exporter.get_finished_spans()
        if span.attributes
        and span.attributes.get("gen_ai.conversation.id") == paused.run_id
        and "adk.record.key" in span.attributes
    ]
    keys = ", ".join(sorted({str(attributes["adk.record.key"]) for attributes in runs}))
    print(f"T1's trace: {len(runs)} runs of record key {keys} (its pause and its resume)")


if __name__ == "__main__":
    asyncio.run(main())
