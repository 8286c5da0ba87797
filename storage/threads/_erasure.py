"""Erasure and visibility: redaction, removal and deletion, with their cascades."""

from __future__ import annotations

from typing import Any

from storage.threads._control import lock_control, lock_live_control, publish
from storage.threads._db import Connection, write_transaction
from storage.threads._nodes import node, nodes_by_id
from vocabulary.errors import ThreadError, ThreadInUseError

_TOMBSTONE = """
UPDATE crux_thread_messages
SET state = 'redacted', role = NULL, body = NULL, identity = NULL, tool_call_id = NULL,
    tool_call_ids = NULL, has_media = false, created_at = NULL
WHERE thread_id = $1 AND message_id = ANY($2::text[])
"""

# Every derived copy built from a redacted message goes in the same transaction.
_REDACTION_CASCADE = (
    "DELETE FROM crux_thread_token_counts WHERE thread_id = $1 AND message_id = ANY($2::text[])",
    "DELETE FROM crux_derived_artifacts WHERE thread_id = $1 AND source_message_ids && $2::text[]",
    # Staged rows built from a redacted message, and staged copies of the message itself.
    """
    DELETE FROM crux_generation_staging
    WHERE thread_id = $1 AND (source_message_ids && $2::text[] OR message->>'id' = ANY($2::text[]))
    """,
    # Cached replies built from a redacted message (its history, user turn or the reply).
    "DELETE FROM crux_cache_entries WHERE thread_id = $1 AND source_message_ids && $2::text[]",
)

# A group whose members are all tombstones keeps no commit time either.
_FORGET_GROUP_TIMES = """
UPDATE crux_thread_groups g SET committed_at = NULL
WHERE g.thread_id = $1 AND g.group_id = ANY($2::text[])
  AND NOT EXISTS (
    SELECT 1 FROM crux_thread_messages m
    WHERE m.thread_id = $1 AND m.group_id = g.group_id AND m.state <> 'redacted'
  )
"""

_REMOVE_GROUP = """
WITH changed AS (
    UPDATE crux_thread_messages SET state = 'removed'
    WHERE thread_id = $1 AND group_id = $2 AND state = 'live'
    RETURNING 1
)
SELECT count(*) FROM changed
"""

_DELETE_THREAD_ROWS = (
    "DELETE FROM crux_thread_token_counts WHERE thread_id = $1",
    "DELETE FROM crux_thread_leaves WHERE thread_id = $1",
    "DELETE FROM crux_thread_groups WHERE thread_id = $1",
    "DELETE FROM crux_thread_messages WHERE thread_id = $1",
    "DELETE FROM crux_derived_artifacts WHERE thread_id = $1",
    "DELETE FROM crux_generation_staging WHERE thread_id = $1",
    "DELETE FROM crux_cache_entries WHERE thread_id = $1",
    # Content-free, but they link to messages that no longer exist: a deleted Thread leaves
    # no generation ledger (a replayed generation id must not resurrect its turn) and no
    # receipts pointing into it.
    "DELETE FROM crux_generations WHERE thread_id = $1",
    "DELETE FROM crux_request_receipts WHERE thread_id = $1",
)

_FINISH_CLEANUP = "UPDATE crux_threads SET cleanup_pending = false WHERE thread_id = $1"


async def redact(pool: Any, thread_id: str, ids: list[str]) -> None:
    """Tombstone `ids` (all published, else nothing happens) and cascade to derived copies."""
    async with write_transaction(pool, thread_id) as connection:
        control = await lock_live_control(connection, thread_id)
        found = await nodes_by_id(connection, thread_id, ids)
        for message_id in ids:
            if message_id not in found:
                raise ThreadError(
                    "not_found", f"message {message_id} is not published", thread_id=thread_id
                )
        fresh = [message_id for message_id in ids if found[message_id].state != "redacted"]
        if not fresh:
            return
        await connection.execute(_TOMBSTONE, thread_id, fresh)
        for statement in _REDACTION_CASCADE:
            await connection.execute(statement, thread_id, fresh)
        groups = sorted({found[message_id].group_id for message_id in fresh})
        await connection.execute(_FORGET_GROUP_TIMES, thread_id, groups)
        await publish(connection, control)


async def remove_group(pool: Any, thread_id: str, message_id: str) -> None:
    """Mark every member of `message_id`'s causal group removed (tombstones stay redacted)."""
    async with write_transaction(pool, thread_id) as connection:
        control = await lock_live_control(connection, thread_id)
        target = await node(connection, thread_id, message_id)
        if target is None:
            raise ThreadError(
                "not_found", f"message {message_id} is not published", thread_id=thread_id
            )
        changed = await connection.fetchval(_REMOVE_GROUP, thread_id, target.group_id)
        if changed:
            await publish(connection, control)


async def publish_deletion(pool: Any, thread_id: str) -> bool:
    """Turn the control row into a permanent deleted marker.

    Returns:
        Whether physical cleanup is still due.

    Raises:
        ThreadInUseError: Owners are registered.
    """
    async with write_transaction(pool, thread_id) as connection:
        control = await lock_control(connection, thread_id, create=True)
        assert control is not None
        if control.state == "deleted":
            return control.cleanup_pending
        if control.owners:
            raise ThreadInUseError(
                f"{len(control.owners)} owner(s) still registered", thread_id=thread_id
            )
        control.state = "deleted"
        control.heads = {}
        control.cleanup_pending = True
        await publish(connection, control)
        return True


async def _cleanup(connection: Connection, thread_id: str) -> None:
    control = await lock_control(connection, thread_id, create=False)
    if control is None or not control.cleanup_pending:
        return
    for statement in _DELETE_THREAD_ROWS:
        await connection.execute(statement, thread_id)
    await connection.execute(_FINISH_CLEANUP, thread_id)


async def cleanup_deletion(pool: Any, thread_id: str) -> None:
    """Delete every stored row of a deleted Thread except its marker."""
    async with write_transaction(pool, thread_id) as connection:
        await _cleanup(connection, thread_id)


async def delete(pool: Any, thread_id: str) -> None:
    """Publish the deleted marker, then clean up (calling again repairs a failed cleanup)."""
    if await publish_deletion(pool, thread_id):
        await cleanup_deletion(pool, thread_id)
