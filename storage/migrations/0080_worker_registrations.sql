-- The live workers of each task queue and what they register (prompts, tools, hooks, served
-- models), so that a worker starting with other registrations on the same task queue is
-- refused instead of failing the runs that land on it. A worker refreshes `heartbeat_at`
-- while it runs and deletes its row when it stops; a row whose heartbeat is older than the
-- expiry belongs to a worker that died and is ignored (and deleted by the next start).
-- Names and digests only: never prompt or tool text.
CREATE TABLE crux_workers (
    worker_id     text PRIMARY KEY,
    namespace     text NOT NULL,
    task_queue    text NOT NULL,
    -- The worker deployment version ('' unversioned): builds of one deployment may differ.
    build_id      text NOT NULL DEFAULT '',
    identity      text NOT NULL,
    fingerprint   text NOT NULL,
    registrations jsonb NOT NULL,
    started_at    timestamptz NOT NULL DEFAULT now(),
    heartbeat_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX crux_workers_task_queue ON crux_workers (namespace, task_queue, build_id);
