"""Prepare summary artifacts of Thread prefixes with support calls.

Strategies (the partitioning is the planner's pure `summary_chunks`):

- `regenerate`: one call over the whole prefix;
- `rolling`: start from the longest earlier summary on the path and fold in the newer range
  chunk by chunk;
- `hierarchical`: one call per chunk, then reduce the summaries in batches until one remains;
- `adaptive`: `rolling` from the longest earlier summary when there is one, otherwise
  `regenerate` (`planner.summary_choice.preparation_strategy`); `regenerate` itself goes
  hierarchical when one support call cannot hold the prefix.

Support calls are linked by id (receipts in PostgreSQL, content-free); they are never agent
steps and never enter the Thread.
"""

from __future__ import annotations

from activities._outage import keeping_side_effect
from activities._providers import ProviderRegistry
from activities._support import (
    SupportCaller,
    SupportCalls,
    plan_support_calls,
    render_summary,
)
from activities.skeleton import content_tokens
from activities.summary_join import as_history_summary
from contracts.activities import PrepareSummaryInput, PrepareSummaryResult
from planner import HistoryItem, ModelCatalog, SupportRequestRecord, summary_chunks
from planner.history import leading_system_prefix
from planner.summaries import SUMMARY_CHUNK_UNITS, SummaryChunk
from planner.summary_choice import (
    folds_earlier_summary,
    longest_prefix_summary,
    preparation_strategy,
)
from providers import TokenCounter
from storage import (
    GenerationStore,
    SummaryArtifact,
    SummaryStore,
    ThreadStore,
    summary_artifact_id,
)
from telemetry.logs import get_logger
from vocabulary.errors import ThreadError
from vocabulary.messages import Message

_log = get_logger(__name__)


