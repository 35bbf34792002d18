"""TLS for the tests' wire servers: a certificate authority made at test time, and HTTP proxies.

``make_ca`` makes a CA and a certificate it signs for 127.0.0.1 (and localhost), with the
``cryptography`` package when it is installed, else with the ``openssl`` command; ``ca.path`` is
the PEM file a client trusts (``SSL_CERT_FILE``), ``ca.server_context()`` the context an HTTPS
``OpenAIServer`` serves with. ``ConnectProxy`` is an HTTP proxy that serves ``CONNECT`` only (what
a client sends for an ``https://`` URL) by piping bytes to the target, recording each target;
``ForwardProxy`` one that forwards plain-HTTP requests (what a client sends for an ``http://`` URL
through a proxy), recording each request. Either, given ``tls=`` (a server context, such as
``ca.server_context()``), is an ``https://`` proxy: the client speaks TLS to the proxy itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import shutil
import ssl
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["CertificateAuthority", "ConnectProxy", "ForwardProxy", "make_ca"]


@dataclass(frozen=True)
class CertificateAuthority:
    path: Path  # the CA's certificate (PEM): what a client trusts
    cert_chain: Path  # the server's certificate (PEM)
    key: Path  # the server's private key (PEM)

    def server_context(self, alpn: tuple[str, ...] = ("http/1.1",)) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_chain, self.key)
        context.set_alpn_protocols(list(alpn))
        return context


def make_ca(directory: Path, name: str = "pyadk test CA") -> CertificateAuthority:
    """A CA named ``name`` and a server certificate it signs, written to ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return _make_ca_openssl(directory, name)
    return _make_ca_cryptography(directory, name)


def _make_ca_cryptography(directory: Path, name: str) -> CertificateAuthority:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    start, end = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=1)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca = CertificateAuthority(directory / "ca.pem", directory / "server.pem", directory / "key.pem")
    ca.path.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    ca.cert_chain.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    ca.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return ca


def _make_ca_openssl(directory: Path, name: str) -> CertificateAuthority:
    openssl = shutil.which("openssl")
    if openssl is None:
        import pytest

        pytest.skip("neither the cryptography package nor the openssl command is installed")
    ca = CertificateAuthority(directory / "ca.pem", directory / "server.pem", directory / "key.pem")
    ca_key, csr, ext = directory / "ca.key", directory / "server.csr", directory / "server.ext"
    ext.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
        "extendedKeyUsage=serverAuth\n"
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ca_args = ["-keyout", str(ca_key), "-out", str(ca.path), "-days", "1", "-subj", f"/CN={name}"]
    ca_extensions = [
        *("-addext", "basicConstraints=critical,CA:TRUE,pathlen:0"),
        *("-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"),
    ]
    signing = ["-CA", str(ca.path), "-CAkey", str(ca_key), "-CAcreateserial", "-days", "1"]
    signed = ["-extfile", str(ext), "-out", str(ca.cert_chain)]
    commands = [
        [openssl, "req", "-x509", *ec, *ca_args, *ca_extensions],
        [openssl, "req", *ec, "-keyout", str(ca.key), "-out", str(csr), "-subj", "/CN=127.0.0.1"],
        [openssl, "x509", "-req", "-in", str(csr), *signing, *signed],
    ]
    for command in commands:
        subprocess.run(command, check=True, capture_output=True)
    return ca


class ConnectProxy:
    """An HTTP proxy on 127.0.0.1 (ephemeral port) serving ``CONNECT host:port`` by piping bytes
    both ways; ``targets`` lists what each tunnel was asked for. ``url`` is what ``HTTPS_PROXY``
    takes (``https://`` given ``tls=``)."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.targets: list[str] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._tls = tls
        self.port = 0

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    async def __aenter__(self) -> ConnectProxy:
        self._server = await asyncio.start_server(
            self._on_connection, "127.0.0.1", 0, ssl=self._tls
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            method, target, _ = (await reader.readline()).decode("latin-1").split(" ", 2)
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            self.targets.append(target)
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                up_writer.close()
        except (ConnectionError, ValueError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()


class ForwardProxy:
    """An HTTP proxy on 127.0.0.1 (ephemeral port) forwarding plain-HTTP requests, as a
    corporate proxy does for ``http://`` URLs: each request (its target an absolute URL) is sent
    to its origin in origin form on a connection of its own (``Connection: close`` both ways, so
    every request comes to the proxy, none on a connection kept open to the origin), and the
    answer piped back as it comes (an event stream too). ``requests`` lists each forwarded
    ``(method, URL)``, ``headers`` each one's headers (names lowercased; hop-by-hop ones left
    out). ``url`` is what ``HTTP_PROXY`` takes."""

    _HOP = (b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization")

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[tuple[str, str]] = []
        self.headers: list[dict[str, str]] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._tls = tls
        self.port = 0

    @property
    def url(self) -> str:
        return f"{'https' if self._tls else 'http'}://127.0.0.1:{self.port}"

    async def __aenter__(self) -> ForwardProxy:
        self._server = await asyncio.start_server(
            self._on_connection, "127.0.0.1", 0, ssl=self._tls
        )
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _on_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            method, target, _ = (await reader.readline()).decode("latin-1").split(" ", 2)
            headers: list[bytes] = []
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                if line.split(b":", 1)[0].strip().lower() not in self._HOP:
                    headers.append(line)
            parts = urlsplit(target)
            if parts.scheme != "http" or not parts.hostname:
                writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                return
            self.requests.append((method, target))
            named = (line.decode("latin-1").split(":", 1) for line in headers)
            self.headers.append({name.strip().lower(): value.strip() for name, value in named})
            try:
                up_reader, up_writer = await asyncio.open_connection(
                    parts.hostname, parts.port or 80
                )
            except OSError:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            path = parts.path or "/"
            if parts.query:
                path += f"?{parts.query}"
            head = f"{method} {path} HTTP/1.1\r\n".encode("latin-1")
            up_writer.write(head + b"".join(headers) + b"Connection: close\r\n\r\n")
            body = asyncio.ensure_future(_pipe(reader, up_writer))  # the request's body, if any
            try:
                await _pipe(up_reader, writer)  # the answer, until the origin closes
            finally:
                body.cancel()
                await asyncio.gather(body, return_exceptions=True)
                up_writer.close()
        except (ConnectionError, ValueError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    with contextlib.suppress(OSError):
        writer.write_eof()
