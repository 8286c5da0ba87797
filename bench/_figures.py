"""What the benchmarks share: compiled bytecode, a fresh database per run, the percentiles."""

from __future__ import annotations

import compileall
import os
import statistics
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from crux.stack import EmbeddedPostgres, start_postgres_sync
from vocabulary.settings import Settings

ROOT = Path(__file__).resolve().parent.parent

PACKAGES = (
    "vocabulary",
    "contracts",
    "planner",
    "providers",
    "storage",
    "activities",
    "workflows",
    "telemetry",
    "crux",
    "bench",
)
"""The project's packages, as an installed wheel ships them."""


def compile_bytecode() -> None:
    """Write the bytecode of the project's packages, as installing a wheel does.

    Without bytecode on disk (a checkout run with `PYTHONDONTWRITEBYTECODE`, say) every
    process compiles the sources it imports again (the peers' worker processes, a restarted
    worker), a cost a deployment never pays, so benchmarks would measure the checkout rather
    than the product.
    """
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=1)


async def new_bench_database(url: str) -> str:
    """Create an empty database on the server of `url` (its `postgres` database); return its URL."""
    admin = await asyncpg.connect(url)
    name = f"bench_{uuid.uuid4().hex[:8]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    await admin.close()
    return url.replace("/postgres?", f"/{name}?")


@dataclass(frozen=True)
class BenchDatabase:
    """A fresh database for one benchmark run.

    Attributes:
        url: Its URL.
        server: The embedded PostgreSQL started for the run; `None` on the server that
            `CRUX_DATABASE_URL` names.
    """

    url: str
    server: EmbeddedPostgres | None

    def stop(self) -> None:
        """Stop the server started for the run, if any."""
        if self.server is not None:
            self.server.stop()


async def bench_database() -> BenchDatabase:
    """An empty database on `CRUX_DATABASE_URL`'s server, or on an embedded one started now."""
    server = None
    base_url = os.environ.get("CRUX_DATABASE_URL")
    if not base_url:
        server = start_postgres_sync(Path(tempfile.mkdtemp(prefix="crux-bench-")) / "pgdata")
        base_url = server.url
    return BenchDatabase(url=await new_bench_database(base_url), server=server)


def loopback_settings(database_url: str, task_queue: str, base_url: str) -> Settings:
    """A benchmark worker's settings, its OpenAI provider the loopback server at `base_url`."""
    return Settings.model_validate(
        {
            "database_url": database_url,
            "task_queue": task_queue,
            "log_level": "error",
            "openai_base_url": base_url,
            "openai_api_key": "sk-bench-not-a-secret",
        }
    )


def p50(values: list[float]) -> float:
    """The median of `values` (seconds), in milliseconds."""
    return statistics.median(values) * 1000


def p99(values: list[float]) -> float:
    """The 99th percentile of `values` (seconds), in milliseconds."""
    return statistics.quantiles(values, n=100, method="inclusive")[98] * 1000
