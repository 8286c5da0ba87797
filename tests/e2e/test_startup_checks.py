"""Workers and `crux` commands fail fast, in one line naming the remedy, when set up wrong.

Real parts only: an unmigrated PostgreSQL database, a closed port for Temporal, the session's
Temporal dev server for search attributes.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
import pytest_asyncio
from google.protobuf.duration_pb2 import Duration
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client

from crux._checks import StartupCheckError, ensure_search_attributes
from crux.config import Settings
from crux.stack import SEARCH_ATTRIBUTES

pytestmark = pytest.mark.stack

ROOT = Path(__file__).resolve().parents[2]
FAIL_FAST_SECONDS = 30.0


@contextmanager
def _refusing_port() -> Iterator[int]:
    """A port that refuses connections for the block: bound by this test, never listening.

    Holding it bound keeps a concurrent test (or server) from taking it in the meantime.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]


@pytest_asyncio.fixture
async def empty_database(postgres_url: str) -> AsyncIterator[str]:
    """A database that exists but was never migrated."""
    name = f"crux_empty_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    parts = urlsplit(postgres_url)
    yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()


def _run(command: list[str], **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CRUX_", "TEMPORAL_ADDRESS", "OPENAI_", "ANTHROPIC_"))
    }
    started = time.monotonic()
    completed = subprocess.run(
        command,
        cwd=ROOT,
        env={**base, "PYTHONPATH": str(ROOT), "CRUX_LOG_LEVEL": "error", **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return completed, time.monotonic() - started


def _one_clear_line(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 1, (completed.returncode, completed.stderr[-2000:])
    assert "Traceback" not in completed.stderr
    lines = [line for line in completed.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, completed.stderr[-2000:]
    return lines[0]


@pytest.mark.parametrize(
    "command",
    [[sys.executable, "-m", "crux", "worker"], [sys.executable, "worker.py"]],
    ids=["crux-worker", "worker.py"],
)
async def test_worker_refuses_an_unmigrated_database(
    empty_database: str, client: Client, command: list[str]
) -> None:
    address = client.service_client.config.target_host
    completed, elapsed = await asyncio.to_thread(
        _run, command, CRUX_DATABASE_URL=empty_database, TEMPORAL_ADDRESS=address
    )
    line = _one_clear_line(completed)
    assert "crux db migrate" in line
    assert "CRUX_MIGRATE=true" in line
    assert elapsed < FAIL_FAST_SECONDS


async def test_worker_names_temporal_address_when_temporal_is_unreachable(
    empty_database: str,
) -> None:
    # CRUX_MIGRATE migrates the empty database first; then Temporal is the problem.
    with _refusing_port() as port:
        address = f"127.0.0.1:{port}"
        completed, elapsed = await asyncio.to_thread(
            _run,
            [sys.executable, "-m", "crux", "worker"],
            CRUX_DATABASE_URL=empty_database,
            TEMPORAL_ADDRESS=address,
            CRUX_MIGRATE="true",
        )
    line = _one_clear_line(completed)
    assert "TEMPORAL_ADDRESS" in line
    assert address in line
    assert elapsed < FAIL_FAST_SECONDS
    connection = await asyncpg.connect(empty_database)
    try:
        assert await connection.fetchval("SELECT count(*) FROM crux_schema_migrations") > 0
    finally:
        await connection.close()


async def test_worker_names_the_missing_provider_key(database_url: str) -> None:
    completed, _ = await asyncio.to_thread(
        _run,
        [sys.executable, "-m", "crux", "worker"],
        CRUX_DATABASE_URL=database_url,
        CRUX_MODEL="openai:gpt-4o-mini",
    )
    assert "OPENAI_API_KEY" in _one_clear_line(completed)


async def test_commands_refuse_an_unmigrated_database(empty_database: str) -> None:
    for arguments in (["thread", "show", "t"], ["db", "sweep"]):
        completed, _ = await asyncio.to_thread(
            _run, [sys.executable, "-m", "crux", *arguments], CRUX_DATABASE_URL=empty_database
        )
        assert "crux db migrate" in _one_clear_line(completed)


async def _fresh_namespace(client: Client) -> str:
    name = f"crux-checks-{uuid.uuid4().hex[:8]}"
    await client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=name, workflow_execution_retention_period=Duration(seconds=86_400)
        )
    )
    return name


async def test_search_attributes_are_registered_on_a_dev_server_and_named_on_a_cluster(
    client: Client,
) -> None:
    address = client.service_client.config.target_host
    namespace = await _fresh_namespace(client)
    cluster = Settings(
        temporal_address=address,
        temporal_namespace=namespace,
        register_search_attributes="false",
    )
    with pytest.raises(StartupCheckError) as refused:
        await ensure_search_attributes(client, cluster)
    message = str(refused.value)
    assert (
        f"temporal operator search-attribute create --address {address} --namespace {namespace}"
        in message
    )
    for name in SEARCH_ATTRIBUTES:
        assert f"--name {name} --type Keyword" in message

    dev = cluster.model_copy(update={"register_search_attributes": "auto"})
    registered = await ensure_search_attributes(client, dev)
    assert sorted(registered) == sorted(SEARCH_ATTRIBUTES)

    async def listed() -> set[str]:
        response = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
        return set(response.custom_attributes)

    deadline = time.monotonic() + timedelta(seconds=20).total_seconds()
    while not set(SEARCH_ATTRIBUTES) <= await listed():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.2)
    assert await ensure_search_attributes(client, cluster) == []


def test_demo_and_dev_refuse_unusable_providers_before_starting_anything(
    tmp_path: Path,
) -> None:
    for command in ("demo", "dev"):
        completed, elapsed = _run(
            [sys.executable, "-m", "crux", command, "--stack-dir", str(tmp_path / command)],
            CRUX_MODEL="anthropic:claude-sonnet-4-5",
        )
        assert "ANTHROPIC_API_KEY" in _one_clear_line(completed)
        assert elapsed < FAIL_FAST_SECONDS
        assert not (tmp_path / command / "pgdata").exists()
