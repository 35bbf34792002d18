"""Structured output against real OpenAI-wire servers that take less than ``json_schema``.

The servers (tests/openai_server.py, ``structured=``) refuse the response format the way real ones
do: OpenAI's strict-mode rules, DeepSeek's JSON-mode-only answer, a pydantic server's 422 for an
unknown ``strict``, vLLM's grammar backend refusing ``$defs``/``anyOf``, a server without the field.
"""

from __future__ import annotations

import asyncio
import datetime
import enum
import json
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Generic, Literal, TypeVar

import pytest
from conftest import wire_model
from openai_server import OpenAIServer, Reply, _strict_problem
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import AnyUrl, BaseModel, Discriminator, Field, RootModel, Tag, create_model

from adk import RunError, Runner
from adk.messages import Message, MessageChunk, Usage, join_chunks
from adk.models import ModelError, ModelOptions, RetryPolicy
from adk.models._structured import FormatFallback
from adk.models._wrapped import wrapped_schema
from adk.models.openai import OpenAIChatModel
from adk.testing import ScriptedModel
from adk.tools.base import ToolSpec
from prebuilt import ReActAgent
from prebuilt._output import parse_output, response_format

FAST = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01, jitter=False)
APIS = ["chat", "responses"]
T = TypeVar("T")
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
STRICT = {"name": "city", "schema": SCHEMA, "strict": True}
ANSWER = '{"city": "Oslo"}'


def make_model(server: OpenAIServer, api: str = "chat") -> OpenAIChatModel:
    return wire_model(server, api, retry=FAST)


async def call(
    model: OpenAIChatModel, streaming: bool, messages: list[Message], options: ModelOptions
) -> Message:
    if streaming:
        stream: AsyncIterator[MessageChunk] = model.stream(messages, options=options)
        return join_chunks([chunk async for chunk in stream])
    return await model.generate(messages, options=options)


def sent_format(body: dict[str, Any]) -> Any:
    """The response format a request carried, in either API's place (None: none)."""
    if "input" in body:
        return (body.get("text") or {}).get("format")
    return body.get("response_format")


def sent_schema(body: dict[str, Any]) -> dict[str, Any]:
    wire = sent_format(body)
    return wire if "input" in body else wire["json_schema"]


def conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    return body["input"] if "input" in body else body["messages"]


# -- the ladder, one step at a time ------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_server_taking_only_json_mode_gets_json_mode_and_the_schema_in_instructions(
    api: str, streaming: bool
) -> None:
    """DeepSeek and older llama.cpp builds take only ``json_object``: every schema call failed."""
    async with OpenAIServer(structured="json_object") as server:
        server.script(Reply(text=ANSWER, usage=(20, 4)), Reply(text=ANSWER))
        async with make_model(server, api) as model:
            options = ModelOptions(response_format=STRICT)
            messages = [Message.system("Be brief."), Message.user("Where?")]
            first = await call(model, streaming, messages, options)
            second = await call(model, streaming, messages, options)
        assert first.content == second.content == ANSWER
        assert first.usage == Usage(input_tokens=20, output_tokens=4, total_tokens=24)
        bodies = server.bodies
        assert len(bodies) == 3  # one refusal, then JSON mode from the start
        assert sent_format(bodies[0])["type"] == "json_schema"
        for body in bodies[1:]:
            assert sent_format(body) == {"type": "json_object"}
            system = conversation(body)[0]
            assert system["role"] == "system" and system["content"].startswith("Be brief.\n\n")
            assert json.dumps(SCHEMA) in system["content"]
            assert len(conversation(body)) == 2  # merged into the system message, not added


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("strict", [True, False])
async def test_a_server_refusing_strict_gets_the_schema_without_it(
    api: str, streaming: bool, strict: bool
) -> None:
    async with OpenAIServer(structured="no_strict") as server:
        server.script(Reply(text=ANSWER), Reply(text=ANSWER))
        async with make_model(server, api) as model:
            options = ModelOptions(response_format={**STRICT, "strict": strict})
            for _ in range(2):
                reply = await call(model, streaming, [Message.user("Where?")], options)
                assert reply.content == ANSWER
        bodies = server.bodies
        assert len(bodies) == 3
        assert sent_schema(bodies[0])["strict"] is strict
        for body in bodies[1:]:
            assert sent_schema(body) == {"name": "city", "schema": SCHEMA} | (
                {"type": "json_schema"} if api == "responses" else {}
            )
            assert len(conversation(body)) == 1  # the schema is still sent natively


