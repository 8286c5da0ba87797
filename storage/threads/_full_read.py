"""The unpaged path read: control row, path, content and variants in one statement.

One statement sees one snapshot, so the read needs neither an explicit transaction nor a
second round trip; siblings are looked up only for group starts whose parent has several
groups (the branch counters), inside the same statement.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter

from storage.threads._control import EMPTY_REVISION, revision_of
from storage.threads._db import Connection, Row
from storage.threads._models import (
    MessageEntry,
    RedactedEntry,
    RemovedEntry,
    ThreadEntry,
    ThreadSnapshot,
    VariantInfo,
)
from storage.threads._paths import chains_cte, path_rows
from storage.threads._trusted import maker, trusted
from vocabulary.errors import ThreadError
from vocabulary.messages import Part

_make_message = maker(MessageEntry)

# PostgreSQL unpacks the stored body, so plain-text messages need no JSON parsing here;
# `->>` gives an array of parts as its JSON text, parsed by `PARTS`.
BODY_FIELDS = """
body->>'content' AS content, jsonb_typeof(body->'content') = 'array' AS is_parts,
NULLIF(body->'metadata', '{}'::jsonb)::text AS metadata,
tool_call_id, body->>'tool_name' AS tool_name
"""

# Columns: 0 state, 1 version, 2 root_groups, 3 head (first row only), then the message
# from 4 on.
_FULL_READ = f"""
WITH RECURSIVE ctl AS (
    SELECT state, version, root_groups,
           CASE WHEN state = 'live' THEN coalesce($2, heads->>$3) END AS head
    FROM crux_threads WHERE thread_id = $1
), {chains_cte("(SELECT head FROM ctl)")}
-- The control columns only on the first row (the root, or the empty path's one row).
SELECT CASE WHEN coalesce(p.depth, 0) = 0 THEN ctl.state END,
       CASE WHEN coalesce(p.depth, 0) = 0 THEN ctl.version END,
       CASE WHEN coalesce(p.depth, 0) = 0 THEN ctl.root_groups END,
       CASE WHEN coalesce(p.depth, 0) = 0 THEN ctl.head END, p.message_id, p.parent_id, p.seq,
       p.child_groups, p.state, p.role, p.created_at, p.content, p.is_parts, p.metadata,
       p.tool_call_id, p.tool_name
FROM ctl LEFT JOIN ({
    path_rows(
        "m.message_id, m.parent_id, m.seq, m.depth, m.state, m.child_groups, m.role, "
        "m.created_at, " + BODY_FIELDS.replace("body", "m.body")
    )
}) p ON true
ORDER BY p.depth
"""

# Siblings as of one control version: groups published later are left out, so a read that
# runs this after its path statement still describes the revision it returns.
# Per parent (OFFSET 0 keeps the lookup parameterised), root groups apart, so that both
# halves stay on the parent index.
SIBLINGS = """
SELECT parent_id, message_id FROM (
    SELECT x.parent_id, x.message_id, x.published_version
    FROM unnest($2::text[]) AS wanted(id) CROSS JOIN LATERAL (
        SELECT parent_id, message_id, published_version FROM crux_thread_messages
        WHERE thread_id = $1 AND parent_id = wanted.id AND seq = 0 AND published_version <= $4
        OFFSET 0
    ) x
    UNION ALL
    SELECT parent_id, message_id, published_version FROM crux_thread_messages
    WHERE $3 AND thread_id = $1 AND parent_id IS NULL AND seq = 0 AND published_version <= $4
) s
ORDER BY published_version, message_id COLLATE "C"
"""

PARTS: TypeAdapter[tuple[Part, ...]] = TypeAdapter(tuple[Part, ...])
"""Content parts are the one stored value parsed (and validated) on read."""


def variant_of(message_id: str, siblings: list[str] | None) -> VariantInfo | None:
    """The position of a group start among its siblings (`None` without alternatives)."""
    if siblings is None or len(siblings) < 2 or message_id not in siblings:
        return None
    index = siblings.index(message_id)
    return trusted(
        VariantInfo,
        {
            "index": index,
            "count": len(siblings),
            "previous": siblings[index - 1] if index > 0 else None,
            "next": siblings[index + 1] if index + 1 < len(siblings) else None,
        },
    )


async def sibling_variants(
    connection: Connection,
    thread_id: str,
    wanted: Sequence[tuple[str, str | None]],
    version: int,
) -> dict[str, VariantInfo] | None:
    """Variant info of group starts `(id, parent_id)` whose parents have several groups.

    Returns:
        The variants by id, or `None` when a group start is missing among its own siblings,
        which happens only when the Thread's rows were deleted after the path was read.
    """
    if not wanted:
        return {}
    parents = [parent for _, parent in wanted if parent is not None]
    at_root = any(parent is None for _, parent in wanted)
    siblings: dict[str | None, list[str]] = {}
    for row in await connection.fetch(SIBLINGS, thread_id, parents, at_root, version):
        siblings.setdefault(row["parent_id"], []).append(row["message_id"])
    found: dict[str, VariantInfo] = {}
    for message_id, parent in wanted:
        group = siblings.get(parent)
        if group is None or message_id not in group:
            return None
        variant = variant_of(message_id, group)
        if variant is not None:
            found[message_id] = variant
    return found


def entry(
    message_id: str,
    parent_id: str | None,
    state: str,
    row: Row | None,
    base: int,
    variant: VariantInfo | None,
) -> ThreadEntry:
    """One path entry from a content row whose role column is at index `base`.

    The content columns follow the role: created_at, content, is_parts, metadata,
    tool_call_id, tool_name. A missing row (content not selected because redacted) is a tombstone.
    """
    if state == "redacted" or row is None:
        return trusted(
            RedactedEntry, {"kind": "redacted", "id": message_id, "parent_id": parent_id}
        )
    if state == "removed":
        return trusted(
            RemovedEntry,
            {
                "kind": "removed",
                "id": message_id,
                "parent_id": parent_id,
                "created_at": row[base + 1],
            },
        )
    content: str = row[base + 2]
    metadata: str | None = row[base + 4]
    values: dict[str, Any] = {
        "kind": "message",
        "id": message_id,
        "parent_id": parent_id,
        "created_at": row[base + 1],
        "variant": variant,
        "role": row[base],
        "content": PARTS.validate_json(content) if row[base + 3] else content,
        "metadata": {} if metadata is None else json.loads(metadata),
        "tool_call_id": row[base + 5],
        "tool_name": row[base + 6],
    }
    return trusted(MessageEntry, values)


def snapshot(
    thread_id: str,
    revision: str,
    head: str | None,
    entries: tuple[ThreadEntry, ...] = (),
    cursor: str | None = None,
) -> ThreadSnapshot:
    """A snapshot of already-built entries."""
    return trusted(
        ThreadSnapshot,
        {
            "thread_id": thread_id,
            "revision": revision,
            "head": head,
            "entries": entries,
            "cursor": cursor,
        },
    )


async def read_full_path(
    connection: Connection, thread_id: str, *, owner: str, at: str | None
) -> ThreadSnapshot:
    """The whole root-to-head path of `at` (or the owner's head) in one statement.

    Raises:
        ThreadError: `deleted` after deletion, `not_found` for an unpublished `at`.
    """
    rows = await connection.fetch(_FULL_READ, thread_id, at, owner)
    if not rows:
        return snapshot(thread_id, EMPTY_REVISION, None)
    first = rows[0]
    if first[0] != "live":
        raise ThreadError("deleted", "thread is deleted", thread_id=thread_id)
    revision = revision_of(first[1])
    head: str | None = first[3]
    if head is None:
        return snapshot(thread_id, revision, None)
    if first[4] is None:
        raise ThreadError("not_found", f"message {head} is not published", thread_id=thread_id)
    # A live group start has variants when its parent (the previous position) published
    # several groups; the control row counts the groups at the root. Entries are built in
    # one pass (this loop is most of a long read's Python time) and the few with variants
    # are rebuilt once the siblings are known.
    entries: list[ThreadEntry] = []
    wanted: list[tuple[str, str | None]] = []
    at_index: list[int] = []
    parent_groups: int = first[2]
    make = _make_message
    for row in rows:
        message_id: str = row[4]
        parent_id: str | None = row[5]
        state: str = row[8]
        child_groups: int = row[7]
        if state != "live":
            entries.append(entry(message_id, parent_id, state, row, 9, None))
        else:
            if parent_groups >= 2 and row[6] == 0:
                wanted.append((message_id, parent_id))
                at_index.append(len(entries))
            content: str = row[11]
            metadata: str | None = row[13]
            entries.append(
                make(
                    {
                        "kind": "message",
                        "id": message_id,
                        "parent_id": parent_id,
                        "created_at": row[10],
                        "variant": None,
                        "role": row[9],
                        "content": PARTS.validate_json(content) if row[12] else content,
                        "metadata": {} if metadata is None else json.loads(metadata),
                        "tool_call_id": row[14],
                        "tool_name": row[15],
                    }
                )
            )
        parent_groups = child_groups
    if wanted:
        variants = await sibling_variants(connection, thread_id, wanted, first[1])
        if variants is None:
            # Only deletion removes stored messages, and it commits its marker first.
            raise ThreadError("deleted", "thread is deleted", thread_id=thread_id)
        for index, (message_id, _) in zip(at_index, wanted, strict=True):
            variant = variants.get(message_id)
            if variant is not None:
                entries[index] = entries[index].model_copy(update={"variant": variant})
    return snapshot(thread_id, revision, head, tuple(entries))
