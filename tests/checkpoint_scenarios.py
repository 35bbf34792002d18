"""Paused runs whose checkpoints an older pyadk wrote and this one resumes
(``tests/test_checkpoint_upgrade.py``).

``tests/data/checkpoints/make_checkpoints.py`` runs these scenarios under an older commit of pyadk
(``PYTHONPATH=<a worktree of it>``) and writes each paused run's checkpoint bytes to
``tests/data/checkpoints/<commit>/<scenario>.ckpt``; the test resumes those bytes with this pyadk
and compares the result with the same scenario paused and resumed here. So this module uses only
the API every such commit has (``adk``, ``adk.testing``, ``prebuilt``, ``adk.actions``,
``adk.mcp``): a scenario changed here no longer matches the bytes already written, so add new
scenarios rather than edit old ones.

Each scenario's agents are deterministic: scripted models whose answers depend only on the
messages they are sent, tools and agents that note what they did in ``LOG`` (and models what they
were sent), so two runs that resumed alike leave the same ``LOG``.

PYTEST_DONT_REWRITE (run by the generator under another pyadk, outside pytest)
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field

import adk
from adk import (
    AgentEvent,
    AgentInput,
    AgentTool,
    BaseAgent,
    LoopAgent,
    Message,
    ParallelAgent,
    Role,
    RunContext,
    SequentialAgent,
)
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, Supervisor, new_executor, new_planner, new_replanner

LOG: list[Any] = []
"""What the scenarios' agents, tools and models did, in order (cleared by the caller)."""


def in_call_order(messages: list[Message]) -> list[Message]:
    """``messages`` with each run of tool results sorted by call id: a round's results come in
    the order its calls finished (a denied call at once, an approved one from its thread)."""
    out: list[Message] = []
    for m in messages:
        if m.role == Role.TOOL:
            run = 0
            while run < len(out) and out[-1 - run].role == Role.TOOL:
                run += 1
            at = len(out) - run
            while at < len(out) and (out[at].tool_call_id or "") <= (m.tool_call_id or ""):
                at += 1
            out.insert(at, m)
        else:
            out.append(m)
    return out


def call_refs() -> Callable[[str | None], int | None]:
    """Numbers for tool call ids in order of first use, so that two conversations compare by which
    call each result answers whatever ids the calls were given."""
    refs: dict[str, int] = {}
    return lambda id: None if id is None else refs.setdefault(id, len(refs))


def _said(messages: list[Message]) -> list[Any]:
    """What a model was sent, as plain data: role, text, tool calls and the call a result
    answers (a round's results in call order; call ids as ``call_refs`` numbers them)."""
    ref = call_refs()
    return [
        [
            str(m.role),
            m.content,
            [[ref(c.id), c.name, json.loads(c.arguments or "{}")] for c in m.tool_calls],
            ref(m.tool_call_id),
        ]
        for m in in_call_order(messages)
    ]


def logged(name: str, answer: Callable[[list[Message]], Reply | str]) -> ScriptedModel:
    """A scripted model answering with ``answer`` that notes what it was sent."""

    def respond(messages: list[Message]) -> Reply | str:
        LOG.append(("model", name, _said(messages)))
        return answer(messages)

    return ScriptedModel(respond)


def _last_tool(messages: list[Message]) -> Message | None:
    return messages[-1] if messages and messages[-1].role == Role.TOOL else None


@adk.tool(require_approval=True)
def pay(payee: str, cents: int) -> str:
    """Pay someone (a person approves first).

    Args:
        payee: Who is paid.
        cents: How much.
    """
    LOG.append(("pay", payee, cents))
    return f"paid {cents} to {payee}"


class Step(BaseAgent):
    """Notes that it ran and says so."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        LOG.append(("ran", self.name))
        yield AgentEvent.of(f"{self.name} done")


class Ask(BaseAgent):
    """Pauses with a question (keeping a state); on resume notes the answer and its state."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            LOG.append(("asked", self.name))
            yield ctx.interrupt(f"{self.name}?", state={"asked": self.name, "n": [1, 2.5]})
            return
        LOG.append(("answered", self.name, ctx.resume.data, ctx.resume.state))
        yield AgentEvent.of(f"{self.name}: {ctx.resume.data}")