async def test_a_server_without_the_field_gets_the_schema_in_instructions_only() -> None:
    async with OpenAIServer(refuses=["response_format"]) as server:
        server.script(Reply(text=ANSWER), Reply(text=ANSWER))
        async with make_model(server) as model:
            options = ModelOptions(response_format=STRICT)
            for _ in range(2):
                assert (await model.generate([Message.user("Where?")], options=options)).content
        bodies = server.bodies
        assert len(bodies) == 3  # straight to instructions: the field itself is unknown
        for body in bodies[1:]:
            assert "response_format" not in body
            first = body["messages"][0]
            assert first["role"] == "system" and json.dumps(SCHEMA) in first["content"]
            assert body["messages"][1] == {"role": "user", "content": "Where?"}


@pytest.mark.parametrize("api", APIS)
async def test_a_schema_a_grammar_backend_refuses_falls_back_for_that_schema_only(
    api: str,
) -> None:
    """vLLM refuses schemas its grammar backend cannot compile; other schemas still go natively."""
    with_refs = {
        "type": "object",
        "properties": {"where": {"$ref": "#/$defs/Place"}},
        "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
    async with OpenAIServer(structured="no_refs") as server:
        server.script(*[Reply(text=ANSWER)] * 3)
        async with make_model(server, api) as model:
            refs = ModelOptions(response_format={"name": "place", "schema": with_refs})
            plain = ModelOptions(response_format=STRICT)
            await model.generate([Message.user("Where?")], options=refs)
            await model.generate([Message.user("Where?")], options=refs)
            await model.generate([Message.user("Where?")], options=plain)
        formats = [sent_format(body) for body in server.bodies]
        assert len(formats) == 4
        assert formats[0]["type"] == "json_schema"  # refused
        assert formats[1] == formats[2] == {"type": "json_object"}
        assert formats[3]["type"] == "json_schema"  # another schema: not affected


async def test_a_schema_llama_cpp_cannot_convert_falls_back_for_that_schema_only() -> None:
    """llama-server answers any schema its grammar conversion fails on with "JSON schema conversion
    failed: <reason>": about that schema, not a server without ``json_schema`` (it has it)."""
    unanchored = {
        "type": "object",
        "properties": {"city": {"type": "string", "pattern": "\\S"}},
    }
    async with OpenAIServer(structured="llama_cpp") as server:
        server.script(*[Reply(text=ANSWER)] * 3)
        async with make_model(server) as model:
            pattern = ModelOptions(response_format={"name": "place", "schema": unanchored})
            await model.generate([Message.user("Where?")], options=pattern)
            await model.generate(
                [Message.user("Where?")], options=ModelOptions(response_format=STRICT)
            )
        formats = [sent_format(body) for body in server.bodies]
        assert len(formats) == 3
        assert formats[0]["type"] == "json_schema"  # refused
        assert formats[1] == {"type": "json_object"}
        assert formats[2]["type"] == "json_schema"  # another schema: still native


async def test_a_schema_refused_in_the_stream_before_its_first_chunk_falls_back_too() -> None:
    """vLLM's V1 engine answers a stream request 200 and sends the grammar backend's refusal as the
    stream's first event: nothing reached the caller, so the call is asked again one step down."""
    with_refs = {
        "type": "object",
        "properties": {"where": {"$ref": "#/$defs/Place"}},
        "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}}},
    }
    async with OpenAIServer(structured="no_refs") as server:
        server.script(*[Reply(text=ANSWER)] * 2)
        async with make_model(server) as model:
            refs = ModelOptions(response_format={"name": "place", "schema": with_refs})
            first = await call(model, True, [Message.user("Where?")], refs)
            second = await call(model, True, [Message.user("Where?")], refs)
        assert first.content == second.content == ANSWER
        formats = [sent_format(body) for body in server.bodies]
        assert len(formats) == 3
        assert formats[0]["type"] == "json_schema"  # refused in the stream
        assert formats[1] == formats[2] == {"type": "json_object"}  # and remembered


# -- OpenAI's strict mode ----------------------------------------------------------------------


class City(BaseModel):
    city: str


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    city: str
    postcode: str | None = None


class Person(BaseModel):
    name: str
    age: int = 30
    colour: Colour = Field(description="favourite colour")
    home: Address = Field(description="where they live")
    previous: list[Address] = []
    nickname: str | None = None


class Tally(BaseModel):
    counts: dict[str, int]


PERSON = {
    "name": "Ada",
    "age": 36,
    "colour": "blue",
    "home": {"city": "London", "postcode": None},
    "previous": [],
    "nickname": None,
}


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_output_schema_with_optional_nested_and_enum_fields_is_strict_and_accepted(
    api: str, streaming: bool
) -> None:
    """OpenAI guarantees the shape only in strict mode, and strict mode refuses pydantic's own
    schema (optional fields not required, objects open): the agent sent it without ``strict``."""
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text=json.dumps(PERSON)))
        async with make_model(server, api) as model:
            agent = ReActAgent("people", model, output_schema=Person)
            result = await Runner(agent, enable_streaming=streaming).invoke("Who?")
        assert result.output == Person.model_validate(PERSON)
        assert len(server.bodies) == 1  # accepted at once
        sent = sent_schema(server.bodies[0])
        assert sent["strict"] is True and sent["name"] == "Person"
        assert set(sent["schema"]["required"]) == set(Person.model_fields)


