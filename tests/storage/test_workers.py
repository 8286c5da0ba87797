"""The live workers of a task queue (`crux_workers`): join, heartbeat, leave, expiry."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable

import asyncpg

from storage import WorkerDirectory, WorkerEntry


def _entry(fingerprint: str, *, queue: str = "q", build: str = "", tools: str = "") -> WorkerEntry:
    return WorkerEntry(
        worker_id=uuid.uuid4().hex,
        namespace="default",
        task_queue=queue,
        build_id=build,
        identity=f"{uuid.uuid4().hex[:4]}@host",
        fingerprint=fingerprint,
        registrations={"tools": {tools: "d"}} if tools else {},
    )


def _same(joining: WorkerEntry) -> Callable[[WorkerEntry], bool]:
    return lambda other: other.fingerprint == joining.fingerprint


async def test_a_worker_with_other_registrations_is_refused_on_the_same_task_queue(
    pool: asyncpg.Pool,
) -> None:
    directory = WorkerDirectory(pool)
    first, same, other = _entry("a"), _entry("a"), _entry("b", tools="get_weather")
    assert await directory.join(first, stale_after_seconds=30, compatible=_same(first)) == []
    assert await directory.join(same, stale_after_seconds=30, compatible=_same(same)) == []
    refused = await directory.join(other, stale_after_seconds=30, compatible=_same(other))
    assert {entry.worker_id for entry in refused} == {first.worker_id, same.worker_id}
    assert refused[0].registrations == {}
    assert refused[0].started_at is not None
    # Refused means not published: the live rows are the first two only.
    rows = await pool.fetch("SELECT worker_id FROM crux_workers")
    assert {row["worker_id"] for row in rows} == {first.worker_id, same.worker_id}


async def test_other_task_queues_and_other_builds_are_not_compared(pool: asyncpg.Pool) -> None:
    directory = WorkerDirectory(pool)
    first = _entry("a")
    await directory.join(first, stale_after_seconds=30, compatible=_same(first))
    for entry in (_entry("b", queue="other"), _entry("b", build="v2")):
        assert await directory.join(entry, stale_after_seconds=30, compatible=_same(entry)) == []


async def test_a_worker_that_left_or_stopped_heartbeating_is_forgotten(pool: asyncpg.Pool) -> None:
    directory = WorkerDirectory(pool)
    gone, stale, newcomer = _entry("a"), _entry("a"), _entry("b")
    for entry in (gone, stale):
        await directory.join(entry, stale_after_seconds=30, compatible=_same(entry))
    await directory.leave(gone.worker_id)
    await pool.execute(
        "UPDATE crux_workers SET heartbeat_at = now() - interval '1 minute' WHERE worker_id = $1",
        stale.worker_id,
    )
    assert await directory.heartbeat(gone.worker_id) is False
    joined = await directory.join(newcomer, stale_after_seconds=30, compatible=_same(newcomer))
    assert joined == []
    rows = await pool.fetch("SELECT worker_id FROM crux_workers")
    assert [row["worker_id"] for row in rows] == [newcomer.worker_id]  # the stale row deleted


async def test_a_heartbeat_keeps_a_worker_live(pool: asyncpg.Pool) -> None:
    directory = WorkerDirectory(pool)
    live = _entry("a")
    await directory.join(live, stale_after_seconds=30, compatible=_same(live))
    await pool.execute("UPDATE crux_workers SET heartbeat_at = now() - interval '1 minute'")
    assert await directory.heartbeat(live.worker_id) is True
    other = _entry("b")
    assert await directory.join(other, stale_after_seconds=30, compatible=_same(other)) != []


async def test_two_workers_starting_at_once_are_compared_with_each_other(
    pool: asyncpg.Pool,
) -> None:
    directory = WorkerDirectory(pool)
    entries = [_entry(fingerprint) for fingerprint in ("a", "b") * 4]
    outcomes = await asyncio.gather(
        *(
            directory.join(entry, stale_after_seconds=30, compatible=_same(entry))
            for entry in entries
        )
    )
    joined = {
        entry.fingerprint for entry, refused in zip(entries, outcomes, strict=True) if not refused
    }
    assert len(joined) == 1  # the task queue is served by one set of registrations only
