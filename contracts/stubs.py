"""The activities as the workflows call them: one typed stub per activity, no body.

Workflow code calls `workflow.execute_activity(stubs.invoke_model, ...)`: the stub gives the
activity's name, its input and its result type, so the call is checked by the type checker
and an editor follows it here, while nothing that does I/O is imported into the workflow
sandbox. The worker registers the implementations under the same names; each one is marked
with `activities.implements(stub)`, which checks that its types match the stub's, and a test
checks that every stub has exactly one implementation on the worker.

A stub's name is persisted in every history that scheduled it: renaming one changes the
command sequence (see the versioning policy in the docs).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from temporalio import activity

from contracts.acceptance import (
    ACTIVITY_CHECK_INPUT,
    ACTIVITY_CHECK_OUTPUT,
    ACTIVITY_RUN_SUCCESS_HOOK,
    CheckInputInput,
    CheckInputResult,
    CheckOutputInput,
    CheckOutputResult,
    RunSuccessHookInput,
    RunSuccessHookResult,
)
from contracts.activities import (
    ACTIVITY_AWAIT_SUMMARY,
    ACTIVITY_COMMIT_TURN,
    ACTIVITY_COUNT_REQUEST,
    ACTIVITY_DISCARD_GENERATION,
    ACTIVITY_INVOKE_MODEL,
    ACTIVITY_PREPARE_SUMMARY,
    ACTIVITY_READ_REQUEST,
    ACTIVITY_RECORD_PLAN,
    ACTIVITY_RESOLVE_HISTORY_IDS,
    ACTIVITY_RUN_TOOL,
    ACTIVITY_STAGE_SUMMARY_SOURCE,
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
    RecordPlanInput,
    ResolveHistoryIdsInput,
    ResolveHistoryIdsResult,
    RunToolInput,
    RunToolResult,
    StageSummarySourceInput,
    StageSummarySourceResult,
)
from contracts.cache_activities import (
    ACTIVITY_LOOKUP_CACHE,
    ACTIVITY_WRITE_CACHE,
    LookupCacheInput,
    LookupCacheResult,
    WriteCacheInput,
    WriteCacheResult,
)
from contracts.hooks import ACTIVITY_PREPARE_STEP, PrepareStepInput, PrepareStepResult

__all__ = [
    "STUBS",
    "await_summary",
    "check_input",
    "check_output",
    "commit_turn",
    "count_request",
    "discard_generation",
    "invoke_model",
    "lookup_cache",
    "prepare_step",
    "prepare_summary",
    "read_request",
    "record_plan",
    "resolve_history_ids",
    "run_success_hook",
    "run_tool",
    "stage_summary_source",
    "write_cache",
]


def _runs_on_the_worker(name: str) -> NoReturn:
    # A stub is a reference, never registered itself: reaching its body means a worker
    # was built without the implementations (the Crux worker plugin registers them).
    raise NotImplementedError(f"activity {name} runs on a worker with the Crux plugin")


@activity.defn(name=ACTIVITY_READ_REQUEST)
async def read_request(request: ReadRequestInput) -> ReadRequestResult:
    """Render the user turn, read one exact Thread revision and size everything.

    Implemented by `activities.GenerationActivities.read_request` (a local activity).
    """
    _runs_on_the_worker(ACTIVITY_READ_REQUEST)


@activity.defn(name=ACTIVITY_RESOLVE_HISTORY_IDS)
async def resolve_history_ids(request: ResolveHistoryIdsInput) -> ResolveHistoryIdsResult:
    """Map positions on the owner's selected path to message ids (a local activity)."""
    _runs_on_the_worker(ACTIVITY_RESOLVE_HISTORY_IDS)


@activity.defn(name=ACTIVITY_STAGE_SUMMARY_SOURCE)
async def stage_summary_source(request: StageSummarySourceInput) -> StageSummarySourceResult:
    """Name a transcript prefix by content and stage it for its summary (a local activity)."""
    _runs_on_the_worker(ACTIVITY_STAGE_SUMMARY_SOURCE)


@activity.defn(name=ACTIVITY_COUNT_REQUEST)
async def count_request(request: CountRequestInput) -> CountRequestResult:
    """Ask the provider for its exact count of a request that the estimate cannot settle."""
    _runs_on_the_worker(ACTIVITY_COUNT_REQUEST)


