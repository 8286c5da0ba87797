"""History bytes of one generation by Thread length and history policy, on a 128k-token model.

Each Thread is seeded directly through the Thread store (user/assistant turns of varied
length with the ids generations give them), then generations run on it under
`history.recent()`, managed `history()` and exact history. Printed per length: the bytes
Temporal counts for each run (`history_size_bytes`, what its limits apply to) and the
anchor: the bytes of the transcript the Thread holds, i.e. what passing the transcript
through workflow payloads would put in history at least once.

Managed history runs twice per length: the first generation on a long Thread prepares its
summary inline, the second finds it ready. A managed turn past the maintenance watermark
also starts a summary preparation for later turns. Either way the preparation is a run of
its own: started in the background as a child workflow, or started (or joined) inline by an
activity the turn waits on. Such turns are marked `*` and reported beside the plain ones.
Exact history runs where the Thread fits the model, and on a window-filling Thread
(`EXACT_FILL` messages).

Bounds checked (flat history): at most `FLAT_BOUND` per generation (a summary preparation in
it or not) under recent and managed history at every length, at most
`EXACT_BOUND` under exact history on the window-filling Thread.

Run alone: `.venv/bin/python bench/history_bytes.py [lengths]` (e.g. `0,10,100`).
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass

import asyncpg
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from contracts.activities import ACTIVITY_AWAIT_SUMMARY
from contracts.generation import HistorySpec
from crux._worker import build_worker, worker_resources
from crux.runtime import Runtime
from planner import ModelCatalog, ModelProfile
from planner.policies import DEFAULT_RECENT_MESSAGES
from storage import ThreadStore
from vocabulary.errors import RequestCompositionError
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
EXACT_FILL = 2_400
"""Messages of about 45 tokens that fill most of the 128k model's strict input maximum."""
FLAT_BOUND = 8 * 1024
"""Most history bytes of a generation under recent or managed history."""
EXACT_BOUND = 12 * 1024
"""Most history bytes of a generation under exact history on a window-filling Thread."""

RECENT = HistorySpec(kind="recent", messages=DEFAULT_RECENT_MESSAGES)
MANAGED = HistorySpec(kind="managed")
EXACT = HistorySpec(kind="exact")


@dataclass(frozen=True)
class Run:
    """One generation's history: its bytes, and whether it started a summary preparation."""

    bytes: int
    summary: bool = False

    def cell(self, width: int) -> str:
        """The bytes, marked `*` when a summary preparation joined the turn."""
        return f"{self.bytes:,d}{'*' if self.summary else ' '}".rjust(width)


@dataclass(frozen=True)
class HistoryRow:
    """The generations measured on one Thread (`exact` is `None` when it does not fit)."""

    messages: int
    recent: Run
    managed_first: Run
    managed: Run
    exact: Run | None
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


async def _generation_bytes(
    client: Client, runtime: Runtime, thread_id: str, history: HistorySpec
) -> Run | None:
    """Run one generation; its `history_size_bytes` (`None` if the Thread does not fit)."""
    generation_id = f"h{history.kind}-{uuid.uuid4().hex[:8]}"
    try:
        await runtime.generate(
            "What else should I pack?",
            thread=thread_id,
            generation_id=generation_id,
            history=history,
        )
    except RequestCompositionError as error:
        if error.code != "REQUEST_TOO_LARGE":
            raise
        return None
    handle = client.get_workflow_handle(workflow_id_for(generation_id, thread_id))
    await handle.result()  # measured once the run closed, a little after its commit
    described = await handle.describe()
    events = (await handle.fetch_history()).events
    return Run(
        bytes=described.raw_description.workflow_execution_info.history_size_bytes,
        summary=any(_starts_a_summary(event) for event in events),
    )


def _starts_a_summary(event: HistoryEvent) -> bool:
    """A summary preparation started in the background (a child run) or awaited inline."""
    if event.HasField("start_child_workflow_execution_initiated_event_attributes"):
        return True
    scheduled = event.activity_task_scheduled_event_attributes
    return event.HasField("activity_task_scheduled_event_attributes") and (
        scheduled.activity_type.name == ACTIVITY_AWAIT_SUMMARY
    )


async def _fitting(client: Client, runtime: Runtime, thread_id: str, history: HistorySpec) -> Run:
    """`_generation_bytes` of a policy that always fits (recent and managed history)."""
    size = await _generation_bytes(client, runtime, thread_id, history)
    if size is None:
        raise RuntimeError(f"{history.kind} history did not fit the model")
    return size


