"""Tool interrupts: inside ``ReActAgent`` (only the interrupted calls run again; completed calls are
not re-run and their events not re-emitted), inside an ``AgentTool`` (the nested run's points live
under the tool call and the resume routes back inside), and ``@tool(require_approval=True)``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from conftest import ScriptAgent, wire_model
from openai_server import Call as WireCall
from openai_server import OpenAIServer
from openai_server import Reply as WireReply
from test_interrupts import Asker, collect, pause_of, texts

import adk
from adk import (
    AgentTool,
    CheckpointError,
    Interrupt,
    ParallelAgent,
    ResumeContext,
    RunError,
    Runner,
    SequentialAgent,
    ToolContext,
)
from adk.checkpoint import InMemoryCheckpointStore, SQLiteCheckpointStore
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import ReActAgent, Supervisor


class Tools:
    """Tools that count their calls: ``lookup`` completes, ``transfer`` and ``approve`` pause until
    resumed (``approve`` once per call id)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.resumes: dict[str, ResumeContext | None] = {}

        @adk.tool
        def lookup(query: str) -> str:
            """Look something up."""
            self.calls["lookup"] += 1
            return f"found {query}"

        @adk.tool
        def transfer(amount: int, ctx: ToolContext) -> str:
            """Send money."""
            self.calls["transfer"] += 1
            self.resumes[ctx.tool_call_id] = ctx.resume
            if ctx.resume is None:
                raise Interrupt({"confirm": amount}, state={"amount": amount})
            return f"sent {amount}: {ctx.resume.data}"

        @adk.tool
        def approve(item: str, ctx: ToolContext) -> str:
            """Ask a person to approve an item."""
            self.calls[f"approve {item}"] += 1
            self.resumes[ctx.tool_call_id] = ctx.resume
            if ctx.resume is None:
                raise Interrupt(f"approve {item}?")
            return f"{item}: {ctx.resume.data}"

        @adk.tool
        def finish(ctx: ToolContext) -> str:
            """End the run."""
            self.calls["finish"] += 1
            ctx.exit()
            return "finished"

        self.lookup, self.transfer, self.approve, self.finish = lookup, transfer, approve, finish


@pytest.mark.parametrize("streaming", [False, True])
async def test_react_resume_reruns_only_the_interrupted_call(streaming: bool) -> None:
    tools = Tools()
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("lookup", {"query": "iban"}, id="call_1"),
                    tool_call("transfer", {"amount": 5}, id="call_2"),
                ]
            ),
            "paid",
        ]
    )
    pay = ReActAgent("pay", model, tools=[tools.lookup, tools.transfer])
    runner = Runner(SequentialAgent("root", [pay]), enable_streaming=streaming)

    events = await collect(runner.run("pay 5"))

    assert simplify_events(events) == [
        'pay: [call lookup {"query": "iban"}]',
        'pay: [call transfer {"amount": 5}]',
        "pay: [tool lookup] found iban",
        "pay: [interrupt agent:root/agent:pay/tool:transfer#call_2]",
    ]
    info = pause_of(events)
    assert info.points[0].info == {"confirm": 5}
    assert tools.calls == {"lookup": 1, "transfer": 1}

    resumed = await collect(runner.resume(info.checkpoint_id, "ok"))

    # The completed call is not re-run and its event is not re-emitted; no new model call came
    # before the interrupted call finished.
    assert simplify_events(resumed) == ["pay: [tool transfer] sent 5: ok", "pay: paid"]
    assert tools.calls == {"lookup": 1, "transfer": 2}
    assert tools.resumes["call_2"] == ResumeContext(True, {"amount": 5}, True, "ok")
    assert model.calls == 2
    request = model.requests[1].messages
    assert [(m.role, m.tool_call_id) for m in request] == [
        ("user", None),
        ("assistant", None),
        ("tool", "call_1"),
        ("tool", "call_2"),
    ]
    assert texts(request)[2:] == ["found iban", "sent 5: ok"]
    assert model.requests[1].stream is streaming


async def test_react_partial_resume_of_two_interrupted_calls() -> None:
    tools = Tools()
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("approve", {"item": "car"}, id="call_1"),
                    tool_call("approve", {"item": "boat"}, id="call_2"),
                    tool_call("lookup", {"query": "price"}, id="call_3"),
                ]
            ),
            "both decided",
        ]
    )
    agent = ReActAgent("buyer", model, tools=[tools.approve, tools.lookup])
    runner = Runner(agent)
    car, boat = "agent:buyer/tool:approve#call_1", "agent:buyer/tool:approve#call_2"

    info = pause_of(await collect(runner.run("buy")))

    assert sorted(info.point_ids) == [car, boat]
    assert {p.id: p.info for p in info.points} == {car: "approve car?", boat: "approve boat?"}

    first = await collect(runner.resume(info.checkpoint_id, {car: "yes"}))

    assert simplify_events(first)[:-1] == ["buyer: [tool approve] car: yes"]
    again = pause_of(first)
    assert again.point_ids == [boat]  # same id as before
    assert tools.calls == {"approve car": 2, "approve boat": 1, "lookup": 1}
    assert model.calls == 1

    second = await collect(runner.resume(info.checkpoint_id, "no"))

    assert simplify_events(second) == ["buyer: [tool approve] boat: no", "buyer: both decided"]
    assert tools.calls == {"approve car": 2, "approve boat": 2, "lookup": 1}
    request = model.requests[1].messages
    assert sorted(m.tool_call_id or "" for m in request if m.role == "tool") == [
        "call_1",
        "call_2",
        "call_3",
    ]


