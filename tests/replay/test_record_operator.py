"""Record histories of runs steered by an operator: `retry_now` and `abandon` updates.

Skipped unless `CRUX_RECORD_HISTORIES=1`; writes only the `v2_operator_*` histories (each
with an update accepted during a commit's storage wait), which `test_replay.py` then
replays with every other recorded history.
"""

from __future__ import annotations

import pytest
from temporalio.client import Client

from tests.e2e.test_operator_control import (
    Stack,
    abandon_scenario,
    dedicated_postgres,  # noqa: F401  (fixture)
    retry_now_scenario,
    stack,  # noqa: F401  (fixture)
)
from tests.replay.test_replay import HISTORIES, RECORD


async def _keep(client: Client, workflow_id: str, name: str) -> None:
    target = HISTORIES / f"{name}.json"
    if target.exists():
        return
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    target.write_text(history.to_json(), encoding="utf-8")


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_operator_retry_now_history(client: Client, stack: Stack) -> None:  # noqa: F811
    await _keep(client, await retry_now_scenario(client, stack), "v2_operator_retry_now")


@pytest.mark.skipif(not RECORD, reason="set CRUX_RECORD_HISTORIES=1 to record new histories")
async def test_record_operator_abandon_history(client: Client, stack: Stack) -> None:  # noqa: F811
    await _keep(client, await abandon_scenario(client, stack), "v2_operator_abandon")
