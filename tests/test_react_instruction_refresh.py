"""A ReActAgent's instruction is rendered again before a model call when what it reads changed.

Google ADK renders the instruction before every model call from the session as it is then, so a
tool that writes a session value, or an agent run as a tool whose ``output_key`` writes one, is
seen by the next call. The agent used to render it only when it started (and at a resume), so a
ported agent went on being told the values of its start. The refreshed prompt replaces the one at
the head of the conversation; an instruction without placeholders is never rendered again.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as WireReply

import adk
from adk import AgentTool, Message, Role, RunError, Runner, ToolContext
from adk.checkpoint import SQLiteCheckpointStore
from adk.models import RetryPolicy
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent
from prebuilt._instruction import InstructionError

FAST = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01, jitter=False)


def set_step(step: int, ctx: ToolContext) -> str:
    """Move to another step.

    Args:
        step: The step to move to.
    """
    ctx.session.values["step"] = step
    return f"now at step {step}"


def add_note(note: str, ctx: ToolContext) -> str:
    """Note something.

    Args:
        note: What to note.
    """
    ctx.session.values.setdefault("notes", []).append(note)  # changed in place
    return "noted"


def forget(key: str, ctx: ToolContext) -> str:
    """Forget a session value.

    Args:
        key: The value to forget.
    """
    del ctx.session.values[key]
    return "forgotten"


@adk.tool(require_approval=True)
def pay(amount_cents: int) -> str:
    """Send money."""
    return f"sent {amount_cents}"


def systems(model: ScriptedModel) -> list[list[str]]:
    """Each request's system messages (the conversation keeps exactly one, at its head)."""
    found = []
    for request in model.requests:
        texts = [m.content for m in request.messages if m.role == Role.SYSTEM]
        if texts:
            assert request.messages[0].role == Role.SYSTEM
        found.append(texts)
    return found


async def test_a_value_a_tool_writes_reaches_the_next_model_call() -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("set_step", {"step": 2})]), Reply(text="done")]
    )
    agent = ReActAgent("stepper", model, instruction="You are at step {step}.", tools=[set_step])
    result = await Runner(agent).invoke("go", session={"step": 1})
    assert result.output.content == "done"
    assert systems(model) == [["You are at step 1."], ["You are at step 2."]]
    # The rest of the conversation is as it was: the input, the call and its result.
    second = model.requests[1].messages
    assert [m.role for m in second] == [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL]


async def test_a_value_changed_in_place_and_an_agent_tools_output_key_are_seen() -> None:
    inner = ReActAgent(
        "summarizer",
        ScriptedModel([Reply(text="short summary")]),
        description="Summarizes.",
        output_key="summary",
    )
    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("add_note", {"note": "a"})]),
            Reply(tool_calls=[tool_call("summarizer", {"request": "sum up"})]),
            Reply(text="done"),
        ]
    )
    agent = ReActAgent(
        "writer",
        model,
        instruction="Notes: {notes}. Summary: {summary?}.",
        tools=[add_note, AgentTool(inner)],
    )
    await Runner(agent).invoke("go", session={"notes": []})
    assert systems(model) == [
        ["Notes: []. Summary: ."],
        ["Notes: ['a']. Summary: ."],
        ["Notes: ['a']. Summary: short summary."],
    ]


async def test_a_prompt_whose_values_did_not_change_is_not_rendered_again() -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("set_step", {"step": 1})]), Reply(text="done")]
    )
    agent = ReActAgent("stepper", model, instruction="Step {step}.", tools=[set_step])
    await Runner(agent).invoke("go", session={"step": 1})
    first, second = (request.messages[0] for request in model.requests)
    assert first.content == "Step 1."
    assert second is first  # the same message: nothing was rendered


async def test_a_value_is_inserted_as_google_adk_inserts_it_none_as_nothing() -> None:
    """As Google ADK's ``inject_session_state``: a value is its ``str()`` (a list reads as
    Python shows it: format it yourself, or use an instruction function, for another text) and
    None is nothing, not the word "None" (``str(None)``, which the model read as a value)."""
    model = ScriptedModel([Reply(text="done")])
    agent = ReActAgent("t", model, instruction="Hi {user}. Likes: {likes}. Age: {age}.")
    session = {"user": None, "likes": ["tea"], "age": 42}
    await Runner(agent).invoke("go", session=session)
    assert systems(model) == [["Hi . Likes: ['tea']. Age: 42."]]


async def test_a_prompt_that_appears_mid_run_goes_to_the_head() -> None:
    # ``{step?}`` renders "" at the start: no system message, until the tool sets the value.
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("set_step", {"step": 3})]), Reply(text="done")]
    )
    agent = ReActAgent("stepper", model, instruction="{step?}", tools=[set_step])
    await Runner(agent).invoke("go")
    assert systems(model) == [[], ["3"]]


