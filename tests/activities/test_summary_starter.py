"""Who started an inline summary run: a retried await still counts it as its generation's.

The `crux.await_summary` activity starts the `SummaryWorkflow` of an inline preparation,
or joins the identical one already running. A try whose worker was lost after the start
is tried again, finds the run it started, and must still call it started (the turn's
receipt then names the summary inline, and the support calls as paid by this turn); another
generation finding the same run joins it.
"""

from __future__ import annotations

import dataclasses
import uuid

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities import summary_join
from contracts.activities import AwaitSummaryInput
from tests.helpers import summary_input_without_thread


def _environment(client: Client, generation_workflow_id: str, attempt: int) -> ActivityEnvironment:
    environment = ActivityEnvironment(client=client)
    environment.info = dataclasses.replace(
        ActivityEnvironment.default_info(),
        workflow_id=generation_workflow_id,
        # No worker polls it: the run only has to exist.
        task_queue=f"summary-starter-{uuid.uuid4().hex[:8]}",
        attempt=attempt,
    )
    return environment


async def test_a_retried_await_counts_the_run_it_started_and_another_generation_joins(
    client: Client,
) -> None:
    request = AwaitSummaryInput(
        workflow_id=f"crux/summary/test-{uuid.uuid4().hex[:8]}",
        request=summary_input_without_thread("starter"),
        start=True,
    )
    mine = "crux/gen/starter/g1"
    try:
        started = _environment(client, mine, attempt=1)
        assert await started.run(summary_join._started, request, None)
        retried = _environment(client, mine, attempt=2)
        assert await retried.run(summary_join._started, request, None)
        other = _environment(client, "crux/gen/starter/g2", attempt=1)
        assert not await other.run(summary_join._started, request, None)
        description = await client.get_workflow_handle(request.workflow_id).describe()
        assert await description.memo_value(summary_join.STARTED_BY_MEMO) == mine
    finally:
        await client.get_workflow_handle(request.workflow_id).terminate("test done")
