-- Summaries of caller transcripts (call-site or prompt-level messages) live in
-- crux_derived_artifacts with kind 'transcript-summary', named by content hashes and found by
-- the last message they cover. They hold caller text no Thread owns, so the retention sweep
-- deletes them by age: index both lookups.
CREATE INDEX IF NOT EXISTS crux_derived_artifacts_transcript_through
    ON crux_derived_artifacts (thread_id, (payload ->> 'through_id'))
    WHERE kind = 'transcript-summary';
CREATE INDEX IF NOT EXISTS crux_derived_artifacts_transcript_age
    ON crux_derived_artifacts (created_at)
    WHERE kind = 'transcript-summary';
