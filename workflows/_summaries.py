"""History summaries a generation needs: prepared inline (waiting) or started in the background.

A summary is its own `SummaryWorkflow`, deduplicated by workflow id, so two generations that
need the same artifact pay for it once: the second joins the first. The history may be a
Thread's selected path or a caller's transcript (call-site or prompt-level messages), whose
prefix is named by content and staged for the preparation first.
"""

from __future__ import annotations

import contextlib
from typing import Literal

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    WorkflowAlreadyStartedError,
)
from temporalio.workflow import ParentClosePolicy

from contracts import stubs
from contracts.activities import (
    SUMMARY_RUN_LOST,
    AwaitSummaryInput,
    PrepareSummaryInput,
    PrepareSummaryResult,
    ReadRequestResult,
    ResolveHistoryIdsInput,
    ResolveHistoryIdsResult,
    StageSummarySourceInput,
    StageSummarySourceResult,
)
from contracts.failures import application_error
from contracts.generation import GenerationInput
from contracts.losses import lost_with_its_worker
from contracts.ui import summary_run_details, summary_run_summary
from planner import HistorySummary, Preparation
from planner.summary_choice import summary_model, unprepared_summary
from vocabulary.details import decode_details
from vocabulary.errors import ErrorType
from vocabulary.stages import Stage
from vocabulary.staging import SummarySource
from workflows import _options
from workflows._stages import StageReporter
from workflows._storage_wait import waiting_out_storage
from workflows.summary import SUMMARY_WORKFLOW, summary_workflow_id

LOST_PREPARATION_ROUNDS = 3
"""Rounds an inline summary preparation gets when each is lost with its workers (every try
of its activity timed out): each round is a new preparation run with its own retries."""


def summarisable(request: GenerationInput, read: ReadRequestResult) -> bool:
    """Whether the history this generation read can be summarised.

    A Thread's selected path, or a caller's transcript (call-site or prompt-level
    messages, whose prefixes are named by content); not an absent history.
    """
    if read.history_source == "caller-messages":
        return True
    return read.history_source == "thread" and request.thread_id is not None


async def _through_id(
    stages: StageReporter, request: GenerationInput, read: ReadRequestResult, need: Preparation
) -> str | None:
    """The id of the last message a preparation covers, named by position in the plan.

    The skeleton carries no ids: the read names the path's ids where the summaries its
    first plan asks for end (`through_ids`); any other position is mapped on the owner's
    selected path by a local activity (this turn's commit only extends the path the read
    saw).
    """
    if need.through_id is not None or request.thread_id is None:
        return need.through_id
    if need.through_position is None:
        return None
    thread_id, position = request.thread_id, need.through_position
    named = read.through_ids.get(position)
    if named is not None:
        return named
    resolved: ResolveHistoryIdsResult = await waiting_out_storage(
        stages,
        request,
        Stage.SUMMARISING,
        lambda: workflow.execute_local_activity(
            stubs.resolve_history_ids,
            ResolveHistoryIdsInput(thread_id=thread_id, owner=request.owner, positions=[position]),
            **_options.READ_REQUEST_LOCAL,
        ),
        local=True,
    )
    return resolved.ids[0]


async def _transcript_through_id(
    stages: StageReporter, request: GenerationInput, need: Preparation, model: str
) -> str | None:
    """The content-derived id of the transcript prefix a preparation covers.

    The local activity also stages a copy of that prefix for the preparation: the
    generation's own staged transcript is gone once its turn commits, and a summary started
    after the response still needs it.
    """
    if need.through_position is None:
        return None
    staged: StageSummarySourceResult = await waiting_out_storage(
        stages,
        request,
        Stage.SUMMARISING,
        lambda: workflow.execute_local_activity(
            stubs.stage_summary_source,
            StageSummarySourceInput(
                generation_id=request.generation_id,
                thread_id=request.thread_id,
                owner=request.owner,
                through_position=need.through_position or 0,
                strategy=request.history.strategy,
                model=model,
            ),
            **_options.READ_REQUEST_LOCAL,
        ),
        local=True,
    )
    return staged.through_id


async def _summary_input(
    stages: StageReporter, request: GenerationInput, read: ReadRequestResult, need: Preparation
) -> PrepareSummaryInput | None:
    model = summary_model(request.history.summary_model, request.model)
    if read.history_source == "caller-messages":
        source: SummarySource = "transcript"
        through_id = await _transcript_through_id(stages, request, need, model)
    else:
        source = "thread"
        through_id = await _through_id(stages, request, read, need)
        if request.thread_id is None:
            return None
    if through_id is None:
        return None
    return PrepareSummaryInput(
        thread_id=request.thread_id,
        owner=request.owner,
        through_id=through_id,
        strategy=request.history.strategy,
        model=model,
        counting_model=request.model,
        generation_id=request.generation_id,
        max_summary_tokens=need.max_summary_tokens,
        chunk_tokens=request.history.chunk_tokens,
        chunk_units=request.history.chunk_units,
        source=source,
    )


