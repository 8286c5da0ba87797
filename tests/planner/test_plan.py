"""Sealing exact requests, failures and step chaining (behaviours 128, 135-137, 143, 148-150)."""

from __future__ import annotations

import pytest

from planner import (
    ConfigurationError,
    Contributor,
    HistoryAggregate,
    InputBudget,
    ModelCatalog,
    RequestCompositionError,
    Tool,
    context,
    droppable,
    needs_authoritative_count,
    plan,
    prefer,
    summarizable,
    with_runtime_facts,
)
from tests.planner.helpers import EXACT, EXACT_MAX, request, turns


def test_128_small_exact_request_has_no_adaptations() -> None:
    """128: a small exact request yields `adaptations: []` and the profile's confidence."""
    for model_id in ("openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5", "offline:echo"):
        profile = ModelCatalog.default().resolve(model_id)
        sealed = plan(request(model=profile, system_tokens=40, history=turns(2)))
        assert sealed.receipt.adaptations == ()
        assert sealed.receipt.measurement == profile.confidence
        assert sealed.message_ids == ("u0", "a0", "u1", "a1")


def test_exact_request_size_is_the_sum_of_its_classes() -> None:
    sealed = plan(
        request(
            system_tokens=100,
            history=turns(3),
            current_turn_tokens=20,
            tool_schema_tokens=30,
            output_schema_tokens=40,
            contributors=(context("docs", tokens=50),),
        )
    )
    assert sealed.input_tokens == 100 + 60 + 20 + 30 + 40 + 50
    names = {entry.name: entry.tokens for entry in sealed.inspection.breakdown.contributions}
    assert names == {
        "system": 100,
        "messages": 60,
        "current-turn": 20,
        "tools": 30,
        "output-schema": 40,
        "context:docs": 50,
    }


def test_135_oversized_exact_request_fails_before_dispatch_with_ordered_diagnostics() -> None:
    """135: `REQUEST_TOO_LARGE` with input limit, <= 3 largest, exhausted and remedy."""
    with pytest.raises(RequestCompositionError) as raised:
        plan(
            request(
                request_id="big",
                system_tokens=5_000,
                history=turns(100, tokens=30),
                tool_schema_tokens=700,
                output_schema_tokens=300,
            )
        )
    error = raised.value
    assert error.code == "REQUEST_TOO_LARGE"
    assert error.request_id == "big"
    assert error.diagnostics["required_tokens"] == 5_000 + 6_000 + 700 + 300
    assert error.diagnostics["available_tokens"] == EXACT_MAX
    items = error.diagnostics["items"]
    assert isinstance(items, list)
    codes = [item["code"] for item in items]
    assert codes == [
        "REQUEST_INPUT_LIMIT",
        "LARGEST_REQUIRED_CONTRIBUTOR",
        "LARGEST_REQUIRED_CONTRIBUTOR",
        "LARGEST_REQUIRED_CONTRIBUTOR",
        "EXACT_REPRESENTATION_EXHAUSTED",
        "HISTORY_EXACT_REMEDY",
        "REQUEST_REMEDY",
    ]
    assert [item["contributor"] for item in items[1:4]] == ["messages", "system", "tools"]
    assert all(item["id"].startswith("big:") for item in items)
    assert error.diagnostics["largest_required"] == [
        {"name": "messages", "tokens": 6_000},
        {"name": "system", "tokens": 5_000},
        {"name": "tools", "tokens": 700},
    ]
    assert "test:exact" in str(error)


def test_exact_history_never_becomes_an_implicit_window() -> None:
    """Exact history that cannot fit is refused; older aggregated history counts too."""
    items = turns(2)
    fits = plan(request(history=items))
    assert fits.message_ids == ("u0", "a0", "u1", "a1")
    older = HistoryAggregate(count=500, tokens=9_000, first_id="x0", last_id="x499")
    with pytest.raises(RequestCompositionError) as raised:
        plan(request(history=items, older_history=older))
    assert raised.value.code == "REQUEST_TOO_LARGE"
    assert raised.value.diagnostics["required_tokens"] == 9_040


def test_exact_history_with_a_fitting_aggregate_sends_it_too() -> None:
    older = HistoryAggregate(count=4, tokens=40, first_id="x0", last_id="x3")
    sealed = plan(request(history=turns(1), older_history=older))
    assert sealed.included_older == older
    assert sealed.input_tokens == 60


def test_exact_history_near_the_watermark_warns() -> None:
    sealed = plan(request(history=turns(10, 100), input_budget=InputBudget(optimize_at=1_000)))
    assert [w.code for w in sealed.receipt.warnings] == ["HISTORY_EXACT_NEAR_LIMIT"]
    assert sealed.tier == "max"


def test_136_authoritative_count_is_needed_only_above_max_and_can_rescue() -> None:
    """136: the count is asked for only when the estimate exceeds max; it can rescue."""
    estimated = EXACT.model_copy(update={"confidence": "conservative"})
    small = request(model=estimated, system_tokens=100)
    assert not needs_authoritative_count(small)
    big = request(model=estimated, system_tokens=8_000)  # max is 7,968 with a 1,000 margin
    assert needs_authoritative_count(big)
    with pytest.raises(RequestCompositionError):
        plan(big)
    rescued = plan(big.model_copy(update={"counted_input_tokens": 8_500}))
    assert rescued.receipt.measurement == "exact"
    assert rescued.receipt.max_input_tokens == EXACT_MAX
    assert rescued.input_tokens == 8_500
    with pytest.raises(RequestCompositionError) as raised:
        plan(big.model_copy(update={"counted_input_tokens": 9_000}))
    assert raised.value.diagnostics["required_tokens"] == 9_000


