"""Concurrency and crash suite: turns in flight, workers SIGKILLed, PostgreSQL stopped.

Several generations run at once on each of many Threads, through a plain Temporal client,
against worker *processes* (`python worker.py`) that are killed with SIGKILL at random
moments and restarted, while the suite's own embedded PostgreSQL is stopped for 30 s in
the middle of the run. Afterwards every generation completed exactly once: none lost, none
duplicated, every Thread made of whole causal groups, every returned receipt identical to
the one stored in PostgreSQL.

The CI size takes about two minutes; `make soak` (CRUX_SOAK=1) runs a longer version.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import shutil
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from crux.models import GenerationInput, GenerationOutcome, workflow_id_for
from crux.runtime import Runtime
from crux.stack import EmbeddedPostgres, start_postgres_sync
from providers.loopback import LoopbackOpenAIServer, RecordedRequest, TextReply
from storage import create_pool
from storage.migrate import migrate
from tests.chaos import WorkerFleet, chaos, pause_postgres, resume_postgres

SOAK = os.environ.get("CRUX_SOAK", "").strip() in ("1", "true", "yes")
THREADS = 30 if SOAK else 12
IN_FLIGHT = 3
WAVES = 8 if SOAK else 3
WORKERS = 3 if SOAK else 2
OUTAGE_AT_SECONDS = 12.0
OUTAGE_SECONDS = 30.0
KILL_EVERY_SECONDS = (3.0, 6.0)
KILL_UNTIL_SECONDS = 240.0 if SOAK else 55.0
RUN_TIMEOUT_SECONDS = 1_200.0 if SOAK else 240.0
STAGE_ATTRIBUTE = TypedSearchAttributes(
    [SearchAttributePair(SearchAttributeKey.for_keyword("CruxStage"), "starting")]
)
SEED = int(os.environ.get("CRUX_CHAOS_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)


@pytest.fixture
def dedicated_postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of this test alone, so stopping it disturbs no other test."""
    data_dir = Path(tempfile.mkdtemp(prefix="crux-chaos-pg-"))
    server = start_postgres_sync(data_dir / "pgdata")
    try:
        yield server
    finally:
        try:
            resume_postgres(server)  # a failed run may have left it stopped
        finally:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)


