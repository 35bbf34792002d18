"""How servers that are not built on the ``mcp`` package refuse a session they do not know, and
a server that wants a bearer token (:func:`requiring_token`).

The MCP spec says a server answers a request carrying an unknown ``Mcp-Session-Id`` with HTTP 404;
the ``mcp`` package's own server does (a JSON-RPC error, ``INVALID_REQUEST``, "Session not found").
Many servers in use answer differently, and a client must start a new session all the same:

- ``express``: HTTP 400, a JSON-RPC error ``-32000`` "Bad Request: No valid session ID provided" —
  the TypeScript SDK's README example, copied into most Node servers;
- ``text``: HTTP 400, ``text/plain`` "Bad Request: No valid session ID provided" — the ``mcp``
  package's own server before version 2;
- ``code``: HTTP 404, a JSON-RPC error ``-32001`` "Session not found" (the TypeScript SDK's own
  transport and servers modelled on it).

:func:`refusing_unknown_sessions` wraps the demo server's ASGI app so that it answers in one of these
styles; it only knows the sessions it opened, so after a restart every old one is refused.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["STYLES", "refusing_unknown_sessions", "requiring_token"]

_MESSAGE = "Bad Request: No valid session ID provided"
STYLES: dict[str, tuple[int, str, bytes]] = {
    "express": (
        400,
        "application/json",
        json.dumps(
            {"jsonrpc": "2.0", "error": {"code": -32000, "message": _MESSAGE}, "id": None}
        ).encode(),
    ),
    "text": (400, "text/plain; charset=utf-8", _MESSAGE.encode()),
    "code": (
        404,
        "application/json",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "error": {"code": -32001, "message": "Session not found"},
                "id": None,
            }
        ).encode(),
    ),
}


def refusing_unknown_sessions(app: Any, style: str) -> Any:
    """``app`` answering requests for a session it did not open in ``style`` (see above)."""
    status, content_type, body = STYLES[style]
    opened: set[str] = set()

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or ())
        session = headers.get(b"mcp-session-id")
        if session is not None and session.decode() not in opened:
            await send(
                {
                    "type": "http.response.start",
                    "status": status,
                    "headers": [(b"content-type", content_type.encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return

        async def noting(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                for key, value in message.get("headers") or ():
                    if key.lower() == b"mcp-session-id":
                        opened.add(value.decode())
            await send(message)

        await app(scope, receive, noting)

    return wrapped


def requiring_token(app: Any, token: str) -> Any:
    """``app`` answering any request without ``Authorization: Bearer <token>`` with HTTP 401, as an
    OAuth resource server does (RFC 6750: ``WWW-Authenticate`` and a JSON body saying why), quoting
    the token it was given, as some servers do."""
    expected = f"Bearer {token}".encode()

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        got = dict(scope.get("headers") or ()).get(b"authorization")
        if scope["type"] == "http" and got != expected:
            said = "The access token is missing or expired"
            if got is not None:
                said += f" (got {got.split()[-1].decode()!r})"
            body = json.dumps({"error": "invalid_token", "error_description": said}).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer error="invalid_token"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return wrapped
