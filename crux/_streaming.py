"""Following a streamed generation: staged deltas, woken by PostgreSQL notifications.

Deltas this process staged itself (its own worker runs the attempt) are handed over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Callable
from typing import Any

import asyncpg

from crux._outcomes import StreamDelta, StreamReset
from storage import GenerationStore
from storage.generations import LOCAL_DELTA_FOLLOWERS, STREAM_CHANNEL
from vocabulary.errors import StorageUnavailableError

STREAM_POLL_SECONDS = 0.25
"""Followers re-check staged deltas at least this often, notifications or not."""


async def follow_deltas(
    pool: asyncpg.Pool,
    generations: GenerationStore,
    key: str,
    outcome: asyncio.Future[Any],
) -> AsyncGenerator[StreamDelta | StreamReset]:
    """Yield the staged deltas of generation `key` as they arrive, until `outcome` is done.

    A `StreamReset` is yielded when a new provider attempt starts streaming. The deltas
    staged before `outcome` completed are read once more after it; those the commit
    removed first are completed from the committed text (`missing_tail`). When the run
    failed after text was yielded (terminal safety refused the reply, say, and withdrew its
    deltas from staging), a last `StreamReset(withdrawn=True)` tells the caller that text
    is void before the error is raised.

    PostgreSQL going away while the run goes on does not end the stream: the follower reads
    again at its next poll, listens again once the server is back, and completes from the
    committed text whatever it could not read.

    Args:
        pool: The pool a listening connection is borrowed from.
        generations: Where the deltas are staged.
        key: The generation's storage key (the notification payload).
        outcome: The run's result (not awaited here; cancelled if still pending on exit).
    """
    loop = asyncio.get_running_loop()
    # Deltas staged in this process (its own worker runs the attempt), handed over as soon
    # as their rows commit: no notification delivery and no catch-up read before they show.
    handed: list[tuple[str, str]] = []
    # Set by whatever should end a wait (a delta, a notification, the outcome, the poll
    # timer), and cleared before each read, never after it: what arrives while the caller
    # handles the deltas read here must still cut the next wait short.
    woken = False
    waiter: asyncio.Future[None] | None = None

    def wake() -> None:
        nonlocal woken
        woken = True
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def on_notify(_connection: object, _pid: int, _channel: str, payload: object) -> None:
        # A delta this process stages is handed over as its row commits: reading it again
        # on its notification would only hold the hand-over up behind a round trip.
        if payload == key and not LOCAL_DELTA_FOLLOWERS.stages_here(key):
            wake()

    def on_local(delta_key: str, text: str) -> None:
        handed.append((delta_key, text))
        wake()

    # Subscribed before the first read: a delta committed earlier is found by that read,
    # every later one is handed over, so none is missed between the two.
    def hand_over(delta_key: str, text: str) -> None:
        if _running_loop() is loop:
            on_local(delta_key, text)
        else:
            loop.call_soon_threadsafe(on_local, delta_key, text)

    unsubscribe = LOCAL_DELTA_FOLLOWERS.subscribe(key, hand_over)
    outcome.add_done_callback(lambda _: wake())
    listening: asyncpg.Connection | None = await _listen(pool, on_notify)
    try:
        last = ""
        current: str | None = None
        while True:
            woken = False
            finished = outcome.done()
            if handed and not finished:
                # Committed rows, in staging order; those a read already returned are skipped.
                rows = sorted(row for row in handed if row[0] > last)
                handed.clear()
            else:
                handed.clear()
                try:
                    rows = await generations.deltas_after(key, last)
                except StorageUnavailableError:
                    # Deltas are progress: the next poll reads again, and a finished run's
                    # committed text completes what could not be read.
                    rows = []
                else:
                    if listening is None or _closed(listening):
                        # The server came back: notifications wake this follower again.
                        if listening is not None:
                            await _stop_listening(pool, listening, on_notify)
                        listening = None
                        with contextlib.suppress(Exception):
                            listening = await _listen(pool, on_notify)
            for delta_key, text in rows:
                stream_id, _, _ = delta_key.rpartition(":")
                if current is not None and stream_id != current:
                    yield StreamReset(attempt=int(stream_id.split(":")[0]))
                current, last = stream_id, delta_key
                yield StreamDelta(text=text, key=delta_key)
            if finished:
                if current is not None and _failed(outcome):
                    yield StreamReset(attempt=int(current.split(":")[0]), withdrawn=True)
                return
            if not woken:
                waiter = loop.create_future()
                timer = loop.call_later(STREAM_POLL_SECONDS, wake)
                try:
                    await waiter
                finally:
                    timer.cancel()
                    waiter = None
    finally:
        unsubscribe()
        if not outcome.done():
            outcome.cancel()
        if listening is not None:
            await _stop_listening(pool, listening, on_notify)


_Notified = Callable[[Any, int, str, object], None]


async def _listen(pool: asyncpg.Pool, on_notify: _Notified) -> asyncpg.Connection:
    """A pool connection listening on the stream channel (held until `_stop_listening`)."""
    connection: Any = await pool.acquire()
    try:
        await connection.add_listener(STREAM_CHANNEL, on_notify)
    except BaseException:
        await pool.release(connection)
        raise
    return connection


async def _stop_listening(pool: asyncpg.Pool, connection: Any, on_notify: _Notified) -> None:
    """Stop listening and give the connection back, even one the server dropped."""
    with contextlib.suppress(Exception):
        if not _closed(connection):
            await connection.remove_listener(STREAM_CHANNEL, on_notify)
    with contextlib.suppress(Exception):
        await pool.release(connection)


def _closed(connection: Any) -> bool:
    """Whether a pool connection is gone (the pool detaches one the server dropped)."""
    try:
        return bool(connection.is_closed())
    except asyncpg.InterfaceError:
        return True


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _failed(outcome: asyncio.Future[Any]) -> bool:
    """Whether the run ended with an error (not cancelled by the caller)."""
    return not outcome.cancelled() and outcome.exception() is not None


def missing_tail(streamed: str, final: str) -> str:
    """What the follower did not deliver of the accepted text, given what it delivered.

    The whole text when nothing arrived (the commit removed every delta before the first
    read, or the reply was not streamed: a cache hit), so that a successful stream's deltas
    always add up to the committed text. Empty when everything arrived, or when the streamed
    text is not a prefix of the final text (an attempt that was replaced).
    """
    if final.startswith(streamed):
        return final[len(streamed) :]
    return ""
