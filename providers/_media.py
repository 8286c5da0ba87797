"""Token estimates for media parts, per provider family.

Images are not text, so their cost comes from each provider's published sizing rules. When the
pixel size is unknown we assume the largest image the provider accepts without downscaling
below its limits, so the estimate stays on the safe side.
"""

from __future__ import annotations

import math

from providers._image_size import data_url_image_size
from vocabulary.messages import FilePart, ImagePart

# OpenAI (GPT-4o family): `low` detail is a flat base cost; otherwise the image is scaled to
# fit 2048x2048, then its short side to 768, and billed per 512-pixel tile plus the base.
OPENAI_IMAGE_BASE_TOKENS = 85
OPENAI_IMAGE_TILE_TOKENS = 170
# 768x2048 after scaling is the largest tile grid (2x4) the rule can produce.
OPENAI_IMAGE_UNKNOWN_TOKENS = OPENAI_IMAGE_BASE_TOKENS + 8 * OPENAI_IMAGE_TILE_TOKENS

# Anthropic: about width*height/750 tokens after the long edge is scaled down to 1568 px,
# capped near 1,600 tokens (the API downscales larger images first).
ANTHROPIC_IMAGE_PIXELS_PER_TOKEN = 750
ANTHROPIC_IMAGE_MAX_EDGE = 1_568
ANTHROPIC_IMAGE_MAX_TOKENS = 1_600

# Files (PDF, audio) have no size-independent rule and the page count is unknown here; one
# page at the planner's per-page document allowance keeps them visible in the budget. Near a
# limit the authoritative counter should decide.
FILE_PART_TOKENS = 3_000


def image_dimensions(part: ImagePart) -> tuple[int, int] | None:
    """The image's pixel size: as given, else read from an inline image's header."""
    if part.width is not None and part.height is not None:
        return part.width, part.height
    return data_url_image_size(part.url)


def openai_image_tokens(part: ImagePart) -> int:
    """Estimated prompt tokens for one image sent to an OpenAI-family model."""
    if part.detail == "low":
        return OPENAI_IMAGE_BASE_TOKENS
    size = image_dimensions(part)
    if size is None:
        return OPENAI_IMAGE_UNKNOWN_TOKENS
    width, height = float(size[0]), float(size[1])
    if max(width, height) > 2048:
        scale = 2048 / max(width, height)
        width, height = width * scale, height * scale
    if min(width, height) > 768:
        scale = 768 / min(width, height)
        width, height = width * scale, height * scale
    tiles = math.ceil(width / 512) * math.ceil(height / 512)
    return OPENAI_IMAGE_BASE_TOKENS + tiles * OPENAI_IMAGE_TILE_TOKENS


def anthropic_image_tokens(part: ImagePart) -> int:
    """Estimated prompt tokens for one image sent to an Anthropic model."""
    size = image_dimensions(part)
    if size is None:
        return ANTHROPIC_IMAGE_MAX_TOKENS
    scale = min(1.0, ANTHROPIC_IMAGE_MAX_EDGE / max(size))
    pixels = (size[0] * scale) * (size[1] * scale)
    return min(math.ceil(pixels / ANTHROPIC_IMAGE_PIXELS_PER_TOKEN), ANTHROPIC_IMAGE_MAX_TOKENS)


def file_tokens(part: FilePart) -> int:
    """Flat estimate for a file part (see `FILE_PART_TOKENS`)."""
    del part  # the estimate does not depend on the file yet
    return FILE_PART_TOKENS
