"""Images, sounds and files in messages (``Message.parts``, ``ToolResult.parts``): what a function
tool returns, what a pause saves and a resume sends on, what an event's JSON, another agent's view
of the history and a span make of them.

The model is the wire server (``tests/openai_server.py``) where what reaches it matters; the
checkpoints are real SQLite files.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import wire_model
from openai_server import Call as WireCall
from openai_server import OpenAIServer
from openai_server import Reply as WireReply
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import ValidationError

import adk.checkpoint.codec as codec
from adk import (
    AgentEvent,
    AgentTool,
    AudioPart,
    CheckpointError,
    FilePart,
    ImagePart,
    Message,
    OpenAIChatModel,
    RunError,
    Runner,
    ToolResult,
    tool,
)
from adk.checkpoint import SQLiteCheckpointStore
from adk.events import AgentOutput
from adk.history import rewrite_message
from adk.testing import Reply, ScriptedModel, tool_call
from adk.tracing import CAPTURE_CONTENT_ENV
from prebuilt import ReActAgent

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
PNG_URL = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg=="


@tool
def screenshot() -> ImagePart:
    """Takes a screenshot of the dashboard."""
    return ImagePart(mime_type="image/png", data=PNG)


@tool
def chart(metric: str) -> list[Any]:
    """Draws a chart of ``metric``."""
    return [f"the {metric} chart:", ImagePart(mime_type="image/png", data=PNG), {"points": 3}]


@tool(require_approval=True)
def deploy(version: str) -> str:
    """Deploys ``version``."""
    return f"deployed {version}"


# -- the types ----------------------------------------------------------------------------------
def test_parts_take_bytes_or_base64_and_refuse_what_they_cannot_be() -> None:
    assert ImagePart(mime_type="image/png", data="iVBORw0KGgo=").data == PNG[:8]
    with pytest.raises(ValidationError, match="must be base64"):
        ImagePart(mime_type="image/png", data="not base64!")
    with pytest.raises(ValidationError, match=r"image/\.\.\. type"):
        ImagePart(mime_type="text/plain", data=b"x")
    with pytest.raises(ValidationError, match=r"audio/\.\.\. type"):
        AudioPart(mime_type="image/png", data=b"x")
    with pytest.raises(ValidationError, match="needs its data or a uri"):
        FilePart(mime_type="application/pdf")
    # the repr gives the size, not megabytes of bytes in a log line
    assert "data=<12 bytes>" in repr(ImagePart(mime_type="image/png", data=b"x" * 12))


def test_a_message_and_a_tool_result_print_parts_only_when_they_hold_some() -> None:
    """One helper (``adk.messages._shown_args``) leaves ``parts=()`` out of both reprs, which
    were two copies of the same loop."""
    image = ImagePart(mime_type="image/png", data=PNG)
    for plain, holding in (
        (Message.user("hi"), Message.user("look", parts=[image])),
        (ToolResult(content="hi"), ToolResult(content="look", parts=(image,))),
    ):
        assert "parts" not in repr(plain) and "content='hi'" in repr(plain)
        assert "parts=(ImagePart(type='image', mime_type='image/png', data=<" in repr(holding)


def test_a_message_without_parts_dumps_and_prints_as_before() -> None:
    message = Message.user("hi")
    assert "parts" not in message.model_dump()
    assert "parts" not in repr(message)
    with_parts = Message.user("look", parts=[ImagePart(mime_type="image/png", data=PNG)])
    dumped = with_parts.model_dump(mode="json")
    assert dumped["parts"] == [
        {"type": "image", "mime_type": "image/png", "data": "iVBORw0KGgoAAAANSUhEUg=="}
    ]
    assert Message.model_validate(dumped) == with_parts


# -- function tools -----------------------------------------------------------------------------
async def test_a_function_tool_returns_an_image_alone_or_in_a_list() -> None:
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[tool_call("screenshot", {}), tool_call("chart", {"metric": "sales"})]
            ),
            Reply(text="looked"),
        ]
    )
    async with Runner(ReActAgent("ops", model, tools=[screenshot, chart])) as runner:
        result = await runner.invoke("look")
    seen = model.requests[1].messages
    shot, drawn = (m for m in seen if m.role == "tool")
    assert shot.content == "[image: image/png]"
    assert shot.parts == (ImagePart(mime_type="image/png", data=PNG),)
    assert drawn.content == 'the sales chart:\n[image: image/png]\n{"points":3}'
    assert drawn.parts == (ImagePart(mime_type="image/png", data=PNG),)
    assert result.text == "looked"


# -- pause and resume ---------------------------------------------------------------------------
def _service(store: SQLiteCheckpointStore, base_url: str) -> Runner:
    agent = ReActAgent("ops", wire_model(base_url, parts="send"), tools=[screenshot, deploy])
    return Runner(agent, checkpoint_store=store)


async def test_an_image_in_the_history_survives_a_pause_and_reaches_the_model_on_resume(
    tmp_path: Path,
) -> None:
    calls = [WireCall("screenshot", "{}", "c1"), WireCall("deploy", '{"version": "2"}', "c2")]
    script = [WireReply(tool_calls=calls), WireReply(text="deployed, dashboard fine")]
    db = tmp_path / "c.db"
    async with OpenAIServer(script) as server:
        async with SQLiteCheckpointStore(db) as store, _service(store, server.base_url) as runner:
            paused = await runner.invoke("deploy 2 and check the dashboard")
        assert paused.checkpoint_id is not None
        async with SQLiteCheckpointStore(db) as store, _service(store, server.base_url) as runner:
            done = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
        sent = server.requests[1].body["messages"]
    assert done.text == "deployed, dashboard fine"
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert sent[-1]["content"] == [
        {"type": "text", "text": "Attached by tool call c1 (screenshot):"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
    ]


async def test_a_part_over_the_checkpoint_limit_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(codec, "MAX_PART_BYTES", len(PNG) - 1)
    calls = [WireCall("screenshot", "{}", "c1"), WireCall("deploy", '{"version": "2"}', "c2")]
    async with (
        OpenAIServer([WireReply(tool_calls=calls)]) as server,
        SQLiteCheckpointStore(tmp_path / "c.db") as store,
        _service(store, server.base_url) as runner,
    ):
        # The run fails naming the part and the limit (its events kept on the error), and
        # no row of tens of megabytes is written.
        with pytest.raises(RunError, match=r"image of 16 bytes .* MAX_PART_BYTES") as failed:
            await runner.invoke("deploy 2 and check the dashboard")
        assert isinstance(failed.value.__cause__, CheckpointError)
        assert [c async for c in store.ids()] == []


async def test_a_checkpoint_holding_a_part_over_the_limit_is_refused_on_load_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A checkpoint no pyadk of this limit writes (a hostile one: a huge base64 string under a
    # matching checksum, or one saved under a bigger limit) is refused before its part is
    # decoded: nothing runs, nothing reaches the model, and the checkpoint stays.
    calls = [WireCall("screenshot", "{}", "c1"), WireCall("deploy", '{"version": "2"}', "c2")]
    db = tmp_path / "c.db"
    async with OpenAIServer([WireReply(tool_calls=calls)]) as server:
        async with SQLiteCheckpointStore(db) as store, _service(store, server.base_url) as runner:
            paused = await runner.invoke("deploy 2 and check the dashboard")
            assert paused.checkpoint_id is not None
            kept = await store.get(paused.checkpoint_id)
        monkeypatch.setattr(codec, "MAX_PART_BYTES", len(PNG) - 1)
        async with SQLiteCheckpointStore(db) as store, _service(store, server.base_url) as runner:
            with pytest.raises(CheckpointError) as refused:
                await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
            assert await store.get(paused.checkpoint_id) == kept
        assert len(server.requests) == 1
    assert re.search(r"\(image\) holds 16 bytes, over MAX_PART_BYTES \(15\)", str(refused.value))


def test_a_checkpoint_holds_parts_whole_and_reads_them_back() -> None:
    message = Message.tool(
        "[image: image/png]\n[resource: s3://b/r.pdf (application/pdf)]",
        tool_call_id="c1",
        name="report",
        parts=[
            ImagePart(mime_type="image/png", data=PNG),
            FilePart(mime_type="application/pdf", uri="s3://b/r.pdf", name="r.pdf"),
        ],
    )
    body = {"history": codec.to_json_value([message, Message.user("plain")])}
    read = codec.decode_checkpoint(codec.encode_checkpoint(body))
    stored = read["history"][0]["data"]["parts"]
    assert stored[0] == {"type": "image", "mime_type": "image/png", "data": PNG_URL[22:]}
    assert "parts" not in read["history"][1]["data"]  # a message without parts: as before
    assert codec.from_json_value(read["history"]) == [message, Message.user("plain")]


# -- events, other agents, spans ----------------------------------------------------------------
def test_an_events_json_carries_its_messages_parts() -> None:
    message = Message.tool(
        "[audio: audio/wav]",
        tool_call_id="c1",
        name="listen",
        parts=[AudioPart(mime_type="audio/wav", data=b"RIFF")],
    )
    event = AgentEvent(agent_name="ops", output=AgentOutput(message=message))
    data = json.loads(json.dumps(event.to_dict()))
    assert data["output"]["message"]["parts"] == [
        {"type": "audio", "mime_type": "audio/wav", "data": "UklGRg=="}
    ]
    assert AgentEvent.from_dict(data).output.message == message  # type: ignore[union-attr]
    plain = AgentEvent(agent_name="ops", output=AgentOutput(message=Message.assistant("hi")))
    assert "parts" not in plain.to_dict()["output"]["message"]


def test_another_agents_tool_result_is_shown_with_its_placeholders_only() -> None:
    message = Message.tool(
        "[image: image/png]",
        tool_call_id="c1",
        name="screenshot",
        parts=[ImagePart(mime_type="image/png", data=PNG)],
    )
    rewritten = rewrite_message("ops", message)
    assert rewritten.parts == ()
    assert "[image: image/png]" in rewritten.content


async def test_a_span_records_a_parts_kind_and_type_never_its_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([Reply(tool_calls=[tool_call("screenshot", {})]), Reply(text="ok")])
    agent = ReActAgent("ops", model, tools=[screenshot])
    async with Runner(agent, tracer_provider=provider) as runner:
        await runner.invoke("look")
    inputs = [
        json.loads(str(span.attributes["gen_ai.input.messages"]))
        for span in exporter.get_finished_spans()
        if span.attributes and "gen_ai.input.messages" in span.attributes
    ]
    (result,) = [m for messages in inputs for m in messages if m["role"] == "tool"]
    assert result["parts"][1:] == [{"type": "blob", "modality": "image", "mime_type": "image/png"}]
    everything = json.dumps([dict(s.attributes or {}) for s in exporter.get_finished_spans()])
    assert "iVBORw0KGgo" not in everything and "data:image" not in everything


def test_a_tool_result_without_parts_dumps_as_before() -> None:
    assert ToolResult(content="x").model_dump() == {
        "content": "x",
        "is_error": False,
        "structured": None,
    }


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_users_parts_go_in_its_content_and_what_the_api_cannot_take_as_text(
    api: str,
) -> None:
    question = Message.user(
        "what is wrong here?",
        parts=[
            ImagePart(mime_type="image/png", data=PNG),
            AudioPart(mime_type="audio/ogg", data=b"OggS"),  # neither API takes ogg
            FilePart(mime_type="application/pdf", uri="s3://bucket/report.pdf"),  # not on the web
            FilePart(mime_type="text/csv", data=b"a,b\n", name="rows.csv"),  # Chat: PDF only
            FilePart(mime_type="application/pdf", data=b"%PDF", name="r.pdf"),
            ImagePart(mime_type="image/svg+xml", data=b"<svg/>"),  # PNG, JPEG, WebP, GIF only
        ],
    )
    async with OpenAIServer([WireReply(text="a gap")]) as server:
        model = wire_model(server, api, parts="send")
        async with Runner(ReActAgent("ops", model)) as runner:
            result = await runner.invoke(question)
        body = server.requests[0].body
    assert result.text == "a gap"
    csv = "data:text/csv;base64,YSxiCg=="
    pdf = "data:application/pdf;base64,JVBERg=="
    if api == "chat":
        (sent,) = body["messages"]
        assert sent["content"] == [
            {"type": "text", "text": "what is wrong here?"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
            {"type": "text", "text": "[audio: audio/ogg]"},
            {"type": "text", "text": "[resource: s3://bucket/report.pdf (application/pdf)]"},
            {"type": "text", "text": "[file: rows.csv (text/csv)]"},
            {"type": "file", "file": {"file_data": pdf, "filename": "r.pdf"}},
            {"type": "text", "text": "[image: image/svg+xml]"},
        ]
    else:
        (sent,) = body["input"]
        assert sent["content"] == [
            {"type": "input_text", "text": "what is wrong here?"},
            {"type": "input_image", "image_url": PNG_URL},
            {"type": "input_text", "text": "[audio: audio/ogg]"},
            {"type": "input_text", "text": "[resource: s3://bucket/report.pdf (application/pdf)]"},
            {"type": "input_file", "file_data": csv, "filename": "rows.csv"},
            {"type": "input_file", "file_data": pdf, "filename": "r.pdf"},
            {"type": "input_text", "text": "[image: image/svg+xml]"},
        ]


def test_a_tool_result_without_parts_prints_as_before() -> None:
    assert (
        repr(ToolResult(content="x")) == "ToolResult(content='x', is_error=False, structured=None)"
    )
    shown = repr(ToolResult(content="x", parts=[ImagePart(mime_type="image/png", data=PNG)]))
    assert "parts=(ImagePart(type='image', mime_type='image/png', data=<16 bytes>),)" in shown


# -- a text-only server: parts="text" -----------------------------------------------------------
_MEDIA_TYPES = {"image_url", "input_audio", "file", "input_image", "input_file"}


def _types(value: Any) -> set[str]:
    """Every ``type`` a request body's objects name, however deep."""
    if isinstance(value, dict):
        found = {value["type"]} if isinstance(value.get("type"), str) else set()
        for item in value.values():
            found |= _types(item)
        return found
    if isinstance(value, list):
        return set().union(*(_types(item) for item in value))
    return set()


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("parts", [None, "text"])
async def test_a_text_only_server_is_sent_each_part_as_its_placeholder_in_every_call(
    api: str, parts: str | None
) -> None:
    """A server serving a model without vision (vLLM, llama.cpp, Ollama) refuses a request holding
    an image content part, and each later call of the run too, the part staying in the history.
    With ``parts="text"``, and by default on a server other than OpenAI's, no content part of a
    medium is sent on either API: a user's parts become placeholders in its text, and a tool's
    result is its text, which holds its placeholders, as before parts were sent at all."""
    question = Message.user(
        "what is wrong here?",
        parts=[
            ImagePart(mime_type="image/png", data=PNG),
            AudioPart(mime_type="audio/wav", data=b"RIFF"),
            FilePart(mime_type="application/pdf", data=b"%PDF", name="r.pdf"),
        ],
    )
    script = [
        WireReply(tool_calls=[WireCall("chart", '{"metric": "sales"}', "c1")]),
        WireReply(text="a gap"),
    ]
    options = {} if parts is None else {"parts": parts}
    async with OpenAIServer(script) as server:
        model = wire_model(server, api, **options)
        assert model.parts == "text"
        async with Runner(ReActAgent("ops", model, tools=[chart])) as runner:
            result = await runner.invoke(question)
        first, second = server.bodies
    assert result.text == "a gap"
    for body in (first, second):
        assert not _types(body) & _MEDIA_TYPES
        assert ";base64," not in json.dumps(body)  # no part's bytes, in any form
    asked = "what is wrong here?\n[image: image/png]\n[audio: audio/wav]\n[file: r.pdf (application/pdf)]"
    drawn = 'the sales chart:\n[image: image/png]\n{"points":3}'
    if api == "chat":
        assert first["messages"] == [{"role": "user", "content": asked}]
        sent = second["messages"]
        assert [m["role"] for m in sent] == [
            "user",
            "assistant",
            "tool",
        ]  # no user message of parts
        assert sent[0] == {"role": "user", "content": asked}
        assert sent[2] == {"role": "tool", "tool_call_id": "c1", "content": drawn}
    else:
        assert first["input"] == [{"role": "user", "content": asked}]
        sent = second["input"]
        assert sent[0] == {"role": "user", "content": asked}
        (output,) = [item for item in sent if item.get("type") == "function_call_output"]
        assert output == {"type": "function_call_output", "call_id": "c1", "output": drawn}


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_parts_as_text_add_the_placeholders_a_text_lacks_and_only_those(api: str) -> None:
    """A tool's own ``ToolResult(content, parts=...)`` need not name its parts in its text: the
    placeholders it lacks are added, one per part (two images, two placeholders), and one it holds
    is not sent twice."""
    image = ImagePart(mime_type="image/png", data=PNG)
    history = [
        Message.user(""),
        Message.assistant("", [tool_call("snap", {}, id="c1"), tool_call("snap", {}, id="c2")]),
        Message.tool("two shots", tool_call_id="c1", name="snap", parts=[image, image]),
        Message.tool(
            "[image: image/png] and", tool_call_id="c2", name="snap", parts=[image, image]
        ),
    ]
    async with OpenAIServer([WireReply(text="ok")]) as server:
        async with wire_model(server, api, parts="text") as model:
            assert (await model.generate(history)).content == "ok"
        (body,) = server.bodies
    twice = "two shots\n[image: image/png]\n[image: image/png]"
    once_more = "[image: image/png] and\n[image: image/png]"
    if api == "chat":
        sent = body["messages"]
        assert sent[0] == {"role": "user", "content": ""}
        assert [m["content"] for m in sent[2:]] == [twice, once_more]
    else:
        sent = body["input"]
        outputs = [i["output"] for i in sent if i.get("type") == "function_call_output"]
        assert outputs == [twice, once_more]
    assert not _types(body) & _MEDIA_TYPES


