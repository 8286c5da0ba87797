"""Thread store throughput and path-read latency, against raw asyncpg on the same rows.

Starts an embedded PostgreSQL (or uses CRUX_DATABASE_URL), creates a scratch database,
migrates it and prints one table:

- group appends per second (2-message groups, 16 concurrent writers over 100 Threads) vs raw
  asyncpg inserting the same message rows in one transaction per group (median of three
  alternating rounds);
- p50/p99 of reading a 1,000-message path (`read()` and `read_history_view()`) vs a raw
  indexed SELECT of the same 1,000 rows, sampled round-robin in the same run so that load
  from other processes weighs on the anchor and the reads alike; once with the default
  collector and once with the start-up heap frozen, as the worker runs (`gc.freeze()`).

Targets: >= 1,500 appends/s, >= 1/4 of raw-insert throughput; path reads p50 at most 2x and
p99 at most 3x the raw select.
"""

from __future__ import annotations

import asyncio
import gc
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
     role, body, identity, created_at, chain_id)
SELECT $1, u.id, u.parent, $2, u.seq - 1, u.seq = 2, u.seq - 1, 1, u.role, u.body::jsonb,
       u.identity, now(), $2
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


async def _interleaved(
    calls: dict[str, Callable[[], Awaitable[object]]],
) -> dict[str, tuple[float, float]]:
    """p50/p99 ms of each call, sampled round-robin so machine load hits all of them alike."""
    # Warm every pooled connection: statements are prepared once per connection.
    for _ in range(3 * (WRITERS + 4)):
        for call in calls.values():
            await call()
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(READS):
        for name, call in calls.items():
            started = time.perf_counter()
            await call()
            samples[name].append((time.perf_counter() - started) * 1000)
    found: dict[str, tuple[float, float]] = {}
    for name, values in samples.items():
        values.sort()
        found[name] = (
            statistics.median(values),
            values[min(len(values) - 1, int(len(values) * 0.99))],
        )
    return found


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

    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "raw": raw,
        "read": read,
        "view": view,
        "page": page,
    }
    unfrozen = await _interleaved(calls)
    # The worker freezes everything it built at start-up (crux/_worker.py), so full
    # collections there skip the long-lived heap; measure the reads in that shape too.
    gc.collect()
    gc.freeze()
    try:
        frozen = await _interleaved(calls)
    finally:
        gc.unfreeze()
    return {
        **{f"{name} default gc": value for name, value in unfrozen.items()},
        **frozen,
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

    print(f"{'measure':<48} {'crux':>10} {'raw asyncpg':>12} {'ratio':>7}")
    label = "group appends/s (16 writers, 100 threads)"
    print(f"{label:<48} {ours:>10.0f} {raw:>12.0f} {ours / raw:>7.2f}")
    reads_ok = True
    for heap, suffix in (("frozen heap", ""), ("default gc", " default gc")):
        raw_p50, raw_p99 = reads["raw" + suffix]
        for name, label in (("read", "read()"), ("view", "read_history_view()")):
            p50, p99 = reads[name + suffix]
            label = f"{label} 1,000 msgs, {heap}"
            print(f"{label + ' p50 ms':<48} {p50:>10.2f} {raw_p50:>12.2f} {p50 / raw_p50:>7.2f}")
            print(f"{label + ' p99 ms':<48} {p99:>10.2f} {raw_p99:>12.2f} {p99 / raw_p99:>7.2f}")
            if not suffix:
                reads_ok = reads_ok and p50 <= 2 * raw_p50 and p99 <= 3 * raw_p99
    p50, p99 = reads["page"]
    print(f"{'read(limit=20) on the same path p50 / p99 ms':<48} {p50:>10.2f} {p99:>12.2f}")
    ok = ours >= 1_500 and ours >= raw / 4
    print("append targets (>= 1,500/s, >= 1/4 raw):", "met" if ok else "MISSED")
    print(
        "read targets, frozen heap (p50 <= 2x raw, p99 <= 3x raw):", "met" if reads_ok else "MISSED"
    )
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
