"""``AgentEvent.to_dict``/``from_dict``: every event shape round-trips through JSON text, the
client-facing format stays as documented, non-JSON data and unread streams are refused clearly."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from conftest import wire_model
from openai_server import OpenAIServer
from openai_server import Reply as WireReply
from pydantic import BaseModel, field_validator

import adk
from adk import (
    AgentAction,
    AgentEvent,
    AgentInput,
    AgentOutput,
    BaseAgent,
    ErrorInfo,
    InterruptInfo,
    InterruptPoint,
    Message,
    MessageChunk,
    MessageStream,
    RunContext,
    Runner,
    ToolCall,
    Usage,
)
from adk._json_where import unwritable_at
from adk.checkpoint import InMemoryCheckpointStore
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent


class Invoice(BaseModel):
    number: str
    cents: int
    tags: list[str] = []


adk.register_type(Invoice, name="tests.event_json.Invoice")


class Approved(BaseModel):
    """An output schema whose validator raises ``adk.ToolError`` (a Pydantic AI port's
    ``ModelRetry``, as docs/pydantic_ai.md has it), which pydantic lets through unwrapped."""

    verdict: str

    @field_validator("verdict")
    @classmethod
    def approved(cls, verdict: str) -> str:
        if verdict == "unheard of":  # what pydantic lets through unwrapped too
            raise TypeError("the verdict must be approved, not a TypeError's")
        if verdict == "unknown":
            raise KeyError("the verdict must be approved, not a KeyError's")
        if verdict != "approved":
            raise adk.ToolError("the verdict must be approved")
        return verdict


adk.register_type(Approved, name="tests.event_json.Approved")


class Reading(BaseModel):
    value: float
    extra: dict[str, Any] = {}


adk.register_type(Reading, name="tests.event_json.Reading")


class Unregistered(BaseModel):
    x: int = 0


def _wire(event: AgentEvent) -> AgentEvent:
    """``event`` through JSON text, as a client receives it; its dict must survive unchanged."""
    data = event.to_dict()
    back = AgentEvent.from_dict(json.loads(json.dumps(data, allow_nan=False)))
    assert back.to_dict() == data
    return back


def _stamped(event: AgentEvent) -> AgentEvent:
    event.agent_name = "clerk"
    event.run_path = ("desk", "clerk")
    return event


_REPLY = Message.assistant(
    "Paying.",
    [ToolCall(id="c1", name="pay", arguments='{"cents": 5}')],
    usage=Usage(input_tokens=10, output_tokens=4, total_tokens=14),
    reasoning="the invoice is due",
)
_REPLY.metadata["response_id"] = "r-1"

_POINTS = InterruptInfo(
    checkpoint_id="cp-1",
    points=[
        InterruptPoint(
            id="agent:clerk/tool:pay#c1",
            address=["agent:clerk", "tool:pay#c1"],
            info={"question": "pay?", "amounts": [1, 2.5], "ok": None},
        ),
        InterruptPoint(
            id="agent:audit", address=["agent:audit"], info=Invoice(number="7", cents=3)
        ),
    ],
)

SHAPES: dict[str, Any] = {
    "assistant message": lambda: AgentEvent.of(_REPLY),
    "user message": lambda: AgentEvent.of(Message.user("hello")),
    "tool result": lambda: AgentEvent.of(Message.tool("paid", tool_call_id="c1", name="pay")),
    "custom dict": lambda: AgentEvent.custom({"step": 2, "of": [1.5, True, None, "x"]}),
    "custom str": lambda: AgentEvent.custom("halfway"),
    "custom false": lambda: AgentEvent.custom(False),
    "custom model": lambda: AgentEvent.custom(Invoice(number="9", cents=100, tags=["a"])),
    "custom Message": lambda: AgentEvent.custom(Message.user("quoted")),
    "custom with role": lambda: AgentEvent(
        output=AgentOutput(custom=[1], role="tool", tool_name="t")
    ),
    "exit": AgentEvent.exit,
    "transfer": lambda: AgentEvent.transfer("billing"),
    "break loop": AgentEvent.break_loop,
    "action custom model": lambda: AgentEvent(
        action=AgentAction(custom=Invoice(number="1", cents=2))
    ),
    "action custom json": lambda: AgentEvent(action=AgentAction(exit=True, custom={"why": "done"})),
    "interrupted": lambda: AgentEvent(action=AgentAction(interrupted=_POINTS)),
    "error": lambda: AgentEvent.from_error(KeyError("missing")),
    "message and action": lambda: AgentEvent(
        output=AgentOutput(message=Message.assistant("bye")), action=AgentAction(exit=True)
    ),
    "empty": AgentEvent,
}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_event_shape_round_trips(shape: str) -> None:
    event = _stamped(SHAPES[shape]())

    back = _wire(event)

    assert back == event  # dataclass equality: every field but the live exception
    assert back.exception is None
    if event.output is not None and isinstance(event.output.custom, BaseModel):
        assert type(back.output.custom) is type(event.output.custom)  # type: ignore[union-attr]


def test_the_format_is_plain_readable_json() -> None:
    """The documented format, exactly: what a browser client is written against."""
    reply = _stamped(AgentEvent.of(_REPLY)).to_dict()
    paused = _stamped(AgentEvent(action=AgentAction(interrupted=_POINTS))).to_dict()
    failed = AgentEvent.from_error(ValueError("")).to_dict()
    model = AgentEvent.custom(Invoice(number="9", cents=1)).to_dict()

    assert reply == {
        "agent_name": "clerk",
        "run_path": ["desk", "clerk"],
        "output": {
            "message": {
                "role": "assistant",
                "content": "Paying.",
                "tool_calls": [{"id": "c1", "name": "pay", "arguments": '{"cents": 5}'}],
                "reasoning": "the invoice is due",
                "usage": {
                    "input_tokens": 10,
                    "output_tokens": 4,
                    "total_tokens": 14,
                    "cached_input_tokens": 0,
                    "reasoning_output_tokens": 0,
                },
                "metadata": {"response_id": "r-1"},
            },
            "role": "assistant",
        },
    }
    assert paused["action"] == {
        "interrupted": {
            "checkpoint_id": "cp-1",
            "points": [
                {
                    "id": "agent:clerk/tool:pay#c1",
                    "address": ["agent:clerk", "tool:pay#c1"],
                    "info": {"question": "pay?", "amounts": [1, 2.5], "ok": None},
                },
                {
                    "id": "agent:audit",
                    "address": ["agent:audit"],
                    "info": {"number": "7", "cents": 3, "tags": []},
                    "info_type": "tests.event_json.Invoice",
                },
            ],
        }
    }
    assert failed == {
        "agent_name": "",
        "run_path": [],
        "error": {"type": "ValueError", "message": "ValueError"},
    }
    assert model["output"] == {
        "custom": {"number": "9", "cents": 1, "tags": []},
        "custom_type": "tests.event_json.Invoice",
    }
    assert "__adk_type__" not in json.dumps([reply, paused, model])  # no internal tags leak


def test_a_dict_that_looks_like_a_checkpoint_tag_is_sent_as_it_is() -> None:
    value = {"__adk_type__": "x", "data": 1}

    event = _wire(AgentEvent.custom(value))

    assert AgentEvent.custom(value).to_dict()["output"] == {"custom": value}
    assert event.output is not None and event.output.custom == value


def test_nested_models_are_sent_as_their_fields_and_come_back_as_data() -> None:
    event = AgentEvent.custom({"invoices": [Invoice(number="1", cents=2)]})

    back = _wire(event)

    assert back.output is not None
    assert back.output.custom == {"invoices": [{"number": "1", "cents": 2, "tags": []}]}


async def test_a_stream_read_to_its_end_is_sent_as_its_joined_message() -> None:
    async def chunks() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="Hel", reasoning="think")
        yield MessageChunk(
            content="lo", usage=Usage(input_tokens=3, output_tokens=2, total_tokens=5)
        )

    event = _stamped(AgentEvent.streaming(MessageStream(chunks())))
    assert event.output is not None and event.output.stream is not None
    pieces = [chunk.content async for chunk in event.output.stream]

    data = event.to_dict()
    back = _wire(event)

    assert pieces == ["Hel", "lo"]
    assert data["output"]["streamed"] is True
    assert data["output"]["message"]["content"] == "Hello"
    assert data["output"]["message"]["usage"]["total_tokens"] == 5
    assert back.output is not None and back.output.stream is not None
    assert back.output.stream.done and back.output.message is None
    assert await back.output.stream.collect() == await event.output.stream.collect()
    assert "".join([c.content async for c in back.output.stream]) == "Hello"


async def test_a_stream_only_shown_says_so_and_comes_back_so() -> None:
    """``"shown_only": true`` beside ``"streamed"`` (an event-driven chat's reply in a streaming
    run: not the agent's answer); JSON written without the key, as before it, reads as an answer."""
    draft = Message(role="assistant", content="Drafting.", metadata={"finish_reason": "stop"})
    shown = _stamped(
        AgentEvent(output=AgentOutput(stream=MessageStream.from_message(draft), shown_only=True))
    )
    answer = _stamped(AgentEvent.streaming(MessageStream.from_message(draft)))

    data = shown.to_dict()
    back = _wire(shown)

    assert data["output"] == {
        "message": {
            "role": "assistant",
            "content": "Drafting.",
            "tool_calls": [],
            "metadata": {"finish_reason": "stop"},
        },
        "streamed": True,
        "shown_only": True,
        "role": "assistant",
    }
    assert back.output is not None and back.output.shown_only
    assert back.output.stream is not None and await back.output.stream.collect() == draft
    assert "shown_only" not in answer.to_dict()["output"]
    before = {key: value for key, value in data["output"].items() if key != "shown_only"}
    old = AgentEvent.from_dict({**data, "output": before})
    assert old.output is not None and old.output.stream is not None
    assert old.output.shown_only is False
    assert AgentEvent.of(draft).output == AgentOutput(message=draft)  # False on every event


def test_only_a_stream_can_be_marked_shown_only() -> None:
    """A message is recorded as it is when yielded (the framework reads the mark on streams
    only); what is not True or False is a mistake, not a truth value."""
    with pytest.raises(ValueError, match=r"shown_only=True\) marks a stream"):
        AgentOutput(message=Message.assistant("hi"), shown_only=True)
    with pytest.raises(ValueError, match=r"shown_only=True\) marks a stream"):
        AgentOutput(custom={"step": 1}, shown_only=True)
    with pytest.raises(TypeError, match="takes True or False, got str 'yes'"):
        AgentOutput(stream=MessageStream.from_message(Message.assistant("hi")), shown_only="yes")  # type: ignore[arg-type]


async def test_an_unread_stream_is_refused_and_left_unread() -> None:
    pulled: list[str] = []

    async def chunks() -> AsyncIterator[MessageChunk]:
        for word in ("a", "b"):
            pulled.append(word)
            yield MessageChunk(content=word)

    stream = MessageStream(chunks())
    event = AgentEvent.streaming(stream)

    with pytest.raises(ValueError, match="stream has not been read to its end"):
        event.to_dict()
    assert pulled == []  # to_dict read nothing behind the readers' backs
    await anext(aiter(stream))
    with pytest.raises(ValueError, match="stream has not been read to its end"):
        event.to_dict()  # half read is not read
    assert pulled == ["a"]

    assert (await stream.collect()).content == "ab"
    assert event.to_dict()["output"]["message"]["content"] == "ab"


async def test_a_failed_stream_is_refused_with_its_error() -> None:
    async def chunks() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="par")
        raise adk.ModelError("HTTP 503: overloaded", status=503)

    stream = MessageStream(chunks())
    with pytest.raises(adk.ModelError):
        await stream.collect()

    with pytest.raises(ValueError, match=r"stream failed \(ModelError: HTTP 503: overloaded\)"):
        AgentEvent.streaming(stream).to_dict()


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_stream_its_run_closed_mid_answer_is_refused_not_sent_as_whole(api: str) -> None:
    """A service that leaves a run mid-answer (a timeout, a client gone) and then sends the
    streaming event it held: the run's end closed the stream, which read as ended, and to_dict
    sent the half answer as a whole streamed message ("streamed": true, no finish reason), which
    a client or relay took for the model's full answer. Readers still see it end where it
    stopped."""
    reply = WireReply(text="The answer is forty-two, as computed.", stall_after=4, delay=5.0)
    async with OpenAIServer([reply]) as server:
        model = wire_model(server, api, name="m", api_key="k")
        async with model:
            runner = Runner(ReActAgent("writer", model), enable_streaming=True)
            held = None
            async with contextlib.aclosing(runner.run("?")) as events:
                async for event in events:
                    if event.output is not None and event.output.stream is not None:
                        held = event
                        await anext(aiter(event.output.stream))  # the first words sent on
                        break
            assert held is not None and held.output is not None
            stream = held.output.stream
            assert stream is not None and stream.done
            with pytest.raises(ValueError, match=r"closed before it ended, after 1 chunk\(s\)"):
                held.to_dict()
            assert len([chunk async for chunk in stream]) == 1  # ends where it stopped
            assert (await stream.collect()).metadata.get("finish_reason") is None


