"""Generation staging, the generation ledger and request receipts.

`GenerationStore` combines staging (here) with the ledger and receipts
(`_generation_ledger`) and streamed deltas (`_generation_stream`).

Staged rows hold text only while a managed generation is in flight (the rendered user turn,
each attempt's output); the ledger row written at completion is content-free and answers
"did this `generation_id` already produce a turn?" for as long as the database keeps it,
which outlives Temporal's retention.

Every `generation_id` argument and column here holds the generation's *scoped key*
(`crux.models.generation_key`: the caller's id scoped to its Thread, or to the ad-hoc scope),
so the same caller id on two Threads is two generations. Results keep the caller's id.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from storage._failures import storage_errors
from storage._generation_ledger import RESULT_CHANNEL, GenerationLedger
from storage._generation_stream import LOCAL_DELTA_FOLLOWERS, STREAM_CHANNEL, DeltaStream
from storage.threads import check_storable
from vocabulary.messages import Message
from vocabulary.staging import StagingKind

__all__ = [
    "IDENTITY_KIND",
    "RESULT_CHANNEL",
    "LOCAL_DELTA_FOLLOWERS",
    "STREAM_CHANNEL",
    "GenerationStore",
    "StagedMessage",
]

_GET_STAGED_MANY = """
SELECT attempt, kind, message, info, source_message_ids FROM crux_generation_staging
WHERE generation_id = $1
  AND (attempt, kind) IN (SELECT * FROM unnest($2::integer[], $3::text[]))
"""

_GET_STAGED = """
SELECT message, info, source_message_ids FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = $2 AND kind = $3
"""

IDENTITY_KIND = StagingKind.IDENTITY
"""Staging kind of a generation's content-free fingerprint, kept as long as its ledger row."""

# Stage a row and return the row on record in one round trip: the inserted one, or the one
# an earlier call staged (the conflict branch reads it; a row committed by a concurrent call
# after this statement's snapshot is read again separately).
_STAGE_RETURNING = """
WITH inserted AS (
    INSERT INTO crux_generation_staging
        (generation_id, attempt, kind, thread_id, message, source_message_ids, info)
    VALUES ($1, $2, $3, $4, $5, $6, $7)
    ON CONFLICT (generation_id, attempt, kind) DO NOTHING
    RETURNING message, info, source_message_ids
)
SELECT message, info, source_message_ids FROM inserted
UNION ALL
SELECT message, info, source_message_ids FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = $2 AND kind = $3 AND NOT EXISTS (SELECT FROM inserted)
"""

_CLAIM = """claimed AS (
    INSERT INTO crux_generation_staging
        (generation_id, attempt, kind, thread_id, message, source_message_ids, info)
    VALUES ($1, 0, 'identity', $2, '{"role": "system", "content": ""}'::jsonb, '{}', $3)
    ON CONFLICT (generation_id, attempt, kind) DO NOTHING
    RETURNING info ->> 'fingerprint' AS fingerprint
)"""
"""The identity claim, a `WITH` item: the fingerprint is recorded unless one already is."""

_CLAIMED_OR_ON_RECORD = """
SELECT true AS claimed, fingerprint FROM claimed
UNION ALL
SELECT false, info ->> 'fingerprint' FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = 0 AND kind = 'identity' AND NOT EXISTS (SELECT FROM claimed)
"""
"""Whether the claim was made here, and the fingerprint on record."""

# The claim and the fingerprint on record in one round trip (see `_STAGE_RETURNING`).
_CLAIM_AND_GET_IDENTITY = f"WITH {_CLAIM}{_CLAIMED_OR_ON_RECORD}"

# The claim and, when this call made it, the request's rows, in one statement: a new
# generation's input costs one commit (one disk flush) before its workflow starts.
_CLAIM_AND_STAGE = f"""WITH {_CLAIM}, staged AS (
    INSERT INTO crux_generation_staging
        (generation_id, attempt, kind, thread_id, message, source_message_ids, info)
    SELECT $1, 0, r.kind, $2, r.message, '{{}}', NULL
    FROM unnest($4::text[], $5::jsonb[]) AS r(kind, message)
    WHERE EXISTS (SELECT FROM claimed)
    ON CONFLICT (generation_id, attempt, kind) DO NOTHING
){_CLAIMED_OR_ON_RECORD}"""

_GET_IDENTITY = """
SELECT info ->> 'fingerprint' FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = 0 AND kind = 'identity'
"""

