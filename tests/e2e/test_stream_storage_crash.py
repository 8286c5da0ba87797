"""A stream whose PostgreSQL crashes right after its first delta still adds up to its turn.

A stream's first delta is committed without waiting for the disk (it is what a reader waits
on), so a crash just after it can take it away; the next delta stages it again. Readers:
the caller's `Runtime.stream` in the worker's process (handed each delta as it commits), a
reader in the manner of another process, which only polls the staged rows, and one more of
that kind started after the restart, which reads from the first delta. PostgreSQL is
SIGKILLed (postmaster and every backend) the moment the first delta is visible, restarted
(crash recovery runs), and the reply then streams on. Afterwards: the caller's deltas add up
to the committed text, each polling reader's text is a prefix of it (a lost first delta would
leave a gap in the late reader's), and the turn was committed once, paid once.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import asyncpg
import pytest
from temporalio.client import Client

import crux
from crux.stack import EmbeddedPostgres
from providers.loopback import LoopbackOpenAIServer, TextReply
from storage import GenerationStore, create_pool
from tests.helpers import eventually, new_worker, settings_for
from tests.pg_faults import (
    crash_postgres,
    crash_recoveries,
    new_database,
    own_postgres,
    restart_postgres,
)
from vocabulary.errors import StorageUnavailableError
from vocabulary.ids import generation_key

pytestmark = pytest.mark.durability

MODEL = "openai:gpt-4o-mini"
REPLY = " ".join(f"hill{n}" for n in range(60))


@pytest.fixture
def crash_postgres_server() -> Iterator[EmbeddedPostgres]:
    """A PostgreSQL server of this test alone, so crashing it disturbs no other test."""
    with own_postgres("crux-stream-crash-pg-", recover=restart_postgres) as server:
        yield server


async def _poll_deltas(
    generations: GenerationStore, key: str, done: asyncio.Event
) -> list[tuple[str, str]]:
    """Read staged deltas the way a follower in another process does, through the outage."""
    seen: list[tuple[str, str]] = []
    last = ""
    while not done.is_set():
        try:
            rows = await generations.deltas_after(key, last)
        except StorageUnavailableError:
            rows = []
        for delta_key, text in rows:
            seen.append((delta_key, text))
            last = delta_key
        await asyncio.sleep(0.02)
    return seen


@pytest.mark.timeout(180)
async def test_a_crash_after_the_first_delta_leaves_no_gap_in_the_streamed_text(
    client: Client, crash_postgres_server: EmbeddedPostgres
) -> None:
    server = crash_postgres_server
    _, url = await new_database(server)
    pool = await create_pool(url, min_size=1, max_size=8)
    reader_pool = await create_pool(url, min_size=1, max_size=2)
    figures: dict[str, object] = {}
    try:
        async with LoopbackOpenAIServer() as provider:
            # A piece of the reply a second: the first delta goes out alone, the rest after the
            # server is back.
            provider.enqueue(TextReply(text=REPLY, sse_chunk_size=1500, sse_piece_delay_seconds=1))
            settings = settings_for(url, openai_base_url=provider.base_url)
            async with new_worker(client, pool, settings) as worker:
                thread_id = f"stream-crash:{uuid.uuid4().hex[:6]}"
                key = generation_key("c1", thread_id)
                done = asyncio.Event()
                reader = asyncio.ensure_future(
                    _poll_deltas(GenerationStore(reader_pool), key, done)
                )

                async def follow() -> list[crux.StreamUpdate]:
                    return [
                        update
                        async for update in worker.runtime.stream(
                            "Tell me about Lisbon",
                            thread=thread_id,
                            model=MODEL,
                            generation_id="c1",
                        )
                    ]

                caller = asyncio.ensure_future(follow())
                await eventually(
                    lambda: reader_pool.fetchval(
                        "SELECT count(*) FROM crux_generation_staging"
                        " WHERE generation_id = $1 AND kind LIKE 'delta:%'",
                        key,
                    ),
                    lambda n: n >= 1,
                    timeout=60,
                )
                recoveries = crash_recoveries(server)
                figures["processes_killed"] = await asyncio.to_thread(crash_postgres, server)
                await asyncio.to_thread(restart_postgres, server)
                figures["crash_recovery"] = crash_recoveries(server) - recoveries
                admin = await asyncpg.connect(url)
                try:
                    # Whether the crash took the first delta before its log reached the disk.
                    figures["first_delta_after_restart"] = await admin.fetchval(
                        "SELECT count(*) FROM crux_generation_staging"
                        " WHERE generation_id = $1 AND kind LIKE 'delta:%'",
                        key,
                    )
                finally:
                    await admin.close()
                # A follower that starts now (a caller reconnecting, say) reads every staged
                # delta from the first: without the first one, its text would have a gap.
                late = asyncio.ensure_future(_poll_deltas(GenerationStore(reader_pool), key, done))
                updates = await asyncio.wait_for(caller, 120)
                done.set()
                polled = await reader
                late_polled = await late
    finally:
        await reader_pool.close()
        await pool.close()
    figures["provider_calls"] = len(provider.requests)
    figures["resets"] = sum(isinstance(u, crux.StreamReset) for u in updates)
    print("\nstream crash figures:", json.dumps(figures))

    assert figures["crash_recovery"] == 1, figures
    committed = updates[-1]
    assert isinstance(committed, crux.StreamCommitted), figures
    text = committed.generation.text
    assert text == REPLY
    # The caller's deltas after its last reset add up to the committed turn.
    streamed = ""
    for update in updates:
        if isinstance(update, crux.StreamReset):
            streamed = ""
        elif isinstance(update, crux.StreamDelta):
            streamed += update.text
    assert streamed == text, figures
    # The readers that only see staged rows have no gap: what each read of each stream (an
    # activity retry starts a new one) is a prefix of the text.
    for rows in (polled, late_polled):
        assert rows, figures
        by_stream: dict[str, str] = {}
        for delta_key, piece in rows:
            stream_id = delta_key.rpartition(":")[0]
            by_stream[stream_id] = by_stream.get(stream_id, "") + piece
        assert all(text.startswith(read) for read in by_stream.values()), (figures, by_stream)
    # Paid once: the stream went on through the outage.
    assert figures["provider_calls"] == 1, figures
