"""Path chains: reads over chains match parent-link walks, and the migration backfill agrees
with the chains assigned on write; read models built from rows equal validated ones."""

from __future__ import annotations

import random
from importlib import resources
from typing import cast

import asyncpg

from storage.threads import HistoryView, MessageEntry, ThreadSnapshot, ThreadStore
from storage.threads._db import Connection
from storage.threads._full_read import sibling_variants
from tests.storage.conftest import assistant, tool_call, tool_result, user
from vocabulary.messages import ImagePart, Message, TextPart


async def _branched(store: ThreadStore, thread_id: str = "t") -> None:
    """Root alternatives, alternatives after group ends, an edit, erasures and parts."""
    await store.append(thread_id, [user("u1"), assistant("a1", metadata={"k": [1, "x"]})])
    await store.append(thread_id, user("u2"))
    await store.append(thread_id, [tool_call("c2", "call-1"), tool_result("r2", "call-1")])
    await store.append(thread_id, user("u3"), after="a1")
    await store.append(thread_id, assistant("a3"))
    await store.commit_managed_turn(thread_id, [user("root2")], expected_head=None)
    await store.commit_managed_turn(thread_id, [user("root3")], expected_head=None)
    await store.edit(thread_id, "u2", content="edited", id="u2e")
    await store.append(
        thread_id,
        [
            Message(
                id="u4",
                role="user",
                content=[TextPart(text="see"), ImagePart(url="https://example.test/a.png")],
            ),
            assistant("a4"),
        ],
    )
    await store.append(thread_id, [user("u5"), assistant("a5")])
    await store.append(thread_id, user("u6"))
    await store.redact(thread_id, "a5")
    await store.remove_group(thread_id, "u6")


async def _parent_links(pool: asyncpg.Pool, thread_id: str) -> dict[str, str | None]:
    rows = await pool.fetch(
        "SELECT message_id, parent_id FROM crux_thread_messages WHERE thread_id = $1", thread_id
    )
    return {row["message_id"]: row["parent_id"] for row in rows}


def _walk(parents: dict[str, str | None], head: str) -> list[str]:
    path: list[str] = []
    current: str | None = head
    while current is not None:
        path.append(current)
        current = parents[current]
    return path[::-1]


async def test_every_path_over_chains_matches_the_parent_links(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await _branched(store)
    # A random tree on a second Thread: every group lands after some earlier group end.
    chooser = random.Random(7)
    ends: list[str | None] = [None]
    for index in range(60):
        after = chooser.choice(ends)
        size = chooser.choice([1, 2, 3])
        batch = [user(f"g{index}-0")] + [assistant(f"g{index}-{k}") for k in range(1, size)]
        await store.commit_managed_turn("r", batch, expected_head=after)
        ends.append(batch[-1].id)
    for thread_id in ("t", "r"):
        parents = await _parent_links(pool, thread_id)
        for message_id in parents:
            snapshot = await store.read(thread_id, at=message_id)
            assert [entry.id for entry in snapshot.entries] == _walk(parents, message_id)


async def test_the_backfill_assigns_the_chains_writes_assign(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await _branched(store)
    for index in range(10):
        await store.append("s", [user(f"s{index}"), assistant(f"s{index}a")])
    await store.append("s", user("s-alt"), after="s3a")
    written = await pool.fetch(
        "SELECT thread_id, message_id, chain_id FROM crux_thread_messages ORDER BY 1, 2"
    )
    sql = (resources.files("storage") / "migrations" / "0005_thread_path_chains.sql").read_text()
    backfill = sql[
        sql.index("CREATE TEMP TABLE") : sql.index("ALTER TABLE crux_thread_messages ALTER")
    ]
    async with pool.acquire() as connection:
        transaction = connection.transaction()
        await transaction.start()
        try:
            await connection.execute(
                "ALTER TABLE crux_thread_messages ALTER COLUMN chain_id DROP NOT NULL;"
                "UPDATE crux_thread_messages SET chain_id = NULL;" + backfill
            )
            rebuilt = await connection.fetch(
                "SELECT thread_id, message_id, chain_id FROM crux_thread_messages ORDER BY 1, 2"
            )
        finally:
            await transaction.rollback()
    assert [tuple(row) for row in rebuilt] == [tuple(row) for row in written]
    assert len({row["chain_id"] for row in written if row["thread_id"] == "s"}) == 2


async def test_read_models_equal_validated_models(store: ThreadStore) -> None:
    await _branched(store)
    snapshots = [
        await store.read("t"),
        await store.read("t", at="u3"),
        await store.read("t", at="root3"),
        await store.read("t", limit=3),
        await store.select("t", "u2"),
    ]
    kinds = {entry.kind for snapshot in snapshots for entry in snapshot.entries}
    assert kinds == {"message", "removed", "redacted"}
    assert any(
        isinstance(entry, MessageEntry) and entry.variant is not None
        for snapshot in snapshots
        for entry in snapshot.entries
    )
    for snapshot in snapshots:
        assert ThreadSnapshot.model_validate(snapshot.model_dump()) == snapshot
        assert ThreadSnapshot.model_validate_json(snapshot.model_dump_json()) == snapshot
    await store.store_token_counts("t", "enc", {"u1": 3, "a1": 4})
    view = await store.read_history_view("t", encoding="enc")
    assert [entry.tokens for entry in view.messages[:2]] == [3, 4]
    assert HistoryView.model_validate(view.model_dump()) == view
    assert HistoryView.model_validate_json(view.model_dump_json()) == view


async def test_siblings_are_those_of_the_read_version(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await store.append("t", user("a"))
    version = int((await store.revision("t"))[1:])
    await store.commit_managed_turn("t", [user("b")], expected_head=None)
    async with pool.acquire() as raw:
        connection = cast(Connection, raw)
        found = await sibling_variants(connection, "t", [("a", None)], version)
        assert found == {}
        found = await sibling_variants(connection, "t", [("a", None)], version + 1)
        assert found is not None and found["a"].count == 2
        # A group start missing among its own siblings means the rows were deleted.
        assert await sibling_variants(connection, "t", [("gone", None)], version) is None


async def test_read_models_copy_like_validated_models(store: ThreadStore) -> None:
    await store.append("t", [user("u"), assistant("a")])
    snapshot = await store.read("t")
    copied = snapshot.model_copy(update={"head": "u"})
    assert copied.head == "u" and snapshot.head == "a"
    entry = snapshot.entries[0].model_copy(update={"id": "x"})
    assert entry.id == "x" and snapshot.entries[0].id == "u"
    view = await store.read_history_view("t")
    assert view.model_copy(update={"head": None}).head is None
    assert view.messages[0].model_copy(update={"tokens": 3}).tokens == 3
    assert view.model_fields_set == set(type(view).model_fields)


async def test_copies_with_updates_leave_the_other_read_models_alone(store: ThreadStore) -> None:
    await store.append("t", [user("u"), assistant("a")])
    snapshot = await store.read("t")
    first, second = snapshot.entries
    copied = first.model_copy(update={"id": "x"})
    assert copied.model_fields_set == second.model_fields_set == set(type(first).model_fields)
    assert copied.model_fields_set is not second.model_fields_set
