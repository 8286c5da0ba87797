"""Record histories of runs the Temporal UI describes: summary children, failures, members.

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only the `observe_*` histories, which
`test_replay.py` then replays with every other recorded history. They guard the runs whose
children carry static summaries and whose final details are set on completion and failure.
"""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from temporalio.client import Client

import crux
from providers.loopback import ErrorReply, LoopbackOpenAIServer, TextReply
from tests.helpers import grow_thread, new_worker, record_history, settings_for
from tests.replay.test_replay import RECORD
from vocabulary.ids import member_workflow_id, parallel_workflow_id, workflow_id_for

MODEL = "openai:gpt-4o-mini"


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_observe_histories(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = f"replay-observe:{uuid.uuid4().hex[:6]}"
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        await grow_thread(
            worker.runtime,
            thread_id,
            MODEL,
            lambda turn: (
                f"Logistics review item {turn}: carrier contracts and numbers {turn * 17}."
            ),
        )
        await worker.runtime.generate(
            crux.prompt(id="managed", use=[crux.history(recent={"messages": 4})]),
            input="What did we decide?",
            thread=thread_id,
            model=MODEL,
            input_budget={"max": 250},
            generation_id="observe-managed",
        )
        summaries = [
            execution.id
            async for execution in client.list_workflows(
                f"WorkflowType = 'SummaryWorkflow' AND CruxThreadId = '{thread_id}'"
            )
        ]
        openai_server.enqueue(ErrorReply(status=401, message="bad key"))
        with pytest.raises(crux.CruxError):
            await worker.runtime.generate(
                "fails", thread=thread_id, model=MODEL, generation_id="observe-failed"
            )
        openai_server.enqueue(TextReply(text="member answer"))
        await worker.runtime.parallel(
            id=f"observe-par-{thread_id[-6:]}",
            context={"question": "q"},
            agents={"critic": crux.prompt(id="critic", prompt=lambda i: f"c: {i['question']}")},
            threads={"critic": f"{thread_id}-critic"},
            model=MODEL,
        )
    parallel_id = parallel_workflow_id(f"observe-par-{thread_id[-6:]}")
    for name, workflow_id in (
        ("observe_inline_summary", workflow_id_for("observe-managed", thread_id)),
        ("observe_summary_workflow", summaries[0]),
        ("observe_failed", workflow_id_for("observe-failed", thread_id)),
        ("observe_parallel", parallel_id),
        ("observe_parallel_member", member_workflow_id(parallel_id, "critic")),
    ):
        await record_history(client, workflow_id, name)
