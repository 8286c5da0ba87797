-- Managed generations: staged inputs/outputs, the generation ledger, and request receipts.
-- Staging holds text only while a generation is in flight; it is keyed so that every
-- activity retry writes the same row.
CREATE TABLE IF NOT EXISTS crux_generation_staging (
    generation_id text NOT NULL,
    attempt integer NOT NULL,
    kind text NOT NULL,
    thread_id text,
    message jsonb NOT NULL,
    source_message_ids text[] NOT NULL DEFAULT '{}',
    info jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (generation_id, attempt, kind)
);
CREATE INDEX IF NOT EXISTS crux_generation_staging_thread
    ON crux_generation_staging (thread_id);
CREATE INDEX IF NOT EXISTS crux_generation_staging_sources
    ON crux_generation_staging USING gin (source_message_ids);

-- One row per completed generation: the durable answer to "did this generation_id already
-- produce a turn?", independent of Temporal's retention.
CREATE TABLE IF NOT EXISTS crux_generations (
    generation_id text PRIMARY KEY,
    thread_id text,
    workflow_id text NOT NULL,
    result jsonb NOT NULL,
    completed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS crux_generations_thread ON crux_generations (thread_id);

-- Content-free request receipts and inspections, readable from any process.
CREATE TABLE IF NOT EXISTS crux_request_receipts (
    request_id text PRIMARY KEY,
    generation_id text,
    thread_id text,
    receipt jsonb NOT NULL,
    inspection jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS crux_request_receipts_generation
    ON crux_request_receipts (generation_id);
