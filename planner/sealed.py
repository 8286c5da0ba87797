"""The sealed plan: what one provider call sends, content-free and immutable."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from planner._base import FrozenModel
from planner.budget import DerivedBudget
from planner.history import HistoryAggregate
from planner.ladder import RungKind
from planner.receipt import RequestInspection, RequestReceipt
from planner.request import EpochFloors


class ContributorChoice(FrozenModel):
    """The representation chosen for one contributor.

    Attributes:
        contributor: Contributor id (`history` for managed history).
        representation: Chosen rung kind.
        rung: Rung index in the contributor's ladder.
        source: Id of the chosen source, alternative, artifact or handle.
        tokens: Its size as sent (owned tools and framing included).
        removed_tools: Owned tools removed with it (only when `omitted`).
        sources: Ids of the exact sources sent (`full`: the primary or every group member;
            `authored`: the alternative; a summary, offload or omission sends none).
    """

    contributor: str
    representation: RungKind
    rung: int
    source: str | None = None
    tokens: int
    removed_tools: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


class Preparation(FrozenModel):
    """Derived-artifact work the runtime should carry out.

    Attributes:
        contributor: Contributor id (`history`).
        kind: Artifact kind.
        when: `inline` (before dispatch, then plan again) or `after-response` (maintenance
            after the commit; the current call does not wait).
        prefix_messages: Conversational messages the summary should cover, counted from
            the start of the transcript after its leading system prefix.
        through_id: Id of the last message it should cover (the one just before the exact
            suffix), when the planner was given ids.
        through_position: Position of that message in the history source (see
            `HistoryColumns`); map it to an id at the pinned revision.
        max_summary_tokens: The most the rendered summary may take for the request to fit
            (`max` inline, `optimize_at` for maintenance), given everything else at its
            smallest legal size; `None` when unknown.
    """

    contributor: str
    kind: Literal["summary"] = "summary"
    when: Literal["inline", "after-response"]
    prefix_messages: int
    through_id: str | None = None
    through_position: int | None = None
    max_summary_tokens: int | None = None


class HistorySummaryPlacement(FrozenModel):
    """Where a selected history summary goes among the sent messages.

    Attributes:
        artifact_id: The summary artifact (rendered as one assistant message).
        position: Number of `message_ids` before it (the leading system prefix).
        tokens: Its size.
    """

    artifact_id: str
    position: int
    tokens: int


class SealedPlan(FrozenModel):
    """An immutable, content-free plan for one provider call.

    Attributes:
        request_id: The request id.
        message_ids: History ids to send, oldest first (a summary, if any, is placed per
            `history_summary`; older aggregated messages per `included_older`). Empty for
            columnar input, which carries no ids.
        message_ranges: The same messages as half-open position ranges of the history
            source, oldest first, aggregated older messages included when sent: map them
            to ids at the pinned revision.
        input_tokens: Measured size of the request.
        max_output_tokens: Output tokens reserved (send as the call's maximum).
        receipt: The receipt.
        choices: Chosen rung of every contributor, managed history first, then declaration
            order.
        removed_tools: Owned tools removed by omitted contributors.
        included_older: The aggregate of older messages when it is sent too, else `None`.
        history_summary: Placement of the history summary, when selected.
        epoch: Floors to pass to the next step of the run.
        budget: The derived limits.
        tier: `optimize_at` or `max`: the limit the selection satisfied.
        preparations: Maintenance to start after the response (never awaited).
        inspection: The full content-free inspection.
    """

    request_id: str
    message_ids: tuple[str, ...]
    message_ranges: tuple[tuple[int, int], ...] = ()
    input_tokens: int
    max_output_tokens: int
    receipt: RequestReceipt
    choices: tuple[ContributorChoice, ...] = ()
    removed_tools: tuple[str, ...] = ()
    included_older: HistoryAggregate | None = None
    history_summary: HistorySummaryPlacement | None = None
    epoch: EpochFloors
    budget: DerivedBudget
    tier: Literal["optimize_at", "max"]
    preparations: tuple[Preparation, ...] = Field(default=())
    inspection: RequestInspection
