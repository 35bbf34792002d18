"""The tests' MCP servers over HTTP (``mcp_servers/process.py``): a server killed, or ended by a
tool, and started again on its port finds the port still its own, however busy the machine; and
a server that does not start says why."""

from __future__ import annotations

import errno
import socket
import time

import pytest
from mcp_servers.process import HTTPServerProcess


def test_a_killed_servers_port_stays_its_own_until_it_starts_again_on_it() -> None:
    """Between a server's end and its start on the same port, the port was free for anyone: an
    outgoing connection given it as its source port, or another suite's server binding port 0,
    could take it on a loaded machine, and the restarted server could not bind it (the likely
    cause of a failure of
    ``test_an_mcp_server_killed_mid_call_fails_the_call_not_the_run_and_comes_back[http]`` in a
    full run). Here the port is taken as such a connection takes it."""
    process = HTTPServerProcess()
    process.start()
    port = process.port
    try:
        process.kill()
        with socket.create_server(("127.0.0.1", 0)) as elsewhere, socket.socket() as outgoing:
            with pytest.raises(OSError) as taken:
                outgoing.bind(("127.0.0.1", port))
                outgoing.connect(elsewhere.getsockname())
            assert taken.value.errno == errno.EADDRINUSE
        with socket.socket() as client:  # down meanwhile, as it was: a connection is refused
            assert client.connect_ex(("127.0.0.1", port)) == errno.ECONNREFUSED
        assert process.start() == f"http://127.0.0.1:{port}/mcp"
    finally:
        process.stop()
    with socket.socket() as anyone:  # stopped: the port is let go
        anyone.bind(("127.0.0.1", port))


def test_what_a_server_writes_to_stderr_is_shown_while_it_serves(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """A server's stderr reaches this process's stderr as it is written, as an inherited stderr
    did, where pytest shows it with the test running then. Kept in a file until the server's
    stop, what a module's server wrote (a warning, a traceback) was shown at the module's end,
    with no test's failure."""
    process = HTTPServerProcess()
    process.start()
    try:
        with socket.create_connection(("127.0.0.1", process.port)) as bad:
            bad.sendall(b"no HTTP\r\n\r\n")
            assert bad.recv(100).startswith(b"HTTP/1.1 400 ")  # logged before it answered
        said = ""
        for _ in range(500):  # the copy of its stderr is a thread's: 10 s at most
            said += capfd.readouterr().err
            if "Invalid HTTP request received." in said:
                break
            time.sleep(0.02)
        assert "WARNING:  Invalid HTTP request received.\n" in said, said
    finally:
        process.stop()


def test_a_server_that_does_not_start_says_why() -> None:
    """It said "unexpected first line from the demo MCP server: ''", whatever the reason (a
    port taken, a bad option, an import error)."""
    process = HTTPServerProcess(sessions="no-such-style")
    with pytest.raises(RuntimeError) as failed:
        process.start()
    said = str(failed.value)
    assert said.startswith(
        "the MCP server http_server.py --sessions no-such-style did not start on "
        f"127.0.0.1:{process.port}: its first line on stdout was ''; it ended with exit code 2;"
    )
    assert "argument --sessions: invalid choice: 'no-such-style'" in said  # its stderr
    process.stop()


def test_a_port_another_server_listens_on_is_refused_before_a_server_is_started() -> None:
    with socket.create_server(("127.0.0.1", 0)) as other:
        process = HTTPServerProcess()
        process.port = other.getsockname()[1]
        with pytest.raises(RuntimeError, match=f"^port 127.0.0.1:{process.port} is taken: "):
            process.start()
