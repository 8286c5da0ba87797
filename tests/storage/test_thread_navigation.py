"""Thread behaviours 46-59 (semantics digest section 8): edit and select."""

from __future__ import annotations

import asyncio

import pytest

from crux.errors import ThreadError
from storage.threads import MessageEntry, ThreadStore
from tests.storage.conftest import assistant, ids, user


async def _qa(store: ThreadStore) -> None:
    await store.append("t", user("q1", "first question"))
    await store.append("t", assistant("r1", "first answer"))


async def _code(store: ThreadStore, call: object) -> str:
    with pytest.raises(ThreadError) as caught:
        await call  # type: ignore[misc]
    return caught.value.code


async def test_b46_edit_publishes_a_selected_sibling(store: ThreadStore) -> None:
    await _qa(store)
    receipt = await store.edit("t", "q1", content="better question", id="q1b")
    assert receipt.status == "selected"
    assert receipt.message_ids == ("q1b",)
    assert receipt.selected_head == "q1b"
    assert receipt.parent_id is None
    assert receipt.replayed is False
    assert ids(await store.read("t")) == ["q1b"]


async def test_b47_edit_leaves_the_original_branch_unchanged(store: ThreadStore) -> None:
    await _qa(store)
    await store.edit("t", "q1", content="better question", id="q1b")
    original = await store.read("t", at="r1")
    assert ids(original) == ["q1", "r1"]
    question = original.entries[0]
    assert isinstance(question, MessageEntry)
    assert question.content == "first question"


async def test_b48_editing_an_assistant_message_is_invalid(store: ThreadStore) -> None:
    await _qa(store)
    assert await _code(store, store.edit("t", "r1", content="x")) == "invalid_group"


async def test_b49_editing_a_member_of_a_multi_message_group_is_invalid(store: ThreadStore) -> None:
    await store.commit_managed_turn("t", [user("u"), assistant("a")], expected_head=None)
    assert await _code(store, store.edit("t", "u", content="x")) == "invalid_group"


async def test_b50_editing_a_missing_id_is_not_found(store: ThreadStore) -> None:
    await _qa(store)
    assert await _code(store, store.edit("t", "ghost", content="x")) == "not_found"


async def test_b51_editing_a_redacted_message_fails_redacted(store: ThreadStore) -> None:
    await _qa(store)
    await store.redact("t", "q1")
    assert await _code(store, store.edit("t", "q1", content="x")) == "redacted"


async def test_b52_concurrent_identical_edits_replay(store: ThreadStore) -> None:
    await _qa(store)
    left, right = await asyncio.gather(
        store.edit("t", "q1", content="same", id="q1b"),
        store.edit("t", "q1", content="same", id="q1b"),
    )
    assert sorted([left.replayed, right.replayed]) == [False, True]
    assert left.model_copy(update={"replayed": False}) == right.model_copy(
        update={"replayed": False}
    )


async def test_b53_edit_of_an_unselected_branch_keeps_both_branches(store: ThreadStore) -> None:
    await _qa(store)
    await store.edit("t", "q1", content="second", id="q1b")
    await store.append("t", assistant("r1b"))
    receipt = await store.edit("t", "q1", content="third", id="q1c")
    assert receipt.status == "selected"
    assert (await store.read("t")).head == "q1c"
    assert (await store.select("t", "q1")).head == "r1"
    assert (await store.select("t", "q1b")).head == "r1b"


async def test_b54_select_restores_each_branch_continuation(store: ThreadStore) -> None:
    await _qa(store)
    await store.edit("t", "q1", content="edited", id="q1b")
    await store.append("t", assistant("r1b"))
    assert (await store.select("t", "q1")).head == "r1"
    assert (await store.select("t", "q1b")).head == "r1b"


async def test_b55_selecting_a_group_start_on_the_active_path_is_a_noop(store: ThreadStore) -> None:
    await _qa(store)
    await store.append("t", user("q2"))
    revision = await store.revision("t")
    snapshot = await store.select("t", "r1")
    assert snapshot.head == "q2"
    assert await store.revision("t") == revision


async def test_b56_continuation_on_an_unselected_branch_is_restored(store: ThreadStore) -> None:
    await store.append("t", user("q1"))
    await store.append("t", assistant("r1"))
    await store.append("t", assistant("r2"), after="q1")
    await store.append("t", user("q3"), after="r2")
    await store.append("t", assistant("r3"), after="q3")
    assert (await store.read("t")).head == "r1"
    assert (await store.select("t", "r2")).head == "r3"


async def test_b57_selecting_a_deeper_node_of_an_unselected_branch_is_invalid(
    store: ThreadStore,
) -> None:
    await store.append("t", user("q1"))
    await store.append("t", assistant("r1"))
    await store.append("t", [assistant("r2"), assistant("r2b")], after="q1")
    await store.append("t", user("q3"), after="r2b")
    assert await _code(store, store.select("t", "r2b")) == "invalid_group"
    assert await _code(store, store.select("t", "q3")) == "invalid_group"


async def test_b58_selecting_an_unpublished_id_is_not_found(store: ThreadStore) -> None:
    await _qa(store)
    assert await _code(store, store.select("t", "ghost")) == "not_found"


async def test_b59_select_snapshot_is_pinned_to_its_selection(store: ThreadStore) -> None:
    await _qa(store)
    await store.append("t", assistant("r2"), after="q1")
    snapshot = await store.select("t", "r2")
    assert snapshot.head == "r2"
    assert ids(snapshot) == ["q1", "r2"]
    assert snapshot.revision == await store.revision("t")
    await store.append("t", user("later"))
    assert snapshot.head == "r2"
