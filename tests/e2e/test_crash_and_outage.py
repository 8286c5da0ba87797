"""Concurrency and crash suite: turns in flight, workers SIGKILLed, PostgreSQL stopped.

Several managed generations run at once on each of many Threads, through a plain Temporal
client, against worker *processes* (`python -m tests.chaos`: `worker.py`'s worker with one
registered tool) that are killed with SIGKILL and restarted, while the suite's own embedded
PostgreSQL is stopped for 30 s in the middle of the run.

The mix: every generation uses managed history (`history(kind="managed")` with a summary
model and a small input budget, so that as Threads grow SummaryWorkflow preparations run,
inline before a request that would not fit and in the background once a request crosses
`optimize_at`); one generation in three offers the worker's tool, and the loopback provider
answers it with a tool call, then, once the tool result is in the request, with the final
answer (a tool round: four messages in one causal group).

Kills:

- random: a random worker every 3-6 s for the first minute (the last live worker is spared);
- during a summary preparation: when the loopback provider receives a support (summary)
  request, before it answers, it SIGKILLs the worker process that owns the TCP connection
  the request came on (found by its port); the request is provably outstanding at the kill;
- during a commit: the suite takes the row lock every commit of a Thread takes inside its
  transaction (the Thread's control row, of a few busy Threads at once), waits until a
  worker backend is blocked on one in `pg_stat_activity` (its connection carries the
  worker's `application_name`), SIGKILLs that worker while its commit transaction is open,
  then releases the locks. This is stronger
  than aiming at the `committing` stage, which a commit that runs as a local activity only
  makes visible once it has finished.

Afterwards every generation completed exactly once: none lost, none duplicated, every Thread
made of whole causal groups (a tool round holds the user message, the assistant's tool call,
the tool result answering that call, and the final answer, in that order, chained by parent),
and every receipt identical to PostgreSQL, field by field: the commit receipt the run
returned against the group row and the generation ledger, every request receipt in the
ledger against the stored receipt (`Runtime.receipt`), and the request ids the run returned
against the ledger's steps.

The CI size (108 generations) takes about two to three minutes; `make soak` (CRUX_SOAK=1)
runs 1,050 generations with at least 10 kills. A one-line JSON of figures is printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from crux.models import GenerationInput, GenerationOutcome, workflow_id_for
from crux.runtime import Runtime
from crux.stack import EmbeddedPostgres
from providers.loopback import (
    RecordedRequest,
    Reply,
    ScriptedToolCall,
    TextReply,
    tool_call_reply,
)
from storage import GenerationStore, ThreadStore, create_pool
from tests.chaos import (
    CHAOS_TOOL,
    PeerAwareOpenAIServer,
    WorkerFleet,
    chaos,
    kill_during_commit,
    pause_postgres,
    peer_port,
    resume_postgres,
    worker_env,
)
from tests.pg_faults import new_database, own_postgres
from vocabulary.commits import ThreadCommit
from vocabulary.ids import generation_key

pytestmark = pytest.mark.durability

SOAK = os.environ.get("CRUX_SOAK", "").strip() in ("1", "true", "yes")
THREADS = 35 if SOAK else 12
IN_FLIGHT = 3
WAVES = 10 if SOAK else 3
WORKERS = 3 if SOAK else 2
GENERATIONS = THREADS * IN_FLIGHT * WAVES
OUTAGE_AT_SECONDS = 12.0
OUTAGE_SECONDS = 30.0
KILL_EVERY_SECONDS = (3.0, 6.0)
KILL_UNTIL_SECONDS = 240.0 if SOAK else 55.0
AIMED_KILLS = 6 if SOAK else 2
"""Aimed kills of each kind (commit, summary) at most; spaced by `AIM_EVERY_SECONDS`."""
AIM_EVERY_SECONDS = (4.0, 8.0)
AIMED_THREADS = 4
"""Busy Threads whose commits one aim holds at once (any of them committing is hit)."""
RUN_TIMEOUT_SECONDS = 2_400.0 if SOAK else 300.0
MODEL = "openai:gpt-4o"
SUMMARY_MODEL = "openai:gpt-4o-mini"
HISTORY = {"kind": "managed", "messages": 4, "on_miss": "inline", "summary_model": SUMMARY_MODEL}
BUDGETS = ({"optimize_at": 200, "max": 320}, {"max": 280})
"""Even Threads summarise in the background past `optimize_at`, odd ones inline at `max`."""
TOPIC = "about the quarterly logistics review, the carrier contracts and warehouse capacity"
STAGE_ATTRIBUTE = TypedSearchAttributes(
    [SearchAttributePair(SearchAttributeKey.for_keyword("CruxStage"), "starting")]
)
SEED = int(os.environ.get("CRUX_CHAOS_SEED", "0")) or random.SystemRandom().randrange(1, 2**31)


@pytest.fixture
def dedicated_postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of this test alone, so stopping it disturbs no other test."""
    # A failed run may have left it stopped.
    with own_postgres("crux-chaos-pg-", recover=resume_postgres) as server:
        yield server


