"""Managed generation on the embedded stack: latency and Temporal history bytes per turn.

Anchors measured in the same run:
- latency, two floors of three no-op activities, interleaved turn by turn with the turns:
  - the **plain-Worker floor**: the workflow on a plain `temporalio.worker.Worker` with SDK
    defaults (default converter, no plugin, no interceptors) on a task queue of its own,
    started by a plain client's `execute_workflow` (no eager start), on the same dev server:
    what any Temporal application pays for three activities. A plain turn is held to at most
    1.0x of it, as the median over `ROUNDS` rounds of the per-round p50 ratio (the turns are
    split into rounds in order, so that each round's ratio compares turns and floor runs
    taken side by side, and a burst of load from elsewhere moves one round, not the verdict);
  - the **Crux-worker floor**: the same workflow on Crux's own worker, started eagerly like
    a turn (what the same worker costs for three stages);
  - the server's dispatch time of a workflow task (scheduled -> started, from the runs'
    histories), for the floor and the turn: the floor pays it four times per run and it moves
    between runs on the same server (a few ms on a busy one, tens of ms on a quiet one), so
    this line says which server the run's floor ratio was measured on;
- the same work done directly, without Temporal (read the Thread path, call the offline
  provider, append the turn) -> the ratio is the price of durability;
- history bytes: the bytes of the transcript the turn's request covered, i.e. what a
  design that passes transcripts through workflow payloads would put in history at least
  once -> the ratio shows history staying flat while transcripts grow; measured along the
  conversation and, on a 128k-token model profile, on Threads of 10 to 10,000 messages
  seeded directly (`history_bytes.py`; `CRUX_BENCH_LENGTHS=0,10,100` picks the lengths).

The acceptance gate's cost, interleaved turn by turn with the plain turns on Threads of the
same length: an empty safety configuration (`safety=crux.safety()`, which must cost nothing
measurable: it schedules nothing; held to the plain turn's p50 within `UNMEASURABLE`, as the
median of the per-round ratios), and a typical input gate (length limit, PII masking, deny
list: one more local activity).

Run: `.venv/bin/python bench/bench_generation.py [turns]`
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid

from history_bytes import LENGTHS, measure_history_bytes, print_history_bytes
from temporalio.client import Client

import crux
from bench._figures import bench_database, compile_bytecode, p50, p99
from bench._noop import (
    NOOP_WORKFLOW,
    PLAIN_TASK_QUEUE_PREFIX,
    NoopThreeActivities,
    noop_activity,
    plain_client,
    plain_worker,
    run_plain_floor,
    workflow_task_waits,
)
from crux._worker import build_worker, worker_resources
from crux.runtime import Runtime
from crux.stack import start_temporal
from providers import ChatRequest, OfflineChatProvider
from storage import ThreadStore, create_pool, migrate
from vocabulary.ids import workflow_id_for
from vocabulary.messages import Message
from vocabulary.settings import Settings

ROUNDS = 5
"""Rounds the interleaved turns are split into; verdicts take the median of per-round ratios."""

UNMEASURABLE = 1.05
"""An unconfigured feature costs nothing measurable: its p50 within 5% of the plain turn's."""


