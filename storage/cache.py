"""The response cache's entries in PostgreSQL (`crux_cache_entries`).

An entry is the reply of a committed turn, stored under its scope (partition, prompt,
model, owner), its exact key and its context key (`contracts.cache_keys`), with the
embedding of its user turn when the generation asked for semantic matching. Every
statement of a lookup names one scope: no entry is ever read across scopes.

- **Lookups** find an exact match by key, else (semantic) the most similar user turn among
  entries with the same context key: through pgvector's HNSW index of the embedding's size
  where the migration could create one, else by scanning the newest `scan_limit` entries of
  the scope (the dot product of unit vectors, in SQL).
- **A hit** is used in one transaction that renews the entry, stages its reply as the
  attempt's output and marks the plan's receipt; the entry's row lock orders it with a
  redaction deleting the entry, so a reply is either staged before the redaction or not
  at all.
- **A miss** stages what the write needs (`cache-pending`, beside the generation's other
  staged rows: redaction, deletion, discard and the sweep reach it like them).
- **The write** runs after the commit, in one transaction that holds the Thread's control
  row (shared, so a redaction or deletion waits or went first), checks the generation's
  ledger row (no ledger row: the turn is not committed, nothing is written), reads the
  committed reply, inserts the entry (a second write of the same generation or of an equal
  request is a no-op: the first write wins), drops the pending rows and evicts what the
  scope's TTL and size limit no longer allow.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import asyncpg

from contracts.activities import InvokeModelResult
from contracts.cache import CacheScope
from contracts.cache_activities import WriteCacheResult
from contracts.generation import GenerationResult, Usage
from storage import _cache_sql as sql
from storage._failures import storage_errors
from storage._staging_sql import STAGE
from vocabulary.messages import Message
from vocabulary.staging import StagingKind

__all__ = [
    "DEFAULT_SCAN_LIMIT",
    "CacheMatch",
    "CacheStore",
    "PendingEntry",
    "ScopeStats",
    "cache_entry_id",
]

DEFAULT_SCAN_LIMIT = 1_000
"""Entries of one scope and context a semantic lookup compares without an HNSW index."""
HNSW_CANDIDATES = 4
"""Nearest entries an HNSW lookup fetches (its relaxed order may swap close neighbours)."""


def cache_entry_id(generation_key: str) -> str:
    """The opaque id of the entry a generation writes (it names no Thread or generation)."""
    return "ce_" + hashlib.sha256(generation_key.encode()).hexdigest()[:32]


def _deleted(status: str) -> int:
    return int(status.rsplit(" ", 1)[-1])


def _scope_args(scope: CacheScope) -> tuple[str, str, str, str]:
    return scope.partition, scope.prompt_id, scope.model, scope.owner


@dataclass(frozen=True)
class CacheMatch:
    """A candidate entry of a lookup.

    Attributes:
        entry_id: The entry.
        similarity: Cosine similarity of the user turns (1.0 for an exact match).
        candidates: Entries a semantic lookup compared (0 for an exact match).
    """

    entry_id: str
    similarity: float
    candidates: int = 0


@dataclass(frozen=True)
class PendingEntry:
    """What a miss leaves for the write after the commit (keys, scope, embedding; no text).

    Attributes:
        scope: Where the entry will live.
        exact_key: The request's exact key.
        context_key: Its context key.
        embedding_model: The embedding model (`None` without semantic matching).
        embedding: The user turn's unit vector (`None` without semantic matching).
    """

    scope: CacheScope
    exact_key: str
    context_key: str
    embedding_model: str | None = None
    embedding: tuple[float, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """The staged row's `info`."""
        return {
            "scope": self.scope.model_dump(mode="json"),
            "exact_key": self.exact_key,
            "context_key": self.context_key,
            "embedding_model": self.embedding_model,
            "embedding": list(self.embedding) if self.embedding is not None else None,
        }

    @classmethod
    def from_json(cls, info: dict[str, Any]) -> PendingEntry:
        """Read a staged row's `info` back."""
        embedding = info.get("embedding")
        return cls(
            scope=CacheScope.model_validate(info["scope"]),
            exact_key=info["exact_key"],
            context_key=info["context_key"],
            embedding_model=info.get("embedding_model"),
            embedding=tuple(float(x) for x in embedding) if embedding is not None else None,
        )


