"""``prebuilt.stream_output``: the structured answer read while it streams, as successive partial
instances of the output schema (pydantic-ai's ``result.stream_output()``), over ``ScriptedModel``
and over a real OpenAI wire server (tests/openai_server.py), with either API."""

from __future__ import annotations

import datetime
import enum
import itertools
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import wire_model
from openai_server import OpenAIServer, Reply
from pydantic import BaseModel, ConfigDict, RootModel, ValidationInfo, field_validator
from pydantic_core import from_json, to_json

from adk import MessageChunk, Runner
from adk.models import RetryPolicy
from adk.testing import ScriptedModel
from prebuilt import OutputRejected, ReActAgent, stream_output
from prebuilt._partial_json import PartialJSON


class Forecast(BaseModel):
    city: str
    summary: str = ""
    days: list[int] = []


class Cities(RootModel[list[Forecast]]):
    pass


ANSWER = '{"city": "Oslo", "summary": "cold and dry", "days": [3, 4, 5]}'


async def partials(runner: Runner, schema: type[BaseModel]) -> list[list[BaseModel]]:
    """Per streamed reply, what ``stream_output`` yielded; the validated answer last."""
    seen: list[list[BaseModel]] = []
    async for event in runner.run("Forecast?"):
        output = event.output
        if output is not None and output.stream is not None:
            seen.append([value async for value in stream_output(output.stream, schema)])
    return seen


async def test_a_streamed_answer_is_read_as_growing_instances_of_the_schema() -> None:
    model = ScriptedModel([ANSWER], chunk_size=6)
    runner = Runner(ReActAgent("f", model, output_schema=Forecast), enable_streaming=True)
    [seen] = await partials(runner, Forecast)
    assert len(seen) > 3  # while it streamed, not once at the end
    assert seen[0] == Forecast(city="Os")  # a string still arriving counts as far as it came
    assert seen[-1] == Forecast(city="Oslo", summary="cold and dry", days=[3, 4, 5])
    assert len(set(map(repr, seen))) == len(seen)  # each one differs from the one before
    summaries = [value.summary for value in seen if isinstance(value, Forecast)]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(summaries))


async def test_a_list_schema_yields_once_each_item_validates_and_fences_are_skipped() -> None:
    text = '```json\n[{"city": "Oslo"}, {"city": "Bergen", "days": [1]}]\n```'
    model = ScriptedModel([text], chunk_size=5)
    runner = Runner(ReActAgent("f", model, output_schema=Cities), enable_streaming=True)
    [seen] = await partials(runner, Cities)
    assert seen[-1] == Cities([Forecast(city="Oslo"), Forecast(city="Bergen", days=[1])])
    assert all(isinstance(value, Cities) for value in seen)


async def test_a_fenced_block_after_some_words_is_read_while_it_streams() -> None:
    """Only an opening fence at the start was skipped: an answer that says a few words first,
    which the agent takes (its first fenced block), yielded nothing while it streamed."""
    text = f"Here is the forecast you asked for.\n```json\n{ANSWER}\n```\nStay warm!"
    model = ScriptedModel([text], chunk_size=6)
    runner = Runner(ReActAgent("f", model, output_schema=Forecast), enable_streaming=True)
    seen: list[list[BaseModel]] = []
    customs = []
    async for event in runner.run("Forecast?"):
        output = event.output
        if output is not None and output.stream is not None:
            seen.append([value async for value in stream_output(output.stream, Forecast)])
        elif output is not None and output.custom is not None:
            customs.append(output.custom)
    [partial] = seen
    assert len(partial) > 3 and "Oslo".startswith(partial[0].city)  # while it streamed
    assert partial[-1] == customs[-1] == Forecast.model_validate_json(ANSWER)


