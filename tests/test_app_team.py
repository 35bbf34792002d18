"""An AutoGen AgentChat team app ported to pyadk, end to end over real wires.

The AutoGen app, shaped like its travel-planning and customer-support examples:

- ``poets``, a ``RoundRobinGroupChat([writer, critic])`` ending on
  ``TextMentionTermination("APPROVE", sources=["critic"]) | MaxMessageTermination(n)``; the
  writer's tools come from an ``McpWorkbench`` over stdio (``mcp_servers/writing_server.py``);
  watched with ``Console(team.run_stream(task=...))`` and saved with ``team.save_state()``,
  loaded into a new team in the next run;
- ``editor``, an ``AssistantAgent`` with the poets as a ``TeamTool``;
- ``research``, a ``SelectorGroupChat([planner, searcher], selector_func=...)`` whose function
  puts the planner after the searcher and leaves the rest to the model;
- ``support``, a ``Swarm([travel_agent, flights_refunder])`` whose agents hand off to each other
  and to the user (``HandoffTermination(target="user")``); the user's answer comes in another
  process, ``team.run(task=HandoffMessage(...))`` there after ``load_state``.

Here, following docs/autogen.md: ``adk.LoopAgent`` with a termination agent of our own,
``MCPToolset(StdioServer(...))``, ``Runner.run`` with ``enable_streaming=True``,
``result.messages`` as JSON, ``adk.AgentTool``, ``prebuilt.Supervisor`` with a ``before_model``
callback as the selector function, a router agent for the swarm and a tool raising
``adk.Interrupt`` for the user, the pause kept in SQLite and resumed by this file run as a
script. Every model is an ``OpenAIChatModel`` talking to ``tests/openai_server.py``, which
answers each request from what it holds (``respond``), as a model reads its conversation.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import adk
from adk import Message, Runner, Usage
from adk.callbacks import Callbacks, ModelRequest
from adk.mcp import MCPToolset, StdioServer
from adk.testing import ScriptedModel, simplify_events
from prebuilt import ReActAgent, Supervisor

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # run as a script too (the process that resumes)

from app_processes import run_as_process  # noqa: E402
from app_wire import asker, says, wire_server  # noqa: E402
from conftest import sqlite_store, wire_model  # noqa: E402
from openai_server import Call, OpenAIServer  # noqa: E402
from openai_server import Reply as Wire  # noqa: E402

pytestmark = pytest.mark.asyncio(loop_scope="module")

WRITING_SERVER = HERE / "mcp_servers" / "writing_server.py"


# -- the models: each answers from the conversation it is sent ------------------------------------


def calls(name: str, arguments: dict[str, Any], call_id: str) -> Wire:
    return Wire(tool_calls=[Call(name, json.dumps(arguments), id=call_id)], usage=(10, 5))


def role(body: dict[str, Any]) -> str:
    """Which agent made a request: its system message's first sentence names it."""
    return asker(body).removeprefix("You are the ")


def called(body: dict[str, Any], message: dict[str, Any]) -> str:
    """The name of the tool whose result ``message`` is (Chat tool messages carry only the id)."""
    for sent in body["messages"]:
        for call in sent.get("tool_calls") or []:
            if call["id"] == message["tool_call_id"]:
                return str(call["function"]["name"])
    raise AssertionError(f"no call for {message}")


def respond(body: dict[str, Any]) -> Wire:
    messages = body["messages"]
    last = messages[-1]
    text = "\n".join(str(m.get("content") or "") for m in messages)
    who = role(body)
    if who == "writer":
        if last["role"] == "tool":
            return says(f"Draft {text.count('[critic] said') + 1}: steam rises, {last['content']}")
        return calls("rhymes", {"word": "tea"}, f"rh_{text.count('[critic] said')}")
    if who == "critic":
        if "never approve" in text:
            return says("Again.")
        return says("APPROVE" if text.count("[writer] said: Draft") >= 2 else "Shorter.")
    if who == "editor":
        if last["role"] == "tool":
            return says(f"The team wrote: {last['content']}")
        team = body["tools"][0]["function"]["name"]
        return calls(team, {"request": "A haiku about tea."}, "team_1")
    if who == "selector":
        if "[planner] said" in text:
            return says("TERMINATE")
        return calls("transfer_to_agent", {"agent_name": "searcher"}, "pick_1")
    if who == "planner":
        return says("Plan: search, then stop.")
    if who == "searcher":
        return says("Found: tea is from China.")
    if who == "travel agent":
        if "refunded" in text:
            return says("Your refund is done. TERMINATE")
        return calls("transfer_to_flights_refunder", {}, "ho_1")
    if who == "flights refunder":
        if last["role"] == "tool" and called(body, last) == "ask_user":
            return calls("refund_flight", {"flight_id": last["content"]}, "rf_1")
        if last["role"] == "tool" and called(body, last) == "refund_flight":
            return calls("transfer_to_travel_agent", {}, "ho_2")
        return calls("ask_user", {"question": "Which flight?"}, "ask_1")
    raise AssertionError(f"no answer for {who}: {messages}")


