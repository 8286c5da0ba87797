"""Concurrent managed turns on one Thread: none lost, none rebased, one selected per head."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

import asyncpg
from temporalio.client import Client

from storage import ThreadStore
from tests.helpers import new_worker, settings_for

TURNS = 8


async def test_concurrent_generations_publish_every_turn_with_one_selected_per_head(
    client: Client, pool: asyncpg.Pool, database_url: str
) -> None:
    thread_id = f"race:{uuid.uuid4().hex[:6]}"
    async with new_worker(client, pool, settings_for(database_url)) as worker:
        await worker.runtime.generate("opening", thread=thread_id, generation_id="open")
        results = await asyncio.gather(
            *(
                worker.runtime.generate(
                    f"concurrent question {n}", thread=thread_id, generation_id=f"c{n}"
                )
                for n in range(TURNS)
            )
        )
    commits = [r.thread_commit for r in results]
    assert all(c is not None for c in commits)
    by_parent: dict[str | None, list[str]] = defaultdict(list)
    for commit in commits:
        assert commit is not None
        by_parent[commit.parent_id].append(commit.status)
    for statuses in by_parent.values():
        assert statuses.count("selected") == 1, statuses
    store = ThreadStore(pool)
    for commit in commits:
        assert commit is not None
        messages = await store.load_messages(thread_id, commit.message_ids)
        assert [m.role for m in messages] == ["user", "assistant"]
    # The selected path is a chain through exactly the selected publications.
    view = await store.read_history_view(thread_id)
    selected = sum(1 for c in commits if c is not None and c.status == "selected")
    assert len(view.messages) == 2 * (1 + selected)