@dataclass
class Scenario:
    """A run that pauses, and the answers its resumes give, one per pause (the last ends it)."""

    name: str
    input: str
    answers: list[Any]
    build: Callable[[AsyncExitStack], Any]  # async: the root agent, resources entered on the stack
    expected_text: str
    notes: list[str] = field(default_factory=list)


# -- a ReActAgent: two calls awaiting approval, one approved with edited arguments ---------------
def _payments_model(messages: list[Message]) -> Reply | str:
    results = [m for m in messages if m.role == Role.TOOL]
    if results:
        return "Done: " + "; ".join(m.content for m in in_call_order(results))
    calls = [
        tool_call("pay", {"payee": "ann", "cents": 500}, id="c1"),
        tool_call("pay", {"payee": "bob", "cents": 900}, id="c2"),
    ]
    return Reply(text="Paying both.", tool_calls=calls)


async def _react(stack: AsyncExitStack) -> Any:
    return ReActAgent(
        "payments",
        logged("payments", _payments_model),
        instruction="You pay the bills of {user}.",
        tools=[pay],
    )


_C1 = "agent:payments/tool:pay#c1"
_C2 = "agent:payments/tool:pay#c2"


# -- a ReActAgent's round holding the exit tool's call beside a call awaiting approval ----------
def _closer_model(messages: list[Message]) -> Reply | str:
    if any(m.role == Role.TOOL for m in messages):
        return "closer: unexpected model call after exit"
    calls = [
        tool_call("pay", {"payee": "gus", "cents": 5}, id="c1"),
        tool_call("exit", {"final_result": "case closed"}, id="x1"),
    ]
    return Reply(text="Paying and closing.", tool_calls=calls)


async def _react_exit(stack: AsyncExitStack) -> Any:
    model = logged("closer", _closer_model)
    closer = ReActAgent("closer", model, tools=[pay], exit_tool=True, output_key="closing")
    return SequentialAgent("desk", [closer, Step("after")])


def _closer2_model(messages: list[Message]) -> Reply | str:
    if any(m.role == Role.TOOL for m in messages):
        return "closer: unexpected model call after exit"
    calls = [
        tool_call("pay", {"payee": "gus", "cents": 5}, id="c1"),
        tool_call("exit", {"final_result": "both closed"}, id="x1"),
        tool_call("pay", {"payee": "hal", "cents": 6}, id="c2"),
    ]
    return Reply(text="Paying twice and closing.", tool_calls=calls)


async def _react_exit_partial(stack: AsyncExitStack) -> Any:
    model = logged("closer", _closer2_model)
    closer = ReActAgent("closer", model, tools=[pay], exit_tool=True, output_key="closing")
    return SequentialAgent("desk", [closer, Step("after")])


# -- a ReActAgent's round: a tool of the user's that exits (answered first), the exit tool, a pay --
@adk.tool(require_approval=True)
def seal(case: str, ctx: adk.ToolContext) -> str:
    """Seal a case and end the conversation (a person approves first).

    Args:
        case: Which case.
    """
    LOG.append(("seal", case))
    ctx.exit()
    return f"sealed {case}"


def _sealer_model(messages: list[Message]) -> Reply | str:
    if any(m.role == Role.TOOL for m in messages):
        return "sealer: unexpected model call after exit"
    calls = [
        tool_call("seal", {"case": "c9"}, id="s1"),
        tool_call("exit", {"final_result": "case closed"}, id="x1"),
        tool_call("pay", {"payee": "gus", "cents": 5}, id="c2"),
    ]
    return Reply(text="Sealing, closing, paying.", tool_calls=calls)


async def _react_exit_sealed(stack: AsyncExitStack) -> Any:
    model = logged("sealer", _sealer_model)
    sealer = ReActAgent("sealer", model, tools=[pay, seal], exit_tool=True, output_key="closing")
    return SequentialAgent("desk", [sealer, Step("after")])


# -- parallel ReActAgents: one waits for approval, its sibling finished beside it ---------------
@adk.tool
async def lookup(topic: str) -> str:
    """Look a topic up (a coroutine: no worker thread, so the branches interleave alike in
    every run).

    Args:
        topic: What to look up.
    """
    LOG.append(("lookup", topic))
    return f"facts about {topic}"


