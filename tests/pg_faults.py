"""PostgreSQL faults for the storage-fault suite: a crashed server, killed sessions, gates.

Everything is real: the crash SIGKILLs the postmaster and every backend of the test's own
embedded server (the next start runs crash recovery), the connection fault is
`pg_terminate_backend`, and the gates are ordinary locks held by an admin connection, so a
generation sits in a chosen stage, with a statement outstanding, at the moment of a fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import asyncpg
import psutil

from crux.stack import EmbeddedPostgres, start_postgres_sync
from providers.loopback import LoopbackOpenAIServer, RecordedRequest
from storage.migrate import migrate
from tests.chaos import resume_postgres

SUPPORT_MARKER = "compact summaries"
"""Text of the summary support calls' instructions: how a support call is told apart."""


def crash_postgres(server: EmbeddedPostgres) -> int:
    """Kill the server the way a machine or OOM-killer would: SIGKILL, no shutdown at all.

    The postmaster and all its children (backends, checkpointer, WAL writer) are killed,
    so no session can finish what it was doing and the next start runs crash recovery.

    Returns:
        How many processes were killed.
    """
    pid_file = Path(server.data_dir) / "postmaster.pid"
    postmaster = psutil.Process(int(pid_file.read_text().split()[0]))
    victims = [postmaster, *postmaster.children(recursive=True)]
    for process in victims:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            continue
    psutil.wait_procs(victims, timeout=10)
    return len(victims)


def crash_recoveries(server: EmbeddedPostgres) -> int:
    """How often the server's log says it started after a crash (recovery was needed)."""
    log = Path(server.data_dir) / "log"
    if not log.exists():
        return 0
    return log.read_text(errors="replace").count("automatic recovery in progress")


def restart_postgres(server: EmbeddedPostgres) -> None:
    """Start the crashed server again on the same data directory (crash recovery runs)."""
    resume_postgres(server)


async def terminate_sessions(
    admin: asyncpg.Connection, database: str, *, keep: Sequence[int] = ()
) -> int:
    """`pg_terminate_backend` every client session of `database` but the admin ones.

    Args:
        admin: Any connection to the server (its own session is always spared).
        database: The database whose sessions are cut.
        keep: Further backend pids to spare (other admin connections holding gates).

    Returns:
        How many sessions were terminated.
    """
    killed = await admin.fetchval(
        """
        SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
        FROM pg_stat_activity
        WHERE datname = $1 AND backend_type = 'client backend'
          AND pid <> pg_backend_pid() AND pid <> ALL($2::int[])
        """,
        database,
        list(keep),
    )
    return int(killed or 0)


async def lock_waiters(
    admin: asyncpg.Connection, database: str, query_like: str = "%", *, keep: Sequence[int] = ()
) -> int:
    """How many sessions of `database` wait for a lock in a statement matching `query_like`."""
    waiting = await admin.fetchval(
        """
        SELECT count(*) FROM pg_stat_activity
        WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE $2
          AND pid <> pg_backend_pid() AND pid <> ALL($3::int[])
        """,
        database,
        query_like,
        list(keep),
    )
    return int(waiting or 0)


@contextlib.contextmanager
def own_postgres(
    prefix: str, *, recover: Callable[[EmbeddedPostgres], object]
) -> Iterator[EmbeddedPostgres]:
    """Run a PostgreSQL server of the caller alone; `recover` brings it back before stopping.

    Args:
        prefix: Prefix of the temporary data directory.
        recover: Undoes what a failed run may have left (stopped or crashed server).
    """
    data_dir = Path(tempfile.mkdtemp(prefix=prefix))
    server = start_postgres_sync(data_dir / "pgdata")
    try:
        yield server
    finally:
        try:
            recover(server)
        finally:
            server.stop()
            shutil.rmtree(data_dir, ignore_errors=True)


async def new_database(server: EmbeddedPostgres) -> tuple[str, str]:
    """Create and migrate a database of its own on `server`; return its name and URL."""
    name = f"crux_faults_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(server.url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    url = server.database_url(name)
    connection = await asyncpg.connect(url)
    try:
        await migrate(connection)
    finally:
        await connection.close()
    return name, url


class Gate:
    """An admin transaction holding a lock (or an uncommitted row) until `release`.

    Args:
        url: The database to connect to.
    """

    def __init__(self, url: str) -> None:
        self._url = url
        self._connection: asyncpg.Connection | None = None
        self.pid = 0

    async def hold(self, *statements: tuple[str, Sequence[object]]) -> Gate:
        """Open a transaction and run `statements` in it; the locks they take stay held."""
        self._connection = await asyncpg.connect(self._url)
        self.pid = int(await self._connection.fetchval("SELECT pg_backend_pid()"))
        await self._connection.execute("BEGIN")
        for sql, args in statements:
            await self._connection.execute(sql, *args)
        return self

    async def release(self) -> None:
        """Roll the transaction back (nothing it wrote is kept) and close the connection.

        Harmless when the server crashed meanwhile (the transaction is gone already).
        """
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            await asyncio.wait_for(connection.execute("ROLLBACK"), 5)
            await asyncio.wait_for(connection.close(), 5)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            connection.terminate()


class HeldOpenAIServer(LoopbackOpenAIServer):
    """An OpenAI-format loopback server that can hold chosen requests outstanding.

    Each request is labelled: `support` for a summary support call, else the first
    `[label]` marker found in its last message, else `other`. A label whose gate is
    closed keeps its requests unanswered until `open_gate`.
    """

    def __init__(self, labels: Sequence[str]) -> None:
        super().__init__()
        self.labels = tuple(labels)
        self.calls: Counter[str] = Counter()
        self.arrived: dict[str, asyncio.Event] = {}
        self._gates: dict[str, asyncio.Event] = {}
        self.first_arrival: dict[str, float] = {}

    def label_of(self, request: RecordedRequest) -> str:
        """The label of a request (see the class docstring)."""
        body = request.body if isinstance(request.body, dict) else {}
        messages = body.get("messages") or []
        if SUPPORT_MARKER in json.dumps(messages):
            return "support"
        last = json.dumps(messages[-1] if messages else "")
        for label in self.labels:
            if f"[{label}]" in last:
                return label
        return "other"

    def close_gate(self, label: str) -> None:
        """Hold every later request labelled `label` until `open_gate(label)`."""
        self._gates[label] = asyncio.Event()

    def open_gate(self, label: str) -> None:
        """Answer the held requests of `label`, and later ones at once."""
        gate = self._gates.get(label)
        if gate is not None:
            gate.set()

    def arrival(self, label: str) -> asyncio.Event:
        """Set once a request labelled `label` arrived."""
        return self.arrived.setdefault(label, asyncio.Event())

    async def before_reply(self, request: RecordedRequest) -> None:
        """Count the request, signal its arrival, and hold it while its gate is closed."""
        label = self.label_of(request)
        self.calls[label] += 1
        self.first_arrival.setdefault(label, time.monotonic())
        self.arrival(label).set()
        gate = self._gates.get(label)
        if gate is not None:
            await gate.wait()
