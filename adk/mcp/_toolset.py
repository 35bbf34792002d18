"""``MCPToolset``: an MCP server's tools (and prompts) as pyadk tools, resolved at run time.

Everything a model can trigger through a tool call ends as a ``ToolResult`` — bad JSON, a server
error, a timeout, a dropped connection — because the model can read an error and try something
else, while an exception would end the run. Listing tools and rendering prompts happen in code the
developer controls, so there failures raise (``ConnectionError``, ``TimeoutError``,
``RuntimeError``) with the server and the reason in the message; a server that cannot be used
(not reached, its handshake or its listing not answered) raises ``MCPConnectionError``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import httpx2
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    BlobResourceContents,
    CallToolResult,
    LoggingLevel,
    Resource,
    TextResourceContents,
)
from mcp.types import Prompt as _WirePrompt
from mcp.types import Tool as _WireTool

from .._aio import SharedCloseable, finish
from .._approval import gate, resumed_decision
from .._loop_clients import LoopClients
from ..messages import Message
from ..models.base import ChatModel
from ..tools.base import Tool, ToolContext, ToolResult, ToolSpec
from ..tools.function import _approval_rule, _ApprovalCheck
from ._content import blocks_message, result_of
from ._hooks import (
    ElicitationHandler,
    ProgressHandler,
    SamplingHandler,
    _ClientHooks,
    _current_call,
    check_handler,
    check_log_level,
    declares_sampling_tools,
    elicitation_callback,
    progress_callback,
    sampling_callback,
)
from ._names import (
    _KEPT,
    _NAME_LIMIT,
    _NOT_IN_NAMES,
    _model_names,
    _model_parameters,
    _offered_as,
)
from ._sendable import check_sendable, parse_arguments
from ._servers import (
    HTTPServer,
    ServerConfig,
    SSEServer,
    StdioServer,
    _current_delivery,
    _Delivery,
    _span_attributes,
)
from ._session import (
    Connection,
    ListingWarnings,
    MCPConnectionError,
    Session,
    SharedListing,
    describe_error,
)

if TYPE_CHECKING:
    from ..context import RunContext
    from ..resources import Prompt

__all__ = ["MCPToolset"]

_T = TypeVar("_T")

_ToolFilter = Callable[[ToolSpec], bool] | Collection[str]
"""Which server tools to offer: a collection of tool names, or a predicate over each tool's spec
(with the server's own, unprefixed name)."""

_Approval = bool | _ApprovalCheck
"""Whether a tool's calls pause for approval: always, never, or as a function of each call
decides (``require_approval`` of a function tool)."""

_ApprovalSetting = bool | _ToolFilter | Mapping[str, _Approval]
"""``MCPToolset(require_approval=)``: every tool or none, some tools (names or a predicate over
their specs, as ``tool_filter``), or a map of tool names (the server's) to each one's
``require_approval`` (a bool or a function of each call)."""

logger = logging.getLogger("adk.mcp")

_PAGE_LIMIT = 100  # a server whose cursors never end cannot hang listing
_PROTOCOL_VERSION = "mcp.protocol.version"  # the MCP conventions' attribute (tracing)
# Failures that mean the connection itself is gone, not that the request was refused.
_TRANSPORT_ERRORS = (anyio.BrokenResourceError, anyio.ClosedResourceError, httpx2.TransportError)
_PLAIN_LOSS = frozenset({"connection closed", "brokenresourceerror", "closedresourceerror"})

_PREFIX_LIMIT = _KEPT - 2
"""The longest ``prefix`` a toolset takes: ``{prefix}_`` then leaves at least one character of
a tool's own name in a name cut to fit model APIs (``_model_names``: its first ``_KEPT``
characters and a hash); a longer one made every such name the prefix and a hash, the tools told
apart by the hash alone, and every name of a prefix over 62 characters was such a name."""


_CLIENT_LOSSES = ("Connection closed", "SSE stream ")
"""How the ``mcp`` client's own errors for a request its connection (or, over streamable HTTP,
its answer's stream) lost begin: ``Connection closed``, ``SSE stream ended without a
response``, ``SSE stream failed: ...``. Their code, ``CONNECTION_CLOSED``, is -32000, the first
of the codes JSON-RPC leaves to servers, which a server may answer with for its own failure
("Database down"): that is the call's failure, not a lost connection."""


def _is_connection_lost(exc: BaseException) -> bool:
    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED and exc.error.message.startswith(_CLIENT_LOSSES)
    return isinstance(exc, _TRANSPORT_ERRORS)


def _is_exchange_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the error ``_RefusalWatch`` answers a request whose HTTP exchange failed
    with (``_Delivery.broken`` tells that one was answered so)."""
    return isinstance(exc, MCPError) and exc.code == INTERNAL_ERROR


def _lost_alone(exc: BaseException, server: ServerConfig) -> bool:
    """Whether ``exc``, a lost connection, is one request's own: over streamable HTTP each
    request's answer comes on a stream of its own, and the ``mcp`` client reports one cut off or
    failed (``SSE stream ended without a response``, ``SSE stream failed: ...``, a proxy ending a
    long call's stream) with the code it gives the whole connection closing (``Connection
    closed``, its own words for that). The session is not lost: marked so, the next call
    reconnected and closed it, every call in flight on it failing."""
    return (
        isinstance(server, HTTPServer)
        and isinstance(exc, MCPError)
        and exc.code == CONNECTION_CLOSED
        and exc.error.message.startswith("SSE stream ")  # not a server's own (_CLIENT_LOSSES)
    )


def _is_session_expired(exc: BaseException) -> bool:
    """A stateful HTTP server answers 404 for a session it does not know (it restarted, or dropped
    the session): the request was refused before anything ran."""
    return (
        isinstance(exc, MCPError)
        and exc.code == INVALID_REQUEST
        and exc.error.message in ("Session terminated", "Session not found")
    )


def _loss_reason(exc: BaseException, server: ServerConfig) -> str:
    """`` (why)`` for a lost connection, when the error says more than that it closed: the HTTP
    transport reports a failed answer the same way ("SSE stream failed: Server-sent event exceeded
    the ... byte limit"), and the model (or whoever reads the error) should learn which it was."""
    reason = describe_error(exc, server)
    return "" if reason.lower() in _PLAIN_LOSS else f" ({reason})"


_BREACH_CHARS = 200  # of the client's reason a broken output schema is reported with


def _schema_breach(exc: BaseException, mcp_name: str) -> str | None:
    """Why a result the server gave was refused for breaking the tool's own ``outputSchema`` (or
    for a schema the check cannot use), or None for another failure. The ``mcp`` client checks a result against the schema and raises
    ``RuntimeError`` with a jsonschema report of many lines; the call did run, so the model must
    not read it as a failed call to retry (a tool may not be safe to run twice)."""
    if not isinstance(exc, RuntimeError):
        return None
    text = str(exc)
    if text == f"Tool {mcp_name} has an output schema but did not return structured content":
        return "it has no structured content, which the tool's output schema requires"
    head = f"Invalid structured content returned by tool {mcp_name}: "
    if text.startswith(head):
        first = text[len(head) :].split("\n", 1)[0]  # jsonschema's summary, before its report
        return f"its structured content does not match the tool's output schema ({first})"
    # The schema itself is broken (a reference leading nowhere, a keyword of the wrong type): the
    # client checks the result only after the call, so the tool ran all the same.
    head = f"Invalid schema for tool {mcp_name}: "
    if text.startswith(head):
        first = text[len(head) :].split("\n", 1)[0]
        if len(first) > _BREACH_CHARS:  # "... does not exist within <the whole schema>"
            first = first[:_BREACH_CHARS] + "..."
        return f"the tool's output schema is not a valid JSON schema ({first})"
    return None


def _to_result(result: CallToolResult, name: str, mcp_name: str) -> ToolResult:
    answer = result_of(result.content, result.structured_content, result.is_error)
    if answer.is_error:
        return _one_error_sentence(answer, name, mcp_name)
    return answer


def _one_error_sentence(answer: ToolResult, name: str, mcp_name: str) -> ToolResult:
    """An error result whose text is the ``mcp`` package's words for a failed tool, ``Error
    executing tool <its name>: <why>`` (``<why>`` left out for a crash, whose reason the server
    keeps), in adk's own words for a failed call, under the name the model called:
    ``Error: tool '<name>' failed: <why>``. Prefixed as they were, the model read "Error: Error
    executing tool ..."; another server's words are kept as they are. Only on an error."""
    said = f"Error: Error executing tool {mcp_name}"
    text = answer.content
    if text == said or text.startswith(f"{said}:"):
        why = text[len(said) + 1 :].strip()
        if why:
            text = f"Error: tool '{name}' failed: {why}"
        else:
            text = f"Error: tool '{name}' failed; the server did not say why"
        return answer.model_copy(update={"content": text})
    return answer


class _MCPTool:
    """One server tool. It holds no connection: every call goes through the toolset's session, so
    a tool obtained before a reconnect keeps working after it. With ``approval`` a call pauses
    for a person's decision first, as ``@tool(require_approval=True)`` does (with a function,
    only the calls it says need one)."""

    __slots__ = ("_approval", "_mcp_name", "_spec", "_toolset")

    # A server may report progress while a call runs: the call runs in a task, so each report
    # reaches the caller of the run as it comes (``ToolContext.report_progress``).
    _emits_events = True

    def __init__(
        self, toolset: MCPToolset, mcp_name: str, spec: ToolSpec, approval: _Approval = False
    ) -> None:
        self._toolset = toolset
        self._mcp_name = mcp_name
        self._spec = spec
        self._approval = approval

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    @property
    def _adk_origin(self) -> str:
        """The server and its own name for the tool, for an error naming two tools of one name
        (``tools._origin``); the server as error texts show it (``str``, credentials masked)."""
        return f"tool {self._mcp_name!r} of MCP server '{self._toolset.server}'"

    @property
    def _span_attributes(self) -> dict[str, Any]:
        """The MCP attributes tracing adds to this tool's ``execute_tool`` spans: the server's,
        and the protocol version of the session the call goes through. That session is the one
        the toolset listed its tools on, before the model could call any, so a call sees it (a
        call that reconnects reports the version of the session it found, which a reconnect to
        the same server does not change). Read only when tracing records the call."""
        attributes = self._toolset._span_attributes
        session = self._toolset._current()
        live = session.current if session is not None else None
        version = live.protocol_version if live is not None else None
        return attributes if version is None else {**attributes, _PROTOCOL_VERSION: version}

    def _adk_check_arguments(self, arguments: str) -> str | None:
        """What is wrong with ``arguments`` (JSON text) for the server's input schema, or None: a
        person's edit of a call's arguments is checked with this before the resume runs anything
        (``adk._approval.edited_call``); the server would otherwise be the first to see them.
        What no transport can carry (``parse_arguments``) is a problem too: it would otherwise
        pass here and be an error result once resumed, the checkpoint gone, the model told the
        call "ran with" the edit."""
        try:
            parsed = parse_arguments(arguments)
        except ValueError as exc:
            return str(exc)
        return self._schema_problem(parsed)

    def _schema_problem(self, arguments: Any) -> str | None:
        """What is wrong with ``arguments`` (parsed) for the server's input schema, or None: an
        edit's (``_adk_check_arguments``), and a call's before it is put to a person."""
        # jsonschema (a dependency of the mcp package) loads here, on the first checked call:
        # ``import adk.mcp`` does not otherwise need it and it costs tens of milliseconds.
        import jsonschema  # type: ignore[import-untyped]  # no stubs installed

        schema = self._spec.parameters
        try:
            validator = jsonschema.validators.validator_for(schema)(schema)
            errors = list(validator.iter_errors(arguments))
        except Exception:
            # The server's schema is broken, or one the validator cannot follow (a ``$ref`` it
            # cannot resolve, nesting past its recursion limit): the server decides.
            return None
        if not errors:
            return None
        errors.sort(key=lambda e: [str(part) for part in e.path])
        return "; ".join(
            f"{'/'.join(map(str, e.path)) or 'arguments'}: {_bounded(e.message)}"
            for e in errors[:5]
        )

    async def run(self, arguments: str, ctx: ToolContext | None = None) -> ToolResult:
        name = self._spec.name
        approval = self._approval
        if approval is not False:
            try:
                parsed = parse_arguments(arguments)
            except ValueError as exc:  # nothing to approve: the model reads why and tries again
                return ToolResult.error(f"invalid arguments for tool '{name}': {exc}")
            if ctx is None:
                return ToolResult.error(
                    f"tool '{name}' needs a person's approval, which only a run can ask for"
                )
            denial = await gate(
                name,
                parsed,
                ctx,
                None if approval is True else approval,
                functools.partial(self._schema_problem, parsed),
            )
            if denial is not None:
                return denial
        elif ctx is not None and ctx.run_context._run.plan is not None:
            # A call that paused for approval before a redeploy took its tool out of
            # ``require_approval``: the person's decision still holds, as a function tool's
            # does (a denied call must not run).
            decision = resumed_decision(ctx)
            if isinstance(decision, ToolResult):
                return decision
        return await self._toolset._call(name, self._mcp_name, arguments, ctx)

    def __repr__(self) -> str:
        return f"<MCP tool {self._spec.name!r} of {self._toolset.server}>"


@dataclass(frozen=True)
class _PromptArgument:
    """An argument an MCP prompt accepts."""

    name: str
    description: str = ""
    required: bool = False


class _MCPPrompt:
    """A prompt template kept on an MCP server; ``render`` asks the server to fill it in."""

    __slots__ = ("_mcp_name", "_toolset", "arguments", "description", "name")

    def __init__(
        self,
        toolset: MCPToolset,
        mcp_name: str,
        name: str,
        description: str,
        arguments: tuple[_PromptArgument, ...],
    ) -> None:
        self._toolset = toolset
        self._mcp_name = mcp_name
        self.name = name
        self.description = description
        self.arguments = arguments

    async def render(self, **arguments: Any) -> list[Message]:
        """The prompt's messages with ``arguments`` filled in (non-string values are sent as
        JSON text: MCP prompt arguments are strings)."""
        missing = [a.name for a in self.arguments if a.required and a.name not in arguments]
        if missing:
            raise ValueError(f"prompt {self.name!r} needs argument(s): {', '.join(missing)}")
        return await self._toolset._render(self.name, self._mcp_name, arguments)

    def __repr__(self) -> str:
        return f"<MCP prompt {self.name!r} of {self._toolset.server}>"


@dataclass
class _Listing:
    connection: Connection
    epoch: int
    items: list[Any]


def _bounded(problem: str, limit: int = 240) -> str:
    """A schema problem as the model reads it, at most about ``limit`` characters: jsonschema's
    messages hold the refused value itself (``'...' is not of type 'integer'``), which may be
    an argument of any size. Its start and end are kept: the end says what is wrong."""
    if len(problem) <= limit:
        return problem
    half = limit // 2
    return f"{problem[:half]}...{problem[-half:]}"


def _listing_ended(
    listings: dict[str, SharedListing], kind: str, shared: SharedListing, task: asyncio.Task[Any]
) -> None:
    if listings.get(kind) is shared:
        del listings[kind]
    if not task.cancelled():
        task.exception()  # retrieved: a failure no one waited for any more is not "never retrieved"


async def _all_pages(list_page: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paginated MCP listing (up to ``_PAGE_LIMIT`` pages, against endless cursors)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(_PAGE_LIMIT):
        page = await list_page(cursor=cursor)
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return items


class MCPToolset(SharedCloseable):
    """The tools of one MCP server, as a pyadk ``Toolset``.

    Nothing happens at construction: the first ``tools()`` (or tool call, or prompt) connects. The
    tool list is fetched once and again only when the server announces a change (or after a
    reconnect). Calls run concurrently over the one session. ``aclose()`` (or ``async with``) ends
    the session and stops a stdio server; a later use connects afresh.

    ``prefix`` renames every tool (and prompt) to ``{prefix}_{name}`` so two servers with the same
    tool names can serve one agent. A tool whose name model APIs refuse (MCP allows dots and 128
    characters; they take ``[a-zA-Z0-9_-]{1,64}``) is offered under one they take
    (``_model_names``). ``call_timeout`` bounds each tool call (and each list/prompt request);
    ``None`` waits forever (over SSE, a call silent for 5 minutes ends the connection).
    ``connect_timeout`` bounds starting a session. ``require_approval`` makes calls of every tool
    (``True``) or of some (names or a predicate, like ``tool_filter``) pause for a person's
    decision, as ``@tool(require_approval=True)`` does; a mapping of the server's tool names to a
    bool or a function ``(ctx, arguments) -> bool`` decides per tool, the functions per call, as
    a function tool's ``require_approval`` function does.

    What a server sends besides answers (extensions to DESIGN.md, see ``_hooks``): ``on_progress``
    is given each progress report of a call with the call's ``ToolContext``; ``log_level`` asks
    for the server's log messages from that level and sends them to the ``adk.mcp.server``
    logger; ``elicitation`` (a function of the asking call's ``ToolContext`` and the server's
    request) answers a server asking the user for input mid-call, ``sampling`` (a pyadk
    ``ChatModel``, or such a function) a server asking for a completion. Without them the server
    is told the client cannot (and handles that), and is asked for no progress and no logs.
    ``list_resources`` and ``read_resource`` reach the server's resources. ``optional=True``
    (an extension to DESIGN.md, as the OpenAI Agents SDK's ``MCPServerManager(strict=False)``)
    lets an agent run without the server's tools while it cannot be used, with a warning.
    """

    def __init__(
        self,
        server: ServerConfig,
        tool_filter: _ToolFilter | None = None,
        prefix: str | None = None,
        *,
        call_timeout: float | None = 60.0,
        connect_timeout: float = 30.0,
        require_approval: _ApprovalSetting = False,
        on_progress: ProgressHandler | None = None,
        log_level: LoggingLevel | None = None,
        elicitation: ElicitationHandler | None = None,
        sampling: ChatModel | SamplingHandler | None = None,
        sampling_tools: bool | None = None,
        optional: bool = False,
    ) -> None:
        if not isinstance(optional, bool):
            raise TypeError(f"optional must be True or False, got {optional!r}")
        if not isinstance(server, StdioServer | HTTPServer | SSEServer):
            raise TypeError(
                "MCPToolset needs a StdioServer, HTTPServer or SSEServer, "
                f"got {type(server).__name__}"
            )
        if prefix is not None and (not isinstance(prefix, str) or not prefix):
            raise ValueError(f"prefix must be a non-empty string or None, got {prefix!r}")
        if prefix is not None and len(prefix) > _PREFIX_LIMIT:
            raise ValueError(
                f"prefix must be at most {_PREFIX_LIMIT} characters, got {len(prefix)} "
                f"({prefix[:20]!r}...): model APIs take tool names of at most {_NAME_LIMIT}, and "
                f"a longer one is cut to its first {_KEPT} characters and a hash, so with this "
                "prefix every such tool name would be the prefix and a hash, which the model "
                "cannot tell apart"
            )
        if call_timeout is not None and not call_timeout > 0:
            raise ValueError(f"call_timeout must be positive or None, got {call_timeout!r}")
        if not connect_timeout > 0:
            raise ValueError(f"connect_timeout must be positive, got {connect_timeout!r}")
        check_handler(on_progress, "on_progress")
        hooks = _ClientHooks(
            elicitation_callback(elicitation),
            sampling_callback(sampling),
            check_log_level(log_level),
            declares_sampling_tools(sampling, sampling_tools),
        )
        self._server = server
        self._on_progress = on_progress
        # Whether a call says whose it is to the handlers of the server's requests: a function
        # is given the call's ToolContext, a ChatModel answering sampling is called in its run.
        self._tells_handlers = elicitation is not None or sampling is not None
        # A session per event loop: its connection's owner task, its lock and, for a stdio
        # server, the pipes to the process belong to the loop that opened it, and a service
        # running one toolset (one Runner) from several threads' loops at once (asyncio.run per
        # request) sent one loop's requests through another loop's connection ("attached to a
        # different loop"). Each loop's session is closed as that loop ends (see LoopClients).
        # The listings already warned about (a tool left out): each distinct one warns once,
        # whichever loop's session, or which connection of it, read it (``ListingWarnings``).
        warned = ListingWarnings()
        self._sessions = LoopClients(
            Session(server, connect_timeout=connect_timeout, hooks=hooks, warned=warned),
            functools.partial(
                Session, server, connect_timeout=connect_timeout, hooks=hooks, warned=warned
            ),
            Session.aclose,
        )
        self._warned = warned
        self._span_attributes = _span_attributes(server)  # for tracing, made once
        self._accepts = _compile_filter(tool_filter)
        # A tool_filter of names, checked against the server's as its tools are listed
        # (``_check_filter_names``); None for no filter or a predicate.
        self._filter_names: frozenset[str] | None = (
            None if tool_filter is None or callable(tool_filter) else frozenset(tool_filter)
        )
        self._needs_approval = _approval_of(require_approval)
        # The tool names require_approval gives (a mapping's keys, a collection), checked against
        # the server's as its tools are listed (``_check_approval_names``); None for the others.
        self._approval_names: frozenset[str] | None = _approval_names(require_approval)
        self._prefix = prefix
        # How every name this server offers starts (see ``_may_offer``): the prefix as given
        # (prompts, and tools whose names fit), and as ``_model_names`` makes it fit model APIs.
        self._heads: tuple[str, ...] = ()
        if prefix is not None:
            head = f"{prefix}_"
            self._heads = (head, _NOT_IN_NAMES.sub("_", head)[:_KEPT])
        # With a tool_filter of names, every tool name the server can offer, known without asking
        # it (see ``_may_offer``); None when any name could pass the filter.
        self._tool_names: frozenset[str] | None = None
        if tool_filter is not None and not callable(tool_filter):
            self._tool_names = frozenset(
                offered for name in tool_filter for offered in _offered_as(self._exposed(name))
            )
        self._call_timeout = call_timeout
        self._optional = optional
        self._tools: _Listing | None = None
        self._prompts: _Listing | None = None

    @property
    def server(self) -> ServerConfig:
        """The configuration of the server this toolset connects to."""
        return self._server

    @property
    def prefix(self) -> str | None:
        """What tool and prompt names are prefixed with (``{prefix}_{name}``), or ``None``."""
        return self._prefix

    def __repr__(self) -> str:
        return f"MCPToolset({self.server!r}, prefix={self._prefix!r})"

    # -- Toolset -------------------------------------------------------------------------------
    async def tools(self, ctx: RunContext | None = None) -> list[Tool]:
        """The server's tools (filtered and prefixed). Raises ``MCPConnectionError`` if the
        server cannot be used (its listing not answered within ``call_timeout`` too); an
        ``optional`` toolset logs it (an ``adk.mcp`` warning) and offers no tools, so the agent
        runs without them, and the next use tries again."""
        try:
            return list(await self._listing("tools"))
        except MCPConnectionError as exc:
            if not self._optional:
                raise
            logger.warning("%s; its tools are not offered (optional=True)", exc)
            return []

    async def prompts(self) -> list[Prompt]:
        """The server's prompts (prefixed like tools), each renderable by name: ``Prompt``s
        (``adk.Prompt``), as a ``Resources`` registry gives them."""
        return list(await self._listing("prompts"))

    # -- MCP resources (an extension to DESIGN.md) ------------------------------------------------
    async def list_resources(self) -> list[Resource]:
        """The server's resources (the ``mcp`` package's ``Resource``: ``uri``, ``name``,
        ``description``, ``mime_type``), every page; none for a server without resources. Not
        cached: a server's resources change more often than its tools. Templates
        (``notes://{day}``) are not listed: read them by a URI they match."""

        async def fetch(client: Client) -> list[Resource]:
            if client.server_capabilities.resources is None:
                return []
            return await _all_pages(client.list_resources, "resources")

        _, items, _ = await self._request(fetch, "listing its resources")
        return items

    async def read_resource(self, uri: str) -> list[TextResourceContents | BlobResourceContents]:
        """What the server holds at ``uri``: each part's ``text``, or ``blob`` (base64) with its
        ``mime_type``. Raises ``RuntimeError`` with the server's reason for a URI it does not
        serve, as listing does for other failures."""
        if not isinstance(uri, str) or not uri:
            raise ValueError(f"uri must be a non-empty string, got {uri!r}")
        check_sendable(uri, "uri")

        async def fetch(client: Client) -> list[TextResourceContents | BlobResourceContents]:
            return list((await client.read_resource(uri)).contents)

        _, contents, _ = await self._request(fetch, f"reading resource {uri!r}")
        return contents

    # -- lifecycle -----------------------------------------------------------------------------
    async def aclose(self) -> None:
        """End the running loop's session (and its stdio server process); those of loops still
        running in other threads end with their loops. Safe to call more than once."""
        await self._sessions.aclose()
        self._tools = None
        self._prompts = None

    # -- internals -----------------------------------------------------------------------------
    def _current(self) -> Session | None:
        """The running loop's session if it has one (None outside a loop, or before a loop's
        first use of the server): what the caches are checked against, without connecting."""
        try:
            return self._sessions.get() or self._sessions.peek()
        except RuntimeError:  # no running event loop
            return None

    @property
    def _session(self) -> Session:
        """The running loop's session (tests and benchmarks read its counters after a use)."""
        session = self._current()
        if session is None:
            raise RuntimeError("this MCPToolset has not been used on the running event loop")
        return session

    def _may_offer(self, name: str, kind: str) -> bool:
        """Whether ``name`` could be one of this server's ``kind`` (``"tools"`` or ``"prompts"``),
        judged without asking it: with a prefix, every name it offers starts with ``{prefix}_`` (a
        tool's renamed to fit model APIs keeps that start, made fit the same way); with a
        ``tool_filter`` of names, its tools are those names (prefixed, maybe made fit).
        ``Resources`` asks only the servers that may offer a name, so a lookup does not start the
        others."""
        if self._prefix_rules_out(name):
            return False
        return kind != "tools" or self._tool_names is None or name in self._tool_names

    def _prefix_rules_out(self, name: str) -> bool:
        """Whether the prefix alone says ``name`` is none of this server's (for messages that say
        why a server was not asked)."""
        heads = self._heads
        return bool(heads) and not name.startswith(heads)

    def _exposed(self, name: str) -> str:
        return f"{self._prefix}_{name}" if self._prefix else name

    def _cached(self, kind: str) -> list[Any] | None:
        """The ``tools`` or ``prompts`` listing if it is known to be current (no request needed),
        else ``None``. Not to be modified: ``Resources`` reads it on every lookup."""
        session = self._current()
        if session is None:
            return None
        if kind == "tools":
            listing, epoch = self._tools, session.tools_epoch
        else:
            listing, epoch = self._prompts, session.prompts_epoch
        if listing is None:
            return None
        live = listing.connection
        fresh = live is session.current and live.usable and live.watching and listing.epoch == epoch
        return listing.items if fresh else None

    async def _listing(self, kind: str, *, again: bool = False) -> list[Any]:
        """The ``tools`` or ``prompts`` listing: the cached one while it is current, else one
        fetched, shared by the uses that ask while it is under way (a service's first requests
        arriving together sent a ``tools/list`` each). A use that stops waiting (cancelled) does
        not stop it for the others; when every one has, it is cancelled. Uses that joined a
        listing a change made stale list again together (``again``: once; after that each
        alone, so a server announcing changes without end cannot keep them waiting)."""
        cached = self._cached(kind)
        if cached is not None:
            return cached
        session = self._sessions.get() or await self._sessions.bind()
        listings = session.listings
        shared = listings.get(kind)
        joined = shared is not None and not shared.task.done()
        if shared is None or not joined:
            shared = listings[kind] = SharedListing(
                asyncio.create_task(
                    self._fetch_listing(kind), name=f"mcp list {kind} {self.server}"
                )
            )
            shared.task.add_done_callback(functools.partial(_listing_ended, listings, kind, shared))
        shared.waiters += 1
        live: Connection
        items: list[Any]
        try:
            live, items, epoch = await asyncio.shield(shared.task)
        finally:
            shared.waiters -= 1
            if shared.waiters == 0 and not shared.task.done():
                # Every use gave up: stop listing, and wait until it has stopped (through
                # further cancellations too, an anyio cancel scope's), as ``Session.connection``
                # does for a connect no one waits for any more.
                if listings.get(kind) is shared:
                    del listings[kind]
                shared.task.cancel()
                await finish(asyncio.wait([shared.task]))
            shared = None  # the frame, in a failed listing's traceback, does not hold its task
        if joined and not (
            live.usable
            and live is session.current
            and epoch == (session.tools_epoch if kind == "tools" else session.prompts_epoch)
        ):
            # Joined a listing that started before a change the server announced since (or whose
            # connection dropped): this use lists again, as it would have alone, shared with the
            # others that joined it (each listing again on its own was the burst of listings
            # sharing is for: a tool added as a service starts).
            if again:
                items = (await self._fetch_listing(kind))[1]
            else:
                items = await self._listing(kind, again=True)
        return items

    async def _fetch_listing(self, kind: str) -> tuple[Connection, list[Any], int]:
        """Ask the server for its ``tools`` or ``prompts`` and cache what it answered: the
        connection it answered on, the items and the list epoch read before asking."""

        async def fetch(client: Client) -> list[Any]:
            # A server without the capability offers none; asking would only get "method not
            # found" (many servers offer tools only).
            caps = client.server_capabilities
            if kind == "tools":
                return await self._fetch_tools(client) if caps.tools is not None else []
            return await self._fetch_prompts(client) if caps.prompts is not None else []

        # The epoch is read before fetching: a change announced meanwhile makes this listing stale.
        try:
            live, items, epoch = await self._request(fetch, f"listing its {kind}", kind=kind)
        except TimeoutError as exc:
            # A server that does not answer its listing cannot be used, as one whose handshake
            # got no answer cannot: an MCPConnectionError (stage "list"), which an optional
            # toolset passes over. It was a TimeoutError, which failed every run of an optional
            # toolset's agent while the server hung (a backend of its down).
            raise MCPConnectionError(str(exc), server=self.server, stage="list") from exc
        self._check_unique(kind, items)
        listing = _Listing(live, epoch, items)
        if kind == "tools":
            self._tools = listing
        else:
            self._prompts = listing
        return live, items, epoch

    def _check_unique(self, kind: str, items: list[Any]) -> None:
        """Refuse a listing that offers two items under one name (a server breaking MCP's rule
        that its names are unique, or pages that repeat): prompts, since a request by that name
        would reach only one; a tool listed twice is left out before (``_once_each``), so for
        tools this only guards. Not cached, so each use asks again and sees a fixed server."""
        seen: dict[str, Any] = {}
        for item in items:
            name = item.spec.name if kind == "tools" else item.name
            first = seen.setdefault(name, item)
            if first is not item:
                own = (first._mcp_name, item._mcp_name)
                shown = (
                    "" if own == (name, name) else f" (its {kind[:-1]}s {own[0]!r} and {own[1]!r})"
                )
                raise RuntimeError(
                    f"MCP server '{self.server}' lists two {kind} named {name!r}{shown}; the "
                    f"{kind} of one server must have names of their own"
                )

    async def _fetch_tools(self, client: Client) -> list[Any]:
        wire: list[_WireTool] = self._once_each(await _all_pages(client.list_tools, "tools"))
        accepted: list[tuple[str, ToolSpec]] = []
        for tool in wire:
            spec = ToolSpec(
                name=tool.name,
                description=tool.description or tool.title or "",
                parameters=_model_parameters(tool.input_schema),
            )
            if self._accepts(spec):
                accepted.append((tool.name, spec))
        names = _model_names([self._exposed(name) for name, _ in accepted])
        if self._filter_names is not None:
            self._check_filter_names(wire)
        if self._approval_names:
            self._check_approval_names(wire, accepted, names)
        return [
            _MCPTool(
                self,
                name,
                spec if spec.name == exposed else spec.model_copy(update={"name": exposed}),
                self._needs_approval(spec),
            )
            for (name, spec), exposed in zip(accepted, names, strict=True)
        ]

    def _once_each(self, wire: list[_WireTool]) -> list[_WireTool]:
        """The server's tools, each name once: a name listed twice (a server breaking MCP's rule
        that its tool names are unique, or pages that repeat) is left out with an ``adk.mcp``
        warning (once for each distinct listing, ``ListingWarnings``), every copy of it, as a
        call by that name could reach either, unless the copies are alike (one is kept). It
        failed the whole listing, so no tool of the server worked."""
        copies: dict[str, list[_WireTool]] = {}
        for tool in wire:
            copies.setdefault(tool.name, []).append(tool)
        if len(copies) == len(wire):
            return wire
        kept: list[_WireTool] = []
        twice: list[tuple[str, int, bool]] = []  # each name listed more than once
        for name, same in copies.items():
            alike = all(tool == same[0] for tool in same)
            if alike:
                kept.append(same[0])
            if len(same) > 1:
                twice.append((name, len(same), alike))
        # Once for each distinct listing (``ListingWarnings``), not on each reading of it.
        listing = [tool.model_dump(mode="json", by_alias=True) for tool in wire]
        if self._warned.first("twice", listing):
            for name, count, alike in twice:
                logger.warning(
                    "MCP server '%s' lists %d tools named %r, %s; a server's tools must have "
                    "names of their own",
                    self.server,
                    count,
                    name,
                    "alike: one is offered"
                    if alike
                    else "which differ: none is offered, as a call by that name could reach either",
                )
        return kept

    def _check_filter_names(self, wire: list[_WireTool]) -> None:
        """Refuse a ``tool_filter`` naming a tool by the name the model sees (``prefix``
        included, or made fit for model APIs) rather than the server's: it matched no tool, so
        the agent was silently offered none of those, and the model told they do not exist. A
        name the server does not list at all is logged (the server may have dropped the tool, or
        the name is misspelt), once for each distinct set of names the server lists
        (``ListingWarnings``), not on each reading of an unchanged listing. Only when a name is
        missing: a listing costs nothing more otherwise."""
        assert self._filter_names is not None
        unknown = self._filter_names - {tool.name for tool in wire}
        if not unknown:
            return
        own = [tool.name for tool in wire]
        seen = dict(zip(_model_names([self._exposed(name) for name in own]), own, strict=True))
        _refuse_shown_names(
            self.server, "tool_filter", unknown, seen, "so those tools would not be offered"
        )
        if not self._warned.first("tool_filter", sorted(own)):  # once for each listing
            return
        logger.warning(
            "MCP server '%s' lists no tool named %s, which tool_filter names (it lists %s); the "
            "agent is not offered those",
            self.server,
            ", ".join(repr(name) for name in sorted(unknown)),
            ", ".join(repr(name) for name in sorted(own)) or "none",
        )

    def _check_approval_names(
        self, wire: list[_WireTool], accepted: list[tuple[str, ToolSpec]], exposed: list[str]
    ) -> None:
        """Refuse a ``require_approval`` naming a tool by the name the model sees (``prefix``
        included, as the approval request shows it) rather than the server's: it matched no tool,
        so the tool it meant ran unasked. A name the server does not list at all is logged (the
        server may have dropped the tool; a typo asks for nothing), once for each distinct set of
        names the server lists (``ListingWarnings``). The refusal is not cached, as
        ``_check_unique``: each use asks again."""
        assert self._approval_names is not None
        listed = {tool.name for tool in wire}
        unknown = self._approval_names - listed
        if not unknown:
            return
        seen = {shown: own for (own, _), shown in zip(accepted, exposed, strict=True)}
        _refuse_shown_names(
            self.server,
            "require_approval",
            unknown,
            seen,
            "as tool_filter does, so those tools would run without asking",
        )
        if not self._warned.first("require_approval", sorted(listed)):  # once for each listing
            return
        logger.warning(
            "MCP server '%s' lists no tool named %s, which require_approval names (the server's "
            "own tool names are expected); those names ask for nothing",
            self.server,
            ", ".join(repr(name) for name in sorted(unknown)),
        )

    async def _fetch_prompts(self, client: Client) -> list[Any]:
        wire: list[_WirePrompt] = await _all_pages(client.list_prompts, "prompts")
        return [
            _MCPPrompt(
                self,
                prompt.name,
                self._exposed(prompt.name),
                prompt.description or prompt.title or "",
                tuple(
                    _PromptArgument(a.name, a.description or "", bool(a.required))
                    for a in prompt.arguments or ()
                ),
            )
            for prompt in wire
        ]

    async def _request(
        self, op: Callable[[Client], Awaitable[_T]], what: str, *, kind: str = ""
    ) -> tuple[Connection, _T, int]:
        """Run an idempotent request, reconnecting and retrying once if the connection drops
        (or retrying on it, once, when one of its HTTP exchanges failed: ``_Delivery.broken``).

        Returns the connection used, the result, and the list epoch read before the request.
        """
        server = self.server
        session = self._sessions.get() or await self._sessions.bind()
        for attempt in (1, 2):
            live = await session.connection()
            epoch = session.prompts_epoch if kind == "prompts" else session.tools_epoch
            assert live.client is not None
            delivery = _Delivery(every_request=True)
            token = _current_delivery.set(delivery)
            # No call makes this request, also when it is made from within one (a handler of a
            # server's question listing another server): the handlers are told none.
            calling = _current_call.set(None)
            try:
                with anyio.fail_after(self._call_timeout):
                    return live, await op(live.client), epoch
            except TimeoutError:
                raise TimeoutError(
                    f"MCP server '{server}' did not answer within {self._call_timeout:g}s "
                    f"while {what}"
                ) from None
            except Exception as exc:
                lost = delivery.refused or _is_connection_lost(exc) or _is_session_expired(exc)
                alone = delivery.broken is not None or _lost_alone(exc, server)
                if alone and not (delivery.refused or _is_session_expired(exc)) and attempt == 1:
                    # One HTTP exchange failed (a proxy dropped it, cut its answer's stream);
                    # the connection did not: asked again on it, as after a lost one on a new one.
                    continue
                if lost or alone:
                    live.mark_lost()
                    if attempt == 1:
                        continue
                    # Why, as a call's error says: an HTTP exchange's failure (``broken``, its
                    # server's words escaped there) or the loss's own reason.
                    why = delivery.broken or describe_error(exc, server)
                    raise MCPConnectionError(
                        f"lost the connection to MCP server '{server}' while {what} "
                        f"({server._redact(why)})",
                        server=server,
                        stage="list" if what.startswith("listing") else "request",
                    ) from exc
                reason = describe_error(exc, server)
                reason += server._redact(delivery.detail(reason))
                raise RuntimeError(f"MCP server '{server}' failed while {what}: {reason}") from exc
            finally:
                _current_call.reset(calling)
                _current_delivery.reset(token)
        raise AssertionError("unreachable")

    async def _call(
        self, name: str, mcp_name: str, arguments: str, ctx: ToolContext | None = None
    ) -> ToolResult:
        try:
            parsed = parse_arguments(arguments)
        except ValueError as exc:
            return ToolResult.error(f"invalid arguments for tool '{name}': {exc}")
        server = self.server
        # With no one to tell (no handler, and a call outside a run) no progress token is sent,
        # so the server sends no progress.
        handler = self._on_progress
        shown = ctx is not None and ctx._emit is not None
        progress = progress_callback(handler, ctx, name) if handler or shown else None
        session = self._sessions.get() or await self._sessions.bind()
        for attempt in (1, 2):
            try:
                live = await session.connection()
            except ConnectionError as exc:
                return ToolResult.error(f"tool '{name}' is unavailable: {exc}")
            client = live.client
            assert client is not None
            result: CallToolResult | None = None
            delivery = _Delivery()
            token = _current_delivery.set(delivery)
            try:
                # Set after connecting, never around it: a connection's tasks must not carry
                # one call's context, which they would hand to another call's questions.
                calling = _current_call.set(ctx) if self._tells_handlers else None
                try:
                    with anyio.move_on_after(self._call_timeout) as deadline:
                        result = await client.call_tool(
                            mcp_name, parsed, progress_callback=progress
                        )
                    if progress is not None:  # the last report kept shown before the result
                        progress.flush()
                finally:
                    if calling is not None:
                        _current_call.reset(calling)
                    if progress is not None:  # no task waits on for the reader after the call
                        progress.close()
            except Exception as exc:
                if delivery.refused or _is_session_expired(exc):
                    # The call never reached the tool: its HTTP connection could not be opened
                    # (the server went away while the session was idle), or the server no longer
                    # knows the session (it restarted; however it says so, see _refuses_session).
                    # Safe to send again, on a new session.
                    live.mark_lost()
                    if attempt == 1:
                        continue
                    return ToolResult.error(
                        f"tool '{name}' is unavailable: MCP server '{server}' accepted a new "
                        f"session but then refused the call ({describe_error(exc, server)})"
                    )
                broken = delivery.broken is not None and _is_exchange_failure(exc)
                if broken or _lost_alone(exc, server):
                    # Its HTTP connection or answer's stream was lost (a proxy dropped it, the
                    # server died), the session was not: the other calls on it go on; the next
                    # call that finds the server gone reconnects. Not repeated, as below.
                    why = delivery.broken if broken else describe_error(exc, server)
                    return ToolResult.error(
                        f"the connection to MCP server '{server}' was lost while tool '{name}' "
                        f"was running ({server._redact(str(why))}); the call is not sent again, "
                        "as the tool may have run"
                    )
                if _is_connection_lost(exc):
                    # The request may have reached the server, so it is not repeated (tools are
                    # not assumed idempotent); the next call reconnects.
                    live.mark_lost()
                    return ToolResult.error(
                        f"the connection to MCP server '{server}' was lost while tool "
                        f"'{name}' was running{_loss_reason(exc, server)}; it will reconnect "
                        "on the next call"
                    )
                breach = _schema_breach(exc, mcp_name)
                if breach is not None:
                    return ToolResult.error(
                        f"tool '{name}' ran, but its result was refused: {breach}"
                    )
                reason = describe_error(exc, server)
                reason += server._redact(delivery.detail(reason))
                return ToolResult.error(f"tool '{name}' failed: {reason}")
            finally:
                _current_delivery.reset(token)
            if result is None or deadline.cancelled_caught:
                return ToolResult.error(
                    f"tool '{name}' timed out after {self._call_timeout:g}s and was cancelled"
                )
            return _to_result(result, name, mcp_name)
        raise AssertionError("unreachable")

    async def _render(self, name: str, mcp_name: str, arguments: dict[str, Any]) -> list[Message]:
        values = {
            key: value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            for key, value in arguments.items()
        }
        for key, value in values.items():
            check_sendable(key, f"prompt {name!r}: an argument's name")
            check_sendable(value, f"prompt {name!r}: argument {key!r}")

        async def fetch(client: Client) -> list[Message]:
            result = await client.get_prompt(mcp_name, values)
            # An assistant's image keeps its part, as in a sampling request (``blocks_message``).
            return [blocks_message(m.role, [m.content]) for m in result.messages]

        _, messages, _ = await self._request(fetch, f"rendering prompt '{name}'", kind="prompts")
        return messages


def _refuse_shown_names(
    server: object, option: str, unknown: frozenset[str], seen: dict[str, str], outcome: str
) -> None:
    """Refuse ``option`` (``tool_filter``, ``require_approval``) naming tools by the names the
    model sees (``seen``: such a name to the server's own), which match no tool the option is
    checked against; ``outcome`` says what that would have done."""
    misnamed = sorted(name for name in unknown if name in seen)
    if misnamed:
        which = ", ".join(f"{name!r} (the server's {seen[name]!r})" for name in misnamed)
        raise RuntimeError(
            f"MCP server '{server}': {option} names tool(s) {which} as the model sees them; it "
            f"takes the server's own tool names, {outcome}"
        )


def _approval_of(setting: _ApprovalSetting) -> Callable[[ToolSpec], _Approval]:
    """Each listed tool's ``require_approval`` (by its spec, with the server's name) from
    ``MCPToolset``'s. A one-argument predicate there was already the filter over specs, so a
    function deciding per call is given per tool name, in a mapping: told apart by its number of
    parameters, a predicate over specs with a default argument would have become one per call."""
    if isinstance(setting, bool):
        return lambda spec: setting
    if isinstance(setting, Mapping):
        rules: dict[str, _Approval] = {}
        for name, rule in setting.items():
            if not isinstance(name, str):
                raise TypeError(f"require_approval: keys must be tool names (str), got {name!r}")
            check = _approval_rule(rule, f"require_approval[{name!r}]")
            rules[name] = bool(rule) if check is None else check
        return lambda spec: rules.get(spec.name, False)
    return _compile_filter(setting, "require_approval")


def _approval_names(setting: _ApprovalSetting) -> frozenset[str] | None:
    """The tool names a ``require_approval`` setting gives, None for a bool or a predicate."""
    return None if isinstance(setting, bool) or callable(setting) else frozenset(setting)


def _compile_filter(
    tool_filter: _ToolFilter | None, what: str = "tool_filter"
) -> Callable[[ToolSpec], bool]:
    if tool_filter is None:
        return lambda spec: True
    if isinstance(tool_filter, str):
        # require_approval also takes a bool: what "always" / "never" (the OpenAI Agents SDK's
        # hosted MCP settings) would be here.
        # A mapping names each tool's own rule (a bool or a function of the call).
        choices = (
            "True or False, a collection of tool names, a mapping of tool names to True, False "
            "or a function (ctx, arguments) -> bool, or a predicate of tool specs"
            if what == "require_approval"
            else "a collection of tool names or a predicate"
        )
        raise TypeError(f"{what} must be {choices}, not a str ({tool_filter!r})")
    if callable(tool_filter):
        predicate = tool_filter
        return lambda spec: bool(predicate(spec))
    names = frozenset(tool_filter)
    return lambda spec: spec.name in names
