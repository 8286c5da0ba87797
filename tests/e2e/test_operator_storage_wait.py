"""Operator control of a stage other than the commit: a read waiting for storage.

The worker's own pool is closed, so its reads fail the way an unreachable server does and
the run sits in `storage_blocked`. `retry_now` ends the pause at once (the read is tried
again, fails again, and the run waits once more, still blocked since the same moment);
`abandon` then fails the run, after which further updates are refused.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from contracts.operator import GenerationStatus
from crux import OperatorError
from crux._worker import build_worker, worker_resources
from crux.models import GenerationInput, workflow_id_for
from crux.runtime import Runtime
from storage import create_pool
from tests.helpers import eventually, settings_for


async def test_a_read_waiting_for_storage_is_retried_then_abandoned(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    task_queue = f"crux-operator-read-{uuid.uuid4().hex[:8]}"
    settings = settings_for(database_url).model_copy(update={"task_queue": task_queue})
    worker_pool = await create_pool(database_url, min_size=1, max_size=2)
    async with worker_resources(settings, pool=worker_pool) as activities:
        await worker_pool.close()
        async with build_worker(client, task_queue=task_queue, activities=activities):
            runtime = Runtime(client, pool, task_queue=task_queue)
            thread = f"op-read-{uuid.uuid4().hex[:6]}"
            handle = await client.start_workflow(
                "ManagedGenerationWorkflow",
                GenerationInput(
                    generation_id="g-read", thread_id=thread, input="x", storage_wait_seconds=20
                ),
                id=workflow_id_for("g-read", thread),
                task_queue=task_queue,
            )

            async def status() -> GenerationStatus:
                return await runtime.generation_status(handle.id)

            first = await eventually(status, lambda value: value.waiting, timeout=20)
            assert first.stage == "storage_blocked"
            assert first.blocked_since is not None
            assert first.last_error_type == "StorageUnavailableError"
            assert await runtime.retry_generation("g-read", thread=thread) == "storage_blocked"
            # The read ran again at once, failed again, and the run waits once more.
            again = await eventually(
                status,
                lambda value: value.waiting and value.details != first.details,
                timeout=20,
            )
            assert again.blocked_since == first.blocked_since
            await runtime.abandon_generation(handle.id)
            # Failed at once; its discard retries on the unreachable store (bounded), so the
            # run is ended here rather than waited for.
            ended = await eventually(status, lambda value: value.stage == "failed")
            assert not ended.waiting
            with pytest.raises(OperatorError) as late:
                await runtime.retry_generation(handle.id)
            assert late.value.code == "wrong_stage"
            history = await handle.fetch_history()
            kinds = [event.event_type for event in history.events]
            assert kinds.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED) == 2
            assert EventType.EVENT_TYPE_TIMER_CANCELED in kinds
            await handle.terminate("test over")
