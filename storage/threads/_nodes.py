"""Message nodes and group receipts: lookups, path walks and group insertion."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from storage.threads._control import Control
from storage.threads._db import Connection, Row
from storage.threads._paths import chains_cte, path_rows
from storage.threads._validate import PreparedMessage
from vocabulary.commits import ThreadCommit

_NODE_COLUMNS = (
    "message_id, parent_id, group_id, seq, group_end, depth, state, published_version, role, "
    "identity, edit_of, child_groups"
)

# Lookups by id probe the primary key once per id (LATERAL ... LIMIT 1), so a planner
# without statistics cannot fall back to reading every row of the Thread.
_NODES_BY_ID = f"""
SELECT {_NODE_COLUMNS}
FROM unnest($2::text[]) AS wanted(id) CROSS JOIN LATERAL (
    SELECT * FROM crux_thread_messages x
    WHERE x.thread_id = $1 AND x.message_id = wanted.id
    LIMIT 1
) m
"""

# The path over chains (see `_paths`), one range scan per branch point on it.
_PATH = f"""
WITH RECURSIVE {chains_cte("$2")}
{path_rows(_NODE_COLUMNS)}
ORDER BY depth
"""

_GROUP = """
SELECT group_id, parent_id, message_ids, status, selected_head, committed_at, edit_of
FROM crux_thread_groups WHERE thread_id = $1 AND group_id = $2
"""

# One statement publishes a whole group: receipt, nodes, the parent's branch counter,
# remembered tips and the control row. Data-modifying CTEs share one snapshot, which is safe
# because the caller holds the control row lock and every row touched here is this Thread's.
_PUBLISH_GROUP = """
WITH receipt AS (
    INSERT INTO crux_thread_groups
        (thread_id, group_id, parent_id, message_ids, owner_id, status, selected_head,
         committed_at, edit_of)
    VALUES ($1, $2, $3, $4::text[], $5, $6, $7, clock_timestamp(), $8)
    RETURNING committed_at
), nodes AS (
    INSERT INTO crux_thread_messages
        (thread_id, message_id, parent_id, group_id, seq, group_end, depth, published_version,
         role, body, identity, tool_call_id, tool_call_ids, has_media, edit_of, created_at,
         chain_id)
    SELECT $1, u.message_id, u.parent_id, $2, u.seq - 1, u.seq = cardinality($4::text[]),
           $9 + u.seq - 1, $10, u.role, u.body::jsonb, u.identity, u.tool_call_id,
           CASE WHEN u.tool_call_ids = '' THEN '{}'::text[]
                ELSE string_to_array(u.tool_call_ids, chr(31)) END,
           u.has_media, $8, (SELECT committed_at FROM receipt),
           -- The first group after a parent continues its chain; any later one starts its
           -- own (migration 0005). The statement's snapshot is taken under the control
           -- lock, before the counter update below.
           coalesce((SELECT CASE WHEN p.child_groups = 0 THEN p.chain_id END
                     FROM crux_thread_messages p
                     WHERE p.thread_id = $1 AND p.message_id = $3), $2)
    FROM unnest($4::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
                $16::text[], $17::boolean[])
         WITH ORDINALITY AS u(message_id, parent_id, role, body, identity, tool_call_id,
                              tool_call_ids, has_media, seq)
), parent AS (
    UPDATE crux_thread_messages SET child_groups = child_groups + 1
    WHERE thread_id = $1 AND message_id = $3
), advanced AS (
    UPDATE crux_thread_leaves SET leaf = $18
    WHERE $19 AND thread_id = $1 AND owner_id = $5 AND leaf = $3
    RETURNING 1
), remembered AS (
    INSERT INTO crux_thread_leaves (thread_id, owner_id, branch_start, leaf)
    SELECT $1, $5, $2, $18 WHERE $20 AND NOT EXISTS (SELECT 1 FROM advanced)
    ON CONFLICT (thread_id, owner_id, branch_start) DO UPDATE SET leaf = EXCLUDED.leaf
), control AS (
    UPDATE crux_threads
    SET version = $10, heads = $21::text::jsonb,
        root_groups = root_groups + CASE WHEN $3::text IS NULL THEN 1 ELSE 0 END,
        updated_at = clock_timestamp()
    WHERE thread_id = $1
)
SELECT committed_at FROM receipt
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
    child_groups: int


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
            message_ids=tuple(self.message_ids),
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
        child_groups=row["child_groups"],
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


async def publish_group(
    connection: Connection,
    control: Control,
    *,
    owner: str,
    parent: Node | None,
    batch: Sequence[PreparedMessage],
    status: str,
    selected_head: str,
    edit_of: str | None = None,
    advance_tips: bool = False,
    remember_unadvanced: bool = False,
) -> GroupReceipt:
    """Store and publish one causal group in one statement.

    The caller holds the control row lock and has already set `control.heads`; the control
    version is bumped here.

    Args:
        connection: A connection inside the locking transaction.
        control: The locked control state.
        owner: The publishing owner.
        parent: The group's parent node (`None` at the root).
        batch: The validated group.
        status: `selected` or `alternative`.
        selected_head: The receipt's selected head.
        edit_of: For edits, the replaced message.
        advance_tips: Move the owner's remembered tips that equal the parent to the leaf.
        remember_unadvanced: Remember the new branch when no tip advanced.
    """
    ids = [item.id for item in batch]
    parent_id = parent.id if parent is not None else None
    version = control.version + 1
    committed_at: datetime = await connection.fetchval(
        _PUBLISH_GROUP,
        control.thread_id,
        ids[0],
        parent_id,
        ids,
        owner,
        status,
        selected_head,
        edit_of,
        parent.depth + 1 if parent is not None else 0,
        version,
        [parent_id, *ids[:-1]],
        [item.role for item in batch],
        [item.body_json for item in batch],
        [item.identity for item in batch],
        [item.tool_call_id for item in batch],
        # Tool-call ids travel as one unit-separator-joined string per message, because
        # PostgreSQL arrays cannot be ragged.
        ["\x1f".join(item.tool_call_ids) for item in batch],
        [item.has_media for item in batch],
        ids[-1],
        advance_tips and parent_id is not None,
        remember_unadvanced,
        json.dumps(control.heads, sort_keys=True),
    )
    control.version = version
    if parent_id is None:
        control.root_groups += 1
    return GroupReceipt(
        group_id=ids[0],
        parent_id=parent_id,
        message_ids=ids,
        status=status,
        selected_head=selected_head,
        committed_at=committed_at,
        edit_of=edit_of,
    )
