"""Writes that must outlast a short storage outage: results that cost something to obtain."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from temporalio import activity

from vocabulary.errors import StorageUnavailableError

_T = TypeVar("_T")
_K = TypeVar("_K")
_V = TypeVar("_V")

SIDE_EFFECT_STORAGE_WAIT_SECONDS = 10.0
"""How long the write of a paid answer or a tool result waits for storage inside the
activity. Short: a blip is absorbed here, while a real outage fails the activity so the
workflow shows `storage_blocked` instead of a stage that merely looks slow."""

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
            if not isinstance(error, StorageUnavailableError) or loop.time() + pause > deadline:
                raise
        if activity.in_activity():
            activity.heartbeat()
        await asyncio.sleep(pause)
        pause = min(pause * 2, _MAX_PAUSE_SECONDS)


class Unstaged(Generic[_K, _V]):
    """Results a storage outage kept from being staged, held in this worker process.

    When the workflow schedules the same attempt again after the outage and it lands on
    this worker, the result is staged from here instead of being obtained (and paid for)
    again. Bounded: the oldest entries go first; losing one only costs a repeat call.
    """

    def __init__(self, capacity: int = 512) -> None:
        self._entries: OrderedDict[_K, _V] = OrderedDict()
        self._capacity = capacity

    def keep(self, key: _K, value: _V) -> None:
        """Hold `value` until it is staged."""
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def get(self, key: _K) -> _V | None:
        """The held value for `key`, if this process has one."""
        return self._entries.get(key)

    def staged(self, key: _K) -> None:
        """Forget `key`: its value is in PostgreSQL now."""
        self._entries.pop(key, None)
