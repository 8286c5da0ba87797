"""The `crux` command: `dev`, `demo`, `worker`, `thread show`, `generation`, `db`."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from crux._approval_cli import APPROVAL_COMMANDS, add_approval_commands, run_approval_command
from telemetry.logs import configure_logging
from vocabulary.errors import CruxError
from vocabulary.settings import Settings

DEFAULT_STACK_DIR = ".stack"


def _version() -> str:
    """The installed distribution's version (the source tree's when not installed)."""
    try:
        return metadata.version("crux-temporal")
    except metadata.PackageNotFoundError:
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crux", description=__doc__)
    parser.add_argument("--version", action="version", version=f"crux {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)

    dev = commands.add_parser("dev", help="run the embedded stack and a worker in the foreground")
    dev.add_argument("--stack-dir", default=DEFAULT_STACK_DIR, type=Path)

    demo = commands.add_parser("demo", help="run a multi-turn managed conversation offline")
    demo.add_argument("--stack-dir", default=DEFAULT_STACK_DIR, type=Path)
    demo.add_argument("--turns", type=int, default=4)
    demo.add_argument("--keep", action="store_true", help="keep the stack running afterwards")

    commands.add_parser("worker", help="run a worker against TEMPORAL_ADDRESS/CRUX_DATABASE_URL")

    health = commands.add_parser(
        "health", help="exit 0 while a worker on this host polls (reads CRUX_HEALTH_FILE)"
    )
    health.add_argument("--file", default=None, help="readiness file (CRUX_HEALTH_FILE by default)")
    health.add_argument(
        "--max-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="oldest refresh still healthy (three refresh intervals by default)",
    )

    thread = commands.add_parser("thread", help="inspect Threads")
    thread_commands = thread.add_subparsers(dest="thread_command", required=True)
    show = thread_commands.add_parser("show", help="print a Thread's selected path")
    show.add_argument("thread_id")
    show.add_argument("--stack-dir", default=DEFAULT_STACK_DIR, type=Path)

    generation = commands.add_parser(
        "generation", help="show, retry or abandon a generation run (TEMPORAL_ADDRESS)"
    )
    generation_commands = generation.add_subparsers(dest="generation_command", required=True)
    for action, text in (
        ("show", "print a run's content-free status"),
        ("retry", "make a run waiting for storage or its commit try again now"),
        ("abandon", "give up a run waiting for storage or its commit; nothing is committed"),
    ):
        sub = generation_commands.add_parser(action, help=text)
        sub.add_argument("run", help="a workflow id (crux/gen/...) or a generation id")
        sub.add_argument("--thread", default=None, help="the Thread of a generation id")
        sub.add_argument("--json", action="store_true", help="print JSON")
    add_approval_commands(generation_commands)

    database = commands.add_parser("db", help="database maintenance")
    database_commands = database.add_subparsers(dest="db_command", required=True)
    database_commands.add_parser("migrate", help="apply pending SQL migrations")
    sweep = database_commands.add_parser(
        "sweep", help="delete staged text of generations that never finished"
    )
    sweep.add_argument(
        "--older-than",
        type=float,
        default=None,
        metavar="SECONDS",
        help="minimum age of staged rows to delete (CRUX_STAGING_RETENTION_SECONDS by default)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `crux` console script."""
    arguments = _parser().parse_args(argv)
    settings = Settings.from_env(os.environ)
    level = settings.log_level
    if (
        arguments.command in ("demo", "thread", "db", "generation")
        and "CRUX_LOG_LEVEL" not in os.environ
    ):
        # These commands print their own output; keep routine log lines out of it.
        level = "warning"
    configure_logging(log_format=settings.log_format, level=level)
    try:
        code = asyncio.run(_dispatch(arguments, settings))
    except KeyboardInterrupt:
        code = 130
    except CruxError as error:
        print(f"crux: {type(error).__name__}: {error}", file=sys.stderr)
        code = 1
    except (OSError, RuntimeError) as error:
        # Unreachable services (Temporal, PostgreSQL) are operational, not programming,
        # errors: one clear line instead of a traceback.
        print(f"crux: cannot reach a service: {type(error).__name__}: {error}", file=sys.stderr)
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without interpreter finalisation: the Temporal runtime's threads can abort a
    # short-lived process during shutdown (exit code 134).
    os._exit(code)


async def _dispatch(arguments: argparse.Namespace, settings: Settings) -> int:
    from crux import _commands

    if arguments.command == "dev":
        return await _commands.dev(settings, stack_dir=arguments.stack_dir, stop=_stop_event())
    if arguments.command == "demo":
        return await _commands.demo(
            settings,
            stack_dir=arguments.stack_dir,
            turns=arguments.turns,
            keep=arguments.keep,
            stop=_stop_event(),
        )
    if arguments.command == "worker":
        from crux._worker import run_worker

        await run_worker(settings, stop=_stop_event())
        return 0
    if arguments.command == "health":
        from crux._health import health_command

        return health_command(settings, file=arguments.file, max_age_seconds=arguments.max_age)
    if arguments.command == "thread":
        return await _commands.thread_show(settings, arguments.thread_id, arguments.stack_dir)
    if arguments.command == "generation" and arguments.generation_command in APPROVAL_COMMANDS:
        return await run_approval_command(arguments, settings)
    if arguments.command == "generation":
        from crux._generation_commands import generation_command

        return await generation_command(
            settings,
            arguments.generation_command,
            arguments.run,
            thread=arguments.thread,
            as_json=arguments.json,
        )
    if arguments.command == "db" and arguments.db_command == "sweep":
        return await _commands.db_sweep(settings, older_than=arguments.older_than)
    if arguments.command == "db":
        return await _commands.db_migrate(settings)
    return 2


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    return stop
