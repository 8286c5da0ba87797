"""Versioned SQL migrations.

Migrations are the files `storage/migrations/NNNN_name.sql`, applied in order, each in its
own transaction, and recorded in `crux_schema_migrations`. A session-level advisory lock makes
concurrent callers (several workers starting at once) apply each file exactly once.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

# Any fixed 64-bit key works; it only has to be the same for every migrating process.
_MIGRATION_LOCK_KEY = 0x6372_7578_6D69_6772

_CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS crux_schema_migrations (
    version text PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""


def available_migrations() -> list[tuple[str, str]]:
    """Return `(version, sql)` for every bundled migration, in order."""
    folder = resources.files("storage") / "migrations"
    found: list[tuple[str, str]] = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((entry.name.removesuffix(".sql"), entry.read_text(encoding="utf-8")))
    return sorted(found)


async def migrate(
    connection: asyncpg.Connection[Any] | PoolConnectionProxy[Any],
) -> list[str]:
    """Apply every migration not yet recorded.

    Args:
        connection: A connection to the target database.

    Returns:
        The versions applied by this call (empty when the schema was current).
    """
    applied: list[str] = []
    await connection.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK_KEY)
    try:
        await connection.execute(_CREATE_LEDGER)
        done = {
            row["version"]
            for row in await connection.fetch("SELECT version FROM crux_schema_migrations")
        }
        for version, sql in available_migrations():
            if version in done:
                continue
            async with connection.transaction():
                await connection.execute(sql)
                await connection.execute(
                    "INSERT INTO crux_schema_migrations (version) VALUES ($1)", version
                )
            applied.append(version)
    finally:
        await connection.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK_KEY)
    return applied


async def migrate_url(url: str) -> list[str]:
    """Connect to `url`, apply pending migrations and disconnect."""
    connection = await asyncpg.connect(url)
    try:
        return await migrate(connection)
    finally:
        await connection.close()
