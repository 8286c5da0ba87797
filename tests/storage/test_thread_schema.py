"""Schema checks: hot-path statements use indexes, never sequential scans."""

from __future__ import annotations

import json
from typing import Any

import asyncpg

from storage.threads import ThreadStore, _control, _erasure, _history, _nodes, _read, _tokens


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
    "  role, body, identity, created_at)"
    " SELECT 't' || t, 'm' || t || '_' || d, CASE WHEN d > 0 THEN 'm' || t || '_' || (d - 1) END,"
    "        'm' || t || '_' || (d - d % 2), d % 2, d % 2 = 1, d, d + 1, 'user', '{}'::jsonb,"
    "        md5(t || '_' || d), now()"
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
            (_read._SIBLINGS, ("t3", ["m3_1", "m3_3"], True)),
            (_history._HISTORY_PATH, ("t3", "m3_399", "enc")),
            (_read._CONTENT, ("t3", ["m3_1", "m3_2"])),
            (_history._MESSAGES, ("t3", ["m3_1", "m3_2"])),
            (_read._FULL_PATH, ("t3", "m3_399")),
            (_tokens._UPSERT, ("t3", "enc", ["m3_1"], [3])),
            (_erasure._TOMBSTONE, ("t3", ["m3_1"])),
            (_erasure._REDACTION_CASCADE[1], ("t3", ["m3_1"])),
            (_erasure._REMOVE_GROUP, ("t3", "m3_0")),
        ]
        for sql, args in statements:
            nodes = await _explain(connection, sql, *args)
            scans = [node for node in nodes if node.startswith("Seq Scan")]
            assert scans == [], (sql, nodes)
