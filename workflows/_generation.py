"""The managed generation's sequencing, shared by every run of `ManagedGenerationWorkflow`.

`GenerationRun` carries out what `planner.steps.next_action` decides: it reads the Thread (a
local activity), runs input safety, seals a plan, dispatches it, runs tool calls, re-plans
after a moved revision or a provider's overflow, judges the final reply (terminal safety,
constraints), commits the accepted turn and then runs the success hooks. A time budget
bounds everything before the commit. Every payload is ids, sizes and decisions; no message
text enters history.

It lives apart from the workflow definition (`workflows.generation`), which stays a few
handlers long. Like the whole package, it is loaded once per worker and shared by every
run, so it keeps no state between runs.
"""

from __future__ import annotations

from dataclasses import replace

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ActivityError, ApplicationError

from contracts import stubs
from contracts.activities import InvokeModelResult, PlanAhead, ReadRequestResult, RecordPlanInput
from contracts.generation import GenerationInput, GenerationOutcome
from contracts.operator import GenerationStatus
from contracts.planning import (
    build_plan_request,
    can_count_authoritatively,
    plan_digest,
    planning_profile,
)
from planner import SealedPlan
from planner.steps import (
    CountAuthoritatively,
    Dispatched,
    DispatchOutcome,
    Fail,
    Planning,
    PrepareSummary,
    RecoverOverflow,
    Replan,
    RetryRejected,
    RetryValidation,
    RunTools,
    Seal,
    next_action,
)
from planner.summary_choice import PreparationKey, needs_fresh_summary, preparation_key
from vocabulary.errors import ErrorType
from vocabulary.stages import Stage
from workflows import _inputs, _options, _ui
from workflows._approvals import Approvals
from workflows._budget import TimeBudget
from workflows._cache import CacheSteps
from workflows._commit import COMMIT_TURN, COMMIT_TURN_LOCAL, committing
from workflows._failures import (
    admitted,
    attempt_timed_out,
    decision_failure,
    discard_after,
)
from workflows._gate import AcceptanceGate
from workflows._hooks import StepHooks
from workflows._progress import TurnProgress
from workflows._stages import StageReporter
from workflows._storage_wait import waiting_out_storage
from workflows._success import run_success_hooks
from workflows._summaries import before_commit, prepare_summary, start_summary, summarisable
from workflows._tools import run_tools


