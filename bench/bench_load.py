"""Under load: N Threads each with a turn in flight on one Crux worker, next to the no-op floor.

One process hosts, on one embedded stack (Temporal dev server, PostgreSQL):
- **Crux**: one `crux.Worker` (the production composition root: its pool, plugin and SDK
  option defaults as a deployment gets them) polling its task queue, and a `Runtime` with a
  pool of its own (the default size) starting the turns; each of N callers runs turns back to
  back on a Thread of its own, with the offline provider (so the figures are what Crux and
  Temporal cost, not a model);
- **the floor**: one plain `temporalio.worker.Worker` with SDK defaults serving a workflow of
  three no-op activities on a task queue of its own, and N callers running it back to back
  through a plain client's `execute_workflow`.

Both workers run in this process (in-process workers, sharing its interpreter as a worker
process shares it with its own callers) and neither side starts its runs eagerly (Crux's
`Runtime(eager_start=False)`, the floor's SDK default), as callers in another process would.

Each concurrency is measured in four sub-cells, Crux, floor, floor, Crux, so that a drift of
the machine's load weighs on both sides alike. In a sub-cell every caller runs
`ceil(TURNS / N)` turns back to back (a bounded duration whatever the latency: at 300 in
flight every turn is one of 300 started together); its throughput is the turns it ran over
its wall time, pooled per side, and its latencies are those of every turn. Besides turns per
second and p50/p99, the table shows this process's CPU time per turn (client, worker,
workflows and activities; the dev server and PostgreSQL are other processes): when one
interpreter serves everything, its CPU per turn bounds the throughput.

Target: at 100 in flight, Crux sustains at least 0.8x the floor's turns per second.

Run: `.venv/bin/python bench/bench_load.py [turns per sub-cell]`
(`CRUX_BENCH_CONCURRENCY=10,100` picks the concurrencies).
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from bench._figures import bench_database, compile_bytecode, p50, p99
from bench._noop import PLAIN_TASK_QUEUE_PREFIX, plain_client, plain_worker, run_plain_floor
from crux.runtime import Runtime
from crux.stack import start_temporal
from crux.workers import Worker
from storage import create_pool
from vocabulary.settings import Settings

CONCURRENCY = (10, 100, 300)
"""Turns in flight, each on a Thread of its own."""

TURNS = 150
"""Turns per sub-cell (at least one per caller): 2 sub-cells per side and concurrency."""

TARGET_AT = 100
TARGET_RATIO = 0.8

Turn = Callable[[int, int], Awaitable[object]]
"""One turn of caller `i`, its `k`-th."""


@dataclass
class Cell:
    """What one side measured at one concurrency (its sub-cells pooled)."""

    seconds: float = 0.0
    completed: int = 0
    failed: int = 0
    cpu_seconds: float = 0.0
    latencies: list[float] = field(default_factory=list[float])

    @property
    def rate(self) -> float:
        """Sustained turns per second."""
        return self.completed / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_turn(self) -> float:
        """This process's CPU time per completed turn (client, worker and workflows)."""
        return 1000 * self.cpu_seconds / max(1, self.completed)


def _ms(percentile: Callable[[list[float]], float], cell: Cell) -> float:
    """A percentile of the cell's latencies in ms (NaN when every turn failed)."""
    return percentile(cell.latencies) if len(cell.latencies) > 1 else math.nan


async def _sub_cell(cell: Cell, callers: int, turns: int, turn: Turn) -> None:
    per_caller = max(1, math.ceil(turns / callers))

    async def caller(index: int) -> None:
        for number in range(per_caller):
            begun = time.perf_counter()
            try:
                await turn(index, number)
            except Exception:  # counted and shown: one failure must not stop the cell
                cell.failed += 1
                continue
            cell.latencies.append(time.perf_counter() - begun)
            cell.completed += 1

    cpu = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(caller(index) for index in range(callers)))
    cell.seconds += time.perf_counter() - started
    cell.cpu_seconds += time.process_time() - cpu


