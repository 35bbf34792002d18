"""Public settings an agent or tool checks where it is made, assigned after it is made: each is
checked the same way (``adk._checks.checked_settings``), and a refused one leaves the setting
as it was. Before, ``agent.max_iterations = "5"`` was taken and failed the run deep inside at a
comparison, ``return_directly = "search"`` ended the agent on any tool whose name is a part of
that word, and a ``history_rewriter`` assigned to an agent with sub-agents reached it alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

import adk
from adk import FunctionTool, LoopAgent, ParallelAgent, Runner, with_sub_agents
from adk.actions import ActionAgent, ActionContext, InputEvent, OutputEvent, action
from adk.history import default_rewriter
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent


def lookup(query: str) -> str:
    """Look something up."""
    return query


@action(InputEvent)
def echo(event: InputEvent, ctx: ActionContext) -> None:
    ctx.send_event(OutputEvent(output=event.input))


def _react() -> ReActAgent:
    return ReActAgent("a", ScriptedModel(["x"]), tools=[lookup])


def _plan() -> PlanExecute:
    return PlanExecute.from_model(ScriptedModel(["x"]))


def _inline_tool() -> FunctionTool[..., Any]:
    return FunctionTool(lookup, thread=False)


class _Answer(BaseModel):
    text: str


MADE: dict[str, Callable[[], Any]] = {
    "react": _react,
    "loop": lambda: LoopAgent("l", [_react()], max_iterations=2),
    "parallel": lambda: ParallelAgent("p", [_react()]),
    "action": lambda: ActionAgent("act", actions=[echo]),
    "tool": lambda: FunctionTool(lookup),
    "inline_tool": _inline_tool,
    "plan": _plan,
    "flow": lambda: with_sub_agents(_react(), [ReActAgent("b", ScriptedModel(["y"]))]),
}


@pytest.mark.parametrize(
    ("made", "name", "value", "error", "words"),
    [
        ("react", "max_iterations", "5", TypeError, r"'a': max_iterations must be an int >= 1"),
        ("react", "max_iterations", 0, ValueError, r"'a': max_iterations must be an int >= 1"),
        ("react", "return_directly", "lookup", TypeError, r"return_directly must be a list"),
        ("react", "return_directly", ["nope"], ValueError, r"names tools it does not have"),
        ("react", "history_rewriter", lambda e: e, TypeError, r"cannot be called as f\(entries"),
        ("react", "history_rewriter", "f", TypeError, r"history_rewriter must be a function"),
        ("react", "output_key", "", TypeError, r"output_key must be a non-empty str"),
        ("react", "output_schema", dict, TypeError, r"output_schema must be a pydantic model"),
        ("react", "model_options", {"temperature": 0}, TypeError, r"must be a ModelOptions"),
        ("react", "instruction", 5, TypeError, r"instruction must be a str, got int"),
        ("react", "model", ScriptedModel, TypeError, r"'a': model must be a ChatModel"),
        ("loop", "max_iterations", "3", TypeError, r"LoopAgent 'l': max_iterations must be"),
        ("parallel", "max_concurrency", 0, ValueError, r"'p': max_concurrency must be an int"),
        ("action", "max_events", -1, ValueError, r"'act': max_events must be an int >= 1"),
        ("tool", "timeout", 0, ValueError, r"tool 'lookup': timeout must be a number of sec"),
        ("tool", "timeout", "5", TypeError, r"tool 'lookup': timeout must be a number of sec"),
        ("inline_tool", "timeout", 5, ValueError, r"thread=False runs it inline on the event"),
        ("plan", "max_iterations", 0, ValueError, r"PlanExecute 'plan_execute': max_iterations"),
        ("flow", "max_transfers", True, TypeError, r"FlowAgent 'a': max_transfers must be an"),
        ("flow", "history_rewriter", lambda: [], TypeError, r"FlowAgent 'a': history_rewrit"),
    ],
)
def test_a_setting_assigned_after_construction_is_checked_as_at_construction(
    made: str, name: str, value: Any, error: type[Exception], words: str
) -> None:
    obj = MADE[made]()
    before = getattr(obj, name)
    with pytest.raises(error, match=words):
        setattr(obj, name, value)
    assert getattr(obj, name) is before  # refused: the setting as it was


def test_a_setting_assigned_after_construction_is_kept_as_the_constructor_keeps_it() -> None:
    agent = _react()
    agent.return_directly = ["lookup"]
    assert agent.return_directly == frozenset({"lookup"})  # a set, as made, not the list
    agent.max_iterations = 3
    agent.output_schema = _Answer
    assert (agent.max_iterations, agent.output_schema) == (3, _Answer)
    plan = _plan()
    plan.max_iterations = 4
    assert plan._loop.max_iterations == 4  # the loop it bounds follows (it kept 10 before)
    tool = FunctionTool(lookup)
    tool.timeout = 2.5
    assert tool.timeout == 2.5


def _recording(seen: list[str]) -> adk.history.HistoryRewriter:
    def rewriter(entries: list[adk.HistoryEntry], agent_name: str) -> list[adk.Message]:
        seen.append(agent_name)
        return default_rewriter(entries, agent_name)

    return rewriter


def _transferring() -> ScriptedModel:
    return ScriptedModel(
        [Reply(tool_calls=[tool_call("transfer_to_agent", {"agent_name": "worker"})])]
    )


@pytest.mark.parametrize("when", ["made", "assigned"])
async def test_a_history_rewriter_assigned_later_reaches_the_sub_agents_as_one_given(
    when: str,
) -> None:
    """Given when the agent is made, its sub-agents read the history through it too (they have
    none of their own); assigned later, it reached the agent alone."""
    seen: list[str] = []
    worker = ReActAgent("worker", ScriptedModel(["done"]), description="Does the work.")
    given = {"history_rewriter": _recording(seen)} if when == "made" else {}
    coordinator = ReActAgent("coordinator", _transferring(), sub_agents=[worker], **given)
    if when == "assigned":
        coordinator.history_rewriter = _recording(seen)
    assert (await Runner(coordinator).invoke("hi")).text == "done"
    assert seen == ["coordinator", "worker"]


async def test_a_flows_history_rewriter_assigned_later_reaches_its_sub_agents() -> None:
    seen: list[str] = []
    worker = ReActAgent("worker", ScriptedModel(["done"]), description="Does the work.")
    coordinator = ReActAgent("coordinator", _transferring())
    flow = with_sub_agents(coordinator, [worker])
    flow.history_rewriter = _recording(seen)
    assert (await Runner(flow).invoke("hi")).text == "done"
    assert seen == ["coordinator", "worker"]
    own: list[str] = []
    worker.history_rewriter = _recording(own)  # a sub-agent's own wins over the inherited one
    seen.clear()
    coordinator.model = _transferring()
    worker.model = ScriptedModel(["done"])
    assert (await Runner(flow).invoke("hi")).text == "done"
    assert (seen, own) == (["coordinator"], ["worker"])


def _count_rewriter_reads(node: adk.FlowAgent) -> list[int]:
    """``node``'s own rewriter read through a counter: how often a walk reached it."""
    reads = [0]

    class _Counted(adk.FlowAgent):
        @property
        def _rewriter(self) -> adk.history.HistoryRewriter | None:
            reads[0] += 1
            return self.__dict__["_rewriter"]  # type: ignore[no-any-return]

    node.__class__ = _Counted
    return reads


