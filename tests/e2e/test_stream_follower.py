"""A stream follower is woken by every notification, however slow its caller.

The follower reads the staged deltas, hands them to its caller, then waits for the next
notification. A notification that arrives while the caller is still busy with the previous
deltas must wake that wait at once: were it dropped, the next text would show only at the
follower's fallback poll.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator

import asyncpg
import pytest

from crux import _streaming
from crux._outcomes import StreamDelta, StreamReset
from storage import GenerationStore, create_pool
from storage.generations import LOCAL_DELTA_FOLLOWERS, STREAM_CHANNEL


async def test_a_notification_during_the_callers_turn_is_not_lost(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Only notifications wake the follower here: the fallback poll would take an hour.
    monkeypatch.setattr(_streaming, "STREAM_POLL_SECONDS", 3600.0)
    generations = GenerationStore(pool)
    key = f"follow:{uuid.uuid4().hex[:8]}"

    async def stage(sequence: int, text: str) -> None:
        await generations.stage_delta(
            key, f"001:001:{sequence:06d}", text, thread_id=None, source_message_ids=()
        )

    outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    follower = _streaming.follow_deltas(pool, generations, key, outcome)
    await stage(0, "first ")
    first = await asyncio.wait_for(anext(follower), 30)
    assert isinstance(first, StreamDelta) and first.text == "first "
    # The caller is busy with the first delta while the second is staged and notified.
    await stage(1, "second")
    await asyncio.sleep(0.5)
    second = await asyncio.wait_for(anext(follower), 30)
    assert isinstance(second, StreamDelta) and second.text == "second"
    outcome.set_result(None)
    await follower.aclose()


def _following(
    pool: asyncpg.Pool, name: str
) -> tuple[
    GenerationStore,
    str,
    asyncio.Future[None],
    AsyncGenerator[StreamDelta | StreamReset],
]:
    """A follower of a new generation key, and the run outcome that ends it."""
    generations = GenerationStore(pool)
    key = f"{name}:{uuid.uuid4().hex[:8]}"
    outcome: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    return generations, key, outcome, _streaming.follow_deltas(pool, generations, key, outcome)


async def test_deltas_staged_in_this_process_are_handed_over_once_in_order(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While this process streams a generation, its notifications wake nobody here."""
    monkeypatch.setattr(_streaming, "STREAM_POLL_SECONDS", 3600.0)
    generations, key, outcome, follower = _following(pool, "handed")
    texts = ["one ", "two ", "three"]
    received: list[object] = []
    with LOCAL_DELTA_FOLLOWERS.staging(key):
        for sequence, text in enumerate(texts):
            pending = asyncio.ensure_future(anext(follower))
            await asyncio.sleep(0.2)  # the follower has read and waits for the next delta
            await generations.stage_delta(
                key, f"001:001:{sequence:06d}", text, thread_id=None, source_message_ids=()
            )
            received.append(await asyncio.wait_for(pending, 30))
    assert [d.text for d in received if isinstance(d, StreamDelta)] == texts
    # The run ends: the last catch-up read finds nothing the hand-over did not bring.
    outcome.set_result(None)
    assert [item async for item in follower] == []
    assert not LOCAL_DELTA_FOLLOWERS.stages_here(key)


async def test_a_delta_staged_elsewhere_is_caught_up_while_this_process_streams(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker's delta (notified, not handed over) still reaches the follower."""
    monkeypatch.setattr(_streaming, "STREAM_POLL_SECONDS", 0.05)
    generations, key, outcome, follower = _following(pool, "elsewhere")
    with LOCAL_DELTA_FOLLOWERS.staging(key):
        pending = asyncio.ensure_future(anext(follower))
        # Staged as another process's store stages it: the row and its notification only.
        await pool.execute(
            """
            INSERT INTO crux_generation_staging (generation_id, attempt, kind, message)
            VALUES ($1, 0, $2, $3);
            """,
            key,
            "delta:002:001:000000",
            {"role": "assistant", "content": "from elsewhere"},
        )
        await pool.execute("SELECT pg_notify($1, $2)", STREAM_CHANNEL, key)
        remote = await asyncio.wait_for(pending, 30)
        await generations.stage_delta(
            key, "002:001:000001", " and here", thread_id=None, source_message_ids=()
        )
        local = await asyncio.wait_for(anext(follower), 30)
    assert isinstance(remote, StreamDelta) and remote.text == "from elsewhere"
    assert isinstance(local, StreamDelta) and local.text == " and here"
    outcome.set_result(None)
    assert [item async for item in follower] == []


async def test_a_first_delta_committed_fast_is_staged_again_by_the_next(
    database_url: str,
) -> None:
    # One connection, so the setting is read where the fast commit ran.
    pool = await create_pool(database_url, min_size=1, max_size=1)
    generations = GenerationStore(pool)
    key = f"fast:{uuid.uuid4().hex[:8]}"
    handed: list[tuple[str, str]] = []
    unsubscribe = LOCAL_DELTA_FOLLOWERS.subscribe(key, lambda k, t: handed.append((k, t)))
    try:
        async with pool.acquire() as connection:
            before = await connection.fetchval("SHOW synchronous_commit")
        await generations.stage_delta(
            key, "001:001:000000", "first ", thread_id=None, source_message_ids=(), fast=True
        )
        # The fast commit changed the setting for its own transaction only.
        async with pool.acquire() as connection:
            assert await connection.fetchval("SHOW synchronous_commit") == before
        # A server crash took the first row before its log reached the disk.
        await pool.execute(
            "DELETE FROM crux_generation_staging WHERE generation_id = $1 AND kind LIKE $2",
            key,
            "%000000",
        )
        await generations.stage_delta(
            key,
            "001:001:000001",
            "second",
            thread_id=None,
            source_message_ids=(),
            unconfirmed=[("001:001:000000", "first ")],
        )
        assert await generations.deltas_after(key, "") == [
            ("001:001:000000", "first "),
            ("001:001:000001", "second"),
        ]
    finally:
        unsubscribe()
        await pool.close()
    # Followers in this process are told of each delta once.
    assert handed == [("001:001:000000", "first "), ("001:001:000001", "second")]
