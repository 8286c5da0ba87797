"""The control row: state, owners, heads and the version behind the public revision."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from storage.threads._db import Connection, Row
from vocabulary.errors import ThreadError

EMPTY_REVISION = "r0"
"""Revision of a Thread that was never written (no control row)."""

_SELECT = """
SELECT state, version, owners::text AS owners, heads::text AS heads, cleanup_pending,
       root_groups
FROM crux_threads WHERE thread_id = $1
"""
_LOCK = _SELECT + " FOR UPDATE"
_CREATE = "INSERT INTO crux_threads (thread_id) VALUES ($1) ON CONFLICT (thread_id) DO NOTHING"
_BUMP = """
UPDATE crux_threads
SET version = version + 1, heads = $2::text::jsonb, owners = $3::text::jsonb,
    state = $4, cleanup_pending = $5, updated_at = clock_timestamp()
WHERE thread_id = $1
RETURNING version
"""


def revision_of(version: int) -> str:
    """The opaque revision token for a control version."""
    return f"r{version}"


@dataclass(slots=True)
class Control:
    """A decoded control row. Mutate the fields, then `publish` it."""

    thread_id: str
    state: str = "live"
    version: int = 0
    owners: dict[str, str] = field(default_factory=dict[str, str])
    heads: dict[str, str] = field(default_factory=dict[str, str])
    cleanup_pending: bool = False
    root_groups: int = 0

    @property
    def revision(self) -> str:
        """The public revision of this state."""
        return revision_of(self.version)

    def head(self, owner: str) -> str | None:
        """The owner's selected head."""
        return self.heads.get(owner)

    def ensure_live(self) -> None:
        """Raise `deleted` unless the Thread is live."""
        if self.state != "live":
            raise ThreadError("deleted", "thread is deleted", thread_id=self.thread_id)


def decode_control(thread_id: str, row: Row) -> Control:
    """Decode a control row selected with the columns of `load_control`."""
    return Control(
        thread_id=thread_id,
        state=row["state"],
        version=row["version"],
        owners=json.loads(row["owners"]),
        heads=json.loads(row["heads"]),
        cleanup_pending=row["cleanup_pending"],
        root_groups=row["root_groups"],
    )


async def load_control(connection: Connection, thread_id: str) -> Control | None:
    """Read the control row without locking (`None` when the Thread was never written)."""
    row = await connection.fetchrow(_SELECT, thread_id)
    return None if row is None else decode_control(thread_id, row)


async def lock_control(connection: Connection, thread_id: str, *, create: bool) -> Control | None:
    """Lock the control row for this transaction, creating it first when `create` is set.

    The row lock serialises every writer of one Thread; readers are never blocked.
    """
    row = await connection.fetchrow(_LOCK, thread_id)
    if row is None and create:
        await connection.execute(_CREATE, thread_id)
        row = await connection.fetchrow(_LOCK, thread_id)
    return None if row is None else decode_control(thread_id, row)


async def lock_live_control(connection: Connection, thread_id: str) -> Control:
    """Lock an existing live control row.

    Raises:
        ThreadError: `not_found` when the Thread was never written, `deleted` after deletion.
    """
    control = await lock_control(connection, thread_id, create=False)
    if control is None:
        raise ThreadError("not_found", "thread has no history", thread_id=thread_id)
    control.ensure_live()
    return control


async def publish(connection: Connection, control: Control) -> None:
    """Write the control fields back and bump the version (a new revision)."""
    control.version = await connection.fetchval(
        _BUMP,
        control.thread_id,
        json.dumps(control.heads, sort_keys=True),
        json.dumps(control.owners, sort_keys=True),
        control.state,
        control.cleanup_pending,
    )