# -- the round-robin team -------------------------------------------------------------------------


class Termination(adk.BaseAgent):
    """``TextMentionTermination(text, sources=[source]) | MaxMessageTermination(max_messages)``;
    the reason it stopped goes to the session (``TaskResult.stop_reason``)."""

    def __init__(self, name: str, text: str, source: str, max_messages: int) -> None:
        super().__init__(name)
        self.text, self.source, self.max_messages = text, source, max_messages

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        entries = ctx.history_entries
        last = entries[-1]
        # MaxMessageTermination counts this run's chat messages: its task, then each agent's
        # reply (include_agent_event=False: tool calls and results are events, not counted), and
        # not the thread an earlier run left (load_state): the input is counted as one message.
        said = [
            e
            for e in entries
            if not e.is_user_input and e.message.role != adk.Role.TOOL and not e.message.tool_calls
        ]
        if last.agent_name == self.source and self.text in last.message.content:
            ctx.session["stop_reason"] = f"Text '{self.text}' mentioned"
            yield adk.AgentEvent.break_loop()
        elif 1 + len(said) >= self.max_messages:
            ctx.session["stop_reason"] = f"Maximum number of messages {self.max_messages} reached"
            yield adk.AgentEvent.break_loop()


def poets(model_url: str, calls_file: Path, max_messages: int = 20) -> adk.LoopAgent:
    writer = ReActAgent(
        "writer",
        wire_model(model_url, name="gpt-4o"),
        instruction="You are the writer. Write a haiku; use rhymes.",
        description="Writes haiku.",
        tools=[
            MCPToolset(
                StdioServer(
                    sys.executable,
                    [str(WRITING_SERVER)],
                    env={**os.environ, "WRITING_CALLS_FILE": str(calls_file)},
                )
            )
        ],
    )
    critic = ReActAgent(
        "critic",
        wire_model(model_url, name="gpt-4o"),
        instruction="You are the critic. Review the haiku; say APPROVE when it is good.",
        description="Reviews haiku.",
    )

    def stop(after: str) -> Termination:
        return Termination(f"stop_after_{after}", "APPROVE", "critic", max_messages)

    return adk.LoopAgent(
        "poets",
        [writer, stop("writer"), critic, stop("critic")],
        max_iterations=10,
        description="A writer and a critic who write a haiku on request.",
    )


# -- fixtures --------------------------------------------------------------------------------------


llm = wire_server(respond)


def sent(llm: OpenAIServer, who: str) -> list[list[str]]:
    """The contents of the messages each of ``who``'s requests held, system message left out."""
    bodies = [r.body for r in llm.requests if role(r.body) == who]
    return [[str(m.get("content") or "") for m in body["messages"][1:]] for body in bodies]


async def console(events: AsyncIterator[adk.AgentEvent]) -> list[str]:
    """``Console(team.run_stream(task))``: each message as it comes, streamed ones joined."""
    shown: list[str] = []
    async for event in events:
        output = event.output
        if output is not None and output.stream is not None:
            text = "".join([chunk.content async for chunk in output.stream])
            shown.append(f"{event.agent_name}: {text}")
        elif output is not None and output.message is not None:
            shown.append(f"{event.agent_name} ({output.role}): {output.message.content}")
    return shown


# -- the tests -------------------------------------------------------------------------------------


