"""Parallel ids: deterministic, injective over (parallel id, member), within Temporal's limit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contracts.generation import GenerationInput
from vocabulary.ids import (
    MAX_GENERATION_ID_LENGTH,
    MAX_MEMBER_NAME_LENGTH,
    MAX_PARALLEL_ID_LENGTH,
    MAX_WORKFLOW_ID_BYTES,
    member_workflow_id,
    parallel_member_generation_id,
    parallel_member_workflow_id,
    parallel_workflow_id,
)

_ids = st.text(
    st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=MAX_PARALLEL_ID_LENGTH
)
_names = st.text(
    st.characters(blacklist_categories=["Cs", "Cc"]), min_size=1, max_size=MAX_MEMBER_NAME_LENGTH
)


def test_readable_ids_nest_the_member_under_the_parent() -> None:
    assert parallel_workflow_id("support-turn") == "crux/parallel/support-turn"
    assert (
        parallel_member_workflow_id("support-turn", "billing")
        == "crux/parallel/support-turn/billing"
    )
    assert parallel_member_generation_id("support-turn", "billing") == "support-turn/billing"
    # A `/` inside either component is encoded, so the pairs never meet.
    assert parallel_member_workflow_id("a/b", "c") != parallel_member_workflow_id("a", "b/c")
    assert parallel_member_generation_id("a/b", "c") != parallel_member_generation_id("a", "b/c")


@given(_ids, _names)
def test_ids_fit_every_limit_and_are_deterministic(parallel_id: str, member: str) -> None:
    child = parallel_member_workflow_id(parallel_id, member)
    assert len(child.encode()) <= MAX_WORKFLOW_ID_BYTES
    assert child.startswith(parallel_workflow_id(parallel_id) + "/")
    assert child == member_workflow_id(parallel_workflow_id(parallel_id), member)
    generation_id = parallel_member_generation_id(parallel_id, member)
    assert len(generation_id) <= MAX_GENERATION_ID_LENGTH
    assert generation_id == parallel_member_generation_id(parallel_id, member)
    # The derived generation id is a valid generation id on any Thread.
    GenerationInput(generation_id=generation_id, thread_id="t")


@given(_ids, _names, _ids, _names)
def test_distinct_pairs_get_distinct_ids(a: str, m: str, b: str, n: str) -> None:
    if (a, m) == (b, n):
        return
    assert parallel_member_workflow_id(a, m) != parallel_member_workflow_id(b, n)
    assert parallel_member_generation_id(a, m) != parallel_member_generation_id(b, n)
