"""Operator control of a run on the real stack: `retry_now` and `abandon` in `commit_blocked`.

PostgreSQL (a server of this module alone) is stopped just before a run's commit, so the
run sits in `commit_blocked` with its accepted turn staged. Storage then comes back and an
operator either retries at once (the turn commits while the pause's timer is still pending:
the history shows it cancelled, never fired) or abandons (nothing is committed, the staged
rows are gone, the caller gets `ThreadCommitError` code `abandoned`). The CLI is driven
through its real entry point.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import pytest_asyncio
from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
)

from contracts.activities import ACTIVITY_COMMIT_TURN
from contracts.operator import GenerationStatus
from crux._worker import build_worker, worker_resources
from crux.errors import GenerationStateError, ThreadCommitError
from crux.models import GenerationInput, workflow_id_for
from crux.runtime import Runtime
from crux.stack import EmbeddedPostgres, start_postgres_sync
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import create_pool
from storage.migrate import migrate
from tests.chaos import pause_postgres, resume_postgres
from tests.helpers import eventually, new_worker, settings_for

ROUNDS_BEFORE_RETRY = 4
"""The commit's round whose pause is cut short (its timer is 8 s: ample time to restart
PostgreSQL and send the update before it could fire)."""


class StopStorageBeforeCommit(Interceptor):
    """Stops PostgreSQL right before the next commit runs (once per `arm`)."""

    def __init__(self, server: EmbeddedPostgres) -> None:
        self.server = server
        self.armed = False

    def arm(self) -> None:
        self.armed = True

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        outer = self

        class _Inbound(ActivityInboundInterceptor):
            async def execute_activity(self, input: ExecuteActivityInput) -> Any:
                if outer.armed and activity.info().activity_type == ACTIVITY_COMMIT_TURN:
                    outer.armed = False
                    await asyncio.to_thread(pause_postgres, outer.server)
                return await super().execute_activity(input)

        return _Inbound(next)


@pytest.fixture
def dedicated_postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of this test alone, so stopping it disturbs no other test."""
    data_dir = Path(tempfile.mkdtemp(prefix="crux-operator-pg-"))
    server = start_postgres_sync(data_dir / "pgdata")
    try:
        yield server
    finally:
        try:
            resume_postgres(server)
        finally:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)


class Stack:
    def __init__(
        self,
        runtime: Runtime,
        pool: asyncpg.Pool,
        fault: StopStorageBeforeCommit,
        env: dict[str, str],
    ) -> None:
        self.runtime = runtime
        self.pool = pool
        self.fault = fault
        self.env = env


@pytest_asyncio.fixture
async def stack(
    client: Client, temporal_env: WorkflowEnvironment, dedicated_postgres: EmbeddedPostgres
) -> AsyncIterator[Stack]:
    url = dedicated_postgres.url
    connection = await asyncpg.connect(url)
    try:
        await migrate(connection)
    finally:
        await connection.close()
    task_queue = f"crux-operator-{uuid.uuid4().hex[:8]}"
    settings = settings_for(url).model_copy(update={"task_queue": task_queue})
    fault = StopStorageBeforeCommit(dedicated_postgres)
    pool = await create_pool(url, min_size=1, max_size=4)
    worker_pool = await create_pool(url, min_size=1, max_size=4)
    try:
        async with worker_resources(settings, pool=worker_pool) as activities:
            worker = build_worker(
                client, task_queue=task_queue, activities=activities, interceptors=[fault]
            )
            async with worker:
                runtime = Runtime(client, pool, task_queue=task_queue)
                env = {
                    "TEMPORAL_ADDRESS": client.service_client.config.target_host,
                    "TEMPORAL_NAMESPACE": client.namespace,
                    "CRUX_DATABASE_URL": url,
                }
                yield Stack(runtime, pool, fault, env)
    finally:
        await worker_pool.close()
        await pool.close()


def _crux(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crux", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **env},
    )


async def _blocked_in_round(stack: Stack, generation_id: str, thread: str, rounds: int) -> None:
    async def status() -> Any:
        try:
            return await stack.runtime.generation_status(generation_id, thread_id=thread)
        except GenerationStateError as error:
            if error.code != "not_found":  # not started yet
                raise
            return None

    def in_round(value: Any) -> bool:
        if (
            value is None
            or value.stage != "commit_blocked"
            or not value.waiting
            or not value.details
        ):
            return False
        return int(value.details.split("round ")[1].split()[0]) >= rounds

    await eventually(status, in_round, timeout=60, interval=0.1)


async def _count(pool: asyncpg.Pool, sql: str, thread: str) -> int:
    return int(await pool.fetchval(sql, thread))


def _events(history: Any) -> list[Any]:
    return list(history.events)


