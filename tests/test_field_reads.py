"""What the framework reads of the messages and tool calls of a run, field by field.

A pydantic model's field read is not specialised by CPython 3.11 (``BaseModel.__getattr__`` gives
its class a ``__getattr__`` hook): ~0.4k instructions, against ~20 for a slot, so a ReAct turn that
read its reply's ``tool_calls`` twice and its ``content`` for an ``output_key`` it did not have
paid ~1.3k of its ~74k (docs/performance.md, round 9). These tests count the reads made from
pyadk's own code (``adk/``, ``prebuilt/``) in a warm run of the benchmark's workloads (a) and (b),
so a read that creeps back onto the per-turn or per-call path is named here.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adk import Message, Runner, ToolCall
from benchmarks.pyadk_workloads import _AddModel, _DoneModel, add
from prebuilt import ReActAgent

ROOT = Path(__file__).resolve().parent.parent
_OWN = (str(ROOT / "adk") + "/", str(ROOT / "prebuilt") + "/")


@pytest.fixture
def reads() -> Iterator[Counter[tuple[str, str, str]]]:
    """(class, field, function) of every field read of a Message or ToolCall made by pyadk's own
    code while the fixture is in use: the two classes get a counting ``__getattribute__``."""
    counted: Counter[tuple[str, str, str]] = Counter()
    generic = object.__getattribute__

    def counting(cls_name: str) -> Callable[[Any, str], Any]:
        def read(self: Any, name: str) -> Any:
            frame = sys._getframe(1)
            if frame.f_code.co_filename.startswith(_OWN) and not name.startswith("__"):
                counted[(cls_name, name, frame.f_code.co_name)] += 1
            return generic(self, name)

        return read

    Message.__getattribute__ = counting("Message")  # type: ignore[method-assign,assignment]
    ToolCall.__getattribute__ = counting("ToolCall")  # type: ignore[method-assign,assignment]
    try:
        yield counted
    finally:
        del Message.__getattribute__
        del ToolCall.__getattribute__


def _runs(runner: Runner, counted: Counter[tuple[str, str, str]], answer: str) -> None:
    async def main() -> None:
        await runner.invoke("hi")  # warm: nothing counted
        counted.clear()
        result = await runner.invoke("hi")
        assert result.output.content == answer

    asyncio.run(main())


def test_a_turn_that_answers_reads_its_reply_once_per_need(
    reads: Counter[tuple[str, str, str]],
) -> None:
    # The reply's role for its event, its usage as the run records it, its tool calls once;
    # not its content, with no output_key to store it in.
    _runs(Runner(ReActAgent("a", _DoneModel())), reads, "done")
    assert dict(reads) == {
        ("Message", "role", "message_event"): 1,
        ("Message", "usage", "observe"): 1,
        ("Message", "tool_calls", "_loop"): 1,
    }


def test_a_tool_round_reads_its_call_once_before_the_tool_runs(
    reads: Counter[tuple[str, str, str]],
) -> None:
    # Per reply: its tool calls once. The call: its name to find its tool (lone_call), name and
    # id once before the tool runs and once after (a callback may have changed them), its
    # arguments for the tool; not its name again for an empty return_directly. The result's
    # event is made with the name and role the result was made with, not read back from it.
    _runs(Runner(ReActAgent("b", _AddModel(), tools=[add])), reads, "sum=3")
    assert dict(reads) == {
        ("Message", "role", "message_event"): 2,  # the replies': the tool result's is known
        ("Message", "usage", "observe"): 3,
        ("Message", "tool_calls", "_loop"): 2,
        # At the first reply with calls, the conversation's messages (here the user's one) read
        # once for the call ids they hold, and the new call's id once, to give it one of its own
        # if an earlier call holds it (a point id names one call: docs/interrupts.md).
        ("Message", "tool_calls", "calls_seen"): 1,
        # A reply with calls: its metadata once, for a finish reason saying it was cut at its
        # token limit (a call's arguments cut there are answered as cut: docs/tools.md).
        ("Message", "metadata", "cut_calls"): 1,
        ("ToolCall", "id", "own_call_ids"): 1,
        ("ToolCall", "name", "lone_call"): 1,
        ("ToolCall", "name", "run_tool_call"): 2,
        ("ToolCall", "id", "run_tool_call"): 2,
        ("ToolCall", "arguments", "run_tool_call"): 1,
    }
