"""A strict schema whose root is not an object (a list, a union, a scalar) goes to OpenAI wrapped in
one, ``{"response": <the schema>}``, and the answer comes back unwrapped: against a real OpenAI wire
server (tests/openai_server.py, which refuses what strict mode refuses: a root that is not an
object), with either API, streamed and not, from the model up to the agent's outputs, history,
retry and a paused run's checkpoint."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import pytest
from conftest import sqlite_store, wire_model
from openai_server import Call, OpenAIServer, Reply, _strict_problem
from pydantic import BaseModel, RootModel, model_validator

import adk
from adk import Runner
from adk.messages import Message, MessageChunk, join_chunks
from adk.models import ModelOptions, RetryPolicy
from adk.models._wrapped import AnswerUnwrapper, WrappedSchemas, unwrap_text, wrapped_schema
from adk.models.openai import OpenAIChatModel
from adk.testing import ScriptedModel
from prebuilt import OutputRejected, ReActAgent, stream_output
from prebuilt._output import response_format

FAST = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01, jitter=False)
APIS = ["chat", "responses"]
MODES = [False, True]  # streamed or not


class Item(BaseModel):
    name: str
    qty: int


class Items(RootModel[list[Item]]):
    pass


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int


class Dog(BaseModel):
    kind: Literal["dog"]
    bark: str


class Pet(RootModel[Cat | Dog]):
    pass


class Count(RootModel[int]):
    pass


ITEMS = '[{"name": "apple", "qty": 2}, {"name": "pear", "qty": 1}]'
WRAPPED_ITEMS = '{"response": ' + ITEMS + "}"
LIST_SPEC = {
    "name": "words",
    "schema": {"type": "array", "items": {"type": "string"}},
    "strict": True,
}


def sent_format(body: dict[str, Any]) -> dict[str, Any]:
    """The json_schema response format a request carried, in either API's place."""
    if "input" in body:
        return dict(body["text"]["format"])
    return dict(body["response_format"]["json_schema"])


def conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body["input"] if "input" in body else body["messages"])


async def call(
    model: OpenAIChatModel, streaming: bool, options: ModelOptions
) -> tuple[Message, list[MessageChunk]]:
    messages = [Message.user("Words?")]
    if streaming:
        stream: AsyncIterator[MessageChunk] = model.stream(messages, options=options)
        chunks = [chunk async for chunk in stream]
        return join_chunks(chunks), chunks
    return await model.generate(messages, options=options), []


# -- the model: the wire request, and the answer ------------------------------------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", MODES)
async def test_a_strict_list_schema_goes_wrapped_and_its_answer_comes_back_unwrapped(
    api: str, streaming: bool
) -> None:
    """OpenAI refuses a strict schema whose root is an array: the call cost a refused round
    trip, went on without ``strict`` (the model then free to answer anything), and a wrapped
    answer would have come back as it was."""
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text='{"response": ["alpha", "beta}", "gamma", " delta "]}'))
        async with wire_model(server, api, retry=FAST) as model:
            reply, chunks = await call(model, streaming, ModelOptions(response_format=LIST_SPEC))
        assert reply.content == '["alpha", "beta}", "gamma", " delta "]'
        assert len(server.bodies) == 1  # accepted at once
        sent = sent_format(server.bodies[0])
        assert sent["strict"] is True and sent["name"] == "words"
        assert sent["schema"] == {
            "type": "object",
            "properties": {"response": LIST_SPEC["schema"]},
            "required": ["response"],
            "additionalProperties": False,
        }
        assert _strict_problem(sent["schema"], ()) is None
        if streaming:  # the value streamed as it came (8 characters a chunk), not at the end
            assert len([chunk for chunk in chunks if chunk.content]) > 3
            assert chunks[0].content.startswith("[")


