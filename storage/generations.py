"""Generation staging, the generation ledger and request receipts.

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

from contracts.generation import GenerationResult
from storage.threads._validate import check_storable
from vocabulary.ids import generation_key, unstorable_text
from vocabulary.messages import Message
from vocabulary.staging import DELTA_PREFIX, StagingKind, delta_kind

_STAGE = """
INSERT INTO crux_generation_staging
    (generation_id, attempt, kind, thread_id, message, source_message_ids, info)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (generation_id, attempt, kind) DO NOTHING
"""

_GET_STAGED = """
SELECT message, info, source_message_ids FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = $2 AND kind = $3
"""

_FIND_RESULT = "SELECT result FROM crux_generations WHERE generation_id = $1"

_RECORD_RESULT = """
INSERT INTO crux_generations (generation_id, thread_id, workflow_id, result)
VALUES ($1, $2, $3, $4)
ON CONFLICT (generation_id) DO NOTHING
"""

_RECORD_RECEIPT = """
INSERT INTO crux_request_receipts (request_id, generation_id, thread_id, receipt, inspection)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (request_id) DO NOTHING
"""

_GET_RECEIPT = "SELECT receipt, inspection FROM crux_request_receipts WHERE request_id = $1"

STREAM_CHANNEL = "crux_stream"
"""`NOTIFY` channel on which a generation's id is sent whenever a delta is staged."""

_DROP_STAGING = """
DELETE FROM crux_generation_staging
WHERE generation_id = $1 AND kind NOT IN ('final', 'identity')
"""

IDENTITY_KIND = StagingKind.IDENTITY
"""Staging kind of a generation's content-free fingerprint, kept as long as its ledger row."""

_CLAIM_IDENTITY = """
INSERT INTO crux_generation_staging
    (generation_id, attempt, kind, thread_id, message, source_message_ids, info)
VALUES ($1, 0, 'identity', $2, '{"role": "system", "content": ""}'::jsonb, '{}', $3)
ON CONFLICT (generation_id, attempt, kind) DO NOTHING
RETURNING 1
"""

_GET_IDENTITY = """
SELECT info ->> 'fingerprint' FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = 0 AND kind = 'identity'
"""

# A generation that produced a turn keeps its ledger row (and, ad hoc, its `final` row);
# everything else staged under its id is text of a run that will never publish it. Rows
# are matched on the Thread too, so another Thread's generation with the same id is spared.
# The content-free identity row stays: the id was used, and reusing it with another request
# remains a conflict; the sweep removes it with the rest once it is old.
_DISCARD_UNFINISHED = """
DELETE FROM crux_generation_staging AS s
WHERE s.generation_id = $1
  AND s.thread_id IS NOT DISTINCT FROM $2
  AND s.kind <> 'identity'
  AND NOT EXISTS (
      SELECT 1 FROM crux_generations g
      WHERE g.generation_id = s.generation_id AND g.thread_id IS NOT DISTINCT FROM s.thread_id
  )
"""