async def test_a_schema_strict_mode_cannot_express_is_sent_without_strict() -> None:
    assert "strict" not in response_format(Tally)
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text='{"counts": {"a": 1}}'))
        async with make_model(server) as model:
            result = await Runner(ReActAgent("t", model, output_schema=Tally)).invoke("Count.")
        assert result.output == Tally(counts={"a": 1})
        assert len(server.bodies) == 1


def test_a_generic_models_name_is_one_openai_takes() -> None:
    class Page(BaseModel, Generic[T]):
        items: list[T]

    assert response_format(Page[int])["name"] == "Page_int_"


@pytest.mark.parametrize("api", APIS)
async def test_a_strict_schema_openai_refuses_is_sent_without_strict_from_then_on(
    api: str,
) -> None:
    """A user's own strict schema that breaks OpenAI's rules: strict off for that schema, still
    sent natively; another schema keeps strict."""
    loose = {"type": "object", "properties": {"city": {"type": "string"}}}
    async with OpenAIServer(structured="openai") as server:
        server.script(*[Reply(text=ANSWER)] * 3)
        async with make_model(server, api) as model:
            bad = ModelOptions(response_format={"name": "city", "schema": loose, "strict": True})
            await model.generate([Message.user("Where?")], options=bad)
            await model.generate([Message.user("Where?")], options=bad)
            await model.generate(
                [Message.user("Where?")], options=ModelOptions(response_format=STRICT)
            )
        schemas = [sent_schema(body) for body in server.bodies]
        assert len(schemas) == 4
        assert [s.get("strict") for s in schemas] == [True, None, None, True]


# -- what is not resent ------------------------------------------------------------------------


