"""The composition helpers of a worker: client, versioning, pools and clients -> activities.

`crux.Worker` is the public composition root built from these; the test suite composes
workers from them directly (a fresh task queue per test, pools of its own).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.runtime import Runtime
from temporalio.worker import Worker, WorkerDeploymentConfig

from activities import GenerationActivities, ProviderRegistry
from crux._announce import WorkerAnnouncement
from crux._checks import connect_temporal
from crux.hooks import HookRegistry, StepHook, SuccessHook, SuccessHookRegistry
from crux.plugin import CruxPlugin
from crux.prompts import Prompt, PromptRegistry
from crux.registrations import Registrations, ServedModel
from crux.safety import PolicyRegistry, SafetyPolicy
from crux.tools import Tool, ToolRegistry
from planner import ModelCatalog
from storage import GenerationStore, ThreadStore, create_pool, migrate
from telemetry.logs import get_logger
from vocabulary.settings import Settings
from workflows.versioning import VERSIONING_BEHAVIOR, default_build_id

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
    announcement: WorkerAnnouncement | None = None,
    shutdown_grace: timedelta | None = None,
) -> Worker:
    """Create a worker for the Crux workflows and their activities (`CruxPlugin`).

    Args:
        client: The connected Temporal client.
        task_queue: The task queue to poll.
        activities: The generation activities, bound to their pools and clients.
        extra_workflows: More workflows served by the same worker (benchmark anchors).
        extra_activities: More activities served by the same worker.
        deployment: Worker versioning (see `deployment_config`); unversioned when `None`.
        announcement: Publish the registrations and refuse a task queue served with other
            ones (see `CruxPlugin`); no check when `None`.
        shutdown_grace: How long a stopping worker lets its running activities finish
            before cancelling them (`Settings.shutdown_grace_seconds`); the SDK's default,
            none, when `None`.
    """
    return Worker(
        client,
        task_queue=task_queue,
        workflows=list(extra_workflows),
        activities=list(extra_activities),
        plugins=[CruxPlugin(activities, announcement=announcement)],
        deployment_config=deployment,
        graceful_shutdown_timeout=shutdown_grace or timedelta(),
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
    models: Iterable[ServedModel] = (),
    policies: Iterable[SafetyPolicy] = (),
    success_hooks: Iterable[SuccessHook] = (),
    registrations: Registrations | None = None,
) -> AsyncGenerator[GenerationActivities]:
    """Open the pools and clients a worker needs and close them afterwards.

    Args:
        settings: Connection settings (provider keys stay on the worker).
        pool: An existing pool to use instead of opening one.
        prompts: Prompts that plain Temporal clients may name by id.
        catalog: Model capacity profiles (the default catalog when omitted; the served
            models' profiles are added).
        tools: Tools the model may call; their handlers run on this worker.
        hooks: `prepare_step` / `prepare_invocation` hooks generations may name.
        models: Models the worker answers itself (`crux.testing`).
        policies: Custom safety policies (`crux.safety.policy(...)`) generations may name.
        success_hooks: Success hooks (`crux.success_hook(...)`) generations may name.
        registrations: All of the above in one object (merged with the lists).
    """
    served = Registrations(
        prompts=prompts,
        tools=tools,
        hooks=hooks,
        models=models,
        policies=policies,
        success_hooks=success_hooks,
    )
    if registrations is not None:
        served = registrations.merged(served)
    catalog = (catalog or ModelCatalog.default()).with_profiles(
        *(model.profile for model in served.models)
    )
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
            providers=ProviderRegistry(
                settings, http, models={model.id: model.provider() for model in served.models}
            ),
            prompts=PromptRegistry(served.prompts),
            catalog=catalog,
            tools=ToolRegistry(served.tools),
            hooks=HookRegistry(served.hooks),
            policies=PolicyRegistry(served.policies).functions(),
            success_hooks=SuccessHookRegistry(served.success_hooks),
            version=deployment.version if (deployment := deployment_config(settings)) else None,
        )
    finally:
        await http.aclose()
        if own_pool:
            await pool.close()