def test_parts_are_sent_by_default_to_openai_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIChatModel("gpt-4o", api_key="sk-test").parts == "send"
    official = OpenAIChatModel("gpt-4o", base_url="https://api.openai.com/v1", api_key="sk-t")
    assert official.parts == "send"
    assert OpenAIChatModel("qwen", base_url="http://localhost:8000").parts == "text"
    vision = OpenAIChatModel("qwen-vl", base_url="http://localhost:8000", parts="send")
    assert vision.parts == "send"
    assert OpenAIChatModel("o3-mini", api_key="sk-test", parts="text").parts == "text"
    with pytest.raises(ValueError, match=r"parts must be 'send'.*not 'image'"):
        OpenAIChatModel("qwen", base_url="http://localhost:8000", parts="image")  # type: ignore[arg-type]


# -- AgentTool ----------------------------------------------------------------------------------
def _charts(model: Any) -> ReActAgent:
    """An agent that draws charts: ``chart``'s result, returned directly, is its answer."""
    return ReActAgent(
        "charts",
        model,
        tools=[screenshot, chart, deploy],
        return_directly=["chart"],
        description="Draws charts of the figures.",
    )


def _charts_caller(
    store: SQLiteCheckpointStore, inner_script: list[Any], outer_script: list[Any]
) -> tuple[Runner, ScriptedModel, ScriptedModel]:
    """A runner of an agent that calls the charts agent (``AgentTool``), and the two models."""
    inner_model, outer_model = ScriptedModel(inner_script), ScriptedModel(outer_script)
    outer = ReActAgent("ops", outer_model, tools=[AgentTool(_charts(inner_model))])
    return Runner(outer, checkpoint_store=store), inner_model, outer_model