def test_136_a_count_cannot_rescue_history_it_does_not_list() -> None:
    """An aggregate of older exact history is required but cannot be counted by id."""
    older = HistoryAggregate(count=400, tokens=8_000, first_id="o0", last_id="o399")
    big = request(history=turns(10, tokens=50), older_history=older)
    assert not needs_authoritative_count(big)
    with pytest.raises(RequestCompositionError) as raised:
        plan(big.model_copy(update={"counted_input_tokens": 1_000}))
    assert raised.value.code == "REQUEST_TOO_LARGE"


def test_136_requests_with_policies_do_not_ask_for_a_whole_count() -> None:
    ladder = droppable(context("faq", tokens=9_000))
    assert not needs_authoritative_count(request(contributors=(ladder,)))


@pytest.mark.parametrize("bad", [-1, 1.5, True, "12"])
def test_137_invalid_authoritative_count_is_a_type_error(bad: object) -> None:
    """137: a negative or non-integer count raises `TypeError` before dispatch."""
    bad_request = request().model_copy(update={"counted_input_tokens": bad})
    with pytest.raises(TypeError) as raised:
        plan(bad_request)
    assert isinstance(raised.value, ConfigurationError)


def test_143_plain_contributors_are_never_reduced() -> None:
    """143: pressure without authorised rungs -> `REQUEST_TOO_LARGE`."""
    with pytest.raises(RequestCompositionError) as raised:
        plan(
            request(
                contributors=(context("a", tokens=5_000), context("b", tokens=5_000)),
                input_budget=InputBudget(optimize_at=1_000),
            )
        )
    assert raised.value.code == "REQUEST_TOO_LARGE"
    assert "HISTORY_EXACT_REMEDY" not in str(raised.value.diagnostics)


def test_148_unprepared_summary_is_unavailable() -> None:
    """148: `summarizable` without an artifact is unavailable -> REPRESENTATION_UNAVAILABLE."""
    docs = summarizable(context("docs", tokens=9_500))
    with pytest.raises(RequestCompositionError) as raised:
        plan(request(contributors=(docs,)))
    assert raised.value.code == "REPRESENTATION_UNAVAILABLE"
    assert raised.value.diagnostics["unavailable"] == ["docs"]
    codes = [item["code"] for item in raised.value.diagnostics["items"]]  # type: ignore[union-attr, index]
    assert "REPRESENTATION_CAPABILITY_UNAVAILABLE" in codes
    # When it fits anyway, the unprepared rung is simply not needed.
    assert (
        plan(request(contributors=(summarizable(context("docs", tokens=500)),))).receipt.adaptations
        == ()
    )
    prepared = summarizable(context("docs", tokens=9_500), summary_tokens=400, artifact_id="sum-1")
    sealed = plan(request(contributors=(prepared,)))
    assert [a.representation for a in sealed.receipt.adaptations] == ["summary"]
    assert sealed.inspection.artifacts[0].artifact_id == "sum-1"


def test_149_each_step_links_to_the_previous_request() -> None:
    """149: each tool-loop step gets its own receipt linked by `previous_request_id`."""
    first = plan(request(request_id="step-0", history=turns(1)))
    second = plan(
        request(
            request_id="step-1",
            history=turns(2),
            previous_request_id=first.receipt.id,
            epoch=first.epoch,
        )
    )
    assert first.receipt.previous_request_id is None
    assert second.receipt.id == "step-1"
    assert second.receipt.previous_request_id == "step-0"
    assert second.inspection.linked_request_ids == ("step-0",)


def test_150_a_transport_retry_reuses_the_sealed_request() -> None:
    """150: a retry reuses the sealed plan; its retry count is a runtime fact added later."""
    req = request(history=turns(3), contributors=(droppable(context("faq", tokens=100)),))
    sealed = plan(req)
    again = plan(req)
    assert again.model_dump_json() == sealed.model_dump_json()
    retried = with_runtime_facts(sealed.inspection, retry_count=2)
    assert retried.retry_count == 2
    assert sealed.inspection.retry_count == 0
    # The plan is sealed before any try: the runtime stores the count once retries happen.
    assert sealed.receipt.retry_count == 0


@pytest.mark.parametrize(
    "contributors",
    [
        (context("a", tokens=1), context("a", tokens=2)),
        (prefer(context("a", tokens=1), context("b", tokens=1)), context("b", tokens=2)),
        (prefer(context("a", tokens=1), context("a", tokens=1)),),
        (
            context("a", tokens=1, tools=(Tool(name="t"),)),
            context("b", tokens=1, tools=(Tool(name="t"),)),
        ),
    ],
    ids=["contributor-ids", "alternative-vs-contributor", "alternative-vs-primary", "tools"],
)
def test_colliding_ids_or_tools_are_invalid(contributors: tuple[Contributor, ...]) -> None:
    with pytest.raises(RequestCompositionError) as raised:
        plan(request(contributors=contributors))
    assert raised.value.code == "INVALID_COMPOSITION"


def test_message_placed_sources_add_message_framing() -> None:
    from planner import MessageFormat

    fmt = MessageFormat(
        per_message=5, per_tool_call=0, per_tool_result=0, tools_preamble=0, reply_priming=0
    )
    unit = summarizable(
        context("a", tokens=100, placement="message"),
        context("b", tokens=100, placement="message"),
        id="ab",
        summary_tokens=20,
    )
    full = plan(request(contributors=(unit,), message_format=fmt))
    assert full.input_tokens == 200 + 2 * 5
    summarised = plan(
        request(contributors=(unit,), message_format=fmt, input_budget=InputBudget(max=100))
    )
    assert summarised.input_tokens == 20 + 5
    in_system = plan(request(contributors=(context("s", tokens=100),), message_format=fmt))
    assert in_system.input_tokens == 100 + 5  # the system message's own framing
