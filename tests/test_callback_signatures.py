"""A callback that cannot take its hook's arguments is refused where it is given.

A Google ADK port brings its callbacks with their own parameters: ``before_tool_callback(tool,
args, tool_context)``, ``after_model_callback(callback_context, llm_response)``. Given to pyadk
as they were, they raised a ``TypeError`` at every call, and in a tool hook that error became the
tool's result: the model read ``Error: tool 'add' failed: TypeError: before_tool() missing 1
required positional argument`` while the run went on, no tool ever run, nothing failing. Now the
Runner or the agent refuses the callback when it is built, saying how the hook is called.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

from adk import Callbacks, Runner, SequentialAgent
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adk_before_tool(tool: Any, args: Any, tool_context: Any) -> None:
    return None


def adk_after_model(callback_context: Any, llm_response: Any) -> None:
    return None


def test_a_google_adk_before_tool_is_refused_by_the_runner_naming_the_signature() -> None:
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    agent = ReActAgent("a", model, tools=[add])
    with pytest.raises(TypeError) as refused:
        Runner(agent, callbacks=[Callbacks(before_tool=adk_before_tool)])
    message = str(refused.value)
    assert message.startswith("before_tool callback <function adk_before_tool")
    assert "cannot be called as before_tool(ctx, call)" in message
    assert "missing a required argument: 'tool_context'" in message
    assert "Google ADK's before_tool_callback(tool, args, tool_context)" in message
    assert model.requests == []


def test_an_agents_own_callback_is_refused_where_the_agent_is_made() -> None:
    with pytest.raises(TypeError, match=r"cannot be called as after_model\(ctx, request, reply\)"):
        ReActAgent("a", ScriptedModel(["x"]), callbacks=[Callbacks(after_model=adk_after_model)])

    def before_agent(callback_context: Any) -> None:
        return None

    with pytest.raises(TypeError, match=r"before_agent\(agent, ctx\): too many positional"):
        SequentialAgent("s", [], callbacks=[Callbacks(before_agent=before_agent)])


def test_a_method_of_a_callbacks_subclass_is_checked_without_its_self() -> None:
    class Audit(Callbacks):
        def after_tool(self, ctx: Any, call: Any) -> None:  # result forgotten
            return None

    with pytest.raises(TypeError, match=r"after_tool\(ctx, call, result\)"):
        Runner(ReActAgent("a", ScriptedModel(["x"])), callbacks=[Audit()])


async def test_callbacks_that_can_take_the_call_are_taken_and_run() -> None:
    # An optional extra parameter, *args, a partial that binds one: each can take the call.
    seen: list[str] = []

    class Optional(Callbacks):
        def before_tool(self, ctx: Any, call: Any, note: str = "") -> None:
            seen.append(f"before {call.name}")

    def any_arguments(*args: Any, **kwargs: Any) -> None:
        seen.append(f"after_tool with {len(args)}")

    def on_event(event: Any, tag: str) -> None:
        seen.append(tag)

    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    runner = Runner(
        ReActAgent("a", model, tools=[add]),
        callbacks=[
            Optional(),
            Callbacks(after_tool=any_arguments, on_event=functools.partial(on_event, tag="e")),
        ],
    )
    result = await runner.invoke("1 + 2?")
    assert result.text == "3"
    assert [s for s in seen if s != "e"] == ["before add", "after_tool with 3"]
    assert seen.count("e") == len(result.events)


def _passing_the_run_id(fn: Any) -> Any:
    """A decorator that supplies a callback's first argument itself (click's ``pass_context``
    shape): ``functools.wraps`` gives the wrapper the function's signature for ``inspect``,
    though the wrapper takes the hook's arguments and passes one more."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(args[0].run_id, *args, **kwargs)

    return wrapper


async def test_a_decorated_callback_is_checked_as_the_wrapper_that_is_called() -> None:
    # inspect.signature follows __wrapped__ to (run_id, ctx, call), which cannot take
    # (ctx, call): the callback, which runs, was refused.
    seen: list[str] = []

    @_passing_the_run_id
    def before_tool(run_id: str, ctx: Any, call: Any) -> None:
        seen.append(f"{call.name} in {run_id}")

    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "3"])
    runner = Runner(
        ReActAgent("a", model, tools=[add]), callbacks=[Callbacks(before_tool=before_tool)]
    )
    result = await runner.invoke("1 + 2?", run_id="r1")
    assert result.text == "3"
    assert seen == ["add in r1"]
