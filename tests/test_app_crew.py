"""A CrewAI crew ported to pyadk, end to end over real wires (docs/crewai.md).

The CrewAI app, shaped like its "market research report" examples:

- ``Crew(process=Process.hierarchical, manager_llm=...)`` over a ``researcher`` and an
  ``analyst``; the researcher works with ``planning=True`` and its tools come from an MCP server
  through ``MCPServerAdapter`` (streamable HTTP);
- the analyst's task stores its output for the next one (``context=[analysis_task]``);
- the report task (``output_pydantic=Report``, a ``guardrail`` that sends an answer without a
  figure back for a retry, ``human_input=True``), after the research;
- ``kickoff(inputs={"topic": ...})``, and ``kickoff_for_each`` over several topics.

Here, following docs/crewai.md: ``Supervisor(manager, [research, analyst])`` for the hierarchical
part, a ``PlanExecute`` of ``new_planner``/``new_executor``/``new_replanner`` as the planning
researcher with ``MCPToolset(HTTPServer(url))`` (``mcp_servers/market_server.py``, a real
process), ``output_key``/``{analysis}`` for the context, ``ReActAgent(output_schema=Report)``
whose pydantic validator is the guardrail, a ``LoopAgent`` of the writer and a reviewer agent that
pauses for the human input, kept in SQLite and answered by this file run as a script (another
process), and ``asyncio.gather`` of ``invoke`` for ``kickoff_for_each``. Every model is an
``OpenAIChatModel`` talking to ``tests/openai_server.py``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, field_validator

import adk
from adk import Runner, Usage
from adk.mcp import HTTPServer, MCPToolset
from adk.testing import simplify_events
from prebuilt import (
    ExecutedStep,
    PlanExecute,
    ReActAgent,
    Supervisor,
    new_executor,
    new_planner,
    new_replanner,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run as a script too (the process that answers the review)

from app_processes import run_as_process  # noqa: E402
from app_wire import wire_server  # noqa: E402
from conftest import sqlite_store, wire_model  # noqa: E402
from mcp_servers.process import HTTPServerProcess  # noqa: E402
from openai_server import Call, OpenAIServer  # noqa: E402
from openai_server import Reply as Wire  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

MARKET_SERVER = HERE / "mcp_servers" / "market_server.py"


# -- the app ---------------------------------------------------------------------------------------


class Report(BaseModel):
    """The report task's ``output_pydantic``; its validator is the task's ``guardrail``."""

    title: str
    summary: str
    competitors: list[str]

    @field_validator("summary")
    @classmethod
    def _quotes_a_figure(cls, summary: str) -> str:
        # CrewAI: def guardrail(output) -> tuple[bool, Any]: (False, "...") sends it back.
        if not any(ch.isdigit() for ch in summary):
            raise ValueError("the summary must quote the market size figure")
        return summary


class HumanReview(adk.BaseAgent):
    """``Task(human_input=True)``: a person reads the report; "ok" accepts it, anything else goes
    back to the writer as feedback."""

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        if ctx.resume is None or not ctx.resume.is_target:
            yield ctx.interrupt({"report": ctx.history[-1].content})
        elif ctx.resume.data == "ok":
            yield adk.AgentEvent.break_loop()
        else:
            yield adk.AgentEvent.of(adk.Message.user(f"Reviewer feedback: {ctx.resume.data}"))


def build_crew(model_url: str, mcp_url: str, *, review: bool = True) -> adk.Agent:
    """The same agents in every process: a checkpoint holds state, not code."""

    def llm() -> adk.OpenAIChatModel:
        return wire_model(model_url, name="gpt-4o-mini")

    market = MCPToolset(HTTPServer(mcp_url))  # MCPServerAdapter({"url": ..., "transport": ...})
    # Agent(role="Senior market researcher", goal=..., backstory=..., tools=mcp_tools), planning=True
    research = PlanExecute(
        new_planner(llm(), name="research_planner"),
        new_executor(
            llm(),
            [market],
            name="research_executor",
            instruction="You are a senior market researcher on {topic}. Use your tools; "
            "cite only what they return.",
        ),
        new_replanner(llm(), name="research_replanner"),
        name="research",
        description="Senior market researcher: finds market size and competitors.",
        output_key="research",  # Task(context=[research_task]) for the analyst
    )
    analyst = ReActAgent(
        "analyst",
        llm(),
        description="Market analyst: turns research into findings.",
        instruction="You are a market analyst. Task: analyse this research on {topic}: "
        "{research} Expected output: three findings.",
        output_key="analysis",  # Task(context=[analysis_task]) for the report
    )
    manager = ReActAgent(
        "manager",
        llm(),
        instruction="You manage a research crew on {topic}. Delegate, say what you want, then sum up.",
    )
    crew = Supervisor(manager, [research, analyst])  # Process.hierarchical, manager_llm
    writer = ReActAgent(
        "writer",
        llm(),
        description="Report writer.",
        instruction="You write market reports. Task: write the report on {topic} from this "
        "analysis: {analysis}. Expected output: a title, a summary, the competitors.",
        output_schema=Report,  # output_pydantic=Report, guardrail=...
        output_key="report",
    )
    if not review:
        return adk.SequentialAgent("report_crew", [crew, writer])
    reviewed = adk.LoopAgent("reporting", [writer, HumanReview("editor")], max_iterations=4)
    return adk.SequentialAgent("report_crew", [crew, reviewed])


# -- the wire script -------------------------------------------------------------------------------


def says(text: str, usage: tuple[int, int] = (10, 1)) -> Wire:
    return Wire(text=text, usage=usage)


def calls(
    name: str, arguments: dict[str, Any], call_id: str, usage: tuple[int, int] = (10, 1)
) -> Wire:
    return Wire(tool_calls=[Call(name, json.dumps(arguments), id=call_id)], usage=usage)


def delegate(task: str, worker: str, call_id: str) -> Wire:
    """The manager says what it wants and hands over in the same turn."""
    return Wire(
        text=task,
        tool_calls=[Call("transfer_to_agent", json.dumps({"agent_name": worker}), id=call_id)],
        usage=(10, 1),
    )


REPORT_THIN = {"title": "Plant-based milk", "summary": "A big market.", "competitors": ["Oatly"]}
REPORT = {
    "title": "Plant-based milk",
    "summary": "USD 19.7 billion, growing 10.2% a year.",
    "competitors": ["Oatly", "Alpro", "Silk"],
}
REPORT_REVISED = {**REPORT, "summary": "USD 19.7 billion, growing 10.2% a year; Oatly leads."}


def first_run() -> list[Wire]:
    """Every model call of the run up to the review's pause, in the order the run makes them."""
    return [
        delegate("Research the plant-based milk market: size and competitors.", "research", "t1"),
        says(json.dumps({"steps": ["Look up the market size", "List the competitors"]})),
        calls("market_size", {"market": "plant-based milk"}, "m1"),
        says("USD 19.7 billion in 2024, growing 10.2% a year."),
        # The replanner reads step 1's result and sharpens the rest of the plan.
        calls("update_plan", {"steps": ["List the competitors with their prices"]}, "p1"),
        calls("competitors", {"market": "plant-based milk"}, "m2"),
        says("Oatly (USD 4.99/l), Alpro (USD 3.49/l), Silk (USD 3.99/l)."),
        says("USD 19.7 billion market growing 10.2%; Oatly, Alpro and Silk lead."),
        delegate("Analyse the findings.", "analyst", "t2"),
        says("1. Growing fast. 2. Oatly is premium. 3. Alpro is cheapest."),
        says("Research and analysis done."),
        says(json.dumps(REPORT_THIN)),  # the guardrail sends it back
        says(json.dumps(REPORT), usage=(20, 2)),
    ]


