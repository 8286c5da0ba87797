"""The read stage: one function sizes a request, for the read activity and for `preview()`.

`read_skeleton` resolves the history source, reads one exact Thread revision (or names a
caller's transcript by content), fetches the stored summaries of a managed history and keeps
the one `planner.summary_choice` chooses (with its support request ids), and measures the
user turn, the system text, the context sources and the tool schemas. The read activity
calls it with the staged texts (storing new token counts); `Runtime.preview` calls it with
the texts rendered in memory (storing nothing). Both get the same skeleton, so a preview is
the first plan of the run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from activities._assembly import RequestAssembler
from activities._inputs import InputStager, OverrideReason, replayed, scoped_key
from activities._reply import with_reply
from activities.skeleton import ThreadSkeleton, caller_skeleton, content_tokens, thread_skeleton
from activities.summary_join import as_history_summary
from contracts.activities import ReadRequestInput, ReadRequestResult
from contracts.generation import GenerationOutcome, HistorySpec
from contracts.planning import history_policy
from contracts.settings import ToolPolicySpec
from planner import (
    HistoryAggregate,
    HistoryColumns,
    HistorySummary,
    InputBudget,
    ModelCatalog,
    ModelProfile,
    derive_budget,
)
from planner.history_needs import cut_to_needs
from planner.summary_choice import longest_prefix_summary, summary_model
from providers import TokenCounter, ToolSpec
from providers.models import check_model
from storage import (
    GenerationStore,
    SummaryScope,
    SummaryStore,
    ThreadStore,
    transcript_ids,
    transcript_scope,
)
from storage.threads import MAIN_OWNER
from telemetry.logs import get_logger
from vocabulary.errors import ThreadError
from vocabulary.gathered import settled
from vocabulary.messages import Message

_log = get_logger(__name__)

ToolSpecs = Callable[[Sequence[str]], Sequence[ToolSpec]]
"""Resolves offered tool names to their provider-facing schemas."""


@dataclass(frozen=True)
class ReadSources:
    """The texts one request is measured from (rendered in memory, or read from staging).

    Attributes:
        user: The rendered user turn.
        system: The system instructions, if any.
        contexts: Context sources as `(source id, message)`, in declaration order.
        tools: The schemas of the tools offered to the model.
        transcript: The message array that shadows the Thread (call-site messages first,
            then prompt-level ones), or `None` when the Thread (or nothing) is the source.
        output_schema: The structured-output schema, if any.
    """

    user: Message
    system: Message | None = None
    contexts: Sequence[tuple[str, Message]] = ()
    tools: Sequence[ToolSpec] = ()
    transcript: Sequence[Message] | None = None
    output_schema: Mapping[str, Any] | None = None
    """The structured-output schema the reply must match, if any (measured with the rest)."""


async def read_skeleton(
    sources: ReadSources,
    *,
    thread_id: str | None,
    owner: str,
    history: HistorySpec,
    model: str,
    counter: TokenCounter,
    ceiling: int,
    threads: ThreadStore,
    summaries: SummaryStore,
    store_counts: bool,
    cut: bool = True,
    read_ahead: Awaitable[ThreadSkeleton] | None = None,
) -> ReadRequestResult:
    """Size a request: history source by precedence, one Thread revision, every text.

    History source precedence: a message array (`sources.transcript`) > the Thread's
    selected path > none. Arrays are never merged with the Thread. The skeleton lists only
    the groups the history policy can use (`planner.history_needs`), plus one aggregate for
    the rest.

    Args:
        sources: The texts to measure.
        thread_id: The Thread, if the request names one.
        owner: Whose selected path is read.
        history: The request-history policy (a managed one looks up stored summaries).
        model: The generation's model (the default summary model).
        counter: The model's counter.
        ceiling: The strict input maximum bounding the skeleton.
        threads: The Thread store.
        summaries: Summary artifacts.
        store_counts: Persist newly computed message counts (the read activity) or not
            (`preview`, which writes nothing).
        cut: List only what the history policy can use (`False`: every group that could
            fit `ceiling`, for a step that may plan under another model or budget).
        read_ahead: `thread_skeleton` of `thread_id` with these same arguments, started
            earlier; used instead of reading the Thread here.
    """
    [turn_tokens, *rest] = content_tokens(
        counter, [sources.user, *([sources.system] if sources.system else [])]
    )
    context_counts = content_tokens(counter, [message for _, message in sources.contexts])
    measured = ReadRequestResult(
        history_source="none",
        system_tokens=rest[0] if rest else 0,
        current_turn_tokens=turn_tokens,
        counting_confidence=counter.confidence,
        encoding=counter.encoding_name,
        context_tokens={
            source_id: tokens
            for (source_id, _), tokens in zip(sources.contexts, context_counts, strict=True)
        },
        tool_schema_tokens=sum(
            counter.count_definition(spec.model_dump_json()) for spec in sources.tools
        ),
        output_schema_tokens=(
            counter.count_definition(json.dumps(sources.output_schema, sort_keys=True))
            if sources.output_schema is not None
            else 0
        ),
    )
    if sources.transcript is not None:
        transcript = list(sources.transcript)
        columns, older = caller_skeleton(counter, transcript, ceiling)
        summary = None
        if history.kind == "managed":
            # Named by content: a summary of an earlier call's transcript with the same
            # prefix (in this scope) is found just as a Thread's is.
            path = transcript_ids(transcript_scope(thread_id, owner), transcript)
            summary = await _stored_summary(
                summaries, SummaryScope.transcript(thread_id), path, history, model
            )
        if cut:
            columns, older = _cut(history, summary, columns, older, ceiling)
        return measured.model_copy(
            update={
                "history_source": "caller-messages",
                "history": columns,
                "older_history": older,
                "summary": summary,
            }
        )
    if thread_id is None:
        return measured
    if read_ahead is None:
        read_ahead = thread_skeleton(
            threads, counter, thread_id, owner=owner, ceiling=ceiling, store_counts=store_counts
        )
    skeleton = await read_ahead
    summary = None
    # Only managed history prepares summaries: its read keeps the path's ids (already
    # listed to find a stored summary) to name where the first plan's summaries end.
    path_ids: tuple[str, ...] = ()
    if history.kind == "managed":
        path_ids = tuple(entry.id for entry in skeleton.view.messages)
        summary = await _stored_summary(
            summaries, SummaryScope.thread(thread_id), path_ids, history, model
        )
    columns, older = skeleton.history, skeleton.older
    if cut:
        columns, older = _cut(history, summary, columns, older, ceiling)
    return measured.model_copy(
        update={
            "history_source": "thread",
            "summary": summary,
            "revision": skeleton.view.revision,
            "head": skeleton.view.head,
            "history": columns,
            "older_history": older,
            "counted_messages": skeleton.counted,
        }
    ).with_path(path_ids)


def _cut(
    history: HistorySpec,
    summary: HistorySummary | None,
    columns: HistoryColumns,
    older: HistoryAggregate,
    ceiling: int,
) -> tuple[HistoryColumns, HistoryAggregate]:
    """The skeleton's history as the policy can use it: the rest folded into the aggregate."""
    return cut_to_needs(history_policy(history, summary), columns, older, strict_max=ceiling)


