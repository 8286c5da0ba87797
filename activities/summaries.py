"""Prepare summary artifacts of history prefixes with support calls.

A prefix is a Thread's selected path through one message, or a caller's transcript (call-site
or prompt-level messages) through one message, read from the copy staged for the
preparation (`TranscriptSources`). Either way it is cut into chunks of whole units under
the preparation's limits, and the strategy that runs over them is the planner's
(`planner.summary_choice`, step 7):

- `regenerate`: one call over the whole prefix;
- `rolling`: start from the longest earlier summary of the source and fold in the newer
  range chunk by chunk;
- `hierarchical`: one call per chunk (each chunk summary stored, so the next refresh reuses
  it), then reduce the summaries in batches until one remains;
- `adaptive`: `regenerate` for a prefix of one chunk, `rolling` from an earlier summary,
  `hierarchical` otherwise.

Support calls are linked by id (receipts in PostgreSQL, content-free); they are never agent
steps and never enter the Thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from activities._outage import keeping_side_effect
from activities._providers import ProviderRegistry
from activities._support import (
    SupportCaller,
    SupportCalls,
    plan_support_calls,
    render_summary,
)
from activities.skeleton import caller_group_ids, content_tokens
from activities.summary_join import as_history_summary
from contracts.activities import (
    PrepareSummaryInput,
    PrepareSummaryResult,
    StageSummarySourceInput,
    StageSummarySourceResult,
)
from planner import HistoryItem, ModelCatalog, SupportRequestRecord, summary_chunks
from planner.history import leading_system_prefix
from planner.summaries import SummaryChunk
from planner.summary_choice import (
    ChunkLimits,
    chunk_limits,
    folds_earlier_summary,
    longest_prefix_summary,
    preparation_strategy,
)
from providers import TokenCounter
from storage import (
    GenerationStore,
    SummaryArtifact,
    SummaryScope,
    SummaryStore,
    ThreadStore,
    transcript_ids,
    transcript_scope,
)
from telemetry.logs import get_logger
from vocabulary.errors import ThreadError
from vocabulary.ids import generation_key
from vocabulary.messages import Message
from vocabulary.staging import MESSAGE_KINDS, StagingKind, summary_source_key

_log = get_logger(__name__)


@dataclass(frozen=True)
class _Prefix:
    """The prefix a preparation summarises.

    Attributes:
        path_ids: The source's message ids from its start through the last covered one.
        leading: Length of the leading system prefix (never summarised).
        items: The covered messages as the planner sees them (after the leading prefix).
        messages: The covered messages, in order.
    """

    path_ids: list[str]
    leading: int
    items: tuple[HistoryItem, ...]
    messages: list[Message]

    @property
    def by_id(self) -> dict[str, Message]:
        """The covered messages by id."""
        return {item.id: message for item, message in zip(self.items, self.messages, strict=True)}


def _items(
    ids: Sequence[str], groups: Sequence[str], messages: Sequence[Message], tokens: Sequence[int]
) -> tuple[HistoryItem, ...]:
    return tuple(
        HistoryItem(
            id=message_id,
            role=message.role,
            group_id=group,
            tokens=count,
            tool_call_ids=tuple(call.tool_call_id for call in message.tool_calls),
            tool_call_id=message.tool_call_id,
        )
        for message_id, group, message, count in zip(ids, groups, messages, tokens, strict=True)
    )


class SummaryPreparer:
    """Runs the support calls of a summary strategy and stores the artifact.

    Args:
        threads: The canonical Thread store.
        summaries: Summary artifacts.
        generations: Where support receipts are recorded (and transcript copies staged).
        providers: Model id to provider client.
        catalog: Model profiles (for the response model's tokenizer).
    """

    def __init__(
        self,
        threads: ThreadStore,
        summaries: SummaryStore,
        generations: GenerationStore,
        providers: ProviderRegistry,
        catalog: ModelCatalog,
    ) -> None:
        self._threads = threads
        self._summaries = summaries
        self._generations = generations
        self._catalog = catalog
        self._support = SupportCaller(providers, generations)

    async def prepare(self, request: PrepareSummaryInput) -> PrepareSummaryResult:
        """Return the summary through `request.through_id`, preparing it if missing.

        Raises:
            ProviderResponseError: When the summary model returns no text (an empty
                summary is never stored or sent).
            RequestCompositionError: When one causal group cannot fit a support call.
            ThreadError: `not_found` when the prefix is no longer there to summarise.
        """
        scope = SummaryScope.of(request.source, request.thread_id)
        artifact_id = scope.artifact_id(request.through_id, request.strategy, request.model)
        existing = await self._summaries.get(scope, artifact_id)
        if existing is not None:
            await self._forget_source(request, artifact_id)
            return PrepareSummaryResult(summary=as_history_summary(existing), reused=True)
        counter = TokenCounter.for_encoding(self._catalog.resolve(request.counting_model).encoding)
        profile = self._catalog.resolve(request.model)
        support_counter = TokenCounter.for_encoding(profile.encoding)
        sizing = plan_support_calls(
            profile, support_counter, max_summary_tokens=request.max_summary_tokens
        )
        if request.source == "transcript":
            prefix = await self._transcript_prefix(request, counter, artifact_id)
        else:
            prefix = await self._thread_prefix(request, counter)
        calls = SupportCalls(request, sizing, support_counter, profile)
        limits = chunk_limits(
            request.strategy,
            call_tokens=sizing.chunk_tokens,
            chunk_tokens=request.chunk_tokens,
            chunk_units=request.chunk_units,
        )
        chunks = summary_chunks(prefix.items, max_tokens=limits.tokens, max_units=limits.units)
        earlier = None
        if folds_earlier_summary(request.strategy, chunks=len(chunks)):
            path = prefix.path_ids[prefix.leading : -1]
            candidates = await self._summaries.candidates(
                scope, path, strategy=request.strategy, model=request.model
            )
            earlier = longest_prefix_summary(path, candidates)
        strategy = preparation_strategy(
            request.strategy, chunks=len(chunks), has_earlier=earlier is not None
        )
        if strategy == "rolling":
            text = await self._rolling(prefix, calls, earlier, limits)
        elif strategy == "regenerate" or len(chunks) == 1:
            text = await self._support.summarise(calls, prefix.messages, None)
        else:
            text = await self._hierarchical(scope, prefix, chunks, calls)
        [tokens] = content_tokens(counter, [render_summary(text)])
        artifact = SummaryArtifact(
            artifact_id=artifact_id,
            through_id=request.through_id,
            covers=len(prefix.items),
            tokens=tokens,
            strategy=request.strategy,
            model=request.model,
            text=text,
            support_request_ids=[record.id for record in calls.linked],
            support_requests=[record.model_dump(mode="json") for record in calls.linked],
        )
        sources = [item.id for item in prefix.items]
        # A short storage fault is waited out; a longer one fails this attempt, and the
        # next one on this worker reuses the support answers instead of paying again.
        stored = await keeping_side_effect(lambda: self._summaries.put(scope, artifact, sources))
        self._support.stored(calls)
        await self._forget_source(request, artifact_id)
        _log.info(
            "history.summary.prepared",
            thread_id=request.thread_id,
            source=request.source,
            artifact_id=artifact_id,
            strategy=strategy,
            chunks=len(chunks),
            covers=stored.covers,
            tokens=stored.tokens,
            support_calls=len(calls.records),
        )
        return PrepareSummaryResult(
            summary=as_history_summary(stored), support_calls=len(calls.records)
        )

    async def _thread_prefix(self, request: PrepareSummaryInput, counter: TokenCounter) -> _Prefix:
        """The owner's selected path through `request.through_id`."""
        assert request.thread_id is not None  # a Thread summary names its Thread
        view = await self._threads.read_history_view(
            request.thread_id, owner=request.owner, encoding=counter.encoding_name
        )
        ids = [entry.id for entry in view.messages]
        if request.through_id not in ids:
            raise ThreadError("not_found", "the summary boundary is not on the selected path")
        # The leading system prefix is always sent as it is: the summary covers what follows.
        leading = leading_system_prefix(view.messages)
        end = ids.index(request.through_id) + 1
        covered = view.messages[leading:end]
        if not covered:
            raise ThreadError("not_found", "the summary boundary lies in the system prefix")
        messages = await self._threads.load_messages(
            request.thread_id, [entry.id for entry in covered]
        )
        items = _items(
            [entry.id for entry in covered],
            [entry.group_id for entry in covered],
            messages,
            content_tokens(counter, messages),
        )
        return _Prefix(ids[:end], leading, items, messages)

    async def _transcript_prefix(
        self, request: PrepareSummaryInput, counter: TokenCounter, artifact_id: str
    ) -> _Prefix:
        """The transcript prefix staged for this preparation, named by content."""
        copy = await self._generations.get_staged_messages(
            summary_source_key(artifact_id), StagingKind.SUMMARY_SOURCE
        )
        if copy is None:
            raise ThreadError("not_found", "the transcript to summarise is no longer staged")
        ids = transcript_ids(transcript_scope(request.thread_id, request.owner), copy)
        if not ids or ids[-1] != request.through_id:
            raise ThreadError("not_found", "the staged transcript is not the one to summarise")
        groups = caller_group_ids(copy)
        roled = [_Roled(m.role, g) for m, g in zip(copy, groups, strict=True)]
        leading = leading_system_prefix(roled)
        messages = copy[leading:]
        if not messages:
            raise ThreadError("not_found", "the summary boundary lies in the system prefix")
        items = _items(ids[leading:], groups[leading:], messages, content_tokens(counter, messages))
        return _Prefix(ids, leading, items, messages)

    async def _forget_source(self, request: PrepareSummaryInput, artifact_id: str) -> None:
        """Drop the transcript copy once its summary is stored (it served its purpose)."""
        if request.source == "transcript":
            await self._generations.drop_messages(
                summary_source_key(artifact_id), StagingKind.SUMMARY_SOURCE
            )

    async def _rolling(
        self,
        prefix: _Prefix,
        calls: SupportCalls,
        earlier: SummaryArtifact | None,
        limits: ChunkLimits,
    ) -> str:
        covered = prefix.path_ids[prefix.leading :]
        start = covered.index(earlier.through_id) + 1 if earlier is not None else 0
        text = earlier.text if earlier is not None else None
        by_id = prefix.by_id
        for chunk in summary_chunks(
            prefix.items[start:], max_tokens=limits.tokens, max_units=limits.units
        ):
            text = await self._support.summarise(calls, [by_id[i] for i in chunk.message_ids], text)
        if text is None:  # pragma: no cover - a non-empty prefix always has a chunk
            raise ThreadError("not_found", "nothing to summarise")
        return text

    async def _hierarchical(
        self,
        scope: SummaryScope,
        prefix: _Prefix,
        chunks: Sequence[SummaryChunk],
        calls: SupportCalls,
    ) -> str:
        by_id = prefix.by_id
        partial = [await self._chunk(scope, calls, chunk, by_id) for chunk in chunks]
        while len(partial) > 1:
            batch = calls.sizing.reduce_batch
            partial = [
                await self._support.reduce(calls, partial[i : i + batch])
                for i in range(0, len(partial), batch)
            ]
        return partial[0]

    async def _chunk(
        self,
        scope: SummaryScope,
        calls: SupportCalls,
        chunk: SummaryChunk,
        by_id: dict[str, Message],
    ) -> str:
        """Summarise one chunk, or reuse its summary from an earlier refresh.

        Chunk boundaries are a pure function of the transcript from its start, so every
        chunk but the newest is the same at the next refresh: storing chunk summaries (as
        derived artifacts erased with their sources) makes a refresh pay only for what is
        new, instead of the whole prefix again.
        """
        request = calls.request
        first, last = chunk.message_ids[0], chunk.message_ids[-1]
        key = scope.artifact_id(f"{first}..{last}", f"{request.strategy}:chunk", request.model)
        found = await self._summaries.get(scope, key)
        if found is not None:
            calls.reused.extend(
                SupportRequestRecord.model_validate(record) for record in found.support_requests
            )
            return found.text
        before = len(calls.records)
        text = await self._support.summarise(calls, [by_id[i] for i in chunk.message_ids], None)
        made = calls.records[before:]
        chunk_artifact = SummaryArtifact(
            artifact_id=key,
            through_id=last,
            covers=len(chunk.message_ids),
            tokens=0,
            strategy=f"{request.strategy}:chunk",
            model=request.model,
            text=text,
            support_request_ids=[record.id for record in made],
            support_requests=[record.model_dump(mode="json") for record in made],
        )
        await keeping_side_effect(
            lambda: self._summaries.put(scope, chunk_artifact, list(chunk.message_ids))
        )
        return text


@dataclass(frozen=True)
class _Roled:
    """A transcript message as `leading_system_prefix` reads it (internal)."""

    role: str
    group_id: str


class TranscriptSources:
    """Names transcript prefixes by content and stages them for their summaries.

    Args:
        generations: Where the generation's transcript is staged (and the copy goes).
        summaries: Summary artifacts (a prefix already summarised needs no copy).
    """

    def __init__(self, generations: GenerationStore, summaries: SummaryStore) -> None:
        self._generations = generations
        self._summaries = summaries

    async def stage(self, request: StageSummarySourceInput) -> StageSummarySourceResult:
        """Name the prefix through `request.through_position` and stage it, once.

        The copy is keyed by the artifact it is for: identical preparations (which join one
        run) share it, the preparation drops it once the summary is stored, and the
        retention sweep removes one whose preparation never ran.

        Raises:
            ThreadError: `not_found` when the generation's transcript is not staged.
        """
        key = generation_key(request.generation_id, request.thread_id)
        transcript = None
        for kind in MESSAGE_KINDS:
            transcript = await self._generations.get_staged_messages(key, kind)
            if transcript is not None:
                break
        if transcript is None:
            raise ThreadError("not_found", "staged call-site messages are missing")
        if not 0 <= request.through_position < len(transcript):
            return StageSummarySourceResult()
        prefix = transcript[: request.through_position + 1]
        through_id = transcript_ids(transcript_scope(request.thread_id, request.owner), prefix)[-1]
        scope = SummaryScope.transcript(request.thread_id)
        artifact_id = scope.artifact_id(through_id, request.strategy, request.model)
        if await self._summaries.get(scope, artifact_id) is None:
            await self._generations.stage_messages(
                summary_source_key(artifact_id),
                StagingKind.SUMMARY_SOURCE,
                prefix,
                thread_id=request.thread_id,
            )
        return StageSummarySourceResult(through_id=through_id)
