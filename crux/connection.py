"""Connections to Temporal and PostgreSQL, built one way for the worker, the CLI and the facade.

Temporal is configured as the Temporal CLI and SDKs configure it (`temporalio.envconfig`):
the `TEMPORAL_*` settings are laid over a profile of a TOML configuration file, which gives
the address, namespace, API key and TLS (server authority, server name, client certificate
for mTLS). `temporal_target` resolves them once; `connect_temporal` connects with them and
checks the namespace, so a wrong address, a TLS mismatch, a refused credential or a missing
namespace is one line naming its cause and the variable that fixes it.

PostgreSQL takes its TLS settings from the URL (`sslmode`, `sslrootcert`, `sslcert`,
`sslkey`) or from the standard `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT` and `PGSSLKEY`
variables, which asyncpg reads itself; `database_failure` words what went wrong when
connecting. Messages carry hosts, names and variables, never a password, key or content.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import asyncpg
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfigProfile
from temporalio.runtime import Runtime
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

from crux._telemetry import client_interceptors
from crux.codec import codec_from_settings, with_codec
from vocabulary.errors import ConfigurationError
from vocabulary.settings import DEFAULT_TEMPORAL_ADDRESS, DEFAULT_TEMPORAL_NAMESPACE, Settings

TEMPORAL_CONNECT_TIMEOUT_SECONDS = 10.0
"""How long connecting to Temporal may take before it counts as unreachable."""

DATABASE_CONNECT_TIMEOUT_SECONDS = 10.0
"""How long connecting to PostgreSQL may take before it counts as unreachable."""

START_A_SERVER = "start one with `crux dev` or set TEMPORAL_ADDRESS"


class StartupCheckError(ConfigurationError):
    """A connection or start-up check failed; the message names the cause and the remedy."""


# The Temporal variables each `Settings` field stands for: they are handed to
# `temporalio.envconfig` as its environment, so it lays them over the profile exactly as
# the Temporal CLI does.
_TEMPORAL_VARIABLES = {
    "temporal_address": "TEMPORAL_ADDRESS",
    "temporal_namespace": "TEMPORAL_NAMESPACE",
    "temporal_api_key": "TEMPORAL_API_KEY",
    "temporal_tls": "TEMPORAL_TLS",
    "temporal_tls_server_name": "TEMPORAL_TLS_SERVER_NAME",
    "temporal_tls_server_ca_cert_path": "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
    "temporal_tls_server_ca_cert_data": "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
    "temporal_tls_client_cert_path": "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "temporal_tls_client_cert_data": "TEMPORAL_TLS_CLIENT_CERT_DATA",
    "temporal_tls_client_key_path": "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "temporal_tls_client_key_data": "TEMPORAL_TLS_CLIENT_KEY_DATA",
}


@dataclass(frozen=True)
class TemporalTarget:
    """Where and how to connect to Temporal, resolved from settings and the profile.

    Attributes:
        address: `host:port` of the frontend.
        namespace: The namespace.
        tls: `False` for plain gRPC, else the TLS configuration (certificates read).
        api_key: The API key, sent as `authorization: Bearer <key>`; `None` without one.
        rpc_metadata: gRPC headers the profile adds (`grpc_meta`).
        profile: The profile named by `TEMPORAL_PROFILE`, if any.
    """

    address: str
    namespace: str
    tls: TLSConfig | bool = False
    api_key: str | None = field(default=None, repr=False)
    rpc_metadata: dict[str, str] = field(default_factory=dict[str, str], repr=False)
    profile: str | None = None

    @property
    def uses_tls(self) -> bool:
        """Whether the connection is encrypted."""
        return self.tls is not False

    @property
    def client_certificate(self) -> bool:
        """Whether a client certificate is presented (mutual TLS)."""
        return isinstance(self.tls, TLSConfig) and self.tls.client_cert is not None

    def connect_arguments(self) -> dict[str, Any]:
        """The connection's `Client.connect` keyword arguments (address to metadata)."""
        arguments: dict[str, Any] = {
            "target_host": self.address,
            "namespace": self.namespace,
            "tls": self.tls,
            "api_key": self.api_key,
        }
        if self.rpc_metadata:
            arguments["rpc_metadata"] = dict(self.rpc_metadata)
        return arguments


