"""PlanExecute's objective: what was asked, without the transfer bookkeeping of a flow around it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from adk import (
    AgentEvent,
    AgentInput,
    BaseAgent,
    Callbacks,
    LoopAgent,
    Message,
    RunContext,
    Runner,
    tool,
)
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, Supervisor, new_executor, new_planner, new_replanner


def _research(planner_model: ScriptedModel, executor_model: ScriptedModel) -> PlanExecute:
    return PlanExecute(
        new_planner(planner_model, name="r_planner"),
        new_executor(executor_model, tools=[], name="r_executor"),
        new_replanner(ScriptedModel(["Tea costs 4 EUR."]), name="r_replanner"),
        name="research",
        description="Researches with a plan.",
    )


def _objectives(executor_model: ScriptedModel) -> list[str]:
    """The objective each request to the executor's model gave (its prompt up to the plan)."""
    return [
        request.messages[-1].content.split("\n\nPlan (remaining steps):")[0]
        for request in executor_model.requests
    ]


async def test_a_worker_plan_execute_objective_leaves_out_the_supervisors_transfers() -> None:
    # A supervisor says what it wants and transfers in one message (and, as models do, asks for
    # a second transfer beside it). The objective every executor and replanner prompt repeats
    # held the transfer_to_agent calls and their results ("Transferred to agent 'research'",
    # "Error: ignored: one transfer per turn ..."): routing that says nothing about the task.
    delegate = Message.assistant(
        "Research tea prices",
        [
            tool_call("transfer_to_agent", {"agent_name": "research"}, id="t1"),
            tool_call("transfer_to_agent", {"agent_name": "research"}, id="t2"),
        ],
    )
    planner_model = ScriptedModel([json.dumps({"steps": ["find prices"]})])
    executor_model = ScriptedModel(["4 EUR a box."])
    manager = ReActAgent("manager", ScriptedModel([delegate, "Tea costs 4 EUR."]))
    app = Supervisor(manager, [_research(planner_model, executor_model)])

    result = await Runner(app).invoke("Write about tea.")

    objective = "Write about tea.\nFor context: [manager] said: Research tea prices."
    assert result.session["objective"] == objective
    prompt = executor_model.requests[0].messages[-1].content
    assert prompt.startswith(f"Objective:\n{objective}\n\nPlan (remaining steps):\n1. find prices")
    assert "transfer" not in prompt.lower()
    # The planner still reads the conversation as it is.
    planner_view = [m.content for m in planner_model.requests[0].messages]
    assert any("`transfer_to_agent` tool returned result" in text for text in planner_view)


async def test_a_worker_delegated_to_again_takes_the_new_delegation_as_its_objective() -> None:
    """Transferred to a second time in the run, the worker's objective was every user message
    and every `For context` line since the run began: the first task, its plan's results and
    answer, then the new task, growing with each delegation in every executor and replanner
    prompt. It is what was said since its last turn now."""
    planner_model = ScriptedModel([json.dumps({"steps": ["find prices"]})] * 3)
    executor_model = ScriptedModel(["4 EUR a box.", "3 EUR a bag.", "2 EUR a cup."])
    research = PlanExecute(
        new_planner(planner_model, name="r_planner"),
        new_executor(executor_model, tools=[], name="r_executor"),
        new_replanner(ScriptedModel(["Tea: 4 EUR.", "Coffee: 3 EUR.", "Cocoa: 2 EUR."])),
        name="research",
        description="Researches with a plan.",
    )

    def delegate(text: str) -> Message:
        return Message.assistant(text, [tool_call("transfer_to_agent", {"agent_name": "research"})])

    manager = ReActAgent(
        "manager",
        ScriptedModel(
            [
                delegate("Research tea prices"),
                delegate("Now research coffee prices"),
                delegate("Last, cocoa"),
                "Tea 4, coffee 3, cocoa 2.",
            ]
        ),
    )
    result = await Runner(Supervisor(manager, [research])).invoke("Price our drinks.")

    assert result.text == "Tea 4, coffee 3, cocoa 2."
    assert _objectives(executor_model) == [
        "Objective:\nPrice our drinks.\nFor context: [manager] said: Research tea prices.",
        "Objective:\nFor context: [manager] said: Now research coffee prices.",
        "Objective:\nFor context: [manager] said: Last, cocoa.",
    ]
    assert result.session["objective"] == "For context: [manager] said: Last, cocoa."
    # The planner still reads the whole conversation.
    assert "Tea: 4 EUR." in str([m.content for m in planner_model.requests[2].messages])


