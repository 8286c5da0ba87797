"""Writes that must outlast a short storage outage: results that cost something to obtain."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from temporalio import activity

from activities._errors import is_storage_unavailable

_T = TypeVar("_T")

SIDE_EFFECT_STORAGE_WAIT_SECONDS = 120.0
"""How long the write of a paid answer or a tool result waits for storage before giving up
(well inside the start-to-close timeouts of the activities that use it)."""

_MAX_PAUSE_SECONDS = 5.0


async def keeping_side_effect(write: Callable[[], Awaitable[_T]]) -> _T:
    """Run a staging write whose content exists only in this process, waiting out outages.

    A provider answer already paid for, or a tool result whose call already happened, would
    be obtained again if the activity failed now. The activity heartbeats meanwhile (a
    no-op outside one); a longer outage still fails it, typed, and the workflow then waits
    in `storage_blocked`.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SIDE_EFFECT_STORAGE_WAIT_SECONDS
    pause = 0.5
    while True:
        try:
            return await write()
        except Exception as error:
            if not is_storage_unavailable(error) or loop.time() + pause > deadline:
                raise
        if activity.in_activity():
            activity.heartbeat()
        await asyncio.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE_SECONDS)
