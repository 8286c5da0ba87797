"""`SummaryWorkflow`: prepare one summary artifact of a Thread or transcript prefix.

Started as a child of a generation, either waited on (inline preparation, the request needs
it now) or abandoned (after-response maintenance). Its workflow id names the prefix, so
concurrent requests for the same artifact coalesce on one run.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

from contracts import stubs
from contracts.activities import (
    SUMMARY_WORKFLOW,
    PrepareSummaryInput,
    PrepareSummaryResult,
)
from contracts.decoding import NO_INPUT, decode_input
from contracts.failures import application_error
from contracts.generation import DEFAULT_STORAGE_WAIT_SECONDS
from vocabulary.errors import (
    ConfigurationError,
    CruxError,
    ErrorType,
    StorageUnavailableError,
)
from vocabulary.ids import summary_key
from vocabulary.stages import Stage
from workflows import _options, _search, _ui
from workflows._storage_wait import INITIAL_BACKOFF, MAX_BACKOFF

__all__ = ["SUMMARY_WORKFLOW", "SummaryWorkflow", "summary_workflow_id"]


def summary_workflow_id(request: PrepareSummaryInput) -> str:
    """The workflow id of the preparation of one prefix summary (`crux.models.summary_key`).

    A transcript's summary is keyed by the Thread its generation names (empty ad hoc) and
    its content-derived `through_id` (`tx-...`), which digests its scope.

    Args:
        request: The preparation.
    """
    return "crux/summary/" + summary_key(
        request.thread_id or "", request.through_id, request.strategy, request.model
    )


# Outside the SDK's sandbox, as `ManagedGenerationWorkflow` (see there).
@workflow.defn(name=SUMMARY_WORKFLOW, failure_exception_types=[CruxError], sandboxed=False)
class SummaryWorkflow:
    """Prepare (or find) the summary of a Thread prefix; text stays in PostgreSQL."""

    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> PrepareSummaryResult:
        """Run the preparation activity and return the content-free artifact.

        The input is decoded and validated here, so malformed input from any client fails
        the workflow with a content-free `ConfigurationError` instead of its task; the
        refused run ends `failed` in its current details and `CruxStage`.
        """
        try:
            request = decode_input(raw, PrepareSummaryInput, what="summary input")
        except ConfigurationError as error:
            refusal = application_error(error)
            workflow.set_current_details(_ui.failure_details(Stage.FAILED.value, refusal))
            _search.upsert([_search.STAGE.value_set(Stage.FAILED.value)])
            raise refusal from None
        workflow.set_current_details(f"stage: summarising (through {request.through_id})")
        _search.upsert(
            _search.identity(
                thread_id=request.thread_id,
                generation_id=request.generation_id,
                model=request.model,
                stage=Stage.SUMMARISING.value,
            )
        )
        try:
            prepared = await self._prepare(request)
        except BaseException as error:
            # Failures and cancellations only: an eviction must unwind without commands.
            if isinstance(error, Exception) or is_cancelled_exception(error):
                stage = Stage.CANCELLED if is_cancelled_exception(error) else Stage.FAILED
                # Not "summarising ..." forever: the UI shows how the run ended.
                workflow.set_current_details(_ui.failure_details(stage.value, error))
                _search.upsert([_search.STAGE.value_set(stage.value)])
            raise
        workflow.set_current_details(_ui.summary_completion_details(prepared))
        _search.upsert([_search.STAGE.value_set(Stage.COMPLETED.value)])
        return prepared

    async def _prepare(self, request: PrepareSummaryInput) -> PrepareSummaryResult:
        """Run the preparation activity, waiting out storage outages (visibly)."""
        backoff = INITIAL_BACKOFF
        blocked_since = None
        while True:
            try:
                return await workflow.execute_activity(
                    stubs.prepare_summary,
                    request,
                    **_options.with_summary(
                        _options.PREPARE_SUMMARY_RUN, f"summary {request.strategy}"
                    ),
                )
            except ActivityError as error:
                cause = error.cause
                if not (
                    isinstance(cause, ApplicationError)
                    and cause.type == ErrorType.STORAGE_UNAVAILABLE
                ):
                    raise
            # Storage is down: the artifact (and the support calls it cost) is not lost by
            # waiting, so wait, visibly, up to the same ceiling as a generation's stages.
            blocked_since = blocked_since or workflow.now()
            waited = workflow.now() - blocked_since
            if waited >= timedelta(seconds=DEFAULT_STORAGE_WAIT_SECONDS):
                raise application_error(
                    StorageUnavailableError(
                        f"storage unavailable for {int(waited.total_seconds())} s"
                        " while summarising",
                        stage=Stage.SUMMARISING.value,
                    )
                )
            workflow.set_current_details(
                f"stage: {Stage.STORAGE_BLOCKED} (summarising through {request.through_id})"
            )
            _search.upsert([_search.STAGE.value_set(Stage.STORAGE_BLOCKED.value)])
            await workflow.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)
