"""Messages, chunks, ``MessageStream`` (many readers, replay, collect, joining, failures) and the
output/event value types."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from pydantic import ValidationError

from adk import (
    AgentEvent,
    AgentOutput,
    Message,
    MessageChunk,
    MessageStream,
    ModelError,
    Role,
    ToolCall,
    ToolCallChunk,
    Usage,
)
from adk.messages import join_chunks
from adk.testing import simplify_events

# -- messages ---------------------------------------------------------------------------------


def test_message_constructors_fill_the_openai_shape() -> None:
    system = Message.system("be brief")
    user = Message.user("hi")
    call = ToolCall(id="c1", name="add", arguments='{"a": 1}')
    assistant = Message.assistant("let me add", [call])
    tool = Message.tool("3", tool_call_id="c1", name="add")

    assert (system.role, system.content) == (Role.SYSTEM, "be brief")
    assert (user.role, user.content, user.tool_calls) == (Role.USER, "hi", [])
    assert assistant.role == Role.ASSISTANT and assistant.tool_calls == [call]
    assert (tool.role, tool.content, tool.tool_call_id, tool.name) == ("tool", "3", "c1", "add")
    assert Message.assistant().content == "" and Message.assistant().tool_calls == []
    for message in (system, user, assistant, tool):
        assert message.metadata == {} and message.usage is None and message.reasoning is None


def test_usage_defaults_to_zero_and_adds() -> None:
    assert Usage() == Usage(input_tokens=0, output_tokens=0, total_tokens=0)
    total = Usage(input_tokens=1, output_tokens=2, total_tokens=3) + Usage(
        input_tokens=10, output_tokens=20, total_tokens=30
    )
    assert total == Usage(input_tokens=11, output_tokens=22, total_tokens=33)


def test_a_usage_given_input_and_output_alone_totals_them() -> None:
    """A scripted or custom model reporting input and output tokens alone gave a total of 0,
    which a run's total, a ``total_tokens`` limit and the spans read: the total is their sum.
    A total given is kept (a provider may count only a total, or more than the two)."""
    assert Usage(input_tokens=12, output_tokens=3).total_tokens == 15
    assert Usage(input_tokens=12, output_tokens=3, total_tokens=0).total_tokens == 15
    assert Usage.model_validate({"input_tokens": 4}).total_tokens == 4  # read back, e.g.
    assert Usage(total_tokens=12) == Usage(input_tokens=0, output_tokens=0, total_tokens=12)
    assert Usage(input_tokens=2, output_tokens=3, total_tokens=9).total_tokens == 9
    summed = Usage(input_tokens=2, output_tokens=3) + Usage(total_tokens=12)
    assert (summed.input_tokens, summed.output_tokens, summed.total_tokens) == (2, 3, 17)
    assert Usage().total_tokens == 0


def test_tool_call_keeps_raw_argument_text_even_when_malformed() -> None:
    call = ToolCall(id="c", name="f", arguments='{"a": 1,,')
    assert call.arguments == '{"a": 1,,'


@pytest.mark.parametrize("arguments", [{"city": "Paris"}, ["Paris"], 3, None])
def test_tool_call_arguments_given_as_other_than_text_are_told_to_be_json_text(
    arguments: object,
) -> None:
    """``arguments`` is the raw JSON text a model sends: a hand-built call given the dict
    itself is told to give ``json.dumps(...)``, not pydantic's bare "Input should be a valid
    string"; what the call holds (a str) is unchanged, and so is a Message carrying such a call."""
    with pytest.raises(ValidationError, match=r"JSON text.*json\.dumps\(arguments\)"):
        ToolCall(id="c1", name="weather", arguments=arguments)
    with pytest.raises(ValidationError, match=r"json\.dumps\(arguments\)"):
        Message.model_validate(
            {"role": "assistant", "tool_calls": [{"id": "c1", "name": "w", "arguments": arguments}]}
        )
    assert ToolCall(id="c1", name="weather", arguments='{"city": "Paris"}').arguments == (
        '{"city": "Paris"}'
    )
    assert ToolCall.model_json_schema()["properties"]["arguments"]["type"] == "string"


