"""Representation ladders, two-tier selection and epochs (behaviours 138-147)."""

from __future__ import annotations

import itertools

import pytest

from planner import (
    EpochFloor,
    EpochFloors,
    InputBudget,
    RequestCompositionError,
    SealedPlan,
    Tool,
    context,
    droppable,
    offloadable,
    plan,
    prefer,
    summarizable,
)
from tests.planner.helpers import EXACT, request

SEARCH = Tool(name="search", tokens=50)


def kinds(sealed: SealedPlan) -> dict[str, str]:
    return {choice.contributor: choice.representation for choice in sealed.choices}


def test_138_prefer_switches_to_the_authored_alternative_above_the_watermark() -> None:
    """138: below the watermark full is chosen; above it compact, receipted as `authored`."""
    catalog = prefer(context("catalog", tokens=3_000), context("catalog-index", tokens=500))
    below = plan(request(contributors=(catalog,), input_budget=InputBudget(optimize_at=4_000)))
    assert kinds(below) == {"catalog": "full"}
    assert below.receipt.adaptations == ()
    above = plan(request(contributors=(catalog,), input_budget=InputBudget(optimize_at=2_000)))
    assert kinds(above) == {"catalog": "authored"}
    (adaptation,) = above.receipt.adaptations
    assert adaptation.contributor == "catalog"
    assert adaptation.representation == "authored"
    assert adaptation.source == "catalog-index"


def test_139_a_candidate_within_optimize_at_beats_higher_fidelity_within_max() -> None:
    """139: the best candidate <= optimize_at wins over a better one that only fits max."""
    catalog = prefer(context("catalog", tokens=3_000), context("catalog-index", tokens=500))
    sealed = plan(
        request(
            system_tokens=1_000,
            contributors=(catalog,),
            input_budget=InputBudget(optimize_at=2_000, max=8_000),
        )
    )
    assert kinds(sealed) == {"catalog": "authored"}
    assert sealed.tier == "optimize_at"
    assert sealed.input_tokens == 1_500


def test_140_without_a_soft_fit_the_best_candidate_within_max_wins() -> None:
    """140: nothing <= optimize_at -> highest fidelity <= max (above the watermark)."""
    catalog = prefer(context("catalog", tokens=3_000), context("catalog-index", tokens=1_500))
    faq = droppable(context("faq", tokens=1_000))
    sealed = plan(
        request(
            system_tokens=2_000,
            contributors=(catalog, faq),
            input_budget=InputBudget(optimize_at=1_000, max=5_500),
        )
    )
    assert sealed.tier == "max"
    # The earlier-declared catalog keeps full fidelity; the faq pays for it.
    assert kinds(sealed) == {"catalog": "full", "faq": "omitted"}
    assert sealed.input_tokens == 5_000


def test_141_droppable_is_omitted_last_and_takes_its_tools_along() -> None:
    """141: omission only after every higher rung fails; it removes the owned tools."""
    notes = droppable(
        summarizable(
            context("notes", tokens=3_000, tools=(SEARCH,)), summary_tokens=800, artifact_id="s"
        )
    )
    roomy = plan(request(contributors=(notes,), input_budget=InputBudget(optimize_at=1_000)))
    assert kinds(roomy) == {"notes": "summary"}
    assert roomy.removed_tools == ()
    tight = plan(request(contributors=(notes,), input_budget=InputBudget(max=500)))
    assert kinds(tight) == {"notes": "omitted"}
    assert tight.removed_tools == ("search",)
    assert tight.input_tokens == 0
    assert tight.choices[0].removed_tools == ("search",)


def test_142_authored_alternatives_keep_the_primary_tools() -> None:
    """142: capabilities are sticky: an alternative still carries the primary's tools."""
    ladder = prefer(
        context("playbook", tokens=2_000, tools=(SEARCH,)),
        context("playbook-short", tokens=300, tools=(SEARCH,)),
    )
    sealed = plan(request(contributors=(ladder,), input_budget=InputBudget(max=1_000)))
    assert kinds(sealed) == {"playbook": "authored"}
    assert sealed.removed_tools == ()
    assert sealed.input_tokens == 300 + 50
    (record,) = sealed.inspection.contributions
    assert record.classification == "sticky"
    assert record.tools == ("search",)


