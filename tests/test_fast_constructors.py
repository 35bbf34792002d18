"""Objects the framework makes on its hot paths without calling their class's ``__init__``: either
``object.__new__`` with the fields set directly (public classes, whose constructors stay as they
are), or a class without ``__init__`` filled in by a ``new_*``-style function (internal classes;
see ``adk.context._Entry`` for why). Slots have no default, so a field added to one of these
classes and forgotten where the object is made would stay unset, an ``AttributeError`` at its
first read somewhere else. These tests make each object the way a run does and check that every
field is set, and that the public classes' objects equal what their constructors make."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

from adk import (
    AgentEvent,
    AgentInput,
    AgentTool,
    BaseAgent,
    Message,
    RunContext,
    Runner,
    SequentialAgent,
    Session,
    ToolContext,
    tool,
)
from adk._driver import agent_run
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import decode_checkpoint
from adk.context import _RunState, new_entry, new_lane, new_run
from adk.runner import RunResult, _collector, _root_run
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent
from prebuilt.react import _new_round


def _slots(obj: object) -> list[str]:
    names = []
    for cls in type(obj).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    return [name for name in names if name not in ("__dict__", "__weakref__")]


def _all_set(obj: object) -> bool:
    missing = [name for name in _slots(obj) if not hasattr(obj, name)]
    assert not missing, f"{type(obj).__name__} made without {missing}"
    return True


def _same(made: object, reference: object) -> None:
    assert type(made) is type(reference)
    for name in _slots(reference):
        assert getattr(made, name) == getattr(reference, name), name


class _Seen(BaseAgent):
    """Records the context and input it ran with."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.seen: list[tuple[RunContext, AgentInput]] = []

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.seen.append((ctx, input))
        yield AgentEvent.of(Message.assistant(f"{self.name} done"))


async def test_what_invoke_makes_for_a_run_has_every_field_set() -> None:
    agent = _Seen("solo")
    result = await Runner(agent).invoke("hi")
    ctx, input = agent.seen[0]
    _same(ctx, RunContext(ctx._run, ("solo",), "agent:solo", ctx._run.history))
    _same(input, AgentInput(ctx._run.root))
    _same(result.session, Session())
    assert _all_set(result) and result == RunResult(
        result.events, result.output, None, result.session, None, result._last_message
    )
    assert result.text == "solo done"
    assert _all_set(ctx._run) and _all_set(ctx._lane)
    assert all(_all_set(entry) for entry in ctx._lane.entries)  # made inline by the driver


class _Pauses(BaseAgent):
    """Pauses once, then answers with what its run's root input was."""

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        if ctx.resume is None:
            yield ctx.interrupt("go on?")
            return
        assert ctx._run.root is input.messages  # the run's own input, as the root agent's
        yield AgentEvent.of(" + ".join(m.content for m in ctx._run.root))


async def test_a_run_keeps_its_root_input_once() -> None:
    # new_run set the run's root_input and its root lane's root to the same list: two slots of
    # every run that had to be kept the same by hand. The root lane's is the one kept; the
    # checkpoint saves it once, under the key it always had, so earlier checkpoints still read.
    assert "root_input" not in _RunState.__slots__
    store = InMemoryCheckpointStore()
    runner = Runner(_Pauses("solo"), checkpoint_store=store)
    paused = await runner.invoke([Message.user("ROOT-MARK first"), Message.user("second")])
    assert paused.checkpoint_id is not None
    stored = await store.get(paused.checkpoint_id)
    assert stored is not None and stored.count(b"ROOT-MARK") == 1
    assert decode_checkpoint(stored)["root_input"][0]["data"]["content"] == "ROOT-MARK first"
    resumed = await runner.invoke_resume(paused.checkpoint_id, "yes")
    assert resumed.text == "ROOT-MARK first + second"


async def test_what_a_workflow_makes_for_its_steps_has_every_field_set() -> None:
    first, second = _Seen("first"), _Seen("second")
    streaming = Runner(SequentialAgent("seq", [first, second]), enable_streaming=True)
    await streaming.invoke("hi", session={"k": 1})
    for agent in (first, second):
        ctx, input = agent.seen[0]
        assert _all_set(ctx) and _all_set(input)
        assert ctx.enable_streaming and input.enable_streaming
        assert ctx.session.values == {"k": 1}
    assert [m.content for m in second.seen[0][1].messages] == [
        "hi",
        "For context: [first] said: first done.",
    ]


