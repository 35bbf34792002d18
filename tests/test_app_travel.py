"""A travel-concierge app ported from Google ADK (``google.adk``), end to end over real wires.

The Google ADK app, shaped like its travel-concierge sample:

- ``concierge``, the root ``LlmAgent``, with ``sub_agents=[inspiration, planner]`` it transfers to
  (and they back to it), a ``remember_trip`` tool writing ``tool_context.state``, and the
  ``weather`` specialist as an ``AgentTool`` (``output_schema=Forecast``, ``output_key``); its
  ``before_model_callback`` refuses a request carrying a passport number without asking the model;
- ``inspiration``, whose tools come from an ``McpToolset`` over stdio
  (``mcp_servers/travel_server.py``, a real process);
- ``planner``, a ``SequentialAgent``: a ``LoopAgent`` in which ``drafter`` writes an itinerary
  (``output_key="draft"``, an instruction reading ``{destination}``, ``{forecast}`` and the
  checker's ``{feedback?}``) and ``checker`` sends it back or calls ``exit_loop``
  (``escalate`` and ``skip_summarization``), then ``booker``, whose ``before_tool_callback``
  edits ``hold_flight``'s args (the company's cabin class, the traveller's name) and blocks a
  hotel above the budget, and whose ``on_tool_error_callback`` turns a failed hold into a status
  the model can act on; its ``ask_travel_manager`` is a ``LongRunningFunctionTool`` and its
  ``book_hotel`` needs the traveller's confirmation (``require_confirmation=True``), both
  answered later, each from another process.

Here, following docs/google_adk.md: ``ReActAgent(sub_agents=)``, ``adk.AgentTool``,
``MCPToolset(StdioServer(...))``, ``adk.SequentialAgent``/``adk.LoopAgent``, ``ctx.break_loop()``
with ``return_directly=["exit_loop"]``, ``Callbacks(before_model=..., before_tool=...)`` on the
agents (the args edited by assigning ``call.arguments``; ``after_tool`` for the error callback),
``raise adk.Interrupt`` for the long-running tool, ``@adk.tool(require_approval=True)``, every
model an ``OpenAIChatModel`` talking to ``tests/openai_server.py`` (one scripted reply per
request, in the order the run makes them), the pause kept in SQLite and resumed by this file run
as a script.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import adk
from adk import Message, Runner, Usage
from adk.callbacks import Callbacks, ModelRequest
from adk.mcp import MCPToolset, StdioServer
from adk.testing import simplify_events
from prebuilt import ReActAgent

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run as a script too (the process that resumes)

from app_processes import resume_as_process  # noqa: E402
from app_wire import asker, calls, says, wire_server  # noqa: E402
from conftest import sqlite_store, wire_model  # noqa: E402
from openai_server import OpenAIServer  # noqa: E402
from openai_server import Reply as Wire  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

TRAVEL_SERVER = HERE / "mcp_servers" / "travel_server.py"


# -- the app ---------------------------------------------------------------------------------------


class Forecast(BaseModel):
    city: str
    high_c: int
    summary: str


PASSPORT = re.compile(r"\b[A-Z]{1,2}\d{6,8}\b")


def guard_input(ctx: adk.RunContext, request: ModelRequest) -> Message | None:
    """Google ADK's ``before_model_callback`` on the root: a request whose user text carries a
    passport number is answered here, and the model never sees it."""
    for message in request.messages:
        if message.role == "user" and PASSPORT.search(message.content):
            return Message.assistant("Please don't send passport numbers here.")
    return None


def remember_trip(
    origin: str, destination: str, date: str, nights: int, ctx: adk.ToolContext
) -> str:
    """Remember the trip the traveller asked for.

    Args:
        origin: The airport leaving from.
        destination: The city to visit.
        date: The day of departure, YYYY-MM-DD.
        nights: How many nights to stay.
    """
    # Google ADK: tool_context.state["destination"] = destination
    ctx.session["destination"] = destination
    ctx.session["nights"] = nights
    ctx.session["trip"] = {"origin": origin, "date": date}
    return f"noted: {origin} to {destination} on {date}, {nights} nights"


def exit_loop(ctx: adk.ToolContext) -> str:
    """Call this when the itinerary needs no more changes."""
    ctx.break_loop()  # Google ADK: tool_context.actions.escalate = True
    return "itinerary approved"


def request_changes(feedback: str, ctx: adk.ToolContext) -> str:
    """Send the itinerary back with what to change.

    Args:
        feedback: What the drafter should change.
    """
    ctx.session["feedback"] = feedback
    return "sent back"


def build_app(model_url: str, ledger: Path, held: list[dict[str, Any]]) -> ReActAgent:
    """The same agents in every process: a checkpoint holds state, not code. ``ledger`` is the
    payment provider (a file each payment appends a line to), ``held`` the flights held."""

    def model() -> adk.OpenAIChatModel:
        return wire_model(model_url, name="gemini-2.0-flash")

    def hold_flight(
        origin: str, destination: str, date: str, flight: str, cabin: str, passenger: str = ""
    ) -> str:
        """Hold a seat on a flight.

        Args:
            origin: The airport leaving from.
            destination: The airport flying to.
            date: The day, YYYY-MM-DD.
            flight: The flight number.
            cabin: economy, premium or business.
            passenger: The traveller's full name.
        """
        if not flight.startswith(("TP", "LH")):
            raise LookupError(f"the airline has no flight {flight}")
        held.append(
            {
                "origin": origin,
                "destination": destination,
                "date": date,
                "flight": flight,
                "cabin": cabin,
                "passenger": passenger,
            }
        )
        return f"held {flight} ({cabin}) for {passenger}"

    # Google ADK: FunctionTool(book_hotel, require_confirmation=True)
    @adk.tool(require_approval=True)
    def book_hotel(city: str, nights: int, total_cents: int) -> str:
        """Book and pay a hotel.

        Args:
            city: Where.
            nights: How many nights.
            total_cents: The price of the stay, in cents.
        """
        with ledger.open("a", encoding="utf-8") as file:
            file.write(json.dumps({"city": city, "nights": nights, "cents": total_cents}) + "\n")
        return f"booked {nights} nights in {city} for {total_cents / 100:.2f} EUR"

    def ask_travel_manager(purpose: str, amount_cents: int, ctx: adk.ToolContext) -> Any:
        """Ask the travel manager to approve a trip's spend; the answer comes later.

        Args:
            purpose: What the money is for.
            amount_cents: How much, in cents.
        """
        # Google ADK: LongRunningFunctionTool(ask_travel_manager), whose first return is the
        # pending ticket and whose answer the client sends later as the function's response.
        if ctx.resume is None:
            ticket = {"status": "pending", "ticket": f"T-{ctx.tool_call_id}", "purpose": purpose}
            raise adk.Interrupt(ticket)
        return ctx.resume.data  # the manager's answer, as the model will read it

    def booking_policy(ctx: adk.ToolContext, call: adk.ToolCall) -> dict[str, Any] | None:
        """Google ADK's ``before_tool_callback(tool, args, tool_context)``: edits a hold's args
        in place (the company books economy, under the traveller's own name) and blocks a hotel
        above the budget, returning the result the tool would have."""
        args = json.loads(call.arguments)
        if call.name == "hold_flight":
            args["cabin"] = ctx.session["user:cabin"]
            args["passenger"] = ctx.session["user:name"]
            call.arguments = json.dumps(args)
            return None
        if call.name == "book_hotel" and args["total_cents"] > ctx.session["user:budget_cents"]:
            return {"status": "blocked", "reason": "above the traveller's budget"}
        return None

    def airline_down(ctx: adk.ToolContext, call: adk.ToolCall, result: Any) -> Any:
        """Google ADK's ``on_tool_error_callback``: a hold that failed is told to the model as
        a status it can act on, not the exception's text."""
        if call.name == "hold_flight" and isinstance(result, adk.ToolResult) and result.is_error:
            return {"status": "not held", "retry": "pick another flight"}
        return None

    weather = ReActAgent(
        "weather",
        model(),
        instruction="You forecast the weather of a city for a travel date.",
        description="Forecasts a destination's weather.",
        output_schema=Forecast,
        output_key="forecast",
    )
    inspiration = ReActAgent(
        "inspiration",
        model(),
        instruction="You suggest sights in {destination}. Transfer back to the concierge after.",
        description="Suggests what to see at the destination.",
        tools=[
            MCPToolset(
                StdioServer(sys.executable, [str(TRAVEL_SERVER)]),
                tool_filter=["points_of_interest"],
            )
        ],
        output_key="sights",
    )
    drafter = ReActAgent(
        "drafter",
        model(),
        instruction=(
            "You draft a {nights}-night itinerary for {destination}. Weather: {forecast}. "
            "Feedback on the last draft: {feedback?}"
        ),
        output_key="draft",
    )
    checker = ReActAgent(
        "checker",
        model(),
        instruction="You check this itinerary: {draft}. Call exit_loop when it is good.",
        tools=[exit_loop, request_changes],
        return_directly=["exit_loop"],
    )
    booker = ReActAgent(
        "booker",
        model(),
        instruction="You hold the flight and book the hotel for {destination}.",
        tools=[hold_flight, ask_travel_manager, book_hotel],
        callbacks=[Callbacks(before_tool=booking_policy, after_tool=airline_down)],
    )
    planner = adk.SequentialAgent(
        "planner",
        [adk.LoopAgent("refine", [drafter, checker], max_iterations=3), booker],
        description="Plans the itinerary and books it.",
    )
    return ReActAgent(
        "concierge",
        model(),
        instruction="You are {user:name}'s travel concierge. Route to a specialist.",
        tools=[remember_trip, adk.AgentTool(weather)],
        sub_agents=[inspiration, planner],
        callbacks=[Callbacks(before_model=guard_input)],
    )


def to(agent: str, call_id: str) -> Wire:
    return calls(("transfer_to_agent", {"agent_name": agent}, call_id))


# -- fixtures --------------------------------------------------------------------------------------


llm = wire_server()


SESSION = {"user:name": "Ana Silva", "user:cabin": "economy", "user:budget_cents": 90000}


# -- the app end to end ----------------------------------------------------------------------------

TRIP = {"origin": "BER", "destination": "Lisbon", "date": "2027-05-01", "nights": 3}
BOOKER = "agent:concierge/agent:planner/agent:booker"
MANAGER_POINT = f"{BOOKER}/tool:ask_travel_manager#b2"
HOTEL_POINT = f"{BOOKER}/tool:book_hotel#b3"
HOTEL = {"city": "Lisbon", "nights": 3, "total_cents": 54000}
HOLD = {
    "origin": "BER",
    "destination": "LIS",
    "date": "2027-05-01",
    "flight": "TP541",
    "cabin": "business",
}


def plan_and_refine() -> list[Wire]:
    """The model's replies from the concierge's first call to the checker's exit_loop."""
    return [
        # concierge: notes the trip and asks the weather specialist, in one turn
        calls(
            ("remember_trip", TRIP, "c1"), ("weather", {"request": "Lisbon on 2027-05-01"}, "c2")
        ),
        says('{"city": "Lisbon", "high_c": 22, "summary": "sunny"}'),  # weather, nested
        to("inspiration", "c3"),
        # inspiration: the MCP server's sights, then an answer and back to the concierge
        calls(("points_of_interest", {"city": "Lisbon"}, "i1")),
        calls(
            ("transfer_to_agent", {"agent_name": "concierge"}, "i2"), text="See Belem and Alfama."
        ),
        to("planner", "c4"),
        says("Day 1: Alfama. Day 2: Belem. Day 3: rest."),  # drafter
        calls(("request_changes", {"feedback": "Add a day trip to Sintra."}, "k1")),  # checker
        says("Sent back for Sintra."),
        says("Day 1: Alfama. Day 2: Sintra. Day 3: Belem."),  # drafter again
        calls(("exit_loop", {}, "k2")),  # checker: escalate, and no summary after it
    ]


async def test_a_trip_is_planned_refined_held_and_booked_once_answered_from_other_processes(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "payments.jsonl"
    held: list[dict[str, Any]] = []
    llm.script(
        *plan_and_refine(),
        # booker: holds a business seat (the policy makes it economy), asks the travel manager
        # (long-running) and books the hotel (the traveller confirms), in one turn
        calls(
            ("hold_flight", HOLD, "b1"),
            ("ask_travel_manager", {"purpose": "Lisbon trip", "amount_cents": 72900}, "b2"),
            ("book_hotel", HOTEL, "b3"),
        ),
    )
    runner = Runner(build_app(llm.base_url, ledger, held), checkpoint_store=sqlite_store(tmp_path))
    paused = await runner.invoke(
        "Plan 3 nights in Lisbon from BER on 2027-05-01.", session=dict(SESSION)
    )
    await runner.aclose()

    # Who asked the model, in order (the weather specialist inside the concierge's tool call).
    assert [asker(body) for body in llm.bodies] == [
        "You are Ana Silva's travel concierge",
        "You forecast the weather of a city for a travel date",
        "You are Ana Silva's travel concierge",
        "You suggest sights in Lisbon",
        "You suggest sights in Lisbon",
        "You are Ana Silva's travel concierge",
        "You draft a 3-night itinerary for Lisbon",
        "You check this itinerary: Day 1: Alfama",
        "You check this itinerary: Day 1: Alfama",
        "You draft a 3-night itinerary for Lisbon",
        "You check this itinerary: Day 1: Alfama",
        "You hold the flight and book the hotel for Lisbon",
    ]
    # The drafter's second instruction read the checker's feedback and the forecast (JSON text).
    assert llm.bodies[9]["messages"][0]["content"] == (
        "You draft a 3-night itinerary for Lisbon. Weather: "
        '{"city": "Lisbon", "high_c": 22, "summary": "sunny"}. '
        "Feedback on the last draft: Add a day trip to Sintra."
    )
    assert llm.bodies[10]["messages"][0]["content"].startswith(
        "You check this itinerary: Day 1: Alfama. Day 2: Sintra."
    )
    # The events' authors and paths, as Google ADK's event.author and branch would tell them.
    lines = [
        re.sub(r"\[interrupt .*\]", "[interrupt]", line) for line in simplify_events(paused.events)
    ]
    assert [line for line in lines if "[tool" not in line and "[call" not in line] == [
        "concierge: [transfer -> inspiration]",
        "inspiration: See Belem and Alfama.",
        "inspiration: [transfer -> concierge]",
        "concierge: [transfer -> planner]",
        "drafter: Day 1: Alfama. Day 2: Belem. Day 3: rest.",
        "checker: Sent back for Sintra.",
        "drafter: Day 1: Alfama. Day 2: Sintra. Day 3: Belem.",
        "checker: [break_loop]",
        "booker: [interrupt]",  # its points below, in the order the calls paused
    ]
    by_agent = {event.agent_name: event.run_path for event in paused.events}
    assert by_agent["booker"] == (
        "concierge",
        "inspiration",
        "concierge",
        "planner",
        "refine",
        "booker",
    )
    assert "weather" not in by_agent  # the AgentTool's run is its own, not the caller's events

    # The callback edited the hold's args: the tool got economy and the traveller's name ...
    assert held == [{**HOLD, "cabin": "economy", "passenger": "Ana Silva"}]
    # ... while the call as the model made it is what the run recorded (Google ADK hands the
    # callback a copy of the args): the event, and so the history and the checkpoint.
    (booker_call,) = [
        e for e in paused.events if e.agent_name == "booker" and e.message and e.message.tool_calls
    ]
    assert [json.loads(c.arguments) for c in booker_call.message.tool_calls] == [  # type: ignore[union-attr]
        HOLD,
        {"purpose": "Lisbon trip", "amount_cents": 72900},
        HOTEL,
    ]
    session = paused.session
    assert session["destination"] == "Lisbon" and session["draft"].endswith("Day 3: Belem.")
    assert json.loads(session["forecast"]) == {"city": "Lisbon", "high_c": 22, "summary": "sunny"}
    # inspiration ended on its transfer call: no final response, so no output_key, as in
    # Google ADK (whose output_key takes an event that is_final_response(), with no calls)
    assert "sights" not in session
    assert paused.usage == Usage(input_tokens=120, output_tokens=60, total_tokens=180)
    assert paused.interrupt is not None
    assert {p.id: p.info for p in paused.interrupt.points} == {
        MANAGER_POINT: {"status": "pending", "ticket": "T-b2", "purpose": "Lisbon trip"},
        HOTEL_POINT: {
            "type": "approval",
            "tool": "book_hotel",
            "arguments": HOTEL,
            "tool_call_id": "b3",
        },
    }
    assert not ledger.exists()  # nothing paid yet

    # The manager answers first, from another process (Google ADK: the client sends the long-
    # running call's FunctionResponse): the hotel still waits, under the same checkpoint, and
    # no model is asked.
    decision = {"status": "approved", "approver": "Sean"}
    manager = await resume_as_process(
        __file__, llm.base_url, tmp_path, paused.checkpoint_id, {MANAGER_POINT: decision}
    )
    assert manager["points"] == [HOTEL_POINT] and manager["checkpoint_id"] == paused.checkpoint_id
    assert manager["events"] == [
        'booker: [tool ask_travel_manager] {"status":"approved","approver":"Sean"}',
        f"booker: [interrupt {HOTEL_POINT}]",
    ]
    assert len(llm.requests) == 12 and not ledger.exists()

    # The traveller confirms the hotel later, from a third process (Google ADK: a
    # ToolConfirmation sent as the response of adk_request_confirmation).
    llm.script(says("Booked: TP541 in economy and 3 nights in Lisbon."))
    done = await resume_as_process(
        __file__, llm.base_url, tmp_path, paused.checkpoint_id, {HOTEL_POINT: {"approved": True}}
    )
    assert done["points"] is None
    assert done["text"] == "Booked: TP541 in economy and 3 nights in Lisbon."
    assert done["events"] == [
        "booker: [tool book_hotel] booked 3 nights in Lisbon for 540.00 EUR",
        "booker: Booked: TP541 in economy and 3 nights in Lisbon.",
    ]
    assert manager["held"] == done["held"] == []  # the hold ran before the pause, not again
    assert [json.loads(line) for line in ledger.read_text().splitlines()] == [
        {"city": "Lisbon", "nights": 3, "cents": 54000}
    ]  # paid once
    # The whole turn's usage, the calls made before the pauses (in this process) included.
    assert Usage(**done["usage"]) == Usage(input_tokens=130, output_tokens=65, total_tokens=195)
    # The booker's last call read the three results against the calls as the model made them.
    last = llm.bodies[-1]["messages"]
    hold_call = last[-4]["tool_calls"][0]["function"]
    assert hold_call["name"] == "hold_flight" and json.loads(hold_call["arguments"]) == HOLD
    assert [(m["tool_call_id"], m["content"]) for m in last[-3:]] == [
        ("b1", "held TP541 (economy) for Ana Silva"),
        ("b2", '{"status":"approved","approver":"Sean"}'),
        ("b3", "booked 3 nights in Lisbon for 540.00 EUR"),
    ]
    assert done["checkpoints"] == []  # the resumed run finished: its checkpoint is gone


async def test_the_root_guard_answers_without_the_model(llm: OpenAIServer, tmp_path: Path) -> None:
    runner = Runner(build_app(llm.base_url, tmp_path / "payments.jsonl", []))
    result = await runner.invoke("Book Lisbon, my passport is X1234567.", session=dict(SESSION))
    await runner.aclose()
    assert result.text == "Please don't send passport numbers here."
    assert simplify_events(result.events) == ["concierge: Please don't send passport numbers here."]
    assert llm.requests == []  # the model never saw the passport number


async def test_a_hotel_above_the_budget_is_blocked_and_a_failed_hold_is_recovered_by_callbacks(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "payments.jsonl"
    held: list[dict[str, Any]] = []
    llm.script(
        *plan_and_refine(),
        calls(
            ("hold_flight", {**HOLD, "flight": "ZZ999"}, "b1"),
            ("book_hotel", {"city": "Lisbon", "nights": 3, "total_cents": 120000}, "b2"),
        ),
        says("That hotel is above your budget, and ZZ999 could not be held."),
    )
    runner = Runner(build_app(llm.base_url, ledger, held), checkpoint_store=sqlite_store(tmp_path))
    result = await runner.invoke(
        "Plan 3 nights in Lisbon from BER on 2027-05-01.", session=dict(SESSION)
    )
    await runner.aclose()
    # The before_tool blocked the hotel: no confirmation asked, nothing paid. The hold's tool
    # raised, and the after_tool (on_tool_error_callback) gave the model a status instead.
    assert result.interrupt is None
    assert result.text == "That hotel is above your budget, and ZZ999 could not be held."
    read = [(m["tool_call_id"], m["content"]) for m in llm.bodies[-1]["messages"][-2:]]
    assert sorted(read) == [
        ("b1", '{"status":"not held","retry":"pick another flight"}'),
        ("b2", '{"status":"blocked","reason":"above the traveller\'s budget"}'),
    ]
    assert held == [] and not ledger.exists()


# -- the process that resumes ----------------------------------------------------------------------


async def resume_elsewhere(model_url: str, files: Path, order: dict[str, Any]) -> None:
    """The other process: the same app over the same checkpoint file resumes the pause."""
    held: list[dict[str, Any]] = []
    store = sqlite_store(files)
    app = build_app(model_url, files / "payments.jsonl", held)
    async with Runner(app, checkpoint_store=store) as runner:
        done = await runner.invoke_resume(order["checkpoint_id"], order["resume"])
    usage = done.usage
    pause = done.interrupt
    print(
        json.dumps(
            {
                "text": done.text,
                "events": simplify_events(done.events),
                "points": None if pause is None else [p.id for p in pause.points],
                "checkpoint_id": done.checkpoint_id,
                "held": held,
                "usage": None if usage is None else usage.model_dump(),
                "checkpoints": [cp async for cp in store.ids()],
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(resume_elsewhere(sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])))
