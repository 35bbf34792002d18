"""An MCP server that breaks MCP's shapes (``tests/mcp_servers/hostile_server.py``), over stdio.

Results that are not ``CallToolResult``s (content blocks of an unknown type, text that is a
number, content that is a string or missing, structured content that is a list, an image that is
not base64), a result that is not an object at all, a result of 2 MB; listings with input schemas
a client cannot read, a name listed twice, a tool without a name; a listing nested deeper than
the client's JSON parser reads. What must hold: a broken result is an error result the model
reads (``Error: tool '<name>' failed: ...``) and the session goes on serving calls; a tool
listed with a bad definition is left out with a warning naming it and why, the others offered; a
listing the client cannot read at all fails with a ``RuntimeError`` naming the server and why;
nothing waits out a timeout for
an answer that came (the server answered; the client could not read it).

Found so far: an answer the ``mcp`` client cannot parse as JSON-RPC (a result that is a list,
JSON nested past its parser's limit) was dropped by the client, so its request waited out the
whole ``call_timeout`` (60 s by default) and failed as ``timed out after 60s`` / ``did not answer
within 60s``, when the server had answered. So did an answer nested past Python's own parser, and
one that was not UTF-8 (every later call on the connection too). The ``mcp`` stdio reader took
time quadratic in a message's size (32 MB: 17 s of CPU in the event loop) and kept any message
whole, as its streamable HTTP client kept a JSON answer: one is now capped at 64 MiB whatever
the transport. A server's log messages reached the application's log as they came (a forged
line, a terminal's escapes).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import re
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp_servers.hostile_server import SERVER_ERROR
from mcp_servers.hostile_server import _tools as hostile_tools

from adk import RunError, Runner
from adk.checkpoint import InMemoryCheckpointStore
from adk.mcp import HTTPServer, MCPConnectionError, MCPToolset, StdioServer
from adk.mcp import _stdio as stdio_reader
from adk.mcp._servers import _answers_nothing
from adk.mcp._stdio import _request_id
from adk.messages import Role
from adk.testing import Reply, ScriptedModel, tool_call
from prebuilt import ReActAgent

SERVER = Path(__file__).parent / "mcp_servers" / "hostile_server.py"
TIMEOUT = 30.0  # longer than any of these calls takes, far shorter than the suite's timeout


def hostile(kind: str) -> MCPToolset:
    return MCPToolset(StdioServer(sys.executable, [str(SERVER), kind]), call_timeout=TIMEOUT)


BROKEN = {
    "unknown_block": "ValidationError",
    "text_a_number": "ValidationError",
    "content_a_string": "ValidationError",
    "no_content": "ValidationError",
    "structured_a_list": "ValidationError",
    "image_not_base64": "ValidationError",
    "a_list": r"the server's answer could not be read by the MCP client \(result: ",
    # Nested past Python's parser too: it waited out call_timeout ('timed out after 30s').
    "too_deep": r"could not be read by the MCP client \(Invalid JSON: recursion limit exceeded",
    # Not JSON at all, its id at its start: it waited out call_timeout ('timed out after 30s').
    "cut_short": r"could not be read by the MCP client \(Invalid JSON: EOF while parsing",
}


async def test_broken_results_are_error_results_and_the_session_goes_on() -> None:
    async with hostile("results") as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        for name, says in BROKEN.items():
            result = await tools[name].run("{}", None)  # type: ignore[arg-type]
            assert result.is_error, name
            assert result.content.startswith(f"Error: tool '{name}' failed: "), result.content
            assert "timed out" not in result.content
            assert re.search(says, result.content), (name, result.content[:300])
            ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
            assert not ok.is_error and ok.content == "ok ran", (name, ok)
        flagged = await tools["is_error_a_string"].run("{}", None)  # type: ignore[arg-type]
        assert flagged.is_error and flagged.content == "Error: hi"  # "yes" read as true
        big = await tools["two_megabytes"].run("{}", None)  # type: ignore[arg-type]
        assert not big.is_error and big.content == "x" * 2_000_000


async def test_a_message_over_the_cap_is_refused_unkept_and_the_session_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A stdio server's message over the cap (``_MAX_EVENT_SIZE``, 64 MiB; 1 MiB here, so the
    server's 2 MB ones are over it) is not kept: an answer, its ``id`` first (the Python SDK's
    order) or last (the TypeScript SDK's), fails its call at once with an error result saying
    so, and the connection goes on; a notification (a 2 MB log message) is dropped with a
    warning naming the server and its method, and the connection goes on (it ended the
    connection, the call waiting on it failing as a lost connection: a chatty server's log
    killed calls that were fine); a message naming no call it could fail (a 2 MB sampling request
    of the server's) ends the connection with a warning naming the server, its call failing at
    once as a lost connection, and the next call reconnects. Before, every message was read
    whole however large (and in time quadratic in its size): the 2 MB result arrived."""
    assert stdio_reader.READABLE, (
        "the installed mcp package lacks the private stdio helpers adk.mcp._stdio calls "
        f"({', '.join(stdio_reader._HELPERS)}): StdioServer fell back to its stdio_client"
    )
    monkeypatch.setattr("adk.mcp._servers._MAX_EVENT_SIZE", 1024 * 1024)
    async with hostile("results") as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        for name in ("two_megabytes", "two_megabytes_id_last"):
            big = await tools[name].run("{}", None)  # type: ignore[arg-type]
            assert big.is_error, (name, big.content[:100])
            assert f"Error: tool '{name}' failed: " in big.content
            assert "the server's answer was 20000" in big.content  # its bytes, JSON around it
            assert "over the 1048576 bytes one MCP message may be" in big.content
            ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
            assert not ok.is_error and ok.content == "ok ran", (name, ok)
        under = await tools["sized"].run('{"size": 1000000}', None)  # type: ignore[arg-type]
        assert not under.is_error and under.content == "x" * 1_000_000
        with caplog.at_level(logging.WARNING, logger="adk.mcp"):
            logged = await tools["two_megabytes_log"].run("{}", None)  # type: ignore[arg-type]
        assert not logged.is_error and logged.content == "logged", logged.content
        [warning] = [r.getMessage() for r in caplog.records if "bytes, over the" in r.getMessage()]
        assert "hostile_server.py" in warning and "(notifications/message)" in warning
        assert "the connection goes on" in warning
        assert toolset._session.connections_opened == 1
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="adk.mcp"):
            lost = await tools["two_megabytes_request"].run("{}", None)  # type: ignore[arg-type]
        assert lost.is_error and "connection to MCP server" in lost.content, lost.content
        assert "timed out" not in lost.content
        [warning] = [r.getMessage() for r in caplog.records if "bytes, over the" in r.getMessage()]
        assert "hostile_server.py" in warning and "the connection is closed" in warning
        ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
        assert not ok.is_error and ok.content == "ok ran"
        assert toolset._session.connections_opened == 2


async def test_an_answer_that_is_not_utf8_fails_its_call_at_once_and_the_session_goes_on() -> None:
    """An answer holding bytes that are not UTF-8 fails its call at once, saying so, and the next
    call is answered. Before, the ``mcp`` reader's decoding error ended its reading task without
    ending the session: that call and every later one on the connection waited out their whole
    ``call_timeout`` ("timed out after 30s")."""
    async with hostile("results") as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        bad = await tools["not_utf8"].run("{}", None)  # type: ignore[arg-type]
        assert bad.content.startswith("Error: tool 'not_utf8' failed: "), bad.content
        assert "the server's answer is not utf-8 text (invalid start byte at byte" in bad.content
        ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
        assert not ok.is_error and ok.content == "ok ran"
        # A log message that is not UTF-8 answers no call: dropped, the connection goes on (it
        # ended the connection, the call failing as a lost connection).
        logged = await tools["not_utf8_log"].run("{}", None)  # type: ignore[arg-type]
        assert not logged.is_error and logged.content == "logged", logged.content
        assert toolset._session.connections_opened == 1


