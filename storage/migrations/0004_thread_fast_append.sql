-- The common append in one round trip: lock the control row, check that the group is new
-- and its parent is a published group end, publish, return the receipt. Anything unusual
-- (no control row yet, deleted Thread, replays, unknown or mid-group parents, owners that
-- may not publish) returns outcome 'slow' without writing, and the caller takes the full
-- transactional path, which owns every error and replay rule. Statements inside a
-- PL/pgSQL function take fresh snapshots under READ COMMITTED, so everything read after the
-- lock is current.
--
-- The replay check probes the primary key once per supplied id, so a planner without
-- statistics for a fresh or skewed table never reads every row of the Thread to answer it;
-- the selection test is null-safe, so a root publication beside an existing head is an
-- alternative whose branch tip is remembered.

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
        SELECT m.depth + 1, m.group_end INTO v_depth, v_group_end
        FROM crux_thread_messages m
        WHERE m.thread_id = p_thread AND m.message_id = v_target;
        IF NOT FOUND OR NOT v_group_end THEN
            RETURN QUERY SELECT 'slow'::text, NULL::text, NULL::text, NULL::text, NULL::timestamptz;
            RETURN;
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
         role, body, identity, tool_call_id, tool_call_ids, has_media, created_at)
    SELECT p_thread, u.message_id,
           CASE WHEN u.seq = 1 THEN v_target ELSE p_ids[u.seq - 1] END,
           p_ids[1], u.seq - 1, u.seq = cardinality(p_ids), v_depth + u.seq - 1,
           v_control.version + 1, u.role, u.body::jsonb, u.identity, u.tool_call_id,
           CASE WHEN u.tool_call_list = '' THEN '{}'::text[]
                ELSE string_to_array(u.tool_call_list, chr(31)) END,
           u.has_media, v_at
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
