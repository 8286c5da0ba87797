"""Translate the generation's wire input and read skeleton into a planner request.

Pure functions over pure data: safe inside the workflow sandbox and deterministic.
"""

from __future__ import annotations

from activities.contracts import ReadRequestResult
from crux.models import GenerationInput, HistorySpec, InputBudgetSpec
from planner import (
    ExactHistory,
    InputBudget,
    ModelCatalog,
    ModelProfile,
    PlanRequest,
    RecentHistory,
    derive_budget,
)

_CATALOG = ModelCatalog.default()

# Lowest first: a fallback tokenizer can only lower the profile's counting confidence.
_CONFIDENCE_RANK = ("conservative", "estimated", "exact")


def resolve_profile(model_id: str) -> ModelProfile:
    """The capacity profile of a `provider:model` id (conservative when unknown)."""
    return _CATALOG.resolve(model_id)


def input_budget(spec: InputBudgetSpec | None) -> InputBudget | None:
    """The planner's budget for a wire budget."""
    if spec is None:
        return None
    return InputBudget(optimize_at=spec.optimize_at, max=spec.max)


def history_policy(spec: HistorySpec) -> ExactHistory | RecentHistory:
    """The planner's history policy for a wire policy."""
    if spec.kind == "recent":
        return RecentHistory(messages=spec.messages, tokens=spec.tokens)
    return ExactHistory()


def max_input_tokens(profile: ModelProfile, request: GenerationInput) -> int:
    """The strict input ceiling, which bounds how much history the read returns."""
    budget = derive_budget(
        profile, input_budget(request.input_budget), output_reserve=request.max_output_tokens
    )
    return budget.max


def build_plan_request(
    *,
    request_id: str,
    request: GenerationInput,
    read: ReadRequestResult,
    profile: ModelProfile,
    ceiling: int | None,
    previous_request_id: str | None,
) -> PlanRequest:
    """Assemble the planner input for one provider step.

    Args:
        request_id: Id of this request (from `workflow.uuid4()`).
        request: The generation input.
        read: The content-free skeleton from the read stage.
        profile: The model profile.
        ceiling: A stricter `max` after a provider's overflow rejection.
        previous_request_id: The request this one recovers from, if any.
    """
    budget = input_budget(request.input_budget)
    if ceiling is not None:
        strict = ceiling if budget is None or budget.max is None else min(ceiling, budget.max)
        optimize = None if budget is None else budget.optimize_at
        if optimize is not None:
            optimize = min(optimize, strict)
        budget = InputBudget(optimize_at=optimize, max=strict)
    confidence = min(profile.confidence, read.counting_confidence, key=_CONFIDENCE_RANK.index)
    return PlanRequest(
        request_id=request_id,
        model=profile.model_copy(update={"confidence": confidence}),
        input_budget=budget,
        system_tokens=read.system_tokens,
        history=read.history.items(),
        older_history=read.older_history,
        history_policy=history_policy(request.history),
        current_turn_tokens=read.current_turn_tokens,
        output_reserve=request.max_output_tokens,
        previous_request_id=previous_request_id,
    )
