"""The managed-execution surface used by the generation activities."""

from __future__ import annotations

import pytest

from crux.errors import ThreadError
from storage.threads import EMPTY_REVISION, ThreadStore
from tests.storage.conftest import assistant, tool_call, tool_result, user


async def test_history_view_of_an_unknown_thread_is_empty(store: ThreadStore) -> None:
    view = await store.read_history_view("t")
    assert view.revision == EMPTY_REVISION
    assert view.head is None
    assert view.messages == ()


async def test_history_view_is_content_free_and_ordered(store: ThreadStore) -> None:
    await store.append(
        "t", [user("u1"), tool_call("a1", "c1"), tool_result("r1", "c1"), assistant("a2")]
    )
    await store.append("t", user("u2"))
    view = await store.read_history_view("t", encoding="cl100k")
    assert [m.id for m in view.messages] == ["u1", "a1", "r1", "a2", "u2"]
    assert view.head == "u2"
    first, call, result, final, second = view.messages
    assert (first.group_id, first.seq, first.group_end, first.parent_id) == ("u1", 0, False, None)
    assert call.tool_call_ids == ("c1",)
    assert result.tool_call_id == "c1"
    assert final.group_end
    assert second.group_id == "u2"
    assert second.parent_id == "a2"
    assert all(m.tokens is None for m in view.messages)
    assert "hi" not in view.model_dump_json()


async def test_token_counts_attach_per_encoding(store: ThreadStore) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    before = await store.revision("t")
    await store.store_token_counts("t", "cl100k", {"u1": 3, "a1": 5})
    await store.store_token_counts("t", "cl100k", {"u1": 3})
    view = await store.read_history_view("t", encoding="cl100k")
    assert [m.tokens for m in view.messages] == [3, 5]
    other = await store.read_history_view("t", encoding="o200k")
    assert [m.tokens for m in other.messages] == [None, None]
    assert await store.revision("t") == before


async def test_token_counts_for_unknown_messages_fail(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    with pytest.raises(ThreadError) as caught:
        await store.store_token_counts("t", "cl100k", {"nope": 1})
    assert caught.value.code == "not_found"


async def test_load_messages_keeps_order_and_ids(store: ThreadStore) -> None:
    await store.append("t", [user("u1", "question"), assistant("a1", "answer")])
    loaded = await store.load_messages("t", ["a1", "u1"])
    assert [(m.id, m.text) for m in loaded] == [("a1", "answer"), ("u1", "question")]
    with pytest.raises(ThreadError) as caught:
        await store.load_messages("t", ["u1", "missing"])
    assert caught.value.code == "not_found"
    await store.redact("t", "u1")
    with pytest.raises(ThreadError) as caught:
        await store.load_messages("t", ["u1"])
    assert caught.value.code == "redacted"


async def test_validate_revision_detects_any_change(store: ThreadStore) -> None:
    await store.validate_revision("t", EMPTY_REVISION)
    await store.append("t", user("u1"))
    view = await store.read_history_view("t")
    await store.validate_revision("t", view.revision)
    await store.append("t", assistant("a1"))
    with pytest.raises(ThreadError) as caught:
        await store.validate_revision("t", view.revision)
    assert caught.value.code == "identity_conflict"
    await store.delete("t")
    with pytest.raises(ThreadError) as caught:
        await store.validate_revision("t", view.revision)
    assert caught.value.code == "deleted"


async def test_managed_commit_selected_then_alternative_then_replayed(store: ThreadStore) -> None:
    first = await store.commit_managed_turn("t", [user("u1"), assistant("a1")], expected_head=None)
    assert first.status == "selected"
    assert first.parent_id is None
    assert first.selected_head == "a1"
    second = await store.commit_managed_turn("t", [user("u2"), assistant("a2")], expected_head="a1")
    assert second.status == "selected"
    late = await store.commit_managed_turn("t", [user("u3"), assistant("a3")], expected_head="a1")
    assert late.status == "alternative"
    assert late.parent_id == "a1"
    assert late.selected_head == "a2"
    again = await store.commit_managed_turn("t", [user("u3"), assistant("a3")], expected_head="a1")
    assert again == late.model_copy(update={"replayed": True})
    view = await store.read_history_view("t")
    assert view.head == "a2"


async def test_managed_commit_replay_with_other_expected_head_conflicts(store: ThreadStore) -> None:
    await store.commit_managed_turn("t", [user("u1"), assistant("a1")], expected_head=None)
    await store.commit_managed_turn("t", [user("u2"), assistant("a2")], expected_head="a1")
    with pytest.raises(ThreadError) as caught:
        await store.commit_managed_turn("t", [user("u2"), assistant("a2")], expected_head=None)
    assert caught.value.code == "identity_conflict"


async def test_history_view_leaves_out_groups_with_erased_members(store: ThreadStore) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    await store.append("t", [user("u2"), assistant("a2")])
    await store.append("t", [user("u3"), assistant("a3")])
    await store.redact("t", "a1")
    await store.remove_group("t", "u2")
    view = await store.read_history_view("t")
    assert [m.id for m in view.messages] == ["u3", "a3"]
