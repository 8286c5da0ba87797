"""The summary rung of one request (`planner.summary_rung`): split, alignment, staleness."""

from __future__ import annotations

from typing import Any

import pytest

from planner import (
    HistoryAggregate,
    HistoryItem,
    HistorySummary,
    InputBudget,
    ManagedHistory,
    derive_budget,
)
from planner.history import scan_history
from planner.projection import Projector, Span
from planner.summary_rung import (
    committed_turn,
    expected_summary_size,
    is_stale,
    managed_ladder,
    next_suffix_start,
    recent_caps,
    summary_boundary,
    summary_warnings,
)
from tests.planner.helpers import EXACT, ZERO_FORMAT, turns

SYSTEM = (HistoryItem(id="s0", role="system", group_id="sys", tokens=5),)


def projector(items: tuple[HistoryItem, ...], older: HistoryAggregate | None = None) -> Projector:
    older = older or HistoryAggregate()
    scan = scan_history(
        items, has_older=older.count > 0, request_id="r", prefix_items=older.prefix_items
    )
    return Projector(items, older, scan, ZERO_FORMAT)


def summary(covers: int, **fields: Any) -> HistorySummary:
    return HistorySummary(artifact_id="hs", tokens=7, covers=covers, **fields)


RECENT_CAPS: dict[str, tuple[ManagedHistory, int, tuple[int | None, int | None]]] = {
    "no caps: 40 % of max in tokens": (ManagedHistory(), 1_000, (None, 400)),
    "no caps, tiny max: at least one token": (ManagedHistory(), 2, (None, 1)),
    "a message cap alone is kept": (ManagedHistory(recent_messages=6), 1_000, (6, None)),
    "both caps are kept": (
        ManagedHistory(recent_messages=6, recent_tokens=90),
        1_000,
        (6, 90),
    ),
}


@pytest.mark.parametrize("case", RECENT_CAPS)
def test_recent_caps(case: str) -> None:
    policy, strict, expected = RECENT_CAPS[case]
    assert recent_caps(policy, strict) == expected


# Five (user, assistant) groups: group boundaries at 0, 2, 4, 6, 8, 10 listed messages.
BOUNDARIES: dict[str, tuple[tuple[HistoryItem, ...], HistoryAggregate | None, int, int | None]] = {
    "ends at a group boundary": (turns(5), None, 4, 2),
    "ends at the last message": (turns(5), None, 10, 5),
    "ends inside a group": (turns(5), None, 3, None),
    "ends past the history": (turns(5), None, 12, None),
    "covers nothing": (turns(5), None, 0, 0),
    "system prefix is not counted": (SYSTEM + turns(5), None, 2, 2),
    "ends exactly at the aggregate": (turns(3), HistoryAggregate(count=4, tokens=40), 4, 0),
    "ends after the aggregate": (turns(3), HistoryAggregate(count=4, tokens=40), 6, 1),
    "ends inside the aggregate": (turns(3), HistoryAggregate(count=4, tokens=40), 2, None),
}


@pytest.mark.parametrize("case", BOUNDARIES)
def test_summary_boundary(case: str) -> None:
    """A summary replaces whole groups and the whole aggregate, or cannot be placed."""
    items, older, covers, expected = BOUNDARIES[case]
    assert summary_boundary(summary(covers), projector(items, older)) == expected


STALENESS: dict[str, tuple[int, int | None, int, bool]] = {
    "through the suffix start": (4, 2, 4, False),
    "past the suffix start": (6, 3, 4, False),
    "before the suffix start": (2, 1, 4, True),
    "cannot be placed": (4, None, 4, True),
}


@pytest.mark.parametrize("case", STALENESS)
def test_is_stale(case: str) -> None:
    covers, boundary, prefix_messages, expected = STALENESS[case]
    assert is_stale(summary(covers), boundary, prefix_messages) is expected


COMMITTED: dict[str, tuple[int | None, int, tuple[int, int]]] = {
    "unknown turn: user plus answer": (None, 0, (2, 0)),
    "empty turn counts as one message": (0, 10, (2, 20)),
    "tool rounds add their messages": (3, 50, (4, 100)),
}


@pytest.mark.parametrize("case", COMMITTED)
def test_committed_turn(case: str) -> None:
    """The answer is guessed as large as the question."""
    messages, tokens, expected = COMMITTED[case]
    assert committed_turn(messages, tokens) == expected


def test_expected_summary_size_is_suffix_plus_expected_summary_plus_framing() -> None:
    suffix = Span(3, False, content=40, structure=6, messages=2, groups=1)
    policy = ManagedHistory(expected_summary_tokens=120)
    assert expected_summary_size(suffix, policy, 3) == 46 + 120 + 3


