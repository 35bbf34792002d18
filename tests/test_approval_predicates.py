"""``require_approval`` as a function of each call: ``(ctx, arguments) -> bool`` (or awaitable),
the OpenAI Agents SDK's ``needs_approval`` and Google ADK's ``require_confirmation`` functions.

Asked once per call, with the validated arguments, before the pause; a call it lets through runs
as a tool without approval would. What it decided is kept across the pause: a resumed call is not
asked again (a paused approval request stands on the person's decision; a call it let through that
then paused on its own goes on without asking), so a function whose answer changed since (it reads
the session, a limit, the time) cannot flip a call half done. A person's edit of the arguments is
not put to it again: the person approved those very arguments."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import wire_model
from mcp_servers.process import STDIO_SCRIPT
from openai_server import Call as WireCall
from openai_server import OpenAIServer
from openai_server import Reply as WireReply

import adk
from adk import AgentTool, Interrupt, Runner, ToolContext
from adk.checkpoint import SQLiteCheckpointStore
from adk.mcp import MCPToolset, StdioServer
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

POINT = "agent:pay/tool:send_payment#{}"


class Payments:
    """A payment tool whose ``require_approval`` function asks for payments over ``limit`` (read
    when asked, so a test can change its answer between a pause and its resume); records what
    the function was asked and what was sent."""

    def __init__(self, limit: int = 10_000, *, asynchronous: bool = False) -> None:
        self.limit = limit
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.sent: list[str] = []

        def over_limit(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
            self.asked.append((ctx.tool_call_id, arguments))
            return bool(arguments["amount_cents"] > self.limit)

        async def over_limit_async(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
            return over_limit(ctx, arguments)

        @adk.tool(require_approval=over_limit_async if asynchronous else over_limit)
        def send_payment(payee: str, amount_cents: int) -> str:
            """Send a payment."""
            self.sent.append(f"{amount_cents} to {payee}")
            return f"sent {amount_cents} to {payee}"

        self.tool = send_payment


def _pay(payee: str, amount_cents: int, call_id: str) -> adk.ToolCall:
    return tool_call("send_payment", {"payee": payee, "amount_cents": amount_cents}, id=call_id)


def _runner(tool: adk.Tool, store: SQLiteCheckpointStore, *replies: Any) -> Runner:
    model = ScriptedModel(list(replies))
    return Runner(ReActAgent("pay", model, tools=[tool]), checkpoint_store=store)


def _results(messages: list[adk.Message]) -> list[str]:
    return [m.content for m in messages if m.role == "tool"]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_only_the_calls_the_function_names_pause_and_a_fresh_runner_resumes_them(
    asynchronous: bool, tmp_path: Path
) -> None:
    payments = Payments(asynchronous=asynchronous)
    calls = [_pay("ACME", 500, "call_1"), _pay("Initech", 20_000, "call_2")]
    answer = Reply(text="done")
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        paused = await _runner(payments.tool, store, Reply(tool_calls=calls)).invoke("pay both")

        assert paused.interrupt is not None and paused.checkpoint_id is not None
        [point] = paused.interrupt.points
        assert point.id == POINT.format("call_2")
        assert point.info == {
            "type": "approval",
            "tool": "send_payment",
            "arguments": {"payee": "Initech", "amount_cents": 20_000},
            "tool_call_id": "call_2",
        }
        assert payments.sent == ["500 to ACME"]  # the small one ran at once
        # Asked once per call, with the validated arguments by name (an int, not JSON text).
        assert sorted(payments.asked, key=lambda a: a[0]) == [
            ("call_1", {"payee": "ACME", "amount_cents": 500}),
            ("call_2", {"payee": "Initech", "amount_cents": 20_000}),
        ]

        resumed = _runner(payments.tool, store, answer)  # another process's runner, same file
        done = await resumed.invoke_resume(paused.checkpoint_id, True)

    assert done.text == "done"
    assert payments.sent == ["500 to ACME", "20000 to Initech"]
    assert len(payments.asked) == 2  # not asked again on resume


async def test_a_paused_approval_stands_on_the_decision_when_the_function_would_now_say_no(
    tmp_path: Path,
) -> None:
    """Asked again on resume, a function that now lets the call through would have run a call a
    person had just denied."""
    payments = Payments()
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        first = _runner(payments.tool, store, Reply(tool_calls=[_pay("ACME", 20_000, "call_1")]))
        paused = await first.invoke("pay")
        assert paused.checkpoint_id is not None

        payments.limit = 1_000_000  # the function would now let it through
        resumed = _runner(payments.tool, store, lambda messages: messages[-1].content)
        done = await resumed.invoke_resume(paused.checkpoint_id, {"approved": False})

    assert payments.sent == []
    assert done.text == "Error: the call to 'send_payment' was not approved"
    assert len(payments.asked) == 1


async def test_a_call_let_through_that_pauses_on_its_own_is_not_put_to_the_function_again(
    tmp_path: Path,
) -> None:
    """The call needed no approval when it ran, and paused on its own (a question of its own).
    Asked again on resume, the function (whose limit has dropped since) would have paused the
    half-done call for an approval, and the answer meant for its question would have been read
    as the decision; without the record of its clearance the resume was refused as never
    approved."""
    asked: list[str] = []
    limit = {"cents": 10_000}

    def over_limit(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        asked.append(ctx.tool_call_id)
        return bool(arguments["amount_cents"] > limit["cents"])

    booked: list[str] = []

    @adk.tool(require_approval=over_limit)
    def book(city: str, amount_cents: int, ctx: ToolContext) -> str:
        """Book a flight; asks for a seat."""
        if ctx.resume is None:
            raise Interrupt("window or aisle?")
        booked.append(f"{city}: {ctx.resume.data}")
        return f"booked {ctx.resume.data}"

    call = tool_call("book", {"city": "Lisbon", "amount_cents": 500}, id="call_1")
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        paused = await _runner(book, store, Reply(tool_calls=[call])).invoke("fly")
        assert paused.interrupt is not None and paused.checkpoint_id is not None
        assert paused.interrupt.points[0].info == "window or aisle?"

        limit["cents"] = 0  # every call would need approval now
        resumed = _runner(book, store, lambda messages: messages[-1].content)
        done = await resumed.invoke_resume(paused.checkpoint_id, "aisle")

    assert booked == ["Lisbon: aisle"] and done.text == "booked aisle"
    assert asked == ["call_1"]


async def test_a_function_added_since_a_call_paused_unapproved_refuses_its_resume(
    tmp_path: Path,
) -> None:
    """As for ``require_approval=True`` added since the pause: the call was never cleared, and
    the function is not asked about a paused call, so the resume is refused and nothing runs."""
    booked: list[str] = []

    def book(city: str, amount_cents: int, ctx: ToolContext) -> str:
        """Book a flight; asks for a seat."""
        if ctx.resume is None:
            raise Interrupt("window or aisle?")
        booked.append(city)
        return "booked"

    def never(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        raise AssertionError("asked about a paused call")

    call = tool_call("book", {"city": "Lisbon", "amount_cents": 500}, id="call_1")
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        before = _runner(adk.FunctionTool(book), store, Reply(tool_calls=[call]))
        paused = await before.invoke("fly")
        assert paused.checkpoint_id is not None

        guarded = adk.FunctionTool(book, require_approval=never)
        with pytest.raises(adk.RunError) as refused:
            await _runner(guarded, store, "done").invoke_resume(paused.checkpoint_id, "aisle")
        assert await store.get(paused.checkpoint_id) is not None

    assert "tool 'book' requires approval" in str(refused.value)
    assert "without having been approved" in str(refused.value)
    assert booked == []


async def test_an_edited_approval_runs_the_edit_without_asking_the_function_again() -> None:
    """The person approved the edited arguments themselves: the function is not asked about them
    (an edit down to an amount it lets through, or up to one it would ask about, runs alike)."""
    payments = Payments()
    model = ScriptedModel([Reply(tool_calls=[_pay("ACME", 20_000, "call_1")]), "paid"])
    runner = Runner(ReActAgent("pay", model, tools=[payments.tool]))
    paused = await runner.invoke("pay")
    assert paused.checkpoint_id is not None

    edit = {"approved": True, "arguments": {"payee": "ACME", "amount_cents": 50_000}}
    done = await runner.invoke_resume(paused.checkpoint_id, edit)

    assert done.text == "paid" and payments.sent == ["50000 to ACME"]
    assert [call_id for call_id, _ in payments.asked] == ["call_1"]


@pytest.mark.parametrize(
    ("check", "problem"),
    [
        (lambda ctx, arguments: arguments["missing"], "failed (KeyError: 'missing')"),
        (lambda ctx, arguments: "yes", "answered str 'yes', not True or False"),
        (lambda ctx, arguments: None, "answered None, not True or False"),
    ],
)
async def test_a_function_that_fails_or_answers_no_bool_fails_the_call_and_nothing_runs(
    check: Any, problem: str
) -> None:
    sent: list[int] = []

    @adk.tool(require_approval=check)
    def send_payment(payee: str, amount_cents: int) -> str:
        """Send a payment."""
        sent.append(amount_cents)
        return "sent"

    model = ScriptedModel([Reply(tool_calls=[_pay("ACME", 5, "call_1")]), "gave up"])
    result = await Runner(ReActAgent("pay", model, tools=[send_payment])).invoke("pay")

    assert sent == [] and result.text == "gave up"
    assert _results(model.requests[1].messages) == [
        f"Error: the require_approval function of tool 'send_payment' {problem}, so the call "
        "did not run"
    ]


async def test_a_function_that_raises_interrupt_fails_the_call() -> None:
    """An ``Interrupt`` from the function would have paused a call that then could not resume
    (it was never cleared): the function answers, the framework pauses."""

    def asks_itself(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        raise Interrupt("approve?")

    @adk.tool(require_approval=asks_itself)
    def send_payment(payee: str, amount_cents: int) -> str:
        """Send a payment."""
        return "sent"

    model = ScriptedModel([Reply(tool_calls=[_pay("ACME", 5, "call_1")]), "gave up"])
    result = await Runner(ReActAgent("pay", model, tools=[send_payment])).invoke("pay")

    assert result.interrupt is None
    assert _results(model.requests[1].messages) == [
        "Error: the require_approval function of tool 'send_payment' raised Interrupt, so the "
        "call did not run; it answers True (pause the call for approval) or False"
    ]


async def test_invalid_arguments_are_the_models_to_correct_before_the_function_is_asked() -> None:
    payments = Payments()
    bad = tool_call("send_payment", {"payee": "ACME", "amount_cents": "lots"}, id="call_1")
    model = ScriptedModel([Reply(tool_calls=[bad]), "fixed"])
    await Runner(ReActAgent("pay", model, tools=[payments.tool])).invoke("pay")

    assert payments.asked == []
    [result] = _results(model.requests[1].messages)
    assert result.startswith("Error: invalid arguments for tool 'send_payment': amount_cents")


async def test_inside_an_agent_tool_the_nested_call_pauses_and_resumes_from_another_runner(
    tmp_path: Path,
) -> None:
    payments = Payments()

    def outer(store: SQLiteCheckpointStore, inner_script: list[Any], script: list[Any]) -> Runner:
        inner = ReActAgent(
            "pay", ScriptedModel(inner_script), "Pays.", description="Pays.", tools=[payments.tool]
        )
        model = ScriptedModel(script)
        return Runner(ReActAgent("desk", model, tools=[AgentTool(inner)]), checkpoint_store=store)

    delegate = tool_call("pay", {"request": "pay ACME and Initech"}, id="outer_1")

    calls = [_pay("ACME", 500, "call_1"), _pay("Initech", 20_000, "call_2")]
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        first = outer(store, [Reply(tool_calls=calls)], [Reply(tool_calls=[delegate])])
        paused = await first.invoke("pay")
        assert paused.interrupt is not None and paused.checkpoint_id is not None
        assert paused.interrupt.point_ids == [
            "agent:desk/tool:pay#outer_1/agent:pay/tool:send_payment#call_2"
        ]
        assert payments.sent == ["500 to ACME"]

        second = outer(store, ["both paid"], [lambda m: m[-1].content])
        done = await second.invoke_resume(paused.checkpoint_id, "yes")

    assert done.text == "both paid"
    assert payments.sent == ["500 to ACME", "20000 to Initech"]
    assert len(payments.asked) == 2


def test_a_function_tools_require_approval_keeps_what_it_was_given() -> None:
    def over_limit(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        return True

    @adk.tool(require_approval=over_limit)
    def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    assert refund.require_approval is over_limit


async def test_a_require_approval_function_set_after_the_tool_is_made_decides_per_call(
    tmp_path: Path,
) -> None:
    """``tool.require_approval = function`` on a tool made without one: the function decides,
    as given at construction (it was copied then, and a function set later paused every call
    without being asked); a value neither a bool nor such a function is refused, naming the
    tool."""
    payments = Payments()
    check = payments.tool.require_approval
    tool = adk.FunctionTool(payments.tool.fn)  # the same function, made needing no approval
    tool.require_approval = check
    assert tool.require_approval is check
    store = SQLiteCheckpointStore(tmp_path / "c.db")
    runner = _runner(tool, store, Reply(tool_calls=[_pay("ACME", 500, "c1")]), Reply(text="paid"))
    result = await runner.invoke("pay ACME 5 dollars")
    assert result.interrupt is None and payments.sent == ["500 to ACME"]
    assert [call_id for call_id, _ in payments.asked] == ["c1"]
    with pytest.raises(TypeError, match="tool 'send_payment': require_approval must be"):
        tool.require_approval = "yes"  # type: ignore[assignment]
    assert tool.require_approval is check


# -- MCP ------------------------------------------------------------------------------------------
def _stdio() -> StdioServer:
    return StdioServer(sys.executable, [str(STDIO_SCRIPT)])


async def test_an_mcp_toolset_takes_a_function_per_tool_name_that_decides_per_call(
    tmp_path: Path,
) -> None:
    """``require_approval`` already took a predicate over each tool's spec (asked at listing), so
    a function of each call comes in a mapping of the server's tool names."""
    asked: list[tuple[str, dict[str, Any]]] = []

    def big(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        asked.append((ctx.tool_name, arguments))
        return bool(arguments["a"] > 10)

    calls = [
        tool_call("m_add", {"a": 2, "b": 3}, id="c1"),
        tool_call("m_add", {"a": 20, "b": 3}, id="c2"),
    ]

    def runner(store: SQLiteCheckpointStore, toolset: MCPToolset, *script: Any) -> Runner:
        return Runner(
            ReActAgent("ops", ScriptedModel(list(script)), tools=[toolset]),
            checkpoint_store=store,
        )

    setting = {"add": big, "echo": False}
    async with (
        SQLiteCheckpointStore(tmp_path / "c.db") as store,
        MCPToolset(_stdio(), tool_filter=["add"], prefix="m", require_approval=setting) as tools,
    ):
        paused = await runner(store, tools, Reply(tool_calls=calls)).invoke("add")
        assert paused.interrupt is not None and paused.checkpoint_id is not None
        [point] = paused.interrupt.points
        assert point.info == {
            "type": "approval",
            "tool": "m_add",
            "arguments": {"a": 20, "b": 3},
            "tool_call_id": "c2",
        }
        answer = runner(store, tools, lambda m: " ".join(x.content for x in m[-2:]))
        done = await answer.invoke_resume(paused.checkpoint_id, True)

    assert sorted(done.text.split()) == ["23", "5"]
    assert sorted(asked, key=lambda a: a[1]["a"]) == [
        ("m_add", {"a": 2, "b": 3}),
        ("m_add", {"a": 20, "b": 3}),
    ]


@pytest.mark.parametrize("by", ["flag", "function"])
async def test_an_mcp_call_its_input_schema_refuses_is_the_models_to_correct_before_anyone_is_asked(
    by: str,
) -> None:
    """An MCP tool that needs approval paused a call whose arguments its input schema refuses
    (a required one missing, one of the wrong type): a person was asked to approve ``add({"a":
    2})``, and the server refused it once approved, so the decision was for nothing; a
    ``require_approval`` function was handed the arguments unchecked (a KeyError there failed
    the call with that error, not with what was wrong). A function tool's invalid arguments are
    the model's to correct before anyone is asked (interrupts.md); an MCP tool's now too, checked
    against the schema the edit of an approval is checked against. The model's corrected call
    then pauses as usual."""
    asked: list[dict[str, Any]] = []

    def always(ctx: ToolContext, arguments: dict[str, Any]) -> bool:
        asked.append(arguments)
        return arguments["b"] > 0

    setting: Any = True if by == "flag" else {"add": always}
    bad = [
        tool_call("add", {"a": 2}, id="c1"),
        tool_call("add", {"a": "two", "b": 3}, id="c2"),
    ]
    model = ScriptedModel(
        [Reply(tool_calls=bad), Reply(tool_calls=[tool_call("add", {"a": 2, "b": 3}, id="c3")])]
    )
    async with MCPToolset(_stdio(), tool_filter=["add"], require_approval=setting) as tools:
        paused = await Runner(ReActAgent("ops", model, tools=[tools])).invoke("add")
    assert paused.interrupt is not None
    assert paused.interrupt.point_ids == ["agent:ops/tool:add#c3"]
    assert _results(model.requests[1].messages) == [
        "Error: invalid arguments for tool 'add': arguments: 'b' is a required property",
        "Error: invalid arguments for tool 'add': a: 'two' is not of type 'integer'",
    ]
    assert asked == ([] if by == "flag" else [{"a": 2, "b": 3}])


async def test_what_an_mcp_calls_schema_refuses_is_told_without_echoing_a_huge_argument() -> None:
    """The schema check of a call needing approval told the model jsonschema's messages, which
    hold the refused value itself: an argument of 100,000 characters where a number belongs came
    back whole in the error the model reads (pydantic's, a function tool's, name no value). Each
    problem is told in a bounded length now, still saying what is wrong."""
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("add", {"a": "x" * 100_000, "b": 3}, id="c1")]), "ok"]
    )
    async with MCPToolset(_stdio(), tool_filter=["add"], require_approval=True) as tools:
        done = await Runner(ReActAgent("ops", model, tools=[tools])).invoke("add")
    assert done.text == "ok"
    [told] = _results(model.requests[1].messages)
    assert told.startswith("Error: invalid arguments for tool 'add': a: 'xxx")
    assert told.endswith("xxx' is not of type 'integer'")
    assert len(told) < 400