async def test_an_agent_tool_paused_inside_keeps_its_parts_and_answers_with_its_charts(
    tmp_path: Path,
) -> None:
    """The inner agent took a screenshot and asked to deploy (a pause inside the tool); resumed
    from the SQLite checkpoint in another runner, its model reads the screenshot its saved
    history kept, and the chart it returns directly reaches the calling model as an image,
    because the result was the chart's text alone."""
    ask = tool_call("charts", {"request": "deploy 2, then chart sales"}, id="o1")
    inner_calls = [tool_call("screenshot", {}, id="i1"), tool_call("deploy", {"version": "2"})]
    db = tmp_path / "c.db"
    async with SQLiteCheckpointStore(db) as store:
        runner, _, _ = _charts_caller(
            store, [Reply(tool_calls=inner_calls)], [Reply(tool_calls=[ask])]
        )
        async with runner:
            paused = await runner.invoke("deploy 2 and show me sales")
    assert paused.checkpoint_id is not None

    drawn = Reply(tool_calls=[tool_call("chart", {"metric": "sales"}, id="i3")])
    async with SQLiteCheckpointStore(db) as store:
        runner, inner_model, outer_model = _charts_caller(
            store, [drawn], ["Deployed; here is the chart."]
        )
        async with runner:
            done = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
    assert done.text == "Deployed; here is the chart."
    shot = next(m for m in inner_model.requests[0].messages if m.tool_call_id == "i1")
    assert shot.parts == (ImagePart(mime_type="image/png", data=PNG),)
    (request,) = outer_model.requests
    answer = request.messages[-1]
    assert (answer.tool_call_id, answer.content) == (
        "o1",
        'the sales chart:\n[image: image/png]\n{"points":3}',
    )
    assert answer.parts == (ImagePart(mime_type="image/png", data=PNG),)


