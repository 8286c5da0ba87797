"""Operator control of a blocked run: retry now, abandon, refusals, the `crux generation` CLI.

The commit's storage is made unavailable by taking the ledger table away (every commit
attempt then fails like an outage, so the run sits in `commit_blocked`) while the test's own
pool stays usable to check what was and was not written.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid

import asyncpg
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from crux import OperatorError, ThreadCommitError
from providers.loopback import LoopbackOpenAIServer, TextReply
from tests.helpers import eventually, new_worker, record_history, settings_for
from vocabulary.ids import generation_key, workflow_id_for

pytestmark = pytest.mark.durability

MODEL = "openai:gpt-4o-mini"
OFFLINE = "ALTER TABLE crux_generations RENAME TO crux_generations_offline"
ONLINE = "ALTER TABLE crux_generations_offline RENAME TO crux_generations"


def _crux(client: Client, *arguments: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TEMPORAL_ADDRESS": client.service_client.config.target_host}
    return subprocess.run(
        [sys.executable, "-m", "crux", "generation", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


async def test_retry_now_commits_at_once_and_wrong_stages_are_refused(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"op-retry:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="kept for the operator", delay_seconds=2.0))
    async with new_worker(client, pool, settings) as worker:
        runtime = worker.runtime
        call = asyncio.ensure_future(
            runtime.generate("keep me", thread=thread_id, model=MODEL, generation_id="r1")
        )
        try:

            async def status() -> tuple[str, str | None, bool]:
                try:
                    seen = await runtime.generation_status("r1", thread=thread_id)
                except OperatorError:
                    return "", None, False  # not started yet
                return seen.stage, seen.details, seen.waiting

            await eventually(status, lambda s: s[0] == "invoking")
            # Not waiting for storage: both updates are refused, typed, with the stage.
            with pytest.raises(OperatorError) as refused:
                await runtime.abandon_generation("r1", thread=thread_id)
            assert refused.value.code == "wrong_stage" and refused.value.stage == "invoking"
            await pool.execute(OFFLINE)
            try:
                # Round 3 waits 4 s: long enough that only the update can end it early.
                await eventually(
                    status,
                    lambda s: s[0] == "commit_blocked" and "round 3" in (s[1] or "") and s[2],
                    timeout=60,
                )
                shown = await runtime.generation_status(workflow_id_for("r1", thread_id))
                assert shown.generation_id == "r1" and shown.thread_id == thread_id
                assert shown.model == MODEL and shown.attempt >= 1
                assert shown.blocked_since is not None and shown.last_error_type
            finally:
                await pool.execute(ONLINE)
            assert await runtime.retry_generation("r1", thread=thread_id) == "commit_blocked"
            result = await asyncio.wait_for(call, 30)
        finally:
            call.cancel()
    assert result.thread_commit is not None and result.text == "kept for the operator"
    handle = client.get_workflow_handle(workflow_id_for("r1", thread_id))
    events = [event.event_type async for event in handle.fetch_history_events()]
    accepted = events.index(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    # The backoff timer running when the update came was cancelled, not waited out: every
    # timer started before the update fired or was cancelled, and the last one was cancelled.
    started = [i for i, e in enumerate(events) if e == EventType.EVENT_TYPE_TIMER_STARTED]
    last_timer = max(i for i in started if i < accepted)
    cancelled = events.index(EventType.EVENT_TYPE_TIMER_CANCELED, last_timer)
    assert cancelled > accepted
    assert EventType.EVENT_TYPE_TIMER_FIRED not in events[last_timer:]
    # ... and the commit ran after the cancellation, not after a fired timer.
    assert EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED in events[cancelled:]
    # A run that ended takes neither update.
    with pytest.raises(OperatorError) as ended:
        await runtime.retry_generation("r1", thread=thread_id)
    assert ended.value.code == "wrong_stage"
    await record_history(client, handle.id, "operator_retry_now")


async def test_abandon_through_the_cli_discards_and_fails_typed(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"op-abandon:{uuid.uuid4().hex[:6]}"
    workflow_id = workflow_id_for("a1", thread_id)
    openai_server.enqueue(TextReply(text="never committed", delay_seconds=2.0))
    async with new_worker(client, pool, settings) as worker:
        runtime = worker.runtime
        call = asyncio.ensure_future(
            runtime.generate("drop me", thread=thread_id, model=MODEL, generation_id="a1")
        )
        try:

            async def stage() -> str:
                try:
                    return (await runtime.generation_status(workflow_id)).stage
                except OperatorError:
                    return ""  # not started yet

            await eventually(stage, lambda s: s == "invoking")
            await pool.execute(OFFLINE)
            try:
                await eventually(stage, lambda s: s == "commit_blocked", timeout=60)
                shown = await asyncio.to_thread(_crux, client, "show", workflow_id, "--json")
                assert shown.returncode == 0, shown.stderr
                status = json.loads(shown.stdout)
                assert status["stage"] == "commit_blocked" and status["generation_id"] == "a1"
                assert "drop me" not in shown.stdout and "never committed" not in shown.stdout
                staged = await pool.fetchval(
                    "SELECT count(*) FROM crux_generation_staging WHERE generation_id = $1"
                    " AND kind <> 'identity'",
                    generation_key("a1", thread_id),
                )
                assert staged > 0
                # What the Thread held before the commit (the caller's input, if staged
                # into the Thread ahead of the turn): the abandoned turn must add nothing.
                before = await pool.fetchval(
                    "SELECT count(*) FROM crux_thread_messages WHERE thread_id = $1", thread_id
                )
                # The storage is still away: retry is accepted and the run stays blocked.
                await eventually(
                    lambda: runtime.generation_status(workflow_id), lambda s: s.waiting
                )
                retried = await asyncio.to_thread(_crux, client, "retry", workflow_id)
                assert retried.returncode == 0, retried.stderr
                await eventually(
                    lambda: runtime.generation_status(workflow_id), lambda s: s.waiting
                )
                abandoned = await asyncio.to_thread(
                    _crux, client, "abandon", "a1", "--thread", thread_id
                )
                assert abandoned.returncode == 0, abandoned.stderr
            finally:
                await pool.execute(ONLINE)
            with pytest.raises(ThreadCommitError) as raised:
                await asyncio.wait_for(call, 60)
        finally:
            call.cancel()
        assert raised.value.code == "abandoned"
        assert "never committed" not in str(raised.value)
        # Nothing committed, and the staged output is gone (the content-free identity row
        # stays, as on every failure path: the id was used).
        assert (
            await pool.fetchval(
                "SELECT count(*) FROM crux_thread_messages WHERE thread_id = $1", thread_id
            )
            == before
        )
        assert not await pool.fetchval(
            "SELECT count(*) FROM crux_generations WHERE generation_id = $1",
            generation_key("a1", thread_id),
        )
        assert not await pool.fetchval(
            "SELECT count(*) FROM crux_generation_staging WHERE generation_id = $1"
            " AND kind <> 'identity'",
            generation_key("a1", thread_id),
        )
        # The ended run: typed exit codes for a wrong stage and for an unknown run.
        again = await asyncio.to_thread(_crux, client, "abandon", workflow_id)
        assert again.returncode == 4, again.stderr
        missing = await asyncio.to_thread(_crux, client, "show", "nope", "--thread", thread_id)
        assert missing.returncode == 3 and "not_found" in missing.stderr
        usage = await asyncio.to_thread(_crux, client, "show")
        assert usage.returncode == 2
    await record_history(client, workflow_id, "operator_abandon")
