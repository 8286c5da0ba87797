"""A cache write never runs ahead of the commit, even when the worker dies in between.

The worker is a real Python process. A Thread holds one committed turn; the next turn asks
the response cache, misses, and the provider answers. The suite holds the Thread's control
row (every commit of a turn locks it inside its transaction), waits until the worker's
commit is blocked on it, and SIGKILLs the worker there: the provider has answered, the turn
is not committed. While no worker lives, no cache entry exists. A second process takes the
generation over and finishes it: the turn is committed exactly once, and the one entry it
leaves was written after that commit, from that generation.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux.runtime import Runtime
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import ThreadStore
from tests.helpers import worker_polls
from vocabulary.ids import generation_key

pytestmark = pytest.mark.durability

ROOT = Path(__file__).resolve().parents[2]
MODEL = "openai:gpt-4o-mini"
APPLICATION_NAME = "crux-cache-kill-worker"
"""The killed process's PostgreSQL `application_name`: its blocked commit names it."""

WORKER = textwrap.dedent(
    """
    import asyncio, os
    import crux
    from telemetry.logs import configure_logging
    from vocabulary.settings import Settings

    settings = Settings.from_env(os.environ)
    configure_logging(log_format="json", level="info")
    asyncio.run(crux.Worker(settings=settings).run())
    """
)

# What a commit transaction runs while it waits for the control row (storage/threads).
_COMMIT_STATEMENTS = ("crux_thread_fast_append", "FOR UPDATE OF c", "FROM crux_threads WHERE")


def _spawn(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as output:
        return subprocess.Popen(
            [sys.executable, "-c", WORKER],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=output,
            stderr=subprocess.STDOUT,
        )


def _completions(server: LoopbackOpenAIServer) -> int:
    return sum(1 for r in server.requests if r.path.split("?")[0].endswith("/chat/completions"))


async def _blocked_commit(lock: asyncpg.Connection, *, timeout: float) -> bool:
    """Whether the worker's commit came to wait for the row `lock` holds, within `timeout`."""
    me = lock.get_server_pid()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Statistics views are snapshotted once per transaction: take a fresh one.
        await lock.execute("SELECT pg_stat_clear_snapshot()")
        queries = await lock.fetch(
            "SELECT query FROM pg_stat_activity"
            " WHERE $1 = ANY(pg_blocking_pids(pid)) AND application_name = $2",
            me,
            APPLICATION_NAME,
        )
        if any(m in row["query"] for row in queries for m in _COMMIT_STATEMENTS):
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.timeout(240)
async def test_a_worker_killed_before_the_commit_leaves_no_cache_entry_ahead_of_it(
    client: Client, pool: asyncpg.Pool, database_url: str, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    task_queue = f"crux-cache-kill-{suffix}"
    thread_id = f"cache-kill:{suffix}"
    cache = crux.cache(namespace=f"kill-{suffix}")
    # asyncpg passes unknown URL parameters on as server settings.
    tagged_url = (
        f"{database_url}{'&' if '?' in database_url else '?'}application_name={APPLICATION_NAME}"
    )
    async with LoopbackOpenAIServer() as server:
        server.enqueue(TextReply(text="Noted."), TextReply(text="Paris."))
        env = {
            "TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "CRUX_TASK_QUEUE": task_queue,
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "sk-test-not-a-secret",
            "PYTHONPATH": str(ROOT),
        }
        first = _spawn({**env, "CRUX_DATABASE_URL": tagged_url}, tmp_path / "worker-1.log")
        second: subprocess.Popen[bytes] | None = None
        lock = await asyncpg.connect(database_url, timeout=10)
        try:
            await worker_polls(client, task_queue)
            runtime = Runtime(client, pool, task_queue=task_queue, default_model=MODEL)
            # The first commit creates the Thread's control row the suite then holds.
            await asyncio.wait_for(
                runtime.generate("Remember Paris.", thread=thread_id, generation_id="warm"),
                timeout=90,
            )
            transaction = lock.transaction()
            await transaction.start()
            held = await lock.fetchval(
                "SELECT count(*) FROM (SELECT 1 FROM crux_threads WHERE thread_id = $1"
                " FOR NO KEY UPDATE) AS locked",
                thread_id,
            )
            assert held == 1
            run = asyncio.ensure_future(
                runtime.generate(
                    "Capital of France?", thread=thread_id, generation_id="ask", cache=cache
                )
            )
            assert await _blocked_commit(lock, timeout=90), "the commit never waited"
            # The provider answered the cached-eligible attempt; its commit is in flight.
            assert _completions(server) == 2
            first.send_signal(signal.SIGKILL)
            first.wait()

            # No worker lives and the turn is not committed: no entry exists.
            assert await pool.fetchval("SELECT count(*) FROM crux_cache_entries") == 0
            snapshot = await ThreadStore(pool).read(thread_id)
            assert len([e for e in snapshot.entries if isinstance(e, crux.MessageEntry)]) == 2
            await transaction.rollback()

            second = _spawn({**env, "CRUX_DATABASE_URL": database_url}, tmp_path / "worker-2.log")
            result = await asyncio.wait_for(run, timeout=150)
        finally:
            if not lock.is_closed():
                await lock.close()
            for process in (first, second):
                if process is not None and process.poll() is None:
                    process.terminate()
                    process.wait(15)

    assert result.text == "Paris."
    # The provider answered once; the takeover reused the answer it staged.
    assert _completions(server) == 2
    # Committed exactly once: two whole groups, the user turn and its reply once each.
    snapshot = await ThreadStore(pool).read(thread_id)
    messages = [e for e in snapshot.entries if isinstance(e, crux.MessageEntry)]
    assert [(m.role, m.content) for m in messages] == [
        ("user", "Remember Paris."),
        ("assistant", "Noted."),
        ("user", "Capital of France?"),
        ("assistant", "Paris."),
    ]
    groups = await pool.fetch(
        "SELECT message_ids, committed_at FROM crux_thread_groups WHERE thread_id = $1"
        " ORDER BY committed_at",
        thread_id,
    )
    assert len(groups) == 2
    commit = result.thread_commit
    assert commit is not None
    assert groups[1]["committed_at"] == commit.committed_at
    # At most one entry, derived from this generation, written after its commit.
    entries = await pool.fetch(
        "SELECT generation_key, thread_id, created_at FROM crux_cache_entries"
    )
    assert len(entries) <= 1
    for entry in entries:
        assert entry["generation_key"] == generation_key("ask", thread_id)
        assert entry["thread_id"] == thread_id
        assert entry["created_at"] >= commit.committed_at