def test_message_validates_user_input_and_round_trips_as_json() -> None:
    with pytest.raises(ValidationError):
        Message.model_validate({"role": "wizard", "content": "x"})
    original = Message.assistant(
        "x", [ToolCall(id="1", name="f", arguments="{}")], usage=Usage(total_tokens=4)
    )
    assert Message.model_validate_json(original.model_dump_json()) == original


# -- streams ----------------------------------------------------------------------------------


class _Source:
    """A chunk source that hands out one chunk each time the test releases it, counting pulls."""

    def __init__(self, texts: list[str], fail_at: int | None = None) -> None:
        self.texts = texts
        self.fail_at = fail_at
        self.release = asyncio.Semaphore(0)
        self.pulled = 0
        self.closed = False

    async def chunks(self) -> AsyncIterator[MessageChunk]:
        try:
            for index, text in enumerate(self.texts):
                await self.release.acquire()
                if index == self.fail_at:
                    raise ConnectionError("server went away")
                self.pulled += 1
                yield MessageChunk(content=text)
        finally:
            self.closed = True


async def _read_all(stream: MessageStream) -> list[str]:
    return [chunk.content async for chunk in stream]


async def test_concurrent_readers_each_see_every_chunk_from_one_source() -> None:
    source = _Source(["a", "b", "c", "d"])
    stream = MessageStream(source.chunks())
    readers = [asyncio.create_task(_read_all(stream)) for _ in range(3)]
    for _ in range(4):
        await asyncio.sleep(0)  # let every reader wait for the next chunk
        source.release.release()
    results = await asyncio.wait_for(asyncio.gather(*readers), 5)
    assert results == [["a", "b", "c", "d"]] * 3
    assert source.pulled == 4  # one pull per chunk, however many readers
    assert stream.done


async def test_a_late_reader_replays_the_whole_stream() -> None:
    source = _Source(["x", "y"])
    source.release.release()
    source.release.release()
    stream = MessageStream(source.chunks())
    assert await _read_all(stream) == ["x", "y"]
    assert await _read_all(stream) == ["x", "y"]
    assert source.pulled == 2


async def test_a_reader_joining_midway_starts_from_the_first_chunk() -> None:
    source = _Source(["1", "2", "3"])
    stream = MessageStream(source.chunks())
    early = aiter(stream)
    source.release.release()
    assert (await anext(early)).content == "1"
    late = asyncio.create_task(_read_all(stream))
    source.release.release()
    source.release.release()
    assert [c.content async for c in early] == ["2", "3"]
    assert await asyncio.wait_for(late, 5) == ["1", "2", "3"]


async def test_collect_joins_the_chunks_once_and_keeps_the_stream_readable() -> None:
    async def chunks() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(reasoning="think ")
        yield MessageChunk(content="Hel", reasoning="hard")
        yield MessageChunk(content="lo")
        yield MessageChunk(usage=Usage(input_tokens=1, output_tokens=2, total_tokens=3))
        yield MessageChunk(finish_reason="stop")

    stream = MessageStream(chunks())
    message = await stream.collect()
    assert message.role == Role.ASSISTANT
    assert message.content == "Hello"
    assert message.reasoning == "think hard"
    assert message.usage == Usage(input_tokens=1, output_tokens=2, total_tokens=3)
    assert message.metadata.get("finish_reason") == "stop"
    assert await stream.collect() is message
    assert len([c async for c in stream]) == 5


async def test_a_stream_over_a_plain_list_is_complete_at_once() -> None:
    stream = MessageStream([MessageChunk(content="a"), MessageChunk(content="b")])
    assert stream.done
    assert (await stream.collect()).content == "ab"


async def test_tool_call_fragments_take_id_and_name_once_per_index() -> None:
    # Some servers repeat the name (and id) in every fragment; only the arguments concatenate.
    fragments = [
        [ToolCallChunk(index=0, id="call_a", name="get_weather", arguments='{"ci')],
        [
            ToolCallChunk(index=0, id="call_a", name="get_weather", arguments='ty": "Oslo"}'),
            ToolCallChunk(index=1, id="call_b", name="add", arguments='{"a": '),
        ],
        [ToolCallChunk(index=1, name="add", arguments="1}")],
        [ToolCallChunk(index=1, arguments="")],
    ]
    stream = MessageStream([MessageChunk(tool_calls=f) for f in fragments])
    message = await stream.collect()
    assert message.tool_calls == [
        ToolCall(id="call_a", name="get_weather", arguments='{"city": "Oslo"}'),
        ToolCall(id="call_b", name="add", arguments='{"a": 1}'),
    ]


