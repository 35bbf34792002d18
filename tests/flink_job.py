"""A Flink job for tests/test_flink.py, run as a script (``python tests/flink_job.py``).

Run as ``__main__``, its agent and factories are shipped to PyFlink's Python workers by value, as
a user's job script's are. It runs an ``ActionAgent`` over customer records keyed by customer on a
local Flink (MiniCluster, parallelism 2), once through the async I/O operator and once with
durable memory (keyed state): each record asks a
scripted model, which adds the amount to the customer's running total with the ``add`` tool; the
total is kept in short-term memory. One record fails (``on_error="emit"``). The outputs are printed
as one JSON line for the test to check.

The operator tests without a cluster (tests/test_flink_resumes.py, tests/test_flink_encoding.py)
import its ``book`` action and ``KeyedState``, the stand-in for Flink's keyed state.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import cloudpickle
from pydantic import BaseModel
from pyflink.common import Configuration, Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.java_gateway import get_gateway

from adk import Interrupt, Message, OpenAIChatModel, Resources, Role, Usage, tool
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
from adk.execution import FlinkExecutionEnvironment
from adk.execution._flink import _why_state_is_restored
from adk.testing import Reply, ScriptedModel, tool_call

CUSTOMERS = ("ann", "bob", "cat", "dan")
RECORDS = [
    {"customer": CUSTOMERS[n % 4], "n": n, "amount": -1 if n == 5 else n + 1} for n in range(16)
]


CALL_USAGE = Usage(input_tokens=5, output_tokens=2, total_tokens=7)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adding(messages: list[Message]) -> Reply:
    """Calls add(total, amount) for the numbers in the question, then answers with the sum."""
    # Each call reports usage, which the record's output carries (KeyedOutput.usage).
    if messages[-1].role == Role.TOOL:
        return Reply(text=messages[-1].content, usage=CALL_USAGE)
    total, amount = (int(word) for word in messages[0].content.split())
    return Reply(tool_calls=[tool_call("add", {"a": total, "b": amount})], usage=CALL_USAGE)


def build_resources() -> Resources:
    resources = Resources()
    resources.add_model("adder", ScriptedModel(adding))
    resources.add_tool(add)
    return resources


class Totalled(Event):
    """A customer's new total: an event class of the job script's own, which PyFlink ships to the
    workers pickled by value (a deferred one could not be unpickled there)."""

    seen: list[int]
    total: int


class Ledger(ActionAgent):
    """Keeps each customer's running total in short-term memory; the model does the adding."""

    active = 0
    most_active = 0
    # The first record an instance runs waits (up to 10 s) for a record of another key to join
    # it, so the overlap the test checks does not hang on 50 ms of luck: on a loaded machine
    # Flink fed records further apart than that, and the check failed now and then.
    # (Made where the records run; ``run`` clears it before the job ships this class pickled,
    # as an Event does not pickle. The durable job runs one record at a time: nothing to wait for.)
    company: asyncio.Event | None = None
    wait_for_company = True

    @action(InputEvent)
    async def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        record: dict[str, Any] = event.input
        if record["amount"] < 0:
            raise ValueError(f"record {record['n']} has a negative amount")
        memory = ctx.short_term_memory
        memory.set("seen", [*memory.get("seen", []), record["n"]])
        Ledger.active += 1
        Ledger.most_active = max(Ledger.most_active, Ledger.active)
        first = Ledger.wait_for_company and Ledger.company is None
        if first:
            Ledger.company = asyncio.Event()
        company = Ledger.company
        if Ledger.active >= 2 and company is not None:
            company.set()
        try:
            if first and company is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(company.wait(), 10)
            else:
                await asyncio.sleep(0.05)  # records of other keys overlap here
        finally:
            Ledger.active -= 1
        question = Message.user(f"{memory.get('total', 0)} {record['amount']}")
        ctx.send_event(ChatRequestEvent(model="adder", messages=[question], tools=["add"]))

    @action(ChatResponseEvent)
    def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        memory = ctx.short_term_memory
        total = int(event.response.content)
        memory.set("total", total)
        ctx.send_event(Totalled(seen=memory.get("seen"), total=total))

    @action(Totalled)
    @staticmethod
    def report(event: Totalled, ctx: ActionContext) -> None:
        output = {"seen": event.seen, "total": event.total, "most": Ledger.most_active}
        ctx.send_event(OutputEvent(output=output))


