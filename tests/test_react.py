"""ReActAgent: the tool loop, its events, structured output, transfer, exit and tool sources."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import ScriptAgent
from pydantic import BaseModel

import adk
from adk import AgentEvent, AgentInput, BaseAgent, Message, RunContext, Runner, SequentialAgent
from adk.resources import Resources
from adk.testing import Reply, ScriptedModel, simplify_events, tool_call
from prebuilt import MaxIterationsError, OutputRejected, OutputSchemaError, ReActAgent


async def run_events(
    agent: Any,
    text: str = "hi",
    *,
    streaming: bool = False,
    session: dict[str, Any] | None = None,
    resources: Any = None,
) -> list[AgentEvent]:
    """Every event of a run, with streams read to the end (as a user printing them would)."""
    runner = Runner(agent, enable_streaming=streaming, resources=resources)
    events = []
    async for event in runner.run(text, session=session):
        if event.output is not None and event.output.stream is not None:
            with contextlib.suppress(Exception):  # the agent reports it as an error event
                await event.output.stream.collect()
        events.append(event)
    return events


def calls(*names_args: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tool_calls=[tool_call(name, args) for name, args in names_args])


@adk.tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


# -- a tool round -------------------------------------------------------------------------------
async def test_tool_round_events_come_in_completion_order() -> None:
    """One assistant event, then one tool event per result as each completes, then the answer."""
    fast_done = asyncio.Event()
    finished: list[str] = []

    async def slow() -> str:
        """Slow tool."""
        await fast_done.wait()
        finished.append("slow")
        return "slow result"

    async def fast() -> str:
        """Fast tool."""
        finished.append("fast")
        fast_done.set()
        return "fast result"

    model = ScriptedModel([calls(("slow", {}), ("fast", {})), "both done"])
    agent = ReActAgent("a", model, tools=[slow, fast])
    events = await run_events(agent)

    assert simplify_events(events) == [
        "a: [call slow {}]",
        "a: [call fast {}]",
        "a: [tool fast] fast result",
        "a: [tool slow] slow result",
        "a: both done",
    ]
    assert len(events) == 4  # the assistant message with two calls is one event
    assert finished == ["fast", "slow"]
    assert [e.output.role for e in events if e.output] == ["assistant", "tool", "tool", "assistant"]
    # The second model call sees the calls and both answers, linked by call id.
    second = model.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool", "tool"]
    ids = {c.id for c in second[1].tool_calls}
    assert {m.tool_call_id for m in second[2:]} == ids


async def test_tool_round_streams_one_event_per_model_call() -> None:
    model = ScriptedModel([calls(("add", {"a": 1, "b": 2})), "sum=3"], chunk_size=2)
    events = await run_events(ReActAgent("a", model, tools=[add]), streaming=True)
    assert simplify_events(events) == [
        'a: [call add {"a": 1, "b": 2}]',
        "a: [tool add] 3",
        "a: sum=3",
    ]
    assert events[0].output is not None and events[0].output.stream is not None
    assert events[1].message is not None and events[1].message.role == "tool"
    assert events[2].output is not None and events[2].output.stream is not None
    assert all(r.stream for r in model.requests)


async def test_concurrent_tool_calls_run_concurrently() -> None:
    """Tool A waits until tool B has started: run one after the other, A would never see it."""
    b_started = asyncio.Event()

    async def tool_a() -> str:
        """A."""
        async with asyncio.timeout(5):  # fails the test instead of hanging if calls are serial
            await b_started.wait()
        return "a saw b running"

    async def tool_b() -> str:
        """B."""
        b_started.set()
        return "b"

    model = ScriptedModel([calls(("tool_a", {}), ("tool_b", {})), "ok"])
    events = await run_events(ReActAgent("a", model, tools=[tool_a, tool_b]))
    assert "a: [tool tool_a] a saw b running" in simplify_events(events)


# -- return directly ----------------------------------------------------------------------------
async def test_return_directly_results_come_after_other_tools_last_in_call_order_wins() -> None:
    """Completion order is direct_b, plain, direct_a; emitted: plain, then the direct results in
    call order (direct_a, direct_b); direct_b, last called, is the final output."""
    b_done, plain_done = asyncio.Event(), asyncio.Event()
    finished: list[str] = []

    async def direct_a() -> str:
        """A."""
        await plain_done.wait()
        finished.append("direct_a")
        return "from a"

    async def plain() -> str:
        """Plain."""
        await b_done.wait()
        finished.append("plain")
        plain_done.set()
        return "from plain"

    async def direct_b() -> str:
        """B."""
        finished.append("direct_b")
        b_done.set()
        return "from b"

    model = ScriptedModel([calls(("direct_a", {}), ("plain", {}), ("direct_b", {}))])
    agent = ReActAgent(
        "a",
        model,
        tools=[direct_a, plain, direct_b],
        return_directly=["direct_a", "direct_b"],
        output_key="answer",
    )
    result = await Runner(agent).invoke("go")

    assert finished == ["direct_b", "plain", "direct_a"]
    assert simplify_events(result.events)[3:] == [
        "a: [tool plain] from plain",
        "a: [tool direct_a] from a",
        "a: [tool direct_b] from b",
    ]
    assert model.calls == 1  # the agent ended without asking the model again
    assert result.session["answer"] == "from b"
    assert result.text == "from b"


async def test_failed_return_directly_tool_goes_back_to_the_model() -> None:
    def lookup(key: str) -> str:
        """Look up."""
        raise KeyError(key)

    model = ScriptedModel([calls(("lookup", {"key": "x"})), "could not find x"])
    agent = ReActAgent("a", model, tools=[lookup], return_directly=["lookup"])
    events = await run_events(agent)
    assert simplify_events(events)[-2:] == [
        "a: [tool lookup] Error: tool 'lookup' failed: KeyError: 'x'",
        "a: could not find x",
    ]


# -- max iterations -----------------------------------------------------------------------------
def five_rounds_then_answer() -> ScriptedModel:
    return ScriptedModel([calls(("add", {"a": i, "b": 1})) for i in range(5)] + ["done"])


async def test_max_iterations_counts_model_calls_boundary_success() -> None:
    model = five_rounds_then_answer()
    result = await Runner(ReActAgent("a", model, tools=[add], max_iterations=6)).invoke("go")
    assert result.text == "done"
    assert model.calls == 6


async def test_max_iterations_exceeded_is_an_error_event() -> None:
    model = five_rounds_then_answer()
    events = await run_events(ReActAgent("a", model, tools=[add], max_iterations=5))
    assert model.calls == 5
    errors = [e for e in events if e.error is not None]
    assert len(errors) == 1 and errors is not None
    assert errors[0] is events[-1]
    assert "exceeds max iterations" in errors[0].error.message  # type: ignore[union-attr]
    assert isinstance(errors[0].exception, MaxIterationsError)
    with pytest.raises(adk.RunError, match="exceeds max iterations"):
        await Runner(
            ReActAgent("a", five_rounds_then_answer(), tools=[add], max_iterations=5)
        ).invoke("go")


# -- instruction templating ---------------------------------------------------------------------
async def test_instruction_is_filled_from_session_values() -> None:
    model = ScriptedModel(["ok"])
    agent = ReActAgent(
        "a",
        model,
        instruction='Help {user}. {{literal}} stays. JSON {"k": 1} stays. Mood: {mood?}.',
    )
    await Runner(agent).invoke("hi", session={"user": "Ada"})
    system = model.requests[0].messages[0]
    assert system.role == "system"
    assert system.content == 'Help Ada. {literal} stays. JSON {"k": 1} stays. Mood: .'


async def test_instruction_injection_is_not_expanded() -> None:
    """A session value holding ``{secret}`` (say, typed by a user) is inserted as is."""
    model = ScriptedModel(["ok"])
    agent = ReActAgent("a", model, instruction="The user's name is {name}.")
    await Runner(agent).invoke("hi", session={"name": "{secret} {{x}}", "secret": "hunter2"})
    system = model.requests[0].messages[0].content
    assert system == "The user's name is {secret} {{x}}."
    assert "hunter2" not in system


async def test_instruction_missing_key_is_a_clear_error() -> None:
    model = ScriptedModel(["never"])
    events = await run_events(ReActAgent("a", model, instruction="Help {user}."))
    assert simplify_events(events) == [
        "a: [error agent 'a' uses {user} but the session has no value 'user' (write {user?} "
        "for an optional value, {{user}} for the literal text {user})]"
    ]
    assert model.calls == 0


async def test_instruction_keeps_nested_json_and_reads_scoped_keys() -> None:
    """``}}`` closing a nested JSON object is not an escape; Google ADK's ``{user:name}`` keys
    are session values like any other."""
    model = ScriptedModel(["ok"])
    agent = ReActAgent(
        "a",
        model,
        instruction='Reply like {"a": {"b": [1, {"c": 2}]}}. Hi {user:name}. Tier {app:tier?}.',
    )
    await Runner(agent).invoke("hi", session={"user:name": "Ann"})
    system = model.requests[0].messages[0].content
    assert system == 'Reply like {"a": {"b": [1, {"c": 2}]}}. Hi Ann. Tier .'


# -- output_key ---------------------------------------------------------------------------------
@pytest.mark.parametrize("streaming", [False, True])
async def test_output_key_stores_the_final_text(streaming: bool) -> None:
    model = ScriptedModel(
        [calls(("add", {"a": 2, "b": 2})), "the sum is four, as computed"], chunk_size=3
    )
    runner = Runner(
        ReActAgent("a", model, tools=[add], output_key="out"), enable_streaming=streaming
    )
    result = await runner.invoke("2+2?")
    assert result.session["out"] == "the sum is four, as computed"


@pytest.mark.parametrize(("key", "shown"), [("", "str ''"), (5, "int 5")])
def test_an_output_key_that_is_not_a_non_empty_str_is_refused_when_made(
    key: Any, shown: str
) -> None:
    """``output_key=""`` stored nothing without a word, and ``output_key=5`` stored the answer
    under an int key, which failed the run's next pause ("could not save checkpoint ... dict
    keys must be strings")."""
    with pytest.raises(TypeError) as refused:
        ReActAgent("a", ScriptedModel(["ok"]), output_key=key)
    assert str(refused.value) == (
        "ReActAgent 'a': output_key must be a non-empty str (the session key the answer is "
        f"stored under), got {shown}"
    )


