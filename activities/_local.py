"""Activities that run as local activities: finish what was started even when cancelled."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

_T = TypeVar("_T")


async def uninterrupted(call: Awaitable[_T]) -> _T:
    """Finish `call` even when the activity is cancelled meanwhile.

    The read and the commit run as local activities, which are cancelled when their
    workflow task is lost (the run moved to another worker). Both are short and idempotent;
    interrupting the database driver mid-acquire or mid-release could leave the pool
    inconsistent for every other activity of this worker, so they run to the end and only
    their result is dropped.
    """
    return await asyncio.shield(asyncio.ensure_future(call))
