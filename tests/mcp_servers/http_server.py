"""The demo MCP server over HTTP:
``python http_server.py [--sse] [--legacy] [--sessions STYLE] [--token T] [--port N]
[--certfile PEM --keyfile PEM]``.

Serves streamable HTTP at ``/mcp`` (or the legacy SSE transport at ``/sse`` with ``--sse``) on
127.0.0.1. With ``--port 0`` the OS picks a free port; the first line on stdout is
``PORT <number> PID <pid>`` once the server accepts connections, so a test can start it and wait
for it (the pid of the process serving: a fork of the tests' fork server, ``forkserver.py``, when
one serves it, which ``HTTPServerProcess.kill`` kills as a crash would).
``--sessions`` makes it refuse sessions it does not know the way other servers do, ``--token``
answer 401 to requests without that bearer token (``sessions.py``), ``--certfile`` and
``--keyfile`` serve HTTPS with that certificate.
"""

from __future__ import annotations

import argparse
import asyncio
import os

import handoff  # noqa: F401  (first: a fork of the tests' fork server may serve this process)
import uvicorn
from demo import build_server
from sessions import STYLES, refusing_unknown_sessions, requiring_token


async def _serve(
    port: int,
    sse: bool,
    legacy: bool,
    sessions: str | None,
    token: str | None,
    certfile: str | None = None,
    keyfile: str | None = None,
) -> None:
    server = build_server(legacy=legacy)
    app = server.sse_app() if sse else server.streamable_http_app()
    if sessions is not None:
        app = refusing_unknown_sessions(app, sessions)
    if token is not None:
        app = requiring_token(app, token)
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
    )
    web = uvicorn.Server(config)
    serving = asyncio.create_task(web.serve())
    while not web.started:
        if serving.done():
            await serving  # startup failed: raise its error
            return
        await asyncio.sleep(0.01)
    bound = web.servers[0].sockets[0].getsockname()[1]
    print(f"PORT {bound} PID {os.getpid()}", flush=True)
    await serving


def serve() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--sse", action="store_true")
    parser.add_argument("--legacy", action="store_true")
    parser.add_argument("--sessions", choices=sorted(STYLES))
    parser.add_argument("--token")
    parser.add_argument("--certfile")
    parser.add_argument("--keyfile")
    options = parser.parse_args()
    asyncio.run(
        _serve(
            options.port,
            options.sse,
            options.legacy,
            options.sessions,
            options.token,
            options.certfile,
            options.keyfile,
        )
    )


if __name__ == "__main__":
    serve()
