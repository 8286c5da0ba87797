"""`ManagedGenerationWorkflow`: read, plan, invoke, commit.

The workflow's definition: its queries, updates and entry point. The steps themselves are
`workflows._generation.GenerationRun`.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.common import RawValue

from contracts.approvals import (
    QUERY_PENDING_APPROVALS,
    UPDATE_APPROVE,
    UPDATE_DENY,
    PendingApproval,
)
from contracts.decoding import NO_INPUT
from contracts.generation import GenerationOutcome
from contracts.operator import GenerationStatus
from vocabulary.errors import CruxError
from workflows import _search
from workflows._approvals import decision_of
from workflows._generation import GenerationRun

# The stage attribute, kept current by the workflow (see `workflows._search`).
STAGE = _search.STAGE


# Domain errors raised in workflow code (an invalid budget found while planning, say) fail
# the workflow, typed; they never fail the task, which Temporal would retry forever. Outside
# the SDK's sandbox, which would cost every activation and payload of every run: the code is
# Crux's own, and the test suite replays every recorded history inside the sandbox
# (`crux.plugin.CruxPlugin`, `sandboxed`).
@workflow.defn(
    name="ManagedGenerationWorkflow", failure_exception_types=[CruxError], sandboxed=False
)
class ManagedGenerationWorkflow:
    """One managed generation: read exact revision, plan, invoke, commit accepted turn."""

    def __init__(self) -> None:
        self._run = GenerationRun()

    @workflow.query(name="describe")
    def describe(self) -> GenerationStatus:
        """The run's content-free status: stage, details, attempt, ids, model, wait."""
        return self._run.describe()

    @workflow.update(name="retry_now")
    async def retry_now(self) -> str:
        """Try the blocked stage again at once instead of waiting out the backoff."""
        self._run.stages.control.retry_now()
        return self._run.stages.stage.value

    @retry_now.validator
    def _validate_retry_now(self) -> None:
        self._run.stages.control.check(self._run.stages.stage, "retry_now")

    @workflow.update(name="abandon")
    async def abandon(self) -> str:
        """Give up the blocked run: nothing is committed and staged output is discarded."""
        self._run.stages.control.abandon()
        return self._run.stages.stage.value

    @abandon.validator
    def _validate_abandon(self) -> None:
        self._run.stages.control.check(self._run.stages.stage, "abandon")

    @workflow.query(name=QUERY_PENDING_APPROVALS)
    def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls waiting for a decision (tool name and call id only)."""
        return self._run.approvals.pending()

    # The decisions are taken raw and decoded by the handlers, so that a malformed one is
    # refused typed (`ConfigurationError` with field paths); the argument is an
    # `ApprovalDecision` (schemas/approval-decision.schema.json).
    @workflow.update(name=UPDATE_APPROVE)
    def approve(self, decision: RawValue) -> None:
        """Run a pending tool call (the argument is an `ApprovalDecision`)."""
        self._run.approvals.decide(decision_of(decision), approve=True)

    @approve.validator
    def _validate_approve(self, decision: RawValue) -> None:
        self._run.approvals.validate(decision_of(decision))

    @workflow.update(name=UPDATE_DENY)
    def deny(self, decision: RawValue) -> None:
        """Deny a pending tool call: the model sees a denial result with its reason code."""
        self._run.approvals.decide(decision_of(decision), approve=False)

    @deny.validator
    def _validate_deny(self, decision: RawValue) -> None:
        self._run.approvals.validate(decision_of(decision))

    @workflow.query(name="get_stage")
    def get_stage(self) -> str:
        """The current stage (a `vocabulary.stages.Stage` value).

        One of `reading`, `input_safety`, `planning`, `summarising`, `counting`,
        `invoking`, `tools`, `awaiting_approval` (a tool call waits for an operator's
        decision), `storage_blocked` (a stage waits for PostgreSQL), `output_checks`
        (terminal safety and constraints judge the reply), `committing`,
        `commit_blocked`, `success_hooks`, `maintenance`, `completed`, `failed` or
        `cancelled`.
        """
        return self._run.stages.stage.value

    @workflow.run
    async def run(self, raw: RawValue = NO_INPUT) -> GenerationOutcome:
        """Run the generation and return its content-free outcome (ids and figures).

        The input is taken raw and decoded and validated here rather than by the data
        converter: whatever a client sends (a list, invalid UTF-8, lone surrogates, deep
        nesting, `optimize_at > max`) fails the workflow promptly with a typed,
        content-free `ConfigurationError` instead of retrying its first task forever; so
        does a valid input started under another workflow id than `workflow_id_for(...)`.
        A refused run ends `failed` (queries, current details, `CruxStage`) and touches
        nothing staged.
        """
        return await self._run.run(raw)
