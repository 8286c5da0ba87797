"""Connection pools with the codecs every store relies on."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

DEFAULT_POOL_MIN_SIZE = 1
DEFAULT_POOL_MAX_SIZE = 10

# Every statement is planned for the values it runs with. asyncpg keeps each statement
# prepared on its connection, and PostgreSQL moves a prepared statement to a generic plan
# after five runs. A generic plan made while the tables were small keys message lookups on
# the Thread alone (an index on the Thread's chains ties with the primary key there) and
# filters the rest: a lookup of 5,000 messages then reads the Thread 5,000 times (1.2 s
# against 36 ms), for as long as the connection lives. Set with SET rather than as a startup
# parameter, which connection poolers such as PgBouncer refuse.
PLAN_EVERY_RUN = "SET plan_cache_mode = force_custom_plan"


async def _init_connection(connection: asyncpg.Connection) -> None:
    await connection.execute(PLAN_EVERY_RUN)
    # jsonb columns round-trip as Python values; compact separators keep rows small.
    for type_name in ("json", "jsonb"):
        await connection.set_type_codec(
            type_name,
            encoder=lambda value: json.dumps(value, separators=(",", ":"), sort_keys=True),
            decoder=json.loads,
            schema="pg_catalog",
        )


async def _nothing_to_reset(_connection: asyncpg.Connection) -> None:
    """Return a released connection to the pool as it is.

    The pool still rolls back a transaction left open and drops the connection's listener
    callbacks on release; the default reset would add a round trip to PostgreSQL on every
    release (`RESET ALL`, `UNLISTEN *`, `CLOSE ALL`, unlocking advisory locks) for session
    state this package never leaves behind: it sets no session variables but the one its
    connections start with, takes advisory locks per transaction only, holds cursors inside
    transactions only, and the stream follower removes its `LISTEN` before releasing its
    connection.
    """


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
        url,
        min_size=min_size,
        max_size=max_size,
        init=_init_connection,
        reset=_nothing_to_reset,
    )
    return pool
