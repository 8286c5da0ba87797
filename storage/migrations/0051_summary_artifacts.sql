-- Summary artifacts live in crux_derived_artifacts (kind 'summary'); they are found by the
-- last message they cover, so index that field for the reader.
CREATE INDEX IF NOT EXISTS crux_derived_artifacts_summary_through
    ON crux_derived_artifacts (thread_id, (payload ->> 'through_id'))
    WHERE kind = 'summary';
