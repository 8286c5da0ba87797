"""Operator control of generation runs: status, retry now, abandon.

A run is named by its workflow id (`crux/gen/...`) or by its generation id (with the
Thread for a Thread generation); both resolve to the same workflow id the facade starts.
"""

from __future__ import annotations

from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from contracts.failures import rebuilt
from contracts.operator import GenerationStatus
from vocabulary.errors import ConfigurationError, OperatorError
from vocabulary.ids import (
    MAX_SCOPE_ID_LENGTH,
    MAX_WORKFLOW_ID_BYTES,
    check_wire_id,
    workflow_id_for,
)

_WORKFLOW_PREFIX = "crux/gen/"


def resolve_workflow_id(run: str, thread: str | None = None) -> str:
    """The workflow id of `run`: a workflow id as given, a generation id resolved.

    Raises:
        ConfigurationError: `run` or `thread` is not an id (not a string, empty, padded,
            holding control characters or unstorable text), or the workflow id would
            exceed Temporal's limit.
    """
    check_wire_id(run, "run", limit=MAX_WORKFLOW_ID_BYTES)
    if run.startswith(_WORKFLOW_PREFIX):
        return run
    if thread is not None:
        check_wire_id(thread, "thread", limit=MAX_SCOPE_ID_LENGTH)
    workflow_id = workflow_id_for(run, thread)
    if len(workflow_id.encode()) > MAX_WORKFLOW_ID_BYTES:
        raise ConfigurationError(f"the workflow id would exceed {MAX_WORKFLOW_ID_BYTES} bytes")
    return workflow_id


class RunOperator:
    """Operator control of generation runs (`Runtime` and `crux generation` delegate here).

    Args:
        client: The Temporal client the runs are reached through.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    async def _operated_handle(self, run: str, thread: str | None) -> WorkflowHandle[Any, Any]:
        workflow_id = resolve_workflow_id(run, thread)
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            await handle.describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise OperatorError("not_found", f"no generation run {workflow_id}") from None
            raise
        return handle

    async def generation_status(self, run: str, *, thread: str | None = None) -> GenerationStatus:
        """The content-free status of a run (`Runtime.generation_status`)."""
        handle = await self._operated_handle(run, thread)
        return await handle.query("describe", result_type=GenerationStatus)

    async def retry_generation(self, run: str, *, thread: str | None = None) -> str:
        """Make a waiting run try again at once (`Runtime.retry_generation`)."""
        return await self._update(run, thread, "retry_now")

    async def abandon_generation(self, run: str, *, thread: str | None = None) -> str:
        """Give up a waiting run (`Runtime.abandon_generation`)."""
        return await self._update(run, thread, "abandon")

    async def _update(self, run: str, thread: str | None, name: str) -> str:
        handle = await self._operated_handle(run, thread)
        try:
            result = await handle.execute_update(name, result_type=str)  # pyright: ignore[reportUnknownMemberType]
            return str(result)
        except WorkflowUpdateFailedError as error:
            cause = error.cause
            refused = rebuilt(cause) if isinstance(cause, ApplicationError) else None
            if isinstance(refused, OperatorError):
                # The validator's own words: which command, and the stage it found.
                raise refused from None
            raise
        except RPCError as error:
            # A run that already ended takes no updates.
            if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.FAILED_PRECONDITION):
                raise OperatorError("wrong_stage", f"{name} refused: the run has ended") from None
            raise
