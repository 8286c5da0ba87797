"""Receipts, inspection and preview (behaviours 151-159)."""

from __future__ import annotations

import json

import pytest

from planner import (
    ConfigurationError,
    InputBudget,
    PlanRequest,
    RequestInspection,
    RequestReceipt,
    SupportRequestRecord,
    Tool,
    context,
    droppable,
    inspect_plan,
    offloadable,
    plan,
    prefer,
    preview,
    summarizable,
    with_runtime_facts,
)
from tests.planner.helpers import EXACT, EXACT_MAX, request, tool_round, turns

LADDERS = (
    prefer(context("catalog", tokens=3_000), context("catalog-index", tokens=400)),
    droppable(context("faq", tokens=2_000, tools=(Tool(name="faq_lookup", tokens=60),))),
    offloadable(context("crm", tokens=1_500), reference_tokens=90, handle_id="handle-7"),
)


def adapted() -> PlanRequest:
    return request(
        request_id="req-9",
        system_tokens=500,
        history=turns(3) + tool_round("g9", "call-1"),
        contributors=LADDERS,
        input_budget=InputBudget(optimize_at=2_000, max=4_000),
        previous_request_id="req-8",
    )


def test_151_receipt_json_round_trips_without_inspection() -> None:
    """151: the receipt serialises to its small shape and round-trips."""
    receipt = plan(adapted()).receipt
    data = json.loads(receipt.model_dump_json())
    assert set(data) == {
        "id",
        "model",
        "input_tokens",
        "max_input_tokens",
        "measurement",
        "adaptations",
        "warnings",
        "previous_request_id",
        "previous_reason",
        "summary_path",
        "agent_id",
        "preparations",
        "settings",
        "retry_count",
    }
    assert RequestReceipt.model_validate_json(receipt.model_dump_json()) == receipt
    with pytest.raises(ValueError):
        receipt.input_tokens = 1


def test_152_inspection_is_rebuilt_identically_from_the_request_and_round_trips() -> None:
    """152: inspection is pure data, so any process can rebuild or reload it.

    Retention (the 5-minute/256-entry buffer of the reference) is replaced by storing the
    inspection with the receipt; availability is the runtime's concern.
    """
    first = plan(adapted()).inspection
    second = plan(PlanRequest.model_validate_json(adapted().model_dump_json())).inspection
    assert first == second
    assert RequestInspection.model_validate_json(first.model_dump_json()) == first
    assert inspect_plan(adapted(), retry_count=1) == first.model_copy(update={"retry_count": 1})


def test_153_inspection_holds_no_content() -> None:
    """153: only ids, sizes and decisions: a snapshot of the inspection's fields."""
    inspection = plan(adapted()).inspection
    data = json.loads(inspection.model_dump_json())
    assert set(data) == {
        "id",
        "model",
        "contributions",
        "candidates",
        "tier",
        "optimize_at",
        "max_input_tokens",
        "breakdown",
        "measurement",
        "counting",
        "retry_count",
        "artifacts",
        "support_tools",
        "support_requests",
        "linked_request_ids",
        "history",
        "epoch_key",
        "retention",
    }

    def strings(value: object) -> set[str]:
        if isinstance(value, str):
            return {value}
        if isinstance(value, dict):
            return set().union(*(strings(v) for v in value.values()), set())
        if isinstance(value, list):
            return set().union(*(strings(v) for v in value), set())
        return set()

    # Every string is an id, a model name, a kind, a reason or a fixed label.
    allowed = {
        "req-9", "req-8", "test:exact", "catalog", "catalog-index", "faq", "faq_lookup", "crm",
        "handle-7", "full", "authored", "summary", "offload", "omitted", "required", "sticky",
        "elastic", "lower-fidelity", "over-limit", "optimize_at", "max", "estimated", "exact",
        "cl100k_base", "system", "messages", "message-structure", "context:catalog",
        "context:crm", "context:faq", "tools", "test|test:exact|optimize_at=2000,max=4000",
        "stored with the receipt",
    }  # fmt: skip
    assert strings(data) <= allowed, strings(data) - allowed


def test_154_counting_reports_margin_and_overhead() -> None:
    """154: counting shows the safety margin and the 32-token provider overhead."""
    counting = plan(adapted()).inspection.counting
    assert counting.provider_overhead_tokens == 32
    assert counting.safety_margin_tokens == 0
    estimated = EXACT.model_copy(update={"confidence": "estimated"})
    counting = plan(request(model=estimated)).inspection.counting
    assert counting.safety_margin_tokens == 500
    assert counting.measurement == "estimated"
    assert counting.output_reserve_tokens == 1_000


