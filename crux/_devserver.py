"""The Temporal dev server of `crux dev` and `crux demo`: fixed ports, persistent, quiet.

Unlike the throwaway server of the test suite (random ports, in memory), the developer's
stack uses the well-known ports 7233 (frontend) and 8233 (UI) when they are free, keeps its
history in `<stack-dir>/temporal.db` across restarts, and writes its output to
`<stack-dir>/temporal.log` instead of the terminal. It runs in its own session, so a
Ctrl-C in the terminal reaches only the `crux` process, which then stops it in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import socket
import subprocess
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from crux.stack import (
    DEFAULT_UI_PORT,
    SEARCH_ATTRIBUTES,
    dev_server_config_args,
    temporal_cli_path,
)
from vocabulary.errors import ConfigurationError

DEFAULT_FRONTEND_PORT = 7233
HOST = "127.0.0.1"
STARTUP_TIMEOUT_SECONDS = 90.0
STOP_TIMEOUT_SECONDS = 15.0


def port_free(port: int) -> bool:
    """Whether nothing listens on `127.0.0.1:port` and it can be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        if probe.connect_ex((HOST, port)) == 0:
            return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as binder:
        try:
            binder.bind((HOST, port))
        except OSError:
            return False
    return True


def check_ports(*ports: int | None) -> None:
    """Refuse ports asked for explicitly that are in use.

    Raises:
        ConfigurationError: Naming the busy port.
    """
    for port in ports:
        if port is not None and not port_free(port):
            raise ConfigurationError(f"port {port} on {HOST} is in use; choose another")


def free_port() -> int:
    """A port the operating system reports free on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as binder:
        binder.bind((HOST, 0))
        return int(binder.getsockname()[1])


def pick_port(preferred: int) -> int:
    """`preferred` when it is free, otherwise any free port."""
    return preferred if port_free(preferred) else free_port()


@dataclass
class DevServer:
    """A running Temporal dev server started by `start_dev_server`.

    Attributes:
        address: `host:port` of its frontend.
        ui_url: Address of its web UI (`None` when headless).
        log_path: The file its output goes to.
        db_path: The file its history is kept in.
        client: A client on the `default` namespace with the pydantic data converter.
    """

    address: str
    ui_url: str | None
    log_path: Path
    db_path: Path
    client: Client
    _process: subprocess.Popen[bytes]

    async def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after a grace period); history is kept."""
        await asyncio.to_thread(_terminate, self._process)

    def stop_sync(self) -> None:
        """`stop`, for callers without an event loop (blocks up to 30 s)."""
        _terminate(self._process)

    @property
    def pid(self) -> int:
        """The server's process id."""
        return self._process.pid


def lock_stack_dir(stack_dir: Path) -> IO[bytes]:
    """Hold `<stack-dir>/stack.lock` until the returned file is closed.

    Two stacks on one directory would share PostgreSQL (the second would stop the first's
    server on exit) and one Temporal history file.

    Raises:
        ConfigurationError: Another process holds the directory.
    """
    stack_dir.mkdir(parents=True, exist_ok=True)
    handle = (stack_dir / "stack.lock").open("ab")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise ConfigurationError(
            f"another crux dev or crux demo uses {stack_dir}; stop it or pass --stack-dir"
        ) from None
    return handle


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_SECONDS)


def _command(
    binary: str, *, port: int, ui_port: int | None, db_path: Path, extra: list[str]
) -> list[str]:
    command = [
        binary, "server", "start-dev",
        "--ip", HOST,
        "--port", str(port),
        "--db-filename", str(db_path),
        "--log-format", "json",
        "--log-level", "warn",
        *dev_server_config_args(),
    ]  # fmt: skip
    command += ["--headless"] if ui_port is None else ["--ui-port", str(ui_port)]
    for name in SEARCH_ATTRIBUTES:
        command += ["--search-attribute", f"{name}=Keyword"]
    return command + extra


async def start_dev_server(
    stack_dir: Path,
    *,
    ui: bool = True,
    port: int | None = None,
    ui_port: int | None = None,
    extra_args: list[str] | None = None,
) -> DevServer:
    """Start the dev server with its state and log under `stack_dir`.

    Args:
        stack_dir: Directory for `temporal.db` and `temporal.log` (created when missing).
        ui: Serve the web UI.
        port: Frontend port (must be free); by default 7233 when free, another otherwise.
        ui_port: UI port (must be free); by default 8233 when free, another otherwise.
        extra_args: More `temporal server start-dev` arguments.

    Raises:
        ConfigurationError: The binary is missing, a port asked for is in use, or the
            server did not come up (the message names the log file).
    """
    binary = temporal_cli_path()
    check_ports(port, ui_port if ui else None)
    frontend = port if port is not None else pick_port(DEFAULT_FRONTEND_PORT)
    chosen_ui = None
    if ui:
        chosen_ui = ui_port if ui_port is not None else pick_port(DEFAULT_UI_PORT)
        if chosen_ui == frontend:
            chosen_ui = free_port()
    db_path = stack_dir / "temporal.db"
    log_path = stack_dir / "temporal.log"
    command = _command(
        binary, port=frontend, ui_port=chosen_ui, db_path=db_path, extra=list(extra_args or [])
    )
    process = await asyncio.to_thread(_spawn, command, stack_dir, log_path)
    address = f"{HOST}:{frontend}"
    try:
        client = await _wait_ready(process, address, log_path)
    except BaseException:
        await asyncio.to_thread(_terminate, process)
        raise
    ui_url = f"http://{HOST}:{chosen_ui}" if chosen_ui is not None else None
    return DevServer(address, ui_url, log_path, db_path, client, process)


def _spawn(command: list[str], stack_dir: Path, log_path: Path) -> subprocess.Popen[bytes]:
    stack_dir.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        log.write(
            f"--- start {time.strftime('%Y-%m-%dT%H:%M:%S')}: {' '.join(command[1:])}\n".encode()
        )
        log.flush()
        # Its own session: a Ctrl-C in the terminal must not kill it under the worker.
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


async def _wait_ready(process: subprocess.Popen[bytes], address: str, log_path: Path) -> Client:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
    while True:
        if process.poll() is not None:
            raise ConfigurationError(
                f"the Temporal dev server exited with code {process.returncode}; see {log_path}"
            )
        with contextlib.suppress(RuntimeError, OSError, TimeoutError):
            client = await Client.connect(
                address,
                data_converter=pydantic_data_converter,
                connect_timeout=timedelta(seconds=2),
            )
            # The frontend can answer before the namespace is ready; ask for it.
            await client.workflow_service.describe_namespace(
                DescribeNamespaceRequest(namespace="default")
            )
            return client
        if time.monotonic() > deadline:
            raise ConfigurationError(
                f"the Temporal dev server did not answer at {address} within "
                f"{STARTUP_TIMEOUT_SECONDS:g} s; see {log_path}"
            )
        await asyncio.sleep(0.25)