def _slow_answer(rng: random.Random) -> Callable[[RecordedRequest], TextReply]:
    def respond(request: RecordedRequest) -> TextReply:
        # Long enough for kills to land mid-call, short enough to keep the suite bounded.
        return TextReply(text="an answer", delay_seconds=rng.uniform(0.1, 1.2))

    return respond


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS + 120)
async def test_every_generation_completes_exactly_once_through_kills_and_an_outage(
    client: Client, dedicated_postgres: EmbeddedPostgres, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    database = "crux_chaos"
    admin = await asyncpg.connect(dedicated_postgres.url)
    try:
        await admin.execute(f'CREATE DATABASE "{database}"')
    finally:
        await admin.close()
    database_url = dedicated_postgres.database_url(database)
    connection = await asyncpg.connect(database_url)
    try:
        await migrate(connection)
    finally:
        await connection.close()

    task_queue = f"crux-chaos-{uuid.uuid4().hex[:8]}"
    async with LoopbackOpenAIServer(responder=_slow_answer(random.Random(SEED + 1))) as server:
        fleet = WorkerFleet(
            env={
                "TEMPORAL_ADDRESS": client.service_client.config.target_host,
                "CRUX_DATABASE_URL": database_url,
                "CRUX_TASK_QUEUE": task_queue,
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_KEY": "sk-test-not-a-secret",
                "CRUX_LOG_FORMAT": "json",
                "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            },
            size=WORKERS,
            log_dir=tmp_path,
        )
        fleet.start()
        done = asyncio.Event()
        chaos_task = asyncio.ensure_future(
            chaos(
                fleet,
                rng,
                done=done,
                kill_every=KILL_EVERY_SECONDS,
                kill_until=KILL_UNTIL_SECONDS,
            )
        )
        outage: dict[str, float] = {}

        async def storage_outage() -> None:
            await asyncio.sleep(OUTAGE_AT_SECONDS)
            began = time.monotonic()
            await asyncio.to_thread(pause_postgres, dedicated_postgres)
            await asyncio.sleep(OUTAGE_SECONDS)
            await asyncio.to_thread(resume_postgres, dedicated_postgres)
            outage["seconds"] = time.monotonic() - began

        outage_task = asyncio.ensure_future(storage_outage())
        outcomes: dict[tuple[str, str], GenerationOutcome | BaseException] = {}
        in_flight: dict[str, WorkflowHandle[Any, GenerationOutcome]] = {}
        stages_seen: Counter[str] = Counter()

        async def watch_stages() -> None:
            # What an operator sees during the outage: the stage query of running turns.
            await asyncio.sleep(OUTAGE_AT_SECONDS + 2)
            while "seconds" not in outage:
                for handle in list(in_flight.values())[:6]:
                    try:
                        stage = await asyncio.wait_for(handle.query("get_stage"), 2)
                    except Exception:
                        continue  # no worker is polling at this moment
                    stages_seen[str(stage)] += 1
                # ... and the Temporal UI's view of them.
                with contextlib.suppress(Exception):
                    blocked = await client.count_workflows(
                        'CruxStage = "storage_blocked" OR CruxStage = "commit_blocked"'
                    )
                    stages_seen["visible_blocked_max"] = max(
                        stages_seen["visible_blocked_max"], blocked.count
                    )
                await asyncio.sleep(1)

        watcher = asyncio.ensure_future(watch_stages())

        async def converse(thread_id: str) -> None:
            for wave in range(WAVES):
                # Unique across Threads too, so the suite does not depend on id scoping.
                prefix = thread_id.replace(":", "")
                ids = [f"{prefix}-w{wave}-t{turn}" for turn in range(IN_FLIGHT)]
                handles = [
                    await _tracked(
                        in_flight,
                        generation_id,
                        client.start_workflow(
                            "ManagedGenerationWorkflow",
                            GenerationInput(
                                generation_id=generation_id,
                                thread_id=thread_id,
                                model="openai:gpt-4o",
                                input=f"question {generation_id}",
                            ),
                            id=workflow_id_for(generation_id, thread_id),
                            task_queue=task_queue,
                            result_type=GenerationOutcome,
                            search_attributes=STAGE_ATTRIBUTE,
                        ),
                    )
                    for generation_id in ids
                ]
                results = await asyncio.gather(
                    *(h.result() for h in handles), return_exceptions=True
                )
                for generation_id, result in zip(ids, results, strict=True):
                    outcomes[(thread_id, generation_id)] = result
                    in_flight.pop(generation_id, None)

        threads = [f"chaos:{n:03d}:{uuid.uuid4().hex[:4]}" for n in range(THREADS)]
        started = time.monotonic()
        try:
            await asyncio.wait_for(
                asyncio.gather(*(converse(t) for t in threads)), RUN_TIMEOUT_SECONDS
            )
            await outage_task
            await watcher
        finally:
            elapsed = time.monotonic() - started
            done.set()
            # Stop the chaos first, without waiting on it: a timeout may be unwinding this
            # test, and no worker process may outlive it.
            for task in (chaos_task, outage_task, watcher):
                task.cancel()
            fleet.stop()
        provider_calls = len(server.requests)

    pool = await create_pool(database_url, min_size=1, max_size=4)
    try:
        failed = {key: _causes(value) for key, value in outcomes.items()
                  if not isinstance(value, GenerationOutcome)}  # fmt: skip
        results = {key: value for key, value in outcomes.items()
                   if isinstance(value, GenerationOutcome)}  # fmt: skip
        figures = {
            "seed": SEED,
            "generations": THREADS * IN_FLIGHT * WAVES,
            "threads": THREADS,
            "in_flight_per_thread": IN_FLIGHT,
            "workers": WORKERS,
            "kills": fleet.kills,
            "worker_starts": fleet.starts,
            "outage_seconds": round(outage.get("seconds", 0.0), 1),
            "completed": len(results),
            "lost": len(failed),
            "provider_calls": provider_calls,
            "elapsed_seconds": round(elapsed, 1),
            "stages_seen_during_outage": dict(stages_seen),
        }
        duplicated, broken_groups, receipt_mismatches = await _verify(
            Runtime(client, pool), pool, threads, results
        )
        figures |= {
            "duplicated": duplicated,
            "broken_groups": broken_groups,
            "receipt_mismatches": receipt_mismatches,
            "alternatives": sum(
                1
                for r in results.values()
                if r.thread_commit is not None and r.thread_commit.status == "alternative"
            ),
            # Sent requests that follow a plan the Thread's move kept from being sent.
            "replans": await pool.fetchval(
                "SELECT count(*) FROM crux_request_receipts"
                " WHERE request_id = ANY($1::text[]) AND receipt->>'previous_reason' IS NOT NULL",
                [request_id for r in results.values() for request_id in r.request_ids],
            ),
        }
        print("\ncrash-and-outage figures:", json.dumps(figures))
        report = os.environ.get("CRUX_CHAOS_REPORT")
        if report:
            Path(report).write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        await pool.close()

    assert not failed, f"lost generations (seed {SEED}): {failed}"
    assert len(results) == THREADS * IN_FLIGHT * WAVES
    assert duplicated == 0 and broken_groups == 0 and receipt_mismatches == 0, figures
    assert fleet.kills >= 3, figures
    assert figures["outage_seconds"] >= OUTAGE_SECONDS, figures
    # The outage was visible, not silent: running turns said they wait for storage, in the
    # stage query or the CruxStage search attribute (the query needs a live worker, and a
    # worker killed during the outage cannot start again until it ends).
    blocked = ("storage_blocked", "commit_blocked", "visible_blocked_max")
    assert sum(stages_seen[name] for name in blocked) > 0, figures


async def _tracked(
    in_flight: dict[str, WorkflowHandle[Any, GenerationOutcome]],
    generation_id: str,
    starting: Awaitable[WorkflowHandle[Any, GenerationOutcome]],
) -> WorkflowHandle[Any, GenerationOutcome]:
    handle = await starting
    in_flight[generation_id] = handle
    return handle


def _causes(error: BaseException) -> str:
    chain: list[str] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 6:
        chain.append(f"{type(current).__name__}({getattr(current, 'type', '')}: {current})"[:160])
        current = current.__cause__
    return " <- ".join(chain)


async def _verify(
    runtime: Runtime,
    pool: asyncpg.Pool,
    threads: list[str],
    results: dict[tuple[str, str], GenerationOutcome],
) -> tuple[int, int, int]:
    """Count duplicated turns, broken causal groups and receipts that differ from storage."""
    duplicated = broken = mismatched = 0
    for thread_id in threads:
        groups = await pool.fetch(
            "SELECT group_id, parent_id, message_ids, status FROM crux_thread_groups"
            " WHERE thread_id = $1",
            thread_id,
        )
        messages = await pool.fetch(
            "SELECT message_id, group_id FROM crux_thread_messages WHERE thread_id = $1",
            thread_id,
        )
        expected = {gid for (tid, gid) in results if tid == thread_id}
        per_generation = Counter(
            row["message_id"].split(":")[1] for row in messages if row["message_id"].count(":") >= 2
        )
        duplicated += sum(1 for count in per_generation.values() if count > 2)
        duplicated += len(groups) - len(expected) if len(groups) > len(expected) else 0
        by_group = {row["group_id"]: row for row in groups}
        for generation_id in expected:
            result = results[(thread_id, generation_id)]
            commit = result.thread_commit
            want = [f"gen:{generation_id}:user", f"gen:{generation_id}:assistant"]
            if commit is None or list(commit.message_ids) != want:
                broken += 1
                continue
            group = by_group.get(want[0])
            if (
                group is None
                or list(group["message_ids"]) != want
                or group["status"] != commit.status
            ):
                broken += 1
                continue
            members = [row["group_id"] for row in messages if row["message_id"] in want]
            if members != [want[0], want[0]]:
                broken += 1
        for message in messages:
            if message["group_id"] not in by_group:
                broken += 1
    for result in results.values():
        # The workflow names its receipts; each must be stored, and stored once.
        for request_id in result.request_ids:
            try:
                stored = await runtime.receipt(request_id)
            except KeyError:
                mismatched += 1
                continue
            if stored.id != request_id:
                mismatched += 1
    return duplicated, broken, mismatched
