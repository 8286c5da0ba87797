"""A sealed plan's history in one read: positions of the selected path, with their messages."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.threads import EMPTY_REVISION, ThreadStore
from tests.storage.conftest import assistant, tool_call, tool_result, user
from vocabulary.errors import ThreadError


async def _by_id(
    store: ThreadStore, thread_id: str, ranges: list[tuple[int, int]]
) -> tuple[str, list[str], list[object]]:
    """What the attempt read before: the path's ids, then each message by id."""
    revision, path = await store.path_ids(thread_id)
    ids = [message_id for first, stop in ranges for message_id in path[first:stop]]
    return revision, ids, list(await store.load_messages(thread_id, ids)) if ids else []


async def test_selection_is_the_path_ids_and_messages_at_the_positions(
    store: ThreadStore,
) -> None:
    await store.append("t", [user("u0"), assistant("a0")])
    await store.append("t", [user("u1"), tool_call("c1", "k1"), tool_result("r1", "k1")])
    await store.append("t", [user("u2"), assistant("a2")])
    await store.append("t", [user("u3"), assistant("a3")])
    await store.redact("t", "c1")  # its group is left out: positions skip it
    revision, path = await store.path_ids("t")
    assert path == ("u0", "a0", "u2", "a2", "u3", "a3")
    for ranges in ([(0, 6)], [(2, 6)], [(0, 1), (4, 6)], [(1, 3), (1, 3)], [(3, 3)], []):
        selection = await store.selected("t", ranges=ranges, revision=revision)
        assert selection is not None
        expected_revision, ids, messages = await _by_id(store, "t", ranges)
        assert selection.revision == expected_revision == revision
        assert list(selection.ids) == ids
        assert selection.messages == messages


async def test_a_moved_thread_is_none_before_its_ranges_are_checked(store: ThreadStore) -> None:
    first = await store.append("m", [user("u0"), assistant("a0")])
    await store.append("m", [user("u1"), assistant("a1")])
    revision, _ = await store.path_ids("m")
    # A shorter branch is selected: the old positions lie off the new path, but the plan is
    # stale first (re-planned), not in conflict.
    await store.append("m", [user("v1")], after=first.message_ids[-1])
    await store.select("m", "v1")
    assert await store.selected("m", ranges=[(0, 4)], revision=revision) is None
    current, path = await store.path_ids("m")
    assert path == ("u0", "a0", "v1")
    with pytest.raises(ThreadError) as raised:
        await store.selected("m", ranges=[(0, 4)], revision=current)
    assert raised.value.code == "identity_conflict"
    with pytest.raises(ThreadError) as raised:
        await store.selected("m", ranges=[(-1, 1)])
    assert raised.value.code == "identity_conflict"


async def test_empty_and_deleted_threads(store: ThreadStore) -> None:
    empty = await store.selected("never", ranges=[])
    assert empty is not None and empty.revision == EMPTY_REVISION and empty.ids == ()
    assert await store.selected("never", ranges=[(0, 0)], revision=EMPTY_REVISION) is not None
    with pytest.raises(ThreadError):
        await store.selected("never", ranges=[(0, 1)])
    await store.append("d", [user("u0"), assistant("a0")])
    await store.delete("d")
    with pytest.raises(ThreadError) as raised:
        await store.selected("d", ranges=[(0, 2)])
    assert raised.value.code == "deleted"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    turns=st.integers(min_value=0, max_value=12),
    cuts=st.lists(st.integers(min_value=0, max_value=30), max_size=6),
)
async def test_selection_agrees_with_the_reads_by_id(
    store: ThreadStore, turns: int, cuts: list[int]
) -> None:
    thread_id = f"h{turns}-{len(cuts)}-{sum(cuts)}"
    if (await store.path_ids(thread_id))[1] == ():
        for turn in range(turns):
            await store.append(
                thread_id, [user(f"u{turn}", text=f"q {turn}"), assistant(f"a{turn}")]
            )
    revision, path = await store.path_ids(thread_id)
    bounds = sorted(min(cut, len(path)) for cut in cuts)
    ranges = list(zip(bounds[::2], bounds[1::2], strict=False))
    selection = await store.selected(thread_id, ranges=ranges, revision=revision)
    assert selection is not None
    _, ids, messages = await _by_id(store, thread_id, ranges)
    assert list(selection.ids) == ids
    assert selection.messages == messages
