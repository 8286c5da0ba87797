"""The activities of one managed generation: read, invoke, commit.

Each method resolves its dependencies, calls the store or a provider, and maps errors in
one place (`_errors.to_application_error`). Every write is keyed by `generation_id` (and
attempt), so a retried activity finds its own earlier work instead of repeating it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from temporalio.common import WorkerDeploymentVersion

from activities._assembly import RequestAssembler
from activities._errors import maps_errors
from activities._heartbeat import heartbeating
from activities._implements import implements
from activities._inputs import InputStager
from activities._local import uninterrupted
from activities._plan_records import PlanRecorder
from activities._providers import ProviderRegistry
from activities._registries import (
    HookLookup,
    NoHooks,
    NoSuccessHooks,
    NoTools,
    PromptLookup,
    SuccessHookLookup,
    ToolLookup,
)
from activities._reply import check_reply_encrypted
from activities._tools import ToolRunner
from activities.acceptance import AcceptanceChecks
from activities.caching import ResponseCache
from activities.committing import TurnCommitter
from activities.gate import CustomPolicy
from activities.hooks import StepPreparer
from activities.invoking import ModelInvoker
from activities.reading import RequestReader
from activities.success_hooks import SuccessHookRunner
from activities.summaries import SummaryPreparer, TranscriptSources
from activities.summary_join import await_running_summary
from contracts import stubs
from contracts.acceptance import (
    CheckInputInput,
    CheckInputResult,
    CheckOutputInput,
    CheckOutputResult,
    RunSuccessHookInput,
    RunSuccessHookResult,
)
from contracts.activities import (
    AwaitSummaryInput,
    CommitTurnInput,
    CommitTurnResult,
    CountRequestInput,
    CountRequestResult,
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
    LookupCacheInput,
    LookupCacheResult,
    WriteCacheInput,
    WriteCacheResult,
)
from contracts.hooks import PrepareStepInput, PrepareStepResult
from contracts.planning import first_plan, plan_digest
from planner import ModelCatalog
from storage import CacheStore, GenerationStore, ReceiptStore, SummaryStore, ThreadStore
from vocabulary.gathered import settled
from vocabulary.ids import assistant_message_id

__all__ = ["GenerationActivities", "assistant_message_id"]


class GenerationActivities:
    """Activities for `ManagedGenerationWorkflow`, holding the worker's clients.

    Args:
        threads: The canonical Thread store.
        generations: Staging, ledger and receipts.
        providers: Model id to provider client.
        prompts: Prompts plain Temporal clients may name.
        catalog: Model capacity profiles.
        tools: Tools the model may call, run here as their own activities.
        summaries: Summary artifacts for managed history.
        receipts: Request receipts and inspections.
        hooks: `prepare_step` / `prepare_invocation` hooks, run here as an activity.
        cache: The response cache's entries (on the Thread store's pool by default).
        policies: Custom safety policy functions generations may name, by name.
        success_hooks: Success hooks generations may name (`on_success`), run here after
            their turn was committed.
        version: This worker's deployment version (`None` unversioned): a summary run an
            inline preparation starts is pinned to it.
    """

    def __init__(
        self,
        *,
        threads: ThreadStore,
        generations: GenerationStore,
        providers: ProviderRegistry,
        prompts: PromptLookup,
        catalog: ModelCatalog,
        tools: ToolLookup | None = None,
        summaries: SummaryStore | None = None,
        receipts: ReceiptStore | None = None,
        hooks: HookLookup | None = None,
        cache: CacheStore | None = None,
        policies: Mapping[str, CustomPolicy] | None = None,
        success_hooks: SuccessHookLookup | None = None,
        version: WorkerDeploymentVersion | None = None,
    ) -> None:
        self._version = version
        self._generations = generations
        self._threads = threads
        offered: ToolLookup = tools or NoTools()
        summaries = summaries or SummaryStore(threads.pool)
        assembler = RequestAssembler(threads, generations, summaries)
        self._reader = RequestReader(
            threads=threads,
            generations=generations,
            summaries=summaries,
            inputs=InputStager(generations, prompts),
            assembler=assembler,
            catalog=catalog,
            tool_specs=lambda names: [tool.spec for tool in offered.require(names)],
            tool_policies=lambda names: {
                tool.name: tool.policy for tool in offered.require(names) if tool.policy
            },
            approval_tools=lambda names: [
                tool.name
                for tool in offered.require(names)
                if getattr(tool, "requires_approval", False) is True
            ],
        )
        self._receipts = receipts or ReceiptStore(threads.pool)
        self._plans = PlanRecorder(self._receipts, summaries)
        self._invoker = ModelInvoker(
            threads=threads,
            generations=generations,
            providers=providers,
            catalog=catalog,
            tools=offered,
            assembler=assembler,
            prompts=prompts,
            receipts=self._receipts,
        )
        self._committer = TurnCommitter(threads, generations, assembler, self._receipts)
        self._preparer = SummaryPreparer(threads, summaries, generations, providers, catalog)
        self._transcripts = TranscriptSources(generations, summaries)
        self._tool_runner = ToolRunner(generations, offered, catalog)
        self._step_preparer = StepPreparer(generations, hooks or NoHooks(), catalog)
        self._cache = ResponseCache(
            threads=threads,
            generations=generations,
            store=cache or CacheStore(threads.pool),
            providers=providers,
            tools=offered,
            assembler=assembler,
            prompts=prompts,
        )
        self._checks = AcceptanceChecks(generations, self._receipts, catalog, policies)
        self._success_hooks = SuccessHookRunner(success_hooks or NoSuccessHooks())

    @property
    def generations(self) -> GenerationStore:
        """The staging store (shared with the cleanup activities)."""
        return self._generations

    @implements(stubs.read_request)
    @maps_errors
    async def read_request(self, request: ReadRequestInput) -> ReadRequestResult:
        """Render the user turn, read one exact Thread revision and size everything."""
        if request.include_reply:
            # Before anything is staged or sent: the reply would reach history in clear.
            check_reply_encrypted()
        read = await uninterrupted(self._reader.read(request))
        ahead = request.plan_ahead
        if ahead is None or read.existing is not None:
            return read
        # The first plan sealed and recorded here saves the workflow a local activity (and
        # a workflow task activation) before its first provider call; naming where the
        # summaries it asks for end saves another.
        first = first_plan(ahead.generation, read, ahead.request_id)
        read = read.with_through_ids(first.summary_positions)
        sealed = first.sealed
        if sealed is None:
            return read
        recorded = RecordPlanInput.of(ahead.generation, sealed)
        await uninterrupted(self._plans.record(recorded))
        return read.with_recorded(recorded, plan_digest(sealed))

    @implements(stubs.invoke_model)
    @maps_errors
    async def invoke_model(self, request: InvokeModelInput) -> InvokeModelResult:
        """Re-check the pinned revision, call the provider once, stage the output.

        With `request.commit`, an answer that ends the turn is published here as well.
        """
        # The attempt's reads go out at once: its lookups of an earlier try's staged output
        # (and, with a commit, of the turn that try published) beside the plan's own reads,
        # which a first try needs next (a retry that finds its answer discards them).
        if request.commit is None:
            staged, reads = await asyncio.gather(
                self._invoker.staged_output(request), self._invoker.plan_reads(request)
            )
            invoked = await self._invoker.invoke(request, staged, reads)
        else:
            # An earlier execution may have published the turn and lost its completion
            # (Temporal retries it; a storage wait runs it again): report that commit.
            found, staged, reads = await asyncio.gather(
                self._committer.published(request),
                self._invoker.staged_output(request),
                self._invoker.plan_reads(request),
                return_exceptions=True,
            )
            published = settled(found)
            if published is not None:
                return published
            invoked = await self._invoker.invoke(request, settled(staged), settled(reads))
        if request.commit is None or not invoked.ends_the_turn:
            return invoked
        return await self._committer.publish_answer(request, invoked)

    @implements(stubs.lookup_cache)
    @maps_errors
    async def lookup_cache(self, request: LookupCacheInput) -> LookupCacheResult:
        """Answer a sealed plan from the response cache, or record the miss for the write."""
        return await self._cache.lookup(request)

    @implements(stubs.write_cache)
    @maps_errors
    async def write_cache(self, request: WriteCacheInput) -> WriteCacheResult:
        """Store a committed reply in the response cache (nothing for an uncommitted turn)."""
        return await self._cache.write(request)

    @implements(stubs.run_tool)
    @maps_errors
    async def run_tool(self, request: RunToolInput) -> RunToolResult:
        """Run one tool call and stage its result as the next message of the turn."""
        return await heartbeating(self._tool_runner.run(request))

    @implements(stubs.prepare_step)
    @maps_errors
    async def prepare_step(self, request: PrepareStepInput) -> PrepareStepResult:
        """Run a registered step hook on a content-free context; validate its overrides."""
        return await self._step_preparer.prepare(request)

    @implements(stubs.prepare_summary)
    @maps_errors
    async def prepare_summary(self, request: PrepareSummaryInput) -> PrepareSummaryResult:
        """Prepare (or find) the summary artifact of a Thread prefix."""
        return await heartbeating(self._preparer.prepare(request))

    @implements(stubs.await_summary)
    @maps_errors
    async def await_summary(self, request: AwaitSummaryInput) -> PrepareSummaryResult:
        """Wait for an identical summary preparation already running and return its artifact."""
        return await await_running_summary(request, version=self._version)

    @implements(stubs.count_request)
    @maps_errors
    async def count_request(self, request: CountRequestInput) -> CountRequestResult:
        """Ask the provider for an exact input count (`None` when it cannot count)."""
        return await self._invoker.count(request)

    @implements(stubs.record_plan)
    @maps_errors
    async def record_plan(self, request: RecordPlanInput) -> None:
        """Store a sealed plan's receipt and inspection once (a retry writes nothing).

        Run as a local activity before the plan's attempt, also for plans that are never
        sent (the Thread moved first) or that the provider rejects, so every request id a
        receipt or error names can be inspected.
        """
        await uninterrupted(self._plans.record(request))

    @implements(stubs.resolve_history_ids)
    @maps_errors
    async def resolve_history_ids(self, request: ResolveHistoryIdsInput) -> ResolveHistoryIdsResult:
        """Name the messages at some positions of the owner's selected path."""
        _, ids = await self._threads.path_ids(request.thread_id, owner=request.owner)
        return ResolveHistoryIdsResult(
            ids=[ids[p] if 0 <= p < len(ids) else None for p in request.positions]
        )

    @implements(stubs.stage_summary_source)
    @maps_errors
    async def stage_summary_source(
        self, request: StageSummarySourceInput
    ) -> StageSummarySourceResult:
        """Name a transcript prefix by content and stage it for its summary preparation."""
        return await uninterrupted(self._transcripts.stage(request))

    @implements(stubs.commit_turn)
    @maps_errors
    async def commit_turn(self, request: CommitTurnInput) -> CommitTurnResult:
        """Publish the accepted turn as one causal group and record the generation."""
        return await uninterrupted(self._committer.commit(request))

    @implements(stubs.check_input)
    @maps_errors
    async def check_input(self, request: CheckInputInput) -> CheckInputResult:
        """Run input safety on the staged user turn; replace (or empty) its staged text."""
        return await uninterrupted(self._checks.check_input(request))

    @implements(stubs.check_output)
    @maps_errors
    async def check_output(self, request: CheckOutputInput) -> CheckOutputResult:
        """Judge a staged final reply (terminal safety, constraints); withdraw a refused one."""
        return await uninterrupted(self._checks.check_output(request))

    @implements(stubs.run_success_hook)
    @maps_errors
    async def run_success_hook(self, request: RunSuccessHookInput) -> RunSuccessHookResult:
        """Run one success hook after its generation's turn was committed."""
        return await heartbeating(self._success_hooks.run(request))
