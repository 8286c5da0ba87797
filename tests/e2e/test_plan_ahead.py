"""The read plans the first provider call ahead and records its receipt.

When nothing between the read and the first plan shapes that plan (no input safety, no step
hook, no agent), the read activity seals the first plan over its own result and records its
receipt and inspection. The workflow plans the same call from the read's result, under the
same request id, and skips its own record when the digests agree: a turn's first workflow
task runs one local activity instead of two. A later step (after a tool round) is recorded
by the workflow as before, and the stored receipt is the one the step reports.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import asyncpg
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

import crux
from crux.models import workflow_id_for
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from storage import ReceiptStore
from tests.helpers import closed_run, new_worker, settings_for

_READ = "crux.read_request"
_RECORD = "crux.record_plan"


async def _local_activities(client: Client, workflow_id: str) -> list[str]:
    """The local activities one run recorded (its markers), in order."""
    history = await (await closed_run(client, workflow_id)).fetch_history()
    return [
        str(
            json.loads(event.marker_recorded_event_attributes.details["data"].payloads[0].data)[
                "activity_type"
            ]
        )
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
    ]


async def test_the_read_records_the_first_plan_under_every_history_policy(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"ahead:{uuid.uuid4().hex[:6]}"
    prompts = [
        crux.prompt(id="ahead-exact", use=[crux.history.exact()]),
        crux.prompt(id="ahead-recent", use=[crux.history.recent(messages=4)]),
        crux.prompt(id="ahead-managed", use=[crux.history(recent={"messages": 4})]),
    ]
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        for turn in range(9):
            prompt = prompts[turn % len(prompts)]
            result = await worker.runtime.generate(
                prompt, input=f"question {turn}", thread=thread_id
            )
            local = await _local_activities(
                client, workflow_id_for(result.generation_id, thread_id)
            )
            assert local == [_READ], (prompt.id, turn, local)
            # What the read recorded is exactly the receipt the step reports.
            (step,) = result.steps
            assert await worker.runtime.receipt(step.request.id) == step.request
            inspection = await worker.runtime.inspect(step.request.id)
            assert inspection.id == step.request.id


async def test_a_tool_rounds_second_plan_is_recorded_by_the_workflow(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    async def weather(arguments: dict[str, Any]) -> dict[str, Any]:
        return {"city": arguments["city"], "forecast": "sunny"}

    weather_tool = crux.tool("get_weather", weather, description="Forecast for a city")
    assistant = crux.prompt(id="ahead-tools", use=[weather_tool])
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name="get_weather", arguments={"city": "Porto"})),
        TextReply(text="Sunny in Porto."),
    )
    thread_id = f"ahead-tools:{uuid.uuid4().hex[:6]}"
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings, tools=[weather_tool]) as worker:
        result = await worker.runtime.generate(
            assistant, input="Weather in Porto?", thread=thread_id, model="openai:gpt-4o"
        )
        first, second = (step.request for step in result.steps)
        assert await worker.runtime.receipt(first.id) == first
        assert await worker.runtime.receipt(second.id) == second
    local = await _local_activities(client, workflow_id_for(result.generation_id, thread_id))
    # The first plan by the read, the second (after the tool round) by the workflow.
    assert local.count(_READ) == 1 and local.count(_RECORD) == 1
    assert local.index(_READ) < local.index(_RECORD)


async def test_a_plan_recorded_ahead_is_replaced_only_when_asked(pool: asyncpg.Pool) -> None:
    """The workflow replaces a plan the read recorded ahead that differs from its own."""
    receipts = ReceiptStore(pool)
    request_id = f"request_{uuid.uuid4().hex}"

    async def record(marker: str, *, replace: bool = False) -> None:
        await receipts.record(
            request_id,
            generation_key=None,
            thread_id=None,
            receipt={"id": request_id, "marker": marker},
            inspection={"id": request_id, "marker": marker},
            replace=replace,
        )

    async def stored() -> tuple[str, str]:
        row = await pool.fetchrow(
            "SELECT receipt ->> 'marker' AS r, inspection ->> 'marker' AS i"
            " FROM crux_request_receipts WHERE request_id = $1",
            request_id,
        )
        assert row is not None
        return row["r"], row["i"]

    await record("ahead")
    await record("retry")  # a retried record keeps the first row
    assert await stored() == ("ahead", "ahead")
    await record("workflow", replace=True)
    assert await stored() == ("workflow", "workflow")
