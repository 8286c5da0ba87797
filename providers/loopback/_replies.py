"""Scripted replies for the loopback servers, shared by both wire formats."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Reply(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    delay_seconds: float = Field(default=0.0, ge=0)
    """Wait this long before answering (to exercise client timeouts)."""


class ScriptedToolCall(BaseModel):
    """One tool call in a scripted reply.

    Attributes:
        name: Tool name.
        arguments: Arguments object, or raw argument text (to script invalid JSON).
        id: Call id; generated deterministically when omitted.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict[str, Any])
    id: str | None = None


class TextReply(_Reply):
    """A successful reply (text and optional tool calls), streamed if the request asks.

    Attributes:
        text: Assistant text.
        tool_calls: Tool calls after the text.
        finish_reason: Wire-format finish/stop reason; the format's natural one when omitted.
        input_tokens: Reported input tokens; computed from the request when omitted.
        output_tokens: Reported output tokens; computed from the reply when omitted.
        cache_read_tokens: Reported cache reads.
        cache_write_tokens: Reported cache writes (Anthropic only).
        model: Reported model; the requested one when omitted.
        sse_chunk_size: When streaming, split the SSE bytes into pieces of this many bytes,
            regardless of event, line or UTF-8 boundaries.
        sse_piece_delay_seconds: When streaming, pause between the pieces, so that a client
            acts on the first events (a caller sees its first deltas, say) before the last.
    """

    text: str = ""
    tool_calls: list[ScriptedToolCall] = Field(default_factory=list[ScriptedToolCall])
    finish_reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    model: str | None = None
    sse_chunk_size: int | None = Field(default=None, ge=1)
    sse_piece_delay_seconds: float = Field(default=0.0, ge=0)


def tool_call_reply(*calls: ScriptedToolCall, text: str = "", **options: Any) -> TextReply:
    """A `TextReply` that calls tools (finish reason `tool_calls` / `tool_use`)."""
    return TextReply(text=text, tool_calls=list(calls), **options)


class ErrorReply(_Reply):
    """An error status with a body in the provider's real error shape.

    Attributes:
        status: HTTP status.
        error_type: The provider's error type (`rate_limit_error`, `server_error`, ...);
            a type typical for the status when omitted.
        code: OpenAI's `code` field (e.g. `context_length_exceeded`).
        message: Human-readable message inside the body.
        headers: Extra headers (`retry-after`, `retry-after-ms`, `x-should-retry`, ...).
        body: Raw body bytes that replace the provider-shaped one.
    """

    status: int
    error_type: str | None = None
    code: str | None = None
    message: str = "scripted error"
    headers: dict[str, str] = Field(default_factory=dict[str, str])
    body: bytes | None = None


class StreamErrorReply(_Reply):
    """A stream that starts normally, sends `text`, then an in-stream error event."""

    text: str = ""
    error_type: str = "server_error"
    message: str = "scripted stream error"


class RawReply(_Reply):
    """Exact status, headers and body bytes (for malformed responses)."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = Field(default_factory=lambda: {"content-type": "application/json"})


class DisconnectReply(_Reply):
    """Close the connection without answering (a network failure)."""


class HangReply(_Reply):
    """Accept the request and never answer (a read timeout at the client).

    The connection stays open until the client gives up and closes it.
    """


class ResetReply(_Reply):
    """Start answering with `reply`, then reset the connection part-way through.

    The status line and headers are sent whole; of the body (for a stream, of the event
    bytes before chunk framing) only the first `after_bytes` bytes are sent, then the
    socket is closed with a TCP reset. With a streamed reply this cuts the stream in the
    middle of an event when `after_bytes` falls inside one.

    Attributes:
        reply: The reply whose rendering is cut short.
        after_bytes: Body bytes sent before the reset.
        piece_delay_seconds: Pause between the streamed pieces sent before the reset, so
            a client acts on the first events (stages its deltas, say) before the cut.
    """

    reply: TextReply | ErrorReply | RawReply
    after_bytes: int = Field(ge=0)
    piece_delay_seconds: float = Field(default=0.0, ge=0)


class CountReply(_Reply):
    """An answer of a token-counting endpoint."""

    input_tokens: int = Field(ge=0)


Reply = (
    TextReply
    | ErrorReply
    | StreamErrorReply
    | RawReply
    | DisconnectReply
    | HangReply
    | ResetReply
    | CountReply
)
"""Anything `enqueue` accepts."""
