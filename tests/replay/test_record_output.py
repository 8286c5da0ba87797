"""Record histories of structured-output generations (validation retries, exhausted retries).

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only the `output_*` histories, which
`test_replay.py` then replays with every other recorded history.
"""

from __future__ import annotations

import json
import uuid

import asyncpg
import pytest
from pydantic import BaseModel
from temporalio.client import Client

import crux
from providers.loopback import LoopbackOpenAIServer, TextReply
from tests.helpers import new_worker, record_history, settings_for
from tests.replay.test_replay import RECORD
from vocabulary.ids import workflow_id_for


class Answer(BaseModel):
    """A structured answer."""

    value: int


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_output_histories(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = f"replay-output:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        TextReply(text="not json"),
        TextReply(text=json.dumps({"value": 3})),
        TextReply(text=json.dumps({"value": "x"})),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        await worker.runtime.generate(
            "answer",
            thread=thread_id,
            model="openai:gpt-4o-mini",
            generation_id="o1",
            output=Answer,
        )
        with pytest.raises(crux.OutputValidationError):
            await worker.runtime.generate(
                "answer",
                thread=thread_id,
                model="openai:gpt-4o-mini",
                generation_id="o2",
                output=crux.output(Answer, max_retries=0),
            )
    for name, generation_id in (
        ("output_validation_retry", "o1"),
        ("output_retries_exhausted", "o2"),
    ):
        await record_history(client, workflow_id_for(generation_id, thread_id), name)
