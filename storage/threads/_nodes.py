"""Message nodes and group receipts: lookups, path walks and group insertion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from crux.models import ThreadCommit
from storage.threads._db import Connection, Row
from storage.threads._validate import PreparedMessage

_NODE_COLUMNS = (
    "message_id, parent_id, group_id, seq, group_end, depth, state, published_version, role, "
    "identity, edit_of"
)

_NODES_BY_ID = f"""
SELECT {_NODE_COLUMNS} FROM crux_thread_messages
WHERE thread_id = $1 AND message_id = ANY($2::text[])
"""

# Walks parent links from a head to the root (one primary-key probe per message).
_PATH = f"""
WITH RECURSIVE path AS (
    SELECT {_NODE_COLUMNS} FROM crux_thread_messages WHERE thread_id = $1 AND message_id = $2
    UNION ALL
    SELECT m.message_id, m.parent_id, m.group_id, m.seq, m.group_end, m.depth, m.state,
           m.published_version, m.role, m.identity, m.edit_of
    FROM path p JOIN crux_thread_messages m
      ON m.thread_id = $1 AND m.message_id = p.parent_id
)
SELECT * FROM path ORDER BY depth
"""

_GROUP = """
SELECT group_id, parent_id, message_ids, status, selected_head, committed_at, edit_of
FROM crux_thread_groups WHERE thread_id = $1 AND group_id = $2
"""

_INSERT_GROUP = """
INSERT INTO crux_thread_groups
    (thread_id, group_id, parent_id, message_ids, owner_id, status, selected_head, committed_at,
     edit_of)
VALUES ($1, $2, $3, $4::text[], $5, $6, $7, clock_timestamp(), $8)
RETURNING committed_at
"""

_INSERT_MESSAGES = """
INSERT INTO crux_thread_messages
    (thread_id, message_id, parent_id, group_id, seq, group_end, depth, published_version,
     role, body, identity, tool_call_id, tool_call_ids, has_media, edit_of, created_at)
SELECT $1, u.message_id, u.parent_id, $2, u.seq - 1, u.seq = cardinality($3::text[]),
       $4 + u.seq - 1, $5, u.role, u.body::jsonb, u.identity, u.tool_call_id,
       CASE WHEN u.tool_call_ids = '' THEN '{}'::text[]
            ELSE string_to_array(u.tool_call_ids, chr(31)) END,
       u.has_media, $6, $7
FROM unnest($3::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::text[],
            $13::text[], $14::boolean[])
     WITH ORDINALITY AS u(message_id, parent_id, role, body, identity, tool_call_id,
                          tool_call_ids, has_media, seq)
"""


@dataclass(frozen=True, slots=True)
class Node:
    """The structural fields of a stored message."""

    id: str
    parent_id: str | None
    group_id: str
    seq: int
    group_end: bool
    depth: int
    state: str
    published_version: int
    role: str | None
    identity: str | None
    edit_of: str | None


@dataclass(frozen=True, slots=True)
class GroupReceipt:
    """The stored receipt of one causal group."""

    group_id: str
    parent_id: str | None
    message_ids: list[str]
    status: str
    selected_head: str
    committed_at: datetime | None
    edit_of: str | None

    def commit(self, *, replayed: bool) -> ThreadCommit:
        """The public receipt."""
        assert self.committed_at is not None  # only fully redacted groups lose it
        return ThreadCommit(
            status="selected" if self.status == "selected" else "alternative",
            message_ids=list(self.message_ids),
            parent_id=self.parent_id,
            selected_head=self.selected_head,
            committed_at=self.committed_at,
            replayed=replayed,
        )


def _node(row: Row) -> Node:
    return Node(
        id=row["message_id"],
        parent_id=row["parent_id"],
        group_id=row["group_id"],
        seq=row["seq"],
        group_end=row["group_end"],
        depth=row["depth"],
        state=row["state"],
        published_version=row["published_version"],
        role=row["role"],
        identity=row["identity"],
        edit_of=row["edit_of"],
    )


async def nodes_by_id(
    connection: Connection, thread_id: str, ids: Sequence[str]
) -> dict[str, Node]:
    """The stored nodes among `ids`, keyed by id (absent ids are missing from the map)."""
    rows = await connection.fetch(_NODES_BY_ID, thread_id, list(ids))
    return {row["message_id"]: _node(row) for row in rows}


async def node(connection: Connection, thread_id: str, message_id: str) -> Node | None:
    """One stored node, or `None`."""
    return (await nodes_by_id(connection, thread_id, [message_id])).get(message_id)


async def path_to(connection: Connection, thread_id: str, head: str) -> list[Node]:
    """The root-to-`head` path of nodes (empty when `head` is not stored)."""
    return [_node(row) for row in await connection.fetch(_PATH, thread_id, head)]


async def group_receipt(
    connection: Connection, thread_id: str, group_id: str
) -> GroupReceipt | None:
    """The stored receipt of a group, or `None`."""
    row = await connection.fetchrow(_GROUP, thread_id, group_id)
    if row is None:
        return None
    return GroupReceipt(
        group_id=row["group_id"],
        parent_id=row["parent_id"],
        message_ids=list(row["message_ids"]),
        status=row["status"],
        selected_head=row["selected_head"],
        committed_at=row["committed_at"],
        edit_of=row["edit_of"],
    )


async def insert_group(
    connection: Connection,
    *,
    thread_id: str,
    owner: str,
    parent: Node | None,
    batch: Sequence[PreparedMessage],
    status: str,
    selected_head: str,
    version: int,
    edit_of: str | None = None,
) -> GroupReceipt:
    """Store one causal group and its receipt; `version` is the publishing control version."""
    ids = [item.id for item in batch]
    parent_id = parent.id if parent is not None else None
    committed_at: datetime = await connection.fetchval(
        _INSERT_GROUP, thread_id, ids[0], parent_id, ids, owner, status, selected_head, edit_of
    )
    await connection.execute(
        _INSERT_MESSAGES,
        thread_id,
        ids[0],
        ids,
        parent.depth + 1 if parent is not None else 0,
        version,
        edit_of,
        committed_at,
        [parent_id, *ids[:-1]],
        [item.role for item in batch],
        [item.body_json for item in batch],
        [item.identity for item in batch],
        [item.tool_call_id for item in batch],
        # Tool-call ids travel as one unit-separator-joined string per message, because
        # PostgreSQL arrays cannot be ragged.
        ["\x1f".join(item.tool_call_ids) for item in batch],
        [item.has_media for item in batch],
    )
    return GroupReceipt(
        group_id=ids[0],
        parent_id=parent_id,
        message_ids=ids,
        status=status,
        selected_head=selected_head,
        committed_at=committed_at,
        edit_of=edit_of,
    )
