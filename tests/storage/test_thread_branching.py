"""Thread behaviours 36-45 (semantics digest section 8): concurrency, alternatives, variants.

Plain appends choose their parent under the control row lock, so two plain appends never
observe the same head; the race of behaviours 36-38 is between writers that pinned the
head they observed (`after` or a managed expected head), which is what managed turns do.
"""

from __future__ import annotations

import asyncio

import pytest

from crux.errors import ThreadError
from storage.threads import MessageEntry, ThreadStore, VariantInfo
from tests.storage.conftest import assistant, ids, user


async def _race(store: ThreadStore) -> tuple[str, str]:
    await store.append("t", [user("u0"), assistant("a0")])
    left, right = await asyncio.gather(
        store.commit_managed_turn("t", [user("x1"), assistant("x2")], expected_head="a0"),
        store.commit_managed_turn("t", [user("y1"), assistant("y2")], expected_head="a0"),
    )
    assert sorted([left.status, right.status]) == ["alternative", "selected"]
    assert left.parent_id == right.parent_id == "a0"
    winner, loser = (left, right) if left.status == "selected" else (right, left)
    assert loser.selected_head == winner.message_ids[-1]
    return winner.message_ids[-1], loser.message_ids[-1]


async def test_b36_two_appends_on_one_observed_head_one_selected_one_alternative(
    store: ThreadStore,
) -> None:
    await _race(store)


async def test_b36_plain_after_appends_race_the_same_way(store: ThreadStore) -> None:
    await store.append("t", user("u0"))
    left, right = await asyncio.gather(
        store.append("t", assistant("x"), after="u0"),
        store.append("t", assistant("y"), after="u0"),
    )
    assert sorted([left.status, right.status]) == ["alternative", "selected"]


async def test_b37_after_the_race_head_and_alternative_path_are_readable(
    store: ThreadStore,
) -> None:
    winner, loser = await _race(store)
    assert (await store.read("t")).head == winner
    alternative = await store.read("t", at=loser)
    assert ids(alternative)[:2] == ["u0", "a0"]
    assert ids(alternative)[-1] == loser


async def test_b38_alternative_receipt_names_the_winners_head(store: ThreadStore) -> None:
    winner, loser = await _race(store)
    assert winner != loser


async def test_b39_after_an_older_group_end_publishes_an_alternative(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    await store.append("t", assistant("a1"))
    await store.append("t", user("u2"))
    receipt = await store.append("t", user("v2"), after="a1")
    assert receipt.status == "alternative"
    assert receipt.selected_head == "u2"
    assert ids(await store.read("t")) == ["u1", "a1", "u2"]


async def test_b40_after_a_mid_group_message_is_invalid(store: ThreadStore) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    with pytest.raises(ThreadError) as caught:
        await store.append("t", user("u2"), after="u1")
    assert caught.value.code == "invalid_group"


async def test_b41_after_an_unpublished_id_is_not_found(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    with pytest.raises(ThreadError) as caught:
        await store.append("t", user("u2"), after="ghost")
    assert caught.value.code == "not_found"


async def test_b42_stale_managed_commit_is_an_alternative_never_rebased(store: ThreadStore) -> None:
    await store.append("t", [user("u1"), assistant("a1")])
    await store.append("t", user("manual"))
    receipt = await store.commit_managed_turn(
        "t", [user("u2"), assistant("a2")], expected_head="a1"
    )
    assert receipt.status == "alternative"
    assert receipt.parent_id == "a1"
    assert ids(await store.read("t", at="a2")) == ["u1", "a1", "u2", "a2"]


async def test_b43_regeneration_then_select(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    await store.append("t", assistant("a1"))
    receipt = await store.append("t", assistant("a2"), after="u1")
    assert receipt.status == "alternative"
    snapshot = await store.select("t", "a2")
    assert snapshot.head == "a2"
    last = snapshot.entries[-1]
    assert isinstance(last, MessageEntry)
    assert last.variant == VariantInfo(index=1, count=2, previous="a1", next=None)


async def test_b44_variants_only_on_group_starts_with_siblings(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    await store.append("t", assistant("b"))
    await store.append("t", assistant("c"), after="u1")
    await store.append("t", assistant("a"), after="u1")
    snapshot = await store.read("t", at="c")
    first, middle = snapshot.entries
    assert isinstance(first, MessageEntry)
    assert first.variant is None
    assert isinstance(middle, MessageEntry)
    # Publication order, not id order: b, c, a.
    assert middle.variant == VariantInfo(index=1, count=3, previous="b", next="a")
    head_side = (await store.read("t")).entries[-1]
    assert isinstance(head_side, MessageEntry)
    assert head_side.variant == VariantInfo(index=0, count=3, previous=None, next="c")


async def test_b45_message_after_a_variant_group_start_has_no_variant(store: ThreadStore) -> None:
    await store.append("t", user("u1"))
    await store.append("t", [assistant("a1"), assistant("a1b")])
    await store.append("t", [assistant("a2"), assistant("a2b")], after="u1")
    await store.append("t", user("u2"))
    snapshot = await store.read("t")
    variants = {
        entry.id: entry.variant for entry in snapshot.entries if isinstance(entry, MessageEntry)
    }
    assert variants["a1"] is not None
    assert variants["a1b"] is None
    assert variants["u2"] is None


async def test_b56_root_alternative_continuation_is_restored(store: ThreadStore) -> None:
    """A branch published at the root beside the head remembers its tip and its continuation."""
    await store.commit_managed_turn("t", [user("m0")], expected_head=None)
    root_alternative = await store.commit_managed_turn("t", [user("m1")], expected_head=None)
    assert root_alternative.status == "alternative"
    await store.commit_managed_turn("t", [user("m4")], expected_head="m1")
    snapshot = await store.select("t", "m1")
    assert snapshot.head == "m4"
    assert ids(snapshot) == ["m1", "m4"]
