"""`LoopbackOpenAIServer`: real HTTP on 127.0.0.1 speaking OpenAI chat completions."""

from __future__ import annotations

import json
from typing import Any, cast

from providers._json import as_list, as_object
from providers.embeddings import ngram_embedding
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
from providers.loopback._validate import openai_problem

_DEFAULT_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_exceeded",
}
_STREAM_PIECE_CHARS = 5


def _error_body(reply: ErrorReply | StreamErrorReply, status: int) -> dict[str, Any]:
    kind = reply.error_type or _DEFAULT_ERROR_TYPES.get(status, "server_error")
    code = reply.code if isinstance(reply, ErrorReply) else None
    return {"error": {"message": reply.message, "type": kind, "param": None, "code": code}}


def _not_found() -> HTTPResponse:
    error = {"message": "not found", "type": "invalid_request_error", "param": None, "code": None}
    return json_response(404, {"error": error})


def _embedding_inputs(body: dict[str, Any]) -> list[str] | None:
    """The texts of an embeddings body (`input` is a string or a list of strings)."""
    value = body.get("input")
    if isinstance(value, str):
        return [value]
    items = as_list(value)
    if items and all(isinstance(item, str) for item in items):
        return cast(list[str], items)
    return None


class LoopbackOpenAIServer(LoopbackServer):
    """OpenAI-compatible test server (chat completions, input tokens, embeddings).

    `/v1/embeddings` answers with `providers.embeddings.ngram_embedding` of each input
    (`embedding_dimensions` long, 256 by default), so similar texts get similar vectors.

    Example:
        ```python
        async with LoopbackOpenAIServer() as server:
            server.enqueue(TextReply(text="hi", input_tokens=12))
            provider = OpenAIChatProvider(http, base_url=server.base_url)
        ```
    """

    embedding_dimensions = 256
    """Length of the vectors `/v1/embeddings` returns."""

    def problem(self, request: RecordedRequest) -> str | None:
        """Why OpenAI would reject a chat-completions or embeddings request, or `None`."""
        path = request.path.split("?")[0]
        if path.endswith("/chat/completions"):
            return openai_problem(request.body)
        if path.endswith("/embeddings"):
            body = as_object(request.body) or {}
            if not isinstance(body.get("model"), str) or not body.get("model"):
                return "you must provide a model parameter"
            if _embedding_inputs(body) is None:
                return "'input' must be a string or a non-empty array of strings"
        return None

    def default_reply(self, request: RecordedRequest) -> Reply:
        """An echo of the request shape with usage from the real tokenizer."""
        body = as_object(request.body) or {}
        if request.path.split("?")[0].endswith("/input_tokens"):
            return CountReply(input_tokens=input_tokens_of(body))
        return TextReply(text=echo_text(as_list(body.get("messages")) or []))

    def render(self, request: RecordedRequest, reply: Reply) -> HTTPResponse:
        """Render `reply` as chat-completions JSON, SSE or an OpenAI error body."""
        if isinstance(reply, ResetReply):
            return self.render(request, reply.reply)  # the server cuts it short
        if isinstance(reply, RawReply):
            return HTTPResponse(reply.status, dict(reply.headers), reply.body)
        if isinstance(reply, ErrorReply):
            if reply.body is not None:
                headers = {"content-type": "application/json", **reply.headers}
                return HTTPResponse(reply.status, headers, reply.body)
            return json_response(reply.status, _error_body(reply, reply.status), reply.headers)
        path = request.path.split("?")[0]
        if request.method != "POST" or not path.startswith(self.api_prefix):
            return _not_found()
        if path.endswith("/responses/input_tokens"):
            tokens = (
                reply.input_tokens
                if isinstance(reply, CountReply)
                else input_tokens_of(request.body)
            )
            return json_response(200, {"object": "response.input_tokens", "input_tokens": tokens})
        if path.endswith("/embeddings"):
            return json_response(200, self._embeddings(as_object(request.body) or {}))
        if not path.endswith("/chat/completions"):
            return _not_found()
        body = as_object(request.body) or {}
        if isinstance(reply, CountReply | DisconnectReply | HangReply):
            reply = TextReply(text="")
        if isinstance(reply, StreamErrorReply):
            return self._stream_error(body, reply)
        if body.get("stream") is True:
            return self._stream(body, reply)
        return json_response(200, self._completion(body, reply))

    def _number(self) -> int:
        return len(self.requests)

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        texts = _embedding_inputs(body) or []
        return {
            "object": "list",
            "model": body.get("model", ""),
            "data": [
                {
                    "object": "embedding",
                    "index": index,
                    "embedding": list(ngram_embedding(text, self.embedding_dimensions)),
                }
                for index, text in enumerate(texts)
            ],
            "usage": {
                "prompt_tokens": sum(counter().count_text(text) for text in texts),
                "total_tokens": sum(counter().count_text(text) for text in texts),
            },
        }

    def _calls(self, reply: TextReply) -> list[dict[str, Any]]:
        return [
            {
                "id": call.id or f"call_{self._number()}_{index}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments, separators=(",", ":"), ensure_ascii=False),
                },
            }
            for index, call in enumerate(reply.tool_calls)
        ]

    def _usage(self, body: dict[str, Any], reply: TextReply) -> dict[str, Any]:
        prompt = reply.input_tokens if reply.input_tokens is not None else input_tokens_of(body)
        if reply.output_tokens is not None:
            completion = reply.output_tokens
        else:
            arguments = "".join(c["function"]["arguments"] for c in self._calls(reply))
            completion = counter().count_text(reply.text + arguments)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": reply.cache_read_tokens},
        }

    @staticmethod
    def _finish(reply: TextReply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _completion(self, body: dict[str, Any], reply: TextReply) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text or None,
            "refusal": None,
        }
        if reply.tool_calls:
            message["tool_calls"] = self._calls(reply)
        return {
            "id": f"chatcmpl-loopback-{self._number()}",
            "object": "chat.completion",
            "created": 0,
            "model": reply.model or body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self._finish(reply),
                }
            ],
            "usage": self._usage(body, reply),
        }

    def _chunk(
        self, body: dict[str, Any], model: str | None, choices: list[Any], usage: Any = None
    ) -> bytes:
        chunk: dict[str, Any] = {
            "id": f"chatcmpl-loopback-{self._number()}",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model or body.get("model", ""),
            "choices": choices,
        }
        if usage is not None:
            chunk["usage"] = usage
        return sse_event(chunk)

    def _delta(
        self,
        body: dict[str, Any],
        model: str | None,
        delta: dict[str, Any],
        finish: str | None = None,
    ) -> bytes:
        return self._chunk(
            body, model, [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        )

    def _stream(self, body: dict[str, Any], reply: TextReply) -> HTTPResponse:
        events = [self._delta(body, reply.model, {"role": "assistant", "content": ""})]
        if reply.text:
            events += [
                self._delta(body, reply.model, {"content": p})
                for p in pieces(reply.text, _STREAM_PIECE_CHARS)
            ]
        for index, call in enumerate(self._calls(reply)):
            head = {
                "index": index,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""},
            }
            events.append(self._delta(body, reply.model, {"tool_calls": [head]}))
            for piece in pieces(call["function"]["arguments"], _STREAM_PIECE_CHARS):
                if piece:
                    events.append(
                        self._delta(
                            body,
                            reply.model,
                            {"tool_calls": [{"index": index, "function": {"arguments": piece}}]},
                        )
                    )
        events.append(self._delta(body, reply.model, {}, self._finish(reply)))
        options = body.get("stream_options")
        if isinstance(options, dict) and cast(dict[str, Any], options).get("include_usage"):
            events.append(self._chunk(body, reply.model, [], self._usage(body, reply)))
        events.append(sse_event("[DONE]"))
        return sse_response(b"".join(events), reply.sse_chunk_size)

    def _stream_error(self, body: dict[str, Any], reply: StreamErrorReply) -> HTTPResponse:
        events = [self._delta(body, None, {"role": "assistant", "content": ""})]
        if reply.text:
            events.append(self._delta(body, None, {"content": reply.text}))
        events.append(sse_event(_error_body(reply, 500)))
        return sse_response(b"".join(events), None)