def _is_tool_round(wave: int, turn: int) -> bool:
    return (wave + turn) % 3 == 0


class _Provider:
    """The scripted model: tool calls for tool-round turns, summaries, aimed summary kills."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.server = PeerAwareOpenAIServer(responder=self.respond)
        self.fleet: WorkerFleet | None = None
        self.summary_requests = 0
        self.aim_summaries = True
        self._next_aim = 0.0

    def respond(self, request: RecordedRequest) -> Reply:
        body: dict[str, Any] = request.body if isinstance(request.body, dict) else {}
        if body.get("model") == SUMMARY_MODEL.partition(":")[2]:
            self.summary_requests += 1
            self._aim_at_summary()
            return TextReply(
                text="Earlier: questions on the review were asked and answered.",
                delay_seconds=self.rng.uniform(0.5, 1.5),
            )
        # Long enough for kills to land mid-call, short enough to keep the suite bounded.
        delay = self.rng.uniform(0.1, 1.2)
        messages: list[dict[str, Any]] = body.get("messages") or [{}]
        if messages[-1].get("role") == "tool":
            return TextReply(text="The fact was looked up; here it is.", delay_seconds=delay)
        if body.get("tools") and body.get("tool_choice") != "none":
            key = f"k{self.rng.randrange(1000)}"
            return tool_call_reply(
                ScriptedToolCall(name=CHAOS_TOOL, arguments={"key": key}), delay_seconds=delay
            )
        return TextReply(text="An answer about the review and its numbers.", delay_seconds=delay)

    def _aim_at_summary(self) -> None:
        # Runs before the reply is even built: the support request is unanswered while the
        # worker that sent it dies.
        fleet = self.fleet
        now = time.monotonic()
        if fleet is None or not self.aim_summaries or now < self._next_aim:
            return
        if fleet.kill_reasons["summary"] >= AIMED_KILLS:
            return
        pid = fleet.pid_of_peer(peer_port(), self.server.port)
        if pid is not None and fleet.kill_pid(pid, "summary"):
            self._next_aim = now + self.rng.uniform(*AIM_EVERY_SECONDS)


@pytest.mark.timeout(RUN_TIMEOUT_SECONDS + 180)
async def test_every_generation_completes_exactly_once_through_kills_and_an_outage(
    client: Client, dedicated_postgres: EmbeddedPostgres, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    _, database_url = await new_database(dedicated_postgres)

    task_queue = f"crux-chaos-{uuid.uuid4().hex[:8]}"
    provider = _Provider(random.Random(SEED + 1))
    async with provider.server as server:
        fleet = WorkerFleet(
            env=worker_env(
                client.service_client.config.target_host,
                database_url,
                task_queue,
                server.base_url,
            ),
            size=WORKERS,
            log_dir=tmp_path,
            command=(sys.executable, "-m", "tests.chaos"),
        )
        provider.fleet = fleet
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
        in_flight: dict[str, tuple[str, WorkflowHandle[Any, GenerationOutcome]]] = {}
        stages_seen: Counter[str] = Counter()
        commit_aims: Counter[str] = Counter()

        async def watch_stages() -> None:
            # What an operator sees during the outage: the stage query of running turns.
            await asyncio.sleep(OUTAGE_AT_SECONDS + 2)
            while "seconds" not in outage:
                stages = await asyncio.gather(
                    *(_stage_of(handle) for _, handle in list(in_flight.values())[:12]),
                )
                stages_seen.update(stage for stage in stages if stage is not None)
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

        async def aim_at_commits() -> None:
            # Until enough commits were hit: hold a busy Thread's control row and kill the
            # worker whose commit waits for it (PostgreSQL being down just skips a round).
            aim_rng = random.Random(SEED + 2)
            while fleet.kill_reasons["commit"] < AIMED_KILLS:
                await asyncio.sleep(aim_rng.uniform(*AIM_EVERY_SECONDS))
                busy = sorted({thread_id for thread_id, _ in in_flight.values()})
                in_outage = (
                    time.monotonic() - started > OUTAGE_AT_SECONDS - 1 and "seconds" not in outage
                )
                if not busy or in_outage:
                    continue
                try:
                    aimed = await kill_during_commit(
                        database_url,
                        aim_rng.sample(busy, min(AIMED_THREADS, len(busy))),
                        fleet,
                        wait_seconds=6.0,
                    )
                except Exception as error:  # PostgreSQL may be away for a moment
                    aimed = type(error).__name__
                commit_aims[aimed] += 1

        async def converse(thread_id: str) -> None:
            for wave in range(WAVES):
                # Unique across Threads too, so the suite does not depend on id scoping.
                prefix = thread_id.replace(":", "")
                ids = [f"{prefix}-w{wave}-t{turn}" for turn in range(IN_FLIGHT)]
                handles = [
                    await _tracked(
                        in_flight,
                        thread_id,
                        generation_id,
                        client.start_workflow(
                            "ManagedGenerationWorkflow",
                            GenerationInput.model_validate(
                                {
                                    "generation_id": generation_id,
                                    "thread_id": thread_id,
                                    "model": MODEL,
                                    "input": f"question {generation_id} {TOPIC}",
                                    "history": HISTORY,
                                    "input_budget": BUDGETS[int(thread_id.split(":")[1]) % 2],
                                    "tools": [CHAOS_TOOL] if _is_tool_round(wave, turn) else [],
                                    "max_tool_rounds": 1,
                                }
                            ),
                            id=workflow_id_for(generation_id, thread_id),
                            task_queue=task_queue,
                            result_type=GenerationOutcome,
                            search_attributes=STAGE_ATTRIBUTE,
                        ),
                    )
                    for turn, generation_id in enumerate(ids)
                ]
                results = await asyncio.gather(
                    *(h.result() for h in handles), return_exceptions=True
                )
                for generation_id, result in zip(ids, results, strict=True):
                    outcomes[(thread_id, generation_id)] = result
                    in_flight.pop(generation_id, None)

        threads = [f"chaos:{n:03d}:{uuid.uuid4().hex[:4]}" for n in range(THREADS)]
        started = time.monotonic()
        aimer = asyncio.ensure_future(aim_at_commits())
        stuck: dict[str, Any] = {}
        try:
            try:
                await asyncio.wait_for(
                    asyncio.gather(*(converse(t) for t in threads)), RUN_TIMEOUT_SECONDS
                )
            except TimeoutError:
                # Say where the unfinished runs wait (content-free), then fail below.
                for generation_id, (_, handle) in list(in_flight.items())[:10]:
                    stuck[generation_id] = await _where_it_waits(handle)
                raise AssertionError(f"unfinished runs (seed {SEED}): {stuck}") from None
            await outage_task
            await watcher
        finally:
            elapsed = time.monotonic() - started
            done.set()
            provider.aim_summaries = False
            # Stop the chaos first, without waiting on it: a timeout may be unwinding this
            # test, and no worker process may outlive it.
            for task in (chaos_task, outage_task, watcher, aimer):
                task.cancel()
            fleet.stop()
        provider_calls = len(server.requests)

    pool = await create_pool(database_url, min_size=1, max_size=4)
    try:
        failed = {key: _causes(value) for key, value in outcomes.items()
                  if not isinstance(value, GenerationOutcome)}  # fmt: skip
        results = {key: value for key, value in outcomes.items()
                   if isinstance(value, GenerationOutcome)}  # fmt: skip
        check = await _verify(Runtime(client, pool), pool, threads, results)
        figures = {
            "seed": SEED,
            "generations": GENERATIONS,
            "tool_round_generations": sum(
                1 for (_, g) in outcomes if _is_tool_round(*_wave_turn(g))
            ),
            "threads": THREADS,
            "in_flight_per_thread": IN_FLIGHT,
            "workers": WORKERS,
            "kills": fleet.kills,
            "kills_random": fleet.kill_reasons["random"],
            "kills_during_commit": fleet.kill_reasons["commit"],
            "kills_during_summary": fleet.kill_reasons["summary"],
            "commit_aims": dict(commit_aims),
            "worker_starts": fleet.starts,
            "outage_seconds": round(outage.get("seconds", 0.0), 1),
            "completed": len(results),
            "lost": len(failed),
            "duplicated": check["duplicated"],
            "broken_groups": check["broken_groups"],
            "receipt_mismatches": check["receipt_mismatches"],
            "receipts_compared": check["receipts_compared"],
            "tool_rounds_committed": check["tool_rounds"],
            "summary_requests": provider.summary_requests,
            "summary_artifacts": await pool.fetchval("SELECT count(*) FROM crux_derived_artifacts"),
            "requests_with_summary": check["with_summary"],
            "inline_summaries": check["inline"],
            "background_summaries_scheduled": check["scheduled"],
            "alternatives": sum(
                1
                for r in results.values()
                if r.thread_commit is not None and r.thread_commit.status == "alternative"
            ),
            # Sent requests that follow a plan the Thread's move kept from being sent.
            "replans": check["replans"],
            "provider_calls": provider_calls,
            "elapsed_seconds": round(elapsed, 1),
            "stages_seen_during_outage": dict(stages_seen),
        }
        print("\ncrash-and-outage figures:", json.dumps(figures))
        tampered = await _tamper_and_verify(Runtime(client, pool), pool, results)
        report = os.environ.get("CRUX_CHAOS_REPORT")
        if report:
            Path(report).write_text(json.dumps(figures, indent=2) + "\n")
    finally:
        await pool.close()

    assert not failed, f"lost generations (seed {SEED}): {failed}"
    assert len(results) == GENERATIONS
    assert figures["duplicated"] == 0, figures
    assert figures["broken_groups"] == 0, figures
    assert figures["receipt_mismatches"] == 0, (figures, check["mismatch_examples"])
    assert figures["tool_rounds_committed"] == figures["tool_round_generations"], figures
    # The comparison is not blind: one request receipt field and one commit receipt field
    # changed in PostgreSQL afterwards are both found.
    assert tampered == 2, tampered
    assert fleet.kills >= (10 if SOAK else 3), figures
    assert figures["kills_during_commit"] >= 1, figures
    assert figures["kills_during_summary"] >= 1, figures
    # Managed history did its work: summaries were prepared, inline and sent.
    assert figures["summary_artifacts"] >= 1 and figures["requests_with_summary"] >= 1, figures
    assert figures["inline_summaries"] >= 1, figures
    assert figures["outage_seconds"] >= OUTAGE_SECONDS, figures
    # The outage was visible, not silent: running turns said they wait for storage, in the
    # stage query or the CruxStage search attribute (the query needs a live worker, and a
    # worker killed during the outage cannot start again until it ends).
    blocked = ("storage_blocked", "commit_blocked", "visible_blocked_max")
    assert sum(stages_seen[name] for name in blocked) > 0, figures


async def _tamper_and_verify(
    runtime: Runtime, pool: asyncpg.Pool, results: dict[tuple[str, str], GenerationOutcome]
) -> int:
    """Change one stored receipt and one stored commit, and count what `_verify` finds."""
    (thread_id, generation_id), outcome = next(iter(sorted(results.items())))
    assert outcome.thread_commit is not None and outcome.request_ids
    await pool.execute(
        "UPDATE crux_request_receipts SET receipt = jsonb_set(receipt, '{input_tokens}',"
        " to_jsonb((receipt->>'input_tokens')::int + 1)) WHERE request_id = $1",
        outcome.request_ids[0],
    )
    await pool.execute(
        "UPDATE crux_thread_groups SET committed_at = committed_at + interval '1 second'"
        " WHERE thread_id = $1 AND group_id = $2",
        thread_id,
        outcome.thread_commit.message_ids[0],
    )
    check = await _verify(runtime, pool, [thread_id], {(thread_id, generation_id): outcome})
    return check["receipt_mismatches"]


async def _where_it_waits(handle: WorkflowHandle[Any, GenerationOutcome]) -> dict[str, Any]:
    """A running generation's stage, pending activities and children, and last events."""
    try:
        description = (await handle.describe()).raw_description
        events = [event async for event in handle.fetch_history_events()]
    except Exception as error:
        return {"error": type(error).__name__}
    return {
        "stage": description.workflow_execution_info.search_attributes.indexed_fields[
            "CruxStage"
        ].data.decode(),
        "activities": [
            (a.activity_type.name, a.state, a.attempt) for a in description.pending_activities
        ],
        "children": [(c.workflow_id, c.workflow_type_name) for c in description.pending_children],
        "last_events": [event.event_type for event in events[-6:]],
    }


