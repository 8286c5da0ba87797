"""A run awaiting approval survives its worker process being killed with SIGKILL.

The worker is a real Python process serving a tool that requires approval. It is killed
while the run waits in `awaiting_approval`; a new process takes over, the call is approved,
the tool runs exactly once (counted in a file the tool appends to) and the turn commits.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client
from temporalio.service import RPCError

import crux
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, ScriptedToolCall, TextReply, tool_call_reply
from storage import ThreadStore
from tests.helpers import eventually, worker_polls

pytestmark = pytest.mark.durability

ROOT = Path(__file__).resolve().parents[2]
MODEL = "openai:gpt-4o-mini"

WORKER = textwrap.dedent(
    """
    import asyncio, os, sys
    import crux
    from telemetry.logs import configure_logging
    from vocabulary.settings import Settings

    def refund(arguments):
        with open(os.environ["REFUND_LOG"], "a", encoding="utf-8") as log:
            log.write("ran\\n")
        return "refunded"

    tool = crux.tool(
        "refund", refund,
        parameters={"type": "object", "properties": {"order": {"type": "string"}}},
        requires_approval=True,
    )
    settings = Settings.from_env(os.environ)
    configure_logging(log_format="json", level="info")
    asyncio.run(crux.Worker(tools=[tool], settings=settings).run())
    """
)


def _spawn(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-c", WORKER],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=output,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.timeout(180)
async def test_a_run_awaiting_approval_survives_a_sigkilled_worker(
    client: Client, pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    task_queue = f"crux-approval-kill-{suffix}"
    thread_id = f"approval-kill:{suffix}"
    refunds = tmp_path / "refunds.log"
    # The caller's definition of the tool: its handler runs only on the worker.
    refund = crux.tool(
        "refund",
        lambda arguments: "unused",
        parameters={"type": "object", "properties": {"order": {"type": "string"}}},
        requires_approval=True,
    )
    payments = crux.prompt(id="payments", use=[refund])
    async with LoopbackOpenAIServer() as server:
        server.enqueue(
            tool_call_reply(ScriptedToolCall(name="refund", arguments={"order": "A-17"})),
            TextReply(text="Refunded."),
        )
        env = {
            "TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "CRUX_DATABASE_URL": database_url,
            "CRUX_TASK_QUEUE": task_queue,
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-test-not-a-secret",
            "PYTHONPATH": str(ROOT),
            "REFUND_LOG": str(refunds),
        }
        first = _spawn(env, tmp_path / "worker-1.log")
        second: subprocess.Popen[bytes] | None = None
        try:
            await worker_polls(client, task_queue)
            runtime = Runtime(client, pool, task_queue=task_queue, default_model=MODEL)
            run = asyncio.ensure_future(
                runtime.generate(
                    payments, input="Refund A-17", thread=thread_id, generation_id="refund-1"
                )
            )

            async def pending() -> int:
                try:
                    return len(await runtime.pending_approvals("refund-1", thread=thread_id))
                except (crux.CruxError, RPCError):
                    # Not started yet, or the query found no worker free to answer it in
                    # time on a busy machine: ask again.
                    return 0

            await eventually(pending, lambda n: n == 1, timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait()
            second = _spawn(env, tmp_path / "worker-2.log")
            # The new process answers the query from the replayed run, then takes the update.
            await eventually(pending, lambda n: n == 1, timeout=60)
            [call] = await runtime.pending_approvals("refund-1", thread=thread_id)
            assert call.tool == "refund"
            await runtime.approve(call.call_id, "refund-1", thread=thread_id)
            result = await asyncio.wait_for(run, timeout=120)
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(15)
    assert result.text == "Refunded."
    assert refunds.read_text(encoding="utf-8").splitlines() == ["ran"]
    snapshot = await ThreadStore(pool).read(thread_id)
    assert [entry.kind for entry in snapshot.entries] == ["message"] * 4
    commit = result.thread_commit
    assert commit is not None and commit.status == "selected"
