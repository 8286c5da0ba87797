"""`LoopbackAnthropicServer`: real HTTP on 127.0.0.1 speaking the Anthropic Messages API."""

from __future__ import annotations

from typing import Any

from providers._json import as_list, as_object, dumps
from providers.loopback._replies import (
    CountReply,
    DisconnectReply,
    ErrorReply,
    HangReply,
    RawReply,
    Reply,
    ResetReply,
    StreamErrorReply,
    TextReply,
)
from providers.loopback._server import (
    HTTPResponse,
    LoopbackServer,
    RecordedRequest,
    json_response,
    sse_event,
    sse_response,
)
from providers.loopback._shared import counter, echo_text, input_tokens_of, pieces
from providers.loopback._validate import anthropic_problem

_DEFAULT_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_STREAM_PIECE_CHARS = 5


def _error_body(error_type: str | None, message: str, status: int) -> dict[str, Any]:
    kind = error_type or _DEFAULT_ERROR_TYPES.get(status, "api_error")
    return {
        "type": "error",
        "error": {"type": kind, "message": message},
        "request_id": f"req_loopback_{status}",
    }


class LoopbackAnthropicServer(LoopbackServer):
    """Anthropic Messages test server (`/v1/messages`, `/v1/messages/count_tokens`)."""

    def problem(self, request: RecordedRequest) -> str | None:
        """Why the Messages API would reject a `/messages` request, or `None`."""
        if request.path.split("?")[0] == f"{self.api_prefix}/messages":
            return anthropic_problem(request.body)
        return None

    def default_reply(self, request: RecordedRequest) -> Reply:
        """An echo of the request shape with usage from the real tokenizer."""
        body = as_object(request.body) or {}
        if request.path.split("?")[0].endswith("/count_tokens"):
            return CountReply(input_tokens=input_tokens_of(body))
        return TextReply(text=echo_text(as_list(body.get("messages")) or []))

    def render(self, request: RecordedRequest, reply: Reply) -> HTTPResponse:
        """Render `reply` as Messages JSON, SSE or an Anthropic error body."""
        if isinstance(reply, ResetReply):
            return self.render(request, reply.reply)  # the server cuts it short
        if isinstance(reply, RawReply):
            return HTTPResponse(reply.status, dict(reply.headers), reply.body)
        if isinstance(reply, ErrorReply):
            headers = {"content-type": "application/json", **reply.headers}
            if reply.body is not None:
                return HTTPResponse(reply.status, headers, reply.body)
            body = _error_body(reply.error_type, reply.message, reply.status)
            return json_response(reply.status, body, reply.headers)
        path = request.path.split("?")[0]
        body = as_object(request.body) or {}
        if request.method != "POST" or path not in (
            f"{self.api_prefix}/messages",
            f"{self.api_prefix}/messages/count_tokens",
        ):
            return json_response(404, _error_body("not_found_error", "not found", 404))
        if path.endswith("/count_tokens"):
            tokens = reply.input_tokens if isinstance(reply, CountReply) else input_tokens_of(body)
            return json_response(200, {"input_tokens": tokens})
        if isinstance(reply, CountReply | DisconnectReply | HangReply):
            reply = TextReply()
        if isinstance(reply, StreamErrorReply):
            return self._stream_error(body, reply)
        if body.get("stream") is True:
            return self._stream(body, reply)
        return json_response(200, self._message(body, reply, self._content(reply)))

    def _content(self, reply: TextReply) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        if reply.text:
            content.append({"type": "text", "text": reply.text})
        for index, call in enumerate(reply.tool_calls):
            content.append(
                {
                    "type": "tool_use",
                    "id": call.id or f"toolu_{len(self.requests)}_{index}",
                    "name": call.name,
                    "input": call.arguments if isinstance(call.arguments, dict) else {},
                }
            )
        return content

    def _usage(self, body: dict[str, Any], reply: TextReply) -> dict[str, Any]:
        total = reply.input_tokens if reply.input_tokens is not None else input_tokens_of(body)
        cached = reply.cache_read_tokens + reply.cache_write_tokens
        if reply.output_tokens is not None:
            output = reply.output_tokens
        else:
            arguments = "".join(str(c.arguments) for c in reply.tool_calls)
            output = counter().count_text(reply.text + arguments)
        # Anthropic reports uncached input separately from cache reads and writes.
        return {
            "input_tokens": max(0, total - cached),
            "cache_creation_input_tokens": reply.cache_write_tokens,
            "cache_read_input_tokens": reply.cache_read_tokens,
            "output_tokens": output,
        }

    @staticmethod
    def _stop(reply: TextReply) -> str:
        return reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn")

    def _message(
        self, body: dict[str, Any], reply: TextReply, content: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {
            "id": f"msg_loopback_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": reply.model or body.get("model", ""),
            "content": content,
            "stop_reason": self._stop(reply),
            "stop_sequence": None,
            "usage": self._usage(body, reply),
        }

    def _stream(self, body: dict[str, Any], reply: TextReply) -> HTTPResponse:
        usage = self._usage(body, reply)
        start = self._message(body, reply, [])
        start["stop_reason"] = None
        start["usage"] = {**usage, "output_tokens": 1}
        events = [sse_event({"type": "message_start", "message": start}, "message_start")]
        events.append(sse_event({"type": "ping"}, "ping"))
        for index, block in enumerate(self._content(reply)):
            if block["type"] == "text":
                opening: dict[str, Any] = {"type": "text", "text": ""}
                deltas = [
                    {"type": "text_delta", "text": p}
                    for p in pieces(block["text"], _STREAM_PIECE_CHARS)
                ]
            else:
                opening = {**block, "input": {}}
                call = reply.tool_calls[index - (1 if reply.text else 0)]
                raw = call.arguments if isinstance(call.arguments, str) else None
                text = raw if raw is not None else dumps(block["input"])
                deltas = [
                    {"type": "input_json_delta", "partial_json": p}
                    for p in pieces(text, _STREAM_PIECE_CHARS)
                ]
            events.append(
                sse_event(
                    {"type": "content_block_start", "index": index, "content_block": opening},
                    "content_block_start",
                )
            )
            events.extend(
                sse_event(
                    {"type": "content_block_delta", "index": index, "delta": d},
                    "content_block_delta",
                )
                for d in deltas
            )
            events.append(
                sse_event({"type": "content_block_stop", "index": index}, "content_block_stop")
            )
        events.append(
            sse_event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self._stop(reply), "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
                "message_delta",
            )
        )
        events.append(sse_event({"type": "message_stop"}, "message_stop"))
        return sse_response(b"".join(events), reply.sse_chunk_size)

    def _stream_error(self, body: dict[str, Any], reply: StreamErrorReply) -> HTTPResponse:
        start = self._message(body, TextReply(), [])
        events = [sse_event({"type": "message_start", "message": start}, "message_start")]
        if reply.text:
            opening = {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
            delta = {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": reply.text},
            }
            events += [
                sse_event(opening, "content_block_start"),
                sse_event(delta, "content_block_delta"),
            ]
        error = _error_body(reply.error_type, reply.message, 500)
        events.append(sse_event(error, "error"))
        return sse_response(b"".join(events), None)
