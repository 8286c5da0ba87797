"""Constraints: declarative checks on accepted text, all evaluated, violations listed."""

from __future__ import annotations

import re
from collections.abc import Iterable

from activities.gate._patterns import MAX_REGEX_TEXT_CHARS, check_pattern, compile_pattern
from activities.gate._verdicts import TokenCount
from contracts.gate import (
    MAX_CONSTRAINTS,
    ConstraintReport,
    ConstraintSpec,
    ConstraintViolation,
    ForbiddenConstraint,
    LengthConstraint,
    PatternConstraint,
    RequiredConstraint,
)
from vocabulary.errors import ConfigurationError


class Constraints:
    """Constraints built from their specs (patterns compiled and checked once).

    Args:
        specs: The constraints; a violation names its position in this list.

    Raises:
        ConfigurationError: More than `MAX_CONSTRAINTS`, or a pattern with a refused
            shape (see `_patterns`).
    """

    def __init__(self, specs: Iterable[ConstraintSpec]) -> None:
        self.specs = tuple(specs)
        if len(self.specs) > MAX_CONSTRAINTS:
            raise ConfigurationError(f"at most {MAX_CONSTRAINTS} constraints are checked")
        self._patterns: dict[int, re.Pattern[str]] = {}
        for index, spec in enumerate(self.specs):
            if isinstance(spec, PatternConstraint):
                check_pattern(spec.pattern)
                flags = re.IGNORECASE if spec.ignore_case else 0
                self._patterns[index] = compile_pattern(spec.pattern, flags)

    def check(self, text: str, *, count_tokens: TokenCount | None = None) -> ConstraintReport:
        """Evaluate every constraint on `text`.

        Args:
            text: The accepted text.
            count_tokens: The model's token counter, needed by token-length constraints.

        Raises:
            ConfigurationError: A token-length constraint and no `count_tokens`.
        """
        violations: list[ConstraintViolation] = []
        tokens: int | None = None
        for index, spec in enumerate(self.specs):
            if isinstance(spec, LengthConstraint):
                if spec.unit == "tokens" and tokens is None:
                    if count_tokens is None:
                        raise ConfigurationError("a token-length constraint needs a counter")
                    tokens = count_tokens(text)
                size = tokens if spec.unit == "tokens" and tokens is not None else len(text)
                violation = _length(index, spec, size)
            elif isinstance(spec, PatternConstraint):
                violation = _pattern(index, spec, self._patterns[index], text)
            else:
                violation = _substrings(index, spec, text)
            if violation is not None:
                violations.append(violation)
        return ConstraintReport(checked=len(self.specs), violations=tuple(violations))


def _length(index: int, spec: LengthConstraint, size: int) -> ConstraintViolation | None:
    counts = {spec.unit: size}
    if spec.minimum is not None and size < spec.minimum:
        counts["minimum"] = spec.minimum
        return ConstraintViolation(
            index=index, kind="length", code="length.too_short", counts=counts
        )
    if spec.maximum is not None and size > spec.maximum:
        counts["maximum"] = spec.maximum
        return ConstraintViolation(
            index=index, kind="length", code="length.too_long", counts=counts
        )
    return None


def _pattern(
    index: int, spec: PatternConstraint, pattern: re.Pattern[str], text: str
) -> ConstraintViolation | None:
    if len(text) > MAX_REGEX_TEXT_CHARS:
        counts = {"chars": len(text), "max_chars": MAX_REGEX_TEXT_CHARS}
        return ConstraintViolation(
            index=index, kind="pattern", code="pattern.text_too_long", counts=counts
        )
    matched = pattern.fullmatch(text) if spec.full_match else pattern.search(text)
    if matched is None:
        return ConstraintViolation(index=index, kind="pattern", code="pattern.no_match")
    return None


def _substrings(
    index: int, spec: RequiredConstraint | ForbiddenConstraint, text: str
) -> ConstraintViolation | None:
    haystack = text.casefold() if spec.ignore_case else text
    needles = [s.casefold() if spec.ignore_case else s for s in spec.substrings]
    present = tuple(i for i, needle in enumerate(needles) if needle in haystack)
    if isinstance(spec, RequiredConstraint):
        missing = tuple(sorted(set(range(len(needles))) - set(present)))
        if not missing:
            return None
        counts = {"missing": len(missing), "required": len(needles)}
        return ConstraintViolation(
            index=index, kind="required", code="required.missing", counts=counts, entries=missing
        )
    if not present:
        return None
    counts = {
        "present": len(present),
        "occurrences": sum(haystack.count(needles[i]) for i in present),
    }
    return ConstraintViolation(
        index=index, kind="forbidden", code="forbidden.present", counts=counts, entries=present
    )


def check_constraints(
    text: str, specs: Iterable[ConstraintSpec], *, count_tokens: TokenCount | None = None
) -> ConstraintReport:
    """Build `Constraints` and check `text` once (see `Constraints.check`)."""
    return Constraints(specs).check(text, count_tokens=count_tokens)
