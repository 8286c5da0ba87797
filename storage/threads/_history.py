"""The managed-execution reads: the content-free history view and messages by id."""

from __future__ import annotations

import json
from collections.abc import Sequence

from pydantic import TypeAdapter

from storage.threads._control import EMPTY_REVISION, revision_of
from storage.threads._db import Connection
from storage.threads._models import HistoryEntry, HistoryView
from storage.threads._paths import chains_cte, path_rows
from storage.threads._trusted import maker, trusted
from vocabulary.errors import ThreadError
from vocabulary.messages import Message

_make_entry = maker(HistoryEntry)

# Columns: 0 state, 1 version, 2 head (first row only), then the message from 3 on. One
# statement sees one snapshot, so the control row and the path need no explicit transaction.
_HISTORY_READ = f"""
WITH RECURSIVE ctl AS (
    SELECT state, version, CASE WHEN state = 'live' THEN heads->>$2 END AS head
    FROM crux_threads WHERE thread_id = $1
), {chains_cte("(SELECT head FROM ctl)")},
path AS (
    {
    path_rows(
        "m.message_id, m.role, m.group_id, m.seq, m.group_end, m.parent_id, "
        "m.tool_call_ids, m.tool_call_id, m.has_media, m.state, m.depth"
    )
}
)
-- The control columns only on the first row (the root, or the empty path's one row).
SELECT CASE WHEN coalesce(p.depth, 0) = 0 THEN ctl.state END,
       CASE WHEN coalesce(p.depth, 0) = 0 THEN ctl.version END,
       CASE WHEN coalesce(p.depth, 0) = 0 THEN ctl.head END,
       p.message_id, p.role, p.group_id, p.seq, p.group_end, p.parent_id,
       -- Empty arrays as NULL: no list object per message on the client.
       NULLIF(p.tool_call_ids, '{{}}'),
       p.tool_call_id,
       -- A primary-key probe per message, never a join over every stored count.
       (SELECT t.tokens FROM crux_thread_token_counts t
        WHERE t.thread_id = $1 AND t.message_id = p.message_id AND t.encoding = $3),
       p.has_media, p.state
FROM ctl LEFT JOIN path p ON true
ORDER BY p.depth
"""

# The same path, its ids alone, in one row: the control columns and the ids of the path's
# complete groups in path order (no entry per message, no token counts).
_PATH_IDS_READ = f"""
WITH RECURSIVE ctl AS (
    SELECT state, version, CASE WHEN state = 'live' THEN heads->>$2 END AS head
    FROM crux_threads WHERE thread_id = $1
), {chains_cte("(SELECT head FROM ctl)")},
path AS ({path_rows("m.message_id, m.group_id, m.state, m.depth")})
SELECT ctl.state, ctl.version,
       (SELECT array_agg(p.message_id ORDER BY p.depth) FROM path p
        WHERE NOT EXISTS (
            SELECT FROM path q WHERE q.group_id = p.group_id AND q.state <> 'live'
        )) AS ids
FROM ctl
"""

# The Thread's state and the messages in one statement (one snapshot). One primary-key probe
# per id (`LIMIT 1` keeps a planner without statistics from scanning the Thread per id). The
# body comes back as stored; its id is spliced in on the client (`stored_message_json`),
# which costs less than building a new jsonb value per message here.
_MESSAGES = """
SELECT c.state AS thread_state, m.message_id, m.state, m.body
FROM (SELECT 1) AS one
LEFT JOIN crux_threads c ON c.thread_id = $1
LEFT JOIN LATERAL (
    SELECT x.message_id, x.state, x.body::text AS body
    FROM unnest($2::text[]) AS wanted(id) CROSS JOIN LATERAL (
        SELECT * FROM crux_thread_messages y
        WHERE y.thread_id = $1 AND y.message_id = wanted.id
        LIMIT 1
    ) x
) m ON true
"""