# -- fixtures --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mcp_process() -> Iterator[HTTPServerProcess]:
    process = HTTPServerProcess(script=MARKET_SERVER)
    process.start()
    yield process
    process.stop()


llm = wire_server()


def system_of(body: dict[str, Any]) -> str:
    return str(body["messages"][0]["content"])


def texts_of(body: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in body["messages"]]


# -- the whole crew --------------------------------------------------------------------------------


async def test_the_crew_plans_delegates_retries_and_is_reviewed_from_another_process(
    llm: OpenAIServer, mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    llm.script(*first_run())
    runner = Runner(
        build_crew(llm.base_url, mcp_process.url), checkpoint_store=sqlite_store(tmp_path)
    )
    paused = await runner.invoke(
        "Write a market research report.",
        session={"topic": "plant-based milk"},
        checkpoint_id="r-1",
    )
    await runner.aclose()

    # Who ran, in order: the manager delegates to the planning researcher and back, then the
    # analyst, sums up; the writer answers twice (the guardrail's retry), the editor pauses.
    assert paused.interrupt is not None
    assert paused.interrupt.points[0].info == {"report": json.dumps(REPORT)}
    shown = simplify_events(paused.events)
    assert [line for line in shown if "[transfer" in line] == [
        "manager: [transfer -> research]",
        "research: [transfer -> manager]",
        "manager: [transfer -> analyst]",
        "analyst: [transfer -> manager]",
    ]
    authors = [e.agent_name for e in paused.events if e.output is not None]
    order = [a for i, a in enumerate(authors) if i == 0 or authors[i - 1] != a]
    assert order == [
        "manager",
        "research_planner",
        "research_executor",
        "research_replanner",
        "research_executor",
        "research_replanner",
        "manager",
        "analyst",
        "manager",
        "writer",
    ]

    # The plan: two steps, the second replaced after the first's result, then the answer.
    assert paused.session["executed_steps"] == [
        ExecutedStep(
            step="Look up the market size", result="USD 19.7 billion in 2024, growing 10.2% a year."
        ),
        ExecutedStep(
            step="List the competitors with their prices",
            result="Oatly (USD 4.99/l), Alpro (USD 3.49/l), Silk (USD 3.99/l).",
        ),
    ]
    bodies = llm.bodies
    # The planner read the request and the manager's words; the objective leaves out the transfer.
    assert paused.session["objective"] == (
        "Write a market research report.\nFor context: [manager] said: Research the plant-based "
        "milk market: size and competitors.."  # DESIGN's rewrite adds a "."
    )
    # The executor's first prompt: the objective and the whole plan; its instruction has {topic}.
    executor_first = bodies[2]
    assert "senior market researcher on plant-based milk" in system_of(executor_first)
    assert executor_first["messages"][-1]["content"].endswith(
        "Your task: carry out step 1 of the remaining plan, which is:\nLook up the market size"
    )
    assert [t["function"]["name"] for t in executor_first["tools"]] == [
        "market_size",
        "competitors",
    ]
    # The replanner read step 1's result, and the remaining plan it revised.
    replan = bodies[4]["messages"][-1]["content"]
    assert "1. Look up the market size\n   Result: USD 19.7 billion in 2024" in replan
    assert "Remaining plan:\n1. List the competitors" in replan
    # The second step's executor saw the first step's result and the revised step.
    second_step = bodies[5]["messages"][-1]["content"]
    assert (
        "Completed steps and results:\n1. Look up the market size\n   Result: USD 19.7"
        in second_step
    )
    assert second_step.endswith("which is:\nList the competitors with their prices")
    # What the MCP server answered reached the executor's model as the tool's result.
    assert bodies[3]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "m1",
        "content": "USD 19.7 billion in 2024, growing 10.2% a year",
    }

    # The analyst (a Supervisor worker) read the planning researcher's answer in its instruction
    # (the PlanExecute's output_key), and in the conversation.
    assert paused.session["research"] == (
        "USD 19.7 billion market growing 10.2%; Oatly, Alpro and Silk lead."
    )
    assert system_of(bodies[9]).startswith(
        "You are a market analyst. Task: analyse this research on plant-based milk: USD 19.7 "
        "billion market growing 10.2%; Oatly, Alpro and Silk lead. Expected output"
    )
    analyst_sees = texts_of(bodies[9])
    assert (
        "user",
        "For context: [research_replanner] said: USD 19.7 billion market growing 10.2%; Oatly, "
        "Alpro and Silk lead..",
    ) in analyst_sees
    # The writer's instruction was filled from the analyst's output (context=[analysis_task]).
    assert system_of(bodies[11]).startswith(
        "You write market reports. Task: write the report on plant-based milk from this "
        "analysis: 1. Growing fast. 2. Oatly is premium. 3. Alpro is cheapest."
    )
    # The guardrail's retry: the writer's model was told why, and the thin report is gone.
    retry = bodies[12]["messages"][-1]["content"]
    assert "the summary must quote the market size figure" in retry
    assert paused.session["report"] == json.dumps(REPORT)
    assert len(bodies) == 13

    # The review, answered twice, each time from another process over the same SQLite file.
    llm.script(says(json.dumps(REPORT_REVISED), usage=(30, 3)))
    again = await resume_in_a_process(llm, mcp_process, tmp_path, "r-1", "Say who leads.")
    assert again["points"] == [{"report": json.dumps(REPORT_REVISED)}]
    writer_again = texts_of(llm.bodies[-1])
    assert writer_again[-1] == (
        "user",
        "For context: [editor] said: Reviewer feedback: Say who leads..",
    )
    assert ("assistant", json.dumps(REPORT)) in writer_again  # its accepted draft, as its own
    assert json.dumps(REPORT_THIN) not in json.dumps(writer_again)  # the rejected one is gone

    done = await resume_in_a_process(llm, mcp_process, tmp_path, "r-1", "ok")
    assert done["points"] is None
    # The approval's run made no output of its own (the report came before the pause, and a
    # resumed run does not emit it again): CrewOutput.pydantic is the writer's output_key.
    assert (done["text"], done["output"]) == ("", None)
    assert Report.model_validate_json(done["report"]) == Report(**REPORT_REVISED)
    assert done["checkpoints"] == []  # finished: the checkpoint is gone
    assert len(llm.bodies) == 14  # "ok" asked no model

    # CrewOutput.token_usage: every model call, those before each pause included.
    assert paused.usage == Usage(input_tokens=140, output_tokens=14, total_tokens=154)
    assert done["usage"] == Usage(input_tokens=170, output_tokens=17, total_tokens=187).model_dump()


