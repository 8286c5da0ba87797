"""The planner's input: one request skeleton, content-free, plus epoch floors."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from planner._base import Confidence, FrozenModel
from planner.budget import InputBudget
from planner.columns import HistoryColumns
from planner.history import HistoryAggregate, HistoryItem
from planner.ladder import Contributor
from planner.measure import MessageFormat
from planner.policies import ExactHistory, HistoryPolicy
from planner.profiles import ModelProfile
from planner.receipt import SettingsRecord, SupportRequestRecord


class EpochFloor(FrozenModel):
    """The lowest-fidelity rung a contributor has reached in the current epoch.

    Attributes:
        contributor: Contributor id (`history` for managed history).
        rung: Rung index; later steps of the epoch may not choose a higher-fidelity rung.
    """

    contributor: str
    rung: int = Field(ge=0)


class EpochFloors(FrozenModel):
    """Epoch state carried between the provider calls of one run.

    An epoch is one provider, model and explicit input budget. Within it a reduced
    contributor never re-expands on later steps (tool rounds, validation retries); a new key
    clears every floor and replans from canonical sources.

    Attributes:
        key: The epoch key (see `epoch_key`).
        floors: Floors by contributor, sorted by contributor id.
    """

    key: str
    floors: tuple[EpochFloor, ...] = ()

    def floor(self, contributor: str) -> int:
        """Return the floor of `contributor` (0 when it was never reduced)."""
        for entry in self.floors:
            if entry.contributor == contributor:
                return entry.rung
        return 0


class PlanRequest(FrozenModel):
    """Everything the planner needs for one provider call, as ids and token counts.

    Attributes:
        request_id: Id of this request (caller-supplied; the planner never generates ids).
        model: Resolved capacity profile.
        input_budget: Merged input budget, or `None` for the model's capacity.
        system_tokens: Tokens of the configured system instructions not modelled as
            contributors.
        history: Newest history items, oldest first, at causal-group boundaries.
        history_columns: The same, packed per causal group without ids (what a reader
            sends across a workflow boundary); exclusive with `history`. A plan over
            columns reports the messages it sends as positions (`message_ranges`).
        older_history: Aggregate of everything older than `history`.
        history_policy: `ExactHistory` (default), `RecentHistory` or `ManagedHistory`.
        current_turn_tokens: Content tokens of the current turn (never projected away).
        current_turn_messages: Messages in the current turn; `None` means one when
            `current_turn_tokens > 0`.
        tool_schema_tokens: Tokens of tool schemas not owned by any contributor.
        output_schema_tokens: Tokens of the structured-output schema.
        output_reserve: The call's maximum output tokens; `None` for the profile default.
        contributors: Context contributors in declaration order.
        epoch: Floors from the previous step of the run, or `None` at the start.
        previous_request_id: The previous semantic call of the same loop.
        measurement: Counting confidence override (`exact` when counts are authoritative);
            `None` uses the profile's.
        counted_input_tokens: An authoritative count of the whole request as it would be
            sent. Used only for requests with nothing to choose and no aggregated older
            history to send (see `needs_authoritative_count`); it then replaces the
            estimate and switches the measurement to `exact`.
        runtime_sources: Ids of tool sources only known at run time; `preview()` then
            cannot conclude `fits`.
        support_requests: Support calls (e.g. summaries) to link from the inspection.
        message_format: Formatting overhead to use instead of the provider family's
            (for calibrated or custom providers).
        settings: The model settings the request is sent with, recorded in its receipt.
        history_source: Which history source won by precedence: `thread`, `messages`
            (call-site or prompt-level) or `none`; `None` when the caller does not say.
            A projection over `none` is receipted as `HISTORY_SOURCE_MISSING`.
    """

    request_id: str = Field(min_length=1)
    model: ModelProfile
    input_budget: InputBudget | None = None
    system_tokens: int = Field(default=0, ge=0)
    history: tuple[HistoryItem, ...] = ()
    history_columns: HistoryColumns | None = None
    older_history: HistoryAggregate = HistoryAggregate()
    history_policy: HistoryPolicy = ExactHistory()
    current_turn_tokens: int = Field(default=0, ge=0)
    current_turn_messages: int | None = Field(default=None, ge=0)
    tool_schema_tokens: int = Field(default=0, ge=0)
    output_schema_tokens: int = Field(default=0, ge=0)
    output_reserve: int | None = None
    contributors: tuple[Contributor, ...] = ()
    epoch: EpochFloors | None = None
    previous_request_id: str | None = None
    measurement: Confidence | None = None
    counted_input_tokens: int | None = None
    runtime_sources: tuple[str, ...] = ()
    support_requests: tuple[SupportRequestRecord, ...] = ()
    message_format: MessageFormat | None = None
    settings: SettingsRecord | None = None
    history_source: Literal["thread", "messages", "none"] | None = None


def epoch_key(request: PlanRequest) -> str:
    """Return the epoch key of a request: provider, model and explicit input budget."""
    budget = request.input_budget.explicit_key() if request.input_budget else "none"
    return f"{request.model.provider}|{request.model.id}|{budget}"