# -- output_schema ------------------------------------------------------------------------------
class Weather(BaseModel):
    city: str
    celsius: int


async def test_output_schema_native_uses_response_format() -> None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": 4}'], supports_response_format=True)
    agent = ReActAgent("w", model, instruction="Report.", output_schema=Weather, output_key="k")
    result = await Runner(agent).invoke("weather?")
    options = model.requests[0].options
    assert options is not None and options.response_format is not None
    assert options.response_format["name"] == "Weather"
    # in OpenAI's strict mode: objects closed, every property required (both already are)
    strict_schema = {**Weather.model_json_schema(), "additionalProperties": False}
    assert options.response_format["schema"] == strict_schema
    assert options.response_format["strict"] is True
    assert model.requests[0].messages[0].content == "Report."  # no schema in the prompt
    assert simplify_events(result.events) == [
        'w: {"city": "Oslo", "celsius": 4}',
        "w: [custom Weather(city='Oslo', celsius=4)]",
    ]
    assert result.output == Weather(city="Oslo", celsius=4)
    assert result.events[-1].output is not None
    assert result.events[-1].output.custom == Weather(city="Oslo", celsius=4)
    assert result.session["k"] == '{"city": "Oslo", "celsius": 4}'


async def test_output_schema_native_keeps_other_model_options() -> None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": 4}'])
    options = adk.ModelOptions(temperature=0.1)
    agent = ReActAgent("w", model, output_schema=Weather, model_options=options)
    await Runner(agent).invoke("weather?")
    sent = model.requests[0].options
    assert sent is not None and sent.temperature == 0.1 and sent.response_format is not None


