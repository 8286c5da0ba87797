"""Managed generation on the embedded stack: latency and Temporal history bytes per turn.

Anchors measured in the same run:
- latency: a workflow of three no-op activities on the same worker and dev server, started
  the same way and interleaved turn by turn (what Temporal itself costs for three stages),
  and the same work done directly, without Temporal (read the Thread path, call the
  offline provider, append the turn) -> the ratio is the price of durability;
- history bytes: the bytes of the transcript the turn's request covered, i.e. what a
  design that passes transcripts through workflow payloads would put in history at least
  once -> the ratio shows history staying flat while transcripts grow; measured along the
  conversation and, on a 128k-token model profile, on Threads of 10 to 10,000 messages
  seeded directly (`history_bytes.py`; `CRUX_BENCH_LENGTHS=0,10,100` picks the lengths).

The acceptance gate's cost, interleaved turn by turn with the plain turns on Threads of the
same length: an empty safety configuration (`safety=crux.safety()`, which must cost nothing
measurable: it schedules nothing), and a typical input gate (length limit, PII masking, deny
list: one more local activity).

Run: `.venv/bin/python bench/bench_generation.py [turns]`
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

from history_bytes import LENGTHS, measure_history_bytes, print_history_bytes

import crux
from bench._figures import new_bench_database, p50, p99
from bench._noop import NOOP_WORKFLOW, NoopThreeActivities, noop_activity
from crux._worker import build_worker, worker_resources
from crux.runtime import Runtime
from crux.stack import start_postgres_sync, start_temporal
from providers import ChatRequest, OfflineChatProvider
from storage import ThreadStore, create_pool, migrate
from vocabulary.ids import workflow_id_for
from vocabulary.messages import Message
from vocabulary.settings import Settings


async def main(turns: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="crux-bench-"))
    server = None
    base_url = os.environ.get("CRUX_DATABASE_URL")
    if not base_url:
        server = start_postgres_sync(tmp / "pgdata")
        base_url = server.url
    url = await new_bench_database(base_url)
    pool = await create_pool(url, max_size=8)
    async with pool.acquire() as connection:
        await migrate(connection)
    env = await start_temporal(ui=False)
    settings = Settings.model_validate(
        {"database_url": url, "task_queue": "bench", "log_level": "error"}
    )
    thread_id = f"bench:{uuid.uuid4().hex[:6]}"
    durable: list[float] = []
    noop: list[float] = []
    empty_gate: list[float] = []
    input_gate: list[float] = []
    typical_gate = crux.safety(
        input=[
            crux.safety.max_length(chars=8_000),
            crux.safety.pii(),
            crux.safety.deny(["internal-only"]),
        ]
    )
    history_bytes: list[int] = []
    transcript_bytes: list[int] = []
    async with worker_resources(settings, pool=pool) as activities:
        worker = build_worker(
            env.client,
            task_queue="bench",
            activities=activities,
            extra_workflows=[NoopThreeActivities],
            extra_activities=[noop_activity],
        )
        async with worker:
            runtime = Runtime(env.client, pool, task_queue="bench")
            store = ThreadStore(pool)
            for turn in range(turns):
                question = f"Question number {turn}: what should I pack for day {turn}?"
                started = time.perf_counter()
                await runtime.generate(question, thread=thread_id, generation_id=f"b{turn}")
                durable.append(time.perf_counter() - started)
                started = time.perf_counter()
                await runtime.generate(
                    question,
                    thread=f"{thread_id}-empty",
                    generation_id=f"e{turn}",
                    safety=crux.safety(),
                )
                empty_gate.append(time.perf_counter() - started)
                started = time.perf_counter()
                await runtime.generate(
                    question,
                    thread=f"{thread_id}-gate",
                    generation_id=f"g{turn}",
                    safety=typical_gate,
                )
                input_gate.append(time.perf_counter() - started)
                started = time.perf_counter()
                await env.client.execute_workflow(
                    NOOP_WORKFLOW,
                    turn,
                    id=f"bench-noop-{uuid.uuid4().hex[:8]}",
                    task_queue="bench",
                    request_eager_start=True,
                )
                noop.append(time.perf_counter() - started)
                view = await store.read_history_view(thread_id)
                covered = await store.load_messages(thread_id, [m.id for m in view.messages])
                transcript_bytes.append(sum(len(m.model_dump_json()) for m in covered))
                history = await env.client.get_workflow_handle(
                    workflow_id_for(f"b{turn}", thread_id)
                ).fetch_history()
                history_bytes.append(len(history.to_json()))

    # Anchor: the same turn without Temporal, on another Thread of the same length.
    provider = OfflineChatProvider()
    store = ThreadStore(pool)
    anchor_thread = f"anchor:{uuid.uuid4().hex[:6]}"
    direct: list[float] = []
    for turn in range(turns):
        question = f"Question number {turn}: what should I pack for day {turn}?"
        started = time.perf_counter()
        view = await store.read_history_view(anchor_thread)
        history = await store.load_messages(anchor_thread, [m.id for m in view.messages])
        user = Message(id=f"a{turn}:u", role="user", content=question)
        reply = await provider.complete(
            ChatRequest(model="echo", messages=[*history, user], max_output_tokens=256)
        )
        answer = Message(id=f"a{turn}:a", role="assistant", content=reply.message.content)
        await store.append(anchor_thread, [user, answer])
        direct.append(time.perf_counter() - started)

    lengths = os.environ.get("CRUX_BENCH_LENGTHS")
    by_length = await measure_history_bytes(
        env.client,
        pool,
        settings,
        tuple(int(n) for n in lengths.split(",")) if lengths else LENGTHS,
    )

    await pool.close()
    await env.shutdown()
    if server is not None:
        server.stop()

    print(f"managed generation, offline provider, {turns} turns on one Thread")
    print("  latency            p50 ms    p99 ms")
    print(f"  plain turn       {p50(durable):8.2f}  {p99(durable):8.2f}  (the managed workflow)")
    print(
        f"  empty safety     {p50(empty_gate):8.2f}  {p99(empty_gate):8.2f}  (safety=crux.safety())"
    )
    print(f"  input gate       {p50(input_gate):8.2f}  {p99(input_gate):8.2f}  (length, PII, deny)")
    print(f"  no-op workflow   {p50(noop):8.2f}  {p99(noop):8.2f}  (3 no-op activities)")
    print(f"  direct           {p50(direct):8.2f}  {p99(direct):8.2f}  (same work, no Temporal)")
    print(f"  turn / no-op     {p50(durable) / p50(noop):8.2f}x {p99(durable) / p99(noop):8.2f}x")
    print(
        f"  turn / direct    {p50(durable) / p50(direct):8.2f}x {p99(durable) / p99(direct):8.2f}x"
    )
    print("  history bytes per generation vs transcript bytes covered:")
    for turn in sorted({0, turns // 4, turns // 2, turns - 1}):
        ratio = history_bytes[turn] / max(1, transcript_bytes[turn])
        print(
            f"    turn {turn + 1:4d}: history {history_bytes[turn]:7d} B, "
            f"transcript {transcript_bytes[turn]:8d} B, ratio {ratio:6.2f}"
        )
    growth = (history_bytes[-1] - history_bytes[0]) / max(1, turns - 1)
    print(f"  history growth   : {growth:8.1f} B per extra turn in the Thread")
    print_history_bytes(by_length)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 60))
