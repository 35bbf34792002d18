"""The HTTP client of each ``AsyncOpenAI`` that ``OpenAIChatModel`` makes, given a TLS context built
once per process (per CA source) instead of once per client.

Why: an ``AsyncOpenAI`` made without ``http_client=`` builds an ``httpx2`` client whose transport
builds an ``SSLContext`` and loads the CA store into it, ~18 ms of CPU per client (57 ms on a loaded
machine). A model makes a client where it is made and one per event loop it is used on
(``LoopClients``): a service doing ``asyncio.run`` per request, or threads each with a loop, paid
it per loop, and one building a model per request paid it per request (~8% of the test suite's
CPU).

What stays as it was:

- The context is the one the SDK's client builds, by the same call (``httpx2.create_ssl_context``
  with its defaults, ``verify=True`` and ``trust_env=True``): ``SSL_CERT_FILE``, else
  ``SSL_CERT_DIR``, else OpenSSL's compiled-in CA file and directory (truststore's system store on
  macOS and Windows). A bad ``SSL_CERT_FILE`` raises where the model is made, the same error;
  but one naming a FIFO, a device or a socket is refused unread (``_refuse_a_stream``), where the
  SDK's client waits for ever for a writer.
- It is kept for as long as what it was built from is unchanged: those two variables,
  ``SSLKEYLOGFILE`` (``ssl.create_default_context`` reads it) and the file or directory the CAs
  are read from (its device, inode, size and modification time; where OpenSSL's compiled-in file
  does not exist, those of the candidate files httpcore2 falls back to). A variable set
  differently, or a bundle replaced (a rotated ``SSL_CERT_FILE``, an updated system store), gives
  the next client a new context, as every client read them anew before. A few ``stat`` calls per
  client made.
- The client is the SDK's own kind (``openai.DefaultAsyncHttpxClient``: its connection limits,
  timeout and ``follow_redirects``) given the URL and timeout the SDK would give it, and built per
  ``AsyncOpenAI`` as before: its connection pool, its proxies (read from ``HTTP(S)_PROXY``,
  ``ALL_PROXY``, ``NO_PROXY`` when it is built, once, here, and given to it as its transports:
  ``environment_proxies``) are its own. Only the context is shared. What the SDK's default client adds beyond that is a finalizer that schedules ``aclose``
  on whatever loop is running when it is collected; the model's clients are closed as their loop
  ends (``LoopClients``), so there is nothing left for it to do.

Sharing: Python's ``ssl`` documentation says an ``SSLContext`` "is designed to be shared and used
by multiple connections ... thread-safe as long as it is not reconfigured after being used by a
connection". ``httpcore2`` reconfigures it before every TLS handshake: ``set_alpn_protocols
(["http/1.1"])`` (for an HTTP/1.1 client, which the SDK's is), which OpenSSL carries out by freeing
the context's protocol list and allocating a new one, while another thread's ``SSL_new`` (which
CPython runs without the GIL) may be copying it. The shared context is given its ALPN list once,
before any client has it, and that per-handshake call, asking for the same list, leaves it alone
(the instance's ``set_alpn_protocols``; the context stays a plain ``ssl.SSLContext``, which anyio
wraps on the loop's thread where it would hand any other type to a worker thread). Only a plain
``ssl.SSLContext`` is shared: truststore's (macOS, Windows, or anywhere after
``truststore.inject_into_ssl()``, which the key notices) verifies through the system per
handshake, costs little to build and reconfigures an inner context itself, so there the SDK
builds its client as before (unless ``NO_PROXY`` names a domain with a leading dot: then it is the
SDK's kind of client, each transport building its own context, given that domain's pattern,
``environment_proxies``); so does an ``openai`` SDK whose HTTP library is not ``httpx2``.
"""

from __future__ import annotations

import os
import ssl
import stat
import threading
import urllib.request
from collections.abc import Iterable
from typing import Any

import httpx2  # openai>=3.14 (pyproject's bound) requires it
import openai

# The SDK's HTTP client is httpx2's, whose transport builds its context as this module does; an
# SDK whose default client is another library's builds its clients as before.
_SHARED = issubclass(openai.DefaultAsyncHttpxClient, httpx2.AsyncClient)

try:  # the files httpcore2 falls back to where OpenSSL's compiled-in ones do not exist
    from httpcore2 import _ssl as _httpcore_ssl
except ImportError:  # (a private module of httpx2's transport: gone, no fallback files)
    _httpcore_ssl = None  # type: ignore[assignment]

# The standard library's class, even where truststore.inject_into_ssl() replaced ssl.SSLContext
# (with a subclass of it) before this module was imported.
_PLAIN_CONTEXT: type[ssl.SSLContext] = next(
    c for c in ssl.SSLContext.__mro__ if c.__module__ == "ssl" and c.__name__ == "SSLContext"
)

