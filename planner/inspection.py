"""Pure construction of the content-free inspection of a sealed request."""

from __future__ import annotations

from planner._compose import Composition
from planner.projection import Span
from planner.receipt import (
    ArtifactRecord,
    Breakdown,
    BreakdownEntry,
    CandidateRecord,
    ContributionRecord,
    Counting,
    HistoryRecord,
    RejectionReason,
    RequestInspection,
    RequestReceipt,
    SupportRequestRecord,
)
from planner.summary_rung import HISTORY_ID


def _name(ladder_id: str) -> str:
    return HISTORY_ID if ladder_id == HISTORY_ID else f"context:{ladder_id}"


def _reason(comp: Composition, position: int, index: int, chosen: int) -> RejectionReason:
    ladder = comp.ladders[position]
    rung = ladder.rungs[index]
    if index > chosen:
        return "lower-fidelity"
    if index < comp.floors[position]:
        return "epoch-floor"
    if index < ladder.start:
        return "above-threshold"
    if rung.unprepared and not rung.available:
        return "unprepared"
    if not rung.available:
        return "unavailable"
    return "over-limit"


def history_record(comp: Composition, span: Span | None, summary_tokens: int) -> HistoryRecord:
    """Describe the history projection of a sealed request."""
    projector = comp.projector
    older = projector.older
    sent = span if span is not None else projector.span(projector.group_count, False)
    extra = 1 if summary_tokens else 0
    return HistoryRecord(
        policy=comp.request.history_policy.kind,
        messages_before=projector.listed + older.count,
        messages_after=sent.messages + extra,
        groups_before=projector.group_count + projector.older_groups,
        groups_after=sent.groups + extra,
        leading_prefix=projector.prefix_items,
        tokens=sent.content + summary_tokens,
    )


def build_inspection(
    comp: Composition,
    chosen: tuple[int, ...],
    tier: str,
    receipt: RequestReceipt,
    history: HistoryRecord,
) -> RequestInspection:
    """Build the full inspection of a sealed request (internal entry; see `inspect_plan`)."""
    total = receipt.input_tokens
    contributions: list[ContributionRecord] = []
    candidates: list[CandidateRecord] = []
    artifacts: list[ArtifactRecord] = []
    entries = [BreakdownEntry(name=name, tokens=tokens) for name, tokens in comp.fixed if tokens]
    for position, (ladder, index) in enumerate(zip(comp.ladders, chosen, strict=True)):
        selected = ladder.rungs[index]
        if selected.tokens:
            entries.append(BreakdownEntry(name=_name(ladder.id), tokens=selected.tokens))
        for rung_index, rung in enumerate(ladder.rungs):
            is_selected = rung_index == index
            size = None
            if rung.available:
                size = total - selected.tokens + rung.tokens
            candidates.append(
                CandidateRecord(
                    contributor=ladder.id,
                    representation=rung.kind,
                    rung=rung_index,
                    available=rung.available,
                    selected=is_selected,
                    input_tokens=size,
                    rejection_reason=None
                    if is_selected
                    else _reason(comp, position, rung_index, index),
                )
            )
        if selected.kind in ("summary", "offload"):
            artifacts.append(
                ArtifactRecord(
                    contributor=ladder.id,
                    kind="summary" if selected.kind == "summary" else "offload",
                    artifact_id=selected.artifact_id,
                    support_request_ids=selected.support_request_ids,
                )
            )
    elastic = sorted(comp.ladders, key=lambda ladder: ladder.order)
    for ladder in [*elastic, *comp.required]:
        classification = (
            "required" if not ladder.elastic else "sticky" if ladder.tools else "elastic"
        )
        contributions.append(
            ContributionRecord(
                id=ladder.id,
                sources=ladder.sources,
                priority=ladder.priority,
                classification=classification,
                representations=ladder.kinds,
                tools=ladder.tools,
            )
        )
    declared = {ladder.id: ladder.order for ladder in (*comp.ladders, *comp.required)}
    contributions.sort(key=lambda record: declared[record.id])
    entries.sort(key=lambda entry: (-entry.tokens, entry.name))
    support = comp.request.support_requests
    linked = [receipt.previous_request_id] if receipt.previous_request_id else []
    for record in support:
        if record.id not in linked:
            linked.append(record.id)
    for artifact in artifacts:
        for request_id in artifact.support_request_ids:
            if request_id not in linked:
                linked.append(request_id)
    budget = comp.budget
    return RequestInspection(
        id=receipt.id,
        model=receipt.model,
        contributions=tuple(contributions),
        candidates=tuple(candidates),
        tier="optimize_at" if tier == "optimize_at" else "max",
        optimize_at=budget.optimize_at,
        max_input_tokens=budget.max,
        breakdown=Breakdown(total=total, contributions=tuple(entries)),
        measurement=receipt.measurement,
        counting=Counting(
            measurement=budget.measurement,
            safety_margin_tokens=budget.safety_margin,
            provider_overhead_tokens=budget.provider_overhead,
            output_reserve_tokens=budget.output_reserve,
            context_window=budget.context_window,
            encoding=comp.request.model.encoding,
        ),
        artifacts=tuple(artifacts),
        support_requests=tuple(support),
        linked_request_ids=tuple(linked),
        history=history,
        epoch_key=comp.epoch_key,
    )


def with_runtime_facts(
    inspection: RequestInspection,
    *,
    retry_count: int = 0,
    support_requests: tuple[SupportRequestRecord, ...] = (),
) -> RequestInspection:
    """Return `inspection` with facts only the runtime knows (transport retries, support calls).

    Args:
        inspection: The inspection sealed with the plan.
        retry_count: Transport retries the adapter reported for this sealed request.
        support_requests: Additional linked support calls.

    Returns:
        A new inspection; the input is unchanged.
    """
    linked = list(inspection.linked_request_ids)
    merged = list(inspection.support_requests)
    for record in support_requests:
        if record not in merged:
            merged.append(record)
        if record.id not in linked:
            linked.append(record.id)
    return RequestInspection.model_validate(
        {
            **inspection.model_dump(),
            "retry_count": retry_count,
            "support_requests": [record.model_dump() for record in merged],
            "linked_request_ids": linked,
        }
    )
