"""The guard on caller-written regular expressions."""

from __future__ import annotations

import pytest

from activities.gate import check_pattern
from vocabulary.errors import ConfigurationError

REFUSED = {
    "nested_plus": r"(a+)+b",
    "nested_star": r"(a*)*b",
    "words_and_optional_spaces": r"^(\w+\s?)*$",
    "lazy_inside_greedy": r"(?:x+?y)*z",
    "inside_a_lookahead": r"(?=(a+)+)b",
    "inside_an_alternative": r"(?:c|(a+)+)d",
    "huge_bound_counts_as_unbounded": r"(a+){1,100000}",
}


@pytest.mark.parametrize("pattern", REFUSED.values(), ids=REFUSED.keys())
def test_nested_unbounded_quantifiers_are_refused(pattern: str) -> None:
    with pytest.raises(ConfigurationError, match="exponential") as caught:
        check_pattern(pattern)
    assert pattern not in str(caught.value)


ACCEPTED = {
    "possessive_inner": r"(a++)+b",
    "possessive_outer": r"(a+)++b",
    "atomic_group": r"(?>a+)+b",
    "bounded_outer": r"(\d+\.){3}\d+",
    "optional_group": r"(a+)?b",
    "plain": r"order #\d+",
    "alternation": r"(?:cat|dog)s?",
}


@pytest.mark.parametrize("pattern", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_safe_shapes_are_accepted(pattern: str) -> None:
    check_pattern(pattern)


def test_backreferences_are_refused_only_where_asked() -> None:
    check_pattern(r"(a)\1")
    with pytest.raises(ConfigurationError, match="backreferences"):
        check_pattern(r"(a)\1", backreferences=False)
    with pytest.raises(ConfigurationError, match="backreferences"):
        check_pattern(r"(?P<x>a)(?P=x)", backreferences=False)


def test_invalid_patterns_are_refused_without_quoting_them() -> None:
    with pytest.raises(ConfigurationError, match="not a valid") as caught:
        check_pattern("(secret")
    assert "secret" not in str(caught.value)