async def test_a_wrapped_stream_ended_by_done_without_a_finish_reason_is_unwrapped() -> None:
    """A Chat stream ended with ``[DONE]`` and no finish reason is finished (the adapter's
    reading of ``[DONE]``); a wrapped answer's end then gives the rest of the value, as a finish
    reason does, not the wrapper's tail."""
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text='{"response": ["alpha", "beta"]}', finish_sent=False))
        async with wire_model(server, retry=FAST) as model:
            reply, _ = await call(model, True, ModelOptions(response_format=LIST_SPEC))
    assert reply.content == '["alpha", "beta"]'
    assert reply.metadata["finish_reason"] == "stop"


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_cut_while_only_the_wrapper_came_is_retried(api: str) -> None:
    """The wrapper's head is not the answer: a stream that breaks after it (and nothing else)
    has given the caller nothing, so it is retried like one that broke before any text, not
    failed mid-stream."""
    head_only = {"chat": 2, "responses": 3}[api]  # the events up to the first text, '{"respon'
    async with OpenAIServer(structured="openai") as server:
        wrapped = '{"response": ["a", "b"]}'
        server.script(Reply(text=wrapped, break_after=head_only), Reply(text=wrapped))
        async with wire_model(server, api, retry=FAST) as model:
            reply, _ = await call(model, True, ModelOptions(response_format=LIST_SPEC))
    assert reply.content == '["a", "b"]'
    assert len(server.bodies) == 2


@pytest.mark.parametrize("text_events", ["done", "final"])
async def test_a_responses_stream_whose_text_comes_whole_is_unwrapped_too(text_events: str) -> None:
    """Gateways that send a part's text only in its ``.done`` event, or only in the final
    response object: the whole wrapped answer arrives in one chunk, the finishing one or not."""
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text='{"response": ["a", "b"]}', text_events=text_events))
        async with wire_model(server, "responses", retry=FAST) as model:
            reply, chunks = await call(model, True, ModelOptions(response_format=LIST_SPEC))
    assert reply.content == '["a", "b"]'
    assert [chunk.content for chunk in chunks if chunk.content] == ['["a", "b"]']


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", MODES)
@pytest.mark.parametrize(
    "answer", ["[1, 2]", '{"other": [1]}', '{"responses": 1}', "", "Sorry, I can't."]
)
async def test_an_answer_that_is_not_wrapped_comes_back_as_it_came(
    api: str, streaming: bool, answer: str
) -> None:
    """A server that ignored the format, or a model answering the bare value: the caller
    validates what came against the schema it asked for, so nothing is taken from it."""
    async with OpenAIServer() as server:
        server.script(Reply(text=answer, fragment=2))
        async with wire_model(server, api, retry=FAST) as model:
            reply, _ = await call(model, streaming, ModelOptions(response_format=LIST_SPEC))
        assert reply.content == answer
        assert "response" in sent_format(server.bodies[0])["schema"]["properties"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", MODES)
async def test_an_object_schema_or_one_without_strict_is_sent_and_answered_as_it_is(
    api: str, streaming: bool
) -> None:
    """Only a strict schema whose root strict mode refuses is wrapped: an object schema whose
    one property is named ``response`` keeps its answer whole, and a schema sent without
    ``strict`` (the caller asked for no guarantee) goes as it was written."""
    own = {
        "type": "object",
        "properties": {"response": {"type": "string"}},
        "required": ["response"],
        "additionalProperties": False,
    }
    loose = {key: value for key, value in LIST_SPEC.items() if key != "strict"}
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text='{"response": "hi"}'), Reply(text='{"response": ["a"]}'))
        async with wire_model(server, api, retry=FAST) as model:
            strict = {"name": "own", "schema": own, "strict": True}
            first, _ = await call(model, streaming, ModelOptions(response_format=strict))
            second, _ = await call(model, streaming, ModelOptions(response_format=loose))
        assert first.content == '{"response": "hi"}'
        assert second.content == '{"response": ["a"]}'
        assert sent_format(server.bodies[0])["schema"] == own
        assert sent_format(server.bodies[1])["schema"] == LIST_SPEC["schema"]


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", MODES)
async def test_a_server_refusing_strict_gets_the_schema_as_it_is_and_its_answer_whole(
    api: str, streaming: bool
) -> None:
    """The fallback's step without ``strict`` sends the schema unwrapped (the wrapper is for
    strict mode), and reads the answer to it as it comes."""
    async with OpenAIServer(structured="no_strict") as server:
        server.script(Reply(text='["a", "b"]'))
        async with wire_model(server, api, retry=FAST) as model:
            reply, _ = await call(model, streaming, ModelOptions(response_format=LIST_SPEC))
        assert reply.content == '["a", "b"]'
        first, second = (sent_format(body) for body in server.bodies)
        assert first["schema"]["type"] == "object" and first["strict"] is True
        assert second["schema"] == LIST_SPEC["schema"] and "strict" not in second


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", MODES)
async def test_a_wrapped_schema_openai_refuses_steps_down_unwrapped_and_is_remembered(
    api: str, streaming: bool
) -> None:
    """A hand-written strict list schema strict mode refuses inside (an open object): OpenAI's
    refusal names the schema, the call goes on without ``strict`` and so without the wrapper,
    its answer taken whole, and the next call starts there."""
    spec = {
        "name": "rows",
        "schema": {"type": "array", "items": {"type": "object", "properties": {}}},
        "strict": True,
    }
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text="[{}]"), Reply(text="[{}, {}]"))
        async with wire_model(server, api, retry=FAST) as model:
            first, _ = await call(model, streaming, ModelOptions(response_format=spec))
            second, _ = await call(model, streaming, ModelOptions(response_format=spec))
    assert (first.content, second.content) == ("[{}]", "[{}, {}]")
    refused, loose, again = (sent_format(body) for body in server.bodies)
    assert refused["strict"] is True and refused["schema"]["type"] == "object"
    assert loose["schema"] == again["schema"] == spec["schema"]
    assert "strict" not in loose and "strict" not in again


