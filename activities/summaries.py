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

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.exceptions import ApplicationError, FailureError

from activities._providers import ProviderRegistry
from activities.skeleton import content_tokens
from contracts.activities import AwaitSummaryInput, PrepareSummaryInput, PrepareSummaryResult
from planner import (
    HistoryItem,
    HistorySummary,
    ModelCatalog,
    ModelProfile,
    SupportRequestRecord,
    derive_budget,
    summary_chunks,
)
from planner.history import leading_system_prefix
from planner.measure import message_format
from planner.summaries import SUMMARY_CHUNK_UNITS, SUMMARY_REDUCE_BATCH, SummaryChunk
from providers import ChatRequest, TokenCounter
from storage import (
    GenerationStore,
    SummaryArtifact,
    SummaryStore,
    ThreadStore,
    summary_artifact_id,
)
from telemetry.logs import get_logger
from vocabulary.errors import ErrorType, ProviderResponseError, RequestCompositionError, ThreadError
from vocabulary.messages import Message

_log = get_logger(__name__)

SUMMARY_HEADER = "Summary of the earlier conversation:"
"""Opens the assistant-role message that stands in for the summarised turns."""

SUMMARY_OUTPUT_TOKENS = 1_024
"""Output cap of one support call (lowered to what the request needing it can hold)."""

MIN_SUMMARY_OUTPUT_TOKENS = 16
"""A support call is never asked for fewer output tokens than this."""

SUMMARY_WAIT_HEARTBEAT_SECONDS = 5.0
"""How often a joining wait heartbeats."""

_ROLLING_FRAME = "Summary so far:\n{previous}\n\nNewer messages:\n{newer}"

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


@dataclass(frozen=True)
class SupportPlan:
    """How the support calls of one preparation are sized (content-free).

    Attributes:
        input_max: Strict input ceiling of one support call (the summary model's window
            less its output cap, framing and safety margin, as for any provider call).
        output_cap: Output tokens each support call may produce.
        chunk_tokens: Content tokens of transcript one call may take.
        reduce_batch: Summaries one hierarchical reduction may merge.
    """

    input_max: int
    output_cap: int
    chunk_tokens: int
    reduce_batch: int


