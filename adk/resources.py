"""Named resources a run can reach: models, tools, prompts, and the MCP servers that supply some.

Agents may name their tools (``tools=["get_time"]``) instead of holding them, so one configuration
can declare what exists and agents pick by name at run time. ``Resources`` is that registry: the
``Runner`` receives it (``Runner(agent, resources=...)``) and closes it with the runner, unless
someone else holds it open (``async with resources:``, another runner inside its ``async with``).

MCP servers are registered with ``add_mcp``; their tools and prompts join the registry under their
own names (or ``{prefix}_{name}``), listed lazily the first time a name is looked up, and again when
a server announces a change. A lookup asks only the servers that may offer the name: a server with
a prefix only for names that start with it, one whose ``tool_filter`` lists names only for those
tools, any other for every name. Two sources
offering one name is an error, reported when the clash is seen, because silently picking one would
run the wrong tool.

This module imports no MCP code: ``add_mcp`` loads ``adk.mcp`` on first use, so ``import adk``
stays light for programs that never talk to an MCP server.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._aio import SharedCloseable, finish, held
from ._error_pickle import reduce_error
from .messages import Message
from .tools._origin import tool_origin
from .tools.base import Tool, ToolContext, ToolResult, ToolSpec, _shows_events
from .tools.function import _is_tool_name

if TYPE_CHECKING:
    from .mcp import HTTPServer, MCPToolset, SSEServer, StdioServer
    from .models.base import ChatModel

__all__ = ["Prompt", "Resources"]

logger = logging.getLogger("adk.resources")

# Compiled by ``re`` on first use (and cached there), not at import: only prompt templates need it.
_PLACEHOLDER = r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}"


@runtime_checkable
class Prompt(Protocol):
    """A named prompt template: ``await prompt.render(**arguments)`` gives its messages."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    async def render(self, **arguments: Any) -> list[Message]:
        """The prompt's messages with ``arguments`` filled in; ``ValueError`` when a required one
        is missing. Async because an MCP prompt is rendered by its server."""
        ...


class _TemplatePrompt:
    """A prompt kept in code: text or messages with ``{argument}`` placeholders.

    Placeholders are plain names; ``{{`` and ``}}`` are literal braces. Nothing else in the template
    is interpreted (no attribute access, no format specs), so argument values and templates cannot
    reach into objects.
    """

    __slots__ = ("_messages", "description", "name")

    def __init__(self, name: str, messages: list[Message], description: str = "") -> None:
        self.name = name
        self.description = description
        self._messages = messages

    @property
    def arguments(self) -> tuple[str, ...]:
        found: dict[str, None] = {}
        for message in self._messages:
            for match in re.finditer(_PLACEHOLDER, message.content):
                if match.group(1):
                    found[match.group(1)] = None
        return tuple(found)

    async def render(self, **arguments: Any) -> list[Message]:
        missing = [name for name in self.arguments if name not in arguments]
        if missing:
            raise ValueError(f"prompt {self.name!r} needs argument(s): {', '.join(missing)}")
        return [
            message.model_copy(update={"content": _fill(message.content, arguments)})
            for message in self._messages
        ]

    def __repr__(self) -> str:
        return f"<prompt {self.name!r}>"


