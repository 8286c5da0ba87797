-- Generation ids are scoped to their Thread (ad-hoc generations to their own scope): the
-- `generation_id` columns of staging, the ledger and receipts now hold the scoped key of
-- `crux.models.generation_key` (`<thread>/<generation>` or `<generation>`, each component
-- percent-encoded as Python's `urllib.parse.quote(..., safe=":")` does). Existing rows are
-- re-keyed in place; a call-site transcript staged without a Thread id keeps the ad-hoc key.
CREATE OR REPLACE FUNCTION pg_temp.crux_encode_key_part(value text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(string_agg(
        CASE
            WHEN ch ~ '^[A-Za-z0-9_.~:-]$' THEN ch
            ELSE upper(regexp_replace(encode(convert_to(ch, 'UTF8'), 'hex'), '(..)', '%\1', 'g'))
        END, '' ORDER BY position), '')
    FROM regexp_split_to_table(value, '') WITH ORDINALITY AS chars(ch, position)
$$;

CREATE OR REPLACE FUNCTION pg_temp.crux_generation_key(generation text, thread text) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE
        WHEN thread IS NULL THEN pg_temp.crux_encode_key_part(generation)
        ELSE pg_temp.crux_encode_key_part(thread) || '/' || pg_temp.crux_encode_key_part(generation)
    END
$$;

UPDATE crux_generation_staging
SET generation_id = pg_temp.crux_generation_key(generation_id, thread_id);
UPDATE crux_generations
SET generation_id = pg_temp.crux_generation_key(generation_id, thread_id);
UPDATE crux_request_receipts
SET generation_id = pg_temp.crux_generation_key(generation_id, thread_id)
WHERE generation_id IS NOT NULL;
