"""Production connections against real servers on loopback: Temporal over TLS and mTLS with an
API key, PostgreSQL that accepts TLS connections only.

`temporal server start-dev` cannot serve TLS, so Temporal is the session's dev server behind a
TLS-terminating proxy (`tests.tls.TlsProxy`), which also shows what the client sent: the
API key's `authorization: Bearer` header. PostgreSQL is the machine's (the embedded build has
no TLS support) with `ssl=on` and `hostssl` lines only; those tests are skipped on a machine
without a PostgreSQL built with TLS. Certificates are generated per module.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client

import crux
from crux.config import Settings
from crux.connection import StartupCheckError, connect_database, connect_temporal
from storage.migrate import migrate
from tests.tls import (
    API_KEY,
    CERT_USER,
    PASSWORD,
    PASSWORD_USER,
    Certificates,
    TlsPostgres,
    TlsProxy,
    huffman,
    make_certificates,
    postgres_with_tls,
)

ROOT = Path(__file__).resolve().parents[2]
TLS_POSTGRES = postgres_with_tls()
needs_tls_postgres = pytest.mark.skipif(
    TLS_POSTGRES is None,
    reason="no PostgreSQL built with TLS on this machine (Debian's postgresql package has one)",
)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A private authority, a server certificate for localhost and a client certificate."""
    return make_certificates(tmp_path_factory.mktemp("certificates"), client_name=CERT_USER)


