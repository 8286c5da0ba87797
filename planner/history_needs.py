"""What a history policy can use of a listed history: the reader cuts the rest.

A reader lists the newest causal groups that could fit the strict input maximum, but most
policies use far fewer: `history.recent(messages=20)` sends ten turns of a Thread of
thousands. The skeleton crosses Temporal history once per generation, so everything a
policy cannot use is folded into the one aggregate of older history
(`HistoryColumns.folded`). The plan over the cut skeleton is the plan over the whole one:
the same messages sent, the same positions, warnings, sizes and receipt figures.

- Exact history sends everything: nothing is cut.
- Recent history keeps the groups its caps take. The walk back from the newest group
  stops at the same group either way: the group that stopped it now lies in the aggregate,
  and an aggregate holding it is just as far over the cap.
- Managed history keeps the exact suffix under its caps (by default a share of the strict
  maximum: the reader's ceiling, which no step plans above) and, when the stored summary
  ends earlier, the raw groups after the summary, which its rung sends.

A policy whose caps a step may widen (a step hook can change the model or budget, and
managed history's default suffix is a share of the budget) is read uncut, and so is the
history of a generation offering tools: a tool round grows the turn, and a later step may
then need other groups than the first one's.
"""

from __future__ import annotations

from planner.columns import HistoryColumns
from planner.history import HistoryAggregate
from planner.measure import DEFAULT_MESSAGE_FORMAT
from planner.policies import ExactHistory, ManagedHistory, RecentHistory
from planner.projection import Projector
from planner.summary_rung import recent_caps, summary_boundary
from vocabulary.errors import RequestCompositionError


def first_needed_group(
    policy: ExactHistory | RecentHistory | ManagedHistory,
    columns: HistoryColumns,
    older: HistoryAggregate,
    *,
    strict_max: int,
) -> int:
    """The oldest listed group (after the system prefix) a plan under `policy` can send.

    Args:
        policy: The history policy, with the stored summary for managed history.
        columns: The listed history.
        older: The aggregate of older history.
        strict_max: The largest strict input maximum any step of the request plans with.

    Returns:
        A listed group index; `0` when the policy may use every listed group.
    """
    if isinstance(policy, ExactHistory) or columns.defect is not None:
        return 0
    try:
        scan = columns.scan(None, has_older=older.count > 0, prefix_items=older.prefix_items)
    except RequestCompositionError:
        return 0  # malformed: the planner says so, on the uncut columns
    projector = Projector((), older, scan, DEFAULT_MESSAGE_FORMAT, has_ids=False)
    if isinstance(policy, RecentHistory):
        suffix, _ = projector.recent(policy.messages, policy.tokens)
        return 0 if suffix.include_older else suffix.first_group
    suffix, _ = projector.recent(*recent_caps(policy, strict_max))
    first = 0 if suffix.include_older else suffix.first_group
    if policy.summary is not None:
        boundary = summary_boundary(policy.summary, projector)
        if boundary is not None:
            first = min(first, boundary)
    return first


def cut_to_needs(
    policy: ExactHistory | RecentHistory | ManagedHistory,
    columns: HistoryColumns,
    older: HistoryAggregate,
    *,
    strict_max: int,
) -> tuple[HistoryColumns, HistoryAggregate]:
    """List only what `policy` can use; fold the rest into the aggregate of older history.

    Args:
        policy: The history policy, with the stored summary for managed history.
        columns: The listed history (the newest groups that could fit `strict_max`).
        older: The aggregate of older history.
        strict_max: The largest strict input maximum any step of the request plans with.

    Returns:
        The cut columns and the aggregate standing for everything before them.
    """
    first = first_needed_group(policy, columns, older, strict_max=strict_max)
    return columns.folded(older, first)