__all__ = ["environment_proxies", "http_client", "proxy_transport", "shared_tls_context"]

_ALPN = ("http/1.1",)  # what httpcore2 asks for before each handshake of an HTTP/1.1 client
_Key = tuple[object, ...]
_Stamp = tuple[int, int, int, int, int]

_lock = threading.Lock()
# The last context built and what it was built from. One entry: a process whose CA source changes
# keeps no context of a source it no longer has.
_cached: tuple[_Key, ssl.SSLContext | None] | None = None
_default_paths: tuple[str, str] | None = None


def http_client(base_url: str, timeout: Any) -> httpx2.AsyncClient | None:
    """The ``http_client=`` for an ``AsyncOpenAI`` given ``base_url`` and ``timeout`` (``NotGiven``
    for the SDK's default), or None to let the SDK build its own (where no context is shared and
    ``NO_PROXY`` names no domain with a leading dot)."""
    if not _SHARED:
        return None
    context = shared_tls_context()
    if isinstance(timeout, openai.NotGiven):
        timeout = openai.DEFAULT_TIMEOUT
    # The proxy variables are read here, once: the transports to the proxies they name check an
    # https:// proxy with the shared context, and the domains ``NO_PROXY`` names with a leading
    # dot are added (``environment_proxies``).
    named = _named_proxies()
    exempt = _dot_domains(named)
    if context is None:  # truststore's: each transport builds its own, as the SDK's client does
        if not exempt:
            return None
        return openai.DefaultAsyncHttpxClient(base_url=base_url, timeout=timeout, mounts=exempt)
    limits = openai.DEFAULT_CONNECTION_LIMITS
    mounts: dict[str, httpx2.AsyncBaseTransport | None] = {
        pattern: None if proxy is None else proxy_transport(proxy, context, limits=limits)
        for pattern, proxy in named.items()
    }
    mounts.update(exempt)
    # Given a transport (the one it would build: the context, the SDK's limits), the client reads
    # no proxy variable itself: it read them again, and built transports the mounts replaced.
    direct = httpx2.AsyncHTTPTransport(verify=context, limits=limits)
    return openai.DefaultAsyncHttpxClient(
        base_url=base_url, timeout=timeout, transport=direct, mounts=mounts or None
    )


def environment_proxies() -> dict[str, str | None]:
    """The proxies the environment names, by URL pattern (a pattern mapped to None is reached
    straight), as ``httpx2`` reads them (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``,
    ``NO_PROXY``, lowercase first, as ``urllib`` reads them), but for one rule: a ``NO_PROXY``
    entry with a leading dot (``.corp.example``) covers the domain itself too, as curl
    (``CURLOPT_NOPROXY``: the dot is ignored), ``requests`` and ``urllib``
    (``proxy_bypass_environment``) read it, where ``httpx2`` takes it for the hosts under it only
    and sent ``corp.example`` itself to the proxy. Go's ``httpproxy`` reads it as ``httpx2`` does;
    the Python tools a service's other clients are likeliest to be agree with curl."""
    mounts = _named_proxies()
    mounts.update(_dot_domains(mounts))
    return mounts


def _named_proxies() -> dict[str, str | None]:
    """``httpx2``'s own reading of the proxy variables (a function private to it, which its
    client made without a transport calls). Imported here, so a ``httpx2`` without it fails where
    a client is made, saying so, not ``import adk``."""
    from httpx2._utils import get_environment_proxies

    return get_environment_proxies()


def _dot_domains(named: dict[str, str | None]) -> dict[str, None]:
    """The patterns ``environment_proxies`` adds to ``named`` (``httpx2``'s reading): each
    domain ``NO_PROXY`` names with a leading dot, for the domain itself, reached straight."""
    from httpx2._utils import URLPattern

    added: dict[str, None] = {}
    if not named:  # none named (or ``NO_PROXY=*``): nothing to exempt either
        return added
    for name in urllib.request.getproxies().get("no", "").split(","):
        domain = name.strip()
        if not domain.startswith(".") or "/" in domain:
            continue
        key = f"all://{domain.lstrip('.')}"
        if key in named or key in added:
            continue
        try:
            pattern = URLPattern(key)
        except Exception:  # an entry that cannot be parsed is ignored, as httpx2 ignores it
            continue
        # A domain's own name only: a dot before no name (``.``, ``.:8443``) or a wildcard
        # (``.*``) made a pattern of every host (``all://:8443``), ranked above the proxies'.
        if not pattern.host or "*" in pattern.host:
            continue
        added[key] = None
    return added


