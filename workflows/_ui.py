"""What the Temporal UI shows of a run: its static summary and details, its final details.

The static summary (one line, set when the run starts) names the kind of run, the model and
the Thread; the static details add the ids and the call's shape. When a generation ends, its
current details give the figures an operator asks for first: tokens, attempts, adaptations,
commit status. Everything is ids, names, counts and decisions: never content.
"""

from __future__ import annotations

from typing import Literal

from temporalio.exceptions import ApplicationError, FailureError

from contracts.activities import PrepareSummaryInput, PrepareSummaryResult
from contracts.generation import GenerationInput, GenerationOutcome
from vocabulary.stages import Stage
from workflows._progress import TurnProgress
from workflows._stages import StageReporter

RunKind = Literal["generate", "stream", "parallel member", "summary", "inline summary"]

# Temporal shows the summary on one line; ids are cut so the line stays readable and under
# the server's limits whatever a caller chose as ids.
_MAX_ID_CHARS = 64
_MAX_SUMMARY_CHARS = 200


def _short(value: str) -> str:
    return value if len(value) <= _MAX_ID_CHARS else value[: _MAX_ID_CHARS - 1] + "…"


def run_summary(
    kind: RunKind, *, model: str, thread_id: str | None, member: str | None = None
) -> str:
    """The one-line static summary: kind, model and Thread (`ad hoc` without one).

    Args:
        kind: `generate`, `stream`, `parallel member`, `summary` or `inline summary`.
        model: The model id.
        thread_id: The Thread, `None` for an ad-hoc generation.
        member: The member name of a parallel member.
    """
    label = f"{kind} {_short(member)}" if member else kind
    thread = f"thread {_short(thread_id)}" if thread_id else "ad hoc"
    return f"{label} · {_short(model)} · {thread}"[:_MAX_SUMMARY_CHARS]


def generation_summary(request: GenerationInput) -> str:
    """The static summary of a generation (its kind read from the input)."""
    if request.composition is not None:
        return run_summary(
            "parallel member",
            model=request.model,
            thread_id=request.thread_id,
            member=request.composition.member,
        )
    kind: RunKind = "stream" if request.stream else "generate"
    return run_summary(kind, model=request.model, thread_id=request.thread_id)


def generation_details(request: GenerationInput) -> str:
    """The static details of a generation: its ids and the shape of the call."""
    lines = [
        f"generation: {request.generation_id}",
        f"thread: {request.thread_id or 'none (ad hoc)'}",
        f"owner: {request.owner}",
        f"model: {request.model}",
        f"tools offered: {len(request.tools)}",
        f"structured output: {'yes' if request.output is not None else 'no'}",
    ]
    if request.agent_id:
        lines.append(f"agent: {request.agent_id}")
    if request.composition is not None:
        lines.append(f"parent: {request.composition.parent_workflow_id}")
    return "\n".join(lines)


def summary_run_summary(request: PrepareSummaryInput, *, inline: bool) -> str:
    """The static summary of a SummaryWorkflow."""
    kind: RunKind = "inline summary" if inline else "summary"
    return run_summary(kind, model=request.model, thread_id=request.thread_id)


def summary_run_details(request: PrepareSummaryInput) -> str:
    """The static details of a SummaryWorkflow."""
    return "\n".join(
        [
            f"thread: {request.thread_id}",
            f"through message: {request.through_id}",
            f"strategy: {request.strategy}",
            f"model: {request.model}",
            f"for generation: {request.generation_id or 'none'}",
        ]
    )


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