async def test_a_plan_execute_a_custom_agent_runs_with_its_own_input_plans_for_that_input() -> None:
    """A custom agent handing a PlanExecute an input of its own over its context: the objective
    was read from the run's history, which holds what the run was asked, not the request."""
    executor_model = ScriptedModel(["Booked the 9:00 train."])
    trip = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["book a train"]})])),
        new_executor(executor_model, tools=[]),
        new_replanner(ScriptedModel(["Booked."])),
        name="trip",
    )

    class Concierge(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            request = AgentInput([Message.user("Book a train to Bergen for Monday.")])
            async for event in trip.run(request, ctx):
                yield event

    result = await Runner(Concierge("concierge")).invoke("Sort out my week.")
    assert result.session["objective"] == "Book a train to Bergen for Monday."
    prompt = executor_model.requests[0].messages[-1].content
    assert prompt.startswith("Objective:\nBook a train to Bergen for Monday.\n\nPlan")


async def test_one_plan_execute_serving_two_runs_at_once_keeps_each_runs_request() -> None:
    """One agent tree serves a service's requests at the same time, each run's PlanExecute at
    the same address: the request a custom agent hands it is kept per run, so a run whose planner
    starts after the other's request arrived still plans for its own."""
    executor_model = ScriptedModel(["Booked."] * 2)
    trip = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["book it"]})] * 2)),
        new_executor(executor_model, tools=[]),
        new_replanner(ScriptedModel(["Done."] * 2)),
        name="trip",
    )

    class Concierge(BaseAgent):
        def __init__(self, name: str, request: str) -> None:
            super().__init__(name)
            self.request = request

        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            async for event in trip.run(AgentInput([Message.user(self.request)]), ctx):
                yield event

    # Both runs reach their planner before either planner's step reads its objective.
    waiting: list[str] = []
    both = asyncio.Event()

    async def hold_the_planner(agent: Any, ctx: RunContext) -> None:
        if agent.name == "planner":
            waiting.append(ctx.address)
            if len(waiting) == 2:
                both.set()
            await both.wait()

    def run(request: str) -> Any:
        runner = Runner(
            Concierge("concierge", request), callbacks=[Callbacks(before_agent=hold_the_planner)]
        )
        return runner.invoke("Sort out my week.")

    first, second = await asyncio.gather(run("A train to Bergen."), run("A hotel in Oslo."))
    assert first.session["objective"] == "A train to Bergen."
    assert second.session["objective"] == "A hotel in Oslo."
    assert waiting[0] == waiting[1]  # one address, two runs


async def test_a_worker_in_a_carried_conversation_reads_since_its_turn() -> None:
    """A conversation goes on run after run on ``result.messages`` (docs/agents.md): under a
    Supervisor each earlier turn comes back as ``For context: ...`` user messages, and every one
    of them was the worker's objective, the supervisor's ``transfer_to_agent`` calls and their
    results included, repeated in every executor and replanner prompt and growing with each
    turn of the conversation. The carried turns are read as a run's own: without the transfer
    bookkeeping, and from after the worker's last turn."""
    executor_model = ScriptedModel(["4 EUR a box.", "3 EUR a bag."])
    research = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["find prices"]})] * 2), name="r_planner"),
        new_executor(executor_model, tools=[], name="r_executor"),
        new_replanner(ScriptedModel(["Tea: 4 EUR.", "Coffee: 3 EUR."]), name="r_replanner"),
        name="research",
        description="Researches with a plan.",
    )

    def delegate(text: str) -> Message:
        return Message.assistant(text, [tool_call("transfer_to_agent", {"agent_name": "research"})])

    manager_model = ScriptedModel(
        [
            delegate("Research tea prices"),
            "Tea is 4 EUR.",
            delegate("Now coffee"),
            "Coffee is 3 EUR.",
        ]
    )
    runner = Runner(Supervisor(ReActAgent("manager", manager_model), [research]))

    first = await runner.invoke("Price our tea.")
    second = await runner.invoke([*first.messages, Message.user("And coffee?")])

    assert second.text == "Coffee is 3 EUR."
    objectives = _objectives(executor_model)
    assert objectives == [
        "Objective:\nPrice our tea.\nFor context: [manager] said: Research tea prices.",
        "Objective:\nFor context: [manager] said: Tea is 4 EUR..\nAnd coffee?\n"
        "For context: [manager] said: Now coffee.",
    ]
    assert second.session["objective"] == objectives[1].removeprefix("Objective:\n")


