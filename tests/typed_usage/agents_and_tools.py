"""A typed user's custom agent, tools and runner calls (checked by mypy --strict, not run)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Coroutine
from typing import Any, assert_type

from pydantic import BaseModel

import adk
from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    FunctionTool,
    Message,
    RunContext,
    Runner,
    RunResult,
    ToolContext,
    ToolResult,
    tool,
)
from adk.callbacks import Callbacks, ModelRequest
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call


class Greeter(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        name = ctx.session.get("user", "there")
        yield AgentEvent.of(Message.assistant(f"hello {name}"))
        if ctx.resume is None:
            yield ctx.interrupt({"question": "continue?"})
        yield AgentEvent.exit()


class Order(BaseModel):
    item: str
    quantity: int = 1


@tool
def place_order(order: Order) -> str:
    """Place an order.

    Args:
        order: what to order.
    """
    return f"ordered {order.quantity} x {order.item}"


@tool
async def lookup(sku: str, ctx: ToolContext) -> dict[str, Any]:
    """Look a product up."""
    ctx.session["last_sku"] = sku
    return {"sku": sku}


@tool(name="refund", require_approval=True, timeout=5)
async def refund(amount_cents: int) -> ToolResult:
    return ToolResult(content=f"refunded {amount_cents}")


def _needs_approval(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
    return bool(arguments.get("amount_cents", 0) > 100)


@tool(require_approval=_needs_approval)
def pay(amount_cents: int) -> str:
    return str(amount_cents)


# A decorated function is a FunctionTool that keeps the function's signature: the function itself
# is ``.fn``, callable (and refused) as the function is; a wrong call of it is an error (the
# ignores below are needed, which strict mode checks).
_order: FunctionTool[[Order], str] = place_order
_lookup: FunctionTool[[str, ToolContext], Coroutine[Any, Any, dict[str, Any]]] = lookup
_refund: FunctionTool[[int], Coroutine[Any, Any, ToolResult]] = refund
_pay: FunctionTool[[int], str] = pay


async def use_tools(ctx: ToolContext) -> None:
    assert_type(place_order.fn(Order(item="pen")), str)
    assert_type(await lookup.fn("a1", ctx), dict[str, Any])
    assert_type(await refund.fn(250), ToolResult)
    assert_type(pay.fn(100), str)
    place_order.fn("pen")  # type: ignore[arg-type]
    await lookup.fn("a1")  # type: ignore[call-arg]
    await refund.fn("250")  # type: ignore[arg-type]
    pay.fn(amount=100)  # type: ignore[call-arg]
    made = FunctionTool(place_order.fn, name="order")
    assert_type(made.fn(Order(item="pen")), str)
    print(made.spec.name, made.spec.parameters)
    # Any tool is a FunctionTool to an annotation without parameters, as before.
    tools: list[FunctionTool] = [place_order, lookup, refund, made]
    print(tools)


class Audit(Callbacks):
    async def before_model(self, ctx: RunContext, request: ModelRequest) -> Message | None:
        request.messages.append(Message.system("be brief"))
        return None

    def on_event(self, event: AgentEvent) -> None:
        print(event.agent_name)


def log_reply(ctx: RunContext, request: ModelRequest, reply: Message) -> Message | None:
    return None


async def cached(agent: adk.Agent, ctx: RunContext) -> str | None:
    # Session values are Any (a session holds any JSON value): a strict user names what they expect.
    answer: str | None = ctx.session.get(f"cache:{agent.name}")
    return answer


def timed(agent: adk.Agent, ctx: RunContext, error: adk.ErrorInfo | None) -> None:
    print(agent.name, error)


async def redact(ctx: ToolContext, call: adk.ToolCall, result: str | ToolResult) -> str | None:
    return "***" if "secret" in str(result) else None


def guard(ctx: ToolContext, call: adk.ToolCall) -> dict[str, Any] | None:
    return {"refused": call.name} if call.name == "refund" else None


def callbacks() -> list[Callbacks]:
    made = [
        Callbacks(before_agent=cached, after_agent=timed),
        Callbacks(after_model=log_reply, before_tool=guard, after_tool=redact),
        Callbacks(on_event=print),
    ]
    # A function of another shape than its hook's is refused, as it is when the runner is built.
    Callbacks(before_model=log_reply)  # type: ignore[arg-type]
    Callbacks(after_agent=cached)  # type: ignore[arg-type]
    return made


async def run_it() -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("lookup", {"sku": "a1"})]), Reply(text="done")]
    )
    agent = Greeter("greeter", description="says hello")
    store = SQLiteCheckpointStore(":memory:")
    runner = Runner(
        agent,
        checkpoint_store=store,
        callbacks=[Audit(), Callbacks(after_model=log_reply)],
    )
    async with runner:
        async for event in runner.run("hi", session={"user": "ann"}):
            assert_type(event, AgentEvent)
            if event.output is not None:
                out = event.output
                if out.message is not None:
                    assert_type(out.message, Message)
                    print(out.message.content)
                elif out.stream is not None:
                    whole = await out.stream.collect()
                    assert_type(whole, Message)
            if event.action is not None and event.action.interrupted is not None:
                info = event.action.interrupted
                for point in info.points:
                    assert_type(point.id, str)
            if event.error is not None:
                print(event.error.type, event.error.message)

        result = await runner.invoke([Message.user("hi")], checkpoint_id="c1")
        assert_type(result, RunResult)
        assert_type(result.text, str)
        if result.interrupt is not None:
            answers = {point.id: True for point in result.interrupt.points}
            resumed = await runner.invoke_resume(result.interrupt.checkpoint_id, answers)
            assert_type(resumed.checkpoint_id, str | None)
        usage = result.usage
        if usage is not None:
            assert_type(usage.total_tokens, int)
        print(model.calls, [r.messages for r in model.requests])
    _ = InMemoryCheckpointStore()
    _ = adk.run_messages
