"""Pure partitioning of a history prefix for summary preparation.

A summary support call must itself fit its model, so a long prefix is cut into chunks of
whole units: the leading system prefix is one unit and every causal group is one unit. A
chunk closes before a unit that would push it past its token limit, or once it holds its
unit limit; a single oversized unit still forms a chunk of its own (a group is never
split). The limits a preparation uses, and the strategy that runs over the chunks, are
decided in `planner.summary_choice` (step 7); how many support calls that makes follows
from the chunk count (`summary_calls`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from planner._base import FrozenModel
from planner.history import HistoryItem
from planner.summary_choice import (
    SUMMARY_CHUNK_TOKENS,
    SUMMARY_CHUNK_UNITS,
    preparation_strategy,
)
from vocabulary.errors import ConfigurationError

__all__ = [
    "SUMMARY_CHUNK_TOKENS",
    "SUMMARY_CHUNK_UNITS",
    "SUMMARY_REDUCE_BATCH",
    "Strategy",
    "SummaryChunk",
    "summary_calls",
    "summary_chunks",
]

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
    max_units: int | None = SUMMARY_CHUNK_UNITS,
) -> tuple[SummaryChunk, ...]:
    """Cut a prefix into chunks of whole units.

    Args:
        items: The prefix to summarise, oldest first, in whole causal groups.
        max_tokens: Chunk token limit.
        max_units: Chunk unit limit; `None` for no bound.

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
        full = max_units is not None and open_units >= max_units
        if open_units and (open_tokens + tokens > max_tokens or full):
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


def summary_calls(strategy: Strategy, chunks: int, *, new_chunks: int | None = None) -> int:
    """Return how many support calls a preparation makes over `chunks` chunks.

    The strategy that runs is `planner.summary_choice.preparation_strategy`'s:
    `regenerate` makes one call; `rolling` one per chunk it folds in (`new_chunks`, those
    after an earlier summary, else every chunk); `hierarchical` one per chunk, then
    reduces batches of `SUMMARY_REDUCE_BATCH` summaries until one remains. So `adaptive`
    is one call for a single chunk, `rolling` with an earlier summary, and hierarchical
    otherwise; `regenerate` over several chunks is hierarchical (one call cannot hold them).

    Args:
        strategy: The configured strategy.
        chunks: Chunks of the whole prefix.
        new_chunks: Chunks after the earlier summary a `rolling` or `adaptive` preparation
            folds into; `None` when there is none.

    Raises:
        ConfigurationError: For an unknown strategy or a negative chunk count.
    """
    for count in (chunks, new_chunks):
        if count is not None and (isinstance(count, bool) or count < 0):
            raise ConfigurationError("chunks must be a non-negative integer")
    if strategy not in ("adaptive", "regenerate", "rolling", "hierarchical"):
        raise ConfigurationError(f"unknown summary strategy {strategy!r}")
    if chunks == 0:
        return 0
    runs = preparation_strategy(strategy, chunks=chunks, has_earlier=new_chunks is not None)
    if runs == "regenerate":
        return 1
    if runs == "rolling":
        return chunks if new_chunks is None else new_chunks
    calls = level = chunks
    while level > 1:
        level = -(-level // SUMMARY_REDUCE_BATCH)
        calls += level
    return calls