def test_definitions_move_to_the_wrapper_and_references_to_the_root_under_its_property() -> None:
    """``#/$defs/X`` must still resolve from the new root; ``#`` (strict mode's recursion to the
    root) must point at the wrapped schema, not at the wrapper."""
    tree = {
        "type": "array",
        "items": {"$ref": "#/$defs/Node"},
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "children": {"$ref": "#"}},
                "required": ["name", "children"],
                "additionalProperties": False,
            }
        },
    }
    wrapped = wrapped_schema(tree)
    assert wrapped["properties"]["response"] == {"type": "array", "items": {"$ref": "#/$defs/Node"}}
    node = wrapped["$defs"]["Node"]
    assert node["properties"]["children"] == {"$ref": "#/properties/response"}
    assert tree["$defs"]["Node"]["properties"]["children"] == {"$ref": "#"}  # not changed
    assert _strict_problem(wrapped, ()) is None


@pytest.mark.parametrize("api", APIS)
async def test_a_schema_asked_for_again_is_not_walked_again_and_its_edits_in_place_go_out(
    api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adapter wrapped a schema afresh on every call, walking all of it for references to
    move (~0.2 ms a call for 300 properties). It now walks a schema it keeps (by identity) only
    while the schema differs from its copy; what goes out is still the schema as the caller's
    dict holds it at each call: a property added, keys reordered, a reference to the root
    added, each edited in place between calls, goes out edited."""
    walks: list[object] = []
    walk = adk.models._wrapped._wrapped

    def counted(schema: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        walks.append(schema)
        return walk(schema)

    monkeypatch.setattr(adk.models._wrapped, "_wrapped", counted)
    item = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    schema: dict[str, Any] = {
        "type": "array",
        "items": {"$ref": "#/$defs/Item"},
        "$defs": {"Item": item},
    }
    options = ModelOptions(response_format={"name": "items", "schema": schema, "strict": True})
    sent: list[str] = []
    expected: list[str] = []
    async with OpenAIServer(structured="openai") as server:
        server.script(*(Reply(text='{"response": []}') for _ in range(8)))
        async with wire_model(server, api, retry=FAST) as model:

            async def ask() -> None:
                reply = await model.generate([Message.user("Items?")], options=options)
                assert reply.content == "[]"
                expected.append(json.dumps(walk(schema)[0]))  # wrapped_schema, uncounted
                sent.append(json.dumps(sent_format(server.bodies[-1])["schema"]))

            for _ in range(3):
                await ask()
            assert len(walks) == 2  # the second call keeps a copy; the third compares with it
            item["properties"]["qty"] = {"type": "integer"}  # a property added
            item["required"].append("qty")
            await ask()
            await ask()
            assert len(walks) == 3
            item["properties"] = {"qty": item["properties"]["qty"], "name": {"type": "string"}}
            await ask()  # keys reordered: equal to the copy, and sent as they now are
            schema["minItems"] = 1  # a keyword at the root
            await ask()
            item["properties"]["parent"] = {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
            item["required"].append("parent")
            await ask()  # a reference to the root: moved under the wrapper's property
    assert sent == expected
    assert '"qty": {"type": "integer"}' in sent[3]
    assert sent[5].index('"qty"') < sent[5].index('"name"')
    assert '"minItems": 1' in sent[6]
    assert '{"$ref": "#/properties/response"}' in sent[7]
    assert len(sent) == len(server.bodies) == 8  # the server took every one as strict mode's


def test_a_schema_edited_before_every_call_is_walked_without_more_copies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kept schema is copied to tell its edits by; one edited before call after call would
    pay a copy (several walks' worth) every call or two on top of the walk it needs anyway.
    Found edited twice since its first copy, it is walked every call and copied no more, and
    each call still wraps it as it then is."""
    copies: list[object] = []
    deepcopy = copy.deepcopy

    def counted(value: Any) -> Any:
        copies.append(value)
        return deepcopy(value)

    monkeypatch.setattr(adk.models._wrapped.copy, "deepcopy", counted)
    schemas = WrappedSchemas()
    schema: dict[str, Any] = {"type": "array", "items": {"type": "string"}, "maxItems": 1}
    for most in range(2, 12):
        assert json.dumps(schemas.of(schema)) == json.dumps(wrapped_schema(schema))
        schema["maxItems"] = most
    assert len(copies) == 2  # at its second call, and after its first edit; not after its second


@pytest.mark.parametrize("size", [1, 2, 5])
def test_the_answer_is_unwrapped_alike_whole_and_piece_by_piece(size: int) -> None:
    """Each answer unwraps to the value it wraps, whole (``unwrap_text``) and fed to the stream's
    unwrapper ``size`` characters at a time."""
    for text, value in (
        (WRAPPED_ITEMS, ITEMS),
        (
            ' { "response" :\n {"kind": "cat", "lives": {"n": 9}} }\n',
            '{"kind": "cat", "lives": {"n": 9}}',
        ),
        ('{"response": "a } b"}', '"a } b"'),
        ('{"response": 7}', "7"),
        (ITEMS, ITEMS),  # answered bare: passed on as it came
        ('{"response": [1, 2', "[1, 2"),  # cut off (finish reason "length"): what came of it
    ):
        unwrapper = AnswerUnwrapper()
        pieces = [text[at : at + size] for at in range(0, len(text), size)]
        streamed = "".join(unwrapper.feed(piece) for piece in pieces) + unwrapper.finish()
        assert unwrap_text(text) == value
        assert streamed == value
    for text, value in (  # cut off: the wrapper's close may never have come
        ('{"response": {"a": {"b": 1}}', '{"a": {"b": 1}}'),
        ('{"response": {"a": {"b": 1}', '{"a": {"b": 1}'),
        ('{"response": {"a": 1} }', '{"a": 1}'),
        ('{"response": "a } b"', '"a } b"'),
        ('{"response": 7', "7"),
        ('{"response": 7 }', "7"),
    ):
        unwrapper = AnswerUnwrapper()
        pieces = [text[at : at + size] for at in range(0, len(text), size)]
        streamed = "".join(unwrapper.feed(piece) for piece in pieces) + unwrapper.finish(True)
        assert unwrap_text(text, cut=True) == value
        assert streamed == value
    assert unwrap_text(' { "response" :\n {"a": {}} }\n') == '{"a": {}}'


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", MODES)
@pytest.mark.parametrize(
    ("wire", "value"),
    [
        # The value whole, the wrapper's close cut off: the value's own last brace was taken for
        # it, and the value came back one character short.
        ('{"response": {"kind": "dog", "bark": "woof"}', '{"kind": "dog", "bark": "woof"}'),
        ('{"response": {"kind": "cat", "lives": {"n": 9}}', '{"kind": "cat", "lives": {"n": 9}}'),
        ('{"response": {"kind": "cat", "lives": {"n": 9}', '{"kind": "cat", "lives": {"n": 9}'),
        ('{"response": {"kind": "dog", "bark": "}"} }', '{"kind": "dog", "bark": "}"}'),
        ('{"response": {"kind": "dog", "bark": "}\\"}', '{"kind": "dog", "bark": "}\\"}'),
    ],
)
async def test_an_answer_cut_at_the_token_limit_keeps_the_text_the_model_sent(
    api: str, streaming: bool, wire: str, value: str
) -> None:
    """At ``finish_reason == "length"`` the wrapper's close may never have come: the value is
    kept up to where its JSON ends, or, cut itself, whole."""
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text=wire, finish_reason="length"))
        async with wire_model(server, api, retry=FAST) as model:
            options = ModelOptions(response_format=response_format(Pet))
            reply, _ = await call(model, streaming, options)
    assert reply.content == value
    assert reply.metadata["finish_reason"] == "length"


