"""Worker readiness: the worker keeps its readiness file fresh while it polls.

The file format and the check live in `telemetry.readiness`, which imports only the standard
library so that container probes (`crux-health`) stay fast; this module runs the refresh loop
beside a worker and backs the `crux health` command.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from telemetry.logs import get_logger
from telemetry.readiness import (
    DEFAULT_REFRESH_SECONDS,
    Readiness,
    check_readiness,
    remove_readiness,
    write_readiness,
)
from vocabulary.errors import ConfigurationError
from vocabulary.settings import Settings

_log = get_logger(__name__)

__all__ = ["Readiness", "check_readiness", "health_command", "readiness_file"]


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
                    write_readiness(target, document)
                except OSError as error:  # a full or read-only disk must not stop the worker
                    _log.warning("worker.readiness.write_failed", error=type(error).__name__)
                await asyncio.sleep(refresh_seconds)
            elif polled:
                # The worker stopped polling on its own (a fatal poll error): say so at once.
                remove_readiness(target)
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
        remove_readiness(target)


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
    print(f"crux health: {outcome.line()}")
    return 0 if outcome.ready else 1
