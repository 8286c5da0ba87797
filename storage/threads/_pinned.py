"""A sealed plan's history, read where it lies: position ranges of the selected path.

A plan names history by positions on the path at the revision it was sealed on. The
attempt needs the revision (to know the Thread did not move), the ids at those positions
(the output's sources) and the messages themselves. One walk of the path returns all three:
the chain index yields each message row with its body, so no message is looked up again
by id, and the whole of it is one snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage.threads._control import EMPTY_REVISION, revision_of
from storage.threads._db import Connection
from storage.threads._history import messages_from_json, stored_message_json
from storage.threads._paths import chains_cte, path_rows
from vocabulary.errors import ThreadError
from vocabulary.messages import Message

# Positions count the messages of complete groups only (as `read_history` and
# `read_path_ids` do). Columns: 0 state, 1 version, 2 the path's length (the same on every
# row), then the selected message: 3 position, 4 id, 5 body.
_SELECTED_READ = f"""
WITH RECURSIVE ctl AS (
    SELECT state, version, CASE WHEN state = 'live' THEN heads->>$2 END AS head
    FROM crux_threads WHERE thread_id = $1
), {chains_cte("(SELECT head FROM ctl)")},
path AS ({path_rows("m.message_id, m.group_id, m.state, m.depth, m.body")}),
complete AS (
    SELECT p.message_id, p.body, row_number() OVER (ORDER BY p.depth) - 1 AS position
    FROM path p
    WHERE NOT EXISTS (SELECT FROM path q WHERE q.group_id = p.group_id AND q.state <> 'live')
)
SELECT ctl.state, ctl.version, (SELECT count(*) FROM complete), s.position, s.message_id, s.body
FROM ctl LEFT JOIN LATERAL (
    SELECT c.position, c.message_id, c.body::text AS body FROM complete c
    WHERE EXISTS (
        SELECT FROM unnest($3::bigint[], $4::bigint[]) AS r(first, stop)
        WHERE c.position >= r.first AND c.position < r.stop
    )
) s ON true
ORDER BY s.position
"""


@dataclass(frozen=True)
class PathSelection:
    """Position ranges of a Thread's selected path, read at one revision.

    Attributes:
        revision: The revision read.
        ids: The ids at the positions, range by range.
        messages: The messages at the positions, in the same order, each with `id` set.
    """

    revision: str
    ids: tuple[str, ...]
    messages: list[Message]


async def read_selected(
    connection: Connection,
    thread_id: str,
    *,
    owner: str,
    ranges: Sequence[tuple[int, int]],
    revision: str | None,
) -> PathSelection | None:
    """The messages at half-open position `ranges` of the owner's selected path.

    Returns:
        The selection, or `None` when the Thread is no longer at `revision` (the positions
        may name other messages then; `None` for `revision` accepts any).

    Raises:
        ThreadError: `deleted` after deletion; `identity_conflict` for a range that does not
            lie on the path.
    """
    firsts = [first for first, _ in ranges]
    stops = [stop for _, stop in ranges]
    rows = await connection.fetch(_SELECTED_READ, thread_id, owner, firsts, stops)
    if not rows:
        current, length = EMPTY_REVISION, 0
    else:
        if rows[0][0] != "live":
            raise ThreadError("deleted", "thread is deleted", thread_id=thread_id)
        current, length = revision_of(rows[0][1]), rows[0][2]
    if revision is not None and current != revision:
        return None
    by_position = {row[3]: row for row in rows if row[3] is not None}
    ids: list[str] = []
    bodies: list[str] = []
    for first, stop in ranges:
        if not 0 <= first <= stop <= length:
            raise ThreadError("identity_conflict", "the planned history is no longer on the path")
        for position in range(first, stop):
            row = by_position[position]
            ids.append(row[4])
            bodies.append(stored_message_json(row[4], row[5]))
    return PathSelection(revision=current, ids=tuple(ids), messages=messages_from_json(bodies))