# A generation that produced a turn keeps its ledger row (and, ad hoc, its `final` row);
# everything else staged under its id is text of a run that will never publish it. Rows
# are matched on the Thread too, so another Thread's generation with the same id is spared.
# The content-free identity row stays: the id was used, and reusing it with another request
# remains a conflict; the sweep removes it with the rest once it is old. A request refused
# as invalid ($3) produced nothing, and its identity row goes with the rest.
_DISCARD_UNFINISHED = """
DELETE FROM crux_generation_staging AS s
WHERE s.generation_id = $1
  AND s.thread_id IS NOT DISTINCT FROM $2
  AND (s.kind <> 'identity' OR $3)
  AND NOT EXISTS (
      SELECT 1 FROM crux_generations g
      WHERE g.generation_id = s.generation_id AND g.thread_id IS NOT DISTINCT FROM s.thread_id
  )
"""

# Old staging of generations that never completed, old replies that no caller read (a
# finished ad-hoc generation's `final` row), and the cache's pending rows of committed
# generations whose cache write never ran: none is needed after the retention.
_SWEEP_ORPHANS = """
DELETE FROM crux_generation_staging AS s
WHERE s.created_at < now() - make_interval(secs => $1)
  AND (
      -- A reply that no Thread holds (ad hoc, or shadowed by call-site messages) and that
      -- nobody read and erased is kept no longer.
      s.kind = 'final'
      -- Nor what a cache miss left for a cache write that never ran.
      OR s.kind = 'cache-pending'
      OR NOT EXISTS (
          SELECT 1 FROM crux_generations g
          WHERE g.generation_id = s.generation_id
            AND g.thread_id IS NOT DISTINCT FROM s.thread_id
      )
  )
"""

# Summaries of caller transcripts hold caller text no Thread owns: they are kept no longer
# than staged text is (see `storage.summaries`).
_SWEEP_TRANSCRIPT_SUMMARIES = """
DELETE FROM crux_derived_artifacts
WHERE kind = 'transcript-summary' AND created_at < now() - make_interval(secs => $1)
"""


@dataclass(frozen=True)
class StagedMessage:
    """A staged message and its content-free facts."""

    message: Message
    info: dict[str, Any] | None
    source_message_ids: tuple[str, ...] = ()
    """Thread messages the staged content was derived from."""


def _staged(row: Any) -> StagedMessage:
    return StagedMessage(
        message=Message.model_validate(row["message"]),
        info=row["info"],
        source_message_ids=tuple(row["source_message_ids"] or ()),
    )


def _deleted(status: str) -> int:
    """The row count of a `DELETE n` (or `UPDATE n`) command status."""
    return int(status.rsplit(" ", 1)[-1])


def _messages(row: Any) -> list[Message]:
    if row is None:
        raise KeyError("staged messages")
    return [Message.model_validate(m) for m in row["message"]["messages"]]