async def test_retry_now_commits_a_blocked_turn_before_its_backoff_timer_fires(
    client: Client, stack: Stack
) -> None:
    await retry_now_scenario(client, stack)


async def test_abandon_drops_the_staged_turn_and_fails_the_caller_typed(
    client: Client, stack: Stack
) -> None:
    await abandon_scenario(client, stack)


async def retry_now_scenario(client: Client, stack: Stack) -> str:
    """A run blocked in its commit, retried at once by an operator; returns its workflow id."""
    thread = f"op-retry-{uuid.uuid4().hex[:6]}"
    stack.fault.arm()
    caller = asyncio.create_task(
        stack.runtime.generate("hello there", thread=thread, generation_id="g-retry")
    )
    await _blocked_in_round(stack, "g-retry", thread, ROUNDS_BEFORE_RETRY)
    shown = await asyncio.to_thread(
        _crux, stack.env, "generation", "show", "g-retry", "--thread", thread, "--json"
    )
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["stage"] == "commit_blocked"
    assert status["generation_id"] == "g-retry"
    assert status["thread_id"] == thread
    assert status["blocked_since"] is not None
    assert status["last_error_type"]
    assert "hello" not in shown.stdout

    await asyncio.to_thread(resume_postgres, stack.fault.server)
    retried = await asyncio.to_thread(
        _crux, stack.env, "generation", "retry", "g-retry", "--thread", thread, "--json"
    )
    assert retried.returncode == 0, retried.stderr
    accepted = GenerationStatus.model_validate_json(retried.stdout)
    assert accepted.stage == "commit_blocked"
    generation = await asyncio.wait_for(caller, timeout=60)
    assert generation.thread_commit is not None
    assert (
        await _count(
            stack.pool, "SELECT count(*) FROM crux_thread_messages WHERE thread_id = $1", thread
        )
        == 2
    )

    # The pause the update cut short: its timer was started, then cancelled, never fired.
    history = await client.get_workflow_handle(accepted.workflow_id).fetch_history()
    events = _events(history)
    kinds = [event.event_type for event in events]
    update_at = kinds.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    started = [
        event
        for event in events[:update_at]
        if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED
    ]
    assert len(started) >= ROUNDS_BEFORE_RETRY
    timer_id = started[-1].timer_started_event_attributes.timer_id
    fired = {
        event.timer_fired_event_attributes.timer_id
        for event in events
        if event.event_type == EventType.EVENT_TYPE_TIMER_FIRED
    }
    cancelled = {
        event.timer_canceled_event_attributes.timer_id
        for event in events
        if event.event_type == EventType.EVENT_TYPE_TIMER_CANCELED
    }
    assert timer_id not in fired
    assert timer_id in cancelled
    assert kinds[-1] == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    assert update_at < kinds.index(EventType.EVENT_TYPE_TIMER_CANCELED)

    # Wrong stage now: the run has ended.
    with pytest.raises(GenerationStateError) as ended:
        await stack.runtime.retry_generation("g-retry", thread_id=thread)
    assert ended.value.code == "not_running"
    late = await asyncio.to_thread(_crux, stack.env, "generation", "retry", accepted.workflow_id)
    assert late.returncode == 4, late.stderr
    assert "not_running" in late.stderr
    missing = await asyncio.to_thread(_crux, stack.env, "generation", "show", "no-such-run")
    assert missing.returncode == 3, missing.stderr
    return accepted.workflow_id


async def abandon_scenario(client: Client, stack: Stack) -> str:
    """A run blocked in its commit, abandoned by an operator; returns its workflow id."""
    thread = f"op-abandon-{uuid.uuid4().hex[:6]}"
    stack.fault.arm()
    caller = asyncio.create_task(
        stack.runtime.generate("hello there", thread=thread, generation_id="g-abandon")
    )
    await _blocked_in_round(stack, "g-abandon", thread, 1)
    # The update applies only during a pause; between pauses the run is trying again and
    # rejects it (exit code 4), so the CLI is asked until a pause takes it.
    abandoned = None
    for _ in range(30):
        abandoned = await asyncio.to_thread(
            _crux, stack.env, "generation", "abandon", "g-abandon", "--thread", thread
        )
        if abandoned.returncode != 4:
            break
        await asyncio.sleep(0.2)
    assert abandoned is not None
    assert abandoned.returncode == 0, abandoned.stderr
    assert "accepted" in abandoned.stdout
    await asyncio.to_thread(resume_postgres, stack.fault.server)

    with pytest.raises(ThreadCommitError) as failed:
        await asyncio.wait_for(caller, timeout=90)
    assert failed.value.code == "abandoned"
    assert (
        await _count(
            stack.pool, "SELECT count(*) FROM crux_thread_messages WHERE thread_id = $1", thread
        )
        == 0
    )
    # Only the content-free identity row stays (the id was used); every staged text is gone.
    staged = "SELECT count(*) FROM crux_generation_staging WHERE thread_id = $1"
    assert await _count(stack.pool, staged, thread) > 0
    assert await _count(stack.pool, staged + " AND kind <> 'identity'", thread) == 0
    status = await stack.runtime.generation_status("g-abandon", thread_id=thread)
    # The discard that ran once storage was back deleted the staged turn (input and output).
    history = await client.get_workflow_handle(status.workflow_id).fetch_history()
    deleted = [
        json.loads(event.activity_task_completed_event_attributes.result.payloads[0].data)
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    ]
    assert deleted and deleted[-1]["deleted"] >= 2
    assert (status.running, status.status, status.stage) == (False, "FAILED", "failed")
    return status.workflow_id


