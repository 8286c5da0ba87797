"""The generation ledger and request receipts: what outlives a generation's staging.

The ledger row answers "did this `generation_id` already produce a turn?" for as long as the
database keeps it; receipts and inspections are content-free and served by `inspect()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
from pydantic import TypeAdapter

from contracts.generation import GenerationResult
from storage._failures import storage_errors
from storage._staging_sql import STAGE
from storage.threads import stored_message_json
from vocabulary.ids import generation_key
from vocabulary.messages import Message
from vocabulary.staging import StagingKind

_FIND_RESULT = "SELECT result FROM crux_generations WHERE generation_id = $1"

RESULT_CHANNEL = "crux_results"
"""`NOTIFY` channel on which a generation's key is sent once its commit is done.

A listener that hears it can read the result at once (`crux._notices`). The payload is the
key alone: ids, no content.
"""

_ANNOUNCE_RESULT = f"SELECT pg_notify('{RESULT_CHANNEL}', $1)"

# A finished generation's result and its reply on the Thread, in one statement (one
# snapshot); the reply only while its Thread is live and the message is not redacted.
_RESULT_AND_REPLY = """
SELECT g.result, m.body::text AS body
FROM crux_generations g
LEFT JOIN crux_threads c ON c.thread_id = $2 AND c.state = 'live'
LEFT JOIN crux_thread_messages m
    ON c.thread_id IS NOT NULL AND m.thread_id = $2 AND m.message_id = $3
    AND m.state <> 'redacted'
WHERE g.generation_id = $1
"""

_MESSAGE_JSON = TypeAdapter(Message)

_RECORD_RESULT = """
INSERT INTO crux_generations (generation_id, thread_id, workflow_id, result)
VALUES ($1, $2, $3, $4)
ON CONFLICT (generation_id) DO NOTHING
"""

# The common completion in one statement: record the result (the first one stays), drop the
# in-flight staging and return the result on record.
_RECORD_RESULT_AND_DROP_STAGING = """
WITH recorded AS (
    INSERT INTO crux_generations (generation_id, thread_id, workflow_id, result)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (generation_id) DO NOTHING
    RETURNING result
), dropped AS (
    DELETE FROM crux_generation_staging
    WHERE generation_id = $1 AND kind NOT IN ('final', 'identity', 'cache-pending')
)
SELECT result FROM recorded
UNION ALL
SELECT result FROM crux_generations
WHERE generation_id = $1 AND NOT EXISTS (SELECT FROM recorded)
"""

_RECORD_RECEIPT = """
INSERT INTO crux_request_receipts (request_id, generation_id, thread_id, receipt, inspection)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (request_id) DO NOTHING
"""

_GET_RECEIPT = "SELECT receipt, inspection FROM crux_request_receipts WHERE request_id = $1"

_RECEIPT_OWNER = "SELECT generation_id FROM crux_request_receipts WHERE request_id = $1"

# The reply of a generation that committed to no Thread (ad hoc, or with call-site messages
# shadowing its Thread): kept only until its caller read it, or erased on request.
_ERASE_REPLY = """
DELETE FROM crux_generation_staging
WHERE generation_id = $1 AND thread_id IS NOT DISTINCT FROM $2 AND kind = 'final'
"""

# The commit keeps the ad-hoc answer, the identity claim and what a cache miss left for the
# cache write that follows the commit (that write removes it).
_DROP_STAGING = """
DELETE FROM crux_generation_staging
WHERE generation_id = $1 AND kind NOT IN ('final', 'identity', 'cache-pending')
"""


class GenerationLedger:
    """Results and receipts of completed generations; see `GenerationStore`."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool: Any = pool

    @storage_errors()
    async def find_result(self, generation_id: str) -> GenerationResult | None:
        """The stored result of a completed generation, if any."""
        stored: Any = await self._pool.fetchval(_FIND_RESULT, generation_id)
        return None if stored is None else GenerationResult.model_validate(stored)

    @storage_errors()
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
        if keep_final is None and not receipts:
            async with self._pool.acquire() as connection:
                found: Any = await connection.fetchval(
                    _RECORD_RESULT_AND_DROP_STAGING,
                    key,
                    result.thread_id,
                    workflow_id,
                    result.model_dump(mode="json"),
                )
                if found is None:
                    # Recorded by a concurrent call after this statement's snapshot.
                    found = await connection.fetchval(_FIND_RESULT, key)
            return GenerationResult.model_validate(found)
        async with self._pool.acquire() as connection, connection.transaction():
            if keep_final is not None:
                await connection.execute(
                    STAGE,
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

    @storage_errors()
    async def find_result_and_reply(
        self, generation_id: str, thread_id: str, message_id: str
    ) -> tuple[GenerationResult | None, Message | None]:
        """The stored result and the Thread message `message_id`, read at once.

        Returns:
            The result (`None` when none is stored) and the message (`None` when it is not
            stored, is redacted, or its Thread is not live), as `load_messages` would
            refuse it.
        """
        row: Any = await self._pool.fetchrow(
            _RESULT_AND_REPLY, generation_id, thread_id, message_id
        )
        if row is None:
            return None, None
        result = GenerationResult.model_validate(row["result"])
        body = row["body"]
        if body is None:
            return result, None
        return result, _MESSAGE_JSON.validate_json(stored_message_json(message_id, body))

    @storage_errors()
    async def announce_result(self, generation_id: str) -> None:
        """Wake the listeners of a generation whose result is recorded (`RESULT_CHANNEL`).

        Sent once everything its commit writes is written; sent again (a retried commit),
        it wakes them to the same stored result.
        """
        await self._pool.execute(_ANNOUNCE_RESULT, generation_id)

    @storage_errors()
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

    @storage_errors()
    async def receipt_owner(self, request_id: str) -> tuple[bool, str | None]:
        """Whether a receipt is stored under `request_id`, and its generation's scoped key.

        Returns:
            `(found, key)`; `key` is `None` for a support call recorded without one.
        """
        row = await self._pool.fetchrow(_RECEIPT_OWNER, request_id)
        return (False, None) if row is None else (True, row["generation_id"])

    @storage_errors()
    async def erase_reply(self, generation_id: str, thread_id: str | None = None) -> bool:
        """Erase the kept reply (its `final` row) of a generation that committed to no Thread.

        The content-free ledger row stays, so the id keeps answering as completed; its reply
        reads as no longer stored. A Thread's reply is a Thread message (redact it there).

        Args:
            generation_id: The generation's scoped key (`generation_key`).
            thread_id: Its Thread, for a generation whose call-site messages shadowed it
                (`None` for an ad-hoc generation).

        Returns:
            Whether a reply was erased (`False` when none was kept, or it already was).
        """
        status: str = await self._pool.execute(_ERASE_REPLY, generation_id, thread_id)
        return status.rsplit(" ", 1)[-1] != "0"

    @storage_errors()
    async def get_receipt(self, request_id: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Return `(receipt, inspection)` JSON for a request id.

        Raises:
            KeyError: No receipt is stored under that id.
        """
        row = await self._pool.fetchrow(_GET_RECEIPT, request_id)
        if row is None:
            raise KeyError(request_id)
        return row["receipt"], row["inspection"]
