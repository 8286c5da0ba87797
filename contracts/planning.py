"""Translate the generation's wire input and read skeleton into a planner request.

Pure functions over pure data: safe inside the workflow sandbox and deterministic. The
generation workflow plans every step with them and `Runtime.preview` plans the first one,
so a preview answers what the run's first plan will be. They live here rather than in
`planner` because they read the wire shapes (`GenerationInput`, `ReadRequestResult`), which
sit above the planner.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from contracts.activities import ReadRequestResult, SelectedSource
from contracts.generation import GenerationInput, HistorySpec, InputBudgetSpec
from planner import (
    Contributor,
    EpochFloors,
    ExactHistory,
    HistorySummary,
    InputBudget,
    ManagedHistory,
    ModelProfile,
    PlanRequest,
    Preparation,
    RecentHistory,
    SealedPlan,
    conservative_profile,
    derive_budget,
    plan,
    with_source_tokens,
)
from planner.contributors import full_sources, sources
from planner.ladder import Placement
from planner.policies import DEFAULT_RECENT_MESSAGES
from planner.summary_choice import background_preparations, inline_preparations
from vocabulary.errors import RequestCompositionError

# Lowest first: a fallback tokenizer can only lower the profile's counting confidence.
_CONFIDENCE_RANK = ("conservative", "estimated", "exact")


def read_bound(model_id: str, request: GenerationInput) -> int:
    """A first bound on the skeleton for the read input.

    The reader derives the real ceiling from the worker's own catalog (`derive_ceiling`),
    so custom profiles apply; this conservative bound only fills the field for readers
    that would not.
    """
    return max_input_tokens(conservative_profile(model_id), request)


def input_budget(spec: InputBudgetSpec | None) -> InputBudget | None:
    """The planner's budget for a wire budget."""
    if spec is None:
        return None
    return InputBudget(optimize_at=spec.optimize_at, max=spec.max)


def history_policy(
    spec: HistorySpec, summary: HistorySummary | None = None
) -> ExactHistory | RecentHistory | ManagedHistory:
    """The planner's history policy for a wire policy (with the stored summary, if any)."""
    if spec.kind == "recent":
        if spec.messages is None and spec.tokens is None:
            # A plain client's `{"kind": "recent"}` means `history.recent()`: the default cap.
            return RecentHistory(messages=DEFAULT_RECENT_MESSAGES)
        return RecentHistory(messages=spec.messages, tokens=spec.tokens)
    if spec.kind == "managed":
        return ManagedHistory(
            recent_messages=spec.messages,
            recent_tokens=spec.tokens,
            on_miss=spec.on_miss,
            summary=summary,
        )
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
    epoch: EpochFloors | None = None,
    turn_tokens: int = 0,
    turn_messages: int = 0,
) -> PlanRequest:
    """Assemble the planner input for one provider step.

    Args:
        request_id: Id of this request (from `workflow.uuid4()`).
        request: The generation input.
        read: The content-free skeleton from the read stage.
        profile: The model profile.
        ceiling: A stricter `max` after a provider's overflow rejection.
        previous_request_id: The request this one recovers from, if any.
        epoch: Epoch floors from the previous step of this generation.
        turn_tokens: Content tokens of the tool-round messages already in this turn.
        turn_messages: How many tool-round messages the turn holds.
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
        history_columns=read.history,
        older_history=read.older_history,
        history_policy=history_policy(request.history, read.summary),
        contributors=tuple(
            with_source_tokens(c, read.context_tokens) for c in request.contributors
        ),
        current_turn_tokens=read.current_turn_tokens + turn_tokens,
        current_turn_messages=1 + turn_messages,
        tool_schema_tokens=read.tool_schema_tokens if request.tools else 0,
        output_schema_tokens=read.output_schema_tokens if request.output else 0,
        output_reserve=request.max_output_tokens,
        previous_request_id=previous_request_id,
        epoch=epoch,
        settings=request.settings.record(request.model) if request.settings else None,
        history_source="messages"
        if read.history_source == "caller-messages"
        else read.history_source,
    )


def selected_sources(
    contributors: Sequence[Contributor], sealed: SealedPlan
) -> list[SelectedSource]:
    """The sources a sealed plan sends, in declaration order, with their placement."""
    placement: dict[str, Placement] = {
        source.id: source.placement for c in contributors for source in sources(c)
    }
    return [
        SelectedSource(id=source_id, placement=placement[source_id])
        for choice in sealed.choices
        for source_id in choice.sources
        if source_id in placement
    ]


def all_sources(contributors: Sequence[Contributor]) -> list[SelectedSource]:
    """Every contributor at its full rung (what an authoritative count measures)."""
    return [
        SelectedSource(id=source.id, placement=source.placement)
        for contributor in contributors
        for source in full_sources(contributor)
    ]


def can_count_authoritatively(request: GenerationInput, read: ReadRequestResult) -> bool:
    """Whether the whole request can be rebuilt for a provider count.

    Only exact history qualifies, and only when the skeleton holds every message (nothing
    was aggregated as older history).
    """
    return (
        request.history.kind == "exact"
        and read.older_history.count == 0
        and read.history_source != "caller-messages"
    )


def planning_profile(request: GenerationInput, read: ReadRequestResult) -> ModelProfile:
    """The profile a generation plans with: the worker catalog's, as the reader resolved it."""
    return read.profile or conservative_profile(request.model)


@dataclass(frozen=True)
class FirstPlan:
    """What planning a generation's first call over its read found.

    Attributes:
        sealed: The plan, if it sealed at once; `None` when planning first asks for
            something else (a summary, an authoritative count) or fails: the workflow
            then carries that out, or reports the failure, and records its plan itself.
        summary_positions: Where the summaries it asks for end, on the history source:
            the one to prepare before it can seal, or the refreshes to start after the
            response (or after its failure, under `on_miss="fail"`).
    """

    sealed: SealedPlan | None
    summary_positions: tuple[int, ...] = ()


def first_plan(request: GenerationInput, read: ReadRequestResult, request_id: str) -> FirstPlan:
    """The generation's first plan over `read`, as the workflow makes it."""
    plan_request = build_plan_request(
        request_id=request_id,
        request=request,
        read=read,
        profile=planning_profile(request, read),
        ceiling=None,
        previous_request_id=None,
    )
    try:
        sealed = plan(plan_request)
    except RequestCompositionError as error:
        needs = (*inline_preparations(error), *background_preparations(error))
        return FirstPlan(None, _positions(needs))
    except Exception:
        # Planning ahead only saves the workflow a step: whatever stops it here, the
        # workflow's own planning meets again and handles.
        return FirstPlan(None)
    return FirstPlan(sealed, _positions(sealed.preparations))


def _positions(needs: Sequence[Preparation]) -> tuple[int, ...]:
    return tuple(need.through_position for need in needs if need.through_position is not None)


def plan_digest(sealed: SealedPlan) -> str:
    """A digest of what recording `sealed` stores: its receipt and its inspection."""
    digest = hashlib.sha256(sealed.receipt.model_dump_json().encode())
    digest.update(b"\n")
    digest.update(sealed.inspection.model_dump_json().encode())
    return digest.hexdigest()[:32]