# -- the agent: outputs, history, partial instances, the retry, a paused run ------------------


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", MODES)
@pytest.mark.parametrize(
    ("schema", "wire", "value"),
    [
        (Items, WRAPPED_ITEMS, ITEMS),
        (Pet, '{"response": {"kind": "dog", "bark": "woof"}}', '{"kind": "dog", "bark": "woof"}'),
        (Count, '{"response": 42}', "42"),
    ],
    ids=["list", "union", "scalar"],
)
async def test_an_output_schema_without_an_object_root_goes_strict_and_outputs_the_value(
    api: str, streaming: bool, schema: type[BaseModel], wire: str, value: str
) -> None:
    """RunResult.output, output_key and the history the next agent reads hold the value, not
    the wrapper; the schema was accepted strict at the first call."""
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text=wire, fragment=5))
        async with wire_model(server, api, retry=FAST) as model:
            agent = ReActAgent("a", model, output_schema=schema, output_key="out")
            result = await Runner(agent, enable_streaming=streaming).invoke("Go")
        assert result.output == schema.model_validate_json(value)
        assert result.session["out"] == value
        assert result.messages[-1].content == value
        assert len(server.bodies) == 1
        sent = sent_format(server.bodies[0])
        assert sent["strict"] is True and list(sent["schema"]["properties"]) == ["response"]
        assert _strict_problem(sent["schema"], ()) is None