async def test_react_return_directly_result_held_across_the_pause() -> None:
    tools = Tools()
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("lookup", {"query": "x"}, id="call_1"),
                    tool_call("transfer", {"amount": 1}, id="call_2"),
                ]
            )
        ]
    )
    agent = ReActAgent(
        "pay", model, tools=[tools.lookup, tools.transfer], return_directly=["lookup"]
    )
    runner = Runner(agent)
    events = await collect(runner.run("hi"))
    assert "pay: [tool lookup] found x" not in simplify_events(events)  # held until the round ends

    resumed = await collect(runner.resume(pause_of(events).checkpoint_id, "ok"))

    # The held result comes after the others and ends the agent: no further model call.
    assert simplify_events(resumed) == [
        "pay: [tool transfer] sent 1: ok",
        "pay: [tool lookup] found x",
    ]
    assert model.calls == 1
    assert tools.calls == {"lookup": 1, "transfer": 2}


async def test_react_exit_requested_before_the_pause_ends_the_run_after_resume() -> None:
    tools = Tools()
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("finish", {}, id="call_1"),
                    tool_call("transfer", {"amount": 1}, id="call_2"),
                ]
            )
        ]
    )
    after = ScriptAgent("after", "must not run")
    agent = ReActAgent("pay", model, tools=[tools.finish, tools.transfer], output_key="out")
    runner = Runner(SequentialAgent("root", [agent, after]))
    paused = await collect(runner.run("hi"))
    assert "pay: [tool finish] finished" not in simplify_events(paused)  # held, as unpaused
    info = pause_of(paused)

    resumed = await runner.invoke_resume(info.checkpoint_id, "ok")

    # The exit result was held across the pause: it comes last and is the run's final output.
    assert simplify_events(resumed.events) == [
        "pay: [tool transfer] sent 1: ok",
        "pay: [tool finish] finished",
        "pay: [exit]",
    ]
    assert resumed.text == "finished" and resumed.session["out"] == "finished"
    assert after.runs == 0 and model.calls == 1
    assert tools.calls == {"finish": 1, "transfer": 2}


async def test_react_exit_result_held_across_the_pause_without_exits_in_an_older_checkpoint() -> (
    None
):
    """Checkpoints written before exit results were held lack ``exits``: they still resume (their
    exit result was emitted before the pause) and end the run."""
    tools = Tools()
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("finish", {}, id="c1"), tool_call("approve", {"item": "x"})])]
    )
    store = InMemoryCheckpointStore()
    runner = Runner(ReActAgent("a", model, tools=[tools.finish, tools.approve]), store)
    paused = await runner.invoke("go", checkpoint_id="cp")
    async with rewrite_checkpoint(store, "cp") as body:
        [state] = [s for a, s in body["states"].items() if a.endswith("agent:a")]
        assert state[""]["exits"] == ["c1"]
        del state[""]["exits"]

    resumed = await runner.invoke_resume("cp", "yes")

    assert paused.interrupt is not None
    assert simplify_events(resumed.events)[-1] == "a: [exit]"
    assert model.calls == 1


async def test_react_exit_and_a_pause_in_one_inner_turn_give_the_agent_tool_the_exit_result() -> (
    None
):
    tools = Tools()
    inner_model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("approve", {"item": "x"}, id="c1"),
                    tool_call("exit", {"final_result": "inner final"}, id="c2"),
                ]
            )
        ]
    )
    inner = ReActAgent("inner", inner_model, tools=[tools.approve], exit_tool=True, description="d")
    outer, outer_model = _outer_with_agent_tool(inner)
    runner = Runner(outer)
    info = pause_of(await collect(runner.run("hi")))

    await collect(runner.resume(info.checkpoint_id, "ok"))

    assert texts(outer_model.requests[1].messages)[-1] == "inner final"


async def test_react_resume_refuses_a_paused_call_whose_tool_is_gone_and_keeps_the_checkpoint() -> (
    None
):
    """A Toolset that no longer offers the paused call's tool (or code deployed in between): the
    person's answer must not be dropped as an "unknown tool" result; the resume fails and the
    checkpoint stays, to resume once the tool is back."""
    tools = Tools()

    class Offered:
        def __init__(self, *offered: Any) -> None:
            self.offered = list(offered)

        async def tools(self, ctx: Any) -> list[Any]:
            return self.offered

    model = ScriptedModel([Reply(tool_calls=[tool_call("approve", {"item": "x"})]), "done"])
    toolset = Offered(tools.approve)
    store = InMemoryCheckpointStore()
    runner = Runner(ReActAgent("a", model, tools=[toolset]), store)
    paused = await runner.invoke("go", checkpoint_id="cp")
    assert paused.interrupt is not None

    toolset.offered = [tools.lookup]
    with pytest.raises(RunError) as raised:
        await runner.invoke_resume("cp", "yes")
    assert isinstance(raised.value.__cause__, CheckpointError)
    assert "the paused calls need tools it no longer has: approve" in str(raised.value)
    assert await store.get("cp") is not None and model.calls == 1

    toolset.offered = [tools.approve]
    resumed = await runner.invoke_resume("cp", "yes")
    assert simplify_events(resumed.events) == ["a: [tool approve] x: yes", "a: done"]


async def test_react_iterations_are_counted_across_the_pause() -> None:
    tools = Tools()
    ask = Reply(tool_calls=[tool_call("approve", {"item": "x"})])
    model = ScriptedModel([ask, ask, "never reached"])
    runner = Runner(ReActAgent("agent", model, tools=[tools.approve], max_iterations=2))
    info = pause_of(await collect(runner.run("hi")))
    assert info.point_ids == ["agent:agent/tool:approve#call_1"]

    # The second model call, the last allowed, asks again (call_2): its result would need a
    # third, so the run fails on the limit there, as after an ordinary tool, without pausing
    # (a pause whose resume could only be refused).
    events = await collect(runner.resume(info.checkpoint_id, "yes"))

    assert all(e.interrupted is None for e in events) and events[-1].error is not None
    assert "exceeds max iterations (2 model calls)" in events[-1].error.message
    assert model.calls == 2 and tools.calls["approve x"] == 3