def _round_ratios(numerator: list[float], denominator: list[float]) -> list[float]:
    """p50 ratio per round: both lists split, in order, into `ROUNDS` consecutive slices."""
    size = max(1, len(numerator) // ROUNDS)
    ratios: list[float] = []
    for start in range(0, size * ROUNDS, size):
        top, bottom = numerator[start : start + size], denominator[start : start + size]
        if top and bottom:
            ratios.append(statistics.median(top) / statistics.median(bottom))
    return ratios


async def closed(client: Client, generation_id: str, thread_id: str) -> None:
    """Wait, untimed, for a run to close: `generate` answers at the commit, a moment before.

    The next timed call then starts on a worker with nothing of the last run left to do.
    """
    await client.get_workflow_handle(workflow_id_for(generation_id, thread_id)).result()


def _verdict(ok: bool) -> str:
    return "met" if ok else "not met"


async def main(turns: int) -> None:
    compile_bytecode()
    database = await bench_database()
    url = database.url
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
    plain_floor: list[float] = []
    turn_task_waits: list[float] = []
    floor_task_waits: list[float] = []
    plain_queue = f"{PLAIN_TASK_QUEUE_PREFIX}-{uuid.uuid4().hex[:6]}"
    floor_client = plain_client(env.client)
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
        async with worker, plain_worker(floor_client, plain_queue):
            runtime = Runtime(env.client, pool, task_queue="bench")
            store = ThreadStore(pool)
            # Warm-up: the first workflow tasks and connections pay one-off costs.
            await runtime.generate("warm up", thread=f"{thread_id}-warm")
            await run_plain_floor(floor_client, plain_queue, -1)
            for turn in range(turns):
                question = f"Question number {turn}: what should I pack for day {turn}?"
                started = time.perf_counter()
                await runtime.generate(question, thread=thread_id, generation_id=f"b{turn}")
                durable.append(time.perf_counter() - started)
                await closed(env.client, f"b{turn}", thread_id)
                started = time.perf_counter()
                await runtime.generate(
                    question,
                    thread=f"{thread_id}-empty",
                    generation_id=f"e{turn}",
                    safety=crux.safety(),
                )
                empty_gate.append(time.perf_counter() - started)
                await closed(env.client, f"e{turn}", f"{thread_id}-empty")
                started = time.perf_counter()
                await runtime.generate(
                    question,
                    thread=f"{thread_id}-gate",
                    generation_id=f"g{turn}",
                    safety=typical_gate,
                )
                input_gate.append(time.perf_counter() - started)
                await closed(env.client, f"g{turn}", f"{thread_id}-gate")
                started = time.perf_counter()
                await env.client.execute_workflow(
                    NOOP_WORKFLOW,
                    turn,
                    id=f"bench-noop-{uuid.uuid4().hex[:8]}",
                    task_queue="bench",
                    request_eager_start=True,
                )
                noop.append(time.perf_counter() - started)
                started = time.perf_counter()
                floor_id = await run_plain_floor(floor_client, plain_queue, turn)
                plain_floor.append(time.perf_counter() - started)
                floor_task_waits.extend(
                    workflow_task_waits(
                        await floor_client.get_workflow_handle(floor_id).fetch_history()
                    )
                )
                view = await store.read_history_view(thread_id)
                covered = await store.load_messages(thread_id, [m.id for m in view.messages])
                transcript_bytes.append(sum(len(m.model_dump_json()) for m in covered))
                history = await env.client.get_workflow_handle(
                    workflow_id_for(f"b{turn}", thread_id)
                ).fetch_history()
                history_bytes.append(len(history.to_json()))
                turn_task_waits.extend(workflow_task_waits(history))

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
    database.stop()

    floor_ratios = _round_ratios(durable, plain_floor)
    floor_ratio = statistics.median(floor_ratios)
    empty_ratios = _round_ratios(empty_gate, durable)
    empty_ratio = statistics.median(empty_ratios)
    print(f"managed generation, offline provider, {turns} turns on one Thread")
    print("  latency                     p50 ms    p99 ms")
    rows = (
        ("plain turn", durable, "the managed workflow, Crux worker"),
        ("empty safety", empty_gate, "safety=crux.safety()"),
        ("input gate", input_gate, "length, PII, deny"),
        ("plain-Worker floor", plain_floor, "3 no-op activities, SDK-default Worker"),
        ("Crux-worker floor", noop, "3 no-op activities, Crux's worker, eager start"),
        ("direct", direct, "same work, no Temporal"),
    )
    for label, values, note in rows:
        print(f"  {label:<24} {p50(values):8.2f}  {p99(values):8.2f}  ({note})")
    print(
        f"  turn / plain-Worker floor {p50(durable) / p50(plain_floor):8.2f}x "
        f"{p99(durable) / p99(plain_floor):8.2f}x"
    )
    print(
        f"  turn / Crux-worker floor  {p50(durable) / p50(noop):8.2f}x "
        f"{p99(durable) / p99(noop):8.2f}x"
    )
    print(
        f"  turn / direct             {p50(durable) / p50(direct):8.2f}x "
        f"{p99(durable) / p99(direct):8.2f}x"
    )
    rounds = " ".join(f"{ratio:.2f}" for ratio in floor_ratios)
    print(
        f"  plain turn / plain-Worker floor, median of {len(floor_ratios)} interleaved rounds: "
        f"{floor_ratio:.2f}x (rounds {rounds}); target <= 1.0x: {_verdict(floor_ratio <= 1.0)}"
    )
    print(
        "  workflow task dispatch (scheduled -> started) p50: "
        f"plain-Worker floor {statistics.median(floor_task_waits):.1f} ms "
        f"({len(floor_task_waits) / max(1, len(plain_floor)):.0f} per run), "
        f"plain turn {statistics.median(turn_task_waits):.1f} ms "
        f"({len(turn_task_waits) / max(1, len(durable)):.0f} per run)"
    )
    rounds = " ".join(f"{ratio:.2f}" for ratio in empty_ratios)
    print(
        f"  empty safety / plain turn, median of {len(empty_ratios)} interleaved rounds: "
        f"{empty_ratio:.2f}x (rounds {rounds}); target <= {UNMEASURABLE:.2f}x (nothing "
        f"measurable): {_verdict(empty_ratio <= UNMEASURABLE)}"
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
