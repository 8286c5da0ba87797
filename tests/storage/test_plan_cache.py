"""Pooled connections plan each statement for its values, so a plan made on small Threads
never serves a long one.

asyncpg prepares every statement once per connection, and PostgreSQL switches a prepared
statement to a generic plan after five runs. A generic plan made while the tables were small
looked messages up by Thread alone and filtered by id: a 5,000-message load then read the
Thread once per message (1.2 s instead of 36 ms) for the connection's whole life.
"""

from __future__ import annotations

import asyncpg

from storage.threads import ThreadStore
from storage.threads._history import _MESSAGES
from tests.storage.conftest import assistant, user

LOOKUP = "crux_plan_cache_lookup"


def _ids_literal(ids: list[str]) -> str:
    # The ids are the test's own (letters and digits): quoting them inline is safe.
    return "ARRAY[" + ",".join(f"'{message_id}'" for message_id in ids) + "]::text[]"


async def _append_turns(store: ThreadStore, thread_id: str, prefix: str, turns: int) -> list[str]:
    ids: list[str] = []
    for index in range(turns):
        pair = [f"{prefix}u{index}", f"{prefix}a{index}"]
        await store.append(thread_id, [user(pair[0]), assistant(pair[1])])
        ids += pair
    return ids


async def test_pooled_connections_plan_every_run(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as connection:
        assert await connection.fetchval("SHOW plan_cache_mode") == "force_custom_plan"


async def test_a_lookup_prepared_on_a_small_thread_keeps_the_primary_key_on_a_long_one(
    pool: asyncpg.Pool, store: ThreadStore
) -> None:
    small = await _append_turns(store, "small", "s", 10)
    async with pool.acquire() as connection:
        # The statement the store runs, prepared and run as asyncpg runs it: more than five
        # times while the only Thread is small.
        await connection.execute(f"PREPARE {LOOKUP}(text, text[]) AS {_MESSAGES}")
        for _ in range(7):
            await connection.execute(f"EXECUTE {LOOKUP}('small', {_ids_literal(small)})")
        long = await _append_turns(store, "long", "l", 500)
        plan = "\n".join(
            row[0]
            for row in await connection.fetch(
                f"EXPLAIN EXECUTE {LOOKUP}('long', {_ids_literal(long)})"
            )
        )
        await connection.execute(f"DEALLOCATE {LOOKUP}")
        assert "crux_thread_messages_pkey" in plan, plan
        assert "Filter: (message_id" not in plan, plan
    loaded = await store.load_messages("long", long)
    assert [message.id for message in loaded] == long