async def test_updates_outside_a_storage_wait_are_rejected_typed(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    # The provider takes its time: the run sits in `invoking`, where neither update applies.
    openai_server.enqueue(TextReply(text="slow answer", delay_seconds=4))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        runtime = worker.runtime
        thread = f"op-stage-{uuid.uuid4().hex[:6]}"
        caller = asyncio.create_task(
            runtime.generate(
                "hello there", thread=thread, generation_id="g-stage", model="openai:gpt-4o-mini"
            )
        )

        async def probe() -> GenerationStatus | None:
            try:
                return await runtime.generation_status("g-stage", thread_id=thread)
            except GenerationStateError:
                return None

        status = await eventually(
            probe, lambda value: value is not None and value.stage == "invoking"
        )
        assert status is not None
        assert (status.stage, status.waiting, status.attempt) == ("invoking", False, 1)
        assert status.model == "openai:gpt-4o-mini"
        assert status.blocked_since is None
        for operate in (runtime.retry_generation, runtime.abandon_generation):
            with pytest.raises(GenerationStateError) as rejected:
                await operate("g-stage", thread_id=thread)
            assert rejected.value.code == "not_waiting"
            assert "hello" not in str(rejected.value)
        generation = await asyncio.wait_for(caller, timeout=60)
        assert generation.thread_commit is not None
        # By workflow id and by generation id alone (found through `CruxGenerationId`).
        for run_id in (status.workflow_id, "g-stage"):
            ended = await runtime.generation_status(run_id)
            assert (ended.running, ended.status, ended.stage) == (False, "COMPLETED", "completed")
            assert ended.thread_id == thread


async def test_a_read_waiting_for_storage_is_retried_then_abandoned(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    # The worker's own pool is closed: its reads fail the way an unreachable server does.
    task_queue = f"crux-operator-read-{uuid.uuid4().hex[:8]}"
    settings = settings_for(database_url).model_copy(update={"task_queue": task_queue})
    worker_pool = await create_pool(database_url, min_size=1, max_size=2)
    async with worker_resources(settings, pool=worker_pool) as activities:
        await worker_pool.close()
        async with build_worker(client, task_queue=task_queue, activities=activities):
            runtime = Runtime(client, pool, task_queue=task_queue)
            thread = f"op-read-{uuid.uuid4().hex[:6]}"
            handle = await client.start_workflow(
                "ManagedGenerationWorkflow",
                GenerationInput(
                    generation_id="g-read", thread_id=thread, input="x", storage_wait_seconds=20
                ),
                id=workflow_id_for("g-read", thread),
                task_queue=task_queue,
            )

            async def waiting() -> GenerationStatus:
                return await runtime.generation_status(handle.id)

            first = await eventually(waiting, lambda status: status.waiting, timeout=20)
            assert first.stage == "storage_blocked"
            assert first.last_error_type == "StorageUnavailableError"
            retried = await runtime.retry_generation("g-read", thread_id=thread)
            assert retried.stage == "storage_blocked"
            # The retried read failed again; the run waits once more, still blocked.
            again = await eventually(
                waiting,
                lambda status: status.waiting and status.details != first.details,
                timeout=20,
            )
            assert again.blocked_since == first.blocked_since
            await eventually(waiting, lambda status: status.waiting, timeout=20)
            await runtime.abandon_generation(handle.id)
            # Failed at once; its discard now retries on the unreachable store (bounded), so
            # the run is ended here rather than waited for.
            ended = await eventually(waiting, lambda status: status.stage == "failed")
            assert ended.details == "discarding staged content"
            assert not ended.waiting
            with pytest.raises(GenerationStateError) as late:
                await runtime.retry_generation(handle.id)
            assert late.value.code == "not_waiting"
            history = await handle.fetch_history()
            kinds = [event.event_type for event in history.events]
            assert kinds.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED) == 2
            assert EventType.EVENT_TYPE_TIMER_CANCELED in kinds
            await handle.terminate("test over")
