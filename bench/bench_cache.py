"""The response cache on the embedded stack: a hit's turn latency next to a miss's.

Every round runs, interleaved on the same worker and dev server:
- **no cache**: a turn without `cache=` (the anchor);
- **miss**: a new question with the cache on (lookup, provider call, commit, write);
- **exact hit**: the same question on another Thread of the namespace (lookup, commit);
- **semantic hit**: a reworded question (embedding, nearest-entry lookup, commit).

The provider is the offline one (it answers in microseconds), so the figures show what the
cache's steps cost and save besides the provider: with a real model, every miss and every
uncached turn also waits for the model, and a hit does not.

Target: a hit costs at most 0.3x a miss (`HIT_TARGET`, p50 against p50). With the offline
provider a miss saves nothing by skipping the model, so this is the harshest reading of it.

Run: `.venv/bin/python bench/bench_cache.py [rounds]`
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._figures import bench_database, compile_bytecode, p50, p99
from crux import cache
from crux._worker import build_worker, worker_resources
from crux.runtime import Runtime
from crux.stack import start_temporal
from storage import CacheStore, create_pool, migrate
from vocabulary.settings import Settings

MODEL = "offline:echo"

HIT_TARGET = 0.3
"""A cache hit's p50 latency at most this fraction of a miss's."""


async def main(rounds: int) -> None:
    compile_bytecode()
    database = await bench_database()
    url = database.url
    pool = await create_pool(url, max_size=8)
    async with pool.acquire() as connection:
        await migrate(connection)
    env = await start_temporal(ui=False)
    settings = Settings.model_validate(
        {"database_url": url, "task_queue": "bench-cache", "log_level": "error"}
    )
    spec = cache(namespace="bench", semantic=True, similarity_threshold=0.85)
    timings: dict[str, list[float]] = {"none": [], "miss": [], "exact": [], "semantic": []}
    hits = {"exact": 0, "semantic": 0}
    async with worker_resources(settings, pool=pool) as activities:
        worker = build_worker(env.client, task_queue="bench-cache", activities=activities)
        async with worker:
            runtime = Runtime(env.client, pool, task_queue="bench-cache", default_model=MODEL)

            async def turn(kind: str, text: str, **options: object) -> None:
                thread = f"bench:{uuid.uuid4().hex[:8]}"
                started = time.perf_counter()
                result = await runtime.generate(text, thread=thread, model=MODEL, **options)  # type: ignore[arg-type]
                timings[kind].append(time.perf_counter() - started)
                if kind in hits:
                    receipt = await runtime.receipt(result.steps[-1].request.id)
                    hits[kind] += receipt.cache is not None and receipt.cache.status == "hit"

            # Warm-up: the first workflow tasks and connections pay one-off costs.
            await turn("none", "warm up please")
            timings["none"].clear()
            for number in range(rounds):
                question = f"What should I pack for a trip to city number {number} in spring?"
                reworded = f"What should I pack for a trip to city number {number} in the spring?"
                await turn("none", f"uncached {question}")
                await turn("miss", question, cache=spec)
                await turn("exact", question, cache=spec)
                await turn("semantic", reworded, cache=spec)
            methods = sorted(await CacheStore(pool).indexed_sizes())

    await pool.close()
    await env.shutdown()
    database.stop()

    anchor = p50(timings["none"])
    print(f"response cache, offline provider, {rounds} rounds (each turn on a new Thread)")
    print(f"  semantic lookups by: {'HNSW ' + str(methods) if methods else 'bounded scan'}")
    print("  turn               p50 ms    p99 ms   p50 / no cache   hits")
    for kind, label in (
        ("none", "no cache"),
        ("miss", "miss"),
        ("exact", "exact hit"),
        ("semantic", "semantic hit"),
    ):
        values = timings[kind]
        counted = f"{hits[kind]}/{len(values)}" if kind in hits else "-"
        print(
            f"  {label:<14} {p50(values):9.2f} {p99(values):9.2f} {p50(values) / anchor:12.2f}x"
            f"   {counted}"
        )
    miss = p50(timings["miss"])
    for kind, label in (("exact", "exact hit"), ("semantic", "semantic hit")):
        ratio = p50(timings[kind]) / miss
        verdict = "met" if ratio <= HIT_TARGET else "not met"
        print(
            f"  {label} / miss p50: {ratio:.2f}x; target <= {HIT_TARGET}x: {verdict}"
            " (offline provider: the miss's model call costs microseconds)"
        )
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
