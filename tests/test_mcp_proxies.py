"""MCP servers reached over HTTP through the proxy the environment names, as any HTTP client does.

A service behind a corporate proxy reaches the outside through ``HTTP_PROXY``/``HTTPS_PROXY``/
``ALL_PROXY`` (or their lowercase forms), with ``NO_PROXY`` naming the hosts reached directly.
``HTTPServer`` gives its HTTP client a transport of its own (``adk.mcp._servers._RefusalWatch``),
and an ``httpx2`` client given one reads no proxy from the environment: every request went
straight to the server. Here a real forward proxy (``tests/tls_helpers.ForwardProxy``) stands
between the client and the demo server (``tests/mcp_servers``), which is plain ``http://`` on
127.0.0.1, and counts what it forwards. The variables are set with ``monkeypatch`` only.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpcore2
import pytest
import pytest_asyncio
from mcp_servers.process import (
    HTTPServerProcess,
    closed_port,
    http_process_fixture,  # noqa: F401  (fixture)
    sse_process_fixture,  # noqa: F401  (fixture)
)
from tls_helpers import CertificateAuthority, ConnectProxy, ForwardProxy, make_ca

from adk.mcp import HTTPServer, MCPConnectionError, MCPToolset, SSEServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR")


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests set the proxy (and CA) variables they mean; none comes from the machine."""
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def https_process(ca: CertificateAuthority) -> Iterator[HTTPServerProcess]:
    process = HTTPServerProcess(tls=(ca.cert_chain, ca.key))
    process.start()
    yield process
    process.stop()


@pytest_asyncio.fixture(loop_scope="module")
async def proxy() -> AsyncIterator[ForwardProxy]:
    async with ForwardProxy() as running:
        yield running


