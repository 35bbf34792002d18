"""A resumed ReActAgent renders its current instruction: the system prompt is configuration.

An approval can wait for days while the service is redeployed with a fixed prompt. Models, options,
tools and other agents' instructions already came from the code that resumes; the paused agent's
own system prompt used to come from the checkpoint, rendered when the agent started. Now the resume
renders the agent's current instruction (and output-schema instruction) from the session values as
they are then, as Google ADK renders it per model call, and the checkpoint no longer holds it.
What is conversation (the input, a ``history_rewriter``'s or a parent's included, the model's
replies, tool results, a structured-output retry prompt) is resumed as it was.

Each test pauses with one agent in a real SQLite store and resumes with another, as a new process
would; checkpoints of earlier versions (the prompt at the start of ``head``, or the whole
conversation) are written with the flags ``_react_state`` keeps for that.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import wire_model
from openai_server import Call, OpenAIServer
from openai_server import Reply as WireReply
from pydantic import BaseModel

import adk
from adk import Message, Role, RunError, Runner
from adk.checkpoint import SQLiteCheckpointStore
from adk.history import default_rewriter
from adk.models import RetryPolicy
from adk.models.openai import OpenAIChatModel
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import PlanExecute, ReActAgent, _react_state, new_executor, new_planner
from prebuilt import new_replanner as make_replanner
from prebuilt._instruction import InstructionError

FAST = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01, jitter=False)
OLD = "OLD-PROMPT-v1"
NEW = "NEW-PROMPT-v2"
PAID: list[tuple[str, int]] = []


@pytest.fixture(autouse=True)
def _clear_paid() -> None:
    PAID.clear()


@adk.tool(require_approval=True)
def pay(payee: str, amount_cents: int) -> str:
    """Send money."""
    PAID.append((payee, amount_cents))
    return f"sent {amount_cents} to {payee}"


def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"facts about {topic}"


class Store:
    """One SQLite file that a pausing and a resuming "process" share."""

    def __init__(self, path: Path) -> None:
        self.path = path

    async def pause(self, agent: ReActAgent | PlanExecute, **session: Any) -> bytes:
        """Run ``agent`` until it pauses; the stored checkpoint."""
        async with SQLiteCheckpointStore(self.path) as store:
            runner = Runner(agent, checkpoint_store=store)
            result = await runner.invoke("go", checkpoint_id="c", session=session)
            assert result.interrupt is not None
            stored = await store.get("c")
        assert stored is not None
        return stored

    async def resume(
        self, agent: ReActAgent | PlanExecute, data: Any = None, **session: Any
    ) -> adk.RunResult:
        async with SQLiteCheckpointStore(self.path) as store:
            runner = Runner(agent, checkpoint_store=store)
            decision = {"approved": True} if data is None else data
            return await runner.invoke_resume("c", decision, session=session or None)

    async def stored(self) -> bytes | None:
        async with SQLiteCheckpointStore(self.path) as store:
            return await store.get("c")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "checkpoints.db")


def payer(model: adk.ChatModel, instruction: str, **options: Any) -> ReActAgent:
    return ReActAgent("payer", model, instruction=instruction, tools=[pay], **options)


def scripted_payer(instruction: str, **options: Any) -> ReActAgent:
    """A payer whose model asks for one payment, then answers with the result it saw."""

    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            return Reply(text=f"model saw: {messages[-1].content}")
        return Reply(tool_calls=[tool_call("pay", {"payee": "ACME", "amount_cents": 120})])

    return payer(ScriptedModel(reply), instruction, **options)


def write_as(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """Make pauses write the state as ``version`` does: "now", "head" (the previous version, the
    system prompt first in ``head``) or "messages" (the one before, the whole conversation)."""
    monkeypatch.setattr(_react_state, "_SAVE_SYSTEM_PROMPT", version == "head")
    monkeypatch.setattr(_react_state, "_SAVE_WHOLE_CONVERSATION", version == "messages")


def requests_of(agent: ReActAgent) -> list[list[Message]]:
    model = agent.model
    assert isinstance(model, ScriptedModel)
    return [request.messages for request in model.requests]


async def test_the_request_on_the_wire_carries_the_instruction_deployed_since_the_pause(
    store: Store,
) -> None:
    # The resumed model call sent the system prompt rendered at the start, from the checkpoint:
    # the prompt fix deployed while the approval waited never reached the paused run.
    paying = WireReply(tool_calls=[Call("pay", '{"payee": "ACME", "amount_cents": 120}')])
    async with OpenAIServer([paying, WireReply(text="paid ACME")]) as server:

        def model() -> OpenAIChatModel:
            return wire_model(server, retry=FAST)

        async with model() as first:
            stored = await store.pause(payer(first, f"Pay bills for {{user}}. {OLD}"), user="Ann")
        # A value the new instruction reads, given with the resume, is there when it renders.
        fixed = f"Pay bills for {{user}}, a {{tier}} customer. {NEW}"
        async with model() as second:
            result = await store.resume(payer(second, fixed), tier="gold")

        before, after = (body["messages"] for body in server.bodies)
    assert result.text == "paid ACME" and PAID == [("ACME", 120)]
    assert after[0] == {"role": "system", "content": f"Pay bills for Ann, a gold customer. {NEW}"}
    assert before[0] == {"role": "system", "content": f"Pay bills for Ann. {OLD}"}
    # The conversation is the one the agent was having: its input, the call, the approved result.
    assert after[1:2] == before[1:] == [{"role": "user", "content": "go"}]
    assert [m["role"] for m in after] == ["system", "user", "assistant", "tool"]
    assert OLD not in json.dumps(after)
    assert OLD.encode() not in stored  # nor is the rendered prompt saved any more


class Before(BaseModel):
    verdict: str


class After(BaseModel):
    verdict: str
    confidence: float


async def test_a_resume_asks_for_the_output_schema_deployed_since_the_pause(
    store: Store,
) -> None:
    # The resumed agent validated the answer against the new schema while its system prompt
    # still asked the model for the old one: the model answered the old shape and the run failed.
    def reply(messages: list[Message]) -> Reply:
        if messages[-1].role == Role.TOOL:
            if "confidence" in messages[0].content:
                return Reply(text='{"verdict": "paid", "confidence": 0.9}')
            return Reply(text='{"verdict": "paid"}')
        return Reply(tool_calls=[tool_call("pay", {"payee": "ACME", "amount_cents": 120})])

    def agent(schema: type[BaseModel]) -> ReActAgent:
        model = ScriptedModel(reply, supports_response_format=False)
        return payer(model, "Pay the bill.", output_schema=schema)

    await store.pause(agent(Before))
    resumed = agent(After)
    result = await store.resume(resumed)

    assert result.output == After(verdict="paid", confidence=0.9)
    (request,) = requests_of(resumed)
    assert request[0].role == Role.SYSTEM
    assert request[0].content.startswith("Pay the bill.\n\n")
    assert '"confidence"' in request[0].content


@pytest.mark.parametrize("written_by", ["now", "head", "messages"])
@pytest.mark.parametrize(
    ("paused_with", "resumed_with"),
    [(OLD, NEW), (OLD, ""), ("", NEW)],
    ids=["changed", "removed", "added"],
)
async def test_every_checkpoint_resumes_with_the_current_instruction(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    written_by: str,
    paused_with: str,
    resumed_with: str,
) -> None:
    # Checkpoints of the previous version ("head") and of the one before ("messages") saved the
    # system prompt: it is replaced too, consistently, and the rest of the conversation is kept.
    write_as(monkeypatch, written_by)
    first = scripted_payer(paused_with)
    await store.pause(first)
    write_as(monkeypatch, "now")
    resumed = scripted_payer(resumed_with)
    result = await store.resume(resumed)

    assert result.text == "model saw: sent 120 to ACME" and PAID == [("ACME", 120)]
    (paused,) = requests_of(first)
    (request,) = requests_of(resumed)
    system = [Message.system(resumed_with)] if resumed_with else []
    conversation = paused[1:] if paused_with else paused
    assert request[: len(system) + len(conversation)] == [*system, *conversation]
    assert [m.role for m in request[len(system) :]] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("written_by", ["now", "head", "messages"])
@pytest.mark.parametrize(
    ("paused_with", "resumed_with"), [(OLD, ""), ("", NEW)], ids=["removed", "added"]
)
async def test_a_held_result_is_found_when_the_system_prompt_came_or_went(
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    written_by: str,
    paused_with: str,
    resumed_with: str,
) -> None:
    # A held (return-directly) result is saved by its position in the conversation: a system
    # prompt that is rendered again, and may be there or not, must not shift it.
    def agent(instruction: str) -> ReActAgent:
        calls = [
            tool_call("lookup", {"topic": "tides"}, id="call_1"),
            tool_call("pay", {"payee": "ACME", "amount_cents": 120}, id="call_2"),
        ]
        model = ScriptedModel([Reply(text="thinking", tool_calls=calls)])
        return ReActAgent(
            "payer", model, instruction=instruction, tools=[lookup, pay], return_directly=["lookup"]
        )

    write_as(monkeypatch, written_by)
    await store.pause(agent(paused_with))
    write_as(monkeypatch, "now")
    result = await store.resume(agent(resumed_with))

    assert result.text == "facts about tides" and PAID == [("ACME", 120)]


async def test_a_current_instruction_that_needs_a_value_the_session_lacks_keeps_the_checkpoint(
    store: Store,
) -> None:
    # Rendered before the paused call runs: the payment is not made by a resume that fails.
    await store.pause(scripted_payer(f"Pay bills. {OLD}"))
    before = await store.stored()

    with pytest.raises(RunError, match=r"uses \{tier\} but the session has no value 'tier'") as e:
        await store.resume(scripted_payer(f"Pay bills for {{tier}} customers. {NEW}"))

    assert isinstance(e.value.__cause__, InstructionError)
    assert PAID == [] and await store.stored() == before
    fixed = scripted_payer(f"Pay bills for {{tier}} customers. {NEW}")
    result = await store.resume(fixed, tier="gold")
    assert result.text == "model saw: sent 120 to ACME" and PAID == [("ACME", 120)]
    assert requests_of(fixed)[0][0] == Message.system(f"Pay bills for gold customers. {NEW}")


@pytest.mark.parametrize("written_by", ["now", "head", "messages"])
async def test_a_paused_executor_keeps_its_step_but_takes_the_new_instruction(
    store: Store, monkeypatch: pytest.MonkeyPatch, written_by: str
) -> None:
    # PlanExecute's step prompt is the executor's input (what its parent asked of it, saved as
    # the conversation it is); its instruction is configuration, taken from the new code. The
    # previous version saved the two together in ``head``: the prompt is told from the input.
    def app(executor_instruction: str, executor_script: list[str | Reply]) -> PlanExecute:
        return PlanExecute(
            new_planner(ScriptedModel([json.dumps({"steps": ["pay ACME"]})])),
            new_executor(ScriptedModel(executor_script), [pay], instruction=executor_instruction),
            make_replanner(ScriptedModel(["All paid."])),
        )

    paying = Reply(tool_calls=[tool_call("pay", {"payee": "ACME", "amount_cents": 120})])
    paused = app(OLD, [paying])
    write_as(monkeypatch, written_by)
    stored = await store.pause(paused)
    write_as(monkeypatch, "now")
    assert stored.count(OLD.encode()) == (0 if written_by == "now" else 1)
    resumed = app(NEW, ["Paid ACME."])
    result = await store.resume(resumed)

    assert result.text == "All paid." and PAID == [("ACME", 120)]
    assert isinstance(paused.executor, ReActAgent) and isinstance(resumed.executor, ReActAgent)
    (before,) = requests_of(paused.executor)
    (after,) = requests_of(resumed.executor)
    assert after[0] == Message.system(NEW) and before[0] == Message.system(OLD)
    assert after[1] == before[1] and "Your task: carry out step 1" in after[1].content
    assert [m.role for m in after] == ["system", "user", "assistant", "tool"]


@pytest.mark.parametrize("written_by", ["now", "head", "messages"])
@pytest.mark.parametrize("rewritten", [False, True], ids=["input", "rewritten input"])
@pytest.mark.parametrize("paused_with", ["", OLD], ids=["no prompt", "a prompt"])
async def test_a_run_input_that_begins_with_a_system_message_is_kept_as_input(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    written_by: str,
    rewritten: bool,
    paused_with: str,
) -> None:
    # Earlier versions' states do not say where their saved prompt ended: the input's own leading
    # system message, given to an agent without instruction, must not be taken for the prompt
    # and replaced by the new one; after a prompt, it is the input's all the same.
    house = Message.system("HOUSE-RULES: be brief.")

    def agent(instruction: str) -> ReActAgent:
        rewriter = (
            (lambda entries, name: list(default_rewriter(entries, name))) if rewritten else None
        )
        return scripted_payer(instruction, history_rewriter=rewriter)

    async with SQLiteCheckpointStore(tmp_path / "checkpoints.db") as sqlite:
        write_as(monkeypatch, written_by)
        first = agent(paused_with)
        paused = await Runner(first, checkpoint_store=sqlite).invoke([house, Message.user("go")])
        write_as(monkeypatch, "now")
        assert paused.checkpoint_id is not None
        resumed = agent(NEW)
        runner = Runner(resumed, checkpoint_store=sqlite)
        result = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})

    assert result.text == "model saw: sent 120 to ACME" and PAID == [("ACME", 120)]
    (before,) = requests_of(first)
    (after,) = requests_of(resumed)
    given = before[1:] if paused_with else before
    assert given[0] == house
    assert after[: len(given) + 1] == [Message.system(NEW), *given]
