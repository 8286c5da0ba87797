"""Record histories of the parallel path for the replay suite (`CRUX_RECORD_HISTORIES=1`).

Writes only `parallel_*.json`, and never over a file that exists: histories recorded by
earlier versions prove compatibility. `test_replay.py` replays every recorded file.
"""

from __future__ import annotations

import asyncio
import os
import uuid

import asyncpg
import pytest
from temporalio.client import Client

import crux
from providers.loopback import (
    CountReply,
    ErrorReply,
    LoopbackOpenAIServer,
    RecordedRequest,
    TextReply,
)
from providers.loopback._replies import Reply
from providers.loopback._shared import input_tokens_of
from tests.helpers import eventually, new_worker, record_history, settings_for
from vocabulary.ids import parallel_member_workflow_id, parallel_workflow_id

RECORD = os.environ.get("CRUX_RECORD_HISTORIES") == "1"
MODEL = "openai:gpt-4o-mini"


def _respond(request: RecordedRequest) -> Reply:
    if not request.path.endswith("/chat/completions"):
        return CountReply(input_tokens=input_tokens_of(request.body))
    if "refused" in str(request.body):
        return ErrorReply(status=400, message="refused")
    if "slow" in str(request.body):
        return TextReply(text="late", delay_seconds=20.0)
    return TextReply(text="an answer")


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_parallel_histories(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    suffix = uuid.uuid4().hex[:6]
    async with LoopbackOpenAIServer(responder=_respond) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:
            parallel_id = f"replay-parallel-{suffix}"
            run = await worker.runtime.parallel(
                id=parallel_id,
                context="question",
                agents={
                    "answers": crux.prompt(id="answers", prompt=lambda i: f"answer {i}"),
                    "refuses": crux.prompt(id="refuses", prompt=lambda i: f"refused {i}"),
                },
                threads={"answers": f"a:{suffix}", "refuses": f"b:{suffix}"},
                model=MODEL,
            )
            assert set(run.errors) == {"refuses"}
            await record_history(
                client, parallel_workflow_id(parallel_id), "parallel_one_member_failed"
            )
            await record_history(
                client,
                parallel_member_workflow_id(parallel_id, "answers"),
                "parallel_member_committed",
            )
            cancelled_id = f"replay-parallel-cancel-{suffix}"
            call = asyncio.ensure_future(
                worker.runtime.parallel(
                    id=cancelled_id,
                    context="question",
                    agents={"slow": crux.prompt(id="slow", prompt=lambda i: f"slow {i}")},
                    thread=f"c:{suffix}",
                    model=MODEL,
                )
            )

            async def requests() -> int:
                return sum(
                    1
                    for r in server.requests
                    if r.path.endswith("/chat/completions") and "slow" in str(r.body)
                )

            await eventually(requests, lambda n: n >= 1)
            await client.get_workflow_handle(parallel_workflow_id(cancelled_id)).cancel()
            with pytest.raises(crux.GenerationFailedError):
                await call
            await record_history(client, parallel_workflow_id(cancelled_id), "parallel_cancelled")
