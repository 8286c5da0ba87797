"""Whole-request token estimates from per-message counts.

`estimate_request` adds up the classes the planner reasons about: each message (cached counts
may be passed in), tool definitions, the structured-output schema and the fixed per-request
framing. It tokenizes only what it has not been given.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from providers import _json
from providers._openai_wire import tool_function
from providers.counting import (
    ANTHROPIC_TOKENS_PER_TOOL,
    ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS,
    OPENAI_TOKENS_PER_TOOL,
    Confidence,
    TokenCounter,
    message_key,
)
from providers.types import ChatRequest


class RequestEstimate(BaseModel):
    """A content-free token estimate of one request.

    Attributes:
        total: Sum of every class below.
        messages: Per-message content counts (as stored with messages), in request order.
        message_structure: Framing around the messages (roles, separators, tool-call wrappers).
        tools: Tool definitions, with any hidden tool prompt.
        output_schema: The structured-output schema.
        overhead: Fixed per-request framing.
        encoding_name: Encoding the counts were made with.
        confidence: The counter's confidence.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    total: int
    messages: list[int]
    message_structure: int
    tools: int
    output_schema: int
    overhead: int
    encoding_name: str
    confidence: Confidence


def estimate_tools(request: ChatRequest, counter: TokenCounter) -> int:
    """Tokens of the request's tool definitions as the counter's format renders them."""
    if not request.tools:
        return 0
    if counter.message_format == "anthropic":
        total = ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS
        for tool in request.tools:
            spec: dict[str, object] = {"name": tool.name}
            if tool.description is not None:
                spec["description"] = tool.description
            spec["input_schema"] = tool.parameters
            total += counter.count_definition(_json.dumps(spec)) + ANTHROPIC_TOKENS_PER_TOOL
        return total
    return sum(
        counter.count_definition(_json.dumps(tool_function(t.name, t.description, t.parameters)))
        + OPENAI_TOKENS_PER_TOOL
        for t in request.tools
    )


def estimate_request(
    request: ChatRequest, counter: TokenCounter, *, known: Mapping[str, int] | None = None
) -> RequestEstimate:
    """Estimate the input tokens of `request`.

    Args:
        request: The request to measure.
        counter: Counter for the target model's encoding and format.
        known: Stored per-message counts for this encoding, keyed by `message_key`; only
            messages missing from it are tokenized.
    """
    if known:
        fresh = counter.count_new_messages(request.messages, known)
        per_message = [
            known[key] if key in known else fresh[key]
            for key in (message_key(m) for m in request.messages)
        ]
    else:
        # Nothing cached: skip computing keys (a content hash for messages without ids).
        per_message = counter.count_messages(request.messages)
    tools = estimate_tools(request, counter)
    schema = (
        counter.count_definition(_json.dumps(request.response_format))
        if request.response_format is not None
        else 0
    )
    structure = sum(counter.message_structure_tokens(m) for m in request.messages)
    overhead = counter.tokens_per_request
    return RequestEstimate(
        total=sum(per_message) + structure + tools + schema + overhead,
        messages=per_message,
        message_structure=structure,
        tools=tools,
        output_schema=schema,
        overhead=overhead,
        encoding_name=counter.encoding_name,
        confidence=counter.confidence,
    )
