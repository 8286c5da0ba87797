"""Thread store throughput and path-read latency, against raw asyncpg on the same rows.

Starts an embedded PostgreSQL (or uses CRUX_DATABASE_URL), creates a scratch database,
migrates it and prints one table:

- group appends per second (2-message groups, 16 concurrent writers over 100 Threads) vs raw
  asyncpg inserting the same message rows in one transaction per group (median of three
  alternating rounds);
- p50/p99 of reading a 1,000-message path (`read()` and `read_history_view()`) vs a raw
  indexed SELECT of the same 1,000 rows.

Targets: >= 1,500 appends/s, >= 1/4 of raw-insert throughput, 1,000-message read < 10 ms p50.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from crux.stack import start_postgres_sync
from storage import ThreadStore, create_pool, migrate
from vocabulary.messages import Message

WRITERS = 16
THREADS = 100
APPENDS_PER_WRITER = int(os.environ.get("CRUX_BENCH_APPENDS", "400"))
PATH_MESSAGES = 1_000
READS = int(os.environ.get("CRUX_BENCH_READS", "200"))
ROUNDS = 3

_RAW_TABLE = """
CREATE TABLE bench_raw_messages (LIKE crux_thread_messages INCLUDING ALL)
"""
_RAW_INSERT = """
INSERT INTO bench_raw_messages
    (thread_id, message_id, parent_id, group_id, seq, group_end, depth, published_version,
     role, body, identity, created_at)
SELECT $1, u.id, u.parent, $2, u.seq - 1, u.seq = 2, u.seq - 1, 1, u.role, u.body::jsonb,
       u.identity, now()
FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
     WITH ORDINALITY AS u(id, parent, role, body, identity, seq)
