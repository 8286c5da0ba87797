"""Caller-side approval of tool calls: list, approve and deny the calls a run waits on.

A run names its pending calls by tool name and call id only. Decisions are workflow
updates, validated by the run: a call id it does not wait on, or a run that awaits no
approval, is rejected with a typed, content-free `ConfigurationError`.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from contracts.approvals import (
    QUERY_PENDING_APPROVALS,
    UPDATE_APPROVE,
    UPDATE_DENY,
    ApprovalDecision,
    PendingApproval,
    check_reason_code,
)
from vocabulary.errors import ConfigurationError
from vocabulary.ids import (
    MAX_GENERATION_ID_LENGTH,
    MAX_SCOPE_ID_LENGTH,
    MAX_WORKFLOW_ID_BYTES,
    check_wire_id,
    workflow_id_for,
)


def approval_workflow_id(
    generation_id: str | None, thread: object | None, workflow_id: str | None
) -> str:
    """The workflow id of the run asked about (by workflow id, or generation and Thread).

    Raises:
        ConfigurationError: Neither, or both, were given.
    """
    if (workflow_id is None) == (generation_id is None):
        raise ConfigurationError("name the run by generation id (and thread) or workflow id")
    if workflow_id is not None:
        return check_wire_id(workflow_id, "workflow_id", limit=MAX_WORKFLOW_ID_BYTES)
    assert generation_id is not None
    thread_id = thread if thread is None or isinstance(thread, str) else getattr(thread, "id", None)
    if thread is not None and not isinstance(thread_id, str):
        raise ConfigurationError("thread must be a Thread handle or an id")
    check_wire_id(generation_id, "generation_id", limit=MAX_GENERATION_ID_LENGTH)
    if thread_id is not None:
        check_wire_id(thread_id, "thread", limit=MAX_SCOPE_ID_LENGTH)
    return workflow_id_for(generation_id, thread_id)


async def pending_approvals(
    client: Client, workflow_id: str, *, rpc_timeout: timedelta | None = None
) -> list[PendingApproval]:
    """The calls the run waits on (empty when it waits on none).

    Args:
        client: The Temporal client.
        workflow_id: The run's workflow id.
        rpc_timeout: How long to wait for a worker to answer (the server's default when
            omitted).
    """
    handle: WorkflowHandle[object, object] = client.get_workflow_handle(workflow_id)
    try:
        return await handle.query(
            QUERY_PENDING_APPROVALS, result_type=list[PendingApproval], rpc_timeout=rpc_timeout
        )
    except RPCError as error:
        raise _not_found(error) from None


async def decide(
    client: Client,
    workflow_id: str,
    call_id: str,
    *,
    approve: bool,
    reason_code: str | None,
    rpc_timeout: timedelta | None = None,
) -> None:
    """Approve or deny one pending call (`rpc_timeout`: how long to wait for a worker).

    Raises:
        ConfigurationError: An invalid reason code, an unknown run, a call the run does
            not wait on, or a run that awaits no approval.
    """
    if reason_code is not None:
        check_reason_code(reason_code)
    check_wire_id(call_id, "call id", limit=256)
    decision = ApprovalDecision(call_id=call_id, reason_code=reason_code)
    handle: WorkflowHandle[object, object] = client.get_workflow_handle(workflow_id)
    try:
        await handle.execute_update(  # pyright: ignore[reportUnknownMemberType]
            UPDATE_APPROVE if approve else UPDATE_DENY, decision, rpc_timeout=rpc_timeout
        )
    except WorkflowUpdateFailedError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type == "ConfigurationError":
            raise ConfigurationError(cause.message) from None
        raise ConfigurationError("the run did not accept the decision") from None
    except RPCError as error:
        raise _not_found(error) from None


def _not_found(error: RPCError) -> Exception:
    if error.status == RPCStatusCode.NOT_FOUND:
        return ConfigurationError("no running generation has that id")
    return error


class ToolApprovals:
    """The approval decisions of runs (`Runtime.pending_approvals`, `approve`, `deny`).

    Args:
        client: The Temporal client the runs are reached through.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    async def pending(
        self, generation_id: str | None, *, thread: object | None, workflow_id: str | None
    ) -> list[PendingApproval]:
        """The tool calls the run waits on (`Runtime.pending_approvals`)."""
        target = approval_workflow_id(generation_id, thread, workflow_id)
        return await pending_approvals(self._client, target)

    async def decide(
        self,
        call_id: str,
        generation_id: str | None,
        *,
        thread: object | None,
        workflow_id: str | None,
        approve: bool,
        reason_code: str | None = None,
    ) -> None:
        """Approve or deny one pending call (`Runtime.approve`, `Runtime.deny`)."""
        target = approval_workflow_id(generation_id, thread, workflow_id)
        await decide(self._client, target, call_id, approve=approve, reason_code=reason_code)
