"""History bytes of one generation by Thread length, on a 128k-token model profile.

Each Thread is seeded directly through the Thread store (user/assistant turns of varied
length with the ids generations give them), then one generation with recent history runs on
it. Printed per
length: the bytes Temporal counts for the run (`history_size_bytes`, what its limits apply
to), the size of the history's JSON export, and the anchor: the bytes of the transcript the
request covered, i.e. what passing the transcript through workflow payloads would put in
history at least once.
"""

from __future__ import annotations

import random
import time
import uuid
from dataclasses import dataclass

import asyncpg
from temporalio.client import Client

from contracts.generation import HistorySpec
from crux._worker import build_worker, worker_resources
from crux.runtime import Runtime
from planner import ModelCatalog, ModelProfile
from storage import ThreadStore
from vocabulary.ids import workflow_id_for
from vocabulary.messages import Message
from vocabulary.settings import Settings

MODEL = "offline:window-128k"
PROFILE = ModelProfile(
    id=MODEL,
    provider="offline",
    context_window=128_000,
    default_output_reserve=4_096,
    confidence="exact",
    encoding="cl100k_base",
)
LENGTHS = (0, 10, 100, 1_000, 10_000)
RECENT_TOKENS = 80_000
"""Recent history of up to 80k content tokens: with per-message structure it fills most of
the model's strict input maximum, so the request skeleton is as long as it gets."""


@dataclass(frozen=True)
class HistoryRow:
    """One measured generation."""

    messages: int
    history_bytes: int
    json_bytes: int
    transcript_bytes: int
    seed_seconds: float


_WORDS = ("pack", "water", "map", "layer", "boots", "route", "ridge", "camp", "stove", "rain")


def _words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(count))


async def _seed(store: ThreadStore, thread_id: str, messages: int) -> None:
    """User/assistant turns of varied length, about 45 tokens per message on average."""
    rng = random.Random(messages)
    for turn in range(messages // 2):
        key = f"gen_{uuid.uuid4().hex}"
        await store.append(
            thread_id,
            [
                Message(
                    id=f"gen:{key}:user",
                    role="user",
                    content=f"Question {turn}: {_words(rng, rng.randint(5, 50))}?",
                ),
                Message(
                    id=f"gen:{key}:assistant",
                    role="assistant",
                    content=f"{_words(rng, rng.randint(10, 80))}.",
                ),
            ],
        )


async def measure_history_bytes(
    client: Client, pool: asyncpg.Pool, settings: Settings, lengths: tuple[int, ...] = LENGTHS
) -> list[HistoryRow]:
    """Run one generation per Thread length and measure its history."""
    catalog = ModelCatalog.default().with_profiles(PROFILE)
    task_queue = f"bench-history-{uuid.uuid4().hex[:6]}"
    settings = settings.model_copy(update={"task_queue": task_queue})
    store = ThreadStore(pool)
    rows: list[HistoryRow] = []
    async with (
        worker_resources(settings, pool=pool, catalog=catalog) as activities,
        build_worker(client, task_queue=task_queue, activities=activities),
    ):
        runtime = Runtime(client, pool, task_queue=task_queue, catalog=catalog, default_model=MODEL)
        for length in lengths:
            thread_id = f"bench-history:{length}:{uuid.uuid4().hex[:6]}"
            started = time.perf_counter()
            await _seed(store, thread_id, length)
            seeded = time.perf_counter() - started
            generation_id = f"h{length}"
            result = await runtime.generate(
                "What else should I pack?",
                thread=thread_id,
                generation_id=generation_id,
                history=HistorySpec(kind="recent", tokens=RECENT_TOKENS),
            )
            handle = client.get_workflow_handle(workflow_id_for(generation_id, thread_id))
            described = await handle.describe()
            history = await handle.fetch_history()
            # The anchor: the transcript the request covered (history sent plus the turn).
            inspection = await runtime.inspect(result.steps[0].request)
            view = await store.read_history_view(thread_id)
            sent = [entry.id for entry in view.messages][:-2][-inspection.history.messages_after :]
            covered = (
                await store.load_messages(thread_id, sent)
                if inspection.history.messages_after
                else []
            )
            [user] = await store.load_messages(thread_id, [view.messages[-2].id])
            rows.append(
                HistoryRow(
                    messages=length,
                    history_bytes=described.raw_description.workflow_execution_info.history_size_bytes,
                    json_bytes=len(history.to_json()),
                    transcript_bytes=sum(len(m.model_dump_json()) for m in [*covered, user]),
                    seed_seconds=seeded,
                )
            )
    return rows


def print_history_bytes(rows: list[HistoryRow]) -> None:
    """Print the table."""
    print(f"  history bytes per generation, {MODEL} (128k window), recent history")
    print("    thread messages   history B   JSON export B   transcript B   history/transcript")
    for row in rows:
        ratio = row.history_bytes / max(1, row.transcript_bytes)
        print(
            f"    {row.messages:15,d} {row.history_bytes:11,d} {row.json_bytes:15,d}"
            f" {row.transcript_bytes:14,d} {ratio:20.3f}"
        )
    spread = max(r.history_bytes for r in rows) - min(r.history_bytes for r in rows)
    print(f"    spread over lengths: {spread:,d} B (flat history: bounded, not per message)")
