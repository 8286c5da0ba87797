-- A staged row's sources are only ever searched within one Thread (the redaction cascade's
-- `WHERE thread_id = $1 AND source_message_ids && ...`), and a Thread has only the rows of
-- its generations in flight, so the Thread index finds them. The GIN index over every
-- source id made each staged output on a long path pay for thousands of index entries (and,
-- now and then, for flushing its pending list) on the path of a turn.
DROP INDEX IF EXISTS crux_generation_staging_sources;

-- Staged rows live for one generation: compressing a long source list on every insert
-- costs more than the bytes it saves.
ALTER TABLE crux_generation_staging ALTER COLUMN source_message_ids SET STORAGE EXTERNAL;