def _analyst_model(messages: list[Message]) -> Reply | str:
    done = [m for m in messages if m.role == Role.TOOL]
    if not done:
        return Reply(text="Looking up.", tool_calls=[tool_call("lookup", {"topic": "q3"}, id="l1")])
    if len(done) == 1:
        return Reply(
            text="Paying.", tool_calls=[tool_call("pay", {"payee": "ivy", "cents": 8}, id="p1")]
        )
    return f"analyst saw {len(messages)} messages: {done[-1].content}"


def _checker_model(messages: list[Message]) -> Reply | str:
    if not any(m.role == Role.TOOL for m in messages):
        return Reply(text="Checking.", tool_calls=[tool_call("lookup", {"topic": "q4"}, id="k1")])
    return f"checker saw {len(messages)} messages"


def _after_model(messages: list[Message]) -> Reply | str:
    return f"summary of {len(messages)} messages"


async def _parallel_react(stack: AsyncExitStack) -> Any:
    analyst = ReActAgent("analyst", logged("analyst", _analyst_model), tools=[lookup, pay])
    checker = ReActAgent("checker", logged("checker", _checker_model), tools=[lookup])
    summary = ReActAgent("summary", logged("summary", _after_model))
    return SequentialAgent("team", [ParallelAgent("both", [analyst, checker]), summary])


# -- workflows: a parallel branch and a sequence in a branch paused, then a loop's step ----------
async def _workflows(stack: AsyncExitStack) -> Any:
    branches = ParallelAgent(
        "branches",
        [Ask("left"), SequentialAgent("right", [Step("r1"), Ask("r2")]), Step("third")],
    )
    loop = LoopAgent("loop", [Step("tick"), Ask("check")], max_iterations=2)
    return SequentialAgent("flow", [Step("intro"), branches, loop, Step("outro")])


# -- an AgentTool whose inner ReActAgent waits for approval -------------------------------------
def _desk_model(messages: list[Message]) -> Reply | str:
    result = _last_tool(messages)
    if result is not None:
        return f"desk: {result.content}"
    call = tool_call("treasurer", {"request": "pay carl 300"}, id="t1")
    return Reply(text="Asking the treasurer.", tool_calls=[call])


def _treasurer_model(messages: list[Message]) -> Reply | str:
    result = _last_tool(messages)
    if result is not None:
        return f"treasurer: {result.content}"
    return Reply(tool_calls=[tool_call("pay", {"payee": "carl", "cents": 300}, id="p1")])


async def _agent_tool(stack: AsyncExitStack) -> Any:
    treasurer = ReActAgent(
        "treasurer",
        logged("treasurer", _treasurer_model),
        description="Pays people.",
        tools=[pay],
    )
    return ReActAgent("desk", logged("desk", _desk_model), tools=[AgentTool(treasurer)])


# -- a Supervisor whose worker waits for approval ------------------------------------------------
def _boss_model(messages: list[Message]) -> Reply | str:
    if any(m.role == Role.TOOL and m.name == "transfer_to_agent" for m in messages):
        return "boss: the payer has paid."
    transfer = tool_call("transfer_to_agent", {"agent_name": "payer"}, id="x1")
    return Reply(text="Over to the payer.", tool_calls=[transfer])


def _payer_model(messages: list[Message]) -> Reply | str:
    result = _last_tool(messages)
    if result is not None and result.name == "pay":
        return f"payer: {result.content}"
    return Reply(tool_calls=[tool_call("pay", {"payee": "dora", "cents": 70}, id="w1")])


async def _supervisor(stack: AsyncExitStack) -> Any:
    payer = ReActAgent(
        "payer", logged("payer", _payer_model), description="Pays people.", tools=[pay]
    )
    return Supervisor(ReActAgent("boss", logged("boss", _boss_model)), [payer])


# -- a PlanExecute paused in the first of two steps ----------------------------------------------
def _planner_model(messages: list[Message]) -> Reply | str:
    return json.dumps({"steps": ["pay erin 40", "tell the user"]})


def _executor_model(messages: list[Message]) -> Reply | str:
    result = _last_tool(messages)
    if result is not None:
        return f"executed: {result.content}"
    if messages[-1].content.endswith("pay erin 40"):  # the step it is given comes last
        return Reply(tool_calls=[tool_call("pay", {"payee": "erin", "cents": 40}, id="e1")])
    return "told the user"


