"""Constraints: every one evaluated, violations content-free and in list order."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from activities.gate import MAX_REGEX_TEXT_CHARS, Constraints, check_constraints
from contracts.gate import (
    MAX_CONSTRAINTS,
    ConstraintReport,
    ConstraintSpec,
    ForbiddenConstraint,
    LengthConstraint,
    PatternConstraint,
    RequiredConstraint,
)
from vocabulary.errors import ConfigurationError


def codes(report: ConstraintReport) -> list[tuple[int, str]]:
    return [(v.index, v.code) for v in report.violations]


def test_a_text_satisfying_every_constraint_has_no_violations() -> None:
    specs: list[ConstraintSpec] = [
        LengthConstraint(minimum=5, maximum=50),
        PatternConstraint(pattern=r"order #\d+"),
        PatternConstraint(pattern=r"[A-Z].*\.", full_match=True),
        RequiredConstraint(substrings=("order",)),
        ForbiddenConstraint(substrings=("refund",)),
    ]
    report = check_constraints("Your order #12 has shipped.", specs)
    assert report.satisfied and report.checked == 5


def test_every_constraint_is_evaluated_and_reported_with_figures_only() -> None:
    specs: list[ConstraintSpec] = [
        LengthConstraint(minimum=100),
        LengthConstraint(maximum=4),
        PatternConstraint(pattern=r"\d{3}"),
        PatternConstraint(pattern=r"order", full_match=True),
        RequiredConstraint(substrings=("order", "ticket", "Refund"), ignore_case=True),
        ForbiddenConstraint(substrings=("refund", "sorry", "absent")),
    ]
    report = check_constraints("Sorry, refund for the order; refund soon.", specs)
    assert codes(report) == [
        (0, "length.too_short"),
        (1, "length.too_long"),
        (2, "pattern.no_match"),
        (3, "pattern.no_match"),
        (4, "required.missing"),
        (5, "forbidden.present"),
    ]
    short, long, _, _, required, forbidden = report.violations
    assert short.counts == {"chars": 41, "minimum": 100}
    assert long.counts == {"chars": 41, "maximum": 4}
    assert (required.entries, required.counts) == ((1,), {"missing": 1, "required": 3})
    assert (forbidden.entries, forbidden.counts) == ((0,), {"present": 1, "occurrences": 2})


def test_case_options_of_substrings_and_patterns() -> None:
    assert check_constraints("Hello", [ForbiddenConstraint(substrings=("hello",))]).satisfied
    assert not check_constraints(
        "Hello", [ForbiddenConstraint(substrings=("hello",), ignore_case=True)]
    ).satisfied
    assert not check_constraints("HELLO", [PatternConstraint(pattern="hello")]).satisfied
    assert check_constraints(
        "HELLO", [PatternConstraint(pattern="hello", ignore_case=True)]
    ).satisfied


def test_token_lengths_use_the_given_counter_once() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return 7

    specs: list[ConstraintSpec] = [
        LengthConstraint(unit="tokens", maximum=5),
        LengthConstraint(unit="tokens", minimum=1),
    ]
    report = check_constraints("text", specs, count_tokens=count)
    assert codes(report) == [(0, "length.too_long")]
    assert report.violations[0].counts == {"tokens": 7, "maximum": 5}
    assert len(calls) == 1
    with pytest.raises(ConfigurationError, match="counter"):
        check_constraints("text", specs)


def test_patterns_refuse_texts_beyond_the_cap_instead_of_checking_part() -> None:
    report = check_constraints("a" * (MAX_REGEX_TEXT_CHARS + 1), [PatternConstraint(pattern="a")])
    assert codes(report) == [(0, "pattern.text_too_long")]


def test_constraint_specs_refuse_nonsense() -> None:
    with pytest.raises(ValidationError):
        LengthConstraint()
    with pytest.raises(ValidationError):
        LengthConstraint(minimum=5, maximum=4)
    with pytest.raises(ValidationError):
        PatternConstraint(pattern="(")
    with pytest.raises(ValidationError):
        RequiredConstraint(substrings=())
    with pytest.raises(ValidationError):
        ForbiddenConstraint(substrings=("",))
    with pytest.raises(ConfigurationError, match="exponential"):
        Constraints([PatternConstraint(pattern=r"^(\w+\s?)*$")])
    with pytest.raises(ConfigurationError, match="at most"):
        Constraints([LengthConstraint(maximum=1)] * (MAX_CONSTRAINTS + 1))


def test_constraint_specs_round_trip_through_json() -> None:
    specs: list[ConstraintSpec] = [
        LengthConstraint(unit="tokens", maximum=9),
        PatternConstraint(pattern="x", full_match=True),
        RequiredConstraint(substrings=("a",)),
        ForbiddenConstraint(substrings=("b",), ignore_case=True),
    ]
    adapter = TypeAdapter(list[ConstraintSpec])
    assert adapter.validate_json(adapter.dump_json(specs)) == specs
