-- Path chains: every message carries the id of its chain, a maximal run of nodes in which
-- each node is the first child ever published under the previous one. A group inherits
-- its parent's chain when it is the first group published after that parent (the branch
-- counter was still 0) and starts a chain named after its first message otherwise, so a
-- chain is a straight line of consecutive depths. A root-to-head path is then a few index
-- range scans (one per branch point on the path) instead of one primary-key probe per
-- message. The column is structural: redaction and removal never touch it.

ALTER TABLE crux_thread_messages ADD COLUMN chain_id text;

-- Existing rows: a group start that is not the first group after its parent (or sits at the
-- root) starts a chain; everything else follows its parent.
CREATE TEMP TABLE crux_chain_links ON COMMIT DROP AS
SELECT thread_id, message_id, parent_id,
       parent_id IS NOT NULL AND (seq > 0 OR first_after_parent) AS continues
FROM (
    SELECT thread_id, message_id, parent_id, seq,
           row_number() OVER (
               PARTITION BY thread_id, parent_id, seq = 0
               ORDER BY published_version, message_id COLLATE "C"
           ) = 1 AS first_after_parent
    FROM crux_thread_messages
) ranked;
CREATE INDEX ON crux_chain_links (thread_id, parent_id);
ANALYZE crux_chain_links;

WITH RECURSIVE walk(thread_id, message_id, chain_id) AS (
    SELECT thread_id, message_id, message_id FROM crux_chain_links WHERE NOT continues
    UNION ALL
    SELECT l.thread_id, l.message_id, w.chain_id
    FROM walk w
    JOIN crux_chain_links l
      ON l.thread_id = w.thread_id AND l.parent_id = w.message_id AND l.continues
)
UPDATE crux_thread_messages m SET chain_id = walk.chain_id
FROM walk
WHERE m.thread_id = walk.thread_id AND m.message_id = walk.message_id;

ALTER TABLE crux_thread_messages ALTER COLUMN chain_id SET NOT NULL;
CREATE INDEX crux_thread_messages_chain_idx
    ON crux_thread_messages (thread_id, chain_id, depth);

-- The one-round-trip append (migration 0004) with chain assignment.
CREATE OR REPLACE FUNCTION crux_thread_fast_append(
    p_thread text,
    p_owner text,
    p_explicit boolean,
    p_parent text,
    p_ids text[],
    p_roles text[],
    p_bodies text[],
    p_identities text[],
    p_tool_call_ids text[],
    p_tool_call_lists text[],
    p_media boolean[]
) RETURNS TABLE (
    outcome text, status text, selected_head text, parent text, committed_at timestamptz
)
LANGUAGE plpgsql
AS $$
#variable_conflict use_column
DECLARE
    v_control crux_threads%ROWTYPE;
    v_head text;
    v_target text;
    v_depth integer := 0;
    v_group_end boolean;
    v_chain text := p_ids[1];
    v_parent_chain text;
    v_parent_groups integer;
    v_leaf text := p_ids[cardinality(p_ids)];
    v_selected boolean;
    v_status text;
    v_selected_head text;
    v_at timestamptz;
    v_advanced integer := 0;
