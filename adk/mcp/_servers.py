"""Where an MCP server lives: a command to spawn (stdio), a streamable HTTP endpoint, or an SSE one.

These are plain descriptions — constructing one starts nothing and opens nothing — so they can sit
in configuration and be handed to ``MCPToolset`` or ``Resources.add_mcp``. Each knows how to open a
fresh transport to its server; the toolset decides when (lazily, and again after a dropped
connection).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = ["HTTPServer", "SSEServer", "ServerConfig", "StdioServer"]

# How long an idle server-to-client event stream may stay silent before the HTTP client gives up on
# it. Deliberately long: a server legitimately sends nothing while no tool list changes. Hanging
# tool calls are bounded by the toolset's ``call_timeout``, not by this.
_SSE_READ_TIMEOUT = 300.0


def _check_timeout(timeout: float) -> float:
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def _check_url(url: str, kind: str) -> str:
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"{kind} url must be an http:// or https:// URL, got {url!r}")
    return url


@dataclass(frozen=True)
class StdioServer:
    """An MCP server run as a subprocess speaking MCP over its stdin/stdout.

    ``env`` is merged over a minimal inherited environment (``PATH``, ``HOME``, ``USER``, ...), not
    the whole parent environment, so secrets in the parent do not leak to third-party servers by
    default. The server's stderr goes to this process's stderr.
    """

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = None
    cwd: str | os.PathLike[str] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.command, str) or not self.command:
            raise ValueError(f"StdioServer needs a command to run, got {self.command!r}")
        if isinstance(self.args, str):
            raise TypeError("StdioServer args must be a sequence of strings, not one string")
        object.__setattr__(self, "args", tuple(str(arg) for arg in self.args))
        if self.env is not None:
            object.__setattr__(self, "env", {str(k): str(v) for k, v in self.env.items()})

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        params = StdioServerParameters(
            command=self.command,
            args=list(self.args),
            env=dict(self.env) if self.env is not None else None,
            cwd=os.fspath(self.cwd) if self.cwd is not None else None,
        )
        # sys.stderr is read now, not at import, so redirections made by the application count.
        return stdio_client(params, errlog=sys.stderr)

    def __str__(self) -> str:
        return shlex.join([self.command, *self.args])


@dataclass(frozen=True)
class HTTPServer:
    """An MCP server reached over streamable HTTP at ``url`` (e.g. ``http://127.0.0.1:8000/mcp``).

    ``timeout`` bounds connecting and each HTTP exchange; ``headers`` are sent with every request
    (authentication, for instance).
    """

    url: str
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    timeout: float = 30.0

    def __post_init__(self) -> None:
        _check_url(self.url, "HTTPServer")
        object.__setattr__(self, "timeout", _check_timeout(self.timeout))
        if self.headers is not None:
            object.__setattr__(self, "headers", dict(self.headers))

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        return self._open()

    @asynccontextmanager
    async def _open(self) -> AsyncIterator[TransportStreams]:
        timeout = httpx2.Timeout(self.timeout, read=max(self.timeout, _SSE_READ_TIMEOUT))
        headers: dict[str, str] = dict(self.headers) if self.headers else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=timeout) as http,
            streamable_http_client(self.url, http_client=http) as streams,
        ):
            yield streams

    def __str__(self) -> str:
        return self.url


@dataclass(frozen=True)
class SSEServer:
    """An MCP server reached over the older HTTP+SSE transport at ``url`` (e.g. ``.../sse``).

    Kept for servers that have not moved to streamable HTTP; prefer ``HTTPServer`` otherwise.
    """

    url: str
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    timeout: float = 30.0

    def __post_init__(self) -> None:
        _check_url(self.url, "SSEServer")
        object.__setattr__(self, "timeout", _check_timeout(self.timeout))
        if self.headers is not None:
            object.__setattr__(self, "headers", dict(self.headers))

    def _transport(self) -> AbstractAsyncContextManager[TransportStreams]:
        headers: dict[str, Any] | None = dict(self.headers) if self.headers else None
        return sse_client(
            self.url,
            headers=headers,
            timeout=self.timeout,
            sse_read_timeout=max(self.timeout, _SSE_READ_TIMEOUT),
        )

    def __str__(self) -> str:
        return self.url


ServerConfig = StdioServer | HTTPServer | SSEServer
"""Any of the server descriptions above."""
