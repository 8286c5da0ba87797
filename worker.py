"""Run a Crux worker: `python worker.py` (reads TEMPORAL_ADDRESS, CRUX_DATABASE_URL, ...)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys

from crux._worker import run_worker
from telemetry.logs import configure_logging
from vocabulary.errors import CruxError
from vocabulary.settings import Settings


async def _main() -> None:
    settings = Settings.from_env(os.environ)
    configure_logging(log_format=settings.log_format, level=settings.log_level)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await run_worker(settings, stop=stop)


def main() -> int:
    """Run the worker; a failed start-up check ends it with one line and exit code 1."""
    try:
        asyncio.run(_main())
    except CruxError as error:
        print(f"crux worker: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter finalisation: the Temporal runtime's threads can abort a process
    # that exits right after a failed start (see crux.cli).
    os._exit(code)
