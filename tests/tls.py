"""TLS for the connection tests: certificates made per test, a TLS-terminating proxy in
front of Temporal, and a PostgreSQL that accepts TLS connections only.

`temporal server start-dev` serves plain gRPC only, so the TLS and mTLS tests put a small
TLS-terminating proxy on loopback in front of the session's dev server: the client speaks
TLS (and shows its certificate, when the proxy requires one) to the proxy, which forwards
the decrypted bytes to the dev server and keeps a copy of what it received, so a test can
check what the client sent (its `authorization` header, say).

`TlsPostgres` runs a PostgreSQL on a loopback TCP port with `ssl=on` and a `pg_hba.conf`
of `hostssl` lines only, its certificates in its data directory. The embedded PostgreSQL
is built without TLS support, so it is the machine's (Debian's `postgresql` package).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import os
import pwd
import shutil
import socket
import ssl
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Certificates:
    """PEM files of a private certificate authority, a server and a client it signed.

    Attributes:
        ca: The authority's certificate (what clients and servers trust).
        server_cert: The server's certificate, for `localhost` and `127.0.0.1`.
        server_key: The server's private key (unencrypted PEM).
        client_cert: A client certificate (mTLS), common name `crux-client`.
        client_key: The client's private key.
        other_ca: An authority that signed none of them (a wrong trust root).
    """

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _authority(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return certificate, key


def _leaf(
    common_name: str,
    authority: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    *,
    server: bool,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = authority
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
    return builder.sign(ca_key, hashes.SHA256()), key


def _write(directory: Path, name: str, certificate: x509.Certificate) -> Path:
    path = directory / f"{name}.crt"
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


def _write_key(directory: Path, name: str, key: ec.EllipticCurvePrivateKey) -> Path:
    path = directory / f"{name}.key"
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    # PostgreSQL refuses a key file that others may read.
    path.chmod(0o600)
    return path


def make_certificates(directory: Path, *, client_name: str = "crux-client") -> Certificates:
    """Generate a CA, a server certificate and a client certificate into `directory`.

    Args:
        directory: Where the PEM files are written (created when missing).
        client_name: The client certificate's common name (PostgreSQL's `cert`
            authentication takes it as the user name).
    """
    directory.mkdir(parents=True, exist_ok=True)
    authority = _authority("crux test authority")
    other, _ = _authority("crux unrelated authority")
    server_cert, server_key = _leaf("localhost", authority, server=True)
    client_cert, client_key = _leaf(client_name, authority, server=False)
    return Certificates(
        ca=_write(directory, "ca", authority[0]),
        server_cert=_write(directory, "server", server_cert),
        server_key=_write_key(directory, "server", server_key),
        client_cert=_write(directory, "client", client_cert),
        client_key=_write_key(directory, "client", client_key),
        other_ca=_write(directory, "other-ca", other),
    )


class TlsProxy:
    """A TLS-terminating TCP proxy on loopback in front of a plain gRPC server.

    Args:
        target: `host:port` of the plain server.
        certificates: The server certificate it presents and the authority it trusts.
        require_client_certificate: Refuse clients without a certificate of the
            authority (mutual TLS).

    Attributes:
        address: `127.0.0.1:port` the proxy listens on (after `start`).
        received: Every decrypted byte clients sent, in arrival order.
    """

    def __init__(
        self, target: str, certificates: Certificates, *, require_client_certificate: bool
    ) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host, int(port))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificates.server_cert, certificates.server_key)
        # gRPC runs over HTTP/2, which TLS clients negotiate with ALPN.
        context.set_alpn_protocols(["h2"])
        if require_client_certificate:
            context.load_verify_locations(cafile=certificates.ca)
            context.verify_mode = ssl.CERT_REQUIRED
        self._context = context
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._done: set[asyncio.Future[None]] = set()
        self.address = ""
        self.received = bytearray()

    async def start(self) -> Self:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(
            self._accept, "127.0.0.1", 0, ssl=self._context, ssl_handshake_timeout=10
        )
        port = self._server.sockets[0].getsockname()[1]
        self.address = f"127.0.0.1:{port}"
        return self

    async def stop(self) -> None:
        """Stop listening and cut every open connection."""
        if self._server is not None:
            self._server.close()
        # Closing the streams ends the pipes; cancelling their tasks instead would make
        # asyncio report each cancelled connection callback as an error.
        for writer in list(self._writers):
            writer.transport.abort()
        if self._done:
            await asyncio.wait(self._done, timeout=5)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        done = asyncio.get_running_loop().create_future()
        self._done.add(done)
        self._writers.add(writer)
        try:
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
            except OSError:
                writer.transport.abort()
                return
            self._writers.add(upstream_writer)
            await asyncio.gather(
                self._pipe(reader, upstream_writer, record=True),
                self._pipe(upstream_reader, writer, record=False),
            )
            for stream in (writer, upstream_writer):
                stream.transport.abort()
                self._writers.discard(stream)
        finally:
            self._writers.discard(writer)
            done.set_result(None)

    async def _pipe(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, record: bool
    ) -> None:
        with contextlib.suppress(OSError, ssl.SSLError, asyncio.IncompleteReadError):
            while chunk := await reader.read(65536):
                if record:
                    self.received.extend(chunk)
                writer.write(chunk)
                await writer.drain()
        with contextlib.suppress(OSError, RuntimeError):
            if writer.can_write_eof():
                writer.write_eof()


# HPACK's Huffman codes (RFC 7541, appendix B) of the characters `bearer_header_value`
# uses: the 5-bit codes of `0`, `1`, `2`, `a`, `c`, `e`, `i`, `o`, `s`, `t`, and those of
# `B`, `r` and the space that `Bearer ` needs.
_HUFFMAN = {
    "0": (0x0, 5),
    "1": (0x1, 5),
    "2": (0x2, 5),
    "a": (0x3, 5),
    "c": (0x4, 5),
    "e": (0x5, 5),
    "i": (0x6, 5),
    "o": (0x7, 5),
    "s": (0x8, 5),
    "t": (0x9, 5),
    " ": (0x14, 6),
    "r": (0x2C, 6),
    "B": (0x5D, 7),
}

API_KEY = "iotas2cacti01eases"
"""A test API key spelt with characters of `_HUFFMAN` only."""


def huffman(text: str) -> bytes:
    """`text` as HPACK sends a Huffman-coded header value (padded with ones)."""
    bits = 0
    length = 0
    for character in text:
        code, size = _HUFFMAN[character]
        bits = (bits << size) | code
        length += size
    padding = -length % 8
    bits = (bits << padding) | ((1 << padding) - 1)
    return bits.to_bytes((length + padding) // 8, "big")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


CERT_USER = "crux_cert"
"""The role that authenticates with its client certificate (`cert` in pg_hba.conf)."""
PASSWORD_USER = "crux_password"
"""The role that authenticates with a password (`scram-sha-256`)."""
PASSWORD = "correct-horse"


HBA = f"""# TLS only: no `host` line, so a connection without TLS matches nothing.
hostssl all {CERT_USER} 127.0.0.1/32 cert
hostssl all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256
hostssl all all 127.0.0.1/32 trust
"""


def postgres_with_tls() -> Path | None:
    """The `bin` directory of a PostgreSQL built with TLS support, `None` when there is none.

    The embedded PostgreSQL the other tests use is built without OpenSSL ("SSL is not
    supported by this build"), so the TLS tests run the machine's PostgreSQL (Debian's
    `postgresql` package), found under `/usr/lib/postgresql` or on the `PATH`.
    """
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
        reverse=True,
    )
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent)
    for bindir in candidates:
        if not all((bindir / name).exists() for name in ("initdb", "pg_ctl", "postgres")):
            continue
        pg_config = bindir / "pg_config"
        if pg_config.exists():
            configured = subprocess.run(
                [str(pg_config), "--configure"], capture_output=True, text=True, check=False
            ).stdout
            if "--with-openssl" not in configured and "--with-ssl=openssl" not in configured:
                continue
        return bindir
    return None


class TlsPostgres:
    """A PostgreSQL on a loopback TCP port that accepts TLS connections only.

    The server runs with `ssl=on`, no Unix socket, and a `pg_hba.conf` of `hostssl` lines
    only: trust for everyone, a client certificate for `CERT_USER` (`cert`), a password
    for `PASSWORD_USER` (`scram-sha-256`). Its certificates are in its data directory.

    Args:
        bindir: The PostgreSQL programs (`postgres_with_tls()`).
        certificates: The server certificate and the authority clients' certificates
            must be signed by.

    Attributes:
        port: The TCP port.
    """

    def __init__(self, bindir: Path, certificates: Certificates) -> None:
        self._bindir = bindir
        self._certificates = certificates
        self._root = Path(tempfile.mkdtemp(prefix="crux-tls-pg-"))
        self._data = self._root / "pgdata"
        self._user: tuple[int, int] | None = None
        self.port = 0

    def url(self, database: str = "postgres", *, user: str = "postgres", query: str = "") -> str:
        """The URL of `database` (with `query`, such as `sslmode=verify-full&...`)."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}" + (
            f"?{query}" if query else ""
        )

    def start(self) -> TlsPostgres:
        """Initialise a data directory and start the server with TLS required."""
        if os.geteuid() == 0:
            # PostgreSQL refuses to run as root: as Debian's `postgres` user.
            account = pwd.getpwnam("postgres")
            self._user = (account.pw_uid, account.pw_gid)
            os.chown(self._root, *self._user)
        self._run("initdb", "-D", str(self._data), "-U", "postgres", "--auth=trust",
                  "--encoding=UTF8", "--no-sync")  # fmt: skip
        files = {
            "server.crt": self._certificates.server_cert,
            "server.key": self._certificates.server_key,
            "root.crt": self._certificates.ca,
            "pg_hba.conf": None,
        }
        for name, source in files.items():
            target = self._data / name
            if source is None:
                target.write_text(HBA, encoding="utf-8")
            else:
                shutil.copyfile(source, target)
            if self._user is not None:
                os.chown(target, *self._user)
            target.chmod(0o600)
        self.port = free_port()
        options = " ".join(
            [
                "-h 127.0.0.1",
                f"-p {self.port}",
                "-c unix_socket_directories=''",
                "-c ssl=on",
                "-c ssl_cert_file=server.crt",
                "-c ssl_key_file=server.key",
                "-c ssl_ca_file=root.crt",
                "-c fsync=off",
            ]
        )
        log = str(self._root / "postgres.log")
        self._run("pg_ctl", "-D", str(self._data), "-w", "-o", options, "-l", log, "start")
        return self

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory."""
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self._data), "-w", "-m", "fast", "stop")
        shutil.rmtree(self._root, ignore_errors=True)

    def _run(self, program: str, *arguments: str) -> None:
        subprocess.run(
            [str(self._bindir / program), *arguments],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
            user=self._user[0] if self._user else None,
            group=self._user[1] if self._user else None,
            cwd=self._root,
        )
