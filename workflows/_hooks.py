"""Step hooks in the generation workflow: run them, apply their overrides, receipt them.

Nothing here runs for a generation that names no hook, so runs without hooks schedule
exactly the commands they always did. A hook runs as the `crux.prepare_step` activity on a
content-free context; its validated overrides shape one provider call (a new planning
epoch when the model or budget changes) and are recorded on that call's receipt. A plan
superseded by a moved revision is planned again with the same decision, without asking
the hook twice.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityConfig

from contracts import stubs
from contracts.activities import ReadRequestResult
from contracts.generation import GenerationInput, Usage
from contracts.hooks import (
    HookKind,
    PrepareStepInput,
    PrepareStepResult,
    StepContext,
    StepOverrides,
    StepReason,
    apply_overrides,
)
from planner import ModelProfile, SealedPlan, StepPreparation
from vocabulary.errors import ErrorType
from vocabulary.stages import Stage
from workflows._progress import TurnProgress
from workflows._stages import StageReporter
from workflows._storage_wait import waiting_out_storage

PREPARE_STEP = ActivityConfig(
    # Hooks are application code deciding quickly; a worker lost mid-hook is retried, a
    # hook that raises fails the run at once (non-retryable `PreparationError`).
    start_to_close_timeout=timedelta(seconds=60),
    retry_policy=RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=10),
        maximum_attempts=3,
        non_retryable_error_types=[ErrorType.STORAGE_UNAVAILABLE.value],
    ),
)


class StepHooks:
    """The hook decisions of one generation.

    Args:
        request: The generation input.
    """

    def __init__(self, request: GenerationInput) -> None:
        self._request = request
        self._baseline = request
        self._baseline_profile: ModelProfile | None = None
        self._invocation: StepPreparation | None = None
        self._decided: tuple[int, GenerationInput, ModelProfile | None, StepPreparation] | None = (
            None
        )
        self.reason: StepReason = "initial"
        """Why the next provider call is made; the workflow sets it as the loop moves."""

    @property
    def named(self) -> bool:
        """Whether the generation names any hook (else nothing here schedules anything)."""
        return (
            self._request.prepare_step is not None or self._request.prepare_invocation is not None
        )

    async def prepare_invocation(self, stages: StageReporter) -> None:
        """Run the `prepare_invocation` hook once, before the first plan.

        Its overrides are the baseline of every provider call of the run.
        """
        request = self._request
        # Only a composition child (a member of `Runtime.parallel`) is an invocation of
        # its own; a plain generation naming the hook does not run it.
        if request.prepare_invocation is None or request.composition is None:
            return
        decided = await self._run(
            stages, "invocation", request.prepare_invocation, "invocation", 1, request, (), 0
        )
        self._baseline = apply_overrides(request, decided.overrides)
        self._baseline_profile = decided.profile
        self._invocation = _preparation(
            request.prepare_invocation, "invocation", "invocation", 1, decided.overrides
        )

    async def before_step(self, stages: StageReporter, progress: TurnProgress) -> GenerationInput:
        """The generation input as the next provider call sees it (hooks applied)."""
        hook = self._request.prepare_step
        if hook is None:
            return self._baseline
        if self._decided is not None and self._decided[0] == progress.attempt:
            # The same call planned again (the Thread moved before it was sent).
            return self._decided[1]
        usage = Usage(
            input_tokens=sum(step.usage.input_tokens for step in progress.steps),
            output_tokens=sum(step.usage.output_tokens for step in progress.steps),
        )
        decided = await self._run(
            stages,
            "step",
            hook,
            self.reason,
            progress.attempt,
            self._baseline,
            (usage,),
            progress.turn_messages,
        )
        step = apply_overrides(self._baseline, decided.overrides)
        profile = decided.profile if decided.profile is not None else self._baseline_profile
        preparation = _preparation(hook, "step", self.reason, progress.attempt, decided.overrides)
        self._decided = (progress.attempt, step, profile, preparation)
        return step

    def read_for(self, read: ReadRequestResult, step: GenerationInput) -> ReadRequestResult:
        """`read`, planned with the overriding model's profile when the model changed."""
        if step.model == self._request.model:
            return read
        profile = self._baseline_profile
        if self._decided is not None and self._decided[1] is step and self._decided[2] is not None:
            profile = self._decided[2]
        return read if profile is None else read.model_copy(update={"profile": profile})

    def receipted(self, sealed: SealedPlan, progress: TurnProgress) -> SealedPlan:
        """`sealed`, its receipt naming the agent and the hook decisions that shaped it."""
        agent_id = self._request.agent_id
        if agent_id is None and not self.named:
            return sealed
        preparations: list[StepPreparation] = []
        new_epoch = progress.epoch_reset or (
            progress.epoch is not None and progress.epoch.key != sealed.epoch.key
        )
        if self._invocation is not None:
            preparations.append(self._invocation)
        if self._decided is not None and self._decided[0] == progress.attempt:
            preparations.append(self._decided[3].model_copy(update={"new_epoch": new_epoch}))
        receipt = sealed.receipt.model_copy(
            update={"agent_id": agent_id, "preparations": tuple(preparations)}
        )
        return sealed.model_copy(update={"receipt": receipt})

    async def _run(
        self,
        stages: StageReporter,
        kind: HookKind,
        hook: str,
        reason: StepReason,
        step: int,
        request: GenerationInput,
        usage: tuple[Usage, ...],
        turn_messages: int,
    ) -> PrepareStepResult:
        stages.set(Stage.PLANNING, f"attempt {step}: {kind} hook")
        arg = PrepareStepInput(
            kind=kind,
            context=StepContext(
                hook=hook,
                reason=reason,
                step=step,
                generation_id=request.generation_id,
                thread_id=request.thread_id,
                agent_id=request.agent_id,
                model=request.model,
                usage=usage[0] if usage else Usage(),
                tools=tuple(request.tools),
                tool_choice=request.tool_choice,
                max_output_tokens=request.max_output_tokens,
                input_budget=request.input_budget,
            ),
            turn_messages=turn_messages,
        )
        config: ActivityConfig = {**PREPARE_STEP, "summary": f"{kind} hook, attempt {step}"}
        return await waiting_out_storage(
            stages,
            request,
            Stage.PLANNING,
            lambda: workflow.execute_activity(stubs.prepare_step, arg, **config),
        )


def _preparation(
    hook: str, kind: HookKind, reason: str, step: int, overrides: StepOverrides | None
) -> StepPreparation:
    """The content-free receipt record of one hook decision."""
    if overrides is None:
        return StepPreparation(hook=hook, kind=kind, reason=reason, step=step)
    budget = overrides.input_budget
    return StepPreparation(
        hook=hook,
        kind=kind,
        reason=reason,
        step=step,
        overridden=overrides.overridden(),
        model=overrides.model,
        tool_choice=overrides.tool_choice,
        active_tools=overrides.active_tools,
        max_output_tokens=overrides.max_output_tokens,
        input_budget_optimize_at=budget.optimize_at if budget else None,
        input_budget_max=budget.max if budget else None,
    )
