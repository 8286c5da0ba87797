"""Managed history end to end: summary of older turns plus an exact recent suffix."""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux.models import workflow_id_for
from providers.loopback import LoopbackOpenAIServer
from storage import ThreadStore
from tests.helpers import closed_run, eventually, new_worker, settings_for

MODEL = "openai:gpt-4o-mini"
TOPIC = "The quarterly logistics review covered warehouse capacity, carrier contracts and "


async def _grow(worker: object, thread_id: str, turns: int) -> None:
    runtime = worker.runtime  # type: ignore[attr-defined]
    for turn in range(turns):
        await runtime.generate(
            f"{TOPIC} item number {turn} with its own details and numbers {turn * 17}.",
            thread=thread_id,
            model=MODEL,
            generation_id=f"grow-{turn}",
        )


def _managed(**options: object) -> crux.Prompt:
    return crux.prompt(
        id="managed",
        use=[crux.history(recent={"messages": 4}, **options)],  # type: ignore[arg-type]
    )


async def test_inline_summary_replaces_older_turns_and_is_linked(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"managed:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        await _grow(worker, thread_id, 6)
        before = len(openai_server.requests)
        result = await worker.runtime.generate(
            _managed(),
            input="What did we decide about carriers?",
            thread=thread_id,
            model=MODEL,
            input_budget={"max": 250},
            generation_id="managed-1",
        )
    receipt = result.steps[0].request
    assert receipt.input_tokens <= 250
    assert any(
        a.contributor == "history" and a.representation == "summary" for a in receipt.adaptations
    )
    assert "HISTORY_SUMMARY_INLINE" in {w.code for w in receipt.warnings}
    sent = openai_server.requests[-1].body["messages"]
    summary_messages = [m for m in sent if str(m["content"]).startswith("Summary of the earlier")]
    assert len(summary_messages) == 1
    assert summary_messages[0]["role"] == "assistant"
    # One support call at least, then the main call.
    assert len(openai_server.requests) - before >= 2
    inspection = await worker.runtime.inspect(receipt)
    assert inspection.artifacts
    artifacts = await pool.fetch(
        "SELECT artifact_id, source_message_ids FROM crux_derived_artifacts"
    )
    assert len(artifacts) == 1
    history = await (
        await closed_run(client, workflow_id_for("managed-1", thread_id))
    ).fetch_history()
    assert "item number" not in history.to_json()
    # The canonical Thread is untouched: 7 turns, 14 messages.
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert len(view.messages) == 14

    # Redacting a covered message erases the derived summary in the same operation.
    covered = artifacts[0]["source_message_ids"][0]
    await ThreadStore(pool).redact(thread_id, [covered])
    assert await pool.fetchval("SELECT count(*) FROM crux_derived_artifacts") == 0


async def test_on_miss_fail_raises_typed_before_dispatch(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"managed-fail:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        await _grow(worker, thread_id, 6)
        before = len(openai_server.requests)
        with pytest.raises(crux.RequestCompositionError) as raised:
            await worker.runtime.generate(
                _managed(on_miss="fail"),
                input="Anything?",
                thread=thread_id,
                model=MODEL,
                input_budget={"max": 250},
            )
        # The refresh it lacked was started in the background: a later turn fits.
        await eventually(
            lambda: pool.fetchval(
                "SELECT count(*) FROM crux_derived_artifacts WHERE thread_id = $1", thread_id
            ),
            lambda count: count >= 1,
        )
        later = await worker.runtime.generate(
            _managed(on_miss="fail"),
            input="Later?",
            thread=thread_id,
            model=MODEL,
            input_budget={"max": 250},
        )
        assert later.steps[0].request.input_tokens <= 250
    assert raised.value.code == "REPRESENTATION_UNAVAILABLE"
    # The request itself was never sent (the refresh it lacked may have started meanwhile).
    sent = [r.body for r in openai_server.requests[before:]]
    assert not [b for b in sent if b["messages"][-1]["content"] == "Anything?"]


async def test_recent_only_degrades_without_a_summary(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"managed-recent:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        await _grow(worker, thread_id, 6)
        before = len(openai_server.requests)
        result = await worker.runtime.generate(
            _managed(on_miss="recent-only"),
            input="Anything?",
            thread=thread_id,
            model=MODEL,
            input_budget={"max": 250},
        )
    receipt = result.steps[0].request
    assert receipt.input_tokens <= 250
    assert "HISTORY_SUMMARY_INLINE" not in {w.code for w in receipt.warnings}
    [main] = [
        r.body for r in openai_server.requests[before:]
        if r.body["messages"][-1]["content"] == "Anything?"
    ]  # fmt: skip
    assert not [m for m in main["messages"] if str(m["content"]).startswith("Summary of")]


async def test_background_maintenance_prepares_a_summary_for_later_turns(
    client: Client, pool: asyncpg.Pool, database_url: str, openai_server: LoopbackOpenAIServer
) -> None:
    settings = settings_for(database_url, openai_base_url=openai_server.base_url)
    thread_id = f"managed-bg:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings) as worker:
        await _grow(worker, thread_id, 6)
        first = await worker.runtime.generate(
            _managed(),
            input="First managed turn",
            thread=thread_id,
            model=MODEL,
            input_budget={"optimize_at": 300, "max": 4000},
        )
        assert "HISTORY_MAINTENANCE_SCHEDULED" in {w.code for w in first.steps[0].request.warnings}

        async def artifacts() -> int:
            return int(await pool.fetchval("SELECT count(*) FROM crux_derived_artifacts"))

        await eventually(artifacts, lambda count: count >= 1, timeout=30)
        second = await worker.runtime.generate(
            _managed(),
            input="Second managed turn",
            thread=thread_id,
            model=MODEL,
            input_budget={"optimize_at": 300, "max": 4000},
        )
    adaptations = {a.contributor: a.representation for a in second.steps[0].request.adaptations}
    assert adaptations.get("history") == "summary"