async def before_commit(
    stages: StageReporter,
    request: GenerationInput,
    read: ReadRequestResult,
    needs: tuple[Preparation, ...],
) -> tuple[Preparation | PrepareSummaryInput, ...]:
    """Name and stage the transcript prefixes the maintenance after the commit summarises.

    The commit removes the generation's staged transcript, so a transcript prefix is staged
    for its preparation now; a Thread's prefix stays on the Thread and is resolved after the
    commit, as before (no command for it here).

    Returns:
        What `start_summary` takes after the commit, one per need that still applies.
    """
    if read.history_source != "caller-messages":
        return needs
    staged: list[Preparation | PrepareSummaryInput] = []
    for need in needs:
        summary_input = await _summary_input(stages, request, read, need)
        if summary_input is not None:
            staged.append(summary_input)
    return tuple(staged)


async def start_summary(
    stages: StageReporter,
    request: GenerationInput,
    read: ReadRequestResult,
    need: Preparation | PrepareSummaryInput,
) -> None:
    """Start the summary a later turn needs, without waiting (maintenance, refresh).

    Args:
        stages: The generation's stage reporter.
        request: The generation.
        read: Its read result (the history source).
        need: The preparation, or its input already resolved (`before_commit`).
    """
    if isinstance(need, PrepareSummaryInput):
        summary_input: PrepareSummaryInput | None = need
    else:
        summary_input = await _summary_input(stages, request, read, need)
    if summary_input is None:
        return
    stages.set(Stage.MAINTENANCE, "summary scheduled")
    stages.publish()
    # Another generation may already have scheduled this artifact: that is enough.
    with contextlib.suppress(WorkflowAlreadyStartedError):
        await workflow.start_child_workflow(
            SUMMARY_WORKFLOW,
            summary_input,
            id=summary_workflow_id(summary_input),
            parent_close_policy=ParentClosePolicy.ABANDON,
            static_summary=summary_run_summary(summary_input, inline=False),
            static_details=summary_run_details(summary_input),
        )


async def prepare_summary(
    stages: StageReporter, request: GenerationInput, read: ReadRequestResult, need: Preparation
) -> HistorySummary | None:
    """Prepare the summary this call needs and wait for it (joining one already running).

    Raises:
        ApplicationError: Typed and content-free when the summary could not be prepared.
    """
    summary_input = await _summary_input(stages, request, read, need)
    if summary_input is None:
        return None
    run_id = summary_workflow_id(summary_input)
    stages.set(Stage.SUMMARISING, "inline history summary")
    stages.publish()
    rounds = 1
    while True:
        try:
            prepared, origin = await _prepared(summary_input, run_id)
            return prepared.summary.model_copy(update={"origin": origin})
        except ActivityError as error:
            if rounds >= LOST_PREPARATION_ROUNDS or not lost_with_its_worker(error):
                raise _preparation_failed(error) from None
        # Every try of the preparation (or of the run this one joined) timed out with its
        # worker: nothing refused the summary, and preparing it again is safe (an artifact
        # already stored is found, not paid for twice).
        rounds += 1
        stages.set(Stage.SUMMARISING, f"inline history summary, round {rounds} after a lost run")
        stages.publish()


async def _prepared(
    summary_input: PrepareSummaryInput, run_id: str
) -> tuple[PrepareSummaryResult, Literal["inline", "joined"]]:
    """Prepare the summary in a run of its own, or join the identical one already running.

    An activity starts the `SummaryWorkflow` (or finds it running: another generation,
    maintenance, or another worker) and waits for it, so its support calls are the only
    ones: one activity in this run's history rather than a child's start and result.
    """
    prepared = await workflow.execute_activity(
        stubs.await_summary,
        AwaitSummaryInput(workflow_id=run_id, request=summary_input, start=True),
        **_options.with_summary(_options.AWAIT_SUMMARY, "prepare summary"),
    )
    return prepared, "joined" if prepared.reused else "inline"


def _preparation_failed(error: ActivityError) -> ApplicationError:
    """A typed, content-free failure for a history summary that could not be prepared.

    A failure of the support calls makes the summary unavailable:
    `RequestCompositionError(REPRESENTATION_UNAVAILABLE)` with the provider's failure as its
    content-free cause (`planner.summary_choice.unprepared_summary`). Any other failure
    keeps its type (a storage outage stays `StorageUnavailableError`); details carry codes
    only.
    """
    cause: BaseException | None = error.cause
    while isinstance(cause, FailureError) and not (
        isinstance(cause, ApplicationError) and cause.type is not None
    ):
        cause = cause.cause
    if not isinstance(cause, ApplicationError) or cause.type == SUMMARY_RUN_LOST:
        cause = ApplicationError("the summary preparation failed", type=ErrorType.PROVIDER)
    unavailable = unprepared_summary(cause.type, decode_details(cause.details, cause.type))
    if unavailable is not None:
        return application_error(unavailable)
    return ApplicationError(
        "the history summary could not be prepared",
        *cause.details,
        type=cause.type,
        non_retryable=True,
    )