def _replanner_model(messages: list[Message]) -> Reply | str:
    if "told the user" in messages[-1].content:  # among the completed steps' results
        return "Erin is paid and the user told."
    return Reply(tool_calls=[tool_call("update_plan", {"steps": ["tell the user"]})])


async def _plan_execute(stack: AsyncExitStack) -> Any:
    return PlanExecute(
        new_planner(logged("planner", _planner_model)),
        new_executor(logged("executor", _executor_model), [pay]),
        new_replanner(logged("replanner", _replanner_model)),
    )


# -- a PlanExecute whose executor delegates to another PlanExecute (an AgentTool) that pauses ----
def _plan(*steps: str) -> Callable[[list[Message]], Reply | str]:
    return lambda messages: json.dumps({"steps": list(steps)})


def _outer_executor(messages: list[Message]) -> Reply | str:
    result = _last_tool(messages)
    if result is not None:
        return f"delegated: {result.content}"
    if messages[-1].content.endswith("delegate the payment"):
        return Reply(tool_calls=[tool_call("payer_plan", {"request": "pay jay 9"}, id="d1")])
    return "reported: " + messages[-1].content.split("Objective:\n")[-1].split("\n")[0]


def _outer_replanner(messages: list[Message]) -> Reply | str:
    if "reported:" in messages[-1].content:
        return "outer done: " + messages[-1].content.split("Objective:\n")[-1].split("\n")[0]
    return Reply(tool_calls=[tool_call("update_plan", {"steps": ["report"]})])


def _inner_executor(messages: list[Message]) -> Reply | str:
    result = _last_tool(messages)
    if result is not None:
        return f"inner executed: {result.content}"
    return Reply(tool_calls=[tool_call("pay", {"payee": "jay", "cents": 9}, id="j1")])


def _inner_replanner(messages: list[Message]) -> Reply | str:
    return "inner done: " + messages[-1].content.split("Objective:\n")[-1].split("\n")[0]


async def _nested_plans(stack: AsyncExitStack) -> Any:
    inner = PlanExecute(
        new_planner(logged("iplanner", _plan("pay jay 9")), name="iplanner"),
        new_executor(logged("iexecutor", _inner_executor), [pay], name="iexecutor"),
        new_replanner(logged("ireplanner", _inner_replanner), name="ireplanner"),
        name="payer_plan",
        description="Pays people by a plan of its own.",
    )
    return PlanExecute(
        new_planner(logged("planner", _plan("delegate the payment", "report"))),
        new_executor(logged("executor", _outer_executor), [AgentTool(inner)]),
        new_replanner(logged("replanner", _outer_replanner)),
        name="outer_plan",
    )


