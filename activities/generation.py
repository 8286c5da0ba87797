"""The activities of one managed generation: read, invoke, commit.

Each method resolves its dependencies, calls the store or a provider, and maps errors in
one place (`_errors.to_application_error`). Every write is keyed by `generation_id` (and
attempt), so a retried activity finds its own earlier work instead of repeating it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from temporalio import activity

from activities._assembly import RequestAssembler
from activities._errors import is_storage_unavailable, maps_errors
from activities._inputs import InputStager, replayed, scoped_key
from activities._outage import Unstaged, keeping_side_effect
from activities._providers import ProviderRegistry
from activities._registries import NoTools, PromptLookup, ToolLookup
from activities._streaming import stream_to_staging
from activities._tools import ToolRunner
from activities.skeleton import caller_skeleton, content_tokens, thread_ids_at, thread_skeleton
from activities.summaries import SummaryPreparer, as_history_summary, await_running_summary
from contracts.activities import (
    ACTIVITY_AWAIT_SUMMARY,
    ACTIVITY_COMMIT_TURN,
    ACTIVITY_COUNT_REQUEST,
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
from contracts.generation import GenerationResult, Usage
from planner import InputBudget, ModelCatalog, ModelProfile, derive_budget
from providers import (
    AuthoritativeCounter,
    ChatRequest,
    StreamingChatProvider,
    TokenCounter,
)
from storage import GenerationStore, SummaryStore, ThreadStore
from telemetry.logs import get_logger
from vocabulary.errors import ThreadError
from vocabulary.messages import Message
from vocabulary.staging import StagingKind, turn_kind

_T = TypeVar("_T")
_log = get_logger(__name__)

# Heartbeats well inside the 30 s heartbeat timeout set by the workflow.
HEARTBEAT_INTERVAL_SECONDS = 5.0


@dataclass(frozen=True)
class _Answer:
    """A provider answer of one attempt, as it is staged."""

    output: Message
    call_message: Message | None
    result: InvokeModelResult
    sources: tuple[str, ...] = ()
    """Thread messages the request was built from (the redaction cascade follows them)."""


def assistant_message_id(generation_id: str) -> str:
    """Deterministic id of a generation's final assistant message."""
    return f"gen:{generation_id}:assistant"


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
    ) -> None:
        self._threads = threads
        self._generations = generations
        self._providers = providers
        self._prompts = prompts
        self._catalog = catalog
        self._tools: ToolLookup = tools or NoTools()
        self._summaries = summaries or SummaryStore(threads.pool)
        self._assembler = RequestAssembler(threads, generations, self._summaries)
        self._preparer = SummaryPreparer(threads, self._summaries, generations, providers, catalog)
        self._inputs = InputStager(generations, prompts)
        self._tool_runner = ToolRunner(generations, self._tools, catalog)
        self._unstaged: Unstaged[tuple[str, int], _Answer] = Unstaged()

    @property
    def generations(self) -> GenerationStore:
        """The staging store (shared with the cleanup activities)."""
        return self._generations

    @activity.defn(name=ACTIVITY_READ_REQUEST)
    @maps_errors
    async def read_request(self, request: ReadRequestInput) -> ReadRequestResult:
        """Render the user turn, read one exact Thread revision and size everything."""
        return await self._read_request(request)

    @activity.defn(name=ACTIVITY_INVOKE_MODEL)
    @maps_errors
    async def invoke_model(self, request: InvokeModelInput) -> InvokeModelResult:
        """Re-check the pinned revision, call the provider once, stage the output."""
        return await self._invoke_model(request)

    @activity.defn(name=ACTIVITY_RUN_TOOL)
    @maps_errors
    async def run_tool(self, request: RunToolInput) -> RunToolResult:
        """Run one tool call and stage its result as the next message of the turn."""
        return await self._tool_runner.run(request)

    @activity.defn(name=ACTIVITY_PREPARE_SUMMARY)
    @maps_errors
    async def prepare_summary(self, request: PrepareSummaryInput) -> PrepareSummaryResult:
        """Prepare (or find) the summary artifact of a Thread prefix."""
        return await self._preparer.prepare(request)

    @activity.defn(name=ACTIVITY_AWAIT_SUMMARY)
    @maps_errors
    async def await_summary(self, request: AwaitSummaryInput) -> PrepareSummaryResult:
        """Wait for an identical summary preparation already running and return its artifact."""
        return await await_running_summary(request)

    @activity.defn(name=ACTIVITY_COUNT_REQUEST)
    @maps_errors
    async def count_request(self, request: CountRequestInput) -> CountRequestResult:
        """Ask the provider for an exact input count (`None` when it cannot count)."""
        return await self._count_request(request)

    @activity.defn(name=ACTIVITY_RESOLVE_HISTORY_IDS)
    @maps_errors
    async def resolve_history_ids(self, request: ResolveHistoryIdsInput) -> ResolveHistoryIdsResult:
        """Name the messages at some positions of the path to the head a read observed."""
        view = await self._threads.read_history_view(
            request.thread_id, owner=request.owner, head=request.head
        )
        ids = view.message_ids
        return ResolveHistoryIdsResult(
            ids=[ids[p] if 0 <= p < len(ids) else None for p in request.positions]
        )

    @activity.defn(name=ACTIVITY_COMMIT_TURN)
    @maps_errors
    async def commit_turn(self, request: CommitTurnInput) -> CommitTurnResult:
        """Publish the accepted turn as one causal group and record the generation."""
        return await self._commit_turn(request)

    async def _read_request(self, request: ReadRequestInput) -> ReadRequestResult:
        await self._inputs.check_identity(request)
        existing = await self._generations.find_result(scoped_key(request))
        if existing is not None:
            return ReadRequestResult(existing=replayed(existing))
        profile = self._catalog.resolve(request.model)
        counter = TokenCounter.for_encoding(profile.encoding)
        ceiling = _ceiling(request, profile)
        request = request.model_copy(update={"max_input_tokens": ceiling})
        user, system = await self._inputs.stage(request)
        [turn_tokens, *rest] = content_tokens(counter, [user, *([system] if system else [])])
        system_tokens = rest[0] if rest else 0
        context_tokens = await self._context_tokens(request, counter)
        tool_schema_tokens = sum(
            counter.count_definition(tool.spec.model_dump_json())
            for tool in self._tools.require(request.tools)
        )

        # History source precedence: call-site messages > prompt-level messages > the
        # Thread's selected path > none. Arrays are never merged.
        transcript = await self._inputs.transcript(request)
        if transcript is not None:
            caller, reason = transcript
            columns, older = caller_skeleton(counter, caller, request.max_input_tokens)
            if request.thread_id is not None:
                # Shadowing is deliberate but must be visible in every environment.
                _log.info(
                    "thread.history.override",
                    generation_id=request.generation_id,
                    thread_id=request.thread_id,
                    reason=reason,
                    source="call-site" if reason == "explicit-messages" else "prompt",
                    shadowed="thread",
                    messages=len(caller),
                )
            return ReadRequestResult(
                profile=profile,
                history_source="caller-messages",
                history=columns,
                older_history=older,
                system_tokens=system_tokens,
                current_turn_tokens=turn_tokens,
                counting_confidence=counter.confidence,
                encoding=counter.encoding_name,
                context_tokens=context_tokens,
                tool_schema_tokens=tool_schema_tokens,
            )

        if request.thread_id is None:
            if request.history.kind != "exact":
                # The receipt carries HISTORY_SOURCE_MISSING too; this is the operator's copy.
                _log.warning(
                    "history.source.missing",
                    generation_id=request.generation_id,
                    policy=request.history.kind,
                )
            return ReadRequestResult(
                profile=profile,
                history_source="none",
                system_tokens=system_tokens,
                current_turn_tokens=turn_tokens,
                counting_confidence=counter.confidence,
                encoding=counter.encoding_name,
                context_tokens=context_tokens,
                tool_schema_tokens=tool_schema_tokens,
            )

        skeleton = await thread_skeleton(
            self._threads,
            counter,
            request.thread_id,
            owner=request.owner,
            ceiling=request.max_input_tokens,
            store_counts=True,
        )
        summary = None
        if request.history.kind == "managed":
            found = await self._summaries.best(
                request.thread_id,
                [entry.id for entry in skeleton.view.messages],
                strategy=request.history.strategy,
                model=request.history.summary_model or request.model,
            )
            if found is not None:
                summary = as_history_summary(found)
        return ReadRequestResult(
            profile=profile,
            history_source="thread",
            summary=summary,
            revision=skeleton.view.revision,
            head=skeleton.view.head,
            history=skeleton.history,
            older_history=skeleton.older,
            system_tokens=system_tokens,
            current_turn_tokens=turn_tokens,
            counting_confidence=counter.confidence,
            encoding=counter.encoding_name,
            counted_messages=skeleton.counted,
            context_tokens=context_tokens,
            tool_schema_tokens=tool_schema_tokens,
        )

    async def _context_tokens(
        self, request: ReadRequestInput, counter: TokenCounter
    ) -> dict[str, int]:
        if not request.context_source_ids:
            return {}
        texts = await self._assembler.context_messages(
            scoped_key(request), request.context_source_ids
        )
        counts = content_tokens(counter, texts)
        return dict(zip(request.context_source_ids, counts, strict=True))

    async def _count_request(self, request: CountRequestInput) -> CountRequestResult:
        provider, model_name = self._providers.resolve(request.model)
        if not isinstance(provider, AuthoritativeCounter):
            return CountRequestResult()
        sources: list[str] = []
        if request.history_source == "thread" and request.thread_id:
            # Counted right after the read; the invoke re-checks the revision anyway.
            sources = (
                await thread_ids_at(
                    self._threads,
                    request.thread_id,
                    owner=request.owner,
                    revision=None,
                    ranges=request.message_ranges,
                )
                or []
            )
        messages = await self._assembler.request_messages(
            scoped_key(request),
            request.thread_id,
            request.history_source,
            sources,
            request.context,
            message_ranges=request.message_ranges,
        )
        tokens = await provider.count_tokens(ChatRequest(model=model_name, messages=messages))
        _log.info(
            "provider.count.completed",
            generation_id=request.generation_id,
            model=request.model,
            input_tokens=tokens,
        )
        return CountRequestResult(input_tokens=tokens)

    async def _invoke_model(self, request: InvokeModelInput) -> InvokeModelResult:
        staged = await self._generations.get_staged(
            scoped_key(request), request.attempt, StagingKind.OUTPUT
        )
        if staged is not None and staged.info is not None:
            # A retry after a lost completion: the provider already answered this attempt.
            # Its output is kept even if the Thread moved since (it is committed after the
            # head the read observed), unless one of its sources was redacted meanwhile.
            await self._refuse_if_sources_redacted(request, staged.source_message_ids)
            return InvokeModelResult.model_validate({**staged.info, "reused_staged_output": True})
        held = self._unstaged.get((scoped_key(request), request.attempt))
        if held is not None:
            # The provider answered this attempt here before storage went away: stage that
            # answer now rather than paying for another.
            result = await self._stage_answer(request, held)
            await self._refuse_if_sources_redacted(request, held.sources)
            return result.model_copy(update={"reused_staged_output": True})
        sources = await self._pinned_sources(request)
        if sources is None:
            # Nothing was sent for this plan yet: sending it now would answer a stale view
            # of the Thread, so the workflow reads the new revision and plans again.
            _log.info(
                "provider.attempt.revision_moved",
                generation_id=request.generation_id,
                attempt=request.attempt,
            )
            return InvokeModelResult.moved()
        messages = await self._assembler.request_messages(
            scoped_key(request),
            request.thread_id,
            request.history_source,
            sources,
            request.context,
            request.turn_messages,
            summary=(request.summary_artifact_id, request.summary_position),
            message_ranges=request.message_ranges,
        )
        provider, model_name = self._providers.resolve(request.model)
        chat_request = ChatRequest(
            model=model_name,
            messages=messages,
            max_output_tokens=request.max_output_tokens,
            tools=[t.spec for t in self._tools.require(request.tools)],
            tool_choice=request.tool_choice if request.tools else None,
        )
        if request.stream and isinstance(provider, StreamingChatProvider):
            response = await stream_to_staging(
                provider, chat_request, request, self._generations, sources
            )
        else:
            response = await _with_heartbeat(provider.complete(chat_request))
        output = Message(
            id=assistant_message_id(request.generation_id),
            role="assistant",
            content=response.message.content,
        )
        if output.tool_calls and (request.tool_choice == "none" or not request.tools):
            # The model called tools it was told not to use: keep its text, drop the calls,
            # so the turn still ends in an answer the Thread can accept.
            _log.warning(
                "provider.tool_calls.ignored",
                generation_id=request.generation_id,
                calls=len(output.tool_calls),
            )
            output = output.model_copy(
                update={"content": [p for p in output.parts if p.kind != "tool-call"]}
            )
        profile = self._catalog.resolve(request.model)
        counter = TokenCounter.for_encoding(profile.encoding)
        output_tokens = counter.count_message(output)
        call_message = None
        if output.tool_calls:
            # The tool-call message joins the turn; its results follow it there.
            call_message = output.model_copy(
                update={"id": f"gen:{request.generation_id}:turn:{request.turn_messages}"}
            )
        result = InvokeModelResult(
            usage=Usage(
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            ),
            finish_reason=response.finish_reason,
            output_tokens=output_tokens,
            tool_call_ids=[c.tool_call_id for c in output.tool_calls],
            # Same content as the output, already counted.
            turn_tokens=output_tokens if call_message is not None else 0,
        )
        await self._stage_answer(request, _Answer(output, call_message, result, tuple(sources)))
        await self._refuse_if_sources_redacted(request, sources)
        _log.info(
            "provider.attempt.completed",
            generation_id=request.generation_id,
            attempt=request.attempt,
            model=request.model,
            input_tokens=result.usage.input_tokens,
            output_tokens=result.usage.output_tokens,
            finish_reason=result.finish_reason,
        )
        return result

    async def _stage_answer(self, request: InvokeModelInput, answer: _Answer) -> InvokeModelResult:
        """Stage a provider answer; held in this process if storage is down meanwhile."""
        key = (scoped_key(request), request.attempt)
        try:
            if answer.call_message is not None:
                call_message = answer.call_message
                await keeping_side_effect(
                    lambda: self._generations.stage(
                        scoped_key(request),
                        0,
                        turn_kind(request.turn_messages),
                        call_message,
                        thread_id=request.thread_id,
                    )
                )
            await keeping_side_effect(
                lambda: self._generations.stage(
                    scoped_key(request),
                    request.attempt,
                    StagingKind.OUTPUT,
                    answer.output,
                    thread_id=request.thread_id,
                    source_message_ids=answer.sources,
                    info=answer.result.model_dump(mode="json"),
                )
            )
        except Exception as error:
            if is_storage_unavailable(error):
                self._unstaged.keep(key, answer)
            raise
        self._unstaged.staged(key)
        return answer.result

    async def _pinned_sources(self, request: InvokeModelInput) -> list[str] | None:
        """The Thread message ids the plan's positions name, `None` if the Thread moved.

        One read of the path both checks the pinned revision and maps the positions: a
        plan sealed on another revision would name other messages.
        """
        if request.history_source != "thread" or not request.thread_id:
            return []
        if not request.message_ranges:
            if not request.revision:
                return []
            try:
                await self._threads.validate_revision(
                    request.thread_id, request.revision, owner=request.owner
                )
            except ThreadError as moved:
                if moved.code != "identity_conflict":
                    raise  # deleted: nothing can be committed any more
                return None
            return []
        return await thread_ids_at(
            self._threads,
            request.thread_id,
            owner=request.owner,
            revision=request.revision or None,
            ranges=request.message_ranges,
        )

    async def _refuse_if_sources_redacted(
        self, request: InvokeModelInput, sources: Sequence[str]
    ) -> None:
        """Drop this attempt's output if a message it was built from was redacted meanwhile.

        The redaction cascade deletes staged rows derived from redacted messages, but a
        redaction that lands during the provider call runs before this output is staged.
        """
        if request.history_source != "thread" or not request.thread_id or not request.revision:
            return
        try:
            await self._threads.validate_revision(
                request.thread_id, request.revision, owner=request.owner
            )
            return  # Nothing changed at all: the common case costs one indexed read.
        except ThreadError as moved:
            if moved.code != "identity_conflict":
                await self._generations.drop_staged(scoped_key(request), request.attempt)
                raise
        try:
            # The Thread moved (new turns are legitimate); check the sources themselves.
            await self._threads.load_messages(request.thread_id, sources)
        except ThreadError:
            await self._generations.drop_staged(scoped_key(request), request.attempt)
            raise

    async def _commit_turn(self, request: CommitTurnInput) -> CommitTurnResult:
        existing = await self._generations.find_result(scoped_key(request))
        if existing is not None:
            return CommitTurnResult(result=existing)
        output = await self._generations.get_staged(
            scoped_key(request), request.accepted_attempt, StagingKind.OUTPUT
        )
        if output is None:
            raise ThreadError("not_found", "the accepted attempt's output is not staged")
        usage = Usage(
            input_tokens=sum(s.usage.input_tokens for s in request.steps),
            output_tokens=sum(s.usage.output_tokens for s in request.steps),
        )
        commit = None
        if request.history_source == "thread" and request.thread_id is not None:
            user = await self._generations.get_staged(scoped_key(request), 0, StagingKind.USER)
            if user is None:
                raise ThreadError("not_found", "staged input is missing")
            turn = await self._assembler.turn_messages(scoped_key(request), request.turn_messages)
            commit = await self._threads.commit_managed_turn(
                request.thread_id,
                [user.message, *turn, output.message],
                expected_head=request.expected_head,
                owner=request.owner,
            )
            if request.encoding and len(request.message_tokens) == len(commit.message_ids):
                await self._threads.store_token_counts(
                    request.thread_id,
                    request.encoding,
                    dict(zip(commit.message_ids, request.message_tokens, strict=True)),
                )
        inspections = {
            inspection.id: inspection.model_dump(mode="json") for inspection in request.inspections
        }
        result = GenerationResult(
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            output_message_id=assistant_message_id(request.generation_id),
            thread_commit=commit,
            steps=tuple(request.steps),
            usage=usage,
            history_source=request.history_source,
        )
        stored = await self._generations.record_result(
            result,
            workflow_id=request.workflow_id,
            receipts=[
                (
                    receipt.id,
                    receipt.model_dump(mode="json"),
                    inspections.get(receipt.id),
                )
                for receipt in (*request.superseded, *(step.request for step in request.steps))
            ],
            keep_final=output.message if commit is None else None,
        )
        if commit is not None:
            _log.info(
                "thread.turn.committed",
                generation_id=request.generation_id,
                thread_id=request.thread_id,
                status=commit.status,
                messages=len(commit.message_ids),
                replayed=commit.replayed,
            )
        return CommitTurnResult(result=stored)


async def _with_heartbeat(call: Awaitable[_T]) -> _T:
    task = asyncio.ensure_future(call)
    while True:
        done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_INTERVAL_SECONDS)
        if done:
            return task.result()
        activity.heartbeat()


def _ceiling(request: ReadRequestInput, profile: ModelProfile) -> int:
    """The skeleton's bound: from this worker's profile when the workflow asks for it."""
    if not request.derive_ceiling:
        return request.max_input_tokens
    spec = request.input_budget
    budget = None if spec is None else InputBudget(optimize_at=spec.optimize_at, max=spec.max)
    return derive_budget(profile, budget, output_reserve=request.max_output_tokens).max
