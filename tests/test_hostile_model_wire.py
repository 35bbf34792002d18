"""A server speaking the OpenAI wire protocol badly, to ``OpenAIChatModel`` over real HTTP.

``tests/openai_server.py`` sends what a broken server, proxy or gateway sends with a 200: stream
events that are not JSON, not UTF-8, nested past what a parser reads, chunks whose ``choices``
is not a list, tool-call fragments with holes in their index or arguments split inside a UTF-8
character, an unknown finish reason, a body cut mid-event, an HTML page; bodies of the same
kinds when the answer is not streamed. Whatever comes, the model raises ``ModelError`` naming
the call and what was wrong (or reads what it sensibly can: the unknown finish reason, the
character split over two events), never an error of the SDK's parsing or of the adapter's own
reading (``TypeError``, ``AttributeError``, ``UnicodeDecodeError``, ``RecursionError``); an agent
whose model fails so ends its run with an error event; nothing hangs.

Found so far: ``UnicodeDecodeError`` and ``RecursionError`` from the SDK's parsing came out of
``generate`` and ``stream`` as they were; a completion whose ``choices`` is not a list (``5``,
``"x"``, ``[5]``) raised ``TypeError`` / ``AttributeError`` from ``generate``, and a stream
chunk's ``choices`` of ``5`` raised ``TypeError`` from the stream decoder.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import hypothesis.strategies as st
import pytest
from conftest import wire_model
from hypothesis import HealthCheck, given, settings
from openai_server import OpenAIServer, Reply

from adk import Runner, tool
from adk.messages import Message, join_chunks
from adk.models import ModelError, RetryPolicy
from prebuilt import ReActAgent

ONCE = RetryPolicy(max_attempts=1)
GUARD = 30.0  # seconds: a hang fails the test instead of the suite's timeout


@pytest.fixture
async def server() -> AsyncIterator[OpenAIServer]:
    async with OpenAIServer() as srv:
        yield srv


def chunk(delta: dict[str, Any], finish: Any = None, **extra: Any) -> str:
    body = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


DONE = "data: [DONE]\n\n"
NESTED = "[" * 100_000 + "]" * 100_000


def call_fragment(index: Any, **fields: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, **fields}]}


async def stream_of(server: OpenAIServer, events: list[str | bytes], api: str = "chat") -> Message:
    server.script(Reply(events=events))
    async with wire_model(server, api, retry=ONCE, timeout=GUARD) as model:
        chunks = [c async for c in model.stream([Message.user("hi")])]
    return join_chunks(chunks)


# -- streams --------------------------------------------------------------------------------------

FAILING_STREAMS: dict[str, tuple[list[str | bytes], str]] = {
    "not JSON": (["data: {not json\n\n", DONE], "not valid JSON"),
    "invalid UTF-8": (
        [b'data: {"choices":[{"index":0,"delta":{"content":"\xff\xfe"}}]}\n\n', DONE],
        r"not valid UTF-8",
    ),
    "nested past the parser": ([f"data: {NESTED}\n\n", DONE], "nested too deeply"),
    "choices a number": (['data: {"choices":5}\n\n', DONE], "choices is not a list: 5"),
    "choices an object": (
        ['data: {"choices":{"index":0}}\n\n', DONE],
        r"choices is not a list: \{'index': 0\}",
    ),
    "no choices at all": (['data: {"id":"c"}\n\n', DONE], r"\[DONE\] without an answer"),
    "only [DONE]": ([DONE], r"\[DONE\] without an answer"),
    "no choices nor [DONE]": (['data: {"id":"c"}\n\n'], "ended before the model finished"),
    "nothing": ([], "ended before the model finished"),
    "an HTML page": (["<html><body>log in</body></html>"], "ended before the model finished"),
    "cut mid-event": (
        [chunk({"content": "hi"}), chunk({}, "stop")[:25]],
        "mid-stream after 1 chunk.*ended before the model finished",
    ),
    # (with [DONE] after it, the answer is whole: test_openai_model.py's
    # test_a_stream_ended_by_done_without_a_finish_reason_is_finished)
    "no finish reason nor [DONE]": ([chunk({"content": "hi"})], "ended before the model finished"),
    "an error event": (['data: {"error": {"message": "overloaded"}}\n\n'], "overloaded"),
    # Hugging Face's TGI: the error as text (the SDK's own message says only "An error
    # occurred during streaming"; the text was left out)
    "an error event as text": (
        ['data: {"error": "Input validation error: too long", "error_type": "validation"}\n\n'],
        "occurred during streaming: Input validation error: too long",
    ),
}


@pytest.mark.parametrize("case", sorted(FAILING_STREAMS))
async def test_a_broken_stream_is_a_model_error_naming_the_call(
    server: OpenAIServer, case: str
) -> None:
    events, says = FAILING_STREAMS[case]
    with pytest.raises(ModelError, match=rf"chat.completions call to .*'test-model'.*{says}"):
        await asyncio.wait_for(stream_of(server, events), GUARD)


@pytest.mark.parametrize(
    ("events", "answer"),
    [
        ([chunk({"role": "assistant", "content": ""}), DONE], ""),
        ([chunk({"role": "assistant", "content": ""}), chunk({}), DONE], ""),
        ([DONE], None),
        (['data: {"id":"c","choices":[]}\n\n', DONE], None),
    ],
    ids=["opener then [DONE]", "opener, empty delta, [DONE]", "only [DONE]", "no choice"],
)
async def test_a_stream_ended_by_done_before_any_chunk_is_not_asked_again(
    server: OpenAIServer, events: list[str], answer: str | None
) -> None:
    """A Chat stream the server ended with ``[DONE]`` before anything reached the caller was
    retried as one cut short: the prompt sent (and billed) again, for the same empty answer.
    Begun as an answer (a chunk with a choice: the role opener), it is a whole answer that said
    nothing, finished ``stop``, as an answer ended by ``[DONE]`` after a chunk is; with no choice
    at all, it is no answer, a ``ModelError`` as a completion without choices is, not retried."""
    server.script(*[Reply(events=events)] * 3)
    retry = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.01, jitter=False)
    async with wire_model(server, "chat", retry=retry, timeout=GUARD) as model:
        if answer is None:
            with pytest.raises(ModelError, match=r"\[DONE\] without an answer"):
                await asyncio.wait_for(collect_of(model), GUARD)
        else:
            message = join_chunks(await asyncio.wait_for(collect_of(model), GUARD))
            assert message.content == answer and message.tool_calls == []
            assert message.metadata["finish_reason"] == "stop"
            assert message.metadata["response_id"] == "c"
    assert len(server.requests) == 1


async def collect_of(model: Any) -> list[Any]:
    return [c async for c in model.stream([Message.user("hi")])]


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("event", ["invalid UTF-8", "nested past the parser"])
async def test_an_unreadable_stream_event_is_a_model_error_in_either_api(
    server: OpenAIServer, api: str, event: str
) -> None:
    """Read by the SDK before either protocol's decoder sees it; mid-way too."""
    bad, says = {
        "invalid UTF-8": (b'data: {"type": "\xff"}\n\n', "not valid UTF-8"),
        "nested past the parser": (f"data: {NESTED}\n\n", "nested too deeply"),
    }[event]
    endpoint = "chat.completions" if api == "chat" else "responses"
    async with wire_model(server, api, retry=ONCE, timeout=GUARD) as model:
        for at in (0, 3):  # before the first chunk (retried if transient: it is not), mid-way
            server.script(Reply(events=[*_answer_events(api)[:at], bad]))
            with pytest.raises(ModelError, match=rf"{endpoint} call to .*{says}"):
                await asyncio.wait_for(
                    join_chunks([c async for c in model.stream([Message.user("hi")])]), GUARD
                )


