"""The response cache's SQL (table `crux_cache_entries`, migration 0060)."""

from __future__ import annotations

SCOPE = "partition = $1 AND prompt_id = $2 AND model = $3 AND owner = $4"
"""The scope filter every statement of one scope starts with ($1-$4)."""

LIVE = "expires_at > now()"

FIND_EXACT = f"""
SELECT entry_id, reply FROM crux_cache_entries
WHERE {SCOPE} AND exact_key = $5 AND {LIVE}
"""

# Every entry of the scope with the same context key (a bounded number, newest first), each
# compared with the query vector: the fallback without pgvector, and for sizes without an
# HNSW index. Embeddings are unit length, so the dot product is the cosine.
SCAN_SIMILAR = f"""
WITH candidates AS (
    SELECT entry_id, embedding FROM crux_cache_entries
    WHERE {SCOPE} AND context_key = $5 AND embedding_model = $6 AND dimensions = $7
      AND {LIVE}
    ORDER BY created_at DESC
    LIMIT $8
)
SELECT entry_id,
       (SELECT sum(a::float8 * b::float8) FROM unnest(embedding, $9::real[]) AS t(a, b))
           AS similarity,
       count(*) OVER () AS candidates
FROM candidates
ORDER BY similarity DESC
LIMIT 1
"""


def hnsw_similar(dimensions: int) -> str:
    """The nearest entries by the HNSW index of `dimensions` (an integer we chose).

    The size is spelled as a literal: the planner uses a partial index only when the
    query's own predicate (`dimensions = <n>`) proves the index's.
    """
    size = int(dimensions)
    distance = f"embedding::vector({size}) <=> $7::text::vector({size})"
    return f"""
SELECT entry_id, 1 - ({distance}) AS similarity
FROM crux_cache_entries
WHERE {SCOPE} AND context_key = $5 AND embedding_model = $6 AND dimensions = {size}
  AND {LIVE}
ORDER BY {distance}
LIMIT $8
"""


# A filtered HNSW scan may end before it found enough rows of the scope; the iterative
# scan keeps walking the graph (pgvector 0.8), returning rows in roughly ascending order.
ITERATIVE_SCAN = "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"

INDEXED_SIZES = """
SELECT indexname FROM pg_indexes
WHERE tablename = 'crux_cache_entries' AND indexname LIKE 'crux\\_cache\\_entries\\_hnsw\\_%'
"""

USE_ENTRY = f"""
UPDATE crux_cache_entries
SET hit_count = hit_count + 1, last_hit_at = now(), used_at = now()
WHERE entry_id = $1 AND {LIVE}
RETURNING reply, output_tokens
"""

SET_RECEIPT_CACHE = """
UPDATE crux_request_receipts
SET receipt = jsonb_set(receipt, '{cache}', $3::jsonb)
WHERE request_id = $1 AND generation_id = $2
"""

GET_RECEIPT_CACHE = """
SELECT receipt -> 'cache' FROM crux_request_receipts
WHERE request_id = $1 AND generation_id = $2
"""

LOCK_THREAD = "SELECT state FROM crux_threads WHERE thread_id = $1 FOR SHARE"

GET_LEDGER = "SELECT result FROM crux_generations WHERE generation_id = $1"

GET_PENDING = """
SELECT info, source_message_ids FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = $2 AND kind = 'cache-pending'
"""

DROP_PENDING = """
DELETE FROM crux_generation_staging WHERE generation_id = $1 AND kind = 'cache-pending'
"""

# A lookup repeated for the same attempt (after the Thread moved and the plan was sealed
# again) replaces what the earlier one left: the write must use the keys of the request
# that was actually sent.
DROP_ATTEMPT_PENDING = """
DELETE FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = $2 AND kind = 'cache-pending'
"""

# A message the entry would be built from that was redacted between the miss and the write.
ANY_REDACTED = """
SELECT EXISTS (
    SELECT 1 FROM crux_thread_messages
    WHERE thread_id = $1 AND message_id = ANY($2::text[]) AND state = 'redacted'
)
"""

GET_THREAD_REPLY = """
SELECT body, state FROM crux_thread_messages WHERE thread_id = $1 AND message_id = $2
"""

GET_FINAL = """
SELECT message FROM crux_generation_staging
WHERE generation_id = $1 AND attempt = 0 AND kind = 'final'
"""

DROP_EXPIRED = f"DELETE FROM crux_cache_entries WHERE {SCOPE} AND NOT ({LIVE})"

INSERT_ENTRY = """
INSERT INTO crux_cache_entries (
    entry_id, generation_key, partition, prompt_id, model, owner, exact_key, context_key,
    embedding_model, dimensions, embedding, reply, output_tokens, usage, thread_id,
    source_message_ids, expires_at
)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16,
        now() + make_interval(secs => $17))
ON CONFLICT DO NOTHING
RETURNING entry_id
"""

FIND_EQUAL = f"""
SELECT entry_id FROM crux_cache_entries
WHERE generation_key = $6 OR ({SCOPE} AND exact_key = $5)
LIMIT 1
"""

# Least recently used first: a hit renews an entry, an unused one ages from its write.
EVICT_OVER_LIMIT = f"""
DELETE FROM crux_cache_entries WHERE entry_id IN (
    SELECT entry_id FROM crux_cache_entries WHERE {SCOPE}
    ORDER BY used_at DESC
    OFFSET $5
)
"""

STATS = """
SELECT partition, prompt_id, model, owner,
       count(*) AS entries,
       count(*) FILTER (WHERE expires_at <= now()) AS expired,
       count(embedding) AS embedded,
       coalesce(sum(hit_count), 0) AS hits,
       min(created_at) AS oldest,
       max(created_at) AS newest,
       max(last_hit_at) AS last_hit
FROM crux_cache_entries
WHERE ($1::text IS NULL OR partition = $1)
  AND ($2::text IS NULL OR prompt_id = $2)
  AND ($3::text IS NULL OR thread_id = $3)
  AND ($4::text IS NULL OR model = $4)
GROUP BY partition, prompt_id, model, owner
ORDER BY partition, prompt_id, model, owner
"""

CLEAR = """
DELETE FROM crux_cache_entries
WHERE ($1::text IS NULL OR partition = $1)
  AND ($2::text IS NULL OR prompt_id = $2)
  AND ($3::text IS NULL OR thread_id = $3)
  AND ($4::text IS NULL OR model = $4)
  AND (NOT $5 OR expires_at <= now())
"""
