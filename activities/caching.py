"""The response cache's activities: a lookup before dispatch, a write after the commit.

`lookup` answers a sealed plan from the cache or says it missed. It does what a provider
attempt does before the call (re-check the pinned revision, rebuild the request from
PostgreSQL), hashes the request (`contracts.cache_keys`) and looks in the generation's
scope: an exact match first, then (semantic) the most similar user turn among entries with
the same context key, embedded with the spec's embedding model. A hit stages the stored
reply as the attempt's output, exactly where a provider answer would be staged, so the
commit publishes it as a fresh user and assistant pair with this generation's own message
ids. A miss stages what the write will need (`cache-pending`: keys, scope, embedding).
Either way the plan's stored receipt gains the `cache` record (hit with its match and
similarity, or miss); the result that enters Temporal history holds figures only.

`write` runs after the commit (like success hooks) and stores the committed reply; the
store refuses to write for a generation without a recorded commit (see `storage.cache`).

What is cached: the final text reply of a turn that took no tool round, finished normally
(`stop`), and whose request was looked up and missed. Structured replies are cached under
their schema (part of the key) and validated again on a hit. Not cached: tool calls and
tool rounds (a tool's result may change between calls), truncated or filtered replies,
replies of an attempt answered from the cache, corrective attempts that were not looked up.

Concurrency: two equal requests in flight at once both miss (neither is committed yet),
both call the provider and both commit their own pair; the first write stores its reply
and the second is a no-op (`exists`), so later hits keep returning one stable reply.
"""

from __future__ import annotations

from temporalio import activity

from activities._assembly import RequestAssembler
from activities._inputs import scoped_key
from activities._output import reply_defects
from activities._pinning import plan_reads, refuse_if_sources_redacted
from activities._providers import ProviderRegistry
from activities._registries import PromptLookup, ToolLookup
from contracts.activities import InvokeModelInput, InvokeModelResult
from contracts.cache import CacheRecord, CacheScope, CacheSpec, check_similarity
from contracts.cache_activities import (
    LookupCacheInput,
    LookupCacheResult,
    WriteCacheInput,
    WriteCacheResult,
)
from contracts.cache_keys import CacheKeyParts, CacheKeys, cache_keys, semantic_text
from storage import CacheStore, GenerationStore, PendingEntry, ThreadStore
from telemetry.logs import get_logger
from vocabulary.ids import assistant_message_id, generation_key
from vocabulary.messages import Message
from vocabulary.staging import StagingKind

_log = get_logger(__name__)


