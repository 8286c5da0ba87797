"""`crux.Worker`: a Crux worker serving your prompts, tools, step hooks and models.

A worker polls one task queue for Crux's workflows and runs their activities: it reads and
commits Threads in PostgreSQL, calls the providers, and runs the tools and hooks registered
on it. Build one with your registrations and run it:

```python
worker = crux.Worker(tools=[get_weather], hooks=[review])
await worker.run()                  # until cancelled (or `stop` is set)
async with worker:                  # or: polls inside the block
    ...
worker.serve()                      # a worker script's main: until SIGINT/SIGTERM, then exit
```

`crux dev --app module:attribute` and `crux worker --app module:attribute` serve the same
object. To add Crux to a `temporalio.worker.Worker` of your own, take its plugin:
`async with worker.plugin() as plugin: Worker(client, task_queue=..., plugins=[plugin])`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import signal
import sys
from collections.abc import AsyncGenerator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import timedelta
from types import TracebackType
from typing import NoReturn, Self

import asyncpg
from temporalio.client import Client
from temporalio.worker import Worker as TemporalWorker

from activities import GenerationActivities
from crux._announce import WorkerAnnouncement
from crux._checks import (
    check_database,
    check_providers,
    connect_temporal,
    ensure_search_attributes,
    migrate_database,
)
from crux._health import readiness_file
from crux._notices import serving
from crux._worker import build_worker, deployment_config, worker_resources
from crux.hooks import StepHook, SuccessHook
from crux.plugin import CruxPlugin
from crux.prompts import Prompt
from crux.registrations import Registrations, ServedModel
from crux.safety import SafetyPolicy
from crux.tools import Tool
from planner import ModelCatalog
from storage import GenerationStore, create_pool
from telemetry import setup as telemetry_setup
from telemetry.logs import configure_logging, get_logger
from vocabulary.errors import ConfigurationError, CruxError
from vocabulary.settings import Settings

__all__ = ["Worker"]

_log = get_logger(__name__)

RUNS_CLOSING_SECONDS = 10.0
"""How long a stopping worker lets runs this process was answered for close first."""


class Worker:
    """A Crux worker with your registrations, run on a task queue of a Temporal namespace.

    Every setting not given comes from the environment when the worker starts
    (`Settings.from_env`: `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `CRUX_TASK_QUEUE`,
    `CRUX_DATABASE_URL`, provider keys, ...). Before it polls, the worker checks what would
    fail every run later (the database is migrated, the providers of `CRUX_MODEL` are usable,
    the search attributes exist) and refuses, in one line, to join a task queue where a live
    worker registers other prompts, tools, hooks or models (runs would fail at random on
    whichever worker lacks them): it publishes its registrations in PostgreSQL while it runs.

    Args:
        prompts: Prompts plain Temporal clients may name by id.
        tools: Tools the model may call; their handlers run on this worker.
        hooks: `crux.step_hook(...)` definitions generations name.
        models: Models the worker answers itself (`crux.testing.ScriptedModel`, ...).
        policies: Custom safety policies (`crux.safety.policy(...)`) generations name in
            `safety=`.
        success_hooks: `crux.success_hook(...)` definitions generations name in
            `on_success=`.
        registrations: A `crux.Registrations` (merged with the lists above).
        catalog: Model capacity profiles (the default catalog when omitted; served models'
            profiles are added).
        settings: Connection and provider settings; the environment's when omitted.
        client: A connected Temporal client to use instead of connecting from `settings`.

    Raises:
        ConfigurationError: A registration is invalid or two share a name.
    """

    def __init__(
        self,
        *,
        prompts: Iterable[Prompt] = (),
        tools: Iterable[Tool] = (),
        hooks: Iterable[StepHook] = (),
        models: Iterable[ServedModel] = (),
        policies: Iterable[SafetyPolicy] = (),
        success_hooks: Iterable[SuccessHook] = (),
        registrations: Registrations | None = None,
        catalog: ModelCatalog | None = None,
        settings: Settings | None = None,
        client: Client | None = None,
    ) -> None:
        own = Registrations(
            prompts=prompts,
            tools=tools,
            hooks=hooks,
            models=models,
            policies=policies,
            success_hooks=success_hooks,
        )
        if registrations is not None and not isinstance(registrations, Registrations):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("registrations takes a crux.Registrations(...)")
        self._registrations = registrations.merged(own) if registrations is not None else own
        self._base_catalog = catalog
        self._catalog = (catalog or ModelCatalog.default()).with_profiles(
            *(model.profile for model in self._registrations.models)
        )
        if settings is not None and not isinstance(settings, Settings):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("settings takes a crux.Settings (Settings.from_env(...))")
        self._settings = settings
        self._client = client
        self._running: AsyncExitStack | None = None
        self._temporal: TemporalWorker | None = None
        self._resolved: Settings | None = None

    @property
    def registrations(self) -> Registrations:
        """What this worker registers."""
        return self._registrations

    @property
    def catalog(self) -> ModelCatalog:
        """The model profiles it plans with (served models' included)."""
        return self._catalog

    @property
    def settings(self) -> Settings | None:
        """The settings given at construction (`None`: the environment's, at start)."""
        return self._settings

    @property
    def task_queue(self) -> str | None:
        """The task queue it polls, once started."""
        return self._resolved.task_queue if self._resolved else None

    @property
    def is_running(self) -> bool:
        """Whether it polls now."""
        return self._temporal is not None and self._temporal.is_running

    def replace(self, *, settings: Settings | None = None, client: Client | None = None) -> Worker:
        """A worker with the same registrations and catalog, and other settings or client.

        `crux dev --app` and the `crux.testing` fixtures use it to point your worker at their
        servers and task queues.

        Args:
            settings: The settings of the copy (this worker's when omitted).
            client: The Temporal client of the copy (this worker's when omitted).
        """
        return Worker(
            registrations=self._registrations,
            catalog=self._base_catalog,
            settings=settings or self._settings,
            client=client or self._client,
        )

    async def run(self, *, stop: asyncio.Event | None = None) -> None:
        """Start, then poll until `stop` is set (or the task is cancelled), then stop.

        Raises:
            StartupCheckError: A start-up check failed (the message names the remedy).
            RegistrationConflictError: A live worker on the task queue registers something
                else.
        """
        async with self:
            await (stop or asyncio.Event()).wait()

    async def __aenter__(self) -> Self:
        """Start: run the checks, connect, publish the registrations and poll."""
        if self._running is not None:
            raise ConfigurationError("this worker is already running")
        stack = AsyncExitStack()
        try:
            await stack.enter_async_context(self._serving())
        except BaseException:
            await stack.aclose()
            raise
        self._running = stack
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Stop polling, let running activities finish, withdraw and close everything.

        Activities still running after `Settings.shutdown_grace_seconds` are cancelled.
        """
        stack, self._running = self._running, None
        if stack is not None:
            await stack.__aexit__(exc_type, exc, traceback)

    @asynccontextmanager
    async def plugin(self) -> AsyncGenerator[CruxPlugin]:
        """The `CruxPlugin` of this worker, for a `temporalio.worker.Worker` of your own.

        Runs the start-up checks and opens the pools and clients the activities need (closed
        when the block ends). The plugin adds Crux's workflows, activities, converter and
        sandbox settings to your worker, and publishes the registrations for the worker's
        task queue while it runs (refusing to run beside a worker that registers others).

        ```python
        async with crux.Worker(tools=[get_weather]).plugin() as plugin:
            worker = temporalio.worker.Worker(
                client, task_queue="crux", workflows=[MyWorkflow], plugins=[plugin]
            )
            await worker.run()
        ```
        """
        settings = await self._checked_settings()
        async with self._resources(settings) as (pool, activities):
            yield CruxPlugin(activities, announcement=WorkerAnnouncement(pool, self._registrations))

    def serve(self) -> NoReturn:
        """Run until SIGINT or SIGTERM, then exit the process: a worker script's main.

        Logging is configured from the settings (`CRUX_LOG_FORMAT`, `CRUX_LOG_LEVEL`). A
        failed start-up check prints one line and exits with code 1; a signal exits 0.
        """
        code = serve_until_signalled(self, prefix="crux worker")
        sys.stdout.flush()
        sys.stderr.flush()
        # Skip interpreter finalisation: the Temporal runtime's threads can abort a process
        # that exits right after a failed start.
        os._exit(code)

    def resolved_settings(self) -> Settings:
        """The settings it runs with: those given, else the environment's."""
        return self._settings or Settings.from_env(os.environ)

    async def _checked_settings(self) -> Settings:
        # Fail fast, one line each, before accepting any work: a worker that starts against
        # an unmigrated schema or without its search attributes would fail every turn later.
        settings = self.resolved_settings()
        database_url = settings.require_database_url()
        check_providers(settings)
        if settings.migrate_on_start:
            await migrate_database(database_url)
        await check_database(database_url)
        return settings

    @asynccontextmanager
    async def _resources(
        self, settings: Settings
    ) -> AsyncGenerator[tuple[asyncpg.Pool, GenerationActivities]]:
        pool = await create_pool(settings.require_database_url())
        try:
            async with worker_resources(
                settings, pool=pool, registrations=self._registrations, catalog=self._base_catalog
            ) as activities:
                yield pool, activities
        finally:
            await pool.close()

    @asynccontextmanager
    async def _serving(self) -> AsyncGenerator[None]:
        settings = await self._checked_settings()
        if settings.otel_endpoint and not telemetry_setup.enabled():
            # Before connecting, so the client traces its calls too.
            telemetry_setup.configure_otlp(settings.otel_endpoint)
        runtime = None
        if settings.prometheus_address:
            # Only a worker binds the endpoint (CLI commands sharing its environment do not).
            runtime = telemetry_setup.serve_prometheus(settings.prometheus_address)
        client = self._client or await connect_temporal(settings, runtime=runtime)
        await ensure_search_attributes(client, settings)
        deployment = deployment_config(settings)
        async with self._resources(settings) as (pool, activities):
            announcement = WorkerAnnouncement(pool, self._registrations)
            announcement.bind(
                namespace=client.namespace,
                task_queue=settings.task_queue,
                identity=client.identity,
                build_id=deployment.version.build_id if deployment else "",
            )
            # Refused here, in one line, before a poller is built; the plugin keeps the
            # heartbeat while the worker runs.
            await announcement.join()
            try:
                worker = build_worker(
                    client,
                    task_queue=settings.task_queue,
                    activities=activities,
                    deployment=deployment,
                    announcement=announcement,
                    shutdown_grace=timedelta(seconds=settings.shutdown_grace_seconds),
                )
            except BaseException:
                await announcement.leave()
                raise
            sweeper = asyncio.create_task(_sweep_periodically(activities.generations, settings))
            # Everything imported and built so far lives as long as the process; keeping it
            # out of full collections takes the collector's pauses out of read latency.
            gc.freeze()
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
                    # Entering starts the poller in a task (after a namespace check): the
                    # block begins once it polls, so `is_running` holds inside it.
                    await _started(worker)
                    self._temporal, self._resolved = worker, settings
                    _log.info(
                        "worker.started",
                        task_queue=settings.task_queue,
                        namespace=settings.temporal_namespace,
                        **{kind: len(names) for kind, names in self._registrations.names().items()},
                    )
                    async with serving(RUNS_CLOSING_SECONDS):
                        yield
            finally:
                self._temporal = None
                await announcement.leave()
                sweeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sweeper
                # Flush what the OTLP exporters still hold (a no-op unless built here).
                telemetry_setup.shutdown()
                _log.info("worker.stopped", task_queue=settings.task_queue)


def serve_until_signalled(worker: Worker, *, prefix: str) -> int:
    """Run `worker` until SIGINT or SIGTERM; return the exit code (the CLI's `crux worker`).

    Args:
        worker: The worker to run.
        prefix: What the one-line error message starts with.

    Returns:
        0 after a signal, 1 after a failed start-up (the line printed names the remedy),
        130 when interrupted before the signal handlers were installed.
    """
    try:
        settings = worker.resolved_settings()
        configure_logging(log_format=settings.log_format, level=settings.log_level)
        asyncio.run(_run_until_signalled(worker.replace(settings=settings)))
    except CruxError as error:
        print(f"{prefix}: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


async def _run_until_signalled(worker: Worker) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await worker.run(stop=stop)


async def _started(worker: TemporalWorker, *, timeout_seconds: float = 30.0) -> None:
    """Wait until `worker` polls (or stopped: its error is raised when the block exits)."""
    deadline = asyncio.get_running_loop().time() + timeout_seconds
    while not (worker.is_running or worker.is_shutdown):
        if asyncio.get_running_loop().time() > deadline:
            break
        await asyncio.sleep(0.01)


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
