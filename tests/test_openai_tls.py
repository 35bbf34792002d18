"""The TLS context of the clients ``OpenAIChatModel`` makes: built once per CA source, shared by
every model and every event loop's client, and otherwise what the ``openai`` SDK's own client does.

Against the wire server over HTTPS (``tests/openai_server.py`` with a certificate authority made
at test time, ``tests/tls_helpers.py``), trusted through ``SSL_CERT_FILE`` as a user trusts a
private CA. Each test points ``SSL_CERT_FILE`` at a CA of its own, so the context is built in the
test (the cache is keyed by the CA source) whatever ran before it in the process.
"""

from __future__ import annotations

import asyncio
import os
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import openai
import pytest
from openai_server import OpenAIServer, Reply
from tls_helpers import CertificateAuthority, ConnectProxy, ForwardProxy, make_ca

from adk.messages import Message
from adk.models import ModelError, RetryPolicy, _openai_tls
from adk.models.openai import OpenAIChatModel

ONCE = RetryPolicy(max_attempts=1)
_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests set the proxy variables they mean; none comes from the machine."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.delenv("SSLKEYLOGFILE", raising=False)


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return make_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> CertificateAuthority:
    return make_ca(tmp_path_factory.mktemp("other-ca"), "another pyadk test CA")


