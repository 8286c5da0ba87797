"""Start the whole embedded stack (PostgreSQL, Temporal dev server, worker) in-process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import asyncpg
from temporalio.client import Client

from crux._checks import check_providers
from crux._devserver import DevServer, check_ports, lock_stack_dir, start_dev_server
from crux._worker import run_worker
from crux.hooks import StepHook
from crux.stack import EmbeddedPostgres, start_postgres, temporal_cli_path
from crux.tools import Tool
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


async def _until_started(worker_task: asyncio.Task[None], started: asyncio.Event) -> None:
    """Wait until the worker polls; a failed start-up check is raised here, not swallowed."""
    waiter = asyncio.create_task(started.wait())
    try:
        await asyncio.wait({worker_task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if worker_task.done():
        worker_task.result()


@asynccontextmanager
async def embedded_stack(
    base: Settings,
    *,
    stack_dir: Path,
    ui: bool = True,
    with_worker: bool = True,
    tools: Iterable[Tool] = (),
    hooks: Iterable[StepHook] = (),
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
        tools: Tools registered on that worker.
        hooks: `prepare_step` / `prepare_invocation` hooks registered on that worker.
    """
    # Fail before starting anything when the provider settings cannot work.
    check_providers(base)
    check_ports(port, ui_port if ui else None)
    temporal_cli_path()  # the `embedded` extra is installed
    lock = await asyncio.to_thread(lock_stack_dir, stack_dir)
    try:
        async with _stack(
            base, stack_dir=stack_dir, ui=ui, with_worker=with_worker, tools=tools, hooks=hooks,
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
    with_worker: bool,
    tools: Iterable[Tool],
    hooks: Iterable[StepHook],
    port: int | None,
    ui_port: int | None,
) -> AsyncGenerator[EmbeddedStack]:
    postgres = await start_postgres(stack_dir / "pgdata", log_path=stack_dir / "postgres.log")
    server: DevServer | None = None
    stop = asyncio.Event()
    worker_task: asyncio.Task[None] | None = None
    pool: asyncpg.Pool | None = None
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
        if with_worker:
            started = asyncio.Event()
            worker_task = asyncio.create_task(
                run_worker(
                    settings,
                    client=server.client,
                    stop=stop,
                    tools=tools,
                    started=started,
                    hooks=hooks,
                )
            )
            await _until_started(worker_task, started)
        yield EmbeddedStack(
            settings=settings, client=server.client, pool=pool, ui_url=server.ui_url
        )
    finally:
        stop.set()
        if worker_task is not None:
            with suppress(Exception):
                await asyncio.wait_for(worker_task, timeout=30)
        if pool is not None:
            await pool.close()
        if server is not None:
            await server.stop()
        await asyncio.to_thread(postgres.stop)
