"""The `crux serve` command (and `python -m crux.serve`): run the API under uvicorn."""

from __future__ import annotations

import argparse
import os
import secrets
import sys
import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from crux.serve._settings import SERVE_ENVIRONMENT, TENANT_PATTERN, ServeSettings, hash_api_key
from telemetry.logs import configure_logging
from vocabulary.errors import ConfigurationError, CruxError
from vocabulary.settings import Settings

SERVE_MODULES = ("fastapi", "starlette", "uvicorn", "jwt")
"""Python modules of the `serve` extra."""
MISSING_SERVE = "the HTTP API is not installed; run: pip install 'crux-temporal[serve]'"

GRACEFUL_SHUTDOWN_SECONDS = 30
"""How long a stopping replica lets open requests (event streams) finish; clients resume."""

COMMON_ENVIRONMENT = {
    "TEMPORAL_ADDRESS": "Temporal frontend host:port (default localhost:7233)",
    "TEMPORAL_NAMESPACE": "Temporal namespace (default: default)",
    "CRUX_TASK_QUEUE": "the workers' task queue (default: crux)",
    "CRUX_DATABASE_URL": "PostgreSQL URL of the Crux database",
    "CRUX_MODEL": "default model, provider:model (default: offline:echo)",
    "CRUX_CODEC_KEYS": "payload codec keys kid:base64key,... (first current); codec server on",
    "CRUX_CODEC_KEY_FILE": "a file of codec keys instead",
    "CRUX_LOG_FORMAT": "json, console or auto (default: auto)",
    "CRUX_LOG_LEVEL": "log level (default: info)",
}


def _tenant(text: str) -> str:
    if not TENANT_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError("a tenant is letters, digits, '_' or '-' (at most 64)")
    return text


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError("a port is a number from 0 to 65535")
    return int(text)


def _epilog() -> str:
    names = {**COMMON_ENVIRONMENT, **SERVE_ENVIRONMENT}
    width = max(len(name) for name in names)
    return "environment variables:\n" + "\n".join(
        f"  {name:<{width}}  {meaning}" for name, meaning in names.items()
    )


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default=None, help="address to listen on (default: CRUX_SERVE_HOST or 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=None,
        help="port to listen on (default: CRUX_SERVE_PORT or 8000)",
    )
    parser.add_argument(
        "--new-key",
        metavar="TENANT",
        type=_tenant,
        default=None,
        help="print a new API key for TENANT and the CRUX_API_KEYS entry to configure, then exit",
    )


def add_serve_command(commands: Any) -> argparse.ArgumentParser:
    """Register `serve` on the `crux` command's subparsers (`run_serve` runs it).

    Args:
        commands: The object `ArgumentParser.add_subparsers()` returned.
    """
    text = "run the HTTP API and the codec server"
    parser: argparse.ArgumentParser = commands.add_parser(
        "serve",
        help=text,
        description=textwrap.fill(
            "Run the HTTP API (OpenAPI at /openapi.json) and, with codec keys, the codec "
            "server for the Temporal UI.",
            78,
        ),
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _arguments(parser)
    return parser


def run_serve(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> int:
    """Run `crux serve` with parsed arguments until it is stopped; the exit code.

    A configuration error ends it with one line on stderr and code 1.
    """
    env = os.environ if env is None else env
    if args.new_key is not None:
        key = f"crux_{secrets.token_urlsafe(32)}"
        print(f"API key (give it to the client, store it nowhere else): {key}")
        print(f"CRUX_API_KEYS entry: {args.new_key}:{hash_api_key(key)}")
        return 0
    try:
        settings = Settings.from_env(env)
        serve_settings = ServeSettings.from_env(env)
        configure_logging(log_format=settings.log_format, level=settings.log_level)
        return serve(
            settings,
            serve_settings,
            host=args.host or serve_settings.host,
            port=args.port if args.port is not None else serve_settings.port,
        )
    except CruxError as error:
        print(f"crux serve: {error}", file=sys.stderr)
        return 1


def serve(settings: Settings, serve_settings: ServeSettings, *, host: str, port: int) -> int:
    """Serve the API with uvicorn until SIGINT or SIGTERM; 1 when it could not start.

    Raises:
        ConfigurationError: Invalid credentials configuration or codec keys.
    """
    try:
        import uvicorn

        from crux.serve._app import create_app
    except ModuleNotFoundError as error:
        if error.name is None or error.name.split(".")[0] not in SERVE_MODULES:
            raise
        raise ConfigurationError(MISSING_SERVE) from None

    app = create_app(settings, serve_settings)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            # The process's logging (structlog) stays; the access log is the app's own,
            # content-free one (uvicorn's would print paths with ids and queries).
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
            server_header=False,
        )
    )
    server.run()
    return 0 if server.started else 1


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m crux.serve`."""
    parser = argparse.ArgumentParser(
        prog="python -m crux.serve",
        description="Run the Crux HTTP API and codec server.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _arguments(parser)
    return run_serve(parser.parse_args(argv))
