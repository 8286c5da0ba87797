"""Input budgets and the derivation of the limits one provider call must respect.

`InputBudget` is the caller's pressure setting: `optimize_at` (soft: prefer an authorised
smaller candidate above it) and `max` (strict: reject above it). It never authorises loss by
itself; only representation ladders do. Both apply to every provider call separately, tool
rounds included, and are never cumulative across a run.
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from planner._base import Confidence, FrozenModel
from planner.profiles import ModelProfile
from vocabulary.errors import ConfigurationError

PROVIDER_OVERHEAD_TOKENS = 32
"""Fixed allowance for provider-side framing that no per-message constant captures."""

SAFETY_MARGIN_PERCENT: dict[Confidence, int] = {"exact": 0, "estimated": 5, "conservative": 10}
"""Safety margin, in percent of the context window, for each counting confidence."""

RESET_PERCENT = 90
"""The hysteresis watermark sits at this percentage of `optimize_at`."""


def _check_positive(name: str, value: object) -> None:
    # `bool` is an `int` subclass; `True` is not a budget.
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be a positive integer")
    if value <= 0:
        raise ConfigurationError(f"{name} must be a positive integer")


class InputBudget(FrozenModel):
    """Per-call input pressure: a soft target and a strict maximum, in tokens.

    Attributes:
        optimize_at: Soft watermark. When some authorised candidate fits at or below it, the
            best such candidate wins. Defaults to the strict maximum.
        max: Strict maximum, clamped to the model's capacity.

    Raises:
        ConfigurationError: For a zero, negative or non-integer value, or `optimize_at > max`.
    """

    optimize_at: int | None = None
    max: int | None = None

    def __init__(
        self, *, optimize_at: int | None = None, max: int | None = None, **extra: Any
    ) -> None:
        # Checked before pydantic so that Python callers get `ConfigurationError` (a
        # `TypeError`), as the public contract says, rather than a `ValidationError`.
        _check_positive("optimize_at", optimize_at)
        _check_positive("max", max)
        if optimize_at is not None and max is not None and optimize_at > max:
            raise ConfigurationError("optimize_at must not exceed max")
        # pydantic also validates wire data through this constructor; anything else it was
        # given is passed on so it can reject unknown fields the usual way.
        super().__init__(**{"optimize_at": optimize_at, "max": max, **extra})

    @model_validator(mode="after")
    def _ordered(self) -> InputBudget:
        if self.optimize_at is not None and self.optimize_at <= 0:
            raise ValueError("optimize_at must be a positive integer")
        if self.max is not None and self.max <= 0:
            raise ValueError("max must be a positive integer")
        if self.optimize_at is not None and self.max is not None and self.optimize_at > self.max:
            raise ValueError("optimize_at must not exceed max")
        return self

    def explicit_key(self) -> str:
        """Return a canonical string of the explicitly set fields (part of the epoch key)."""
        return f"optimize_at={self.optimize_at},max={self.max}"


def merge_input_budgets(
    definition: InputBudget | None, invocation: InputBudget | None
) -> InputBudget | None:
    """Merge a definition's budget with an invocation's, field by field.

    An invocation field that is set wins; an unset one keeps the definition's value. Neither
    input is changed; the result is validated again (the combination must still be ordered).

    Args:
        definition: Budget declared on the agent or prompt.
        invocation: Budget given at the call site.

    Returns:
        The merged budget, or `None` when neither side sets one.

    Raises:
        ConfigurationError: If the merged `optimize_at` exceeds the merged `max`.
    """
    if definition is None:
        return invocation
    if invocation is None:
        return definition
    return InputBudget(
        optimize_at=(
            invocation.optimize_at if invocation.optimize_at is not None else definition.optimize_at
        ),
        max=invocation.max if invocation.max is not None else definition.max,
    )


class DerivedBudget(FrozenModel):
    """The limits of one provider call, derived from profile, budget and output reserve.

    Attributes:
        context_window: The model's window.
        output_reserve: Output tokens reserved (the call's maximum output).
        provider_overhead: `PROVIDER_OVERHEAD_TOKENS`.
        measurement: Counting confidence used for the margin.
        safety_margin: Tokens held back for counting error.
        capacity_max: `max(0, window - reserve - overhead - margin)`.
        max: Strict input maximum (`InputBudget.max` clamped to `capacity_max`).
        optimize_at: Soft watermark (defaults to `max`, clamped to it).
        reset_at: Hysteresis watermark, 90 % of `optimize_at`.
    """

    context_window: int
    output_reserve: int
    provider_overhead: int
    measurement: Confidence
    safety_margin: int
    capacity_max: int
    max: int
    optimize_at: int
    reset_at: int


def safety_margin(context_window: int, measurement: Confidence) -> int:
    """Return the safety margin for a window at a counting confidence (ceiling of a percent)."""
    return -(-context_window * SAFETY_MARGIN_PERCENT[measurement] // 100)


def derive_budget(
    profile: ModelProfile,
    input_budget: InputBudget | None = None,
    *,
    output_reserve: int | None = None,
    measurement: Confidence | None = None,
) -> DerivedBudget:
    """Derive the strict and soft input limits of one provider call.

    Args:
        profile: The resolved model profile.
        input_budget: The merged input budget, if any.
        output_reserve: The call's maximum output tokens; the profile default when `None`.
        measurement: Counting confidence; the profile's when `None` (pass `exact` when the
            counts come from an authoritative counter).

    Returns:
        The derived limits.

    Raises:
        ConfigurationError: If `output_reserve` is not a positive integer.
    """
    _check_positive("output_reserve", output_reserve)
    reserve = profile.default_output_reserve if output_reserve is None else output_reserve
    confidence: Confidence = profile.confidence if measurement is None else measurement
    margin = safety_margin(profile.context_window, confidence)
    capacity = max(0, profile.context_window - reserve - PROVIDER_OVERHEAD_TOKENS - margin)
    requested_max = input_budget.max if input_budget and input_budget.max is not None else None
    strict = capacity if requested_max is None else min(requested_max, capacity)
    requested_opt = input_budget.optimize_at if input_budget else None
    optimize_at = strict if requested_opt is None else min(requested_opt, strict)
    return DerivedBudget(
        context_window=profile.context_window,
        output_reserve=reserve,
        provider_overhead=PROVIDER_OVERHEAD_TOKENS,
        measurement=confidence,
        safety_margin=margin,
        capacity_max=capacity,
        max=strict,
        optimize_at=optimize_at,
        reset_at=optimize_at * RESET_PERCENT // 100,
    )
