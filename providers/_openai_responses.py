"""Request bodies in the OpenAI Responses format, used by the input-token count endpoint.

`POST /v1/responses/input_tokens` takes a Responses-style body, not a chat-completions one, so
the authoritative counter translates the same `ChatRequest` into that shape.
"""

from __future__ import annotations

from typing import Any

from providers import _json
from providers._openai_wire import response_format_body
from providers.types import ChatRequest, ToolChoiceTool
from vocabulary.errors import ConfigurationError
from vocabulary.messages import FilePart, ImagePart, Message, TextPart


def _input_part(part: TextPart | ImagePart | FilePart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        return {"type": "input_image", "image_url": part.url, "detail": part.detail or "auto"}
    if part.url.startswith("data:"):
        file: dict[str, Any] = {"type": "input_file", "file_data": part.url}
    else:
        file = {"type": "input_file", "file_url": part.url}
    if part.name is not None:
        file["filename"] = part.name
    return file


def _items(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        if message.tool_call_id is None:
            raise ConfigurationError("a tool message needs tool_call_id")
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": message.text,
            }
        ]
    if message.role == "assistant":
        items: list[dict[str, Any]] = []
        if message.text:
            items.append({"role": "assistant", "content": message.text})
        items.extend(
            {
                "type": "function_call",
                "call_id": call.tool_call_id,
                "name": call.tool_name,
                "arguments": _json.dumps(call.input),
            }
            for call in message.tool_calls
        )
        return items
    if isinstance(message.content, str) or message.role == "system":
        return [{"role": message.role, "content": message.text}]
    parts = [
        _input_part(p) for p in message.parts if isinstance(p, TextPart | ImagePart | FilePart)
    ]
    return [{"role": message.role, "content": parts}]


def encode_count_request(request: ChatRequest) -> dict[str, Any]:
    """The body of `POST /responses/input_tokens` for `request`."""
    body: dict[str, Any] = {
        "model": request.model,
        "input": [item for m in request.messages for item in _items(m)],
    }
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "name": t.name,
                **({"description": t.description} if t.description is not None else {}),
                "parameters": t.parameters,
            }
            for t in request.tools
        ]
    # The APIs reject a tool choice without tools, and with no tools there is none to make.
    if request.tool_choice is not None and request.tools:
        choice = request.tool_choice
        body["tool_choice"] = (
            {"type": "function", "name": choice.name}
            if isinstance(choice, ToolChoiceTool)
            else choice
        )
    if request.response_format is not None:
        spec = response_format_body(request.response_format)["json_schema"]
        body["text"] = {"format": {"type": "json_schema", **spec}}
    return body
