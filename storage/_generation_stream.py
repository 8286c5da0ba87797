"""Streamed deltas: staged progress rows plus a `NOTIFY` that wakes followers."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Generator, Sequence
from typing import Any

import asyncpg

from storage._failures import storage_errors
from vocabulary.ids import unstorable_text
from vocabulary.staging import DELTA_PREFIX, delta_kind

STREAM_CHANNEL = "crux_stream"
"""`NOTIFY` channel on which a generation's id is sent whenever a delta is staged."""


_STAGE_AND_NOTIFY = """
WITH commit_mode AS MATERIALIZED (
    SELECT set_config(
        'synchronous_commit',
        CASE WHEN $7 THEN 'off' ELSE current_setting('synchronous_commit') END,
        true
    ) AS mode
), staged AS (
    INSERT INTO crux_generation_staging
        (generation_id, attempt, kind, thread_id, message, source_message_ids, info)
    SELECT $1, 0, d.kind, $4, jsonb_build_object('role', 'assistant', 'content', d.text), $5, NULL
    FROM unnest($2::text[], $3::text[]) AS d(kind, text)
    ON CONFLICT (generation_id, attempt, kind) DO NOTHING
)
SELECT pg_notify($6, $1) FROM commit_mode
"""
"""Stage deltas and wake followers in one statement: one round trip, and the notification
is delivered with the rows' commit (a data-modifying `WITH` runs whether or not it is read;
a repeated key, an activity retry, wakes followers to no new row, which is harmless). With
`$7` the commit does not wait for its WAL to reach the disk (`synchronous_commit` off for
this transaction only)."""


DeltaListener = Callable[[str, str], None]
"""Told `(key, text)` of each delta of one generation staged in this process."""


class LocalDeltaFollowers:
    """Followers in this process, told of each delta as soon as its row is committed.

    The `NOTIFY` reaches followers anywhere, but it costs two more round trips before text
    shows (its delivery, then the catch-up read). A caller streaming from the process whose
    worker runs the attempt (an embedded worker, eager start) is handed the committed text
    directly instead; the rows and the notification stay the record every other follower
    reads. Listeners are called on the staging task's thread: they must hand the delta over
    to their own loop themselves.
    """

    def __init__(self) -> None:
        self._listeners: dict[str, set[DeltaListener]] = {}
        self._staging: dict[str, int] = {}

    @contextlib.contextmanager
    def staging(self, generation_id: str) -> Generator[None]:
        """Mark `generation_id` as streamed into staging by this process while the block runs.

        Its followers here are handed every delta the block stages, so they need not read
        on the `NOTIFY` that each one also sends.
        """
        self._staging[generation_id] = self._staging.get(generation_id, 0) + 1
        try:
            yield
        finally:
            left = self._staging[generation_id] - 1
            if left:
                self._staging[generation_id] = left
            else:
                del self._staging[generation_id]

    def stages_here(self, generation_id: str) -> bool:
        """Whether this process is streaming `generation_id` into staging right now."""
        return generation_id in self._staging

    def subscribe(self, generation_id: str, listener: DeltaListener) -> Callable[[], None]:
        """Tell `listener` of the deltas of `generation_id` staged from now on.

        Returns:
            The unsubscribe call.
        """
        listeners = self._listeners.setdefault(generation_id, set())
        listeners.add(listener)

        def unsubscribe() -> None:
            listeners.discard(listener)
            if not listeners and self._listeners.get(generation_id) is listeners:
                del self._listeners[generation_id]

        return unsubscribe

    def publish(self, generation_id: str, key: str, text: str) -> None:
        """Tell the listeners of `generation_id` of a committed delta.

        A listener that fails (its loop closed as it left) is skipped: deltas are progress
        only, and staging them must not fail for a follower.
        """
        for listener in tuple(self._listeners.get(generation_id, ())):
            with contextlib.suppress(Exception):
                listener(key, text)


LOCAL_DELTA_FOLLOWERS = LocalDeltaFollowers()
"""This process's followers of staged deltas (see `LocalDeltaFollowers`)."""


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
        fast: bool = False,
        unconfirmed: Sequence[tuple[str, str]] = (),
    ) -> None:
        """Stage one streamed delta under `delta:<key>` and wake followers.

        Deltas are staging rows, so redaction cascades and the commit's cleanup reach them.
        A delta PostgreSQL cannot store is skipped: deltas are progress only, and the
        staged output is checked (and refused) as a whole.

        Args:
            generation_id: The generation's storage key.
            key: The delta's key (`<attempt>:<activity attempt>:<seq>`).
            text: The delta's text.
            thread_id: The generation's Thread.
            source_message_ids: The Thread messages the reply derives from.
            fast: Commit without waiting for the disk: the row is visible at once but a
                server crash right after may lose it. For a stream's first delta, the one
                a reader waits on; the next delta repeats it (`unconfirmed`).
            unconfirmed: Deltas `(key, text)` staged `fast` before, staged again in this
                commit (a no-op when they are there). PostgreSQL makes its log durable in
                order, so they outlive a crash with this one even when the crash came
                between the two commits and took them.
        """
        if unstorable_text(text):
            return
        rows = [(k, t) for k, t in unconfirmed if not unstorable_text(t)] + [(key, text)]
        await self._pool.execute(
            _STAGE_AND_NOTIFY,
            generation_id,
            [delta_kind(k) for k, _ in rows],
            [t for _, t in rows],
            thread_id,
            list(source_message_ids),
            STREAM_CHANNEL,
            fast,
        )
        LOCAL_DELTA_FOLLOWERS.publish(generation_id, key, text)

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