async def test_a_stream_closed_after_its_finish_reason_is_whole() -> None:
    """Closed once the model had sent its finish reason (only its usage, or its source's end,
    was left), the message is whole and is sent, as the adapter keeps such an answer."""

    async def chunks() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="Done.")
        yield MessageChunk(finish_reason="stop")
        yield MessageChunk(usage=Usage(input_tokens=3, output_tokens=2, total_tokens=5))

    stream = MessageStream(chunks())
    reader = aiter(stream)
    assert [(await anext(reader)).content, (await anext(reader)).finish_reason] == ["Done.", "stop"]
    await stream.aclose()
    message = AgentEvent.streaming(stream).to_dict()["output"]["message"]
    assert (message["content"], message["metadata"]) == ("Done.", {"finish_reason": "stop"})


async def test_a_pause_whose_info_json_cannot_hold_names_its_saved_checkpoint() -> None:
    """NaN in an approval request's arguments: the event cannot be sent as JSON, but the pause is
    saved (checkpoints keep NaN) and the error says under which id, so it can be resumed."""

    class Asks(BaseAgent):
        async def run(self, input: AgentInput, ctx: RunContext) -> AsyncIterator[AgentEvent]:
            yield ctx.interrupt({"type": "approval", "arguments": {"threshold": float("nan")}})

    store = InMemoryCheckpointStore()
    result = await Runner(Asks("asks"), checkpoint_store=store).invoke("go")
    assert result.interrupt is not None and result.checkpoint_id is not None
    [paused] = [e for e in result.events if e.interrupted is not None]
    with pytest.raises(TypeError) as caught:
        paused.to_dict()
    assert "info.arguments.threshold: float nan is not a JSON number" in str(caught.value)
    assert f"the pause is saved as checkpoint {result.checkpoint_id!r}" in str(caught.value)
    assert await store.get(result.checkpoint_id) is not None


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (AgentEvent.custom({"a": {"b": {1, 2}}}), "event output.custom.a.b: set is not JSON data"),
        (AgentEvent.custom([object()]), "event output.custom: object is not JSON data"),
        (AgentEvent.custom({"r": float("nan")}), "event output.custom.r: float nan is not a JSON"),
        (AgentEvent.custom({"n": 10**5000}), "event output.custom.n: int longer than 4300 digits"),
        (AgentEvent.custom({1: "x"}), "event output.custom: dict keys must be strings, got 1"),
        (
            AgentEvent.custom({"m": Unregistered()}),
            r"event output.custom.m: Unregistered is not registered; call adk.register_type",
        ),
        (AgentEvent.custom(Unregistered()), "event output.custom: Unregistered is not registered"),
        (
            AgentEvent(action=AgentAction(custom={"at": b"raw"})),
            "event action.custom.at: bytes is not JSON data",
        ),
        (
            AgentEvent(
                action=AgentAction(
                    interrupted=InterruptInfo(
                        points=[InterruptPoint(id="agent:a", address=["agent:a"], info={"s": {1}})]
                    )
                )
            ),
            r"event action.interrupted.points\['agent:a'\].info.s: set is not JSON data",
        ),
        (
            AgentEvent.custom(Reading(value=float("nan"))),
            "event output.custom.value: float nan is not a JSON number",
        ),
        (
            AgentEvent.of(Message(role="assistant", metadata={"what": object()})),
            "event output.message.metadata.what: object cannot be written as JSON",
        ),
        # NaN in Any and dict fields: pydantic's JSON mode sent these as null
        (
            AgentEvent.custom(Reading(value=1.0, extra={"mean": float("nan")})),
            "event output.custom.extra.mean: float nan is not a JSON number",
        ),
        (
            AgentEvent.of(Message(role="assistant", metadata={"p": [float("-inf")]})),
            "event output.message.metadata.p: float -inf is not a JSON number",
        ),
    ],
    ids=lambda value: "" if isinstance(value, str) else None,
)
def test_data_that_is_not_json_is_a_clear_error_naming_the_field(
    event: AgentEvent, error: str
) -> None:
    with pytest.raises(TypeError, match=error):
        event.to_dict()


