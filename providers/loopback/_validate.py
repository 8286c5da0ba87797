"""Request checks the real APIs enforce, so a loopback server rejects what they would.

The checks that matter most are tool-call pairing (every call answered before the next turn,
no result without its call) and, for Anthropic, alternating roles: both providers reject such
requests with a 400, and a permissive test double would hide the bug.
"""

from __future__ import annotations

from typing import Any

from providers._json import as_list, as_object


def openai_problem(body: Any) -> str | None:
    """Why OpenAI would reject this chat-completions body, or `None`."""
    data = as_object(body)
    if data is None:
        return "body must be a JSON object"
    if not isinstance(data.get("model"), str):
        return "'model' is required"
    messages = as_list(data.get("messages"))
    if not messages:
        return "'messages' must be a non-empty array"
    if "tool_choice" in data and not data.get("tools"):
        return "'tool_choice' is only allowed when 'tools' are specified"
    problem = _response_format_problem(data.get("response_format"))
    if problem is not None:
        return problem
    pending: set[str] = set()
    for index, raw in enumerate(messages):
        message = as_object(raw) or {}
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"messages[{index}].role is invalid"
        if role == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in pending:
                return (
                    f"messages[{index}]: messages with role 'tool' must be a response to a "
                    "preceding message with 'tool_calls'"
                )
            pending.discard(call_id)
            continue
        if pending:
            return (
                f"messages[{index}]: an assistant message with 'tool_calls' must be followed by "
                "tool messages responding to each 'tool_call_id'"
            )
        if role == "assistant":
            for call in as_list(message.get("tool_calls")) or []:
                call_id = (as_object(call) or {}).get("id")
                if isinstance(call_id, str):
                    pending.add(call_id)
    if pending:
        return "tool_calls without tool messages at the end of 'messages'"
    return None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [as_object(b) or {} for b in as_list(content) or []]


def _response_format_problem(raw: Any) -> str | None:
    """OpenAI's checks of a `json_schema` response format (name and object schema)."""
    if raw is None:
        return None
    shape = as_object(raw) or {}
    if shape.get("type") != "json_schema":
        return None
    spec = as_object(shape.get("json_schema")) or {}
    name = spec.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= 64:
        return "response_format.json_schema.name: a name of 1-64 characters is required"
    if as_object(spec.get("schema")) is None:
        return "response_format.json_schema.schema: an object schema is required"
    return None


def _forced_tool_problem(data: dict[str, Any]) -> str | None:
    """The Messages API's check that a forced tool is one of the offered tools."""
    choice = as_object(data.get("tool_choice"))
    if choice is None or choice.get("type") != "tool":
        return None
    offered = {(as_object(t) or {}).get("name") for t in as_list(data.get("tools")) or []}
    if choice.get("name") not in offered:
        return "tool_choice.name: the forced tool must be one of the offered tools"
    return None


def anthropic_problem(body: Any) -> str | None:
    """Why the Messages API would reject this body, or `None`."""
    data = as_object(body)
    if data is None:
        return "body must be a JSON object"
    if not isinstance(data.get("model"), str):
        return "model: Field required"
    max_tokens = data.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: Field required"
    messages = as_list(data.get("messages"))
    if not messages:
        return "messages: at least one message is required"
    problem = _forced_tool_problem(data)
    if problem is not None:
        return problem
    previous_role: str | None = None
    open_calls: set[str] = set()
    for index, raw in enumerate(messages):
        message = as_object(raw) or {}
        role = message.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{index}.role: Input should be 'user' or 'assistant'"
        if role == previous_role:
            return f"messages.{index}: roles must alternate between 'user' and 'assistant'"
        blocks = _blocks(message.get("content"))
        if not blocks:
            return f"messages.{index}: all messages must have non-empty content"
        if role == "user":
            results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if results - open_calls:
                return (
                    f"messages.{index}.content: unexpected `tool_use_id` found in `tool_result` "
                    "blocks; each `tool_result` block must have a corresponding `tool_use` "
                    "block in the previous message"
                )
            if open_calls - results:
                return (
                    f"messages.{index}: `tool_use` ids were found without `tool_result` blocks "
                    "immediately after"
                )
            open_calls = set()
        else:
            if open_calls:
                return f"messages.{index}: `tool_use` ids were found without `tool_result` blocks"
            open_calls = {
                str(b.get("id")) for b in blocks if b.get("type") == "tool_use" and b.get("id")
            }
        previous_role = role
    return None
