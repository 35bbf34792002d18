"""Replayable, multi-reader message streams.

A ``MessageStream`` wraps one source of ``MessageChunk``s. Any number of readers may iterate it, each
seeing every chunk from the start: chunks land in a shared buffer and whichever reader is ahead pulls
the next one from the source. That lets the framework record a streamed message in history while the
user is still printing it, without the two readers racing for chunks.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from types import TracebackType
from typing import Any

from ._aio import being_cancelled, finish
from .messages import Message, MessageChunk, ToolCallChunk, join_chunks

__all__ = ["MessageStream"]


class MessageStream:
    """An async iterable of chunks that every reader sees in full; ``collect()`` joins them."""

    __slots__ = (
        "_buffer",
        "_closed",
        "_cut",
        "_error",
        "_fetch",
        "_joined",
        "_on_join",
        "_source",
    )

    def __init__(self, source: AsyncIterable[MessageChunk] | Iterable[MessageChunk]) -> None:
        self._buffer: list[MessageChunk] = []
        self._error: BaseException | None = None
        self._joined: Message | None = None
        # Run once on the joined message, as it is joined, by whichever reader joins it first
        # (``ReActAgent`` gives its calls ids of their own there: a service encoding the event as
        # its stream ends sends the ids the run pauses and answers under). Private.
        self._on_join: Callable[[Message], None] | None = None
        self._fetch: asyncio.Future[None] | None = None
        # Closed by ``aclose()`` before its source ended, and before a finish reason came: readers
        # see it end there, but what came is not the whole message, which ``_final_message`` must
        # not pass off as one.
        self._cut = False
        if isinstance(source, AsyncIterable):
            self._source: AsyncIterator[MessageChunk] | None = aiter(source)
            self._closed = False
        else:
            self._buffer.extend(source)
            self._source = None
            self._closed = True

    @classmethod
    def from_message(cls, message: Message) -> MessageStream:
        """A finished one-chunk stream carrying ``message`` (useful in tests and adapters).

        The chunk holds everything the message does (text, reasoning, tool calls, usage,
        metadata), so a reader joining the chunks gets the message ``collect()`` returns. Chunks
        have no role: they join to an assistant message, which is what streams carry.
        """
        stream = cls(())
        stream._joined = message
        stream._buffer.append(
            MessageChunk(
                content=message.content,
                reasoning=message.reasoning or "",
                tool_calls=[
                    ToolCallChunk(index=i, id=call.id, name=call.name, arguments=call.arguments)
                    for i, call in enumerate(message.tool_calls)
                ],
                usage=message.usage,
                metadata=dict(message.metadata),
            )
        )
        return stream

    @property
    def done(self) -> bool:
        """True once the source is exhausted (or failed)."""
        return self._closed

    def __aiter__(self) -> AsyncIterator[MessageChunk]:
        return self._read()

    async def _read(self) -> AsyncIterator[MessageChunk]:
        position = 0
        buffer = self._buffer
        while True:
            if position < len(buffer):
                yield buffer[position]
                position += 1
                continue
            if self._closed:
                if self._error is not None:
                    raise _fresh(self._error)
                return
            await self._pull()

    async def _pull(self) -> None:
        """Wait for the next chunk to land in the buffer.

        The source is read by one fetch task at a time that readers await through ``shield``, so a
        reader that is cancelled (a client that went away, a timeout around one consumer) does not
        cancel the source under the others. Whoever owns the stream stops it with ``aclose()``; the
        framework does so when the run that produced it ends before the stream did.
        """
        fetch = self._fetch
        if fetch is None:
            fetch = self._fetch = asyncio.ensure_future(self._fetch_one())
        try:
            await asyncio.shield(fetch)
        except asyncio.CancelledError:
            if not fetch.cancelled() or being_cancelled():
                raise  # this reader was cancelled; the fetch goes on for the others
            # The fetch was cancelled, not this reader: by ``aclose()`` (the stream ends where it
            # stopped) or from outside (an error, for every reader). Raising CancelledError in a
            # task nobody cancelled would read as that task's own cancellation.
            self._fetch = None
            if not self._closed:  # cancelled before it ran: ``_fetch_one`` could not say so
                self._closed = True
                self._error = RuntimeError("the stream was cancelled before it ended")
                await self._close_source()

    async def _fetch_one(self) -> None:
        assert self._source is not None
        try:
            chunk = await anext(self._source)
        except StopAsyncIteration:
            self._closed = True
        except asyncio.CancelledError:
            if not self._closed:  # cancelled from outside, not by ``aclose()``: readers are told
                self._error = RuntimeError("the stream was cancelled before it ended")
            self._closed = True
            await self._close_source()
            raise
        except Exception as exc:
            self._closed = True
            # Kept without this frame (whose ``self`` is the stream: a cycle through the error;
            # no local holds the traceback either, for the same reason).
            self._error = exc.with_traceback(_past_first(exc.__traceback__))
            await self._close_source()
        except BaseException as exc:
            # Not an error to hand to the readers and carry on from (KeyboardInterrupt,
            # SystemExit, a source's own BaseException): it goes on up, through the readers
            # waiting on this fetch. The stream still ends failed, or a later reader would pull
            # the finished source and take the truncated stream for a complete one. (Only the
            # fetch task gets here: a cancelled reader does not cancel it, see ``_pull``.)
            self._closed = True
            self._error = _fresh(exc)  # a copy: the readers add their frames to ``exc``
            await self._close_source()
            raise
        else:
            self._buffer.append(chunk)
        finally:
            self._fetch = None
            # On Python 3.12+ the source's frames in the kept error's traceback link back to this
            # frame (``f_back``): it must not keep the stream, which keeps the error.
            del self

    async def _close_source(self) -> None:
        aclose = getattr(self._source, "aclose", None)
        self._source = None
        if aclose is not None:
            with contextlib.suppress(Exception):  # the source failed already; this adds nothing
                await aclose()

    async def collect(self) -> Message:
        """Read the stream to its end (if no one has) and return the joined message."""
        if self._joined is None:
            async for _ in self:
                pass
            if self._joined is None:  # a concurrent collect() may have joined them meanwhile
                self._joined = self._join()
        return self._joined

    def _final_message(self) -> Message:
        """The joined message of a stream that has been read to its end, without reading it (for
        ``AgentEvent.to_dict``, which must not take a stream from under its readers); a stream
        still arriving, one that failed, or one closed before it ended (see ``aclose``) is a
        ``ValueError`` saying so."""
        if not self._closed:
            # on_event runs before anyone has read the stream, so a logging callback that
            # encodes every event (a port of Google ADK's on_event_callback) always lands here.
            raise ValueError(
                "its stream has not been read to its end: read it (async for chunk in stream, "
                "or await stream.collect()) before to_dict, or send its chunks as they come; an "
                "on_event callback sees the event before its stream is read: encode streaming "
                "events where your loop reads them"
            )
        if self._error is not None:
            raise ValueError(
                f"its stream failed ({type(self._error).__name__}: {self._error}); the run's "
                "error event follows it"
            )
        if self._cut:
            raise ValueError(
                f"its stream was closed before it ended, after {len(self._buffer)} chunk(s) (the "
                "run that made it ended first: its reader left, or it was cancelled), so what "
                "came is not the whole message"
            )
        if self._joined is None:
            self._joined = self._join()
        return self._joined

    def _join(self) -> Message:
        joined = join_chunks(self._buffer)
        on_join = self._on_join
        if on_join is not None:
            self._on_join = None  # once, and the stream no longer holds what it closes over
            on_join(joined)
        return joined

    async def aclose(self) -> None:
        """Stop the source early; readers then see the stream end where it stopped.

        ``collect()`` then joins what came, but ``AgentEvent.to_dict`` refuses the event: a
        message cut before the model's finish reason sent as a whole one (``"streamed": true``)
        would reach a service's client as a finished answer.

        A caller cancelled meanwhile (once, or at every await as an anyio cancel scope does) is
        cancelled once the source has cleaned up: the fetch is waited for, not awaited, since
        awaiting a task passes the caller's cancellation on into it (cutting the source's cleanup
        short), and its own CancelledError, which ``suppress`` took, hid the caller's."""
        if not self._closed:
            self._closed = True
            # A model that had sent its finish reason was done: only the source's end was left.
            self._cut = not any(chunk.finish_reason for chunk in self._buffer)
            fetch = self._fetch
            try:
                if fetch is not None and not fetch.done():
                    fetch.cancel()
                    await finish(asyncio.wait((fetch,)))
            finally:
                await self._close_source()  # a fetch cancelled before it ran left it open

    def __repr__(self) -> str:
        state = "done" if self._closed else "open"
        return f"MessageStream({len(self._buffer)} chunks, {state})"

    def __reduce__(self) -> tuple[Any, ...]:
        """A stream that has ended pickles as what it carried (chunks, error, whether it was cut),
        so an event holding it, and a ``RunError`` holding that event, can cross a process
        boundary; the source it was read from, an exhausted async generator, cannot. One still
        arriving cannot be pickled: its chunks are not all here."""
        if not self._closed:
            raise TypeError(
                "a MessageStream cannot be pickled before it has ended: read it to its end "
                "(await stream.collect()) first"
            )
        return (_ended, (list(self._buffer), self._error, self._cut, self._joined))