async def test_model_options_and_output_schema_set_after_a_run_apply_to_the_next() -> None:
    class Other(BaseModel):
        note: str

    model = ScriptedModel(
        ['{"city": "Oslo", "celsius": 4}', '{"note": "n"}'], supports_response_format=True
    )
    agent = ReActAgent(
        "w", model, output_schema=Weather, model_options=adk.ModelOptions(temperature=0.9)
    )
    await Runner(agent).invoke("one")
    agent.model_options = adk.ModelOptions(temperature=0.0)
    agent.output_schema = Other
    result = await Runner(agent).invoke("two")

    options = model.requests[1].options
    assert options is not None and options.temperature == 0.0
    assert options.response_format is not None and options.response_format["name"] == "Other"
    assert result.output == Other(note="n")


async def test_output_schema_by_instruction_when_not_native() -> None:
    model = ScriptedModel(['{"city": "Rome", "celsius": 20}'], supports_response_format=False)
    agent = ReActAgent("w", model, instruction="Report.", output_schema=Weather)
    result = await Runner(agent).invoke("weather?")
    request = model.requests[0]
    assert request.options is None
    system = request.messages[0].content
    assert system.startswith("Report.\n\n")
    assert "JSON" in system and json.dumps(Weather.model_json_schema()) in system
    assert result.output == Weather(city="Rome", celsius=20)


@pytest.mark.parametrize(
    "answer",
    [
        '```json\n{"city": "Oslo", "celsius": 4}\n```',
        '```\n{"city": "Oslo", "celsius": 4}\n```\n',
        'Here you go:\n```json\n{"city": "Oslo", "celsius": 4}\n```',
    ],
)
async def test_output_schema_strips_code_fences(answer: str) -> None:
    model = ScriptedModel([answer], supports_response_format=False)
    result = await Runner(ReActAgent("w", model, output_schema=Weather)).invoke("weather?")
    assert result.output == Weather(city="Oslo", celsius=4)
    assert model.calls == 1


@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("ending", ["answer", "return_directly"])
async def test_output_key_stores_the_json_of_a_fenced_answer(ending: str, streaming: bool) -> None:
    # A porter's next agent reads {forecast} (or json.loads it), as Google ADK stores the object:
    # the fences and the words around them are the model's wrapping, not the answer.
    fenced = 'Here you go:\n```json\n{"city": "Oslo", "celsius": 4}\n```\nAnything else?'

    def report() -> str:
        """Report the weather."""
        return fenced

    if ending == "answer":
        forecaster = ReActAgent(
            "forecaster",
            ScriptedModel([fenced], supports_response_format=False),
            output_schema=Weather,
            output_key="forecast",
        )
    else:
        forecaster = ReActAgent(
            "forecaster",
            ScriptedModel([calls(("report", {}))]),
            tools=[report],
            return_directly=["report"],
            output_schema=Weather,
            output_key="forecast",
        )
    writer_model = ScriptedModel(["Cold in Oslo."])
    writer = ReActAgent("writer", writer_model, instruction="Forecast: {forecast}")
    pipeline = SequentialAgent("pipeline", [forecaster, writer])
    result = await Runner(pipeline, enable_streaming=streaming).invoke("weather?")
    assert json.loads(result.session["forecast"]) == {"city": "Oslo", "celsius": 4}
    system = writer_model.requests[0].messages[0].content
    assert system == 'Forecast: {"city": "Oslo", "celsius": 4}'


async def test_output_schema_retries_once_with_the_validation_error() -> None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": "cold"}', '{"city": "Oslo", "celsius": 4}'])
    result = await Runner(ReActAgent("w", model, output_schema=Weather)).invoke("weather?")
    assert result.output == Weather(city="Oslo", celsius=4)
    retry = model.requests[1].messages[-1]
    assert retry.role == "user"
    assert "does not match the required Weather JSON schema" in retry.content
    assert "celsius: Input should be a valid integer" in retry.content
    assert "errors.pydantic.dev" not in retry.content  # no noise for the model
    assert model.requests[1].messages[-2].content == '{"city": "Oslo", "celsius": "cold"}'


@pytest.mark.parametrize("retried_before_pause", [True, False])
async def test_output_schema_retry_is_remembered_across_a_pause(retried_before_pause: bool) -> None:
    """The one retry is per run, not per process: a run that used it before pausing for a tool
    fails on the next answer off the schema after resuming; one that did not still gets it."""

    @adk.tool
    def check(ctx: adk.ToolContext) -> str:
        """Ask a person."""
        if ctx.resume is None:
            raise adk.Interrupt("ok?")
        return "checked"

    before = ["sunny"] if retried_before_pause else []
    model = ScriptedModel(
        [
            *before,
            Reply(tool_calls=[tool_call("check", {})]),
            "still sunny",
            '{"city": "Oslo", "celsius": 4}',
        ]
    )
    runner = Runner(ReActAgent("w", model, tools=[check], output_schema=Weather))
    paused = await runner.invoke("weather?")
    assert paused.interrupt is not None and paused.checkpoint_id is not None
    if retried_before_pause:
        with pytest.raises(adk.RunError) as failed:
            await runner.invoke_resume(paused.checkpoint_id, "yes")
        assert isinstance(failed.value.__cause__, OutputSchemaError)
        assert model.calls == 3
    else:
        resumed = await runner.invoke_resume(paused.checkpoint_id, "yes")
        assert resumed.output == Weather(city="Oslo", celsius=4)
        assert model.calls == 3


