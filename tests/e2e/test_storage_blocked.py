"""A stage that cannot reach PostgreSQL waits visibly, then fails typed at the ceiling."""

from __future__ import annotations

import uuid

import asyncpg
from temporalio.client import Client
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from crux._worker import build_worker, worker_resources
from crux.models import GenerationInput, GenerationOutcome, workflow_id_for
from storage import create_pool
from tests.helpers import eventually, record_history, settings_for

STAGE = SearchAttributeKey.for_keyword("CruxStage")


async def test_an_unreachable_store_is_visible_as_storage_blocked_then_fails_typed(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    task_queue = f"crux-blocked-{uuid.uuid4().hex[:8]}"
    settings = settings_for(database_url).model_copy(update={"task_queue": task_queue})
    # The worker's own pool is closed: every storage call of its activities fails the way
    # an unreachable server does, while the test's pool stays usable.
    worker_pool = await create_pool(database_url, min_size=1, max_size=2)
    async with worker_resources(settings, pool=worker_pool) as activities:
        await worker_pool.close()
        async with build_worker(client, task_queue=task_queue, activities=activities):
            thread_id = f"blocked:{uuid.uuid4().hex[:6]}"
            handle = await client.start_workflow(
                "ManagedGenerationWorkflow",
                GenerationInput(
                    generation_id="b1",
                    thread_id=thread_id,
                    input="hello",
                    storage_wait_seconds=4,
                ),
                id=workflow_id_for("b1", thread_id),
                task_queue=task_queue,
                result_type=GenerationOutcome,
                search_attributes=TypedSearchAttributes([SearchAttributePair(STAGE, "starting")]),
            )

            async def stage() -> str:
                return await handle.query("get_stage")

            await eventually(stage, lambda value: value == "storage_blocked", timeout=10)
            described = await handle.describe()
            assert described.typed_search_attributes.get(STAGE) == "storage_blocked"
            # Past the ceiling the run fails (typed StorageUnavailableError); it then spends
            # a bounded while trying to discard its staging on the same unreachable store,
            # so the stage is what this test waits for.
            await eventually(stage, lambda value: value == "failed", timeout=20)
            described = await handle.describe()
            assert described.typed_search_attributes.get(STAGE) == "failed"
            await handle.terminate("test over")
            await record_history(client, handle.id, "storage_blocked")
