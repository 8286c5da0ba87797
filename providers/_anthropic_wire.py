"""The Anthropic Messages wire format: request bodies, responses and stream events."""

from __future__ import annotations

from typing import Any

from providers._errors import malformed
from providers._json import as_list, as_object
from providers.types import ChatRequest, ChatResponse, ToolChoiceTool, Usage
from vocabulary.errors import ConfigurationError
from vocabulary.messages import FilePart, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart

PROVIDER = "anthropic"
ANTHROPIC_VERSION = "2023-06-01"
"""Value of the `anthropic-version` header."""
STRUCTURED_OUTPUTS_BETA = "structured-outputs-2025-11-13"
"""`anthropic-beta` flag of the original `output_format` field (before `output_config`)."""

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_calls",
    "refusal": "refusal",
    "model_context_window_exceeded": "context_overflow",
}
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""HTTP status Anthropic pairs with each error type (used for in-stream errors)."""


def _source(url: str, media_type: str | None) -> dict[str, Any]:
    if url.startswith("data:"):
        header, _, data = url.partition(",")
        declared = header.removeprefix("data:").split(";")[0]
        if ";base64" not in header:
            raise ConfigurationError("Anthropic accepts data: URLs only base64-encoded")
        return {"type": "base64", "media_type": media_type or declared, "data": data}
    return {"type": "url", "url": url}


def _block(part: TextPart | ImagePart | FilePart | ToolCallPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "image", "source": _source(part.url, part.media_type)}
    if isinstance(part, FilePart):
        return {"type": "document", "source": _source(part.url, part.media_type)}
    return {
        "type": "tool_use",
        "id": part.tool_call_id,
        "name": part.tool_name,
        "input": part.input,
    }


def _blocks(message: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ReasoningPart):
            continue  # thinking blocks need the provider's signature to be sent back
        if isinstance(part, TextPart) and not part.text:
            continue  # empty text blocks are rejected
        if isinstance(part, ToolCallPart) and message.role != "assistant":
            raise ConfigurationError(f"a {message.role} message cannot carry tool calls")
        blocks.append(_block(part))
    return blocks


def _tool_result(message: Message) -> dict[str, Any]:
    if message.tool_call_id is None:
        raise ConfigurationError("a tool message needs tool_call_id")
    parts = message.parts
    content: Any = message.text
    if any(not isinstance(p, TextPart) for p in parts):
        content = _blocks(message)
    result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": content,
    }
    if message.metadata.get("is_error") is True:
        result["is_error"] = True
    return result


def encode_messages(messages: list[Message]) -> tuple[list[str], list[dict[str, Any]]]:
    """Split canonical messages into `(system texts, Messages-API messages)`.

    System messages are lifted out, tool results travel as user content, and consecutive
    same-role turns are merged (the API wants alternating roles).
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                system.append(message.text)
            continue
        role = "assistant" if message.role == "assistant" else "user"
        if message.role == "tool":
            content: Any = [_tool_result(message)]
        elif isinstance(message.content, str):
            content = message.content
        else:
            content = _blocks(message)
        if not content:
            continue  # the API rejects empty turns; an empty one carries nothing anyway
        if out and out[-1]["role"] == role:
            previous = out[-1]
            previous["content"] = _as_blocks(previous["content"]) + _as_blocks(content)
        else:
            out.append({"role": role, "content": content})
    return system, out


def _as_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content)


def encode_tool_choice(choice: Any) -> dict[str, Any]:
    """Anthropic's `tool_choice` for ours."""
    if isinstance(choice, ToolChoiceTool):
        return {"type": "tool", "name": choice.name}
    return {"type": {"auto": "auto", "none": "none", "required": "any"}[choice]}


EPHEMERAL = {"type": "ephemeral"}


