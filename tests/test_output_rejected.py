"""A ``ReActAgent`` answer off its ``output_schema`` is followed by an ``OutputRejected`` custom
output before the retry's reply, so a client that was shown the rejected answer (streamed chunk by
chunk, or as a message) can tell it from the corrected one: without it the client got the
rejected JSON's chunks, then the corrected JSON's, with nothing between. Over ``ScriptedModel``
and over a real OpenAI wire server (tests/openai_server.py), read as a streaming service does:
each stream's chunks as they arrive, every other event as ``to_dict`` JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import wire_model
from openai_server import OpenAIServer, Reply
from pydantic import BaseModel, ValidationInfo, field_validator

import adk
from adk import AgentEvent, Message, RunError, Runner, SequentialAgent
from adk.models import RetryPolicy
from adk.testing import Reply as Scripted
from adk.testing import ScriptedModel
from prebuilt import OutputRejected, OutputSchemaError, ReActAgent, stream_output


class Weather(BaseModel):
    city: str
    celsius: int


BAD = '{"city": "Oslo", "celsius": "cold"}'
GOOD = '{"city": "Oslo", "celsius": 4}'
PROBLEM = "celsius: Input should be a valid integer, unable to parse string as an integer"
NOTICE = {
    "custom": {"schema_name": "Weather", "problem": PROBLEM},
    "custom_type": "prebuilt.OutputRejected",
}


async def client_view(runner: Runner, input: str = "Weather in Oslo?") -> list[tuple[str, Any]]:
    """What a client of a streaming service is sent: a stream's chunks as they come (as one
    entry, the pieces kept apart), the validated answer, and every other output as JSON."""
    sent: list[tuple[str, Any]] = []
    async for event in runner.run(input):
        output = event.output
        if event.error is not None:
            sent.append(("error", event.to_dict()["error"]["type"]))
        elif output is None:
            continue
        elif output.stream is not None:
            sent.append(("chunks", [chunk.content async for chunk in output.stream]))
        elif isinstance(output.custom, Weather):
            sent.append(("answer", output.custom))
        else:
            data = json.loads(json.dumps(event.to_dict()))  # over the wire and back
            sent.append(("event", {k: v for k, v in data["output"].items() if k != "role"}))
            again = AgentEvent.from_dict(data)  # a Python client rebuilds the notice
            if isinstance(event.output.custom, OutputRejected):
                assert again.output is not None and again.output.custom == event.output.custom
    return sent


def joined(sent: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``sent`` with each stream's pieces joined (after checking it came in several)."""
    out = []
    for kind, value in sent:
        if kind == "chunks":
            assert len(value) > 1, value  # really streamed, piece by piece
            value = "".join(value)
        out.append((kind, value))
    return out


async def test_a_streamed_answer_off_the_schema_is_marked_rejected_before_the_retry() -> None:
    model = ScriptedModel([BAD, GOOD], chunk_size=4)
    runner = Runner(ReActAgent("w", model, output_schema=Weather), enable_streaming=True)
    sent = joined(await client_view(runner))
    assert sent == [
        ("chunks", BAD),
        ("event", NOTICE),  # the chunks above were rejected: a retry follows
        ("chunks", GOOD),
        ("answer", Weather(city="Oslo", celsius=4)),
    ]


async def test_an_answer_that_matches_comes_with_no_notice() -> None:
    model = ScriptedModel([GOOD], chunk_size=4)
    runner = Runner(ReActAgent("w", model, output_schema=Weather), enable_streaming=True)
    assert joined(await client_view(runner)) == [
        ("chunks", GOOD),
        ("answer", Weather(city="Oslo", celsius=4)),
    ]


async def test_a_plain_run_marks_the_rejected_message_too_and_records_no_notice() -> None:
    runner = Runner(ReActAgent("w", ScriptedModel([BAD, GOOD]), output_schema=Weather))
    result = await runner.invoke("Weather in Oslo?")
    outputs = [e.output for e in result.events if e.output is not None]
    shown = [o.message.content if o.message is not None else o.custom for o in outputs]
    assert shown == [
        BAD,
        OutputRejected(schema_name="Weather", problem=PROBLEM),
        GOOD,
        Weather(city="Oslo", celsius=4),
    ]
    assert result.output == Weather(city="Oslo", celsius=4)
    # Application data, as every custom output: the history and the next run's input hold
    # nothing of the notice, and only the answer that matched (the rejected one is not the
    # agent's answer: tests/test_output_rejected_history.py).
    assert [m.content for m in result.messages if m.role == "assistant"] == [GOOD]


