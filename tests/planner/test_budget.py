"""Budget derivation and input budgets (behaviours 129-134)."""

from __future__ import annotations

import pytest

from planner import (
    ConfigurationError,
    InputBudget,
    ModelCatalog,
    derive_budget,
    merge_input_budgets,
    plan,
)
from tests.planner.helpers import EXACT, EXACT_MAX, request


def test_129_unknown_model_gets_the_conservative_profile() -> None:
    """129: unknown model -> 8192 - 2048 - 32 - ceil(0.10 * 8192) = 5292, conservative."""
    profile = ModelCatalog.default().resolve("acme:mystery-1")
    budget = derive_budget(profile)
    assert (profile.context_window, profile.default_output_reserve) == (8_192, 2_048)
    assert budget.safety_margin == 820
    assert budget.max == 5_292
    assert budget.measurement == "conservative"
    sealed = plan(request(model=profile))
    assert sealed.receipt.max_input_tokens == 5_292
    assert sealed.receipt.measurement == "conservative"


def test_129_safety_margin_follows_confidence() -> None:
    estimated = EXACT.model_copy(update={"confidence": "estimated"})
    assert derive_budget(EXACT).safety_margin == 0
    assert derive_budget(estimated).safety_margin == 500
    assert derive_budget(EXACT, measurement="conservative").safety_margin == 1_000


def test_130_output_reserve_replaces_the_profile_default() -> None:
    """130: the call's maximum output replaces the profile's reserve in the derivation."""
    assert derive_budget(EXACT).max == EXACT_MAX
    budget = derive_budget(EXACT, output_reserve=3_000)
    assert budget.output_reserve == 3_000
    assert budget.max == 10_000 - 3_000 - 32
    sealed = plan(request(output_reserve=3_000))
    assert sealed.max_output_tokens == 3_000
    assert sealed.receipt.max_input_tokens == 6_968


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "100"])
def test_130_invalid_output_reserve_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError):
        derive_budget(EXACT, output_reserve=bad)  # type: ignore[arg-type]


def test_131_max_is_clamped_to_capacity_and_used_below_it() -> None:
    """131: `max` above capacity is clamped; below it is used as-is."""
    assert derive_budget(EXACT, InputBudget(max=50_000)).max == EXACT_MAX
    assert derive_budget(EXACT, InputBudget(max=4_000)).max == 4_000


def test_132_optimize_at_defaults_to_max_and_is_clamped() -> None:
    """132: `optimize_at` defaults to the strict max and never exceeds it."""
    assert derive_budget(EXACT).optimize_at == EXACT_MAX
    assert derive_budget(EXACT, InputBudget(max=4_000)).optimize_at == 4_000
    assert derive_budget(EXACT, InputBudget(optimize_at=20_000)).optimize_at == EXACT_MAX
    assert derive_budget(EXACT, InputBudget(optimize_at=3_000)).optimize_at == 3_000
    assert derive_budget(EXACT, InputBudget(optimize_at=3_000)).reset_at == 2_700


@pytest.mark.parametrize(
    "fields",
    [
        {"optimize_at": 10, "max": 5},
        {"optimize_at": 0},
        {"max": 0},
        {"max": -1},
        {"optimize_at": -3},
        {"max": 10.5},
        {"optimize_at": True},
        {"max": "1000"},
    ],
)
def test_133_invalid_budgets_raise_type_error_before_planning(fields: dict[str, object]) -> None:
    """133: `optimize_at > max`, zero, negative or non-integer budgets raise `TypeError`."""
    with pytest.raises(TypeError) as raised:
        InputBudget(**fields)  # type: ignore[arg-type]
    assert isinstance(raised.value, ConfigurationError)
    assert isinstance(raised.value, ValueError)


def test_133_wire_validation_also_rejects_bad_budgets() -> None:
    with pytest.raises(ValueError):
        InputBudget.model_validate({"optimize_at": 10, "max": 5})
    with pytest.raises(ValueError):
        InputBudget.model_validate({"max": 0})


def test_134_invocation_max_overrides_only_max() -> None:
    """134: invocation `{max}` keeps the definition's `optimize_at`."""
    definition = InputBudget(optimize_at=2_000, max=5_000)
    merged = merge_input_budgets(definition, InputBudget(max=3_000))
    assert merged == InputBudget(optimize_at=2_000, max=3_000)
    assert definition == InputBudget(optimize_at=2_000, max=5_000)
    assert merge_input_budgets(None, InputBudget(max=3)) == InputBudget(max=3)
    assert merge_input_budgets(definition, None) is definition
    assert merge_input_budgets(None, None) is None


def test_134_merged_budget_is_validated() -> None:
    with pytest.raises(TypeError):
        merge_input_budgets(InputBudget(optimize_at=2_000), InputBudget(max=1_000))


def test_budget_is_per_call_and_frozen() -> None:
    budget = InputBudget(optimize_at=1, max=2)
    with pytest.raises(ValueError):
        budget.max = 5
