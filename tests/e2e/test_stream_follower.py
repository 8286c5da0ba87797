"""A stream follower is woken by every notification, however slow its caller.

The follower reads the staged deltas, hands them to its caller, then waits for the next
notification. A notification that arrives while the caller is still busy with the previous
deltas must wake that wait at once: were it dropped, the next text would show only at the
follower's fallback poll.
"""

from __future__ import annotations

import asyncio
import uuid

import asyncpg
import pytest

from crux import _streaming
from crux._outcomes import StreamDelta
from storage import GenerationStore


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
