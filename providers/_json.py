"""One JSON serialisation for wire bodies, tool arguments and token counting.

Counting and sending must agree byte for byte, so both go through `dumps`.
"""

from __future__ import annotations

from typing import Any, cast

import pydantic_core


def dumps(value: Any) -> str:
    """Compact JSON with non-ASCII characters kept (they cost fewer tokens than escapes)."""
    return dumps_bytes(value).decode("utf-8")


def dumps_bytes(value: Any) -> bytes:
    """`dumps` encoded as UTF-8, for request bodies.

    Written by pydantic's serializer: a long Thread's request is hundreds of kilobytes,
    which it writes five times faster than the standard library. Text that UTF-8 cannot
    encode (a lone surrogate) raises `ValueError`.
    """
    return pydantic_core.to_json(value)


def as_object(value: Any) -> dict[str, Any] | None:
    """`value` typed as a JSON object, or `None` when it is not one."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def as_list(value: Any) -> list[Any] | None:
    """`value` typed as a JSON array, or `None` when it is not one."""
    return cast(list[Any], value) if isinstance(value, list) else None
