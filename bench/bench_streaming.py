"""Streaming: time to the first delta a caller sees vs the provider's own first byte.

A loopback server speaking the OpenAI chat-completions wire format answers every streamed
request after a fixed think time (its first byte), then sends the reply as many small SSE
events. Measured in the same run, interleaved call by call:
- anchor: the provider's first byte, a raw `httpx` streamed POST timed to its first body
  bytes (what any client could get at best);
- adapter: the first `TextDelta` of the project's OpenAI adapter without Temporal (wire
  decoding only);
- managed: the first `StreamDelta` of `Runtime.stream` on the embedded stack (workflow start,
  Thread read, planning, receipt, the invoke activity, staging in PostgreSQL, notification to
  the follower), and the time until the committed turn;
- Temporal's floor to the call: on the same worker, an eagerly started workflow that runs a
  local no-op activity and then an activity, timed to that activity's start (a turn reads its
  Thread in a local activity and calls the provider in the next activity): what Temporal
  alone costs before any provider call, and so the part of the overhead no storage or
  planning work of ours can remove;
- one durable PostgreSQL commit: raw asyncpg inserting one row into a scratch table on the
  bench database, after the same quiet spell (a durable turn commits the caller's input before
  its workflow starts, and its receipt before the call goes out).

Temporal's floor plus one durable commit is what a turn costs before its provider call with no
work of ours but committing the caller's input ahead of its workflow's start; the table prints
that sum beside the target.

The overhead of a durable stream is the managed first delta minus the first byte, paid once
per generation before any text shows; once text flows, deltas follow the provider's pace in
batches (see `STREAM_FLUSH_SECONDS`).

Run: `.venv/bin/python bench/bench_streaming.py [calls]`
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid

import asyncpg
import httpx
from temporalio.client import Client

import crux
from bench._figures import bench_database, loopback_settings, p50, p99
from bench._noop import (
    FIRST_CALL_STARTS,
    FIRST_CALL_WORKFLOW,
    FirstCallFloor,
    first_call_activity,
    noop_activity,
)
from crux._worker import build_worker, worker_resources
from crux.runtime import Runtime
from crux.stack import start_temporal
from providers import ChatRequest, OpenAIChatProvider, TextDelta
from providers.loopback import LoopbackOpenAIServer, RecordedRequest, TextReply
from storage import create_pool, migrate
from vocabulary.messages import Message

THINK_TIMES = (0.0, 0.25)
"""The provider's time to first byte, in seconds, for each table row."""

SETTLE_SECONDS = 0.05
"""Pause after each of a row's floor, commit and managed calls, beside the think-time spell."""

TARGET_MS = 20.0
"""The target: a stream's first text at most this much after the provider's first byte, p50."""

REPLY = " ".join(f"word{n}" for n in range(120))
MODEL = "gpt-4o-mini"


async def _first_byte(http: httpx.AsyncClient, base_url: str) -> float:
    """The anchor: seconds from sending a streamed request to its first body bytes."""
    body = {
        "model": MODEL,
        "stream": True,
        "messages": [{"role": "user", "content": "Say something long."}],
    }
    started = time.perf_counter()
    first: float | None = None
    async with http.stream("POST", f"{base_url}/chat/completions", json=body) as response:
        async for _ in response.aiter_raw():  # read to the end, so the connection is reused
            if first is None:
                first = time.perf_counter() - started
    assert first is not None
    return first


async def _adapter_first_delta(provider: OpenAIChatProvider) -> float:
    """Seconds to the adapter's first text delta, without Temporal or storage."""
    request = ChatRequest(
        model=MODEL,
        messages=[Message(id="u", role="user", content="Say something long.")],
        max_output_tokens=512,
        stream=True,
    )
    started = time.perf_counter()
    first: float | None = None
    async for event in provider.stream(request):
        if first is None and isinstance(event, TextDelta):
            first = time.perf_counter() - started
    assert first is not None
    return first


async def _floor_to_call(client: Client, task_queue: str, turn: int) -> float:
    """Seconds from an eager start of `FirstCallFloor` to its second activity's start."""
    workflow_id = f"stream-floor-{turn}-{uuid.uuid4().hex[:8]}"
    started = time.perf_counter()
    handle = await client.start_workflow(
        FIRST_CALL_WORKFLOW, 1, id=workflow_id, task_queue=task_queue, request_eager_start=True
    )
    await handle.result()
    return FIRST_CALL_STARTS.pop(workflow_id) - started


async def _durable_commit(connection: asyncpg.Connection, turn: int) -> float:
    """Seconds for one synchronous commit of a one-row insert (raw asyncpg)."""
    started = time.perf_counter()
    await connection.execute("INSERT INTO bench_commit_probe (turn) VALUES ($1)", turn)
    return time.perf_counter() - started


async def _managed_first_delta(runtime: Runtime, turn: int) -> tuple[float, float]:
    """Seconds to the first `StreamDelta` of a managed stream, and to its committed turn."""
    started = time.perf_counter()
    first: float | None = None
    async for update in runtime.stream(
        "Say something long.",
        thread=f"stream-bench:{uuid.uuid4().hex[:8]}",
        model=f"openai:{MODEL}",
        generation_id=f"s{turn}",
        max_output_tokens=512,
    ):
        if first is None and isinstance(update, crux.StreamDelta):
            first = time.perf_counter() - started
    assert first is not None
    return first, time.perf_counter() - started


