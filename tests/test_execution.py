"""Keyed execution (``adk.execution``): order and memory per key, concurrency across keys, sources,
failures, pauses, and closing early."""

from __future__ import annotations

import asyncio
import decimal
import json
import logging
import math
import re
import sys
import time
import uuid
from collections.abc import AsyncIterator, Hashable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import pytest
import redis.asyncio as aioredis
from mcp_servers.process import STDIO_SCRIPT
from openai_server import Call as OpenAICall
from openai_server import OpenAIServer
from openai_server import Reply as OpenAIReply
from pydantic import BaseModel
from services import RedisServer

from adk import (
    AgentEvent,
    BaseAgent,
    ErrorInfo,
    Interrupt,
    Message,
    Resources,
    Role,
    Runner,
    SequentialAgent,
    ToolCall,
    register_type,
    tool,
)
from adk._record_keys import ambiguous
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    ToolRequestEvent,
    ToolResponseEvent,
    action,
)
from adk.callbacks import Callbacks
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.execution import LocalExecutionEnvironment, RecordError, SessionStore
from adk.execution._resumes import parsed
from adk.mcp import StdioServer
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent
from tests.conftest import other_tasks, wire_model

pytest_plugins = ["services"]


class Order(BaseModel):
    customer: str
    amount: int


register_type(Order, "tests.execution.Order")


class Tally(ActionAgent):
    """Keeps a running total per customer in short-term memory; outputs it after each order."""

    def __init__(self, name: str = "tally", delay: float = 0.0, **options: Any) -> None:
        self.delay = delay
        self.active = 0
        self.most_active = 0
        super().__init__(name, **options)

    @action(InputEvent)
    async def add_up(self, event: InputEvent, ctx: ActionContext) -> None:
        order = event.input
        assert isinstance(order, Order), order
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        try:
            total = ctx.short_term_memory.get("total", 0) + order.amount
            ctx.short_term_memory.set("total", total)
            await asyncio.sleep(self.delay)
            if order.amount < 0:
                raise ValueError(f"negative amount {order.amount}")
            ctx.send_event(OutputEvent(output={"customer": order.customer, "total": total}))
        finally:
            self.active -= 1


def _orders(count: int, customers: str = "abc") -> list[Order]:
    return [Order(customer=customers[i % len(customers)], amount=i) for i in range(count)]


async def test_records_of_a_key_run_in_order_with_its_memory_and_keys_run_concurrently() -> None:
    orders = _orders(30)
    agent = Tally(delay=0.005)
    env = LocalExecutionEnvironment(max_concurrency=2)
    outputs = await env.from_list(orders, key="customer").apply(agent).to_list()

    assert [o.index for o in outputs] == list(range(30))
    expected: dict[str, int] = {}
    for order, output in zip(orders, outputs, strict=True):
        expected[order.customer] = expected.get(order.customer, 0) + order.amount
        assert output.key == order.customer and output.record is order
        assert output.output == {"customer": order.customer, "total": expected[order.customer]}
    assert agent.most_active == 2  # concurrent, and never beyond the limit


async def test_sessions_hold_each_keys_memory_after_its_records() -> None:
    applied = LocalExecutionEnvironment().from_list(_orders(6), key="customer").apply(Tally())
    await applied.to_list()
    assert applied.sessions == {
        "a": {"memory:tally": {"total": 0 + 3}},
        "b": {"memory:tally": {"total": 1 + 4}},
        "c": {"memory:tally": {"total": 2 + 5}},
    }


async def test_keys_whose_records_keep_nothing_leave_no_session_behind() -> None:
    """An unbounded stream of keys (a session id per visitor) run by an agent that keeps no
    state, or only reads its memory, must not keep an empty session for every key it saw."""

    @action(InputEvent)
    def reads_only(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=ctx.short_term_memory.get("seen", 0)))

    @action(InputEvent)
    def forgets(event: InputEvent, ctx: ActionContext) -> None:
        memory = ctx.short_term_memory
        if event.input["n"] % 2:
            memory.delete("held")
        else:
            memory.set("held", event.input["n"])
        ctx.send_event(OutputEvent(output=memory.get("held")))

    records = [{"visitor": f"v{n}", "n": n} for n in range(50)]
    env = LocalExecutionEnvironment(max_concurrency=8)
    stateless = ReActAgent("echo", ScriptedModel(lambda messages: Reply(text="ok")))
    for agent in (ActionAgent("reader", actions=[reads_only]), stateless):
        applied = env.from_list(records, key="visitor").apply(agent)
        assert len(await applied.to_list()) == 50
        assert dict(applied.sessions) == {}, agent.name
    # A key whose memory is emptied keeps an empty session: the next record starts empty.
    pairs = [{"visitor": "a", "n": 0}, {"visitor": "a", "n": 1}, {"visitor": "a", "n": 3}]
    applied = env.from_list(pairs, key="visitor").apply(ActionAgent("f", actions=[forgets]))
    assert [o.output for o in await applied.to_list()] == [0, None, None]
    assert dict(applied.sessions) == {"a": {}}


async def test_keys_can_be_functions_mapping_fields_or_each_record_its_own() -> None:
    @action(InputEvent)
    def echo(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))

    agent = ActionAgent("echo", actions=[echo])
    env = LocalExecutionEnvironment()
    records = [{"user": "x", "n": 1}, {"user": "y", "n": 2}]
    by_field = await env.from_list(records, key="user").apply(agent).to_list()
    assert [(o.key, o.output) for o in by_field] == [("x", records[0]), ("y", records[1])]
    by_function = await env.from_list(records, key=lambda r: r["n"] % 2).apply(agent).to_list()
    assert [o.key for o in by_function] == [1, 0]
    own = await env.from_list(["p", "q"]).apply(agent).to_list()
    assert [(o.key, o.output) for o in own] == [(0, "p"), (1, "q")]

    @action(InputEvent)
    def conversation(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=[(m.role, m.content) for m in event.messages]))

    # What InputEvent.messages holds for a record (its docstring said: nothing).
    shown = env.from_list([records[0]]).apply(ActionAgent("c", actions=[conversation]))
    assert [o.output for o in await shown.to_list()] == [[(Role.USER, '{"user":"x","n":1}')]]


class _Endless:
    """An unbounded source of orders over 7 customers that counts how many were read."""

    def __init__(self) -> None:
        self.read = 0

    async def orders(self) -> AsyncIterator[Order]:
        while True:
            self.read += 1
            yield Order(customer=f"c{self.read % 7}", amount=1)


async def test_an_async_source_is_read_only_as_fast_as_it_is_processed() -> None:
    source = _Endless()

    before = other_tasks()
    applied = LocalExecutionEnvironment(max_concurrency=3).from_list(
        source.orders(), key="customer"
    )
    seen = 0
    async with applied.apply(Tally(delay=0.001)) as outputs:
        async for _ in outputs:
            seen += 1
            if seen == 40:
                break
    # Read ahead: the records running (3) and those waiting behind them (4 per running key).
    read = source.read
    assert read <= seen + 3 + 4 * 3 + 1, f"read {read} records ahead of {seen} outputs"
    await asyncio.sleep(0)
    assert other_tasks() == before


async def test_a_slow_consumer_slows_the_records_and_so_the_reading() -> None:
    source = _Endless()

    before = other_tasks()
    applied = LocalExecutionEnvironment(max_concurrency=3).from_list(
        source.orders(), key="customer"
    )
    seen = 0
    async with applied.apply(Tally()) as outputs:
        async for _ in outputs:
            seen += 1
            await asyncio.sleep(0.001)  # a sink slower than the agent (a database, an API)
            if seen == 40:
                break
    # Read ahead: outputs waiting for the consumer (4 per running key), the records running (3)
    # and those waiting behind them (4 per running key); closing with workers waiting for room.
    read = source.read
    assert read <= seen + 4 * 3 + 3 + 4 * 3 + 1, f"read {read} records ahead of {seen} outputs"
    await asyncio.sleep(0)
    assert other_tasks() == before


async def test_a_shutdown_closes_the_outputs_another_task_iterates() -> None:
    """A broker consumer's service iterates the outputs in a task of its own and closes them on
    shutdown from another: the records stop, the consumer's loop ends, and nothing is left
    running. (``aclose`` raised "aclose(): asynchronous generator is already running" and left
    everything running.)"""
    source = _Endless()
    before = other_tasks()
    applied = LocalExecutionEnvironment(max_concurrency=3).from_list(
        source.orders(), key="customer"
    )
    outputs = applied.apply(Tally(delay=0.001))
    busy = asyncio.Event()
    seen: list[Any] = []

    async def consume() -> str:
        async for output in outputs:
            seen.append(output)
            if len(seen) == 5:
                busy.set()
        return "ended"

    consumer = asyncio.create_task(consume())
    await busy.wait()  # the consumer now waits inside the iteration for its next output
    await outputs.aclose()
    assert await consumer == "ended"
    read = source.read
    await asyncio.sleep(0)
    assert source.read == read and other_tasks() == before
    async with outputs:  # closing again, as ``async with`` does, is harmless
        pass


async def test_outputs_closed_before_their_consumer_began_run_no_record() -> None:
    """A shutdown can come before the consumer's task has started iterating: its loop then ends
    at once, as it would had it been waiting for an output. (The close did nothing then, and the
    consumer, once started, read and ran the whole stream after the shutdown.)"""
    read: list[Order] = []

    def source() -> Iterator[Order]:
        for order in _orders(5):
            read.append(order)
            yield order

    before = other_tasks()
    outputs = LocalExecutionEnvironment().from_list(source(), key="customer").apply(Tally())

    async def consume() -> list[Any]:
        return [output async for output in outputs]

    consumer = asyncio.create_task(consume())  # not started yet
    await outputs.aclose()
    assert await consumer == []
    assert read == [] and other_tasks() == before

    done = LocalExecutionEnvironment().from_list(_orders(3), key="customer").apply(Tally())
    async with done:
        pass
    assert await done.to_list() == [] and done.sessions == {}


