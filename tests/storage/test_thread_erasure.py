"""Thread behaviours 60-78 (semantics digest section 8): redaction, removal and deletion.

There is no separate asset store: media travel as URLs (inline `data:` URLs are stored in the
message body), so behaviours 65, 66, 69 and 78 are tested through their equivalent here:
erasure reaches every stored copy of the bytes in one step, and deletion cleanup that fails
midway is repaired by calling `delete` again.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from crux.errors import ThreadCommitError, ThreadError, ThreadInUseError
from crux.messages import ImagePart, Message, TextPart
from storage.threads import MessageEntry, RedactedEntry, RemovedEntry, ThreadStore
from storage.threads._erasure import publish_deletion
from tests.storage.conftest import FaultyPool, assistant, ids, user

SECRET = "data:image/png;base64,U0VDUkVULUJZVEVT"
THREAD_TABLES = (
    "crux_thread_messages",
    "crux_thread_groups",
    "crux_thread_leaves",
    "crux_thread_token_counts",
    "crux_derived_artifacts",
    "crux_generation_staging",
)


def _photo(message_id: str) -> Message:
    return Message(
        id=message_id,
        role="user",
        content=[TextPart(text="look"), ImagePart(url=SECRET, media_type="image/png")],
    )


async def _code(call: object) -> str:
    with pytest.raises(ThreadError) as caught:
        await call  # type: ignore[misc]
    return caught.value.code


async def _rows(pool: asyncpg.Pool, thread_id: str = "t") -> dict[str, int]:
    return {
        table: await pool.fetchval(f"SELECT count(*) FROM {table} WHERE thread_id = $1", thread_id)
        for table in THREAD_TABLES
    }


async def _mentions(pool: asyncpg.Pool, needle: str) -> int:
    total = 0
    for table in THREAD_TABLES:
        total += await pool.fetchval(
            f"SELECT count(*) FROM {table} AS r WHERE r::text LIKE '%' || $1 || '%'", needle
        )
    return total


async def test_b60_redacted_entries_keep_only_structure(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await store.append("t", [user("u1", "secret words", metadata={"k": "v"}), assistant("a1")])
    await store.redact("t", "u1")
    first, second = (await store.read("t")).entries
    assert first == RedactedEntry(id="u1", parent_id=None)
    assert set(first.model_dump()) == {"kind", "id", "parent_id"}
    assert isinstance(second, MessageEntry)
    row = await pool.fetchrow(
        "SELECT role, body, identity, created_at FROM crux_thread_messages WHERE message_id = 'u1'"
    )
    assert row is not None
    assert dict(row) == {"role": None, "body": None, "identity": None, "created_at": None}
    assert await _mentions(pool, "secret words") == 0


async def test_b61_redacting_again_is_a_noop(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    await store.redact("t", "u1")
    revision = await store.revision("t")
    await store.redact("t", ["u1"])
    assert await store.revision("t") == revision


async def test_b62_empty_redaction_is_invalid(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    assert await _code(store.redact("t", [])) == "invalid_message"


async def test_b63_redaction_is_all_or_nothing(store: ThreadStore) -> None:
    await store.append("t", [user("a"), assistant("b")])
    assert await _code(store.redact("t", ["a", "missing", "b"])) == "not_found"
    assert all(isinstance(entry, MessageEntry) for entry in (await store.read("t")).entries)


async def test_b64_duplicate_ids_redact_atomically(store: ThreadStore) -> None:
    await store.append("t", [user("a"), assistant("b"), assistant("c")])
    await store.redact("t", ["b", "a", "b"])
    kinds = [entry.kind for entry in (await store.read("t")).entries]
    assert kinds == ["redacted", "redacted", "message"]


async def test_b65_redaction_erases_inline_media_bytes(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    """Equivalent of deleting owned assets: no stored copy of the bytes survives."""
    await store.append("t", [_photo("p1"), assistant("a1")])
    assert (await store.read_history_view("t")).messages[0].has_media
    assert await _mentions(pool, "U0VDUkVULUJZVEVT") == 1
    await store.redact("t", "p1")
    assert await _mentions(pool, "U0VDUkVULUJZVEVT") == 0
    assert await _code(store.load_messages("t", ["p1"])) == "redacted"


async def test_b66_reappending_a_redacted_id_fails_and_stores_nothing(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await store.append("t", _photo("p1"))
    await store.redact("t", "p1")
    assert await _code(store.append("t", _photo("p1"))) == "redacted"
    assert await _code(store.append("t", _photo("p1"), after="p1")) == "redacted"
    assert await _mentions(pool, "U0VDUkVULUJZVEVT") == 0
    assert (await _rows(pool))["crux_thread_messages"] == 1


async def test_b67_append_after_redacted_targets(store: ThreadStore) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    await store.redact("t", ["u1", "a1"])
    receipt = await store.append("t", user("u2"), after="a1")
    assert receipt.status == "selected"
    assert await _code(store.append("t", user("u3"), after="u1")) == "invalid_group"


async def test_b68_append_racing_redaction_never_sees_a_half_erased_target(
    store: ThreadStore,
) -> None:
    """Redaction and its cleanup commit together, so a racing append just waits for it."""
    await store.append("t", [user("u1"), assistant("a1")])
    _, receipt = await asyncio.gather(
        store.redact("t", "a1"), store.append("t", user("u2"), after="a1")
    )
    assert receipt.parent_id == "a1"
    kinds = [entry.kind for entry in (await store.read("t")).entries]
    assert kinds == ["message", "redacted", "message"]


async def test_b69_media_redaction_needs_no_extra_capability(store: ThreadStore) -> None:
    await store.append("t", _photo("p1"))
    await store.redact("t", "p1")
    [entry] = (await store.read("t")).entries
    assert isinstance(entry, RedactedEntry)


async def test_b70_removal_never_restores_a_redacted_node(store: ThreadStore) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    await asyncio.gather(store.redact("t", "u1"), store.remove_group("t", "a1"))
    await store.remove_group("t", "u1")
    first, second = (await store.read("t")).entries
    assert isinstance(first, RedactedEntry)
    assert isinstance(second, RemovedEntry)


async def test_b71_removal_hides_the_whole_group(store: ThreadStore) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    await store.append("t", [user("u2"), assistant("a2")])
    await store.remove_group("t", "a1")
    entries = (await store.read("t")).entries
    assert [entry.kind for entry in entries] == ["removed", "removed", "message", "message"]
    removed = entries[0]
    assert isinstance(removed, RemovedEntry)
    assert removed.created_at is not None
    assert [m.id for m in (await store.read_history_view("t")).messages] == ["u2", "a2"]
    assert [m.text for m in await store.load_messages("t", ["u1"])] == ["hi"]


@pytest.mark.parametrize("state", ["open", "closed"])
async def test_b72_delete_with_registered_owners_is_in_use(store: ThreadStore, state: str) -> None:
    await store.append("t", user("u1"))
    await store.register_owner("t", "session-1", state=state)  # type: ignore[arg-type]
    with pytest.raises(ThreadInUseError) as caught:
        await store.delete("t")
    assert caught.value.code == "in_use"
    await store.release_owner("t", "session-1")
    await store.delete("t")


async def test_b73_delete_is_idempotent_and_leaves_only_the_marker(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await store.append("t", user("u1"))
    await store.append("t", assistant("a1"))
    await store.append("t", assistant("a2"), after="u1")
    await store.store_token_counts("t", "enc", {"u1": 1})
    await pool.execute(
        "INSERT INTO crux_derived_artifacts (artifact_id, thread_id, kind, source_message_ids)"
        " VALUES ('s1', 't', 'summary', '{u1}')"
    )
    await store.delete("t")
    await store.delete("t")
    assert set((await _rows(pool)).values()) == {0}
    row = await pool.fetchrow("SELECT state, heads::text, cleanup_pending FROM crux_threads")
    assert row is not None
    assert tuple(row) == ("deleted", "{}", False)


async def test_b74_every_operation_after_deletion_fails_deleted(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    await store.delete("t")
    for call in (
        store.read("t"),
        store.append("t", user("u2")),
        store.edit("t", "u1", content="x"),
        store.select("t", "u1"),
        store.redact("t", "u1"),
        store.read_history_view("t"),
        store.load_messages("t", ["u1"]),
        store.remove_group("t", "u1"),
    ):
        assert await _code(call) == "deleted"


async def test_b75_deleting_an_unused_id_leaves_a_marker(store: ThreadStore) -> None:
    await store.delete("never-used")
    assert await _code(store.append("never-used", user("u1"))) == "deleted"
    assert await _code(store.read("never-used")) == "deleted"


async def test_b76_append_racing_deletion_leaves_nothing(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await store.append("t", user("u1"))
    results = await asyncio.gather(
        store.append("t", assistant("a1")), store.delete("t"), return_exceptions=True
    )
    appended = results[0]
    if isinstance(appended, ThreadError):
        assert appended.code == "deleted"
    assert set((await _rows(pool)).values()) == {0}


async def test_b77_reads_observe_deleted_while_cleanup_is_pending(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await store.append("t", user("u1"))
    assert await publish_deletion(pool, "t") is True
    assert (await _rows(pool))["crux_thread_messages"] == 1
    assert await _code(store.read("t")) == "deleted"
    await store.delete("t")
    assert (await _rows(pool))["crux_thread_messages"] == 0


async def test_b78_failed_cleanup_is_repaired_by_deleting_again(pool: asyncpg.Pool) -> None:
    faulty = FaultyPool(pool)
    store = ThreadStore(faulty)  # type: ignore[arg-type]
    await store.append("t", [user("u1"), assistant("a1")])
    faulty.faults.fail_statement_containing = "DELETE FROM crux_thread_messages"
    with pytest.raises(ThreadCommitError):
        await store.delete("t")
    assert await _code(store.read("t")) == "deleted"
    assert (await _rows(pool))["crux_thread_messages"] == 2
    await store.delete("t")
    assert set((await _rows(pool)).values()) == {0}


async def test_redaction_cascades_to_counts_artifacts_and_staging(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    await store.append("t", [user("u2"), assistant("a2")])
    await store.store_token_counts("t", "enc", {"u1": 1, "a1": 2, "u2": 3})
    await pool.execute(
        "INSERT INTO crux_derived_artifacts (artifact_id, thread_id, kind, source_message_ids)"
        " VALUES ('s1', 't', 'summary', '{u1,a1}'), ('s2', 't', 'summary', '{u2}')"
    )
    await pool.execute(
        "INSERT INTO crux_generation_staging"
        " (generation_id, attempt, kind, thread_id, message, source_message_ids)"
        " VALUES ('g1', 1, 'output', 't', '{}'::jsonb, '{u1,a1,u2,a2}'),"
        "        ('g2', 1, 'output', 't', '{}'::jsonb, '{u2}'),"
        "        ('g3', 0, 'user', 't', '{\"id\": \"a1\", \"role\": \"user\"}'::jsonb, '{}')"
    )
    await store.redact("t", "a1")
    assert await pool.fetchval("SELECT count(*) FROM crux_thread_token_counts") == 2
    assert await pool.fetchval("SELECT array_agg(artifact_id) FROM crux_derived_artifacts") == [
        "s2"
    ]
    assert await pool.fetchval("SELECT array_agg(generation_id) FROM crux_generation_staging") == [
        "g2"
    ]
    await store.store_token_counts("t", "enc", {"a1": 9, "a2": 4})
    view = await store.read_history_view("t", encoding="enc")
    assert [(m.id, m.tokens) for m in view.messages] == [("u2", 3), ("a2", 4)]


async def test_fully_redacted_group_loses_its_commit_time(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    await store.redact("t", "u1")
    assert await pool.fetchval("SELECT committed_at FROM crux_thread_groups") is not None
    await store.redact("t", "a1")
    assert await pool.fetchval("SELECT committed_at FROM crux_thread_groups") is None
    assert ids(await store.read("t")) == ["u1", "a1"]
