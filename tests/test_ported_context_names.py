"""A Google ADK attribute read from a context says what it is called here.

A tool ported from Google ADK writes ``tool_context.state["k"]``; a callback reads
``callback_context.invocation_id``. The plain ``'ToolContext' object has no attribute 'state'``
became the tool's error result, which the model read while the run went on, and said nothing of
``ctx.session``; the error now names it (and the other renamed members).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

import pytest

import adk
from adk import Callbacks, RunContext, RunError, Runner, Session, ToolContext
from adk.callbacks import ModelRequest
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


def remember(item: str, tool_context: ToolContext) -> str:
    """Remember an item."""
    tool_context.state["item"] = item  # type: ignore[attr-defined]
    return "ok"


async def test_a_tool_reading_state_gets_an_error_result_naming_ctx_session() -> None:
    model = ScriptedModel([Reply(tool_calls=[tool_call("remember", {"item": "x"})]), "done"])
    result = await Runner(ReActAgent("a", model, tools=[remember])).invoke("hi")
    (tool_result,) = [m.content for m in result.messages if m.role == "tool"]
    assert tool_result == (
        "Error: tool 'remember' failed: AttributeError: 'ToolContext' object has no attribute "
        "'state': Google ADK's state is ctx.session here (ctx.session['k'], ctx.session.get('k'))"
    )


async def test_a_callback_reading_invocation_id_fails_naming_run_id() -> None:
    def before_model(ctx: Any, request: Any) -> None:
        print(ctx.invocation_id)

    runner = Runner(
        ReActAgent("a", ScriptedModel(["x"])), callbacks=[Callbacks(before_model=before_model)]
    )
    with pytest.raises(RunError, match=r"invocation_id is ctx\.run_id here"):
        await runner.invoke("hi")


def ask_for_days(days: int, tool_context: ToolContext) -> str:
    """Ask for days off: Google ADK's advanced confirmation, ported as it was written."""
    if not tool_context.tool_confirmation:  # type: ignore[attr-defined]
        tool_context.request_confirmation(hint="approve?", payload={"days": 0})  # type: ignore[attr-defined]
        return "pending"
    return "done"


def ask_again(tool_context: ToolContext) -> str:
    """Ask for a confirmation."""
    tool_context.request_confirmation(hint="approve?")  # type: ignore[attr-defined]
    return "pending"


def end_loop(tool_context: ToolContext) -> str:
    """Google ADK's exit_loop, ported as it was written."""
    tool_context.actions.escalate = True  # type: ignore[attr-defined]
    tool_context.actions.skip_summarization = True  # type: ignore[attr-defined]
    return "ok"


async def test_a_ported_confirmation_and_skip_summarization_name_what_they_are_here() -> None:
    # Google ADK's tool_context.tool_confirmation / request_confirmation(hint=, payload=) (a
    # tool asking its own confirmation) and actions.skip_summarization (its exit_loop's) read
    # as a bare AttributeError, which the model got as the tool's error result: nobody was
    # told that a pause is raise adk.Interrupt, its answer ctx.resume, and skip_summarization
    # the agent's return_directly.
    calls = [
        tool_call("ask_for_days", {"days": 3}, id="c1"),
        tool_call("end_loop", {}, id="c2"),
        tool_call("ask_again", {}, id="c3"),
    ]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    agent = ReActAgent("a", model, tools=[ask_for_days, end_loop, ask_again])
    result = await Runner(agent).invoke("hi")
    read = {m.tool_call_id: m.content for m in result.messages if m.role == "tool"}
    assert read["c1"] == (
        "Error: tool 'ask_for_days' failed: AttributeError: 'ToolContext' object has no "
        "attribute 'tool_confirmation': Google ADK's tool_confirmation is ctx.resume here "
        "(None on a first call; the answer is ctx.resume.data): ask with raise "
        "adk.Interrupt(info) or give the tool require_approval=True"
    )
    assert read["c2"].endswith(
        "'actions': Google ADK's actions are methods here: ctx.exit(), ctx.transfer(name), "
        "ctx.break_loop() for escalate; skip_summarization is the agent's "
        "return_directly=[tool name]"
    )

    assert read["c3"].endswith(
        "'request_confirmation': Google ADK's request_confirmation(hint=, payload=) is raise "
        "adk.Interrupt({'hint': ..., 'payload': ...}) here; the answer comes back as "
        "ctx.resume.data when the call runs again"
    )


