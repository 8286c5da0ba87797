"""Publication of one causal group: replay detection, parent choice, selection and tips."""

from __future__ import annotations

import json
from collections.abc import Sequence

import asyncpg

from storage.threads._control import Control, decode_control, lock_control
from storage.threads._db import Connection
from storage.threads._nodes import Node, group_receipt, nodes_by_id, publish_group
from storage.threads._validate import MAIN_OWNER, PreparedMessage
from vocabulary.commits import ThreadCommit
from vocabulary.errors import ThreadError

# Locks the control row and, in the same round trip, looks up the supplied ids and the
# parent. The lookup uses the statement's snapshot, which may predate a publication that
# committed while the lock was awaited; `seen_version` (read from that snapshot) exposes
# this, and a stale lookup is simply repeated under the lock.
_LOCK_AND_LOOK_UP = """
SELECT c.state, c.version, c.owners::text AS owners, c.heads::text AS heads,
       c.cleanup_pending, c.root_groups,
       (SELECT s.version FROM crux_threads s WHERE s.thread_id = $1) AS seen_version,
       (SELECT coalesce(json_agg(json_build_object(
            'id', m.message_id, 'parent_id', m.parent_id, 'group_id', m.group_id,
            'seq', m.seq, 'group_end', m.group_end, 'depth', m.depth, 'state', m.state,
            'published_version', m.published_version, 'role', m.role,
            'identity', m.identity, 'edit_of', m.edit_of, 'child_groups', m.child_groups
        )), '[]')::text
        FROM unnest($2::text[] || CASE WHEN $3 THEN $4 ELSE c.heads->>$5 END) AS wanted(id)
        CROSS JOIN LATERAL (
            SELECT * FROM crux_thread_messages x
            WHERE x.thread_id = $1 AND x.message_id = wanted.id
            LIMIT 1
        ) m
       ) AS nodes
FROM crux_threads c WHERE c.thread_id = $1
FOR UPDATE OF c
"""

_FAST_APPEND = """
SELECT outcome, status, selected_head, parent, committed_at
FROM crux_thread_fast_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
"""

REMEMBER_TIP = """
INSERT INTO crux_thread_leaves (thread_id, owner_id, branch_start, leaf)
VALUES ($1, $2, $3, $4)
ON CONFLICT (thread_id, owner_id, branch_start) DO UPDATE SET leaf = EXCLUDED.leaf
"""


async def fast_append(
    connection: Connection,
    thread_id: str,
    batch: Sequence[PreparedMessage],
    *,
    owner: str,
    explicit_parent: bool,
    parent_id: str | None,
) -> ThreadCommit | None:
    """Publish an ordinary new group in one round trip (its own transaction).

    Returns:
        The receipt, or `None` when the append needs the full path (first append, replay,
        error, or a database without the function); nothing was written then.
    """
    ids = [item.id for item in batch]
    try:
        row = await connection.fetchrow(
            _FAST_APPEND,
            thread_id,
            owner,
            explicit_parent,
            parent_id,
            ids,
            [item.role for item in batch],
            [item.body_json for item in batch],
            [item.identity for item in batch],
            [item.tool_call_id for item in batch],
            ["\x1f".join(item.tool_call_ids) for item in batch],
            [item.has_media for item in batch],
        )
    except (asyncpg.UndefinedFunctionError, asyncpg.UndefinedTableError):
        return None
    if row is None or row["outcome"] != "published":
        return None
    return ThreadCommit(
        status=row["status"],
        message_ids=tuple(ids),
        parent_id=row["parent"],
        selected_head=row["selected_head"],
        committed_at=row["committed_at"],
        replayed=False,
    )


def check_writer(control: Control, owner: str) -> None:
    """Only `main` and registered open owners may publish or navigate.

    Raises:
        ThreadError: `invalid_message` for an unregistered or closed owner.
    """
    if owner != MAIN_OWNER and control.owners.get(owner) != "open":
        raise ThreadError(
            "invalid_message", f"owner {owner} is not registered open", thread_id=control.thread_id
        )


