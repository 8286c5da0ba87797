"""Thread behaviours 24-35 (semantics digest section 8): identity, replay and repair."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from crux.errors import ThreadCommitError, ThreadError
from storage.threads import ThreadStore
from tests.storage.conftest import FaultyPool, assistant, ids, user


async def _conflict(store: ThreadStore, *args: object, **kwargs: object) -> None:
    with pytest.raises(ThreadError) as caught:
        await store.append(*args, **kwargs)  # type: ignore[arg-type]
    assert caught.value.code == "identity_conflict"


async def test_b24_identical_replay_returns_the_original_receipt(store: ThreadStore) -> None:
    first = await store.append("t", [user("u1"), assistant("a1")])
    again = await store.append("t", [user("u1"), assistant("a1")])
    assert again.replayed is True
    assert again == first.model_copy(update={"replayed": True})


async def test_b25_same_id_different_content_conflicts(store: ThreadStore) -> None:
    await store.append("t", user("u1", "hello"))
    await _conflict(store, "t", user("u1", "hello!"))


async def test_b25_same_id_different_metadata_conflicts(store: ThreadStore) -> None:
    await store.append("t", user("u1", metadata={"k": 1}))
    await _conflict(store, "t", user("u1", metadata={"k": 2}))


async def test_b26_same_id_different_role_conflicts(store: ThreadStore) -> None:
    await store.append("t", user("u1", "same"))
    await _conflict(store, "t", assistant("u1", "same"))


async def test_b27_same_id_after_a_different_parent_conflicts(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    await store.append("t", assistant("a1"))
    await store.append("t", user("u2"))
    await _conflict(store, "t", user("u2"), after="u1")


async def test_b28_partial_overlap_conflicts(store: ThreadStore) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    await _conflict(store, "t", [user("u1"), assistant("a2")])


async def test_b29_a_split_batch_conflicts(store: ThreadStore) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    await _conflict(store, "t", user("u1"))
    await _conflict(store, "t", [assistant("a1"), user("u1")])


async def test_b30_same_content_under_a_new_id_is_a_new_append(store: ThreadStore) -> None:
    await store.append("t", user("u1", "same"))
    receipt = await store.append("t", user("u2", "same"))
    assert receipt.replayed is False
    assert ids(await store.read("t")) == ["u1", "u2"]


async def test_b31_replay_after_the_head_moved_returns_the_original(store: ThreadStore) -> None:
    first = await store.append("t", user("u1"))
    await store.append("t", assistant("a1"))
    again = await store.append("t", user("u1"))
    assert again == first.model_copy(update={"replayed": True})
    assert (await store.read("t")).head == "a1"


async def test_b32_replay_after_an_edit_keeps_the_head(store: ThreadStore) -> None:
    await store.append("t", user("u0"))
    original = await store.append("t", user("u1"), after="u0")
    await store.append("t", assistant("a1"))
    await store.edit("t", "u1", content="changed", id="u1b")
    again = await store.append("t", user("u1"))
    assert again == original.model_copy(update={"replayed": True})
    assert (await store.read("t")).head == "u1b"


async def test_b33_lost_commit_acknowledgement_is_repaired_by_retry(pool: asyncpg.Pool) -> None:
    """Our equivalent of failed receipt finalisation: the connection drops after COMMIT."""
    faulty = FaultyPool(pool)
    store = ThreadStore(faulty)  # type: ignore[arg-type]
    await store.append("t", user("u0"))
    # The one-round-trip path commits inside its statement.
    faulty.faults.lose_connection_after_statement_containing = "crux_thread_fast_append"
    with pytest.raises(ThreadCommitError) as caught:
        await store.append("t", user("u1"))
    assert caught.value.code == "commit_failed"
    retry = await store.append("t", user("u1"))
    assert retry.status == "selected"
    assert retry.replayed is True
    assert (await store.read("t")).head == "u1"


async def test_b33_lost_commit_acknowledgement_on_the_transactional_path(
    pool: asyncpg.Pool,
) -> None:
    faulty = FaultyPool(pool)
    store = ThreadStore(faulty)  # type: ignore[arg-type]
    faulty.faults.lose_connection_after_commit = True
    with pytest.raises(ThreadCommitError):
        await store.append("t", user("u1"))  # a first append takes the transactional path
    retry = await store.append("t", user("u1"))
    assert retry.status == "selected"
    assert retry.replayed is True


async def test_b33_failure_before_commit_publishes_on_retry(pool: asyncpg.Pool) -> None:
    faulty = FaultyPool(pool)
    store = ThreadStore(faulty)  # type: ignore[arg-type]
    await store.append("t", user("u0"))
    faulty.faults.fail_statement_containing = "crux_thread_fast_append"
    with pytest.raises(ThreadCommitError):
        await store.append("t", user("u1"))
    assert ids(await store.read("t")) == ["u0"]
    retry = await store.append("t", user("u1"))
    assert retry.replayed is False
    assert retry.status == "selected"


async def test_b34_concurrent_identical_appends_share_one_receipt(store: ThreadStore) -> None:
    await store.append("t", user("u0"))
    batch = [user("u1"), assistant("a1")]
    first, second = await asyncio.gather(store.append("t", batch), store.append("t", batch))
    assert sorted([first.replayed, second.replayed]) == [False, True]
    assert first.model_copy(update={"replayed": False}) == second.model_copy(
        update={"replayed": False}
    )


async def test_b35_removed_group_still_replays(store: ThreadStore) -> None:
    first = await store.append("t", [user("u1"), assistant("a1")])
    await store.remove_group("t", "a1")
    again = await store.append("t", [user("u1"), assistant("a1")])
    assert again == first.model_copy(update={"replayed": True})


async def test_b34_appends_queued_behind_a_lock_see_the_publication_they_waited_for(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    """Lookups made before the lock was granted are repeated, so the second append replays."""
    await store.append("t", user("u0"))
    batch = [user("u1"), assistant("a1")]
    async with pool.acquire() as blocker:
        transaction = blocker.transaction()
        await transaction.start()
        await blocker.execute("SELECT 1 FROM crux_threads WHERE thread_id = 't' FOR UPDATE")
        queued = [asyncio.ensure_future(store.append("t", batch)) for _ in range(2)]
        await asyncio.sleep(0.2)
        await blocker.execute("UPDATE crux_threads SET version = version + 1 WHERE thread_id = 't'")
        await transaction.commit()
    first, second = await asyncio.gather(*queued)
    assert sorted([first.replayed, second.replayed]) == [False, True]
    assert (await store.read("t")).head == "a1"


async def test_cancelling_a_commit_in_flight_waits_for_its_outcome(
    store: ThreadStore, pool: asyncpg.Pool
) -> None:
    """A publication that began is finished before the cancellation is honoured."""
    await store.append("t", user("u0"))
    async with pool.acquire() as blocker:
        transaction = blocker.transaction()
        await transaction.start()
        await blocker.execute("SELECT 1 FROM crux_threads WHERE thread_id = 't' FOR UPDATE")
        pending = asyncio.ensure_future(
            store.commit_managed_turn("t", [user("u1"), assistant("a1")], expected_head="u0")
        )
        await asyncio.sleep(0.1)
        pending.cancel()
        await asyncio.sleep(0.1)
        assert not pending.done()
        await transaction.commit()
    with pytest.raises(asyncio.CancelledError):
        await pending
    assert ids(await store.read("t")) == ["u0", "u1", "a1"]
