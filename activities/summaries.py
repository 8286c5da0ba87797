"""Prepare summary artifacts of Thread prefixes with support calls.

Strategies (the partitioning is the planner's pure `summary_chunks`):

- `regenerate`: one call over the whole prefix;
- `rolling`: start from the longest earlier summary on the path and fold in the newer range
  chunk by chunk;
- `hierarchical`: one call per chunk, then reduce the summaries in batches until one remains;
- `adaptive`: `regenerate` when the prefix is one chunk, `hierarchical` otherwise.

Support calls are linked by id (receipts in PostgreSQL, content-free); they are never agent
steps and never enter the Thread.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from activities._providers import ProviderRegistry
from activities.contracts import PrepareSummaryInput, PrepareSummaryResult
from activities.skeleton import content_tokens
from crux.errors import ThreadError
from crux.logs import get_logger
from crux.messages import Message
from planner import HistoryItem, HistorySummary, ModelCatalog, summary_chunks
from planner.summaries import SUMMARY_REDUCE_BATCH
from providers import ChatRequest, TokenCounter
from storage import (
    GenerationStore,
    SummaryArtifact,
    SummaryStore,
    ThreadStore,
    summary_artifact_id,
)

_log = get_logger(__name__)

SUMMARY_HEADER = "Summary of the earlier conversation:"
"""Opens the assistant-role message that stands in for the summarised turns."""

SUMMARY_OUTPUT_TOKENS = 1_024
"""Output cap of one support call."""

_INSTRUCTIONS = (
    "You write faithful, compact summaries of conversations for later turns of the same "
    "conversation. Keep decisions, facts, names, numbers, open questions and commitments. "
    "Do not invent anything. Write plain prose."
)


def render_summary(text: str) -> Message:
    """The assistant-role message a summary is sent as (derived evidence, not a rule)."""
    return Message(role="assistant", content=f"{SUMMARY_HEADER}\n{text}")


def _transcript(messages: Sequence[Message]) -> str:
    lines: list[str] = []
    for message in messages:
        text = message.text
        if message.tool_calls:
            calls = ", ".join(call.tool_name for call in message.tool_calls)
            text = f"{text} [called tools: {calls}]".strip()
        lines.append(f"{message.role}: {text}")
    return "\n".join(lines)


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
        self._generations = generations
        self._providers = providers
        self._catalog = catalog

    async def prepare(self, request: PrepareSummaryInput) -> PrepareSummaryResult:
        """Return the summary through `request.through_id`, preparing it if missing."""
        artifact_id = summary_artifact_id(
            request.thread_id, request.through_id, request.strategy, request.model
        )
        existing = await self._summaries.get(request.thread_id, artifact_id)
        if existing is not None:
            return PrepareSummaryResult(summary=_as_history_summary(existing), reused=True)
        counter = TokenCounter.for_encoding(self._catalog.resolve(request.counting_model).encoding)
        view = await self._threads.read_history_view(
            request.thread_id, owner=request.owner, encoding=counter.encoding_name
        )
        ids = [entry.id for entry in view.messages]
        if request.through_id not in ids:
            raise ThreadError("not_found", "the summary boundary is not on the selected path")
        leading = 0
        while leading < len(view.messages) and view.messages[leading].role == "system":
            leading += 1
        end = ids.index(request.through_id) + 1
        covered_entries = view.messages[leading:end]
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
        calls: list[str] = []
        sources = [entry.id for entry in covered_entries]
        strategy = request.strategy
        chunks = summary_chunks(items)
        if strategy == "adaptive":
            strategy = "regenerate" if len(chunks) <= 1 else "hierarchical"
        if strategy == "rolling":
            text = await self._rolling(request, ids[leading:end], by_id, items, calls)
        elif strategy == "hierarchical":
            partial = [
                await self._call(request, [by_id[i] for i in chunk.message_ids], None, calls)
                for chunk in chunks
            ]
            while len(partial) > 1:
                partial = [
                    await self._reduce(request, partial[i : i + SUMMARY_REDUCE_BATCH], calls)
                    for i in range(0, len(partial), SUMMARY_REDUCE_BATCH)
                ]
            text = partial[0] if partial else ""
        else:
            text = await self._call(request, messages, None, calls)
        [tokens] = content_tokens(counter, [render_summary(text)])
        artifact = SummaryArtifact(
            artifact_id=artifact_id,
            through_id=request.through_id,
            covers=len(covered_entries),
            tokens=tokens,
            strategy=request.strategy,
            model=request.model,
            text=text,
            support_request_ids=calls,
        )
        stored = await self._summaries.put(request.thread_id, artifact, sources)
        _log.info(
            "history.summary.prepared",
            thread_id=request.thread_id,
            artifact_id=artifact_id,
            strategy=strategy,
            covers=stored.covers,
            tokens=stored.tokens,
            support_calls=len(calls),
        )
        return PrepareSummaryResult(summary=_as_history_summary(stored), support_calls=len(calls))

    async def _rolling(
        self,
        request: PrepareSummaryInput,
        path_ids: list[str],
        by_id: dict[str | None, Message],
        items: tuple[HistoryItem, ...],
        calls: list[str],
    ) -> str:
        earlier = await self._summaries.best(
            request.thread_id, path_ids[:-1], strategy=request.strategy, model=request.model
        )
        start = path_ids.index(earlier.through_id) + 1 if earlier is not None else 0
        text = earlier.text if earlier is not None else None
        for chunk in summary_chunks(items[start:]):
            text = await self._call(request, [by_id[i] for i in chunk.message_ids], text, calls)
        return text or ""

    async def _call(
        self,
        request: PrepareSummaryInput,
        messages: Sequence[Message],
        previous: str | None,
        calls: list[str],
    ) -> str:
        prompt = _transcript(messages)
        if previous is not None:
            prompt = f"Summary so far:\n{previous}\n\nNewer messages:\n{prompt}"
        return await self._support(request, f"Summarise this conversation.\n\n{prompt}", calls)

    async def _reduce(
        self, request: PrepareSummaryInput, parts: Sequence[str], calls: list[str]
    ) -> str:
        if len(parts) == 1:
            return parts[0]
        joined = "\n\n".join(f"Part {n}:\n{text}" for n, text in enumerate(parts, start=1))
        return await self._support(
            request, f"Merge these consecutive summaries into one.\n\n{joined}", calls
        )

    async def _support(self, request: PrepareSummaryInput, prompt: str, calls: list[str]) -> str:
        provider, model_name = self._providers.resolve(request.model)
        response = await provider.complete(
            ChatRequest(
                model=model_name,
                messages=[
                    Message(role="system", content=_INSTRUCTIONS),
                    Message(role="user", content=prompt),
                ],
                max_output_tokens=SUMMARY_OUTPUT_TOKENS,
            )
        )
        support_id = f"support_{uuid.uuid4().hex}"
        calls.append(support_id)
        await self._generations.record_support_request(
            support_id,
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            receipt={
                "id": support_id,
                "kind": "history-summary",
                "model": request.model,
                "input_tokens": response.usage.input_tokens,
                "output_tokens": response.usage.output_tokens,
                "finish_reason": response.finish_reason,
            },
        )
        return response.message.text


def _as_history_summary(artifact: SummaryArtifact) -> HistorySummary:
    return HistorySummary(
        artifact_id=artifact.artifact_id,
        tokens=artifact.tokens,
        covers=artifact.covers,
        support_request_ids=tuple(artifact.support_request_ids),
    )
