"""The response cache's table on real PostgreSQL: with pgvector, and without it.

The migration creates pgvector's HNSW indexes where the server ships the extension and
falls back to a bounded scan where it does not (simulated with `crux.cache_vector = off`,
which the migration reads exactly where it would find the extension missing). Lookups are
scoped: an entry of one owner is never found from another.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest_asyncio

from contracts.cache import CacheScope
from providers.embeddings import ngram_embedding
from storage import CacheStore, create_pool, migrate_url
from vocabulary.messages import Message

SCOPE = CacheScope(partition="namespace:faq", prompt_id="p", model="offline:echo", owner="a")


def _database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@pytest_asyncio.fixture
async def without_vector(postgres_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A fresh database migrated as on a server without pgvector."""
    name = f"crux_test_novec_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(postgres_url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        await admin.execute(f'ALTER DATABASE "{name}" SET crux.cache_vector = off')
    finally:
        await admin.close()
    url = _database(postgres_url, name)
    await migrate_url(url)
    pool = await create_pool(url, min_size=1, max_size=2)
    try:
        yield pool
    finally:
        await pool.close()
        admin = await asyncpg.connect(postgres_url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


async def _insert(
    pool: asyncpg.Pool, scope: CacheScope, key: str, text: str, reply: str
) -> tuple[float, ...]:
    vector = ngram_embedding(text, 256)
    await pool.execute(
        """
        INSERT INTO crux_cache_entries (
            entry_id, generation_key, partition, prompt_id, model, owner, exact_key,
            context_key, embedding_model, dimensions, embedding, reply, output_tokens, usage,
            expires_at
        ) VALUES ($1, $1, $2, $3, $4, $5, $6, 'ctx', 'offline:ngram-256', 256, $7, $8, 1,
                  '{}', now() + interval '1 hour')
        """,
        f"ce_{uuid.uuid4().hex}",
        scope.partition,
        scope.prompt_id,
        scope.model,
        scope.owner,
        key,
        list(vector),
        {"role": "assistant", "content": reply},
    )
    return vector


async def _similar(store: CacheStore, scope: CacheScope, vector: Sequence[float]) -> str | None:
    match = await store.find_similar(scope, "ctx", "offline:ngram-256", vector)
    if match is None:
        return None
    found = await store.reply(match.entry_id)
    return found.text if isinstance(found, Message) else None


async def test_without_pgvector_the_migration_falls_back_and_lookups_scan(
    without_vector: asyncpg.Pool,
) -> None:
    pool = without_vector
    extension = await pool.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'vector'")
    assert extension == 0
    store = CacheStore(pool)
    assert await store.indexed_sizes() == frozenset()
    await _insert(pool, SCOPE, "k1", "What is the capital of France?", "Paris.")
    await _insert(pool, SCOPE, "k2", "How do I bake bread?", "Knead it.")
    query = ngram_embedding("What is the capital city of France?", 256)
    assert await _similar(store, SCOPE, query) == "Paris."
    exact = await store.find_exact(SCOPE, "k2")
    assert exact is not None and exact[1].text == "Knead it."
    # Another owner's scope holds nothing, whatever the vectors say.
    other = SCOPE.model_copy(update={"owner": "b"})
    assert await _similar(store, other, query) is None
    assert await store.find_exact(other, "k2") is None


async def test_with_pgvector_lookups_use_the_index_and_stay_in_their_scope(
    pool: asyncpg.Pool,
) -> None:
    store = CacheStore(pool)
    assert 256 in await store.indexed_sizes()
    await _insert(pool, SCOPE, "k1", "What is the capital of France?", "Paris.")
    other = SCOPE.model_copy(update={"owner": "b"})
    await _insert(pool, other, "k1", "What is the capital of France?", "Not yours.")
    query = ngram_embedding("What is the capital city of France?", 256)
    assert await _similar(store, SCOPE, query) == "Paris."
    assert await _similar(store, other, query) == "Not yours."
    # Two rows are cheaper to sort than to look up; without sequential scans the planner
    # shows that the index serves the lookup's shape.
    async with pool.acquire() as connection, connection.transaction():
        await connection.execute("SET LOCAL enable_seqscan = off")
        rows = await connection.fetch(
            "EXPLAIN SELECT entry_id FROM crux_cache_entries WHERE dimensions = 256"
            " ORDER BY embedding::vector(256) <=> $1::text::vector(256) LIMIT 4",
            "[" + ",".join(map(str, query)) + "]",
        )
    plan = "\n".join(row[0] for row in rows)
    assert "crux_cache_entries_hnsw_256" in plan
