"""A worker that stops mid-turn loses nothing: another worker finishes the same turn once."""

from __future__ import annotations

import uuid

import asyncpg
from temporalio.client import Client

from crux._worker import build_worker, worker_resources
from crux.models import GenerationInput, GenerationOutcome, workflow_id_for
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import eventually, settings_for


async def test_turn_survives_a_worker_stopping_during_the_provider_call(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    task_queue = f"crux-restart-{uuid.uuid4().hex[:8]}"
    settings = settings_for(database_url, openai_base_url=openai_server.base_url).model_copy(
        update={"task_queue": task_queue}
    )
    thread_id = f"restart:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        TextReply(text="lost with the first worker", delay_seconds=3.0),
        TextReply(text="answered by the second worker"),
    )
    request = GenerationInput(
        generation_id="w1", thread_id=thread_id, model="openai:gpt-4o", input="hello"
    )
    async with worker_resources(settings, pool=pool) as activities:
        first = build_worker(client, task_queue=task_queue, activities=activities)
        async with first:
            handle = await client.start_workflow(
                "ManagedGenerationWorkflow",
                request,
                id=workflow_id_for("w1", thread_id),
                task_queue=task_queue,
                result_type=GenerationOutcome,
            )

            async def requests() -> int:
                return len(openai_server.requests)

            await eventually(requests, lambda count: count == 1)
        # Leaving the block shut the first worker down while its provider call was pending.

    async with worker_resources(settings, pool=pool) as activities:
        second = build_worker(client, task_queue=task_queue, activities=activities)
        async with second:
            result = await handle.result()

    assert result.thread_commit is not None
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert [m.id for m in view.messages] == ["gen:w1:user", "gen:w1:assistant"]
    [reply] = await ThreadStore(pool).load_messages(thread_id, ["gen:w1:assistant"])
    assert reply.text == "answered by the second worker"
