"""Checks of the storage-fault suite: held generations, the stages they show, what is stored.

`verify_storage` counts, per kind, what a fault may have lost or half-written; every count is
zero when each generation has exactly one whole turn, one ledger row and its receipts, and
no staging is left behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import defaultdict
from typing import Any

import asyncpg
from temporalio.client import Client, WorkflowHandle
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from contracts.generation import HistorySpec, InputBudgetSpec
from crux.models import GenerationInput, GenerationOutcome, workflow_id_for
from crux.runtime import Runtime
from tests.helpers import eventually
from vocabulary.ids import generation_key

MODEL = "openai:gpt-4o-mini"
STAGE = SearchAttributeKey.for_keyword("CruxStage")
STARTING = TypedSearchAttributes([SearchAttributePair(STAGE, "starting")])
TOPIC = "The quarterly logistics review covered warehouse capacity, carrier contracts and "


async def grow(runtime: Runtime, thread_id: str, turns: int) -> list[str]:
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


def held_request(label: str, thread_id: str) -> GenerationInput:
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


async def start_held(
    client: Client, task_queue: str, request: GenerationInput
) -> WorkflowHandle[Any, GenerationOutcome]:
    """Start a generation from a plain Temporal client (its read claims the identity)."""
    assert request.thread_id is not None
    return await client.start_workflow(
        "ManagedGenerationWorkflow",
        request,
        id=workflow_id_for(request.generation_id, request.thread_id),
        task_queue=task_queue,
        result_type=GenerationOutcome,
        search_attributes=STARTING,
    )


async def stage_of(handle: WorkflowHandle[Any, Any], timeout: float = 3.0) -> str | None:
    """The stage query's answer, or `None` when no worker answered in time."""
    try:
        return str(await asyncio.wait_for(handle.query("get_stage"), timeout))
    except Exception:
        return None


async def attribute_of(handle: WorkflowHandle[Any, Any]) -> str | None:
    """`CruxStage` as the Temporal UI shows it."""
    with contextlib.suppress(Exception):
        described = await asyncio.wait_for(handle.describe(), 3)
        return described.typed_search_attributes.get(STAGE)
    return None


async def summary_run_of(client: Client, task_queue: str) -> WorkflowHandle[Any, Any]:
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
            attribute_of(handle), stage_of(handle) if query else asyncio.sleep(0, None)
        )
        if attribute:
            self.seen[name].add(f"attribute:{attribute}")
        if stage:
            self.seen[name].add(f"query:{stage}")

    def blocked(self, name: str, stage: str) -> bool:
        return bool({f"attribute:{stage}", f"query:{stage}"} & self.seen[name])

    def report(self) -> dict[str, list[str]]:
        return {name: sorted(values) for name, values in self.seen.items()}


async def head_of(pool: asyncpg.Pool, thread_id: str) -> str:
    """The id of the main owner's head message (the parent of the next turn)."""
    head = await pool.fetchval(
        "SELECT heads ->> 'main' FROM crux_threads WHERE thread_id = $1", thread_id
    )
    assert isinstance(head, str)
    return head


async def verify_storage(
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


async def summary_count(pool: asyncpg.Pool, thread_id: str) -> int:
    """Summary artifacts of a Thread (chunk summaries excluded)."""
    return int(
        await pool.fetchval(
            "SELECT count(*) FROM crux_derived_artifacts WHERE thread_id = $1"
            " AND kind = 'summary' AND payload ->> 'strategy' NOT LIKE '%:chunk'",
            thread_id,
        )
    )