@pytest.mark.parametrize(
    ("head", "tail", "found"),
    [
        (b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [', b"]}}", 7),
        (b'{"id":"a\\"b","result":{', b"}}", 'a"b'),
        (b'{"result": {"content": [', b'"]}, "jsonrpc": "2.0", "id": -3}\r', -3),
        # A request of the server's own in the TypeScript SDK's order: its id is no call's.
        (
            b'{"method": "sampling/createMessage", "params": {',
            b', "jsonrpc": "2.0", "id": 5}',
            None,
        ),
        # A notification whose params end with an "id" of their own.
        (b'{"jsonrpc": "2.0", "method": "notifications/message", ', b', "id": 5}}', None),
        (b'{"result": {"id": 5, "content": [', b"]}}", None),  # an id inside the result
        # A request of the server's own in the Python SDK's order (jsonrpc, id, method, params):
        # a sampling or elicitation request over the cap, whose id is no call's either.
        (b'{"jsonrpc":"2.0","id":5,"method":"sampling/createMessage","params":{', b"}}", None),
        (b'{"id": 5, "method": "elicitation/create", "params": {', b"}}", None),
        # Neither edge shows it an answer (its method in the middle): the id last is no call's.
        (b'{"params": {"messages": [', b'"method": "ping", "jsonrpc": "2.0", "id": 5}', None),
        # An answer's own members in another order, or an error answer: still found.
        (b'{"id": 7, "jsonrpc": "2.0", "result": {', b"}}", 7),
        (b'{"jsonrpc": "2.0", "id": 7, "error": {"code": -1, "message": "', b'"}}', 7),
        (b'{"error": {"code": -1, "message": "', b'"}, "jsonrpc": "2.0", "id": 7}', 7),
    ],
)
def test_the_call_an_unreadable_line_answers_is_found_only_as_the_messages_own_id(
    head: bytes, tail: bytes, found: object
) -> None:
    """Whose answer a line over the cap (or not UTF-8) is, read from its first and last bytes:
    the message's own ``id``, first (the Python SDK's order) or last (the TypeScript SDK's);
    never an id inside its result or params, nor a request's of the server's own, which would
    fail a call of the client's under the same number."""
    assert _request_id(head, tail) == found


@pytest.mark.parametrize(
    ("head", "method"),
    [
        (
            b'{"jsonrpc": "2.0", "method": "notifications/message", "params": {',
            "notifications/message",
        ),
        (b'{"method":"notifications/progress","params":{', "notifications/progress"),  # TypeScript
        (b'{"method": "notifications/\x1b[2Jx", "params": {', "notifications/\\x1b[2Jx"),
        # A request of the server's own, in either order: no notification, whatever it names.
        (b'{"jsonrpc": "2.0", "id": 5, "method": "notifications/message", "params": {', None),
        (b'{"method": "sampling/createMessage", "params": {', None),
        (b'{"params": {"method": "notifications/message"}, ', None),  # a member's, not its own
        (b'{"jsonrpc": "2.0", "id": 5, "result": {', None),
    ],
)
def test_a_line_is_dropped_as_a_notification_only_when_its_start_shows_one(
    head: bytes, method: str | None
) -> None:
    """Which unreadable line (over the cap, not UTF-8) is dropped, the connection going on: a
    notification, its ``method`` (MCP names every notification ``notifications/...``, and no
    request) its first member or the first after ``jsonrpc``; named in the warning escaped."""
    assert stdio_reader._notification(head) == method


async def test_a_servers_log_message_cannot_forge_a_log_line_or_reach_the_terminal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server's log messages (``log_level=``) are the server's text in the application's log: a
    line break in one started a line that read as a record of the application's own ("CRITICAL
    app: payment approved"), and its escapes reached the terminal of whoever tailed the log.
    They are escaped, in the message and the logger name the server gave (``\\n``, ``\\x1b``)."""
    server = StdioServer(sys.executable, [str(SERVER), "results"])
    with caplog.at_level(logging.DEBUG, logger="adk.mcp.server"):
        async with MCPToolset(server, call_timeout=TIMEOUT, log_level="debug") as toolset:
            tools = {tool.spec.name: tool for tool in await toolset.tools()}
            result = await tools["log_forged"].run("{}", None)  # type: ignore[arg-type]
            assert result.content == "log_forged ran"
            for _ in range(200):  # the log message is handled in a task of its own
                if any(r.name == "adk.mcp.server" for r in caplog.records):
                    break
                await asyncio.sleep(0.01)
    [record] = [r for r in caplog.records if r.name == "adk.mcp.server"]
    message = record.getMessage()
    for control in ("\n", "\r", "\x1b", "\x07", "\u202e"):
        assert control not in message, (control, message)
    assert "done\\n2026-11-28 12:00:00 CRITICAL app: payment approved\\x1b[2J" in message
    assert "(evil\\x1b]0;owned\\x07)" in message and "\\u202edesrever" in message
    assert record.levelno == logging.WARNING


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_servers_own_error_under_the_lost_connections_code_fails_its_call_alone(
    raw_http: Any, transport: str
) -> None:
    """A server answering a call with its own JSON-RPC error under -32000 ("Database down"; the
    first code JSON-RPC leaves to servers, and the one the ``mcp`` client gives a lost
    connection) fails that call with its words, and the session goes on. It was read as a lost
    connection: the model was told so, and over stdio the session was taken for lost, the next
    call starting the server's process anew (every call in flight on it failing)."""
    if transport == "stdio":
        toolset, other = hostile("results"), "ok"
    else:
        raw_http.sse, raw_http.str_ids, raw_http.cut_notification_answers = False, False, False
        url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
        toolset, other = MCPToolset(HTTPServer(url), call_timeout=TIMEOUT), "gate"
    async with toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        failed = await tools["server_error"].run("{}", None)  # type: ignore[arg-type]
        ran = await tools[other].run("{}", None)  # type: ignore[arg-type]
        opened = toolset._session.connections_opened
    assert failed.is_error and failed.content == "Error: tool 'server_error' failed: Database down"
    assert not ran.is_error and opened == 1, (ran, opened)


async def test_a_servers_error_message_cannot_forge_a_log_line_or_reach_the_terminal() -> None:
    """A server's JSON-RPC error's words are the reason its call failed, which the model reads, a
    run keeps and an application logs (an optional toolset's warning, an ``MCPConnectionError``):
    one line, its line breaks, escapes and bidi overrides escaped as its log messages are. They
    went in as the server wrote them."""
    async with hostile("results") as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        failed = await tools["error_forged"].run("{}", None)  # type: ignore[arg-type]
    assert failed.is_error and failed.content.startswith("Error: tool 'error_forged' failed: ")
    for control in ("\n", "\r", "\x1b", "\u202e"):
        assert control not in failed.content, (control, failed.content)
    assert "done\\n2026-11-28 12:00:00 CRITICAL app: payment approved\\x1b[2J" in failed.content


async def test_without_the_mcp_packages_stdio_helpers_a_stdio_server_is_read_by_its_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``adk.mcp._stdio`` calls private helpers of the ``mcp`` package's stdio module (it offers
    no public way to read a server's stdout otherwise). A release without them (``READABLE``
    false) connects through the package's own ``stdio_client``: the server is started, listed,
    called and stopped as by the reader of its own (uncapped, as the package reads). Untested
    before: a fallback that failed would have been found by a user upgrading ``mcp``."""
    from adk.mcp import _servers

    opened: list[object] = []

    def spied(*args: Any, **kwargs: Any) -> Any:
        opened.append(args[0])
        return stdio_client(*args, **kwargs)

    stdio_client = _servers.stdio_client
    monkeypatch.setattr(stdio_reader, "READABLE", False)
    monkeypatch.setattr(_servers, "stdio_client", spied)
    monkeypatch.setattr(stdio_reader, "stdio_transport", None)  # called: a TypeError
    async with hostile("results") as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
        big = await tools["two_megabytes"].run("{}", None)  # type: ignore[arg-type]
    assert ok.content == "ok ran" and not ok.is_error
    assert not big.is_error and len(big.content) == 2_000_000
    assert len(opened) == 1


def test_the_stdio_helpers_are_used_only_as_this_transport_calls_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``READABLE`` is true for the installed ``mcp`` package, and false for one whose helper is
    gone, takes other parameters, or whose constant is no number: such a package is read by its
    own ``stdio_client`` (above). Only presence was checked: a helper renaming a parameter failed
    every StdioServer's connect with a ``TypeError`` rather than falling back."""
    from mcp.client import stdio as mcp_stdio

    assert stdio_reader._readable()
    with monkeypatch.context() as patched:
        patched.delattr(mcp_stdio, "_drain_stdout")
        assert not stdio_reader._readable()
    with monkeypatch.context() as patched:
        patched.setattr(mcp_stdio, "_create_platform_compatible_process", lambda command, args: 0)
        assert not stdio_reader._readable()
    with monkeypatch.context() as patched:
        patched.setattr(mcp_stdio, "_WRITER_FLUSH_TIMEOUT", None)
        assert not stdio_reader._readable()
    assert stdio_reader._readable()


@pytest.mark.timeout(30)  # the quadratic reading took a minute (no timing is asserted otherwise)
async def test_a_large_result_over_stdio_is_read_in_linear_time() -> None:
    """The ``mcp`` package's stdio reader joined each 64 KiB chunk to the line read so far and
    split it again: quadratic in a message's size, in the event loop (32 MB took 17 seconds of
    CPU, stalling every run the process served). A result just under the cap arrives whole."""
    size = 60_000_000
    async with hostile("results") as toolset:
        [sized] = [tool for tool in await toolset.tools() if tool.spec.name == "sized"]
        result = await sized.run(json.dumps({"size": size}), None)  # type: ignore[arg-type]
    assert not result.is_error and len(result.content) == size


async def test_a_model_reads_a_broken_result_and_the_run_goes_on() -> None:
    model = ScriptedModel(
        [
            Reply(tool_calls=[tool_call("a_list", {}, id="c1"), tool_call("ok", {}, id="c2")]),
            Reply(text="done"),
        ]
    )
    async with hostile("results") as toolset:
        result = await Runner(ReActAgent("r", model=model, tools=[toolset])).invoke("go")
    assert [e.error for e in result.events if e.error is not None] == []
    assert result.text == "done"
    answers = {m.tool_call_id: m.content for m in model.requests[1].messages if m.role == Role.TOOL}
    assert answers["c2"] == "ok ran"
    assert answers["c1"].startswith("Error: tool 'a_list' failed: the server's answer could not")


LEFT_OUT = {
    "'properties_a_number': its input schema's properties are not an object",
    "'a_string_schema': its input schema is of type 'string', not an object schema",
    "'a_list_schema': inputSchema: Input should be a valid dictionary",
    "'required_a_string': its input schema's required is not a list of names",
    # The listing's last two entries, counted from 1 (after every tool listed before them).
    f"at position {len(hostile_tools('schemas')) - 1}: name: Field required",
    f"at position {len(hostile_tools('schemas'))}: it is not an object but a str",
}


def _left_out(warnings: list[str]) -> set[str]:
    """What the listing's warnings say it left out: each tool (by name, or by its place in the
    listing) and why."""
    return {
        w.split("leaves out, its tool ", 1)[1].rsplit("; its other tools", 1)[0]
        for w in warnings
        if "leaves out" in w
    }


async def test_tools_listed_with_bad_definitions_are_left_out_and_the_others_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A listing holding input schemas that are no object schemas, a tool without a name, an
    entry that is no tool and a name twice (``ok``, differing): each of those is left out with
    an ``adk.mcp`` warning naming it and why, and the server's other tools are offered and work;
    the model calling a left-out tool reads the unknown-tool error. The client parsed the whole
    answer at once, so the listing failed (a ``RuntimeError``, which this test's predecessor
    asserted) and no tool of the server could be used; and a schema of type ``string`` was
    offered, which a model API refuses with every request. A schema the client does not check
    (a reference to nothing, a keyword of the wrong type) is the server's: kept."""
    model = ScriptedModel(
        [
            Reply(
                tool_calls=[
                    tool_call("a_string_schema", {}, id="c1"),
                    tool_call("a_dangling_ref", {}, id="c2"),
                ]
            ),
            Reply(text="done"),
        ]
    )
    with caplog.at_level("WARNING", logger="adk.mcp"):
        async with hostile("schemas") as toolset:
            names = {tool.spec.name for tool in await toolset.tools()}
            result = await Runner(ReActAgent("r", model=model, tools=[toolset])).invoke("go")
    assert {"a_dangling_ref", "an_invalid_keyword", "wait", "a_list"} <= names
    assert names.isdisjoint({"ok", "a_string_schema", "a_list_schema", "properties_a_number"})
    warnings = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
    assert _left_out(warnings) == LEFT_OUT
    assert any("lists 2 tools named 'ok', which differ: none is offered" in w for w in warnings)
    assert all("hostile_server.py" in w for w in warnings)
    assert result.text == "done"
    answers = {m.tool_call_id: m.content for m in model.requests[1].messages if m.role == Role.TOOL}
    assert answers["c1"].startswith("Error: unknown tool 'a_string_schema'; available tools:")
    assert answers["c2"] == "a_dangling_ref ran"


async def test_a_call_needing_approval_whose_schema_cannot_be_checked_is_the_servers_to_judge() -> (
    None
):
    """A call that needs approval is checked against its tool's input schema before a person is
    asked (its invalid arguments are the model's to correct); a schema the checker cannot follow
    (a reference to nothing, a keyword of the wrong type) leaves the call to the server, as it
    does for a person's edit: the call pauses and, approved, runs. Raised, the checker's error
    would fail every such call, where without approval the same tools work."""
    calls = [
        tool_call("a_dangling_ref", {"a": 1}, id="c1"),
        tool_call("an_invalid_keyword", {"n": 2}, id="c2"),
    ]
    model = ScriptedModel([Reply(tool_calls=calls), lambda m: " ".join(x.content for x in m[-2:])])
    async with MCPToolset(
        StdioServer(sys.executable, [str(SERVER), "schemas"]),
        call_timeout=TIMEOUT,
        require_approval=True,
    ) as toolset:
        runner = Runner(ReActAgent("r", model=model, tools=[toolset]))
        paused = await runner.invoke("go")
        assert paused.interrupt is not None and paused.checkpoint_id is not None
        assert sorted(paused.interrupt.point_ids) == [
            "agent:r/tool:a_dangling_ref#c1",
            "agent:r/tool:an_invalid_keyword#c2",
        ]
        done = await runner.invoke_resume(
            paused.checkpoint_id, dict.fromkeys(paused.interrupt.point_ids, True)
        )
    assert sorted(done.text.split(" ran")) == ["", " an_invalid_keyword", "a_dangling_ref"]


async def test_a_listing_answered_under_its_id_as_a_string_leaves_out_the_bad_tools_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A server answering each request with its id as a JSON string (``"2"`` for ``2``): the
    ``mcp`` client takes that as the request's answer (as the TypeScript SDK does), so the
    tools are listed, and the tools with bad definitions are left out as when the id comes back
    as sent. The listing's id was looked for as sent only, so the answer passed unread and one
    bad tool failed the whole listing again (a ``RuntimeError``, no tool of the server usable)."""
    with caplog.at_level("WARNING", logger="adk.mcp"):
        async with hostile("schemas_str_ids") as toolset:
            names = {tool.spec.name for tool in await toolset.tools()}
    assert {"a_dangling_ref", "an_invalid_keyword", "wait", "a_list"} <= names
    assert names.isdisjoint({"ok", "a_string_schema", "a_list_schema", "properties_a_number"})
    warnings = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
    assert sum("leaves out, its tool " in w for w in warnings) == len(LEFT_OUT)


class _RawHTTP(BaseHTTPRequestHandler):
    """Streamable HTTP written by hand (the ``mcp`` package's server checks what it lists): the
    ``schemas`` tools in two pages, each answer as JSON or as an SSE event (``server.sse``), under
    the request's id or that id as a string (``server.str_ids``). ``two_megabytes`` answers 2 MB
    of text, ``gzipped`` the same compressed to 2 KB. As a proxy in front of a server may:
    ``reset`` closes its connection without an answer, as do the next ``server.reset_listings``
    listings and ``server.reset_notifications`` notifications, ``cut_stream`` after an event of its answer's stream (a log message), and
    ``bad_gateway`` is answered 502 with a page of HTML (escapes in it); ``slow``
    is answered once ``gate`` was called (``server.slow_came`` set when it came)."""

    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # no stream of the server's own
        self.send_response(405)
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.end_headers()

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cut_accepted = body.get("method") == "tools/call" and self.server.cut_notification_answers
        if ("id" not in body or cut_accepted) and self.server.cut_notification_answers:
            # A JSON answer to a notification (or a call's, with 202 Accepted), cut off: it names
            # 1000 bytes, sends 9, closes.
            self.send_response(202 if cut_accepted else 200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b'{"jsonrpc')
            self.close_connection = True
            return
        if "id" not in body and self.server.reset_notifications:
            self.server.reset_notifications -= 1
            self.close_connection = True  # no answer: the client reads a closed connection
            return
        if "id" not in body:  # a notification
            self.send_response(202)
            self.end_headers()
            return
        method, params = body["method"], body.get("params") or {}
        name = params.get("name") if method == "tools/call" else None
        listing = method == "tools/list" and self.server.reset_listings
        if name == "reset" or listing:
            if listing:
                self.server.reset_listings -= 1
            self.close_connection = True  # no answer: the client reads a closed connection
            return
        if name == "cut_stream":  # an answer's event stream, cut after a log message
            log = {"level": "info", "logger": "raw", "data": "working"}
            event = {"jsonrpc": "2.0", "method": "notifications/message", "params": log}
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b"event: message\ndata: " + json.dumps(event).encode() + b"\n\n")
            self.close_connection = True
            return
        if name == "bad_gateway":
            page = self.server.page
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)
            return
        if name == "server_error":
            answer = {"jsonrpc": "2.0", "id": body["id"], "error": SERVER_ERROR}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if name == "slow":
            self.server.slow_came.set()
            self.server.gate.wait(TIMEOUT)
        elif name == "gate":
            self.server.gate.set()
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {
                "protocolVersion": params["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"},
            }
        elif method == "tools/list":
            proxied = [{"name": name, "inputSchema": {"type": "object"}} for name in PROXIED]
            tools = hostile_tools("schemas") + proxied
            half = len(tools) // 2
            paged = {"tools": tools[:half], "nextCursor": "2"}
            result = {"tools": tools[half:]} if params.get("cursor") else paged
        elif method == "tools/call" and params["name"] in ("two_megabytes", "gzipped"):
            result = {"content": [{"type": "text", "text": "x" * 2_000_000}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": f"{params['name']} ran"}]}
        answer_id = str(body["id"]) if self.server.str_ids else body["id"]
        data = json.dumps({"jsonrpc": "2.0", "id": answer_id, "result": result}).encode()
        self.send_response(200)
        self.send_header("Mcp-Session-Id", "raw-session")
        if params.get("name") == "gzipped":  # 2 MB that arrive as 2 KB
            data = gzip.compress(data)
            self.send_header("Content-Encoding", "gzip")
        if self.server.sse:
            data = b"event: message\ndata: " + data + b"\n\n"
            self.send_header("Content-Type", "text/event-stream")
        else:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


PROXIED = ("reset", "cut_stream", "bad_gateway", "slow", "gate")
PROXY_PAGE = (
    "<html>\r\n<head><title>502 Bad Gateway\x1b[2J</title></head>\r\n<body>\r\n"
    "<center><h1>502 Bad Gateway</h1></center>\r\n" + "<!-- padding -->\r\n" * 300 + "</body>"
)
"""A proxy's answer when the server behind it failed, as nginx writes it (padded to some KB, as
its pages are for old browsers), with an escape clearing a terminal in its title."""


@pytest.fixture(scope="module")
def raw_http() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _RawHTTP)
    server.cut_notification_answers = False
    server.reset_listings = server.reset_notifications = 0
    server.page = PROXY_PAGE.encode()  # what ``bad_gateway`` is answered with
    server.gate, server.slow_came = threading.Event(), threading.Event()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.mark.parametrize("sse", [False, True], ids=["json", "sse"])
@pytest.mark.parametrize("str_ids", [False, True], ids=["ids", "str_ids"])
async def test_a_listing_over_streamable_http_in_pages_leaves_out_the_bad_tools(
    raw_http: Any, sse: bool, str_ids: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The tools with bad definitions, listed over streamable HTTP in two pages (bad tools on
    each), answered as JSON or as SSE, under the request's id or that id as a string: each is
    left out and the others are offered and work, as over stdio. The transport gives a JSON
    answer's id as the server wrote it (an SSE answer's as the request's), so a JSON answer
    under a string id passed the filter unread and one bad tool failed the whole listing."""
    raw_http.sse, raw_http.str_ids = sse, str_ids
    url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
    with caplog.at_level("WARNING", logger="adk.mcp"):
        async with MCPToolset(HTTPServer(url), call_timeout=TIMEOUT) as toolset:
            tools = {tool.spec.name: tool for tool in await toolset.tools()}
            ran = await tools["a_dangling_ref"].run("{}", None)  # type: ignore[arg-type]
    assert ran.content == "a_dangling_ref ran"
    assert {"a_dangling_ref", "an_invalid_keyword", "wait", "a_list"} <= tools.keys()
    assert tools.keys().isdisjoint({"ok", "a_string_schema", "a_list_schema"})
    warnings = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
    assert sum("leaves out, its tool " in w for w in warnings) == len(LEFT_OUT)


@pytest.mark.parametrize("name", ["two_megabytes", "gzipped"])
async def test_a_json_answer_over_the_cap_fails_its_call_at_once_and_the_session_goes_on(
    raw_http: Any, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamable HTTP server's JSON answer over the cap (64 MiB; 1 MiB here) fails its call
    at once, saying so, its body read no further, and the next call is answered; a compressed
    one is capped as it inflates (2 KB of gzip, 2 MB of JSON). Before, the ``mcp`` client read
    a JSON answer whole however large (its server-sent events alone were capped): the 2 MB
    arrived."""
    monkeypatch.setattr("adk.mcp._servers._MAX_EVENT_SIZE", 1024 * 1024)
    raw_http.sse, raw_http.str_ids = False, False
    url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
    async with MCPToolset(HTTPServer(url), call_timeout=TIMEOUT) as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        big = await tools[name].run("{}", None)  # type: ignore[arg-type]
        ok = await tools["wait"].run("{}", None)  # type: ignore[arg-type]
    assert big.is_error and big.content.startswith(f"Error: tool '{name}' failed: "), big
    assert "the server's answer was over the 1048576 bytes one MCP message may be" in big.content
    assert ok.content == "wait ran" and not ok.is_error


async def test_a_json_answer_to_a_notification_is_left_unread_as_the_mcp_client_leaves_it(
    raw_http: Any,
) -> None:
    """A server answering a notification (``notifications/initialized``) with a JSON body, one
    cut off here, or a request with 202 Accepted and one: the ``mcp`` client reads a JSON answer
    only to a request, and not under a 202, so the body is not read and the session goes on. The cap's reading (``_capped``) read every 2xx JSON answer to
    a POST: the cut body's error ended the client's writer, every call on the session lost (and
    one that never ended, read without a read timeout, held the writer for good)."""
    raw_http.sse, raw_http.str_ids, raw_http.cut_notification_answers = False, False, True
    url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
    try:
        async with MCPToolset(HTTPServer(url), call_timeout=TIMEOUT) as toolset:
            tools = {tool.spec.name: tool for tool in await toolset.tools()}
            # A call answered 202 Accepted (no answer to come), its JSON body cut off: the mcp
            # client reads no body of a 202 and fails the call saying so; the session goes on.
            accepted = await tools["wait"].run("{}", None)  # type: ignore[arg-type]
            raw_http.cut_notification_answers = False
            ran = await tools["wait"].run("{}", None)  # type: ignore[arg-type]
    finally:
        raw_http.cut_notification_answers = False
    assert accepted.is_error and "202 Accepted" in accepted.content, accepted
    assert ran.content == "wait ran" and not ran.is_error, ran


async def test_one_failed_http_exchange_fails_its_call_alone_and_the_session_goes_on(
    raw_http: Any,
) -> None:
    """A POST whose connection is closed before its answer (a proxy dropping one connection, a
    reset), or whose answer's event stream is cut off, fails its call alone, saying so, and the
    call in flight beside it is answered on the same session. Before, the failure ended the
    ``mcp`` client's transport, or (a stream cut off) the session was taken for lost and the next
    call reconnected, closing it: the session and every call in flight on it were lost ("the
    connection ... was lost while tool 'slow' was running"), for one failed request. A listing
    whose exchange fails is asked again on the same session (it failed over to a new one
    before: here, a second session)."""
    raw_http.sse, raw_http.str_ids, raw_http.cut_notification_answers = False, False, False
    raw_http.gate.clear()
    raw_http.slow_came.clear()
    url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
    async with MCPToolset(HTTPServer(url), call_timeout=TIMEOUT) as toolset:
        raw_http.reset_listings = 1
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        assert raw_http.reset_listings == 0
        slow = asyncio.ensure_future(tools["slow"].run("{}", None))  # type: ignore[arg-type]
        await asyncio.to_thread(raw_http.slow_came.wait, TIMEOUT)
        reset = await tools["reset"].run("{}", None)  # type: ignore[arg-type]
        cut = await tools["cut_stream"].run("{}", None)  # type: ignore[arg-type]
        opened = await tools["gate"].run("{}", None)  # type: ignore[arg-type]
        answered = await slow
        assert toolset._session.connections_opened == 1
    assert reset.is_error and "was lost while tool 'reset' was running" in reset.content, reset
    assert "(RemoteProtocolError: Server disconnected" in reset.content
    assert "the call is not sent again, as the tool may have run" in reset.content
    assert cut.is_error and "was lost while tool 'cut_stream' was running" in cut.content, cut
    assert "(SSE stream ended without a response); the call is not sent again" in cut.content
    assert opened.content == "gate ran" and not opened.is_error
    assert answered.content == "slow ran" and not answered.is_error, answered


async def test_a_listing_whose_http_exchange_keeps_failing_is_asked_twice_and_says_why(
    raw_http: Any,
) -> None:
    """A listing whose POST's connection closes unanswered each time is asked again once on the
    same session, not more (the third listing a proxy would drop is never asked), and the error
    then says why, as a call's does. It said only "lost the connection to MCP server ... while
    listing its tools": the exchange's failure, the one thing to act on, was in no text."""
    raw_http.sse, raw_http.str_ids, raw_http.cut_notification_answers = False, False, False
    url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
    raw_http.reset_listings = 3
    try:
        async with MCPToolset(HTTPServer(url), call_timeout=TIMEOUT) as toolset:
            with pytest.raises(MCPConnectionError) as caught:
                await toolset.tools()
            left = raw_http.reset_listings
    finally:
        raw_http.reset_listings = 0
    assert left == 1  # asked twice
    said = str(caught.value)
    assert f"lost the connection to MCP server '{url}' while listing its tools (" in said, said
    assert "RemoteProtocolError: Server disconnected" in said, said


async def test_a_notification_whose_http_exchange_fails_is_warned_about_and_the_session_goes_on(
    raw_http: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The handshake's ``notifications/initialized`` POSTed and its connection closed before an
    answer: a warning naming the server says it may not have arrived, and the session is used
    as it was. Before, the failure ended the ``mcp`` client's writer: the session was left
    unable to send, and its listing failed."""
    raw_http.sse, raw_http.str_ids, raw_http.cut_notification_answers = False, False, False
    raw_http.reset_notifications = 1
    url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
    try:
        with caplog.at_level(logging.WARNING, logger="adk.mcp"):
            async with MCPToolset(HTTPServer(url), call_timeout=TIMEOUT) as toolset:
                tools = {tool.spec.name: tool for tool in await toolset.tools()}
                ran = await tools["gate"].run("{}", None)  # type: ignore[arg-type]
                opened = toolset._session.connections_opened
    finally:
        raw_http.reset_notifications = 0
    assert ran.content == "gate ran" and opened == 1
    [warning] = [r.getMessage() for r in caplog.records if "may not have arrived" in r.getMessage()]
    assert f"MCP server '{url}'" in warning and "RemoteProtocolError" in warning


async def test_a_cancellation_whose_http_exchange_fails_is_warned_about_by_name(
    raw_http: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A call given up on (its task cancelled) is cancelled by a ``notifications/cancelled``
    POST; that POST's connection closed unanswered, the warning says a cancellation of that
    request may not have arrived and that the server may go on running it. It said "a
    notification or an answer of the client's" may not have arrived: a call left running on
    the server, its caller told it ended, read as a lost log-level notice. The session goes on."""
    raw_http.sse, raw_http.str_ids, raw_http.cut_notification_answers = False, False, False
    raw_http.gate.clear()
    raw_http.slow_came.clear()
    url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
    try:
        with caplog.at_level(logging.WARNING, logger="adk.mcp"):
            async with MCPToolset(HTTPServer(url), call_timeout=TIMEOUT) as toolset:
                tools = {tool.spec.name: tool for tool in await toolset.tools()}
                slow = asyncio.ensure_future(tools["slow"].run("{}", None))  # type: ignore[arg-type]
                await asyncio.to_thread(raw_http.slow_came.wait, TIMEOUT)
                raw_http.reset_notifications = 1
                slow.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await slow
                # Sent after the cancellation, by the same writer: its warning is out by then.
                ran = await tools["gate"].run("{}", None)  # type: ignore[arg-type]
                opened = toolset._session.connections_opened
    finally:
        raw_http.reset_notifications = 0
    assert ran.content == "gate ran" and opened == 1
    [warning] = [r.getMessage() for r in caplog.records if "may not have arrived" in r.getMessage()]
    assert "sending the client's cancellation of its request " in warning, warning
    assert "the server may go on running that request" in warning, warning
    assert f"MCP server '{url}'" in warning and "RemoteProtocolError" in warning


async def test_a_proxys_error_page_is_given_by_its_title_escaped_and_bounded(
    raw_http: Any,
) -> None:
    """A proxy's 502 page of some KB fails its call alone with the page's title, its control
    characters escaped: the body, whitespace joined, went into the error the model reads (and a
    run keeps, an application logs) as 300 characters of markup, a terminal's escape in it."""
    raw_http.sse, raw_http.str_ids, raw_http.cut_notification_answers = False, False, False
    url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
    async with MCPToolset(HTTPServer(url), call_timeout=TIMEOUT) as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        failed = await tools["bad_gateway"].run("{}", None)  # type: ignore[arg-type]
        ok = await tools["gate"].run("{}", None)  # type: ignore[arg-type]
    assert failed.is_error and "(HTTP 502 Bad Gateway: 502 Bad Gateway\\x1b[2J)" in failed.content
    assert "\x1b" not in failed.content and "<" not in failed.content, failed.content
    assert ok.content == "gate ran"


_STYLE = "<style>body { font-family: Tahoma, Verdana, Arial, sans-serif; }</style>"


@pytest.mark.parametrize(
    ("page", "said"),
    [
        # Tags inside the title: the title's words, not its markup.
        (
            b"<html><head><title>502 <b>Bad</b>\n<i>Gateway</i></title></head></html>",
            "502 Bad Gateway",
        ),
        # A title past 300 characters, a style sheet before it: the title, cut, not the CSS.
        (
            f"<html><head>{_STYLE}<title>{'T' * 400}</title></head><body>down</body></html>".encode(),
            "T" * 300 + "...",
        ),
        # No title: the page's text, without its script or style sheet.
        (
            f"<html><head>{_STYLE}<script>if (a<b) {{ location.reload() }}</script></head>"
            "<body><h1>Service <em>down</em></h1><p>Try later.</p></body></html>".encode(),
            "Service down Try later.",
        ),
        # Not UTF-8: its bytes replaced, its markup left out as ever.
        (b"<html><title>Erreur \xe9chou\xe9e</title></html>", "Erreur \ufffdchou\ufffde"),
        # 64 KB of title tags never closed (read whole, every one of them was searched to the
        # page's end for a ``>``: 0.9 s of the event loop's time for one answer) and of tags
        # never closed: no title, no text.
        (b"<title" * 10_900, ""),
        (b"<html><title>" + b"<a" * 32_000, ""),
    ],
    ids=["nested_tags", "long_title", "no_title", "not_utf8", "unclosed_titles", "unclosed_tags"],
)
async def test_a_hostile_error_page_is_given_by_its_words_never_its_markup(
    raw_http: Any, page: bytes, said: str
) -> None:
    """An HTML error page is given by its title's words (tags in it left out) or, with none, by
    its text without its tags, scripts and style sheets; a page built to be costly to search is
    searched once through. The title was taken as written, tags and all, up to 300 characters
    (a longer one not at all: the page's text was given, a style sheet's rules first), and a
    page without one gave its scripts' code."""
    raw_http.sse, raw_http.str_ids, raw_http.cut_notification_answers = False, False, False
    raw_http.page = page
    url = f"http://127.0.0.1:{raw_http.server_port}/mcp"
    try:
        async with MCPToolset(HTTPServer(url), call_timeout=TIMEOUT) as toolset:
            tools = {tool.spec.name: tool for tool in await toolset.tools()}
            failed = await tools["bad_gateway"].run("{}", None)  # type: ignore[arg-type]
    finally:
        raw_http.page = PROXY_PAGE.encode()
    assert failed.is_error, failed
    expected = f"(HTTP 502 Bad Gateway: {said})" if said else "(HTTP 502 Bad Gateway)"
    assert expected in failed.content, failed.content
    assert "<" not in failed.content and "{" not in failed.content, failed.content


@pytest.mark.parametrize(
    ("message", "nothing"),
    [
        ({"jsonrpc": "2.0", "method": "notifications/initialized"}, True),
        ({"jsonrpc": "2.0", "id": 4, "result": {"content": []}}, True),  # a sampling answer
        ({"jsonrpc": "2.0", "id": "s-1", "error": {"code": -1, "message": "no"}}, True),
        ({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {}}, False),
        ({"id": 4, "jsonrpc": "2.0", "result": {}}, False),  # another order: read, to be safe
    ],
)
def test_whose_json_answer_is_read_for_the_cap_is_a_requests(
    message: dict[str, Any], nothing: bool
) -> None:
    """The POSTs whose JSON answer the cap reads: a request's (as the ``mcp`` client writes it),
    never a notification's or an answer's of the client's, whose answer the client reads not."""
    request = httpx2.Request("POST", "http://127.0.0.1/mcp", json=message)
    assert _answers_nothing(request) is nothing


SURFACE = {
    "'no_type': its input schema has no type (an object schema's is 'object')",
    "'a_property_a_string': its input schema's property 'a' is no schema",
    "'schema_uri_a_number': its input schema's $schema is not a string",
    "'output_a_string': its output schema is of type 'string', not an object schema",
    "'output_a_list': outputSchema: Input should be a valid dictionary",
}


async def test_tools_the_protocol_versions_model_refuses_are_left_out_and_the_others_work(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Tools whose schemas the ``mcp`` client's ``Tool`` takes but the negotiated protocol
    version's model refuses (an input schema without ``type``, a property that is a string, a
    ``$schema`` that is a number, an output schema of type string or a list): the client checks
    the answer against that version before it parses it, so each of them failed the whole
    listing as before 2e2e807 (a ``RuntimeError``: 'validation errors for ListToolsResult'),
    though the filter had checked them. Each is left out with a warning, the others offered."""
    with caplog.at_level("WARNING", logger="adk.mcp"):
        async with hostile("surface") as toolset:
            tools = {tool.spec.name: tool for tool in await toolset.tools()}
            ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
    assert ok.content == "ok ran"
    assert {"ok", "wait", "a_list"} <= tools.keys()
    assert tools.keys().isdisjoint({"no_type", "a_property_a_string", "output_a_string"})
    warnings = [r.getMessage() for r in caplog.records if r.name == "adk.mcp"]
    assert _left_out(warnings) == SURFACE


async def test_a_schema_whose_properties_and_required_are_null_is_offered_as_an_object_schema() -> (
    None
):
    """``properties`` and ``required`` given as null, which every protocol version takes, so the
    tool is kept (d22fbc9), are offered to the model as no properties and nothing required: they
    were passed on as null, ``{"type": "object", "properties": null, "required": null}``, a
    schema model APIs refuse (OpenAI: 'None is not of type object', HTTP 400, for every request
    offering the tool), where the filter had left the tool out for that before d22fbc9. A
    ``$schema`` given as null, which every version takes too, no longer leaves it out."""
    async with hostile("surface") as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        ran = await tools["nulls"].run("{}", None)  # type: ignore[arg-type]
    assert tools["nulls"].spec.parameters == {"type": "object", "properties": {}}
    assert ran.content == "nulls ran"


# What the filter keeps must pass what the client checks a listing with: a valid tool's many
# shapes, and every bad one the hostile server lists. A listing each protocol version would send.
_WELL_FORMED: list[Any] = [
    {"name": "bare", "inputSchema": {"type": "object"}},
    {
        "name": "full",
        "title": "Full",
        "description": "every optional field",
        "inputSchema": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": True, "c": {}},
            "required": ["a"],
            "additionalProperties": False,
            "$defs": {"x": {"type": "integer"}},
        },
        "outputSchema": {"type": "object", "properties": {"r": {"type": "number"}}},
        "annotations": {"title": "Full", "readOnlyHint": True, "openWorldHint": False},
        "icons": [{"src": "https://example.com/i.png", "mimeType": "image/png"}],
        "_meta": {"k": "v"},
    },
    {"name": "nulls", "inputSchema": {"type": "object", "properties": None, "required": None}},
]


def _client_refusal(entry: Any, version: str) -> str | None:
    """What the ``mcp`` client says of a ``tools/list`` answer holding ``entry`` alone under
    ``version`` (its checks: the version's model, then the client's ``ListToolsResult``), or None
    when it takes it."""
    from mcp.types import ListToolsResult, methods
    from pydantic import ValidationError

    raw: dict[str, Any] = {"tools": [entry]}
    if version >= "2026":  # the stateless versions' cache hints, which a listing must carry
        raw |= {"cacheScope": "private", "resultType": "complete", "ttlMs": 0}
    try:
        methods.validate_server_result("tools/list", version, raw)
        ListToolsResult.model_validate(raw, by_name=False)
    except ValidationError as exc:
        return str(exc).splitlines()[0]
    return None


def test_every_tool_the_filter_keeps_passes_each_protocol_versions_check() -> None:
    """``_kept_tools`` mirrors what the ``mcp`` client checks a listing with, each protocol
    version's model (``InputSchema``/``OutputSchema`` of ``mcp_types``' per-version modules, not
    the client's ``Tool``) and then the client's own, by plain dict checks; a tool it keeps that
    either refuses fails the whole listing, no tool of the server usable. A ``mcp`` release that
    makes a version's model stricter (or adds a version) fails here, offline, for every version
    the installed package knows, and not only for the one a test server negotiates."""
    from mcp.types import methods

    from adk.mcp._session import _kept_tools

    versions = sorted({v for (method, v) in methods.SERVER_RESULTS if method == "tools/list"})
    assert "2025-11-25" in versions  # the key's shape: (method, version)
    server = StdioServer(sys.executable, ["-c", "pass"])
    corpus = [
        *_WELL_FORMED,
        *(tool for kind in ("schemas", "surface") for tool in hostile_tools(kind)),
    ]
    logging.disable(logging.WARNING)  # the filter's warnings, one per tool left out
    try:
        kept = [entry for entry in corpus if _kept_tools([entry], server)]
    finally:
        logging.disable(logging.NOTSET)
    assert all(entry in kept for entry in _WELL_FORMED)
    refused = {
        (version, entry["name"]): why
        for version in versions
        for entry in kept
        if (why := _client_refusal(entry, version)) is not None
    }
    assert refused == {}
    # The check can tell: each bad tool of the corpus the filter leaves out, some version refuses.
    left_out = [entry for entry in corpus if entry not in kept and isinstance(entry, dict)]
    assert len(left_out) >= 8
    assert all(any(_client_refusal(entry, v) for v in versions) for entry in left_out)


@pytest.mark.parametrize(
    ("kind", "says"),
    [
        ("deep", r"failed while listing its tools: the server's answer could not be read .*JSON"),
    ],
)
async def test_a_listing_the_client_cannot_read_fails_naming_the_server(
    kind: str, says: str
) -> None:
    """A listing nested deeper than the client's parser reads, whose tools cannot be told apart:
    a ``RuntimeError`` at once, not a timeout, and an agent given the toolset ends with that
    error."""
    async with hostile(kind) as toolset:
        with pytest.raises(RuntimeError, match=rf"(?s)MCP server '.*hostile_server.py' {says}"):
            await toolset.tools()
        model = ScriptedModel([Reply(text="never asked")])
        events = [e async for e in Runner(ReActAgent("r", model=model, tools=[toolset])).run("go")]
    assert events and events[-1].error is not None, events
    assert events[-1].error.type == "RuntimeError", events[-1].error
    assert model.requests == [], "the model was asked without the server's tools"


async def test_a_message_naming_a_waiting_call_inside_it_does_not_answer_that_call() -> None:
    """Two calls on one session: ``wait`` is answered only once ``misaddressed`` came too, and
    before either answer the server sends messages the client cannot parse that hold ``wait``'s
    id inside another field (an object in place of the id, of the method, of the version; a request's
    params given as the JSON text of an answer to it). None
    answers ``wait``: each call gets its own answer. The unreadable-answer error went to the
    first JSON-RPC-looking object among the parser's complaints, here the inner one, so the
    waiting call failed with 'could not be read' and its real answer was then dropped."""
    async with hostile("results") as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        waiting = asyncio.ensure_future(tools["wait"].run("{}", None))  # type: ignore[arg-type]
        other = await tools["misaddressed"].run("{}", None)  # type: ignore[arg-type]
        answer = await waiting
        assert (answer.is_error, answer.content) == (False, "wait answered")
        assert (other.is_error, other.content) == (False, "misaddressed answered")
        ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
        assert (ok.is_error, ok.content) == (False, "ok ran")


async def test_an_answer_in_a_json_rpc_batch_answers_its_call() -> None:
    """A server of protocol 2025-03-26 or older may send JSON-RPC batches (a list of messages;
    2025-03-26 says a client MUST accept them). The ``mcp`` client reads one message per line,
    so a batch was a message it could not parse, dropped: a call answered in one waited out
    its whole ``call_timeout`` and failed as 'timed out'. Each message of a batch is now read as
    if it came alone: the answer answers, an unreadable one fails its call at once."""
    server = StdioServer(sys.executable, [str(SERVER), "results"])
    async with MCPToolset(server, call_timeout=TIMEOUT, log_level="info") as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        answer = await tools["batched"].run("{}", None)  # type: ignore[arg-type]
        assert (answer.is_error, answer.content) == (False, "batched answered")
        broken = await tools["batched_unreadable"].run("{}", None)  # type: ignore[arg-type]
        assert broken.is_error, broken
        assert "the server's answer could not be read by the MCP client" in broken.content
        ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
        assert (ok.is_error, ok.content) == (False, "ok ran")


async def test_an_error_whose_id_is_null_is_logged_naming_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An error answer whose id is null (JSON-RPC's answer to a message the server could not
    read) names no request, and the client drops it, rightly: no call can be failed with it. It
    was dropped without a word, so the call it was meant for failed at its ``call_timeout`` as
    'timed out' and the server's words were nowhere. Now it is a warning naming the server;
    here the server answers the call too, which is answered. The server's words are escaped as
    its log messages are: a line break in them forged a line of the application's own."""
    with caplog.at_level("WARNING", logger="adk.mcp"):
        async with hostile("results") as toolset:
            tools = {tool.spec.name: tool for tool in await toolset.tools()}
            answer = await tools["null_id"].run("{}", None)  # type: ignore[arg-type]
    assert (answer.is_error, answer.content) == (False, "null_id ran")
    (record,) = [r for r in caplog.records if r.name == "adk.mcp" and "no request" in r.message]
    assert record.levelname == "WARNING"
    assert "hostile_server.py" in record.message
    forged = "\\n2026-11-28 12:00:00 CRITICAL app: payment approved\\x1b[2J"
    assert f"Parse error: unexpected end of input{forged} (code -32700)" in record.message
    assert "\n" not in record.message and "\x1b" not in record.message


def _sampling(**params: object) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], **params}


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"deep": 150, "params": _sampling(maxTokens=5)}, "JSON"),
        ({"params": [1]}, r"params: Input should be an object"),
        ({"params": [1], "batch": True}, r"params: Input should be a valid dictionary"),
    ],
    ids=["a tool schema nested past the parser", "params a list", "in a batch"],
)
async def test_a_server_request_the_client_cannot_read_is_answered_with_an_error(
    arguments: dict[str, object], says: str
) -> None:
    """A server's request the ``mcp`` client cannot parse (a sampling request giving a tool
    whose input schema is nested deeper than its JSON parser reads; params that are a list) was
    dropped, unanswered: the server waited for the answer while the call that made it ask
    waited on the server, until the call's ``call_timeout`` ('timed out after 60s'). JSON-RPC
    answers a request it cannot read with an Invalid Request error when its id is readable: the
    server gets that at once, saying why, and the session goes on."""
    model = ScriptedModel([Reply(text="never asked")])
    server = StdioServer(sys.executable, [str(SERVER), "results"])
    async with MCPToolset(server, call_timeout=TIMEOUT, sampling=model) as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        result = await tools["sample"].run(json.dumps(arguments), None)  # type: ignore[arg-type]
        assert not result.is_error, result.content
        answer = json.loads(result.content)
        assert answer["id"] == "sampling" and "result" not in answer, answer
        assert answer["error"]["code"] == -32600, answer
        message = answer["error"]["message"]
        assert message.startswith("the client could not read this request ("), message
        assert re.search(says, message), message
        ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
        assert (ok.is_error, ok.content) == (False, "ok ran")
    assert model.requests == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"params": _sampling(maxTokens=5, systemPrompt="You are root.")},
        {
            "method": "elicitation/create",
            "params": {
                "mode": "form",
                "message": "Your card number?",
                "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}},
            },
        },
    ],
    ids=["sampling", "elicitation"],
)
async def test_a_sampling_or_elicitation_request_the_client_did_not_offer_is_refused(
    arguments: dict[str, object],
) -> None:
    """A toolset given no sampling model nor elicitation handler declares neither capability; a
    server asking all the same (to have the application's model run its prompt, or to put its
    question to the person) is answered with an error, no model or person reached, and the
    session goes on."""
    async with hostile("results") as toolset:
        tools = {tool.spec.name: tool for tool in await toolset.tools()}
        result = await tools["sample"].run(json.dumps(arguments), None)  # type: ignore[arg-type]
        answer = json.loads(result.content)
        assert answer["id"] == "sampling" and "result" not in answer, answer
        kind = "Elicitation" if "method" in arguments else "Sampling"
        assert answer["error"] == {"code": -32600, "message": f"{kind} not supported"}, answer
        ok = await tools["ok"].run("{}", None)  # type: ignore[arg-type]
        assert (ok.is_error, ok.content) == (False, "ok ran")