def _fill(template: str, arguments: Mapping[str, Any]) -> str:
    def substitute(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return str(arguments[match.group(1)])

    return re.sub(_PLACEHOLDER, substitute, template)


class _RenamedTool:
    """A tool registered under another name than its spec's: the model sees the new name. The
    attributes the framework reads off a tool (``getattr``, for the tools that have them) are
    passed on, or the renamed tool lost what they do."""

    __slots__ = ("_spec", "_tool")

    def __init__(self, tool: Tool, name: str) -> None:
        self._tool = tool
        self._spec = tool.spec.model_copy(update={"name": name})

    @property
    def spec(self) -> ToolSpec:
        return self._spec

    @property
    def _adk_origin(self) -> str:
        return tool_origin(self._tool)

    @property
    def _adk_check_resume(self) -> Callable[[str, ToolContext], None] | None:
        """The tool's own check of a resumed call (``tools._executor.check_resumed_calls``)."""
        check: Callable[[str, ToolContext], None] | None
        check = getattr(self._tool, "_adk_check_resume", None)
        return check

    @property
    def _adk_check_arguments(self) -> Callable[[str], str | None] | None:
        """The tool's own check of a person's edit of a call's arguments (``_approval``):
        without it, every edit of a renamed tool's call was refused as one it cannot check."""
        check: Callable[[str], str | None] | None
        check = getattr(self._tool, "_adk_check_arguments", None)
        return check

    @property
    def _adk_preflight_call(self) -> Callable[[ToolContext, Any], None] | None:
        """The tool's own check of a paused call before a resume runs (``adk._preflight``)."""
        check: Callable[[ToolContext, Any], None] | None
        check = getattr(self._tool, "_adk_preflight_call", None)
        return check

    @property
    def _emits_events(self) -> bool:
        """Whether the tool forwards events (an ``AgentTool`` with ``emit_inner_events``), so
        that a round of its one call runs in a task that can forward them
        (``tools._executor.lone_call``): without it, the renamed tool's events were dropped."""
        return _shows_events(self._tool)

    @property
    def _span_attributes(self) -> Any:
        """An MCP server's tool's attributes for its ``execute_tool`` spans (``adk.tracing``),
        read only when tracing records a call: without it, a renamed MCP tool's spans had none."""
        return getattr(self._tool, "_span_attributes", None)

    async def run(self, arguments: str, ctx: ToolContext) -> str | ToolResult:
        return await self._tool.run(arguments, ctx)


class Resources(SharedCloseable):
    """A registry of named models, tools, prompts and MCP servers.

    Registration is synchronous and checks names at once; lookups of MCP-provided names are async
    because the first one connects to the servers. ``aclose()`` closes MCP sessions and any model
    with an ``aclose`` method. ``async with resources:`` holds them open for its block: a
    ``Runner`` given them closes them at its end only when nobody else holds them (see
    ``Runner.aclose``), and the block's end closes them unless a runner inside its own
    ``async with`` still uses them (that runner's end then does).
    """

    def __init__(self) -> None:
        self._models: dict[str, ChatModel] = {}
        self._tools: dict[str, Tool] = {}
        self._prompts: dict[str, Prompt] = {}
        self._mcp: dict[str, MCPToolset] = {}
        # MCP listings under way (kept by lookups that stopped waiting for them), and the
        # (kind, server) pairs whose last listing failed.
        self._asking: dict[tuple[str, str], asyncio.Task[list[Any] | Exception]] = {}
        self._failing: set[tuple[str, str]] = set()
        # The last index of MCP-provided names of each kind from each set of servers asked,
        # and the servers' listings it was built from: reused while each server's current
        # listing is that same list, so a lookup does not check every name again (see
        # ``_mcp_index``). Registering anything drops them.
        self._indexes: dict[
            tuple[str, tuple[str, ...]], tuple[list[list[Any]], dict[str, tuple[str, Any]]]
        ] = {}

    # -- registration --------------------------------------------------------------------------
    def add_model(self, name: str, model: ChatModel) -> None:
        """Register a chat model under ``name``."""
        _check_name(name, "model")
        if name in self._models:
            raise ValueError(f"a model named {name!r} is already registered")
        self._models[name] = model

    def add_tool(self, tool: Tool, name: str | None = None) -> None:
        """Register a tool under ``name`` (default: its spec's name, which the model then sees)."""
        if not isinstance(tool, Tool):
            raise TypeError(
                f"add_tool needs a Tool (an object with .spec and async .run), "
                f"got {type(tool).__name__}"
            )
        _shows_events(tool)  # a ``reports_progress`` that is no bool: refused here
        key = tool.spec.name if name is None else name
        _check_name(key, "tool")
        if not _is_tool_name(key):
            # The model is offered the tool by this name: one model APIs refuse ('a.b', a space)
            # failed every model call offering it, a 400 far from here. FunctionTool, AgentTool
            # and ReActAgent refuse such names where they are given; so does this.
            given = "name=" if name is not None else f"its spec's name ({tool_origin(tool)})"
            raise ValueError(
                f"cannot register tool {key!r}: model APIs accept tool names of 1 to 64 letters, "
                f"digits, '_' and '-' (no spaces or dots), and {given} is not one; pass another "
                "name="
            )
        if key in self._tools:
            raise ValueError(f"a tool named {key!r} is already registered")
        self._check_not_listed("tools", key, tool)
        self._tools[key] = tool if key == tool.spec.name else _RenamedTool(tool, key)
        self._indexes.clear()

    def add_prompt(
        self, name: str, prompt: str | Sequence[Message] | Prompt, description: str = ""
    ) -> None:
        """Register a prompt: a text template (rendered as one user message), a list of messages
        with ``{argument}`` placeholders, or any object with ``async render(**arguments)``."""
        _check_name(name, "prompt")
        if name in self._prompts:
            raise ValueError(f"a prompt named {name!r} is already registered")
        self._check_not_listed("prompts", name, None)
        self._indexes.clear()
        if isinstance(prompt, str):
            self._prompts[name] = _TemplatePrompt(name, [Message.user(prompt)], description)
        elif isinstance(prompt, Prompt):
            self._prompts[name] = prompt
        elif isinstance(prompt, Sequence) and all(isinstance(m, Message) for m in prompt):
            messages: list[Message] = [m for m in prompt if isinstance(m, Message)]
            self._prompts[name] = _TemplatePrompt(name, messages, description)
        else:
            raise TypeError(
                "add_prompt needs a str, a list of Messages, or an object with async render(), "
                f"got {type(prompt).__name__}"
            )

    def add_mcp(
        self,
        name: str,
        server: StdioServer | HTTPServer | SSEServer | MCPToolset,
        prefix: str | None = None,
    ) -> MCPToolset:
        """Register an MCP server: its tools and prompts become resources by name (prefixed with
        ``{prefix}_`` when given). Nothing connects until a name it may offer is looked up (with a
        prefix, a name that starts with it; with a toolset's ``tool_filter`` of names, one of
        those tools; else any name, even one registered in code, whose clash with the server's
        must be seen). Pass an
        ``MCPToolset`` instead of a server to choose its filter and timeouts; its prefix applies.
        Returns the toolset, which an agent can also take directly as a toolset."""
        # Imported here, not at the top: the MCP SDK is heavy and only programs that register an
        # MCP server should pay for it (``import adk`` must stay light).
        from .mcp import MCPToolset

        _check_name(name, "MCP server")
        if name in self._mcp:
            raise ValueError(f"an MCP server named {name!r} is already registered")
        if isinstance(server, MCPToolset):
            if prefix is not None:
                raise ValueError(
                    "pass prefix to the MCPToolset itself when registering a toolset, "
                    f"not to add_mcp (toolset prefix: {server.prefix!r})"
                )
            toolset = server
        else:
            toolset = MCPToolset(server, prefix=prefix)
        if any(existing is toolset for existing in self._mcp.values()):
            raise ValueError("this MCPToolset is already registered under another name")
        self._mcp[name] = toolset
        self._indexes.clear()
        return toolset

    def _check_not_listed(self, kind: str, name: str, own: Tool | None) -> None:
        """Refuse to register ``name`` in code when a server's current listing offers it: the
        clash is known now, so it is reported here rather than at the next lookup. A server
        not yet listed (or whose list changed since) is checked when it is listed."""
        for server_name, toolset in self._mcp.items():
            for item in toolset._cached(kind) or ():
                if _item_name(kind, item) == name:
                    raise _offered_twice(kind, name, server_name, item, own)

    # -- lookup --------------------------------------------------------------------------------
    def get_model(self, name: str) -> ChatModel:
        """The model registered as ``name`` (``KeyError`` listing the known names otherwise).
        Synchronous, unlike the tool and prompt lookups: no MCP server supplies models."""
        try:
            return self._models[name]
        except KeyError:
            raise KeyError(_unknown("model", name, self._models)) from None

    def get_mcp(self, name: str) -> MCPToolset:
        """The toolset of the MCP server registered as ``name``."""
        try:
            return self._mcp[name]
        except KeyError:
            raise KeyError(_unknown("MCP server", name, self._mcp)) from None

    def _registered_tool(self, name: str) -> Tool | None:
        """The tool registered in code as ``name``, without asking the MCP servers: for the
        resume's check before anything runs (``adk._preflight``), which asks no server. None when
        no tool is registered so (the check then leaves the name to the run)."""
        return self._tools.get(name)

    def _registered(self, name: str, kind: str) -> Any:
        """The model, or the tool or prompt registered in code, called ``name`` (``kind``:
        ``"model"``, ``"tool"`` or ``"prompt"``), without asking any MCP server; None if none.
        A tool registered under another name is given as the tool itself, so the same tool
        registered in two registries under one name is seen to be the same."""
        if kind == "model":
            return self._models.get(name)
        if kind == "prompt":
            return self._prompts.get(name)
        tool = self._tools.get(name)
        return tool._tool if isinstance(tool, _RenamedTool) else tool

    def _listed(self, name: str, kind: str) -> tuple[str, Any] | None:
        """The MCP server (and its item) whose current listing offers the tool or prompt
        ``name`` (``kind``: ``"tool"`` or ``"prompt"``), without asking any server: a server not
        listed yet, or whose list changed since, is not seen. For an ``ActionAgent``'s check of
        a name its own resources define (``actions._run``), which must not start the runner's
        servers on the lookups of the agent's own names."""
        plural = f"{kind}s"
        for server_name, toolset in self._mcp.items():
            if not toolset._may_offer(name, plural):
                continue
            for item in toolset._cached(plural) or ():
                if _item_name(plural, item) == name:
                    return server_name, item
        return None

    async def get_tool(self, name: str) -> Tool:
        """The tool registered (or offered by a registered MCP server) as ``name``.

        Raises ``KeyError`` for an unknown name (saying which MCP servers could not be asked) and
        ``ValueError`` when two sources offer the name. A name registered with ``add_tool`` is
        checked against the MCP servers that may offer it too (see ``add_mcp``):
        returning it without asking them would let it hide a server's tool of that name,
        silently, until some other lookup saw the clash. Servers whose prefix or list of tools
        rules the name out are not asked, nor started.
        """
        tool = self._tools.get(name)
        if tool is not None:
            if self._mcp:
                await self._from_mcp("tools", (), (name,))
            return tool
        found: Tool = (await self._from_mcp("tools", [name], (name,)))[name]
        return found

    async def tools(self, names: Iterable[str]) -> list[Tool]:
        """The tools registered as ``names``, in that order (errors as in ``get_tool``). The MCP
        servers that may offer any of them are asked once for all of them."""
        wanted = list(names)
        own = self._tools
        found = await self._from_mcp("tools", [n for n in wanted if n not in own], wanted)
        return [own[name] if name in own else found[name] for name in wanted]

    async def get_prompt(self, name: str) -> Prompt:
        """The prompt registered (or offered by a registered MCP server) as ``name``; the servers
        asked as in ``get_tool``."""
        prompt = self._prompts.get(name)
        if prompt is not None:
            if self._mcp:
                await self._from_mcp("prompts", (), (name,))
            return prompt
        found: Prompt = (await self._from_mcp("prompts", [name], (name,)))[name]
        return found

    async def _from_mcp(
        self, kind: str, names: Sequence[str], looked_up: Sequence[str]
    ) -> dict[str, Any]:
        """The MCP-provided ``kind`` items called ``names``; ``KeyError`` for the first unknown.
        The servers that may offer any name ``looked_up`` are asked, even for no ``names``, to
        see a clash with a name registered in code (``looked_up`` holds those too)."""
        servers = tuple(
            server_name
            for server_name, toolset in self._mcp.items()
            if any(toolset._may_offer(name, kind) for name in looked_up)
        )
        if not servers:
            if names:
                own: Mapping[str, object] = self._tools if kind == "tools" else self._prompts
                ruled_out = self._ruled_out(names[0])
                raise KeyError(_unknown(kind[:-1], names[0], own, None, *ruled_out))
            return {}
        index, failures = await self._mcp_index(kind, names, servers)
        for name in names:
            if name not in index:
                own = self._tools if kind == "tools" else self._prompts
                ruled_out = self._ruled_out(name, servers)
                text = _unknown(kind[:-1], name, {**own, **index}, failures, *ruled_out)
                raise _Unknown(text, tuple(failures))
        return {name: index[name][1] for name in names}

    def _ruled_out(self, name: str, asked: Sequence[str] = ()) -> tuple[dict[str, str], list[str]]:
        """The servers not asked for ``name``: those whose prefix rules it out (server → prefix),
        and those whose ``tool_filter`` of names does."""
        prefixed: dict[str, str] = {}
        filtered: list[str] = []
        for server_name, toolset in self._mcp.items():
            if server_name in asked:
                continue
            if toolset.prefix is not None and toolset._prefix_rules_out(name):
                prefixed[server_name] = toolset.prefix
            else:
                filtered.append(server_name)
        return prefixed, filtered

    async def _mcp_index(
        self, kind: str, wanted: Sequence[str], servers: tuple[str, ...]
    ) -> tuple[dict[str, tuple[str, Any]], dict[str, str]]:
        """The names of ``kind`` the MCP ``servers`` offer → (server name, item), and the servers
        that could not be asked.

        Servers are asked concurrently, and each lists only when its list changed (a current list
        is read without a task). Every server is waited for — a name clash must be seen — except
        one whose last answer was a failure, once the ``wanted`` names are all found elsewhere:
        then that server's retry goes on in the background and a later lookup picks it up, so a
        dead or stalled server does not delay every lookup by its connect timeout. Clashes are
        reported among the servers that answered.

        The index is built (and every name checked) once per set of listings: while each server's
        current listing is the list the last index was built from, that index is used again, so a
        run's lookups cost a pass over the servers, not over their tools.
        """
        answers: dict[str, list[Any] | Exception] = {}
        pending: dict[asyncio.Task[list[Any] | Exception], str] = {}
        for server_name in servers:
            toolset = self._mcp[server_name]
            cached = toolset._cached(kind)
            if cached is not None:
                answers[server_name] = cached
                self._failing.discard((kind, server_name))
            else:
                pending[self._ask(kind, server_name, toolset)] = server_name
        if not pending:
            listings: list[list[Any]] = [
                answer for answer in answers.values() if isinstance(answer, list)
            ]
            built = self._indexes.get((kind, servers))
            if (
                built is not None
                and len(built[0]) == len(listings)
                and all(a is b for a, b in zip(built[0], listings, strict=True))
            ):
                return built[1], {}
        missing = set(wanted)
        if pending:
            for answer in answers.values():
                missing.difference_update(_names(kind, answer))
        while pending and (
            missing or any((kind, server) not in self._failing for server in pending.values())
        ):
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                server_name = pending.pop(task)
                answer = (
                    ConnectionError("the resources were closed while it was being asked")
                    if task.cancelled()
                    else task.result()
                )
                answers[server_name] = answer
                missing.difference_update(_names(kind, answer))

        own: Mapping[str, Any] = self._tools if kind == "tools" else self._prompts
        index: dict[str, tuple[str, Any]] = {}
        failures: dict[str, str] = {}
        listed: list[list[Any]] = []  # the listings indexed, to keep with the index
        for server_name in servers:  # in registration order, so clash reports are stable
            if server_name not in answers:  # a failing server not waited for: its retry goes on
                continue
            answer = answers[server_name]
            if isinstance(answer, Exception):
                failures[server_name] = str(answer) or type(answer).__name__
                continue
            listed.append(answer)
            for item in answer:
                item_name = _item_name(kind, item)
                if item_name in own:
                    raise _offered_twice(kind, item_name, server_name, item, own[item_name])
                clash = index.get(item_name)
                if clash is not None:
                    first, second = (
                        _as(kind, item_name, *clash),
                        _as(kind, item_name, server_name, item),
                    )
                    raise ValueError(
                        f"{kind[:-1]} name {item_name!r} is offered by MCP servers {first} and "
                        f"{second}; give one of them a prefix of its own (add_mcp(..., prefix=...))"
                    )
                index[item_name] = (server_name, item)
        if len(listed) == len(servers):  # every server answered with its list
            self._indexes[(kind, servers)] = (listed, index)
        return index, failures

    def _ask(
        self, kind: str, server_name: str, toolset: MCPToolset
    ) -> asyncio.Task[list[Any] | Exception]:
        """The listing of ``kind`` under way from a server, started if none is: concurrent lookups
        share one request (and one connect attempt)."""
        key = (kind, server_name)
        task = self._asking.get(key)
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            task = asyncio.create_task(_list(kind, toolset), name=f"list {kind} of {server_name}")
            self._asking[key] = task
            task.add_done_callback(functools.partial(self._asked, key))
        return task

    def _asked(self, key: tuple[str, str], task: asyncio.Task[list[Any] | Exception]) -> None:
        """Remember whether a server's last answer was a failure (see ``_mcp_index``)."""
        if self._asking.get(key) is task:
            del self._asking[key]
        if task.cancelled():
            return
        if task.exception() is not None or isinstance(task.result(), Exception):
            self._failing.add(key)
        else:
            self._failing.discard(key)

    def _describe(self) -> dict[str, Any]:
        """What is registered, as JSON (for ``AgentPlan``): names with their kinds and types.
        Nothing connects: MCP servers are listed by name, not by the tools they offer."""

        def type_of(value: object) -> str:
            return f"{type(value).__module__}.{type(value).__qualname__}"

        return {
            "models": {
                name: {"type": type_of(model), "model_name": getattr(model, "model_name", None)}
                for name, model in self._models.items()
            },
            "tools": {name: tool.spec.model_dump() for name, tool in self._tools.items()},
            "prompts": {
                name: {"type": type_of(prompt), "description": prompt.description}
                for name, prompt in self._prompts.items()
            },
            "mcp": {name: {"type": type_of(toolset)} for name, toolset in self._mcp.items()},
        }

    # -- lifecycle -----------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close every MCP session and every model that has ``aclose`` (each once), but for a
        toolset or model that someone else holds open (``async with toolset:``, a runner inside
        its ``async with`` whose agents hold it), which its last holder closes. Safe to call
        twice.

        Everything is closed even if one close fails; the first failure is then raised.
        """
        loop = asyncio.get_running_loop()
        kept = {name for name, toolset in self._mcp.items() if held(toolset, besides=self)}
        asking = [
            task
            for (_, server), task in self._asking.items()
            if server not in kept and task.get_loop() is loop
        ]
        for key in [key for key in self._asking if key[1] not in kept]:
            del self._asking[key]
        closers: list[Any] = [
            toolset.aclose for name, toolset in self._mcp.items() if name not in kept
        ]
        # Each model once: one may be registered under several names ("fast", "default").
        models = {id(model): model for model in self._models.values()}.values()
        closers += [
            close
            for model in models
            if not held(model, besides=self) and callable(close := getattr(model, "aclose", None))
        ]
        if not closers:
            return
        for task in asking:
            task.cancel()  # listings nobody waits for: stop them (and their connect attempts)

        async def close_all() -> list[Any]:
            if asking:
                await asyncio.wait(asking)
            return await asyncio.gather(*(close() for close in closers), return_exceptions=True)

        # Concurrently, and to its end even if our caller is cancelled meanwhile (a cancelled run
        # unwinding; under an anyio cancel scope at every await, where a shield returned at once
        # with the servers still running): nothing is left behind when this returns (``finish``).
        outcomes = await finish(close_all())
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        for failure in failures:
            logger.warning("closing a resource failed: %s", failure, exc_info=failure)
        if failures:
            raise failures[0]

    def _adk_held_with(self) -> list[Any]:
        """What holding these resources holds open too (``adk._aio.held``): what ``aclose``
        closes, so a runner given one of them directly leaves it to their last holder."""
        return [*self._mcp.values(), *self._models.values()]

    def __repr__(self) -> str:
        return (
            f"Resources(models={list(self._models)}, tools={list(self._tools)}, "
            f"prompts={list(self._prompts)}, mcp={list(self._mcp)})"
        )


async def _list(kind: str, toolset: MCPToolset) -> list[Any] | Exception:
    """A server's tools or prompts, or why it could not be asked. Not ``toolset.tools()``: an
    ``optional=True`` server that cannot be used offers none there, so a lookup of its tool said
    only "no tool named ..."; a lookup says why a server could not be asked, optional or not
    (``_unknown``)."""
    try:
        return await toolset._listing(kind)
    except (ConnectionError, TimeoutError, RuntimeError) as exc:
        return exc


def _names(kind: str, answer: list[Any] | Exception) -> set[str]:
    if isinstance(answer, Exception):
        return set()
    return {_item_name(kind, item) for item in answer}


def _item_name(kind: str, item: Any) -> str:
    name: str = item.spec.name if kind == "tools" else item.name
    return name


def _as(kind: str, name: str, server_name: str, item: Any) -> str:
    """A server offering ``name``, with its own name for the item when that differs (a prefix,
    or a name made for model APIs: ``files.read`` is offered as ``files_read``)."""
    own = getattr(item, "_mcp_name", name)
    return f"{server_name!r}" if own == name else f"{server_name!r} (its {kind[:-1]} {own!r})"


def _offered_twice(kind: str, name: str, server_name: str, item: Any, own: Any) -> ValueError:
    """A name both registered in code and offered by an MCP server."""
    singular = kind[:-1]
    registered = f"registered with add_{singular}"
    if own is not None and kind == "tools":
        registered += f" ({tool_origin(own)})"
    return ValueError(
        f"{singular} name {name!r} is offered by MCP server {_as(kind, name, server_name, item)} "
        f"and also {registered}; give the server a prefix (add_mcp(..., prefix=...)) or register "
        f"the {singular} under another name"
    )


def _check_name(name: str, kind: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {kind} needs a non-empty string name, got {name!r}")


class _Unknown(KeyError):
    """A name not found, with the MCP servers that could not be asked (``unasked``): one of them
    may offer it, so a caller with another registry to try (an ``ActionAgent``'s own resources,
    then the runner's) does not take the other's item of that name for the one it wanted."""

    def __init__(self, text: str, unasked: tuple[str, ...]) -> None:
        super().__init__(text)
        self.unasked = unasked

    def __reduce__(self) -> tuple[Any, ...]:
        # Raised to callers (a ``KeyError``): unpickled with ``unasked`` (``cls(*args)`` would
        # lack it), see ``adk._error_pickle``.
        return reduce_error(self)


def _unknown(
    kind: str,
    name: str,
    known: Mapping[str, object],
    failures: Mapping[str, str] | None = None,
    ruled_out: Mapping[str, str] | None = None,
    filtered: Sequence[str] = (),
) -> str:
    text = f"no {kind} named {name!r}"
    if known:
        text += f" (known: {', '.join(sorted(known))})"
    elif not (failures or ruled_out or filtered):  # "no tool named 'add'" said nothing of why
        text += " (known: none)"
    if failures:
        reasons = "; ".join(f"{server}: {reason}" for server, reason in failures.items())
        text += f"; MCP servers that could not be asked: {reasons}"
    if ruled_out:
        prefixes = ", ".join(f"{server!r} ({prefix}_...)" for server, prefix in ruled_out.items())
        text += f"; MCP servers not asked, as they offer only names with their prefix: {prefixes}"
    if filtered:
        servers = ", ".join(repr(server) for server in filtered)
        text += f"; MCP servers not asked, as their tool_filter names other tools: {servers}"
    return text
