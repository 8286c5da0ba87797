"""The response cache on the embedded stack: a hit's turn latency next to a miss's.

Every round runs, interleaved on the same worker and dev server:
- **no cache**: a turn without `cache=` (the anchor);
- **miss**: a new question with the cache on (lookup, provider call, commit, write);
- **exact hit**: the same question on another Thread of the namespace (lookup, commit);
- **semantic hit**: a reworded question (embedding, nearest-entry lookup, commit).

The rounds run twice. First with the offline provider (it answers in microseconds): the
figures show what the cache's own steps cost, and a hit can save nothing there. Then with
the loopback server speaking OpenAI chat completions, answering after `THINK_SECONDS` (the
streaming benchmark's think time, far below a real model's time to a whole reply): a miss
and an uncached turn wait for the model, a hit does not.

Target: a hit costs at most 0.3x a miss (`HIT_TARGET`, p50 against p50), read on the
loopback rounds; the offline rounds are printed beside them as the cache's own cost.

Run: `.venv/bin/python bench/bench_cache.py [rounds]`
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from string import ascii_lowercase

from asyncpg import Pool
from temporalio.client import Client

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._figures import bench_database, compile_bytecode, loopback_settings, p50, p99
from crux import cache
from crux._worker import build_worker, worker_resources
from crux.runtime import Runtime
from crux.stack import start_temporal
from providers.loopback import LoopbackOpenAIServer, RecordedRequest, TextReply
from storage import CacheStore, create_pool, migrate
from vocabulary.settings import Settings

OFFLINE_MODEL = "offline:echo"
LOOPBACK_MODEL = "openai:gpt-4o-mini"

THINK_SECONDS = 0.25
"""The loopback model's time to its reply (as the streaming benchmark's first byte)."""

HIT_TARGET = 0.3
"""A cache hit's p50 latency at most this fraction of a miss's."""

REPLY = "Pack layers, a light rain jacket, comfortable shoes and an umbrella."


@dataclass
class Rounds:
    """The timings of one pass of rounds."""

    timings: dict[str, list[float]] = field(
        default_factory=lambda: {"none": [], "miss": [], "exact": [], "semantic": []}
    )
    hits: dict[str, int] = field(default_factory=lambda: {"miss": 0, "exact": 0, "semantic": 0})
    """Turns the cache answered, per kind (a miss row counts 0 when its misses are real)."""
    methods: list[int] = field(default_factory=list[int])


async def main(rounds: int) -> None:
    compile_bytecode()
    database = await bench_database()
    url = database.url
    pool = await create_pool(url, max_size=8)
    async with pool.acquire() as connection:
        await migrate(connection)
    env = await start_temporal(ui=False)

    def respond(_request: RecordedRequest) -> TextReply:
        return TextReply(text=REPLY, delay_seconds=THINK_SECONDS)

    async with LoopbackOpenAIServer(responder=respond) as loopback:
        settings = loopback_settings(url, "bench-cache", loopback.base_url)
        offline = await _rounds(env.client, pool, settings, OFFLINE_MODEL, "offline", rounds)
        remote = await _rounds(env.client, pool, settings, LOOPBACK_MODEL, "loopback", rounds)

    await pool.close()
    await env.shutdown()
    database.stop()

    _report(offline, f"offline provider, {rounds} rounds (each turn on a new Thread)", None)
    _report(
        remote,
        f"loopback OpenAI server answering after {THINK_SECONDS * 1000:.0f} ms,"
        f" {rounds} rounds (each turn on a new Thread)",
        HIT_TARGET,
    )
    sys.stdout.flush()
    os._exit(0)


async def _rounds(
    client: Client, pool: Pool, settings: Settings, model: str, namespace: str, rounds: int
) -> Rounds:
    """Interleave uncached turns, misses, exact and semantic hits on one worker."""
    spec = cache(namespace=namespace, semantic=True, similarity_threshold=0.85)
    result = Rounds()
    timings, hits = result.timings, result.hits
    async with worker_resources(settings, pool=pool) as activities:
        worker = build_worker(client, task_queue="bench-cache", activities=activities)
        async with worker:
            runtime = Runtime(client, pool, task_queue="bench-cache", default_model=model)

            async def turn(kind: str, text: str, **options: object) -> None:
                thread = f"bench:{uuid.uuid4().hex[:8]}"
                started = time.perf_counter()
                done = await runtime.generate(text, thread=thread, model=model, **options)  # type: ignore[arg-type]
                timings[kind].append(time.perf_counter() - started)
                if kind in hits:
                    receipt = await runtime.receipt(done.steps[-1].request.id)
                    hits[kind] += receipt.cache is not None and receipt.cache.status == "hit"

            # Warm-up: the first workflow tasks and connections pay one-off costs.
            await turn("none", "warm up please")
            timings["none"].clear()
            chooser = random.Random(f"{namespace}-rounds")
            for _ in range(rounds):
                # Words drawn afresh every round, so that no round's question is similar
                # enough to an earlier one for a semantic hit: a miss is a real miss.
                words = " ".join(
                    "".join(chooser.choice(ascii_lowercase) for _ in range(7)) for _ in range(8)
                )
                question = f"What should I pack for {words} in spring?"
                reworded = f"What should I pack for {words} in the spring?"
                await turn("none", f"uncached {question}")
                await turn("miss", question, cache=spec)
                await turn("exact", question, cache=spec)
                await turn("semantic", reworded, cache=spec)
            result.methods = sorted(await CacheStore(pool).indexed_sizes())
    return result


def _report(rounds: Rounds, title: str, target: float | None) -> None:
    timings, hits = rounds.timings, rounds.hits
    anchor = p50(timings["none"])
    print(f"response cache, {title}")
    methods = rounds.methods
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
        if target is None:
            print(f"  {label} / miss p50: {ratio:.2f}x (the cache's own cost: no model time saved)")
        else:
            verdict = "met" if ratio <= target else "not met"
            print(f"  {label} / miss p50: {ratio:.2f}x; target <= {target}x: {verdict}")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