async def test_records_without_a_key_start_with_no_session_and_leave_none() -> None:
    """Each is its own key: nothing could read its session again (and an unbounded stream would
    pile them up); a mapping passed as ``sessions`` is neither read nor written."""
    env = LocalExecutionEnvironment()
    applied = env.from_list(_orders(3)).apply(Tally())
    assert [o.output["total"] for o in await applied.to_list()] == [0, 1, 2]
    assert applied.sessions == {}
    earlier = {0: {"memory:tally": {"total": 7}}}
    again = env.from_list([Order(customer="a", amount=100)]).apply(Tally(), sessions=earlier)
    assert [o.output["total"] for o in await again.to_list()] == [100]
    assert earlier == {0: {"memory:tally": {"total": 7}}}


async def test_any_agent_runs_over_records_and_gives_its_final_answer() -> None:
    @tool
    async def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"{messages[0].content} -> {messages[-1].content}")
        return Reply(tool_calls=[tool_call("add", {"a": len(messages[0].content), "b": 1})])

    agent = ReActAgent("calc", ScriptedModel(reply), tools=[add])
    outputs = await LocalExecutionEnvironment().from_list(["ab", "abcd"]).apply(agent).to_list()
    assert [o.output for o in outputs] == ["ab -> 3", "abcd -> 5"]
    assert all(o.message is not None and o.message.role == Role.ASSISTANT for o in outputs)

    class Custom(BaseAgent):
        async def run(self, input: Any, ctx: Any) -> AsyncIterator[AgentEvent]:
            yield AgentEvent.custom({"echo": input.messages[-1].metadata["adk.record"]})

    [output] = await LocalExecutionEnvironment().from_list([{"x": 1}]).apply(Custom("c")).to_list()
    assert output.output == {"echo": {"x": 1}} and output.message is None


async def test_a_failed_record_raises_by_default_and_cancels_the_others() -> None:
    orders = [Order(customer="a", amount=-1), *_orders(10, "bcd")]
    before = other_tasks()
    env = LocalExecutionEnvironment(max_concurrency=4)
    with pytest.raises(RecordError) as raised:
        await env.from_list(orders, key="customer").apply(Tally(delay=0.01)).to_list()
    error = raised.value
    assert (error.index, error.key, error.record) == (0, "a", orders[0])
    assert "negative amount -1" in str(error)
    assert error.__cause__ is not None
    await asyncio.sleep(0)
    assert other_tasks() == before


async def test_with_raise_no_record_starts_after_the_failed_one() -> None:
    """With on_error="raise" the first failed record stops everything: the records of its key behind it do not run
    (they ran, and committed, until the consumer took the error from the queue, so a pipeline
    restarted at the failed record counted them twice), nor is the source read further."""
    ran: list[dict[str, Any]] = []

    @action(InputEvent)
    def book(event: InputEvent, ctx: ActionContext) -> None:
        ran.append(event.input)
        if event.input["amount"] < 0:
            raise ValueError("negative amount")
        total = ctx.short_term_memory.get("total", 0) + event.input["amount"]
        ctx.short_term_memory.set("total", total)
        ctx.send_event(OutputEvent(output=total))

    agent = ActionAgent("ledger", actions=[book])
    records = [{"user": "a", "amount": 1}, {"user": "a", "amount": -1}]
    records += [{"user": "a", "amount": 10}] * 5
    applied = LocalExecutionEnvironment().from_list(records, key="user").apply(agent)
    with pytest.raises(RecordError, match=r"record 1 \(key 'a'\) failed"):
        await applied.to_list()
    assert ran == records[:2]
    assert applied.sessions == {"a": {"memory:ledger": {"total": 1}}}

    read: list[dict[str, Any]] = []

    def source() -> Any:
        for record in [{"user": "a", "amount": 1}, {"other": 1}, {"user": "b", "amount": 2}]:
            read.append(record)
            yield record

    applied = LocalExecutionEnvironment().from_list(source(), key="user").apply(agent)
    with pytest.raises(RecordError, match=r"record 1 \(key None\) failed: KeyError"):
        await applied.to_list()
    assert len(read) == 2 and "b" not in applied.sessions


async def test_with_emit_a_failed_record_is_reported_and_its_writes_are_dropped() -> None:
    orders = [
        Order(customer="a", amount=5),
        Order(customer="a", amount=-100),
        Order(customer="a", amount=1),
    ]
    env = LocalExecutionEnvironment(on_error="emit")
    applied = env.from_list(orders, key="customer").apply(Tally())
    first, failed, last = await applied.to_list()
    assert first.output == {"customer": "a", "total": 5}
    assert failed.error is not None and "negative amount -100" in failed.error.message
    assert failed.output is None and failed.index == 1
    assert last.output == {"customer": "a", "total": 6}  # the failed record's -100 was dropped
    assert applied.sessions["a"] == {"memory:tally": {"total": 6}}


async def test_a_failed_records_change_to_a_model_in_memory_is_dropped_too() -> None:
    """Memory may hold registered pydantic models; one changed in place and set again by a record
    that then fails is dropped like a dict would be. (The model was shared with the key's kept
    session, so the failed record's change stayed.)"""

    @action(InputEvent)
    def keep_last(event: InputEvent, ctx: ActionContext) -> None:
        order: Order = event.input
        memory = ctx.short_term_memory
        last = memory.get("last") or Order(customer=order.customer, amount=0)
        last.amount += order.amount  # in place, as one would with any object
        memory.set("last", last)
        if order.amount < 0:
            raise ValueError(f"negative amount {order.amount}")
        ctx.send_event(OutputEvent(output=last.amount))

    orders = [Order(customer="a", amount=amount) for amount in (5, -100, 1)]
    env = LocalExecutionEnvironment(on_error="emit")
    applied = env.from_list(orders, key="customer").apply(ActionAgent("k", actions=[keep_last]))
    first, failed, last = await applied.to_list()
    assert (first.output, failed.error is not None, last.output) == (5, True, 6)
    assert applied.sessions["a"]["memory:k"]["last"] == Order(customer="a", amount=6)


async def test_a_key_that_cannot_be_computed_fails_that_record_only() -> None:
    @action(InputEvent)
    def echo(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))

    agent = ActionAgent("echo", actions=[echo])
    records: list[Any] = [{"user": "x"}, {"other": 1}, {"user": ["un", "hashable"]}, {"user": "z"}]
    env = LocalExecutionEnvironment(on_error="emit")
    outputs = await env.from_list(records, key=lambda r: r["user"]).apply(agent).to_list()
    assert [o.error.type if o.error else o.output for o in outputs] == [
        {"user": "x"},
        "KeyError",
        "TypeError",
        {"user": "z"},
    ]
    with pytest.raises(RecordError, match=r"record 1 \(key None\) failed: KeyError"):
        await LocalExecutionEnvironment().from_list(records, key="user").apply(agent).to_list()


async def test_a_record_whose_tool_call_no_result_answers_fails_that_record_only() -> None:
    """A record of messages carrying a paused turn on (an assistant call no tool message answers)
    is refused by the runner before it runs, as every model API refuses it: that record's
    failure, naming the call, not the whole job's (a ValueError out of ``to_list``)."""
    dangling = [
        Message.user("1 + 2?"),
        Message.assistant("", tool_calls=[ToolCall(id="call_1", name="add")]),
        Message.user("and?"),
    ]
    records: list[Any] = [[Message.user("hi")], dangling, [Message.user("bye")]]
    agent = ReActAgent("chat", ScriptedModel(["one", "two"]))
    env = LocalExecutionEnvironment(on_error="emit")
    first, failed, last = await env.from_list(records, key=lambda r: "k").apply(agent).to_list()
    assert (first.output, last.output) == ("one", "two")
    assert failed.error is not None and failed.error.type == "ValueError", failed
    assert "run input message 1 (assistant) calls the tool 'add'" in failed.error.message
    assert failed.index == 1 and failed.record is dangling
    agent = ReActAgent("chat", ScriptedModel(["one"]))
    with pytest.raises(RecordError, match=r"record 1 \(key 'k'\) failed: ValueError: run input"):
        await (
            LocalExecutionEnvironment().from_list(records, key=lambda r: "k").apply(agent).to_list()
        )


async def test_resources_callbacks_and_stores_that_cannot_work_are_refused_where_given() -> None:
    """A dict of models as ``resources`` was taken by the environment, the ``Runner`` and an
    ``ActionAgent``, and each record failed at its first lookup with ``'dict' object has no
    attribute 'get_model'``; one ``Callbacks`` object alone was ``'Callbacks' object is not
    iterable``; a path as the environment's ``checkpoint_store`` was refused only at ``apply``,
    as the ``Runner``'s."""

    @action(InputEvent)
    def ask(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(ChatRequestEvent(model="m", messages=[Message.user("hi")]))

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))

    models = {"m": ScriptedModel(["hi"])}
    wanted = r"resources must be an adk.Resources \(a registry of named models"
    with pytest.raises(TypeError, match=f"LocalExecutionEnvironment: {wanted}"):
        LocalExecutionEnvironment(resources=models)
    agent = ActionAgent("chat", actions=[ask, answer])
    with pytest.raises(TypeError, match=f"Runner: {wanted}"):
        Runner(agent, resources=models)
    with pytest.raises(TypeError, match=f"ActionAgent 'chat': {wanted}"):
        ActionAgent("chat", actions=[ask, answer], resources=models)
    with pytest.raises(TypeError, match=r"callbacks=\[Callbacks\(...\)\], got one Callbacks alone"):
        LocalExecutionEnvironment(callbacks=Callbacks())
    with pytest.raises(TypeError, match=r"Runner: callbacks takes a list of callback objects"):
        Runner(agent, callbacks=Callbacks())
    with pytest.raises(
        TypeError, match="LocalExecutionEnvironment checkpoint_store must be a chec"
    ):
        LocalExecutionEnvironment(checkpoint_store="cp.db")  # type: ignore[arg-type]

    class ModelsOnly:
        """A registry of one's own that serves models alone: duck-typed, it is taken."""

        def get_model(self, name: str) -> Any:
            return models[name]

    env = LocalExecutionEnvironment(resources=ModelsOnly())
    outputs = await env.from_list([{"u": 1}], key="u").apply(agent).to_list()
    assert [o.output for o in outputs] == ["hi"]


