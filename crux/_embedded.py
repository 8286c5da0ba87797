"""Start the whole embedded stack (PostgreSQL, Temporal dev server, worker) in-process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from temporalio.client import Client

from crux._checks import check_providers
from crux._devserver import DevServer, check_ports, lock_stack_dir, start_dev_server
from crux.stack import EmbeddedPostgres, start_postgres, temporal_cli_path
from crux.workers import Worker
from storage import create_pool, migrate
from vocabulary.settings import Settings

STACK_DATABASE = "crux"


@dataclass
class EmbeddedStack:
    """The running embedded stack.

    Attributes:
        settings: Settings pointing at the embedded services.
        client: A Temporal client for the dev server.
        pool: A pool on the Crux database.
        ui_url: Address of the Temporal UI, when served.
    """

    settings: Settings
    client: Client
    pool: asyncpg.Pool
    ui_url: str | None


async def _ensure_database(postgres: EmbeddedPostgres) -> str:
    admin = await asyncpg.connect(postgres.url)
    try:
        exists = await admin.fetchval(
            "SELECT 1 FROM pg_database WHERE datname = $1", STACK_DATABASE
        )
        if not exists:
            await admin.execute(f'CREATE DATABASE "{STACK_DATABASE}"')
    finally:
        await admin.close()
    return postgres.database_url(STACK_DATABASE)


@asynccontextmanager
async def embedded_stack(
    base: Settings,
    *,
    stack_dir: Path,
    ui: bool = True,
    with_worker: bool = True,
    worker: Worker | None = None,
    port: int | None = None,
    ui_port: int | None = None,
) -> AsyncGenerator[EmbeddedStack]:
    """Run PostgreSQL, a Temporal dev server (with UI) and a worker until the block exits.

    Both servers keep their state under `stack_dir` (`pgdata/`, `temporal.db`) and write
    their output to `postgres.log` and `temporal.log` there, never to the terminal.

    Args:
        base: Settings to start from (provider settings and the model are kept).
        stack_dir: Where PostgreSQL and Temporal keep their data between runs.
        ui: Serve the Temporal UI (on 8233 when that port is free).
        port: Temporal frontend port (7233 when free, another free port otherwise).
        ui_port: Temporal UI port (8233 when free, another free port otherwise).
        with_worker: Also run a Crux worker in this process.
        worker: That worker, with its registrations (`crux.Worker()`, none, by default);
            it runs with `base` pointed at the embedded services.
    """
    # Fail before starting anything when the provider settings cannot work.
    check_providers(base)
    check_ports(port, ui_port if ui else None)
    temporal_cli_path()  # the `embedded` extra is installed
    lock = await asyncio.to_thread(lock_stack_dir, stack_dir)
    try:
        async with _stack(
            base, stack_dir=stack_dir, ui=ui, worker=(worker or Worker()) if with_worker else None,
            port=port, ui_port=ui_port,
        ) as stack:  # fmt: skip
            yield stack
    finally:
        lock.close()


@asynccontextmanager
async def _stack(
    base: Settings,
    *,
    stack_dir: Path,
    ui: bool,
    worker: Worker | None,
    port: int | None,
    ui_port: int | None,
) -> AsyncGenerator[EmbeddedStack]:
    postgres = await start_postgres(stack_dir / "pgdata", log_path=stack_dir / "postgres.log")
    server: DevServer | None = None
    pool: asyncpg.Pool | None = None
    running = AsyncExitStack()
    try:
        database_url = await _ensure_database(postgres)
        connection = await asyncpg.connect(database_url)
        try:
            await migrate(connection)
        finally:
            await connection.close()
        server = await start_dev_server(stack_dir, ui=ui, port=port, ui_port=ui_port)
        settings = base.model_copy(
            update={
                "temporal_address": server.address,
                "temporal_namespace": "default",
                "database_url": database_url,
            }
        )
        pool = await create_pool(database_url)
        if worker is not None:
            # Stopped first when the block ends (the exit stack), before the servers.
            await running.enter_async_context(
                worker.replace(settings=settings, client=server.client)
            )
        yield EmbeddedStack(
            settings=settings, client=server.client, pool=pool, ui_url=server.ui_url
        )
    finally:
        try:
            await running.aclose()
        finally:
            if pool is not None:
                await pool.close()
            if server is not None:
                await server.stop()
            await asyncio.to_thread(postgres.stop)