async def _stage_of(handle: WorkflowHandle[Any, GenerationOutcome]) -> str | None:
    try:
        return str(await asyncio.wait_for(handle.query("get_stage"), 2))
    except Exception:
        return None  # no worker is polling at this moment


def _wave_turn(generation_id: str) -> tuple[int, int]:
    wave, turn = generation_id.rsplit("-", 2)[1:]
    return int(wave[1:]), int(turn[1:])


async def _tracked(
    in_flight: dict[str, tuple[str, WorkflowHandle[Any, GenerationOutcome]]],
    thread_id: str,
    generation_id: str,
    starting: Awaitable[WorkflowHandle[Any, GenerationOutcome]],
) -> WorkflowHandle[Any, GenerationOutcome]:
    handle = await starting
    in_flight[generation_id] = (thread_id, handle)
    return handle


def _causes(error: BaseException) -> str:
    chain: list[str] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 6:
        chain.append(f"{type(current).__name__}({getattr(current, 'type', '')}: {current})"[:160])
        current = current.__cause__
    return " <- ".join(chain)


def _differences(name: str, got: dict[str, Any], want: dict[str, Any]) -> list[str]:
    """The fields in which two dumped receipts differ, named `receipt.field`."""
    return [
        f"{name}.{key}" for key in sorted(set(got) | set(want)) if got.get(key) != want.get(key)
    ]