async def test_a_bad_plan_from_the_model_is_retried_once_then_fails_the_crew_naming_the_planner(
    llm: OpenAIServer, mcp_process: HTTPServerProcess
) -> None:
    llm.script(
        delegate("Research the plant-based milk market.", "research", "t1"),
        says("First I will look up the size, then the competitors."),  # prose, not a plan
        says(json.dumps({"steps": [" "]})),  # a plan of nothing
    )
    async with Runner(build_crew(llm.base_url, mcp_process.url)) as runner:
        with pytest.raises(adk.RunError) as failed:
            await runner.invoke(
                "Write a market research report.", session={"topic": "plant-based milk"}
            )
    # The plan of nothing came as the retry's answer: it fails that retry, as the
    # planner's own OutputSchemaError (an empty plan is an answer off the schema to retry).
    assert (
        "agent 'research_planner': the answer does not match Plan after a retry: the plan has "
        "no steps"
    ) in str(failed.value)
    # The prose got the output_schema retry, told why; nothing was executed or answered after.
    assert "the answer is not valid JSON" in llm.bodies[2]["messages"][-1]["content"]
    assert len(llm.bodies) == 3


async def test_kickoff_for_each_runs_the_crew_per_topic_concurrently(
    mcp_process: HTTPServerProcess, tmp_path: Path
) -> None:
    """``crew.kickoff_for_each(inputs=[{"topic": ...}, ...])``: one runner, runs gathered. The
    model answers by what it is asked (the runs' requests interleave)."""

    def respond(body: dict[str, Any]) -> Wire:
        system = system_of(body)
        topic = "cold brew coffee" if "cold brew" in json.dumps(body) else "plant-based milk"
        last = body["messages"][-1]
        if system.startswith("You manage"):
            if "[analyst] said" in json.dumps(body):
                return says("Done.")
            if "[research_replanner] said" in json.dumps(body):
                return delegate("Analyse it.", "analyst", "t2")
            return delegate(f"Research {topic}.", "research", "t1")
        if "planner" in system and "step-by-step plan" in system:
            return says(json.dumps({"steps": ["Look up the market size"]}))
        if "senior market researcher" in system:
            if last["role"] == "tool":
                return says(f"size: {last['content']}")
            return calls("market_size", {"market": topic}, "m1")
        if "review the progress" in system:
            return says(
                f"{topic}: {body['messages'][-1]['content'].split('Result: ')[1].splitlines()[0]}"
            )
        if system.startswith("You are a market analyst"):
            return says(f"Findings on {topic}.")
        assert system.startswith("You write market reports")
        figure = "19.7" if topic == "plant-based milk" else "3.2"
        return says(
            json.dumps({"title": topic, "summary": f"USD {figure} billion", "competitors": []})
        )

    async with OpenAIServer(respond=respond) as server:
        crew = build_crew(server.base_url, mcp_process.url, review=False)
        async with Runner(crew) as runner:
            topics = ["plant-based milk", "cold brew coffee"]
            results = await asyncio.gather(
                *(
                    runner.invoke("Write a market research report.", session={"topic": t})
                    for t in topics
                )
            )
    assert [r.output for r in results] == [
        Report(title="plant-based milk", summary="USD 19.7 billion", competitors=[]),
        Report(title="cold brew coffee", summary="USD 3.2 billion", competitors=[]),
    ]
    # Each run's plan worked on its own topic: nothing leaked between the runs' sessions.
    assert [r.session["executed_steps"][0].result for r in results] == [
        "size: USD 19.7 billion in 2024, growing 10.2% a year",
        "size: USD 3.2 billion in 2024, growing 22% a year",
    ]
    assert [r.session["objective"] for r in results] == [
        "Write a market research report.\nFor context: [manager] said: Research plant-based milk..",
        "Write a market research report.\nFor context: [manager] said: Research cold brew coffee..",
    ]
    assert [r.session["analysis"] for r in results] == [
        "Findings on plant-based milk.",
        "Findings on cold brew coffee.",
    ]


