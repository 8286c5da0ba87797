"""Where a generation's provider loop stands: attempts, tool rounds, epoch, ceiling, records."""

from __future__ import annotations

from typing import Literal

from contracts.activities import CommitTurnResult, InvokeModelResult
from contracts.generation import GenerationInput, StepFigures
from planner import (
    EpochFloors,
    HistorySummary,
    Preparation,
    SealedPlan,
)


class TurnProgress:
    """Where the generation's provider loop stands (attempts, tool rounds, epoch)."""

    def __init__(self) -> None:
        self.attempt = 1
        self.rounds = 0
        self.turn_counts: list[int] = []
        """Content tokens of each tool-round message of the turn, in order."""
        self.ceiling: int | None = None
        self.previous_request_id: str | None = None
        self.previous_reason: str | None = None
        """Why the next plan replaces `previous_request_id` unsent (`revision-moved`)."""
        self.epoch: EpochFloors | None = None
        self.summary: HistorySummary | None = None
        self.maintenance: tuple[Preparation, ...] = ()
        self.steps: list[StepFigures] = []
        """One record per provider call that answered (its receipt is stored by request id)."""
        self.superseded: list[str] = []
        """Request ids of plans never sent because the Thread moved first."""
        self.rejections = 0
        """Replies rejected by output validation so far."""
        self.epoch_reset = False
        """The next call starts a new epoch although its model and budget stay the same."""
        self.adaptations: list[str] = []
        """Representation of every adapted contributor of the calls sent so far."""
        self.retried = 0
        """Tries of answered calls that failed and were retried by Temporal."""
        self.committed: CommitTurnResult | None = None
        """The accepted attempt published the turn itself (`InvokeModelInput.commit`)."""

    @property
    def replans(self) -> int:
        """Plans superseded by a moved revision so far."""
        return len(self.superseded)

    @property
    def turn_messages(self) -> int:
        """Tool-round messages in the turn so far."""
        return len(self.turn_counts)

    @property
    def turn_tokens(self) -> int:
        """Their content tokens."""
        return sum(self.turn_counts)

    def add_turn_message(self, tokens: int) -> None:
        """Count one more tool-round message of `tokens` content tokens in the turn."""
        self.turn_counts.append(tokens)

    def link(self, sealed: SealedPlan) -> SealedPlan:
        """`sealed`, its receipt saying why it follows a plan that was never sent."""
        reason, self.previous_reason = self.previous_reason, None
        if reason is None:
            return sealed
        receipt = sealed.receipt.model_copy(update={"previous_reason": reason})
        return sealed.model_copy(update={"receipt": receipt})

    def accept(self, sealed: SealedPlan, invoked: InvokeModelResult) -> None:
        """Record a provider call that answered."""
        self.adaptations.extend(a.representation for a in sealed.receipt.adaptations)
        self.retried += invoked.retried
        self.steps.append(
            StepFigures(
                attempt=self.attempt,
                request_id=sealed.request_id,
                usage=invoked.usage,
                finish_reason=invoked.finish_reason,
                output_tokens=invoked.output_tokens,
            )
        )

    def reject(self, sealed: SealedPlan, invoked: InvokeModelResult) -> None:
        """Record a reply that failed output validation; the next call starts a new epoch.

        The call was paid for, so it stays a step (usage, its receipt); its reply was never
        staged. The next plan is linked to it with reason `validation-retry` and starts a
        fresh epoch: floors earned by the rejected call do not bind its replacement.
        """
        self.steps.append(
            StepFigures(
                attempt=self.attempt,
                request_id=sealed.request_id,
                usage=invoked.usage,
                finish_reason="invalid-output",
                output_tokens=invoked.output_tokens,
            )
        )
        self.rejections += 1
        self.next_step(sealed)
        self.epoch = None
        self.epoch_reset = True
        self.previous_reason = "validation-retry"

    def withdraw(self, sealed: SealedPlan, invoked: InvokeModelResult, reason: str) -> None:
        """Record a final reply the acceptance gate refused; the next call is corrective.

        As for a reply that failed validation: the call stays a step (its usage, its
        receipt, which records the gate's verdict), its reply was withdrawn from staging,
        and the next plan is linked to it with `reason` (`safety-retry` or
        `constraint-retry`) in a fresh epoch.
        """
        self.steps.append(
            StepFigures(
                attempt=self.attempt,
                request_id=sealed.request_id,
                usage=invoked.usage,
                finish_reason=reason,
                output_tokens=invoked.output_tokens,
            )
        )
        self.next_step(sealed)
        self.epoch = None
        self.epoch_reset = True
        self.previous_reason = reason

    def supersede(self, sealed: SealedPlan) -> None:
        """Record a plan the Thread's move kept from being sent."""
        self.superseded.append(sealed.request_id)

    def next_step(self, sealed: SealedPlan) -> None:
        """Move to the next provider call, linked to the one `sealed` describes."""
        # The next call is planned again and linked to this one; reduced contributors never
        # re-expand within the model epoch.
        self.previous_request_id = sealed.request_id
        self.epoch = sealed.epoch
        self.epoch_reset = False
        self.attempt += 1

    def replan(self, sealed: SealedPlan, reason: str) -> None:
        """Plan the same attempt again, linked to `sealed`, which was never sent."""
        # Same attempt number: nothing was staged for it, and its epoch floors stay those of
        # the last call that was actually sent.
        self.previous_request_id = sealed.request_id
        self.previous_reason = reason

    def tool_choice(self, request: GenerationInput) -> Literal["auto", "required", "none"] | None:
        """The tool choice for the next call."""
        if not request.tools:
            return None
        if self.rounds >= request.max_tool_rounds:
            return "none"
        if request.tool_choice == "required" and self.rounds > 0:
            # Forcing a call on every round would never let the model answer.
            return "auto"
        return request.tool_choice