async def main(calls: int) -> None:
    database = await bench_database()
    url = database.url
    pool = await create_pool(url, max_size=8)
    async with pool.acquire() as connection:
        await migrate(connection)
    probe = await asyncpg.connect(url)
    await probe.execute("CREATE TABLE IF NOT EXISTS bench_commit_probe (turn integer)")
    env = await start_temporal(ui=False)
    think = {"seconds": 0.0}

    def respond(_request: RecordedRequest) -> TextReply:
        return TextReply(text=REPLY, delay_seconds=think["seconds"], sse_chunk_size=48)

    rows: list[tuple[float, dict[str, list[float]]]] = []
    async with LoopbackOpenAIServer(responder=respond) as loopback:
        settings = loopback_settings(url, "bench-stream", loopback.base_url)
        async with (
            worker_resources(settings, pool=pool) as activities,
            httpx.AsyncClient(timeout=30) as http,
        ):
            provider = OpenAIChatProvider(http, base_url=loopback.base_url, api_key="sk-bench")
            worker = build_worker(
                env.client,
                task_queue="bench-stream",
                activities=activities,
                extra_workflows=[FirstCallFloor],
                extra_activities=[noop_activity, first_call_activity],
            )
            async with worker:
                runtime = Runtime(env.client, pool, task_queue="bench-stream")
                await _managed_first_delta(runtime, -1)  # warm the worker and the pools
                await _floor_to_call(env.client, "bench-stream", -1)
                turn = 0
                for seconds in THINK_TIMES:
                    think["seconds"] = seconds
                    figures: dict[str, list[float]] = {
                        "first_byte": [],
                        "adapter": [],
                        "floor": [],
                        "managed": [],
                        "committed": [],
                        "commit": [],
                    }
                    for _ in range(calls):
                        figures["first_byte"].append(await _first_byte(http, loopback.base_url))
                        figures["adapter"].append(await _adapter_first_delta(provider))
                        # The floor, the commit and the managed call take turns going first;
                        # each waits out the same quiet spell after the one before it (and
                        # its trailing work), so all three start equally cold.
                        order = ("floor", "commit", "managed")
                        for measured in reversed(order) if turn % 2 else order:
                            if measured == "commit":
                                figures["commit"].append(await _durable_commit(probe, turn))
                            elif measured == "managed":
                                first, committed = await _managed_first_delta(runtime, turn)
                                figures["managed"].append(first)
                                figures["committed"].append(committed)
                            else:
                                figures["floor"].append(
                                    await _floor_to_call(env.client, "bench-stream", turn)
                                )
                            await asyncio.sleep(2 * seconds + SETTLE_SECONDS)
                        turn += 1
                    rows.append((seconds, figures))

    await probe.close()
    await pool.close()
    await env.shutdown()
    database.stop()

    print(f"streaming, OpenAI wire format over loopback HTTP, {calls} calls per row")
    print("  time to first text, ms          p50       p99   (each row interleaved call by call)")
    for seconds, figures in rows:
        print(f"  provider think time {seconds * 1000:.0f} ms")
        print(
            f"    provider first byte    {p50(figures['first_byte']):8.2f}  "
            f"{p99(figures['first_byte']):8.2f}   (anchor: raw httpx)"
        )
        print(
            f"    adapter first delta    {p50(figures['adapter']):8.2f}  "
            f"{p99(figures['adapter']):8.2f}   (no Temporal, no storage)"
        )
        print(
            f"    managed first delta    {p50(figures['managed']):8.2f}  "
            f"{p99(figures['managed']):8.2f}   (Runtime.stream, durable)"
        )
        print(
            f"    managed committed      {p50(figures['committed']):8.2f}  "
            f"{p99(figures['committed']):8.2f}   (turn in PostgreSQL)"
        )
        overhead = [m - f for m, f in zip(figures["managed"], figures["first_byte"], strict=True)]
        print(
            f"    first delta - first byte {p50(overhead):6.2f}  {p99(overhead):8.2f}   "
            f"ratio managed/first byte {p50(figures['managed']) / p50(figures['first_byte']):.2f}x"
        )
        print(
            f"    Temporal floor to call {p50(figures['floor']):8.2f}  "
            f"{p99(figures['floor']):8.2f}   (eager start, local no-op, activity start)"
        )
        print(
            f"    overhead beyond floor  {p50(overhead) - p50(figures['floor']):8.2f}"
            f"             (first delta - first byte - floor, p50s)"
        )
        print(
            f"    one durable commit     {p50(figures['commit']):8.2f}  "
            f"{p99(figures['commit']):8.2f}   (anchor: raw asyncpg, same quiet spell)"
        )
        floor_and_commit = p50(figures["floor"]) + p50(figures["commit"])
        print(
            f"    floor + one commit     {floor_and_commit:8.2f}             "
            f"(input commits before the start; target {TARGET_MS:.0f}: "
            f"{'within' if floor_and_commit <= TARGET_MS else 'beyond'})"
        )
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