async def test_output_schema_fails_after_the_retry() -> None:
    model = ScriptedModel(["sunny", "still sunny"])
    events = await run_events(ReActAgent("w", model, output_schema=Weather))
    assert model.calls == 2
    rejected = OutputRejected(
        schema_name="Weather",
        problem="the answer is not valid JSON (Invalid JSON: expected value at line 1 column 1)",
    )
    assert simplify_events(events)[:3] == [
        "w: sunny",
        f"w: [custom {rejected!r}]",
        "w: still sunny",
    ]
    last = events[-1]
    assert last.error is not None and last.error.type == "OutputSchemaError"
    assert "does not match Weather after a retry" in last.error.message
    assert isinstance(last.exception, OutputSchemaError)


@pytest.mark.parametrize("tool_rounds", [0, 1])
async def test_output_schema_answer_at_the_limit_fails_as_the_answer_it_is(
    tool_rounds: int,
) -> None:
    """The last allowed model call answers off the schema: the retry would need another, so
    the agent ends with the answer's problem (as a held result does, which gets no retry),
    not with "exceeds max iterations ... without a final answer" after asking for a retry that
    cannot come."""

    @adk.tool
    def look() -> str:
        """Look outside."""
        return "sunny"

    script: list[str | Reply] = [calls(("look", {}))] * tool_rounds
    model = ScriptedModel([*script, "sunny", '{"city": "Oslo", "celsius": 4}'])
    agent = ReActAgent(
        "w", model, tools=[look], output_schema=Weather, max_iterations=tool_rounds + 1
    )

    events = await run_events(agent)

    last = events[-1]
    assert last.error is not None and isinstance(last.exception, OutputSchemaError)
    assert "does not match Weather, with no retry left within its max_iterations" in (
        last.error.message
    )
    assert model.calls == tool_rounds + 1


async def test_output_schema_with_streaming() -> None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": 4}'], chunk_size=4)
    events = await run_events(ReActAgent("w", model, output_schema=Weather), streaming=True)
    assert events[0].output is not None and events[0].output.stream is not None
    assert events[-1].output is not None
    assert events[-1].output.custom == Weather(city="Oslo", celsius=4)


# -- exit tool ----------------------------------------------------------------------------------
async def test_exit_tool_ends_the_whole_run_with_its_result() -> None:
    model = ScriptedModel([calls(("exit", {"final_result": "all done"}))])
    first = ReActAgent("first", model, exit_tool=True, output_key="out")
    second = ReActAgent("second", ScriptedModel(["must not run"]))
    result = await Runner(SequentialAgent("seq", [first, second])).invoke("go")

    spec = next(s for s in model.requests[0].tools if s.name == "exit")
    assert spec.parameters["required"] == ["final_result"]
    assert simplify_events(result.events) == [
        'first: [call exit {"final_result": "all done"}]',
        "first: [tool exit] all done",
        "first: [exit]",
    ]
    assert result.text == "all done"
    assert result.session["out"] == "all done"
    assert second.model.calls == 0  # type: ignore[union-attr]


async def test_an_exit_result_comes_after_the_rounds_other_results() -> None:
    """The tool that asks to exit finishes first; its result is held and emitted after the slower
    tool's, so it is the run's last output (``RunResult.text``, and an ``AgentTool``'s result)."""
    finished = asyncio.Event()

    async def finish(ctx: adk.ToolContext) -> str:
        """Finish."""
        ctx.exit()
        finished.set()
        return "finished"

    async def slow() -> str:
        """Slow."""
        await finished.wait()
        return "slow result"

    model = ScriptedModel([calls(("finish", {}), ("slow", {}))])
    agent = ReActAgent("a", model, tools=[finish, slow], output_key="out")
    result = await Runner(agent).invoke("go")

    assert simplify_events(result.events)[2:] == [
        "a: [tool slow] slow result",
        "a: [tool finish] finished",
        "a: [exit]",
    ]
    assert result.text == "finished" and result.session["out"] == "finished"


async def test_the_exit_result_comes_after_return_directly_results() -> None:
    """Both end the agent; ``exit``'s ``final_result`` is the final output whichever is called
    first."""

    def lookup(key: str) -> str:
        """Look up."""
        return f"value of {key}"

    model = ScriptedModel([calls(("exit", {"final_result": "all done"}), ("lookup", {"key": "k"}))])
    agent = ReActAgent("a", model, tools=[lookup], exit_tool=True, return_directly=["lookup"])
    result = await Runner(agent).invoke("go")

    assert simplify_events(result.events)[2:] == [
        "a: [tool lookup] value of k",
        "a: [tool exit] all done",
        "a: [exit]",
    ]
    assert result.text == "all done"


@pytest.mark.parametrize("ending", ["exit", "return_directly"])
async def test_a_tool_result_that_ends_the_agent_is_checked_against_the_output_schema(
    ending: str,
) -> None:
    def report(city: str) -> str:
        """Report the weather."""
        return json.dumps({"city": city, "celsius": 4}) if city == "Oslo" else "sunny"

    def agent(args: dict[str, Any]) -> ReActAgent:
        if ending == "exit":
            reply = calls(("exit", {"final_result": report(**args)}))
            return ReActAgent(
                "w", ScriptedModel([reply]), exit_tool=True, output_schema=Weather, output_key="k"
            )
        model = ScriptedModel([calls(("report", args))])
        return ReActAgent(
            "w",
            model,
            tools=[report],
            return_directly=["report"],
            output_schema=Weather,
            output_key="k",
        )

    result = await Runner(agent({"city": "Oslo"})).invoke("weather?")
    assert result.output == Weather(city="Oslo", celsius=4)
    assert result.session["k"] == '{"city": "Oslo", "celsius": 4}'

    events = await run_events(agent({"city": "Rome"}))
    error = events[-1].error
    assert error is not None and error.type == "OutputSchemaError"
    tool = "exit" if ending == "exit" else "report"
    assert f"the result of tool '{tool}', its final answer, does not match Weather" in error.message
    assert not any(e.output is not None and e.output.custom is not None for e in events)


