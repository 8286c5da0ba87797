"""Operator control from the caller's side: find a run, show it, retry or abandon it.

A run is named by its workflow id or by its generation id (with the Thread, or found
through the `CruxGenerationId` search attribute). Only the Temporal client is needed: the
status comes from the workflow's `describe` query while it runs, and from its search
attributes and execution status once it ended. Everything shown is ids, names and stages.
"""

from __future__ import annotations

from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from contracts.operator import QUERY_DESCRIBE, UPDATE_ABANDON, UPDATE_RETRY_NOW, GenerationStatus
from vocabulary.details import decode_details
from vocabulary.errors import ErrorType, GenerationStateError
from vocabulary.ids import workflow_id_for

_STAGE = SearchAttributeKey.for_keyword("CruxStage")
_THREAD = SearchAttributeKey.for_keyword("CruxThreadId")
_GENERATION = SearchAttributeKey.for_keyword("CruxGenerationId")
_MODEL = SearchAttributeKey.for_keyword("CruxModel")
_GENERATION_WORKFLOW = "ManagedGenerationWorkflow"
_CODES = ("not_found", "not_running", "not_waiting", "ambiguous")


async def find_run(
    client: Client, run_id: str, thread_id: str | None = None
) -> tuple[WorkflowHandle[object, object], WorkflowExecutionDescription]:
    """The generation run `run_id` names (a workflow id, or a generation id).

    Raises:
        GenerationStateError: `not_found`, or `ambiguous` when a generation id names runs
            on several Threads and no Thread was given.
    """
    candidates = [workflow_id_for(run_id, thread_id)] if thread_id else [run_id]
    if not thread_id:
        candidates.append(workflow_id_for(run_id, None))
    for workflow_id in candidates:
        found = await _describe(client, workflow_id)
        if found is not None:
            return found
    if thread_id is None:
        escaped = run_id.replace("\\", "\\\\").replace('"', '\\"')
        query = f'WorkflowType = "{_GENERATION_WORKFLOW}" AND CruxGenerationId = "{escaped}"'
        matches = {execution.id async for execution in client.list_workflows(query, limit=10)}
        if len(matches) > 1:
            raise GenerationStateError(
                "ambiguous", f"{len(matches)} runs have this generation id; name the Thread"
            )
        for workflow_id in matches:
            found = await _describe(client, workflow_id)
            if found is not None:
                return found
    raise GenerationStateError("not_found", "no generation run has this id")


async def _describe(
    client: Client, workflow_id: str
) -> tuple[WorkflowHandle[object, object], WorkflowExecutionDescription] | None:
    handle = client.get_workflow_handle(workflow_id)
    try:
        described = await handle.describe()
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    if described.workflow_type != _GENERATION_WORKFLOW:
        return None
    return handle, described


async def run_status(client: Client, run_id: str, thread_id: str | None = None) -> GenerationStatus:
    """The content-free status of a run (see `GenerationStatus`).

    Raises:
        GenerationStateError: `not_found` or `ambiguous`.
    """
    handle, described = await find_run(client, run_id, thread_id)
    if described.status == WorkflowExecutionStatus.RUNNING:
        status = await handle.query(QUERY_DESCRIBE, result_type=GenerationStatus)
        return status.model_copy(update={"workflow_id": described.id})
    attributes = described.typed_search_attributes
    return GenerationStatus(
        workflow_id=described.id,
        stage=attributes.get(_STAGE) or "unknown",
        generation_id=attributes.get(_GENERATION),
        thread_id=attributes.get(_THREAD),
        model=attributes.get(_MODEL),
        running=False,
        status=described.status.name if described.status is not None else "UNKNOWN",
    )


async def operate(
    client: Client, action: str, run_id: str, thread_id: str | None = None
) -> GenerationStatus:
    """Send `retry_now` or `abandon` to a waiting run; returns its status at acceptance.

    Raises:
        GenerationStateError: `not_found`, `ambiguous`, `not_running` (it ended) or
            `not_waiting` (the run rejected the update: it is not waiting for storage).
    """
    if action not in (UPDATE_RETRY_NOW, UPDATE_ABANDON):
        raise ValueError(f"unknown operator action {action!r}")
    handle, described = await find_run(client, run_id, thread_id)
    if described.status != WorkflowExecutionStatus.RUNNING:
        raise GenerationStateError(
            "not_running", f"{action}: the run has ended", workflow_id=described.id
        )
    try:
        status: GenerationStatus = await handle.execute_update(  # pyright: ignore[reportUnknownMemberType]
            action, result_type=GenerationStatus
        )
    except WorkflowUpdateFailedError as error:
        raise _rejection(error, action, described.id) from None
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            raise GenerationStateError(
                "not_running", f"{action}: the run has ended", workflow_id=described.id
            ) from None
        raise
    return status.model_copy(update={"workflow_id": described.id})


def _rejection(error: WorkflowUpdateFailedError, action: str, workflow_id: str) -> Exception:
    cause = error.cause
    if isinstance(cause, ApplicationError) and cause.type == ErrorType.GENERATION_STATE:
        code = decode_details(cause.details, cause.type).code or "not_waiting"
        if code in _CODES:
            return GenerationStateError(
                code,
                f"{action} was rejected by the run",
                workflow_id=workflow_id,
            )
    return GenerationStateError(
        "not_waiting", f"{action} was rejected by the run", workflow_id=workflow_id
    )


class OperatorRuns:
    """`Runtime` methods that look at and steer runs already started."""

    _client: Client

    async def generation_status(
        self, run_id: str, *, thread_id: str | None = None
    ) -> GenerationStatus:
        """Where a run stands: stage, details, attempt, ids, model, wait state (no content).

        Args:
            run_id: The workflow id, or the generation id.
            thread_id: The generation's Thread (not needed for a workflow id, or when the
                generation id is unique).

        Raises:
            GenerationStateError: `not_found`, or `ambiguous` (name the Thread).
        """
        return await run_status(self._client, run_id, thread_id)

    async def retry_generation(
        self, run_id: str, *, thread_id: str | None = None
    ) -> GenerationStatus:
        """Have a run waiting for storage (or its commit) try again now.

        Raises:
            GenerationStateError: `not_found`, `ambiguous`, `not_running` or `not_waiting`.
        """
        return await operate(self._client, UPDATE_RETRY_NOW, run_id, thread_id)

    async def abandon_generation(
        self, run_id: str, *, thread_id: str | None = None
    ) -> GenerationStatus:
        """Drop a waiting run's staged turn; nothing is committed.

        The run's caller gets `ThreadCommitError` with code `abandoned`.

        Raises:
            GenerationStateError: `not_found`, `ambiguous`, `not_running` or `not_waiting`.
        """
        return await operate(self._client, UPDATE_ABANDON, run_id, thread_id)
