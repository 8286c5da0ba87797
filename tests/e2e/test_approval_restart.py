"""A run waiting for approval survives its worker process being killed with SIGKILL.

The worker is a real process (`tests/e2e/approval_worker.py`) killed while the run waits in
`awaiting_approval`; a new process takes over, the approval is given to it, and the run
completes with the tool's handler run exactly once.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from tests.helpers import eventually
from vocabulary.ids import workflow_id_for

ROOT = Path(__file__).resolve().parents[2]
SECRET = "acct-9931-secret-destination"


def _spawn(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "e2e" / "approval_worker.py")],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=output,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.timeout(120)
async def test_approval_after_a_worker_restart_runs_the_tool_once(
    client: Client, pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    task_queue = f"crux-approval-kill-{suffix}"
    thread_id = f"approval-kill:{suffix}"
    tool_log = tmp_path / "tool-runs.txt"
    async with LoopbackOpenAIServer() as server:
        server.enqueue(
            tool_call_reply(
                ScriptedToolCall(name="transfer", arguments={"to": SECRET}, id="call_k1")
            ),
            TextReply(text="Sent after approval."),
        )
        env = {
            "TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "CRUX_DATABASE_URL": database_url,
            "CRUX_TASK_QUEUE": task_queue,
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-test-not-a-secret",
            "CRUX_LOG_FORMAT": "json",
            "CRUX_TEST_TOOL_LOG": str(tool_log),
            "PYTHONPATH": str(ROOT),
        }
        logs = [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
        first = _spawn(env, logs[0])
        second: subprocess.Popen[bytes] | None = None
        try:
            runtime = Runtime(client, pool, task_queue=task_queue, default_model="openai:gpt-4o")
            tool = crux.tool("transfer", lambda _: "unused here", requires_approval=True)
            run = asyncio.ensure_future(
                runtime.generate(
                    crux.prompt(id="pay", use=[tool]),
                    input="Pay it",
                    thread=thread_id,
                    generation_id="k1",
                )
            )

            async def pending() -> list[str]:
                try:
                    found = await runtime.pending_approvals("k1", thread=thread_id)
                except crux.ApprovalError:
                    return []
                return [p.call_id for p in found]

            await eventually(pending, lambda ids: ids == ["call_k1"], timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait()
            second = _spawn(env, logs[1])
            # The update is taken by the new process, which rebuilds the waiting run.
            await runtime.approve("call_k1", generation_id="k1", thread=thread_id)
            result = await asyncio.wait_for(run, timeout=60)
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(15)
    assert result.text == "Sent after approval."
    assert result.thread_commit is not None and result.thread_commit.status == "selected"
    assert tool_log.read_text(encoding="utf-8") == "ran\n"
    for log in logs:
        assert SECRET not in log.read_text(encoding="utf-8", errors="replace")
    history = await client.get_workflow_handle(workflow_id_for("k1", thread_id)).fetch_history()
    assert SECRET not in history.to_json()
    assert len(server.requests) == 2