async def test_an_agent_tool_paused_with_a_part_over_the_limit_fails_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The nested run's history is saved with the call's pause, held to ``MAX_PART_BYTES`` as
    the run's own: the run fails naming the part, and nothing is saved."""
    monkeypatch.setattr(codec, "MAX_PART_BYTES", len(PNG) - 1)
    ask = tool_call("charts", {"request": "deploy 2"}, id="o1")
    inner_calls = [tool_call("screenshot", {}, id="i1"), tool_call("deploy", {"version": "2"})]
    async with SQLiteCheckpointStore(tmp_path / "c.db") as store:
        runner, _, _ = _charts_caller(
            store, [Reply(tool_calls=inner_calls)], [Reply(tool_calls=[ask])]
        )
        async with runner:
            with pytest.raises(RunError, match=r"image of 16 bytes .* MAX_PART_BYTES"):
                await runner.invoke("deploy 2")
        assert [c async for c in store.ids()] == []


async def test_an_agent_tools_chart_reaches_the_wire_and_survives_the_callers_pause(
    tmp_path: Path,
) -> None:
    """End to end: the calling model (the wire server, parts sent) called the charts agent and
    asked to deploy in one round; the deploy paused the run. Resumed from SQLite in another
    runner, the chart the agent answered with is in the request, attached under its call."""
    inner = ScriptedModel([Reply(tool_calls=[tool_call("chart", {"metric": "sales"})])])
    calls = [
        WireCall("charts", '{"request": "chart sales"}', "c1"),
        WireCall("deploy", '{"version": "2"}', "c2"),
    ]
    script = [WireReply(tool_calls=calls), WireReply(text="deployed; sales are up")]
    db = tmp_path / "c.db"

    def service(store: SQLiteCheckpointStore, base_url: str) -> Runner:
        model = wire_model(base_url, parts="send")
        agent = ReActAgent("ops", model, tools=[AgentTool(_charts(inner)), deploy])
        return Runner(agent, checkpoint_store=store)

    async with OpenAIServer(script) as server:
        async with SQLiteCheckpointStore(db) as store, service(store, server.base_url) as runner:
            paused = await runner.invoke("chart sales and deploy 2")
        assert paused.checkpoint_id is not None
        async with SQLiteCheckpointStore(db) as store, service(store, server.base_url) as runner:
            done = await runner.invoke_resume(paused.checkpoint_id, {"approved": True})
        sent = server.requests[1].body["messages"]
    assert done.text == "deployed; sales are up"
    assert len(inner.requests) == 1  # the charts call was not made again on resume
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert sent[2] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": 'the sales chart:\n[image: image/png]\n{"points":3}',
    }
    assert sent[-1]["content"] == [
        {"type": "text", "text": "Attached by tool call c1 (charts):"},
        {"type": "image_url", "image_url": {"url": PNG_URL}},
    ]


