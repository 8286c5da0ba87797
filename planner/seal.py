"""Sealing: `plan(request)` turns a request skeleton into an immutable plan or a typed error."""

from __future__ import annotations

from typing import Literal

from planner._compose import Composition, compose
from planner.diagnostics import composition_error
from planner.inspection import build_inspection, history_record, with_runtime_facts
from planner.projection import Span
from planner.receipt import (
    Adaptation,
    ReceiptWarning,
    RequestInspection,
    RequestReceipt,
    SummaryPath,
    SupportRequestRecord,
)
from planner.request import EpochFloor, EpochFloors, PlanRequest
from planner.sealed import ContributorChoice, HistorySummaryPlacement, Preparation, SealedPlan
from planner.select import Selection, select_two_tier
from planner.summary_choice import (
    MAINTENANCE_SCHEDULED,
    maintenance,
    miss_preparations,
    summary_missing,
)
from planner.summary_rung import HISTORY_ID, summary_warnings


def needs_authoritative_count(request: PlanRequest) -> bool:
    """Whether an authoritative count could rescue a request the estimate rejects.

    True only for a request with nothing to choose (no elastic contributor, no managed
    history) whose estimate exceeds the strict max and whose messages are all listed (an
    aggregate of older history cannot be counted by id, so it can never be rescued). The
    runtime then counts the request with the provider's counter and plans again with
    `counted_input_tokens` (exact measurement, no safety margin).
    """
    comp = compose(request.model_copy(update={"counted_input_tokens": None}))
    complete = comp.history_span is not None and not comp.history_span.include_older
    return complete and not comp.ladders and comp.fixed_tokens > comp.budget.max


def _unavailable(comp: Composition) -> tuple[str, ...]:
    # Contributors with a rung the epoch still allows but that cannot be used now.
    names: list[str] = []
    for position, ladder in enumerate(comp.ladders):
        lowest = max(comp.floors[position], ladder.start)
        if any(not rung.available for rung in ladder.rungs[lowest:]):
            names.append(ladder.id)
    return tuple(names)


def _smallest_rest(comp: Composition) -> int:
    """Everything but managed history, each elastic contributor at its smallest legal rung.

    What a fresh summary is always sent beside: the most room it could ever have.
    """
    others = sum(
        min((size for _, size in options), default=0)
        for ladder, options in zip(comp.ladders, comp.options, strict=True)
        if ladder.id != HISTORY_ID
    )
    return comp.fixed_tokens + others


def _select(comp: Composition) -> tuple[Selection, Literal["optimize_at", "max"]]:
    budget = comp.budget
    empty = tuple(
        ladder.id for ladder, options in zip(comp.ladders, comp.options, strict=True) if not options
    )
    if empty:
        raise composition_error(comp, "REPRESENTATION_UNAVAILABLE", unavailable=empty)
    counted = comp.counted
    if counted is not None:
        if counted > budget.max:
            raise composition_error(comp, "REQUEST_TOO_LARGE", required=counted)
        return Selection((), counted), "optimize_at" if counted <= budget.optimize_at else "max"
    found = select_two_tier(comp.options, comp.fixed_tokens, budget.optimize_at, budget.max)
    if found is None:
        unavailable = _unavailable(comp)
        managed = comp.managed
        needs: tuple[Preparation, ...] = ()
        if managed is not None:
            if summary_missing(managed) and HISTORY_ID not in unavailable:
                # A stale summary that no longer fits with its uncovered gap: the fresh one
                # is the representation that is missing.
                unavailable = (HISTORY_ID, *unavailable)
            needs = miss_preparations(managed, budget, _smallest_rest(comp))
        preparations = tuple(need.model_dump() for need in needs)
        code = "REPRESENTATION_UNAVAILABLE" if unavailable else "REQUEST_TOO_LARGE"
        raise composition_error(comp, code, unavailable=unavailable, preparations=preparations)
    selection, tier = found
    return selection, "optimize_at" if tier == "optimize_at" else "max"