class ResponseCache:
    """Looks sealed plans up in the cache and writes committed replies to it.

    Args:
        threads: The canonical Thread store (the pinned revision).
        generations: Generation staging.
        store: The cache's entries.
        providers: Model ids to clients (the embedding models).
        tools: The worker's tools (their schemas are part of the key).
        assembler: Rebuilds a sealed request's messages from PostgreSQL.
        prompts: The worker's prompts (a structured hit is validated like a reply).
    """

    def __init__(
        self,
        *,
        threads: ThreadStore,
        generations: GenerationStore,
        store: CacheStore,
        providers: ProviderRegistry,
        tools: ToolLookup,
        assembler: RequestAssembler,
        prompts: PromptLookup | None = None,
    ) -> None:
        self._threads = threads
        self._generations = generations
        self._store = store
        self._providers = providers
        self._tools = tools
        self._assembler = assembler
        self._prompts = prompts

    async def lookup(self, request: LookupCacheInput) -> LookupCacheResult:
        """Answer a sealed plan from the cache, or record the miss for the later write."""
        invoke = request.invoke
        if not request.cache.enabled or invoke.turn_messages:
            # A disabled spec, or a later step of a tool round: never looked up.
            return LookupCacheResult()
        key = scoped_key(invoke)
        repeated = await self._repeated(request, key)
        if repeated is not None:
            return repeated
        # The same reads an attempt makes, at once: the cache answers only what the plan
        # would send at the pinned revision.
        reads = await plan_reads(self._threads, self._assembler, invoke)
        planned = await reads.planned(self._assembler, invoke)
        if planned is None:
            _log.info(
                "cache.lookup.revision_moved",
                generation_id=invoke.generation_id,
                attempt=invoke.attempt,
            )
            return LookupCacheResult(revision_moved=True)
        sources, assembled = planned.sources, planned.assembled
        keys = cache_keys(
            CacheKeyParts(
                model=invoke.model,
                settings=invoke.settings.model_dump(mode="json") if invoke.settings else None,
                max_output_tokens=invoke.max_output_tokens,
                leading=assembled.leading,
                history=assembled.history,
                turn=assembled.user,
                tools=[t.spec.model_dump(mode="json") for t in self._tools.require(invoke.tools)],
                tool_choice=invoke.tool_choice if invoke.tools else None,
                output_schema=invoke.output_schema,
            )
        )
        scope = request.cache.scope(
            prompt_id=request.prompt_id,
            model=invoke.model,
            thread_id=invoke.thread_id,
            owner=invoke.owner,
        )
        return await self._answer(request, key, scope, keys, assembled.user, sources)

    async def write(self, request: WriteCacheInput) -> WriteCacheResult:
        """Store the committed reply of a generation whose accepted attempt missed."""
        if not request.cache.enabled:
            return WriteCacheResult(outcome="disabled")
        result = await self._store.write(
            generation_key=generation_key(request.generation_id, request.thread_id),
            thread_id=request.thread_id,
            accepted_attempt=request.accepted_attempt,
            ttl_seconds=request.cache.ttl_seconds,
            max_entries=request.cache.max_entries,
        )
        _log.info(
            "cache.write.completed",
            generation_id=request.generation_id,
            outcome=result.outcome,
            evicted=result.evicted,
        )
        return result

    async def _answer(
        self,
        request: LookupCacheInput,
        key: str,
        scope: CacheScope,
        keys: CacheKeys,
        turn: Message,
        sources: list[str],
    ) -> LookupCacheResult:
        """Look in the scope; stage a hit's reply, or the miss's pending entry."""
        invoke, spec = request.invoke, request.cache
        record = CacheRecord(status="miss")
        embedding: tuple[float, ...] | None = None
        found = await self._store.find_exact(scope, keys.exact)
        if found is not None and self._valid(invoke, found[1]):
            record = CacheRecord(status="hit", match="exact", similarity=1.0, entry_id=found[0])
        elif spec.semantic and (text := semantic_text(turn)) is not None:
            embedding = await self._embed(spec, text)
            match = await self._store.find_similar(
                scope, keys.context, spec.embedding_model, embedding
            )
            if match is not None:
                similarity = check_similarity(match.similarity)
                reply = (
                    await self._store.reply(match.entry_id)
                    if similarity >= spec.similarity_threshold
                    else None
                )
                hit = reply is not None and self._valid(invoke, reply)
                record = CacheRecord(
                    status="hit" if hit else "miss",
                    match="semantic" if hit else None,
                    similarity=similarity,
                    entry_id=match.entry_id if hit else None,
                    candidates=match.candidates,
                )
        if record.status == "hit" and record.entry_id is not None:
            staged = await self._store.use(
                record.entry_id,
                generation_key=key,
                attempt=invoke.attempt,
                thread_id=invoke.thread_id,
                output_id=assistant_message_id(invoke.generation_id),
                sources=sources,
                request_id=request.request_id,
                record=record.model_dump(mode="json"),
            )
            if staged is not None:
                await refuse_if_sources_redacted(self._threads, self._generations, invoke, sources)
                if invoke.stream:
                    await self._stream_reply(invoke, key, sources)
                self._logged(invoke, record)
                return LookupCacheResult(
                    hit=True, record=record, attempt=staged, reply_tokens=staged.output_tokens
                )
            # Evicted or erased between the lookup and its use: a miss after all.
            record = record.model_copy(update={"status": "miss", "match": None, "entry_id": None})
        pending = PendingEntry(
            scope=scope,
            exact_key=keys.exact,
            context_key=keys.context,
            embedding_model=spec.embedding_model if embedding is not None else None,
            embedding=embedding,
        )
        await self._store.record_miss(
            pending,
            generation_key=key,
            attempt=invoke.attempt,
            thread_id=invoke.thread_id,
            sources=sources,
            request_id=request.request_id,
            record=record.model_dump(mode="json"),
        )
        self._logged(invoke, record)
        return LookupCacheResult(record=record)

    async def _repeated(self, request: LookupCacheInput, key: str) -> LookupCacheResult | None:
        """The outcome of this very lookup when a retry repeats it after a lost completion."""
        invoke = request.invoke
        staged = await self._generations.get_staged(key, invoke.attempt, StagingKind.OUTPUT)
        if staged is None or staged.info is None:
            return None
        stored = await self._store.receipt_record(request.request_id, key)
        record = CacheRecord.model_validate(stored) if stored is not None else None
        if record is None or record.status != "hit":
            return None
        await refuse_if_sources_redacted(
            self._threads, self._generations, invoke, staged.source_message_ids
        )
        attempt = InvokeModelResult.model_validate({**staged.info, "reused_staged_output": True})
        return LookupCacheResult(
            hit=True, record=record, attempt=attempt, reply_tokens=attempt.output_tokens
        )

    async def _stream_reply(self, invoke: InvokeModelInput, key: str, sources: list[str]) -> None:
        """Deliver a reused reply to stream followers as one delta, as a provider would."""
        staged = await self._generations.get_staged(key, invoke.attempt, StagingKind.OUTPUT)
        if staged is None or not staged.message.text:
            return
        await self._generations.stage_delta(
            key,
            f"{invoke.attempt:03d}:{activity.info().attempt:03d}:000000",
            staged.message.text,
            thread_id=invoke.thread_id,
            source_message_ids=sources,
        )

    async def _embed(self, spec: CacheSpec, text: str) -> tuple[float, ...]:
        embedder, name = self._providers.resolve_embedder(spec.embedding_model)
        embeddings = await embedder.embed(name, [text])
        return embeddings.vectors[0]

    def _valid(self, invoke: InvokeModelInput, reply: Message) -> bool:
        """A stored structured reply still satisfies the schema and the worker's model."""
        return not reply_defects(invoke, reply.text, self._prompts)

    @staticmethod
    def _logged(invoke: InvokeModelInput, record: CacheRecord) -> None:
        _log.info(
            "cache.lookup.completed",
            generation_id=invoke.generation_id,
            attempt=invoke.attempt,
            model=invoke.model,
            status=record.status,
            match=record.match,
            similarity=record.similarity,
            candidates=record.candidates,
        )
