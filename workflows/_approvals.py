"""Human approval of tool calls inside a generation run.

Calls of tools named in `GenerationInput.approval_tools` wait, each for its own decision,
in the `awaiting_approval` stage. Decisions arrive as updates (`approve`, `deny`), so they
are history: a worker restart replays them and the run carries on where it stood. A call
whose decision does not come within `approval_timeout_seconds` is denied with reason
`timeout`. Only tool names and call ids are ever shown, never arguments.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue

from contracts.approvals import (
    DEFAULT_DENIAL_REASON,
    TIMEOUT_REASON,
    ApprovalDecision,
    PendingApproval,
)
from contracts.decoding import decode_input
from contracts.failures import application_error
from contracts.generation import GenerationInput
from vocabulary.errors import ConfigurationError
from vocabulary.stages import Stage
from workflows._stages import StageReporter

_APPROVED = ""
"""The recorded decision of an approved call (a denial records its reason code)."""


def decision_of(raw: RawValue) -> ApprovalDecision:
    """The decision an `approve` or `deny` update carries, or its typed refusal.

    Decoded here rather than by the data converter, so that a malformed decision from any
    client (an unknown field, a reason code that is free text) is refused as a
    `ConfigurationError` with its code and field paths, not an untyped decoding failure.
    """
    try:
        return decode_input(raw, ApprovalDecision, what="approval decision")
    except ConfigurationError as error:
        raise application_error(error) from None


class Approvals:
    """The calls of the current round that wait for a decision, and the decisions."""

    def __init__(self) -> None:
        self._pending: dict[str, str] = {}
        self._decisions: dict[str, str] = {}

    def pending(self) -> list[PendingApproval]:
        """The calls still waiting, in call order."""
        return [
            PendingApproval(call_id=call_id, tool=tool)
            for call_id, tool in self._pending.items()
            if call_id not in self._decisions
        ]

    def offer(
        self,
        request: GenerationInput,
        call_ids: list[str],
        tools: list[str],
        declared: list[str] | None = None,
    ) -> None:
        """Register the calls of a round whose tools require approval, all at once.

        Operators see every call of the round and may decide them in any order. A tool
        requires approval when the input names it or the worker declared it so
        (`declared`, from the read), whatever the starter sent.
        """
        required = {*request.approval_tools, *(declared or [])}
        if not required:
            return
        for call_id, tool in zip(call_ids, tools, strict=False):
            if tool and tool in required:
                self._pending[call_id] = tool

    def requires(self, call_id: str) -> bool:
        """Whether the call waits for a decision before it runs."""
        return call_id in self._pending

    def validate(self, decision: ApprovalDecision) -> None:
        """Reject a decision on a call that is not waiting (typed, content-free).

        Raises:
            ApplicationError: `ConfigurationError` (`invalid_input`, field `call_id`): the
                run awaits no approval, or not of that call.
        """
        if not any(call_id not in self._decisions for call_id in self._pending):
            problem = "the run is not awaiting approval: list its pending_approvals first"
        elif decision.call_id not in self._pending or decision.call_id in self._decisions:
            problem = "no pending approval has that call id: list the run's pending_approvals"
        else:
            return
        raise application_error(
            ConfigurationError(problem, code="invalid_input", fields=("call_id",))
        )

    def decide(self, decision: ApprovalDecision, *, approve: bool) -> None:
        """Record a decision (validated before)."""
        self.validate(decision)
        reason = _APPROVED if approve else decision.reason_code or DEFAULT_DENIAL_REASON
        self._decisions[decision.call_id] = reason

    async def await_decision(
        self, stages: StageReporter, request: GenerationInput, call_id: str, details: str
    ) -> str | None:
        """Wait for the call's decision: `None` when approved, else the denial reason."""
        if call_id not in self._decisions:
            tool = self._pending[call_id]
            stages.set(Stage.AWAITING_APPROVAL, f"{details}: tool {tool}, call {call_id}")
            stages.publish()
            timeout = request.approval_timeout_seconds
            try:
                await workflow.wait_condition(
                    lambda: call_id in self._decisions,
                    timeout=None if timeout is None else timedelta(seconds=timeout),
                    timeout_summary="approval timeout",
                )
            except TimeoutError:
                self._decisions[call_id] = TIMEOUT_REASON
        reason = self._decisions[call_id]
        return None if reason == _APPROVED else reason

    def close_round(self) -> None:
        """Forget the decided calls of a finished round."""
        self._pending.clear()
        self._decisions.clear()