def test_142_alternatives_must_declare_the_same_capabilities() -> None:
    with pytest.raises(RequestCompositionError) as raised:
        prefer(context("a", tokens=10, tools=(SEARCH,)), context("b", tokens=5))
    assert raised.value.code == "INVALID_COMPOSITION"


def test_144_fidelity_is_lexicographic_by_priority_then_declaration() -> None:
    """144: higher priority keeps fidelity; the result ignores enumeration order."""
    high = droppable(context("high", tokens=3_000, priority=10))
    mid = droppable(context("mid", tokens=3_000, priority=5))
    low = droppable(context("low", tokens=3_000, priority=1))
    results = set()
    for order in itertools.permutations((high, mid, low)):
        sealed = plan(request(contributors=order, input_budget=InputBudget(max=6_500)))
        results.add(tuple(sorted(kinds(sealed).items())))
    assert results == {(("high", "full"), ("low", "omitted"), ("mid", "full"))}


def test_144_declaration_order_breaks_priority_ties() -> None:
    first = droppable(context("first", tokens=3_000))
    second = droppable(context("second", tokens=3_000))
    sealed = plan(request(contributors=(first, second), input_budget=InputBudget(max=4_000)))
    assert kinds(sealed) == {"first": "full", "second": "omitted"}
    swapped = plan(request(contributors=(second, first), input_budget=InputBudget(max=4_000)))
    assert kinds(swapped) == {"second": "full", "first": "omitted"}


def test_144_lower_priority_shrinks_before_a_higher_one_is_touched() -> None:
    big = prefer(context("big", tokens=4_000, priority=2), context("big-short", tokens=1_000))
    small = droppable(context("small", tokens=1_000, priority=1))
    sealed = plan(request(contributors=(small, big), input_budget=InputBudget(max=4_500)))
    assert kinds(sealed) == {"small": "omitted", "big": "full"}


def test_145_a_reduced_contributor_never_re_expands_within_an_epoch() -> None:
    """145: later steps keep the floor even when headroom returns."""
    ladder = prefer(context("catalog", tokens=3_000), context("catalog-index", tokens=500))
    budget = InputBudget(optimize_at=3_500)
    step0 = plan(request(system_tokens=1_000, contributors=(ladder,), input_budget=budget))
    assert kinds(step0) == {"catalog": "authored"}
    assert step0.epoch.floor("catalog") == 1
    # The next step has more room (the system content shrank), yet the floor holds.
    step1 = plan(
        request(request_id="req-2", contributors=(ladder,), input_budget=budget, epoch=step0.epoch)
    )
    assert kinds(step1) == {"catalog": "authored"}
    assert step1.epoch == step0.epoch
    rejected = [c for c in step1.inspection.candidates if c.rejection_reason == "epoch-floor"]
    assert [(c.contributor, c.representation) for c in rejected] == [("catalog", "full")]


def test_146_a_new_model_or_budget_starts_a_new_epoch() -> None:
    """146: changing model or explicit budget replans from canonical sources."""
    ladder = prefer(context("catalog", tokens=3_000), context("catalog-index", tokens=500))
    budget = InputBudget(optimize_at=3_500)
    step0 = plan(request(system_tokens=1_000, contributors=(ladder,), input_budget=budget))
    new_budget = plan(
        request(
            contributors=(ladder,), input_budget=InputBudget(optimize_at=3_600), epoch=step0.epoch
        )
    )
    assert kinds(new_budget) == {"catalog": "full"}
    assert new_budget.epoch.floors == ()
    other = EXACT.model_copy(update={"id": "test:other"})
    new_model = plan(
        request(model=other, contributors=(ladder,), input_budget=budget, epoch=step0.epoch)
    )
    assert kinds(new_model) == {"catalog": "full"}
    assert new_model.epoch.key != step0.epoch.key