@pytest.mark.parametrize("start", ["in the ring", "below it"])
def test_a_ring_of_transfers_without_a_rewriter_is_walked_once(start: str) -> None:
    """Agents wired in a ring (a round of transfers: a over b over c over a) have no rewriter
    at the top to find: reading one walked the ring up to 1,000 flows (~330 rounds of it), at
    every run and every transfer of theirs."""
    a, b, c, d = (ReActAgent(n, ScriptedModel(["x"])) for n in "abcd")
    flows = {n: with_sub_agents(agent, [sub]) for n, agent, sub in [("a", a, b), ("b", b, c)]}
    with_sub_agents(c, [a], allow_transfer_to_parent=False)
    if start == "below it":
        tail = adk.FlowAgent(d)
        tail.parent = flows["a"]  # d reads through the ring without being in it
        reads = _count_rewriter_reads(flows["b"])
        assert tail.history_rewriter is None
        assert reads[0] <= 2
    else:
        reads = _count_rewriter_reads(flows["b"])
        assert flows["a"].history_rewriter is None
        assert reads[0] == 1
    rewriter = _recording([])
    flows["b"].__dict__["_rewriter"] = rewriter  # found in the ring, where it is
    assert flows["a"].history_rewriter is rewriter


class _LoopSettingFirst(LoopAgent):
    def __init__(self) -> None:
        self.max_iterations = 3  # before the base class made it: passed on below
        super().__init__("l", [_react()], max_iterations=self.max_iterations)


class _ParallelSettingFirst(ParallelAgent):
    def __init__(self) -> None:
        self.max_concurrency = 2
        super().__init__("p", [_react()], max_concurrency=self.max_concurrency)


class _ReActSettingsFirst(ReActAgent):
    def __init__(self) -> None:
        self.model = ScriptedModel(["x"])
        self.max_iterations = 3
        self.return_directly = ["lookup"]
        self.history_rewriter = default_rewriter
        self.output_key = "answer"
        super().__init__(
            "a",
            self.model,
            tools=[lookup],
            max_iterations=self.max_iterations,
            return_directly=self.return_directly,
            history_rewriter=self.history_rewriter,
            output_key=self.output_key,
        )


class _ActionSettingFirst(ActionAgent):
    def __init__(self) -> None:
        self.max_events = 5
        super().__init__("act", actions=[echo], max_events=self.max_events)


class _PlanSettingFirst(PlanExecute):
    def __init__(self) -> None:
        self.max_iterations = 4
        made = PlanExecute.from_model(ScriptedModel(["x"]))
        super().__init__(
            made.planner, made.executor, made.replanner, max_iterations=self.max_iterations
        )


class _ToolSettingFirst(FunctionTool[..., Any]):
    def __init__(self) -> None:
        self.timeout = 2.0
        super().__init__(lookup, timeout=self.timeout)


@pytest.mark.parametrize(
    ("made", "name", "value"),
    [
        (_LoopSettingFirst, "max_iterations", 3),
        (_ParallelSettingFirst, "max_concurrency", 2),
        (_ReActSettingsFirst, "max_iterations", 3),
        (_ActionSettingFirst, "max_events", 5),
        (_PlanSettingFirst, "max_iterations", 4),
        (_ToolSettingFirst, "timeout", 2.0),
    ],
)
def test_a_subclass_setting_a_setting_before_the_base_constructor_is_made(
    made: Callable[[], Any], name: str, value: Any
) -> None:
    # A user's subclass that sets a setting in its __init__ before super().__init__ (to pass it
    # on) was made before checks on assignment; the check read what the base constructor had
    # not set yet ('... object has no attribute name'). The constructor checks what it is given.
    obj = made()
    assert getattr(obj, name) == value
    with pytest.raises((TypeError, ValueError)):  # and checked once made
        setattr(obj, name, 0)
    assert getattr(obj, name) == value