# -- an ActionAgent whose chat's tool call waits for approval ------------------------------------
# (adk.actions, adk.mcp and adk.resources are imported where used, so that the other scenarios run
# under a pyadk from before them.)
def _clerk_class() -> type[Any]:
    from adk.actions import (
        ActionAgent,
        ChatRequestEvent,
        ChatResponseEvent,
        InputEvent,
        OutputEvent,
        action,
    )

    class Clerk(ActionAgent):
        """Asks its model through the built-in chat, offering ``pay``, and outputs the answer."""

        @action(InputEvent)
        def ask(self, event: InputEvent, ctx: ActionContext) -> None:
            LOG.append(("action", "ask", str(event.input)))
            messages = [Message.user(str(event.input))]
            ctx.send_event(ChatRequestEvent(model="m", messages=messages, tools=["pay"]))

        @action(ChatResponseEvent)
        def answer(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            LOG.append(("action", "answer", event.response.content))
            ctx.send_event(OutputEvent(output=event.response.content))

    return Clerk


def _clerk_model(messages: list[Message]) -> Reply | str:
    result = _last_tool(messages)
    if result is not None:
        return f"clerk: {result.content}"
    return Reply(tool_calls=[tool_call("pay", {"payee": "fay", "cents": 12}, id="a1")])


async def _action_agent(stack: AsyncExitStack) -> Any:
    from adk.resources import Resources

    resources = Resources()
    resources.add_model("m", logged("clerk", _clerk_model))
    resources.add_tool(pay)
    return _clerk_class()("clerk", resources=resources)


# -- an ActionAgent's own action raising Interrupt, with a custom event queued behind it ---------
try:
    from adk.actions import (
        ActionAgent,
        ActionContext,
        ChatRequestEvent,
        ChatResponseEvent,
        Event,
        InputEvent,
        OutputEvent,
        action,
    )
except ImportError:  # a pyadk from before the event-driven layer (25 Nov)
    Auditor: Any = None
else:

    class Expense(Event):
        """A custom event the auditor queues for itself (saved by module and name)."""

        item: str
        cents: int
        tags: list[str] = Field(default_factory=list)

    class Auditor(ActionAgent):  # type: ignore[no-redef]
        """Queues two expenses; asks a person about the one over 10.00, the other passes."""

        @action(InputEvent)
        def receive(self, event: InputEvent, ctx: ActionContext) -> None:
            LOG.append(("action", "receive", str(event.input)))
            ctx.short_term_memory.set("received", str(event.input))
            ctx.send_event(Expense(item=str(event.input), cents=1250, tags=["travel"]))
            ctx.send_event(Expense(item="taxi", cents=900))

        @action(Expense)
        def review(self, event: Expense, ctx: ActionContext) -> None:
            resume = ctx.resume
            if resume is None and event.cents > 1000:
                LOG.append(("action", "ask", event.item))
                ctx.short_term_memory.set("asking", event.item)  # undone by the pause
                state = {"item": event.item, "tags": event.tags}
                raise adk.Interrupt({"approve": event.item, "cents": event.cents}, state=state)
            verdict = "auto" if resume is None else resume.data
            memory = ctx.short_term_memory
            LOG.append(
                (
                    "action",
                    "review",
                    [event.item, event.cents, event.tags],
                    verdict,
                    None if resume is None else resume.state,
                    [memory.get("received"), memory.get("asking")],
                )
            )
            ctx.send_event(OutputEvent(output=f"{event.item}: {verdict}"))


async def _action_interrupt(stack: AsyncExitStack) -> Any:
    if Auditor is None:
        raise ImportError("adk.actions")
    return Auditor("auditor")


# -- an ActionAgent's own Interrupt with three chats (a tool each) queued behind it --------------
# Saved by a pyadk that made queued chats' model calls one after the other; this one makes them
# at once (5f9bf37), as it does the tool results' calls after them.
@adk.tool
def score(passage: str) -> int:
    """Score a passage.

    Args:
        passage: The passage scored.
    """
    LOG.append(("score", passage))
    return len(passage)


def _grader_model(messages: list[Message]) -> Reply | str:
    result = _last_tool(messages)
    passage = messages[0].content
    if result is not None:
        return f"{passage}: {result.content}"
    return Reply(tool_calls=[tool_call("score", {"passage": passage}, id=f"s-{passage}")])


if Auditor is not None:

    class Batch(Event):
        """The passages a person releases before they are graded."""

        passages: list[str]

    class Grader(ActionAgent):
        """Holds a batch for a person's word, then grades each passage in a chat of its own."""

        @action(InputEvent)
        def receive(self, event: InputEvent, ctx: ActionContext) -> None:
            passages = str(event.input).split()
            ctx.send_event(Batch(passages=passages))
            for passage in passages:
                messages = [Message.user(passage)]
                ctx.send_event(ChatRequestEvent(model="m", messages=messages, tools=["score"]))

        @action(Batch)
        def hold(self, event: Batch, ctx: ActionContext) -> None:
            if ctx.resume is None:
                LOG.append(("action", "hold", event.passages))
                raise adk.Interrupt({"release": event.passages})
            LOG.append(("action", "released", ctx.resume.data))
            ctx.short_term_memory.set("released", ctx.resume.data)

        @action(ChatResponseEvent)
        def grade(self, event: ChatResponseEvent, ctx: ActionContext) -> None:
            grades = [*ctx.short_term_memory.get("grades", []), event.response.content]
            LOG.append(("action", "grade", grades))
            ctx.short_term_memory.set("grades", grades)
            ctx.send_event(OutputEvent(output="; ".join(grades)))


async def _action_chats(stack: AsyncExitStack) -> Any:
    if Auditor is None:
        raise ImportError("adk.actions")
    from adk.resources import Resources

    resources = Resources()
    resources.add_model("m", logged("grader", _grader_model))
    resources.add_tool(score)
    return Grader("grader", resources=resources)


# -- an MCP server's tool awaiting approval, approved with edited arguments ----------------------
def _ops_model(messages: list[Message]) -> Reply | str:
    result = _last_tool(messages)
    if result is not None:
        return f"sum is {result.content}"
    return Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="m1")])


