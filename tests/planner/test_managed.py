"""Managed history as the first fidelity dimension (the summary extension point)."""

from __future__ import annotations

import pytest

from planner import (
    HistoryAggregate,
    HistoryItem,
    HistorySummary,
    InputBudget,
    ManagedHistory,
    RequestCompositionError,
    background_preparations,
    context,
    droppable,
    history,
    inline_preparations,
    plan,
    preview,
)
from tests.planner.helpers import EXACT_MAX, request, turns

SYSTEM = (HistoryItem(id="s0", role="system", group_id="sys", tokens=20),)


def managed(**fields: object) -> ManagedHistory:
    fields.setdefault("recent_messages", 4)
    return ManagedHistory(**fields)  # type: ignore[arg-type]


def test_defaults() -> None:
    """107: inline miss policy by default; the builder mirrors `history(...)`."""
    policy = history()
    assert policy.on_miss == "inline"
    assert policy.recent_messages is None and policy.recent_tokens is None
    assert history(recent=12).recent_messages == 12
    assert history(recent={"messages": 3, "tokens": 50}).recent_tokens == 50


def test_default_suffix_is_forty_percent_of_the_strict_max() -> None:
    """108: without explicit caps the exact suffix holds floor(0.4 x max) tokens."""
    items = turns(20, tokens=100)  # 4,000 tokens
    budget = InputBudget(max=1_000)  # suffix cap 400 tokens = 2 groups
    sealed = plan(
        request(
            history=items,
            history_policy=history(on_miss="recent-only"),
            input_budget=budget,
        )
    )
    assert sealed.message_ids == ("u18", "a18", "u19", "a19")
    assert [a.representation for a in sealed.receipt.adaptations] == ["omitted"]


def test_whole_history_in_the_suffix_stays_exact() -> None:
    """109: an empty prefix means no managed work: history is sent exact."""
    sealed = plan(request(history=turns(2), history_policy=managed()))
    assert sealed.message_ids == ("u0", "a0", "u1", "a1")
    assert sealed.preparations == ()
    assert sealed.inspection.candidates == ()


def test_below_the_watermark_nothing_is_prepared() -> None:
    """110: full <= optimize_at -> no preparation and no adaptation."""
    sealed = plan(request(history=turns(10), history_policy=managed()))
    assert len(sealed.message_ids) == 20
    assert sealed.receipt.adaptations == ()
    assert sealed.preparations == ()


def test_between_watermark_and_max_full_is_sent_and_maintenance_scheduled() -> None:
    """111: optimize_at < full <= max -> full now, summary prepared after the response."""
    sealed = plan(
        request(
            history=turns(10),
            history_policy=managed(),
            input_budget=InputBudget(optimize_at=100),
        )
    )
    assert len(sealed.message_ids) == 20
    assert sealed.tier == "max"
    assert [p.when for p in sealed.preparations] == ["after-response"]
    # It aims at the next request: once this turn is committed it is the newest group, and
    # the four-message suffix then starts one group later.
    assert sealed.preparations[0].prefix_messages == 18
    assert sealed.preparations[0].through_id == "a8"
    assert "HISTORY_MAINTENANCE_SCHEDULED" in [w.code for w in sealed.receipt.warnings]
    prospective = preview(
        request(
            history=turns(10),
            history_policy=managed(),
            input_budget=InputBudget(optimize_at=100),
        )
    )
    assert prospective.status == "fits"
    assert prospective.warnings == ()


def test_above_max_without_artifact_asks_for_inline_preparation() -> None:
    """113: inline miss -> the error carries the inline preparation to run, then replan."""
    with pytest.raises(RequestCompositionError) as raised:
        plan(
            request(
                history=turns(10),
                history_policy=managed(),
                input_budget=InputBudget(max=100),
            )
        )
    assert raised.value.code == "REPRESENTATION_UNAVAILABLE"
    assert raised.value.diagnostics["preparations"] == [
        {
            "contributor": "history",
            "kind": "summary",
            "when": "inline",
            "prefix_messages": 16,
            "through_id": "a7",
            "through_position": 15,
            "max_summary_tokens": 60,
        }
    ]
    (need,) = inline_preparations(raised.value)
    assert (need.contributor, need.when, need.prefix_messages) == ("history", "inline", 16)
    assert raised.value.diagnostics["unavailable"] == ["history"]


def test_above_max_recent_only_degrades_to_the_exact_suffix() -> None:
    """115: recent-only -> no preparation; adaptation `omitted` with the recent suffix."""
    sealed = plan(
        request(
            history=turns(10),
            history_policy=managed(on_miss="recent-only"),
            input_budget=InputBudget(max=100),
        )
    )
    assert sealed.message_ids == ("u8", "a8", "u9", "a9")
    (adaptation,) = sealed.receipt.adaptations
    assert (adaptation.contributor, adaptation.representation) == ("history", "omitted")


