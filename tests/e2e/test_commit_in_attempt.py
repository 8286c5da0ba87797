"""An answer that ends the turn is published by the attempt that received it.

When nothing after the answer decides whether it is accepted (no acceptance gate, step hook
or time budget), the provider attempt commits the turn itself and the workflow completes
without a commit activity of its own: one local activity and one workflow activation less
per turn. Everything else is unchanged: a retry of an attempt whose completion was lost
reports the commit its earlier try made instead of calling the provider again, and a commit
that fails within the attempt is the workflow's to finish (the storage fault suite crashes
PostgreSQL under it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid

import asyncpg
import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities import GenerationActivities, ProviderRegistry
from contracts.activities import CommitTurnInput, InvokeModelInput
from crux.config import Settings
from crux.models import workflow_id_for
from crux.prompts import PromptRegistry
from planner import ModelCatalog
from storage import GenerationStore, ThreadStore
from tests.helpers import closed_run, new_worker, settings_for
from vocabulary.ids import generation_key

_COMMIT = "crux.commit_turn"


async def _activity_types(client: Client, workflow_id: str) -> tuple[list[str], list[str]]:
    """The local activities (markers) and the activities scheduled by one run."""
    history = await (await closed_run(client, workflow_id)).fetch_history()
    local: list[str] = []
    scheduled: list[str] = []
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            data = event.marker_recorded_event_attributes.details["data"].payloads[0].data
            local.append(str(json.loads(data)["activity_type"]))
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled.append(event.activity_task_scheduled_event_attributes.activity_type.name)
    return local, scheduled


def _commit_of(generation_id: str, thread_id: str) -> CommitTurnInput:
    """The commit a plain turn's attempt runs (its answer is attempt 1's)."""
    return CommitTurnInput(
        generation_id=generation_id,
        workflow_id=workflow_id_for(generation_id, thread_id),
        thread_id=thread_id,
        accepted_attempt=1,
        history_source="thread",
    )


def _activities(
    pool: asyncpg.Pool, settings: Settings, http: httpx.AsyncClient
) -> GenerationActivities:
    """The generation activities of a worker, run here outside one."""
    return GenerationActivities(
        threads=ThreadStore(pool),
        generations=GenerationStore(pool),
        providers=ProviderRegistry(settings, http),
        prompts=PromptRegistry(()),
        catalog=ModelCatalog.default(),
    )


async def test_a_plain_turn_is_published_by_its_attempt_and_a_budgeted_one_by_the_workflow(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"in-attempt:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        plain = await worker.runtime.generate("first question", thread=thread_id)
        budgeted = await worker.runtime.generate(
            "second question", thread=thread_id, time_budget_seconds=60
        )
    local, scheduled = await _activity_types(
        client, workflow_id_for(plain.generation_id, thread_id)
    )
    assert _COMMIT not in local and _COMMIT not in scheduled
    assert scheduled == ["crux.invoke_model"]
    # A time budget must be able to stop the run before its commit: the workflow commits.
    local, scheduled = await _activity_types(
        client, workflow_id_for(budgeted.generation_id, thread_id)
    )
    assert scheduled == ["crux.invoke_model", _COMMIT]
    # Both turns are on the Thread, in order, each a whole causal group.
    assert plain.thread_commit is not None and budgeted.thread_commit is not None
    assert budgeted.thread_commit.parent_id == plain.thread_commit.message_ids[-1]
    _, path = await ThreadStore(pool).path_ids(thread_id)
    assert list(path) == [*plain.thread_commit.message_ids, *budgeted.thread_commit.message_ids]
    assert not plain.result.replayed and not budgeted.result.replayed


async def test_a_retried_attempt_reports_the_commit_of_its_lost_try_without_a_call(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """The try committed, then its completion was lost: running it again pays nothing."""
    thread_id = f"lost-completion:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        generation = await worker.runtime.generate("a question", thread=thread_id)
    commit = _commit_of(generation.generation_id, thread_id)
    retry = InvokeModelInput(
        generation_id=generation.generation_id,
        attempt=1,
        thread_id=thread_id,
        history_source="thread",
        model="no-such-provider:model",  # resolving it would fail: no call is attempted
        commit=commit,
    )
    settings = Settings.model_validate({"database_url": database_url})
    async with httpx.AsyncClient() as http:
        activities = _activities(pool, settings, http)
        # Temporal's retry of the try, and a new execution after a storage wait.
        for attempt in (2, 1):
            environment = ActivityEnvironment()
            environment.info = dataclasses.replace(environment.info, attempt=attempt)
            result = await environment.run(activities.invoke_model, retry)
            assert result.committed is not None
            outcome = result.committed.outcome(commit)
            assert outcome.output_message_id == generation.message.id
            assert outcome.thread_commit == generation.thread_commit
            assert outcome.usage == generation.usage and not outcome.replayed


async def test_a_commit_overtaken_by_another_try_of_it_reports_that_commit(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    """Two tries of one commit run at once: the later one sees the earlier one's result.

    An in-attempt commit that outlives its wait keeps running while the workflow commits
    (and a local activity keeps running when its workflow task moves on). The later try
    may find no result yet and then no staging either, the earlier try having recorded the
    one and dropped the other in between: it reports the recorded commit, never `not_found`.
    """
    thread_id = f"overtaken:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        generation = await worker.runtime.generate("a question", thread=thread_id)
    key = generation_key(generation.generation_id, thread_id)
    recorded = await pool.fetchrow("SELECT * FROM crux_generations WHERE generation_id = $1", key)
    assert recorded is not None
    # Back to the moment before the earlier try recorded its result (its staging is gone).
    await pool.execute("DELETE FROM crux_generations WHERE generation_id = $1", key)
    commit = _commit_of(generation.generation_id, thread_id)
    settings = Settings.model_validate({"database_url": database_url})
    async with httpx.AsyncClient() as http, pool.acquire() as earlier:
        activities = _activities(pool, settings, http)
        async with earlier.transaction():
            # The later try looks for the result (none yet), then waits to read the staging.
            await earlier.execute("LOCK TABLE crux_generation_staging IN ACCESS EXCLUSIVE MODE")
            later = asyncio.ensure_future(ActivityEnvironment().run(activities.commit_turn, commit))
            while not await pool.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND query LIKE '%crux_generation_staging%'"
            ):
                assert not later.done(), later
                await asyncio.sleep(0.02)
            # Meanwhile the earlier try records the result (its staging already dropped).
            await earlier.execute(
                "INSERT INTO crux_generations (generation_id, thread_id, workflow_id, result)"
                " VALUES ($1, $2, $3, $4)",
                key,
                recorded["thread_id"],
                recorded["workflow_id"],
                recorded["result"],
            )
        result = await asyncio.wait_for(later, 30)
    outcome = result.outcome(commit)
    assert outcome.output_message_id == generation.message.id
    assert outcome.thread_commit == generation.thread_commit