# -- the adapter: which servers are sent parts, and how a part's type is read ------------------
@pytest.mark.parametrize("region", ["eu", "us", "jp"])
async def test_parts_are_sent_by_default_to_openais_regional_endpoints(
    region: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OpenAI's data-residency endpoints (``https://eu.api.openai.com/v1``, which the openai
    client's own ``data_residency="eu"`` selects) are OpenAI itself, whose models read images:
    they were taken for another server, and an image reached a vision model as its placeholder
    only (and max_tokens went as the field OpenAI's reasoning models refuse)."""
    import openai

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    url = f"https://{region}.api.openai.com/v1"
    by_url = OpenAIChatModel("gpt-4o", base_url=url, api_key="sk-test")
    # a client made ready (the openai client's data_residency= makes this URL; openai>=2 need
    # not have it)
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=url)
    by_client = OpenAIChatModel("gpt-4o", client=client)
    for model in (by_url, by_client):
        assert model.base_url == url
        assert model.parts == "send"
        assert model._max_tokens_field == "max_completion_tokens"
        await model.aclose()
    await client.close()
    # a host that only ends like OpenAI's is another server
    other = OpenAIChatModel("m", base_url="https://notapi.openai.com.example/v1", api_key="sk")
    assert other.parts == "text"
    lookalike = OpenAIChatModel("m", base_url="https://evilapi.openai.com/v1", api_key="sk")
    assert lookalike.parts == "text"


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_parts_mime_type_is_read_as_a_type_and_sent_in_its_plain_form(api: str) -> None:
    """A MIME type is case-insensitive and may carry parameters (RFC 2045), and ``image/jpg`` is
    a common misspelling of ``image/jpeg``: each reaches the API as the type it names, in the
    plain form servers check a ``data:`` URL against (OpenAI answers 'unsupported MIME type', and
    servers behind OpenAI-compatible endpoints refuse ``image/jpg``). The URL carried the type
    as given (``data:image/png; charset=binary;base64,...``), an image typed ``IMAGE/PNG``
    (which an MCP server's image block becomes a ``FilePart`` of) went to Responses as a file
    and to Chat as its placeholder, a PDF typed ``Application/PDF`` or a wav with a ``rate``
    parameter as text on Chat."""
    jpeg = b"\xff\xd8\xff\xe0"
    question = Message.user(
        "look",
        parts=[
            ImagePart(mime_type="image/png; charset=binary", data=PNG),
            ImagePart(mime_type="image/jpg", data=jpeg),
            ImagePart(mime_type="image/PNG", data=PNG),
            FilePart(mime_type="IMAGE/PNG", data=PNG),
            FilePart(mime_type="IMAGE/PNG", uri="https://example.com/c.png"),
            FilePart(mime_type="Application/PDF", data=b"%PDF", name="r.pdf"),
            AudioPart(mime_type="audio/wav; rate=16000", data=b"RIFF"),
        ],
    )
    async with OpenAIServer([WireReply(text="seen")]) as server:
        async with wire_model(server, api, parts="send") as model:
            assert (await model.generate([question])).content == "seen"
        (body,) = server.bodies
    jpeg_url = "data:image/jpeg;base64,/9j/4A=="
    pdf = "data:application/pdf;base64,JVBERg=="
    if api == "chat":
        assert body["messages"][0]["content"] == [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
            {"type": "image_url", "image_url": {"url": jpeg_url}},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
            {"type": "image_url", "image_url": {"url": PNG_URL}},
            {"type": "image_url", "image_url": {"url": "https://example.com/c.png"}},
            {"type": "file", "file": {"file_data": pdf, "filename": "r.pdf"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        ]
    else:
        assert body["input"][0]["content"] == [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": PNG_URL},
            {"type": "input_image", "image_url": jpeg_url},
            {"type": "input_image", "image_url": PNG_URL},
            {"type": "input_image", "image_url": PNG_URL},
            {"type": "input_image", "image_url": "https://example.com/c.png"},
            {"type": "input_file", "file_data": pdf, "filename": "r.pdf"},
            {"type": "input_text", "text": "[audio: audio/wav; rate=16000]"},
        ]


async def test_responses_is_sent_as_files_only_the_types_its_input_file_takes() -> None:
    """Responses' ``input_file`` takes the types OpenAI's file-inputs guide lists (PDFs, text and
    code, rich documents, presentations, spreadsheets); another, such as the
    ``application/octet-stream`` an MCP server's blob of no stated type is, an archive or a video,
    is refused with the whole request, and with every later call of the run, the part staying in
    its history. Those go as their placeholder text, as on Chat Completions, which takes PDFs
    only; the types the guide lists still go as files, by bytes or by URL."""
    docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    question = Message.user(
        "read these",
        parts=[
            FilePart(mime_type="application/octet-stream", data=b"\x00\x01", uri="file:///x.bin"),
            FilePart(mime_type="application/zip", data=b"PK", name="a.zip"),
            FilePart(mime_type="video/mp4", uri="https://example.com/v.mp4"),
            FilePart(mime_type="text/markdown", data=b"# a", name="a.md"),
            FilePart(mime_type=docx, data=b"PK", name="a.docx"),
            FilePart(mime_type="application/json", uri="https://example.com/a.json"),
        ],
    )
    async with OpenAIServer([WireReply(text="read")]) as server:
        async with wire_model(server, "responses", parts="send") as model:
            assert (await model.generate([question])).content == "read"
        (body,) = server.bodies
    assert body["input"][0]["content"] == [
        {"type": "input_text", "text": "read these"},
        {"type": "input_text", "text": "[resource: file:///x.bin (application/octet-stream)]"},
        {"type": "input_text", "text": "[file: a.zip (application/zip)]"},
        {"type": "input_text", "text": "[resource: https://example.com/v.mp4 (video/mp4)]"},
        {"type": "input_file", "file_data": "data:text/markdown;base64,IyBh", "filename": "a.md"},
        {"type": "input_file", "file_data": f"data:{docx};base64,UEs=", "filename": "a.docx"},
        {"type": "input_file", "file_url": "https://example.com/a.json"},
    ]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_parts_set_after_the_model_is_made_is_what_its_next_call_sends(api: str) -> None:
    """``model.parts = "text"`` (a server found to take text only, after the model was made)
    changes what the next call sends, and a value that is not one is refused as the constructor
    refuses it: ``parts`` was read once, into a private flag, and the assignment changed the
    attribute alone (the next call still sent the image)."""
    question = Message.user("What is this?", parts=[ImagePart(mime_type="image/png", data=PNG)])
    async with OpenAIServer([WireReply(text="ok"), WireReply(text="ok")]) as server:
        async with wire_model(server, api, parts="send") as model:
            await model.generate([question])
            model.parts = "text"
            await model.generate([question])
            with pytest.raises(ValueError, match=r"parts must be 'send'.*not 'image'"):
                model.parts = "image"  # type: ignore[assignment]
            assert model.parts == "text"
        sent, as_text = server.bodies
    assert _types(sent) & _MEDIA_TYPES
    assert not _types(as_text) & _MEDIA_TYPES


async def test_parts_set_to_none_after_the_model_is_made_is_the_default_as_at_its_making() -> None:
    """``parts=None`` is the constructor's default ('send' to api.openai.com, 'text' elsewhere);
    set later, it was refused by a message that named None among the values it takes ("... or
    None (the default ...), not None"). It restores the default the model was made with."""
    question = Message.user("What is this?", parts=[ImagePart(mime_type="image/png", data=PNG)])
    async with OpenAIServer([WireReply(text="ok")]) as server:
        async with wire_model(server, "chat", parts="send") as model:
            model.parts = None
            assert model.parts == "text"  # a server not OpenAI's: its default
            await model.generate([question])
        [as_text] = server.bodies
    assert not _types(as_text) & _MEDIA_TYPES
    official = OpenAIChatModel("m", api_key="k", parts="text")
    official.parts = None
    assert official.parts == "send"
    await official.aclose()