_LOOP: dict[str, Any] = {}
_LOOP["again"] = _LOOP


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"l": _LOOP}, r"event output.message.metadata.l.again: it holds itself \(a dict"),
        ({"b": b"\xff"}, "event output.message.metadata.b: bytes that are not UTF-8 text"),
        ({"k": {frozenset({1}): 1}}, r"event output.message.metadata.k: dict key frozenset"),
        ({"o": [object()]}, r"event output.message.metadata.o: object cannot be written"),
    ],
    ids=["loop", "bytes", "frozenset-key", "object"],
)
def test_metadata_json_cannot_write_is_a_type_error_naming_where(
    metadata: dict[str, Any], error: str
) -> None:
    """What pydantic itself cannot write in a message's metadata failed with its bare words,
    naming nothing (a ValueError for a loop, a UnicodeDecodeError for bytes, a TypeError for a
    frozenset key or an object of its own, without a path): a TypeError names the place."""
    with pytest.raises(TypeError, match=error) as refused:
        AgentEvent.of(Message(role="assistant", metadata=metadata)).to_dict()
    assert "checkpoint" not in str(refused.value)


@dataclasses.dataclass
class _Blob:
    data: Any


def _nested(levels: int) -> Any:
    value: Any = None
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("metadata", "error"),
    [
        ({"b": _Blob(b"\xff")}, "event output.message.metadata.b.data: bytes that are not UTF-8"),
        ({"d": _nested(300)}, "event output.message.metadata.d: nested deeper than 200 levels"),
    ],
    ids=["dataclass-field", "too-deep"],
)
def test_metadata_json_cannot_write_is_named_inside_a_dataclass_and_when_too_deep(
    metadata: dict[str, Any], error: str
) -> None:
    """The walk an event's JSON shares with checkpoints named a dataclass whole (its bytes'
    field unnamed), and a value nested past what pydantic writes as pydantic's words alone,
    'Circular reference detected (depth exceeded)', naming no place."""
    with pytest.raises(TypeError, match=error):
        AgentEvent.of(Message(role="assistant", metadata=metadata)).to_dict()