def run(durable_memory: bool) -> list[dict[str, Any]]:
    Ledger.company, Ledger.wait_for_company = None, not durable_memory
    env = FlinkExecutionEnvironment(
        on_error="emit",
        max_concurrency=8,
        resources=build_resources,
        durable_memory=durable_memory,
    )
    env.env.set_parallelism(2)
    return env.from_list(RECORDS, key="customer").apply(lambda: Ledger("ledger")).to_list()


@action(InputEvent)
def shout(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output=str(event.input).upper()))


def unkeyed() -> list[dict[str, Any]]:
    """A typed stream of the user's own (strings), no key: every record on its own."""
    env = FlinkExecutionEnvironment()
    stream = env.env.from_collection(["ab", "cd", "ef"], type_info=Types.STRING())
    return env.from_datastream(stream).apply(ActionAgent("shout", actions=[shout])).to_list()


@action(InputEvent)
def score(event: InputEvent, ctx: ActionContext) -> None:
    """A number from inside the agent (a model's, say), in the output or, with ``keep``, only in
    the session: NaN may be either."""
    value = float(event.input["score"])
    if event.input.get("keep"):
        ctx.session.values["score"] = value
        ctx.send_event(OutputEvent(output="kept"))
    else:
        ctx.send_event(OutputEvent(output={"score": value}))


SCORES = [
    {"id": "fine", "score": "1.5"},
    {"id": "nan", "score": "nan"},
    {"id": "kept", "score": "inf", "keep": True},
]


def scores(durable_memory: bool) -> list[dict[str, Any]]:
    """Values JSON cannot hold fail their record (emitted) in an output; a session keeps them."""
    env = FlinkExecutionEnvironment(on_error="emit", durable_memory=durable_memory)
    agent = ActionAgent("scorer", actions=[score])
    return env.from_list(SCORES, key="id").apply(agent).to_list()


def checkpointed() -> dict[str, list[dict[str, Any]]]:
    """The async operator in a job with checkpointing on: the ledger, which keeps memory, fails
    every record instead of keeping memory a restore would lose; an agent that keeps none runs."""
    Ledger.company, Ledger.wait_for_company = None, False
    env = FlinkExecutionEnvironment(on_error="emit", max_concurrency=8, resources=build_resources)
    env.env.set_parallelism(2)
    env.env.enable_checkpointing(600_000)  # on; none is taken in this short job
    ledger = env.from_list(RECORDS, key="customer").apply(lambda: Ledger("ledger")).to_list()
    shouted = env.from_list(["ab", "cd"], key=lambda text: text).apply(
        ActionAgent("shout", actions=[shout])
    )
    return {"ledger": ledger, "shout": shouted.to_list()}


def late_checkpointing() -> list[str | None]:
    """Checkpointing enabled after apply, when PyFlink had shipped the operator: refused where
    the outputs are taken (``to_datastream``, ``to_list``), before any record runs; a durable
    job's outputs are taken as usual. What each refused with (None: not refused)."""
    found: list[str | None] = []
    for take, durable in (("to_datastream", False), ("to_list", False), ("to_datastream", True)):
        env = FlinkExecutionEnvironment(resources=build_resources, durable_memory=durable)
        applied = env.from_list(RECORDS[:2], key="customer").apply(lambda: Ledger("ledger"))
        env.env.enable_checkpointing(600_000)
        try:
            getattr(applied, take)()
            found.append(None)
        except RuntimeError as exc:
            found.append(str(exc))
    return found


