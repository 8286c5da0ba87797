"""Record histories of generations with structured output and validation retries.

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only the `v2_output_*` histories, which
`test_replay.py` then replays with every other recorded history.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from pydantic import BaseModel
from temporalio.client import Client

import crux
from crux.errors import OutputValidationError
from providers.loopback import LoopbackOpenAIServer, TextReply
from tests.helpers import new_worker, settings_for
from tests.replay.test_replay import HISTORIES, RECORD
from vocabulary.ids import workflow_id_for


class Point(BaseModel):
    x: int
    y: int


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_output_histories(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = f"replay-output:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(
        TextReply(text="not json"),
        TextReply(text='{"x": 1, "y": "two"}'),
        TextReply(text='{"x": 1, "y": 2}'),
        TextReply(text='{"x": "one"}'),
    )
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            crux.prompt(id="point", output=Point),
            input="a point",
            thread=thread_id,
            model="openai:gpt-4o-mini",
            generation_id="o1",
        )
        assert result.output == Point(x=1, y=2)
        with pytest.raises(OutputValidationError):
            await worker.runtime.generate(
                "a point",
                thread=thread_id,
                model="openai:gpt-4o-mini",
                generation_id="o2",
                output=crux.output_spec(Point, max_retries=0),
            )
    for name, generation_id in (
        ("v2_output_validation_retries", "o1"),
        ("v2_output_validation_exhausted", "o2"),
    ):
        target = HISTORIES / f"{name}.json"
        if target.exists():
            continue
        history = await client.get_workflow_handle(
            workflow_id_for(generation_id, thread_id)
        ).fetch_history()
        target.write_text(history.to_json(), encoding="utf-8")
