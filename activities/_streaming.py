"""Stream a provider call into PostgreSQL so followers see text as it arrives."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager

from temporalio import activity

from activities._inputs import scoped_key
from contracts.activities import InvokeModelInput
from providers import ChatRequest, ChatResponse, StreamDone, StreamingChatProvider, TextDelta
from storage import GenerationStore
from storage.generations import LOCAL_DELTA_FOLLOWERS
from vocabulary.errors import ProviderResponseError, StorageUnavailableError

STREAM_FLUSH_SECONDS = 0.05
"""Streamed text is written to PostgreSQL in batches at most this far apart."""

STREAM_HEARTBEAT_SECONDS = 5.0
"""Heartbeats during a stream, events or not, well inside the workflow's 30 s timeout."""


async def stream_to_staging(
    provider: StreamingChatProvider,
    chat_request: ChatRequest,
    request: InvokeModelInput,
    generations: GenerationStore,
    sources: Sequence[str] = (),
) -> ChatResponse:
    """Stream the call, staging deltas for followers; return the assembled reply.

    Keys are `<attempt>:<activity attempt>:<seq>`, so a follower sees a retried call as
    a new stream (and resets) instead of concatenating partial and retried output.
    """
    with LOCAL_DELTA_FOLLOWERS.staging(scoped_key(request)):
        async with heartbeating(STREAM_HEARTBEAT_SECONDS):
            return await _stream(provider, chat_request, request, generations, sources)


@asynccontextmanager
async def heartbeating(interval: float) -> AsyncGenerator[None]:
    """Heartbeat every `interval` seconds while the block runs.

    A stream can be silent far longer than the heartbeat timeout (a reasoning model before
    its first token, a long tool call streamed without text); the beat says the worker is
    alive, and the attempt timeout, not the heartbeat, bounds a provider that stalls.
    """

    async def beat() -> None:
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat()

    task = asyncio.ensure_future(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _stream(
    provider: StreamingChatProvider,
    chat_request: ChatRequest,
    request: InvokeModelInput,
    generations: GenerationStore,
    sources: Sequence[str],
) -> ChatResponse:
    run = activity.info().attempt
    sequence = 0
    pending: list[str] = []
    # The first text goes out at once: time to first delta is what a reader waits on most.
    flushed = float("-inf")
    # The first delta of the run is committed without waiting for the disk, and repeated by
    # the next one, which does wait (see `GenerationStore.stage_delta`).
    unconfirmed: list[tuple[str, str]] = []
    final: ChatResponse | None = None
    async for event in provider.stream(chat_request):
        if isinstance(event, TextDelta):
            pending.append(event.text)
        elif isinstance(event, StreamDone):
            final = event.response
        due = time.monotonic() - flushed >= STREAM_FLUSH_SECONDS
        if pending and (due or final is not None):
            key = f"{request.attempt:03d}:{run:03d}:{sequence:06d}"
            text = "".join(pending)
            fast = sequence == 0
            try:
                await generations.stage_delta(
                    scoped_key(request),
                    key,
                    text,
                    thread_id=request.thread_id,
                    source_message_ids=sources,
                    fast=fast,
                    unconfirmed=unconfirmed,
                )
            except Exception as error:
                # Deltas are progress only: a storage outage must not cost the answer being
                # paid for. The text stays pending and goes out with the next flush.
                if not isinstance(error, StorageUnavailableError):
                    raise
            else:
                sequence += 1
                pending = []
                unconfirmed = [(key, text)] if fast else []
                # A follower in this process was just handed the delta: let it run before
                # the rest of the reply (often already buffered) is read.
                await asyncio.sleep(0)
            flushed = time.monotonic()
            activity.heartbeat()
    if final is None:
        raise ProviderResponseError("stream", "the stream ended without a final response")
    return final