def _ended(
    chunks: list[MessageChunk], error: BaseException | None, cut: bool, joined: Message | None
) -> MessageStream:
    """An unpickled ``MessageStream``: ended, as it was when pickled."""
    stream = MessageStream(chunks)
    stream._error, stream._cut, stream._joined = error, cut, joined
    return stream


def _past_first(tb: TracebackType | None) -> TracebackType | None:
    return tb.tb_next if tb is not None else None


def _fresh(error: BaseException) -> BaseException:
    """A copy of the stream's stored error for one reader to raise, same type, arguments,
    attributes, cause and traceback so far.

    Why: raising an exception prepends the frames it passes through to its traceback, and those
    frames hold the stream (the reader's ``self``, a caller's local): raising the stored error
    itself would close a cycle, stream -> error -> traceback -> frame -> stream, that keeps the
    whole failed run alive until the cyclic collector finds it, and every reader would add its
    frames to one shared traceback. An exception that cannot be copied (its constructor does not
    take its ``args`` back) is raised as it is.
    """
    try:
        twin = copy.copy(error)
    except Exception:
        return error
    if type(twin) is not type(error):
        return error
    twin.__cause__ = error.__cause__
    twin.__context__ = error.__context__
    twin.__suppress_context__ = error.__suppress_context__
    return twin.with_traceback(error.__traceback__)