def unshippable() -> list[str | None]:
    """An agent given its own resources (a model whose HTTP client cannot be pickled), applied as
    it is rather than built by a function: what apply refused with, for either operator (None:
    not refused). PyFlink's pickling failed it with cloudpickle's words alone."""
    found: list[str | None] = []
    for durable in (False, True):
        resources = Resources()
        resources.add_model("adder", OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1"))
        resources.add_tool(add)
        env = FlinkExecutionEnvironment(durable_memory=durable)
        try:
            env.from_list(RECORDS[:1], key="customer").apply(Ledger("ledger", resources=resources))
            found.append(None)
        except TypeError as exc:
            found.append(str(exc))
    return found


def restore_reasons() -> list[str | None]:
    """Why a job of each environment would restore state, as apply finds it: none, checkpointing,
    a savepoint to start from (set as ``flink run -s`` sets it)."""
    plain = StreamExecutionEnvironment.get_execution_environment()
    checkpointing = StreamExecutionEnvironment.get_execution_environment()
    checkpointing.enable_checkpointing(1000)
    config = Configuration()
    config.set_string("execution.state-recovery.path", "file:///savepoints/savepoint-1")
    savepoint = StreamExecutionEnvironment.get_execution_environment(config)
    return [_why_state_is_restored(env) for env in (plain, checkpointing, savepoint)]


def operator_settings() -> list[list[Any]]:
    """A job whose outputs' stream is given a name, a uid and a parallelism, as a user sets an
    operator's after adding it: each vertex of its job graph (built, not run) as its name, its
    parallelism and whether one of its operators has the uid's id (Flink's murmur3 hash of it).
    They are to reach the agent's operator, which ``to_datastream()``'s stream is the outputs
    of."""
    env = FlinkExecutionEnvironment()
    env.env.set_parallelism(2)
    outputs = env.from_list(["ab", "cd"], key=lambda text: text).apply(
        ActionAgent("shout", actions=[shout])
    )
    outputs.to_datastream().name("agent").uid("agent").set_parallelism(3).print()
    graph = env.env._generate_stream_graph(clear_transformations=True).getJobGraph()
    jvm = get_gateway().jvm
    hashing = jvm.org.apache.flink.shaded.guava33.com.google.common.hash.Hashing
    utf8 = jvm.java.nio.charset.StandardCharsets.UTF_8
    uid = hashing.murmur3_128(0).newHasher().putString("agent", utf8).hash().toString()
    return [
        [
            vertex.getName(),
            vertex.getParallelism(),
            any(
                ids.getGeneratedOperatorID().toHexString() == uid for ids in vertex.getOperatorIDs()
            ),
        ]
        for vertex in graph.getVerticesSortedTopologicallyFromSources()
    ]


class Noted(Event):
    """An event class naming a class the script defines after it (``Note``): left deferred where
    it is defined, built by ``apply`` before the job is shipped."""

    note: Note


class Note(BaseModel):
    text: str


@action(InputEvent)
def take_note(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(Noted(note=Note(text=event.input)))


@action(Noted)
def read_note(event: Noted, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output=event.note.text.upper()))


def notes() -> list[dict[str, Any]]:
    env = FlinkExecutionEnvironment()
    agent = ActionAgent("notes", actions=[take_note, read_note])
    return env.from_list(["gh"], key=lambda text: text).apply(agent).to_list()


@action(InputEvent)
def book(event: InputEvent, ctx: ActionContext) -> None:
    """Adds the amount to the key's balance; an amount over 100 waits for approval first."""
    amount = event.input["amount"]
    if amount > 100 and (ctx.resume is None or ctx.resume.data != "approved"):
        if ctx.resume is None:
            raise Interrupt({"approve": amount})
        amount = 0
    balance = ctx.short_term_memory.get("balance", 0) + amount
    ctx.short_term_memory.set("balance", balance)
    ctx.send_event(OutputEvent(output=balance))


class KeyedState:
    """Flink's keyed state for one key, and the context naming that key: what the operator
    functions are handed when a test calls them as PyFlink would, without a cluster."""

    def __init__(self, key: str) -> None:
        self.key, self.stored = key, None

    def get_state(self, descriptor: Any) -> KeyedState:
        return self

    def value(self) -> str | None:
        return self.stored

    def update(self, text: str) -> None:
        self.stored = text

    def get_current_key(self) -> str:
        return self.key


def resumed(durable_memory: bool) -> dict[str, list[dict[str, Any]]]:
    """A record pauses in one job (its checkpoint in a store both jobs share); a second job
    resumes it through its ``resumes`` stream, as a record of its key, beside a record of another
    key: ``from_list``'s keyed rows with the async operator, a ``from_datastream`` of the user's
    own objects (pickled, the resumes too) with durable memory."""
    with tempfile.TemporaryDirectory(prefix="adk-flink-resume-") as folder:
        return _resumed_in(str(Path(folder) / "checkpoints.db"), durable_memory)


def _resumed_in(path: str, durable_memory: bool) -> dict[str, list[dict[str, Any]]]:
    env = FlinkExecutionEnvironment(
        on_error="emit",
        checkpoint_store=lambda: SQLiteCheckpointStore(path),
        durable_memory=durable_memory,
    )
    ledger = ActionAgent("ledger", actions=[book])
    [paused] = env.from_list([{"user": "ann", "amount": 500}], key="user").apply(ledger).to_list()
    answer = json.dumps({**paused, "resume": "approved"})
    if durable_memory:
        records = env.env.from_collection([{"user": "bob", "amount": 2}])
        resumes = env.env.from_collection([answer])
        later = env.from_datastream(records, key="user")
    else:
        resumes = env.env.from_collection([answer], type_info=Types.STRING())
        later = env.from_list([{"user": "bob", "amount": 2}], key="user")
    return {"paused": [paused], "later": later.apply(ledger, resumes=resumes).to_list()}


def bad_keys(durable_memory: bool) -> list[dict[str, Any]]:
    """A ``from_datastream`` record whose key the key function cannot find (no ``user``): its
    ``key_by`` runs in the workers, and its error failed the job, bare, whatever ``on_error``
    said; it is the record's failed output, and the key's other records run."""
    env = FlinkExecutionEnvironment(on_error="emit", durable_memory=durable_memory)
    records = [{"user": "ann", "amount": 1}, {"amount": 2}, {"user": "ann", "amount": 3}]
    stream = env.env.from_collection(records)
    ledger = ActionAgent("ledger", actions=[book])
    return env.from_datastream(stream, key=lambda r: r["user"]).apply(ledger).to_list()


def tickets() -> dict[str, list[dict[str, Any]]]:
    """examples/ticket_pipeline.py's agent and resources as a Flink job, as its user moves it
    there: the refund pauses in one job and is approved through the next job's resumes, beside
    more tickets (the example's module is shipped by value, as a job script's own would be)."""
    spec = importlib.util.spec_from_file_location(
        "ticket_pipeline", Path(__file__).resolve().parent.parent / "examples/ticket_pipeline.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules["ticket_pipeline"] = example
    spec.loader.exec_module(example)
    cloudpickle.register_pickle_by_value(example)
    with tempfile.TemporaryDirectory(prefix="adk-flink-tickets-") as folder:
        path = str(Path(folder) / "checkpoints.db")
        env = FlinkExecutionEnvironment(
            on_error="emit",
            resources=example.build_resources,
            checkpoint_store=lambda: SQLiteCheckpointStore(path),
        )
        env.env.set_parallelism(2)
        desk = example.TicketDesk
        first = env.from_list(example.FIRST, key="customer").apply(lambda: desk("desk")).to_list()
        [paused] = [output for output in first if output["checkpoint_id"]]
        approval = json.dumps({**paused, "resume": "approved"})
        approvals = env.env.from_collection([approval], type_info=Types.STRING())
        later = env.from_list(example.LATER, key="customer")
        return {
            "first": first,
            "later": later.apply(lambda: desk("desk"), resumes=approvals).to_list(),
        }


def pipelines() -> dict[str, Any]:
    """The second script run (``python tests/flink_job.py pipelines``): a job's failing key
    function and examples/ticket_pipeline.py's plan, in a process of their own so that neither
    run nears its time limit on a loaded machine."""
    return {
        "bad_keys": bad_keys(durable_memory=False),
        "bad_keys_durable": bad_keys(durable_memory=True),
        "tickets": tickets(),
    }


def main() -> None:
    if sys.argv[1:] == ["pipelines"]:
        print(json.dumps(pipelines()))
        return
    # Each pipeline is a job of its own, in one process (the later ones reuse the running JVM).
    jobs = {
        "async": run(durable_memory=False),
        "durable": run(durable_memory=True),
        "unkeyed": unkeyed(),
        "scores": scores(durable_memory=False),
        "scores_durable": scores(durable_memory=True),
        "checkpointed": checkpointed(),
        "restore_reasons": restore_reasons(),
        "operator_settings": operator_settings(),
        "late_checkpointing": late_checkpointing(),
        "unshippable": unshippable(),
        "notes": notes(),
        "resumed": resumed(durable_memory=False),
        "resumed_durable": resumed(durable_memory=True),
    }
    print(json.dumps(jobs))


if __name__ == "__main__":
    main()