def _answer_events(api: str) -> list[str]:
    if api == "chat":
        return [chunk({"role": "assistant", "content": ""})] + [
            chunk({"content": piece}) for piece in ("a ", "long ", "answer")
        ]
    return [
        f"data: {json.dumps({'type': 'response.output_text.delta', 'delta': piece})}\n\n"
        for piece in ("a ", "long ", "answer", "!")
    ]


async def test_a_tool_call_whose_arguments_split_inside_a_character_is_joined(
    server: OpenAIServer,
) -> None:
    """A multi-byte character split over two events (each event whole JSON) and over two
    chunks of one event's bytes: the arguments come out whole."""
    text = json.dumps({"city": "Zürich", "note": "日本"}, ensure_ascii=False)
    cut = text.index("ü") + 1  # between the two fragments: each is valid text on its own
    event = chunk({"content": "é"}).encode()
    split = event.index("é".encode()) + 1  # inside the character's two bytes
    message = await stream_of(
        server,
        [
            event[:split],
            event[split:],
            chunk(call_fragment(0, id="c1", type="function", function={"name": "f"})),
            chunk(call_fragment(0, function={"arguments": text[:cut]})),
            chunk(call_fragment(0, function={"arguments": text[cut:]})),
            chunk({}, "tool_calls"),
            DONE,
        ],
    )
    assert message.content == "é"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        ("c1", "f", {"city": "Zürich", "note": "日本"})
    ]