@pytest.fixture
def trusted(tmp_path: Path, ca: CertificateAuthority, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``SSL_CERT_FILE`` naming a copy of ``ca``'s certificate made for this test."""
    path = tmp_path / "trusted.pem"
    path.write_bytes(ca.path.read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(path))
    return path


@pytest.fixture
async def https_server(ca: CertificateAuthority) -> Any:
    async with OpenAIServer(default=Reply(text="ok"), tls=ca.server_context()) as server:
        yield server


def model(url: str, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel("test-model", base_url=url, api_key="sk-test", retry=ONCE, **options)


async def ask(chat: OpenAIChatModel) -> str:
    return (await chat.generate([Message.user("hi")])).content


async def ask_on_a_new_loop(chat: OpenAIChatModel) -> str:
    """A call on a loop of its own (``asyncio.run`` in another thread): the model makes that loop
    a client, closed as the loop ends."""
    return await asyncio.to_thread(asyncio.run, ask(chat))


def counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[ssl.SSLContext]:
    """The contexts ``ssl.SSLContext.<name>`` is called on from now on, one entry per call."""
    calls: list[ssl.SSLContext] = []
    original: Callable[..., Any] = getattr(ssl.SSLContext, name)

    def spy(self: ssl.SSLContext, *args: Any, **kwargs: Any) -> Any:
        calls.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, name, spy)
    return calls


def transport_context(chat: OpenAIChatModel) -> ssl.SSLContext:
    """The context the connection pool of the model's first client opens connections with."""
    pool = chat._client._client._transport._pool  # type: ignore[attr-defined]
    context = pool._ssl_context
    assert isinstance(context, ssl.SSLContext)
    return context


async def test_models_and_their_loops_load_the_ca_store_once(
    trusted: Path, https_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each client the model made loaded the CA store anew (~18 ms of CPU): one where a model was
    made and one per event loop it was used on. Three models, each called on this loop and on one
    of its own, load it once, and every connection verified the server with it."""
    loads = counting(monkeypatch, "load_verify_locations")
    models = [model(https_server.base_url) for _ in range(3)]
    try:
        answers = [await ask(chat) for chat in models]
        answers += [await ask_on_a_new_loop(chat) for chat in models]
    finally:
        for chat in models:
            await chat.aclose()
    assert answers == ["ok"] * 6
    assert len(loads) == 1
    shared = loads[0]
    assert all(transport_context(chat) is shared for chat in models)
    # Six clients, each with a connection of its own, all speaking HTTP/1.1 as before.
    assert https_server.alpn == ["http/1.1"] * 6


async def test_a_connection_does_not_reconfigure_the_shared_context(
    trusted: Path, https_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """httpcore2 sets the context's ALPN protocols before every handshake, which OpenSSL does by
    freeing and reallocating them while another thread's handshake may be copying them (Python's
    ssl docs: a context is thread-safe as long as it is not reconfigured after use). The shared
    context is given them once; connections from several threads at once leave it alone."""
    alpn_sets = counting(monkeypatch, "_set_alpn_protocols")
    chat = model(https_server.base_url)
    shared = transport_context(chat)
    assert alpn_sets.count(shared) == 1  # when it was built, before any client had it
    try:
        answers = [await ask(chat)]
        # Three threads, each with a loop of its own, connecting at once.
        answers += await asyncio.gather(*(ask_on_a_new_loop(chat) for _ in range(3)))
    finally:
        await chat.aclose()
    assert answers == ["ok"] * 4
    assert alpn_sets.count(shared) == 1
    assert https_server.alpn == ["http/1.1"] * 4
    # A client asking it for other protocols (none pyadk makes) is refused, not served by a change.
    with pytest.raises(RuntimeError, match="h2"):
        shared.set_alpn_protocols(["h2", "http/1.1"])


async def test_ssl_cert_file_is_read_for_each_model_made(
    tmp_path: Path,
    ca: CertificateAuthority,
    other_ca: CertificateAuthority,
    https_server: OpenAIServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The context is kept while what it was built from stays: a model made after
    ``SSL_CERT_FILE`` names another CA, or after the file it names was replaced (a rotated
    bundle), trusts what the variable says then, as the SDK's client does; the clients made
    before keep theirs."""
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(ca.path.read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    trusting = model(https_server.base_url)

    monkeypatch.setenv("SSL_CERT_FILE", str(other_ca.path))
    distrusting = model(https_server.base_url)
    plain = openai.AsyncOpenAI(api_key="sk-test", base_url=https_server.base_url, max_retries=0)

    replacement = tmp_path / "replacement.pem"
    replacement.write_bytes(other_ca.path.read_bytes())
    os.replace(replacement, bundle)  # what a rotation does: the name now holds another file
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    rotated = model(https_server.base_url)
    try:
        assert await ask(trusting) == "ok"
        with pytest.raises(ModelError, match="CERTIFICATE_VERIFY_FAILED") as refused:
            await ask(distrusting)
        with pytest.raises(openai.APIConnectionError) as plain_refused:
            await plain.chat.completions.create(
                model="test-model", messages=[{"role": "user", "content": "hi"}]
            )
        assert str(refused.value.__cause__.__cause__) == str(plain_refused.value.__cause__)  # type: ignore[union-attr]
        with pytest.raises(ModelError, match="CERTIFICATE_VERIFY_FAILED"):
            await ask(rotated)
        # A loop's client is made when the loop first calls, and trusts what the bundle holds
        # then, as every client the SDK builds does.
        with pytest.raises(ModelError, match="CERTIFICATE_VERIFY_FAILED"):
            await ask_on_a_new_loop(trusting)
    finally:
        for chat in (trusting, distrusting, rotated):
            await chat.aclose()
        await plain.close()


@pytest.mark.parametrize(
    "content",
    [None, b"not a certificate\n", "directory"],
    ids=["missing", "not PEM", "a directory"],
)
def test_a_bad_ssl_cert_file_fails_as_the_openai_client_does(
    tmp_path: Path,
    content: bytes | str | None,
    monkeypatch: pytest.MonkeyPatch,
    ca: CertificateAuthority,
) -> None:
    """Where the model is made, the error the SDK's client raises for the same file (a
    directory named where a file belongs too: ``IsADirectoryError``); nothing of the failure is
    kept: the model is made once the variable names a good file."""
    path = tmp_path / "bundle.pem"
    if content == "directory":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    monkeypatch.setenv("SSL_CERT_FILE", str(path))
    with pytest.raises(Exception) as sdk:
        openai.AsyncOpenAI(api_key="sk-test", base_url="https://127.0.0.1:9/v1")
    with pytest.raises(Exception) as ours:
        model("https://127.0.0.1:9/v1")
    assert isinstance(sdk.value, (OSError, ssl.SSLError))
    assert type(ours.value) is type(sdk.value)
    assert str(ours.value) == str(sdk.value)

    if path.is_dir():
        path.rmdir()
    path.write_bytes(ca.path.read_bytes())
    chat = model("https://127.0.0.1:9/v1")
    assert transport_context(chat).get_ca_certs()[0]["subject"] == (
        (("commonName", "pyadk test CA"),),
    )


def test_an_ssl_cert_file_naming_a_fifo_is_refused_without_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ca: CertificateAuthority
) -> None:
    """A FIFO (a named pipe, ``SSL_CERT_FILE=<(cat bundle.pem)``) is no file of CAs: OpenSSL's
    read of it waits for a writer, for ever where none comes (making the model hung, holding
    the lock every other model made waits on), and a second context built from it would read
    nothing. It is refused where the model is made, naming the variable, and nothing is read:
    here a writer waits with a good CA, so a read would have made the model."""
    import threading

    fifo = tmp_path / "bundle.pem"
    os.mkfifo(fifo)
    monkeypatch.setenv("SSL_CERT_FILE", str(fifo))

    def write() -> None:
        try:
            with open(fifo, "wb") as pipe:  # waits for a reader
                pipe.write(ca.path.read_bytes())
        except BrokenPipeError:  # the reader the test's end opens reads nothing
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        with pytest.raises(
            OSError, match=r"SSL_CERT_FILE names '.*bundle\.pem', a FIFO, not a file of CA"
        ):
            model("https://127.0.0.1:9/v1")
    finally:
        # A reader lets the waiting writer go; held open until the writer is done, as a writer
        # woken after the reader closed again goes back to waiting for one (for ever).
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        try:
            writer.join()
        finally:
            os.close(reader)
    fifo.unlink()
    fifo.write_bytes(ca.path.read_bytes())
    chat = model("https://127.0.0.1:9/v1")  # nothing of the refusal was kept
    assert transport_context(chat).get_ca_certs()[0]["subject"] == (
        (("commonName", "pyadk test CA"),),
    )


async def test_proxies_from_the_environment_still_apply(
    trusted: Path, https_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HTTPS_PROXY`` tunnels an https URL through the proxy, TLS inside the tunnel checked
    with the shared context; ``NO_PROXY`` exempts a host; ``HTTP_PROXY`` takes an http URL's
    requests (here a wire server stands in for the proxy, answering them itself)."""
    async with ConnectProxy() as proxy, OpenAIServer(default=Reply(text="via proxy")) as forward:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("HTTP_PROXY", forward.root_url)
        tunnelled = model(https_server.base_url)
        unreachable = model("http://api.example.invalid/v1")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        exempt = model(https_server.base_url)
        try:
            assert await ask(tunnelled) == "ok"
            assert proxy.targets == [f"127.0.0.1:{https_server.port}"]
            assert await ask(exempt) == "ok"
            assert proxy.targets == [f"127.0.0.1:{https_server.port}"]  # went straight there
            assert await ask(unreachable) == "via proxy"
            assert [r.path for r in forward.requests] == [
                "http://api.example.invalid/v1/chat/completions"
            ]
        finally:
            for chat in (tunnelled, unreachable, exempt):
                await chat.aclose()
    assert transport_context(tunnelled) is transport_context(exempt)


@pytest.mark.parametrize(
    ("proxy_variable", "exempt_variable"), [("http_proxy", "no_proxy"), ("ALL_PROXY", "NO_PROXY")]
)
async def test_a_forward_proxy_named_in_lowercase_or_for_all_urls_applies_too(
    proxy_variable: str, exempt_variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client the model makes with the shared context reads the proxy variables as the SDK's
    own client does: lowercase ones and ``ALL_PROXY`` too, a plain-HTTP URL's requests forwarded
    by the proxy, and a host ``NO_PROXY`` names reached straight (a real forward proxy, which
    counts what it forwards)."""
    async with ForwardProxy() as proxy, OpenAIServer(default=Reply(text="ok")) as server:
        monkeypatch.setenv(proxy_variable, proxy.url)
        proxied = model(server.base_url)
        monkeypatch.setenv(exempt_variable, "127.0.0.1")
        exempt = model(server.base_url)
        try:
            assert await ask(proxied) == "ok"
            assert proxy.requests == [("POST", f"{server.base_url}/chat/completions")]
            assert await ask(exempt) == "ok"
            assert len(proxy.requests) == 1  # went straight there
            assert len(server.requests) == 2
        finally:
            for chat in (proxied, exempt):
                await chat.aclose()


@pytest.mark.parametrize("timeout", [None, 7.5])
def test_the_client_is_the_sdks_own_kind(
    trusted: Path, timeout: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Given an HTTP client, the SDK leaves it as it is: the model's has what the SDK's own would
    (its connection limits, timeout, redirects, proxies read from the environment), built per
    client, and nothing but the context shared."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # read by each client when made
    url = "https://127.0.0.1:9/v1"
    chat = model(url, timeout=timeout)
    sdk = openai.AsyncOpenAI(
        api_key="sk-test", base_url=url, timeout=openai.not_given if timeout is None else timeout
    )
    ours, theirs = chat._client._client, sdk._client
    assert isinstance(ours, openai.DefaultAsyncHttpxClient)
    assert chat._client.timeout == sdk.timeout
    for name in ("timeout", "follow_redirects", "max_redirects", "trust_env", "base_url"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert dict(ours.headers) == dict(theirs.headers)

    def pools(client: Any) -> list[dict[str, Any]]:
        transports = [client._transport, *client._mounts.values()]
        return [
            {
                name: getattr(t._pool, name)
                for name in ("_max_connections", "_max_keepalive_connections", "_keepalive_expiry")
            }
            | {"kind": type(t._pool).__name__, "http2": t._pool._http2}
            for t in transports
        ]

    assert pools(ours) == pools(theirs)
    assert [str(pattern.pattern) for pattern in ours._mounts] == ["https://"]
    other = chat._new_client()._client
    assert other is not ours and other._transport._pool is not ours._transport._pool
    assert other._mounts is not ours._mounts
    assert transport_context(chat) is other._transport._pool._ssl_context


async def test_a_client_of_ones_own_is_used_as_it_is(
    trusted: Path,
    https_server: OpenAIServer,
    ca: CertificateAuthority,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``client=`` keeps its HTTP client and its context; the model builds none."""
    own_context = ssl.create_default_context(cafile=str(ca.path))
    http = openai.DefaultAsyncHttpxClient(verify=own_context)
    loads = counting(monkeypatch, "load_verify_locations")
    client = openai.AsyncOpenAI(api_key="sk-test", base_url=https_server.base_url, http_client=http)
    chat = OpenAIChatModel("test-model", client=client, retry=ONCE)
    assert await ask(chat) == "ok"
    assert chat._client._client is http
    assert http._transport._pool._ssl_context is own_context  # type: ignore[attr-defined]
    assert loads == []
    await chat.aclose()
    await client.close()


def test_the_cache_keeps_one_context_per_source(
    tmp_path: Path, ca: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same source gives the same context; a variable changing gives a new one, and the
    variables naming a source read before give that source's context again only if nothing of
    it changed."""
    first, second = tmp_path / "first.pem", tmp_path / "second.pem"
    first.write_bytes(ca.path.read_bytes())
    second.write_bytes(ca.path.read_bytes())
    monkeypatch.setenv("SSL_CERT_FILE", str(first))
    a = _openai_tls.shared_tls_context()
    assert a is not None and _openai_tls.shared_tls_context() is a
    monkeypatch.setenv("SSL_CERT_FILE", str(second))
    b = _openai_tls.shared_tls_context()
    assert b is not None and b is not a
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "keys.log"))
    c = _openai_tls.shared_tls_context()
    assert c is not None and c is not b
    assert c.keylog_filename == str(tmp_path / "keys.log")  # as ssl.create_default_context does
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path))
    d = _openai_tls.shared_tls_context()
    assert d is not None and d is not c


def test_a_context_not_plain_ssl_is_left_to_the_sdk(
    tmp_path: Path, ca: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the SDK's context is truststore's (macOS, Windows), which reconfigures an inner
    context per handshake, nothing is shared: the SDK builds each client as it did."""
    import truststore

    monkeypatch.setenv("SSL_CERT_FILE", str(ca.path))
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "a key for this test alone"))
    built: list[ssl.SSLContext] = []

    def system_store(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built.append(truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT))
        return built[-1]

    monkeypatch.setattr(_openai_tls.httpx2, "create_ssl_context", system_store)
    assert _openai_tls.shared_tls_context() is None
    assert _openai_tls.http_client("https://127.0.0.1:9/v1", openai.not_given) is None
    # (the SDK's transport builds its own context through httpx2._config, not the name replaced)
    chat = model("https://127.0.0.1:9/v1")
    assert len(built) == 1  # the answer was kept for this source: not built again
    assert type(chat._client._client).__name__ == "AsyncHttpxClientWrapper"  # the SDK's own


def test_an_sdk_on_another_http_library_builds_its_own_clients(
    trusted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SDK on httpx rather than httpx2 (openai 2.x, below what pyproject allows, or one whose
    default client changes again): there nothing is shared and the SDK builds each client as it
    did (the module's flag, set at import from the SDK's client)."""
    assert _openai_tls._SHARED  # the SDK installed here is on httpx2
    monkeypatch.setattr(_openai_tls, "_SHARED", False)
    assert _openai_tls.shared_tls_context() is None
    chat = model("https://127.0.0.1:9/v1")
    assert type(chat._client._client).__name__ == "AsyncHttpxClientWrapper"  # the SDK's own


def test_a_replaced_fallback_ca_file_gives_a_new_context(
    tmp_path: Path,
    ca: CertificateAuthority,
    other_ca: CertificateAuthority,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where OpenSSL's compiled-in CA file and directory do not exist (a Python built against
    an OpenSSL of its own prefix), the SDK's context loads the first of httpcore2's candidate
    files (``/etc/ssl/certs/ca-certificates.crt``...). That file replaced (an updated system
    store) gives the next client a new context, as it does where the compiled-in file is read."""
    import httpcore2._ssl

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    missing = str(tmp_path / "no-such-openssl-dir")
    paths = ssl.get_default_verify_paths()._replace(  # type: ignore[attr-defined]
        openssl_cafile=f"{missing}/cert.pem", openssl_capath=f"{missing}/certs"
    )
    monkeypatch.setattr(ssl, "get_default_verify_paths", lambda: paths)
    monkeypatch.setattr(_openai_tls, "_default_paths", None)
    bundle = tmp_path / "ca-certificates.crt"
    bundle.write_bytes(ca.path.read_bytes())
    monkeypatch.setattr(httpcore2._ssl, "CA_FILE_CANDIDATES", [str(bundle)])

    def trusted_names(context: ssl.SSLContext | None) -> list[Any]:
        assert context is not None
        return [cert["subject"] for cert in context.get_ca_certs()]

    first = _openai_tls.shared_tls_context()
    assert trusted_names(first) == [((("commonName", "pyadk test CA"),),)]
    assert _openai_tls.shared_tls_context() is first
    replacement = tmp_path / "replacement.crt"
    replacement.write_bytes(other_ca.path.read_bytes())
    os.replace(replacement, bundle)
    second = _openai_tls.shared_tls_context()
    assert second is not first
    assert trusted_names(second) == [((("commonName", "another pyadk test CA"),),)]


def test_truststore_injected_after_the_context_was_built_is_used_as_the_sdk_uses_it(
    trusted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``truststore.inject_into_ssl()`` (the system's trust store for every ``ssl`` context, as
    pip does) replaces ``ssl.SSLContext``: the SDK's clients made after it build truststore's
    context. A model made after it gets that kind too, not the plain context built before, and
    one made after ``extract_from_ssl()`` a plain one again."""
    import truststore

    before = _openai_tls.shared_tls_context()
    assert type(before) is ssl.SSLContext
    truststore.inject_into_ssl()
    try:
        sdk = openai.AsyncOpenAI(api_key="sk-test", base_url="https://127.0.0.1:9/v1")
        chat = model("https://127.0.0.1:9/v1")
        theirs = sdk._client._transport._pool._ssl_context  # type: ignore[attr-defined]
        ours = chat._client._client._transport._pool._ssl_context  # type: ignore[attr-defined]
        assert isinstance(theirs, truststore.SSLContext)
        assert type(ours) is type(theirs)
        # truststore's is not shared (see test_a_context_not_plain_ssl_is_left_to_the_sdk)
        assert _openai_tls.shared_tls_context() is None
    finally:
        truststore.extract_from_ssl()
    after = _openai_tls.shared_tls_context()
    assert type(after) is ssl.SSLContext


async def test_an_https_proxys_certificate_is_checked_with_the_shared_context(
    trusted: Path, ca: CertificateAuthority, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proxy named by an ``https://`` URL is spoken to over TLS. ``httpx2`` checks its
    certificate with the context given to the proxy (``httpx2.Proxy(ssl_context=)``) and, given
    none, built a new one, the CA store loaded again, for each connection to the proxy. The
    model's clients give it the shared context: the private CA ``SSL_CERT_FILE`` names is what
    the proxy is checked against, loaded once for two models' connections."""
    async with (
        ForwardProxy(tls=ca.server_context()) as proxy,
        OpenAIServer(default=Reply(text="ok")) as server,
    ):
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        loads = counting(monkeypatch, "load_verify_locations")
        models = [model(server.base_url) for _ in range(2)]
        try:
            assert [await ask(chat) for chat in models] == ["ok", "ok"]
            assert [await ask(chat) for chat in models] == ["ok", "ok"]
        finally:
            for chat in models:
                await chat.aclose()
        # Each model's client opened a connection to the proxy (the wire server keeps the
        # connection the proxy opened to it, so a second request may pass without a record).
        assert len(proxy.requests) >= 2
        assert len(loads) <= 1, len(loads)  # was one a connection to the proxy, and the shared


async def _a_leading_dot_covers_localhost(
    monkeypatch: pytest.MonkeyPatch, *, other: str
) -> OpenAIChatModel:
    """A model made while ``NO_PROXY=.localhost`` asks the wire server at ``localhost``
    straight; one made while ``NO_PROXY`` is ``other`` (another domain) asks it through the
    ``HTTP_PROXY``. Returns that second model (closed)."""
    async with ForwardProxy() as proxy, OpenAIServer(default=Reply(text="ok")) as server:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", ".localhost")
        url = f"http://localhost:{server.port}/v1"
        exempt = model(url)
        monkeypatch.setenv("NO_PROXY", other)
        proxied = model(url)
        try:
            assert await ask(exempt) == "ok"
            assert proxy.requests == []
            assert await ask(proxied) == "ok"
            assert proxy.requests == [("POST", f"{url}/chat/completions")]
        finally:
            for chat in (exempt, proxied):
                await chat.aclose()
    return proxied


async def test_a_no_proxy_domain_with_a_leading_dot_covers_the_domain_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``NO_PROXY=.localhost`` sends a model's requests to ``localhost`` straight, as curl and
    ``requests`` read a leading dot (the domain and the hosts under it), where ``httpx2``'s own
    reading sent them to the proxy; another domain's entry leaves them to the proxy."""
    await _a_leading_dot_covers_localhost(monkeypatch, other=".example")


async def test_a_no_proxy_leading_dot_covers_the_domain_where_no_context_is_shared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where the SDK's context is truststore's (macOS, Windows, ``truststore.inject_into_ssl()``)
    nothing is shared and the SDK built the client: with httpx2's reading of ``NO_PROXY``, so
    ``.localhost`` sent a model's requests to ``localhost`` through the proxy there, while an MCP
    ``HTTPServer`` (and a model on Linux) went straight. The rule holds there too; with no such
    entry the SDK still builds the client itself."""
    import truststore

    def system_store(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        return truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)

    monkeypatch.setattr(_openai_tls.httpx2, "create_ssl_context", system_store)
    monkeypatch.setenv("SSLKEYLOGFILE", os.devnull)  # a source of its own: built again here
    assert _openai_tls.shared_tls_context() is None
    proxied = await _a_leading_dot_covers_localhost(monkeypatch, other="other.example")
    assert type(proxied._client._client).__name__ == "AsyncHttpxClientWrapper"


@pytest.mark.parametrize("proxied", [False, True])
def test_a_models_client_reads_the_proxy_variables_once(
    proxied: bool, trusted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each client made reads the environment's proxy variables once, as the SDK's own client
    does (a scan of ``os.environ``, ~20 us, one per model and per loop it is used on): reading
    them to mount the proxies' transports, the client then read them again itself (and built
    transports to the proxies that the mounts replaced)."""
    import urllib.request

    import httpx2._utils

    if proxied:
        monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("NO_PROXY", "localhost")
    reads: list[int] = []
    real = urllib.request.getproxies

    def counted() -> dict[str, str]:
        reads.append(1)
        return real()

    monkeypatch.setattr(httpx2._utils, "getproxies", counted)
    monkeypatch.setattr(urllib.request, "getproxies", counted)
    chat = model("https://127.0.0.1:9/v1")
    assert len(reads) == 1 + proxied  # (the NO_PROXY entries are read for the leading-dot rule)
    patterns = [str(pattern.pattern) for pattern in chat._client._client._mounts]
    assert patterns == (["all://localhost", "https://"] if proxied else [])
