"""Receipt evidence of the history source and of the summary path."""

from __future__ import annotations

from planner import HistoryItem, HistorySummary, InputBudget, ManagedHistory, RecentHistory, plan
from tests.planner.helpers import request, turns

SYSTEM = (HistoryItem(id="s0", role="system", group_id="sys", tokens=20),)


def _codes(**fields: object) -> list[str]:
    return [w.code for w in plan(request(**fields)).receipt.warnings]


def test_a_projection_over_no_source_is_receipted() -> None:
    assert "HISTORY_SOURCE_MISSING" in _codes(
        history_policy=RecentHistory(messages=20), history_source="none"
    )
    assert "HISTORY_SOURCE_MISSING" in _codes(
        history_policy=ManagedHistory(), history_source="none"
    )


def test_exact_history_or_a_present_source_is_not_warned() -> None:
    assert "HISTORY_SOURCE_MISSING" not in _codes(history_source="none")
    for source in ("thread", "messages", None):
        codes = _codes(
            history=turns(2), history_policy=RecentHistory(messages=2), history_source=source
        )
        assert "HISTORY_SOURCE_MISSING" not in codes


def test_the_receipt_names_the_summary_path() -> None:
    summary = HistorySummary(artifact_id="hs-1", tokens=30, covers=16)
    sealed = plan(
        request(
            history=SYSTEM + turns(10),
            history_policy=ManagedHistory(recent_messages=4, summary=summary),
            input_budget=InputBudget(max=150),
        )
    )
    assert sealed.history_summary is not None
    assert sealed.receipt.summary_path == "portable"
    exact = plan(request(history=turns(2), history_policy=ManagedHistory(recent_messages=4)))
    assert exact.receipt.summary_path is None