async def test_a_400_about_something_else_is_not_resent() -> None:
    async with OpenAIServer() as server:
        server.script(
            Reply(status=400, error="This model's maximum context length is 8192 tokens.")
        )
        async with make_model(server) as model:
            options = ModelOptions(response_format=STRICT)
            with pytest.raises(ModelError, match="context length"):
                await model.generate([Message.user("Where?")], options=options)
            assert len(server.bodies) == 1
        server.requests.clear()
    async with OpenAIServer(structured="openai") as server:
        async with make_model(server) as model:
            # the user's own JSON mode, which OpenAI refuses without "json" in the messages:
            # there is no schema to fall back on, and the refusal names another field
            own = ModelOptions(response_format={"type": "json_object"})
            with pytest.raises(ModelError, match="must contain the word 'json'"):
                await model.generate([Message.user("Where?")], options=own)
        assert len(server.bodies) == 1


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
@pytest.mark.parametrize("echo", ["detail", "message"])
async def test_an_unrelated_400_echoing_the_request_teaches_nothing(
    api: str, streaming: bool, echo: str
) -> None:
    """FastAPI-based servers (vLLM, LiteLLM) echo the whole request in a model-level validation
    error, our response format and schema with it, so the error reads like a refusal of the
    format. Where the echo cannot be told apart (the errors as text), the call is sent again with
    less and fails the same way: the server accepted nothing less, so nothing is remembered and
    the next call asks for the schema natively again."""
    bad = Reply(status=400, error="max_tokens must be at least 1, got 0.", echo_request=echo)
    async with OpenAIServer(default=bad) as server:
        async with make_model(server, api) as model:
            options = ModelOptions(response_format=STRICT)
            with pytest.raises(ModelError, match="max_tokens must be at least 1"):
                await call(model, streaming, [Message.user("Where?")], options)
            assert "json_schema" in json.dumps(server.bodies[0])  # the echo the error carried
            # FastAPI's own shape: the echo (each error's input) is not read, nothing is resent
            assert len(server.bodies) == (1 if echo == "detail" else 4)
            server.default = Reply(text=ANSWER)
            server.requests.clear()
            reply = await call(model, streaming, [Message.user("Where?")], options)
        assert reply.content == ANSWER
        [body] = server.bodies
        assert sent_schema(body) == STRICT | ({"type": "json_schema"} if api == "responses" else {})
        assert len(conversation(body)) == 1


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_refusal_followed_by_another_error_is_remembered_only_once_a_call_succeeds(
    api: str, streaming: bool
) -> None:
    """The server refuses the schema, and the call in JSON mode then fails for another reason:
    that error is the one raised (the format no longer in its way), the refusal's a note on it,
    and the step is learnt by the next call that succeeds with it, not before."""
    async with OpenAIServer(structured="json_object") as server:
        server.script(
            Reply(status=400, error="max_tokens is too large: 99999."),
            Reply(text=ANSWER),
            Reply(text=ANSWER),
        )
        async with make_model(server, api) as model:
            options = ModelOptions(response_format=STRICT)
            with pytest.raises(ModelError, match="max_tokens is too large") as caught:
                await call(model, streaming, [Message.user("Where?")], options)
            assert any("unavailable now" in note for note in caught.value.__notes__)
            assert len(server.bodies) == 2
            for _ in range(2):
                reply = await call(model, streaming, [Message.user("Where?")], options)
                assert reply.content == ANSWER
        kinds = [(sent_format(body) or {}).get("type") for body in server.bodies]
        # the second call refused again (nothing learnt from the first), the third knew
        assert kinds == ["json_schema", "json_object", "json_schema", "json_object", "json_object"]


async def test_overlapping_calls_both_learn_and_the_step_stays_down() -> None:
    async with OpenAIServer(structured="json_object", default=Reply(text=ANSWER)) as server:
        async with make_model(server) as model:
            options = ModelOptions(response_format=STRICT)
            replies = await asyncio.gather(
                *(model.generate([Message.user("Where?")], options=options) for _ in range(3))
            )
            assert all(reply.content == ANSWER for reply in replies)
            server.requests.clear()
            await model.generate([Message.user("Where?")], options=options)
        [body] = server.bodies
        assert body["response_format"] == {"type": "json_object"}


async def test_a_refusal_naming_another_field_is_not_taken_for_the_format() -> None:
    """OpenAI names the field at fault in ``param``: a tool's schema is not the response format."""
    async with OpenAIServer() as server:
        server.script(
            Reply(
                status=400,
                error="Invalid schema for function 'add': In context=(), 'additionalProperties' "
                "is required to be supplied and to be false.",
                error_param="tools[0].function.parameters",
            )
        )
        async with make_model(server) as model:
            with pytest.raises(ModelError, match="Invalid schema for function"):
                await model.generate(
                    [Message.user("Where?")], options=ModelOptions(response_format=STRICT)
                )
        assert len(server.bodies) == 1


async def test_a_refused_tool_schema_is_not_taken_for_a_refused_format() -> None:
    """Without a ``param`` to go by, an error about a tool's JSON schema is still not ours: taken
    for the format it would cost three calls and the model its native structured output."""
    tool = ToolSpec(name="add", description="Add.", parameters={"type": "object"})
    async with OpenAIServer() as server:
        server.script(
            Reply(status=400, error="Invalid JSON schema for tool 'add': $defs is not supported.")
        )
        async with make_model(server) as model:
            with pytest.raises(ModelError, match="for tool 'add'"):
                await model.generate(
                    [Message.user("Where?")],
                    tools=[tool],
                    options=ModelOptions(response_format=STRICT),
                )
        assert len(server.bodies) == 1


