"""Storage faults: PostgreSQL crashed for 30 s, and its sessions killed mid-transaction.

Generations are arranged deterministically so that, at the moment of the fault, each sits
in a chosen stage with a statement or a provider call outstanding: a gate (a lock or an
uncommitted row held by an admin connection) or the loopback provider holding a request.
The order in which they are arranged, the pause before the crash and when the held answers
arrive during the outage come from a seed printed with the figures (`CRUX_FAULT_SEED`
replays one).

"Crash": SIGKILL of the postmaster and of every backend, 30 s down, then a restart (which
runs crash recovery); all four stages are held at once, so one outage covers them. "Kill":
`pg_terminate_backend` of every session of the database but the admin ones, repeated while
a gated statement waits, until the run shows it is blocked.

| fault | stage | held there by | visible while blocked | afterwards |
| --- | --- | --- | --- | --- |
| crash | read | an uncommitted identity row the claim waits on | `storage_blocked` | once, 1 call |
| crash | invoke | the provider holding the call (a) | `storage_blocked` | once, 1 call |
| crash | commit | a lock on the parent row (b) | `commit_blocked` | once, group whole |
| crash | summary | the provider holding the support call (c) | run `storage_blocked` | 1 artifact |
| kill | commit | a lock on the parent row (b) | `commit_blocked` | once, group whole |
| kill | ledger write | a lock on a staged row of the turn (e) | `commit_blocked` | once, 1 row |
| kill | staging | an uncommitted output row (a) | `storage_blocked` | once, 1 call |
| kill | summary write | the artifacts table locked (d) | run `storage_blocked` | 1 artifact |

(a) The answer arrives while staging cannot succeed: the worker keeps it and stages it on
the next attempt, so the provider is paid once. (b) The publication has already written its
group and messages when it waits: the fault rolls them back, the retried commit publishes the
turn once. (c) The generation shows `summarising`; its `SummaryWorkflow` shows
`storage_blocked`. (d) `crux_derived_artifacts` locked in EXCLUSIVE mode; the support
call's answer is kept by the worker, not paid for again. (e) The turn is already published
when the ledger row's transaction is cut: the retried commit finds the group (a replay of
the same ids) and writes the ledger row once.

Afterwards, every case: each generation completed exactly once (a result, one group, one
ledger row); every group has exactly its messages and every message its group; the ledger
matches the groups; no staged rows but the content-free identity ones remain; every receipt
the result names is stored once.

The CI size takes about 80 s; `CRUX_SOAK=1` repeats the crash with fresh seeds.
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
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from contracts.generation import HistorySpec, InputBudgetSpec
from crux.models import GenerationInput, GenerationOutcome, workflow_id_for
from crux.runtime import Runtime
from crux.stack import EmbeddedPostgres, start_postgres_sync
from storage import create_pool
from storage.migrate import migrate
from tests.helpers import eventually, new_worker, record_history, settings_for
from tests.pg_faults import (
    Gate,
    HeldOpenAIServer,
    crash_postgres,
    crash_recoveries,
    lock_waiters,
    restart_postgres,
    terminate_sessions,
)
from vocabulary.ids import generation_key

SOAK = os.environ.get("CRUX_SOAK", "").strip() in ("1", "true", "yes")
SEED = int(os.environ.get("CRUX_FAULT_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)
CRASH_ROUNDS = 5 if SOAK else 1
OUTAGE_SECONDS = 30.0
MODEL = "openai:gpt-4o-mini"
STAGE = SearchAttributeKey.for_keyword("CruxStage")
STARTING = TypedSearchAttributes([SearchAttributePair(STAGE, "starting")])
TOPIC = "The quarterly logistics review covered warehouse capacity, carrier contracts and "
BLOCKED = ("storage_blocked", "commit_blocked")

_CLAIM_IDENTITY_GATE = """
INSERT INTO crux_generation_staging
    (generation_id, attempt, kind, thread_id, message, source_message_ids, info)
VALUES ($1, 0, 'identity', $2, '{"role": "system", "content": ""}'::jsonb, '{}',
        '{"fingerprint": "gate"}'::jsonb)
