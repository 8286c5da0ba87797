"""`Runtime.pending_approvals`, `Runtime.approve` and `Runtime.deny`.

A generation whose model called a tool that requires approval waits, in the
`awaiting_approval` stage, for a decision on each such call. These methods address the run
by its generation id (and Thread) or its workflow id, and send the decision as a Temporal
update; the workflow's validator refuses, typed, a call id that waits for nothing.
"""

from __future__ import annotations

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError

from contracts.approvals import (
    QUERY_PENDING_APPROVALS,
    UPDATE_APPROVE,
    UPDATE_DENY,
    PendingApproval,
    check_reason_code,
)
from crux._request import thread_id_of
from vocabulary.errors import ApprovalError, ConfigurationError
from vocabulary.ids import workflow_id_for


class ApprovalRuns:
    """Approval decisions on running generations (mixed into `Runtime`)."""

    _client: Client

    async def pending_approvals(
        self,
        generation_id: str | None = None,
        *,
        thread: object | None = None,
        workflow_id: str | None = None,
    ) -> list[PendingApproval]:
        """The tool calls of a generation that wait for a decision (names and call ids).

        Args:
            generation_id: The generation (with `thread` when it runs on a Thread).
            thread: The Thread handle or id the generation runs on.
            workflow_id: The run's workflow id, instead of the two above.

        Raises:
            ApprovalError: `not_found` when no such run exists.
        """
        handle = self._approval_handle(generation_id, thread, workflow_id)
        try:
            return await handle.query(QUERY_PENDING_APPROVALS, result_type=list[PendingApproval])
        except RPCError:
            raise ApprovalError("not_found", "no generation run has that id") from None

    async def approve(
        self,
        call_id: str,
        *,
        generation_id: str | None = None,
        thread: object | None = None,
        workflow_id: str | None = None,
    ) -> None:
        """Let a pending tool call run; returns once the run took the decision.

        Args:
            call_id: The call's id (from `pending_approvals`).
            generation_id: The generation (with `thread` when it runs on a Thread).
            thread: The Thread handle or id the generation runs on.
            workflow_id: The run's workflow id, instead of the two above.

        Raises:
            ApprovalError: `not_found`, `not_awaiting` or `unknown_call`.
        """
        handle = self._approval_handle(generation_id, thread, workflow_id)
        await _decide(handle, UPDATE_APPROVE, [call_id])

    async def deny(
        self,
        call_id: str,
        reason_code: str | None = None,
        *,
        generation_id: str | None = None,
        thread: object | None = None,
        workflow_id: str | None = None,
    ) -> None:
        """Refuse a pending tool call: it never runs; the model sees the denial.

        The model's tool result is `{"error":"denied","reason":"<reason_code>"}` (without
        `reason` when none is given), committed with the turn.

        Args:
            call_id: The call's id (from `pending_approvals`).
            reason_code: A short identifier (lower-case letters, digits, `_`, `-`, `.`;
                at most 64), never free text: the model and the Thread see it.
            generation_id: The generation (with `thread` when it runs on a Thread).
            thread: The Thread handle or id the generation runs on.
            workflow_id: The run's workflow id, instead of the two above.

        Raises:
            ApprovalError: `not_found`, `not_awaiting`, `unknown_call` or `invalid_reason`.
        """
        check_reason_code(reason_code)
        handle = self._approval_handle(generation_id, thread, workflow_id)
        await _decide(handle, UPDATE_DENY, [call_id, reason_code])

    def _approval_handle(
        self, generation_id: str | None, thread: object | None, workflow_id: str | None
    ) -> WorkflowHandle[object, object]:
        if (workflow_id is None) == (generation_id is None):
            raise ConfigurationError("name the run by generation_id or by workflow_id")
        if workflow_id is None:
            assert generation_id is not None
            workflow_id = workflow_id_for(generation_id, thread_id_of(thread))
        return self._client.get_workflow_handle(workflow_id)


async def _decide(handle: WorkflowHandle[object, object], update: str, args: list[object]) -> None:
    if not isinstance(args[0], str) or not args[0]:
        raise ApprovalError("unknown_call", "a call id is a non-empty string")
    try:
        await handle.execute_update(update, args=args)  # pyright: ignore[reportUnknownMemberType]
    except WorkflowUpdateFailedError as error:
        cause = error.cause
        if isinstance(cause, ApplicationError) and cause.type == ApprovalError.__name__:
            code, _, message = cause.message.partition(": ")
            raise ApprovalError(code, message) from None
        raise ApprovalError("not_awaiting", "the run did not take the decision") from None
    except RPCError:
        # No such run, or it has already closed: either way nothing awaits a decision.
        try:
            await handle.describe()
        except RPCError:
            raise ApprovalError("not_found", "no generation run has that id") from None
        raise ApprovalError("not_awaiting", "the run awaits no approval") from None


__all__ = ["ApprovalRuns", "PendingApproval"]
