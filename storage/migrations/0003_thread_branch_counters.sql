-- Branch counters that let a path read know, without a sibling query, which group starts
-- have alternatives: child_groups on a message counts the causal groups published directly
-- after it; root_groups on the control row counts the groups published at the root.

ALTER TABLE crux_thread_messages ADD COLUMN child_groups integer NOT NULL DEFAULT 0;
ALTER TABLE crux_threads ADD COLUMN root_groups integer NOT NULL DEFAULT 0;
