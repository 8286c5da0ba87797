"""Summary preparation partitioning (behaviours 122-125, pure side)."""

from __future__ import annotations

import pytest

from planner import (
    ConfigurationError,
    HistoryItem,
    summary_calls,
    summary_chunks,
)
from planner.summaries import SUMMARY_CHUNK_TOKENS, SUMMARY_CHUNK_UNITS
from tests.planner.helpers import turns


def test_122_a_small_prefix_is_one_chunk_and_one_adaptive_call() -> None:
    """122: <= 4,000 tokens and <= 8 groups -> one chunk, one adaptive call."""
    chunks = summary_chunks(turns(8, tokens=200))
    assert len(chunks) == 1
    assert chunks[0].units == 8
    assert summary_calls("adaptive", len(chunks)) == 1


def test_122_chunks_close_on_tokens_or_units() -> None:
    by_units = summary_chunks(turns(9, tokens=10))
    assert [c.units for c in by_units] == [8, 1]
    by_tokens = summary_chunks(turns(5, tokens=900))  # 1,800 per group
    assert [c.units for c in by_tokens] == [2, 2, 1]
    assert summary_calls("adaptive", len(by_tokens)) == 3 + 1


def test_an_oversized_group_is_never_split() -> None:
    chunks = summary_chunks(turns(1, tokens=5_000) + turns(1, tokens=10, prefix="n"))
    assert [c.message_ids for c in chunks] == [("u0", "a0"), ("nu0", "na0")]


def test_leading_system_prefix_is_one_unit() -> None:
    system = tuple(
        HistoryItem(id=f"s{i}", role="system", group_id=f"sys{i}", tokens=1) for i in range(3)
    )
    chunks = summary_chunks(system + turns(7))
    assert len(chunks) == 1
    assert chunks[0].units == 8
    assert chunks[0].message_ids[:3] == ("s0", "s1", "s2")


def test_123_hierarchical_over_twenty_chunks_makes_24_calls() -> None:
    """123: 20 leaves, ceil(20/8) = 3 reductions, then 1 final call."""
    assert summary_calls("hierarchical", 20) == 24
    assert summary_calls("adaptive", 20) == 24
    assert summary_calls("hierarchical", 1) == 1


def test_124_rolling_makes_one_call_per_chunk() -> None:
    """124: rolling over n chunks makes n sequential calls."""
    assert summary_calls("rolling", 7) == 7


def test_125_regenerate_makes_one_call_over_a_prefix_of_one_chunk() -> None:
    """125: regenerate makes exactly one support call, over the whole prefix.

    Chunks are what one support call may take, so a prefix of several cannot be one call:
    it is prepared hierarchically instead (the reference would send a call the summary
    model cannot hold).
    """
    assert summary_calls("regenerate", 1) == 1
    assert summary_calls("regenerate", 1, new_chunks=1) == 1  # an earlier summary is no use
    assert summary_calls("regenerate", 20) == summary_calls("hierarchical", 20) == 24
    assert summary_calls("regenerate", 0) == 0


def test_adaptive_regenerates_one_chunk_rolls_from_an_earlier_summary_else_hierarchical() -> None:
    assert summary_calls("adaptive", 1) == 1
    assert summary_calls("adaptive", 1, new_chunks=1) == 1  # one chunk: regenerated anyway
    assert summary_calls("adaptive", 20, new_chunks=3) == 3  # rolls over the new chunks
    assert summary_calls("adaptive", 20) == 24  # several chunks, nothing earlier
    assert summary_calls("rolling", 20, new_chunks=3) == 3
    assert summary_calls("hierarchical", 20, new_chunks=3) == 24  # never looks back


def test_the_original_fixed_chunks_are_available_as_limits() -> None:
    """`summary_chunks`' defaults are the original 4,000-token, 8-unit chunks."""
    assert (SUMMARY_CHUNK_TOKENS, SUMMARY_CHUNK_UNITS) == (4_000, 8)
    unbounded = summary_chunks(turns(30, tokens=10), max_units=None)
    assert [c.units for c in unbounded] == [30]


def test_invalid_strategy_or_count() -> None:
    with pytest.raises(ConfigurationError):
        summary_calls("handmade", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        summary_calls("rolling", -1)
    with pytest.raises(TypeError):
        summary_calls("adaptive", 3, new_chunks=-1)