async def test_tool_call_fragments_are_ordered_by_index() -> None:
    stream = MessageStream(
        [
            MessageChunk(tool_calls=[ToolCallChunk(index=1, id="b", name="second")]),
            MessageChunk(tool_calls=[ToolCallChunk(index=0, id="a", name="first")]),
        ]
    )
    calls = (await stream.collect()).tool_calls
    assert [c.name for c in calls] == ["first", "second"]


async def test_a_failing_source_raises_for_every_reader() -> None:
    source = _Source(["ok", "never"], fail_at=1)
    stream = MessageStream(source.chunks())
    seen: list[list[str]] = [[], []]

    async def reader(slot: int) -> None:
        async for chunk in stream:
            seen[slot].append(chunk.content)

    readers = [asyncio.create_task(reader(i)) for i in range(2)]
    source.release.release()
    await asyncio.sleep(0)
    source.release.release()
    results = await asyncio.wait_for(asyncio.gather(*readers, return_exceptions=True), 5)
    assert all(isinstance(r, ConnectionError) for r in results), results
    assert seen == [["ok"], ["ok"]]
    assert source.closed
    # A reader that comes later gets the chunks before the failure, then the same error.
    late: list[str] = []
    with pytest.raises(ConnectionError, match="server went away"):
        async for chunk in stream:
            late.append(chunk.content)
    assert late == ["ok"]
    with pytest.raises(ConnectionError):
        await stream.collect()


async def test_each_reader_gets_its_own_copy_of_the_error_with_the_sources_traceback() -> None:
    # Raising one stored exception from every reader would chain each reader's frames onto one
    # traceback, and those frames hold the stream: a cycle through the error (tests/
    # test_run_cycles.py). Each reader gets an equal copy instead, with the source's frames.
    class _Down(ModelError):
        pass

    async def failing() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="ok")
        try:
            raise OSError("socket closed")
        except OSError as exc:
            raise _Down("model down", status=503) from exc

    stream = MessageStream(failing())
    errors: list[BaseException] = []
    for _ in range(2):
        try:
            await stream.collect()
        except _Down as exc:
            errors.append(exc)
    first, second = errors
    assert first is not second
    assert (first.args, first.status, second.status) == (("model down",), 503, 503)
    assert isinstance(first.__cause__, OSError) and first.__cause__ is second.__cause__

    def frames(exc: BaseException) -> list[str]:
        names, tb = [], exc.__traceback__
        while tb is not None:
            names.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
        return names

    # The source's frame is there; the second reader's traceback holds no frames of the first.
    assert frames(first)[-1] == frames(second)[-1] == "failing"
    assert frames(second).count("collect") == 1


async def test_an_error_that_cannot_be_copied_is_raised_as_it_is() -> None:
    class _Picky(Exception):
        def __init__(self, code: int, *, detail: str) -> None:  # args do not rebuild it
            super().__init__(f"{code}: {detail}")

    async def failing() -> AsyncIterator[MessageChunk]:
        raise _Picky(500, detail="boom")
        yield MessageChunk()  # pragma: no cover - makes this an async generator

    stream = MessageStream(failing())
    with pytest.raises(_Picky, match="500: boom"):
        await stream.collect()
    with pytest.raises(_Picky, match="500: boom"):
        await stream.collect()


async def test_cancelling_one_reader_does_not_fail_the_stream_for_the_others() -> None:
    # A reader cancelled while it is the one waiting on the source (a client that went away, a
    # timeout around one consumer) must not poison the shared stream with its CancelledError.
    source = _Source(["a", "b"])
    stream = MessageStream(source.chunks())
    source.release.release()
    first = asyncio.create_task(_read_all(stream))
    for _ in range(5):
        await asyncio.sleep(0)  # ``first`` took "a" and now waits on the source for "b"
    assert source.pulled == 1
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    source.release.release()
    assert await asyncio.wait_for(_read_all(stream), 5) == ["a", "b"]
    assert (await stream.collect()).content == "ab"


