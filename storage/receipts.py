"""Request receipts and inspections, written once by the activity that sends the request.

A sealed plan's receipt and inspection are content-free (ids, sizes, decisions). They are
recorded here before the provider is called, so Temporal history carries only their ids
afterwards, and `inspect()` works from any process for every plan: sent, superseded (the
Thread moved before dispatch) or rejected by the provider.

Rows are keyed by the request id; a retried write keeps the first row (`ON CONFLICT DO
NOTHING`), so an activity retried after a crash records its receipt exactly once. The
acceptance gate completes a receipt once more, after the provider answered: its verdict on
the reply (terminal safety, constraints) is added to the receipt it judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from storage._failures import storage_errors

_RECORD = """
INSERT INTO crux_request_receipts (request_id, generation_id, thread_id, receipt, inspection)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (request_id) DO NOTHING
"""

# A plan recorded ahead (by the read) that the workflow's own plan replaces: no attempt was
# sent under it yet, so nothing else was written to the row.
_REPLACE = """
INSERT INTO crux_request_receipts (request_id, generation_id, thread_id, receipt, inspection)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (request_id) DO UPDATE SET receipt = EXCLUDED.receipt, inspection = EXCLUDED.inspection
"""

# Monotone: a retry count only grows, whichever try of the call writes last.
_RECORD_RETRIES = """
UPDATE crux_request_receipts
SET receipt = jsonb_set(receipt, '{retry_count}', to_jsonb(
        GREATEST(COALESCE((receipt ->> 'retry_count')::int, 0), $2))),
    inspection = CASE WHEN inspection IS NULL THEN NULL ELSE jsonb_set(inspection, '{retry_count}',
        to_jsonb(GREATEST(COALESCE((inspection ->> 'retry_count')::int, 0), $2))) END
WHERE request_id = $1
"""

# Adds the verdict's keys; a repeated call writes the same values again.
_ADD_VERDICT = """
UPDATE crux_request_receipts SET receipt = receipt || $2::jsonb WHERE request_id = $1
"""

_LOAD = """
SELECT request_id, receipt, inspection FROM crux_request_receipts
WHERE request_id = ANY($1::text[])
"""


@dataclass(frozen=True)
class StoredReceipt:
    """A stored receipt and its inspection, as JSON objects.

    Attributes:
        receipt: The `RequestReceipt` JSON.
        inspection: The `RequestInspection` JSON (`None` for support calls).
    """

    receipt: dict[str, Any]
    inspection: dict[str, Any] | None


class ReceiptStore:
    """Records and loads request receipts.

    Args:
        pool: The asyncpg pool (created with `storage.create_pool`).
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @storage_errors()
    async def record(
        self,
        request_id: str,
        *,
        generation_key: str | None,
        thread_id: str | None,
        receipt: dict[str, Any],
        inspection: dict[str, Any] | None,
        replace: bool = False,
    ) -> None:
        """Record a receipt once; a repeated call leaves the first row unchanged.

        Args:
            request_id: The receipt's request id (unique per sealed plan).
            generation_key: The generation's scoped key (`vocabulary` id scheme).
            thread_id: The Thread, so deleting it removes the receipt too.
            receipt: The receipt JSON.
            inspection: The inspection JSON.
            replace: Overwrite the row instead (a plan recorded ahead that the workflow's
                own plan replaced before any attempt was sent under it).
        """
        await self._pool.execute(
            _REPLACE if replace else _RECORD,
            request_id,
            generation_key,
            thread_id,
            receipt,
            inspection,
        )

    @storage_errors()
    async def record_retries(self, request_id: str, retry_count: int) -> None:
        """Store how often the provider call of a recorded request was retried.

        The receipt and the inspection both carry the count (`retry_count`); a smaller
        count than the one stored (a late write of an earlier try) changes nothing.

        Args:
            request_id: The request id.
            retry_count: Tries of its provider call that failed and were retried.
        """
        await self._pool.execute(_RECORD_RETRIES, request_id, retry_count)

    @storage_errors()
    async def add_verdict(self, request_id: str, verdict: dict[str, Any]) -> None:
        """Add the acceptance gate's verdict on a request's reply to its receipt.

        Args:
            request_id: The receipt's request id.
            verdict: Receipt fields to set (`output_gate`, `constraints`), as JSON.
        """
        if verdict:
            await self._pool.execute(_ADD_VERDICT, request_id, verdict)

    @storage_errors()
    async def load(self, request_ids: Sequence[str]) -> dict[str, StoredReceipt]:
        """Load receipts by id in one round trip.

        Args:
            request_ids: Request ids (duplicates allowed).

        Returns:
            The stored receipts by request id; ids with no row are absent.
        """
        if not request_ids:
            return {}
        rows = await self._pool.fetch(_LOAD, list(dict.fromkeys(request_ids)))
        return {
            str(row["request_id"]): StoredReceipt(
                receipt=row["receipt"], inspection=row["inspection"]
            )
            for row in rows
        }