def mcp_script() -> Path:
    """The demo MCP server over stdio of the pyadk being run (tests/mcp_servers)."""
    return Path(adk.__file__).resolve().parents[1] / "tests" / "mcp_servers" / "stdio_server.py"


async def _mcp(stack: AsyncExitStack) -> Any:
    from adk.mcp import MCPToolset, StdioServer

    server = StdioServer(sys.executable, [str(mcp_script())])
    toolset = MCPToolset(server, tool_filter=["add"], require_approval=["add"])
    await stack.enter_async_context(toolset)
    return ReActAgent("ops", logged("ops", _ops_model), tools=[toolset])


SCENARIOS = [
    Scenario(
        "react_edit",
        "pay the bills",
        [
            {
                _C1: {"approved": True, "arguments": {"payee": "ann", "cents": 450}},
                _C2: {"approved": False, "reason": "too much"},
            }
        ],
        _react,
        "Done: [A person edited this call's arguments before it ran; it ran with "
        '{"payee": "ann", "cents": 450}]\npaid 450 to ann; '
        "Error: the call to 'pay' was not approved: too much",
    ),
    Scenario(
        "react_partial",  # the edited call answered first, the other by a second resume
        "pay the bills",
        [
            {_C1: {"approved": True, "arguments": {"payee": "ann", "cents": 450}}},
            {_C2: True},
        ],
        _react,
        "Done: [A person edited this call's arguments before it ran; it ran with "
        '{"payee": "ann", "cents": 450}]\npaid 450 to ann; paid 900 to bob',
    ),
    Scenario("react_exit", "close", [True], _react_exit, "case closed"),
    Scenario(
        "react_exit_partial",  # paused again between the two answers
        "close",
        [{"agent:desk/agent:closer/tool:pay#c2": True}, True],
        _react_exit_partial,
        "both closed",
    ),
    Scenario(
        "react_exit_sealed",  # paused again once the tool that exits ran, before the pay
        "seal",
        [{"agent:desk/agent:sealer/tool:seal#s1": True}, True],
        _react_exit_sealed,
        "case closed",
    ),
    Scenario("parallel_react", "q3 and q4", [True], _parallel_react, "summary of 9 messages"),
    Scenario(
        "workflows",
        "go",
        [
            {
                "agent:flow/agent:branches/agent:left": "L",
                "agent:flow/agent:branches/agent:right/agent:r2": "R",
            },
            "first check",
            "second check",
        ],
        _workflows,
        "outro done",
    ),
    Scenario("agent_tool", "pay carl", [True], _agent_tool, "desk: treasurer: paid 300 to carl"),
    Scenario("supervisor", "pay dora", [True], _supervisor, "boss: the payer has paid."),
    Scenario(
        "plan_execute",
        "pay erin",
        [{"approved": True}],
        _plan_execute,
        "Erin is paid and the user told.",
    ),
    Scenario("nested_plans", "pay jay", [True], _nested_plans, "outer done: pay jay"),
    Scenario("action_agent", "pay fay", [True], _action_agent, "clerk: paid 12 to fay"),
    Scenario("action_interrupt", "hotel", ["approved"], _action_interrupt, "taxi: auto"),
    Scenario(
        "action_chats", "alpha beta gamma", ["go"], _action_chats, "alpha: 5; beta: 4; gamma: 5"
    ),
    Scenario(
        "mcp_approval",
        "add",
        [{"approved": True, "arguments": {"a": 20, "b": 22}}],
        _mcp,
        "sum is [A person edited this call's arguments before it ran; it ran with "
        '{"a": 20, "b": 22}]\n42',
    ),
]

SESSION = {"user": "Ann"}
"""The session every scenario's run starts with (the ReAct scenario's instruction reads it)."""
