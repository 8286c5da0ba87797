"""Joining a summary preparation already running, and the planner's view of an artifact."""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, FailureError

from contracts.activities import SUMMARY_RUN_LOST, AwaitSummaryInput, PrepareSummaryResult
from contracts.losses import lost_with_its_worker
from planner import HistorySummary, SupportRequestRecord
from storage import SummaryArtifact
from vocabulary.errors import ErrorType

SUMMARY_WAIT_HEARTBEAT_SECONDS = 5.0
"""How often a joining wait heartbeats."""


async def await_running_summary(request: AwaitSummaryInput) -> PrepareSummaryResult:
    """Wait for the running `SummaryWorkflow` and return what it prepared.

    An identical preparation (same prefix, strategy and model) already in flight is joined,
    never repeated: its support calls are the only ones paid. The activity heartbeats while
    it waits, so a lost worker is noticed and the wait resumed elsewhere.

    Raises:
        ApplicationError: Typed like the preparation's own failure (for example a
            `ProviderError`), non-retryable: waiting again cannot change the outcome. A
            preparation that timed out (lost with its workers) is `SUMMARY_RUN_LOST`.
    """
    handle = activity.client().get_workflow_handle(
        request.workflow_id, result_type=PrepareSummaryResult
    )
    waiting = asyncio.ensure_future(handle.result())
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=SUMMARY_WAIT_HEARTBEAT_SECONDS)
            if done:
                break
            activity.heartbeat()
        result = waiting.result()
    except WorkflowFailureError as error:
        if lost_with_its_worker(error.cause):
            # Its tries timed out with their workers: the joiner prepares the summary again.
            raise ApplicationError(
                "the joined history summary preparation was lost",
                type=SUMMARY_RUN_LOST,
                non_retryable=True,
            ) from None
        cause: BaseException | None = error.cause
        while isinstance(cause, FailureError) and not (
            isinstance(cause, ApplicationError) and cause.type is not None
        ):
            cause = cause.cause
        kind = cause.type if isinstance(cause, ApplicationError) else ErrorType.PROVIDER
        details = list(cause.details) if isinstance(cause, ApplicationError) else []
        raise ApplicationError(
            "the joined history summary preparation failed",
            *details,
            type=kind,
            non_retryable=True,
        ) from None
    finally:
        waiting.cancel()
    return result.model_copy(update={"reused": True, "support_calls": 0})


def as_history_summary(artifact: SummaryArtifact) -> HistorySummary:
    """The planner's content-free view of a stored summary."""
    return HistorySummary(
        artifact_id=artifact.artifact_id,
        tokens=artifact.tokens,
        covers=artifact.covers,
        support_request_ids=tuple(artifact.support_request_ids),
        support_requests=tuple(
            SupportRequestRecord.model_validate(record) for record in artifact.support_requests
        ),
    )
