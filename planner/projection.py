"""History projection: which history ids a request sends, and what they cost.

Exact history sends everything. Recent history keeps the newest causal groups under soft
caps. Managed history offers the planner a ladder (`full`, `summary`, and `omitted` for
`recent-only`) as the first dimension of the fidelity vector, so every other elastic
contributor is reduced before history drops below `full`.

The aggregate of older messages (`HistoryAggregate`) cannot be split: recent projection
treats it as one oldest indivisible group, which keeps caps conservative.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from operator import attrgetter

from planner.history import HistoryAggregate, HistoryItem, HistoryScan, HistoryWarning
from planner.measure import MessageFormat

_ID = attrgetter("id")
_BOUNDARY = HistoryWarning(
    code="HISTORY_CAUSAL_BOUNDARY",
    message="a history cap was adjusted to keep a causal group whole",
)
_OVERFLOW = HistoryWarning(
    code="HISTORY_CAP_OVERFLOW",
    message="the newest causal group alone exceeds a history cap",
)


@dataclass(frozen=True, slots=True)
class Span:
    """A projected slice of history (internal).

    `first_group` is the oldest conversational group sent (groups before it, after the
    leading prefix, are left out); `include_older` says whether the aggregate is sent.
    """

    first_group: int
    include_older: bool
    content: int
    structure: int
    messages: int
    groups: int

    @property
    def tokens(self) -> int:
        """Content plus structure tokens."""
        return self.content + self.structure


class Projector:
    """Sizes and ids of history spans over one validated transcript (internal).

    Every size is computed in O(1) from the boundary sums of `HistoryScan`. `items` is
    empty for columnar input: spans are then reported as positions only (`ranges`).
    """

    def __init__(
        self,
        items: tuple[HistoryItem, ...],
        older: HistoryAggregate,
        scan: HistoryScan,
        fmt: MessageFormat,
        *,
        has_ids: bool = True,
    ) -> None:
        self.items = items
        self.older = older
        self.scan = scan
        self.fmt = fmt
        self.bounds = scan.group_starts
        self.listed = scan.group_starts[-1]
        """Listed messages (the aggregate excluded)."""
        self.has_ids = has_ids
        # At a group boundary every call made before it has been answered before it, so
        # each call brings one call's and one result's framing.
        self._per_call = fmt.per_tool_call + fmt.per_tool_result

    @property
    def group_count(self) -> int:
        """Listed causal groups."""
        return self.scan.group_count

    @property
    def older_groups(self) -> int:
        """Causal groups of the aggregate (one when it does not say, none without it)."""
        if not self.older.count:
            return 0
        return self.older.groups or 1

    @property
    def prefix_items(self) -> int:
        """Messages in the leading system prefix."""
        return self.bounds[self.scan.prefix_groups]

    def group_size(self, g: int) -> int:
        """Messages in group `g`."""
        return self.bounds[g + 1] - self.bounds[g]

    def group_tokens(self, g: int) -> int:
        """Content tokens of group `g`."""
        return self.scan.tokens_before[g + 1] - self.scan.tokens_before[g]

    def _between(self, start: int, end: int) -> tuple[int, int]:
        scan = self.scan
        content = scan.tokens_before[end] - scan.tokens_before[start]
        messages = self.bounds[end] - self.bounds[start]
        calls = scan.calls_before[end] - scan.calls_before[start]
        return content, self.fmt.per_message * messages + self._per_call * calls

    def span(self, first_group: int, include_older: bool) -> Span:
        """Size the leading prefix plus groups from `first_group` (and maybe the aggregate)."""
        prefix = self.scan.prefix_groups
        count = self.group_count
        first = max(first_group, prefix)
        head_content, head_structure = self._between(0, prefix)
        tail_content, tail_structure = self._between(first, count)
        content = head_content + tail_content
        structure = head_structure + tail_structure
        messages = self.listed - self.bounds[first] + self.bounds[prefix]
        groups = count - first + prefix
        older = include_older and self.older.count > 0
        if older:
            content += self.older.tokens
            structure += self.fmt.per_message * self.older.count + self._per_call * self.older.calls
            messages += self.older.count
            groups += self.older_groups
        return Span(first, older, content, structure, messages, groups)

    def full(self) -> Span:
        """Everything, aggregate included."""
        return self.span(0, True)

    def ids(self, span: Span) -> tuple[str, ...]:
        """Ids of the listed items a span sends, oldest first (the aggregate is not listed).

        Empty for columnar input, which carries no ids (see `ranges`).
        """
        if not self.has_ids:
            return ()
        prefix_end = self.prefix_items
        start = self.bounds[span.first_group]
        if start <= prefix_end:
            return tuple(map(_ID, self.items))
        return tuple(map(_ID, self.items[:prefix_end])) + tuple(map(_ID, self.items[start:]))

    def position(self, listed: int) -> int:
        """Position in the history source of listed message `listed` (or of its end)."""
        return listed if listed < self.prefix_items else listed + self.older.count

    def ranges(self, span: Span) -> tuple[tuple[int, int], ...]:
        """Half-open position ranges a span sends, oldest first, aggregate included."""
        prefix_end = self.prefix_items
        older = self.older.count
        start = max(self.bounds[span.first_group], prefix_end)
        spans = (
            ((0, self.listed + older),)
            if span.include_older
            else ((0, prefix_end), (start + older, self.listed + older))
        )
        merged: list[tuple[int, int]] = []
        for low, high in spans:
            if high <= low:
                continue
            if merged and merged[-1][1] == low:
                merged[-1] = (merged[-1][0], high)
            else:
                merged.append((low, high))
        return tuple(merged)

    def through(self, listed_start: int) -> tuple[str | None, int | None]:
        """The message just before listed message `listed_start`, past the system prefix.

        Returns:
            Its id (`None` without ids) and its position, or `(None, None)` when no
            conversational message precedes it.
        """
        if listed_start > self.prefix_items:
            position = self.position(listed_start) - 1
            return (self.items[listed_start - 1].id if self.has_ids else None), position
        if self.older.count == 0:
            return None, None
        # Listed input names the aggregate's last message; without that name, an aggregate
        # read by a reader that states no ids cannot be summarised by id.
        position = self.prefix_items + self.older.count - 1
        if self.has_ids:
            last = self.older.last_id
            return last, (position if last is not None else None)
        return None, position

    def recent(
        self, messages: int | None, tokens: int | None
    ) -> tuple[Span, tuple[HistoryWarning, ...]]:
        """Select the newest causal groups under soft caps (content tokens only).

        A group that would push the total past a cap stops the walk
        (`HISTORY_CAUSAL_BOUNDARY`); the newest group is kept even if it alone exceeds a cap
        (`HISTORY_CAP_OVERFLOW`); the walk also stops once a cap is reached exactly. The
        aggregate of older messages is the oldest unit and is taken whole or not at all.

        Suffix sums only grow as the walk goes back, so where it stops is found by binary
        search on the boundary sums: O(log groups), whatever the history's length.
        """
        bounds, before = self.bounds, self.scan.tokens_before
        count, lowest = self.group_count, self.scan.prefix_groups
        caps = [
            (column, cap)
            for column, cap in ((bounds, messages), (before, tokens))
            if cap is not None
        ]
        warnings: list[HistoryWarning] = []
        first = count
        if count > lowest:
            # Newest first: group `g` is taken while taking it stays within every cap and no
            # cap was reached before it; the newest group is taken in any case.
            start = lowest
            for column, cap in caps:
                target = column[count] - cap
                start = max(
                    start,
                    bisect_left(column, target, lowest, count + 1),
                    bisect_right(column, target, lowest, count + 1) - 1,
                )
            first = min(start, count - 1)
            if any(column[count] - column[count - 1] > cap for column, cap in caps):
                warnings.append(_OVERFLOW)
        # What stopped the walk before group `first - 1` (or before the aggregate)?
        reached = any(column[count] - column[first] >= cap for column, cap in caps)
        include_older = False
        if first > lowest:
            if not reached:
                warnings.append(_BOUNDARY)
        elif self.older.count > 0:
            over = (
                messages is not None and bounds[count] - bounds[first] + self.older.count > messages
            ) or (tokens is not None and before[count] - before[first] + self.older.tokens > tokens)
            if first == count:
                # The aggregate is the newest unit: taken even alone over a cap.
                include_older = True
                if over:
                    warnings.append(_OVERFLOW)
            elif not reached:
                if over:
                    warnings.append(_BOUNDARY)
                else:
                    include_older = True
        if include_older:
            first = 0
        return self.span(first, include_older), tuple(warnings)
