-- Derived copies of canonical content. Redaction deletes every row whose sources overlap the
-- redacted ids; thread deletion deletes every row of the thread.

CREATE TABLE crux_derived_artifacts (
    artifact_id text PRIMARY KEY,
    thread_id text NOT NULL,
    kind text NOT NULL,
    source_message_ids text[] NOT NULL DEFAULT '{}',
    payload jsonb,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX crux_derived_artifacts_thread_idx ON crux_derived_artifacts (thread_id);
CREATE INDEX crux_derived_artifacts_sources_idx
    ON crux_derived_artifacts USING gin (source_message_ids);

-- Generation staging is owned by the runtime (0050_generations.sql); it is created here too,
-- with the same definition and index names, so the Thread store can always cascade redaction
-- and deletion into it. Both files use IF NOT EXISTS, so whichever runs first wins.
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