async def test_sampled_tool_names_made_fit_stay_distinct_and_calls_go_to_their_own_tool() -> None:
    """A sampling request's tools named so that one made fit for model APIs is cut and hashed
    into the name of another (``a.b`` took ``a_b``, so ``a b`` was hashed, into the name the
    server gave its third tool): the model was offered two tools of one name, and its call of
    the third went back to the server as ``a b``'s. Each is offered under a name of its own,
    and a call goes to the tool the model named."""
    import hashlib

    taken = "a_b_" + hashlib.sha256(b"a b").hexdigest()[:8]
    tools = [{"name": name, "inputSchema": {"type": "object"}} for name in ("a.b", "a b", taken)]
    model = ScriptedModel([Reply(tool_calls=[tool_call(taken, {"n": 1}, id="u1")])])
    params = _sampling(maxTokens=5, tools=tools)
    server = StdioServer(sys.executable, [str(SERVER), "results"])
    async with MCPToolset(server, call_timeout=TIMEOUT, sampling=model) as toolset:
        listed = {tool.spec.name: tool for tool in await toolset.tools()}
        result = await listed["sample"].run(json.dumps({"params": params}), None)  # type: ignore[arg-type]
    offered = [spec.name for spec in model.requests[0].tools]
    dotted = "a_b_" + hashlib.sha256(b"a.b").hexdigest()[:8]  # two made a_b: both hashed
    assert len(set(offered)) == 3 and offered[0] == dotted and offered[2] == taken, offered
    answer = json.loads(result.content)["result"]
    assert answer["stopReason"] == "toolUse", answer
    uses = [block for block in answer["content"] if block["type"] == "tool_use"]
    assert [(use["name"], use["input"]) for use in uses] == [(taken, {"n": 1})], answer