async def test_aclose_stops_the_source() -> None:
    source = _Source(["a", "b", "c"])
    stream = MessageStream(source.chunks())
    source.release.release()
    reader = aiter(stream)
    assert (await anext(reader)).content == "a"
    await stream.aclose()
    assert source.closed
    assert [c.content async for c in reader] == []
    assert (await stream.collect()).content == "a"


@pytest.mark.parametrize("fetching", [True, False], ids=["source-awaited", "fetch-not-started"])
async def test_aclose_ends_a_waiting_reader_cleanly(fetching: bool) -> None:
    # The run that made a stream closes it when it ends first (the user broke out of the run, the
    # run was cancelled) while the user's own task may be reading it. That reader must see the
    # stream end where it stopped; a CancelledError raised in a task nobody cancelled reads as
    # that task's own cancellation (and unbalances asyncio.timeout / TaskGroup bookkeeping).
    source = _Source(["a", "b"])
    stream = MessageStream(source.chunks())
    source.release.release()
    assert (await anext(aiter(stream))).content == "a"
    reader = asyncio.create_task(_read_all(stream))
    await asyncio.sleep(0)  # the reader replays "a" and starts the fetch of "b"
    if fetching:
        for _ in range(5):
            await asyncio.sleep(0)  # ... which now waits inside the source
        assert source.pulled == 1 and not source.closed

    await stream.aclose()

    assert await asyncio.wait_for(reader, 5) == ["a"]
    assert not reader.cancelled() and source.closed and stream.done
    assert await _read_all(stream) == ["a"]  # the end is where it stopped, for everyone
    assert (await stream.collect()).content == "a"


async def test_aclose_cancelled_meanwhile_lets_the_source_clean_up_then_is_cancelled() -> None:
    # Whoever closes the stream (a run closing, under a timeout say) may be cancelled while the
    # source cleans up (a model stream closing its connection). The cancellation used to be
    # passed on into the source's cleanup, cutting it short, and then swallowed: aclose returned
    # as if nobody had cancelled its caller (an asyncio.timeout around it never fired).
    gate = asyncio.Event()
    cleaned: list[str] = []

    async def chunks() -> AsyncIterator[MessageChunk]:
        try:
            yield MessageChunk(content="a")
            await asyncio.Event().wait()  # a model that stalls
        finally:
            await gate.wait()  # closing its connection takes a few steps
            cleaned.append("closed")

    stream = MessageStream(chunks())
    reader = asyncio.create_task(_read_all(stream))
    for _ in range(5):
        await asyncio.sleep(0)  # the reader has "a" and waits for the next chunk
    assert stream._fetch is not None and not stream._fetch.done()
    closer = asyncio.create_task(stream.aclose())
    for _ in range(5):
        await asyncio.sleep(0)  # the source is in its cleanup, waiting for the gate
    closer.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await closer
    assert cleaned == ["closed"]
    assert await reader == ["a"] and stream.done


async def test_a_source_that_is_cancelled_is_an_error_for_readers_not_their_cancellation() -> None:
    # A producer whose own work was cancelled (a client library's internal task, a server going
    # away under anyio) raises CancelledError out of the source: the stream failed, and every
    # reader is told so; none of them was cancelled.
    async def cancelled_midway() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="a")
        raise asyncio.CancelledError

    stream = MessageStream(cancelled_midway())
    readers = [asyncio.create_task(_read_all(stream)) for _ in range(2)]

    done = await asyncio.wait_for(asyncio.gather(*readers, return_exceptions=True), 5)

    assert [type(result) for result in done] == [RuntimeError, RuntimeError]
    assert all("cancelled before it ended" in str(result) for result in done)
    assert not any(reader.cancelled() for reader in readers)


async def test_a_fetch_cancelled_from_outside_before_it_ran_fails_the_stream() -> None:
    # White-box: only loop shutdown cancels the fetch task itself (and then the readers too), but
    # a reader left alone with a fetch that never ran must fail, not pull the cancelled fetch again
    # forever.
    source = _Source(["a"])
    stream = MessageStream(source.chunks())
    reader = asyncio.create_task(_read_all(stream))
    await asyncio.sleep(0)  # the reader starts the fetch and waits on it
    assert stream._fetch is not None
    stream._fetch.cancel()

    with pytest.raises(RuntimeError, match="cancelled before it ended"):
        await asyncio.wait_for(reader, 5)


