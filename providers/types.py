"""Provider-neutral request and response models and the `ChatProvider` seam.

Adapters translate these to and from one wire format each. Everything is a frozen pydantic
model so a request can be hashed, logged by shape and replayed exactly.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from vocabulary.messages import Message

FinishReason = Literal[
    "stop", "length", "tool_calls", "content_filter", "refusal", "context_overflow", "other"
]
"""Normalised finish reasons; the provider's own value is kept in `provider_finish_reason`."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolSpec(_Frozen):
    """A tool the model may call.

    Attributes:
        name: Tool name, as the model will call it.
        description: What the tool does, shown to the model.
        parameters: JSON schema of the arguments object.
    """

    name: str
    description: str | None = None
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolChoiceTool(_Frozen):
    """Force one named tool."""

    name: str


ToolChoice = Literal["auto", "none", "required"] | ToolChoiceTool
"""`auto` (model decides), `none`, `required` (some tool), or one named tool."""


class ChatRequest(_Frozen):
    """One provider call.

    Attributes:
        model: The provider's own model name (no `provider:` prefix).
        messages: Canonical messages, system messages included, in order.
        max_output_tokens: Output cap; adapters that require one use their default.
        tools: Tools offered to the model.
        tool_choice: How the model must use the tools; `None` leaves the provider default.
        response_format: A JSON schema the reply must match (structured output).
        temperature: Sampling temperature; `None` leaves the provider default.
        top_p: Nucleus sampling mass; `None` leaves the provider default.
        stop: Stop sequences; `None` sends none.
        seed: Sampling seed, for providers that take one (others leave it out).
        extra: Provider-specific body fields, merged into the body without replacing a
            field the adapter set.
        stream: Ask the provider to stream; `complete` still returns the assembled reply.
    """

    model: str
    messages: list[Message]
    max_output_tokens: int | None = Field(default=None, ge=1)
    tools: list[ToolSpec] = Field(default_factory=list[ToolSpec])
    tool_choice: ToolChoice | None = None
    response_format: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: list[str] | None = None
    seed: int | None = None
    extra: dict[str, Any] = Field(default_factory=dict[str, Any])
    stream: bool = False


class Usage(_Frozen):
    """Token usage of one call, normalised across providers.

    Attributes:
        input_tokens: All input tokens processed, cache reads and writes included (Anthropic
            reports those separately; they are added here so every provider means the same).
        output_tokens: Generated tokens.
        cache_read_tokens: Part of `input_tokens` served from the prompt cache.
        cache_write_tokens: Part of `input_tokens` written to the prompt cache.
    """

    input_tokens: int = Field(ge=0)
    output_tokens: int = Field(ge=0)
    cache_read_tokens: int = Field(default=0, ge=0)
    cache_write_tokens: int = Field(default=0, ge=0)


class ChatResponse(_Frozen):
    """The assembled reply of one call.

    Attributes:
        message: The assistant message (text and tool-call parts).
        finish_reason: Normalised reason (`stop`, `length`, `tool_calls`, ...).
        usage: Normalised usage.
        model: The model name the provider reported.
        response_id: The provider's id for the response, if any.
        provider_finish_reason: The provider's own finish or stop reason.
    """

    message: Message
    finish_reason: str
    usage: Usage
    model: str
    response_id: str | None = None
    provider_finish_reason: str | None = None


class TextDelta(_Frozen):
    """A piece of streamed assistant text."""

    kind: Literal["text"] = "text"
    text: str


class ToolCallDelta(_Frozen):
    """A tool call began streaming (its arguments arrive in the final response).

    Attributes:
        index: Position of the call among the reply's tool calls (0 for the first).
        tool_call_id: The call's id.
        tool_name: The tool being called.
    """

    kind: Literal["tool-call"] = "tool-call"
    index: int
    tool_call_id: str
    tool_name: str


class StreamDone(_Frozen):
    """The stream finished; `response` is what `complete` would have returned."""

    kind: Literal["done"] = "done"
    response: ChatResponse


StreamEvent = TextDelta | ToolCallDelta | StreamDone
"""Events yielded by `stream`, ending with exactly one `StreamDone`."""


class SummaryRequest(_Frozen):
    """Input of a provider-native compaction call.

    Attributes:
        model: The provider's model name.
        messages: The messages to compact, in order.
        instructions: Optional guidance for the summary.
        max_output_tokens: Output cap for the summary.
    """

    model: str
    messages: list[Message]
    instructions: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)


@runtime_checkable
class ChatProvider(Protocol):
    """What the activity layer needs from a model provider."""

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the assembled reply.

        Raises:
            ProviderError: Any failure, classified (see `crux.errors`).
        """
        ...


@runtime_checkable
class StreamingChatProvider(ChatProvider, Protocol):
    """A provider that can also stream deltas."""

    def stream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Send `request` with streaming on and yield deltas, then one `StreamDone`."""
        ...


@runtime_checkable
class AuthoritativeCounter(Protocol):
    """A provider endpoint that counts a request's input tokens exactly.

    Calls cost a round trip (and count against rate limits), so use them only near a decision
    boundary, once per sealed candidate.
    """

    async def count_tokens(self, request: ChatRequest) -> int:
        """The provider's own input-token count for `request`.

        Raises:
            ProviderError: Classified failure (see `crux.errors`).
        """
        ...


@runtime_checkable
class SummarizingProvider(Protocol):
    """A provider that may offer a native compaction API."""

    async def summarize(self, request: SummaryRequest) -> Message | None:
        """Return a provider-made summary message, or `None` when not offered."""
        ...