async def test_tool_call_fragments_with_a_hole_in_their_index_stay_apart(
    server: OpenAIServer,
) -> None:
    """Indexes 0 and 5 (1 to 4 never sent): two calls, in arrival order, neither lost."""
    message = await stream_of(
        server,
        [
            chunk(call_fragment(0, id="a", type="function", function={"name": "f"})),
            chunk(call_fragment(5, id="b", type="function", function={"name": "g"})),
            chunk(call_fragment(0, function={"arguments": '{"x": 1}'})),
            chunk(call_fragment(5, function={"arguments": '{"y": 2}'})),
            chunk({}, "tool_calls"),
            DONE,
        ],
    )
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        ("a", "f", '{"x": 1}'),
        ("b", "g", '{"y": 2}'),
    ]


def _head(index: int | None, call_id: str, name: str, arguments: str = "") -> dict[str, Any]:
    at = {} if index is None else {"index": index}
    return {
        **at,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


# Tool-call fragments carrying ids, interleaved: which call each belongs to (by its wire index
# when it has one of its own, else by its id), as the decoder reads them.
ID_SHAPES: dict[str, list[list[dict[str, Any]]]] = {
    # llama.cpp repeating id and name in every fragment, two calls at indices 0 and 1 given one
    # id: they were merged, both arguments run together
    "one id at two indices, repeated": [
        [_head(0, "dup", "f")],
        [_head(1, "dup", "g")],
        [_head(0, "dup", "f", '{"x": 1}')],
        [_head(1, "dup", "g", '{"y": 2}')],
    ],
    # Ollama numbering every call 0: an id seen before names its call again
    "a known id back at a shared index": [
        [_head(0, "a", "f")],
        [_head(0, "b", "g")],
        [_head(0, "a", "f", '{"x": 1}')],
        [_head(0, "b", "g", '{"y": 2}')],
    ],
    # no index: two heads in one delta, then each continued alone (at the first's place) by id
    "no index, continued by id": [
        [_head(None, "a", "f"), _head(None, "b", "g")],
        [_head(None, "b", "g", '{"y": 2}')],
        [_head(None, "a", "f", '{"x": 1}')],
    ],
}


@pytest.mark.parametrize("shape", sorted(ID_SHAPES))
async def test_interleaved_fragments_with_ids_find_their_calls(
    server: OpenAIServer, shape: str
) -> None:
    deltas = ID_SHAPES[shape]
    events: list[str | bytes] = [chunk({"tool_calls": delta}) for delta in deltas]
    message = await stream_of(server, [*events, chunk({}, "tool_calls"), DONE])
    first_id = "dup" if shape.startswith("one id") else "a"
    second_id = "dup" if shape.startswith("one id") else "b"
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        (first_id, "f", '{"x": 1}'),
        (second_id, "g", '{"y": 2}'),
    ]


async def test_an_unknown_finish_reason_is_kept_as_it_came(server: OpenAIServer) -> None:
    message = await stream_of(server, [chunk({"content": "hi"}), chunk({}, "banana"), DONE])
    assert message.content == "hi"
    assert message.metadata["finish_reason"] == "banana"