# -- transfer -----------------------------------------------------------------------------------
def transfer(name: str) -> Reply:
    return calls(("transfer_to_agent", {"agent_name": name}))


async def test_transfer_tool_schema_enumerates_targets() -> None:
    billing = ReActAgent("billing", ScriptedModel(["paid"]), description="Handles invoices.")
    support = ReActAgent("support", ScriptedModel(["fixed"]))
    model = ScriptedModel([transfer("billing")])
    root = ReActAgent("root", model, description="Front desk.", sub_agents=[billing, support])
    await Runner(root).invoke("invoice?")

    spec = next(s for s in model.requests[0].tools if s.name == "transfer_to_agent")
    assert spec.parameters["properties"]["agent_name"]["enum"] == ["billing", "support"]
    assert spec.parameters["required"] == ["agent_name"]
    assert "- billing: Handles invoices." in spec.description
    assert "- support: (no description)" in spec.description
    # A sub-agent may transfer back to its parent: its tool lists the parent.
    child_spec = next(s for s in billing.model.requests[0].tools)  # type: ignore[union-attr]
    assert child_spec.parameters["properties"]["agent_name"]["enum"] == ["root"]
    assert "- root: Front desk." in child_spec.description
    assert root.sub_agents == [billing, support]


async def test_transfer_to_a_wrong_name_is_an_error_the_model_corrects() -> None:
    billing = ReActAgent("billing", ScriptedModel(["invoice sent"]), description="Invoices.")
    model = ScriptedModel([transfer("biling"), transfer("billing")])
    root = ReActAgent("root", model, sub_agents=[billing])
    events = await run_events(root)
    assert simplify_events(events) == [
        'root: [call transfer_to_agent {"agent_name": "biling"}]',
        "root: [tool transfer_to_agent] Error: cannot transfer to 'biling': not an agent 'root' "
        "can transfer to; valid agent names: billing",
        'root: [call transfer_to_agent {"agent_name": "billing"}]',
        "root: [tool transfer_to_agent] Transferred to agent 'billing'",
        "root: [transfer -> billing]",
        "billing: invoice sent",
    ]
    assert events[-1].run_path == ("root", "billing")


async def test_transfer_to_a_peer_is_an_error_that_does_not_say_it_has_no_such_agent() -> None:
    # The OpenAI Agents SDK's billing.handoffs=[faq]: here billing transfers to its parent only.
    # "no such agent" told the model faq did not exist, when it is one transfer away.
    faq = ReActAgent("faq", ScriptedModel(["see the FAQ"]), description="FAQ.")
    billing_model = ScriptedModel([transfer("faq"), transfer("root")])
    billing = ReActAgent("billing", billing_model, description="Invoices.")
    root_model = ScriptedModel([transfer("billing"), "handled"])
    events = await run_events(ReActAgent("root", root_model, sub_agents=[billing, faq]))
    assert simplify_events(events)[4] == (
        "billing: [tool transfer_to_agent] Error: cannot transfer to 'faq': not an agent "
        "'billing' can transfer to; valid agent names: root"
    )
    assert events[-1].agent_name == "root"


@pytest.mark.parametrize("arguments", ["{bad json", "[1, 2]", '{"agent_name": 3}', ""])
async def test_malformed_transfer_arguments_are_an_error_saying_so(arguments: str) -> None:
    # Not "cannot transfer to None: no such agent", which points the model at the wrong mistake.
    billing = ReActAgent("billing", ScriptedModel(["invoice sent"]), description="Invoices.")
    model = ScriptedModel([Reply(tool_calls=[tool_call("transfer_to_agent", arguments)]), "ok"])
    events = await run_events(ReActAgent("root", model, sub_agents=[billing]))
    assert simplify_events(events)[1] == (
        "root: [tool transfer_to_agent] Error: invalid arguments for tool 'transfer_to_agent': "
        'expected a JSON object like {"agent_name": "<name>"}; valid agent names: billing'
    )
    assert simplify_events(events)[-1] == "root: ok"


def test_a_tool_named_like_the_transfer_tool_is_rejected() -> None:
    def transfer_to_agent(agent_name: str) -> str:
        """Mine."""
        return agent_name

    sub = ReActAgent("sub", ScriptedModel(["x"]))
    with pytest.raises(ValueError, match="clashes with the transfer tool"):
        ReActAgent("root", ScriptedModel([]), tools=[transfer_to_agent], sub_agents=[sub])


# -- tool problems and model failures ------------------------------------------------------------
async def test_tool_problems_reach_the_model_as_error_results() -> None:
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("add", "{not json"),
                    tool_call("add", {"a": "one", "b": 2}),
                    tool_call("nope", {}),
                    tool_call("explode", {}),
                ]
            ),
            "sorry",
        ]
    )
    result = await Runner(ReActAgent("a", model, tools=[add, explode])).invoke("go")
    tool_messages = [m for m in model.requests[1].messages if m.role == "tool"]
    texts = sorted(m.content for m in tool_messages)
    assert len(texts) == 4 and all(t.startswith("Error:") for t in texts)
    joined = "\n".join(texts)
    assert "invalid JSON arguments for tool 'add'" in joined
    assert "invalid arguments for tool 'add': a: Input should be a valid integer" in joined
    assert "unknown tool 'nope'; available tools: add, explode" in joined
    assert "tool 'explode' failed: RuntimeError: kaboom" in joined
    assert result.text == "sorry"


@pytest.mark.parametrize("streaming", [False, True])
async def test_model_exception_is_one_error_event(streaming: bool) -> None:
    model = ScriptedModel([calls(("add", {"a": 1, "b": 1})), adk.ModelError("server down")])
    events = await run_events(ReActAgent("a", model, tools=[add]), streaming=streaming)
    errors = [e for e in events if e.error is not None]
    assert len(errors) == 1 and events[-1] is errors[0]
    assert errors[0].error is not None
    assert errors[0].error.type == "ModelError" and errors[0].error.message == "server down"
    assert isinstance(errors[0].exception, adk.ModelError)