async def test_apply_takes_a_function_that_builds_the_agent_as_flinks_apply_does() -> None:
    """A job written for Flink (``apply(lambda: Ledger("ledger"))``, as the docs show it) was
    refused here (``apply takes an Agent, got function``), though the docs say the same job runs
    and is tested locally first."""

    @action(InputEvent)
    def running_total(event: InputEvent, ctx: ActionContext) -> None:
        total = ctx.short_term_memory.get("total", 0) + event.input["amount"]
        ctx.short_term_memory.set("total", total)
        ctx.send_event(OutputEvent(output=total))

    built: list[str] = []

    def build() -> ActionAgent:
        built.append("totals")
        return ActionAgent("totals", actions=[running_total])

    records = [{"user": "ann", "amount": 5}, {"user": "ann", "amount": 2}]
    outputs = (
        await LocalExecutionEnvironment().from_list(records, key="user").apply(build).to_list()
    )
    assert [o.output for o in outputs] == [5, 7] and built == ["totals"]  # built once
    some = LocalExecutionEnvironment().from_list(records, key="user")
    with pytest.raises(TypeError, match="apply takes an Agent or a function that builds one"):
        some.apply("totals")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"and it returned str, not an Agent"):
        some.apply(lambda: "totals")  # type: ignore[arg-type,return-value]


async def test_a_key_that_cannot_be_found_says_so_in_the_terms_of_key() -> None:
    """A record without the field ``key=`` names failed as ``KeyError: 'user'``, which reads as
    the agent failing on the record: nothing said the key was the problem, nor what to do. The
    error's type stays the exception's; its message says where it came from."""

    @action(InputEvent)
    def echo(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))

    class Order(BaseModel):
        amount: int

    agent = ActionAgent("echo", actions=[echo])
    records: list[Any] = [{"user": "ann"}, {"amount": 1}, Order(amount=2), {"user": ["a"]}]
    env = LocalExecutionEnvironment(on_error="emit")
    by_field = await env.from_list(records, key="user").apply(agent).to_list()
    errors = [o.error for o in by_field if o.error is not None]
    assert [e.type for e in errors] == ["KeyError", "AttributeError", "TypeError"]
    no_field = "the record has no field 'user', which key='user' reads its key from"
    assert errors[0].message.startswith(no_field) and errors[1].message.startswith(no_field)
    assert "key=lambda record: ..." in errors[0].message
    assert errors[2].message.startswith("its key is not hashable (unhashable type: 'list')")
    with pytest.raises(
        RecordError, match=r"record 1 \(key None\) failed: KeyError: the record has no"
    ):
        await LocalExecutionEnvironment().from_list(records, key="user").apply(agent).to_list()

    def user_of(record: Any) -> Any:
        return record["user"]

    by_function = await env.from_list(records[:2], key=user_of).apply(agent).to_list()
    assert by_function[1].error == ErrorInfo("KeyError", "the key function failed on it: 'user'")


class _FrozenKey(BaseModel, frozen=True):
    region: str
    shard: int


async def test_keys_python_takes_for_another_are_refused_and_every_other_key_is_its_own() -> None:
    """``True``, ``1`` and ``1.0`` (and ``-0.0`` and ``0.0``, ``Decimal(1)`` and ``1``) were one
    key here, a dict's, but several on Flink, whose ``key_by`` partitions on the key's text or
    pickle: the same records shared a key's order and memory locally and not on Flink. A NaN
    equals no key, so each of its records was a key of its own, its memory never read again.
    Each is refused for its record alone (``on_error``), saying why and what to key by; ``1`` and
    ``"1"``, ``"a"`` and ``b"a"``, an int past 64 bits, a tuple, a frozen model are keys of their
    own; a list and a dict are not hashable."""

    @action(InputEvent)
    def count(event: InputEvent, ctx: ActionContext) -> None:
        seen = ctx.short_term_memory.get("seen", 0) + 1
        ctx.short_term_memory.set("seen", seen)
        ctx.send_event(OutputEvent(output=seen))

    frozen = _FrozenKey(region="eu", shard=1)
    keys: list[Any] = [
        *(1, "1", b"1", 2**70, (1, "a"), frozen, 1, "1", b"1", 2**70, (1, "a"), frozen),
        *(True, 1.0, -0.0, float("nan"), (1, False), decimal.Decimal(1), 2.5),
        *([1], {"a": 1}),
    ]
    records = [{"k": key} for key in keys]
    env = LocalExecutionEnvironment(on_error="emit", max_concurrency=1)
    agent = ActionAgent("count", actions=[count])
    applied = env.from_list(records, key="k").apply(agent)
    outputs = await applied.to_list()
    assert [o.output for o in outputs[:12]] == [1] * 6 + [2] * 6  # each key its own, twice
    refused = {outputs[12 + n].record["k"].__repr__(): outputs[12 + n].error for n in range(7)}
    assert all(e is not None and e.type == "TypeError" for e in refused.values())
    said = {k: e.message.split(", which")[0].split(", a number")[0] for k, e in refused.items()}
    assert said == {
        "True": "its key True is refused: a bool",
        "1.0": "its key 1.0 is refused: a float",
        "-0.0": "its key -0.0 is refused: a float",
        "nan": "its key nan is refused: NaN",
        "(1, False)": "its key (1, False) is refused: a bool",
        "Decimal('1')": "its key Decimal('1') is refused: a Decimal",
        "2.5": "its key 2.5 is refused: a float",
    }
    assert "key by an int or a str (int(flag), str(flag))" in refused["True"].message
    assert "each record would be a key of its own" in refused["nan"].message
    unhashable = [o.error.message for o in outputs[19:] if o.error is not None]
    assert len(unhashable) == 2 and all(m.startswith("its key is not hashable") for m in unhashable)
    assert sorted(map(repr, applied.sessions)) == sorted(
        map(repr, [1, "1", b"1", 2**70, (1, "a"), frozen])
    )
    with pytest.raises(RecordError, match=r"record 0 \(key None\) failed: TypeError: its key True"):
        await LocalExecutionEnvironment().from_list([{"k": True}], key="k").apply(agent).to_list()


class _Shard(NamedTuple):
    region: str
    weight: float


async def test_a_named_tuple_holding_a_float_is_refused_as_a_tuple_holding_one_is() -> None:
    """A tuple was looked through only when it was exactly a tuple: a ``NamedTuple`` key (a
    common way to name a key's parts) holding ``1.0`` was taken, one key with ``("eu", 1)`` here
    and another on Flink, whose ``from_list`` sends it as the JSON array ``["eu", 1.0]``."""

    @action(InputEvent)
    def count(event: InputEvent, ctx: ActionContext) -> None:
        seen = ctx.short_term_memory.get("seen", 0) + 1
        ctx.short_term_memory.set("seen", seen)
        ctx.send_event(OutputEvent(output=seen))

    records = [{"k": _Shard("eu", 1.0)}, {"k": ("eu", 1)}, {"k": frozenset({_Shard("eu", 2)})}]
    env = LocalExecutionEnvironment(on_error="emit", max_concurrency=1)
    outputs = (
        await env.from_list(records, key="k").apply(ActionAgent("c", actions=[count])).to_list()
    )
    refused, kept, looked_through = outputs
    assert refused.error is not None and refused.error.type == "TypeError"
    assert refused.error.message.startswith(
        "its key _Shard(region='eu', weight=1.0) is refused: a float"
    )
    assert kept.output == 1  # not the refused record's key: its first record
    assert looked_through.output == 1 and ambiguous(frozenset({_Shard("eu", True)})) is not None


def test_numpys_numbers_are_refused_as_keys_as_pythons_are() -> None:
    """A key read from a DataFrame is numpy's: its ``bool_`` is no ``numbers.Number`` but equals
    ``True`` and ``1`` all the same, and its ``int64`` equals ``1``."""
    np = pytest.importorskip("numpy")
    for key, kind in ((np.bool_(True), "bool"), (np.int64(1), "int64"), (np.float64(1), None)):
        problem = ambiguous(key)
        assert problem is not None
        assert problem.startswith(f"a numpy {kind}," if kind else "a float,")
    assert ambiguous(np.str_("a")) is None  # a str subclass, its text here (as a StrEnum)


def test_a_resume_whose_key_is_refused_as_a_records_names_no_paused_record() -> None:
    """A resume is a record of its key: given ``true`` or ``1.0`` (JSON), it would reach key 1's
    session here and another key's on Flink. No record has such a key, so it is refused."""
    for key in (True, 1.0):
        resume = parsed({"key": key, "checkpoint_id": "c1", "run_id": "r", "resume": "yes"})
        assert resume.checkpoint_id is None and resume.problem is not None
        assert resume.problem.startswith("has a key that is refused: a ")
    assert parsed({"key": 1, "checkpoint_id": "c1", "run_id": "r"}).checkpoint_id == "c1"


@action(InputEvent)
def _book(event: InputEvent, ctx: ActionContext) -> None:
    if ctx.resume is None:
        raise Interrupt({"approve": event.input["amount"]})
    balance = ctx.short_term_memory.get("balance", 0) + event.input["amount"]
    ctx.short_term_memory.set("balance", balance)
    ctx.send_event(OutputEvent(output=balance))


