"""A first user's mistakes fail at once with the remedy named, not an exception class.

Unknown models (`offline:nonexistent` does not answer as echo), a hosted model without its
key named in one call (refused before any request), a prompt input missing a key: through
`Runtime` and through a plain Temporal client, on the real dev server and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import ActivityError, ApplicationError

import crux
from tests.helpers import RunningWorker, new_worker, settings_for
from vocabulary.details import decode_details
from vocabulary.ids import workflow_id_for

WEATHER = crux.prompt(id="weather", prompt=lambda x: f"Weather in {x['city']}?")


@pytest.fixture
async def worker(client: Client, pool: asyncpg.Pool, database_url: str) -> Any:
    # No provider URL and no keys: OpenAI and Anthropic are the hosted APIs.
    async with new_worker(client, pool, settings_for(database_url), prompts=[WEATHER]) as running:
        yield running


def _cause(failure: WorkflowFailureError) -> ApplicationError:
    cause = failure.cause
    if isinstance(cause, ActivityError):
        cause = cause.cause
    assert isinstance(cause, ApplicationError)
    return cause


async def _staged_rows(pool: asyncpg.Pool, thread_id: str) -> int:
    return await pool.fetchval(
        "SELECT count(*) FROM crux_generation_staging WHERE thread_id = $1", thread_id
    )


@pytest.mark.parametrize(
    "model", ["offline:nonexistent", "vllm:llama", "gpt-4o", "openai:", ":echo"]
)
async def test_an_unknown_model_is_refused_before_anything_starts_listing_the_known_ones(
    worker: RunningWorker, pool: asyncpg.Pool, model: str
) -> None:
    thread = f"unknown-model:{uuid.uuid4().hex[:6]}"
    with pytest.raises(crux.ConfigurationError) as raised:
        await worker.runtime.generate("hello", thread=thread, model=model)
    message = str(raised.value)
    assert raised.value.code == "unknown_model"
    assert "\n" not in message and "Error" not in message
    assert "offline (echo" in message and "openai (gpt-4o" in message and "anthropic (" in message
    assert await _staged_rows(pool, thread) == 0


async def test_a_plain_client_naming_an_unknown_offline_model_fails_typed_not_as_echo(
    client: Client, worker: RunningWorker
) -> None:
    generation_id = f"unknown-model-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        "ManagedGenerationWorkflow",
        {"generation_id": generation_id, "model": "offline:nonexistent", "input": "hello"},
        id=workflow_id_for(generation_id, None),
        task_queue=worker.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as raised:
        await asyncio.wait_for(handle.result(), timeout=20)
    cause = _cause(raised.value)
    assert cause.type == "ConfigurationError" and cause.non_retryable
    assert "offline (echo" in str(cause.message)
    assert decode_details(cause.details).code == "unknown_model"


@pytest.mark.parametrize(
    ("model", "variable"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ],
)
async def test_a_hosted_model_without_its_key_named_in_one_call_says_so_without_a_request(
    worker: RunningWorker, model: str, variable: str
) -> None:
    started = time.monotonic()
    with pytest.raises(crux.ConfigurationError) as raised:
        await worker.runtime.generate("hello", model=model)
    message = str(raised.value)
    assert raised.value.code == "missing_api_key"
    assert variable in message and "BASE_URL" in message and "\n" not in message
    # Refused by the worker before the first request: no retries, no connection timeout.
    assert time.monotonic() - started < 15


async def test_a_prompt_input_missing_a_key_names_the_prompt_and_the_key(
    worker: RunningWorker, pool: asyncpg.Pool
) -> None:
    thread = f"missing-key:{uuid.uuid4().hex[:6]}"
    with pytest.raises(crux.ConfigurationError) as raised:
        await worker.runtime.generate(WEATHER, input={"town": "Oslo"}, thread=thread)
    assert raised.value.code == "input_missing"
    assert str(raised.value) == 'prompt "weather" needs input key "city"; pass it in input='
    assert not isinstance(raised.value, KeyError)
    assert await _staged_rows(pool, thread) == 0


async def test_a_registered_prompt_rendered_by_the_worker_names_the_missing_key(
    client: Client, worker: RunningWorker
) -> None:
    generation_id = f"missing-key-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        "ManagedGenerationWorkflow",
        {"generation_id": generation_id, "prompt_id": "weather", "input": {"town": "Oslo"}},
        id=workflow_id_for(generation_id, None),
        task_queue=worker.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as raised:
        await asyncio.wait_for(handle.result(), timeout=20)
    cause = _cause(raised.value)
    assert cause.type == "ConfigurationError" and cause.non_retryable
    assert '"city"' in str(cause.message) and "Oslo" not in str(cause.message)
    assert decode_details(cause.details).code == "input_missing"