def temporal_environment(settings: Settings) -> dict[str, str]:
    """The `TEMPORAL_*` variables `settings` sets explicitly, as `temporalio.envconfig` reads them.

    Only fields that were set (from the environment or in code) are passed, so a field left
    unset takes the profile's value rather than Crux's default.
    """
    variables: dict[str, str] = {}
    for name, variable in _TEMPORAL_VARIABLES.items():
        if name not in settings.model_fields_set:
            continue
        value: Any = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, bool):
            variables[variable] = "true" if value else "false"
        elif hasattr(value, "get_secret_value"):
            variables[variable] = value.get_secret_value()
        else:
            variables[variable] = str(value)
    return variables


def temporal_target(settings: Settings) -> TemporalTarget:
    """Resolve the Temporal connection of `settings` (its variables over its profile).

    Raises:
        StartupCheckError: The configuration file or profile cannot be used, or a
            certificate file cannot be read (the message names the variable).
    """
    config_file = settings.temporal_config_file
    if config_file is not None and not Path(config_file).is_file():
        raise StartupCheckError(
            f"TEMPORAL_CONFIG_FILE names no file ({config_file}); fix or unset it"
        )
    try:
        profile = ClientConfigProfile.load(
            settings.temporal_profile,
            config_source=Path(config_file) if config_file is not None else None,
            override_env_vars=temporal_environment(settings),
        )
    except Exception as error:  # the bridge raises its own ConfigError; its text may quote the file
        raise StartupCheckError(_profile_failure(settings, error)) from None
    try:
        # Reads the certificate files the settings or the profile name.
        connect = profile.to_client_connect_config()
    except OSError as error:
        raise StartupCheckError(_unreadable_certificate(error)) from None
    return TemporalTarget(
        address=connect.get("target_host") or DEFAULT_TEMPORAL_ADDRESS,
        namespace=connect.get("namespace") or DEFAULT_TEMPORAL_NAMESPACE,
        tls=connect.get("tls", False),
        api_key=connect.get("api_key"),
        rpc_metadata=dict(connect.get("rpc_metadata") or {}),
        profile=settings.temporal_profile,
    )


def _profile_failure(settings: Settings, error: Exception) -> str:
    where = settings.temporal_config_file or "the default Temporal configuration file"
    if "not found" in str(error).lower() and "profile" in str(error).lower():
        return (
            f"Temporal profile {_q(settings.temporal_profile or 'default')} is not in {where}; "
            "fix TEMPORAL_PROFILE or TEMPORAL_CONFIG_FILE"
        )
    return (
        f"cannot read the Temporal configuration in {where} (not valid TOML, or an unknown "
        "key); fix the file or TEMPORAL_CONFIG_FILE"
    )


def _unreadable_certificate(error: OSError) -> str:
    path = error.filename if isinstance(error.filename, str) else "a certificate file"
    return (
        f"cannot read {path} for the Temporal TLS connection; fix the TEMPORAL_TLS_*_PATH "
        "variable (or the profile's tls section) that names it"
    )


