"""A small HTTP/1.1 server on asyncio streams, bound to 127.0.0.1 only.

It speaks just enough HTTP for API clients: request bodies by `Content-Length` or chunked
encoding, responses with `Content-Length` or chunked (for server-sent events), and keep-alive.
Subclasses turn recorded requests and scripted replies into wire-format responses.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from providers.loopback._replies import (
    DisconnectReply,
    ErrorReply,
    HangReply,
    Reply,
    ResetReply,
    TextReply,
)

LOOPBACK_HOST = "127.0.0.1"
_MAX_HEADER_LINES = 200
_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it.

    Attributes:
        method: HTTP method.
        path: Request target (path and query).
        headers: Header names lower-cased; repeated headers keep the last value.
        raw_body: The body bytes.
        body: The body parsed as JSON (`None` when it is not JSON).
        received_at: `time.monotonic()` when the request was read (to measure the pauses
            a client leaves between attempts).
    """

    method: str
    path: str
    headers: dict[str, str]
    raw_body: bytes
    body: Any = None
    received_at: float = 0.0


@dataclass
class HTTPResponse:
    """What a subclass renders: a status, headers and either a body or streamed pieces."""

    status: int
    headers: dict[str, str] = field(default_factory=dict[str, str])
    body: bytes = b""
    chunks: Sequence[bytes] | None = None


Responder = Callable[[RecordedRequest], Reply]
"""Builds a reply when the queue is empty."""


class LoopbackServer:
    """Base of the wire-format servers: lifecycle, parsing, queue and recording.

    Use as `async with Server() as server:`; `server.base_url` is ready inside the block.

    Args:
        responder: Builds replies when nothing is scripted (default: an echo of the request).
        validate: Reject requests the real API would reject, with its 400 error body.
    """

    api_prefix = "/v1"

    def __init__(self, *, responder: Responder | None = None, validate: bool = True):
        self.requests: list[RecordedRequest] = []
        self.validate = validate
        self._queue: deque[Reply] = deque()
        self._responder = responder
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    @property
    def port(self) -> int:
        """The bound port (only while running)."""
        if self._port is None:
            raise RuntimeError("the loopback server is not running")
        return self._port

    @property
    def base_url(self) -> str:
        """API root to configure clients with, e.g. `http://127.0.0.1:PORT/v1`."""
        return f"http://{LOOPBACK_HOST}:{self.port}{self.api_prefix}"

    def enqueue(self, *replies: Reply) -> None:
        """Script the next replies, answered in order before the default responder."""
        self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Scripted replies not consumed yet."""
        return len(self._queue)

    def clear(self) -> None:
        """Forget recorded requests and drop scripted replies."""
        self.requests.clear()
        self._queue.clear()

    def next_reply(self, request: RecordedRequest) -> Reply:
        """The scripted reply for `request`, else the responder's, else the default.

        With `validate` on, a request the real API would reject (unpaired tool calls, roles
        out of order, missing required fields) gets that API's 400 instead, and the scripted
        queue is left untouched.
        """
        if self.validate:
            problem = self.problem(request)
            if problem is not None:
                return ErrorReply(status=400, error_type="invalid_request_error", message=problem)
        if self._queue:
            return self._queue.popleft()
        if self._responder is not None:
            return self._responder(request)
        return self.default_reply(request)

    async def before_reply(self, request: RecordedRequest) -> None:
        """Awaited before each reply is sent (default: returns at once).

        A subclass may wait here to hold a request outstanding until the test lets it go.
        """
        del request

    def problem(self, request: RecordedRequest) -> str | None:
        """Why the real API would reject `request` (subclasses override), or `None`."""
        del request
        return None

    def default_reply(self, request: RecordedRequest) -> Reply:  # pragma: no cover
        """Reply used when nothing is scripted (subclasses override)."""
        raise NotImplementedError

    def render(self, request: RecordedRequest, reply: Reply) -> HTTPResponse:  # pragma: no cover
        """Turn a reply into wire bytes (subclasses override)."""
        raise NotImplementedError

    async def start(self) -> None:
        """Bind to 127.0.0.1 on a free port and start serving."""
        self._server = await asyncio.start_server(self._serve, LOOPBACK_HOST, 0)
        self._port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and drop open connections."""
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(BaseException):
                await task
        await self._server.wait_closed()
        self._server = None
        self._port = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                self.requests.append(request)
                reply = self.next_reply(request)
                await self.before_reply(request)
                if reply.delay_seconds:
                    await asyncio.sleep(reply.delay_seconds)
                if isinstance(reply, DisconnectReply):
                    break
                if isinstance(reply, HangReply):
                    # Never answer: wait for the client to give up and close.
                    while await reader.read(65_536):
                        pass
                    break
                if isinstance(reply, ResetReply):
                    await _write_cut(
                        writer,
                        self.render(request, reply.reply),
                        reply.after_bytes,
                        reply.piece_delay_seconds,
                    )
                    break
                piece_delay = reply.sse_piece_delay_seconds if isinstance(reply, TextReply) else 0.0
                await _write_response(writer, self.render(request, reply), piece_delay)
                if request.headers.get("connection", "").lower() == "close":
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass  # the client went away or spoke something we do not handle
        except asyncio.CancelledError:
            # Only `stop` cancels these tasks; ending quietly keeps asyncio's stream callback
            # from reporting the cancellation as an unhandled error.
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    line = await reader.readline()
    if not line:
        return None
    method, target, _version = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADER_LINES):
        raw = (await reader.readline()).decode("latin-1").rstrip("\r\n")
        if not raw:
            break
        name, _, value = raw.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    parsed: Any = None
    if body:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
    return RecordedRequest(
        method=method,
        path=target,
        headers=headers,
        raw_body=body,
        body=parsed,
        received_at=time.monotonic(),
    )


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        size = int((await reader.readline()).split(b";")[0].strip(), 16)
        if size == 0:
            while (await reader.readline()).strip():
                pass  # trailers
            return bytes(body)
        body += await reader.readexactly(size)
        await reader.readexactly(2)


