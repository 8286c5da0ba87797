"""Temporal history of a generation stays small and flat as its Thread grows.

Receipts and inspections are written to PostgreSQL before each attempt and named by id
afterwards; the facade loads them back, so callers get the same complete result. The read
carries only the history its policy can use, plus one aggregate for the rest. The ceilings
are what Temporal itself counts (`history_size_bytes`) on a 128k-token model: 8 KB per
generation under recent and managed history at every Thread length up to 10,000 messages
(a managed turn that prepares its summary inline included), 12 KB under exact history on a
window-filling Thread. Threads are seeded directly
through the Thread store (the 10,000-message one in turns of five exchanges, so seeding
stays cheap). `CRUX_SOAK=1` adds a 10,000-message Thread of two-message turns of varied
length.
"""

from __future__ import annotations

import os
import random
import re
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import pytest
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities import GenerationActivities
from contracts.activities import CommitTurnInput, RecordPlanInput
from contracts.generation import StepFigures
from crux._worker import build_worker, worker_resources
from crux.models import HistorySpec, generation_key, workflow_id_for
from crux.runtime import Runtime
from planner import ModelCatalog, ModelProfile
from storage import GenerationStore, ThreadStore
from tests.helpers import closed_run, payload_text, settings_for
from vocabulary.messages import Message

MODEL = "offline:window-128k"
PROFILE = ModelProfile(
    id=MODEL,
    provider="offline",
    context_window=128_000,
    default_output_reserve=4_096,
    confidence="exact",
    encoding="cl100k_base",
)
FLAT_CEILING = 8 * 1024
"""Generations under recent and managed history, at every Thread length."""
EXACT_CEILING = 12 * 1024
"""Exact history on a Thread that fills most of the model's window."""
# Recent history up to this many content tokens: with per-message structure it fills most
# of the model's strict input maximum, so the request skeleton is as long as it gets.
RECENT_TOKENS = 96_000


