"""Nothing of a failed, cancelled or abandoned generation stays behind; stages are visible.

Runs against the real Temporal dev server, PostgreSQL and the loopback OpenAI server; rows
are counted in PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

import crux
from crux.logs import configure_logging
from crux.messages import Message
from crux.models import generation_key, workflow_id_for
from providers.loopback import (
    ErrorReply,
    LoopbackOpenAIServer,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from storage import GenerationStore, ThreadStore
from tests.helpers import eventually, new_worker, settings_for
from vocabulary.errors import ConfigurationError, ThreadError
from workflows.generation import ManagedGenerationWorkflow
from workflows.summary import SummaryWorkflow

STAGE = SearchAttributeKey.for_keyword("CruxStage")
THREAD = SearchAttributeKey.for_keyword("CruxThreadId")
GENERATION = SearchAttributeKey.for_keyword("CruxGenerationId")
MODEL = SearchAttributeKey.for_keyword("CruxModel")


async def _staged(
    pool: asyncpg.Pool, generation_id: str, thread_id: str | None = None
) -> list[asyncpg.Record]:
    """Staged rows that hold text (the content-free identity fingerprint is not one)."""
    return await pool.fetch(
        "SELECT kind, thread_id FROM crux_generation_staging "
        "WHERE generation_id = $1 AND kind <> 'identity'",
        generation_key(generation_id, thread_id),
    )


async def _stage_attribute(handle: WorkflowHandle[Any, Any]) -> str | None:
    described = await handle.describe()
    return described.typed_search_attributes.get(STAGE)


async def test_plain_client_start_shows_its_stage_and_a_cancel_discards_its_staging(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = f"cancel:{uuid.uuid4().hex[:6]}"
    generation_id = "plain-1"
    # A slow provider keeps the run in `invoking` long enough to look at it and cancel it.
    openai_server.enqueue(TextReply(text="too late", delay_seconds=30))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        # A plain Temporal client, as the README shows: no search attributes passed.
        handle = await client.start_workflow(
            "ManagedGenerationWorkflow",
            {
                "generation_id": generation_id,
                "thread_id": thread_id,
                "model": "openai:local-model",
                "input": "Private question that must not outlive the run",
            },
            id=workflow_id_for(generation_id, thread_id),
            task_queue=worker.task_queue,
        )
        await eventually(lambda: _stage_attribute(handle), lambda stage: stage == "invoking")
        described = await handle.describe()
        attributes = described.typed_search_attributes
        assert attributes.get(THREAD) == thread_id
        assert attributes.get(GENERATION) == generation_id
        assert attributes.get(MODEL) == "openai:local-model"
        assert len(await _staged(pool, generation_id, thread_id)) >= 1

        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        assert await _staged(pool, generation_id, thread_id) == []
        assert await _stage_attribute(handle) == "cancelled"
    # The cleanup path is deterministic: its history replays against the workflow code.
    await _replayer().replay_workflow(await handle.fetch_history())


async def test_failed_generation_discards_staged_input_and_call_site_messages(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    thread_id = f"fail:{uuid.uuid4().hex[:6]}"
    generation_id = "fails-1"
    # A 401 is final; the short delay leaves time to look at the staged rows meanwhile.
    openai_server.enqueue(ErrorReply(status=401, message="bad key", delay_seconds=2))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        task = asyncio.create_task(
            worker.runtime.generate(
                "Summarise our chat",
                thread=thread_id,
                model="openai:local-model",
                generation_id=generation_id,
                messages=[
                    Message(role="user", content="secret call-site question"),
                    Message(role="assistant", content="secret call-site answer"),
                ],
            )
        )
        rows = await eventually(
            lambda: _staged(pool, generation_id, thread_id), lambda r: len(r) >= 2
        )
        # Every staged row, call-site messages included, carries the Thread id, so
        # deleting the Thread reaches it even while the run is in flight.
        assert {row["thread_id"] for row in rows} == {thread_id}
        assert "caller-messages" in {row["kind"] for row in rows}
        with pytest.raises(Exception):  # noqa: B017 - the typed mapping is tested elsewhere
            await task
    assert await _staged(pool, generation_id, thread_id) == []


async def test_failed_ad_hoc_generation_discards_its_staging(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    openai_server.enqueue(ErrorReply(status=404, message="no such model"))
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    async with new_worker(client, pool, settings) as worker:
        with pytest.raises(Exception):  # noqa: B017
            await worker.runtime.generate(
                "ad hoc question", model="openai:missing", generation_id="adhoc-fails"
            )
    assert await _staged(pool, "adhoc-fails") == []


async def test_deleting_a_thread_reaches_call_site_messages(pool: asyncpg.Pool) -> None:
    store = GenerationStore(pool)
    threads = ThreadStore(pool)
    await threads.append("erase-me", [Message(id="m1", role="user", content="hello")])
    await store.stage_messages(
        "in-flight", "caller-messages", [Message(role="user", content="x")], thread_id="erase-me"
    )
    await threads.delete("erase-me")
    assert await _staged(pool, "in-flight") == []


async def test_sweep_removes_only_old_staging_of_unfinished_generations_and_unread_replies(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = settings_for(database_url)
    async with new_worker(client, pool, settings) as worker:
        runtime = worker.runtime
        # Ad-hoc replies kept for a reader who has not come: an old one and a fresh one.
        for generation_id in ("adhoc-unread", "adhoc-fresh"):
            await client.execute_workflow(
                "ManagedGenerationWorkflow",
                {"generation_id": generation_id, "input": "kept answer"},
                id=workflow_id_for(generation_id, None),
                task_queue=worker.task_queue,
            )
    store = GenerationStore(pool)
    # An abandoned run (terminated, or its start never reached Temporal) and a fresh one.
    await store.stage("abandoned", 0, "user", Message(role="user", content="old text"))
    await store.stage("in-flight", 0, "user", Message(role="user", content="new text"))
    await pool.execute(
        "UPDATE crux_generation_staging SET created_at = now() - interval '2 days' "
        "WHERE generation_id IN ('abandoned', 'adhoc-unread')"
    )
    completed = await asyncio.to_thread(
        _crux, "db", "sweep", "--older-than", "86400", database_url=database_url
    )
    assert completed.returncode == 0, completed.stderr
    assert "swept 2 staged row(s)" in completed.stdout
    assert await _staged(pool, "abandoned") == []
    assert len(await _staged(pool, "in-flight")) == 1
    # An unread reply older than the retention is gone; a fresh one waits for its reader.
    assert await _staged(pool, "adhoc-unread") == []
    assert [row["kind"] for row in await _staged(pool, "adhoc-fresh")] == ["final"]
    with pytest.raises(crux.ThreadError):
        await runtime.read_generation("adhoc-unread")
    assert (await runtime.read_generation("adhoc-fresh")).text
    # The finished generations keep their content-free ledger rows and identities.
    identities = await pool.fetchval(
        "SELECT count(*) FROM crux_generation_staging WHERE kind = 'identity'"
        " AND generation_id IN ('adhoc-unread', 'adhoc-fresh')"
    )
    assert identities == 2
    ledger = await pool.fetchval(
        "SELECT count(*) FROM crux_generations"
        " WHERE generation_id IN ('adhoc-unread', 'adhoc-fresh')"
    )
    assert ledger == 2


async def test_an_invented_tool_name_never_reaches_the_log(
    client: Client,
    pool: asyncpg.Pool,
    database_url: str,
    openai_server: LoopbackOpenAIServer,
    capfd: pytest.CaptureFixture[str],
) -> None:
    lookup = crux.tool("lookup", lambda arguments: "ok")
    assistant = crux.prompt(id="lookup", use=[lookup])
    invented = "leak_4242_SECRET_name"
    openai_server.enqueue(
        tool_call_reply(ScriptedToolCall(name=invented, arguments={"q": "x"})),
        TextReply(text="done"),
    )
    configure_logging(log_format="json", level="debug")
    try:
        settings = settings_for(database_url, openai_base_url=openai_server.base_url)
        async with new_worker(client, pool, settings, tools=[lookup]) as worker:
            result = await worker.runtime.generate(
                assistant,
                input="look it up",
                thread=f"tools:{uuid.uuid4().hex[:6]}",
                model="openai:gpt-4o",
            )
        captured = capfd.readouterr()
    finally:
        logging.getLogger().setLevel(logging.WARNING)
    assert result.text == "done"
    output = captured.out + captured.err
    completed = [
        json.loads(line)
        for line in output.splitlines()
        if line.startswith("{") and "tool.call.completed" in line
    ]
    assert completed and completed[0]["tool_known"] is False
    assert "SECRET" not in output


def _replayer() -> Replayer:
    return Replayer(
        workflows=[ManagedGenerationWorkflow, SummaryWorkflow],
        data_converter=pydantic_data_converter,
    )


def _crux(*arguments: str, database_url: str) -> Any:
    import os
    import subprocess
    import sys

    env = {**os.environ, "CRUX_DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-m", "crux", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


async def test_summary_workflow_sets_its_own_search_attributes(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"summary:{uuid.uuid4().hex[:6]}"
    threads = ThreadStore(pool)
    for index in range(4):
        role = "user" if index % 2 == 0 else "assistant"
        await threads.append(
            thread_id, [Message(id=f"m{index}", role=role, content=f"turn {index} about trains")]
        )
    settings = settings_for(database_url)
    async with new_worker(client, pool, settings) as worker:
        handle = await client.start_workflow(
            "SummaryWorkflow",
            {
                "thread_id": thread_id,
                "through_id": "m1",
                "strategy": "regenerate",
                "model": "offline:echo",
                "counting_model": "offline:echo",
                "generation_id": "asked-by",
            },
            id=f"summary-test/{thread_id}",
            task_queue=worker.task_queue,
        )
        await handle.result()
    attributes = (await handle.describe()).typed_search_attributes
    assert attributes.get(STAGE) == "completed"
    assert attributes.get(THREAD) == thread_id
    assert attributes.get(GENERATION) == "asked-by"
    assert attributes.get(MODEL) == "offline:echo"


async def test_a_running_worker_sweeps_orphaned_staging(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    store = GenerationStore(pool)
    await store.stage("terminated-run", 0, "user", Message(role="user", content="old text"))
    await pool.execute(
        "UPDATE crux_generation_staging SET created_at = now() - interval '3 hours' "
        "WHERE generation_id = 'terminated-run'"
    )
    await store.stage("young-run", 0, "user", Message(role="user", content="new text"))
    settings = settings_for(database_url).model_copy(
        update={
            "task_queue": f"sweep-{uuid.uuid4().hex[:8]}",
            "temporal_address": client.service_client.config.target_host,
            "staging_retention_seconds": 3_600.0,
            "sweep_interval_seconds": 60.0,
        }
    )
    async with crux.Worker(settings=settings, client=client):
        await eventually(lambda: _staged(pool, "terminated-run"), lambda rows: rows == [])
    assert len(await _staged(pool, "young-run")) == 1


async def test_plain_client_sees_commit_blocked_in_the_stage_attribute(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"blocked:{uuid.uuid4().hex[:6]}"
    generation_id = "blocked-1"
    # PostgreSQL itself refuses the commit's writes with a connection-class error, as it
    # would while failing over; nothing of ours is replaced.
    await pool.execute(
        """
        CREATE FUNCTION crux_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'failing over' USING ERRCODE = '08006'; END $$;
        CREATE TRIGGER crux_test_refuse BEFORE INSERT ON crux_thread_messages
        FOR EACH ROW EXECUTE FUNCTION crux_test_refuse();
        """
    )
    settings = settings_for(database_url)
    async with new_worker(client, pool, settings) as worker:
        handle = await client.start_workflow(
            "ManagedGenerationWorkflow",
            {"generation_id": generation_id, "thread_id": thread_id, "input": "hello"},
            id=workflow_id_for(generation_id, thread_id),
            task_queue=worker.task_queue,
        )
        await eventually(
            lambda: _stage_attribute(handle), lambda stage: stage == "commit_blocked", timeout=30
        )
        await pool.execute("DROP TRIGGER crux_test_refuse ON crux_thread_messages")
        result = await asyncio.wait_for(handle.result(), timeout=90)
    assert result["thread_commit"]["status"] == "selected"
    assert await _stage_attribute(handle) == "completed"
    await _replayer().replay_workflow(await handle.fetch_history())


async def test_an_ad_hoc_reply_is_erased_by_its_generation_id(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    settings = settings_for(database_url)
    async with new_worker(client, pool, settings) as worker:
        runtime = worker.runtime
        # The facade erases the reply once it read it; an unread one (a plain client's run)
        # is erased by id (tests/e2e/test_any_client.py).
        done = await runtime.generate("erase me after reading", generation_id="adhoc-read")
        assert done.text and done.result.thread_id is None
        assert await _staged(pool, "adhoc-read") == []
        assert await runtime.erase_generation("adhoc-read") is False
        assert await runtime.erase_generation("never-ran") is False
        # Running it again is no second turn: the output is no longer stored.
        with pytest.raises(ThreadError) as gone:
            await runtime.generate("erase me after reading", generation_id="adhoc-read")
        assert gone.value.code == "not_found"
        # A Thread's reply is a Thread message: erasing by generation id leaves it.
        kept = await runtime.generate("on a thread", generation_id="g1", thread="erase-thread")
        assert await runtime.erase_generation("g1") is False
        assert kept.text
        with pytest.raises(ConfigurationError):
            await runtime.erase_generation("")
