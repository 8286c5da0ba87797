"""`SummaryWorkflow`: prepare one summary artifact of a Thread prefix.

Started as a child of a generation, either waited on (inline preparation, the request needs
it now) or abandoned (after-response maintenance). Its workflow id names the prefix, so
concurrent requests for the same artifact coalesce on one run.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    # Passed through: pydantic models only, deterministic at import.
    from activities.contracts import (
        ACTIVITY_PREPARE_SUMMARY,
        PrepareSummaryInput,
        PrepareSummaryResult,
    )
    from crux.errors import ConfigurationError, CruxError, ErrorType
    from workflows import _options, _search
    from workflows._decode import decode_input


SUMMARY_WORKFLOW = "SummaryWorkflow"
"""Workflow type name (children are started by name: the run takes a raw payload)."""


def summary_workflow_id(request: PrepareSummaryInput) -> str:
    """The workflow id of the preparation of one prefix summary."""
    return (
        f"crux/summary/{request.thread_id}/{request.through_id}/{request.strategy}/{request.model}"
    )


@workflow.defn(name=SUMMARY_WORKFLOW, failure_exception_types=[CruxError])
class SummaryWorkflow:
    """Prepare (or find) the summary of a Thread prefix; text stays in PostgreSQL."""

    @workflow.run
    async def run(self, raw: RawValue) -> PrepareSummaryResult:
        """Run the preparation activity and return the content-free artifact.

        The input is decoded and validated here, so malformed input from any client fails
        the workflow with a content-free `ConfigurationError` instead of its task.
        """
        try:
            request = decode_input(raw, PrepareSummaryInput, what="summary input")
        except ConfigurationError as error:
            raise ApplicationError(
                str(error), type=ErrorType.CONFIGURATION, non_retryable=True
            ) from None
        workflow.set_current_details(f"summarising through {request.through_id}")
        own_attributes = workflow.patched(_search.PATCH)
        if own_attributes:
            _search.upsert(
                _search.identity(
                    thread_id=request.thread_id,
                    generation_id=request.generation_id,
                    model=request.model,
                    stage="summarising",
                )
            )
        try:
            prepared = await workflow.execute_activity(
                ACTIVITY_PREPARE_SUMMARY,
                request,
                result_type=PrepareSummaryResult,
                **_options.with_summary(_options.PREPARE_SUMMARY, f"summary {request.strategy}"),
            )
        except BaseException as error:
            # Failures and cancellations only: an eviction must unwind without commands.
            if own_attributes and (isinstance(error, Exception) or is_cancelled_exception(error)):
                stage = "cancelled" if is_cancelled_exception(error) else "failed"
                _search.upsert([_search.STAGE.value_set(stage)])
            raise
        if own_attributes:
            _search.upsert([_search.STAGE.value_set("completed")])
        return prepared
