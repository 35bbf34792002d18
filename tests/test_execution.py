"""Keyed execution (``adk.execution``): order and memory per key, concurrency across keys, sources,
failures, pauses, and closing early."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp_servers.process import STDIO_SCRIPT
from pydantic import BaseModel

from adk import AgentEvent, BaseAgent, Message, Resources, Role, register_type, tool
from adk.actions import (
    ActionAgent,
    ActionContext,
    ChatRequestEvent,
    ChatResponseEvent,
    InputEvent,
    OutputEvent,
    action,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.execution import LocalExecutionEnvironment, RecordError
from adk.mcp import StdioServer
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent
from tests.conftest import other_tasks


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


async def test_an_async_source_is_read_only_as_fast_as_it_is_processed() -> None:
    read = 0

    async def endless() -> AsyncIterator[Order]:
        nonlocal read
        while True:
            read += 1
            yield Order(customer=f"c{read % 7}", amount=1)

    before = other_tasks()
    applied = LocalExecutionEnvironment(max_concurrency=3).from_list(endless(), key="customer")
    seen = 0
    async with applied.apply(Tally(delay=0.001)) as outputs:
        async for _ in outputs:
            seen += 1
            if seen == 40:
                break
    # Read ahead: the records running (3) and those waiting behind them (4 per running key).
    assert read <= seen + 3 + 4 * 3 + 1, f"read {read} records ahead of {seen} outputs"
    await asyncio.sleep(0)
    assert other_tasks() == before


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
    with pytest.raises(TypeError, match="key must be"):
        LocalExecutionEnvironment().from_list([], key=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes an Agent"):
        LocalExecutionEnvironment().from_list([]).apply(object())  # type: ignore[arg-type]


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
