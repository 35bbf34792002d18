"""A bank-support app ported from Pydantic AI, end to end over real wires.

The Pydantic AI app, shaped like its ``bank_support`` example: ``Agent(model,
deps_type=SupportDependencies, output_type=SupportOutput, instructions=...)`` with an
``@agent.instructions`` function adding the customer's name from ``ctx.deps``; tools taking
``RunContext[SupportDependencies]`` (``customer_balance``, ``card_status`` raising ``ModelRetry``
for a card the customer does not have, ``block_card`` with ``requires_approval=True``); an
``@agent.output_validator`` sending back advice that does not address the customer by name; the
bank's exchange rates from an ``MCPServerStdio`` toolset; a ``flight_booking`` agent the support
agent delegates to from a tool (``usage=ctx.usage``); ``UsageLimits``; ``run_stream`` with the
``SupportOutput`` shown while it arrives; ``message_history=`` for the customer's next question;
the card block answered later (``DeferredToolResults``) by another process.

Here, following docs/pydantic_ai.md: ``ReActAgent(output_schema=SupportOutput, instruction=fn)``,
the deps as the run option ``"deps"`` (read by tools through ``adk.ToolContext``, by the
instruction through ``ctx.options``, by the schema's validator as ``info.context``),
``adk.ToolError`` for ``ModelRetry``, ``@adk.tool(require_approval=True)``, ``MCPToolset(
StdioServer(...))`` (``mcp_servers/bank_server.py``, a real process), ``adk.AgentTool`` for the
delegate, ``max_turns=`` and a ``before_model`` callback for the limits, ``stream_output`` for
``stream_output()``, ``result.messages`` for ``all_messages()``, every model an
``OpenAIChatModel`` talking to ``tests/openai_server.py`` (one scripted reply per request, in the
order the run makes them), the pause kept in SQLite and resumed by this file run as a script.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, TypeAdapter, ValidationInfo, model_validator

import adk
from adk import Message, Runner, Usage
from adk.callbacks import Callbacks, ModelRequest
from adk.mcp import MCPToolset, StdioServer
from prebuilt import OutputRejected, ReActAgent, stream_output

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run as a script too (the process that resumes)

from app_processes import resume_as_process  # noqa: E402
from app_wire import wire_server  # noqa: E402
from conftest import sqlite_store, wire_model  # noqa: E402
from openai_server import Call, OpenAIServer  # noqa: E402
from openai_server import Reply as Wire  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

BANK_SERVER = HERE / "mcp_servers" / "bank_server.py"


# -- the app ---------------------------------------------------------------------------------------


@dataclass
class DatabaseConn:
    """The bank's database: the customers are fixed, the blocked cards a file (so a process that
    resumes the run blocks them where the test reads them)."""

    blocked_file: Path

    def customer_name(self, customer_id: int) -> str:
        return {123: "John"}[customer_id]

    def balance_cents(self, customer_id: int, include_pending: bool) -> int:
        return 12345 + (-2500 if include_pending else 0)

    def cards(self, customer_id: int) -> list[str]:
        return ["4321", "8765"]

    def block(self, last4: str) -> None:
        with self.blocked_file.open("a") as f:
            f.write(last4 + "\n")

    def blocked(self) -> list[str]:
        if not self.blocked_file.exists():
            return []
        return self.blocked_file.read_text().split()


@dataclass
class SupportDependencies:  # deps_type=SupportDependencies
    customer_id: int
    db: DatabaseConn


def deps(ctx: adk.ToolContext) -> SupportDependencies:
    """ctx.deps, typed (docs/pydantic_ai.md's helper)."""
    found: SupportDependencies = ctx.run_context.options["deps"]
    return found


class SupportOutput(BaseModel):  # output_type=SupportOutput
    support_advice: str = Field(description="Advice returned to the customer")
    block_card: bool = Field(description="Whether to block their card or not")
    risk: int = Field(description="Risk level of query", ge=0, le=10)

    @model_validator(mode="after")
    def addresses_the_customer(self, info: ValidationInfo) -> SupportOutput:
        # @agent.output_validator reading ctx.deps: the run options are the validation context
        # (stream_output is given them too), and ModelRetry is adk.ToolError here as in tools.
        # Built by hand (SupportOutput(...)) there is no context: nothing to check against.
        if info.context is None:
            return self
        found: SupportDependencies = info.context["deps"]
        name = found.db.customer_name(found.customer_id)
        if name not in self.support_advice:
            raise adk.ToolError(f"address the customer by name ({name})")
        return self


class FlightDetails(BaseModel):
    flight_number: str
    price_cents: int


@adk.tool
def customer_balance(include_pending: bool, ctx: adk.ToolContext) -> str:
    """Returns the customer's current account balance."""
    d = deps(ctx)
    cents = d.db.balance_cents(d.customer_id, include_pending)
    return f"${cents / 100:.2f}"


@adk.tool
def card_status(last4: str, ctx: adk.ToolContext) -> str:
    """Whether one of the customer's cards is active.

    Args:
        last4: The card's last four digits.
    """
    d = deps(ctx)
    cards = d.db.cards(d.customer_id)
    if last4 not in cards:
        raise adk.ToolError(f"no card ending {last4}; the customer's cards end {', '.join(cards)}")
    return "blocked" if last4 in d.db.blocked() else "active"


@adk.tool(require_approval=True)
def block_card(last4: str, ctx: adk.ToolContext) -> str:
    """Block one of the customer's cards. A person approves every block.

    Args:
        last4: The card's last four digits.
    """
    deps(ctx).db.block(last4)
    return f"card {last4} blocked"


def add_customer_name(ctx: adk.RunContext) -> str:  # @agent.instructions
    d: SupportDependencies = ctx.options["deps"]
    return (
        "You are a support agent in our bank, give the customer support and judge the risk "
        f"level of their query. The customer's name is {d.db.customer_name(d.customer_id)!r}."
    )


def build_app(model_url: str, callbacks: list[Callbacks] | None = None) -> ReActAgent:
    """The same agents in every process: a checkpoint holds state, not code."""
    flights = ReActAgent(
        "flight_booking",
        wire_model(model_url, name="flight-model"),
        instruction=lambda ctx: (
            "Find the cheapest flight on the route asked for, for "
            f"{ctx.options['deps'].db.customer_name(ctx.options['deps'].customer_id)}."
        ),
        description="Finds the cheapest flight on a route.",
        output_schema=FlightDetails,
    )
    return ReActAgent(
        "support",
        wire_model(model_url, name="support-model"),
        instruction=add_customer_name,
        tools=[
            customer_balance,
            card_status,
            block_card,
            MCPToolset(StdioServer(sys.executable, [str(BANK_SERVER)])),
            adk.AgentTool(flights),
        ],
        output_schema=SupportOutput,
        callbacks=callbacks or [],
    )


def calls(*made: tuple[str, dict[str, Any], str], usage: tuple[int, int] = (11, 7)) -> Wire:
    return Wire(tool_calls=[Call(n, json.dumps(a), id=i) for n, a, i in made], usage=usage)


def answer(advice: str, block: bool, risk: int, usage: tuple[int, int] = (11, 7)) -> Wire:
    text = json.dumps({"support_advice": advice, "block_card": block, "risk": risk})
    return Wire(text=text, usage=usage)


def tool_results(body: dict[str, Any]) -> dict[str, str]:
    """What a request told the model each tool call returned, by call id."""
    return {m["tool_call_id"]: m["content"] for m in body["messages"] if m["role"] == "tool"}


# -- fixtures --------------------------------------------------------------------------------------


llm = wire_server()


@pytest.fixture
def support(tmp_path: Path) -> SupportDependencies:
    return SupportDependencies(customer_id=123, db=DatabaseConn(tmp_path / "blocked.txt"))


# -- the app end to end ----------------------------------------------------------------------------


async def test_deps_retries_mcp_and_a_validated_answer(
    llm: OpenAIServer, support: SupportDependencies, tmp_path: Path
) -> None:
    llm.script(
        calls(
            ("customer_balance", {"include_pending": True}, "b1"),
            ("card_status", {"last4": "9999"}, "s1"),
            ("exchange_rate", {"currency": "CHF"}, "x1"),
            usage=(100, 10),
        ),
        calls(
            ("card_status", {"last4": "4321"}, "s2"),
            ("exchange_rate", {"currency": "EUR"}, "x2"),
            usage=(200, 20),
        ),
        answer("Your balance is $98.45; card 4321 is active.", False, 1, usage=(300, 30)),
        answer("John, your balance is $98.45; card 4321 is active.", False, 1, usage=(400, 40)),
    )
    async with Runner(build_app(llm.base_url)) as runner:
        result = await runner.invoke("What is my balance?", options={"deps": support})

    assert result.output == SupportOutput(
        support_advice="John, your balance is $98.45; card 4321 is active.",
        block_card=False,
        risk=1,
    )
    # The instruction function read the deps: the customer's name in every request.
    for body in llm.bodies:
        assert body["messages"][0]["role"] == "system"
        assert "The customer's name is 'John'." in body["messages"][0]["content"]
    # ModelRetry's message from a tool and the MCP server's error: the model read both, and
    # corrected its calls.
    assert tool_results(llm.bodies[1]) == {
        "b1": "$98.45",
        "s1": "Error: no card ending 9999; the customer's cards end 4321, 8765",
        "x1": "Error: tool 'exchange_rate' failed: the bank does not trade CHF; "
        "it trades EUR, GBP, JPY",
    }
    assert tool_results(llm.bodies[2])["s2"] == "active"
    assert tool_results(llm.bodies[2])["x2"] == "1.08"
    # The output validator's retry: the model read why, as the last message of its next request.
    retry = llm.bodies[3]["messages"][-1]
    assert retry["role"] == "user"
    assert retry["content"].startswith(
        "Your answer does not match the required SupportOutput JSON schema: "
        "address the customer by name (John)."
    )
    # result.usage(): every call, the rejected answer's included.
    assert result.usage == Usage(input_tokens=1000, output_tokens=100, total_tokens=1100)


async def test_the_answer_streams_as_partial_support_outputs(
    llm: OpenAIServer, support: SupportDependencies
) -> None:
    llm.script(
        answer("Your card is fine.", False, 2),  # the validator sends it back
        # A partial validates once every required field has arrived (as in Pydantic AI, whose
        # partial validation of a model also wants them): this answer gives the advice last.
        Wire(
            text='{"block_card": false, "risk": 2, "support_advice": "John, keep your card safe."}'
        ),
    )
    partials: list[list[SupportOutput]] = []
    final: list[SupportOutput] = []
    rejected: list[str] = []
    runner = Runner(build_app(llm.base_url), enable_streaming=True)
    async with runner:
        # agent.run_stream(...) / result.stream_output(): the run options are the validation
        # context, as the agent validates with them.
        async for event in runner.run("Is my card safe?", options={"deps": support}):
            output = event.output
            if output is not None and output.stream is not None:
                shown = stream_output(output.stream, SupportOutput, context={"deps": support})
                partials.append([p async for p in shown])
            elif output is not None and isinstance(output.custom, OutputRejected):
                rejected.append(output.custom.problem)
            elif output is not None and isinstance(output.custom, SupportOutput):
                final.append(output.custom)
    # The rejected answer never validated against the deps: nothing of it was shown.
    assert partials[0] == []
    assert rejected == ["address the customer by name (John)"]
    # The retry's answer: shown as it arrived (the advice growing), ending in the final one.
    advice = [p.support_advice for p in partials[1]]
    assert len(advice) > 2 and all(a.startswith("John") for a in advice)
    assert advice == sorted(advice, key=len)
    assert (
        partials[1][-1]
        == final[0]
        == SupportOutput(support_advice="John, keep your card safe.", block_card=False, risk=2)
    )


async def test_delegation_to_the_flight_agent_sums_usage(
    llm: OpenAIServer, support: SupportDependencies
) -> None:
    llm.script(
        calls(("flight_booking", {"request": "SFO to ANC on 2027-01-05"}, "f1"), usage=(100, 10)),
        Wire(text='{"flight_number": "AK 456", "price_cents": 18900}', usage=(30, 5)),
        answer("John, the cheapest flight is AK 456 at $189.", False, 0, usage=(200, 20)),
    )
    async with Runner(build_app(llm.base_url)) as runner:
        result = await runner.invoke("Book me SFO to ANC.", options={"deps": support})
    assert isinstance(result.output, SupportOutput)
    assert "AK 456" in result.output.support_advice
    # The delegate's model got the request, and its instruction read the caller's deps
    # (deps=ctx.deps); its validated answer reached the support model.
    assert llm.bodies[1]["messages"][0] == {
        "role": "system",
        "content": "Find the cheapest flight on the route asked for, for John.",
    }
    assert [m["content"] for m in llm.bodies[1]["messages"] if m["role"] == "user"] == [
        "SFO to ANC on 2027-01-05"
    ]
    assert tool_results(llm.bodies[2]) == {"f1": '{"flight_number":"AK 456","price_cents":18900}'}
    # usage=ctx.usage: the delegate's call counts in the run's usage.
    assert result.usage == Usage(input_tokens=330, output_tokens=35, total_tokens=365)


class UsageLimitExceeded(Exception):
    pass


class TokenLimit(Callbacks):
    """UsageLimits(total_tokens_limit=): checked before each request, the delegate's included."""

    def __init__(self, total_tokens_limit: int) -> None:
        super().__init__()
        self.total_tokens_limit = total_tokens_limit

    def before_model(self, ctx: adk.RunContext, request: ModelRequest) -> None:
        if ctx.usage is not None and ctx.usage.total_tokens > self.total_tokens_limit:
            raise UsageLimitExceeded(
                f"Exceeded the total_tokens_limit of {self.total_tokens_limit} "
                f"(total_tokens={ctx.usage.total_tokens})"
            )


async def test_usage_limits(llm: OpenAIServer, support: SupportDependencies) -> None:
    delegate = calls(("flight_booking", {"request": "SFO to ANC"}, "f1"), usage=(100, 10))
    flight = Wire(text='{"flight_number": "AK 456", "price_cents": 18900}', usage=(30, 5))

    # UsageLimits(request_limit=2): the support agent's call and the delegate's; the third is
    # not made.
    llm.script(delegate, flight)
    async with Runner(build_app(llm.base_url)) as runner:
        with pytest.raises(adk.MaxTurnsExceeded) as over:
            await runner.invoke("Book me SFO to ANC.", options={"deps": support}, max_turns=2)
    assert (over.value.max_turns, over.value.agent_name) == (2, "support")
    assert len(llm.requests) == 2
    # What the failed run cost (UsageLimitExceeded carries no usage in Pydantic AI).
    assert over.value.usage == Usage(input_tokens=130, output_tokens=15, total_tokens=145)

    # UsageLimits(total_tokens_limit=120): the delegate's tokens push the run past it.
    llm.requests.clear()
    llm.script(delegate, flight)
    app = build_app(llm.base_url, callbacks=[TokenLimit(120)])
    async with Runner(app) as runner:
        with pytest.raises(adk.RunError) as failed:
            await runner.invoke("Book me SFO to ANC.", options={"deps": support})
    assert isinstance(failed.value.__cause__, UsageLimitExceeded)
    assert (
        str(failed.value.__cause__) == "Exceeded the total_tokens_limit of 120 (total_tokens=145)"
    )
    assert len(llm.requests) == 2


async def test_the_conversation_goes_on_with_the_previous_messages(
    llm: OpenAIServer, support: SupportDependencies
) -> None:
    llm.script(
        calls(("customer_balance", {"include_pending": False}, "b1")),
        answer("Your balance is $123.45.", False, 0),  # sent back: no name
        answer("John, your balance is $123.45.", False, 0),
        answer("John, with pending payments it is $98.45.", False, 0),
    )
    messages = TypeAdapter(list[Message])  # ModelMessagesTypeAdapter
    async with Runner(build_app(llm.base_url)) as runner:
        first = await runner.invoke("What is my balance?", options={"deps": support})
        stored = messages.dump_json(first.messages)  # all_messages_json(), to a database row
        history = messages.validate_json(stored)
        second = await runner.invoke(
            [*history, Message.user("And with pending payments?")],  # message_history=history
            options={"deps": support},
        )
    assert isinstance(second.output, SupportOutput)
    assert second.output.support_advice == "John, with pending payments it is $98.45."
    # The next run's request held the first run's conversation, the rejected answer left out.
    said = [(m["role"], m.get("content")) for m in llm.bodies[-1]["messages"]]
    assert said[0][0] == "system"
    assert said[1:] == [
        ("user", "What is my balance?"),
        ("assistant", ""),
        ("tool", "$123.45"),
        (
            "assistant",
            json.dumps(
                {"support_advice": "John, your balance is $123.45.", "block_card": False, "risk": 0}
            ),
        ),
        ("user", "And with pending payments?"),
    ]
    # new_messages(): this run's, after the history it was given.
    assert [m.role.value for m in second.messages[len(history) :]] == ["user", "assistant"]


async def test_a_card_block_approved_later_in_another_process(
    llm: OpenAIServer, support: SupportDependencies, tmp_path: Path
) -> None:
    llm.script(
        calls(("card_status", {"last4": "4321"}, "s1"), usage=(100, 10)),
        calls(("block_card", {"last4": "4321"}, "k1"), usage=(200, 20)),
    )
    async with Runner(build_app(llm.base_url), checkpoint_store=sqlite_store(tmp_path)) as runner:
        paused = await runner.invoke("I lost my card ending 4321!", options={"deps": support})
    # DeferredToolRequests.approvals: the call waiting for a person, as the model made it.
    assert paused.interrupt is not None and paused.checkpoint_id is not None
    (point,) = paused.interrupt.points
    assert (point.info["tool"], point.info["arguments"]) == ("block_card", {"last4": "4321"})
    assert support.db.blocked() == []  # nothing ran yet
    assert paused.usage == Usage(input_tokens=300, output_tokens=30, total_tokens=330)

    # DeferredToolResults(approvals={...: True}), in another process over the same SQLite file,
    # with the deps given again (they are not saved at the pause).
    llm.script(answer("John, your card 4321 is blocked.", True, 8, usage=(400, 40)))
    seen = await resume_as_process(__file__, llm.base_url, tmp_path, paused.checkpoint_id, True)
    assert support.db.blocked() == ["4321"]
    assert seen["output"] == {
        "support_advice": "John, your card 4321 is blocked.",
        "block_card": True,
        "risk": 8,
    }
    assert seen["interrupt"] is None
    # The whole run's usage, the calls before the pause included.
    assert seen["usage"] == {
        **Usage(input_tokens=700, output_tokens=70, total_tokens=770).model_dump()
    }
    assert tool_results(llm.bodies[-1])["k1"] == "card 4321 blocked"


# -- the process that resumes ----------------------------------------------------------------------


async def resume_elsewhere(model_url: str, files: Path, order: dict[str, Any]) -> None:
    """The other process: the same app, the same deps, over the same checkpoint file."""
    again = SupportDependencies(customer_id=123, db=DatabaseConn(files / "blocked.txt"))
    async with Runner(build_app(model_url), checkpoint_store=sqlite_store(files)) as runner:
        done = await runner.invoke_resume(
            order["checkpoint_id"], order["resume"], options={"deps": again}
        )
    usage = done.usage
    print(
        json.dumps(
            {
                "output": done.output.model_dump() if done.output is not None else None,
                "interrupt": None if done.interrupt is None else done.interrupt.checkpoint_id,
                "usage": None if usage is None else usage.model_dump(),
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(resume_elsewhere(sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])))
