"""A success hook survives its worker process being killed with SIGKILL after the commit.

The worker is a real Python process whose hook records each run in a file and, in the
first process, never returns. It is killed while the hook runs (the turn is committed by
then); a new process takes the hook over, which runs again (at least once) with the same
idempotency key, and the generation reports it `ok`.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import eventually, worker_polls
from vocabulary.ids import generation_key

pytestmark = pytest.mark.durability

ROOT = Path(__file__).resolve().parents[2]
MODEL = "openai:gpt-4o-mini"

WORKER = textwrap.dedent(
    """
    import asyncio, json, os, time
    import crux
    from telemetry.logs import configure_logging
    from vocabulary.settings import Settings

    async def notify(turn):
        with open(os.environ["HOOK_LOG"], "a", encoding="utf-8") as log:
            entry = {
                "mode": os.environ["HOOK_MODE"],
                "attempt": turn.attempt,
                "key": turn.idempotency_key,
                "at": time.time(),
            }
            log.write(json.dumps(entry) + "\\n")
        if os.environ["HOOK_MODE"] == "hang":
            await asyncio.sleep(3600)

    settings = Settings.from_env(os.environ)
    configure_logging(log_format="json", level="info")
    hooks = [crux.success_hook("notify", notify)]
    asyncio.run(crux.Worker(success_hooks=hooks, settings=settings).run())
    """
)


def _spawn(env: dict[str, str], mode: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-c", WORKER],
            cwd=ROOT,
            env={**os.environ, **env, "HOOK_MODE": mode},
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def _runs(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.timeout(180)
async def test_a_hook_killed_after_the_commit_runs_again_on_another_worker(
    client: Client, pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    task_queue = f"crux-hook-kill-{suffix}"
    thread_id = f"hook-kill:{suffix}"
    runs = tmp_path / "hook-runs.jsonl"
    async with LoopbackOpenAIServer() as server:
        server.enqueue(TextReply(text="Shipped."))
        env = {
            "TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "CRUX_DATABASE_URL": database_url,
            "CRUX_TASK_QUEUE": task_queue,
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-test-not-a-secret",
            "PYTHONPATH": str(ROOT),
            "HOOK_LOG": str(runs),
        }
        first = _spawn(env, "hang", tmp_path / "worker-1.log")
        second: subprocess.Popen[bytes] | None = None
        try:
            await worker_polls(client, task_queue)
            runtime = Runtime(client, pool, task_queue=task_queue, default_model=MODEL)
            run = asyncio.ensure_future(
                runtime.generate(
                    "Ship order 7",
                    thread=thread_id,
                    generation_id="ship-7",
                    on_success=["notify"],
                )
            )

            async def hook_runs() -> list[dict[str, Any]]:
                return _runs(runs)

            # The hook started on the first worker: the turn is committed by then.
            await eventually(hook_runs, bool, timeout=60)
            first.send_signal(signal.SIGKILL)
            first.wait()
            # The turn was committed before the hook started, and stays committed.
            snapshot = await ThreadStore(pool).read(thread_id)
            assert [e.role for e in snapshot.entries if isinstance(e, crux.MessageEntry)] == [
                "user",
                "assistant",
            ]
            second = _spawn(env, "run", tmp_path / "worker-2.log")
            # The lost hook is noticed by its heartbeat timeout and runs again there.
            result = await asyncio.wait_for(run, timeout=120)
        finally:
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(15)
    key = generation_key("ship-7", thread_id)
    entries = _runs(runs)
    assert [(e["mode"], e["attempt"], e["key"]) for e in entries] == [
        ("hang", 1, key),
        ("run", 2, key),
    ]
    commit = result.thread_commit
    assert commit is not None
    assert entries[0]["at"] >= commit.committed_at.timestamp() - 1
    assert result.hooks["notify"].status == "ok"
    assert result.hooks["notify"].attempts == 2
