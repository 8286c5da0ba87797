"""Schema checks: hot-path statements use indexes, never sequential scans."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from storage.threads import (
    ThreadStore,
    _append,
    _control,
    _erasure,
    _full_read,
    _history,
    _nodes,
    _pinned,
    _read,
    _tokens,
)


def _plan_nodes(plan: object) -> list[str]:
    found: list[str] = []
    stack = [plan]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "Node Type" in item:
                found.append(f"{item['Node Type']}:{item.get('Relation Name', '')}")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


async def _explain(connection: Any, sql: str, *args: object) -> list[str]:
    raw = await connection.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
    return _plan_nodes(json.loads(raw) if isinstance(raw, str) else raw)


_BULK = (
    "INSERT INTO crux_threads (thread_id, version, heads)"
    " SELECT 't' || i, 1, jsonb_build_object('main', 'm' || i || '_399')"
    " FROM generate_series(0, 499) i",
    "INSERT INTO crux_thread_messages"
    " (thread_id, message_id, parent_id, group_id, seq, group_end, depth, published_version,"
    "  role, body, identity, created_at, chain_id)"
    " SELECT 't' || t, 'm' || t || '_' || d, CASE WHEN d > 0 THEN 'm' || t || '_' || (d - 1) END,"
    "        'm' || t || '_' || (d - d % 2), d % 2, d % 2 = 1, d, d + 1, 'user', '{}'::jsonb,"
    "        md5(t || '_' || d), now(), 'm' || t || '_0'"
    " FROM generate_series(0, 499) t, generate_series(0, 399) d",
    "INSERT INTO crux_thread_groups"
    " (thread_id, group_id, parent_id, message_ids, owner_id, status, selected_head, committed_at)"
    " SELECT 't' || t, 'm' || t || '_' || d, NULL, ARRAY['m' || t || '_' || d], 'main',"
    "        'selected', 'x', now()"
    " FROM generate_series(0, 499) t, generate_series(0, 399, 2) d",
    "INSERT INTO crux_thread_leaves (thread_id, owner_id, branch_start, leaf)"
    " SELECT 't' || t, 'main', 'b' || b, 'm' || t || '_' || b FROM generate_series(0, 499) t,"
    " generate_series(0, 9) b",
    "INSERT INTO crux_thread_token_counts (thread_id, message_id, encoding, tokens)"
    " SELECT 't' || t, 'm' || t || '_' || d, 'enc', 5"
    " FROM generate_series(0, 499) t, generate_series(0, 399) d",
    "INSERT INTO crux_derived_artifacts (artifact_id, thread_id, kind, source_message_ids)"
    " SELECT 'a' || t || '_' || d, 't' || t, 'summary', ARRAY['m' || t || '_' || d]"
    " FROM generate_series(0, 499) t, generate_series(0, 39) d",
    # Generations in flight: their staged rows are found through the Thread index alone.
    "INSERT INTO crux_generation_staging"
    " (generation_id, attempt, kind, thread_id, message, source_message_ids)"
    " SELECT 'g' || t || '_' || a, a, 'output', 't' || t, '{}'::jsonb,"
    "        ARRAY(SELECT 'm' || t || '_' || d FROM generate_series(0, 399) d)"
    " FROM generate_series(0, 499) t, generate_series(1, 4) a",
    "ANALYZE",
)


async def test_hot_paths_use_indexes(store: ThreadStore, pool: asyncpg.Pool) -> None:
    """200,000 messages over 500 Threads; every per-Thread statement stays on an index."""
    async with pool.acquire() as connection:
        for statement in _BULK:
            await connection.execute(statement)
        statements: list[tuple[str, tuple[object, ...]]] = [
            (_control._LOCK, ("t3",)),
            (_nodes._PATH, ("t3", "m3_399")),
            (_nodes._NODES_BY_ID, ("t3", ["m3_1", "m3_2"])),
            (_nodes._GROUP, ("t3", "m3_2")),
            (_full_read.SIBLINGS, ("t3", ["m3_1", "m3_3"], True, 10)),
            (_history._HISTORY_READ, ("t3", "main", "enc")),
            (_read._CONTENT, ("t3", ["m3_1", "m3_2"])),
            (_history._MESSAGES, ("t3", ["m3_1", "m3_2"])),
            (_pinned._SELECTED_READ, ("t3", "main", [0], [40])),
            (_full_read._FULL_READ, ("t3", None, "main")),
            (_tokens._UPSERT, ("t3", "enc", ["m3_1"], [3])),
            (_erasure._TOMBSTONE, ("t3", ["m3_1"])),
            (_erasure._REDACTION_CASCADE[1], ("t3", ["m3_1"])),
            (_erasure._REDACTION_CASCADE[2], ("t3", ["m3_1"])),
            (_erasure._REMOVE_GROUP, ("t3", "m3_0")),
        ]
        for sql, args in statements:
            nodes = await _explain(connection, sql, *args)
            scans = [node for node in nodes if node.startswith("Seq Scan")]
            assert scans == [], (sql, nodes)


def _plan_details(plan: object) -> list[tuple[str, str, str]]:
    found: list[tuple[str, str, str]] = []
    stack = [plan]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "Node Type" in item:
                found.append(
                    (item["Node Type"], item.get("Relation Name", ""), item.get("Index Name", ""))
                )
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


_LONG_THREAD = (
    "INSERT INTO crux_thread_messages"
    " (thread_id, message_id, parent_id, group_id, seq, group_end, depth, published_version,"
    "  role, body, identity, created_at, chain_id)"
    " SELECT 'long', 'm' || d, CASE WHEN d > 0 THEN 'm' || (d - 1) END, 'm' || (d - d % 2),"
    "        d % 2, d % 2 = 1, d, d + 1, 'user', '{\"content\": \"x\"}'::jsonb, md5(d::text),"
    "        now(), 'm0'"
    " FROM generate_series(0, 1199) d"
)
_SHORT_THREADS = (
    "INSERT INTO crux_thread_messages"
    " (thread_id, message_id, parent_id, group_id, seq, group_end, depth, published_version,"
    "  role, body, identity, created_at, chain_id)"
    " SELECT 's' || t, 'm' || d, CASE WHEN d > 0 THEN 'm' || (d - 1) END, 'm' || d, 0, true,"
    "        d, d + 1, 'user', '{\"content\": \"x\"}'::jsonb, md5(d::text), now(), 'm0'"
    " FROM generate_series(0, 2999) t, generate_series(0, 3) d"
)


# The replay check inside crux_thread_fast_append (migration 0004), as a statement.
_FAST_APPEND_REPLAY_CHECK = """
SELECT EXISTS (
    SELECT 1 FROM unnest($2::text[]) AS wanted(id)
    CROSS JOIN LATERAL (
        SELECT 1 FROM crux_thread_messages m
        WHERE m.thread_id = $1 AND m.message_id = wanted.id
        LIMIT 1
    ) AS hit
)
"""


async def _details(connection: Any, sql: str, *args: object) -> list[tuple[str, str, str]]:
    raw = await connection.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
    return _plan_details(json.loads(raw) if isinstance(raw, str) else raw)


async def _hash_joins_over_messages(connection: Any, sql: str, *args: object) -> int:
    """Hash joins with a scan of the messages table below them (a hash over the Thread).

    A hash join of two already-walked paths (CTE scans) reads nothing more of the table.
    """
    raw = await connection.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *args)
    plan = json.loads(raw) if isinstance(raw, str) else raw
    found = 0
    stack: list[object] = [plan]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("Node Type") == "Hash Join":
                below = _plan_details(item.get("Plans", []))
                found += any(relation == "crux_thread_messages" for _, relation, _ in below)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


async def _check_walks(connection: Any) -> None:
    """Path walks probe the primary key per step (or range-scan a chain); lookups use keys."""
    walks = [
        (_nodes._PATH, ("long", "m1199")),
        (_full_read._FULL_READ, ("long", "m1199", "main")),
        (_full_read.SIBLINGS, ("long", ["m5", "m7"], True, 10)),
        (_read._WALK, ("long", "m1199", 20)),
        (_history._HISTORY_READ, ("long", "main", "enc")),
        (_history._PATH_IDS_READ, ("long", "main")),
        (_pinned._SELECTED_READ, ("long", "main", [0, 600], [20, 1200])),
    ]
    # Sibling lookups of the full read go by parent.
    allowed = {
        "crux_thread_messages_pkey",
        "crux_thread_messages_chain_idx",
        "crux_thread_messages_parent_idx",
    }
    for sql, args in walks:
        details = await _details(connection, sql, *args)
        message_scans = [d for d in details if d[1] == "crux_thread_messages"]
        assert message_scans, sql
        assert not any(d[0] == "Seq Scan" for d in message_scans), (sql, details)
        indexes = {d[2] for d in details if d[2].startswith("crux_thread_messages")}
        assert indexes <= allowed, (sql, details)
        assert await _hash_joins_over_messages(connection, sql, *args) == 0, (sql, details)
    lookups = [
        (_nodes._NODES_BY_ID, ("long", ["m5", "m6"])),
        (_history._MESSAGES, ("long", ["m5", "m6"])),
        (_read._CONTENT, ("long", ["m5", "m6"])),
        (_append._LOCK_AND_LOOK_UP, ("long", ["m5", "m6"], True, "m7", "main")),
        (_FAST_APPEND_REPLAY_CHECK, ("long", ["m5", "m6"])),
    ]
    for sql, args in lookups:
        details = await _details(connection, sql, *args)
        scans = [d for d in details if d[1] == "crux_thread_messages"]
        assert all(d[2] == "crux_thread_messages_pkey" for d in scans), (sql, details)


async def test_walks_stay_on_the_primary_key_without_statistics(pool: asyncpg.Pool) -> None:
    """A freshly filled table has no statistics; the walk must not turn quadratic."""
    async with pool.acquire() as connection:
        await connection.execute(_LONG_THREAD)
        await _check_walks(connection)


async def test_walks_stay_on_the_primary_key_for_one_long_thread_among_short_ones(
    pool: asyncpg.Pool,
) -> None:
    """Statistics of many short Threads underestimate a long one."""
    async with pool.acquire() as connection:
        await connection.execute(_SHORT_THREADS)
        await connection.execute(_LONG_THREAD)
        await connection.execute("ANALYZE")
        await _check_walks(connection)