async def test_an_endless_stream_of_empty_chunks_ends_with_its_reader(
    server: OpenAIServer,
) -> None:
    """A server stuck sending chunks that carry nothing: ``timeout`` bounds each wait for the
    server, not the call (docs/models.md), so the run waits as long as its reader does. Cancelled
    (here after a while), it ends at once and lets the connection go."""
    empty = 'data: {"id":"c","object":"chat.completion.chunk","choices":[]}\n\n'
    server.script(Reply(events=[], endless=empty))
    async with wire_model(server, retry=ONCE, timeout=GUARD) as model:
        runner = Runner(ReActAgent("r", model=model), enable_streaming=True)
        invoked = asyncio.ensure_future(runner.invoke("hi"))
        for _ in range(1000):
            if server.requests:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the server is sending
        invoked.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(invoked, GUARD)
    for _ in range(500):
        if not server.open_connections:
            break
        await asyncio.sleep(0.01)
    assert server.open_connections == 0, "the connection was kept"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_token_counts_negative_or_past_64_bits_are_kept_as_the_server_reports_them(
    server: OpenAIServer, stream: bool
) -> None:
    """docs/security.md: pyadk bounds nothing by a server's token counts, so it keeps them as
    they came, a negative count and one past 64 bits too, summed into the run's usage: the run
    ends with its answer, and a service billing by them sees what the server said."""
    server.script(Reply(text="one", usage=(-5, 2**70)), Reply(text="two", usage=(2**70, -7)))
    async with wire_model(server, retry=ONCE, timeout=GUARD) as model:
        runner = Runner(ReActAgent("r", model=model), enable_streaming=stream)
        first = await runner.invoke("hi")
        second = await runner.invoke("again")
    assert (first.text, second.text) == ("one", "two")
    assert first.usage is not None and second.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens) == (-5, 2**70)
    assert (second.usage.input_tokens, second.usage.output_tokens) == (2**70, -7)
    assert first.usage.total_tokens == 2**70 - 5


# -- whole answers ------------------------------------------------------------------------------

COMPLETION = {
    "id": "x",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
    ],
}

FAILING_BODIES: dict[str, tuple[bytes, str]] = {
    "choices a number": (json.dumps({**COMPLETION, "choices": 5}).encode(), "choices"),
    "choices a string": (json.dumps({**COMPLETION, "choices": "x"}).encode(), "choices"),
    "a choice a number": (json.dumps({**COMPLETION, "choices": [5]}).encode(), "choice"),
    "a choice's message a string": (
        json.dumps({**COMPLETION, "choices": [{"index": 0, "message": "hi"}]}).encode(),
        "message",
    ),
    "invalid UTF-8": (
        json.dumps(COMPLETION).encode().replace(b'"hi"', b'"\xff"'),
        "not valid UTF-8",
    ),
    "nested past the parser": (NESTED.encode(), "nested too deeply"),
    "empty": (b"", "not valid JSON"),
    # an error as text in a 200 answer (TGI's shape): the text was left out
    "an error as text": (
        json.dumps({"error": "Model is overloaded", "error_type": "overloaded"}).encode(),
        "answered with an error: Model is overloaded",
    ),
}


@pytest.mark.parametrize("case", sorted(FAILING_BODIES))
async def test_a_broken_answer_is_a_model_error_naming_the_call(
    server: OpenAIServer, case: str
) -> None:
    body, says = FAILING_BODIES[case]
    server.script(Reply(raw=body))
    async with wire_model(server, retry=ONCE, timeout=GUARD) as model:
        with pytest.raises(ModelError, match=rf"chat.completions call to .*'test-model'.*{says}"):
            await asyncio.wait_for(model.generate([Message.user("hi")]), GUARD)


@pytest.mark.parametrize("case", ["invalid UTF-8", "nested past the parser"])
async def test_an_unreadable_responses_answer_is_a_model_error(
    server: OpenAIServer, case: str
) -> None:
    body, says = FAILING_BODIES[case]
    server.script(Reply(raw=body))
    async with wire_model(server, "responses", retry=ONCE, timeout=GUARD) as model:
        with pytest.raises(ModelError, match=rf"responses call to .*{says}"):
            await asyncio.wait_for(model.generate([Message.user("hi")]), GUARD)


