"""Rows of the decision table for answers validated against an output schema."""

from __future__ import annotations

import pytest

from planner.steps import Commit, Dispatched, Fail, RetryValidation, RunTools, next_action
from vocabulary.errors import OutputValidationError

FAILURES = (("$.price", "type"), ("$", "required"))


def _rejected(rejected: int, max_retries: int = 2) -> Dispatched:
    return Dispatched(
        outcome="answered",
        input_tokens=100,
        validation="failed",
        validation_failures=FAILURES,
        rejected=rejected,
        max_output_retries=max_retries,
    )


def test_a_passing_answer_commits() -> None:
    state = Dispatched(outcome="answered", input_tokens=100, validation="passed", rejected=2)
    assert next_action(state) == Commit()


@pytest.mark.parametrize("rejected", [1, 2])
def test_a_rejected_answer_is_retried_while_retries_remain(rejected: int) -> None:
    assert next_action(_rejected(rejected)) == RetryValidation(FAILURES, rejected)


def test_exhausted_retries_fail_typed_with_paths_only() -> None:
    action = next_action(_rejected(3))
    assert isinstance(action, Fail)
    error = action.error
    assert isinstance(error, OutputValidationError)
    assert error.failures == FAILURES
    assert error.attempts == 3
    assert "$.price (type)" in str(error)


def test_no_retries_fails_on_the_first_rejection() -> None:
    action = next_action(_rejected(1, max_retries=0))
    assert isinstance(action, Fail) and isinstance(action.error, OutputValidationError)


def test_tool_rounds_run_before_the_answer_is_judged() -> None:
    state = Dispatched(
        outcome="answered",
        input_tokens=100,
        tool_calls=1,
        max_tool_rounds=2,
        validation="failed",
        validation_failures=FAILURES,
        rejected=1,
        max_output_retries=2,
    )
    assert next_action(state) == RunTools(1)


def test_without_a_schema_nothing_changes() -> None:
    assert next_action(Dispatched(outcome="answered", input_tokens=100)) == Commit()
