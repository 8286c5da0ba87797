"""The latency anchor of a durable turn: a workflow that runs three no-op activities.

It pays exactly what Temporal costs for three sequential activities on the same worker and
dev server (scheduling, dispatch, completion, workflow tasks) and nothing of our own, so a
managed turn measured next to it in the same run shows what our stages add.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow

NOOP_WORKFLOW = "BenchNoopThreeActivities"


@activity.defn(name="bench.noop")
async def noop_activity(value: int) -> int:
    """Return the input unchanged."""
    return value


@workflow.defn(name=NOOP_WORKFLOW)
class NoopThreeActivities:
    """Three sequential no-op activities, as a plain turn has read, invoke and commit."""

    @workflow.run
    async def run(self, value: int) -> int:
        """Run the three activities and return the last result."""
        for _ in range(3):
            value = await workflow.execute_activity(
                noop_activity, value, start_to_close_timeout=timedelta(seconds=30)
            )
        return value
