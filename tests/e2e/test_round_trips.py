"""A plain turn costs two workflow tasks: a local read that also records the first plan; one
provider call that publishes the turn it answers."""

from __future__ import annotations

import json
import uuid

import asyncpg
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from crux.models import workflow_id_for
from providers.loopback import LoopbackOpenAIServer, TextReply
from tests.helpers import closed_run, new_worker, settings_for

MODEL = "openai:gpt-4o-mini"


async def test_a_plain_turn_takes_two_workflow_tasks_and_publishes_each_stage_once(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"trips:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="answer"))
    async with new_worker(client, pool, settings) as worker:
        result = await worker.runtime.generate(
            "hello", thread=thread_id, model=MODEL, generation_id="t1"
        )
    assert result.thread_commit is not None
    history = await (await closed_run(client, workflow_id_for("t1", thread_id))).fetch_history()
    events = list(history.events)

    completed = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    assert len([event for event in events if event.event_type == completed]) == 2
    scheduled = [
        event.activity_task_scheduled_event_attributes.activity_type.name
        for event in events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == ["crux.invoke_model"]
    local = [
        event
        for event in events
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and event.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]
    # The read, which recorded the sealed plan too; the provider attempt published the turn.
    assert len(local) == 1
    stages: list[str] = []
    for event in events:
        if event.event_type != EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            continue
        upserted = event.upsert_workflow_search_attributes_event_attributes.search_attributes
        if "CruxStage" in upserted.indexed_fields:
            stages.append(json.loads(upserted.indexed_fields["CruxStage"].data))
    # Published before each wait on the server and at the end, once per change (the read is a
    # local activity within a workflow task); the first carries the run's identity too.
    assert stages == ["invoking", "completed"]
