"""Provider-neutral canonical messages, as stored in Threads and sent to providers.

A message has a `role` (`system`, `user`, `assistant`, `tool`), `content` (a string or a
list of typed parts) and optional JSON `metadata`. Tool results are `tool` messages that name
the call they answer in `tool_call_id`; assistant tool calls are `tool-call` parts.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]

JsonValue = Any
"""A JSON-compatible value (validated by the stores, which serialise it canonically)."""


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Part):
    """Plain text."""

    kind: Literal["text"] = "text"
    text: str


class ImagePart(_Part):
    """An image by URL (remote locator or `data:` URL).

    Attributes:
        url: Where the bytes are.
        media_type: MIME type, when known.
        detail: Provider detail hint (`low`, `high`, `auto`).
        width: Pixel width, when known (improves the token estimate).
        height: Pixel height, when known.
    """

    kind: Literal["image"] = "image"
    url: str
    media_type: str | None = None
    detail: Literal["low", "high", "auto"] | None = None
    width: int | None = Field(default=None, ge=1)
    height: int | None = Field(default=None, ge=1)


class FilePart(_Part):
    """A file (PDF, audio, ...) by URL."""

    kind: Literal["file"] = "file"
    url: str
    media_type: str | None = None
    name: str | None = None


class ToolCallPart(_Part):
    """An assistant's request to call a tool.

    Attributes:
        tool_call_id: Id that the matching `tool` message answers.
        tool_name: Name of the tool.
        input: JSON arguments.
    """

    kind: Literal["tool-call"] = "tool-call"
    tool_call_id: str
    tool_name: str
    input: dict[str, JsonValue] = Field(default_factory=dict[str, JsonValue])


class ReasoningPart(_Part):
    """Model reasoning text, kept for providers that accept it back."""

    kind: Literal["reasoning"] = "reasoning"
    text: str


Part = Annotated[
    TextPart | ImagePart | FilePart | ToolCallPart | ReasoningPart,
    Field(discriminator="kind"),
]


class Message(BaseModel):
    """One canonical message.

    Attributes:
        id: Caller-chosen stable id (the key of idempotent appends); generated when omitted.
        role: `system`, `user`, `assistant` or `tool`.
        content: A string or a list of parts.
        metadata: Application JSON stored with the message (part of its identity).
        tool_call_id: For `tool` messages, the call this result answers.
        tool_name: For `tool` messages, the tool's name.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str | None = None
    role: Role
    content: str | list[Part] = ""
    metadata: dict[str, JsonValue] = Field(default_factory=dict[str, JsonValue])
    tool_call_id: str | None = None
    tool_name: str | None = None

    @property
    def parts(self) -> list[TextPart | ImagePart | FilePart | ToolCallPart | ReasoningPart]:
        """The content as a list of parts (a string becomes one text part)."""
        if isinstance(self.content, str):
            return [TextPart(text=self.content)] if self.content else []
        return list(self.content)

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        if isinstance(self.content, str):
            return self.content
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        """The tool-call parts of an assistant message."""
        return [p for p in self.parts if isinstance(p, ToolCallPart)]