async def connect_temporal(settings: Settings, *, runtime: Runtime | None = None) -> Client:
    """Connect to Temporal as `settings` and its profile say, and check the namespace.

    The client uses the pydantic data converter, with the encryption payload codec when
    the settings configure keys (`CRUX_CODEC_KEYS`, `crux.codec`), and Crux's tracing
    interceptors (when telemetry is on). Connecting fails within
    `TEMPORAL_CONNECT_TIMEOUT_SECONDS` when the server does not answer.

    Args:
        settings: Address, namespace, credentials and TLS (with the profile's).
        runtime: The Temporal runtime (a worker's serves Prometheus); the default otherwise.

    Raises:
        StartupCheckError: Temporal cannot be reached or refuses the connection, or the
            namespace does not exist (one line: the cause and the variable to fix).
        ConfigurationError: The codec keys are invalid (naming the variable).
    """
    converter = with_codec(pydantic_data_converter, codec_from_settings(settings))
    target = await asyncio.to_thread(temporal_target, settings)
    try:
        client = await asyncio.wait_for(
            Client.connect(
                **target.connect_arguments(),
                data_converter=converter,
                connect_timeout=timedelta(seconds=TEMPORAL_CONNECT_TIMEOUT_SECONDS),
                # Tracing starts at the client when telemetry is on.
                interceptors=client_interceptors(),
                runtime=runtime,
            ),
            timeout=TEMPORAL_CONNECT_TIMEOUT_SECONDS,
        )
    except (RuntimeError, OSError, TimeoutError, RPCError) as error:
        raise StartupCheckError(temporal_failure(target, error)) from None
    await check_namespace(client, target)
    return client


async def check_namespace(client: Client, target: TemporalTarget) -> None:
    """Check that the namespace exists and the credentials may use it.

    Raises:
        StartupCheckError: The namespace is missing, or the credentials are refused.
    """
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=target.namespace),
            timeout=timedelta(seconds=TEMPORAL_CONNECT_TIMEOUT_SECONDS),
        )
    except RPCError as error:
        raise StartupCheckError(temporal_failure(target, error)) from None


def temporal_failure(target: TemporalTarget, error: BaseException) -> str:
    """One line saying why connecting to `target` failed and what fixes it.

    The SDK reports transport failures as text from its core; the cause is recognised in
    it, and the text itself is never shown (it can quote server metadata).
    """
    at = f"Temporal at {target.address}"
    if isinstance(error, RPCError):
        status = error.status
        if status == RPCStatusCode.NOT_FOUND:
            return (
                f"namespace {_q(target.namespace)} does not exist on {at}; create it (temporal "
                f"operator namespace create --namespace {target.namespace}) or set "
                "TEMPORAL_NAMESPACE"
            )
        if status == RPCStatusCode.UNAUTHENTICATED:
            return _refused_credentials(target)
        if status == RPCStatusCode.PERMISSION_DENIED:
            return (
                f"{at} does not let these credentials use namespace {_q(target.namespace)} "
                "(permission denied); check the API key's or certificate's access, or "
                "TEMPORAL_NAMESPACE"
            )
        if status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED):
            return f"cannot reach {at} (it stopped answering); check TEMPORAL_ADDRESS"
    if isinstance(error, TimeoutError):
        return (
            f"cannot reach {at} (no answer within {TEMPORAL_CONNECT_TIMEOUT_SECONDS:g} s); "
            "check TEMPORAL_ADDRESS and that the server is up"
        )
    text = str(error)
    lowered = text.lower()
    if "connection refused" in lowered:
        return f"cannot reach {at} (connection refused); {START_A_SERVER}"
    if "dns error" in lowered or "name or service not known" in lowered:
        return f"cannot reach {at} (its host name does not resolve); check TEMPORAL_ADDRESS"
    if "unauthenticated" in lowered:
        return _refused_credentials(target)
    if "permissiondenied" in lowered.replace(" ", "") or "permission denied" in lowered:
        return (
            f"{at} refused these credentials (permission denied); check TEMPORAL_API_KEY or "
            "the client certificate's access"
        )
    certificate = _certificate_problem(target, text)
    if certificate is not None:
        return certificate
    if "invalidcontenttype" in lowered or "wrong version number" in lowered:
        return (
            f"{at} does not speak TLS, but the connection uses it (TEMPORAL_TLS, "
            "TEMPORAL_API_KEY or the profile's tls section); set TEMPORAL_TLS=false or use "
            "the server's TLS address"
        )
    if "unimplemented" in lowered or "404" in text:
        return (
            f"{target.address} answers, but not as a Temporal frontend; check "
            "TEMPORAL_ADDRESS (the gRPC port, 7233 by default, not the Web UI's)"
        )
    # A server that hangs up on the handshake surfaces in several ways, depending on who
    # notices first: a transport error (an EOF or a reset), a broken pipe, or a request the
    # client cancels because the connection closed under it.
    if any(sign in lowered for sign in _HUNG_UP):
        return _closed(target)
    if "timed out" in lowered or "deadline" in lowered:
        return f"cannot reach {at} (no answer in time); check TEMPORAL_ADDRESS"
    return f"cannot connect to {at} (the connection failed); check TEMPORAL_ADDRESS"