def test_a_tool_messages_structured_value_holding_itself_is_dropped_not_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A loop in a tool's structured value (``metadata["structured"]``) was pydantic's
    ValueError, which the drop (on TypeError alone) let out: the event was refused for a value
    beside its text, where one of an object of its own is written as None."""
    from adk.checkpoint import codec

    codec._warned_structured.discard(("looped", "an event's JSON"))
    message = Message(role="tool", content="ok", name="looped", metadata={"structured": _LOOP})
    with caplog.at_level("WARNING", logger="adk.tools"):
        dumped = AgentEvent.of(message).to_dict()["output"]["message"]
    assert dumped["metadata"] == {"structured": None} and dumped["content"] == "ok"
    assert any("'looped'" in r.getMessage() for r in caplog.records), caplog.records


def test_a_dropped_structured_value_is_walked_for_its_warning_alone(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool's structured value a checkpoint or an event's JSON cannot hold is written as None,
    and was walked piece by piece for where it fails at every save of the history holding it
    and every event of it, the place found thrown away (the walk is for an error, and there is
    none): 30,000 items cost a save three times its own dump. Walked once, for the warning."""
    from adk.checkpoint import codec

    walks: list[object] = []

    def counted(value: Any, *rest: Any) -> Any:
        walks.append(value)
        return unwritable_at(value, *rest)

    monkeypatch.setattr(codec, "unwritable_at", counted)
    for where in ("an event's JSON", "a checkpoint"):
        codec._warned_structured.discard(("walked", where))
    rows = [*range(100), {"at": object()}]
    message = Message(role="tool", content="ok", name="walked", metadata={"structured": rows})
    with caplog.at_level("WARNING", logger="adk.tools"):
        for _ in range(3):
            dumped = AgentEvent.of(message).to_dict()["output"]["message"]
            assert dumped["metadata"] == {"structured": None}
            saved = codec.to_json_value({"h": [message]}, "history")
            assert codec.from_json_value(saved)["h"][0].metadata == {"structured": None}
    assert len(walks) == 2, walks  # one a place: the first event, the first save
    said = [r.getMessage() for r in caplog.records if "'walked'" in r.getMessage()]
    assert len(said) == 2 and all("object cannot be" in text for text in said), said
    # Its tool warned of already, what else its metadata holds is still named where it is.
    other = message.model_copy(update={"metadata": {"structured": None, "b": b"\xff"}})
    with pytest.raises(TypeError, match=r"event output\.message\.metadata\.b: bytes that are not"):
        AgentEvent.of(other).to_dict()
    with pytest.raises(codec.CheckpointError, match=r"history\.h\.metadata\.b: bytes that are not"):
        codec.to_json_value({"h": [other]}, "history")


