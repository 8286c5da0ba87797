"""The latency anchor of a durable turn: a workflow that runs three no-op activities.

It pays exactly what Temporal costs for three sequential activities (scheduling, dispatch,
completion, workflow tasks) and nothing of our own, so a managed turn measured next to it in
the same run shows what our stages add. It runs in two places:

- on Crux's own worker (the Crux plugin's converter, sandbox and options; started eagerly
  like a turn): what the same worker costs for three stages;
- on a plain `temporalio.worker.Worker` with SDK defaults on a task queue of its own, started
  by a plain client's `execute_workflow` (`plain_worker`, `plain_client`): what any Temporal
  application pays for three activities, the floor a turn is held to.

`FirstCallFloor` is the streaming benchmark's anchor: a local activity, then an activity
that notes when it began, the shape of a turn up to its provider call.
"""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory
from temporalio.converter import DataConverter
from temporalio.worker import Worker

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


PLAIN_TASK_QUEUE_PREFIX = "bench-plain"
"""Task queues of the plain-Worker floor start with this (one per run)."""


def plain_client(client: Client) -> Client:
    """The same connection as `client`, with the SDK's default data converter and nothing else.

    The plain-Worker floor must pay what a Temporal application with SDK defaults pays: no
    pydantic converter, no plugin, no interceptors.
    """
    config = client.config()
    config["data_converter"] = DataConverter.default
    config["interceptors"] = []
    config["plugins"] = []
    return Client(**config)


def plain_worker(client: Client, task_queue: str) -> Worker:
    """A `temporalio.worker.Worker` with SDK defaults serving only the no-op workflow.

    Args:
        client: A client from `plain_client` (SDK default converter).
        task_queue: A task queue of its own, so that no other worker takes its tasks.
    """
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[NoopThreeActivities],
        activities=[noop_activity],
    )


async def run_plain_floor(client: Client, task_queue: str, value: int) -> str:
    """One floor turn: a plain `execute_workflow` of the no-op workflow (no eager start).

    Returns:
        The run's workflow id.
    """
    workflow_id = f"bench-plain-{uuid.uuid4().hex[:12]}"
    await client.execute_workflow(NOOP_WORKFLOW, value, id=workflow_id, task_queue=task_queue)
    return workflow_id


def workflow_task_waits(history: WorkflowHistory) -> list[float]:
    """Milliseconds from each workflow task's scheduling to its start, from a run's history.

    The server's dispatch time of a workflow task: a plain run pays it once per task (four
    for the floor), and it moves between runs on the same server, taking the floor with it.
    """
    waits: list[float] = []
    scheduled = None
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
            scheduled = event.event_time.ToDatetime()
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED and scheduled:
            waits.append((event.event_time.ToDatetime() - scheduled).total_seconds() * 1000)
            scheduled = None
    return waits


FIRST_CALL_WORKFLOW = "BenchFirstCallFloor"

FIRST_CALL_STARTS: dict[str, float] = {}
"""`time.perf_counter()` at which each first-call floor run's activity began, by workflow id
(the run and its caller share one process)."""


@activity.defn(name="bench.first_call")
async def first_call_activity(value: int) -> int:
    """Note when the activity began (where a turn's provider call would go out)."""
    FIRST_CALL_STARTS[activity.info().workflow_id or ""] = time.perf_counter()
    return value


@workflow.defn(name=FIRST_CALL_WORKFLOW)
class FirstCallFloor:
    """What Temporal costs a turn before its provider call: a local activity, then one more.

    A managed turn reads its Thread in a local activity and calls the provider in the next
    activity; this workflow does the same with no-ops, so the time from its (eager) start to
    its second activity's start is Temporal's share of a turn's time to the provider call.
    """

    @workflow.run
    async def run(self, value: int) -> int:
        """Run a local no-op, then the noting activity."""
        value = await workflow.execute_local_activity(
            noop_activity, value, start_to_close_timeout=timedelta(seconds=30)
        )
        return await workflow.execute_activity(
            first_call_activity, value, start_to_close_timeout=timedelta(seconds=30)
        )
