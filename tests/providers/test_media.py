from __future__ import annotations

import base64
import struct
from typing import Literal

import pytest

from crux.messages import ImagePart
from providers._image_size import data_url_image_size, image_size
from providers._media import (
    ANTHROPIC_IMAGE_MAX_TOKENS,
    OPENAI_IMAGE_UNKNOWN_TOKENS,
    anthropic_image_tokens,
    openai_image_tokens,
)


def _png(width: int, height: int) -> bytes:
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + b"\x00" * 4


def _jpeg(width: int, height: int) -> bytes:
    app0 = (
        b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00" + b"\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    )
    sof = b"\xff\xc0" + struct.pack(">HBHHB", 17, 8, height, width, 3) + b"\x00" * 9
    return b"\xff\xd8" + app0 + sof + b"\xff\xd9"


def _gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00" * 4


def _webp_vp8x(width: int, height: int) -> bytes:
    body = b"VP8X" + struct.pack("<I", 10) + b"\x00" * 4
    body += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", len(body) + 4) + b"WEBP" + body


@pytest.mark.parametrize("make", [_png, _jpeg, _gif, _webp_vp8x])
def test_header_sizes(make) -> None:
    assert image_size(make(1024, 768)) == (1024, 768)


def test_unknown_or_remote_images_have_no_size() -> None:
    assert image_size(b"not an image") is None
    assert data_url_image_size("https://example.test/x.png") is None
    assert data_url_image_size("data:image/png,raw") is None


def test_inline_image_sizes_refine_the_estimates() -> None:
    url = "data:image/png;base64," + base64.b64encode(_png(1024, 768)).decode()
    inline = ImagePart(url=url)
    assert openai_image_tokens(inline) == 765  # 2x2 tiles after scaling to 1024x768
    assert anthropic_image_tokens(inline) == 1049  # ceil(1024*768/750)
    remote = ImagePart(url="https://example.test/x.png")
    assert openai_image_tokens(remote) == OPENAI_IMAGE_UNKNOWN_TOKENS
    assert anthropic_image_tokens(remote) == ANTHROPIC_IMAGE_MAX_TOKENS


@pytest.mark.parametrize(
    ("width", "height", "expected"),
    [(512, 512, 255), (2048, 4096, 1105), (4096, 8192, 1105), (100, 100, 255), (1024, 1024, 765)],
)
def test_openai_tile_rule(width: int, height: int, expected: int) -> None:
    part = ImagePart(url="https://example.test/x.png", width=width, height=height, detail="high")
    assert openai_image_tokens(part) == expected


@pytest.mark.parametrize(
    ("width", "height", "detail"),
    [
        (512, 512, "high"),
        (1024, 768, "auto"),
        (3000, 200, "high"),
        (4096, 8192, "auto"),
        (64, 64, "low"),
    ],
)
def test_image_rules_agree_with_the_planner(
    width: int, height: int, detail: Literal["low", "high", "auto"]
) -> None:
    from planner import measure

    part = ImagePart(url="https://example.test/x.png", width=width, height=height, detail=detail)
    planned = measure.ImagePart(width=width, height=height, detail=detail)
    assert openai_image_tokens(part) == measure.estimate_media_tokens("openai", planned)
    assert anthropic_image_tokens(part) == measure.estimate_media_tokens("anthropic", planned)


def test_planner_framing_constants_cover_the_published_ones() -> None:
    """The planner rounds framing up; it must never fall below the documented framing."""
    from planner import measure
    from providers import counting

    openai = measure.MESSAGE_FORMATS["openai"]
    assert openai.per_message >= counting.OPENAI_TOKENS_PER_MESSAGE
    assert openai.per_tool_call >= counting.OPENAI_TOKENS_PER_TOOL_CALL
    assert openai.reply_priming >= counting.OPENAI_TOKENS_PER_REQUEST
    anthropic = measure.MESSAGE_FORMATS["anthropic"]
    assert anthropic.per_message >= counting.ANTHROPIC_TOKENS_PER_MESSAGE
    assert anthropic.tools_preamble >= counting.ANTHROPIC_TOOL_SYSTEM_PROMPT_TOKENS