def test_155_adaptations_carry_full_and_selected_sizes() -> None:
    """155: `full_tokens` is the unadapted request, `selected_tokens` the chosen one."""
    sealed = plan(adapted())
    full = 500 + 100 + 3_000 + 2_060 + 1_500
    assert [(a.contributor, a.representation) for a in sealed.receipt.adaptations] == [
        ("catalog", "authored"),
        ("faq", "omitted"),
        ("crm", "offload"),
    ]
    for adaptation in sealed.receipt.adaptations:
        assert adaptation.full_tokens == full
        assert adaptation.selected_tokens == sealed.input_tokens == 500 + 100 + 400 + 90
    assert sealed.receipt.adaptations[0].contributor_full_tokens == 3_000
    assert sealed.receipt.adaptations[0].contributor_selected_tokens == 400


def test_inspection_lists_candidates_with_reasons() -> None:
    sealed = plan(adapted())
    table = {
        (c.contributor, c.representation): (c.selected, c.rejection_reason)
        for c in sealed.inspection.candidates
    }
    assert table[("catalog", "full")] == (False, "over-limit")
    assert table[("catalog", "authored")] == (True, None)
    assert table[("faq", "full")] == (False, "over-limit")
    assert table[("crm", "offload")] == (True, None)
    assert sealed.inspection.history.messages_after == 10
    assert sealed.inspection.linked_request_ids == ("req-8",)


def test_runtime_facts_link_support_requests() -> None:
    support = SupportRequestRecord(
        id="sup-1", model="test:exact", input_tokens=10, max_input_tokens=20, measurement="exact"
    )
    inspection = with_runtime_facts(plan(adapted()).inspection, support_requests=(support,))
    assert inspection.support_requests == (support,)
    assert inspection.linked_request_ids == ("req-8", "sup-1")


def test_156_preview_without_a_model_is_a_type_error() -> None:
    """156: preview requires a model."""
    no_model = PlanRequest.model_construct(request_id="r", model=None)
    with pytest.raises(TypeError) as raised:
        preview(no_model)
    assert isinstance(raised.value, ConfigurationError)
    with pytest.raises(TypeError):
        preview({"request_id": "r"})  # type: ignore[arg-type]


def test_157_preview_fits_when_a_ready_candidate_fits() -> None:
    """157: `fits` with the profile's confidence."""
    result = preview(adapted())
    assert result.status == "fits"
    assert result.measurement == "exact"
    assert result.input_tokens == plan(adapted()).input_tokens
    assert [a.state for a in result.adaptations] == ["selected"] * 3


def test_157_preview_is_unknown_when_only_an_unprepared_summary_could_fit() -> None:
    """157: `unknown` / `incomplete` when an unprepared summary is the only way."""
    docs = summarizable(context("docs", tokens=9_500), expected_tokens=400)
    result = preview(request(contributors=(docs,)))
    assert result.status == "unknown"
    assert result.measurement == "incomplete"
    (adaptation,) = result.adaptations
    assert (adaptation.representation, adaptation.state) == ("summary", "unprepared")
    assert "REPRESENTATION_CAPABILITY_UNAVAILABLE" in [d.code for d in result.diagnostics]


def test_157_preview_is_unknown_with_runtime_only_tool_sources() -> None:
    result = preview(request(runtime_sources=("mcp-server",)))
    assert result.status == "unknown"
    assert [d.code for d in result.diagnostics] == ["PREVIEW_RUNTIME_SOURCE"]


def test_157_and_159_preview_returns_over_limit_with_the_minimum_size() -> None:
    """157/159: `over-limit` is returned, with `REQUEST_INPUT_LIMIT` and the minimum size."""
    result = preview(
        request(
            system_tokens=9_000,
            contributors=(droppable(context("faq", tokens=500)),),
        )
    )
    assert result.status == "over-limit"
    assert result.input_tokens == 9_000
    assert result.max_input_tokens == EXACT_MAX
    first = result.diagnostics[0]
    assert (first.code, first.tokens) == ("REQUEST_INPUT_LIMIT", 9_000)


def test_158_preview_has_no_side_effects() -> None:
    """158: preview prepares nothing, schedules nothing and leaves its input untouched."""
    req = adapted()
    before = req.model_dump_json()
    first = preview(req)
    assert req.model_dump_json() == before
    assert preview(req) == first
    assert "preparations" not in first.model_dump()


def test_preview_still_raises_invalid_composition() -> None:
    from planner import HistoryItem, RequestCompositionError

    broken = (HistoryItem(id="t", role="tool", group_id="g", tokens=1, tool_call_id="nope"),)
    with pytest.raises(RequestCompositionError) as raised:
        preview(request(history=broken))
    assert raised.value.code == "INVALID_COMPOSITION"
