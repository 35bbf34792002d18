"""The stdio transport: the ``mcp`` package's ``stdio_client`` with a reader of its own.

The package's reader splits the server's stdout into lines as ``(buffer + chunk).split("\\n")``
for each chunk of 64 KiB read: a message arriving in many chunks is copied and scanned again at
each one, quadratic in its size, in the event loop (a 32 MB tool result took 17 seconds of CPU, a
200 MB one about ten minutes, every run the process serves slowed meanwhile), and held whole however
large it grows. This reader keeps a message's chunks in a list and looks for the line's end in
each new chunk only: linear. A message longer than the cap it is given (64 MiB, the one an
``HTTPServer``'s single event has: ``_servers._MAX_EVENT_SIZE``) is not kept: the rest of its
line is read and dropped, its start and end kept to find whose answer it is, and that request is
answered with an error saying so (the tool's call gets an error result; the connection goes on).
A notification (its start, ``{"jsonrpc": "2.0", "method": "notifications/...``, shows it one: MCP
names every notification so, and no request) is dropped, with a warning naming the server and
the notification's method: a chatty server's log or progress message over the cap answers no
call and must not end the calls that are fine. One naming no request it can be told to answer
otherwise (a request of the server's, or an answer whose start does not show it one, ``result``
or ``error`` after its ``id`` or first with its ``id`` last, in its first and last few hundred
bytes) ends the connection, with a warning naming the server: a request it answered would
otherwise wait out its whole timeout. A line that is not text in the server's encoding (UTF-8) is
treated alike.

Everything else (the process's spawn in its own process group, the environment, the shutdown
sequence, the writer) is the package's own, called as its ``stdio_client`` calls it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncGenerator, Iterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import anyio.lowlevel
from mcp.client import stdio as _mcp_stdio
from mcp.client.stdio import StdioServerParameters, get_default_environment
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["READABLE", "stdio_transport"]

logger = logging.getLogger("adk.mcp")

_HELPERS = {
    "_get_executable_command": ("command",),
    "_create_platform_compatible_process": ("command", "args", "env", "errlog", "cwd"),
    "_parse_line": ("line",),
    "_drain_stdout": ("process",),
    "_stop_server_process": ("process",),
    "_aclose_all": ("streams",),
    "_WRITER_FLUSH_TIMEOUT": None,
}
"""The private helpers of ``mcp.client.stdio`` this transport calls as its ``stdio_client`` does,
with the parameters it passes them (a number for the constant). The package offers no public
way to read a server's stdout otherwise (``stdio_client`` takes no reader; mcp 2.3), and this
transport would copy its spawn, its environment and its shutdown sequence (close stdin, wait,
kill the process group, reap) to do without them."""


def _readable() -> bool:
    """Whether the installed ``mcp`` package has each of ``_HELPERS`` as this transport calls it:
    present, and a function taking those parameters (or a number)."""
    import inspect

    for name, parameters in _HELPERS.items():
        helper = getattr(_mcp_stdio, name, None)
        if parameters is None:
            if not isinstance(helper, int | float):
                return False
            continue
        try:
            taken = inspect.signature(helper).parameters  # type: ignore[arg-type]
        except (TypeError, ValueError):  # None, or no function
            return False
        if not all(parameter in taken for parameter in parameters):
            return False
    return True


READABLE = _readable()
"""Whether the installed ``mcp`` package has the private helpers this transport calls (those of
``mcp`` 2.3, as it calls them: ``_HELPERS``): without them (moved, renamed, taking other
parameters), a StdioServer falls back to the package's own ``stdio_client`` (quadratic,
uncapped; the tests of the cap fail, saying so) rather than failing to connect."""

# How much of an oversized message's start and end is kept to find its ``id``.
_EDGE = 512
_JSONRPC = rb'(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?'
_ID = rb'(-?\d{1,19}|"(?:[^"\\]|\\.){0,200}")'
# ``{"jsonrpc": "2.0", "id": 7, "result": ...`` (the Python SDK's order) or ``{"id": 7, "error":
# ...``: the id first, an answer's ``result`` or ``error`` next. A request of the server's own
# writes its ``id`` first too (``{"jsonrpc": "2.0", "id": 7, "method": ...``): its id is no call's.
_ID_FIRST = re.compile(
    rb"\A\s*\{\s*"
    + _JSONRPC
    + rb'"id"\s*:\s*'
    + _ID
    + rb"\s*,\s*"
    + _JSONRPC
    + rb'"(?:result|error)"\s*:'
)
# ``{"result": ...`` or ``{"jsonrpc": "2.0", "error": ...``: an answer whose id is to come last
# (the TypeScript SDK writes the result first), ``..., "jsonrpc": "2.0", "id": 7}``. A message
# starting otherwise (a request of the server's, ``{"method": ...``, or members in another order)
# is not read as an answer from its end: the ``id`` there may be a request's.
_ANSWER_FIRST = re.compile(rb"\A\s*\{\s*" + _JSONRPC + rb'"(?:result|error)"\s*:')
_ID_LAST = re.compile(rb',\s*"id"\s*:\s*' + _ID + rb"\s*\}\s*\Z")
# ``{"jsonrpc": "2.0", "method": "notifications/message", ...`` (the Python SDK's order) or
# ``{"method": "notifications/progress", ...`` (the TypeScript SDK's): a notification, whose method
# MCP names ``notifications/...`` and no request's. Its method is kept to name it in a warning.
_NOTIFICATION = re.compile(
    rb"\A\s*\{\s*" + _JSONRPC + rb'"method"\s*:\s*"(notifications/[^"\\]{0,100})"'
)


_DROPPED = ValueError("an unreadable notification, dropped")
"""What ``unread`` gives for a notification it cannot read: nothing is passed on."""


class _Oversized:
    """A line longer than the cap: its size, and its first and last ``_EDGE`` bytes."""

    __slots__ = ("head", "size", "tail")

    def __init__(self, size: int, head: bytes, tail: bytes) -> None:
        self.size = size
        self.head = head
        self.tail = tail


def _request_id(head: bytes, tail: bytes) -> int | str | None:
    """The id of the request a line answers, if its start (``head``) shows it an answer (its
    ``result`` or ``error`` after its ``id``, or first with the ``id`` at its end, ``tail``); None
    otherwise (a request or notification of the server's, an id in the middle)."""
    found = _ID_FIRST.match(head) or (_ANSWER_FIRST.match(head) and _ID_LAST.search(tail))
    if found is None:
        return None
    try:
        value = json.loads(found.group(1))
    except ValueError:
        return None
    return value if isinstance(value, int | str) else None


class _Lines:
    """Splits the bytes a server writes into lines, linearly, keeping none over ``limit``."""

    __slots__ = ("_head", "_limit", "_over", "_parts", "_size", "_tail")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: list[bytes] = []
        self._size = 0
        self._over = False
        self._head = b""
        self._tail = b""

    def feed(self, chunk: bytes) -> Iterator[bytes | _Oversized]:
        """The lines ``chunk`` ends (each without its ``\\n``), in order."""
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                self._add(chunk[start:] if start else chunk)
                return
            self._add(chunk[start:end])
            yield self._take()
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        self._size += len(piece)
        if self._over:
            self._tail = (self._tail + piece)[-_EDGE:]
        elif self._size > self._limit:
            joined = b"".join(self._parts) + piece  # once per oversized line
            self._head = joined[:_EDGE]
            self._tail = joined[-_EDGE:]
            self._parts = []
            self._over = True
        else:
            self._parts.append(piece)

    def _take(self) -> bytes | _Oversized:
        taken: bytes | _Oversized
        if self._over:
            taken = _Oversized(self._size, self._head, self._tail)
            self._over = False
            self._head = self._tail = b""
        else:
            taken = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
            self._parts = []
        self._size = 0
        return taken


def _notification(head: bytes) -> str | None:
    """The method of the notification a line starts as (``head``), shown safely (its bytes
    decoded with replacement, escaped as a server's text in a log is); None when its start does
    not show it a notification."""
    found = _NOTIFICATION.match(head)
    if found is None:
        return None
    from ._hooks import _loggable

    return _loggable(found.group(1).decode("utf-8", "replace"))


def _refusal(request_id: int | str, why: str) -> SessionMessage:
    """The error answering the request ``request_id``, whose answer could not be read: ``why``."""
    from mcp.types import INTERNAL_ERROR, ErrorData, JSONRPCError

    error = ErrorData(code=INTERNAL_ERROR, message=f"the server's answer {why}")
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


@asynccontextmanager
async def stdio_transport(
    server: StdioServerParameters, errlog: TextIO, shown: str, limit: int
) -> AsyncGenerator[TransportStreams, None]:
    """``mcp.client.stdio.stdio_client(server, errlog)`` reading lines linearly and refusing one
    over ``limit`` bytes (see the module docstring); ``shown`` names the server in what it says."""
    mcp_stdio: Any = _mcp_stdio  # its helpers are private: read as the package's stdio_client
    command = await mcp_stdio._get_executable_command(server.command)
    process = await mcp_stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        env=get_default_environment() | (server.env or {}),
        errlog=errlog,
        cwd=server.cwd,
    )
    # No awaits until the task group is entered (a cancellation would leak the live process).
    read_stream_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](
        0
    )
    write_stream, write_stream_reader = anyio.create_memory_object_stream[SessionMessage](0)
    shutting_down = False
    writer_done = anyio.Event()
    parse_line = mcp_stdio._parse_line

    def unread(line: bytes | _Oversized) -> SessionMessage | Exception | None:
        """What the session is given for ``line``: its message, an error answering its request
        when it cannot be read (over the cap, not text), ``_DROPPED`` for an unreadable
        notification (nothing: the connection goes on), or None when it is unreadable and
        answers no request it could be told to (the connection is to end)."""
        if isinstance(line, _Oversized):
            head, tail = line.head, line.tail
            why = f"was {line.size} bytes, over the {limit} bytes one MCP message may be"
        else:
            try:
                text = line.decode(server.encoding, server.encoding_error_handler)
                parsed: SessionMessage | Exception = parse_line(text)
                return parsed
            except UnicodeDecodeError as exc:
                head, tail = line[:_EDGE], line[-_EDGE:]
                why = f"is not {server.encoding} text ({exc.reason} at byte {exc.start})"
        request_id = _request_id(head, tail)
        if request_id is None:
            method = _notification(head)
            if method is not None:
                logger.warning(
                    "MCP server '%s' sent a notification (%s) that %s: it is dropped unread, "
                    "and the connection goes on",
                    shown,
                    method,
                    why.replace("was ", "is ", 1),
                )
                return _DROPPED
            logger.warning(
                "MCP server '%s' sent a message that %s, answering no request it could be told "
                "to: the connection is closed",
                shown,
                why.replace("was ", "is ", 1),
            )
            return None
        return _refusal(request_id, f"{why}: it was dropped unread")

    async def deliver(line: bytes | _Oversized) -> bool:
        """Pass ``line`` on; False when the connection is to end (or the session is gone)."""
        message = unread(line)
        if message is None:
            return False
        if message is _DROPPED:
            return True
        try:
            await read_stream_writer.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False  # the session is gone; only the drain remains
        return True

    async def stdout_reader() -> None:
        stdout = process.stdout
        assert stdout is not None, "the server process is spawned with pipes"
        lines = _Lines(limit)
        try:
            try:
                async with read_stream_writer:  # closed first: the session sees the end now
                    while True:
                        try:
                            chunk = await stdout.receive()
                        except anyio.EndOfStream:
                            return
                        for line in lines.feed(chunk):
                            if not await deliver(line):
                                return
            finally:
                await mcp_stdio._drain_stdout(process)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed the stdout stream under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                logging.getLogger(mcp_stdio.__name__).exception(
                    "Reading from the MCP server's stdout failed mid-session"
                )

    async def stdin_writer() -> None:
        stdin = process.stdin
        assert stdin is not None, "the server process is spawned with pipes"
        try:
            async with write_stream_reader:
                async for session_message in write_stream_reader:
                    text = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await stdin.send(
                        (text + "\n").encode(server.encoding, server.encoding_error_handler)
                    )
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_stream_writer.aclose()  # the session sees the connection end
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(mcp_stdio._WRITER_FLUSH_TIMEOUT) as flush_scope:
            await writer_done.wait()
        if flush_scope.cancelled_caught:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        await mcp_stdio._stop_server_process(process)
        await mcp_stdio._aclose_all(
            read_stream, write_stream, read_stream_writer, write_stream_reader
        )
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