@asynccontextmanager
async def _runtime(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> AsyncIterator[tuple[Runtime, GenerationActivities]]:
    catalog = ModelCatalog.default().with_profiles(PROFILE)
    task_queue = f"flat-{uuid.uuid4().hex[:8]}"
    settings = settings_for(database_url).model_copy(update={"task_queue": task_queue})
    async with (
        worker_resources(settings, pool=pool, catalog=catalog) as activities,
        build_worker(client, task_queue=task_queue, activities=activities),
    ):
        runtime = Runtime(client, pool, task_queue=task_queue, catalog=catalog, default_model=MODEL)
        yield runtime, activities


async def _seed(
    pool: asyncpg.Pool,
    thread_id: str,
    messages: int,
    words: tuple[int, int],
    exchanges: int = 1,
) -> None:
    """Publish `messages` messages as user/assistant turns, with generation-style ids.

    Each message has between `words[0]` and `words[1]` words (a fixed pseudo-random draw);
    each causal group holds `exchanges` question/answer pairs.
    """
    store = ThreadStore(pool)
    rng = random.Random(messages)

    def text() -> str:
        return " ".join(["packing"] * rng.randint(*words))

    for turn in range(messages // (2 * exchanges)):
        key = f"gen_{uuid.uuid4().hex}"
        group: list[Message] = []
        for pair in range(exchanges):
            group.append(
                Message(id=f"gen:{key}:user{pair}", role="user", content=f"Day {turn}: {text()}?")
            )
            group.append(
                Message(id=f"gen:{key}:assistant{pair}", role="assistant", content=f"{text()}.")
            )
        await store.append(thread_id, group)


async def _history_bytes(client: Client, generation_id: str, thread_id: str) -> tuple[int, str]:
    """Temporal's own count of the run's history bytes, and its payloads as text."""
    handle = await closed_run(client, workflow_id_for(generation_id, thread_id))
    described = await handle.describe()
    size = described.raw_description.workflow_execution_info.history_size_bytes
    history = await handle.fetch_history()
    return size, payload_text(history.to_json_dict())


async def _generate_and_measure(
    client: Client,
    runtime: Runtime,
    thread_id: str,
    generation_id: str,
    history: HistorySpec | None = None,
) -> int:
    history = history or HistorySpec(kind="recent", tokens=RECENT_TOKENS)
    result = await runtime.generate(
        "What should I pack next?", thread=thread_id, generation_id=generation_id, history=history
    )
    size, dumped = await _history_bytes(client, generation_id, thread_id)
    # The result the caller holds is complete: its receipt is the stored one, and so is the
    # inspection, yet neither crossed history after the attempt named it.
    [step] = result.steps
    assert await runtime.receipt(step.request.id) == step.request
    inspection = await runtime.inspect(step.request)
    assert inspection.id == step.request.id
    assert step.request.id in dumped
    assert '"breakdown"' not in dumped and '"adaptations"' not in dumped, "receipt in history"
    # A summary's support calls (one per chunk of a long prefix) are linked from the stored
    # artifact when the plan is recorded, never listed in a payload.
    assert re.search(r'"support_requests?(_ids)?":\[[^\]]', dumped) is None, "support calls"

    return size


async def test_a_first_turn_stays_under_its_ceiling(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    async with _runtime(client, pool, database_url) as (runtime, _):
        first = await _generate_and_measure(client, runtime, f"flat:{uuid.uuid4().hex[:6]}", "f1")
    assert first <= FLAT_CEILING, first


async def test_a_window_filling_thread_stays_under_the_ceilings(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    # 2,000 messages of about 45 tokens fill most of a 128k model's window: exact history
    # lists every group, and recent history up to 96k tokens nearly as many.
    long_thread = f"flat-long:{uuid.uuid4().hex[:6]}"
    await _seed(pool, long_thread, 2_000, words=(40, 40))
    async with _runtime(client, pool, database_url) as (runtime, _):
        exact = await _generate_and_measure(
            client, runtime, long_thread, "f2x", HistorySpec(kind="exact")
        )
        recent = await _generate_and_measure(client, runtime, long_thread, "f2")
    assert exact <= EXACT_CEILING, exact
    assert recent <= FLAT_CEILING, recent


@pytest.mark.parametrize(
    ("messages", "exchanges"), [(0, 1), (10, 1), (100, 1), (1_000, 1), (10_000, 5)]
)
async def test_recent_and_managed_history_stay_flat_at_every_length(
    client: Client, pool: asyncpg.Pool, database_url: str, messages: int, exchanges: int
) -> None:
    thread_id = f"flat-{messages}:{uuid.uuid4().hex[:6]}"
    await _seed(pool, thread_id, messages, words=(5, 80), exchanges=exchanges)
    managed = HistorySpec(kind="managed")
    async with _runtime(client, pool, database_url) as (runtime, _):
        recent = await _generate_and_measure(
            client, runtime, thread_id, f"r{messages}", HistorySpec(kind="recent", messages=20)
        )
        # On a long Thread the first managed turn prepares its summary inline; the next
        # one finds it ready.
        first = await _generate_and_measure(client, runtime, thread_id, f"m{messages}", managed)
        plain = await _generate_and_measure(client, runtime, thread_id, f"n{messages}", managed)
    assert recent <= FLAT_CEILING, recent
    assert plain <= FLAT_CEILING, plain
    assert first <= FLAT_CEILING, first


@pytest.mark.skipif(os.environ.get("CRUX_SOAK") != "1", reason="set CRUX_SOAK=1 (a minute or two)")
async def test_ten_thousand_messages_stay_under_the_ceiling(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"flat-10k:{uuid.uuid4().hex[:6]}"
    await _seed(pool, thread_id, 10_000, words=(5, 80))
    async with _runtime(client, pool, database_url) as (runtime, _):
        size = await _generate_and_measure(client, runtime, thread_id, "f10k")
        recent = await _generate_and_measure(
            client, runtime, thread_id, "r10k", HistorySpec(kind="recent", messages=20)
        )
        managed = HistorySpec(kind="managed")
        first = await _generate_and_measure(client, runtime, thread_id, "m10k", managed)
        plain = await _generate_and_measure(client, runtime, thread_id, "n10k", managed)
    assert max(size, recent, first, plain) <= FLAT_CEILING, (size, recent, first, plain)


async def test_a_retried_record_and_a_replayed_commit_write_once(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"flat-once:{uuid.uuid4().hex[:6]}"
    async with _runtime(client, pool, database_url) as (runtime, activities):
        generation = await runtime.generate("Hello", thread=thread_id, generation_id="once")
        [step] = generation.steps
        inspection = await runtime.inspect(step.request)
        # The record step retried after a lost completion (even with a drifted copy of the
        # receipt): the first row stays, and there is one.
        drifted = step.request.model_copy(update={"input_tokens": step.request.input_tokens + 1})
        for receipt in (step.request, drifted):
            await ActivityEnvironment().run(
                activities.record_plan,
                RecordPlanInput(
                    generation_id="once",
                    thread_id=thread_id,
                    receipt=receipt,
                    inspection=inspection,
                ),
            )
        rows = await pool.fetchval(
            "SELECT count(*) FROM crux_request_receipts WHERE request_id = $1", step.request.id
        )
        assert rows == 1
        assert await runtime.receipt(step.request.id) == step.request
        # A commit replayed after its completion was lost returns the stored outcome and
        # publishes nothing again.
        replay = CommitTurnInput(
            generation_id="once",
            workflow_id=workflow_id_for("once", thread_id),
            thread_id=thread_id,
            accepted_attempt=1,
            history_source="thread",
            steps=[
                StepFigures(
                    attempt=1,
                    request_id=step.request.id,
                    usage=step.usage,
                    finish_reason=step.finish_reason,
                    output_tokens=step.output_tokens,
                )
            ],
        )
        again = await ActivityEnvironment().run(activities.commit_turn, replay)
        # Only what the input does not say crosses history: the commit receipt.
        assert set(again.delta) == {"thread_commit"}
        outcome = again.outcome(replay)
        assert outcome.request_ids == (step.request.id,)
        assert outcome.thread_commit == generation.thread_commit
        # The facade's complete result is the ledger's, receipts included.
        stored = await GenerationStore(pool).find_result(generation_key("once", thread_id))
        assert stored is not None and stored.steps == generation.steps
    view = await ThreadStore(pool).read_history_view(thread_id)
    assert [entry.id for entry in view.messages] == ["gen:once:user", "gen:once:assistant"]