async def test_a_retry_that_fails_too_ends_with_the_error_after_its_chunks() -> None:
    model = ScriptedModel([BAD, "still not JSON"], chunk_size=4)
    runner = Runner(ReActAgent("w", model, output_schema=Weather), enable_streaming=True)
    assert joined(await client_view(runner)) == [
        ("chunks", BAD),
        ("event", NOTICE),
        ("chunks", "still not JSON"),
        ("error", "OutputSchemaError"),  # no retry left: no notice, the error says it
    ]
    with pytest.raises(RunError) as caught:
        await Runner(ReActAgent("w", ScriptedModel([BAD, BAD]), output_schema=Weather)).invoke("?")
    assert isinstance(caught.value.__cause__, OutputSchemaError)


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_openai_stream_off_the_schema_is_marked_rejected_before_the_retry(
    api: str,
) -> None:
    fast = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01, jitter=False)
    async with OpenAIServer() as server:
        server.script(Reply(text=BAD), Reply(text=GOOD))
        async with wire_model(server, api, retry=fast) as model:
            runner = Runner(ReActAgent("w", model, output_schema=Weather), enable_streaming=True)
            sent = await client_view(runner)
        assert len(server.bodies) == 2
    streams = [value for kind, value in sent if kind == "chunks"]
    assert ["".join(pieces) for pieces in streams] == [BAD, GOOD]
    assert [kind for kind, _ in sent] == ["chunks", "event", "chunks", "answer"]
    assert sent[1] == ("event", NOTICE)


def test_the_notice_is_registered_for_to_dict() -> None:
    event = AgentEvent.custom(OutputRejected(schema_name="Weather", problem="x"))
    assert AgentEvent.from_dict(event.to_dict()).output == event.output
    assert adk.checkpoint.codec._type_name(OutputRejected) == "prebuilt.OutputRejected"


class Query(BaseModel):
    """An answer only the run's dependencies can check (pydantic-ai's output validator taking
    ``RunContext[Deps]``): the validator reads them from pydantic's validation context."""

    sql: str

    @field_validator("sql")
    @classmethod
    def known_table(cls, sql: str, info: ValidationInfo) -> str:
        tables = info.context["tables"]  # the run options: a KeyError if they are not given
        if sql.split()[-1] not in tables:
            raise ValueError(f"no table {sql.split()[-1]!r}; the tables are {sorted(tables)}")
        return sql


async def test_the_answer_is_validated_with_the_agents_run_options_as_context() -> None:
    model = ScriptedModel(['{"sql": "select * from user"}', '{"sql": "select * from users"}'])
    agent = ReActAgent("sql", model, output_schema=Query)
    result = await Runner(agent).invoke("All users?", options={"tables": {"users", "orders"}})
    assert isinstance(result.output, Query) and result.output.sql == "select * from users"
    retry = model.requests[1].messages[-1].content
    assert "sql: Value error, no table 'user'; the tables are ['orders', 'users']" in retry

    designated = ReActAgent(
        "sql", ScriptedModel(['{"sql": "select * from orders"}']), output_schema=Query
    )
    result = await Runner(designated).invoke(
        "All orders?", options={"tables": set()}, agent_options={"sql": {"tables": {"orders"}}}
    )
    assert isinstance(result.output, Query) and result.output.sql == "select * from orders"


@pytest.mark.parametrize("streaming", [False, True])
async def test_the_rejected_answers_call_counts_in_the_usage(streaming: bool) -> None:
    """Out of the history, not out of the run's usage: the call was made and paid for."""
    first = adk.Usage(input_tokens=30, output_tokens=9, total_tokens=39)
    second = adk.Usage(input_tokens=50, output_tokens=7, total_tokens=57)
    model = ScriptedModel([Scripted(BAD, usage=first), Scripted(GOOD, usage=second)])
    runner = Runner(ReActAgent("w", model, output_schema=Weather), enable_streaming=streaming)
    result = await runner.invoke("Weather in Oslo?")
    assert result.output == Weather(city="Oslo", celsius=4)
    assert result.usage == first + second


# The history. The rejected answer was recorded as its event went out; it leaves the history
# when it is rejected, so what later agents and ``RunResult.messages`` read is the agent's
# answer. Kept, a next run given ``result.messages`` read the rejected JSON and the corrected
# one as two assistant turns in a row, with nothing between (the retry prompt that explained the
# second was the loop's own), and a later agent of the run read both as the agent's words.


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_next_run_carries_on_from_the_corrected_answer_over_the_wire(
    streaming: bool,
) -> None:
    fast = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01, jitter=False)
    async with OpenAIServer() as server:
        server.script(
            Reply(text=BAD), Reply(text=GOOD), Reply(text='{"city": "Rome", "celsius": 19}')
        )
        async with wire_model(server, retry=fast) as model:
            runner = Runner(
                ReActAgent("w", model, output_schema=Weather), enable_streaming=streaming
            )
            if streaming:
                events = runner.run("Weather in Oslo?")
                async for event in events:
                    if event.output is not None and event.output.stream is not None:
                        await event.output.stream.collect()
                messages = adk.run_messages(events)
            else:
                messages = (await runner.invoke("Weather in Oslo?")).messages
            assert [(m.role, m.content) for m in messages] == [
                ("user", "Weather in Oslo?"),
                ("assistant", GOOD),
            ]
            second = await runner.invoke([*messages, Message.user("And Rome?")])
        assert second.output == Weather(city="Rome", celsius=19)
        # The retry saw the rejected answer and what was wrong with it; the next run sees the
        # conversation as it stands: the question, the answer, the next question.
        retry = [(m["role"], m["content"]) for m in server.bodies[1]["messages"]]
        assert retry[:2] == [("user", "Weather in Oslo?"), ("assistant", BAD)]
        assert retry[2][0] == "user" and PROBLEM in retry[2][1]
        sent = [(m["role"], m["content"]) for m in server.bodies[2]["messages"]]
        assert sent == [
            ("user", "Weather in Oslo?"),
            ("assistant", GOOD),
            ("user", "And Rome?"),
        ]