def _at_limit(
    tools: Tools, *calls: Any, streaming: bool = False, **options: Any
) -> tuple[Runner, ScriptedModel]:
    """A ReActAgent whose first model call, its only allowed one, asks for ``calls``."""
    model = ScriptedModel([Reply(tool_calls=list(calls)), "never reached"])
    agent = ReActAgent(
        "a", model, tools=[tools.lookup, tools.approve, tools.finish], max_iterations=1, **options
    )
    return Runner(agent, InMemoryCheckpointStore(), enable_streaming=streaming), model


async def _checkpoints(runner: Runner) -> list[str]:
    store = runner.checkpoint_store
    assert isinstance(store, InMemoryCheckpointStore)
    return [id async for id in store.ids()]


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("second", ["lookup", "approve"])
async def test_react_last_model_call_asking_a_pausing_tool_fails_as_one_asking_any_tool(
    streaming: bool, second: str
) -> None:
    """The last allowed model call asks for tools: ordinary ones run and the run fails on the
    limit. One that pauses fails it the same way, once the other calls ran: it asked a person
    to approve a call whose result no model could see, and saved a checkpoint whose resume could
    only be refused."""
    tools = Tools()
    arguments = {"query": "fees"} if second == "lookup" else {"item": "x"}
    runner, model = _at_limit(
        tools,
        tool_call("lookup", {"query": "iban"}, id="call_1"),
        tool_call(second, arguments, id="call_2"),
        streaming=streaming,
    )

    events = await collect(runner.run("go"))

    assert all(e.interrupted is None for e in events) and events[-1].error is not None
    message = events[-1].error.message
    assert message.startswith("agent 'a' exceeds max iterations (1 model calls) without a final")
    assert "found iban" in simplify_events(events)[-2 if second == "approve" else -3]
    assert model.calls == 1 and await _checkpoints(runner) == []
    if second == "approve":
        assert tools.calls == {"lookup": 1, "approve x": 1}
        assert "paused (approve#call_2) and is not saved" in message
    else:
        assert tools.calls == {"lookup": 2}


async def test_react_approval_asked_for_by_the_last_model_call_is_not_asked() -> None:
    sent: list[str] = []

    @adk.tool(require_approval=True)
    def pay(payee: str) -> str:
        """Pay someone."""
        sent.append(payee)
        return f"paid {payee}"

    model = ScriptedModel([Reply(tool_calls=[tool_call("pay", {"payee": "ACME"})]), "paid"])
    runner = Runner(ReActAgent("a", model, tools=[pay], max_iterations=1))

    events = await collect(runner.run("pay ACME"))

    assert all(e.interrupted is None for e in events) and events[-1].error is not None
    assert "exceeds max iterations (1 model calls)" in events[-1].error.message
    assert sent == [] and model.calls == 1


async def test_react_round_that_ends_the_agent_still_pauses_after_the_last_model_call() -> None:
    """Its resume needs no model call: a call that asked to exit, a paused call returned directly."""
    tools = Tools()
    finish, approve = tool_call("finish", {}, id="call_1"), tool_call("approve", {"item": "x"})
    runner, model = _at_limit(tools, finish, approve)
    info = pause_of(await collect(runner.run("go")))
    resumed = await runner.invoke_resume(info.checkpoint_id, "yes")
    assert resumed.text == "finished" and tools.calls == {"finish": 1, "approve x": 2}

    tools = Tools()
    runner, model = _at_limit(tools, approve, return_directly=["approve"])
    info = pause_of(await collect(runner.run("go")))
    resumed = await runner.invoke_resume(info.checkpoint_id, "yes")
    assert resumed.text == "x: yes" and model.calls == 1 and tools.calls == {"approve x": 2}


# -- AgentTool ----------------------------------------------------------------------------------


def _outer_with_agent_tool(
    inner: Any, *, emit: bool = False, extra: list[Any] | None = None
) -> tuple[ReActAgent, ScriptedModel]:
    calls = [tool_call(inner.name, {"request": "do it"}, id="call_1"), *(extra or [])]
    model = ScriptedModel([Reply(tool_calls=calls), "outer done"])
    tools: list[Any] = [AgentTool(inner, emit_inner_events=emit)]
    if extra:
        tools.append(Tools().lookup)
    return ReActAgent("outer", model, tools=tools), model


async def test_agent_tool_whose_agent_pauses_after_its_last_model_call_fails_the_call() -> None:
    """As when that model call asks for an ordinary tool: the inner agent fails on its limit, a
    tool error the outer model reads, rather than pausing the whole run for an approval whose
    resume could only be refused."""
    tools = Tools()
    ask = Reply(tool_calls=[tool_call("approve", {"item": "x"})])
    inner = ReActAgent(
        "inner", ScriptedModel([ask]), description="asks", tools=[tools.approve], max_iterations=1
    )
    outer, model = _outer_with_agent_tool(inner)

    events = await collect(Runner(outer).run("go"))

    assert all(e.interrupted is None for e in events) and events[-1].error is None
    assert simplify_events(events)[-1] == "outer: outer done"
    result = model.requests[1].messages[-1]
    assert result.role == "tool" and "exceeds max iterations (1 model calls)" in result.content
    assert tools.calls == {"approve x": 1}