@pytest.mark.parametrize(
    ("setting", "problem"),
    [
        ({"add": "yes"}, r"require_approval\['add'\]: require_approval must be True, False, or a"),
        ({"add": lambda args: True}, r"require_approval\['add'\]: require_approval is a function"),
        ({1: True}, r"require_approval: keys must be tool names \(str\), got 1"),
    ],
)
def test_an_mcp_approval_mapping_is_checked_where_the_toolset_is_made(
    setting: Any, problem: str
) -> None:
    with pytest.raises(TypeError, match=problem):
        MCPToolset(_stdio(), require_approval=setting)


@pytest.mark.parametrize("setting", [{"m_add": True}, ["m_add"]])
async def test_an_mcp_approval_naming_the_prefixed_tool_is_refused_as_its_tools_are_listed(
    setting: Any,
) -> None:
    """The approval request names the tool as the model sees it (``m_add``), and an app copying
    that name into ``require_approval`` matched no server tool: ``add`` ran without asking. The
    listing refuses it, naming the server's name to use instead."""
    async with MCPToolset(_stdio(), prefix="m", require_approval=setting) as tools:
        with pytest.raises(RuntimeError, match=r"names tool\(s\) 'm_add' \(the server's 'add'\)"):
            await tools.tools()


async def test_an_mcp_approval_name_the_server_does_not_list_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with MCPToolset(_stdio(), require_approval={"add": True, "ad": True}) as tools:
        with caplog.at_level("WARNING", logger="adk.mcp"):
            listed = {tool.spec.name for tool in await tools.tools()}
    assert "add" in listed
    [record] = [r for r in caplog.records if "require_approval" in r.getMessage()]
    assert "lists no tool named 'ad'" in record.getMessage()


