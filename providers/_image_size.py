"""Pixel sizes read from the header of inline (`data:`) images, for better token estimates.

Only the container headers are parsed (PNG, GIF, JPEG, WebP); nothing is decoded. Remote
images are never fetched: their size stays unknown unless the caller supplies it.
"""

from __future__ import annotations

import base64
import binascii
import struct

_MAX_DECODED_BYTES = 64 * 1024 * 1024
_JPEG_SOF = frozenset(
    {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
)


def data_url_image_size(url: str) -> tuple[int, int] | None:
    """`(width, height)` of a base64 `data:` image URL, or `None` when unknown."""
    if not url.startswith("data:"):
        return None
    header, _, payload = url.partition(",")
    if ";base64" not in header or len(payload) * 3 // 4 > _MAX_DECODED_BYTES:
        return None
    try:
        data = base64.b64decode(payload, validate=False)
    except (binascii.Error, ValueError):
        return None
    return image_size(data)


def image_size(data: bytes) -> tuple[int, int] | None:
    """`(width, height)` from an image's header bytes, or `None` for unknown formats."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return _valid(width, height)
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return _valid(width, height)
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    return None


def _valid(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    index = 2
    while index + 9 < len(data):
        if data[index] != 0xFF:
            return None
        marker = data[index + 1]
        if marker == 0xFF:  # fill byte
            index += 1
            continue
        if marker in _JPEG_SOF:
            height, width = struct.unpack(">HH", data[index + 5 : index + 9])
            return _valid(width, height)
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            index += 2  # markers without a length
            continue
        (length,) = struct.unpack(">H", data[index + 2 : index + 4])
        index += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return _valid(width, height)
    if chunk == b"VP8 " and len(data) >= 30:
        width, height = struct.unpack("<HH", data[26:30])
        return _valid(width & 0x3FFF, height & 0x3FFF)
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return _valid((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    return None
