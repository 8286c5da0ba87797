"""Record the history of a tool round that prepares a fresh summary for its second call.

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only `summary_per_step.json`, which
`test_replay.py` then replays with every other recorded history.
"""

from __future__ import annotations

import asyncpg
import pytest
from temporalio.client import Client

from tests.e2e.test_summary_per_step import run_tool_round_on_a_moving_thread
from tests.helpers import record_history
from tests.replay.test_replay import RECORD
from vocabulary.ids import workflow_id_for


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_summary_per_step_history(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id, result, _ = await run_tool_round_on_a_moving_thread(
        client, pool, database_url, "perstep-record"
    )
    assert len(result.steps) == 2
    await record_history(client, workflow_id_for("perstep-record", thread_id), "summary_per_step")