@pytest.fixture(scope="module")
def strangers(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """Certificates of another authority, which the servers do not trust."""
    return make_certificates(tmp_path_factory.mktemp("strangers"), client_name=CERT_USER)


@pytest.fixture(autouse=True)
def no_user_configuration(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Temporal profile of the developer's own applies to these connections."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))


def _address(client: Client) -> str:
    return client.service_client.config.target_host


@pytest_asyncio.fixture
async def tls_temporal(client: Client, certificates: Certificates) -> AsyncIterator[TlsProxy]:
    """The session's Temporal behind TLS (no client certificate asked for)."""
    async with TlsProxy(_address(client), certificates, require_client_certificate=False) as proxy:
        yield proxy


@pytest_asyncio.fixture
async def mtls_temporal(client: Client, certificates: Certificates) -> AsyncIterator[TlsProxy]:
    """The session's Temporal behind mutual TLS: a client certificate of the authority."""
    async with TlsProxy(_address(client), certificates, require_client_certificate=True) as proxy:
        yield proxy


def _mtls(proxy: TlsProxy, certificates: Certificates, **values: object) -> Settings:
    return Settings.model_validate(
        {
            "temporal_address": proxy.address,
            "temporal_tls_server_ca_cert_path": str(certificates.ca),
            "temporal_tls_client_cert_path": str(certificates.client_cert),
            "temporal_tls_client_key_path": str(certificates.client_key),
            **values,
        }
    )


async def _refused(settings: Settings) -> str:
    with pytest.raises(StartupCheckError) as refused:
        await connect_temporal(settings)
    message = str(refused.value)
    assert "\n" not in message and "Error" not in message, message
    return message


# Temporal ---------------------------------------------------------------------------------


async def test_temporal_over_tls_with_a_private_authority(
    tls_temporal: TlsProxy, certificates: Certificates
) -> None:
    by_path = await connect_temporal(
        Settings(
            temporal_address=tls_temporal.address,
            temporal_tls_server_ca_cert_path=str(certificates.ca),
        )
    )
    assert (await by_path.count_workflows()).count >= 0
    inline = await connect_temporal(
        Settings.from_env(
            {
                "TEMPORAL_ADDRESS": tls_temporal.address,
                "TEMPORAL_TLS_SERVER_CA_CERT_DATA": certificates.ca.read_text(encoding="utf-8"),
            }
        )
    )
    assert inline.namespace == "default"


async def test_temporal_tls_mistakes_are_named_with_their_remedy(
    client: Client, tls_temporal: TlsProxy, certificates: Certificates, strangers: Certificates
) -> None:
    address = tls_temporal.address
    assert await _refused(Settings(temporal_address=address)) == (
        f"Temporal at {address} closed the connection: it probably requires TLS; set "
        "TEMPORAL_TLS=true (and TEMPORAL_TLS_SERVER_CA_CERT_PATH for a private authority)"
    )
    assert await _refused(Settings(temporal_address=address, temporal_tls=True)) == (
        f"the certificate of Temporal at {address} is not signed by an authority this client "
        "trusts; set TEMPORAL_TLS_SERVER_CA_CERT_PATH to the authority's certificate"
    )
    assert await _refused(
        Settings(temporal_address=address, temporal_tls_server_ca_cert_path=str(strangers.ca))
    ) == (
        f"the certificate of Temporal at {address} is not signed by an authority this client "
        "trusts; set TEMPORAL_TLS_SERVER_CA_CERT_PATH to the authority's certificate"
    )
    assert await _refused(
        Settings(
            temporal_address=address,
            temporal_tls_server_ca_cert_path=str(certificates.ca),
            temporal_tls_server_name="temporal.example.com",
        )
    ) == (
        f"the certificate of Temporal at {address} is not issued for the name this client "
        "checks; set TEMPORAL_TLS_SERVER_NAME to a name it is issued for"
    )
    plain = _address(client)
    assert await _refused(Settings(temporal_address=plain, temporal_tls=True)) == (
        f"Temporal at {plain} does not speak TLS, but the connection uses it (TEMPORAL_TLS, "
        "TEMPORAL_API_KEY or the profile's tls section); set TEMPORAL_TLS=false or use the "
        "server's TLS address"
    )
    assert await _refused(
        Settings(
            temporal_address=address,
            temporal_tls_server_ca_cert_path=str(certificates.ca),
            temporal_namespace="no-such-namespace",
        )
    ) == (
        f'namespace "no-such-namespace" does not exist on Temporal at {address}; create it '
        "(temporal operator namespace create --namespace no-such-namespace) or set "
        "TEMPORAL_NAMESPACE"
    )


async def test_temporal_mtls_needs_a_client_certificate_of_the_authority(
    mtls_temporal: TlsProxy, certificates: Certificates, strangers: Certificates
) -> None:
    address = mtls_temporal.address
    assert await _refused(
        Settings(temporal_address=address, temporal_tls_server_ca_cert_path=str(certificates.ca))
    ) == (
        f"Temporal at {address} closed the TLS connection: it probably requires a client "
        "certificate (mTLS); set TEMPORAL_TLS_CLIENT_CERT_PATH and TEMPORAL_TLS_CLIENT_KEY_PATH"
    )
    assert await _refused(
        _mtls(
            mtls_temporal,
            certificates,
            temporal_tls_client_cert_path=str(strangers.client_cert),
            temporal_tls_client_key_path=str(strangers.client_key),
        )
    ) == (
        f"Temporal at {address} closed the TLS connection: it refused the client certificate; "
        "check that TEMPORAL_TLS_CLIENT_CERT_PATH is signed by an authority the server trusts"
    )
    connected = await connect_temporal(_mtls(mtls_temporal, certificates))
    assert connected.namespace == "default"


async def test_the_api_key_of_a_profile_is_sent_as_a_bearer_token(
    tls_temporal: TlsProxy, certificates: Certificates, tmp_path: Path
) -> None:
    profile = tmp_path / "temporal.toml"
    profile.write_text(
        "[profile.staging]\n"
        f'address = "{tls_temporal.address}"\n'
        'namespace = "default"\n'
        f'api_key = "{API_KEY}"\n'
        "[profile.staging.tls]\n"
        f'server_ca_cert_path = "{certificates.ca}"\n',
        encoding="utf-8",
    )
    settings = Settings.from_env(
        {"TEMPORAL_CONFIG_FILE": str(profile), "TEMPORAL_PROFILE": "staging"}
    )
    connected = await connect_temporal(settings)
    await connected.count_workflows()
    # HPACK sends header values Huffman-coded: look for the coded `Bearer <key>`.
    assert huffman(f"Bearer {API_KEY}") in bytes(tls_temporal.received)
    assert huffman("Bearer " + API_KEY.replace("i", "o")) not in bytes(tls_temporal.received)


async def test_a_worker_and_crux_connect_run_a_generation_over_mtls_with_an_api_key(
    mtls_temporal: TlsProxy, certificates: Certificates, database_url: str
) -> None:
    settings = _mtls(
        mtls_temporal,
        certificates,
        temporal_api_key=API_KEY,
        database_url=database_url,
        task_queue=f"crux-tls-{uuid.uuid4().hex[:8]}",
        log_format="json",
    )
    async with crux.Worker(settings=settings):  # entered once it polls
        async with await crux.connect(settings=settings) as runtime:
            result = await runtime.generate("over mutual TLS", thread="tls-thread")
        assert result.thread_commit is not None
        assert huffman(f"Bearer {API_KEY}") in bytes(mtls_temporal.received)


# PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_postgres(certificates: Certificates) -> Iterator[TlsPostgres]:
    """A PostgreSQL that accepts TLS connections only, with a migrated database `crux`."""
    assert TLS_POSTGRES is not None
    server = TlsPostgres(TLS_POSTGRES, certificates).start()
    try:
        asyncio.run(_prepare(server))
        yield server
    finally:
        server.stop()


async def _prepare(server: TlsPostgres) -> None:
    admin = await asyncpg.connect(server.url(query="sslmode=require"))
    try:
        await admin.execute("CREATE DATABASE crux")
        await admin.execute(f"CREATE ROLE {CERT_USER} LOGIN SUPERUSER")
        await admin.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'")
    finally:
        await admin.close()
    connection = await asyncpg.connect(server.url("crux", query="sslmode=require"))
    try:
        await migrate(connection)
    finally:
        await connection.close()


async def _encrypted(url: str) -> bool:
    connection = await connect_database(url)
    try:
        return bool(
            await connection.fetchval("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        )
    finally:
        await connection.close()


async def _database_refused(url: str) -> str:
    with pytest.raises(StartupCheckError) as refused:
        await connect_database(url)
    message = str(refused.value)
    assert "\n" not in message and "Error" not in message, message
    return message


@needs_tls_postgres
async def test_postgres_requiring_tls_takes_tls_from_the_url(
    tls_postgres: TlsPostgres, certificates: Certificates, strangers: Certificates
) -> None:
    where = f"127.0.0.1:{tls_postgres.port}"
    assert await _database_refused(tls_postgres.url("crux", query="sslmode=disable")) == (
        f"PostgreSQL at {where} accepts only TLS connections from this host; add "
        "sslmode=require (or verify-full with sslrootcert) to CRUX_DATABASE_URL, or set "
        "PGSSLMODE=require"
    )
    # asyncpg's default over TCP is `prefer`: encrypted whenever the server offers it.
    assert await _encrypted(tls_postgres.url("crux"))
    assert await _encrypted(tls_postgres.url("crux", query="sslmode=require"))
    verified = f"sslmode=verify-full&sslrootcert={certificates.ca}"
    assert await _encrypted(tls_postgres.url("crux", query=verified))
    assert await _database_refused(
        tls_postgres.url("crux", query=f"sslmode=verify-full&sslrootcert={strangers.ca}")
    ) == (
        f"the certificate of PostgreSQL at {where} is not signed by an authority this client "
        "trusts; set sslrootcert=<file> in CRUX_DATABASE_URL (or PGSSLROOTCERT) to its "
        "authority's certificate"
    )
    assert await _database_refused(
        tls_postgres.url("crux", query="sslmode=verify-full&sslrootcert=/nonexistent/ca.crt")
    ) == (
        "a TLS file named by sslrootcert, sslcert or sslkey in CRUX_DATABASE_URL (or "
        "PGSSLROOTCERT, PGSSLCERT, PGSSLKEY) does not exist"
    )


@needs_tls_postgres
async def test_postgres_client_certificates_and_credentials(
    tls_postgres: TlsPostgres, certificates: Certificates, strangers: Certificates
) -> None:
    where = f"127.0.0.1:{tls_postgres.port}"
    mutual = (
        f"sslmode=verify-full&sslrootcert={certificates.ca}"
        f"&sslcert={certificates.client_cert}&sslkey={certificates.client_key}"
    )
    assert await _encrypted(tls_postgres.url("crux", user=CERT_USER, query=mutual))
    assert await _database_refused(
        tls_postgres.url("crux", user=CERT_USER, query="sslmode=require")
    ) == (
        f'PostgreSQL at {where} refused the client certificate for user "{CERT_USER}"; check '
        "sslcert/sslkey (or PGSSLCERT/PGSSLKEY) and the certificate's common name"
    )
    stranger = (
        f"sslmode=verify-full&sslrootcert={certificates.ca}"
        f"&sslcert={strangers.client_cert}&sslkey={strangers.client_key}"
    )
    assert await _database_refused(tls_postgres.url("crux", user=CERT_USER, query=stranger)) == (
        f"PostgreSQL at {where} closed the connection while it was being opened (a client "
        "certificate it refused, or a server going down); check sslcert/sslkey in "
        "CRUX_DATABASE_URL (or PGSSLCERT/PGSSLKEY) and the server's log"
    )
    wrong = f"postgresql://{PASSWORD_USER}:wrong@127.0.0.1:{tls_postgres.port}/crux"
    assert await _database_refused(wrong) == (
        f'PostgreSQL at {where} refused the password of user "{PASSWORD_USER}"; fix the '
        "password in CRUX_DATABASE_URL (or PGPASSWORD)"
    )
    assert PASSWORD not in await _database_refused(
        f"postgresql://{PASSWORD_USER}:{PASSWORD}@127.0.0.1:{tls_postgres.port}/cruxx"
    )
    assert await _database_refused(tls_postgres.url("cruxx")) == (
        f'database "cruxx" does not exist on {where}; create it (createdb cruxx) or fix '
        "CRUX_DATABASE_URL"
    )
    assert await _database_refused(tls_postgres.url("crux", user="nobody")) == (
        f'role "nobody" does not exist on {where}; create it or fix CRUX_DATABASE_URL'
    )


@needs_tls_postgres
async def test_postgres_tls_from_the_standard_variables(
    tls_postgres: TlsPostgres, certificates: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = tls_postgres.url("crux", user=CERT_USER)
    monkeypatch.setenv("PGSSLMODE", "verify-full")
    monkeypatch.setenv("PGSSLROOTCERT", str(certificates.ca))
    monkeypatch.setenv("PGSSLCERT", str(certificates.client_cert))
    monkeypatch.setenv("PGSSLKEY", str(certificates.client_key))
    assert await _encrypted(url)
    monkeypatch.setenv("PGSSLMODE", "disable")
    assert "accepts only TLS connections" in await _database_refused(url)


def _tls_environment(
    proxy: TlsProxy, certificates: Certificates, postgres: TlsPostgres, task_queue: str
) -> dict[str, str]:
    """A production-like environment: Temporal over mTLS with an API key, PostgreSQL TLS."""
    return {
        "TEMPORAL_ADDRESS": proxy.address,
        "TEMPORAL_API_KEY": API_KEY,
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(certificates.ca),
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(certificates.client_cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(certificates.client_key),
        "CRUX_DATABASE_URL": postgres.url("crux", user=CERT_USER),
        "PGSSLMODE": "verify-full",
        "PGSSLROOTCERT": str(certificates.ca),
        "PGSSLCERT": str(certificates.client_cert),
        "PGSSLKEY": str(certificates.client_key),
        "CRUX_TASK_QUEUE": task_queue,
        "CRUX_LOG_FORMAT": "json",
    }


def _crux(*arguments: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crux", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT,
    )


@needs_tls_postgres
@pytest.mark.stack
async def test_the_cli_migrates_over_tls_and_names_a_refused_plain_connection(
    tls_postgres: TlsPostgres, certificates: Certificates
) -> None:
    env = {
        "CRUX_DATABASE_URL": tls_postgres.url("crux", user=CERT_USER),
        "PGSSLMODE": "verify-full",
        "PGSSLROOTCERT": str(certificates.ca),
        "PGSSLCERT": str(certificates.client_cert),
        "PGSSLKEY": str(certificates.client_key),
    }
    migrated = await asyncio.to_thread(_crux, "db", "migrate", env=env)
    assert migrated.returncode == 0, migrated.stderr
    assert "applied 0 migration(s)" in migrated.stdout
    refused = await asyncio.to_thread(_crux, "db", "migrate", env={**env, "PGSSLMODE": "disable"})
    assert refused.returncode == 1
    [line] = refused.stderr.splitlines()
    assert line.endswith(
        f"PostgreSQL at 127.0.0.1:{tls_postgres.port} accepts only TLS connections from this "
        "host; add sslmode=require (or verify-full with sslrootcert) to CRUX_DATABASE_URL, or "
        "set PGSSLMODE=require"
    )


@needs_tls_postgres
@pytest.mark.stack
async def test_a_worker_process_and_crux_connect_over_tls_end_to_end(
    mtls_temporal: TlsProxy,
    certificates: Certificates,
    tls_postgres: TlsPostgres,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    task_queue = f"crux-tls-{uuid.uuid4().hex[:8]}"
    env = _tls_environment(mtls_temporal, certificates, tls_postgres, task_queue)
    health = tmp_path / "worker.health"
    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "crux", "worker"],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env, "CRUX_HEALTH_FILE": str(health)},
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(600):
            if health.exists() or worker.poll() is not None:
                break
            await asyncio.sleep(0.1)
        assert health.exists(), (tmp_path / "worker.log").read_text(errors="replace")[-3000:]
        # This process reads the same variables (asyncpg reads the PGSSL* ones itself).
        for name in ("PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY"):
            monkeypatch.setenv(name, env[name])
        async with await crux.connect(settings=Settings.from_env(env)) as runtime:
            result = await runtime.generate("production path", thread="tls-production")
        assert result.thread_commit is not None
        assert result.thread_commit.status == "selected"
        assert huffman(f"Bearer {API_KEY}") in bytes(mtls_temporal.received)
    finally:
        worker.terminate()
        try:
            # Not blocking the loop: the worker's shutdown goes through the proxy it serves.
            await asyncio.to_thread(worker.wait, 30)
        finally:
            log.close()