@activity.defn(name=ACTIVITY_RECORD_PLAN)
async def record_plan(request: RecordPlanInput) -> None:
    """Store a sealed plan's receipt and inspection before its attempt (a local activity)."""
    _runs_on_the_worker(ACTIVITY_RECORD_PLAN)


@activity.defn(name=ACTIVITY_INVOKE_MODEL)
async def invoke_model(request: InvokeModelInput) -> InvokeModelResult:
    """Re-check the pinned revision, call the provider for one sealed plan, stage its output."""
    _runs_on_the_worker(ACTIVITY_INVOKE_MODEL)


@activity.defn(name=ACTIVITY_LOOKUP_CACHE)
async def lookup_cache(request: LookupCacheInput) -> LookupCacheResult:
    """Answer a sealed plan from the response cache (staging the reply) or record the miss."""
    _runs_on_the_worker(ACTIVITY_LOOKUP_CACHE)


@activity.defn(name=ACTIVITY_WRITE_CACHE)
async def write_cache(request: WriteCacheInput) -> WriteCacheResult:
    """Store a committed turn's reply in the response cache (after the commit only)."""
    _runs_on_the_worker(ACTIVITY_WRITE_CACHE)


@activity.defn(name=ACTIVITY_RUN_TOOL)
async def run_tool(request: RunToolInput) -> RunToolResult:
    """Run one tool call on the worker that registered the tool and stage its result."""
    _runs_on_the_worker(ACTIVITY_RUN_TOOL)


@activity.defn(name=ACTIVITY_PREPARE_STEP)
async def prepare_step(request: PrepareStepInput) -> PrepareStepResult:
    """Run a registered `prepare_step` or `prepare_invocation` hook (content-free context)."""
    _runs_on_the_worker(ACTIVITY_PREPARE_STEP)


@activity.defn(name=ACTIVITY_PREPARE_SUMMARY)
async def prepare_summary(request: PrepareSummaryInput) -> PrepareSummaryResult:
    """Prepare (or find) the summary of a history prefix; its text stays in PostgreSQL."""
    _runs_on_the_worker(ACTIVITY_PREPARE_SUMMARY)


@activity.defn(name=ACTIVITY_AWAIT_SUMMARY)
async def await_summary(request: AwaitSummaryInput) -> PrepareSummaryResult:
    """Wait for an identical summary preparation that another run started."""
    _runs_on_the_worker(ACTIVITY_AWAIT_SUMMARY)


@activity.defn(name=ACTIVITY_CHECK_INPUT)
async def check_input(request: CheckInputInput) -> CheckInputResult:
    """Run input safety on the staged user turn, replacing or scrubbing it (a local activity)."""
    _runs_on_the_worker(ACTIVITY_CHECK_INPUT)


@activity.defn(name=ACTIVITY_CHECK_OUTPUT)
async def check_output(request: CheckOutputInput) -> CheckOutputResult:
    """Judge a staged final reply: terminal safety, then constraints (a local activity)."""
    _runs_on_the_worker(ACTIVITY_CHECK_OUTPUT)


@activity.defn(name=ACTIVITY_RUN_SUCCESS_HOOK)
async def run_success_hook(request: RunSuccessHookInput) -> RunSuccessHookResult:
    """Run one success hook registered on the worker, after the turn was committed."""
    _runs_on_the_worker(ACTIVITY_RUN_SUCCESS_HOOK)


@activity.defn(name=ACTIVITY_COMMIT_TURN)
async def commit_turn(request: CommitTurnInput) -> CommitTurnResult:
    """Publish the accepted turn as one causal group (a local activity; replays on retry)."""
    _runs_on_the_worker(ACTIVITY_COMMIT_TURN)


@activity.defn(name=ACTIVITY_DISCARD_GENERATION)
async def discard_generation(request: DiscardGenerationInput) -> DiscardGenerationResult:
    """Remove what a failed or cancelled generation staged."""
    _runs_on_the_worker(ACTIVITY_DISCARD_GENERATION)


STUBS: tuple[Callable[[Any], Awaitable[Any]], ...] = (
    read_request,
    resolve_history_ids,
    stage_summary_source,
    count_request,
    record_plan,
    invoke_model,
    lookup_cache,
    write_cache,
    run_tool,
    prepare_step,
    prepare_summary,
    await_summary,
    check_input,
    check_output,
    commit_turn,
    run_success_hook,
    discard_generation,
)
"""Every activity the workflows call; the worker must implement each exactly once."""
