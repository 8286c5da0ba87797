"""Connection settings without servers: the Temporal profile, the connect arguments, and the
one-line wording of every connection failure (the servers' own tests are in
tests/e2e/test_tls_connections.py)."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import asyncpg
import pytest
from pydantic import SecretStr
from temporalio.service import RPCError, RPCStatusCode, TLSConfig

from crux.config import Settings
from crux.connection import (
    StartupCheckError,
    TemporalTarget,
    database_failure,
    database_target,
    describe_database,
    temporal_environment,
    temporal_failure,
    temporal_target,
)

PROFILES = """
[profile.default]
address = "profile-host:7233"
namespace = "from-profile"

[profile.cloud]
address = "crux.a1b2c.tmprl.cloud:7233"
namespace = "crux.a1b2c"
api_key = "profile-key"

[profile.mtls]
address = "temporal.internal:7233"
namespace = "crux"
[profile.mtls.tls]
server_name = "temporal.internal"
server_ca_cert_data = "CA PEM"
client_cert_data = "CLIENT PEM"
client_key_data = "KEY PEM"
"""

CLASS_NAME = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]+)*(Error|Exception)\b")


def _one_clear_line(message: str) -> str:
    """A message as the rules want it: one line, no exception class name, no traceback."""
    assert "\n" not in message
    assert not CLASS_NAME.search(message), message
    assert "Traceback" not in message
    return message


@pytest.fixture(autouse=True)
def no_user_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The platform's default configuration directory, empty (not the developer's own)."""
    config_home = tmp_path / "config-home"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    return config_home


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    path = tmp_path / "temporal.toml"
    path.write_text(PROFILES, encoding="utf-8")
    return path


def test_only_explicit_settings_reach_the_profile_loader() -> None:
    assert temporal_environment(Settings()) == {}
    settings = Settings.from_env(
        {
            "TEMPORAL_ADDRESS": "h:1",
            "TEMPORAL_API_KEY": "secret-key",
            "TEMPORAL_TLS": "false",
            "TEMPORAL_TLS_CLIENT_KEY_DATA": "KEY",
        }
    )
    assert temporal_environment(settings) == {
        "TEMPORAL_ADDRESS": "h:1",
        "TEMPORAL_API_KEY": "secret-key",
        "TEMPORAL_TLS": "false",
        "TEMPORAL_TLS_CLIENT_KEY_DATA": "KEY",
    }
    # Secrets stay out of the settings' representation.
    assert "secret-key" not in repr(settings)


def test_without_a_profile_the_defaults_apply() -> None:
    target = temporal_target(Settings(temporal_config_file=None))
    assert target.namespace == "default"
    assert target.tls is False and target.api_key is None


def test_the_default_configuration_file_is_read_when_present(
    no_user_configuration: Path,
) -> None:
    default = no_user_configuration / "temporalio" / "temporal.toml"
    default.parent.mkdir(parents=True)
    default.write_text(PROFILES, encoding="utf-8")
    target = temporal_target(Settings.from_env({}))
    assert (target.address, target.namespace) == ("profile-host:7233", "from-profile")
    cloud = temporal_target(Settings.from_env({"TEMPORAL_PROFILE": "cloud"}))
    assert cloud.api_key == "profile-key"


def test_a_profile_supplies_what_the_settings_leave_unset(profiles: Path) -> None:
    target = temporal_target(Settings(temporal_config_file=str(profiles)))
    assert (target.address, target.namespace) == ("profile-host:7233", "from-profile")
    # An explicit value wins over the profile's, as with the Temporal CLI.
    explicit = Settings(temporal_config_file=str(profiles), temporal_namespace="mine")
    assert temporal_target(explicit).namespace == "mine"
    assert temporal_target(explicit).address == "profile-host:7233"


def test_an_api_key_turns_tls_on_and_is_sent_as_the_connect_argument(profiles: Path) -> None:
    target = temporal_target(
        Settings.from_env({"TEMPORAL_CONFIG_FILE": str(profiles), "TEMPORAL_PROFILE": "cloud"})
    )
    arguments = target.connect_arguments()
    assert arguments == {
        "target_host": "crux.a1b2c.tmprl.cloud:7233",
        "namespace": "crux.a1b2c",
        "tls": True,
        "api_key": "profile-key",
    }
    assert "profile-key" not in repr(target)
    # TEMPORAL_TLS=false keeps a plain connection even with a key (a local server).
    plain = temporal_target(Settings(temporal_api_key=SecretStr("k"), temporal_tls=False))
    assert plain.connect_arguments()["tls"] is False
    assert plain.connect_arguments()["api_key"] == "k"