async def test_text_that_is_not_json_yields_nothing_and_a_retry_streams_anew() -> None:
    model = ScriptedModel(["Sorry, no idea.", ANSWER], chunk_size=4)
    runner = Runner(ReActAgent("f", model, output_schema=Forecast), enable_streaming=True)
    rejected = []
    seen: list[list[BaseModel]] = []
    async for event in runner.run("Forecast?"):
        output = event.output
        if output is not None and output.stream is not None:
            seen.append([value async for value in stream_output(output.stream, Forecast)])
        elif output is not None and isinstance(output.custom, OutputRejected):
            rejected.append(output.custom.schema_name)
    assert seen[0] == [] and rejected == ["Forecast"]
    assert seen[1][-1] == Forecast(city="Oslo", summary="cold and dry", days=[3, 4, 5])


async def test_it_reads_any_iterable_of_chunks_and_refuses_what_is_not_a_schema() -> None:
    async def chunks() -> AsyncIterator[MessageChunk]:
        for piece in ('{"ci', 'ty": "Ri', 'ga"}'):
            yield MessageChunk(content=piece)

    assert [f.city async for f in stream_output(chunks(), Forecast)] == ["Ri", "Riga"]
    with pytest.raises(TypeError, match="a pydantic model class"):
        stream_output(chunks(), dict)  # type: ignore[arg-type]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_an_openai_stream_is_read_as_it_arrives(api: str) -> None:
    fast = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.01, jitter=False)
    server = OpenAIServer([Reply(text=ANSWER, fragment=7)], structured="openai")
    async with (
        server,
        wire_model(server, api, retry=fast) as model,
    ):
        agent = ReActAgent("f", model, output_schema=Forecast)
        [seen] = await partials(Runner(agent, enable_streaming=True), Forecast)
    assert len(seen) > 3
    assert seen[-1] == Forecast(city="Oslo", summary="cold and dry", days=[3, 4, 5])


class Checked(BaseModel):
    city: str

    @field_validator("city")
    @classmethod
    def known(cls, city: str, info: ValidationInfo) -> str:
        if not any(name.startswith(city) for name in info.context["cities"]):
            raise ValueError(f"unknown city {city}")
        return city


async def test_a_schema_whose_validators_read_the_run_options_gets_them_as_context() -> None:
    """The agent validates with its run options as the context: partials of a schema whose
    validators read it need it too, or every chunk fails on a context of None."""
    options = {"cities": ["Oslo"]}
    model = ScriptedModel(['{"city": "Oslo"}'], chunk_size=4)
    runner = Runner(ReActAgent("f", model, output_schema=Checked), enable_streaming=True)
    seen: list[str] = []
    async for event in runner.run("Where?", options=options):
        if event.output is not None and event.output.stream is not None:
            seen += [c.city async for c in stream_output(event.output.stream, Checked, options)]
    assert seen == ["Os", "Oslo"]


class Sky(enum.Enum):
    clear = "clear"
    cloudy = "cloudy"


class StrictForecast(BaseModel):
    model_config = ConfigDict(strict=True)
    sky: Sky
    day: datetime.date
    summary: str = ""


async def test_a_strict_schema_is_read_as_the_agent_reads_it_from_json() -> None:
    """A strict schema takes an Enum's value and a date's ISO text from JSON, as the agent's
    validation of the whole answer does; validated as Python objects, the partials were refused
    every one, and nothing was shown while the answer streamed."""
    text = '{"sky": "clear", "day": "2024-01-02", "summary": "sunny all day"}'
    model = ScriptedModel([text], chunk_size=6)
    runner = Runner(ReActAgent("f", model, output_schema=StrictForecast), enable_streaming=True)
    [seen] = await partials(runner, StrictForecast)
    assert len(seen) > 2
    assert seen[-1] == StrictForecast(
        sky=Sky.clear, day=datetime.date(2024, 1, 2), summary="sunny all day"
    )


