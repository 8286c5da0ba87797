"""Per-message token counts, one row per (thread, message, encoding)."""

from __future__ import annotations

from collections.abc import Mapping

from storage.threads._db import Connection
from vocabulary.errors import ThreadError

# One statement: it shares the control row lock with writers (so a count can never be
# stored for a message whose redaction is committing at the same moment), stores the counts
# only when the Thread is live and knows every message, and reports what it found so the
# caller can name what was wrong. All or nothing, without a transaction's round trips.
_UPSERT = """
WITH control AS (
    SELECT state FROM crux_threads WHERE thread_id = $1 FOR SHARE
), known AS (
    SELECT count(*) AS messages FROM crux_thread_messages
    WHERE thread_id = $1 AND message_id = ANY($3::text[])
), stored AS (
    INSERT INTO crux_thread_token_counts (thread_id, message_id, encoding, tokens)
    SELECT $1, m.message_id, $2, u.tokens
    FROM unnest($3::text[], $4::integer[]) AS u(message_id, tokens)
    JOIN crux_thread_messages m ON m.thread_id = $1 AND m.message_id = u.message_id
    WHERE m.state <> 'redacted'
      AND (SELECT state FROM control) = 'live'
      AND (SELECT messages FROM known) = cardinality($3::text[])
    ON CONFLICT (thread_id, message_id, encoding) DO UPDATE SET tokens = EXCLUDED.tokens
    RETURNING 1
)
SELECT (SELECT state FROM control) AS state, (SELECT messages FROM known) AS known
"""

_KNOWN = """
SELECT message_id FROM crux_thread_messages WHERE thread_id = $1 AND message_id = ANY($2::text[])
"""


async def upsert_token_counts(
    connection: Connection, thread_id: str, encoding: str, counts: Mapping[str, int]
) -> None:
    """Store counts for live or removed messages; counts for redacted ids are dropped.

    Raises:
        ThreadError: `invalid_message` for a negative or non-integer count or an empty
            encoding, `not_found` for an unknown thread or message, `deleted` after deletion.
    """
    if not encoding:
        raise ThreadError("invalid_message", "encoding must be non-empty", thread_id=thread_id)
    for value in counts.values():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ThreadError(
                "invalid_message", "token counts must be integers >= 0", thread_id=thread_id
            )
    if not counts:
        return
    ids = list(counts)
    found = await connection.fetchrow(_UPSERT, thread_id, encoding, ids, [counts[i] for i in ids])
    state = None if found is None else found["state"]
    if state is None:
        raise ThreadError("not_found", "thread has no history", thread_id=thread_id)
    if state != "live":
        raise ThreadError("deleted", "thread is deleted", thread_id=thread_id)
    if found is not None and found["known"] != len(ids):
        known = {row["message_id"] for row in await connection.fetch(_KNOWN, thread_id, ids)}
        missing = [message_id for message_id in ids if message_id not in known]
        first = missing[0] if missing else ids[0]
        raise ThreadError("not_found", f"message {first} is not stored", thread_id=thread_id)
