"""`crux.connect`: one call from addresses to a ready `Runtime` that closes what it opened."""

from __future__ import annotations

import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux._checks import StartupCheckError
from storage import ThreadStore
from tests.helpers import new_worker, settings_for


async def test_connect_returns_a_runtime_that_generates_and_closes_its_pool(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    address = client.service_client.config.target_host
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        async with await crux.connect(
            temporal_address=address,
            database_url=database_url,
            task_queue=worker.task_queue,
            settings=crux.Settings(),  # not the environment of the test process
        ) as runtime:
            assert isinstance(runtime, crux.Runtime)
            result = await runtime.generate(
                "Hello", thread="connect:1", generation_id="g-1", model="offline:echo"
            )
            assert result.thread_commit is not None
            assert result.thread_commit.status == "selected"
            # The pool decodes JSON with Crux's codecs: the facade reads what it stored.
            assert (await runtime.receipt(result.steps[0].request.id)).id == (
                result.steps[0].request.id
            )
            own_pool = runtime.pool
        assert own_pool.is_closing()
        await runtime.close()  # idempotent
    snapshot = await ThreadStore(pool).read("connect:1")
    assert len(snapshot.entries) == 2


async def test_connect_reads_the_environment_by_default(
    client: Client, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", client.service_client.config.target_host)
    monkeypatch.setenv("CRUX_DATABASE_URL", database_url)
    monkeypatch.setenv("CRUX_TASK_QUEUE", "from-the-environment")
    monkeypatch.setenv("CRUX_MODEL", "offline:echo")
    runtime = await crux.connect()
    try:
        assert runtime._task_queue == "from-the-environment"
        assert runtime.client.namespace == "default"
    finally:
        await runtime.close()
    assert runtime.pool.is_closing()


async def test_a_caller_pool_stays_open_after_close(client: Client, pool: asyncpg.Pool) -> None:
    runtime = crux.Runtime(client, pool)
    async with runtime:
        pass
    assert not pool.is_closing()


async def test_connect_fails_typed_and_fast_on_bad_input(client: Client, database_url: str) -> None:
    address = client.service_client.config.target_host
    with pytest.raises(crux.ConfigurationError, match="CRUX_DATABASE_URL"):
        await crux.connect(temporal_address=address, settings=crux.Settings())
    with pytest.raises(crux.ConfigurationError, match="temporal_address"):
        await crux.connect(temporal_address="", database_url=database_url)
    started = time.monotonic()
    with pytest.raises(StartupCheckError, match="TEMPORAL_ADDRESS"):
        await crux.connect(temporal_address="127.0.0.1:1", database_url=database_url)
    with pytest.raises(StartupCheckError, match="CRUX_DATABASE_URL"):
        await crux.connect(
            temporal_address=address, database_url="postgresql://nobody@127.0.0.1:1/none"
        )
    assert time.monotonic() - started < 30


async def test_connect_refuses_an_unmigrated_database(client: Client, postgres_url: str) -> None:
    name = f"crux_unmigrated_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = urlunsplit(urlsplit(postgres_url)._replace(path=f"/{name}"))
    try:
        with pytest.raises(StartupCheckError, match="crux db migrate"):
            await crux.connect(
                temporal_address=client.service_client.config.target_host, database_url=url
            )
    finally:
        admin = await asyncpg.connect(postgres_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def test_a_wrong_database_url_is_named_in_words_without_the_password(
    client: Client, postgres_url: str
) -> None:
    """A typo in the database name: the cause in words and the variable, no class name."""
    address = client.service_client.config.target_host
    parts = urlsplit(postgres_url)
    missing = urlunsplit(parts._replace(path="/cruxx_does_not_exist"))
    with pytest.raises(StartupCheckError) as raised:
        await crux.connect(temporal_address=address, database_url=missing)
    message = str(raised.value)
    assert "cruxx_does_not_exist" in message and "CRUX_DATABASE_URL" in message
    assert "does not exist" in message
    assert "Error" not in message and "\n" not in message
    if parts.password:
        assert parts.password not in message


async def test_an_unreachable_temporal_is_named_in_words(database_url: str) -> None:
    with pytest.raises(StartupCheckError) as raised:
        await crux.connect(temporal_address="127.0.0.1:1", database_url=database_url)
    message = str(raised.value)
    assert "TEMPORAL_ADDRESS" in message and "127.0.0.1:1" in message
    assert "RuntimeError" not in message and "\n" not in message