async def test_a_carried_conversation_objective_leaves_out_transfers() -> None:
    """The first turn of a worker late in a conversation reads the whole conversation, as the
    first delegation of a run does, but not the transfers to the other workers carried in it."""
    executor_model = ScriptedModel(["4 EUR a box."])
    research = PlanExecute(
        new_planner(ScriptedModel([json.dumps({"steps": ["find prices"]})]), name="r_planner"),
        new_executor(executor_model, tools=[], name="r_executor"),
        new_replanner(ScriptedModel(["Tea: 4 EUR."]), name="r_replanner"),
        name="research",
        description="Researches with a plan.",
    )
    chat = ReActAgent("chat", ScriptedModel(["Hello!"]), description="Chats.")
    to = {
        name: Message.assistant("", [tool_call("transfer_to_agent", {"agent_name": name})])
        for name in ("chat", "research")
    }
    manager_model = ScriptedModel([to["chat"], "Said hello.", to["research"], "Tea is 4 EUR."])
    runner = Runner(Supervisor(ReActAgent("manager", manager_model), [chat, research]))

    first = await runner.invoke("Hi!")
    assert any("transfer_to_agent" in m.content for m in first.messages)  # carried as context
    await runner.invoke([*first.messages, Message.user("Price our tea.")])

    prompt = executor_model.requests[0].messages[-1].content
    assert prompt.startswith(
        "Objective:\nHi!\nFor context: [chat] said: Hello!.\n"
        "For context: [manager] said: Said hello..\nPrice our tea.\n\nPlan"
    )


async def test_a_carried_objective_leaves_out_the_transfers_of_a_manager_whose_name_has_brackets() -> (
    None
):
    """Agent names are free text: a manager called ``desk [EU]`` is carried as ``For context:
    [desk [EU]] called tool: ...``, which the reading of the carried turns took for no transfer
    (its author was read as what comes before the first ``]``), so its transfers stayed in the
    objective; read with the name the message gives, they go as any manager's do."""
    executor_model = ScriptedModel(["4 EUR a box."])
    research = _research(ScriptedModel([json.dumps({"steps": ["find prices"]})]), executor_model)
    carried = [
        Message.user("Hi!"),
        Message.user(
            "For context: [desk [EU]] said: Hello. [desk [EU]] called tool: `transfer_to_agent` "
            'with arguments: {"agent_name": "chat"}.'
        ),
        Message.user(
            "For context: [desk [EU]] `transfer_to_agent` tool returned result: Transferred to "
            "agent 'chat'."
        ),
        Message.user("Price our tea."),
    ]
    to_research = Message.assistant(
        "", [tool_call("transfer_to_agent", {"agent_name": "research"})]
    )
    manager = ReActAgent("desk [EU]", ScriptedModel([to_research, "Tea costs 4 EUR."]))

    await Runner(Supervisor(manager, [research])).invoke(carried)

    prompt = executor_model.requests[0].messages[-1].content
    assert prompt.startswith(
        "Objective:\nHi!\nFor context: [desk [EU]] said: Hello.\nPrice our tea.\n\nPlan"
    )


async def test_a_long_carried_message_is_read_in_one_pass() -> None:
    """The carried turns were searched with a pattern tried at every `` [`` of a message, each
    try reading on to the next ``]``: a message of many `` [`` and no ``]`` (a client's, a tool
    result carried as context) cost its length squared, 86 s of the event loop for 150 kB. Read
    now from where the message says its author, it is kept whole, in a pass over it."""
    executor_model = ScriptedModel(["4 EUR a box."])
    research = _research(ScriptedModel([json.dumps({"steps": ["find prices"]})]), executor_model)
    long = "For context: [chat] said: " + " [a" * 20_000 + "."
    to_research = Message.assistant(
        "", [tool_call("transfer_to_agent", {"agent_name": "research"})]
    )
    manager = ReActAgent("manager", ScriptedModel([to_research, "Tea costs 4 EUR."]))

    await Runner(Supervisor(manager, [research])).invoke([Message.user(long), Message.user("Go.")])

    prompt = executor_model.requests[0].messages[-1].content
    assert prompt.startswith(f"Objective:\n{long}\nGo.\n\nPlan")


def _checking_web() -> tuple[PlanExecute, ScriptedModel]:
    """A PlanExecute whose one step calls a tool, answering each time it is asked; its
    executor's model."""

    @tool
    def check(host: str) -> str:
        """Check a host."""
        return f"{host} ok"

    def executes(messages: list[Message]) -> str | Reply:
        if messages[-1].role == "tool":
            return f"checked: {messages[-1].content}"
        return Reply(tool_calls=[tool_call("check", {"host": "web"})])

    executor_model = ScriptedModel(executes)
    agent = PlanExecute(
        new_planner(ScriptedModel(lambda _: json.dumps({"steps": ["check web"]}))),
        new_executor(executor_model, tools=[check]),
        new_replanner(ScriptedModel(lambda _: "Web is fine.")),
    )
    return agent, executor_model