@pytest.mark.parametrize("api", APIS)
async def test_stream_output_reads_the_unwrapped_value_as_it_arrives(api: str) -> None:
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text=WRAPPED_ITEMS, fragment=4))
        async with wire_model(server, api, retry=FAST) as model:
            runner = Runner(ReActAgent("a", model, output_schema=Items), enable_streaming=True)
            seen: list[Items] = []
            async for event in runner.run("Go"):
                if event.output is not None and event.output.stream is not None:
                    seen += [value async for value in stream_output(event.output.stream, Items)]
    # an item validates once whole: the first while the second was still arriving
    assert seen == [Items([Item(name="apple", qty=2)]), Items.model_validate_json(ITEMS)]


class Stock(RootModel[list[Item]]):
    @model_validator(mode="after")
    def no_zero(self) -> Stock:
        if any(item.qty == 0 for item in self.root):
            raise ValueError("a quantity of 0 is no stock")
        return self


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("streaming", MODES)
async def test_a_rejected_answer_is_retried_and_the_model_sees_it_unwrapped(
    api: str, streaming: bool
) -> None:
    rejected = '[{"name": "apple", "qty": 0}]'
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text='{"response": ' + rejected + "}"), Reply(text=WRAPPED_ITEMS))
        async with wire_model(server, api, retry=FAST) as model:
            runner = Runner(ReActAgent("a", model, output_schema=Stock), enable_streaming=streaming)
            notices: list[str] = []
            outputs: list[Any] = []
            async for event in runner.run("Go"):
                if event.output is not None and isinstance(event.output.custom, OutputRejected):
                    notices.append(event.output.custom.problem)
                elif event.output is not None and isinstance(event.output.custom, Stock):
                    outputs.append(event.output.custom)
    assert len(notices) == 1 and "a quantity of 0 is no stock" in notices[0]
    assert outputs == [Stock.model_validate_json(ITEMS)]
    retry = conversation(server.bodies[1])
    assert [m["content"] for m in retry if m.get("role") == "assistant"] == [rejected]
    assert sent_format(server.bodies[1])["strict"] is True