def plan_support_calls(
    profile: ModelProfile, counter: TokenCounter, *, max_summary_tokens: int | None
) -> SupportPlan:
    """Size the support calls of a summary for the summary model's window and output cap.

    Args:
        profile: The summary model's profile.
        counter: Its tokenizer.
        max_summary_tokens: The most the rendered summary may take in the request that
            needs it, if known.

    Raises:
        RequestCompositionError: `REQUEST_TOO_LARGE` when not even the instructions fit.
    """
    output_cap = min(SUMMARY_OUTPUT_TOKENS, profile.default_output_reserve)
    if max_summary_tokens is not None:
        header = counter.count_text(SUMMARY_HEADER) + 1
        output_cap = min(output_cap, max(MIN_SUMMARY_OUTPUT_TOKENS, max_summary_tokens - header))
    budget = derive_budget(profile, None, output_reserve=output_cap)
    fmt = message_format(profile.provider)
    overhead = (
        counter.count_text(_INSTRUCTIONS)
        + counter.count_text(_ROLLING_FRAME)
        + fmt.reply_priming
        + 2 * fmt.per_message
    )
    # The transcript is measured with the response model's counts; keep a tenth in hand
    # for the difference of encodings and the per-line role labels.
    room = budget.max - overhead - output_cap
    if room <= 0:
        raise RequestCompositionError(
            "REQUEST_TOO_LARGE",
            "the summary model's window cannot hold a summary call",
            diagnostics={"items": []},
        )
    chunk = max(1, room * 9 // 10)
    batch = max(2, min(SUMMARY_REDUCE_BATCH, (budget.max - overhead) // (output_cap + 8)))
    return SupportPlan(
        input_max=budget.max, output_cap=output_cap, chunk_tokens=chunk, reduce_batch=batch
    )


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
        calls = _Calls(request, sizing, support_counter, profile)
        sources = [entry.id for entry in covered_entries]
        strategy = request.strategy
        earlier = None
        if strategy in ("rolling", "adaptive"):
            earlier = await self._summaries.best(
                request.thread_id,
                ids[leading : end - 1],
                strategy=request.strategy,
                model=request.model,
            )
        if strategy == "adaptive":
            # Fold the new range into the longest earlier summary when there is one (one
            # call per refresh, however long the conversation); otherwise summarise anew.
            strategy = "rolling" if earlier is not None else "regenerate"
        if strategy == "rolling":
            text = await self._rolling(ids[leading:end], items, by_id, calls, earlier)
        else:
            # `hierarchical` bounds every call by units too; `regenerate` only by the
            # summary model's window, and goes hierarchical when one call cannot hold it.
            units = SUMMARY_CHUNK_UNITS if strategy == "hierarchical" else len(items) + 1
            chunks = summary_chunks(items, max_tokens=sizing.chunk_tokens, max_units=units)
            if len(chunks) == 1:
                partial = [await self._call(calls, messages, None)]
            else:
                partial = [await self._chunk(calls, chunk, by_id) for chunk in chunks]
            while len(partial) > 1:
                batch = sizing.reduce_batch
                partial = [
                    await self._reduce(calls, partial[i : i + batch])
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
        stored = await self._summaries.put(request.thread_id, artifact, sources)
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
        calls: _Calls,
        earlier: SummaryArtifact | None,
    ) -> str:
        start = path_ids.index(earlier.through_id) + 1 if earlier is not None else 0
        text = earlier.text if earlier is not None else None
        unbounded = len(items) + 1
        for chunk in summary_chunks(
            items[start:], max_tokens=calls.sizing.chunk_tokens, max_units=unbounded
        ):
            text = await self._call(calls, [by_id[i] for i in chunk.message_ids], text)
        if text is None:  # pragma: no cover - a non-empty prefix always has a chunk
            raise ThreadError("not_found", "nothing to summarise")
        return text

    async def _chunk(
        self, calls: _Calls, chunk: SummaryChunk, by_id: dict[str | None, Message]
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
        text = await self._call(calls, [by_id[i] for i in chunk.message_ids], None)
        made = calls.records[before:]
        await self._summaries.put(
            request.thread_id,
            SummaryArtifact(
                artifact_id=key,
                through_id=last,
                covers=len(chunk.message_ids),
                tokens=0,
                strategy=f"{request.strategy}:chunk",
                model=request.model,
                text=text,
                support_request_ids=[record.id for record in made],
                support_requests=[record.model_dump(mode="json") for record in made],
            ),
            list(chunk.message_ids),
        )
        return text

    async def _call(self, calls: _Calls, messages: Sequence[Message], previous: str | None) -> str:
        prompt = _transcript(messages)
        if previous is not None:
            prompt = _ROLLING_FRAME.format(previous=previous, newer=prompt)
        return await self._support(calls, f"Summarise this conversation.\n\n{prompt}")

    async def _reduce(self, calls: _Calls, parts: Sequence[str]) -> str:
        if len(parts) == 1:
            return parts[0]
        joined = "\n\n".join(f"Part {n}:\n{text}" for n, text in enumerate(parts, start=1))
        return await self._support(
            calls, f"Merge these consecutive summaries into one.\n\n{joined}"
        )

    async def _support(self, calls: _Calls, prompt: str) -> str:
        request, sizing = calls.request, calls.sizing
        messages = [
            Message(role="system", content=_INSTRUCTIONS),
            Message(role="user", content=prompt),
        ]
        fmt = message_format(calls.profile.provider)
        measured = (
            sum(calls.counter.count_messages(messages))
            + fmt.reply_priming
            + fmt.per_message * len(messages)
        )
        if measured > sizing.input_max:
            # Planned like any provider call: never send what the summary model cannot take.
            raise RequestCompositionError(
                "REQUEST_TOO_LARGE",
                "a summary support call exceeds the summary model's input ceiling",
                diagnostics={
                    "items": [],
                    "required_tokens": measured,
                    "max_input_tokens": sizing.input_max,
                },
            )
        provider, model_name = self._providers.resolve(request.model)
        response = await provider.complete(
            ChatRequest(model=model_name, messages=messages, max_output_tokens=sizing.output_cap)
        )
        text = response.message.text.strip()
        if not text:
            raise ProviderResponseError(
                request.model.split(":", 1)[0], "the summary model returned an empty summary"
            )
        support_id = f"support_{uuid.uuid4().hex}"
        record = SupportRequestRecord(
            id=support_id,
            model=request.model,
            input_tokens=measured,
            max_input_tokens=sizing.input_max,
            measurement=calls.counter.confidence,
        )
        calls.records.append(record)
        await self._generations.record_support_request(
            support_id,
            generation_id=request.generation_id,
            thread_id=request.thread_id,
            receipt={
                **record.model_dump(mode="json"),
                "kind": "history-summary",
                "max_output_tokens": sizing.output_cap,
                "provider_input_tokens": response.usage.input_tokens,
                "output_tokens": response.usage.output_tokens,
                "finish_reason": response.finish_reason,
            },
        )
        return text


@dataclass
class _Calls:
    """The support calls of one preparation, as they are made (internal)."""

    request: PrepareSummaryInput
    sizing: SupportPlan
    counter: TokenCounter
    profile: ModelProfile
    records: list[SupportRequestRecord] = field(default_factory=lambda: [])
    reused: list[SupportRequestRecord] = field(default_factory=lambda: [])

    @property
    def linked(self) -> list[SupportRequestRecord]:
        """Every support call behind the summary: reused chunk summaries' and new ones."""
        return [*self.reused, *self.records]


async def await_running_summary(request: AwaitSummaryInput) -> PrepareSummaryResult:
    """Wait for the running `SummaryWorkflow` and return what it prepared.

    An identical preparation (same prefix, strategy and model) already in flight is joined,
    never repeated: its support calls are the only ones paid. The activity heartbeats while
    it waits, so a lost worker is noticed and the wait resumed elsewhere.

    Raises:
        ApplicationError: Typed like the preparation's own failure (for example a
            `ProviderError`), non-retryable: waiting again cannot change the outcome.
    """
    handle = activity.client().get_workflow_handle(
        request.workflow_id, result_type=PrepareSummaryResult
    )
    waiting = asyncio.ensure_future(handle.result())
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=SUMMARY_WAIT_HEARTBEAT_SECONDS)
            if done:
                break
            activity.heartbeat()
        result = waiting.result()
    except WorkflowFailureError as error:
        cause: BaseException | None = error.cause
        while isinstance(cause, FailureError) and not (
            isinstance(cause, ApplicationError) and cause.type is not None
        ):
            cause = cause.cause
        kind = cause.type if isinstance(cause, ApplicationError) else ErrorType.PROVIDER
        details = list(cause.details) if isinstance(cause, ApplicationError) else []
        raise ApplicationError(
            "the joined history summary preparation failed",
            *details,
            type=kind,
            non_retryable=True,
        ) from None
    finally:
        waiting.cancel()
    return result.model_copy(update={"reused": True, "support_calls": 0})


def as_history_summary(artifact: SummaryArtifact) -> HistorySummary:
    """The planner's content-free view of a stored summary."""
    return HistorySummary(
        artifact_id=artifact.artifact_id,
        tokens=artifact.tokens,
        covers=artifact.covers,
        support_request_ids=tuple(artifact.support_request_ids),
        support_requests=tuple(
            SupportRequestRecord.model_validate(record) for record in artifact.support_requests
        ),
    )
