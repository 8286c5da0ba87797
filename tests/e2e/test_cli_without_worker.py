"""`crux generation` when no worker polls the run's task queue: an answer in seconds, never a hang.

`show` falls back to what Temporal keeps without a worker and says so in one line naming the
task queue and the command that starts a worker; the commands only a worker can carry out
exit with code 5 and one line; an unknown run exits with code 3. None prints a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

from temporalio.client import Client

from crux._exit import ExitCode

ANSWER_SECONDS = 25.0
"""Connecting plus the query timeout, with room for a loaded machine."""


def _crux(client: Client, *arguments: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "TEMPORAL_ADDRESS": client.service_client.config.target_host}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "crux", "generation", *arguments],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
        env=env,
    )
    return done, time.monotonic() - started


async def test_generation_commands_answer_without_a_worker(client: Client) -> None:
    task_queue = f"nobody-{uuid.uuid4().hex[:8]}"
    workflow_id = f"crux/gen/orphan-{uuid.uuid4().hex[:8]}"
    handle = await client.start_workflow(
        "ManagedGenerationWorkflow",
        {"generation_id": "orphan", "input": "hi"},
        id=workflow_id,
        task_queue=task_queue,
    )
    try:
        shown, seconds = _crux(client, "show", workflow_id)
        assert shown.returncode == ExitCode.OK, shown.stderr[-2000:]
        assert seconds < ANSWER_SECONDS
        assert f"none polls task queue {task_queue}" in shown.stdout
        assert "crux worker, or crux dev" in shown.stdout
        assert "run_status: RUNNING" in shown.stdout

        as_json, _ = _crux(client, "show", workflow_id, "--json")
        document = json.loads(as_json.stdout)
        assert document["source"] == "search-attributes" and document["run_status"] == "RUNNING"

        retried, seconds = _crux(client, "retry", workflow_id)
        assert retried.returncode == ExitCode.NO_WORKER, retried.stdout + retried.stderr
        assert seconds < ANSWER_SECONDS
        [line] = retried.stderr.strip().splitlines()
        assert "crux worker" in line

        approved, seconds = _crux(client, "approve", workflow_id, "call_1")
        assert approved.returncode == ExitCode.NO_WORKER, approved.stdout + approved.stderr
        assert seconds < ANSWER_SECONDS

        unknown, _ = _crux(client, "show", f"crux/gen/never-{uuid.uuid4().hex[:8]}")
        assert unknown.returncode == ExitCode.NOT_FOUND
        [line] = unknown.stderr.strip().splitlines()
        assert "no generation run" in line
        for done in (shown, as_json, retried, approved, unknown):
            assert "Traceback" not in done.stderr
    finally:
        await handle.terminate()
