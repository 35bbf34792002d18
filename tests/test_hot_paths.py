"""Code that runs per event, per call or per value walked tests types with tuples, not unions.

``isinstance(value, A | B)`` builds a ``types.UnionType`` every time it runs (about 400
instructions more than ``isinstance(value, (A, B))`` in CPython 3.11, which has the same meaning):
in a walk over an event's custom data or a checkpoint's values, that is paid once per value. The
modules below are those hot paths; a union that creeps back in is named here.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

_HOT = (
    "adk/_event_json.py",  # every value of an event's custom data (to_dict)
    "adk/_nonfinite.py",  # every value written by the CLI and tracing
    "adk/checkpoint/codec.py",  # every value of a checkpoint
    "adk/callbacks.py",  # every model and tool call with callbacks
    "adk/tools/function.py",  # every tool call
    "adk/tools/_executor.py",
    "adk/events.py",  # every event
    "adk/context.py",
    "adk/messages.py",
    "adk/streams.py",
    "adk/models/_call.py",  # every model call
    "adk/models/_openai_chat.py",  # every streamed delta of a Chat Completions call
)


def _unions(source: str, name: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source, name)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
            and isinstance(node.args[1], ast.BinOp)
            and isinstance(node.args[1].op, ast.BitOr)
        ):
            found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize("module", _HOT)
def test_hot_code_tests_types_with_tuples(module: str) -> None:
    assert _unions((ROOT / module).read_text(), module) == []


def test_the_check_finds_a_union_and_passes_a_tuple() -> None:
    source = "def f(v):\n    return isinstance(v, list | tuple) or isinstance(v, (set, dict))\n"
    assert _unions(source, "x.py") == ["x.py:2: isinstance(v, list | tuple)"]


# Functions run per ReAct round or turn: a comprehension or generator expression reading one of
# their locals makes it a cell, created on every call and read through on every use (round 15:
# two such cells were ~0.66k instructions of workload (b)). Helpers at module level keep them
# plain.
_PLAIN_LOCALS = ("_turn", "_round", "_round_end")


@pytest.mark.parametrize("name", _PLAIN_LOCALS)
def test_react_round_code_keeps_its_locals_out_of_closures(name: str) -> None:
    from prebuilt.react import _ReActCore

    code = getattr(_ReActCore, name).__code__
    assert code.co_cellvars == (), f"{name} makes cells of {code.co_cellvars}"


class _FramesEntered:
    """The names of the functions whose frames are entered within the block, in order (a
    profile hook: a generator expression, an ABC's check are frames too), but its own end's."""

    def __init__(self) -> None:
        self.entered: list[str] = []

    def _profile(self, frame: Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_code is not _FramesEntered.__exit__.__code__:
            self.entered.append(frame.f_code.co_name)

    def __enter__(self) -> list[str]:
        sys.setprofile(self._profile)
        return self.entered

    def __exit__(self, *exc_info: object) -> None:
        sys.setprofile(None)


def test_a_run_input_without_tool_calls_is_checked_without_a_generator() -> None:
    """Every keyed record runs with a list input (``[Message.user(record)]``), so the check of
    unanswered tool calls runs per record: with ``any()`` over a generator expression it made a
    function, a generator and their frames each time, ~4.3k instructions (round 16: most of the
    execution layer's +6.9k a record). Its common case, no message with calls, runs no frame of
    its own but the check's."""
    from adk.messages import Message
    from adk.runner import _check_calls_answered

    messages = [Message.user("a"), Message.assistant("b"), Message.user("c")]
    with _FramesEntered() as entered:
        _check_calls_answered(messages)
    assert entered == ["_check_calls_answered"], entered


def test_a_list_run_input_is_read_without_abc_checks_or_generators() -> None:
    """Every keyed record of ``adk.execution`` runs with a list input, so reading it runs per
    record: the ABCs' ``isinstance`` checks (``Iterable``, ``Mapping``: a frame of
    ``ABCMeta.__instancecheck__`` each) and a generator expression looking for an item that is
    no message were ~5k and ~4k instructions of it (round 17). A list of messages without calls
    runs no frame but ``_to_messages``; one with calls is still checked."""
    from adk.messages import Message, ToolCall
    from adk.runner import _to_messages

    plain = [Message.user("a"), Message.assistant("b"), Message.user("c")]
    call = ToolCall(id="c1", name="add", arguments="{}")
    with_calls = [Message.user("a"), Message.assistant("", tool_calls=[call])]
    with _FramesEntered() as entered:
        assert _to_messages(plain) == plain
        first = list(entered)
        with pytest.raises(ValueError, match="no tool message right after it answers"):
            _to_messages(with_calls)
    assert first == ["_to_messages"], first
    assert "_check_calls_answered" in entered[1:], entered


async def test_a_keyed_record_in_memory_runs_no_abc_check_nor_a_late_provider_look(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ``LocalExecutionEnvironment`` does per record (a dict record keyed by a field, the
    keys' sessions in a dict) enters no frame of the ABCs' checks and no look for a global
    tracer provider while OpenTelemetry is not imported (round 17): ``isinstance(sessions,
    MutableMapping)`` of a dict misses abc's cache every time (three frames, ~5k instructions),
    the key's ``isinstance(record, Mapping)`` is a frame (~2.5k), and ``Runner._set_since`` a call
    the run itself makes only while OpenTelemetry is imported. Counted as the frames of three
    records less those of one, so what a run of the environment does once cancels out."""
    import sys
    from collections import Counter

    import adk.execution._records as records_module
    import adk.runner
    from adk._hooks import LATE_METER, LATE_TRACER
    from adk.actions import ActionAgent, ActionContext, InputEvent, OutputEvent, action
    from adk.execution import LocalExecutionEnvironment

    # OpenTelemetry as if not imported (another test may have imported it in this process).
    monkeypatch.setattr(adk.runner, "_MODULES", {})
    monkeypatch.setattr(records_module, "_MODULES", {}, raising=False)

    @action(InputEvent)
    def echo(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.input))

    watched = {"__instancecheck__", "__subclasscheck__", "__subclasshook__", "_set_since"}

    async def frames(count: int) -> Counter[str]:
        records = [{"key": f"k{n}", "n": n} for n in range(count)]
        agent = ActionAgent("echo", actions=[echo])
        outputs = LocalExecutionEnvironment().from_list(records, key="key").apply(agent)
        # As a runner built before any global provider was set (another test may have set one).
        outputs.runner._late_global = LATE_TRACER | LATE_METER
        seen: Counter[str] = Counter()

        def profile(frame: object, event: str, arg: object) -> None:
            code = frame.f_code  # type: ignore[attr-defined]
            if event == "call" and code.co_name in watched:
                seen[code.co_qualname] += 1

        sys.setprofile(profile)
        try:
            found = await outputs.to_list()
        finally:
            sys.setprofile(None)
        assert [o.output for o in found] == records  # each record ran, its own output
        return seen

    await frames(1)  # abc's caches filled, the first run's imports done
    once, thrice = await frames(1), await frames(3)
    assert thrice == once, (once, thrice)


def test_a_rounds_results_already_in_its_calls_order_are_checked_without_frames() -> None:
    """Every request to an OpenAI-compatible server puts each multi-call round of the history
    in its calls' order (``results_in_call_order``), so the check runs per model call per such
    round of the whole history; its common case, results that came in the calls' order, made a
    dict, a list, a set and an ``all()`` generator each round (~2 µs a round: +70% of
    ``chat_messages`` on a 200-message history of 4-call rounds). That case runs no frame of
    its own but the check's, and is left as it is."""
    from adk.models._openai_common import results_in_call_order

    def tool(call_id: str) -> dict[str, Any]:
        return {"role": "tool", "tool_call_id": call_id, "content": "r"}

    out: list[dict[str, Any]] = [
        {"role": "assistant", "content": ""},
        tool("a"),
        tool("b"),
        {"role": "assistant", "content": ""},
        tool("c"),
        tool("d"),
        tool("e"),
        {"role": "user", "content": "more"},
    ]
    given = [dict(item) for item in out]
    rounds = [(1, ["a", "b"]), (4, ["c", "d", "e"])]
    with _FramesEntered() as entered:
        results_in_call_order(out, rounds, "role", "tool", "tool_call_id")
    assert entered == ["results_in_call_order"], entered
    assert out == given
    out[4:7] = [tool("e"), tool("c"), tool("d")]  # out of order: still put in the calls' order
    results_in_call_order(out, rounds, "role", "tool", "tool_call_id")
    assert out == given


async def test_a_built_in_agent_started_in_a_run_not_resuming_enters_no_refusal_frame() -> None:
    """Every start of a built-in agent with ``run`` (a step, a branch, a flow's agent, a
    ``ReActAgent`` at the root) checks that no pause below it is being resumed
    (``refuse_fresh_start``): a run that is not resuming has no resume plan, which its call
    site tests before calling (a function call was ~0.8k instructions of workload (a), +1%)."""
    from collections.abc import AsyncIterator

    import adk
    from adk.actions import ActionAgent, ActionContext, InputEvent, OutputEvent, action
    from adk.testing import ScriptedModel
    from prebuilt import ReActAgent

    class Say(adk.BaseAgent):
        async def run(
            self, input: adk.AgentInput, ctx: adk.RunContext
        ) -> AsyncIterator[adk.AgentEvent]:
            yield adk.AgentEvent.of(f"{self.name} said")

    @action(InputEvent)
    def echo(event: InputEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output="echoed"))

    steps = adk.SequentialAgent(
        "steps",
        [
            ReActAgent("react", ScriptedModel(["done"])),
            adk.ParallelAgent("fan", [Say("a"), Say("b")]),
            adk.LoopAgent("loop", [Say("c")], max_iterations=1),
            adk.with_sub_agents(Say("d"), [Say("e")]),
            ActionAgent("echo", actions=[echo]),
        ],
    )
    runner = adk.Runner(ReActAgent("root", ScriptedModel(["done"])))
    with _FramesEntered() as entered:
        await adk.Runner(steps).invoke("go")
        await runner.invoke("go")
    assert "refuse_fresh_start" not in entered
    assert {"run", "_run_branches"} <= set(entered)  # the built-ins' run() were entered


async def test_a_run_with_no_record_under_a_timeout_reads_no_doing() -> None:
    """A record's run under an environment's ``timeout`` notes its calls in ``adk._doing``;
    every other run read the ``ContextVar`` per action, tool call and model call all the same
    (``doing.get()``: ~0.8k instructions each in a run's code, +3.4k of a 432k action turn, seed
    0). It reads it only while a record under a timeout runs in the process: here, never."""
    import sys

    from adk import Resources, Runner, tool
    from adk._doing import doing
    from adk.actions import (
        ActionAgent,
        ActionContext,
        ChatRequestEvent,
        ChatResponseEvent,
        InputEvent,
        OutputEvent,
        action,
    )
    from adk.execution import LocalExecutionEnvironment
    from adk.messages import Message
    from adk.testing import Reply, ScriptedModel, tool_call

    @tool
    def add(a: int, b: int) -> int:
        """Adds."""
        return a + b

    @action(InputEvent)
    def ask(event: InputEvent, ctx: ActionContext) -> None:
        request = ChatRequestEvent(model="m", messages=[Message.user("1+2?")], tools=["add"])
        ctx.send_event(request)

    @action(ChatResponseEvent)
    def answer(event: ChatResponseEvent, ctx: ActionContext) -> None:
        ctx.send_event(OutputEvent(output=event.response.content))

    resources = Resources()
    script = [Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), Reply(text="sum=3")]
    resources.add_model("m", ScriptedModel(script * 2, record=False))
    resources.add_tool(add)
    agent = ActionAgent("adder", actions=[ask, answer], resources=resources)
    reads = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal reads
        if event == "c_call" and getattr(arg, "__self__", None) is doing:
            reads += 1

    sys.setprofile(profile)
    try:
        result = await Runner(agent).invoke("go")
        [output] = await LocalExecutionEnvironment().from_list(["go"]).apply(agent).to_list()
    finally:
        sys.setprofile(None)
    assert (result.text, output.output) == ("sum=3", "sum=3")
    assert reads == 0


def test_a_bytes_or_model_key_is_checked_without_an_abc_frame() -> None:
    """A record's key that is not a str or an int is checked for a number (``ambiguous``) with
    ``isinstance(key, numbers.Number)``, an ABC's check: a Python frame (~2.5k instructions) for
    every record keyed by ``bytes`` (a Kafka message's key) or a frozen model. A type found not
    a number is remembered: its later keys enter no frame."""
    import sys
    from datetime import date

    from adk._record_keys import ambiguous

    keys = [b"k", ("a", b"k"), date(2026, 1, 1)]
    for key in keys:  # each type seen once
        assert ambiguous(key) is None
    entered: list[str] = []

    def profile(frame: object, event: str, arg: object) -> None:
        if event == "call":
            entered.append(frame.f_code.co_name)  # type: ignore[attr-defined]

    sys.setprofile(profile)
    try:
        found = [ambiguous(key) for key in keys]
    finally:
        sys.setprofile(None)
    assert found == [None, None, None]
    assert [name for name in entered if name not in ("ambiguous", "<listcomp>")] == [], entered