_SWEEP_ORPHANS = """
DELETE FROM crux_generation_staging AS s
WHERE s.created_at < now() - make_interval(secs => $1)
  AND NOT EXISTS (
      SELECT 1 FROM crux_generations g
      WHERE g.generation_id = s.generation_id AND g.thread_id IS NOT DISTINCT FROM s.thread_id
  )
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
    """The row count of a `DELETE n` command status."""
    return int(status.rsplit(" ", 1)[-1])


def _messages(row: Any) -> list[Message]:
    if row is None:
        raise KeyError("staged messages")
    return [Message.model_validate(m) for m in row["message"]["messages"]]


class GenerationStore:
    """Staging, ledger and receipts for managed generations.

    Args:
        pool: The asyncpg pool (created with `storage.create_pool`).
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

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
            await connection.execute(
                _STAGE,
                generation_id,
                attempt,
                kind,
                thread_id,
                message.model_dump(mode="json"),
                list(source_message_ids),
                info,
            )
            row = await connection.fetchrow(_GET_STAGED, generation_id, attempt, kind)
        if row is None:
            # A concurrent redaction removed the row between the two statements.
            raise KeyError(generation_id)
        return _staged(row)

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
            claimed = await connection.fetchval(
                _CLAIM_IDENTITY, generation_id, thread_id, {"fingerprint": fingerprint}
            )
            stored: str | None = await connection.fetchval(_GET_IDENTITY, generation_id)
        return claimed is not None, stored

    async def get_staged(self, generation_id: str, attempt: int, kind: str) -> StagedMessage | None:
        """Return a staged row, or `None` when nothing is staged under that key."""
        row = await self._pool.fetchrow(_GET_STAGED, generation_id, attempt, kind)
        if row is None:
            return None
        return _staged(row)

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
        for message in messages:
            check_storable(message)
        payload = {"messages": [m.model_dump(mode="json") for m in messages]}
        async with self._pool.acquire() as connection:
            await connection.execute(_STAGE, generation_id, 0, kind, thread_id, payload, [], None)
            row = await connection.fetchrow(_GET_STAGED, generation_id, 0, kind)
        return _messages(row)

    async def get_staged_messages(self, generation_id: str, kind: str) -> list[Message] | None:
        """Return a staged message list, or `None` when none is staged."""
        row = await self._pool.fetchrow(_GET_STAGED, generation_id, 0, kind)
        return None if row is None else _messages(row)

    async def find_result(self, generation_id: str) -> GenerationResult | None:
        """The stored result of a completed generation, if any."""
        stored: Any = await self._pool.fetchval(_FIND_RESULT, generation_id)
        return None if stored is None else GenerationResult.model_validate(stored)

    async def record_result(
        self,
        result: GenerationResult,
        *,
        workflow_id: str,
        receipts: Sequence[tuple[str, dict[str, Any], dict[str, Any] | None]] = (),
        keep_final: Message | None = None,
    ) -> GenerationResult:
        """Record a completed generation, its receipts, and drop its in-flight staging.

        Idempotent: a second call keeps the first result and returns it.

        Args:
            result: The content-free result.
            workflow_id: The workflow that produced it.
            receipts: `(request_id, receipt JSON, inspection JSON)` per provider step.
            keep_final: For ad-hoc generations, the output to keep (as the `final` row),
                since no Thread holds it.

        Returns:
            The result stored for this generation id.
        """
        key = generation_key(result.generation_id, result.thread_id)
        async with self._pool.acquire() as connection, connection.transaction():
            if keep_final is not None:
                await connection.execute(
                    _STAGE,
                    key,
                    0,
                    StagingKind.FINAL,
                    result.thread_id,
                    keep_final.model_dump(mode="json"),
                    [],
                    None,
                )
            await connection.execute(
                _RECORD_RESULT,
                key,
                result.thread_id,
                workflow_id,
                result.model_dump(mode="json"),
            )
            for request_id, receipt, inspection in receipts:
                await connection.execute(
                    _RECORD_RECEIPT,
                    request_id,
                    key,
                    result.thread_id,
                    receipt,
                    inspection,
                )
            await connection.execute(_DROP_STAGING, key)
            stored: Any = await connection.fetchval(_FIND_RESULT, key)
        return GenerationResult.model_validate(stored)

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
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(
                _STAGE,
                generation_id,
                0,
                delta_kind(key),
                thread_id,
                {"role": "assistant", "content": text},
                list(source_message_ids),
                None,
            )
            await connection.execute("SELECT pg_notify($1, $2)", STREAM_CHANNEL, generation_id)

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

    async def drop_staged(self, generation_id: str, attempt: int) -> None:
        """Delete an attempt's staged output (it must never be committed)."""
        await self._pool.execute(
            "DELETE FROM crux_generation_staging WHERE generation_id = $1 AND attempt = $2",
            generation_id,
            attempt,
        )

    async def discard_unfinished(self, generation_id: str, thread_id: str | None) -> int:
        """Delete everything staged for a generation that produced no turn.

        Called when a run fails or is cancelled; a completed generation (ledger row) is left
        alone, so a late or repeated call is harmless.

        Args:
            generation_id: The generation's key (`crux.models.generation_key`).
            thread_id: Its Thread (`None` for an ad-hoc generation).

        Returns:
            How many staged rows were deleted.
        """
        status = await self._pool.execute(_DISCARD_UNFINISHED, generation_id, thread_id)
        return _deleted(status)

    async def sweep_orphans(self, older_than_seconds: float) -> int:
        """Delete staging older than the given age of generations that never completed.

        Catches what no failure path reached: runs terminated or timed out, workers lost
        for good, starts that never reached Temporal after the facade staged the input.

        Args:
            older_than_seconds: Minimum age of a row to delete; keep it well above the
                longest a generation may legitimately run (including commit retries).

        Returns:
            How many staged rows were deleted.
        """
        status = await self._pool.execute(_SWEEP_ORPHANS, float(older_than_seconds))
        return _deleted(status)

    async def record_support_request(
        self,
        request_id: str,
        *,
        generation_id: str | None,
        thread_id: str | None,
        receipt: dict[str, Any],
    ) -> None:
        """Record a support call's content-free receipt (linked from inspections).

        Args:
            request_id: The support call's request id.
            generation_id: The caller's id of the generation that asked (it is scoped to
                `thread_id` here, like every generation key).
            thread_id: The Thread summarised.
            receipt: The content-free receipt.
        """
        key = None if generation_id is None else generation_key(generation_id, thread_id)
        await self._pool.execute(_RECORD_RECEIPT, request_id, key, thread_id, receipt, None)

    async def get_receipt(self, request_id: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Return `(receipt, inspection)` JSON for a request id.

        Raises:
            KeyError: No receipt is stored under that id.
        """
        row = await self._pool.fetchrow(_GET_RECEIPT, request_id)
        if row is None:
            raise KeyError(request_id)
        return row["receipt"], row["inspection"]
