"""The worker's readiness signal, as a container health check sees it.

A real `crux worker` process against the real Temporal dev server and PostgreSQL writes its
readiness file once it polls; `crux health` (the image's HEALTHCHECK) passes while the file
is fresh and fails once the worker stopped, or when the file went stale.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client

from crux._health import check_readiness, health_command, readiness_file
from crux.config import Settings
from crux.runtime import Runtime
from telemetry.readiness import main as readiness_main
from tests.helpers import eventually

pytestmark = pytest.mark.stack

ROOT = Path(__file__).resolve().parents[2]


def _health(
    env: dict[str, str], *args: str, command: tuple[str, ...] = ("telemetry.readiness",)
) -> subprocess.CompletedProcess[str]:
    """Run the probe as the image does (`crux-health`), or `crux health` when asked."""
    return subprocess.run(
        [sys.executable, "-m", *command, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_crux_health_passes_while_a_worker_polls_and_fails_once_it_stopped(
    client: Client, pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    ready_file = tmp_path / "run" / "worker.ready"
    task_queue = f"crux-health-{uuid.uuid4().hex[:8]}"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TEMPORAL_ADDRESS": client.service_client.config.target_host,
        "CRUX_DATABASE_URL": database_url,
        "CRUX_TASK_QUEUE": task_queue,
        "CRUX_HEALTH_FILE": str(ready_file),
        "CRUX_LOG_FORMAT": "json",
        "CRUX_SWEEP_INTERVAL_SECONDS": "0",
    }
    before = await asyncio.to_thread(_health, env)
    assert before.returncode == 1
    assert "missing" in before.stdout

    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "crux", "worker"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        started = time.monotonic()
        await eventually(
            lambda: asyncio.to_thread(ready_file.exists), bool, timeout=60, interval=0.2
        )
        ready_after = time.monotonic() - started
        healthy = await asyncio.to_thread(_health, env)
        assert healthy.returncode == 0, healthy.stdout + healthy.stderr
        assert f"ready, task queue {task_queue}" in healthy.stdout
        cli = await asyncio.to_thread(_health, env, command=("crux", "health"))
        assert cli.returncode == 0, cli.stdout + cli.stderr
        assert f"ready, task queue {task_queue}" in cli.stdout
        # Ready means polling: a turn on that task queue completes.
        runtime = Runtime(client, pool, task_queue=task_queue, default_model="offline:echo")
        result = await runtime.generate("ping", generation_id=f"health-{uuid.uuid4().hex[:6]}")
        assert result.text
        # Content-free: ids and figures only.
        document = json.loads(ready_file.read_text(encoding="utf-8"))
        assert set(document) == {"pid", "task_queue", "namespace", "refresh_seconds"}
        assert document["pid"] == worker.pid
    finally:
        worker.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(worker.wait, 30)
        log.close()
    assert code == 0
    assert not ready_file.exists()
    after = await asyncio.to_thread(_health, env)
    assert after.returncode == 1
    assert "missing" in after.stdout
    print(f"worker ready after {ready_after:.1f}s")


def test_a_stale_or_unreadable_file_is_unhealthy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ready_file = tmp_path / "worker.ready"
    document = {"pid": 1, "task_queue": "q", "namespace": "default", "refresh_seconds": 10.0}
    ready_file.write_text(json.dumps(document), encoding="utf-8")
    modified = ready_file.stat().st_mtime
    assert check_readiness(ready_file, now=lambda: modified + 29).ready
    stale = check_readiness(ready_file, now=lambda: modified + 31)
    assert (stale.ready, stale.reason, stale.task_queue) == (False, "stale", "q")
    assert not check_readiness(ready_file, max_age_seconds=5, now=lambda: modified + 6).ready
    # A worker that hung 40 s ago, as `crux health` sees it.
    os.utime(ready_file, (modified - 40, modified - 40))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CRUX_HEALTH_FILE": str(ready_file)}
    result = _health(env)
    assert result.returncode == 1
    assert "stale" in result.stdout
    assert health_command(Settings(), file=str(ready_file), max_age_seconds=60) == 0
    ready_file.write_text("{not json", encoding="utf-8")
    assert check_readiness(ready_file).reason == "unreadable"
    assert health_command(Settings(), file=str(ready_file), max_age_seconds=None) == 1
    monkeypatch.delenv("CRUX_HEALTH_FILE", raising=False)
    capsys.readouterr()
    assert readiness_main([]) == 1
    assert "CRUX_HEALTH_FILE is not set" in capsys.readouterr().err
    assert readiness_main(["--file", str(ready_file)]) == 1
    assert "unreadable" in capsys.readouterr().out
    unset = {k: v for k, v in env.items() if k != "CRUX_HEALTH_FILE"}
    cli = _health(unset, command=("crux", "health"))
    assert cli.returncode == 1
    assert "CRUX_HEALTH_FILE is not set" in cli.stderr


def test_the_probe_loads_nothing_but_the_standard_library() -> None:
    # A container probe runs every few seconds, also on a busy host: importing the facade
    # (Temporal, asyncpg, tiktoken, ...) there would take seconds.
    probe = (
        "import sys; before = set(sys.modules); import telemetry.readiness; "
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - before}"
        " - set(sys.stdlib_module_names)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert result.stdout.strip() == "['telemetry']"


async def test_the_file_is_refreshed_and_removed_when_the_worker_stops_polling(
    tmp_path: Path,
) -> None:
    ready_file = tmp_path / "worker.ready"
    running = True
    async with readiness_file(
        ready_file, lambda: running, task_queue="q", namespace="default", refresh_seconds=0.05
    ):
        await eventually(lambda: asyncio.to_thread(ready_file.exists), bool, timeout=5)
        first = ready_file.stat().st_mtime_ns
        await eventually(
            lambda: asyncio.to_thread(lambda: ready_file.stat().st_mtime_ns),
            lambda mtime: mtime > first,
            timeout=5,
        )
        # The worker's poll loop failed on its own: the signal goes at once, not when stale.
        running = False
        await eventually(
            lambda: asyncio.to_thread(ready_file.exists), lambda exists: not exists, timeout=5
        )
    async with readiness_file(None, lambda: True, task_queue="q", namespace="default"):
        assert list(tmp_path.iterdir()) == []
