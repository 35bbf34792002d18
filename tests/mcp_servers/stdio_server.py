"""The demo MCP server over stdio: ``python stdio_server.py [--legacy]``.

``--legacy`` serves only the ``initialize`` handshake era (protocol 2025-11-25), as servers built on
older SDKs do. Environment switches for the lifecycle tests, handled before the (slow) MCP imports:

- ``DEMO_PID_FILE``: append the process id there (one line per start) first thing;
- ``DEMO_STALL_UNTIL_FILE``: answer nothing until that file exists (a server stuck while starting),
  then serve, answering what was sent meanwhile; exit when the client closes stdin;
- ``DEMO_REFUSE_START_FILE``: if that file exists, exit at once, before speaking MCP (a server that
  cannot be restarted);
- ``DEMO_ENV_FILE``: write the names of the variables in its environment there, one a line, first
  thing (what a server is given of its parent's environment).
"""

from __future__ import annotations

import os
import select
import sys
import threading


def _stall_until(path: str) -> bytes:
    """Wait for ``path`` to exist; return what the client sent meanwhile."""
    held = b""
    while not os.path.exists(path):
        readable, _, _ = select.select([sys.stdin], [], [], 0.05)
        if readable:
            chunk = os.read(sys.stdin.fileno(), 65536)
            if not chunk:
                sys.exit(0)  # stdin closed: the client gave up on us
            held += chunk
    return held


def _replay(held: bytes) -> None:
    """Make stdin yield ``held`` first, then the rest of the real stdin (through a pipe a thread
    fills), so requests sent while stalling are answered once the server runs."""
    read_end, write_end = os.pipe()
    real_stdin = os.dup(0)
    os.dup2(read_end, 0)
    os.close(read_end)

    def pump() -> None:
        with os.fdopen(write_end, "wb", buffering=0) as out:
            out.write(held)
            while chunk := os.read(real_stdin, 65536):
                out.write(chunk)

    threading.Thread(target=pump, daemon=True).start()


def main() -> None:
    env_file = os.environ.get("DEMO_ENV_FILE")
    if env_file:
        with open(env_file, "w") as out:
            out.write("".join(f"{name}\n" for name in sorted(os.environ)))
    pid_file = os.environ.get("DEMO_PID_FILE")
    if pid_file:
        with open(pid_file, "a") as out:
            out.write(f"{os.getpid()}\n")
    stall = os.environ.get("DEMO_STALL_UNTIL_FILE")
    if stall:
        held = _stall_until(stall)
        if held:
            _replay(held)
    refuse = os.environ.get("DEMO_REFUSE_START_FILE")
    if refuse and os.path.exists(refuse):
        sys.exit(1)

    from forkserver import hand_off

    if not hand_off("stdio_server"):
        serve()


def serve() -> None:
    """Serve MCP over this process's stdio (here, or in a fork of the tests' fork server)."""
    # Imported only now: the switches above must act within milliseconds of the process starting,
    # and importing the MCP SDK takes about a second.
    import anyio
    from demo import build_server
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    if "--legacy" not in sys.argv[1:]:
        build_server().run("stdio")
        return

    # The SDK serves both protocol eras on stdio and offers no switch; its handshake-only loop needs
    # the low-level server, which MCPServer keeps in a private attribute (test code only).
    low = build_server(legacy=True)._lowlevel_server

    async def serve_handshake_era_only() -> None:
        async with stdio_server() as (read, write), low.lifespan(low) as state:
            await serve_loop(
                low,
                read,
                write,
                lifespan_state=state,
                init_options=low.create_initialization_options(),
            )

    anyio.run(serve_handshake_era_only)


if __name__ == "__main__":
    main()
