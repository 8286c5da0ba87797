"""The managed-execution reads: the content-free history view and messages by id."""

from __future__ import annotations

import json
from collections.abc import Sequence

from storage.threads._control import EMPTY_REVISION, Control
from storage.threads._db import Connection
from storage.threads._models import HistoryView
from vocabulary.errors import ThreadError
from vocabulary.messages import Message

_HISTORY_PATH = """
WITH RECURSIVE path AS (
    SELECT message_id, parent_id, group_id, seq, group_end, depth, state, role, tool_call_id,
           tool_call_ids, has_media
    FROM crux_thread_messages WHERE thread_id = $1 AND message_id = $2
    UNION ALL
    SELECT m.message_id, m.parent_id, m.group_id, m.seq, m.group_end, m.depth, m.state, m.role,
           m.tool_call_id, m.tool_call_ids, m.has_media
    FROM path p CROSS JOIN LATERAL (
        SELECT * FROM crux_thread_messages x
        WHERE x.thread_id = $1 AND x.message_id = p.parent_id
        LIMIT 1
    ) m
)
SELECT p.*,
       -- A primary-key probe per message, never a join over every stored count.
       (SELECT t.tokens FROM crux_thread_token_counts t
        WHERE t.thread_id = $1 AND t.message_id = p.message_id AND t.encoding = $3) AS tokens
FROM path p
ORDER BY p.depth
"""

_PATH_IDS = """
WITH RECURSIVE path AS (
    SELECT message_id, parent_id, group_id, depth, state
    FROM crux_thread_messages WHERE thread_id = $1 AND message_id = $2
    UNION ALL
    SELECT m.message_id, m.parent_id, m.group_id, m.depth, m.state
    FROM path p CROSS JOIN LATERAL (
        SELECT * FROM crux_thread_messages x
        WHERE x.thread_id = $1 AND x.message_id = p.parent_id
        LIMIT 1
    ) m
)
SELECT message_id, group_id, state FROM path ORDER BY depth
"""

_MESSAGES = """
SELECT message_id, state, body::text AS body
FROM unnest($2::text[]) AS wanted(id) CROSS JOIN LATERAL (
    SELECT * FROM crux_thread_messages x
    WHERE x.thread_id = $1 AND x.message_id = wanted.id
    LIMIT 1
) m
"""


async def build_history_view(
    connection: Connection,
    control: Control | None,
    thread_id: str,
    *,
    owner: str,
    encoding: str | None,
) -> HistoryView:
    """Render the content-free view of the owner's selected path."""
    if control is None:
        return HistoryView(thread_id=thread_id, revision=EMPTY_REVISION)
    control.ensure_live()
    head = control.head(owner)
    if head is None:
        return HistoryView(thread_id=thread_id, revision=control.revision)
    rows = await connection.fetch(_HISTORY_PATH, thread_id, head, encoding)
    # A group with any erased member is incomplete and must not reach a model.
    incomplete = {row["group_id"] for row in rows if row["state"] != "live"}
    # One validation call for the whole view is much cheaper than one per entry.
    return HistoryView.model_validate(
        {
            "thread_id": thread_id,
            "revision": control.revision,
            "head": head,
            "messages": [
                {
                    "id": row["message_id"],
                    "role": row["role"],
                    "group_id": row["group_id"],
                    "seq": row["seq"],
                    "group_end": row["group_end"],
                    "parent_id": row["parent_id"],
                    "tool_call_ids": row["tool_call_ids"] or [],
                    "tool_call_id": row["tool_call_id"],
                    "tokens": row["tokens"],
                    "has_media": row["has_media"],
                }
                for row in rows
                if row["group_id"] not in incomplete
            ],
        }
    )


async def read_path_ids(
    connection: Connection,
    control: Control | None,
    thread_id: str,
    *,
    owner: str,
    head: str | None = None,
) -> tuple[str, tuple[str, ...]]:
    """The revision and the ids of `build_history_view`'s messages, and nothing else.

    Positions in a history view index these ids; mapping a plan's positions back to ids
    needs neither roles nor counts, so the path walk reads only what it must.
    """
    if control is None:
        return EMPTY_REVISION, ()
    control.ensure_live()
    head = head or control.head(owner)
    if head is None:
        return control.revision, ()
    rows = await connection.fetch(_PATH_IDS, thread_id, head)
    # The same rule as the view: a group with any erased member is left out whole.
    incomplete = {row["group_id"] for row in rows if row["state"] != "live"}
    return control.revision, tuple(
        row["message_id"] for row in rows if row["group_id"] not in incomplete
    )


async def load_stored_messages(
    connection: Connection, control: Control | None, thread_id: str, ids: Sequence[str]
) -> list[Message]:
    """Hydrate messages by id, in the order asked.

    Raises:
        ThreadError: `not_found` for an unknown id, `redacted` for an erased one,
            `deleted` after deletion.
    """
    if control is not None:
        control.ensure_live()
    rows = await connection.fetch(_MESSAGES, thread_id, list(ids)) if ids else []
    by_id = {row["message_id"]: row for row in rows}
    messages: list[Message] = []
    for message_id in ids:
        row = by_id.get(message_id)
        if row is None:
            raise ThreadError(
                "not_found", f"message {message_id} is not stored", thread_id=thread_id
            )
        if row["state"] == "redacted":
            raise ThreadError("redacted", f"message {message_id} is redacted", thread_id=thread_id)
        messages.append(Message(id=message_id, **json.loads(row["body"])))
    return messages
