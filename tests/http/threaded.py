"""The API, its worker, pool and Temporal client on a thread of their own.

For synchronous HTTP clients (schemathesis): they block the test's event loop, so the
server and the worker must run on another one. The thread creates a fresh database from
the migrated template, connects to the session's Temporal server, runs a worker on a fresh
task queue and the API under uvicorn, and stops them when the block ends.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from storage import create_pool
from tests.helpers import new_worker, settings_for
from tests.http.api import Credentials, serving, test_codec


def _database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


async def _serve(
    postgres_url: str,
    template: str,
    temporal_address: str,
    credentials: Credentials,
    started: threading.Event,
    found: dict[str, str],
    stop: asyncio.Event,
) -> None:
    name = f"crux_api_{uuid.uuid4().hex[:12]}"
    admin = await asyncpg.connect(postgres_url)
    await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    await admin.close()
    database_url = _database(postgres_url, name)
    try:
        client = await Client.connect(temporal_address, data_converter=pydantic_data_converter)
        pool = await create_pool(database_url, min_size=1, max_size=8)
        try:
            async with (
                new_worker(client, pool, settings_for(database_url)) as worker,
                serving(worker.runtime, credentials, codec=test_codec()) as url,
            ):
                found["url"] = url
                started.set()
                await stop.wait()
        finally:
            await pool.close()
    finally:
        admin = await asyncpg.connect(postgres_url)
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


@contextmanager
def threaded_api(
    postgres_url: str, template: str, temporal_address: str, credentials: Credentials
) -> Iterator[str]:
    """Run the API on a thread of its own; yield its base URL."""
    started = threading.Event()
    found: dict[str, str] = {}
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            loop.run_until_complete(
                _serve(postgres_url, template, temporal_address, credentials, started, found, stop)
            )
        except BaseException as error:  # reported to the test below
            failure.append(error)
            started.set()
        finally:
            loop.close()

    thread = threading.Thread(target=run, name="crux-api", daemon=True)
    thread.start()
    started.wait(timeout=60)
    if failure or "url" not in found:
        raise AssertionError("the API thread did not start") from (failure[0] if failure else None)
    try:
        yield found["url"]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=60)