def proxy_transport(
    proxy: str, context: ssl.SSLContext | None, **options: Any
) -> httpx2.AsyncHTTPTransport:
    """A transport to ``proxy`` (a URL the environment gave), connections through it checked
    with ``context`` (the shared one; None: each builds its own, as ``httpx2``'s do), and so is
    the proxy's own certificate when it is an ``https://`` proxy: ``httpx2`` checks that with the
    context given to the proxy (``httpx2.Proxy(ssl_context=)``), and without one built a new
    context, the CA store loaded again, for every connection to the proxy."""
    verify: ssl.SSLContext | bool = True if context is None else context
    secure = context is not None and httpx2.URL(proxy).scheme == "https"
    return httpx2.AsyncHTTPTransport(
        verify=verify,
        proxy=httpx2.Proxy(proxy, ssl_context=context if secure else None),
        **options,
    )


def shared_tls_context() -> ssl.SSLContext | None:
    """The process's context for what the CA source is now (see the module docstring), built on
    first use; None where the SDK's context is not a plain ``ssl.SSLContext``. Raises what building
    the SDK's client raises (a missing or unreadable ``SSL_CERT_FILE``), caching nothing."""
    global _cached
    if not _SHARED:
        return None
    key = _source_key()
    cached = _cached
    if cached is not None and cached[0] == key:
        return cached[1]
    with _lock:  # one build when several threads make their first client at once
        cached = _cached
        if cached is not None and cached[0] == key:
            return cached[1]
        _refuse_a_stream(key[0])
        built = httpx2.create_ssl_context()
        context: ssl.SSLContext | None = None
        if type(built) is _PLAIN_CONTEXT:
            built.set_alpn_protocols(list(_ALPN))
            try:
                # Shadows the method for this instance only: see the module docstring.
                built.set_alpn_protocols = _keep_alpn  # type: ignore[method-assign]
            except AttributeError:  # an SSLContext without an instance __dict__ (a later
                pass  # Python's): not shared, each client builds its own as before
            else:
                context = built
        _cached = (key, context)
        return context


_STREAMS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _refuse_a_stream(cafile: object) -> None:
    """Refuses an ``SSL_CERT_FILE`` that names no file but a stream (a FIFO, such as
    ``<(cat bundle.pem)`` makes, a device, a socket): OpenSSL's read of it waits for a writer, for
    ever where none comes, with ``_lock`` held (every model made after it waiting too), and a
    context built from it again would read nothing. A directory is left to the SDK's call, whose
    error (``IsADirectoryError``) is the one its own client raises."""
    if not isinstance(cafile, str):
        return
    try:
        mode = os.stat(cafile).st_mode
    except (OSError, ValueError):  # the SDK's call raises its own error for it
        return
    for is_kind, kind in _STREAMS:
        if is_kind(mode):
            raise OSError(
                f"SSL_CERT_FILE names {cafile!r}, {kind}, not a file of CA certificates: reading "
                "it could wait for ever; name a PEM file"
            )


def _keep_alpn(alpn_protocols: Iterable[str]) -> None:
    """``set_alpn_protocols`` of the shared context: the list it was given stays."""
    protocols = tuple(alpn_protocols)
    if protocols != _ALPN:
        # Every client given the context is an HTTP/1.1 one; another would need a context of its
        # own, not a change to one other threads' handshakes are reading.
        raise RuntimeError(
            f"the TLS context pyadk shares between its OpenAI clients offers ALPN {list(_ALPN)}; "
            f"a client asked it for {list(protocols)}"
        )


def _source_key() -> _Key:
    """What the SDK's context would be built from now: the variables it reads, the class
    ``ssl.SSLContext`` is (``truststore.inject_into_ssl()`` replaces it), and the identity and
    modification time of the file or directory it would read the CAs from."""
    environ = os.environ
    cafile = environ.get("SSL_CERT_FILE") or None
    capath = environ.get("SSL_CERT_DIR") or None
    stamps: tuple[_Stamp | None, ...]
    if cafile is not None:
        stamps = (_stamp(cafile),)
    elif capath is not None:
        stamps = (_stamp(capath),)
    else:
        compiled_file, compiled_dir = _compiled_in_paths()
        stamps = (_stamp(compiled_file), _stamp(compiled_dir))
        if stamps[0] is None or not stat.S_ISREG(stamps[0][4]):
            # No compiled-in file: httpcore2 reads the first of its candidates that exists
            # (``/etc/ssl/certs/ca-certificates.crt``...), which an update replaces as it would
            # the compiled-in one.
            candidates = getattr(_httpcore_ssl, "CA_FILE_CANDIDATES", ())
            stamps += tuple(map(_stamp, candidates))
    return (cafile, capath, environ.get("SSLKEYLOGFILE"), ssl.SSLContext, *stamps)


def _compiled_in_paths() -> tuple[str, str]:
    """OpenSSL's compiled-in CA file and directory (fixed for the process)."""
    global _default_paths
    if _default_paths is None:
        paths = ssl.get_default_verify_paths()
        _default_paths = (paths.openssl_cafile, paths.openssl_capath)
    return _default_paths


def _stamp(path: str) -> _Stamp | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # missing, unreadable, or a NUL in the variable
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode)
