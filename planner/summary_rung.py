"""The summary rung of one request: the split, the wanted summary, alignment, staleness.

Part of the rule told in `planner.summary_choice` (steps 2 and 3): the exact suffix is cut
under the recent caps; the summary the request wants ends just before it (`SummaryTarget`),
and the one the next request will want ends where the suffix will start once this turn is
committed. A stored summary is placed at a causal-group boundary (or is unavailable), is
stale when it ends before the suffix, and sizes the `summary` rung with every raw message
after it; a missing one leaves the rung unprepared. `Managed` carries these facts to the
miss policy and maintenance.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from planner._rungs import Ladder, Rung
from planner.budget import DerivedBudget
from planner.history import HistoryWarning
from planner.policies import MANAGED_RECENT_TOKEN_PERCENT, HistorySummary, ManagedHistory
from planner.projection import Projector, Span
from planner.receipt import ReceiptWarning

HISTORY_ID = "history"
"""Contributor id of managed history in receipts, floors and inspections."""

HISTORY_PRIORITY = 2**53 - 1
"""Managed history outranks every contributor: it is the first fidelity dimension."""


@dataclass(frozen=True, slots=True)
class SummaryTarget:
    """Where a fresh summary should end (internal).

    Attributes:
        prefix_messages: Conversational messages it covers (after the system prefix).
        through_id: Its last message, when the planner was given ids.
        through_position: That message's position in the history source; `None` when no
            conversational message precedes the suffix or the aggregate's end is unnamed.
    """

    prefix_messages: int
    through_id: str | None
    through_position: int | None


@dataclass(frozen=True, slots=True)
class Managed:
    """The summary choice of one request, kept for selection and sealing (internal).

    Attributes:
        policy: The policy, its summary marked stale when it is.
        spans: Raw history each rung sends (`None`: a summary that cannot be placed).
        suffix: The exact recent suffix.
        framing: Structure tokens of the summary message.
        stale: The stored summary ends before the suffix, or cannot be placed.
        refresh_due: No summary is usable through the suffix start (missing or stale).
        target: The summary this request wants.
        next_target: The summary the next request will want, once this turn is committed.
    """

    policy: ManagedHistory
    spans: tuple[Span | None, ...]
    suffix: Span
    framing: int
    stale: bool
    refresh_due: bool
    target: SummaryTarget
    next_target: SummaryTarget


def recent_caps(policy: ManagedHistory, strict_max: int) -> tuple[int | None, int | None]:
    """The exact suffix's `(messages, tokens)` caps; by default a share of the strict max."""
    if policy.recent_messages is None and policy.recent_tokens is None:
        return None, max(1, strict_max * MANAGED_RECENT_TOKEN_PERCENT // 100)
    return policy.recent_messages, policy.recent_tokens


def summary_boundary(summary: HistorySummary, projector: Projector) -> int | None:
    """The group the raw messages after `summary` start at; `None` if it cannot be placed.

    A summary replaces whole causal groups: it must end at a listed group boundary at or
    after the leading prefix, and cover the aggregate of older history (never split).
    """
    older, bounds = projector.older, projector.bounds
    target = summary.covers - (older.count - projector.prefix_items)
    at = bisect.bisect_left(bounds, target, lo=projector.scan.prefix_groups)
    aligned = summary.covers >= older.count and at < len(bounds) and bounds[at] == target
    return at if aligned else None


def is_stale(summary: HistorySummary, boundary: int | None, prefix_messages: int) -> bool:
    """Whether a stored summary ends before the exact suffix starts, or cannot be placed."""
    return boundary is None or summary.covers < prefix_messages


def expected_summary_size(suffix: Span, policy: ManagedHistory, framing: int) -> int:
    """What preview assumes the `summary` rung sends before its summary exists.

    The exact suffix plus `expected_summary_tokens` and the summary message's framing: an
    unprepared summary is assumed to end where the suffix starts.
    """
    return suffix.tokens + policy.expected_summary_tokens + framing


def committed_turn(turn_messages: int | None, turn_tokens: int) -> tuple[int, int]:
    """The expected `(messages, tokens)` of this turn once committed.

    The user message, any tool rounds, and an answer about as large as the question (the
    best guess before the reply exists).
    """
    return (turn_messages or 1) + 1, 2 * turn_tokens


def next_suffix_start(
    projector: Projector,
    caps: tuple[int | None, int | None],
    first_group: int,
    turn: tuple[int, int],
) -> int:
    """Where the exact suffix of the next request will start, once this turn is committed.

    The committed turn (`turn`: its messages and tokens) becomes the newest group, so the
    suffix moves forward; maintenance summarises up to there, so the next request finds a
    summary that is not stale.
    """
    messages_cap, tokens_cap = caps
    count, total = turn
    start = projector.group_count
    g = start - 1
    while g >= max(first_group, projector.scan.prefix_groups):
        if (messages_cap is not None and count >= messages_cap) or (
            tokens_cap is not None and total >= tokens_cap
        ):
            break
        size, tokens = projector.group_size(g), projector.group_tokens(g)
        if (messages_cap is not None and count + size > messages_cap) or (
            tokens_cap is not None and total + tokens > tokens_cap
        ):
            break
        count += size
        total += tokens
        start = g
        g -= 1
    return start


def _target(projector: Projector, listed_start: int) -> SummaryTarget:
    # Conversational messages before listed message `listed_start` (aggregate included).
    offset = projector.older.count - projector.prefix_items
    through_id, position = projector.through(listed_start)
    return SummaryTarget(offset + listed_start, through_id, position)


def managed_ladder(
    policy: ManagedHistory,
    projector: Projector,
    budget: DerivedBudget,
    turn: tuple[int | None, int] = (1, 0),
) -> tuple[Ladder, Managed, tuple[HistoryWarning, ...]] | None:
    """Offer managed history's rungs, or `None` when the exact suffix holds everything.

    Args:
        policy: The managed policy, with the stored summary chosen for it, if any.
        projector: The history's projector.
        budget: The request's limits.
        turn: The current turn's `(messages, tokens)` (see `committed_turn`).
    """
    caps = recent_caps(policy, budget.max)
    suffix, warnings = projector.recent(*caps)
    older, fmt = projector.older, projector.fmt
    if suffix.first_group <= projector.scan.prefix_groups and (
        older.count == 0 or suffix.include_older
    ):
        return None  # Everything fits the recent suffix: history stays exact.
    target = _target(projector, projector.bounds[suffix.first_group])
    full = projector.full()
    rungs: list[Rung] = [Rung("full", HISTORY_ID, full.tokens, True)]
    spans: list[Span | None] = [full, suffix]
    summary, stale = policy.summary, False
    if summary is None:
        expected = expected_summary_size(suffix, policy, fmt.per_message)
        rungs.append(Rung("summary", None, 0, False, unprepared=True, expected=expected))
    else:
        boundary = summary_boundary(summary, projector)
        raw = projector.span(boundary, False) if boundary is not None else None
        size = (raw.tokens if raw else 0) + summary.tokens + fmt.per_message
        ident = summary.artifact_id
        rungs.append(
            Rung(
                "summary",
                ident,
                size,
                raw is not None,
                artifact_id=ident,
                support_request_ids=summary.support_request_ids,
            )
        )
        spans[1] = raw
        stale = is_stale(summary, boundary, target.prefix_messages)
        if stale and not summary.stale:
            summary = summary.model_copy(update={"stale": True})
            policy = policy.model_copy(update={"summary": summary})
    if policy.on_miss == "recent-only":
        rungs.append(Rung("omitted", None, suffix.tokens, True))
        spans.append(suffix)
    ladder = Ladder(
        id=HISTORY_ID,
        priority=HISTORY_PRIORITY,
        order=-1,
        sources=(HISTORY_ID,),
        tools=(),
        kinds=tuple(rung.kind for rung in rungs),
        rungs=tuple(rungs),
    )
    ahead = next_suffix_start(projector, caps, suffix.first_group, committed_turn(*turn))
    facts = Managed(
        policy=policy,
        spans=tuple(spans),
        suffix=suffix,
        framing=fmt.per_message,
        stale=stale,
        refresh_due=summary is None or stale,
        target=target,
        next_target=_target(projector, projector.bounds[ahead]),
    )
    return ladder, facts, warnings


def summary_warnings(summary: HistorySummary) -> tuple[ReceiptWarning, ...]:
    """What the receipt of a request sending `summary` says about how it was chosen."""
    warnings: list[ReceiptWarning] = []
    if summary.origin != "stored":
        warnings.append(
            ReceiptWarning(
                code=f"HISTORY_SUMMARY_{summary.origin.upper()}",
                message=f"the history summary was {summary.origin} before dispatch",
            )
        )
    if summary.stale:
        warnings.append(
            ReceiptWarning(
                code="HISTORY_SUMMARY_STALE",
                message="a summary of an older prefix is used with a longer raw suffix",
            )
        )
    return tuple(warnings)
