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
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from pydantic import BaseModel, Field, TypeAdapter, ValidationInfo, model_validator

import adk
from adk import Message, Runner, Usage
from adk.callbacks import Callbacks, ModelRequest
from adk.mcp import MCPToolset, StdioServer
from prebuilt import OutputRejected, ReActAgent, stream_output

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run as a script too (the process that resumes)

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
        # @agent.output_validator reading ctx.deps, raising ModelRetry
        if info.context is None:  # stream_output given no context: nothing to check against
            return self
        found: SupportDependencies = info.context["deps"]
        name = found.db.customer_name(found.customer_id)
        if name not in self.support_advice:
            raise ValueError(f"address the customer by name ({name})")
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
        instruction="Find the cheapest flight on the route the customer asks for.",
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


@pytest_asyncio.fixture(loop_scope="module")
async def llm() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer() as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh(llm: OpenAIServer) -> None:
    llm.requests.clear()


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
        support_advice="John, your balance is $98.45; card 4321 is active.", block_card=False, risk=1
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
        "x1": "Error: Error executing tool exchange_rate: the bank does not trade CHF; "
        "it trades EUR, GBP, JPY",
    }
    assert tool_results(llm.bodies[2])["s2"] == "active"
    assert tool_results(llm.bodies[2])["x2"] == "1.08"
    # The output validator's retry: the model read why, as the last message of its next request.
    retry = llm.bodies[3]["messages"][-1]
    assert retry["role"] == "user"
    assert "address the customer by name (John)" in retry["content"]
    # result.usage(): every call, the rejected answer's included.
    assert result.usage == Usage(input_tokens=1000, output_tokens=100, total_tokens=1100)
