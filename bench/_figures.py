"""What the benchmarks share: a fresh database per run and the percentiles they print."""

from __future__ import annotations

import statistics
import uuid

import asyncpg


async def new_bench_database(url: str) -> str:
    """Create an empty database on the server of `url` (its `postgres` database); return its URL."""
    admin = await asyncpg.connect(url)
    name = f"bench_{uuid.uuid4().hex[:8]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    return url.replace("/postgres?", f"/{name}?")


def p50(values: list[float]) -> float:
    """The median of `values` (seconds), in milliseconds."""
    return statistics.median(values) * 1000


def p99(values: list[float]) -> float:
    """The 99th percentile of `values` (seconds), in milliseconds."""
    return statistics.quantiles(values, n=100, method="inclusive")[98] * 1000
