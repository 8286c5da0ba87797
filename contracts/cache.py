"""The response cache's configuration as it crosses Temporal: spec and scope.

`CacheSpec` is what `cache=crux.cache(...)` puts into a generation's input (on a prompt, an
agent or a call; the most specific wins, never merged). Specs are configuration and carry
no text. The activities' payloads are in `contracts.cache_activities`, the keys in
`contracts.cache_keys`.

Scoping. An entry is stored under a `CacheScope` (partition, prompt id, model, owner) and a
lookup only ever reads its own scope. The partition is the generation's Thread
(`thread:<id>`), the ad-hoc partition (`adhoc`) for generations without one, or, when the
spec names a `namespace`, `namespace:<name>` (entries then serve every Thread and ad-hoc
generation that names it, still per prompt, model and owner).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from contracts.settings import describe_fields
from planner import CacheRecord
from vocabulary.commits import WireModel
from vocabulary.errors import ConfigurationError
from vocabulary.ids import MAX_MODEL_ID_LENGTH, check_model_id, check_wire_id

__all__ = [
    "ADHOC_PARTITION",
    "DEFAULT_CACHE_MAX_ENTRIES",
    "DEFAULT_CACHE_TTL_SECONDS",
    "DEFAULT_EMBEDDING_MODEL",
    "DEFAULT_SIMILARITY_THRESHOLD",
    "CacheRecord",
    "CacheScope",
    "CacheSpec",
    "as_cache",
    "check_similarity",
]

DEFAULT_SIMILARITY_THRESHOLD = 0.95
"""Cosine similarity a semantic match must reach (exact matches need none)."""
DEFAULT_EMBEDDING_MODEL = "offline:ngram-256"
"""The offline, deterministic embedding: hashed words and character trigrams (lexical
similarity, no network). Name an OpenAI-compatible model (`openai:<model>`) for meaning."""
DEFAULT_CACHE_TTL_SECONDS = 7 * 86_400
"""How long an entry serves hits after it was written."""
DEFAULT_CACHE_MAX_ENTRIES = 10_000
"""Entries kept per scope; the least recently used go first."""
MAX_NAMESPACE_LENGTH = 128
"""Characters of a cache namespace."""
ADHOC_PARTITION = "adhoc"
"""The partition of generations without a Thread and without a namespace."""


class CacheSpec(WireModel):
    """How a generation uses the response cache (`crux.cache(...)`).

    Attributes:
        enabled: `False` switches a prompt's or an agent's cache off for a call.
        semantic: Also match rendered user turns that are similar rather than equal
            (everything else in the request must still be equal).
        similarity_threshold: Cosine similarity a semantic match must reach, in (0, 1].
        embedding_model: `provider:model` of the embeddings (`offline:ngram-256`, or an
            OpenAI-compatible `openai:<model>` served at `OPENAI_BASE_URL/embeddings`).
        ttl_seconds: How long an entry serves hits after it was written.
        max_entries: Entries kept per scope; writing past it evicts the least recently
            used (hit or written).
        namespace: Share entries across Threads (and ad-hoc generations) that name the
            same namespace, per prompt, model and owner; `None` keeps a Thread's entries
            to that Thread.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", revalidate_instances="always")

    enabled: bool = True
    semantic: bool = False
    similarity_threshold: float = Field(
        default=DEFAULT_SIMILARITY_THRESHOLD, gt=0, le=1, allow_inf_nan=False
    )
    embedding_model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL, min_length=3, max_length=MAX_MODEL_ID_LENGTH
    )
    ttl_seconds: int = Field(
        default=DEFAULT_CACHE_TTL_SECONDS, ge=1, le=10 * 365 * 86_400, strict=True
    )
    max_entries: int = Field(default=DEFAULT_CACHE_MAX_ENTRIES, ge=1, le=10_000_000, strict=True)
    namespace: str | None = Field(default=None, min_length=1, max_length=MAX_NAMESPACE_LENGTH)

    @field_validator("embedding_model")
    @classmethod
    def _embedding_model(cls, value: str) -> str:
        return check_model_id(value)

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return check_wire_id(value, "namespace", limit=MAX_NAMESPACE_LENGTH)

    def scope(self, *, prompt_id: str, model: str, thread_id: str | None, owner: str) -> CacheScope:
        """The scope a generation's entries are stored and looked up in."""
        if self.namespace is not None:
            partition = f"namespace:{self.namespace}"
        elif thread_id is not None:
            partition = f"thread:{thread_id}"
        else:
            partition = ADHOC_PARTITION
        return CacheScope(partition=partition, prompt_id=prompt_id, model=model, owner=owner)


def as_cache(value: CacheSpec | Mapping[str, Any] | bool | None) -> CacheSpec | None:
    """Validate a `cache=` option: a spec, a mapping of its fields, `True` or `False`.

    `True` is the default spec; `False` a disabled one (it switches a prompt's or an
    agent's cache off for one call); `None` leaves the choice to the less specific level.

    Raises:
        ConfigurationError: An unknown field or an invalid value (fields named, values not).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return CacheSpec(enabled=value)
    if isinstance(value, CacheSpec):
        return value
    if not isinstance(value, Mapping):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise ConfigurationError("cache must be crux.cache(...), a mapping, True or False")
    try:
        return CacheSpec.model_validate(dict(value))
    except ValidationError as error:
        raise ConfigurationError(f"invalid cache: {describe_fields(error)}") from None


class CacheScope(WireModel):
    """Where an entry lives; a lookup reads exactly one scope.

    Attributes:
        partition: `thread:<id>`, `namespace:<name>` or `adhoc`.
        prompt_id: The generation's prompt.
        model: The response model (`provider:model`).
        owner: The Thread owner whose head the generation reads and advances.
    """

    partition: str
    prompt_id: str
    model: str
    owner: str


def check_similarity(value: float) -> float:
    """A similarity rounded for receipts (six decimals, within [-1, 1])."""
    if math.isnan(value):
        return 0.0
    return round(max(-1.0, min(1.0, value)), 6)
