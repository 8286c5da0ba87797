"""Path ids: the positions of a history view, read without roles or counts."""

from __future__ import annotations

import pytest

from storage.threads import EMPTY_REVISION, ThreadStore
from tests.storage.conftest import assistant, tool_call, tool_result, user
from vocabulary.errors import ThreadError


async def test_path_ids_are_the_history_views_ids_and_revision(store: ThreadStore) -> None:
    assert await store.path_ids("empty") == (EMPTY_REVISION, ())
    await store.append("t", [user("u0"), assistant("a0")])
    await store.append("t", [user("u1"), tool_call("c1", "k1"), tool_result("r1", "k1")])
    await store.append("t", [user("u2"), assistant("a2")])
    await store.redact("t", "c1")
    view = await store.read_history_view("t")
    # A group with an erased member is left out whole, so positions skip it in both.
    assert await store.path_ids("t") == (view.revision, view.message_ids)
    assert view.message_ids == ("u0", "a0", "u2", "a2")
    # A later turn extends the path: earlier positions keep naming the same messages.
    await store.append("t", [user("u3"), assistant("a3")])
    _, later = await store.path_ids("t")
    assert later == ("u0", "a0", "u2", "a2", "u3", "a3")


async def test_path_ids_follow_the_selected_branch_and_refuse_a_deleted_thread(
    store: ThreadStore,
) -> None:
    first = await store.append("b", [user("u0"), assistant("a0")])
    await store.append("b", [user("u1"), assistant("a1")])
    # A sibling of the second turn, published after the first one and selected.
    await store.append("b", [user("v1"), assistant("b1")], after=first.message_ids[-1])
    view = await store.read_history_view("b")
    assert await store.path_ids("b") == (view.revision, view.message_ids)
    await store.select("b", "u1")
    view = await store.read_history_view("b")
    assert view.message_ids == ("u0", "a0", "u1", "a1")
    assert await store.path_ids("b") == (view.revision, view.message_ids)
    await store.delete("b")
    with pytest.raises(ThreadError) as raised:
        await store.path_ids("b")
    assert raised.value.code == "deleted"