async def test_a_bad_name_in_the_format_is_not_taken_for_a_refused_format() -> None:
    async with OpenAIServer() as server:
        server.script(
            Reply(
                status=400,
                error="Invalid 'response_format.json_schema.name': string does not match pattern. "
                "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.",
                error_param="response_format.json_schema.name",
                error_code="invalid_value",
            )
        )
        async with make_model(server) as model:
            bad = ModelOptions(response_format={"name": "a city", "schema": SCHEMA})
            with pytest.raises(ModelError, match="does not match pattern"):
                await model.generate([Message.user("Where?")], options=bad)
        assert len(server.bodies) == 1


async def test_calls_without_a_response_format_are_unchanged_after_a_fallback() -> None:
    async with OpenAIServer(structured="json_object") as server:
        server.script(Reply(text=ANSWER), Reply(text="hi"))
        async with make_model(server) as model:
            await model.generate(
                [Message.user("Where?")], options=ModelOptions(response_format=STRICT)
            )
            await model.generate([Message.user("Hello")], options=ModelOptions(temperature=0))
        last = server.bodies[-1]
        assert last["messages"] == [{"role": "user", "content": "Hello"}]
        assert "response_format" not in last


# -- the agent: validated, retried once, remembered across runs ---------------------------------


class Weather(BaseModel):
    city: str
    celsius: int


@pytest.mark.parametrize("streaming", [False, True])
async def test_an_agent_on_a_json_mode_server_validates_and_retries_once(streaming: bool) -> None:
    async with OpenAIServer(structured="json_object") as server:
        server.script(
            Reply(text='{"city": "Oslo", "celsius": "cold"}'),
            Reply(text='{"city": "Oslo", "celsius": 4}'),
            Reply(text='{"city": "Rome", "celsius": 20}'),
        )
        async with make_model(server) as model:
            agent = ReActAgent("w", model, instruction="Report.", output_schema=Weather)
            runner = Runner(agent, enable_streaming=streaming)
            first = await runner.invoke("Oslo?")
            second = await runner.invoke("Rome?")
        assert first.output == Weather(city="Oslo", celsius=4)
        assert second.output == Weather(city="Rome", celsius=20)
        bodies = server.bodies
        assert len(bodies) == 4  # one refusal in all: the second run knew
        retry = bodies[2]["messages"][-1]
        assert (
            retry["role"] == "user"
            and "celsius: Input should be a valid integer" in (retry["content"])
        )
        for body in bodies[1:]:
            assert body["response_format"] == {"type": "json_object"}
            system = body["messages"][0]["content"]
            assert system.startswith("Report.\n\n") and '"celsius"' in system


def test_the_schemas_a_model_remembers_are_bounded() -> None:
    """(white box) Schemas made per call, each refused by a grammar backend, do not pile up."""
    fallback = FormatFallback()
    refusal = "The provided JSON schema contains features not supported by xgrammar."
    for n in range(300):
        schema = {"type": "object", "properties": {f"f{n}": {"anyOf": [{"type": "string"}]}}}
        options = ModelOptions(response_format={"name": "x", "schema": schema})
        request = {"response_format": {"type": "json_schema", "json_schema": {"schema": schema}}}
        assert fallback.refused(request, options, refusal, None, field_refused=False)
    assert 0 < len(fallback.schemas) <= 256 and fallback.floor == 0