# Eight groups of 20 tokens (two 10-token messages each).
NEXT_START: dict[str, tuple[tuple[int | None, int | None], int, tuple[int, int], int]] = {
    "the committed turn pushes one group out": ((4, None), 6, (2, 0), 7),
    "a turn filling the cap leaves nothing raw": ((2, None), 7, (2, 0), 8),
    "a token cap works the same way": ((None, 50), 6, (2, 20), 7),
    "never earlier than this request's suffix": ((20, None), 5, (2, 0), 5),
}


@pytest.mark.parametrize("case", NEXT_START)
def test_next_suffix_start(case: str) -> None:
    caps, first_group, turn, expected = NEXT_START[case]
    assert next_suffix_start(projector(turns(8)), caps, first_group, turn) == expected


def _ladder(policy: ManagedHistory, items: tuple[HistoryItem, ...] = turns(8)) -> Any:
    budget = derive_budget(EXACT, InputBudget(max=1_000))
    return managed_ladder(policy, projector(items), budget)


def test_a_suffix_holding_everything_offers_no_ladder() -> None:
    assert _ladder(ManagedHistory(recent_messages=40)) is None


LADDERS: dict[str, tuple[ManagedHistory, dict[str, Any]]] = {
    "missing summary: unprepared rung, refresh due": (
        ManagedHistory(recent_messages=4),
        {
            "kinds": ("full", "summary"),
            "available": (True, False),
            "stale": False,
            "refresh_due": True,
        },
    ),
    "summary through the suffix start: usable, nothing due": (
        ManagedHistory(recent_messages=4, summary=summary(12)),
        {
            "kinds": ("full", "summary"),
            "available": (True, True),
            "stale": False,
            "refresh_due": False,
        },
    ),
    "older summary: usable with the gap raw, stale": (
        ManagedHistory(recent_messages=4, summary=summary(8)),
        {
            "kinds": ("full", "summary"),
            "available": (True, True),
            "stale": True,
            "refresh_due": True,
        },
    ),
    "summary inside a group: unavailable, stale": (
        ManagedHistory(recent_messages=4, summary=summary(11)),
        {
            "kinds": ("full", "summary"),
            "available": (True, False),
            "stale": True,
            "refresh_due": True,
        },
    ),
    "recent-only adds the omitted rung": (
        ManagedHistory(recent_messages=4, on_miss="recent-only"),
        {
            "kinds": ("full", "summary", "omitted"),
            "available": (True, False, True),
            "stale": False,
            "refresh_due": True,
        },
    ),
}


@pytest.mark.parametrize("case", LADDERS)
def test_managed_ladder(case: str) -> None:
    policy, expected = LADDERS[case]
    ladder, facts, _ = _ladder(policy)
    assert ladder.kinds == expected["kinds"]
    assert tuple(rung.available for rung in ladder.rungs) == expected["available"]
    assert facts.stale is expected["stale"]
    assert facts.refresh_due is expected["refresh_due"]
    # The suffix keeps the newest two groups: the wanted summary ends just before it, and
    # the next request's (this turn committed) one group later.
    assert (facts.target.prefix_messages, facts.target.through_id) == (12, "a5")
    assert (facts.next_target.prefix_messages, facts.next_target.through_id) == (14, "a6")
    if facts.stale:
        assert facts.policy.summary.stale


def test_a_stale_summary_is_sized_with_its_uncovered_gap() -> None:
    """Covers 8 of 12 older messages: the summary plus 8 raw messages (10 tokens each)."""
    ladder, facts, _ = _ladder(ManagedHistory(recent_messages=4, summary=summary(8)))
    assert ladder.rungs[1].tokens == 7 + 80
    assert facts.spans[1].first_group == 4


WARNINGS: dict[str, tuple[HistorySummary, tuple[str, ...]]] = {
    "stored and fresh": (summary(4), ()),
    "stored and stale": (summary(4, stale=True), ("HISTORY_SUMMARY_STALE",)),
    "prepared inline": (summary(4, origin="inline"), ("HISTORY_SUMMARY_INLINE",)),
    "joined and stale": (
        summary(4, origin="joined", stale=True),
        ("HISTORY_SUMMARY_JOINED", "HISTORY_SUMMARY_STALE"),
    ),
}


@pytest.mark.parametrize("case", WARNINGS)
def test_summary_warnings(case: str) -> None:
    sent, codes = WARNINGS[case]
    assert tuple(warning.code for warning in summary_warnings(sent)) == codes
