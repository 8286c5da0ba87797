"""Public home of the message model (defined in `vocabulary.messages`)."""

from vocabulary.messages import (
    FilePart,
    ImagePart,
    JsonValue,
    Message,
    Part,
    ReasoningPart,
    Role,
    TextPart,
    ToolCallPart,
)

__all__ = [
    "FilePart",
    "ImagePart",
    "JsonValue",
    "Message",
    "Part",
    "ReasoningPart",
    "Role",
    "TextPart",
    "ToolCallPart",
]