# -- random streams through a run ---------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
_deltas = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["assistant", None, 5]),
        "content": st.text(max_size=6) | _json,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {},
                optional={
                    "index": st.integers(-1, 6) | _json,
                    "id": st.sampled_from(["a", "b", None]) | _json,
                    "function": st.fixed_dictionaries(
                        {},
                        optional={
                            "name": st.sampled_from(["work", "nope", ""]) | _json,
                            "arguments": st.sampled_from(['{"', 'tag": "x"}', "{}", "é"]) | _json,
                        },
                    )
                    | _json,
                },
            )
            | _json,
            max_size=2,
        )
        | _json,
        "refusal": _json,
    },
)
_events = st.one_of(
    st.builds(chunk, _deltas, st.sampled_from([None, "stop", "tool_calls", "length", "x", 7])),
    st.builds(
        lambda choices: f"data: {json.dumps({'choices': choices})}\n\n",
        _json,
    ),
    st.sampled_from([DONE, "data: {oops\n\n", ": keep-alive\n\n", "event: error\ndata: {}\n\n"]),
    st.binary(max_size=12).map(lambda raw: b"data: " + raw + b"\n\n"),
)


@settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(events=st.lists(_events, max_size=8), cut=st.booleans())
def test_any_stream_ends_the_run_with_an_answer_or_one_model_error(
    events: list[str | bytes], cut: bool
) -> None:
    """Random chunks (wrong types anywhere, holes in indexes, junk events), the body ended
    cleanly or dropped after them: a ``ReActAgent`` run over it ends, with its answer or one error
    event that is a ``ModelError`` (a tool the model named wrong is the model's error to read, not
    the run's)."""
    asyncio.run(_random_stream(events, cut))


async def _random_stream(events: list[str | bytes], cut: bool) -> None:
    async with OpenAIServer() as server:
        server.script(
            Reply(events=events, break_after=len(events) if cut else None),
            Reply(text="done"),  # the turn after a tool call, if the stream made one
            Reply(text="done"),
        )
        ran: list[str] = []

        async def work(tag: str = "") -> str:
            """Work."""
            ran.append(tag)
            return "ok"

        async with wire_model(server, retry=ONCE, timeout=GUARD) as model:
            runner = Runner(
                ReActAgent("r", model=model, tools=[tool(work)], max_iterations=3),
                enable_streaming=True,
            )
            seen = await asyncio.wait_for(_events_of(runner), GUARD)
    errors = [e.error for e in seen if e.error is not None]
    assert len(errors) <= 1 and (not errors or seen[-1].error is errors[0]), errors
    if errors:
        assert errors[0].type == "ModelError", errors[0]
        assert "chat.completions call to" in errors[0].message, errors[0]


async def _events_of(runner: Runner) -> list[Any]:
    seen = []
    async for event in runner.run("hi"):
        stream = event.output.stream if event.output is not None else None
        if stream is not None:
            with contextlib.suppress(ModelError):  # the run's error event says it
                await stream.collect()
        seen.append(event)
    return seen


# -- Responses streams --------------------------------------------------------------------------


def event(kind: str, **fields: Any) -> str:
    return f"data: {json.dumps({'type': kind, **fields})}\n\n"


async def test_responses_events_of_the_wrong_shape_are_read_as_far_as_they_go(
    server: OpenAIServer,
) -> None:
    """A refusal's indexes that are not numbers, a final response whose ``output`` and a
    message's ``content`` are not lists: the answer is what the well-formed events said."""
    message = await stream_of(
        server,
        [
            event("response.output_text.delta", delta="hi", output_index=0, content_index=0),
            event("response.refusal.delta", delta="no", output_index=[1], content_index={"a": 1}),
            event("response.refusal.done", refusal="no!", output_index=[1], content_index=[0]),
            event(
                "response.completed",
                response={"id": "r", "status": "completed", "output": True, "model": "m"},
            ),
        ],
        api="responses",
    )
    assert message.content == "hi"
    assert message.metadata["refusal"] == "no!"
    server.script(
        Reply(
            events=[
                event(
                    "response.completed",
                    response={
                        "status": "completed",
                        "output": [{"type": "message", "content": 5}, {"type": "reasoning"}],
                    },
                )
            ]
        )
    )
    async with wire_model(server, "responses", retry=ONCE, timeout=GUARD) as model:
        chunks = [c async for c in model.stream([Message.user("hi")])]
    assert join_chunks(chunks).content == ""