# -- a service: the OpenAI wire protocol, SQLite, a fresh runner ---------------------------------
async def test_a_service_pauses_only_the_large_payment_and_resumes_it_after_a_restart(
    tmp_path: Path,
) -> None:
    payments = Payments()
    calls = [
        WireCall("send_payment", json.dumps({"payee": "ACME", "amount_cents": 500}), "call_1"),
        WireCall("send_payment", json.dumps({"payee": "Initech", "amount_cents": 20_000}), "c2"),
    ]
    script = [WireReply(tool_calls=calls), WireReply(text="both paid")]

    def service(store: SQLiteCheckpointStore, base_url: str) -> Runner:
        model = wire_model(base_url, name="wire", api_key="test")
        return Runner(ReActAgent("pay", model, tools=[payments.tool]), checkpoint_store=store)

    async with OpenAIServer(script) as server:
        async with (
            SQLiteCheckpointStore(tmp_path / "c.db") as store,
            service(store, server.base_url) as runner,
        ):
            paused = await runner.invoke("pay both")
        assert paused.interrupt is not None and paused.checkpoint_id is not None
        assert paused.interrupt.point_ids == [POINT.format("c2")]
        assert payments.sent == ["500 to ACME"]

        async with (
            SQLiteCheckpointStore(tmp_path / "c.db") as store,
            service(store, server.base_url) as runner,
        ):
            done = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
        sent_back = server.requests[1].body["messages"][-2:]

    assert done.text == "both paid"
    assert payments.sent == ["500 to ACME", "20000 to Initech"]
    assert sorted(m["content"] for m in sent_back) == ["sent 20000 to Initech", "sent 500 to ACME"]
