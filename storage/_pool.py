"""Connection pools with the codecs every store relies on."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

DEFAULT_POOL_MIN_SIZE = 1
DEFAULT_POOL_MAX_SIZE = 10


async def _init_connection(connection: asyncpg.Connection) -> None:
    # jsonb columns round-trip as Python values; compact separators keep rows small.
    for type_name in ("json", "jsonb"):
        await connection.set_type_codec(
            type_name,
            encoder=lambda value: json.dumps(value, separators=(",", ":"), sort_keys=True),
            decoder=json.loads,
            schema="pg_catalog",
        )


async def create_pool(
    url: str,
    *,
    min_size: int = DEFAULT_POOL_MIN_SIZE,
    max_size: int = DEFAULT_POOL_MAX_SIZE,
) -> asyncpg.Pool:
    """Open a pool whose connections decode `json`/`jsonb` to Python values.

    Args:
        url: A PostgreSQL URL.
        min_size: Connections opened up front.
        max_size: Upper bound on open connections.
    """
    pool: Any = await asyncpg.create_pool(
        url, min_size=min_size, max_size=max_size, init=_init_connection
    )
    return pool
