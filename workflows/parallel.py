"""`ParallelGenerationWorkflow`: several managed generations as child workflows of one run.

Each member is a child `ManagedGenerationWorkflow` with a workflow id under the parent's
(`crux/parallel/<id>/<member>`), so a restarted or repeated run addresses the same children.
The run itself goes only by its documented id, `crux/parallel/<id>`: under another one it is
refused (its members would be refused too, since each checks that its parent is the run
its input names).
Members run at once; one member's failure becomes its own content-free failure record and
never touches the others, whose turns commit as usual. Cancelling the parent cancels the
children still running. Payloads are ids, figures and codes only.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import (
    ApplicationError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)
from temporalio.workflow import ChildWorkflowHandle, ParentClosePolicy

from contracts.decoding import NO_INPUT, decode_input
from contracts.failures import application_error, typed_cause
from contracts.generation import CompositionSpec, GenerationOutcome
from contracts.parallel import (
    MemberFailure,
    MemberOutcome,
    ParallelInput,
    ParallelMember,
    ParallelOutcome,
)
from contracts.ui import generation_details, generation_summary
from vocabulary.details import decode_details
from vocabulary.errors import ConfigurationError, CruxError, ErrorType
from vocabulary.ids import member_workflow_id, parallel_workflow_id
from vocabulary.stages import Stage
from workflows import _ui

PARALLEL_WORKFLOW = "ParallelGenerationWorkflow"
"""The registered name of the parallel workflow."""

GENERATION_WORKFLOW = "ManagedGenerationWorkflow"


# Outside the SDK's sandbox, as `ManagedGenerationWorkflow` (see there).
@workflow.defn(name=PARALLEL_WORKFLOW, failure_exception_types=[CruxError], sandboxed=False)
class ParallelGenerationWorkflow:
    """Run every member as a child generation and report each one's outcome or failure."""

    def __init__(self) -> None:
        self._states: dict[str, str] = {}

    @workflow.query(name="get_members")
    def get_members(self) -> dict[str, str]:
        """Each member's state: `pending`, `running`, `completed` or `failed`."""
        return dict(self._states)

    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> ParallelOutcome:
        """Run the members at once and return one record per member, in input order.

        The input is decoded here, not by the data converter, so that whatever a client
        sends fails the run with a typed, content-free `ConfigurationError` instead of
        retrying its first task forever; so does a run started under another id than
        `crux/parallel/<parallel id>`. A refused run's current details say so.
        """
        try:
            request = admitted(raw)
        except ConfigurationError as error:
            refusal = application_error(error)
            workflow.set_current_details(_ui.failure_details(Stage.FAILED.value, refusal))
            raise refusal from None
        self._states = {member.name: "pending" for member in request.members}
        workflow.set_current_details(f"{len(request.members)} members")
        # Every member runs as its own concurrent step (all children start in the same
        # workflow task) and catches its own failure, so no member's failure loses a
        # sibling's outcome. If this run is cancelled, it ends cancelled and its close
        # policy asks the children still running to stop.
        finished: dict[str, MemberOutcome] = {}
        steps = [self._run_member(request.parallel_id, member) for member in request.members]
        for step in workflow.as_completed(steps):
            record = await step
            finished[record.name] = record
        members = [finished[member.name] for member in request.members]
        failed = sum(1 for member in members if member.failure is not None)
        workflow.set_current_details(
            f"{len(members)} members: {len(members) - failed} completed, {failed} failed"
        )
        return ParallelOutcome(parallel_id=request.parallel_id, members=tuple(members))

    async def _start_member(
        self, parallel_id: str, member: ParallelMember
    ) -> tuple[MemberOutcome, ChildWorkflowHandle[Any, GenerationOutcome] | None]:
        # Children are addressed by the parallel id (not by this run's own id), so the same
        # parallel id always names the same children, whoever started the run.
        parent_id = parallel_workflow_id(parallel_id)
        child_id = member_workflow_id(parent_id, member.name)
        generation = member.generation.model_copy(
            update={
                "composition": CompositionSpec(parent_workflow_id=parent_id, member=member.name)
            }
        )
        record = MemberOutcome(
            name=member.name,
            workflow_id=child_id,
            generation_id=generation.generation_id,
            thread_id=generation.thread_id,
        )
        try:
            handle = await workflow.start_child_workflow(
                GENERATION_WORKFLOW,
                generation.start_payload(),
                id=child_id,
                result_type=GenerationOutcome,
                # A parent that ends (cancelled, terminated, timed out) asks its children to
                # stop, so they discard their staged output instead of running on alone.
                parent_close_policy=ParentClosePolicy.REQUEST_CANCEL,
                static_summary=generation_summary(generation),
                static_details=generation_details(generation),
            )
        except WorkflowAlreadyStartedError:
            self._states[member.name] = "failed"
            failure = MemberFailure(kind="already_running", non_retryable=False)
            return record.model_copy(update={"failure": failure}), None
        self._states[member.name] = "running"
        return record, handle

    async def _run_member(self, parallel_id: str, member: ParallelMember) -> MemberOutcome:
        record, handle = await self._start_member(parallel_id, member)
        if handle is None:
            return record
        try:
            outcome = await handle
        except ChildWorkflowError as error:
            if workflow.cancellation_reason() is not None and is_cancelled_exception(error):
                # This run was cancelled: it ends cancelled, and its close policy asks the
                # children still running to stop too.
                raise
            self._states[record.name] = "failed"
            return record.model_copy(update={"failure": member_failure(error)})
        self._states[record.name] = "completed"
        return record.model_copy(update={"outcome": outcome})


def admitted(raw: RawValue) -> ParallelInput:
    """The input of this run, if it is valid and the run goes by its documented id.

    Raises:
        ConfigurationError: An invalid input, or `workflow_id_mismatch`.
    """
    request = decode_input(raw, ParallelInput, what="parallel input")
    expected = parallel_workflow_id(request.parallel_id)
    if workflow.info().workflow_id != expected:
        raise ConfigurationError(
            f"this parallel run goes only by the workflow id {expected!r}: start it so",
            code="workflow_id_mismatch",
            diagnostics={"expected_workflow_id": expected},
        )
    return request


def member_failure(error: ChildWorkflowError) -> MemberFailure:
    """The content-free record of a child's failure: its typed cause, or how it ended."""
    cause = typed_cause(error.cause) if error.cause is not None else None
    if isinstance(cause, ApplicationError):
        return MemberFailure(
            error_type=cause.type,
            message=cause.message,
            non_retryable=cause.non_retryable,
            details=decode_details(cause.details, cause.type),
        )
    if cause is not None:
        return MemberFailure(kind=cause, non_retryable=False)
    return MemberFailure(error_type=ErrorType.INTERNAL, message="the generation failed")
