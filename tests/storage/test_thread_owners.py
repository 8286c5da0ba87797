"""Thread behaviours 79-84 (semantics digest section 8): owners and storage capabilities.

Behaviours 82-84 concern generic record stores (mutate capability, read-your-writes, CAS
retries). PostgreSQL gives all three by construction; the tests check our equivalents: a
database without the Thread tables reports `unsupported_capability`, a publication is
visible to the next read on any connection, and many writers on one Thread serialise on the
control row lock without conflicts.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from crux.errors import ThreadError
from crux.thread import thread
from storage import create_pool
from storage.threads import ThreadStore
from tests.storage.conftest import assistant, ids, user


async def _code(call: object) -> str:
    with pytest.raises(ThreadError) as caught:
        await call  # type: ignore[misc]
    return caught.value.code


async def test_b79_owner_registration_rules(store: ThreadStore) -> None:
    assert await _code(store.register_owner("t", "main")) == "identity_conflict"
    await store.register_owner("t", "session-1")
    revision = await store.revision("t")
    await store.register_owner("t", "session-1")
    assert await store.revision("t") == revision
    assert (
        await _code(store.register_owner("t", "session-1", state="closed")) == "identity_conflict"
    )
    assert await store.owners("t") == {"session-1": "open"}


async def test_b80_owner_heads_are_independent(store: ThreadStore) -> None:
    main = thread(id="t", storage=store)
    await main.append(user("u1"))
    await main.append(assistant("a1"))
    await store.register_owner("t", "session-1")
    session = main.for_owner("session-1")
    receipt = await session.append(user("s1"), after="a1")
    assert receipt.status == "selected"
    await session.append(assistant("s2"))
    assert ids(await session.read()) == ["u1", "a1", "s1", "s2"]
    assert ids(await main.read()) == ["u1", "a1"]
    await main.append(user("u2"))
    assert (await session.read()).head == "s2"
    # The session's navigation never moves main's head.
    await session.select("s1")
    assert (await main.read()).head == "u2"


async def test_b80_unregistered_or_closed_owners_cannot_publish(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    assert await _code(store.append("t", user("x"), owner="ghost")) == "invalid_message"
    await store.register_owner("t", "session-1")
    await store.close_owner("t", "session-1")
    assert await _code(store.append("t", user("x"), owner="session-1")) == "invalid_message"
    assert (await store.read("t", owner="ghost")).entries == ()


async def test_b81_registering_after_deletion_fails(store: ThreadStore) -> None:
    await store.delete("t")
    assert await _code(store.register_owner("t", "session-1")) == "deleted"


async def test_b82_a_database_without_thread_tables_is_unsupported(postgres_url: str) -> None:
    bare = await create_pool(postgres_url, min_size=1, max_size=2)
    try:
        conversation = thread(id="t", storage=bare)
        assert await _code(conversation.append(user("u1"))) == "unsupported_capability"
        assert await _code(conversation.read()) == "unsupported_capability"
        assert await _code(conversation.delete()) == "unsupported_capability"
    finally:
        await bare.close()


async def test_b82_a_handle_without_storage_cannot_mutate() -> None:
    conversation = thread(id="t")
    for call in (
        conversation.append(user("u1")),
        conversation.edit("u1", content="x"),
        conversation.select("u1"),
        conversation.redact("u1"),
        conversation.delete(),
    ):
        assert await _code(call) == "unsupported_capability"


async def test_b83_publications_are_read_back_on_other_connections(
    store: ThreadStore, database_url: str
) -> None:
    other = await asyncpg.connect(database_url)
    try:
        for index in range(5):
            receipt = await store.append("t", user(f"u{index}"))
            head = await other.fetchval(
                "SELECT heads->>'main' FROM crux_threads WHERE thread_id = 't'"
            )
            assert head == receipt.selected_head
    finally:
        await other.close()


async def test_b84_many_writers_on_one_thread_serialise_without_conflicts(
    store: ThreadStore,
) -> None:
    receipts = await asyncio.gather(*(store.append("t", user(f"u{i}")) for i in range(16)))
    assert all(receipt.status == "selected" for receipt in receipts)
    path = ids(await store.read("t"))
    assert sorted(path) == sorted(f"u{i}" for i in range(16))
    assert len({receipt.parent_id for receipt in receipts}) == 16