"""

_OUTPUT_GATE = """
INSERT INTO crux_generation_staging
    (generation_id, attempt, kind, thread_id, message, source_message_ids, info)
VALUES ($1, 1, 'output', $2, '{"role": "assistant", "content": ""}'::jsonb, '{}', NULL)
"""

_STAGED_ROW_GATE = """
SELECT 1 FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = 0 AND kind = 'user' FOR UPDATE
"""

_PARENT_ROW_GATE = """
SELECT 1 FROM crux_thread_messages WHERE thread_id = $1 AND message_id = $2 FOR UPDATE
"""


@pytest.fixture
def dedicated_postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of this test alone, so crashing it disturbs no other test."""
    data_dir = Path(tempfile.mkdtemp(prefix="crux-fault-pg-"))
    server = start_postgres_sync(data_dir / "pgdata")
    try:
        yield server
    finally:
        try:
            restart_postgres(server)  # a failed run may have left it down
        finally:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)


@pytest_asyncio.fixture
async def held_server() -> AsyncIterator[HeldOpenAIServer]:
    """The loopback provider, able to hold the calls of chosen generations."""
    async with HeldOpenAIServer(
        ["read", "invoke", "commit", "summary", "staging", "ledger"]
    ) as server:
        yield server


async def _grow(runtime: Runtime, thread_id: str, turns: int) -> list[str]:
    """Give a Thread `turns` earlier turns (their summaries and heads are what is tested)."""
    ids: list[str] = []
    for turn in range(turns):
        generation_id = f"seed-{turn}"
        await runtime.generate(
            f"{TOPIC} item number {turn} with its own details and numbers {turn * 17}.",
            thread=thread_id,
            model=MODEL,
            generation_id=generation_id,
        )
        ids.append(generation_id)
    return ids


def _request(label: str, thread_id: str) -> GenerationInput:
    """The generation held in stage `label` (`summary` needs an inline history summary)."""
    managed = label == "summary"
    return GenerationInput(
        generation_id=f"held-{label}",
        thread_id=thread_id,
        model=MODEL,
        input=f"[{label}] what did we decide about carriers?",
        history=HistorySpec(kind="managed", messages=4) if managed else HistorySpec(),
        input_budget=InputBudgetSpec(max=250) if managed else None,
    )


async def _start(
    client: Client, task_queue: str, request: GenerationInput
) -> WorkflowHandle[Any, GenerationOutcome]:
    assert request.thread_id is not None
    return await client.start_workflow(
        "ManagedGenerationWorkflow",
        request,
        id=workflow_id_for(request.generation_id, request.thread_id),
        task_queue=task_queue,
        result_type=GenerationOutcome,
        search_attributes=STARTING,
    )


async def _stage(handle: WorkflowHandle[Any, Any], timeout: float = 3.0) -> str | None:
    """The stage query's answer, or `None` when no worker answered in time."""
    try:
        return str(await asyncio.wait_for(handle.query("get_stage"), timeout))
    except Exception:
        return None


async def _attribute(handle: WorkflowHandle[Any, Any]) -> str | None:
    """`CruxStage` as the Temporal UI shows it."""
    with contextlib.suppress(Exception):
        described = await asyncio.wait_for(handle.describe(), 3)
        return described.typed_search_attributes.get(STAGE)
    return None


async def _summary_run(client: Client, task_queue: str) -> WorkflowHandle[Any, Any]:
    """The `SummaryWorkflow` started on this task queue (there is one per test)."""
    query = f"TaskQueue = '{task_queue}' AND WorkflowType = 'SummaryWorkflow'"

    async def found() -> list[str]:
        return [execution.id async for execution in client.list_workflows(query)]

    ids = await eventually(found, lambda ids: len(ids) == 1, timeout=20, interval=0.3)
    return client.get_workflow_handle(ids[0])


