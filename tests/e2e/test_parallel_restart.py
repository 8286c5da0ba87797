"""A parallel run survives its worker process being killed with SIGKILL mid-flight.

The worker is a real `python worker.py` process; it is killed while both members' provider
calls are in flight and a new process is started. The run then completes: each member's
turn is committed exactly once.
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
from providers.loopback import CountReply, LoopbackOpenAIServer, RecordedRequest, TextReply
from providers.loopback._replies import Reply
from providers.loopback._shared import input_tokens_of
from tests.chaos import worker_env
from tests.helpers import eventually, worker_polls

pytestmark = pytest.mark.durability

ROOT = Path(__file__).resolve().parents[2]
MODEL = "openai:gpt-4o-mini"


def _spawn(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, str(ROOT / "worker.py")],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=output,
            stderr=subprocess.STDOUT,
        )


@pytest.mark.timeout(180)
async def test_parallel_run_completes_after_its_worker_is_killed(
    client: Client, pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    calls: list[str] = []

    def respond(request: RecordedRequest) -> Reply:
        if not request.path.endswith("/chat/completions"):
            return CountReply(input_tokens=input_tokens_of(request.body))
        calls.append(request.path)
        # The first two answers (one per member) hang until the worker is gone.
        return TextReply(text="answered", delay_seconds=30.0 if len(calls) <= 2 else 0.0)

    suffix = uuid.uuid4().hex[:6]
    task_queue = f"crux-parallel-kill-{suffix}"
    threads = {"left": f"left:{suffix}", "right": f"right:{suffix}"}
    async with LoopbackOpenAIServer(responder=respond) as server:
        env = worker_env(
            client.service_client.config.target_host, database_url, task_queue, server.base_url
        )
        first = _spawn(env, tmp_path / "worker-1.log")
        second: subprocess.Popen[bytes] | None = None
        try:
            await worker_polls(client, task_queue)
            runtime = Runtime(client, pool, task_queue=task_queue, default_model=MODEL)
            agents = {
                "left": crux.prompt(id="left", prompt=lambda i: f"left: {i}"),
                "right": crux.prompt(id="right", prompt=lambda i: f"right: {i}"),
            }
            run = asyncio.ensure_future(
                runtime.parallel(
                    id=f"kill-{suffix}", context="hello", agents=agents, threads=threads
                )
            )

            async def chat_calls() -> int:
                return len(calls)

            await eventually(chat_calls, lambda n: n >= 2, timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait()
            second = _spawn(env, tmp_path / "worker-2.log")
            result = await asyncio.wait_for(run, timeout=150)
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(15)
    assert not result.errors
    for name, thread_id in threads.items():
        commit = result[name].thread_commit
        assert commit is not None and commit.status == "selected"
        rows = await pool.fetch(
            "SELECT message_id FROM crux_thread_messages WHERE thread_id = $1", thread_id
        )
        assert sorted(r["message_id"] for r in rows) == sorted(commit.message_ids)
    assert server.requests  # the answers came from the loopback provider, over HTTP