_HUNG_UP = ("transport error", "broken pipe", "eof", "connection closed", "connection reset")


def _refused_credentials(target: TemporalTarget) -> str:
    what = "TEMPORAL_API_KEY" if target.api_key else "the client certificate or TEMPORAL_API_KEY"
    return f"Temporal at {target.address} refused the credentials (unauthenticated); check {what}"


def _certificate_problem(target: TemporalTarget, text: str) -> str | None:
    """The wording of a server certificate the client would not accept, if that is it."""
    at = f"Temporal at {target.address}"
    if any(sign in text for sign in ("UnknownIssuer", "BadSignature", "verify failed")):
        return (
            f"the certificate of {at} is not signed by an authority this client trusts; set "
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH to the authority's certificate"
        )
    if "NotValidForName" in text or "CertNotValidForName" in text:
        return (
            f"the certificate of {at} is not issued for the name this client checks; set "
            "TEMPORAL_TLS_SERVER_NAME to a name it is issued for"
        )
    if "Expired" in text or "NotValidYet" in text:
        return f"the certificate of {at} has expired or is not valid yet; renew it"
    if "InvalidCertificate" in text or "BadEncoding" in text:
        return (
            f"the certificate of {at} was refused; check TEMPORAL_TLS_SERVER_CA_CERT_PATH and "
            "TEMPORAL_TLS_SERVER_NAME"
        )
    if "no private key" in text.lower() or "private key" in text.lower():
        return (
            "the Temporal client certificate or key cannot be used; check "
            "TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"
        )
    return None


def _closed(target: TemporalTarget) -> str:
    """A server that hung up on the first call: what it most likely wants."""
    at = f"Temporal at {target.address}"
    if not target.uses_tls:
        return (
            f"{at} closed the connection: it probably requires TLS; set TEMPORAL_TLS=true "
            "(and TEMPORAL_TLS_SERVER_CA_CERT_PATH for a private authority)"
        )
    if not target.client_certificate:
        return (
            f"{at} closed the TLS connection: it probably requires a client certificate "
            "(mTLS); set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"
        )
    return (
        f"{at} closed the TLS connection: it refused the client certificate; check that "
        "TEMPORAL_TLS_CLIENT_CERT_PATH is signed by an authority the server trusts"
    )


# PostgreSQL ---------------------------------------------------------------------------

DATABASE_VARIABLE = "CRUX_DATABASE_URL"


@dataclass(frozen=True)
class DatabaseTarget:
    """What a PostgreSQL URL names, without its password.

    Attributes:
        where: `host:port` or `<socket directory> (socket)`.
        database: The database name.
        user: The user name (`postgres` when the URL names none).
        socket: Whether the server is reached through a Unix socket.
    """

    where: str
    database: str
    user: str
    socket: bool = False

    def describe(self) -> str:
        """`host:port/database` (no user, no password)."""
        return f"{self.where}/{self.database}"


