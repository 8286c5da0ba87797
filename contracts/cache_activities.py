"""The response cache's activity payloads: content-free inputs and results.

The worker's two cache activities (`stubs.lookup_cache`, `stubs.write_cache`) take and
return the models below; none of them carries a message, a reply or an embedding: the
lookup stages a hit's reply as the attempt's output (the commit publishes it like any
provider answer) and keeps what a later write needs in PostgreSQL beside the generation.

Where the lookup and the write go in a generation (the workflow's part):

- **lookup**, after the plan is sealed and recorded, before its dispatch, for the first
  provider step of the turn only (`turn_messages == 0`): `stubs.lookup_cache` with the same
  `InvokeModelInput` the dispatch would send and the plan's request id. The activity
  re-checks the pinned revision first: `revision_moved` is handled exactly like
  `InvokeModelResult.revision_moved` (re-plan, or `ThreadError("identity_conflict")` under
  `on_revision_moved="fail"`). On a hit, `result.attempt` stands for the provider
  attempt's result (no provider call, zero usage) and its output is staged under the
  attempt, so the commit publishes a fresh user and assistant pair with the generation's own
  message ids; the stored receipt of the plan carries `cache: hit` with the match and the
  similarity. A miss dispatches as usual. A lookup that fails (the embedding endpoint is
  down, say) is best treated as a miss: the cache is never required.
- **write**, after `commit_turn` returned, like success hooks: `stubs.write_cache` with the
  generation's ids and the accepted attempt. The activity writes nothing unless the commit
  is recorded (checked in the write's own transaction), the accepted attempt was looked up
  and missed, the turn took no tool round and the reply finished normally.
"""

from __future__ import annotations

from typing import Literal

from contracts._compact import CompactWireModel
from contracts.activities import InvokeModelInput, InvokeModelResult
from contracts.cache import CacheSpec
from planner import CacheRecord

__all__ = [
    "ACTIVITY_LOOKUP_CACHE",
    "ACTIVITY_WRITE_CACHE",
    "LookupCacheInput",
    "LookupCacheResult",
    "WriteCacheInput",
    "WriteCacheResult",
    "WriteOutcome",
]

# Persisted in histories, like every activity name.
ACTIVITY_LOOKUP_CACHE = "crux.lookup_cache"
ACTIVITY_WRITE_CACHE = "crux.write_cache"


class LookupCacheInput(CompactWireModel):
    """Look a sealed plan up in the cache before it is dispatched.

    Attributes:
        invoke: The input the dispatch would send (ids, positions, model, settings).
        request_id: The sealed plan's recorded receipt (it gains the `cache` record).
        prompt_id: The generation's prompt (part of the scope).
        cache: The generation's cache spec.
    """

    invoke: InvokeModelInput
    request_id: str
    prompt_id: str
    cache: CacheSpec


class LookupCacheResult(CompactWireModel):
    """What the workflow learns from a lookup: hit or miss, figures, never text.

    Attributes:
        hit: A stored reply was staged as this attempt's output.
        revision_moved: The Thread moved since the read: nothing was looked up or staged
            (re-plan, or fail under `on_revision_moved="fail"`).
        record: The receipt's cache record (status, match, similarity, entry id).
        attempt: On a hit, the attempt's result as if the provider had answered (zero
            usage, the stored reply's output tokens).
        reply_tokens: On a hit, the tokens of the reused reply.
    """

    hit: bool = False
    revision_moved: bool = False
    record: CacheRecord | None = None
    attempt: InvokeModelResult | None = None
    reply_tokens: int = 0


WriteOutcome = Literal[
    "written", "exists", "uncommitted", "not-looked-up", "not-cacheable", "erased", "disabled"
]
"""What a write did: stored the reply; found an equal entry (first write wins); found no
recorded commit; found no miss recorded for the attempt (a hit, or no lookup); found a reply
the cache does not keep (tool round, tool calls, truncated); found the Thread or the reply
erased; or the spec is disabled."""


class WriteCacheInput(CompactWireModel):
    """Store a committed turn's reply in the cache (after the commit succeeded).

    Attributes:
        generation_id: The generation (its caller id).
        thread_id: Its Thread (`None` ad hoc).
        accepted_attempt: The attempt the commit published.
        cache: The generation's cache spec (TTL and size limit).
    """

    generation_id: str
    thread_id: str | None = None
    accepted_attempt: int
    cache: CacheSpec


class WriteCacheResult(CompactWireModel):
    """What a write did (content-free).

    Attributes:
        outcome: See `WriteOutcome`.
        entry_id: The entry written or found.
        evicted: Entries removed from the scope to honour its TTL and size limit.
    """

    outcome: WriteOutcome
    entry_id: str | None = None
    evicted: int = 0
