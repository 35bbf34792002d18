"""Run options (``Runner.run(options=..., agent_options=...)``, read as ``ctx.options``): run-wide
options every agent sees, options designated to agents by name (Eino's ``DesignateAgent``),
their reach into nested ``AgentTool`` runs and parallel branches, resumes (which take their own:
options are never saved), and ``ReActAgent``'s per-run ``model_options``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from checkpoint_rewrite import rewrite_checkpoint
from pydantic import BaseModel

import adk
from adk import (
    AgentEvent,
    AgentInput,
    AgentTool,
    BaseAgent,
    Message,
    ModelOptions,
    ParallelAgent,
    RunContext,
    RunError,
    Runner,
    SequentialAgent,
    tool,
)
from adk.checkpoint import InMemoryCheckpointStore
from adk.checkpoint.codec import CheckpointError, decode_checkpoint
from adk.checkpoint.sqlite import SQLiteCheckpointStore
from adk.resources import Resources
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


class _Seen(BaseAgent):
    """Records the options it ran with; pauses on its first run when ``pause`` is set."""

    def __init__(self, name: str, pause: bool = False) -> None:
        super().__init__(name, f"the {name} agent")
        self.pause = pause
        self.options: list[Mapping[str, Any]] = []

    async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        self.options.append(ctx.options)
        if self.pause and ctx.resume is None:
            yield ctx.interrupt("approve?")
            return
        yield AgentEvent.of(Message.assistant(f"{self.name} done"))

    async def resume(self, ctx: RunContext) -> AsyncIterator[AgentEvent]:
        async for event in self.run(AgentInput([]), ctx):
            yield event


async def test_run_wide_options_reach_every_agent_and_designated_ones_only_theirs() -> None:
    first, second = _Seen("first"), _Seen("second")
    options = {"x": 1, "y": 1}
    runner = Runner(SequentialAgent("seq", [first, second]))
    await runner.invoke("hi", options=options, agent_options={"second": {"y": 2, "z": 3}})
    assert dict(first.options[0]) == {"x": 1, "y": 1}
    assert dict(second.options[0]) == {"x": 1, "y": 2, "z": 3}
    options["x"] = 99  # the run copied them: a caller's later change is not seen
    assert first.options[0]["x"] == 1
    with pytest.raises(TypeError):
        first.options[0]["x"] = 2  # type: ignore[index]  # read-only: agents share them


async def test_options_designated_to_a_workflow_do_not_reach_its_sub_agents() -> None:
    inner = _Seen("inner")
    seq = _Seen("seq_probe")
    runner = Runner(SequentialAgent("seq", [seq, inner]))
    await runner.invoke("hi", options={"a": 1}, agent_options={"seq": {"a": 2}})
    assert dict(inner.options[0]) == {"a": 1} and dict(seq.options[0]) == {"a": 1}


async def test_a_run_without_options_reads_an_empty_read_only_mapping() -> None:
    agent = _Seen("solo")
    await Runner(agent).invoke("hi")
    assert dict(agent.options[0]) == {}
    with pytest.raises(TypeError):
        agent.options[0]["k"] = 1  # type: ignore[index]
    other = _Seen("other")
    await Runner(SequentialAgent("both", [agent, other])).invoke(
        "hi", agent_options={"other": {"k": 1}}
    )  # designated elsewhere
    assert dict(agent.options[1]) == {} and dict(other.options[0]) == {"k": 1}


async def test_run_streams_with_options_and_the_root_can_be_designated() -> None:
    agent = _Seen("solo")
    events = Runner(agent).run("hi", options={"a": 1}, agent_options={"solo": {"b": 2}})
    assert [event.message.content async for event in events if event.message] == ["solo done"]
    assert dict(agent.options[0]) == {"a": 1, "b": 2}
    with pytest.raises(TypeError):  # keyword-only: a positional mapping is not taken for options
        await Runner(agent).invoke("hi", {"a": 3})  # type: ignore[misc]


async def test_parallel_branches_each_see_their_own_options() -> None:
    left, right = _Seen("left"), _Seen("right")
    runner = Runner(ParallelAgent("par", [left, right]))
    await runner.invoke("hi", options={"k": "run"}, agent_options={"right": {"k": "right"}})
    assert dict(left.options[0]) == {"k": "run"}
    assert dict(right.options[0]) == {"k": "right"}


async def test_an_agent_tool_nested_run_sees_the_callers_run_options() -> None:
    helper, other = _Seen("helper"), _Seen("other")
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("helper", {"request": "a"}, id="c1"),
                    tool_call("other", {"request": "b"}, id="c2"),
                ]
            ),
            "done",
        ]
    )
    agent = ReActAgent("main", model, tools=[AgentTool(helper), AgentTool(other)])
    await Runner(agent).invoke(
        "hi", options={"tenant": "t1"}, agent_options={"helper": {"tenant": "t2"}}
    )
    assert dict(helper.options[0]) == {"tenant": "t2"}
    assert dict(other.options[0]) == {"tenant": "t1"}


async def test_a_resume_takes_its_own_options_since_none_are_saved(tmp_path: Any) -> None:
    store = SQLiteCheckpointStore(str(tmp_path / "cp.db"))
    agent = _Seen("gate", pause=True)
    runner = Runner(agent, checkpoint_store=store)
    client = object()  # not JSON: a checkpoint holding it could not be saved
    paused = await runner.invoke("hi", options={"client": client, "v": 1})
    assert paused.interrupt is not None and paused.checkpoint_id is not None
    assert agent.options[0]["client"] is client
    data = await store.get(paused.checkpoint_id)
    assert data is not None
    # The names are saved, for the resume's check (below), never the values.
    assert decode_checkpoint(data, paused.checkpoint_id)["options"] == {"run": ["client", "v"]}
    assert b"object at" not in data and b'"v": 1' not in data
    resumed = await runner.invoke_resume(
        paused.checkpoint_id, options={"client": client, "v": 2}, agent_options={"gate": {"w": 3}}
    )
    assert resumed.text == "gate done"
    assert dict(agent.options[1]) == {"client": client, "v": 2, "w": 3}
    await store.aclose()


async def test_a_resume_without_the_paused_runs_options_is_refused_naming_them(
    tmp_path: Any,
) -> None:
    """A run given ``options={"deps": ...}`` paused; its resume without them ran, and the
    resumed tool read no deps (a KeyError its model read, the approved call not made) or an
    agent went on without them: found late, if at all. The resume is refused now, before
    anything runs, naming what it lacks (the names are saved, never the values), and the
    checkpoint is kept for the resume that gives them."""
    store = SQLiteCheckpointStore(str(tmp_path / "cp.db"))
    gate, other = _Seen("gate", pause=True), _Seen("other")
    runner = Runner(SequentialAgent("steps", [gate, other]), checkpoint_store=store)
    paused = await runner.invoke(
        "hi", options={"deps": object(), "tenant": "t1"}, agent_options={"gate": {"limit": 5}}
    )
    assert paused.checkpoint_id is not None
    cases: list[tuple[dict[str, Any], str]] = [
        ({}, "options 'deps', 'tenant'; agent_options['gate'] 'limit'"),
        ({"options": {"deps": 1}}, "options 'tenant'; agent_options['gate'] 'limit'"),
        (
            {"options": {"deps": 1, "tenant": "t1"}, "agent_options": {"other": {"limit": 5}}},
            "agent_options['gate'] 'limit'",
        ),
    ]
    for given, lacking in cases:
        with pytest.raises(ValueError) as refused:
            await runner.invoke_resume(paused.checkpoint_id, **given)
        assert str(refused.value) == (
            f"checkpoint {paused.checkpoint_id!r} paused a run given run options this resume "
            f"lacks: {lacking}. Run options are not saved (a client, a connection): give them to "
            "the resume again (resume(..., options=..., agent_options=...)), any value (None) "
            "for one no agent reads now. Nothing ran and the checkpoint is kept"
        )
        events = runner.resume(paused.checkpoint_id, **given)  # the same from its first event
        with pytest.raises(ValueError, match="this resume lacks: "):
            await anext(events)
    assert len(gate.options) == 1 and other.options == []  # nothing ran
    assert await store.get(paused.checkpoint_id) is not None
    # A designated option given run-wide applies to the agent too; None for one no agent reads.
    done = await runner.invoke_resume(
        paused.checkpoint_id, options={"deps": None, "tenant": "t2", "limit": 6}
    )
    assert done.text == "other done" and dict(gate.options[1])["limit"] == 6
    await store.aclose()


async def test_a_resume_lacking_run_options_is_a_checkpoint_error_a_service_tells_apart() -> None:
    """The refusal is the serving code's mistake (a new version forgot to pass ``deps``), not the
    client's: a plain ``ValueError`` was what a bad decision raises, and a service mapping those
    to 400 told the client its request was wrong. A ``CheckpointError`` as the other refusals of
    a resume the service must fix, and still a ``ValueError`` for code written before."""
    store = InMemoryCheckpointStore()
    runner = Runner(_Seen("gate", pause=True), checkpoint_store=store)
    paused = await runner.invoke("hi", options={"deps": 1})
    assert paused.checkpoint_id is not None
    with pytest.raises(CheckpointError, match="this resume lacks: options 'deps'") as refused:
        await runner.invoke_resume(paused.checkpoint_id)
    assert isinstance(refused.value, ValueError)
    assert not isinstance(refused.value, (adk.CheckpointNotFoundError, adk.CheckpointBusyError))
    with pytest.raises(ValueError, match=r"^unknown interrupt point id") as bad:  # the client's
        await runner.invoke_resume(paused.checkpoint_id, {"agent:nope": 1}, options={"deps": 1})
    assert not isinstance(bad.value, CheckpointError)
    done = await runner.invoke_resume(paused.checkpoint_id, options={"deps": 1})
    assert done.text == "gate done"


async def test_options_designated_to_an_agent_gone_since_the_pause_are_not_asked_for() -> None:
    # A redeploy that removed the agent: its agent_options would be refused as naming no agent
    # of the runner, so its names are not asked for (the run-wide ones still are).
    store = InMemoryCheckpointStore()
    gate = _Seen("gate", pause=True)
    before = Runner(SequentialAgent("steps", [gate, _Seen("gone")]), checkpoint_store=store)
    paused = await before.invoke("hi", options={"v": 1}, agent_options={"gone": {"x": 1}})
    assert paused.checkpoint_id is not None
    after = Runner(SequentialAgent("steps", [gate]), checkpoint_store=store)
    with pytest.raises(ValueError, match=r"this resume lacks: options 'v'\. "):
        await after.invoke_resume(paused.checkpoint_id)
    done = await after.invoke_resume(paused.checkpoint_id, options={"v": 1})
    assert done.text == "gate done"


@pytest.mark.parametrize(
    "names",
    [["deps"], {"run": "deps"}, {"run": [1]}, {"run": [], "agents": {"gate": "x"}}, {"x": []}],
)
async def test_a_checkpoint_whose_option_names_are_malformed_is_refused(names: Any) -> None:
    # Read before they are compared: a checkpoint a writer broke is refused as malformed, not
    # taken for names the resume lacks (or for none).
    store = InMemoryCheckpointStore()
    runner = Runner(_Seen("gate", pause=True), checkpoint_store=store)
    paused = await runner.invoke("hi", options={"deps": 1})
    assert paused.checkpoint_id is not None
    async with rewrite_checkpoint(store, paused.checkpoint_id) as body:
        body["options"] = names
    with pytest.raises(CheckpointError, match="options is not the names of the run options"):
        await runner.invoke_resume(paused.checkpoint_id, options={"deps": 1})


async def test_bad_options_fail_at_the_call_with_a_type_error() -> None:
    runner = Runner(_Seen("solo"))
    with pytest.raises(TypeError, match="options must be a mapping"):
        runner.run("hi", options=[("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="option names must be str"):
        await runner.invoke("hi", options={1: "a"})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="agent_options must be a mapping"):
        await runner.invoke("hi", agent_options=["solo"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"agent_options\['solo'\] must be a mapping"):
        await runner.invoke("hi", agent_options={"solo": 3})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="keys must be agent names"):
        await runner.invoke("hi", agent_options={("solo",): {}})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="options must be a mapping"):
        runner.resume("cp", options="fast")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="options must be a mapping"):
        await runner.invoke_resume("cp", options=1)  # type: ignore[arg-type]


# -- ReActAgent: per-run model options ---------------------------------------------------------


async def test_react_model_options_from_the_run_are_merged_over_the_agents_own() -> None:
    model = ScriptedModel(["one", "two", "three"])
    agent = ReActAgent("r", model, model_options=ModelOptions(temperature=0.1, max_tokens=50))
    runner = Runner(agent)
    await runner.invoke("hi", options={"model_options": {"temperature": 0.7}})
    await runner.invoke("hi")  # the next run is back to the agent's own
    await runner.invoke("hi", options={"model_options": ModelOptions(max_tokens=9, extra={"a": 1})})
    first, second, third = (request.options for request in model.requests)
    assert first is not None and (first.temperature, first.max_tokens) == (0.7, 50)
    assert second is agent.model_options
    assert third is not None and (third.temperature, third.max_tokens) == (0.1, 9)
    assert third.extra == {"a": 1}


async def test_react_model_options_designated_to_one_agent_reach_only_its_model() -> None:
    model_a, model_b = ScriptedModel(["a"]), ScriptedModel(["b"])
    seq = SequentialAgent("seq", [ReActAgent("a", model_a), ReActAgent("b", model_b)])
    await Runner(seq).invoke("hi", agent_options={"b": {"model_options": {"max_tokens": 5}}})
    assert model_a.requests[0].options is None
    assert model_b.requests[0].options == ModelOptions(max_tokens=5)


async def test_a_run_forced_tool_choice_is_reset_after_the_tool_round() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedModel([Reply(tool_calls=[tool_call("ping", {}, id="c1")]), "done"])
    agent = ReActAgent("r", model, tools=[ping])
    await Runner(agent).invoke("hi", options={"model_options": {"tool_choice": "required"}})
    first, second = (request.options for request in model.requests)
    assert first is not None and first.tool_choice == "required"
    assert second is not None and second.tool_choice is None


class _Answer(BaseModel):
    value: int


async def test_a_native_output_schema_keeps_its_response_format_over_the_runs() -> None:
    model = ScriptedModel(['{"value": 1}', '{"value": 2}'])
    agent = ReActAgent("r", model, output_schema=_Answer)
    runner = Runner(agent)
    own = {"name": "other", "schema": {"type": "object"}}
    await runner.invoke(
        "hi", options={"model_options": {"response_format": own, "temperature": 0.5}}
    )
    await runner.invoke("hi")
    run_options, plain = (request.options for request in model.requests)
    assert run_options is not None and plain is not None
    assert run_options.temperature == 0.5
    assert run_options.response_format == plain.response_format != own
    assert plain.temperature is None  # the agent's cached options were not changed by the run


async def test_bad_react_model_options_fail_the_run_with_a_clear_error() -> None:
    runner = Runner(ReActAgent("r", ScriptedModel(["never"])))
    with pytest.raises(RunError, match="model_options must be a ModelOptions or a mapping"):
        await runner.invoke("hi", options={"model_options": 0.5})
    with pytest.raises(RunError, match=r"(?s)model_options is invalid.*temprature"):
        await runner.invoke("hi", options={"model_options": {"temprature": 0.5}})


async def test_options_designated_to_no_agent_of_the_tree_are_refused_naming_the_agents(
    tmp_path: Any,
) -> None:
    """A typo in a designated agent's name (``"biling"``) left the options unread and the agent
    running without them, with no word: refused at the call, before anything runs, naming the
    agents that can be designated (an AgentTool's agent and a tool resource's included)."""
    ran = _Seen("billing")
    nested = _Seen("helper")
    model = ScriptedModel(["done"], cycle=True)
    agent = ReActAgent("desk", model, tools=[AgentTool(nested), "lookup"])
    resources = Resources()
    resources.add_tool(AgentTool(_Seen("lookup")))
    runner = Runner(SequentialAgent("steps", [ran, agent]), resources=resources)
    known = "['billing', 'desk', 'helper', 'lookup', 'steps']"
    with pytest.raises(
        ValueError, match=r"agent_options names no agent of this runner: \['biling'\]"
    ) as raised:
        await runner.invoke("hi", agent_options={"biling": {"tier": "gold"}})
    assert f"its agents are {known}" in str(raised.value)
    assert ran.options == [] and model.requests == []
    with pytest.raises(ValueError, match="biling"):
        runner.run("hi", agent_options={"biling": {}})
    with pytest.raises(ValueError, match="biling"):
        runner.resume("cp", agent_options={"biling": {}})
    with pytest.raises(ValueError, match="biling"):
        await runner.invoke_resume("cp", agent_options={"biling": {}})
    for name in ("billing", "desk", "helper", "lookup", "steps"):  # each can be designated
        await runner.invoke("hi", agent_options={name: {"tier": "gold"}})
    assert dict(ran.options[0]) == {"tier": "gold"}
