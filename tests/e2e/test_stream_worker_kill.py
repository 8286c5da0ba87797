"""A worker SIGKILLed mid-stream: the caller sees a reset, then the retried reply, committed once.

Two worker processes serve the task queue; the caller streams from this process, which runs
no worker, so it follows the stream through PostgreSQL (notifications and reads), as a
caller in any other process does. When the caller has shown its first delta, the worker that
holds the provider's stream open is SIGKILLed. The attempt's heartbeat stops, Temporal gives
the attempt to the other worker, and its stream starts anew: the caller gets a
`StreamReset`, then deltas that add up to the committed text, and the Thread holds the turn
once.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client

import crux
from crux.runtime import Runtime
from crux.stack import EmbeddedPostgres
from providers.loopback import RecordedRequest, TextReply
from storage import ThreadStore, create_pool
from tests.chaos import (
    PeerAwareOpenAIServer,
    WorkerFleet,
    peer_port,
    resume_postgres,
    worker_env,
)
from tests.helpers import eventually
from tests.pg_faults import new_database, own_postgres

pytestmark = pytest.mark.durability

MODEL = "openai:gpt-4o-mini"
FIRST = " ".join(f"lost{n}" for n in range(60))
RETRIED = " ".join(f"kept{n}" for n in range(60))


@pytest.fixture
def fleet_postgres() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of this test alone (the worker processes connect to it)."""
    with own_postgres("crux-stream-kill-pg-", recover=resume_postgres) as server:
        yield server


@pytest.mark.timeout(240)
async def test_a_worker_killed_mid_stream_resets_the_stream_and_commits_the_retry_once(
    client: Client, fleet_postgres: EmbeddedPostgres, tmp_path: Path
) -> None:
    _, database_url = await new_database(fleet_postgres)
    task_queue = f"crux-stream-kill-{uuid.uuid4().hex[:8]}"
    peers: list[int] = []

    def respond(_request: RecordedRequest) -> TextReply:
        peers.append(peer_port())
        if len(peers) == 1:
            # A piece of the reply a second: the stream is still open when its worker dies.
            return TextReply(text=FIRST, sse_chunk_size=1500, sse_piece_delay_seconds=1)
        return TextReply(text=RETRIED, sse_chunk_size=1500)

    figures: dict[str, object] = {}
    pool = await create_pool(database_url, min_size=1, max_size=4)
    try:
        async with PeerAwareOpenAIServer(responder=respond) as server:
            fleet = WorkerFleet(
                env=worker_env(
                    client.service_client.config.target_host,
                    database_url,
                    task_queue,
                    server.base_url,
                ),
                size=2,
                log_dir=tmp_path,
                command=(sys.executable, "-m", "tests.chaos"),
            )
            fleet.start()
            try:
                await eventually(lambda: _ready(fleet), lambda n: n == 2, timeout=120)
                runtime = Runtime(client, pool, task_queue=task_queue, eager_start=False)
                thread_id = f"stream-kill:{uuid.uuid4().hex[:6]}"
                shown = asyncio.Event()

                async def follow() -> list[crux.StreamUpdate]:
                    updates: list[crux.StreamUpdate] = []
                    async for update in runtime.stream(
                        "Tell me about Lisbon", thread=thread_id, model=MODEL, generation_id="k1"
                    ):
                        updates.append(update)
                        if isinstance(update, crux.StreamDelta):
                            shown.set()
                    return updates

                caller = asyncio.ensure_future(follow())
                await asyncio.wait_for(shown.wait(), 60)
                pid = fleet.pid_of_peer(peers[0], server.port)
                assert pid is not None
                assert fleet.kill_pid(pid, "stream")
                killed_at = time.monotonic()
                updates = await asyncio.wait_for(caller, 150)
                figures["seconds_to_commit_after_kill"] = round(time.monotonic() - killed_at, 1)
            finally:
                fleet.stop()
        view = await ThreadStore(pool).read_history_view(thread_id)
    finally:
        await pool.close()
    figures["provider_calls"] = len(peers)
    figures["resets"] = sum(isinstance(u, crux.StreamReset) for u in updates)
    print("\nstream kill figures:", json.dumps(figures))

    committed = updates[-1]
    assert isinstance(committed, crux.StreamCommitted), figures
    assert committed.generation.text == RETRIED
    before, after = _around_last_reset(updates)
    # The text shown before the kill came from the first stream and is void.
    assert before and FIRST.startswith(before), figures
    assert after == RETRIED, figures
    assert figures["resets"] == 1, figures
    assert figures["provider_calls"] == 2, figures
    assert [m.id for m in view.messages] == ["gen:k1:user", "gen:k1:assistant"]


async def _ready(fleet: WorkerFleet) -> int:
    return fleet.ready()


def _around_last_reset(updates: list[crux.StreamUpdate]) -> tuple[str, str]:
    """The delta text before the last `StreamReset`, and after it."""
    before = after = ""
    for update in updates:
        if isinstance(update, crux.StreamReset):
            before, after = before + after, ""
        elif isinstance(update, crux.StreamDelta):
            after += update.text
    return before, after
