"""The `crux` command and its subcommands.

`dev`, `demo`, `worker`, `health`, `thread`, `generation`, `serve`, `cache`, `db`.

Conventions, the same for every command: the object a command acts on is positional (a
Thread id, a run); `--thread THREAD` names the Thread of a generation id; `--stack-dir DIR`
names the embedded stack's directory; `--json` prints JSON; `--app module:attribute` names
the worker to serve. Every command exits with a documented code (`crux._exit.ExitCode`) and,
on failure, prints one line saying what fixes it: never a traceback (`crux --debug` adds one).
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

from crux._cache_commands import add_cache_commands
from crux._exit import EXIT_CODES_HELP, MISSING_EMBEDDED, ExitCode, classify, traceback_text
from crux._generation_commands import QUERY_TIMEOUT, UPDATE_TIMEOUT
from crux.serve import add_serve_command, run_serve
from telemetry.logs import configure_logging
from vocabulary.settings import Settings

__all__ = ["ENVIRONMENT", "MISSING_EMBEDDED", "dispatch", "main"]

DEFAULT_STACK_DIR = ".stack"


def _version() -> str:
    """The installed distribution's version (the source tree's when not installed)."""
    try:
        return metadata.version("crux-temporal")
    except metadata.PackageNotFoundError:
        return "unknown"


ENVIRONMENT = {
    "TEMPORAL_ADDRESS": "Temporal frontend host:port (default localhost:7233)",
    "TEMPORAL_NAMESPACE": "Temporal namespace (default: default)",
    "TEMPORAL_PROFILE": "profile of the Temporal configuration file (default: default)",
    "TEMPORAL_CONFIG_FILE": "Temporal TOML configuration file (default: temporalio/temporal.toml)",
    "TEMPORAL_API_KEY": "API key for Temporal (Temporal Cloud); turns TLS on",
    "TEMPORAL_TLS": "true or false: TLS to Temporal (default: on with an API key or TLS file)",
    "TEMPORAL_TLS_SERVER_NAME": "name the Temporal server's certificate is issued for",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH": "authority of the Temporal server's certificate (PEM)",
    "TEMPORAL_TLS_SERVER_CA_CERT_DATA": "the same certificate inline",
    "TEMPORAL_TLS_CLIENT_CERT_PATH": "client certificate for mTLS to Temporal (PEM)",
    "TEMPORAL_TLS_CLIENT_CERT_DATA": "the client certificate inline",
    "TEMPORAL_TLS_CLIENT_KEY_PATH": "the client certificate's private key (PEM)",
    "TEMPORAL_TLS_CLIENT_KEY_DATA": "the private key inline",
    "CRUX_TASK_QUEUE": "the workers' task queue (default: crux)",
    "CRUX_DATABASE_URL": "PostgreSQL URL of the Crux database (TLS: ?sslmode=verify-full&...)",
    "PGSSLMODE": "PostgreSQL TLS: disable, allow, prefer, require, verify-ca or verify-full",
    "PGSSLROOTCERT": "authority of the PostgreSQL server's certificate (PEM)",
    "PGSSLCERT": "client certificate for PostgreSQL (PEM)",
    "PGSSLKEY": "the PostgreSQL client certificate's private key (PEM)",
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
    "CRUX_SHUTDOWN_GRACE_SECONDS": (
        "how long a stopping worker lets running calls finish, 0 cancels at once (default: 25)"
    ),
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
_TEMPORAL = ("TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE", "TEMPORAL_PROFILE", "TEMPORAL_CONFIG_FILE",
             "TEMPORAL_API_KEY", "TEMPORAL_TLS", "TEMPORAL_TLS_SERVER_NAME",
             "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_SERVER_CA_CERT_DATA",
             "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_CLIENT_CERT_DATA",
             "TEMPORAL_TLS_CLIENT_KEY_PATH", "TEMPORAL_TLS_CLIENT_KEY_DATA")  # fmt: skip
_DATABASE = ("CRUX_DATABASE_URL", "PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY")
_STACK_ENV = ("CRUX_TASK_QUEUE", *_PROVIDERS, *_LOGS, "TEMPORAL_CLI_PATH")
_WORKER_ENV = (*_TEMPORAL, "CRUX_TASK_QUEUE", *_DATABASE, "CRUX_MIGRATE", *_PROVIDERS,
               *_LOGS, "CRUX_REGISTER_SEARCH_ATTRIBUTES", "CRUX_STAGING_RETENTION_SECONDS",
               "CRUX_SWEEP_INTERVAL_SECONDS", "CRUX_SHUTDOWN_GRACE_SECONDS", "CRUX_HEALTH_FILE",
               "OTEL_EXPORTER_OTLP_ENDPOINT",
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
    commands: Any,
    name: str,
    text: str,
    env: Sequence[str] = (),
    description: str | None = None,
    answers: str | None = None,
) -> argparse.ArgumentParser:
    body = description or text[:1].upper() + text[1:] + "."
    if answers:
        body += f" {answers}"
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=text,
        description=textwrap.fill(body, 78),
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


_TEMPORAL_TIME = (
    f"Answers within {15 + QUERY_TIMEOUT.total_seconds():g} s: connecting to Temporal takes at "
    f"most 15 s, a worker gets {QUERY_TIMEOUT.total_seconds():g} s to answer"
)
_DECISION_TIME = (
    f"Answers within {15 + UPDATE_TIMEOUT.total_seconds():g} s: connecting to Temporal takes "
    f"at most 15 s, a worker gets {UPDATE_TIMEOUT.total_seconds():g} s to accept the decision "
    "(exit code 5 when none does)"
)
_DATABASE_TIME = "Answers within 15 s (10 s to connect to PostgreSQL)"
_STACK_TIME = (
    "Starts within 2 minutes (PostgreSQL, then Temporal, then the worker) and stops within "
    "1 minute of Ctrl-C or SIGTERM, leaving no process behind"
)


def _app_argument(parser: argparse.ArgumentParser, serves: str) -> None:
    parser.add_argument(
        "--app",
        default=None,
        metavar="MODULE:ATTRIBUTE",
        help=f"the worker to {serves}: a crux.Worker, a crux.Registrations or a function "
        "returning one, imported from MODULE with the current directory on the path "
        "(default: a worker without registrations)",
    )


def _run_arguments(parser: argparse.ArgumentParser, *, json_help: str = "print JSON") -> None:
    parser.add_argument(
        "run", metavar="RUN", help="a generation id (with --thread) or a workflow id (crux/gen/...)"
    )
    parser.add_argument(
        "--thread", default=None, metavar="THREAD", help="the Thread of a generation id"
    )
    parser.add_argument("--json", action="store_true", help=json_help)


def _turns(text: str) -> int:
    from crux._demo import MAX_TURNS

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number from 1 to {MAX_TURNS}") from None
    if not 1 <= value <= MAX_TURNS:
        raise argparse.ArgumentTypeError(f"a number from 1 to {MAX_TURNS}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="crux",
        description="Crux for Python: managed conversation Threads on Temporal and PostgreSQL.",
        epilog=_epilog(list(ENVIRONMENT)) + "\n\n" + EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"crux {_version()}", help="print the version"
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="print a traceback with an unexpected error (also: CRUX_LOG_LEVEL=debug)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dev = _command(
        commands,
        "dev",
        "run the embedded stack and a worker in the foreground",
        _STACK_ENV,
        "Run embedded PostgreSQL, a Temporal dev server (127.0.0.1:7233, UI on 8233, when free)"
        " and a worker until Ctrl-C. State and server logs stay in the stack directory. The"
        " worker serves the registrations of --app.",
        _STACK_TIME,
    )
    _app_argument(dev, "serve on the stack")
    dev.add_argument("--stack-dir", default=DEFAULT_STACK_DIR, type=Path, help=_STACK_DIR_HELP)
    _port_arguments(dev)

    demo = _command(
        commands,
        "demo",
        "run a multi-turn managed conversation offline (or against CRUX_MODEL)",
        _STACK_ENV,
        "Run a managed conversation on the embedded stack and print each turn's receipts,"
        " explained: the turns, a tool round with the tool's result, one turn under a budget"
        " that forces an adaptation, and a replay. Uses the offline model unless CRUX_MODEL"
        " names another.",
        _STACK_TIME,
    )
    demo.add_argument("--stack-dir", default=None, type=Path, help=_STACK_DIR_HELP.replace(
        "%(default)s", DEFAULT_STACK_DIR))  # fmt: skip
    _port_arguments(demo)
    demo.add_argument(
        "--turns", type=_turns, default=4, help="how many questions to ask, 1-50 (default: 4)"
    )
    demo.add_argument(
        "--keep", action="store_true", help="keep the stack running afterwards (for the UI)"
    )

    worker = _command(
        commands,
        "worker",
        "run a worker against TEMPORAL_ADDRESS and CRUX_DATABASE_URL",
        _WORKER_ENV,
        "Run a worker until Ctrl-C or SIGTERM. It serves the registrations of --app and"
        " refuses to start beside a worker of the same task queue that registers others.",
        "Fails within 30 s when a service does not answer.",
    )
    _app_argument(worker, "run")

    health = _command(
        commands,
        "health",
        "exit 0 while a worker on this host polls (reads CRUX_HEALTH_FILE)",
        ("CRUX_HEALTH_FILE",),
        answers="Answers at once (reads a file).",
    )
    health.add_argument("--file", default=None, help="readiness file (CRUX_HEALTH_FILE by default)")
    health.add_argument(
        "--max-age",
        type=float,
        default=None,
        metavar="SECONDS",
        help="oldest refresh still healthy (three refresh intervals by default)",
    )

    thread = _command(commands, "thread", "inspect Threads", _DATABASE)
    thread_commands = thread.add_subparsers(dest="thread_command", required=True, metavar="ACTION")
    show = _command(
        thread_commands,
        "show",
        "print a Thread's selected path with its branch points",
        _DATABASE,
        "Print a Thread's selected path with its branch points (its messages: this prints your"
        " conversation's text), from CRUX_DATABASE_URL or, when it is unset, the database of"
        " the embedded stack in --stack-dir. An unknown Thread exits with code 3.",
        _DATABASE_TIME + ", or 30 s when it starts the stopped stack's PostgreSQL.",
    )
    show.add_argument("thread_id", metavar="THREAD", help="the Thread's id")
    show.add_argument("--stack-dir", default=DEFAULT_STACK_DIR, type=Path, help=_STACK_DIR_HELP)
    show.add_argument(
        "--json",
        action="store_true",
        help="print JSON: thread_id, revision, head and the messages (id, parent_id, status, "
        "role, content, variant)",
    )

    generation = _command(
        commands,
        "generation",
        "show, retry, abandon or approve a generation run (TEMPORAL_ADDRESS)",
        _TEMPORAL,
    )
    generation_commands = generation.add_subparsers(
        dest="generation_command", required=True, metavar="ACTION"
    )
    for action, text, answers in (
        (
            "show",
            "print a run's content-free status (the running run, else the one that committed)",
            _TEMPORAL_TIME + "; without a worker, the status Temporal keeps is shown.",
        ),
        ("retry", "make a run waiting for storage or its commit try again now", _DECISION_TIME),
        (
            "abandon",
            "give up a run waiting for storage or its commit; nothing is committed",
            _DECISION_TIME,
        ),
        (
            "pending",
            "list the tool calls a run waits on (tool name and call id)",
            _TEMPORAL_TIME + " (exit code 5 when no worker answers).",
        ),
    ):
        sub = _command(generation_commands, action, text, _TEMPORAL, answers=answers)
        _run_arguments(sub)
    for action, text in (
        ("approve", "let a pending tool call run"),
        ("deny", "deny a pending tool call; the model sees the reason code"),
    ):
        sub = _command(generation_commands, action, text, _TEMPORAL, answers=_DECISION_TIME)
        _run_arguments(sub)
        sub.add_argument(
            "call_id", metavar="CALL_ID", help="the call id `crux generation pending` printed"
        )
        if action == "deny":
            sub.add_argument("--reason", default=None, help="short reason code (default: denied)")

    add_cache_commands(commands, lambda parent, name, text: _command(
        parent, name, text, _DATABASE, answers=_DATABASE_TIME + "."))  # fmt: skip
    add_serve_command(commands)

    database = _command(commands, "db", "database maintenance", _DATABASE)
    database_commands = database.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    _command(
        database_commands,
        "migrate",
        "apply pending SQL migrations",
        _DATABASE,
        answers=_DATABASE_TIME + " and the migrations' own time.",
    )
    sweep = _command(
        database_commands,
        "sweep",
        "delete old staged text: of unfinished generations, unread ad-hoc replies",
        (*_DATABASE, "CRUX_STAGING_RETENTION_SECONDS"),
        answers=_DATABASE_TIME + " and the deletion's own time.",
    )
    sweep.add_argument(
        "--older-than",
        type=float,
        default=None,
        metavar="SECONDS",
        help="minimum age of staged rows to delete (CRUX_STAGING_RETENTION_SECONDS by default)",
    )
    return parser


def _legacy_run_arguments(argv: list[str]) -> list[str]:
    """`--workflow-id W` of the approval commands (an older spelling) as the RUN positional.

    `crux generation approve CALL --workflow-id W` becomes `approve W CALL`.
    """
    if len(argv) < 2 or argv[0] != "generation" or "--workflow-id" not in argv:
        return argv
    index = argv.index("--workflow-id")
    if index + 1 >= len(argv):
        return argv
    workflow_id = argv[index + 1]
    rest = argv[:index] + argv[index + 2 :]
    return [rest[0], rest[1], workflow_id, *rest[2:]]


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `crux` console script: run one command, exit with its code."""
    arguments = _parser().parse_args(
        _legacy_run_arguments(list(sys.argv[1:] if argv is None else argv))
    )
    if arguments.command == "serve":
        # uvicorn runs its own event loop and handles SIGINT and SIGTERM itself.
        code = run_serve(arguments)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    debug = arguments.debug or os.environ.get("CRUX_LOG_LEVEL", "").strip().lower() == "debug"
    try:
        settings = Settings.from_env(os.environ)
        level = settings.log_level
        if (
            arguments.command in ("demo", "thread", "db", "generation", "health", "cache")
            and "CRUX_LOG_LEVEL" not in os.environ
        ):
            # These commands print their own output; keep routine log lines out of it.
            level = "warning"
        configure_logging(log_format=settings.log_format, level=level)
        code = asyncio.run(dispatch(arguments, settings))
    except KeyboardInterrupt:
        code = ExitCode.INTERRUPTED
    except Exception as error:  # every failure ends in one line and a documented code
        code, line = classify(error)
        if debug:
            print(traceback_text(error), file=sys.stderr, end="")
        print(f"crux: {line}", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without interpreter finalisation: the Temporal runtime's threads can abort a
    # short-lived process during shutdown (exit code 134).
    os._exit(int(code))


async def dispatch(arguments: argparse.Namespace, settings: Settings) -> int:
    """Run the command `arguments` name (parsed by the `crux` parser); return its exit code."""
    from crux import _commands

    command = arguments.command
    if command in ("dev", "worker"):
        from crux._app import load_app
        from crux.workers import Worker

        app = load_app(arguments.app) if arguments.app else Worker()
        base = app.settings or settings
        if command == "worker":
            await app.replace(settings=base).run(stop=_stop_event())
            return 0
        return await _commands.dev(
            base,
            stack_dir=arguments.stack_dir,
            stop=_stop_event(),
            worker=app,
            app=arguments.app,
            port=arguments.port,
            ui_port=arguments.ui_port,
        )
    if command == "demo":
        from crux._demo import demo

        return await demo(
            settings,
            stack_dir=arguments.stack_dir or Path(DEFAULT_STACK_DIR),
            stack_dir_given=arguments.stack_dir is not None,
            turns=arguments.turns,
            keep=arguments.keep,
            stop=_stop_event(),
            command=_commands.crux_command(),
            port=arguments.port,
            ui_port=arguments.ui_port,
        )
    if command == "health":
        from crux._health import health_command

        return health_command(settings, file=arguments.file, max_age_seconds=arguments.max_age)
    if command == "thread":
        return await _commands.thread_show(
            settings, arguments.thread_id, arguments.stack_dir, as_json=arguments.json
        )
    if command == "generation":
        from crux._generation_commands import generation_command

        return await generation_command(
            settings,
            arguments.generation_command,
            arguments.run,
            thread=arguments.thread,
            as_json=arguments.json,
            call_id=getattr(arguments, "call_id", None),
            reason=getattr(arguments, "reason", None),
        )
    if command == "cache":
        from crux._cache_commands import run_cache_command

        return await run_cache_command(arguments, settings)
    if command == "db" and arguments.db_command == "sweep":
        return await _commands.db_sweep(settings, older_than=arguments.older_than)
    if command == "db":
        return await _commands.db_migrate(settings)
    return ExitCode.USAGE


def _stop_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    return stop
