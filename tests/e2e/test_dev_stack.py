"""`crux dev` starts the whole embedded stack; a plain Temporal CLI call commits a turn."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from crux.stack import temporal_cli_path


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


def test_crux_dev_serves_a_worker_that_commits_cli_started_turns(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("CRUX_DATABASE_URL", "CRUX_MODEL")}
    env["CRUX_TASK_QUEUE"] = "crux-dev-test"
    process = subprocess.Popen(
        [sys.executable, "-m", "crux", "dev", "--stack-dir", str(tmp_path / "stack")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        banner = _wait_for_banner(process)
        address = re.search(r"export TEMPORAL_ADDRESS=(\S+)", banner)
        assert address is not None, banner
        assert "Temporal UI" in banner
        payload = json.dumps(
            {"generation_id": "dev-1", "thread_id": "dev:thread", "input": "Hello from the CLI"}
        )
        completed = subprocess.run(
            [
                temporal_cli_path(), "workflow", "execute",
                "--address", address.group(1),
                "--type", "ManagedGenerationWorkflow",
                "--task-queue", "crux-dev-test",
                "--workflow-id", "crux/gen/dev:thread/dev-1",
                "--input", payload,
                "--output", "json",
            ],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert completed.returncode == 0, completed.stderr[-2000:]
        assert '"status": "selected"' in completed.stdout or '"selected"' in completed.stdout
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
    assert code == 0