"""
_RAW_SELECT = """
SELECT message_id, parent_id, group_id, seq, group_end, state, role, body::text, created_at
FROM bench_raw_messages WHERE thread_id = $1 ORDER BY depth
"""


def _with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment))


def _turn(prefix: str) -> list[Message]:
    return [
        Message(id=f"{prefix}-u", role="user", content=f"question {prefix} " + "x" * 200),
        Message(id=f"{prefix}-a", role="assistant", content=f"answer {prefix} " + "y" * 400),
    ]


async def _timed_concurrently(work: Callable[[int], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await asyncio.gather(*(work(writer) for writer in range(WRITERS)))
    return time.perf_counter() - started


async def _bench_appends(store: ThreadStore, pool: asyncpg.Pool) -> tuple[float, float]:
    """Median throughput over alternating rounds of raw inserts and Thread appends."""

    async def ours(writer: int, round_: int) -> None:
        for index in range(APPENDS_PER_WRITER):
            thread_id = f"bench-{(writer + index * WRITERS) % THREADS}"
            await store.append(thread_id, _turn(f"r{round_}-w{writer}-{index}"))

    async def raw(writer: int, round_: int) -> None:
        for index in range(APPENDS_PER_WRITER):
            thread_id = f"bench-{(writer + index * WRITERS) % THREADS}"
            prefix = f"r{round_}-w{writer}-{index}"
            messages = _turn(prefix)
            async with pool.acquire() as connection, connection.transaction():
                await connection.execute(
                    _RAW_INSERT,
                    thread_id,
                    f"{prefix}-u",
                    [f"{prefix}-u", f"{prefix}-a"],
                    [None, f"{prefix}-u"],
                    [m.role for m in messages],
                    [m.model_dump_json(exclude={"id"}) for m in messages],
                    ["0" * 64, "0" * 64],
                )

    total = WRITERS * APPENDS_PER_WRITER
    ours_rates: list[float] = []
    raw_rates: list[float] = []
    for round_ in range(ROUNDS):
        raw_rates.append(total / await _timed_concurrently(partial(raw, round_=round_)))
        ours_rates.append(total / await _timed_concurrently(partial(ours, round_=round_)))
    return statistics.median(ours_rates), statistics.median(raw_rates)


async def _latencies(call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    # Warm every pooled connection: statements are prepared once per connection.
    for _ in range(3 * (WRITERS + 4)):
        await call()
    samples: list[float] = []
    for _ in range(READS):
        started = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(len(samples) * 0.99))]


async def _bench_reads(store: ThreadStore, pool: asyncpg.Pool) -> dict[str, tuple[float, float]]:
    thread_id = "bench-long"
    for index in range(PATH_MESSAGES // 2):
        await store.append(thread_id, _turn(f"long-{index}"))
    rows = await pool.fetch(
        "SELECT message_id, parent_id, depth FROM crux_thread_messages WHERE thread_id = $1",
        thread_id,
    )
    # The same 1,000 rows, copied into the raw table for the anchor read.
    await pool.execute(
        "INSERT INTO bench_raw_messages SELECT * FROM crux_thread_messages WHERE thread_id = $1",
        thread_id,
    )
    assert len(rows) == PATH_MESSAGES
    await pool.execute("ANALYZE")

    async def raw() -> None:
        assert len(await pool.fetch(_RAW_SELECT, thread_id)) == PATH_MESSAGES

    async def read() -> None:
        assert len((await store.read(thread_id)).entries) == PATH_MESSAGES

    async def view() -> None:
        assert len((await store.read_history_view(thread_id)).messages) == PATH_MESSAGES

    async def page() -> None:
        assert len((await store.read(thread_id, limit=20)).entries) == 20

    return {
        "raw": await _latencies(raw),
        "read": await _latencies(read),
        "view": await _latencies(view),
        "page": await _latencies(page),
    }


async def _run(url: str) -> int:
    database = f"crux_bench_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(url)
    await admin.execute(f'CREATE DATABASE "{database}"')
    await admin.close()
    target = _with_database(url, database)
    try:
        connection = await asyncpg.connect(target)
        await migrate(connection)
        await connection.execute(_RAW_TABLE)
        await connection.close()
        pool = await create_pool(target, min_size=WRITERS, max_size=WRITERS + 4)
        try:
            store = ThreadStore(pool)
            ours, raw = await _bench_appends(store, pool)
            reads = await _bench_reads(store, pool)
        finally:
            await pool.close()
    finally:
        admin = await asyncpg.connect(url)
        await admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        await admin.close()

    raw_p50, raw_p99 = reads["raw"]
    print(f"{'measure':<44} {'crux':>10} {'raw asyncpg':>12} {'ratio':>7}")
    label = "group appends/s (16 writers, 100 threads)"
    print(f"{label:<44} {ours:>10.0f} {raw:>12.0f} {ours / raw:>7.2f}")
    for name, label in (("read", "read() 1,000 msgs"), ("view", "read_history_view() 1,000 msgs")):
        p50, p99 = reads[name]
        print(f"{label + ' p50 ms':<44} {p50:>10.2f} {raw_p50:>12.2f} {p50 / raw_p50:>7.2f}")
        print(f"{label + ' p99 ms':<44} {p99:>10.2f} {raw_p99:>12.2f} {p99 / raw_p99:>7.2f}")
    p50, p99 = reads["page"]
    print(f"{'read(limit=20) on the same path p50 / p99 ms':<44} {p50:>10.2f} {p99:>12.2f}")
    ok = ours >= 1_500 and ours >= raw / 4 and reads["read"][0] < 10
    print("targets (>= 1,500/s, >= 1/4 raw, read p50 < 10 ms):", "met" if ok else "MISSED")
    return 0


def main() -> int:
    url = os.environ.get("CRUX_DATABASE_URL")
    if url:
        return asyncio.run(_run(url))
    data_dir = Path(tempfile.mkdtemp(prefix="crux-bench-pg-"))
    server = start_postgres_sync(data_dir / "pgdata")
    try:
        return asyncio.run(_run(server.url))
    finally:
        server.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
