"""pyadk demo: a travel desk supervisor with three workers that use tools.

    python examples/demo.py                       # offline: scripted model replies
    OPENAI_API_KEY=... python examples/demo.py    # a real model (PYADK_MODEL, default gpt-4o-mini)
    OPENAI_BASE_URL=http://localhost:11434 PYADK_MODEL=qwen3 python examples/demo.py "..."

The supervisor (``travel_desk``) hands each part of the request to a worker with the
``transfer_to_agent`` tool; each worker uses its tool, answers, and control returns to the
supervisor, which finally answers the traveller. The event stream is printed as it happens: who
speaks (text streams in), which tools are called with what, what they return, and the transfers.

Without ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` the models are ``adk.testing.ScriptedModel``s that
replay a fixed conversation for the default question, so the demo runs anywhere, instantly.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any

import adk
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent, Supervisor

QUESTION = (
    "I'm going to Lisbon next week with 200 euros. What will the weather be like, how much is "
    "that in US dollars, and please put the trip in my itinerary."
)


# -- tools ---------------------------------------------------------------------------------------
@adk.tool
def get_weather(city: str) -> str:
    """Get next week's weather forecast for a city.

    Args:
        city: The city, e.g. "Lisbon".
    """
    forecasts = {"lisbon": "21 C and sunny", "oslo": "4 C with rain", "rome": "24 C and clear"}
    return forecasts.get(city.strip().lower(), "18 C and partly cloudy")


@adk.tool
def convert_currency(amount: float, from_currency: str, to_currency: str) -> str:
    """Convert an amount of money between currencies (EUR, USD, GBP, JPY).

    Args:
        amount: How much money.
        from_currency: The currency code to convert from, e.g. "EUR".
        to_currency: The currency code to convert to, e.g. "USD".
    """
    per_euro = {"EUR": 1.0, "USD": 1.08, "GBP": 0.85, "JPY": 162.0}
    source, target = from_currency.upper(), to_currency.upper()
    if source not in per_euro or target not in per_euro:
        raise adk.ToolError(f"unknown currency; known: {', '.join(per_euro)}")
    return f"{amount:.2f} {source} = {amount / per_euro[source] * per_euro[target]:.2f} {target}"


@adk.tool
def add_to_itinerary(item: str, ctx: adk.ToolContext) -> str:
    """Add an entry to the traveller's itinerary.

    Args:
        item: The entry, e.g. "Trip to Lisbon next week".
    """
    itinerary = [*ctx.session.get("itinerary", []), item]
    ctx.session["itinerary"] = itinerary
    return f"added as entry #{len(itinerary)}"


# -- agents --------------------------------------------------------------------------------------
def build_app(models: dict[str, Any]) -> adk.Agent:
    """The supervisor and its workers; ``models`` maps agent name to its chat model."""
    weather = ReActAgent(
        "weather",
        models["weather"],
        description="Knows weather forecasts for cities.",
        instruction="You answer questions about the weather. Use get_weather. Be brief.",
        tools=[get_weather],
    )
    currency = ReActAgent(
        "currency",
        models["currency"],
        description="Converts amounts of money between currencies.",
        instruction="You convert money with convert_currency. Be brief.",
        tools=[convert_currency],
    )
    itinerary = ReActAgent(
        "itinerary",
        models["itinerary"],
        description="Keeps the traveller's itinerary.",
        instruction="You record trips with add_to_itinerary. Be brief.",
        tools=[add_to_itinerary],
    )
    desk = ReActAgent(
        "travel_desk",
        models["travel_desk"],
        description="Front desk of a travel agency.",
        instruction=(
            "You run a travel desk. Hand each part of the traveller's request to the right agent "
            "with transfer_to_agent, one at a time. When every part is handled, answer the "
            "traveller with a short summary."
        ),
    )
    return Supervisor(desk, [weather, currency, itinerary])


def _transfer(agent: str, text: str) -> Reply:
    return Reply(text=text, tool_calls=[tool_call("transfer_to_agent", {"agent_name": agent})])


def _report(template: str) -> Callable[[list[adk.Message]], str]:
    """A scripted answer built from the latest tool result, so the demo shows real data flow."""

    def reply(messages: list[adk.Message]) -> str:
        result = next(m.content for m in reversed(messages) if m.role == "tool")
        return template.format(result=result)

    return reply


def scripted_models() -> dict[str, Any]:
    def model(*script: Any) -> ScriptedModel:
        return ScriptedModel(script, chunk_size=6)

    return {
        "travel_desk": model(
            _transfer("weather", "Let me check the forecast first."),
            _transfer("currency", "Now the money."),
            _transfer("itinerary", "And I'll note the trip."),
            "All set! Lisbon will be 21 C and sunny next week, your 200 EUR is about 216.00 USD, "
            "and the trip is in your itinerary. Boa viagem!",
        ),
        "weather": model(
            Reply(tool_calls=[tool_call("get_weather", {"city": "Lisbon"})]),
            _report("Next week in Lisbon: {result}."),
        ),
        "currency": model(
            Reply(
                tool_calls=[
                    tool_call(
                        "convert_currency",
                        {"amount": 200, "from_currency": "EUR", "to_currency": "USD"},
                    )
                ]
            ),
            _report("{result}."),
        ),
        "itinerary": model(
            Reply(tool_calls=[tool_call("add_to_itinerary", {"item": "Trip to Lisbon next week"})]),
            _report("Your trip to Lisbon next week is in the itinerary ({result})."),
        ),
    }


def live_models() -> dict[str, Any]:
    model = adk.OpenAIChatModel(os.environ.get("PYADK_MODEL", "gpt-4o-mini"))
    return dict.fromkeys(("travel_desk", "weather", "currency", "itinerary"), model)


# -- printing the event stream -------------------------------------------------------------------
class _Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text


async def show(events: Any, style: _Style) -> adk.Message | None:
    """Print events as they arrive; returns the last assistant message."""
    last: adk.Message | None = None
    async for event in events:
        who = style(f"[{event.agent_name}]", "1;36")
        output = event.output
        if output is not None and output.role == "assistant":
            if output.stream is not None:
                started = False
                async for chunk in output.stream:
                    if chunk.content:
                        if not started:
                            print(f"{who} ", end="")
                            started = True
                        print(chunk.content, end="", flush=True)
                if started:
                    print()
                message = await output.stream.collect()
            else:
                message = output.message
                if message is not None and message.content:
                    print(f"{who} {message.content}")
            assert message is not None
            for call in message.tool_calls:
                print(f"{who} {style('calls', '33')} {call.name}({call.arguments})")
            last = message
        elif output is not None and output.message is not None:
            message = output.message
            if message.name == "transfer_to_agent" and not message.metadata.get("is_error"):
                continue  # the hand-over line below says it
            print(f"{who} {style(f'{message.name} returned', '32')} {message.content}")
        action = event.action
        if action is not None and action.transfer_to:
            print(style(f"--- {event.agent_name} hands over to {action.transfer_to} ---", "35"))
        if event.error is not None:
            print(f"{who} {style('error', '31')} {event.error}")
    return last


async def main(argv: list[str]) -> int:
    live = bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))
    question = " ".join(argv) or QUESTION
    style = _Style(sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    if live:
        models = live_models()
        print(f"(model: {os.environ.get('PYADK_MODEL', 'gpt-4o-mini')})")
    else:
        models = scripted_models()
        print(
            "(offline: scripted model replies; set OPENAI_API_KEY or OPENAI_BASE_URL for a real one)"
        )
    print(f"{style('[user]', '1;34')} {question}")
    runner = adk.Runner(build_app(models), enable_streaming=True)
    session = adk.Session()
    try:
        async with contextlib.aclosing(runner.run(question, session=session)) as events:
            await show(events, style)
    finally:
        for model in {id(m): m for m in models.values()}.values():
            close = getattr(model, "aclose", None)
            if close is not None:
                await close()
    print(f"\nitinerary: {session.get('itinerary', [])}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
