"""A generation's stream as server-sent events, resumable by `Last-Event-ID`.

Events:

- `delta`: `{"text": ...}`, id = the delta's storage key (ordered within a generation);
- `reset`: `{"attempt": n}`, a new provider attempt began (discard the text so far), id =
  the attempt's key prefix;
- `committed`: the `GenerationReply`, after the turn was published;
- `error`: an `ErrorBody`, when the generation failed;
- a `: ping` comment every `PING_SECONDS` while nothing else arrives.

A client that lost the connection sends the same request again (same `generation_id`) with
`Last-Event-ID`: the run is attached to, not repeated, and only the events after that id
are sent (deltas are staged in PostgreSQL, so any replica can resume any stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable

from pydantic import BaseModel

from crux.runtime import Generation, StreamCommitted, StreamDelta, StreamReset, StreamUpdate
from crux.serve._errors import error_info
from crux.serve._models import ErrorBody, ErrorInfo
from telemetry.logs import get_logger
from vocabulary.errors import CruxError

PING_SECONDS = 15.0
"""Longest silence on an open stream: proxies close idle connections."""

_log = get_logger(__name__)


def event(name: str, data: BaseModel | dict[str, object], event_id: str | None = None) -> bytes:
    """One server-sent event."""
    payload = data.model_dump_json() if isinstance(data, BaseModel) else json.dumps(data)
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {name}\ndata: {payload}\n\n".encode()


def reset_id(attempt: int) -> str:
    """The event id of a reset: sorts after every delta of the attempts before it."""
    return f"{attempt:03d}:"


def after(last_event_id: str | None, event_id: str) -> bool:
    """Whether an event is new to a client that saw everything up to `last_event_id`."""
    return last_event_id is None or event_id > last_event_id


async def sse_stream(
    first: StreamUpdate,
    updates: AsyncIterator[StreamUpdate],
    *,
    reply: Callable[[Generation], Awaitable[BaseModel]],
    last_event_id: str | None,
    close: Callable[[], Awaitable[None]],
) -> AsyncGenerator[bytes]:
    """The events of a generation's updates (`first` already read), skipping those seen.

    Args:
        first: The first update (read before the response started, so that a refused
            request is an HTTP error, not an event).
        updates: The rest of the updates.
        reply: Builds the `committed` event's body.
        last_event_id: The client's `Last-Event-ID`, when resuming.
        close: Closes `updates` (the run goes on; only this follower stops).
    """
    queue: asyncio.Queue[StreamUpdate | BaseException | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for update in updates:
                await queue.put(update)
            await queue.put(None)
        except Exception as error:  # handed to the response, which reports it as an event
            await queue.put(error)

    task = asyncio.ensure_future(pump())
    try:
        item: StreamUpdate | BaseException | None = first
        while item is not None:
            if isinstance(item, BaseException):
                yield _error_event(item)
                return
            if isinstance(item, StreamDelta):
                if after(last_event_id, item.key):
                    yield event("delta", {"text": item.text}, item.key)
            elif isinstance(item, StreamReset):
                if after(last_event_id, reset_id(item.attempt)):
                    yield event("reset", {"attempt": item.attempt}, reset_id(item.attempt))
            elif isinstance(item, StreamCommitted):  # pyright: ignore[reportUnnecessaryIsInstance]
                yield event("committed", await reply(item.generation))
            while True:
                try:
                    item = await asyncio.wait_for(queue.get(), timeout=PING_SECONDS)
                    break
                except TimeoutError:
                    yield b": ping\n\n"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        await close()


def _error_event(error: BaseException) -> bytes:
    if isinstance(error, CruxError):
        _, info = error_info(error)
    else:
        _log.warning("http.stream.failed", error=type(error).__name__)
        info = ErrorInfo(type="InternalError", code="failed", message="the stream failed")
    return event("error", ErrorBody(error=info))
