"""Human approval of tool calls, inside the generation workflow.

Before a call of a tool named in `approval_tools` runs, the run waits in the
`awaiting_approval` stage until an `approve` or `deny` update names the call's id, or the
approval timeout passes (a denial with reason `timeout`). Every call of a round is pending
from the start of the round, so they can be decided in any order; each waits for its own
decision. Only tool names and call ids are shown; the arguments never leave PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio import workflow

from contracts.activities import InvokeModelResult, ReadRequestResult, RunToolInput
from contracts.approvals import (
    MAX_CALL_ID_LENGTH,
    QUERY_PENDING_APPROVALS,
    TIMEOUT_REASON,
    UPDATE_APPROVE,
    UPDATE_DENY,
    PendingApproval,
    check_reason_code,
)
from contracts.generation import DEFAULT_APPROVAL_TIMEOUT_SECONDS, GenerationInput
from vocabulary.errors import ApprovalError
from vocabulary.stages import Stage
from workflows._stages import StageReporter


@dataclass(frozen=True)
class Decision:
    """What was decided for one call: run it, or stage the denial with its reason."""

    approved: bool
    reason_code: str | None = None


class Approvals:
    """Pending approvals of one run, their decisions, and the handlers that take them."""

    def __init__(self) -> None:
        self._pending: dict[str, PendingApproval] = {}
        self._decisions: dict[str, Decision] = {}
        self._deadline: datetime | None = None

    def register(self) -> None:
        """Install the `approve` / `deny` updates and the `pending_approvals` query.

        Installed dynamically (not as decorated methods) so that the workflow class keeps
        only its own steps; the names are those of `contracts.approvals`.
        """
        workflow.set_update_handler(UPDATE_APPROVE, self._approve, validator=self._check)  # pyright: ignore[reportUnknownMemberType]
        workflow.set_update_handler(UPDATE_DENY, self._deny, validator=self._check_denial)  # pyright: ignore[reportUnknownMemberType]
        workflow.set_query_handler(QUERY_PENDING_APPROVALS, self.pending)  # pyright: ignore[reportUnknownMemberType]

    def pending(self) -> list[PendingApproval]:
        """The calls waiting for a decision, in call order."""
        return list(self._pending.values())

    def open_round(
        self,
        request: GenerationInput,
        read: ReadRequestResult,
        invoked: InvokeModelResult,
        tool_round: int,
    ) -> None:
        """Make the round's calls of tools that require approval pending.

        A tool requires approval when the input names it in `approval_tools` or the
        worker declared it so (`read.approval_tools`). Nothing happens (no command, no
        timer) for a round without such calls, so runs without approvals are unchanged.

        Args:
            request: The generation input (its approval tools and timeout).
            read: The read of the revision (the worker's declarations).
            invoked: The attempt whose tool calls form the round.
            tool_round: The round's number (1-based).
        """
        required = {*request.approval_tools, *read.approval_tools}
        if not required:
            return
        # Decisions hold for their round only: an approval never carries over to another
        # call (a turn whose call ids repeat is refused when staged anyway).
        self._pending = {}
        self._decisions = {}
        names = invoked.tool_names
        for index, call_id in enumerate(invoked.tool_call_ids):
            name = names[index] if index < len(names) else ""
            if name and name in required:
                self._pending[call_id] = PendingApproval(
                    call_id=call_id, tool_name=name, tool_round=tool_round
                )
        timeout = request.approval_timeout_seconds or DEFAULT_APPROVAL_TIMEOUT_SECONDS
        self._deadline = workflow.now() + timedelta(seconds=timeout)

    async def decided(self, stages: StageReporter, call_id: str, arg: RunToolInput) -> RunToolInput:
        """The tool call to run, once decided: as is, or denied.

        A call that needs no approval runs as is; a denied one never runs its handler
        (the denial is staged as its result).
        """
        if call_id not in self._pending and call_id not in self._decisions:
            return arg
        decision = await self._decision(stages, call_id)
        if decision.approved:
            return arg
        return arg.model_copy(
            update={"denied": True, "denial_reason": decision.reason_code, "policy": None}
        )

    async def _decision(self, stages: StageReporter, call_id: str) -> Decision:
        """Wait for the call's decision (visibly), or deny it when the timeout passes."""
        entry = self._pending.get(call_id)
        if entry is not None:
            stages.set(
                Stage.AWAITING_APPROVAL,
                f"round {entry.tool_round}: {entry.tool_name} call {call_id}",
            )
            stages.publish()
            remaining = (self._deadline - workflow.now()).total_seconds() if self._deadline else 0.0
            try:
                if remaining <= 0:
                    raise TimeoutError
                await workflow.wait_condition(lambda: call_id in self._decisions, timeout=remaining)
            except TimeoutError:
                self._decide(call_id, Decision(approved=False, reason_code=TIMEOUT_REASON))
        return self._decisions[call_id]

    def _decide(self, call_id: str, decision: Decision) -> None:
        if call_id in self._pending:
            del self._pending[call_id]
            self._decisions[call_id] = decision

    def _check(self, call_id: str) -> None:
        """Reject, typed, a decision for a call that does not wait for one."""
        if not self._pending:
            raise ApprovalError("not_awaiting", "the run awaits no approval")
        if (
            not isinstance(call_id, str)  # pyright: ignore[reportUnnecessaryIsInstance]
            or len(call_id) > MAX_CALL_ID_LENGTH
            or call_id not in self._pending
        ):
            raise ApprovalError("unknown_call", "no pending tool call has that id")

    def _check_denial(self, call_id: str, reason_code: str | None = None) -> None:
        self._check(call_id)
        check_reason_code(reason_code)

    def _approve(self, call_id: str) -> None:
        self._decide(call_id, Decision(approved=True))

    def _deny(self, call_id: str, reason_code: str | None = None) -> None:
        self._decide(call_id, Decision(approved=False, reason_code=reason_code))