def database_target(url: str) -> DatabaseTarget:
    """Read the server, database and user of a PostgreSQL URL (never its password).

    Raises:
        StartupCheckError: The text is not a PostgreSQL URL.
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise StartupCheckError(_not_a_url()) from None
    if parts.scheme not in ("postgres", "postgresql"):
        raise StartupCheckError(_not_a_url())
    query = parse_qs(parts.query)
    socket_dir = query.get("host")
    through_socket = not parts.hostname and bool(socket_dir)
    if through_socket and socket_dir:
        # A Unix socket (the embedded stack's): its directory says where the server is.
        where = f"{socket_dir[0]} (socket)"
    else:
        where = f"{parts.hostname or 'localhost'}:{port or 5432}"
    database = unquote(parts.path.lstrip("/")) or (query.get("dbname") or [""])[0]
    user = unquote(parts.username or "") or (query.get("user") or ["postgres"])[0]
    return DatabaseTarget(where=where, database=database or user, user=user, socket=through_socket)


def describe_database(url: str) -> str:
    """`host:port/database` of a PostgreSQL URL (no user, no password)."""
    try:
        return database_target(url).describe()
    except StartupCheckError:
        return "(not a PostgreSQL URL)"


def _not_a_url() -> str:
    return (
        f"{DATABASE_VARIABLE} is not a PostgreSQL URL; write it as "
        "postgresql://user:password@host:5432/database"
    )


DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    ValueError,
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.ClientConfigurationError,
)
"""What connecting to PostgreSQL raises when it fails (`database_failure` words each)."""


def database_failure(url: str, error: BaseException) -> StartupCheckError:
    """The one-line error for a failed PostgreSQL connection: the cause and the remedy."""
    try:
        target = database_target(url)
    except StartupCheckError as refused:
        return refused
    return StartupCheckError(_database_wording(target, error))


def _database_wording(target: DatabaseTarget, error: BaseException) -> str:
    at = f"PostgreSQL at {target.where}"
    fix = f"fix {DATABASE_VARIABLE}"
    if isinstance(error, asyncpg.InvalidCatalogNameError):
        return (
            f"database {_q(target.database)} does not exist on {target.where}; create it "
            f"(createdb {target.database}) or {fix}"
        )
    if isinstance(error, asyncpg.InvalidPasswordError):
        return (
            f"{at} refused the password of user {_q(target.user)}; fix the password in "
            f"{DATABASE_VARIABLE} (or PGPASSWORD)"
        )
    if isinstance(error, asyncpg.InvalidAuthorizationSpecificationError):
        text = str(error)
        if "pg_hba.conf" in text and ("no encryption" in text or "SSL off" in text):
            return (
                f"{at} accepts only TLS connections from this host; add sslmode=require "
                f"(or verify-full with sslrootcert) to {DATABASE_VARIABLE}, or set "
                "PGSSLMODE=require"
            )
        if "pg_hba.conf" in text:
            return (
                f"{at} does not accept user {_q(target.user)} for database "
                f"{_q(target.database)} from this host (pg_hba.conf); ask its administrator "
                f"or {fix}"
            )
        if "certificate" in text:
            return (
                f"{at} refused the client certificate for user {_q(target.user)}; check "
                "sslcert/sslkey (or PGSSLCERT/PGSSLKEY) and the certificate's common name"
            )
        return f"role {_q(target.user)} does not exist on {target.where}; create it or {fix}"
    if isinstance(error, asyncpg.TooManyConnectionsError):
        return (
            f"{at} has no free connection slots (too many connections); close idle clients "
            "or raise its max_connections"
        )
    if isinstance(error, asyncpg.CannotConnectNowError):
        return f"{at} is starting up or shutting down; try again in a moment"
    if isinstance(error, ssl.SSLCertVerificationError):
        if "hostname" in str(error).lower() or "ip address mismatch" in str(error).lower():
            return (
                f"the certificate of {at} is not issued for that host name; use the name it "
                f"is issued for in {DATABASE_VARIABLE}, or sslmode=verify-ca"
            )
        return (
            f"the certificate of {at} is not signed by an authority this client trusts; set "
            f"sslrootcert=<file> in {DATABASE_VARIABLE} (or PGSSLROOTCERT) to its "
            "authority's certificate"
        )
    if isinstance(error, ssl.SSLError):
        return (
            f"the TLS handshake with {at} failed; check sslmode, sslrootcert, sslcert and "
            f"sslkey in {DATABASE_VARIABLE} (or the PGSSL* variables)"
        )
    if isinstance(error, asyncpg.ClientConfigurationError):
        return (
            "the PostgreSQL TLS settings cannot be used: "
            f"{_first_line(str(error))}; fix sslmode/sslrootcert in {DATABASE_VARIABLE} "
            "(or PGSSLMODE/PGSSLROOTCERT)"
        )
    if isinstance(error, ConnectionRefusedError):
        return f"cannot connect to {at} (connection refused); start it (crux dev runs one) or {fix}"
    if isinstance(error, socket.gaierror):
        return f"cannot connect to {at} (its host name does not resolve); {fix}"
    if isinstance(error, FileNotFoundError):
        if target.socket:
            return f"no PostgreSQL server listens at {target.where}; start it or {fix}"
        # Over TCP, only the TLS files are opened: a root, client certificate or key.
        return (
            "a TLS file named by sslrootcert, sslcert or sslkey in "
            f"{DATABASE_VARIABLE} (or PGSSLROOTCERT, PGSSLCERT, PGSSLKEY) does not exist"
        )
    if isinstance(error, asyncpg.ConnectionDoesNotExistError):
        return (
            f"{at} closed the connection while it was being opened (a client certificate it "
            "refused, or a server going down); check sslcert/sslkey in "
            f"{DATABASE_VARIABLE} (or PGSSLCERT/PGSSLKEY) and the server's log"
        )
    if isinstance(error, TimeoutError):
        return (
            f"cannot connect to {at} (no answer within {DATABASE_CONNECT_TIMEOUT_SECONDS:g} s); "
            f"check that it is up, or {fix}"
        )
    if isinstance(error, ConnectionError) and "rejected SSL upgrade" in str(error):
        return (
            f"{at} does not support TLS, but sslmode asks for it; set sslmode=disable or "
            f"prefer in {DATABASE_VARIABLE} (or PGSSLMODE), or turn TLS on at the server"
        )
    if isinstance(error, OSError):
        reason = error.strerror.lower() if error.strerror else "the connection failed"
        return f"cannot connect to {at} ({reason}); {fix}"
    if isinstance(error, ValueError):
        return _not_a_url()
    return f"cannot connect to {at} (the server refused the connection); {fix}"


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].rstrip(".") if text.strip() else "invalid"


async def connect_database(url: str) -> asyncpg.Connection:
    """Open one PostgreSQL connection, failing with a worded `StartupCheckError`.

    Raises:
        StartupCheckError: The connection failed (the message says why).
    """
    database_target(url)  # a URL that is not one is refused before any I/O
    try:
        connection: asyncpg.Connection = await asyncpg.connect(
            url, timeout=DATABASE_CONNECT_TIMEOUT_SECONDS
        )
    except DATABASE_ERRORS as error:
        raise database_failure(url, error) from None
    return connection


__all__ = [
    "DATABASE_CONNECT_TIMEOUT_SECONDS",
    "DATABASE_ERRORS",
    "TEMPORAL_CONNECT_TIMEOUT_SECONDS",
    "DatabaseTarget",
    "StartupCheckError",
    "TemporalTarget",
    "check_namespace",
    "connect_database",
    "connect_temporal",
    "database_failure",
    "database_target",
    "describe_database",
    "temporal_environment",
    "temporal_failure",
    "temporal_target",
]


def _q(name: str) -> str:
    """A name as the messages quote it (as PostgreSQL and Temporal do): in double quotes."""
    return f'"{name}"'
