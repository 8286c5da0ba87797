"""The staging insert shared by staging, the generation ledger and the delta stream."""

STAGE = """
INSERT INTO crux_generation_staging
    (generation_id, attempt, kind, thread_id, message, source_message_ids, info)
VALUES ($1, $2, $3, $4, $5, $6, $7)
ON CONFLICT (generation_id, attempt, kind) DO NOTHING
"""
"""Stage one row; a repeated call (activity retry) keeps the first."""