def test_a_tool_value_that_writes_is_dumped_without_a_look_at_the_warnings_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whether a dropped value would be warned of (``warns_of``) matters only on a failure: it
    was asked before every dump of a tool message carrying a value, each of its events and
    each save of a history holding it (one call more per tool message, where nothing fails)."""
    from adk import _event_json
    from adk.checkpoint import codec

    asked: list[str] = []

    def counted(message: Message, where: str) -> bool:
        asked.append(where)
        return True

    monkeypatch.setattr(codec, "warns_of", counted)
    monkeypatch.setattr(_event_json, "warns_of", counted)
    message = Message(role="tool", content="ok", name="t", metadata={"structured": {"n": [1, 2]}})
    assert AgentEvent.of(message).to_dict()["output"]["message"]["metadata"] == {
        "structured": {"n": [1, 2]}
    }
    saved = codec.to_json_value({"h": [message]}, "history")
    assert codec.from_json_value(saved)["h"][0].metadata == {"structured": {"n": [1, 2]}}
    assert asked == []


@pytest.mark.parametrize(
    ("data", "error"),
    [
        ([], "event data: expected an object, got list"),
        ({"agent": "a"}, "event data: unknown field"),
        ({"run_path": "a/b"}, "event run_path: expected a list of str"),
        ({"agent_name": 3}, "event agent_name: expected a str"),
        ({"output": {"text": "hi"}}, "event output: unknown field"),
        ({"output": {"custom": 1, "role": "robot"}}, "event output.role: not a role: 'robot'"),
        (
            {"output": {"custom": 1, "message": {"role": "user"}}},
            "event output: holds one of message or custom",
        ),
        ({"output": {"custom": 1, "streamed": True}}, "event output.streamed"),
        (
            {"output": {"message": {"role": "assistant"}, "shown_only": True}},
            r"event output.shown_only: true \(with a streamed message\) or left out",
        ),
        (
            {"output": {"message": {"role": "assistant"}, "streamed": True, "shown_only": 1}},
            "event output.shown_only",
        ),
        (
            {"output": {"message": {"role": "user"}, "role": "tool"}},
            "event output.role: 'tool' but the message's is 'user'",
        ),
        ({"output": {"message": {"content": "no role"}}}, "event output.message: not a valid"),
        (
            {"output": {"custom": {}, "custom_type": "nowhere.Model"}},
            "event output.custom: type 'nowhere.Model' is not registered",
        ),
        (
            {"output": {"custom": {"number": 1}, "custom_type": "tests.event_json.Invoice"}},
            "event output.custom: not a valid 'tests.event_json.Invoice'",
        ),
        (
            {"output": {"custom": {"verdict": "no"}, "custom_type": "tests.event_json.Approved"}},
            "event output.custom: not a valid 'tests.event_json.Approved': the verdict must be",
        ),
        *(
            (
                {"output": {"custom": {"verdict": v}, "custom_type": "tests.event_json.Approved"}},
                "event output.custom: not a valid 'tests.event_json.Approved': .?the verdict must",
            )
            for v in ("unheard of", "unknown")  # a TypeError, a KeyError (review rv12)
        ),
        ({"action": {"exit": "yes"}}, "event action: exit and break_loop must be true or false"),
        ({"action": {"transfer_to": 5}}, "event action.transfer_to: expected a str"),
        ({"action": {"interrupted": {"points": {}}}}, "event action.interrupted.points: expected"),
        (
            {"action": {"interrupted": {"points": [{"id": "x"}]}}},
            r"event action.interrupted.points\[0\]: not a valid interrupt point",
        ),
        ({"error": {"type": "E"}}, "event error: type and message must be strings"),
    ],
)
def test_from_dict_refuses_what_to_dict_does_not_make(data: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        AgentEvent.from_dict(data)


def test_from_dict_names_a_class_registered_here_under_another_modules_name() -> None:
    # A service that sends events of its own model class (registered under the default name,
    # ``billing.EinoPortInvoice``) to a client that runs its copy of the module as a script
    # (``__main__.EinoPortInvoice``): as a checkpoint does, the refusal names the namesake.
    class Invoice(BaseModel):
        number: int

    Invoice.__module__ = "__main__"
    Invoice.__qualname__ = "EinoPortInvoice"
    adk.register_type(Invoice)
    sent = {"output": {"custom": {"number": 1}, "custom_type": "billing.EinoPortInvoice"}}
    with pytest.raises(ValueError) as refused:
        AgentEvent.from_dict(sent)
    assert str(refused.value).startswith(
        "event output.custom: type 'billing.EinoPortInvoice' is not registered; register it "
        "with adk.register_type before from_dict; a class of that name is registered here as "
        "'__main__.EinoPortInvoice'"
    )
    assert "(name='billing.EinoPortInvoice' reads" in str(refused.value)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ('{"output": {"custom": {"total": NaN}}}', r"event output.custom.total: float nan"),
        ('{"action": {"custom": [Infinity]}}', r"event action.custom: float inf"),
        (
            '{"action": {"interrupted": {"points": [{"id": "p", "address": [], '
            '"info": {"cents": -Infinity}}]}}}',
            r"event action.interrupted.points\[0\].info.cents: float -inf",
        ),
        ('{"output": {"custom": ' + "[" * 300 + "]" * 300 + "}}", "nested deeper than 200"),
        (
            '{"output": {"custom": {"number": NaN}, "custom_type": "tests.event_json.Invoice"}}',
            "event output.custom.number: float nan",
        ),
        (
            '{"output": {"message": {"role": "user"}, "custom_type": "tests.event_json.Invoice"}}',
            "event output.custom_type: without a custom value",
        ),
    ],
    ids=["nan", "infinity", "infinity-in-info", "too-deep", "nan-in-model", "lone-custom-type"],
)
def test_from_dict_refuses_parsed_json_that_is_not_json_data(text: str, error: str) -> None:
    """Python's json.loads (and servers written with it) take NaN and Infinity, and any depth:
    values to_dict refuses, which a relay would only learn of when it sent the event on (or a
    checkpoint holding it failed to save)."""
    with pytest.raises(ValueError, match=error):
        AgentEvent.from_dict(json.loads(text))


@adk.tool(require_approval=True)
def pay(payee: str, cents: int) -> str:
    """Pay someone."""
    return f"paid {cents} to {payee}"


async def test_a_real_runs_events_cross_the_wire_and_its_pause_resumes_from_the_json() -> None:
    """A streamed ReAct run with an approval: every event goes through JSON text, and the resume
    uses the checkpoint id and point id the client read from it."""
    model = ScriptedModel(
        [
            Reply(text="Paying.", tool_calls=[tool_call("pay", {"payee": "ACME", "cents": 5})]),
            "Done.",
        ]
    )
    runner = adk.Runner(ReActAgent("clerk", model, tools=[pay]), enable_streaming=True)

    async def sent(events: AsyncIterator[AgentEvent]) -> list[dict[str, Any]]:
        lines = []
        async for event in events:
            if event.output is not None and event.output.stream is not None:
                async for _ in event.output.stream:
                    pass
            line = json.dumps(event.to_dict())
            back = AgentEvent.from_dict(json.loads(line))
            assert back.agent_name == event.agent_name and back.run_path == event.run_path
            assert back.action == event.action and back.error == event.error
            lines.append(json.loads(line))
        return lines

    first = await sent(runner.run("Pay ACME."))
    paused = first[-1]["action"]["interrupted"]
    [point] = paused["points"]
    second = await sent(runner.resume(paused["checkpoint_id"], {point["id"]: {"approved": True}}))

    assert first[0]["output"]["streamed"] is True
    assert first[0]["output"]["message"]["tool_calls"][0]["name"] == "pay"
    assert point["info"]["tool"] == "pay"
    assert [line["output"].get("tool_name") for line in second] == ["pay", None]
    assert second[-1]["output"]["message"]["content"] == "Done."
    assert second[-1]["run_path"] == ["clerk"]


def test_from_dict_rebuilds_a_registered_info_type() -> None:
    back = _wire(AgentEvent(action=AgentAction(interrupted=_POINTS)))

    assert back.interrupted is not None
    assert back.interrupted.points[1].info == Invoice(number="7", cents=3)
    assert back.interrupted.point_ids == _POINTS.point_ids
    assert back.error is None and ErrorInfo("a", "b") == ErrorInfo("a", "b")


class _Reading(BaseModel):
    """A tool's structured result, not registered: an event's JSON writes it as its fields."""

    site: str
    note: str | None = None


def test_a_structured_models_none_fields_are_in_the_events_json() -> None:
    """A tool message's structured model lost its fields that were None in the event's JSON
    (the message's ``exclude_none`` reached into it): a service's client reading
    ``structured["note"]`` met a KeyError where the tool said None. Plain metadata's Nones
    stay as they were, and so do the message's own fields left out when None."""
    message = Message(role="tool", content="ok", tool_call_id="c1", name="lookup")
    message.metadata.update(structured=_Reading(site="north"), extra={"a": None})
    data = AgentEvent.of(message).to_dict()
    written = data["output"]["message"]
    assert written["metadata"] == {
        "structured": {"site": "north", "note": None},
        "extra": {"a": None},
    }
    assert "reasoning" not in written and "usage" not in written  # the message's own Nones
    back = AgentEvent.from_dict(json.loads(json.dumps(data)))
    assert back.output is not None and back.output.message is not None
    assert back.output.message.metadata["structured"] == {"site": "north", "note": None}