@dataclass(frozen=True)
class ScopeStats:
    """Content-free figures of one scope (`crux cache stats`)."""

    partition: str
    prompt_id: str
    model: str
    owner: str
    entries: int
    expired: int
    embedded: int
    hits: int
    oldest: datetime | None
    newest: datetime | None
    last_hit: datetime | None


class CacheStore:
    """Reads and writes the response cache.

    Args:
        pool: The asyncpg pool (created with `storage.create_pool`).
        vector: Use pgvector's HNSW indexes (`None`: wherever the migration created one;
            `False`: always scan, as on a server without pgvector).
        scan_limit: Entries a scanning semantic lookup compares at most.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        *,
        vector: bool | None = None,
        scan_limit: int = DEFAULT_SCAN_LIMIT,
    ) -> None:
        self._pool: Any = pool
        self._vector = vector
        self._scan_limit = scan_limit
        self._sizes: frozenset[int] | None = None if vector is not False else frozenset()

    @storage_errors()
    async def indexed_sizes(self) -> frozenset[int]:
        """Embedding sizes with an HNSW index (empty without pgvector); read once."""
        if self._sizes is None:
            names = await self._pool.fetch(sql.INDEXED_SIZES)
            self._sizes = frozenset(int(row["indexname"].rsplit("_", 1)[-1]) for row in names)
        return self._sizes

    @storage_errors()
    async def find_exact(self, scope: CacheScope, exact_key: str) -> tuple[str, Message] | None:
        """The live entry of `scope` with `exact_key`: its id and reply."""
        row = await self._pool.fetchrow(sql.FIND_EXACT, *_scope_args(scope), exact_key)
        if row is None:
            return None
        return row["entry_id"], Message.model_validate(row["reply"])

    @storage_errors()
    async def find_similar(
        self,
        scope: CacheScope,
        context_key: str,
        embedding_model: str,
        vector: Sequence[float],
    ) -> CacheMatch | None:
        """The live entry of `scope` and `context_key` whose user turn is the most similar."""
        size = len(vector)
        if size in await self.indexed_sizes():
            literal = "[" + ",".join(repr(float(x)) for x in vector) + "]"
            async with self._pool.acquire() as connection, connection.transaction():
                await connection.execute(sql.ITERATIVE_SCAN)
                rows = await connection.fetch(
                    sql.hnsw_similar(size),
                    *_scope_args(scope),
                    context_key,
                    embedding_model,
                    literal,
                    HNSW_CANDIDATES,
                )
            if not rows:
                return None
            best = max(rows, key=lambda row: float(row["similarity"]))
            return CacheMatch(best["entry_id"], float(best["similarity"]), len(rows))
        row = await self._pool.fetchrow(
            sql.SCAN_SIMILAR,
            *_scope_args(scope),
            context_key,
            embedding_model,
            size,
            self._scan_limit,
            [float(x) for x in vector],
        )
        if row is None or row["similarity"] is None:
            return None
        return CacheMatch(row["entry_id"], float(row["similarity"]), int(row["candidates"]))

    @storage_errors()
    async def reply(self, entry_id: str) -> Message | None:
        """A live entry's reply."""
        row = await self._pool.fetchrow(
            "SELECT reply FROM crux_cache_entries WHERE entry_id = $1 AND " + sql.LIVE, entry_id
        )
        return None if row is None else Message.model_validate(row["reply"])

    @storage_errors()
    async def use(
        self,
        entry_id: str,
        *,
        generation_key: str,
        attempt: int,
        thread_id: str | None,
        output_id: str,
        sources: Sequence[str],
        request_id: str,
        record: dict[str, Any],
    ) -> InvokeModelResult | None:
        """Stage an entry's reply as an attempt's output and mark the plan's receipt.

        One transaction: the entry is renewed (hit count, last hit) under its row lock, so
        a redaction deleting it meanwhile either waits for this staging or makes it miss.

        Returns:
            The attempt's result (no usage: no provider call), `None` when the entry is gone
            or expired.
        """
        async with self._pool.acquire() as connection, connection.transaction():
            row = await connection.fetchrow(sql.USE_ENTRY, entry_id)
            if row is None:
                return None
            await connection.execute(sql.DROP_ATTEMPT_PENDING, generation_key, attempt)
            reply = Message.model_validate({**row["reply"], "id": output_id})
            result = InvokeModelResult(
                usage=Usage(), finish_reason="stop", output_tokens=int(row["output_tokens"])
            )
            await connection.execute(
                STAGE,
                generation_key,
                attempt,
                StagingKind.OUTPUT.value,
                thread_id,
                reply.model_dump(mode="json"),
                list(sources),
                result.model_dump(mode="json"),
            )
            await connection.execute(sql.SET_RECEIPT_CACHE, request_id, generation_key, record)
        return result

    @storage_errors()
    async def record_miss(
        self,
        pending: PendingEntry,
        *,
        generation_key: str,
        attempt: int,
        thread_id: str | None,
        sources: Sequence[str],
        request_id: str,
        record: dict[str, Any],
    ) -> None:
        """Stage what the write after the commit needs, and mark the plan's receipt.

        `sources` are the Thread messages the request was built from: redacting one of them
        before the write removes the pending row, and the write then stores nothing.
        """
        async with self._pool.acquire() as connection, connection.transaction():
            await connection.execute(sql.DROP_ATTEMPT_PENDING, generation_key, attempt)
            await connection.execute(
                STAGE,
                generation_key,
                attempt,
                StagingKind.CACHE_PENDING.value,
                thread_id,
                {"role": "system", "content": ""},
                list(sources),
                pending.to_json(),
            )
            await connection.execute(sql.SET_RECEIPT_CACHE, request_id, generation_key, record)

    @storage_errors()
    async def receipt_record(self, request_id: str, generation_key: str) -> dict[str, Any] | None:
        """The cache record stored on a plan's receipt (for a retried lookup)."""
        value: Any = await self._pool.fetchval(sql.GET_RECEIPT_CACHE, request_id, generation_key)
        return cast(dict[str, Any], value) if isinstance(value, dict) else None

    @storage_errors()
    async def write(
        self,
        *,
        generation_key: str,
        thread_id: str | None,
        accepted_attempt: int,
        ttl_seconds: int,
        max_entries: int,
    ) -> WriteCacheResult:
        """Store a committed turn's reply (see the module docstring for the rules).

        Idempotent: the entry is keyed by the generation, and an equal request's entry in
        the scope is kept (the first write wins).
        """
        async with self._pool.acquire() as connection, connection.transaction():
            if thread_id is not None:
                state = await connection.fetchval(sql.LOCK_THREAD, thread_id)
                if state is not None and state != "live":
                    return WriteCacheResult(outcome="erased")
            stored = await connection.fetchval(sql.GET_LEDGER, generation_key)
            if stored is None:
                return WriteCacheResult(outcome="uncommitted")
            result = GenerationResult.model_validate(stored)
            pending_row = await connection.fetchrow(
                sql.GET_PENDING, generation_key, accepted_attempt
            )
            if pending_row is None:
                return WriteCacheResult(outcome="not-looked-up")
            pending = PendingEntry.from_json(pending_row["info"])
            sources = list(pending_row["source_message_ids"] or ())
            reply = await _committed_reply(connection, generation_key, result)
            commit = result.thread_commit
            built_from = [*sources, *(commit.message_ids if commit is not None else ())]
            if thread_id is not None and await connection.fetchval(
                sql.ANY_REDACTED, thread_id, built_from
            ):
                reply = None  # redacted since the miss: nothing derived from it is kept
            step = next((s for s in result.steps if s.attempt == accepted_attempt), None)
            outcome: WriteCacheResult | None = None
            if reply is None:
                outcome = WriteCacheResult(outcome="erased")
            elif (
                step is None
                or step.finish_reason != "stop"
                or reply.tool_calls
                or (commit is not None and len(commit.message_ids) != 2)
            ):
                outcome = WriteCacheResult(outcome="not-cacheable")
            if outcome is not None or reply is None or step is None:
                await connection.execute(sql.DROP_PENDING, generation_key)
                return outcome or WriteCacheResult(outcome="not-cacheable")
            scope = _scope_args(pending.scope)
            evicted = _deleted(await connection.execute(sql.DROP_EXPIRED, *scope))
            embedding = pending.embedding
            inserted = await connection.fetchval(
                sql.INSERT_ENTRY,
                cache_entry_id(generation_key),
                generation_key,
                *scope,
                pending.exact_key,
                pending.context_key,
                pending.embedding_model if embedding is not None else None,
                len(embedding) if embedding is not None else None,
                list(embedding) if embedding is not None else None,
                reply.model_dump(mode="json", exclude={"id"}),
                step.output_tokens,
                step.usage.model_dump(mode="json"),
                thread_id,
                built_from,
                float(ttl_seconds),
            )
            await connection.execute(sql.DROP_PENDING, generation_key)
            if inserted is None:
                existing = await connection.fetchval(
                    sql.FIND_EQUAL, *scope, pending.exact_key, generation_key
                )
                return WriteCacheResult(outcome="exists", entry_id=existing, evicted=evicted)
            evicted += _deleted(await connection.execute(sql.EVICT_OVER_LIMIT, *scope, max_entries))
            return WriteCacheResult(outcome="written", entry_id=inserted, evicted=evicted)

    @storage_errors()
    async def stats(
        self,
        *,
        partition: str | None = None,
        prompt_id: str | None = None,
        thread_id: str | None = None,
        model: str | None = None,
    ) -> list[ScopeStats]:
        """Per-scope figures, optionally of one partition, prompt, source Thread or model."""
        rows = await self._pool.fetch(sql.STATS, partition, prompt_id, thread_id, model)
        return [
            ScopeStats(
                partition=row["partition"],
                prompt_id=row["prompt_id"],
                model=row["model"],
                owner=row["owner"],
                entries=int(row["entries"]),
                expired=int(row["expired"]),
                embedded=int(row["embedded"]),
                hits=int(row["hits"]),
                oldest=row["oldest"],
                newest=row["newest"],
                last_hit=row["last_hit"],
            )
            for row in rows
        ]

    @storage_errors()
    async def clear(
        self,
        *,
        partition: str | None = None,
        prompt_id: str | None = None,
        thread_id: str | None = None,
        model: str | None = None,
        expired_only: bool = False,
    ) -> int:
        """Delete the entries matching every filter given (all entries without filters).

        Returns:
            How many entries were deleted.
        """
        status = await self._pool.execute(
            sql.CLEAR, partition, prompt_id, thread_id, model, expired_only
        )
        return _deleted(status)


async def _committed_reply(
    connection: Any, generation_key: str, result: GenerationResult
) -> Message | None:
    """The reply the commit published: the Thread's message, or an ad-hoc `final` row."""
    commit = result.thread_commit
    if commit is not None and result.thread_id is not None:
        row = await connection.fetchrow(
            sql.GET_THREAD_REPLY, result.thread_id, result.output_message_id
        )
        if row is None or row["state"] != "live" or row["body"] is None:
            return None
        return Message.model_validate({**row["body"], "id": result.output_message_id})
    message: Any = await connection.fetchval(sql.GET_FINAL, generation_key)
    return None if message is None else Message.model_validate(message)