async def test_a_paused_run_keeps_the_value_in_its_checkpoint_and_resumes_with_it(
    tmp_path: Path,
) -> None:
    """The lister's wrapped answer, unwrapped, is what the checkpoint holds and the booker's
    model reads after the resume, in another runner with another model instance."""

    @adk.tool(require_approval=True)
    def order(names: list[str]) -> str:
        """Order the items."""
        return f"ordered {', '.join(names)}"

    def agents(model: OpenAIChatModel) -> adk.SequentialAgent:
        lister = ReActAgent("lister", model, output_schema=Items, output_key="items")
        booker = ReActAgent("booker", model, tools=[order])
        return adk.SequentialAgent("shop", [lister, booker])

    call = Call("order", json.dumps({"names": ["apple", "pear"]}), id="call_1")
    async with OpenAIServer(structured="openai") as server:
        server.script(Reply(text=WRAPPED_ITEMS), Reply(tool_calls=[call]), Reply(text="Done."))
        async with wire_model(server, "chat", retry=FAST) as model:
            paused = await Runner(agents(model), checkpoint_store=sqlite_store(tmp_path)).invoke(
                "Shop"
            )
        assert paused.interrupt is not None
        async with wire_model(server, "chat", retry=FAST) as model:
            runner = Runner(agents(model), checkpoint_store=sqlite_store(tmp_path))
            done = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
    assert done.text == "Done."
    assert done.session["items"] == ITEMS
    after = conversation(server.bodies[-1])  # the booker's call after the resume
    assert after[1]["content"] == f"For context: [lister] said: {ITEMS}."
    assert '"response"' not in json.dumps(after)


async def test_scripted_and_other_models_see_the_schema_as_given_strict() -> None:
    """The wrapping is the OpenAI adapter's: the ``response_format`` other models get holds the
    list schema itself, strict, and their bare list answers are taken as before."""
    model = ScriptedModel([ITEMS])
    result = await Runner(ReActAgent("a", model, output_schema=Items)).invoke("Go")
    assert result.output == Items.model_validate_json(ITEMS)
    options = model.requests[0].options
    assert options is not None and options.response_format == response_format(Items)
    sent = response_format(Items)
    assert sent["strict"] is True and sent["schema"]["type"] == "array"
    assert _strict_problem(sent["schema"], ()) is not None  # OpenAI would refuse it as it is
    assert _strict_problem(wrapped_schema(sent["schema"]), ()) is None
