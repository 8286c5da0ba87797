"""A caller is answered when its turn is committed, not when its run closes.

The commit wakes the caller through PostgreSQL (`crux._notices`): a run that does nothing
after its commit that could change the answer (no success hooks, time budget, cache or
managed history) answers its caller at once, and closes with its next workflow task.

The proof stops every workflow poller before the commit: the caller is answered all the same,
the run stays open (its last task has no worker), and it closes with the same outcome once a
worker polls again. Runs that do something after the commit are waited for to their end.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.worker import Worker

from contracts.generation import GenerationInput, GenerationResult
from crux._notices import CommitNotices, runs_closed, settled_at_commit
from crux._worker import worker_resources
from crux.models import workflow_id_for
from crux.plugin import CruxPlugin
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import GenerationStore
from tests.helpers import closed_run, eventually, settings_for
from vocabulary.commits import ThreadCommit
from vocabulary.ids import assistant_message_id, generation_key

MODEL = "openai:gpt-4o-mini"


def _workflow_worker(client: Client, task_queue: str, plugin: CruxPlugin) -> Worker:
    """The workflows and their local activities; provider attempts run elsewhere."""
    return Worker(client, task_queue=task_queue, plugins=[plugin], no_remote_activities=True)


def _activity_worker(client: Client, task_queue: str, plugin: CruxPlugin) -> Worker:
    """The activities alone: no workflow task reaches this worker."""
    config: Any = plugin.configure_worker({"client": client, "task_queue": task_queue})
    return Worker(config["client"], task_queue=task_queue, activities=config["activities"])


async def _status(handle: WorkflowHandle[Any, Any]) -> WorkflowExecutionStatus | None:
    return (await handle.describe()).status


async def test_the_caller_is_answered_at_the_commit_while_the_run_cannot_close_yet(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    task_queue = f"crux-notice-{uuid.uuid4().hex[:8]}"
    settings = settings.model_copy(update={"task_queue": task_queue})
    thread_id = f"notice:{uuid.uuid4().hex[:6]}"
    # Long enough to stop the workflow worker while the provider is answering.
    openai_server.enqueue(TextReply(text="committed while nobody polls", delay_seconds=2.0))
    runtime = Runtime(client, pool, task_queue=task_queue, default_model=MODEL)
    async with worker_resources(settings, pool=pool) as activities:
        plugin = CruxPlugin(activities)
        async with _activity_worker(client, task_queue, plugin):
            async with _workflow_worker(client, task_queue, plugin):
                answer = asyncio.ensure_future(
                    runtime.generate("hello", thread=thread_id, generation_id="n1")
                )
                await eventually(
                    lambda: asyncio.sleep(0, len(openai_server.requests)), lambda n: n == 1
                )
            # No workflow worker polls now: the run's last task cannot start.
            generation = await asyncio.wait_for(answer, 30)
            handle = client.get_workflow_handle(workflow_id_for("n1", thread_id))
            assert await _status(handle) == WorkflowExecutionStatus.RUNNING
    assert generation.text == "committed while nobody polls"
    commit = generation.thread_commit
    assert commit is not None and commit.status == "selected" and not commit.replayed
    assert not generation.result.replayed
    # The next worker closes the run, with the outcome the caller was given.
    async with (
        worker_resources(settings, pool=pool) as activities,
        Worker(client, task_queue=task_queue, plugins=[CruxPlugin(activities)]),
    ):
        closed = await closed_run(client, handle.id)
        assert await _status(closed) == WorkflowExecutionStatus.COMPLETED
        outcome = await closed.result()
    assert ThreadCommit.model_validate(outcome["thread_commit"]) == commit
    # Asked again, the generation is a replay with its own run: nothing is committed twice.
    async with (
        worker_resources(settings, pool=pool) as activities,
        Worker(client, task_queue=task_queue, plugins=[CruxPlugin(activities)]),
    ):
        again = await runtime.generate("hello", thread=thread_id, generation_id="n1")
        await runs_closed()
    assert again.result.replayed and again.thread_commit is not None
    assert again.thread_commit.message_ids == commit.message_ids
    assert len(openai_server.requests) == 1


async def test_a_notice_wakes_the_watch_of_its_generation_only(pool: asyncpg.Pool) -> None:
    notices = CommitNotices(pool)
    generations = GenerationStore(pool)
    thread_id = f"notice:{uuid.uuid4().hex[:6]}"
    watched = GenerationInput(generation_id="w1", thread_id=thread_id, model=MODEL)
    other = GenerationInput(generation_id="w2", thread_id=thread_id, model=MODEL)
    try:
        async with notices.watching(watched) as notice, notices.watching(other) as bystander:
            assert notice is not None and bystander is not None
            # The listener comes up in the background; a notice before it is only missed.
            await eventually(lambda: asyncio.sleep(0, notices.listening), bool)
            await _record(generations, "w1", thread_id)
            await asyncio.wait_for(notice.committed, 5)
            await asyncio.sleep(0.2)
            assert not bystander.committed.done()
    finally:
        await notices.close()
    assert not notices.listening  # the connection went back to the pool


@pytest.mark.parametrize(
    "update",
    [
        {"on_success": ["audit"]},
        {"time_budget_seconds": 30.0},
        {"history": {"kind": "managed"}},
        {"cache": {}},
    ],
)
async def test_a_run_with_work_after_its_commit_is_waited_for_to_its_end(
    pool: asyncpg.Pool, update: dict[str, Any]
) -> None:
    request = GenerationInput.model_validate(
        {"generation_id": "w3", "thread_id": "t", "model": MODEL, **update}
    )
    assert not settled_at_commit(request)
    notices = CommitNotices(pool)
    async with notices.watching(request) as notice:
        assert notice is None
    assert settled_at_commit(GenerationInput(generation_id="w4", thread_id="t", model=MODEL))


async def _record(generations: GenerationStore, generation_id: str, thread_id: str) -> None:
    """Record a result and announce it, as a commit does."""
    result = GenerationResult(
        generation_id=generation_id,
        thread_id=thread_id,
        output_message_id=assistant_message_id(generation_id),
    )
    await generations.record_result(result, workflow_id=f"wf-{generation_id}")
    await generations.announce_result(generation_key(generation_id, thread_id))