async def test_a_server_ignoring_the_format_gets_the_schema_in_the_retry() -> None:
    """Older Ollama builds and proxies drop a response format they do not know without a word:
    the model never saw the schema, and a retry naming only the problem could not mend it."""
    async with OpenAIServer() as server:
        server.script(
            Reply(text="It is 4 degrees in Oslo."), Reply(text='{"city": "Oslo", "celsius": 4}')
        )
        async with make_model(server) as model:
            agent = ReActAgent("w", model, output_schema=Weather)
            result = await Runner(agent).invoke("Oslo?")
        assert result.output == Weather(city="Oslo", celsius=4)
        retry = server.bodies[1]["messages"][-1]["content"]
        assert "not valid JSON" in retry
        assert json.dumps(Weather.model_json_schema()) in retry


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streamed"])
async def test_a_refusal_ends_the_agent_naming_it_without_a_retry(
    api: str, streaming: bool
) -> None:
    """A model that declines (OpenAI's refusal, in ``metadata["refusal"]``) sends no content: the
    agent took that for invalid JSON, spent a retry telling the model so, and failed with "the
    answer is not valid JSON (... EOF ...)", the model's words nowhere in the error."""
    refusal = "I'm sorry, I can't help with that."
    server = OpenAIServer([Reply(refusal=refusal)], default=Reply(text=ANSWER))
    async with server, make_model(server, api) as model:
        agent = ReActAgent("w", model, output_schema=Weather)
        with pytest.raises(RunError) as failed:
            await Runner(agent, enable_streaming=streaming).invoke("Oslo?")

    assert failed.value.error.type == "OutputSchemaError"
    assert failed.value.error.message == (
        f"agent 'w': the model refused to answer with Weather: {refusal}"
    )
    assert len(server.requests) == 1


class Node(BaseModel):
    name: str
    child: Node | None = None
    # a default the type does not allow, as models often say "optional": {"$ref", "description"}
    first: Node = Field(default=None, description="the first child")  # type: ignore[assignment]


class Tree(BaseModel):
    root: Node = Field(description="the top")


