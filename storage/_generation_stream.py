"""Streamed deltas: staged progress rows plus a `NOTIFY` that wakes followers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from storage._failures import storage_errors
from storage._staging_sql import STAGE
from vocabulary.ids import unstorable_text
from vocabulary.staging import DELTA_PREFIX, delta_kind

STREAM_CHANNEL = "crux_stream"
"""`NOTIFY` channel on which a generation's id is sent whenever a delta is staged."""


_STAGE_AND_NOTIFY = f"""
WITH staged AS ({STAGE.strip()})
SELECT pg_notify($8, $1)
"""
"""Stage a delta and wake followers in one statement: one round trip, and the notification
is delivered with the row's commit (a data-modifying `WITH` runs whether or not it is read;
a repeated key, an activity retry, wakes followers to no new row, which is harmless)."""


class DeltaStream:
    """Delta staging and catch-up reads; see `GenerationStore`."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool: Any = pool

    @storage_errors()
    async def stage_delta(
        self,
        generation_id: str,
        key: str,
        text: str,
        *,
        thread_id: str | None,
        source_message_ids: Sequence[str],
    ) -> None:
        """Stage one streamed delta under `delta:<key>` and wake followers.

        Deltas are staging rows, so redaction cascades and the commit's cleanup reach them.
        A delta PostgreSQL cannot store is skipped: deltas are progress only, and the
        staged output is checked (and refused) as a whole.
        """
        if unstorable_text(text):
            return
        await self._pool.execute(
            _STAGE_AND_NOTIFY,
            generation_id,
            0,
            delta_kind(key),
            thread_id,
            {"role": "assistant", "content": text},
            list(source_message_ids),
            None,
            STREAM_CHANNEL,
        )

    @storage_errors()
    async def drop_deltas(self, generation_id: str, attempt: int) -> None:
        """Delete the deltas streamed for one provider attempt (its reply was rejected)."""
        await self._pool.execute(
            """
            DELETE FROM crux_generation_staging
            WHERE generation_id = $1 AND attempt = 0 AND kind LIKE $2
            """,
            generation_id,
            delta_kind(f"{attempt:03d}:") + "%",
        )

    @storage_errors()
    async def deltas_after(self, generation_id: str, after: str) -> list[tuple[str, str]]:
        """Staged deltas with keys after `after`, in order: `(key, text)`."""
        rows = await self._pool.fetch(
            """
            SELECT kind, message ->> 'content' AS text FROM crux_generation_staging
            WHERE generation_id = $1 AND attempt = 0 AND kind LIKE 'delta:%' AND kind > $2
            ORDER BY kind
            """,
            generation_id,
            delta_kind(after),
        )
        return [(str(row["kind"]).removeprefix(DELTA_PREFIX), str(row["text"])) for row in rows]
