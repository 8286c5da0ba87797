"""History projection: which history ids a request sends, and what they cost.

Exact history sends everything. Recent history keeps the newest causal groups under soft
caps. Managed history offers the planner a ladder (`full`, `summary`, and `omitted` for
`recent-only`) as the first dimension of the fidelity vector, so every other elastic
contributor is reduced before history drops below `full`.

The aggregate of older messages (`HistoryAggregate`) cannot be split: recent projection
treats it as one oldest indivisible group, which keeps caps conservative.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from planner.history import HistoryAggregate, HistoryItem, HistoryScan, HistoryWarning
from planner.measure import MessageFormat

_ID = attrgetter("id")


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
    """Sizes and ids of history spans over one validated transcript (internal)."""

    def __init__(
        self,
        items: tuple[HistoryItem, ...],
        older: HistoryAggregate,
        scan: HistoryScan,
        fmt: MessageFormat,
    ) -> None:
        self.items = items
        self.older = older
        self.scan = scan
        self.fmt = fmt
        self.bounds = (*scan.group_starts, len(items))
        # Suffix sums over groups make every span size O(1) after one linear pass.
        count = len(scan.group_starts)
        content = [0] * (count + 1)
        structure = [0] * (count + 1)
        for g in range(count - 1, -1, -1):
            size = self.bounds[g + 1] - self.bounds[g]
            calls, results = scan.group_calls[g]
            content[g] = content[g + 1] + scan.group_tokens[g]
            structure[g] = structure[g + 1] + (
                fmt.per_message * size + fmt.per_tool_call * calls + fmt.per_tool_result * results
            )
        self._content = content
        self._structure = structure

    @property
    def group_count(self) -> int:
        """Listed causal groups."""
        return len(self.scan.group_starts)

    @property
    def prefix_items(self) -> int:
        """Messages in the leading system prefix."""
        return self.bounds[self.scan.prefix_groups]

    def group_size(self, g: int) -> int:
        """Messages in group `g`."""
        return self.bounds[g + 1] - self.bounds[g]

    def span(self, first_group: int, include_older: bool) -> Span:
        """Size the leading prefix plus groups from `first_group` (and maybe the aggregate)."""
        prefix = self.scan.prefix_groups
        first = max(first_group, prefix)
        content = self._content[first] + self._content[0] - self._content[prefix]
        structure = self._structure[first] + self._structure[0] - self._structure[prefix]
        messages = len(self.items) - self.bounds[first] + self.bounds[prefix]
        groups = self.group_count - first + prefix
        if include_older and self.older.count:
            content += self.older.tokens
            structure += self.fmt.per_message * self.older.count
            messages += self.older.count
            groups += 1
        older = include_older and self.older.count > 0
        return Span(first, older, content, structure, messages, groups)

    def full(self) -> Span:
        """Everything, aggregate included."""
        return self.span(0, True)

    def ids(self, span: Span) -> tuple[str, ...]:
        """Ids of the listed items a span sends, oldest first (the aggregate is not listed)."""
        prefix_end = self.prefix_items
        start = self.bounds[span.first_group] if span.first_group > 0 else 0
        if start <= prefix_end:
            return tuple(map(_ID, self.items))
        return tuple(map(_ID, self.items[:prefix_end])) + tuple(map(_ID, self.items[start:]))

    def recent(
        self, messages: int | None, tokens: int | None
    ) -> tuple[Span, tuple[HistoryWarning, ...]]:
        """Select the newest causal groups under soft caps (content tokens only).

        A group that would push the total past a cap stops the walk
        (`HISTORY_CAUSAL_BOUNDARY`); the newest group is kept even if it alone exceeds a cap
        (`HISTORY_CAP_OVERFLOW`); the walk also stops once a cap is reached exactly.
        """
        warnings: list[HistoryWarning] = []
        count = total = 0
        first = self.group_count
        units: list[tuple[int, int, int]] = [
            (g, self.group_size(g), self.scan.group_tokens[g])
            for g in range(self.group_count - 1, self.scan.prefix_groups - 1, -1)
        ]
        if self.older.count:
            units.append((-1, self.older.count, self.older.tokens))
        include_older = False
        for selected, (g, size, unit_tokens) in enumerate(units):
            over = (messages is not None and count + size > messages) or (
                tokens is not None and total + unit_tokens > tokens
            )
            if over and selected:
                warnings.append(
                    HistoryWarning(
                        code="HISTORY_CAUSAL_BOUNDARY",
                        message="a history cap was adjusted to keep a causal group whole",
                    )
                )
                break
            if over:
                warnings.append(
                    HistoryWarning(
                        code="HISTORY_CAP_OVERFLOW",
                        message="the newest causal group alone exceeds a history cap",
                    )
                )
            count += size
            total += unit_tokens
            if g < 0:
                include_older = True
                first = 0
            else:
                first = g
            if (messages is not None and count >= messages) or (
                tokens is not None and total >= tokens
            ):
                break
        return self.span(first, include_older), tuple(warnings)
