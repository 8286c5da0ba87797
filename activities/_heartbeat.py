"""Heartbeats while an activity awaits work of unknown length."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

_T = TypeVar("_T")

HEARTBEAT_INTERVAL_SECONDS = 5.0
"""Well inside the 30 s heartbeat timeout the workflows set on heartbeating activities."""


async def heartbeating(call: Awaitable[_T]) -> _T:
    """Await `call`, heartbeating every few seconds meanwhile.

    With a heartbeat timeout on the activity, a worker that dies mid-call (a SIGKILL, a
    lost host) is noticed within that timeout and the activity runs again elsewhere,
    instead of only after its start-to-close timeout, which for summary preparations and
    tool calls is many minutes.
    """
    task = asyncio.ensure_future(call)
    while True:
        done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_INTERVAL_SECONDS)
        if done:
            return task.result()
        activity.heartbeat()