async def measure_history_bytes(
    client: Client, pool: asyncpg.Pool, settings: Settings, lengths: tuple[int, ...] = LENGTHS
) -> list[HistoryRow]:
    """Run generations under each history policy per Thread length and measure them."""
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
        for length in sorted({*lengths, EXACT_FILL}):
            thread_id = f"bench-history:{length}:{uuid.uuid4().hex[:6]}"
            started = time.perf_counter()
            await _seed(store, thread_id, length)
            seeded = time.perf_counter() - started
            view = await store.read_history_view(thread_id)
            transcript = await store.load_messages(thread_id, [m.id for m in view.messages])
            # Exact first, on the Thread as seeded (the window-filling one must still fit).
            exact = await _generation_bytes(client, runtime, thread_id, EXACT)
            recent = await _fitting(client, runtime, thread_id, RECENT)
            managed_first = await _fitting(client, runtime, thread_id, MANAGED)
            managed = await _fitting(client, runtime, thread_id, MANAGED)
            rows.append(
                HistoryRow(
                    messages=length,
                    recent=recent,
                    managed_first=managed_first,
                    managed=managed,
                    exact=exact,
                    transcript_bytes=sum(len(m.model_dump_json()) for m in transcript),
                    seed_seconds=seeded,
                )
            )
    return rows


def bound_failures(rows: list[HistoryRow]) -> list[str]:
    """The flat-history bounds the rows break (empty when every one holds)."""
    failures: list[str] = []
    for row in rows:
        for name, run in (
            ("recent()", row.recent),
            ("managed history()", row.managed),
            ("managed history(), 1st", row.managed_first),
        ):
            if run.bytes > FLAT_BOUND:
                failures.append(f"{name} at {row.messages:,d} messages: {run.bytes:,d} B")
        fill = row.exact.bytes if row.exact is not None else None
        if row.messages == EXACT_FILL and (fill is None or fill > EXACT_BOUND):
            failures.append(f"exact on the window-filling Thread: {fill} B")
    return failures


def print_history_bytes(rows: list[HistoryRow]) -> None:
    """Print the table and the bound checks."""
    print(f"  history bytes per generation, {MODEL} (128k window), history_size_bytes")
    print("    thread messages  recent() B  managed B  managed, 1st B      exact B    transcript B")
    for row in rows:
        exact = row.exact.cell(13) if row.exact is not None else "  (too large)"
        fill = " (window-filling)" if row.messages == EXACT_FILL else ""
        print(
            f"    {row.messages:15,d} {row.recent.cell(12)}{row.managed.cell(11)}"
            f"{row.managed_first.cell(16)}{exact} {row.transcript_bytes:14,d}{fill}"
        )
    runs = [run for row in rows for run in (row.recent, row.managed, row.managed_first)]
    plain = [run.bytes for run in runs if not run.summary]
    prepared = [run.bytes for run in runs if run.summary]
    print(
        f"    recent and managed, plain turns: {min(plain):,d} to {max(plain):,d} B"
        f" (bound {FLAT_BOUND:,d} B)"
    )
    if prepared:
        print(
            f"    * a summary preparation (inline, or started for later turns) joined the"
            f" turn: {min(prepared):,d} to {max(prepared):,d} B (bound {FLAT_BOUND:,d} B)"
        )
    failures = bound_failures(rows)
    fill = next((row.exact for row in rows if row.messages == EXACT_FILL), None)
    shown = f"{fill.bytes:,d} B" if fill is not None else "does not fit"
    print(f"    exact on the window-filling Thread: {shown} (bound {EXACT_BOUND:,d} B)")
    print("    bounds: " + ("all hold" if not failures else "BROKEN: " + "; ".join(failures)))


async def _main(lengths: tuple[int, ...]) -> None:
    # Deferred: only the standalone run starts its own servers.
    from bench._figures import bench_database
    from crux.stack import start_temporal
    from storage import create_pool, migrate

    database = await bench_database()
    url = database.url
    pool = await create_pool(url, max_size=8)
    async with pool.acquire() as connection:
        await migrate(connection)
    env = await start_temporal(ui=False)
    settings = Settings.model_validate(
        {"database_url": url, "task_queue": "bench", "log_level": "error"}
    )
    try:
        rows = await measure_history_bytes(env.client, pool, settings, lengths)
    finally:
        await pool.close()
        await env.shutdown()
        database.stop()
    print_history_bytes(rows)
    sys.stdout.flush()
    os._exit(1 if bound_failures(rows) else 0)


if __name__ == "__main__":
    picked = tuple(int(n) for n in sys.argv[1].split(",")) if len(sys.argv) > 1 else LENGTHS
    asyncio.run(_main(picked))