async def _verify(
    runtime: Runtime,
    pool: asyncpg.Pool,
    threads: list[str],
    results: dict[tuple[str, str], GenerationOutcome],
) -> dict[str, Any]:
    """Count duplicated turns, broken causal groups and receipts that differ from storage."""
    found: Counter[str] = Counter()
    mismatches: list[str] = []
    threads_store = ThreadStore(pool)
    ledger = GenerationStore(pool)
    for thread_id in threads:
        groups = {
            row["group_id"]: row
            for row in await pool.fetch(
                "SELECT group_id, parent_id, message_ids, status, selected_head, committed_at"
                " FROM crux_thread_groups WHERE thread_id = $1",
                thread_id,
            )
        }
        rows = {
            row["message_id"]: row
            for row in await pool.fetch(
                "SELECT message_id, group_id, parent_id, seq FROM crux_thread_messages"
                " WHERE thread_id = $1",
                thread_id,
            )
        }
        expected = {gid for (tid, gid) in results if tid == thread_id}
        per_generation = Counter(
            message_id.split(":")[1] for message_id in rows if message_id.count(":") >= 2
        )
        found["duplicated"] += max(0, len(groups) - len(expected))
        found["broken_groups"] += sum(1 for row in rows.values() if row["group_id"] not in groups)
        for generation_id in expected:
            outcome = results[(thread_id, generation_id)]
            commit = outcome.thread_commit
            if commit is None:
                found["broken_groups"] += 1
                continue
            ids = list(commit.message_ids)
            if per_generation[generation_id] != len(ids):
                found["duplicated"] += 1
            tool_round = _is_tool_round(*_wave_turn(generation_id))
            if not await _group_whole(threads_store, thread_id, ids, rows, groups, tool_round):
                found["broken_groups"] += 1
                continue
            found["tool_rounds"] += tool_round
            group = groups[ids[0]]
            stored_commit = {
                "status": group["status"],
                "message_ids": tuple(group["message_ids"]),
                "parent_id": group["parent_id"],
                "selected_head": group["selected_head"],
                "committed_at": group["committed_at"],
            }
            mismatches += _differences(
                f"{generation_id}.commit-vs-group",
                commit.model_dump(exclude={"replayed"}),
                stored_commit,
            )
            stored = await ledger.find_result(generation_key(generation_id, thread_id))
            if stored is None:
                mismatches.append(f"{generation_id}.ledger-missing")
                continue
            ledger_commit = stored.thread_commit or ThreadCommit.model_construct()
            mismatches += _differences(
                f"{generation_id}.commit-vs-ledger",
                commit.model_dump(exclude={"replayed"}),
                ledger_commit.model_dump(exclude={"replayed"}),
            )
            mismatches += _differences(
                f"{generation_id}.outcome-vs-ledger",
                outcome.model_dump(exclude={"thread_commit", "replayed"}),
                GenerationOutcome.of(stored).model_dump(exclude={"thread_commit", "replayed"}),
            )
            for step in stored.steps:
                found["receipts_compared"] += 1
                try:
                    receipt = await runtime.receipt(step.request.id)
                except KeyError:
                    mismatches.append(f"{step.request.id}.missing")
                    continue
                mismatches += _differences(
                    step.request.id, step.request.model_dump(), receipt.model_dump()
                )
                codes = {warning.code for warning in receipt.warnings}
                found["with_summary"] += receipt.summary_path is not None
                # A request that waited for its summary: prepared by this run, or joined
                # when another run was already preparing it (timing decides which).
                found["inline"] += bool(
                    {"HISTORY_SUMMARY_INLINE", "HISTORY_SUMMARY_JOINED"} & codes
                )
                found["scheduled"] += "HISTORY_MAINTENANCE_SCHEDULED" in codes
                found["replans"] += receipt.previous_reason is not None
    return {
        "duplicated": found["duplicated"],
        "broken_groups": found["broken_groups"],
        "receipt_mismatches": len(mismatches),
        "mismatch_examples": mismatches[:10],
        "receipts_compared": found["receipts_compared"],
        "tool_rounds": found["tool_rounds"],
        "with_summary": found["with_summary"],
        "inline": found["inline"],
        "scheduled": found["scheduled"],
        "replans": found["replans"],
    }


async def _group_whole(
    threads: ThreadStore,
    thread_id: str,
    ids: list[str],
    rows: dict[str, Any],
    groups: dict[str, Any],
    tool_round: bool,
) -> bool:
    """Whether a turn's causal group is stored whole, in order, chained, with its tool round."""
    generation = ids[0].split(":")[1]
    if ids[0] != f"gen:{generation}:user" or ids[-1] != f"gen:{generation}:assistant":
        return False
    group = groups.get(ids[0])
    if group is None or list(group["message_ids"]) != ids:
        return False
    members = [rows.get(message_id) for message_id in ids]
    if any(row is None or row["group_id"] != ids[0] for row in members):
        return False
    parents = [row["parent_id"] for row in members if row is not None]
    if parents != [group["parent_id"], *ids[:-1]]:
        return False
    messages = await threads.load_messages(thread_id, ids)
    roles = [message.role for message in messages]
    if not tool_round:
        return roles == ["user", "assistant"]
    if roles != ["user", "assistant", "tool", "assistant"]:
        return False
    calls = messages[1].tool_calls
    return (
        len(calls) == 1
        and calls[0].tool_name == CHAOS_TOOL
        and messages[2].tool_call_id == calls[0].tool_call_id
    )
