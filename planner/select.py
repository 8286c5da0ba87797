"""Candidate selection: lexicographic fidelity under the two-tier rule.

A candidate picks one legal rung per elastic contributor. Contributors are ordered by
priority (descending) then declaration order (ascending); a candidate's fidelity vector
lists the chosen rung index of each in that order, and a smaller vector (compared
lexicographically) has higher fidelity.

Two tiers: the best candidate whose size is at most `optimize_at` wins; only when none
exists does the best candidate at most `max` win. Nothing in either tier fails planning.

The search is a depth-first branch and bound. Contributors are decided in fidelity order and
rungs tried from highest fidelity; a branch is pruned when a lower bound (tokens fixed so far
plus, for each undecided contributor, its smallest legal rung) exceeds the limit. Request
size is additive over contributors, so that bound is exact: a branch that passes it always
completes. The first complete vector is therefore the lexicographically best fitting one,
found without ever backtracking, in time linear in the total number of rungs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Option = tuple[int, int]
"""A legal rung: (rung index in its ladder, tokens)."""


@dataclass(frozen=True, slots=True)
class Selection:
    """The outcome of one tier (internal): chosen rung index per contributor and total size."""

    rungs: tuple[int, ...]
    tokens: int


def lower_bounds(options: Sequence[Sequence[Option]]) -> list[int]:
    """Return, for each position, the smallest total size of all contributors from there on.

    Args:
        options: Legal rungs of every contributor, in fidelity order; each non-empty.

    Returns:
        A list one longer than `options`, ending with 0.
    """
    bounds = [0] * (len(options) + 1)
    for position in range(len(options) - 1, -1, -1):
        bounds[position] = bounds[position + 1] + min(size for _, size in options[position])
    return bounds


def best_within(
    options: Sequence[Sequence[Option]], fixed_tokens: int, limit: int
) -> Selection | None:
    """Return the highest-fidelity candidate whose size is at most `limit`, if any.

    Args:
        options: Legal rungs of every contributor, in fidelity order, each list ordered from
            highest fidelity; every list is non-empty.
        fixed_tokens: Tokens of everything that is not elastic.
        limit: Inclusive size limit.

    Returns:
        The selection, or `None` when even the smallest candidate exceeds `limit`.
    """
    bounds = lower_bounds(options)
    if fixed_tokens + bounds[0] > limit:
        return None
    chosen: list[int] = []
    used = fixed_tokens
    for position, rungs in enumerate(options):
        rest = bounds[position + 1]
        for index, size in rungs:
            if used + size + rest <= limit:
                chosen.append(index)
                used += size
                break
        else:  # pragma: no cover - unreachable: the smallest rung always passes the bound
            return None
    return Selection(rungs=tuple(chosen), tokens=used)


def select_two_tier(
    options: Sequence[Sequence[Option]], fixed_tokens: int, optimize_at: int, strict_max: int
) -> tuple[Selection, str] | None:
    """Apply the two-tier rule.

    Returns:
        `(selection, "optimize_at")` when a candidate fits the soft watermark,
        `(selection, "max")` when one fits only the strict max, else `None`.
    """
    soft = best_within(options, fixed_tokens, optimize_at)
    if soft is not None:
        return soft, "optimize_at"
    strict = best_within(options, fixed_tokens, strict_max)
    if strict is not None:
        return strict, "max"
    return None
