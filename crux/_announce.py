"""A worker's registrations, published beside its task queue and compared at start-up.

Temporal hands each run's tasks to any worker polling the task queue. Two workers there with
different registrations (one has the tool, the other not) would fail the runs that land on
the wrong one, at random. So a starting worker publishes its registrations' digests in
PostgreSQL (`crux_workers`) and refuses to start, in one line naming both sides, when a live
worker of the same task queue, namespace and deployment build registers something else. It
refreshes a heartbeat while it runs and deletes its row when it stops; the row of a worker
that died without stopping expires after `STALE_AFTER_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import asyncpg

from crux.registrations import Registrations, describe_difference
from storage import WorkerDirectory, WorkerEntry
from telemetry.logs import get_logger
from vocabulary.errors import ConfigurationError

_log = get_logger(__name__)

HEARTBEAT_SECONDS = 10.0
"""How often a running worker refreshes its row."""

STALE_AFTER_SECONDS = 30.0
"""A row not refreshed for this long belongs to a worker that stopped: three missed beats."""


class RegistrationConflictError(ConfigurationError):
    """A worker with other registrations already serves the task queue; this one refused.

    Attributes:
        task_queue: The task queue both would poll.
        difference: What differs, per kind and name (`tools get_weather (only here)`).
        others: The Temporal identities of the live workers with other registrations.
    """

    def __init__(self, message: str, *, task_queue: str, difference: str, others: list[str]):
        super().__init__(message, code="registration_conflict")
        self.task_queue = task_queue
        self.difference = difference
        self.others = tuple(others)


class WorkerAnnouncement:
    """Publishes one worker's registrations for the lifetime of its poll loop.

    `bind` names the worker (the plugin does it when the Temporal worker is configured);
    `join` checks and publishes (idempotent; the worker calls it before it polls); the
    plugin keeps the heartbeat while the worker runs and `leave`s afterwards.

    Args:
        pool: A pool on the Crux database.
        registrations: What the worker registers.
        heartbeat_seconds: How often the row is refreshed.
        stale_after_seconds: When another worker's row counts as stale.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        registrations: Registrations,
        *,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        stale_after_seconds: float = STALE_AFTER_SECONDS,
    ) -> None:
        self._directory = WorkerDirectory(pool)
        self._registrations = registrations
        self._heartbeat_seconds = heartbeat_seconds
        self._stale_after_seconds = stale_after_seconds
        self._entry: WorkerEntry | None = None
        self._joined = False

    @property
    def worker_id(self) -> str | None:
        """The published row's id, once bound."""
        return self._entry.worker_id if self._entry else None

    @property
    def bound(self) -> bool:
        """Whether `bind` named the worker already."""
        return self._entry is not None

    def bind(self, *, namespace: str, task_queue: str, identity: str, build_id: str) -> None:
        """Name the worker: where it polls, who it is, which build (once: later calls keep it)."""
        if self._entry is not None:
            return
        self._entry = WorkerEntry(
            worker_id=uuid.uuid4().hex,
            namespace=namespace,
            task_queue=task_queue,
            build_id=build_id,
            identity=identity,
            fingerprint=self._registrations.fingerprint,
            registrations=self._registrations.digests(),
        )

    async def join(self) -> None:
        """Publish the registrations, unless the task queue is served with other ones.

        Raises:
            RegistrationConflictError: Naming the task queue, what differs and the other
                workers' identities.
        """
        entry = self._entry
        if entry is None:
            raise ConfigurationError("the worker announcement was not bound to a task queue")
        if self._joined:
            return
        refused = await self._directory.join(
            entry,
            stale_after_seconds=self._stale_after_seconds,
            compatible=lambda other: other.fingerprint == entry.fingerprint,
        )
        if refused:
            raise _conflict(entry, refused, self._stale_after_seconds)
        self._joined = True
        _log.info(
            "worker.registrations.published",
            task_queue=entry.task_queue,
            fingerprint=entry.fingerprint,
            **{kind: len(names) for kind, names in entry.registrations.items()},
        )

    @asynccontextmanager
    async def heartbeating(self) -> AsyncGenerator[None]:
        """Refresh the row while the body runs, and delete it afterwards."""
        task = asyncio.create_task(self._beat())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await self.leave()

    async def leave(self) -> None:
        """Delete the row (a failure is logged: the row then expires on its own)."""
        if self._entry is None or not self._joined:
            return
        self._joined = False
        try:
            await self._directory.leave(self._entry.worker_id)
        except Exception as error:  # storage away at shutdown: the row expires instead
            _log.warning("worker.registrations.leave_failed", error=type(error).__name__)

    async def _beat(self) -> None:
        assert self._entry is not None
        while True:
            await asyncio.sleep(self._heartbeat_seconds)
            try:
                if not await self._directory.heartbeat(self._entry.worker_id):
                    # Expired while storage was away: publish again (a conflict is logged,
                    # since refusing now would stop a worker that is serving runs).
                    self._joined = False
                    await self.join()
            except RegistrationConflictError as error:
                _log.warning("worker.registrations.conflict", difference=error.difference)
            except Exception as error:  # storage away: the next beat tries again
                _log.warning("worker.registrations.heartbeat_failed", error=type(error).__name__)


def _conflict(
    entry: WorkerEntry, others: list[WorkerEntry], stale_after_seconds: float
) -> RegistrationConflictError:
    difference = describe_difference(entry.registrations, others[0].registrations)
    identities = [other.identity for other in others]
    build = f", build {entry.build_id}" if entry.build_id else ""
    message = (
        f"task queue {entry.task_queue} (namespace {entry.namespace}{build}) is served by "
        f"{', '.join(identities)} with other registrations than this worker "
        f"({entry.identity}): {difference or 'they differ'}. Give both workers the same "
        "registrations (on the dev stack: crux dev --app module:attribute serves yours), "
        "run this one on another task queue (CRUX_TASK_QUEUE), or stop the other "
        f"(a worker that died is forgotten {stale_after_seconds:g} s after its last heartbeat)"
    )
    return RegistrationConflictError(
        message, task_queue=entry.task_queue, difference=difference, others=identities
    )