async def _replay(
    connection: Connection,
    control: Control,
    batch: Sequence[PreparedMessage],
    existing: dict[str, Node],
    *,
    explicit_parent: bool,
    parent_id: str | None,
) -> ThreadCommit:
    """Return the stored receipt if `batch` is exactly a published group, else conflict."""
    thread_id = control.thread_id
    ids = [item.id for item in batch]

    def conflict(reason: str) -> ThreadError:
        return ThreadError("identity_conflict", f"{reason} for group {ids[0]}", thread_id=thread_id)

    if len(existing) != len(ids):
        raise conflict("partial overlap with stored messages")
    first = existing[ids[0]]
    receipt = await group_receipt(connection, thread_id, first.group_id)
    if receipt is None or receipt.message_ids != ids:
        raise conflict("different batch membership or order")
    if receipt.edit_of is not None:
        raise conflict("id belongs to an edit")
    for item in batch:
        if existing[item.id].identity != item.identity:
            raise conflict("different content, role or metadata")
    if explicit_parent and receipt.parent_id != parent_id:
        raise conflict("different parent")
    return receipt.commit(replayed=True)


async def lock_for_append(
    connection: Connection,
    thread_id: str,
    batch: Sequence[PreparedMessage],
    *,
    owner: str,
    explicit_parent: bool,
    parent_id: str | None,
) -> tuple[Control, dict[str, Node] | None]:
    """Lock (creating if needed) the control row, with the append's node lookup when fresh.

    Returns:
        The locked control state and the stored nodes among the batch ids and the parent,
        or `None` for the nodes when they must be looked up again under the lock.
    """
    ids = [item.id for item in batch]
    row = await connection.fetchrow(
        _LOCK_AND_LOOK_UP, thread_id, ids, explicit_parent, parent_id, owner
    )
    if row is None:
        control = await lock_control(connection, thread_id, create=True)
        assert control is not None
        return control, None
    control = decode_control(thread_id, row)
    if row["seen_version"] != control.version:
        return control, None
    nodes = [Node(**fields) for fields in json.loads(row["nodes"])]
    return control, {item.id: item for item in nodes}


async def append_group(
    connection: Connection,
    control: Control,
    batch: Sequence[PreparedMessage],
    *,
    owner: str,
    explicit_parent: bool,
    parent_id: str | None,
    found: dict[str, Node] | None = None,
) -> ThreadCommit:
    """Publish `batch` as one causal group inside the caller's locked transaction.

    Args:
        connection: A connection inside a transaction that holds the control row lock.
        control: The locked, live control state (mutated and published here).
        batch: The validated group.
        owner: The owner whose head is compared and advanced.
        explicit_parent: True when `parent_id` was given (`after` or an expected head);
            otherwise the owner's head is the parent.
        parent_id: The explicit parent (`None` = root), ignored unless `explicit_parent`.
        found: The stored nodes among the batch ids and the parent, when already looked up
            under the lock.
    """
    thread_id = control.thread_id
    ids = [item.id for item in batch]
    head = control.head(owner)
    target = parent_id if explicit_parent else head
    if found is None:
        # One lookup serves both replay detection and the parent check.
        found = await nodes_by_id(connection, thread_id, [*ids, *([target] if target else [])])
    existing = {key: value for key, value in found.items() if key in ids}
    if any(item.state == "redacted" for item in existing.values()):
        raise ThreadError("redacted", f"group {ids[0]} contains a redacted id", thread_id=thread_id)
    if existing:
        return await _replay(
            connection,
            control,
            batch,
            existing,
            explicit_parent=explicit_parent,
            parent_id=parent_id,
        )
    check_writer(control, owner)

    parent: Node | None = None
    if target is not None:
        parent = found.get(target)
        if parent is None:
            raise ThreadError("not_found", f"parent {target} is not published", thread_id=thread_id)
        if not parent.group_end:
            raise ThreadError(
                "invalid_group", f"parent {target} is not a group end", thread_id=thread_id
            )

    leaf = ids[-1]
    # An owner without a head has nothing to compete with: its first publication is selected.
    selected = head is None or head == target
    if selected:
        control.heads[owner] = leaf
    receipt = await publish_group(
        connection,
        control,
        owner=owner,
        parent=parent,
        batch=batch,
        status="selected" if selected else "alternative",
        selected_head=head if head is not None and not selected else leaf,
        advance_tips=True,
        # An unselected branch must stay reachable from a remembered tip.
        remember_unadvanced=not selected,
    )
    return receipt.commit(replayed=False)
