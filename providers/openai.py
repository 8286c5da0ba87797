"""Adapter for OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp, LM Studio).

The client is a plain `httpx.AsyncClient` owned by the caller (the worker), so connection
pools, timeouts and proxies are configured in one place. No retries happen here.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from typing import Any, cast

import httpx

from providers import _json
from providers import _openai_wire as wire
from providers._errors import error_from_response, malformed
from providers._http import final_response, join_url, load_event_json, post_json, post_sse
from providers._openai_responses import encode_count_request
from providers.types import (
    ChatRequest,
    ChatResponse,
    StreamDone,
    StreamEvent,
    SummaryRequest,
    TextDelta,
    ToolCallDelta,
)
from vocabulary.errors import ProviderConnectionError, ProviderHTTPError
from vocabulary.messages import Message, ToolCallPart

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


class OpenAIChatProvider:
    """`ChatProvider` over `POST {base_url}/chat/completions`.

    Args:
        http: The HTTP client to use (its timeouts apply; it is not closed here).
        base_url: API root including the version, e.g. `http://127.0.0.1:8000/v1`.
        api_key: Sent as a bearer token when given (local servers often need none).
        headers: Extra headers sent with every call (organisation, project, gateway keys).
        max_tokens_field: Where the output cap goes: `auto` (default) sends
            `max_completion_tokens` to api.openai.com and `max_tokens` to every other host
            (llama.cpp, vLLM, Ollama read only that one); `max_completion_tokens`,
            `max_tokens` or `both` force a choice.
        stream_usage: Ask for usage in streams (`stream_options.include_usage`); turn off for
            servers that reject the option (streamed usage is then reported as zero).
        extra_body: Server-specific fields added to every request body (for example vLLM's
            `chat_template_kwargs`); fields the adapter sets itself take precedence.
        provider: The provider label used in errors (`openai` unless configured).
    """

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        base_url: str = DEFAULT_OPENAI_BASE_URL,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        max_tokens_field: wire.OutputCapField = "auto",
        stream_usage: bool = True,
        extra_body: Mapping[str, Any] | None = None,
        provider: str = wire.PROVIDER,
    ):
        self._http = http
        self.base_url = base_url
        self.provider = provider
        self._max_tokens_field: wire.MaxTokensField = wire.output_cap_field_for(
            base_url, max_tokens_field
        )
        self._stream_usage = stream_usage
        self._extra_body = dict(extra_body or {})
        self._headers = {"content-type": "application/json", **(headers or {})}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"

    def encode(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body this adapter sends for `request`."""
        body = wire.encode_request(
            request, max_tokens_field=self._max_tokens_field, stream_usage=self._stream_usage
        )
        return {**self._extra_body, **body}

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Send `request`; with `request.stream` the reply is streamed and assembled.

        Raises:
            ProviderError: Classified failure (see `crux.errors`).
        """
        if request.stream:
            return await final_response(self.stream(request), self.provider)
        url = join_url(self.base_url, "chat/completions")
        headers = {**self._headers, "accept": "application/json"}
        data = await post_json(self._http, self.provider, url, self.encode(request), headers)
        return wire.decode_response(data)

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamEvent]:
        """Stream `request`, yielding text and tool-call deltas, then one `StreamDone`."""
        body = self.encode(request.model_copy(update={"stream": True}))
        url = join_url(self.base_url, "chat/completions")
        headers = {**self._headers, "accept": "text/event-stream"}
        assembler = _StreamAssembler(self.provider)
        async with post_sse(self._http, self.provider, url, body, headers) as events:
            async for event in events:
                if event.data.strip() == "[DONE]":
                    assembler.done = True
                    break
                for delta in assembler.add(load_event_json(self.provider, event)):
                    yield delta
        yield StreamDone(response=assembler.result())

    async def count_tokens(self, request: ChatRequest) -> int:
        """Authoritative input tokens from `POST {base_url}/responses/input_tokens`.

        Only OpenAI itself offers this endpoint; use it near a decision boundary, since it
        costs a round trip.

        Raises:
            ProviderError: Classified failure (404 from servers without the endpoint).
        """
        url = join_url(self.base_url, "responses/input_tokens")
        headers = {**self._headers, "accept": "application/json"}
        body = encode_count_request(request)
        data = await post_json(self._http, self.provider, url, body, headers)
        tokens = data.get("input_tokens")
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            raise malformed(self.provider, "input_tokens missing from the count response")
        return tokens

    async def summarize(self, request: SummaryRequest) -> Message | None:
        """Always `None`: chat completions has no compaction API.

        OpenAI's `/responses/compact` returns an opaque, encrypted item that only the Responses
        API accepts back, so it cannot stand in for messages here; the portable summary path
        applies.
        """
        del request
        return None


class _StreamAssembler:
    """Folds chat-completion chunks into deltas and a final `ChatResponse`."""

    def __init__(self, provider: str):
        self._provider = provider
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: str | None = None
        self._usage: Any = None
        self._model = ""
        self._id: str | None = None
        self.done = False

    def add(self, chunk: dict[str, Any]) -> list[StreamEvent]:
        error: Any = chunk.get("error")
        if error is not None:
            raise self._stream_error(error)
        if isinstance(chunk.get("model"), str):
            self._model = chunk["model"]
        if isinstance(chunk.get("id"), str):
            self._id = chunk["id"]
        if chunk.get("usage") is not None:
            self._usage = chunk["usage"]
        choices: Any = chunk.get("choices") or []
        out: list[StreamEvent] = []
        for choice in cast(list[Any], choices):
            if not isinstance(choice, dict):
                raise malformed(self._provider, "stream choice is not an object")
            choice = cast(dict[str, Any], choice)
            if isinstance(choice.get("finish_reason"), str):
                self._finish = choice["finish_reason"]
            delta: Any = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise malformed(self._provider, "stream delta is not an object")
            out.extend(self._delta(cast(dict[str, Any], delta)))
        return out

    def _delta(self, delta: dict[str, Any]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._text.append(content)
            out.append(TextDelta(text=content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str):
            self._refusal.append(refusal)
        reasoning = wire.reasoning_of(delta)
        if reasoning:
            self._reasoning.append(reasoning)
        for raw in cast(list[Any], delta.get("tool_calls") or []):
            if not isinstance(raw, dict):
                raise malformed(self._provider, "tool-call delta is not an object")
            raw = cast(dict[str, Any], raw)
            index = raw.get("index", len(self._calls))
            if not isinstance(index, int):
                raise malformed(self._provider, "tool-call delta without index")
            call = self._calls.setdefault(index, {"id": None, "name": "", "arguments": []})
            function = cast(dict[str, Any], raw.get("function") or {})
            if isinstance(raw.get("id"), str) and raw["id"]:
                call["id"] = raw["id"]
            name = function.get("name")
            if isinstance(name, str) and name:
                started = not call["name"]
                call["name"] += name
                if started:
                    out.append(
                        ToolCallDelta(
                            index=index,
                            tool_call_id=call["id"] or f"call_{index}",
                            tool_name=call["name"],
                        )
                    )
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                call["arguments"].append(arguments)
        return out

    def _stream_error(self, error: Any) -> ProviderHTTPError:
        body = _json.dumps_bytes({"error": error})
        status = 500
        if isinstance(error, dict):
            code: Any = cast(dict[str, Any], error).get("code")
            if isinstance(code, int) and 400 <= code < 600:
                status = code
        return error_from_response(self._provider, status, httpx.Headers(), body)

    def result(self) -> ChatResponse:
        if not self.done and self._finish is None:
            # A cleanly closed stream without `[DONE]` or a finish reason was cut short; the
            # partial reply must not pass for a complete one.
            raise ProviderConnectionError(self._provider, "stream ended before the reply finished")
        text = "".join(self._text)
        calls = [
            ToolCallPart(
                tool_call_id=call["id"] or f"call_{index}",
                tool_name=call["name"],
                input=wire.parse_arguments("".join(call["arguments"])),
            )
            for index, call in sorted(self._calls.items())
        ]
        if any(not call.tool_name for call in calls):
            raise malformed(self._provider, "streamed tool call without a name")
        finish = wire.normalise_finish_reason(self._finish)
        refusal = "".join(self._refusal)
        if refusal and not text:
            text, finish = refusal, "refusal"
        return ChatResponse(
            message=wire.build_message(text, calls, "".join(self._reasoning)),
            finish_reason=finish,
            usage=wire.decode_usage(self._usage),
            model=self._model,
            response_id=self._id,
            provider_finish_reason=self._finish,
        )
