"""The generation's decision table (`planner.steps.next_action`), row by row."""

from __future__ import annotations

import pytest

from planner import HistorySummary, InputBudget, ManagedHistory, PlanRequest
from planner.steps import (
    MAX_REVISION_REPLANS,
    OVERFLOW_RECOVERY_FACTOR,
    Commit,
    CountAuthoritatively,
    Dispatched,
    Fail,
    Planning,
    PrepareSummary,
    RecoverOverflow,
    Replan,
    RetryValidation,
    RunTools,
    Seal,
    next_action,
)
from tests.planner.helpers import EXACT, request, turns
from vocabulary.errors import (
    ConfigurationError,
    OutputValidationError,
    RequestCompositionError,
    ThreadError,
)

ESTIMATED = EXACT.model_copy(update={"confidence": "conservative"})


def _managed(**fields: object) -> PlanRequest:
    policy = ManagedHistory(recent_messages=4, **fields)  # type: ignore[arg-type]
    return request(history=turns(10), history_policy=policy, input_budget=InputBudget(max=100))


def _too_large_without_choices() -> PlanRequest:
    """Nothing elastic; the estimate exceeds max by its margin only (max 7,968 here)."""
    return request(model=ESTIMATED, system_tokens=8_000)


# -- before dispatch -----------------------------------------------------------------------


def test_a_fitting_request_is_sealed() -> None:
    action = next_action(Planning(request=request(history=turns(2)), summarisable=True))
    assert isinstance(action, Seal)
    assert action.plan.message_ids == ("u0", "a0", "u1", "a1")
    assert action.maintenance == ()


def test_a_sealed_plan_carries_the_refreshes_to_start_after_the_commit() -> None:
    summary = HistorySummary(artifact_id="hs-1", tokens=30, covers=4)
    near = request(
        history=turns(10),
        history_policy=ManagedHistory(recent_messages=4, summary=summary),
        input_budget=InputBudget(optimize_at=60, max=1_000),
    )
    action = next_action(Planning(request=near, summarisable=True))
    assert isinstance(action, Seal)
    assert [need.when for need in action.maintenance] == ["after-response"]


def test_a_missing_summary_is_prepared_inline_over_a_summarisable_source() -> None:
    action = next_action(Planning(request=_managed(), summarisable=True))
    assert isinstance(action, PrepareSummary)
    assert (action.need.when, action.need.through_id) == ("inline", "a7")


def test_a_summary_is_prepared_at_most_once_per_step() -> None:
    action = next_action(Planning(request=_managed(), summarisable=True, summary_prepared=True))
    assert isinstance(action, Fail)
    assert isinstance(action.error, RequestCompositionError)
    assert action.error.code == "REPRESENTATION_UNAVAILABLE"
    assert action.refresh is None


def test_without_a_summarisable_source_a_missing_summary_fails_without_preparing() -> None:
    action = next_action(Planning(request=_managed(), summarisable=False))
    assert isinstance(action, Fail)
    assert action.refresh is None
    assert action.request_id == "req-1"


def test_on_miss_fail_fails_and_starts_the_refresh_a_later_turn_needs() -> None:
    action = next_action(Planning(request=_managed(on_miss="fail"), summarisable=True))
    assert isinstance(action, Fail)
    assert isinstance(action.error, RequestCompositionError)
    assert action.refresh is not None
    assert (action.refresh.when, action.refresh.through_id) == ("after-response", "a7")


def test_only_the_margin_in_the_way_asks_for_an_authoritative_count() -> None:
    big = request(model=ESTIMATED, history=turns(1), system_tokens=8_000)
    action = next_action(Planning(request=big, summarisable=True, countable=True))
    assert action == CountAuthoritatively(message_ranges=((0, 2),))


@pytest.mark.parametrize(
    "state",
    [
        Planning(request=_too_large_without_choices(), summarisable=True, countable=False),
        Planning(
            request=_too_large_without_choices(), summarisable=True, countable=True, counted=True
        ),
    ],
    ids=["not-countable", "already-counted"],
)
def test_no_count_when_it_cannot_be_made_or_was_made(state: Planning) -> None:
    action = next_action(state)
    assert isinstance(action, Fail)
    assert isinstance(action.error, RequestCompositionError)
    assert action.error.code == "REQUEST_TOO_LARGE"


