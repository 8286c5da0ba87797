"""Fixtures of the HTTP API suites: a worker, and the API serving it on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client

from tests.helpers import RunningWorker, new_worker, settings_for
from tests.http.api import Credentials, serving, test_codec


@dataclass
class Api:
    """The API under test, its credentials, and the worker behind it."""

    url: str
    credentials: Credentials
    worker: RunningWorker


@pytest.fixture
def credentials() -> Credentials:
    return Credentials()


@pytest_asyncio.fixture
async def api(
    client: Client, pool: asyncpg.Pool, database_url: str, credentials: Credentials
) -> AsyncIterator[Api]:
    async with (
        new_worker(client, pool, settings_for(database_url)) as worker,
        serving(worker.runtime, credentials, codec=test_codec()) as url,
    ):
        yield Api(url=url, credentials=credentials, worker=worker)