async def test_a_pause_an_earlier_pyadk_saved_for_a_float_key_is_resumed_as_the_docs_say(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """event_driven.md: a pause saved (by a pyadk that took such keys) for a record keyed
    ``1.0`` is resumed by a ``Runner`` over the store, on the session saved at its pause; the
    environment refuses a resume giving ``1.0``, and takes one giving ``1``, the key ``1.0`` was
    one with here. The earlier pyadk is this one without the refusal: it saved the same."""
    store = InMemoryCheckpointStore()
    env = LocalExecutionEnvironment(checkpoint_store=store, on_error="emit")
    agent = ActionAgent("ledger", actions=[_book])
    with monkeypatch.context() as earlier:
        earlier.setattr("adk.execution._records.ambiguous", lambda key: None)
        paused = await env.from_list([{"u": 1.0, "amount": 5}] * 2, key="u").apply(agent).to_list()
    assert [o.key for o in paused] == [1.0, 1.0] and all(o.checkpoint_id for o in paused)
    first, second = (o.checkpoint_id for o in paused)
    assert first is not None and second is not None
    given = [{"key": key, "checkpoint_id": first, "resume": "yes"} for key in (1.0, 1)]
    refused, resumed = await env.from_list([], key="u").apply(agent, resumes=given).to_list()
    assert (
        refused.error is not None and "has a key that is refused: a float" in refused.error.message
    )
    assert (resumed.key, resumed.output, resumed.resumed) == (1, 5, True)
    done = await Runner(agent, checkpoint_store=store).invoke_resume(second, "yes")
    assert done.output == 5 and done.session["memory:ledger"] == {"balance": 5}


async def test_a_key_field_that_is_a_method_of_the_record_fails_saying_to_call_it() -> None:
    """A broker's message object whose key is a method (confluent_kafka's ``Message.key()``)
    with ``key="key"``: each record's bound method was its key, hashable but new per record, so
    every record silently ran as a key of its own and its memory was never read again."""

    class BrokerMessage:
        def __init__(self, key: bytes, value: bytes) -> None:
            self._key, self._value = key, value

        def key(self) -> bytes:
            return self._key

    @action(InputEvent)
    def count(event: InputEvent, ctx: ActionContext) -> None:
        seen = ctx.short_term_memory.get("seen", 0) + 1
        ctx.short_term_memory.set("seen", seen)
        ctx.send_event(OutputEvent(output=seen))

    agent = ActionAgent("count", actions=[count])
    messages = [BrokerMessage(b"a", b"1"), BrokerMessage(b"a", b"2")]
    env = LocalExecutionEnvironment(on_error="emit")
    outputs = await env.from_list(messages, key="key").apply(agent).to_list()
    assert [o.error.type if o.error else o.output for o in outputs] == ["TypeError"] * 2
    assert outputs[0].error is not None
    assert "pass key=lambda record: record.key()" in outputs[0].error.message
    called = await env.from_list(messages, key=lambda m: m.key()).apply(agent).to_list()
    assert [(o.key, o.output) for o in called] == [(b"a", 1), (b"a", 2)]
    with pytest.raises(RecordError, match=r"a method of the record \(str.upper\)"):
        await LocalExecutionEnvironment().from_list(["text"], key="upper").apply(agent).to_list()


async def test_a_key_field_on_text_records_says_to_parse_the_lines_first() -> None:
    """A JSONL file read as it is (``from_list(open(path), key="device")``) gives text records:
    each failed with "the record has no field 'device'", true of a str but no help to the data
    engineer whose file has that field on every line. The error says the record is text and
    how to read its key from it."""

    @action(InputEvent)
    def echo(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))

    agent = ActionAgent("echo", actions=[echo])
    lines = ['{"device": "d1", "value": 3}\n', b'{"device": "d2", "value": 4}\n']
    env = LocalExecutionEnvironment(on_error="emit")
    outputs = await env.from_list(lines, key="device").apply(agent).to_list()
    assert [(o.key, o.error.type if o.error else None) for o in outputs] == [
        (None, "TypeError"),
        (None, "TypeError"),
    ]
    assert outputs[0].error is not None and outputs[1].error is not None
    assert outputs[0].error.message.startswith(
        "key='device' reads a field of each record, and this record is text (str), which has "
        "none: parse it for its key, key=lambda line: json.loads(line)['device']"
    )
    assert "this record is text (bytes)" in outputs[1].error.message
    parsed = env.from_list(lines, key=lambda line: json.loads(line)["device"]).apply(agent)
    assert [o.key for o in await parsed.to_list()] == ["d1", "d2"]


async def test_a_paused_record_is_reported_and_resumes_with_the_outputs_runner() -> None:
    @tool(require_approval=True)
    async def refund(amount: int) -> str:
        """Refund an amount (a person approves it first)."""
        return f"refunded {amount}"

    class Refunds(ActionAgent):
        @action(InputEvent)
        def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            text = f"refund {event.input.amount}"
            request = ChatRequestEvent(model="m", messages=[Message.user(text)], tools=["refund"])
            ctx.send_event(request)

        @action(ChatResponseEvent)
        def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))

    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=messages[-1].content)
        amount = int(messages[0].content.split()[-1])
        return Reply(tool_calls=[tool_call("refund", {"amount": amount})])

    resources = Resources()
    resources.add_model("m", ScriptedModel(reply))
    resources.add_tool(refund)
    env = LocalExecutionEnvironment(resources=resources, checkpoint_store=InMemoryCheckpointStore())
    applied = env.from_list([Order(customer="a", amount=9)], key="customer").apply(Refunds("r"))
    [paused] = await applied.to_list()
    assert paused.interrupt is not None and paused.checkpoint_id and paused.output is None
    [point] = paused.interrupt.points
    resumed = await applied.runner.invoke_resume(
        paused.checkpoint_id, {point.id: {"approved": True}}
    )
    assert resumed.text == "refunded 9"


async def test_a_paused_record_of_any_agent_has_no_output_but_its_pause() -> None:
    """A ReActAgent (and a workflow of them) paused at an approval has given no final answer yet:
    its record's only output is the pause. (The model's tool-call turn, and an earlier step's
    answer, came out as a second, empty or premature "final output" of the record.)"""

    @tool(require_approval=True)
    def refund(cents: int) -> str:
        """Refund an amount (a person approves it first)."""
        return f"refunded {cents}"

    refund_call = OpenAIReply(tool_calls=[OpenAICall("refund", '{"cents": 5}')])
    script = [refund_call, OpenAIReply(text="refunded"), OpenAIReply(text="checked")]
    script += [OpenAIReply(text="noted"), refund_call, OpenAIReply(text="refunded")]
    async with (
        OpenAIServer(script) as server,
        wire_model(server, name="m") as model,
    ):
        react = ReActAgent("helper", model, tools=[refund])
        workflow = SequentialAgent(
            "steps", [ReActAgent("note", model), ReActAgent("pay", model, tools=[refund])]
        )
        for agent in (react, workflow):
            env = LocalExecutionEnvironment(checkpoint_store=InMemoryCheckpointStore())
            applied = env.from_list([{"c": "a", "t": "refund 5"}], key="c").apply(agent)
            outputs = await applied.to_list()
            assert [(o.output, o.checkpoint_id is not None) for o in outputs] == [(None, True)], (
                agent.name
            )
            resumed = await applied.runner.invoke_resume(outputs[0].checkpoint_id, True)
            assert resumed.text == "refunded"
            if agent is react:  # the workflow's first step answers before the second pauses
                done = await env.from_list(["hi"]).apply(agent).to_list()
                assert [o.output for o in done] == ["checked"]


async def test_timeout_cuts_off_a_record_whose_model_hangs_and_drops_its_writes() -> None:
    """A model server that stops answering must not hold its key (and a place among the records
    running) for ever: the record fails with a TimeoutError, its memory writes are dropped, and
    the next record of its key runs."""

    class Asker(ActionAgent):
        @action(InputEvent)
        def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            ctx.short_term_memory.set("asked", ctx.short_term_memory.get("asked", 0) + 1)
            question = [Message.user(event.input["text"])]
            ctx.send_event(ChatRequestEvent(model="m", messages=question))

        @action(ChatResponseEvent)
        def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            asked = ctx.short_term_memory.get("asked")
            ctx.send_event(OutputEvent(output=f"{event.response.content} #{asked}"))

    stall = OpenAIReply(text="late", delay=60)
    async with (
        OpenAIServer([stall], default=OpenAIReply(text="ok")) as server,
        wire_model(server, name="m") as model,
    ):
        resources = Resources()
        resources.add_model("m", model)
        env = LocalExecutionEnvironment(
            resources=resources, on_error="emit", timeout=1.0, max_concurrency=1
        )
        records = [{"c": "a", "text": "first"}, {"c": "a", "text": "second"}]
        applied = env.from_list(records, key="c").apply(Asker("asker"))
        first, second = await applied.to_list()
    assert first.error is not None and first.error.type == "TimeoutError"
    assert "record 0 (key 'a') ran longer than timeout=1.0s" in first.error.message
    # It names what was running when it was cut off: the built-in chat and its model call.
    assert re.search(
        r"; running: action 'builtin\.chat' on ChatRequestEvent for [\d.]+s, "
        r"model '[^']+' \(agent 'asker'\) for [\d.]+s$",
        first.error.message,
    ), first.error.message
    assert second.output == "ok #1"  # the timed-out record's write was dropped
    assert applied.sessions == {"a": {"memory:asker": {"asked": 1}}}
    for bad in (0, -1.0, float("nan"), "5", True):
        with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
            LocalExecutionEnvironment(timeout=bad)  # type: ignore[arg-type]


@tool
async def _stall(query: str) -> str:
    """A lookup whose service never answers."""
    await asyncio.Event().wait()
    raise AssertionError("never set")


class _Looker(ActionAgent):
    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        call = ToolCall(id="c1", name="_stall", arguments='{"query": "x"}')
        ctx.send_event(ToolRequestEvent(tool_calls=[call], tools=["_stall"]))

    @action(ToolResponseEvent)
    def answer(self, event: ToolResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.responses[0].content))

    @action(ToolResponseEvent)
    @staticmethod
    async def wait(event: ToolResponseEvent, ctx: ActionContext) -> None:
        await asyncio.Event().wait()


async def test_a_record_cut_off_by_its_timeout_names_what_was_running() -> None:
    """The error said only that the record ran longer than its timeout, so a user could not tell
    the tool (or action, or model call) that hung from one that was merely slow. It names each
    call running at the deadline, outermost first, and how long it had run: in an action's
    tool request, in a ``ReActAgent``'s tool call, and an action of the user's own that hangs."""
    resources = Resources()
    resources.add_tool(_stall)
    env = LocalExecutionEnvironment(resources=resources, on_error="emit", timeout=0.1)
    react = ReActAgent(
        "helper",
        ScriptedModel([Reply(tool_calls=[tool_call("_stall", {"query": "x"})])]),
        tools=[_stall],
    )
    said = {}
    for agent in (_Looker("looker"), react):
        [output] = await env.from_list([{"k": "a"}], key="k").apply(agent).to_list()
        assert output.error is not None and output.error.type == "TimeoutError"
        said[agent.name] = re.sub(r"for [\d.]+s", "for Ns", output.error.message)
    cut = "record 0 (key 'a') ran longer than timeout=0.1s; running: "
    assert said == {
        "looker": f"{cut}action 'builtin.tools' on ToolRequestEvent for Ns, "
        "tool '_stall' (call c1) for Ns",
        "helper": f"{cut}tool '_stall' (call call_1) for Ns",
    }

    @tool
    def answered(query: str) -> str:
        """Answers."""
        return "found"

    answering = Resources()
    answering.add_tool(answered, name="_stall")
    waiting = LocalExecutionEnvironment(resources=answering, on_error="emit", timeout=0.1)
    [output] = await waiting.from_list([{"k": "a"}], key="k").apply(_Looker("l")).to_list()
    assert output.error is not None
    assert re.sub(r"for [\d.]+s", "for Ns", output.error.message) == (
        f"{cut}action 'wait' on ToolResponseEvent for Ns"
    )