async def test_other_missing_attributes_read_as_before() -> None:
    seen: list[Any] = []

    def look(ctx: ToolContext) -> str:
        """Look."""
        seen.append(hasattr(ctx, "state"))
        seen.append(getattr(ctx.run_context, "actions", "none"))
        try:
            ctx.sesion  # type: ignore[attr-defined]  # noqa: B018
        except AttributeError as exc:
            seen.append((str(exc), exc.name, exc.obj is ctx))
        return "ok"

    model = ScriptedModel([Reply(tool_calls=[tool_call("look", {})]), "done"])
    await Runner(ReActAgent("a", model, tools=[look])).invoke("hi")
    assert seen == [
        False,
        "none",
        ("'ToolContext' object has no attribute 'sesion'", "sesion", True),
    ]


def test_a_property_failing_inside_raises_its_own_error() -> None:
    # A tool unit-tested over a stand-in run context that lacks run_id: ToolContext.run_id
    # raised the stand-in's AttributeError, after which Python asks __getattr__, whose
    # "'ToolContext' object has no attribute 'run_id'" hid it and denied a property it has.
    stand_in = SimpleNamespace(session=Session())
    ctx = ToolContext(stand_in, tool_name="t", tool_call_id="c1", address="agent:a")  # type: ignore[arg-type]
    assert ctx.session is stand_in.session
    with pytest.raises(AttributeError) as failed:
        ctx.run_id  # noqa: B018
    assert str(failed.value) == "'types.SimpleNamespace' object has no attribute 'run_id'"
    with pytest.raises(AttributeError, match=r"state is ctx\.session here"):
        ctx.state  # type: ignore[attr-defined]  # noqa: B018


@pytest.mark.parametrize(
    ("read", "hint"),
    [
        (
            lambda request: request.config.system_instruction,
            "Google ADK's llm_request.config is request.options here (temperature, max_tokens, "
            "...); its system_instruction is request.messages[0], a system message, when the "
            "agent has an instruction: replace it, do not edit it",
        ),
        (
            lambda request: request.contents,
            "Google ADK's llm_request.contents is request.messages here (adk.Message items)",
        ),
        (
            lambda request: request.append_instructions(["Be brief."]),
            "Google ADK's append_instructions([...]) is replacing request.messages[0] here with a "
            "system message holding both texts (or inserting one when there is none)",
        ),
    ],
    ids=["config", "contents", "append_instructions"],
)
async def test_a_model_callback_reading_google_adks_llm_request_fails_naming_its_name_here(
    read: Any, hint: str
) -> None:
    # Google ADK's before_model_callback(callback_context, llm_request) edits
    # llm_request.config.system_instruction or reads llm_request.contents: ported as written,
    # the run failed with a bare "'ModelRequest' object has no attribute 'config'", where the
    # context classes' Google ADK names already said what they are here.
    def before_model(ctx: Any, request: Any) -> None:
        read(request)

    runner = Runner(
        ReActAgent("a", ScriptedModel(["x"])), callbacks=[Callbacks(before_model=before_model)]
    )
    with pytest.raises(RunError) as failed:
        await runner.invoke("hi")
    cause = failed.value.__cause__
    assert isinstance(cause, AttributeError)
    name = str(cause).split("'")[3]
    assert str(cause) == f"'ModelRequest' object has no attribute '{name}': {hint}"


@pytest.mark.parametrize("cls", [RunContext, ToolContext, ModelRequest])
def test_the_context_classes_keep_attribute_reads_specialisable(cls: type) -> None:
    # A __getattr__ anywhere in the class's MRO leaves every attribute read of its instances
    # unspecialised by CPython's adaptive interpreter: the first version of these hints, a
    # __getattr__, cost ~5k instructions per agent step of a workflow (benchmark (d), bisected).
    assert not any("__getattr__" in vars(klass) for klass in cls.__mro__)
    assert not any("__getattribute__" in vars(klass) for klass in cls.__mro__[:-1])


