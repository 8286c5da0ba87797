"""Run a Crux worker: `python worker.py` (reads TEMPORAL_ADDRESS, CRUX_DATABASE_URL, ...)."""

from __future__ import annotations

import asyncio
import os
import signal

from crux._worker import run_worker
from crux.config import Settings
from crux.logs import configure_logging


async def _main() -> None:
    settings = Settings.from_env(os.environ)
    configure_logging(log_format=settings.log_format, level=settings.log_level)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await run_worker(settings, stop=stop)


if __name__ == "__main__":
    asyncio.run(_main())
