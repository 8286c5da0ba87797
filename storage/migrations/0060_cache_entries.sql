-- The response cache: replies of committed turns, reused by later equal (or similar)
-- requests in the same scope. One row per source generation (its scoped key), so a repeated
-- write is a no-op; at most one row per scope and exact key (the first write wins).
-- Embeddings are kept as real[] on every server; where pgvector is available, HNSW indexes
-- over `embedding::vector(<n>)` serve semantic lookups of the common sizes, and every other
-- lookup scans the newest entries of its scope (bounded).
CREATE TABLE IF NOT EXISTS crux_cache_entries (
    entry_id text PRIMARY KEY,
    generation_key text NOT NULL UNIQUE,
    partition text NOT NULL,
    prompt_id text NOT NULL,
    model text NOT NULL,
    owner text NOT NULL,
    exact_key text NOT NULL,
    context_key text NOT NULL,
    embedding_model text,
    dimensions integer,
    embedding real[],
    -- The reused assistant message (final text only: no tool calls).
    reply jsonb NOT NULL,
    output_tokens integer NOT NULL,
    usage jsonb NOT NULL,
    -- The Thread the entry was derived from, and every message it was built from (history,
    -- user turn, reply): redacting any of them, or deleting the Thread, deletes the entry.
    thread_id text,
    source_message_ids text[] NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    used_at timestamptz NOT NULL DEFAULT now(),
    last_hit_at timestamptz,
    hit_count bigint NOT NULL DEFAULT 0,
    CHECK ((embedding IS NULL) = (dimensions IS NULL)),
    CHECK (embedding IS NULL OR cardinality(embedding) = dimensions)
);
CREATE UNIQUE INDEX IF NOT EXISTS crux_cache_entries_exact
    ON crux_cache_entries (partition, prompt_id, model, owner, exact_key);
CREATE INDEX IF NOT EXISTS crux_cache_entries_context
    ON crux_cache_entries (partition, prompt_id, model, owner, context_key, created_at DESC);
CREATE INDEX IF NOT EXISTS crux_cache_entries_used
    ON crux_cache_entries (partition, prompt_id, model, owner, used_at);
CREATE INDEX IF NOT EXISTS crux_cache_entries_thread ON crux_cache_entries (thread_id);
CREATE INDEX IF NOT EXISTS crux_cache_entries_sources
    ON crux_cache_entries USING gin (source_message_ids);
CREATE INDEX IF NOT EXISTS crux_cache_entries_expiry ON crux_cache_entries (expires_at);

-- pgvector where the server ships it and this role may create it; otherwise (or with
-- `ALTER DATABASE ... SET crux.cache_vector = off` before migrating) the cache scans.
DO $$
DECLARE
    size integer;
BEGIN
    IF coalesce(current_setting('crux.cache_vector', true), '') = 'off' THEN
        RAISE NOTICE 'crux: crux.cache_vector is off, semantic cache lookups scan';
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector') THEN
        IF NOT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector') THEN
            RAISE NOTICE 'crux: pgvector is not installed, semantic cache lookups scan';
            RETURN;
        END IF;
        BEGIN
            CREATE EXTENSION IF NOT EXISTS vector;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'crux: pgvector could not be created (%), semantic cache lookups scan',
                SQLSTATE;
            RETURN;
        END;
    END IF;
    -- HNSW indexes a fixed size each: the offline embedding's and the common model sizes.
    FOREACH size IN ARRAY ARRAY[256, 384, 768, 1024, 1536] LOOP
        EXECUTE format(
            'CREATE INDEX IF NOT EXISTS crux_cache_entries_hnsw_%s ON crux_cache_entries'
            ' USING hnsw ((embedding::vector(%s)) vector_cosine_ops) WHERE dimensions = %s',
            size, size, size
        );
    END LOOP;
END
$$;
