"""The provider stages of a generation: one attempt (`invoke_model`) and an exact count.

An attempt re-checks the pinned revision, rebuilds the sealed request from PostgreSQL, calls
the provider once and stages the answer keyed by attempt, so a retry finds it instead of
paying again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from temporalio import activity

from activities._assembly import RequestAssembler
from activities._inputs import scoped_key
from activities._outage import Unstaged, keeping_side_effect
from activities._output import reply_defects
from activities._pinning import PlanReads, plan_reads, refuse_if_sources_redacted
from activities._providers import ProviderRegistry, sampling_fields
from activities._registries import PromptLookup, ToolLookup
from activities._streaming import stream_to_staging
from activities.skeleton import thread_ids_at
from contracts.activities import (
    CountRequestInput,
    CountRequestResult,
    InvokeModelInput,
    InvokeModelResult,
)
from contracts.generation import Usage
from planner import ModelCatalog
from providers import (
    AuthoritativeCounter,
    ChatRequest,
    ChatResponse,
    StreamingChatProvider,
    TokenCounter,
)
from storage import GenerationStore, ReceiptStore, StagedMessage, ThreadStore
from telemetry.logs import get_logger
from vocabulary.errors import StorageUnavailableError
from vocabulary.ids import assistant_message_id, turn_message_id
from vocabulary.messages import Message
from vocabulary.staging import StagingKind, turn_kind

_T = TypeVar("_T")
_log = get_logger(__name__)

HEARTBEAT_INTERVAL_SECONDS = 5.0
"""Heartbeats well inside the 30 s heartbeat timeout set by the workflow."""


@dataclass(frozen=True)
class _Answer:
    """A provider answer of one attempt, as it is staged."""

    output: Message
    call_message: Message | None
    result: InvokeModelResult
    sources: tuple[str, ...] = ()
    """Thread messages the request was built from (the redaction cascade follows them)."""


class ModelInvoker:
    """Calls providers for a generation: attempts and authoritative counts.

    Args:
        threads: The canonical Thread store.
        generations: Staging of outputs.
        providers: Model id to provider client.
        catalog: Model profiles (the output's tokenizer).
        tools: Tools offered to the model.
        prompts: The worker's prompts (their pydantic output models validate replies).
        assembler: Rebuilds a sealed request's messages from PostgreSQL.
        receipts: Where a retried call stores its retry count (with the plan's receipt).
    """

    def __init__(
        self,
        *,
        threads: ThreadStore,
        generations: GenerationStore,
        providers: ProviderRegistry,
        catalog: ModelCatalog,
        tools: ToolLookup,
        assembler: RequestAssembler,
        prompts: PromptLookup | None = None,
        receipts: ReceiptStore | None = None,
    ) -> None:
        self._threads = threads
        self._receipts = receipts
        self._generations = generations
        self._providers = providers
        self._catalog = catalog
        self._tools = tools
        self._assembler = assembler
        self._prompts = prompts
        self._unstaged: Unstaged[tuple[str, int], _Answer] = Unstaged()

    async def count(self, request: CountRequestInput) -> CountRequestResult:
        """Ask the provider for an exact input count (empty when it cannot count)."""
        provider, model_name = self._providers.resolve(request.model)
        if not isinstance(provider, AuthoritativeCounter):
            return CountRequestResult()
        sources: list[str] = []
        if request.history_source == "thread" and request.thread_id:
            # Counted right after the read; the attempt re-checks the revision anyway.
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

    async def staged_output(self, request: InvokeModelInput) -> StagedMessage | None:
        """The output an earlier try of this attempt staged, if any (`invoke`'s first read)."""
        return await self._generations.get_staged(
            scoped_key(request), request.attempt, StagingKind.OUTPUT
        )

    async def plan_reads(self, request: InvokeModelInput) -> PlanReads:
        """`activities._pinning.plan_reads` of this attempt (read only, failures kept)."""
        return await plan_reads(self._threads, self._assembler, request)

    async def invoke(
        self,
        request: InvokeModelInput,
        staged: StagedMessage | None,
        reads: PlanReads,
    ) -> InvokeModelResult:
        """Re-check the pinned revision, call the provider once, stage the output.

        Args:
            request: The attempt.
            staged: What `staged_output(request)` read (the caller reads it, beside its
                own lookups).
            reads: What `plan_reads(request)` read (beside those lookups too).
        """
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
        planned = await reads.planned(self._assembler, request)
        if planned is None:
            # Nothing was sent for this plan yet: sending it now would answer a stale view
            # of the Thread, so the workflow reads the new revision and plans again.
            _log.info(
                "provider.attempt.revision_moved",
                generation_id=request.generation_id,
                attempt=request.attempt,
            )
            return InvokeModelResult.moved()
        sources = planned.sources
        messages = planned.assembled.messages
        await self._record_retries(request)
        provider, model_name = self._providers.resolve(request.model)
        chat_request = ChatRequest(
            model=model_name,
            messages=messages,
            max_output_tokens=request.max_output_tokens,
            tools=[t.spec for t in self._tools.require(request.tools)],
            tool_choice=request.tool_choice if request.tools else None,
            response_format=request.output_schema,
            **sampling_fields(request.settings, request.model),
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
        if request.output_schema is not None and not output.tool_calls:
            defects = reply_defects(request, output.text, self._prompts)
            if defects:
                return await self._rejected(request, response, output_tokens, defects)
        call_message = None
        if output.tool_calls:
            # The tool-call message joins the turn; its results follow it there.
            call_message = output.model_copy(
                update={"id": turn_message_id(request.generation_id, request.turn_messages)}
            )
        result = InvokeModelResult(
            usage=Usage(
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            ),
            finish_reason=response.finish_reason,
            output_tokens=output_tokens,
            tool_call_ids=[c.tool_call_id for c in output.tool_calls],
            tool_names=[
                c.tool_name if c.tool_name in request.tools else "" for c in output.tool_calls
            ],
            # Same content as the output, already counted.
            turn_tokens=output_tokens if call_message is not None else 0,
            retried=_retried(),
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

    async def _record_retries(self, request: InvokeModelInput) -> None:
        """Store on the plan's receipt that its provider call is being retried.

        Every try of the activity sends the same sealed request, so its retries are the
        tries before this one (`activity.info().attempt - 1`). Written before the call, so
        a request whose every try fails is receipted with its retries too; the first try
        writes nothing.
        """
        retries = _retried()
        if retries and request.request_id is not None and self._receipts is not None:
            await self._receipts.record_retries(request.request_id, retries)

    async def _rejected(
        self,
        request: InvokeModelInput,
        response: ChatResponse,
        output_tokens: int,
        defects: list[str],
    ) -> InvokeModelResult:
        """A reply that failed output validation: nothing of it is staged or logged.

        Deltas streamed for it are deleted, so followers and PostgreSQL keep none of it;
        only where it failed (paths and kinds) goes back to the workflow.
        """
        if request.stream:
            await self._generations.drop_deltas(scoped_key(request), request.attempt)
        _log.info(
            "provider.attempt.output_rejected",
            generation_id=request.generation_id,
            attempt=request.attempt,
            model=request.model,
            defects=len(defects),
        )
        return InvokeModelResult(
            usage=Usage(
                input_tokens=response.usage.input_tokens,
                output_tokens=response.usage.output_tokens,
            ),
            finish_reason=response.finish_reason,
            output_tokens=output_tokens,
            defects=defects,
            retried=_retried(),
        )

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
            if isinstance(error, StorageUnavailableError):
                self._unstaged.keep(key, answer)
            raise
        self._unstaged.staged(key)
        return answer.result

    async def _refuse_if_sources_redacted(
        self, request: InvokeModelInput, sources: Sequence[str]
    ) -> None:
        """Drop this attempt's output if a message it was built from was redacted meanwhile."""
        await refuse_if_sources_redacted(self._threads, self._generations, request, sources)


async def _with_heartbeat(call: Awaitable[_T]) -> _T:
    task = asyncio.ensure_future(call)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=HEARTBEAT_INTERVAL_SECONDS)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        # A cancelled activity (worker shutdown, Ctrl-C) must not leave the provider call
        # running on its own, to fail later as an unretrieved task exception.
        if not task.done():
            task.cancel()


def _retried() -> int:
    """Tries of the current activity that failed before this one (0 outside an activity)."""
    return activity.info().attempt - 1 if activity.in_activity() else 0