def test_an_exact_count_that_fits_seals_the_plan() -> None:
    counted = _too_large_without_choices().model_copy(update={"counted_input_tokens": 8_500})
    action = next_action(Planning(request=counted, summarisable=True, countable=True, counted=True))
    assert isinstance(action, Seal)
    assert action.plan.input_tokens == 8_500


def test_no_count_when_a_policy_could_choose() -> None:
    # Managed history has rungs to choose from: a count could not settle it.
    action = next_action(
        Planning(request=_managed(on_miss="fail"), summarisable=True, countable=True)
    )
    assert isinstance(action, Fail)


def test_invalid_configuration_raises_instead_of_deciding() -> None:
    invalid = request().model_copy(update={"counted_input_tokens": -1})
    with pytest.raises(ConfigurationError):
        next_action(Planning(request=invalid, summarisable=False, countable=True))


# -- after dispatch ------------------------------------------------------------------------


def test_an_answer_without_tool_calls_commits() -> None:
    assert next_action(Dispatched(outcome="answered", input_tokens=100)) == Commit()


def test_tool_calls_run_while_rounds_remain() -> None:
    state = Dispatched(outcome="answered", input_tokens=100, tool_calls=2, max_tool_rounds=3)
    assert next_action(state) == RunTools(calls=2)


def test_tool_calls_past_the_last_round_commit() -> None:
    state = Dispatched(
        outcome="answered", input_tokens=100, tool_calls=1, tool_rounds=3, max_tool_rounds=3
    )
    assert next_action(state) == Commit()


def test_the_first_overflow_recovers_under_a_stricter_ceiling() -> None:
    action = next_action(Dispatched(outcome="overflow", input_tokens=1_000))
    assert action == RecoverOverflow(ceiling=int(1_000 * OVERFLOW_RECOVERY_FACTOR))
    assert action == RecoverOverflow(ceiling=850)


def test_a_second_overflow_lets_the_providers_failure_stand() -> None:
    action = next_action(Dispatched(outcome="overflow", input_tokens=850, ceiling=850))
    assert action == Fail(None)


def test_a_moved_revision_replans() -> None:
    action = next_action(Dispatched(outcome="revision-moved", input_tokens=100, replans=1))
    assert action == Replan(reason="revision-moved")


def test_a_moved_revision_fails_when_the_caller_asked_for_strictness() -> None:
    action = next_action(
        Dispatched(outcome="revision-moved", input_tokens=100, replans=1, on_revision_moved="fail")
    )
    assert isinstance(action, Fail)
    assert isinstance(action.error, ThreadError)
    assert action.error.code == "identity_conflict"
    assert "sealed" in str(action.error)


def test_replanning_is_bounded() -> None:
    last = Dispatched(outcome="revision-moved", input_tokens=1, replans=MAX_REVISION_REPLANS)
    assert next_action(last) == Replan(reason="revision-moved")
    beyond = Dispatched(outcome="revision-moved", input_tokens=1, replans=MAX_REVISION_REPLANS + 1)
    action = next_action(beyond)
    assert isinstance(action, Fail)
    assert isinstance(action.error, ThreadError)
    assert action.error.code == "identity_conflict"


def test_the_same_state_always_decides_the_same_way() -> None:
    state = Planning(request=request(history=turns(3)), summarisable=True)
    first, second = next_action(state), next_action(state)
    assert isinstance(first, Seal) and isinstance(second, Seal)
    assert first.plan.model_dump_json() == second.plan.model_dump_json()


def test_a_reply_failing_validation_is_retried_while_retries_remain() -> None:
    state = Dispatched(
        outcome="invalid-output",
        input_tokens=100,
        rejections=2,
        max_validation_retries=2,
        defects=("$.high: type",),
        request_id="r2",
    )
    assert next_action(state) == RetryValidation(2)


def test_exhausted_validation_retries_fail_typed_with_the_defects() -> None:
    state = Dispatched(
        outcome="invalid-output",
        input_tokens=100,
        rejections=3,
        max_validation_retries=2,
        defects=("$: required", "$.high: type"),
        request_id="r3",
    )
    action = next_action(state)
    assert isinstance(action, Fail)
    assert isinstance(action.error, OutputValidationError)
    assert action.error.defects == ("$: required", "$.high: type")
    assert (action.error.attempts, action.request_id) == (3, "r3")


def test_without_retries_the_first_rejection_fails() -> None:
    state = Dispatched(outcome="invalid-output", input_tokens=100, rejections=1)
    assert isinstance(next_action(state), Fail)