class StageLog:
    """Every stage each run was seen in, by the query and by `CruxStage`."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = defaultdict(set)

    async def sample(self, name: str, handle: WorkflowHandle[Any, Any], query: bool) -> None:
        attribute, stage = await asyncio.gather(
            _attribute(handle), _stage(handle) if query else asyncio.sleep(0, None)
        )
        if attribute:
            self.seen[name].add(f"attribute:{attribute}")
        if stage:
            self.seen[name].add(f"query:{stage}")

    def blocked(self, name: str, stage: str) -> bool:
        return bool({f"attribute:{stage}", f"query:{stage}"} & self.seen[name])

    def report(self) -> dict[str, list[str]]:
        return {name: sorted(values) for name, values in self.seen.items()}


async def _head(pool: asyncpg.Pool, thread_id: str) -> str:
    head = await pool.fetchval(
        "SELECT heads ->> 'main' FROM crux_threads WHERE thread_id = $1", thread_id
    )
    assert isinstance(head, str)
    return head


async def _verify(
    pool: asyncpg.Pool, runtime: Runtime, generations: dict[str, list[str]]
) -> dict[str, int]:
    """Count what a fault may have lost or half-written, per kind (all zero when whole).

    Args:
        pool: The database of the run.
        runtime: Reads stored receipts.
        generations: Thread id to the generation ids that must each have one turn on it.
    """
    problems: dict[str, int] = defaultdict(int)
    for thread_id, expected in generations.items():
        groups = {
            row["group_id"]: row
            for row in await pool.fetch(
                "SELECT group_id, message_ids FROM crux_thread_groups WHERE thread_id = $1",
                thread_id,
            )
        }
        messages = await pool.fetch(
            "SELECT message_id, group_id FROM crux_thread_messages WHERE thread_id = $1",
            thread_id,
        )
        ledger = {
            row["generation_id"]: row["result"]
            for row in await pool.fetch(
                "SELECT generation_id, result FROM crux_generations WHERE thread_id = $1",
                thread_id,
            )
        }
        members: dict[str, list[str]] = defaultdict(list)
        for message in messages:
            if message["group_id"] not in groups:
                problems["messages_without_group"] += 1
            members[message["group_id"]].append(message["message_id"])
        for group_id, group in groups.items():
            if sorted(group["message_ids"]) != sorted(members.get(group_id, [])):
                problems["groups_not_whole"] += 1
        committed: set[str] = set()
        for generation_id in expected:
            result = ledger.get(generation_key(generation_id, thread_id))
            if result is None:
                problems["lost"] += 1
                continue
            result = json.loads(result) if isinstance(result, str) else result
            commit_ids = list((result.get("thread_commit") or {}).get("message_ids") or [])
            group = groups.get(commit_ids[0]) if commit_ids else None
            if group is None or list(group["message_ids"]) != commit_ids:
                problems["ledger_without_group"] += 1
                continue
            committed.add(commit_ids[0])
            for step in result.get("steps") or []:
                request_id = step["request"]["id"]
                try:
                    stored = await runtime.receipt(request_id)
                except KeyError:
                    problems["receipts_missing"] += 1
                    continue
                if stored.id != request_id:
                    problems["receipts_mismatched"] += 1
        # One group per generation, and no group that no generation accounts for.
        problems["groups_without_ledger"] += len(set(groups) - committed)
        problems["ledger_rows_unexpected"] += len(ledger) - len(
            {generation_key(g, thread_id) for g in expected} & set(ledger)
        )
    threads = list(generations)
    problems["staging_left"] = int(
        await pool.fetchval(
            "SELECT count(*) FROM crux_generation_staging"
            " WHERE thread_id = ANY($1::text[]) AND kind <> 'identity'",
            threads,
        )
    )
    problems["receipts_duplicated"] = int(
        await pool.fetchval(
            "SELECT count(*) - count(DISTINCT request_id) FROM crux_request_receipts"
            " WHERE thread_id = ANY($1::text[])",
            threads,
        )
    )
    return dict(problems)


async def _summaries(pool: asyncpg.Pool, thread_id: str) -> int:
    """Summary artifacts of a Thread (chunk summaries excluded)."""
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM crux_derived_artifacts WHERE thread_id = $1"
            " AND kind = 'summary' AND payload ->> 'strategy' NOT LIKE '%:chunk'",
            thread_id,
        )
    )


async def _new_database(server: EmbeddedPostgres) -> tuple[str, str]:
    name = f"crux_faults_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(server.url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = server.database_url(name)
    connection = await asyncpg.connect(url)
    try:
        await migrate(connection)
    finally:
        await connection.close()
    return name, url


@pytest.mark.timeout(300 * CRASH_ROUNDS)
async def test_a_postgres_crash_in_every_stage_loses_and_half_writes_nothing(
    client: Client, dedicated_postgres: EmbeddedPostgres
) -> None:
    for round_ in range(CRASH_ROUNDS):
        await _crash_round(client, dedicated_postgres, SEED + round_)


async def _crash_round(client: Client, server: EmbeddedPostgres, seed: int) -> None:
    rng = random.Random(seed)
    database, url = await _new_database(server)
    labels = ["read", "invoke", "commit", "summary"]
    figures: dict[str, Any] = {"seed": seed}
    pool = await create_pool(url, min_size=1, max_size=8)
    gates: list[Gate] = []
    provider = HeldOpenAIServer(labels)
    try:
        async with provider:
            settings = settings_for(url, openai_base_url=provider.base_url)
            async with new_worker(client, pool, settings) as worker:
                suffix = uuid.uuid4().hex[:6]
                threads = {label: f"crash-{label}:{suffix}" for label in labels}
                seeded = {
                    label: await _grow(worker.runtime, thread, 6 if label == "summary" else 1)
                    for label, thread in threads.items()
                }
                requests = {label: _request(label, threads[label]) for label in labels}
                for label in ("invoke", "commit", "support"):
                    provider.close_gate(label)
                # The read's identity claim waits on this uncommitted row.
                read_key = generation_key(requests["read"].generation_id, threads["read"])
                gates.append(
                    await Gate(url).hold((_CLAIM_IDENTITY_GATE, [read_key, threads["read"]]))
                )
                order = rng.sample(labels, len(labels))
                figures["order"] = order
                handles: dict[str, WorkflowHandle[Any, GenerationOutcome]] = {}
                for label in order:
                    handles[label] = await _start(client, worker.task_queue, requests[label])
                    await asyncio.sleep(rng.uniform(0.0, 0.5))
                # The commit's provider call answers only once its parent row is locked:
                # the publication then writes its group and waits, mid-transaction.
                await asyncio.wait_for(provider.arrival("commit").wait(), 30)
                head = await _head(pool, threads["commit"])
                gates.append(await Gate(url).hold((_PARENT_ROW_GATE, [threads["commit"], head])))
                provider.open_gate("commit")
                admin = await asyncpg.connect(server.url)
                try:
                    await eventually(
                        lambda: lock_waiters(admin, database, "%'identity'%"),
                        lambda n: n >= 1,
                        timeout=30,
                    )
                    await eventually(
                        lambda: lock_waiters(admin, database, "%crux_thread_fast_append%"),
                        lambda n: n >= 1,
                        timeout=30,
                    )
                finally:
                    await admin.close()
                await asyncio.wait_for(provider.arrival("invoke").wait(), 30)
                await asyncio.wait_for(provider.arrival("support").wait(), 30)
                summary_run = await _summary_run(client, worker.task_queue)
                before = dict(
                    zip(
                        labels,
                        await asyncio.gather(*(_stage(handles[x], 20) for x in labels)),
                        strict=True,
                    )
                )
                figures["stages_at_crash"] = before
                assert before == {
                    "read": "reading",
                    "invoke": "invoking",
                    "commit": "committing",
                    "summary": "summarising",
                }, figures

                await asyncio.sleep(rng.uniform(0.0, 1.0))
                figures["processes_killed"] = await asyncio.to_thread(crash_postgres, server)
                crashed_at = time.monotonic()
                releases = {"invoke": rng.uniform(1.0, 10.0), "support": rng.uniform(1.0, 10.0)}
                figures["answers_at"] = {k: round(v, 1) for k, v in releases.items()}
                log = StageLog()
                while (elapsed := time.monotonic() - crashed_at) < OUTAGE_SECONDS:
                    for label, due in list(releases.items()):
                        if elapsed >= due:
                            provider.open_gate(label)
                            del releases[label]
                    await asyncio.gather(
                        *(log.sample(x, handles[x], query=True) for x in labels),
                        log.sample("summary_run", summary_run, query=False),
                    )
                    await asyncio.sleep(0.5)
                recoveries = crash_recoveries(server)
                await asyncio.to_thread(restart_postgres, server)
                figures["crash_recovery"] = crash_recoveries(server) - recoveries
                figures["outage_seconds"] = round(time.monotonic() - crashed_at, 1)
                for gate in gates:
                    await gate.release()
                recovered_at = time.monotonic()
                outcomes = await asyncio.wait_for(
                    asyncio.gather(*(handles[x].result() for x in labels)), 120
                )
                figures["recovery_seconds"] = round(time.monotonic() - recovered_at, 1)
                figures["stages_seen_while_down"] = log.report()
                figures["provider_calls"] = dict(provider.calls)
                problems = await _verify(
                    pool,
                    worker.runtime,
                    {threads[x]: [*seeded[x], requests[x].generation_id] for x in labels},
                )
                figures["problems"] = problems
                figures["summary_artifacts"] = await _summaries(pool, threads["summary"])
                print("\nstorage crash figures:", json.dumps(figures))
                for label in ("read", "invoke", "commit"):
                    await record_history(
                        client, handles[label].id, f"v2_storage_faults_crash_{label}"
                    )
                await record_history(client, summary_run.id, "v2_storage_faults_summary_blocked")
    finally:
        for gate in gates:
            await gate.release()
        await pool.close()

    # Abrupt: the server had to recover from its WAL when it started again.
    assert figures["crash_recovery"] == 1, figures
    assert all(not o.replayed for o in outcomes), figures
    assert not any(problems.values()), figures
    assert figures["summary_artifacts"] == 1, figures
    # Paid once: the answer that arrived while PostgreSQL was down was kept and staged later.
    for label in ("read", "invoke", "commit", "summary", "support"):
        assert provider.calls[label] == 1, figures
    # Visible while down: each run said it waits for storage.
    assert log.blocked("read", "storage_blocked"), figures
    assert log.blocked("invoke", "storage_blocked"), figures
    assert log.blocked("commit", "commit_blocked"), figures
    assert log.blocked("summary_run", "storage_blocked"), figures
    assert "query:summarising" in log.seen["summary"], figures


@pytest.mark.timeout(240)
async def test_sessions_killed_mid_transaction_lose_and_half_write_nothing(
    client: Client, pool: asyncpg.Pool, database_url: str, held_server: HeldOpenAIServer
) -> None:
    database = urlsplit(database_url).path.lstrip("/")
    labels = ["commit", "ledger", "staging", "summary"]
    provider = held_server
    figures: dict[str, Any] = {}
    gates: dict[str, Gate] = {}
    settings = settings_for(database_url, openai_base_url=provider.base_url)
    async with new_worker(client, pool, settings) as worker:
        suffix = uuid.uuid4().hex[:6]
        threads = {label: f"cut-{label}:{suffix}" for label in labels}
        seeded = {
            label: await _grow(worker.runtime, thread, 6 if label == "summary" else 1)
            for label, thread in threads.items()
        }
        requests = {label: _request(label, threads[label]) for label in labels}
        staging_key = generation_key(requests["staging"].generation_id, threads["staging"])
        gates["staging"] = await Gate(database_url).hold(
            (_OUTPUT_GATE, [staging_key, threads["staging"]])
        )
        gates["summary"] = await Gate(database_url).hold(
            ("LOCK TABLE crux_derived_artifacts IN EXCLUSIVE MODE", [])
        )
        provider.close_gate("commit")
        provider.close_gate("ledger")
        support_before = provider.calls["support"]
        handles = {
            label: await _start(client, worker.task_queue, requests[label]) for label in labels
        }
        await asyncio.wait_for(provider.arrival("commit").wait(), 30)
        head = await _head(pool, threads["commit"])
        gates["commit"] = await Gate(database_url).hold(
            (_PARENT_ROW_GATE, [threads["commit"], head])
        )
        provider.open_gate("commit")
        # The ledger row is written in the commit's second transaction, after the turn is
        # published: a lock on a staged row of the turn holds that transaction open.
        await asyncio.wait_for(provider.arrival("ledger").wait(), 30)
        ledger_key = generation_key(requests["ledger"].generation_id, threads["ledger"])
        gates["ledger"] = await Gate(database_url).hold((_STAGED_ROW_GATE, [ledger_key]))
        provider.open_gate("ledger")
        summary_run = await _summary_run(client, worker.task_queue)

        admin = await asyncpg.connect(database_url)
        cut: dict[str, int] = defaultdict(int)
        log = StageLog()
        wanted = {
            "commit": ("commit", "commit_blocked"),
            "ledger": ("ledger", "commit_blocked"),
            "staging": ("staging", "storage_blocked"),
            "summary": ("summary_run", "storage_blocked"),
        }
        watched: dict[str, WorkflowHandle[Any, Any]] = {**handles, "summary_run": summary_run}
        started = time.monotonic()
        try:
            while gates and time.monotonic() - started < 90:
                keep = [gate.pid for gate in gates.values()]
                waiting = await admin.fetch(
                    "SELECT query FROM pg_stat_activity WHERE datname = $1"
                    " AND wait_event_type = 'Lock' AND pid <> ALL($2::int[])",
                    database,
                    keep,
                )
                if waiting:
                    for row in waiting:
                        query = str(row["query"])
                        kind = (
                            "commit"
                            if "crux_thread_fast_append" in query
                            else "ledger"
                            if "DELETE FROM crux_generation_staging" in query
                            else "staging"
                            if "crux_generation_staging" in query
                            else "summary"
                            if "crux_derived_artifacts" in query
                            else "other"
                        )
                        cut[kind] += 1
                    cut["sessions"] += await terminate_sessions(admin, database, keep=keep)
                for label, (run, stage) in wanted.items():
                    if label not in gates:
                        continue
                    await log.sample(run, watched[run], query=run != "summary_run")
                    if log.blocked(run, stage) and cut[label]:
                        await gates.pop(label).release()
                await asyncio.sleep(0.2)
        finally:
            for gate in gates.values():
                await gate.release()
            await admin.close()
        figures["gates_left"] = len(gates)
        figures["cut"] = dict(cut)
        figures["stages_seen"] = log.report()
        outcomes = await asyncio.wait_for(
            asyncio.gather(*(handles[x].result() for x in labels)), 120
        )
        figures["provider_calls"] = dict(provider.calls)
        figures["support_calls"] = provider.calls["support"] - support_before
        problems = await _verify(
            pool,
            worker.runtime,
            {threads[x]: [*seeded[x], requests[x].generation_id] for x in labels},
        )
        figures["problems"] = problems
        figures["summary_artifacts"] = await _summaries(pool, threads["summary"])
        print("\nsession-kill figures:", json.dumps(figures))
        await record_history(client, handles["staging"].id, "v2_storage_faults_cut_staging")

    assert figures["gates_left"] == 0, figures
    assert all(not o.replayed for o in outcomes), figures
    assert not any(problems.values()), figures
    assert figures["summary_artifacts"] == 1, figures
    # Every gated write was cut mid-statement at least once, and each run showed it waited.
    for kind in ("commit", "ledger", "staging", "summary"):
        assert cut[kind] >= 1, figures
    for label in ("commit", "ledger", "staging", "summary"):
        assert provider.calls[label] == 1, figures
    # The summary's support answers survived the cut writes: not paid for again.
    assert figures["support_calls"] == 1, figures
    # The cut ledger write came after the publication: the retried commit replayed it.
    ledger_commit = outcomes[labels.index("ledger")].thread_commit
    assert ledger_commit is not None and ledger_commit.replayed, figures