async def test_a_call_cut_off_is_named_escaped_and_bounded_whatever_the_model_made_up() -> None:
    """A tool call's id (and name) is the model's: it went into the error's text as it came, a
    newline and a terminal's escape codes raw (a forged line in a log reading the error) and 10
    KB whole (in the output, the root span's status, a log line per record). It is said escaped
    and cut short, with its length; a plain id is said as it was."""
    forged = "c1\nrecord 9 (key 'z') ran fine\x1b[2J" + "x" * 10_000
    react = ReActAgent(
        "helper",
        ScriptedModel([Reply(tool_calls=[tool_call("_stall", {"query": "x"}, id=forged)])]),
        tools=[_stall],
    )
    env = LocalExecutionEnvironment(on_error="emit", timeout=0.1)
    [output] = await env.from_list([{"k": "a"}], key="k").apply(react).to_list()
    assert output.error is not None and output.error.type == "TimeoutError"
    message = output.error.message
    assert message.isprintable(), message[:200]  # no newline, no escape code
    assert len(message) < 400, len(message)
    assert f"tool '_stall' (call {forged[:40]!r}"[:-1] in message
    assert f"({len(forged):,} characters)" in message


async def test_a_record_that_blocks_the_loop_past_its_timeout_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A sync action that blocks (a ``requests`` call, ``time.sleep``) holds the event loop, so
    the timeout's timer cannot fire: the record ran past ``timeout`` and ended as if within it,
    without a word, while every other record waited. It cannot be cut off, and its outputs
    stand, but a warning on ``adk.execution`` says it overran and why."""

    @action(InputEvent)
    def lookup(event: InputEvent, ctx: ActionContext) -> None:
        if event.input["c"] == "slow":
            time.sleep(0.3)  # a blocking client call
        ctx.send_event(OutputEvent(output=event.input["c"]))

    env = LocalExecutionEnvironment(on_error="emit", timeout=0.1)
    records = [{"c": "slow"}, {"c": "fast"}]
    with caplog.at_level(logging.WARNING, logger="adk.execution"):
        outputs = (
            await env.from_list(records, key="c")
            .apply(ActionAgent("crm", actions=[lookup]))
            .to_list()
        )
    assert [(o.key, o.output, o.error) for o in outputs] == [
        ("slow", "slow", None),
        ("fast", "fast", None),
    ]
    [warning] = [r for r in caplog.records if r.name == "adk.execution"]
    message = warning.getMessage()
    assert message.startswith("record 0 (key 'slow') ran past its timeout=0.1s")
    assert "the event loop was blocked" in message and "asyncio.to_thread" in message


async def test_records_that_can_be_read_once_take_one_agent() -> None:
    """A second agent applied to a generator's records got none of them, without a word (or,
    read at the same time as the first, failed inside the source with "anext(): asynchronous
    generator is already running"); a list may take any number."""

    async def broker() -> AsyncIterator[Order]:
        for order in _orders(3):
            yield order

    env = LocalExecutionEnvironment()
    for once in (broker(), iter(_orders(3))):
        records = env.from_list(once, key="customer")
        first = records.apply(Tally())
        with pytest.raises(RuntimeError, match=r"an iterator \(\w+\), which can be read only once"):
            records.apply(Tally("other"))
        assert len(await first.to_list()) == 3
    again = env.from_list(_orders(3), key="customer")
    assert [len(await again.apply(Tally(name)).to_list()) for name in "ab"] == [3, 3]