class GenerationStore(GenerationLedger, DeltaStream):
    """Staging, ledger and receipts for managed generations.

    Args:
        pool: The asyncpg pool (created with `storage.create_pool`).
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @storage_errors()
    async def stage(
        self,
        generation_id: str,
        attempt: int,
        kind: str,
        message: Message,
        *,
        thread_id: str | None = None,
        source_message_ids: Sequence[str] = (),
        info: dict[str, Any] | None = None,
    ) -> StagedMessage:
        """Stage a message once; a retry returns the row written first.

        Args:
            generation_id: The generation.
            attempt: Attempt number (0 for inputs).
            kind: `user`, `system`, `output`, ...
            message: The message to stage.
            thread_id: The Thread the generation belongs to (for redaction cascades).
            source_message_ids: Thread messages the staged content was derived from.
            info: Content-free facts about the row (usage, finish reason).

        Returns:
            The staged row (the earlier one when it already existed).

        Raises:
            ThreadError: `invalid_message` for text PostgreSQL cannot store (a provider
                reply or tool result with a NUL byte, say): never retried.
        """
        check_storable(message, thread_id=thread_id)
        async with self._pool.acquire() as connection:
            row = await connection.fetchrow(
                _STAGE_RETURNING,
                generation_id,
                attempt,
                kind,
                thread_id,
                message.model_dump(mode="json"),
                list(source_message_ids),
                info,
            )
            if row is None:
                # Staged by a concurrent call that committed after this statement began.
                row = await connection.fetchrow(_GET_STAGED, generation_id, attempt, kind)
        if row is None:
            # A concurrent redaction removed the row between the two statements.
            raise KeyError(generation_id)
        return _staged(row)

    @storage_errors()
    async def claim_identity(
        self, generation_id: str, fingerprint: str, *, thread_id: str | None
    ) -> tuple[bool, str | None]:
        """Record the fingerprint of what a generation asks for, once.

        Args:
            generation_id: The generation's scoped key.
            fingerprint: `crux.models.request_fingerprint` of the request.
            thread_id: The Thread (so deleting it removes the row too).

        Returns:
            `(claimed, stored)`: `claimed` is `True` when this call recorded the fingerprint;
            `stored` is the fingerprint on record (compare it to detect a reused id).
        """
        async with self._pool.acquire() as connection:
            row = await connection.fetchrow(
                _CLAIM_AND_GET_IDENTITY, generation_id, thread_id, {"fingerprint": fingerprint}
            )
            if row is None:
                # Claimed by a concurrent call that committed after this statement began.
                stored: str | None = await connection.fetchval(_GET_IDENTITY, generation_id)
                return False, stored
        return bool(row["claimed"]), row["fingerprint"]

    @storage_errors()
    async def claim_and_stage(
        self,
        generation_id: str,
        fingerprint: str,
        rows: Sequence[tuple[str, Message | Sequence[Message]]],
        *,
        thread_id: str | None,
    ) -> tuple[bool, str | None]:
        """`claim_identity`, staging the request's input rows with a claim this call made.

        Nothing is staged when the id was claimed before: the caller then compares the
        fingerprints and stages (idempotently) or replays, as after `claim_identity`.

        Args:
            generation_id: The generation's scoped key.
            fingerprint: `crux.models.request_fingerprint` of the request.
            rows: `(kind, message)` input rows (as `stage` would write them), or
                `(kind, messages)` message lists (as `stage_messages` would).
            thread_id: The Thread (so deleting it removes the rows too).

        Returns:
            `(claimed, stored)`, as `claim_identity` returns them.

        Raises:
            ThreadError: `invalid_message` for text PostgreSQL cannot store (before
                anything is written).
        """
        kinds = [kind for kind, _ in rows]
        payloads = [_input_payload(content, thread_id) for _, content in rows]
        async with self._pool.acquire() as connection:
            row = await connection.fetchrow(
                _CLAIM_AND_STAGE,
                generation_id,
                thread_id,
                {"fingerprint": fingerprint},
                kinds,
                payloads,
            )
            if row is None:
                # Claimed by a concurrent call that committed after this statement began.
                stored: str | None = await connection.fetchval(_GET_IDENTITY, generation_id)
                return False, stored
        return bool(row["claimed"]), row["fingerprint"]

    async def stage_input(
        self,
        generation_id: str,
        rows: Sequence[tuple[str, Message | Sequence[Message]]],
        *,
        thread_id: str | None,
    ) -> None:
        """Stage a request's input rows one by one, keeping any row staged before.

        For a generation id claimed earlier by the same request (`claim_and_stage` staged
        nothing): the rows its first call staged stay as they are, the missing ones are
        staged.

        Args:
            generation_id: The generation's scoped key.
            rows: As for `claim_and_stage`.
            thread_id: The Thread (so deleting it removes the rows too).
        """
        for kind, content in rows:
            if isinstance(content, Message):
                await self.stage(generation_id, 0, kind, content, thread_id=thread_id)
            else:
                await self.stage_messages(generation_id, kind, content, thread_id=thread_id)

    @storage_errors()
    async def get_staged_many(
        self, generation_id: str, keys: Sequence[tuple[int, str]]
    ) -> dict[tuple[int, str], StagedMessage]:
        """Several staged rows of one generation in one read, by `(attempt, kind)`.

        Keys with nothing staged are absent from the result.
        """
        rows = await self._pool.fetch(
            _GET_STAGED_MANY,
            generation_id,
            [attempt for attempt, _ in keys],
            [kind for _, kind in keys],
        )
        return {(row["attempt"], row["kind"]): _staged(row) for row in rows}

    @storage_errors()
    async def get_staged(self, generation_id: str, attempt: int, kind: str) -> StagedMessage | None:
        """Return a staged row, or `None` when nothing is staged under that key."""
        row = await self._pool.fetchrow(_GET_STAGED, generation_id, attempt, kind)
        if row is None:
            return None
        return _staged(row)

    @storage_errors()
    async def stage_messages(
        self,
        generation_id: str,
        kind: str,
        messages: Sequence[Message],
        *,
        thread_id: str | None = None,
    ) -> list[Message]:
        """Stage an ordered list of messages (call-site transcripts) as one row.

        Args:
            generation_id: The generation's key the row is staged under.
            kind: The row kind (`caller-messages`).
            messages: The messages, in order.
            thread_id: The generation's Thread, so deleting the Thread reaches the row.

        Raises:
            ThreadError: `invalid_message` for text PostgreSQL cannot store.
        """
        payload = _input_payload(messages, None)
        async with self._pool.acquire() as connection:
            row = await connection.fetchrow(
                _STAGE_RETURNING, generation_id, 0, kind, thread_id, payload, [], None
            )
            if row is None:
                row = await connection.fetchrow(_GET_STAGED, generation_id, 0, kind)
        return _messages(row)

    @storage_errors()
    async def get_staged_messages(self, generation_id: str, kind: str) -> list[Message] | None:
        """Return a staged message list, or `None` when none is staged."""
        row = await self._pool.fetchrow(_GET_STAGED, generation_id, 0, kind)
        return None if row is None else _messages(row)

    @storage_errors()
    async def replace_staged(
        self,
        generation_id: str,
        attempt: int,
        kind: str,
        message: Message,
        *,
        info: dict[str, Any] | None,
    ) -> bool:
        """Overwrite a staged row's message and facts (the acceptance gate's transform).

        The earlier text is gone once this returns: nothing else holds it.

        Returns:
            Whether a row was staged under that key.

        Raises:
            ThreadError: `invalid_message` for text PostgreSQL cannot store.
        """
        check_storable(message)
        status = await self._pool.execute(
            """
            UPDATE crux_generation_staging SET message = $4, info = $5
            WHERE generation_id = $1 AND attempt = $2 AND kind = $3
            """,
            generation_id,
            attempt,
            kind,
            message.model_dump(mode="json"),
            info,
        )
        return _deleted(status) > 0

    @storage_errors()
    async def drop_staged(self, generation_id: str, attempt: int) -> None:
        """Delete an attempt's staged output (it must never be committed)."""
        await self._pool.execute(
            "DELETE FROM crux_generation_staging WHERE generation_id = $1 AND attempt = $2",
            generation_id,
            attempt,
        )

    @storage_errors()
    async def discard_unfinished(
        self, generation_id: str, thread_id: str | None, *, refused: bool = False
    ) -> int:
        """Delete everything staged for a generation that produced no turn.

        Called when a run fails or is cancelled; a completed generation (ledger row) is left
        alone, so a late or repeated call is harmless.

        Args:
            generation_id: The generation's key (`crux.models.generation_key`).
            thread_id: Its Thread (`None` for an ad-hoc generation).
            refused: The request was refused as invalid: its identity row goes too.

        Returns:
            How many staged rows were deleted.
        """
        status = await self._pool.execute(_DISCARD_UNFINISHED, generation_id, thread_id, refused)
        return _deleted(status)

    @storage_errors()
    async def sweep_orphans(self, older_than_seconds: float) -> int:
        """Delete staging older than the given age, and ad-hoc replies nobody erased.

        Catches what no failure path reached: runs terminated or timed out, workers lost
        for good, starts that never reached Temporal after the facade staged the input (and
        the transcript copies of summary preparations that never ran); and the replies
        finished generations keep outside any Thread until they are read and erased
        (`Runtime.erase_generation`, the HTTP API); their ledger rows stay. Summaries of
        caller transcripts older than the same age go too: caller text no Thread owns is
        never kept longer than staged text.

        Args:
            older_than_seconds: Minimum age of a row to delete; keep it well above the
                longest a generation may legitimately run (including commit retries).

        Returns:
            How many rows were deleted (staged rows and transcript summaries).
        """
        age = float(older_than_seconds)
        async with self._pool.acquire() as connection:
            staged = await connection.execute(_SWEEP_ORPHANS, age)
            summaries = await connection.execute(_SWEEP_TRANSCRIPT_SUMMARIES, age)
        return _deleted(staged) + _deleted(summaries)

    @storage_errors()
    async def drop_messages(self, key: str, kind: str) -> None:
        """Delete a staged message list (`stage_messages`) once it has served."""
        await self._pool.execute(
            "DELETE FROM crux_generation_staging"
            " WHERE generation_id = $1 AND attempt = 0 AND kind = $2",
            key,
            kind,
        )


def _input_payload(content: Message | Sequence[Message], thread_id: str | None) -> dict[str, Any]:
    """The staged `message` of an input row: a message, or a message list as one row.

    Raises:
        ThreadError: `invalid_message` for text PostgreSQL cannot store.
    """
    if isinstance(content, Message):
        check_storable(content, thread_id=thread_id)
        return content.model_dump(mode="json")
    for message in content:
        check_storable(message, thread_id=thread_id)
    return {"messages": [m.model_dump(mode="json") for m in content]}
