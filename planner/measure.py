"""Measurement constants and pure estimates for one request as a whole.

Token counts of text (system text, message text, tool-call arguments, tool results, tool and
output schemas as JSON) are produced once, outside the planner, by the tokenizer named in the
model profile, and arrive here as data. What the planner adds is what no text count sees:

- **message structure**: the per-message framing each provider family wraps around a message
  (role markers, separators), per tool call and per tool result, and a one-off preamble when
  tools are declared;
- **media**: images and documents, estimated per provider from their dimensions or pages;
- **provider overhead** (`PROVIDER_OVERHEAD_TOKENS`) and the **safety margin** set by the
  counting confidence (see `planner.budget`).

The `MESSAGE_FORMATS` constants are estimates, deliberately rounded up. They are public so the
provider layer can check them against real tokenizer totals for whole requests and adjust.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from pydantic import Field

from planner._base import FrozenModel


class MessageFormat(FrozenModel):
    """Formatting overhead of one provider family, in tokens.

    Attributes:
        per_message: Framing around every message (role marker and separators).
        per_tool_call: Extra framing per tool call in an assistant message (id, name, JSON
            wrapper), on top of the counted arguments.
        per_tool_result: Extra framing of a tool-result message (its call id).
        tools_preamble: Added once when the request declares at least one tool.
        reply_priming: Tokens the provider adds to prime the reply.
    """

    per_message: int = Field(ge=0)
    per_tool_call: int = Field(ge=0)
    per_tool_result: int = Field(ge=0)
    tools_preamble: int = Field(ge=0)
    reply_priming: int = Field(ge=0)


MESSAGE_FORMATS: Mapping[str, MessageFormat] = MappingProxyType(
    {
        # Chat Completions frames each message with about 3 tokens and primes the reply with 3;
        # tool-call ids and names add a handful more per call.
        "openai": MessageFormat(
            per_message=4, per_tool_call=8, per_tool_result=6, tools_preamble=16, reply_priming=3
        ),
        # Anthropic Messages adds a tool-use system preamble of a few hundred tokens whenever
        # tools are declared; per-block framing is a little heavier than OpenAI's.
        "anthropic": MessageFormat(
            per_message=5, per_tool_call=10, per_tool_result=8, tools_preamble=350, reply_priming=3
        ),
        # The offline demo provider is measured with the OpenAI framing it imitates.
        "offline": MessageFormat(
            per_message=4, per_tool_call=8, per_tool_result=6, tools_preamble=16, reply_priming=3
        ),
    }
)
"""Per-provider-family message formatting overhead (read-only; a request may override it)."""

DEFAULT_MESSAGE_FORMAT = MessageFormat(
    per_message=6, per_tool_call=12, per_tool_result=8, tools_preamble=400, reply_priming=4
)
"""Formatting overhead assumed for an unknown provider family (the largest of the known)."""


def message_format(provider: str) -> MessageFormat:
    """Return the formatting overhead of a provider family (the default when unknown)."""
    return MESSAGE_FORMATS.get(provider, DEFAULT_MESSAGE_FORMAT)


class ImagePart(FrozenModel):
    """An image in a message, described by its size only.

    Attributes:
        kind: Always `"image"`.
        width: Pixel width.
        height: Pixel height.
        detail: OpenAI detail level; `low` costs a flat base, `high`/`auto` per tile.
    """

    kind: Literal["image"] = "image"
    width: int = Field(gt=0)
    height: int = Field(gt=0)
    detail: Literal["low", "high", "auto"] = "auto"


class DocumentPart(FrozenModel):
    """A paged document (PDF) in a message, described by its page count.

    Attributes:
        kind: Always `"document"`.
        pages: Number of pages.
    """

    kind: Literal["document"] = "document"
    pages: int = Field(gt=0)


MediaPart = ImagePart | DocumentPart
"""A media part the planner can estimate."""

OPENAI_IMAGE_BASE_TOKENS = 85
OPENAI_IMAGE_TILE_TOKENS = 170
ANTHROPIC_IMAGE_PIXELS_PER_TOKEN = 750
ANTHROPIC_IMAGE_MAX_EDGE = 1_568
ANTHROPIC_IMAGE_MAX_TOKENS = 1_600
DOCUMENT_TOKENS_PER_PAGE = 3_000
"""Per-page allowance for documents: text plus a page image, rounded up."""


def _openai_image(part: ImagePart) -> int:
    if part.detail == "low":
        return OPENAI_IMAGE_BASE_TOKENS
    # Fit within 2048x2048, then scale the shortest side down to 768, then count 512 tiles.
    width, height = float(part.width), float(part.height)
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    width, height = width * scale, height * scale
    tiles = math.ceil(width / 512) * math.ceil(height / 512)
    return OPENAI_IMAGE_BASE_TOKENS + OPENAI_IMAGE_TILE_TOKENS * tiles


def _anthropic_image(part: ImagePart) -> int:
    # Images whose long edge exceeds the limit, or whose cost exceeds the token cap, are
    # scaled down before they reach the model.
    scale = min(1.0, ANTHROPIC_IMAGE_MAX_EDGE / max(part.width, part.height))
    pixels = (part.width * scale) * (part.height * scale)
    return min(ANTHROPIC_IMAGE_MAX_TOKENS, math.ceil(pixels / ANTHROPIC_IMAGE_PIXELS_PER_TOKEN))


def estimate_media_tokens(provider: str, part: MediaPart) -> int:
    """Estimate the input tokens of one media part for a provider family.

    OpenAI images: 85 tokens at `low` detail; otherwise 85 plus 170 per 512-pixel tile after
    fitting into 2048x2048 and scaling the short side to 768. Anthropic images: one token per
    750 pixels after scaling the long edge to at most 1568, capped at 1600. Other families
    take the larger of the two. Documents: `DOCUMENT_TOKENS_PER_PAGE` per page everywhere.

    Args:
        provider: Provider family.
        part: The media part.

    Returns:
        The estimated token count.
    """
    if isinstance(part, DocumentPart):
        return DOCUMENT_TOKENS_PER_PAGE * part.pages
    if provider in ("openai", "offline"):
        return _openai_image(part)
    if provider == "anthropic":
        return _anthropic_image(part)
    return max(_openai_image(part), _anthropic_image(part))


def message_tokens(
    provider: str,
    *,
    text_tokens: int = 0,
    tool_call_tokens: int = 0,
    media: tuple[MediaPart, ...] = (),
) -> int:
    """Return the content tokens of one message, to store with it as `HistoryItem.tokens`.

    Structure overhead is not included: the planner adds it per message from
    `MESSAGE_FORMATS`, so a stored count stays valid across provider families that share an
    encoding.

    Args:
        provider: Provider family (selects the media estimate).
        text_tokens: Tokenizer count of the text (or tool-result text).
        tool_call_tokens: Tokenizer count of tool-call names and JSON arguments.
        media: Media parts of the message.

    Returns:
        The content token count.
    """
    return (
        text_tokens
        + tool_call_tokens
        + sum(estimate_media_tokens(provider, part) for part in media)
    )
