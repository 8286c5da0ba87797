"""A generation's time budget on the real stack.

Expiring before the commit stops the provider attempt and commits nothing; expiring while
the commit is in flight (here: waiting out a storage outage in `commit_blocked`) waits for
the commit's outcome and then reports that the turn was committed.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest
from temporalio.client import Client
from temporalio.service import RPCError

import crux
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import eventually, new_worker, settings_for
from vocabulary.ids import workflow_id_for

MODEL = "openai:gpt-4o-mini"


async def _committed_roles(pool: asyncpg.Pool, thread_id: str) -> list[str]:
    try:
        snapshot = await ThreadStore(pool).read(thread_id)
    except crux.ThreadError as error:
        if error.code == "not_found":
            return []
        raise
    return [entry.role for entry in snapshot.entries if isinstance(entry, crux.MessageEntry)]


async def test_a_budget_expiring_during_the_provider_call_commits_nothing(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"budget-early:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="far too late", delay_seconds=30))
    loop = asyncio.get_running_loop()
    async with new_worker(client, pool, settings) as worker:
        started = loop.time()
        with pytest.raises(crux.GenerationTimeoutError) as raised:
            await worker.runtime.generate(
                "Answer slowly", thread=thread_id, model=MODEL, time_budget_seconds=2
            )
        elapsed = loop.time() - started
    error = raised.value
    assert (error.committed, error.budget_seconds, error.stage) == (False, 2.0, "invoking")
    assert "nothing was committed" in str(error)
    # The run did not wait for the provider's answer.
    assert elapsed < 20
    assert await _committed_roles(pool, thread_id) == []


async def test_a_budget_expiring_while_the_commit_is_in_flight_waits_for_its_outcome(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"budget-late:{uuid.uuid4().hex[:6]}"
    openai_server.enqueue(TextReply(text="kept", delay_seconds=1.5))
    async with new_worker(client, pool, settings) as worker:
        run = asyncio.ensure_future(
            worker.runtime.generate(
                "Keep this",
                thread=thread_id,
                model=MODEL,
                generation_id="late-1",
                time_budget_seconds=6,
            )
        )
        handle = client.get_workflow_handle(workflow_id_for("late-1", thread_id))

        async def stage() -> str:
            try:
                return await handle.query("get_stage", result_type=str)
            except RPCError:  # not started yet
                return ""

        await eventually(stage, lambda value: value == "invoking", timeout=30)
        # While the provider answers, take the ledger away: the commit now waits out a
        # storage outage, in flight, past the budget.
        await pool.execute("ALTER TABLE crux_generations RENAME TO crux_generations_offline")
        try:
            await eventually(stage, lambda value: value == "commit_blocked", timeout=30)
            await asyncio.sleep(7)
            # The budget has expired; the run still waits for the commit's outcome.
            assert not run.done()
            assert await stage() == "commit_blocked"
        finally:
            await pool.execute("ALTER TABLE crux_generations_offline RENAME TO crux_generations")
        with pytest.raises(crux.GenerationTimeoutError) as raised:
            await asyncio.wait_for(run, timeout=90)
        replay = await worker.runtime.generate(
            "Keep this", thread=thread_id, model=MODEL, generation_id="late-1"
        )
    error = raised.value
    assert (error.committed, error.stage) == (True, "committing")
    assert "the turn was committed" in str(error)
    assert await _committed_roles(pool, thread_id) == ["user", "assistant"]
    # The same generation id returns the committed turn.
    assert replay.result.replayed and replay.text == "kept"