def plan(request: PlanRequest) -> SealedPlan:
    """Plan one provider call: measure, select representations, seal the receipt.

    Pure and deterministic: the same request always yields a byte-identical plan.

    Args:
        request: The content-free request skeleton.

    Returns:
        The sealed plan.

    Raises:
        RequestCompositionError: `REQUEST_TOO_LARGE` when no legal complete request fits,
            `REPRESENTATION_UNAVAILABLE` when only an unavailable or unprepared rung could
            help (diagnostics list inline `preparations` for managed history), or
            `INVALID_COMPOSITION` for malformed input.
        ConfigurationError: For invalid configuration values.
    """
    comp = compose(request)
    selection, tier = _select(comp)
    budget = comp.budget
    total = selection.tokens
    # With an authoritative count there is nothing to adapt: "full" is the count itself.
    full_total = comp.full_tokens if comp.counted is None else total
    chosen = selection.rungs

    choices: list[ContributorChoice] = []
    adaptations: list[Adaptation] = []
    removed: list[str] = []
    # Floors of contributors absent from this step carry over: one may come back later in
    # the same epoch and must not re-expand then either.
    previous = request.epoch
    floors_out: dict[str, int] = (
        {entry.contributor: entry.rung for entry in previous.floors}
        if previous is not None and previous.key == comp.epoch_key
        else {}
    )
    span: Span | None = comp.history_span
    summary: HistorySummaryPlacement | None = None
    warnings = [ReceiptWarning(code=w.code, message=w.message) for w in comp.history_warnings]
    summary_path: SummaryPath | None = None
    if comp.policy != "exact" and request.history_source == "none":
        # A projection with nothing to project is a configuration slip, not a silent no-op.
        warnings.append(
            ReceiptWarning(
                code="HISTORY_SOURCE_MISSING",
                message="the history projection has no source: pass messages= or bind a "
                "Thread (prompt use=[thread] or thread=)",
            )
        )
    for position, (ladder, index) in enumerate(zip(comp.ladders, chosen, strict=True)):
        rung = ladder.rungs[index]
        gone = ladder.tools if rung.kind == "omitted" else ()
        removed.extend(gone)
        choices.append(
            ContributorChoice(
                contributor=ladder.id,
                representation=rung.kind,
                rung=index,
                source=rung.source,
                tokens=rung.tokens,
                removed_tools=gone,
                sources=rung.sent,
            )
        )
        floor = max(comp.floors[position], index)
        if floor:
            floors_out[ladder.id] = floor
        if rung.kind != "full":
            adaptations.append(
                Adaptation(
                    contributor=ladder.id,
                    representation=rung.kind,
                    source=rung.source,
                    full_tokens=full_total,
                    selected_tokens=total,
                    contributor_full_tokens=ladder.rungs[0].tokens,
                    contributor_selected_tokens=rung.tokens,
                )
            )
        if ladder.id == HISTORY_ID and comp.managed is not None:
            span = comp.managed.spans[index]
            policy_summary = comp.managed.policy.summary
            if rung.kind == "summary" and policy_summary is not None:
                summary = HistorySummaryPlacement(
                    artifact_id=policy_summary.artifact_id,
                    position=comp.projector.prefix_items,
                    tokens=rung.tokens - (span.tokens if span else 0),
                )
                warnings.extend(summary_warnings(policy_summary))
                summary_path = policy_summary.path
    choices.extend(
        ContributorChoice(
            contributor=ladder.id,
            representation="full",
            rung=0,
            source=ladder.id,
            tokens=ladder.rungs[0].tokens,
            removed_tools=(),
            sources=ladder.rungs[0].sent,
        )
        for ladder in comp.required
    )
    # Managed history (order -1) first, then declaration order.
    declared = {ladder.id: ladder.order for ladder in (*comp.ladders, *comp.required)}
    choices.sort(key=lambda choice: declared[choice.contributor])

    preparations: tuple[Preparation, ...] = ()
    refresh = (
        maintenance(comp.managed, budget, total, _smallest_rest(comp))
        if comp.managed is not None
        else None
    )
    if refresh is not None:
        # Refreshed in the background so the next turn finds a summary through its own
        # suffix and an inline refresh stays rare.
        preparations = (refresh,)
        warnings.append(MAINTENANCE_SCHEDULED)
    has_history = comp.projector.listed > 0 or request.older_history.count > 0
    if comp.policy == "exact" and has_history and total > budget.optimize_at:
        warnings.append(
            ReceiptWarning(
                code="HISTORY_EXACT_NEAR_LIMIT",
                message="exact history has pushed the request above optimize_at",
            )
        )

    receipt = RequestReceipt(
        id=request.request_id,
        model=request.model.id,
        input_tokens=total,
        max_input_tokens=budget.max,
        measurement=budget.measurement,
        adaptations=tuple(adaptations),
        warnings=tuple(warnings),
        previous_request_id=request.previous_request_id,
        summary_path=summary_path,
        settings=request.settings,
    )
    record = history_record(comp, span, summary.tokens if summary else 0)
    inspection = build_inspection(comp, chosen, tier, receipt, record)
    sent_summary = comp.managed.policy.summary if comp.managed is not None else None
    if summary is not None and sent_summary is not None and sent_summary.support_requests:
        # The support calls that wrote the summary this request sends are part of its story.
        inspection = with_runtime_facts(inspection, support_requests=sent_summary.support_requests)
    return SealedPlan(
        request_id=request.request_id,
        message_ids=comp.projector.ids(span) if span is not None else (),
        message_ranges=comp.projector.ranges(span) if span is not None else (),
        input_tokens=total,
        max_output_tokens=budget.output_reserve,
        receipt=receipt,
        choices=tuple(choices),
        removed_tools=tuple(removed),
        included_older=request.older_history if span is not None and span.include_older else None,
        history_summary=summary,
        epoch=EpochFloors(
            key=comp.epoch_key,
            floors=tuple(
                EpochFloor(contributor=name, rung=rung) for name, rung in sorted(floors_out.items())
            ),
        ),
        budget=budget,
        tier=tier,
        preparations=preparations,
        inspection=inspection,
    )


def inspect_plan(
    request: PlanRequest,
    *,
    retry_count: int = 0,
    support_requests: tuple[SupportRequestRecord, ...] = (),
) -> RequestInspection:
    """Rebuild the full inspection of a planned request from its input.

    Planning is deterministic, so the inspection sealed with a plan can be rebuilt anywhere
    from the same request; the runtime adds what only it knows.

    Args:
        request: The request that was planned.
        retry_count: Transport retries reported for the sealed request.
        support_requests: Support calls linked after sealing.

    Returns:
        The inspection.

    Raises:
        RequestCompositionError: If the request does not plan (there is nothing to inspect).
    """
    return with_runtime_facts(
        plan(request).inspection, retry_count=retry_count, support_requests=support_requests
    )