async def _reparsed(chunks: list[str], schema: type[BaseModel]) -> list[BaseModel]:
    """What ``stream_output`` yielded when it parsed the whole answer again after every chunk
    (kept here as the reference the incremental reading must agree with): the answer as JSON,
    else, as the agent reads it whole, the first fenced block in it."""
    text, last, seen = "", None, []
    for piece in chunks:
        if not piece:
            continue
        text += piece
        try:
            partial = from_json(text, allow_partial="trailing-strings")
        except ValueError:
            fence = re.search(r"```[A-Za-z0-9_-]*[ \t]*\n", text)
            if fence is None:
                continue
            try:
                partial = from_json(text[fence.end() :], allow_partial="trailing-strings")
            except ValueError:
                continue
        try:
            value = schema.model_validate_json(to_json(partial))
        except ValueError:
            continue
        if value != last:
            last = value
            seen.append(value)
    return seen


async def _streamed(chunks: list[str], schema: type[BaseModel]) -> list[BaseModel]:
    async def source() -> AsyncIterator[MessageChunk]:
        for piece in chunks:
            yield MessageChunk(content=piece)

    return [value async for value in stream_output(source(), schema)]


STREAMED = [
    (Forecast, ANSWER),
    (Forecast, '  \n```json\n{"city": "Bergen \\u00e9\\ud83d\\ude00", "days": [1, 22, 333]}\n```'),
    (Forecast, '```\n{"city": "x"}'),
    (Forecast, '``json {"city": "x"}'),
    # A fenced block after words, as the agent takes it whole; inline backticks before it.
    (Forecast, 'Here it is:\n```json\n{"city": "Oslo", "days": [1, 22]}\n```\nEnjoy.'),
    (Forecast, 'Fences (``` or ```py) first:\n```\n{"city": "Bergen"}\n```'),
    (Forecast, 'Broken: ```json\n{"city" 1}\n```\n```json\n{"city": "x"}\n```'),
    (Forecast, '{"city": "Oslo", "days": [1, 2.5]}'),  # 2.5 is no int: the list stops there
    (Forecast, '{"city": "Oslo" "days": [1]}'),  # malformed: the parse stops after "Oslo"
    (Cities, '[{"city": "Oslo"}, {"city": "Bergen", "days": [1]}]'),
    (StrictForecast, '{"sky": "clear", "day": "2024-01-02", "summary": "sunny all day"}'),
]


@pytest.mark.parametrize(("schema", "text"), STREAMED)
async def test_read_chunk_by_chunk_it_yields_what_reparsing_every_chunk_yielded(
    schema: type[BaseModel], text: str
) -> None:
    for size in (1, 2, 3, 5, 8, len(text)):
        chunks = [text[i : i + size] for i in range(0, len(text), size)]
        chunks.insert(1, "")  # a chunk without text (a usage chunk) changes nothing
        assert await _streamed(chunks, schema) == await _reparsed(chunks, schema), size


async def test_a_long_answer_is_scanned_once_and_validated_once_per_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Parsing the whole answer after every chunk cost the square of its length: here 3,000
    chunks of 4 characters, 18 million characters parsed (three times over: parsed, serialised,
    validated). Each character is read once now; what is left per chunk is validating the
    instance it may yield, once, and only when the completed text changed."""
    parsers: list[PartialJSON] = []

    class Counted(PartialJSON):
        def __init__(self) -> None:
            super().__init__()
            parsers.append(self)

    validated: list[int] = []

    class Long(BaseModel):
        summary: str
        days: list[int] = []

        @classmethod
        def model_validate_json(cls, json_data: Any, **kwargs: Any) -> Any:
            validated.append(len(json_data))
            return super().model_validate_json(json_data, **kwargs)

    monkeypatch.setattr("prebuilt._output.PartialJSON", Counted)
    text = '{"summary": "' + "cold and dry " * 900 + '", "days": [' + "1, " * 80 + "2]}"
    chunks = [text[i : i + 4] for i in range(0, len(text), 4)]
    seen = await _streamed(chunks, Long)
    [parser] = parsers
    assert parser.scanned <= len(text) + 4 * len(chunks)  # a number cut by a chunk: read again
    assert len(validated) <= len(chunks)
    assert seen[-1] == Long.model_validate_json(text)
    # Chunks that leave the completed text as it was are not validated: a key still arriving.
    assert len(validated) < len(chunks)
