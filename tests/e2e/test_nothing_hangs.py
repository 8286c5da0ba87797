"""Nothing the caller starts hangs: no worker fails typed within seconds, `timeout=` holds.

On the real dev server and PostgreSQL, with a real worker (or none) and a loopback HTTP
provider that answers late.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta

import asyncpg
import pytest
from temporalio.client import Client, WorkflowExecutionStatus

import crux
from crux._waiting import CANCEL_GRACE_SECONDS
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import eventually, new_worker, settings_for
from vocabulary.ids import parallel_workflow_id, workflow_id_for

MODEL = "openai:gpt-4o-mini"


async def _status(client: Client, workflow_id: str) -> WorkflowExecutionStatus | None:
    return (await client.get_workflow_handle(workflow_id).describe()).status


async def _committed(pool: asyncpg.Pool, thread: str) -> int:
    try:
        snapshot = await ThreadStore(pool).read(thread)
    except crux.ThreadError:
        return 0
    return len(snapshot.entries)


async def test_no_worker_on_the_task_queue_fails_typed_within_seconds_and_stops_the_run(
    client: Client, pool: asyncpg.Pool
) -> None:
    task_queue = f"nobody-{uuid.uuid4().hex[:8]}"
    runtime = Runtime(client, pool, task_queue=task_queue)
    generation_id = f"g-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    with pytest.raises(crux.NoWorkerError) as raised:
        await runtime.generate("hello", generation_id=generation_id)
    assert time.monotonic() - started < 15
    error = raised.value
    assert error.task_queue == task_queue and error.reason == "no_worker"
    assert isinstance(error, crux.GenerationFailedError)
    message = str(error)
    assert f'"{task_queue}"' in message and "crux worker" in message and "\n" not in message
    assert f"CRUX_TASK_QUEUE={task_queue}" in message
    # The run does not wait for a worker started later: nobody waits for its answer.
    workflow_id = workflow_id_for(generation_id, None)
    assert await _status(client, workflow_id) == WorkflowExecutionStatus.TERMINATED


async def test_a_worker_that_comes_up_soon_after_the_call_answers_it(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = settings_for(database_url)
    async with new_worker(client, pool, settings) as worker:
        # A runtime of another process (no eager start): the run waits on the server.
        runtime = Runtime(client, pool, task_queue=worker.task_queue, eager_start=False)
        answer = await runtime.generate("hello", timeout=30)
    assert answer.text


async def test_timeout_cancels_the_run_and_raises_a_typed_timeout(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(TextReply(text="late", delay_seconds=30))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread = f"slow:{uuid.uuid4().hex[:6]}"
    generation_id = f"g-{uuid.uuid4().hex[:8]}"
    async with new_worker(client, pool, settings) as worker:
        started = time.monotonic()
        with pytest.raises(crux.CallTimeoutError) as raised:
            await worker.runtime.generate(
                "hello", model=MODEL, thread=thread, generation_id=generation_id, timeout=2
            )
        assert 2 <= time.monotonic() - started < 10
        workflow_id = workflow_id_for(generation_id, thread)
        assert raised.value.workflow_id == workflow_id and raised.value.timeout == 2
        assert isinstance(raised.value, TimeoutError)
        assert "2 s" in str(raised.value) and "\n" not in str(raised.value)
        # The run does not outlive the caller's timeout: it ends cancelled, nothing committed.
        await eventually(
            lambda: _status(client, workflow_id),
            lambda status: status == WorkflowExecutionStatus.CANCELED,
            timeout=20,
        )
        described = await client.get_workflow_handle(workflow_id).describe()
        config = described.raw_description.execution_config
        assert config.workflow_execution_timeout.ToTimedelta() == timedelta(
            seconds=2 + CANCEL_GRACE_SECONDS
        )
        assert await _committed(pool, thread) == 0
        # What the run staged is discarded; only the generation's identity record stays.
        kinds = await pool.fetch(
            "SELECT kind FROM crux_generation_staging WHERE thread_id = $1", thread
        )
        assert {row["kind"] for row in kinds} <= {"identity"}


async def test_a_reply_within_the_timeout_is_returned_and_the_run_has_an_execution_timeout(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        generation_id = f"g-{uuid.uuid4().hex[:8]}"
        answer = await worker.runtime.generate("hello", generation_id=generation_id, timeout=20)
        described = await client.get_workflow_handle(
            workflow_id_for(generation_id, None)
        ).describe()
    assert answer.text
    config = described.raw_description.execution_config
    assert config.workflow_execution_timeout.ToTimedelta() == timedelta(
        seconds=20 + CANCEL_GRACE_SECONDS
    )


@pytest.mark.parametrize("timeout", [0, -1, "5", True])
async def test_a_timeout_that_is_not_positive_seconds_is_refused_before_anything_starts(
    client: Client, pool: asyncpg.Pool, timeout: object
) -> None:
    runtime = Runtime(client, pool, task_queue=f"unused-{uuid.uuid4().hex[:8]}")
    with pytest.raises(crux.ConfigurationError, match="timeout="):
        await runtime.generate("hello", timeout=timeout)  # type: ignore[arg-type]


async def test_a_stream_without_a_worker_fails_typed_too(
    client: Client, pool: asyncpg.Pool
) -> None:
    runtime = Runtime(client, pool, task_queue=f"nobody-{uuid.uuid4().hex[:8]}")
    started = time.monotonic()
    with pytest.raises(crux.NoWorkerError):
        async for _ in runtime.stream("hello"):
            pass
    assert time.monotonic() - started < 15
    await asyncio.sleep(0)


async def test_a_parallel_run_without_a_worker_fails_typed_and_is_stopped(
    client: Client, pool: asyncpg.Pool
) -> None:
    task_queue = f"nobody-{uuid.uuid4().hex[:8]}"
    runtime = Runtime(client, pool, task_queue=task_queue)
    parallel_id = f"p-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    with pytest.raises(crux.NoWorkerError, match=task_queue):
        await runtime.parallel(id=parallel_id, agents={"a": "hello", "b": "hi"})
    assert time.monotonic() - started < 15
    status = await _status(client, parallel_workflow_id(parallel_id))
    assert status == WorkflowExecutionStatus.TERMINATED


async def test_a_parallel_timeout_cancels_the_run_and_its_members(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(
        TextReply(text="late", delay_seconds=30), TextReply(text="late", delay_seconds=30)
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    parallel_id = f"p-{uuid.uuid4().hex[:8]}"
    async with new_worker(client, pool, settings) as worker:
        started = time.monotonic()
        with pytest.raises(crux.CallTimeoutError):
            await worker.runtime.parallel(
                id=parallel_id, agents={"a": "hello", "b": "hi"}, model=MODEL, timeout=3
            )
        assert 3 <= time.monotonic() - started < 12
        await eventually(
            lambda: _status(client, parallel_workflow_id(parallel_id)),
            lambda status: status == WorkflowExecutionStatus.CANCELED,
            timeout=20,
        )
