"""Transport retries of a sealed request are receipted: `retry_count` on receipt and inspection.

A provider that fails twice with a retryable status and then answers is retried by Temporal
with the same sealed request; the receipt of that request says so (through `Runtime` and in
the stored rows a plain client's run leaves), a first-try answer says zero, and a request
whose every try failed is receipted with its retries too.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from temporalio.client import Client, WorkflowFailureError

import crux
from crux.models import GenerationInput, GenerationOutcome, workflow_id_for
from crux.runtime import Runtime
from providers.loopback import ErrorReply, LoopbackOpenAIServer, TextReply
from tests.helpers import new_worker, settings_for

MODEL = "openai:gpt-4o-mini"


async def test_a_retried_call_is_receipted_with_its_retries(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    openai_server.enqueue(
        ErrorReply(status=429, headers={"retry-after-ms": "50"}),
        ErrorReply(status=503),
        TextReply(text="third time lucky"),
        TextReply(text="first time"),
    )
    thread_id = f"retries:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        retried = await worker.runtime.generate("hello", thread=thread_id, model=MODEL)
        first = await worker.runtime.generate("again", thread=thread_id, model=MODEL)
        inspection = await worker.runtime.inspect(retried.steps[0].request)
        stored = await Runtime(client, pool).receipt(retried.steps[0].request.id)
    assert retried.text == "third time lucky"
    assert len(retried.steps) == 1  # one sealed request, sent three times
    assert retried.steps[0].request.retry_count == 2
    assert inspection.retry_count == 2
    assert stored.retry_count == 2
    assert first.steps[0].request.retry_count == 0
    assert (await worker.runtime.inspect(first.steps[0].request)).retry_count == 0


async def test_a_plain_clients_run_leaves_the_count_in_the_stored_receipt(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    openai_server.enqueue(ErrorReply(status=503), TextReply(text="second time"))
    thread_id = f"retries:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        outcome = await client.execute_workflow(
            "ManagedGenerationWorkflow",
            GenerationInput(generation_id="g1", thread_id=thread_id, model=MODEL, input="hi"),
            id=workflow_id_for("g1", thread_id),
            task_queue=worker.task_queue,
            result_type=GenerationOutcome,
        )
    [request_id] = outcome.request_ids
    row = await pool.fetchrow(
        "SELECT receipt, inspection FROM crux_request_receipts WHERE request_id = $1",
        request_id,
    )
    assert row is not None
    assert row["receipt"]["retry_count"] == 1
    assert row["inspection"]["retry_count"] == 1


async def test_a_request_whose_every_try_failed_is_receipted_with_its_retries(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    openai_server.enqueue(*[ErrorReply(status=503) for _ in range(3)])
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises((crux.ProviderError, WorkflowFailureError)):
            await worker.runtime.generate(
                "hello",
                model=MODEL,
                generation_id="exhausted",
                attempt_policy={"max_attempts": 3, "initial_interval_seconds": 0.05},
            )
    rows = await pool.fetch("SELECT receipt, inspection FROM crux_request_receipts")
    [row] = [r for r in rows if r["inspection"] is not None]
    assert row["receipt"]["retry_count"] == 2
    assert row["inspection"]["retry_count"] == 2
