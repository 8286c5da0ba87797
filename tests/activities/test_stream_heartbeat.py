"""A streamed provider call heartbeats while the stream is silent."""

from __future__ import annotations

import asyncio

from temporalio.testing import ActivityEnvironment

from activities._streaming import STREAM_HEARTBEAT_SECONDS, heartbeating
from workflows._options import INVOKE_MODEL


async def test_a_silent_stream_keeps_heartbeating_and_stops_with_it() -> None:
    beats: list[tuple[object, ...]] = []
    environment = ActivityEnvironment()
    environment.on_heartbeat = lambda *details: beats.append(details)

    async def silent_call() -> int:
        # No event arrives for 25 intervals (a model thinking before its first token).
        async with heartbeating(0.02):
            await asyncio.sleep(0.5)
        during = len(beats)
        await asyncio.sleep(0.1)
        assert len(beats) == during  # the beat ends with the stream
        return during

    # A loaded machine delays the beats, never stops them.
    assert await environment.run(silent_call) >= 3


def test_the_beat_is_well_inside_the_heartbeat_timeout_of_an_attempt() -> None:
    timeout = INVOKE_MODEL.get("heartbeat_timeout")
    assert timeout is not None
    assert timeout.total_seconds() >= STREAM_HEARTBEAT_SECONDS * 3