def test_above_max_with_fail_is_unavailable_without_preparation() -> None:
    """116: fail -> REPRESENTATION_UNAVAILABLE before dispatch, nothing prepared inline.

    The refresh it lacked is listed to start in the background, so a later turn fits.
    """
    with pytest.raises(RequestCompositionError) as raised:
        plan(
            request(
                history=turns(10),
                history_policy=managed(on_miss="fail"),
                input_budget=InputBudget(max=100),
            )
        )
    assert raised.value.code == "REPRESENTATION_UNAVAILABLE"
    assert inline_preparations(raised.value) == ()
    [later] = background_preparations(raised.value)
    assert (later.when, later.through_id) == ("after-response", "a7")


def test_summary_sits_after_the_leading_prefix_and_before_the_exact_suffix() -> None:
    """117: prefix ids, then the summary placement, then the raw suffix."""
    summary = HistorySummary(artifact_id="hs-1", tokens=30, covers=16, support_request_ids=("sup",))
    sealed = plan(
        request(
            history=SYSTEM + turns(10),
            history_policy=managed(summary=summary),
            input_budget=InputBudget(max=150),
        )
    )
    assert sealed.message_ids == ("s0", "u8", "a8", "u9", "a9")
    assert sealed.history_summary is not None
    assert (sealed.history_summary.artifact_id, sealed.history_summary.position) == ("hs-1", 1)
    assert sealed.history_summary.tokens == 30
    assert sealed.input_tokens == 20 + 30 + 40
    assert sealed.inspection.artifacts[0].support_request_ids == ("sup",)
    assert "sup" in sealed.inspection.linked_request_ids


def test_stale_summary_is_reused_with_a_longer_raw_suffix() -> None:
    """118: an older-prefix summary plus more raw messages, warned as stale."""
    summary = HistorySummary(artifact_id="hs-0", tokens=30, covers=12, stale=True)
    sealed = plan(
        request(
            history=turns(10),
            history_policy=managed(summary=summary),
            input_budget=InputBudget(max=150),
        )
    )
    assert sealed.message_ids == ("u6", "a6", "u7", "a7", "u8", "a8", "u9", "a9")
    assert "HISTORY_SUMMARY_STALE" in [w.code for w in sealed.receipt.warnings]


@pytest.mark.parametrize(
    ("covers", "optimize_at", "due"),
    [(12, 60, True), (12, 1000, False), (16, 60, False), (16, 45, True), (18, 45, False)],
)
def test_refresh_is_due_once_a_stale_request_crosses_the_watermark(
    covers: int, optimize_at: int, due: bool
) -> None:
    """Past optimize_at, a summary that will not cover the next request's gap is refreshed.

    With this turn committed, the next suffix starts at message 18: a summary covering 16
    is fresh now but stale next turn, so it is refreshed in the background already.
    """
    summary = HistorySummary(artifact_id="hs", tokens=10, covers=covers)
    sealed = plan(
        request(
            history=turns(10),
            history_policy=managed(summary=summary),
            input_budget=InputBudget(optimize_at=optimize_at, max=1000),
        )
    )
    assert bool(sealed.preparations) is due
    if due:
        [need] = sealed.preparations
        assert need.when == "after-response"
        assert need.max_summary_tokens is not None and need.max_summary_tokens <= optimize_at


def test_recent_only_never_schedules_a_support_call() -> None:
    sealed = plan(
        request(
            history=turns(10),
            history_policy=managed(on_miss="recent-only"),
            input_budget=InputBudget(optimize_at=40, max=1000),
        )
    )
    assert sealed.preparations == ()


@pytest.mark.parametrize("covers", [4, 12])
def test_stale_summary_that_no_longer_fits_asks_for_an_inline_refresh(covers: int) -> None:
    summary = HistorySummary(artifact_id="hs", tokens=10, covers=covers)
    with pytest.raises(RequestCompositionError) as raised:
        plan(
            request(
                history=turns(10),
                history_policy=managed(summary=summary),
                input_budget=InputBudget(max=60),
            )
        )
    [need] = inline_preparations(raised.value)
    assert (need.when, need.prefix_messages, need.through_id) == ("inline", 16, "a7")
    assert need.max_summary_tokens is not None
    # With the refreshed summary the request fits.
    fresh = HistorySummary(artifact_id="hs2", tokens=need.max_summary_tokens, covers=16)
    sealed = plan(
        request(
            history=turns(10),
            history_policy=managed(summary=fresh),
            input_budget=InputBudget(max=60),
        )
    )
    assert sealed.input_tokens <= 60
    assert "HISTORY_SUMMARY_STALE" not in [w.code for w in sealed.receipt.warnings]