@pytest.mark.parametrize("emit", [False, True])
async def test_agent_tool_interrupt_is_addressed_under_the_tool_call(emit: bool) -> None:
    first = ScriptAgent("first", "first done")
    step = Asker("step", state={"k": 1})
    inner = SequentialAgent("inner", [first, step], description="does inner work")
    outer, model = _outer_with_agent_tool(inner, emit=emit)
    runner = Runner(outer)

    events = await collect(runner.run("hi"))

    info = pause_of(events)
    point = "agent:outer/tool:inner#call_1/agent:inner/agent:step"
    assert info.point_ids == [point]
    assert info.points[0].address == [
        "agent:outer",
        "tool:inner#call_1",
        "agent:inner",
        "agent:step",
    ]
    forwarded = ["first: first done", "step: step asks"] if emit else []
    assert simplify_events(events) == [
        'outer: [call inner {"request": "do it"}]',
        *forwarded,
        f"outer: [interrupt {point}]",
    ]

    resumed = await collect(runner.resume(info.checkpoint_id, "go"))

    again = ["step: step got 'go'"] if emit else []
    assert simplify_events(resumed) == [
        *again,
        "outer: [tool inner] step got 'go'",
        "outer: outer done",
    ]
    if emit:
        assert resumed[0].run_path == ("outer", "inner", "first", "step")
    assert first.runs == 1
    assert step.resumes[-1] == ResumeContext(True, {"k": 1}, True, "go")
    # The nested run's history came back with it.
    assert texts(step.inputs[-1]) == [
        "do it",
        "For context: [first] said: first done.",
        "step asks",
    ]
    assert texts(model.requests[1].messages)[-1] == "step got 'go'"


async def test_agent_tool_partial_resume_keeps_the_other_inner_point_pending() -> None:
    a, b = Asker("a"), Asker("b")
    inner = ParallelAgent("inner", [a, b], description="asks twice")
    outer, model = _outer_with_agent_tool(
        inner, extra=[tool_call("lookup", {"query": "q"}, id="call_2")]
    )
    runner = Runner(outer)
    prefix = "agent:outer/tool:inner#call_1/agent:inner"
    info = pause_of(await collect(runner.run("hi")))
    assert sorted(info.point_ids) == [f"{prefix}/agent:a", f"{prefix}/agent:b"]

    first = await collect(runner.resume(info.checkpoint_id, {f"{prefix}/agent:a": "A"}))

    again = pause_of(first)
    assert again.point_ids == [f"{prefix}/agent:b"]
    assert simplify_events(first) == [f"outer: [interrupt {prefix}/agent:b]"]
    assert (a.runs, b.runs) == (2, 1)

    second = await collect(runner.resume(info.checkpoint_id, "B"))

    assert simplify_events(second) == ["outer: [tool inner] b got 'B'", "outer: outer done"]
    assert (a.runs, b.runs) == (2, 2)
    tool_results = [m for m in model.requests[1].messages if m.role == "tool"]
    assert sorted((m.tool_call_id, m.content) for m in tool_results) == [
        ("call_1", "b got 'B'"),
        ("call_2", "found q"),
    ]


async def test_agent_tool_inner_react_tool_interrupt() -> None:
    tools = Tools()
    inner_model = ScriptedModel(
        [Reply(tool_calls=[tool_call("transfer", {"amount": 9}, id="t1")]), "inner paid"]
    )
    inner = ReActAgent("payer", inner_model, tools=[tools.transfer], description="pays")
    outer, outer_model = _outer_with_agent_tool(inner)
    runner = Runner(SequentialAgent("root", [outer]))

    info = pause_of(await collect(runner.run("hi")))

    point = "agent:root/agent:outer/tool:payer#call_1/agent:payer/tool:transfer#t1"
    assert info.point_ids == [point]
    resumed = await collect(runner.resume(info.checkpoint_id, "confirmed"))
    assert simplify_events(resumed) == ["outer: [tool payer] inner paid", "outer: outer done"]
    assert tools.resumes["t1"] == ResumeContext(True, {"amount": 9}, True, "confirmed")
    assert inner_model.calls == 2 and outer_model.calls == 2
    assert texts(inner_model.requests[1].messages)[-1] == "sent 9: confirmed"


async def test_supervisor_worker_and_supervisor_tool_pauses() -> None:
    """A worker's tool pauses inside a supervisor flow; after the resume the worker reports back
    and the supervisor's own tool pauses; each resume continues exactly there."""
    tools = Tools()
    boss_model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "payer"}, id="b1")]),
            Reply(tool_calls=[tool_call("approve", {"item": "report"}, id="b2")]),
            "all settled",
        ]
    )
    payer_model = ScriptedModel(
        [Reply(tool_calls=[tool_call("transfer", {"amount": 7}, id="p1")]), "payment made"]
    )
    boss = ReActAgent("boss", boss_model, tools=[tools.approve])
    payer = ReActAgent("payer", payer_model, tools=[tools.transfer], description="pays")
    runner = Runner(Supervisor(boss, [payer]))

    first = pause_of(await collect(runner.run("settle")))
    assert first.point_ids == ["agent:boss/agent:payer/tool:transfer#p1"]

    events = await collect(runner.resume(first.checkpoint_id, "ok"))
    second = pause_of(events)
    assert simplify_events(events) == [
        "payer: [tool transfer] sent 7: ok",
        "payer: payment made",
        "payer: [transfer -> boss]",
        'boss: [call approve {"item": "report"}]',
        "boss: [interrupt agent:boss/tool:approve#b2]",
    ]
    assert second.point_ids == ["agent:boss/tool:approve#b2"]

    events = await collect(runner.resume(second.checkpoint_id, "fine"))
    assert simplify_events(events) == ["boss: [tool approve] report: fine", "boss: all settled"]
    assert events[-1].run_path == ("boss", "payer", "boss")
    assert (boss_model.calls, payer_model.calls) == (3, 2)
    assert tools.calls == {"transfer": 2, "approve report": 2}


# -- approvals ----------------------------------------------------------------------------------


def _payment_runner(sent: list[dict[str, Any]]) -> tuple[Runner, ScriptedModel]:
    @adk.tool(require_approval=True)
    def send_payment(payee: str, amount_cents: int) -> str:
        """Send a payment.

        Args:
            payee: Who gets the money.
            amount_cents: How much, in cents.
        """
        sent.append({"payee": payee, "amount_cents": amount_cents})
        return f"sent {amount_cents} to {payee}"

    call = tool_call("send_payment", {"payee": "ACME", "amount_cents": 12000}, id="call_1")
    model = ScriptedModel([Reply(tool_calls=[call]), lambda messages: messages[-1].content])
    agent = ReActAgent("pay", model, tools=[send_payment])
    return Runner(SequentialAgent("root", [agent])), model


