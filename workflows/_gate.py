"""The acceptance gate in the generation workflow: input safety, output checks, receipts.

Nothing here runs for a generation without policies or constraints, so such runs schedule
exactly the commands they always did. Each check is a local activity on the staged text
(the text never enters history); what comes back is a content-free report, which the
receipts record and `planner.steps` turns into the next action.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.workflow import LocalActivityConfig

from contracts import stubs
from contracts.acceptance import CheckInputInput, CheckOutputInput, CheckOutputResult
from contracts.activities import ReadRequestResult
from contracts.failures import application_error
from contracts.gate import ConstraintSpec, PolicySpec
from contracts.generation import GenerationInput
from planner import SealedPlan
from planner.steps import Checked, CheckedAction, RetryRejected, next_action
from vocabulary.gate import GateReport
from vocabulary.gate_errors import SafetyError
from vocabulary.stages import Stage
from workflows import _options
from workflows._progress import TurnProgress
from workflows._stages import StageReporter
from workflows._storage_wait import waiting_out_storage


class AcceptanceGate:
    """The gate of one generation: its policies, constraints and retry counts.

    Args:
        request: The generation input.
    """

    def __init__(self, request: GenerationInput) -> None:
        safety = request.safety
        self._input: tuple[PolicySpec, ...] = safety.input if safety is not None else ()
        self._output: tuple[PolicySpec, ...] = safety.output if safety is not None else ()
        self._max_safety_retries = safety.max_retries if safety is not None else 0
        constraints = request.constraints
        self._constraints: tuple[ConstraintSpec, ...] = (
            constraints.checks if constraints is not None else ()
        )
        self._max_constraint_retries = constraints.max_retries if constraints is not None else 0
        self.input_report: GateReport | None = None
        """What input safety decided (`None` until it ran, or without input policies)."""
        self.safety_retries = 0
        """Corrective attempts made because output safety asked for one."""
        self.constraint_retries = 0
        """Corrective attempts made because a reply violated a constraint."""

    @property
    def checks_input(self) -> bool:
        """Whether the generation has input policies."""
        return bool(self._input)

    @property
    def checks_output(self) -> bool:
        """Whether final replies are judged (output policies or constraints)."""
        return bool(self._output or self._constraints)

    async def check_input(
        self, stages: StageReporter, request: GenerationInput, read: ReadRequestResult
    ) -> ReadRequestResult:
        """Run input safety; return the read with the user turn measured as it now stands.

        Raises:
            ApplicationError: `SafetyError` (stage `input`) when a policy blocked the turn:
                nothing was sent, and the staged text is gone.
        """
        stages.set(Stage.INPUT_SAFETY, f"{len(self._input)} policies")
        arg = CheckInputInput(
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            model=request.model,
            policies=self._input,
        )
        checked = await waiting_out_storage(
            stages,
            request,
            Stage.INPUT_SAFETY,
            lambda: workflow.execute_local_activity(
                stubs.check_input, arg, **_local(_options.CHECK_INPUT_LOCAL, self._input)
            ),
            local=True,
        )
        report = self.input_report = checked.report
        if not report.accepted:
            stages.set(Stage.FAILED, f"input blocked by {report.policy}: {decisions(report)}")
            raise application_error(
                SafetyError(report.policy or "policy", report.reason_code, stage="input")
            )
        stages.set(Stage.INPUT_SAFETY, f"{report.decision}: {decisions(report)}")
        return read.model_copy(update={"current_turn_tokens": checked.turn_tokens})

    def receipted(self, sealed: SealedPlan) -> SealedPlan:
        """`sealed`, its receipt recording input safety's report (the turn it sends)."""
        if self.input_report is None:
            return sealed
        receipt = sealed.receipt.model_copy(update={"input_gate": self.input_report})
        return sealed.model_copy(update={"receipt": receipt})

    async def check_output(
        self,
        stages: StageReporter,
        request: GenerationInput,
        sealed: SealedPlan,
        progress: TurnProgress,
    ) -> CheckedAction:
        """Judge the attempt's final reply and decide: commit, retry or fail.

        A refused reply is withdrawn from staging by the check; a retry is counted here.
        """
        parts = [
            name
            for name, on in (("safety", self._output), ("constraints", self._constraints))
            if on
        ]
        stages.set(Stage.OUTPUT_CHECKS, f"attempt {progress.attempt}: {', '.join(parts)}")
        arg = CheckOutputInput(
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            model=request.model,
            attempt=progress.attempt,
            request_id=sealed.request_id,
            policies=self._output,
            constraints=self._constraints,
            stream=request.stream,
        )
        verdict: CheckOutputResult = await waiting_out_storage(
            stages,
            request,
            Stage.OUTPUT_CHECKS,
            lambda: workflow.execute_local_activity(
                stubs.check_output, arg, **_local(_options.CHECK_OUTPUT_LOCAL, self._output)
            ),
            local=True,
        )
        safety = verdict.safety
        stages.set(Stage.OUTPUT_CHECKS, _verdict_details(progress.attempt, verdict))
        action = next_action(
            Checked(
                safety=safety.decision if safety is not None else None,
                policy=safety.policy if safety is not None else None,
                reason_code=safety.reason_code if safety is not None else None,
                violations=verdict.violations,
                safety_retries=self.safety_retries,
                max_safety_retries=self._max_safety_retries,
                constraint_retries=self.constraint_retries,
                max_constraint_retries=self._max_constraint_retries,
                request_id=sealed.request_id,
            )
        )
        if isinstance(action, RetryRejected):
            if action.reason == "safety-retry":
                self.safety_retries += 1
            else:
                self.constraint_retries += 1
        return action


def decisions(report: GateReport) -> str:
    """Each policy that ran and what it decided, for the UI (`pii transform, length allow`)."""
    return ", ".join(f"{o.policy} {o.decision}" for o in report.outcomes) or "no policy ran"


def _verdict_details(attempt: int, verdict: CheckOutputResult) -> str:
    """The output checks' decisions on one attempt, for the UI; names and codes only."""
    parts: list[str] = []
    if verdict.safety is not None:
        parts.append(decisions(verdict.safety))
    if verdict.constraints is not None:
        failed = len(verdict.constraints.violations)
        parts.append(f"constraints {verdict.constraints.checked - failed} ok, {failed} failed")
    return f"attempt {attempt}: {'; '.join(parts)}"


def _local(config: LocalActivityConfig, policies: tuple[PolicySpec, ...]) -> LocalActivityConfig:
    """`config` with a UI summary naming the policies the check runs, in order."""
    names = ", ".join(policy.name for policy in policies)
    summary = f"{config.get('summary')}: {names}" if names else config.get("summary")
    merged: LocalActivityConfig = {**config, "summary": summary}
    return merged
