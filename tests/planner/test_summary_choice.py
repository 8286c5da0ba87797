"""How a summary is chosen (`planner.summary_choice`), decision by decision."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest

from planner import (
    DerivedBudget,
    HistorySummary,
    InputBudget,
    ManagedHistory,
    Preparation,
    background_preparations,
    derive_budget,
    inline_preparations,
)
from planner.projection import Span
from planner.summary_choice import (
    ChunkLimits,
    PreparationKey,
    chunk_limits,
    failure_refresh,
    folds_earlier_summary,
    inline_summary_need,
    longest_prefix_summary,
    maintenance,
    maintenance_watermark,
    miss_preparations,
    needs_fresh_summary,
    preparation_key,
    preparation_strategy,
    summary_missing,
    summary_model,
    unprepared_summary,
)
from planner.summary_rung import Managed, SummaryTarget
from tests.planner.helpers import EXACT
from vocabulary.details import ErrorDetails
from vocabulary.errors import CruxError, RequestCompositionError, ThreadError

OnMiss = Literal["inline", "recent-only", "fail"]


@dataclass(frozen=True)
class Stored:
    """A stored summary as storage returns it (only where it ends matters here)."""

    through_id: str


def budget(max_tokens: int, optimize_at: int | None = None) -> DerivedBudget:
    return derive_budget(EXACT, InputBudget(max=max_tokens, optimize_at=optimize_at))


def facts(
    *,
    on_miss: OnMiss = "inline",
    covers: int | None = None,
    refresh_due: bool = True,
    position: int | None = 11,
    next_position: int | None = 13,
) -> Managed:
    """A request whose summary should cover 12 messages now and 14 after this turn."""
    stored = None if covers is None else HistorySummary(artifact_id="hs", tokens=5, covers=covers)
    return Managed(
        policy=ManagedHistory(recent_messages=4, on_miss=on_miss, summary=stored),
        spans=(),
        suffix=Span(6, False, content=40, structure=0, messages=4, groups=2),
        framing=3,
        stale=False,
        refresh_due=refresh_due,
        target=SummaryTarget(12, "a5", position),
        next_target=SummaryTarget(14, "a6", next_position),
    )


def rejected(*needs: Preparation) -> RequestCompositionError:
    return RequestCompositionError(
        "REPRESENTATION_UNAVAILABLE",
        "does not fit",
        diagnostics={"preparations": [need.model_dump() for need in needs]},
    )


INLINE = Preparation(contributor="history", when="inline", prefix_messages=12, through_id="a5")
LATER = INLINE.model_copy(update={"when": "after-response"})

# -- 1. identity and candidates ------------------------------------------------------------

SUPPORT_MODEL: dict[str, tuple[str | None, str]] = {
    "configured model": ("openai:gpt-4o-mini", "openai:gpt-4o-mini"),
    "defaults to the response model": (None, "openai:gpt-4o"),
}


@pytest.mark.parametrize("case", SUPPORT_MODEL)
def test_summary_model(case: str) -> None:
    configured, expected = SUPPORT_MODEL[case]
    assert summary_model(configured, "openai:gpt-4o") == expected


PATH = ("u0", "a0", "u1", "a1", "u2", "a2")
RANKING: dict[str, tuple[tuple[str, ...], str | None]] = {
    "nothing stored": ((), None),
    "one candidate": (("a0",), "a0"),
    "the longest prefix wins, whatever the order": (("a0", "a2", "a1"), "a2"),
    "a summary off the path is ignored": (("x9", "a1"), "a1"),
    "only off-path summaries": (("x9",), None),
}


@pytest.mark.parametrize("case", RANKING)
def test_longest_prefix_summary(case: str) -> None:
    stored, expected = RANKING[case]
    chosen = longest_prefix_summary(PATH, [Stored(through_id) for through_id in stored])
    assert (chosen.through_id if chosen else None) == expected


# (strategy, chunks of the prefix, looks for an earlier summary, one found, what runs)
STRATEGIES: dict[str, tuple[str, int, bool, bool, str]] = {
    "adaptive regenerates one chunk": ("adaptive", 1, False, False, "regenerate"),
    "adaptive regenerates one chunk, earlier or not": ("adaptive", 1, False, True, "regenerate"),
    "adaptive folds several chunks into an earlier summary": ("adaptive", 3, True, True, "rolling"),
    "adaptive goes hierarchical without one": ("adaptive", 3, True, False, "hierarchical"),
    "rolling stays rolling": ("rolling", 3, True, False, "rolling"),
    "rolling over one chunk": ("rolling", 1, True, True, "rolling"),
    "regenerate is one call over one chunk": ("regenerate", 1, False, True, "regenerate"),
    "regenerate beyond one call is hierarchical": ("regenerate", 3, False, False, "hierarchical"),
    "hierarchical never looks back": ("hierarchical", 3, False, True, "hierarchical"),
    "hierarchical over one chunk": ("hierarchical", 1, False, False, "hierarchical"),
}


@pytest.mark.parametrize("case", STRATEGIES)
def test_preparation_strategy(case: str) -> None:
    strategy, chunks, folds, has_earlier, runs = STRATEGIES[case]
    assert folds_earlier_summary(strategy, chunks=chunks) is folds
    assert preparation_strategy(strategy, chunks=chunks, has_earlier=has_earlier) == runs


# (strategy, one call's tokens, asked tokens, asked units) -> limits
LIMITS: dict[str, tuple[str, int, int | None, int | None, ChunkLimits]] = {
    "by default one call's tokens, units unbounded": (
        "adaptive",
        900,
        None,
        None,
        ChunkLimits(900, None),
    ),
    "hierarchical bounds units by default": ("hierarchical", 900, None, None, ChunkLimits(900, 8)),
    "the original fixed chunks": ("adaptive", 9_000, 4_000, 8, ChunkLimits(4_000, 8)),
    "never more than one call takes": ("rolling", 900, 4_000, None, ChunkLimits(900, None)),
    "units alone": ("hierarchical", 900, None, 3, ChunkLimits(900, 3)),
}


@pytest.mark.parametrize("case", LIMITS)
def test_chunk_limits(case: str) -> None:
    strategy, call, tokens, units, expected = LIMITS[case]
    limits = chunk_limits(strategy, call_tokens=call, chunk_tokens=tokens, chunk_units=units)
    assert limits == expected


# -- 4. the miss policy --------------------------------------------------------------------

MISSING: dict[str, tuple[OnMiss, bool, bool]] = {
    "inline, refresh due": ("inline", True, True),
    "fail, refresh due": ("fail", True, True),
    "recent-only degrades instead": ("recent-only", True, False),
    "a usable summary is not missing": ("inline", False, False),
}


@pytest.mark.parametrize("case", MISSING)
def test_summary_missing(case: str) -> None:
    on_miss, due, expected = MISSING[case]
    assert summary_missing(facts(on_miss=on_miss, refresh_due=due)) is expected


# max 1,000; everything else at its smallest 500, suffix 40, framing 3: room 457.
MISS: dict[str, tuple[dict[str, Any], int, tuple[tuple[str, int], ...]]] = {
    "inline prepares before dispatch": ({"on_miss": "inline"}, 500, (("inline", 457),)),
    "fail starts the same summary without waiting": (
        {"on_miss": "fail"},
        500,
        (("after-response", 457),),
    ),
    "recent-only prepares nothing": ({"on_miss": "recent-only"}, 500, ()),
    "nothing when no refresh is due": ({"refresh_due": False}, 500, ()),
    "nothing when the boundary cannot be named": ({"position": None}, 500, ()),
    "no room left is zero, not negative": ({}, 990, (("inline", 0),)),
}


@pytest.mark.parametrize("case", MISS)
def test_miss_preparations(case: str) -> None:
    fields, rest, expected = MISS[case]
    needs = miss_preparations(facts(**fields), budget(1_000), rest)
    assert tuple((need.when, need.max_summary_tokens) for need in needs) == expected
    # Both aim at this request's suffix, never the next one.
    assert all((need.prefix_messages, need.through_position) == (12, 11) for need in needs)


# -- 5. maintenance ------------------------------------------------------------------------

WATERMARKS: dict[str, tuple[int, int | None, int]] = {
    "optimize_at below 85 % of max": (1_000, 600, 600),
    "no optimize_at: 85 % of max": (1_000, None, 850),
    "optimize_at above 85 % of max": (1_000, 950, 850),
}


@pytest.mark.parametrize("case", WATERMARKS)
def test_maintenance_watermark(case: str) -> None:
    max_tokens, optimize_at, expected = WATERMARKS[case]
    assert maintenance_watermark(budget(max_tokens, optimize_at)) == expected


# Watermark 600; everything else at its smallest 100, suffix 40, framing 3: room 457.
MAINTENANCE: dict[str, tuple[dict[str, Any], int, int | None]] = {
    "past the watermark without a summary": ({}, 601, 457),
    "at the watermark nothing is started": ({}, 600, None),
    "a summary short of the next prefix is refreshed": ({"covers": 12}, 700, 457),
    "a summary through the next prefix is enough": ({"covers": 14}, 700, None),
    "recent-only never pays for a support call": ({"on_miss": "recent-only"}, 700, None),
    "an unnamed next boundary cannot be prepared": ({"next_position": None}, 700, None),
}


@pytest.mark.parametrize("case", MAINTENANCE)
def test_maintenance(case: str) -> None:
    fields, total, room = MAINTENANCE[case]
    need = maintenance(facts(**fields), budget(1_000, 600), total, 100)
    if room is None:
        assert need is None
        return
    assert need is not None
    assert (need.when, need.max_summary_tokens) == ("after-response", room)
    # Maintenance aims at the suffix the next request keeps.
    assert (need.prefix_messages, need.through_id, need.through_position) == (14, "a6", 13)


# -- 6. what the runtime does --------------------------------------------------------------


def test_preparations_are_read_back_from_the_error_by_when() -> None:
    error = rejected(INLINE, LATER)
    assert inline_preparations(error) == (INLINE,)
    assert background_preparations(error) == (LATER,)
    assert inline_preparations(RequestCompositionError("REQUEST_TOO_LARGE", "no")) == ()


INLINE_NEED: dict[str, tuple[tuple[Preparation, ...], bool, bool, bool]] = {
    "a Thread's missing summary is prepared": ((INLINE,), True, False, True),
    "only once per step": ((INLINE,), True, True, False),
    "no history source to summarise": ((INLINE,), False, False, False),
    "nothing asked": ((), True, False, False),
    "a background refresh is not awaited": ((LATER,), True, False, False),
}


@pytest.mark.parametrize("case", INLINE_NEED)
def test_inline_summary_need(case: str) -> None:
    needs, thread, prepared, expected = INLINE_NEED[case]
    need = inline_summary_need(rejected(*needs), summarisable=thread, summary_prepared=prepared)
    assert (need is not None) is expected


REFRESH: dict[str, tuple[tuple[Preparation, ...], bool, Preparation | None]] = {
    "fail starts the refresh": ((LATER,), True, LATER),
    "not without a history source": ((LATER,), False, None),
    "an inline need is not a refresh": ((INLINE,), True, None),
}


@pytest.mark.parametrize("case", REFRESH)
def test_failure_refresh(case: str) -> None:
    needs, thread, expected = REFRESH[case]
    assert failure_refresh(rejected(*needs), summarisable=thread) == expected


OTHER = INLINE.model_copy(update={"through_id": "a7", "prefix_messages": 16})
PREPARED: set[PreparationKey] = {preparation_key(INLINE)}
FRESH: dict[str, tuple[CruxError | None, bool, bool, bool]] = {
    "a later step needs another summary": (rejected(OTHER), True, False, True),
    "the same summary is never prepared twice": (rejected(INLINE), True, False, False),
    "not twice for one step": (rejected(OTHER), True, True, False),
    "nothing was prepared: the table already asked": (rejected(OTHER), False, False, False),
    "no summary asked": (rejected(), True, False, False),
    "another failure": (ThreadError("identity_conflict", "moved"), True, False, False),
    "the provider's own failure": (None, True, False, False),
}


@pytest.mark.parametrize("case", FRESH)
def test_needs_fresh_summary(case: str) -> None:
    error, summary_prepared, this_step, expected = FRESH[case]
    fresh = needs_fresh_summary(
        error,
        summary_prepared=summary_prepared,
        prepared_this_step=this_step,
        prepared=PREPARED,
    )
    assert fresh is expected


UNPREPARED: dict[str, tuple[str | None, ErrorDetails, dict[str, object] | None]] = {
    "a provider refusal": (
        "ProviderHTTPError",
        ErrorDetails(code="invalid_request_error", provider="openai", status=400, model="m:x"),
        {
            "type": "ProviderHTTPError",
            "code": "invalid_request_error",
            "provider": "openai",
            "status": 400,
            "model": "m:x",
        },
    ),
    "an unusable reply": (
        "ProviderResponseError",
        ErrorDetails(provider="openai"),
        {"type": "ProviderResponseError", "provider": "openai"},
    ),
    "a support call that cannot fit": (
        "RequestCompositionError",
        ErrorDetails(code="REQUEST_TOO_LARGE", diagnostics={"items": []}),
        {"type": "RequestCompositionError", "code": "REQUEST_TOO_LARGE"},
    ),
    "a storage outage stands as it is": ("StorageUnavailableError", ErrorDetails(), None),
    "a deleted Thread stands as it is": ("ThreadError", ErrorDetails(code="deleted"), None),
    "no type at all": (None, ErrorDetails(), None),
}


@pytest.mark.parametrize("case", UNPREPARED)
def test_unprepared_summary(case: str) -> None:
    error_type, details, cause = UNPREPARED[case]
    error = unprepared_summary(error_type, details)
    if cause is None:
        assert error is None
        return
    assert error is not None and error.code == "REPRESENTATION_UNAVAILABLE"
    assert error.diagnostics["cause"] == cause
    assert "\n" not in str(error) and "on_miss='recent-only'" in str(error)