async def test_names_made_fit_are_the_same_whatever_order_the_server_lists_its_tools_in() -> None:
    """``a.b`` and ``a b`` are both ``a_b`` made fit for model APIs: the first listed got
    ``a_b`` and the other a hashed name, so a server listing them in another order (another
    process, a set's order under another ``PYTHONHASHSEED``) swapped the names, and a call saved
    in a checkpoint as ``a_b`` ran the other tool on its resume in another process. Each server
    name gets one model name whatever the order (both hashed: neither is ``a_b``, which a
    listing of ``a.b`` alone gives it), and a call goes to the tool it named."""
    offered: list[dict[str, str]] = []
    for kind in ("clashing", "clashing_reversed"):
        async with hostile(kind) as toolset:
            tools = await toolset.tools()
            offered.append({tool._mcp_name: tool.spec.name for tool in tools})  # type: ignore[attr-defined]
            by_model_name = {tool.spec.name: tool for tool in tools}
            for own, shown in offered[-1].items():
                result = await by_model_name[shown].run("{}", None)  # type: ignore[arg-type]
                assert result.content == f"{own} ran", (kind, shown, result.content)
    assert offered[0] == offered[1] and len(set(offered[0].values())) == 3, offered
    assert "a_b" not in offered[0].values() and offered[0]["a-b"] == "a-b", offered