async def _stored_summary(
    summaries: SummaryStore,
    scope: SummaryScope,
    path: Sequence[str],
    history: HistorySpec,
    model: str,
) -> HistorySummary | None:
    """The stored summary covering the longest prefix of `path`, as the planner sees it."""
    candidates = await summaries.candidates(
        scope, path, strategy=history.strategy, model=summary_model(history.summary_model, model)
    )
    found = longest_prefix_summary(path, candidates)
    return None if found is None else as_history_summary(found)


class RequestReader:
    """The read activity's side of `read_skeleton`: staging, identity, the worker's catalog.

    Args:
        threads: The canonical Thread store.
        generations: Staging and results.
        summaries: Summary artifacts.
        inputs: Stages the rendered user turn, system text and message arrays.
        assembler: Reads staged context sources.
        catalog: The worker's model profiles.
        tool_specs: Resolves tool names to their schemas.
        tool_policies: Resolves tool names to the policies declared with the tools.
        approval_tools: Picks, of the tool names, those declared as requiring approval.
    """

    def __init__(
        self,
        *,
        threads: ThreadStore,
        generations: GenerationStore,
        summaries: SummaryStore,
        inputs: InputStager,
        assembler: RequestAssembler,
        catalog: ModelCatalog,
        tool_specs: ToolSpecs,
        tool_policies: Callable[[Sequence[str]], dict[str, ToolPolicySpec]] | None = None,
        approval_tools: Callable[[Sequence[str]], list[str]] | None = None,
    ) -> None:
        self._threads = threads
        self._generations = generations
        self._summaries = summaries
        self._inputs = inputs
        self._assembler = assembler
        self._catalog = catalog
        self._tool_specs = tool_specs
        self._tool_policies = tool_policies
        self._approval_tools = approval_tools

    async def _check_owner(self, request: ReadRequestInput) -> None:
        """Refuse an owner that could never commit, before anything is staged or sent.

        Only `main` and registered open owners publish to a Thread; an unknown owner would
        otherwise pay for a provider call whose turn the commit then refuses.

        Raises:
            ThreadError: `invalid_message` for an unregistered or closed owner.
        """
        if request.thread_id is None or request.owner == MAIN_OWNER or request.messages_ref:
            return
        owners = await self._threads.owners(request.thread_id)
        if owners.get(request.owner) != "open":
            raise ThreadError(
                "invalid_message", "the owner is not registered open", thread_id=request.thread_id
            )

    async def read(self, request: ReadRequestInput) -> ReadRequestResult:
        """Stage the user turn, read one exact Thread revision and size everything."""
        await self._inputs.check_identity(request)
        read_ahead = self._read_ahead(request)
        try:
            return await self._read(request, read_ahead)
        finally:
            if read_ahead is not None:
                # Unless awaited already: not needed (a result was found, or the request was
                # refused first). Its failure, if any, was raised by the read or is moot.
                read_ahead.add_done_callback(_retrieved)
                read_ahead.cancel()

    def _read_ahead(self, request: ReadRequestInput) -> asyncio.Future[ThreadSkeleton] | None:
        """The Thread's skeleton, started beside the first lookups when it will be needed.

        A facade-staged turn on the main owner's path of a Thread, without a message array:
        whatever those lookups find, the Thread is read next unless a result already exists.
        """
        if (
            request.thread_id is None
            or request.input_ref != scoped_key(request)
            or request.messages_ref is not None
            or request.owner != MAIN_OWNER
        ):
            return None
        try:
            check_model(request.model, self._catalog)
        except Exception:
            return None  # refused below, before anything is read
        profile = self._catalog.resolve(request.model)
        return asyncio.ensure_future(
            thread_skeleton(
                self._threads,
                TokenCounter.for_encoding(profile.encoding),
                request.thread_id,
                owner=request.owner,
                ceiling=request_ceiling(request, profile),
                store_counts=True,
            )
        )

    async def _read(
        self, request: ReadRequestInput, read_ahead: asyncio.Future[ThreadSkeleton] | None
    ) -> ReadRequestResult:
        staged: tuple[Message, Message | None] | BaseException | None = None
        if request.input_ref == scoped_key(request):
            # The facade staged the turn under this generation: reading it only reads, so it
            # goes out beside the result lookup (and is dropped if that finds a result).
            found, staged = await asyncio.gather(
                self._generations.find_result(scoped_key(request)),
                self._inputs.stage(request),
                return_exceptions=True,
            )
            existing = settled(found)
        else:
            existing = await self._generations.find_result(scoped_key(request))
        if existing is not None:
            outcome = GenerationOutcome.of(replayed(existing))
            if request.include_reply:
                outcome = await with_reply(
                    outcome, existing, threads=self._threads, generations=self._generations
                )
            return ReadRequestResult(existing=outcome)
        # A model no provider of this worker serves fails here, naming the known ones,
        # instead of running (`offline:<anything>` would otherwise answer as echo).
        check_model(request.model, self._catalog)
        await self._check_owner(request)
        profile = self._catalog.resolve(request.model)
        ceiling = request_ceiling(request, profile)
        user, system = await self._inputs.stage(request) if staged is None else settled(staged)
        contexts = list(
            zip(
                request.context_source_ids,
                await self._assembler.context_messages(
                    scoped_key(request), request.context_source_ids
                ),
                strict=True,
            )
        )
        transcript = await self._inputs.transcript(request)
        if transcript is not None:
            _log_override(request, *transcript)
        elif request.thread_id is None and request.history.kind != "exact":
            # The receipt carries HISTORY_SOURCE_MISSING too; this is the operator's copy.
            _log.warning(
                "history.source.missing",
                generation_id=request.generation_id,
                policy=request.history.kind,
            )
        read = await read_skeleton(
            ReadSources(
                user=user,
                system=system,
                contexts=contexts,
                tools=self._tool_specs(request.tools),
                transcript=None if transcript is None else transcript[0],
                output_schema=request.output_schema,
            ),
            thread_id=request.thread_id,
            owner=request.owner,
            history=request.history,
            model=request.model,
            counter=TokenCounter.for_encoding(profile.encoding),
            ceiling=ceiling,
            threads=self._threads,
            summaries=self._summaries,
            store_counts=True,
            cut=not request.keep_listing,
            read_ahead=read_ahead,
        )
        policies = self._tool_policies(request.tools) if self._tool_policies else {}
        update: dict[str, object] = {"profile": profile, "tool_policies": policies}
        if self._approval_tools is not None:
            update["approval_tools"] = self._approval_tools(request.tools)
        return read.model_copy(update=update)


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a finished future's exception as seen (nothing to report twice)."""
    if not future.cancelled():
        future.exception()


def _log_override(
    request: ReadRequestInput, messages: list[Message], reason: OverrideReason
) -> None:
    if request.thread_id is None:
        return
    # Shadowing is deliberate but must be visible in every environment.
    _log.info(
        "thread.history.override",
        generation_id=request.generation_id,
        thread_id=request.thread_id,
        reason=reason,
        source="call-site" if reason == "explicit-messages" else "prompt",
        shadowed="thread",
        messages=len(messages),
    )


def request_ceiling(request: ReadRequestInput, profile: ModelProfile) -> int:
    """The skeleton's bound: from this worker's profile when the workflow asks for it."""
    if not request.derive_ceiling:
        return request.max_input_tokens
    spec = request.input_budget
    budget = None if spec is None else InputBudget(optimize_at=spec.optimize_at, max=spec.max)
    return derive_budget(profile, budget, output_reserve=request.max_output_tokens).max