async def read_history(
    connection: Connection, thread_id: str, *, owner: str, encoding: str | None
) -> HistoryView:
    """The content-free view of the owner's selected path, in one statement.

    Raises:
        ThreadError: `deleted` after deletion.
    """
    rows = await connection.fetch(_HISTORY_READ, thread_id, owner, encoding)
    if not rows:
        return _view(thread_id, EMPTY_REVISION, None, ())
    first = rows[0]
    if first[0] != "live":
        raise ThreadError("deleted", "thread is deleted", thread_id=thread_id)
    head: str | None = first[2]
    if head is None or first[3] is None:
        return _view(thread_id, revision_of(first[1]), head, ())
    # A group with any erased member is incomplete and must not reach a model.
    incomplete = {row[5] for row in rows if row[13] != "live"}
    make = _make_entry
    entries = tuple(
        make(
            {
                "id": row[3],
                "role": row[4],
                "group_id": row[5],
                "seq": row[6],
                "group_end": row[7],
                "parent_id": row[8],
                "tool_call_ids": tuple(row[9]) if row[9] else (),
                "tool_call_id": row[10],
                "tokens": row[11],
                "has_media": row[12],
            }
        )
        for row in rows
        if row[5] not in incomplete
    )
    return _view(thread_id, revision_of(first[1]), head, entries)


async def read_path_ids(
    connection: Connection, thread_id: str, *, owner: str
) -> tuple[str, tuple[str, ...]]:
    """The revision and the message ids of `read_history`'s view, in one statement.

    Raises:
        ThreadError: `deleted` after deletion.
    """
    row = await connection.fetchrow(_PATH_IDS_READ, thread_id, owner)
    if row is None:
        return EMPTY_REVISION, ()
    if row[0] != "live":
        raise ThreadError("deleted", "thread is deleted", thread_id=thread_id)
    return revision_of(row[1]), tuple(row[2] or ())


def _view(
    thread_id: str, revision: str, head: str | None, messages: tuple[HistoryEntry, ...]
) -> HistoryView:
    return trusted(
        HistoryView,
        {"thread_id": thread_id, "revision": revision, "head": head, "messages": messages},
    )


_MESSAGES_JSON = TypeAdapter(list[Message])


async def load_stored_messages(
    connection: Connection, thread_id: str, ids: Sequence[str]
) -> list[Message]:
    """Hydrate messages by id, in the order asked, in one statement.

    Raises:
        ThreadError: `not_found` for an unknown id, `redacted` for an erased one,
            `deleted` after deletion.
    """
    rows = await connection.fetch(_MESSAGES, thread_id, list(ids))
    if rows[0]["thread_state"] not in (None, "live"):
        raise ThreadError("deleted", "thread is deleted", thread_id=thread_id)
    by_id = {row["message_id"]: row for row in rows}
    bodies: list[str] = []
    for message_id in ids:
        row = by_id.get(message_id)
        if row is None:
            raise ThreadError(
                "not_found", f"message {message_id} is not stored", thread_id=thread_id
            )
        if row["state"] == "redacted":
            raise ThreadError("redacted", f"message {message_id} is redacted", thread_id=thread_id)
        bodies.append(stored_message_json(message_id, row["body"]))
    return messages_from_json(bodies)


def messages_from_json(bodies: Sequence[str]) -> list[Message]:
    """Messages from their JSON objects (`stored_message_json`), validated as one list.

    One validation of the whole list: per-message calls cost more than the parsing itself on
    long Threads.
    """
    return _MESSAGES_JSON.validate_json(f"[{','.join(bodies)}]") if bodies else []


def stored_message_json(message_id: str, body: str) -> str:
    """A stored body (a JSON object without `id`, see `_validate`) with its id spliced in."""
    if '"' in message_id or "\\" in message_id:
        quoted = json.dumps(message_id, ensure_ascii=False)
    else:
        quoted = f'"{message_id}"'
    return f'{{"id":{quoted}}}' if body == "{}" else f'{{"id":{quoted},{body[1:]}'
