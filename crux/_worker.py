"""The composition root: settings -> logging, pools, clients -> activities -> worker."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncGenerator, Iterable
from contextlib import asynccontextmanager

import asyncpg
import httpx
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities import GenerationActivities, ProviderRegistry
from crux.config import Settings
from crux.errors import CruxError
from crux.logs import get_logger
from crux.prompts import Prompt, PromptRegistry
from crux.tools import Tool, ToolRegistry
from planner import ModelCatalog
from storage import GenerationStore, ThreadStore, create_pool, migrate
from workflows import ManagedGenerationWorkflow, SummaryWorkflow

_log = get_logger(__name__)

# Provider calls may legitimately take minutes; the client-level timeout only guards
# against a connection that never answers (the activity's heartbeat covers the rest).
DEFAULT_HTTP_TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=30.0)

_PASSTHROUGH_MODULES = (
    # Deterministic, side-effect-free at import; sharing them avoids re-validating pydantic
    # schemas in every workflow sandbox.
    "pydantic",
    "pydantic_core",
    "planner",
    "crux",
    "activities",
)


async def connect_client(settings: Settings) -> Client:
    """Connect to Temporal with the pydantic data converter."""
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=pydantic_data_converter,
    )


def build_worker(
    client: Client,
    *,
    task_queue: str,
    activities: GenerationActivities,
) -> Worker:
    """Create a worker for the generation workflow and its activities."""
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[ManagedGenerationWorkflow, SummaryWorkflow],
        activities=[
            activities.read_request,
            activities.count_request,
            activities.run_tool,
            activities.prepare_summary,
            activities.invoke_model,
            activities.commit_turn,
        ],
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_modules(*_PASSTHROUGH_MODULES)
        ),
        # A domain error raised in workflow code (an unknown model, an invalid budget) can
        # never succeed on a retried task: it fails the workflow, typed, instead.
        workflow_failure_exception_types=[CruxError],
    )


@asynccontextmanager
async def worker_resources(
    settings: Settings,
    *,
    pool: asyncpg.Pool | None = None,
    prompts: Iterable[Prompt] = (),
    catalog: ModelCatalog | None = None,
    tools: Iterable[Tool] = (),
) -> AsyncGenerator[GenerationActivities]:
    """Open the pools and clients a worker needs and close them afterwards.

    Args:
        settings: Connection settings (provider keys stay on the worker).
        pool: An existing pool to use instead of opening one.
        prompts: Prompts that plain Temporal clients may name by id.
        catalog: Model capacity profiles (the default catalog when omitted).
        tools: Tools the model may call; their handlers run on this worker.
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
) -> None:
    """Run a worker until `stop` is set (or forever).

    Args:
        settings: Connection settings.
        client: A connected client; one is connected from `settings` when omitted.
        stop: Set it to shut the worker down gracefully.
        prompts: Prompts that plain Temporal clients may name by id.
        tools: Tools the model may call; their handlers run on this worker.
    """
    settings.require_database_url()
    client = client or await connect_client(settings)
    async with worker_resources(settings, prompts=prompts, tools=tools) as activities:
        worker = build_worker(client, task_queue=settings.task_queue, activities=activities)
        # Everything imported and built so far lives as long as the process; keeping it
        # out of full collections takes the collector's pauses out of read latency.
        gc.freeze()
        _log.info(
            "worker.started",
            task_queue=settings.task_queue,
            namespace=settings.temporal_namespace,
        )
        async with worker:
            await (stop or asyncio.Event()).wait()
        _log.info("worker.stopped", task_queue=settings.task_queue)
