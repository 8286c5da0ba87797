"""Starting or joining a summary preparation, and the planner's view of an artifact."""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.common import PinnedVersioningOverride, WorkerDeploymentVersion
from temporalio.exceptions import ApplicationError, FailureError, WorkflowAlreadyStartedError

from contracts.activities import (
    SUMMARY_RUN_LOST,
    SUMMARY_WORKFLOW,
    AwaitSummaryInput,
    PrepareSummaryResult,
)
from contracts.losses import lost_with_its_worker
from contracts.ui import summary_run_details, summary_run_summary
from planner import HistorySummary
from storage import SummaryArtifact
from vocabulary.errors import ErrorType

SUMMARY_WAIT_HEARTBEAT_SECONDS = 5.0
"""How often a joining wait heartbeats."""


async def await_running_summary(
    request: AwaitSummaryInput, *, version: WorkerDeploymentVersion | None = None
) -> PrepareSummaryResult:
    """Wait for the `SummaryWorkflow` (started here with `request.start`) and return its work.

    An identical preparation (same prefix, strategy and model) already in flight is joined,
    never repeated: its support calls are the only ones paid, and the result says `reused`.
    The activity heartbeats while it waits, so a lost worker is noticed and the wait resumed
    elsewhere (where the run this try started is joined).

    Args:
        request: The run, and whether to start it.
        version: The worker deployment version of this worker (`None` unversioned): a run
            started here is pinned to it, as a child run would inherit its parent's build.

    Raises:
        ApplicationError: Typed like the preparation's own failure (for example a
            `ProviderError`), non-retryable: waiting again cannot change the outcome. A
            preparation that timed out (lost with its workers) is `SUMMARY_RUN_LOST`.
    """
    started = request.start and await _started(request, version)
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
    if started:
        return result
    return result.model_copy(update={"reused": True, "support_calls": 0})


STARTED_BY_MEMO = "crux_started_by"
"""Memo key naming the generation whose inline preparation started a summary run (its
workflow id: ids only)."""


async def _started(request: AwaitSummaryInput, version: WorkerDeploymentVersion | None) -> bool:
    """Start the preparation; `False` when an identical one is already running.

    Started by the worker's client on its own task queue, as the generation's inline
    preparation: a run of its own in the Temporal UI, found by its workflow id. A run the
    same generation started before (this activity's earlier try, whose worker was lost after
    the start, or an earlier await of the turn) counts as started here: the turn's receipt
    names it inline, its support calls paid by this generation.
    """
    starter = activity.info().workflow_id or ""
    try:
        await activity.client().start_workflow(
            SUMMARY_WORKFLOW,
            request.request,
            id=request.workflow_id,
            task_queue=activity.info().task_queue,
            static_summary=summary_run_summary(request.request, inline=True),
            static_details=summary_run_details(request.request),
            memo={STARTED_BY_MEMO: starter},
            versioning_override=PinnedVersioningOverride(version) if version else None,
        )
    except WorkflowAlreadyStartedError:
        running = await activity.client().get_workflow_handle(request.workflow_id).describe()
        return bool(starter) and await running.memo_value(STARTED_BY_MEMO, None) == starter
    return True


def as_history_summary(artifact: SummaryArtifact) -> HistorySummary:
    """The planner's content-free view of a stored summary, as workflows receive it.

    Its id and size only: the support calls that wrote it (one per chunk of a long prefix)
    are linked from the stored artifact when a plan sending it is recorded
    (`activities._plan_records`), so no workflow payload grows with the prefix.
    """
    return HistorySummary(
        artifact_id=artifact.artifact_id, tokens=artifact.tokens, covers=artifact.covers
    )