async def test_from_message_is_a_finished_stream_of_that_message() -> None:
    message = Message.assistant("done", usage=Usage(total_tokens=2))
    stream = MessageStream.from_message(message)
    assert stream.done
    assert await stream.collect() == message
    assert [c.content async for c in stream] == ["done"]


async def test_readers_of_a_stream_from_a_message_see_all_of_it() -> None:
    # A reader joining the chunks (a UI, simplify_events) must get what collect() returns: the
    # tool calls, reasoning and metadata too, not only the text.
    message = Message.assistant(
        "checking",
        [ToolCall(id="c1", name="lookup", arguments='{"q": 1}'), ToolCall(id="c2", name="f")],
        usage=Usage(total_tokens=5),
        reasoning="first look it up",
    )
    message.metadata["response_id"] = "r1"
    stream = MessageStream.from_message(message)

    chunks = [c async for c in stream]

    assert join_chunks(chunks) == await stream.collect() == message
    assert simplify_events([AgentEvent.streaming(stream)]) == [
        ": checking",
        ': [call lookup {"q": 1}]',
        ": [call f {}]",
    ]


async def test_a_source_raising_a_base_exception_fails_the_stream_for_later_readers() -> None:
    # Not an Exception (KeyboardInterrupt, SystemExit, a library's own): the reader waiting on it
    # gets it, and the stream ends failed rather than open, where a later reader would pull the
    # finished source and take the truncated stream for a complete one.
    class _Abort(BaseException):
        pass

    async def aborting() -> AsyncIterator[MessageChunk]:
        yield MessageChunk(content="part ")
        raise _Abort("source aborted")

    stream = MessageStream(aborting())
    seen: list[str] = []
    with pytest.raises(_Abort, match="source aborted"):
        async for chunk in stream:
            seen.append(chunk.content)
    assert seen == ["part "]
    assert stream.done
    late: list[str] = []
    with pytest.raises(_Abort, match="source aborted"):
        async for chunk in stream:
            late.append(chunk.content)
    assert late == ["part "]
    with pytest.raises(_Abort):
        await stream.collect()


async def test_concurrent_collects_return_the_same_message() -> None:
    async def chunks() -> AsyncIterator[MessageChunk]:
        for text in ("a", "b", "c"):
            await asyncio.sleep(0)
            yield MessageChunk(content=text)

    stream = MessageStream(chunks())
    first, second = await asyncio.gather(stream.collect(), stream.collect())
    assert first.content == "abc"
    assert first is second is await stream.collect()


# -- outputs and events -----------------------------------------------------------------------


def test_agent_output_holds_exactly_one_payload() -> None:
    with pytest.raises(ValueError):
        AgentOutput(message=Message.user("a"), custom=1)
    with pytest.raises(ValueError):
        AgentOutput(message=Message.user("a"), stream=MessageStream([]))


async def test_output_role_and_tool_name_are_readable_without_consuming_a_stream() -> None:
    source = _Source(["never read"])
    stream = MessageStream(source.chunks())
    out = AgentOutput(stream=stream, role=Role.TOOL, tool_name="search")
    assert (out.role, out.tool_name) == (Role.TOOL, "search")
    assert AgentEvent.streaming(stream).output.role == Role.ASSISTANT  # type: ignore[union-attr]
    assert source.pulled == 0 and not stream.done

    tool_out = AgentOutput(Message.tool("r", tool_call_id="1", name="lookup"))
    assert (tool_out.role, tool_out.tool_name) == (Role.TOOL, "lookup")
    await stream.aclose()


def test_event_helpers() -> None:
    of = AgentEvent.of("hi")
    assert of.message == Message.assistant("hi") and of.action is None
    assert AgentEvent.of(Message.user("u")).message == Message.user("u")
    assert AgentEvent.exit().action.exit  # type: ignore[union-attr]
    assert AgentEvent.transfer("B").action.transfer_to == "B"  # type: ignore[union-attr]
    assert AgentEvent.break_loop().action.break_loop  # type: ignore[union-attr]
    assert AgentEvent.exit().ends_agent and AgentEvent.transfer("B").ends_agent
    assert not AgentEvent.break_loop().ends_agent  # break lets the agent finish
    blank = AgentEvent.of("x")
    assert blank.agent_name == "" and blank.run_path == ()  # stamped by the framework later