def test_a_model_that_refers_to_itself_beside_a_keyword_gets_a_strict_schema() -> None:
    """Inlining a ``$ref`` that stands beside a keyword recursed for ever on a model referring to
    itself that way (as the ``openai`` package's own helper does)."""
    sent = response_format(Tree)
    assert sent["strict"] is True
    assert _strict_problem(sent["schema"], ()) is None  # what OpenAI checks, as the server does
    root = sent["schema"]["properties"]["root"]  # Node inlined beside its description
    assert root["description"] == "the top"
    assert root["properties"]["first"] == {"$ref": "#/$defs/Node"}  # not inlined again
    first = sent["schema"]["$defs"]["Node"]["properties"]["first"]
    assert first["description"] == "the first child"
    assert first["properties"]["first"] == {"$ref": "#/$defs/Node"}


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_refused_response_format_is_one_model_span_with_the_usage_of_the_answer(
    streaming: bool,
) -> None:
    """The adapter's fallback (a server taking only JSON mode) happens inside the model call: one
    span, not an error, with the usage of the answer that came."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with (
        OpenAIServer([Reply(text=ANSWER, usage=(30, 6))], structured="json_object") as server,
        make_model(server) as model,
    ):
        agent = ReActAgent("a", model, output_schema=City)
        runner = Runner(agent, enable_streaming=streaming, tracer_provider=provider)
        result = await runner.invoke("where?")
    provider.shutdown()
    assert result.output == City(city="Oslo")
    assert len(server.bodies) == 2  # the refusal, then JSON mode
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "chat test-model"]
    assert span.status.status_code != StatusCode.ERROR
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.usage.input_tokens"] == 30
    assert attributes["gen_ai.usage.output_tokens"] == 6


# -- what the strict form of common pydantic types is ------------------------------------------


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = 9


class Dog(BaseModel):
    kind: Literal["dog"]
    bark: str = Field(max_length=20)


class Pets(BaseModel):
    """A discriminated union: pydantic writes ``oneOf`` and ``discriminator``."""

    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    others: list[Annotated[Cat | Dog, Field(discriminator="kind")]] = []


def _pet_kind(value: Any) -> str:
    return str(value.get("kind") if isinstance(value, dict) else value.kind)


class TaggedPets(BaseModel):
    """A callable discriminator: ``oneOf`` without ``discriminator``."""

    pet: Annotated[
        Annotated[Cat, Tag("cat")] | Annotated[Dog, Tag("dog")], Discriminator(_pet_kind)
    ]


class Page(BaseModel, Generic[T]):
    items: list[T]
    next: int | None = None


class Event(BaseModel):
    """Literals, enums, optionals, dates, ids, constrained fields, sets and defaults."""

    kind: Literal["meeting", "call"]
    only: Literal["x"]
    colour: Colour = Colour.RED
    note: str | None = None
    at: datetime.datetime
    day: datetime.date
    starts: datetime.time
    lasts: datetime.timedelta
    id: uuid.UUID
    score: int = Field(ge=0, le=10)
    ratio: float = Field(gt=0, multiple_of=0.5)
    code: str = Field(min_length=2, max_length=5, pattern="^[A-Z]+$")
    site: AnyUrl
    tags: set[str] = set()
    names: list[str] = Field(min_length=1, max_length=3)
    people: list[Address]
    page: Page[Address]
    label: str = Field(examples=["standup"], deprecated=True)


class Outline(BaseModel):
    """Recursive at the root: pydantic writes ``$defs`` and a root ``$ref``."""

    name: str
    children: list[Outline] = []


class Coordinates(BaseModel):
    at: tuple[float, float]


class Anything(BaseModel):
    value: Any


def _nested(levels: int) -> type[BaseModel]:
    model: type[BaseModel] = create_model("Leaf", value=(int, ...))
    for level in range(levels - 1):
        model = create_model(f"Level{level}", inner=(model, ...))
    return model


STRICT_MODELS: list[type[BaseModel]] = [Pets, TaggedPets, Event, Outline, _nested(10)]
# Roots strict mode refuses, which the OpenAI adapter sends wrapped in an object (test_wrapped_schemas)
WRAPPED_MODELS: list[type[BaseModel]] = [
    RootModel[list[Address]],
    RootModel[Cat | Dog],
    RootModel[int],
    RootModel[list[_nested(9)]],  # type: ignore[misc]
]
NOT_STRICT_MODELS: list[type[BaseModel]] = [
    Tally,  # a dict: an object taking any key
    RootModel[list[Tally]],  # a root strict mode refuses, holding what it cannot express
    RootModel[list[_nested(10)]],  # type: ignore[misc]  # 11 levels once wrapped
    Coordinates,  # a tuple's prefixItems
    Anything,  # a schema without a type
    _nested(11),  # more than 10 levels of objects
    create_model("Wide", **{f"f{n}": (int, ...) for n in range(5001)}),  # type: ignore[call-overload]
    create_model("Choice", pick=(Literal[tuple(f"v{n}" for n in range(1001))], ...)),  # type: ignore[call-overload]
    # over 120,000 characters of property names
    create_model("Named", **{f"{n:0120}": (int, ...) for n in range(1001)}),  # type: ignore[call-overload]
    # over 250 values of over 15,000 characters in all
    create_model("Long", pick=(Literal[tuple(f"{n:060}" for n in range(300))], ...)),  # type: ignore[call-overload]
]


@pytest.mark.parametrize("model", STRICT_MODELS, ids=lambda m: m.__name__)
def test_common_pydantic_types_are_sent_strict_in_a_form_openai_takes(
    model: type[BaseModel],
) -> None:
    sent = response_format(model)
    assert sent.get("strict") is True
    assert _strict_problem(sent["schema"], ()) is None


@pytest.mark.parametrize("model", WRAPPED_MODELS, ids=lambda m: m.__name__[:24])
def test_a_root_strict_mode_refuses_is_sent_strict_in_a_form_openai_takes_once_wrapped(
    model: type[BaseModel],
) -> None:
    """These went without ``strict`` (the model free to answer anything): the root is kept, and
    its wrapped form (what the OpenAI adapter sends) holds to strict mode, limits and all."""
    sent = response_format(model)
    assert sent.get("strict") is True
    assert _strict_problem(sent["schema"], ()) is not None  # as it is, refused
    assert _strict_problem(wrapped_schema(sent["schema"]), ()) is None


@pytest.mark.parametrize("model", NOT_STRICT_MODELS, ids=lambda m: m.__name__[:20])
def test_schemas_strict_mode_cannot_take_are_sent_without_strict(model: type[BaseModel]) -> None:
    sent = response_format(model)
    assert "strict" not in sent
    assert sent["schema"] == model.model_json_schema()  # as pydantic writes it


def test_a_discriminated_union_is_sent_as_any_of_and_still_validated_by_its_discriminator() -> None:
    schema = response_format(Pets)["schema"]
    text = json.dumps(schema)
    assert '"oneOf"' not in text and '"discriminator"' not in text
    assert len(schema["properties"]["pet"]["anyOf"]) == 2
    # the answer still goes through pydantic's discriminator
    output, problem = parse_output(Pets, '{"pet": {"kind": "dog", "bark": "woof"}, "others": []}')
    assert problem is None and isinstance(output, Pets) and isinstance(output.pet, Dog)


def test_keywords_strict_mode_refuses_are_moved_into_the_description() -> None:
    """The model class checks them; the model still reads them."""
    properties = response_format(Event)["schema"]["properties"]
    assert properties["code"]["pattern"] == "^[A-Z]+$"  # supported: kept
    assert "maxLength" not in properties["code"] and "minLength" not in properties["code"]
    assert "maxLength: 5" in properties["code"]["description"]
    assert "uniqueItems" not in properties["tags"]
    assert "format" not in properties["site"]  # "uri" is not a format strict mode takes
    assert 'format: "uri"' in properties["site"]["description"]
    assert properties["at"]["format"] == "date-time"  # one it takes: kept
    assert properties["names"]["maxItems"] == 3  # supported for arrays
    assert "default" not in properties["colour"]
    assert properties["score"]["minimum"] == 0 and properties["score"]["maximum"] == 10
    assert properties["label"]["description"] == 'deprecated: true; examples: ["standup"]'


@pytest.mark.parametrize("api", APIS)
async def test_a_discriminated_union_is_accepted_strict_on_the_first_call(api: str) -> None:
    """OpenAI refuses ``oneOf`` in strict mode: the schema cost a refused call, then went on
    without ``strict``."""
    answer = {"pet": {"kind": "cat", "lives": 7}, "others": [{"kind": "dog", "bark": "woof"}]}
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text=json.dumps(answer)))
        async with make_model(server, api) as model:
            result = await Runner(ReActAgent("pets", model, output_schema=Pets)).invoke("Pets?")
        assert result.output == Pets.model_validate(answer)
        assert len(server.bodies) == 1
        assert sent_schema(server.bodies[0])["strict"] is True


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": "array", "items": {"type": "string"}}, 'type: "object"'),
        ({"type": "object", "anyOf": [SCHEMA]}, "anyOf"),
        ({**SCHEMA, "properties": {"city": {"type": "string", "maxLength": 3}}}, "maxLength"),
        ({**SCHEMA, "properties": {"city": {"type": "string", "default": "x"}}}, "default"),
        ({**SCHEMA, "properties": {"city": {"type": "string", "format": "uri"}}}, "uri"),
        ({**SCHEMA, "properties": {"city": {"oneOf": [{"type": "string"}]}}}, "oneOf"),
        ({**SCHEMA, "properties": {"city": {"title": "anything"}}}, "'type' key"),
    ],
)
def test_the_test_server_refuses_what_strict_mode_refuses(schema: Any, problem: str) -> None:
    found = _strict_problem(schema, ())
    assert found is not None and problem in found
    assert _strict_problem(response_format(Pets)["schema"], ()) is None


class _Cities(RootModel[list[str]]):
    pass


async def test_a_list_schema_is_asked_for_as_a_json_array_not_an_object() -> None:
    """A ``RootModel[list[X]]`` (pydantic-ai's ``output_type=list[X]``) asked for in the
    instructions was asked for as "a JSON object", which its schema is not: a model that obeys
    wraps the list in an object, which fails validation, and the retry asked for an object again."""
    model = ScriptedModel(
        ['{"cities": ["Oslo"]}', '["Oslo", "Bergen"]'], supports_response_format=False
    )
    result = await Runner(ReActAgent("c", model, output_schema=_Cities)).invoke("Cities?")
    assert result.output == _Cities(["Oslo", "Bergen"])
    system = model.requests[0].messages[0].content
    assert "reply with only a JSON array matching this JSON schema" in system
    assert "JSON object" not in system
    assert (
        model.requests[1]
        .messages[-1]
        .content.endswith("Reply again with only the corrected JSON array.")
    )

    async with OpenAIServer(refuses=["response_format"]) as server:
        server.script(Reply(text='["Oslo"]'))
        async with make_model(server) as wire:
            options = ModelOptions(response_format=response_format(_Cities))
            await wire.generate([Message.user("Cities?")], options=options)
        first = server.bodies[-1]["messages"][0]
        assert first["content"].startswith("Reply with only a JSON array matching this JSON schema")
