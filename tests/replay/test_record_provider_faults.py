"""Record histories of generations that meet provider faults.

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only the `provider_faults_*` histories,
which `test_replay.py` then replays with every other recorded history: an attempt that
outlives its timeout on every try (the run fails as `ProviderTimeoutError`), and a streamed
call cut mid-event, then answered.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from temporalio.client import Client

import crux
from providers.loopback import HangReply, LoopbackOpenAIServer, ResetReply, TextReply
from tests.helpers import new_worker, record_history, settings_for
from tests.replay.test_replay import RECORD
from vocabulary.ids import workflow_id_for

POLICY = {
    "max_attempts": 2,
    "initial_interval_seconds": 0.1,
    "max_interval_seconds": 0.1,
    "timeout_seconds": 3,
}


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_provider_fault_histories(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = f"replay-faults:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        HangReply(),
        HangReply(),
        ResetReply(
            reply=TextReply(text="words that never finish arriving"),
            after_bytes=500,
            piece_delay_seconds=0.03,
        ),
        TextReply(text="streamed after the cut"),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(crux.ProviderTimeoutError):
            await worker.runtime.generate(
                "hello",
                thread=thread_id,
                model="openai:gpt-4o-mini",
                generation_id="f1",
                attempt_policy=POLICY,
            )
        updates = [
            update
            async for update in worker.runtime.stream(
                "hello again",
                thread=thread_id,
                model="openai:gpt-4o-mini",
                generation_id="f2",
                attempt_policy=POLICY,
            )
        ]
    assert isinstance(updates[-1], crux.StreamCommitted)
    for name, generation_id in (
        ("provider_faults_attempt_timeout", "f1"),
        ("provider_faults_stream_cut", "f2"),
    ):
        await record_history(client, workflow_id_for(generation_id, thread_id), name)