# -- where tools come from -----------------------------------------------------------------------
class Shout:
    """A hand-written Tool object."""

    spec = adk.ToolSpec(
        name="shout",
        description="Upper-case text.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    )

    async def run(self, arguments: str, ctx: adk.ToolContext) -> str:
        return str(json.loads(arguments)["text"]).upper()


class Clock:
    """A Toolset: its tools are resolved when the agent runs."""

    def __init__(self) -> None:
        self.asked = 0

    async def tools(self, ctx: RunContext) -> list[adk.Tool]:
        self.asked += 1

        def now() -> str:
            """The time."""
            return "noon"

        return [adk.FunctionTool(now)]


async def test_tools_from_objects_functions_toolsets_and_resource_names() -> None:
    def double(x: int) -> int:
        """Double a number."""
        return 2 * x

    def greet(name: str) -> str:
        """Greet."""
        return f"hello {name}"

    resources = Resources()
    resources.add_tool(adk.FunctionTool(greet))
    clock = Clock()
    model = ScriptedModel(
        [
            calls(
                ("shout", {"text": "hi"}),
                ("double", {"x": 4}),
                ("now", {}),
                ("greet", {"name": "Ada"}),
                ("add", {"a": 1, "b": 1}),
            ),
            "done",
        ]
    )
    agent = ReActAgent("a", model, tools=[Shout(), double, clock, "greet", add])
    events = await run_events(agent, resources=resources)
    results = sorted(line for line in simplify_events(events) if "[tool " in line)
    assert results == [
        "a: [tool add] 2",
        "a: [tool double] 8",
        "a: [tool greet] hello Ada",
        "a: [tool now] noon",
        "a: [tool shout] HI",
    ]
    assert sorted(s.name for s in model.requests[0].tools) == [
        "add",
        "double",
        "greet",
        "now",
        "shout",
    ]
    assert clock.asked == 1


async def test_unknown_tool_resource_is_an_error_event() -> None:
    agent = ReActAgent("a", ScriptedModel(["x"]), tools=["missing"])
    events = await run_events(agent, resources=Resources())
    assert events[-1].error is not None and "missing" in events[-1].error.message
    # Without resources at all, refused where the Runner is made (it was the run's error event).
    with pytest.raises(ValueError, match="names tool 'missing', and the Runner has no resources"):
        Runner(agent)


async def test_a_model_name_without_resources_says_how_to_call_a_providers_model() -> None:
    # Google ADK takes the provider's model name (model="gemini-2.0-flash"); here a str names a
    # model resource, and the error must say so and what to pass instead: where the Runner is
    # made (it was the first run's RunError).
    agent = ReActAgent("a", "gemini-2.0-flash", instruction="Help.")
    with pytest.raises(ValueError) as failed:
        Runner(agent)
    message = str(failed.value)
    assert "names model 'gemini-2.0-flash', and the Runner has no resources" in message
    assert "resources.add_model('gemini-2.0-flash', model)" in message
    assert "adk.OpenAIChatModel('gemini-2.0-flash', base_url=...)" in message


def test_an_agent_given_as_a_tool_is_refused_naming_agent_tool() -> None:
    # A port puts a helper agent among the tools; the refusal says how to make it one.
    helper = ReActAgent("policy", ScriptedModel(["30 days"]), description="Refund policy.")
    with pytest.raises(TypeError) as refused:
        ReActAgent("billing", ScriptedModel(), tools=[helper])  # type: ignore[list-item]
    assert str(refused.value) == (
        "agent 'billing': a tool must be a Tool, a function, a Toolset or a tool resource name, "
        "got ReActAgent; to call agent 'policy' as a tool, wrap it: adk.AgentTool(agent)"
    )


def test_bad_tool_source_and_duplicate_names_fail_at_construction() -> None:
    with pytest.raises(TypeError, match="a tool must be a Tool, a function"):
        ReActAgent("a", ScriptedModel(), tools=[42])
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        ReActAgent("a", ScriptedModel(), tools=[add, add])
    with pytest.raises(ValueError, match="max_iterations"):
        ReActAgent("a", ScriptedModel(), max_iterations=0)


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        ({"model": None}, TypeError, "model must be a ChatModel or the name of a model resource"),
        ({"model": ""}, TypeError, "model must be a ChatModel"),
        ({"model": ScriptedModel}, TypeError, "model must be a ChatModel"),  # the class
        ({"max_iterations": "3"}, TypeError, "max_iterations must be an int >= 1, got str"),
        ({"max_iterations": True}, TypeError, "max_iterations must be an int >= 1"),
        ({"model_options": {"temperature": 0}}, TypeError, "model_options must be a ModelOptions"),
        ({"tools": "abc"}, TypeError, "tools must be a list, got str 'abc'"),
        ({"tools": add}, TypeError, "tools must be a list"),
        ({"return_directly": "add"}, TypeError, "return_directly must be a list"),
        (
            {"tools": [add], "return_directly": ["ad"]},
            ValueError,
            r"names tools it does not have: \['ad'\]",
        ),
        ({"return_directly": ["exit"]}, ValueError, "names tools it does not have"),
    ],
)
def test_bad_arguments_fail_at_construction_naming_the_parameter(
    arguments: dict[str, Any], error: type[Exception], message: str
) -> None:
    arguments = {"model": ScriptedModel(), **arguments}
    with pytest.raises(error, match=message) as raised:
        ReActAgent("a", **arguments)
    assert "ReActAgent 'a'" in str(raised.value)


class _Verdict(BaseModel):
    ok: bool