async def test_the_round_robin_team_streams_until_the_critic_approves(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    calls_file = tmp_path / "calls.txt"
    team = poets(llm.base_url, calls_file)
    async with Runner(team, enable_streaming=True) as runner:
        session = adk.Session()  # used as it is: the termination agent's stop_reason lands here
        events = runner.run("A haiku about tea.", session=session)
        shown = await console(events)
        usage = adk.run_usage(events)

    assert shown == [
        "writer: ",  # the call to the MCP tool, streamed: no text
        "writer (tool): sea\nfree\nkey",
        "writer: Draft 1: steam rises, sea\nfree\nkey",
        "critic: Shorter.",
        "writer: ",
        "writer (tool): sea\nfree\nkey",
        "writer: Draft 2: steam rises, sea\nfree\nkey",
        "critic: APPROVE",
    ]
    assert session["stop_reason"] == "Text 'APPROVE' mentioned"  # TaskResult.stop_reason
    # Both rounds' rhymes reached the server, one stdio process for the run.
    lines = calls_file.read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == ["rhymes tea", "rhymes tea"]
    assert len({line.split()[0] for line in lines}) == 1
    # The critic read the whole thread: the writer's turns (its tool calls and results too).
    assert sent(llm, "critic")[1] == [
        "A haiku about tea.",
        'For context: [writer] called tool: `rhymes` with arguments: {"word": "tea"}.',
        "For context: [writer] `rhymes` tool returned result: sea\nfree\nkey.",
        "For context: [writer] said: Draft 1: steam rises, sea\nfree\nkey.",
        "Shorter.",  # its own turn, as it said it
        'For context: [writer] called tool: `rhymes` with arguments: {"word": "tea"}.',
        "For context: [writer] `rhymes` tool returned result: sea\nfree\nkey.",
        "For context: [writer] said: Draft 2: steam rises, sea\nfree\nkey.",
    ]
    # Six model calls (writer twice per round, critic once), 10 + 5 tokens each.
    assert usage == Usage(input_tokens=60, output_tokens=30, total_tokens=90)


async def test_a_message_limit_ends_the_chat_after_the_writers_turn(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    team = poets(llm.base_url, tmp_path / "calls.txt", max_messages=4)
    async with Runner(team) as runner:
        result = await runner.invoke("A haiku about tea; never approve.")

    assert [line for line in simplify_events(result.events) if "[call" not in line] == [
        "writer: [tool rhymes] sea\nfree\nkey",
        "writer: Draft 1: steam rises, sea\nfree\nkey",
        "critic: Again.",
        "writer: [tool rhymes] sea\nfree\nkey",
        "writer: Draft 2: steam rises, sea\nfree\nkey",
        "stop_after_writer: [break_loop]",  # the 4th message: the task and 3 replies
    ]
    assert result.session["stop_reason"] == "Maximum number of messages 4 reached"
    assert result.text == "Draft 2: steam rises, sea\nfree\nkey"
    assert len(sent(llm, "critic")) == 1  # the critic did not speak again


async def test_the_teams_state_is_saved_as_json_and_loaded_by_the_next_run(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    async with Runner(poets(llm.base_url, tmp_path / "calls.txt")) as runner:
        first = await runner.invoke("A haiku about tea.")
    # team.save_state(), written to a row or a file
    saved = json.dumps({"messages": [m.model_dump(mode="json") for m in first.messages]})
    llm.requests.clear()

    # Another run (another process): a new team, team.load_state(state), team.run(task=...)
    state = json.loads(saved)
    thread = [Message.model_validate(m) for m in state["messages"]]
    # MaxMessageTermination(3) counts this run's messages: the loaded thread is not among them.
    async with Runner(poets(llm.base_url, tmp_path / "calls.txt", max_messages=3)) as runner:
        second = await runner.invoke([*thread, Message.user("Now one about a cup.")])
    assert [e.agent_name for e in second.events if e.output and e.output.message] == [
        "writer",
        "writer",
        "writer",
        "critic",
    ]
    assert second.session["stop_reason"] == "Text 'APPROVE' mentioned"

    writer_saw = sent(llm, "writer")[0]
    assert writer_saw[0] == "A haiku about tea."
    assert writer_saw[-2:] == ["For context: [critic] said: APPROVE.", "Now one about a cup."]
    # The writer's own turns of the last run come back as the others' do: a team's thread.
    assert "For context: [writer] said: Draft 2: steam rises, sea\nfree\nkey." in writer_saw
    assert second.messages[: len(thread)] == thread
    assert second.messages[len(thread)].content == "Now one about a cup."


class Transcript(adk.BaseAgent):
    """What AutoGen's ``TeamTool`` answers with: every message of the team's run but the task,
    as ``source: text``, joined by blank lines."""

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        said = [
            f"{entry.agent_name}: {entry.message.content}"
            for entry in ctx.history_entries
            if not entry.is_user_input
            and entry.message.role == adk.Role.ASSISTANT
            and entry.message.content
        ]
        yield adk.AgentEvent.of("\n\n".join(said))


async def test_the_team_is_a_tool_of_the_editor(llm: OpenAIServer, tmp_path: Path) -> None:
    def editor(team: adk.Agent) -> ReActAgent:
        return ReActAgent(
            "editor",
            wire_model(llm.base_url, name="gpt-4o"),
            instruction="You are the editor. Ask the poets for poems.",
            tools=[adk.AgentTool(team)],
        )

    # TeamTool(team, name="poets", description=...): the tool's result is the team's last message
    async with Runner(editor(poets(llm.base_url, tmp_path / "calls.txt"))) as runner:
        result = await runner.invoke("I need a haiku about tea.")
    assert result.text == "The team wrote: APPROVE"
    # the team ran on the call's request, in a run of its own
    assert sent(llm, "writer")[0] == ["A haiku about tea."]
    assert result.usage == Usage(input_tokens=80, output_tokens=40, total_tokens=120)

    # The team's messages in the editor's stream (what AutoGen's run_stream shows of a TeamTool)
    llm.requests.clear()
    forwarded = ReActAgent(
        "editor",
        wire_model(llm.base_url, name="gpt-4o"),
        instruction="You are the editor. Ask the poets for poems.",
        tools=[adk.AgentTool(poets(llm.base_url, tmp_path / "calls.txt"), emit_inner_events=True)],
    )
    async with Runner(forwarded) as runner:
        shown = [
            (e.agent_name, e.output.message.content)
            async for e in runner.run("I need a haiku about tea.")
            if e.output is not None and e.output.message is not None and e.output.message.content
        ]
    assert shown == [
        ("writer", "sea\nfree\nkey"),
        ("writer", "Draft 1: steam rises, sea\nfree\nkey"),
        ("critic", "Shorter."),
        ("writer", "sea\nfree\nkey"),
        ("writer", "Draft 2: steam rises, sea\nfree\nkey"),
        ("critic", "APPROVE"),
        ("editor", "APPROVE"),  # the tool's result
        ("editor", "The team wrote: APPROVE"),
    ]

    # AutoGen's default answer (every message as `source: text`) is an agent after the team.
    llm.requests.clear()
    team = poets(llm.base_url, tmp_path / "calls.txt")
    with_transcript = adk.SequentialAgent(
        "poets_team", [team, Transcript("transcript")], description=team.description
    )
    async with Runner(editor(with_transcript)) as runner:
        result = await runner.invoke("I need a haiku about tea.")
    assert result.text == (
        "The team wrote: writer: Draft 1: steam rises, sea\nfree\nkey\n\ncritic: Shorter.\n\n"
        "writer: Draft 2: steam rises, sea\nfree\nkey\n\ncritic: APPROVE"
    )


async def test_a_team_run_again_after_its_runner_closed_is_told_why_its_model_is_closed(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    """AutoGen's team runs again and again until ``model_client.close()``; here closing a Runner
    closes its agents' models, and a later Runner over the same agents says so."""
    team = poets(llm.base_url, tmp_path / "calls.txt")
    async with Runner(team) as runner:
        assert (await runner.invoke("A haiku about tea.")).text == "APPROVE"
    with pytest.raises(adk.RunError, match=r"is closed: .*a Runner whose agents use it"):
        async with Runner(team) as runner:
            await runner.invoke("Another haiku about tea.")


# -- the selector team ----------------------------------------------------------------------------


def transfer(name: str) -> Message:
    arguments = json.dumps({"agent_name": name})
    return Message.assistant(
        tool_calls=[adk.ToolCall(id=f"pick_{name}", name="transfer_to_agent", arguments=arguments)]
    )


def planner_after_others(ctx: adk.RunContext, request: ModelRequest) -> Message | None:
    """``selector_func``: the planner speaks after every other participant; else the model."""
    last = ctx.history_entries[-1]
    if last.agent_name not in ("", "selector", "planner"):
        return transfer("planner")
    return None


async def test_the_selector_function_picks_the_planner_after_the_searcher(
    llm: OpenAIServer,
) -> None:
    def participant(name: str, description: str, **options: Any) -> ReActAgent:
        return ReActAgent(
            name,
            wire_model(llm.base_url, name="gpt-4o"),
            instruction=f"You are the {name}.",
            description=description,
            **options,
        )

    def without_picks(entries: Sequence[adk.HistoryEntry], reader: str) -> list[Message]:
        """The thread as AutoGen's participants hold it: the selector's picks left out."""
        kept = [e for e in entries if e.agent_name != "selector"]
        return adk.history.default_rewriter(kept, reader)

    selector = ReActAgent(
        "selector",
        wire_model(llm.base_url, name="gpt-4o"),
        instruction="You are the selector. Pick who speaks next; TERMINATE when the plan is done.",
        callbacks=[Callbacks(before_model=planner_after_others)],
    )
    team = Supervisor(
        selector,
        [
            participant("planner", "Plans the work.", history_rewriter=without_picks),
            participant("searcher", "Searches the web."),
        ],
    )
    async with Runner(team) as runner:
        result = await runner.invoke("Where is tea from?")

    speakers = [line for line in simplify_events(result.events) if "transfer ->" in line]
    assert speakers == [
        "selector: [transfer -> searcher]",  # the model picked
        "searcher: [transfer -> selector]",
        "selector: [transfer -> planner]",  # selector_func picked
        "planner: [transfer -> selector]",
    ]
    assert result.text == "TERMINATE"
    assert len(sent(llm, "selector")) == 2  # the function's pick made no model call
    tools = next(r.body["tools"] for r in llm.requests if role(r.body) == "selector")
    assert tools[0]["function"]["parameters"]["properties"]["agent_name"]["enum"] == [
        "planner",
        "searcher",
    ]
    # the planner read the searcher's turn
    # The searcher read the selector's pick as the selector's tool call and result (pyadk's
    # thread holds them); the planner, reading without them, the task and the searcher's turn.
    assert sent(llm, "searcher")[0] == [
        "Where is tea from?",
        'For context: [selector] called tool: `transfer_to_agent` with arguments: {"agent_name": '
        '"searcher"}.',
        "For context: [selector] `transfer_to_agent` tool returned result: Transferred to agent "
        "'searcher'.",
    ]
    assert sent(llm, "planner")[0] == [
        "Where is tea from?",
        "For context: [searcher] said: Found: tea is from China..",  # DESIGN.md's rewrite adds "."
    ]


async def test_a_selector_function_naming_no_participant_is_told_so_until_its_iterations_end() -> (
    None
):
    """AutoGen's selector_func raises on a name not in the team; here the pick is the transfer
    tool's error result, and a function that keeps naming it spends the selector's iterations."""
    model = ScriptedModel(["never asked"])
    selector = ReActAgent(
        "selector",
        model,
        callbacks=[Callbacks(before_model=lambda ctx, request: transfer("nobody"))],
        max_iterations=2,
    )
    team = Supervisor(selector, [ReActAgent("a", ScriptedModel(["a"]), description="A.")])
    with pytest.raises(adk.RunError, match="exceeds max iterations"):
        await Runner(team).invoke("hi")
    events = [e async for e in Runner(team).run("hi")]
    assert simplify_events(events)[1] == (
        "selector: [tool transfer_to_agent] Error: cannot transfer to 'nobody': not an agent "
        "'selector' can transfer to; valid agent names: a"
    )
    assert model.requests == []  # the function answered every time


# -- the swarm with a handoff to the user ----------------------------------------------------------


def handoff(target: str) -> adk.FunctionTool:
    """``handoffs=[target]``: a ``transfer_to_<target>`` tool."""

    def hand_off(ctx: adk.ToolContext) -> str:
        ctx.session["next_speaker"] = target
        ctx.transfer("support")
        return f"Transferred to {target}, adopting the role of {target} immediately."

    return adk.FunctionTool(
        hand_off, name=f"transfer_to_{target}", description=f"Hand off to {target}."
    )


@adk.tool
def ask_user(question: str, ctx: adk.ToolContext) -> str:
    """Hand off to the user: ask a question and wait for the answer."""
    if ctx.resume is None:
        raise adk.Interrupt({"question": question})
    return str(ctx.resume.data)


class Swarm(adk.BaseAgent):
    """Transfers to whoever the last speaker handed off to (``first`` to start)."""

    def __init__(self, name: str, first: str) -> None:
        super().__init__(name)
        self.first = first

    async def run(
        self, input: adk.AgentInput, ctx: adk.RunContext
    ) -> AsyncIterator[adk.AgentEvent]:
        target = ctx.session.get("next_speaker", self.first)
        ctx.session["next_speaker"] = None
        if target is not None:
            yield adk.AgentEvent.transfer(target)


def support(model_url: str, refunds: Path) -> adk.Agent:
    """The same swarm in every process."""

    def refund_flight(flight_id: str) -> str:
        """Refund a flight."""
        with refunds.open("a", encoding="utf-8") as file:
            file.write(flight_id + "\n")
        return f"Flight {flight_id} refunded."

    no_parallel = adk.ModelOptions(extra={"parallel_tool_calls": False})
    travel = ReActAgent(
        "travel_agent",
        wire_model(model_url, name="gpt-4o"),
        instruction="You are the travel agent. Hand refunds to the flights refunder.",
        description="Plans travel.",
        tools=[handoff("flights_refunder")],
        model_options=no_parallel,
    )
    refunder = ReActAgent(
        "flights_refunder",
        wire_model(model_url, name="gpt-4o"),
        instruction="You are the flights refunder. Ask the user for the flight.",
        description="Refunds flights.",
        tools=[ask_user, refund_flight, handoff("travel_agent")],
        model_options=no_parallel,
    )
    return Supervisor(Swarm("support", first="travel_agent"), [travel, refunder])


async def test_the_swarm_hands_off_to_the_user_and_another_process_resumes(
    llm: OpenAIServer, tmp_path: Path
) -> None:
    refunds = tmp_path / "refunds.txt"
    async with Runner(support(llm.base_url, refunds), checkpoint_store=sqlite_store(tmp_path)) as r:
        paused = await r.invoke("Refund my flight.", checkpoint_id="conv-7")

    assert paused.interrupt is not None  # HandoffTermination(target="user")
    (point,) = paused.interrupt.points
    assert point.info == {"question": "Which flight?"}
    assert point.id == "agent:support/agent:flights_refunder/tool:ask_user#ask_1"
    assert [line for line in simplify_events(paused.events) if "transfer ->" in line] == [
        "support: [transfer -> travel_agent]",
        "travel_agent: [transfer -> support]",
        "support: [transfer -> flights_refunder]",
    ]
    assert paused.usage == Usage(input_tokens=20, output_tokens=10, total_tokens=30)
    assert not refunds.exists()

    done = await resume_in_a_process(llm, tmp_path, "conv-7", "XYZ123")
    assert done["text"] == "Your refund is done. TERMINATE"
    assert done["handoffs"] == [
        "flights_refunder: [transfer -> support]",
        "support: [transfer -> travel_agent]",
        "travel_agent: [transfer -> support]",
    ]
    assert done["checkpoints"] == []  # the finished resume took its checkpoint away
    assert refunds.read_text() == "XYZ123\n"
    # the user's answer was the ask_user call's result, in the refunder's next request
    refunder = [r.body for r in llm.requests if role(r.body) == "flights refunder"]
    assert refunder[1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "ask_1",
        "content": "XYZ123",
    }
    # the whole conversation's usage: 2 calls before the pause, 3 after it
    assert Usage(**done["usage"]) == Usage(input_tokens=50, output_tokens=25, total_tokens=75)


# -- the process that resumes ----------------------------------------------------------------------


async def resume_in_a_process(
    llm: OpenAIServer, files: Path, checkpoint_id: str, answer: str
) -> dict[str, Any]:
    seen: dict[str, Any] = await run_as_process(
        __file__,
        llm.base_url,
        str(files),
        checkpoint_id,
        answer,
    )
    return seen


async def resume_elsewhere(model_url: str, files: Path, checkpoint_id: str, answer: str) -> None:
    """The other process: the same swarm over the same checkpoint file, the user's answer."""
    store = sqlite_store(files)
    async with Runner(support(model_url, files / "refunds.txt"), checkpoint_store=store) as r:
        done = await r.invoke_resume(checkpoint_id, answer)
    usage = done.usage
    events = simplify_events(done.events)
    print(
        json.dumps(
            {
                "text": done.text,
                "handoffs": [line for line in events if "transfer ->" in line],
                "usage": None if usage is None else usage.model_dump(),
                "checkpoints": [cp async for cp in store.ids()],
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(resume_elsewhere(sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[4]))
