"""Reads: snapshots with group-whole pagination and variants, the history view, messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage.threads._control import EMPTY_REVISION, Control
from storage.threads._db import Connection, Row
from storage.threads._full_read import (
    BODY_FIELDS,
    entry,
    read_full_path,
    sibling_variants,
    snapshot,
)
from storage.threads._models import ThreadSnapshot, VariantInfo
from storage.threads._nodes import Node, path_to
from vocabulary.errors import ThreadError

# Content rows of a page: role at column 5 (the layout `entry` reads).
_CONTENT = f"""
SELECT message_id, parent_id, seq, state, child_groups, role, created_at, {BODY_FIELDS}
FROM unnest($2::text[]) AS wanted(id) CROSS JOIN LATERAL (
    SELECT * FROM crux_thread_messages x
    WHERE x.thread_id = $1 AND x.message_id = wanted.id AND x.state <> 'redacted'
    LIMIT 1
) m
"""

# Head-first walk; with LIMIT only the newest positions are visited.
_WALK = """
WITH RECURSIVE walk AS (
    SELECT message_id, parent_id, seq, depth, state, child_groups
    FROM crux_thread_messages WHERE thread_id = $1 AND message_id = $2
    UNION ALL
    SELECT m.message_id, m.parent_id, m.seq, m.depth, m.state, m.child_groups
    FROM walk w CROSS JOIN LATERAL (
        SELECT * FROM crux_thread_messages x
        WHERE x.thread_id = $1 AND x.message_id = w.parent_id
        LIMIT 1
    ) m
)
SELECT message_id, parent_id, seq, state, child_groups, depth FROM walk LIMIT $3
"""


@dataclass(frozen=True, slots=True)
class _Step:
    """The structure of one path position needed for paging and variants."""

    id: str
    parent_id: str | None
    seq: int
    state: str
    child_groups: int


MAX_PAGE_LIMIT = 2**31 - 1
"""Largest page size (PostgreSQL's `integer`); a larger one could never be sent."""


def check_page_options(thread_id: str, *, before: str | None, limit: int | None) -> None:
    """Validate `before`/`limit` before any I/O.

    Raises:
        ThreadError: `invalid_message` for a non-positive or non-integer limit;
            `invalid_group` for `before` without `limit`.
    """
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or limit < 1  # pyright: ignore[reportUnnecessaryIsInstance]
    ):
        raise ThreadError(
            "invalid_message", "limit must be a positive integer", thread_id=thread_id
        )
    if limit is not None and limit > MAX_PAGE_LIMIT:
        raise ThreadError(
            "invalid_message", f"limit must not exceed {MAX_PAGE_LIMIT}", thread_id=thread_id
        )
    if before is not None and limit is None:
        raise ThreadError("invalid_group", "before requires limit", thread_id=thread_id)


def page_start(path: Sequence[_Step] | Sequence[Node], limit: int) -> int:
    """Index where the newest page of whole groups begins (groups are never split)."""
    taken = 0
    start = len(path)
    while start > 0:
        group_start = start - 1
        while group_start > 0 and path[group_start].seq != 0:
            group_start -= 1
        size = start - group_start
        if taken and taken + size > limit:
            break
        taken += size
        start = group_start
        if taken >= limit:
            break
    return start


async def _variants(
    connection: Connection,
    thread_id: str,
    control: Control,
    path: Sequence[_Step],
    start: int,
) -> dict[str, VariantInfo]:
    """Variant info for the live group starts of `path[start:]` that have siblings.

    The branch counters tell which parents have several groups, so the sibling query runs
    only when alternatives exist.
    """
    wanted: list[_Step] = []
    for index in range(start, len(path)):
        item = path[index]
        if item.seq != 0 or item.state != "live":
            continue
        count = path[index - 1].child_groups if index > 0 else control.root_groups
        if count >= 2:
            wanted.append(item)
    found = await sibling_variants(
        connection,
        thread_id,
        [(item.id, item.parent_id) for item in wanted],
        control.version,
    )
    if found is None:
        raise ThreadError("deleted", "thread is deleted", thread_id=thread_id)
    return found


async def _newest_steps(
    connection: Connection, thread_id: str, head: str, limit: int
) -> list[_Step]:
    """The newest part of the path, long enough to page `limit` messages of whole groups.

    The walk stops early (PostgreSQL evaluates a recursive query only as far as its rows are
    fetched), so the newest page of a long Thread costs about the size of the page. The
    result is the whole path when it is short; otherwise the page starts after index 0.
    """
    budget = 2 * limit + 16
    while True:
        rows = await connection.fetch(_WALK, thread_id, head, budget)
        steps = [_step(row) for row in sorted(rows, key=lambda row: row["depth"])]
        if len(rows) < budget or steps[0].parent_id is None or page_start(steps, limit) > 0:
            return steps
        budget *= 4


def _step(row: Row) -> _Step:
    # Every path query starts with message_id, parent_id, seq, state, child_groups.
    return _Step(id=row[0], parent_id=row[1], seq=row[2], state=row[3], child_groups=row[4])


async def build_snapshot(
    connection: Connection,
    control: Control | None,
    thread_id: str,
    *,
    owner: str,
    at: str | None = None,
    before: str | None = None,
    limit: int | None = None,
) -> ThreadSnapshot:
    """Render one snapshot from the state visible to `connection`."""
    if control is None:
        return ThreadSnapshot(thread_id=thread_id, revision=EMPTY_REVISION)
    control.ensure_live()
    head = at if at is not None else control.head(owner)
    if head is None:
        return ThreadSnapshot(thread_id=thread_id, revision=control.revision)
    if limit is None:
        return await read_full_path(connection, thread_id, owner=owner, at=head)
    contents: dict[str, Row] = {}
    if before is None:
        path = await _newest_steps(connection, thread_id, head, limit)
    else:
        path = [
            _Step(
                id=item.id,
                parent_id=item.parent_id,
                seq=item.seq,
                state=item.state,
                child_groups=item.child_groups,
            )
            for item in await path_to(connection, thread_id, head)
        ]
    if not path:
        raise ThreadError("not_found", f"message {head} is not published", thread_id=thread_id)
    if before is not None:
        index = next((i for i, item in enumerate(path) if item.id == before), None)
        if index is None:
            raise ThreadError(
                "not_found", f"message {before} is not on the path", thread_id=thread_id
            )
        if path[index].seq != 0:
            raise ThreadError(
                "invalid_group", f"message {before} is not a group start", thread_id=thread_id
            )
        path = path[:index]
    start = page_start(path, limit)
    if start < len(path):
        rows = await connection.fetch(_CONTENT, thread_id, [item.id for item in path[start:]])
        contents = {row["message_id"]: row for row in rows}
    variants = await _variants(connection, thread_id, control, path, start)
    return snapshot(
        thread_id,
        control.revision,
        head,
        tuple(
            entry(
                item.id, item.parent_id, item.state, contents.get(item.id), 5, variants.get(item.id)
            )
            for item in path[start:]
        ),
        path[start].id if 0 < start < len(path) else None,
    )