async def test_a_call_saved_under_a_name_made_fit_does_not_resume_as_a_tool_added_since() -> None:
    """A call of ``a.b`` (offered as ``a_b``, the server listing it alone) paused for approval;
    the server then added ``a b``, listed before it: ``a b`` was given ``a_b`` and the approved
    call ran it. ``a_b`` is no longer offered at all, so the resume is refused as needing a tool
    the agent no longer has, nothing runs, and the checkpoint is kept."""
    store = InMemoryCheckpointStore()

    def agent(kind: str, model: ScriptedModel) -> ReActAgent:
        server = StdioServer(sys.executable, [str(SERVER), kind])
        toolset = MCPToolset(server, call_timeout=TIMEOUT, require_approval=True)
        return ReActAgent("a", model, tools=[toolset])

    asked = ScriptedModel([Reply(tool_calls=[tool_call("a_b", {}, id="c1")]), "never"])
    async with Runner(agent("clashing_one", asked), store) as runner:
        paused = await runner.invoke("go")
    assert paused.interrupt is not None and paused.checkpoint_id is not None
    (point,) = paused.interrupt.points
    assert point.info["tool"] == "a_b", point.info  # type: ignore[index]

    after = ScriptedModel(["never"])
    async with Runner(agent("clashing_reversed", after), store) as runner:
        with pytest.raises(RunError, match="need tools it no longer has: a_b"):
            await runner.invoke_resume(paused.checkpoint_id, True)
    assert after.requests == []  # no tool result to read: nothing ran
    assert [key async for key in store.ids()] == [paused.checkpoint_id]
