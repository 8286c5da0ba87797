"""The live workers of each task queue and their registrations (`crux_workers`).

A starting worker joins its task queue here in one transaction, under an advisory lock per
task queue, so two workers starting at once are compared with each other too: stale rows
(workers that stopped heartbeating) are deleted, the live rows of the same deployment build
are read, and the worker is inserted only when the caller accepts all of them. Times are the
server's (`now()`), so workers on hosts with skewed clocks agree on what is stale.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended('crux_workers/' || $1 || '/' || $2, 0))"

_EXPIRE = """
DELETE FROM crux_workers
WHERE namespace = $1 AND task_queue = $2
  AND heartbeat_at < now() - make_interval(secs => $3)
"""

_LIVE = """
SELECT worker_id, identity, build_id, fingerprint, registrations, started_at
FROM crux_workers
WHERE namespace = $1 AND task_queue = $2 AND build_id = $3 AND worker_id <> $4
ORDER BY started_at
"""

_JOIN = """
INSERT INTO crux_workers
    (worker_id, namespace, task_queue, build_id, identity, fingerprint, registrations)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (worker_id) DO UPDATE SET heartbeat_at = now()
"""

_HEARTBEAT = "UPDATE crux_workers SET heartbeat_at = now() WHERE worker_id = $1"

_LEAVE = "DELETE FROM crux_workers WHERE worker_id = $1"


@dataclass(frozen=True)
class WorkerEntry:
    """One worker's row.

    Attributes:
        worker_id: Unique per worker start.
        namespace: Its Temporal namespace.
        task_queue: The task queue it polls.
        build_id: Its deployment build (`""` for an unversioned worker).
        identity: Its Temporal worker identity (`pid@host` by default).
        fingerprint: The digest of its registrations.
        registrations: Per kind, each registered name with its digest.
        started_at: When it joined (set by the server; `None` before it did).
    """

    worker_id: str
    namespace: str
    task_queue: str
    build_id: str
    identity: str
    fingerprint: str
    registrations: Mapping[str, Mapping[str, str]]
    started_at: datetime | None = None


class WorkerDirectory:
    """Joins, heartbeats and leaves of workers, on the Crux database.

    Args:
        pool: A pool from `storage.create_pool` (jsonb decodes to Python values).
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def join(
        self,
        entry: WorkerEntry,
        *,
        stale_after_seconds: float,
        compatible: Callable[[WorkerEntry], bool],
    ) -> list[WorkerEntry]:
        """Insert `entry` unless a live worker of its task queue and build is not compatible.

        Args:
            entry: The joining worker.
            stale_after_seconds: Rows whose last heartbeat is older are deleted first.
            compatible: Whether a live worker may serve the task queue beside this one.

        Returns:
            The incompatible live workers (the entry was not inserted), or `[]` (it was).
        """
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(_LOCK, entry.namespace, entry.task_queue)
            await connection.execute(
                _EXPIRE, entry.namespace, entry.task_queue, float(stale_after_seconds)
            )
            rows = await connection.fetch(
                _LIVE, entry.namespace, entry.task_queue, entry.build_id, entry.worker_id
            )
            live = [_entry(row, entry) for row in rows]
            refused = [other for other in live if not compatible(other)]
            if refused:
                return refused
            await connection.execute(
                _JOIN,
                entry.worker_id,
                entry.namespace,
                entry.task_queue,
                entry.build_id,
                entry.identity,
                entry.fingerprint,
                {kind: dict(names) for kind, names in entry.registrations.items()},
            )
        return []

    async def heartbeat(self, worker_id: str) -> bool:
        """Refresh a worker's heartbeat; `False` when its row is gone (it expired)."""
        status = await self._pool.execute(_HEARTBEAT, worker_id)
        return str(status).split()[-1] != "0"

    async def leave(self, worker_id: str) -> None:
        """Delete a worker's row (it stopped)."""
        await self._pool.execute(_LEAVE, worker_id)


def _entry(row: Any, joining: WorkerEntry) -> WorkerEntry:
    registrations: dict[str, dict[str, str]] = dict(row["registrations"] or {})
    return WorkerEntry(
        worker_id=str(row["worker_id"]),
        namespace=joining.namespace,
        task_queue=joining.task_queue,
        build_id=str(row["build_id"]),
        identity=str(row["identity"]),
        fingerprint=str(row["fingerprint"]),
        registrations=registrations,
        started_at=row["started_at"],
    )
