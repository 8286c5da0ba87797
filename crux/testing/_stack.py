"""The embedded stack for a test suite: a Temporal dev server and PostgreSQL, per session.

`embedded_stack()` starts both (synchronously, so a session-scoped fixture needs no event
loop) in a directory of their own and stops both, whatever happened, when the block ends.
`serve(worker, stack)` runs your `crux.Worker` on a fresh task queue and a fresh database
cloned from the migrated template, and yields a ready `Runtime` pointed at it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import threading
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from crux._checks import connect_temporal
from crux._devserver import DevServer, free_port, start_dev_server
from crux.runtime import Runtime
from crux.stack import EmbeddedPostgres, start_postgres_sync
from crux.workers import Worker
from storage import create_pool, migrate
from vocabulary.settings import Settings

__all__ = ["TEMPLATE_DATABASE", "TestStack", "embedded_stack", "serve"]

TEMPLATE_DATABASE = "crux_template"
"""The migrated database each `serve` clones."""

_T = TypeVar("_T")


@dataclass(frozen=True)
class TestStack:
    """A running embedded stack.

    Attributes:
        temporal_address: The dev server's frontend (`127.0.0.1:<port>`).
        namespace: The Temporal namespace (`default`).
        postgres_url: The PostgreSQL server's maintenance database URL.
        directory: Where both keep their data and logs.
    """

    __test__ = False  # not a test class, whatever pytest's name rules say

    temporal_address: str
    namespace: str
    postgres_url: str
    directory: Path

    def database_url(self, database: str = TEMPLATE_DATABASE) -> str:
        """The URL of `database` on the stack's PostgreSQL."""
        parts = urlsplit(self.postgres_url)
        return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))

    def settings(self, base: Settings | None = None, **changes: Any) -> Settings:
        """`base` (the defaults when omitted) pointed at this stack, with `changes` on top."""
        return (base or Settings()).model_copy(
            update={
                "temporal_address": self.temporal_address,
                "temporal_namespace": self.namespace,
                "database_url": self.database_url(),
                "health_file": None,
                **changes,
            }
        )


def _in_thread(work: Callable[[], Awaitable[_T]]) -> _T:
    """Run a coroutine to completion on a loop of its own, whatever loop this thread runs."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = asyncio.run(work())  # pyright: ignore[reportArgumentType]
        except BaseException as error:  # handed to the caller's thread
            box["error"] = error

    thread = threading.Thread(target=run, name="crux-testing-stack")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


async def _prepare_template(postgres_url: str, template_url: str) -> None:
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE_DATABASE}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{TEMPLATE_DATABASE}"')
    finally:
        await admin.close()
    connection = await asyncpg.connect(template_url)
    try:
        await migrate(connection)
    finally:
        await connection.close()


@contextmanager
def embedded_stack(directory: Path | None = None) -> Generator[TestStack]:
    """Start PostgreSQL and a Temporal dev server; stop both when the block ends.

    Both run on loopback, on free ports (a Unix socket for PostgreSQL), headless, with their
    data and logs in `directory` (a new temporary directory, removed afterwards, when
    omitted). Starting takes a few seconds.

    Args:
        directory: Where the servers keep their data (`pgdata/`, `temporal.db`, logs).
    """
    owned = directory is None
    root = Path(tempfile.mkdtemp(prefix="crux-testing-")) if directory is None else directory
    root.mkdir(parents=True, exist_ok=True)
    postgres: EmbeddedPostgres | None = None
    server: DevServer | None = None
    try:
        postgres = start_postgres_sync(root / "pgdata", log_path=root / "postgres.log")
        stack = TestStack(
            temporal_address="",
            namespace="default",
            postgres_url=postgres.url,
            directory=root,
        )
        _in_thread(lambda: _prepare_template(stack.postgres_url, stack.database_url()))
        server = _in_thread(lambda: start_dev_server(root, ui=False, port=free_port()))
        yield TestStack(
            temporal_address=server.address,
            namespace="default",
            postgres_url=postgres.url,
            directory=root,
        )
    finally:
        if server is not None:
            server.stop_sync()
        if postgres is not None:
            postgres.stop()
        if owned:
            shutil.rmtree(root, ignore_errors=True)


@asynccontextmanager
async def serve(
    worker: Worker | None,
    stack: TestStack,
    *,
    task_queue: str | None = None,
    fresh_database: bool = True,
) -> AsyncGenerator[Runtime]:
    """Run `worker` on `stack` and yield a `Runtime` that reaches it.

    The worker keeps its registrations, catalog and settings (the defaults when it has none,
    never the environment's: a test does not talk to the provider keys of the shell), with
    the stack's addresses, a fresh task queue and, with `fresh_database`, a database of its
    own cloned from the migrated template (dropped afterwards).

    Args:
        worker: Your worker (`crux.Worker(...)`); one without registrations when `None`.
        stack: A running stack (`embedded_stack()`).
        task_queue: The task queue (a fresh `crux-test-<id>` when omitted).
        fresh_database: Give this run a database of its own.
    """
    worker = worker or Worker()
    queue = task_queue or f"crux-test-{uuid.uuid4().hex[:10]}"
    database = f"crux_test_{uuid.uuid4().hex[:12]}" if fresh_database else TEMPLATE_DATABASE
    if fresh_database:
        await _create_database(stack, database)
    try:
        settings = stack.settings(
            worker.settings,
            task_queue=queue,
            database_url=stack.database_url(database),
            sweep_interval_seconds=0,
            # A test's end cancels what is still running instead of waiting for it.
            shutdown_grace_seconds=0,
        )
        client = await connect_temporal(settings)
        pool = await create_pool(settings.require_database_url())
        try:
            async with worker.replace(settings=settings, client=client):
                yield Runtime(
                    client,
                    pool,
                    task_queue=queue,
                    default_model=settings.default_model,
                    catalog=worker.catalog,
                )
        finally:
            await pool.close()
    finally:
        if fresh_database:
            with contextlib.suppress(OSError, asyncpg.PostgresError):
                await _drop_database(stack, database)


async def _create_database(stack: TestStack, database: str) -> None:
    admin = await asyncpg.connect(stack.postgres_url)
    try:
        await admin.execute(f'CREATE DATABASE "{database}" TEMPLATE "{TEMPLATE_DATABASE}"')
    finally:
        await admin.close()


async def _drop_database(stack: TestStack, database: str) -> None:
    admin = await asyncpg.connect(stack.postgres_url)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    finally:
        await admin.close()
