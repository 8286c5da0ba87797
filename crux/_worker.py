"""The composition root: settings -> logging, pools, clients -> activities -> worker."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.runtime import Runtime
from temporalio.worker import Worker, WorkerDeploymentConfig

from activities import GenerationActivities, ProviderRegistry
from crux._checks import (
    check_database,
    check_providers,
    connect_temporal,
    ensure_search_attributes,
    migrate_database,
)
from crux._health import readiness_file
from crux.hooks import HookRegistry, StepHook
from crux.plugin import CruxPlugin
from crux.prompts import Prompt, PromptRegistry
from crux.tools import Tool, ToolRegistry
from planner import ModelCatalog
from storage import GenerationStore, ThreadStore, create_pool, migrate
from telemetry import setup as telemetry_setup
from telemetry.logs import get_logger
from vocabulary.settings import Settings
from workflows import VERSIONING_BEHAVIOR, default_build_id

_log = get_logger(__name__)

# Provider calls may legitimately take minutes; the client-level timeout only guards
# against a connection that never answers (the activity's heartbeat covers the rest).
DEFAULT_HTTP_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=30.0)


async def connect_client(settings: Settings, *, runtime: Runtime | None = None) -> Client:
    """Connect to Temporal with the pydantic data converter.

    Args:
        settings: Address and namespace.
        runtime: The Temporal runtime; the default one when omitted.

    Raises:
        StartupCheckError: Temporal is unreachable (the message names TEMPORAL_ADDRESS).
    """
    return await connect_temporal(settings, runtime=runtime)


def deployment_config(settings: Settings) -> WorkerDeploymentConfig | None:
    """Worker versioning for `settings.deployment_name` (`None`: an unversioned worker)."""
    if not settings.deployment_name:
        return None
    return WorkerDeploymentConfig(
        version=WorkerDeploymentVersion(
            deployment_name=settings.deployment_name,
            build_id=settings.build_id or default_build_id(),
        ),
        use_worker_versioning=True,
        default_versioning_behavior=VERSIONING_BEHAVIOR,
    )


def build_worker(
    client: Client,
    *,
    task_queue: str,
    activities: GenerationActivities,
    extra_workflows: Sequence[type] = (),
    extra_activities: Sequence[Callable[..., Any]] = (),
    deployment: WorkerDeploymentConfig | None = None,
) -> Worker:
    """Create a worker for the Crux workflows and their activities (`CruxPlugin`).

    Args:
        client: The connected Temporal client.
        task_queue: The task queue to poll.
        activities: The generation activities, bound to their pools and clients.
        extra_workflows: More workflows served by the same worker (benchmark anchors).
        extra_activities: More activities served by the same worker.
        deployment: Worker versioning (see `deployment_config`); unversioned when `None`.
    """
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(extra_workflows),
        activities=list(extra_activities),
        plugins=[CruxPlugin(activities)],
        deployment_config=deployment,
    )


@asynccontextmanager
async def worker_resources(
    settings: Settings,
    *,
    pool: asyncpg.Pool | None = None,
    prompts: Iterable[Prompt] = (),
    catalog: ModelCatalog | None = None,
    tools: Iterable[Tool] = (),
    hooks: Iterable[StepHook] = (),
) -> AsyncGenerator[GenerationActivities]:
    """Open the pools and clients a worker needs and close them afterwards.

    Args:
        settings: Connection settings (provider keys stay on the worker).
        pool: An existing pool to use instead of opening one.
        prompts: Prompts that plain Temporal clients may name by id.
        catalog: Model capacity profiles (the default catalog when omitted).
        tools: Tools the model may call; their handlers run on this worker.
        hooks: `prepare_step` / `prepare_invocation` hooks generations may name.
    """
    own_pool = pool is None
    if pool is None:
        pool = await create_pool(settings.require_database_url())
    if settings.migrate_on_start:
        async with pool.acquire() as connection:
            applied = await migrate(connection)
        _log.info("storage.migrated", applied=len(applied))
    http = httpx.AsyncClient(timeout=DEFAULT_HTTP_TIMEOUT)
    try:
        yield GenerationActivities(
            threads=ThreadStore(pool),
            generations=GenerationStore(pool),
            providers=ProviderRegistry(settings, http),
            prompts=PromptRegistry(prompts),
            catalog=catalog or ModelCatalog.default(),
            tools=ToolRegistry(tools),
            hooks=HookRegistry(hooks),
        )
    finally:
        await http.aclose()
        if own_pool:
            await pool.close()


async def run_worker(
    settings: Settings,
    *,
    client: Client | None = None,
    stop: asyncio.Event | None = None,
    prompts: Iterable[Prompt] = (),
    tools: Iterable[Tool] = (),
    started: asyncio.Event | None = None,
    hooks: Iterable[StepHook] = (),
) -> None:
    """Run a worker until `stop` is set (or forever).

    Args:
        settings: Connection settings.
        client: A connected client; one is connected from `settings` when omitted.
        stop: Set it to shut the worker down gracefully.
        prompts: Prompts that plain Temporal clients may name by id.
        tools: Tools the model may call; their handlers run on this worker.
        started: Set once the start-up checks passed and the worker polls.
        hooks: `prepare_step` / `prepare_invocation` hooks generations may name.

    Raises:
        StartupCheckError: A start-up check failed (the message names the remedy).
    """
    # Fail fast, one line each, before accepting any work: a worker that starts against
    # an unmigrated schema or without its search attributes would fail every turn later.
    database_url = settings.require_database_url()
    check_providers(settings)
    if settings.migrate_on_start:
        await migrate_database(database_url)
    await check_database(database_url)
    if settings.otel_endpoint and not telemetry_setup.enabled():
        # Before connecting, so the client traces its calls too.
        telemetry_setup.configure_otlp(settings.otel_endpoint)
    runtime = None
    if settings.prometheus_address:
        # Only a worker binds the endpoint (CLI commands sharing its environment do not).
        runtime = telemetry_setup.serve_prometheus(settings.prometheus_address)
    client = client or await connect_client(settings, runtime=runtime)
    await ensure_search_attributes(client, settings)
    async with worker_resources(settings, prompts=prompts, tools=tools, hooks=hooks) as activities:
        worker = build_worker(
            client,
            task_queue=settings.task_queue,
            activities=activities,
            deployment=deployment_config(settings),
        )
        sweeper = asyncio.create_task(_sweep_periodically(activities.generations, settings))
        # Everything imported and built so far lives as long as the process; keeping it
        # out of full collections takes the collector's pauses out of read latency.
        gc.freeze()
        _log.info(
            "worker.started",
            task_queue=settings.task_queue,
            namespace=settings.temporal_namespace,
        )
        try:
            # The readiness file (CRUX_HEALTH_FILE) exists only while the worker polls.
            async with (
                worker,
                readiness_file(
                    settings.health_file,
                    lambda: worker.is_running,
                    task_queue=settings.task_queue,
                    namespace=settings.temporal_namespace,
                ),
            ):
                if started is not None:
                    started.set()
                await (stop or asyncio.Event()).wait()
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            # Flush what the OTLP exporters still hold (a no-op unless they were built here).
            telemetry_setup.shutdown()
        _log.info("worker.stopped", task_queue=settings.task_queue)


async def _sweep_periodically(generations: GenerationStore, settings: Settings) -> None:
    """Remove orphaned staging older than the retention, every `sweep_interval_seconds`."""
    if settings.sweep_interval_seconds <= 0:
        return
    while True:
        try:
            deleted = await generations.sweep_orphans(settings.staging_retention_seconds)
            _log.info("generation.staging.swept", rows=deleted)
        except Exception as error:  # a failed sweep must never stop the worker
            # Storage may be away for a while; the next round catches up.
            _log.warning("generation.staging.sweep_failed", error=type(error).__name__)
        await asyncio.sleep(settings.sweep_interval_seconds)
