"""Summary workflow ids: injective over their components and within Temporal's length limit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from contracts.activities import PrepareSummaryInput
from crux.models import MAX_WORKFLOW_ID_BYTES
from workflows.summary import summary_workflow_id

ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=256
).filter(lambda s: s.strip() == s)


def _input(thread: str, through: str, model: str = "openai:gpt-4o-mini") -> PrepareSummaryInput:
    return PrepareSummaryInput(
        thread_id=thread,
        owner="main",
        through_id=through,
        strategy="adaptive",
        model=model,
        counting_model=model,
        generation_id="g",
    )


def test_a_slash_inside_a_thread_id_cannot_shift_the_segments() -> None:
    assert summary_workflow_id(_input("X/x", "y")) != summary_workflow_id(_input("X", "x/y"))


@given(ids, ids, ids, ids)
def test_summary_ids_are_injective_and_bounded(a: str, b: str, c: str, d: str) -> None:
    first = summary_workflow_id(_input(a, b))
    second = summary_workflow_id(_input(c, d))
    assert len(first.encode()) <= MAX_WORKFLOW_ID_BYTES
    assert len(second.encode()) <= MAX_WORKFLOW_ID_BYTES
    assert (first == second) == ((a, b) == (c, d))