class GenerationRun:
    """The state and steps of one managed generation run (read, plan, invoke, commit)."""

    def __init__(self) -> None:
        self._stages = StageReporter()
        self._summarised: set[PreparationKey] = set()  # inline, this run
        self._approvals = Approvals()
        self._request: GenerationInput | None = None
        self._progress: TurnProgress | None = None
        self._cache = CacheSteps()
        # The request id the read planned the first plan ahead with (see `_ahead`), until
        # the first plan takes it.
        self._ahead_id: str | None = None

    def describe(self) -> GenerationStatus:
        """The run's content-free status: stage, details, attempt, ids, model, wait."""
        stages = self._stages
        attempt = self._progress.attempt if self._progress is not None else 0
        return stages.control.status(self._request, stages.stage, stages.details, attempt)

    @property
    def stages(self) -> StageReporter:
        """The run's stage reporter (stage, details, operator control)."""
        return self._stages

    @property
    def approvals(self) -> Approvals:
        """The tool calls waiting for an operator's decision."""
        return self._approvals

    async def run(self, raw: RawValue) -> GenerationOutcome:
        """Run the generation from its raw input (see `ManagedGenerationWorkflow.run`)."""
        try:
            request = admitted(raw)
        except ApplicationError as refusal:
            _ui.conclude_refused(self._stages, refusal)
            raise
        self._stages.publish_identity(request)
        self._request = request
        try:
            result = await self._generate(request)
        except BaseException as error:
            await discard_after(self._stages, request, error)
            _ui.conclude_failed(self._stages, error)
            raise
        self._stages.publish()
        return result

    async def _generate(self, request: GenerationInput) -> GenerationOutcome:
        budget = TimeBudget(request)
        read, progress = await budget.within(
            self._stages, self._settle(request, AcceptanceGate(request))
        )
        if read.existing is not None:
            # The generation id was committed before: return what that commit published.
            _ui.conclude_replayed(self._stages, read.existing)
            return read.existing
        return await self._commit(request, read, progress, budget)

    async def _settle(
        self, request: GenerationInput, gate: AcceptanceGate
    ) -> tuple[ReadRequestResult, TurnProgress]:
        """Everything before the commit: read, check, plan and call until a reply is accepted.

        Returns the read the accepted turn commits after (its `existing` set when the
        generation was committed before) and the provider loop's record.
        """
        hooks = StepHooks(request)
        read = await self._read(request, plan_ahead=self._ahead(request, gate, hooks))
        if read.existing is None and gate.checks_input:
            read = await gate.check_input(self._stages, request, read)
        progress = self._progress = TurnProgress()
        if hooks.named and read.existing is None:
            await hooks.prepare_invocation(self._stages)
        while read.existing is None:
            # The input as this provider call sees it: the request itself unless a hook
            # overrode something for the call.
            step = await hooks.before_step(self._stages, progress) if hooks.named else request
            step_read = hooks.read_for(read, step)
            sealed = gate.receipted(
                hooks.receipted(await self._seal(step, step_read, progress), progress)
            )
            outcome, invoked, failure = await self._dispatch(
                step,
                step_read,
                sealed,
                progress,
                commit=_commits_with_attempt(request, gate, hooks, step_read, progress),
            )
            if outcome == "revision-moved":
                progress.supersede(sealed)
            action = next_action(
                Dispatched(
                    outcome=outcome,
                    input_tokens=sealed.input_tokens,
                    ceiling=progress.ceiling,
                    tool_calls=len(invoked.tool_call_ids) if invoked else 0,
                    tool_rounds=progress.rounds,
                    max_tool_rounds=request.max_tool_rounds,
                    replans=len(progress.superseded),
                    on_revision_moved=request.on_revision_moved,
                    rejections=progress.rejections + (outcome == "invalid-output"),
                    max_validation_retries=request.output.max_retries if request.output else 0,
                    defects=tuple(invoked.defects) if invoked else (),
                    request_id=sealed.request_id,
                )
            )
            if isinstance(action, Fail):
                if action.error is None and failure is not None:
                    raise failure  # the provider's own failure stands
                raise decision_failure(self._stages, action)
            if isinstance(action, RecoverOverflow):
                progress.ceiling = action.ceiling
                progress.next_step(sealed)
                hooks.reason = "overflow-recovery"
            elif isinstance(action, RetryValidation) and invoked is not None:
                # The reply failed validation and was never staged: plan a new call.
                progress.reject(sealed, invoked)
                hooks.reason = "validation-retry"
            elif isinstance(action, Replan):
                # Another turn landed between the read and the dispatch: nothing was sent.
                progress.replan(sealed, action.reason)
                details = f"attempt {progress.attempt}: revision moved, round {progress.replans}"
                read = await self._read(request, details)
            elif invoked is not None and not isinstance(action, RunTools):
                if gate.checks_output:
                    # The final reply passes terminal safety and the constraints first.
                    checked = await gate.check_output(self._stages, step, sealed, progress)
                    if isinstance(checked, Fail):
                        raise decision_failure(self._stages, checked)
                    if isinstance(checked, RetryRejected):
                        # The reply was withdrawn: plan a corrective call.
                        progress.withdraw(sealed, invoked, checked.reason)
                        hooks.reason = checked.reason
                        continue
                progress.accept(sealed, invoked)
                progress.committed = invoked.committed
                return read, progress
            elif invoked is not None:
                progress.accept(sealed, invoked)
                await run_tools(
                    self._stages,
                    self._approvals,
                    step,
                    invoked,
                    progress,
                    read.tool_policies,
                    declared_approval=read.approval_tools,
                )
                progress.next_step(sealed)
                hooks.reason = "tool-round"
        return read, progress

    def _ahead(
        self, request: GenerationInput, gate: AcceptanceGate, hooks: StepHooks
    ) -> PlanAhead | None:
        """Let the read seal and record the first plan, when nothing between them shapes it.

        Input safety and step hooks run between the read and the first plan, and an agent
        is named on its receipt: their runs record their plans themselves.
        """
        if gate.checks_input or hooks.named or request.agent_id is not None:
            return None
        self._ahead_id = f"request_{workflow.uuid4().hex}"
        return PlanAhead(request_id=self._ahead_id, generation=request)

    async def _read(
        self,
        request: GenerationInput,
        details: str | None = None,
        *,
        plan_ahead: PlanAhead | None = None,
    ) -> ReadRequestResult:
        """Read the current revision, a local activity (waiting out a storage outage)."""
        self._stages.set(Stage.READING, details)
        arg = _inputs.read_input(request, plan_ahead)
        return await waiting_out_storage(
            self._stages,
            request,
            Stage.READING,
            lambda: workflow.execute_local_activity(
                stubs.read_request,
                arg,
                **_options.READ_REQUEST_LOCAL,
            ),
            local=True,
        )

    async def _seal(
        self, request: GenerationInput, read: ReadRequestResult, progress: TurnProgress
    ) -> SealedPlan:
        """Plan the next provider call, carrying out what planning asks for first."""
        self._stages.set(Stage.PLANNING)
        state = self._planning(request, read, progress)
        prepared_here = False
        while True:
            action = next_action(state)
            if isinstance(action, Seal):
                progress.maintenance = action.maintenance
                return progress.link(action.plan)
            if isinstance(action, PrepareSummary):
                self._summarised.add(preparation_key(action.need))
                progress.summary = await prepare_summary(self._stages, request, read, action.need)
                self._stages.set(Stage.PLANNING, "with the prepared summary")
                state = replace(self._planning(request, read, progress), summary_prepared=True)
                prepared_here = True
            elif isinstance(action, CountAuthoritatively):
                counted = await self._count(request, read, action, progress)
                plan_request = state.request
                if counted is not None:
                    plan_request = plan_request.model_copy(update={"counted_input_tokens": counted})
                state = replace(state, request=plan_request, counted=True)
            elif needs_fresh_summary(
                action.error,
                summary_prepared=state.summary_prepared,
                prepared_this_step=prepared_here,
                prepared=self._summarised,
            ):
                # The summary prepared for an earlier step no longer fits this one (the
                # Thread moved meanwhile, or the turn grew): prepare the one it needs.
                state = replace(state, summary_prepared=False)
            else:
                if action.refresh is not None:
                    await start_summary(self._stages, request, read, action.refresh)
                raise decision_failure(self._stages, action)

    def _planning(
        self, request: GenerationInput, read: ReadRequestResult, progress: TurnProgress
    ) -> Planning:
        """The planning state of the next call."""
        if progress.summary is not None:
            read = read.model_copy(update={"summary": progress.summary})
        # The first plan takes the id the read planned it ahead with; later ones new ids.
        request_id = self._ahead_id or f"request_{workflow.uuid4().hex}"
        self._ahead_id = None
        plan_request = build_plan_request(
            request_id=request_id,
            request=request,
            read=read,
            # The worker's catalog (custom profiles included), as the reader resolved it.
            profile=planning_profile(request, read),
            ceiling=progress.ceiling,
            previous_request_id=progress.previous_request_id,
            epoch=progress.epoch,
            turn_tokens=progress.turn_tokens,
            turn_messages=progress.turn_messages,
        )
        return Planning(
            request=plan_request,
            summarisable=summarisable(request, read),
            summary_prepared=progress.summary is not None,
            countable=(
                progress.ceiling is None
                and progress.turn_messages == 0
                and not request.tools
                and can_count_authoritatively(request, read)
            ),
        )

    async def _count(
        self,
        request: GenerationInput,
        read: ReadRequestResult,
        action: CountAuthoritatively,
        progress: TurnProgress,
    ) -> int | None:
        """The provider's exact count of the request, or `None` when it cannot count."""
        self._stages.set(Stage.COUNTING, f"attempt {progress.attempt}")
        arg = _inputs.count_input(request, read, action.message_ranges)
        counted = await waiting_out_storage(
            self._stages,
            request,
            Stage.COUNTING,
            lambda: workflow.execute_activity(
                stubs.count_request,
                arg,
                **_options.with_summary(_options.COUNT_REQUEST, f"{request.model} count"),
            ),
        )
        return counted.input_tokens

    async def _dispatch(
        self,
        request: GenerationInput,
        read: ReadRequestResult,
        sealed: SealedPlan,
        progress: TurnProgress,
        *,
        commit: bool = False,
    ) -> tuple[DispatchOutcome, InvokeModelResult | None, ActivityError | None]:
        """Hand the sealed plan to the provider; say what came of it.

        With `commit`, an answer that ends the turn is published by the attempt itself.
        """
        self._stages.set(
            Stage.INVOKING, f"attempt {progress.attempt}: {sealed.input_tokens} input tokens"
        )
        await self._record(request, read, sealed)
        arg = _inputs.invoke_input(request, read, sealed, progress, commit=commit)
        cached = await self._cache.look_up(self._stages, request, arg, sealed.request_id)
        if cached is not None:
            return ("revision-moved" if cached.revision_moved else "answered"), cached, None
        config = _options.with_summary(
            _options.invoke_model(request.attempt_policy),
            f"{request.model} attempt {progress.attempt}",
        )
        try:
            invoked = await waiting_out_storage(
                self._stages,
                request,
                Stage.INVOKING,
                lambda: workflow.execute_activity(stubs.invoke_model, arg, **config),
            )
        except ActivityError as error:
            if _error_type(error) == ErrorType.CONTEXT_TOO_LONG:
                return "overflow", None, error
            if commit and not isinstance(error.cause, ApplicationError):
                # The attempt may have published the turn before its completion was lost
                # for good (its last try timed out): a committed turn is never reported
                # as failed. A provider's error came before any commit.
                published = await self._read(request, "after a failed attempt")
                if published.existing is not None:
                    return "answered", _published(published.existing), None
            timed_out = attempt_timed_out(request, error)
            if timed_out is not None:
                raise timed_out from error
            raise
        if invoked.revision_moved:
            return "revision-moved", invoked, None
        return ("invalid-output" if invoked.defects else "answered"), invoked, None

    async def _record(
        self, request: GenerationInput, read: ReadRequestResult, sealed: SealedPlan
    ) -> None:
        """Store the plan's receipt and inspection before its attempt.

        A local activity, so the evidence enters PostgreSQL and never history; every later
        payload names it by request id. Plans that are then superseded or rejected by the
        provider stay inspectable too. The read recorded the first plan already when it
        planned the same one ahead (equal digests).
        """
        ahead = read.planned is not None
        if ahead and plan_digest(sealed) == read.planned:
            return
        # A plan recorded ahead that differs from this one (same request id) is replaced:
        # nothing was sent under it yet. Later plans of the run have ids of their own.
        arg = RecordPlanInput.of(request, sealed, replace=ahead)
        await waiting_out_storage(
            self._stages,
            request,
            Stage.INVOKING,
            lambda: workflow.execute_local_activity(
                stubs.record_plan, arg, **_options.RECORD_PLAN_LOCAL
            ),
            local=True,
        )

    async def _commit(
        self,
        request: GenerationInput,
        read: ReadRequestResult,
        progress: TurnProgress,
        budget: TimeBudget,
    ) -> GenerationOutcome:
        """Publish the accepted turn, then start maintenance and run the success hooks.

        Storage outages keep the run visibly in `commit_blocked`, retrying, with the staged
        output kept; a rejection fails it with `ThreadCommitError`. The commit is never
        abandoned: a time budget that expires meanwhile is reported once it is done.
        """
        self._stages.set(Stage.COMMITTING)
        arg = _inputs.commit_input(request, read, progress, progress.steps)
        maintenance = await before_commit(self._stages, request, read, progress.maintenance)
        committed = progress.committed  # by the accepted attempt itself
        if committed is None:
            if budget.set:
                commit = lambda: workflow.execute_activity(stubs.commit_turn, arg, **COMMIT_TURN)  # noqa: E731
            else:
                commit = lambda: workflow.execute_local_activity(  # noqa: E731
                    stubs.commit_turn, arg, **COMMIT_TURN_LOCAL
                )
            committed = await budget.awaiting_commit(
                committing(self._stages, request, commit, local=not budget.set)
            )
        for need in maintenance:
            await start_summary(self._stages, request, read, need)
        # A reply the cache may reuse is written once its turn is committed, before the
        # success hooks (a failed write never fails the run).
        await self._cache.write(request, progress)
        outcome = committed.outcome(arg)
        hooks = await run_success_hooks(self._stages, request, outcome)
        if hooks:
            outcome = outcome.model_copy(update={"hooks": hooks})
        late = budget.late_commit(self._stages)
        if late is not None:
            raise late
        _ui.conclude_completed(self._stages, outcome, progress)
        return outcome


