"""Record histories of hostile starts: refused late, no or two arguments, NaN, too many values.

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only the `hostile_*` histories, which
`test_replay.py` then replays with every other recorded history.
"""

from __future__ import annotations

import asyncpg
import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import RawValue

from tests.helpers import new_worker, record_history, settings_for
from tests.replay.test_replay import RECORD
from vocabulary.ids import workflow_id_for


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_hostile_histories(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    starts = {
        # Valid JSON, refused by the worker after it claimed the id: the discard releases it.
        "hostile_refused_after_read": [{"generation_id": "h1", "thread_id": "hostile"}],
        "hostile_no_argument": [],
        "hostile_two_arguments": [{"generation_id": "h3"}, {"generation_id": "h4"}],
        "hostile_too_many_values": [{"generation_id": "h6", "tools": [0] * 100_000}],
        # Written by the SDK's default converter as a bare NaN literal.
        "hostile_non_finite": [
            RawValue(
                Payload(
                    metadata={"encoding": b"json/plain"},
                    data=b'{"generation_id":"h5","input":{"message":"hi","x":NaN}}',
                )
            )
        ],
    }
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        for name, args in starts.items():
            workflow_id = f"crux/gen/hostile/{name}"
            if name == "hostile_refused_after_read":
                # A valid input, refused by the worker: under its documented id.
                workflow_id = workflow_id_for("h1", "hostile")
            handle = await client.start_workflow(
                "ManagedGenerationWorkflow", args=args, id=workflow_id, task_queue=worker.task_queue
            )
            with pytest.raises(WorkflowFailureError):
                await handle.result()
            await record_history(client, workflow_id, name)
