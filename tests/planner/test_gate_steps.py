"""The decision after the acceptance gate judged a final reply (`planner.steps.Checked`)."""

from __future__ import annotations

import pytest

from planner.steps import Checked, Commit, Fail, RetryRejected, next_action
from vocabulary.gate_errors import ConstraintError, SafetyError

CASES: dict[str, tuple[Checked, object]] = {
    "nothing configured commits": (Checked(), Commit()),
    "allowed and satisfied commits": (Checked(safety="allow"), Commit()),
    "a safety retry while retries remain": (
        Checked(safety="retry", policy="tone", safety_retries=1, max_safety_retries=2),
        RetryRejected("safety-retry", 2),
    ),
    "a violation while retries remain": (
        Checked(violations=("0:length.too_long",), max_constraint_retries=1),
        RetryRejected("constraint-retry", 1),
    ),
    "safety allowed but a constraint violated": (
        Checked(safety="allow", violations=("1:required.missing",), max_constraint_retries=3),
        RetryRejected("constraint-retry", 1),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_gate_decides(case: str) -> None:
    state, expected = CASES[case]
    assert next_action(state) == expected


def test_a_safety_block_fails_at_once_whatever_retries_remain() -> None:
    action = next_action(
        Checked(
            safety="block",
            policy="pii",
            reason_code="pii.card",
            max_safety_retries=5,
            request_id="r1",
        )
    )
    assert isinstance(action, Fail) and isinstance(action.error, SafetyError)
    assert (action.error.policy, action.error.reason_code, action.error.stage) == (
        "pii",
        "pii.card",
        "output",
    )
    assert (action.error.attempts, action.request_id) == (1, "r1")


def test_exhausted_safety_retries_fail_typed() -> None:
    action = next_action(
        Checked(
            safety="retry",
            policy="tone",
            reason_code="tone.rude",
            safety_retries=2,
            max_safety_retries=2,
        )
    )
    assert isinstance(action, Fail) and isinstance(action.error, SafetyError)
    assert action.error.attempts == 3


def test_exhausted_constraint_retries_fail_with_the_violations() -> None:
    action = next_action(
        Checked(
            violations=("0:length.too_long", "2:forbidden.present"),
            constraint_retries=1,
            max_constraint_retries=1,
            request_id="r4",
        )
    )
    assert isinstance(action, Fail) and isinstance(action.error, ConstraintError)
    assert action.error.violations == ("0:length.too_long", "2:forbidden.present")
    assert (action.error.attempts, action.error.request_id) == (2, "r4")


def test_safety_is_judged_before_the_constraints() -> None:
    # A refused reply is not measured against the constraints: safety's retry wins.
    action = next_action(
        Checked(safety="retry", violations=("0:length.too_long",), max_safety_retries=1)
    )
    assert action == RetryRejected("safety-retry", 1)


def test_retries_of_one_kind_do_not_spend_the_other_kind() -> None:
    state = Checked(
        violations=("0:pattern.no_match",),
        safety_retries=2,
        max_safety_retries=2,
        constraint_retries=0,
        max_constraint_retries=1,
    )
    assert next_action(state) == RetryRejected("constraint-retry", 1)