async def test_a_later_agent_of_the_run_reads_only_the_corrected_answer() -> None:
    reader = ScriptedModel(["noted"])
    pipeline = SequentialAgent(
        "pipeline",
        [
            ReActAgent("w", ScriptedModel([BAD, GOOD]), output_schema=Weather),
            ReActAgent("reporter", reader),
        ],
    )
    result = await Runner(pipeline).invoke("Weather in Oslo?")
    assert result.text == "noted"
    seen = [m.content for m in reader.requests[0].messages]
    assert seen == ["Weather in Oslo?", f"For context: [w] said: {GOOD}."]


class Addressed(BaseModel):
    advice: str

    @field_validator("advice")
    @classmethod
    def names_the_customer(cls, advice: str, info: ValidationInfo) -> str:
        name = info.context["customer"] if info.context else None
        if name is not None and name not in advice:
            # pydantic-ai's output validator raises ModelRetry; docs/pydantic_ai.md maps it to
            # adk.ToolError, which pydantic does not turn into a ValidationError.
            raise adk.ToolError(f"address the customer by name ({name})")
        return advice


@pytest.mark.asyncio
async def test_a_tool_error_raised_by_the_schemas_validator_is_a_retry_the_model_reads() -> None:
    model = ScriptedModel(['{"advice": "Keep it safe."}', '{"advice": "John, keep it safe."}'])
    agent = ReActAgent("support", model, output_schema=Addressed)
    seen = [e async for e in Runner(agent).run("Card?", options={"customer": "John"})]
    rejected = [
        e.output.custom for e in seen if e.output and isinstance(e.output.custom, OutputRejected)
    ]
    assert [r.problem for r in rejected] == ["address the customer by name (John)"]
    assert seen[-1].output is not None and seen[-1].output.custom == Addressed(
        advice="John, keep it safe."
    )
    retry = model.requests[1].messages[-1].content
    assert retry.startswith(
        "Your answer does not match the required Addressed JSON schema: "
        "address the customer by name (John)."
    )

    # Streamed partials raising it are not valid yet: skipped, as a ValueError's are.
    streamed = ScriptedModel(['{"advice": "John, keep it safe."}'], chunk_size=3)
    runner = Runner(ReActAgent("support", streamed, output_schema=Addressed), enable_streaming=True)
    shown: list[str] = []
    async for event in runner.run("Card?", options={"customer": "John"}):
        if event.output is not None and event.output.stream is not None:
            parts = stream_output(event.output.stream, Addressed, context={"customer": "John"})
            shown += [p.advice async for p in parts]
    assert shown[-1] == "John, keep it safe." and len(shown) > 2
    assert all(a.startswith("John") for a in shown)  # "Joh" raised it, and was skipped


@pytest.mark.asyncio
async def test_a_before_agent_dict_its_validator_rejects_is_an_output_schema_error() -> None:
    # A before_agent answer stands for the model's and is not retried: one its validator rejects
    # with adk.ToolError fails as one off the schema does, an OutputSchemaError with the
    # validator's words, whether it is given as a dict or as text.
    def as_dict(agent: Any, ctx: Any) -> dict[str, str]:
        return {"advice": "Keep it safe."}

    def as_text(agent: Any, ctx: Any) -> str:
        return '{"advice": "Keep it safe."}'

    for answer in (as_dict, as_text):
        model = ScriptedModel([])
        callbacks = [adk.Callbacks(before_agent=answer)]
        agent = ReActAgent("support", model, output_schema=Addressed, callbacks=callbacks)
        with pytest.raises(RunError) as failed:
            await Runner(agent).invoke("Card?", options={"customer": "John"})
        cause = failed.value.__cause__
        assert isinstance(cause, OutputSchemaError), answer.__name__
        assert str(cause) == (
            "agent 'support': the answer a before_agent callback gave does not match "
            "Addressed: address the customer by name (John)"
        )
        assert model.calls == 0


class Approved(BaseModel):
    verdict: str

    @field_validator("verdict")
    @classmethod
    def approved(cls, verdict: str) -> str:
        if verdict != "approved":
            raise adk.ToolError()  # no words: the retry must still say what happened
        return verdict


@pytest.mark.asyncio
async def test_a_validators_tool_error_without_a_message_still_tells_the_model_why() -> None:
    model = ScriptedModel(['{"verdict": "maybe"}', '{"verdict": "approved"}'])
    result = await Runner(ReActAgent("judge", model, output_schema=Approved)).invoke("Ok?")
    assert result.output == Approved(verdict="approved")
    retry = model.requests[1].messages[-1].content
    assert retry.startswith(
        "Your answer does not match the required Approved JSON schema: "
        "the schema's validator rejected it (adk.ToolError without a message). Reply again"
    )
