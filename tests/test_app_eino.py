"""A travel-research service ported from CloudWeGo Eino ADK (Go), end to end over real wires.

The Go service, as a user of Eino's ADK built it:

- ``concierge``, a ``ChatModelAgent`` whose ``remember_trip`` tool stores the trip with
  ``adk.AddSessionValues`` and which hands the request over with ``NewTransferToAgentAction`` to its
  sub-agent (``adk.SetSubAgents``) ``trip``;
- ``trip``, a ``SequentialAgent``: ``research``, a ``planexecute.New`` (planner, executor,
  replanner) whose executor's tools come from an MCP server over stdio (``mcp_servers/
  travel_server.py``, a real process) plus ``book_flight``, which asks a person first with
  ``tool.StatefulInterrupt`` (the hold as its state); then ``polish``, a ``LoopAgent`` in which
  ``writer`` drafts the itinerary (``OutputKey``) and ``critic``, a hand-written ``adk.Agent``
  reading the draft with ``adk.GetSessionValue``, sends it back or ends the loop with
  ``adk.NewBreakLoopAction``;
- the caller starts it with ``runner.Query(ctx, q, adk.WithSessionValues(...),
  adk.WithCheckPointID(id))`` and reads the ``AsyncIterator[*AgentEvent]`` with ``iter.Next()``,
  checking ``event.Err``; a paused run's checkpoint is in a ``CheckPointStore`` (the hold's type
  given to ``schema.RegisterName``) and another replica resumes it with
  ``runner.ResumeWithParams`` and the person's answer.

Here, following docs/eino.md: ``ReActAgent(sub_agents=)``, ``ctx.session``, ``PlanExecute`` with
``new_planner``/``new_executor``/``new_replanner``, ``MCPToolset(StdioServer(...))``,
``raise adk.Interrupt(info, state=...)`` with ``adk.register_type(Hold, name=...)``, a ``BaseAgent`` yielding an event with a message and a
``break_loop`` action, ``SQLiteCheckpointStore``, ``async for event in runner.run(...)``; every
model an ``OpenAIChatModel`` talking to ``tests/openai_server.py`` (one scripted reply per request,
in the order the run makes them); the pause resumed by this file run as a script.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import adk
from adk import AgentAction, AgentEvent, AgentInput, AgentOutput, Message, Runner, Usage
from adk.mcp import MCPToolset, StdioServer
from adk.testing import simplify_events
from prebuilt import PlanExecute, ReActAgent, new_executor, new_planner, new_replanner

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


class Hold(BaseModel):
    """What ``book_flight`` keeps while it waits for the person (Eino: the state given to
    ``tool.StatefulInterrupt``, a type registered with ``schema.RegisterName``)."""

    flight: str
    price_cents: int
    hold_id: str


# Eino: schema.RegisterName[*Hold]("travel_hold"). The name is what the checkpoint stores; without
# it the tag is module.QualName, which differs between this file imported by pytest
# (test_app_eino.Hold) and run as the resuming script (__main__.Hold).
adk.register_type(Hold, name="travel_hold")


def remember_trip(destination: str, date: str, ctx: adk.ToolContext) -> str:
    """Remember where and when the traveller goes.

    Args:
        destination: The city.
        date: The day of departure, YYYY-MM-DD.
    """
    # Eino: adk.AddSessionValues(ctx, map[string]any{"destination": destination, "date": date})
    ctx.session.update({"destination": destination, "date": date})
    return f"noted: {destination} on {date}"


class Critic(adk.BaseAgent):
    """A hand-written agent, as an Eino user writes one (``Run`` returning an iterator): it
    reads the writer's draft from the session, asks its model, and either sends the draft back
    (the feedback in the session for the writer's next round) or approves it, ending the loop."""

    def __init__(self, model: adk.ChatModel) -> None:
        super().__init__("critic", "Reviews the itinerary.")
        self.model = model

    async def run(self, input: AgentInput, ctx: adk.RunContext) -> AsyncIterator[AgentEvent]:
        draft = ctx.session.get("itinerary")  # Eino: adk.GetSessionValue(ctx, "itinerary")
        verdict = await self.model.generate(
            [
                Message.system("You review itineraries. Say APPROVED or what to change."),
                Message.user(str(draft)),
            ]
        )
        if verdict.content.startswith("APPROVED"):
            # Eino: &adk.AgentEvent{Output: ..., Action: adk.NewBreakLoopAction(c.Name(ctx))}
            yield AgentEvent(
                output=AgentOutput(message=verdict), action=AgentAction(break_loop=True)
            )
            return
        ctx.session["feedback"] = verdict.content
        yield AgentEvent.of(verdict)


def build_app(model_url: str, ledger: Path) -> ReActAgent:
    """The same agents in every process: a checkpoint holds state, not code. ``ledger`` is the
    airline's booking system (a file each booking appends a line to)."""

    def model() -> adk.OpenAIChatModel:
        return wire_model(model_url, name="doubao-seed-1.6")

    def book_flight(flight: str, price_cents: int, ctx: adk.ToolContext) -> str:
        """Book a seat on a flight, once the traveller approved the price.

        Args:
            flight: The flight number.
            price_cents: Its price, in cents.
        """
        if ctx.resume is None:  # Eino: tool.GetInterruptState reports wasInterrupted false
            hold = Hold(flight=flight, price_cents=price_cents, hold_id=f"H-{ctx.tool_call_id}")
            # Eino: return "", tool.StatefulInterrupt(ctx, info, hold)
            raise adk.Interrupt(
                {"question": f"Book {flight} for {price_cents / 100:.2f} EUR?"}, state=hold
            )
        hold = ctx.resume.state  # Eino: the state GetInterruptState gives back
        answer = ctx.resume.data  # Eino: tool.GetResumeContext's data
        if not answer.get("approved"):
            return f"not booked: {answer.get('reason', 'declined')}"
        with ledger.open("a", encoding="utf-8") as file:
            file.write(json.dumps({"flight": hold.flight, "hold": hold.hold_id}) + "\n")
        ctx.session["booked"] = hold.flight
        return f"booked {hold.flight} ({hold.hold_id}) for {ctx.session['traveller']}"

    research = PlanExecute(
        new_planner(model()),
        new_executor(
            model(),
            tools=[
                MCPToolset(StdioServer(sys.executable, [str(TRAVEL_SERVER)])),
                book_flight,
            ],
            instruction="You carry out one step of {traveller}'s trip to {destination}.",
        ),
        new_replanner(model()),
        name="research",
        output_key="research",
    )
    writer = ReActAgent(
        "writer",
        model(),
        instruction=(
            "You write {traveller}'s itinerary for {destination} from this research: {research}. "
            "Feedback on the last draft: {feedback?}"
        ),
        output_key="itinerary",
    )
    polish = adk.LoopAgent("polish", [writer, Critic(model())], max_iterations=3)
    trip = adk.SequentialAgent(
        "trip", [research, polish], description="Researches, books and writes up a trip."
    )
    return ReActAgent(
        "concierge",
        model(),
        instruction="You are {traveller}'s travel desk. Note the trip, then hand it to trip.",
        tools=[remember_trip],
        sub_agents=[trip],
    )


# -- fixtures --------------------------------------------------------------------------------------


llm = wire_server()


SIGHTS = {
    "city": "Lisbon",
    "sights": [{"name": "Belem Tower", "kind": "monument"}, {"name": "Alfama", "kind": "quarter"}],
}
PLAN = {"steps": ["Find flights from BER to LIS on 2027-05-01", "Book the cheapest flight"]}


def until_booking() -> list[Wire]:
    return [
        calls(("remember_trip", {"destination": "Lisbon", "date": "2027-05-01"}, "c1")),
        calls(("transfer_to_agent", {"agent_name": "trip"}, "c2")),
        says(json.dumps(PLAN)),  # planner
        calls(
            (
                "search_flights",
                {"origin": "BER", "destination": "LIS", "date": "2027-05-01"},
                "e1",
            )
        ),
        says("TP541 at 189.00 EUR is the cheapest."),  # executor, step 1
        calls(
            (
                "update_plan",
                {"steps": ["Book TP541 for 18900 cents", "List the sights of Lisbon"]},
                "r1",
            )
        ),
        calls(("book_flight", {"flight": "TP541", "price_cents": 18900}, "e2")),  # step 2
    ]


def after_booking() -> list[Wire]:
    return [
        says("Booked TP541, hold H-e2."),  # executor, step 2, after the person's answer
        calls(("update_plan", {"steps": ["List the sights of Lisbon"]}, "r2")),
        calls(("points_of_interest", {"city": "Lisbon"}, "e3")),
        says("Belem Tower and Alfama."),  # executor, step 3
        says("TP541 is booked; see Belem Tower and Alfama."),  # replanner: the answer
        says("Day 1: Belem Tower. Day 2: Alfama."),  # writer
        says("Add a day trip to Sintra."),  # critic: back to the writer
        says("Day 1: Belem Tower. Day 2: Sintra. Day 3: Alfama."),  # writer again
        says("APPROVED: a fine trip."),  # critic: ends the loop
    ]


BOOK_POINT = (
    "agent:concierge/agent:trip/agent:research/agent:execute_replan/agent:executor"
    "/tool:book_flight#e2"
)


async def consume(events: AsyncIterator[AgentEvent]) -> dict[str, Any]:
    """The caller's loop, as an Eino caller's ``for { event, ok := iter.Next(); ... }``: every
    event shown (a streamed one read chunk by chunk), a pause's points read off its action, and an
    ``event.Err`` noted; the loop reads on to the end, so a second error event would show."""
    seen: dict[str, Any] = {
        "events": [],
        "chunks": 0,
        "stream_failed": None,
        "paths": {},
        "error": None,
        "points": None,
        "checkpoint_id": None,
    }
    async for event in events:
        output = event.output
        if output is not None and output.stream is not None:  # Eino: MessageOutput.IsStreaming
            try:
                async for _chunk in output.stream:  # Eino: for { chunk, err := stream.Recv() }
                    seen["chunks"] += 1
            except Exception as exc:  # Eino: Recv's err; the agent's error event follows
                seen["stream_failed"] = type(exc).__name__
        seen["events"].extend(simplify_events([event]))
        seen["paths"][event.agent_name] = list(event.run_path)  # Eino: event.RunPath
        if event.error is not None:  # Eino: if event.Err != nil
            assert seen["error"] is None, "a second error event"
            seen["error"] = {"agent": event.agent_name, "type": event.error.type}
            seen["error_message"] = event.error.message
        if event.action is not None and event.action.interrupted is not None:
            pause = event.action.interrupted  # Eino: event.Action.Interrupted
            seen["points"] = {p.id: p.info for p in pause.points}
            seen["checkpoint_id"] = pause.checkpoint_id
    return seen


async def test_a_trip_is_researched_booked_once_approved_in_another_process_and_polished(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    llm.script(*until_booking())
    runner = Runner(
        build_app(llm.base_url, ledger),
        checkpoint_store=sqlite_store(tmp_path),
        enable_streaming=True,  # Eino: RunnerConfig{EnableStreaming: true}
    )
    # Eino: runner.Query(ctx, q, adk.WithSessionValues(...), adk.WithCheckPointID("trip-1"))
    paused = await consume(
        runner.run(
            "Plan my Lisbon trip from BER on 2027-05-01.",
            session={"traveller": "Ana"},
            checkpoint_id="trip-1",
        )
    )
    await runner.aclose()
    assert paused["error"] is None
    assert paused["checkpoint_id"] == "trip-1"
    assert paused["points"] == {BOOK_POINT: {"question": "Book TP541 for 189.00 EUR?"}}
    assert [asker(body) for body in llm.bodies] == [
        "You are Ana's travel desk",
        "You are Ana's travel desk",
        "You are a planner",
        "You carry out one step of Ana's trip to Lisbon",
        "You carry out one step of Ana's trip to Lisbon",
        "You review the progress of a plan",
        "You carry out one step of Ana's trip to Lisbon",
    ]
    assert not ledger.exists()
    # Run paths grow as Eino's do: the transfer nests trip under the concierge, each workflow
    # step under the one before (the planner, then each executor and replanner in turn).
    assert paused["paths"]["executor"] == [
        "concierge", "trip", "research", "planner", "execute_replan",
        "executor", "replanner", "executor",
    ]  # fmt: skip

    # The service lists what waits in the store (Eino has no listing: its callers keep the ids)
    # and a resume naming a point that does not wait is refused before anything runs, keeping
    # the checkpoint (Eino's ResumeWithParams fails on an unknown target too).
    async with Runner(
        build_app(llm.base_url, ledger), checkpoint_store=sqlite_store(tmp_path)
    ) as desk:
        (waiting,) = [pending async for pending in desk.pending()]
        assert (waiting.checkpoint_id, waiting.agent) == ("trip-1", "concierge")
        assert [(point.id, point.info) for point in waiting.points] == list(
            paused["points"].items()
        )
        wrong = BOOK_POINT.replace("#e2", "#e9")
        with pytest.raises(ValueError, match="#e9"):
            await desk.invoke_resume("trip-1", {wrong: {"approved": True}})
        assert [pending.checkpoint_id async for pending in desk.pending()] == ["trip-1"]
    assert len(llm.requests) == 7 and not ledger.exists()

    # The person approves; another replica resumes (Eino: runner.ResumeWithParams(ctx,
    # "trip-1", &adk.ResumeParams{Targets: map[string]any{id: answer}})).
    llm.script(*after_booking())
    done = await resume_as_process(
        __file__, llm.base_url, tmp_path, "trip-1", {BOOK_POINT: {"approved": True}}
    )
    assert done["error"] is None and done["points"] is None
    assert done["events"] == [
        "executor: [tool book_flight] booked TP541 (H-e2) for Ana",
        "executor: Booked TP541, hold H-e2.",
        'replanner: [call update_plan {"steps": ["List the sights of Lisbon"]}]',
        "replanner: [tool update_plan] Plan updated:\n1. List the sights of Lisbon",
        'executor: [call points_of_interest {"city": "Lisbon"}]',
        "executor: [tool points_of_interest] " + json.dumps(SIGHTS, indent=2),
        "executor: Belem Tower and Alfama.",
        "replanner: TP541 is booked; see Belem Tower and Alfama.",
        "replanner: [break_loop]",  # Eino's replanner answers with a BreakLoop too
        "writer: Day 1: Belem Tower. Day 2: Alfama.",
        "critic: Add a day trip to Sintra.",
        "writer: Day 1: Belem Tower. Day 2: Sintra. Day 3: Alfama.",
        "critic: APPROVED: a fine trip.",  # one event: the verdict and the action
        "critic: [break_loop]",
    ]
    assert done["chunks"] > 0  # the resumed run streamed too
    # The resumed run goes on along the same run paths; as in Eino, the step after the
    # PlanExecute extends the sequence's path by the PlanExecute's name, not by its inner steps.
    assert done["paths"]["replanner"][-2:] == ["executor", "replanner"]
    assert done["paths"]["critic"] == [
        "concierge", "trip", "research", "polish", "writer", "critic", "writer", "critic",
    ]  # fmt: skip
    # Every model call of the turn, 7 before the pause and 9 after (the critic's two included),
    # each 10 + 5 tokens.
    assert len(llm.requests) == 16
    assert Usage(**done["usage"]) == Usage(input_tokens=160, output_tokens=80, total_tokens=240)
    # Session values: given by the caller, added by a tool, stored by the PlanExecute's and the
    # writer's output keys and by the critic, read back by the instructions and the critic.
    assert done["session"] == {
        "traveller": "Ana",
        "destination": "Lisbon",
        "booked": "TP541",
        "research": "TP541 is booked; see Belem Tower and Alfama.",
        "itinerary": "Day 1: Belem Tower. Day 2: Sintra. Day 3: Alfama.",
        "feedback": "Add a day trip to Sintra.",
    }
    writer_again = llm.bodies[-2]["messages"]
    assert writer_again[0]["content"] == (
        "You write Ana's itinerary for Lisbon from this research: TP541 is booked; see Belem "
        "Tower and Alfama.. Feedback on the last draft: Add a day trip to Sintra."
    )
    assert llm.bodies[-1]["messages"] == [
        {"role": "system", "content": "You review itineraries. Say APPROVED or what to change."},
        {"role": "user", "content": "Day 1: Belem Tower. Day 2: Sintra. Day 3: Alfama."},
    ]
    assert [json.loads(line) for line in ledger.read_text().splitlines()] == [
        {"flight": "TP541", "hold": "H-e2"}
    ]  # booked once, by the replica that resumed
    assert done["checkpoints"] == []  # the resumed run finished: its checkpoint is gone


async def test_a_model_call_that_fails_reaches_the_caller_as_the_last_event(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    llm.script(
        *until_booking()[:2],  # the concierge notes the trip and hands it to trip
        Wire(status=400, error="maximum context length is 8192 tokens"),  # the planner's call
    )
    store = sqlite_store(tmp_path)
    app = build_app(llm.base_url, tmp_path / "ledger.jsonl")
    runner = Runner(app, checkpoint_store=store, enable_streaming=True)
    seen = await consume(
        runner.run("Plan my Lisbon trip.", session={"traveller": "Ana"}, checkpoint_id="trip-2")
    )
    # The planner's stream failed as it was read (Eino: Recv's err), then its error event came,
    # the last of the run: the sequence and the transfer flow around it stopped there.
    assert seen["stream_failed"] == "ModelError"
    assert seen["error"] == {"agent": "planner", "type": "ModelError"}
    assert "HTTP 400: maximum context length is 8192 tokens" in seen["error_message"]
    assert seen["events"][-1].startswith("planner: [error ")
    assert seen["points"] is None
    assert [cp async for cp in store.ids()] == []  # an error is no pause: nothing to resume

    # The same failure through invoke, which collects the events: a RunError carrying them.
    llm.script(*until_booking()[:2], Wire(status=400, error="maximum context length"))
    with pytest.raises(adk.RunError, match="agent 'planner' failed") as failed:
        await runner.invoke("Plan my Lisbon trip.", session={"traveller": "Ana"})
    await runner.aclose()
    assert failed.value.event.agent_name == "planner"
    assert failed.value.events[-1] is failed.value.event


# -- the process that resumes ----------------------------------------------------------------------


async def resume_elsewhere(model_url: str, files: Path, order: dict[str, Any]) -> None:
    """The other process: the same app over the same checkpoint file resumes the pause."""
    store = sqlite_store(files)
    session = adk.Session()
    app = build_app(model_url, files / "ledger.jsonl")
    async with Runner(app, checkpoint_store=store, enable_streaming=True) as runner:
        events = runner.resume(order["checkpoint_id"], order["resume"], session=session)
        seen = await consume(events)
        usage = adk.run_usage(events)  # the whole turn's, the calls before the pause included
    seen["usage"] = None if usage is None else usage.model_dump()
    keys = ("traveller", "destination", "booked", "research", "itinerary", "feedback")
    seen["session"] = {key: session.get(key) for key in keys}
    seen["checkpoints"] = [cp async for cp in store.ids()]
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(resume_elsewhere(sys.argv[1], Path(sys.argv[2]), json.loads(sys.argv[3])))