def test_stale_summary_under_fail_is_unavailable_and_under_recent_only_degrades() -> None:
    summary = HistorySummary(artifact_id="hs", tokens=10, covers=4)
    with pytest.raises(RequestCompositionError) as raised:
        plan(
            request(
                history=turns(10),
                history_policy=managed(summary=summary, on_miss="fail"),
                input_budget=InputBudget(max=60),
            )
        )
    assert raised.value.code == "REPRESENTATION_UNAVAILABLE"
    assert inline_preparations(raised.value) == ()
    sealed = plan(
        request(
            history=turns(10),
            history_policy=managed(summary=summary, on_miss="recent-only"),
            input_budget=InputBudget(max=60),
        )
    )
    assert {c.contributor: c.representation for c in sealed.choices}["history"] == "omitted"


def test_misaligned_summary_is_unavailable() -> None:
    summary = HistorySummary(artifact_id="hs", tokens=10, covers=3)  # mid-group
    with pytest.raises(RequestCompositionError) as raised:
        plan(
            request(
                history=turns(10),
                history_policy=managed(summary=summary),
                input_budget=InputBudget(max=100),
            )
        )
    assert raised.value.code == "REPRESENTATION_UNAVAILABLE"


def test_history_is_reduced_only_after_every_other_contributor() -> None:
    summary = HistorySummary(artifact_id="hs", tokens=30, covers=16)
    sealed = plan(
        request(
            history=turns(10),
            history_policy=managed(summary=summary),
            contributors=(droppable(context("faq", tokens=100)),),
            input_budget=InputBudget(max=250),
        )
    )
    kinds = {c.contributor: c.representation for c in sealed.choices}
    assert kinds == {"history": "full", "faq": "omitted"}
    assert sealed.epoch.floor("faq") == 2 - 1


def test_preview_is_unknown_when_only_the_unprepared_history_summary_fits() -> None:
    result = preview(
        request(
            history=turns(10),
            history_policy=managed(),
            input_budget=InputBudget(max=600),
        ).model_copy(update={"history": turns(40)})
    )
    assert result.status == "unknown"
    assert result.adaptations[0].state == "unprepared"
    assert result.max_input_tokens == 600 <= EXACT_MAX


def test_history_id_is_reserved_under_managed_history() -> None:
    with pytest.raises(RequestCompositionError):
        plan(
            request(
                history=turns(10),
                history_policy=managed(),
                contributors=(context("history", tokens=1),),
            )
        )


@pytest.mark.parametrize(
    ("origin", "code"),
    [("inline", "HISTORY_SUMMARY_INLINE"), ("joined", "HISTORY_SUMMARY_JOINED")],
)
def test_summary_origin_is_receipted(origin: str, code: str) -> None:
    """113/114: a summary prepared inline or joined in flight is named on the receipt."""
    summary = HistorySummary.model_validate(
        {"artifact_id": "hs", "tokens": 30, "covers": 16, "origin": origin}
    )
    sealed = plan(
        request(
            history=turns(10),
            history_policy=managed(summary=summary),
            input_budget=InputBudget(max=150),
        )
    )
    assert code in [w.code for w in sealed.receipt.warnings]
    assert [a.representation for a in sealed.receipt.adaptations] == ["summary"]


def test_summary_lines_up_with_a_listed_system_prefix_before_an_older_aggregate() -> None:
    """The reader lists the system prefix; the aggregate lies between it and the groups."""
    listed = SYSTEM + turns(4, prefix="n")
    older = HistoryAggregate(count=12, tokens=120, first_id="u0", last_id="a5", prefix_items=1)
    # 12 aggregated messages plus the two oldest listed groups are summarised.
    summary = HistorySummary(artifact_id="hs", tokens=10, covers=16)
    sealed = plan(
        request(
            history=listed,
            older_history=older,
            history_policy=managed(summary=summary, recent_messages=4),
            input_budget=InputBudget(max=80),
        )
    )
    assert sealed.message_ids == ("s0", "nu2", "na2", "nu3", "na3")
    assert sealed.history_summary is not None and sealed.history_summary.position == 1
    assert "HISTORY_SUMMARY_STALE" not in [w.code for w in sealed.receipt.warnings]


def test_system_prefix_survives_a_recent_cap_with_older_history() -> None:
    listed = SYSTEM + turns(3, prefix="n")
    older = HistoryAggregate(count=10, tokens=100, first_id="u0", last_id="a4", prefix_items=1)
    sealed = plan(
        request(
            history=listed,
            older_history=older,
            history_policy=history.recent(messages=2),
            input_budget=InputBudget(max=1000),
        )
    )
    assert sealed.message_ids == ("s0", "nu2", "na2")
    assert sealed.included_older is None


def test_a_listed_prefix_that_is_not_system_is_invalid() -> None:
    older = HistoryAggregate(count=2, tokens=20, first_id="x", last_id="y", prefix_items=1)
    with pytest.raises(RequestCompositionError) as raised:
        plan(request(history=turns(2), older_history=older, history_policy=history.exact()))
    assert raised.value.code == "INVALID_COMPOSITION"
