"""One JSON serialisation for wire bodies, tool arguments and token counting.

Counting and sending must agree byte for byte, so both go through `dumps`.
"""

from __future__ import annotations

import json
from typing import Any, cast


def dumps(value: Any) -> str:
    """Compact JSON with non-ASCII characters kept (they cost fewer tokens than escapes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def dumps_bytes(value: Any) -> bytes:
    """`dumps` encoded as UTF-8, for request bodies."""
    return dumps(value).encode("utf-8")


def as_object(value: Any) -> dict[str, Any] | None:
    """`value` typed as a JSON object, or `None` when it is not one."""
    return cast(dict[str, Any], value) if isinstance(value, dict) else None


def as_list(value: Any) -> list[Any] | None:
    """`value` typed as a JSON array, or `None` when it is not one."""
    return cast(list[Any], value) if isinstance(value, list) else None