async def test_a_loops_next_iteration_leaves_the_plan_executes_earlier_work_out_of_its_objective() -> (
    None
):
    """A LoopAgent running a PlanExecute and a critic: each iteration's objective was every user
    message and every `For context` line since the run began, the PlanExecute's own earlier
    turns included (its plan, the executor's tool calls and results, its answer), growing with
    each iteration in every executor and replanner prompt. Its own turns are left out now but
    for their answer (which the critic answers, see
    test_its_earlier_answer_stays_in_the_objective_...); what the others said (the critic)
    stays."""
    agent, executor_model = _checking_web()
    critic = ReActAgent("critic", ScriptedModel(["Check again", "Enough"]))
    await Runner(LoopAgent("monitor", [agent, critic], max_iterations=2)).invoke("Is web up?")

    assert _objectives(executor_model)[::2] == [
        "Objective:\nIs web up?",
        "Objective:\nIs web up?\nFor context: [replanner] said: Web is fine..\n"
        "For context: [critic] said: Check again.",
    ]


async def test_a_carried_conversation_leaves_the_plan_executes_earlier_work_out_of_its_objective() -> (
    None
):
    """A chat on a PlanExecute carried from run to run on ``result.messages``: every earlier
    turn's plan, tool calls, step results and answer came back as the objective's ``For context``
    lines. What the user asked stays, and each turn's answer (what a follow-up refers to)."""
    agent, executor_model = _checking_web()
    runner = Runner(agent)
    first = await runner.invoke("Is web up?")
    second = await runner.invoke([*first.messages, Message.user("And now?")])

    objective = "Is web up?\nFor context: [replanner] said: Web is fine..\nAnd now?"
    assert second.session["objective"] == objective
    assert _objectives(executor_model)[::2] == [
        "Objective:\nIs web up?",
        f"Objective:\n{objective}",
    ]


async def test_its_earlier_answer_stays_in_the_objective_a_critique_or_follow_up_refers_to() -> (
    None
):
    """Its own earlier turns went from the objective whole (6fa0d9f1), their answers too: a
    critic's ``Too long: shorten it.`` in a LoopAgent's next iteration, or a user's ``Shorter,
    please.`` in a carried conversation, came without the summary it means, and the executor,
    which reads only its step's prompt, had nothing to shorten. A turn's answer (its last
    message, text) stays; its plan, tool calls and results and step results still go."""
    summary = "Summary: revenue rose 4%."
    agent = PlanExecute(
        new_planner(ScriptedModel(lambda _: json.dumps({"steps": ["summarize"]}))),
        new_executor(ScriptedModel(lambda _: "Draft: revenue rose 4% in Q3.")),
        new_replanner(ScriptedModel(lambda _: summary)),
    )
    answer = f"For context: [replanner] said: {summary}."

    critic = ReActAgent("critic", ScriptedModel(["Too long: shorten it.", "Good."]))
    refine = LoopAgent("refine", [agent, critic], max_iterations=2)
    looped = await Runner(refine).invoke("Summarize the report.")
    assert looped.session["objective"] == (
        f"Summarize the report.\n{answer}\nFor context: [critic] said: Too long: shorten it.."
    )

    first = await Runner(agent).invoke("Summarize the report.")
    second = await Runner(agent).invoke([*first.messages, Message.user("Shorter, please.")])
    assert second.session["objective"] == f"Summarize the report.\n{answer}\nShorter, please."
    assert "Draft" not in second.session["objective"]


async def test_its_earlier_answer_given_by_a_return_directly_tool_stays_in_the_objective() -> None:
    """A replanner may answer with a return-directly tool's result (PlanExecute takes it as the
    response): that turn's answer is the tool's result, kept as a text answer is, live and
    carried."""

    @tool
    def publish(text: str) -> str:
        """Publish the final answer."""
        return f"Published: {text}"

    def replans(messages: list[Message]) -> Reply:
        return Reply(tool_calls=[tool_call("publish", {"text": "revenue rose 4%"})])

    agent = PlanExecute(
        new_planner(ScriptedModel(lambda _: json.dumps({"steps": ["summarize"]}))),
        new_executor(ScriptedModel(lambda _: "Draft: revenue rose 4% in Q3.")),
        ReActAgent(
            "replanner", ScriptedModel(replans), tools=[publish], return_directly=["publish"]
        ),
    )
    answer = "For context: [replanner] `publish` tool returned result: Published: revenue rose 4%."

    critic = ReActAgent("critic", ScriptedModel(["Say the quarter.", "Good."]))
    looped = await Runner(LoopAgent("refine", [agent, critic], max_iterations=2)).invoke("Go.")
    assert looped.session["objective"] == (
        f"Go.\n{answer}\nFor context: [critic] said: Say the quarter.."
    )

    first = await Runner(agent).invoke("Go.")
    second = await Runner(agent).invoke([*first.messages, Message.user("Say the quarter.")])
    assert second.session["objective"] == f"Go.\n{answer}\nSay the quarter."
