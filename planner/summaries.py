"""Pure partitioning of a history prefix for summary preparation.

A summary support call must itself fit its model, so a long prefix is cut into chunks of
whole units: the leading system prefix is one unit and every causal group is one unit. A
chunk closes before a unit that would push it past `SUMMARY_CHUNK_TOKENS`, or once it holds
`SUMMARY_CHUNK_UNITS` units; a single oversized unit still forms a chunk of its own (a
group is never split). How many support calls a strategy makes follows from the chunk count.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from planner._base import FrozenModel
from planner.history import HistoryItem
from vocabulary.errors import ConfigurationError

SUMMARY_CHUNK_TOKENS = 4_000
"""A chunk closes before a unit that would take it past this many content tokens."""

SUMMARY_CHUNK_UNITS = 8
"""A chunk holds at most this many units (causal groups, or the leading system prefix)."""

SUMMARY_REDUCE_BATCH = 8
"""Hierarchical summaries reduce at most this many summaries per call."""

Strategy = Literal["adaptive", "regenerate", "rolling", "hierarchical"]


class SummaryChunk(FrozenModel):
    """One chunk of a prefix to summarise, content-free.

    Attributes:
        message_ids: Ids of its messages, oldest first.
        tokens: Their content tokens.
        units: Units (groups) it holds.
    """

    message_ids: tuple[str, ...] = Field(min_length=1)
    tokens: int
    units: int


def summary_chunks(
    items: tuple[HistoryItem, ...],
    *,
    max_tokens: int = SUMMARY_CHUNK_TOKENS,
    max_units: int = SUMMARY_CHUNK_UNITS,
) -> tuple[SummaryChunk, ...]:
    """Cut a prefix into chunks of whole units.

    Args:
        items: The prefix to summarise, oldest first, in whole causal groups.
        max_tokens: Chunk token limit.
        max_units: Chunk unit limit.

    Returns:
        The chunks in order; empty for an empty prefix.
    """
    units: list[tuple[list[str], int]] = []
    leading = True
    current_group: str | None = None
    for item in items:
        if leading and item.role == "system":
            if not units:
                units.append(([], 0))
            units[0][0].append(item.id)
            units[0] = (units[0][0], units[0][1] + item.tokens)
            # A group mixing leading system and conversational messages stays one unit.
            current_group = item.group_id
            continue
        leading = False
        if item.group_id != current_group or not units:
            units.append(([], 0))
            current_group = item.group_id
        ids, tokens = units[-1]
        ids.append(item.id)
        units[-1] = (ids, tokens + item.tokens)
    chunks: list[SummaryChunk] = []
    open_ids: list[str] = []
    open_tokens = open_units = 0
    for ids, tokens in units:
        if open_units and (open_tokens + tokens > max_tokens or open_units >= max_units):
            chunks.append(
                SummaryChunk(message_ids=tuple(open_ids), tokens=open_tokens, units=open_units)
            )
            open_ids, open_tokens, open_units = [], 0, 0
        open_ids.extend(ids)
        open_tokens += tokens
        open_units += 1
    if open_units:
        chunks.append(
            SummaryChunk(message_ids=tuple(open_ids), tokens=open_tokens, units=open_units)
        )
    return tuple(chunks)


def summary_calls(strategy: Strategy, chunks: int) -> int:
    """Return how many support calls a strategy makes over `chunks` chunks.

    `regenerate` makes one call over the whole prefix; `rolling` one per chunk, each given
    the previous summary; `hierarchical` one per chunk, then reduces batches of
    `SUMMARY_REDUCE_BATCH` summaries until one remains; `adaptive` is `regenerate` for a
    single chunk and `hierarchical` otherwise.

    Raises:
        ConfigurationError: For an unknown strategy or a negative chunk count.
    """
    if isinstance(chunks, bool) or chunks < 0:
        raise ConfigurationError("chunks must be a non-negative integer")
    if chunks == 0:
        return 0
    if strategy == "regenerate" or (strategy == "adaptive" and chunks == 1):
        return 1
    if strategy == "rolling":
        return chunks
    if strategy not in ("adaptive", "hierarchical"):
        raise ConfigurationError(f"unknown summary strategy {strategy!r}")
    calls = level = chunks
    while level > 1:
        level = -(-level // SUMMARY_REDUCE_BATCH)
        calls += level
    return calls
