"""A worker process with one tool that requires approval (for the restart test).

The tool appends one line per run to the file named by `CRUX_TEST_TOOL_LOG`, so the test
can count how often its handler ran across worker processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import crux
from crux._worker import run_worker
from telemetry.logs import configure_logging
from vocabulary.settings import Settings


def transfer_tool() -> crux.Tool:
    """The `transfer` tool: records each run, requires approval."""

    def transfer(arguments: dict[str, Any]) -> str:
        with Path(os.environ["CRUX_TEST_TOOL_LOG"]).open("a", encoding="utf-8") as log:
            log.write("ran\n")
        return "sent"

    return crux.tool("transfer", transfer, requires_approval=True)


async def _main() -> None:
    settings = Settings.from_env(os.environ)
    configure_logging(log_format=settings.log_format, level=settings.log_level)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await run_worker(settings, stop=stop, tools=[transfer_tool()])


if __name__ == "__main__":
    asyncio.run(_main())
    os._exit(0)
