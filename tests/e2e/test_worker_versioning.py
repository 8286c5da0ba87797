"""Worker versioning: a run finishes on the build that started it; new runs take the new one.

Two builds of the worker serve one task queue under one deployment. A generation in flight
when the second build becomes current completes on the first (`PINNED`); the next
generation runs on the second. This is how a command-changing release ships.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import uuid

import asyncpg
import pytest
from temporalio.api.enums.v1 import RoutingConfigUpdateState
from temporalio.api.enums.v1 import VersioningBehavior as VersioningBehaviorProto
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError
from temporalio.testing import ActivityEnvironment

from activities.summary_join import await_running_summary
from contracts.activities import AwaitSummaryInput
from crux._worker import build_worker, deployment_config, worker_resources
from crux.models import workflow_id_for
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, TextReply
from tests.helpers import eventually, settings_for, summary_input_without_thread
from vocabulary.settings import Settings


async def _promote(client: Client, deployment: str, build_id: str) -> None:
    """Make `build_id` the deployment's current version, once its worker has polled."""

    async def attempt() -> bool:
        try:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace, deployment_name=deployment, build_id=build_id
                )
            )
            described = await client.workflow_service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(
                    namespace=client.namespace, deployment_name=deployment
                )
            )
        except RPCError:
            # The version is not registered yet (its worker has not polled), or the server
            # was too busy to answer in time: ask again.
            return False
        info = described.worker_deployment_info
        current = info.routing_config.current_deployment_version
        # The change reaches the task queues asynchronously: new runs follow it once the
        # update is complete.
        completed = info.routing_config_update_state == (
            RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED
        )
        return current.build_id == build_id and completed

    await eventually(attempt, bool, timeout=30.0, interval=0.5)


async def _pinned_build(client: Client, workflow_id: str) -> tuple[int, str]:
    described = await client.get_workflow_handle(workflow_id).describe()
    info = described.raw_description.workflow_execution_info.versioning_info
    return info.behavior, info.deployment_version.build_id


async def test_a_run_in_flight_finishes_on_its_build_and_new_runs_take_the_new_one(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    deployment = f"crux-test-{uuid.uuid4().hex[:8]}"
    task_queue = f"crux-test-{uuid.uuid4().hex[:10]}"
    base = settings_for(database_url, openai_base_url=openai_server.base_url)

    def build(build_id: str) -> Settings:
        return base.model_copy(
            update={"task_queue": task_queue, "deployment_name": deployment, "build_id": build_id}
        )

    first, second = build("build-a"), build("build-b")
    thread_id = f"versioning:{uuid.uuid4().hex[:6]}"
    # The first reply is slow: the run is in flight while the second build takes over.
    openai_server.enqueue(TextReply(text="from a", delay_seconds=4.0), TextReply(text="from b"))
    async with worker_resources(first, pool=pool) as activities_a:
        worker_a = build_worker(
            client,
            task_queue=task_queue,
            activities=activities_a,
            deployment=deployment_config(first),
        )
        async with worker_a:
            await _promote(client, deployment, "build-a")
            # As `crux.connect` builds it for versioned settings: no eager start, so every
            # new run is routed by the deployment's current version.
            runtime = Runtime.from_settings(client, pool, first)
            pending = asyncio.ensure_future(
                runtime.generate(
                    "first", thread=thread_id, model="openai:gpt-4o-mini", generation_id="g1"
                )
            )
            await eventually(lambda: _requests(openai_server), lambda n: n >= 1, timeout=20.0)
            async with worker_resources(second, pool=pool) as activities_b:
                worker_b = build_worker(
                    client,
                    task_queue=task_queue,
                    activities=activities_b,
                    deployment=deployment_config(second),
                )
                async with worker_b:
                    await _promote(client, deployment, "build-b")
                    first_turn = await pending
                    second_turn = await runtime.generate(
                        "second", thread=thread_id, model="openai:gpt-4o-mini", generation_id="g2"
                    )
    assert first_turn.text == "from a"
    assert second_turn.text == "from b"
    pinned = int(VersioningBehaviorProto.VERSIONING_BEHAVIOR_PINNED)
    assert await _pinned_build(client, workflow_id_for("g1", thread_id)) == (pinned, "build-a")
    assert await _pinned_build(client, workflow_id_for("g2", thread_id)) == (pinned, "build-b")
    # The query the docs give operators to see what still runs on a build.
    query = f'TemporalWorkerDeploymentVersion="{deployment}:build-a"'

    async def on_build_a() -> int:
        return (await client.count_workflows(query)).count

    assert await eventually(on_build_a, lambda count: count == 1) == 1


async def _requests(server: LoopbackOpenAIServer) -> int:
    return len(server.requests)


async def test_a_summary_run_started_inline_stays_on_the_starting_build(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """Like a child run inheriting its parent's build, whatever the current version is."""
    deployment = f"crux-test-{uuid.uuid4().hex[:8]}"
    task_queue = f"crux-test-{uuid.uuid4().hex[:10]}"
    base = settings_for(database_url).model_copy(
        update={"task_queue": task_queue, "deployment_name": deployment}
    )
    first = base.model_copy(update={"build_id": "build-a"})
    second = base.model_copy(update={"build_id": "build-b"})
    summary_input = summary_input_without_thread("versioning-summary")
    run_id = f"crux/summary/versioning-{uuid.uuid4().hex[:8]}"
    async with (
        worker_resources(first, pool=pool) as activities_a,
        worker_resources(second, pool=pool) as activities_b,
        build_worker(
            client,
            task_queue=task_queue,
            activities=activities_a,
            deployment=deployment_config(first),
        ),
        build_worker(
            client,
            task_queue=task_queue,
            activities=activities_b,
            deployment=deployment_config(second),
        ),
    ):
        await _promote(client, deployment, "build-b")
        start = functools.partial(
            await_running_summary,
            version=WorkerDeploymentVersion(deployment_name=deployment, build_id="build-a"),
        )
        # The preparation refuses (its Thread does not exist): what matters is where it ran.
        environment = ActivityEnvironment(client=client)
        # As the generation's activity runs it: on the task queue both builds serve.
        environment.info = dataclasses.replace(environment.info, task_queue=task_queue)
        with pytest.raises(ApplicationError):
            await environment.run(
                start, AwaitSummaryInput(workflow_id=run_id, request=summary_input, start=True)
            )
    pinned = int(VersioningBehaviorProto.VERSIONING_BEHAVIOR_PINNED)
    assert await _pinned_build(client, run_id) == (pinned, "build-a")