def _head(response: HTTPResponse) -> bytes:
    reason = _REASONS.get(response.status, "Status")
    head = [f"HTTP/1.1 {response.status} {reason}"]
    headers = {k.lower(): v for k, v in response.headers.items()}
    if response.chunks is None:
        headers["content-length"] = str(len(response.body))
    else:
        headers["transfer-encoding"] = "chunked"
    head.extend(f"{name}: {value}" for name, value in headers.items())
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")


# Long enough for the client to read what was sent before the reset arrives, so the cut
# lands where it was scripted rather than wherever the reset overtook the data.
_RESET_PAUSE_SECONDS = 0.05


async def _write_cut(
    writer: asyncio.StreamWriter, response: HTTPResponse, budget: int, piece_delay: float
) -> None:
    """Send the head and the first `budget` body bytes of `response`, then reset."""
    writer.write(_head(response))
    if response.chunks is None:
        writer.write(response.body[:budget])
    else:
        for piece in response.chunks:
            piece = piece[:budget]
            if not piece:
                break
            budget -= len(piece)
            writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            await writer.drain()
            await asyncio.sleep(piece_delay)
    await writer.drain()
    await asyncio.sleep(_RESET_PAUSE_SECONDS)
    sock = writer.get_extra_info("socket")
    if sock is not None:
        # A zero linger time turns the close into a TCP reset (ECONNRESET at the client).
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _write_response(
    writer: asyncio.StreamWriter, response: HTTPResponse, piece_delay: float = 0.0
) -> None:
    writer.write(_head(response))
    if response.chunks is None:
        writer.write(response.body)
        await writer.drain()
        return
    await writer.drain()
    for piece in response.chunks:
        if not piece:
            continue
        writer.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        await writer.drain()
        # Yield so pieces tend to leave as separate TCP segments, as a real stream would.
        await asyncio.sleep(piece_delay)
    writer.write(b"0\r\n\r\n")
    await writer.drain()


def split_bytes(data: bytes, size: int | None) -> list[bytes]:
    """`data` cut every `size` bytes (one piece when `size` is `None`)."""
    if size is None:
        return [data]
    return [data[i : i + size] for i in range(0, len(data), size)]


def sse_event(data: Any, event: str | None = None) -> bytes:
    """One server-sent event carrying JSON `data` (or a raw string)."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event is not None else ""
    return f"{prefix}data: {payload}\n\n".encode()


def json_response(status: int, data: Any, headers: dict[str, str] | None = None) -> HTTPResponse:
    """A JSON response."""
    body = json.dumps(data, separators=(",", ":")).encode()
    return HTTPResponse(status, {"content-type": "application/json", **(headers or {})}, body)


def sse_response(data: bytes, size: int | None) -> HTTPResponse:
    """An event-stream response: one piece per event, or `size`-byte pieces when given."""
    headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
    if size is None:
        chunks = [c + b"\n\n" for c in data.split(b"\n\n") if c]
    else:
        chunks = split_bytes(data, size)
    return HTTPResponse(200, headers, chunks=chunks)
