"""`ManagedGenerationWorkflow`: read, plan, invoke, commit, one activity per stage.

The workflow only sequences: the pure planner decides what to send, the activities do the
I/O, and every payload is ids, sizes and decisions. No message text enters history.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from typing import Any, TypeVar, cast

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    FailureError,
    WorkflowAlreadyStartedError,
    is_cancelled_exception,
)
from temporalio.workflow import ActivityConfig, ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    # Passed through: pydantic models and the pure planner are deterministic and
    # re-importing them per workflow run would only cost time.
    from contracts.activities import (
        ACTIVITY_AWAIT_SUMMARY,
        ACTIVITY_COMMIT_TURN,
        ACTIVITY_COUNT_REQUEST,
        ACTIVITY_DISCARD_GENERATION,
        ACTIVITY_INVOKE_MODEL,
        ACTIVITY_PREPARE_SUMMARY,
        ACTIVITY_READ_REQUEST,
        ACTIVITY_RESOLVE_HISTORY_IDS,
        ACTIVITY_RUN_TOOL,
        AwaitSummaryInput,
        CommitTurnInput,
        CommitTurnResult,
        CountRequestInput,
        CountRequestResult,
        DiscardGenerationInput,
        DiscardGenerationResult,
        InvokeModelInput,
        InvokeModelResult,
        PrepareSummaryInput,
        PrepareSummaryResult,
        ReadRequestInput,
        ReadRequestResult,
        ResolveHistoryIdsInput,
        ResolveHistoryIdsResult,
        RunToolInput,
        RunToolResult,
    )
    from contracts.generation import (
        GenerationInput,
        GenerationResult,
        StepRecord,
        request_fingerprint,
    )
    from planner import (
        HistorySummary,
        Preparation,
        RequestInspection,
        RequestReceipt,
        SealedPlan,
        background_preparations,
        inline_preparations,
        needs_authoritative_count,
        plan,
        source_ids,
    )
    from vocabulary.details import ErrorDetails, decode_details, encode_details
    from vocabulary.errors import ConfigurationError, CruxError, ErrorType, RequestCompositionError
    from vocabulary.ids import workflow_id_for
    from workflows import _options, _search
    from workflows._decode import decode_input
    from workflows._planning import (
        all_sources,
        build_plan_request,
        can_count_authoritatively,
        max_input_tokens,
        resolve_profile,
        selected_sources,
    )
    from workflows._progress import TurnProgress
    from workflows.legacy.generation import LegacyGeneration
    from workflows.summary import SUMMARY_ID_PATCH, SUMMARY_WORKFLOW, summary_workflow_id

# The stage attribute, kept current by the workflow (see `workflows._search`).
STAGE = _search.STAGE

_T = TypeVar("_T")

# Versioning marker for the authoritative-count step added to the planning stage.
AUTHORITATIVE_COUNT_PATCH = "authoritative-count-v1"

# Versioning marker: a generation that finds the same summary preparation running waits for
# it (one set of support calls) instead of preparing again, and a failed preparation fails
# the generation typed.
SUMMARY_JOIN_PATCH = "summary-join-waits-v1"

# Versioning marker: a request rejected under `on_miss="fail"` starts the summary refresh it
# lacked (without waiting) before failing.
FAIL_STARTS_REFRESH_PATCH = "fail-starts-refresh-v1"

# Versioning marker for the cleanup activity on the failure and cancellation path.
DISCARD_ON_FAILURE_PATCH = "discard-staging-on-failure-v1"

# Versioning marker of the second generation path. Runs whose history lacks it started on
# the first path and are carried on, unchanged, by `workflows.legacy`.
GENERATION_V2_PATCH = "generation-v2"

# A provider that says "too long" despite our measurement gets exactly one linked retry
# with a stricter ceiling, this fraction of what we measured.
OVERFLOW_RECOVERY_FACTOR = 0.85


# Domain errors raised in workflow code (an invalid budget found while planning, say) fail
# the workflow, typed; they never fail the task, which Temporal would retry forever.
@workflow.defn(name="ManagedGenerationWorkflow", failure_exception_types=[CruxError])
class ManagedGenerationWorkflow:
    """One managed generation: read exact revision, plan, invoke, commit accepted turn."""

    def __init__(self) -> None:
        self._stage = "starting"
        self._own_attributes = False
        self._legacy: LegacyGeneration | None = None

    @workflow.query(name="get_stage")
    def get_stage(self) -> str:
        """The current stage.

        One of `reading`, `planning`, `summarising`, `counting`, `invoking`, `tools`,
        `storage_blocked` (a stage waits for PostgreSQL), `committing`, `commit_blocked`,
        `maintenance`, `completed`, `failed` or `cancelled`.
        """
        return self._legacy.stage if self._legacy is not None else self._stage

    @workflow.run
    async def run(self, raw: RawValue) -> GenerationResult:
        """Run the generation and return its content-free result.

        The input is taken raw and decoded and validated here rather than by the data
        converter: whatever a client sends (a list, invalid UTF-8, lone surrogates, deep
        nesting, `optimize_at > max`) fails the workflow promptly with a typed,
        content-free `ConfigurationError` instead of retrying its first task forever.
        """
        request = _validated(raw)
        if not workflow.patched(GENERATION_V2_PATCH):
            self._legacy = LegacyGeneration()
            # Runs of the first path return the payload they always returned.
            return cast(GenerationResult, await self._legacy.run(request))
        self._publish_identity(request)
        try:
            return await self._generate(request)
        except BaseException as error:
            await self._discard_after(request, error)
            raise

    async def _generate(self, request: GenerationInput) -> GenerationResult:
        profile = resolve_profile(request.model)
        read = await self._read(request, profile)
        if read.existing is not None:
            self._set_stage("completed")
            return read.existing
        # Plan with the worker's catalog (custom profiles included); a read recorded before
        # the reader returned its profile falls back to the default catalog.
        profile = read.profile or profile

        steps: list[StepRecord] = []
        inspections: list[RequestInspection] = []
        superseded: list[RequestReceipt] = []
        progress = TurnProgress()
        while True:
            self._set_stage("planning")
            sealed = await self._plan(request, read, profile, progress)
            if progress.previous_reason is not None:
                sealed = _with_previous_reason(sealed, progress.previous_reason)
                progress.previous_reason = None
            invoking = f"attempt {progress.attempt}: {sealed.input_tokens} input tokens"
            self._set_stage("invoking", invoking)
            invoke_input = InvokeModelInput(
                generation_id=request.generation_id,
                attempt=progress.attempt,
                thread_id=request.thread_id,
                owner=request.owner,
                revision=read.revision,
                history_source=read.history_source,
                model=request.model,
                message_ranges=list(sealed.message_ranges),
                context=selected_sources(request.contributors, sealed),
                summary_artifact_id=(
                    sealed.history_summary.artifact_id if sealed.history_summary else None
                ),
                summary_position=(sealed.history_summary.position if sealed.history_summary else 0),
                max_output_tokens=sealed.max_output_tokens,
                tools=request.tools,
                tool_choice=progress.tool_choice(request),
                turn_messages=progress.turn_messages,
                stream=request.stream,
            )
            try:
                invoked: InvokeModelResult = await self._waiting_out_storage(
                    request,
                    "invoking",
                    ACTIVITY_INVOKE_MODEL,
                    invoke_input,
                    InvokeModelResult,
                    _options.with_summary(
                        _options.INVOKE_MODEL, f"{request.model} attempt {progress.attempt}"
                    ),
                )
            except ActivityError as error:
                if _error_type(error) == ErrorType.CONTEXT_TOO_LONG and progress.ceiling is None:
                    progress.ceiling = int(sealed.input_tokens * OVERFLOW_RECOVERY_FACTOR)
                    progress.next_step(sealed)
                    continue
                raise
            if invoked.revision_moved:
                # Another turn landed between the read and this dispatch: nothing was sent.
                superseded.append(sealed.receipt)
                inspections.append(sealed.inspection)
                self._revision_moved(request, len(superseded))
                progress.replan(sealed, "revision-moved")
                read = await self._read(
                    request,
                    profile,
                    f"attempt {progress.attempt}: revision moved, round {len(superseded)}",
                )
                if read.existing is not None:
                    self._set_stage("completed")
                    return read.existing
                profile = read.profile or profile
                continue
            inspections.append(sealed.inspection)
            steps.append(
                StepRecord(
                    attempt=progress.attempt,
                    request=sealed.receipt,
                    usage=invoked.usage,
                    finish_reason=invoked.finish_reason,
                    output_tokens=invoked.output_tokens,
                )
            )
            if not invoked.tool_call_ids or progress.rounds >= request.max_tool_rounds:
                break
            await self._run_tools(request, invoked, progress)
            progress.next_step(sealed)

        result = await self._commit(request, read, progress, steps, inspections, superseded)
        for need in progress.maintenance:
            await self._prepare_summary(request, need, wait=False, head=read.head)
        self._set_stage("completed")
        return result

    async def _read(
        self, request: GenerationInput, profile: Any, details: str | None = None
    ) -> ReadRequestResult:
        """Read the current revision (waiting out a storage outage)."""
        self._set_stage("reading", details)
        read_input = ReadRequestInput(
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            owner=request.owner,
            model=request.model,
            prompt_id=request.prompt_id,
            input=request.input,
            input_ref=request.input_ref,
            messages_ref=request.messages_ref,
            history=request.history,
            tools=request.tools,
            context_source_ids=[
                source for contributor in request.contributors for source in source_ids(contributor)
            ],
            max_input_tokens=max_input_tokens(profile, request),
            input_budget=request.input_budget,
            max_output_tokens=request.max_output_tokens,
            derive_ceiling=True,
            # Inline input is in the workflow input already: its fingerprint lets the read
            # refuse a reused id with other content. The facade records its own.
            fingerprint=(
                request_fingerprint(request, [request.input]) if request.input_ref is None else None
            ),
        )
        return await self._waiting_out_storage(
            request,
            "reading",
            ACTIVITY_READ_REQUEST,
            read_input,
            ReadRequestResult,
            _options.with_summary(_options.READ_REQUEST, "read request"),
        )

    async def _waiting_out_storage(
        self,
        request: GenerationInput,
        stage: str,
        activity: str,
        arg: Any,
        result_type: type[_T],
        config: ActivityConfig,
    ) -> _T:
        """Run one activity, waiting out storage outages in `storage_blocked`.

        The activity fails fast on a storage outage (its retry policy leaves that type to
        the workflow), so the wait is visible in the query, the current details and
        `CruxStage`, costs none of the provider's attempts, and ends in a typed
        `StorageUnavailableError` once it outlasts `request.storage_wait_seconds`.
        """
        backoff = _options.STORAGE_BLOCKED_INITIAL_BACKOFF
        blocked_since = None
        rounds = 0
        while True:
            try:
                return await workflow.execute_activity(
                    activity, arg, result_type=result_type, **config
                )
            except ActivityError as error:
                if _error_type(error) != ErrorType.STORAGE_UNAVAILABLE:
                    raise
            now = workflow.now()
            blocked_since = blocked_since or now
            rounds += 1
            self._check_storage_ceiling(request, blocked_since, stage)
            self._set_stage("storage_blocked", f"{stage}: round {rounds} waiting for storage")
            # The stage stays `storage_blocked` through the next try too: a call that hangs
            # on an unreachable server must not look like progress. The caller's next
            # stage replaces it once the call succeeds.
            await workflow.sleep(backoff)
            backoff = min(backoff * 2, _options.STORAGE_BLOCKED_MAX_BACKOFF)

    def _check_storage_ceiling(self, request: GenerationInput, since: datetime, stage: str) -> None:
        """Fail the run, typed, once storage has been unavailable for too long."""
        waited = workflow.now() - since
        if waited < timedelta(seconds=request.storage_wait_seconds):
            return
        self._set_stage("failed", f"storage unavailable during {stage}")
        raise ApplicationError(
            f"storage unavailable for {int(waited.total_seconds())} s during {stage}"
            f" (storage_wait_seconds={request.storage_wait_seconds})",
            encode_details(ErrorDetails(stage=stage)),
            type=ErrorType.STORAGE_UNAVAILABLE,
            non_retryable=True,
        )

    def _revision_moved(self, request: GenerationInput, rounds: int) -> None:
        """Fail typed when the Thread moved before dispatch and re-planning is not allowed.

        Re-planning is the default (`on_revision_moved="replan"`), up to a bound.
        """
        if request.on_revision_moved == "fail" or rounds > _options.MAX_REVISION_REPLANS:
            self._set_stage("failed", "identity_conflict")
            why = (
                "thread changed after the request plan was sealed"
                if request.on_revision_moved == "fail"
                else f"thread changed before each of {rounds} planned calls could be sent"
            )
            raise ApplicationError(
                f"identity_conflict: {why}",
                encode_details(ErrorDetails(code="identity_conflict")),
                type=ErrorType.THREAD,
                non_retryable=True,
            )

    async def _run_tools(
        self, request: GenerationInput, invoked: InvokeModelResult, progress: TurnProgress
    ) -> None:
        """Run each tool call of the staged assistant message as its own activity."""
        call_turn_index = progress.turn_messages
        progress.add_turn_message(invoked.turn_tokens)
        for call_index, _ in enumerate(invoked.tool_call_ids):
            details = f"round {progress.rounds + 1}: call {call_index + 1}"
            self._set_stage("tools", details)
            tool_input = RunToolInput(
                generation_id=request.generation_id,
                thread_id=request.thread_id,
                model=request.model,
                call_turn_index=call_turn_index,
                call_index=call_index,
                result_turn_index=progress.turn_messages,
            )
            ran: RunToolResult = await self._waiting_out_storage(
                request,
                "tools",
                ACTIVITY_RUN_TOOL,
                tool_input,
                RunToolResult,
                _options.with_summary(_options.RUN_TOOL, f"tool call {call_index + 1}"),
            )
            progress.add_turn_message(ran.tokens)
        progress.rounds += 1

    async def _plan(
        self,
        request: GenerationInput,
        read: ReadRequestResult,
        profile: Any,
        progress: TurnProgress,
    ) -> SealedPlan:
        ceiling = progress.ceiling
        attempt = progress.attempt
        if progress.summary is not None:
            read = read.model_copy(update={"summary": progress.summary})
        plan_request = build_plan_request(
            request_id=f"request_{workflow.uuid4().hex}",
            request=request,
            read=read,
            profile=profile,
            ceiling=ceiling,
            previous_request_id=progress.previous_request_id,
            epoch=progress.epoch,
            turn_tokens=progress.turn_tokens,
            turn_messages=progress.turn_messages,
        )
        try:
            return self._sealed(plan(plan_request), progress)
        except RequestCompositionError as error:
            rejection = error
        needs = inline_preparations(rejection)
        if (
            needs
            and request.thread_id is not None
            and read.history_source == "thread"
            and progress.summary is None
        ):
            # Managed history needs a summary before this call can fit: prepare it (or join
            # the preparation already running) and plan again.
            progress.summary = await self._prepare_summary(
                request, needs[0], wait=True, head=read.head
            )
            return await self._plan(request, read, profile, progress)
        if (
            rejection.code == "REQUEST_TOO_LARGE"
            and ceiling is None
            and progress.turn_messages == 0
            and not request.tools
            and can_count_authoritatively(request, read)
            and needs_authoritative_count(plan_request)
            and workflow.patched(AUTHORITATIVE_COUNT_PATCH)
        ):
            # Nothing is elastic and only the estimate's margin stands in the way: ask the
            # provider for an exact count of the request as it would be sent.
            self._set_stage("counting", f"attempt {attempt}")
            counted: CountRequestResult = await self._waiting_out_storage(
                request,
                "counting",
                ACTIVITY_COUNT_REQUEST,
                CountRequestInput(
                    generation_id=request.generation_id,
                    thread_id=request.thread_id,
                    history_source=read.history_source,
                    model=request.model,
                    message_ranges=[(0, read.history.message_count)],
                    owner=request.owner,
                    context=all_sources(request.contributors),
                ),
                CountRequestResult,
                _options.with_summary(_options.COUNT_REQUEST, f"{request.model} count"),
            )
            if counted.input_tokens is not None:
                exact = plan_request.model_copy(
                    update={"counted_input_tokens": counted.input_tokens}
                )
                try:
                    return self._sealed(plan(exact), progress)
                except RequestCompositionError as error:
                    rejection = error
        background = background_preparations(rejection)
        if (
            background
            and request.thread_id is not None
            and read.history_source == "thread"
            and workflow.patched(FAIL_STARTS_REFRESH_PATCH)
        ):
            # `on_miss="fail"` does not wait for the summary, but starts its refresh so a
            # later turn can fit; without it every later turn would fail the same way.
            await self._prepare_summary(request, background[0], wait=False, head=read.head)
        self._set_stage("failed", rejection.code)
        raise ApplicationError(
            str(rejection),
            encode_details(
                ErrorDetails(
                    code=rejection.code,
                    request_id=plan_request.request_id,
                    diagnostics=rejection.diagnostics,
                )
            ),
            type=ErrorType.REQUEST_COMPOSITION,
            non_retryable=True,
        ) from None

    def _sealed(self, sealed: SealedPlan, progress: TurnProgress) -> SealedPlan:
        progress.maintenance = tuple(p for p in sealed.preparations if p.when == "after-response")
        return sealed

    async def _through_id(
        self, request: GenerationInput, need: Preparation, head: str | None
    ) -> str | None:
        """The id of the last message a preparation covers, named by position in the plan.

        The skeleton carries no ids, so the position is mapped on the path to the head the
        read observed (a commit after that head leaves the path to it as it was).
        """
        if need.through_id is not None or request.thread_id is None:
            return need.through_id
        if need.through_position is None:
            return None
        resolved: ResolveHistoryIdsResult = await self._waiting_out_storage(
            request,
            "summarising",
            ACTIVITY_RESOLVE_HISTORY_IDS,
            ResolveHistoryIdsInput(
                thread_id=request.thread_id,
                owner=request.owner,
                head=head,
                positions=[need.through_position],
            ),
            ResolveHistoryIdsResult,
            _options.with_summary(_options.READ_REQUEST, "summary boundary"),
        )
        return resolved.ids[0]

    async def _prepare_summary(
        self, request: GenerationInput, need: Preparation, *, wait: bool, head: str | None
    ) -> HistorySummary | None:
        """Run (`wait`) or start (maintenance) the summary workflow for one preparation."""
        through_id = await self._through_id(request, need, head)
        if request.thread_id is None or through_id is None:
            return None
        summary_input = PrepareSummaryInput(
            thread_id=request.thread_id,
            owner=request.owner,
            through_id=through_id,
            strategy=request.history.strategy,
            model=request.history.summary_model or request.model,
            counting_model=request.model,
            generation_id=request.generation_id,
            max_summary_tokens=need.max_summary_tokens,
        )
        child_id = summary_workflow_id(summary_input, encoded=workflow.patched(SUMMARY_ID_PATCH))
        if not wait:
            self._set_stage("maintenance", "summary scheduled")
            # Another generation may already have scheduled this artifact: that is enough.
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await workflow.start_child_workflow(
                    SUMMARY_WORKFLOW,
                    summary_input,
                    id=child_id,
                    parent_close_policy=ParentClosePolicy.ABANDON,
                )
            return None
        self._set_stage("summarising", "inline history summary")
        try:
            try:
                prepared = await workflow.execute_child_workflow(
                    SUMMARY_WORKFLOW, summary_input, id=child_id, result_type=PrepareSummaryResult
                )
                origin = "joined" if prepared.reused else "inline"
            except WorkflowAlreadyStartedError:
                # An identical preparation is running (another generation, maintenance, or
                # another worker): wait for that one, so its support calls are the only ones.
                if workflow.patched(SUMMARY_JOIN_PATCH):
                    prepared = await workflow.execute_activity(
                        ACTIVITY_AWAIT_SUMMARY,
                        AwaitSummaryInput(workflow_id=child_id, request=summary_input),
                        result_type=PrepareSummaryResult,
                        **_options.with_summary(_options.AWAIT_SUMMARY, "join summary"),
                    )
                else:
                    prepared = await workflow.execute_activity(
                        ACTIVITY_PREPARE_SUMMARY,
                        summary_input,
                        result_type=PrepareSummaryResult,
                        **_options.with_summary(_options.PREPARE_SUMMARY, "join summary"),
                    )
                origin = "joined"
        except (ChildWorkflowError, ActivityError) as error:
            if not workflow.patched(SUMMARY_JOIN_PATCH):
                raise
            raise _preparation_failed(error) from None
        return prepared.summary.model_copy(update={"origin": origin})

    async def _commit(
        self,
        request: GenerationInput,
        read: ReadRequestResult,
        progress: TurnProgress,
        steps: list[StepRecord],
        inspections: list[RequestInspection],
        superseded: list[RequestReceipt],
    ) -> GenerationResult:
        commit_input = CommitTurnInput(
            generation_id=request.generation_id,
            workflow_id=workflow_id_for(request.generation_id, request.thread_id),
            thread_id=request.thread_id,
            owner=request.owner,
            expected_head=read.head,
            accepted_attempt=progress.attempt,
            history_source=read.history_source,
            turn_messages=progress.turn_messages,
            message_tokens=[
                read.current_turn_tokens,
                *progress.turn_counts,
                steps[-1].output_tokens,
            ],
            encoding=read.encoding,
            steps=steps,
            inspections=inspections,
            superseded=superseded,
        )
        backoff = timedelta(seconds=1)
        rounds = 0
        blocked_since: datetime | None = None
        while True:
            self._set_stage("committing" if rounds == 0 else "commit_blocked")
            try:
                committed: CommitTurnResult = await workflow.execute_activity(
                    ACTIVITY_COMMIT_TURN,
                    commit_input,
                    result_type=CommitTurnResult,
                    **_options.with_summary(_options.COMMIT_TURN, "commit turn"),
                )
                return committed.result
            except ActivityError as error:
                cause = error.cause
                if isinstance(cause, ApplicationError) and cause.non_retryable:
                    self._set_stage("failed", "commit rejected")
                    code = decode_details(cause.details, cause.type).code or "commit_failed"
                    raise ApplicationError(
                        "the accepted turn could not be published",
                        encode_details(ErrorDetails(code=code)),
                        type=ErrorType.THREAD_COMMIT,
                        non_retryable=True,
                    ) from None
                rounds += 1
                # Storage is unavailable: stay visibly blocked and keep the staged output.
                blocked_since = blocked_since or workflow.now()
                self._check_storage_ceiling(request, blocked_since, "committing")
                self._set_stage("commit_blocked", f"commit round {rounds} failed; retrying")
                await workflow.sleep(backoff)
                backoff = min(backoff * 2, _options.COMMIT_BLOCKED_MAX_BACKOFF)

    async def _discard_after(self, request: GenerationInput, error: BaseException) -> None:
        """Remove what a failed or cancelled run staged; nothing of it may stay behind.

        Only for outcomes that end the run: Temporal failures, typed domain errors and
        cancellation. A bug that fails the workflow task (and is retried) keeps its
        staging, and an eviction unwinds without issuing commands.
        """
        cancelled = is_cancelled_exception(error)
        if not (cancelled or isinstance(error, FailureError | CruxError)):
            return
        if not workflow.patched(DISCARD_ON_FAILURE_PATCH):
            return
        self._set_stage("cancelled" if cancelled else "failed", "discarding staged content")
        # After a cancellation was delivered, new activities run normally; a second
        # cancellation request would not reach this one either way (it is the last step).
        with contextlib.suppress(ActivityError):
            await workflow.execute_activity(
                ACTIVITY_DISCARD_GENERATION,
                DiscardGenerationInput(
                    generation_id=request.generation_id, thread_id=request.thread_id
                ),
                result_type=DiscardGenerationResult,
                **_options.with_summary(_options.DISCARD_GENERATION, "discard staging"),
            )

    def _publish_identity(self, request: GenerationInput) -> None:
        """Name this run in search attributes, whatever the starter passed."""
        self._own_attributes = workflow.patched(_search.PATCH)
        if self._own_attributes:
            _search.upsert(
                _search.identity(
                    thread_id=request.thread_id,
                    generation_id=request.generation_id,
                    model=request.model,
                    stage="starting",
                )
            )

    def _set_stage(self, stage: str, details: str | None = None) -> None:
        self._stage = stage
        workflow.set_current_details(f"stage: {stage}" + (f" ({details})" if details else ""))
        # The worker verified at start that the attributes are registered. Runs started
        # before the workflow set them itself kept them only when the starter had.
        if self._own_attributes or workflow.info().typed_search_attributes.get(STAGE) is not None:
            _search.upsert([STAGE.value_set(stage)])


def _validated(raw: object) -> GenerationInput:
    try:
        return decode_input(raw, GenerationInput, what="generation input")
    except ConfigurationError as error:
        raise ApplicationError(
            str(error), type=ErrorType.CONFIGURATION, non_retryable=True
        ) from None


def _with_previous_reason(sealed: SealedPlan, reason: str) -> SealedPlan:
    """`sealed` with its receipt saying why it follows a plan that was never sent."""
    receipt = sealed.receipt.model_copy(update={"previous_reason": reason})
    return sealed.model_copy(update={"receipt": receipt})


def _preparation_failed(error: ChildWorkflowError | ActivityError) -> ApplicationError:
    """A typed, content-free failure for a history summary that could not be prepared.

    The cause's type is kept (a provider failure of the summary model reaches the caller as
    that `ProviderError`); details carry codes only.
    """
    cause: BaseException | None = error.cause
    while isinstance(cause, FailureError) and not (
        isinstance(cause, ApplicationError) and cause.type is not None
    ):
        cause = cause.cause
    if isinstance(cause, ApplicationError):
        return ApplicationError(
            "the history summary could not be prepared",
            *cause.details,
            type=cause.type,
            non_retryable=True,
        )
    return ApplicationError(
        "the history summary could not be prepared",
        type=ErrorType.PROVIDER,
        non_retryable=True,
    )


def _error_type(error: ActivityError) -> str | None:
    cause = error.cause
    return cause.type if isinstance(cause, ApplicationError) else None
