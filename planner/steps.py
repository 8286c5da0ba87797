"""The decision table of a managed generation: planning state in, the next action out.

The workflow carries actions out (activities, child workflows, timers); every choice of
what comes next is made here, purely, so it is unit-tested row by row and replays the same
way every time. Two moments ask for a decision:

- `Planning`: before a provider call. The plan is sealed, or the request first needs an
  inline summary, an authoritative count, or it fails typed (starting the summary refresh
  a later turn needs, when the policy asks for one).
- `Dispatched`: after the sealed plan was handed to the provider. The turn commits, runs
  its tool calls, re-plans because the Thread moved before anything was sent, recovers once
  from a provider that says the request is too long, retries a reply that failed output
  validation (bounded), or fails typed.
- `Checked`: after the acceptance gate judged a final reply (terminal safety, then the
  constraints). The reply commits, is replaced by a corrective attempt (bounded, per
  kind), or the generation fails typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, overload

from planner.request import PlanRequest
from planner.seal import needs_authoritative_count, plan
from planner.sealed import Preparation, SealedPlan
from planner.summary_choice import failure_refresh, inline_summary_need
from vocabulary.errors import (
    CruxError,
    OutputValidationError,
    RequestCompositionError,
    ThreadError,
)
from vocabulary.gate import GateDecision
from vocabulary.gate_errors import ConstraintError, SafetyError

OVERFLOW_RECOVERY_FACTOR = 0.85
"""A provider that says "too long" despite our measurement gets exactly one linked retry
with a stricter ceiling, this fraction of what we measured."""

MAX_REVISION_REPLANS = 24
"""Re-reads after the Thread moved before dispatch. Each round is lost only to a turn that
landed meanwhile, so reaching this means the Thread is written faster than it can be read."""

ReplanReason = Literal["revision-moved"]

GateRetryReason = Literal["safety-retry", "constraint-retry"]
"""Why a final reply was replaced by a corrective attempt (the next receipt's
`previous_reason`)."""


# -- state ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Planning:
    """Before a provider call.

    Attributes:
        request: The planner input of this step.
        summarisable: The history comes from a Thread or a caller's transcript, so a
            managed history's summaries can be prepared.
        summary_prepared: An inline summary was already prepared for this step; a second
            request for one fails instead of looping.
        countable: The provider can count this request exactly: exact history whose
            skeleton lists every message, no tool rounds yet, no tools, no stricter ceiling.
        counted: The authoritative count was already asked for (its answer, if any, is in
            `request.counted_input_tokens`).
    """

    request: PlanRequest
    summarisable: bool
    summary_prepared: bool = False
    countable: bool = False
    counted: bool = False


DispatchOutcome = Literal["answered", "overflow", "revision-moved", "invalid-output"]


@dataclass(frozen=True, slots=True)
class Dispatched:
    """After a sealed plan was dispatched.

    Attributes:
        outcome: `answered` (output staged), `overflow` (the provider rejected the request
            as too long) or `revision-moved` (the Thread moved first; nothing was sent).
        input_tokens: What the sealed plan measured.
        ceiling: The stricter ceiling already in force after an overflow, if any.
        tool_calls: Tool calls in the staged answer.
        tool_rounds: Tool rounds already run in this turn.
        max_tool_rounds: Tool rounds allowed before an answer is required.
        replans: Revision-moved rounds so far, this one included.
        on_revision_moved: The caller's choice when the Thread moves before dispatch.
        rejections: Replies rejected by output validation so far, this one included.
        max_validation_retries: Validation retries allowed (`OutputSpec.max_retries`).
        defects: Where the rejected reply failed validation (paths and kinds, no values).
        request_id: The request that was dispatched.
    """

    outcome: DispatchOutcome
    input_tokens: int
    ceiling: int | None = None
    tool_calls: int = 0
    tool_rounds: int = 0
    max_tool_rounds: int = 0
    replans: int = 0
    on_revision_moved: Literal["replan", "fail"] = "replan"
    rejections: int = 0
    max_validation_retries: int = 0
    defects: tuple[str, ...] = ()
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class Checked:
    """After the acceptance gate judged a final reply: terminal safety, then constraints.

    Attributes:
        safety: The output policies' decision (`allow`, `retry` or `block`); `None` when
            no output policy is configured.
        policy: The policy that stopped the reply, if one did.
        reason_code: Its reason code.
        violations: The constraints the reply violates, as `<index>:<code>` (empty when it
            satisfies them all, or none is configured).
        safety_retries: Corrective attempts already made for output safety.
        max_safety_retries: Corrective attempts allowed for output safety.
        constraint_retries: Corrective attempts already made for the constraints.
        max_constraint_retries: Corrective attempts allowed for the constraints.
        request_id: The request whose reply was judged.
    """

    safety: GateDecision | None = None
    policy: str | None = None
    reason_code: str | None = None
    violations: tuple[str, ...] = ()
    safety_retries: int = 0
    max_safety_retries: int = 0
    constraint_retries: int = 0
    max_constraint_retries: int = 0
    request_id: str | None = None


# -- actions -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Seal:
    """Send this plan; run `maintenance` (background refreshes) after the commit."""

    plan: SealedPlan
    kind: Literal["seal"] = "seal"

    @property
    def maintenance(self) -> tuple[Preparation, ...]:
        """Summary refreshes to start, without waiting, once the turn is committed."""
        return tuple(p for p in self.plan.preparations if p.when == "after-response")


@dataclass(frozen=True, slots=True)
class PrepareSummary:
    """Prepare (or join) a history summary, waiting for it, then plan again."""

    need: Preparation
    kind: Literal["prepare-summary"] = "prepare-summary"


@dataclass(frozen=True, slots=True)
class CountAuthoritatively:
    """Ask the provider for an exact count of the request, then plan again with it.

    `message_ranges` are the history's positions (every listed message: a request with
    aggregated older history is never counted).
    """

    message_ranges: tuple[tuple[int, int], ...]
    kind: Literal["count"] = "count"


@dataclass(frozen=True, slots=True)
class RecoverOverflow:
    """Plan the next attempt under this stricter ceiling (once per generation)."""

    ceiling: int
    kind: Literal["recover-overflow"] = "recover-overflow"


@dataclass(frozen=True, slots=True)
class Replan:
    """Read the Thread again and plan the same attempt again; nothing was sent."""

    reason: ReplanReason
    kind: Literal["replan"] = "replan"


@dataclass(frozen=True, slots=True)
class RetryValidation:
    """Plan a new call because the reply failed output validation (linked, new epoch).

    The rejected reply was never staged: nothing of it is kept or committed.
    """

    retry: int
    kind: Literal["retry-validation"] = "retry-validation"


@dataclass(frozen=True, slots=True)
class RetryRejected:
    """Plan a corrective attempt because the gate refused the reply (linked, new epoch).

    The refused reply is withdrawn from staging (streamed deltas included) and never
    committed.

    Attributes:
        reason: `safety-retry` or `constraint-retry`.
        retry: The corrective attempt's number for this reason (1-based).
    """

    reason: GateRetryReason
    retry: int
    kind: Literal["retry-rejected"] = "retry-rejected"


@dataclass(frozen=True, slots=True)
class RunTools:
    """Run the staged tool calls, then plan the next attempt."""

    calls: int
    kind: Literal["run-tools"] = "run-tools"


@dataclass(frozen=True, slots=True)
class Commit:
    """Publish the accepted turn."""

    kind: Literal["commit"] = "commit"


@dataclass(frozen=True, slots=True)
class Fail:
    """Fail the generation.

    Attributes:
        error: The typed error, or `None` when the failure just observed (the provider's
            own) stands as it is.
        refresh: A summary refresh to start, without waiting, before failing, so that a
            later turn can fit.
        request_id: The planned request the error refers to, if any.
    """

    error: CruxError | None
    refresh: Preparation | None = None
    request_id: str | None = None
    kind: Literal["fail"] = "fail"


PlanningAction = Seal | PrepareSummary | CountAuthoritatively | Fail
"""What the workflow does before a provider call."""

DispatchAction = RecoverOverflow | Replan | RetryValidation | RunTools | Commit | Fail
"""What the workflow does after a dispatch."""

CheckedAction = Commit | RetryRejected | Fail
"""What the workflow does after the gate judged a final reply."""

Action = PlanningAction | DispatchAction | CheckedAction
"""What the workflow does next."""


# -- the table -----------------------------------------------------------------------------


@overload
def next_action(state: Planning) -> PlanningAction: ...


@overload
def next_action(state: Dispatched) -> DispatchAction: ...


@overload
def next_action(state: Checked) -> CheckedAction: ...


def next_action(state: Planning | Dispatched | Checked) -> Action:
    """Decide what the generation does next.

    Args:
        state: Where the generation stands: planning a call, a call just dispatched, or
            a final reply just judged by the acceptance gate.

    Returns:
        The action to carry out. Pure and deterministic: the same state always yields the
        same action.

    Raises:
        ConfigurationError: For invalid configuration found while planning.
    """
    if isinstance(state, Planning):
        return _before_dispatch(state)
    if isinstance(state, Checked):
        return _after_check(state)
    return _after_dispatch(state)


def _before_dispatch(state: Planning) -> PlanningAction:
    try:
        return Seal(plan(state.request))
    except RequestCompositionError as error:
        rejection = error
    need = inline_summary_need(
        rejection, summarisable=state.summarisable, summary_prepared=state.summary_prepared
    )
    if need is not None:
        # Managed history needs a summary before this call can fit.
        return PrepareSummary(need)
    if (
        rejection.code == "REQUEST_TOO_LARGE"
        and state.countable
        and not state.counted
        and needs_authoritative_count(state.request)
    ):
        # Nothing is elastic and only the estimate's margin stands in the way.
        request = state.request
        listed = (
            len(request.history)
            if request.history_columns is None
            else request.history_columns.message_count
        )
        return CountAuthoritatively(((0, listed),) if listed else ())
    # `on_miss="fail"` does not wait for the summary but starts its refresh: without it
    # every later turn would fail the same way.
    return Fail(
        rejection,
        refresh=failure_refresh(rejection, summarisable=state.summarisable),
        request_id=state.request.request_id,
    )


def _after_dispatch(state: Dispatched) -> DispatchAction:
    if state.outcome == "overflow":
        if state.ceiling is None:
            return RecoverOverflow(int(state.input_tokens * OVERFLOW_RECOVERY_FACTOR))
        return Fail(None)
    if state.outcome == "revision-moved":
        if state.on_revision_moved == "fail":
            return Fail(
                ThreadError(
                    "identity_conflict",
                    "thread changed after the request plan was sealed",
                )
            )
        if state.replans > MAX_REVISION_REPLANS:
            return Fail(
                ThreadError(
                    "identity_conflict",
                    f"thread changed before each of {state.replans} planned calls could be sent",
                )
            )
        return Replan("revision-moved")
    if state.outcome == "invalid-output":
        if state.rejections <= state.max_validation_retries:
            return RetryValidation(state.rejections)
        return Fail(
            OutputValidationError(
                state.defects, attempts=state.rejections, request_id=state.request_id
            ),
            request_id=state.request_id,
        )
    if state.tool_calls and state.tool_rounds < state.max_tool_rounds:
        return RunTools(state.tool_calls)
    return Commit()


def _after_check(state: Checked) -> CheckedAction:
    # Terminal safety first: a refused reply is never measured against the constraints.
    if state.safety in ("block", "retry"):
        refused = state.safety_retries + 1
        if state.safety == "retry" and state.safety_retries < state.max_safety_retries:
            return RetryRejected("safety-retry", refused)
        return Fail(
            SafetyError(
                state.policy or "policy",
                state.reason_code,
                stage="output",
                attempts=refused,
                request_id=state.request_id,
            ),
            request_id=state.request_id,
        )
    if state.violations:
        violated = state.constraint_retries + 1
        if state.constraint_retries < state.max_constraint_retries:
            return RetryRejected("constraint-retry", violated)
        return Fail(
            ConstraintError(state.violations, attempts=violated, request_id=state.request_id),
            request_id=state.request_id,
        )
    return Commit()
