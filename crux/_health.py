"""Worker readiness: a file the worker refreshes while it polls, and the check that reads it.

A container orchestrator (Docker's HEALTHCHECK, a Kubernetes exec probe) runs `crux health`,
which passes only while a worker on the same host keeps its readiness file fresh. The file
appears once the start-up checks passed and the worker polls its task queue, is rewritten every
`refresh_seconds` while the worker runs, and is removed when the worker stops. A worker that
hangs or dies without cleaning up leaves a file that goes stale, which the check reports.

The file holds only ids and figures (process id, task queue, namespace, refresh interval).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from telemetry.logs import get_logger
from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings

_log = get_logger(__name__)

DEFAULT_REFRESH_SECONDS = 10.0
# A check tolerates two missed refreshes before it calls the worker unhealthy.
STALE_AFTER_REFRESHES = 3


@dataclass(frozen=True)
class Readiness:
    """The outcome of a readiness check.

    Attributes:
        ready: Whether a running worker refreshed the file recently enough.
        reason: A content-free explanation (`ready`, `missing`, `stale`, `unreadable`).
        age_seconds: Seconds since the last refresh, when the file exists.
        task_queue: The task queue the worker polls, when the file says.
    """

    ready: bool
    reason: str
    age_seconds: float | None = None
    task_queue: str | None = None


def _write(path: Path, document: dict[str, object]) -> None:
    # Write beside the target and rename, so a check never reads a half-written file.
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps(document), encoding="utf-8")
    os.replace(scratch, path)


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)


@asynccontextmanager
async def readiness_file(
    path: str | os.PathLike[str] | None,
    is_running: Callable[[], bool],
    *,
    task_queue: str,
    namespace: str,
    refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
) -> AsyncGenerator[None]:
    """Keep a readiness file fresh while the body runs and the worker is running.

    Args:
        path: Where to write the file; `None` turns the signal off.
        is_running: Reports whether the worker still polls (`Worker.is_running`).
        task_queue: The worker's task queue, recorded in the file.
        namespace: The worker's Temporal namespace, recorded in the file.
        refresh_seconds: How often the file is rewritten.
    """
    if path is None:
        yield
        return
    target = Path(path)
    document: dict[str, object] = {
        "pid": os.getpid(),
        "task_queue": task_queue,
        "namespace": namespace,
        "refresh_seconds": refresh_seconds,
    }

    async def refresh() -> None:
        polled = False
        while True:
            if is_running():
                polled = True
                try:
                    _write(target, document)
                except OSError as error:  # a full or read-only disk must not stop the worker
                    _log.warning("worker.readiness.write_failed", error=type(error).__name__)
                await asyncio.sleep(refresh_seconds)
            elif polled:
                # The worker stopped polling on its own (a fatal poll error): say so at once.
                _remove(target)
                return
            else:
                # The worker's poll loop starts in a task of its own: wait until it runs.
                await asyncio.sleep(min(refresh_seconds, 0.05))

    task = asyncio.create_task(refresh())
    _log.info("worker.readiness.enabled", refresh_seconds=refresh_seconds)
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        _remove(target)


def check_readiness(
    path: str | os.PathLike[str],
    *,
    max_age_seconds: float | None = None,
    now: Callable[[], float] | None = None,
) -> Readiness:
    """Read a readiness file and decide whether its worker is ready.

    Args:
        path: The file the worker writes (`CRUX_HEALTH_FILE`).
        max_age_seconds: The oldest refresh still accepted; three refresh intervals (as
            recorded in the file) by default.
        now: The wall clock to compare the file's modification time with.

    Returns:
        The outcome; `ready` is false when the file is missing, unreadable or stale.
    """
    # File modification times are wall-clock times, so the comparison needs the wall clock.
    clock = now or time.time  # noqa: TID251
    target = Path(path)
    try:
        modified = target.stat().st_mtime
        document = json.loads(target.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Readiness(ready=False, reason="missing")
    except (OSError, ValueError):
        return Readiness(ready=False, reason="unreadable")
    if not isinstance(document, dict):
        return Readiness(ready=False, reason="unreadable")
    fields = cast("dict[str, object]", document)
    refresh = fields.get("refresh_seconds")
    queue = fields.get("task_queue")
    if max_age_seconds is None:
        interval = float(refresh) if isinstance(refresh, int | float) else DEFAULT_REFRESH_SECONDS
        max_age_seconds = STALE_AFTER_REFRESHES * interval
    age = max(0.0, clock() - modified)
    task_queue = queue if isinstance(queue, str) else None
    if age > max_age_seconds:
        return Readiness(ready=False, reason="stale", age_seconds=age, task_queue=task_queue)
    return Readiness(ready=True, reason="ready", age_seconds=age, task_queue=task_queue)


def health_command(settings: Settings, *, file: str | None, max_age_seconds: float | None) -> int:
    """Run `crux health`: print one line and return 0 when the worker is ready, else 1.

    Args:
        settings: Settings from the environment (`CRUX_HEALTH_FILE`).
        file: A readiness file that overrides the setting.
        max_age_seconds: The oldest refresh still accepted.

    Raises:
        ConfigurationError: Neither `--file` nor `CRUX_HEALTH_FILE` names a file.
    """
    path = file or settings.health_file
    if not path:
        raise ConfigurationError("CRUX_HEALTH_FILE is not set (or pass --file)")
    outcome = check_readiness(path, max_age_seconds=max_age_seconds)
    age = "" if outcome.age_seconds is None else f", refreshed {outcome.age_seconds:.1f}s ago"
    queue = "" if outcome.task_queue is None else f", task queue {outcome.task_queue}"
    print(f"crux health: {outcome.reason}{queue}{age}")
    return 0 if outcome.ready else 1