class SummaryPreparer:
    """Runs the support calls of a summary strategy and stores the artifact.

    Args:
        threads: The canonical Thread store.
        summaries: Summary artifacts.
        generations: Where support receipts are recorded.
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
        self._catalog = catalog
        self._support = SupportCaller(providers, generations)

    async def prepare(self, request: PrepareSummaryInput) -> PrepareSummaryResult:
        """Return the summary through `request.through_id`, preparing it if missing.

        Raises:
            ProviderResponseError: When the summary model returns no text (an empty
                summary is never stored or sent).
            RequestCompositionError: When one causal group cannot fit a support call.
        """
        artifact_id = summary_artifact_id(
            request.thread_id, request.through_id, request.strategy, request.model
        )
        existing = await self._summaries.get(request.thread_id, artifact_id)
        if existing is not None:
            return PrepareSummaryResult(summary=as_history_summary(existing), reused=True)
        counter = TokenCounter.for_encoding(self._catalog.resolve(request.counting_model).encoding)
        profile = self._catalog.resolve(request.model)
        support_counter = TokenCounter.for_encoding(profile.encoding)
        sizing = plan_support_calls(
            profile, support_counter, max_summary_tokens=request.max_summary_tokens
        )
        view = await self._threads.read_history_view(
            request.thread_id, owner=request.owner, encoding=counter.encoding_name
        )
        ids = [entry.id for entry in view.messages]
        if request.through_id not in ids:
            raise ThreadError("not_found", "the summary boundary is not on the selected path")
        # The leading system prefix is always sent as it is: the summary covers what follows.
        leading = leading_system_prefix(view.messages)
        end = ids.index(request.through_id) + 1
        covered_entries = view.messages[leading:end]
        if not covered_entries:
            raise ThreadError("not_found", "the summary boundary lies in the system prefix")
        messages = await self._threads.load_messages(
            request.thread_id, [entry.id for entry in covered_entries]
        )
        counts = content_tokens(counter, messages)
        items = tuple(
            HistoryItem(
                id=entry.id,
                role=entry.role,
                group_id=entry.group_id,
                tokens=tokens,
                tool_call_ids=tuple(entry.tool_call_ids),
                tool_call_id=entry.tool_call_id,
            )
            for entry, tokens in zip(covered_entries, counts, strict=True)
        )
        by_id = {message.id: message for message in messages}
        calls = SupportCalls(request, sizing, support_counter, profile)
        sources = [entry.id for entry in covered_entries]
        earlier = None
        if folds_earlier_summary(request.strategy):
            path = ids[leading : end - 1]
            candidates = await self._summaries.candidates(
                request.thread_id, path, strategy=request.strategy, model=request.model
            )
            earlier = longest_prefix_summary(path, candidates)
        strategy = preparation_strategy(request.strategy, has_earlier=earlier is not None)
        if strategy == "rolling":
            text = await self._rolling(ids[leading:end], items, by_id, calls, earlier)
        else:
            # `hierarchical` bounds every call by units too; `regenerate` only by the
            # summary model's window, and goes hierarchical when one call cannot hold it.
            units = SUMMARY_CHUNK_UNITS if strategy == "hierarchical" else len(items) + 1
            chunks = summary_chunks(items, max_tokens=sizing.chunk_tokens, max_units=units)
            if len(chunks) == 1:
                partial = [await self._support.summarise(calls, messages, None)]
            else:
                partial = [await self._chunk(calls, chunk, by_id) for chunk in chunks]
            while len(partial) > 1:
                batch = sizing.reduce_batch
                partial = [
                    await self._support.reduce(calls, partial[i : i + batch])
                    for i in range(0, len(partial), batch)
                ]
            text = partial[0]
        [tokens] = content_tokens(counter, [render_summary(text)])
        artifact = SummaryArtifact(
            artifact_id=artifact_id,
            through_id=request.through_id,
            covers=len(covered_entries),
            tokens=tokens,
            strategy=request.strategy,
            model=request.model,
            text=text,
            support_request_ids=[record.id for record in calls.linked],
            support_requests=[record.model_dump(mode="json") for record in calls.linked],
        )
        # A short storage fault is waited out; a longer one fails this attempt, and the
        # next one on this worker reuses the support answers instead of paying again.
        stored = await keeping_side_effect(
            lambda: self._summaries.put(request.thread_id, artifact, sources)
        )
        self._support.stored(calls)
        _log.info(
            "history.summary.prepared",
            thread_id=request.thread_id,
            artifact_id=artifact_id,
            strategy=strategy,
            covers=stored.covers,
            tokens=stored.tokens,
            support_calls=len(calls.records),
        )
        return PrepareSummaryResult(
            summary=as_history_summary(stored), support_calls=len(calls.records)
        )

    async def _rolling(
        self,
        path_ids: list[str],
        items: tuple[HistoryItem, ...],
        by_id: dict[str | None, Message],
        calls: SupportCalls,
        earlier: SummaryArtifact | None,
    ) -> str:
        start = path_ids.index(earlier.through_id) + 1 if earlier is not None else 0
        text = earlier.text if earlier is not None else None
        unbounded = len(items) + 1
        for chunk in summary_chunks(
            items[start:], max_tokens=calls.sizing.chunk_tokens, max_units=unbounded
        ):
            text = await self._support.summarise(calls, [by_id[i] for i in chunk.message_ids], text)
        if text is None:  # pragma: no cover - a non-empty prefix always has a chunk
            raise ThreadError("not_found", "nothing to summarise")
        return text

    async def _chunk(
        self, calls: SupportCalls, chunk: SummaryChunk, by_id: dict[str | None, Message]
    ) -> str:
        """Summarise one chunk, or reuse its summary from an earlier refresh.

        Chunk boundaries are a pure function of the transcript from its start, so every
        chunk but the newest is the same at the next refresh: storing chunk summaries (as
        derived artifacts erased with their sources) makes a refresh pay only for what is
        new, instead of the whole prefix again.
        """
        request = calls.request
        first, last = chunk.message_ids[0], chunk.message_ids[-1]
        key = summary_artifact_id(
            request.thread_id, f"{first}..{last}", f"{request.strategy}:chunk", request.model
        )
        found = await self._summaries.get(request.thread_id, key)
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
            lambda: self._summaries.put(request.thread_id, chunk_artifact, list(chunk.message_ids))
        )
        return text