def _commits_with_attempt(
    request: GenerationInput,
    gate: AcceptanceGate,
    hooks: StepHooks,
    read: ReadRequestResult,
    progress: TurnProgress,
) -> bool:
    """Whether an attempt that answers the turn may publish it itself.

    Only when nothing after the answer can change what is committed or when: no acceptance
    gate judges the reply, no step hook runs, no time budget must be able to stop the run
    before its commit, no transcript prefix is staged for maintenance first, and the attempt
    has a retry left to report a commit whose completion was lost.
    """
    return (
        not gate.checks_output
        and not hooks.named
        and request.time_budget_seconds is None
        and (request.attempt_policy is None or request.attempt_policy.max_attempts > 1)
        and not (read.history_source == "caller-messages" and progress.maintenance)
    )


def _published(existing: GenerationOutcome) -> InvokeModelResult:
    """The attempt that published this run's turn before its completion was lost.

    The read reports the stored outcome as a replay; it is this run's own commit.
    """
    commit = existing.thread_commit
    outcome = existing.model_copy(
        update={
            "replayed": False,
            "thread_commit": None
            if commit is None
            else commit.model_copy(update={"replayed": False}),
        }
    )
    return InvokeModelResult.published(outcome)


def _error_type(error: ActivityError) -> str | None:
    cause = error.cause
    return cause.type if isinstance(cause, ApplicationError) else None