def test_tls_settings_from_variables_paths_and_inline_data(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("CA FROM FILE", encoding="utf-8")
    target = temporal_target(
        Settings.from_env(
            {
                "TEMPORAL_ADDRESS": "temporal.example:7233",
                "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(ca),
                "TEMPORAL_TLS_SERVER_NAME": "temporal.internal",
                "TEMPORAL_TLS_CLIENT_CERT_DATA": "CLIENT PEM",
                "TEMPORAL_TLS_CLIENT_KEY_DATA": "KEY PEM",
            }
        )
    )
    assert isinstance(target.tls, TLSConfig)
    assert target.tls.server_root_ca_cert == b"CA FROM FILE"
    assert target.tls.domain == "temporal.internal"
    assert target.tls.client_cert == b"CLIENT PEM"
    assert target.tls.client_private_key == b"KEY PEM"
    assert target.client_certificate


def test_a_profile_carries_mtls(profiles: Path) -> None:
    target = temporal_target(Settings(temporal_config_file=str(profiles), temporal_profile="mtls"))
    assert isinstance(target.tls, TLSConfig)
    assert target.tls.client_cert == b"CLIENT PEM"
    assert target.tls.domain == "temporal.internal"


def test_unusable_temporal_configuration_is_named(profiles: Path, tmp_path: Path) -> None:
    with pytest.raises(StartupCheckError) as missing_file:
        temporal_target(Settings(temporal_config_file=str(tmp_path / "absent.toml")))
    assert str(missing_file.value) == (
        f"TEMPORAL_CONFIG_FILE names no file ({tmp_path / 'absent.toml'}); fix or unset it"
    )
    with pytest.raises(StartupCheckError) as missing_profile:
        temporal_target(Settings(temporal_config_file=str(profiles), temporal_profile="prod"))
    assert str(missing_profile.value) == (
        f'Temporal profile "prod" is not in {profiles}; fix TEMPORAL_PROFILE or '
        "TEMPORAL_CONFIG_FILE"
    )
    broken = tmp_path / "broken.toml"
    broken.write_text('[profile.default\napi_key = "do-not-echo"\n', encoding="utf-8")
    with pytest.raises(StartupCheckError) as invalid:
        temporal_target(Settings(temporal_config_file=str(broken)))
    message = _one_clear_line(str(invalid.value))
    assert message == (
        f"cannot read the Temporal configuration in {broken} (not valid TOML, or an unknown "
        "key); fix the file or TEMPORAL_CONFIG_FILE"
    )
    with pytest.raises(StartupCheckError) as unreadable:
        temporal_target(Settings(temporal_tls_client_cert_path=str(tmp_path / "nope.pem")))
    assert str(unreadable.value) == (
        f"cannot read {tmp_path / 'nope.pem'} for the Temporal TLS connection; fix the "
        "TEMPORAL_TLS_*_PATH variable (or the profile's tls section) that names it"
    )


PLAIN = TemporalTarget(address="127.0.0.1:7233", namespace="crux")
WITH_TLS = TemporalTarget(address="temporal.example:7233", namespace="crux", tls=True)
WITH_CERT = TemporalTarget(
    address="temporal.example:7233",
    namespace="crux",
    tls=TLSConfig(client_cert=b"C", client_private_key=b"K"),
)
CORE = "Failed client connect: "


@pytest.mark.parametrize(
    ("target", "error", "expected"),
    [
        (
            PLAIN,
            RuntimeError(
                CORE + "Server connection error: tonic::transport::Error(Transport, "
                'ConnectError(ConnectError("tcp connect error", 127.0.0.1:7233, Os { code: '
                '111, kind: ConnectionRefused, message: "Connection refused" })))'
            ),
            "cannot reach Temporal at 127.0.0.1:7233 (connection refused); start one with "
            "`crux dev` or set TEMPORAL_ADDRESS",
        ),
        (
            PLAIN,
            RuntimeError(
                CORE + "Server connection error: tonic::transport::Error(Transport, "
                'ConnectError(ConnectError("dns error", Custom { kind: Uncategorized, error: '
                '"failed to lookup address information: Name or service not known" })))'
            ),
            "cannot reach Temporal at 127.0.0.1:7233 (its host name does not resolve); check "
            "TEMPORAL_ADDRESS",
        ),
        (
            PLAIN,
            TimeoutError(),
            "cannot reach Temporal at 127.0.0.1:7233 (no answer within 10 s); check "
            "TEMPORAL_ADDRESS and that the server is up",
        ),
        (
            WITH_TLS,
            RuntimeError(
                CORE + "Server connection error: tonic::transport::Error(Transport, "
                "ConnectError(Custom { kind: InvalidData, error: "
                "InvalidMessage(InvalidContentType) }))"
            ),
            "Temporal at temporal.example:7233 does not speak TLS, but the connection uses it "
            "(TEMPORAL_TLS, TEMPORAL_API_KEY or the profile's tls section); set "
            "TEMPORAL_TLS=false or use the server's TLS address",
        ),
        (
            PLAIN,
            RuntimeError(
                CORE + "`get_system_info` call error after connection: Status { code: Unknown, "
                'message: "transport error", source: Some(tonic::transport::Error(Transport, '
                'hyper::Error(Io, Custom { kind: BrokenPipe, error: "stream closed because of '
                'a broken pipe" }))) }'
            ),
            "Temporal at 127.0.0.1:7233 closed the connection: it probably requires TLS; set "
            "TEMPORAL_TLS=true (and TEMPORAL_TLS_SERVER_CA_CERT_PATH for a private authority)",
        ),
        (
            WITH_TLS,
            RuntimeError(
                CORE + "`get_system_info` call error after connection: Status { code: Unknown, "
                'message: "transport error", source: Some(tonic::transport::Error(Transport, '
                'hyper::Error(Io, Custom { kind: UnexpectedEof, error: "peer closed connection '
                'without sending TLS close_notify" }))) }'
            ),
            "Temporal at temporal.example:7233 closed the TLS connection: it probably requires "
            "a client certificate (mTLS); set TEMPORAL_TLS_CLIENT_CERT_PATH and "
            "TEMPORAL_TLS_CLIENT_KEY_PATH",
        ),
        (
            # The same refusal, when the client notices the closed connection first.
            WITH_CERT,
            RuntimeError(
                CORE + "`get_system_info` call error after connection: Status { code: "
                'Cancelled, message: "operation was canceled", source: Some(tonic::transport'
                '::Error(Transport, hyper::Error(Canceled, "connection closed"))) }'
            ),
            "Temporal at temporal.example:7233 closed the TLS connection: it refused the client "
            "certificate; check that TEMPORAL_TLS_CLIENT_CERT_PATH is signed by an authority the "
            "server trusts",
        ),
        (
            WITH_CERT,
            RuntimeError(CORE + "transport error: UnexpectedEof"),
            "Temporal at temporal.example:7233 closed the TLS connection: it refused the client "
            "certificate; check that TEMPORAL_TLS_CLIENT_CERT_PATH is signed by an authority the "
            "server trusts",
        ),
        (
            WITH_TLS,
            RuntimeError(
                CORE + "Server connection error: tonic::transport::Error(Transport, "
                "ConnectError(Custom { kind: InvalidData, error: "
                "InvalidCertificate(UnknownIssuer) }))"
            ),
            "the certificate of Temporal at temporal.example:7233 is not signed by an authority "
            "this client trusts; set TEMPORAL_TLS_SERVER_CA_CERT_PATH to the authority's "
            "certificate",
        ),
        (
            WITH_TLS,
            RuntimeError(
                CORE + "Server connection error: tonic::transport::Error(Transport, "
                "ConnectError(Custom { kind: InvalidData, error: InvalidCertificate("
                'NotValidForNameContext { expected: DnsName("example.com"), presented: [] }) }))'
            ),
            "the certificate of Temporal at temporal.example:7233 is not issued for the name "
            "this client checks; set TEMPORAL_TLS_SERVER_NAME to a name it is issued for",
        ),
        (
            PLAIN,
            RuntimeError(
                CORE + "`get_system_info` call error after connection: Status { code: "
                'Unimplemented, message: "grpc-status header missing, mapped from HTTP status '
                'code 404" }'
            ),
            "127.0.0.1:7233 answers, but not as a Temporal frontend; check TEMPORAL_ADDRESS "
            "(the gRPC port, 7233 by default, not the Web UI's)",
        ),
        (
            WITH_TLS,
            RPCError("Namespace crux is not found.", RPCStatusCode.NOT_FOUND, b""),
            'namespace "crux" does not exist on Temporal at temporal.example:7233; create it '
            "(temporal operator namespace create --namespace crux) or set TEMPORAL_NAMESPACE",
        ),
        (
            TemporalTarget(address="a:7233", namespace="crux", tls=True, api_key="k"),
            RPCError("Request unauthorized.", RPCStatusCode.UNAUTHENTICATED, b""),
            "Temporal at a:7233 refused the credentials (unauthenticated); check TEMPORAL_API_KEY",
        ),
        (
            WITH_TLS,
            RPCError("Request unauthorized.", RPCStatusCode.PERMISSION_DENIED, b""),
            "Temporal at temporal.example:7233 does not let these credentials use namespace "
            "\"crux\" (permission denied); check the API key's or certificate's access, or "
            "TEMPORAL_NAMESPACE",
        ),
    ],
)
def test_temporal_failures_are_one_line_in_words(
    target: TemporalTarget, error: BaseException, expected: str
) -> None:
    assert _one_clear_line(temporal_failure(target, error)) == expected


def test_a_postgresql_url_is_described_without_its_password() -> None:
    assert describe_database("postgresql://user:hunter2@db.internal:6543/crux") == (
        "db.internal:6543/crux"
    )
    target = database_target("postgresql://app:secret@db:5432/crux?sslmode=verify-full")
    assert (target.where, target.database, target.user) == ("db:5432", "crux", "app")
    assert describe_database("cruxx") == "(not a PostgreSQL URL)"


URL = "postgresql://app:hunter2@db.internal:5432/cruxx"


def _postgres(kind: type[asyncpg.PostgresError], message: str) -> asyncpg.PostgresError:
    return kind(message)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            _postgres(asyncpg.InvalidCatalogNameError, 'database "cruxx" does not exist'),
            'database "cruxx" does not exist on db.internal:5432; create it (createdb cruxx) '
            "or fix CRUX_DATABASE_URL",
        ),
        (
            _postgres(
                asyncpg.InvalidPasswordError, 'password authentication failed for user "app"'
            ),
            'PostgreSQL at db.internal:5432 refused the password of user "app"; fix the '
            "password in CRUX_DATABASE_URL (or PGPASSWORD)",
        ),
        (
            _postgres(
                asyncpg.InvalidAuthorizationSpecificationError,
                'no pg_hba.conf entry for host "10.0.0.5", user "app", database "cruxx", '
                "no encryption",
            ),
            "PostgreSQL at db.internal:5432 accepts only TLS connections from this host; add "
            "sslmode=require (or verify-full with sslrootcert) to CRUX_DATABASE_URL, or set "
            "PGSSLMODE=require",
        ),
        (
            _postgres(asyncpg.InvalidAuthorizationSpecificationError, 'role "app" does not exist'),
            'role "app" does not exist on db.internal:5432; create it or fix CRUX_DATABASE_URL',
        ),
        (
            ConnectionRefusedError(111, "Connection refused"),
            "cannot connect to PostgreSQL at db.internal:5432 (connection refused); start it "
            "(crux dev runs one) or fix CRUX_DATABASE_URL",
        ),
        (
            TimeoutError(),
            "cannot connect to PostgreSQL at db.internal:5432 (no answer within 10 s); check "
            "that it is up, or fix CRUX_DATABASE_URL",
        ),
        (
            ssl.SSLCertVerificationError(
                1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: Hostname mismatch"
            ),
            "the certificate of PostgreSQL at db.internal:5432 is not issued for that host "
            "name; use the name it is issued for in CRUX_DATABASE_URL, or sslmode=verify-ca",
        ),
        (
            ConnectionError('PostgreSQL server at "db.internal:5432" rejected SSL upgrade'),
            "PostgreSQL at db.internal:5432 does not support TLS, but sslmode asks for it; set "
            "sslmode=disable or prefer in CRUX_DATABASE_URL (or PGSSLMODE), or turn TLS on at "
            "the server",
        ),
    ],
)
def test_postgresql_failures_are_one_line_in_words(error: BaseException, expected: str) -> None:
    message = _one_clear_line(str(database_failure(URL, error)))
    assert message == expected
    assert "hunter2" not in message


def test_a_text_that_is_not_a_postgresql_url_is_named() -> None:
    for url in ("cruxx", "localhost:5432/crux", "postgresql://h:99999/crux"):
        assert str(database_failure(url, OSError())) == (
            "CRUX_DATABASE_URL is not a PostgreSQL URL; write it as "
            "postgresql://user:password@host:5432/database"
        )
