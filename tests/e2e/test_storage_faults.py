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

The CI size takes about 75 s; `CRUX_SOAK=1` runs five crashes with consecutive seeds.
Helpers: `tests/pg_faults.py` (faults, gates, the holding provider) and
`tests/fault_checks.py` (stages seen, what is stored).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import pytest
import pytest_asyncio
from temporalio.client import Client, WorkflowHandle

from crux.models import GenerationOutcome
from crux.stack import EmbeddedPostgres
from storage import create_pool
from tests.fault_checks import (
    StageLog,
    grow,
    head_of,
    held_request,
    stage_of,
    start_held,
    summary_count,
    summary_run_of,
    verify_storage,
)
from tests.helpers import eventually, new_worker, record_history, settings_for
from tests.pg_faults import (
    Gate,
    HeldOpenAIServer,
    crash_postgres,
    crash_recoveries,
    lock_waiters,
    new_database,
    own_postgres,
    restart_postgres,
    terminate_sessions,
)
from vocabulary.ids import generation_key

pytestmark = pytest.mark.durability

SOAK = os.environ.get("CRUX_SOAK", "").strip() in ("1", "true", "yes")
SEED = int(os.environ.get("CRUX_FAULT_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)
CRASH_ROUNDS = 5 if SOAK else 1
OUTAGE_SECONDS = 30.0

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
    # A failed run may have left it down.
    with own_postgres("crux-fault-pg-", recover=restart_postgres) as server:
        yield server


@pytest_asyncio.fixture
async def held_server() -> AsyncIterator[HeldOpenAIServer]:
    """The loopback provider, able to hold the calls of chosen generations."""
    async with HeldOpenAIServer(
        ["read", "invoke", "commit", "summary", "staging", "ledger"]
    ) as server:
        yield server


@pytest.mark.timeout(300 * CRASH_ROUNDS)
async def test_a_postgres_crash_in_every_stage_loses_and_half_writes_nothing(
    client: Client, dedicated_postgres: EmbeddedPostgres
) -> None:
    for round_ in range(CRASH_ROUNDS):
        await _crash_round(client, dedicated_postgres, SEED + round_)


async def _crash_round(client: Client, server: EmbeddedPostgres, seed: int) -> None:
    rng = random.Random(seed)
    database, url = await new_database(server)
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
                    label: await grow(worker.runtime, thread, 6 if label == "summary" else 1)
                    for label, thread in threads.items()
                }
                requests = {label: held_request(label, threads[label]) for label in labels}
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
                    handles[label] = await start_held(client, worker.task_queue, requests[label])
                    await asyncio.sleep(rng.uniform(0.0, 0.5))
                # The commit's provider call answers only once its parent row is locked:
                # the publication then writes its group and waits, mid-transaction.
                await asyncio.wait_for(provider.arrival("commit").wait(), 30)
                head = await head_of(pool, threads["commit"])
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
                summary_run = await summary_run_of(client, worker.task_queue)
                before = dict(
                    zip(
                        labels,
                        await asyncio.gather(*(stage_of(handles[x], 20) for x in labels)),
                        strict=True,
                    )
                )
                figures["stages_at_crash"] = before
                # The attempt that answered publishes the turn itself (no gate, hook or
                # budget), and hands the commit to the workflow once it waited
                # `IN_ATTEMPT_COMMIT_SECONDS` on the held lock.
                assert before.pop("commit") in ("invoking", "committing"), figures
                assert before == {
                    "read": "reading",
                    "invoke": "invoking",
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
                problems = await verify_storage(
                    pool,
                    worker.runtime,
                    {threads[x]: [*seeded[x], requests[x].generation_id] for x in labels},
                )
                figures["problems"] = problems
                figures["summary_artifacts"] = await summary_count(pool, threads["summary"])
                print("\nstorage crash figures:", json.dumps(figures))
                for label in ("read", "invoke", "commit"):
                    await record_history(client, handles[label].id, f"storage_faults_crash_{label}")
                await record_history(client, summary_run.id, "storage_faults_summary_blocked")
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
            label: await grow(worker.runtime, thread, 6 if label == "summary" else 1)
            for label, thread in threads.items()
        }
        requests = {label: held_request(label, threads[label]) for label in labels}
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
            label: await start_held(client, worker.task_queue, requests[label]) for label in labels
        }
        await asyncio.wait_for(provider.arrival("commit").wait(), 30)
        head = await head_of(pool, threads["commit"])
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
        summary_run = await summary_run_of(client, worker.task_queue)

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
        problems = await verify_storage(
            pool,
            worker.runtime,
            {threads[x]: [*seeded[x], requests[x].generation_id] for x in labels},
        )
        figures["problems"] = problems
        figures["summary_artifacts"] = await summary_count(pool, threads["summary"])
        print("\nsession-kill figures:", json.dumps(figures))
        await record_history(client, handles["staging"].id, "storage_faults_cut_staging")

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
