-- Canonical Threads: one mutable control row per thread plus an immutable tree of message
-- nodes. Every writer locks the control row (SELECT ... FOR UPDATE), which serialises
-- publications per thread; readers never lock.

CREATE TABLE crux_threads (
    thread_id text PRIMARY KEY,
    state text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'deleted')),
    -- Bumped by every publishing mutation; the public revision is derived from it.
    version bigint NOT NULL DEFAULT 0,
    -- owner id -> 'open' | 'closed' for registered durable owners ('main' is implicit).
    owners jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- owner id -> selected head message id.
    heads jsonb NOT NULL DEFAULT '{}'::jsonb,
    -- True between the publication of a deletion and the end of its physical cleanup.
    cleanup_pending boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE crux_thread_messages (
    thread_id text NOT NULL,
    message_id text NOT NULL,
    parent_id text,
    -- Id of the first message of the causal group (the receipt key).
    group_id text NOT NULL,
    seq integer NOT NULL CHECK (seq >= 0),
    group_end boolean NOT NULL,
    -- Distance from the root (root messages have depth 0).
    depth integer NOT NULL CHECK (depth >= 0),
    -- Control version that published the group; orders siblings without timestamps, so
    -- the order survives redaction.
    published_version bigint NOT NULL,
    state text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'removed', 'redacted')),
    -- Everything below is erased by redaction (NULL / false on tombstones).
    role text,
    body jsonb,
    identity text,
    tool_call_id text,
    tool_call_ids text[],
    has_media boolean NOT NULL DEFAULT false,
    edit_of text,
    created_at timestamptz,
    PRIMARY KEY (thread_id, message_id)
);

-- Sibling lookups (variants, selection) by parent.
CREATE INDEX crux_thread_messages_parent_idx
    ON crux_thread_messages (thread_id, parent_id, published_version);
-- Group lookups (removal, replay).
CREATE INDEX crux_thread_messages_group_idx
    ON crux_thread_messages (thread_id, group_id, seq);

-- One immutable receipt per causal group.
CREATE TABLE crux_thread_groups (
    thread_id text NOT NULL,
    group_id text NOT NULL,
    parent_id text,
    message_ids text[] NOT NULL,
    owner_id text NOT NULL,
    status text NOT NULL CHECK (status IN ('selected', 'alternative')),
    selected_head text NOT NULL,
    -- NULL once every member of the group is redacted.
    committed_at timestamptz,
    edit_of text,
    PRIMARY KEY (thread_id, group_id)
);

-- Remembered branch tips, per owner: branch start -> last leaf visited on that branch.
CREATE TABLE crux_thread_leaves (
    thread_id text NOT NULL,
    owner_id text NOT NULL,
    branch_start text NOT NULL,
    leaf text NOT NULL,
    PRIMARY KEY (thread_id, owner_id, branch_start)
);

-- Appends advance every remembered tip equal to the parent.
CREATE INDEX crux_thread_leaves_leaf_idx ON crux_thread_leaves (thread_id, owner_id, leaf);

-- Token counts per message and encoding, computed by the caller once per encoding.
CREATE TABLE crux_thread_token_counts (
    thread_id text NOT NULL,
    message_id text NOT NULL,
    encoding text NOT NULL,
    tokens integer NOT NULL CHECK (tokens >= 0),
    PRIMARY KEY (thread_id, message_id, encoding)
);
