"""A generation joining a summary preparation tells a lost run from a failed one.

The join waits on the running `SummaryWorkflow` through the real server. A run that timed
out (its tries lost with their workers, or the run itself out of time) is reported as
`SUMMARY_RUN_LOST`, so the joining generation prepares the summary again; a run that failed
typed keeps its type, and the generation reports it.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

import crux
from activities.summary_join import await_running_summary
from contracts.activities import SUMMARY_RUN_LOST, AwaitSummaryInput, PrepareSummaryInput
from crux.models import workflow_id_for
from providers.loopback import (
    ErrorReply,
    LoopbackOpenAIServer,
    RecordedRequest,
    Reply,
    TextReply,
)
from tests.helpers import (
    closed_run,
    grow_thread,
    new_worker,
    record_history,
    settings_for,
    summary_input_without_thread,
)
from vocabulary.errors import ErrorType
from workflows.summary import SUMMARY_WORKFLOW

MODEL = "openai:gpt-4o-mini"
QUESTION = "What did we decide?"
REPLY = (
    "We renewed the two regional carrier contracts for another year, raised the weekly"
    " capacity by ten percent and agreed to review the numbers again next quarter."
)
# Small enough that the older turns only fit as a summary, prepared inline.
BUDGET: dict[str, Any] = {"input_budget": {"max": 250}}


async def _summary_run_id(client: Client, workflow_id: str) -> str:
    """The id of the summary run a generation started (or joined) inline."""
    history = await (await closed_run(client, workflow_id)).fetch_history()
    for event in history.events:
        scheduled = event.activity_task_scheduled_event_attributes
        if (
            event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and scheduled.activity_type.name == "crux.await_summary"
        ):
            [payload] = scheduled.input.payloads
            return AwaitSummaryInput.model_validate_json(payload.data).workflow_id
    raise AssertionError("the generation awaited no summary run")


def _summary_input() -> PrepareSummaryInput:
    return summary_input_without_thread("join-lost")


async def test_a_joined_run_that_timed_out_is_reported_lost(client: Client) -> None:
    summary_input = _summary_input()
    workflow_id = f"summary-lost-{uuid.uuid4().hex[:8]}"
    # No worker polls this queue: the run times out as one whose workers all died would.
    await client.start_workflow(
        SUMMARY_WORKFLOW,
        summary_input,
        id=workflow_id,
        task_queue=f"nobody-{uuid.uuid4().hex[:8]}",
        execution_timeout=timedelta(seconds=1),
    )
    environment = ActivityEnvironment(client=client)
    with pytest.raises(ApplicationError) as raised:
        await environment.run(
            await_running_summary, AwaitSummaryInput(workflow_id=workflow_id, request=summary_input)
        )
    assert raised.value.type == SUMMARY_RUN_LOST and raised.value.non_retryable


async def test_a_joined_run_that_failed_keeps_its_type(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    summary_input = _summary_input()  # its Thread does not exist: the preparation refuses
    workflow_id = f"summary-failed-{uuid.uuid4().hex[:8]}"
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        await client.start_workflow(
            SUMMARY_WORKFLOW, summary_input, id=workflow_id, task_queue=worker.task_queue
        )
        environment = ActivityEnvironment(client=client)
        with pytest.raises(ApplicationError) as raised:
            await environment.run(
                await_running_summary,
                AwaitSummaryInput(workflow_id=workflow_id, request=summary_input),
            )
    assert raised.value.type not in (SUMMARY_RUN_LOST, None)
    assert raised.value.type in set(ErrorType)


async def test_a_generation_prepares_its_summary_again_after_the_run_it_joined_was_lost(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """The inline summary's run is lost: the turn is still answered and committed once."""
    failing = {"main call": True}

    def respond(request: RecordedRequest) -> Reply:
        messages = request.body.get("messages", [])
        last = messages[-1].get("content") if messages else None
        if failing["main call"] and last == QUESTION:
            # The probe's own call is refused: its summary stays prepared, nothing commits.
            return ErrorReply(status=400, error_type="invalid_request_error")
        return TextReply(text=REPLY)

    managed = crux.prompt(id="managed-lost", use=[crux.history(recent={"messages": 4})])
    thread_id = f"join-lost:{uuid.uuid4().hex[:6]}"
    async with LoopbackOpenAIServer(responder=respond) as server:
        settings = settings_for(database_url, openai_base_url=server.base_url)
        async with new_worker(client, pool, settings) as worker:
            await grow_thread(
                worker.runtime,
                thread_id,
                MODEL,
                lambda turn: (
                    f"Logistics review item {turn}: carrier contracts, capacity and numbers."
                ),
                ids=None,
            )
            # A probe needs the same inline summary the turn will: it names the summary run.
            probe = f"probe-{uuid.uuid4().hex[:6]}"
            with pytest.raises(crux.ProviderError):
                await worker.runtime.generate(
                    managed,
                    input=QUESTION,
                    thread=thread_id,
                    model=MODEL,
                    generation_id=probe,
                    **BUDGET,
                )
            summary_id = await _summary_run_id(client, workflow_id_for(probe, thread_id))
            await pool.execute("DELETE FROM crux_derived_artifacts WHERE thread_id = $1", thread_id)
            # A run of that summary is in flight and then lost: nothing will ever run it.
            await client.start_workflow(
                SUMMARY_WORKFLOW,
                _summary_input(),
                id=summary_id,
                task_queue=f"nobody-{uuid.uuid4().hex[:8]}",
                execution_timeout=timedelta(seconds=2),
            )
            failing["main call"] = False
            result = await worker.runtime.generate(
                managed, input=QUESTION, thread=thread_id, model=MODEL, **BUDGET
            )
        assert result.thread_commit is not None and not result.thread_commit.replayed
        workflow_id = workflow_id_for(result.generation_id, thread_id)
        await record_history(client, workflow_id, "summary_join_lost")
        history = await (await closed_run(client, workflow_id)).fetch_history()
        scheduled = [
            event.activity_task_scheduled_event_attributes.activity_type.name
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
        ]
        # It joined the lost run, then started the summary's preparation again and waited
        # for that run.
        assert scheduled.count("crux.await_summary") == 2
        assert await pool.fetchval(
            "SELECT count(*) FROM crux_derived_artifacts WHERE thread_id = $1", thread_id
        )
