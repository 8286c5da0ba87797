"""The OpenAI chat-completions wire format: request bodies, responses and stream chunks."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from providers import _json
from providers._errors import malformed
from providers._json import as_list, as_object
from providers.types import ChatRequest, ChatResponse, ToolChoiceTool, Usage
from vocabulary.errors import ConfigurationError
from vocabulary.messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart

PROVIDER = "openai"

MaxTokensField = Literal["max_completion_tokens", "max_tokens", "both"]
"""Where the output cap goes: OpenAI reads `max_completion_tokens`; llama.cpp, vLLM, Ollama
and most other OpenAI-compatible servers read only `max_tokens`; `both` sends the two."""

OutputCapField = Literal["auto", "max_completion_tokens", "max_tokens", "both"]
"""A configured cap field; `auto` picks by host (see `output_cap_field_for`)."""

OPENAI_HOSTS = frozenset({"api.openai.com"})
"""Hosts that are OpenAI itself (and reject `max_tokens` for reasoning models)."""

_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")


def _user_part(part: TextPart | ImagePart | FilePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        image: dict[str, Any] = {"url": part.url}
        if part.detail is not None:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if not part.url.startswith("data:"):
        raise ConfigurationError("OpenAI chat completions accepts files only as data: URLs")
    file: dict[str, Any] = {"file_data": part.url}
    if part.name is not None:
        file["filename"] = part.name
    return {"type": "file", "file": file}


def encode_message(message: Message) -> dict[str, Any]:
    """One canonical message as a chat-completions message."""
    if message.role == "tool":
        if message.tool_call_id is None:
            raise ConfigurationError("a tool message needs tool_call_id")
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.text}
    if message.role == "assistant":
        calls = message.tool_calls
        # `null` content is only valid beside tool calls; otherwise send an empty string.
        out: dict[str, Any] = {
            "role": "assistant",
            "content": message.text or (None if calls else ""),
        }
        if calls:
            out["tool_calls"] = [
                {
                    "id": call.tool_call_id,
                    "type": "function",
                    "function": {"name": call.tool_name, "arguments": _json.dumps(call.input)},
                }
                for call in calls
            ]
        return out
    if isinstance(message.content, str):
        return {"role": message.role, "content": message.content}
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, ReasoningPart):
            continue  # not accepted back by chat completions
        if isinstance(part, ToolCallPart):
            raise ConfigurationError(f"a {message.role} message cannot carry tool calls")
        if message.role == "system" and not isinstance(part, TextPart):
            raise ConfigurationError("system messages accept text only")
        parts.append(_user_part(part))
    if message.role == "system":
        return {"role": "system", "content": message.text}
    return {"role": message.role, "content": parts}


def response_format_body(schema: dict[str, Any]) -> dict[str, Any]:
    """`response_format` for a JSON schema; strict when the schema closes its object."""
    title = schema.get("title")
    name = _SCHEMA_NAME.sub("_", title)[:64] if isinstance(title, str) and title else "response"
    spec: dict[str, Any] = {"name": name, "schema": schema}
    # Strict mode rejects schemas that leave objects open, so only ask for it when the schema
    # already satisfies that rule at its root.
    if schema.get("additionalProperties") is False:
        spec["strict"] = True
    return {"type": "json_schema", "json_schema": spec}


def output_cap_field_for(base_url: str, configured: OutputCapField = "auto") -> MaxTokensField:
    """The body field that carries the output cap for a server.

    Args:
        base_url: The API root the adapter posts to.
        configured: An explicit choice, or `auto` to pick by host: `max_completion_tokens`
            for OpenAI itself, `max_tokens` for every other OpenAI-compatible server (they
            ignore the newer field and would generate without a cap).

    Returns:
        The field (or `both`) to send.
    """
    if configured != "auto":
        return configured
    host = (urlsplit(base_url).hostname or "").lower()
    return "max_completion_tokens" if host in OPENAI_HOSTS else "max_tokens"


def encode_request(
    request: ChatRequest,
    *,
    max_tokens_field: MaxTokensField = "max_completion_tokens",
    stream_usage: bool = True,
) -> dict[str, Any]:
    """The JSON body of a chat-completions call."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [encode_message(m) for m in request.messages],
    }
    if request.max_output_tokens is not None:
        if max_tokens_field in ("max_completion_tokens", "both"):
            body["max_completion_tokens"] = request.max_output_tokens
        if max_tokens_field in ("max_tokens", "both"):
            body["max_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop is not None:
        body["stop"] = list(request.stop)
    if request.seed is not None:
        body["seed"] = request.seed
    if request.tools:
        body["tools"] = [
            {"type": "function", "function": tool_function(t.name, t.description, t.parameters)}
            for t in request.tools
        ]
    # The APIs reject a tool choice without tools, and with no tools there is none to make.
    if request.tool_choice is not None and request.tools:
        choice = request.tool_choice
        body["tool_choice"] = (
            {"type": "function", "function": {"name": choice.name}}
            if isinstance(choice, ToolChoiceTool)
            else choice
        )
    if request.response_format is not None:
        body["response_format"] = response_format_body(request.response_format)
    if request.stream:
        body["stream"] = True
        if stream_usage:
            body["stream_options"] = {"include_usage": True}
    return with_extra(body, request.extra)


def with_extra(body: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`body` plus provider-specific fields; a field already set is never replaced."""
    for name, value in extra.items():
        body.setdefault(name, value)
    return body


def tool_function(name: str, description: str | None, parameters: dict[str, Any]) -> dict[str, Any]:
    """The `function` object of one tool definition."""
    function: dict[str, Any] = {"name": name}
    if description is not None:
        function["description"] = description
    function["parameters"] = parameters
    return function


def normalise_finish_reason(raw: str | None) -> str:
    """Our finish reason for OpenAI's `finish_reason`."""
    if raw is None:
        return "other"
    return _FINISH_REASONS.get(raw, "other")


def decode_usage(data: Any) -> Usage:
    """`Usage` from a chat-completions `usage` object (missing fields count as zero)."""
    if not isinstance(data, dict):
        return Usage(input_tokens=0, output_tokens=0)
    usage = cast(dict[str, Any], data)
    details: Any = usage.get("prompt_tokens_details")
    cached = cast(dict[str, Any], details).get("cached_tokens") if isinstance(details, dict) else 0
    return Usage(
        input_tokens=_int(usage.get("prompt_tokens")),
        output_tokens=_int(usage.get("completion_tokens")),
        cache_read_tokens=_int(cached),
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as an object; unparsable text is kept under `_raw`."""
    if isinstance(raw, dict):
        return cast(dict[str, Any], raw)
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        value: Any = json.loads(raw)
    except ValueError:
        # Models occasionally emit invalid JSON; keeping it lets validation report it as a
        # tool error instead of failing the whole call.
        return {"_raw": raw}
    return cast(dict[str, Any], value) if isinstance(value, dict) else {"_raw": raw}


def build_message(text: str, calls: list[ToolCallPart], reasoning: str = "") -> Message:
    """The assistant message for a reply's text, tool calls and reasoning text."""
    if not calls and not reasoning:
        return Message(role="assistant", content=text)
    parts: list[TextPart | ToolCallPart | ReasoningPart] = []
    if reasoning:
        parts.append(ReasoningPart(text=reasoning))
    if text:
        parts.append(TextPart(text=text))
    parts.extend(calls)
    return Message(role="assistant", content=list(parts))


REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where OpenAI-compatible servers (vLLM, llama.cpp, Ollama, DeepSeek) put reasoning text."""


def reasoning_of(message: dict[str, Any]) -> str:
    """Reasoning text a server returned beside the content, if any."""
    for field in REASONING_FIELDS:
        value = message.get(field)
        if isinstance(value, str) and value:
            return value
    return ""


def content_text(content: Any) -> str:
    """Text of a `content` that is a string or a list of text parts."""
    if isinstance(content, str):
        return content
    parts = as_list(content) or []
    return "".join(
        str(p.get("text", ""))
        for p in (as_object(x) or {} for x in parts)
        if p.get("type") == "text"
    )


def decode_response(data: dict[str, Any]) -> ChatResponse:
    """A `ChatResponse` from a non-streamed chat-completions body."""
    choices: Any = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise malformed(PROVIDER, "no choices")
    choice = as_object(cast(list[Any], choices)[0]) or {}
    message = as_object(choice.get("message"))
    if message is None:
        raise malformed(PROVIDER, "choice without message")
    text = content_text(message.get("content"))
    refusal: Any = message.get("refusal")
    calls: list[ToolCallPart] = []
    raw_calls: Any = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise malformed(PROVIDER, "tool_calls is not a list")
    for index, raw in enumerate(cast(list[Any], raw_calls)):
        raw = as_object(raw) or {}
        function = as_object(raw.get("function"))
        if function is None or not isinstance(function.get("name"), str):
            raise malformed(PROVIDER, "tool call without a function name")
        call_id = raw.get("id")
        calls.append(
            ToolCallPart(
                tool_call_id=call_id if isinstance(call_id, str) and call_id else f"call_{index}",
                tool_name=function["name"],
                input=parse_arguments(function.get("arguments")),
            )
        )
    raw_finish: Any = choice.get("finish_reason")
    finish = normalise_finish_reason(raw_finish if isinstance(raw_finish, str) else None)
    if isinstance(refusal, str) and refusal and not text:
        text, finish = refusal, "refusal"
    model: Any = data.get("model")
    response_id: Any = data.get("id")
    return ChatResponse(
        message=build_message(text, calls, reasoning_of(message)),
        finish_reason=finish,
        usage=decode_usage(data.get("usage")),
        model=model if isinstance(model, str) else "",
        response_id=response_id if isinstance(response_id, str) else None,
        provider_finish_reason=raw_finish if isinstance(raw_finish, str) else None,
    )