@pytest.mark.parametrize(
    ("schema", "advice"),
    [
        (list[str], "make it a field of a model (class Answer(BaseModel): items: list[str])"),
        (dict, "make it a field of a model"),
        (str, "a text answer needs no schema: leave output_schema out"),
        (_Verdict(ok=True), "pass the class, _Verdict, not an instance"),
    ],
)
def test_an_output_schema_that_is_not_a_model_class_is_told_what_to_pass(
    schema: Any, advice: str
) -> None:
    """An OpenAI Agents port passes its ``output_type`` (``list[str]``, ``str`` for text, a
    dataclass): the refusal said only 'must be a pydantic model class', not what was given nor
    how to get such an answer."""
    with pytest.raises(TypeError) as refused:
        ReActAgent("a", ScriptedModel(), output_schema=schema)

    message = str(refused.value)
    assert message.startswith(
        "ReActAgent 'a': output_schema must be a pydantic model class (a BaseModel subclass), got "
    )
    assert advice in message


def test_return_directly_names_are_checked_only_when_every_tool_is_known_up_front() -> None:
    """A Toolset's (or a resource's) tools are known only at run time, and may vary by run."""
    ReActAgent("a", ScriptedModel(), tools=[add], exit_tool=True, return_directly=["add", "exit"])
    ReActAgent("a", ScriptedModel(), tools=[add, "remote"], return_directly=["remote_tool"])
    ReActAgent("a", ScriptedModel(), return_directly=["transfer_to_agent"])  # sub-agents come later


async def test_model_from_resources_by_name() -> None:
    model = ScriptedModel(["from a resource"])
    resources = Resources()
    resources.add_model("main", model)
    events = await run_events(ReActAgent("a", "main"), resources=resources)
    assert simplify_events(events) == ["a: from a resource"]


# -- interrupts ---------------------------------------------------------------------------------
async def test_tool_interrupt_resumes_only_the_open_calls() -> None:
    counted: list[str] = []

    @adk.tool(require_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    def note(text: str) -> str:
        """Note."""
        counted.append(text)
        return "noted"

    model = ScriptedModel(
        [calls(("pay", {"amount": 5}), ("note", {"text": "x"})), "paid and noted"]
    )
    runner = Runner(ReActAgent("a", model, tools=[pay, note]))
    first = await runner.invoke("pay")
    assert first.interrupt is not None
    assert first.interrupt.point_ids == ["agent:a/tool:pay#call_1"]
    assert simplify_events(first.events)[-2:] == [
        "a: [tool note] noted",
        "a: [interrupt agent:a/tool:pay#call_1]",
    ]
    assert first.checkpoint_id is not None
    second = await runner.invoke_resume(first.checkpoint_id, {"approved": True})
    assert simplify_events(second.events) == ["a: [tool pay] paid 5", "a: paid and noted"]
    assert counted == ["x"]  # the finished call did not run again
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "tool", "tool"]


# -- history -------------------------------------------------------------------------------------
async def test_history_rewriter_replaces_the_input() -> None:
    def only_user(entries: Any, agent_name: str) -> list[Message]:
        return [e.message for e in entries if e.is_user_input] + [Message.user("(rewritten)")]

    class Speaker(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            yield AgentEvent.of("something to hide")

    model = ScriptedModel(["ok"])
    agent = ReActAgent("a", model, history_rewriter=only_user)
    await Runner(SequentialAgent("s", [Speaker("speaker"), agent])).invoke("hi")
    assert [m.content for m in model.requests[0].messages] == ["hi", "(rewritten)"]


async def test_history_rewriter_applies_to_the_root_input() -> None:
    def shout(entries: Any, agent_name: str) -> list[Message]:
        return [Message.user(e.message.content.upper()) for e in entries]

    model = ScriptedModel(["ok"])
    await Runner(ReActAgent("a", model, history_rewriter=shout)).invoke("hi")
    assert [m.content for m in model.requests[0].messages] == ["HI"]


@pytest.mark.parametrize("reads_first", [False, True])
async def test_history_rewriter_does_not_replace_an_input_a_parent_made(reads_first: bool) -> None:
    """A parent's own input (PlanExecute's step prompt, say) is used as given; the history view a
    parent passes on is still rewritten, even when the parent read it first."""

    def shout(entries: Any, agent_name: str) -> list[Message]:
        return [Message.user(e.message.content.upper()) for e in entries]

    class Parent(BaseAgent):
        def __init__(self, child: ReActAgent, own: bool) -> None:
            super().__init__("parent")
            self.child, self.own = child, own

        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            if reads_first:
                assert input.messages
            given = AgentInput([Message.user("step: do this")]) if self.own else input
            async for event in self.child.run(given, ctx):
                yield event

    for own, seen in [(True, ["step: do this"]), (False, ["GO", "X"])]:
        model = ScriptedModel(["ok"])
        parent = Parent(ReActAgent("child", model, history_rewriter=shout), own)
        await Runner(SequentialAgent("s", [ScriptAgent("first", "x"), parent])).invoke("go")
        assert [m.content for m in model.requests[0].messages] == seen, own


# -- actions tools ask for ------------------------------------------------------------------------
async def test_tool_actions_come_as_one_event_after_the_round() -> None:
    """``break_loop`` lets the agent finish (the model answers) and then stops the enclosing loop."""

    def stop(ctx: adk.ToolContext) -> str:
        """Stop the loop."""
        ctx.break_loop()
        return "stopping"

    model = ScriptedModel([calls(("stop", {}), ("add", {"a": 1, "b": 1})), "finished"])
    loop = adk.LoopAgent("loop", [ReActAgent("a", model, tools=[stop, add])], max_iterations=3)
    events = await run_events(loop)
    lines = simplify_events(events)
    assert lines[4:] == ["a: [break_loop]", "a: finished"]
    assert sorted(lines[2:4]) == ["a: [tool add] 2", "a: [tool stop] stopping"]
    assert model.calls == 2  # one loop iteration only


async def test_a_tool_that_transfers_ends_the_agent_after_the_round() -> None:
    def escalate(ctx: adk.ToolContext) -> str:
        """Hand over to a person."""
        ctx.transfer("human")
        return "escalated"

    human = ReActAgent("human", ScriptedModel(["A person here."]), description="A person.")
    model = ScriptedModel([calls(("escalate", {}), ("add", {"a": 2, "b": 3})), "never"])
    root = ReActAgent("root", model, tools=[escalate, add], sub_agents=[human])
    lines = simplify_events(await run_events(root))
    assert sorted(lines[2:4]) == ["root: [tool add] 5", "root: [tool escalate] escalated"]
    assert lines[4:] == ["root: [transfer -> human]", "human: A person here."]
    assert model.calls == 1


async def test_closing_a_run_mid_tool_round_cancels_the_calls_still_running_at_once() -> None:
    # The user stops reading after the first tool result (a client went away). The other call
    # must be cancelled by the time the run's close returns: not a few loop steps later, when
    # asyncio gets round to finalizing the dropped round (or, were it in a reference cycle, at
    # the next garbage collection), while the tool kept working for a run nobody reads.
    cancelled: list[str] = []

    @adk.tool
    async def quick() -> str:
        """Answers at once."""
        return "quick"

    @adk.tool
    async def slow() -> str:
        """Takes its time."""
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise
        return "slow"

    calls = [tool_call("quick", {}, id="a"), tool_call("slow", {}, id="b")]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    runner = Runner(ReActAgent("agent", model, tools=[quick, slow]))

    async with contextlib.aclosing(runner.run("go")) as events:
        async for event in events:
            if event.message is not None and event.message.role == "tool":
                break  # quick's result; slow is still running

    assert cancelled == ["slow"]
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []


# -- tool_choice --------------------------------------------------------------------------------
@pytest.mark.parametrize("forced", ["required", {"type": "function", "function": {"name": "add"}}])
async def test_a_forced_tool_choice_is_lifted_after_the_first_tool_round(forced: Any) -> None:
    """Forced on every call, the model could only call tools until max_iterations."""
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})]), "sum=3"])
    options = adk.ModelOptions(tool_choice=forced, temperature=0.2)
    agent = ReActAgent("calc", model, tools=[add], model_options=options)

    result = await Runner(agent).invoke("add")

    assert result.output is not None and result.output.content == "sum=3"
    sent = [r.options for r in model.requests]
    assert sent[0] is not None and sent[0].tool_choice == forced
    assert sent[1] is not None and sent[1].tool_choice is None and sent[1].temperature == 0.2
    assert agent.model_options is options and options.tool_choice == forced  # not mutated