async def test_an_optional_value_removed_mid_run_renders_empty() -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("forget", {"key": "tone"})]), Reply(text="done")]
    )
    agent = ReActAgent("t", model, instruction="Be nice. {tone?}", tools=[forget])
    result = await Runner(agent).invoke("go", session={"tone": "Be brief."})
    assert result.output.content == "done"
    assert systems(model) == [["Be nice. Be brief."], ["Be nice. "]]


async def test_a_required_value_removed_mid_run_fails_before_the_model_is_called() -> None:
    # As a missing value fails the start (and Google ADK's call): the model is not told a value
    # that no longer holds, nor the placeholder's literal text.
    model = ScriptedModel(
        [Reply(tool_calls=[tool_call("forget", {"key": "user"})]), Reply(text="never")]
    )
    agent = ReActAgent("greeter", model, instruction="Help {user}.", tools=[forget])
    with pytest.raises(RunError) as caught:
        await Runner(agent).invoke("go", session={"user": "Ann"})
    assert isinstance(caught.value.__cause__, InstructionError)
    assert "{user}" in str(caught.value) and "removed during the run" in str(caught.value)
    assert "{user?}" in str(caught.value)  # says how to make it optional
    assert len(model.requests) == 1


async def test_a_resume_after_a_mid_run_refresh_restores_the_conversation(tmp_path: Path) -> None:
    # The prompt appeared mid-run (the conversation's head grew by one) and the round after it
    # paused: the checkpoint (which holds no prompt) resumes to the same conversation.
    def script() -> ScriptedModel:
        def reply(messages: list[Message]) -> Reply:
            last = messages[-1]
            if last.role == Role.USER:
                return Reply(tool_calls=[tool_call("set_step", {"step": 2})])
            if last.content.startswith("now at"):
                return Reply(tool_calls=[tool_call("pay", {"amount_cents": 5})])
            return Reply(text=f"finished: {last.content}")

        return ScriptedModel(reply)

    def agent(model: ScriptedModel) -> ReActAgent:
        return ReActAgent("payer", model, instruction="{step?}", tools=[set_step, pay])

    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        first = script()
        paused = await Runner(agent(first), checkpoint_store=store).invoke("go", checkpoint_id="c")
        assert paused.interrupt is not None
        assert systems(first) == [[], ["2"]]
        second = script()
        runner = Runner(agent(second), checkpoint_store=store)
        result = await runner.invoke_resume("c", {"approved": True})
    assert result.output.content == "finished: sent 5"
    (messages,) = [request.messages for request in second.requests]
    assert [m.role for m in messages] == [
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
    ]
    assert messages[0].content == "2" and messages[1].content == "go"


async def test_the_second_request_on_the_wire_carries_the_refreshed_prompt() -> None:
    stepping = WireReply(tool_calls=[Call("set_step", '{"step": 2}')])
    async with OpenAIServer([stepping, WireReply(text="done")]) as server:
        model = wire_model(server, api_key="k", retry=FAST)
        async with model:
            agent = ReActAgent("stepper", model, instruction="Step {step}.", tools=[set_step])
            result = await Runner(agent).invoke("go", session={"step": 1})
        bodies = server.bodies
    assert result.output.content == "done"
    sent = [[m for m in body["messages"] if m["role"] == "system"] for body in bodies]
    assert sent == [
        [{"role": "system", "content": "Step 1."}],
        [{"role": "system", "content": "Step 2."}],
    ]
    assert bodies[1]["messages"][0]["role"] == "system"


def test_an_instruction_that_is_not_text_is_refused_where_the_agent_is_made() -> None:
    # Its placeholders are found when the agent is made: a TypeError naming the agent there, not
    # a bare "argument of type 'NoneType' is not iterable" (formerly at its first run).
    with pytest.raises(TypeError, match="ReActAgent 'x': instruction must be a str, got NoneType"):
        ReActAgent("x", ScriptedModel(["hi"]), instruction=None)  # type: ignore[arg-type]


def test_an_instruction_neither_text_nor_a_function_is_refused_saying_both_are_taken() -> None:
    # A function of the context is taken (Google ADK's InstructionProvider, see
    # test_react_instruction_provider), so the refusal of anything else says so.
    with pytest.raises(TypeError) as refused:
        ReActAgent("x", ScriptedModel(["hi"]), instruction=42)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith("ReActAgent 'x': instruction must be a str, got int; ")
    assert "a function of the context" in message