BEGIN
    SELECT * INTO v_control FROM crux_threads WHERE thread_id = p_thread FOR UPDATE;
    IF NOT FOUND OR v_control.state <> 'live'
       OR (p_owner <> 'main' AND coalesce(v_control.owners->>p_owner, '') <> 'open') THEN
        RETURN QUERY SELECT 'slow'::text, NULL::text, NULL::text, NULL::text, NULL::timestamptz;
        RETURN;
    END IF;
    IF EXISTS (
        SELECT 1 FROM unnest(p_ids) AS wanted(id)
        CROSS JOIN LATERAL (
            SELECT 1 FROM crux_thread_messages m
            WHERE m.thread_id = p_thread AND m.message_id = wanted.id
            LIMIT 1
        ) AS hit
    ) THEN
        RETURN QUERY SELECT 'slow'::text, NULL::text, NULL::text, NULL::text, NULL::timestamptz;
        RETURN;
    END IF;
    v_head := v_control.heads->>p_owner;
    v_target := CASE WHEN p_explicit THEN p_parent ELSE v_head END;
    IF v_target IS NOT NULL THEN
        SELECT m.depth + 1, m.group_end, m.chain_id, m.child_groups
        INTO v_depth, v_group_end, v_parent_chain, v_parent_groups
        FROM crux_thread_messages m
        WHERE m.thread_id = p_thread AND m.message_id = v_target;
        IF NOT FOUND OR NOT v_group_end THEN
            RETURN QUERY SELECT 'slow'::text, NULL::text, NULL::text, NULL::text, NULL::timestamptz;
            RETURN;
        END IF;
        IF v_parent_groups = 0 THEN
            v_chain := v_parent_chain;
        END IF;
    END IF;

    -- An owner without a head has nothing to compete with: its first publication is selected.
    v_selected := v_head IS NULL OR v_head IS NOT DISTINCT FROM v_target;
    v_status := CASE WHEN v_selected THEN 'selected' ELSE 'alternative' END;
    v_selected_head := CASE WHEN v_selected THEN v_leaf ELSE v_head END;

    INSERT INTO crux_thread_groups
        (thread_id, group_id, parent_id, message_ids, owner_id, status, selected_head,
         committed_at)
    VALUES (p_thread, p_ids[1], v_target, p_ids, p_owner, v_status, v_selected_head,
            clock_timestamp())
    RETURNING crux_thread_groups.committed_at INTO v_at;

    INSERT INTO crux_thread_messages
        (thread_id, message_id, parent_id, group_id, seq, group_end, depth, published_version,
         role, body, identity, tool_call_id, tool_call_ids, has_media, created_at, chain_id)
    SELECT p_thread, u.message_id,
           CASE WHEN u.seq = 1 THEN v_target ELSE p_ids[u.seq - 1] END,
           p_ids[1], u.seq - 1, u.seq = cardinality(p_ids), v_depth + u.seq - 1,
           v_control.version + 1, u.role, u.body::jsonb, u.identity, u.tool_call_id,
           CASE WHEN u.tool_call_list = '' THEN '{}'::text[]
                ELSE string_to_array(u.tool_call_list, chr(31)) END,
           u.has_media, v_at, v_chain
    FROM unnest(p_ids, p_roles, p_bodies, p_identities, p_tool_call_ids, p_tool_call_lists,
                p_media)
         WITH ORDINALITY AS u(message_id, role, body, identity, tool_call_id, tool_call_list,
                              has_media, seq);

    IF v_target IS NOT NULL THEN
        UPDATE crux_thread_messages SET child_groups = child_groups + 1
        WHERE thread_id = p_thread AND message_id = v_target;
        UPDATE crux_thread_leaves SET leaf = v_leaf
        WHERE thread_id = p_thread AND owner_id = p_owner AND leaf = v_target;
        GET DIAGNOSTICS v_advanced = ROW_COUNT;
    END IF;
    IF NOT v_selected AND v_advanced = 0 THEN
        -- An unselected branch must stay reachable from a remembered tip.
        INSERT INTO crux_thread_leaves (thread_id, owner_id, branch_start, leaf)
        VALUES (p_thread, p_owner, p_ids[1], v_leaf)
        ON CONFLICT (thread_id, owner_id, branch_start) DO UPDATE SET leaf = EXCLUDED.leaf;
    END IF;

    UPDATE crux_threads
    SET version = v_control.version + 1,
        heads = CASE WHEN v_selected THEN heads || jsonb_build_object(p_owner, v_leaf)
                     ELSE heads END,
        root_groups = root_groups + CASE WHEN v_target IS NULL THEN 1 ELSE 0 END,
        updated_at = clock_timestamp()
    WHERE thread_id = p_thread;

    RETURN QUERY SELECT 'published'::text, v_status, v_selected_head, v_target, v_at;
END;
$$;