async def test_reset_tool_choice_false_keeps_forcing_a_tool() -> None:
    model = ScriptedModel([Reply(tool_calls=[tool_call("add", {"a": 1, "b": 2})])], cycle=True)
    options = adk.ModelOptions(tool_choice="required")
    agent = ReActAgent(
        "calc",
        model,
        tools=[add],
        model_options=options,
        max_iterations=3,
        reset_tool_choice=False,
    )
    events = await run_events(agent)
    assert [r.options.tool_choice for r in model.requests if r.options] == ["required"] * 3
    assert "exceeds max iterations" in simplify_events(events)[-1]


async def test_a_resumed_turn_keeps_the_tool_choice_lifted() -> None:
    """A pause happens in a tool round, so the resumed model call is free to answer."""

    @adk.tool(require_approval=True)
    async def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    model = ScriptedModel([Reply(tool_calls=[tool_call("pay", {"amount": 5})]), "done"])
    options = adk.ModelOptions(tool_choice="required")
    runner = Runner(ReActAgent("payer", model, tools=[pay], model_options=options))
    paused = await runner.invoke("pay 5")
    assert paused.interrupt is not None
    done = await runner.invoke_resume(paused.checkpoint_id, True)
    assert done.output is not None and done.output.content == "done"
    assert [r.options.tool_choice if r.options else None for r in model.requests] == [
        "required",
        None,
    ]


# -- call ids -----------------------------------------------------------------------------------
async def test_calls_sharing_an_id_get_ids_of_their_own() -> None:
    """Some servers number every call of a turn alike: each result must still go to its call,
    and a pause must be addressable per call."""

    @adk.tool(require_approval=True)
    async def pay(amount: int) -> str:
        """Pay."""
        return f"paid {amount}"

    same = [tool_call("add", {"a": 1, "b": 2}, id="c"), tool_call("pay", {"amount": 5}, id="c")]
    model = ScriptedModel([Reply(tool_calls=same), "done"])
    runner = Runner(ReActAgent("calc", model, tools=[add, pay]))
    paused = await runner.invoke("go")
    assert paused.interrupt is not None
    [point] = paused.interrupt.points
    assert point.id.endswith("tool:pay#c-1")

    done = await runner.invoke_resume(paused.checkpoint_id, True)

    assert done.text == "done"
    sent = model.requests[1].messages
    assert [c.id for c in sent[-3].tool_calls] == ["c", "c-1"]
    assert sorted((m.tool_call_id, m.content) for m in sent[-2:]) == [("c", "3"), ("c-1", "paid 5")]


class _GenerateOnly:
    """A model that implements only ``generate`` (the protocol asks for ``stream`` too)."""

    model_name = "generate-only"

    async def generate(self, messages: Any, *, tools: Any = (), options: Any = None) -> Message:
        return Message.assistant("hi")


@pytest.mark.parametrize("hooked", [False, True])
async def test_a_streaming_run_of_a_model_without_stream_fails_saying_so(hooked: bool) -> None:
    seen: list[str] = []
    callbacks = [adk.Callbacks(before_model=lambda ctx, request: seen.append("model"))]
    agent = ReActAgent("bot", _GenerateOnly())  # type: ignore[arg-type]
    runner = Runner(agent, enable_streaming=True, callbacks=callbacks if hooked else ())

    with pytest.raises(adk.RunError, match=r"model _GenerateOnly has no stream\(\) method"):
        await runner.invoke("hi")
    assert seen == []  # failed before the hooks saw a call that could not be made
    assert (await Runner(agent).invoke("hi")).text == "hi"  # without streaming it serves
