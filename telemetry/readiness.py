"""The worker's readiness file: how it is written, and the check that reads it.

A worker writes the file once its start-up checks passed and it polls its task queue,
rewrites it every `refresh_seconds` while it runs, and removes it when it stops; a worker that
hangs or dies without cleaning up leaves a file that goes stale. Container health checks run
`crux-health` (this module's `main`), which imports nothing but the standard library, so a
probe stays fast on a busy host; `crux health` runs the same check.

The file holds only ids and figures (process id, task queue, namespace, refresh interval).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

HEALTH_FILE_VARIABLE = "CRUX_HEALTH_FILE"
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

    def line(self) -> str:
        """One line for an operator: the reason, the task queue and the refresh age."""
        queue = "" if self.task_queue is None else f", task queue {self.task_queue}"
        age = "" if self.age_seconds is None else f", refreshed {self.age_seconds:.1f}s ago"
        return f"{self.reason}{queue}{age}"


def write_readiness(path: Path, document: dict[str, object]) -> None:
    """Write (or refresh) the readiness file atomically.

    Args:
        path: The file to write; its directory is created when missing.
        document: Ids and figures only.
    """
    # Write beside the target and rename, so a check never reads a half-written file.
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    scratch.write_text(json.dumps(document), encoding="utf-8")
    os.replace(scratch, path)


def remove_readiness(path: Path) -> None:
    """Remove the readiness file, if it exists."""
    path.unlink(missing_ok=True)


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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `crux-health`: exit 0 while the worker on this host is ready, else 1."""
    parser = argparse.ArgumentParser(
        prog="crux-health",
        description="Exit 0 while a Crux worker on this host polls its task queue, else 1.",
        epilog=f"environment: {HEALTH_FILE_VARIABLE} names the worker's readiness file",
    )
    parser.add_argument("--file", default=None, help=f"readiness file ({HEALTH_FILE_VARIABLE})")
    parser.add_argument(
        "--max-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="oldest refresh still healthy (three refresh intervals by default)",
    )
    arguments = parser.parse_args(argv)
    path = arguments.file or os.environ.get(HEALTH_FILE_VARIABLE, "").strip()
    if not path:
        print(f"crux-health: {HEALTH_FILE_VARIABLE} is not set (or pass --file)", file=sys.stderr)
        return 1
    outcome = check_readiness(path, max_age_seconds=arguments.max_age)
    print(f"crux health: {outcome.line()}")
    return 0 if outcome.ready else 1


if __name__ == "__main__":
    sys.exit(main())