# -- the process that answers the review -----------------------------------------------------------


async def resume_in_a_process(
    llm: OpenAIServer, mcp: HTTPServerProcess, files: Path, checkpoint_id: str, answer: str
) -> dict[str, Any]:
    """Answer the review in another process (this file run as a script); what it saw."""
    seen: dict[str, Any] = await run_as_process(
        __file__,
        json.dumps(
            {
                "model": llm.base_url,
                "mcp": mcp.url,
                "files": str(files),
                "checkpoint_id": checkpoint_id,
                "answer": answer,
            }
        ),
    )
    return seen


async def answer_elsewhere(order: dict[str, Any]) -> None:
    store = sqlite_store(Path(order["files"]))
    crew = build_crew(order["model"], order["mcp"])
    async with Runner(crew, checkpoint_store=store) as runner:
        done = await runner.invoke_resume(order["checkpoint_id"], order["answer"])
    pause = done.interrupt
    output = done.output
    print(
        json.dumps(
            {
                "text": done.text,
                "output": output.model_dump() if isinstance(output, BaseModel) else output,
                "report": done.session.get("report"),
                "points": None if pause is None else [p.info for p in pause.points],
                "usage": None if done.usage is None else done.usage.model_dump(),
                "checkpoints": [cp async for cp in store.ids()],
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(answer_elsewhere(json.loads(sys.argv[1])))