def test_the_openai_agents_sdks_runner_methods_name_what_they_are_here() -> None:
    # Runner.run_streamed(agent, input) and Runner.run_sync(...), the OpenAI Agents SDK's, read
    # as a bare "'Runner' object has no attribute 'run_streamed'" (or "type object 'Runner'
    # has no attribute 'run_sync'" on the class, as the SDK calls them), naming nothing.
    runner = Runner(ReActAgent("a", ScriptedModel(["x"])))
    streamed = (
        "the OpenAI Agents SDK's Runner.run_streamed is Runner(agent, enable_streaming=True)"
        ".run(input) here: iterate its events (adk.run_messages(events) and "
        "adk.run_usage(events) once read)"
    )
    with pytest.raises(AttributeError) as failed:
        runner.run_streamed("hi")  # type: ignore[attr-defined]
    assert str(failed.value) == f"'Runner' object has no attribute 'run_streamed': {streamed}"
    with pytest.raises(AttributeError) as failed:
        Runner.run_sync(runner.agent, "hi")  # type: ignore[attr-defined]
    assert str(failed.value) == (
        "type object 'Runner' has no attribute 'run_sync': the OpenAI Agents SDK's "
        "Runner.run_sync is asyncio.run(Runner(agent).invoke(input)) here"
    )
    assert not hasattr(runner, "run_sync") and not hasattr(Runner, "run_streamed")


class _Echo(adk.BaseAgent):
    async def run(self, input: adk.AgentInput, ctx: RunContext) -> AsyncIterator[adk.AgentEvent]:
        yield adk.AgentEvent(output=adk.AgentOutput(message=adk.Message.assistant("hi")))


async def test_runner_run_called_on_the_class_with_an_agent_says_what_to_give() -> None:
    # The OpenAI Agents SDK's Runner.run(agent, input), on the class, failed on the agent's
    # missing attributes ("'_Echo' object has no attribute '_new_run'", "type object '_Echo'
    # has no attribute '_late_global'" for the class itself), naming neither Runner nor what to
    # give; an agent class given to a runner's run as its input read "got type".
    fix = r"adk\.Runner\(agent\)\.run\(input\) for its events, await adk\.Runner\(agent\)"
    with pytest.raises(
        TypeError,
        match=rf"^Runner\.run is called on a Runner: {fix}.*got the agent _Echo 'e' where",
    ):
        Runner.run(_Echo("e"), "hi")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^Runner\.invoke is called .*got the class _Echo \(make"):
        await Runner.invoke(_Echo, "hi")  # type: ignore[arg-type]
    runner = Runner(_Echo("e"))
    with pytest.raises(TypeError, match=r"got the class _Echo \(the agent goes to Runner\(agent\)"):
        await runner.invoke(_Echo)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got the agent _Echo 'e' \(it goes to Runner\(agent\)"):
        runner.run(_Echo("e"))  # type: ignore[arg-type]
    assert (await runner.invoke("hi")).text == "hi"


def test_a_google_adk_name_assigned_or_deleted_says_what_it_is_here() -> None:
    # A before_model_callback ported from Google ADK assigns llm_request.contents = [...] (its
    # history trimmed) or llm_request.config = ...; the names' properties had no setter, so
    # the error was Python's "property of 'ModelRequest' object has no setter" (3.11's words,
    # naming neither the attribute nor what it is here), where the slotted class said "object
    # has no attribute 'contents'" before the properties were installed.
    request = ModelRequest([], [], None, None, False)  # type: ignore[arg-type]
    contents = "Google ADK's llm_request.contents is request.messages here (adk.Message items)"
    expected = f"'ModelRequest' object has no attribute 'contents': {contents}"
    with pytest.raises(AttributeError) as failed:
        request.contents = []  # type: ignore[attr-defined]
    assert str(failed.value) == expected
    with pytest.raises(AttributeError) as failed:
        del request.contents  # type: ignore[attr-defined]
    assert str(failed.value) == expected
    stand_in = SimpleNamespace(session=Session())
    ctx = ToolContext(stand_in, tool_name="t", tool_call_id="c1", address="agent:a")  # type: ignore[arg-type]
    with pytest.raises(AttributeError, match=r"^'ToolContext' object has no attribute 'state': "):
        ctx.state = {}  # type: ignore[attr-defined]