async def test_require_approval_pauses_with_an_approval_request() -> None:
    sent: list[dict[str, Any]] = []
    runner, _ = _payment_runner(sent)

    info = pause_of(await collect(runner.run("pay ACME")))

    assert info.point_ids == ["agent:root/agent:pay/tool:send_payment#call_1"]
    assert info.points[0].info == {
        "type": "approval",
        "tool": "send_payment",
        "arguments": {"payee": "ACME", "amount_cents": 12000},
        "tool_call_id": "call_1",
    }
    assert sent == []  # nothing happens before the decision


@pytest.mark.parametrize(
    "decision", [True, "yes", "approve", "True", {"approved": True}, {"approved": "yes"}]
)
async def test_require_approval_approved_runs_the_tool(decision: Any) -> None:
    sent: list[dict[str, Any]] = []
    runner, _ = _payment_runner(sent)
    info = pause_of(await collect(runner.run("pay ACME")))

    events = await collect(runner.resume(info.checkpoint_id, decision))

    assert sent == [{"payee": "ACME", "amount_cents": 12000}]
    assert simplify_events(events) == [
        "pay: [tool send_payment] sent 12000 to ACME",
        "pay: sent 12000 to ACME",
    ]


@pytest.mark.parametrize(
    ("decision", "result"),
    [
        (False, "Error: the call to 'send_payment' was not approved"),
        ("no", "Error: the call to 'send_payment' was not approved"),
        (None, "Error: the call to 'send_payment' was not approved"),
        # Only a clear yes approves: truthy values that say no must never let a payment through.
        ({"approved": "false"}, "Error: the call to 'send_payment' was not approved"),
        ({"approved": "no"}, "Error: the call to 'send_payment' was not approved"),
        ({"approved": " Denied "}, "Error: the call to 'send_payment' was not approved"),
        ({"approved": None}, "Error: the call to 'send_payment' was not approved"),
        (
            {"approved": False, "reason": "over the limit"},
            "Error: the call to 'send_payment' was not approved: over the limit",
        ),
    ],
)
async def test_require_approval_denied_returns_an_error_result(decision: Any, result: str) -> None:
    sent: list[dict[str, Any]] = []
    runner, model = _payment_runner(sent)
    info = pause_of(await collect(runner.run("pay ACME")))

    events = await collect(runner.resume(info.checkpoint_id, decision))

    assert sent == []
    assert simplify_events(events) == [f"pay: [tool send_payment] {result}", f"pay: {result}"]
    tool_message = model.requests[1].messages[-1]
    assert (tool_message.role, tool_message.content) == ("tool", result)
    assert (tool_message.tool_call_id, tool_message.name) == ("call_1", "send_payment")
    assert events[0].message is not None and events[0].message.metadata == {"is_error": True}