async def test_outputs_iterate_once_and_bad_arguments_are_refused() -> None:
    applied = LocalExecutionEnvironment().from_list(_orders(2), key="customer").apply(Tally())
    assert len(await applied.to_list()) == 2
    with pytest.raises(RuntimeError, match="already iterated"):
        await applied.to_list()
    with pytest.raises(ValueError, match="max_concurrency"):
        LocalExecutionEnvironment(max_concurrency=0)
    with pytest.raises(ValueError, match="on_error"):
        LocalExecutionEnvironment(on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="iterable of records"):
        LocalExecutionEnvironment().from_list(5)  # type: ignore[arg-type]
    for text in ("abc", b"abc"):  # iterable, but one record per character was never meant
        with pytest.raises(TypeError, match=r"got (str|bytes) \(wrap a single record in a list"):
            LocalExecutionEnvironment().from_list(text)
    # One record iterates as its field names (a dict) or its (field, value) pairs (a model): each
    # ran as a record of its own, without a word.
    for record in ({"customer": "a", "amount": 5}, Order(customer="a", amount=5)):
        with pytest.raises(TypeError, match=r"got (dict|Order) \(wrap a single record in a list"):
            LocalExecutionEnvironment().from_list(record)
    with pytest.raises(TypeError, match=r"for a mapping of records, pass its .values\(\)"):
        LocalExecutionEnvironment().from_list({"a": Order(customer="a", amount=5)})
    for bad in ("2", 0.5, True):  # "2" failed only at the first comparison, inside the run
        with pytest.raises(TypeError, match="max_concurrency must be an int >= 1"):
            LocalExecutionEnvironment(max_concurrency=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be"):
        LocalExecutionEnvironment().from_list([], key=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes an Agent"):
        LocalExecutionEnvironment().from_list([]).apply(object())  # type: ignore[arg-type]


async def test_a_plain_for_over_the_outputs_says_how_to_take_them() -> None:
    """``for output in outputs`` was Python's own "'KeyedOutputs' object is not iterable", which
    said nothing of ``async for`` or ``to_list``; it reads no record, so the outputs are still
    there to take."""
    applied = LocalExecutionEnvironment().from_list(_orders(2), key="customer").apply(Tally())
    for take in (iter, list):
        with pytest.raises(TypeError, match=r"'async for output in outputs'.*outputs\.to_list\(\)"):
            take(applied)  # type: ignore[call-overload]
    assert len(await applied.to_list()) == 2


async def test_records_use_a_real_mcp_servers_tools_through_the_environments_resources() -> None:
    """The demo MCP server (stdio, a real subprocess) registered once on the environment: every
    record's chat calls its ``add`` tool through the built-in tool action."""

    class Adder(ActionAgent):
        @action(InputEvent)
        def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            question = Message.user(json.dumps(event.input))
            ctx.send_event(ChatRequestEvent(model="m", messages=[question], tools=["add"]))

        @action(ChatResponseEvent)
        def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            ctx.send_event(OutputEvent(output=event.response.content))

    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"sum={messages[-1].content}")
        numbers = json.loads(messages[0].content)
        return Reply(tool_calls=[tool_call("add", {"a": numbers["a"], "b": numbers["b"]})])

    async with Resources() as resources:
        resources.add_model("m", ScriptedModel(reply))
        resources.add_mcp("demo", StdioServer(sys.executable, [str(STDIO_SCRIPT)]))
        env = LocalExecutionEnvironment(resources=resources, max_concurrency=4)
        records = [{"a": n, "b": 10 * n} for n in range(6)]
        outputs = await env.from_list(records).apply(Adder("adder")).to_list()
    assert [o.output for o in outputs] == [f"sum={11 * n}" for n in range(6)]


class Refunds(ActionAgent):
    """Asks the model, whose ``refund`` tool needs approval; keeps per key the count of requests
    seen and the cents refunded, and outputs the refunded total after each answer."""

    @action(InputEvent)
    def ask(self, event: InputEvent, ctx: ActionContext) -> None:
        memory = ctx.short_term_memory
        memory.set("seen", memory.get("seen", 0) + 1)
        question = [Message.user(event.input["text"])]
        ctx.send_event(ChatRequestEvent(model="m", messages=question, tools=["refund"]))

    @action(ChatResponseEvent)
    def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
        memory = ctx.short_term_memory
        if event.response.content.startswith("refunded"):
            memory.set("refunded", memory.get("refunded", 0) + int(event.response.content[9:]))
        ctx.send_event(OutputEvent(output=memory.get("refunded", 0)))


@tool(require_approval=True)
async def refund(cents: int) -> str:
    """Refund an amount (a person approves it first)."""
    return f"refunded {cents}"


def _refunds_server() -> OpenAIServer:
    """The model: a refund call for "refund <cents>", the tool's result once it has one, else
    "noted" (the server answers in the order asked: the tests run one record at a time)."""
    return OpenAIServer(
        [
            OpenAIReply(tool_calls=[OpenAICall("refund", '{"cents": 500}')]),
            OpenAIReply(text="noted"),  # the record after the paused one
            OpenAIReply(text="refunded 500"),  # the resume
            OpenAIReply(text="noted"),  # the record after the resume
        ]
    )


async def test_a_resumed_record_runs_as_a_record_of_its_key_while_the_stream_runs() -> None:
    """A record paused for approval, resumed with ``outputs.resume`` while its key's records keep
    arriving: it runs on the key's memory as the later records left it, and its writes are the
    key's, seen by the records after it. (Resumed with the runner, it ran on the memory saved at
    the pause and its writes never reached the key: the refund was lost.)"""
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def broker() -> AsyncIterator[dict[str, Any]]:
        while (message := await queue.get()) is not None:
            yield message

    async with (
        _refunds_server() as server,
        wire_model(server, name="m") as model,
    ):
        resources = Resources()
        resources.add_model("m", model)
        resources.add_tool(refund)
        env = LocalExecutionEnvironment(
            resources=resources, checkpoint_store=InMemoryCheckpointStore(), max_concurrency=1
        )
        applied = env.from_list(broker(), key="customer").apply(Refunds("refunds"))
        async with applied:
            outputs = aiter(applied)
            for text in ("refund 500", "hello"):
                await queue.put({"customer": "ann", "text": text})
            paused, after = await anext(outputs), await anext(outputs)
            assert paused.checkpoint_id is not None and after.output == 0
            [resumed] = await applied.resume(paused, {"approved": True})
            assert (resumed.index, resumed.output) == (0, 500)
            await queue.put({"customer": "ann", "text": "hello again"})
            assert (await anext(outputs)).output == 500  # the resume's write is the key's
            await queue.put(None)
            assert [o async for o in outputs] == []
    assert applied.sessions == {"ann": {"memory:refunds": {"seen": 3, "refunded": 500}}}


async def test_a_resume_waits_for_its_keys_running_record_and_goes_before_later_ones() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    class Slow(ActionAgent):
        @action(InputEvent)
        async def step(self, event: InputEvent, ctx: ActionContext) -> None:
            memory = ctx.short_term_memory
            if event.input["do"] == "ask" and ctx.resume is None:
                raise Interrupt("go on?")
            if event.input["do"] == "wait":
                started.set()
                await release.wait()
            memory.set("log", [*memory.get("log", []), event.input["do"]])
            ctx.send_event(OutputEvent(output=memory.get("log")))

    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def broker() -> AsyncIterator[dict[str, Any]]:
        while (message := await queue.get()) is not None:
            yield message

    # One key at a time: a resume of another key's record waits for room like any record.
    env = LocalExecutionEnvironment(checkpoint_store=InMemoryCheckpointStore(), max_concurrency=1)
    applied = env.from_list(broker(), key="k").apply(Slow("slow"))
    async with applied:
        outputs = aiter(applied)
        await queue.put({"k": 2, "do": "ask"})
        await queue.put({"k": 1, "do": "ask"})
        other, paused = await anext(outputs), await anext(outputs)
        await queue.put({"k": 1, "do": "wait"})
        next_output = asyncio.ensure_future(anext(outputs))
        await started.wait()  # the waiting record runs: it holds the key
        resuming = asyncio.ensure_future(applied.resume(paused, "yes"))
        cancelled = asyncio.ensure_future(applied.resume(paused, "no"))
        resuming_other = asyncio.ensure_future(applied.resume(other, "yes"))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not resuming.done()  # behind the record running for its key
        assert not resuming_other.done()  # no room: key 1 holds the only place
        cancelled.cancel()  # a resume whose caller gives up waiting does not hold the key
        await queue.put({"k": 1, "do": "later"})
        release.set()
        assert (await next_output).output == ["wait"]
        [resumed] = await resuming
        assert resumed.output == ["wait", "ask"]
        assert (await anext(outputs)).output == ["wait", "ask", "later"]
        assert [o.output for o in await resuming_other] == [["ask"]]
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        await queue.put(None)
    with pytest.raises(ValueError, match="takes a paused record's output"):
        await applied.resume(resumed, "yes")


async def test_a_loop_that_resumes_what_pauses_as_it_reads_does_not_wait_for_ever() -> None:
    """The loop over the outputs approves each pause on the spot: while it waits in ``resume``
    it takes no outputs, and the key's worker, which the resume waits for, had outputs and no
    room for them. Each waited for the other for ever."""

    @action(InputEvent)
    def step(event: InputEvent, ctx: ActionContext) -> None:
        if event.input["n"] % 5 == 0 and ctx.resume is None:
            raise Interrupt("go on?")
        for part in range(3):  # a few outputs per record fill the outputs' queue soon
            ctx.send_event(OutputEvent(output=(event.input["n"], part)))

    env = LocalExecutionEnvironment(max_concurrency=1, checkpoint_store=InMemoryCheckpointStore())
    records = [{"k": n // 10, "n": n} for n in range(40)]
    applied = env.from_list(records, key="k").apply(ActionAgent("steps", actions=[step]))
    seen: list[Any] = []
    async with asyncio.timeout(60), applied:  # a guard: a hang fails here, not the suite
        async for output in applied:
            if output.checkpoint_id is None:
                seen.append(output.output)
            else:
                seen += [o.output for o in await applied.resume(output, "yes")]
    assert sorted(seen) == [(n, part) for n in range(40) for part in range(3)]


class _Counted:
    """A broker's records, counted as they are read: it yields to the loop on each (a network
    read), and stops at ``cap`` so a source read without bound fails the test, not the suite."""

    def __init__(self, first: list[dict[str, Any]], keys: int, cap: int = 5000) -> None:
        self.first, self.keys, self.cap, self.read = first, keys, cap, 0

    async def records(self) -> AsyncIterator[dict[str, Any]]:
        for record in self.first:
            self.read += 1
            yield record
        while self.read < self.cap:
            self.read += 1
            await asyncio.sleep(0)
            yield {"k": f"c{self.read % self.keys}", "do": "go"}


class _Gated(ActionAgent):
    """Logs each record's ``do`` in memory and outputs the log; ``ask`` pauses first (``ask:<the
    answer>`` once resumed), and a ``do`` with a gate in ``gates`` waits for it, ``entered`` set
    meanwhile (a record whose model is slow to answer)."""

    def __init__(self, name: str, gates: dict[str, asyncio.Event]) -> None:
        super().__init__(name)
        self.gates = gates
        self.entered = {do: asyncio.Event() for do in gates}

    @action(InputEvent)
    async def step(self, event: InputEvent, ctx: ActionContext) -> None:
        memory, done = ctx.short_term_memory, event.input["do"]
        if done == "ask":
            if ctx.resume is None:
                raise Interrupt("go on?")
            done = f"ask:{ctx.resume.data}"
        if done in self.gates:
            self.entered[done].set()
            await self.gates[done].wait()
        memory.set("log", [*memory.get("log", []), done])
        ctx.send_event(OutputEvent(output=memory.get("log")))


async def _spin(turns: int = 2000) -> None:
    """Let every task that can run, run (no clock: a number of the loop's turns)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def test_a_source_of_fewer_keys_than_max_concurrency_is_read_only_as_fast_as_processed() -> (
    None
):
    """The reader waited for room only with ``max_concurrency`` keys running: a stream of one
    key (one customer's orders, one device's readings) was read to its end while that key's
    worker ran a record at a time, every record piling up in the key's queue."""
    source = _Counted([], keys=1)
    env = LocalExecutionEnvironment(max_concurrency=3)
    seen = 0
    async with env.from_list(source.records(), key="k").apply(_Gated("g", {})) as outputs:
        async for _ in outputs:
            seen += 1
            await _spin(20)  # a sink slower than the agent (a database, an API)
            if seen == 40:
                break
        read = source.read
    # Read ahead: the outputs waiting (4 per key the environment may run), the record running
    # and those waiting behind it (4 per key it may run), and the one the reader holds.
    assert read <= seen + 4 * 3 + 1 + 4 * 3 + 1, f"read {read} records ahead of {seen} outputs"


async def test_a_resume_waiting_for_its_turn_does_not_let_the_outputs_pile_up() -> None:
    """While a resume waits for its key's turn, workers may queue outputs past the bound (the
    consumer may be the one waiting for the resume); the reader went on reading meanwhile, so
    every record of an unbounded source ran and its outputs piled up for as long as the key's
    running record took. It reads no more while the outputs it has not taken fill the queue."""
    release = asyncio.Event()
    agent = _Gated("g", {"wait": release})
    source = _Counted([{"k": "s", "do": "ask"}, {"k": "s", "do": "wait"}], keys=7)
    env = LocalExecutionEnvironment(max_concurrency=2, checkpoint_store=InMemoryCheckpointStore())
    applied = env.from_list(source.records(), key="k").apply(agent)
    async with asyncio.timeout(60), applied:  # a guard: a hang fails here, not the suite
        outputs, taken = aiter(applied), 1
        while (paused := await anext(outputs)).checkpoint_id is None:
            taken += 1
        await agent.entered["wait"].wait()  # the key's next record runs: the resume waits for it
        resuming = asyncio.ensure_future(applied.resume(paused, "yes"))
        await _spin()
        read = source.read
        release.set()
        [resumed] = await resuming
    assert resumed.output == ["wait", "ask:yes"]
    # Read ahead: outputs not taken (4 per key), records running (2) and waiting (4 per key),
    # the two records of key "s", and the one the reader holds.
    assert read <= taken + 4 * 2 + 2 + 4 * 2 + 2 + 1, f"read {read} with {taken} outputs taken"


async def test_a_record_read_while_its_keys_resume_waits_for_room_runs_after_the_resume() -> None:
    """A resume and a new record of the same key both waited for room: the resume took the first
    place, and the reader, given the next, started a second worker for the key over the resume's
    queue. The record ran beside the resume, on the key's session before the resume's writes."""
    gates = {"a": asyncio.Event(), "b": asyncio.Event(), "ask:yes": asyncio.Event()}
    agent = _Gated("g", gates)
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def broker() -> AsyncIterator[dict[str, Any]]:
        while (message := await queue.get()) is not None:
            yield message

    env = LocalExecutionEnvironment(max_concurrency=2, checkpoint_store=InMemoryCheckpointStore())
    applied = env.from_list(broker(), key="k").apply(agent)
    async with asyncio.timeout(60), applied:  # a guard: a hang fails here, not the suite
        outputs = aiter(applied)
        await queue.put({"k": "key", "do": "ask"})
        paused = await anext(outputs)
        for other in ("a", "b"):  # two records of other keys take both places
            await queue.put({"k": other, "do": other})
            await agent.entered[other].wait()
        resuming = asyncio.ensure_future(applied.resume(paused, "yes"))
        await _spin(50)  # the resume waits for room
        await queue.put({"k": "key", "do": "later"})
        await _spin(50)  # and so does the reader, with the key's new record
        gates["a"].set()  # a place: the resume's
        assert (await anext(outputs)).output == ["a"]
        await agent.entered["ask:yes"].wait()
        gates["b"].set()  # another place: the reader's, for the key the resume holds
        assert (await anext(outputs)).output == ["b"]
        await _spin(50)
        gates["ask:yes"].set()
        [resumed] = await resuming
        assert resumed.output == ["ask:yes"]
        assert (await anext(outputs)).output == ["ask:yes", "later"]
        await queue.put(None)
        assert [o async for o in outputs] == []
    assert applied.sessions == {
        "key": {"memory:g": {"log": ["ask:yes", "later"]}},
        "a": {"memory:g": {"log": ["a"]}},
        "b": {"memory:g": {"log": ["b"]}},
    }


class Asks(ActionAgent):
    """Logs each record's ``do`` in memory; ``ask`` pauses first, and logs the answer too."""

    @action(InputEvent)
    def step(self, event: InputEvent, ctx: ActionContext) -> None:
        memory, done = ctx.short_term_memory, event.input["do"]
        if done == "ask":
            if ctx.resume is None:
                raise Interrupt("go on?")
            done = f"ask:{ctx.resume.data}"
        memory.set("log", [*memory.get("log", []), done])
        if done == "ask:fail":
            raise ValueError("the answer was 'fail'")
        ctx.send_event(OutputEvent(output=memory.get("log")))


async def test_a_paused_record_resumes_after_its_stream_in_another_environment(
    tmp_path: Path,
) -> None:
    """The stream is over (or another process resumes): an application never iterated, given the
    sessions and a store the first one shared, resumes the record on its key's session. Without
    a key, or without the key's session, it resumes on the session saved at the pause."""
    records = [{"k": 1, "do": "ask"}, {"k": 1, "do": "x"}, {"k": 2, "do": "y"}]
    records.append({"k": 2, "do": "ask"})
    async with SQLiteCheckpointStore(tmp_path / "pauses.db") as store:
        first = LocalExecutionEnvironment(checkpoint_store=store, max_concurrency=1)
        applied = first.from_list(records, key="k").apply(Asks("asks"))
        paused, later, _, paused_2 = await applied.to_list()
        unkeyed = await first.from_list(records[:1]).apply(Asks("asks")).to_list()
    assert paused.checkpoint_id and paused_2.checkpoint_id and later.output == ["x"]
    async with SQLiteCheckpointStore(tmp_path / "pauses.db") as store:
        second = LocalExecutionEnvironment(checkpoint_store=store)
        again = second.from_list([], key="k").apply(Asks("asks"), sessions=applied.sessions)
        [resumed] = await again.resume(paused, "yes")
        assert resumed.output == ["x", "ask:yes"]
        assert applied.sessions[1] == {"memory:asks": {"log": ["x", "ask:yes"]}}
        [alone] = await second.from_list([]).apply(Asks("asks")).resume(unkeyed[0], "no")
        assert alone.output == ["ask:no"]
        forgotten: dict[Hashable, dict[str, Any]] = {}
        again = second.from_list([], key="k").apply(Asks("asks"), sessions=forgotten)
        with pytest.raises(RecordError, match="the answer was 'fail'") as failed:
            await again.resume(paused_2, "fail")  # fails like a record: its writes dropped,
        assert failed.value.run_id == paused_2.run_id and forgotten == {}  # the stream goes on
        [resumed_2] = await again.resume(paused_2, "yes")  # and its checkpoint is kept
        assert resumed_2.output == ["y", "ask:yes"]  # on its session as saved at the pause
        assert forgotten == {2: {"memory:asks": {"log": ["y", "ask:yes"]}}}


async def test_resumes_of_one_key_after_the_stream_run_one_at_a_time() -> None:
    """Two approvals of one key's paused records arrive together once the stream is over: each
    resume copied the key's session, ran, and wrote its copy back, so the later one's commit
    dropped the other's write (a refund missing from the key's total). They run one at a time,
    like any records of a key."""

    class Logs(ActionAgent):
        @action(InputEvent)
        async def step(self, event: InputEvent, ctx: ActionContext) -> None:
            done = event.input["do"]
            if done != "x" and ctx.resume is None:
                raise Interrupt("go on?")
            for _ in range(5):  # a model or tool call: the other resume gets to run meanwhile
                await asyncio.sleep(0)
            memory = ctx.short_term_memory
            memory.set("log", [*memory.get("log", []), done])

    records = [{"k": 1, "do": "x"}, {"k": 1, "do": "a"}, {"k": 1, "do": "b"}]
    env = LocalExecutionEnvironment(checkpoint_store=InMemoryCheckpointStore())
    applied = env.from_list(records, key="k").apply(Logs("logs"))
    first, second = await applied.to_list()
    await asyncio.gather(applied.resume(first, "yes"), applied.resume(second, "yes"))
    assert applied.sessions == {1: {"memory:logs": {"log": ["x", "a", "b"]}}}


async def test_sessions_carry_each_keys_memory_from_one_batch_to_the_next() -> None:
    env = LocalExecutionEnvironment()
    first = env.from_list(_orders(6), key="customer").apply(Tally())
    await first.to_list()
    more = [Order(customer="a", amount=10), Order(customer="d", amount=1)]
    second = env.from_list(more, key="customer").apply(Tally(), sessions=first.sessions)
    outputs = await second.to_list()
    assert [o.output for o in outputs] == [
        {"customer": "a", "total": 0 + 3 + 10},  # on top of what a's first batch left
        {"customer": "d", "total": 1},
    ]
    assert second.sessions is first.sessions and set(first.sessions) == {"a", "b", "c", "d"}


class RedisSessions:
    """Each key's session values as JSON in Redis: memory a service keeps across restarts."""

    def __init__(self, url: str, prefix: str) -> None:
        self.redis = aioredis.Redis.from_url(url)
        self.prefix = prefix
        self.gates: dict[Hashable, asyncio.Event] = {}  # a key's reads wait for its gate, if any
        self.reading: set[Hashable] = set()

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        gate = self.gates.get(key)
        if gate is not None:
            self.reading.add(key)
            await gate.wait()
        stored = await self.redis.get(f"{self.prefix}{key}")
        return None if stored is None else json.loads(stored)

    async def put(self, key: Hashable, values: dict[str, Any]) -> None:
        await self.redis.set(f"{self.prefix}{key}", json.dumps(values))


async def test_sessions_in_an_async_store_carry_keys_memory_across_environments(
    redis_server: RedisServer,
) -> None:
    """A service keeping its keys' memory in Redis had only a mutable mapping to give, whose
    reads and writes would hold up every key's records on the event loop for their round trips;
    ``sessions=`` takes an async ``SessionStore``. A failed record's writes are not kept."""
    sessions = RedisSessions(redis_server.url, f"s{uuid.uuid4().hex[:8]}:")
    assert isinstance(sessions, SessionStore)
    first = LocalExecutionEnvironment(on_error="emit")
    orders = [*_orders(6), Order(customer="a", amount=-100)]
    outputs = (
        await first.from_list(orders, key="customer").apply(Tally(), sessions=sessions).to_list()
    )
    assert outputs[-1].error is not None  # the negative amount: its writes dropped
    assert await sessions.get("a") == {"memory:tally": {"total": 0 + 3}}

    # Another environment (a restart) over the same store: each key goes on from its memory,
    # and a key whose read waits on the store does not hold up the others.
    again = RedisSessions(redis_server.url, sessions.prefix)
    again.gates["b"] = asyncio.Event()
    more = [Order(customer="b", amount=10), Order(customer="a", amount=10)]
    applied = (
        LocalExecutionEnvironment().from_list(more, key="customer").apply(Tally(), sessions=again)
    )
    async with applied:
        outputs_seen = aiter(applied)
        first_out = await anext(outputs_seen)
        assert first_out.output == {"customer": "a", "total": 3 + 10}
        assert "b" in again.reading  # still waiting for its read
        again.gates["b"].set()
        assert (await anext(outputs_seen)).output == {"customer": "b", "total": 1 + 4 + 10}
    assert await again.get("a") == {"memory:tally": {"total": 13}}
    await sessions.redis.aclose()
    await again.redis.aclose()


@pytest.mark.parametrize("on_error", ["emit", "raise"])
async def test_outputs_resume_fails_as_a_record_when_the_runner_raises(
    on_error: Any, tmp_path: Path
) -> None:
    """``outputs.resume`` fails like a record (``on_error``), as its docstring says, but a resume
    whose checkpoint was gone (an approval given twice) raised the runner's bare
    CheckpointNotFoundError, and one whose key's SessionStore was down the store's own
    ConnectionError, whatever ``on_error`` said, where the same resumes through the stream are
    failed outputs: both are the resume's failure under the paused run's id, and the pause
    whose store failed can still be resumed."""
    records = [{"k": 1, "do": "ask"}, {"k": 2, "do": "ask"}]
    down = RedisSessions("redis://127.0.0.1:9", "s:")  # no server: every call fails
    async with SQLiteCheckpointStore(tmp_path / "pauses.db") as store:
        env = LocalExecutionEnvironment(checkpoint_store=store, on_error=on_error)
        applied = env.from_list(records, key="k").apply(Asks("asks"))
        first, second = await applied.to_list()
        [done] = await applied.resume(first, "yes")
        assert done.output == ["ask:yes"]
        elsewhere = env.from_list([], key="k").apply(Asks("asks"), sessions=down)
        for paused, outputs, kind in (
            (first, applied, "CheckpointNotFoundError"),  # resumed already
            (second, elsewhere, "ConnectionError"),  # its key's session store is down
        ):
            if on_error == "emit":
                [failed] = await outputs.resume(paused, "yes")
                assert failed.error is not None and failed.error.type == kind
                assert (
                    failed.resumed and failed.run_id == paused.run_id and failed.key == paused.key
                )
            else:
                with pytest.raises(RecordError, match=f"failed: {kind}") as raised:
                    await outputs.resume(paused, "yes")
                assert raised.value.run_id == paused.run_id
                assert type(raised.value.__cause__).__name__ == kind
        [again] = await applied.resume(second, "yes")  # its checkpoint was kept
        assert again.output == ["ask:yes"]
    await down.redis.aclose()


class RawRedisSessions(RedisSessions):
    """A store whose ``get`` forgot to parse what it put: it gives Redis's bytes back."""

    async def get(self, key: Hashable) -> dict[str, Any] | None:
        stored: Any = await self.redis.get(f"{self.prefix}{key}")
        return stored  # type: ignore[no-any-return]


async def test_a_stores_get_that_gives_no_dict_fails_the_record_saying_so(
    redis_server: RedisServer,
) -> None:
    """A store's ``get`` that gave the stored text (``json.loads`` forgotten) failed the record
    with "dictionary update sequence element #0 has length 1; 2 is required", naming neither the
    store nor its ``get``. It is a ``TypeError`` saying what ``get`` gave and must give, and the
    key's stored values are left as they were."""
    sessions = RawRedisSessions(redis_server.url, f"s{uuid.uuid4().hex[:8]}:")
    await sessions.put("a", {"memory:tally": {"total": 5}})
    env = LocalExecutionEnvironment(on_error="emit")
    order = [Order(customer="a", amount=1)]
    [output] = (
        await env.from_list(order, key="customer").apply(Tally(), sessions=sessions).to_list()
    )
    assert output.error is not None and output.error.type == "TypeError"
    assert "RawRedisSessions.get('a') gave bytes" in output.error.message
    assert "a dict of the key's values or None" in output.error.message
    assert json.loads(await sessions.redis.get(f"{sessions.prefix}a")) == {
        "memory:tally": {"total": 5}
    }
    await sessions.redis.aclose()


def test_sessions_must_be_a_mapping_or_an_async_store() -> None:
    class SyncStore:
        def get(self, key: Hashable) -> dict[str, Any] | None:
            return None

        def put(self, key: Hashable, values: dict[str, Any]) -> None:
            pass

    applied = LocalExecutionEnvironment().from_list([], key="k")
    for wrong in (SyncStore(), [("k", {})]):
        with pytest.raises(TypeError, match="sessions must be a mutable mapping"):
            applied.apply(Tally(), sessions=wrong)  # type: ignore[arg-type]


# -- the Flink operator's function, without a job (tests/test_flink.py runs real jobs) ----------


def _flink() -> Any:
    """``adk.execution._flink``; the test is skipped without PyFlink."""
    return pytest.importorskip("adk.execution._flink")


def _worker_env(on_error: str = "emit", timeout: float = 600.0, resources: Any = None) -> Any:
    """What a worker's function takes from its ``FlinkExecutionEnvironment`` (making a real one
    starts a JVM)."""
    return SimpleNamespace(
        resources=resources,
        callbacks=None,
        checkpoint_store=None,
        tracer_provider=None,
        meter_provider=None,
        on_error=on_error,
        timeout=timeout,
    )


class Counter(ActionAgent):
    """Counts its key's records in memory; each waits ``wait`` seconds, then outputs the count."""

    @action(InputEvent)
    async def count(self, event: InputEvent, ctx: ActionContext) -> None:
        count = ctx.short_term_memory.get("count", 0) + 1
        ctx.short_term_memory.set("count", count)
        await asyncio.sleep(event.input.get("wait", 0))
        ctx.send_event(OutputEvent(output=count))


def _parsed(texts: list[str]) -> list[Any]:
    return [json.loads(text) for text in texts]


async def test_flink_records_without_a_key_keep_no_session() -> None:
    flink = _flink()
    row = pytest.importorskip("pyflink.common").Row
    unkeyed = flink._AgentFunction(Counter("c"), _worker_env(), False, None)
    for n in range(3):
        [output] = _parsed(await unkeyed.async_invoke({"n": n}))
        assert output["output"] == 1 and output["key"] == ["record", n]
    assert unkeyed._sessions == {}
    keyed = flink._AgentFunction(Counter("c"), _worker_env(), True, None)
    await keyed.async_invoke(row("a", {}))
    [output] = _parsed(await keyed.async_invoke(row("a", {})))
    assert output["output"] == 2 and list(keyed._sessions) == ["a"]


async def test_flink_timeout_bounds_a_records_own_run_not_its_wait_behind_its_key() -> None:
    flink = _flink()
    row = pytest.importorskip("pyflink.common").Row
    function = flink._AgentFunction(Counter("c"), _worker_env(timeout=1.0), True, None)
    # The second waits 0.6 s behind the first: 1.2 s in all, but its own run is 0.6 s. The
    # third's own run is too long. (Each run has 0.4 s to spare: with a 0.5 s timeout and
    # 0.3 s runs, 0.2 s was not enough on a loaded machine.)
    waits = (0.6, 0.6, 3.0)
    first, second, slow = await asyncio.gather(
        *(function.async_invoke(row("a", {"wait": wait})) for wait in waits)
    )
    assert [o["output"] for o in _parsed(first + second)] == [1, 2]
    [failed] = _parsed(slow)
    assert (
        failed["error"]["type"] == "TimeoutError" and "timeout=1.0s" in failed["error"]["message"]
    )
    [after] = _parsed(await function.async_invoke(row("a", {})))
    assert after["output"] == 3  # the timed-out record was cancelled and its write dropped

    raising = flink._AgentFunction(Counter("c"), _worker_env("raise", timeout=0.1), True, None)
    with pytest.raises(RecordError, match="TimeoutError"):
        await raising.async_invoke(row("a", {"wait": 3.0}))
    for bad in (0, None, float("inf")):  # refused before a JVM starts, not at the first record
        with pytest.raises(ValueError, match="timeout must be a positive number of seconds, got"):
            flink.FlinkExecutionEnvironment(timeout=bad)


async def test_flinks_own_timer_cancels_the_record_and_fails_it_like_any_record() -> None:
    """Flink's operator timer is a backstop (a record that outlives its cancellation): it fires on
    a thread of its own; with ``on_error="emit"`` the record is an output, not a failed job."""
    flink = _flink()
    row = pytest.importorskip("pyflink.common").Row
    function = flink._AgentFunction(Counter("c"), _worker_env(), True, None)
    value = row("b", {"wait": 30})
    running = asyncio.create_task(function.async_invoke(value))
    await asyncio.sleep(0.05)
    [output] = _parsed(await asyncio.to_thread(function.timeout, value))
    assert output["key"] == "b" and output["error"]["type"] == "TimeoutError"
    with pytest.raises(asyncio.CancelledError):
        await running
    assert function._sessions == {}  # cancelled before it committed

    raising = flink._AgentFunction(Counter("c"), _worker_env("raise"), True, None)
    with pytest.raises(RecordError, match="TimeoutError"):
        raising.timeout(row("b", {}))


def test_a_flink_worker_closes_its_resources_after_pyflink_stopped_its_loop() -> None:
    flink = _flink()
    operation = pytest.importorskip(
        "pyflink.fn_execution.datastream.process.async_function.operation"
    )
    closed: list[str] = []

    class Model(ScriptedModel):
        async def aclose(self) -> None:
            closed.append("model")

    def build() -> Resources:
        resources = Resources()
        resources.add_model("m", Model(["x"]))
        return resources

    function = flink._AgentFunction(Counter("c"), _worker_env(resources=build), False, None)
    worker = operation.AsyncFunctionRunner()  # PyFlink's thread running the function's loop
    worker.daemon = True
    worker.start()
    worker.wait_ready()
    future = asyncio.run_coroutine_threadsafe(function.async_invoke({}), worker._loop)
    assert _parsed(future.result(timeout=10))[0]["output"] == 1
    # The order of PyFlink's AsyncOperation.close(): the loop stops (and closes), then close().
    worker.stop()
    function.close()
    assert closed == ["model"]


class _Reading(BaseModel):
    sensor: str
    value: float


async def test_a_model_records_nan_reaches_the_model_as_nan_like_a_dicts() -> None:
    """A record's text is its JSON: a dict's NaN read NaN, a pydantic model's null (its own JSON
    setting), so the model read a value the record never held."""
    seen: list[str] = []

    def reply(messages: list[Message]) -> Reply:
        seen.append(messages[-1].content)
        return Reply(text="ok")

    resources = Resources()
    resources.add_model("m", ScriptedModel(reply))
    agent = ReActAgent("r", "m")
    env = LocalExecutionEnvironment(resources=resources)
    records = [_Reading(sensor="a", value=math.nan), {"sensor": "a", "value": math.nan}]
    await env.from_list(records).apply(agent).to_list()
    assert seen == ['{"sensor":"a","value":NaN}'] * 2


class _Refused(ValueError):
    """An exception of the user's own, as a pipeline's actions raise them."""


@action(InputEvent)
def _parse_amount(event: InputEvent, ctx: ActionContext) -> None:
    record = event.input
    if record["amount"] == "bad":
        float(record["amount"])  # ValueError
    if record["amount"] < 0:
        raise _Refused(f"negative amount {record['amount']}")
    ctx.send_event(OutputEvent(output=record["amount"]))


class _Fails(BaseAgent):
    async def run(self, input: Any, ctx: Any) -> AsyncIterator[AgentEvent]:
        raise KeyError("no such account")
        yield AgentEvent.of("never")  # pragma: no cover


async def test_a_failed_action_names_what_it_raised_as_the_errors_cause() -> None:
    """A pipeline's failed records all read ``ActionError`` (where: an action) and hid what went
    wrong in the message, so an operator could not group them by it. ``error.cause`` is the
    type the action raised, in the output, its JSON and the run's error event; ``type`` stays
    ``ActionError``, and a failure that wraps nothing has no cause (and its JSON no such key)."""
    records = [
        {"user": "ann", "amount": "bad"},
        {"user": "bob", "amount": -5},
        {"user": "cy", "amount": 3},
    ]
    env = LocalExecutionEnvironment(on_error="emit")
    agent = ActionAgent("amounts", actions=[_parse_amount])
    bad, negative, fine = await env.from_list(records, key="user").apply(agent).to_list()
    assert bad.error is not None and negative.error is not None and fine.error is None
    assert (bad.error.type, bad.error.cause) == ("ActionError", "ValueError")
    assert (negative.error.type, negative.error.cause) == ("ActionError", "_Refused")
    assert "action '_parse_amount' of agent 'amounts' failed on InputEvent" in bad.error.message
    assert bad.to_dict()["error"] == {
        "type": "ActionError",
        "message": bad.error.message,
        "cause": "ValueError",
    }
    [plain] = await env.from_list([{"user": "dee"}], key="user").apply(_Fails("f")).to_list()
    assert plain.error == ErrorInfo("KeyError", "'no such account'")
    assert plain.to_dict()["error"] == {"type": "KeyError", "message": "'no such account'"}

    raising = LocalExecutionEnvironment().from_list(records[:1], key="user").apply(agent)
    with pytest.raises(RecordError) as raised:
        await raising.to_list()
    assert (raised.value.error.type, raised.value.error.cause) == ("ActionError", "ValueError")


async def test_an_error_events_cause_goes_through_its_json() -> None:
    """``AgentEvent.to_dict``/``from_dict`` keep ``cause``; one that is not a string is refused."""
    error = ErrorInfo("ActionError", "action 'a' of agent 'b' failed on InputEvent: ...", "Oops")
    event = AgentEvent("b", ("b",), error=error)
    data = json.loads(json.dumps(event.to_dict()))
    assert data["error"]["cause"] == "Oops"
    assert AgentEvent.from_dict(data).error == error
    assert "cause" not in AgentEvent("b", ("b",), error=ErrorInfo("X", "m")).to_dict()["error"]
    data["error"]["cause"] = 3
    with pytest.raises(ValueError, match="cause must be a string"):
        AgentEvent.from_dict(data)
