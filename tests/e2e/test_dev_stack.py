"""`crux dev` starts the whole embedded stack; a plain Temporal CLI call commits a turn.

The stack is quiet (server output goes to log files under the stack directory), stops
cleanly on a terminal's Ctrl-C (SIGINT to the whole process group), and keeps the Temporal
history across restarts. The test holds 7233 and 8233 itself when they are free, so it never
takes a developer's ports and shows that a busy port leads to another, printed, address.

The tests that hold the well-known ports run in one xdist group (one worker, one at a
time): another test releasing 7233 while `crux dev` picks its port would hand it 7233. Every
other test that starts a stack passes free ports explicitly.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from crux.stack import temporal_cli_path
from tests.processes import leftovers, naming

pytestmark = [pytest.mark.durability, pytest.mark.xdist_group("well-known-ports")]

NOISE = re.compile(r"\b(WARN|WARNING|ERROR|Traceback)\b")


def _wait_for_banner(process: subprocess.Popen[str], timeout: float = 90.0) -> str:
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen += line
        if "Press Ctrl-C to stop." in line:
            return seen
    raise AssertionError(f"crux dev did not come up:\n{seen[-2000:]}")


@contextmanager
def _hold(port: int) -> Iterator[bool]:
    """Listen on `port` for the block when it is free; yields whether this test holds it.

    SO_REUSEADDR lets the bind succeed over connections of earlier tests still in TIME_WAIT,
    which the stack's own probe ignores as well; a port someone else listens on stays theirs.
    """
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        try:
            holder.bind(("127.0.0.1", port))
            holder.listen()
        except OSError:
            held = False
        else:
            held = True
        yield held
    finally:
        holder.close()


def _start(stack_dir: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "crux", "dev", "--stack-dir", str(stack_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # Its own process group, so SIGINT can go to the whole group as a terminal's Ctrl-C.
        start_new_session=True,
    )


def _ctrl_c(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    return process.returncode, out, err


def _crux(env: dict[str, str], *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crux", *arguments],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip


def _temporal(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [temporal_cli_path(), *arguments], capture_output=True, text=True, timeout=60, check=False
    )


def test_crux_dev_serves_a_worker_and_keeps_history_across_restarts(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CRUX_DATABASE_URL", "CRUX_MODEL")}
    env["CRUX_TASK_QUEUE"] = "crux-dev-test"
    env["CRUX_LOG_LEVEL"] = "warning"
    stack_dir = tmp_path / "stack"
    _serve_and_restart(stack_dir, env)
    # `thread show` read the running stack's database: once `crux dev` stopped, neither its
    # PostgreSQL nor its Temporal dev server runs.
    left = leftovers(lambda processes: naming([stack_dir], processes))
    assert not left, "\n".join(map(str, left))


def _serve_and_restart(stack_dir: Path, env: dict[str, str]) -> None:
    with ExitStack() as ports:
        held_frontend = ports.enter_context(_hold(7233))
        held_ui = ports.enter_context(_hold(8233))
        process = _start(stack_dir, env)
        try:
            banner = _wait_for_banner(process)
        except BaseException:
            _ctrl_c(process)
            raise
        address = re.search(r"export TEMPORAL_ADDRESS=(\S+)", banner)
        assert address is not None, banner
        if held_frontend:  # held above: another port, printed
            assert not address.group(1).endswith(":7233")
        if held_ui:
            assert re.search(r"Temporal UI +: http://127\.0\.0\.1:(?!8233)\d+", banner), banner
        payload = json.dumps(
            {"generation_id": "dev-1", "thread_id": "dev:thread", "input": "Hello from the CLI"}
        )
        try:
            completed = _temporal(
                "workflow", "execute",
                "--address", address.group(1),
                "--type", "ManagedGenerationWorkflow",
                "--task-queue", "crux-dev-test",
                "--workflow-id", "crux/gen/dev:thread/dev-1",
                "--input", payload,
                "--output", "json",
            )  # fmt: skip
            # While it runs, `thread show` reads its database and leaves it running, and a
            # second stack on the same directory is refused in one line.
            shown = _crux(env, "thread", "show", "dev:thread", "--stack-dir", str(stack_dir))
            second = _crux(env, "dev", "--stack-dir", str(stack_dir))
            after = _temporal(
                "workflow", "describe", "--address", address.group(1),
                "--workflow-id", "crux/gen/dev:thread/dev-1",
            )  # fmt: skip
        finally:
            code, rest, errors = _ctrl_c(process)
        assert shown.returncode == 0, shown.stderr[-2000:]
        assert "Hello from the CLI" in shown.stdout
        assert second.returncode == 1
        [line] = second.stderr.splitlines()
        assert "another crux dev or crux demo uses" in line
        assert after.returncode == 0, after.stderr[-2000:]
        assert completed.returncode == 0, completed.stderr[-2000:]
        assert '"selected"' in completed.stdout
        assert code == 0, errors[-2000:]
        # Quiet: the servers' output is in the log files, not on the terminal.
        assert not NOISE.search(banner + rest + errors), banner + rest + errors
        assert (stack_dir / "temporal.log").stat().st_size > 0
        assert (stack_dir / "postgres.log").stat().st_size > 0
        assert (stack_dir / "temporal.db").exists()

        # A restart finds the run of the first session in the kept history.
        again = _start(stack_dir, env)
        try:
            banner = _wait_for_banner(again)
            address = re.search(r"export TEMPORAL_ADDRESS=(\S+)", banner)
            assert address is not None, banner
            described = _temporal(
                "workflow", "describe",
                "--address", address.group(1),
                "--workflow-id", "crux/gen/dev:thread/dev-1",
                "--output", "json",
            )  # fmt: skip
        finally:
            code, _, errors = _ctrl_c(again)
        assert described.returncode == 0, described.stderr[-2000:]
        assert "COMPLETED" in described.stdout
        assert code == 0, errors[-2000:]


async def test_ctrl_c_during_the_demo_stops_it_cleanly(tmp_path: Path) -> None:
    from providers.loopback import LoopbackOpenAIServer, RecordedRequest, Reply, TextReply

    def slow(request: RecordedRequest) -> Reply:
        return TextReply(text="a slow answer", delay_seconds=60)

    async with LoopbackOpenAIServer(responder=slow) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CRUX_", "OPENAI_"))}
        env.update(
            CRUX_MODEL="openai:local-model", OPENAI_BASE_URL=server.base_url, PYTHONUNBUFFERED="1"
        )
        with ExitStack() as ports:
            ports.enter_context(_hold(7233))
            ports.enter_context(_hold(8233))
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "crux", "demo", "--stack-dir", str(tmp_path / "stack"),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                env=env, start_new_session=True,
            )  # fmt: skip
            assert process.stdout is not None and process.stderr is not None
            seen = b""
            async with asyncio.timeout(120):
                while b"Budget from the model profile" not in seen:
                    line = await process.stdout.readline()
                    if not line:  # the demo ended before its first turn: say why
                        errors = await process.stderr.read()
                        raise AssertionError((seen + errors).decode()[-2000:])
                    seen += line
                while not server.requests:  # the first turn is at the model
                    await asyncio.sleep(0.1)
            started = time.monotonic()
            os.killpg(process.pid, signal.SIGINT)
            async with asyncio.timeout(60):
                out, err = await process.communicate()
            elapsed = time.monotonic() - started
    assert process.returncode == 130, err.decode()[-2000:]
    assert elapsed < 30
    text = (seen + out + err).decode()
    assert "Interrupted" in text
    assert not NOISE.search(text), text