async def _needs_approval(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
    """The OpenAI Agents SDK's per-call ``needs_approval`` function, as a port passes it."""
    return bool(params["amount_cents"] > 10_000)


@pytest.mark.parametrize("flag", ["yes", 1, None])
def test_require_approval_refuses_anything_but_a_bool_or_a_function(flag: Any) -> None:
    """A truthy value that is not True (``"yes"``, ``1``) would pause every call without a word."""

    def refund(order_id: str, amount_cents: int) -> str:
        """Refund an order."""
        return "refunded"

    expected = r"require_approval must be True, False, or a function \(ctx: adk.ToolContext"
    with pytest.raises(TypeError, match=f"tool 'refund': {expected}"):
        adk.tool(require_approval=flag)(refund)
    with pytest.raises(TypeError, match=f"tool 'refunds': {expected}"):
        adk.FunctionTool(refund, name="refunds", require_approval=flag)


def test_a_require_approval_function_of_another_shape_is_refused_where_the_tool_is_made() -> None:
    """A function is taken since ``require_approval`` decides per call
    (``test_approval_predicates``), as ``(ctx, arguments)``: the OpenAI Agents SDK's
    ``(context, params, call_id)`` would fail every call when first asked, so it is refused where
    the tool is made, saying what it takes."""

    def refund(order_id: str, amount_cents: int) -> str:
        """Refund an order."""
        return "refunded"

    with pytest.raises(TypeError) as refused:
        adk.tool(require_approval=_needs_approval)(refund)

    message = str(refused.value)
    assert message.startswith("tool 'refund': require_approval is a function taking (ctx")
    assert "which cannot be called with (ctx, arguments)" in message
    assert "The call's id and name are ctx.tool_call_id and ctx.tool_name" in message


async def test_a_denials_result_equals_the_tool_result_it_shows_as() -> None:
    """A denial's result is a private ``ToolResult`` subclass (tracing tells a refusal from a
    failure by it) shown as ``ToolResult(...)``, but it was unequal to that very ``ToolResult``:
    an ``after_tool`` callback comparing with one (a guardrail's known refusal, a port's test)
    saw two results that print alike and are not equal."""
    sent: list[dict[str, Any]] = []
    seen: list[adk.ToolResult | str] = []

    @adk.tool(require_approval=True)
    def send_payment(payee: str, amount_cents: int) -> str:
        """Send a payment."""
        sent.append({"payee": payee, "amount_cents": amount_cents})
        return "sent"

    call = tool_call("send_payment", {"payee": "ACME", "amount_cents": 12000}, id="call_1")
    model = ScriptedModel([Reply(tool_calls=[call]), "not sent"])
    watch = adk.Callbacks(after_tool=lambda ctx, call, result: seen.append(result))
    runner = Runner(ReActAgent("pay", model, tools=[send_payment]), callbacks=[watch])
    paused = await runner.invoke("pay ACME")
    assert paused.checkpoint_id is not None
    await runner.invoke_resume(paused.checkpoint_id, {"approved": False, "reason": "no"})

    [denial] = seen
    text = "Error: the call to 'send_payment' was not approved: no"
    shown = adk.ToolResult(content=text, is_error=True)
    assert repr(denial) == repr(shown)
    assert denial == shown and shown == denial and [denial] == [shown]
    assert [denial != shown, shown != denial] == [False, False]
    assert denial != adk.ToolResult(content="Error: something else", is_error=True)
    assert denial != adk.ToolResult(content=text)  # not an error: another result
    assert sent == []


async def test_an_approved_call_asks_its_own_question_as_on_a_first_call() -> None:
    """The function of an approved call saw the approval's resume (``data`` the decision), so the
    documented ``if ctx.resume is None: raise Interrupt(question)`` never asked: it took ``True``
    for the traveller's answer and booked seat 'True'."""
    booked: list[str] = []

    @adk.tool(require_approval=True)
    def book(city: str, ctx: adk.ToolContext) -> str:
        """Book a flight once approved; asks for a seat."""
        if ctx.resume is None:
            raise adk.Interrupt("window or aisle?", state={"city": city})
        booked.append(f"{ctx.resume.state['city']}: {ctx.resume.data}")
        return f"booked {ctx.resume.data}"

    call = tool_call("book", {"city": "Lisbon"}, id="call_1")
    model = ScriptedModel([Reply(tool_calls=[call]), lambda messages: messages[-1].content])
    runner = Runner(ReActAgent("travel", model, tools=[book]))
    paused = await runner.invoke("fly me to Lisbon")
    assert paused.checkpoint_id is not None

    asked = await runner.invoke_resume(paused.checkpoint_id, {"approved": True, "by": "ann"})

    assert asked.interrupt is not None and asked.interrupt.points[0].info == "window or aisle?"
    assert booked == []
    done = await runner.invoke_resume(paused.checkpoint_id, "aisle")
    assert booked == ["Lisbon: aisle"] and done.text == "booked aisle"


def _approval_service(sent: list[str], base_url: str, store: SQLiteCheckpointStore) -> Runner:
    """A service's runner: the model is the OpenAI wire server, checkpoints go to SQLite."""

    @adk.tool(require_approval=True)
    def send_payment(payee: str, amount_cents: int) -> str:
        """Send a payment."""
        sent.append(f"{amount_cents} to {payee}")
        return f"sent {amount_cents} to {payee}"

    model = wire_model(base_url, name="wire", api_key="test")
    return Runner(ReActAgent("pay", model, tools=[send_payment]), checkpoint_store=store)


def _payment_call(payee: str, call_id: str) -> WireCall:
    return WireCall("send_payment", json.dumps({"payee": payee, "amount_cents": 100}), call_id)


@pytest.mark.parametrize(
    "decision",
    [
        {"approve": True},  # a mistyped key
        {"confirmed": True},  # Google ADK's ToolConfirmation shape
        {"approved": 1},
        {"approved": True, "reason": 7},
        "maybe",
        ["yes"],
    ],
)
async def test_a_resume_whose_approval_is_neither_yes_nor_no_is_refused_and_loses_nothing(
    decision: Any, tmp_path: Path
) -> None:
    # Read as a denial, a decision in the wrong shape told the model "not approved", finished
    # the run and deleted the checkpoint: the person's answer was lost. It is refused instead,
    # before anything runs, and the same checkpoint then resumes with a proper answer.
    sent: list[str] = []
    script = [WireReply(tool_calls=[_payment_call("ACME", "call_1")]), WireReply(text="paid")]
    async with (
        OpenAIServer(script) as server,
        SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store,
        _approval_service(sent, server.base_url, store) as runner,
    ):
        paused = await runner.invoke("pay ACME")
        assert paused.checkpoint_id is not None
        saved = await store.get(paused.checkpoint_id)

        with pytest.raises(ValueError, match="is not a decision") as refused:
            await runner.invoke_resume(paused.checkpoint_id, decision)
        assert str(refused.value).startswith(
            "resume data for approval point 'agent:pay/tool:send_payment#call_1' is not a "
            f"decision: {decision!r}; expected True or False"
        )
        assert sent == [] and len(server.requests) == 1
        assert await store.get(paused.checkpoint_id) == saved

        done = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
    assert done.text == "paid" and sent == ["100 to ACME"]


async def test_one_malformed_approval_among_several_stops_them_all(tmp_path: Path) -> None:
    sent: list[str] = []
    calls = [_payment_call("ACME", "call_1"), _payment_call("Initech", "call_2")]
    script = [WireReply(tool_calls=calls), WireReply(text="both handled")]
    async with (
        OpenAIServer(script) as server,
        SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store,
        _approval_service(sent, server.base_url, store) as runner,
    ):
        paused = await runner.invoke("pay both")
        assert paused.interrupt is not None and paused.checkpoint_id is not None
        first, second = sorted(paused.interrupt.point_ids)
        with pytest.raises(ValueError, match=r"approval point '.*call_2' is not a decision"):
            await runner.invoke_resume(
                paused.checkpoint_id, {first: True, second: {"approve": "yes"}}
            )
        assert sent == []  # the well-formed approval did not run either

        done = await runner.invoke_resume(paused.checkpoint_id, {first: True, second: "no"})
    assert done.text == "both handled" and sent == ["100 to ACME"]


async def test_a_tool_asks_again_when_the_answer_does_not_fit(tmp_path: Path) -> None:
    # docs/interrupts.md: re-raising Interrupt on resume pauses again at the same point, under
    # the same checkpoint id, with the new info; the state is the one passed on.
    seen: list[Any] = []

    @adk.tool
    def book_flight(destination: str, ctx: ToolContext) -> str:
        """Book a flight once the traveller picked a seat."""
        if ctx.resume is None:
            raise Interrupt("window or aisle?", state={"destination": destination})
        seen.append(ctx.resume.state)
        if ctx.resume.data not in ("window", "aisle"):
            raise Interrupt(
                f"{ctx.resume.data!r} is not a seat; window or aisle?", ctx.resume.state
            )
        return f"booked {ctx.resume.state['destination']}, {ctx.resume.data} seat"

    def runner(store: SQLiteCheckpointStore) -> Runner:
        call = tool_call("book_flight", {"destination": "Lisbon"}, id="call_1")

        def answer(messages: list[adk.Message]) -> Any:  # each runner stands for a new process
            return messages[-1].content if messages[-1].role == "tool" else Reply(tool_calls=[call])

        model = ScriptedModel(answer)
        return Runner(ReActAgent("travel", model, tools=[book_flight]), checkpoint_store=store)

    async with SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store:
        paused = await runner(store).invoke("Book me a flight to Lisbon")
        assert paused.checkpoint_id is not None
        again = await runner(store).invoke_resume(paused.checkpoint_id, "middle")
        assert again.interrupt is not None and again.checkpoint_id == paused.checkpoint_id
        assert [(p.id, p.info) for p in again.interrupt.points] == [
            ("agent:travel/tool:book_flight#call_1", "'middle' is not a seat; window or aisle?")
        ]
        done = await runner(store).invoke_resume(paused.checkpoint_id, "aisle")
    assert done.text == "booked Lisbon, aisle seat"
    assert seen == [{"destination": "Lisbon"}, {"destination": "Lisbon"}]


def _sent_tool_ids(body: Any) -> list[list[str]]:
    """Per reply with calls in a request (Chat Completions or Responses): its call ids, then the
    ids its results answer, in the order sent."""
    rounds: list[list[str]] = []
    for item in body.get("messages", body.get("input")):
        if item.get("role") == "assistant" and item.get("tool_calls"):
            rounds += [[c["id"] for c in item["tool_calls"]], []]
        elif item.get("type") == "function_call":
            if not rounds or rounds[-1]:
                rounds += [[], []]
            rounds[-2].append(item["call_id"])
        elif item.get("role") == "tool" or item.get("type") == "function_call_output":
            rounds[-1].append(item.get("tool_call_id", item.get("call_id")))
    return rounds


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_results_answered_on_resume_are_sent_to_the_model_in_the_calls_order(
    api: str, tmp_path: Path
) -> None:
    # The model called A (paused for approval) then B (ran); after the resume the model was sent
    # assistant [A, B], tool B, tool A: servers whose templates pair results with calls by
    # position read A's result as B's. It is sent in the calls' order, in this run and the next
    # (whose input is the history); the events (and so the history) keep completion order, as
    # DESIGN says.
    tools = Tools()
    calls = [
        WireCall("approve", json.dumps({"item": "pay ACME"}), "call_a"),
        WireCall("lookup", json.dumps({"query": "rates"}), "call_b"),
    ]
    script = [WireReply(tool_calls=calls), WireReply(text="done"), WireReply(text="again")]
    async with (
        OpenAIServer(script) as server,
        SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store,
    ):
        model = wire_model(server, api)
        agent = ReActAgent("pay", model, tools=[tools.approve, tools.lookup])
        async with Runner(agent, checkpoint_store=store) as runner:
            paused = await runner.invoke("pay ACME and look up rates")
            assert paused.checkpoint_id is not None
            done = await runner.invoke_resume(paused.checkpoint_id, "yes")
            assert done.text == "done"
            again = await runner.invoke([*done.messages, adk.Message.user("and again?")])
    assert again.text == "again"
    results = [m.tool_call_id for m in done.messages if m.role == adk.Role.TOOL]
    assert results == ["call_b", "call_a"]  # the events: completion order
    for body in server.bodies[1:]:
        assert _sent_tool_ids(body) == [["call_a", "call_b"], ["call_a", "call_b"]]


def _payer_service(base_url: str, store: SQLiteCheckpointStore, *tools: Any) -> Runner:
    model = wire_model(base_url, name="wire", api_key="test")
    return Runner(ReActAgent("payer", model, tools=list(tools)), checkpoint_store=store)


async def test_a_denial_closes_a_paused_call_whose_tool_was_removed_beside_an_approved_one(
    tmp_path: Path,
) -> None:
    """Paused at two approvals; redeployed without ``pay``. A denial never runs the call, so it
    needs no tool, but the resume was refused ('need tools it no longer has') for a denial as
    for an approval, and a person's no could not close the run. Now: an approval (or an edit) of
    the removed tool's call is still refused, before anything runs, its words saying a denial
    would close it; the denial gives the model the 'not approved' result, over the wire, beside
    the approved call's, and the run finishes."""
    done: list[str] = []

    @adk.tool(require_approval=True)
    def pay(cents: int) -> str:
        """Pay."""
        done.append(f"paid {cents}")
        return f"paid {cents}"

    @adk.tool(require_approval=True)
    def ship(order: str) -> str:
        """Ship an order."""
        done.append(f"shipped {order}")
        return f"shipped {order}"

    calls = [
        WireCall("pay", json.dumps({"cents": 5}), "c1"),
        WireCall("ship", json.dumps({"order": "A-1"}), "c2"),
    ]
    script = [WireReply(tool_calls=calls), WireReply(text="closed")]
    pay_point, ship_point = "agent:payer/tool:pay#c1", "agent:payer/tool:ship#c2"
    async with (
        OpenAIServer(script) as server,
        SQLiteCheckpointStore(tmp_path / "checkpoints.db") as store,
    ):
        paused = await _payer_service(server.base_url, store, pay, ship).invoke("go")
        assert paused.interrupt is not None and paused.checkpoint_id is not None
        assert sorted(paused.interrupt.point_ids) == [pay_point, ship_point]
        saved = await store.get(paused.checkpoint_id)

        redeployed = _payer_service(server.base_url, store, ship)  # pay removed
        for answer in (True, {"approved": True, "arguments": {"cents": 1}}):
            with pytest.raises(RunError) as refused:
                await redeployed.invoke_resume(
                    paused.checkpoint_id, {pay_point: answer, ship_point: True}
                )
            said = str(refused.value)
            assert "the paused calls need tools it no longer has: pay (" in said
            assert f"deny the approval of {pay_point!r} to close it without it" in said
            assert done == [] and len(server.requests) == 1
            assert await store.get(paused.checkpoint_id) == saved

        closed = await redeployed.invoke_resume(
            paused.checkpoint_id,
            {pay_point: {"approved": False, "reason": "gone"}, ship_point: True},
        )
        assert await store.get(paused.checkpoint_id) is None
    assert closed.text == "closed" and done == ["shipped A-1"]
    answered = server.requests[-1].body["messages"][-2:]
    assert [(m["tool_call_id"], m["content"]) for m in answered] == [
        ("c1", "Error: the call to 'pay' was not approved: gone"),
        ("c2", "shipped A-1"),
    ]
    assert [t["function"]["name"] for t in server.requests[-1].body["tools"]] == ["ship"]


async def test_a_denial_closes_a_paused_call_a_toolset_no_longer_offers() -> None:
    """A ``Toolset`` (resolved at the resume, not by the check before it) that no longer offers
    the paused call's tool: a resume without data denies the approval and the model reads the
    denial. A call paused on its own question (not an approval) still needs its tool: only the
    tool can take the answer, so that resume is refused as before, with no word of a denial."""
    tools = Tools()

    @adk.tool(require_approval=True)
    def pay(cents: int) -> str:
        """Pay."""
        raise AssertionError("a denied call never runs")

    class Offered:
        def __init__(self, *offered: Any) -> None:
            self.offered = list(offered)

        async def tools(self, ctx: Any) -> list[Any]:
            return self.offered

    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("pay", {"cents": 5}, id="c1")]),
            lambda messages: messages[-1].content,
            Reply(tool_calls=[tool_call("approve", {"item": "x"}, id="c2")]),
        ]
    )
    toolset = Offered(pay, tools.approve)
    store = InMemoryCheckpointStore()
    runner = Runner(ReActAgent("a", model, tools=[toolset]), store)
    paused = await runner.invoke("go", checkpoint_id="cp")
    assert paused.interrupt is not None
    toolset.offered = [tools.approve]
    denied = await runner.invoke_resume("cp")  # no data: a denial
    assert denied.text == "Error: the call to 'pay' was not approved"
    assert await store.get("cp") is None

    paused = await runner.invoke("go", checkpoint_id="cp2")
    assert paused.interrupt is not None and paused.interrupt.points[0].info == "approve x?"
    toolset.offered = [tools.lookup]
    with pytest.raises(RunError) as refused:
        await runner.invoke_resume("cp2", "no")
    assert "the paused calls need tools it no longer has: approve" in str(refused.value)
    assert "denial" not in str(refused.value)
    assert await store.get("cp2") is not None