def mark_cache_breakpoints(body: dict[str, Any]) -> None:
    """Put `cache_control` on the last tool, the system prompt and the newest message.

    Anthropic caches the prompt prefix up to each marked block. Marking the newest message
    lets the next turn of the same thread read the whole earlier conversation from the cache;
    tools and system come first in the prefix, so they are cached too. Three of the four
    allowed breakpoints are used.
    """
    tools = as_list(body.get("tools"))
    if tools:
        tools[-1] = {**(as_object(tools[-1]) or {}), "cache_control": EPHEMERAL}
    system = body.get("system")
    if isinstance(system, str):
        body["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    else:
        blocks = as_list(system)
        if blocks:
            blocks[-1] = {**(as_object(blocks[-1]) or {}), "cache_control": EPHEMERAL}
    messages: list[dict[str, Any]] = body["messages"]
    if messages:
        last = messages[-1]
        content = _as_blocks(last["content"])
        if content:
            content[-1] = {**content[-1], "cache_control": EPHEMERAL}
            messages[-1] = {**last, "content": content}


def encode_request(
    request: ChatRequest,
    *,
    default_max_tokens: int,
    cache_prefix: bool = False,
    structured_output_beta: bool = False,
) -> dict[str, Any]:
    """The JSON body of a Messages call (`max_tokens` is required by the API)."""
    system, messages = encode_messages(request.messages)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_output_tokens or default_max_tokens,
    }
    if system:
        body["system"] = (
            system[0] if len(system) == 1 else [{"type": "text", "text": t} for t in system]
        )
    body["messages"] = messages
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.stop is not None:
        body["stop_sequences"] = list(request.stop)
    # The Messages API has no seed: it is left out (the receipt names it as ignored).
    if request.tools:
        body["tools"] = [
            tool_definition(t.name, t.description, t.parameters) for t in request.tools
        ]
    # The APIs reject a tool choice without tools, and with no tools there is none to make.
    if request.tool_choice is not None and request.tools:
        body["tool_choice"] = encode_tool_choice(request.tool_choice)
    if request.response_format is not None:
        schema_format = {"type": "json_schema", "schema": request.response_format}
        if structured_output_beta:
            body["output_format"] = schema_format
        else:
            body["output_config"] = {"format": schema_format}
    if request.stream:
        body["stream"] = True
    for name, value in request.extra.items():
        # Provider-specific fields never replace one the adapter set.
        body.setdefault(name, value)
    if cache_prefix:
        mark_cache_breakpoints(body)
    return body


def tool_definition(
    name: str, description: str | None, parameters: dict[str, Any]
) -> dict[str, Any]:
    """One entry of `tools`."""
    tool: dict[str, Any] = {"name": name}
    if description is not None:
        tool["description"] = description
    tool["input_schema"] = parameters
    return tool


def normalise_stop_reason(raw: str | None) -> str:
    """Our finish reason for Anthropic's `stop_reason`."""
    return _STOP_REASONS.get(raw or "", "other")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def decode_usage(data: Any) -> Usage:
    """`Usage` with cache reads and writes folded into `input_tokens`."""
    usage = as_object(data) or {}
    read = _count(usage.get("cache_read_input_tokens"))
    write = _count(usage.get("cache_creation_input_tokens"))
    return Usage(
        input_tokens=_count(usage.get("input_tokens")) + read + write,
        output_tokens=_count(usage.get("output_tokens")),
        cache_read_tokens=read,
        cache_write_tokens=write,
    )


def build_message(blocks: list[dict[str, Any]]) -> Message:
    """The assistant message for decoded content blocks."""
    parts: list[TextPart | ToolCallPart | ReasoningPart] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            if block["text"]:
                parts.append(TextPart(text=block["text"]))
        elif kind == "tool_use":
            name, call_id, arguments = block.get("name"), block.get("id"), block.get("input")
            if not isinstance(name, str) or not isinstance(call_id, str):
                raise malformed(PROVIDER, "tool_use block without id or name")
            parts.append(
                ToolCallPart(tool_call_id=call_id, tool_name=name, input=as_object(arguments) or {})
            )
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            parts.append(ReasoningPart(text=block["thinking"]))
    if all(isinstance(p, TextPart) for p in parts):
        return Message(
            role="assistant", content="".join(p.text for p in parts if isinstance(p, TextPart))
        )
    return Message(role="assistant", content=list(parts))


def decode_response(data: dict[str, Any]) -> ChatResponse:
    """A `ChatResponse` from a non-streamed Messages body."""
    content = as_list(data.get("content"))
    if content is None:
        raise malformed(PROVIDER, "content is not a list")
    blocks = [as_object(b) for b in content]
    if any(b is None for b in blocks):
        raise malformed(PROVIDER, "content block is not an object")
    stop: Any = data.get("stop_reason")
    model: Any = data.get("model")
    response_id: Any = data.get("id")
    return ChatResponse(
        message=build_message([b for b in blocks if b is not None]),
        finish_reason=normalise_stop_reason(stop if isinstance(stop, str) else None),
        usage=decode_usage(data.get("usage")),
        model=model if isinstance(model, str) else "",
        response_id=response_id if isinstance(response_id, str) else None,
        provider_finish_reason=stop if isinstance(stop, str) else None,
    )
