"""Adapter for the Anthropic Messages API (`POST {base_url}/messages`).

System messages become the top-level `system`, tool results travel as `tool_result` blocks in
user turns, and usage folds cache reads and writes into `input_tokens` so every adapter reports
the same quantity. No retries happen here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import httpx

from providers import _anthropic_wire as wire
from providers import _json
from providers._errors import error_from_response, malformed
from providers._http import final_response, join_url, load_event_json, post_json, post_sse
from providers._json import as_object
from providers.types import (
    ChatRequest,
    ChatResponse,
    StreamDone,
    StreamEvent,
    SummaryRequest,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from vocabulary.errors import ProviderConnectionError, ProviderError
from vocabulary.messages import Message

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
DEFAULT_MAX_TOKENS = 4_096
"""`max_tokens` sent when the request sets none (the API requires one)."""


class AnthropicMessagesProvider:
    """`ChatProvider` over the Anthropic Messages API.

    Args:
        http: The HTTP client to use (its timeouts apply; it is not closed here).
        base_url: API root including the version, e.g. `https://api.anthropic.com/v1`.
        api_key: Sent as `x-api-key` when given.
        headers: Extra headers sent with every call (e.g. `anthropic-beta`).
        default_max_tokens: `max_tokens` for requests that set no output cap.
        anthropic_version: Value of the `anthropic-version` header.
        extra_body: Fields added to every request body (for example `thinking` or
            `metadata`); fields the adapter sets itself take precedence.
        cache_prefix: Mark prompt-cache breakpoints (last tool, system, newest message) so
            each turn of a thread reads the earlier conversation from Anthropic's cache.
        structured_output_beta: Send JSON-schema replies the original way (`output_format`
            with the `structured-outputs-2025-11-13` beta flag) instead of
            `output_config.format`, for endpoints that only know the beta.
    """

    provider = wire.PROVIDER

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str = DEFAULT_ANTHROPIC_BASE_URL,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
        anthropic_version: str = wire.ANTHROPIC_VERSION,
        extra_body: Mapping[str, Any] | None = None,
        cache_prefix: bool = False,
        structured_output_beta: bool = False,
    ):
        self._http = http
        self.base_url = base_url
        self._default_max_tokens = default_max_tokens
        self._extra_body = dict(extra_body or {})
        self._cache_prefix = cache_prefix
        self._structured_output_beta = structured_output_beta
        self._headers = {
            "content-type": "application/json",
            "anthropic-version": anthropic_version,
            **(headers or {}),
        }
        if api_key:
            self._headers["x-api-key"] = api_key

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body this adapter sends for `request`."""
        body = wire.encode_request(
            request,
            default_max_tokens=self._default_max_tokens,
            cache_prefix=self._cache_prefix,
            structured_output_beta=self._structured_output_beta,
        )
        return {**self._extra_body, **body}

    def _request_headers(self, request: ChatRequest, accept: str) -> dict[str, str]:
        headers = {**self._headers, "accept": accept}
        if request.response_format is not None and self._structured_output_beta:
            betas = [b for b in headers.get("anthropic-beta", "").split(",") if b.strip()]
            if wire.STRUCTURED_OUTPUTS_BETA not in betas:
                betas.append(wire.STRUCTURED_OUTPUTS_BETA)
            headers["anthropic-beta"] = ",".join(betas)
        return headers

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Send `request`; with `request.stream` the reply is streamed and assembled.

        Raises:
            ProviderError: Classified failure (see `crux.errors`).
        """
        if request.stream:
            return await final_response(self.stream(request), self.provider)
        url = join_url(self.base_url, "messages")
        headers = self._request_headers(request, "application/json")
        data = await post_json(self._http, self.provider, url, self.encode(request), headers)
        return wire.decode_response(data)

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent]:
        """Stream `request`, yielding text and tool-call deltas, then one `StreamDone`."""
        streamed = request.model_copy(update={"stream": True})
        url = join_url(self.base_url, "messages")
        headers = self._request_headers(streamed, "text/event-stream")
        assembler = _StreamAssembler()
        async with post_sse(
            self._http, self.provider, url, self.encode(streamed), headers
        ) as events:
            async for event in events:
                data = load_event_json(self.provider, event)
                for delta in assembler.add(data):
                    yield delta
                if assembler.stopped:
                    break
        yield StreamDone(response=assembler.result())

    async def count_tokens(self, request: ChatRequest) -> int:
        """Authoritative input tokens from `POST {base_url}/messages/count_tokens`.

        Use it near a decision boundary: it costs a round trip, and it is rate limited.
        """
        body = self.encode(request)
        body = {k: v for k, v in body.items() if k in _COUNT_FIELDS}
        url = join_url(self.base_url, "messages/count_tokens")
        headers = self._request_headers(request, "application/json")
        data = await post_json(self._http, self.provider, url, body, headers)
        tokens = data.get("input_tokens")
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise malformed(self.provider, "count_tokens without input_tokens")
        return tokens

    async def summarize(self, request: SummaryRequest) -> Message | None:
        """Always `None`: the Messages API offers no endpoint returning a readable summary.

        The portable summary path (an ordinary `complete` call) applies.
        """
        del request
        return None


# Fields `count_tokens` accepts; generation-only fields are rejected by the endpoint.
_COUNT_FIELDS = frozenset({"model", "system", "messages", "tools", "tool_choice", "thinking"})


class _StreamAssembler:
    """Folds Messages stream events into deltas and a final `ChatResponse`."""

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        self._partial_json: dict[int, list[str]] = {}
        self._usage: dict[str, Any] = {}
        self._stop: str | None = None
        self._model = ""
        self._id: str | None = None
        self._started = False
        self.stopped = False

    def add(self, event: dict[str, Any]) -> list[StreamEvent]:
        kind = event.get("type")
        if kind == "error":
            raise _stream_error(event)
        if kind == "message_start":
            message = as_object(event.get("message")) or {}
            self._started = True
            model, response_id = message.get("model"), message.get("id")
            self._model = model if isinstance(model, str) else ""
            self._id = response_id if isinstance(response_id, str) else None
            self._usage.update(as_object(message.get("usage")) or {})
        elif kind == "content_block_start":
            return self._block_start(event)
        elif kind == "content_block_delta":
            return self._block_delta(event)
        elif kind == "message_delta":
            delta = as_object(event.get("delta")) or {}
            if isinstance(delta.get("stop_reason"), str):
                self._stop = delta["stop_reason"]
            # message_delta carries cumulative counts; later values replace earlier ones.
            usage = as_object(event.get("usage")) or {}
            self._usage.update({k: v for k, v in usage.items() if v is not None})
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _index(self, event: dict[str, Any]) -> int:
        index = event.get("index")
        if not isinstance(index, int):
            raise malformed(wire.PROVIDER, "stream block without index")
        return index

    def _block_start(self, event: dict[str, Any]) -> list[StreamEvent]:
        index = self._index(event)
        block = dict(as_object(event.get("content_block")) or {})
        self._blocks[index] = block
        if block.get("type") == "tool_use":
            self._partial_json[index] = []
            call_id, name = block.get("id"), block.get("name")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise malformed(wire.PROVIDER, "tool_use block without id or name")
            ordinal = len(self._partial_json) - 1  # position among the reply's tool calls
            return [ToolCallDelta(index=ordinal, tool_call_id=call_id, tool_name=name)]
        if block.get("type") == "text" and block.get("text"):
            return [TextDelta(text=str(block["text"]))]
        return []

    def _block_delta(self, event: dict[str, Any]) -> list[StreamEvent]:
        index = self._index(event)
        block = self._blocks.get(index)
        delta = as_object(event.get("delta")) or {}
        if block is None:
            raise malformed(wire.PROVIDER, "delta for a block that never started")
        kind = delta.get("type")
        if kind == "text_delta" and isinstance(delta.get("text"), str):
            block["text"] = str(block.get("text", "")) + delta["text"]
            return [TextDelta(text=delta["text"])]
        if kind == "input_json_delta" and isinstance(delta.get("partial_json"), str):
            self._partial_json.setdefault(index, []).append(delta["partial_json"])
        elif kind == "thinking_delta" and isinstance(delta.get("thinking"), str):
            block["thinking"] = str(block.get("thinking", "")) + delta["thinking"]
        return []

    def result(self) -> ChatResponse:
        if not self._started:
            raise malformed(wire.PROVIDER, "stream without message_start")
        if not self.stopped and self._stop is None:
            # A cleanly closed stream without `message_stop` or a stop reason was cut short;
            # the partial reply must not pass for a complete one.
            raise ProviderConnectionError(wire.PROVIDER, "stream ended before the reply finished")
        blocks: list[dict[str, Any]] = []
        for index, block in sorted(self._blocks.items()):
            if block.get("type") == "tool_use":
                raw = "".join(self._partial_json.get(index, []))
                try:
                    arguments: Any = json.loads(raw) if raw.strip() else block.get("input", {})
                except ValueError:
                    arguments = {"_raw": raw}
                block = {**block, "input": as_object(arguments) or {"_raw": raw}}
            blocks.append(block)
        return ChatResponse(
            message=wire.build_message(blocks),
            finish_reason=wire.normalise_stop_reason(self._stop),
            usage=wire.decode_usage(self._usage)
            if self._usage
            else Usage(input_tokens=0, output_tokens=0),
            model=self._model,
            response_id=self._id,
            provider_finish_reason=self._stop,
        )


def _stream_error(event: dict[str, Any]) -> ProviderError:
    error = as_object(event.get("error")) or {}
    kind = error.get("type")
    status = wire.ERROR_STATUS.get(kind, 500) if isinstance(kind, str) else 500
    return error_from_response(
        wire.PROVIDER, status, httpx.Headers(), _json.dumps_bytes({"type": "error", "error": error})
    )