async def test_what_a_run_with_options_makes_has_every_field_set() -> None:
    first, second = _Seen("first"), _Seen("second")
    runner = Runner(SequentialAgent("seq", [first, second]))
    await runner.invoke("hi", options={"a": 1}, agent_options={"second": {"b": 2}})
    for agent, options in ((first, {"a": 1}), (second, {"a": 1, "b": 2})):
        ctx = agent.seen[0][0]
        assert _all_set(ctx) and _all_set(ctx._run)
        reference = RunContext(ctx._run, ctx.run_path, ctx.address, ctx._lane, options=options)
        _same(ctx, reference)
    assert first.seen[0][0]._run.options == {"a": 1}


async def test_what_a_tool_call_makes_has_every_field_set() -> None:
    seen: list[ToolContext] = []

    @tool
    def remember(ctx: ToolContext) -> str:
        """Remember the context."""
        seen.append(ctx)
        return "ok"

    agent = ReActAgent(
        "agent",
        ScriptedModel([Reply(tool_calls=[tool_call("remember", {}, id="c1")]), "done"]),
        tools=[remember],
    )
    await Runner(agent).invoke("hi")
    ctx = seen[0]
    reference = ToolContext(
        ctx.run_context, tool_name="remember", tool_call_id="c1", address=ctx.address
    )
    _same(ctx, reference)
    assert ctx.address.endswith("tool:remember#c1")


async def test_internal_objects_made_by_their_functions_have_every_field_set() -> None:
    agent = _Seen("solo")
    await Runner(agent).invoke("hi")
    ctx = agent.seen[0][0]
    run = new_run([Message.user("hi")], Session())
    assert _all_set(run) and _all_set(run.history)
    assert _all_set(new_lane(run.history)) and _all_set(new_lane(run.history, []))
    assert _all_set(new_entry("a", ("a",), Message.user("x"), 0))
    assert _all_set(agent_run(agent, ctx))
    assert _all_set(_collector())
    assert _all_set(_root_run(Runner(agent), agent, ctx, None))
    assert _all_set(_new_round([], []))
    react = ReActAgent("r", ScriptedModel(["done"]))
    assert _all_set(react._core._turn(ctx, 0))


async def test_an_event_an_agent_tool_shows_has_every_field_set() -> None:
    # Made field by field per enclosing AgentTool for every event shown: what
    # ``dataclasses.replace`` made, the inner event with its path extended and no action.
    inner = _Seen("inner")
    inner.description = "Answers."
    model = ScriptedModel([Reply(tool_calls=[tool_call("inner", {"request": "go"})]), "done"])
    agent = ReActAgent("outer", model, tools=[AgentTool(inner, emit_inner_events=True)])
    result = await Runner(agent).invoke("hi")
    shown = [event for event in result.events if event.run_path == ("outer", "inner")]
    assert len(shown) == 1 and _all_set(shown[0])
    assert shown[0] == AgentEvent(
        agent_name="inner", run_path=("outer", "inner"), output=shown[0].output
    )
    assert shown[0].message == Message.assistant("inner done")


@dataclasses.dataclass(slots=True)
class _Tagged(AgentEvent):
    """An event class of a program's own, with a field of its own."""

    tag: str = ""


class _ShowsTagged(BaseAgent):
    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        yield _Tagged(output=AgentEvent.custom("progress").output, tag="mine")
        yield AgentEvent.of(Message.assistant("tagged done"))


async def test_an_event_of_a_subclass_an_agent_tool_shows_keeps_its_class_and_fields() -> None:
    # The copy made field by field is an AgentEvent: one of a subclass shown from inside an
    # AgentTool lost its class and its own fields (``dataclasses.replace``, before, kept them),
    # where the same event from an agent at the root comes out as it was yielded.
    inner = _ShowsTagged("inner", "Tags.")
    model = ScriptedModel([Reply(tool_calls=[tool_call("inner", {"request": "go"})]), "done"])
    agent = ReActAgent("outer", model, tools=[AgentTool(inner, emit_inner_events=True)])
    result = await Runner(agent).invoke("hi")
    shown = [event for event in result.events if event.run_path == ("outer", "inner")]
    assert isinstance(shown[0], _Tagged) and _all_set(shown[0])
    assert (shown[0].tag, shown[0].run_path, shown[0].action) == ("mine", ("outer", "inner"), None)
    assert shown[0].output is not None and shown[0].output.custom == "progress"
    assert type(shown[1]) is AgentEvent and result.text == "done"
