"""Concurrent writers: 32 writers on 4 Threads mixing managed turns, replays and `after`."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

import asyncpg

from crux.messages import Message
from crux.models import ThreadCommit
from storage.threads import ThreadStore
from tests.storage.conftest import assistant, ids, user

THREADS = [f"thread-{i}" for i in range(4)]
WRITERS = 32
ROUNDS = 6


@dataclass(frozen=True)
class Publication:
    thread_id: str
    messages: list[Message]
    parent: str | None
    managed: bool
    receipt: ThreadCommit


async def _writer(store: ThreadStore, writer: int, log: list[Publication]) -> None:
    rng = random.Random(writer)
    thread_id = THREADS[writer % len(THREADS)]
    for round_ in range(ROUNDS):
        view = await store.read_history_view(thread_id)
        prefix = f"w{writer}-r{round_}"
        messages = [user(f"{prefix}-u"), assistant(f"{prefix}-a")]
        if round_ % 3 == 2:
            # An explicit `after` an older group end of the observed path.
            ends = [entry.id for entry in view.messages if entry.group_end]
            parent = rng.choice(ends)
            receipt = await store.append(thread_id, messages, after=parent)
            log.append(Publication(thread_id, messages, parent, False, receipt))
            continue
        await asyncio.sleep(rng.random() / 200)  # provider I/O between read and commit
        receipt = await store.commit_managed_turn(thread_id, messages, expected_head=view.head)
        log.append(Publication(thread_id, messages, view.head, True, receipt))
        if round_ % 3 == 1:
            again = await store.commit_managed_turn(thread_id, messages, expected_head=view.head)
            assert again == receipt.model_copy(update={"replayed": True})


async def test_32_writers_on_4_threads(store: ThreadStore, pool: asyncpg.Pool) -> None:
    for thread_id in THREADS:
        await store.append(thread_id, [user(f"{thread_id}-seed"), assistant(f"{thread_id}-a")])
    log: list[Publication] = []
    await asyncio.gather(*(_writer(store, writer, log) for writer in range(WRITERS)))
    assert len(log) == WRITERS * ROUNDS
    statuses = {p.receipt.status for p in log if p.managed}
    assert statuses == {"selected", "alternative"}

    # Every group is whole: consecutive seq, one group end, parent chain inside the group.
    rows = await pool.fetch(
        "SELECT thread_id, group_id, array_agg(seq ORDER BY seq) AS seqs,"
        " count(*) FILTER (WHERE group_end) AS ends FROM crux_thread_messages"
        " GROUP BY thread_id, group_id"
    )
    assert len(rows) == len(log) + len(THREADS)
    for row in rows:
        assert row["seqs"] == list(range(len(row["seqs"])))
        assert row["ends"] == 1
    for publication in log:
        path = ids(await store.read(publication.thread_id, at=publication.receipt.message_ids[-1]))
        assert path[-2:] == [m.id for m in publication.messages]
        assert publication.receipt.parent_id == publication.parent

    for thread_id in THREADS:
        head = (await store.read(thread_id)).head
        published = [p for p in log if p.thread_id == thread_id]
        # Exactly one selected publication per observed head (none after the final head).
        for observed in {p.parent for p in published if p.managed}:
            selected = [
                p for p in published if p.parent == observed and p.receipt.status == "selected"
            ]
            assert len(selected) == (0 if observed == head else 1), observed
        # The selected path is exactly the seed plus every selected publication.
        path = ids(await store.read(thread_id))
        selected_ids = {
            m.id for p in published if p.receipt.status == "selected" for m in p.messages
        }
        assert set(path[2:]) == selected_ids

    # Every receipt replays identically, long after the fact.
    for publication in log:
        if publication.managed:
            again = await store.commit_managed_turn(
                publication.thread_id, publication.messages, expected_head=publication.parent
            )
        else:
            again = await store.append(
                publication.thread_id, publication.messages, after=publication.parent
            )
        assert again == publication.receipt.model_copy(update={"replayed": True})
