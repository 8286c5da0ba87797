"""What the Temporal UI shows of a run when it ends: its final current details.

When a generation ends, its current details give the figures an operator asks for first:
tokens, attempts, adaptations, commit status. Everything is ids, names, counts and
decisions: never content. The static summary and details set at start are `contracts.ui`.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError, FailureError

from contracts.activities import PrepareSummaryResult
from contracts.generation import GenerationOutcome
from vocabulary.stages import Stage
from workflows._progress import TurnProgress
from workflows._stages import StageReporter


def completion_details(
    outcome: GenerationOutcome,
    *,
    attempts: int,
    tool_rounds: int,
    adaptations: list[str],
    replans: int = 0,
    retried: int = 0,
) -> str:
    """What a finished generation did, as its final current details.

    Args:
        outcome: The committed outcome.
        attempts: Provider calls that answered.
        tool_rounds: Tool rounds run.
        adaptations: Representation of each adapted contributor sent.
        replans: Plans never sent because the Thread moved first.
        retried: Failed tries of those calls that Temporal retried.
    """
    commit = outcome.thread_commit
    if commit is None:
        committed = "none (ad hoc)"
    else:
        committed = commit.status + (" (replayed)" if commit.replayed else "")
    kinds = sorted(set(adaptations))
    adapted = f"{len(adaptations)}" + (f" ({', '.join(kinds)})" if kinds else "")
    lines = [
        "stage: completed",
        f"tokens: {outcome.usage.input_tokens} in, {outcome.usage.output_tokens} out",
        f"attempts: {attempts + retried}"
        + (f" ({retried} failed and retried)" if retried else "")
        + f", tool rounds: {tool_rounds}, replans: {replans}",
        f"adaptations: {adapted}",
        f"commit: {committed}",
    ]
    if outcome.hooks:
        lines.append(
            "success hooks: "
            + ", ".join(
                f"{hook.hook} {hook.status}" + (f" ({hook.error_type})" if hook.error_type else "")
                for hook in outcome.hooks
            )
        )
    return "\n".join(lines)


def replayed_details(outcome: GenerationOutcome) -> str:
    """The final details of a run that found its generation committed before."""
    commit = outcome.thread_commit
    committed = commit.status if commit is not None else "none (ad hoc)"
    return "\n".join(
        [
            "stage: completed (committed before; nothing was sent)",
            f"tokens: {outcome.usage.input_tokens} in, {outcome.usage.output_tokens} out",
            f"commit: {committed} (replayed)",
        ]
    )


def summary_completion_details(result: PrepareSummaryResult) -> str:
    """The final current details of a SummaryWorkflow that prepared (or found) its artifact."""
    origin = "found ready" if result.reused else "prepared"
    return "\n".join(
        [
            "stage: completed",
            f"summary: {origin}, {result.summary.tokens} tokens, covers {result.summary.covers}",
            f"support calls: {result.support_calls}",
        ]
    )


def failure_details(stage: str, error: BaseException) -> str:
    """The final current details of a run that failed or was cancelled: its error type."""
    return f"stage: {stage}\nerror: {error_type(error)}"


def error_type(error: BaseException) -> str:
    """The typed class of a failure (the first `ApplicationError` type in its causes)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ApplicationError) and cause.type:
            return cause.type
        cause = cause.cause if isinstance(cause, FailureError) else None
    return type(error).__name__


def conclude_completed(
    stages: StageReporter, outcome: GenerationOutcome, progress: TurnProgress
) -> None:
    """End a generation that committed: its figures become its final details."""
    commit = outcome.thread_commit
    stages.conclude(
        Stage.COMPLETED,
        f"commit {commit.status if commit is not None else 'none'}",
        completion_details(
            outcome,
            attempts=len(progress.steps),
            tool_rounds=progress.rounds,
            adaptations=progress.adaptations,
            replans=progress.replans,
            retried=progress.retried,
        ),
    )


def conclude_replayed(stages: StageReporter, outcome: GenerationOutcome) -> None:
    """End a generation that found itself committed before."""
    stages.conclude(Stage.COMPLETED, "committed before", replayed_details(outcome))


def conclude_failed(stages: StageReporter, error: BaseException) -> None:
    """End a failed or cancelled generation: its error type is the UI's last word on it.

    Other exceptions (an eviction unwinding the run) leave the details alone.
    """
    stage = stages.stage
    if stage in (Stage.FAILED, Stage.CANCELLED):
        stages.conclude(stage, error_type(error), failure_details(stage.value, error))