async def add(toolset: MCPToolset) -> str:
    (tool,) = [tool for tool in await toolset.tools() if tool.spec.name == "add"]
    result = await tool.run(json.dumps({"a": 2, "b": 3}), None)  # type: ignore[arg-type]
    assert not result.is_error, result.content
    return result.content


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"])
async def test_an_http_server_is_reached_through_the_proxy_the_environment_names(
    variable: str,
    http_process: HTTPServerProcess,
    proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every request of the session (its handshake, the listing, the call, its close) goes
    through the proxy: none went there, as the client was given a transport of its own."""
    monkeypatch.setenv(variable, proxy.url)
    async with MCPToolset(HTTPServer(http_process.url)) as toolset:
        assert await add(toolset) == "5"
    assert proxy.requests, "no request went through the proxy"
    assert {url for _, url in proxy.requests} == {http_process.url}
    assert "POST" in {method for method, _ in proxy.requests}


@pytest.mark.parametrize("variable", ["NO_PROXY", "no_proxy"])
async def test_no_proxy_sends_an_http_servers_requests_straight_to_it(
    variable: str,
    http_process: HTTPServerProcess,
    proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv(variable, "localhost,127.0.0.1")
    async with MCPToolset(HTTPServer(http_process.url)) as toolset:
        assert await add(toolset) == "5"
    assert proxy.requests == []


async def test_through_a_proxy_an_http_error_is_still_named_with_its_status_and_words(
    proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the server's own transport adds (``_RefusalWatch``: an HTTP error answer's status and
    words, a session the server refused sent again, calls waiting for their answer without a read
    timeout) holds for requests that go through a proxy too: without it the mcp client says only
    'Server returned an error response'."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    process = HTTPServerProcess(token="s3cret-token")
    await asyncio.to_thread(process.start)
    try:
        toolset = MCPToolset(HTTPServer(process.url, headers={"Authorization": "Bearer expired"}))
        with pytest.raises(ConnectionError) as caught:
            await toolset.tools()
        assert "HTTP 401 Unauthorized" in str(caught.value)
        assert "The access token is missing or expired" in str(caught.value)
        assert proxy.requests and {url for _, url in proxy.requests} == {process.url}
    finally:
        await asyncio.to_thread(process.stop)


async def test_a_stateful_session_lost_to_a_restart_behind_a_proxy_is_renewed(
    proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server restarted while the session was idle refuses the session (404): the call never
    reached a tool, so it is sent again on a new session, through the proxy as before."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    process = HTTPServerProcess(legacy=True)
    await asyncio.to_thread(process.start)
    try:
        async with MCPToolset(HTTPServer(process.url)) as toolset:
            (pid,) = [tool for tool in await toolset.tools() if tool.spec.name == "pid"]
            first = await pid.run("{}", None)  # type: ignore[arg-type]
            opened = toolset._session.connections_opened
            await asyncio.to_thread(process.kill)
            await asyncio.to_thread(process.start)  # same port
            second = await pid.run("{}", None)  # type: ignore[arg-type]
            assert not second.is_error, second.content
            assert second.content != first.content
            assert toolset._session.connections_opened == opened + 1
        assert {url for _, url in proxy.requests} == {process.url}
    finally:
        await asyncio.to_thread(process.stop)


async def test_a_proxy_that_cannot_be_reached_is_a_connect_failure(
    http_process: HTTPServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy is where the client connects: one that is down fails the connect (stage
    ``"connect"``), as the server itself being down does, rather than the client going around it."""
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{closed_port()}")
    with pytest.raises(MCPConnectionError) as caught:
        await MCPToolset(HTTPServer(http_process.url)).tools()
    assert caught.value.stage == "connect"


async def test_a_connect_failure_through_a_proxy_names_the_proxy_its_password_masked(
    http_process: HTTPServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy that is down failed the connect naming the MCP server alone ('could not connect
    to MCP server 'http://127.0.0.1:.../mcp' ... All connection attempts failed'), a server that
    is up: the one address the client could not reach was not in the message. It names the
    proxy the environment gave for the URL, its credentials masked; one NO_PROXY exempts is not
    named."""
    port = closed_port()
    monkeypatch.setenv("HTTP_PROXY", f"http://alice:s3cret-pw@127.0.0.1:{port}")
    with pytest.raises(MCPConnectionError) as caught:
        await MCPToolset(HTTPServer(http_process.url)).tools()
    said = str(caught.value)
    assert f"through the proxy the environment names, 'http://***@127.0.0.1:{port}'" in said
    assert "s3cret" not in said and "alice" not in said
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    gone = f"http://127.0.0.1:{closed_port()}/mcp"
    with pytest.raises(MCPConnectionError) as caught:
        await MCPToolset(HTTPServer(gone)).tools()
    assert "proxy" not in str(caught.value)


async def test_an_sse_server_is_reached_through_the_proxy_and_no_proxy_applies(
    sse_process: HTTPServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SSE transport's client (pyadk's, given to the mcp client as its
    ``httpx_client_factory``) reads the environment as ``HTTPServer``'s does: its event stream
    and its messages go through the proxy, and ``NO_PROXY`` exempts a host. The headers the
    server is given are on the stream's request and on every message's (the client's own)."""
    monkeypatch.setenv("http_proxy", proxy.url)
    async with MCPToolset(SSEServer(sse_process.url, headers={"X-Tenant": "acme"})) as toolset:
        assert await add(toolset) == "5"
    methods = {method for method, _ in proxy.requests}
    assert {"GET", "POST"} <= methods
    assert [sent.get("x-tenant") for sent in proxy.headers] == ["acme"] * len(proxy.requests)
    assert all(url.startswith(f"http://127.0.0.1:{sse_process.port}/") for _, url in proxy.requests)
    proxy.requests.clear()
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    async with MCPToolset(SSEServer(sse_process.url)) as toolset:
        assert await add(toolset) == "5"
    assert proxy.requests == []


async def test_an_https_server_is_reached_through_a_tunnel_trusting_the_environments_cas(
    https_process: HTTPServerProcess,
    ca: CertificateAuthority,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``HTTPS_PROXY`` tunnels an ``https://`` server's requests (``CONNECT``), its certificate
    checked inside the tunnel against the CAs ``SSL_CERT_FILE`` names (a private CA, as a
    company's internal servers have): the transport reads the variable itself. Without it the
    private CA is not trusted and the connect fails saying why; ``NO_PROXY`` goes straight."""
    trusted = tmp_path / "trusted.pem"
    trusted.write_bytes(ca.path.read_bytes())
    async with ConnectProxy() as tunnel:
        monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
        with pytest.raises(MCPConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
            await MCPToolset(HTTPServer(https_process.url)).tools()
        monkeypatch.setenv("SSL_CERT_FILE", str(trusted))
        async with MCPToolset(HTTPServer(https_process.url)) as toolset:
            assert await add(toolset) == "5"
        assert tunnel.targets and set(tunnel.targets) == {f"127.0.0.1:{https_process.port}"}
        count = len(tunnel.targets)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        async with MCPToolset(HTTPServer(https_process.url)) as toolset:
            assert await add(toolset) == "5"
        assert len(tunnel.targets) == count


async def test_an_https_servers_connections_share_one_tls_context_read_from_the_environment(
    https_process: HTTPServerProcess,
    ca: CertificateAuthority,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each connection of an ``HTTPServer`` built a TLS context of its own, loading the CA store
    into it (~18 ms of CPU), and one more for each proxy the environment names: a service opening
    a connection per request paid it per request. They share the process's context, the one
    ``OpenAIChatModel``'s clients share, built again only when the CA source changes: the
    variables are still read as each connection opens (a CA file that does not hold the
    server's CA fails the next connect, the right one lets the one after it through)."""
    built: list[object] = []
    default_ssl_context = httpcore2.default_ssl_context

    def counted(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(None)
        return default_ssl_context(*args, **kwargs)

    monkeypatch.setattr(httpcore2, "default_ssl_context", counted)
    trusted = trust(ca, tmp_path, monkeypatch)
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # mounted with its own transport,
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # not used for this server
    for _ in range(3):
        async with MCPToolset(HTTPServer(https_process.url)) as toolset:
            assert await add(toolset) == "5"
    assert len(built) <= 1, built  # was two a connection: 6
    await _the_ca_file_is_read_at_each_connect(HTTPServer(https_process.url), trusted, monkeypatch)


async def test_a_proxy_variable_naming_no_http_proxy_fails_the_connect_saying_so(
    http_process: HTTPServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy of a scheme the client cannot use (``ftp://``) fails the connect with an error
    naming it, its password masked, as the default client's construction does, rather than the
    requests going around it."""
    monkeypatch.setenv("HTTP_PROXY", "ftp://alice:s3cret-pw@proxy.internal:2121")
    with pytest.raises(MCPConnectionError) as caught:
        await MCPToolset(HTTPServer(http_process.url)).tools()
    assert caught.value.stage == "connect"
    assert "Unknown scheme for proxy URL URL('ftp://alice:[secure]@proxy.internal:2121')" in str(
        caught.value
    )
    assert "s3cret" not in str(caught.value)


def counting_ca_loads(monkeypatch: pytest.MonkeyPatch) -> list[ssl.SSLContext]:
    """The contexts the CA store is loaded into from now on, one entry per load: every TLS
    context built, by whichever path (httpcore2 builds a proxy connection's own with a function it
    imported by name, which patching ``httpcore2.default_ssl_context`` does not reach)."""
    loads: list[ssl.SSLContext] = []
    original = ssl.SSLContext.load_verify_locations

    def spy(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
        loads.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", spy)
    return loads


async def _the_ca_file_is_read_at_each_connect(
    server: HTTPServer | SSEServer, trusted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a shared TLS context, ``SSL_CERT_FILE`` is still read as each connection to
    ``server`` opens: a CA file that does not hold the server's CA fails the next connect, the
    ``trusted`` one lets the one after it through."""
    other = make_ca(trusted.parent / "other")
    monkeypatch.setenv("SSL_CERT_FILE", str(other.path))
    with pytest.raises(MCPConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        await MCPToolset(server).tools()
    monkeypatch.setenv("SSL_CERT_FILE", str(trusted))
    async with MCPToolset(server) as toolset:
        assert await add(toolset) == "5"


def trust(ca: CertificateAuthority, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``SSL_CERT_FILE`` naming a copy of ``ca``'s certificate made for this test (a path of its
    own, so the process's shared context is built in the test whatever ran before)."""
    trusted = tmp_path / "trusted.pem"
    trusted.write_bytes(ca.path.read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(trusted))
    return trusted


@pytest.fixture(scope="module")
def https_sse_process(ca: CertificateAuthority) -> Iterator[HTTPServerProcess]:
    process = HTTPServerProcess(sse=True, tls=(ca.cert_chain, ca.key))
    process.start()
    yield process
    process.stop()


async def test_an_sse_servers_connections_share_the_processs_tls_context(
    https_sse_process: HTTPServerProcess,
    ca: CertificateAuthority,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An ``SSEServer``'s connection was made by the ``mcp`` package's default client, which
    built a TLS context of its own, loading the CA store into it (~18 ms of CPU), per
    connection. Its client is pyadk's now (``httpx_client_factory``), given the process's
    context, the one ``HTTPServer`` and ``OpenAIChatModel`` share: three sessions load the CA
    store once, and the variable is still read as each connection opens (a CA file without the
    server's CA fails the next connect)."""
    loads = counting_ca_loads(monkeypatch)
    trusted = trust(ca, tmp_path, monkeypatch)
    for _ in range(3):
        async with MCPToolset(SSEServer(https_sse_process.url)) as toolset:
            assert await add(toolset) == "5"
    assert len(loads) <= 1, loads  # was one a connection: 3
    await _the_ca_file_is_read_at_each_connect(
        SSEServer(https_sse_process.url), trusted, monkeypatch
    )


@pytest.mark.parametrize("kind", ["http", "sse"])
async def test_an_https_proxys_certificate_is_checked_with_the_shared_context(
    kind: str,
    http_process: HTTPServerProcess,
    sse_process: HTTPServerProcess,
    ca: CertificateAuthority,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A proxy named by an ``https://`` URL is spoken to over TLS, its certificate checked.
    ``httpx2`` checks it with a context given to the proxy (``httpx2.Proxy(ssl_context=)``), and
    with none built a new one for every connection to the proxy (``default_ssl_context``, the
    CA store loaded again). It is checked with the process's shared context, the one the
    servers' certificates are checked with: the trust the environment gives (a private CA in
    ``SSL_CERT_FILE``, as a company's proxy has) applies to the proxy, built once; a CA file
    that does not hold the proxy's CA fails the connect saying why."""
    process = http_process if kind == "http" else sse_process
    server = HTTPServer(process.url) if kind == "http" else SSEServer(process.url)
    loads = counting_ca_loads(monkeypatch)
    trusted = trust(ca, tmp_path, monkeypatch)
    async with ForwardProxy(tls=ca.server_context()) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        assert proxy.url.startswith("https://")
        for _ in range(2):
            async with MCPToolset(server) as toolset:
                assert await add(toolset) == "5"
        assert proxy.requests and {url for _, url in proxy.requests} >= {process.url}
        # one context for every connection, to the proxy and through it (was one a connection:
        # the forward proxy closes each, so every request opened one)
        assert len(loads) <= 1, len(loads)
        count = len(proxy.requests)
        other = make_ca(tmp_path / "other")
        monkeypatch.setenv("SSL_CERT_FILE", str(other.path))
        with pytest.raises(MCPConnectionError, match="CERTIFICATE_VERIFY_FAILED") as caught:
            await MCPToolset(server).tools()
        assert caught.value.stage == "connect"
        assert len(proxy.requests) == count  # refused before anything reached the proxy
        monkeypatch.setenv("SSL_CERT_FILE", str(trusted))
        async with MCPToolset(server) as toolset:
            assert await add(toolset) == "5"


@pytest.mark.parametrize("variable", ["NO_PROXY", "no_proxy"])
async def test_a_no_proxy_domain_with_a_leading_dot_covers_the_domain_itself(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``NO_PROXY=.corp.example`` sends ``corp.example`` and every host under it straight, as
    curl (``CURLOPT_NOPROXY``: a leading dot is ignored), ``requests`` and ``urllib``
    (``proxy_bypass_environment``) read it; ``httpx2``'s own reading took it for the hosts under
    it only, and sent ``corp.example`` itself through the proxy. A name that merely ends the same
    (``xcorp.example``) still goes through it, as does a host no entry names."""
    from adk.mcp._servers import _proxy_for

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv(variable, "localhost, .corp.example")
    for direct in ("corp.example", "CORP.example", "tools.corp.example", "a.b.corp.example"):
        assert _proxy_for(f"https://{direct}/mcp") is None, direct
    for proxied in ("xcorp.example", "corp.example.org", "example"):
        assert _proxy_for(f"https://{proxied}/mcp") == "http://proxy.internal:3128", proxied


@pytest.mark.parametrize("entry", [".:8443", ".*:8443", ".", ".*"])
async def test_a_leading_dot_entry_naming_no_domain_exempts_no_host(
    entry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leading-dot rule covers a domain's own name; an entry that names none (``.:8443``, a
    dot before a wildcard) was made the pattern of every host (``all://:8443``, ``all://*``),
    which ``httpx2`` ranks above the proxies' patterns where it has a port: every host on port
    8443 went around the proxy. Curl and ``requests`` exempt no host for it, nor does this."""
    from adk.mcp._servers import _proxy_for

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", f"{entry}, .corp.example")
    for host in ("tools.example:8443", "tools.example"):
        assert _proxy_for(f"https://{host}/mcp") == "http://proxy.internal:3128", host
    assert _proxy_for("https://corp.example:8443/mcp") is None  # the entry beside it still holds


async def test_a_leading_dot_before_a_port_alone_sends_no_request_around_the_proxy(
    http_process: HTTPServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the requests go: ``NO_PROXY=.:<port>`` sent the server's requests straight."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", f".:{http_process.port}")
    async with MCPToolset(HTTPServer(f"http://localhost:{http_process.port}/mcp")) as toolset:
        assert await add(toolset) == "5"
    assert proxy.requests


async def test_no_proxy_with_a_leading_dot_sends_the_domains_own_requests_straight(
    http_process: HTTPServerProcess, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same rule where the requests go: ``NO_PROXY=.localhost`` keeps a server at
    ``localhost`` off the proxy (it went through it)."""
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", ".localhost")
    async with MCPToolset(HTTPServer(f"http://localhost:{http_process.port}/mcp")) as toolset:
        assert await add(toolset) == "5"
    assert proxy.requests == []
    monkeypatch.setenv("NO_PROXY", ".example")  # another domain's: the proxy is used
    async with MCPToolset(HTTPServer(f"http://localhost:{http_process.port}/mcp")) as toolset:
        assert await add(toolset) == "5"
    assert proxy.requests


async def test_an_https_server_is_reached_through_a_tunnel_of_an_https_proxy(
    https_process: HTTPServerProcess,
    ca: CertificateAuthority,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """TLS inside TLS: the client speaks TLS to the proxy, asks it for a tunnel (``CONNECT``), and
    speaks TLS to the server inside it, both checked with the one shared context (its ALPN list
    the one both handshakes ask for), loaded once."""
    loads = counting_ca_loads(monkeypatch)
    trust(ca, tmp_path, monkeypatch)
    async with ConnectProxy(tls=ca.server_context()) as tunnel:
        monkeypatch.setenv("HTTPS_PROXY", tunnel.url)
        async with MCPToolset(HTTPServer(https_process.url)) as toolset:
            assert await add(toolset) == "5"
        assert tunnel.targets and set(tunnel.targets) == {f"127.0.0.1:{https_process.port}"}
    assert len(loads) <= 1, len(loads)