def _one_id(value: Any) -> Any:
    """``value`` (a decoded checkpoint body) with call id ``c2`` made ``c1``: a pause as a pyadk
    from before calls got ids of their own saved it for a server that numbers every call alike."""
    if isinstance(value, str):
        return value.replace("c2", "c1")
    if isinstance(value, list):
        return [_one_id(item) for item in value]
    if isinstance(value, dict):
        return {_one_id(key): _one_id(item) for key, item in value.items()}
    return value


async def test_a_denial_of_one_call_does_not_let_through_another_gone_tools_call_of_its_id() -> (
    None
):
    """An older pause whose two calls, of two tools both removed since, share an id (the points
    ``pay#c1`` and ``ship#c1``): denying ``pay`` is no answer for ``ship``, whose approval
    needs its tool. The calls the resume denies were known by id alone, so ``ship`` was taken
    for denied too: the resume went on, ``ship``'s approval spent on an 'unknown tool' answer
    and the checkpoint deleted, where it is refused and kept."""

    @adk.tool(require_approval=True)
    def pay(cents: int) -> str:
        """Pay."""
        raise AssertionError("denied")

    @adk.tool(require_approval=True)
    def ship(order: str) -> str:
        """Ship an order."""
        raise AssertionError("its tool is gone")

    calls = [tool_call("pay", {"cents": 5}, id="c1"), tool_call("ship", {"order": "A"}, id="c2")]
    model = ScriptedModel([Reply(tool_calls=calls), Reply(text="closed")])
    store = InMemoryCheckpointStore()
    paused = await Runner(ReActAgent("a", model, tools=[pay, ship]), store).invoke(
        "go", checkpoint_id="cp"
    )
    assert paused.interrupt is not None
    async with rewrite_checkpoint(store, "cp") as body:
        older = _one_id(body)
        body.clear()
        body.update(older)
    kept = await store.get("cp")
    pay_point, ship_point = "agent:a/tool:pay#c1", "agent:a/tool:ship#c1"
    redeployed = Runner(ReActAgent("a", model, tools=[Tools().lookup]), store)
    with pytest.raises(RunError) as refused:
        await redeployed.invoke_resume("cp", {pay_point: False, ship_point: True})
    assert "the paused calls need tools it no longer has: ship (" in str(refused.value)
    assert f"deny the approval of {ship_point!r}" in str(refused.value)
    assert await store.get("cp") == kept and len(model.requests) == 1
    closed = await redeployed.invoke_resume("cp", {pay_point: False, ship_point: "no"})
    assert closed.text == "closed" and await store.get("cp") is None
    assert [m.content for m in model.requests[-1].messages[-2:]] == [
        "Error: the call to 'pay' was not approved",
        "Error: the call to 'ship' was not approved",
    ]