def test_epoch_floor_beyond_available_rungs_is_unavailable() -> None:
    docs = droppable(summarizable(context("docs", tokens=100)))
    key = plan(request(contributors=(docs,))).epoch.key
    floors = EpochFloors(key=key, floors=(EpochFloor(contributor="docs", rung=1),))
    sealed = plan(request(contributors=(docs,), epoch=floors))
    assert kinds(sealed) == {"docs": "omitted"}


@pytest.mark.parametrize(
    "build",
    [
        lambda: summarizable(offloadable(context("x", tokens=1))),  # type: ignore[arg-type]
        lambda: droppable(droppable(context("x", tokens=1))),  # type: ignore[arg-type]
        lambda: prefer(context("x", tokens=1), droppable(context("y", tokens=1))),  # type: ignore[arg-type]
        lambda: prefer(context("x", tokens=1)),
        lambda: prefer(summarizable(context("x", tokens=1)), context("y", tokens=1)),  # type: ignore[arg-type]
        lambda: offloadable(droppable(context("x", tokens=1))),  # type: ignore[arg-type]
        lambda: summarizable(context("rules", tokens=1, contract=True)),
        lambda: summarizable(prefer(context("r", tokens=2, contract=True), context("s", tokens=1))),
        lambda: summarizable(),
        lambda: summarizable(context("a", tokens=1), context("a", tokens=2)),
    ],
)
def test_147_illegal_ladders_are_invalid_compositions(build: object) -> None:
    """147: illegal nesting fails `INVALID_COMPOSITION` at definition time."""
    with pytest.raises(RequestCompositionError) as raised:
        build()  # type: ignore[operator]
    assert raised.value.code == "INVALID_COMPOSITION"
    items = raised.value.diagnostics["items"]
    assert items[0]["code"] == "INVALID_REPRESENTATION_LADDER"  # type: ignore[index]


def test_full_ladder_runs_in_the_fixed_order() -> None:
    ladder = droppable(
        offloadable(
            summarizable(
                prefer(context("doc", tokens=4_000), context("doc-short", tokens=2_000)),
                summary_tokens=900,
                artifact_id="sum",
            ),
            reference_tokens=100,
            handle_id="h",
        )
    )
    expected = {5_000: "full", 3_000: "authored", 1_000: "summary", 500: "offload", 50: "omitted"}
    sealed = None
    for limit, kind in expected.items():
        sealed = plan(request(contributors=(ladder,), input_budget=InputBudget(max=limit)))
        assert kinds(sealed) == {"doc": kind}, limit
    assert sealed is not None
    record = sealed.inspection.contributions[0]
    assert record.representations == ("full", "authored", "summary", "offload", "omitted")


def test_offload_above_threshold_is_preferred_without_pressure() -> None:
    result = offloadable(
        context("tool-result", tokens=5_000), above_tokens=2_000, reference_tokens=80
    )
    sealed = plan(request(contributors=(result,)))
    assert kinds(sealed) == {"tool-result": "offload"}
    small = offloadable(
        context("tool-result", tokens=1_000), above_tokens=2_000, reference_tokens=80
    )
    assert kinds(plan(request(contributors=(small,)))) == {"tool-result": "full"}


def test_group_summary_is_one_atomic_unit() -> None:
    unit = summarizable(
        context("a", tokens=2_000), context("b", tokens=2_000), id="ab", summary_tokens=300
    )
    sealed = plan(request(contributors=(unit,), input_budget=InputBudget(max=1_000)))
    assert kinds(sealed) == {"ab": "summary"}
    assert sealed.inspection.contributions[0].sources == ("a", "b")


def test_floors_of_absent_contributors_carry_over_within_the_epoch() -> None:
    ladder = prefer(context("catalog", tokens=3_000), context("catalog-index", tokens=500))
    budget = InputBudget(optimize_at=3_500)
    step0 = plan(request(system_tokens=1_000, contributors=(ladder,), input_budget=budget))
    step1 = plan(request(request_id="r2", input_budget=budget, epoch=step0.epoch))
    assert step1.epoch.floor("catalog") == 1
    step2 = plan(
        request(request_id="r3", contributors=(ladder,), input_budget=budget, epoch=step1.epoch)
    )
    assert kinds(step2) == {"catalog": "authored"}