_kinds = st.sampled_from(
    [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.function_call_arguments.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.reasoning_text.delta",
        "response.refusal.delta",
        "response.refusal.done",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
    ]
)
_items = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["function_call", "message", "reasoning"]) | _json,
        "id": st.sampled_from(["i1", "i2"]) | _json,
        "call_id": _json,
        "name": _json,
        "arguments": st.just('{"a": 1}') | _json,
        "content": _json,
    },
)
_responses_events = st.builds(
    lambda kind, fields: event(kind, **fields),
    _kinds,
    st.fixed_dictionaries(
        {},
        optional={
            "item": _items | _json,
            "response": st.fixed_dictionaries(
                {},
                optional={
                    "status": st.sampled_from(["completed", "failed", "incomplete"]) | _json,
                    "output": st.lists(_items | _json, max_size=2) | _json,
                    "usage": _json,
                    "error": _json,
                },
            )
            | _json,
            "output_index": _json,
            "content_index": _json,
            "item_id": _json,
            "delta": _json,
            "text": _json,
            "refusal": _json,
            "code": _json,
            "message": _json,
        },
    ),
)


@settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=100,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(events=st.lists(_responses_events, min_size=1, max_size=6))
def test_any_responses_stream_is_an_answer_or_a_model_error(events: list[str]) -> None:
    asyncio.run(_responses_stream(events))


async def _responses_stream(events: list[str]) -> None:
    async with OpenAIServer() as server:
        try:
            await asyncio.wait_for(stream_of(server, list(events), api="responses"), GUARD)
        except ModelError as exc:
            assert "responses call to" in str(exc), exc


@pytest.mark.parametrize(
    "tool_calls",
    [{"index": 0, "id": "a"}, "abc", [5, "x", None, [1]], [True, False, 1.5]],
    ids=["an object", "a string", "items that are no calls", "booleans and a float"],
)
async def test_tool_calls_that_are_no_calls_make_none(
    server: OpenAIServer, tool_calls: Any
) -> None:
    """As a whole answer's are read: an object's keys or a string's characters are no calls
    (each became a call of no name and no id the model never made)."""
    message = await stream_of(
        server, [chunk({"content": "hi", "tool_calls": tool_calls}), chunk({}, "stop"), DONE]
    )
    assert message.content == "hi"
    assert message.tool_calls == []
    completion = {
        **COMPLETION,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hi", "tool_calls": tool_calls},
                "finish_reason": "stop",
            }
        ],
    }
    server.script(Reply(raw=json.dumps(completion).encode()))
    async with wire_model(server, retry=ONCE, timeout=GUARD) as model:
        whole = await model.generate([Message.user("hi")])
    assert (whole.content, whole.tool_calls) == ("hi", [])


@pytest.mark.parametrize("status", ["in_progress", "queued", "cancelled"])
async def test_an_unfinished_responses_answer_is_a_model_error_naming_its_status(
    server: OpenAIServer, status: str
) -> None:
    """A non-streamed Responses answer still ``in_progress`` or ``queued`` (a background
    response's first answer, as a server or proxy that sets ``background`` sends it), or one
    ``cancelled``, was taken as a finished, empty answer: a run ended with no text and no error.
    It is refused, naming the status, and not asked again (each ask starts another)."""
    body = {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": "m",
        "status": status,
        "output": [],
        "background": True,
    }
    server.script(Reply(raw=json.dumps(body).encode()), Reply(text="asked again"))
    retry = RetryPolicy(max_attempts=2, initial_delay=0.001, jitter=False)
    async with wire_model(server, "responses", retry=retry, timeout=GUARD) as model:
        with pytest.raises(ModelError, match=rf"responses call to .*status '{status}'"):
            await asyncio.wait_for(model.generate([Message.user("hi")]), GUARD)
    assert len(server.requests) == 1
