"""Incremental server-sent-events parsing that tolerates any chunk boundaries.

Bytes may arrive split anywhere, including inside a UTF-8 sequence or between a carriage
return and its line feed, so we buffer raw bytes and only decode complete lines.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

from pydantic import BaseModel, ConfigDict


class SSEEvent(BaseModel):
    """One dispatched event.

    Attributes:
        event: The `event:` field (`message` when absent).
        data: The `data:` lines joined with newlines.
        id: The `id:` field, if any.
    """

    model_config = ConfigDict(frozen=True)

    event: str = "message"
    data: str = ""
    id: str | None = None


class SSEDecoder:
    """Feed bytes with `feed`, collect complete events; `flush` at end of stream."""

    def __init__(self) -> None:
        self._buffer = b""
        self._event: str | None = None
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Add bytes and return the events they completed."""
        self._buffer += chunk
        events: list[SSEEvent] = []
        while True:
            line, rest, complete = self._split_line(self._buffer)
            if not complete:
                break
            self._buffer = rest
            event = self._line(line.decode("utf-8"))
            if event is not None:
                events.append(event)
        return events

    @staticmethod
    def _split_line(buffer: bytes) -> tuple[bytes, bytes, bool]:
        newline, carriage = buffer.find(b"\n"), buffer.find(b"\r")
        if carriage == -1 or (newline != -1 and newline < carriage):
            if newline == -1:
                return b"", buffer, False
            return buffer[:newline], buffer[newline + 1 :], True
        if carriage + 1 == len(buffer):
            return b"", buffer, False  # a `\n` may follow in the next chunk
        skip = 2 if buffer[carriage + 1] == 0x0A else 1
        return buffer[:carriage], buffer[carriage + skip :], True

    def flush(self) -> list[SSEEvent]:
        """End of stream: dispatch a trailing line and event that lacked a final newline."""
        events: list[SSEEvent] = []
        if self._buffer:
            tail = self._buffer.rstrip(b"\r")
            self._buffer = b""
            event = self._line(tail.decode("utf-8"))
            if event is not None:
                events.append(event)
        event = self._line("")
        if event is not None:
            events.append(event)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data and self._event is None:
                return None
            event = SSEEvent(
                event=self._event or "message", data="\n".join(self._data), id=self._id
            )
            self._event, self._data = None, []
            return event
        if line.startswith(":"):
            return None  # comment / keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            self._id = value
        return None


async def iter_sse(chunks: AsyncIterable[bytes]) -> AsyncIterator[SSEEvent]:
    """Decode a byte stream into events."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.flush():
        yield event
