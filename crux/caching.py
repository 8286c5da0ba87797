"""`crux.cache(...)`: reuse the replies of earlier equal (or similar) requests.

`cache=` on a prompt, an agent or a call names the cache a generation uses; the most
specific one wins whole (a call's `cache=False` switches a prompt's or an agent's off).
A hit makes no provider call and still commits a fresh user and assistant pair; see the
cache how-to in the docs for what is cached, how entries are scoped and when they go.
"""

from __future__ import annotations

from contracts.cache import (
    DEFAULT_CACHE_MAX_ENTRIES,
    DEFAULT_CACHE_TTL_SECONDS,
    DEFAULT_EMBEDDING_MODEL,
    DEFAULT_SIMILARITY_THRESHOLD,
    CacheSpec,
    as_cache,
)

__all__ = ["CacheSpec", "cache"]


def cache(
    *,
    semantic: bool = False,
    similarity_threshold: float = DEFAULT_SIMILARITY_THRESHOLD,
    embedding_model: str = DEFAULT_EMBEDDING_MODEL,
    ttl_seconds: int = DEFAULT_CACHE_TTL_SECONDS,
    max_entries: int = DEFAULT_CACHE_MAX_ENTRIES,
    namespace: str | None = None,
    enabled: bool = True,
) -> CacheSpec:
    """Define how a generation uses the response cache.

    Every request is matched exactly first: the same model, settings, system text,
    tools, output schema, projected history (message ids and contents) and rendered user
    turn. With `semantic=True`, a request whose only difference is a similar user turn
    matches too.

    Args:
        semantic: Also match similar rendered user turns (embedding cosine similarity).
        similarity_threshold: The similarity a semantic match must reach, in (0, 1].
        embedding_model: `provider:model` of the embeddings: `offline:ngram-256` (default:
            deterministic, offline, lexical) or an OpenAI-compatible `openai:<model>`.
        ttl_seconds: How long an entry serves hits after it was written.
        max_entries: Entries kept per scope (the least recently used go first).
        namespace: Share entries across Threads (and ad-hoc generations) naming the same
            namespace (per prompt, model and owner); by default a Thread's entries serve
            that Thread only.
        enabled: `False` switches a less specific level's cache off.

    Raises:
        ConfigurationError: An invalid value (the message names the field).
    """
    spec = as_cache(
        {
            "enabled": enabled,
            "semantic": semantic,
            "similarity_threshold": similarity_threshold,
            "embedding_model": embedding_model,
            "ttl_seconds": ttl_seconds,
            "max_entries": max_entries,
            "namespace": namespace,
        }
    )
    assert spec is not None  # a mapping always gives a spec
    return spec