async def main(turns: int) -> None:
    compile_bytecode()
    concurrency = (
        tuple(int(n) for n in os.environ.get("CRUX_BENCH_CONCURRENCY", "").split(",") if n)
        or CONCURRENCY
    )
    database = await bench_database()
    url = database.url
    env = await start_temporal(ui=False)
    task_queue = f"bench-load-{uuid.uuid4().hex[:6]}"
    settings = Settings.model_validate(
        {
            "database_url": url,
            "task_queue": task_queue,
            "log_level": "error",
            "migrate_on_start": True,
        }
    )
    floor_client = plain_client(env.client)
    floor_queue = f"{PLAIN_TASK_QUEUE_PREFIX}-{uuid.uuid4().hex[:6]}"
    # The facade's pool with the production default size, as `crux.connect` opens it.
    pool = await create_pool(url)
    results: dict[int, tuple[Cell, Cell]] = {}
    async with (
        Worker(settings=settings, client=env.client),
        plain_worker(floor_client, floor_queue),
    ):
        runtime = Runtime(env.client, pool, task_queue=task_queue, eager_start=False)
        # Warm-up: the first workflow tasks and connections pay one-off costs.
        await runtime.generate("warm up", thread=f"load:warm:{uuid.uuid4().hex[:6]}")
        await run_plain_floor(floor_client, floor_queue, -1)
        for callers in concurrency:
            run = uuid.uuid4().hex[:6]

            async def crux_turn(index: int, number: int, run: str = run) -> None:
                await runtime.generate(
                    f"Question {number}: what should I pack for day {number}?",
                    thread=f"load:{run}:{index}",
                )

            async def floor_turn(index: int, number: int) -> None:
                await run_plain_floor(floor_client, floor_queue, number)

            crux_cell, floor_cell = Cell(), Cell()
            for cell, turn in (
                (crux_cell, crux_turn),
                (floor_cell, floor_turn),
                (floor_cell, floor_turn),
                (crux_cell, crux_turn),
            ):
                await _sub_cell(cell, callers, turns, turn)
            results[callers] = (crux_cell, floor_cell)
            print(
                f"  [{callers} in flight: crux {crux_cell.rate:.1f}/s, "
                f"floor {floor_cell.rate:.1f}/s]",
                file=sys.stderr,
                flush=True,
            )

    await pool.close()
    await env.shutdown()
    database.stop()

    print(
        "under load, offline provider, one Crux worker and one plain Worker in this process; "
        f"sub-cells Crux, floor, floor, Crux of {turns} turns (at least one per caller)"
    )
    print(
        "  floor: 3 no-op activities on a plain temporalio Worker with SDK defaults; "
        "no eager start on either side"
    )
    print(
        "  in flight   side    turns/s    p50 ms    p99 ms   CPU ms/turn   failed   "
        "Crux/floor turns/s"
    )
    for callers, (crux_cell, floor_cell) in results.items():
        for label, cell in (("crux", crux_cell), ("floor", floor_cell)):
            ratio = f"{crux_cell.rate / floor_cell.rate:8.2f}x" if label == "crux" else ""
            print(
                f"  {callers:9d}   {label:<5} {cell.rate:9.1f} {_ms(p50, cell):9.1f} "
                f"{_ms(p99, cell):9.1f} {cell.cpu_ms_per_turn:13.2f} {cell.failed:8d}   "
                f"{ratio}"
            )
    ordered = sorted(results)
    print(f"  growth from {ordered[0]} in flight (turns/s and p99 as multiples of the first):")
    for label, side in (("crux", 0), ("floor", 1)):
        first = results[ordered[0]][side]
        steps = " -> ".join(
            f"{n}: {results[n][side].rate / first.rate:.2f}x turns/s, "
            f"{_ms(p99, results[n][side]) / _ms(p99, first):.1f}x p99"
            for n in ordered
        )
        print(f"    {label:<5} {steps}")
    if TARGET_AT in results:
        crux_cell, floor_cell = results[TARGET_AT]
        ratio = crux_cell.rate / floor_cell.rate
        verdict = "met" if ratio >= TARGET_RATIO else "not met"
        print(
            f"  Crux / floor turns per second at {TARGET_AT} in flight: {ratio:.2f}x; "
            f"target >= {TARGET_RATIO}x: {verdict}"
        )
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else TURNS))
