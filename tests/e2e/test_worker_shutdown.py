"""A stopping `crux.Worker` lets the provider call it runs finish instead of paying for it twice.

A rolling restart stops every worker in turn. Cancelled at once, a provider attempt that was
already paid for is retried on another worker and paid for again; within the shutdown grace
(`CRUX_SHUTDOWN_GRACE_SECONDS`) it finishes, commits its turn and answers its caller, and
the next worker only closes the run.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
from temporalio.client import Client, WorkflowExecutionStatus

import crux
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, TextReply
from tests.helpers import closed_run, eventually, settings_for
from vocabulary.ids import workflow_id_for

MODEL = "openai:gpt-4o-mini"


def _settings(
    database_url: str, client: Client, server: LoopbackOpenAIServer, grace: float
) -> crux.Settings:
    return settings_for(database_url, openai_base_url=server.base_url).model_copy(
        update={
            "task_queue": f"shutdown-{uuid.uuid4().hex[:8]}",
            "temporal_address": client.service_client.config.target_host,
            "sweep_interval_seconds": 0,
            "shutdown_grace_seconds": grace,
        }
    )


async def _stop_during_the_call(
    client: Client,
    pool: asyncpg.Pool,
    settings: crux.Settings,
    server: LoopbackOpenAIServer,
    generation_id: str,
) -> tuple[Runtime, asyncio.Task[crux.Generation], str, float]:
    """Start a generation, stop its worker once the provider has the request.

    Returns:
        The runtime, the caller's task, the Thread and how long the stop took (seconds).
    """
    thread_id = f"shutdown:{uuid.uuid4().hex[:6]}"
    runtime = Runtime.from_settings(client, pool, settings)
    first = crux.Worker(settings=settings, client=client)
    await first.__aenter__()
    generation = asyncio.create_task(
        runtime.generate("Hello?", thread=thread_id, model=MODEL, generation_id=generation_id)
    )

    async def sent() -> int:
        return len(server.requests)

    await eventually(sent, lambda count: count == 1)
    loop = asyncio.get_running_loop()
    stopping = loop.time()
    await first.__aexit__(None, None, None)
    assert not first.is_running
    return runtime, generation, thread_id, loop.time() - stopping


async def test_a_stopping_worker_lets_its_provider_call_finish_and_commit(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = _settings(database_url, client, openai_server, grace=20.0)
    openai_server.enqueue(
        TextReply(text="finished while the worker stopped", delay_seconds=2.0),
        # Only a cancelled first call would reach this one.
        TextReply(text="paid for twice"),
    )
    runtime, generation, thread_id, stopped = await _stop_during_the_call(
        client, pool, settings, openai_server, "g1"
    )
    # The stop waited for the call (about 2 s), far less than the grace.
    assert 1.0 < stopped < 15.0

    # The turn was committed by the attempt itself: the caller is answered with no worker.
    result = await asyncio.wait_for(generation, timeout=30)
    assert result.text == "finished while the worker stopped"

    # The next worker only closes the run; nothing is sent to the provider again.
    async with crux.Worker(settings=settings, client=client):
        handle = await closed_run(client, workflow_id_for("g1", thread_id))
        assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    assert len(openai_server.requests) == 1
    snapshot = await crux.thread(id=thread_id, storage=pool).read()
    messages = [e for e in snapshot.entries if isinstance(e, crux.MessageEntry)]
    assert [(m.role, m.content) for m in messages] == [
        ("user", "Hello?"),
        ("assistant", "finished while the worker stopped"),
    ]
    await runtime.close()


async def test_a_zero_grace_cancels_the_call_and_the_next_worker_pays_again(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = _settings(database_url, client, openai_server, grace=0.0)
    openai_server.enqueue(
        TextReply(text="cut off by the stop", delay_seconds=5.0),
        TextReply(text="answered by the next worker"),
    )
    runtime, generation, _, stopped = await _stop_during_the_call(
        client, pool, settings, openai_server, "g2"
    )
    assert stopped < 4.0  # it did not wait for the call
    async with crux.Worker(settings=settings, client=client):
        result = await asyncio.wait_for(generation, timeout=60)
    assert result.text == "answered by the next worker"
    assert len(openai_server.requests) == 2
    await runtime.close()
